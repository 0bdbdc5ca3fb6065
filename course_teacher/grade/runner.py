"""A fresh Jupyter kernel for one submission, in a sandbox, under limits, that runs code and can die safely.

The kernel is ipykernel, started from nothing for each submission (no process it shares with any
other), by launch.py, which drops root when the grader has it and sets the memory, file-size and
process limits first. By default it runs in a bubblewrap sandbox of its own (sandbox.py): its own
PID, network, IPC and host-name namespaces, a file system holding only Python, the venv and
``course_utils`` (read-only), a private HOME and /tmp, and an environment of a few variables.
Killing bwrap kills every process of the sandbox, detached ones included, and bwrap dies with
the grader. Without the sandbox (``sandboxed=False``, for systems without bwrap) it runs as the
grader's user in a session of its own (killed by process group; a process that detaches itself
survives), still with the small environment and a HOME of its own, and exits when the grader
does (ipykernel's parent watcher).

It listens on local sockets (ipc) in the submission's own folder, which is also its working
directory (bound at sandbox.WORK inside): the kernel is given a connection file whose socket
paths are the inside ones, the grader's client the same key and ports with the outside paths.

``run`` sends code and waits for the reply on the shell channel only: what a cell prints or
displays is published on the kernel's IOPub channel, which the grader never subscribes to, so a
notebook that prints gigabytes costs the grader nothing. A cell past its time limit gets an
interrupt (an ``interrupt_request`` on the control channel: the grader cannot signal a process
inside the sandbox's PID namespace, ipykernel then raises KeyboardInterrupt in itself), then, if
it does not stop within a few seconds, the kernel is killed.
"""

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from . import sandbox

LAUNCH = Path(__file__).with_name("launch.py")
# What every grading kernel runs under: one thread, as the course's notebooks are built and
# checked (course_utils.build.EXECUTION_ENV), and no debugger frozen-modules warning.
KERNEL_ENV = {"COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
              "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "agg", "LANG": "C.UTF-8"}
# Passed on from the grader's environment when it has them (they change how torch computes);
# nothing else is: no tokens, no CI secrets, no HOME.
PASSED_ON = ("ATEN_CPU_CAPABILITY", "OMP_WAIT_POLICY")
START_TIMEOUT_S = 60  # for the kernel to answer its first request
INTERRUPT_GRACE_S = 3  # after an interrupt, before the kill

# bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that started bwrap ends,
# not only when the grader's process does. The grader starts kernels from a pool's threads, which
# may end while a kernel they started still runs, and would take it with them. So every kernel
# is started by this one thread, which lives as long as the grader: the executor's thread waits
# for work until the interpreter exits, then ends, and the sandboxes die with it, as they should
# (and with the process, however it dies, SIGKILL included).
_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-starter")
# Every kernel running now, so that a stopped grader (Ctrl-C, SIGTERM) kills them all: kill_all().
_running, _running_lock = set(), threading.Lock()


def kill_all():
    """Kill every kernel this process started and has not killed yet."""
    with _running_lock:
        kernels = list(_running)
    for kernel in kernels:
        kernel.kill()


class KernelDied(Exception):
    """The kernel could not be started, or died."""


@dataclass
class Reply:
    status: str  # "ok", "error", "timeout" (stopped at the time limit) or "died"
    error: str = ""  # the exception's type name, for "error"
    text: str = ""  # its message

    @property
    def ok(self):
        return self.status == "ok"


def kernel_environment(home, path):
    """The whole environment of a kernel whose HOME is `home` and PATH `path`: KERNEL_ENV, IPython's
    and matplotlib's folders in that HOME, and the few PASSED_ON variables the grader has."""
    environment = {"PATH": path, "HOME": str(home), "IPYTHONDIR": f"{home}/.ipython",
                   "MPLCONFIGDIR": f"{home}/.config/matplotlib", **KERNEL_ENV}
    environment.update({name: os.environ[name] for name in PASSED_ON if name in os.environ})
    return environment


class Kernel:
    """One running kernel in `folder` (which must exist and be empty of other kernels' files), under
    an address-space limit of `memory_mb` and a file-size limit of `file_mb` (0: none), in its own
    sandbox unless `sandboxed` is False. `slot` is the job slot it runs in (0 to jobs - 1): the
    kernels running at once must have different slots (as root, each slot is a uid of its own)."""

    def __init__(self, folder, memory_mb, file_mb=64, sandboxed=True, slot=0):
        self.folder, self.memory_mb, self.file_mb = Path(folder), memory_mb, file_mb
        self.sandboxed, self.slot = sandboxed, slot
        self.uid = sandbox.uid(slot) if sandboxed else None  # the uid launch.py drops to (root only)
        self.process = self.client = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    @property
    def alive(self):
        return self.process is not None and self.process.poll() is None

    def start(self):
        if self.sandboxed:
            ok, why = sandbox.available()
            if not ok:
                raise KernelDied(f"no sandbox: {why}")
        inside = sandbox.WORK if self.sandboxed else str(self.folder)
        connection = self.folder / "kernel.json"
        _, info = write_connection_file(str(connection), transport="ipc", ip=f"{inside}/kernel",
                                        key=os.urandom(16).hex().encode())
        if self.uid is not None:
            sandbox.give(self.folder, self.uid)
            os.chown(connection, self.uid, self.uid)
        try:
            self.process = _starter.submit(self._popen, f"{inside}/kernel.json").result()
        except OSError as error:
            raise KernelDied(f"the kernel could not be started: {error}") from None
        with _running_lock:
            _running.add(self)
        self.client = BlockingKernelClient()
        self.client.load_connection_info(dict(info, ip=str(self.folder / "kernel")))  # the same sockets, outside
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=True)
        reply = self._wait(self.client.kernel_info(), time.monotonic() + START_TIMEOUT_S)
        if reply is None or not self.alive:
            self.kill()
            raise KernelDied("the kernel did not start")

    def _popen(self, connection):
        """Start the kernel on `connection` (its path as the kernel sees it): bwrap, or launch.py."""
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection, "--HistoryManager.enabled=False"]
        limits = [str(self.memory_mb), str(self.file_mb), "--", *kernel]
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                 "start_new_session": True}
        if self.sandboxed:
            user = [] if self.uid is None else ["--user", str(self.uid)]
            argv = [sys.executable, "-I", sandbox.INSIDE_LAUNCH, *user, *limits]
            environment = kernel_environment(sandbox.HOME, sandbox.PATH)
            return subprocess.Popen(sandbox.command(self.folder, environment, argv, self.slot), env={}, **quiet)
        home = self.folder / "home"  # a HOME of its own: no startup files, no history of other notebooks
        home.mkdir(exist_ok=True)
        environment = dict(kernel_environment(home, os.environ.get("PATH", os.defpath)),
                           JPY_PARENT_PID=str(os.getpid()))  # ipykernel exits when the grader does
        return subprocess.Popen([sys.executable, "-I", str(LAUNCH), *limits], cwd=self.folder, env=environment,
                                **quiet)

    def run(self, code, timeout, *, history=True):
        """Run `code`; its Reply. At `timeout` seconds, interrupt it; kill the kernel if that fails."""
        if not self.alive:
            return Reply("died")
        message_id = self.client.execute(code, silent=False, store_history=history, allow_stdin=False,
                                         stop_on_error=False)
        reply = self._wait(message_id, time.monotonic() + timeout)
        if reply is None and self.alive:
            with contextlib.suppress(Exception):
                self.client.control_channel.send(self.client.session.msg("interrupt_request", content={}))
            reply = self._wait(message_id, time.monotonic() + INTERRUPT_GRACE_S)
            if reply is None:
                self.kill()
            return Reply("timeout")
        if reply is None:
            return Reply("died")
        content = reply.get("content", {})
        if content.get("status") == "ok":
            return Reply("ok")
        return Reply("error", str(content.get("ename", "Error"))[:80], _first_line(content.get("evalue", "")))

    def _wait(self, message_id, deadline):
        """The shell reply to `message_id`, or None at the deadline or when the kernel dies."""
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=0.1)
            except queue.Empty:
                if not self.alive:
                    return None
                continue
            if reply.get("parent_header", {}).get("msg_id") == message_id:
                return reply
        return None

    def kill(self):
        """Kill the kernel and whatever it started (bwrap: every process of its sandbox; without
        the sandbox: its process group), and close the channels."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.stop_channels()
            self.client = None
        process, self.process = self.process, None
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        with _running_lock:
            _running.discard(self)


def _first_line(text):
    text = str(text).strip()
    line = (text.splitlines() or [""])[0]
    return line if len(line) <= 200 else line[:199] + "…"
