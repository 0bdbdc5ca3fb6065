"""The sandbox around each grading kernel (course_teacher.grade.sandbox, runner.Kernel).

Each property is proved from inside: the test starts a real sandboxed kernel, has it run code that
tries what a hostile notebook would, and reads what the kernel wrote into its working folder (a
JSON answer) or what the grader sees from outside (its processes). One kernel serves the checks
that cannot disturb each other; the others (a second sandbox at once, a kernel to kill, a grader
to kill) have their own. The tests that need bwrap skip, with the reason, where it cannot make a
sandbox (no bwrap, or a container without namespaces).
"""

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import answer_keys
import patience
import pytest

import course_utils
from course_teacher.grade import runner, sandbox
from course_teacher.grade.runner import Kernel

ROOT = Path(__file__).resolve().parent.parent
SECRET = ("COURSE_TEST_FAKE_TOKEN", f"s3cret-{uuid.uuid4().hex}")
MEMORY_MB = 2048
AVAILABLE, WHY = sandbox.available()
needs_bwrap = pytest.mark.skipif(not AVAILABLE, reason=f"no sandbox here: {WHY}")

# What the kernel's environment holds, all of it: runner.kernel_environment, and PWD (bwrap's,
# the working folder).
EXPECTED_ENVIRONMENT = {"PATH", "HOME", "LANG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "COURSE_THREADS",
                        "PYTHONHASHSEED", "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION", "MPLCONFIGDIR", "COURSE_GRADING",
                        "IPYTHONDIR", "PWD"} | {name for name in runner.PASSED_ON if name in os.environ}

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

# A process that detaches itself for good: a new session, orphaned by a double fork, asleep 600 s (longer than
# any of these tests waits, even stretched on a busy machine: it dies with its sandbox, not of age).
# argv[1] is a marker to find it by from outside.
DETACH = """
import subprocess, sys

SLEEPER = "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n        time.sleep(600)\\n    os._exit(0)\\n"
subprocess.run([sys.executable, "-c", SLEEPER, {marker!r}], check=True)
"""


def _ask(kernel, code, timeout=60):
    """Run `code` in `kernel`; it sets `answer`, which the kernel writes as JSON into its working
    folder; the test reads it there, from outside. `timeout`: seconds on a quiet machine, stretched on a
    busy one (tests/patience.py), as every wait of this module is."""
    name = f"answer-{uuid.uuid4().hex}.json"
    epilogue = f"\nimport json as _json\nwith open({kernel.inside(name)!r}, 'w') as _file:\n    _json.dump(answer, _file)\n"
    reply = kernel.run(textwrap.dedent(code) + epilogue, patience.seconds(timeout))
    assert reply.ok, reply
    return json.loads((kernel.work / name).read_text())


def _start(folder, sandboxed=True, memory_mb=MEMORY_MB):
    folder.mkdir(parents=True, exist_ok=True)
    kernel = Kernel(folder, memory_mb, sandboxed=sandboxed)
    kernel.start()
    return kernel


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A sandboxed kernel, started while the test's environment holds a fake secret."""
    os.environ[SECRET[0]] = SECRET[1]
    try:
        started = _start(tmp_path_factory.mktemp("sandbox") / "kernel")
    finally:
        del os.environ[SECRET[0]]
    yield started
    started.kill()


def _pids(marker=None, namespace=None):
    """The host's processes whose command line holds `marker`, or that are in PID `namespace`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if marker is not None and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
            if namespace is not None and os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                found.append(int(entry))
        except OSError:  # gone meanwhile
            continue
    return found


def _stat(pid):
    """A host process's parent, session and command name (/proc/<pid>/stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return {"command": text[text.index("(") + 1:text.rindex(")")], "ppid": int(fields[1]), "session": int(fields[3])}


def _eventually(condition, seconds=15):
    """Whether `condition` holds within `seconds` on a quiet machine, stretched here (tests/patience.py)."""
    return patience.eventually(condition, seconds)


def _bound():
    """Every path the sandbox's file system is made of (destinations of binds, links, folders, mounts)."""
    line = sandbox.command({}, ["true"], None, 98, 99)
    paths = set()
    for index, option in enumerate(line):
        if option in ("--ro-bind", "--bind", "--symlink", "--file"):
            paths.add(line[index + 2])
        elif option in ("--dir", "--tmpfs", "--proc", "--dev"):
            paths.add(line[index + 1])
    return paths


# ----------------------------------------------------------------------------- without bwrap

def test_without_bwrap_on_path_there_is_no_sandbox_and_it_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap
    sandbox.available.cache_clear()
    try:
        ok, why = sandbox.available()
    finally:
        monkeypatch.undo()
        sandbox.available.cache_clear()
    assert ok is False and "bwrap" in why and "not installed" in why


# ----------------------------------------------------------------------------- who and where

@needs_bwrap
def test_the_kernel_is_not_root_and_runs_under_its_limits(kernel):
    answer = _ask(kernel, """
        import os, resource
        try:
            os.setuid(0)
            back = True
        except OSError:
            back = False
        status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
        answer = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "back": back, "cwd": os.getcwd(), "no_new_privs": status["NoNewPrivs"].strip(),
                  "capabilities": [status[name].strip() for name in ("CapPrm", "CapEff", "CapAmb")],
                  "limits": {name: resource.getrlimit(getattr(resource, name))[0]
                             for name in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_NOFILE")}}
    """)
    assert answer["uid"] != 0 and answer["euid"] != 0 and answer["gid"] != 0 and not answer["back"]
    # no capability left, and no way to gain one (bwrap's mounts are nosuid, and no_new_privs holds)
    assert set(answer["capabilities"]) == {"0000000000000000"} and answer["no_new_privs"] == "1"
    assert answer["cwd"] == sandbox.CWD
    limits = answer["limits"]
    assert limits["RLIMIT_AS"] == MEMORY_MB * 2**20 and limits["RLIMIT_FSIZE"] == 64 * 2**20
    assert limits["RLIMIT_CORE"] == 0 and limits["RLIMIT_NOFILE"] <= 1024
    if os.geteuid() == 0:  # root drops to a uid of the kernel's own, where NPROC can hold
        assert answer["uid"] == answer["gid"] == kernel.uid and answer["groups"] == []
        assert sandbox.FIRST_UID <= kernel.uid < sandbox.FIRST_UID + sandbox.UIDS
        assert limits["RLIMIT_NPROC"] == 256
    else:
        assert answer["uid"] == sandbox.NOBODY


@needs_bwrap
def test_it_sees_python_the_venv_and_course_utils_and_nothing_else(kernel, tmp_path):
    submission = tmp_path / "submissions" / "alice" / "00_tensor_shapes.ipynb"
    submission.parent.mkdir(parents=True)
    submission.write_text("{}")
    hidden = [ROOT / "course_teacher", ROOT / "course_teacher" / "grade" / "grader.py", ROOT / "notebooks",
              ROOT / "notebooks" / "solutions", ROOT / ".git", ROOT / "tests", ROOT / "README.md", submission,
              "/root/.bashrc", "/root/.ssh", "/etc/passwd", "/etc/shadow", "/sys", "/var", "/opt"]
    bound = _bound()
    # (/dev is bwrap's own minimal one, its devices no file of the host's; the exchange folder holds
    # the kernel's own sockets and answers)
    folders = sorted({str(parent) for path in bound for parent in Path(path).parents} - {"/dev", sandbox.WORK}
                     | {str(ROOT)})
    answer = _ask(kernel, f"""
        import os
        answer = {{"seen": [path for path in {[str(p) for p in hidden]!r} if os.path.lexists(path)],
                   "listed": {{folder: sorted(os.listdir(folder)) for folder in {folders!r} if os.path.isdir(folder)}}}}
        try:
            import course_teacher
            answer["course_teacher"] = course_teacher.__file__
        except ImportError as error:
            answer["course_teacher"] = type(error).__name__
    """)
    assert answer["seen"] == [], "the kernel sees the grader's files"
    assert answer["course_teacher"] == "ModuleNotFoundError"
    for folder, children in answer["listed"].items():  # the folders above a bind hold only the way to it
        extra = {str(Path(folder) / child) for child in children} - bound - set(folders)
        assert not extra, f"{folder} shows {extra}"
    expected_root = {"course_utils"} | ({Path(sys.prefix).name} if Path(sys.prefix).parent == ROOT else set())
    assert set(answer["listed"][str(ROOT)]) == expected_root  # the repository: its student-side package, the venv
    assert set(answer["listed"]["/root"]) <= {".pyenv"} | {Path(p).relative_to("/root").parts[0] for p in bound
                                                           if p.startswith("/root/")}


@needs_bwrap
def test_course_utils_is_importable_and_read_only(kernel):
    folder = Path(course_utils.__file__).parent
    answer = _ask(kernel, """
        import os, course_utils
        folder = os.path.dirname(course_utils.__file__)
        tried = {}
        for path in (os.path.join(folder, "planted.py"), os.path.join(folder, "__init__.py"),
                     os.path.join(os.path.dirname(os.__file__), "planted.py")):
            try:
                with open(path, "a") as file:
                    file.write("import os; os.system('echo owned')")
                tried[path] = "written"
            except OSError as error:
                tried[path] = error.errno
        answer = {"file": course_utils.__file__, "tried": tried}
    """)
    assert answer["file"] == course_utils.__file__
    tried = answer["tried"]
    assert all(error in (errno.EROFS, errno.EACCES) for error in tried.values()), tried  # nothing written
    assert tried[str(folder / "planted.py")] == errno.EROFS  # a read-only mount, whoever the kernel is
    assert not (folder / "planted.py").exists() and "owned" not in (folder / "__init__.py").read_text()


# ----------------------------------------------------------------------------- HOME, startup files, history

@needs_bwrap
def test_home_is_private_and_no_startup_file_or_history_reaches_another_kernel(kernel, tmp_path):
    first = _ask(kernel, """
        import os
        home = os.environ["HOME"]
        with open(os.path.join(home, "notes.txt"), "w") as file:
            file.write("alice's answers")
        startup = get_ipython().profile_dir.startup_dir  # where IPython looks, under IPYTHONDIR in HOME
        os.makedirs(startup, exist_ok=True)
        with open(os.path.join(startup, "00-evil.py"), "w") as file:
            file.write("open('/sandbox/work/STARTUP_RAN', 'w').close()")
        answer = {"home": home, "startup": startup, "history": get_ipython().history_manager.enabled,
                  "files": sorted(os.path.relpath(os.path.join(top, name), home)
                                  for top, _, names in os.walk(home) for name in names)}
    """)
    assert first["home"] == sandbox.HOME and first["startup"].startswith(sandbox.HOME + "/")
    assert first["history"] is False
    assert not any("history" in name for name in first["files"]), first["files"]  # no history.sqlite

    other = _start(tmp_path / "other")  # another sandbox at once, started after those writes
    try:
        second = _ask(other, """
            import os
            home = os.environ["HOME"]
            answer = {"uid": os.getuid(), "startup_ran": os.path.exists("/sandbox/work/STARTUP_RAN"),
                      "files": sorted(os.path.relpath(os.path.join(top, name), home)
                                      for top, _, names in os.walk(home) for name in names)}
        """)
    finally:
        other.kill()
    assert second["files"] == [".ipython/profile_default/startup/README"]  # IPython's own, made at its start
    assert second["startup_ran"] is False
    if os.geteuid() == 0:
        assert second["uid"] != kernel.uid  # its own uid, not the first kernel's


# ----------------------------------------------------------------------------- network, processes, environment

@needs_bwrap
def test_there_is_no_network(kernel):
    with socket.socket() as listener:  # a service of the host's, on its loopback
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the host reaches it
        answer = _ask(kernel, f"""
            import socket
            answer = {{"interfaces": [name for _, name in socket.if_nameindex()]}}
            for where in (("127.0.0.1", {port}), ("8.8.8.8", 53)):
                try:
                    socket.create_connection(where, timeout=3).close()
                    answer[str(where)] = "connected"
                except OSError as error:
                    answer[str(where)] = type(error).__name__
        """)
    assert answer["interfaces"] == ["lo"]
    assert answer[str(("127.0.0.1", port))] == "ConnectionRefusedError"  # its own loopback, not the host's
    assert answer[str(("8.8.8.8", 53))] != "connected"


@needs_bwrap
def test_proc_shows_only_the_sandboxs_processes(kernel):
    grader = os.getpid()
    answer = _ask(kernel, f"""
        import os
        pids = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
        try:
            open("/proc/{grader}/environ").read()
            environ = "read"
        except OSError as error:
            environ = type(error).__name__
        answer = {{"pids": pids, "me": os.getpid(), "environ": environ,
                   "commands": [open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")[0].decode() for pid in pids]}}
    """)
    assert grader not in answer["pids"] and answer["environ"] == "FileNotFoundError"
    assert answer["pids"][0] == 1 and answer["me"] in answer["pids"] and len(answer["pids"]) < 10
    assert {Path(command).name for command in answer["commands"]} <= {"bwrap", Path(sys.executable).name}


@needs_bwrap
def test_the_environment_holds_only_the_kernels_variables(kernel):
    answer = _ask(kernel, """
        import os
        initial = dict(item.split("=", 1) for item in open("/proc/self/environ").read().split("\\0") if item)
        answer = {"initial": initial, "now": dict(os.environ)}
    """)
    assert set(answer["initial"]) == EXPECTED_ENVIRONMENT
    assert SECRET[0] not in answer["now"] and SECRET[1] not in json.dumps(answer)
    assert answer["initial"]["HOME"] == sandbox.HOME and answer["initial"]["LANG"] == "C.UTF-8"
    assert answer["initial"]["IPYTHONDIR"].startswith(sandbox.HOME + "/")
    assert answer["initial"]["MPLCONFIGDIR"].startswith(sandbox.HOME + "/")


# ----------------------------------------------------------------------------- limits

@needs_bwrap
def test_a_big_allocation_fails_inside_and_the_kernel_goes_on(kernel):
    reply = kernel.run("block = bytearray(2 * 2**30)", patience.seconds(60))  # 2 GiB, past the 2 GiB address space
    assert reply.status == "error" and reply.error == "MemoryError"
    assert kernel.alive and kernel.run("block = bytearray(2**20)", patience.seconds(10)).ok


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC is set where the kernel has a uid of its own (root mode)")
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path):
    # The limit counts every process of the kernel's uid: a uid no other running kernel holds.
    kernel = _start(tmp_path / "kernel")
    try:
        answer = _fork_bomb(kernel)
    finally:
        kernel.kill()
    assert answer["error"] == "EAGAIN" and answer["children"] < 256


def _fork_bomb(kernel):
    return _ask(kernel, """
        import errno, os
        read, write = os.pipe()
        children, error = [], None
        try:
            while len(children) < 1000:
                pid = os.fork()
                if pid == 0:  # waits until the parent closes the pipe, then exits
                    os.close(write)
                    os.read(read, 1)
                    os._exit(0)
                children.append(pid)
        except OSError as failed:
            error = errno.errorcode[failed.errno]
        os.close(write)
        for pid in children:
            os.waitpid(pid, 0)
        os.close(read)
        answer = {"children": len(children), "error": error}
    """)


@needs_bwrap
def test_tmp_and_home_are_size_capped(kernel):
    answer = _ask(kernel, """
        import errno, os
        answer = {}
        for folder in ("/tmp", os.environ["HOME"]):
            written, chunk, index = 0, b"x" * 2**24, 0
            try:
                while written < 2**30:
                    with open(os.path.join(folder, f"fill-{index}"), "wb") as file:
                        for _ in range(3):  # 48 MB a file: under RLIMIT_FSIZE
                            written += file.write(chunk)
                    index += 1
                answer[folder] = ["no limit", written]
            except OSError as error:
                answer[folder] = [errno.errorcode[error.errno], written]
            for name in os.listdir(folder):
                if name.startswith("fill-"):
                    os.remove(os.path.join(folder, name))
    """)
    for folder in ("/tmp", sandbox.HOME):
        code, written = answer[folder]
        assert code == "ENOSPC" and written <= sandbox.TMP_BYTES, answer


@needs_bwrap
def test_nothing_the_kernel_writes_reaches_the_hosts_disk_or_its_import_path(kernel):
    """The exchange folder and /dev/shm are memory file systems with a cap too (the host's disk holds
    nothing of the kernel's), and no folder Python imports from can be written: the working
    directory and the sandbox's root are read-only (a module the notebook wrote cannot be imported)."""
    answer = _ask(kernel, """
        import errno, os, sys
        answer = {}
        for folder in ("/sandbox/work", "/dev/shm"):
            written, chunk, index = 0, b"x" * 2**22, 0
            try:
                while written < 2**30:
                    with open(os.path.join(folder, f"fill-{index}"), "wb") as file:
                        written += file.write(chunk)
                    index += 1
                answer[folder] = ["no limit", written]
            except OSError as error:
                answer[folder] = [errno.errorcode[error.errno], written]
            for name in os.listdir(folder):
                if name.startswith("fill-"):
                    os.remove(os.path.join(folder, name))
        writable = []
        for entry in sys.path:
            folder = os.path.abspath(entry or os.getcwd())
            try:
                with open(os.path.join(folder, "planted.py"), "w"):
                    pass
                writable.append(folder)
            except OSError:
                pass
        answer["writable"] = writable
        try:
            open("/planted", "w").close()
            answer["root"] = "written"
        except OSError as error:
            answer["root"] = errno.errorcode[error.errno]
    """)
    assert answer["/sandbox/work"][0] == "ENOSPC" and answer["/sandbox/work"][1] <= sandbox.WORK_BYTES, answer
    assert answer["/dev/shm"][0] == "ENOSPC" and answer["/dev/shm"][1] <= sandbox.SHM_BYTES, answer
    assert answer["writable"] == [] and answer["root"] == "EROFS", answer


@needs_bwrap
def test_a_cell_past_its_time_is_interrupted_and_the_kernel_goes_on(kernel, monkeypatch):
    # the grace an interrupt has to land, stretched on a busy machine (tests/patience.py): the kernel
    # answers it, but a busy machine may take longer than a quiet one's 3 s to let it
    grace = patience.seconds(runner.INTERRUPT_GRACE_S)
    monkeypatch.setattr(runner, "INTERRUPT_GRACE_S", grace)
    started = time.monotonic()
    assert kernel.run("while True:\n    pass", 1).status == "timeout"
    assert time.monotonic() - started < 1 + grace and kernel.alive
    assert kernel.run("x = 1", patience.seconds(10)).ok


# ----------------------------------------------------------------------------- dying

@needs_bwrap
def test_a_detached_process_dies_when_the_kernel_is_killed(tmp_path):
    marker = f"detached-{uuid.uuid4().hex}"
    kernel = _start(tmp_path / "kernel")
    try:
        assert kernel.run(DETACH.format(marker=marker), patience.seconds(30)).ok
        assert _eventually(lambda: _pids(marker)), "the detached process did not start"
        sleeper = max(_pids(marker))  # the grandchild (its parent may not have exited yet)
        namespace = os.readlink(f"/proc/{sleeper}/ns/pid")
        assert _eventually(lambda: _stat(_stat(sleeper)["ppid"])["command"] == "bwrap")  # orphaned: bwrap's init adopts it
        assert _stat(sleeper)["session"] != _stat(_stat(sleeper)["ppid"])["session"]  # in a session of its own
    finally:
        kernel.kill()
    assert _eventually(lambda: not _pids(namespace=namespace)), "processes of the sandbox outlived it"
    assert not _pids(marker)


HELPER = """
import os, sys, threading, time
from pathlib import Path
from course_teacher.grade.runner import Kernel

kernel = Kernel(Path(sys.argv[1]), 2048)
starter = threading.Thread(target=kernel.start)  # started from a thread that ends (as the grader's pool threads do)
starter.start()
starter.join()
time.sleep(1)
seconds = float(os.environ["RUN_S"])  # 30 s on a quiet machine, stretched on a busy one
assert kernel.run("x = 1", seconds).ok, "the kernel died with the thread that started it"
assert kernel.run(os.environ["DETACH"], seconds).ok
print(kernel.process.pid, flush=True)
time.sleep(600)
"""


@needs_bwrap
def test_the_sandbox_dies_with_the_grader_even_by_sigkill(tmp_path):
    marker = f"orphan-{uuid.uuid4().hex}"
    folder = tmp_path / "kernel"
    folder.mkdir()
    grader = subprocess.Popen([sys.executable, "-c", HELPER, str(folder)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, DETACH=DETACH.format(marker=marker),
                                       RUN_S=str(patience.seconds(30))))
    try:
        bwrap = int(grader.stdout.readline())
        assert _eventually(lambda: _pids(marker)), "the detached process did not start"
        namespace = os.readlink(f"/proc/{_pids(marker)[0]}/ns/pid")
        assert len(_pids(namespace=namespace)) >= 3  # bwrap's init, the kernel, the detached sleeper
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    assert _eventually(lambda: not _pids(namespace=namespace)), "the sandbox outlived the grader"
    assert _eventually(lambda: not os.path.exists(f"/proc/{bwrap}"))


# ----------------------------------------------------------------------------- without the sandbox

@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="reads the kernel's environment in /proc (Linux)")
def test_without_the_sandbox_the_kernel_still_gets_a_clean_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(*SECRET)
    kernel = _start(tmp_path / "kernel", sandboxed=False)
    try:
        answer = _ask(kernel, """
            import os
            initial = dict(item.split("=", 1) for item in open("/proc/self/environ").read().split("\\0") if item)
            answer = {"initial": initial, "history": get_ipython().history_manager.enabled}
        """)
    finally:
        kernel.kill()
    expected = EXPECTED_ENVIRONMENT - {"PWD"} | {"JPY_PARENT_PID"}  # ipykernel exits when the grader does
    assert set(answer["initial"]) == expected and answer["initial"]["JPY_PARENT_PID"] == str(os.getpid())
    # (a grader running as root starts it as an unprivileged uid, in a folder of its own, where one can run Python)
    assert answer["initial"]["HOME"] == str(kernel.work / "home") and answer["history"] is False


def _unscanned(monkeypatch, tmp_path, lang, cell, exercise=None, answers=None):
    """{exercise: Row} of lesson 00's solutions graded here with the grader's static scan switched off: `cell`
    inserted before the first exercise cell or, given `exercise`, as that exercise's cell. The scan holds every
    such cell for review before any kernel starts; these tests prove the sandbox behind it, for whatever code
    the scan might miss."""
    import nbformat

    from course_teacher.grade import grader, scan

    monkeypatch.setattr(scan, "scan", lambda *args, **kwargs: scan.Findings())
    from course_utils import file_names  # (the lesson's name in `lang`)

    notebook = nbformat.read(ROOT / "notebooks" / "solutions" / lang / file_names.lesson_notebook("00_tensor_shapes", lang),
                             as_version=4)
    if exercise:
        next(c for c in notebook.cells if c.metadata.get("exercise") == exercise).source = cell
    else:
        first = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("exercise"))
        notebook.cells.insert(first, nbformat.v4.new_code_cell(cell))
    path = tmp_path / "00_tensor_shapes.ipynb"
    nbformat.write(notebook, str(path))
    # (the limits stretched on a busy machine, tests/patience.py: an honest exercise must not run out of time)
    options = grader.Options(cells="own", time_limit=patience.seconds(2), cell_timeout=patience.seconds(30),
                             answers=answers)
    graded = grader.grade_one(path, "them", "them", options)
    return {row.exercise: row for row in graded.rows}


@needs_bwrap
def test_a_kernel_that_fills_its_own_exchange_folder_gets_no_result_not_a_grader_error(tmp_path, monkeypatch,
                                                                                        tmp_path_factory):
    """The exchange folder is a capped memory file system: a cell that fills it and keeps it full
    leaves no room for the grader's calls. That is the submission's loss alone (NO_RESULT for the
    exercises checked after it), never the grader failing on the notebook (GRADER_ERROR)."""
    fill = ("data = b'x' * 2**20\nwith open('/sandbox/work/full', 'wb') as handle:\n    try:\n"
            "        while True:\n            handle.write(data)\n            handle.flush()\n"
            "    except OSError:\n        pass\n")
    rows = _unscanned(monkeypatch, tmp_path, "en", fill, answers=answer_keys.key(tmp_path_factory, "00"))
    codes = {exercise: row.code for exercise, row in rows.items()}
    assert "GRADER_ERROR" not in codes.values(), codes
    assert set(codes.values()) == {"NO_RESULT"}, codes


@needs_bwrap
def test_a_kernel_that_dies_costs_its_exercise_and_the_next_get_a_fresh_kernel(tmp_path, monkeypatch,
                                                                               tmp_path_factory):
    """A segmentation fault (numpy reading far past its array) kills the kernel while split_heads is checked:
    that exercise crashes with KERNEL_DIED, said in the notebook's language, and the exercises after it are
    graded in a fresh kernel."""
    crash = ("import numpy as np\n\n\ndef split_heads(x, num_heads):\n"
             "    return np.lib.stride_tricks.as_strided(np.zeros(1), shape=(2**30,), strides=(2**20,)).sum()\n")
    rows = _unscanned(monkeypatch, tmp_path, "zh", crash, exercise="00.split_heads",
                      answers=answer_keys.key(tmp_path_factory, "00"))
    assert (rows["00.split_heads"].status, rows["00.split_heads"].code) == ("crashed", "KERNEL_DIED"), rows
    assert "内核崩溃" in rows["00.split_heads"].message, rows["00.split_heads"].message
    assert all(row.status == "passed" for exercise, row in rows.items() if exercise != "00.split_heads"), rows


@needs_bwrap
def test_a_kernel_whose_start_was_cut_off_is_replaced_not_used(tmp_path, monkeypatch, tmp_path_factory):
    """On a machine busy enough, the grader's own start in a fresh kernel (its watcher: torch and the course
    imported) could be cut off at a learner's cell time: every exercise then came back NO_RESULT ("module
    'course_utils' has no attribute 'exercises'"). A start that did not finish is the kernel's failure, not the
    learner's: that kernel is killed and a fresh one started, and the solutions pass."""
    from course_teacher.grade import grader

    real_run, cut = runner.Kernel.run, []

    def run(kernel, code, timeout, **kwargs):
        if code == grader.KERNEL_START and not cut:  # the first kernel's start cut off halfway through its imports
            cut.append(timeout)
            return real_run(kernel, code, 0.05, **kwargs)
        return real_run(kernel, code, timeout, **kwargs)

    monkeypatch.setattr(runner.Kernel, "run", run)
    rows = _unscanned(monkeypatch, tmp_path, "en", "x = 1", answers=answer_keys.key(tmp_path_factory, "00"))
    assert cut and cut[0] >= grader.KERNEL_START_S - 1, cut  # the start's own time, not a learner cell's 30 s
    assert rows and all(row.status == "passed" for row in rows.values()), rows


def test_a_python_under_tmp_is_bound_onto_the_sandboxs_own_tmp_not_hidden_by_it(monkeypatch):
    """A clone in /tmp has its venv there: the sandbox's /tmp (a capped memory file system) must be
    mounted before the Python folders are bound, or it hides them (bwrap: execvp ... No such file)."""
    monkeypatch.setattr(sandbox, "python_folders", lambda: ["/tmp/clone/.venv", "/usr/lib/python3.11"])
    options = sandbox.file_system(connection_fd=9)
    pairs = list(zip(options, options[1:]))
    tmp_mount = pairs.index(("--tmpfs", "/tmp"))
    venv_bind = options.index("/tmp/clone/.venv")
    assert tmp_mount < venv_bind and options[venv_bind - 1] == "--ro-bind"
    assert ("--dir", "/tmp") not in pairs  # /tmp keeps its 1777: the kernel writes its temporary files there
    assert ("--dir", "/tmp/clone") in pairs


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid locks are the root mode's")
def test_a_uid_folder_made_first_by_someone_else_is_refused_and_grading_never_falls_back(tmp_path, monkeypatch,
                                                                                         tmp_path_factory):
    """Any user could make the uid-lock folder first when it lived in /tmp: the grader found no uid, and
    graded a single submission without its sandbox, as root. The folder is where only root can make it
    now, a folder that is not root's is refused, and a grader without its sandbox refuses to grade
    (NO_SANDBOX) unless told --no-sandbox."""
    from course_teacher.grade import grader

    run = Path("/run")
    assert sandbox.UID_LOCKS.parent == run and run.stat().st_uid == 0 and not run.stat().st_mode & 0o022
    taken = tmp_path / "course-grade-uids"
    taken.mkdir(mode=0o777)
    os.chown(taken, 12345, 12345)  # another user's, made first
    monkeypatch.setattr(sandbox, "UID_LOCKS", taken)
    with pytest.raises(OSError, match="not root's folder"):
        sandbox.claim()
    sandbox.available.cache_clear()
    try:
        ok, why = sandbox.available()
        assert not ok and "not root's folder" in why
        monkeypatch.setattr(grader, "sandbox_available", sandbox.available)
        notebook = ROOT / "notebooks" / "en" / "00_tensor_shapes.ipynb"
        out = tmp_path / "grades"
        key = answer_keys.key(tmp_path_factory, "00").folder
        assert grader.main([str(notebook), "--out", str(out), "--key", str(key)]) \
            == grader.NO_SANDBOX
        assert not out.exists(), "nothing is graded without the sandbox unless told --no-sandbox"
    finally:
        sandbox.available.cache_clear()


@needs_bwrap
def test_a_kernels_processes_share_one_memory_cap_where_the_machine_has_control_groups(tmp_path):
    """Each process's own cap (RLIMIT_AS) let one submission hold 4.8 GB in four processes of 4 GB
    each. A kernel's control group caps them together: four children that each hold 500 MB, under a
    1.5 GB cap, cannot all hold it at once (the system's out-of-memory killer kills in the group)."""
    from course_teacher.grade import cgroups

    probe = cgroups.Group(f"course-grade-probe-{os.getpid()}", 64)
    if probe is None:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail("no memory control group for a root grader under CI")
        pytest.skip("no memory control group here: each process's own cap holds (README)")
    probe.remove()
    kernel = _start(tmp_path / "kernel", memory_mb=1500)
    try:
        assert kernel.group is not None and kernel.group.path.is_dir()
        answer = _ask(kernel, """
            import os, time
            children = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    held = bytearray(500 * 2**20)  # zero-filled: every page touched
                    time.sleep(3)
                    os._exit(0)
                children.append(pid)
            answer = {"statuses": [os.waitpid(pid, 0)[1] for pid in children]}
        """, timeout=60)
    except Exception:  # the kernel itself may be the one killed: then no answer at all
        answer = {"statuses": None}
    finally:
        group = kernel.group
        kernel.kill()
    statuses = answer["statuses"]
    assert statuses is None or any(status != 0 for status in statuses), statuses
    assert not group.path.exists(), "the kernel's group is removed with it"
