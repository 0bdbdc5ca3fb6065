"""Lesson 03's exercises: self-attention, cross-attention, and reading an alignment off the weights.

The learner's functions take the projection matrices as plain tensors (``x @ w_q``), without
biases or an output projection, so that the check can feed them any shapes.

Every argument varies on its own across the cases (batch 1, length 1, L_q != L_kv, E_q != E_kv,
d_k != d_v, E, d_k and the number of keys all different from each other), so a function that
ignores an argument, or uses one size where another is meant (the scale √d_k), fails somewhere.
The projection matrices are independent random tensors, so a function that swaps two of them
fails too. The grader's hidden cases (``hidden``) keep the public edges at sizes drawn from the
teacher's seed, and always hold shapes no public case has.
"""

import math

import torch

from course_utils import attention

from .l01_attention import MATMUL_ORDER_HINT, SOFTMAX_BATCH_DIM_HINT
from .registry import Exercise, Mistake, randn, register


def _draw(generator, low, high):
    """An integer drawn uniformly from [low, high] by the grader's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


def _attend(q, k, v, divisor=None, dim=-1, softmax_first=False, softmax=True, value_first=False):
    """softmax(q kᵀ / divisor) v along `dim` (divisor √d_k by default), returning (output, weights);
    the variants make the mistakes below (`value_first`: v @ weights)."""
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    scores = q @ k.transpose(-2, -1)  # (B, L_q, L_k)
    if not softmax:
        weights = scores / divisor
    elif softmax_first:
        weights = torch.softmax(scores, dim=dim) / divisor
    else:
        weights = torch.softmax(scores / divisor, dim=dim)
    return (v @ weights if value_first else weights @ v), weights


#: Hints several exercises share.
SWAPPED_RETURN_HINT = {
    "en": "The return order is swapped: return (output, weights), output first.",
    "zh": "返回顺序颠倒了：应返回 (output, weights)，输出在前。",
}
NO_SCALE_HINT = {
    "en": "The scores are not divided by √d_k, so for large d_k the softmax saturates.",
    "zh": "注意力分数没有除以 √d_k；d_k 较大时 softmax 会饱和。",
}
SOFTMAX_BEFORE_SCALE_HINT = {
    "en": "The softmax comes before the division by √d_k, so each query's weights sum to 1/√d_k, not 1. "
    "Scale the scores first, then take the softmax.",
    "zh": "先做了 softmax 再除以 √d_k，于是每个查询的权重之和是 1/√d_k 而不是 1。应先缩放分数，再做 softmax。",
}
SCALE_BY_D_K_HINT = {
    "en": "The scores are divided by d_k; divide by its square root, √d_k (math.sqrt(d_k)).",
    "zh": "分数除以的是 d_k；应除以它的平方根 √d_k（math.sqrt(d_k)）。",
}
SCALE_BY_D_V_HINT = {
    "en": "The scores are divided by √d_v, the size of the values (w_v.shape[-1]); divide by √d_k, the size of "
    "the projected queries and keys that the dot product sums over (w_q.shape[-1]).",
    "zh": "分数除以的是 √d_v（值的维度 w_v.shape[-1]）；应除以 √d_k，即点积所求和的、投影后查询和键的维度（w_q.shape[-1]）。",
}
WEIGHTS_TRANSPOSED_HINT = {
    "en": "The projection matrices were transposed (x @ w_q.T, the way nn.Linear applies its weight): here each "
    "is stored to be used as it is, w_q of shape (E, d_k): Q = x @ w_q.",
    "zh": "投影矩阵被转置了（x @ w_q.T，这是 nn.Linear 使用其权重的方式）：这里的矩阵按原样使用即可，"
    "w_q 的形状为 (E, d_k)：Q = x @ w_q。",
}
NO_SOFTMAX_HINT = {
    "en": "There is no softmax: the weights are the scaled scores themselves. Apply torch.softmax(..., dim=-1) "
    "so that each query's weights are positive and sum to 1.",
    "zh": "漏了 softmax：权重就是缩放后的分数本身。要用 torch.softmax(..., dim=-1)，"
    "使每个查询的权重都为正且和为 1。",
}


# ----------------------------------------------------------------------------- 03.self_attention

def _self_case(g, batch, length, embed, d_k, d_v, dtype=torch.float32):
    case = (
        randn(g, batch, length, embed),
        randn(g, embed, d_k) / math.sqrt(embed),
        randn(g, embed, d_k) / math.sqrt(embed),
        randn(g, embed, d_v) / math.sqrt(embed),
    )
    return tuple(t.to(dtype) for t in case)


def _self_cases(generator):
    # (batch, L, E, d_k, d_v). First square everywhere (L = E = d_k = d_v), so that mistakes which
    # mix up sizes or weights still run and are recognised by their values; then L, E, d_k and d_v
    # all different, batch 1 with E < d_k, length 1, a wide d_k where the scale matters most, and
    # float64.
    return [
        _self_case(generator, 2, 4, 4, 4, 4),
        _self_case(generator, 3, 5, 6, 3, 7),
        _self_case(generator, 1, 7, 3, 5, 4),
        _self_case(generator, 3, 1, 5, 8, 2),
        _self_case(generator, 2, 6, 8, 32, 3),
        _self_case(generator, 2, 3, 5, 4, 6, dtype=torch.float64),
    ]


def _self_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (L, E, d_k and d_v apart, batch 1
    with E < d_k, length 1, a wide d_k, float64), with a sequence longer than any public one."""
    g = generator
    e, n = _draw(g, 2, 4), _draw(g, 5, 6)
    return [
        _self_case(g, 2, n, n, n, n),  # square: every mistake runs
        _self_case(g, _draw(g, 2, 3), _draw(g, 8, 10), _draw(g, 2, 8), _draw(g, 2, 8), _draw(g, 2, 8)),
        _self_case(g, 1, _draw(g, 2, 7), e, _draw(g, e + 1, 9), _draw(g, 2, 6)),  # batch 1, E < d_k
        _self_case(g, _draw(g, 2, 4), 1, _draw(g, 2, 7), _draw(g, 2, 9), _draw(g, 2, 6)),  # length 1
        _self_case(g, _draw(g, 1, 3), _draw(g, 2, 7), _draw(g, 4, 9), _draw(g, 24, 48), _draw(g, 2, 5)),  # wide d_k
        _self_case(g, _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 7),
                   dtype=torch.float64),
    ]


def _self_reference(x, w_q, w_k, w_v):
    return attention.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


register(
    Exercise(
        id="03.self_attention",
        reference=_self_reference,
        cases=_self_cases,
        hidden=_self_hidden,
        mistakes=(
            Mistake(
                "SWAPPED_RETURN",
                lambda x, w_q, w_k, w_v: _self_reference(x, w_q, w_k, w_v)[::-1],
                SWAPPED_RETURN_HINT,
            ),
            Mistake(
                "NO_SCALE",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, divisor=1.0),
                NO_SCALE_HINT,
            ),
            Mistake(
                "SCALE_BY_E",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, divisor=math.sqrt(x.shape[-1])),
                {
                    "en": "The scores are divided by √E, the size of x; divide by √d_k, the size of the "
                    "projected queries and keys (w_q.shape[-1]).",
                    "zh": "分数除以的是 √E（x 的特征数）；应除以 √d_k，即投影后查询和键的维度（w_q.shape[-1]）。",
                },
            ),
            Mistake(
                "SCALE_BY_L",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, divisor=math.sqrt(x.shape[-2])),
                {
                    "en": "The scores are divided by √L, the square root of the number of keys (scores.shape[-1]); "
                    "divide by √d_k, the size of each query and key (w_q.shape[-1]).",
                    "zh": "分数除以的是 √L（键的个数 scores.shape[-1] 的平方根）；"
                    "应除以 √d_k，即每个查询和键的维度（w_q.shape[-1]）。",
                },
            ),
            Mistake(
                "SCALE_BY_D_K",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, divisor=w_q.shape[-1]),
                SCALE_BY_D_K_HINT,
            ),
            Mistake(
                "SOFTMAX_BEFORE_SCALE",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, softmax_first=True),
                SOFTMAX_BEFORE_SCALE_HINT,
            ),
            Mistake(
                "NO_SOFTMAX",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, softmax=False),
                NO_SOFTMAX_HINT,
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, dim=-2),
                {
                    "en": "The softmax runs over the queries (dim=-2); each query's weights over the keys "
                    "must sum to 1: use dim=-1.",
                    "zh": "softmax 作用在了查询维度（dim=-2）上；每个查询对所有键的权重之和应为 1，请用 dim=-1。",
                },
            ),
            Mistake(
                "QK_SWAPPED",
                lambda x, w_q, w_k, w_v: _attend(x @ w_k, x @ w_q, x @ w_v),
                {
                    "en": "The queries are projected with w_k and the keys with w_q, which transposes the scores: "
                    "Q = x @ w_q, K = x @ w_k.",
                    "zh": "查询用了 w_k 投影，键用了 w_q 投影，分数矩阵因此被转置了：应为 Q = x @ w_q，K = x @ w_k。",
                },
            ),
            Mistake(
                "K_FROM_W_Q",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_q, x @ w_v),
                {
                    "en": "The keys are projected with w_q, the queries' matrix; each has its own: K = x @ w_k.",
                    "zh": "键用的是查询的矩阵 w_q；二者各有各的矩阵：K = x @ w_k。",
                },
            ),
            Mistake(
                "SCALE_BY_D_V",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, divisor=math.sqrt(w_v.shape[-1])),
                SCALE_BY_D_V_HINT,
            ),
            Mistake(
                "SOFTMAX_BATCH_DIM",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, dim=0),
                SOFTMAX_BATCH_DIM_HINT,
            ),
            Mistake(
                "MATMUL_ORDER",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v, value_first=True),
                MATMUL_ORDER_HINT,
            ),
            Mistake(
                "WEIGHTS_TRANSPOSED",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q.transpose(0, 1), x @ w_k.transpose(0, 1), x @ w_v.transpose(0, 1)),
                WEIGHTS_TRANSPOSED_HINT,
            ),
            Mistake(
                "V_NOT_PROJECTED",
                lambda x, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x),
                {
                    "en": "The values are x itself; project them too: V = x @ w_v.",
                    "zh": "值直接用了 x 本身；值也要投影：V = x @ w_v。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 03.cross_attention

def _cross_case(g, batch, l_q, l_kv, e_q, e_kv, d_k, d_v, dtype=torch.float32):
    case = (
        randn(g, batch, l_q, e_q),
        randn(g, batch, l_kv, e_kv),
        randn(g, e_q, d_k) / math.sqrt(e_q),
        randn(g, e_kv, d_k) / math.sqrt(e_kv),
        randn(g, e_kv, d_v) / math.sqrt(e_kv),
    )
    return tuple(t.to(dtype) for t in case)


def _cross_cases(generator):
    # (batch, L_q, L_kv, E_q, E_kv, d_k, d_v). First square everywhere, so every mistake runs and
    # is recognised by its values. Then L_q, L_kv, E_q, E_kv, d_k and d_v all different, where
    # projecting the wrong side crashes (as it would for a learner); batch 1 with d_v > d_k; a
    # length-1 query; a length-1 memory; and E_q == E_kv with L_q != L_kv and a wide d_k, where the
    # wrong side runs and gives the wrong shape; and float64.
    return [
        _cross_case(generator, 2, 4, 4, 4, 4, 4, 4),
        _cross_case(generator, 3, 5, 7, 6, 3, 8, 5),
        _cross_case(generator, 1, 6, 3, 4, 7, 5, 9),
        _cross_case(generator, 2, 1, 6, 4, 5, 4, 2),
        _cross_case(generator, 2, 3, 1, 8, 8, 16, 3),
        _cross_case(generator, 2, 6, 4, 5, 5, 32, 3),
        _cross_case(generator, 2, 3, 5, 4, 6, 3, 7, dtype=torch.float64),
    ]


def _cross_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, batch 1 with
    d_v > d_k, a length-1 query, a length-1 memory, E_q = E_kv with L_q != L_kv and a wide d_k,
    float64), with a memory longer than any public one."""
    g = generator
    d_k, e, l_q, n = _draw(g, 2, 6), _draw(g, 3, 8), _draw(g, 2, 7), _draw(g, 5, 6)
    return [
        _cross_case(g, 2, n, n, n, n, n, n),  # square: every mistake runs
        _cross_case(g, _draw(g, 2, 3), _draw(g, 2, 7), _draw(g, 8, 10), _draw(g, 2, 8), _draw(g, 2, 8),
                    _draw(g, 2, 8), _draw(g, 2, 8)),
        _cross_case(g, 1, _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 7), d_k,
                    _draw(g, d_k + 1, 10)),  # batch 1, d_v > d_k
        _cross_case(g, _draw(g, 2, 4), 1, _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 7),
                    _draw(g, 2, 5)),  # one query
        _cross_case(g, _draw(g, 2, 4), _draw(g, 2, 7), 1, _draw(g, 2, 7), _draw(g, 2, 7), _draw(g, 2, 9),
                    _draw(g, 2, 5)),  # a memory of one position
        _cross_case(g, _draw(g, 1, 3), l_q, _draw(g, 1, l_q - 1), e, e, _draw(g, 16, 40), _draw(g, 2, 5)),  # E_q = E_kv
        _cross_case(g, _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 6), _draw(g, 2, 7), _draw(g, 2, 7),
                    _draw(g, 2, 7), _draw(g, 2, 7), dtype=torch.float64),
    ]


def _cross_reference(x, memory, w_q, w_k, w_v):
    return attention.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v)


register(
    Exercise(
        id="03.cross_attention",
        reference=_cross_reference,
        cases=_cross_cases,
        hidden=_cross_hidden,
        mistakes=(
            Mistake(
                "KV_FROM_QUERY",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, x @ w_k, x @ w_v),
                {
                    "en": "Keys and values are projected from x, the decoder side: that is self-attention. "
                    "In cross-attention they come from memory: K = memory @ w_k, V = memory @ w_v.",
                    "zh": "键和值是由 x（解码器一侧）投影得到的，这其实是自注意力。交叉注意力中，键和值来自 memory："
                    "K = memory @ w_k，V = memory @ w_v。",
                },
            ),
            Mistake(
                "V_FROM_QUERY",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, x @ w_v),
                {
                    "en": "The values are projected from x; like the keys, they come from memory: V = memory @ w_v.",
                    "zh": "值是由 x 投影得到的；值和键一样来自 memory：V = memory @ w_v。",
                },
            ),
            Mistake(
                "SIDES_SWAPPED",
                lambda x, memory, w_q, w_k, w_v: _attend(memory @ w_q, x @ w_k, x @ w_v),
                {
                    "en": "The two sides are swapped: the queries come from x (the decoder), the keys and "
                    "values from memory (the encoder); the weights are (B, L_q, L_kv).",
                    "zh": "两侧用反了：查询来自 x（解码器），键和值来自 memory（编码器）；权重的形状是 (B, L_q, L_kv)。",
                },
            ),
            Mistake(
                "QK_SWAPPED",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_k, memory @ w_q, memory @ w_v),
                {
                    "en": "w_q and w_k are swapped: the queries are x @ w_q (w_q is (E_q, d_k)), the keys "
                    "memory @ w_k (w_k is (E_kv, d_k)).",
                    "zh": "w_q 和 w_k 用反了：查询是 x @ w_q（w_q 的形状为 (E_q, d_k)），"
                    "键是 memory @ w_k（w_k 的形状为 (E_kv, d_k)）。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                lambda x, memory, w_q, w_k, w_v: _cross_reference(x, memory, w_q, w_k, w_v)[::-1],
                SWAPPED_RETURN_HINT,
            ),
            Mistake(
                "NO_SCALE",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, divisor=1.0),
                NO_SCALE_HINT,
            ),
            Mistake(
                "SCALE_BY_E_Q",
                lambda x, memory, w_q, w_k, w_v: _attend(
                    x @ w_q, memory @ w_k, memory @ w_v, divisor=math.sqrt(x.shape[-1])
                ),
                {
                    "en": "The scores are divided by √E_q, the size of x; divide by √d_k, the size of the "
                    "projected queries and keys (w_q.shape[-1]).",
                    "zh": "分数除以的是 √E_q（x 的特征数）；应除以 √d_k，即投影后查询和键的维度（w_q.shape[-1]）。",
                },
            ),
            Mistake(
                "SCALE_BY_E_KV",
                lambda x, memory, w_q, w_k, w_v: _attend(
                    x @ w_q, memory @ w_k, memory @ w_v, divisor=math.sqrt(memory.shape[-1])
                ),
                {
                    "en": "The scores are divided by √E_kv, the size of memory; divide by √d_k, the size of the "
                    "projected queries and keys (w_q.shape[-1]).",
                    "zh": "分数除以的是 √E_kv（memory 的特征数）；应除以 √d_k，即投影后查询和键的维度（w_q.shape[-1]）。",
                },
            ),
            Mistake(
                "SCALE_BY_L_KV",
                lambda x, memory, w_q, w_k, w_v: _attend(
                    x @ w_q, memory @ w_k, memory @ w_v, divisor=math.sqrt(memory.shape[-2])
                ),
                {
                    "en": "The scores are divided by √L_kv, the square root of the number of keys "
                    "(scores.shape[-1]); divide by √d_k, the size of each query and key (w_q.shape[-1]).",
                    "zh": "分数除以的是 √L_kv（键的个数 scores.shape[-1] 的平方根）；"
                    "应除以 √d_k，即每个查询和键的维度（w_q.shape[-1]）。",
                },
            ),
            Mistake(
                "SOFTMAX_BEFORE_SCALE",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, softmax_first=True),
                SOFTMAX_BEFORE_SCALE_HINT,
            ),
            Mistake(
                "NO_SOFTMAX",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, softmax=False),
                NO_SOFTMAX_HINT,
            ),
            Mistake(
                "SCALE_BY_D_V",
                lambda x, memory, w_q, w_k, w_v: _attend(
                    x @ w_q, memory @ w_k, memory @ w_v, divisor=math.sqrt(w_v.shape[-1])
                ),
                SCALE_BY_D_V_HINT,
            ),
            Mistake(
                "SOFTMAX_BATCH_DIM",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, dim=0),
                SOFTMAX_BATCH_DIM_HINT,
            ),
            Mistake(
                "MATMUL_ORDER",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, value_first=True),
                MATMUL_ORDER_HINT,
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda x, memory, w_q, w_k, w_v: _attend(x @ w_q, memory @ w_k, memory @ w_v, dim=-2),
                {
                    "en": "The softmax runs over the decoder's queries (dim=-2); each query's weights over the "
                    "encoder's keys must sum to 1: use dim=-1.",
                    "zh": "softmax 作用在了解码器的查询维度（dim=-2）上；"
                    "每个查询对编码器各个键的权重之和应为 1，请用 dim=-1。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 03.alignment

def _alignment_case(g, batch, l_q, l_k, empty_rows=(), scores=False):
    """Weights (or, with `scores`, raw scores of any sign) and a random keep mask, with the rows
    (b, i) of `empty_rows` keeping no key at all."""
    values = 2.0 * randn(g, batch, l_q, l_k)
    weights = values if scores else torch.softmax(values, dim=-1)  # (B, L_q, L_k)
    keep = torch.rand(batch, l_q, l_k, generator=g) > 0.4  # True = this key counts
    keep[..., 0] |= ~keep.any(dim=-1)  # every row keeps a key, except the empty rows asked for
    for b, i in empty_rows:
        keep[b, i] = False
    return weights, keep


def _alignment_cases(generator):
    # (batch, L_q, L_k, rows (b, i) whose mask hides every key). First square, so reading the
    # argmax along the wrong axis still runs; then L_q != L_k both ways, batch 1, length 1 on
    # either side, and raw scores of both signs, where filling hidden keys with 0 (or multiplying
    # by the mask) lets a hidden key win. The random masks hide some row maxima, so ignoring the
    # mask gives other positions.
    g = generator
    return [
        _alignment_case(g, 2, 4, 4, empty_rows=[(1, 2)]),
        _alignment_case(g, 3, 5, 7, empty_rows=[(0, 4), (2, 0)]),
        _alignment_case(g, 1, 1, 1),
        _alignment_case(g, 2, 6, 3, empty_rows=[(1, 5)]),
        _alignment_case(g, 1, 1, 9),
        _alignment_case(g, 1, 6, 8, empty_rows=[(0, 3)], scores=True),
        _alignment_case(g, 3, 4, 1),
        tuple(t.double() if t.is_floating_point() else t
              for t in _alignment_case(g, 2, 3, 5, empty_rows=[(0, 1)], scores=True)),  # float64 raw scores
    ]


def _alignment_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (rows that keep no key, placed at
    random; L_q != L_k both ways; batch 1 with one query; one key; raw scores of both signs, in
    float32 and float64), with more keys than any public case has."""
    g = generator

    def case(batch, l_q, l_k, empty=0, scores=False):
        rows = [(_draw(g, 0, batch - 1), _draw(g, 0, l_q - 1)) for _ in range(empty)]
        weights, keep = _alignment_case(g, batch, l_q, l_k, empty_rows=rows, scores=scores)
        if scores:  # a row whose kept scores are all negative, beside a hidden key: a 0 there would win
            b, i = _draw(g, 0, batch - 1), _draw(g, 0, l_q - 1)
            weights[b, i] = -weights[b, i].abs() - 0.5
            keep[b, i, 0], keep[b, i, -1] = False, True
        return weights, keep

    n = _draw(g, 5, 7)
    return [
        case(2, n, n, empty=1),  # square: the argmax along the wrong axis runs
        case(_draw(g, 2, 4), _draw(g, 2, 6), _draw(g, 10, 12), empty=2),
        case(_draw(g, 2, 4), _draw(g, 5, 8), _draw(g, 2, 4), empty=1),  # L_q > L_k
        case(1, 1, _draw(g, 2, 9)),  # batch 1, one query
        case(_draw(g, 2, 4), _draw(g, 2, 6), 1, empty=1),  # one key
        case(_draw(g, 1, 3), _draw(g, 3, 7), _draw(g, 4, 9), empty=1, scores=True),  # raw scores
        tuple(t.double() if t.is_floating_point() else t
              for t in case(_draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 7), empty=1, scores=True)),
    ]


def _hard_alignment(weights, keep_mask, dim=-1, empty=None):
    hidden_only = ~keep_mask.any(dim=dim) if empty is None else empty  # rows that may attend to nothing
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(dim=dim)  # (B, L_q), int64
    return best.masked_fill(hidden_only, -1)


register(
    Exercise(
        id="03.alignment",
        reference=_hard_alignment,
        cases=_alignment_cases,
        hidden=_alignment_hidden,
        mistakes=(
            Mistake(
                "MASK_IGNORED",
                lambda weights, keep: weights.argmax(dim=-1).masked_fill(~keep.any(dim=-1), -1),
                {
                    "en": "The mask is ignored: a hidden key can win. Set the weights of hidden keys to -inf "
                    "(masked_fill(~keep_mask, float('-inf'))) before the argmax.",
                    "zh": "忽略了掩码：被遮住的键也可能被选中。取 argmax 之前，先把被遮住的键的权重设为 -inf"
                    "（masked_fill(~keep_mask, float('-inf'))）。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                lambda weights, keep: _hard_alignment(weights, ~keep),
                {
                    "en": "The mask is read the wrong way round: True in keep_mask means the key counts, "
                    "so hide the keys where it is False.",
                    "zh": "掩码的含义读反了：keep_mask 中 True 表示该键有效，应遮住为 False 的键。",
                },
            ),
            Mistake(
                "MASK_UNUSED",
                lambda weights, keep: weights.argmax(dim=-1),
                {
                    "en": "keep_mask is not used at all: a hidden key can win, and a query whose mask keeps no key gets "
                    "a position instead of -1. Set the hidden weights to -inf (masked_fill(~keep_mask, "
                    "float('-inf'))) before the argmax, then give the empty rows -1 (~keep_mask.any(dim=-1)).",
                    "zh": "完全没有用到 keep_mask：被遮住的键可能被选中，掩码一个键也没保留的查询也得到了一个位置，而不是 -1。"
                    "取 argmax 之前先把被遮住的权重设为 -inf（masked_fill(~keep_mask, float('-inf'))），"
                    "再让空行得到 -1（~keep_mask.any(dim=-1)）。",
                },
            ),
            Mistake(
                "MASK_INVERTED_IN_FILL",
                lambda weights, keep: (weights.masked_fill(keep, float("-inf")).argmax(dim=-1)
                                       .masked_fill(~keep.any(dim=-1), -1)),
                {
                    "en": "The kept keys were filled with -inf, not the hidden ones, so the argmax picks among the hidden "
                    "keys: True in keep_mask means the key counts. Fill where it is False: "
                    "masked_fill(~keep_mask, float('-inf')).",
                    "zh": "被填成 -inf 的是保留的键而不是被遮住的键，于是 argmax 只在被遮住的键里挑："
                    "keep_mask 中 True 表示该键有效。应在它为 False 的地方填充：masked_fill(~keep_mask, float('-inf'))。",
                },
            ),
            Mistake(
                "FILL_ZERO",
                lambda weights, keep: (weights * keep).argmax(dim=-1).masked_fill(~keep.any(dim=-1), -1),
                {
                    "en": "The hidden keys get 0 (masked_fill with 0, or weights * keep_mask): a hidden key still "
                    "wins wherever every kept value is below 0, as raw scores can be. Use float('-inf').",
                    "zh": "被遮住的键被设成了 0（用 0 做 masked_fill，或 weights * keep_mask）："
                    "只要保留下来的值都小于 0（原始分数就可能如此），被遮住的键仍会胜出。应设为 float('-inf')。",
                },
            ),
            Mistake(
                "NO_EMPTY_ROW",
                lambda weights, keep: weights.masked_fill(~keep, float("-inf")).argmax(dim=-1),
                {
                    "en": "A query whose mask hides every key gets position 0 (the argmax of a row of -inf); "
                    "it has no alignment: return -1 there.",
                    "zh": "掩码遮住了全部键的查询得到了位置 0（全是 -inf 的一行取 argmax 的结果）；"
                    "它没有对齐位置，应返回 -1。",
                },
            ),
            Mistake(
                "EMPTY_TEST_ALL",
                lambda weights, keep: _hard_alignment(weights, keep, empty=~keep.all(dim=-1)),
                {
                    "en": "A query gets -1 as soon as its mask hides one key; only a query whose mask keeps no key "
                    "at all gets -1: test ~keep_mask.any(dim=-1), not ~keep_mask.all(dim=-1).",
                    "zh": "只要掩码遮住了一个键，查询就得到了 -1；只有掩码一个键也没保留的查询才应得到 -1："
                    "判断条件是 ~keep_mask.any(dim=-1)，而不是 ~keep_mask.all(dim=-1)。",
                },
            ),
            Mistake(
                "ARGMAX_KEEPDIM",
                lambda weights, keep: (weights.masked_fill(~keep, float("-inf")).argmax(dim=-1, keepdim=True)
                                       .masked_fill(~keep.any(dim=-1, keepdim=True), -1)),
                {
                    "en": "The result is (B, L_q, 1): argmax(dim=-1, keepdim=True) kept the key axis. Return "
                    "(B, L_q), one index per query: leave keepdim out.",
                    "zh": "结果的形状是 (B, L_q, 1)：argmax(dim=-1, keepdim=True) 保留了键这一维。"
                    "应返回 (B, L_q)，每个查询一个索引：不要加 keepdim。",
                },
            ),
            Mistake(
                "RETURNS_MAX_VALUES",
                lambda weights, keep: (weights.masked_fill(~keep, float("-inf")).amax(dim=-1)
                                       .masked_fill(~keep.any(dim=-1), -1.0)),
                {
                    "en": "You returned the largest weights themselves (max(...).values or amax), a float tensor; the "
                    "exercise asks where they are: their indices, argmax(dim=-1) (or max(...).indices), int64.",
                    "zh": "你返回的是最大的权重本身（max(...).values 或 amax），是浮点张量；本练习要的是它们的位置："
                    "索引，即 argmax(dim=-1)（或 max(...).indices），类型为 int64。",
                },
            ),
            Mistake(
                "ARGMAX_QUERIES",
                lambda weights, keep: _hard_alignment(weights, keep, dim=-2),
                {
                    "en": "The argmax runs over the queries (dim=-2); for each query, pick the key: dim=-1, "
                    "giving shape (B, L_q).",
                    "zh": "argmax 沿查询维度（dim=-2）进行；应为每个查询挑出一个键：用 dim=-1，结果形状为 (B, L_q)。",
                },
            ),
        ),
    )
)
