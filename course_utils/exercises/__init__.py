"""The exercises of every lesson, and the check a notebook calls.

Importing this package registers every lesson's exercises (each lesson module registers its own).
"""

from . import l00_shapes, l01_attention, l02_masks, l03_layers  # noqa: F401  (imported to register their exercises)
from .grading import CRASHED, FAILED, NOT_ATTEMPTED, PASSED, Verdict, check, evaluate
from .registry import EXERCISES, Exercise, Mistake, register

__all__ = [
    "CRASHED", "EXERCISES", "Exercise", "FAILED", "Mistake", "NOT_ATTEMPTED", "PASSED",
    "Verdict", "check", "evaluate", "register",
]
