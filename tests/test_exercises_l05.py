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
from course_utils import probsparse
from course_utils.exercises import FAILED, PASSED, evaluate

# the references (and hidden cases) under test, as the registry holds them
_causal_reference = EXERCISES["05.causal_prob_sparse"].reference
_measure_reference = EXERCISES["05.sampled_measure"].reference
_top_u_reference = EXERCISES["05.top_u_attention"].reference


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
    """Exercises 2 and 3 forbid nothing, and their texts say so in both languages, naming the
    course's building blocks as allowed (a check must not enforce what its text does not state);
    every text states the in-place rule, and exercise 1's that no gradient is compared."""
    import jupytext

    from course_teacher import build

    texts = {}
    cells = jupytext.read(build.lessons()["05"]).cells
    for number, cell in enumerate(cells):
        if "exercise" in cell.metadata.get("tags", []):
            texts[cell.metadata["exercise"]] = tuple(" ".join(cells[number - back].source.split()) for back in (2, 1))
    for exercise in ("05.top_u_attention", "05.causal_prob_sparse"):
        assert EXERCISES[exercise].forbidden == (), exercise
        english, chinese = texts[exercise]
        assert "Any function may be used" in english and "任何函数都可以用" in chinese, exercise
    for exercise, (english, chinese) in texts.items():
        assert "in place" in english and "原地修改" in chinese, exercise
    english, chinese = texts["05.sampled_measure"]
    assert "compares values only, not gradients" in english and "不比较梯度" in chinese


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


# ----------------------------------------------------------------------------- what the texts promise


def test_the_sampled_measure_compares_values_only():
    """Its text says no gradient is compared (the measure only chooses queries): a right answer cut
    off from the graph passes, and no case of its reference is on the graph."""
    from course_utils.exercises import public

    assert not any(case.attached for case in public.load("05.sampled_measure").cases)

    def detached(query, key, index):
        return _measure_reference(query, key, index).detach()

    assert evaluate("05.sampled_measure", detached).status == PASSED


# ----------------------------------------------------------------------------- in-place edits

def _centres_measure(query, key, value, measure, u):
    measure -= measure.mean(-1, keepdim=True)  # changes the caller's measure; the top u stay the same
    return _top_u_reference(query, key, value, measure, u)


def _blanks_chosen(query, key, value, measure, u):
    chosen = []
    for _ in range(u):  # repeated argmax, each winner blanked in place
        best = measure.argmax(-1, keepdim=True)
        chosen.append(best)
        measure.scatter_(-1, best, float("-inf"))
    top = torch.cat(chosen, dim=-1)
    attended = torch.softmax(query.gather(-2, top.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
                             @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1) @ value
    lazy = value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1])
    return lazy.scatter(-2, top.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _top_u_scales_query_in_place(query, key, value, measure, u):
    query /= math.sqrt(query.shape[-1])
    top = measure.topk(u, dim=-1).indices
    attended = torch.softmax(query.gather(-2, top.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
                             @ key.transpose(-2, -1), -1) @ value
    lazy = value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1])
    return lazy.scatter(-2, top.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _causal_scales_query_in_place(query, key, value, selected):
    query.mul_(1 / math.sqrt(query.shape[-1]))
    L = query.shape[-2]
    scores = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1])) @ key.transpose(-2, -1)
    scores = scores.masked_fill(torch.arange(L) > selected.unsqueeze(-1), float("-inf"))
    lazy = value.cumsum(-2) / torch.arange(1, L + 1, dtype=value.dtype).unsqueeze(-1)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), scores.softmax(-1) @ value)


def _centres_keys(query, key, index):
    key -= key.mean(-2, keepdim=True)  # max − mean does not see it, the caller does
    return _measure_reference(query, key, index)


@pytest.mark.parametrize("exercise, function", [
    ("05.top_u_attention", _centres_measure),
    ("05.top_u_attention", _blanks_chosen),
    ("05.top_u_attention", _top_u_scales_query_in_place),
    ("05.causal_prob_sparse", _causal_scales_query_in_place),
    ("05.sampled_measure", _centres_keys),
], ids=lambda f: getattr(f, "__name__", f))
def test_an_in_place_edit_with_the_right_values_fails_as_input_modified(exercise, function):
    """The right values, an argument changed: the cases make the edit visible (a measure whose rows
    have a non-zero mean, non-zero queries and keys), and only the engine's INPUT_MODIFIED names it."""
    spec = EXERCISES[exercise]
    for case in spec.cases(torch.Generator().manual_seed(spec.seed)):
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in case]
        with torch.no_grad():
            torch.testing.assert_close(function(*args), spec.reference(*case))  # the values are right
    verdict = evaluate(exercise, function)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message


# ----------------------------------------------------------------------------- wrong answers written apart from the mistakes

def _w_measure_max_tuple(query, key, index):
    scores = torch.einsum("bhid,bhisd->bhis", query, key[:, :, index])
    return torch.max(scores, dim=-1)[1] - scores.mean(-1)


def _w_measure_keepdim(query, key, index):
    scores = torch.einsum("bhid,bhisd->bhis", query, key[:, :, index])
    return scores.max(dim=-1, keepdim=True).values - scores.mean(dim=-1, keepdim=True)


def _w_measure_loop_over_l_k(query, key, index):
    rows = []
    for i in range(query.shape[-2]):
        s = query[:, :, i : i + 1] @ key[:, :, index[i]].transpose(-2, -1)  # (B, H, 1, U)
        rows.append(s.max(-1).values - s.sum(-1) / key.shape[2])
    return torch.cat(rows, dim=-1)


def _w_measure_scaled(query, key, index):
    scores = torch.einsum("bhid,bhisd->bhis", query, key[:, :, index]) / query.shape[-1] ** 0.5
    return scores.max(-1).values - scores.mean(-1)


def _w_measure_full_matrix(query, key, index):
    full = torch.matmul(query, key.transpose(2, 3))
    return full.max(-1).values - full.mean(-1)


def _w_measure_unique(query, key, index):
    rows = []
    for i in range(index.shape[0]):
        keys = key[:, :, index[i].unique()]
        s = (query[:, :, i].unsqueeze(-2) @ keys.transpose(-2, -1)).squeeze(-2)
        rows.append(s.amax(-1) - s.mean(-1))
    return torch.stack(rows, -1)


def _w_measure_wrong_einsum(query, key, index):
    scores = torch.einsum("bhqd,bhksd->bhqs", query, key[:, :, index])
    return scores.amax(-1) - scores.mean(-1)


def _w_measure_lse(query, key, index):
    scores = torch.einsum("bhid,bhisd->bhis", query, key[:, :, index])
    return torch.logsumexp(scores, -1) - scores.mean(-1)


def _w_top_u_no_scale(query, key, value, measure, u):
    out = value.mean(dim=2, keepdim=True).repeat(1, 1, query.shape[2], 1)
    idx = torch.topk(measure, u, dim=-1)[1]
    for b in range(query.shape[0]):
        for h in range(query.shape[1]):
            q = query[b, h, idx[b, h]]
            out[b, h, idx[b, h]] = torch.softmax(q @ key[b, h].T, dim=-1) @ value[b, h]
    return out


def _w_top_u_zero_lazy(query, key, value, measure, u):
    out = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype)
    idx = torch.topk(measure, u, dim=-1)[1]
    for b in range(query.shape[0]):
        for h in range(query.shape[1]):
            q = query[b, h, idx[b, h]]
            out[b, h, idx[b, h]] = torch.softmax(q @ key[b, h].T / math.sqrt(q.shape[-1]), dim=-1) @ value[b, h]
    return out


def _w_top_u_ascending(query, key, value, measure, u):
    idx = measure.argsort(dim=-1)[..., :u]
    return _top_u_sdpa_with(query, key, value, idx)


def _top_u_sdpa_with(query, key, value, idx):
    chosen = query.gather(-2, idx.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value)
    lazy = value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1])
    return lazy.scatter(-2, idx.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _w_top_u_scatter_dropped(query, key, value, measure, u):
    idx = measure.topk(u).indices
    chosen = query.gather(-2, idx.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value)
    out = value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1]).clone()
    out.scatter(-2, idx.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)
    return out


def _w_top_u_scale_dv(query, key, value, measure, u):
    idx = measure.topk(u).indices
    chosen = query.gather(-2, idx.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = torch.softmax(chosen @ key.mT / value.shape[-1] ** 0.5, -1) @ value
    return value.mean(-2, keepdim=True).expand(*query.shape[:-1], value.shape[-1]).scatter(
        -2, idx.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _w_top_u_heads_mean(query, key, value, measure, u):
    idx = measure.mean(1, keepdim=True).topk(u).indices.expand(-1, query.shape[1], -1)
    return _top_u_sdpa_with(query, key, value, idx)


def _w_top_u_first_rows(query, key, value, measure, u):
    idx = measure.topk(u).indices
    chosen = query.gather(-2, idx.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    out = value.mean(-2, keepdim=True).repeat(1, 1, query.shape[-2], 1)
    out[:, :, :u] = F.scaled_dot_product_attention(chosen, key, value)
    return out


def _w_causal_zero_fill(query, key, value, selected):
    L = query.shape[-2]
    out = torch.stack([value[:, :, : i + 1].mean(-2) for i in range(L)], -2)
    for b in range(query.shape[0]):
        for h in range(query.shape[1]):
            for p in selected[b, h].tolist():
                s = key[b, h] @ query[b, h, p] / math.sqrt(query.shape[-1])
                s[p + 1 :] = 0
                out[b, h, p] = torch.softmax(s, -1) @ value[b, h]
    return out


def _w_causal_sum(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.arange(L) <= selected.unsqueeze(-1)
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value, attn_mask=keep)
    return value.cumsum(-2).scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _w_causal_all_mean(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.arange(L) <= selected.unsqueeze(-1)
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value, attn_mask=keep)
    lazy = value.mean(-2, keepdim=True).expand_as(value)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _w_causal_tril_rows(query, key, value, selected):
    L, u = query.shape[-2], selected.shape[-1]
    keep = torch.ones(L, L, dtype=torch.bool).tril()[:u]  # the first u rows of the causal mask
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    attended = F.scaled_dot_product_attention(chosen, key, value, attn_mask=keep)
    lazy = value.cumsum(-2) / torch.arange(1, L + 1).unsqueeze(-1)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), attended)


def _w_causal_weights_times_mask(query, key, value, selected):
    L = query.shape[-2]
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    weights = torch.softmax(chosen @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), -1)
    weights = weights * (torch.arange(L) <= selected.unsqueeze(-1))
    lazy = value.cumsum(-2) / torch.arange(1, L + 1).unsqueeze(-1)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), weights @ value)


def _w_causal_strict(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.arange(L) < selected.unsqueeze(-1)  # misses its own key
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(-1, -1, -1, query.shape[-1]))
    scores = (chosen @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])).masked_fill(~keep, -1e9)
    lazy = value.cumsum(-2) / torch.arange(1, L + 1).unsqueeze(-1)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand(-1, -1, -1, value.shape[-1]), scores.softmax(-1) @ value)


#: Wrong answers a learner could write, each in a way of its own (loops, einsum, torch.max's tuple,
#: F.scaled_dot_product_attention...), not the mistakes' own code: the check must catch every one and
#: name at least half (each names the mistake it makes).
WRONG = [
    ("05.sampled_measure", _w_measure_max_tuple, "ARGMAX_NOT_MAX"),
    ("05.sampled_measure", _w_measure_keepdim, "KEEPS_SAMPLE_AXIS"),
    ("05.sampled_measure", _w_measure_loop_over_l_k, "DIVIDES_BY_L_K"),
    ("05.sampled_measure", _w_measure_scaled, "SCALED"),
    ("05.sampled_measure", _w_measure_full_matrix, "ALL_KEYS"),
    ("05.sampled_measure", _w_measure_unique, "DROPS_REPEATS"),
    ("05.sampled_measure", _w_measure_wrong_einsum, "SUMS_SAMPLES_AWAY"),
    ("05.sampled_measure", _w_measure_lse, "LOG_SUM_EXP"),
    ("05.top_u_attention", _w_top_u_no_scale, "NO_SCALE"),
    ("05.top_u_attention", _w_top_u_zero_lazy, "LAZY_ZERO"),
    ("05.top_u_attention", _w_top_u_ascending, "SMALLEST_U"),
    ("05.top_u_attention", _w_top_u_scatter_dropped, "SCATTER_RESULT_DROPPED"),
    ("05.top_u_attention", _w_top_u_scale_dv, "SCALE_BY_D_V"),
    ("05.top_u_attention", _w_top_u_heads_mean, "HEADS_SHARE_SELECTION"),
    ("05.top_u_attention", _w_top_u_first_rows, "WRONG_ROWS"),
    ("05.causal_prob_sparse", _w_causal_zero_fill, "MASKED_WITH_ZERO"),
    ("05.causal_prob_sparse", _w_causal_sum, "CUMSUM_NOT_MEAN"),
    ("05.causal_prob_sparse", _w_causal_all_mean, "LAZY_SEES_FUTURE"),
    ("05.causal_prob_sparse", _w_causal_tril_rows, "MASK_BY_ROW"),
    ("05.causal_prob_sparse", _w_causal_weights_times_mask, "MASK_AFTER_SOFTMAX"),
    ("05.causal_prob_sparse", _w_causal_strict, None),  # position 0 gets a row of -1e9: NaN-free, unnamed
]


@pytest.mark.parametrize("exercise, function, code", WRONG, ids=[f.__name__ for _, f, _ in WRONG])
def test_wrong_answers_written_apart_are_caught_and_named(exercise, function, code):
    verdict = evaluate(exercise, function)
    assert verdict.status != PASSED, verdict.message
    if code is not None:
        assert verdict.code == code, verdict.message


def test_most_independent_wrong_answers_are_named():
    named = sum(code is not None for _, _, code in WRONG)
    assert named >= len(WRONG) / 2
