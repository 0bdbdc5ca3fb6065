"""Lesson 05's exercises: ProbSparse attention in three steps. The sampled max-mean measure M̄,
full attention for the top-u queries with the mean of the values for the lazy ones, and the causal
(decoder) version of that last step.

The references are written here in plain code. 05.sampled_measure forbids the package's functions
that compute the sampled measure or its two steps (the sampled scores, max − mean), so a learner
cannot pass by calling them, and compares values only: the measure only chooses queries, and no
gradient flows through it (its reference runs under no_grad, as ``probsparse`` computes it). The
other two exercises forbid nothing and say so: no function of the package does their step (the
lesson's building blocks, ``probsparse.select_queries``, ``lazy_context`` and ``causal_keep``, are
named in their texts as allowed); they compare gradients.

Every argument varies on its own across the cases (batch 1, one head, L_Q != L_K, D != D_v, one
sampled key or one chosen query, every query chosen, keys with a large common offset, repeated
sample positions, chosen positions in any order, float64), so a function that ignores an argument
or uses one size where another is meant fails somewhere. The first case of each exercise is one
where every known mistake runs, so a mistake is recognised by its output. The grader's hidden
cases (``hidden``) keep those edges at sizes drawn from the teacher's seed, and always hold shapes
(or u) no public case has.

In-place edits. A function that changes an argument fails with the check engine's generic
INPUT_MODIFIED verdict (it compares every argument with the case's, bit for bit, after the call).
Learners write such edits, and some give the right values: centring ``measure`` or blanking
chosen entries with ``measure[...] = -inf`` (05.top_u_attention), ``query /= math.sqrt(D)``
(05.top_u_attention, 05.causal_prob_sparse), centring ``key`` (05.sampled_measure: max − mean does
not see it). Those rely on INPUT_MODIFIED alone, and the cases make them visible: every case's
measure has rows of non-zero mean and no two equal entries, every query and key has non-zero
entries (tests/test_exercises_l05.py tries each such edit).
"""

import math

import torch

from .registry import Exercise, Mistake, randn, register

#: What computes 05.sampled_measure, or one of its two steps, for the learner: the sampled scores
#: (``sampled_scores`` and the private helper it uses with gradients; the study's ``_sampled_from``
#: reads them off the full score matrix) and max − mean (``sparsity_measure``; the study's
#: ``exact_measure`` and the ``_exact_from`` it calls compute the same over whatever keys they get).
MEASURE = (
    "course_utils.probsparse.sampled_scores",
    "course_utils.probsparse._gathered_scores",
    "course_utils.probsparse.sparsity_measure",
    "course_utils.probsparse_study.exact_measure",
    "course_utils.probsparse_study._exact_from",
    "course_utils.probsparse_study._sampled_from",
)


def _draw(generator, low, high):
    """An integer drawn uniformly from [low, high] by the grader's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


def _rows(tensor, selected):
    """tensor[b, h, selected[b, h, r]] for every r: (B, H, L, X) -> (B, H, u, X)."""
    return tensor.gather(-2, selected.unsqueeze(-1).expand(*selected.shape, tensor.shape[-1]))


def _put(context, selected, rows):
    """A copy of ``context`` with rows[b, h, r] at position selected[b, h, r] (out of place, so
    autograd follows it). Raises when the rows do not fit the context, as ``out[...] = rows`` does."""
    B, H, _ = selected.shape
    batch = torch.arange(B, device=selected.device).view(B, 1, 1)  # on the inputs' device (a GPU's too)
    head = torch.arange(H, device=selected.device).view(1, H, 1)
    return context.clone().index_put((batch, head, selected), rows)


def _mean_of_values(value, length_q):
    """(B, H, L_Q, D_v): every row the mean of all values."""
    B, H, _, D_v = value.shape
    return value.mean(-2, keepdim=True).expand(B, H, length_q, D_v)


def _cumulative_mean(value):
    """(B, H, L, D_v): row i the mean of v_0 … v_i."""
    counts = torch.arange(1, value.shape[-2] + 1, dtype=value.dtype, device=value.device)
    return value.cumsum(-2) / counts.unsqueeze(-1)


#: The hint of every FLOAT32 mistake: the right values in float32 where the inputs are float64.
FLOAT32_HINT = {
    "en": "The values are right, but the result is float32 where the inputs are float64: something in your function "
    "forces float32 (a .float(), or a buffer made by torch.zeros(...) or torch.empty(...) without dtype=). Keep "
    "query's dtype: torch.zeros(..., dtype=query.dtype), query.new_zeros(...), or no cast at all.",
    "zh": "数值是对的，但输入是 float64 时结果却是 float32：函数里有什么东西把它变成了 float32（比如 .float()，"
    "或者用 torch.zeros(...)、torch.empty(...) 建缓冲区时没写 dtype=）。应保持 query 的 dtype："
    "torch.zeros(..., dtype=query.dtype)、query.new_zeros(...)，或者干脆不做转换。",
}


def _float32(function):
    """The mistake of computing `function`'s result and handing it back in float32."""

    def mistake(*args):
        return function(*args).float()

    return mistake


# ----------------------------------------------------------------------------- 05.sampled_measure


def _measure_case(g, batch, heads, l_q, l_k, d, u, *, offset=0.0, index=None, dtype=torch.float32):
    query = randn(g, batch, heads, l_q, d)
    key = randn(g, batch, heads, l_k, d) + offset * randn(g, batch, heads, 1, d)  # one offset for all keys
    if index is None:
        index = torch.randint(l_k, (l_q, u), generator=g)  # with replacement: repeats happen
    return query.to(dtype), key.to(dtype), index


def _measure_cases(generator):
    # (B, H, L_Q, L_K, D, U). First L_Q = U = 4 (so even the index read as (U, L_Q) runs), L_K = 6
    # and D = 4; then every size different, one batch item and one head with U > L_K, one sampled
    # key (M = 0), keys with a large common offset (where dividing by L_K instead of U shows most),
    # a chosen index with repeats (a row that samples one key U times), one query, and float64.
    g = generator
    repeats = torch.tensor([[1, 1, 3, 1], [0, 4, 4, 2], [2, 2, 2, 2]])
    return [
        _measure_case(g, 2, 2, 4, 6, 4, 4),
        _measure_case(g, 3, 2, 5, 9, 3, 3),
        _measure_case(g, 1, 1, 7, 4, 8, 6),
        _measure_case(g, 2, 3, 3, 12, 5, 1),
        _measure_case(g, 2, 2, 6, 10, 4, 5, offset=5.0),
        _measure_case(g, 1, 2, 3, 5, 2, 4, index=repeats),
        _measure_case(g, 2, 1, 1, 8, 16, 5, offset=2.0),
        _measure_case(g, 2, 1, 5, 7, 6, 3, dtype=torch.float64),
    ]


def _measure_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, one batch item and
    one head with U > L_K, one sampled key, keys with a large common offset, an index with repeats and a
    row that samples one key U times, one query, float64), with more keys than any public case has."""
    g = generator
    l_q, l_k, u = _draw(g, 2, 6), _draw(g, 2, 8), _draw(g, 3, 6)
    repeats = torch.randint(l_k, (l_q, u), generator=g)
    repeats[:, -1] = repeats[:, 0]  # every row samples some key twice
    repeats[_draw(g, 0, l_q - 1)] = _draw(g, 0, l_k - 1)  # and one row one key U times
    l_k_few = _draw(g, 2, 5)
    return [
        _measure_case(g, _draw(g, 2, 3), _draw(g, 2, 3), _draw(g, 2, 7), _draw(g, 13, 16), _draw(g, 2, 8),
                      _draw(g, 2, 6)),
        _measure_case(g, 1, 1, _draw(g, 2, 7), l_k_few, _draw(g, 2, 8), _draw(g, l_k_few + 1, 8)),  # U > L_K
        _measure_case(g, _draw(g, 1, 3), _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 12), _draw(g, 2, 6),
                      1),  # U = 1: M = 0
        _measure_case(g, _draw(g, 1, 3), _draw(g, 1, 3), _draw(g, 3, 7), _draw(g, 6, 12), _draw(g, 2, 6),
                      _draw(g, 2, 5), offset=5.0),
        _measure_case(g, _draw(g, 1, 2), _draw(g, 1, 3), l_q, l_k, _draw(g, 2, 6), u, index=repeats),
        _measure_case(g, _draw(g, 1, 3), _draw(g, 1, 2), 1, _draw(g, 2, 10), _draw(g, 2, 16), _draw(g, 2, 6),
                      offset=2.0),  # one query
        _measure_case(g, _draw(g, 1, 3), _draw(g, 1, 2), _draw(g, 2, 6), _draw(g, 2, 9), _draw(g, 2, 7),
                      _draw(g, 2, 5), dtype=torch.float64),
    ]


def _sampled_scores(query, key, index):
    """(B, H, L_Q, U): query i against the U keys sampled for it, unscaled."""
    K_sample = key[:, :, index, :]  # (B, H, L_Q, U, D): row i holds query i's own sample
    return (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)


def _measure_reference(query, key, index):
    with torch.no_grad():  # the measure only chooses queries: no gradient is compared (the text says so)
        scores = _sampled_scores(query, key, index)  # (B, H, L_Q, U)
        return scores.amax(-1) - scores.mean(-1)  # (B, H, L_Q)


def _sums_samples_away(query, key, index):
    K_sample = key[:, :, index, :]  # (B, H, L_Q, U, D)
    scores = torch.einsum("bhije,bhkle->bhijl", query.unsqueeze(-2), K_sample).squeeze(-2)  # k: summed away
    return scores.amax(-1) - scores.mean(-1)


def _divides_by_l_k(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.amax(-1) - scores.sum(-1) / key.shape[-2]


def _divides_by_l_q(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.amax(-1) - scores.sum(-1) / index.shape[0]


def _scaled(query, key, index):
    return _measure_reference(query, key, index) / math.sqrt(query.shape[-1])


def _all_keys(query, key, index):
    scores = query @ key.transpose(-2, -1)  # (B, H, L_Q, L_K): every key, the sample ignored
    return scores.amax(-1) - scores.mean(-1)


def _mean_over_all_keys(query, key, index):
    return _sampled_scores(query, key, index).amax(-1) - (query @ key.transpose(-2, -1)).mean(-1)


def _mean_minus_max(query, key, index):
    return -_measure_reference(query, key, index)


def _log_sum_exp(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.logsumexp(-1) - scores.mean(-1)


def _keeps_sample_axis(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.amax(-1, keepdim=True) - scores.mean(-1, keepdim=True)  # (B, H, L_Q, 1)


def _reduces_query_axis(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.amax(-2) - scores.mean(-2)  # (B, H, U): over the queries, not over the samples


def _argmax_not_max(query, key, index):
    scores = _sampled_scores(query, key, index)
    return scores.max(-1).indices - scores.mean(-1)  # the position of the max, not its value


def _max_over_all_keys(query, key, index):
    return (query @ key.transpose(-2, -1)).amax(-1) - _sampled_scores(query, key, index).mean(-1)


def _drops_repeats(query, key, index):
    scores = _sampled_scores(query, key, index)  # (B, H, L_Q, U)
    rows = []
    for i in range(index.shape[0]):  # each query's distinct sampled keys only
        sampled = index[i].tolist()
        first = torch.tensor([sampled[s] not in sampled[:s] for s in range(len(sampled))])  # a key's first draw
        row = scores[:, :, i][..., first]
        rows.append(row.amax(-1) - row.mean(-1))
    return torch.stack(rows, dim=-1)


def _index_transposed(query, key, index):
    K_sample = key[:, :, index.T, :]  # (B, H, U, L_Q, D) taken for (B, H, L_Q, U, D)
    scores = (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)
    return scores.amax(-1) - scores.mean(-1)


register(
    Exercise(
        id="05.sampled_measure",
        reference=_measure_reference,
        cases=_measure_cases,
        hidden=_measure_hidden,
        forbidden=MEASURE,
        mistakes=(
            Mistake(
                "SUMS_SAMPLES_AWAY",
                _sums_samples_away,
                {
                    "en": "Every score is q_i · (the sum of the sampled keys of all queries): like the widely copied "
                    "re-implementation's einsum('bhije,bhkle->bhijl'), your product sums the query axis of the "
                    "gathered keys away. Score query i against its own sample only: with K_sample = "
                    "key[:, :, index] of shape (B, H, L_Q, U, D), (query.unsqueeze(-2) @ "
                    "K_sample.transpose(-2, -1)).squeeze(-2) is (B, H, L_Q, U).",
                    "zh": "每个分数都成了 q_i ·（所有查询采样到的键之和）：和那份广为流传的重写版里的 "
                    "einsum('bhije,bhkle->bhijl') 一样，你的乘积把收集来的键在查询这一维上求和消掉了。"
                    "查询 i 只应与它自己采样到的键打分：令 K_sample = key[:, :, index]，形状为 (B, H, L_Q, U, D)，"
                    "则 (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2) 的形状为 (B, H, L_Q, U)。",
                },
            ),
            Mistake(
                "DIVIDES_BY_L_K",
                _divides_by_l_k,
                {
                    "en": "The sum of the U sampled scores is divided by L_K, the number of all keys (the official "
                    "Informer code does this too); the mean of U samples divides by U. It matters most when the "
                    "keys share a common offset (as a key-projection bias gives): every score then carries the "
                    "same q·offset, which max − mean cancels only when the mean divides by U.",
                    "zh": "U 个采样分数之和除以的是全部键的个数 L_K（Informer 官方代码也是这样做的）；U 个样本的平均值"
                    "应除以 U。当所有键带有一个共同的偏移时（键投影的偏置就会带来这种偏移），问题最明显：每个分数都含有"
                    "同一项 q·offset，只有平均值除以 U 时，max − mean 才能把它抵消。",
                },
            ),
            Mistake(
                "DIVIDES_BY_L_Q",
                _divides_by_l_q,
                {
                    "en": "The sum is divided by index.shape[0], which is L_Q: index is (L_Q, U), so the sample size "
                    "is U = index.shape[1] (or use .mean(-1) on the (B, H, L_Q, U) scores).",
                    "zh": "求和结果除以的是 index.shape[0]，也就是 L_Q：index 的形状为 (L_Q, U)，样本数是 "
                    "U = index.shape[1]（也可以直接对 (B, H, L_Q, U) 的分数用 .mean(-1)）。",
                },
            ),
            Mistake(
                "SCALED",
                _scaled,
                {
                    "en": "Your measure is divided by √D. Multiplying every score by a positive number does not change "
                    "which queries rank highest, so both conventions choose the same queries; this exercise's "
                    "convention is the unscaled scores q·k, as in the official Informer code. Leave out the 1/√D here.",
                    "zh": "你的度量除以了 √D。把所有分数乘以同一个正数，并不会改变哪些查询排在最前面，所以两种约定选出的"
                    "查询相同；本练习约定使用未缩放的分数 q·k，与 Informer 官方代码一致。这里不要乘 1/√D。",
                },
            ),
            Mistake(
                "ALL_KEYS",
                _all_keys,
                {
                    "en": "The measure is computed over all L_K keys and index is not used. That is the exact "
                    "max − mean, but it needs the whole L_Q × L_K score matrix, which ProbSparse is there to "
                    "avoid: use only the U keys index[i] sampled for query i.",
                    "zh": "度量是在全部 L_K 个键上算的，index 根本没有用到。这是精确的 max − mean，但它需要完整的 "
                    "L_Q × L_K 分数矩阵，而 ProbSparse 正是为了避免这个矩阵：只用为查询 i 采样的 U 个键 index[i]。",
                },
            ),
            Mistake(
                "MEAN_OVER_ALL_KEYS",
                _mean_over_all_keys,
                {
                    "en": "The max is taken over the sampled scores but the mean over the scores of all L_K keys. "
                    "The paper's formula averages over all keys; ProbSparse estimates both terms from the same "
                    "U sampled scores, and so does this exercise.",
                    "zh": "最大值取自采样到的分数，平均值却是在全部 L_K 个键的分数上算的。论文的公式确实在全部键上求平均；"
                    "但 ProbSparse 用同一组 U 个采样分数来估计这两项，本练习也是如此。",
                },
            ),
            Mistake(
                "MEAN_MINUS_MAX",
                _mean_minus_max,
                {
                    "en": "The sign is flipped: M̄ = max − mean, which is never negative and is large for an active "
                    "query whose few scores stand out.",
                    "zh": "符号反了：M̄ = max − mean，它永远不会是负数；对于少数分数特别突出的活跃查询，它的值很大。",
                },
            ),
            Mistake(
                "LOG_SUM_EXP",
                _log_sum_exp,
                {
                    "en": "You used log-sum-exp − mean: that is M, the sparsity measure of the Informer paper (its "
                    "Eq. 2). ProbSparse ranks queries by its estimate M̄ (Eq. 4), which replaces the "
                    "log-sum-exp by the max: max − mean of the U sampled scores, as this exercise asks.",
                    "zh": "你用的是 log-sum-exp − mean：这是 Informer 论文的稀疏性度量 M（式 2）。ProbSparse 用它的估计 "
                    "M̄（式 4）给查询排序，M̄ 把 log-sum-exp 换成最大值：U 个采样分数的 max − mean，也就是本练习要求的。",
                },
            ),
            Mistake(
                "KEEPS_SAMPLE_AXIS",
                _keeps_sample_axis,
                {
                    "en": "Your result is (B, H, L_Q, 1): the reduction kept the sample axis (keepdim=True, or a "
                    "(1, D) @ (D, U) product left unsqueezed). Return one number per query, (B, H, L_Q): "
                    "amax(-1) - mean(-1) without keepdim.",
                    "zh": "你的结果形状是 (B, H, L_Q, 1)：归约时保留了样本那一维（keepdim=True，或者 (1, D) @ (D, U) "
                    "的乘积没有 squeeze）。每个查询只返回一个数，形状为 (B, H, L_Q)：不带 keepdim 的 "
                    "amax(-1) - mean(-1)。",
                },
            ),
            Mistake(
                "REDUCES_QUERY_AXIS",
                _reduces_query_axis,
                {
                    "en": "The max and the mean run over the queries (dim=-2), not over each query's U sampled "
                    "scores. The scores are (B, H, L_Q, U): reduce the last axis, one M̄ per query.",
                    "zh": "最大值和平均值是在查询这一维（dim=-2）上算的，而不是在每个查询的 U 个采样分数上算的。"
                    "分数的形状是 (B, H, L_Q, U)：应在最后一维上归约，每个查询得到一个 M̄。",
                },
            ),
            Mistake(
                "ARGMAX_NOT_MAX",
                _argmax_not_max,
                {
                    "en": "You used the position of the largest score (max(-1).indices, or max(-1)[1]) where its "
                    "value is meant: max(-1) returns (values, indices); take .values, or use amax(-1).",
                    "zh": "你用的是最大分数所在的位置（max(-1).indices 或 max(-1)[1]），而这里要的是它的值："
                    "max(-1) 返回 (values, indices)，应取 .values，或者直接用 amax(-1)。",
                },
            ),
            Mistake(
                "MAX_OVER_ALL_KEYS",
                _max_over_all_keys,
                {
                    "en": "The mean is taken over the sampled scores but the max over the scores of all L_K keys. "
                    "ProbSparse estimates both terms from the same U sampled scores: the max too.",
                    "zh": "平均值取自采样分数，最大值却是在全部 L_K 个键的分数上取的。ProbSparse 用同一组 U 个采样分数"
                    "估计这两项：最大值也一样。",
                },
            ),
            Mistake(
                "DROPS_REPEATS",
                _drops_repeats,
                {
                    "en": "A key sampled twice for a query was counted once. The sample is drawn with replacement, "
                    "and the measure is max − mean of all U sampled scores, repeats included: the mean divides "
                    "by U.",
                    "zh": "同一个查询被采样两次的键只算了一次。样本是有放回抽取的，度量是全部 U 个采样分数（包括重复的）"
                    "的最大值减平均值：平均值除以的是 U。",
                },
            ),
            Mistake(
                "INDEX_TRANSPOSED",
                _index_transposed,
                {
                    "en": "index was read as (U, L_Q). It is (L_Q, U): row i holds the U key positions sampled for "
                    "query i, so key[:, :, index] is (B, H, L_Q, U, D) as it is.",
                    "zh": "你把 index 当成了 (U, L_Q)。它的形状是 (L_Q, U)：第 i 行是为查询 i 采样的 U 个键位置，"
                    "所以 key[:, :, index] 不用转置就是 (B, H, L_Q, U, D)。",
                },
            ),
            Mistake("FLOAT32", _float32(_measure_reference), FLOAT32_HINT),
        ),
    )
)


# ----------------------------------------------------------------------------- 05.top_u_attention


def _top_u_case(g, batch, heads, l_q, l_k, d, d_v, u, dtype=torch.float32):
    query, key, value = randn(g, batch, heads, l_q, d), randn(g, batch, heads, l_k, d), randn(g, batch, heads, l_k, d_v)
    measure = randn(g, batch, heads, l_q)  # distinct values: the top u are unique
    return (*(t.to(dtype) for t in (query, key, value, measure)), u)


def _top_u_cases(generator):
    # (B, H, L_Q, L_K, D, D_v, u). First B = H = 2, D = D_v and 1 < u < L_Q, so every mistake runs;
    # then every size different with L_K < L_Q; one batch item, four heads and u = 1; every query
    # chosen (u = L_Q: full attention); one query; one key; wide heads (D = 16) where the scale
    # matters most; and float64.
    g = generator
    return [
        _top_u_case(g, 2, 2, 6, 7, 4, 4, 2),
        _top_u_case(g, 3, 2, 5, 3, 3, 5, 3),
        _top_u_case(g, 1, 4, 8, 8, 8, 2, 1),
        _top_u_case(g, 2, 1, 4, 6, 5, 3, 4),
        _top_u_case(g, 2, 3, 1, 5, 4, 6, 1),
        _top_u_case(g, 1, 2, 7, 1, 6, 3, 2),
        _top_u_case(g, 2, 2, 9, 6, 16, 8, 4),
        _top_u_case(g, 2, 2, 6, 5, 6, 6, 3, dtype=torch.float64),
    ]


def _top_u_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, L_K < L_Q, one
    batch item with several heads and u = 1, every query chosen, one query, one key, wide heads,
    float64), 1 <= u <= L_Q as the text says, with more keys than any public case has."""
    g = generator
    l_q, l_q_few, l_q_all = _draw(g, 3, 7), _draw(g, 5, 9), _draw(g, 2, 6)
    l_q_wide = _draw(g, 3, 8)
    return [
        _top_u_case(g, _draw(g, 2, 3), _draw(g, 2, 3), l_q, _draw(g, 10, 12), _draw(g, 2, 6), _draw(g, 2, 6),
                    _draw(g, 2, l_q - 1)),
        _top_u_case(g, _draw(g, 1, 3), _draw(g, 1, 3), l_q_few, _draw(g, 2, l_q_few - 1), _draw(g, 2, 6),
                    _draw(g, 2, 6), _draw(g, 2, l_q_few - 1)),  # L_K < L_Q
        _top_u_case(g, 1, _draw(g, 3, 5), _draw(g, 2, 9), _draw(g, 2, 9), _draw(g, 2, 8), _draw(g, 2, 5), 1),  # u = 1
        _top_u_case(g, _draw(g, 1, 3), _draw(g, 1, 3), l_q_all, _draw(g, 2, 8), _draw(g, 2, 6), _draw(g, 2, 6),
                    l_q_all),  # every query chosen: full attention
        _top_u_case(g, _draw(g, 1, 3), _draw(g, 1, 3), 1, _draw(g, 2, 7), _draw(g, 2, 6), _draw(g, 2, 6),
                    1),  # one query
        _top_u_case(g, _draw(g, 1, 2), _draw(g, 1, 3), _draw(g, 2, 8), 1, _draw(g, 2, 6), _draw(g, 2, 5),
                    _draw(g, 1, 2)),  # one key
        _top_u_case(g, _draw(g, 1, 2), _draw(g, 1, 3), l_q_wide, _draw(g, 3, 8), _draw(g, 12, 24), _draw(g, 2, 8),
                    _draw(g, 1, l_q_wide - 1)),  # wide heads
        _top_u_case(g, _draw(g, 1, 2), _draw(g, 2, 3), l_q, _draw(g, 2, 7), _draw(g, 2, 6), _draw(g, 2, 6),
                    _draw(g, 1, l_q), dtype=torch.float64),
    ]


def _attend(query, key, value, selected, *, scale=True, dim=-1):
    """(B, H, u, D_v): the chosen queries' full attention over all keys."""
    scores = _rows(query, selected) @ key.transpose(-2, -1)  # (B, H, u, L_K)
    if scale:
        scores = scores / math.sqrt(query.shape[-1])
    return torch.softmax(scores, dim=dim) @ value


def _top(measure, u, largest=True):
    return measure.topk(u, dim=-1, largest=largest).indices  # (B, H, u)


def _top_u_reference(query, key, value, measure, u):
    selected = _top(measure, u)  # (B, H, u): the u most active queries of each (batch item, head)
    attended = _attend(query, key, value, selected)  # (B, H, u, D_v)
    return _put(_mean_of_values(value, query.shape[-2]), selected, attended)  # (B, H, L_Q, D_v)


def _lazy_zero(query, key, value, measure, u):
    selected = _top(measure, u)
    context = value.new_zeros(*query.shape[:-1], value.shape[-1])
    return _put(context, selected, _attend(query, key, value, selected))


def _top_u_no_scale(query, key, value, measure, u):
    selected = _top(measure, u)
    return _put(_mean_of_values(value, query.shape[-2]), selected, _attend(query, key, value, selected, scale=False))


def _with_selection(query, key, value, selected):
    return _put(_mean_of_values(value, query.shape[-2]), selected, _attend(query, key, value, selected))


def _smallest_u(query, key, value, measure, u):
    return _with_selection(query, key, value, _top(measure, u, largest=False))


def _shared_selection(query, key, value, measure, u):
    B, H, _ = measure.shape
    return _with_selection(query, key, value, _top(measure[0, 0], u).expand(B, H, u))  # item 0, head 0's choice


def _heads_share_selection(query, key, value, measure, u):
    B, H, _ = measure.shape
    return _with_selection(query, key, value, _top(measure.mean(1, keepdim=True), u).expand(B, H, u))


def _u_off_by_one(query, key, value, measure, u):
    return _with_selection(query, key, value, measure.argsort(-1, descending=True)[..., : u + 1])


def _ignores_measure(query, key, value, measure, u):
    B, H, _ = measure.shape
    return _with_selection(query, key, value, torch.arange(u).expand(B, H, u))  # the first u positions


def _every_query_attends(query, key, value, measure, u):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(scores, dim=-1) @ value


def _softmax_over_queries(query, key, value, measure, u):
    selected = _top(measure, u)
    return _put(_mean_of_values(value, query.shape[-2]), selected, _attend(query, key, value, selected, dim=-2))


def _lazy_mean_of_queries(query, key, value, measure, u):
    selected = _top(measure, u)
    return _put(_mean_of_values(query, query.shape[-2]), selected, _attend(query, key, value, selected))


def _lazy_mean_of_attended(query, key, value, measure, u):
    selected = _top(measure, u)
    attended = _attend(query, key, value, selected)
    return _put(_mean_of_values(attended, query.shape[-2]), selected, attended)


def _only_chosen_rows(query, key, value, measure, u):
    return _attend(query, key, value, _top(measure, u))  # (B, H, u, D_v)


def _top_u_scaled(query, key, value, measure, u, divisor):
    selected = _top(measure, u)
    scores = _rows(query, selected) @ key.transpose(-2, -1) / divisor  # (B, H, u, L_K)
    return _put(_mean_of_values(value, query.shape[-2]), selected, torch.softmax(scores, dim=-1) @ value)


def _scale_by_d_v(query, key, value, measure, u):
    return _top_u_scaled(query, key, value, measure, u, math.sqrt(value.shape[-1]))


def _scale_by_d(query, key, value, measure, u):
    return _top_u_scaled(query, key, value, measure, u, query.shape[-1])


def _scatter_one_feature(query, key, value, measure, u):
    selected = _top(measure, u)
    context = _mean_of_values(value, query.shape[-2])
    return context.scatter(-2, selected.unsqueeze(-1), _attend(query, key, value, selected))  # index not expanded


def _scatter_result_dropped(query, key, value, measure, u):
    selected = _top(measure, u)
    context = _mean_of_values(value, query.shape[-2]).clone()
    context.scatter(-2, selected.unsqueeze(-1).expand(*selected.shape, value.shape[-1]), _attend(query, key, value, selected))
    return context  # scatter is out of place: its result was dropped


def _attends_chosen_keys_only(query, key, value, measure, u):
    selected = _top(measure, u)
    keys, values = _rows(key, selected), _rows(value, selected)  # the keys at the chosen queries' positions
    weights = torch.softmax(_rows(query, selected) @ keys.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return _put(_mean_of_values(value, query.shape[-2]), selected, weights @ values)


def _wrong_rows(query, key, value, measure, u):
    context = _mean_of_values(value, query.shape[-2]).clone()
    context[:, :, :u] = _attend(query, key, value, _top(measure, u))  # rows 0 … u − 1, not the chosen positions
    return context


def _softmax_over_all_queries(query, key, value, measure, u):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (B, H, L_Q, L_K): every query
    attended = torch.softmax(scores, dim=-2) @ value  # normalised over all L_Q queries, then the chosen rows kept
    selected = _top(measure, u)
    return _put(_mean_of_values(value, query.shape[-2]), selected, _rows(attended, selected))


register(
    Exercise(
        id="05.top_u_attention",
        reference=_top_u_reference,
        cases=_top_u_cases,
        hidden=_top_u_hidden,
        mistakes=(
            Mistake(
                "LAZY_ZERO",
                _lazy_zero,
                {
                    "en": "The lazy queries' rows are left at zero. A lazy query's softmax row is close to uniform, "
                    "so ProbSparse gives it what a uniform row gives: the mean of all values, value.mean(-2).",
                    "zh": "惰性查询的输出行留成了 0。惰性查询的 softmax 行接近均匀分布，所以 ProbSparse 给它的是均匀行"
                    "得到的结果：所有值的平均，value.mean(-2)。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _top_u_no_scale,
                {
                    "en": "The chosen queries' scores are not divided by √D (the widely copied re-implementation "
                    "stores its scale and never applies it). The measure that chose them may stay unscaled, since a "
                    "positive factor does not change which queries win, but their attention is "
                    "softmax(q·Kᵀ/√D)·V.",
                    "zh": "被选中查询的分数没有除以 √D（那份广为流传的重写版保存了 scale，却从未用上）。"
                    "用来挑选查询的度量可以不缩放，因为乘以一个正数不会改变哪些查询胜出；但这些查询的注意力是 "
                    "softmax(q·Kᵀ/√D)·V。",
                },
            ),
            Mistake(
                "SMALLEST_U",
                _smallest_u,
                {
                    "en": "You chose the u queries with the smallest measure, the laziest ones. The active queries "
                    "have the largest: measure.topk(u, dim=-1) (largest=True is the default).",
                    "zh": "你选的是度量最小的 u 个查询，也就是最“惰性”的那些。活跃查询的度量最大："
                    "measure.topk(u, dim=-1)（默认 largest=True）。",
                },
            ),
            Mistake(
                "SHARED_SELECTION",
                _shared_selection,
                {
                    "en": "One selection (from measure[0, 0]) served every batch item and head. Each (batch item, "
                    "head) picks its own u queries from its own row of the measure: topk over the last axis of "
                    "the whole (B, H, L_Q) measure.",
                    "zh": "所有批量样本和所有头共用了同一组选择（来自 measure[0, 0]）。每个（批量样本，头）都要从自己那一行"
                    "度量中选出自己的 u 个查询：在整个 (B, H, L_Q) 度量的最后一维上做 topk。",
                },
            ),
            Mistake(
                "HEADS_SHARE_SELECTION",
                _heads_share_selection,
                {
                    "en": "The heads of a batch item share one selection, from the measure averaged (or summed) over "
                    "the heads. Each head picks its own u queries from its own row, measure[b, h].",
                    "zh": "同一批量样本的各个头共用了一组选择，它来自在头这一维上取平均（或求和）后的度量。每个头都要从"
                    "自己的那一行 measure[b, h] 中选出自己的 u 个查询。",
                },
            ),
            Mistake(
                "U_OFF_BY_ONE",
                _u_off_by_one,
                {
                    "en": "u + 1 queries got full attention, one too many: exactly u of them do.",
                    "zh": "有 u + 1 个查询得到了完整的注意力，多了一个：应当恰好是 u 个。",
                },
            ),
            Mistake(
                "IGNORES_MEASURE",
                _ignores_measure,
                {
                    "en": "The first u positions got full attention, whatever their measure. Choose the u queries "
                    "with the largest measure.",
                    "zh": "得到完整注意力的是前 u 个位置，与它们的度量无关。应选出度量最大的 u 个查询。",
                },
            ),
            Mistake(
                "EVERY_QUERY_ATTENDS",
                _every_query_attends,
                {
                    "en": "Every query got full attention, u unused. That is exact attention, not ProbSparse: only the "
                    "u queries with the largest measure attend; the others get the mean of the values.",
                    "zh": "每个查询都得到了完整的注意力，u 没有用上。这是精确的注意力，而不是 ProbSparse：只有度量最大的 "
                    "u 个查询做注意力，其余查询得到所有值的平均。",
                },
            ),
            Mistake(
                "SOFTMAX_OVER_QUERIES",
                _softmax_over_queries,
                {
                    "en": "The softmax runs over the chosen queries (dim=-2). Each chosen query's weights sum to 1 "
                    "over the keys: softmax over the last axis of the (B, H, u, L_K) scores.",
                    "zh": "softmax 是在被选中的查询这一维（dim=-2）上做的。每个被选中查询的权重应在所有键上加起来等于 1："
                    "在 (B, H, u, L_K) 分数的最后一维上做 softmax。",
                },
            ),
            Mistake(
                "LAZY_MEAN_OF_QUERIES",
                _lazy_mean_of_queries,
                {
                    "en": "The lazy queries got the mean of the query vectors. They get the mean of the values, "
                    "value.mean(-2): what a uniform row of weights gives.",
                    "zh": "惰性查询得到的是所有查询向量的平均。它们应得到所有值的平均 value.mean(-2)：也就是一行均匀权重"
                    "得到的结果。",
                },
            ),
            Mistake(
                "LAZY_MEAN_OF_ATTENDED",
                _lazy_mean_of_attended,
                {
                    "en": "The lazy queries got the mean of the chosen queries' outputs. They get the mean of all "
                    "values, value.mean(-2): what a uniform row of weights gives.",
                    "zh": "惰性查询得到的是被选中查询输出的平均。它们应得到所有值的平均 value.mean(-2)：也就是一行均匀权重"
                    "得到的结果。",
                },
            ),
            Mistake(
                "ONLY_CHOSEN_ROWS",
                _only_chosen_rows,
                {
                    "en": "Only the u chosen queries' rows came back, (B, H, u, D_v). Return a row for every query, "
                    "(B, H, L_Q, D_v): the chosen ones at their own positions, the lazy ones the mean of the "
                    "values.",
                    "zh": "只返回了 u 个被选中查询的行，形状为 (B, H, u, D_v)。应为每个查询都返回一行，形状为 "
                    "(B, H, L_Q, D_v)：被选中的查询放在各自的位置上，惰性查询得到所有值的平均。",
                },
            ),
            Mistake(
                "SCALE_BY_D_V",
                _scale_by_d_v,
                {
                    "en": "The scores are divided by √D_v, the values' width. The scale comes from the dot products: "
                    "divide by √D, D = query.shape[-1] (the queries' and keys' width).",
                    "zh": "分数除以的是值的宽度 √D_v。缩放来自点积本身：应除以 √D，D = query.shape[-1]（查询和键的宽度）。",
                },
            ),
            Mistake(
                "SCALE_BY_D",
                _scale_by_d,
                {
                    "en": "The scores are divided by D, not by √D: softmax(q·Kᵀ/√D)·V. Use math.sqrt(D).",
                    "zh": "分数除以的是 D，而不是 √D：应为 softmax(q·Kᵀ/√D)·V。请用 math.sqrt(D)。",
                },
            ),
            Mistake(
                "SCATTER_ONE_FEATURE",
                _scatter_one_feature,
                {
                    "en": "Only the first feature of each chosen row was written: scatter writes one element per "
                    "index entry, and the index was (B, H, u, 1). Expand it to the rows' full width, "
                    "selected.unsqueeze(-1).expand(B, H, u, D_v).",
                    "zh": "每个被选中的行只写入了第一个特征：scatter 的索引有几个元素就写几个元素，而你的索引形状是 "
                    "(B, H, u, 1)。应把它扩展到整行的宽度：selected.unsqueeze(-1).expand(B, H, u, D_v)。",
                },
            ),
            Mistake(
                "SCATTER_RESULT_DROPPED",
                _scatter_result_dropped,
                {
                    "en": "Every query got the mean of the values: the chosen queries' outputs never reached the "
                    "result. Tensor.scatter is out of place: it returns a new tensor and leaves the one you "
                    "called it on alone. Keep what it returns, context = context.scatter(...).",
                    "zh": "每个查询得到的都是值的平均：被选中查询的输出根本没写进结果。Tensor.scatter 不是原地操作："
                    "它返回一个新张量，调用它的那个张量保持不变。应保留它的返回值：context = context.scatter(...)。",
                },
            ),
            Mistake(
                "ATTENDS_CHOSEN_KEYS_ONLY",
                _attends_chosen_keys_only,
                {
                    "en": "The chosen queries attend only to the keys at the chosen positions. ProbSparse reduces "
                    "the queries, not the keys: each chosen query attends over all L_K keys.",
                    "zh": "被选中的查询只关注了被选中位置上的那些键。ProbSparse 只精简查询，不精简键：每个被选中的查询"
                    "都在全部 L_K 个键上做注意力。",
                },
            ),
            Mistake(
                "WRONG_ROWS",
                _wrong_rows,
                {
                    "en": "The chosen queries' outputs were written to rows 0 … u − 1. Write each to its own query's "
                    "position: row selected[b, h, r] gets output r (index with the selection, or scatter along "
                    "dim=-2).",
                    "zh": "被选中查询的输出写到了第 0 … u − 1 行。每个输出都应写回它自己那个查询的位置：第 "
                    "selected[b, h, r] 行放第 r 个输出（用选中的索引去索引，或沿 dim=-2 做 scatter）。",
                },
            ),
            Mistake(
                "SOFTMAX_OVER_ALL_QUERIES",
                _softmax_over_all_queries,
                {
                    "en": "The softmax runs over the queries (dim=-2) of the full (B, H, L_Q, L_K) score matrix, so each "
                    "key's column sums to 1. Each chosen query's weights sum to 1 over the keys: softmax over the "
                    "last axis, dim=-1.",
                    "zh": "softmax 是在完整的 (B, H, L_Q, L_K) 分数矩阵的查询这一维（dim=-2）上做的，于是每个键所在的列"
                    "之和为 1。应当是每个被选中查询对所有键的权重之和为 1：在最后一维 dim=-1 上做 softmax。",
                },
            ),
            Mistake("FLOAT32", _float32(_top_u_reference), FLOAT32_HINT),
        ),
    )
)


# ----------------------------------------------------------------------------- 05.causal_prob_sparse


def _causal_case(g, batch, heads, length, d, d_v, u, *, selected=None, first=0, dtype=torch.float32):
    query, key, value = (randn(g, batch, heads, length, width) for width in (d, d, d_v))
    if selected is None:  # each (batch item, head) its own u distinct positions from first … L − 1, unsorted
        choices = [torch.randperm(length - first, generator=g)[:u] + first for _ in range(batch * heads)]
        selected = torch.stack(choices).view(batch, heads, u)
    return query.to(dtype), key.to(dtype), value.to(dtype), selected


def _causal_cases(generator):
    # (B, H, L, D, D_v, u). First B = H = 2, D = D_v and 1 < u < L, position 0 never chosen (so
    # that every mistake runs and none gives a whole row of NaN there); then every size different;
    # one batch item, three heads, u = 1; every position chosen, in shuffled order (full causal
    # attention); length 1; positions 0 and L − 1 chosen, out of order; and float64.
    g = generator
    ends = torch.tensor([[[8, 0, 3, 5], [2, 7, 0, 6]]])  # (1, 2, 4)
    return [
        _causal_case(g, 2, 2, 6, 4, 4, 3, first=1),
        _causal_case(g, 3, 2, 7, 3, 5, 2),
        _causal_case(g, 1, 3, 8, 8, 2, 1),
        _causal_case(g, 2, 1, 5, 5, 3, 5),
        _causal_case(g, 2, 2, 1, 4, 4, 1),
        _causal_case(g, 1, 2, 9, 16, 6, 4, selected=ends),
        _causal_case(g, 2, 2, 6, 6, 6, 3, dtype=torch.float64),
    ]


def _causal_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, one batch item
    with several heads and u = 1, every position chosen in shuffled order, length 1, positions 0 and
    L − 1 chosen out of order, float64), distinct positions as the text says, with a sequence longer
    than any public one."""
    g = generator
    length = _draw(g, 4, 9)
    ends = []
    for _ in range(2 * 2):  # (B, H) = (1, 4) or (2, 2): L − 1 first, 0 last, distinct others between
        middle = torch.randperm(length - 2, generator=g)[: _draw(g, 0, length - 2)] + 1
        ends.append(torch.cat([torch.tensor([length - 1]), middle, torch.tensor([0])]))
    u = min(len(row) for row in ends)
    ends = torch.stack([torch.cat([row[:-1][: u - 1], row[-1:]]) for row in ends])
    batch = _draw(g, 1, 2)
    full = _draw(g, 2, 6)
    return [
        _causal_case(g, _draw(g, 2, 3), _draw(g, 2, 3), _draw(g, 10, 12), _draw(g, 2, 6), _draw(g, 2, 6),
                     _draw(g, 2, 6)),
        _causal_case(g, 1, _draw(g, 2, 4), _draw(g, 2, 9), _draw(g, 2, 8), _draw(g, 2, 5), 1),
        _causal_case(g, _draw(g, 1, 3), _draw(g, 1, 2), full, _draw(g, 2, 6), _draw(g, 2, 4), full),  # all, shuffled
        _causal_case(g, _draw(g, 1, 3), _draw(g, 1, 3), 1, _draw(g, 2, 6), _draw(g, 2, 6), 1),  # length 1
        _causal_case(g, batch, 4 // batch, length, _draw(g, 2, 16), _draw(g, 2, 6), u,
                     selected=ends.view(batch, 4 // batch, u)),  # positions 0 and L − 1, out of order
        _causal_case(g, _draw(g, 1, 2), _draw(g, 1, 3), _draw(g, 3, 8), _draw(g, 2, 6), _draw(g, 2, 6),
                     _draw(g, 1, 3), dtype=torch.float64),
    ]


def _visible(selected, length):
    """(B, H, u, L) bool: True where the chosen query at position p may see key j, j ≤ p."""
    return torch.arange(length, device=selected.device) <= selected.unsqueeze(-1)


def _masked_attend(query, key, value, selected, keep, *, scale=True):
    """(B, H, u, D_v): the chosen queries' attention over the keys `keep` allows."""
    scores = _rows(query, selected) @ key.transpose(-2, -1)  # (B, H, u, L)
    if scale:
        scores = scores / math.sqrt(query.shape[-1])
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ value


def _causal_reference(query, key, value, selected):
    attended = _masked_attend(query, key, value, selected, _visible(selected, query.shape[-2]))  # (B, H, u, D_v)
    return _put(_cumulative_mean(value), selected, attended)  # (B, H, L, D_v)


def _lazy_sees_future(query, key, value, selected):
    attended = _masked_attend(query, key, value, selected, _visible(selected, query.shape[-2]))
    return _put(_mean_of_values(value, query.shape[-2]), selected, attended)


def _chosen_sees_future(query, key, value, selected):
    everything = torch.ones(*selected.shape, query.shape[-2], dtype=torch.bool)
    return _put(_cumulative_mean(value), selected, _masked_attend(query, key, value, selected, everything))


def _with_lazy(query, key, value, selected, lazy):
    attended = _masked_attend(query, key, value, selected, _visible(selected, query.shape[-2]))
    return _put(lazy, selected, attended)


def _cumsum_not_mean(query, key, value, selected):
    return _with_lazy(query, key, value, selected, value.cumsum(-2))


def _lazy_excludes_self(query, key, value, selected):
    before = torch.arange(value.shape[-2], dtype=value.dtype).unsqueeze(-1)  # i values before position i
    return _with_lazy(query, key, value, selected, (value.cumsum(-2) - value) / before)  # row 0: 0 / 0


def _lazy_count_off_by_one(query, key, value, selected):
    counts = torch.arange(value.shape[-2], dtype=value.dtype).unsqueeze(-1)  # 0 … L − 1
    return _with_lazy(query, key, value, selected, value.cumsum(-2) / counts)


def _cumsum_over_l(query, key, value, selected):
    return _with_lazy(query, key, value, selected, value.cumsum(-2) / value.shape[-2])  # every row divided by L


def _causal_shared_selection(query, key, value, selected):
    B, H, u = selected.shape
    return _causal_reference(query, key, value, selected[0, 0].expand(B, H, u))  # item 0, head 0's positions


def _with_keep(query, key, value, selected, keep, scale=True):
    attended = _masked_attend(query, key, value, selected, keep, scale=scale)
    return _put(_cumulative_mean(value), selected, attended)


def _mask_by_row(query, key, value, selected):
    u, length = selected.shape[-1], query.shape[-2]
    by_row = torch.arange(length) <= torch.arange(u).unsqueeze(-1)  # rows 0 … u − 1 of the L × L causal mask
    return _with_keep(query, key, value, selected, by_row.expand(*selected.shape, length))


def _excludes_self(query, key, value, selected):
    return _with_keep(query, key, value, selected, torch.arange(query.shape[-2]) < selected.unsqueeze(-1))


def _mask_flipped(query, key, value, selected):
    return _with_keep(query, key, value, selected, torch.arange(query.shape[-2]) >= selected.unsqueeze(-1))


def _causal_no_scale(query, key, value, selected):
    return _with_keep(query, key, value, selected, _visible(selected, query.shape[-2]), scale=False)


def _masked_with_zero(query, key, value, selected):
    scores = _rows(query, selected) @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (B, H, u, L)
    future = ~_visible(selected, query.shape[-2])
    return _put(_cumulative_mean(value), selected, torch.softmax(scores.masked_fill(future, 0.0), dim=-1) @ value)


def _mask_after_softmax(query, key, value, selected):
    scores = _rows(query, selected) @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (B, H, u, L)
    weights = torch.softmax(scores, dim=-1) * _visible(selected, query.shape[-2])  # rows no longer sum to 1
    return _put(_cumulative_mean(value), selected, weights @ value)


def _causal_scale_by_d_v(query, key, value, selected):
    scores = _rows(query, selected) @ key.transpose(-2, -1) / math.sqrt(value.shape[-1])
    keep = _visible(selected, query.shape[-2])
    return _put(_cumulative_mean(value), selected, torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ value)


def _causal_scatter_dropped(query, key, value, selected):
    context = _cumulative_mean(value)
    attended = _masked_attend(query, key, value, selected, _visible(selected, query.shape[-2]))
    context.scatter(-2, selected.unsqueeze(-1).expand(*selected.shape, value.shape[-1]), attended)
    return context  # scatter is out of place: its result was dropped


def _ignores_selection(query, key, value, selected):
    length = query.shape[-2]
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # every query chosen
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ value


register(
    Exercise(
        id="05.causal_prob_sparse",
        reference=_causal_reference,
        cases=_causal_cases,
        hidden=_causal_hidden,
        mistakes=(
            Mistake(
                "LAZY_SEES_FUTURE",
                _lazy_sees_future,
                {
                    "en": "The lazy queries got the mean of all values, later positions included. That is right "
                    "without a mask, but in a decoder it leaks the future (the widely copied re-implementation has no "
                    "causal mode and does this). Lazy query i gets the mean of v_0 … v_i: value.cumsum(-2) "
                    "divided by i + 1.",
                    "zh": "惰性查询得到的是所有值的平均，连后面位置的值也算了进去。不加掩码时这样做没错，但在解码器里它会"
                    "泄露未来的信息（那份广为流传的重写版没有因果模式，做的正是这件事）。惰性查询 i 应得到 "
                    "v_0 … v_i 的平均：value.cumsum(-2) 除以 i + 1。",
                },
            ),
            Mistake(
                "CHOSEN_SEES_FUTURE",
                _chosen_sees_future,
                {
                    "en": "The chosen queries attend to every key, later ones too: nothing masks their scores. A "
                    "chosen query at position p may see keys 0 … p only: set the scores of keys j > p to −inf "
                    "before the softmax.",
                    "zh": "被选中的查询关注了所有键，包括后面位置的键：它们的分数没有被遮住。位置 p 上被选中的查询只能看到"
                    "第 0 … p 个键：在 softmax 之前，把 j > p 的键的分数设为 −inf。",
                },
            ),
            Mistake(
                "CUMSUM_NOT_MEAN",
                _cumsum_not_mean,
                {
                    "en": "Lazy query i got the cumulative sum v_0 + … + v_i, as in the official Informer code's "
                    "causal mode (value.cumsum(-2)), a defect: the sum grows with i. A lazy query gets what a "
                    "uniform softmax over keys 0 … i gives, their mean: divide the cumulative sum by i + 1.",
                    "zh": "惰性查询 i 得到的是累积和 v_0 + … + v_i，和 Informer 官方代码的因果模式（value.cumsum(-2)）"
                    "一样，而这是个缺陷：这个和随 i 增大。惰性查询应得到在第 0 … i 个键上做均匀 softmax 的结果，也就是"
                    "它们的平均值：把累积和除以 i + 1。",
                },
            ),
            Mistake(
                "LAZY_COUNT_OFF_BY_ONE",
                _lazy_count_off_by_one,
                {
                    "en": "The cumulative sum at position i is divided by i (torch.arange(L)), so position 0 divides "
                    "by zero. It adds up i + 1 values, v_0 … v_i: divide by torch.arange(1, L + 1).",
                    "zh": "位置 i 上的累积和除以的是 i（torch.arange(L)），于是位置 0 除以了零。它累加的是 v_0 … v_i 这 "
                    "i + 1 个值：应除以 torch.arange(1, L + 1)。",
                },
            ),
            Mistake(
                "LAZY_EXCLUDES_SELF",
                _lazy_excludes_self,
                {
                    "en": "Lazy query i got the mean of v_0 … v_{i−1}, without its own value (and position 0 gets "
                    "nothing to average). A causal query sees its own position too: the mean of v_0 … v_i.",
                    "zh": "惰性查询 i 得到的是 v_0 … v_{i−1} 的平均，没有包含它自己的值（位置 0 于是没有任何值可以平均）。"
                    "因果查询也能看到自己所在的位置：应取 v_0 … v_i 的平均。",
                },
            ),
            Mistake(
                "MASK_BY_ROW",
                _mask_by_row,
                {
                    "en": "The mask of chosen row r was built from the row number r, as if the chosen queries were "
                    "positions 0 … u − 1 (rows 0 … u − 1 of the L × L causal mask). Build it from the query's "
                    "position selected[b, h, r]: key j is visible when j ≤ selected[b, h, r]. The positions come "
                    "in any order.",
                    "zh": "第 r 个被选中行的掩码是按行号 r 构造的，就好像被选中的查询位于第 0 … u − 1 个位置（取了 L × L "
                    "因果掩码的第 0 … u − 1 行）。应按该查询的位置 selected[b, h, r] 来构造：当 j ≤ selected[b, h, r] "
                    "时第 j 个键可见。这些位置可以是任意顺序。",
                },
            ),
            Mistake(
                "EXCLUDES_SELF",
                _excludes_self,
                {
                    "en": "A chosen query at position p attends to keys 0 … p − 1 only, so a query chosen at position "
                    "0 sees nothing. A causal query sees its own position too: keys 0 … p, j ≤ p (tril with the "
                    "diagonal).",
                    "zh": "位置 p 上被选中的查询只关注了第 0 … p − 1 个键，于是位置 0 上被选中的查询什么也看不到。"
                    "因果查询也能看到自己所在的位置：第 0 … p 个键，即 j ≤ p（包含对角线的 tril）。",
                },
            ),
            Mistake(
                "MASK_FLIPPED",
                _mask_flipped,
                {
                    "en": "The mask is flipped: a chosen query at position p attends to keys p … L − 1, its future, "
                    "and not to its past (triu where tril is meant). Keep the keys j ≤ p.",
                    "zh": "掩码方向反了：位置 p 上被选中的查询关注的是第 p … L − 1 个键，也就是它的未来，而不是它的过去"
                    "（该用 tril 的地方用了 triu）。应保留 j ≤ p 的键。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _causal_no_scale,
                {
                    "en": "The chosen queries' scores are not divided by √D (the widely copied re-implementation "
                    "stores its scale and never applies it). Their attention is softmax(q·kᵀ/√D) over the visible keys, "
                    "times V.",
                    "zh": "被选中查询的分数没有除以 √D（那份广为流传的重写版保存了 scale，却从未用上）。它们的注意力"
                    "是在可见的键上做 softmax(q·kᵀ/√D)，再乘以 V。",
                },
            ),
            Mistake(
                "MASKED_WITH_ZERO",
                _masked_with_zero,
                {
                    "en": "The future keys' scores were set to 0, not to −inf: a score of 0 still gets weight "
                    "e⁰ = 1 in the softmax, so every chosen query sees the future. Fill with float('-inf').",
                    "zh": "未来键的分数被设成了 0，而不是 −inf：分数为 0 在 softmax 里仍有 e⁰ = 1 的权重，于是每个被选中"
                    "的查询都看到了未来。应填入 float('-inf')。",
                },
            ),
            Mistake(
                "MASK_AFTER_SOFTMAX",
                _mask_after_softmax,
                {
                    "en": "The mask was applied after the softmax (weights times keep): the future gets weight 0, "
                    "but the rows no longer sum to 1. Mask the scores with −inf before the softmax.",
                    "zh": "掩码是在 softmax 之后才乘上的（权重乘以保留掩码）：未来的权重是 0 了，但每一行加起来不再等于 1。"
                    "应在 softmax 之前用 −inf 遮住分数。",
                },
            ),
            Mistake(
                "SCALE_BY_D_V",
                _causal_scale_by_d_v,
                {
                    "en": "The scores are divided by √D_v, the values' width. The scale comes from the dot products: "
                    "divide by √D, D = query.shape[-1].",
                    "zh": "分数除以的是值的宽度 √D_v。缩放来自点积本身：应除以 √D，D = query.shape[-1]。",
                },
            ),
            Mistake(
                "SCATTER_RESULT_DROPPED",
                _causal_scatter_dropped,
                {
                    "en": "Every query got the cumulative mean: the chosen queries' outputs never reached the "
                    "result. Tensor.scatter is out of place: it returns a new tensor. Keep what it returns, "
                    "context = context.scatter(...).",
                    "zh": "每个查询得到的都是累积均值：被选中查询的输出根本没写进结果。Tensor.scatter 不是原地操作，"
                    "它返回一个新张量：应保留它的返回值，context = context.scatter(...)。",
                },
            ),
            Mistake(
                "IGNORES_SELECTION",
                _ignores_selection,
                {
                    "en": "Every query got causal attention, as if all were chosen, and selected was not used. Only the "
                    "queries at the positions in selected attend; every other query gets the cumulative mean "
                    "of the values.",
                    "zh": "每个查询都做了因果注意力，就好像所有查询都被选中了，selected 没有用上。只有 selected 中那些位置上"
                    "的查询做注意力；其余每个查询都得到值的累积平均。",
                },
            ),
            Mistake(
                "CUMSUM_OVER_L",
                _cumsum_over_l,
                {
                    "en": "Every lazy query's running sum is divided by L, the length of the whole sequence. Query i "
                    "averages the i + 1 values v_0 … v_i: divide row i by i + 1 (torch.arange(1, L + 1)).",
                    "zh": "每个惰性查询的累加和都除以了 L，即整个序列的长度。查询 i 求的是 v_0 … v_i 这 i + 1 个值的平均："
                    "第 i 行应除以 i + 1（torch.arange(1, L + 1)）。",
                },
            ),
            Mistake("FLOAT32", _float32(_causal_reference), FLOAT32_HINT),
            Mistake(
                "SHARED_SELECTION",
                _causal_shared_selection,
                {
                    "en": "The positions chosen for batch item 0, head 0 (selected[0, 0]) served every item and head. "
                    "Each (batch item, head) has its own chosen positions: row selected[b, h] is for item b, "
                    "head h (gather and scatter with the whole (B, H, u) tensor).",
                    "zh": "第 0 个批量样本第 0 个头选中的位置（selected[0, 0]）被所有样本和所有头共用了。每个（批量样本，头）"
                    "都有自己选中的位置：selected[b, h] 这一行属于第 b 个样本的第 h 个头（用整个 (B, H, u) 张量去做 "
                    "gather 和 scatter）。",
                },
            ),
        ),
    )
)
