"""The teacher's side of every exercise: reference implementations, known mistakes as functions,
and the cases, public and hidden. Never in the student's bundle or the grading sandbox.

Importing this package registers every lesson's exercises (each lesson module registers its own).
"""

from . import l00_shapes, l01_attention, l02_masks, l03_layers, l04_multihead, l05_probsparse, l06_transformer  # noqa: F401
from .reference import DEFAULT_HIDDEN_SEED, evaluate, prepare
from .registry import EXERCISES, TRANSPOSES, Exercise, Mistake, randn, register

__all__ = ["DEFAULT_HIDDEN_SEED", "EXERCISES", "TRANSPOSES", "Exercise", "Mistake", "evaluate", "prepare", "randn", "register"]
