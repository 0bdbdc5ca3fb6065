"""One memory cap for all of a kernel's processes together, where the machine allows it: a control
group of its own (Linux).

launch.py caps each process's address space (RLIMIT_AS); a kernel that starts four processes holds
four times that. A control group counts them together: every process the kernel starts stays in it,
and past its limit the system's out-of-memory killer kills in it, nothing outside. ``Group(name,
limit_mb)`` makes one under the grader's own group, in the memory controller's hierarchy:

- cgroup v1 (a ``memory`` hierarchy of its own, /sys/fs/cgroup/memory): memory.limit_in_bytes, and
  memory.memsw.limit_in_bytes where swap is counted, so that swap is no way around it;
- cgroup v2 (the unified hierarchy, with the memory controller enabled for the grader's group's
  children, as a service manager delegates it): memory.max, and memory.swap.max 0.

Where neither is there or writable (not root, a container without its control groups, macOS),
``Group`` is ``None`` and only the per-process caps hold; the README says so. A kernel joins its
group before it starts (``join``, run in the new process before exec: a write of its pid and
nothing else, safe after fork), and ``remove`` deletes the group once the kernel is dead.
"""

import contextlib
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own(line_prefix):
    """The grader's own group in a hierarchy of /proc/self/cgroup ("4:memory:/a/b" -> "/a/b")."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if line_prefix(number, controllers):
            return path
    return None


def _hierarchy():
    """(version, the folder the new groups go under) of the memory controller, or None."""
    v1 = _own(lambda number, controllers: "memory" in controllers.split(","))
    if v1 is not None and (ROOT / "memory").is_dir():
        return 1, ROOT / "memory" / v1.lstrip("/")
    v2 = _own(lambda number, controllers: number == "0" and controllers == "")
    if v2 is not None:
        for mount in (ROOT, ROOT / "unified"):
            parent = mount / v2.lstrip("/")
            with contextlib.suppress(OSError):
                if "memory" in (parent / "cgroup.subtree_control").read_text().split():
                    return 2, parent
    return None


class Group:
    """A control group capping the memory of the processes that join it."""

    def __new__(cls, name, limit_mb):
        """The group, or None where the machine allows none (see the module's docstring)."""
        found = _hierarchy() if limit_mb > 0 else None
        if found is None:
            return None
        version, parent = found
        group = super().__new__(cls)
        group.version, group.path = version, parent / name
        try:
            group.path.mkdir()
            limit = str(int(limit_mb) * 2**20)
            if version == 1:
                (group.path / "memory.limit_in_bytes").write_text(limit)
                with contextlib.suppress(OSError):  # only where the kernel counts swap
                    (group.path / "memory.memsw.limit_in_bytes").write_text(limit)
            else:
                (group.path / "memory.max").write_text(limit)
                with contextlib.suppress(OSError):
                    (group.path / "memory.swap.max").write_text("0")
        except OSError:
            group.remove()
            return None
        group.procs = str(group.path / "cgroup.procs").encode()
        return group

    def join(self):
        """Move the calling process into the group (a preexec_fn: os calls only, no lock taken)."""
        handle = os.open(self.procs, os.O_WRONLY)
        try:
            os.write(handle, str(os.getpid()).encode())
        finally:
            os.close(handle)

    def remove(self, wait=5.0):
        """Delete the group, once its processes are gone: a killed sandbox's take a moment to die
        after bwrap, and a group that holds one cannot be removed (tried for `wait` seconds)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)


def sweep(alive):
    """Delete the groups of graders that are gone (killed: nothing removed them), named by their pid
    (``course-grade-<pid>-...``); `alive(pid)` tells a running one."""
    found = _hierarchy()
    if found is None:
        return
    with contextlib.suppress(OSError):
        for entry in found[1].iterdir():
            parts = entry.name.split("-")
            if entry.name.startswith("course-grade-") and len(parts) > 2 and parts[2].isdigit() \
                    and not alive(int(parts[2])):
                with contextlib.suppress(OSError):
                    entry.rmdir()

