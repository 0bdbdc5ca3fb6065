"""Bounds-checked memory for Triton's interpreter: a kernel reads and writes only the tensors it was given.

Compiled on a GPU, a kernel's pointer that runs past a tensor reads whatever the device holds there,
or faults. Interpreted on a CPU, Triton turns every pointer into a raw address of the process and
reads it through C (``triton._C.libtriton.interpreter.load`` / ``store`` / ``atomic_*``): a pointer
one block past a tensor's end reads the neighbouring heap, and a pointer computed from any number
reads any memory of the process, the check's expected values included. ``install()`` puts itself
between the interpreter and that C module, so that every address a launch touches is checked first:

- at a launch (``GridExecutor.__call__``), the extents of the torch tensors passed to it are recorded
  by argument name: from its lowest element's address to its highest's end, clipped to its storage
  (an ``as_strided`` view cannot widen it), read with ``torch.Tensor``'s own methods (a subclass that
  overrides ``data_ptr`` cannot move it);
- each load, store and atomic operation then checks every address its mask leaves on: the whole
  element must lie inside one recorded extent, else ``OutOfBounds`` (an IndexError) names the program,
  the operation, the tensor the address is nearest to and the element offset, in the notebook's
  language; the memory is not touched. Outside a launch, nothing is allowed. The launch raises the
  ``OutOfBounds`` itself (Triton would wrap it in an InterpreterError showing its repr);
- while a recording listens (``listening``), each access that passes says which tensors it touched and how many
  elements of one row of each (its width): what a check that bounds a block's width reads.

The checks run in the course's process, beside the learner's code: the state lives in closures that
no public name reaches, ``install()`` (called by ``triton_setup.load()``, the only way the course
switches the interpreter on) re-installs the checks when something replaced them, and the grader's
scan sends any use of this module, of ``triton.runtime``, of ``triton.knobs`` and of every private
name to the teacher's review.

What it cannot tell apart: two tensors of the same launch that lie end to end in memory (a load just
past the first lands in the second); both are the kernel's own arguments.
"""

import contextlib

import numpy as np
import torch

from .i18n import pick

_MESSAGES = {
    "en": "program {program} {verb} outside {name}: element offset {offset} past its end (its elements lie at offsets 0 "
          "to {last}). Mask the ragged block: `mask=offsets < length`.",
    "zh": "程序 {program} 在 {name} 之外{verb_zh}：元素偏移 {offset} 超出了它的末尾（它的元素位于偏移 0 到 {last}）。"
          "请给不满的最后一块加掩码：`mask=offsets < length`。",
}
_MASKED = {
    "en": "program {program} {verb} outside {name}: element offset {offset} past its end (its elements lie at offsets 0 "
          "to {last}), although a mask switched some lanes off: the offsets themselves run past. Check the stride "
          "each index is multiplied by (the tensor's own `.stride(axis)` for that axis) and the mask's bound.",
    "zh": "程序 {program} 在 {name} 之外{verb_zh}：元素偏移 {offset} 超出了它的末尾（它的元素位于偏移 0 到 {last}），"
          "而掩码已经关掉了一部分元素：是偏移本身越界了。请检查每个索引所乘的步长（应当是该张量在那一维上的 "
          "`.stride(axis)`）以及掩码的边界。",
}
_BEFORE = {
    "en": "program {program} {verb} outside {name}: element offset {offset}, before its first element. "
          "Check the offsets you add to the pointer.",
    "zh": "程序 {program} 在 {name} 之外{verb_zh}：元素偏移 {offset}，在它的第一个元素之前。请检查加到指针上的偏移。",
}
_NOWHERE = {
    "en": "program {program} {verb} at an address that lies in no tensor given to this launch: a kernel may only "
          "touch the tensors passed to it.",
    "zh": "程序 {program} {verb_zh}的地址不在这次启动传入的任何张量里：核函数只能访问传给它的张量。",
}
_VERBS = {"load": ("loads", "读取"), "store": ("stores", "写入"), "atomic": ("updates atomically", "原子更新")}

#: What this module expects of the tested Triton (3.9): the interpreter's C module's names, those that touch
#: memory (checked below) and those that do not (passed through); and the signatures of the executor's methods it
#: wraps. Another Triton that differs is refused at install (``TritonChanged``), never run with a check missing.
MEMORY_NAMES = frozenset(("load", "store", "atomic_cas", "atomic_rmw"))
PURE_NAMES = frozenset(("ACQUIRE", "ACQUIRE_RELEASE", "ADD", "AND", "FADD", "MAX", "MEM_SEMANTIC", "MIN", "OR",
                        "RELAXED", "RELEASE", "RMW_OP", "UMAX", "UMIN", "XCHG", "XOR", "fma_fp32", "fma_fp64"))
WRAPPED = {"GridExecutor.__call__": ("self", "args_dev", "kwargs"),
           "GridExecutor._init_args_hst": ("self", "args_dev", "kwargs")}


class TritonChanged(RuntimeError):
    """The installed Triton's interpreter is not the one the bounds checks were written for."""


def differences(interpreter):
    """What of `interpreter` (``triton.runtime.interpreter``) differs from what the checks expect: [text]."""
    import inspect

    found = []
    raw = interpreter._interpreter
    while getattr(raw, "_course_bounds", False):
        raw = raw._raw
    names = {name for name in dir(raw) if not name.startswith("_")}
    found += [f"the interpreter's C module has {name}, unknown to the bounds checks"
              for name in sorted(names - MEMORY_NAMES - PURE_NAMES)]
    found += [f"the interpreter's C module lacks {name}" for name in sorted(MEMORY_NAMES - names)]
    for dotted, expected in WRAPPED.items():
        owner, _, attribute = dotted.partition(".")
        method = getattr(getattr(interpreter, owner, None), attribute, None)
        method = getattr(method, "_course_raw", method)
        try:
            parameters = tuple(p.name for p in inspect.signature(method).parameters.values())
        except (TypeError, ValueError):
            parameters = None
        if parameters != expected:
            found.append(f"{dotted} takes {parameters}, not {expected}")
    if not hasattr(interpreter, "interpreter_builder"):
        found.append("the interpreter has no interpreter_builder (the program's index)")
    return found


# Who hears of each tensor an access touched: callables (kind, argument name, width), kind "load", "store" or
# "atomic". Empty unless course_utils.triton_launches is recording, so the checks cost nothing more meanwhile.
_listeners = []


@contextlib.contextmanager
def listening(listener):
    """While active, ``listener(kind, name, width)`` is told, for every load, store and atomic operation that passes
    the checks, the argument name of each tensor it touched (kind "load", "store" or "atomic") and its width: the
    most elements of one row of that tensor (one index of every axis but the last) the operation touched at once."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


class OutOfBounds(IndexError):
    """A kernel run by the interpreter touched memory outside the tensors of its launch."""


def _extent(tensor):
    """(first byte, end byte, element 0's byte, element size, row layout) of what a tensor's elements span, clipped
    to its storage; None when empty. The row layout, (stride, size) of the last axis, is None for a tensor of one
    row (fewer than two axes)."""
    tensor = torch.Tensor.as_subclass(tensor, torch.Tensor) if type(tensor) is not torch.Tensor else tensor
    if torch.Tensor.numel(tensor) == 0:
        return None
    item = torch.Tensor.element_size(tensor)
    start = torch.Tensor.data_ptr(tensor)
    low = sum(min(0, (n - 1) * s) for n, s in zip(tensor.shape, torch.Tensor.stride(tensor)))
    high = sum(max(0, (n - 1) * s) for n, s in zip(tensor.shape, torch.Tensor.stride(tensor)))
    storage = torch.Tensor.untyped_storage(tensor)
    first, end = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    shape, strides = tuple(tensor.shape), torch.Tensor.stride(tensor)
    rows = (strides[-1], shape[-1]) if len(shape) >= 2 else None
    return max(start + low * item, first), min(start + (high + 1) * item, end), start, item, rows


def _row_width(offsets, rows):
    """The most distinct elements of one row (every axis fixed but the last) among element `offsets` of a tensor
    with that row layout (``_extent``'s)."""
    offsets = np.unique(offsets)
    if rows is None or offsets.size <= 1:
        return int(offsets.size)
    stride, size = rows
    if stride <= 0:  # the columns of a row alias one element (stride 0), or run backwards: each offset its own
        return 1 if stride == 0 else int(offsets.size)
    along = (offsets // stride) % size  # the index along the last axis (a dense layout, any order of axes)
    _, counts = np.unique(offsets - along * stride, return_counts=True)  # grouped by where their row starts
    return int(counts.max())


def _tensors(executor, args, kwargs):
    """[(argument name, extent)] for the torch tensors among a launch's arguments (tuples followed)."""
    found = []

    def visit(name, value):
        value = getattr(value, "base", value) if type(value).__name__ == "TensorWrapper" else value
        if isinstance(value, torch.Tensor):
            extent = _extent(value)
            if extent is not None:
                found.append((name, extent))
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                visit(f"{name}[{index}]", item)

    for name, value in zip(executor.arg_names, args):
        visit(name, value)
    for name, value in kwargs.items():
        visit(name, value)
    return found


def install():
    """Check every address Triton's interpreter loads, stores or updates atomically (idempotent).

    Does nothing where Triton is not installed; re-installs where something replaced the checks."""
    try:
        import triton
        from triton.runtime import interpreter
    except ImportError:
        return
    if getattr(interpreter._interpreter, "_course_bounds", False) and getattr(
            interpreter.GridExecutor.__call__, "_course_bounds", False):
        return
    changed = differences(interpreter)
    if changed:
        raise TritonChanged(f"Triton {getattr(triton, '__version__', '?')} is not the version lesson 09's bounds checks "
                            f"were written for (3.9; make triton installs it): " + "; ".join(changed))
    raw = interpreter._interpreter
    while getattr(raw, "_course_bounds", False):  # an older proxy of ours: check against the C module itself
        raw = raw._raw
    launches = []  # the extents of the launch running now (a stack: a launch inside a launch never happens)

    def check(kind, pointers, mask, itemsize):
        addresses = np.asarray(pointers, dtype=np.uint64)
        if mask is not None:
            addresses = addresses[np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape)]
        addresses = addresses.reshape(-1).astype(np.int64, copy=False)
        if addresses.size == 0:
            return
        extents = launches[-1] if launches else []
        inside = np.zeros(addresses.shape, dtype=bool)
        touched = []
        for name, (first, end, start, item, rows) in extents:
            hit = (addresses >= first) & (addresses + itemsize <= end)
            inside |= hit
            if _listeners and hit.any():
                touched.append((name, _row_width((addresses[hit] - start) // item, rows)))
        if inside.all():
            for listener in list(_listeners):
                for name, width in touched:
                    listener(kind, name, width)
            return
        address = int(addresses[~inside][0])
        builder = interpreter.interpreter_builder
        program = tuple(builder.grid_idx or (0, 0, 0))
        program = str(program[:2] if program[2] == 0 else program)
        verb, verb_zh = _VERBS[kind]
        fields = {"program": program, "verb": verb, "verb_zh": verb_zh}
        if not extents:
            raise OutOfBounds(pick(_NOWHERE).format(**fields))
        name, (first, end, start, item, _) = min(
            extents, key=lambda e: 0 if e[1][0] <= address < e[1][1] else min(abs(address - e[1][0]),
                                                                               abs(address - e[1][1])))
        size = (end - start) // item
        offset = (address - start) // item
        if not first - (end - first) <= address < end + (end - first):  # farther than its own length: no slip
            raise OutOfBounds(pick(_NOWHERE).format(**fields))
        if address >= end or address + itemsize > end:
            # every lane on: no mask cut the ragged block off; some lanes off: a mask is there, so the offsets
            # themselves run past (a stride of the wrong axis, a block index that grows too far)
            masked = mask is not None and not np.asarray(mask, dtype=bool).all()
            text = _MASKED if masked else _MESSAGES
            raise OutOfBounds(pick(text).format(name=name, offset=offset, last=size - 1, **fields))
        raise OutOfBounds(pick(_BEFORE).format(name=name, offset=offset, **fields))

    class Checked:
        """The interpreter's C module, with every memory access checked first."""
        _course_bounds = True
        _raw = raw

        def __getattr__(self, name):
            if name in PURE_NAMES:
                return getattr(raw, name)
            # fail closed: a name the checks do not know may touch memory unchecked
            raise TritonChanged(f"Triton's interpreter asked for {name!r}, which the course's bounds checks do not "
                                f"know: lesson 09 is tested with Triton 3.9 (make triton installs it)")

        @staticmethod
        def load(pointers, mask, other, dtype):
            check("load", pointers, mask, np.dtype(dtype).itemsize)
            return raw.load(pointers, mask, other, dtype)

        @staticmethod
        def store(pointers, value, mask):
            check("store", pointers, mask, np.asarray(value).dtype.itemsize)
            return raw.store(pointers, value, mask)

        @staticmethod
        def atomic_cas(pointers, compare, value, semantic):
            check("atomic", pointers, None, np.asarray(compare).dtype.itemsize)
            return raw.atomic_cas(pointers, compare, value, semantic)

        @staticmethod
        def atomic_rmw(operation, pointers, value, mask, semantic):
            check("atomic", pointers, mask, np.asarray(value).dtype.itemsize)
            return raw.atomic_rmw(operation, pointers, value, mask, semantic)

    executor = interpreter.GridExecutor
    launch = getattr(executor.__call__, "_course_raw", executor.__call__)
    copy_in = getattr(executor._init_args_hst, "_course_raw", executor._init_args_hst)

    def init_args(self, args, kwargs):
        args_hst, kwargs_hst = copy_in(self, args, kwargs)
        launches[-1] = _tensors(self, args_hst, kwargs_hst)  # the host copies: the addresses the kernel sees
        return args_hst, kwargs_hst

    def call(self, *args, **kwargs):
        launches.append([])
        try:
            return launch(self, *args, **kwargs)
        except interpreter.InterpreterError as error:
            if isinstance(error.__cause__, OutOfBounds):  # the learner's error itself, not Triton's repr of it
                raise OutOfBounds(str(error.__cause__)) from None
            raise
        finally:
            launches.pop()

    init_args._course_raw, call._course_raw = copy_in, launch
    call._course_bounds = True
    executor._init_args_hst, executor.__call__ = init_args, call
    interpreter._interpreter = Checked()
