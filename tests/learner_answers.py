"""What the three files of learners' answers share (tests/test_learner_answers*.py import this module):
each file collects its answers with ``answer(exercise, expected)`` into its own ``Answers`` list.

expected: PASSES for a right answer written another way; for a wrong one the code of the mistake its
verdict must name, None where the check catches it without naming it (the verdict then says what
differs), CRASHES where it raises, or the name of the error it raises ("RuntimeError")."""

from course_utils.exercises import CRASHED, PASSED

PASSES = "passes"
CRASHES = "crashes"  # caught: the verdict is the error it raised (named by no mistake)


class Answers(list):
    """[(exercise, function, expected)], filled by the ``answer`` decorator."""

    def answer(self, exercise, expected):
        def add(function):
            self.append((exercise, function, expected))
            return function

        return add

    @property
    def ids(self):
        return [f"{exercise}-{function.__name__}" for exercise, function, _ in self]

    def wrong(self):
        return [expected for _, _, expected in self if expected != PASSES]


def holds(verdict, expected):
    """Whether `verdict` is the one `expected` says."""
    if expected == PASSES:
        return verdict.status == PASSED
    if expected == CRASHES:
        return verdict.status == CRASHED
    return verdict.status != PASSED and verdict.code == expected


def named(expected):
    """Whether a wrong answer's verdict names its mistake: a mistake's code, or the check's own
    FORBIDDEN, INPUT_MODIFIED, NO_GRAPH, GRADIENT or TOO_LARGE; not None, CRASHES or an error's name."""
    return expected not in (None, CRASHES) and not expected.endswith(("Error", "Exception"))
