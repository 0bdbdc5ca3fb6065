"""Lesson 08's exercises beyond the generic tests (tests/test_exercises.py): the references agree with
course_utils.tiled and with PyTorch (F.scaled_dot_product_attention, torch.logsumexp; values and
gradients); other right ways to write each function pass (so the check does not demand the
reference's own route); the package's answers are forbidden; the cases are plain data and hold what
the module docstring promises."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from course_utils import tiled
from course_utils.exercises import FAILED, PASSED, evaluate

# the references (and hidden cases) under test, as the registry holds them
_backward_hidden = EXERCISES["08.tiled_backward"].hidden
_backward_reference = EXERCISES["08.tiled_backward"].reference
_causal_reference = EXERCISES["08.causal_tiles"].reference
_merge_reference = EXERCISES["08.merge_states"].reference
_tiled_reference = EXERCISES["08.tiled_forward"].reference

IDS = ("08.merge_states", "08.tiled_forward", "08.causal_tiles", "08.tiled_backward")


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


def _tolerance(t):
    return {"atol": 1e-12, "rtol": 1e-12} if t.dtype == torch.float64 else {"atol": 1e-5, "rtol": 1e-5}


@pytest.mark.parametrize("exercise", IDS)
def test_no_tensor_of_a_case_is_all_zeros_or_all_minus_infinity(exercise):
    for case in _cases(exercise):
        for arg in case:
            if isinstance(arg, torch.Tensor):
                assert (arg.isfinite() & (arg != 0)).any(), exercise


# ----------------------------------------------------------------------------- 08.merge_states


def test_the_merge_reference_is_the_packages_merge_and_the_softmax_of_both_pieces():
    for case in _cases("08.merge_states"):
        m1, ell1, acc1, m2, ell2, acc2 = case
        ours = _merge_reference(*case)
        package = tiled.merge_states(tiled.SoftmaxState(m1, ell1, acc1), tiled.SoftmaxState(m2, ell2, acc2))
        for a, b in zip(ours, package):
            torch.testing.assert_close(a, b, **_tolerance(a), equal_nan=False)
        assert not any(t.isnan().any() for t in ours)


def test_merged_states_of_real_pieces_give_the_softmax_of_the_whole_row():
    """The exercise's statement, from scores: the states of the two halves of a row, merged, give
    softmax(row) @ v and log Σ exp(row) (float64; a half fully masked in some rows)."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 5, 8, generator=g, dtype=torch.float64) * 3
    scores[0, 1, :4] = float("-inf")
    scores[2, 3, 4:] = float("-inf")
    values = torch.randn(3, 5, 8, 2, generator=g, dtype=torch.float64)
    a = tiled.piece_state(scores[..., :4], values[..., :4, :])
    b = tiled.piece_state(scores[..., 4:], values[..., 4:, :])
    m, ell, acc = _merge_reference(*a, *b)
    expected = (torch.softmax(scores, -1)[..., None, :] @ values).squeeze(-2)
    torch.testing.assert_close(acc / ell[..., None], expected, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(m + ell.log(), torch.logsumexp(scores, -1), atol=1e-12, rtol=1e-12)


def _merge_with_max_and_stack(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.stack((m1, m2)).max(dim=0).values
    shift = m.nan_to_num(neginf=0.0)
    scale1, scale2 = (m1 - shift).exp(), (m2 - shift).exp()
    return m, ell1 * scale1 + ell2 * scale2, acc1 * scale1.unsqueeze(-1) + acc2 * scale2.unsqueeze(-1)


def _merge_through_logs(m1, ell1, acc1, m2, ell2, acc2):
    """Through the log-sum-exp of each piece; an empty piece weighs 0."""
    m = torch.maximum(m1, m2)
    lse1, lse2 = m1 + ell1.log(), m2 + ell2.log()  # −∞ for an empty piece
    finite = torch.where(m.isinf(), 0.0, m)
    w1, w2 = torch.exp(lse1 - finite), torch.exp(lse2 - finite)  # ell_i · exp(m_i − m)
    f1 = torch.where(ell1 > 0, w1 / ell1.clamp_min(1e-300), 0.0)
    f2 = torch.where(ell2 > 0, w2 / ell2.clamp_min(1e-300), 0.0)
    return m, w1 + w2, acc1 * f1[..., None] + acc2 * f2[..., None]


@pytest.mark.parametrize("function", [_merge_with_max_and_stack, _merge_through_logs], ids=lambda f: f.__name__)
def test_other_right_merges_pass(function):
    verdict = evaluate("08.merge_states", function)
    assert verdict.status == PASSED, verdict.message


def test_the_merge_cases_hold_every_edge():
    cases = _cases("08.merge_states")
    shapes = [(c[2].shape, c[0].dtype) for c in cases]
    assert any(s[0] == 1 for s, _ in shapes) and any(s[1] == 1 for s, _ in shapes) and any(s[2] == 1 for s, _ in shapes)
    assert any(dtype == torch.float64 for _, dtype in shapes)
    m1s, m2s = [c[0] for c in cases], [c[3] for c in cases]
    assert any(((a == float("-inf")) & (b > float("-inf"))).any() for a, b in zip(m1s, m2s))  # first piece empty
    assert any(((b == float("-inf")) & (a > float("-inf"))).any() for a, b in zip(m1s, m2s))  # second piece empty
    assert any(((a == float("-inf")) & (b == float("-inf"))).any() for a, b in zip(m1s, m2s))  # both
    assert any(((a == b) & a.isfinite()).any() for a, b in zip(m1s, m2s))  # equal maxima
    assert any(a.abs().amax() > 200 for a in m1s)  # exp(m) overflows float32
    first = cases[0]
    assert (first[0] > first[3]).any() and (first[3] > first[0]).any() and first[0].isfinite().all()
    for m, ell, acc in ((c[0], c[1], c[2]) for c in cases):  # real states: ell ≥ 1 where something was seen
        assert ((ell >= 1) | (m == float("-inf"))).all() and (acc[m == float("-inf")] == 0).all()


def test_calling_the_packages_merge_fails_as_forbidden():
    def borrowed(m1, ell1, acc1, m2, ell2, acc2):
        return tuple(tiled.merge_states(tiled.SoftmaxState(m1, ell1, acc1), tiled.SoftmaxState(m2, ell2, acc2)))

    verdict = evaluate("08.merge_states", borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


# ----------------------------------------------------------------------------- 08.tiled_forward and 08.causal_tiles


@pytest.mark.parametrize("exercise", ["08.tiled_forward", "08.causal_tiles"])
def test_the_tiled_references_are_pytorchs_attention_values_lse_and_gradients(exercise):
    causal = exercise == "08.causal_tiles"
    reference = _causal_reference if causal else _tiled_reference
    for number, case in enumerate(_cases(exercise)):
        q, k, v, block_q, block_k = case
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        output, lse, *count = reference(*leaves, block_q, block_k)
        theirs = [t.clone().requires_grad_() for t in (q, k, v)]
        expected = F.scaled_dot_product_attention(*theirs, is_causal=causal)
        scores = theirs[0] @ theirs[1].transpose(1, 2) / math.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        expected_lse = torch.logsumexp(scores, -1)
        tolerance = _tolerance(q) if q.dtype == torch.float64 else {"atol": 1e-5, "rtol": 1e-4}
        torch.testing.assert_close(output, expected, **tolerance)
        torch.testing.assert_close(lse, expected_lse, **tolerance)
        package = tiled.tiled_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
        torch.testing.assert_close(output, package[0], **tolerance)
        torch.testing.assert_close(lse, package[1], **tolerance)
        if causal:
            kinds = tiled.tile_kinds(q.shape[1], k.shape[1], block_q, block_k, causal=True)
            assert count == [int((kinds != tiled.SKIP).sum())]
        g = torch.Generator().manual_seed(number)
        w, w_lse = torch.randn(output.shape, generator=g, dtype=q.dtype), torch.randn(lse.shape, generator=g,
                                                                                        dtype=q.dtype)
        ours = torch.autograd.grad((output * w).sum() + (lse * w_lse).sum(), leaves)
        want = torch.autograd.grad((expected * w).sum() + (expected_lse * w_lse).sum(), theirs)
        for a, b in zip(ours, want):
            torch.testing.assert_close(a, b, **tolerance)


def _tiled_from_states(query, key, value, block_q, block_k, causal=False):
    """Key blocks outer, query blocks inner, a state per query block kept in lists (the other loop
    order), the max not detached, masks from a full causal pattern sliced per tile."""
    B, L_q, d = query.shape
    L_k = key.shape[1]
    starts = list(range(0, L_q, block_q))
    m = [torch.full((B, min(block_q, L_q - s)), -math.inf, dtype=query.dtype) for s in starts]
    ell = [torch.zeros_like(x) for x in m]
    acc = [torch.zeros(*x.shape, value.shape[-1], dtype=query.dtype) for x in m]
    tiles = 0
    for j0 in range(0, L_k, block_k):
        for n, i0 in enumerate(starts):
            i1 = i0 + m[n].shape[1]
            if causal and j0 > i1 - 1:
                continue
            tiles += 1
            s = torch.einsum("bqd,bkd->bqk", query[:, i0:i1], key[:, j0:j0 + block_k]) / math.sqrt(d)
            if causal:
                q_pos = torch.arange(i0, i1)[:, None]
                k_pos = torch.arange(j0, min(j0 + block_k, L_k))[None, :]
                s = torch.where(k_pos <= q_pos, s, -math.inf)
            new = torch.maximum(m[n], s.max(-1).values)
            shift = torch.where(torch.isinf(new), torch.zeros_like(new), new)
            p = (s - shift[..., None]).exp()
            factor = (m[n] - shift).exp()
            ell[n] = ell[n] * factor + p.sum(-1)
            acc[n] = acc[n] * factor[..., None] + torch.einsum("bqk,bkv->bqv", p, value[:, j0:j0 + block_k])
            m[n] = new
    output = torch.cat([a / e[..., None] for a, e in zip(acc, ell)], dim=1)
    lse = torch.cat([x + e.log() for x, e in zip(m, ell)], dim=1)
    return (output, lse, tiles) if causal else (output, lse)


def test_another_right_tiled_forward_passes():
    verdict = evaluate("08.tiled_forward", _tiled_from_states)
    assert verdict.status == PASSED, verdict.message


def test_another_right_causal_forward_passes():
    verdict = evaluate("08.causal_tiles", lambda q, k, v, bq, bk: _tiled_from_states(q, k, v, bq, bk, causal=True))
    assert verdict.status == PASSED, verdict.message


@pytest.mark.parametrize("exercise", ["08.tiled_forward", "08.causal_tiles"])
def test_borrowing_the_packages_tiled_attention_fails_as_forbidden(exercise):
    causal = exercise == "08.causal_tiles"

    def borrowed(q, k, v, block_q, block_k):
        output, lse = tiled.tiled_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
        if not causal:
            return output, lse
        n_q, n_k = -(-q.shape[1] // block_q), -(-k.shape[1] // block_k)
        return output, lse, sum(1 for i in range(n_q) for j in range(n_k) if j * block_k <= (i + 1) * block_q - 1)

    verdict = evaluate(exercise, borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_tiled_cases_vary_every_argument_on_its_own():
    cases = _cases("08.tiled_forward")
    assert any(c[0].shape[1] % c[3] for c in cases) and any(c[1].shape[1] % c[4] for c in cases)
    assert any(c[0].shape[1] % c[3] == 0 and c[1].shape[1] % c[4] for c in cases)  # only the key tail
    assert any(c[3] == 1 for c in cases) and any(c[4] == 1 for c in cases)
    assert any(c[3] >= c[0].shape[1] and c[4] >= c[1].shape[1] for c in cases)  # one tile
    assert any(c[0].shape[1] > c[1].shape[1] for c in cases) and any(c[0].shape[1] < c[1].shape[1] for c in cases)
    assert any(c[2].shape[-1] != c[0].shape[-1] for c in cases) and any(c[0].dtype == torch.float64 for c in cases)
    first = cases[0]
    assert first[0].shape[1] % first[3] and first[1].shape[1] % first[4] and first[1].shape[1] > 2 * first[4]
    scores = [(c[0] @ c[1].transpose(1, 2) / c[0].shape[-1] ** 0.5).amax() for c in cases if c[0].dtype == torch.float32]
    assert max(scores) > 89  # exp(score) overflows float32: summing exp(s) without the running max gives inf
    # a row whose every score is below −104: a running max that starts at 0 gives 0 / 0 there (MAX_STARTS_AT_ZERO)
    rows = [(c[0] @ c[1].transpose(1, 2) / c[0].shape[-1] ** 0.5).amax(-1) for c in cases if c[0].dtype == torch.float32]
    assert any((r < -130).any() and (r > -10).any() for r in rows)


def test_the_causal_cases_vary_every_argument_on_its_own():
    cases = _cases("08.causal_tiles")
    assert all(c[0].shape[1] == c[1].shape[1] for c in cases)
    assert any(c[3] > c[4] for c in cases) and any(c[3] < c[4] for c in cases) and any(c[3] == c[4] for c in cases)
    assert any(c[3] == 1 for c in cases) and any(c[4] == 1 for c in cases)
    assert any(c[0].dtype == torch.float64 for c in cases)
    first = cases[0]
    assert first[3] > first[4]  # block numbers and positions disagree: every mistake shows


# ----------------------------------------------------------------------------- 08.tiled_backward


def _sdpa_gradients(case):
    """PyTorch's gradients for query, key and value on a backward case, in float64."""
    q, k, v, _output, _lse, d_output, _bq, _bk, causal = case
    leaves = [t.double().clone().requires_grad_() for t in (q, k, v)]
    output = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    return output, torch.autograd.grad(output, leaves, d_output.double())


@pytest.mark.parametrize("draw", ["public", "hidden"])
def test_the_backward_reference_is_pytorchs_gradients_and_the_packages(draw):
    """Every case, public and hidden: the reference's d_query, d_key, d_value are
    F.scaled_dot_product_attention's gradients (compared in float64: to 1e-12 on the float64 cases, to
    float32's rounding on the others), the package's tiled_backward's, and its count is tile_kinds'."""
    cases = _cases("08.tiled_backward") if draw == "public" else _backward_hidden(torch.Generator().manual_seed(4))
    for case in cases:
        q, k, v, output, lse, d_output, block_q, block_k, causal = case
        expected_output, expected = _sdpa_gradients(case)
        *ours, tiles = _reference_backward(case)
        tolerance = {"atol": 1e-12, "rtol": 1e-12} if q.dtype == torch.float64 else {"atol": 2e-5, "rtol": 1e-4}
        torch.testing.assert_close(output.double(), expected_output, **tolerance)
        for a, b in zip(ours, expected):
            assert a.dtype == q.dtype
            torch.testing.assert_close(a.double(), b, **tolerance)
        package = tiled.tiled_backward(q, k, v, output, lse, d_output, block_q=block_q, block_k=block_k, causal=causal)
        for a, b in zip(ours, package):
            torch.testing.assert_close(a, b, **_tolerance(a))
        kinds = tiled.tile_kinds(q.shape[1], k.shape[1], block_q, block_k, causal=causal)
        assert type(tiles) is int and tiles == int((kinds != tiled.SKIP).sum())


def _reference_backward(case):
    return _backward_reference(*case)


def test_flash_attentions_gradients_are_pytorchs_causal_and_not_with_odd_lengths():
    """The package's torch.autograd.Function, float64: causal and not, lengths no block divides."""
    g = torch.Generator().manual_seed(0)
    for L_q, L_k, block_q, block_k, causal in ((13, 13, 4, 3, True), (11, 17, 3, 5, False), (9, 9, 16, 2, True)):
        q = torch.randn(2, L_q, 6, generator=g, dtype=torch.float64, requires_grad=True)
        k, v = (torch.randn(2, L_k, 6, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
        w = torch.randn(2, L_q, 6, generator=g, dtype=torch.float64)
        ours = torch.autograd.grad((tiled.flash_attention(q, k, v, block_q=block_q, block_k=block_k,
                                                          causal=causal)[0] * w).sum(), (q, k, v))
        theirs = torch.autograd.grad((F.scaled_dot_product_attention(q, k, v, is_causal=causal) * w).sum(), (q, k, v))
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


def _backward_query_blocks_outside(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """Query blocks outside (FlashAttention-1's backward order), dK and dV written into slices, masks from
    torch.where, the scale folded into the keys."""
    B, L_q, d = query.shape
    L_k = key.shape[1]
    k_scaled = key / math.sqrt(d)
    D = (output * d_output).sum(-1, keepdim=True)
    dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    tiles = 0
    for i0 in range(0, L_q, block_q):
        i1 = min(L_q, i0 + block_q)
        for j0 in range(0, L_k, block_k):
            j1 = min(L_k, j0 + block_k)
            if causal and j0 >= i1:
                break
            tiles += 1
            s = query[:, i0:i1] @ k_scaled[:, j0:j1].transpose(1, 2)
            if causal:
                s = torch.where(torch.arange(j0, j1) <= torch.arange(i0, i1)[:, None], s, -math.inf)
            p = (s - lse[:, i0:i1].unsqueeze(-1)).exp()
            dp = d_output[:, i0:i1] @ value[:, j0:j1].transpose(1, 2)
            ds = p * (dp - D[:, i0:i1])
            dv[:, j0:j1] += p.transpose(1, 2) @ d_output[:, i0:i1]
            dq[:, i0:i1] += ds @ k_scaled[:, j0:j1]
            dk[:, j0:j1] += ds.transpose(1, 2) @ query[:, i0:i1] / math.sqrt(d)
    return dq, dk, dv, tiles


def _backward_two_loops(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """The Triton tutorial's split: one loop for dK and dV, another for dQ, P recomputed in each; einsum."""
    d = query.shape[-1]
    L_q, L_k = query.shape[1], key.shape[1]
    D = torch.einsum("bqc,bqc->bq", d_output, output)

    def weights(i0, i1, j0, j1):
        s = torch.einsum("bqd,bkd->bqk", query[:, i0:i1], key[:, j0:j1]) * d ** -0.5
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None] > torch.arange(i0, i1)[:, None], float("-inf"))
        return torch.exp(s - lse[:, i0:i1, None])

    visible = [(i0, j0) for j0 in range(0, L_k, block_k) for i0 in range(0, L_q, block_q)
               if not causal or j0 <= min(i0 + block_q, L_q) - 1]
    dk, dv = [], []
    for j0 in range(0, L_k, block_k):
        j1 = min(j0 + block_k, L_k)
        dk_j = torch.zeros_like(key[:, j0:j1])
        dv_j = torch.zeros_like(value[:, j0:j1])
        for i0 in (i for i, j in visible if j == j0):
            i1 = min(i0 + block_q, L_q)
            p = weights(i0, i1, j0, j1)
            dv_j = dv_j + torch.einsum("bqk,bqc->bkc", p, d_output[:, i0:i1])
            ds = p * (torch.einsum("bqc,bkc->bqk", d_output[:, i0:i1], value[:, j0:j1]) - D[:, i0:i1, None])
            dk_j = dk_j + torch.einsum("bqk,bqd->bkd", ds, query[:, i0:i1]) * d ** -0.5
        dk.append(dk_j)
        dv.append(dv_j)
    dq = []
    for i0 in range(0, L_q, block_q):
        i1 = min(i0 + block_q, L_q)
        dq_i = torch.zeros_like(query[:, i0:i1])
        for j0 in (j for i, j in visible if i == i0):
            j1 = min(j0 + block_k, L_k)
            p = weights(i0, i1, j0, j1)
            ds = p * (torch.einsum("bqc,bkc->bqk", d_output[:, i0:i1], value[:, j0:j1]) - D[:, i0:i1, None])
            dq_i = dq_i + torch.einsum("bqk,bkd->bqd", ds, key[:, j0:j1]) * d ** -0.5
        dq.append(dq_i)
    return torch.cat(dq, 1), torch.cat(dk, 1), torch.cat(dv, 1), len(visible)


@pytest.mark.parametrize("function", [_backward_query_blocks_outside, _backward_two_loops], ids=lambda f: f.__name__)
def test_other_right_backwards_pass_public_and_hidden(function):
    assert evaluate("08.tiled_backward", function).status == PASSED
    from course_teacher.exercises import evaluate as grade

    verdict = grade("08.tiled_backward", function, hidden_seed=3)
    assert verdict.status == PASSED, verdict.message


def test_borrowing_the_packages_backward_or_autograd_fails_as_forbidden():
    def borrowed(query, key, value, output, lse, d_output, block_q, block_k, causal):
        grads = tiled.tiled_backward(query, key, value, output, lse, d_output, block_q=block_q, block_k=block_k,
                                     causal=causal)
        kinds = tiled.tile_kinds(query.shape[1], key.shape[1], block_q, block_k, causal=causal)
        return (*grads, int((kinds != tiled.SKIP).sum()))

    def through_autograd(query, key, value, output, lse, d_output, block_q, block_k, causal):
        leaves = [t.detach().requires_grad_() for t in (query, key, value)]
        out = _tiled_from_states(*leaves, block_q, block_k, causal=causal)[0]
        *_, tiles = _backward_query_blocks_outside(query, key, value, output, lse, d_output, block_q, block_k, causal)
        return (*torch.autograd.grad(out, leaves, d_output), tiles)

    def through_backward(query, key, value, output, lse, d_output, block_q, block_k, causal):
        leaves = [t.detach().requires_grad_() for t in (query, key, value)]
        out = _tiled_from_states(*leaves, block_q, block_k, causal=causal)[0]
        out.backward(d_output)
        *_, tiles = _backward_query_blocks_outside(query, key, value, output, lse, d_output, block_q, block_k, causal)
        return (*(t.grad for t in leaves), tiles)

    for function in (borrowed, through_autograd, through_backward):
        verdict = evaluate("08.tiled_backward", function)
        assert verdict.status == FAILED and verdict.code == "FORBIDDEN", (function.__name__, verdict.message)


def test_the_backward_cases_vary_every_argument_and_the_hidden_ones_their_shapes():
    cases = _cases("08.tiled_backward")
    assert any(c[8] for c in cases) and any(not c[8] for c in cases)
    assert all(c[0].shape[1] == c[1].shape[1] for c in cases if c[8])  # causal: L_q = L_k
    assert any(c[6] > c[7] for c in cases if c[8]) and any(c[6] < c[7] for c in cases if c[8])
    assert any(c[0].shape[1] > c[1].shape[1] for c in cases) and any(c[0].shape[1] < c[1].shape[1] for c in cases)
    assert any(c[0].shape[1] % c[6] and c[1].shape[1] % c[7] for c in cases)  # tails on both sides
    assert any(c[6] == c[7] == 1 for c in cases) and any(c[6] >= c[0].shape[1] and c[7] >= c[1].shape[1] for c in cases)
    assert any(c[2].shape[-1] != c[0].shape[-1] for c in cases) and any(c[0].dtype == torch.float64 for c in cases)
    assert any(c[0].shape[1] * c[1].shape[1] > 2 * max(c[0].numel(), c[1].numel(), c[2].numel()) for c in cases)
    first = cases[0]  # causal with square tiles only: every mistake runs on it (P @ dO needs b_q = b_k)
    assert first[8] and first[6] == first[7] and first[0].shape[1] % first[6] == 0 and first[0].shape[1] > first[6]
    public = {(tuple(c[0].shape), tuple(c[1].shape), tuple(c[2].shape), c[6], c[7], c[8]) for c in cases}
    hidden = [(tuple(c[0].shape), tuple(c[1].shape), tuple(c[2].shape), c[6], c[7], c[8])
              for c in _backward_hidden(torch.Generator().manual_seed(1))]
    assert hidden and not public & set(hidden)  # other shapes, not only other values
    for case in cases:  # output and lse are the forward's on the case's inputs
        q, k, v, output, lse = case[:5]
        torch.testing.assert_close(output, tiled.tiled_attention(q, k, v, causal=case[8])[0], **_tolerance(q))
        torch.testing.assert_close(lse, tiled.tiled_attention(q, k, v, causal=case[8])[1], **_tolerance(q))


def _queries_outside(query, key, value, output, lse, d_output, block_q, block_k, causal, *, slip=None):
    """A backward with the query blocks outside and the key blocks inside (the other order from the catalogue's
    functions), P zeroed at the hidden entries after exp, with one learner's slip switched on by `slip`."""
    B, L_q, d = query.shape
    L_k = key.shape[1]
    scale = d ** -0.5
    D = {"d_from_d_output": lambda: d_output.sum(-1),
         "d_over_batch": lambda: (d_output * output).sum((0, 2))[None].expand(B, -1)}.get(
        slip, lambda: (d_output * output).sum(-1))()
    zeros = (lambda t: torch.zeros(t.shape)) if slip == "float32" else torch.zeros_like
    dq, dk, dv = zeros(query), zeros(key), zeros(value)
    tiles = 1 if slip == "count_from_one" else 0
    query_end = L_q // block_q * block_q if slip == "query_tail" else L_q
    for i0 in range(0, query_end, block_q):
        i1 = min(i0 + block_q, L_q)
        for j0 in range(0, L_k, block_k):
            j1 = min(j0 + block_k, L_k)
            if causal and (j0 > i0 if slip == "skip_by_first_query" else j0 >= i1):
                continue
            tiles += 1
            s = query[:, i0:i1] @ key[:, j0:j1].mT * scale
            if slip == "tile_max":
                p = torch.exp(s - s.amax(-1, keepdim=True))
            elif slip == "lse_key_rows":
                p = torch.exp(s - lse[:, j0:j1].unsqueeze(-1))
            elif slip == "lse_along_keys":
                p = torch.exp(s - lse[:, i0:i1].unsqueeze(1))
            else:
                p = torch.exp(s - lse[:, i0:i1, None])
            if causal:
                rows, cols = torch.arange(i0, i1)[:, None], torch.arange(j0, j1)[None, :]
                if slip == "local":
                    rows, cols = rows - i0, cols - j0
                hidden = cols >= rows if slip == "strict" else cols > rows
                if slip != "same_index" or j0 // block_k == i0 // block_q:
                    p = p.masked_fill(hidden, 0.0)
            dp = d_output[:, i0:i1] @ value[:, j0:j1].mT
            ds = p * (dp - D[:, i0:i1, None])
            dv[:, j0:j1] += p.mT @ d_output[:, i0:i1]
            dq[:, i0:i1] += ds @ key[:, j0:j1] * scale * (scale if slip in ("dq_twice", "both_twice") else 1.0)
            dk[:, j0:j1] += ds.mT @ query[:, i0:i1] * scale * (scale if slip == "both_twice" else 1.0)
    return dq, dk, dv, tiles


#: each slip a learner makes in the backward, and the mistake its verdict names
SLIPS = {"d_from_d_output": "D_FROM_D_OUTPUT", "d_over_batch": "D_OVER_BATCH", "tile_max": "P_TILE_MAX_UNMASKED",
         "dq_twice": "DQ_SCALED_TWICE", "both_twice": "GRAD_SCALED_TWICE", "strict": "CAUSAL_HIDES_ITSELF",
         "skip_by_first_query": "SKIP_BY_FIRST_QUERY", "local": "LOCAL_MASK_EVERY_TILE",
         "same_index": "MASK_BY_BLOCK_INDEX", "query_tail": "QUERY_TAIL_DROPPED", "count_from_one": "TILES_OFF_BY_ONE",
         "float32": "GRADIENTS_FLOAT32", "lse_key_rows": "LSE_OF_KEY_ROWS", "lse_along_keys": "LSE_ALONG_KEYS"}


def test_the_other_loop_order_without_a_slip_passes():
    assert evaluate("08.tiled_backward", _queries_outside).status == PASSED


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_in_the_other_loop_order_is_named(slip):
    """The catalogue names a mistake by what it does, not by the loop it was written in."""
    verdict = evaluate("08.tiled_backward", lambda *case: _queries_outside(*case, slip=slip))
    assert verdict.status == FAILED and verdict.code == SLIPS[slip], (verdict.code, verdict.message)
