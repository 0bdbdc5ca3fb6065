"""Which Triton kernels a function launched, on which tensors, and whether a GPU would compile them.

Lesson 09's answer is the kernel: a check must know that the learner's function launched kernels, which
ones, over which grid, and which of its tensors each kernel read and wrote. Every way of launching one
(``kernel[grid](...)``, ``kernel.run(...)``, an alias, an autotuner, a helper that launches) ends in one of
two methods: ``JITFunction.run`` where kernels compile for a GPU, ``InterpretedFunction.run`` where Triton's
interpreter runs them on a CPU. ``install()`` (called by ``triton_setup.load()``) wraps both, so a launch is
seen by what runs, not by what it is called.

- ``recording()`` collects the launches of its thread into a list of ``Launch``; outside it a launch costs
  one check of a thread-local list more.
- Under the interpreter, ``read`` and ``written`` come from the bounds layer (``triton_bounds``), which sees
  every load and store: a kernel that was handed a tensor but never loaded it did not read it.
- ``in_launch()`` says whether a kernel is running now: the interpreter's own torch calls (copying arguments
  to the host and back) and the kernel's run inside it, the caller's outside.
- ``Launch.refused()`` asks the GPU compiler's front end (``triton_compile``) about the kernel launched.
- ``explain(error)`` turns an error a learner's Triton code raised into a sentence that names its cause.
- Under the interpreter, NumPy's RuntimeWarnings (overflow, 0 / 0) are kept out of the learner's output: a GPU
  gives the same inf and NaN without a word.
"""

import contextlib
import dataclasses
import linecache
import re
import threading

import numpy as np
import torch

from . import triton_bounds, triton_compile
from .i18n import pick

_local = threading.local()  # .recordings: the lists of the active recording() blocks; .depth: kernels running


@dataclasses.dataclass(eq=False)
class Launch:
    """One launch of a Triton kernel.

    kernel: the @triton.jit object launched (a JITFunction, or the interpreter's InterpretedFunction).
    name: the kernel's Python function name.
    grid: the grid it ran over, three ints (a callable grid already applied to the arguments).
    tensors: the torch.Tensor arguments in order (inside tuples too); ``names[i]`` is tensors[i]'s parameter.
    read, written: indices into ``tensors`` of those the kernel loaded from / stored to (an atomic counts as
        both); None when the kernel was compiled (a GPU does not say).
    widest: {index into ``tensors``: the most elements of one row (its last axis) a single load took from it}; None
        when the kernel was compiled.
    """

    kernel: object
    name: str
    grid: tuple
    tensors: list
    read: set | None
    written: set | None
    names: list = dataclasses.field(default_factory=list)
    arguments: tuple = dataclasses.field(default=((), {}), repr=False)  # (args, kwargs) as launched

    compiled: bool = dataclasses.field(default=False, repr=False)  # a GPU's compiler took it: the launch ran compiled
    widest: dict | None = dataclasses.field(default=None, repr=False)

    def refused(self):
        """The GPU compiler front end's refusal of this kernel with these arguments, in the learner's language;
        None when it compiles. Cached per kernel code and signature. A kernel that ran compiled was accepted by
        the compiler itself: None without asking again (whatever Triton the GPU runtime brought)."""
        if self.compiled:
            return None
        args, kwargs = self.arguments
        return triton_compile.refusal(self.kernel, args, kwargs)


def in_launch():
    """True while a kernel runs in this thread (under the interpreter: its body and the interpreter's own copies
    of its arguments)."""
    return getattr(_local, "depth", 0) > 0


@contextlib.contextmanager
def recording(listener=None):
    """Collect every launch this thread makes while active: ``with recording() as launches: ...``.

    listener: an object whose ``before(launch)`` and ``after(launch)`` run just before each recorded launch starts and
    just after it ends, outside it (the kernel ledger compares the launch's memory there with what torch left)."""
    launches = []
    stack = getattr(_local, "recordings", None)
    if stack is None:
        stack = _local.recordings = []
    listeners = getattr(_local, "listeners", None)
    if listeners is None:
        listeners = _local.listeners = []
    stack.append(launches)
    if listener is not None:
        listeners.append(listener)
    try:
        yield launches
    finally:
        stack.remove(launches)
        if listener is not None:
            listeners.remove(listener)


def _tensors(kernel, args, kwargs):
    """[(parameter name, tensor)] among a launch's arguments, in order, tuples followed."""
    found = []

    def visit(name, value):
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                visit(f"{name}[{index}]", item)

    names = list(getattr(kernel, "arg_names", ()))
    for index, value in enumerate(args):
        visit(names[index] if index < len(names) else str(index), value)
    for name, value in kwargs.items():
        if not names or name in names:  # launch options (num_warps, ...) are not arguments
            visit(name, value)
    return found


def _grid(kernel, grid, args, kwargs):
    """The grid as three ints: a callable grid gets the arguments by name, as Triton gives them."""
    if callable(grid):
        names = list(getattr(kernel, "arg_names", ()))
        meta = dict(zip(names, args))
        meta.update(kwargs)
        try:
            grid = grid(meta)
        except Exception:  # the launch itself will say what is wrong with it
            return ()
    try:
        grid = tuple(int(n) for n in grid)
    except (TypeError, ValueError):
        return ()
    return grid + (1,) * (3 - len(grid)) if len(grid) <= 3 else grid


def _wrap(raw, interpreted):
    # The interpreter computes a kernel's blocks in NumPy, which warns at every overflow, 0 / 0 or exp(−∞ + ∞)
    # (RuntimeWarning) where a GPU silently gives inf or NaN: those printed above a check's verdict, and only on a
    # CPU. np.errstate is the thread's own switch (a context variable), so silencing it here touches no other thread.
    quiet = (lambda: np.errstate(all="ignore")) if interpreted else contextlib.nullcontext

    def run(self, *args, grid, warmup, **kwargs):
        stacks = getattr(_local, "recordings", None)
        if warmup or not stacks:
            _local.depth = getattr(_local, "depth", 0) + 1
            try:
                with quiet():
                    return raw(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                _local.depth -= 1
        found = _tensors(self, args, kwargs)
        launch = Launch(kernel=self, name=getattr(self, "__name__", type(self).__name__),
                        grid=_grid(self, grid, args, kwargs), tensors=[t for _, t in found],
                        read=set() if interpreted else None, written=set() if interpreted else None,
                        names=[n for n, _ in found], arguments=(args, dict(kwargs)),
                        widest={} if interpreted else None)
        for launches in stacks:
            launches.append(launch)
        index = {name: i for i, (name, _) in enumerate(found)}

        def heard(kind, name, width):
            if name in index:
                if kind == "load":
                    launch.widest[index[name]] = max(launch.widest.get(index[name], 0), width)
                if kind in ("load", "atomic"):
                    launch.read.add(index[name])
                if kind in ("store", "atomic"):
                    launch.written.add(index[name])

        listeners = list(getattr(_local, "listeners", ()))
        for listener in listeners:
            listener.before(launch)
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            with quiet(), triton_bounds.listening(heard) if interpreted else contextlib.nullcontext():
                result = raw(self, *args, grid=grid, warmup=warmup, **kwargs)
            launch.compiled = not interpreted  # JITFunction.run returns only once the kernel compiled and launched
            return result
        finally:
            _local.depth -= 1
            for listener in listeners:
                listener.after(launch)

    run._course_raw = raw
    return run


def install():
    """Record the launches of compiled and interpreted kernels alike (idempotent; nothing where Triton is not
    installed)."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return
    classes = [(JITFunction, False)]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append((InterpretedFunction, True))
    except ImportError:
        pass
    for cls, interpreted in classes:
        run = cls.__dict__.get("run")
        if run is None or hasattr(run, "_course_raw"):
            continue
        cls.run = _wrap(run, interpreted)


# ----------------------------------------------------------------------------- errors explained

_NOT_JIT = {
    "en": "`{name}[grid](...)` launches a kernel only when `{name}` is a Triton kernel: put `@triton.jit` on the line "
          "above `def {name}(...)` (a plain Python function cannot be indexed by a grid).",
    "zh": "只有当 `{name}` 是 Triton 核函数时，`{name}[grid](...)` 才会启动它：请在 `def {name}(...)` 的上一行加上 "
          "`@triton.jit`（普通的 Python 函数不能用网格来索引）。",
}
_NOT_JIT_ANY = {
    "en": "a kernel is launched as `kernel[grid](...)` only when it is a Triton kernel: put `@triton.jit` on the line "
          "above its `def` (a plain Python function cannot be indexed by a grid).",
    "zh": "只有 Triton 核函数才能写成 `kernel[grid](...)` 来启动：请在它的 `def` 上一行加上 `@triton.jit`"
          "（普通的 Python 函数不能用网格来索引）。",
}
_CALLED = {
    "en": "a @triton.jit kernel is launched with a grid, `kernel[grid](arguments)`, not called like a function "
          "(inside a kernel, only other @triton.jit functions are called).",
    "zh": "@triton.jit 核函数要带上网格来启动：`kernel[grid](arguments)`，而不是像普通函数那样调用"
          "（只有在核函数内部，才直接调用别的 @triton.jit 函数）。",
}
_CPU_TENSOR = {
    "en": "a compiled kernel was given a tensor on the CPU: on a GPU runtime every tensor a kernel touches must be "
          "on the GPU (make them with `device=` the inputs' device, e.g. `torch.empty_like(q)`).",
    "zh": "编译后的核函数收到了 CPU 上的张量：在 GPU 运行环境里，核函数访问的每个张量都必须在 GPU 上"
          "（用与输入相同的 `device=` 创建它们，例如 `torch.empty_like(q)`）。",
}


def explain(error):
    """A clear sentence, in the learner's language, for an error a learner's Triton code raised; None for an error
    this module knows nothing about."""
    if isinstance(error, triton_bounds.OutOfBounds):
        return str(error)  # already names the program, the tensor, the offset and the likely cause
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:
        CompilationError = ()
    if CompilationError and isinstance(error, CompilationError):
        return triton_compile.describe(getattr(error, "kernel_name", None) or "kernel", error)
    inner = error
    while inner is not None:  # the interpreter wraps a kernel's errors in its own InterpreterError
        if CompilationError and isinstance(inner, CompilationError):
            return triton_compile.describe("kernel", inner)
        if isinstance(inner, triton_bounds.OutOfBounds):
            return str(inner)
        if inner.__cause__ is None:
            break
        inner = inner.__cause__
    text = str(error)
    if isinstance(error, TypeError) and "object is not subscriptable" in text and "'function'" in text:
        name = _subscripted_name(error)
        return pick(_NOT_JIT).format(name=name) if name else pick(_NOT_JIT_ANY)
    if isinstance(error, RuntimeError) and "Cannot call @triton.jit'd outside of the scope of a kernel" in text:
        return pick(_CALLED)
    if "Pointer argument cannot be accessed from Triton (cpu tensor?)" in text:
        return pick(_CPU_TENSOR)
    return None


def _subscripted_name(error):
    """The name of the plain function indexed by a grid, read from the failing line of the traceback."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return None
    line = linecache.getline(frame.tb_frame.f_code.co_filename, frame.tb_lineno)
    for name in re.findall(r"([A-Za-z_][A-Za-z_0-9]*)\s*\[", line):
        value = frame.tb_frame.f_locals.get(name, frame.tb_frame.f_globals.get(name))
        if callable(value) and type(value).__name__ == "function":
            return name
    return None
