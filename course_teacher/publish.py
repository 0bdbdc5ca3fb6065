"""Write each exercise's public cases, as data, into the student's package (``make notebooks`` runs
it); and answer keys, the data a grader grades against.

    python -m course_teacher.publish            write course_utils/exercises/public/<id>.pt
    python -m course_teacher.publish --check    fail when a file is missing, stale or left over
    python -m course_teacher.publish --key FOLDER --seed N [--lesson 03 ...]
                                                write an answer key (course_teacher/grade/key.py):
                                                public and hidden cases drawn from N, as data

The notebook's check compares a learner's function with these files (course_utils.exercises.public):
the arguments of each public case, the reference's results and gradients there, and what each known
mistake gives there, computed here from the teacher's references. ``--check`` (part of ``make
check``) recomputes them: texts, codes, shapes and dtypes must be the same, and the numbers equal
to within float rounding (another CPU computes the last bits differently).
"""

import argparse
import ast
import hashlib
import inspect
import io
import json
import os
import sys
from pathlib import Path

import jupytext
import torch

import course_utils
from course_utils import atomic_files
from course_utils.exercises import public

from . import sources
from .exercises import DEFAULT_HIDDEN_SEED, EXERCISES, prepare
from .grade import copies
from .grade import key as answer_key
from .render import render


def _data(exercise):
    return public.encode(prepare(EXERCISES[exercise]))


def _bytes(data):
    buffer = io.BytesIO()
    torch.save(data, buffer)
    return buffer.getvalue()


def write():
    """Write every exercise's file, remove files of exercises that no longer exist; the paths written."""
    public.FOLDER.mkdir(exist_ok=True)
    written = []
    for exercise in sorted(EXERCISES):
        path = public.path(exercise)
        data = _data(exercise)
        # a file equal to within float rounding is kept: another CPU's last bits are no change
        if not path.exists() or _differs(torch.load(path, weights_only=True), data, exercise):
            path.write_bytes(_bytes(data))
        written.append(path)
    for stale in set(public.FOLDER.glob("*.pt")) - set(written):
        stale.unlink()
    if not public.ORDER.exists() or public.ORDER.read_text(encoding="utf-8") != _order():
        public.ORDER.write_text(_order(), encoding="utf-8")
    return written


def _order():
    """public.ORDER's text: the ids in the registry's order, which is the lessons' order."""
    return "".join(f"{exercise}\n" for exercise in EXERCISES)


def problems():
    """What is wrong with the committed files, one sentence each (empty: they match the references)."""
    found = []
    if not public.ORDER.exists() or public.ORDER.read_text(encoding="utf-8") != _order():
        found.append(f"{public.ORDER.name} does not list the exercises in the lessons' order")
    files = {path.name[: -len(".pt")] for path in public.FOLDER.glob("*.pt")}
    for extra in sorted(files - set(EXERCISES)):
        found.append(f"{public.path(extra).name}: no exercise {extra!r} is registered")
    for exercise in sorted(EXERCISES):
        if exercise not in files:
            found.append(f"{public.path(exercise).name} is missing")
            continue
        committed = torch.load(public.path(exercise), weights_only=True)
        where = _differs(committed, _data(exercise), exercise)
        if where:
            found.append(f"{public.path(exercise).name} is stale: {where}")
    return found


def _differs(committed, fresh, where):
    """None when `committed` matches `fresh` (numbers to within float rounding), else where it does not."""
    if isinstance(fresh, torch.Tensor):
        if not isinstance(committed, torch.Tensor) or committed.dtype != fresh.dtype or committed.shape != fresh.shape:
            return where
        if fresh.is_floating_point():
            # the exercises' own default tolerance: another CPU's kernels round the results of a
            # sharp softmax (a mistake's, say) a few 1e-6 apart, which names the same mistake
            close = torch.allclose(committed, fresh, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            close = torch.equal(committed, fresh)
        return None if close else where
    if isinstance(fresh, dict):
        if not isinstance(committed, dict) or set(committed) != set(fresh):
            return where
        return next((d for k in fresh if (d := _differs(committed[k], fresh[k], f"{where}.{k}"))), None)
    if isinstance(fresh, (list, tuple)):
        if not isinstance(committed, (list, tuple)) or len(committed) != len(fresh):
            return where
        return next((d for i, (c, f) in enumerate(zip(committed, fresh)) if (d := _differs(c, f, f"{where}[{i}]"))), None)
    return None if type(committed) is type(fresh) and committed == fresh else where


# ----------------------------------------------------------------------------- answer keys

def write_key(folder, seed, lessons=None):
    """Write the answer key of `lessons` (default: every lesson) into `folder`, its hidden cases
    drawn from `seed`: the references' results as data and each lesson's plan, read from the
    course's student render of each language. The paths written."""
    chosen = [lesson for lesson in sources.lessons() if lessons is None or lesson in lessons]
    plans = {lesson: {lang: lesson_plan(lesson, lang) for lang in sources.LANGUAGES} for lesson in chosen}
    references = {e["id"]: prepare(EXERCISES[e["id"]], seed) for lesson in chosen
                  for e in plans[lesson][sources.LANGUAGES[0]]["exercises"]}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in answer_key.encode(references, plans, course_fingerprints()).items():
        (folder / name).write_bytes(content)
        os.chmod(folder / name, 0o644)
        written.append(folder / name)
    return written


#: Where course_fingerprints() keeps its table, one file per state of the code it reads (an ignored folder).
FINGERPRINTS = sources.ROOT / "build" / "fingerprints"


def course_fingerprints():
    """{fingerprint: label} of the course's own code a learner could paste as an answer (grade/copies.py):
    every function of the student package ("course_utils.masks.padding_mask"), and each exercise's
    reference and the functions of its module it calls ("reference 00.padding_mask"). Not the solution
    notebooks' answers (nor a reference written as one of them is): they are the lessons' worked
    solutions, which a teacher hands out when the work is in, and which grade full marks.

    Computed once per state of the code: every answer key carries the table, and it costs 5-7 CPU-seconds
    (a grader's run writes a key; the tests run the grader some thirty times). Kept in FINGERPRINTS under a
    digest of everything it reads (the student package, the teacher's package with the references and
    the fingerprint's own code, the lessons' sources) and of the Python and jupytext that parse them."""
    digest = _code_digest()
    kept = FINGERPRINTS / f"{digest}.json"
    try:
        return json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    found = compute_course_fingerprints()
    try:
        FINGERPRINTS.mkdir(parents=True, exist_ok=True)
        atomic_files.write(kept, json.dumps(found, indent=0, sort_keys=True))
        for older in set(FINGERPRINTS.glob("*.json")) - {kept}:  # the code changed: they will not be read again
            older.unlink(missing_ok=True)
    except OSError:  # a read-only checkout: computed each time, as before
        pass
    return found


def _code_digest():
    digest = hashlib.sha256(f"{sys.version}|jupytext {jupytext.__version__}".encode())
    teacher = Path(__file__).resolve().parent
    inputs = [*Path(course_utils.__file__).parent.rglob("*.py"), *teacher.rglob("*.py"),
              *sources.lessons().values()]
    for path in sorted(set(inputs)):
        digest.update(f"\0{os.path.relpath(path, sources.ROOT)}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:32]


def compute_course_fingerprints():
    """course_fingerprints() computed now, from the code as it is."""
    found = {}
    package = Path(course_utils.__file__).parent
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        found.update({k: v for k, v in copies.fingerprints(path.read_text(encoding="utf-8"), f"{module}.").items()
                      if k not in found})
    for exercise, spec in EXERCISES.items():
        module = inspect.getmodule(spec.reference)
        reference = copies.functions(inspect.getsource(module)).get(spec.reference.__name__)
        called = {n.func.id for n in ast.walk(reference) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)} \
            if reference is not None else set()
        for name, function in copies.functions(inspect.getsource(module)).items():
            if name == spec.reference.__name__ or name in called:
                print_ = copies.fingerprint(function)
                if print_:
                    found.setdefault(print_, f"reference {exercise}")
    for source in sources.lessons().values():  # a reference written as the solution is: the solution's
        rendered = render(jupytext.read(source), sources.LANGUAGES[0], solutions=True)
        for cell in rendered.cells:
            if cell.cell_type == "code" and cell.metadata.get("exercise"):
                for print_ in copies.fingerprints(cell.source, ""):
                    found.pop(print_, None)
    return dict(sorted(found.items()))


def lesson_plan(lesson, lang):
    """{"exercises": [...], "cells": [...]} of `lesson` in `lang`, from the course's student render:
    the exercises in the order their cells come (each function's name as its check cell passes it,
    else as its exercise cell defines it), and the text of every code cell."""
    rendered = render(jupytext.read(sources.lessons(lesson)[lesson]), lang, solutions=False)
    cells = [cell for cell in rendered.cells if cell.cell_type == "code"]
    order = list(dict.fromkeys(c.metadata["exercise"] for c in cells if c.metadata.get("exercise") in EXERCISES))
    order += [e for e in EXERCISES if e.startswith(f"{lesson}.") and e not in order]
    checked = {}
    for cell in cells:
        for node in ast.walk(ast.parse(cell.source)) if _parses(cell.source) else ():
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[1], ast.Name)):
                checked.setdefault(node.args[0].value, node.args[1].id)
    exercises = [{"id": e, "function": checked.get(e) or _defined(cells, e), "points": int(EXERCISES[e].points),
                  "forbidden": list(EXERCISES[e].forbidden)} for e in order]
    return {"exercises": exercises, "cells": [cell.source for cell in cells]}


def _parses(source):
    try:
        ast.parse(source)
    except SyntaxError:  # a cell of IPython magics: no check call in it
        return False
    return True


def _defined(cells, exercise):
    """The first function the exercise's cell defines (when no check cell names it)."""
    for cell in cells:
        if cell.metadata.get("exercise") == exercise and _parses(cell.source):
            functions = [n.name for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef)]
            if functions:
                return functions[0]
    raise SystemExit(f"publish: exercise {exercise} has no cell that defines its function")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.publish", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail when a file is missing or stale")
    parser.add_argument("--key", metavar="FOLDER", help="write an answer key into FOLDER instead")
    parser.add_argument("--seed", type=int, default=DEFAULT_HIDDEN_SEED, help="--key: draws the hidden cases")
    parser.add_argument("--lesson", action="append", help="--key: a lesson (00, 01, ...); repeat for several")
    args = parser.parse_args(argv)
    if args.key:
        paths = write_key(args.key, args.seed, args.lesson)
        print(f"answer key: {len(paths) - 1} exercises in {args.key}")
        return 0
    if args.check:
        found = problems()
        for problem in found:
            print(f"course_utils/exercises/public/{problem} (run `python -m course_teacher.publish`)", file=sys.stderr)
        return 1 if found else 0
    paths = write()
    print(f"{len(paths)} exercises' public cases in {public.FOLDER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
