"""Each exercise's public cases, as data: what a notebook's check compares a learner's function with.

``public/<id>.pt`` (one file per exercise, ``01.scaled_dot.pt``) holds, for the exercise's public
cases, their arguments, the expected results and gradients, and what each known mistake returns or
raises there, with its hint in both languages; and the exercise's tolerance, forbidden names, points
and argument names. No function here or anywhere in this package computes an answer: the files are
written by the teacher's side (``python -m course_teacher.publish``, from its reference
implementations), and ``make check`` fails when they no longer match it.

The files are read with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and
dicts, no code. Each check reads its file again, so nothing a learner's code does to one check's
data reaches the next.
"""

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
    file = path(exercise) if file is None else file
    data = torch.load(file, weights_only=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("exercise") != exercise:
        raise ValueError(f"{file} is not the data of exercise {exercise!r}: run `make check`")
    cases = [Case(number, tuple(case["args"]), case["expected"], list(case["attached"]), list(case["weights"]),
                   dict(case["gradients"]), largest=case.get("largest"), hidden=case.get("hidden") is True)
             for number, case in enumerate(data["cases"], start=1)]
    mistakes = tuple(Known(m["code"], dict(m["hint"]), tuple((kind, value) for kind, value in m["results"]))
                     for m in data["mistakes"])
    return Reference(exercise, cases, tuple(data["tolerance"]), mistakes, tuple(data["forbidden"]),
                     list(data["names"]), int(data["points"]), tuple(data.get("returns", ())))


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
