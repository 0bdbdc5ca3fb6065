"""What ran while a learner's function ran: the aten operations, and the functions on the stack when they did.

``Observer`` is a TorchDispatchMode: every torch operation reaches it as the aten operation the dispatcher
runs, below every Python name, alias, ``torch._C`` route and ``DisableTorchFunction`` block, and after
composite operations are taken apart (``F.scaled_dot_product_attention`` on the CPU arrives as
``aten._safe_softmax`` and two ``aten.bmm``). For each operation it records, as [code, detail] refusals:

- OPERATION: the operation is one the exercise forbids (rules.FORBIDDEN_OPERATIONS);
- SOLVER: a function that solves the exercise (rules.SOLVERS and its forbidden Python functions) is on the
  stack, recognised by its code object or by its code's content (``Solvers``), whatever name called it;

and hands each operation to a kernel ``Ledger`` (kernels.py) in lesson 09. It costs one Python call per
operation, and a walk up the learner's frames where the exercise has solvers.
"""

import sys
import types

from torch.utils._python_dispatch import TorchDispatchMode

_getframe = sys._getframe


def fingerprint(code):
    """What two copies of a function's code share, whatever their names, file and lines: the bytecode,
    the names it reads, its constants (nested code by its own fingerprint) and its arguments' count."""
    consts = tuple(fingerprint(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c)[:200])
                   for c in code.co_consts)
    return (code.co_code, code.co_names, consts, code.co_argcount, code.co_kwonlyargcount)


class Solvers:
    """The functions that solve an exercise, recognised from a frame's code: by identity, else by content."""

    def __init__(self, named):
        """named: [(full name, Python function)]."""
        self.codes = {}  # id(code) -> (code, name): the functions' own code objects
        self.prints = {}  # fingerprint -> name
        for name, function in named:
            code = function.__code__
            self.codes[id(code)] = (code, name)
            self.prints.setdefault(fingerprint(code), name)
        self.seen = {}  # id(code) -> (code, name or None): every code met, decided once (kept alive with its id)

    def __bool__(self):
        return bool(self.codes)

    def name(self, code):
        """The name of the solver `code` runs, or None."""
        known = self.codes.get(id(code))
        if known is not None:
            return known[1]
        seen = self.seen.get(id(code))
        if seen is None or seen[0] is not code:
            seen = self.seen[id(code)] = (code, self.prints.get(fingerprint(code)))
        return seen[1]


class Observer(TorchDispatchMode):
    """The dispatch mode of one call: see the module docstring. `stop` is the code object of the frame
    that called the learner's function: the walk up the stack ends there."""

    def __init__(self, found, forbidden=frozenset(), solvers=None, ledger=None, stop=None):
        super().__init__()
        self.found, self.forbidden, self.solvers, self.ledger, self.stop = found, forbidden, solvers, ledger, stop
        self.count = 0  # operations seen

    def refuse(self, code, detail):
        if [code, detail] not in self.found:
            self.found.append([code, detail])

    live = False  # True while the learner's function runs (not while the sandbox takes its snapshot)

    def dispatch(self, func, types=(), args=(), kwargs=None):
        if not self.live:
            return func(*args, **(kwargs or {}))
        self.count += 1
        name = func.overloadpacket.__name__
        aten = func.namespace == "aten"
        if aten and name in self.forbidden:
            self.refuse("OPERATION", f"aten.{name}")
        if self.solvers:
            self._walk()
        result = func(*args, **(kwargs or {}))
        if self.ledger is not None:
            self.ledger.see(name if aten else None, args, kwargs or {}, result, _getframe(1))
        return result

    def _walk(self):
        frame, stop, solvers = _getframe(2), self.stop, self.solvers
        while frame is not None and frame.f_code is not stop:
            found = solvers.name(frame.f_code)
            if found is not None:
                self.refuse("SOLVER", found)
            frame = frame.f_back


# TorchDispatchMode wraps a subclass's __torch_dispatch__ at class creation in a guard against torch.compile,
# whose first call imports torch._dynamo (seconds, inside the learner's time limit). A check runs the learner's
# function eagerly, never compiled: the method is set again, unwrapped, after the class exists.
Observer.__torch_dispatch__ = Observer.dispatch
