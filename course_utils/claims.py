"""``claim``: how a notebook states a fact that one of its cells demonstrates.

A lesson's prose interprets what a cell shows ("the gradient is NaN", "accuracy is at least
0.95"). If the cell printed a bare True/False, a change of torch version or CPU could turn the
fact false while the prose kept saying it. ``claim`` prints the statement, in the notebook's
language, when it holds, and raises ``ClaimError`` when it does not: the build, nbval and CI
then fail instead of the notebook contradicting itself.

    claim("the output equals nn.MultiheadAttention's", torch.allclose(ours, theirs))

The statement is written in the notebook's language: in a lesson source the call sits in a
``# lang: en`` / ``# lang: zh`` block, so each render keeps the sentence in its own language.
"""

import numpy as np
import torch

from . import validation as check
from .i18n import message

HOLDS = "✔"


class ClaimError(AssertionError):
    """A fact a notebook states turned out false when the notebook ran."""


class NotAFact(check.ArgumentError, TypeError):
    """`holds` is no bool: the course's argument error, and the TypeError it has always been."""


def claim(statement, holds):
    """Print `statement` when `holds` is true; raise ClaimError when it is false.

    `holds` must be a Python or NumPy bool, or a one-element bool tensor (what ``torch.allclose``,
    ``(x == y).all()`` and comparisons of numbers return); anything else is a mistake in the
    lesson, not a fact, and raises TypeError, so a tensor of many values is never read as
    "true" by accident.
    """
    if not isinstance(statement, str) or not statement:
        check.fail("claim", "statement", check.describe(statement),
                   {"en": "the fact, a sentence in the notebook's language", "zh": "要陈述的事实：用笔记本语言写的一句话"})
    if isinstance(holds, torch.Tensor):
        if holds.dtype != torch.bool or holds.numel() != 1 or holds.device.type == "meta":
            raise NotAFact(message("claim.not_boolean", got=f"tensor {tuple(holds.shape)} {holds.dtype}"
                                   + (" meta" if holds.device.type == "meta" else "")))
        holds = bool(holds.item())
    if isinstance(holds, np.bool_):
        holds = bool(holds)
    if not isinstance(holds, bool):
        raise NotAFact(message("claim.not_boolean", got=type(holds).__name__))
    if not holds:
        raise ClaimError(message("claim.false", statement=statement))
    print(f"{HOLDS} {statement}")
