"""Reading a submitted notebook in the grader's process: which lesson, which language, which
cells, and, for each of the lesson's exercises, the cell it lives in and the name its function
must have. Nothing here runs the notebook's code: it is read as text (and parsed, never executed).

- Files: only regular files named ``*.ipynb`` are read as notebooks. ``find`` walks the folder
  without following links; a link, pipe, device or socket named ``*.ipynb`` is not read but
  reported (``Found.problem`` is ``NOT_REGULAR``), so that the teacher sees it. ``read`` opens a
  file without following a link and without blocking (``O_NOFOLLOW | O_NONBLOCK``), requires a
  regular file of at most ``MAX_BYTES``, and reads no more than that. A file it cannot read gets a
  fixed reason by kind (``Submission.problem``: ``NOT_REGULAR``, ``TOO_LARGE``, ``NOT_JSON``,
  ``NOT_NOTEBOOK``, ``UNREADABLE``; ``Submission.unreadable``: the sentence, in the notebook's
  language): never the file's contents, nor a parser's message that may quote them.
- Lesson: the exercise ids in the exercise cells' metadata, else the exercise ids the notebook's
  check calls name (the lesson its cells carry); it must agree with the file name's two-digit
  prefix (``00_tensor_shapes.ipynb``) when the name has one, and with the assignment's lesson when
  the grader is given one (``read(..., lesson="01")``). The lesson graded is the one claimed: the
  assignment's, else the file name's, else the cells'. On a disagreement ``Submission.mismatch``
  says which (and the grader scores the claimed lesson's exercises 0): a solved lesson 00 saved
  as ``06_transformer.ipynb`` is not lesson 06's work. A notebook whose cells carry no lesson is
  the file name's lesson, else the assignment's.
- Language: the notebook's ``setup(lang=...)`` call, else its markdown cells' ``lang-en`` /
  ``lang-zh`` tags (every render carries them), else a folder named ``en`` or ``zh`` in its
  path, else English.
- The lesson's exercises, in order, and their functions' names come from the grader's answer key
  (key.py: the course's own render of the lesson, its check cell ``check("00.padding_mask",
  padding_mask)``), never from the submission: a learner who deletes an exercise still gets a row
  for it. Which exercise ids exist, the reading takes from the student package's list
  (course_utils/exercises/public/order.txt).
- An exercise's cell: the code cell whose metadata names the exercise (the last one, if the
  learner copied it); else the last code cell that defines the function's name at top level.
- Check cells (any cell that calls ``check("NN.name", ...)``) are never run: a learner may have
  edited them; the grader checks each function itself.
"""

import ast
import errno
import functools
import logging
import os
import re
import stat
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.exercises.public import EXERCISES
from course_utils.i18n import LANGUAGES

from . import messages

LESSON_FILE = re.compile(r"^(\d\d)_")
MAX_MB = 20
MAX_BYTES = MAX_MB * 1024 * 1024  # a notebook larger than this is refused before it is read
# why a file is not read: Submission.problem -> its reason's key (NOT_REGULAR has two: a link, or another kind)
PROBLEMS = {"NOT_REGULAR": "grade.reason.special", "TOO_LARGE": "grade.reason.too_large",
            "NOT_JSON": "grade.reason.not_json", "NOT_NOTEBOOK": "grade.reason.not_notebook",
            "UNREADABLE": "grade.reason.unreadable"}

_log = logging.getLogger(__name__)


def reason(problem, lang, kind=None):
    """The fixed sentence saying why a file is not read as a notebook: `problem` is a
    Submission.problem code, `kind` ("link" or "special") tells a link from other special files."""
    key = "grade.reason.link" if problem == "NOT_REGULAR" and kind == "link" else PROBLEMS[problem]
    return messages.text(lang if lang in LANGUAGES else "en", key, limit=MAX_MB)


@dataclass
class Cell:
    index: int  # position in the notebook, from 0 (markdown cells count)
    source: str
    exercise: str = None  # the exercise id in its metadata, for an exercise cell

    @property
    def where(self):
        """(cell number from 1, its first line): how feedback names a cell."""
        first = next((line.strip() for line in self.source.splitlines() if line.strip()), "")
        return self.index + 1, first if len(first) <= 60 else first[:59] + "…"


@dataclass
class Submission:
    path: Path
    key: str  # where its files go in the output folder: its path under the root, without .ipynb
    student: str
    lang: str = "en"
    lesson: str = None  # the lesson graded: the assignment's, else the file name's, else the cells'
    cells: list = field(default_factory=list)  # its code cells
    unreadable: str = None  # why the file is not a notebook the grader can read (a fixed sentence, in `lang`)
    problem: str = None  # with `unreadable`: NOT_REGULAR, TOO_LARGE, NOT_JSON, NOT_NOTEBOOK or UNREADABLE
    kind: str = None  # for NOT_REGULAR: "link" or "special" (a pipe, a device, a socket)
    cells_lesson: str = None  # the lesson its cells carry (exercise metadata, else check calls), if any
    name_lesson: str = None  # the lesson its file name's two-digit prefix names, if any
    assignment: str = None  # the lesson the grader was told to grade, if any
    mismatch: str = None  # when those disagree: which way (a sentence in `lang`); `lesson` is then scored 0


# ----------------------------------------------------------------------------- finding submissions

class Found(tuple):
    """One thing `find` found: (path, key, student), a tuple as it always was, and `problem`:
    None for a notebook to grade, "NOT_REGULAR" for an entry named *.ipynb that is a link, a pipe,
    a device or a socket (not read; `kind` is "link" or "special"). `read` on such a path gives
    the same verdict without opening it."""

    def __new__(cls, path, key, student, problem=None, kind=None):
        found = super().__new__(cls, (Path(path), key, student))
        found.problem, found.kind = problem, kind
        return found

    path = property(lambda self: self[0])
    key = property(lambda self: self[1])
    student = property(lambda self: self[2])


def _kind(mode):
    """None for a regular file, else "link" or "special"."""
    if stat.S_ISREG(mode):
        return None
    return "link" if stat.S_ISLNK(mode) else "special"


def find(path, student=None, skip=None):
    """[Found(notebook path, key, student)] for `path`: one notebook, or every notebook under a
    folder (hidden folders such as .ipynb_checkpoints, hidden files, and the folder `skip` left
    out), in path order. The walk follows no link: an entry named *.ipynb that is a link (to a
    file or a folder), a pipe, a device or a socket is listed with problem NOT_REGULAR, not read.
    `path` itself may be a link to a folder (the teacher's own argument); a link given alone is
    reported like any other.

    The student is the first folder under `path` (``submissions/alice/00_x.ipynb`` is alice's),
    or, for a notebook directly in `path` or given alone, the file's name without .ipynb;
    `student` overrides both."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return []
    if not stat.S_ISDIR(mode) and not (stat.S_ISLNK(mode) and path.is_dir()):
        kind = _kind(mode)
        return [Found(path, path.stem, student or path.stem, "NOT_REGULAR" if kind else None, kind)]
    skip_id = _identity(skip) if skip else None
    if skip_id is not None and skip_id == _identity(path):
        return []
    found = []

    def add(full, kind):
        relative = Path(full).relative_to(path)
        key = relative.with_suffix("").as_posix() if relative.suffix == ".ipynb" else relative.as_posix()
        owner = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        found.append(Found(full, key, student or owner, "NOT_REGULAR" if kind else None, kind))

    def unreadable_folder(error):
        _log.warning("grade: cannot list %r (%s): skipped", getattr(error, "filename", "?"), type(error).__name__)

    for folder, folders, files in os.walk(path, followlinks=False, onerror=unreadable_folder):
        kept = []
        for name in folders:  # links to folders are listed here too: never followed
            if name.startswith("."):
                continue
            full = os.path.join(folder, name)
            try:
                info = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                if name.endswith(".ipynb"):
                    add(full, "link")
                continue
            if skip_id is not None and (info.st_dev, info.st_ino) == skip_id:
                continue
            kept.append(name)
        folders[:] = kept
        for name in files:
            if name.startswith(".") or not name.endswith(".ipynb"):
                continue
            full = os.path.join(folder, name)
            try:
                info = os.lstat(full)
            except OSError:
                continue
            add(full, _kind(info.st_mode))
    return sorted(found, key=lambda f: f.path.relative_to(path).parts)


def _identity(path):
    """(device, inode) of the folder `path` (links followed: the teacher's own arguments), or None."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


# ----------------------------------------------------------------------------- reading one

def read(path, key, student, lesson=None):
    """The Submission at `path` (its lesson, language and code cells), or one that says why not.
    lesson: the assignment's lesson ("00"), when the grader is told which lesson it grades."""
    path = Path(path)
    submission = Submission(path, key, student, assignment=assignment(lesson))
    submission.name_lesson = _lesson_from_name(path.name)
    data, problem, kind = _load(path)
    notebook = None
    if problem is None:
        notebook, problem = _notebook(data)
    if problem is not None:
        submission.problem, submission.kind = problem, kind
        submission.lang = _lang_from_path(path)
        submission.unreadable = reason(problem, submission.lang, kind)
        _settle_lesson(submission)
        return submission
    cells = list(notebook.cells)
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
            exercise = metadata.get("exercise")
            submission.cells.append(Cell(index, cell["source"], exercise if isinstance(exercise, str) else None))
    submission.cells_lesson = _cells_lesson(submission)
    submission.lang = _lang(submission, cells, path)
    _settle_lesson(submission)
    return submission


def assignment(lesson):
    """The assignment's lesson as two digits ("1" and 1 give "01"); ValueError for no lesson of the course."""
    if lesson is None:
        return None
    name = str(lesson).strip()
    name = name.zfill(2) if name.isdigit() else name
    if not any(e.startswith(name + ".") for e in EXERCISES):
        known = sorted({e.split(".")[0] for e in EXERCISES})
        raise ValueError(f"lesson {lesson!r} is not one of the course's lessons ({', '.join(known)})")
    return name


def _load(path):
    """(the file's bytes, None, None), or (None, problem, kind): a regular file of at most
    MAX_BYTES, opened without following a link or blocking, checked before a byte is read."""
    try:
        info = os.lstat(path)
    except OSError:
        return None, "UNREADABLE", None
    kind = _kind(info.st_mode)
    if kind:
        return None, "NOT_REGULAR", kind
    if info.st_size > MAX_BYTES:
        return None, "TOO_LARGE", None
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:  # replaced since the lstat: a link (ELOOP), a socket (ENXIO), ...
        if error.errno == errno.ELOOP:
            return None, "NOT_REGULAR", "link"
        if error.errno == errno.ENXIO:
            return None, "NOT_REGULAR", "special"
        return None, "UNREADABLE", None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            return None, "NOT_REGULAR", "special"
        if info.st_size > MAX_BYTES:
            return None, "TOO_LARGE", None
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(handle, min(MAX_BYTES + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:  # it grew since the fstat
            return None, "TOO_LARGE", None
        return b"".join(chunks), None, None
    except OSError:
        return None, "UNREADABLE", None
    finally:
        os.close(handle)


def _notebook(data):
    """(the notebook, None) from a file's bytes, or (None, "NOT_JSON" or "NOT_NOTEBOOK"); the
    parsers' own messages, which may quote the file, are dropped."""
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "NOT_JSON"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notebook = nbformat.reads(source, as_version=4)
        cells = list(notebook.cells)
        for cell in cells:
            if not isinstance(cell.get("source"), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
                return None, "NOT_NOTEBOOK"
    except nbformat.reader.NotJSONError:
        return None, "NOT_JSON"
    except RecursionError:  # absurd nesting: json gives up before it is a notebook
        return None, "NOT_JSON"
    except Exception:  # noqa: BLE001 (JSON, but not a notebook: a verdict, not a crash)
        return None, "NOT_NOTEBOOK"
    return notebook, None


def _settle_lesson(submission):
    """The lesson graded (the assignment's, else the file name's, else the cells') and, when the
    cells, the file name and the assignment disagree, the mismatch."""
    cells, name, assignment = submission.cells_lesson, submission.name_lesson, submission.assignment
    submission.lesson = assignment or name or cells
    fields = {"cells": cells, "name": name, "assignment": assignment}
    lang = submission.lang
    if cells:
        wrong_name = name is not None and name != cells
        wrong_assignment = assignment is not None and assignment != cells
        if wrong_name and wrong_assignment:
            submission.mismatch = messages.text(lang, "grade.mismatch.both", **fields)
        elif wrong_name:
            submission.mismatch = messages.text(lang, "grade.mismatch.name", **fields)
        elif wrong_assignment:
            submission.mismatch = messages.text(lang, "grade.mismatch.assignment", **fields)
    elif name and assignment and name != assignment:
        submission.mismatch = messages.text(lang, "grade.mismatch.name_assignment", **fields)


def _lesson_from_name(name):
    found = LESSON_FILE.match(name)
    if found and any(e.startswith(found.group(1) + ".") for e in EXERCISES):
        return found.group(1)
    return None


def _cells_lesson(submission):
    """The lesson the notebook's cells carry: its exercise cells' metadata, else its check calls; or None."""
    ids = [c.exercise for c in submission.cells if c.exercise in EXERCISES]
    if not ids:
        ids = [e for c in submission.cells for e in checked(c.source) if e in EXERCISES]
    if ids:
        return Counter(e.split(".")[0] for e in ids).most_common(1)[0][0]
    return None


def _lang(submission, cells, path):
    for cell in submission.cells:
        lang = _setup_lang(cell.source)
        if lang:
            return lang
    tags = Counter(tag for cell in cells if cell["cell_type"] == "markdown"
                   for tag in (cell.get("metadata", {}).get("tags") or []) if tag in ("lang-en", "lang-zh"))
    if tags:
        return tags.most_common(1)[0][0][len("lang-"):]
    return _lang_from_path(path)


def _lang_from_path(path):
    return next((part for part in reversed(path.parts[:-1]) if part in LANGUAGES), "en")


def _setup_lang(source):
    tree = parse(source)
    if not isinstance(tree, ast.AST):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "setup":
            for keyword in node.keywords:
                if keyword.arg == "lang" and isinstance(keyword.value, ast.Constant) and keyword.value.value in LANGUAGES:
                    return keyword.value.value
    return None


# ----------------------------------------------------------------------------- code, read as text

@functools.lru_cache(maxsize=4096)
def parse(source):
    """The cell's syntax tree (IPython's magics and shell escapes turned into Python first), or the
    SyntaxError that stops it."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            python = TransformerManager().transform_cell(source)
            return ast.parse(python)
    except SyntaxError as error:
        return error
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return SyntaxError(str(error)[:200])


def _called(call):
    function = call.func
    return function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) else None


def checked(source):
    """The exercise ids a cell's check(...) calls name (empty for a cell that is no check cell)."""
    tree = parse(source)
    if not isinstance(tree, ast.AST):
        return []
    return [node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _called(node) == "check" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)]


def defined(tree):
    """The names a cell binds at its top level (def, class, assignment, import), in order."""
    names = []

    def visit(statements):
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.extend(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.extend((a.asname or a.name).split(".")[0] for a in node.names)
            for body in ("body", "orelse", "finalbody"):
                if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and getattr(node, body, None):
                    visit(getattr(node, body))
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return list(dict.fromkeys(names))


def exercise_cell(submission, exercise):
    """(the Cell of `exercise` in the submission, found by its metadata or else by name) or (None, False)."""
    marked = [c for c in submission.cells if c.exercise == exercise.id]
    if marked:
        return marked[-1], False
    named = [c for c in submission.cells if isinstance(parse(c.source), ast.AST) and exercise.function in defined(parse(c.source))
             and not checked(c.source)]
    return (named[-1], True) if named else (None, False)
