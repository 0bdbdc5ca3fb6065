"""Lesson 02's exercises: masks.

Masks are keep masks (True = the query may attend to the key). Each exercise's first case is
square, so a mistake that mixes up the query and key axes still runs there and is recognised by
its values. The later cases vary every argument on its own (L_q with L_k fixed and the other way
round; max_len larger than every length; batch 1; length 0 and length 1), and have rows whose
keys are all hidden, so a function that ignores one argument fails somewhere. The grader's hidden
cases (``hidden``) keep those edges at sizes (and lengths, and masks) drawn from the teacher's seed,
and hold no public case: each has a shape, or integer arguments, of its own.
"""

import torch

from course_utils import masks

from .registry import Exercise, Mistake, randn, register

# ----------------------------------------------------------------------------- 02.causal_mask
# (L_q, L_k) -> keep mask (L_q, L_k) bool, True where key j <= query i (top-left aligned).


def _causal_cases(generator):
    del generator  # the sizes are chosen by hand: each case tests an edge
    # (4, 4) first: square, where every mistake runs. Then L_k fixed while L_q changes (3, 5),
    # (2, 5), L_q fixed while L_k changes (4, 1), both ways of L_q != L_k, and length 1.
    return [(4, 4), (1, 1), (3, 5), (2, 5), (5, 2), (4, 1), (1, 4)]


def _hidden_causal_cases(generator):
    """The grader's hidden cases: the public edges (square, L_q < L_k and L_q > L_k, L_q changed with
    L_k fixed and the other way round, length 1 on either side) at sizes drawn from its generator,
    never a public case's (L_q, L_k)."""
    g = generator
    public = set(_causal_cases(None))

    def fresh(draw):
        while (case := draw()) in public:
            pass
        return case

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    n = one(5, 12)
    fewer = fresh(lambda: (one(1, n - 1), n))  # L_q < L_k
    more = (one(n + 1, n + 6), n)  # L_q > L_k, the same L_k
    other = fresh(lambda: (more[0], one(1, n - 1)))  # the same L_q, another L_k
    return [(n, n), fewer, more, other, fresh(lambda: (1, one(2, 12))), fresh(lambda: (one(2, 12), 1))]


def _sizes(generator, count, low, high):
    """`count` integers drawn uniformly from [low, high] by the grader's generator."""
    return [int(n) for n in torch.randint(low, high + 1, (count,), generator=generator)]


def _ones(L_q, L_k):
    return torch.ones(L_q, L_k, dtype=torch.bool)


register(
    Exercise(
        id="02.causal_mask",
        reference=masks.causal_mask,
        cases=_causal_cases,
        hidden=_hidden_causal_cases,
        forbidden=("course_utils.masks.causal_mask",),  # the course's own (the reference): the answer
        mistakes=(
            Mistake(
                "MASK_INVERTED",
                lambda L_q, L_k: ~_ones(L_q, L_k).tril(),
                {
                    "en": "The mask is True at the future keys: that is the ignore mask of nn.MultiheadAttention. "
                    "Here True means keep: query i may attend to keys 0 … i.",
                    "zh": "掩码在未来的键上为 True：这是 nn.MultiheadAttention 的“忽略”掩码。"
                    "这里 True 表示保留：查询 i 可以关注键 0 … i。",
                },
            ),
            Mistake(
                "HIDES_DIAGONAL",
                lambda L_q, L_k: _ones(L_q, L_k).tril(-1),
                {
                    "en": "The diagonal is hidden, so query i cannot see its own position (and query 0 sees "
                    "nothing at all). Keep key j when j <= i: .tril() with the default diagonal=0.",
                    "zh": "对角线被遮住了，查询 i 看不到自己所在的位置（查询 0 更是什么都看不到）。"
                    "键 j ≤ i 时应保留：用默认 diagonal=0 的 .tril()。",
                },
            ),
            Mistake(
                "SHOWS_FUTURE",
                lambda L_q, L_k: _ones(L_q, L_k).triu(),
                {
                    "en": "The mask keeps the upper triangle: each query sees itself and the future, and not the "
                    "past. Keep the lower triangle, .tril().",
                    "zh": "掩码保留的是上三角：每个查询看得到自己和未来，却看不到过去。应保留下三角：.tril()。",
                },
            ),
            Mistake(
                "BOTTOM_RIGHT",
                lambda L_q, L_k: _ones(L_q, L_k).tril(L_k - L_q),
                {
                    "en": "With L_q != L_k your mask is aligned at the bottom right (torch.nn.attention.bias."
                    "causal_lower_right): right when the queries are the last L_q positions, as when decoding "
                    "with a cache of earlier keys. This exercise asks for the top-left alignment, the one of "
                    "F.scaled_dot_product_attention(is_causal=True): query i sees keys 0 … i.",
                    "zh": "L_q != L_k 时，你的掩码按右下角对齐（即 torch.nn.attention.bias.causal_lower_right）："
                    "当查询是最后 L_q 个位置时（例如带着早先键的缓存做解码），这样对齐是对的。本练习要的是左上角对齐，"
                    "即 F.scaled_dot_product_attention(is_causal=True) 的对齐方式：查询 i 看得到键 0 … i。",
                },
            ),
            Mistake(
                "IGNORES_L_K",
                lambda L_q, L_k: _ones(L_q, L_q).tril(),
                {
                    "en": "The mask has shape (L_q, L_q): L_k was not used. It needs one row per query and one "
                    "column per key: (L_q, L_k).",
                    "zh": "掩码的形状是 (L_q, L_q)：没有用到 L_k。它应该每个查询一行、每个键一列：(L_q, L_k)。",
                },
            ),
            Mistake(
                "SEES_NEXT_KEY",
                lambda L_q, L_k: _ones(L_q, L_k).tril(1),
                {
                    "en": "Each query also sees the key right after it: .tril(1) keeps one diagonal above the main one "
                    "(with a comparison, j <= i + 1 or j < i + 2). Keep key j when j <= i: .tril() with the default "
                    "diagonal=0.",
                    "zh": "每个查询还看得到紧跟在它后面的那个键：.tril(1) 会在主对角线之上多保留一条对角线"
                    "（用比较来写就是 j <= i + 1 或 j < i + 2）。键 j ≤ i 时才保留：用默认 diagonal=0 的 .tril()。",
                },
            ),
            Mistake(
                "TRANSPOSED",
                lambda L_q, L_k: torch.arange(L_k)[:, None] <= torch.arange(L_q),
                {
                    "en": "The mask has shape (L_k, L_q), one row per key: it is the causal mask transposed. Rows are "
                    "queries and columns keys: compare a column of query positions, torch.arange(L_q)[:, None], with "
                    "a row of key positions, torch.arange(L_k).",
                    "zh": "掩码的形状是 (L_k, L_q)，每个键占一行：这是因果掩码的转置。行对应查询、列对应键："
                    "应把一列查询位置 torch.arange(L_q)[:, None] 与一行键位置 torch.arange(L_k) 相比较。",
                },
            ),
            Mistake(
                "IGNORES_L_Q",
                lambda L_q, L_k: _ones(L_k, L_k).tril(),
                {
                    "en": "The mask has shape (L_k, L_k): L_q was not used. It needs one row per query and one column "
                    "per key: (L_q, L_k).",
                    "zh": "掩码的形状是 (L_k, L_k)：没有用到 L_q。它应该每个查询一行、每个键一列：(L_q, L_k)。",
                },
            ),
            Mistake(
                "FLOAT_MASK",
                lambda L_q, L_k: torch.ones(L_q, L_k).tril(),
                {
                    "en": "The mask holds the numbers 1.0 and 0.0. A keep mask is bool (dtype=torch.bool, or "
                    ".bool()): a float mask means something else to PyTorch, F.scaled_dot_product_attention "
                    "adds it to the scores.",
                    "zh": "掩码里是 1.0 和 0.0 这样的数。保留掩码是 bool 类型（dtype=torch.bool，或 .bool()）："
                    "浮点掩码在 PyTorch 里另有含义，F.scaled_dot_product_attention 会把它加到分数上。",
                },
            ),
            Mistake(
                "ADDITIVE_MASK",
                lambda L_q, L_k: torch.zeros(L_q, L_k).masked_fill(~_ones(L_q, L_k).tril(), float("-inf")),
                {
                    "en": "This is an additive mask (0 keep, -inf hide), the kind nn.Transformer."
                    "generate_square_subsequent_mask returns. This exercise asks for the bool keep mask: True "
                    "where key j <= query i.",
                    "zh": "这是加性掩码（0 保留，-inf 遮住），即 nn.Transformer.generate_square_subsequent_mask "
                    "返回的那种。本练习要的是 bool 保留掩码：键 j ≤ 查询 i 时为 True。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 02.decoder_mask
# lengths (B,), max_len L -> keep mask (B, 1, L, L) bool for a padded decoder batch: key j is
# visible to query i when it is a real token (j < length) and not in the future (j <= i).


def _decoder_mask(lengths, max_len):
    return masks.padding_mask(lengths, max_len) & masks.causal_mask(max_len, device=lengths.device)  # (B, 1, L, L)


def _decoder_cases(generator):
    del generator
    return [
        (torch.tensor([3, 1, 2]), 3),  # B = L, so a mask with its axes swapped still has the same size
        (torch.tensor([4, 6, 2]), 6),
        (torch.tensor([2, 4]), 7),  # max_len > every length: max(lengths) is not the padded length
        (torch.tensor([1]), 1),  # batch 1, a single token
        (torch.tensor([3]), 5),  # batch 1 with padding
        (torch.tensor([0, 2]), 2),  # an empty sequence: every row of item 0 is fully hidden
        (torch.tensor([2, 0, 3, 1, 3]), 3),  # more sequences than positions: B = 5 > L = 3
    ]


def _decoder_hidden(generator):
    """The grader's hidden cases: the public edges (B = L, padding beyond the longest sequence, batch
    1 with padding, an empty sequence, more sequences than positions) with batch sizes, padded
    lengths and lengths drawn from the teacher's seed, each between 0 and max_len as the text says;
    no (B, max_len) of a public case, so every case has a new shape."""
    g = generator
    public = {(len(lengths), max_len) for lengths, max_len in _decoder_cases(None)}

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    def sizes(batch, max_len):
        while (drawn := (batch(), max_len())) in public:
            pass
        return drawn

    def lengths(batch, low, high):
        return torch.randint(low, high + 1, (batch,), generator=g)

    n = one(4, 7)
    cases = [(lengths(n, 0, n), n)]  # B = L
    batch, max_len = sizes(lambda: one(2, 4), lambda: one(4, 8))
    cases.append((lengths(batch, 1, max_len), max_len))
    batch, max_len = sizes(lambda: one(2, 4), lambda: one(3, 9))
    cases.append((lengths(batch, 0, max_len - 1), max_len))  # max_len > every length
    batch, max_len = sizes(lambda: 1, lambda: one(2, 9))
    cases.append((lengths(1, 1, max_len - 1), max_len))  # batch 1 with padding
    batch, max_len = sizes(lambda: one(2, 4), lambda: one(2, 7))
    empty = lengths(batch, 1, max_len)
    empty[one(0, batch - 1)] = 0  # an empty sequence: every row of its item is hidden
    cases.append((empty, max_len))
    max_len = one(1, 4)
    batch, max_len = sizes(lambda: one(max_len + 1, 7), lambda: max_len)
    cases.append((lengths(batch, 0, max_len), max_len))  # more sequences than positions
    return cases


def _padding_le(lengths, max_len):
    return (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]


def _padded_queries(lengths, max_len):
    return masks.padding_mask(lengths, max_len).transpose(-2, -1)  # (B, 1, L, 1): query i is real


register(
    Exercise(
        id="02.decoder_mask",
        reference=_decoder_mask,
        cases=_decoder_cases,
        hidden=_decoder_hidden,
        mistakes=(
            Mistake(
                "OFF_BY_ONE",
                lambda lengths, max_len: _padding_le(lengths, max_len) & masks.causal_mask(max_len),
                {
                    "en": "One padding position too many is kept: a sequence of length n uses positions 0 … n-1 "
                    "(position < length, not <=).",
                    "zh": "多保留了一个填充位置：长度为 n 的序列占据位置 0 … n-1（位置 < 长度，而不是 <=）。",
                },
            ),
            Mistake(
                "OR_NOT_AND",
                lambda lengths, max_len: masks.padding_mask(lengths, max_len) | masks.causal_mask(max_len),
                {
                    "en": "The two masks are combined with | (or): a key is then kept when either mask keeps it. "
                    "Keep a key only when both keep it: &.",
                    "zh": "两个掩码是用 |（或）合并的：只要有一个掩码保留该键，它就被保留。"
                    "只有两个掩码都保留时才应保留：用 &。",
                },
            ),
            Mistake(
                "NO_CAUSAL",
                masks.padding_mask,
                {
                    "en": "Only the padding is hidden: every query still sees the keys after it. Combine the padding "
                    "mask with the causal mask (&).",
                    "zh": "只遮住了填充位置：每个查询仍然看得到它后面的键。请把填充掩码与因果掩码用 & 合并。",
                },
            ),
            Mistake(
                "NO_PADDING",
                lambda lengths, max_len: masks.causal_mask(max_len),
                {
                    "en": "Only the future is hidden, and the mask has no batch axis: the padding of each sequence "
                    "must be hidden too. Combine the (B, 1, 1, L) padding mask with the causal mask (&).",
                    "zh": "只遮住了未来，而且掩码没有批量维度：每条序列的填充位置也必须遮住。"
                    "请把 (B, 1, 1, L) 的填充掩码与因果掩码用 & 合并。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                lambda lengths, max_len: ~_decoder_mask(lengths, max_len),
                {
                    "en": "The mask is True where a key must be hidden (the nn.MultiheadAttention meaning). Here "
                    "True means keep.",
                    "zh": "掩码在应遮住的键上为 True（这是 nn.MultiheadAttention 的含义）。这里 True 表示保留。",
                },
            ),
            Mistake(
                "IGNORES_MAX_LEN",
                lambda lengths, max_len: _decoder_mask(lengths, int(lengths.max())),
                {
                    "en": "The mask is as long as the longest sequence, max(lengths), instead of max_len: a batch is "
                    "often padded further than its longest sequence. Build it with max_len positions.",
                    "zh": "掩码的长度取的是最长序列的长度 max(lengths)，而不是 max_len：一个批量填充到的长度常常比其中"
                    "最长的序列还长。请按 max_len 个位置构造掩码。",
                },
            ),
            Mistake(
                "HIDES_PADDED_QUERIES",
                lambda lengths, max_len: _padded_queries(lengths, max_len) & masks.causal_mask(max_len),
                {
                    "en": "Your mask hides every key from the padded queries (whole rows), so their rows are fully "
                    "masked. Some code does that on purpose, since the outputs of padded queries are thrown away, "
                    "but this exercise asks for the padding mask on the keys only: (B, 1, 1, L), whose last axis "
                    "meets the keys, & the causal mask. (A real query never sees padding anyway: it lies in its "
                    "future.)",
                    "zh": "你的掩码对填充位置上的查询遮住了所有键（整行），于是这些行成了全遮蔽行。有些代码是有意这样做的，"
                    "因为填充位置上的查询的输出反正会被丢掉；但本练习要求填充掩码只作用在键上：形状为 (B, 1, 1, L)，"
                    "最后一维对上键，再与因果掩码用 & 合并。（真实查询本来就看不到填充：填充在它的未来。）",
                },
            ),
            Mistake(
                "CAUSAL_HIDES_DIAGONAL",
                lambda lengths, max_len: masks.padding_mask(lengths, max_len) & _ones(max_len, max_len).tril(-1),
                {
                    "en": "The causal part hides the diagonal, so query i cannot see its own position (and query 0 sees "
                    "nothing). Keep key j when j <= i: .tril() with the default diagonal=0.",
                    "zh": "因果部分把对角线也遮住了，查询 i 看不到自己所在的位置（查询 0 更是什么都看不到）。"
                    "键 j ≤ i 时应保留：用默认 diagonal=0 的 .tril()。",
                },
            ),
            Mistake(
                "CAUSAL_UPPER",
                lambda lengths, max_len: masks.padding_mask(lengths, max_len) & _ones(max_len, max_len).triu(),
                {
                    "en": "The causal part keeps the upper triangle: each query sees itself and the future, not the "
                    "past. Keep the lower triangle, .tril().",
                    "zh": "因果部分保留的是上三角：每个查询看得到自己和未来，却看不到过去。应保留下三角：.tril()。",
                },
            ),
            Mistake(
                "FLOAT_MASK",
                lambda lengths, max_len: _decoder_mask(lengths, max_len).float(),
                {
                    "en": "The mask holds the numbers 1.0 and 0.0 (float, from multiplying float masks, say). A keep mask "
                    "is bool: combine bool masks with &, or convert with .bool(). A float mask means something else to "
                    "PyTorch: F.scaled_dot_product_attention adds it to the scores.",
                    "zh": "掩码里是 1.0 和 0.0 这样的浮点数（例如把两个浮点掩码相乘得到的）。保留掩码是 bool 类型："
                    "用 & 合并 bool 掩码，或用 .bool() 转换。浮点掩码在 PyTorch 里另有含义："
                    "F.scaled_dot_product_attention 会把它加到分数上。",
                },
            ),
            Mistake(
                "NO_HEAD_AXIS",
                lambda lengths, max_len: _decoder_mask(lengths, max_len)[:, 0],
                {
                    "en": "The mask is (B, L, L): it has no head axis, so against (B, H, L, L) scores its batch "
                    "axis would meet the heads. Return (B, 1, L, L), with size 1 where the mask does not vary.",
                    "zh": "掩码的形状是 (B, L, L)：少了头这一维，与 (B, H, L, L) 的分数广播时，它的批量维会对上头维。"
                    "请返回 (B, 1, L, L)，不变化的维度大小取 1。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 02.masked_softmax
# scores (..., L_q, L_k), keep mask broadcastable to it -> weights; fully hidden rows all zero.


def _normalised(weights):
    return weights / weights.sum(dim=-1, keepdim=True)


def _hidden_rows(keep):
    return ~keep.any(dim=-1, keepdim=True)


def _masked_softmax_cases(generator):
    g = generator

    def keep(*shape, p=0.6):
        return torch.rand(*shape, generator=g) < p

    square = keep(4, 4, 4)
    square[0, 1] = False  # a fully hidden row
    square[2, 3] = False
    wide = keep(3, 1, 7)  # (B, 1, L_k): one padding pattern per item, for every query
    wide[1] = False  # an item with no real keys: all its rows are hidden
    wide[0, 0, 0] = True
    # rows far apart: exp(100) overflows float32 and exp(-110) underflows, so the maximum must be subtracted
    offsets = torch.tensor([0.0, 100.0, -110.0, 50.0, 5.0]).view(5, 1)
    per_key = torch.tensor([True, False, True, True, False, True])  # (L_k,): the same keys hidden everywhere
    cases = [
        (2.0 * randn(g, 4, 4, 4), square),
        (3.0 * randn(g, 3, 5, 7) + offsets, wide),
        (randn(g, 2, 1, 1), torch.tensor([True, False]).view(2, 1, 1)),  # length 1, one row hidden
        (3.0 * randn(g, 2, 2, 6, 3), masks.causal_mask(6, 3, align="bottom_right")),  # (B, H, L_q, L_k), L_q > L_k
        (randn(g, 2, 3, 6).double(), per_key),  # float64, a 1-D mask
    ]
    # batch 1 with three heads and a (B, 1, 1, L_k) padding mask, as multi-head attention gets it, whose
    # hidden key scores far above the kept ones: a softmax over every key leaves them 0
    padded = 2.0 * randn(g, 1, 3, 4, 5)
    padded[..., 2] += 120.0
    cases.append((padded, torch.tensor([True, True, False, True, False]).view(1, 1, 1, 5)))
    # scores that are not contiguous (a transposed tensor), L_q < L_k, a fully hidden row
    scattered = keep(2, 4, 6)
    scattered[1, 2] = False
    cases.append(((2.0 * randn(g, 2, 6, 4)).transpose(-2, -1), scattered))
    return cases


def _masked_softmax_hidden(generator):
    """The grader's hidden cases: the public edges at sizes drawn from its generator (fully hidden
    rows, an item with no real keys under a (B, 1, L_k) mask with rows far apart, length 1, (B, H,
    L_q, L_k) scores under a bottom-right causal mask with L_q > L_k, float64 under a 1-D mask, a
    (B, 1, 1, L_k) padding mask hiding a key that scores far above the kept ones, scores that are not
    contiguous), with more keys than any public case has; every mask broadcasts against its scores
    without enlarging them, as the text says."""
    g = generator

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    def keep(*shape, p=0.6):
        return torch.rand(*shape, generator=g) < p

    batch, l_q, l_k = one(2, 4), one(2, 6), one(8, 10)
    square = keep(batch, l_q, l_k)
    square[0, one(0, l_q - 1)] = False  # a fully hidden row
    square[-1, one(0, l_q - 1)] = False
    cases = [(2.0 * randn(g, batch, l_q, l_k), square)]

    batch, l_q, l_k = one(2, 4), one(3, 7), one(2, 8)
    offsets = torch.tensor([0.0, 100.0, -110.0, 50.0, 5.0]).repeat(2)[:l_q].view(l_q, 1)  # rows far apart
    wide = keep(batch, 1, l_k)
    wide[one(1, batch - 1)] = False  # an item with no real keys
    wide[0, 0, one(0, l_k - 1)] = True
    cases.append((3.0 * randn(g, batch, l_q, l_k) + offsets, wide))

    batch = one(2, 5)
    single = keep(batch, 1, 1)
    single[0], single[1] = True, False  # length 1, one row hidden
    cases.append((randn(g, batch, 1, 1), single))

    l_k = one(2, 5)
    l_q = one(l_k + 1, 8)
    cases.append((3.0 * randn(g, one(1, 2), one(2, 3), l_q, l_k), masks.causal_mask(l_q, l_k, align="bottom_right")))

    l_k = one(3, 8)
    per_key, hidden = keep(l_k), one(0, l_k - 1)
    per_key[hidden], per_key[(hidden + 1) % l_k] = False, True  # hides some keys, not all
    cases.append((randn(g, one(1, 3), one(2, 5), l_k).double(), per_key))

    batch, l_k = one(1, 2), one(4, 8)
    padding = keep(batch, 1, 1, l_k)
    far = one(0, l_k - 1)
    padding[..., far] = False  # a hidden key that scores far above the kept ones
    padding[..., (far + 1) % l_k] = True
    padded = 2.0 * randn(g, batch, one(2, 4), one(2, 5), l_k)
    padded[..., far] += 120.0
    cases.append((padded, padding))

    batch, l_q, l_k = one(1, 3), one(2, 5), one(6, 9)
    scattered = keep(batch, l_q, l_k)
    scattered[-1, one(0, l_q - 1)] = False  # a fully hidden row
    cases.append(((2.0 * randn(g, batch, l_k, l_q)).transpose(-2, -1), scattered))  # not contiguous, L_q < L_k
    return cases


def _recipe(scores, keep, dim=-1, hidden=None):
    """The three steps of the exercise, with a softmax axis and a fully-masked-row test to vary."""
    hidden = _hidden_rows(keep) if hidden is None else hidden
    scores = scores.masked_fill(~keep, float("-inf")).masked_fill(hidden, 0.0)
    return scores.softmax(dim=dim).masked_fill(hidden, 0.0)


register(
    Exercise(
        id="02.masked_softmax",
        reference=masks.masked_softmax,
        cases=_masked_softmax_cases,
        hidden=_masked_softmax_hidden,
        # the course's own (the reference), and so every function built on it, such as
        # attention.scaled_dot_product_attention; torch.softmax stays allowed (the text uses it)
        forbidden=("course_utils.masks.masked_softmax",),
        mistakes=(
            Mistake(
                "NAN_ON_FULLY_MASKED",
                lambda scores, keep: scores.masked_fill(~keep, float("-inf")).softmax(dim=-1),
                {
                    "en": "A row whose keys are all hidden is all -inf, and softmax of it is 0/0 = NaN. Give such "
                    "rows finite scores before the softmax and zero weights after it "
                    "(find them with ~keep_mask.any(dim=-1, keepdim=True)).",
                    "zh": "全遮蔽行全是 -inf，对它做 softmax 得到 0/0 = NaN。请在 softmax 之前给这样的行"
                    "填上有限的分数，之后再把它们的权重置零（用 ~keep_mask.any(dim=-1, keepdim=True) 找出这些行）。",
                },
            ),
            Mistake(
                "FINITE_FILL",
                lambda scores, keep: scores.masked_fill(~keep, -1e9).softmax(dim=-1),
                {
                    "en": "With a finite fill such as -1e9, a row whose keys are all hidden gets uniform weights: "
                    "it attends to the padding. Its weights must be zero.",
                    "zh": "用 -1e9 这样的有限值填充时，全遮蔽行会得到均匀的权重，也就是去关注填充位置。"
                    "这一行的权重应全为 0。",
                },
            ),
            Mistake(
                "FILL_ZERO",
                lambda scores, keep: scores.masked_fill(~keep, 0.0).softmax(-1).masked_fill(_hidden_rows(keep), 0.0),
                {
                    "en": "Hidden scores were set to 0, and exp(0) = 1 is not zero weight. Fill them with -inf "
                    "before the softmax.",
                    "zh": "被遮住的分数被设成了 0，而 exp(0) = 1，权重并不为零。请在 softmax 之前填入 -inf。",
                },
            ),
            Mistake(
                "FILL_ZERO_ONLY",
                lambda scores, keep: scores.masked_fill(~keep, 0.0).softmax(dim=-1),
                {
                    "en": "Hidden scores were set to 0, and exp(0) = 1 is not zero weight: hidden keys still get "
                    "weight, and a fully masked row gets uniform weights. Fill hidden scores with -inf before the "
                    "softmax, and give fully masked rows zero weights after it.",
                    "zh": "被遮住的分数被设成了 0，而 exp(0) = 1，权重并不为零：被遮住的键仍然分到权重，全遮蔽行得到均匀的权重。"
                    "请在 softmax 之前给被遮住的分数填入 -inf，并在 softmax 之后把全遮蔽行的权重置零。",
                },
            ),
            Mistake(
                "RENORMALISED_AFTER_SOFTMAX",
                lambda scores, keep: _normalised(scores.softmax(dim=-1) * keep),
                {
                    "en": "The softmax ran over every key, then the hidden weights were zeroed and the rest divided by "
                    "their sum. A fully masked row gives 0/0 = NaN, and so does a row whose kept keys are far below a "
                    "hidden one (their weights underflow to 0). Fill the hidden scores with -inf before the softmax.",
                    "zh": "先对所有键做了 softmax，再把被遮住的权重置零，其余的除以它们的和。全遮蔽行会得到 0/0 = NaN；"
                    "如果保留下来的键的分数远低于某个被遮住的键，它们的权重下溢为 0，同样得到 NaN。"
                    "请在 softmax 之前给被遮住的分数填入 -inf。",
                },
            ),
            Mistake(
                "MASK_AFTER_SOFTMAX",
                lambda scores, keep: scores.softmax(dim=-1) * keep,
                {
                    "en": "The weights were masked after the softmax, so the kept weights no longer sum to 1. Mask "
                    "the scores (with -inf) before the softmax.",
                    "zh": "你在 softmax 之后才遮住权重，保留下来的权重之和就不再是 1。"
                    "请在 softmax 之前用 -inf 遮住分数。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                lambda scores, keep: _recipe(scores, ~keep),
                {
                    "en": "The mask is read the other way round: True means the query may attend to the key, so "
                    "fill the scores where keep_mask is False (~keep_mask).",
                    "zh": "掩码的含义读反了：True 表示查询可以关注该键，所以应在 keep_mask 为 False 的位置"
                    "（~keep_mask）填充分数。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda scores, keep: _recipe(scores, keep, dim=-2),
                {
                    "en": "The softmax runs over the queries (dim=-2): each column sums to 1. Each query's weights "
                    "over the keys must sum to 1: softmax over the last axis, dim=-1.",
                    "zh": "softmax 是沿查询维（dim=-2）做的：每一列之和为 1。应当是每个查询对所有键的权重之和为 1："
                    "沿最后一维做 softmax，dim=-1。",
                },
            ),
            Mistake(
                "NO_KEEPDIM",
                lambda scores, keep: _recipe(scores, keep, hidden=~keep.any(dim=-1)),
                {
                    "en": "keep_mask.any(dim=-1) without keepdim=True drops the key axis, so the (..., L_q) result "
                    "broadcasts from the right against (..., L_q, L_k): its queries meet the keys. Keep the axis: "
                    "~keep_mask.any(dim=-1, keepdim=True) is (..., L_q, 1).",
                    "zh": "keep_mask.any(dim=-1) 不加 keepdim=True 会去掉键这一维，于是形状为 (..., L_q) 的结果与 "
                    "(..., L_q, L_k) 从右往左广播时，查询维对上了键维。请保留这一维："
                    "~keep_mask.any(dim=-1, keepdim=True) 的形状是 (..., L_q, 1)。",
                },
            ),
        ),
    )
)
