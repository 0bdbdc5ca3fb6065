"""Write each exercise's public cases, as data, into the student's package (``make notebooks`` runs it).

    python -m course_teacher.publish            write course_utils/exercises/public/<id>.pt
    python -m course_teacher.publish --check    fail when a file is missing, stale or left over

The notebook's check compares a learner's function with these files (course_utils.exercises.public):
the arguments of each public case, the reference's results and gradients there, and what each known
mistake gives there, computed here from the teacher's references. ``--check`` (part of ``make
check``) recomputes them: texts, codes, shapes and dtypes must be the same, and the numbers equal
to within float rounding (another CPU computes the last bits differently).
"""

import argparse
import io
import sys

import torch

from course_utils.exercises import public

from .exercises import EXERCISES, prepare


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
        content = _bytes(_data(exercise))
        if not path.exists() or path.read_bytes() != content:
            path.write_bytes(content)
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.publish", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail when a file is missing or stale")
    args = parser.parse_args(argv)
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
