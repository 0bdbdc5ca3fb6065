"""What ran while a learner's function ran: the aten operations, and the functions that solve the exercise.

``Observer`` is a TorchDispatchMode: every torch operation reaches it as the aten operation the dispatcher
runs, below every Python name, alias, ``torch._C`` route and ``DisableTorchFunction`` block, and after
composite operations are taken apart (``F.scaled_dot_product_attention`` on the CPU arrives as
``aten._safe_softmax`` and two ``aten.bmm``). For each operation it records, as [code, detail] refusals:

- OPERATION: the operation is one the exercise forbids (rules.FORBIDDEN_OPERATIONS);

and hands each operation to a kernel ``Ledger`` (kernels.py) in lesson 09. It costs one Python call per
operation, so the sandbox pushes it only for an exercise that forbids operations or is a kernel exercise.

``Solvers`` recognises a function that solves the exercise (rules.SOLVERS and the exercise's forbidden Python
functions) from a frame's code, by the code object or by its content (a copy made with ``code.replace`` or
``types.FunctionType`` is the same code), whatever name called it: the sandbox's trace function asks it at
every call of a Python function (SOLVER).
"""

import sys
import types

from torch.utils._python_dispatch import TorchDispatchMode

_getframe = sys._getframe
_names = {}  # OpOverload -> (its overload packet's name, or None outside aten,)


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
    """The dispatch mode of one call: see the module docstring."""

    def __init__(self, found, forbidden=frozenset(), ledger=None):
        super().__init__()
        self.found, self.forbidden, self.ledger = found, forbidden, ledger
        self.count = 0  # operations seen

    def refuse(self, code, detail):
        if [code, detail] not in self.found:
            self.found.append([code, detail])

    live = False  # True while the learner's function runs (not while the sandbox takes its snapshot)

    def dispatch(self, func, types=(), args=(), kwargs=None):
        if not self.live:
            return func(*args, **(kwargs or {}))
        self.count += 1
        known = _names.get(func)
        if known is None:  # an operation's name, read once (it is a chain of attribute lookups)
            known = _names[func] = (func.overloadpacket.__name__ if func.namespace == "aten" else None,)
        name = known[0]
        if name in self.forbidden:
            self.refuse("OPERATION", f"aten.{name}")
        if self.ledger is None:
            return func(*args, **kwargs) if kwargs else func(*args)
        self.ledger.before_operation(name, args, kwargs or {})
        result = func(*args, **(kwargs or {}))
        self.ledger.see(name, args, kwargs or {}, result, _getframe(1))
        return result



# TorchDispatchMode wraps a subclass's __torch_dispatch__ at class creation in a guard against torch.compile,
# whose first call imports torch._dynamo (seconds, inside the learner's time limit). A check runs the learner's
# function eagerly, never compiled: the method is set again, unwrapped, after the class exists.
Observer.__torch_dispatch__ = Observer.dispatch
