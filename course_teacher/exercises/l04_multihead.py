"""Lesson 04's exercises: the fused multi-head forward pass, each head's score matrix
W_Q^h W_K^hᵀ / √d read out of ``nn.MultiheadAttention``'s packed ``in_proj_weight``, and the
(B·H, L_q, L_k) mask of its batched call.

Every argument varies on its own across the cases (batch 1, one head, length 1, L_q != L_k,
different feature sizes for query, key and value, d_k != d_v, an output size other than E), so a
function that ignores an argument or uses one size where another is meant fails somewhere. The
first case of each exercise is one where every known mistake runs (B = H = 2, square sizes),
so a mistake is recognised by its output. The floating-point exercises have float64 cases too, so
a result built in a float32 buffer (``torch.zeros(...)`` without ``dtype=``) fails. The grader's
hidden cases (``hidden``) keep those edges at sizes drawn from the teacher's seed, and always hold
shapes (or head counts, lengths and padding) no public case has.

In-place edits of an argument: the check gives each call copies, so an answer that edits its
inputs in place and still returns the right values is caught only by the check engine's generic
INPUT_MODIFIED verdict. The cases are chosen so that the in-place edits learners make change the
inputs' values (tests/test_exercises_l04.py proves it): scaling ``query`` by 1/√d_k in place
(every d_k here is above 1), scaling the Q rows of ``in_proj_weight`` in place (d above 1 in all
but one case), inverting ``key_padding_mask`` in place (every case has entries).
"""

import math

import torch

from course_utils import attention

from .registry import Exercise, Mistake, randn, register


def _draw(generator, low, high):
    """An integer drawn uniformly from [low, high] by the grader's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


#: Hints two exercises share.
HEAD_ORDER_HINT = {
    "en": "Heads and batch items are mixed up: you laid the (B·H) slots out head-major (slot h·B + b) in one place "
    "and read them batch-major (slot b·H + h) in another. Keep one layout throughout; (B, H, L, d) with the heads "
    "on axis 1 needs no flattening at all.",
    "zh": "头和批量样本混在了一起：你在一处按头优先（槽位 h·B + b）排列 (B·H) 个槽位，在另一处却按批量优先"
    "（槽位 b·H + h）读取。从头到尾只用一种布局；把头放在第 1 维的 (B, H, L, d) 布局根本不需要展平。",
}


#: The hint of every FLOAT32 mistake: the right values in float32 where the inputs are float64.
FLOAT32_HINT = {
    "en": "The values are right, but the result is float32 where the inputs are float64: something in your function "
    "forces float32 (a .float(), or a buffer made by torch.zeros(...) or torch.empty(...) without dtype=). Keep "
    "the inputs' dtype: torch.zeros(..., dtype=x.dtype), x.new_zeros(...), or no cast at all.",
    "zh": "数值是对的，但输入是 float64 时结果却是 float32：函数里有什么东西把它变成了 float32（比如 .float()，"
    "或者用 torch.zeros(...)、torch.empty(...) 建缓冲区时没写 dtype=）。应保持输入的 dtype："
    "torch.zeros(..., dtype=x.dtype)、x.new_zeros(...)，或者干脆不做转换。",
}


def _float32(function):
    """The mistake of computing `function`'s result and handing it back in float32."""

    def mistake(*args):
        result = function(*args)
        return tuple(t.float() for t in result) if isinstance(result, tuple) else result.float()

    return mistake


# ----------------------------------------------------------------------------- 04.fused_forward

def _fused_case(g, batch, l_q, l_k, e_q, e_k, e_v, heads, d_k, d_v, e_out, dtype=torch.float32):
    tensors = (
        randn(g, batch, l_q, e_q),
        randn(g, batch, l_k, e_k),
        randn(g, batch, l_k, e_v),
        randn(g, e_q, heads * d_k) / math.sqrt(e_q),
        randn(g, e_k, heads * d_k) / math.sqrt(e_k),
        randn(g, e_v, heads * d_v) / math.sqrt(e_v),
        randn(g, heads * d_v, e_out) / math.sqrt(heads * d_v),
    )
    return (*(t.to(dtype) for t in tensors), heads)


def _fused_cases(generator):
    # (batch, L_q, L_k, E_q, E_k, E_v, H, d_k, d_v, E_out). First B = H = 2 and square sizes, so
    # every mistake runs; then every size different (d_k != d_v, E_out != E); batch 1 with one
    # query and four heads; one head and one key; wide heads (d_k = 16) where the scale matters;
    # and float64, where a float32 buffer shows.
    g = generator
    return [
        _fused_case(g, 2, 4, 4, 8, 8, 8, 2, 4, 4, 8),
        _fused_case(g, 3, 5, 7, 6, 4, 5, 3, 2, 3, 7),
        _fused_case(g, 1, 1, 6, 4, 5, 3, 4, 3, 2, 5),
        _fused_case(g, 2, 3, 1, 8, 6, 8, 1, 8, 5, 8),
        _fused_case(g, 2, 6, 4, 16, 12, 12, 4, 16, 4, 16),
        _fused_case(g, 2, 3, 5, 6, 4, 4, 2, 3, 2, 6, dtype=torch.float64),
    ]


def _fused_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, batch 1 with one
    query and several heads, one head and one key, wide heads, float64), with more keys than any public
    case has; every d_k above 1, as in the public cases (an in-place 1/√d_k then changes the query)."""
    g = generator

    def sizes(low, high, count):
        return [_draw(g, low, high) for _ in range(count)]

    n, d = _draw(g, 5, 6), _draw(g, 2, 5)
    return [
        _fused_case(g, 2, n, n, 2 * d, 2 * d, 2 * d, 2, d, d, 2 * d),  # B = H = 2, square: every mistake runs
        _fused_case(g, _draw(g, 2, 3), _draw(g, 2, 6), _draw(g, 8, 10), *sizes(2, 9, 3), _draw(g, 2, 4),
                    *sizes(2, 5, 2), _draw(g, 2, 9)),
        _fused_case(g, 1, 1, _draw(g, 2, 7), *sizes(2, 8, 3), _draw(g, 3, 5), *sizes(2, 4, 2), _draw(g, 2, 8)),
        _fused_case(g, _draw(g, 2, 3), _draw(g, 2, 6), 1, *sizes(2, 9, 3), 1, *sizes(2, 9, 2), _draw(g, 2, 9)),
        _fused_case(g, _draw(g, 1, 2), _draw(g, 2, 6), _draw(g, 2, 6), *sizes(8, 16, 3), _draw(g, 2, 4),
                    _draw(g, 12, 24), _draw(g, 2, 6), _draw(g, 8, 16)),  # wide heads
        _fused_case(g, 2, _draw(g, 2, 5), _draw(g, 2, 6), *sizes(2, 8, 3), _draw(g, 2, 3), *sizes(2, 4, 2),
                    _draw(g, 2, 8), dtype=torch.float64),
    ]


def _project(query, key, value, w_q, w_k, w_v):
    return query @ w_q, key @ w_k, value @ w_v  # (B, L_q, H·d_k), (B, L_k, H·d_k), (B, L_k, H·d_v)


def _split(t, heads):
    B, L, width = t.shape
    return t.view(B, L, heads, width // heads).transpose(1, 2)  # (B, H, L, d)


def _merge(t):
    B, H, L, d = t.shape
    return t.transpose(1, 2).reshape(B, L, H * d)  # (B, L, H·d)


def _fused_reference(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))  # (B, H, L, d)
    out, weights = attention.scaled_dot_product_attention(q, k, v)  # (B, H, L_q, d_v), (B, H, L_q, L_k)
    return _merge(out) @ w_o, weights  # (B, L_q, E_out), (B, H, L_q, L_k)


def _heads_attend(q, k, v, divisor):
    weights = torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=-1)
    return weights @ v, weights


def _scale_by_e(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, math.sqrt(w_q.shape[-1]))  # √(H·d_k) instead of √d_k
    return _merge(out) @ w_o, weights


def _wrong_view(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    def split(t):  # view straight to (B, H, L, d): the right shape, the wrong numbers
        B, L, width = t.shape
        return t.view(B, num_heads, L, width // num_heads)

    q, k, v = (split(t) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    B, H, L_q, d_v = out.shape
    return out.reshape(B, L_q, H * d_v) @ w_o, weights  # and back the same way


def _merge_without_transpose(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    B, H, L_q, d_v = out.shape
    return out.reshape(B, L_q, H * d_v) @ w_o, weights  # (B, H, L_q, d) read as if it were (B, L_q, H, d)


def _head_order(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    H = num_heads

    def heads_first(t):  # (B, L, H·d) -> (H·B, L, d): slot h·B + b, head-major
        B, L, width = t.shape
        return t.view(B, L, H, width // H).permute(2, 0, 1, 3).reshape(H * B, L, width // H)

    q, k, v = (heads_first(t) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)  # (H·B, L_q, d_v), (H·B, L_q, L_k)
    B = query.shape[0]
    out = out.view(B, H, *out.shape[1:])  # read back batch-major: slot b·H + h
    return _merge(out) @ w_o, weights.view(B, H, *weights.shape[1:])


def _averaged_weights(*args):
    output, weights = _fused_reference(*args)
    return output, weights.mean(dim=1)  # (B, L_q, L_k): what nn.MultiheadAttention returns by default


def _no_out_proj(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    return _merge(out), weights


def _not_split(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _project(query, key, value, w_q, w_k, w_v)  # one attention over all H·d features
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    return out @ w_o, weights


def _no_scale(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, 1.0)  # the raw dot products
    return _merge(out) @ w_o, weights


def _scale_not_sqrt(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, q.shape[-1])  # d_k instead of √d_k
    return _merge(out) @ w_o, weights


def _scale_by_d_v(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, math.sqrt(v.shape[-1]))  # √d_v: the values' size per head
    return _merge(out) @ w_o, weights


def _softmax_over(dim):
    def attend(query, key, value, w_q, w_k, w_v, w_o, num_heads):
        q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=dim)
        return _merge(weights @ v) @ w_o, weights

    return attend


def _swapped_return(*args):
    output, weights = _fused_reference(*args)
    return weights, output  # (weights, output): the order of the tutorial's bug


def _linear_layout(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    # x @ W.T, as nn.Linear computes with its (out, in) weight; these weights are (in, out)
    return _fused_reference(query, key, value, w_q.T, w_k.T, w_v.T, w_o.T, num_heads)


def _merge_interleaved(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)  # (B, H, L_q, d_v)
    B, H, L_q, d_v = out.shape
    merged = out.permute(0, 2, 3, 1).reshape(B, L_q, H * d_v)  # (B, L_q, d, H): feature j of head h at j·H + h
    return merged @ w_o, weights


def _heads_interleaved(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    def split(t):  # head h gets features h, h + H, h + 2H, ...
        B, L, width = t.shape
        return t.view(B, L, width // num_heads, num_heads).permute(0, 3, 1, 2)  # (B, H, L, d)

    q, k, v = (split(t) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    B, H, L_q, d_v = out.shape
    return out.permute(0, 2, 3, 1).reshape(B, L_q, H * d_v) @ w_o, weights  # merged back the same way


def _d_k_from_e_q(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(t, num_heads) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, math.sqrt(query.shape[-1] // num_heads))  # √(E_q / H), not √d_k
    return _merge(out) @ w_o, weights


def _d_v_as_d_k(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, d_k = query.shape[0], w_q.shape[1] // num_heads

    def split(t):  # every projection split into heads of d_k features, the values' too
        return t.reshape(B, -1, num_heads, d_k).transpose(1, 2)

    q, k, v = (split(t) for t in _project(query, key, value, w_q, w_k, w_v))
    out, weights = _heads_attend(q, k, v, math.sqrt(d_k))  # raises wherever d_v != d_k
    return _merge(out) @ w_o, weights


register(
    Exercise(
        id="04.fused_forward",
        reference=_fused_reference,
        cases=_fused_cases,
        hidden=_fused_hidden,
        forbidden=("F.multi_head_attention_forward",),
        mistakes=(
            Mistake(
                "WRONG_VIEW",
                _wrong_view,
                {
                    "en": "The heads are split with a single view(B, H, L, d) of the (B, L, H·d) projection: the "
                    "right shape, the wrong numbers (each 'head' holds pieces of several positions). Split the "
                    "last axis first, view(B, L, H, d), then move the heads forward with transpose(1, 2); merge "
                    "back the same way in reverse.",
                    "zh": "你用一次 view(B, H, L, d) 直接拆分了 (B, L, H·d) 的投影结果：形状对了，数却错了（每个“头”"
                    "里混着好几个位置的片段）。应先拆最后一维 view(B, L, H, d)，再用 transpose(1, 2) 把头维移到前面；"
                    "合并时按相反的顺序做回去。",
                },
            ),
            Mistake(
                "MERGE_NO_TRANSPOSE",
                _merge_without_transpose,
                {
                    "en": "The heads are split correctly, but merged by reshaping (B, H, L_q, d) straight to "
                    "(B, L_q, H·d), which mixes positions. Swap the head and position axes back first: "
                    "out.transpose(1, 2).reshape(B, L_q, H·d).",
                    "zh": "拆分多头没问题，但合并时把 (B, H, L_q, d) 直接 reshape 成了 (B, L_q, H·d)，各个位置被打乱了。"
                    "应先把头维和位置维换回来：out.transpose(1, 2).reshape(B, L_q, H·d)。",
                },
            ),
            Mistake(
                "SCALE_BY_E",
                _scale_by_e,
                {
                    "en": "The scores are divided by √E, E = H·d_k being all heads' features together (w_q.shape[-1]). "
                    "Each head compares vectors of d_k = E / H features: divide by √d_k.",
                    "zh": "分数除以的是 √E，其中 E = H·d_k 是所有头的特征数之和（w_q.shape[-1]）。"
                    "每个头比较的是 d_k = E / H 维的向量：应除以 √d_k。",
                },
            ),
            Mistake(
                "HEAD_ORDER",
                _head_order,
                HEAD_ORDER_HINT,
            ),
            Mistake(
                "AVERAGED_WEIGHTS",
                _averaged_weights,
                {
                    "en": "The weights are averaged over the heads, (B, L_q, L_k), as nn.MultiheadAttention returns "
                    "them by default. Return every head's weights: (B, H, L_q, L_k).",
                    "zh": "权重在各个头上取了平均，形状为 (B, L_q, L_k)，这是 nn.MultiheadAttention 默认的返回方式。"
                    "应返回每个头各自的权重：(B, H, L_q, L_k)。",
                },
            ),
            Mistake(
                "NO_OUT_PROJ",
                _no_out_proj,
                {
                    "en": "The output projection is missing: the merged heads (B, L_q, H·d_v) still go through w_o, "
                    "which mixes the heads' results.",
                    "zh": "漏了输出投影：合并后的多头结果 (B, L_q, H·d_v) 还要乘以 w_o，由它把各个头的结果混合起来。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _no_scale,
                {
                    "en": "The scores are not scaled: each head's softmax gets the raw dot products q·k. Divide them by "
                    "√d_k (d_k = the features of one head's queries, q.shape[-1] after the split) before the "
                    "softmax, as in lesson 01.",
                    "zh": "分数没有缩放：每个头的 softmax 拿到的是原始点积 q·k。应在 softmax 之前除以 √d_k"
                    "（d_k 是一个头的查询的特征数，即拆分后的 q.shape[-1]），与第 01 课相同。",
                },
            ),
            Mistake(
                "SCALE_BY_D_K",
                _scale_not_sqrt,
                {
                    "en": "The scores are divided by d_k, not by its square root. The dot product of two vectors of "
                    "d_k unit-variance features has a standard deviation of √d_k: divide by math.sqrt(d_k).",
                    "zh": "分数除以的是 d_k，而不是它的平方根。两个各有 d_k 个单位方差特征的向量，点积的标准差是 √d_k："
                    "应除以 math.sqrt(d_k)。",
                },
            ),
            Mistake(
                "SCALE_BY_D_V",
                _scale_by_d_v,
                {
                    "en": "The scores are divided by √d_v, the size of one head's values. The scale belongs to the dot "
                    "product of a query and a key: divide by √d_k (the two differ here: w_q has H·d_k columns, "
                    "w_v has H·d_v).",
                    "zh": "分数除以的是 √d_v，即一个头的值的大小。缩放针对的是查询与键的点积：应除以 √d_k"
                    "（这里两者不同：w_q 有 H·d_k 列，w_v 有 H·d_v 列）。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                _softmax_over(-2),
                {
                    "en": "The softmax runs over the queries (dim=-2), so each key's column sums to 1. Each query's "
                    "weights over the keys must sum to 1: softmax over the last axis, dim=-1, of the "
                    "(B, H, L_q, L_k) scores.",
                    "zh": "softmax 作用在了查询这一维上（dim=-2），于是每个键所在的列之和为 1。应当是每个查询对所有键的权重"
                    "之和为 1：在 (B, H, L_q, L_k) 分数的最后一维上做 softmax，dim=-1。",
                },
            ),
            Mistake(
                "SOFTMAX_OVER_HEADS",
                _softmax_over(1),
                {
                    "en": "The softmax runs over dim=1, which in the (B, H, L_q, L_k) scores is the heads (in a "
                    "one-head (B, L_q, L_k) layout dim=1 would be the queries, wrong too). Use dim=-1: the keys, "
                    "whatever axes come before.",
                    "zh": "softmax 作用在 dim=1 上，而在 (B, H, L_q, L_k) 的分数里这一维是头（在单头的 (B, L_q, L_k) "
                    "布局里 dim=1 是查询，同样不对）。应使用 dim=-1：无论前面有几维，它都是键。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                _swapped_return,
                {
                    "en": "The pair is returned as (weights, output). Return (output, weights), the order of every "
                    "layer in this course and of nn.MultiheadAttention (section 2 shows what the other order "
                    "does to a tutorial's code).",
                    "zh": "返回的顺序是 (weights, output)。应返回 (output, weights)，这是本课程每个层、也是 "
                    "nn.MultiheadAttention 的顺序（第 2 节展示了另一种顺序给一篇教程的代码带来了什么）。",
                },
            ),
            Mistake(
                "WEIGHTS_TRANSPOSED",
                _linear_layout,
                {
                    "en": "The weights are used transposed (x @ w.T), as nn.Linear uses its (out, in) weight. These are "
                    "in the formula's (in, out) layout: query @ w_q, ..., merged @ w_o. (Only square weights let "
                    "this run at all.)",
                    "zh": "你把权重转置后使用（x @ w.T），这是 nn.Linear 使用它 (out, in) 权重的方式。这里的权重是公式的 "
                    "(in, out) 布局：query @ w_q、……、merged @ w_o。（只有方阵权重才让这种写法能够运行。）",
                },
            ),
            Mistake(
                "MERGE_INTERLEAVED",
                _merge_interleaved,
                {
                    "en": "The heads are merged in the wrong order: permuting (B, H, L_q, d) to (B, L_q, d, H) before "
                    "the reshape interleaves them (feature j of head h lands at j·H + h). w_o expects head 0's "
                    "d features first: out.transpose(1, 2).reshape(B, L_q, H·d), i.e. permute(0, 2, 1, 3).",
                    "zh": "合并多头时顺序错了：reshape 之前把 (B, H, L_q, d) 排列成 (B, L_q, d, H)，会让各个头交错在一起"
                    "（第 h 个头的第 j 个特征落在 j·H + h 处）。w_o 期望第 0 个头的 d 个特征排在最前："
                    "out.transpose(1, 2).reshape(B, L_q, H·d)，即 permute(0, 2, 1, 3)。",
                },
            ),
            Mistake(
                "HEADS_INTERLEAVED",
                _heads_interleaved,
                {
                    "en": "Each head gets every H-th feature (view(B, L, d, H)): head h reads features h, h + H, .... "
                    "Head h owns a contiguous block, features h·d … (h+1)·d - 1 of the projection: "
                    "view(B, L, H, d).transpose(1, 2).",
                    "zh": "每个头拿到的是每隔 H 个取一个的特征（view(B, L, d, H)）：第 h 个头读的是特征 h、h + H、……。"
                    "第 h 个头拥有投影结果中连续的一段，即特征 h·d … (h+1)·d - 1：view(B, L, H, d).transpose(1, 2)。",
                },
            ),
            Mistake(
                "NOT_SPLIT",
                _not_split,
                {
                    "en": "This is one attention over all H·d features, not num_heads attentions: split the "
                    "projections into heads (B, H, L, d) and attend in each head separately.",
                    "zh": "这是在全部 H·d 个特征上做的一次注意力，而不是 num_heads 个：应把投影结果拆成多头 "
                    "(B, H, L, d)，在每个头里分别做注意力。",
                },
            ),
            Mistake(
                "D_K_FROM_E_Q",
                _d_k_from_e_q,
                {
                    "en": "The scores are divided by √(E_q / H), the size of a head if the heads shared out query's E_q "
                    "features, as in nn.MultiheadAttention. Here d_k is a size of its own: w_q has H·d_k columns, "
                    "so d_k = w_q.shape[1] // num_heads (q.shape[-1] after the split).",
                    "zh": "分数除以的是 √(E_q / H)，也就是各个头平分 query 的 E_q 个特征时每个头的大小，"
                    "nn.MultiheadAttention 就是这样。这里 d_k 是一个独立的尺寸：w_q 有 H·d_k 列，所以 "
                    "d_k = w_q.shape[1] // num_heads（即拆分后的 q.shape[-1]）。",
                },
            ),
            Mistake(
                "D_V_AS_D_K",
                _d_v_as_d_k,
                {
                    "en": "The values are split into heads of d_k features, as if d_v were d_k, which fails wherever the "
                    "two differ. w_v has H·d_v columns: split value @ w_v into heads of "
                    "d_v = w_v.shape[1] // num_heads (or let view(B, L, H, -1) work it out).",
                    "zh": "你把值也按每头 d_k 个特征来拆分，仿佛 d_v 就等于 d_k，两者不同时就会出错。w_v 有 H·d_v 列："
                    "应把 value @ w_v 拆成每头 d_v = w_v.shape[1] // num_heads 个特征（或者让 view(B, L, H, -1) "
                    "自己算出来）。",
                },
            ),
            Mistake("FLOAT32", _float32(_fused_reference), FLOAT32_HINT),
        ),
    )
)


# ----------------------------------------------------------------------------- 04.score_matrices

def _score_case(g, embed, heads, dtype=torch.float32):
    return (randn(g, 3 * embed, embed).to(dtype) / math.sqrt(embed), heads)  # (3E, E): Q's rows, K's, V's


def _score_cases(generator):
    # (E, H). First E = 4, H = 2 (d = 2, so every mistake runs, the (d, d) one too); then three
    # heads, one head of d = E, four heads of d = 2, six heads of d = 1 (no scale to get wrong);
    # and float64 cases, where a float32 buffer shows.
    g = generator
    return [
        _score_case(g, 4, 2),
        _score_case(g, 6, 3),
        _score_case(g, 5, 1),
        _score_case(g, 8, 4),
        _score_case(g, 6, 6),
        _score_case(g, 12, 3, torch.float64),
        _score_case(g, 6, 2, torch.float64),
    ]


def _score_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (several heads of d > 1, one head of
    d = E, heads of d = 1, heads of d = 2, float64), E = H·d as the text's d = E / H asks; never a
    public case's (E, H, dtype), so every case has a new shape."""
    g = generator
    public = {(case[0].shape[1], case[1], case[0].dtype) for case in _score_cases(torch.Generator().manual_seed(0))}

    def case(heads, head_dim, dtype=torch.float32):
        while True:
            h, d = heads(), head_dim()
            if (h * d, h, dtype) not in public:
                return _score_case(g, h * d, h, dtype)

    return [
        case(lambda: _draw(g, 2, 4), lambda: _draw(g, 2, 4)),
        case(lambda: 1, lambda: _draw(g, 2, 9)),  # one head: d = E
        case(lambda: _draw(g, 2, 8), lambda: 1),  # heads of one feature: no scale to get wrong
        case(lambda: _draw(g, 3, 5), lambda: 2),
        case(lambda: _draw(g, 2, 4), lambda: _draw(g, 2, 4), torch.float64),
        case(lambda: _draw(g, 2, 3), lambda: _draw(g, 3, 5), torch.float64),
    ]


def _blocks(in_proj_weight, num_heads):
    """Q's and K's rows of a packed (3E, E) in_proj_weight, per head: (H, d, E) each, head h's (out, in)."""
    E = in_proj_weight.shape[1]
    q, k, _ = in_proj_weight.split(E)  # (E, E) each: Q's rows, then K's, then V's
    return q.view(num_heads, E // num_heads, E), k.view(num_heads, E // num_heads, E)


def _score_reference(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)  # (H, d, E): (W_Q^h)ᵀ and (W_K^h)ᵀ
    d = q.shape[1]
    return q.transpose(1, 2) @ k / math.sqrt(d)  # (H, E, E): W_Q^h W_K^hᵀ / √d


def _score_no_scale(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)
    return q.transpose(1, 2) @ k


def _score_scale_by_e(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)
    return q.transpose(1, 2) @ k / math.sqrt(in_proj_weight.shape[1])  # √E instead of √d


def _score_heads_interleaved(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    q, k, _ = in_proj_weight.split(E)
    q, k = (t.view(d, num_heads, E).transpose(0, 1) for t in (q, k))  # head h: rows h, h + H, ...
    return q.transpose(1, 2) @ k / math.sqrt(d)


def _score_qk_swapped(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)
    return k.transpose(1, 2) @ q / math.sqrt(q.shape[1])  # W_K^h W_Q^hᵀ: every matrix transposed


def _score_v_for_k(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    q, _, v = in_proj_weight.split(E)
    d = E // num_heads
    q, v = q.view(num_heads, d, E), v.view(num_heads, d, E)
    return q.transpose(1, 2) @ v / math.sqrt(d)  # the third block taken for K


def _score_d_by_d(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)
    return q @ k.transpose(1, 2) / math.sqrt(q.shape[1])  # (H, d, d): the blocks multiplied as (out, in)


def _score_in_out_layout(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    q, k, _ = in_proj_weight.split(E)
    # head h's block read as columns h·d … (h+1)·d - 1, as if the weight were stored (in, out)
    q, k = (t.view(E, num_heads, d).transpose(0, 1) for t in (q, k))  # (H, E, d)
    return q @ k.transpose(1, 2) / math.sqrt(d)


def _score_heads_summed(in_proj_weight, num_heads):
    return _score_reference(in_proj_weight, num_heads).sum(dim=0)  # (E, E): Q's rows times K's rows, all heads


def _score_scale_by_d(in_proj_weight, num_heads):
    q, k = _blocks(in_proj_weight, num_heads)
    return q.transpose(1, 2) @ k / q.shape[1]  # d instead of √d


register(
    Exercise(
        id="04.score_matrices",
        reference=_score_reference,
        cases=_score_cases,
        hidden=_score_hidden,
        mistakes=(
            Mistake(
                "NO_SCALE",
                _score_no_scale,
                {
                    "en": "The matrices are not scaled. Head h's scores are q·k / √d: divide W_Q^h W_K^hᵀ by √d, "
                    "d = E / num_heads.",
                    "zh": "矩阵没有缩放。第 h 个头的分数是 q·k / √d：应把 W_Q^h W_K^hᵀ 除以 √d，d = E / num_heads。",
                },
            ),
            Mistake(
                "SCALE_BY_E",
                _score_scale_by_e,
                {
                    "en": "The matrices are divided by √E. Each head compares vectors of d = E / num_heads features: "
                    "divide by √d.",
                    "zh": "矩阵除以的是 √E。每个头比较的是 d = E / num_heads 维的向量：应除以 √d。",
                },
            ),
            Mistake(
                "HEADS_INTERLEAVED",
                _score_heads_interleaved,
                {
                    "en": "Each head got every H-th row (rows h, h + H, ...). In in_proj_weight head h's rows are a "
                    "block, h·d … (h+1)·d - 1 of Q's E rows (and of K's): view(H, d, E), not view(d, H, E).",
                    "zh": "每个头拿到的是每隔 H 行取一行（第 h、h + H、……行）。在 in_proj_weight 里，第 h 个头的行是连续的"
                    "一块，即 Q 的 E 行（以及 K 的 E 行）中的第 h·d … (h+1)·d - 1 行：应 view(H, d, E)，而不是 "
                    "view(d, H, E)。",
                },
            ),
            Mistake(
                "QK_SWAPPED",
                _score_qk_swapped,
                {
                    "en": "Every matrix is transposed: you computed W_K^h W_Q^hᵀ. The first E rows of in_proj_weight "
                    "are Q's, the next E rows K's; the query multiplies from the left (x_q A_h x_kᵀ), so "
                    "A_h = W_Q^h W_K^hᵀ.",
                    "zh": "每个矩阵都被转置了：你算的是 W_K^h W_Q^hᵀ。in_proj_weight 的前 E 行属于 Q，接下来的 E 行属于 K；"
                    "查询从左边乘（x_q A_h x_kᵀ），所以 A_h = W_Q^h W_K^hᵀ。",
                },
            ),
            Mistake(
                "V_FOR_K",
                _score_v_for_k,
                {
                    "en": "The keys' rows were taken from the third block, which holds V's. in_proj_weight stacks Q, K, "
                    "V in that order: K's rows are E … 2E - 1.",
                    "zh": "键的行取自第三块，而那一块是 V 的。in_proj_weight 按 Q、K、V 的顺序堆叠：K 的行是第 E … 2E - 1 行。",
                },
            ),
            Mistake(
                "D_BY_D",
                _score_d_by_d,
                {
                    "en": "The result is (H, d, d): you multiplied head h's (d, E) blocks as Q_h @ K_hᵀ. nn.Linear stores "
                    "a weight as (out, in), so a (d, E) block is (W^h)ᵀ, and W_Q^h W_K^hᵀ = Q_hᵀ @ K_h, an (E, E) "
                    "matrix.",
                    "zh": "结果的形状是 (H, d, d)：你把第 h 个头的 (d, E) 块按 Q_h @ K_hᵀ 相乘了。nn.Linear 以 (out, in) "
                    "的形式存放权重，所以一个 (d, E) 块是 (W^h)ᵀ，而 W_Q^h W_K^hᵀ = Q_hᵀ @ K_h，是一个 (E, E) 矩阵。",
                },
            ),
            Mistake(
                "IN_OUT_LAYOUT",
                _score_in_out_layout,
                {
                    "en": "Head h's block was read as columns h·d … (h+1)·d - 1, as if in_proj_weight were stored "
                    "(in, out). It is (out, in), like nn.Linear's weight: head h's block is rows h·d … (h+1)·d - 1.",
                    "zh": "你把第 h 个头的块当成了第 h·d … (h+1)·d - 1 列来读，仿佛 in_proj_weight 是按 (in, out) 存放的。"
                    "它与 nn.Linear 的权重一样是 (out, in)：第 h 个头的块是第 h·d … (h+1)·d - 1 行。",
                },
            ),
            Mistake(
                "HEADS_SUMMED",
                _score_heads_summed,
                {
                    "en": "One (E, E) matrix came back: Q's rows times K's rows, all heads at once, is the sum of the H "
                    "heads' matrices. Keep one matrix per head: (H, E, E).",
                    "zh": "返回的是一个 (E, E) 矩阵：Q 的全部行乘以 K 的全部行，等于 H 个头的矩阵之和。应为每个头各保留一个"
                    "矩阵：(H, E, E)。",
                },
            ),
            Mistake(
                "SCALE_BY_D",
                _score_scale_by_d,
                {
                    "en": "The matrices are divided by d, not by its square root. The dot product of two vectors of d "
                    "unit-variance features has a standard deviation of √d: divide by math.sqrt(d).",
                    "zh": "矩阵除以的是 d，而不是它的平方根。两个各有 d 个单位方差特征的向量，点积的标准差是 √d："
                    "应除以 math.sqrt(d)。",
                },
            ),
            Mistake("FLOAT32", _float32(_score_reference), FLOAT32_HINT),
        ),
    )
)


# ----------------------------------------------------------------------------- 04.attn_mask

def _padding(lengths, max_len, left=False):
    positions = torch.arange(max_len)
    real = positions >= max_len - lengths[:, None] if left else positions < lengths[:, None]
    return ~real  # (B, L_k): True at padding


def _attn_mask_cases(generator):
    # (key_padding_mask, num_heads, L_q). First B = H = 2 and L_q = L_k, so every mistake runs;
    # then a fully padded item and L_q < L_k; batch 1 with four heads and L_q > L_k; one head
    # and one query; three heads with padding on the left (any pattern of True may come).
    del generator  # the masks are chosen, not drawn
    return [
        (_padding(torch.tensor([4, 2]), 4), 2, 4),
        (_padding(torch.tensor([5, 0, 3]), 5), 2, 3),
        (_padding(torch.tensor([1]), 2), 4, 6),
        (_padding(torch.tensor([3, 1]), 3), 1, 1),
        (_padding(torch.tensor([2, 6, 4]), 6, left=True), 3, 2),
    ]


def _hidden_attn_mask_cases(generator):
    """The grader's hidden cases: the public edges (L_q = L_k, a fully padded item with L_q < L_k, batch
    1 with several heads and L_q > L_k, one head and one query, padding on the left) with sizes, lengths
    and sides of the padding drawn from its generator, and more keys than any public case has."""
    g = generator

    def padding(batch, length, *, left=False, empty=False):
        lengths = torch.randint(0 if empty else 1, length + 1, (batch,), generator=g)
        if empty:
            lengths[_draw(g, 0, batch - 1)] = 0  # a fully padded item
        return _padding(lengths, length, left=left)

    n = _draw(g, 2, 7)
    l_k = _draw(g, 2, 6)
    return [
        (padding(_draw(g, 2, 3), n), _draw(g, 2, 4), n),  # L_q = L_k
        (padding(_draw(g, 2, 4), _draw(g, 7, 9), empty=True), _draw(g, 1, 4), _draw(g, 1, 6)),  # L_q < L_k
        (padding(1, l_k, left=bool(_draw(g, 0, 1))), _draw(g, 3, 5), _draw(g, l_k + 1, 8)),  # L_q > L_k
        (padding(_draw(g, 2, 4), _draw(g, 2, 7), left=bool(_draw(g, 0, 1))), 1, 1),  # one head, one query
        (padding(_draw(g, 2, 4), _draw(g, 3, 8), left=True), _draw(g, 2, 4), _draw(g, 1, 7)),  # on the left
    ]


def _attn_mask_reference(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    mask = key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k)  # (B, H, L_q, L_k)
    return mask.reshape(B * num_heads, L_q, L_k)  # slot b·H + h: batch-major


def _attn_mask_head_major(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, :].expand(B, L_q, L_k).repeat(num_heads, 1, 1)  # slot h·B + b


def _attn_mask_inverted(key_padding_mask, num_heads, L_q):
    return ~_attn_mask_reference(key_padding_mask, num_heads, L_q)


def _attn_mask_square(key_padding_mask, num_heads, L_q):
    return _attn_mask_reference(key_padding_mask, num_heads, key_padding_mask.shape[1])  # (B·H, L_k, L_k)


def _attn_mask_no_heads(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, :].expand(B, L_q, L_k)  # (B, L_q, L_k): one slice per item


def _attn_mask_four_axes(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k)  # (B, H, L_q, L_k)


def _attn_mask_rows(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    # the padding put on the queries' axis: rows hidden, not columns (only square when L_q = L_k)
    return key_padding_mask[:, None, :, None].expand(B, num_heads, L_k, L_q).reshape(B * num_heads, L_k, L_q)


def _attn_mask_float(key_padding_mask, num_heads, L_q):
    ignore = _attn_mask_reference(key_padding_mask, num_heads, L_q)
    return torch.zeros(ignore.shape).masked_fill(ignore, float("-inf"))  # additive: 0 keep, -inf drop


def _attn_mask_no_query_axis(key_padding_mask, num_heads, L_q):
    return _attn_mask_reference(key_padding_mask, num_heads, 1)  # (B·H, 1, L_k): left to broadcast


def _attn_mask_right_padding(key_padding_mask, num_heads, L_q):
    lengths = (~key_padding_mask).sum(dim=1)  # the real tokens counted, then put first
    return _attn_mask_reference(_padding(lengths, key_padding_mask.shape[1]), num_heads, L_q)


def _attn_mask_full_items_cleared(key_padding_mask, num_heads, L_q):
    cleared = key_padding_mask & ~key_padding_mask.all(dim=1, keepdim=True)  # an all-padding item hides nothing
    return _attn_mask_reference(cleared, num_heads, L_q)


register(
    Exercise(
        id="04.attn_mask",
        reference=_attn_mask_reference,
        cases=_attn_mask_cases,
        hidden=_hidden_attn_mask_cases,
        mistakes=(
            Mistake(
                "HEAD_ORDER",
                _attn_mask_head_major,
                {
                    "en": "The slices are head-major (slot h·B + b, what repeat(num_heads, 1, 1) gives), but "
                    "nn.MultiheadAttention reads its 3-D attn_mask batch-major: slot b·H + h is head h of item b. "
                    "Give each item's mask H times in a row (repeat_interleave, or expand (B, H, L_q, L_k) and "
                    "reshape).",
                    "zh": "你的切片是头优先排列的（槽位 h·B + b，repeat(num_heads, 1, 1) 就会得到这种顺序），但 "
                    "nn.MultiheadAttention 按批量优先读取它的 3 维 attn_mask：槽位 b·H + h 是第 b 个样本的第 h 个头。"
                    "应把每个样本的掩码连续放 H 次（用 repeat_interleave，或者 expand 成 (B, H, L_q, L_k) 再 reshape）。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                _attn_mask_inverted,
                {
                    "en": "The mask is inverted: in nn.MultiheadAttention's bool attn_mask, as in key_padding_mask, "
                    "True means 'must not attend'. Copy the padding mask as it is.",
                    "zh": "掩码取反了：nn.MultiheadAttention 的 bool attn_mask 与 key_padding_mask 一样，True 表示"
                    "“不得关注”。把填充掩码原样复制即可。",
                },
            ),
            Mistake(
                "SQUARE",
                _attn_mask_square,
                {
                    "en": "The mask has L_k rows; it needs one row per query, L_q of them (the L_q argument), "
                    "(B·H, L_q, L_k).",
                    "zh": "掩码有 L_k 行；它需要每个查询一行，也就是 L_q 行（参数 L_q），形状为 (B·H, L_q, L_k)。",
                },
            ),
            Mistake(
                "NO_HEAD_AXIS",
                _attn_mask_no_heads,
                {
                    "en": "There is one slice per batch item, (B, L_q, L_k); the 3-D attn_mask needs one per head of "
                    "every item, (B·H, L_q, L_k).",
                    "zh": "你为每个批量样本只给了一个切片，形状为 (B, L_q, L_k)；3 维的 attn_mask 需要为每个样本的每个头"
                    "各给一个，形状为 (B·H, L_q, L_k)。",
                },
            ),
            Mistake(
                "ROWS_NOT_KEYS",
                _attn_mask_rows,
                {
                    "en": "The padding hides rows (queries) instead of columns (keys): key_padding_mask[b, j] says "
                    "whether key j is padding, so it belongs on the last axis, mask[..., j], the same for every "
                    "query: key_padding_mask[:, None, None, :] before expanding to (B, H, L_q, L_k).",
                    "zh": "填充遮住的是行（查询），而不是列（键）：key_padding_mask[b, j] 说明键 j 是否为填充，所以它应放在"
                    "最后一维 mask[..., j] 上，对每个查询都一样：先写 key_padding_mask[:, None, None, :]，"
                    "再扩展成 (B, H, L_q, L_k)。",
                },
            ),
            Mistake(
                "FLOAT_MASK",
                _attn_mask_float,
                {
                    "en": "This is an additive float mask (0 to keep, -inf to drop). nn.MultiheadAttention accepts one "
                    "too, but the exercise asks for the bool mask, True where a query must not attend.",
                    "zh": "这是加性浮点掩码（0 表示保留，-inf 表示丢弃）。nn.MultiheadAttention 也接受这种掩码，"
                    "但本练习要的是 bool 掩码，True 表示查询不得关注该键。",
                },
            ),
            Mistake(
                "FOUR_AXES",
                _attn_mask_four_axes,
                {
                    "en": "The mask is (B, H, L_q, L_k), the layout of the scores inside the course's fused layer; "
                    "nn.MultiheadAttention takes a 3-D mask, with batch and heads flattened into one axis of "
                    "B·H slots: reshape it.",
                    "zh": "掩码的形状是 (B, H, L_q, L_k)，这是本课程融合版层内部注意力分数的布局；nn.MultiheadAttention "
                    "接收的是 3 维掩码，批量和头要展平成一个有 B·H 个槽位的维度：把它 reshape 一下。",
                },
            ),
            Mistake(
                "NO_QUERY_AXIS",
                _attn_mask_no_query_axis,
                {
                    "en": "The mask is (B·H, 1, L_k). It would broadcast over the queries in your own code, but "
                    "nn.MultiheadAttention checks a 3-D attn_mask's shape and wants (B·H, L_q, L_k) exactly: "
                    "expand the query axis to L_q.",
                    "zh": "掩码的形状是 (B·H, 1, L_k)。在你自己的代码里它能沿查询维广播，但 nn.MultiheadAttention "
                    "会检查 3 维 attn_mask 的形状，要求恰好是 (B·H, L_q, L_k)：把查询维扩展到 L_q。",
                },
            ),
            Mistake(
                "RIGHT_PADDING_ASSUMED",
                _attn_mask_right_padding,
                {
                    "en": "The mask was rebuilt from each item's length, as if the padding always came last. "
                    "key_padding_mask already says where the padding is, and it may come first (left padding): "
                    "copy its values as they are instead of counting them.",
                    "zh": "你根据每个样本的长度重建了掩码，仿佛填充总在末尾。key_padding_mask 本身已经标明了填充的位置，"
                    "而填充也可能在开头（左填充）：直接照搬它的值，不要重新去数长度。",
                },
            ),
            Mistake(
                "FULL_ITEM_CLEARED",
                _attn_mask_full_items_cleared,
                {
                    "en": "An item that is all padding got a mask of False (to spare its rows a NaN, perhaps). The mask "
                    "only says where the padding is: every key of that item is padding, so all its entries are "
                    "True. What a row without keys gives is the attention's business, not the mask's.",
                    "zh": "全部是填充的样本拿到的掩码全是 False（也许是想让它的行免于 NaN）。掩码只负责标出填充在哪里："
                    "这个样本的每个键都是填充，所以它的每一项都应为 True。一个键都不剩的行得到什么，"
                    "由注意力计算来管，不归掩码管。",
                },
            ),
        ),
    )
)
