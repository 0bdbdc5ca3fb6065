"""Lesson 07's exercises: grouped-query attention, rotary position embedding, and one decode step
with a KV cache.

The references are written here in plain code (tests/test_exercises_l07.py proves them equal to
``course_utils.decoding`` and to PyTorch's ``F.scaled_dot_product_attention(..., enable_gqa=True)``,
values and gradients). Every argument varies on its own across the cases, and the first case of
each exercise is one where every known mistake runs and shows:

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
    """The grader's: sizes drawn from its generator, causal or not, one in float64."""
    g, cases = generator, []
    for number in range(5):
        H_kv, groups = _sizes(g, 1, 1, 3)[0], _sizes(g, 1, 1, 3)[0]
        L_k = _sizes(g, 1, 1, 8)[0]
        L_q = _sizes(g, 1, 1, L_k)[0]
        cases.append(_gqa_case(g, _sizes(g, 1, 1, 2)[0], H_kv * groups, H_kv, L_q, L_k, 2 * _sizes(g, 1, 1, 4)[0],
                               bool(_sizes(g, 1, 0, 1)[0]), torch.float64 if number == 4 else torch.float32))
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


def _bottom_right(L_q, L_k):
    """(L_q, L_k): query i, at position L_k − L_q + i, keeps keys 0 … that position."""
    return torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q)


def _gqa(query, key, value, causal, *, repeat=False, top_left=False, scale=True, ignore_causal=False):
    groups = query.shape[1] // key.shape[1]
    if repeat:
        k, v = key.repeat(1, groups, 1, 1), value.repeat(1, groups, 1, 1)  # [k0, k1, k0, k1]: wrong pairs
    else:
        k, v = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)  # [k0, k0, k1, k1]
    L_q, L_k = query.shape[2], key.shape[2]
    keep = None
    if causal and not ignore_causal:
        keep = torch.ones(L_q, L_k, dtype=torch.bool).tril() if top_left else _bottom_right(L_q, L_k)
    return _attention(query, k, v, keep, scale)


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
                    "h // (H / H_kv): each key/value head is repeated in place, [k0, k0, k1, k1], "
                    "key.repeat_interleave(H // H_kv, dim=1). (With one key/value head, MQA, the two agree, which "
                    "is why this mistake hides in some tests.)",
                    "zh": "用 repeat 把键/值头平铺成了 [k0, k1, k0, k1]，于是查询头 1 读到的是键/值头 1，而不是头 0："
                    "头配错了。查询头 h 应读键/值头 h // (H / H_kv)：每个键/值头要原地重复，[k0, k0, k1, k1]，即 "
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
        L, d = _sizes(g, 1, 1, 6)[0], 2 * _sizes(g, 1, 1, 6)[0]
        far = number == 4
        positions = torch.randint(0, 6000 if far else 100, (L,), generator=g)
        cases.append((randn(g, _sizes(g, 1, 1, 2)[0], _sizes(g, 1, 1, 3)[0], L, d).to(
            torch.float64 if far else torch.float32), positions))
    return cases


def _rope(x, positions, *, halves=False, sign=1.0, exponent=2.0, from_zero=False, keep_dtype=True):
    d = x.shape[-1]
    theta = BASE ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)
    p = torch.arange(len(positions)) if from_zero else positions
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


def _step(q, k, v, k_cache, v_cache, *, position_shift=0, rotate_query=True, append=True, store_raw=False,
          rotate_again=False, top_left=False):
    T = k_cache.shape[2]
    position = torch.tensor([T + position_shift])
    q_rot = _rope(q, position) if rotate_query else q
    k_rot = _rope(k, position)
    old = _rope(k_cache, torch.arange(T)) if rotate_again else k_cache  # (rotating the cached keys once more)
    keys = torch.cat([old, k_rot], dim=2) if append else old  # (B, H, T + 1, d)
    values = torch.cat([v_cache, v], dim=2) if append else v_cache
    keep = None
    if top_left:
        keep = torch.zeros(1, keys.shape[2], dtype=torch.bool)
        keep[0, 0] = True  # is_causal=True with one query: key 0 only
    out = _attention(q_rot, keys, values, keep)
    stored = torch.cat([k_cache, k], dim=2) if store_raw else torch.cat([k_cache, k_rot], dim=2)
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
                    "en": "The cached keys are rotated again, at positions 0 … T − 1. They were rotated when they entered "
                    "the cache; a second rotation doubles their angles. Rotate only the new query and key, at position "
                    "T, and use the cache as it is.",
                    "zh": "缓存中的键又按位置 0 … T − 1 旋转了一次。它们在进入缓存时已经旋转过了；再转一次，角度就翻倍了。"
                    "只旋转新的查询和键（位置 T），缓存原样使用。",
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
        ),
    )
)
