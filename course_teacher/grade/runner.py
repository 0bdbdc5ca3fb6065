"""A fresh Jupyter kernel for one submission, under limits, that runs code and can die safely.

The kernel is ipykernel, forked by forkserver.py (a template process that has imported torch and
the course's package, and run no notebook's code) or, where that cannot be, started by
launch.py; either sets the memory and file-size limits first. It runs in a new session, so that
the grader can kill it and everything it started with one signal to its process group. It listens on local sockets (ipc) in the
submission's own temporary folder, which is also its working directory, and gets a small
environment: the grader's secrets (tokens in CI) stay out of its reach.

``run`` sends code and waits for the reply on the shell channel only: what a cell prints or
displays is published on the kernel's IOPub channel, which the grader never subscribes to, so a
notebook that prints gigabytes costs the grader nothing. A cell past its time limit gets an
interrupt (KeyboardInterrupt in the kernel), then, if it does not stop within a few seconds,
the kernel is killed.
"""

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

LAUNCH = Path(__file__).with_name("launch.py")
FORKSERVER = Path(__file__).with_name("forkserver.py")
# What every grading kernel runs under: one thread, as the course's notebooks are built and
# checked (course_utils.build.EXECUTION_ENV), and no debugger frozen-modules warning.
KERNEL_ENV = {"COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
              "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "agg"}
# Passed on from the grader's environment; nothing else is (no tokens, no CI secrets).
PASSED_ON = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "VIRTUAL_ENV", "CONDA_PREFIX",
             "PYTHONPATH", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "ATEN_CPU_CAPABILITY",
             "OMP_WAIT_POLICY")
START_TIMEOUT_S = 60  # for the kernel to answer its first request
INTERRUPT_GRACE_S = 3  # after an interrupt, before the kill


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


def kernel_environment():
    """The environment kernels run in: a few of the grader's variables, and KERNEL_ENV."""
    environment = {name: os.environ[name] for name in PASSED_ON if name in os.environ}
    environment.update(KERNEL_ENV)
    return environment


class _Forked:
    """A kernel forked by the fork server: not the grader's child, so it is watched by its pid
    (the server reaps it when it exits)."""

    def __init__(self, pid):
        self.pid = pid

    def poll(self):
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return -1
        except OSError:
            pass
        return None

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)


class ForkServer:
    """forkserver.py, started once for a grading run and shared by its threads: it forks
    kernels that have torch and the course's package imported already."""

    def __init__(self):
        self.lock, self.process, self.ready = threading.Lock(), None, False

    def __enter__(self):
        """Start the server; it imports while the grader reads the notebooks (the first fork waits)."""
        try:
            self.process = subprocess.Popen([sys.executable, str(FORKSERVER)], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                            env=kernel_environment(), cwd=tempfile.gettempdir(),
                                            start_new_session=True, text=True)
        except OSError:
            pass  # no server: every kernel is started by launch.py
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
            self.process = None

    def _answer(self, timeout):
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        try:
            return json.loads(line) if line else {}
        except ValueError:
            return {}

    def fork(self, connection, folder, memory_mb, file_mb):
        """The _Forked kernel process, or None when the server cannot (the caller launches one)."""
        with self.lock:
            if self.process is not None and not self.ready:
                self.ready = self._answer(START_TIMEOUT_S * 3).get("ready") is True
                if not self.ready:
                    self.close()
            if self.process is None or self.process.poll() is not None:
                return None
            request = {"connection": str(connection), "folder": str(folder), "memory_mb": memory_mb, "file_mb": file_mb}
            try:
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
            except OSError:
                self.close()
                return None
            answer = self._answer(START_TIMEOUT_S)
            if type(answer.get("pid")) is not int:
                self.close()
                return None
            return _Forked(answer["pid"])


class Kernel:
    """One running kernel in `folder` (which must exist and be empty of other kernels' files),
    forked by `server` (a ForkServer) when it can, else started by launch.py."""

    def __init__(self, folder, memory_mb, file_mb=512, server=None):
        self.folder, self.memory_mb, self.file_mb, self.server = Path(folder), memory_mb, file_mb, server
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
        connection = self.folder / "kernel.json"
        write_connection_file(str(connection), transport="ipc", ip=str(self.folder / "kernel"),
                              key=os.urandom(16).hex().encode())
        if self.server is not None:
            self.process = self.server.fork(connection, self.folder, self.memory_mb, self.file_mb)
        if self.process is None:
            command = [sys.executable, str(LAUNCH), str(self.memory_mb), str(self.file_mb), "--",
                       sys.executable, "-m", "ipykernel_launcher", "-f", str(connection)]
            environment = dict(kernel_environment(), JPY_PARENT_PID=str(os.getpid()))  # it exits when we do
            self.process = subprocess.Popen(command, cwd=self.folder, env=environment,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
        self.client = BlockingKernelClient()
        self.client.load_connection_file(str(connection))
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        reply = self._wait(self.client.kernel_info(), time.monotonic() + START_TIMEOUT_S)
        if reply is None or not self.alive:
            self.kill()
            raise KernelDied("the kernel did not start")

    def run(self, code, timeout, *, history=True):
        """Run `code`; its Reply. At `timeout` seconds, interrupt it; kill the kernel if that fails."""
        if not self.alive:
            return Reply("died")
        message_id = self.client.execute(code, silent=False, store_history=history, allow_stdin=False,
                                         stop_on_error=False)
        reply = self._wait(message_id, time.monotonic() + timeout)
        if reply is None and self.alive:
            try:
                os.kill(self.process.pid, signal.SIGINT)
            except OSError:
                pass
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
        """Kill the kernel and whatever it started (its process group), and close the channels."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.stop_channels()
            self.client = None
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            self.process = None


def _first_line(text):
    text = str(text).strip()
    line = (text.splitlines() or [""])[0]
    return line if len(line) <= 200 else line[:199] + "…"
