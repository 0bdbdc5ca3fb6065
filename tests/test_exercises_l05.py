"""Lesson 05's exercises beyond the generic tests (tests/test_exercises.py): other correct ways to
write each function pass, values and gradients (so the check does not demand the reference's own
route); the package's ProbSparse is forbidden; the references agree with course_utils.probsparse;
and the cases hold what the module docstring promises (unique top-u choices, positions in any
order, a common key offset where the divisor matters)."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from course_teacher.exercises.l05_probsparse import _causal_reference, _measure_reference, _top_u_reference
from course_utils import probsparse
from course_utils.exercises import FAILED, PASSED, evaluate


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


# ----------------------------------------------------------------------------- other right answers


def _measure_from_full_scores(query, key, index):
    """Every score, then the sampled ones picked out (take_along_dim), and max(-1).values."""
    B, H = query.shape[:2]
    scores = (query @ key.transpose(-2, -1)).take_along_dim(index.expand(B, H, *index.shape), dim=-1)
    return scores.max(-1).values - scores.sum(-1) / index.shape[1]


def _measure_einsum(query, key, index):
    scores = torch.einsum("bhid,bhisd->bhis", query, key[:, :, index])
    return scores.amax(-1) - scores.mean(-1)


def _measure_loop(query, key, index):
    rows = []
    for i in range(query.shape[-2]):
        scores = query[:, :, i : i + 1] @ key[:, :, index[i]].transpose(-2, -1)  # (B, H, 1, U)
        rows.append(scores.amax(-1) - scores.mean(-1))
    return torch.cat(rows, dim=-1)


def _top_u_where(query, key, value, measure, u):
    """Full attention for every query, then keep it only where the query is chosen."""
    full = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1) @ value
    threshold = measure.topk(u, dim=-1).values[..., -1:]
    chosen = (measure >= threshold).unsqueeze(-1)
    return torch.where(chosen, full, value.mean(-2, keepdim=True))


def _top_u_sdpa(query, key, value, measure, u):
    """The chosen rows through F.scaled_dot_product_attention, put back with scatter."""
    selected = measure.topk(u, dim=-1).indices.sort(-1).values
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value)
    context = value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1])
    return context.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _top_u_loop(query, key, value, measure, u):
    B, H, L_Q, _ = query.shape
    out = value.mean(-2, keepdim=True).repeat(1, 1, L_Q, 1)
    for b in range(B):
        for h in range(H):
            for i in measure[b, h].topk(u).indices.tolist():
                weights = torch.softmax(key[b, h] @ query[b, h, i] / math.sqrt(query.shape[-1]), dim=-1)
                out[b, h, i] = weights @ value[b, h]
    return out


def _causal_sdpa(query, key, value, selected):
    L, D_v = query.shape[-2], value.shape[-1]
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    keep = torch.arange(L) <= selected.unsqueeze(-1)  # (B, H, u, L)
    attended = F.scaled_dot_product_attention(chosen, key, value, attn_mask=keep)
    lazy = value.cumsum(-2) / torch.arange(1, L + 1).unsqueeze(-1)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, D_v), attended)


def _causal_where(query, key, value, selected):
    """Causal attention for every query, kept where the query is chosen (a one-hot of selected)."""
    L = query.shape[-2]
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    full = torch.softmax(scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf), -1) @ value
    chosen = F.one_hot(selected, L).sum(-2).bool().unsqueeze(-1)  # (B, H, L, 1)
    lazy = value.cumsum(-2) / torch.arange(1, L + 1, dtype=value.dtype).unsqueeze(-1)
    return torch.where(chosen, full, lazy)


def _causal_loop(query, key, value, selected):
    B, H, L, _ = query.shape
    out = torch.stack([value[:, :, : i + 1].mean(-2) for i in range(L)], dim=-2)
    for b in range(B):
        for h in range(H):
            for p in selected[b, h].tolist():
                scores = key[b, h, : p + 1] @ query[b, h, p] / math.sqrt(query.shape[-1])
                out[b, h, p] = torch.softmax(scores, -1) @ value[b, h, : p + 1]
    return out


@pytest.mark.parametrize(
    "exercise, function",
    [
        ("05.sampled_measure", _measure_from_full_scores),
        ("05.sampled_measure", _measure_einsum),
        ("05.sampled_measure", _measure_loop),
        ("05.top_u_attention", _top_u_where),
        ("05.top_u_attention", _top_u_sdpa),
        ("05.top_u_attention", _top_u_loop),
        ("05.causal_prob_sparse", _causal_sdpa),
        ("05.causal_prob_sparse", _causal_where),
        ("05.causal_prob_sparse", _causal_loop),
    ],
    ids=lambda f: getattr(f, "__name__", f),
)
def test_other_right_answers_pass_values_and_gradients(exercise, function):
    verdict = evaluate(exercise, function)
    assert verdict.status == PASSED, verdict.message


# ----------------------------------------------------------------------------- the package is forbidden


def test_calling_the_package_fails_as_forbidden():
    def borrowed(query, key, index):
        return probsparse.sparsity_measure(probsparse.sampled_scores(query, key, index))

    verdict = evaluate("05.sampled_measure", borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "course_utils.probsparse.sampled_scores" in verdict.message


def test_the_lessons_building_blocks_are_allowed_where_the_text_allows_them():
    """Exercises 2 and 3 forbid nothing: the lesson names select_queries and lazy_context as the steps
    to use (a check must not enforce what its text does not state)."""
    for exercise in ("05.top_u_attention", "05.causal_prob_sparse"):
        assert EXERCISES[exercise].forbidden == (), exercise


# ----------------------------------------------------------------------------- the references are the package's steps


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length, factor", [(12, 1), (20, 2), (40, 1)])
# the chosen queries are compared exactly (a near tie could go either way): one thread (the fixture)
def test_the_three_references_make_the_packages_prob_sparse_attention(length, factor, causal, one_thread):
    g = torch.Generator().manual_seed(length + factor)
    q, k, v = (torch.randn(2, 3, length, 8, generator=g) for _ in range(3))
    U, u = probsparse.sample_count(length, factor), probsparse.sample_count(length, factor)
    assert u < length  # some queries are lazy
    index = probsparse.sample_keys(length, length, U, causal=causal, generator=g)
    output, selected = probsparse.prob_sparse_attention_plain(q, k, v, factor=factor, causal=causal, index=index)
    measure = _measure_reference(q, k, index)
    torch.testing.assert_close(measure, probsparse.sparsity_measure(probsparse.sampled_scores(q, k, index)))
    assert torch.equal(probsparse.select_queries(measure, u), selected)
    ours = _causal_reference(q, k, v, selected.flip(-1)) if causal else _top_u_reference(q, k, v, measure, u)
    torch.testing.assert_close(ours, output)


# ----------------------------------------------------------------------------- what the cases hold


def test_top_u_cases_have_a_unique_choice_and_cover_u_from_one_to_every_query():
    us = []
    for query, key, value, measure, u in _cases("05.top_u_attention"):
        ranked = measure.sort(-1, descending=True).values
        if u < measure.shape[-1]:
            assert (ranked[..., u - 1] - ranked[..., u]).min() > 1e-3  # no near-tie at the cut
        us.append((u, query.shape[-2]))
    assert (1, 8) in us and any(u == l_q > 1 for u, l_q in us)


def test_causal_cases_give_positions_in_any_order_and_reach_both_ends():
    cases = _cases("05.causal_prob_sparse")
    unsorted = [case for case in cases if (case[3].diff(dim=-1) < 0).any()]
    assert len(unsorted) >= 4
    first = cases[0][3]
    assert (first > 0).all()  # the first case chooses no position 0: every mistake gives numbers there
    assert any((case[3] == 0).any() and (case[3] == case[0].shape[-2] - 1).any() for case in cases[1:])
    for query, key, value, selected in cases:
        L = query.shape[-2]
        assert key.shape[-2] == value.shape[-2] == L
        assert all(len(set(row)) == len(row) for row in selected.reshape(-1, selected.shape[-1]).tolist())


def test_the_common_key_offset_changes_which_queries_dividing_by_l_k_would_choose():
    query, key, index = _cases("05.sampled_measure")[4]
    right = _measure_reference(query, key, index)
    scores = (query.unsqueeze(-2) @ key[:, :, index].transpose(-2, -1)).squeeze(-2)
    by_l_k = scores.amax(-1) - scores.sum(-1) / key.shape[-2]
    assert not torch.equal(right.topk(2, -1).indices.sort(-1).values, by_l_k.topk(2, -1).indices.sort(-1).values)


def test_the_sampled_measure_is_unscaled_zero_for_one_sample_and_never_negative():
    for query, key, index in _cases("05.sampled_measure"):
        measure = _measure_reference(query, key, index)
        assert measure.dtype == query.dtype and (measure >= 0).all()
        if index.shape[1] == 1:
            assert (measure == 0).all()
