"""Reading a submitted notebook in the grader's process: which lesson, which language, which
cells, and, for each of the lesson's exercises, the cell it lives in and the name its function
must have. Nothing here runs the notebook's code: it is read as text (and parsed, never executed).

- Lesson: the exercise ids in the exercise cells' metadata, else the exercise ids the notebook's
  check calls name, else the file name's two-digit prefix (``00_tensor_shapes.ipynb``).
- Language: the notebook's ``setup(lang=...)`` call, else its markdown cells' ``lang-en`` /
  ``lang-zh`` tags (every render carries them), else a folder named ``en`` or ``zh`` in its
  path, else English.
- The lesson's exercises, in order, and their functions' names come from the course's own
  render of the lesson (the check cell ``check("00.padding_mask", padding_mask)``), never from
  the submission: a learner who deletes an exercise still gets a row for it.
- An exercise's cell: the code cell whose metadata names the exercise (the last one, if the
  learner copied it); else the last code cell that defines the function's name at top level.
- Check cells (any cell that calls ``check("NN.name", ...)``) are never run: a learner may have
  edited them; the grader checks each function itself.
"""

import ast
import contextlib
import functools
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.i18n import LANGUAGES

from ..exercises import EXERCISES

LESSON_FILE = re.compile(r"^(\d\d)_")
# What the review note names: code that reaches for the grading machinery or patches libraries.
SUSPECT_NAMES = {"settrace", "setprofile", "_getframe", "get_referrers", "__code__", "__globals__", "EXERCISES",
                 "Sandbox", "_Watch", "TorchFunctionMode", "TorchDispatchMode"}
SUSPECT_MODULES = ("course_utils.exercises", "course_teacher")
PATCHED_ROOTS = {"torch", "F", "nn", "course_utils", "builtins", "sys", "math", "np", "numpy"}


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
    lesson: str = None
    cells: list = field(default_factory=list)  # its code cells
    unreadable: str = None  # why the file is not a notebook the grader can read
    review: list = field(default_factory=list)  # what the review note names


@dataclass(frozen=True)
class Exercise:
    id: str
    function: str  # the name the exercise gave the learner's function
    points: int


# ----------------------------------------------------------------------------- finding submissions

def find(path, student=None, skip=None):
    """[(notebook path, key, student)] for `path`: one notebook, or every notebook under a folder
    (hidden folders such as .ipynb_checkpoints, and the folder `skip`, left out).

    The student is the first folder under `path` (``submissions/alice/00_x.ipynb`` is alice's),
    or, for a notebook directly in `path` or given alone, the file's name without .ipynb;
    `student` overrides both."""
    path = Path(path)
    if path.is_file():
        return [(path, path.stem, student or path.stem)]
    found = []
    skip = Path(skip).resolve() if skip else None
    for notebook in sorted(path.rglob("*.ipynb")):
        relative = notebook.relative_to(path)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if skip and (skip == notebook.resolve().parent or skip in notebook.resolve().parents):
            continue
        key = relative.with_suffix("").as_posix()
        owner = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        found.append((notebook, key, student or owner))
    return found


# ----------------------------------------------------------------------------- reading one

def read(path, key, student):
    """The Submission at `path` (its lesson, language and code cells), or one that says why not."""
    submission = Submission(Path(path), key, student)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notebook = nbformat.read(str(path), as_version=4)
        cells = list(notebook.cells)
        for cell in cells:
            if not isinstance(cell.get("source"), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
                raise ValueError("a cell without source text")
    except Exception as error:  # noqa: BLE001 (not JSON, not a notebook, not readable: a verdict, not a crash)
        text = (str(error).strip().splitlines() or [""])[0][:200]
        submission.unreadable = f"{type(error).__name__}: {text}" if text else type(error).__name__
        submission.lesson = _lesson_from_name(Path(path).name)
        submission.lang = _lang_from_path(Path(path))
        return submission
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
            exercise = metadata.get("exercise")
            submission.cells.append(Cell(index, cell["source"], exercise if isinstance(exercise, str) else None))
    submission.lesson = _lesson(submission, Path(path).name)
    submission.lang = _lang(submission, cells, Path(path))
    submission.review = sorted({found for cell in submission.cells for found in review(cell.source)})
    return submission


def _lesson_from_name(name):
    found = LESSON_FILE.match(name)
    if found and any(e.startswith(found.group(1) + ".") for e in EXERCISES):
        return found.group(1)
    return None


def _lesson(submission, name):
    ids = [c.exercise for c in submission.cells if c.exercise in EXERCISES]
    if not ids:
        ids = [e for c in submission.cells for e in checked(c.source) if e in EXERCISES]
    if ids:
        return Counter(e.split(".")[0] for e in ids).most_common(1)[0][0]
    return _lesson_from_name(name)


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


def review(source):
    """What in a cell's code a teacher may want to look at: reaching for the grading machinery
    (the check engine, the registry, tracers, frames, code objects) or assigning to attributes of
    torch, Python or the course's package. Read from the syntax tree; obfuscated code escapes it."""
    tree = parse(source)
    if not isinstance(tree, ast.AST):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in SUSPECT_NAMES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in SUSPECT_NAMES:
            found.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SUSPECT_NAMES:
            found.append(node.value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            found += [m for m in modules if m.startswith(SUSPECT_MODULES)]
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in PATCHED_ROOTS:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and _called(node) in ("setattr", "delattr") and node.args:
            root = node.args[0]
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in PATCHED_ROOTS:
                found.append(f"{_called(node)}({ast.unparse(node.args[0])}, …)")
    return found


# ----------------------------------------------------------------------------- the course's side

@functools.cache
def plan(lesson, lang):
    """(exercises, code cells of the course's own student render) for `lesson` in `lang`:
    the lesson's exercises in notebook order with their functions' names and points, and the
    text of every code cell the course gave the learner (to tell the learner's own cells)."""
    render = _course_render(lesson, lang)
    names, order = {}, []
    if render is not None:
        for cell in render.cells:
            if cell.cell_type != "code":
                continue
            exercise = cell.metadata.get("exercise")
            if exercise in EXERCISES and exercise not in order:
                order.append(exercise)
            tree = parse(cell.source)
            if isinstance(tree, ast.AST):
                for node in ast.walk(tree):
                    if (isinstance(node, ast.Call) and _called(node) == "check" and len(node.args) >= 2
                            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[1], ast.Name)):
                        names.setdefault(node.args[0].value, node.args[1].id)
    order += [e for e in EXERCISES if e.startswith(f"{lesson}.") and e not in order]
    exercises = [Exercise(e, names.get(e) or _stub_name(render, e), int(getattr(EXERCISES[e], "points", 1)))
                 for e in order]
    sources = frozenset(c.source.strip() for c in render.cells if c.cell_type == "code") if render else frozenset()
    return tuple(exercises), sources


def _course_render(lesson, lang):
    """The course's student notebook for `lesson`: rendered from its source, else the committed
    render, else None."""
    from course_utils import build

    with contextlib.suppress(SystemExit, Exception):  # no source here: the committed render
        import jupytext

        return build.render(jupytext.read(build.lessons(lesson)[lesson]), lang, solutions=False)
    committed = sorted((build.NOTEBOOKS / lang).glob(f"{lesson}_*.ipynb"))
    return nbformat.read(str(committed[0]), as_version=4) if committed else None


def _stub_name(render, exercise):
    """The first function an exercise cell of the render defines (when no check cell names it)."""
    for cell in render.cells if render else []:
        if cell.cell_type == "code" and cell.metadata.get("exercise") == exercise:
            tree = parse(cell.source)
            if isinstance(tree, ast.AST):
                functions = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if functions:
                    return functions[0]
    return exercise.split(".", 1)[1]


def exercise_cell(submission, exercise):
    """(the Cell of `exercise` in the submission, found by its metadata or else by name) or (None, False)."""
    marked = [c for c in submission.cells if c.exercise == exercise.id]
    if marked:
        return marked[-1], False
    named = [c for c in submission.cells if isinstance(parse(c.source), ast.AST) and exercise.function in defined(parse(c.source))
             and not checked(c.source)]
    return (named[-1], True) if named else (None, False)
