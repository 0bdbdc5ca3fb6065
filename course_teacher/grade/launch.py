"""Start a grading kernel as an unprivileged user under resource limits, then become it (os.execv).

    python -I launch.py [--user UID] MEMORY_MB FILE_MB -- python -m ipykernel_launcher -f CONNECTION_FILE

The grader runs this file by its path (not as a module of the package, so that starting it
imports nothing heavy, and so that the sandbox can hold this one file and not the package:
sandbox.py binds it alone). In the sandbox of a grader running as root it starts as root with
only CAP_SETUID and CAP_SETGID, and ``--user UID`` drops to UID (its group UID, no other group)
first: for good, since root's real, effective and saved ids all change. Then the limits, which
stay with the process and its children across exec:

- RLIMIT_AS, the address space, MEMORY_MB (0: no limit). An allocation beyond it fails inside
  the kernel (torch raises RuntimeError, Python MemoryError) instead of exhausting the machine.
  It counts virtual memory, which is larger than resident memory (torch and the course's imports
  reserve about 0.7 GB before any cell runs).
- RLIMIT_FSIZE, the largest file the kernel may write, FILE_MB (Python gets an OSError).
- RLIMIT_CORE 0: a crash leaves no core file.
- RLIMIT_NOFILE: NOFILE open files.
- and an out-of-memory score of 1000: if memory runs out, the system kills the sandbox first.
- with ``--user``, RLIMIT_NPROC: NPROC processes and threads for that uid (a fork bomb stops
  there). It counts every process of the uid on the machine, which is why each job slot has a
  uid of its own; and root is exempt from it, which is why it comes after the drop.
"""

import os
import resource
import sys

NOFILE = 1024
NPROC = 256


def _limit(which, value):
    resource.setrlimit(which, (value, value))


def _become(uid):
    """Drop root for `uid` (and group `uid`, no supplementary group); check it cannot come back."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("launch.py: still root")


def _first_to_go():
    """Ask the kernel's out-of-memory killer to take this process (and its children) first, before
    the grader or another submission's kernel: raising one's own score needs no privilege."""
    try:
        with open("/proc/self/oom_score_adj", "w") as file:
            file.write("1000")
    except OSError:  # no /proc (macOS), or a system that refuses: the memory limit still holds
        pass


def main(argv):
    _first_to_go()
    uid = None
    if argv[:1] == ["--user"]:
        uid, argv = int(argv[1]), argv[2:]
    memory_mb, file_mb, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: launch.py [--user UID] MEMORY_MB FILE_MB -- COMMAND ...")
    if uid is not None:
        _become(uid)
        _limit(resource.RLIMIT_NPROC, NPROC)
    if int(memory_mb) > 0:
        _limit(resource.RLIMIT_AS, int(memory_mb) * 2**20)
    if int(file_mb) > 0:
        _limit(resource.RLIMIT_FSIZE, int(file_mb) * 2**20)
    _limit(resource.RLIMIT_CORE, 0)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    _limit(resource.RLIMIT_NOFILE, NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
