"""course_utils: the helper package of the attention course.

A notebook starts with ``from course_utils import setup, check`` and ``setup(lang="en")``;
``progress()`` shows which exercises the learner has passed, ``hint("01.scaled_dot")`` gives an
exercise's hints one at a time; ``measured`` reads what the
benchmarks measured on each device (the GPU figures the lessons show beside their own).

``setup`` is imported when it is first asked for, not with the package: it needs matplotlib (the
course's plot style, through course_utils.viz), about 1 CPU-second, which a grader's sandbox, a
``python -m course_utils`` command or a test that imports one module never uses. The other names
stay eager: they cost torch, which their callers need anyway, and importing ``exercises`` first
keeps the order in which course_utils.learner and the exercises' grading, which import each other's
modules, are loaded.
"""

import importlib

from . import measured
from .claims import claim
from .exercises import check, evaluate
from .exercises.hints import hint
from .learner import progress

__all__ = ["check", "claim", "evaluate", "hint", "measured", "progress", "setup"]


def __getattr__(name):
    """``setup``, or a submodule (``course_utils.viz`` after a bare ``import course_utils``, as when the
    package imported it), imported on first use. Nothing is stored in the package's namespace: the
    exercises' watcher (exercises/sandbox.py) reports a name that appears there while a learner's
    function runs, and only a submodule, bound by its import, is expected to."""
    if name == "setup":
        return importlib.import_module(".session", __name__).setup
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # a submodule that is there but fails to import: its own error
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
