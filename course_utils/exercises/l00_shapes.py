"""Lesson 00's exercises: tensor shapes.

Each exercise's first case is square (every axis the same size), so a learner's function with
its axes in the wrong order still runs there and can be recognised by its values; the later
cases have distinct sizes, length 1 and L_q != L_k.
"""

import torch

from .. import masks
from .registry import Exercise, Mistake, randn, register


# ----------------------------------------------------------------------------- 00.split_heads
# (B, L, H*D) -> (B, H, L, D): the feature axis holds H blocks of D features, head after head.


def _split_heads(x, num_heads):
    B, L, HD = x.shape
    return x.view(B, L, num_heads, HD // num_heads).transpose(1, 2)  # (B, H, L, D)


def _split_cases(generator):
    return [
        (randn(generator, 3, 3, 9), 3),  # B = L = H = D: every axis order has the right shape
        (randn(generator, 2, 5, 12), 4),
        (randn(generator, 1, 1, 8), 2),  # one sequence of length 1
        (randn(generator, 3, 4, 6), 3),
    ]


register(
    Exercise(
        id="00.split_heads",
        reference=_split_heads,
        cases=_split_cases,
        mistakes=(
            Mistake(
                "VIEW_NO_PERMUTE",
                lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
                {
                    "en": "You viewed (B, L, H·D) straight as (B, H, L, D): the shape is right but the numbers are "
                    "cut in memory order, so a 'head' holds pieces of several positions. View as (B, L, H, D) "
                    "first, then swap axes 1 and 2.",
                    "zh": "你把 (B, L, H·D) 直接 view 成了 (B, H, L, D)：形状对了，但数据是按内存顺序切开的，"
                    "一个“头”里混进了好几个位置的数据。应先 view 成 (B, L, H, D)，再交换第 1、2 维。",
                },
            ),
            Mistake(
                "HEAD_DIM_FIRST",
                lambda x, h: x.reshape(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2),
                {
                    "en": "The feature axis was split as (D, H) instead of (H, D): the features of one head are "
                    "D consecutive numbers, so split the last axis into (H, D), heads first.",
                    "zh": "特征维被拆成了 (D, H)，而不是 (H, D)：同一个头的 D 个特征在内存中是连续的，"
                    "所以最后一维应拆成 (H, D)，头在前。",
                },
            ),
            Mistake(
                "WRONG_PERMUTE",
                lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(0, 2, 3, 1),
                {
                    "en": "After the view (B, L, H, D) the axes were reordered to (B, H, D, L): positions must stay "
                    "before features. Swap only axes 1 and 2: .transpose(1, 2).",
                    "zh": "view 成 (B, L, H, D) 之后，维度被重排成了 (B, H, D, L)：位置维必须在特征维之前。"
                    "只需交换第 1、2 维：.transpose(1, 2)。",
                },
            ),
            Mistake(
                "HEADS_BEFORE_BATCH",
                lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(2, 0, 1, 3),
                {
                    "en": "The result is laid out (H, B, L, D): the batch axis must stay first, giving (B, H, L, D).",
                    "zh": "结果的布局是 (H, B, L, D)：批量维应保持在最前，结果应为 (B, H, L, D)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 00.merge_heads
# (B, H, L, D) -> (B, L, H*D): the inverse of split_heads.


def _merge_heads(x):
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, H*D)


def _merge_cases(generator):
    return [
        (randn(generator, 3, 3, 3, 3),),  # B = H = L = D
        (randn(generator, 2, 4, 5, 3),),
        (randn(generator, 2, 3, 1, 4),),  # length 1: the transposed tensor is still contiguous
        (randn(generator, 1, 2, 6, 5),),
    ]


register(
    Exercise(
        id="00.merge_heads",
        reference=_merge_heads,
        cases=_merge_cases,
        mistakes=(
            Mistake(
                "RESHAPE_NO_PERMUTE",
                lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
                {
                    "en": "You reshaped (B, H, L, D) straight to (B, L, H·D): the numbers are regrouped in memory "
                    "order, mixing positions. Bring the heads next to the features first: .transpose(1, 2), "
                    "then reshape.",
                    "zh": "你把 (B, H, L, D) 直接 reshape 成了 (B, L, H·D)：数据按内存顺序重新分组，不同位置被混在了一起。"
                    "应先用 .transpose(1, 2) 把头维移到特征维旁边，再 reshape。",
                },
            ),
            Mistake(
                "HEAD_DIM_FIRST",
                lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
                {
                    "en": "The features were merged in (D, H) order: head 0's D features must come first, then "
                    "head 1's. Merge from (B, L, H, D), not (B, L, D, H).",
                    "zh": "特征按 (D, H) 的顺序合并了：应先放第 0 个头的 D 个特征，再放第 1 个头的。"
                    "要从 (B, L, H, D) 合并，而不是 (B, L, D, H)。",
                },
            ),
            Mistake(
                "VIEW_NOT_CONTIGUOUS",
                lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
                {
                    "en": "After .transpose(1, 2) the tensor is not contiguous, so .view cannot merge H and D "
                    "(it only worked where L = 1). Use .reshape, or .contiguous().view.",
                    "zh": ".transpose(1, 2) 之后张量不再连续，.view 无法把 H 和 D 合并（只在 L = 1 时碰巧可行）。"
                    "请改用 .reshape，或 .contiguous().view。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 00.padding_mask
# lengths (B,) -> keep mask (B, 1, 1, L_k), True where key position < length: it broadcasts
# against scores (B, H, L_q, L_k).


def _mask_cases(generator):
    del generator  # the lengths are chosen by hand: each case tests an edge
    return [
        (torch.tensor([3, 1, 2]), 3),  # B = L_k, so a mask with its axes swapped still has the same size
        (torch.tensor([2, 5, 4, 1]), 6),  # even the longest sequence is padded
        (torch.tensor([1]), 1),  # a single token, no padding
        (torch.tensor([4, 4]), 4),  # no padding at all
    ]


register(
    Exercise(
        id="00.padding_mask",
        reference=masks.padding_mask,
        cases=_mask_cases,
        mistakes=(
            Mistake(
                "NO_UNSQUEEZE",
                lambda lengths, max_len: torch.arange(max_len) < lengths[:, None],
                {
                    "en": "The mask has shape (B, L_k). Against scores (B, H, L_q, L_k) its batch axis would line "
                    "up with L_q. Add the two size-1 axes: (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, L_k)。与 (B, H, L_q, L_k) 的分数广播时，它的批量维会和 L_q 对齐。"
                    "请补上两个大小为 1 的维度：(B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "QUERY_AXIS",
                lambda lengths, max_len: (torch.arange(max_len) < lengths[:, None])[:, None, :, None],
                {
                    "en": "The mask has shape (B, 1, L, 1), so it masks query rows; padding must hide keys, the "
                    "last axis: (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, 1, L, 1)，遮住的是查询所在的行；填充位置要遮住的是键，也就是最后一维："
                    "(B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                lambda lengths, max_len: (torch.arange(max_len) >= lengths[:, None])[:, None, None, :],
                {
                    "en": "The mask is True at the padding. This course's masks mean keep: True where a query may "
                    "attend to a key, i.e. position < length.",
                    "zh": "掩码在填充位置为 True。本课程的掩码表示“保留”：查询可以关注该键时为 True，即位置 < 长度。",
                },
            ),
            Mistake(
                "OFF_BY_ONE",
                lambda lengths, max_len: (torch.arange(max_len) <= lengths[:, None])[:, None, None, :],
                {
                    "en": "One padding position too many is kept: positions are counted from 0, so a sequence of "
                    "length n uses positions 0 … n-1 (use <, not <=).",
                    "zh": "多保留了一个填充位置：位置从 0 开始计数，长度为 n 的序列占据位置 0 … n-1（用 <，不要用 <=）。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 00.scores_einsum
# q (B, L_q, H, D), k (B, L_k, H, D), the layout right after the split view -> scores
# (B, H, L_q, L_k), with one einsum and no transpose.


def _scores_einsum(q, k):
    return torch.einsum("bqhd,bkhd->bhqk", q, k)


def _einsum_cases(generator):
    return [
        (randn(generator, 2, 3, 3, 3), randn(generator, 2, 3, 3, 3)),  # L_q = L_k = H = D
        (randn(generator, 2, 4, 2, 5), randn(generator, 2, 6, 2, 5)),
        (randn(generator, 1, 1, 3, 4), randn(generator, 1, 5, 3, 4)),  # one query
        (randn(generator, 3, 5, 4, 2), randn(generator, 3, 5, 4, 2)),
    ]


register(
    Exercise(
        id="00.scores_einsum",
        reference=_scores_einsum,
        cases=_einsum_cases,
        mistakes=(
            Mistake(
                "OUTPUT_TRANSPOSED",
                lambda q, k: torch.einsum("bqhd,bkhd->bhkq", q, k),
                {
                    "en": "The output is (B, H, L_k, L_q): one row per key. Name the output axes in the order "
                    "bhqk, so each query gets a row.",
                    "zh": "输出是 (B, H, L_k, L_q)：每个键占一行。输出下标应按 bhqk 的顺序写，让每个查询占一行。",
                },
            ),
            Mistake(
                "LAYOUT_BHLD",
                lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k),
                {
                    "en": "The subscripts read the inputs as (B, H, L, D), but here they are (B, L, H, D): write "
                    "the input subscripts in that order (bqhd, bkhd).",
                    "zh": "下标把输入当成了 (B, H, L, D)，但这里的输入是 (B, L, H, D)：输入下标要按这个顺序写（bqhd、bkhd）。",
                },
            ),
            Mistake(
                "SUM_OVER_HEADS",
                lambda q, k: torch.einsum("bqhd,bkhd->bqk", q, k),
                {
                    "en": "The head letter is missing from the output, so einsum summed over the heads. Every "
                    "letter you keep after -> survives: keep h (bhqk).",
                    "zh": "输出下标里漏掉了表示头的字母，einsum 便对所有头求了和。-> 之后写出的字母才会保留：请保留 h（bhqk）。",
                },
            ),
        ),
    )
)
