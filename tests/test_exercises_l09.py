"""Lesson 09's exercises beyond the generic tests (tests/test_exercises.py): the references agree with
PyTorch (torch.softmax, F.scaled_dot_product_attention, autograd's gradients); the package's own
Triton kernels (course_utils.flash_triton) give the references' numbers on every case, public and
hidden, through the check itself, and are forbidden; a learner who turns Triton's interpreter off
cannot pass on a CPU; the cases are plain data and hold what the module docstring promises.

Every check here runs Triton kernels through the interpreter: about 1 to 2 s an exercise on one
thread of this machine (measured), 20 s for the file."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from prepared import evaluate as evaluate_hidden  # the teacher's verdict, each Reference prepared once
from course_utils import triton_setup
from course_utils.exercises import FAILED, PASSED, evaluate
from cells import run_cell

# the references (and hidden cases) under test, as the registry holds them
_backward_reference = EXERCISES["09.backward_dkdv"].reference
_causal_reference = EXERCISES["09.causal_forward"].reference
_forward_reference = EXERCISES["09.flash_forward"].reference
_matmul_reference = EXERCISES["09.matmul_kernel"].reference
_softmax_reference = EXERCISES["09.softmax_kernel"].reference

flash_triton = pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

IDS = ("09.softmax_kernel", "09.matmul_kernel", "09.flash_forward", "09.causal_forward", "09.backward_dkdv")
#: The exercises the package has a kernel for (it has no matrix product of its own: tl.dot is one line).
PACKAGE_IDS = tuple(exercise for exercise in IDS if exercise != "09.matmul_kernel")
HIDDEN_SEED = 12345
F32 = {"atol": 1e-5, "rtol": 1e-4}


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


@pytest.mark.parametrize("exercise", IDS)
def test_no_tensor_of_a_case_is_all_zeros_or_all_minus_infinity_and_all_are_float32(exercise):
    for case in _cases(exercise):
        for arg in case:
            if isinstance(arg, torch.Tensor):
                assert (arg.isfinite() & (arg != 0)).any(), exercise
                assert arg.dtype == torch.float32, exercise  # the interpreter's NumPy has no bfloat16


# ----------------------------------------------------------------------------- the references are PyTorch's


def test_the_softmax_reference_is_torchs_and_the_cases_need_the_shift_and_the_padding():
    cases = _cases("09.softmax_kernel")
    for (x,) in cases:
        torch.testing.assert_close(_softmax_reference(x), torch.softmax(x, -1), **F32)
    assert any(x.amax() > 500 for (x,) in cases) and any(x.amax() < -500 for (x,) in cases)
    widths = [x.shape[-1] for (x,) in cases]
    assert any(n & (n - 1) for n in widths) and any(not n & (n - 1) for n in widths)  # ragged and not
    assert any(x.isinf().any() for (x,) in cases)


def test_the_matmul_reference_is_torchs_and_the_cases_are_ragged_on_every_side():
    cases = _cases("09.matmul_kernel")
    for a, b, block_m, block_n, block_k in cases:
        torch.testing.assert_close(_matmul_reference(a, b, block_m, block_n, block_k), a @ b, **F32)
        assert all(size >= 16 and not size & (size - 1) for size in (block_m, block_n, block_k))
    (M, K), N, block_m, block_n, block_k = cases[0][0].shape, cases[0][1].shape[1], *cases[0][2:]
    assert M % block_m and N % block_n and K % block_k and K > block_k  # the first case: ragged everywhere
    assert math.ceil(M / block_m) != math.ceil(N / block_n)  # a grid that is not square: swapped axes show
    assert any(a.shape[1] < 2 * bk for a, _, _, _, bk in cases) and any(a.shape[1] > 4 * bk for a, _, _, _, bk in cases)
    assert any(a.shape[0] == b.shape[1] == a.shape[1] == bm == bn == bk for a, b, bm, bn, bk in cases)  # one block


def test_the_product_operator_is_refused_in_the_matmul_exercise():
    verdict = evaluate("09.matmul_kernel", lambda a, b, block_m, block_n, block_k: a @ b)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


@pytest.mark.parametrize("exercise", ["09.flash_forward", "09.causal_forward"])
def test_the_forward_references_are_sdpa_and_logsumexp(exercise):
    causal = exercise == "09.causal_forward"
    reference = _causal_reference if causal else _forward_reference
    for q, k, v, block_q, block_k in _cases(exercise):
        output, lse, *loaded = reference(q, k, v, block_q, block_k)
        q, k, v = q.double(), k.double(), v.double()  # PyTorch's in float64: its float32 rounds the scores near −144
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
        torch.testing.assert_close(output, expected, **F32)
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1).float(), **F32)
        if causal:  # the blocks up to each query block's last query, and no more
            assert q.shape[1] == k.shape[1] and block_q % block_k == 0
            L = q.shape[1]
            expected = [math.ceil(min(s + block_q, L) / block_k) for s in range(0, L, block_q)]
            assert loaded[0].dtype == torch.int64 and loaded[0].tolist() == [expected] * q.shape[0]


def test_the_forward_cases_hold_ragged_blocks_and_scores_past_88():
    cases = _cases("09.flash_forward")
    assert any(k.shape[1] % block_k for _, k, _, _, block_k in cases)  # a ragged last key block
    assert any(q.shape[1] % block_q for q, _, _, block_q, _ in cases)
    assert any(q.shape[1] > k.shape[1] for q, k, *_ in cases) and any(q.shape[1] < k.shape[1] for q, k, *_ in cases)
    assert any((q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).amax() > 88 for q, k, *_ in cases)


def test_the_forward_cases_hold_rows_whose_scores_all_lie_far_below_minus_87_public_and_hidden():
    """Where exp(s − 0) underflows float32 to 0 (below about −103), a running max started at 0 gives 0 / 0."""
    spec = EXERCISES["09.flash_forward"]
    for cases in (_cases("09.flash_forward"), spec.hidden(torch.Generator().manual_seed(HIDDEN_SEED))):
        lowest = [(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).amax().item() for q, k, *_ in cases]
        assert any(top < -110 for top in lowest), lowest
        for q, k, v, block_q, block_k in cases:
            _, lse = _forward_reference(q, k, v, block_q, block_k)
            assert lse.isfinite().all()


def test_the_backward_reference_is_autograds_gradient_of_sdpa():
    for q, k, v, output, lse, d_output, block_q, block_k, causal in _cases("09.backward_dkdv"):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        expected = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        torch.testing.assert_close(output, expected.detach(), **F32)  # the case's output is the forward's
        _, d_key, d_value = torch.autograd.grad(expected, leaves, d_output)
        ours = _backward_reference(q, k, v, output, lse, d_output, block_q, block_k, causal)
        torch.testing.assert_close(ours[0], d_key, **F32)
        torch.testing.assert_close(ours[1], d_value, **F32)
    assert {case[-1] for case in _cases("09.backward_dkdv")} == {True, False}


# ----------------------------------------------------------------------------- the package's kernels


def _package_answers():
    def softmax_kernel(x):
        return flash_triton.softmax_rows(x)

    def forward(query, key, value, block_q, block_k):
        return flash_triton.flash_forward(query, key, value, block_q=block_q, block_k=block_k)

    def causal(query, key, value, block_q, block_k):
        output, lse = flash_triton.flash_forward(query, key, value, causal=True, block_q=block_q, block_k=block_k)
        L = query.shape[1]
        loaded = [math.ceil(min(s + block_q, L) / block_k) for s in range(0, L, block_q)]  # what the kernel loads
        return output, lse, torch.tensor([loaded] * query.shape[0], dtype=torch.int64)

    def dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal):
        _, d_key, d_value = flash_triton.flash_backward(query, key, value, output, lse, d_output, causal=causal,
                                                        block_q=block_q, block_k=block_k)
        return d_key, d_value

    return dict(zip(PACKAGE_IDS, (softmax_kernel, forward, causal, dkdv)))


@pytest.mark.slow  # (Triton's interpreter on every case: `make test` runs it, not `make quick`)
@pytest.mark.parametrize("exercise", PACKAGE_IDS)
def test_the_packages_kernels_give_the_references_numbers_and_are_forbidden(exercise):
    import dataclasses

    answer = _package_answers()[exercise]
    spec = EXERCISES[exercise]
    # the numbers only: under another id no name is forbidden, no function is a solver and no kernel rule applies
    # (course_utils/exercises/rules.py; this test's causal answer counts the blocks in Python)
    numbers = dataclasses.replace(spec, forbidden=(), id=f"{exercise}.numbers")
    verdict = evaluate_hidden(numbers, answer, hidden_seed=HIDDEN_SEED)
    assert verdict.status == PASSED, verdict.message
    verdict = evaluate(exercise, answer)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU a compiled kernel is a right answer")
def test_a_kernel_with_the_interpreter_switched_off_cannot_pass_on_a_cpu():
    triton_setup.load()
    import triton
    import triton.language as tl

    def softmax_rows(x):
        triton.knobs.runtime.interpret = False  # the learner's attempt: compiled, the check cannot run it
        try:
            @triton.jit
            def kernel(X, Y, n, BLOCK: tl.constexpr):
                columns = tl.arange(0, BLOCK)
                tl.store(Y + columns, tl.load(X + columns, mask=columns < n), mask=columns < n)
        finally:
            triton.knobs.runtime.interpret = True
        y = torch.empty_like(x)
        kernel[(1,)](x, y, x.numel(), BLOCK=64)
        return y

    verdict = evaluate("09.softmax_kernel", softmax_rows)
    assert verdict.status != PASSED, verdict.message
    assert triton_setup.interpreted()


# ----------------------------------------------------------------------------- kernels with the mistakes


def _solutions_source():
    """The lesson's solutions, as source: the exercise cells of lesson 09's source."""
    import jupytext

    from course_teacher import build

    cells = jupytext.read(build.lessons()["09"]).cells
    return "\n\n".join(cell.source for cell in cells if "exercise" in build.tags(cell))


def _namespace():
    namespace = {}
    exec("import math\nimport torch\nimport torch.nn.functional as F\nfrom course_utils.triton_setup import load\n"
         "load()\nimport triton\nimport triton.language as tl\n", namespace)  # what lesson 09's setup cell imports
    return namespace


#: (exercise, function, mistake, a line of the solution, what a learner with that mistake wrote instead)
BUGS = [
    ("09.softmax_kernel", "softmax_rows", "NO_MAX_SHIFT", "        x = x - tl.max(x, axis=0)\n", ""),
    ("09.softmax_kernel", "softmax_rows", "PADDING_AS_ZERO", 'mask=columns < n, other=float("-inf"))',
     "mask=columns < n, other=0.0)"),
    ("09.softmax_kernel", "softmax_rows", "SUM_NOT_SHIFTED", "e / tl.sum(e, axis=0)",
     'e / tl.sum(tl.exp(x + tl.max(tl.load(X + row * n + columns, mask=columns < n, other=float("-inf")), '
     'axis=0)), axis=0)'),
    ("09.matmul_kernel", "matmul", "LAST_INNER_BLOCK_MISSING", "for start in range(0, K, BLOCK_K):",
     "for start in range(0, K // BLOCK_K * BLOCK_K, BLOCK_K):"),
    ("09.matmul_kernel", "matmul", "ACCUMULATOR_RESET", "acc += tl.dot(a_block, b_block",
     "acc = tl.dot(a_block, b_block"),
    ("09.matmul_kernel", "matmul", "GRID_AXES_SWAPPED",
     "rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n        columns = tl.program_id(1) * BLOCK_N",
     "rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)\n        columns = tl.program_id(0) * BLOCK_N"),
    ("09.flash_forward", "flash_forward", "RESCALE_SUM_ONLY",
     "            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=\"ieee\")\n            m = m_new\n"
     "        tl.store(O + bh * L_q",
     "            acc = acc + tl.dot(p, v, input_precision=\"ieee\")\n            m = m_new\n        tl.store(O + bh * L_q"),
    ("09.flash_forward", "flash_forward", "RAGGED_KEYS_UNMASKED",
     '            s = tl.where(columns[None, :] < L_k, s, float("-inf"))\n', ""),
    ("09.flash_forward", "flash_forward", "LSE_WITHOUT_MAX", "tl.store(LSE + bh * L_q + rows, m + tl.log(ell)",
     "tl.store(LSE + bh * L_q + rows, tl.log(ell)"),
    ("09.flash_forward", "flash_forward", "LSE_NOT_WRITTEN",
     "        tl.store(LSE + bh * L_q + rows, m + tl.log(ell), mask=rows < L_q)\n", ""),
    ("09.flash_forward", "flash_forward", "NO_SCALE", "forward_kernel[grid](query, key, value, output, lse, L_q, L_k, d, "
     "d_v, 1 / math.sqrt(d),", "forward_kernel[grid](query, key, value, output, lse, L_q, L_k, d, d_v, 1.0,"),
    ("09.causal_forward", "causal_forward", "NO_BLOCK_SKIPPING", "end = tl.minimum(start_q + BLOCK_Q, L)", "end = L"),
    ("09.causal_forward", "causal_forward", "DIAGONAL_SKIPPED", "end = tl.minimum(start_q + BLOCK_Q, L)",
     "end = start_q"),
    ("09.causal_forward", "causal_forward", "DIAGONAL_UNMASKED",
     "s = tl.where((columns[None, :] <= rows[:, None]) & (columns[None, :] < L), s",
     "s = tl.where((columns[None, :] < L), s"),
    ("09.backward_dkdv", "backward_dkdv", "NO_D", "ds = p * (dp - delta[:, None])", "ds = p * dp"),
    ("09.backward_dkdv", "backward_dkdv", "D_WRONG_TENSORS", "delta = tl.sum(do * o, axis=1)",
     "delta = tl.sum(do * do, axis=1)"),
    ("09.backward_dkdv", "backward_dkdv", "DS_WITHOUT_P", "ds = p * (dp - delta[:, None])",
     "ds = dp - delta[:, None]"),
    ("09.backward_dkdv", "backward_dkdv", "DK_UNSCALED", "dk * scale,", "dk,"),
    ("09.backward_dkdv", "backward_dkdv", "CAUSAL_UNMASKED",
     "                keep = keep & (columns[None, :] <= rows[:, None])\n", "                pass\n"),
    # the mistakes issue 36 found caught but unnamed
    ("09.matmul_kernel", "matmul", "INNER_LOOP_ONE_SHORT", "for start in range(0, K, BLOCK_K):",
     "for start in range(0, K - BLOCK_K, BLOCK_K):"),
    ("09.matmul_kernel", "matmul", "GRID_ROUNDED_DOWN", "grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))",
     "grid = (M // block_m, N // block_n)"),
    ("09.flash_forward", "flash_forward", "M_FROM_ZERO", 'm = tl.full((BLOCK_Q,), float("-inf"), tl.float32)',
     "m = tl.zeros((BLOCK_Q,), tl.float32)"),
    ("09.flash_forward", "flash_forward", "SCALE_TWICE",
     's = tl.dot(q, tl.trans(k), input_precision="ieee") * scale\n            s = tl.where(columns[None, :] < L_k,',
     's = tl.dot(q, tl.trans(k), input_precision="ieee") * scale * scale\n'
     "            s = tl.where(columns[None, :] < L_k,"),
    ("09.flash_forward", "flash_forward", "SCALE_PADDED_D", "forward_kernel[grid](query, key, value, output, lse, L_q, "
     "L_k, d, d_v, 1 / math.sqrt(d),", "forward_kernel[grid](query, key, value, output, lse, L_q, L_k, d, d_v, "
     "1 / math.sqrt(max(16, triton.next_power_of_2(d))),"),
    ("09.flash_forward", "flash_forward", "KEY_MASK_PAST_END", 's = tl.where(columns[None, :] < L_k, s, float("-inf"))',
     's = tl.where(columns[None, :] <= L_k, s, float("-inf"))'),
    ("09.flash_forward", "flash_forward", "KEY_MASK_LAST_KEY_LOST",
     's = tl.where(columns[None, :] < L_k, s, float("-inf"))', 's = tl.where(columns[None, :] < L_k - 1, s, float("-inf"))'),
    ("09.flash_forward", "flash_forward", "LAST_KEY_BLOCK_MISSING", "for start_k in range(0, L_k, BLOCK_K):",
     "for start_k in range(0, L_k // BLOCK_K * BLOCK_K, BLOCK_K):"),
    ("09.flash_forward", "flash_forward", "KEY_LOOP_ONE_SHORT", "for start_k in range(0, L_k, BLOCK_K):",
     "for start_k in range(0, L_k - BLOCK_K, BLOCK_K):"),
    ("09.flash_forward", "flash_forward", "GRID_ROUNDED_DOWN", "grid = (triton.cdiv(L_q, block_q), BH)",
     "grid = (L_q // block_q, BH)"),
    ("09.causal_forward", "causal_forward", "DIAGONAL_EXCLUDED",
     "s = tl.where((columns[None, :] <= rows[:, None]) & (columns[None, :] < L), s",
     "s = tl.where((columns[None, :] < rows[:, None]) & (columns[None, :] < L), s"),
    ("09.causal_forward", "causal_forward", "COUNT_OFF_BY_ONE", "        loaded = 0\n", "        loaded = 1\n"),
    ("09.causal_forward", "causal_forward", "COUNT_NOT_CLIPPED", "end = tl.minimum(start_q + BLOCK_Q, L)",
     "end = start_q + BLOCK_Q"),
    ("09.causal_forward", "causal_forward", "CAUSAL_LOOP_ONE_SHORT", "for start_k in range(0, end, BLOCK_K):",
     "for start_k in range(0, end - BLOCK_K, BLOCK_K):"),
    ("09.backward_dkdv", "backward_dkdv", "D_FROM_D_OUTPUT", "delta = tl.sum(do * o, axis=1)",
     "delta = tl.sum(do, axis=1)"),
    ("09.backward_dkdv", "backward_dkdv", "DS_SIGN_FLIPPED", "ds = p * (dp - delta[:, None])",
     "ds = p * (delta[:, None] - dp)"),
    ("09.backward_dkdv", "backward_dkdv", "DIAGONAL_EXCLUDED",
     "                keep = keep & (columns[None, :] <= rows[:, None])\n",
     "                keep = keep & (columns[None, :] < rows[:, None])\n"),
    ("09.backward_dkdv", "backward_dkdv", "D_WRONG_AXIS", "delta = tl.sum(do * o, axis=1)",
     "delta = tl.sum(do * o, axis=0)"),
    ("09.backward_dkdv", "backward_dkdv", "QUERY_LOOP_ONE_SHORT", "for start_q in range(start, L_q, BLOCK_Q):",
     "for start_q in range(start, L_q - BLOCK_Q, BLOCK_Q):"),
]


#: Kernels with a mistake the check catches without naming it: (exercise, function, right, wrong)
UNNAMED = [
    ("09.flash_forward", "flash_forward",  # float16 P: a GPU's speed-up, outside float32's tolerance
     '            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")\n            m = m_new\n'
     "        tl.store(O + bh * L_q",
     "            acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v.to(tl.float16))\n            m = m_new\n"
     "        tl.store(O + bh * L_q"),
    ("09.backward_dkdv", "backward_dkdv", 'p = tl.exp(tl.dot(q, tl.trans(k), input_precision="ieee") * scale - lse[:, None])',
     'p = tl.exp(tl.dot(q, tl.trans(k), input_precision="ieee") - lse[:, None])'),  # P from unscaled scores
]


def test_seven_in_ten_of_the_caught_kernel_mistakes_are_named():
    assert len(BUGS) >= 0.7 * (len(BUGS) + len(UNNAMED)) and len(BUGS) >= 30


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("exercise, function, right, wrong", UNNAMED, ids=[u[0] for u in UNNAMED])
def test_a_kernel_whose_mistake_has_no_name_fails_without_a_false_name(exercise, function, right, wrong):
    source = _solutions_source()
    assert source.count(right) >= 1, f"the solution no longer holds {right!r}"
    namespace = _namespace()
    run_cell(source.replace(right, wrong, 1), namespace)
    verdict = evaluate_hidden(exercise, namespace[function])
    assert verdict.status == FAILED and verdict.code is None, verdict.message


@pytest.mark.slow  # (37 kernels, each checked on the public cases: about a minute interpreted on 2 cores)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflows the mistakes are about
@pytest.mark.parametrize("exercise, function, code, right, wrong", BUGS, ids=[b[2] for b in BUGS])
def test_a_triton_kernel_with_each_known_mistake_is_named(exercise, function, code, right, wrong):
    """The mistakes are emulated in torch; a real kernel with the bug must give the same numbers, on
    every public case (the first shows each mistake; the hidden ones are the same shapes, other
    numbers: left out to keep the file within its time)."""
    source = _solutions_source()
    assert source.count(right) >= 1, f"the solution no longer holds {right!r}"
    namespace = _namespace()
    run_cell(source.replace(right, wrong, 1), namespace)
    verdict = evaluate_hidden(exercise, namespace[function])
    assert verdict.status == FAILED and verdict.code == code, verdict.message
