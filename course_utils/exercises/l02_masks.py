"""Lesson 02's exercises: masks.

Masks are keep masks (True = the query may attend to the key). Each exercise's first case is
square, so a mistake that mixes up the query and key axes still runs there and is recognised by
its values; the later cases have length 1, L_q != L_k and rows whose keys are all hidden.
"""

import torch

from .. import masks
from .registry import Exercise, Mistake, randn, register

# ----------------------------------------------------------------------------- 02.causal_mask
# (L_q, L_k) -> keep mask (L_q, L_k), True where key j <= query i (top-left aligned).


def _causal_cases(generator):
    del generator  # the sizes are chosen by hand: each case tests an edge
    return [(4, 4), (1, 1), (3, 5), (5, 2), (1, 4)]


def _ones(L_q, L_k):
    return torch.ones(L_q, L_k, dtype=torch.bool)


register(
    Exercise(
        id="02.causal_mask",
        reference=masks.causal_mask,
        cases=_causal_cases,
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
                    "en": "With L_q != L_k your mask is aligned at the bottom right. This course (like "
                    "F.scaled_dot_product_attention(is_causal=True)) aligns it at the top left: query i sees "
                    "keys 0 … i.",
                    "zh": "L_q != L_k 时，你的掩码是按右下角对齐的。本课程（与 F.scaled_dot_product_attention"
                    "(is_causal=True) 一样）按左上角对齐：查询 i 看得到键 0 … i。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 02.decoder_mask
# lengths (B,), max_len L -> keep mask (B, 1, L, L) for a padded decoder batch: key j is visible
# to query i when it is a real token (j < length) and not in the future (j <= i).


def _decoder_mask(lengths, max_len):
    return masks.padding_mask(lengths, max_len) & masks.causal_mask(max_len)  # (B, 1, L, L)


def _decoder_cases(generator):
    del generator
    return [
        (torch.tensor([3, 1, 2]), 3),  # B = L, so a mask with its axes swapped still has the same size
        (torch.tensor([4, 6, 2]), 6),
        (torch.tensor([1]), 1),  # a single token
        (torch.tensor([0, 2]), 2),  # an empty sequence: every row of item 0 is fully hidden
    ]


def _padding_le(lengths, max_len):
    return (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]


register(
    Exercise(
        id="02.decoder_mask",
        reference=_decoder_mask,
        cases=_decoder_cases,
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
        ),
    )
)


# ----------------------------------------------------------------------------- 02.masked_softmax
# scores (..., L_q, L_k), keep mask broadcastable to it -> weights; fully hidden rows all zero.


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
    return [
        (2.0 * randn(g, 4, 4, 4), square),
        (2.0 * randn(g, 3, 5, 7), wide),
        (randn(g, 2, 1, 1), torch.tensor([True, False]).view(2, 1, 1)),  # length 1, one row hidden
        (3.0 * randn(g, 2, 2, 6, 3), masks.causal_mask(6, 3)),  # (B, H, L_q, L_k), L_q > L_k
    ]


register(
    Exercise(
        id="02.masked_softmax",
        reference=masks.masked_softmax,
        cases=_masked_softmax_cases,
        mistakes=(
            Mistake(
                "NAN_ON_FULLY_MASKED",
                lambda scores, keep: scores.masked_fill(~keep, float("-inf")).softmax(dim=-1),
                {
                    "en": "A row whose keys are all hidden is all -inf, and softmax of it is 0/0 = NaN. Give such "
                    "rows finite scores before the softmax and zero weights after it "
                    "(find them with ~keep_mask.any(dim=-1, keepdim=True)).",
                    "zh": "所有键都被遮住的一行全是 -inf，对它做 softmax 得到 0/0 = NaN。请在 softmax 之前给这样的行"
                    "填上有限的分数，之后再把它们的权重置零（用 ~keep_mask.any(dim=-1, keepdim=True) 找出这些行）。",
                },
            ),
            Mistake(
                "FINITE_FILL",
                lambda scores, keep: scores.masked_fill(~keep, -1e9).softmax(dim=-1),
                {
                    "en": "With a finite fill such as -1e9, a row whose keys are all hidden gets uniform weights: "
                    "it attends to the padding. Its weights must be zero.",
                    "zh": "用 -1e9 这样的有限值填充时，所有键都被遮住的一行会得到均匀的权重，也就是去关注填充位置。"
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
                lambda scores, keep: masks.masked_softmax(scores, ~keep),
                {
                    "en": "The mask is read the other way round: True means the query may attend to the key, so "
                    "fill the scores where keep_mask is False (~keep_mask).",
                    "zh": "掩码的含义读反了：True 表示查询可以关注该键，所以应在 keep_mask 为 False 的位置"
                    "（~keep_mask）填充分数。",
                },
            ),
        ),
    )
)
