"""Lesson 01's exercises: attention basics.

The cases vary every argument on its own (batch, L_q, L_k, d_k, d_v, d_h, the dtype), so a
function that ignores one of them fails; each first case is square everywhere, so that every
known mistake still runs there and can be recognised by its values. The grader's hidden cases
(``hidden``) keep those edges at sizes drawn from the teacher's seed, and always hold shapes no
public case has.
"""

import math

import torch

from course_utils import attention

from .registry import Exercise, Mistake, randn, register


def _draw(generator, low, high):
    """An integer drawn uniformly from [low, high] by the grader's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))

# ----------------------------------------------------------------------------- 01.scaled_dot


def _qkv(g, batch, l_q, l_k, d_k, d_v, dtype=torch.float32, transposed=False):
    """Random (query, key, value). `transposed`: key and value laid out in memory as (B, d, L_k)
    and transposed, as a key comes out of a transpose (the check's copies keep the layout)."""
    if transposed:
        key, value = randn(g, batch, d_k, l_k).transpose(1, 2), randn(g, batch, d_v, l_k).transpose(1, 2)
        return randn(g, batch, l_q, d_k), key, value
    case = randn(g, batch, l_q, d_k), randn(g, batch, l_k, d_k), randn(g, batch, l_k, d_v)
    return tuple(t.to(dtype) for t in case)


def _attention_cases(generator):
    # (batch, L_q, L_k, d_k, d_v). The first case has every size equal (4), so that even the
    # mistakes that mix up axes (key.T reverses all three, value @ weights) run there; then every
    # size differs from every other, a batch of one with length 1, a wide d_k where the scale
    # matters most (d_k = 64, the original paper's, where dividing by a fixed 8 is right by
    # chance), one query (a decoding step), one key, float64, and a key and value that are not
    # contiguous (reshaping the key instead of transposing it gives other numbers there too).
    return [
        _qkv(generator, 4, 4, 4, 4, 4),
        _qkv(generator, 3, 5, 7, 8, 6),
        _qkv(generator, 1, 1, 1, 16, 3),
        _qkv(generator, 2, 3, 9, 64, 2),
        _qkv(generator, 2, 1, 6, 5, 7),
        _qkv(generator, 3, 6, 1, 4, 2),
        _qkv(generator, 2, 4, 5, 6, 3, dtype=torch.float64),
        _qkv(generator, 2, 3, 6, 5, 4, transposed=True),
    ]


def _attention_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, a batch of one
    with length 1, a wide d_k, one query, one key, float64, a key and value that are not contiguous),
    with more keys than any public case has."""
    g = generator
    n = _draw(g, 5, 6)
    return [
        _qkv(g, n, n, n, n, n),  # square: every mistake runs
        _qkv(g, _draw(g, 2, 3), _draw(g, 2, 6), _draw(g, 10, 13), _draw(g, 2, 9), _draw(g, 2, 7)),
        _qkv(g, 1, 1, 1, _draw(g, 2, 24), _draw(g, 1, 6)),
        _qkv(g, _draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 8), _draw(g, 32, 96), _draw(g, 2, 5)),  # wide d_k
        _qkv(g, _draw(g, 2, 4), 1, _draw(g, 2, 9), _draw(g, 2, 9), _draw(g, 2, 8)),  # one query
        _qkv(g, _draw(g, 2, 4), _draw(g, 2, 7), 1, _draw(g, 2, 9), _draw(g, 2, 6)),  # one key
        _qkv(g, _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 6), _draw(g, 2, 8), _draw(g, 2, 6), dtype=torch.float64),
        _qkv(g, _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 7), _draw(g, 2, 8), _draw(g, 2, 6), transposed=True),
    ]


def _scores(q, k, scale=None):
    """Q Kᵀ times `scale` (default 1/√d_k)."""
    return q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)


def _attend(scores, value, dim=-1):
    weights = torch.softmax(scores, dim=dim)
    return weights @ value, weights


def _reversed_axes(tensor):
    """What ``tensor.T`` does to a tensor of any number of axes (without torch's warning)."""
    return tensor.permute(*reversed(range(tensor.ndim)))


def _scale_after_softmax(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def _no_softmax(q, k, v):
    weights = _scores(q, k)
    return weights @ v, weights


def _matmul_order(q, k, v):
    weights = torch.softmax(_scores(q, k), dim=-1)
    return v @ weights, weights


def _key_viewed(q, k, v):
    return _attend(q @ k.view(k.shape[0], k.shape[2], k.shape[1]) / math.sqrt(q.shape[-1]), v)


def _returns_scores(q, k, v):
    scores = _scores(q, k)
    return torch.softmax(scores, dim=-1) @ v, scores


#: Hints the scaled dot-product exercises share (01.scaled_dot here, 03's self- and cross-attention).
SOFTMAX_BATCH_DIM_HINT = {
    "en": "The softmax runs over the batch axis (dim=0): that is what F.softmax(scores) or nn.Softmax() picks on a "
    "3-D tensor when dim is left out (PyTorch warns that the implicit dim is deprecated). Always pass dim=-1: "
    "each query's weights over the keys sum to 1.",
    "zh": "softmax 作用在了批量维（dim=0）上：不写 dim 时，F.softmax(scores) 或 nn.Softmax() 在 3 维张量上选的就是它"
    "（PyTorch 会警告这种隐式的 dim 已被弃用）。请始终写明 dim=-1：每个查询对所有键的权重之和为 1。",
}
MATMUL_ORDER_HINT = {
    "en": "The last product is the wrong way round: the output is weights @ value, "
    "(B, L_q, L_k) @ (B, L_k, d_v) → (B, L_q, d_v).",
    "zh": "最后一次乘法的顺序反了：输出是 weights @ value，(B, L_q, L_k) @ (B, L_k, d_v) → (B, L_q, d_v)。",
}


register(
    Exercise(
        id="01.scaled_dot",
        reference=lambda q, k, v: attention.scaled_dot_product_attention(q, k, v),
        cases=_attention_cases,
        hidden=_attention_hidden,
        forbidden=("F.scaled_dot_product_attention", "course_utils.attention.scaled_dot_product_attention"),
        mistakes=(
            Mistake(
                "NO_SCALE",
                lambda q, k, v: _attend(_scores(q, k, scale=1.0), v),
                {
                    "en": "The scores are not divided by √d_k, so for large d_k the softmax saturates.",
                    "zh": "注意力分数没有除以 √d_k；d_k 较大时 softmax 会饱和。",
                },
            ),
            Mistake(
                "SCALE_DK",
                lambda q, k, v: _attend(_scores(q, k, scale=1 / q.shape[-1]), v),
                {
                    "en": "The scores are divided by d_k; divide by its square root, √d_k.",
                    "zh": "分数除以了 d_k；应除以它的平方根 √d_k。",
                },
            ),
            Mistake(
                "SCALE_DV",
                lambda q, k, v: _attend(_scores(q, k, scale=1 / math.sqrt(v.shape[-1])), v),
                {
                    "en": "The scores are divided by √d_v, the size of the values; divide by √d_k, the size "
                    "of the queries and keys that the dot product sums over.",
                    "zh": "分数除以了 √d_v（值的维度）；应除以 √d_k，即点积所求和的查询和键的维度。",
                },
            ),
            Mistake(
                "SCALE_TIMES",
                lambda q, k, v: _attend(_scores(q, k, scale=math.sqrt(q.shape[-1])), v),
                {
                    "en": "The scores are multiplied by √d_k; divide them by √d_k.",
                    "zh": "分数乘以了 √d_k；应除以 √d_k。",
                },
            ),
            Mistake(
                "SCALE_AFTER_SOFTMAX",
                _scale_after_softmax,
                {
                    "en": "The weights are divided by √d_k after the softmax, so their rows no longer sum to 1: "
                    "divide the scores before the softmax.",
                    "zh": "softmax 之后才把权重除以 √d_k，于是每一行之和不再为 1：应在 softmax 之前除分数。",
                },
            ),
            Mistake(
                "NO_SOFTMAX",
                _no_softmax,
                {
                    "en": "The scaled scores are used as the weights: turn them into weights with a softmax "
                    "over the keys (dim=-1), so that each query's row is positive and sums to 1.",
                    "zh": "直接把缩放后的分数当成了权重：应沿键的维度（dim=-1）做 softmax，"
                    "使每个查询的那一行都为正且和为 1。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda q, k, v: _attend(_scores(q, k), v, dim=-2),
                {
                    "en": "The softmax runs over the queries (dim=-2); each query's weights over the keys must "
                    "sum to 1: use dim=-1.",
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
                "KEY_T",
                lambda q, k, v: _attend(q @ _reversed_axes(k) / math.sqrt(q.shape[-1]), v),
                {
                    "en": "key.T turns a (B, L_k, d_k) key into (d_k, L_k, B): the batch axis moves to the end, "
                    "so the product mixes the items of the batch (and crashes unless the sizes happen to agree). "
                    "Transpose only the last two axes: key.transpose(-2, -1) or key.mT.",
                    "zh": "key.T 把形状为 (B, L_k, d_k) 的 key 变成 (d_k, L_k, B)：批量维度被挪到了最后，"
                    "于是乘积把批量中不同样本的数据混在了一起（除非各维大小恰好一致，否则直接报错）。"
                    "只转置最后两维：key.transpose(-2, -1) 或 key.mT。",
                },
            ),
            Mistake("MATMUL_ORDER", _matmul_order, MATMUL_ORDER_HINT),
            Mistake(
                "SCALE_HARD_CODED",
                lambda q, k, v: _attend(_scores(q, k, scale=1 / 8), v),
                {
                    "en": "The scores are divided by a fixed 8, √64 for the d_k = 64 of the original paper: it is right "
                    "only when d_k is 64. Read d_k from the input, query.shape[-1], and divide by its square root.",
                    "zh": "分数除以的是固定的 8，即原论文里 d_k = 64 时的 √64：只有 d_k 恰好为 64 时才对。"
                    "请从输入读出 d_k，即 query.shape[-1]，再除以它的平方根。",
                },
            ),
            Mistake(
                "SCALE_BY_L_Q",
                lambda q, k, v: _attend(_scores(q, k, scale=1 / math.sqrt(q.shape[1])), v),
                {
                    "en": "The scores are divided by √L_q: on a (B, L_q, d_k) query, query.shape[1] (or size(1)) is "
                    "the number of queries. d_k is the last axis: query.shape[-1].",
                    "zh": "分数除以的是 √L_q：对形状为 (B, L_q, d_k) 的查询来说，query.shape[1]（或 size(1)）是查询的个数。"
                    "d_k 是最后一维：query.shape[-1]。",
                },
            ),
            Mistake("SOFTMAX_BATCH_DIM", lambda q, k, v: _attend(_scores(q, k), v, dim=0), SOFTMAX_BATCH_DIM_HINT),
            Mistake(
                "KEY_TRANSPOSE_01",
                lambda q, k, v: _attend(q @ k.transpose(0, 1) / math.sqrt(q.shape[-1]), v),
                {
                    "en": "key.transpose(0, 1) swaps the batch and length axes of a (B, L_k, d_k) key: (0, 1) are the "
                    "last two axes only of a matrix. Swap the last two: key.transpose(-2, -1) or key.mT.",
                    "zh": "key.transpose(0, 1) 交换的是形状为 (B, L_k, d_k) 的 key 的批量维和长度维：(0, 1) 只有对矩阵来说"
                    "才是最后两维。请交换最后两维：key.transpose(-2, -1) 或 key.mT。",
                },
            ),
            Mistake(
                "KEY_RESHAPED",
                lambda q, k, v: _attend(q @ k.reshape(k.shape[0], k.shape[2], k.shape[1]) / math.sqrt(q.shape[-1]), v),
                {
                    "en": "key.reshape(B, d_k, L_k) (or .view) has the right shape but does not swap axes: it reads the "
                    "numbers in memory order and cuts them into the new shape, mixing keys and features. Transpose: "
                    "key.transpose(-2, -1).",
                    "zh": "key.reshape(B, d_k, L_k)（或 .view）形状对了，却没有交换维度：它按内存顺序读出数据，"
                    "再切成新的形状，把不同的键和特征混在了一起。应当转置：key.transpose(-2, -1)。",
                },
            ),
            Mistake(
                "KEY_VIEWED",
                _key_viewed,
                {
                    "en": "key.view(B, d_k, L_k) does not swap axes: it reads the numbers in memory order and cuts them "
                    "into the new shape, mixing keys and features (and it fails on a key that is not contiguous, as "
                    "in the last case). Transpose: key.transpose(-2, -1).",
                    "zh": "key.view(B, d_k, L_k) 并不会交换维度：它按内存顺序读出数据，再切成新的形状，把不同的键和特征"
                    "混在了一起（遇到不连续的 key 还会报错，最后一组测试就是这样）。应当转置：key.transpose(-2, -1)。",
                },
            ),
            Mistake(
                "RETURNS_SCORES",
                _returns_scores,
                {
                    "en": "The output is right, but the second value returned is the scaled scores, not the weights: "
                    "return the softmax of the scores, whose rows sum to 1.",
                    "zh": "输出是对的，但返回的第二个值是缩放后的分数，而不是权重：应返回分数经过 softmax 之后的结果，"
                    "它的每一行之和为 1。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                lambda q, k, v: _attend(_scores(q, k), v)[::-1],
                {
                    "en": "The return order is swapped: return (output, weights).",
                    "zh": "返回顺序颠倒了：应返回 (output, weights)。",
                },
            ),
            Mistake(
                "OUTPUT_ONLY",
                lambda q, k, v: _attend(_scores(q, k), v)[0],
                {
                    "en": "Only the output is returned; this exercise asks for the pair (output, weights).",
                    "zh": "只返回了输出；本练习要求返回 (output, weights) 这一对结果。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 01.softmax

def _offset_rows(g):
    """Rows around +500, −300 and 0 in one float32 tensor, and a row spread from −200 to 200
    (its mean is 0): only each row's own maximum keeps every exponential finite and some of
    each row's away from 0."""
    rows = 20.0 * randn(g, 4, 6) + torch.tensor([500.0, -300.0, 0.0, 0.0]).unsqueeze(-1)
    rows[3] = torch.linspace(-200.0, 200.0, 6)
    return rows


def _softmax_cases(generator):
    # First a batch of square score matrices (B = L_q = L_k = 4), where a forgotten keepdim still
    # broadcasts and runs; then L_q != L_k; scores so large (or so negative) that exp() overflows
    # (or underflows) in float32 unless a maximum is subtracted first; rows with very different
    # offsets in one tensor, where only each row's own maximum works; a 1-D tensor; rows of
    # length 1; four axes; float64; scores around +800 and -800, beyond what exp() holds even
    # in float64 (about ±709), in float32 and float64, so that computing in float64 does not
    # replace the shift; and scores that are not contiguous (a transposed tensor).
    g = generator
    return [
        (2.0 * randn(g, 4, 4, 4),),
        (3.0 * randn(g, 3, 5, 7),),
        (20.0 * randn(g, 2, 3, 6) + 500.0,),
        (20.0 * randn(g, 5, 8) - 500.0,),
        (_offset_rows(g),),
        (2.0 * randn(g, 5),),
        (50.0 * randn(g, 3, 1),),
        (3.0 * randn(g, 3, 2, 4, 5),),
        ((4.0 * randn(g, 2, 3, 6)).double(),),
        (20.0 * randn(g, 3, 5) + 800.0,),
        ((20.0 * randn(g, 2, 3, 4) + torch.tensor([800.0, -800.0]).view(2, 1, 1)).double(),),
        ((3.0 * randn(g, 2, 6, 4)).transpose(-2, -1),),
    ]


def _spread_rows(g, rows, length):
    """Rows around +500, −300 and 0 (in turn) in one float32 tensor, the last a spread from −200 to
    200: _offset_rows at other sizes."""
    offsets = torch.tensor([500.0, -300.0, 0.0]).repeat(rows)[:rows]
    spread = 20.0 * randn(g, rows, length) + offsets.unsqueeze(-1)
    spread[-1] = torch.linspace(-200.0, 200.0, length)
    return spread


def _softmax_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (L_q != L_k, scores around +500 and
    −500, rows of very different offsets in one tensor, a 1-D tensor, rows of length 1, four axes,
    float64, scores around ±800 in float32 and float64, scores that are not contiguous), with longer
    rows than any public case has."""
    g = generator
    return [
        (3.0 * randn(g, _draw(g, 2, 4), _draw(g, 2, 6), _draw(g, 9, 12)),),
        (20.0 * randn(g, _draw(g, 2, 3), _draw(g, 2, 5), _draw(g, 2, 8)) + 500.0,),
        (20.0 * randn(g, _draw(g, 2, 6), _draw(g, 2, 9)) - 500.0,),
        (_spread_rows(g, _draw(g, 4, 7), _draw(g, 3, 9)),),
        (2.0 * randn(g, _draw(g, 2, 9)),),
        (50.0 * randn(g, _draw(g, 2, 6), 1),),
        (3.0 * randn(g, _draw(g, 2, 3), _draw(g, 2, 3), _draw(g, 2, 5), _draw(g, 2, 6)),),
        ((4.0 * randn(g, _draw(g, 2, 3), _draw(g, 2, 5), _draw(g, 2, 7))).double(),),
        (20.0 * randn(g, _draw(g, 2, 5), _draw(g, 2, 7)) + 800.0,),
        ((20.0 * randn(g, 2, _draw(g, 2, 4), _draw(g, 2, 6)) + torch.tensor([800.0, -800.0]).view(2, 1, 1)).double(),),
        ((3.0 * randn(g, _draw(g, 2, 3), _draw(g, 2, 7), _draw(g, 2, 6))).transpose(-2, -1),),
    ]


def _exp_shifted(scores):
    return (scores - scores.amax(dim=-1, keepdim=True)).exp()


def _normalised(exponentials, dim=-1):
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _float64_no_shift(scores):
    exponentials = scores.double().exp()
    return (exponentials / exponentials.sum(dim=-1, keepdim=True)).to(scores.dtype)


def _rows_viewed(scores):
    """A softmax that flattens the rows with .view: right, where .view can run."""
    rows = scores.view(-1, scores.shape[-1])  # raises on the transposed case
    return _normalised(_exp_shifted(rows)).view(scores.shape)


def _log_softmax(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


_KEEPDIM_HINT = {
    "en": "The row maxima and sums lost their last axis, so they broadcast along the wrong "
    "axis (or fail to): pass keepdim=True.",
    "zh": "每行的最大值与和丢掉了最后一维，于是沿错误的维度广播（或无法广播）：请传入 keepdim=True。",
}


register(
    Exercise(
        id="01.softmax",
        reference=lambda scores: torch.softmax(scores, dim=-1),
        cases=_softmax_cases,
        hidden=_softmax_hidden,
        # float32 scores near ±500 and +800 carry a rounding error of up to about 3e-5 (their spacing is
        # 3e-5 to 6e-5), and correct answers round differently (through logsumexp, say): their gradients
        # differ from the reference's by a few 1e-5 there, which the default atol of 1e-5 would reject
        atol=1e-4,
        # the exercise is to write it: torch's own softmax (or its logarithm) would do it for you, and
        # so would the course's masked softmax, which without a mask is that softmax
        forbidden=(
            "torch.softmax", "F.softmax", "Tensor.softmax", "torch.special.softmax",
            "torch.log_softmax", "F.log_softmax", "Tensor.log_softmax", "torch.special.log_softmax",
            "course_utils.masks.masked_softmax",
        ),
        mistakes=(
            Mistake(
                "NO_MAX_SHIFT",
                lambda s: _normalised(s.exp()),
                {
                    "en": "exp() overflows to inf for scores above about 88 (and underflows to 0 far below), "
                    "giving NaN: subtract each row's maximum before exp(); softmax does not change.",
                    "zh": "分数大于约 88 时 exp() 会上溢为 inf（远小于 0 时下溢为 0），结果变成 NaN："
                    "先减去每一行的最大值再取 exp()，softmax 的结果不变。",
                },
            ),
            Mistake(
                "GLOBAL_SHIFT",
                lambda s: _normalised((s - s.max()).exp()),
                {
                    "en": "One maximum, of the whole tensor, is subtracted from every row: a row far below it "
                    "underflows to all zeros and gives 0/0 = NaN. Subtract each row's own maximum, "
                    "amax(dim=-1, keepdim=True).",
                    "zh": "每一行减去的都是整个张量的最大值：远低于它的行取 exp() 后全部下溢为 0，得到 0/0 = NaN。"
                    "应让每一行减去自己的最大值，即 amax(dim=-1, keepdim=True)。",
                },
            ),
            Mistake(
                "MEAN_SHIFT",
                lambda s: _normalised((s - s.mean(dim=-1, keepdim=True)).exp()),
                {
                    "en": "Each row's mean is subtracted, not its maximum: a score far above its row's mean still "
                    "overflows exp() to inf. Subtract each row's maximum, so that the largest exponent is 0.",
                    "zh": "每一行减去的是均值而不是最大值：比该行均值大很多的分数，exp() 仍会上溢为 inf。"
                    "应减去每一行的最大值，使最大的指数为 0。",
                },
            ),
            Mistake(
                "WRONG_DIM",
                lambda s: _normalised((s - s.amax(dim=-2, keepdim=True)).exp(), dim=-2),
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
                "NO_EXP",
                lambda s: s / s.sum(dim=-1, keepdim=True),
                {
                    "en": "The scores are divided by their sum without exp(): softmax exponentiates first "
                    "(after subtracting each row's maximum), then divides by the sum of the exponentials.",
                    "zh": "没有取 exp() 就直接除以了分数之和：softmax 要先（减去每一行的最大值后）取指数，"
                    "再除以这些指数之和。",
                },
            ),
            Mistake(
                "KEEPDIM_MISSING",
                lambda s: (s - s.amax(dim=-1)).exp() / (s - s.amax(dim=-1)).exp().sum(dim=-1),
                _KEEPDIM_HINT,
            ),
            Mistake("SUM_KEEPDIM_MISSING", lambda s: _exp_shifted(s) / _exp_shifted(s).sum(dim=-1), _KEEPDIM_HINT),
            Mistake(
                "FLOAT64_NO_SHIFT",
                _float64_no_shift,
                {
                    "en": "Computing in float64 only moves the overflow: exp() overflows float64 above about 709 "
                    "(float32 above about 88), and scores can be larger, here around 800. Subtract each row's maximum "
                    "before exp(): then no dtype overflows.",
                    "zh": "换成 float64 计算只是把上溢推后了：分数大于约 709 时 exp() 在 float64 中也会上溢"
                    "（float32 约为 88），而分数可以更大，这里就有 800 左右的。先减去每一行的最大值再取 exp()，"
                    "这样在哪种 dtype 下都不会上溢。",
                },
            ),
            Mistake(
                "GLOBAL_SUM",
                lambda s: _exp_shifted(s) / _exp_shifted(s).sum(),
                {
                    "en": "Each row's maximum is subtracted, but the sum runs over the whole tensor, so the rows do not "
                    "each sum to 1: sum over the last axis, sum(dim=-1, keepdim=True).",
                    "zh": "每一行都减去了自己的最大值，求和却是对整个张量做的，所以各行之和都不为 1："
                    "应沿最后一维求和，即 sum(dim=-1, keepdim=True)。",
                },
            ),
            Mistake(
                "SHIFT_NUMERATOR_ONLY",
                lambda s: _exp_shifted(s) / s.exp().sum(dim=-1, keepdim=True),
                {
                    "en": "Only the numerator was shifted: the denominator must be the sum of the same shifted "
                    "exponentials, exp(s − max), or the rows do not sum to 1 (and exp(s) still overflows).",
                    "zh": "只有分子减去了最大值：分母必须是同样平移后的指数 exp(s − max) 之和，否则各行之和不为 1"
                    "（而且 exp(s) 照样会上溢）。",
                },
            ),
            Mistake(
                "DIM_1",
                lambda s: _normalised((s - s.amax(dim=1, keepdim=True)).exp(), dim=1),
                {
                    "en": "The softmax runs over dim=1, the second axis. That is the rows' axis only for a matrix: the "
                    "scores can have any number of axes, and the rows are always the last one: dim=-1.",
                    "zh": "softmax 沿 dim=1（第 1 维）做。只有对矩阵来说，这才是每一行所在的维度：分数可以有任意多维，"
                    "而行总是最后一维：dim=-1。",
                },
            ),
            Mistake(
                "DIM_0",
                lambda s: _normalised((s - s.amax(dim=0, keepdim=True)).exp(), dim=0),
                {
                    "en": "The softmax runs over dim=0, the first axis (for a matrix, down each column). The scores "
                    "can have any number of axes, and the rows are always the last one: dim=-1.",
                    "zh": "softmax 沿 dim=0（第 0 维）做（对矩阵来说就是沿每一列）。分数可以有任意多维，"
                    "而行总是最后一维：dim=-1。",
                },
            ),
            Mistake(
                "VIEW_NOT_CONTIGUOUS",
                _rows_viewed,
                {
                    "en": "Your function uses .view, which needs the tensor's memory to match the new shape: it fails on "
                    "scores that are not contiguous, such as a transposed tensor (here, the last case). Use .reshape, "
                    "or do not flatten at all: amax and sum take dim=-1 on a tensor of any shape.",
                    "zh": "你的函数用了 .view，它要求张量的内存布局与新形状相符：遇到不连续的分数（例如转置得到的张量，"
                    "这里的最后一组测试就是）就会报错。请改用 .reshape，或者干脆不要展平：amax 和 sum 对任意形状的张量"
                    "都可以写 dim=-1。",
                },
            ),
            Mistake(
                "LOG_SOFTMAX",
                _log_softmax,
                {
                    "en": "You returned log-probabilities, s − max − log Σ exp(s − max): that is log-softmax. The "
                    "softmax is its exp(), positive values that sum to 1 in each row.",
                    "zh": "你返回的是对数概率 s − max − log Σ exp(s − max)，也就是 log-softmax。softmax 是它的 exp()："
                    "每一行都是和为 1 的正数。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 01.additive_scores

def _additive_case(g, batch, l_q, l_k, d_q, d_k, d_h, dtype=torch.float32):
    case = (
        randn(g, batch, l_q, d_q),
        randn(g, batch, l_k, d_k),
        randn(g, d_q, d_h) / math.sqrt(d_q),
        randn(g, d_k, d_h) / math.sqrt(d_k),
        randn(g, d_h),
    )
    return tuple(t.to(dtype) for t in case)


def _additive_cases(generator):
    # (batch, L_q, L_k, d_q, d_k, d_h). The first case is square everywhere, so mistakes that mix
    # up axes or weights still run there; then every size differs from every other, a batch of
    # one with length 1, d_q = d_k (where swapped weights still run) with other sizes apart, a
    # hidden size of 1, and float64.
    return [
        _additive_case(generator, 2, 4, 4, 4, 4, 4),
        _additive_case(generator, 3, 5, 7, 6, 3, 8),
        _additive_case(generator, 1, 1, 1, 2, 5, 4),
        _additive_case(generator, 2, 6, 2, 8, 8, 16),
        _additive_case(generator, 1, 3, 4, 5, 2, 1),
        _additive_case(generator, 2, 2, 5, 3, 4, 6, dtype=torch.float64),
    ]


def _additive_hidden(generator):
    """The grader's hidden cases: the public edges at drawn sizes (every size apart, a batch of one
    with length 1, d_q = d_k with the other sizes apart, a hidden size of 1, float64), with more keys
    than any public case has."""
    g = generator
    d, n = _draw(g, 2, 7), _draw(g, 3, 6)
    return [
        _additive_case(g, 2, n, n, n, n, n),  # square: every mistake runs
        _additive_case(g, _draw(g, 2, 3), _draw(g, 2, 6), _draw(g, 8, 10), _draw(g, 2, 7), _draw(g, 2, 7),
                       _draw(g, 2, 9)),
        _additive_case(g, 1, 1, 1, _draw(g, 1, 6), _draw(g, 1, 6), _draw(g, 2, 8)),
        _additive_case(g, _draw(g, 1, 3), _draw(g, 2, 6), _draw(g, 2, 6), d, d, _draw(g, 2, 12)),
        _additive_case(g, _draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 6), _draw(g, 1, 6), _draw(g, 1, 6), 1),
        _additive_case(g, _draw(g, 1, 3), _draw(g, 2, 5), _draw(g, 2, 6), _draw(g, 2, 6), _draw(g, 2, 6),
                       _draw(g, 2, 8), dtype=torch.float64),
    ]


def _pairs(q, k):
    """q: (..., L_q, d_h), k: (..., L_k, d_h) -> (..., L_q, L_k, d_h), the sum for every pair."""
    return q.unsqueeze(-2) + k.unsqueeze(-3)


register(
    Exercise(
        id="01.additive_scores",
        reference=lambda q, k, w_q, w_k, v: attention.additive_scores(q, k, w_q, w_k, v),
        cases=_additive_cases,
        hidden=_additive_hidden,
        forbidden=("course_utils.attention.additive_scores",),  # the course's own (the reference): the answer
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
                "TANH_EACH",
                lambda q, k, w_q, w_k, v: _pairs(torch.tanh(q @ w_q), torch.tanh(k @ w_k)) @ v,
                {
                    "en": "tanh is applied to the projected queries and keys separately, so the score splits "
                    "into a part of q plus a part of k: add the projections first, then apply tanh to the "
                    "sum, vᵀ tanh(W_q q + W_k k).",
                    "zh": "tanh 分别作用在了投影后的查询和键上，于是分数拆成了只含 q 的一项加只含 k 的一项："
                    "应先把两个投影相加，再对和做 tanh，即 vᵀ tanh(W_q q + W_k k)。",
                },
            ),
            Mistake(
                "RELU",
                lambda q, k, w_q, w_k, v: torch.relu(_pairs(q @ w_q, k @ w_k)) @ v,
                {
                    "en": "The hidden layer uses ReLU; the additive score uses tanh: vᵀ tanh(W_q q + W_k k).",
                    "zh": "隐藏层用的是 ReLU；加性评分用的是 tanh：vᵀ tanh(W_q q + W_k k)。",
                },
            ),
            Mistake(
                "NO_V",
                lambda q, k, w_q, w_k, v: torch.tanh(_pairs(q @ w_q, k @ w_k)).sum(dim=-1),
                {
                    "en": "The hidden layer is summed instead of multiplied by v: each score is "
                    "vᵀ tanh(W_q q + W_k k), the dot product of v with the hidden vector, (..., d_h) @ (d_h,).",
                    "zh": "隐藏层被直接求和了，而没有与 v 相乘：每个分数是 vᵀ tanh(W_q q + W_k k)，"
                    "即 v 与隐藏向量的点积，(..., d_h) @ (d_h,)。",
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
                "V_ON_THE_LEFT",
                lambda q, k, w_q, w_k, v: v @ torch.tanh(_pairs(q @ w_q, k @ w_k)),
                {
                    "en": "v @ h multiplies v with the second-to-last axis of h, the keys, not with its features (and "
                    "fails unless L_k = d_h). The formula's vᵀ h is the dot product over d_h: put v on the right, "
                    "tanh(...) @ v.",
                    "zh": "v @ h 是让 v 与 h 的倒数第二维（键）相乘，而不是与它的特征相乘（而且只有 L_k = d_h 时才不报错）。"
                    "公式里的 vᵀ h 是沿 d_h 的点积：应把 v 放在右边，tanh(...) @ v。",
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
            Mistake(
                "WEIGHTS_TRANSPOSED",
                lambda q, k, w_q, w_k, v: torch.tanh(_pairs(q @ w_q.transpose(0, 1), k @ w_k.transpose(0, 1))) @ v,
                {
                    "en": "The weights are transposed: here w_query is (d_q, d_h) and w_key (d_k, d_h), stored "
                    "to be used as they are, query @ w_query and key @ w_key.",
                    "zh": "权重被转置了：这里的 w_query 形状为 (d_q, d_h)，w_key 形状为 (d_k, d_h)，"
                    "直接用 query @ w_query 和 key @ w_key 即可。",
                },
            ),
        ),
    )
)
