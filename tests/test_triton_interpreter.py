"""Triton's interpreter made cheaper (course_utils.triton_interpreter) computes what it computed: a kernel defined
inside the learner's function (its helpers at the cell's top level: the
interpreter's rewrite loses a closure) is rewritten once per code, not once per call, yet a cell that redefines it runs
the new code; a launch patches triton.language once however many @jit helpers its programs call; and the results
are the torch reference's."""

import pytest
import torch

from course_utils import triton_setup

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

from triton.runtime import interpreter  # noqa: E402  (after triton_setup.load(), which the import above ran)

from cells import run_cell  # noqa: E402

pytestmark = pytest.mark.skipif(not triton_setup.interpreted(), reason="the interpreter is off (a GPU compiles)")

ROW_MAX = """
import triton
import triton.language as tl


@triton.jit
def helper(v):
    return tl.max(v, axis=0)


def row_max(x, calls):
    @triton.jit
    def kernel(X, OUT, n, CALLS: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        v = tl.load(X + row * n + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=float("-inf"))
        best = helper(v)
        for _ in tl.static_range(CALLS - 1):
            best = tl.maximum(best, helper(v))
        tl.store(OUT + row, best + ADDED)

    out = torch.empty(x.shape[0])
    kernel[(x.shape[0],)](x, out, x.shape[1], CALLS=calls, BLOCK=16)
    return out
"""


def _row_max(added):
    namespace = {"torch": torch}
    run_cell(ROW_MAX.replace("ADDED", str(added)), namespace)
    return namespace["row_max"]


def test_a_kernel_defined_in_a_function_is_rewritten_once_and_computes_the_reference(monkeypatch):
    rewrites = []
    raw = interpreter.FunctionRewriter.rewrite_ast
    monkeypatch.setattr(interpreter.FunctionRewriter, "rewrite_ast",
                        lambda self: rewrites.append(self.fn.__name__) or raw(self))
    row_max = _row_max(0.0)
    x = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    for _ in range(4):
        assert torch.equal(row_max(x, 2), x.max(-1).values)
    assert rewrites.count("kernel") == 1 and rewrites.count("helper") == 1, rewrites
    entries = len(interpreter.InterpretedFunction.rewritten_fn)
    row_max(x, 2)
    assert len(interpreter.InterpretedFunction.rewritten_fn) == entries  # nothing kept per call


def test_a_cell_that_redefines_the_kernel_runs_its_new_code():
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(1))
    first, second = _row_max(0.0), _row_max(1.0)
    assert torch.equal(first(x, 1), x.max(-1).values)
    assert torch.equal(second(x, 1), x.max(-1).values + 1)
    assert torch.equal(first(x, 1), x.max(-1).values)


def test_a_launch_patches_the_language_once_however_many_helpers_its_programs_call(monkeypatch):
    patches = []
    raw = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *args: patches.append(args[0]) or raw(*args))
    row_max = _row_max(0.0)
    x = torch.randn(4, 10, generator=torch.Generator().manual_seed(2))
    row_max(x, 1)  # rewritten first, so that both counts below are launches alone
    counts = []
    for calls in (1, 8):
        patches.clear()
        assert torch.equal(row_max(x, calls), x.max(-1).values)
        counts.append(len(patches))
    assert counts[0] == counts[1] and counts[0] > 0, counts
