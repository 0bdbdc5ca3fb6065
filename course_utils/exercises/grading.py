"""Grading a learner's function: a verdict, never a traceback.

Grading is three steps, so that the notebook's check and the teacher's grader (course_teacher.grade)
share them:

1. A ``Reference`` (expected.py): what the exercise expects on each case, as data: the result (and, where the
   exercise is differentiable, the gradients of a fixed random weighted sum of it with respect to
   every floating-point input), and what each known mistake returns or raises there. The notebook's
   check reads the public cases' Reference from the package (``public.load``: data written by the
   teacher's side, ``python -m course_teacher.publish``); the grader computes one in its own process
   from the references, on the public cases and hidden ones drawn from the teacher's seed
   (``course_teacher.exercises.prepare``). Its ``calls`` are plain data: the cases' arguments, the
   weights, the forbidden names. No function on this side computes an answer.
2. ``collect`` calls the learner's function on fresh copies of each case inside a sandbox
   (sandbox.py: whatever the function changes is put back, it has a time limit, its printed
   output is capped, forbidden calls are recorded), compares each argument the function received
   with the case's after the call (``changed_arguments``), and keeps what happened: the ``Outcomes``.
   The notebook's check computes gradients when the judge asks for them; the grader's kernel
   computes them all at once, so that its outcomes can be sent back as data.
3. ``judge`` compares the outcomes with the references (compare.py compares with functions
   taken at import, which the learner's code cannot replace):

- passed: on every case, the same types, exact dtypes, shapes and values within the tolerance,
  and, where the reference is differentiable, results attached to the graph with the same
  gradients;
- failed: a forbidden call (FORBIDDEN), a refusal of the run-time rules (rules.REFUSAL_CODES: a text
  evaluator, a process, a thread, a forbidden aten operation, a function that solves the exercise
  recognised by its code; in lesson 09, once the values are right, arithmetic outside the kernels),
  an argument the function changed in place (INPUT_MODIFIED:
  an exercise's function never changes its arguments, as lesson 00's first exercise and the
  README say), a known mistake (its code and hint), a result cut off from the graph (NO_GRAPH),
  other gradients (GRADIENT), or what differs, naming the case's arguments;
- not attempted: every case raised NotImplementedError (the stub);
- crashed: an error (NotImplementedError on some cases only: incomplete), sys.exit(), or the time
  limit (TIME_LIMIT).

A verdict also says when the learner's code changed the world (the sandbox restored it), and
hints at ``.transpose(-2, -1)`` when a wrong answer used ``x.T`` on more than two axes.
``evaluate`` (what ``check`` prints) runs them in one process.
"""

import contextlib
import copy
import gc
import math
import os
import sys
import types
from dataclasses import dataclass

import torch

from ..i18n import message, pick
from ..learner import record
from . import objects, public
from .hints import HINTS
from .compare import difference, gap, tensors
from .rules import AFTER_VALUES, REFUSAL_CODES
from .kernels import described
from .sandbox import Sandbox, TimeLimit

PASSED, FAILED, NOT_ATTEMPTED, CRASHED = "passed", "failed", "not attempted", "crashed"

# Taken when the package is imported: a learner's code that replaces them changes nothing here.
_detach, _tolist, _zeros_like = torch.Tensor.detach, torch.Tensor.tolist, torch.zeros_like
_mul, _sum, _grad = torch.mul, torch.sum, torch.autograd.grad
_equal, _eq, _isnan, _all, _view = torch.equal, torch.eq, torch.isnan, torch.all, torch.Tensor.view
_is_grad_enabled, _set_grad_enabled = torch.is_grad_enabled, torch._C._set_grad_enabled
# nbgrader's autograding and validation set it for the kernel; read at import too, before a learner's cell can unset it
UNDER_NBGRADER = bool(os.environ.get("NBGRADER_EXECUTION"))


@dataclass(frozen=True)
class Verdict:
    exercise: str
    status: str
    message: str
    code: str = None  # the named mistake or kind of failure, when one explains it

    def __str__(self):
        return self.message


def check(exercise, function):
    """Check `function` against exercise `exercise` (an id such as "01.scaled_dot"); print the verdict.

    A verdict other than passed or not attempted ends by saying that hint(exercise) gives hints.
    Under nbgrader (NBGRADER_EXECUTION set, when the package was imported or now) the check cell is
    nbgrader's test: a verdict other than passed raises AssertionError with its message (the cell
    scores 0), and what the check would write to stderr (a warning of the learner's code) goes to
    stdout, as nbgrader scores 0 a cell with any stderr output."""
    if not (UNDER_NBGRADER or os.environ.get("NBGRADER_EXECUTION")):
        verdict = evaluate(exercise, function)
        offer = verdict.status in (FAILED, CRASHED) and exercise in HINTS  # the hints a learner may ask for
        print(verdict.message + ("\n" + message("check.hint_offer", exercise=exercise) if offer else ""))
        _record(verdict)
        return
    with contextlib.redirect_stderr(sys.stdout):
        verdict = evaluate(exercise, function)
    if verdict.status != PASSED:
        raise AssertionError(verdict.message)
    print(verdict.message)


def _record(verdict):
    """Keep the verdict as its exercise's latest in the learner's work folder (course_utils.learner):
    nothing is written outside one, and nothing here can change the verdict or fail the check."""
    try:
        record(verdict)
    except Exception:  # noqa: BLE001 - the learner's progress file is a convenience, the verdict is printed
        pass


def evaluate(exercise, function, *, time_limit=None):
    """The Verdict for `function` on exercise id `exercise` (see the module docstring).
    time_limit: seconds for each call of `function` (default sandbox.TIME_LIMIT)."""
    if exercise not in public.EXERCISES:
        raise ValueError(message("check.unknown_exercise", got=exercise, known=", ".join(public.EXERCISES)))
    if not callable(function):
        return not_callable(exercise, type(function).__name__)
    reference = public.load(exercise)
    with no_collection():
        return judge(reference, collect(reference.calls, function, time_limit))


@contextlib.contextmanager
def no_collection():
    """No garbage collection inside: a learner's object in a reference cycle, whose ``__del__`` would
    run at a collection between two calls, or while the results are judged or encoded, out of every
    watch, could otherwise still change a result (the sandbox keeps the rest alive until then:
    sandbox's kept objects). Collection resumes as it was, after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def not_callable(exercise, type_name):
    """The verdict for a "function" that is not callable (its type's name)."""
    return Verdict(exercise, FAILED, message("check.not_callable", got=type_name), code="NOT_CALLABLE")


# ----------------------------------------------------------------------------- 1. the reference

# ----------------------------------------------------------------------------- 2. the learner's calls

@dataclass(frozen=True)
class Raised:
    """An error a call raised: the exception itself (in this process), or its description as
    data (from the grader's kernel: {"name", "kind", "text", "not_implemented", "exit"})."""

    error: BaseException = None
    record: dict = None
    time_limit: bool = False  # it was the time limit
    note: str = None  # a sentence that explains the error better than its own first line (a Triton kernel's)

    @property
    def name(self):
        return type(self.error).__name__ if self.record is None else self.record["name"]

    @property
    def kind(self):
        """The error's type by its full name (module and qualified name)."""
        return kind_of(type(self.error)) if self.record is None else self.record["kind"]

    @property
    def text(self):
        if self.record is not None:
            return self.record["text"]
        return _shorten(self.note, 400) if self.note else _first_line(self.error)

    @property
    def not_implemented(self):
        return isinstance(self.error, NotImplementedError) if self.record is None else self.record["not_implemented"]

    @property
    def exit(self):
        return isinstance(self.error, SystemExit) if self.record is None else self.record["exit"]

    def describe(self):
        """This error as data (what the grader's kernel sends back)."""
        return {"name": self.name, "kind": self.kind, "text": self.text, "not_implemented": self.not_implemented,
                "exit": self.exit}


class Outcomes:
    """What the learner's function did on each case (``collect``): `results` holds what each call
    returned, or a Raised; the rest is what the sandbox saw. Gradients are computed when the
    judge asks (``gradients``), or all at once with ``collect(..., eager=True)``."""

    def __init__(self, sandbox, names, results, inputs, timed_out, modified, sizes):
        self.sandbox, self.names, self.results, self.inputs = sandbox, names, results, inputs
        self.timed_out = timed_out  # a call of the function ran out of time (the loop stopped there)
        self.modified = modified  # per case: the positions of the arguments the call changed
        self.sizes = sizes  # per case: the most elements of a tensor the call made (0 when not measured)
        self.computed = {}  # case index -> gradients (or Raised), once computed

    # what the sandbox saw, read when asked: a gradient computed later can change it too
    seconds = property(lambda self: self.sandbox.seconds)
    forbidden_calls = property(lambda self: list(self.sandbox.forbidden_calls))
    used_T = property(lambda self: self.sandbox.used_T)
    changed = property(lambda self: list(self.sandbox.changed))
    printed = property(lambda self: self.sandbox.printed)
    refused = property(lambda self: [list(r) for r in self.sandbox.refused])
    compiler_text = property(lambda self: self.sandbox.compiler_text)

    def on_graph(self, tensor):
        return on_graph(tensor)

    def gradients(self, index, outputs, weights):
        """{argument position: gradient} of Σ weights · outputs for case `index` (outputs: the
        learner's tensors at the reference's attached positions), or the Raised of the backward pass."""
        if index not in self.computed:
            try:
                self.computed[index] = self.sandbox.call(gradients, outputs, weights, self.inputs[index], watch=False)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # noqa: BLE001 (an in-place edit autograd refuses, a custom backward, the time limit)
                self.computed[index] = Raised(error, time_limit=isinstance(error, TimeLimit) or self.sandbox.timed_out)
        return self.computed[index]


def collect(calls, function, time_limit=None, *, eager=False):
    """Call `function` on copies of every case of `calls` (Reference.calls) in a sandbox; the Outcomes.

    eager: compute the gradients of every case now (where the result can have them), as the
    grader's kernel does before it sends the outcomes back; otherwise the judge asks for them."""
    grad_mode = _is_grad_enabled()
    _set_grad_enabled(True)
    try:
        return _collect(calls, function, time_limit, eager)
    finally:
        _set_grad_enabled(grad_mode)


def _collect(calls, function, time_limit, eager):
    count = len(calls["args"][0]) if calls["args"] else 0
    names = names_of(function, count)
    measure = any(limit is not None for limit in calls.get("largest", ()))
    exercise = calls.get("exercise")
    sandbox = Sandbox(tuple(calls["forbidden"]), time_limit, measure=measure,
                      exercise=exercise if type(exercise) is str else None)
    device = _kernel_device() if sandbox.kernel else None  # lesson 09 on a GPU: its cases go where kernels compile
    results, inputs, modified, sizes = [], [], [], []  # per case: what the function returned (or Raised), its
    last = len(calls["args"]) - 1
    for index, args in enumerate(calls["args"]):  # leaf inputs, the arguments it changed, the largest tensor it made
        leaves, fresh = copies(args, grad=calls["differentiable"])
        sandbox.largest = 0
        try:
            if sandbox.kernel and index == last:  # lesson 09: the last case (the grader's: hidden) on other values
                sandbox.probe(function, fresh if device is None else _moved(fresh, device))  # first (DATA_IN_ARGUMENTS)
            if device is None:
                results.append(_returned(objects.call(exercise, sandbox.call, function, fresh)))
            else:
                fresh = _moved(fresh, device)
                try:
                    results.append(_returned(_moved(sandbox.call(function, *fresh), _CPU)))
                finally:  # (compared with the case's arguments, on the CPU, whatever the call did)
                    fresh = _moved(fresh, _CPU)
        except TimeLimit as error:
            results.append(Raised(error, time_limit=True))
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # noqa: BLE001 (any learner error, SystemExit too, becomes a verdict)
            results.append(Raised(error, note=_explained(error) if sandbox.kernel else None))
        inputs.append(leaves)
        modified.append([] if sandbox.timed_out else changed_arguments(args, fresh))
        sizes.append(sandbox.largest)
        if sandbox.timed_out:
            break
    outcomes = Outcomes(sandbox, names, results, inputs, sandbox.timed_out, modified, sizes)
    if eager:
        for index, result in enumerate(results):
            outputs = _gradient_outputs(outcomes, result, calls["attached"][index], calls["weights"][index])
            found = outcomes.gradients(index, outputs, calls["weights"][index]) if outputs is not None else None
            if isinstance(found, Raised) and found.time_limit:
                break  # the judge stops at the first case whose gradients run out of time
    return outcomes


_to, _CPU = torch.Tensor.to, torch.device("cpu")


def _kernel_device():
    """The device lesson 09's kernels run on (course_utils.triton_setup.device()), when it is not the CPU."""
    setup = sys.modules.get("course_utils.triton_setup")
    device = setup.device() if setup is not None and hasattr(setup, "device") else None
    return device if device is not None and device.type != "cpu" else None


def _moved(value, device):
    """`value` with its plain tensors (inside tuples and lists too) on `device`; anything else as it is."""
    if type(value) is torch.Tensor:
        return _to(value, device)
    if type(value) in (tuple, list):
        return type(value)(_moved(item, device) for item in value)
    return value


def _explained(error):
    """What course_utils.triton_launches makes of an error a Triton kernel raised, where Triton was loaded."""
    launches = sys.modules.get("course_utils.triton_launches")
    try:
        return launches.explain(error) if launches is not None else None
    except Exception:  # noqa: BLE001 (no explanation: the error's own first line is quoted)
        return None


class _Impostor:
    """Stands for a Raised that a learner's function returned (the judge takes a Raised in the
    results for an error its function raised): judged as an object of another type."""

    __name__ = "Raised"


def _returned(value):
    return _Impostor() if isinstance(value, Raised) else value


def _gradient_outputs(outcomes, result, attached, weights):
    """The learner's tensors at the reference's attached positions, when they can have the
    reference's gradients (attached, and of the weights' shapes and dtypes); else None."""
    if not attached or isinstance(result, Raised):
        return None
    returned = tensors(result)
    if max(attached) >= len(returned):
        return None
    outputs = [returned[position][1] for position in attached]
    for output, weight in zip(outputs, weights):
        if type(output) is not torch.Tensor or not outcomes.on_graph(output):
            return None
        if output.dtype != weight.dtype or output.shape != weight.shape:
            return None
    return outputs


# ----------------------------------------------------------------------------- 3. the judge

def judge(reference, outcomes):
    """The Verdict for `outcomes` (from ``collect``, or received from a kernel) against `reference`."""
    grad_mode = _is_grad_enabled()
    _set_grad_enabled(True)
    try:
        return _judge_all(reference, outcomes)
    finally:
        _set_grad_enabled(grad_mode)


def _judge_all(reference, outcomes):
    cases, exercise = reference.cases, reference.exercise
    count = len(cases[0].args) if cases else 0
    # With hidden cases (the grader's), the names are the exercise's own: a kernel sends the learner's,
    # and a function that saw a hidden case could spell its inputs in them.
    hidden = any(case.hidden for case in cases)
    names = outcomes.names if _good_names(outcomes.names, count) and not hidden else \
        fallback_names(reference.names, count)
    for case in cases:
        case.names = names
        case.label = message("check.hidden_case") if case.hidden else _label(names, case.args)
    if exercise in objects.JUDGED:  # judged by what the calls showed (objects.py), here, in the judge's process
        outcomes.results = [_finished(exercise, case.args, result) for case, result in zip(cases, outcomes.results)]
    status, text, code = _judge(exercise, cases, outcomes, reference.mistakes, reference.tolerance,
                                reference.returns)
    if status not in (PASSED, NOT_ATTEMPTED) and outcomes.used_T:
        text += "\n" + message("check.hint_T")
    changed = outcomes.changed
    if changed:
        text += "\n" + message("check.world_changed", what=_list(_change(c) for c in changed))
    return Verdict(exercise, status, text, code)


def _finished(exercise, args, kept):
    """objects.finish of what a call kept, or the Raised it stands for."""
    if isinstance(kept, Raised):
        return kept
    try:
        return objects.finish(exercise, args, kept)
    except objects.FedTooManyTokens as error:
        return Raised(error)
    except Exception:  # noqa: BLE001 (what came back is not what the call keeps: judged as it is)
        return kept


def _judge(exercise, cases, outcomes, mistakes, tolerance, returns=()):
    """(status, message, code) for the learner's outcomes on the cases."""
    results = outcomes.results
    if outcomes.timed_out:
        case = cases[len(results) - 1]
        return CRASHED, _time_limit(exercise, outcomes, case), "TIME_LIMIT"
    raised = [(case, o) for case, o in zip(cases, results) if isinstance(o, Raised)]
    unfinished = [case for case, error in raised if error.not_implemented]
    if len(unfinished) == len(cases):
        return NOT_ATTEMPTED, message("check.not_attempted", exercise=exercise), None
    forbidden_calls = outcomes.forbidden_calls
    if forbidden_calls:
        names = _list(f"`{name}`" for name in dict.fromkeys(forbidden_calls))
        return FAILED, message("check.forbidden", exercise=exercise, names=names), "FORBIDDEN"
    refused = _refusal(exercise, outcomes, lambda code: code not in AFTER_VALUES)
    if refused:
        return refused
    for case, positions in zip(cases, outcomes.modified):
        if positions:
            return FAILED, _input_modified(exercise, case, positions[0]), "INPUT_MODIFIED"

    if not raised:
        differences = [difference(case.expected, got, tolerance, returns=returns) for case, got in zip(cases, results)]
        if not any(differences):
            verdict = _judge_gradients(exercise, cases, outcomes, tolerance, returns)
            return (verdict[0] == PASSED and (_judge_sizes(exercise, cases, outcomes)
                                              or _refusal(exercise, outcomes, AFTER_VALUES.__contains__))) or verdict
    for mistake in mistakes:
        if reproduces(mistake, results, tolerance):
            text = message("check.mistake", exercise=exercise, code=mistake.code, hint=pick(mistake.hint))
            return FAILED, text, mistake.code
    if unfinished:
        case = unfinished[0]
        text = message("check.incomplete", exercise=exercise, case=case.number, args=case.label)
        return CRASHED, text, "NotImplementedError"
    if raised:
        case, error = raised[0]
        if error.exit:
            return CRASHED, message("check.exit", exercise=exercise, case=case.number, args=case.label), "SystemExit"
        text = message(
            "check.crashed", exercise=exercise, error=error.name, case=case.number, args=case.label,
            text=_shown(case, error.text),
        )
        return CRASHED, text, error.name
    case, detail = next((case, d) for case, d in zip(cases, differences) if d)
    detail = message("check.case", case=case.number, args=case.label,
                     detail=message("check.hidden_detail") if case.hidden else detail)
    return FAILED, message("check.mismatch", exercise=exercise, detail=detail), None


def _judge_gradients(exercise, cases, outcomes, tolerance, returns=()):
    """The values are right: where the reference is on the graph, the learner's result must be
    too, with the same gradients."""
    for index, (case, got) in enumerate(zip(cases, outcomes.results)):
        if not case.attached:
            continue
        returned = tensors(got, returns=returns)  # [(where, tensor)], as the reference's (the values matched)
        for position in case.attached:
            where, tensor = returned[position]
            if not outcomes.on_graph(tensor):
                text = message("check.no_graph", exercise=exercise, case=case.number, args=case.label,
                               where=where or message("diff.result"))
                return FAILED, text, "NO_GRAPH"
        outputs = [returned[position][1] for position in case.attached]
        gradients = outcomes.gradients(index, outputs, case.weights)
        if isinstance(gradients, Raised):
            if gradients.time_limit:
                return CRASHED, _time_limit(exercise, outcomes, case), "TIME_LIMIT"
            text = message(
                "check.backward_failed", exercise=exercise, case=case.number, args=case.label,
                error=gradients.name, text=_shown(case, gradients.text),
            )
            return FAILED, text, "BACKWARD"
        for position, expected in case.gradients.items():
            found = gap(expected, _detach(gradients[position]), tolerance)
            if found:
                name = case.names[position]
                key = "check.gradient_nan" if found[0] == "nan" else "check.gradient"
                if case.hidden:  # where, and by how much, would show the expected gradients
                    key, found = "check.gradient_hidden", (None, {})
                text = message(key, exercise=exercise, case=case.number, args=case.label, name=name, **found[1])
                return FAILED, text, "GRADIENT"
    return PASSED, message("check.passed", exercise=exercise, cases=len(cases)), None


def _refusal(exercise, outcomes, which):
    """(FAILED, message, code) for the first refusal (rules.REFUSAL_CODES order) that `which(code)` selects, or None."""
    refused = [r for r in getattr(outcomes, "refused", ()) if which(r[0])]
    if not refused:
        return None
    code, detail = min(refused, key=lambda r: REFUSAL_CODES.index(r[0]))
    if code == "COMPILER_REFUSED":
        detail = getattr(outcomes, "compiler_text", None) or ""
    elif code == "DATA_IN_ARGUMENTS":
        detail = described(detail)
    return FAILED, message(f"check.refused.{code}", exercise=exercise, detail=detail), code


def _judge_sizes(exercise, cases, outcomes):
    """Right values and gradients: where an exercise limits how much its function may hold at once
    (e.g. one tile of scores), the largest tensor each call made must be within the limit; None
    when it is."""
    for case, size in zip(cases, outcomes.sizes):
        if case.largest is not None and size > case.largest:
            text = message("check.too_large", exercise=exercise, case=case.number, args=case.label, size=size,
                           limit=case.largest)
            return FAILED, text, "TOO_LARGE"
    return None


# ----------------------------------------------------------------------------- gradients and copies

def gradients(outputs, weights, leaves):
    """{argument position: d(Σ weights · outputs)/d(argument)}, zeros for an argument not used."""
    total = sum(_sum(_mul(output, weight)) for output, weight in zip(outputs, weights))
    found = _grad([total], list(leaves.values()), allow_unused=True)
    return {
        position: _zeros_like(leaf) if gradient is None else gradient
        for (position, leaf), gradient in zip(leaves.items(), found)
    }


def copies(args, grad):
    """Fresh copies of a case's arguments, and {position: leaf} for the floating-point tensors
    when `grad`: each is a leaf that requires grad, and the call gets a clone of it (so that
    autograd accepts an in-place edit of an argument, which reaches neither the case nor the
    leaf; ``changed_arguments`` then finds it)."""
    leaves, fresh = {}, []
    for position, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            arg = arg.detach().clone()
            if grad and arg.is_floating_point():
                leaves[position] = arg.requires_grad_()
                arg = arg.clone()
        else:
            arg = copy.deepcopy(arg)
        fresh.append(arg)
    return leaves, tuple(fresh)


#: The integer dtype of each floating dtype's size: a float tensor's bits, to compare them exactly.
_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}


def changed_arguments(given, received):
    """The positions of the arguments a call changed: `received` (what the function was called
    with, as it is after the call) against `given` (the case's arguments)."""
    return [position for position, (g, r) in enumerate(zip(given, received)) if not same_value(g, r)]


def same_value(given, received):
    """Whether `received` still is `given`: a tensor of the same type, dtype, shape and values, bit
    for bit (a NaN where a NaN was is the same); a list, tuple or dict item by item; any other
    value equal and of the same type. Never runs a method of the learner's objects."""
    if isinstance(given, torch.Tensor):
        if type(received) is not torch.Tensor or received.dtype != given.dtype or received.shape != given.shape:
            return False
        if received.layout != given.layout or received.device != given.device or received.is_nested:
            return False
        received = _detach(received)
        bits = _BITS.get(given.dtype)
        if bits is None:
            return bool(_equal(received, given))
        both_nan = _isnan(received) & _isnan(given)
        return bool(_all(_eq(_view(received, bits), _view(given, bits)) | both_nan))
    if type(given) in (list, tuple):
        return (type(received) is type(given) and len(received) == len(given)
                and all(same_value(g, r) for g, r in zip(given, received)))
    if type(given) is dict:
        return (type(received) is dict and list(received) == list(given)
                and all(same_value(given[key], received[key]) for key in given))
    if type(received) is not type(given):
        return False
    if type(given) is float and math.isnan(given):
        return math.isnan(received)
    try:
        return bool(given == received)
    except Exception:  # noqa: BLE001 (an object whose comparison fails is not the same)
        return False


def _input_modified(exercise, case, position):
    """The INPUT_MODIFIED verdict's text: the argument at `position` of `case` was changed."""
    name, given = case.names[position], case.args[position]
    if isinstance(given, torch.Tensor):
        copied = f"{name} = {name}.clone()"
    elif type(given) in (list, dict):
        copied = f"{name} = {type(given).__name__}({name})"
    else:
        copied = f"{name} = copy.deepcopy({name})"
    return message("check.input_modified", exercise=exercise, case=case.number, args=case.label, name=name,
                   copy=copied)


# ----------------------------------------------------------------------------- mistakes

def reproduces(mistake, outcomes, tolerance):
    """True when the mistake (a Known) behaved as the learner's function did on every case: the same
    output where the learner's returned, the same kind of error where it raised (a transposed
    matrix, say, only crashes once L_q != L_k), and at least one case returns. Outputs only."""
    returned = False
    for (kind, wrong), outcome in zip(mistake.results, outcomes):
        if kind == "raised":
            if not (isinstance(outcome, Raised) and outcome.kind == wrong):
                return False
            continue
        if isinstance(outcome, Raised) or difference(wrong, outcome, tolerance):
            return False
        returned = True
    return returned


# ----------------------------------------------------------------------------- naming things

def fallback_names(names, count):
    """The reference's argument names, else "argument 1", ..."""
    if type(names) is list and len(names) >= count:
        return list(names[:count])
    return [message("diff.argument", number=n) for n in range(1, count + 1)]


def names_of(candidate, count):
    """The first `count` argument names of a Python function or method, else None."""
    skip = 0
    if type(candidate) is types.MethodType:
        candidate, skip = candidate.__func__, 1
    if type(candidate) is types.FunctionType:
        code = candidate.__code__
        names = code.co_varnames[skip : code.co_argcount]
        if len(names) >= count:
            return list(names[:count])
    return None


def _shown(case, text):
    """An error's text as a verdict quotes it: never for a hidden case (it may hold its inputs)."""
    return message("check.hidden_text") if case.hidden else text


def _good_names(names, count):
    """Argument names as the judge takes them from outcomes (which a kernel may have sent)."""
    return (type(names) is list and len(names) == count
            and all(type(n) is str and n.isidentifier() and len(n) <= 64 for n in names))


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


def _time_limit(exercise, outcomes, case):
    return message("check.time_limit", exercise=exercise, seconds=outcomes.seconds, case=case.number, args=case.label)


def _change(change):
    kind, name = change
    return message(f"check.setting.{name}") if kind == "setting" else message(f"check.change.{kind}", name=name)


def _list(items):
    return message("check.list_separator").join(items)


def _first_line(error):
    try:
        text = str(error).strip()
    except Exception:  # noqa: BLE001 (an exception whose __str__ fails still gets a verdict)
        text = ""
    return _shorten((text.splitlines() or [""])[0], 160)


def kind_of(cls):
    """ "builtins.RuntimeError": a type by its module and qualified name (read past any metaclass)."""
    try:
        return f"{type.__getattribute__(cls, '__module__')}.{type.__getattribute__(cls, '__qualname__')}"
    except Exception:  # noqa: BLE001 (a learner's class may defy it)
        return "?"


def _shorten(text, limit):
    return text if len(text) <= limit else text[: limit - 1] + "…"


def on_graph(tensor):
    """Attached to the inputs' graph. (A view taken under no_grad says requires_grad, but has no
    grad_fn; the function's inputs are never leaves, so its result has one when it is attached.)"""
    return tensor.requires_grad and tensor.grad_fn is not None
