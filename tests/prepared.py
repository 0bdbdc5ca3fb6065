"""The teacher's verdict on a function (course_teacher.exercises.evaluate), with each exercise's Reference
prepared once per test process and seed, as the grader prepares its answer key once for a whole class.

``course_teacher.exercises.evaluate(exercise, function, hidden_seed=...)`` prepares the Reference anew at
every call: the reference run on every public and hidden case with its gradients, and every known mistake
run on every case (what names a mistake). That is most of a call's time (measured: three quarters of
test_exercises' hidden-case sweep), and the same for every function judged on one exercise and seed. Here
it is done once and handed to ``evaluate`` as its prepared key (``reference=``): the same judgement, on a
Reference kept for the next function. A judgement leaves its Reference as it was (the grader judges every
submission of a class against one), apart from the names and labels it sets afresh on each case every time.
"""

import patience
from course_teacher.exercises import EXERCISES, prepare
from course_teacher.exercises import evaluate as _evaluate
from course_utils.exercises.sandbox import TIME_LIMIT

# {(id of the exercise's registry entry, seed): (the entry, its Reference)}; the entry is kept so that its
# id is not reused while the Reference is
_PREPARED = {}


def prepared(exercise, hidden_seed=None):
    """The Reference of `exercise` (an id or a registry entry, e.g. one whose cases were replaced) with the
    hidden cases of `hidden_seed` (None: the public ones only), prepared on the first call."""
    spec = EXERCISES[exercise] if isinstance(exercise, str) else exercise
    key = (id(spec), hidden_seed)
    if key not in _PREPARED:
        _PREPARED[key] = (spec, prepare(spec, hidden_seed))
    return _PREPARED[key][1]


def evaluate(exercise, function, *, hidden_seed=None, time_limit=None):
    """course_teacher.exercises.evaluate's Verdict, on the Reference prepared once (``prepared``).

    `time_limit` None: the check's own limit for one call (sandbox.TIME_LIMIT) stretched by the machine's
    slowness (tests/patience.py). A right answer that takes seconds on a quiet machine (lesson 09's kernels
    under Triton's interpreter) was stopped on a busy one (measured: case 2 of 09.flash_forward_half past
    10 s at a load of 10 on 2 cores), which would read as a wrong verdict."""
    limit = patience.seconds(TIME_LIMIT) if time_limit is None else time_limit
    return _evaluate(exercise, function, hidden_seed=hidden_seed, time_limit=limit,
                     reference=prepared(exercise, hidden_seed))
