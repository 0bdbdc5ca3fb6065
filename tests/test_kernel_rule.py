"""Lesson 09's rule, the kernel is the answer (course_utils/exercises/kernels.py): the witnesses of issue 36 that
passed every check fail now, each with its named verdict, while the lesson's own solutions pass (they run in
tests/test_exercises.py; one control here, through the grader's path too). Every check here runs kernels in
Triton's interpreter: a few seconds each."""

import math

import numpy as np
import pytest
import torch

from course_utils import triton_setup
from course_utils.exercises import FAILED, PASSED, evaluate

flash_triton = pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)
triton_setup.load()
import triton  # noqa: E402 (after the switch to the interpreter)
import triton.language as tl  # noqa: E402
from wired import wired




@triton.jit
def _softmax_kernel(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(Y + row * n + columns, e / tl.sum(e, axis=0), mask=columns < n)


def _softmax_rows(x):
    x = x.contiguous()
    R, n = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(R,)](x, y, n, BLOCK=triton.next_power_of_2(n))
    return y


def test_a_kernel_that_computes_the_softmax_passes_in_the_notebook_and_through_the_grader():
    assert evaluate("09.softmax_kernel", _softmax_rows).status == PASSED
    assert wired("09.softmax_kernel", _softmax_rows).status == PASSED


# ----------------------------------------------------------------------------- the witnesses


def _torch_softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def test_a_softmax_in_plain_torch_is_refused_in_the_notebook_and_through_the_grader():
    for verdict in (evaluate("09.softmax_kernel", _torch_softmax), wired("09.softmax_kernel", _torch_softmax)):
        assert verdict.status == FAILED and verdict.code == "TORCH_OUTSIDE_KERNEL", verdict.message
        assert "aten." in verdict.message


@triton.jit
def _copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offsets, tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


def _addmm(a, b, block_m, block_n, block_k):
    return torch.addmm(torch.zeros(a.shape[0], b.shape[1]), a, b)


def _numpy(a, b, block_m, block_n, block_k):
    return torch.from_numpy(a.numpy() @ b.numpy())


def _numpy_then_a_copy_kernel(a, b, block_m, block_n, block_k):
    found = torch.from_numpy(a.numpy() @ b.numpy())
    out = torch.empty_like(found)
    _copy_kernel[(triton.cdiv(found.numel(), 64),)](found, out, found.numel(), BLOCK=64)
    return out


_GLOBALS = {}


@triton.jit
def _torch_in_the_body(C):
    _GLOBALS["c"].copy_(torch.addmm(_GLOBALS["c"], _GLOBALS["a"], _GLOBALS["b"], beta=0))


def _kernel_calls_torch(a, b, block_m, block_n, block_k):
    c = torch.zeros(a.shape[0], b.shape[1])
    _GLOBALS.update(a=a, b=b, c=c)
    _torch_in_the_body[(1,)](c)
    return c


@pytest.mark.parametrize("function, code", [
    (_addmm, "TORCH_OUTSIDE_KERNEL"), (_numpy, "NO_LAUNCH"), (_numpy_then_a_copy_kernel, "FOREIGN_DATA"),
    (_kernel_calls_torch, "TORCH_IN_KERNEL"),
])
def test_a_matrix_product_not_computed_by_a_kernel_is_refused(function, code):
    verdict = evaluate("09.matmul_kernel", function)
    assert verdict.status == FAILED and verdict.code == code, verdict.message


def _forward_with_matmul(query, key, value, block_q, block_k):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    m = scores.amax(-1, keepdim=True)
    e = (scores - m).exp()
    total = e.sum(-1, keepdim=True)
    return (e / total) @ value, (m + total.log()).squeeze(-1)


def test_the_forward_with_matmul_and_a_hand_written_softmax_is_refused():
    verdict = evaluate("09.flash_forward", _forward_with_matmul)
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "TORCH_OUTSIDE_KERNEL"), verdict.message


def _closed_form_dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal):
    scale = 1 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if causal:
        L = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    p = (scores - lse[..., None]).exp()
    dp = d_output @ value.transpose(-2, -1)
    ds = p * (dp - (d_output * output).sum(-1, keepdim=True))
    return (ds.transpose(-2, -1) @ query) * scale, p.transpose(-2, -1) @ d_output


def test_the_closed_form_dk_dv_with_matmul_is_refused():
    verdict = evaluate("09.backward_dkdv", _closed_form_dkdv)
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "TORCH_OUTSIDE_KERNEL"), verdict.message


def _loaded_in_python(query, key, value, block_q, block_k):
    output, lse = flash_triton.flash_forward(query, key, value, causal=True, block_q=block_q, block_k=block_k)
    BH, L = query.shape[0], query.shape[1]
    counts = [min(math.ceil(min((b + 1) * block_q, L) / block_k), math.ceil(L / block_k))
              for b in range(math.ceil(L / block_q))]
    return output, lse, torch.tensor([counts] * BH, dtype=torch.int64)


def test_the_causal_count_computed_in_python_is_refused():
    verdict = evaluate("09.causal_forward", _loaded_in_python)
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "SOLVER", "OUTPUT_NOT_WRITTEN"), verdict.message


@triton.jit
def _softmax_with_break(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
    for _ in range(2):
        x = x - tl.max(x, axis=0)
        break
    e = tl.exp(x)
    tl.store(Y + row * n + columns, e / tl.sum(e, axis=0), mask=columns < n)


def _softmax_breaks(x):
    x = x.contiguous()
    R, n = x.shape
    y = torch.empty_like(x)
    _softmax_with_break[(R,)](x, y, n, BLOCK=triton.next_power_of_2(n))
    return y


def test_a_kernel_the_gpu_compiler_refuses_is_refused_on_the_cpu():
    verdict = evaluate("09.softmax_kernel", _softmax_breaks)
    assert verdict.status == FAILED and verdict.code == "COMPILER_REFUSED", verdict.message
    assert "break" in verdict.message.lower() or "Break" in verdict.message


def test_the_courses_own_kernel_is_recognised_whatever_calls_it():
    copy = flash_triton.softmax_rows

    verdict = evaluate("09.softmax_kernel", lambda x: copy(x))
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "SOLVER"), verdict.message


def test_a_kernel_that_never_reads_its_input_is_refused_once_its_values_are_right():
    def reads_a_copy_made_by_numpy(x):
        copied = torch.from_numpy(np.array(x.numpy()))
        return _softmax_rows(copied)

    verdict = evaluate("09.softmax_kernel", reads_a_copy_made_by_numpy)
    assert verdict.status == FAILED and verdict.code in ("FOREIGN_DATA", "INPUT_NOT_READ"), verdict.message
