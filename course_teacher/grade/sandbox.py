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
- read-write, each a memory file system of its own with a size cap, gone with the sandbox: the
  kernel's exchange folder ``WORK`` (the connection file, its sockets, the grader's calls and its
  answers; the grader reaches it from outside through ``/proc/<pid>/root``, so nothing the kernel
  writes lands on the host's disk), a private HOME and /tmp (no IPython startup file or history
  outlives a kernel) and /dev/shm. The kernel's working directory, ``CWD``, is read-only and empty:
  Python looks for modules there first, and a notebook must not be able to write one there. The
  sandbox's own root is remounted read-only once it is built.
- a fresh /proc that shows only the sandbox's processes (not the grader's, nor its environ),
  a minimal /dev, and no network (only a loopback of its own).

Who the kernel is: when the grader runs as root, bwrap runs without a user namespace (a user
namespace would make ``setgroups`` fail) and keeps only CAP_SETUID and CAP_SETGID, which
launch.py uses to become an unprivileged uid of its own (``claim``: the first of ``UIDS`` uids
from ``FIRST_UID`` that no running kernel holds, on this machine, whichever grader started it) before
it sets the limits and starts the kernel; so RLIMIT_NPROC (which root ignores) counts each
sandbox's processes on their own. A grader that is not root asks bwrap for a user namespace in
which it is uid 65534 (nobody); it is the grader's own uid outside, so no NPROC limit then.

Every process of the sandbox dies with bwrap: the kernel is not bwrap's init (bwrap is), and
when a PID namespace's init dies the system kills all of it, processes that detached themselves
included. bwrap dies when the grader kills it, or when the thread that started it ends
(``--die-with-parent``: see runner.py for the thread that starts them).

``available()`` says whether this works here (bwrap installed, namespaces allowed).
"""

import fcntl
import functools
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

LAUNCH = Path(__file__).with_name("launch.py")

CWD = "/sandbox"  # the kernel's working directory: read-only, empty
WORK = "/sandbox/work"  # the exchange folder: connection file, sockets, calls and answers
INSIDE_LAUNCH = "/sandbox/launch.py"  # launch.py, bound alone (not the package around it)
HOME = "/home/sandbox"
PATH = ":".join(dict.fromkeys([os.path.join(sys.prefix, "bin"), os.path.dirname(sys.executable), "/usr/local/bin",
                               "/usr/bin", "/bin"]))
# memory file systems: what the kernel writes there is RAM, so each is capped
TMP_BYTES = HOME_BYTES = 128 * 2**20
WORK_BYTES = 64 * 2**20  # the calls and answers are small; a larger answer is refused anyway
SHM_BYTES = 16 * 2**20
FIRST_UID, UIDS = 60000, 1000  # root mode: a kernel runs as one of these uids, no other kernel's
NOBODY = 65534  # user-namespace mode: the uid the kernel has inside
# A lock file per uid in use, where only root can make the folder: in /tmp, any user could make it
# first, and a grader that then found no uid ran its kernels without the sandbox, as root.
UID_LOCKS = Path("/run/course-grade-uids")

# Folders a kernel needs, bound read-only where they exist; the system's own and its libraries.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache", "/etc/fonts")


def claim():
    """(uid, lock) for a new kernel when the grader runs as root: the first uid of FIRST_UID ... that
    no running kernel of any grader on this machine holds (a lock file each, held while the kernel
    lives: the system releases it when the holder dies); (None, None) when not root. ``release(lock)``."""
    if os.geteuid() != 0:
        return None, None
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    found = os.lstat(UID_LOCKS)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != 0:  # /tmp is everyone's: only root's own folder
        raise OSError(f"{UID_LOCKS} is not root's folder")
    for uid in range(FIRST_UID, FIRST_UID + UIDS):
        handle = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            continue
        return uid, handle
    raise OSError(f"every uid from {FIRST_UID} to {FIRST_UID + UIDS - 1} is in use")


def release(lock):
    if lock is not None:
        os.close(lock)


def command(environment, argv, uid, connection_fd, info_fd):
    """The bwrap command line that runs `argv` in a sandbox, as `uid` (root mode: launch.py drops to
    it; None: a user namespace): the connection file copied into WORK from `connection_fd`, the
    sandbox's pid outside written as JSON to `info_fd` (bwrap's --info-fd), `environment` and
    nothing else."""
    line = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    if uid is None:
        line += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    else:  # root keeps only what launch.py needs to drop to uid (bwrap starts root with all)
        line += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    line += file_system(connection_fd)
    line += ["--clearenv"]
    for name, value in environment.items():
        line += ["--setenv", name, value]
    return line + ["--info-fd", str(info_fd), "--chdir", CWD, "--", *argv]


def file_system(connection_fd):
    """bwrap's options for the sandbox's files (see the module's docstring)."""
    binds, symlinks = [], []
    for path in SYSTEM:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            symlinks.append((os.readlink(path), path))
        elif os.path.exists(path):
            binds.append((path, path))
    for path in python_folders():
        if not any(_within(path, bound) for bound, _ in binds):
            binds.append((path, path))
    # /tmp's own file system first: a Python or venv that lives under /tmp (a clone in /tmp/...) is
    # then bound onto it, not hidden by it.
    options = ["--size", str(TMP_BYTES), "--perms", "1777", "--tmpfs", "/tmp"]
    # bwrap makes a missing parent of a mount point with the source's parent's mode: /root's 0700
    # would shut the unprivileged kernel out of a Python installed under it. Make them 0755 first.
    destinations = [destination for _, destination in binds + symlinks] + [WORK, INSIDE_LAUNCH, HOME]
    for ancestor in sorted({str(a) for d in destinations for a in Path(d).parents} - {"/", "/tmp"}):
        options += ["--perms", "0755", "--dir", ancestor]
    for source, destination in binds:
        options += ["--ro-bind", source, destination]
    for target, path in symlinks:
        options += ["--symlink", target, path]
    options += ["--ro-bind", str(LAUNCH), INSIDE_LAUNCH]
    options += ["--proc", "/proc", "--dev", "/dev",
                "--size", str(SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm",
                "--size", str(HOME_BYTES), "--perms", "0777", "--tmpfs", HOME,
                "--size", str(WORK_BYTES), "--perms", "0777", "--tmpfs", WORK,
                "--perms", "0644", "--file", str(connection_fd), f"{WORK}/kernel.json",
                "--remount-ro", "/"]
    return options


def outside(pid):
    """The exchange folder of the sandbox whose first process is `pid` (outside), as the grader
    reaches it: through /proc, into the sandbox's own file system."""
    return Path(f"/proc/{pid}/root{WORK}")


def python_folders():
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
    bwrap is installed, and runs Python in such a sandbox (as an unprivileged uid when root)."""
    if shutil.which("bwrap") is None:
        return False, "bwrap (bubblewrap) is not installed: no `bwrap` on PATH"
    try:
        user, lock = claim()
    except OSError as error:
        return False, f"no uid for the sandbox: {error}"
    drop = [] if user is None else ["--user", str(user)]
    argv = [sys.executable, "-I", INSIDE_LAUNCH, *drop, "0", "0", "--", sys.executable, "-I", "-c", "pass"]
    connection, info = data_fd(b"{}"), os.pipe()
    try:
        done = subprocess.run(command({"PATH": PATH}, argv, user, connection, info[1]), check=False, env={},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=60, text=True, pass_fds=(connection, info[1]))
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"bwrap did not run: {error}"
    finally:
        for handle in (connection, *info):
            os.close(handle)
        release(lock)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return False, f"bwrap cannot make the sandbox here (namespaces not allowed?): {why}"
    return True, ""


def data_fd(data):
    """A file descriptor to read `data` from (bwrap's --file copies it into the sandbox): a pipe,
    written and closed on the writing side (the data is small)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read
