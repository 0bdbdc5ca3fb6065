"""Lesson 04's exercises: the fused multi-head forward pass, packing per-head weights the way
``nn.MultiheadAttention`` stores them, and the (B·H, L_q, L_k) mask of its batched call.

Every argument varies on its own across the cases (batch 1, one head, length 1, L_q != L_k,
different feature sizes for query, key and value, d_k != d_v, an output size other than E), so a
function that ignores an argument or uses one size where another is meant fails somewhere. The
first case of each exercise is one where every known mistake runs (B = H = 2, square sizes),
so a mistake is recognised by its output.
"""

import math

import torch

from course_utils import attention

from .registry import Exercise, Mistake, randn, register

#: Hints two exercises share.
HEAD_ORDER_HINT = {
    "en": "Heads and batch items are mixed up: you laid the (B·H) slots out head-major (slot h·B + b) in one place "
    "and read them batch-major (slot b·H + h) in another. Keep one layout throughout; (B, H, L, d) with the heads "
    "on axis 1 needs no flattening at all.",
    "zh": "头和批量样本混在了一起：你在一处按头优先（槽位 h·B + b）排列 (B·H) 个槽位，在另一处却按批量优先"
    "（槽位 b·H + h）读取。从头到尾只用一种布局；把头放在第 1 维的 (B, H, L, d) 布局根本不需要展平。",
}


# ----------------------------------------------------------------------------- 04.fused_forward

def _fused_case(g, batch, l_q, l_k, e_q, e_k, e_v, heads, d_k, d_v, e_out):
    return (
        randn(g, batch, l_q, e_q),
        randn(g, batch, l_k, e_k),
        randn(g, batch, l_k, e_v),
        randn(g, e_q, heads * d_k) / math.sqrt(e_q),
        randn(g, e_k, heads * d_k) / math.sqrt(e_k),
        randn(g, e_v, heads * d_v) / math.sqrt(e_v),
        randn(g, heads * d_v, e_out) / math.sqrt(heads * d_v),
        heads,
    )


def _fused_cases(generator):
    # (batch, L_q, L_k, E_q, E_k, E_v, H, d_k, d_v, E_out). First B = H = 2 and square sizes, so
    # every mistake runs; then every size different (d_k != d_v, E_out != E); batch 1 with one
    # query and four heads; one head and one key; and wide heads (d_k = 16) where the scale matters.
    g = generator
    return [
        _fused_case(g, 2, 4, 4, 8, 8, 8, 2, 4, 4, 8),
        _fused_case(g, 3, 5, 7, 6, 4, 5, 3, 2, 3, 7),
        _fused_case(g, 1, 1, 6, 4, 5, 3, 4, 3, 2, 5),
        _fused_case(g, 2, 3, 1, 8, 6, 8, 1, 8, 5, 8),
        _fused_case(g, 2, 6, 4, 16, 12, 12, 4, 16, 4, 16),
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


register(
    Exercise(
        id="04.fused_forward",
        reference=_fused_reference,
        cases=_fused_cases,
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
                "NOT_SPLIT",
                _not_split,
                {
                    "en": "This is one attention over all H·d features, not num_heads attentions: split the "
                    "projections into heads (B, H, L, d) and attend in each head separately.",
                    "zh": "这是在全部 H·d 个特征上做的一次注意力，而不是 num_heads 个：应把投影结果拆成多头 "
                    "(B, H, L, d)，在每个头里分别做注意力。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 04.in_proj

def _in_proj_case(g, heads, d, e):
    weights = [randn(g, heads, d, e) / math.sqrt(e) for _ in range(3)]  # (H, d, E): each head's (out, in)
    biases = [randn(g, heads, d) for _ in range(3)]  # (H, d)
    return (*weights, *biases)


def _in_proj_cases(generator):
    # (H, d, E). First H = d = 2, E = 12 (so 3·H·d = E: even the transposed layout has the right
    # shape); then every size different, one head, heads of size 1, four heads.
    g = generator
    return [
        _in_proj_case(g, 2, 2, 12),
        _in_proj_case(g, 3, 2, 5),
        _in_proj_case(g, 1, 4, 3),
        _in_proj_case(g, 4, 1, 7),
        _in_proj_case(g, 2, 3, 6),
    ]


def _in_proj_reference(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    H, d, E = q_heads.shape
    weight = torch.cat([w.reshape(H * d, E) for w in (q_heads, k_heads, v_heads)])  # (3·H·d, E): Q, K, V
    bias = torch.cat([b.reshape(H * d) for b in (q_biases, k_biases, v_biases)])  # (3·H·d,)
    return weight, bias


def _interleaved(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    H, d, E = q_heads.shape
    weight = torch.cat([w.transpose(0, 1).reshape(H * d, E) for w in (q_heads, k_heads, v_heads)])  # row j·H + h
    bias = torch.cat([b.transpose(0, 1).reshape(H * d) for b in (q_biases, k_biases, v_biases)])
    return weight, bias


def _per_head_qkv(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    H, d, E = q_heads.shape
    weight = torch.stack([q_heads, k_heads, v_heads], dim=1).reshape(3 * H * d, E)  # q_0, k_0, v_0, q_1, ...
    bias = torch.stack([q_biases, k_biases, v_biases], dim=1).reshape(3 * H * d)
    return weight, bias


def _transposed(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    H, d, E = q_heads.shape
    weight = torch.cat([w.reshape(H * d, E).T for w in (q_heads, k_heads, v_heads)], dim=1)  # (E, 3·H·d)
    return weight, _in_proj_reference(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases)[1]


def _stacked(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    H, d, E = q_heads.shape
    weight = torch.stack([w.reshape(H * d, E) for w in (q_heads, k_heads, v_heads)])  # (3, H·d, E)
    bias = torch.stack([b.reshape(H * d) for b in (q_biases, k_biases, v_biases)])  # (3, H·d)
    return weight, bias


def _kqv(q_heads, k_heads, v_heads, q_biases, k_biases, v_biases):
    return _in_proj_reference(k_heads, q_heads, v_heads, k_biases, q_biases, v_biases)


register(
    Exercise(
        id="04.in_proj",
        reference=_in_proj_reference,
        cases=_in_proj_cases,
        mistakes=(
            Mistake(
                "HEADS_INTERLEAVED",
                _interleaved,
                {
                    "en": "The heads are interleaved: your row j·H + h holds feature j of head h. In the packed matrix "
                    "the heads follow each other, rows h·d … (h+1)·d - 1 are head h's: reshape (H, d, E) to "
                    "(H·d, E) without moving any axis (or torch.cat the heads along dim 0).",
                    "zh": "各个头交错排在了一起：你的第 j·H + h 行是第 h 个头的第 j 个特征。打包后的矩阵里各个头依次排列，"
                    "第 h·d … (h+1)·d - 1 行属于第 h 个头：直接把 (H, d, E) reshape 成 (H·d, E)，不要移动任何维度"
                    "（或者用 torch.cat 沿第 0 维把各个头拼起来）。",
                },
            ),
            Mistake(
                "PER_HEAD_QKV",
                _per_head_qkv,
                {
                    "en": "Q, K and V are grouped by head (q_0, k_0, v_0, q_1, …). Some libraries pack their weights "
                    "that way, but nn.MultiheadAttention's in_proj_weight holds all of Q's rows first, then all "
                    "of K's, then all of V's.",
                    "zh": "你按头把 Q、K、V 分成了组（q_0、k_0、v_0、q_1……）。有些库确实这样打包权重，但 "
                    "nn.MultiheadAttention 的 in_proj_weight 是先放 Q 的全部行，再放 K 的全部行，最后放 V 的全部行。",
                },
            ),
            Mistake(
                "TRANSPOSED",
                _transposed,
                {
                    "en": "The packed weight is transposed, (E, 3·H·d). nn.Linear and nn.MultiheadAttention store a "
                    "weight as (out, in), so in_proj_weight is (3·H·d, E) and the heads' (d, E) blocks go one "
                    "below the other.",
                    "zh": "打包后的权重被转置成了 (E, 3·H·d)。nn.Linear 和 nn.MultiheadAttention 以 (out, in) 的形式"
                    "存放权重，所以 in_proj_weight 的形状是 (3·H·d, E)，各个头的 (d, E) 块上下叠放。",
                },
            ),
            Mistake(
                "STACKED",
                _stacked,
                {
                    "en": "torch.stack adds a new axis, giving (3, H·d, E). in_proj_weight is one matrix, (3·H·d, E): "
                    "join Q, K and V with torch.cat along dim 0 (and the biases into one (3·H·d,) vector).",
                    "zh": "torch.stack 会新增一个维度，得到 (3, H·d, E)。in_proj_weight 是一个 (3·H·d, E) 的矩阵："
                    "应该用 torch.cat 沿第 0 维把 Q、K、V 连接起来（偏置也连接成一个 (3·H·d,) 的向量）。",
                },
            ),
            Mistake(
                "QK_SWAPPED",
                _kqv,
                {
                    "en": "K's rows come before Q's. The order in in_proj_weight is Q, K, V.",
                    "zh": "K 的行排在了 Q 的前面。in_proj_weight 中的顺序是 Q、K、V。",
                },
            ),
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
    """The grader's hidden cases: sizes, lengths and sides of the padding drawn from its generator."""
    def draw(low, high):
        return int(torch.randint(low, high + 1, (1,), generator=generator))

    cases = []
    for _ in range(5):
        batch, length = draw(1, 3), draw(1, 6)
        lengths = torch.randint(0, length + 1, (batch,), generator=generator)
        cases.append((_padding(lengths, length, left=bool(draw(0, 1))), draw(1, 4), draw(1, 6)))
    return cases


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
        ),
    )
)
