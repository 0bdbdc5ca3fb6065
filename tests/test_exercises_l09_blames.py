"""The wrong blames issue 36 listed, as a learner meets them in lesson 09's first check: a bounds error
whose mask is right names the stride, one without a mask names the mask; a kernel without @triton.jit is
told to put it there (not "'function' object is not subscriptable"); NumPy's RuntimeWarnings of an
overflowing kernel stay out of the output, and the verdict names the mistake."""

import warnings

import pytest

from course_utils import triton_setup
from course_utils.exercises import CRASHED, FAILED, PASSED, evaluate
from cells import run_cell

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

SETUP = "import math\nimport torch\nfrom course_utils.triton_setup import load\nload()\nimport triton\n" \
        "import triton.language as tl\n"  # what lesson 09's setup cell imports
SOFTMAX = '''
def softmax_rows(x):
    @triton.jit
    def kernel(X, Y, n, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        columns = tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + columns, mask=columns < n, other=float("-inf"))
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        tl.store(Y + row * stride + columns, e / tl.sum(e, axis=0), mask=columns < n)
    x = x.contiguous()
    y = torch.full_like(x, float("nan"))
    R, n = x.shape
    kernel[(R,)](x, y, n, n, BLOCK=triton.next_power_of_2(n))
    return y
'''


def _verdict(source):
    namespace = {}
    exec(SETUP, namespace)
    run_cell(source, namespace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdict = evaluate("09.softmax_kernel", namespace["softmax_rows"])
    return verdict, [w for w in caught if issubclass(w.category, RuntimeWarning)]


def _edit(right, wrong):
    assert SOFTMAX.count(right) == 1, right
    return SOFTMAX.replace(right, wrong)


def test_the_kernel_these_edits_start_from_passes():
    verdict, _ = _verdict(SOFTMAX)
    assert verdict.status == PASSED, verdict.message


def test_a_wrong_stride_under_a_right_mask_is_blamed_on_the_stride_not_the_mask():
    verdict, _ = _verdict(_edit("kernel[(R,)](x, y, n, n,", "kernel[(R,)](x, y, n, n + 1,"))
    assert verdict.status == CRASHED and verdict.code == "OutOfBounds", verdict.message
    assert "stride" in verdict.message and "Mask the ragged block" not in verdict.message, verdict.message


def test_a_load_without_a_mask_is_blamed_on_the_mask():
    verdict, _ = _verdict(_edit(', mask=columns < n, other=float("-inf"))', ")"))
    assert verdict.status == CRASHED and verdict.code == "OutOfBounds", verdict.message
    assert "Mask the ragged block" in verdict.message and "stride" not in verdict.message, verdict.message


def test_a_kernel_without_triton_jit_is_told_to_put_it_there():
    verdict, _ = _verdict(_edit("    @triton.jit\n", ""))
    assert verdict.status == CRASHED, verdict.message
    assert "@triton.jit" in verdict.message and "not subscriptable" not in verdict.message, verdict.message


def test_an_overflowing_kernel_prints_no_runtime_warning_and_its_mistake_is_named():
    verdict, warned = _verdict(_edit("        x = x - tl.max(x, axis=0)\n", ""))
    assert verdict.status == FAILED and verdict.code == "NO_MAX_SHIFT", verdict.message
    assert not warned, [str(w.message) for w in warned]
