"""Grading submissions: one notebook in one fresh kernel, verdicts judged here; the gradebook.

``grade_one`` reads a submission (submission.py), starts a kernel (runner.py), runs the
notebook's cells in order up to each exercise cell, asks the kernel to call the learner's
function on this process's cases (kernel.py, wire.py) and judges the answer with the check
engine (grading.judge). ``grade`` does that for every submission, ``--jobs`` at a time, and
writes the gradebook (``write``). ``main`` is ``python -m course_utils.grade``.
"""

import argparse
import contextlib
import csv
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import i18n
from course_utils.exercises import CRASHED, FAILED, PASSED, grading, sandbox, wire
from course_utils.i18n import message

from ..exercises import EXERCISES, prepare
from . import submission as reading
from .runner import ForkServer, Kernel, KernelDied, Reply

CSV_COLUMNS = ("student", "lesson", "exercise", "status", "mistake", "points", "max_points", "submission", "review")
RESULT_SCHEMA = "classroom50/result/v1"
# The identity fields of a Classroom 50 result, from the variables its runner sets (when set).
RESULT_ENVIRONMENT = (("classroom", "CLASSROOM"), ("assignment", "ASSIGNMENT"), ("owner", "OWNER"),
                      ("submission", "SUBMISSION_TAG"), ("commit", "COMMIT_URL"), ("release", "RELEASE_URL"),
                      ("review", "REVIEW_URL"))
ANSWER_MARGIN_S = 15  # beyond the per-call time limits, for the kernel to collect and write its answer

# The check engine's messages follow one process-wide language, and the references are computed
# with torch's global random state forked: judging happens one submission at a time.
_judging = threading.RLock()
_references = {}


@dataclass
class Options:
    time_limit: float = sandbox.TIME_LIMIT  # seconds for one call of a learner's function
    cell_timeout: float = 60.0  # seconds for one cell
    submission_timeout: float = 900.0  # seconds for one notebook, all in all
    memory_mb: int = 4096  # the kernel's address space (0: no limit)
    cells: str = "all"  # "all": every code cell; "own": imports, setup, exercises and the learner's own cells
    max_restarts: int = 3  # fresh kernels after deaths, per notebook


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
    review: list = field(default_factory=list)
    seconds: float = 0.0

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


def _reference(exercise):
    """The exercise's Reference, computed once per process (under the lock: it mutates nothing
    the next submission sees except the labels, which every judge sets again)."""
    if exercise not in _references:
        _references[exercise] = prepare(EXERCISES[exercise])
    return _references[exercise]


# ----------------------------------------------------------------------------- one submission

class _OutOfTime(Exception):
    pass


class _GaveUp(Exception):
    pass


class _Run:
    """The kernel of one submission, the cells it ran, and what became of the others."""

    def __init__(self, options, folder, server):
        self.options, self.folder, self.server = options, Path(folder), server
        self.kernel, self.ok, self.failed = None, [], {}  # failed: cell index -> Reply
        self.kernels, self.deadline = 0, time.monotonic() + options.submission_timeout

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
            kernel = Kernel(folder, self.options.memory_mb, server=self.server)
            kernel.start()  # KernelDied when it cannot
            self.kernel = kernel
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
        folder = Path(kernel.folder)
        number = len(list(folder.glob("calls-*.pt"))) + 1
        calls_path, answer_path = folder / f"calls-{number}.pt", folder / f"answer-{number}.pt"
        with _judging:
            calls = dict(reference.calls, time_limit=float(self.options.time_limit))
        wire.save(calls, calls_path)
        code = (f"__import__('course_utils.exercises.kernel', fromlist=['collect']).collect("
                f"globals(), {function!r}, {str(calls_path)!r}, {str(answer_path)!r})")
        budget = (2 * len(reference.cases) + 1) * self.options.time_limit + ANSWER_MARGIN_S
        reply = kernel.run(code, min(budget, self.remaining()), history=False)
        if not reply.ok:
            return reply, budget
        return wire.load(answer_path), budget

    def close(self):
        if self.kernel is not None:
            self.kernel.kill()
            self.kernel = None


def grade_one(path, key, student, options=None, shown=None, server=None):
    """Grade the notebook at `path`; its Graded (rows in the lesson's order, feedback notes).
    server: a runner.ForkServer to fork its kernel (else it is started from nothing)."""
    options = options or Options()
    started = time.monotonic()
    found = reading.read(path, key, student)
    graded = Graded(key, student, found.lesson or "", found.lang, shown or Path(path).name, review=found.review)
    try:
        if found.unreadable or found.lesson is None:
            _unreadable(graded, found)
        else:
            _grade(graded, found, options, server)
    except Exception as error:  # noqa: BLE001 (a bug of the grader's: this notebook gets a verdict, the others go on)
        traceback.print_exc()
        with _speaking(found.lang):
            exercises = reading.plan(found.lesson, found.lang)[0] if found.lesson else ()
            text = f"{type(error).__name__}: {error}"[:200]
            graded.rows = [Row(e.id, CRASHED, "GRADER_ERROR", message("grade.grader_error", exercise=e.id, error=text),
                               0, e.points) for e in exercises]
    graded.seconds = time.monotonic() - started
    return graded


def _unreadable(graded, found):
    with _speaking(found.lang):
        if found.lesson is None:
            graded.rows = [Row("", CRASHED, "UNKNOWN_LESSON", message("grade.unknown_lesson"), 0, 0)]
            return
        exercises = reading.plan(found.lesson, found.lang)[0]
        graded.rows = [Row(e.id, CRASHED, "UNREADABLE", message("grade.unreadable", exercise=e.id, error=found.unreadable),
                           0, e.points) for e in exercises]


def _grade(graded, found, options, server):
    with _judging:
        exercises, course_cells = reading.plan(found.lesson, found.lang)
    located = {e.id: reading.exercise_cell(found, e) for e in exercises}
    exercise_cells = {cell.index for cell, _ in located.values() if cell is not None}
    to_run = cells_to_run(found.cells, exercise_cells, options.cells, course_cells)
    verdicts, notes = {}, []
    folder = tempfile.mkdtemp(prefix="course-grade-")
    run = _Run(options, folder, server)
    try:
        position = 0
        for exercise in sorted(exercises, key=lambda e: located[e.id][0].index if located[e.id][0] else -1):
            cell, by_name = located[exercise.id]
            if cell is None:
                verdicts[exercise.id] = ("MISSING_CELL", {"name": exercise.function})
                continue
            if by_name:
                notes.append(("grade.found_by_name", {"exercise": exercise.id, "name": exercise.function}))
            try:
                for other in to_run[position:]:
                    if other.index > cell.index:
                        break
                    position += 1
                    run.run_cell(other)
                verdicts[exercise.id] = _check(run, cell, exercise, options)
            except _OutOfTime:
                verdicts[exercise.id] = ("OUT_OF_TIME", {"seconds": options.submission_timeout})
            except _GaveUp:
                verdicts[exercise.id] = ("GAVE_UP", {"count": run.kernels})
            except KernelDied:
                verdicts[exercise.id] = ("NO_KERNEL", {})
    finally:
        run.close()
        shutil.rmtree(folder, ignore_errors=True)
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


def _check(run, cell, exercise, options):
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
        reference = _reference(exercise.id)
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
_VERDICTS = {
    "MISSING_CELL": ("grade.missing_cell", FAILED), "RENAMED": ("grade.renamed", FAILED),
    "DELETED": ("grade.deleted", FAILED), "MISSING_FUNCTION": ("grade.missing_function", FAILED),
    "SYNTAX_ERROR": ("grade.syntax_error", CRASHED), "CELL_ERROR": ("grade.cell_failed", CRASHED),
    "CELL_TIMEOUT": ("grade.cell_timeout", CRASHED), "KERNEL_DIED_CELL": ("grade.kernel_died_cell", CRASHED),
    "KERNEL_DIED": ("grade.kernel_died", CRASHED), "COLLECT_TIMEOUT": ("grade.collect_timeout", CRASHED),
    "NO_RESULT": ("grade.no_result", CRASHED), "OUT_OF_TIME": ("grade.out_of_time", CRASHED),
    "GAVE_UP": ("grade.gave_up", CRASHED), "NO_KERNEL": ("grade.no_kernel", CRASHED),
}
# the code a verdict gets in the gradebook
_CODES = {"KERNEL_DIED_CELL": "KERNEL_DIED", "CELL_TIMEOUT": "TIME_LIMIT", "COLLECT_TIMEOUT": "TIME_LIMIT",
          "OUT_OF_TIME": "TIME_LIMIT", "GAVE_UP": "KERNEL_DIED", "NO_KERNEL": "NO_RESULT"}


def _row(exercise, outcome):
    """The gradebook row of one exercise (called in the notebook's language)."""
    if isinstance(outcome, _Judged):
        verdict = outcome.verdict
        points = exercise.points if verdict.status == PASSED else 0
        return Row(exercise.id, verdict.status, verdict.code or "", verdict.message, points, exercise.points)
    kind, fields = outcome
    key, status = _VERDICTS[kind]
    return Row(exercise.id, status, _CODES.get(kind, kind), message(key, exercise=exercise.id, **fields), 0,
               exercise.points)


def _judge(answer, reference, options):
    try:
        received = wire.decode(answer, reference, options.time_limit)
        return _Judged(grading.judge(reference, received), received.printed)
    except wire.WireError as error:
        return ("NO_RESULT", {"why": str(error)})
    except Exception as error:  # noqa: BLE001 (the judge on odd data: a verdict for this exercise, not a crash)
        return ("NO_RESULT", {"why": type(error).__name__})


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

def grade(path, options=None, *, jobs=2, student=None, skip=None, report=None):
    """Grade the notebook or every notebook under `path` (`jobs` at a time); [Graded] in path order.
    report(graded), if given, is called as each finishes."""
    options = options or Options()
    found = reading.find(path, student=student, skip=skip)
    base = Path(path)

    def one(item):
        notebook, key, owner = item
        shown = notebook.name if base.is_file() else notebook.relative_to(base).as_posix()
        graded = grade_one(notebook, key, owner, options, shown, server)
        if report:
            report(graded)
        return graded

    with ForkServer() as server:
        if jobs <= 1 or len(found) <= 1:
            return [one(item) for item in found]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(one, found))


# ----------------------------------------------------------------------------- the gradebook

def write(results, out):
    """Write grades.csv, and result.json and feedback.md for each submission, under `out`; each
    file whole or not at all (a temporary file, then os.replace). result.json and feedback.md
    files a previous run left for submissions no longer graded are removed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = set()
    buffer = io.StringIO()
    table = csv.writer(buffer, lineterminator="\n")
    table.writerow(CSV_COLUMNS)
    for graded in results:
        review = "; ".join(graded.review)
        for row in graded.rows:
            table.writerow([graded.student, graded.lesson, row.exercise, row.status, row.code, row.points,
                            row.max_points, graded.notebook, review])
        folder = out / graded.key
        written.add(_write(folder / "result.json", json.dumps(result_json(graded), indent=2, ensure_ascii=False) + "\n"))
        written.add(_write(folder / "feedback.md", feedback(graded)))
    written.add(_write(out / "grades.csv", buffer.getvalue()))
    for stale in list(out.rglob("result.json")) + list(out.rglob("feedback.md")):
        if stale.resolve() not in written:
            stale.unlink()
            with contextlib.suppress(OSError):
                stale.parent.rmdir()
    return out / "grades.csv"


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path.resolve()


def result_json(graded):
    """The submission's result in Classroom 50's format (classroom50/result/v1): score, max-score
    and a test per exercise; the identity fields its runner stamps come from its environment
    variables when they are set (a local run has none)."""
    result = {"schema": RESULT_SCHEMA}
    for field_name, variable in RESULT_ENVIRONMENT:
        if os.environ.get(variable):
            result[field_name] = os.environ[variable]
    result["score"], result["max-score"] = graded.score, graded.max_score
    result["tests"] = [
        {"test-name": row.exercise or graded.key, "passed": row.status == PASSED, "score": row.points,
         "max-score": row.max_points, "status": row.status, "mistake": row.code, "message": row.message}
        for row in graded.rows
    ]
    return result


def feedback(graded):
    """The learner's feedback, in the notebook's language: each exercise's verdict as a check
    prints it in the notebook, then what happened to the notebook's other cells."""
    with _speaking(graded.lang):
        lines = [f"# {message('grade.title', notebook=graded.notebook)}", "",
                 message("grade.summary", student=graded.student, lesson=graded.lesson or "?", score=graded.score,
                         max_score=graded.max_score), ""]
        for row in graded.rows:
            if row.exercise:
                lines += [f"## {row.exercise} ({row.points} / {row.max_points})", ""]
            lines += [paragraph for paragraph in row.message.split("\n")] + [""]
        notes = graded.notes + ([message("grade.review", what=", ".join(graded.review))] if graded.review else [])
        if notes:
            lines += [f"## {message('grade.notes')}", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the command

def _min_score(text):
    """--min-score: points ("3") or a share of the maximum ("75%")."""
    try:
        return (float(text[:-1]) / 100, True) if text.endswith("%") else (float(text), False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs points (3) or a percentage (75%), got {text!r}") from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grade",
        description="Grade submitted notebooks: grades.csv, a result.json and feedback.md per submission.")
    parser.add_argument("submissions", help="a notebook, or a folder of them (the first folder under it names the student)")
    parser.add_argument("--out", default="grades", help="output folder (default: grades)")
    parser.add_argument("--min-score", type=_min_score, default=(0.0, False),
                        help="exit 1 unless every submission scores at least this: points (3) or a percentage (75%%)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default: 2)")
    parser.add_argument("--student", help="the student's id for every submission (default: from the path)")
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
    if not Path(args.submissions).exists():
        parser.error(f"argument submissions: {args.submissions!r} does not exist")
    options = Options(args.time_limit, args.cell_timeout, args.submission_timeout, args.memory_mb, args.cells)
    found = reading.find(args.submissions, student=args.student, skip=args.out)
    if not found:
        parser.error(f"argument submissions: no notebook (.ipynb) in {args.submissions!r}")
    started = time.monotonic()

    def report(graded):
        print(f"{graded.key}: {graded.score} / {graded.max_score} ({graded.seconds:.1f} s)", flush=True)

    results = grade(args.submissions, options, jobs=args.jobs, student=args.student, skip=args.out, report=report)
    table = write(results, args.out)
    bar, share = args.min_score
    below = [g.key for g in results if g.score < (bar * g.max_score if share else bar)]
    print(f"graded {len(results)} submission(s) in {time.monotonic() - started:.1f} s: {table}")
    if below:
        print(f"below --min-score: {', '.join(below)}", file=sys.stderr)
    return 1 if below else 0
