# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# # A small GPT from your own parts
#
# Every piece of a model that writes text is now on the table: scores and the softmax (lesson 01),
# the causal mask (02), multi-head attention (04), the pre-norm block with its residuals and MLP (06),
# the KV cache (07), FlashAttention's tiles (08) and kernels (09). This lesson puts them together into
# a decoder-only Transformer that reads characters and predicts the next one: a small GPT. The English
# lesson trains it on Shakespeare's plays; the Chinese lesson on 36,166 regulated Tang poems. One
# argument, `CORPUS` in the next cell, switches between them.
#
# In this lesson you will
#
# 1. turn a text into ids and batches of windows, and compute the losses any model must beat: the
#    unigram and the bigram;
# 2. write the model's parts yourself: the causal decoder block, the language-model loss, sampling with
#    temperature and top-k, and generation with the KV cache, each checked like the course's other
#    exercises;
# 3. train a tiny model live until it beats the bigram, then load the course's trained model and read
#    its samples and its loss curve;
# 4. swap the attention inside that model (lesson 01's, PyTorch's fused kernel, lesson 08's tiles,
#    lesson 09's kernel on a GPU) and see the same outputs at different speeds;
# 5. count how many of the Tang model's sampled poems are well formed, and look at what the heads
#    learned: attention maps on a line of a play and on a poem, and a measurement of a couplet's
#    parallelism;
# 6. play with temperature and top-k against the next-character distribution.
#
# There are four exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="88648af9af"
# # 用自己的零件搭一个小 GPT
#
# 写文字的模型需要的每个零件，现在都已经摆在桌上了：分数和 softmax（第 01 课）、因果掩码（第 02 课）、多头注意力（第 04 课）、带残差和 MLP 的前归一化块（第 06 课）、KV 缓存（第 07 课）、FlashAttention 的分块（第 08 课）和核函数（第 09 课）。本课把它们组装成一个读入字符、预测下一个字符的仅解码器 Transformer：一个小 GPT。英文版在莎士比亚的剧本上训练它；中文版在 36,166 首唐代格律诗上训练。下一个单元里的参数 `CORPUS` 可以在两者之间切换。
#
# 本课你将：
#
# 1. 把文本变成 id 和一批批窗口，并算出任何模型都必须超过的两个损失：一元模型和二元模型；
# 2. 亲手写出模型的各个零件：因果解码器块、语言模型损失、带温度和 top-k 的采样、用 KV 缓存生成，每个都像课程里的其他练习一样接受检查；
# 3. 现场训练一个很小的模型，直到它超过二元模型；再载入课程训练好的模型，看它写出的文字和它的损失曲线；
# 4. 在这个模型里替换注意力的实现（第 01 课的、PyTorch 的融合核函数、第 08 课的分块、有 GPU 时第 09 课的核函数），看到相同的输出和不同的速度；
# 5. 数一数唐诗模型采样出的诗有多少格式正确，再看看各个头学到了什么：一行剧本和一首诗上的注意力图，以及对一联诗对仗的测量；
# 6. 用温度和 top-k 摆弄下一个字符的概率分布。
#
# 本课共有四道练习，每道练习后面都跟着一个检查单元。

# %%
import copy
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, gpt, measured, pretrained, setup, train_gpt, verse
from course_utils import corpus as corpora
from course_utils.attention import scaled_dot_product_attention
from course_utils.decoding import KVCache
from course_utils.viz import heatmap
from course_utils.widgets import next_character_explorer

setup(lang="en")
# lang: en
CORPUS = "shakespeare"  # the lesson's text: "tang" for the Tang poems (the Chinese lesson's)
# lang: zh
CORPUS = "tang"  # 本课的文本：改成 "shakespeare" 就换成莎士比亚（英文版用的）
# lang: end
# lang: en
PROMPT = {"shakespeare": "ROMEO:\n", "tang": "春"}[CORPUS]  # what the samples start from
# lang: zh
PROMPT = {"shakespeare": "ROMEO:\n", "tang": "春"}[CORPUS]  # 采样从这段文字开始
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. Characters, ids and windows
#
# A character model sees a text as a sequence of ids: the distinct characters, sorted, numbered
# $0 \dots V - 1$. Shakespeare's plays use $V = 65$ characters; the Tang poems $V = 6{,}656$. The
# corpus keeps a fixed split: the first 90 % for training ("train"), the rest for measuring ("val"),
# cut at a blank line so that validation starts with a whole speech or a whole poem.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2963f8cf77"
# ## 1. 字符、id 和窗口
#
# 字符级模型把文本看成一个 id 序列：把出现过的字符排好序，编号为 $0 \dots V - 1$。莎士比亚的剧本用到 $V = 65$ 个字符；唐诗用到 $V = 6{,}656$ 个。语料的划分是固定的：前 90 % 用来训练（"train"），其余的用来测量（"val"），切分点落在空行上，这样验证集从一整段台词或一整首诗开始。

# %%
corpus = corpora.load(CORPUS)
print(corpus)
print(corpus.text[:120])
line = corpus.text[:24]
ids = corpus.encode(line)  # (24,) int64
print(ids)
# lang: en
claim("decoding the ids gives the text back", corpus.decode(ids) == line)
# lang: zh
claim("把 id 解码回去，得到的就是原文", corpus.decode(ids) == line)
# lang: end

# %% [markdown] tags=["lang-en"]
# A model learns from **windows**: $T$ consecutive characters at a random place, and the same window
# shifted by one character. Position $t$ of the window must predict character $t + 1$: one window of
# $T$ characters is $T$ predictions at once, each seeing only what comes before it (lesson 02's causal
# mask makes sure of that). `corpus.batch` draws $B$ windows from a seeded generator:

# %% [markdown] tags=["lang-zh"] en_hash="1a1008472e"
# 模型从**窗口**中学习：在随机位置取 $T$ 个连续字符，再取把它右移一个字符的窗口。窗口的位置 $t$ 要预测第 $t + 1$ 个字符：一个 $T$ 个字符的窗口一次就提供 $T$ 个预测，每个预测只看得到它前面的内容（由第 02 课的因果掩码保证）。`corpus.batch` 用给定种子的随机数生成器抽取 $B$ 个窗口：

# %%
x, y = corpus.batch("train", 4, 16, torch.Generator().manual_seed(0))  # (B, T) = (4, 16)
for row, following in zip(x[:2], y[:2]):
    print(repr(corpus.decode(row)), "->", repr(corpus.decode(following)))
# lang: en
claim("the targets are the inputs one character on: y[:, :-1] equals x[:, 1:]", torch.equal(y[:, :-1], x[:, 1:]))
# lang: zh
claim("目标就是把输入右移一个字符：y[:, :-1] 等于 x[:, 1:]", torch.equal(y[:, :-1], x[:, 1:]))
# lang: end

# %% [markdown] tags=["lang-en"]
# The picture below is one window: the row on top is what the model reads, the row below what each
# position must predict.

# %% [markdown] tags=["lang-zh"] en_hash="809bee4b19"
# 下图是一个窗口：上面一行是模型读入的内容，下面一行是每个位置要预测的字符。

# %%
fig, ax = plt.subplots(figsize=(8, 1.6))
for t, (a, b) in enumerate(zip(corpus.decode(x[0]), corpus.decode(y[0]))):
    for row, character in ((1, a), (0, b)):
        ax.add_patch(plt.Rectangle((t, row), 0.9, 0.8, fill=False))
        ax.text(t + 0.45, row + 0.4, {"\n": "⏎", " ": "␣"}.get(character, character), ha="center", va="center")
    ax.annotate("", (t + 0.45, 0.8), (t + 0.45, 1.0), arrowprops={"arrowstyle": "->", "color": "0.5"})
ax.set_xlim(-2.6, 16)
ax.set_ylim(-0.1, 1.9)
ax.axis("off")
# lang: en
ax.text(-0.2, 1.4, "input x", ha="right", va="center")
ax.text(-0.2, 0.4, "target y", ha="right", va="center")
# lang: zh
ax.text(-0.2, 1.4, "输入 x", ha="right", va="center")
ax.text(-0.2, 0.4, "目标 y", ha="right", va="center")
# lang: end
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. The losses to beat: unigram and bigram
#
# How good is a prediction? The **loss** is the cross-entropy: the mean of $-\ln p(\text{the right
# character})$ over every position, in nats per character. Three models set the scale before any
# training:
#
# - **uniform**, every character equally likely: $\ln V$, what an untrained model scores;
# - **unigram**, each character from its frequency in "train", ignoring what came before;
# - **bigram**, each character from the one before it: a table of how often each pair follows in
#   "train" (add-α smoothed, so that an unseen pair still gets a little probability).
#
# The bigram is the bar: a Transformer that does not beat it has learned nothing a table of pairs
# does not know. All three are measured on "val".

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c9851820b6"
# ## 2. 要超过的损失：一元模型和二元模型
#
# 预测得好不好？**损失**用交叉熵衡量：对每个位置取 $-\ln p(\text{正确的字符})$，再求平均，单位是每字符的奈特（nat）。在任何训练之前，先由三个模型给出衡量的尺度：
#
# - **均匀分布**，每个字符一样可能：$\ln V$，未经训练的模型就是这个水平；
# - **一元模型**，每个字符按它在 "train" 中出现的频率预测，不管前面是什么；
# - **二元模型**，每个字符按它前一个字符来预测：一张统计 "train" 中每对相邻字符出现次数的表（做了加 α 平滑，没见过的字符对也分到一点概率）。
#
# 二元模型就是门槛：一个超不过它的 Transformer，学到的东西不比一张字符对的表多。三个损失都在 "val" 上测量。

# %%
baselines = corpus.baselines()
uniform = corpora.uniform_loss(corpus.vocab_size)
print({"uniform": round(uniform, 3), "unigram": round(baselines["unigram"], 3), "bigram": round(baselines["bigram"], 3)})
# lang: en
claim("each model that knows more scores lower: uniform > unigram > bigram",
      uniform > baselines["unigram"] > baselines["bigram"])
# lang: zh
claim("知道得越多，损失越低：均匀分布 > 一元模型 > 二元模型", uniform > baselines["unigram"] > baselines["bigram"])
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. The decoder block
#
# The model is GPT-2's shape at a small size (`course_utils.gpt`): each character's embedding plus a
# learned position embedding, then a stack of **pre-norm decoder blocks**, a last LayerNorm, and a
# read-out to $V$ logits that shares its matrix with the embedding. Each block is
#
# $$x \leftarrow x + \operatorname{Attention}(\operatorname{LN}_1(x)), \qquad
#   x \leftarrow x + \operatorname{FFN}(\operatorname{LN}_2(x)),$$
#
# with masked multi-head self-attention (each position attends to itself and the positions before it)
# and lesson 06's position-wise MLP. A `gpt.Block` holds exactly these weights: `block.norm1`,
# `block.attention.mha.q_proj / k_proj / v_proj / out_proj` (lesson 04's fused projections, no biases),
# `block.norm2`, `block.feed_forward`.
#
# ![A decoder-only GPT: characters to ids, token and position embeddings, N pre-norm blocks (masked multi-head self-attention and an MLP, each added to the residual stream), a final LayerNorm, the read-out tied to the embedding, the next-character distribution; beside it, generation with one KV cache per block](../../images/10_gpt_en.svg)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="8cf58afad1"
# ## 3. 解码器块
#
# 模型是缩小版的 GPT-2（`course_utils.gpt`）：每个字符的嵌入加上可学习的位置嵌入，然后是一摞**前归一化的解码器块**，最后一个 LayerNorm，以及输出 $V$ 个 logits 的读出层（它与嵌入共用一个矩阵）。每个块是
#
# $$x \leftarrow x + \operatorname{Attention}(\operatorname{LN}_1(x)), \qquad
#   x \leftarrow x + \operatorname{FFN}(\operatorname{LN}_2(x)),$$
#
# 其中注意力是带掩码的多头自注意力（每个位置只关注自己和它之前的位置），FFN 是第 06 课的逐位置 MLP。一个 `gpt.Block` 恰好存着这些权重：`block.norm1`、`block.attention.mha.q_proj / k_proj / v_proj / out_proj`（第 04 课的融合投影，没有偏置）、`block.norm2`、`block.feed_forward`。
#
# ![仅解码器的 GPT：字符变成编号，词元嵌入加位置嵌入，N 个前归一化的块（带掩码的多头自注意力和 MLP，各自的输出加回残差流），最后的层归一化，与嵌入共享权重的读出层，下一个字符的分布；旁边是生成时的情形：每个块一个 KV 缓存](../../images/10_gpt_zh.svg)

# %%
block = gpt.make_gpt(corpus.vocab_size, seed=0, context=16, d_model=32, heads=4, layers=1).blocks[0]
x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))  # (B, L, E)
out, _ = block(x, torch.arange(16))  # (B, L, E)
print(block.attention.heads, tuple(block.attention.mha.q_proj.weight.shape), tuple(out.shape))

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the causal decoder block
#
# Write `causal_block(x, block)`: x is $(B, L, E)$ float, `block` a `gpt.Block` with learned positions.
# With the block's own weights, compute
#
# 1. `h = block.norm1(x)`;
# 2. the queries, keys and values `block.attention.mha.q_proj(h)`, `k_proj(h)`, `v_proj(h)`, each split
#    into `block.attention.heads` heads of $d = E / H$ features, $(B, H, L, d)$;
# 3. causal attention: position $i$ attends to positions $0 \dots i$, with your lesson-01 attention
#    (`scaled_dot_product_attention` from `course_utils.attention`, imported above) and a causal keep
#    mask (build it yourself, or with `course_utils.masks`);
# 4. the heads merged back to $(B, L, E)$, then `block.attention.mha.out_proj`, added to x;
# 5. `x + block.feed_forward(block.norm2(x))`, returned, $(B, L, E)$.
#
# The check compares it with `block(x, torch.arange(L))[0]`, the values and the gradients with respect
# to x and every parameter. It refuses what would do the work for you: `Block.forward`,
# `CausalSelfAttention.forward`, `gpt.causal_attention` (and `gpt._attend`, which it calls), PyTorch's fused
# `torch.nn.functional.scaled_dot_product_attention`, `nn.MultiheadAttention.forward` and lesson 04's
# `FusedMultiheadAttention.forward` (the projections' own `nn.Linear` calls are fine).

# %% [markdown] tags=["lang-zh"] en_hash="635b6b08f9"
# ### 练习 1：因果解码器块
#
# 写出 `causal_block(x, block)`：x 是形状为 $(B, L, E)$ 的浮点张量，`block` 是使用可学习位置嵌入的 `gpt.Block`。用这个块自己的权重依次计算：
#
# 1. `h = block.norm1(x)`；
# 2. 查询、键和值：`block.attention.mha.q_proj(h)`、`k_proj(h)`、`v_proj(h)`，各自拆成 `block.attention.heads` 个头，每个头 $d = E / H$ 个特征，形状 $(B, H, L, d)$；
# 3. 因果注意力：位置 $i$ 关注位置 $0 \dots i$，用你在第 01 课写的注意力（上面已导入的 `course_utils.attention` 中的 `scaled_dot_product_attention`）和一个因果保留掩码（自己构造，或用 `course_utils.masks`）；
# 4. 把各个头合并回 $(B, L, E)$，经过 `block.attention.mha.out_proj`，加到 x 上；
# 5. 返回 `x + block.feed_forward(block.norm2(x))`，形状 $(B, L, E)$。
#
# 检查会把它与 `block(x, torch.arange(L))[0]` 对照：比较数值，以及对 x 和每个参数的梯度。能替你完成这项工作的都不接受：`Block.forward`、`CausalSelfAttention.forward`、`gpt.causal_attention`（以及它调用的 `gpt._attend`）、PyTorch 的融合注意力 `torch.nn.functional.scaled_dot_product_attention`、`nn.MultiheadAttention.forward` 以及第 04 课的 `FusedMultiheadAttention.forward`（投影本身的 `nn.Linear` 调用可以用）。

# %% tags=["exercise"] exercise="10.causal_block"
def causal_block(x, block):
    # lang: en
    """One pre-norm decoder block with `block`'s weights: x (B, L, E) -> (B, L, E)."""
    # lang: zh
    """用 `block` 的权重算一个前归一化解码器块：x (B, L, E) -> (B, L, E)。"""
    # lang: end
    ### BEGIN SOLUTION
    B, L, E = x.shape
    H, mha = block.attention.heads, block.attention.mha
    h = block.norm1(x)  # (B, L, E)
    q = mha.q_proj(h).view(B, L, H, E // H).transpose(1, 2)  # (B, H, L, d)
    k = mha.k_proj(h).view(B, L, H, E // H).transpose(1, 2)
    v = mha.v_proj(h).view(B, L, H, E // H).transpose(1, 2)
    # lang: en
    keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (L, L): query i sees keys 0 … i
    # lang: zh
    keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (L, L)：查询 i 看得到键 0 … i
    # lang: end
    attended, _ = scaled_dot_product_attention(q, k, v, keep_mask=keep)  # (B, H, L, d)
    x = x + mha.out_proj(attended.transpose(1, 2).reshape(B, L, E))  # (B, L, E)
    return x + block.feed_forward(block.norm2(x))
    ### END SOLUTION


# %%
check("10.causal_block", causal_block)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The language-model loss
#
# The model returns logits $(B, T, V)$ for tokens $(B, T)$: at each position, a score for every
# character. Position $t$ predicts token $t + 1$, so the loss pairs `logits[:, t]` with
# `tokens[:, t + 1]` for $t = 0 \dots T - 2$ (the last position has nothing to predict inside the
# window), flattens them to rows, and takes the mean cross-entropy. Three mistakes are common: no shift
# (each position "predicts" the character it already reads, and the loss falls to zero while the model
# learns nothing); a softmax before `F.cross_entropy`, which takes logits and applies its own
# log-softmax; and counting padding, the filler that makes rows of different lengths into one tensor.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="59b9ce2479"
# ## 4. 语言模型损失
#
# 模型对词元 $(B, T)$ 返回 logits $(B, T, V)$：每个位置上每个字符一个分数。位置 $t$ 预测第 $t + 1$ 个词元，所以损失把 `logits[:, t]` 和 `tokens[:, t + 1]` 配成一对（$t = 0 \dots T - 2$；最后一个位置在窗口内没有要预测的东西），展平成一行行，再取交叉熵的平均。常见的错误有三个：不移位（每个位置去"预测"它已经读到的字符，损失降到零，模型却什么也没学到）；在 `F.cross_entropy` 之前做 softmax，而它接收的是 logits，自己会做 log-softmax；以及把填充算进去，填充是为了把长短不一的行拼成一个张量而补上的占位符。

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: the language-model loss
#
# Write `lm_loss(logits, tokens, pad_id=None)`: logits $(B, T, V)$ float, the model's output on tokens
# $(B, T)$ int64. Return the mean cross-entropy of predicting `tokens[:, t + 1]` from `logits[:, t]`
# for $t = 0 \dots T - 2$, over the positions whose target is not `pad_id` (`pad_id=None`: every
# position), a 0-dim tensor. The mean is over all counted targets of the batch together, not a mean of
# each row's mean (the two differ when rows hold different numbers of padding). You may use
# `F.cross_entropy` or `log_softmax`. The check compares the value and the gradient with respect to
# the logits, and names the mistakes: no shift, shifted the wrong way, a softmax (or a second
# log-softmax) before the cross-entropy, padding counted, a sum instead of a mean, a mean of rows.

# %% [markdown] tags=["lang-zh"] en_hash="24499b5565"
# ### 练习 2：语言模型损失
#
# 写出 `lm_loss(logits, tokens, pad_id=None)`：logits 是形状为 $(B, T, V)$ 的浮点张量，即模型在词元 tokens $(B, T)$（int64）上的输出。对 $t = 0 \dots T - 2$，用 `logits[:, t]` 预测 `tokens[:, t + 1]`，在目标不是 `pad_id` 的位置上（`pad_id=None`：所有位置）求交叉熵的平均，返回 0 维张量。平均是对整批中所有计入的目标一起求的，而不是先对每行求平均再平均（各行填充数目不同时，两者不一样）。可以用 `F.cross_entropy` 或 `log_softmax`。检查会比较数值和对 logits 的梯度，并指出这些错误：没有移位、移错了方向、在交叉熵之前做了 softmax（或又做了一次 log-softmax）、把填充算了进去、求和而不是求平均、对各行的平均再求平均。

# %% tags=["exercise"] exercise="10.lm_loss"
def lm_loss(logits, tokens, pad_id=None):
    # lang: en
    """Mean cross-entropy of tokens[:, t + 1] under logits[:, t]; targets equal to pad_id not counted."""
    # lang: zh
    """用 logits[:, t] 预测 tokens[:, t + 1] 的平均交叉熵；等于 pad_id 的目标不计入。"""
    # lang: end
    ### BEGIN SOLUTION
    V = logits.shape[-1]
    # lang: en
    predictions = logits[:, :-1].reshape(-1, V)  # (B·(T − 1), V): position t predicts t + 1
    # lang: zh
    predictions = logits[:, :-1].reshape(-1, V)  # (B·(T − 1), V)：位置 t 预测 t + 1
    # lang: end
    targets = tokens[:, 1:].reshape(-1)  # (B·(T − 1),)
    if pad_id is None:
        return F.cross_entropy(predictions, targets)
    # lang: en
    return F.cross_entropy(predictions, targets, ignore_index=pad_id)  # the mean over the counted targets
    # lang: zh
    return F.cross_entropy(predictions, targets, ignore_index=pad_id)  # 对计入的目标求平均
    # lang: end
    ### END SOLUTION


# %%
check("10.lm_loss", lm_loss)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Sampling: temperature and top-k
#
# The last position's logits give a distribution over the next character. **Greedy** decoding takes
# the most likely one, and repeats itself soon. **Sampling** draws from the softmax; dividing the
# logits by a **temperature** first makes the distribution sharper (below 1) or flatter (above 1), and
# **top-k** gives a chance only to the $k$ most likely characters, so that the long tail of unlikely
# ones never gets drawn. A seeded `torch.Generator` makes the draws repeatable.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="40f092dc0d"
# ## 5. 采样：温度和 top-k
#
# 最后一个位置的 logits 给出下一个字符的概率分布。**贪心**解码取最可能的那个，很快就会开始重复自己。**采样**则从 softmax 中抽取；先把 logits 除以**温度**，分布会变尖（温度小于 1）或变平（大于 1）；**top-k** 只让最可能的 $k$ 个字符有机会，长长的一串不太可能的字符就永远不会被抽到。用给定种子的 `torch.Generator` 可以让抽取结果可以重现。

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: sampling with temperature and top-k
#
# Write `sample_next(logits, temperature=1.0, top_k=None, generator=None)`: logits $(B, V)$ float;
# return one character per row, $(B,)$ int64. With `temperature=0` return the argmax of each row
# (`torch.argmax`'s choice among ties). Otherwise draw from `softmax(logits / temperature)`, restricted
# to the `top_k` largest logits when `top_k` is given (every logit equal to the $k$-th largest kept
# too), using `generator` and never the global random state. The check judges what your function
# does, not how it draws: draws only from the allowed characters, their frequencies over many draws
# within a margin of the distribution, the same draws from the same generator state, the global
# random state untouched, and temperature 0 exact. It refuses the course's own sampler,
# `gpt.sample_next` (and `gpt._draw`, which it calls).

# %% [markdown] tags=["lang-zh"] en_hash="0077839b50"
# ### 练习 3：带温度和 top-k 的采样
#
# 写出 `sample_next(logits, temperature=1.0, top_k=None, generator=None)`：logits 是形状为 $(B, V)$ 的浮点张量；每行返回一个字符，形状 $(B,)$，int64。`temperature=0` 时返回每行的 argmax（有并列时按 `torch.argmax` 的选择）。否则从 `softmax(logits / temperature)` 中抽取；给了 `top_k` 时只在最大的 `top_k` 个 logits 中抽取（等于第 $k$ 大的 logit 也都保留），只用 `generator`，绝不动全局随机状态。检查看的是你的函数做了什么，而不是它怎么抽：只抽到允许的字符；多次抽取的频率与分布的差距在容差之内；同一个生成器状态给出同样的结果；全局随机状态不变；温度为 0 时完全准确。课程自带的采样函数 `gpt.sample_next`（以及它调用的 `gpt._draw`）检查都不接受。

# %% tags=["exercise"] exercise="10.sample_next"
def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    # lang: en
    """One character per row of logits (B, V) -> (B,) int64."""
    # lang: zh
    """logits (B, V) 的每一行选一个字符 -> (B,) int64。"""
    # lang: end
    ### BEGIN SOLUTION
    if top_k is not None:
        # lang: en
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest of each row
        logits = logits.masked_fill(logits < kth, float("-inf"))  # ties with the k-th stay
        # lang: zh
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)：每行第 k 大的值
        logits = logits.masked_fill(logits < kth, float("-inf"))  # 与第 k 大并列的保留
        # lang: end
    if temperature == 0:
        return logits.argmax(dim=-1)
    probabilities = torch.softmax(logits / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probabilities, 1, generator=generator)[:, 0]  # (B,)
    ### END SOLUTION


# %%
check("10.sample_next", sample_next)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. Generation with the KV cache
#
# Lesson 07's cache carries over to the GPT unchanged: one `KVCache` per block, the prompt **prefilled**
# once, then one character per step through `model(tokens, start=position, caches=caches)`. One thing
# is new: the model knows `context` positions only ($C$; its position table has $C$ rows). When the
# next character would not fit, generation starts again from the last $C // 2$ characters: fresh
# caches, prefilled with them once, then one character a step up to $C$ again.
# `gpt.window_start(length, C, C // 2)` says where the window begins for a text of `length`
# characters. Recomputing the window at every step gives the same characters and costs a whole
# forward pass per character.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="790877ce02"
# ## 6. 用 KV 缓存生成
#
# 第 07 课的缓存原样用在 GPT 上：每个块一个 `KVCache`，提示先**预填充**一次，之后每步通过 `model(tokens, start=position, caches=caches)` 送入一个字符。只有一点是新的：模型只认识 `context` 个位置（记作 $C$；它的位置表只有 $C$ 行）。当下一个字符放不下时，生成从最后 $C // 2$ 个字符重新开始：换一组新的缓存，用这些字符预填充一次，然后再每步一个字符，直到又满 $C$ 个。`gpt.window_start(length, C, C // 2)` 给出长度为 `length` 的文本的窗口从哪里开始。每步都重新计算整个窗口，得到的字符相同，但每个字符都要付出一整次前向传播的代价。

# %% [markdown] tags=["lang-en"]
# ### Exercise 4: generation with the KV cache
#
# Write `generate_cached(model, prompt, new_tokens)`: `model` a `gpt.GPT` in eval mode, `prompt`
# $(B, P)$ int64. Generate `new_tokens` characters greedily (the argmax at each step) with one
# `KVCache` per block: prefill the window of the prompt once (`gpt.window_start(P, C, C // 2)`), then
# feed **one** new character per step through `model(tokens, start=position, caches=caches)`. When
# the next character would not fit in the context $C$, start fresh caches prefilled with the last
# $C // 2$ characters, then go on one character a step. Return the new characters, $(B, $
# `new_tokens`$)$ int64. The check compares them with
# `model.generate(prompt, new_tokens, temperature=0, cache=False)[0]`, past the context too, and counts
# the characters that go through the model: recomputing the window at every step is the mistake
# NO_CACHE. It refuses `GPT.generate`.

# %% [markdown] tags=["lang-zh"] en_hash="6d71dcf65d"
# ### 练习 4：用 KV 缓存生成
#
# 写出 `generate_cached(model, prompt, new_tokens)`：`model` 是处于 eval 模式的 `gpt.GPT`，`prompt` 的形状为 $(B, P)$，int64。用贪心解码（每步取 argmax）生成 `new_tokens` 个字符，每个块一个 `KVCache`：先把提示的窗口预填充一次（`gpt.window_start(P, C, C // 2)`），然后每步只通过 `model(tokens, start=position, caches=caches)` 送入**一个**新字符。当下一个字符在上下文长度 $C$ 里放不下时，换一组新的缓存，用最后 $C // 2$ 个字符预填充，再继续每步一个字符。返回新生成的字符，形状 $(B,$ `new_tokens`$)$，int64。检查会把结果与 `model.generate(prompt, new_tokens, temperature=0, cache=False)[0]` 对照（超出上下文长度之后也要相同），还会数一数送进模型的字符数：每步都重新计算整个窗口，就是错误 NO_CACHE。检查不接受 `GPT.generate`。

# %% tags=["exercise"] exercise="10.generate_cached"
def generate_cached(model, prompt, new_tokens):
    # lang: en
    """Greedy generation with one KVCache per block: (B, P) int64 -> (B, new_tokens) int64."""
    # lang: zh
    """每个块一个 KVCache 的贪心生成：(B, P) int64 -> (B, new_tokens) int64。"""
    # lang: end
    ### BEGIN SOLUTION
    C = model.config.context
    tokens, chosen = prompt, []
    start = gpt.window_start(prompt.shape[1], C, C // 2)
    caches = [KVCache() for _ in model.blocks]
    # lang: en
    logits = model(tokens[:, start:], start=0, caches=caches)[:, -1]  # (B, V): the prefill
    # lang: zh
    logits = model(tokens[:, start:], start=0, caches=caches)[:, -1]  # (B, V)：预填充
    # lang: end
    for i in range(new_tokens):
        following = logits.argmax(dim=-1)  # (B,)
        chosen.append(following)
        if i == new_tokens - 1:
            break
        tokens = torch.cat([tokens, following[:, None]], dim=1)
        n = tokens.shape[1]
        now = gpt.window_start(n, C, C // 2)
        # lang: en
        if now == start:  # the same window, one longer: one cached step
        # lang: zh
        if now == start:  # 同一个窗口，长了一个字符：缓存走一步
        # lang: end
            logits = model(following[:, None], start=n - 1 - start, caches=caches)[:, -1]
        # lang: en
        else:  # the window jumped: fresh caches, prefilled with its text
        # lang: zh
        else:  # 窗口跳了：换新缓存，用窗口里的文字预填充
        # lang: end
            start, caches = now, [KVCache() for _ in model.blocks]
            logits = model(tokens[:, start:], start=0, caches=caches)[:, -1]
    return torch.stack(chosen, dim=1)  # (B, new_tokens)
    ### END SOLUTION


# %%
check("10.generate_cached", generate_cached)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Training, then the trained model
#
# `course_utils.train_gpt` trains the model: windows from `corpus.batch`, the loss of section 4, AdamW
# with a warm-up and a cosine decay, the gradient's norm clipped, and the val loss measured every so
# often on fixed windows. The same script trains the course's real models on a CPU, a GPU or several
# processes under `torchrun`. Here it trains a tiny model (2 blocks, $E = 64$, context 32) for a few
# seconds, on Shakespeare in both languages: with 65 characters a step is cheap. The Tang poems'
# 6,656 characters make every step's read-out a hundred times wider, and the bigram over their pairs
# a much stronger bar, out of reach in a few seconds: the course trained its Tang model in the background
# instead, for much longer.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="1164361ea3"
# ## 7. 训练，然后是训练好的模型
#
# `course_utils.train_gpt` 负责训练：用 `corpus.batch` 取窗口，用第 4 节的损失，AdamW 加学习率预热和余弦衰减，裁剪梯度范数，每隔一段时间在固定的窗口上测一次验证损失。课程真正的模型也是用同一个脚本训练的，无论是在 CPU、GPU 上，还是在 `torchrun` 下的多个进程里。这里用它把一个很小的模型（2 个块，$E = 64$，上下文长度 32）训练几秒钟，两种语言都用莎士比亚：只有 65 个字符，每一步都很便宜。唐诗有 6,656 个字符，每一步的读出层宽了一百倍，字符对的二元模型也是高得多的门槛，几秒钟内够不着：所以课程的唐诗模型是在后台训练的，训练的时间长得多。

# %% tags=["nbval-ignore-output"]
LIVE = train_gpt.TrainConfig(corpus="shakespeare", context=32, d_model=64, heads=4, layers=2, batch=32, steps=200,
                             lr=6e-3, warmup=20, eval_every=100, eval_batches=4, device="cpu")
live = train_gpt.train(LIVE)

# %%
bigram = corpora.load("shakespeare").baselines()["bigram"]
final = live.history[-1]["val_loss"]
# lang: en
claim(f"after {LIVE.steps} steps the tiny model's val loss, {final:.2f}, is more than 0.05 below the bigram's {bigram:.2f}",
      final < bigram - 0.05)
# lang: zh
claim(f"训练 {LIVE.steps} 步之后，小模型的验证损失 {final:.2f} 比二元模型的 {bigram:.2f} 低 0.05 以上",
      final < bigram - 0.05)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# The course's own model of this corpus was trained by the same script for much longer, in the
# background, and ships with the course (`course_utils.pretrained`): the weights in float16, and how
# they were made, its **provenance**: the command, the steps, the time, the machine, the versions,
# the loss history, and the val loss measured again on the weights as shipped.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="64ba526b1c"
# 课程自己的模型用同一个脚本在后台训练了长得多的时间，随课程一起发布（`course_utils.pretrained`）：权重以 float16 存储，并附有它的**来历**：训练命令、步数、用时、机器、版本、损失的历史，以及在发布的权重上重新测得的验证损失。

# %%
model, corpus, provenance = pretrained.load(CORPUS)
# lang: en
print(f"{provenance['parameters']:,} parameters, {provenance['steps']:,} steps, {provenance['wall_time_s'] / 3600:.1f} h "
      f"on {provenance['device']} ({provenance['threads']} thread(s), world size {provenance['world_size']}), "
      f"torch {provenance['torch']}")
# lang: zh
print(f"{provenance['parameters']:,} 个参数，{provenance['steps']:,} 步，在 {provenance['device']} 上训练了 "
      f"{provenance['wall_time_s'] / 3600:.1f} 小时（{provenance['threads']} 个线程，进程数 {provenance['world_size']}），"
      f"torch {provenance['torch']}")
# lang: end
print(provenance["command"])
untrained = gpt.make_gpt(corpus.vocab_size, seed=0, **{k: v for k, v in model.config.as_dict().items() if k != "vocab"}).eval()
with torch.no_grad():
    losses = {name: train_gpt.evaluate(m, corpus, "val", 8, model.config.context, 2, torch.device("cpu"))
              for name, m in (("trained", model), ("untrained", untrained))}
print({name: round(value, 3) for name, value in losses.items()}, {"bigram": round(corpus.baselines()["bigram"], 3)})
# lang: en
claim("on windows of val the trained model's loss is below the bigram's, and the untrained one's near ln V",
      losses["trained"] < corpus.baselines()["bigram"] and abs(losses["untrained"] - uniform) < 0.1)
# lang: zh
claim("在验证集的窗口上，训练好的模型的损失低于二元模型，未训练的模型则接近 ln V",
      losses["trained"] < corpus.baselines()["bigram"] and abs(losses["untrained"] - uniform) < 0.1)
# lang: end

# %% [markdown] tags=["lang-en"]
# Its loss curve, from the provenance's history, against the baselines of section 2:

# %% [markdown] tags=["lang-zh"] en_hash="d8ea7ed039"
# 它的损失曲线（来自来历中的历史记录），与第 2 节的基线放在一起：

# %%
steps = [h["step"] for h in provenance["history"]]
fig, ax = plt.subplots(figsize=(6, 3.2))
# lang: en
ax.plot(steps, [h["train_loss"] for h in provenance["history"]], label="train (mean since the last point)")
ax.plot(steps, [h["val_loss"] for h in provenance["history"]], marker="o", label="val")
ax.axhline(corpus.baselines()["bigram"], color="0.4", linestyle="--", label="bigram")
ax.axhline(corpus.baselines()["unigram"], color="0.7", linestyle=":", label="unigram")
ax.set(xlabel="step", ylabel="loss (nats per character)")
# lang: zh
ax.plot(steps, [h["train_loss"] for h in provenance["history"]], label="训练（上一个点以来的平均）")
ax.plot(steps, [h["val_loss"] for h in provenance["history"]], marker="o", label="验证")
ax.axhline(corpus.baselines()["bigram"], color="0.4", linestyle="--", label="二元模型")
ax.axhline(corpus.baselines()["unigram"], color="0.7", linestyle=":", label="一元模型")
ax.set(xlabel="步数", ylabel="损失（每字符奈特）")
# lang: end
ax.legend()
plt.show()

# %% [markdown] tags=["lang-en"]
# Samples before and after: the untrained model of the same size, and the trained one, from the same
# prompt and the same seed (temperature 0.8, top-k 20). The untrained model draws characters nearly
# uniformly; the trained one writes in the corpus's form.

# %% [markdown] tags=["lang-zh"] en_hash="29e4672f51"
# 训练前后的样本：同样大小的未训练模型和训练好的模型，用同一个提示、同一个种子（温度 0.8，top-k 20）。未训练的模型几乎是均匀地抽字符；训练好的模型则写出了语料的样子。

# %%
prompt = corpus.encode(PROMPT)[None]  # (1, P)
for m in (untrained, model):
    written, _ = m.generate(prompt, 120, temperature=0.8, top_k=20, generator=torch.Generator().manual_seed(0))
    print(PROMPT + corpus.decode(written[0]))
    print("-" * 40)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. The same model, four attentions
#
# What runs between the projections is switchable, `model.use_attention(name)`, with the same weights:
# `"course"` is lesson 01's attention with lesson 02's mask (the whole $T \times T$ matrix of weights),
# `"sdpa"` PyTorch's fused `F.scaled_dot_product_attention`, `"tiled"` lesson 08's tiles with the
# online softmax, and `"triton"` lesson 09's kernels, compiled on a GPU (on a CPU Triton's interpreter
# would take minutes, so this cell uses them only where CUDA is present). The outputs must agree.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="09fb9ab701"
# ## 8. 同一个模型，四种注意力
#
# 投影之间运行的部分可以用 `model.use_attention(name)` 切换，权重不变：`"course"` 是第 01 课的注意力加第 02 课的掩码（完整的 $T \times T$ 权重矩阵），`"sdpa"` 是 PyTorch 融合的 `F.scaled_dot_product_attention`，`"tiled"` 是第 08 课带在线 softmax 的分块，`"triton"` 是第 09 课的核函数，在 GPU 上编译运行（在 CPU 上 Triton 的解释器要跑好几分钟，所以这个单元只在有 CUDA 的地方用它）。输出必须一致。

# %%
window, _ = corpus.batch("val", 2, model.config.context, torch.Generator().manual_seed(5))  # (2, C)
outputs = {}
with torch.no_grad():
    for name in ("course", "sdpa", "tiled"):
        outputs[name] = model.use_attention(name)(window)  # (4, C, V)
model.use_attention("course")
# lang: en
claim("'course', 'sdpa' and 'tiled' give the same logits (within 1e-4)",
      all(torch.allclose(outputs["course"], o, rtol=0, atol=1e-4) for o in outputs.values()))
# lang: zh
claim("'course'、'sdpa' 和 'tiled' 给出的 logits 相同（误差不超过 1e-4）",
      all(torch.allclose(outputs["course"], o, rtol=0, atol=1e-4) for o in outputs.values()))
# lang: end

# %% tags=["nbval-ignore-output"]
if torch.cuda.is_available():
    on_gpu = copy.deepcopy(model).cuda()
    with torch.no_grad():
        fused = on_gpu.use_attention("sdpa")(window.cuda())
        kernels = on_gpu.use_attention("triton")(window.cuda())
    # lang: en
    claim("on the GPU, lesson 09's kernels give F.sdpa's logits (within 0.05: the GPU's matrix products round)",
          torch.allclose(fused, kernels, rtol=0, atol=0.05))
    # lang: zh
    claim("在 GPU 上，第 09 课的核函数给出与 F.sdpa 相同的 logits（误差不超过 0.05：GPU 的矩阵乘法有舍入）",
          torch.allclose(fused, kernels, rtol=0, atol=0.05))
    # lang: end

# %% [markdown] tags=["lang-en"]
# And their speed here, on this CPU, one forward pass of these 2 windows (these timings change from
# run to run and machine to machine). At a context of 128 the whole matrix of weights is small, and
# lesson 08's tiles pay for their Python loop; PyTorch's fused kernel is fastest. The benchmark
# `benchmarks/bench_gpt.py` measures training steps on a GPU; its committed figures, when there are
# some, follow.

# %% [markdown] tags=["lang-zh"] en_hash="b1c4e89039"
# 再看看它们在这台 CPU 上的速度：对这 2 个窗口做一次前向传播（这些耗时每次运行、每台机器都不一样）。上下文长度为 128 时，完整的权重矩阵很小，第 08 课的分块要为它的 Python 循环付出代价；PyTorch 的融合核函数最快。基准测试 `benchmarks/bench_gpt.py` 在 GPU 上测量训练步的耗时；如果提交了它的结果，会显示在后面。

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    for name in ("course", "sdpa", "tiled"):
        model.use_attention(name)
        print(f"{name:>7}: {measured.milliseconds(lambda: model(window), repeat=2):7.1f} ms")
model.use_attention("course")
gpu = measured.load("gpt", "cuda")
print(gpu.provenance() if gpu else measured.missing("gpt"))
if gpu:
    for row in gpu.rows():
        if row.get("part") == "train_step":
            print(f"{row['model']:>7}: {row['step_ms']:7.2f} ms")

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 9. What the heads learned
#
# `model.attention_maps(tokens)` returns every head's weights, $(\text{layers}, B, H, L, L)$. First the
# Shakespeare model on a line of a play: each row is a character (the query), each column a character
# it may attend to; above the diagonal is the future, masked.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="03f8cf042f"
# ## 9. 各个头学到了什么
#
# `model.attention_maps(tokens)` 返回每个头的权重，形状为 $(\text{层数}, B, H, L, L)$。先看莎士比亚模型在一行剧本上的情形：每一行是一个字符（查询），每一列是它可以关注的一个字符；对角线以上是未来，被掩码遮住。

# %%
plays_model, plays, _ = pretrained.load("shakespeare") if CORPUS != "shakespeare" else (model, corpus, provenance)
tang_model, tang, _ = pretrained.load("tang") if CORPUS != "tang" else (model, corpus, provenance)
# lang: en
play_line = plays.text[plays.boundary:].split("\n\n")[2].split("\n")[1]  # a line of a speech in val
# lang: zh
play_line = plays.text[plays.boundary:].split("\n\n")[2].split("\n")[1]  # 验证集中一段台词里的一行
# lang: end
print(play_line)
maps = plays_model.attention_maps(plays.encode(play_line)[None])  # (L, 1, H, T, T)
labels = [{"\n": "⏎", " ": "␣"}.get(c, c) for c in play_line]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.6))
for head, ax in enumerate(axes):
    heatmap(maps[-1, 0, head], ax=ax, queries=labels, keys=labels, colorbar=False)
    ax.tick_params(labelsize=5)
    # lang: en
    ax.set_title(f"last layer, head {head}")
    # lang: zh
    ax.set_title(f"最后一层，头 {head}")
    # lang: end
plt.show()

# %% [markdown] tags=["lang-en"]
# Then the Tang model on a poem. A couplet line is `AAAAA，BBBBB。`: five (or seven) characters, a comma,
# five more, a full stop.

# %% [markdown] tags=["lang-zh"] en_hash="9546e0290a"
# 再看唐诗模型在一首诗上的情形。一联写成一行 `AAAAA，BBBBB。`：五个（或七个）字，一个逗号，再五个字，一个句号。

# %%
counts = torch.bincount(tang.ids, minlength=tang.vocab_size)  # (V,)
# lang: en
# the first quatrain of val whose characters are all common (the plot's font lacks a few rare ones)
# lang: zh
# 验证集中第一首字都常见的绝句（图里用的字体缺少个别生僻字）
# lang: end
poem_text = next(p for p in verse.poems(tang) if len(p) == 25 and bool((counts[tang.encode(p)] >= 50).all()))
print(poem_text)
poem_maps = tang_model.attention_maps(tang.encode(poem_text)[None])  # (L, 1, H, T, T)
poem_labels = [{"\n": "⏎"}.get(c, c) for c in poem_text]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.6))
for head, ax in enumerate(axes):
    heatmap(poem_maps[-1, 0, head], ax=ax, queries=poem_labels, keys=poem_labels, colorbar=False)
    ax.tick_params(labelsize=5)
    # lang: en
    ax.set_title(f"last layer, head {head}")
    # lang: zh
    ax.set_title(f"最后一层，头 {head}")
    # lang: end
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### The form, counted
#
# Before asking what one head looks at, count what the whole model learned of the form. A sampled
# poem is **well formed** (`verse.form`) when
#
# - it has 2 couplets (a jueju, four lines) or 4 (a lüshi, eight lines);
# - every line has 5 characters, or every line 7;
# - each couplet is its first line, "，", its second line and "。" (or "？", "！"), with no other
#   punctuation inside.
#
# That is the form alone, not the tones, the rhyme or the parallelism; and no part of the model counts
# characters, so even the form is something it learned from the text. `verse.sample_poems` starts a batch of
# poems after a poem's end ("。" and a blank line) and reads each up to the next blank line;
# `verse.well_formed_share` is the share of them that `verse.form` accepts. The cell below samples 200
# poems at the setting of section 7's samples, temperature 0.8 with top-k 20, and, to compare, 100 at
# temperature 1 from the whole distribution, the model's own probabilities. A temperature below 1 takes
# draws away from the tail of unlikely characters and top-k cuts the tail off: the tail is where a
# poem's form breaks.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="3bebf16e16"
# ### 数一数：格式正确的诗有多少
#
# 在追问某一个头看哪里之前，先数一数整个模型学会了多少格式。采样出的一首诗**格式正确**（`verse.form`），要满足：
#
# - 有 2 联（绝句，四句）或 4 联（律诗，八句）；
# - 每句都是 5 个字，或每句都是 7 个字；
# - 每一联都是上句、“，”、下句、“。”（或“？”“！”），中间没有别的标点。
#
# 这只是格式，不涉及平仄、押韵和对仗；而且模型里没有哪个部件会数字数，所以就连格式，它也是单凭文本学来的。`verse.sample_poems` 在一首诗的结尾（“。”加一个空行）之后同时开始一批诗，每首读到下一个空行为止；`verse.well_formed_share` 是其中被 `verse.form` 接受的比例。下面的单元按第 7 节样本用的设置（温度 0.8，top-k 20）采样 200 首诗，再以温度 1 在完整的分布上，也就是按模型自己给出的概率，采样 100 首作对照。低于 1 的温度让由不太可能的字符组成的长尾少被抽中，top-k 则把长尾整个切掉：一首诗的格式恰恰是在长尾里被打破的。

# %%
# lang: en
WELL_FORMED_DRAW = {"count": 200, "temperature": 0.8, "top_k": 20}  # the setting the claim below is about
# lang: zh
WELL_FORMED_DRAW = {"count": 200, "temperature": 0.8, "top_k": 20}  # 下面检查的结论针对的就是这个设置
# lang: end
with_top_k = verse.sample_poems(tang_model, tang, **WELL_FORMED_DRAW, seed=0)
# lang: en
whole = verse.sample_poems(tang_model, tang, 100, temperature=1.0, seed=0)  # fewer: only a comparison
# lang: zh
whole = verse.sample_poems(tang_model, tang, 100, temperature=1.0, seed=0)  # 少一些：只作对照
# lang: end
share, share_whole = verse.well_formed_share(with_top_k), verse.well_formed_share(whole)
print(dict(sorted(Counter(verse.form(poem) for poem in with_top_k if verse.form(poem)).items())))
# lang: en
print(f"well formed: {share:.1%} of {len(with_top_k)} at temperature 0.8 with top-k 20, "
      f"{share_whole:.1%} of {len(whole)} at temperature 1 from the whole distribution")
claim(f"{share:.1%} of the {len(with_top_k)} poems sampled at temperature 0.8, top-k 20 are well formed: at least 95 %",
      share >= 0.95)
print("The first two poems sampled from the whole distribution that are not well formed:")
# lang: zh
print(f"格式正确的比例：温度 0.8、top-k 20 时 {len(with_top_k)} 首中占 {share:.1%}，"
      f"温度 1、完整分布时 {len(whole)} 首中占 {share_whole:.1%}")
claim(f"以温度 0.8、top-k 20 采样的 {len(with_top_k)} 首诗中，格式正确的占 {share:.1%}，不低于 95 %", share >= 0.95)
print("在完整分布上采样的诗里，前两首格式不正确的：")
# lang: end
for poem in [poem for poem in whole if verse.form(poem) is None][:2]:
    print("-" * 40)
    print(poem)

# %% [markdown] tags=["lang-en"]
# When the course shipped this model, 8 draws of 200 poems (seeds 0 to 7) gave 1,572 well formed of
# 1,600 (98.25 %, the worst draw 97 %) at temperature 0.8 with top-k 20; 1,564 (97.75 %) at temperature 1
# with top-k 20, top-k alone; and 1,515 (94.7 %) at temperature 1 from the whole distribution. One draw
# of 100 moves a few points either way: read the comparison above with that in mind. Outside the top
# 20 are thousands of characters, each unlikely, that together still win a draw now and then; after
# such a character the model writes on from text it rarely saw. Of the 85 poems that failed from the
# whole distribution, 47 have the wrong number of couplets (1, 3 or 5), 20 never end within the 68
# characters of the longest form, 13 have a broken line (a comma missing, a line too long or too short)
# and 5 mix lines of 5 and of 7 characters. What top-k leaves is mostly one mistake the model finds
# likely: a poem that ends after its first couplet (22 of the 28 failures at temperature 0.8), since
# the blank line that ends a poem may follow any couplet's "。".

# %% [markdown] tags=["lang-zh"] en_hash="455cd06b17"
# 课程发布这个模型时，以 8 个种子（0 到 7）各采样 200 首：温度 0.8、top-k 20 时，1,600 首中有 1,572 首格式正确（98.25 %，最差的一次 97 %）；温度 1、top-k 20，即只用 top-k 时，有 1,564 首（97.75 %）；温度 1、在完整分布上采样时，有 1,515 首（94.7 %）。只采 100 首的一次抽样会上下浮动几个百分点，读上面的对照时要记住这一点。排在前 20 名之外的有几千个字符，每个都不太可能，合起来却时不时能赢得一次抽样；抽到这样一个字符之后，模型接着写的是它很少见过的文本。在完整分布上采样、格式不正确的 85 首诗里，47 首联数不对（1、3 或 5 联），20 首在最长体裁的 68 个字符之内始终没有结束，13 首有一句坏了（缺了逗号，或一句的字数多了、少了），5 首五字句和七字句混用。top-k 留下的错误大多只有一种，而且是模型认为很可能的：一首诗写完第一联就结束了（温度 0.8 时 28 首中占 22 首），因为结束一首诗的空行可以跟在任何一联的“。”后面。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### A couplet's parallelism, measured
#
# In regulated verse the two lines of a couplet answer each other word for word: the $k$-th character
# of the second line pairs with the $k$-th of the first (in the middle couplets of an eight-line poem
# the rules require it). Does some head look there? `verse.parallel_attention` measures it for every
# head: the mean weight a character of a second line gives to the **parallel** character of the first
# line, divided by the mean weight it gives to each **other** character of the first line. A ratio
# near 1: the head does not single out the parallel place; well above 1: it does. The baseline is the
# untrained model of the same size, over the same couplets (64 poems of val, 16 of each form).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="44dd0c4435"
# ### 测量一联诗的对仗
#
# 格律诗里，一联的两句逐字相对：下句的第 $k$ 个字与上句的第 $k$ 个字相对（律诗中间两联按规则必须对仗）。有没有哪个头在看那里？`verse.parallel_attention` 对每个头做这样的测量：下句的一个字给上句中与它**相对**的那个字的平均权重，除以它给上句**其他**每个字的平均权重。比值接近 1：这个头并不特别看相对的位置；远大于 1：它在看。基线是同样大小的未训练模型，用的是同样的对句（验证集中的 64 首诗，四种体裁各 16 首）。

# %%
forms = {}
for poem in verse.poems(tang):
    forms.setdefault(len(poem), [])
    if len(forms[len(poem)]) < 16:
        forms[len(poem)].append(poem)
# lang: en
chosen = [poem for length in (25, 33, 51, 67) for poem in forms[length]]  # 5 or 7 characters a line, 4 or 8 lines
# lang: zh
chosen = [poem for length in (25, 33, 51, 67) for poem in forms[length]]  # 五言或七言，绝句或律诗
# lang: end
measured_heads = verse.parallel_attention(tang_model, tang, chosen)
sizes = {k: v for k, v in tang_model.config.as_dict().items() if k != "vocab"}
baseline_heads = verse.parallel_attention(gpt.make_gpt(tang.vocab_size, seed=0, **sizes).eval(), tang, chosen)
ratio = measured_heads["parallel"] / measured_heads["others"]  # (L, H)
untrained_ratio = baseline_heads["parallel"] / baseline_heads["others"]
# lang: en
titles, axis_names = ("trained: parallel / other", "untrained"), {"xlabel": "head", "ylabel": "layer"}
# lang: zh
titles, axis_names = ("训练后：相对位置 / 其他位置", "未训练"), {"xlabel": "头", "ylabel": "层"}
# lang: end
fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
for ax, values, title in zip(axes, (ratio, untrained_ratio), titles):
    heatmap(values, ax=ax, title=title, vmin=0, vmax=max(2.0, ratio.max().item()), annotate=False)
    ax.set(**axis_names)
plt.show()
layer, head = divmod(int(ratio.argmax()), ratio.shape[1])
# lang: en
print(f"{measured_heads['pairs']:,} pairs; the strongest head: layer {layer}, head {head}, ratio {ratio.max().item():.2f}")
# lang: zh
print(f"共 {measured_heads['pairs']:,} 对字符；最强的头：第 {layer} 层的头 {head}，比值 {ratio.max().item():.2f}")
# lang: end
# lang: en
claim(f"the measure rests on {measured_heads['pairs']:,} character pairs, and in the untrained model every head's "
      "ratio is within 0.8 … 1.25 (no head singles out the parallel place before training)",
      measured_heads["pairs"] >= 1000 and bool(((untrained_ratio > 0.8) & (untrained_ratio < 1.25)).all()))
# lang: zh
claim(f"这个测量基于 {measured_heads['pairs']:,} 对字符；未训练模型中每个头的比值都在 0.8 … 1.25 之间"
      "（训练之前，没有哪个头特别看相对的位置）",
      measured_heads["pairs"] >= 1000 and bool(((untrained_ratio > 0.8) & (untrained_ratio < 1.25)).all()))
# lang: end

# %% [markdown] tags=["lang-en"]
# Read the left picture against the right one: the untrained model's ratios are all near 1, so a head
# whose square stands out on the left learned to look at the parallel place from the poems alone;
# nothing told it that couplets exist. How strong such a head becomes depends on how long the model
# trained; the line above names the strongest head of this one.

# %% [markdown] tags=["lang-zh"] en_hash="e79dbe1959"
# 对照着看左右两幅图：未训练模型的比值都接近 1，所以左图中哪个头的方格明显突出，它就是单凭这些诗学会了看相对的位置，没有人告诉过它什么是对仗。这样的头能有多强，取决于模型训练了多久；上面一行给出了这个模型中最强的那个头。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 10. Temperature and top-k, explored
#
# The explorer shows the trained model's distribution over the next character after a prompt, how
# temperature and top-k reshape it, and the text they sample. Move the sliders: at temperature 0 the
# text is the same every time; high temperatures let unlikely characters through, and top-k shuts the
# tail out again.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="58ffba7a3d"
# ## 10. 探索温度和 top-k
#
# 这个探索器显示训练好的模型在一段提示之后对下一个字符的概率分布、温度和 top-k 如何改变它，以及由此采样出的文字。拖动滑块看看：温度为 0 时，每次写出的文字都一样；温度高了，不太可能的字符也会冒出来，top-k 又把长尾挡在外面。

# %% tags=["nbval-ignore-output"]
next_character_explorer(model, corpus, PROMPT)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - A character model reads ids and learns from windows: $T$ characters and the same shifted by one,
#   $T$ predictions at once. The unigram and the bigram set the bar; the loss is the mean
#   cross-entropy, in nats per character.
# - The GPT is the course's parts in order: embeddings and positions, pre-norm blocks of masked
#   multi-head attention and an MLP with residuals, a read-out tied to the embedding. You wrote its
#   block, its loss (shifted, padding left out, a mean over targets), its sampling (temperature,
#   top-k, a seeded generator) and its cached generation, which equals recomputation past the context.
# - A tiny model beats the bigram in seconds; the course's model, trained by the same script for much
#   longer, ships with the weights in float16 and its provenance.
# - The attention inside is an implementation detail with the same weights: lesson 01's, PyTorch's
#   fused kernel, lesson 08's tiles and lesson 09's kernels give the same outputs.
# - What the model learned of the form can be counted: at temperature 0.8 with top-k 20, at least 95 %
#   of 200 poems sampled from the Tang model are well formed, fewer from the whole distribution: the
#   tail of unlikely characters is where the form breaks.
# - Heads can be measured, not only looked at: a couplet's parallelism is a number per head, read
#   against an untrained baseline.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="e895f8c3a3"
# ## 小结
#
# - 字符级模型读入 id，从窗口中学习：$T$ 个字符，以及右移一位的同样 $T$ 个字符，一次就是 $T$ 个预测。一元模型和二元模型定下门槛；损失是平均交叉熵，单位是每字符奈特。
# - GPT 就是按顺序排好的课程零件：嵌入和位置、由带掩码的多头注意力和 MLP 加残差组成的前归一化块、与嵌入共用矩阵的读出层。你写出了它的块、它的损失（移位、不计填充、对目标求平均）、它的采样（温度、top-k、给定种子的生成器）和它带缓存的生成（超出上下文长度之后仍与重新计算一致）。
# - 一个很小的模型几秒钟就能超过二元模型；课程的模型用同一个脚本训练了长得多的时间，以 float16 权重连同它的来历一起发布。
# - 里面的注意力只是实现细节，权重不变：第 01 课的、PyTorch 的融合核函数、第 08 课的分块和第 09 课的核函数给出相同的输出。
# - 模型学到了多少格式，可以数出来：以温度 0.8、top-k 20 从唐诗模型采样 200 首诗，至少 95 % 格式正确；在完整的分布上采样就少一些：格式是在由不太可能的字符组成的长尾里被打破的。
# - 注意力头不只能看，还能测：一联诗的对仗可以化为每个头的一个数，与未训练的基线对照着读。
