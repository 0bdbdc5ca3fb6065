"""Grading submissions: each notebook in fresh kernels of its own, in a sandbox; verdicts judged here.

``grade_one`` reads a submission (submission.py: only a regular file, of a bounded size, whose
lesson its cells, its file name and the assignment agree on), reads the learner's code for what
the exercises forbid (scan.py, in this process: a kernel cannot forge it), starts a kernel in a
sandbox of its own (runner.py, sandbox.py), runs the notebook's cells in order up to each
exercise cell, asks the kernel to call the learner's function on this process's cases, public
and hidden (course_utils.exercises.kernel, wire) and judges the answer with the check engine
(grading.judge) against the answer key (key.py: the references' results as data, written by the
teacher's side before grading starts, read here). ``grade`` does that for every submission,
``--jobs`` at a time, and hands each result to the gradebook (gradebook.py) as soon as it is known.
``main`` is ``python -m course_teacher.grade``.
"""

import argparse
import ast
import contextlib
import ctypes
import functools
import importlib
import multiprocessing
import multiprocessing.connection
import os
import pkgutil
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import i18n
from course_utils.exercises import CRASHED, FAILED, PASSED, grading, sandbox, wire

from . import cgroups, copies
from .messages import message
from . import key as answer_key
from . import policy, runner, scan
from . import submission as reading
from .gradebook import Gradebook
from .runner import Kernel, KernelDied, Reply
from .sandbox import available as sandbox_available

ANSWER_MARGIN_S = 15  # beyond the per-call time limits, for the kernel to collect and write its answer
# Outcomes another submission graded at the same time could have caused (it took the CPU or the
# memory): a submission that has one is graded again, alone, before its result is final.
STRAINED = {"TIME_LIMIT", "KERNEL_DIED", "NO_RESULT"}
TEMPORARY_PREFIX = "course-grade-"

# The check engine's messages follow one process-wide language: judging happens one submission at a time.
_judging = threading.RLock()


@dataclass
class Options:
    time_limit: float = sandbox.TIME_LIMIT  # seconds for one call of a learner's function
    cell_timeout: float = 60.0  # seconds for one cell
    submission_timeout: float = 900.0  # seconds for one notebook, all in all
    memory_mb: int = 4096  # the kernel's address space (0: no limit)
    cells: str = "all"  # "all": every code cell; "own": imports, setup, exercises and the learner's own cells
    max_restarts: int = 3  # fresh kernels after deaths, per notebook
    answers: answer_key.Key = None  # the answer key (default: default_answers(), the public seed's)
    lesson: str = None  # the assignment's lesson ("00"), when the grader is told it
    sandboxed: bool = True  # each kernel in a bwrap sandbox of its own


@dataclass
class Row:
    exercise: str
    status: str
    code: str  # the named mistake or kind of failure ("" when none)
    message: str
    points: int
    max_points: int


@dataclass
class Graded:
    key: str
    student: str
    lesson: str
    lang: str
    notebook: str  # the submission's path under the folder graded (its file name, when given alone)
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # about the other cells, in the notebook's language
    review: list = field(default_factory=list)  # what the scan found for the teacher's review (the CSV's column)
    seconds: float = 0.0
    strained: bool = False  # a cell or a check ran out of time or memory (see STRAINED)

    @property
    def score(self):
        return sum(row.points for row in self.rows)

    @property
    def max_score(self):
        return sum(row.max_points for row in self.rows)


@contextlib.contextmanager
def _speaking(lang):
    """Judge and write messages in `lang`, one submission at a time."""
    with _judging:
        before = i18n.language()
        i18n.set_language(lang)
        try:
            yield
        finally:
            i18n.set_language(before)


def write_answers(folder, seed, lessons=None):
    """Write the answer key of this checkout's course (every lesson, or `lessons`), its hidden cases
    drawn from `seed`, into `folder`, and read it. In a process of its own: the references stay out
    of the grader's process, which then holds what a platform's autograder holds."""
    command = [sys.executable, "-m", "course_teacher.publish", "--key", str(folder), "--seed", str(int(seed))]
    for lesson in lessons or ():
        command += ["--lesson", lesson]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the answer key could not be written: {done.stderr.strip()[-2000:]}")
    return answer_key.read(folder)


@functools.cache
def default_answers():
    """The answer key of every lesson with the public seed, written once per process (tests, and
    callers of grade_one that give none)."""
    folder = tempfile.mkdtemp(prefix="course-answers-")
    return write_answers(folder, answer_key.DEFAULT_SEED)


@functools.cache
def load_course():
    """Import every module of the student package once: the scan compares the names a notebook
    reaches with the objects of the modules this process has loaded, so every grader, whatever it
    imported before, reads a notebook with the same modules loaded."""
    import course_utils

    for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)


# ----------------------------------------------------------------------------- one submission

class _OutOfTime(Exception):
    pass


#: What the grader runs first in each fresh kernel: the check's watcher set up before any cell of the learner's.
KERNEL_START = "import course_utils.exercises.kernel\ncourse_utils.exercises.kernel.start()"
#: Seconds for KERNEL_START in a fresh kernel (it imports torch and the course): the grader's own code, run
#: before any of the learner's, so not held to a learner's cell time; a busy machine can take a while.
KERNEL_START_S = 120.0


class _GaveUp(Exception):
    pass


class _Run:
    """The kernel of one submission, the cells it ran, and what became of the others."""

    def __init__(self, options, folder, stopping=None):
        self.options, self.folder, self.stopping = options, Path(folder), stopping
        self.kernel, self.ok, self.failed = None, [], {}  # failed: cell index -> Reply
        self.kernels, self.checks, self.deadline = 0, 0, time.monotonic() + options.submission_timeout

    def remaining(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _OutOfTime()
        return left

    def kernel_before(self, index):
        """A live kernel that has run every cell that ran well before cell `index`."""
        while self.kernel is None or not self.kernel.alive:
            if self.kernel is not None:
                self.kernel.kill()
                self.kernel = None
            if self.kernels > self.options.max_restarts:
                raise _GaveUp()
            self.kernels += 1
            folder = self.folder / f"kernel-{self.kernels}"
            folder.mkdir()
            if self.stopping is not None and self.stopping.is_set():  # the grader is being stopped
                raise KernelDied("stopped")
            kernel = Kernel(folder, self.options.memory_mb, sandboxed=self.options.sandboxed)
            kernel.start()  # KernelDied when it cannot
            self.kernel = kernel
            # before any cell: the threads alive now are the kernel's (a check fails while another runs)
            started = kernel.run(KERNEL_START, min(max(KERNEL_START_S, self.options.cell_timeout), self.remaining()),
                                 history=False)
            if not started.ok:  # cut off halfway (a machine too busy): a kernel without its watcher is no use
                kernel.kill()
                continue
            for cell in [c for c in self.ok if c.index < index]:  # again, after a death
                reply = kernel.run(cell.source, min(self.options.cell_timeout, self.remaining()))
                if not reply.ok:
                    self.ok.remove(cell)
                    self.failed[cell.index] = reply
                if not kernel.alive:
                    break
        return self.kernel

    def run_cell(self, cell):
        kernel = self.kernel_before(cell.index)
        reply = kernel.run(cell.source, min(self.options.cell_timeout, self.remaining()))
        if reply.ok:
            self.ok.append(cell)
        else:
            self.failed[cell.index] = reply

    def collect(self, cell, function, reference):
        """The kernel's answer for `function` (defined by `cell`) on the reference's calls: a
        Reply that is not ok, or the answer's data."""
        kernel = self.kernel_before(cell.index + 1)
        self.checks += 1  # our own count: the kernel writes its folder, and may plant files there
        calls_name, answer_name = f"calls-{self.checks}.pt", f"answer-{self.checks}.pt"
        with _judging:
            calls = dict(reference.calls, time_limit=float(self.options.time_limit))
        try:
            wire.save(calls, kernel.work / calls_name, mode=0o644)  # the sandbox's user reads it
        except OSError as error:  # the kernel filled (or broke) its own exchange folder: its loss alone
            raise wire.WireError(f"the kernel's folder took no calls ({error.strerror or error})") from None
        # an import statement, not __import__(...): a name the notebook could bind (the scan reviews that too)
        code = ("import course_utils.exercises.kernel\ncourse_utils.exercises.kernel.collect("
                f"globals(), {function!r}, {kernel.inside(calls_name)!r}, {kernel.inside(answer_name)!r})")
        budget = (2 * len(reference.cases) + 1) * self.options.time_limit + ANSWER_MARGIN_S
        reply = kernel.run(code, min(budget, self.remaining()), history=False)
        if not reply.ok:
            return reply, budget
        return wire.load(kernel.work / answer_name), budget

    def close(self):
        if self.kernel is not None:
            self.kernel.kill()
            self.kernel = None


def grade_one(path, key, student, options=None, shown=None, folder=None, stopping=None):
    """Grade the notebook at `path`; its Graded (rows in the lesson's order, feedback notes).
    folder: where its kernels' folders go (default: a temporary folder of its own); stopping: a
    threading.Event that, once set, lets it start no new kernel (the grader is being stopped)."""
    options = options or Options()
    answers = options.answers or default_answers()
    started = time.monotonic()
    found = reading.read(path, key, student, lesson=options.lesson)
    graded = Graded(key, student, found.lesson or "", found.lang, shown or Path(path).name)
    try:
        if found.unreadable or found.lesson not in answers.lessons or found.mismatch:
            _not_graded(graded, found, answers)
        else:
            _grade(graded, found, options, answers, folder, stopping)
    except Exception as error:  # noqa: BLE001 (a bug of the grader's: this notebook gets a verdict, the others go on)
        traceback.print_exc()
        with _speaking(found.lang):
            exercises = answers.plan(found.lesson, found.lang)[0] if found.lesson in answers.lessons else ()
            text = f"{type(error).__name__}: {error}"[:200]
            graded.rows = [Row(e.id, CRASHED, "GRADER_ERROR", message("grade.grader_error", exercise=e.id, error=text),
                               0, e.points) for e in exercises]
    graded.seconds = time.monotonic() - started
    return graded


def _not_graded(graded, found, answers):
    """Rows for a submission the grader does not run: no lesson (or one the answer key lacks), not a
    notebook it can read, or the notebook of another lesson than its name or the assignment says
    (every exercise 0)."""
    with _speaking(found.lang):
        if found.lesson is None:
            graded.rows = [Row("", CRASHED, found.problem or "UNKNOWN_LESSON",
                               found.unreadable or message("grade.unknown_lesson"), 0, 0)]
            return
        if found.lesson not in answers.lessons:
            graded.rows = [Row("", CRASHED, "UNKNOWN_LESSON", message("grade.not_in_key", lesson=found.lesson,
                               lessons=", ".join(answers.lessons)), 0, 0)]
            return
        for exercise in answers.plan(found.lesson, found.lang)[0]:
            if found.unreadable:
                row = Row(exercise.id, CRASHED, found.problem or "UNREADABLE",
                          message("grade.unreadable", exercise=exercise.id, error=found.unreadable), 0, exercise.points)
            else:
                row = Row(exercise.id, FAILED, "WRONG_LESSON", message("grade.wrong_lesson", exercise=exercise.id,
                          lesson=found.lesson, why=found.mismatch), 0, exercise.points)
            graded.rows.append(row)


def _grade(graded, found, options, answers, folder, stopping):
    load_course()
    with _judging:
        exercises, course_cells = answers.plan(found.lesson, found.lang)
    located = {e.id: reading.exercise_cell(found, e) for e in exercises}
    exercise_cells = {cell.index for cell, _ in located.values() if cell is not None}
    to_run = cells_to_run(found.cells, exercise_cells, options.cells, course_cells)
    findings = scan.scan(found.cells, answers.course_cells(found.lesson), scan.targets(found, exercises))
    graded.review = sorted({f"{hit.code} (cell {hit.cell})" for hit in findings.review})
    verdicts, notes = {}, []
    folder = tempfile.mkdtemp(prefix="submission-", dir=folder)
    run = _Run(options, folder, stopping)
    try:
        position = 0
        for exercise in sorted(exercises, key=lambda e: located[e.id][0].index if located[e.id][0] else -1):
            cell, by_name = located[exercise.id]
            read = findings.verdict(exercise.id)
            if read is not None:  # the learner's code, read here, settles it: nothing to run
                verdicts[exercise.id] = _read_verdict(read)
                continue
            if cell is None:
                verdicts[exercise.id] = ("MISSING_CELL", {"name": exercise.function})
                continue
            source = copied_from(cell, exercise, answers)
            if source:
                verdicts[exercise.id] = ("COPY", {"source": source, "cell": cell.where[0]})
                graded.review.append(f"{exercise.function}: {source} (cell {cell.where[0]})")
                continue
            if by_name:
                notes.append(("grade.found_by_name", {"exercise": exercise.id, "name": exercise.function}))
            try:
                for other in to_run[position:]:
                    if other.index > cell.index:
                        break
                    position += 1
                    run.run_cell(other)
                verdicts[exercise.id] = _check(run, cell, exercise, options, answers)
            except _OutOfTime:
                verdicts[exercise.id] = ("OUT_OF_TIME", {"seconds": options.submission_timeout})
            except _GaveUp:
                verdicts[exercise.id] = ("GAVE_UP", {"count": run.kernels})
            except KernelDied:
                verdicts[exercise.id] = ("NO_KERNEL", {})
    finally:
        run.close()
        shutil.rmtree(folder, ignore_errors=True)
    graded.strained = any(reply.status in ("died", "timeout") for reply in run.failed.values())
    with _speaking(found.lang):
        for cell in found.cells:
            reply = run.failed.get(cell.index)
            if reply is not None and cell.index not in exercise_cells:
                graded.notes.append(_cell_note(cell, reply, options))
        graded.notes += [message(key, **fields) for key, fields in notes]
        for exercise in exercises:
            outcome = verdicts[exercise.id]
            if isinstance(outcome, tuple) and outcome[0] == "JUDGE":
                outcome = _judge(outcome[1]["answer"], outcome[1]["reference"], options)
            graded.rows.append(_row(exercise, outcome))
            if isinstance(outcome, _Judged) and outcome.printed > sandbox.OUTPUT_LIMIT:
                graded.notes.append(message("grade.printed", exercise=exercise.id, count=outcome.printed,
                                            limit=sandbox.OUTPUT_LIMIT))
    graded.strained |= any(row.code in STRAINED for row in graded.rows)


def copied_from(cell, exercise, answers):
    """What the learner's function is a copy of (copies.py: the course's own code), or None."""
    tree = reading.parse(cell.source)
    if not isinstance(tree, ast.AST):
        return None
    function = next((node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.name == exercise.function), None)
    return copies.copy_of(function, answers.copies)


def _read_verdict(found):
    """The verdict of an exercise that the scan settles (scan.Verdict): a forbidden name, or code it cannot read."""
    hit = found.hits[0]
    fields = {"cell": hit.cell, "first": hit.line}
    if found.mistake == scan.FORBIDDEN:
        return ("FORBIDDEN_CODE", dict(fields, name=hit.name))
    return ("FOR_REVIEW", dict(fields, code=hit.code))


def cells_to_run(cells, exercise_cells, mode, course_cells):
    """The code cells the grader runs, in order: the exercise cells (indices `exercise_cells`) and,
    but for check cells, every other cell ("all") or those that import or call setup or that the
    learner wrote or changed, that is, whose text is not one of `course_cells` ("own")."""
    return [c for c in cells if c.index in exercise_cells
            or (not reading.checked(c.source) and (mode == "all" or _own(c, course_cells)))]


def _own(cell, course_cells):
    """In "own" mode, whether a cell runs: it imports or sets up, or the learner wrote or changed it."""
    if cell.source.strip() not in course_cells:
        return True
    tree = reading.parse(cell.source)
    if not hasattr(tree, "body"):
        return True
    return any(type(node).__name__ in ("Import", "ImportFrom") for node in tree.body) or "setup(" in cell.source


@dataclass
class _Judged:
    verdict: grading.Verdict
    printed: int = 0


def _check(run, cell, exercise, options, answers):
    """What becomes of one exercise, its cell having been run (or having failed)."""
    tree = reading.parse(cell.source)
    reply = run.failed.get(cell.index)
    if reply is not None:
        if isinstance(tree, SyntaxError):
            return ("SYNTAX_ERROR", {"line": tree.lineno or "?", "text": tree.msg or str(tree)})
        return _cell_verdict(reply, options)
    names = reading.defined(tree) if not isinstance(tree, SyntaxError) else [exercise.function]  # ran: trust it
    if exercise.function not in names:
        functions = [n for n in names if n not in _imported(tree)]
        if functions:
            return ("RENAMED", {"name": exercise.function, "found": ", ".join(f"`{n}`" for n in functions[:5])})
        return ("DELETED", {"name": exercise.function})
    with _judging:
        reference = answers.reference(exercise.id)
    try:
        answer, budget = run.collect(cell, exercise.function, reference)
    except wire.WireError as error:  # no answer file, or not one: the kernel's side was broken or replaced
        return ("NO_RESULT", {"why": str(error)})
    if isinstance(answer, Reply):
        if answer.status == "died":
            return ("KERNEL_DIED", {"memory": options.memory_mb})
        if answer.status == "timeout":
            return ("COLLECT_TIMEOUT", {"seconds": round(budget)})
        return ("NO_RESULT", {"why": f"{answer.error}: {answer.text}"})
    if isinstance(answer, dict) and answer.get("missing") is True:
        return ("MISSING_FUNCTION", {"name": exercise.function})
    if isinstance(answer, dict) and isinstance(answer.get("not_callable"), str):
        return _Judged(grading.not_callable(exercise.id, answer["not_callable"]))
    return ("JUDGE", {"answer": answer, "reference": reference, "lang": None})


def _imported(tree):
    return {(a.asname or a.name).split(".")[0] for node in tree.body if type(node).__name__ in ("Import", "ImportFrom")
            for a in node.names}


def _cell_verdict(reply, options):
    if reply.status == "died":
        return ("KERNEL_DIED_CELL", {"memory": options.memory_mb})
    if reply.status == "timeout":
        return ("CELL_TIMEOUT", {"seconds": options.cell_timeout})
    if reply.error in ("SyntaxError", "IndentationError", "TabError"):
        return ("SYNTAX_ERROR", {"line": "?", "text": reply.text})
    return ("CELL_ERROR", {"error": reply.error, "text": reply.text})


# (message key, status) of the grader's own verdicts
VERDICTS = {
    "MISSING_CELL": ("grade.missing_cell", FAILED), "RENAMED": ("grade.renamed", FAILED),
    "DELETED": ("grade.deleted", FAILED), "MISSING_FUNCTION": ("grade.missing_function", FAILED),
    "SYNTAX_ERROR": ("grade.syntax_error", CRASHED), "CELL_ERROR": ("grade.cell_failed", CRASHED),
    "CELL_TIMEOUT": ("grade.cell_timeout", CRASHED), "KERNEL_DIED_CELL": ("grade.kernel_died_cell", CRASHED),
    "KERNEL_DIED": ("grade.kernel_died", CRASHED), "COLLECT_TIMEOUT": ("grade.collect_timeout", CRASHED),
    "NO_RESULT": ("grade.no_result", CRASHED), "OUT_OF_TIME": ("grade.out_of_time", CRASHED),
    "GAVE_UP": ("grade.gave_up", CRASHED), "NO_KERNEL": ("grade.no_kernel", CRASHED),
    "FORBIDDEN_CODE": ("grade.forbidden_code", FAILED), "FOR_REVIEW": ("grade.for_review", FAILED),
    "COPY": ("grade.copy", FAILED),
    "PROCESS_DIED": ("grade.process_died", CRASHED),
}
# the code a verdict gets in the gradebook
_CODES = {"KERNEL_DIED_CELL": "KERNEL_DIED", "CELL_TIMEOUT": "TIME_LIMIT", "COLLECT_TIMEOUT": "TIME_LIMIT",
          "OUT_OF_TIME": "TIME_LIMIT", "GAVE_UP": "KERNEL_DIED", "NO_KERNEL": "NO_RESULT",
          "FORBIDDEN_CODE": "FORBIDDEN", "FOR_REVIEW": "REVIEW", "COPY": "REVIEW",
          "PROCESS_DIED": "NO_RESULT"}


def _copy_source(label):
    """A fingerprint's label (publish.course_fingerprints) as the feedback names it, in the current language."""
    kind, _, name = label.partition(" ")
    if kind == "reference":
        return message(f"grade.copy.{kind}", exercise=name)
    return message("grade.copy.package", name=label)


def _row(exercise, outcome):
    """The gradebook row of one exercise (called in the notebook's language)."""
    if isinstance(outcome, _Judged):
        verdict = outcome.verdict
        points = exercise.points if verdict.status == PASSED else 0
        return Row(exercise.id, verdict.status, verdict.code or "", verdict.message, points, exercise.points)
    kind, fields = outcome
    if kind == "COPY":
        fields = dict(fields, source=_copy_source(fields["source"]))
    key, status = VERDICTS[kind]
    return Row(exercise.id, status, _CODES.get(kind, kind), message(key, exercise=exercise.id, **fields), 0,
               exercise.points)


def _judge(answer, reference, options):
    try:
        received = wire.decode(answer, reference, options.time_limit)
        received.changed = grader_words(received.changed)
        return _Judged(grading.judge(reference, received), received.printed)
    except wire.WireError as error:
        return ("NO_RESULT", {"why": str(error)})
    except Exception as error:  # noqa: BLE001 (the judge on odd data: a verdict for this exercise, not a crash)
        return ("NO_RESULT", {"why": type(error).__name__})


def grader_words(changed):
    """What the kernel says the learner's function changed (kind, name), in the grader's words: a
    name from policy.FIXED_CHANGES as it is, any other (``torch.leak_<a hidden input>``: a name the
    learner's code chose) as one "a torch attribute", whatever their number, kinds and order."""
    kept = [(kind, name) for kind, name in changed if kind == "setting" or name in policy.FIXED_CHANGES]
    if len(kept) < len(changed):
        kept.append(("replaced", message("grade.changed_attribute")))
    return kept


def _cell_note(cell, reply, options):
    number, first = cell.where
    if reply.status == "died":
        return message("grade.cell_died", cell=number, first=first, memory=options.memory_mb)
    if reply.status == "timeout":
        return message("grade.cell_time_limit", cell=number, first=first, seconds=options.cell_timeout)
    text = reply.text
    tree = reading.parse(cell.source)
    if isinstance(tree, SyntaxError):  # the parser's words, not the kernel's (which name a temporary file)
        text = f"{tree.msg} (line {tree.lineno})" if tree.lineno else str(tree.msg)
    text = text if text.endswith((".", "。")) or not text else text + "."
    return message("grade.cell_error", cell=number, first=first, error=reply.error, text=text)


# ----------------------------------------------------------------------------- every submission

class Interrupted(Exception):
    """The run was stopped (SIGINT, SIGTERM): the submissions that finished are in the gradebook."""


def grade(path, options=None, *, jobs=2, student=None, skip=None, report=None):
    """Grade the notebook or every notebook under `path` (`jobs` at a time); [Graded] in path order.
    report(graded) is called as each result is final. A submission whose run was strained (a cell
    or a check out of time or memory, which a neighbour graded at the same time could have caused)
    is graded again alone, so that no submission's grade depends on another's.

    Each submission is graded in a process of its own (``_Children``), stopped from outside at its
    deadline (``submission_timeout`` and DEADLINE_MARGIN_S): whatever one submission makes the grader
    do, the others are graded and the run completes."""
    options = options or Options()
    found = reading.find(path, student=student, skip=skip)
    base = Path(path)
    jobs = max(1, min(jobs, len(found)))
    _sweep()
    work = tempfile.mkdtemp(prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-")

    def arguments(item):
        shown = item.path.name if base.is_file() else item.path.relative_to(base).as_posix()
        return item.path, item.key, item.student, options, shown, work

    results = {}

    def done(item, graded, alone):
        if graded.strained and not alone:
            return  # graded again alone below
        results[item.key] = graded
        if report:
            report(graded)

    try:
        with _Children(options) as children:
            children.run(found, arguments, lambda item, graded: done(item, graded, jobs == 1), jobs)
            strained = [item for item in found if item.key not in results]
            children.run(strained, arguments, lambda item, graded: done(item, graded, True), 1)
    except KeyboardInterrupt:
        raise Interrupted() from None
    finally:
        runner.kill_all()
        shutil.rmtree(work, ignore_errors=True)
    return [results[item.key] for item in found]


#: How each submission's grading process starts: forked from a server that imported the grader and
#: the student package once (multiprocessing's forkserver: a few milliseconds a submission, and no
#: thread or lock of this process inherited). Code that changes the grader in this process before
#: grading (tests: the scan turned off) sets "fork", so that the children inherit the change.
START_METHOD = "forkserver"
DEADLINE_MARGIN_S = 60  # beyond submission_timeout: the scan, the judge, the data sent back


class _Children:
    """The processes that grade submissions, `jobs` at a time, each killed at its deadline."""

    def __init__(self, options):
        self.options, self.running = options, {}
        self.context = multiprocessing.get_context(START_METHOD)
        if START_METHOD == "forkserver":
            import course_utils

            modules = [info.name for info in pkgutil.walk_packages(course_utils.__path__, "course_utils.")
                       if not info.name.endswith("__main__")]
            self.context.set_forkserver_preload([__name__, *modules])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for _, process, _ in self.running.values():
            process.kill()  # its kernels die with it (launch.py, runner.py)
        for _, process, _ in self.running.values():
            process.join()
        self.running.clear()

    def run(self, items, arguments, finished, jobs):
        """Grade `items`, `jobs` at a time; finished(item, Graded) as each ends."""
        pending = list(items)
        while pending or self.running:
            while pending and len(self.running) < jobs:
                item = pending.pop(0)
                reading_end, writing_end = self.context.Pipe(duplex=False)
                process = self.context.Process(target=_child, args=(writing_end, *arguments(item)), daemon=True)
                process.start()
                writing_end.close()
                deadline = time.monotonic() + self.options.submission_timeout + DEADLINE_MARGIN_S
                self.running[reading_end] = (item, process, deadline)
            wait = max(0.0, min(deadline for _, _, deadline in self.running.values()) - time.monotonic())
            for connection in multiprocessing.connection.wait(list(self.running), timeout=min(wait, 5.0)):
                item, process, _ = self.running.pop(connection)
                try:
                    graded = connection.recv()
                except (EOFError, OSError):  # the process died without an answer
                    graded = None
                connection.close()
                process.join()
                finished(item, graded if isinstance(graded, Graded) else self._lost(item, arguments, "died"))
            now = time.monotonic()
            for connection, (item, process, deadline) in list(self.running.items()):
                if now > deadline:
                    del self.running[connection]
                    process.kill()
                    process.join()
                    connection.close()
                    finished(item, self._lost(item, arguments, "deadline"))

    def _lost(self, item, arguments, why):
        """The Graded of a submission whose process gave no result: every exercise 0, saying why."""
        path, key, student, options, shown, _ = arguments(item)
        found = reading.read(path, key, student, lesson=options.lesson)
        answers = options.answers or default_answers()
        graded = Graded(key, student, found.lesson or "", found.lang, shown)
        seconds = options.submission_timeout + DEADLINE_MARGIN_S
        with _speaking(found.lang):
            exercises = answers.plan(found.lesson, found.lang)[0] if found.lesson in answers.lessons else ()
            kind = "OUT_OF_TIME" if why == "deadline" else "PROCESS_DIED"
            graded.rows = [_row(e, (kind, {"seconds": round(seconds)})) for e in exercises]
        graded.strained = True
        return graded


def _child(connection, *arguments):
    """A grading process: grade one submission, send its Graded back."""
    _die_with_parent()
    try:
        connection.send(grade_one(*arguments))
    finally:
        connection.close()


def _die_with_parent():
    """Ask the system to kill this process when its parent dies (a killed grader leaves no grading
    process, hence no kernel, behind), on Linux; and stop now if the parent is gone already."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _sweep():
    """Remove the temporary folders and control groups of earlier runs whose grader is gone (killed:
    nothing cleaned up)."""
    cgroups.sweep(_alive)
    pattern = re.compile(rf"^{re.escape(TEMPORARY_PREFIX)}(\d+)-")
    for entry in os.scandir(tempfile.gettempdir()):
        found = pattern.match(entry.name)
        if found and entry.is_dir(follow_symlinks=False) and not _alive(int(found.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def write(results, out):
    """Write the gradebook of `results` (a list of Graded) under `out`; the path of grades.csv."""
    gradebook = Gradebook(out)
    for graded in results:
        gradebook.add(graded)
    gradebook.close()
    return Path(out) / "grades.csv"


# ----------------------------------------------------------------------------- the command

#: main's exit code when it has no sandbox and was not told --no-sandbox (an autograder then decides).
NO_SANDBOX = 3
NO_SANDBOX_WARNING = (
    "warning: grading WITHOUT a sandbox ({why}). Every submission's code runs as you, with your files and "
    "your network: one submission can change another's grade, read the answers and your files. Grade "
    "untrusted work only in a sandbox (install bubblewrap: apt-get install bubblewrap), or in a container "
    "or CI job that holds nothing else."
)


def _min_score(text):
    """--min-score: points ("3") or a share of the maximum ("75%")."""
    try:
        return (float(text[:-1]) / 100, True) if text.endswith("%") else (float(text), False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs points (3) or a percentage (75%), got {text!r}") from None


def _stop(signum, frame):
    raise KeyboardInterrupt()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m course_teacher.grade",
        description="Grade submitted notebooks: grades.csv, a result.json and feedback.md per submission.")
    parser.add_argument("submissions", help="a notebook, or a folder of them (the first folder under it names the student)")
    parser.add_argument("--out", default="grades", help="output folder (default: grades)")
    parser.add_argument("--min-score", type=_min_score, default=(0.0, False),
                        help="exit 1 unless every submission scores at least this: points (3) or a percentage (75%%)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default: 2)")
    parser.add_argument("--student", help="the student's id for every submission (default: from the path)")
    parser.add_argument("--lesson", help="the assignment's lesson (00, 01, ...): a notebook of another lesson scores 0")
    parser.add_argument("--seed", type=int, default=None,
                        help="your own secret number: it draws the hidden cases (default: a public one; see the README)")
    parser.add_argument("--key", metavar="FOLDER",
                        help="grade against this answer key (an autograder's: python -m course_teacher.publish --key) "
                        "instead of one written from this checkout with --seed")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run the kernels without bubblewrap (only for work you trust: see the README)")
    parser.add_argument("--cells", choices=("all", "own"), default="all",
                        help="run every code cell (all, default), or only imports and setup, the exercise cells "
                        "and the cells the learner wrote or changed (own: faster)")
    parser.add_argument("--time-limit", type=float, default=sandbox.TIME_LIMIT,
                        help="seconds for one call of a learner's function (default: %(default)g)")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds for one cell (default: 60)")
    parser.add_argument("--submission-timeout", type=float, default=900.0,
                        help="seconds for one notebook in all (default: 900)")
    parser.add_argument("--memory-mb", type=int, default=4096,
                        help="the kernel's address-space limit in MB, 0 for none (default: 4096)")
    args = parser.parse_args(argv)
    if not os.path.lexists(args.submissions):
        parser.error(f"argument submissions: {args.submissions!r} does not exist")
    try:
        lesson = reading.assignment(args.lesson)
    except ValueError as error:
        parser.error(f"argument --lesson: {error}")
    if args.key and args.seed is not None:
        parser.error("argument --seed: an answer key (--key) holds its hidden cases already")
    answers = None
    if args.key:
        try:
            answers = answer_key.read(args.key)
        except answer_key.NotAKey as error:
            parser.error(f"argument --key: {error}")
    found = reading.find(args.submissions, student=args.student, skip=args.out)
    if not found:
        parser.error(f"argument submissions: no notebook (.ipynb) in {args.submissions!r}")
    sandboxed = not args.no_sandbox
    if sandboxed:
        ok, why = sandbox_available()
        if not ok:  # never graded without it unless told: a kernel would run as this user, root included
            print(f"error: no sandbox for the kernels: {why}.\nWithout one, a submission's code runs as you: it "
                  "can change another's grade, read your files and use your network. Install bubblewrap "
                  "(apt-get install bubblewrap), or grade in the course's CI or a container; --no-sandbox grades "
                  "anyway, for one submission in a container of its own (see the README).", file=sys.stderr)
            return NO_SANDBOX
    else:
        print(NO_SANDBOX_WARNING.format(why="--no-sandbox"), file=sys.stderr)
    written = None  # the answer key written from this checkout, removed at the end
    if answers is None:
        if args.seed is None:
            print("note: the hidden cases come from the public default seed; give your own with --seed "
                  "(make grade SEED=...) so that no student can know them.", file=sys.stderr)
        written = tempfile.mkdtemp(prefix="course-answers-")
        seed = answer_key.DEFAULT_SEED if args.seed is None else args.seed
        lessons = [lesson] if lesson else submitted_lessons(found)
        # no submission of any lesson: nothing is judged, so no reference is computed
        answers = write_answers(written, seed, lessons) if lessons else answer_key.Key(written, {})
    try:
        return _run(args, found, Options(args.time_limit, args.cell_timeout, args.submission_timeout, args.memory_mb,
                                         args.cells, answers=answers, lesson=lesson, sandboxed=sandboxed))
    finally:
        if written:
            shutil.rmtree(written, ignore_errors=True)


def submitted_lessons(found):
    """The lessons of the submissions `found` as grade_one reads them, in order. Writing the answer
    key of only these is what `make grade` saves most: the references of every lesson cost a minute
    of CPU (lesson 10's generation above all), one lesson's a few seconds. The grades are the same:
    a submission is judged against its own lesson's part of the key alone, and one of no lesson
    (or unreadable without one) gets a message that names no lesson. (Reading here costs what a
    child reads again: a bounded file, opened without following a link or blocking, as _lost does.)"""
    return sorted({reading.read(item.path, item.key, item.student).lesson for item in found} - {None})


def _run(args, found, options):
    """Grade what `main` found, into the gradebook; main's exit code."""
    started = time.monotonic()
    gradebook = Gradebook(args.out)

    def report(graded):
        gradebook.add(graded)
        print(f"{graded.key}: {graded.score} / {graded.max_score} ({graded.seconds:.1f} s)", flush=True)

    # SIGTERM as Ctrl-C: kernels killed, what finished kept (a handler can only be set in the main thread)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop) if main_thread else None
    try:
        results = grade(args.submissions, options, jobs=args.jobs, student=args.student, skip=args.out, report=report)
    except Interrupted:
        print(f"stopped: the gradebook in {args.out} holds the submissions that finished", file=sys.stderr)
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    gradebook.close()
    bar, share = args.min_score
    below = [g.key for g in results if g.score < (bar * g.max_score if share else bar)]
    print(f"graded {len(results)} submission(s) in {time.monotonic() - started:.1f} s: {Path(args.out) / 'grades.csv'}")
    if below:
        print(f"below --min-score: {', '.join(below)}", file=sys.stderr)
    return 1 if below else 0
