"""Lesson 07's exercises: grouped-query attention, rotary position embedding, and one decode step
with a KV cache.

The references are written here in plain code (tests/test_exercises_l07.py proves them equal to
``course_utils.decoding`` and to PyTorch's ``F.scaled_dot_product_attention(..., enable_gqa=True)``,
values and gradients). Every argument varies on its own across the cases, and the first case of
each exercise is one where every known mistake runs and shows (but FLOAT32_ANGLES of 07.apply_rope,
which only a far position shows):

- 07.gqa_attention: H_kv = 1 (MQA, where ``repeat`` and ``repeat_interleave`` agree), H_kv = H
  (MHA), H / H_kv = 2 and 3, a decode step (L_q = 1) and a chunk (L_q < L_k), L_q = L_k (where the
  two causal alignments agree), causal False, batch 1, head size 1, float64;
- 07.apply_rope: positions that do not start at 0 (a cache's), one position, position 0 (the
  identity), d = 2 (one pair), positions out of order, a far position (5003) in float64;
- 07.cached_attention_step: an empty cache (the first token), one cached token, 40 cached tokens,
  batch 1, one head, head size 2, float64.

No tensor a case passes is all zeros (or all False), so an in-place edit of any input shows.
"""

import math

import torch

from .registry import Exercise, Mistake, randn, register

BASE = 10000.0

# ----------------------------------------------------------------------------- 07.gqa_attention
# query (B, H, L_q, d), key and value (B, H_kv, L_k, d), causal -> output (B, H, L_q, d); query head
# h reads key/value head h // (H / H_kv); causal: the queries are the last L_q of the L_k positions.


def _gqa_case(g, B, H, H_kv, L_q, L_k, d, causal, dtype=torch.float32):
    return (randn(g, B, H, L_q, d).to(dtype), randn(g, B, H_kv, L_k, d).to(dtype), randn(g, B, H_kv, L_k, d).to(dtype),
            causal)


def _gqa_cases(generator):
    # (B, H, H_kv, L_q, L_k, d, causal). First a chunk of 3 queries over 5 keys, 4 query heads over 2
    # key/value heads, causal: every mistake shows; then MQA, MHA, three heads per group, a decode
    # step (L_q = 1), L_q = L_k (both causal alignments agree there), not causal, batch 1 with head
    # size 1, float64.
    g = generator
    return [
        _gqa_case(g, 2, 4, 2, 3, 5, 4, True),
        _gqa_case(g, 2, 4, 1, 3, 6, 8, True),
        _gqa_case(g, 1, 3, 3, 4, 4, 4, True),
        _gqa_case(g, 2, 6, 2, 1, 7, 4, True),
        _gqa_case(g, 1, 6, 3, 5, 5, 2, True),
        _gqa_case(g, 2, 4, 2, 3, 4, 6, False),
        _gqa_case(g, 1, 2, 1, 2, 3, 1, False),
        _gqa_case(g, 2, 8, 4, 2, 6, 4, True, torch.float64),
    ]


def _hidden_gqa_cases(generator):
    """The grader's: sizes drawn from its generator, causal or not, one in float64; and, whatever the
    draws, one causal case whose mask hides something (1 < L_q <= L_k), as the public ones have."""
    g, cases = generator, []
    for number in range(6):
        H_kv, groups = _sizes(g, 1, 1, 3)[0], _sizes(g, 1, 1, 3)[0]
        L_k = _sizes(g, 1, 2 if number == 5 else 1, 8)[0]
        L_q = _sizes(g, 1, 2 if number == 5 else 1, L_k)[0]
        causal = number == 5 or bool(_sizes(g, 1, 0, 1)[0])
        cases.append(_gqa_case(g, _sizes(g, 1, 1, 2)[0], H_kv * groups, H_kv, L_q, L_k, 2 * _sizes(g, 1, 1, 4)[0],
                               causal, torch.float64 if number == 4 else torch.float32))
    return cases


def _sizes(generator, count, low, high):
    """`count` integers drawn uniformly from [low, high] by the grader's generator."""
    return [int(n) for n in torch.randint(low, high + 1, (count,), generator=generator)]


def _attention(q, k, v, keep, scale=True):
    """softmax(q kᵀ / √d, hiding ~keep) v for q, k, v of the same heads; keep (L_q, L_k) or None."""
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(dim=-1) @ v


def _bottom_right(L_q, L_k, device=None):
    """(L_q, L_k): query i, at position L_k − L_q + i, keeps keys 0 … that position."""
    return torch.ones(L_q, L_k, dtype=torch.bool, device=device).tril(diagonal=L_k - L_q)


def _gqa(query, key, value, causal, *, repeat=False, top_left=False, scale=True, ignore_causal=False):
    groups = query.shape[1] // key.shape[1]
    if repeat:
        k, v = key.repeat(1, groups, 1, 1), value.repeat(1, groups, 1, 1)  # [k0, k1, k0, k1]: wrong pairs
    else:
        k, v = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)  # [k0, k0, k1, k1]
    L_q, L_k = query.shape[2], key.shape[2]
    keep = None
    if causal and not ignore_causal:
        keep = (torch.ones(L_q, L_k, dtype=torch.bool, device=query.device).tril() if top_left
                else _bottom_right(L_q, L_k, query.device))  # where the inputs are (a GPU's too)
    return _attention(query, k, v, keep, scale)


def _gqa_variant(query, key, value, causal, *, divisor=None, dim=-1, diagonal=0, fill=float("-inf"),
                 mask_weights=False, dtype=None, with_weights=False):
    """Right head pairs, with one of the slips below: the scores divided by `divisor` (default √d),
    the softmax over `dim`, the bottom-right mask moved by `diagonal`, the hidden scores filled with
    `fill`, the weights zeroed after the softmax instead of the scores before it, the arithmetic
    (and the result) in `dtype`, or the weights returned beside the output."""
    groups = query.shape[1] // key.shape[1]
    q = query if dtype is None else query.to(dtype)
    k = key.repeat_interleave(groups, dim=1).to(q.dtype)
    v = value.repeat_interleave(groups, dim=1).to(q.dtype)
    L_q, L_k = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-2, -1) / (divisor(q.shape[-1]) if divisor else math.sqrt(q.shape[-1]))
    keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q + diagonal) if causal else None
    if keep is not None and not mask_weights:
        scores = scores.masked_fill(~keep, fill)
    weights = scores.softmax(dim=dim)
    if keep is not None and mask_weights:
        weights = weights * keep
    output = weights @ v
    return (output, weights) if with_weights else output


def _gqa_scale_by_d(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, divisor=lambda d: d)


def _gqa_softmax_dim(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, dim=-2)


def _gqa_hides_itself(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, diagonal=-1)


def _gqa_fill_zero(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, fill=0.0)


def _gqa_mask_after_softmax(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, mask_weights=True)


def _gqa_float64(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, dtype=torch.float64)


def _gqa_with_weights(query, key, value, causal):
    return _gqa_variant(query, key, value, causal, with_weights=True)


def _gqa_reference(query, key, value, causal):
    return _gqa(query, key, value, causal)


def _gqa_repeat(query, key, value, causal):
    return _gqa(query, key, value, causal, repeat=True)


def _gqa_top_left(query, key, value, causal):
    return _gqa(query, key, value, causal, top_left=True)


def _gqa_no_scale(query, key, value, causal):
    return _gqa(query, key, value, causal, scale=False)


def _gqa_ignores_causal(query, key, value, causal):
    return _gqa(query, key, value, causal, ignore_causal=True)


register(
    Exercise(
        id="07.gqa_attention",
        reference=_gqa_reference,
        cases=_gqa_cases,
        hidden=_hidden_gqa_cases,
        forbidden=("F.scaled_dot_product_attention", "course_utils.decoding.gqa_attention"),
        mistakes=(
            Mistake(
                "REPEAT_NOT_INTERLEAVE",
                _gqa_repeat,
                {
                    "en": "The key/value heads are tiled with repeat, [k0, k1, k0, k1], so query head 1 reads key/value "
                    "head 1 instead of head 0: the wrong heads are paired. Query head h reads key/value head "
                    "h // (H / H_kv): each key/value head is repeated next to itself, [k0, k0, k1, k1], "
                    "key.repeat_interleave(H // H_kv, dim=1). (With one key/value head, MQA, the two agree, which "
                    "is why this mistake hides in some tests.)",
                    "zh": "用 repeat 把键/值头平铺成了 [k0, k1, k0, k1]，于是查询头 1 读到的是键/值头 1，而不是头 0："
                    "头配错了。查询头 h 应读键/值头 h // (H / H_kv)：每个键/值头要连续重复，[k0, k0, k1, k1]，即 "
                    "key.repeat_interleave(H // H_kv, dim=1)。（只有一个键/值头时，即 MQA，两者结果相同，所以这个错误"
                    "在有些测试里看不出来。）",
                },
            ),
            Mistake(
                "TOP_LEFT_CAUSAL",
                _gqa_top_left,
                {
                    "en": "The causal mask is aligned top-left: query i sees keys 0 … i, as with "
                    "torch.ones(L_q, L_k).tril() or is_causal=True. That is right only when L_q = L_k. Here the "
                    "queries are the last L_q positions (the cache holds the first L_k − L_q), so query i stands at "
                    "position L_k − L_q + i and sees keys 0 … L_k − L_q + i: tril(diagonal=L_k − L_q).",
                    "zh": "因果掩码按左上角对齐了：查询 i 看到键 0 … i，就像 torch.ones(L_q, L_k).tril() 或 "
                    "is_causal=True 那样。这只在 L_q = L_k 时才对。这里的查询是最后 L_q 个位置（缓存里是前 L_k − L_q "
                    "个），所以查询 i 位于位置 L_k − L_q + i，看到的是键 0 … L_k − L_q + i：tril(diagonal=L_k − L_q)。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _gqa_no_scale,
                {
                    "en": "The scores are not divided by √d. Scaled dot-product attention divides q · k by the square root "
                    "of the head size d (query.shape[-1]) before the softmax.",
                    "zh": "分数没有除以 √d。缩放点积注意力要在 softmax 之前把 q · k 除以头大小 d（query.shape[-1]）的平方根。",
                },
            ),
            Mistake(
                "IGNORES_CAUSAL",
                _gqa_ignores_causal,
                {
                    "en": "causal=True is ignored: every query also reads the keys after its own position, which a decoder "
                    "generating one token at a time has not computed yet. With causal=True, hide the keys after each "
                    "query's position.",
                    "zh": "忽略了 causal=True：每个查询还读到了它自己位置之后的键，而逐个生成词元的解码器此时还没有算出这些键。"
                    "causal=True 时，要遮住每个查询位置之后的键。",
                },
            ),
            Mistake(
                "SCALE_BY_D",
                _gqa_scale_by_d,
                {
                    "en": "The scores are divided by d, the head size, instead of by its square root: q · k / √d, "
                    "math.sqrt(query.shape[-1]). Dividing by d makes the softmax too flat as soon as d > 1.",
                    "zh": "分数除以的是头大小 d，而不是它的平方根：应为 q · k / √d，即除以 math.sqrt(query.shape[-1])。"
                    "只要 d > 1，除以 d 都会让 softmax 过于平坦。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                _gqa_softmax_dim,
                {
                    "en": "The softmax runs over the queries (dim=-2), so each key's column sums to 1. Each query's "
                    "weights over the keys must sum to 1: softmax over the last axis, dim=-1, of the "
                    "(B, H, L_q, L_k) scores.",
                    "zh": "softmax 是沿查询这一维（dim=-2）做的，结果是每个键的那一列加起来为 1。应当是每个查询对所有键的权重"
                    "加起来为 1：对形状为 (B, H, L_q, L_k) 的分数，沿最后一维 dim=-1 做 softmax。",
                },
            ),
            Mistake(
                "CAUSAL_HIDES_ITSELF",
                _gqa_hides_itself,
                {
                    "en": "The causal mask also hides each query's own key: query i keeps keys j < L_k − L_q + i "
                    "(tril(diagonal=L_k − L_q − 1), or triu(diagonal=L_k − L_q) used as the hidden part), and a "
                    "query that sees nothing else gets NaN. A position may attend to itself: keep "
                    "j ≤ L_k − L_q + i, tril(diagonal=L_k − L_q); hide triu(diagonal=L_k − L_q + 1).",
                    "zh": "因果掩码把每个查询自己的键也遮住了：查询 i 只保留了 j < L_k − L_q + i 的键"
                    "（tril(diagonal=L_k − L_q − 1)，或把 triu(diagonal=L_k − L_q) 当成了要遮住的部分），"
                    "除此之外什么都看不到的查询就得到 NaN。一个位置可以关注它自己：应保留 j ≤ L_k − L_q + i，"
                    "即 tril(diagonal=L_k − L_q)；要遮住的是 triu(diagonal=L_k − L_q + 1)。",
                },
            ),
            Mistake(
                "FILL_ZERO",
                _gqa_fill_zero,
                {
                    "en": "The hidden scores are set to 0 instead of −∞. A score of 0 still counts in the softmax "
                    "(e⁰ = 1, like a visible score of 0), so the query still reads the keys after its position. "
                    "Fill them with float(\"-inf\") (masked_fill(~keep, float(\"-inf\"))), whose weight is exactly 0.",
                    "zh": "被遮住的分数设成了 0，而不是 −∞。分数为 0 在 softmax 里照样算数（e⁰ = 1，和一个可见的 0 分一样），"
                    "查询照样读到了它位置之后的键。"
                    "应填入 float(\"-inf\")（masked_fill(~keep, float(\"-inf\"))），它的权重正好是 0。",
                },
            ),
            Mistake(
                "MASK_AFTER_SOFTMAX",
                _gqa_mask_after_softmax,
                {
                    "en": "The mask is applied to the weights after the softmax (weights * keep), so the weights of "
                    "a row no longer sum to 1: the hidden keys' share is lost instead of going to the visible ones. "
                    "Hide the scores before the softmax: scores.masked_fill(~keep, float(\"-inf\")).",
                    "zh": "掩码是在 softmax 之后乘到权重上的（weights * keep），于是每一行的权重加起来不再是 1："
                    "被遮住的键所占的份额直接丢掉了，而没有分给可见的键。应在 softmax 之前遮住分数："
                    "scores.masked_fill(~keep, float(\"-inf\"))。",
                },
            ),
            Mistake(
                "FLOAT64",
                _gqa_float64,
                {
                    "en": "The numbers are right but float32 inputs come back float64. Return the output in the "
                    "inputs' dtype: compute in it, or convert back at the end with .to(query.dtype).",
                    "zh": "数值是对的，但 float32 的输入返回成了 float64。输出的 dtype 应与输入相同：直接用输入的 dtype 计算，"
                    "或者最后用 .to(query.dtype) 转回去。",
                },
            ),
            Mistake(
                "RETURNS_WEIGHTS",
                _gqa_with_weights,
                {
                    "en": "You return (output, weights), as the course's gqa_attention does. This exercise asks for "
                    "the output alone, a tensor of shape (B, H, L_q, d): return weights @ value, not the pair.",
                    "zh": "你返回的是 (output, weights)，和课程自带的 gqa_attention 一样。本练习只要输出，"
                    "即形状为 (B, H, L_q, d) 的张量：返回 weights @ value，而不是这一对。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 07.apply_rope
# x (B, H, L, d), positions (L,) int64 -> like x: pair i = features (2i, 2i + 1) rotated by
# φ = p · 10000^(−2i/d): (a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ).


def _rope_cases(generator):
    # (B, H, L, d, positions, dtype). First positions 3 … 6 (a chunk after 3 cached tokens), d = 8:
    # every mistake shows; then one position, position 0 alone (the identity), one pair (d = 2),
    # positions out of order, batch 1 with many heads, a far position (5003) in float64.
    g = generator
    specs = [
        (2, 2, 4, 8, [3, 4, 5, 6], torch.float32),
        (1, 3, 1, 6, [9], torch.float32),
        (2, 1, 1, 4, [0], torch.float32),
        (1, 2, 5, 2, [1, 2, 3, 4, 5], torch.float32),
        (2, 2, 4, 10, [7, 0, 30, 2], torch.float32),
        (1, 6, 3, 4, [60, 61, 62], torch.float32),
        (1, 2, 3, 16, [5001, 5002, 5003], torch.float64),
    ]
    return [(randn(g, B, H, L, d).to(dtype), torch.tensor(p, dtype=torch.int64)) for B, H, L, d, p, dtype in specs]


def _hidden_rope_cases(generator):
    g, cases = generator, []
    for number in range(5):
        far = number == 4  # far positions, where float32 angles drift: d >= 4 (with d = 2 the one angle is p·1, exact)
        L, d = _sizes(g, 1, 1, 6)[0], 2 * _sizes(g, 1, 2 if far else 1, 6)[0]
        positions = torch.randint(0, 6000 if far else 100, (L,), generator=g)
        cases.append((randn(g, _sizes(g, 1, 1, 2)[0], _sizes(g, 1, 1, 3)[0], L, d).to(
            torch.float64 if far else torch.float32), positions))
    return cases


def _rope(x, positions, *, halves=False, sign=1.0, exponent=2.0, from_zero=False, keep_dtype=True):
    d = x.shape[-1]
    theta = BASE ** (-exponent * torch.arange(d // 2, dtype=torch.float64, device=x.device) / d)  # (d/2,)
    p = torch.arange(len(positions), device=positions.device) if from_zero else positions
    angles = sign * p.to(torch.float64)[:, None] * theta  # (L, d/2)
    cos, sin = angles.cos(), angles.sin()
    if keep_dtype:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if halves:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def _rope_reference(x, positions):
    return _rope(x, positions)


def _rope_float32_angles(x, positions):
    d = x.shape[-1]
    theta = BASE ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,), float32
    angles = positions.float()[:, None] * theta  # (L, d/2): float32 angles lose digits at far positions
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def _rope_exponent_doubled(x, positions):
    return _rope(x, positions, exponent=4.0)


def _rope_halves_out(x, positions):
    d = x.shape[-1]
    angles = positions.to(torch.float64)[:, None] * BASE ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)  # pairs read interleaved, written as halves


def _rope_halves(x, positions):
    return _rope(x, positions, halves=True)


def _rope_reversed(x, positions):
    return _rope(x, positions, sign=-1.0)


def _rope_exponent_without_two(x, positions):
    return _rope(x, positions, exponent=1.0)


def _rope_from_zero(x, positions):
    return _rope(x, positions, from_zero=True)


def _rope_float64(x, positions):
    return _rope(x, positions, keep_dtype=False)


register(
    Exercise(
        id="07.apply_rope",
        reference=_rope_reference,
        cases=_rope_cases,
        hidden=_hidden_rope_cases,
        forbidden=("course_utils.decoding.apply_rope",),
        mistakes=(
            Mistake(
                "HALF_SPLIT",
                _rope_halves,
                {
                    "en": "Your pairs are features (i, i + d/2), the half-split layout of GPT-NeoX and Hugging Face's Llama. "
                    "This exercise asks for the interleaved layout: pair i is features 2i and 2i + 1, x[..., 0::2] "
                    "and x[..., 1::2], and the rotated pair goes back to the same two features. The two layouts are "
                    "the same rotation with the features permuted, so weights trained for one do not work in the "
                    "other.",
                    "zh": "你配成对的是特征 (i, i + d/2)，这是 GPT-NeoX 和 Hugging Face 版 Llama 用的前后两半布局。本练习要的是"
                    "交错布局：第 i 对是特征 2i 和 2i + 1，即 x[..., 0::2] 和 x[..., 1::2]，旋转后仍放回这两个特征。两种布局"
                    "是特征排列不同的同一种旋转，所以为一种布局训练的权重，不能直接用在另一种布局上。",
                },
            ),
            Mistake(
                "ROTATION_REVERSED",
                _rope_reversed,
                {
                    "en": "Every pair turns the other way, by −φ: (a, b) -> (a cos φ + b sin φ, −a sin φ + b cos φ). The "
                    "scores still depend on the offset only, but they are those of the offset's opposite, so they "
                    "disagree with every model trained the usual way: (a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ).",
                    "zh": "每一对都往反方向转了 −φ：(a, b) -> (a cos φ + b sin φ, −a sin φ + b cos φ)。分数仍然只取决于偏移，"
                    "但对应的是相反的偏移，于是与按通常方式训练的所有模型都对不上。应为 "
                    "(a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ)。",
                },
            ),
            Mistake(
                "EXPONENT_WITHOUT_TWO",
                _rope_exponent_without_two,
                {
                    "en": "Pair i turns at θ_i = 10000^(−i/d): the exponent lost its factor 2. It is 10000^(−2i/d), i the "
                    "pair's index, the frequencies of lesson 06's sinusoidal table: torch.arange(0, d, 2) gives 2i.",
                    "zh": "第 i 对的频率成了 θ_i = 10000^(−i/d)：指数丢了因子 2。应为 10000^(−2i/d)，i 是这一对的序号，"
                    "与第 06 课正弦编码表的频率相同：torch.arange(0, d, 2) 直接给出 2i。",
                },
            ),
            Mistake(
                "POSITIONS_FROM_ZERO",
                _rope_from_zero,
                {
                    "en": "The rows are rotated by 0, 1, 2, … instead of by the positions given: torch.arange(L) where the "
                    "argument positions belongs. With a cache the new tokens do not start at 0 (a decode step after "
                    "T cached tokens is position T), and rotating them from 0 gives every new token the wrong offset "
                    "to the cached keys.",
                    "zh": "各行按 0, 1, 2, … 旋转，而不是按给定的位置：该用参数 positions 的地方用了 torch.arange(L)。"
                    "有缓存时，新词元并不从 0 开始（缓存了 T 个词元之后的解码步，位置是 T），从 0 开始旋转，会让每个新词元与"
                    "缓存中的键的偏移全都不对。",
                },
            ),
            Mistake(
                "FLOAT64",
                _rope_float64,
                {
                    "en": "The numbers are right but a float32 x comes back float64. Computing the angles in float64 is "
                    "right (far positions keep their digits); return a tensor of x's dtype: convert cos and sin with "
                    ".to(x.dtype) before multiplying.",
                    "zh": "数值是对的，但 float32 的 x 返回成了 float64。用 float64 计算角度是对的（位置很远时也能保留足够的"
                    "有效数字）；但返回的张量应与 x 的 dtype 相同：相乘之前先用 .to(x.dtype) 转换 cos 和 sin。",
                },
            ),
            Mistake(
                "FLOAT32_ANGLES",
                _rope_float32_angles,
                {
                    "en": "The angles p · θ_i are computed in float32. Near position 5000 a float32 number is only "
                    "exact to about 0.0005, so the angles, and the rotated features, are off by that much. Compute "
                    "θ and the angles in float64 (positions.to(torch.float64), torch.arange(..., "
                    "dtype=torch.float64)) and convert only cos and sin to x's dtype.",
                    "zh": "角度 p · θ_i 是用 float32 算的。在位置 5000 附近，float32 只能精确到大约 0.0005，"
                    "角度以及旋转后的特征就会差这么多。θ 和角度都要用 float64 计算（positions.to(torch.float64)、"
                    "torch.arange(..., dtype=torch.float64)），只把 cos 和 sin 转换成 x 的 dtype。",
                },
            ),
            Mistake(
                "EXPONENT_DOUBLED",
                _rope_exponent_doubled,
                {
                    "en": "Pair i turns at 10000^(−4i/d): the factor 2 is counted twice. torch.arange(0, d, 2) already "
                    "gives 2i; divide it by d as it is, 10000 ** (-torch.arange(0, d, 2) / d), or use "
                    "2 * torch.arange(d // 2), not both.",
                    "zh": "第 i 对按 10000^(−4i/d) 旋转：因子 2 算了两次。torch.arange(0, d, 2) 给出的已经是 2i，"
                    "直接除以 d 即可，10000 ** (-torch.arange(0, d, 2) / d)；或者用 2 * torch.arange(d // 2)，"
                    "两者只能选一个。",
                },
            ),
            Mistake(
                "HALVES_OUT",
                _rope_halves_out,
                {
                    "en": "The pairs are read right, x[..., 0::2] and x[..., 1::2], but written back as two halves, "
                    "torch.cat((new_a, new_b), dim=-1): the rotated features land in the half layout's order. Put "
                    "each pair back on features 2i and 2i + 1: torch.stack((new_a, new_b), dim=-1).flatten(-2).",
                    "zh": "读取每一对的方式是对的，x[..., 0::2] 和 x[..., 1::2]，但写回时拼成了前后两半，"
                    "torch.cat((new_a, new_b), dim=-1)：旋转后的特征按前后两半布局的顺序排列了。应把每一对放回特征 2i "
                    "和 2i + 1：torch.stack((new_a, new_b), dim=-1).flatten(-2)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 07.cached_attention_step
# q, k, v (B, H, 1, d): the new token's projections, not rotated; k_cache, v_cache (B, H, T, d): the
# T earlier tokens', keys rotated at their positions 0 … T − 1 -> (output (B, H, 1, d), k_cache'
# (B, H, T + 1, d), v_cache' (B, H, T + 1, d)): rotate q and k at position T, append, attend.


def _step_case(g, B, H, T, d, dtype=torch.float32):
    q, k, v = (randn(g, B, H, 1, d).to(dtype) for _ in range(3))
    raw = randn(g, B, H, T, d).to(dtype)
    k_cache = _rope(raw, torch.arange(T))  # the cache holds keys already rotated at 0 … T − 1
    v_cache = randn(g, B, H, T, d).to(dtype)
    return q, k, v, k_cache, v_cache


def _step_cases(generator):
    # (B, H, T, d). First 3 cached tokens, two heads, d = 4: every mistake shows; then the first token
    # (an empty cache), one cached token, 40 cached tokens, batch 1 and one head, head size 2, float64.
    g = generator
    return [
        _step_case(g, 2, 2, 3, 4),
        _step_case(g, 2, 2, 0, 4),
        _step_case(g, 1, 3, 1, 6),
        _step_case(g, 2, 2, 40, 8),
        _step_case(g, 1, 1, 5, 2),
        _step_case(g, 2, 2, 6, 4, torch.float64),
    ]


def _hidden_step_cases(generator):
    g, cases = generator, []
    for number in range(5):
        cases.append(_step_case(g, _sizes(g, 1, 1, 2)[0], _sizes(g, 1, 1, 3)[0], _sizes(g, 1, 0, 12)[0],
                                2 * _sizes(g, 1, 1, 4)[0], torch.float64 if number == 4 else torch.float32))
    return cases


def _step(q, k, v, k_cache, v_cache, *, position_shift=0, rotate_query=True, rotate_key=True, append=True,
          store_raw=False, rotate_again=False, top_left=False, scale=True, softmax_dim=-1, prepend=False,
          dtype=None, halves=False):
    T = k_cache.shape[2]
    if dtype is not None:  # (the whole step in another dtype, the results too)
        q, k, v, k_cache, v_cache = (t.to(dtype) for t in (q, k, v, k_cache, v_cache))
    position = torch.tensor([T + position_shift], device=q.device)  # where the inputs are (a GPU's too)
    q_rot = _rope(q, position, halves=halves) if rotate_query else q
    k_rot = _rope(k, position, halves=halves) if rotate_key else k
    old = _rope(k_cache, torch.arange(T, device=q.device)) if rotate_again else k_cache  # (rotating the cached keys once more)
    new = [k_rot, old] if prepend else [old, k_rot]
    keys = torch.cat(new, dim=2) if append else old  # (B, H, T + 1, d)
    values = (torch.cat([v, v_cache] if prepend else [v_cache, v], dim=2)) if append else v_cache
    keep = None
    if top_left:
        keep = torch.zeros(1, keys.shape[2], dtype=torch.bool, device=q.device)
        keep[0, 0] = True  # is_causal=True with one query: key 0 only
    scores = q_rot @ keys.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    out = scores.softmax(dim=softmax_dim) @ values
    stored = torch.cat([old, k], dim=2) if store_raw else keys
    if not append:
        stored, values = k_cache, v_cache
    return out, stored, values


def _step_reference(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache)


def _step_not_appended(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, append=False)


def _step_off_by_one(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, position_shift=1)


def _step_position_zero(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, position_shift=-k_cache.shape[2])


def _step_query_not_rotated(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, rotate_query=False)


def _step_cached_unrotated(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, store_raw=True)


def _step_rotated_again(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, rotate_again=True)


def _step_top_left(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, top_left=True)


def _step_key_not_rotated(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, rotate_key=False)


def _step_no_scale(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, scale=False)


def _step_softmax_dim(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, softmax_dim=-2)


def _step_prepended(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, prepend=True)


def _step_float64(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, dtype=torch.float64)


def _step_half_split(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, halves=True)


register(
    Exercise(
        id="07.cached_attention_step",
        reference=_step_reference,
        cases=_step_cases,
        hidden=_hidden_step_cases,
        mistakes=(
            Mistake(
                "NOT_APPENDED",
                _step_not_appended,
                {
                    "en": "The new token's key and value are not appended: the query attends over the T cached tokens "
                    "only (never itself) and the cache comes back unchanged, so the next step would miss this token "
                    "too. Append first, torch.cat([k_cache, k_rotated], dim=2) (the same for v), then attend over "
                    "all T + 1 and return the longer caches.",
                    "zh": "没有把新词元的键和值追加进去：查询只在缓存的 T 个词元上做注意力（从不看自己），返回的缓存也没变，"
                    "下一步同样会漏掉这个词元。应先追加，torch.cat([k_cache, k_rotated], dim=2)（v 也一样），再在全部 "
                    "T + 1 个词元上做注意力，并返回变长了的缓存。",
                },
            ),
            Mistake(
                "OFF_BY_ONE",
                _step_off_by_one,
                {
                    "en": "The new token is rotated at position T + 1, the cache's length after appending. The cache holds "
                    "positions 0 … T − 1, so the new token is position T = k_cache.shape[2], read before appending.",
                    "zh": "新词元按位置 T + 1 旋转了，这是追加之后缓存的长度。缓存里是位置 0 … T − 1，所以新词元的位置是 "
                    "T = k_cache.shape[2]，要在追加之前读出来。",
                },
            ),
            Mistake(
                "POSITION_ZERO",
                _step_position_zero,
                {
                    "en": "The new token is rotated at position 0, as if it were the first: the position of a row in the "
                    "new chunk (torch.arange(1)) instead of its position in the sequence. After T cached tokens it "
                    "is position T = k_cache.shape[2].",
                    "zh": "新词元按位置 0 旋转了，好像它是第一个词元：用的是它在这一小段新输入里的序号（torch.arange(1)），"
                    "而不是它在整个序列中的位置。缓存了 T 个词元之后，它的位置是 T = k_cache.shape[2]。",
                },
            ),
            Mistake(
                "QUERY_NOT_ROTATED",
                _step_query_not_rotated,
                {
                    "en": "Only the key is rotated. RoPE rotates the query too, at the same position T: the score of q "
                    "and a key depends on the offset between their two rotations.",
                    "zh": "只旋转了键。RoPE 也要旋转查询，而且是在同一个位置 T：查询与键的分数取决于两者旋转角度之差。",
                },
            ),
            Mistake(
                "CACHED_UNROTATED",
                _step_cached_unrotated,
                {
                    "en": "The output is right, but the key appended to the cache is the raw one, not rotated. The cache "
                    "holds rotated keys, each rotated once, at its own position, when it enters: append the rotated "
                    "key, the one you attended with.",
                    "zh": "输出是对的，但追加进缓存的是没有旋转的键。缓存里存的是旋转过的键，每个键在进入缓存时按它自己的位置"
                    "旋转一次：追加的应是旋转后的键，也就是你做注意力时用的那个。",
                },
            ),
            Mistake(
                "ROTATED_AGAIN",
                _step_rotated_again,
                {
                    "en": "The cached keys are rotated again, at positions 0 … T − 1, and the cache you return holds "
                    "them rotated twice. They were rotated when they entered the cache; a second rotation doubles "
                    "their angles. Rotate only the new query and key, at position T, and use the cache as it is.",
                    "zh": "缓存中的键又按位置 0 … T − 1 旋转了一次，你返回的缓存里存的也是转了两次的键。它们在进入缓存时"
                    "已经旋转过了；再转一次，角度就翻倍了。只旋转新的查询和键（位置 T），缓存原样使用。",
                },
            ),
            Mistake(
                "TOP_LEFT_CAUSAL",
                _step_top_left,
                {
                    "en": "The new query sees key 0 only: a causal mask aligned top-left, torch.ones(1, T + 1).tril() "
                    "(or is_causal=True: query i sees keys 0 … i, and here i = 0). The one new query is the last "
                    "position and may see every key, itself included: no mask at all.",
                    "zh": "新查询只看到了键 0：这是按左上角对齐的因果掩码 torch.ones(1, T + 1).tril()（或 is_causal=True："
                    "查询 i 看到键 0 … i，而这里 i = 0）。唯一的新查询是最后一个位置，可以看到所有的键，包括它自己："
                    "根本不需要掩码。",
                },
            ),
            Mistake(
                "KEY_NOT_ROTATED",
                _step_key_not_rotated,
                {
                    "en": "Only the query is rotated: the new key is attended with and cached as it came in. Every "
                    "key in the cache is rotated at its own position; rotate the new one at position T too, "
                    "attend with it and append that rotated key.",
                    "zh": "只旋转了查询：新的键没有旋转，就直接参与注意力并存进了缓存。缓存里的每个键都按它自己的位置旋转过；"
                    "新的键也要按位置 T 旋转，用旋转后的键做注意力，并把它追加进缓存。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _step_no_scale,
                {
                    "en": "The scores are not divided by √d. As everywhere in this course, attention divides q · k by "
                    "the square root of the head size d (q.shape[-1]) before the softmax.",
                    "zh": "分数没有除以 √d。和本课程其他地方一样，注意力要在 softmax 之前把 q · k 除以头大小 d"
                    "（q.shape[-1]）的平方根。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                _step_softmax_dim,
                {
                    "en": "The softmax runs over the queries (dim=-2). There is one query, so every weight becomes 1 "
                    "and the output is the sum of all the values. The one query's weights over the T + 1 keys must "
                    "sum to 1: softmax over the last axis, dim=-1, of the (B, H, 1, T + 1) scores.",
                    "zh": "softmax 是沿查询这一维（dim=-2）做的。这里只有一个查询，所以每个权重都成了 1，"
                    "输出变成了所有值的总和。应当是这一个查询对 T + 1 个键的权重加起来为 1：对形状为 (B, H, 1, T + 1) "
                    "的分数，沿最后一维 dim=-1 做 softmax。",
                },
            ),
            Mistake(
                "PREPENDED",
                _step_prepended,
                {
                    "en": "The output is right, but the new key and value are put in front of the cache, "
                    "torch.cat([k, k_cache], dim=2). A cache keeps its tokens in order, position t in slot t, and "
                    "the new token is position T: append it at the end, torch.cat([k_cache, k], dim=2).",
                    "zh": "输出是对的，但新的键和值被放到了缓存的最前面，torch.cat([k, k_cache], dim=2)。缓存按顺序存放词元，"
                    "位置 t 在第 t 格，而新词元的位置是 T：应把它追加到末尾，torch.cat([k_cache, k], dim=2)。",
                },
            ),
            Mistake(
                "FLOAT64",
                _step_float64,
                {
                    "en": "The numbers are right but float32 inputs come back float64. Return the output and both "
                    "caches in the inputs' dtype: compute in it, or convert back with .to(q.dtype).",
                    "zh": "数值是对的，但 float32 的输入返回成了 float64。输出和两个缓存的 dtype 都应与输入相同："
                    "直接用输入的 dtype 计算，或者最后用 .to(q.dtype) 转回去。",
                },
            ),
            Mistake(
                "HALF_SPLIT",
                _step_half_split,
                {
                    "en": "q and k are rotated in the half-split layout, pairs (i, i + d/2). The cached keys were "
                    "rotated in the interleaved layout of Exercise 2, pairs (2i, 2i + 1), so the new ones must be "
                    "too: rotate with your my_apply_rope.",
                    "zh": "q 和 k 是按前后两半布局旋转的，成对的是 (i, i + d/2)。缓存中的键是按练习 2 的交错布局旋转的，"
                    "成对的是 (2i, 2i + 1)，新的键和查询也必须这样：用你写的 my_apply_rope 来旋转。",
                },
            ),
        ),
    )
)
