"""Lesson 10's exercises: the causal decoder block, the language-model loss, sampling the next
character, and greedy generation with the KV cache, past the context too.

A case crosses to a grader's kernel as plain data, so the block and the model travel as their
parameters (course_utils/exercises/objects.py builds the ``gpt.Block`` or ``gpt.GPT`` the learner's
function receives, its tensors views of the case's, and the generator from a seed). Every function
here also accepts the data itself, as the generic tests call them on a case's arguments.

The references are plain code; tests/test_exercises_l10.py proves them equal to ``course_utils.gpt``
(``Block.forward``, ``lm_loss`` on shifted targets, ``sample_next``, ``GPT.generate``), values and
gradients. The first case of each exercise is one where every known mistake runs and shows:

- 10.causal_block: several heads (2 … 8, and 1, where splitting and merging cannot go wrong), one
  position, float64; the gradient with respect to ``block`` is every parameter's;
- 10.lm_loss: rows with different numbers of padded targets, a pad id that is not 0, no padding,
  a pad id that does not occur, one prediction (T = 2), float64;
- 10.sample_next: judged by behaviour (objects.py): a tie at the k-th logit, temperatures below and
  above 1, top_k = 1, two different rows in one batch, and temperature 0 (the argmax, its first index
  on ties) with and without a generator;
- 10.generate_cached: a generation that runs past the context (the window jumps), a prompt that fills
  the context, one longer than it, a single new token, one layer, several jumps.
"""

import math

import torch
import torch.nn.functional as F

from course_utils import gpt
from course_utils.decoding import KVCache
from course_utils.exercises import objects

from .registry import Exercise, Mistake, randn, register


def _sizes(generator, count, low, high):
    """`count` integers drawn uniformly from [low, high] by the grader's generator."""
    return [int(n) for n in torch.randint(low, high + 1, (count,), generator=generator)]


def _draw(generator, low, high):
    return _sizes(generator, 1, low, high)[0]


def _parameters(g, module, dtype=torch.float32, embedding=1.0, gain=1.0):
    """Parameters for `module`'s structure (in ``named_parameters`` order, flattened): LayerNorm weights
    near 1, biases near 0, positions N(0, 1), the character embedding N(0, embedding²), every other matrix
    N(0, gain²/fan_in), so that no layer is the identity, as a trained model's are not."""
    drawn = []
    for name, parameter in module.named_parameters():
        shape = parameter.shape
        if "norm" in name and name.endswith("weight"):
            values = 1 + 0.2 * randn(g, *shape)
        elif name.endswith("bias"):
            values = 0.2 * randn(g, *shape)
        elif name.startswith("embed"):
            values = embedding * randn(g, *shape)
        elif name.startswith("positions"):
            values = randn(g, *shape)
        else:
            values = gain * randn(g, *shape) / math.sqrt(shape[-1])
        drawn.append(values.reshape(-1))
    return torch.cat(drawn).to(dtype)


# ----------------------------------------------------------------------------- 10.causal_block
# x (B, L, E), block a gpt.Block (learned positions) -> (B, L, E):
#   h = norm1(x); q, k, v = h W_Q, h W_K, h W_V split into H heads; causal attention; heads merged;
#   x = x + out_proj(...); return x + feed_forward(norm2(x)).


def _as_block(block, x):
    return objects.block(block, x.shape[-1]) if isinstance(block, torch.Tensor) else block


def _block_case(g, B, L, E, H, d_ff, dtype=torch.float32):
    with torch.random.fork_rng(devices=[]):  # (its own weights are replaced: the global state kept)
        structure = gpt.Block(E, H, d_ff)
    parameters = _parameters(g, structure, dtype).reshape(H, -1)
    return randn(g, B, L, E).to(dtype), parameters


def _block_cases(generator):
    # (B, L, E, H, d_ff). First 4 heads of 4 over 5 positions: every mistake shows; then one position,
    # three heads, one head (where splitting and merging cannot go wrong), head size 4 with 8 heads, float64.
    g = generator
    return [
        _block_case(g, 2, 5, 16, 4, 32),
        _block_case(g, 1, 1, 8, 2, 16),
        _block_case(g, 2, 7, 12, 3, 24),
        _block_case(g, 1, 6, 8, 1, 8),
        _block_case(g, 2, 4, 32, 8, 64),
        _block_case(g, 2, 5, 8, 2, 16, torch.float64),
    ]


def _hidden_block_cases(generator):
    """The grader's: sizes drawn from its generator (E ≤ 32, L ≤ 12), one in float64; and, whatever the
    draws, one case with two heads or more and three positions or more, as the first public one."""
    g, cases = generator, []
    for number in range(5):
        heads = _draw(g, 2 if number == 0 else 1, 4)
        head_size = 2 * _draw(g, 1, 32 // (2 * heads))
        E = heads * head_size
        length = _draw(g, 3 if number == 0 else 1, 12)
        cases.append(_block_case(g, _draw(g, 1, 2), length, E, heads, E * _draw(g, 1, 2),
                                 torch.float64 if number == 4 else torch.float32))
    return cases


def _causal_block(x, block, *, post_norm=False, mask="causal", scale="head", split="transpose", merge="transpose",
                  residual="input", second_norm="norm2", parallel=False, softmax_dim=-1):
    """The pre-norm block, written out, with one of the slips its keywords name."""
    block = _as_block(block, x)
    B, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads
    d = E // H
    h = x if post_norm else block.norm1(x)

    def heads(t):  # (B, L, E) -> (B, H, L, d)
        return t.view(B, L, H, d).transpose(1, 2) if split == "transpose" else t.reshape(B, H, L, d)

    q, k, v = heads(m.q_proj(h)), heads(m.k_proj(h)), heads(m.v_proj(h))
    scores = q @ k.transpose(-2, -1)  # (B, H, L, L)
    if scale == "head":
        scores = scores / math.sqrt(d)
    elif scale == "width":
        scores = scores / math.sqrt(E)
    keep = {"causal": torch.ones(L, L, dtype=torch.bool, device=x.device).tril(),
            "strict": torch.ones(L, L, dtype=torch.bool, device=x.device).tril(-1),
            "none": None}[mask]
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    out = scores.softmax(dim=softmax_dim) @ v  # (B, H, L, d)
    out = out.transpose(1, 2).reshape(B, L, E) if merge == "transpose" else out.reshape(B, L, E)
    attended = m.out_proj(out)  # (B, L, E)
    if post_norm:
        x = block.norm1(x + attended)
        return block.norm2(x + block.feed_forward(x))
    if parallel:
        return x + attended + block.feed_forward(block.norm2(x))
    x = (h if residual == "normed" else x) + attended
    norm = block.norm2 if second_norm == "norm2" else block.norm1
    return x + block.feed_forward(norm(x))


def _block_reference(x, block):
    return _causal_block(x, block)


def _block_post_norm(x, block):
    return _causal_block(x, block, post_norm=True)


def _block_no_mask(x, block):
    return _causal_block(x, block, mask="none")


def _block_hides_itself(x, block):
    return _causal_block(x, block, mask="strict")


def _block_no_scale(x, block):
    return _causal_block(x, block, scale="none")


def _block_scale_by_width(x, block):
    return _causal_block(x, block, scale="width")


def _block_heads_by_reshape(x, block):
    return _causal_block(x, block, split="reshape", merge="reshape")


def _block_merge_not_transposed(x, block):
    return _causal_block(x, block, merge="reshape")


def _block_residual_from_norm(x, block):
    return _causal_block(x, block, residual="normed")


def _block_norm1_twice(x, block):
    return _causal_block(x, block, second_norm="norm1")


def _block_parallel(x, block):
    return _causal_block(x, block, parallel=True)


def _block_softmax_dim(x, block):
    return _causal_block(x, block, softmax_dim=-2)


_BLOCK_MISTAKES = (
    Mistake(
        "POST_NORM",
        _block_post_norm,
        {
            "en": "This is the post-norm block of the 2017 Transformer: x = norm1(x + attention(x)), then "
            "norm2(x + feed_forward(x)). A GPT normalises before each sub-layer and adds to x as it is: "
            "h = block.norm1(x), x = x + attention(h), then x + block.feed_forward(block.norm2(x)).",
            "zh": "这是 2017 年 Transformer 的后归一化块：x = norm1(x + attention(x))，再 norm2(x + feed_forward(x))。"
            "GPT 在每个子层之前做归一化，并把结果加到原样的 x 上：h = block.norm1(x)，x = x + attention(h)，"
            "再返回 x + block.feed_forward(block.norm2(x))。",
        },
    ),
    Mistake(
        "NO_CAUSAL_MASK",
        _block_no_mask,
        {
            "en": "No causal mask: each position also reads the positions after it, the very characters a "
            "language model must predict. Keep key j for query i only when j ≤ i: "
            "torch.ones(L, L, dtype=torch.bool).tril() as the keep mask.",
            "zh": "没有因果掩码：每个位置还读到了它后面的位置，而那正是语言模型要预测的字符。只有 j ≤ i 时查询 i 才保留键 j："
            "保留掩码用 torch.ones(L, L, dtype=torch.bool).tril()。",
        },
    ),
    Mistake(
        "CAUSAL_HIDES_ITSELF",
        _block_hides_itself,
        {
            "en": "The causal mask also hides each position's own key (tril(-1), or triu() used as the hidden "
            "part), so position 0 sees nothing and gets NaN. A position may attend to itself: keep "
            "tril() (j ≤ i), hide triu(1) (j > i).",
            "zh": "因果掩码把每个位置自己的键也遮住了（tril(-1)，或把 triu() 当成了要遮住的部分），"
            "于是位置 0 什么都看不到，得到 NaN。一个位置可以关注它自己：保留 tril()（j ≤ i），遮住 triu(1)（j > i）。",
        },
    ),
    Mistake(
        "NO_SCALE",
        _block_no_scale,
        {
            "en": "The scores are not divided by √d. Each head's q · k is divided by the square root of the head "
            "size d = E / H before the softmax.",
            "zh": "分数没有除以 √d。每个头的 q · k 在 softmax 之前要除以头大小 d = E / H 的平方根。",
        },
    ),
    Mistake(
        "SCALE_BY_WIDTH",
        _block_scale_by_width,
        {
            "en": "The scores are divided by √E, the model's width, instead of √d, the size of one head "
            "(d = E / H): each head's dot products have d terms, not E.",
            "zh": "分数除以的是模型宽度的平方根 √E，而不是单个头大小的平方根 √d（d = E / H）："
            "每个头的点积只有 d 项，不是 E 项。",
        },
    ),
    Mistake(
        "HEADS_BY_RESHAPE",
        _block_heads_by_reshape,
        {
            "en": "The heads are split with view(B, H, L, d) straight from (B, L, E): that cuts the positions "
            "apart, not the features. Split the features: view(B, L, H, d).transpose(1, 2), and merge back with "
            "transpose(1, 2).reshape(B, L, E).",
            "zh": "直接把 (B, L, E) view 成了 (B, H, L, d)：这样切开的是位置，而不是特征。应切分特征："
            "view(B, L, H, d).transpose(1, 2)，合并时再用 transpose(1, 2).reshape(B, L, E)。",
        },
    ),
    Mistake(
        "MERGE_NOT_TRANSPOSED",
        _block_merge_not_transposed,
        {
            "en": "The heads are split right but merged with reshape(B, L, E) straight from (B, H, L, d), which "
            "mixes positions and heads. Put the heads back beside each other first: "
            "out.transpose(1, 2).reshape(B, L, E).",
            "zh": "头切分得对，但合并时直接把 (B, H, L, d) reshape 成了 (B, L, E)，位置和头混在了一起。"
            "应先把头放回到相邻的位置：out.transpose(1, 2).reshape(B, L, E)。",
        },
    ),
    Mistake(
        "RESIDUAL_FROM_NORM",
        _block_residual_from_norm,
        {
            "en": "The residual adds the normalised input: x = norm1(x) + attention(norm1(x)). The residual stream "
            "carries x itself; only the sub-layer reads the normalised copy: x = x + attention(block.norm1(x)).",
            "zh": "残差连接加上的是归一化后的输入：x = norm1(x) + attention(norm1(x))。残差流传递的是 x 本身，"
            "只有子层读归一化后的副本：x = x + attention(block.norm1(x))。",
        },
    ),
    Mistake(
        "NORM1_TWICE",
        _block_norm1_twice,
        {
            "en": "The feed-forward sub-layer reads block.norm1(x): each sub-layer has its own LayerNorm, with its "
            "own weights. Use block.norm2 before block.feed_forward.",
            "zh": "前馈子层读的是 block.norm1(x)：每个子层都有自己的 LayerNorm 和它自己的权重。"
            "block.feed_forward 之前应使用 block.norm2。",
        },
    ),
    Mistake(
        "PARALLEL_BLOCK",
        _block_parallel,
        {
            "en": "Attention and the feed-forward network both read the block's input x (x + attention + "
            "feed_forward(norm2(x)), the parallel block of some later models). In this block they run one after "
            "the other: the feed-forward network reads x after the attention was added to it.",
            "zh": "注意力和前馈网络读的都是块的输入 x（x + attention + feed_forward(norm2(x))，即后来某些模型的并行块）。"
            "本练习的块是先后执行的：前馈网络读的是加上注意力之后的 x。",
        },
    ),
    Mistake(
        "SOFTMAX_DIM",
        _block_softmax_dim,
        {
            "en": "The softmax runs over the queries (dim=-2), so each key's column sums to 1. Each query's weights "
            "over the keys must sum to 1: softmax over the last axis, dim=-1, of the (B, H, L, L) scores.",
            "zh": "softmax 是沿查询这一维（dim=-2）做的，结果是每个键的那一列加起来为 1。应当是每个查询对所有键的权重"
            "加起来为 1：对形状为 (B, H, L, L) 的分数，沿最后一维 dim=-1 做 softmax。",
        },
    ),
)


register(
    Exercise(
        id="10.causal_block",
        reference=_block_reference,
        cases=_block_cases,
        hidden=_hidden_block_cases,
        # PyTorch's fused attention spelt in full: the grader's policy reads "F.scaled_dot_product_attention" as
        # "attention is the exercise" and forbids every attention with it (policy.COMPUTES), lesson 01's too,
        # which this exercise hands the learner as their own part
        forbidden=("course_utils.gpt.Block.forward", "course_utils.gpt.CausalSelfAttention.forward",
                   "course_utils.gpt.causal_attention", "course_utils.gpt._attend",
                   "torch.nn.functional.scaled_dot_product_attention",
                   "torch.nn.MultiheadAttention.forward", "course_utils.multihead.FusedMultiheadAttention.forward"),
        mistakes=_BLOCK_MISTAKES,
    )
)


# ----------------------------------------------------------------------------- 10.lm_loss
# logits (B, T, V), tokens (B, T) int64, pad_id -> 0-dim: the mean cross-entropy of tokens[:, t + 1]
# under logits[:, t], t = 0 … T − 2, over the targets that are not pad_id.


def _loss_case(g, B, T, V, pad_id=None, pads=(), dtype=torch.float32, leading=False):
    """Tokens drawn from the V − 1 ids that are not pad_id; row b ends with pads[b] pad ids (or starts with
    them when `leading`)."""
    logits = (2 * randn(g, B, T, V)).to(dtype)
    ids = torch.tensor([i for i in range(V) if i != pad_id])
    tokens = ids[torch.randint(len(ids), (B, T), generator=g)]
    for row, count in enumerate(pads):
        if count:
            if leading:
                tokens[row, :count] = pad_id
            else:
                tokens[row, T - count:] = pad_id
    return logits, tokens, pad_id


def _loss_cases(generator):
    # First three rows with 0, 2 and 4 padded targets at their ends (every mistake shows: the rows'
    # means differ from the mean over all); then no padding (pad_id None), one prediction (T = 2),
    # padding at the start of a row with a pad id that is not 0, a pad id that does not occur, float64.
    g = generator
    return [
        _loss_case(g, 3, 7, 6, 0, (0, 2, 4)),
        _loss_case(g, 2, 5, 5),
        _loss_case(g, 1, 2, 3),
        _loss_case(g, 2, 8, 9, 3, (3, 1), leading=True),
        _loss_case(g, 2, 5, 6, 5),
        _loss_case(g, 2, 6, 4, 1, (1, 3), torch.float64),
    ]


def _hidden_loss_cases(generator):
    """The grader's: sizes, pad ids and padding drawn from its generator, one in float64; whatever the
    draws, one case whose rows hold different numbers of padded targets (and one target or more each)."""
    g, cases = generator, []
    for number in range(5):
        B, T, V = _draw(g, 2 if number == 0 else 1, 4), _draw(g, 3 if number == 0 else 2, 12), _draw(g, 3, 20)
        pad_id = _draw(g, 0, V - 1) if number in (0, 2, 4) else None
        if number == 0:
            pads = [min(row, T - 2) for row in range(B)]  # 0, 1, 2, ... padded targets: different counts
        elif pad_id is not None:
            pads = _sizes(g, B, 0, T - 2)
        else:
            pads = ()
        cases.append(_loss_case(g, B, T, V, pad_id, pads, torch.float64 if number == 4 else torch.float32,
                                leading=number == 2))
    return cases


def _lm_loss(logits, tokens, pad_id=None, *, shift="right", probabilities="log_softmax", ignore_pad=True,
             pad_from="targets", reduction="mean"):
    """The loss, written out, with one of the slips its keywords name."""
    if shift == "right":
        predictions, targets, inputs = logits[:, :-1], tokens[:, 1:], tokens[:, :-1]  # (B, T − 1, V), (B, T − 1)
    elif shift == "none":
        predictions, targets, inputs = logits, tokens, tokens
    else:  # the wrong way: logits[:, t + 1] predicting tokens[:, t]
        predictions, targets, inputs = logits[:, 1:], tokens[:, :-1], tokens[:, 1:]
    if probabilities == "log_softmax":
        log_p = predictions.log_softmax(dim=-1)
    elif probabilities == "softmax_first":  # cross-entropy of the softmax: a softmax taken twice
        log_p = predictions.softmax(dim=-1).log_softmax(dim=-1)
    else:  # the logits taken as log-probabilities (nll_loss on raw logits)
        log_p = predictions
    losses = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T')
    keep = torch.ones_like(targets, dtype=torch.bool)
    if pad_id is not None and ignore_pad:
        keep = (targets if pad_from == "targets" else inputs) != pad_id
    losses = losses * keep
    if reduction == "mean":
        return losses.sum() / keep.sum()
    if reduction == "sum":
        return losses.sum()
    if reduction == "all":  # the padded positions zeroed but counted
        return losses.sum() / keep.numel()
    return (losses.sum(dim=1) / keep.sum(dim=1)).mean()  # "rows": the mean of each row's mean


def _loss_reference(logits, tokens, pad_id=None):
    V = logits.shape[-1]
    predictions, targets = logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1)  # (B·(T − 1), V), (B·(T − 1),)
    return F.cross_entropy(predictions, targets, ignore_index=-100 if pad_id is None else pad_id)


def _loss_no_shift(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, shift="none")


def _loss_shifted_wrong_way(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, shift="left")


def _loss_softmax_first(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, probabilities="softmax_first")


def _loss_logits_as_log_probabilities(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, probabilities="logits")


def _loss_padding_counted(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, ignore_pad=False)


def _loss_pad_by_input(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, pad_from="inputs")


def _loss_sum(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, reduction="sum")


def _loss_divided_by_all(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, reduction="all")


def _loss_mean_of_row_means(logits, tokens, pad_id=None):
    return _lm_loss(logits, tokens, pad_id, reduction="rows")


_LOSS_MISTAKES = (
    Mistake(
        "NO_SHIFT",
        _loss_no_shift,
        {
            "en": "The targets are not shifted: logits[:, t] is scored on tokens[:, t], the character it has "
            "already read, so the model would learn to copy. logits[:, t] predicts the next character: score "
            "logits[:, :-1] on tokens[:, 1:] (T − 1 predictions a row).",
            "zh": "目标没有错开：logits[:, t] 是拿 tokens[:, t] 来评分的，而这个字符它已经读到了，模型就会学会照抄。"
            "logits[:, t] 预测的是下一个字符：应拿 logits[:, :-1] 对 tokens[:, 1:] 评分（每行 T − 1 个预测）。",
        },
    ),
    Mistake(
        "SHIFTED_WRONG_WAY",
        _loss_shifted_wrong_way,
        {
            "en": "The shift goes the wrong way: logits[:, 1:] scored on tokens[:, :-1] asks each position for the "
            "character before it. Position t has read tokens 0 … t and predicts token t + 1: logits[:, :-1] "
            "with tokens[:, 1:].",
            "zh": "错开的方向反了：拿 logits[:, 1:] 对 tokens[:, :-1] 评分，等于让每个位置预测它前面的字符。"
            "位置 t 读过词元 0 … t，预测的是词元 t + 1：应为 logits[:, :-1] 对 tokens[:, 1:]。",
        },
    ),
    Mistake(
        "SOFTMAX_FIRST",
        _loss_softmax_first,
        {
            "en": "A softmax was applied before the cross-entropy, which takes a softmax of its own: "
            "F.cross_entropy expects raw logits. Pass the logits as they are.",
            "zh": "在交叉熵之前先做了一次 softmax，而交叉熵内部自己还会做一次：F.cross_entropy 要的是原始的 logits。"
            "直接把 logits 传进去即可。",
        },
    ),
    Mistake(
        "LOGITS_AS_LOG_PROBABILITIES",
        _loss_logits_as_log_probabilities,
        {
            "en": "The logits are used as if they were log-probabilities (F.nll_loss on raw logits, or −logit "
            "of the target): they are not normalised. Take log_softmax over the vocabulary first, or use "
            "F.cross_entropy, which does both.",
            "zh": "把 logits 当成了对数概率来用（对原始 logits 直接用 F.nll_loss，或取目标的 −logit）：logits 并没有归一化。"
            "应先在词表这一维上做 log_softmax，或者直接用 F.cross_entropy，它两步都做了。",
        },
    ),
    Mistake(
        "PADDING_COUNTED",
        _loss_padding_counted,
        {
            "en": "The padded targets are counted: predicting pad_id after the end of a text is no part of the "
            "language, and the mean must leave it out. Keep only the targets tokens[:, 1:] != pad_id "
            "(F.cross_entropy(..., ignore_index=pad_id) does it).",
            "zh": "把填充的目标也算进去了：在文本结束之后预测 pad_id 并不是语言的一部分，求平均时必须排除。"
            "只保留 tokens[:, 1:] != pad_id 的目标（F.cross_entropy(..., ignore_index=pad_id) 就是这样做的）。",
        },
    ),
    Mistake(
        "PAD_BY_INPUT",
        _loss_pad_by_input,
        {
            "en": "The positions are left out when their input, tokens[:, :-1], is pad_id, not when their target "
            "is: the first padded target still counts, and a real character after padding does not. Decide "
            "by the target: tokens[:, 1:] != pad_id.",
            "zh": "排除的是输入 tokens[:, :-1] 为 pad_id 的位置，而不是目标为 pad_id 的位置：第一个填充的目标仍被计入，"
            "填充之后真正的字符反而被排除了。应按目标判断：tokens[:, 1:] != pad_id。",
        },
    ),
    Mistake(
        "SUM_NOT_MEAN",
        _loss_sum,
        {
            "en": "The losses are summed, not averaged: the loss would grow with the batch and the text length, "
            "and the learning rate with it. Take the mean over the counted targets.",
            "zh": "损失是求和而不是求平均：这样损失会随批量和文本长度增大，学习率也得跟着变。应对计入的目标求平均。",
        },
    ),
    Mistake(
        "DIVIDED_BY_ALL",
        _loss_divided_by_all,
        {
            "en": "The padded targets are zeroed but still counted in the mean: the sum is divided by every "
            "position, B · (T − 1), instead of by the number of targets that are not pad_id.",
            "zh": "填充的目标虽然置零了，但求平均时仍然算在个数里：总和除以的是全部位置数 B · (T − 1)，"
            "而不是不等于 pad_id 的目标个数。",
        },
    ),
    Mistake(
        "MEAN_OF_ROW_MEANS",
        _loss_mean_of_row_means,
        {
            "en": "Each row's mean is taken first, then the mean of those: a row with few real targets then weighs "
            "as much as a full one. The loss is the mean over all the counted targets of the batch at once.",
            "zh": "先对每一行求平均，再对这些平均值求平均：这样真实目标很少的一行和满满的一行权重一样。"
            "损失应是整个批量中所有计入的目标一起求平均。",
        },
    ),
)


register(
    Exercise(
        id="10.lm_loss",
        reference=_loss_reference,
        cases=_loss_cases,
        hidden=_hidden_loss_cases,
        mistakes=_LOSS_MISTAKES,
    )
)


# ----------------------------------------------------------------------------- 10.sample_next
# logits (B, V), temperature, top_k, generator -> (B,) int64: temperature 0, the argmax; else one draw
# per row from softmax(logits / temperature) over the top_k largest logits (ties with the k-th kept),
# with `generator` only. Judged by behaviour (objects.py): each case of temperature > 0 repeats its rows
# DRAWS times, so that the frequencies can be compared with the probabilities.

DRAWS = 2000


def _as_generator(generator):
    return torch.Generator().manual_seed(int(generator)) if isinstance(generator, int) else generator


def _repeated(*rows, draws=DRAWS):
    """Each row repeated `draws` times, in one batch: a view (the case's data stays small)."""
    if len(rows) == 1:
        return rows[0][None, :].expand(draws, -1)
    return torch.cat([row[None, :].expand(draws, -1) for row in rows])


def _distinct_row(g, V, top_k=None, scale=1.5):
    """A row of V logits whose top_k largest are clear of the others (no tie at the k-th)."""
    while True:
        row = scale * randn(g, V)
        ordered = row.sort(descending=True).values
        if top_k is None or top_k == V or float(ordered[top_k - 1] - ordered[top_k]) > 0.3:
            return row


def _sample_cases(generator):
    # (logits, temperature, top_k, generator's seed). First a tie at the 3rd largest logit with top_k = 3
    # at temperature 1: every mistake of top-k and of the generator shows; then temperature 0.5 without
    # top-k, 2.0 with top_k = 2, two different rows in one batch, top_k = 1 (no choice), and temperature
    # 0 (the argmax, the first index on ties) without a generator and with one and top_k.
    g = generator
    tie = torch.tensor([1.0, 2.0, -0.5, 1.5, 1.0, 0.2, 0.8, -1.0])  # the 3rd largest, 1.0, twice
    ties = torch.tensor([[0.5, 2.0, 2.0, -1.0, 0.0, 1.0, 0.3], [1.0, 1.0, 1.0, 0.0, -2.0, 0.5, 0.1]])
    greedy = torch.cat([ties, randn(g, 3, 7)])
    return [
        (_repeated(tie), 1.0, 3, 11),
        (_repeated(_distinct_row(g, 10)), 0.5, None, 12),
        (_repeated(_distinct_row(g, 6, 2)), 2.0, 2, 13),
        (_repeated(_distinct_row(g, 5), _distinct_row(g, 5)), 1.0, None, 14),
        (_repeated(_distinct_row(g, 7, 1)), 1.5, 1, 15),
        (greedy, 0.0, None, None),
        (randn(g, 4, 9), 0.0, 2, 16),
    ]


def _hidden_sample_cases(generator):
    """The grader's: sizes, temperatures, top_k and seeds drawn from its generator; whatever the draws,
    a tie at the k-th largest logit (k ≤ 4, the tied pair likely enough that dropping one shows), a
    temperature below 1 and one above, two rows, and temperature 0."""
    g = generator
    V = _draw(g, 6, 12)
    k = _draw(g, 2, 4)
    above = 0.2 + 0.6 * torch.rand(k - 1, generator=g)  # the k − 1 largest, a little above the tied pair at 0
    below = -1.5 - torch.rand(V - k - 1, generator=g)  # the rest, well below it
    row = torch.cat([above, torch.zeros(2), below])[torch.randperm(V, generator=g)]
    seeds = _sizes(g, 4, 0, 10**6)
    low, high = 0.3 + 0.5 * float(torch.rand(1, generator=g)), 1.3 + float(torch.rand(1, generator=g))
    return [
        (_repeated(row), 1.0, k, seeds[0]),
        (_repeated(_distinct_row(g, _draw(g, 4, 12))), low, None, seeds[1]),
        (_repeated(_distinct_row(g, V, k)), high, k, seeds[2]),
        (_repeated(_distinct_row(g, 6), _distinct_row(g, 6)), 1.0, None, seeds[3]),
        (randn(g, _draw(g, 2, 6), _draw(g, 3, 12)), 0.0, None, None),
    ]


def _sample(logits, temperature=1.0, top_k=None, generator=None, *, use_generator="given", scale="divide",
            top="ties_kept", greedy_at_zero=True, always_greedy=False, keep_axis=False):
    """sample_next, written out, with one of the slips its keywords name."""
    generator = _as_generator(generator)
    if top_k is not None and top != "ignored":
        if top == "ties_kept":
            kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest
            logits = logits.masked_fill(logits < kth, float("-inf"))
        elif top == "kth_dropped":
            kth = logits.topk(top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits <= kth, float("-inf"))
        else:  # "indices": exactly k kept, whichever of tied logits topk returns
            keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(top_k, dim=-1).indices, True)
            logits = logits.masked_fill(~keep, float("-inf"))
    if always_greedy or (temperature == 0 and greedy_at_zero):
        return logits.argmax(dim=-1)
    scaled = logits / temperature if scale == "divide" else logits * temperature
    probabilities = scaled.softmax(dim=-1)  # (B, V)
    if use_generator == "given":
        drawn = torch.multinomial(probabilities, 1, generator=generator)
    elif use_generator == "global":
        drawn = torch.multinomial(probabilities, 1)
    else:  # a generator of its own
        drawn = torch.multinomial(probabilities, 1, generator=torch.Generator().manual_seed(0))
    return drawn if keep_axis else drawn[:, 0]  # (B, 1) -> (B,)


def _sample_reference(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator)


def _sample_global(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, use_generator="global")


def _sample_own_generator(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, use_generator="own")


def _sample_temperature_multiplied(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, scale="multiply")


def _sample_top_k_ignored(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, top="ignored")


def _sample_ties_dropped(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, top="indices")


def _sample_kth_dropped(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, top="kth_dropped")


def _sample_no_greedy(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, greedy_at_zero=False)


def _sample_always_greedy(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, always_greedy=True)


def _sample_keeps_axis(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator, keep_axis=True)


_SAMPLE_MISTAKES = (
    Mistake(
        "GLOBAL_GENERATOR",
        _sample_global,
        {
            "en": "The draws come from torch's global random generator (torch.multinomial(p, 1) without "
            "generator=): the same generator given twice does not give the same text, and every other random "
            "thing in the program moves with it. Pass it: torch.multinomial(p, 1, generator=generator).",
            "zh": "采样用的是 torch 的全局随机数生成器（torch.multinomial(p, 1) 没有传 generator=）："
            "两次传入状态相同的生成器，得到的文本却不一定相同，而且程序里其他随机的东西也跟着变了。"
            "应传入它：torch.multinomial(p, 1, generator=generator)。",
        },
    ),
    Mistake(
        "OWN_GENERATOR",
        _sample_own_generator,
        {
            "en": "The function makes a generator of its own (torch.Generator().manual_seed(...)) and ignores the "
            "one it is given, so every call draws the same characters whatever the caller's generator. Draw with "
            "`generator`, the argument.",
            "zh": "函数自己新建了一个生成器（torch.Generator().manual_seed(...)），而没有用传进来的那个，"
            "于是不管调用者给的是什么生成器，每次抽到的字符都一样。应使用参数 `generator` 来采样。",
        },
    ),
    Mistake(
        "TEMPERATURE_MULTIPLIED",
        _sample_temperature_multiplied,
        {
            "en": "The logits are multiplied by the temperature instead of divided by it, so a temperature below 1 "
            "flattens the distribution and one above 1 sharpens it, the opposite of what it means. Sample from "
            "softmax(logits / temperature).",
            "zh": "logits 乘上了温度，而不是除以温度，于是温度低于 1 时分布反而更平，高于 1 时反而更尖，"
            "与温度的含义正好相反。应从 softmax(logits / temperature) 中采样。",
        },
    ),
    Mistake(
        "TOP_K_IGNORED",
        _sample_top_k_ignored,
        {
            "en": "top_k is ignored: characters outside the k largest logits are drawn too. Hide the others before "
            "the softmax: kth = logits.topk(top_k, dim=-1).values[:, -1:], then "
            "logits.masked_fill(logits < kth, float(\"-inf\")).",
            "zh": "忽略了 top_k：最大的 k 个 logits 之外的字符也被抽到了。应在 softmax 之前遮住其余的："
            "kth = logits.topk(top_k, dim=-1).values[:, -1:]，再 logits.masked_fill(logits < kth, float(\"-inf\"))。",
        },
    ),
    Mistake(
        "TIES_DROPPED",
        _sample_ties_dropped,
        {
            "en": "Exactly k characters are kept, those whose indices topk returns, so a character whose logit "
            "ties with the k-th largest is never drawn. The rule keeps every logit ≥ the k-th largest value: "
            "compare with the value, logits < kth, not with topk's indices.",
            "zh": "正好保留了 k 个字符，即 topk 返回的那些索引，于是 logit 与第 k 大的值相等的字符永远抽不到。"
            "规则是保留所有 ≥ 第 k 大值的 logit：应与这个值比较（logits < kth），而不是用 topk 返回的索引。",
        },
    ),
    Mistake(
        "KTH_DROPPED",
        _sample_kth_dropped,
        {
            "en": "The k-th largest logit itself is hidden (logits <= kth), so only k − 1 characters keep a "
            "chance, and with top_k = 1 none does. Hide only the smaller ones: logits < kth.",
            "zh": "第 k 大的那个 logit 本身也被遮住了（logits <= kth），于是只有 k − 1 个字符还有机会被抽到，"
            "top_k = 1 时一个都没有。只应遮住比它小的：logits < kth。",
        },
    ),
    Mistake(
        "NO_GREEDY",
        _sample_no_greedy,
        {
            "en": "Temperature 0 is divided by: logits / 0 gives infinities and the softmax NaN. Temperature 0 "
            "means no sampling at all: return logits.argmax(dim=-1) (after top-k, which changes nothing there).",
            "zh": "用 0 做了除数：logits / 0 得到无穷大，softmax 就成了 NaN。温度为 0 的意思是根本不采样："
            "直接返回 logits.argmax(dim=-1)（在 top-k 之后做，对结果没有影响）。",
        },
    ),
    Mistake(
        "ALWAYS_GREEDY",
        _sample_always_greedy,
        {
            "en": "The most likely character is returned at every temperature: that is temperature 0 only. Above "
            "0, draw from softmax(logits / temperature) with torch.multinomial(p, 1, generator=generator).",
            "zh": "无论温度是多少都返回最可能的字符：那只是温度为 0 的情形。温度大于 0 时，"
            "应使用 torch.multinomial(p, 1, generator=generator) 从 softmax(logits / temperature) 中采样。",
        },
    ),
    Mistake(
        "KEEPS_SAMPLE_AXIS",
        _sample_keeps_axis,
        {
            "en": "The result has shape (B, 1), as torch.multinomial(p, 1) returns it. The exercise asks for one "
            "character per row, shape (B,): take drawn[:, 0] (or drawn.squeeze(-1)).",
            "zh": "结果的形状是 (B, 1)，也就是 torch.multinomial(p, 1) 返回的形状。本练习要的是每行一个字符，"
            "形状为 (B,)：取 drawn[:, 0]（或 drawn.squeeze(-1)）。",
        },
    ),
)


register(
    Exercise(
        id="10.sample_next",
        reference=_sample_reference,
        cases=_sample_cases,
        hidden=_hidden_sample_cases,
        forbidden=("course_utils.gpt.sample_next", "course_utils.gpt._draw"),
        mistakes=_SAMPLE_MISTAKES,
    )
)


# ----------------------------------------------------------------------------- 10.generate_cached
# model a gpt.GPT (eval), prompt (B, P) int64, new_tokens -> (B, new_tokens) int64: greedy, one KVCache
# per block, the prompt's window prefilled once, one token a step; past the context, fresh caches
# prefilled with the last context // 2 tokens when the next token would not fit (gpt.window_start).


def _as_model(model):
    return objects.gpt_model(model) if isinstance(model, dict) else model


def _gpt_case(g, B, P, new_tokens, vocab=11, context=8, d_model=16, heads=2, layers=2, first_differs=False):
    """A model, a prompt and a number of tokens to generate, where greedy generation is a fair test: every
    step's two largest logits at least 0.002 apart (a thousand times what the order of float32 sums can
    move), and no row repeating one or two characters (with tied weights and a small model, the input
    character tends to win: a small embedding and strong blocks make the text depend on the window).
    `first_differs`: the prefill's first and last positions also predict different characters in some row."""
    config = gpt.GPTConfig(vocab, context=context, d_model=d_model, heads=heads, layers=layers)
    structure = gpt.make_gpt(vocab, context=context, d_model=d_model, heads=heads, layers=layers)
    while True:
        data = objects.gpt_data_of(config, _parameters(g, structure, embedding=0.3, gain=3.0))
        prompt = torch.randint(vocab, (B, P), generator=g)
        model = objects.gpt_model(data)
        with torch.no_grad():
            chosen, logits = model.generate(prompt, new_tokens, temperature=0, cache=False)
        top = logits.topk(2, dim=-1).values
        varied = all(len(set(row.tolist())) >= min(3, new_tokens) for row in chosen)
        if first_differs:
            with torch.no_grad():
                prefill = model(prompt[:, gpt.window_start(P, context, context // 2):])
            varied = varied and bool((prefill[:, 0].argmax(-1) != prefill[:, -1].argmax(-1)).any())
        if float((top[..., 0] - top[..., 1]).min()) > 0.002 and varied:
            return data, prompt, new_tokens


def _generate_cases(generator):
    # (B, P, new_tokens, sizes). First a prompt of 3 and 14 new tokens with context 8: the window jumps
    # twice and every mistake shows; then a prompt that fills the context, one longer than it, a single
    # new token, one layer with context 6 and several jumps, a generation that stays within the context.
    g = generator
    return [
        _gpt_case(g, 2, 3, 14, first_differs=True),
        _gpt_case(g, 2, 8, 5),
        _gpt_case(g, 1, 12, 6),
        _gpt_case(g, 2, 4, 1),
        _gpt_case(g, 1, 2, 20, vocab=7, context=6, layers=1),
        _gpt_case(g, 2, 2, 5),
    ]


def _hidden_generate_cases(generator):
    """The grader's: sizes drawn from its generator; whatever the draws, one generation that runs past
    the context from a short prompt whose first and last positions predict different characters, and
    one that stays within the context, and one of a single new token (the prefill alone: where a
    recomputation feeds what the cache does, so that NO_CACHE is told by the rest)."""
    g, cases = generator, []
    for number in range(5):
        context = _draw(g, 5, 10)
        prompt = _draw(g, 2 if number == 0 else 1, 3) if number < 2 else _draw(g, 1, 2 * context)
        new = _draw(g, context + 2, 2 * context + 4) if number == 0 else \
            _draw(g, 2, context - prompt) if number == 1 else 1 if number == 4 else _draw(g, 1, 2 * context)
        heads = _draw(g, 1, 2)
        cases.append(_gpt_case(g, _draw(g, 1, 2), prompt, new, vocab=_draw(g, 5, 16), context=context,
                               d_model=8 * heads, heads=heads, layers=_draw(g, 1, 2), first_differs=number == 0))
    return cases


@torch.no_grad()
def _generate(model, prompt, new_tokens, *, cache=True, keep=None, position_shift=0, jump="fresh",
              shared_cache=False, prefill_row=-1, with_prompt=False):
    """Greedy generation with one KVCache per block, written out, with one of the slips its keywords name."""
    model = _as_model(model)
    C = model.config.context
    keep = max(1, C // 2) if keep is None else keep
    layers = len(model.blocks)

    def fresh():
        return [KVCache()] * layers if shared_cache else [KVCache() for _ in range(layers)]

    tokens, chosen = prompt, []
    start = gpt.window_start(prompt.shape[1], C, keep)
    caches = fresh()
    step = model(tokens[:, start:], start=0, caches=caches)[:, prefill_row]  # the prefill: (B, V)
    for i in range(new_tokens):
        following = step.argmax(dim=-1)  # (B,)
        chosen.append(following)
        if i == new_tokens - 1:
            break
        tokens = torch.cat([tokens, following[:, None]], dim=1)
        n = tokens.shape[1]
        now = gpt.window_start(n, C, keep)
        if not cache:  # the whole window again, every step
            step = model(tokens[:, now:])[:, -1]
        elif now == start:  # one cached step: the new token at its place in the window
            step = model(following[:, None], start=n - 1 - start + position_shift, caches=caches)[:, -1]
        elif jump == "fresh":
            start, caches = now, fresh()
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
        elif jump == "last_only":  # fresh caches, but only the newest token fed again
            start, caches = n - 1, fresh()
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
        else:  # "stale": the window's text fed again into the caches that hold the old one
            start = now
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
    generated = torch.stack(chosen, dim=1)  # (B, new_tokens)
    return torch.cat([prompt, generated], dim=1) if with_prompt else generated


def _generate_reference(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens)


def _generate_no_cache(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, cache=False)


def _generate_returns_prompt(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, with_prompt=True)


def _generate_shared_cache(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, shared_cache=True)


def _generate_position_off_by_one(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, position_shift=-1)


def _generate_stale_cache(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, jump="stale")


def _generate_forgets_window(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, jump="last_only")


def _generate_first_logits(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, prefill_row=0)


def _generate_keeps_too_much(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens, keep=_as_model(model).config.context - 1)


_GENERATE_MISTAKES = (
    Mistake(
        "NO_CACHE",
        _generate_no_cache,
        {
            "en": "The tokens are right, but each step feeds the whole window through the model again, as "
            "recomputation does: the caches are never used. Prefill the window's text once with "
            "model(text, start=0, caches=caches), then feed only the new token each step, "
            "model(token[:, None], start=position, caches=caches).",
            "zh": "生成的词元是对的，但每一步都把整个窗口重新送进了模型，和完全重新计算一样：缓存根本没有用上。"
            "应先用 model(text, start=0, caches=caches) 把窗口内的文本预填充一次，之后每步只送入新词元："
            "model(token[:, None], start=position, caches=caches)。",
        },
    ),
    Mistake(
        "RETURNS_PROMPT",
        _generate_returns_prompt,
        {
            "en": "The result holds the prompt and the new tokens, (B, P + new_tokens). Return the new tokens "
            "only, shape (B, new_tokens).",
            "zh": "返回值里既有提示又有新词元，形状为 (B, P + new_tokens)。只应返回新生成的词元，形状为 (B, new_tokens)。",
        },
    ),
    Mistake(
        "SHARED_CACHE",
        _generate_shared_cache,
        {
            "en": "Every block gets the same KVCache object ([KVCache()] * layers repeats one object), so the "
            "blocks' keys and values pile up in one cache. Make one cache per block: "
            "[KVCache() for _ in model.blocks].",
            "zh": "所有块用的是同一个 KVCache 对象（[KVCache()] * layers 只是把一个对象重复了几次），"
            "各块的键和值都堆进了同一个缓存。应为每个块各建一个缓存：[KVCache() for _ in model.blocks]。",
        },
    ),
    Mistake(
        "POSITION_OFF_BY_ONE",
        _generate_position_off_by_one,
        {
            "en": "The new token is fed one position too early, at the position of the token before it: its "
            "position is the number of tokens the caches hold before it: its index in the text minus the window's "
            "start, n − 1 − start for the newest of n tokens. With learned positions the model reads it with the wrong position's "
            "vector.",
            "zh": "新词元送入的位置早了一位，用的是它前一个词元的位置：它的位置是它之前缓存里已有的词元数，"
            "即它在文本中的索引减去窗口的起点，n 个词元中最新的那个是 n − 1 − start。使用可学习位置编码时，"
            "模型就会用错误位置的向量来读它。",
        },
    ),
    Mistake(
        "STALE_CACHE",
        _generate_stale_cache,
        {
            "en": "When the window jumps, its text is fed into the caches that still hold the old window, so the "
            "new queries also see keys of positions that are no longer in the window. Start fresh caches at "
            "each jump, then prefill them with the window's text.",
            "zh": "窗口跳动时，新窗口的文本被送进了仍存着旧窗口的缓存，于是新的查询还看到了已经不在窗口里的位置的键。"
            "每次跳动都要新建缓存，再用窗口内的文本预填充。",
        },
    ),
    Mistake(
        "FORGETS_WINDOW",
        _generate_forgets_window,
        {
            "en": "When the next token no longer fits, the fresh caches are prefilled with the newest token only: "
            "the model forgets everything before it. Keep the last context // 2 tokens: "
            "start = gpt.window_start(length, context, context // 2), then prefill tokens[:, start:].",
            "zh": "下一个词元放不下时，新建的缓存只预填充了最新的那个词元：模型把它之前的一切都忘了。"
            "应保留最后 context // 2 个词元：start = gpt.window_start(length, context, context // 2)，"
            "再预填充 tokens[:, start:]。",
        },
    ),
    Mistake(
        "FIRST_POSITION_LOGITS",
        _generate_first_logits,
        {
            "en": "The first new token is chosen from the prefill's logits at position 0, which predict the "
            "prompt's second character. The next token is predicted by the last position: logits[:, -1].",
            "zh": "第一个新词元是根据预填充输出中位置 0 的 logits 选的，而它预测的是提示的第二个字符。"
            "下一个词元由最后一个位置预测：logits[:, -1]。",
        },
    ),
    Mistake(
        "KEEPS_TOO_MUCH",
        _generate_keeps_too_much,
        {
            "en": "When the window is full it restarts with the last context − 1 tokens, so it is full again "
            "after one step and the model re-reads almost the whole window every other step. The rule keeps "
            "context // 2: gpt.window_start(length, context, context // 2).",
            "zh": "窗口满了之后从最后 context − 1 个词元重新开始，于是一步之后又满了，模型几乎每隔一步就要重读整个窗口。"
            "规则是保留 context // 2 个：gpt.window_start(length, context, context // 2)。",
        },
    ),
)


register(
    Exercise(
        id="10.generate_cached",
        reference=_generate_reference,
        cases=_generate_cases,
        hidden=_hidden_generate_cases,
        forbidden=("course_utils.gpt.GPT.generate",),
        mistakes=_GENERATE_MISTAKES,
    )
)
