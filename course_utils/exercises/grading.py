"""Grading a learner's function: a verdict, never a traceback.

``evaluate`` first computes the reference's result on every case (and, where the exercise is
differentiable, the gradients of a fixed random weighted sum of it with respect to every
floating-point input), then calls the learner's function on fresh copies of each case inside a
sandbox (sandbox.py: whatever the function changes is put back, it has a time limit, its printed
output is capped). Then, the world restored, it judges (compare.py compares with functions taken
at import, which the learner's code cannot replace):

- passed: on every case, the same types, exact dtypes, shapes and values within the tolerance,
  and, where the reference is differentiable, results attached to the graph with the same
  gradients;
- failed: a forbidden call (FORBIDDEN), a known mistake (its code and hint), a result cut off from
  the graph (NO_GRAPH), other gradients (GRADIENT), or what differs, naming the case's arguments;
- not attempted: every case raised NotImplementedError (the stub);
- crashed: an error (NotImplementedError on some cases only: incomplete), sys.exit(), or the time
  limit (TIME_LIMIT).

A verdict also says when the learner's code changed the world (the sandbox restored it), and
hints at ``.transpose(-2, -1)`` when a wrong answer used ``x.T`` on more than two axes.
"""

import copy
import types
import warnings
from dataclasses import dataclass

import torch

from ..i18n import message, pick
from .compare import difference, gap, tensors
from .registry import EXERCISES
from .sandbox import Sandbox, TimeLimit

PASSED, FAILED, NOT_ATTEMPTED, CRASHED = "passed", "failed", "not attempted", "crashed"

# Taken when the package is imported: a learner's code that replaces them changes nothing here.
_detach, _tolist, _zeros_like = torch.Tensor.detach, torch.Tensor.tolist, torch.zeros_like
_randn, _mul, _sum, _grad = torch.randn, torch.mul, torch.sum, torch.autograd.grad
_is_grad_enabled, _set_grad_enabled = torch.is_grad_enabled, torch._C._set_grad_enabled


@dataclass(frozen=True)
class Verdict:
    exercise: str
    status: str
    message: str
    code: str = None  # the named mistake or kind of failure, when one explains it

    def __str__(self):
        return self.message


def check(exercise, function):
    """Check `function` against exercise `exercise` (an id such as "01.scaled_dot"); print the verdict."""
    print(evaluate(exercise, function).message)


def evaluate(exercise, function, *, time_limit=None):
    """The Verdict for `function` on exercise id `exercise` (see the module docstring).
    time_limit: seconds for each call of `function` (default sandbox.TIME_LIMIT)."""
    if exercise not in EXERCISES:
        raise ValueError(message("check.unknown_exercise", got=exercise, known=", ".join(sorted(EXERCISES))))
    spec = EXERCISES[exercise]
    if not callable(function):
        text = message("check.not_callable", got=type(function).__name__)
        return Verdict(exercise, FAILED, text, code="NOT_CALLABLE")
    grad_mode = _is_grad_enabled()
    _set_grad_enabled(True)  # the references' graphs, even where the notebook turned gradients off
    try:
        return _evaluate(spec, function, time_limit)
    finally:
        _set_grad_enabled(grad_mode)


@dataclass
class _Case:
    number: int
    args: tuple  # the case's arguments; every call gets copies
    names: list  # the arguments' names
    label: str  # "query (3, 5, 8), key (3, 7, 8), value (3, 7, 6)"
    expected: object  # the reference's result, detached
    attached: list  # which of its tensors (in compare.tensors order) are on the graph
    weights: list  # a fixed random weight for each of those
    gradients: dict  # argument position -> the reference's gradient of the weighted sum


@dataclass(frozen=True)
class _Raised:
    error: BaseException


def _evaluate(spec, function, time_limit):
    tolerance, mistakes = (spec.atol, spec.rtol), tuple(spec.mistakes)  # read before the learner's code runs
    raw_cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    names = _argument_names(function, spec.reference, len(raw_cases[0]))
    cases = [_reference_case(spec.reference, n, args, names) for n, args in enumerate(raw_cases, start=1)]
    differentiable = any(case.attached for case in cases)

    sandbox = Sandbox(spec.forbidden, time_limit)
    outcomes, inputs = [], []  # per case: what the function returned (or _Raised), its leaf inputs
    for case in cases:
        leaves, args = _copies(case.args, grad=differentiable)
        try:
            outcomes.append(sandbox.call(function, *args))
        except TimeLimit:
            outcomes.append(_Raised(TimeLimit()))
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # any learner error, SystemExit too, becomes a verdict
            outcomes.append(_Raised(error))
        inputs.append(leaves)
        if sandbox.timed_out:
            break

    status, text, code = _judge(spec.id, cases, outcomes, inputs, mistakes, tolerance, sandbox)
    if status not in (PASSED, NOT_ATTEMPTED) and sandbox.used_T:
        text += "\n" + message("check.hint_T")
    if sandbox.changed:
        text += "\n" + message("check.world_changed", what=_list(_change(c) for c in sandbox.changed))
    return Verdict(spec.id, status, text, code)


def _judge(exercise, cases, outcomes, inputs, mistakes, tolerance, sandbox):
    """(status, message, code) for the learner's outcomes on the cases."""
    if sandbox.timed_out:
        case = cases[len(outcomes) - 1]
        return CRASHED, _time_limit(exercise, sandbox, case), "TIME_LIMIT"
    raised = [(case, o.error) for case, o in zip(cases, outcomes) if isinstance(o, _Raised)]
    unfinished = [case for case, error in raised if isinstance(error, NotImplementedError)]
    if len(unfinished) == len(cases):
        return NOT_ATTEMPTED, message("check.not_attempted", exercise=exercise), None
    if sandbox.forbidden_calls:
        names = _list(f"`{name}`" for name in dict.fromkeys(sandbox.forbidden_calls))
        return FAILED, message("check.forbidden", exercise=exercise, names=names), "FORBIDDEN"

    if not raised:
        differences = [difference(case.expected, got, tolerance) for case, got in zip(cases, outcomes)]
        if not any(differences):
            return _judge_gradients(exercise, cases, outcomes, inputs, tolerance, sandbox)
    plain_cases = [case.args for case in cases]
    for mistake in mistakes:
        if reproduces(mistake, plain_cases, outcomes, tolerance):
            text = message("check.mistake", exercise=exercise, code=mistake.code, hint=pick(mistake.hint))
            return FAILED, text, mistake.code
    if unfinished:
        case = unfinished[0]
        text = message("check.incomplete", exercise=exercise, case=case.number, args=case.label)
        return CRASHED, text, "NotImplementedError"
    if raised:
        case, error = raised[0]
        if isinstance(error, SystemExit):
            return CRASHED, message("check.exit", exercise=exercise, case=case.number, args=case.label), "SystemExit"
        text = message(
            "check.crashed", exercise=exercise, error=type(error).__name__, case=case.number, args=case.label,
            text=_first_line(error),
        )
        return CRASHED, text, type(error).__name__
    case, detail = next((case, d) for case, d in zip(cases, differences) if d)
    detail = message("check.case", case=case.number, args=case.label, detail=detail)
    return FAILED, message("check.mismatch", exercise=exercise, detail=detail), None


def _judge_gradients(exercise, cases, outcomes, inputs, tolerance, sandbox):
    """The values are right: where the reference is on the graph, the learner's result must be
    too, with the same gradients."""
    for case, got, leaves in zip(cases, outcomes, inputs):
        if not case.attached:
            continue
        returned = tensors(got)  # [(where, tensor)], as the reference's (the values matched)
        for position in case.attached:
            where, tensor = returned[position]
            if not _on_graph(tensor):
                text = message("check.no_graph", exercise=exercise, case=case.number, args=case.label,
                               where=where or message("diff.result"))
                return FAILED, text, "NO_GRAPH"
        outputs = [returned[position][1] for position in case.attached]
        try:
            gradients = sandbox.call(_gradients, outputs, case.weights, leaves, watch=False)
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # an in-place edit autograd refuses, a custom backward, the time limit
            if isinstance(error, TimeLimit) or sandbox.timed_out:
                return CRASHED, _time_limit(exercise, sandbox, case), "TIME_LIMIT"
            text = message(
                "check.backward_failed", exercise=exercise, case=case.number, args=case.label,
                error=type(error).__name__, text=_first_line(error),
            )
            return FAILED, text, "BACKWARD"
        for position, expected in case.gradients.items():
            found = gap(expected, _detach(gradients[position]), tolerance)
            if found:
                name = case.names[position]
                key = "check.gradient_nan" if found[0] == "nan" else "check.gradient"
                text = message(key, exercise=exercise, case=case.number, args=case.label, name=name, **found[1])
                return FAILED, text, "GRADIENT"
    return PASSED, message("check.passed", exercise=exercise, cases=len(cases)), None


# ----------------------------------------------------------------------------- the reference

def _reference_case(reference, number, args, names):
    """Run the reference on a case, before any learner code: its result, and its gradients."""
    leaves, copies = _copies(args, grad=True)
    with torch.random.fork_rng(devices=[]):
        output = reference(*copies)
    produced = [t for _, t in tensors(output)]
    attached = [i for i, t in enumerate(produced) if t.is_floating_point() and _on_graph(t)]
    generator = torch.Generator().manual_seed(number)  # fixed: the same weights for reference and learner
    weights = [_randn(produced[i].shape, generator=generator, dtype=produced[i].dtype) for i in attached]
    gradients = _gradients([produced[i] for i in attached], weights, leaves) if attached else {}
    return _Case(number, args, names, _label(names, args), _map(output, _detach), attached, weights, gradients)


def _gradients(outputs, weights, leaves):
    """{argument position: d(Σ weights · outputs)/d(argument)}, zeros for an argument not used."""
    total = sum(_sum(_mul(output, weight)) for output, weight in zip(outputs, weights))
    found = _grad([total], list(leaves.values()), allow_unused=True)
    return {
        position: _zeros_like(leaf) if gradient is None else gradient
        for (position, leaf), gradient in zip(leaves.items(), found)
    }


def _copies(args, grad):
    """Fresh copies of a case's arguments, and {position: leaf} for the floating-point tensors
    when `grad`: each is a leaf that requires grad, and the call gets a clone of it (so an
    in-place edit of an argument is allowed, and reaches neither the case nor the leaf)."""
    leaves, copies = {}, []
    for position, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            arg = arg.detach().clone()
            if grad and arg.is_floating_point():
                leaves[position] = arg.requires_grad_()
                arg = arg.clone()
        else:
            arg = copy.deepcopy(arg)
        copies.append(arg)
    return leaves, tuple(copies)


# ----------------------------------------------------------------------------- mistakes

def reproduces(mistake, cases, outcomes, tolerance):
    """True when the mistake behaves as the learner's function did on every case: the same
    output where the learner's returned, the same kind of error where it raised (a transposed
    matrix, say, only crashes once L_q != L_k), and at least one case returns. Outputs only."""
    returned = False
    for case, outcome in zip(cases, outcomes):
        try:
            wrong = _call(mistake.fn, case)
        except Exception as error:
            if not (isinstance(outcome, _Raised) and type(outcome.error) is type(error)):
                return False
            continue
        if isinstance(outcome, _Raised) or difference(wrong, outcome, tolerance):
            return False
        returned = True
    return returned


def _call(function, case):
    """Call a mistake (our code) on copies of `case`, quietly, leaving the random state alone."""
    with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*_copies(case, grad=False)[1])


# ----------------------------------------------------------------------------- naming things

def _argument_names(function, reference, count):
    """The names of the arguments, from the learner's function, else the reference's, else
    "argument 1", ... (read from code objects: no learner code runs)."""
    for candidate in (function, reference):
        skip = 0
        if type(candidate) is types.MethodType:
            candidate, skip = candidate.__func__, 1
        if type(candidate) is types.FunctionType:
            code = candidate.__code__
            names = code.co_varnames[skip : code.co_argcount]
            if len(names) >= count:
                return list(names[:count])
    return [message("diff.argument", number=n) for n in range(1, count + 1)]


def _label(names, args):
    """ "query (3, 5, 8), key (3, 7, 8)": tensors by shape (short integer vectors by value), others by value."""
    parts = []
    for name, arg in zip(names, args):
        if isinstance(arg, torch.Tensor):
            small = arg.dim() == 1 and arg.dtype in (torch.int32, torch.int64) and arg.numel() <= 8
            parts.append(f"{name} {_tolist(arg) if small else tuple(arg.shape)}")
        else:
            parts.append(f"{name} = {_shorten(repr(arg), 40)}")
    return message("diff.separator").join(parts)


def _time_limit(exercise, sandbox, case):
    return message("check.time_limit", exercise=exercise, seconds=sandbox.seconds, case=case.number, args=case.label)


def _change(change):
    kind, name = change
    return message(f"check.setting.{name}") if kind == "setting" else message(f"check.change.{kind}", name=name)


def _list(items):
    return message("check.list_separator").join(items)


def _first_line(error):
    try:
        text = str(error).strip()
    except Exception:  # an exception whose __str__ fails still gets a verdict
        text = ""
    return _shorten((text.splitlines() or [""])[0], 160)


def _map(value, change):
    if isinstance(value, torch.Tensor):
        return change(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(item, change) for item in value)
    return value


def _shorten(text, limit):
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _on_graph(tensor):
    """Attached to the inputs' graph. (A view taken under no_grad says requires_grad, but has no
    grad_fn; the function's inputs are never leaves, so its result has one when it is attached.)"""
    return tensor.requires_grad and tensor.grad_fn is not None
