"""The exercises of every lesson, and the check a notebook calls.

Importing this package registers every lesson's exercises (each lesson module registers its own).
grading.py judges a learner's function, sandbox.py runs it without letting it change the notebook,
compare.py says what differs from the reference.
"""

from . import l00_shapes, l01_attention, l02_masks, l03_layers, l04_multihead, l05_probsparse, l06_transformer  # noqa: F401
from .grading import CRASHED, FAILED, NOT_ATTEMPTED, PASSED, Verdict, check, evaluate
from .registry import EXERCISES, TRANSPOSES, Exercise, Mistake, register

__all__ = [
    "CRASHED", "EXERCISES", "Exercise", "FAILED", "Mistake", "NOT_ATTEMPTED", "PASSED", "TRANSPOSES",
    "Verdict", "check", "evaluate", "register",
]
