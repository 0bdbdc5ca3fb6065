"""The check a notebook calls, and what it needs: each exercise's public cases as data.

public.py reads an exercise's public cases, expected results and known mistakes (data written by the
teacher's side, course_teacher); grading.py judges a learner's function against them; sandbox.py
runs it without letting it change the notebook; compare.py says what differs. rules.py is the policy of
what the function may do while it runs (applied by audit.py, observe.py and kernels.py). kernel.py and
wire.py are the grader's side inside a submission's kernel. Nothing in this package solves an exercise.
"""

from .grading import CRASHED, FAILED, NOT_ATTEMPTED, PASSED, Verdict, check, evaluate
from .public import EXERCISES

__all__ = ["CRASHED", "EXERCISES", "FAILED", "NOT_ATTEMPTED", "PASSED", "Verdict", "check", "evaluate"]
