"""Lesson 09's rule, the kernel is the answer: what a call's Triton launches did, against what torch did.

A ``Ledger`` hears every aten operation of one call of the learner's function (observe.Observer) and
reads the call's launches (course_utils.triton_launches.recording, where Triton was loaded through the
course; elsewhere no launch is seen, and the check fails closed). Its refusals, [code, detail]:

- NO_LAUNCH: no Triton kernel was launched;
- TORCH_IN_KERNEL: torch ran inside a launch from the kernel's own code (a kernel body that calls
  ``torch.addmm`` on globals; Triton's interpreter copying its arguments is its own, and allowed);
- TORCH_OUTSIDE_KERNEL: outside launches torch did more than allocate, view, copy and read metadata
  (rules.KERNEL_ALLOWED), e.g. ``aten.mm``;
- FOREIGN_DATA: a copy, or a launch, read data the call cannot account for (not an input, an allocation,
  a copy of either or a launch's output): a result computed elsewhere (NumPy) and copied in; or the memory of a
  tensor changed where neither torch nor a launch wrote it (detail "memory"): a NumPy or DLPack view of it
  (``y.numpy()[...] = ...``, ``np.from_dlpack(y)``) written, which no aten operation sees, then "written" by a
  kernel that stores back what it loads. Judged by content, whatever route wrote it: the bytes of every CPU
  storage the call touched are kept as torch and the launches left them, and compared before each operation
  (its arguments), before each launch and once the call returns (all of them);
- COMPILER_REFUSED: a launched kernel is one the GPU compiler's front end refuses (``break`` ...);
- INPUT_NOT_READ / OUTPUT_NOT_WRITTEN: an input tensor no launch read (through copies and views), a
  returned tensor no launch wrote (read once the values are right);
- BLOCK_IGNORED: where the exercise bounds a load's width (rules.LOAD_WIDTH), a launch loaded more elements of
  one row of that input (through copies and views) at once than the bound: the block argument was ignored;
- DATA_IN_ARGUMENTS: what the call did besides its kernels' loads depends on the input VALUES (``differs``): the
  check calls the function once more on inputs of the same shapes, dtypes and strides but other values
  (Sandbox.probe), and the two calls' ``trace`` must be the same in everything but the data: each launch's kernel,
  grid, scalar and constexpr arguments, the scalars its code reads from globals, closures and defaults, and for each
  pointer which tensor it belongs to (an input by position, or the k-th storage the call made), its offset, shape,
  strides and dtype; each torch operation outside launches with its arguments (a fill value). An answer computed on
  the host (NumPy, ``.item()``) and written one value at a time as a scalar argument, a grid, an offset or a fill
  value differs there; a real kernel's launches follow from the shapes alone.

Tensors are followed by their storages' addresses: a view shares its base's, a copy's address gets its
sources' as its origins.
"""

import numbers
import sys
import types

import torch

from ..i18n import message
from . import audit, rules

_storage, _data_ptr = torch.Tensor.untyped_storage, torch.UntypedStorage.data_ptr
_getframe = sys._getframe
_INSTRUMENTS = __name__.rpartition(".")[0] + "."  # the check's own modules (its name watcher sits between)


def _address(tensor):
    try:
        return _data_ptr(_storage(tensor))
    except Exception:  # noqa: BLE001 (a tensor without storage: a meta or nested tensor)
        return None


def _tensors(value, found, depth=0):
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)) and depth < 4:
        for item in value:
            _tensors(item, found, depth + 1)
    elif isinstance(value, dict) and depth < 4:
        for item in value.values():
            _tensors(item, found, depth + 1)
    return found


def _launches_module():
    """course_utils.triton_launches when Triton was loaded through the course (else no launch is recorded)."""
    return sys.modules.get("course_utils.triton_launches")


class Ledger:
    """The aten operations and launches of one call (see the module docstring)."""

    def __init__(self, found, args, exercise=None):
        self.found = found
        self.width = _width_rule(exercise, args)  # (the input's address, the most of a row one load may take)
        self.inputs = [t for t in _tensors(args, []) if _address(t) is not None]
        self.origins = {}  # address -> set of addresses it was copied or made from (itself for inputs)
        for tensor in self.inputs:
            self.origins[_address(tensor)] = {_address(tensor)}
        self.launches = []
        module = _launches_module()
        self._in_launch = module.in_launch if module is not None else (lambda: False)
        self.memory = _Memory()
        self.memory.keep(self.inputs)
        self.trace = _Trace(self.inputs)  # what the call did besides the data (DATA_IN_ARGUMENTS)

    def refuse(self, code, detail):
        if [code, detail] not in self.found:
            self.found.append([code, detail])

    def recording(self):
        """The context that lists this call's launches into ``self.launches``."""
        module = _launches_module()
        return _Recording(self, module.recording(self) if module is not None else None)

    def _written_elsewhere(self, tensors=None):
        if self.memory.changed(tensors):
            self.refuse("FOREIGN_DATA", "memory")

    def before_operation(self, name, args, kwargs):
        """Before an aten operation runs: its tensors' memory is as torch and the launches left it."""
        if self.memory.busy or self._in_launch():
            return
        self._written_elsewhere(_tensors((args, kwargs), []))

    def before(self, launch):
        """Before a launch starts (triton_launches.recording's listener): all the call's memory as it was left."""
        self._written_elsewhere()
        self.trace.launch(launch)

    def after(self, launch):
        """After a launch ended: what it wrote is the memory as it is now."""
        self.memory.keep(launch.tensors)

    def see(self, name, args, kwargs, result, frame):
        """One aten operation (`name`: its overload packet's name; None for another namespace's)."""
        if self.memory.busy:
            return  # the ledger's own reading of memory
        shown = f"aten.{name}" if name else "another"
        if not self._in_launch():
            self.memory.keep(_tensors((args, kwargs, result), []))
            self.trace.operation(shown, args, kwargs, result)
        if self._in_launch():
            if not _triton_side(frame):
                self.refuse("TORCH_IN_KERNEL", shown)
            return
        if name not in rules.KERNEL_ALLOWED:
            self.refuse("TORCH_OUTSIDE_KERNEL", shown)
            return
        if name in rules.KERNEL_FOREIGN:
            return  # its result is data from outside torch: never known
        sources = {a for a in map(_address, _tensors((args, kwargs), [])) if a is not None}
        if name in rules.KERNEL_COPIES:
            if any(a not in self.origins for a in sources):
                self.refuse("FOREIGN_DATA", shown)
        roots = set()
        for address in sources:
            roots |= self.origins.get(address, {address})
        for tensor in _tensors(result, []):
            address = _address(tensor)
            if address is not None:
                self.origins.setdefault(address, {address}).update(roots)

    def finish(self, result):
        """After the call returned `result`: the launches' refusals."""
        self._written_elsewhere()
        if not self.launches:
            self.refuse("NO_LAUNCH", "")
            return
        read, written = set(), set()
        for launch in self.launches:
            for index, tensor in enumerate(launch.tensors):
                address = _address(tensor)
                if address is None:
                    continue
                if address not in self.origins:
                    self.refuse("FOREIGN_DATA", "launch")
                reach = {address} | self.origins.get(address, set())
                if launch.read is None or index in launch.read:
                    read |= reach
                if launch.written is None or index in launch.written:
                    written.add(address)
                if self.width and launch.widest and self.width[0] in reach and \
                        launch.widest.get(index, 0) > self.width[1]:
                    self.refuse("BLOCK_IGNORED", "")
            refusal = _refusal(launch)
            if refusal:
                self.refuse("COMPILER_REFUSED", "")  # (a kernel's name is the learner's: it could spell a hidden input)
                self.compiler_text = refusal
        for tensor in self.inputs:
            if _address(tensor) not in read:
                self.refuse("INPUT_NOT_READ", "")
                break
        for tensor in _tensors(result, []):
            address = _address(tensor)
            if address is not None and address not in written and not (self.origins.get(address, set()) & written):
                self.refuse("OUTPUT_NOT_WRITTEN", "")
                break

    compiler_text = None  # the front end's refusal, in the learner's language (the notebook's verdict quotes it)


class _Memory:
    """The bytes of every CPU storage a call touched, as torch's operations and the launches left them (each kept
    alive with its copy, so that its address is never another's meanwhile). A GPU's memory is not read: nothing of a
    learner's reaches it but torch and the kernels."""

    def __init__(self):
        self.saved = {}  # storage address -> (the storage, its bytes)
        self.busy = False  # True while the ledger reads memory (its own operations are not the call's)

    def _view(self, storage):
        """The storage's bytes as a tensor (a view: no copy), on its device whatever torch's default device is."""
        return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)

    def _bytes(self, storage):
        return self._view(storage).clone()

    def _storages(self, tensors):
        found = {}
        for tensor in tensors:
            try:
                storage = _storage(tensor)
                if storage.device.type == "cpu":
                    found[_data_ptr(storage)] = storage
            except Exception:  # noqa: BLE001 (a tensor without storage: a meta or nested tensor)
                continue
        return found

    def keep(self, tensors):
        """Remember the bytes of `tensors`' storages as they are now."""
        self.busy = True
        try:
            for address, storage in self._storages(tensors).items():
                self.saved[address] = (storage, self._bytes(storage))
        finally:
            self.busy = False

    def changed(self, tensors=None):
        """Whether the memory of `tensors` (None: of every storage kept) differs from what was kept (then it is
        kept as it is now, so that one change is told once)."""
        self.busy = True
        try:
            if tensors is None:
                storages = {address: storage for address, (storage, _) in self.saved.items()}
            else:
                storages = {a: s for a, s in self._storages(tensors).items() if a in self.saved}
            found = False
            for address, storage in storages.items():
                if not torch.equal(self._view(storage), self.saved[address][1]):  # copied only when it changed
                    found = True
                    self.saved[address] = (storage, self._bytes(storage))
            return found
        finally:
            self.busy = False


_size, _stride, _storage_offset = torch.Tensor.size, torch.Tensor.stride, torch.Tensor.storage_offset
_dtype, _device = torch.Tensor.dtype, torch.Tensor.device  # (descriptors, taken at import like the methods above)
_MISSING = object()
_ITEMS = 100_000  # the most values of globals a launch's trace spells out (a larger table is told by its length)


class _Trace:
    """What one call did besides the data (DATA_IN_ARGUMENTS): its launches and its torch operations outside them, in
    order, as plain values. A tensor is (its storage's label, its offset in that storage, shape, strides, dtype, device
    type): ("input", position) for an input's storage, ("storage", k) for the k-th other storage the call showed. Each
    storage labelled is kept alive as long as the trace, so that no address is another storage's meanwhile (a label
    by address then means one storage)."""

    def __init__(self, inputs):
        self.events = []  # ("launch", code, grid, ((parameter, value), ...), ((global, value), ...)) or
        #                   ("operation", aten name, args, kwargs, the result's tensors)
        self._labels, self._alive, self._made = {}, [], 0
        for position, tensor in enumerate(inputs):
            self._labels.setdefault(_address(tensor), ("input", position))

    def launch(self, launch):
        kernel = launch.kernel
        args, kwargs = launch.arguments
        names = list(getattr(kernel, "arg_names", ()))
        given = [(names[i] if i < len(names) else str(i), value) for i, value in enumerate(args)]
        given += sorted(kwargs.items())
        function = getattr(kernel, "fn", None)
        self.events.append(("launch", getattr(function, "__code__", None), tuple(launch.grid),
                            tuple((name, self._plain(value)) for name, value in given), self._reads(function)))

    def operation(self, name, args, kwargs, result):
        self.events.append(("operation", name, self._plain(args), self._plain(kwargs),
                            tuple(self._tensor(t) for t in _tensors(result, []))))

    def _tensor(self, tensor):
        try:
            storage = _storage(tensor)
            address = _data_ptr(storage)
            shape = (tuple(_size(tensor)), tuple(_stride(tensor)), _storage_offset(tensor),
                     str(_dtype.__get__(tensor)), _device.__get__(tensor).type)
        except Exception:  # noqa: BLE001 (a tensor without storage: a meta or nested tensor)
            return ("tensor", type(tensor).__qualname__)
        label = self._labels.get(address)
        if label is None:
            label = self._labels[address] = ("storage", self._made)
            self._made += 1
            self._alive.append(storage)
        return (label,) + shape

    def _plain(self, value, depth=0, budget=None):
        """`value` as plain comparable data: numbers by their exact text (a NaN equals a NaN), tensors as above."""
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if value is None or type(value) in (bool, int, str):
            return (type(value).__name__, value)
        if isinstance(value, float):
            return ("float", float.__repr__(value))
        if isinstance(value, int):
            return ("int", int.__repr__(value))
        if isinstance(value, numbers.Number):  # a NumPy scalar, a complex
            return (type(value).__qualname__, repr(value))
        if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return ("torch", str(value))
        module = getattr(type(value), "__module__", "")
        if type(module) is str and module.partition(".")[0] == "triton":
            inner = value.__dict__.get("value", _MISSING) if hasattr(value, "__dict__") else _MISSING
            if type(value).__name__ == "constexpr" and inner is not _MISSING:
                return ("constexpr", self._plain(inner, depth + 1, budget))
            return ("triton", type(value).__qualname__, str(value))
        if isinstance(value, (tuple, list, dict)) and depth < 6:
            budget = budget if budget is not None else [_ITEMS]
            items = list(value.items()) if isinstance(value, dict) else list(value)
            if len(items) > budget[0]:
                return (type(value).__name__, len(items))
            budget[0] -= len(items)
            if isinstance(value, dict):
                return ("dict",) + tuple((str(k), self._plain(v, depth + 1, budget)) for k, v in items)
            return (type(value).__name__,) + tuple(self._plain(v, depth + 1, budget) for v in items)
        return ("object", type(value).__qualname__)

    def _reads(self, function):
        """The values a kernel's code (and the kernels it calls) reads besides its arguments: the globals it names
        (a module's attributes it names), its closure's cells and its defaults (callables and modules by kind only)."""
        found, seen, budget = [], set(), [_ITEMS]

        def value_of(value, level):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
                return None
            own = getattr(value, "__dict__", None)
            inner = own.get("fn") if type(own) is dict else None
            if isinstance(inner, types.FunctionType):  # a @triton.jit function: what it reads
                visit(inner, level + 1)
                return None
            shown = self._plain(value, 0, budget)
            return None if shown[0] == "object" and callable(value) else shown  # (a callable object by kind only)

        def visit(function, level):
            code = getattr(function, "__code__", None)
            if code is None or code in seen or level > 4:
                return
            seen.add(code)
            names = sorted(_names(code))
            scope = getattr(function, "__globals__", {})
            for name in names:
                value = scope.get(name, _MISSING) if isinstance(scope, dict) else _MISSING
                if value is _MISSING:
                    continue
                if isinstance(value, types.ModuleType):
                    attributes = getattr(value, "__dict__", {})
                    for attribute in names:
                        item = attributes.get(attribute, _MISSING)
                        if item is not _MISSING and not isinstance(item, types.ModuleType):
                            shown = value_of(item, level)
                            if shown is not None:
                                found.append((f"{name}.{attribute}", shown))
                    continue
                shown = value_of(value, level)
                if shown is not None:
                    found.append((name, shown))
            for name, cell in zip(code.co_freevars, getattr(function, "__closure__", None) or ()):
                try:
                    shown = value_of(cell.cell_contents, level)
                except ValueError:  # an empty cell
                    continue
                if shown is not None:
                    found.append((name, shown))
            defaults = (getattr(function, "__defaults__", None), getattr(function, "__kwdefaults__", None))
            found.append(("defaults", self._plain(defaults, 0, budget)))

        visit(function, 0)
        return tuple(found)


def _names(code, depth=0):
    """The names a code object (and the code nested in it: comprehensions, lambdas) looks up."""
    found = set(code.co_names)
    if depth < 4:
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                found |= _names(constant, depth + 1)
    return found


def differs(first, second):
    """Where two calls' traces (_Trace.events) differ, in the grader's words ("launch 3 argument v", "launch 2 grid",
    "launch 5 kernel", "launch 1 global G", "operation 4 aten.fill_"); None where they are the same."""
    counts = {"launch": 0, "operation": 0}
    for index in range(max(len(first), len(second))):
        one = first[index] if index < len(first) else None
        other = second[index] if index < len(second) else None
        kind = (one or other)[0]
        counts[kind] += 1
        if one == other:
            continue
        number = counts[kind]
        if one is None or other is None or one[0] != other[0]:
            return f"{kind} {number} missing"  # one call did it, the other not (or something else there)
        if kind == "operation":
            return f"operation {number} {one[1]}" if one[1] == other[1] else f"operation {number} missing"
        if one[1] != other[1]:
            return f"launch {number} kernel"
        if one[2] != other[2]:
            return f"launch {number} grid"
        for part, word in ((3, "argument"), (4, "global")):
            if one[part] != other[part]:
                for (name, value), (_, value_too) in zip(one[part], other[part]):
                    if value != value_too:
                        return f"launch {number} {word} {name}"
                return f"launch {number} {word}"
        return f"launch {number}"
    return None


#: What a DATA_IN_ARGUMENTS detail says in the grader's words (a kernel's parameter or global's name is the learner's,
#: and could spell a hidden input: it is left out there).
_WORDS = ("kernel", "grid", "argument", "global", "missing")


def grader_words(detail):
    """`detail` (from ``differs``) with only the grader's words kept: "launch N WORD" or "operation N aten.NAME"
    (an aten operation torch has); "" for anything else."""
    parts = detail.split(" ") if type(detail) is str else []
    if detail == "raised":
        return detail
    if len(parts) < 2 or not parts[1].isdigit() or len(parts[1]) > 7:
        return ""
    if parts[0] == "launch":
        return " ".join(parts[:2] + [w for w in parts[2:3] if w in _WORDS])
    if parts[0] == "operation" and len(parts) >= 3:
        name = parts[2][len("aten."):] if parts[2].startswith("aten.") else ""
        if parts[2] == "missing" or (name.isidentifier() and hasattr(torch.ops.aten, name)):
            return " ".join(parts[:3])
        return " ".join(parts[:2])
    return ""


def described(detail):
    """A DATA_IN_ARGUMENTS detail (``differs``, or its ``grader_words``) as words in the learner's language."""
    parts = detail.split(" ", 3) if type(detail) is str else []
    if detail == "raised":
        return message("check.data.raised")
    if len(parts) < 2 or not parts[1].isdigit():
        return message("check.data.unknown")
    kind, number, word, name = (parts + ["", ""])[:4]
    if kind == "operation":
        if word == "missing":
            return message("check.data.operation_missing", n=number)
        return message("check.data.operation", n=number, operation=word) if word else \
            message("check.data.operation_any", n=number)
    if word in ("argument", "global") and name:
        return message(f"check.data.launch_{word}", n=number, name=name)
    if word in _WORDS:
        return message(f"check.data.launch_{word}_any" if word in ("argument", "global") else f"check.data.launch_{word}",
                       n=number)
    return message("check.data.launch", n=number)


def _width_rule(exercise, args):
    """(address of the input whose rows are walked, the bound on one load's width), or None."""
    rule = rules.load_width(exercise)
    if rule is None or len(args) <= max(rule):
        return None
    source, bound = args[rule[0]], args[rule[1]]
    if not isinstance(source, torch.Tensor) or type(bound) is not int or _address(source) is None:
        return None
    return _address(source), bound


def _refusal(launch):
    try:
        return launch.refused()
    except Exception:  # noqa: BLE001 (the front end failing on its own is no verdict on the kernel)
        return None


def _triton_side(frame):
    """Whether the operation came from Triton's own code (past torch's frames), not from a kernel's body."""
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if not (type(module) is str and (module.partition(".")[0] == "torch" or module.startswith(_INSTRUMENTS))):
            return audit.is_triton(frame)
        frame = frame.f_back
    return False


class _Recording:
    def __init__(self, ledger, context):
        self.ledger, self.context = ledger, context

    def __enter__(self):
        if self.context is not None:
            self.ledger.launches = self.context.__enter__()
        return self

    def __exit__(self, *exc):
        if self.context is not None:
            return self.context.__exit__(*exc)
        return False
