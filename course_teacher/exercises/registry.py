"""What an exercise is, on the teacher's side: a reference, inputs to test on, and the mistakes
learners make, as functions.

Each lesson's module (``l01_attention.py``, ...) builds its exercises and registers them here.
``prepare`` (reference.py) turns one into the data a check compares with; ``python -m
course_teacher.publish`` writes its public cases' data into the student's package.
"""

from dataclasses import dataclass, field
from typing import Callable

import torch

from course_utils.exercises.sandbox import watch_targets


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: a stable code, a function that makes the mistake, a hint in both languages.

    `fn` takes the same arguments as the reference and returns what a learner who made this
    mistake would return, so a check can recognise the mistake by its output.
    """

    code: str
    fn: Callable
    hint: dict


@dataclass(frozen=True)
class Exercise:
    """An exercise a notebook checks with ``check(id, function)``.

    cases(generator) returns a list of argument tuples: random shapes and the edge cases
    (length 1, L_q != L_k, fully masked rows, ...) the reference must be right on. The check
    calls the learner's function as ``function(*case)`` on copies of each case.

    forbidden names the functions the learner's code may not call, e.g.
    ``("F.scaled_dot_product_attention", "course_utils.attention.scaled_dot_product_attention")``
    or ``TRANSPOSES``: "torch.x" and "F.x" (torch.nn.functional) functions, "Tensor.x" methods
    and properties (``Tensor.mT`` catches ``k.mT``), and Python functions by their full module
    path (caught however the learner imported them). A call to one fails the check (FORBIDDEN).
    The exercise's text must say so, in both languages.

    The public cases are ``cases`` drawn from ``seed``: their data ships with the course. The
    grader adds hidden cases, drawn from the teacher's seed: ``hidden(generator)`` when given,
    else ``cases`` again with other numbers (the same shapes, new values).

    largest(*case) -> int, when given, is the most elements any tensor the learner's function may
    make on that case (its torch calls' results, measured as forbidden calls are): for an
    exercise whose point is to hold less at once, e.g. one tile of scores instead of all of them.
    Checked once values and gradients are right (TOO_LARGE); the text must say so.
    """

    id: str
    reference: Callable
    cases: Callable[[torch.Generator], list]
    mistakes: tuple = field(default_factory=tuple)
    atol: float = 1e-5
    rtol: float = 1e-4
    seed: int = 0
    forbidden: tuple = ()
    points: int = 1
    hidden: Callable[[torch.Generator], list] = None
    largest: Callable[..., int] = None


#: Every way to swap or reorder axes, for an exercise that says "no transpose".
TRANSPOSES = tuple(
    [f"torch.{name}" for name in ("transpose", "swapaxes", "swapdims", "permute", "t", "movedim", "moveaxis",
                                  "adjoint")]
    + [
        f"Tensor.{name}"
        for name in ("transpose", "transpose_", "swapaxes", "swapaxes_", "swapdims", "swapdims_", "permute", "t",
                     "t_", "movedim", "moveaxis", "adjoint", "T", "mT", "H", "mH")
    ]
)


EXERCISES = {}


def randn(generator, *shape):
    """Standard normal numbers from the exercise's own generator (cases never touch the global one)."""
    return torch.randn(*shape, generator=generator)


def register(exercise):
    """Add `exercise` to the registry (its id must be new, its mistake codes distinct, and its
    forbidden names must name something)."""
    if exercise.id in EXERCISES:
        raise ValueError(f"exercise {exercise.id!r} is registered twice")
    codes = [mistake.code for mistake in exercise.mistakes]
    if len(set(codes)) != len(codes):
        raise ValueError(f"exercise {exercise.id!r} repeats a mistake code: {codes}")
    if isinstance(exercise.forbidden, str):
        raise ValueError(f"exercise {exercise.id!r}: forbidden must be a tuple of names, not one string")
    watch_targets(exercise.forbidden)  # raises ValueError for a name that names nothing
    EXERCISES[exercise.id] = exercise
    return exercise
