"""A bubblewrap (bwrap) sandbox around each grading kernel: it sees only what it needs to run.

A submission's kernel runs code the grader must not trust. bwrap starts it in namespaces of its
own (processes, IPC, network, host name, and cgroup where the system allows), in a new session,
with nothing of the grader's environment, on a file system built for it:

- read-only: /usr (and /bin, /lib, /lib64, /sbin, as symlinks where the system has merged them
  into /usr), /etc/ld.so.cache, /etc/fonts (matplotlib's fontconfig), the Python installation,
  the virtual environment and the student-side package ``course_utils``, each at its own path
  (the venv's editable install and scripts name them by path). Not the repository, not
  ``course_teacher`` (its references and hidden cases), not the notebooks, not the submissions,
  not the grader's home: the folders above a bound path hold nothing but the way to it.
- read-write: the kernel's own working folder (the connection file, its sockets, the grader's
  calls and its answers, named relative to it) at ``WORK``; a private HOME and /tmp, both
  size-capped memory file systems that vanish with the sandbox (no IPython startup file or
  history outlives a kernel).
- a fresh /proc that shows only the sandbox's processes (not the grader's, nor its environ),
  a minimal /dev, and no network (only a loopback of its own).

Who the kernel is: when the grader runs as root, bwrap runs without a user namespace (a user
namespace would make ``setgroups`` fail) and keeps only CAP_SETUID and CAP_SETGID, which
launch.py uses to become ``FIRST_UID + slot`` before it sets the limits and starts the kernel:
an unprivileged uid, one per job slot, so that RLIMIT_NPROC (which root ignores) counts each
sandbox's processes on their own. A grader that is not root asks bwrap for a user namespace in
which it is uid 65534 (nobody); it is the grader's own uid outside, so no NPROC limit then.

Every process of the sandbox dies with bwrap: the kernel is not bwrap's init (bwrap is), and
when a PID namespace's init dies the system kills all of it, processes that detached themselves
included. bwrap dies when the grader kills it, or when the thread that started it ends
(``--die-with-parent``: see runner.py for the thread that starts them).

``available()`` says whether this works here (bwrap installed, namespaces allowed).
"""

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

LAUNCH = Path(__file__).with_name("launch.py")

WORK = "/sandbox/work"  # the kernel's working folder, inside
INSIDE_LAUNCH = "/sandbox/launch.py"  # launch.py, bound alone (not the package around it)
HOME = "/home/sandbox"
PATH = ":".join(dict.fromkeys([os.path.join(sys.prefix, "bin"), os.path.dirname(sys.executable), "/usr/local/bin",
                               "/usr/bin", "/bin"]))
TMP_BYTES = HOME_BYTES = 256 * 2**20  # memory file systems: what the kernel writes there is RAM
FIRST_UID = 60000  # root mode: the kernel of job slot n runs as FIRST_UID + n
NOBODY = 65534  # user-namespace mode: the uid the kernel has inside

# Folders a kernel needs, bound read-only where they exist; the system's own and its libraries.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache", "/etc/fonts")


def uid(slot):
    """The uid launch.py drops to for job slot `slot` (grader running as root), else None (a user
    namespace makes the kernel nobody)."""
    return FIRST_UID + slot if os.geteuid() == 0 else None


def give(folder, user):
    """Make `folder` the kernel's (root mode): owned by `user`, which writes there, and 0711 so that
    bwrap, root without CAP_DAC_OVERRIDE, can enter it as the working directory."""
    os.chown(folder, user, user)
    os.chmod(folder, 0o711)


def command(folder, environment, argv, slot=0):
    """The bwrap command line that runs `argv` in a sandbox: `folder` bound read-write at WORK
    (the working directory), launch.py at INSIDE_LAUNCH, `environment` and nothing else."""
    line = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    if uid(slot) is None:
        line += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    else:  # root keeps only what launch.py needs to become FIRST_UID + slot (bwrap starts root with all)
        line += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    line += _file_system(folder)
    line += ["--clearenv"]
    for name, value in environment.items():
        line += ["--setenv", name, value]
    return line + ["--chdir", WORK, "--", *argv]


def _file_system(folder):
    """bwrap's options for the sandbox's files (see the module's docstring)."""
    binds, symlinks = [], []
    for path in SYSTEM:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            symlinks.append((os.readlink(path), path))
        elif os.path.exists(path):
            binds.append((path, path))
    for path in _python_folders():
        if not any(_within(path, bound) for bound, _ in binds):
            binds.append((path, path))
    options = []
    # bwrap makes a missing parent of a mount point with the source's parent's mode: /root's 0700
    # would shut the unprivileged kernel out of a Python installed under it. Make them 0755 first.
    destinations = [destination for _, destination in binds + symlinks] + [WORK, INSIDE_LAUNCH, HOME]
    for ancestor in sorted({str(a) for d in destinations for a in Path(d).parents} - {"/"}):
        options += ["--perms", "0755", "--dir", ancestor]
    for source, destination in binds:
        options += ["--ro-bind", source, destination]
    for target, path in symlinks:
        options += ["--symlink", target, path]
    options += ["--bind", str(folder), WORK, "--ro-bind", str(LAUNCH), INSIDE_LAUNCH]
    options += ["--proc", "/proc", "--dev", "/dev",
                "--size", str(TMP_BYTES), "--perms", "1777", "--tmpfs", "/tmp",
                "--size", str(HOME_BYTES), "--perms", "0777", "--tmpfs", HOME]
    return options


def _python_folders():
    """The Python installation, the venv and the student's package, each under its own name and
    its real path (a symlinked installation is reached by both)."""
    package = importlib.util.find_spec("course_utils").origin  # its __init__.py; found, not imported
    folders = [sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), sys.prefix,
               os.path.dirname(os.path.abspath(package))]
    found = []
    for folder in folders:
        for path in (os.path.abspath(folder), os.path.realpath(folder)):
            if not any(_within(path, other) for other in found):  # a folder inside another comes with it
                found = [other for other in found if not _within(other, path)] + [path]
    return found


def _within(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@functools.cache
def available():
    """(True, "") when bwrap can make the kernels' sandbox here, else (False, why). Checked once:
    bwrap is installed, and runs Python in such a sandbox (as the kernel's uid when root)."""
    if shutil.which("bwrap") is None:
        return False, "bwrap (bubblewrap) is not installed: no `bwrap` on PATH"
    with tempfile.TemporaryDirectory(prefix="course-sandbox-") as folder:
        user = uid(0)
        drop = [] if user is None else ["--user", str(user)]
        if user is not None:
            give(folder, user)
        argv = [sys.executable, "-I", INSIDE_LAUNCH, *drop, "0", "0", "--", sys.executable, "-I", "-c", "pass"]
        try:
            done = subprocess.run(command(folder, {"PATH": PATH}, argv), check=False, env={},
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=60, text=True)
        except (OSError, subprocess.TimeoutExpired) as error:
            return False, f"bwrap did not run: {error}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return False, f"bwrap cannot make the sandbox here (namespaces not allowed?): {why}"
    return True, ""
