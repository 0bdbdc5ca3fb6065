"""course_utils: the helper package of the attention course.

A notebook starts with ``from course_utils import setup, check`` and ``setup(lang="en")``;
``progress()`` shows which exercises the learner has passed, ``hint("01.scaled_dot")`` gives an
exercise's hints one at a time; ``measured`` reads what the
benchmarks measured on each device (the GPU figures the lessons show beside their own).
"""

from . import measured
from .claims import claim
from .exercises import check, evaluate
from .exercises.hints import hint
from .learner import progress
from .session import setup

__all__ = ["check", "claim", "evaluate", "hint", "measured", "progress", "setup"]
