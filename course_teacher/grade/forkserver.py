"""Fresh kernels in a fraction of a second: a template process that forks them.

    python forkserver.py     (started by the grader, with the kernels' environment)

Importing torch, matplotlib and the course's package takes a kernel seconds of CPU, more than
grading a notebook's exercises does. This process imports them once (with nothing else: no
notebook code ever runs here), prints ``ready``, then reads requests, one JSON line each:
``{"connection": file, "folder": path, "memory_mb": n, "file_mb": n}``. For each it forks a
child, which starts a session of its own (the grader kills it and what it starts by process
group), moves to `folder`, takes the limits launch.py would set, and becomes an ipykernel
kernel on `connection`; it answers ``{"pid": n}``. A child is a new process that has run no
notebook's code, as fresh as a kernel started from nothing, only faster. The server exits when
the grader closes its stdin (or dies), and a kernel exits when the server does.

Forking is safe only from a single-threaded process: where the imports start a thread (an
OpenMP or BLAS pool when OMP_NUM_THREADS is not 1), the server says so and exits, and the
grader starts each kernel with launch.py instead.
"""

import sys

if sys.path and sys.path[0]:  # this file's folder: the kernels must not import the grader's modules by name
    del sys.path[0]

import contextlib
import importlib
import json
import os
import signal

#: What a lesson's first cell imports, imported here once for every kernel.
PRELOAD = ("ipykernel.kernelapp", "torch", "torch.nn.functional", "numpy", "matplotlib.pyplot", "course_utils",
           "course_utils.viz", "course_utils.widgets")


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc (macOS): assume the imports started none
        return 1


def _become_kernel(request):
    """In the child: the limits, a session, the folder; then the kernel, until it exits."""
    import resource

    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["folder"])
    if request["memory_mb"] > 0:
        limit = request["memory_mb"] * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if request["file_mb"] > 0:
        limit = request["file_mb"] * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.path.insert(0, request["folder"])  # as `python -m ipykernel_launcher` run there would have it
    os.environ["JPY_PARENT_PID"] = str(os.getppid())  # it exits when this server does
    sys.argv = ["ipykernel_launcher", "-f", request["connection"]]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance(argv=["-f", request["connection"]])


def main():
    for name in PRELOAD:
        with contextlib.suppress(Exception):  # a module that fails here fails in the notebook, later
            importlib.import_module(name)
    if _threads() != 1:
        print(json.dumps({"error": "the imports started threads; forking is not safe"}), flush=True)
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped as they exit
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            pid = os.fork()
        except Exception as error:  # noqa: BLE001 (a bad request gets an answer, not the server's death)
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
            continue
        if pid == 0:
            try:
                _become_kernel(request)
            finally:
                os._exit(0)
        print(json.dumps({"pid": pid}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
