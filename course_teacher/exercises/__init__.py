"""The teacher's side of every exercise: reference implementations, known mistakes as functions,
and the cases, public and hidden. Never in the student's bundle or the grading sandbox.

Importing this package registers every lesson's exercises (each lesson module registers its own).
"""

import importlib
import pkgutil

# Every lesson module (l00_shapes.py, l01_attention.py, ...), in lesson order: a new lesson's
# exercises register by their module's presence alone.
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name[:1] == "l" and m.name[1:3].isdigit()):
    importlib.import_module(f"{__name__}.{_module}")
from .reference import DEFAULT_HIDDEN_SEED, evaluate, prepare
from .registry import EXERCISES, TRANSPOSES, Exercise, Mistake, randn, register

__all__ = ["DEFAULT_HIDDEN_SEED", "EXERCISES", "TRANSPOSES", "Exercise", "Mistake", "evaluate", "prepare", "randn", "register"]
