"""09.softmax_blocks refuses a kernel that ignores `block`, judged by what the kernel loaded: the interpreter's
bounds layer (course_utils.triton_bounds) says, for every load, how many elements of one row of each tensor it
took at once, and the check refuses a load of x wider than `block` (BLOCK_IGNORED), in the notebook and in the
teacher's verdict alike, while a kernel that walks the row in blocks of `block` passes. The width is of one row
(one index of every axis but the last), whatever the tensor's layout: a 2-D tile of two rows counts its columns."""

import pytest
import torch

from course_utils import triton_setup
from course_utils.exercises import FAILED, PASSED, evaluate
from course_utils.i18n import MESSAGES
from prepared import evaluate as grade  # the teacher's verdict, the Reference prepared once

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)
triton_setup.load()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from course_utils import triton_launches  # noqa: E402


def _blocked(x, block, *, widen=1):
    """Two passes over each row in blocks of `block` * `widen` columns (widen 1: the right answer)."""

    @triton.jit
    def kernel(X, Y, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        m = tl.full((), float("-inf"), tl.float32)
        ell = tl.zeros((), tl.float32)
        for start in range(0, n, BLOCK):
            columns = start + tl.arange(0, BLOCK)
            v = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(v, axis=0))
            ell = ell * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
            m = m_new
        for start in range(0, n, BLOCK):
            columns = start + tl.arange(0, BLOCK)
            v = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
            tl.store(Y + row * n + columns, tl.exp(v - m) / ell, mask=columns < n)

    x = x.contiguous()
    R, n = x.shape
    y = torch.full((R, n), float("nan"))
    kernel[(R,)](x, y, n, BLOCK=block * widen)
    return y


def softmax_in_blocks(x, block):
    return _blocked(x, block)


def softmax_in_double_blocks(x, block):
    """Right numbers, but each load takes 2 · block columns."""
    return _blocked(x, block, widen=2)


def softmax_whole_row(x, block):
    """Right numbers, but `block` is ignored: the row is one block of next_power_of_2(n)."""

    @triton.jit
    def kernel(X, Y, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        columns = tl.arange(0, BLOCK)
        v = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(Y + row * n + columns, e / tl.sum(e, axis=0), mask=columns < n)

    x = x.contiguous()
    y = torch.full_like(x, float("nan"))
    kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def test_a_kernel_that_walks_the_row_in_blocks_of_block_passes():
    verdict = evaluate("09.softmax_blocks", softmax_in_blocks)
    assert verdict.status == PASSED, verdict.message


@pytest.mark.parametrize("function", [softmax_whole_row, softmax_in_double_blocks], ids=lambda f: f.__name__)
def test_a_kernel_that_loads_more_than_block_columns_of_a_row_is_refused_and_told_why(function):
    verdict = evaluate("09.softmax_blocks", function)
    assert verdict.status == FAILED and verdict.code == "BLOCK_IGNORED", verdict.message
    assert "`block`" in verdict.message and "tl.arange(0, BLOCK)" in verdict.message, verdict.message


def test_the_teachers_verdict_on_the_hidden_cases_refuses_it_too():
    verdict = grade("09.softmax_blocks", softmax_whole_row, hidden_seed=12345)
    assert verdict.status == FAILED and verdict.code == "BLOCK_IGNORED", verdict.message


def test_the_refusal_reads_in_both_languages():
    entry = MESSAGES["check.refused.BLOCK_IGNORED"]
    assert "block" in entry["en"] and "block" in entry["zh"] and entry["en"] != entry["zh"]


@triton.jit
def _tile_copy(X, Y, sxr, sxc, ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """Copies a (ROWS, COLUMNS) tile of X, read with X's strides, into the contiguous Y."""
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLUMNS)[None, :]
    tl.store(Y + r * COLUMNS + c, tl.load(X + r * sxr + c * sxc))


@pytest.mark.parametrize("transposed", [False, True], ids=["row-major", "column-major"])
def test_a_loads_width_is_the_most_of_one_row_it_took_whatever_the_layout(transposed):
    """A (2, 16) tile of a (4, 64) tensor is 16 wide, not 32; stored column-major, the same."""
    x = torch.randn(64, 4).t() if transposed else torch.randn(4, 64)
    y = torch.empty(2, 16)
    with triton_launches.recording() as launches:
        _tile_copy[(1,)](x, y, x.stride(0), x.stride(1), ROWS=2, COLUMNS=16)
    (launch,) = launches
    assert launch.widest == {0: 16}  # x loaded, 16 of a row at once; y only stored
    torch.testing.assert_close(y, x[:2, :16])
