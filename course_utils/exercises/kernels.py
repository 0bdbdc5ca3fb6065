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
  one row of that input (through copies and views) at once than the bound: the block argument was ignored.

Tensors are followed by their storages' addresses: a view shares its base's, a copy's address gets its
sources' as its origins.
"""

import sys

import torch

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

    def _bytes(self, storage):
        return torch.empty(0, dtype=torch.uint8).set_(storage).clone()

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
                now = self._bytes(storage)
                if not torch.equal(now, self.saved[address][1]):
                    found = True
                    self.saved[address] = (storage, now)
            return found
        finally:
            self.busy = False


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
