"""course_utils: the helper package of the attention course.

A notebook starts with ``from course_utils import setup, check`` and ``setup(lang="en")``.
"""

from .claims import claim
from .exercises import check, evaluate
from .session import setup

__all__ = ["check", "claim", "evaluate", "setup"]
