"""Lesson 04's exercises against answers written the way learners write them.

tests/test_exercises.py proves, for every exercise, that each known mistake (the teacher's own
function) is named. Here the wrong answers are written independently, in the forms learners use
(einsum instead of matmul, positive axis numbers, a loop over heads, a zeros buffer), so that a
mistake is named because of what it computes, not because of how our function spells it; and the
answers that no named mistake covers are at least caught (failed, with the largest difference or
the dtype). Last, the in-place edits learners make: the check gives every call copies of the case,
so such an answer returns the right values and only the check engine's generic INPUT_MODIFIED
verdict (grading.changed_arguments) can catch it; the tests below prove that the public cases make
each of these edits visible (the inputs' values change) and that the check names them.
"""

import math

import pytest
import torch

from course_teacher.exercises import EXERCISES
from course_utils import evaluate
from course_utils.exercises import FAILED, PASSED
from course_utils.exercises.grading import copies

# ----------------------------------------------------------------------------- 04.fused_forward


def _heads(t, H):  # (B, L, H·d) -> (B, H, L, d)
    B, L, width = t.shape
    return t.reshape(B, L, H, width // H).permute(0, 2, 1, 3)


def _fused(query, key, value, w_q, w_k, w_v, w_o, H, scale=None, dim=-1, merge="right", out_proj=True,
           order="right"):
    q, k, v = _heads(query @ w_q, H), _heads(key @ w_k, H), _heads(value @ w_v, H)
    d_k = q.shape[-1]
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (math.sqrt(d_k) if scale is None else scale(q, v))
    weights = torch.softmax(scores, dim=dim)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, v)  # (B, H, L_q, d_v)
    B, _, L_q, _ = out.shape
    merged = out.permute(0, 2, 1, 3).reshape(B, L_q, -1) if merge == "right" else out.permute(0, 2, 3, 1).reshape(B, L_q, -1)
    output = merged @ w_o if out_proj else merged
    return (output, weights) if order == "right" else (weights, output)


FUSED_ANSWERS = {
    None: lambda *a: _fused(*a),
    "NO_SCALE": lambda *a: _fused(*a, scale=lambda q, v: 1.0),
    "SCALE_BY_D_K": lambda *a: _fused(*a, scale=lambda q, v: q.shape[-1]),
    "SCALE_BY_D_V": lambda *a: _fused(*a, scale=lambda q, v: v.shape[-1] ** 0.5),
    "SCALE_BY_E": lambda *a: _fused(*a, scale=lambda q, v: (q.shape[1] * q.shape[-1]) ** 0.5),
    "SOFTMAX_DIM": lambda *a: _fused(*a, dim=2),  # a positive axis number: the queries
    "SOFTMAX_OVER_HEADS": lambda *a: _fused(*a, dim=1),
    "MERGE_INTERLEAVED": lambda *a: _fused(*a, merge="interleaved"),
    "NO_OUT_PROJ": lambda *a: _fused(*a, out_proj=False),
    "SWAPPED_RETURN": lambda *a: _fused(*a, order="swapped"),
}


@pytest.mark.parametrize("code", list(FUSED_ANSWERS), ids=[str(code) for code in FUSED_ANSWERS])
def test_fused_forward_answers_written_another_way_are_named(code):
    verdict = evaluate("04.fused_forward", FUSED_ANSWERS[code])
    if code is None:
        assert verdict.status == PASSED, verdict.message
    else:
        assert verdict.status == FAILED and verdict.code == code, verdict.message


def test_a_fused_forward_that_loops_over_the_heads_passes():
    def looped(query, key, value, w_q, w_k, w_v, w_o, num_heads):
        q, k, v = query @ w_q, key @ w_k, value @ w_v
        d_k, d_v = q.shape[-1] // num_heads, v.shape[-1] // num_heads
        outputs, weights = [], []
        for h in range(num_heads):
            qh, kh, vh = q[..., h * d_k:(h + 1) * d_k], k[..., h * d_k:(h + 1) * d_k], v[..., h * d_v:(h + 1) * d_v]
            w = torch.softmax(qh @ kh.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
            outputs.append(w @ vh)
            weights.append(w)
        return torch.cat(outputs, dim=-1) @ w_o, torch.stack(weights, dim=1)

    assert evaluate("04.fused_forward", looped).status == PASSED


def test_a_fused_forward_that_builds_its_result_in_a_float32_buffer_fails_on_the_float64_case():
    def buffered(query, key, value, w_q, w_k, w_v, w_o, num_heads):
        output, weights = FUSED_ANSWERS[None](query, key, value, w_q, w_k, w_v, w_o, num_heads)
        result = torch.zeros(output.shape)  # float32, whatever the inputs
        result[:] = output
        return result, weights

    verdict = evaluate("04.fused_forward", buffered)
    assert verdict.status == FAILED and "float64" in verdict.message and "dtype" in verdict.message, verdict.message


# ----------------------------------------------------------------------------- 04.score_matrices


def _score_loop(in_proj_weight, num_heads, transform=None, buffer_dtype="same"):
    """A loop over the heads, as a learner writes it: head h's rows of Q and K, W_Qᵀ... per head."""
    E = in_proj_weight.shape[1]
    d = E // num_heads
    W_Q, W_K = in_proj_weight[:E], in_proj_weight[E:2 * E]
    dtype = in_proj_weight.dtype if buffer_dtype == "same" else torch.float32
    result = torch.zeros(num_heads, E, E, dtype=dtype)
    for h in range(num_heads):
        q_h, k_h = W_Q[h * d:(h + 1) * d], W_K[h * d:(h + 1) * d]  # (d, E): (W^h)ᵀ
        result[h] = (transform or (lambda q, k: q.T @ k / math.sqrt(d)))(q_h, k_h)
    return result


SCORE_ANSWERS = {
    None: lambda w, H: _score_loop(w, H),
    "NO_SCALE": lambda w, H: _score_loop(w, H, lambda q, k: q.T @ k),
    "SCALE_BY_E": lambda w, H: _score_loop(w, H, lambda q, k: q.T @ k / math.sqrt(w.shape[1])),
    "QK_SWAPPED": lambda w, H: _score_loop(w, H, lambda q, k: k.T @ q / math.sqrt(q.shape[0])),
    "HEADS_SUMMED": lambda w, H: (w[:w.shape[1]].T @ w[w.shape[1]:2 * w.shape[1]]) / math.sqrt(w.shape[1] // H),
    "V_FOR_K": lambda w, H: torch.stack([
        w[:w.shape[1]][h * (w.shape[1] // H):(h + 1) * (w.shape[1] // H)].T
        @ w[2 * w.shape[1]:][h * (w.shape[1] // H):(h + 1) * (w.shape[1] // H)] for h in range(H)
    ]) / math.sqrt(w.shape[1] // H),
    "D_BY_D": lambda w, H: torch.stack([
        w[:w.shape[1]][h * (w.shape[1] // H):(h + 1) * (w.shape[1] // H)]
        @ w[w.shape[1]:2 * w.shape[1]][h * (w.shape[1] // H):(h + 1) * (w.shape[1] // H)].T for h in range(H)
    ]) / math.sqrt(w.shape[1] // H),
    "IN_OUT_LAYOUT": lambda w, H: torch.einsum(
        "ehd,fhd->hef", w[:w.shape[1]].reshape(w.shape[1], H, -1), w[w.shape[1]:2 * w.shape[1]].reshape(w.shape[1], H, -1)
    ) / math.sqrt(w.shape[1] // H),
    "HEADS_INTERLEAVED": lambda w, H: torch.einsum(
        "dhe,dhf->hef", w[:w.shape[1]].reshape(-1, H, w.shape[1]), w[w.shape[1]:2 * w.shape[1]].reshape(-1, H, w.shape[1])
    ) / math.sqrt(w.shape[1] // H),
}


@pytest.mark.parametrize("code", list(SCORE_ANSWERS), ids=[str(code) for code in SCORE_ANSWERS])
def test_score_matrices_answers_written_another_way_are_named(code):
    verdict = evaluate("04.score_matrices", SCORE_ANSWERS[code])
    if code is None:
        assert verdict.status == PASSED, verdict.message
    else:
        assert verdict.status == FAILED and verdict.code == code, verdict.message


def test_a_score_matrices_answer_in_a_float32_buffer_fails_naming_the_dtypes():
    """The bug the float64 cases are there for: torch.zeros(H, E, E) without dtype=."""
    verdict = evaluate("04.score_matrices", lambda w, H: _score_loop(w, H, buffer_dtype="float32"))
    assert verdict.status == FAILED and "float64" in verdict.message and "float32" in verdict.message, verdict.message


def test_a_score_matrices_answer_cut_off_from_the_graph_fails_as_its_text_says():
    verdict = evaluate("04.score_matrices", lambda w, H: _score_loop(w.detach(), H))
    assert verdict.status == FAILED and verdict.code == "NO_GRAPH", verdict.message


# ----------------------------------------------------------------------------- 04.attn_mask


ATTN_MASK_ANSWERS = {
    None: lambda kpm, H, L_q: kpm.repeat_interleave(H, dim=0)[:, None, :].expand(-1, L_q, -1),
    "HEAD_ORDER": lambda kpm, H, L_q: kpm.repeat(H, 1)[:, None, :].expand(-1, L_q, -1),
    "MASK_INVERTED": lambda kpm, H, L_q: ~kpm.repeat_interleave(H, dim=0)[:, None, :].expand(-1, L_q, -1),
    "NO_HEAD_AXIS": lambda kpm, H, L_q: kpm[:, None, :].expand(-1, L_q, -1),
    "FOUR_AXES": lambda kpm, H, L_q: kpm.view(kpm.shape[0], 1, 1, -1).expand(-1, H, L_q, -1),
    "ROWS_NOT_KEYS": lambda kpm, H, L_q: kpm.repeat_interleave(H, dim=0)[:, :, None].expand(-1, -1, L_q),
}


@pytest.mark.parametrize("code", list(ATTN_MASK_ANSWERS), ids=[str(code) for code in ATTN_MASK_ANSWERS])
def test_attn_mask_answers_written_another_way_are_named(code):
    verdict = evaluate("04.attn_mask", ATTN_MASK_ANSWERS[code])
    if code is None:
        assert verdict.status == PASSED, verdict.message
    else:
        assert verdict.status == FAILED and verdict.code == code, verdict.message


# ----------------------------------------------------------------------------- in-place edits


def _scales_query_in_place(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    """Right values: the query scaled by 1/√d_k before the projection scales every score, but the
    caller's query is divided in place."""
    d_k = w_q.shape[1] // num_heads
    query /= math.sqrt(d_k)
    return _fused(query, key, value, w_q, w_k, w_v, w_o, num_heads, scale=lambda q, v: 1.0)


def _scales_q_rows_in_place(in_proj_weight, num_heads):
    """Right values, but the caller's Q rows are divided by √d in place."""
    E = in_proj_weight.shape[1]
    d = E // num_heads
    q_rows = in_proj_weight[:E]  # a view: the edit reaches the caller's tensor
    q_rows /= math.sqrt(d)
    return q_rows.reshape(num_heads, d, E).transpose(1, 2) @ in_proj_weight[E:2 * E].reshape(num_heads, d, E)


def _inverts_padding_in_place(key_padding_mask, num_heads, L_q):
    """Right values, but the caller's key_padding_mask ends up inverted."""
    keep = key_padding_mask.logical_not_()  # True at real keys, in the caller's tensor
    return ~keep.repeat_interleave(num_heads, dim=0)[:, None, :].expand(-1, L_q, -1)


IN_PLACE = {
    "04.fused_forward": (_scales_query_in_place, 0),
    "04.score_matrices": (_scales_q_rows_in_place, 0),
    "04.attn_mask": (_inverts_padding_in_place, 0),
}


@pytest.mark.parametrize("exercise", sorted(IN_PLACE))
def test_the_cases_make_the_in_place_edits_learners_make_visible(exercise):
    """Each in-place answer returns the right values on every public case (so only a verdict on the
    inputs can catch it), and changes the argument it edits on every case but those where the
    edit is a no-op (d = 1 for the scaling ones: dividing by √1)."""
    function, position = IN_PLACE[exercise]
    spec = EXERCISES[exercise]
    cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    changed = []
    for case in cases:
        _, fresh = copies(case, grad=False)
        before = fresh[position].clone()
        with torch.no_grad():
            result = function(*fresh)
        expected = spec.reference(*copies(case, grad=False)[1])
        for got, want in zip(result if isinstance(result, tuple) else (result,),
                             expected if isinstance(expected, tuple) else (expected,)):
            assert got.dtype == want.dtype and torch.allclose(got, want, atol=1e-5, rtol=1e-4)
        changed.append(not torch.equal(fresh[position], before))
    assert sum(changed) >= len(cases) - 1 and changed[0], changed


@pytest.mark.parametrize("exercise", sorted(IN_PLACE))
def test_an_answer_that_edits_its_inputs_in_place_fails_as_input_modified(exercise):
    verdict = evaluate(exercise, IN_PLACE[exercise][0])
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message
