"""Where a check runs a learner's function: whatever the function does, the notebook stays as it was.

A check calls the learner's function through ``Sandbox.call``. Before each call it takes a
snapshot of what the function could change and still matter afterwards, and after the call it
puts that snapshot back and remembers what differed:

- the attributes of torch, torch.Tensor, torch.nn, torch.nn.functional, torch.linalg,
  torch.special, torch.autograd, torch.nn.Module, math, builtins and every loaded
  ``course_utils`` module (replaced, added or deleted), the code and defaults of the Python
  functions among them;
- global torch settings: the default dtype and device, grad mode, inference mode, deterministic
  algorithms, anomaly detection, the torch function and dispatch mode stacks, the number of
  threads, the print options; torch's random generator; sys.stdout, sys.stderr and the tracer.

Each call also gets a time limit (``TimeLimit``, raised into the function after ``seconds``: see
``CallTimer`` for how it holds against code that catches it), a shared budget of printed characters,
and, where an exercise forbids some functions, watchers that record every call to them. Warnings
are recorded: ``x.T`` on a tensor with more than two axes is worth a hint (Triton's own are dropped).

Given the exercise's id, a call also runs under the run-time rules (rules.py, the policy): the audit
guard (audit.py: no text evaluators, processes, C libraries, sockets, tracer changes or foreign imports,
one thread), the dispatch mode that sees the aten operations (observe.py), the trace function that
recognises the functions that solve the exercise by code, and in lesson 09 the kernel ledger
(kernels.py), whose trace of the last case is compared with that of a call on other values made first
(``probe``: DATA_IN_ARGUMENTS). What they refuse is kept in ``Sandbox.refused`` as [code, detail] pairs; taking the
check's modes off torch's stacks is refused too (UNWATCHED). The notebook's check and the grader's
kernel both call through here, so their verdicts agree.
"""

import _thread
import builtins
import contextlib
import functools
import gc
import importlib
import inspect
import io
import math
import os
import signal
import sys
import threading
import time
import types
import warnings
from operator import is_

import torch
import torch.autograd.graph
import torch.nn.functional
import torch.utils._python_dispatch as _dispatch
from torch.overrides import TorchFunctionMode

from ..i18n import message
from . import audit, kernels, leftovers, observe, rules

TIME_LIMIT = 10.0  # seconds for one call of the learner's function
OUTPUT_LIMIT = 2000  # characters the learner's function may print during one check

_Tensor, _numel = torch.Tensor, torch.Tensor.numel  # (taken at import, as below)

# Taken at import, so that a learner's code that replaces them cannot change how it is restored.
_MODULES = (torch, torch.nn, torch.nn.functional, torch.linalg, torch.special, torch.autograd, math, builtins)
_CLASSES = (("torch.Tensor", torch.Tensor), ("torch.nn.Module", torch.nn.Module))
_generator = torch.default_generator
_function_stack_length, _pop_function, _push_function = (
    torch._C._len_torch_function_stack,
    torch._C._pop_torch_function_stack,
    torch._C._push_on_torch_function_stack,
)
_function_stack_at = torch._C._get_function_stack_at
_is_warn_always, _set_warn_always = torch.is_warn_always_enabled, torch.set_warn_always
# The Python frames through which the autograd engine calls back into Python (a layer over torch's internals,
# pinned to the torch it was tested with: tests/test_run_time_rules.py fails when it is gone).
_ENGINE_CODES = frozenset(f.__code__ for f in (getattr(torch.autograd.graph, "_engine_run_backward", None),)
                          if f is not None)
_T_WARNING = r"The use of `x\.T` on tensors of dimension other than 2"
_IGNORED = {"__warningregistry__", "_"}  # names Python itself writes into modules


class TimeLimit(BaseException):
    """Raised into a learner's function that runs past its time limit. It derives from
    BaseException, so an ``except Exception:`` in the learner's code does not swallow it.
    (No ``__init__`` of its own: ``CallTimer`` raises the class, which Python instantiates in C.)"""


@functools.cache
def resolve(name):
    """The object a forbidden name stands for: "torch.transpose", "Tensor.mT" (torch.Tensor),
    "F.softmax" (torch.nn.functional), "course_utils.attention.scaled_dot_product_attention"."""
    head, _, rest = name.partition(".")
    parts = ({"Tensor": "torch.Tensor", "F": "torch.nn.functional"}.get(head, head) + "." + rest).strip(".").split(".")
    for split in range(len(parts), 0, -1):  # the longest prefix that is a module
        try:
            found = importlib.import_module(".".join(parts[:split]))
            break
        except ImportError:
            continue
    else:
        raise ValueError(f"forbidden name {name!r}: there is no module {parts[0]!r}")
    for part in parts[split:]:
        if not hasattr(found, part):
            raise ValueError(f"forbidden name {name!r}: {found!r} has no attribute {part!r}")
        found = getattr(found, part)
    # A decorated function (``@torch.no_grad()``, ``functools.wraps``) is its wrapper, whose code every function
    # decorated alike shares: the function itself is the one recognised by its code.
    return inspect.unwrap(found) if isinstance(found, types.FunctionType) else found


def watch_targets(forbidden):
    """What `_Watch` looks for: (torch objects, Python code objects), each with the name as written."""
    torch_targets, codes = [], {}
    for name in forbidden:
        target = resolve(name)
        if isinstance(target, property):
            target = target.fget
        if isinstance(target, types.FunctionType):
            codes[id(target.__code__)] = (target.__code__, name)  # the code object is kept alive with its id
        elif isinstance(target, types.GetSetDescriptorType):
            torch_targets.append((target.__get__, name))  # x.mT reaches the hook as Tensor.mT.__get__
        else:
            torch_targets.append((target, name))
    return torch_targets, codes


class _Watch(TorchFunctionMode):
    """Records the forbidden calls a learner's code makes: torch functions and Tensor methods and
    properties through torch's own hook (a TorchFunctionMode); Python functions, such as the
    package's reference, by their code object (sys.settrace, whose global hook sees only calls
    of Python functions, so it costs little), however they were imported. With `measure`, also
    the most elements of any tensor a torch function or method returned (``largest``): what an
    exercise that limits how much its function holds at once (one tile of scores) compares."""

    def __init__(self, targets, found, measure=False):
        super().__init__()
        (self.torch_targets, self.codes), self.found = targets or ((), {}), found
        self.measure, self.largest = measure, 0

    def __torch_function__(self, func, kinds=(), args=(), kwargs=None):
        for target, name in self.torch_targets:
            if func is target or func == target:
                self.found.append(name)
        result = func(*args, **(kwargs or {}))
        if self.measure:
            for item in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(item, _Tensor) and _numel(item) > self.largest:
                    self.largest = _numel(item)
        return result

    def trace(self, frame, event, arg):
        if id(frame.f_code) in self.codes:
            self.found.append(self.codes[id(frame.f_code)][1])
        # None: no line-by-line tracing inside the frame


class _Output(io.TextIOBase):
    """sys.stdout or sys.stderr during a call: passes on the first characters of the check's
    budget, then writes one line saying the rest was cut (and counts everything written)."""

    def __init__(self, budget, target):
        self.budget, self.target = budget, target

    @property
    def encoding(self):
        return getattr(self.target, "encoding", "utf-8")

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        self.budget[2] += len(text)
        kept = text[: max(self.budget[0], 0)]
        if kept:
            self.target.write(kept)
            self.budget[0] -= len(kept)
        if len(kept) < len(text) and self.budget[1]:
            self.budget[1] = False
            self.target.write("\n" + message("check.output_cut") + "\n")
        return len(text)

    def flush(self):
        self.target.flush()


class _StillLate:
    """``with _STILL_LATE: raise TimeLimit`` marks SIGALRM as pending again on its way in, with no
    Python code run in between, so the raise reaches the learner's code first (see CallTimer). Both
    methods are C functions: Python checks for pending signals between bytecodes of Python code
    (at a loop's jump back, a function's entry, after a call), and a Python method here would let
    the pending signal re-enter the handler before it raised. ``__exit__`` returns "" (false): the
    error goes on."""

    __enter__ = staticmethod(functools.partial(_thread.interrupt_main, getattr(signal, "SIGALRM", None)))
    __exit__ = staticmethod("".format)  # (Windows has no SIGALRM: there CallTimer never arms, and this never runs)


_STILL_LATE = _StillLate()


class CallTimer:
    """The time limit of one call: SIGALRM after `seconds` (where the platform has it and we run in
    the main thread, as a notebook does; elsewhere calls run without a limit).

    Once the time is up, the handler raises TimeLimit and leaves SIGALRM pending, so that Python
    runs the handler again at its next check for signals, which it makes at every loop's jump
    back, every function's entry and after every call: from then on TimeLimit is raised at each
    of them until the call is over. An ``except BaseException:`` (or a bare ``except:``) can catch
    one of them, but not go on: the loop that would bring it back to its ``try`` raises at its
    jump back, outside the ``try``. A handler that calls anything raises after that call, however
    deeply the handlers nest and whatever they call (``sys.settrace(None)`` included). A torch
    operation in C is never interrupted: the call ends when it returns. The signal also comes back
    every 50 ms, to wake a ``time.sleep``.

    (Raising from a trace function instead, sys.settrace, does not hold: Python removes a trace
    function that raises, for the frame and for new calls, so nested handlers run on untraced.)
    Until the time is up, nothing of this runs: a right answer pays one setitimer call."""

    def __init__(self, seconds):
        self.seconds, self.armed, self.fired, self.installed = seconds, False, False, False
        self.previous_handler, self.previous_timer, self.started = None, (0.0, 0.0), 0.0

    def _fire(self, signum, frame):
        if self.armed:
            self.fired = True
            with _STILL_LATE:
                raise TimeLimit
        # disarmed: a pending signal is consumed here and not raised again

    def arm(self):
        usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if not usable or not self.seconds:
            return
        # Armed last: a SIGALRM still pending from an earlier timer runs _fire as soon as it is
        # installed, and must find it disarmed (it is consumed), never half set up.
        self.previous_handler = signal.signal(signal.SIGALRM, self._fire)
        self.installed = True
        self.started = time.monotonic()
        self.previous_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds, 0.05)
        self.armed = True

    def disarm(self):
        self.armed = False
        if not self.installed:
            return
        self.installed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous_handler if self.previous_handler is not None else signal.SIG_DFL)
        delay, interval = self.previous_timer  # someone else's timer (pytest-timeout, say) goes on
        if delay:
            signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - self.started), 1e-3), interval)


# ----------------------------------------------------------------------------- global settings

def _set_function_modes(modes):
    while _function_stack_length():
        _pop_function()
    for mode in modes:
        _push_function(mode)


def _set_dispatch_modes(modes):
    while _dispatch._get_current_dispatch_mode_stack():
        _dispatch._pop_mode()
    for mode in modes:
        _dispatch._push_mode(mode)


_held = []  # inference-mode guards entered to undo a learner's, kept so that they stay entered


def _set_inference_mode(enabled):
    guard = torch._C._InferenceMode(enabled)
    guard.__enter__()
    _held.append(guard)


def _default_device():
    device_module = sys.modules.get("torch.utils._device")
    context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    return context, getattr(device_module, "CURRENT_DEVICE", None)


def _set_default_device(saved):
    torch._GLOBAL_DEVICE_CONTEXT.device_context = saved[0]
    if "torch.utils._device" in sys.modules:
        sys.modules["torch.utils._device"].CURRENT_DEVICE = saved[1]


def _print_options():
    return tuple(sorted(vars(torch._tensor_str.PRINT_OPTS).items()))


def _set_print_options(saved):
    for name, value in saved:
        setattr(torch._tensor_str.PRINT_OPTS, name, value)


def _set_tracer(saved):
    sys.settrace(saved[0])
    sys.setprofile(saved[1])


# (name for the verdict, getter, setter); restored in this order (the device before the mode stack).
TORCH_SETTINGS = (
    ("default_dtype", torch.get_default_dtype, torch.set_default_dtype),
    ("inference_mode", torch.is_inference_mode_enabled, _set_inference_mode),  # sets grad mode too, so first
    ("grad_mode", torch.is_grad_enabled, torch._C._set_grad_enabled),
    (
        "deterministic",
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        lambda saved: torch.use_deterministic_algorithms(saved[0], warn_only=saved[1]),
    ),
    (
        "anomaly",
        lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        lambda saved: torch.set_anomaly_enabled(*saved),
    ),
    ("default_device", _default_device, _set_default_device),
    ("function_modes", lambda: tuple(_get_function_modes()), _set_function_modes),
    ("dispatch_modes", lambda: tuple(_dispatch._get_current_dispatch_mode_stack()), _set_dispatch_modes),
    ("threads", torch.get_num_threads, torch.set_num_threads),
    ("print_options", _print_options, _set_print_options),
    ("warn_always", torch.is_warn_always_enabled, torch.set_warn_always),
    ("stdout", lambda: sys.stdout, lambda saved: setattr(sys, "stdout", saved)),
    ("stderr", lambda: sys.stderr, lambda saved: setattr(sys, "stderr", saved)),
    ("tracer", lambda: (sys.gettrace(), sys.getprofile()), _set_tracer),
)


def _get_function_modes():
    return [torch._C._get_function_stack_at(i) for i in range(_function_stack_length())]


def _same(a, b):
    """Equal settings: identical objects, or equal plain values (never a learner's __eq__)."""
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or (type(a) is type(b) and type(a) in (bool, int, float, str, torch.dtype) and a == b)


# ----------------------------------------------------------------------------- the snapshot

def _watched():
    """(name, namespace, kind) for every namespace whose entries are restored."""
    found = [(module.__name__, module, "module") for module in _MODULES]
    found += [(name, cls, "class") for name, cls in _CLASSES]
    if _ours[0] != len(sys.modules):  # the package's modules, listed again when modules were loaded
        names = [n for n in list(sys.modules) if n == "course_utils" or n.startswith("course_utils.")]
        _ours[:] = [len(sys.modules), names]
    found += [(name, sys.modules[name], "module") for name in _ours[1] if sys.modules.get(name) is not None]
    return found


_ours = [None, []]
# (the _ours it was listed for, [(function, namespace name, key)], [their (code, defaults, kwdefaults)], and
# audit.attribute_writes() when those were read)
_functions = [None, [], [], None]


def snapshot():
    """What `restore` puts back."""
    namespaces = [(name, owner, kind, dict(_entries(owner, kind))) for name, owner, kind in _watched()]
    modules = {name: sys.modules.get(name) for name, _, kind, _ in namespaces if kind == "module"}
    # the Python functions there: a learner's code can swap a function's body without rebinding it. Reading
    # a function's __code__ raises an audit event, so with hundreds of functions and a snapshot around every
    # call of a check, their parts are read again only when one was set (audit.attribute_writes) or listed again.
    if _functions[0] != _ours[0]:  # listed again when modules were loaded
        _functions[:] = [_ours[0], [(f, name, key) for name, _, _, entries in namespaces
                                    for key, f in entries.items() if type(f) is types.FunctionType], [], None]
    writes = audit.attribute_writes()
    if _functions[3] != writes:
        _functions[2:] = [[(f.__code__, f.__defaults__, f.__kwdefaults__) for f, _, _ in _functions[1]], writes]
    functions = _functions[1], _functions[2], writes
    settings = [(name, getter()) for name, getter, _ in TORCH_SETTINGS]
    return namespaces, modules, functions, settings


def restore(saved):
    """Put back `saved` (from `snapshot`); return what had changed, as (kind, name) pairs."""
    namespaces, modules, functions, settings = saved
    changed = []
    for name, module in modules.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
            changed.append(("replaced", f"sys.modules[{name!r}]"))
    for owner_name, owner, kind, before in namespaces:
        now = _entries(owner, kind)
        if len(now) == len(before) and all(map(is_, now, before)) and all(map(is_, now.values(), before.values())):
            continue  # nothing changed here: the common case, checked fast, by identity (never by __eq__)
        for key in sorted(set(before) | set(now), key=str):
            old, new = before.get(key, _ABSENT), now.get(key, _ABSENT)
            if old is new or key in _IGNORED:
                continue
            if old is _ABSENT and isinstance(new, types.ModuleType) and new.__name__ == f"{owner_name}.{key}":
                continue  # a submodule imported on first use
            change = "added" if old is _ABSENT else "deleted" if new is _ABSENT else "replaced"
            changed.append((change, f"{owner_name}.{key}"))
            _try(_put, owner, kind, key, old)
    listed, parts, writes = functions
    if audit.attribute_writes() != writes:  # a function's part was set since the snapshot: find which
        for (f, owner_name, key), (code, defaults, kwdefaults) in zip(listed, parts):
            if f.__code__ is not code or f.__defaults__ is not defaults or f.__kwdefaults__ is not kwdefaults:
                changed.append(("replaced", f"{owner_name}.{key}.__code__"))
                _try(setattr, f, "__code__", code)
                _try(setattr, f, "__defaults__", defaults)
                _try(setattr, f, "__kwdefaults__", kwdefaults)
    for (name, value), (_, getter, setter) in zip(settings, TORCH_SETTINGS):
        if not _same(_try(getter), value):
            changed.append(("setting", name))
            _try(setter, value)
    if ("setting", "default_dtype") in changed:  # torch.set_default_dtype swaps torch.Storage itself
        changed = [c for c in changed if c != ("replaced", "torch.Storage")]
    return changed


_ABSENT = object()


def _try(function, *args):
    """Restoring goes on past one step that fails (say, a class attribute that cannot be set)."""
    try:
        return function(*args)
    except Exception:  # noqa: BLE001
        return _ABSENT


def _entries(owner, kind):
    return vars(owner)


def _put(owner, kind, key, value):
    """Set (or, for _ABSENT, delete) one entry, bypassing any __setattr__ a learner defined."""
    if kind != "class":
        namespace = _entries(owner, kind)
        if value is _ABSENT:
            namespace.pop(key, None)
        else:
            namespace[key] = value
    elif value is _ABSENT:
        type.__delattr__(owner, key)
    else:
        type.__setattr__(owner, key, value)


# ----------------------------------------------------------------------------- the sandbox

def solver_functions(exercise, forbidden=()):
    """[(full name, Python function)]: the functions that compute `exercise`'s answer (rules.SOLVERS and the
    Python functions among its forbidden names), recognised by code while the learner's function runs."""
    found = []
    for name in tuple(forbidden) + tuple(rules.solvers(exercise)):
        try:
            target = resolve(name)
        except (ValueError, ImportError):  # a name this installation lacks (the Triton kernels without Triton)
            continue
        target = getattr(target, "fget", target)
        if isinstance(target, types.FunctionType) and all(target is not f for _, f in found):
            found.append((_full_name(name), target))
    return found


def _tracer(watcher, solvers, refused, engine=False, own_code=False):
    """The global trace function of a call, or None: it sees every call of a Python function (nothing
    line by line), and records the forbidden functions by name (the watcher's codes) and the functions that
    solve the exercise by code or content (observe.Solvers). The audit hook keeps the learner's code from
    removing it (sys.settrace is refused during the call).

    engine (the gradient pass): torch calls ``torch.autograd.grad`` inside the watcher's own handler, with the
    watcher off its stack, so the Python that the autograd engine calls back (a custom backward, a hook) would
    run unwatched by name; the watcher is pushed again for each such call, from its first line to its return.

    own_code (rules.OWN_CODE): a course function entered from outside the course is SOLVER too, named by its
    module (rules.course_module), whatever name reached it."""
    codes = watcher.codes if watcher else None
    engine = engine and watcher is not None
    if not codes and not solvers and not engine and not own_code:
        return None
    if not solvers and not engine and not own_code:
        return watcher.trace
    name = solvers.name if solvers else (lambda code: None)

    def trace(frame, event, arg):
        if codes and id(frame.f_code) in codes:
            watcher.found.append(codes[id(frame.f_code)][1])
        found = name(frame.f_code)
        if found is None and own_code:
            found = _course_entry(frame)
        if found is not None and ["SOLVER", found] not in refused:
            refused.append(["SOLVER", found])
        if engine and frame.f_back is not None and frame.f_back.f_code in _ENGINE_CODES:
            _push_function(watcher)

            def called_back(frame, event, arg):  # until that call returns (or raises)
                if event == "return" and _function_stack_length() and \
                        _function_stack_at(_function_stack_length() - 1) is watcher:
                    _pop_function()
                return called_back

            return called_back
        # None: no line-by-line tracing inside the frame

    return trace


def _course_entry(frame):
    """The course module whose function `frame` runs, when it was entered from outside the course and the check (the
    learner's code, torch calling a module's forward); else None (the check's own output cap calls i18n)."""
    module = frame.f_globals.get("__name__")
    if not rules.course_module(module):
        return None
    back = frame.f_back
    caller = back.f_globals.get("__name__") if back is not None else None
    inside = type(caller) is str and (caller == rules.COURSE_PACKAGE or caller.startswith(rules.COURSE_PACKAGE + "."))
    return None if inside else module


def _full_name(name):
    head, _, rest = name.partition(".")
    return {"Tensor": "torch.Tensor", "F": "torch.nn.functional"}.get(head, head) + ("." + rest if rest else "")


class Sandbox:
    """The calls of one check: their output budget, what they changed, what they called, what they were refused."""

    def __init__(self, forbidden=(), seconds=None, output_limit=OUTPUT_LIMIT, measure=False, exercise=None):
        self.exercise = exercise
        self.refused = []  # [code, detail] of what the run-time rules refused (rules.REFUSAL_CODES), in order
        self._operations = frozenset(rules.forbidden_operations(exercise))
        self._solvers = observe.Solvers(solver_functions(exercise, forbidden)) if exercise else None
        self.kernel = rules.is_kernel(exercise)
        self.traced = None  # lesson 09: the last watched call's trace (kernels._Trace.events), None if it raised
        self._probed = None  # the trace of the call on other values (probe) the next watched call is compared with
        self.compiler_text = None  # the GPU compiler front end's refusal of a launched kernel (COMPILER_REFUSED)
        self.seconds = TIME_LIMIT if seconds is None else seconds
        # characters left; whether the "cut" line is still to come; characters written in all
        self.budget = [output_limit, True, 0]
        self.changed = []  # (kind, name) of what the learner's code changed (restored), in order
        self.forbidden_calls = []  # names of the forbidden functions it called
        self.used_T = False  # whether it used x.T on a tensor with more than 2 axes
        self.timed_out = False
        self._targets = watch_targets(forbidden) if forbidden else None
        # the gradient pass (watch=False) watches the same names but those the check's own gradients call
        gradient_names = tuple(name for name in forbidden if name not in rules.GRADIENT_PASS_NAMES)
        self._gradient_targets = watch_targets(gradient_names) if gradient_names else None
        self.measure = measure  # whether to record the largest tensor each call makes
        self.largest = 0  # the most elements of a tensor made by the last call (with measure)
        self._warnings = set()
        # Every call's arguments and result, kept as long as the sandbox (its outcomes) is: what the learner's
        # code hung on them (an object whose __del__ runs when they are freed) runs after the verdict, never
        # between two calls, where nothing watches it and it could still change a result.
        self._kept = []

    @property
    def printed(self):
        """How many characters the calls wrote to stdout and stderr (the output cap kept fewer)."""
        return self.budget[2]

    def call(self, function, *args, watch=True):
        """function(*args), in the sandbox: returns what it returns, raises what it raises
        (TimeLimit when it runs too long), and leaves the world as it found it.

        watch=False (the check's own gradient pass, which calls back the learner's backward and hooks): no
        kernel ledger and no measure, but the same watch of forbidden names (but rules.GRADIENT_PASS_NAMES, which
        the pass itself calls) and the same run-time rules (operations, solvers, audit guard)."""
        streams, warn_always, outer_trace = (sys.stdout, sys.stderr), _is_warn_always(), sys.gettrace()
        self._kept.append(args)
        self._left_running()
        targets, measure = (self._targets, self.measure) if watch else (self._gradient_targets, False)
        watcher = _Watch(targets, self.forbidden_calls, measure) if targets or measure else None
        ledger = kernels.Ledger(self.refused, args, self.exercise) if watch and self.kernel else None
        probed = None
        if ledger:
            probed, self._probed, self.traced = self._probed, None, None
        observer = observe.Observer(self.refused, self._operations, ledger) \
            if self._operations or ledger else None
        tracer = _tracer(watcher, self._solvers, self.refused, engine=not watch,
                         own_code=rules.own_code(self.exercise))
        guard = audit.Guard(self.refused, _CALL_CODE)
        timer = CallTimer(self.seconds)
        with warnings.catch_warnings(record=True) as caught:
            warnings.filterwarnings("always", message=_T_WARNING)
            try:
                sys.stdout, sys.stderr = _Output(self.budget, streams[0]), _Output(self.budget, streams[1])
                _set_warn_always(True)  # torch warns about x.T once per process; the check wants every time
                if watcher and watch:  # (in the gradient pass, only around what the engine calls back: _tracer)
                    _push_function(watcher)
                if tracer:
                    sys.settrace(tracer)  # (a debugger's breakpoints pause meanwhile)
                if observer:
                    _dispatch._push_mode(observer)
                saved, rng = snapshot(), _generator.get_state()  # the sandbox's instruments included
                recording, returned = ledger.recording() if ledger else _NOTHING, False
                try:
                    recording.__enter__()
                    guard.__enter__()  # (left in the finally below, once the timer can no longer raise)
                    if observer:
                        observer.live = True
                    timer.arm()
                    result = function(*args)
                    returned = True
                finally:
                    timer.armed = False  # first, so that a late alarm raises nothing here
                    timer.disarm()
                    if timer.fired:  # what the time limit interrupted (torch's mode handlers are generators, a
                        gc.collect(1)  # mode pushed back when one is collected) finishes now, before restore
                    if observer:
                        observer.live = False
                    guard.__exit__(None, None, None)
                    recording.__exit__(None, None, None)
                    self.timed_out |= timer.fired
                    self._instruments_kept(watcher if watch else None, observer)
                    changed = restore(saved)
                    if not timer.fired:  # (after the time limit, the learner's own `with` and `finally` could not undo theirs)
                        self.changed += [c for c in changed if c not in self.changed]
                    _generator.set_state(rng)
                if ledger and returned:  # (the launches' kernels asked of the compiler's front end, unguarded)
                    ledger.finish(result)
                    self.compiler_text = self.compiler_text or ledger.compiler_text
                    self.traced = ledger.trace.events
                    difference = probed and ("raised" if probed == "raised" else kernels.differs(probed, self.traced))
                    if difference and ["DATA_IN_ARGUMENTS", difference] not in self.refused:
                        self.refused.append(["DATA_IN_ARGUMENTS", difference])
                if returned:
                    self._kept.append(result)
                return result
            finally:  # take the instruments away, whatever happened
                sys.stdout, sys.stderr = streams
                if observer and _dispatch._get_current_dispatch_mode_stack()[-1:] == [observer]:
                    _dispatch._pop_mode()
                if tracer:
                    sys.settrace(outer_trace)
                if watcher and watch:
                    _pop_function()
                    if measure:
                        self.largest = watcher.largest
                _set_warn_always(warn_always)
                self._read(caught)
                self._left_running()  # (the check's own instruments gone)

    def probe(self, function, args):
        """Lesson 09: call `function` on `args` with other values (each floating-point tensor a clone, so of the same
        shape, dtype, strides and device, filled with a fixed draw), so that the next watched call, on `args`
        themselves, is compared with it (kernels.differs): what a call does besides its kernels' loads must not depend
        on the input values, or it is DATA_IN_ARGUMENTS. Made before that call, so that the function cannot repeat
        there what it did on the values it saw last. TimeLimit is raised as from any call; another error is kept as
        "raised" (the same call on its own arguments returns)."""
        generator = _Generator().manual_seed(PROBE_SEED)
        others = tuple(_other_values(arg, generator) for arg in args)
        try:
            self.call(function, *others)
            found = self.traced
        except (TimeLimit, KeyboardInterrupt):
            raise
        except BaseException:  # noqa: BLE001 (judged when the call on the case's own values returns)
            found = "raised"
        self._probed = found

    def _left_running(self):
        """LEFT_RUNNING for what an earlier cell left beside the call (leftovers.py), looked at as it begins and ends."""
        for refusal in leftovers.found():
            if refusal not in self.refused:
                self.refused.append(refusal)

    def _instruments_kept(self, watcher, observer):
        """UNWATCHED when the learner's code took the check's modes off torch's stacks (restore puts them back)."""
        lost = []
        if watcher and not any(mode is watcher for mode in _get_function_modes()):
            lost.append("function_modes")
        if observer and not any(mode is observer for mode in _dispatch._get_current_dispatch_mode_stack()):
            lost.append("dispatch_modes")
        for name in lost:
            if ["UNWATCHED", name] not in self.refused:
                self.refused.append(["UNWATCHED", name])

    def _read(self, caught):
        for warning in caught:
            text = str(warning.message)
            if text.startswith("The use of `x.T`"):
                self.used_T = True
            elif _TRITON_FILES in str(warning.filename):
                continue  # Triton's own warnings (its interpreter's) say nothing about the learner's answer
            elif text not in self._warnings:  # other warnings are shown, once, within the output budget
                self._warnings.add(text)
                shown = warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
                _Output(self.budget, sys.stderr).write(shown)


PROBE_SEED = 9091  # the other values' draw (any fixed one: the function sees them before the case's own)
_Generator, _randn, _clone, _copy = torch.Generator, torch.randn, torch.Tensor.clone, torch.Tensor.copy_


def _other_values(arg, generator):
    """A clone of `arg` (same shape, dtype, strides, device) with other values, when it is a floating-point tensor;
    else `arg` itself (an integer or boolean tensor can be a shape's part: a length, a mask). The values are a fixed
    random draw, placed in the reverse order of `arg`'s: wherever `arg` has one entry below another, the clone has it
    above (a row's largest entry is its smallest there), so that what a call picks by the values' order (an argmax's
    position) differs too, not only what it reads of their size."""
    if type(arg) is not torch.Tensor or not arg.is_floating_point():
        return arg
    with torch.no_grad():
        flat = arg.detach().reshape(-1).float().cpu()
        drawn = _randn((flat.numel(),), generator=generator, dtype=torch.float32, device="cpu")
        drawn = drawn.sort(descending=True).values
        values = torch.empty_like(flat)
        values[flat.argsort(stable=True)] = drawn  # the smallest entry gets the largest value
        other = _clone(arg.detach())
        _copy(other, values.reshape(arg.shape))
    return other.requires_grad_(arg.requires_grad) if arg.requires_grad and other.is_leaf else other


_CALL_CODE = Sandbox.call.__code__  # where the audit hook's walk up from an event to the learner's frames stops
_NOTHING = contextlib.nullcontext()
_TRITON_FILES = f"{os.sep}triton{os.sep}"
