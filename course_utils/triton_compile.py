"""The GPU compiler's front end, run on the CPU: would a GPU take this kernel?

Triton's interpreter runs a kernel's Python body line by line, so it runs more than the compiler
accepts: ``break`` and ``continue`` in a loop, ``return`` inside a loop, a call to torch or to a plain
Python function, a tensor read from a global, an ``if`` on a block of values. A kernel that passes every
check on a CPU would then fail to compile on the learner's first GPU. The compiler's front end (the
kernel's source to Triton's IR, TTIR, then to its GPU dialect, TTGIR) needs no GPU and no CUDA
toolchain: only the stages after it (LLVM, PTX, ptxas) do. ``refusal()`` runs those two stages for an
NVIDIA H100 target (sm_90) with the signature the launch's own arguments give, the way a compiled launch
would, and turns the compiler's error into a sentence in the learner's language that names the construct,
its line and what to write instead. Measured here: 10 to 90 ms per kernel and signature, then cached.

This leans on Triton's internals (``JITFunction``'s argument binder, ``ASTSource``, the NVIDIA backend's
stages), tested with Triton 3.9: where they are missing or change, ``refusal()`` fails closed (it says the
kernel could not be checked) rather than let every kernel through.
"""

import contextlib
import hashlib
import threading
import warnings

from .i18n import LANGUAGES, language

TESTED_WITH = "3.9"

_CANNOT_CHECK = {
    "en": "the GPU compiler's front end could not be run on `{kernel}` here ({error}); the course was tested with "
          "Triton {tested}.",
    "zh": "这里无法对 `{kernel}` 运行 GPU 编译器的前端（{error}）；本课程是用 Triton {tested} 测试的。",
}
_NO_SOURCE = {
    "en": "A GPU's Triton compiler cannot read the source of the kernel `{kernel}`: it was made from text (exec, "
          "a string), not written in a cell or a file. Define the kernel with `def` in a cell, decorated with "
          "`@triton.jit`.",
    "zh": "GPU 上的 Triton 编译器读不到核函数 `{kernel}` 的源代码：它是由文本（exec、字符串）生成的，"
          "而不是写在单元格或文件里的。请在单元格里用 `def` 定义核函数，并加上 `@triton.jit`。",
}
_HEAD = {
    "en": "A GPU's Triton compiler refuses the kernel `{kernel}` (line {line} of it: `{code}`), although the "
          "interpreter ran it: {why}",
    "zh": "GPU 上的 Triton 编译器不接受核函数 `{kernel}`（它的第 {line} 行：`{code}`），尽管解释器运行了它：{why}",
}
_HEAD_NO_LINE = {
    "en": "A GPU's Triton compiler refuses the kernel `{kernel}`, although the interpreter ran it: {why}",
    "zh": "GPU 上的 Triton 编译器不接受核函数 `{kernel}`，尽管解释器运行了它：{why}",
}
# What each refusal means and what to write instead; matched on the compiler's own message, most specific first.
_WHY = [
    ("unsupported AST node type: Break", {
        "en": "`break` does not exist in a kernel. Give the loop the bound it needs instead (stop the `range` at the "
              "last block that has work), or let it run on and switch the extra work off with a mask or `tl.where`.",
        "zh": "核函数里没有 `break`。请改为给循环它需要的边界（让 `range` 停在最后一个有工作的块），或者让循环照常走完，"
              "用掩码或 `tl.where` 关掉多出来的工作。",
    }),
    ("unsupported AST node type: Continue", {
        "en": "`continue` does not exist in a kernel. Put the rest of the loop body under an `if` (or mask its loads "
              "and stores, or choose values with `tl.where`) instead of skipping to the next iteration.",
        "zh": "核函数里没有 `continue`。请把循环体余下的部分放进一个 `if`（或者给它的读写加掩码、用 `tl.where` 选值），"
              "而不是跳到下一次迭代。",
    }),
    ("Cannot have `return` statements inside", {
        "en": "a kernel cannot `return` from inside a loop. Bound the loop so that it ends where the work ends, and "
              "let the kernel run to its end.",
        "zh": "核函数不能在循环内部 `return`。请给循环定好边界，让它在工作结束处结束，并让核函数一直运行到末尾。",
    }),
    ("Cannot access global variable", {
        "en": "a kernel can read only its arguments and `tl.constexpr` constants, not a global tensor, function or "
              "variable. Pass tensors as arguments, mark constants `tl.constexpr`, and call only `@triton.jit` "
              "functions or `tl.*` from a kernel.",
        "zh": "核函数只能读取它的参数和 `tl.constexpr` 常量，不能读取全局的张量、函数或变量。请把张量作为参数传进来，"
              "给常量标上 `tl.constexpr`，并且在核函数里只调用 `@triton.jit` 函数或 `tl.*`。",
    }),
    ("of type <class 'torch.Tensor'>", {
        "en": "a kernel cannot call torch: every step runs on the blocks it loaded, with `tl.*` operations "
              "(`tl.dot`, `tl.exp`, `tl.max`, ...) or `@triton.jit` helpers.",
        "zh": "核函数不能调用 torch：每一步都在它读入的块上用 `tl.*` 运算（`tl.dot`、`tl.exp`、`tl.max` 等）"
              "或 `@triton.jit` 辅助函数完成。",
    }),
    ("arange's arguments must be of type tl.constexpr", {
        "en": "`tl.arange` needs bounds known when the kernel compiles: make the block size a `tl.constexpr` "
              "parameter (`BLOCK: tl.constexpr`) and mask the elements past the length.",
        "zh": "`tl.arange` 的边界必须在编译时已知：把块大小写成 `tl.constexpr` 参数（`BLOCK: tl.constexpr`），"
              "并用掩码去掉超出长度的元素。",
    }),
    ("arange's range must be a power of 2", {
        "en": "a block's size must be a power of two: round it up with `triton.next_power_of_2` and mask the "
              "elements past the length.",
        "zh": "块的大小必须是 2 的幂：用 `triton.next_power_of_2` 向上取整，并用掩码去掉超出长度的元素。",
    }),
    ("Input shapes should have M >= ", {
        "en": "a block is too small for `tl.dot`: {detail} (on a GPU, K ≥ 8 for float32 and K ≥ 16 for float16 or "
              "bfloat16). Use larger blocks (at least 16 along the summed axis) and mask what lies past the tensor.",
        "zh": "块太小，`tl.dot` 不接受：{detail}（在 GPU 上，float32 要求 K ≥ 8，float16 或 bfloat16 要求 K ≥ 16）。"
              "请用更大的块（求和的那一维至少 16），并用掩码去掉张量之外的部分。",
    }),
    ("Boolean value of Tensor with more than one value is ambiguous", {
        "en": "an `if` (or `while`, `and`, `or`) on a block of values: each element needs its own answer. Choose "
              "values with `tl.where(condition, a, b)` or pass the condition as a mask.",
        "zh": "对一整块值写了 `if`（或 `while`、`and`、`or`）：每个元素需要各自的结果。请用 "
              "`tl.where(condition, a, b)` 选值，或者把条件作为掩码传入。",
    }),
    ("Loop-carried variable", {
        "en": "a variable changes type inside a loop ({detail}). Start it with the type it keeps, e.g. "
              "`tl.zeros([BLOCK], dtype=tl.float32)` rather than `0`.",
        "zh": "一个变量在循环中改变了类型（{detail}）。请一开始就给它最终的类型，例如用 "
              "`tl.zeros([BLOCK], dtype=tl.float32)` 而不是 `0`。",
    }),
    ("Mismatched type for", {
        "en": "a variable gets different types in the two branches of an `if` ({detail}). Give it the same shape "
              "and dtype in both, or choose between them with `tl.where`.",
        "zh": "一个变量在 `if` 的两个分支里类型不同（{detail}）。请让两边的形状和 dtype 相同，或用 `tl.where` 二选一。",
    }),
]
_OTHER = {
    "en": "{detail}",
    "zh": "编译器的原话：{detail}",
}

_MISSING = object()
_lock = threading.Lock()
_pristine = None  # [(object, its attributes)] of triton.language before any kernel ran: see snapshot()
_cache = {}  # (code objects of the kernel and its helpers, signature, constants, options) -> refusal or None
_laid_out = set()  # the kernels' code objects (with their helpers') that went through TTGIR once
_machinery = None  # (backend, target, front-end JITFunction class), built at the first check


def _language_objects():
    import triton.language as tl

    core = tl.core
    return [tl, core, tl.math, core.tensor, core.dtype, getattr(core, "condition", None),
            getattr(core, "tensor_descriptor_base", None)]


def snapshot():
    """Remember triton.language as Triton made it (``triton_setup.load()`` calls this before any kernel runs).

    The interpreter patches triton.language's functions and classes with NumPy versions while a kernel runs,
    and a @jit function called from a kernel (``tl.max``, ``tl.sum``, a helper) patches them again without
    undoing it (Triton 3.9, ``InterpretedFunction.__call__``): after the first launch ``tl.core.mul`` and its
    kind compute on NumPy arrays, and the compiler's front end, which builds IR through the same functions,
    fails. ``_as_triton_made_it()`` puts the remembered ones back while the front end runs."""
    global _pristine
    if _pristine is None:
        _pristine = [(obj, dict(vars(obj))) for obj in _language_objects() if obj is not None]


@contextlib.contextmanager
def _as_triton_made_it():
    changed = []
    for obj, attributes in _pristine or ():
        now = dict(vars(obj))
        for name in set(now) | set(attributes):
            before, current = attributes.get(name, _MISSING), now.get(name, _MISSING)
            if before is not current:
                changed.append((obj, name, current))
                if before is _MISSING:
                    delattr(obj, name)
                else:
                    setattr(obj, name, before)
    try:
        yield
    finally:
        for obj, name, current in reversed(changed):
            if current is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, current)


def _setup():
    """The NVIDIA backend for an H100 (sm_90) and a JITFunction whose helpers are compiled ones too."""
    global _machinery
    if _machinery is not None:
        return _machinery
    import triton  # noqa: F401  (already imported through triton_setup.load() by whoever launched)
    from triton.backends.compiler import GPUTarget
    from triton.compiler import code_generator
    from triton.compiler.compiler import make_backend
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        InterpretedFunction = ()

    compiled = {}  # Python function -> its front-end JITFunction (helpers shared between kernels)

    snapshot()  # where load() did not take it first, triton.language is still as Triton made it now

    class FrontEnd(JITFunction):
        """A kernel as the compiler sees it: the interpreter's @triton.jit helpers it calls are compiled ones."""

        @property
        def cache_key(self):
            # Triton's own key walks the globals and refuses the interpreter's functions; the front end caches
            # nothing by it, and needs one only to tell functions apart
            self.used_global_vals = {}
            return hashlib.sha256(f"{self._fn_name}:{self.starting_line_number}:{self.src}".encode()).hexdigest()

        def __hash__(self):
            return hash(self.cache_key)

        def get_capture_scope(self):
            scope = super().get_capture_scope()
            return {name: (front_end(value) if isinstance(value, InterpretedFunction) else value)
                    for name, value in scope.items()}

    def front_end(kernel):
        function = getattr(kernel, "fn", kernel)
        if function not in compiled:
            compiled[function] = FrontEnd(function)
        return compiled[function]

    def compiled_value(value):
        return front_end(value) if isinstance(value, InterpretedFunction) else value

    class Generator(code_generator.CodeGenerator):
        """Triton's code generator, reading interpreted @jit functions (``tl.max``, ``tl.cdiv``, the learner's
        helpers: all of them InterpretedFunction where the interpreter is on) as the compiled ones they stand for."""

        def visit_Attribute(self, node):
            return compiled_value(super().visit_Attribute(node))

        def dereference_name(self, name):
            return compiled_value(super().dereference_name(name))

    target = GPUTarget("cuda", 90, 32)
    _machinery = (make_backend(target), target, front_end, Generator)
    return _machinery


@contextlib.contextmanager
def _generator(generator):
    """Triton's front end builds its code generator by the module's global name (for the kernel and for each
    helper it inlines): while one kernel is checked, that name is the subclass above. Under ``_lock``; for a
    compiled kernel the subclass changes nothing, so a GPU compile in another thread meanwhile is unaffected."""
    from triton.compiler import code_generator

    raw = code_generator.CodeGenerator
    code_generator.CodeGenerator = generator
    try:
        yield
    finally:
        code_generator.CodeGenerator = raw


def _codes(kernel, seen=None):
    """The code objects of a kernel and of every @triton.jit helper it reaches: a cell that redefines a
    helper makes a new one, so the cache asks again."""
    seen = [] if seen is None else seen
    function = getattr(kernel, "fn", None)
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return seen
    seen.append(code)
    scope = dict(getattr(function, "__globals__", {}))
    for name, cell in zip(code.co_freevars, function.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:
            pass
    for name in code.co_names + code.co_freevars:
        value = scope.get(name)
        if hasattr(value, "fn") and hasattr(value, "run"):
            _codes(value, seen)
    return seen


def _innermost(error):
    """The compiler's error at the learner's line: a helper's error is wrapped in its caller's."""
    from triton.compiler.errors import CompilationError

    while isinstance(error.__cause__, CompilationError) or isinstance(error.__context__, CompilationError):
        error = error.__cause__ if isinstance(error.__cause__, CompilationError) else error.__context__
    return error


def _last_line(text):
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else type(text).__name__


def describe(kernel_name, error, lang=None):
    """A compiler's CompilationError as the learner's sentence: the construct, its line, what to do (in `lang`,
    by default the notebook's language)."""
    lang = lang or language()
    error = _innermost(error)
    detail = error.error_message if getattr(error, "error_message", None) else _last_line(error)
    detail = str(detail).strip()
    for needle, texts in _WHY:
        if needle in detail or needle in str(error):
            why = texts[lang].format(detail=_last_line(detail).split("(", 1)[0].strip().rstrip(".") or detail)
            break
    else:
        why = _OTHER[lang].format(detail=_last_line(detail))
    node, source = getattr(error, "node", None), getattr(error, "src", None)
    line = getattr(node, "lineno", None)
    if line and source:
        lines = source.splitlines()
        code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        if len(code) > 80:
            code = code[:77] + "..."
        return _HEAD[lang].format(kernel=kernel_name, line=line, code=code, why=why)
    return _HEAD_NO_LINE[lang].format(kernel=kernel_name, why=why)


def _other(kernel_name, error):
    return {lang: _HEAD_NO_LINE[lang].format(kernel=kernel_name, why=_OTHER[lang].format(detail=_last_line(error)))
            for lang in LANGUAGES}


def refusal(kernel, args, kwargs):
    """None when a GPU's compiler front end takes `kernel` launched with these arguments; else why not, in the
    learner's language. `kernel` is the @triton.jit object (interpreted or compiled); `args`/`kwargs` the launch's
    own. Cached per kernel code (its helpers' too) and signature."""
    name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel")
    try:
        backend, target, front_end, generator = _setup()
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
        from triton._C.libtriton import ir
        from triton.runtime.jit import create_function_from_signature
    except Exception as error:  # fail closed: an unchecked kernel is not an accepted one
        return _CANNOT_CHECK[language()].format(kernel=name, error=_last_line(error), tested=TESTED_WITH)
    try:
        function = front_end(kernel)
    except ValueError:  # Triton reads a kernel's source from its file (a cell, a module): exec'd text has none
        return _NO_SOURCE[language()].format(kernel=name)
    try:
        binder = create_function_from_signature(function.signature, function.params, backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, _ = function._pack_args(backend, kwargs, bound, specialization, options)
        # no alignment or divisibility hints: they speed a compiled kernel up and never make one refused, and
        # without them the cases of one check share their compilations
        attrs = {}
    except Exception as error:  # the arguments themselves do not fit the kernel: a compiled launch fails too
        return _other(name, error)[language()]
    key = (tuple(_codes(kernel)), tuple(sorted(signature.items(), key=str)),
           repr(sorted(constexprs.items(), key=str)), repr(sorted(attrs.items(), key=str)),
           getattr(options, "num_warps", None), getattr(options, "num_stages", None))
    with _lock:
        if key in _cache:
            return _cache[key] and _cache[key][language()]
    source = ASTSource(function, signature, constexprs, attrs)
    answer = None
    with _lock, _as_triton_made_it(), _generator(generator), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Triton's own (TRITON_DEFAULT_FP_FUSION, ...) are not the learner's
        try:
            context = ir.context()
            ir.load_dialects(context)
            backend.load_dialects(context)
            module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                    backend.get_module_map(), context)
            stages = {}
            backend.add_stages(stages, options, source.language)
            metadata = {}
            # TTIR for every signature (the language's rules: block sizes, tl.dot's shapes, constexprs); TTGIR, the
            # last stage that needs no CUDA toolchain, once per kernel: it costs as much again (2 s of lesson 09's
            # 22 s of checks) and refuses what a kernel's code does, not the sizes one case gives it
            codes = key[0]
            for stage in ("ttir", "ttgir") if codes not in _laid_out else ("ttir",):
                module = stages[stage](module, metadata)
            _laid_out.add(codes)
        except CompilationError as error:
            answer = {lang: describe(name, error, lang) for lang in LANGUAGES}
        except Exception as error:  # an MLIR pass's refusal, or the learner's constexpr arithmetic failing
            answer = _other(name, error)
    with _lock:
        _cache[key] = answer  # both languages: the notebook's may change between two checks
    return answer and answer[language()]

