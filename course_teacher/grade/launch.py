"""Start a grading kernel under resource limits: set them, then become the kernel (os.execv).

    python launch.py MEMORY_MB FILE_MB -- python -m ipykernel_launcher -f CONNECTION_FILE

The grader runs this file by its path (not as a module of the package, so that starting it
imports nothing heavy). Limits set before exec stay with the process and its children:

- RLIMIT_AS, the address space, MEMORY_MB (0: no limit). An allocation beyond it fails inside
  the kernel (torch raises RuntimeError, Python MemoryError) instead of exhausting the machine.
  It counts virtual memory, which is larger than resident memory (torch and the course's imports
  reserve about 0.7 GB before any cell runs).
- RLIMIT_FSIZE, the largest file the kernel may write, FILE_MB (a larger write kills it).
- RLIMIT_CORE 0: a crash leaves no core file.
"""

import os
import resource
import sys


def main(argv):
    memory_mb, file_mb, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: launch.py MEMORY_MB FILE_MB -- COMMAND ...")
    if int(memory_mb) > 0:
        limit = int(memory_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if int(file_mb) > 0:
        limit = int(file_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
