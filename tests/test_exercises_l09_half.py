"""Lesson 09's half-precision forward (09.flash_forward_half) and the interpreter's bfloat16 (triton_halves).

The reference agrees with F.scaled_dot_product_attention in float64 on the same half inputs; the cases hold
what the exercise's text promises (a float16 row whose sum passes 65,504, a bfloat16 row whose sum loses
bits, both dtypes, ragged blocks); the lesson's kernel passes on the public and hidden cases; a Triton
kernel with each named mistake is named, and the one the text calls invisible (P cast before its row sum)
passes, as the text says. Triton's interpreter computes bfloat16 as a GPU does once triton_halves is in.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from course_teacher.exercises.l09_flash_complete import HALF_ATOL, HALF_RTOL, HALVES
from prepared import evaluate as evaluate_hidden  # the teacher's verdict, each Reference prepared once
from course_utils import triton_setup
from course_utils.exercises import FAILED, PASSED
from cells import run_cell

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

EXERCISE = "09.flash_forward_half"
HIDDEN_SEED = 12345
SPEC = EXERCISES[EXERCISE]
_half_reference = SPEC.reference
_half_accumulated = next(mistake.fn for mistake in SPEC.mistakes if mistake.code == "ACCUMULATOR_HALF")


def _cases(hidden=False):
    spec = EXERCISES[EXERCISE]
    if hidden:
        return spec.hidden(torch.Generator().manual_seed(HIDDEN_SEED))
    return spec.cases(torch.Generator().manual_seed(spec.seed))


# ----------------------------------------------------------------------------- the reference and the cases


@pytest.mark.parametrize("hidden", [False, True])
def test_the_reference_is_sdpa_in_float64_rounded_once_and_its_lse_is_float32(hidden):
    for q, k, v, block_q, block_k in _cases(hidden):
        assert q.dtype in HALVES and k.dtype == v.dtype == q.dtype
        output, lse = _half_reference(q, k, v, block_q, block_k)
        expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
        assert output.dtype == q.dtype and lse.dtype == torch.float32
        assert torch.equal(output, expected.to(q.dtype))  # one rounding of the float64 answer, bit for bit
        scores = q.double() @ k.double().transpose(1, 2) / math.sqrt(q.shape[-1])
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1).float(), atol=1e-6, rtol=1e-6)


def test_the_cases_hold_both_dtypes_ragged_blocks_and_the_two_long_rows_the_text_promises():
    cases = _cases()
    assert {case[0].dtype for case in cases} == set(HALVES)
    assert any(k.shape[1] % block_k for _, k, _, _, block_k in cases)
    assert any(q.shape[1] % block_q for q, _, _, block_q, _ in cases)
    first = cases[0]
    assert first[0].dtype == torch.float16
    q, k, v = (t.double() for t in first[:3])
    weights = torch.exp(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]))
    weights = weights / weights.amax(-1, keepdim=True)  # p = exp(s − m), as the kernel's accumulator holds them
    assert ((weights @ v) > 65504).all()  # every row's Σ p·v passes float16's largest number
    lost = [case for case in cases if case[0].dtype == torch.bfloat16 and case[1].shape[1] >= 512]
    assert lost, "a bfloat16 row long enough to lose bits"


@pytest.mark.parametrize("hidden", [False, True])
def test_an_accumulator_in_the_inputs_dtype_is_off_by_far_more_than_the_tolerance_on_both_long_rows(hidden):
    """The emulation of ACCUMULATOR_HALF: inf on the float16 rows, 1.5 times the tolerance or more off on the bfloat16 one."""
    first, second = _cases(hidden)[:2]
    wrong, _ = _half_accumulated(*first)
    assert wrong.isinf().all()
    wrong, _ = _half_accumulated(*second)
    right, _ = _half_reference(*second)
    gap = (wrong.double() - right.double()).abs()
    assert (gap > 1.5 * (HALF_ATOL + HALF_RTOL * right.double().abs())).all(), gap.amin()


# ----------------------------------------------------------------------------- kernels, right and wrong


def _solution():
    import jupytext

    from course_teacher import build

    cells = jupytext.read(build.lessons()["09"]).cells
    return next(cell.source for cell in cells if cell.metadata.get("exercise") == EXERCISE)


def _function(source):
    namespace = {}
    exec("import math\nimport torch\nimport torch.nn.functional as F\nfrom course_utils.triton_setup import load\n"
         "load()\nimport triton\nimport triton.language as tl\n", namespace)  # what lesson 09's setup cell imports
    run_cell(source, namespace)  # with its text in linecache, as a notebook runs a cell
    return namespace["flash_forward_half"]


def test_the_lessons_kernel_passes_on_the_public_and_hidden_cases():
    verdict = evaluate_hidden(EXERCISE, _function(_solution()), hidden_seed=HIDDEN_SEED)
    assert verdict.status == PASSED, verdict.message


#: (mistake, [(a line of the solution, what a learner with that mistake wrote instead)])
BUGS = [
    ("ACCUMULATOR_HALF", [
        ("acc = tl.zeros((BLOCK_Q, BLOCK_DV), tl.float32)", "acc = tl.zeros((BLOCK_Q, BLOCK_DV), Q.dtype.element_ty)"),
        ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
         "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(v.dtype)")]),
    ("OUTPUT_FLOAT32", [('output = torch.full((BH, L_q, d_v), float("nan"), dtype=query.dtype,',
                         'output = torch.full((BH, L_q, d_v), float("nan"), dtype=torch.float32,')]),
    ("LSE_HALF", [('lse = torch.full((BH, L_q), float("nan"), dtype=torch.float32,',
                   'lse = torch.full((BH, L_q), float("nan"), dtype=query.dtype,')]),
]


def _edited(edits):
    source = _solution()
    for right, wrong in edits:
        assert source.count(right) == 1, f"the solution no longer holds {right!r} once"
        source = source.replace(right, wrong)
    return source


@pytest.mark.slow  # (each about 10 s interpreted: public and hidden cases)
@pytest.mark.parametrize("code, edits", BUGS, ids=[b[0] for b in BUGS])
def test_a_triton_kernel_with_each_known_mistake_is_named(code, edits):
    verdict = evaluate_hidden(EXERCISE, _function(_edited(edits)), hidden_seed=HIDDEN_SEED)
    assert verdict.status == FAILED and verdict.code == code, verdict.message


@pytest.mark.slow
def test_p_cast_to_half_before_its_row_sum_passes_as_the_text_says_it_must():
    """ℓ moves by at most 2⁻⁹ of itself (bfloat16), inside the tolerance one rounding of the output needs."""
    source = _edited([("ell = ell * alpha + tl.sum(p, axis=1)",
                       "p = p.to(v.dtype)\n            ell = ell * alpha + tl.sum(p, axis=1)")])
    verdict = evaluate_hidden(EXERCISE, _function(source), hidden_seed=HIDDEN_SEED)
    assert verdict.status == PASSED, verdict.message


# ----------------------------------------------------------------------------- bfloat16 in the interpreter


def _bf16_kernel():
    triton_setup.load()
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(A, B, OUT, WHAT: tl.constexpr):
        i = tl.arange(0, 16)
        a = tl.load(A + i[:, None] * 16 + i[None, :])
        b = tl.load(B + i[:, None] * 16 + i[None, :])
        if WHAT == 0:
            r = tl.dot(a, b)  # float32 out
        elif WHAT == 1:
            r = (a * b + a).to(tl.float32)
        elif WHAT == 2:
            r = (tl.sum(a, axis=1)[:, None] + tl.zeros((16, 16), tl.float32)).to(tl.float32)
        elif WHAT == 3:
            r = (tl.max(a, axis=1)[:, None] + tl.zeros((16, 16), tl.float32)).to(tl.float32)
        else:
            r = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee").to(tl.bfloat16).to(tl.float32)
        tl.store(OUT + i[:, None] * 16 + i[None, :], r)

    return kernel


@pytest.mark.skipif(not triton_setup.wants_interpreter(), reason="compiled kernels: no interpreter to fix")
def test_the_interpreter_computes_bfloat16_as_a_gpu_does():
    kernel = _bf16_kernel()
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=generator).bfloat16() for _ in range(2))
    A, B = a.float(), b.float()
    expected = {
        0: A.double() @ B.double(),  # exact products, float32 sums
        1: (a * b + a).float(),  # each operation rounded to bfloat16, as torch does
        2: A.sum(1, keepdim=True).bfloat16().float().expand(16, 16),
        3: A.amax(1, keepdim=True).expand(16, 16),  # negative numbers ordered as numbers, not bits
        4: (A @ B).bfloat16().float(),  # the cast rounds to the nearest
    }
    for what, want in expected.items():
        out = torch.empty(16, 16)
        kernel[(1,)](a, b, out, WHAT=what)
        tolerance = 1e-5 if what == 0 else 0.0
        assert torch.allclose(out.double(), want.double(), atol=tolerance, rtol=tolerance), (what, out, want)


def test_narrow_rounds_as_torch_does_and_widen_is_exact():
    from course_utils.triton_halves import narrow, widen

    generator = torch.Generator().manual_seed(1)
    x = torch.randn(20000, generator=generator) * torch.logspace(-38, 38, 20000)
    x = torch.cat([x, torch.tensor([float("inf"), float("-inf"), 3.3895e38, -0.0, 1e-45])])
    bits = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (narrow(x.numpy()) == bits).all()
    assert (widen(bits) == x.to(torch.bfloat16).float().numpy()).all()
    assert np.isnan(widen(narrow(np.array([float("nan")], dtype=np.float32)))).all()
