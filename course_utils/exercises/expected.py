"""What an exercise expects on its cases, as data: step 1 of grading (course_utils.exercises.grading).

A ``Reference`` holds, for each ``Case``, the reference's result (and the gradients of a fixed random weighted
sum of it), and what each ``Known`` mistake gives there. The notebook's check reads the public cases' Reference
from the package's files (public.py writes and reads them); the grader computes one on the teacher's side, on
hidden cases too (course_teacher.exercises.reference). Plain data, below both: nothing here computes an answer.
"""

from dataclasses import dataclass


@dataclass
class Case:
    number: int
    args: tuple  # the case's arguments; every call gets copies
    expected: object  # the reference's result, detached
    attached: list  # which of its tensors (in compare.tensors order) are on the graph
    weights: list  # a fixed random weight for each of those
    gradients: dict  # argument position -> the reference's gradient of the weighted sum
    names: list = None  # the arguments' names (set by the judge: the learner's, else the reference's)
    largest: int = None  # the most elements any tensor the function makes may hold (None: no limit)
    label: str = ""  # "query (3, 5, 8), key (3, 7, 8), value (3, 7, 6)" (set by the judge)
    hidden: bool = False  # one of the grader's hidden cases: no verdict shows its inputs or results


@dataclass(frozen=True)
class Known:
    """A known mistake, as data: its stable code, its hint in both languages, and what it gives on
    each case: ``("value", result)`` or ``("raised", "builtins.RuntimeError")``."""

    code: str
    hint: dict
    results: tuple


@dataclass
class Reference:
    """What an exercise expects on its cases, as data (see the module docstring)."""

    exercise: str
    cases: list  # of Case
    tolerance: tuple  # (atol, rtol)
    mistakes: tuple  # of Known
    forbidden: tuple
    names: list  # the reference's argument names (when the learner's cannot be read)
    points: int = 1
    returns: tuple = ()  # the names of the values a tuple result holds (the exercise's docstring's)

    @property
    def calls(self):
        """What the learner's function is called on, as plain data (tensors, numbers, lists):
        the cases' arguments, whether gradients are compared, and for each case the positions of
        the reference's attached outputs and their weights; the forbidden names."""
        return {
            "args": [case.args for case in self.cases],
            "differentiable": any(case.attached for case in self.cases),
            "attached": [list(case.attached) for case in self.cases],
            "weights": [list(case.weights) for case in self.cases],
            "forbidden": list(self.forbidden),
            "largest": [case.largest for case in self.cases],
            "exercise": self.exercise,
        }
