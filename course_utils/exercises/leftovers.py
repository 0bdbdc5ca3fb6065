"""What an earlier cell left running beside a check: threads, torch modes, dispatch keys switched off.

A check watches the learner's function while it runs (sandbox.py): the audit guard in the check's thread and
in threads started during the call, the trace function in the check's thread, the dispatch mode and the
function mode on top of torch's stacks. Code that ran *before* the check can stand outside all of them: a
thread an earlier cell started (the guard watches only threads born during the call, the tracer only the
check's thread, torch's mode stacks are per thread), a mode of the learner's pushed under the check's (it runs
the operations the check's mode hands on, unseen), a ``DisableTorchFunction`` entered and never left, the
Python dispatch keys excluded (no mode sees anything). ``found()`` looks at the process as the call begins and
ends and names what is there, as [code, detail] refusals (rules.LEFT_RUNNING and its details): nothing an
answer needs, so the check fails whatever route made it.

Which threads are the notebook's own: those alive when this module was first imported or when the grader's
kernel called ``baseline()`` before any cell ran (the kernel's), and the threads of rules.BENIGN_THREADS
(a progress bar's monitor), and the modes of rules.BENIGN_MODES (the default device's). Elsewhere (a notebook,
the tests) a thread that runs code defined in the notebook counts, and a mode whose hooks the notebook defined;
in the grader's kernel (``baseline(strict=True)``) every other thread and every other mode counts.
"""

import sys
import threading

import torch
import torch.utils._python_dispatch as _dispatch

from . import rules

_current_frames, _get_ident = sys._current_frames, threading.get_ident
_active_threads = threading._active  # ident -> Thread (read only: which class started it)
_KEYS = tuple(getattr(torch._C.DispatchKey, name) for name in rules.WATCH_KEYS)
_excluded = torch._C._dispatch_tls_local_exclude_set
_function_stack_length, _function_stack_at = torch._C._len_torch_function_stack, torch._C._get_function_stack_at
_torch_function_enabled = torch._C._is_torch_function_enabled
_state = {"threads": frozenset(_current_frames()), "strict": False}


def baseline(strict=False):
    """The threads alive now are the notebook's own; `strict` (the grader's kernel, before any cell): every
    thread started later counts, whatever it runs."""
    _state["threads"], _state["strict"] = frozenset(_current_frames()), bool(strict)


def found():
    """[code, detail] for what is left running beside the calling thread (an empty list: nothing)."""
    refused = []
    if _foreign_threads():
        refused.append([rules.LEFT_RUNNING, "thread"])
    if any(not _benign(_function_stack_at(i)) for i in range(_function_stack_length())):
        refused.append([rules.LEFT_RUNNING, "function_mode"])
    if any(not _benign(mode) for mode in _dispatch._get_current_dispatch_mode_stack()):
        refused.append([rules.LEFT_RUNNING, "dispatch_mode"])
    if not _torch_function_enabled():
        refused.append([rules.LEFT_RUNNING, "torch_function"])
    excluded = _excluded()
    if any(excluded.has(key) for key in _KEYS):
        refused.append([rules.LEFT_RUNNING, "dispatch_keys"])
    return refused


def _benign(mode):
    """A mode of rules.BENIGN_MODES; outside the grader's kernel, also one whose hooks are a library's (a test's
    recorder, a profiler), not code defined in the notebook."""
    kind = type(mode)
    if f"{kind.__module__}.{kind.__qualname__}" in rules.BENIGN_MODES:
        return True
    if _state["strict"]:
        return False
    hooks = [vars(k).get(name) for k in kind.__mro__ for name in ("__torch_dispatch__", "__torch_function__")]
    hooks = [_unwrapped(getattr(h, "__func__", h)) for h in hooks if h is not None]  # (torch wraps a mode's hook)
    notebook, modules = _notebook_globals(), _module_globals()
    return not any(id(getattr(h, "__globals__", None)) in notebook or id(getattr(h, "__globals__", None)) not in modules
                   for h in hooks if hasattr(h, "__globals__"))


def _foreign_threads():
    me, known = _get_ident(), _state["threads"]
    frames = _current_frames()
    notebook = _notebook_globals()
    for ident, frame in frames.items():
        if ident == me or ident in known:
            continue
        thread = _active_threads.get(ident)
        kind = type(thread)
        if thread is not None and f"{kind.__module__}.{kind.__qualname__}" in rules.BENIGN_THREADS:
            continue
        if _state["strict"] or _runs_notebook_code(frame, notebook):
            return True
    return False


def _notebook_globals():
    """The ids of the namespaces code defined in the notebook runs with: ``__main__``'s (IPython's user
    namespace), and any namespace that is no loaded module's (code made from text)."""
    main = sys.modules.get("__main__")
    return {id(vars(main))} if main is not None else set()


def _unwrapped(function):
    for _ in range(8):  # functools.wraps' chain, bounded
        inner = getattr(function, "__wrapped__", None) if hasattr(function, "__globals__") else None
        if inner is None:
            break
        function = inner
    return function


def _module_globals():
    """The ids of the namespaces of the loaded modules."""
    return {id(vars(m)) for m in list(sys.modules.values()) if m is not None and hasattr(m, "__dict__")}


def _runs_notebook_code(frame, notebook):
    modules = None
    while frame is not None:
        globals_ = frame.f_globals
        if id(globals_) in notebook:
            return True
        if modules is None:
            modules = _module_globals()
        if id(globals_) not in modules:
            return True
        frame = frame.f_back
    return False
