"""A fresh Jupyter kernel for one submission, in a sandbox, under limits, that runs code and can die safely.

The kernel is ipykernel, started from nothing for each submission (no process it shares with any
other), by launch.py, which drops root when the grader has it and sets the memory, file-size and
process limits first. By default it runs in a bubblewrap sandbox of its own (sandbox.py): its own
PID, network, IPC and host-name namespaces, a file system holding only Python, the venv and
``course_utils`` (read-only), a private HOME and /tmp, and an environment of a few variables.
Killing bwrap kills every process of the sandbox, detached ones included, and bwrap dies with
the grader. Without the sandbox (``sandboxed=False``, for systems without bwrap, such as a grading platform's
container) it runs in a session of its own (killed by process group; a process that detaches
itself survives), still with the small environment and a HOME of its own, and exits when the
grader does (ipykernel's parent watcher). A grader running as root starts it as an unprivileged
uid of its own even then (sandbox.claim, launch.py), in a folder of its own under /tmp: it can
neither read what only root may read (an autograder's answer key) nor write the grader's files
(a platform's results).

It listens on local sockets (ipc) in its exchange folder: in the sandbox, a memory file system
at sandbox.WORK, which the grader reaches through /proc/<pid>/root (bwrap tells the pid); without
it, the grader's folder for the kernel. The kernel's connection file names the sockets by their
inside paths, the grader's client by the outside ones, with the same key and ports. Kernels are
killed from the thread that uses them (``kill``); ``kill_all`` only kills their processes, from
any thread (a stopped grader), and each thread then finds its kernel dead and closes it.

Where the machine allows it, all of a kernel's processes share one memory cap (cgroups.py: a control
group of its own, of ``memory_mb``), beside each process's own (launch.py).

``run`` sends code and waits for the reply on the shell channel only: what a cell prints or
displays is published on the kernel's IOPub channel, which the grader never subscribes to, so a
notebook that prints gigabytes costs the grader nothing. A cell past its time limit gets an
interrupt (an ``interrupt_request`` on the control channel: the grader cannot signal a process
inside the sandbox's PID namespace, ipykernel then raises KeyboardInterrupt in itself), then, if
it does not stop within a few seconds, the kernel is killed.
"""

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from jupyter_client import BlockingKernelClient

from . import cgroups, sandbox

LAUNCH = Path(__file__).with_name("launch.py")
# What every grading kernel runs under: one thread, as the course's notebooks are built and
# checked (course_teacher.build.EXECUTION_ENV), and no debugger frozen-modules warning.
KERNEL_ENV = {"COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
              "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "agg", "LANG": "C.UTF-8",
              "COURSE_GRADING": "1"}  # (a check records no progress: course_utils.learner)
# Passed on from the grader's environment when it has them (they change how torch computes);
# nothing else is: no tokens, no CI secrets, no HOME.
PASSED_ON = ("ATEN_CPU_CAPABILITY", "OMP_WAIT_POLICY")
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
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
    """Kill the processes of every kernel this process started and has not killed yet (their
    threads then see them dead, and close them)."""
    with _running_lock:
        kernels = list(_running)
    for kernel in kernels:
        kernel.terminate()


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
    """One running kernel, under an address-space limit of `memory_mb` and a file-size limit of
    `file_mb` (0: none), in a sandbox of its own unless `sandboxed` is False. `folder` (which must
    exist) is the grader's folder for it; without the sandbox it is also the kernel's working folder.

    ``work`` is the kernel's exchange folder as the grader reaches it (the sandbox's memory file
    system, through /proc; or `folder`), and ``inside(name)`` a file of it as the kernel names it."""

    def __init__(self, folder, memory_mb, file_mb=64, sandboxed=True):
        self.folder, self.memory_mb, self.file_mb, self.sandboxed = Path(folder), memory_mb, file_mb, sandboxed
        self.process = self.client = self.work = None
        self.uid = self.lock = None  # root mode: the uid launch.py drops to, and its claim (sandbox.claim)
        self.group = None  # the control group capping all its processes' memory together, where there is one
        self._lock = threading.Lock()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    @property
    def alive(self):
        process = self.process
        return process is not None and process.poll() is None

    def inside(self, name):
        return f"{sandbox.WORK}/{name}" if self.sandboxed else str(self.work / name)

    def start(self):
        if self.sandboxed:
            ok, why = sandbox.available()
            if not ok:
                raise KernelDied(f"no sandbox: {why}")
        else:
            self.work = self._unsandboxed_folder()
        # ipc sockets are files named <ip>-<port>: a fresh folder each, so ports 1 to 5 are free
        info = {"ip": self.inside("kernel"), "transport": "ipc", "key": os.urandom(16).hex(),
                "signature_scheme": "hmac-sha256", "kernel_name": "",
                **{f"{channel}_port": port for port, channel in enumerate(CHANNELS, start=1)}}
        try:
            self.process, self.work = _starter.submit(self._popen, info).result()
        except OSError as error:
            self.kill()
            raise KernelDied(f"the kernel could not be started: {error}") from None
        with _running_lock:
            _running.add(self)
        self.client = BlockingKernelClient()
        self.client.load_connection_info(dict(info, ip=str(self.work / "kernel")))  # the same sockets, outside
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=True)
        reply = self._wait(self.client.kernel_info(), time.monotonic() + START_TIMEOUT_S)
        if reply is None or not self.alive:
            self.kill()
            raise KernelDied("the kernel did not start")

    def _unsandboxed_folder(self):
        """The working folder of a kernel without a sandbox: `folder`; or, when the grader is root and
        an unprivileged uid can run this Python (``unprivileged_python``: not where it lives under
        root's own 0700 home), a fresh folder under /tmp (which any uid can reach) owned by the uid
        the kernel drops to."""
        try:
            self.uid, self.lock = sandbox.claim()
        except OSError:  # no uid to be had (/run not writable): as the grader's user, as --no-sandbox says
            return self.folder
        if self.uid is None:
            return self.folder
        if not unprivileged_python(self.uid):
            sandbox.release(self.lock)
            self.uid = self.lock = None
            return self.folder
        folder = Path(tempfile.mkdtemp(prefix="course-kernel-"))
        os.chown(folder, self.uid, self.uid)
        return folder

    def _popen(self, info):
        """Start the kernel (bwrap, or launch.py) with the connection `info`; (process, exchange folder)."""
        connection = json.dumps(info).encode()
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", self.inside("kernel.json"),
                  "--HistoryManager.enabled=False"]
        limits = [str(self.memory_mb), str(self.file_mb), "--", *kernel]
        self.group = cgroups.Group(f"course-grade-{os.getpid()}-{id(self)}", self.memory_mb)
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                 "start_new_session": True, "preexec_fn": self.group.join if self.group else None}
        if not self.sandboxed:
            (self.work / "kernel.json").write_bytes(connection)
            home = self.work / "home"  # a HOME of its own: no startup files, no history of other notebooks
            home.mkdir(exist_ok=True)
            user = []
            if self.uid is not None:
                os.chown(home, self.uid, self.uid)
                user = ["--user", str(self.uid)]
            environment = dict(kernel_environment(home, os.environ.get("PATH", os.defpath)),
                               JPY_PARENT_PID=str(os.getpid()))  # ipykernel exits when the grader does
            process = subprocess.Popen([sys.executable, "-I", str(LAUNCH), *user, *limits], cwd=self.work,
                                       env=environment, **quiet)
            return process, self.work
        self.uid, self.lock = sandbox.claim()
        user = [] if self.uid is None else ["--user", str(self.uid)]
        argv = [sys.executable, "-I", sandbox.INSIDE_LAUNCH, *user, *limits]
        environment = kernel_environment(sandbox.HOME, sandbox.PATH)
        source, (report, written) = sandbox.data_fd(connection), os.pipe()
        try:
            process = subprocess.Popen(sandbox.command(environment, argv, self.uid, source, written), env={},
                                       pass_fds=(source, written), **quiet)
        finally:
            os.close(source)
            os.close(written)
        with os.fdopen(report, "rb") as answer:  # bwrap writes the sandbox's pid once it made it (EOF if it failed)
            text = answer.read(4096)
        try:
            pid = int(json.loads(text)["child-pid"])
        except (ValueError, KeyError, TypeError):
            process.kill()
            process.wait()
            raise OSError("bwrap did not make the sandbox") from None
        return process, sandbox.outside(pid)

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

    def terminate(self):
        """Kill the kernel's processes (bwrap, and with it its whole sandbox; or its process group),
        from any thread: the thread using the kernel sees it die and cleans up (``kill``)."""
        process = self.process
        if process is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)

    def kill(self):
        """Kill the kernel and whatever it started, close the channels, give back its uid. Called by
        the thread that uses the kernel (its channels are that thread's)."""
        with self._lock:
            client, self.client = self.client, None
            process, self.process = self.process, None
            lock, self.lock = self.lock, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop_channels()
        if process is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        sandbox.release(lock)
        if self.group is not None:
            self.group.remove()
        if not self.sandboxed and self.work is not None and self.work != self.folder:
            shutil.rmtree(self.work, ignore_errors=True)  # the private folder of a kernel that dropped root
        with _running_lock:
            _running.discard(self)


_unprivileged = {}


def unprivileged_python(uid):
    """Whether `uid` can run this Python and import the student package (launch.py dropping root, as a
    kernel's start does), tried once per process."""
    if "ok" not in _unprivileged:
        probe = [sys.executable, "-I", str(LAUNCH), "--user", str(uid), "0", "0", "--", sys.executable, "-I", "-c",
                 "import course_utils"]
        folder = tempfile.mkdtemp(prefix="course-kernel-probe-")  # as a kernel's: its own, its HOME
        try:
            os.chown(folder, uid, uid)
            done = subprocess.run(probe, cwd=folder, env=kernel_environment(folder, os.defpath), capture_output=True,
                                  timeout=60, check=False)
            _unprivileged["ok"] = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _unprivileged["ok"] = False
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return _unprivileged["ok"]


def _first_line(text):
    text = str(text).strip()
    line = (text.splitlines() or [""])[0]
    return line if len(line) <= 200 else line[:199] + "…"
