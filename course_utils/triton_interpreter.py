"""Triton's interpreter, made cheaper without changing what it computes.

Lesson 09's exercises define their kernels inside the learner's function, so every call makes new kernel
objects, and Triton's interpreter (3.9) spends most of a small launch on work it has done before:

- **It rewrites each new kernel from its source.** ``InterpretedFunction.rewrite`` reads the source, parses it,
  transforms the syntax tree and compiles it, and caches the result by the function object, which a call
  makes anew: about 45 ms a launch, and a cache entry kept for ever per call. The rewrite depends only on the
  kernel's code (its source lines) and the globals it runs in, so it is kept by those here.
- **It patches triton.language again at every call of a @jit helper.** Inside a launch the language is
  already patched (the launch patches it and restores it at its end); each ``tl.max``, ``tl.sum`` or learner
  helper call walks the modules' members again to find nothing left to patch: about 4 ms a call, a dozen
  calls a program. Here a launch patches each language module once: a helper's call that would patch the
  same modules again is skipped.
- **It asserts after every int32 operation that it did not overflow**, which a GPU build does only with
  ``debug=True``: about 45 % of a FlashAttention kernel's time (3.0 s against 1.4 s on lesson 09's cases).
  An offset that overflows still cannot reach memory: the bounds checks stop the pointer it makes.

Measured on 09.flash_forward's check of the lesson's solution, one thread: 1.25 s before the first two,
0.87 s after (the interpreter's own arithmetic is most of what is left). ``install()`` is called by ``triton_setup.load()`` where the interpreter runs; where Triton's
internals differ from 3.9's, the first two are left out (the interpreter is then slower, never different).
"""

import dataclasses


def install():
    """All three (idempotent)."""
    from triton.runtime import interpreter

    _without_overflow_asserts(interpreter)
    _rewrite_once_per_code(interpreter)
    _patch_language_once_per_launch(interpreter)


def _without_overflow_asserts(interpreter):
    builder = interpreter.interpreter_builder
    options = getattr(builder, "options", None)
    if dataclasses.is_dataclass(options) and getattr(options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)


def _rewrite_once_per_code(interpreter):
    functions = getattr(interpreter, "InterpretedFunction", None)
    raw = getattr(functions, "rewrite", None)
    if raw is None or hasattr(raw, "_course_raw"):
        return
    # (code object, globals' id) -> (globals, the rewritten function). The code object fixes the source lines
    # the rewrite reads (a cell run again makes new code objects); the globals are held, so their id stays theirs.
    rewritten = {}

    def rewrite(self):
        function = self.fn
        code, scope = getattr(function, "__code__", None), getattr(function, "__globals__", None)
        if code is None or scope is None:
            return raw(self)
        key = (code, id(scope))
        if key not in rewritten:
            rewritten[key] = (scope, raw(self))
            functions.rewritten_fn.pop(function, None)  # Triton's own cache, by the object: one entry per call
        return rewritten[key][1]

    rewrite._course_raw = raw
    functions.rewrite = rewrite


def _patch_language_once_per_launch(interpreter):
    raw = getattr(interpreter, "_patch_lang", None)
    scope_class = getattr(interpreter, "_LangPatchScope", None)
    if raw is None or scope_class is None or hasattr(raw, "_course_raw"):
        return
    import triton.language as tl

    languages = (tl, tl.core)
    # The language modules patched since the running launch began; None between launches. A launch's own patch
    # is the one whose scope is restored (at its end); a helper's call never restores the patch it made.
    patched = None

    def patch_lang(fn):
        nonlocal patched
        wanted = {id(value) for value in fn.__globals__.values() if any(value is lang for lang in languages)}
        if patched is not None and wanted <= patched:
            scope = scope_class()  # all of it in place already: Triton would set the same members again
        else:
            scope = raw(fn)
            patched = (patched or set()) | wanted
        restore = scope.restore

        def restore_and_end():
            nonlocal patched
            patched = None
            restore()

        scope.restore = restore_and_end
        return scope

    patch_lang._course_raw = raw
    interpreter._patch_lang = patch_lang
