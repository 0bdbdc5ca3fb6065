"""Grading a learner's function: a verdict, never a traceback.

``evaluate`` runs the learner's function and the reference on the same inputs and returns a
Verdict: passed; failed with a named mistake (the learner's outputs equal a known mistake's);
failed with what differs (type, shape, NaN or the largest difference and where); not attempted
(the stub's NotImplementedError); or crashed (the error, shortened). ``check`` prints it.
"""

from dataclasses import dataclass

import torch

from ..i18n import message, pick
from .registry import EXERCISES

PASSED, FAILED, NOT_ATTEMPTED, CRASHED = "passed", "failed", "not attempted", "crashed"


@dataclass(frozen=True)
class Verdict:
    exercise: str
    status: str
    message: str
    code: str = None  # the named mistake, when one explains the failure

    def __str__(self):
        return self.message


def check(exercise, function):
    """Check `function` against exercise `exercise` (an id such as "01.scaled_dot"); print the verdict."""
    print(evaluate(exercise, function).message)


def evaluate(exercise, function):
    """The Verdict for `function` on exercise id `exercise` (see the module docstring)."""
    if exercise not in EXERCISES:
        raise ValueError(message("check.unknown_exercise", got=exercise, known=", ".join(sorted(EXERCISES))))
    spec = EXERCISES[exercise]
    if not callable(function):
        text = message("check.not_callable", got=type(function).__name__)
        return Verdict(exercise, FAILED, text, code="NOT_CALLABLE")

    cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    outcomes = []  # per case: the learner's output, or the error it raised
    for case in cases:
        try:
            outcomes.append(_call(function, case))
        except NotImplementedError:
            return Verdict(exercise, NOT_ATTEMPTED, message("check.not_attempted", exercise=exercise))
        except Exception as error:  # any learner error becomes a verdict, not a crashed notebook
            outcomes.append(_Raised(error))

    crashes = [(number, o.error) for number, o in enumerate(outcomes, start=1) if isinstance(o, _Raised)]
    if not crashes:
        expected = [spec.reference(*_copy(case)) for case in cases]
        differences = [difference(e, g, spec, n) for n, (e, g) in enumerate(zip(expected, outcomes), start=1)]
        if not any(differences):
            return Verdict(exercise, PASSED, message("check.passed", exercise=exercise, cases=len(cases)))
    for mistake in spec.mistakes:
        if reproduces(mistake, cases, outcomes, spec):
            text = message("check.mistake", exercise=exercise, code=mistake.code, hint=pick(mistake.hint))
            return Verdict(exercise, FAILED, text, code=mistake.code)
    if crashes:
        number, error = crashes[0]
        first_line = (str(error).strip().splitlines() or [""])[0]
        text = message(
            "check.crashed", exercise=exercise, error=type(error).__name__, case=number, text=_shorten(first_line, 160)
        )
        return Verdict(exercise, CRASHED, text, code=type(error).__name__)
    detail = next(d for d in differences if d)
    return Verdict(exercise, FAILED, message("check.mismatch", exercise=exercise, detail=detail))


@dataclass(frozen=True)
class _Raised:
    error: Exception


def reproduces(mistake, cases, outcomes, spec):
    """True when the mistake behaves as the learner's function did on every case: the same
    output where the learner's returned, the same kind of error where it raised (a transposed
    matrix, say, only crashes once L_q != L_k), and at least one case returns."""
    returned = False
    for case, outcome in zip(cases, outcomes):
        try:
            wrong = _call(mistake.fn, case)
        except Exception as error:
            if not (isinstance(outcome, _Raised) and type(outcome.error) is type(error)):
                return False
            continue
        if isinstance(outcome, _Raised) or difference(wrong, outcome, spec, 0):
            return False
        returned = True
    return returned


def difference(expected, got, spec, case, where=None):
    """None when `got` matches `expected` within the exercise's tolerance; else a sentence saying how not."""
    where = where or message("diff.result")
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(expected, got, spec, case, where)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return message("diff.type", case=case, where=where, expected=_kind(expected), got=_kind(got))
        if len(got) != len(expected):
            return message("diff.length", case=case, where=where, expected=len(expected), got=len(got))
        for index, (e, g) in enumerate(zip(expected, got)):
            found = difference(e, g, spec, case, message("diff.item", index=index))
            if found:
                return found
        return None
    if got != expected:
        return message("diff.equal", case=case, where=where, expected=expected, got=got)
    return None


def _tensor_difference(expected, got, spec, case, where):
    if not isinstance(got, torch.Tensor) or (expected.dtype == torch.bool) != (got.dtype == torch.bool):
        return message("diff.type", case=case, where=where, expected=_kind(expected), got=_kind(got))
    if got.shape != expected.shape:
        return message("diff.shape", case=case, where=where, expected=tuple(expected.shape), got=tuple(got.shape))
    expected, got = expected.detach().double(), got.detach().double()
    new_nan = got.isnan() & ~expected.isnan()
    if new_nan.any():
        return message("diff.nan", case=case, where=where, index=_index(new_nan.nonzero()[0]))
    if torch.allclose(got, expected, atol=spec.atol, rtol=spec.rtol, equal_nan=True):
        return None
    gap = (got - expected).abs().nan_to_num(nan=float("inf"))
    worst = torch.unravel_index(gap.argmax(), gap.shape)
    return message(
        "diff.value",
        case=case,
        where=where,
        diff=gap[worst].item(),
        index=_index(worst),
        got=got[worst].item(),
        expected=expected[worst].item(),
    )


def _call(function, case):
    """Call `function` on a copy of `case`, leaving the notebook's random state as it was."""
    with torch.random.fork_rng(devices=[]):
        return function(*_copy(case))


def _copy(case):
    # a learner's in-place edit (masked_fill_, +=) must not change the inputs of later calls
    return tuple(arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in case)


def _index(position):
    return tuple(int(i) for i in position)


def _kind(value):
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        return f"Tensor[{dtype}]"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{len(value)} items]"
    return type(value).__name__


def _shorten(text, limit):
    return text if len(text) <= limit else text[: limit - 1] + "…"
