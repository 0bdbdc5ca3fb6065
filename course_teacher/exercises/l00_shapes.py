"""Lesson 00's exercises: tensor shapes.

Each exercise's first case is square (every axis the same size), so a learner's function with
its axes in the wrong order still runs there and can be recognised by its values. The later
cases vary every argument on its own: batch 1, length 1, one head, one feature per head,
L_q != L_k, a padded length longer than every sequence, a sequence of length 0.

The grader's hidden cases (``hidden``) keep those edges at sizes drawn from the teacher's seed,
within each exercise's text (num_heads divides the features, 0 <= length <= max_len, ...), and
always hold shapes no public case has: values alone redrawn on the public shapes would catch
nothing more.
"""

import math

import torch

from course_utils import masks

from .registry import TRANSPOSES, Exercise, Mistake, randn, register


def _draw(generator, low, high):
    """An integer drawn uniformly from [low, high] by the grader's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))

# ----------------------------------------------------------------------------- 00.split_heads
# (B, L, H*D) -> (B, H, L, D): the feature axis holds H blocks of D features, head after head.


def _split_heads(x, num_heads):
    B, L, HD = x.shape
    return x.view(B, L, num_heads, HD // num_heads).transpose(1, 2)  # (B, H, L, D)


def _split_cases(generator):
    return [
        (randn(generator, 3, 3, 9), 3),  # B = L = H = D: every axis order has the right shape
        (randn(generator, 2, 5, 12), 4),  # H = 4, D = 3
        (randn(generator, 1, 1, 8), 2),  # one sequence of length 1; D = 4
        (randn(generator, 3, 4, 6), 3),  # D = 2
        (randn(generator, 2, 3, 5), 1),  # one head: D = 5
        (randn(generator, 4, 2, 3), 3),  # one feature per head: D = 1
    ]


def _split_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes, one length longer than any public
    one (so a new shape whatever the seed), and float64 (the text asks for x's dtype)."""
    g = generator

    def case(batch, length, heads, head_dim, dtype=torch.float32):
        return (randn(g, batch, length, heads * head_dim).to(dtype), heads)

    return [
        case(_draw(g, 2, 4), _draw(g, 2, 5), _draw(g, 2, 5), _draw(g, 2, 5)),  # every size drawn
        case(_draw(g, 1, 3), _draw(g, 6, 9), _draw(g, 2, 6), _draw(g, 2, 4)),  # longer than every public case
        case(1, 1, _draw(g, 2, 5), _draw(g, 2, 6)),  # one sequence of length 1
        case(_draw(g, 2, 4), _draw(g, 2, 6), 1, _draw(g, 2, 8)),  # one head
        case(_draw(g, 2, 4), _draw(g, 2, 6), _draw(g, 2, 6), 1),  # one feature per head
        case(_draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 4), _draw(g, 2, 4), torch.float64),
    ]


def _split_as(x, first, second):
    """x (B, L, F) viewed as (B, L, first, second)."""
    return x.reshape(x.shape[0], x.shape[1], first, second)


register(
    Exercise(
        id="00.split_heads",
        reference=_split_heads,
        cases=_split_cases,
        hidden=_split_hidden,
        forbidden=("course_utils.multihead.split_heads",),  # the course's own: this exercise's answer
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
                "NO_TRANSPOSE",
                lambda x, h: _split_as(x, h, x.shape[2] // h),
                {
                    "en": "You returned (B, L, H, D): the split is right, but the heads must come before the "
                    "positions, (B, H, L, D), so that each head holds one (L, D) matrix. Add .transpose(1, 2).",
                    "zh": "你返回的是 (B, L, H, D)：拆分没错，但头维要放在位置维之前，即 (B, H, L, D)，"
                    "这样每个头才各有一个 (L, D) 矩阵。请补上 .transpose(1, 2)。",
                },
            ),
            Mistake(
                "TRANSPOSE_BEFORE_SPLIT",
                lambda x, h: x.transpose(1, 2).reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
                {
                    "en": "You swapped the axes before splitting: (B, H·D, L) regrouped as (B, H, L, D) mixes "
                    "features and positions. Split the last axis first, (B, L, H, D), then .transpose(1, 2).",
                    "zh": "你在拆分之前就交换了维度：把 (B, H·D, L) 重新分组成 (B, H, L, D)，特征和位置就混在了一起。"
                    "应先拆最后一维，得到 (B, L, H, D)，再 .transpose(1, 2)。",
                },
            ),
            Mistake(
                "HEAD_DIM_FIRST",
                lambda x, h: _split_as(x, x.shape[2] // h, h).permute(0, 3, 1, 2),
                {
                    "en": "The feature axis was split as (D, H) instead of (H, D): the features of one head are "
                    "D consecutive numbers, so split the last axis into (H, D), heads first.",
                    "zh": "特征维被拆成了 (D, H)，而不是 (H, D)：同一个头的 D 个特征在内存中是连续的，"
                    "所以最后一维应拆成 (H, D)，头在前。",
                },
            ),
            Mistake(
                "HEAD_SIZE_SWAPPED",
                lambda x, h: _split_as(x, x.shape[2] // h, h).transpose(1, 2),
                {
                    "en": "The result is (B, D, L, H): num_heads was used as the size of each head. num_heads is "
                    "H, the number of heads; each head gets D = H·D / num_heads features: view as "
                    "(B, L, num_heads, D).",
                    "zh": "结果是 (B, D, L, H)：num_heads 被当成了每个头的大小。num_heads 是头的个数 H，"
                    "每个头分到 D = H·D / num_heads 个特征：应 view 成 (B, L, num_heads, D)。",
                },
            ),
            Mistake(
                "WRONG_PERMUTE",
                lambda x, h: _split_as(x, h, x.shape[2] // h).permute(0, 2, 3, 1),
                {
                    "en": "After the view (B, L, H, D) the axes were reordered to (B, H, D, L): positions must stay "
                    "before features. Swap only axes 1 and 2: .transpose(1, 2).",
                    "zh": "view 成 (B, L, H, D) 之后，维度被重排成了 (B, H, D, L)：位置维必须在特征维之前。"
                    "只需交换第 1、2 维：.transpose(1, 2)。",
                },
            ),
            Mistake(
                "HEADS_BEFORE_BATCH",
                lambda x, h: _split_as(x, h, x.shape[2] // h).permute(2, 0, 1, 3),
                {
                    "en": "The result is laid out (H, B, L, D): the batch axis must stay first, giving (B, H, L, D).",
                    "zh": "结果的布局是 (H, B, L, D)：批量维应保持在最前，结果应为 (B, H, L, D)。",
                },
            ),
            Mistake(
                "CHUNKS_CONCATENATED",
                lambda x, h: torch.cat(x.chunk(h, dim=-1), dim=1),
                {
                    "en": "The heads were cut with chunk and concatenated along the positions, giving (B, H·L, D): "
                    "the heads need an axis of their own. Stack the chunks on a new axis 1 (torch.stack(..., dim=1)), "
                    "or view as (B, L, H, D) and .transpose(1, 2).",
                    "zh": "你用 chunk 切出各个头，再沿位置维拼接，得到了 (B, H·L, D)：头需要单独占一维。"
                    "请把切出的块沿新的第 1 维堆叠（torch.stack(..., dim=1)），或者先 view 成 (B, L, H, D) 再 .transpose(1, 2)。",
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
        (randn(generator, 1, 2, 6, 5),),  # batch 1
        (randn(generator, 2, 1, 4, 3),),  # one head
        (randn(generator, 3, 2, 4, 1),),  # one feature per head
        # (B, H, L, D) = (2, 3, 4, 2) as split_heads leaves it: a transposed view of (B, L, H, D)
        # memory, not contiguous (the check's copies keep the layout)
        (randn(generator, 2, 4, 3, 2).transpose(1, 2),),
    ]


def _merge_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (length 1, batch 1, one head, one
    feature per head, the non-contiguous layout split_heads leaves), one length longer than any public
    one, and float64."""
    g = generator

    def case(batch, heads, length, head_dim, dtype=torch.float32):
        return (randn(g, batch, heads, length, head_dim).to(dtype),)

    def as_split_leaves_it(batch, heads, length, head_dim):  # a transposed view of (B, L, H, D) memory
        return (randn(g, batch, length, heads, head_dim).transpose(1, 2),)

    return [
        case(_draw(g, 2, 4), _draw(g, 2, 5), _draw(g, 7, 9), _draw(g, 2, 5)),  # longer than every public case
        case(_draw(g, 2, 4), _draw(g, 2, 5), 1, _draw(g, 2, 6)),  # length 1
        case(1, _draw(g, 2, 5), _draw(g, 2, 6), _draw(g, 2, 6)),  # batch 1
        case(_draw(g, 2, 4), 1, _draw(g, 2, 6), _draw(g, 2, 6)),  # one head
        case(_draw(g, 2, 4), _draw(g, 2, 5), _draw(g, 2, 6), 1),  # one feature per head
        as_split_leaves_it(_draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 6), _draw(g, 2, 4)),
        case(_draw(g, 1, 3), _draw(g, 2, 4), _draw(g, 2, 5), _draw(g, 2, 4), torch.float64),
    ]


_CONCATENATE_HEADS = {
    "en": "Multi-head attention does not add or average its heads: it concatenates them, so each position "
    "ends with H·D features, head 0's D features first. Swap the axes back, .transpose(1, 2), then merge "
    "the last two: .reshape(B, L, H * D).",
    "zh": "多头注意力不会把各个头相加或取平均，而是把它们拼接起来：每个位置最终有 H·D 个特征，第 0 个头的 D 个特征在前。"
    "先用 .transpose(1, 2) 把维度换回来，再合并最后两维：.reshape(B, L, H * D)。",
}

register(
    Exercise(
        id="00.merge_heads",
        reference=_merge_heads,
        cases=_merge_cases,
        hidden=_merge_hidden,
        forbidden=("course_utils.multihead.merge_heads",),  # the course's own: this exercise's answer
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
                    "(it only works in corner cases such as L = 1). Use .reshape, or .contiguous().view.",
                    "zh": ".transpose(1, 2) 之后张量不再连续，.view 无法把 H 和 D 合并（只在 L = 1 之类的特殊情况下碰巧可行）。"
                    "请改用 .reshape，或 .contiguous().view。",
                },
            ),
            Mistake(
                "NOT_MERGED",
                lambda x: x.transpose(1, 2),
                {
                    "en": "You returned (B, L, H, D): the heads are back beside the features, but still on an axis "
                    "of their own. Merge the last two axes: .reshape(B, L, H * D).",
                    "zh": "你返回的是 (B, L, H, D)：头维已经回到特征维旁边，但仍单独占一维。"
                    "请把最后两维合并：.reshape(B, L, H * D)。",
                },
            ),
            Mistake(
                "FLATTEN_POSITIONS_TOO",
                lambda x: x.transpose(1, 2).flatten(1),
                {
                    "en": "The result is (B, L·H·D): .flatten(1) merged the positions too. Merge only the last two "
                    "axes: .flatten(2), or .reshape(B, L, H * D).",
                    "zh": "结果是 (B, L·H·D)：.flatten(1) 把位置维也合并进去了。只应合并最后两维：.flatten(2)，"
                    "或 .reshape(B, L, H * D)。",
                },
            ),
            Mistake(
                "CONCAT_ALONG_POSITIONS",
                lambda x: torch.cat(x.unbind(1), dim=1),
                {
                    "en": "The heads were concatenated along the positions, giving (B, H·L, D). Concatenate them "
                    "along the features instead, dim=-1, which gives (B, L, H·D).",
                    "zh": "各个头被沿位置维拼接，得到了 (B, H·L, D)。应沿特征维拼接（dim=-1），得到 (B, L, H·D)。",
                },
            ),
            Mistake("HEADS_SUMMED", lambda x: x.sum(1), _CONCATENATE_HEADS),
            Mistake("HEADS_AVERAGED", lambda x: x.mean(1), _CONCATENATE_HEADS),
        ),
    )
)


# ----------------------------------------------------------------------------- 00.padding_mask
# lengths (B,) -> keep mask (B, 1, 1, L_k), True where key position < length: it broadcasts
# against scores (B, H, L_q, L_k).


def _mask_cases(generator):
    del generator  # the lengths are chosen by hand: each case tests an edge
    return [
        (torch.tensor([3, 0, 2]), 3),  # B = L_k, so a mask with its axes swapped still has the same size
        (torch.tensor([2, 5, 4, 1]), 7),  # max_len > max(lengths): even the longest sequence is padded
        (torch.tensor([1]), 1),  # batch 1, a single token, no padding
        (torch.tensor([4, 4]), 4),  # no padding at all
        (torch.tensor([0, 3]), 5),  # an empty sequence: its row is all False
        (torch.tensor([6, 2, 6, 3, 1], dtype=torch.int32), 6),  # int32 lengths, B = 5
        (torch.tensor([2, 0, 3, 1, 3, 2, 1]), 3),  # more sequences than positions: B = 7 > L_k = 3
    ]


def _mask_hidden(generator):
    """The grader's hidden cases: the public edges (B = L_k, padding beyond the longest sequence,
    batch 1, no padding, an empty sequence, int32 lengths, more sequences than positions) with batch
    sizes, padded lengths and lengths drawn from the teacher's seed, 0 <= length <= max_len as the
    text says; no (B, max_len) of a public case, so every case has a new shape."""
    g = generator
    public = {(len(lengths), max_len) for lengths, max_len in _mask_cases(None)}

    def sizes(batch, max_len):
        """(B, max_len) drawn by the two functions until it is no public case's."""
        while True:
            drawn = batch(), max_len()
            if drawn not in public:
                return drawn

    def lengths(batch, low, high, dtype=torch.int64):
        return torch.randint(low, high + 1, (batch,), generator=g).to(dtype)

    cases = []
    n = _draw(g, 4, 7)
    cases.append((lengths(n, 0, n), n))  # B = L_k
    batch, max_len = sizes(lambda: _draw(g, 2, 5), lambda: _draw(g, 3, 9))
    cases.append((lengths(batch, 0, max_len - 1), max_len))  # every sequence shorter than max_len
    batch, max_len = sizes(lambda: 1, lambda: _draw(g, 1, 9))
    cases.append((lengths(1, 1, max_len), max_len))  # batch 1
    batch, max_len = sizes(lambda: _draw(g, 1, 4), lambda: _draw(g, 1, 8))
    cases.append((torch.full((batch,), max_len), max_len))  # no padding at all
    batch, max_len = sizes(lambda: _draw(g, 2, 5), lambda: _draw(g, 2, 8))
    empty = lengths(batch, 1, max_len)
    empty[_draw(g, 0, batch - 1)] = 0  # an empty sequence: its row is all False
    cases.append((empty, max_len))
    batch, max_len = sizes(lambda: _draw(g, 2, 6), lambda: _draw(g, 2, 8))
    cases.append((lengths(batch, 0, max_len, torch.int32), max_len))  # int32 lengths
    max_len = _draw(g, 1, 4)
    batch, max_len = sizes(lambda: _draw(g, max_len + 1, 9), lambda: max_len)
    cases.append((lengths(batch, 0, max_len), max_len))  # more sequences than positions
    return cases


def _grid(lengths, max_len):
    """(B, L_k) bool: position < length."""
    return torch.arange(max_len) < lengths[:, None]


register(
    Exercise(
        id="00.padding_mask",
        reference=masks.padding_mask,
        cases=_mask_cases,
        hidden=_mask_hidden,
        forbidden=("course_utils.masks.padding_mask",),  # the course's own (the reference): the answer
        mistakes=(
            Mistake(
                "NO_UNSQUEEZE",
                _grid,
                {
                    "en": "The mask has shape (B, L_k). Against scores (B, H, L_q, L_k) its batch axis would line "
                    "up with L_q. Add the two size-1 axes: (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, L_k)。与 (B, H, L_q, L_k) 的分数广播时，它的批量维会和 L_q 对齐。"
                    "请补上两个大小为 1 的维度：(B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "ONE_UNSQUEEZE",
                lambda lengths, max_len: _grid(lengths, max_len)[:, None, :],
                {
                    "en": "The mask has shape (B, 1, L_k). That fits single-head scores (B, L_q, L_k), but these "
                    "scores have a head axis, (B, H, L_q, L_k), and the mask's batch axis would line up with "
                    "the heads. Add one more size-1 axis: (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, 1, L_k)。它适用于单头的分数 (B, L_q, L_k)，但这里的分数多一个头维，"
                    "即 (B, H, L_q, L_k)，掩码的批量维会和头维对齐。请再补一个大小为 1 的维度：(B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "QUERY_AXIS",
                lambda lengths, max_len: _grid(lengths, max_len)[:, None, :, None],
                {
                    "en": "The mask has shape (B, 1, L, 1), so it masks query rows; padding must hide keys, the "
                    "last axis: (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, 1, L, 1)，遮住的是查询所在的行；填充位置要遮住的是键，也就是最后一维："
                    "(B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "BATCH_KEY_SWAPPED",
                lambda lengths, max_len: (torch.arange(max_len)[:, None] < lengths)[:, None, None, :],
                {
                    "en": "The comparison built an (L_k, B) grid, positions down and sequences across, and it was "
                    "read as (B, L_k). Compare positions (L_k,) with lengths[:, None] (B, 1), so that each "
                    "sequence gets a row.",
                    "zh": "比较得到的是 (L_k, B) 的网格（位置沿行、序列沿列），却被当成了 (B, L_k)。"
                    "应把位置 (L_k,) 与 lengths[:, None] (B, 1) 比较，让每条序列各占一行。",
                },
            ),
            Mistake(
                "MAX_LEN_IGNORED",
                lambda lengths, max_len: _grid(lengths, int(lengths.max()))[:, None, None, :],
                {
                    "en": "The mask has max(lengths) key positions, but the scores have max_len keys, and a batch "
                    "can be padded beyond its longest sequence. Count the positions with torch.arange(max_len).",
                    "zh": "掩码只有 max(lengths) 个键位置，但分数有 max_len 个键；一个批量可能被填充得比其中最长的序列还长。"
                    "请用 torch.arange(max_len) 生成位置。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                lambda lengths, max_len: ~_grid(lengths, max_len)[:, None, None, :],
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
            Mistake(
                "FLOAT_MASK",
                lambda lengths, max_len: _grid(lengths, max_len).float()[:, None, None, :],
                {
                    "en": "Your mask has dtype float32 (the numbers 0.0 and 1.0), not bool. Return a torch.bool mask "
                    "(a comparison such as positions < lengths already gives one): PyTorch reads a float mask "
                    "differently, F.scaled_dot_product_attention adds it to the scores.",
                    "zh": "你的掩码的 dtype 是 float32（数值 0.0 和 1.0），而不是 bool。请返回 torch.bool 掩码（positions < lengths "
                    "这样的比较本身就得到布尔张量）：PyTorch 对浮点掩码另有解释，F.scaled_dot_product_attention 会把它加到分数上。",
                },
            ),
            Mistake(
                "POSITIONS_FROM_ONE",
                lambda lengths, max_len: (torch.arange(1, max_len + 1) < lengths[:, None])[:, None, None, :],
                {
                    "en": "Each sequence's last real token is hidden: the positions were counted from 1. Positions "
                    "count from 0, torch.arange(max_len), and a sequence of length n uses positions 0 … n-1: "
                    "keep position < length.",
                    "zh": "每条序列的最后一个真实词元被遮住了：位置是从 1 开始数的。位置应从 0 开始，即 torch.arange(max_len)，"
                    "长度为 n 的序列占据位置 0 … n-1：保留位置 < 长度的键。",
                },
            ),
            Mistake(
                "UNSQUEEZED_AT_END",
                lambda lengths, max_len: _grid(lengths, max_len)[:, :, None, None],
                {
                    "en": "The mask has shape (B, L_k, 1, 1): the size-1 axes went after the keys, so against scores "
                    "(B, H, L_q, L_k) its key axis would meet the heads. Insert them between the batch and the keys: "
                    "mask[:, None, None, :], shape (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, L_k, 1, 1)：大小为 1 的维度加在了键维之后，与 (B, H, L_q, L_k) 的分数广播时，"
                    "它的键维会对上头维。应把它们插在批量维和键维之间：mask[:, None, None, :]，形状为 (B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "EXPANDED_TO_SQUARE",
                lambda lengths, max_len: _grid(lengths, max_len)[:, None, None, :].expand(-1, 1, max_len, max_len),
                {
                    "en": "The mask has shape (B, 1, L_k, L_k): it was expanded to one row per query, as if there were "
                    "as many queries as keys. Broadcasting repeats the rows for free, and for any L_q: keep size 1 on "
                    "the query axis, (B, 1, 1, L_k).",
                    "zh": "掩码的形状是 (B, 1, L_k, L_k)：它被扩展成每个查询一行，仿佛查询和键一样多。广播会免费地把行重复出来，"
                    "而且适用于任意 L_q：查询维的大小保持为 1，即 (B, 1, 1, L_k)。",
                },
            ),
            Mistake(
                "INT_MASK",
                lambda lengths, max_len: _grid(lengths, max_len).long()[:, None, None, :],
                {
                    "en": "Your mask has dtype int64 (the integers 0 and 1), not bool. Return a torch.bool mask (a "
                    "comparison such as positions < lengths already gives one): masked_fill accepts only a bool "
                    "mask, and ~ on integers flips bits (~1 is -2) instead of turning keep into hide.",
                    "zh": "你的掩码的 dtype 是 int64（整数 0 和 1），而不是 bool。请返回 torch.bool 掩码（positions < lengths 这样的比较本身就得到布尔张量）："
                    "masked_fill 只接受布尔掩码，而对整数取 ~ 是按位取反（~1 等于 -2），并不能把“保留”变成“遮住”。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 00.scores_einsum
# q (B, L_q, H, D), k (B, L_k, H, D), the layout right after the split view -> scores
# (B, H, L_q, L_k), with one einsum and no transpose: every way to reorder axes is forbidden.


def _scores_einsum(q, k):
    return torch.einsum("bqhd,bkhd->bhqk", q, k)


def _einsum_cases(generator):
    def qk(batch, l_q, l_k, heads, head_dim):
        return randn(generator, batch, l_q, heads, head_dim), randn(generator, batch, l_k, heads, head_dim)

    return [
        qk(2, 3, 3, 3, 3),  # L_q = L_k = H = D: every axis order has the right shape
        qk(2, 4, 6, 2, 5),
        qk(1, 1, 5, 3, 4),  # batch 1, one query
        qk(3, 5, 5, 4, 2),
        qk(2, 3, 1, 1, 6),  # one key, one head
        qk(4, 2, 3, 5, 1),  # one feature per head
    ]


def _einsum_hidden(generator):
    """The grader's hidden cases: the public edges (L_q != L_k, batch 1, one query, one key, one head,
    one feature per head) at drawn sizes, more keys than any public case has, and float64."""
    g = generator

    def qk(batch, l_q, l_k, heads, head_dim, dtype=torch.float32):
        return randn(g, batch, l_q, heads, head_dim).to(dtype), randn(g, batch, l_k, heads, head_dim).to(dtype)

    return [
        qk(_draw(g, 2, 3), _draw(g, 2, 6), _draw(g, 7, 9), _draw(g, 2, 4), _draw(g, 2, 5)),  # more keys
        qk(1, 1, _draw(g, 2, 7), _draw(g, 2, 4), _draw(g, 2, 6)),  # batch 1, one query
        qk(_draw(g, 2, 4), _draw(g, 2, 6), 1, 1, _draw(g, 2, 7)),  # one key, one head
        qk(_draw(g, 2, 4), _draw(g, 2, 6), _draw(g, 2, 6), _draw(g, 2, 5), 1),  # one feature per head
        qk(_draw(g, 2, 4), _draw(g, 3, 6), _draw(g, 3, 6), _draw(g, 2, 5), _draw(g, 2, 5)),
        qk(_draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 5), _draw(g, 2, 4), _draw(g, 2, 4), torch.float64),
    ]


register(
    Exercise(
        id="00.scores_einsum",
        reference=_scores_einsum,
        cases=_einsum_cases,
        hidden=_einsum_hidden,
        forbidden=TRANSPOSES,
        mistakes=(
            Mistake(
                "OUTPUT_TRANSPOSED",
                lambda q, k: torch.einsum("bqhd,bkhd->bhkq", q, k),
                {
                    "en": "The output is (B, H, L_k, L_q): one row per key. Name the output axes in the order "
                    "bhqk, so each query gets a row.",
                    "zh": "输出是 (B, H, L_k, L_q)：每个键占一行。输出的字母应按 bhqk 的顺序写，让每个查询占一行。",
                },
            ),
            Mistake(
                "OUTPUT_BQHK",
                lambda q, k: torch.einsum("bqhd,bkhd->bqhk", q, k),
                {
                    "en": "The output is (B, L_q, H, L_k): it kept the inputs' order of axes. The letters after -> "
                    "set the output's order: write bhqk, heads before queries.",
                    "zh": "输出是 (B, L_q, H, L_k)：沿用了输入的维度顺序。-> 之后的字母决定输出的维度顺序：请写成 bhqk，头在查询之前。",
                },
            ),
            Mistake(
                "LAYOUT_BHLD",
                lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k),
                {
                    "en": "The subscripts read the inputs as (B, H, L, D), but here they are (B, L, H, D): write "
                    "the input subscripts in that order (bqhd, bkhd).",
                    "zh": "输入的字母把它们当成了 (B, H, L, D)，但这里的输入是 (B, L, H, D)：输入的字母要按这个顺序写（bqhd、bkhd）。",
                },
            ),
            Mistake(
                "SUM_OVER_HEADS",
                lambda q, k: torch.einsum("bqhd,bkhd->bqk", q, k),
                {
                    "en": "The head letter is missing from the output, so einsum summed over the heads. Every "
                    "letter you keep after -> survives: keep h (bhqk).",
                    "zh": "输出的字母里漏掉了表示头的字母，einsum 便对所有头求了和。-> 之后写出的字母才会保留：请保留 h（bhqk）。",
                },
            ),
            Mistake(
                "FEATURE_LETTERS_DIFFER",
                lambda q, k: torch.einsum("bqhd,bkhe->bhqk", q, k),
                {
                    "en": "q and k name their feature axis with different letters, so einsum summed each over its "
                    "own features and multiplied the two sums. The same letter (d in both) pairs q's feature i "
                    "with k's feature i: that is the dot product.",
                    "zh": "q 和 k 的特征维用了不同的字母，einsum 便各自对特征求和，再把两个和相乘。"
                    "两边用同一个字母（都写 d），q 的第 i 个特征才会与 k 的第 i 个特征配对相乘：这才是点积。",
                },
            ),
            Mistake(
                "POSITIONS_SAME_LETTER",
                lambda q, k: torch.einsum("bqhd,bqhd->bhq", q, k),
                {
                    "en": "q and k name their positions with the same letter, so einsum pairs query i with key i only "
                    "(one score per position, and only when L_q = L_k). Give the keys' positions a letter of their "
                    "own (bkhd) and keep both letters after ->: bhqk, every query against every key.",
                    "zh": "q 和 k 的位置维用了同一个字母，einsum 便只把第 i 个查询与第 i 个键配对（每个位置只得到一个分数，"
                    "而且要求 L_q = L_k）。请给键的位置另起一个字母（bkhd），并在 -> 之后同时保留两个字母：bhqk，"
                    "让每个查询与每个键都算一次。",
                },
            ),
            Mistake(
                "SCALED",
                lambda q, k: torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1]),
                {
                    "en": "You divided by √D. Attention does scale its scores (lesson 01), but this exercise asks "
                    "for the unscaled dot products.",
                    "zh": "你除以了 √D。注意力确实要缩放分数（见第 01 课），但这道练习要的是未缩放的点积。",
                },
            ),
        ),
    )
)
