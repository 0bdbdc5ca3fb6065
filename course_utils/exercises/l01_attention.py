"""Lesson 01's exercises: attention basics."""

import math

import torch

from .. import attention
from .registry import Exercise, Mistake, randn, register


def _qkv(g, batch, l_q, l_k, d_k, d_v):
    return randn(g, batch, l_q, d_k), randn(g, batch, l_k, d_k), randn(g, batch, l_k, d_v)


def _attention_cases(generator):
    # The first case is square (L_q = L_k = d_k = d_v), so shape mistakes still run there and can
    # be recognised by their values; the others have L_q != L_k, length 1, and a large d_k,
    # where the scale matters most.
    return [
        _qkv(generator, 2, 4, 4, 4, 4),
        _qkv(generator, 3, 5, 7, 8, 6),
        _qkv(generator, 1, 1, 1, 16, 3),
        _qkv(generator, 2, 3, 9, 64, 2),
    ]


def _attend(scores, value, dim=-1):
    weights = torch.softmax(scores, dim=dim)
    return weights @ value, weights


register(
    Exercise(
        id="01.scaled_dot",
        reference=lambda q, k, v: attention.scaled_dot_product_attention(q, k, v),
        cases=_attention_cases,
        mistakes=(
            Mistake(
                "NO_SCALE",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1), v),
                {
                    "en": "The scores are not divided by √d_k, so for large d_k the softmax saturates.",
                    "zh": "注意力分数没有除以 √d_k；d_k 较大时 softmax 会饱和。",
                },
            ),
            Mistake(
                "SCALE_DK",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1) / q.shape[-1], v),
                {
                    "en": "The scores are divided by d_k; divide by its square root, √d_k.",
                    "zh": "分数除以了 d_k；应除以它的平方根 √d_k。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, dim=-2),
                {
                    "en": "The softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: use dim=-1.",
                    "zh": "softmax 作用在了查询维度（dim=-2）上；每个查询对所有键的权重之和应为 1，请用 dim=-1。",
                },
            ),
            Mistake(
                "TRANSPOSE",
                lambda q, k, v: _attend(q.transpose(-2, -1) @ k / math.sqrt(q.shape[-1]), v),
                {
                    "en": "The query was transposed instead of the key: scores are Q Kᵀ, shape (L_q, L_k).",
                    "zh": "转置的是查询而不是键：分数应为 Q Kᵀ，形状为 (L_q, L_k)。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                lambda q, k, v: attention.scaled_dot_product_attention(q, k, v)[::-1],
                {
                    "en": "The return order is swapped: return (output, weights).",
                    "zh": "返回顺序颠倒了：应返回 (output, weights)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 01.softmax

def _softmax_cases(generator):
    # First a batch of square score matrices (B = L_q = L_k = 4), where a forgotten keepdim still
    # broadcasts and runs; then L_q != L_k; then scores so large (or so negative) that exp()
    # overflows (or underflows) in float32 unless the row's maximum is subtracted first.
    g = generator
    return [
        (2.0 * randn(g, 4, 4, 4),),
        (3.0 * randn(g, 3, 5, 7),),
        (20.0 * randn(g, 2, 3, 6) + 500.0,),
        (20.0 * randn(g, 5, 8) - 500.0,),
    ]


def _exp_shifted(scores):
    return (scores - scores.amax(dim=-1, keepdim=True)).exp()


register(
    Exercise(
        id="01.softmax",
        reference=lambda scores: torch.softmax(scores, dim=-1),
        cases=_softmax_cases,
        mistakes=(
            Mistake(
                "NO_MAX_SHIFT",
                lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True),
                {
                    "en": "exp() overflows to inf for scores above about 88 (and underflows to 0 far below), "
                    "giving NaN: subtract each row's maximum before exp(); softmax does not change.",
                    "zh": "分数大于约 88 时 exp() 会上溢为 inf（远小于 0 时下溢为 0），结果变成 NaN："
                    "先减去每一行的最大值再取 exp()，softmax 的结果不变。",
                },
            ),
            Mistake(
                "WRONG_DIM",
                lambda s: torch.softmax(s, dim=-2),
                {
                    "en": "The softmax runs over the wrong axis: normalise over the last axis (dim=-1), "
                    "so that each row sums to 1.",
                    "zh": "softmax 作用在了错误的维度上：应沿最后一维（dim=-1）归一化，使每一行之和为 1。",
                },
            ),
            Mistake(
                "SUM_ALL",
                lambda s: (s - s.max()).exp() / (s - s.max()).exp().sum(),
                {
                    "en": "The max and the sum run over the whole tensor; take them over the last axis "
                    "(dim=-1, keepdim=True), row by row.",
                    "zh": "最大值和求和是对整个张量做的；应沿最后一维逐行计算（dim=-1, keepdim=True）。",
                },
            ),
            Mistake(
                "NO_NORMALISE",
                _exp_shifted,
                {
                    "en": "The exponentials are not divided by their sum, so the rows do not sum to 1.",
                    "zh": "取指数后没有除以它们的和，所以每一行之和不为 1。",
                },
            ),
            Mistake(
                "KEEPDIM_MISSING",
                lambda s: (s - s.amax(dim=-1)).exp() / (s - s.amax(dim=-1)).exp().sum(dim=-1),
                {
                    "en": "The row maxima and sums lost their last axis, so they broadcast along the wrong "
                    "axis (or fail to): pass keepdim=True.",
                    "zh": "每行的最大值与和丢掉了最后一维，于是沿错误的维度广播（或无法广播）：请传入 keepdim=True。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 01.additive_scores

def _additive_case(g, batch, l_q, l_k, d_q, d_k, d_h):
    return (
        randn(g, batch, l_q, d_q),
        randn(g, batch, l_k, d_k),
        randn(g, d_q, d_h) / math.sqrt(d_q),
        randn(g, d_k, d_h) / math.sqrt(d_k),
        randn(g, d_h),
    )


def _additive_cases(generator):
    # (batch, L_q, L_k, d_q, d_k, d_h). The first case is square everywhere, so mistakes that mix
    # up axes or weights still run there; the others have L_q != L_k, d_q != d_k and length 1.
    return [
        _additive_case(generator, 2, 4, 4, 4, 4, 4),
        _additive_case(generator, 3, 5, 7, 6, 3, 8),
        _additive_case(generator, 1, 1, 1, 2, 5, 4),
        _additive_case(generator, 2, 6, 2, 8, 8, 16),
    ]


def _pairs(q, k):
    """q: (..., L_q, d_h), k: (..., L_k, d_h) -> (..., L_q, L_k, d_h), the sum for every pair."""
    return q.unsqueeze(-2) + k.unsqueeze(-3)


register(
    Exercise(
        id="01.additive_scores",
        reference=lambda q, k, w_q, w_k, v: attention.additive_scores(q, k, w_q, w_k, v),
        cases=_additive_cases,
        mistakes=(
            Mistake(
                "TANH_MISSING",
                lambda q, k, w_q, w_k, v: _pairs(q @ w_q, k @ w_k) @ v,
                {
                    "en": "tanh is missing: without it the score is linear and splits into a part of q plus "
                    "a part of k, and the softmax ignores the part of q. Apply tanh before multiplying by v.",
                    "zh": "少了 tanh：没有它，分数是线性的，可拆成只含 q 的一项加只含 k 的一项，"
                    "而 softmax 会把只含 q 的那一项抵消掉。请在乘以 v 之前先做 tanh。",
                },
            ),
            Mistake(
                "TANH_OUTSIDE",
                lambda q, k, w_q, w_k, v: torch.tanh(_pairs(q @ w_q, k @ w_k) @ v),
                {
                    "en": "tanh is applied after the product with v; it belongs to the hidden layer: "
                    "vᵀ tanh(W_q q + W_k k).",
                    "zh": "tanh 放在了与 v 相乘之后；它属于隐藏层：vᵀ tanh(W_q q + W_k k)。",
                },
            ),
            Mistake(
                "TRANSPOSED",
                lambda q, k, w_q, w_k, v: torch.tanh((q @ w_q).unsqueeze(-3) + (k @ w_k).unsqueeze(-2)) @ v,
                {
                    "en": "The scores come out as (L_k, L_q): unsqueeze the projected queries at -2 and the "
                    "projected keys at -3, so that the result is (..., L_q, L_k).",
                    "zh": "分数的形状成了 (L_k, L_q)：投影后的查询应在 -2 处、投影后的键应在 -3 处 unsqueeze，"
                    "结果才是 (..., L_q, L_k)。",
                },
            ),
            Mistake(
                "NOT_PAIRWISE",
                lambda q, k, w_q, w_k, v: torch.tanh(q @ w_q + k @ w_k) @ v,
                {
                    "en": "The projected queries and keys are added position by position, which only scores "
                    "query i against key i (and fails when L_q != L_k). Unsqueeze them so that broadcasting "
                    "pairs every query with every key.",
                    "zh": "投影后的查询和键是按位置逐个相加的，只算出了第 i 个查询与第 i 个键的分数"
                    "（L_q != L_k 时直接报错）。先 unsqueeze，再靠广播让每个查询与每个键配对。",
                },
            ),
            Mistake(
                "SWAPPED_WEIGHTS",
                lambda q, k, w_q, w_k, v: torch.tanh(_pairs(q @ w_k, k @ w_q)) @ v,
                {
                    "en": "w_query and w_key are swapped: project the queries with w_query (d_q, d_h) and the "
                    "keys with w_key (d_k, d_h).",
                    "zh": "w_query 与 w_key 用反了：查询应乘 w_query (d_q, d_h)，键应乘 w_key (d_k, d_h)。",
                },
            ),
        ),
    )
)
