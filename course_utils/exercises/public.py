"""Each exercise's public cases, as data: what a notebook's check compares a learner's function with.

``public/<id>.pt`` (one file per exercise, ``01.scaled_dot.pt``) holds, for the exercise's public
cases, their arguments, the expected results and gradients, and what each known mistake returns or
raises there, with its hint in both languages; and the exercise's tolerance, forbidden names, points
and argument names. No function here or anywhere in this package computes an answer: the files are
written by the teacher's side (``python -m course_teacher.publish``, from its reference
implementations), and ``make check`` fails when they no longer match it.

The files are read with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and
dicts, no code. A file is decoded once a process (again when it changes on disk) and each check gets
a deep copy of it, so nothing a learner's function does to one check's data reaches the next; the
copy costs a few milliseconds where decoding costs a tenth of a second, at every check of a notebook,
a grader's sweep and the test suite's thousands. A grader's answer key (`file`) is read each time and
never kept: its hidden cases stay in no process longer than their check.
"""

import copy
import os
from pathlib import Path

import torch

from .expected import Case, Known, Reference

FOLDER = Path(__file__).with_name("public")
FORMAT = "course_utils.exercises.public/1"
#: The exercise ids in the order the lessons teach them, one a line (written with the files).
ORDER = FOLDER / "order.txt"
#: Every exercise id, in lesson order ("00.split_heads", "00.merge_heads", ...).
EXERCISES = tuple(ORDER.read_text(encoding="utf-8").split() if ORDER.exists()  # (before the first publish: any order)
                  else sorted(path.name[: -len(".pt")] for path in FOLDER.glob("*.pt")))


def path(exercise):
    return FOLDER / f"{exercise}.pt"


def load(exercise, file=None):
    """The Reference (expected.py) of `exercise`'s public cases (or of the cases in `file`, a file of the
    same format: a grader's answer key, course_teacher/grade/key.py)."""
    ours = file is None  # the package's own file, decoded once (_decoded); a grader's key is read each time
    file = path(exercise) if ours else file
    data = _decoded(file) if ours else torch.load(file, weights_only=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("exercise") != exercise:
        raise ValueError(f"{file} is not the data of exercise {exercise!r}: run `make check`")
    cases = [Case(number, tuple(case["args"]), case["expected"], list(case["attached"]), list(case["weights"]),
                   dict(case["gradients"]), largest=case.get("largest"), hidden=case.get("hidden") is True)
             for number, case in enumerate(data["cases"], start=1)]
    mistakes = tuple(Known(m["code"], dict(m["hint"]), tuple((kind, value) for kind, value in m["results"]))
                     for m in data["mistakes"])
    return Reference(exercise, cases, tuple(data["tolerance"]), mistakes, tuple(data["forbidden"]),
                     list(data["names"]), int(data["points"]), tuple(data.get("returns", ())))


def _decoded(file):
    """A deep copy of `file`'s data (tensors sharing storage still share it, strides and requires_grad kept)."""
    stat = os.stat(file)
    seen = (stat.st_mtime_ns, stat.st_size)
    kept = _kept.get(file)
    if kept is None or kept[0] != seen:
        kept = _kept[file] = seen, torch.load(file, weights_only=True)
    return copy.deepcopy(kept[1])


_kept = {}  # path -> ((mtime, size) when decoded, the decoded data): the package's public files only


def encode(reference):
    """`reference` (an expected.Reference) as the data ``load`` reads back."""
    return {
        "format": FORMAT,
        "exercise": reference.exercise,
        "tolerance": list(reference.tolerance),
        "forbidden": list(reference.forbidden),
        "names": list(reference.names),
        "points": int(reference.points),
        **({"returns": list(reference.returns)} if reference.returns else {}),
        "cases": [{"args": list(case.args), "expected": case.expected, "attached": list(case.attached),
                   "weights": list(case.weights), "gradients": dict(case.gradients), "largest": case.largest,
                   **({"hidden": True} if case.hidden else {})}
                  for case in reference.cases],
        "mistakes": [{"code": m.code, "hint": dict(m.hint), "results": [list(r) for r in m.results]}
                     for m in reference.mistakes],
    }
