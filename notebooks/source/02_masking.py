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
# # Masking
#
# Attention lets every query look at every key. Often some keys must stay out of sight: the
# padding that makes sequences of different lengths fit in one batch, and, in a decoder, the
# words that come later in the sentence. A **mask** says, for every (query, key) pair, whether
# the query may attend to that key.
#
# In this lesson you will
#
# 1. build a padding mask and a causal (look-ahead) mask, in both of its alignments, and see what
#    they do to the weights;
# 2. learn which mask shapes broadcast correctly against (B, H, L_q, L_k) scores, including the
#    single query of one decoding step;
# 3. meet every mask convention of PyTorch (bool and float `attn_mask`, `key_padding_mask`,
#    `is_causal`, `generate_square_subsequent_mask`) and of two tutorials (a widely copied
#    PyTorch tutorial and a popular from-scratch Transformer tutorial), and convert between them;
# 4. find out what happens to a query whose keys are all hidden, forward and backward, what
#    PyTorch's functions return for it, and why −1e9 is not −∞;
# 5. find and fix a real bug: a multi-head layer whose mask is laid out in another order than
#    its scores.
#
# In this course a mask is always a **keep mask**: a bool tensor, True where the query may
# attend to the key. There are three exercises.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d8af7e2bd7"
# # 掩码
#
# 注意力让每个查询都能看到每个键。但有些键常常必须藏起来：一是为了把长短不一的序列放进同一个批量而补上的填充；二是在解码器里，句子中排在后面的词。**掩码**（mask）对每一个（查询，键）对说明：这个查询能不能关注这个键。
#
# 本课你将：
#
# 1. 构造填充掩码和因果（前瞻）掩码（后者有两种对齐方式），看看它们如何改变权重；
# 2. 弄清哪些形状的掩码能与 (B, H, L_q, L_k) 的分数正确广播，包括解码时每一步只有一个查询的情形；
# 3. 认识 PyTorch 的所有掩码约定（bool 与浮点的 `attn_mask`、`key_padding_mask`、`is_causal`、`generate_square_subsequent_mask`），以及两篇教程（一篇流传很广的 PyTorch 教程、一篇流行的从零实现 Transformer 的教程）各自的约定，并在它们之间转换；
# 4. 看看一个查询的所有键都被遮住时，前向传播和反向传播各会发生什么，PyTorch 的函数对它返回什么，以及为什么 −1e9 不等于 −∞；
# 5. 找出并修复一个真实的 bug：一个多头层里，掩码的排列顺序与分数的排列顺序不一致。
#
# 在本课程中，掩码总是**保留掩码**：一个 bool 张量，查询可以关注该键时为 True。本课共有三道练习。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from course_utils import check, claim, masks, setup, viz
from course_utils.attention import scaled_dot_product_attention
from course_utils.masks import causal_mask, masked_softmax, padding_mask
from course_utils.validation import ArgumentError
from course_utils.viz import heatmap, mask_picture
from course_utils.widgets import mask_explorer, mask_view

setup(lang="en")
# lang: en
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights
# lang: zh
torch.set_printoptions(precision=2, sci_mode=False)  # 读权重，两位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. Why masks exist
#
# ### Padding
#
# A batch is one tensor, so its sequences must have one length. Shorter sequences are padded:
# filler tokens are appended until every sequence is as long as the longest. The padding
# carries no meaning, yet plain attention gives it weight like any real token. A padding mask
# hides it: for sequence $b$ of length $n_b$, key $j$ is kept when $j < n_b$.
#
# Two sequences, of lengths 5 and 3, padded to $L = 5$. `padding_mask(lengths, L)` returns the
# keep mask with shape (B, 1, 1, L_k): the same keys are hidden for every head and every query
# of a sequence (section 2 explains the two size-1 axes).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="213df73d22"
# ## 1. 为什么需要掩码
#
# ### 填充
#
# 一个批量就是一个张量，所以其中的序列必须一样长。较短的序列要做填充：在末尾补上占位词元，直到与最长的序列一样长。填充没有任何含义，普通的注意力却会像对待真实词元一样给它分配权重。填充掩码把它藏起来：对长度为 $n_b$ 的第 $b$ 条序列，当 $j < n_b$ 时保留键 $j$。
#
# 两条序列，长度分别为 5 和 3，填充到 $L = 5$。`padding_mask(lengths, L)` 返回形状为 (B, 1, 1, L_k) 的保留掩码：同一条序列的每个头、每个查询遮住的都是同样的键（两个大小为 1 的维度在第 2 节解释）。

# %%
g = torch.Generator().manual_seed(0)
B, L, d = 2, 5, 8
lengths = torch.tensor([5, 3])
# lang: en
x = torch.randn(B, L, d, generator=g)  # self-attention: queries, keys and values are x
# lang: zh
x = torch.randn(B, L, d, generator=g)  # 自注意力：查询、键、值都是 x
# lang: end
keep = padding_mask(lengths, L)  # (B, 1, 1, L_k)
print(tuple(keep.shape))
# lang: en
print(keep[1, 0, 0])  # sequence 1: three real tokens, then two padding positions
# lang: zh
print(keep[1, 0, 0])  # 序列 1：三个真实词元，后面是两个填充位置
# lang: end

_, plain = scaled_dot_product_attention(x, x, x)  # (B, L, L)
_, padded = scaled_dot_product_attention(x, x, x, keep_mask=keep[:, 0])  # (B, 1, L_k)
# lang: en
claim("without the mask, sequence 1 gives weight to its padding", plain[1, :, 3:].sum() > 0)
claim("with it, every query of sequence 1 gives its two padded keys exactly zero weight",
      torch.equal(padded[1, :, 3:], torch.zeros(L, 2)))
claim("and each row of weights still sums to 1", torch.allclose(padded.sum(dim=-1), torch.ones(B, L)))
# lang: zh
claim("不加掩码时，序列 1 会给它的填充位置分配权重", plain[1, :, 3:].sum() > 0)
claim("加上掩码后，序列 1 的每个查询给两个填充位置的键的权重都精确为零",
      torch.equal(padded[1, :, 3:], torch.zeros(L, 2)))
claim("而且每一行权重之和仍然是 1", torch.allclose(padded.sum(dim=-1), torch.ones(B, L)))
# lang: end

# %% [markdown] tags=["lang-en"]
# The mask of sequence 1 (light: keep, dark: hidden) beside its weights without and with it.
# Every query's row leaves the two padded keys dark. (The rows of the padded *queries* 3 and 4
# are computed too; their outputs belong to padding and are thrown away later.)

# %% [markdown] tags=["lang-zh"] en_hash="d346303779"
# 下图是序列 1 的掩码（浅色表示保留，深色表示遮住），旁边是不加掩码和加掩码时的权重。每个查询所在的行都把两个填充位置的键留成了深色。（填充位置上的*查询* 3 和 4 所在的行也会被计算；它们的输出属于填充，之后会被丢掉。）

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), layout="constrained")
mask_picture(keep[1, 0].expand(L, L), ax=axes[0], title="keep_mask")
heatmap(plain[1], ax=axes[1], title="keep_mask=None", vmax=1.0, colorbar=False)
heatmap(padded[1], ax=axes[2], title="keep_mask=keep", vmax=1.0, colorbar=False)
plt.show()

# %% [markdown] tags=["lang-en"]
# ### The causal (look-ahead) mask
#
# A decoder generates a sequence one token at a time, so while training, the query at
# position $i$ must not see the tokens after $i$: at generation time they do not exist yet.
# The causal mask keeps key $j$ for query $i$ when $j \le i$: a lower triangle, diagonal
# included (a token may look at itself). `causal_mask(L)` returns that (L, L) triangle, the
# mask `F.scaled_dot_product_attention(..., is_causal=True)` applies.

# %% [markdown] tags=["lang-zh"] en_hash="8b75c6c49f"
# ### 因果（前瞻）掩码
#
# 解码器逐个词元地生成序列，所以训练时位置 $i$ 上的查询不能看到 $i$ 之后的词元：在生成的时刻，它们还不存在。因果掩码在 $j \le i$ 时为查询 $i$ 保留键 $j$：这是一个包含对角线的下三角（词元可以看自己）。`causal_mask(L)` 返回这个 (L, L) 的三角形，也就是 `F.scaled_dot_product_attention(..., is_causal=True)` 所用的掩码。

# %%
print(causal_mask(4))

# lang: en
x0 = x[:1]  # one sequence, (1, L, d)
# lang: zh
x0 = x[:1]  # 一条序列，(1, L, d)
# lang: end
out, causal = scaled_dot_product_attention(x0, x0, x0, keep_mask=causal_mask(L))
# lang: en
claim("causal_mask(5) gives the output of F.scaled_dot_product_attention(is_causal=True)",
      torch.allclose(out, F.scaled_dot_product_attention(x0, x0, x0, is_causal=True), atol=1e-6))
# lang: zh
claim("causal_mask(5) 给出的输出与 F.scaled_dot_product_attention(is_causal=True) 相同",
      torch.allclose(out, F.scaled_dot_product_attention(x0, x0, x0, is_causal=True), atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# The proof that nothing leaks from the future: change the last token and run again. Every
# output before the last position stays exactly the same.

# %% [markdown] tags=["lang-zh"] en_hash="0bcb78831e"
# 证明没有信息从未来泄漏：改动最后一个词元，再算一遍。最后一个位置之前的每个输出都完全不变。

# %%
changed = x0.clone()
changed[0, -1] = torch.randn(d, generator=g)
out_changed, _ = scaled_dot_product_attention(changed, changed, changed, keep_mask=causal_mask(L))
# lang: en
claim("after changing the last token, the outputs at positions 0 … 3 are exactly the same",
      torch.equal(out[0, :-1], out_changed[0, :-1]))
claim("and only the output at the last position changes", not torch.equal(out[0, -1], out_changed[0, -1]))
# lang: zh
claim("改动最后一个词元之后，位置 0 … 3 的输出完全不变", torch.equal(out[0, :-1], out_changed[0, :-1]))
claim("只有最后一个位置的输出变了", not torch.equal(out[0, -1], out_changed[0, -1]))
# lang: end

fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
mask_picture(causal_mask(L), ax=axes[0], title="causal_mask(5)")
heatmap(causal[0], ax=axes[1], title="keep_mask=causal_mask(5)", vmax=1.0, colorbar=False)
plt.show()

# %% [markdown] tags=["lang-en"]
# ### Two alignments when L_q ≠ L_k
#
# With as many queries as keys there is one causal mask. With fewer queries than keys, one must
# say *which positions the queries are*:
#
# - **top left** (`causal_mask(L_q, L_k)`, the default): query $i$ is position $i$ and sees keys
#   $0 \dots i$. This is what `is_causal=True` of `F.scaled_dot_product_attention` does, and
#   `torch.nn.attention.bias.causal_upper_left`. It is right when the queries and the keys start
#   at the same position.
# - **bottom right** (`causal_mask(L_q, L_k, align="bottom_right")`): the queries are the
#   *last* $L_q$ positions, so query $i$ is position $i + L_k - L_q$. This is
#   `torch.nn.attention.bias.causal_lower_right`. It is right when decoding with a cache of keys
#   and values (a KV cache): the keys hold every position so far, and the new queries come at
#   the end. (With $L_q > L_k$, the first $L_q - L_k$ queries then see no key at all.)
#
# Below, the last 3 positions of our sequence are computed on their own, as a decoder with a
# cache of the first 2 positions would: 3 queries against all 5 keys.

# %% [markdown] tags=["lang-zh"] en_hash="feee33d86d"
# ### L_q ≠ L_k 时的两种对齐方式
#
# 查询与键一样多时，因果掩码只有一个。查询比键少时，就必须说明*这些查询处在哪些位置*：
#
# - **左上角对齐**（`causal_mask(L_q, L_k)`，默认方式）：查询 $i$ 就是位置 $i$，看得到键 $0 \dots i$。`F.scaled_dot_product_attention` 的 `is_causal=True` 和 `torch.nn.attention.bias.causal_upper_left` 都是这样对齐的。当查询和键从同一个位置开始时，这样对齐是对的。
# - **右下角对齐**（`causal_mask(L_q, L_k, align="bottom_right")`）：查询是*最后* $L_q$ 个位置，所以查询 $i$ 是位置 $i + L_k - L_q$。这就是 `torch.nn.attention.bias.causal_lower_right`。带着键和值的缓存（KV 缓存）做解码时，这样对齐是对的：键包含到目前为止的所有位置，新的查询排在最后。（若 $L_q > L_k$，前 $L_q - L_k$ 个查询就一个键也看不到。）
#
# 下面单独计算这条序列的最后 3 个位置，就像缓存了前 2 个位置的解码器那样：3 个查询对全部 5 个键。

# %%
new = x0[:, -3:]  # (1, 3, d)
print(causal_mask(3, L))
print(causal_mask(3, L, align="bottom_right"))
last_3, _ = scaled_dot_product_attention(new, x0, x0, keep_mask=causal_mask(3, L, align="bottom_right"))
first_3, _ = scaled_dot_product_attention(new, x0, x0, keep_mask=causal_mask(3, L))
lower_right = F.scaled_dot_product_attention(new, x0, x0, attn_mask=causal_lower_right(3, L))
# lang: en
claim("bottom right: causal_mask(3, 5, align=\"bottom_right\") is the last 3 rows of causal_mask(5)",
      torch.equal(causal_mask(3, L, align="bottom_right"), causal_mask(L)[-3:]))
claim("so the last 3 queries alone give the last 3 rows of the full causal output",
      torch.allclose(last_3, out[:, -3:], atol=1e-6))
claim("top left would hide keys these queries may see: its output differs", not torch.allclose(first_3, out[:, -3:]))
claim("F.sdpa(is_causal=True) aligns at the top left",
      torch.allclose(F.scaled_dot_product_attention(new, x0, x0, is_causal=True), first_3, atol=1e-6))
claim("F.sdpa(attn_mask=causal_lower_right(3, 5)) aligns at the bottom right",
      torch.allclose(lower_right, last_3, atol=1e-6))
# lang: zh
claim("右下角对齐：causal_mask(3, 5, align=\"bottom_right\") 就是 causal_mask(5) 的最后 3 行",
      torch.equal(causal_mask(3, L, align="bottom_right"), causal_mask(L)[-3:]))
claim("所以单独用最后 3 个查询，就得到完整因果输出的最后 3 行",
      torch.allclose(last_3, out[:, -3:], atol=1e-6))
claim("左上角对齐会遮住这些查询本该看到的键：输出不同", not torch.allclose(first_3, out[:, -3:]))
claim("F.sdpa(is_causal=True) 按左上角对齐",
      torch.allclose(F.scaled_dot_product_attention(new, x0, x0, is_causal=True), first_3, atol=1e-6))
claim("F.sdpa(attn_mask=causal_lower_right(3, 5)) 按右下角对齐",
      torch.allclose(lower_right, last_3, atol=1e-6))
# lang: end

fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), layout="constrained")
mask_picture(causal_mask(3, L), ax=axes[0], title="causal_mask(3, 5)")
mask_picture(causal_mask(3, L, align="bottom_right"), ax=axes[1], title='causal_mask(3, 5, align="bottom_right")')
plt.show()

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the causal mask
#
# Write `my_causal_mask(L_q, L_k)`: the top-left causal mask, the one `is_causal=True` applies. It
# is a bool tensor of shape (L_q, L_k), True where key $j \le$ query $i$.
# `torch.ones(..., dtype=torch.bool).tril()` does it in one line; so does comparing a column of
# query positions with a row of key positions. The check tries $L_q \ne L_k$ both ways, changes
# $L_q$ and $L_k$ one at a time, and tries $1 \times 1$. It refuses the course's own
# `masks.causal_mask`, which is this exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="b01fee10ce"
# ### 练习 1：因果掩码
#
# 写出 `my_causal_mask(L_q, L_k)`：按左上角对齐的因果掩码，也就是 `is_causal=True` 所用的那个。它是一个形状为 (L_q, L_k) 的 bool 张量，键 $j \le$ 查询 $i$ 时为 True。`torch.ones(..., dtype=torch.bool).tril()` 一行就能做到；把一列查询位置与一行键位置相比较也可以。检查会测试 $L_q \ne L_k$ 的两种情形，分别单独改变 $L_q$ 和 $L_k$，还会测试 $1 \times 1$。检查不接受课程自带的 `masks.causal_mask`（它正是本题的答案）。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="02.causal_mask"
def my_causal_mask(L_q, L_k):
    # lang: en
    """Keep mask of a decoder, aligned at the top left (as is_causal=True): a bool tensor
    (dtype torch.bool) of shape (L_q, L_k), True where key j <= query i."""
    # lang: zh
    """解码器的保留掩码，按左上角对齐（与 is_causal=True 相同）：形状为 (L_q, L_k) 的 bool 张量
    （dtype 为 torch.bool），键 j <= 查询 i 时为 True。"""
    # lang: end
    ### BEGIN SOLUTION
    query_position = torch.arange(L_q)[:, None]  # (L_q, 1)
    key_position = torch.arange(L_k)[None, :]  # (1, L_k)
    return key_position <= query_position  # (L_q, L_k)
    ### END SOLUTION


# %%
from course_utils import check
check("02.causal_mask", my_causal_mask)

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: padding and causal together
#
# A decoder batch needs both masks: key $j$ is visible to query $i$ of sequence $b$ when it is
# a real token **and** not in the future. Write `my_decoder_mask(lengths, max_len)` returning
# the keep mask of shape (B, 1, L, L), where L is `max_len`, the padded length. Combine the two
# masks with `&`; broadcasting turns (B, 1, 1, L) and (L, L) into (B, 1, L, L). You may use
# `padding_mask` and `causal_mask`. The check includes a batch padded further than its longest
# sequence, a batch of one, a batch of more sequences than positions, and a sequence of length
# 0, whose rows are all hidden.
#
# Notice that a real query never sees padding through the causal mask alone: the padding lies in
# its future. What the padding mask changes are the rows of the padded queries, which without it
# would attend to padding too.

# %% [markdown] tags=["lang-zh"] en_hash="bc1bc8fe46"
# ### 练习 2：同时使用填充掩码和因果掩码
#
# 解码器的批量两种掩码都需要：对第 $b$ 条序列的查询 $i$，键 $j$ 既是真实词元、**又**不在未来时才可见。写出 `my_decoder_mask(lengths, max_len)`，返回形状为 (B, 1, L, L) 的保留掩码，其中 L 就是填充后的长度 `max_len`。用 `&` 合并两个掩码；广播会把 (B, 1, 1, L) 与 (L, L) 变成 (B, 1, L, L)。可以使用 `padding_mask` 和 `causal_mask`。检查用例里有填充得比最长序列还长的批量、只有一条序列的批量、序列条数多于位置数的批量，还有一条长度为 0 的序列，它的所有行都被遮住。
#
# 注意，单靠因果掩码，真实查询就已经看不到填充了：填充位于它的未来。填充掩码改变的是填充位置上那些查询所在的行；没有它，这些查询也会关注填充。

# %% tags=["exercise"] exercise="02.decoder_mask"
def my_decoder_mask(lengths, max_len):
    # lang: en
    """lengths: (B,) int64 tensor, each length between 0 and max_len; max_len: int, the padded length L.

    Returns the keep mask of a padded decoder batch: a bool tensor (dtype torch.bool) of shape
    (B, 1, L, L), True where key j is a real token of sequence b (j < lengths[b]) and not in the
    future of query i (j <= i).
    """
    # lang: zh
    """lengths：形状为 (B,) 的 int64 张量，每个长度都在 0 到 max_len 之间；max_len：int，填充后的长度 L。

    返回一个填充过的解码器批量的保留掩码：形状为 (B, 1, L, L) 的 bool 张量（dtype 为 torch.bool），
    当键 j 是序列 b 的真实词元（j < lengths[b]）、又不在查询 i 的未来（j <= i）时为 True。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    real_key = torch.arange(max_len) < lengths[:, None]  # (B, L): key j is a real token
    not_future = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # (L, L): key j <= query i
    # lang: zh
    real_key = torch.arange(max_len) < lengths[:, None]  # (B, L)：键 j 是真实词元
    not_future = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # (L, L)：键 j <= 查询 i
    # lang: end
    return real_key[:, None, None, :] & not_future  # (B, 1, 1, L) & (L, L) -> (B, 1, L, L)
    ### END SOLUTION


# %%
from course_utils import check
check("02.decoder_mask", my_decoder_mask)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Broadcasting a mask
#
# Multi-head attention scores have shape (B, H, L_q, L_k). A mask rarely has that full shape:
# it broadcasts, and broadcasting aligns shapes **from the right** (lesson 00). So the mask's
# last axis always meets the keys, the one before it the queries, and so on. A mask shape is
# right when each of its axes lands on the scores axis it means, or has size 1:
#
# | mask shape | what it means | against (B, H, L_q, L_k) |
# | --- | --- | --- |
# | (L_k,) | the same keys hidden everywhere | legal |
# | (B, 1, 1, L_k) | padding: per sequence, for every head and query | legal |
# | (B, 1, L_q, L_k) | per sequence and query, the same for every head | legal |
# | (1, 1, L_q, L_k) or (L_q, L_k) | causal: the same for every sequence and head | legal |
# | (B, 1, L_k) | padding written for (B, L_q, L_k) single-head scores | wrong: B meets H |
# | (B, L_k) | padding without its size-1 axes | wrong: B meets L_q |
#
# A wrong shape fails loudly only when the sizes clash. When they happen to be equal
# ($B = H$, or $B = L_q$) it runs, silently giving each head or each query another sequence's
# mask. The code below checks every shape twice: does it broadcast, and does it mean the right
# thing? Each line prints the mask's axes and the two answers (✓ yes, ✗ no).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="e09fed1f39"
# ## 2. 掩码的广播
#
# 多头注意力的分数形状是 (B, H, L_q, L_k)。掩码很少具有这样的完整形状：它依靠广播，而广播是**从右往左**对齐形状的（见第 00 课）。所以掩码的最后一维总是对上键，倒数第二维对上查询，依此类推。一个掩码形状正确，是指它的每一维都落在它所表示的那个分数维度上，或者大小为 1：
#
# | 掩码形状 | 含义 | 与 (B, H, L_q, L_k) 相配 |
# | --- | --- | --- |
# | (L_k,) | 处处遮住同样的键 | 合法 |
# | (B, 1, 1, L_k) | 填充：按序列区分，每个头、每个查询都一样 | 合法 |
# | (B, 1, L_q, L_k) | 按序列和查询区分，每个头都一样 | 合法 |
# | (1, 1, L_q, L_k) 或 (L_q, L_k) | 因果：每条序列、每个头都一样 | 合法 |
# | (B, 1, L_k) | 为单头分数 (B, L_q, L_k) 写的填充掩码 | 错误：B 对上了 H |
# | (B, L_k) | 少了大小为 1 的维度的填充掩码 | 错误：B 对上了 L_q |
#
# 形状错误时，只有在大小冲突的情况下才会明确报错。如果大小碰巧相等（$B = H$ 或 $B = L_q$），代码照样运行，却悄无声息地把另一条序列的掩码交给了某个头或某个查询。下面的代码对每个形状检查两件事：能不能广播？含义对不对？每一行依次打印掩码的各个维度和这两个问题的答案（✓ 是，✗ 否）。

# %%
SCORES_AXES = ("B", "H", "L_q", "L_k")
MASKS = [("L_k",), ("B", "1", "1", "L_k"), ("B", "1", "L_q", "L_k"), ("1", "1", "L_q", "L_k"),
         ("B", "1", "L_k"), ("B", "L_k")]
MARK = {True: "✓", False: "✗"}


def try_mask(axes, sizes):
    # lang: en
    """Broadcast a mask with named `axes` against scores of `sizes` (B, H, L_q, L_k).
    Returns (broadcasts?, every mask axis lands on the scores axis of its name or has size 1?)."""
    # lang: zh
    """把各维名为 `axes` 的掩码与形状为 `sizes` (B, H, L_q, L_k) 的分数做广播。
    返回（能否广播？掩码的每一维是否都落在同名的分数维度上，或者大小为 1？）。"""
    # lang: end
    size = dict(zip(SCORES_AXES, sizes), **{"1": 1})
    try:
        torch.broadcast_shapes(tuple(size[a] for a in axes), sizes)
    except RuntimeError:
        return False, False
    # lang: en
    lands_on = SCORES_AXES[len(SCORES_AXES) - len(axes):]  # aligned from the right
    # lang: zh
    lands_on = SCORES_AXES[len(SCORES_AXES) - len(axes):]  # 从右往左对齐
    # lang: end
    return True, all(a == "1" or a == s for a, s in zip(axes, lands_on))


results = {}
# lang: en
for sizes in [(2, 4, 3, 5), (2, 2, 3, 5), (2, 4, 2, 5)]:  # then B = H, then B = L_q
    print("scores.shape =", sizes, "     broadcasts?  right?")
# lang: zh
for sizes in [(2, 4, 3, 5), (2, 2, 3, 5), (2, 4, 2, 5)]:  # 然后 B = H，再然后 B = L_q
    print("scores.shape =", sizes, "     能否广播？  含义对吗？")
# lang: end
    for axes in MASKS:
        broadcasts, right = results[sizes, axes] = try_mask(axes, sizes)
        print(f"   ({', '.join(axes)})".ljust(30), MARK[broadcasts], "          ", MARK[right])

right_shapes, wrong_1, wrong_2 = MASKS[:4], ("B", "1", "L_k"), ("B", "L_k")
# lang: en
claim("B = 2, H = 4, L_q = 3: the four right shapes broadcast and mean the right thing; both wrong shapes fail",
      all(results[(2, 4, 3, 5), a] == (True, True) for a in right_shapes)
      and not results[(2, 4, 3, 5), wrong_1][0] and not results[(2, 4, 3, 5), wrong_2][0])
claim("B = H = 2: (B, 1, L_k) broadcasts, and means the wrong thing", results[(2, 2, 3, 5), wrong_1] == (True, False))
claim("B = L_q = 2: (B, L_k) broadcasts, and means the wrong thing", results[(2, 4, 2, 5), wrong_2] == (True, False))
# lang: zh
claim("B = 2、H = 4、L_q = 3：四个正确的形状都能广播，含义也对；两个错误的形状都会报错",
      all(results[(2, 4, 3, 5), a] == (True, True) for a in right_shapes)
      and not results[(2, 4, 3, 5), wrong_1][0] and not results[(2, 4, 3, 5), wrong_2][0])
claim("B = H = 2：(B, 1, L_k) 能广播，但含义是错的", results[(2, 2, 3, 5), wrong_1] == (True, False))
claim("B = L_q = 2：(B, L_k) 能广播，但含义是错的", results[(2, 4, 2, 5), wrong_2] == (True, False))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### One query: a mask that grows the result
#
# There is a third silent case, and it needs no coincidence of sizes. When a decoder generates
# with a cache, each step has a **single query**: the scores are (B, H, 1, L_k). A size-1 axis
# broadcasts against anything, so a (B, L_k) padding mask meets that query axis and *stretches*
# it to B: the result grows to (B, H, B, L_k), each query copied once per sequence's mask.
# Hand-written `masked_fill` runs without a word; `F.scaled_dot_product_attention` refuses,
# because its output must keep the query's shape.

# %% [markdown] tags=["lang-zh"] en_hash="c21aba415a"
# ### 只有一个查询：掩码把结果撑大
#
# 还有第三种悄无声息的情形，而且它不需要大小碰巧相等。解码器带着缓存生成时，每一步只有**一个查询**：分数的形状是 (B, H, 1, L_k)。大小为 1 的维度可以与任何大小广播，于是 (B, L_k) 的填充掩码对上这个查询维，把它*拉伸*到 B：结果被撑大成 (B, H, B, L_k)，每个查询按每条序列的掩码各复制了一份。手写的 `masked_fill` 一声不吭地照样运行；`F.scaled_dot_product_attention` 则会拒绝，因为它的输出必须保持查询的形状。

# %%
B, H, L_k, D = 2, 4, 5, 8
pad = padding_mask(torch.tensor([5, 3]), L_k)  # (B, 1, 1, L_k)
# lang: en
step_q = torch.randn(B, H, 1, D, generator=g)  # one decoding step: one query per sequence and head
step_k = torch.randn(B, H, L_k, D, generator=g)  # the cached keys
flat = pad[:, 0, 0]  # (B, L_k): the padding mask without its size-1 axes
# lang: zh
step_q = torch.randn(B, H, 1, D, generator=g)  # 解码的一步：每条序列、每个头只有一个查询
step_k = torch.randn(B, H, L_k, D, generator=g)  # 缓存的键
flat = pad[:, 0, 0]  # (B, L_k)：去掉了大小为 1 的维度的填充掩码
# lang: end
step_scores = step_q @ step_k.transpose(-2, -1) / math.sqrt(D)  # (B, H, 1, L_k)

grown = step_scores.masked_fill(~flat, float("-inf")).softmax(dim=-1)
right = step_scores.masked_fill(~pad, float("-inf")).softmax(dim=-1)
try:
    F.scaled_dot_product_attention(step_q, step_k, step_k, attn_mask=flat)
    sdpa_refused = False
except RuntimeError:
    sdpa_refused = True
# lang: en
claim("masked_fill with the (B, L_k) mask runs, and grows the weights from (2, 4, 1, 5) to (2, 4, 2, 5)",
      tuple(grown.shape) == (2, 4, 2, 5))
claim("sequence 0's weights now have a second row, under sequence 1's padding", grown[0, :, 1, 3:].sum() == 0)
claim("the (B, 1, 1, L_k) mask keeps the shape (2, 4, 1, 5)", tuple(right.shape) == (2, 4, 1, 5))
claim("F.scaled_dot_product_attention refuses the (B, L_k) mask here with a RuntimeError", sdpa_refused)
# lang: zh
claim("用 (B, L_k) 的掩码做 masked_fill 照样运行，并把权重从 (2, 4, 1, 5) 撑大成 (2, 4, 2, 5)",
      tuple(grown.shape) == (2, 4, 2, 5))
claim("序列 0 的权重多出了第二行，用的是序列 1 的填充掩码", grown[0, :, 1, 3:].sum() == 0)
claim("(B, 1, 1, L_k) 的掩码保持形状 (2, 4, 1, 5) 不变", tuple(right.shape) == (2, 4, 1, 5))
claim("F.scaled_dot_product_attention 在这里拒绝 (B, L_k) 的掩码，抛出 RuntimeError", sdpa_refused)
# lang: end

# %% [markdown] tags=["lang-en"]
# Here is how the shapes line up: the right padding mask (top left), then the three silent
# cases (blue: a size-1 axis that is repeated). In the last one the repeated axis belongs to the
# scores:

# %% [markdown] tags=["lang-zh"] en_hash="70fef5e844"
# 下图画出形状是怎样对齐的：左上是正确的填充掩码，其余三幅是三种悄无声息的情形（蓝色表示被重复的大小为 1 的维度）。最后一种情形里，被重复的维度属于分数：

# %%
fig, axes = plt.subplots(2, 2, figsize=(12, 4.8), layout="constrained")
cases = [((2, 1, 1, 5), (2, 4, 3, 5), "(B, 1, 1, L_k)"), ((2, 1, 5), (2, 2, 3, 5), "(B, 1, L_k), B = H"),
         ((2, 5), (2, 4, 2, 5), "(B, L_k), B = L_q"), ((2, 5), (2, 4, 1, 5), "(B, L_k), L_q = 1")]
for ax, (mask_shape, scores_shape, title) in zip(axes.flat, cases):
    # lang: en
    viz.broadcast_picture(mask_shape, scores_shape, ax=ax, names=("keep", "scores"), axis_names=SCORES_AXES)
    # lang: zh
    viz.broadcast_picture(mask_shape, scores_shape, ax=ax, names=("掩码", "分数"), axis_names=SCORES_AXES)
    # lang: end
    ax.set_title(title, fontsize=10)
plt.show()

# %% [markdown] tags=["lang-en"]
# The rule: give a mask as many axes as the scores, with size 1 where it does not vary. The
# package's functions refuse a mask that cannot broadcast to the scores, or that would grow
# them:

# %% [markdown] tags=["lang-zh"] en_hash="a419217171"
# 规则是：让掩码的维数与分数相同，不变化的维度大小取 1。对于无法广播到分数形状、或者会把分数撑大的掩码，工具包的函数会直接拒绝：

# %%
scores = torch.randn(2, 4, 3, 5, generator=g)
# lang: en
for target, mask in ((scores, pad), (scores, pad[:, 0]), (step_scores, flat)):  # the right one, then two wrong ones
# lang: zh
for target, mask in ((scores, pad), (scores, pad[:, 0]), (step_scores, flat)):  # 先是正确的，再是两个错误的
# lang: end
    try:
        print(tuple(masked_softmax(target, mask).shape))
    except ArgumentError as error:
        print(error)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. One mask, many conventions
#
# Every library agrees on what a mask is for, and they disagree on which way it points:
#
# | where | argument | what it means | `course_utils.masks` |
# | --- | --- | --- | --- |
# | this course | `keep_mask`, bool | True: may attend | (the canonical form) |
# | `F.scaled_dot_product_attention` | bool `attn_mask` | True: may attend | the keep mask itself |
# | `F.scaled_dot_product_attention` | float `attn_mask` | added to the scores: 0 keep, −∞ drop | `to_additive` / `from_additive` |
# | `F.scaled_dot_product_attention` | `is_causal=True` | the causal mask, aligned at the top left | `causal_mask(L_q, L_k)` |
# | `torch.nn.attention.bias` | `causal_lower_right(L_q, L_k)` | the causal mask, aligned at the bottom right | `causal_mask(L_q, L_k, align="bottom_right")` |
# | `nn.MultiheadAttention` | bool `attn_mask`, (L_q, L_k) or (B·H, L_q, L_k) | True: must **not** attend | `to_ignore` / `from_ignore` |
# | `nn.MultiheadAttention` | float `attn_mask` | added to the scores: 0 keep, −∞ drop | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | bool `key_padding_mask`, (B, L_k) | True: padding, ignore | `to_key_padding` / `from_key_padding` |
# | `nn.MultiheadAttention` | float `key_padding_mask`, (B, L_k) | added to the scores: 0 keep, −∞ drop | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | `is_causal=True` | only a hint that `attn_mask` is causal; `attn_mask` is still required | pass `to_ignore(causal_mask(L))` as well |
# | `nn.Transformer` | `generate_square_subsequent_mask(L)` | a float mask: 0 on and below the diagonal, −∞ above | `from_additive` gives `causal_mask(L)` |
# | a widely copied PyTorch tutorial | `masked_fill(mask == 0, -inf)` | 0 hidden, 1 keep | `from_zero_hidden` |
# | a popular from-scratch Transformer tutorial | `masked_fill(mask, -inf)` | True: masked | `to_ignore` / `from_ignore` |
#
# Let us prove each row: the same padded batch through every convention gives the same output.
# For `nn.MultiheadAttention` we take one head and set its projections to the identity, so that
# it computes plain attention on the inputs, like the others.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="bae5207593"
# ## 3. 同一个掩码，多种约定
#
# 各个库对掩码的用途意见一致，对它指向哪一边却各执一词：
#
# | 出处 | 参数 | 含义 | `course_utils.masks` |
# | --- | --- | --- | --- |
# | 本课程 | `keep_mask`，bool | True：可以关注 | （标准形式） |
# | `F.scaled_dot_product_attention` | bool `attn_mask` | True：可以关注 | 就是保留掩码本身 |
# | `F.scaled_dot_product_attention` | 浮点 `attn_mask` | 加到分数上：0 保留，−∞ 丢弃 | `to_additive` / `from_additive` |
# | `F.scaled_dot_product_attention` | `is_causal=True` | 按左上角对齐的因果掩码 | `causal_mask(L_q, L_k)` |
# | `torch.nn.attention.bias` | `causal_lower_right(L_q, L_k)` | 按右下角对齐的因果掩码 | `causal_mask(L_q, L_k, align="bottom_right")` |
# | `nn.MultiheadAttention` | bool `attn_mask`，(L_q, L_k) 或 (B·H, L_q, L_k) | True：**不得**关注 | `to_ignore` / `from_ignore` |
# | `nn.MultiheadAttention` | 浮点 `attn_mask` | 加到分数上：0 保留，−∞ 丢弃 | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | bool `key_padding_mask`，(B, L_k) | True：填充，忽略 | `to_key_padding` / `from_key_padding` |
# | `nn.MultiheadAttention` | 浮点 `key_padding_mask`，(B, L_k) | 加到分数上：0 保留，−∞ 丢弃 | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | `is_causal=True` | 只是提示 `attn_mask` 是因果掩码；仍然必须传入 `attn_mask` | 同时传入 `to_ignore(causal_mask(L))` |
# | `nn.Transformer` | `generate_square_subsequent_mask(L)` | 浮点掩码：对角线及其下方为 0，上方为 −∞ | `from_additive` 得到 `causal_mask(L)` |
# | 一篇流传很广的 PyTorch 教程 | `masked_fill(mask == 0, -inf)` | 0 遮住，1 保留 | `from_zero_hidden` |
# | 一篇流行的从零实现 Transformer 的教程 | `masked_fill(mask, -inf)` | True：遮住 | `to_ignore` / `from_ignore` |
#
# 下面逐行验证：同一个带填充的批量，经过每一种约定，得到的输出都相同。对于 `nn.MultiheadAttention`，我们只用一个头，并把它的投影设为单位矩阵，使它和其他函数一样，直接在输入上计算普通的注意力。

# %%
B, L_q, L_k, E = 2, 4, 5, 8
q, k, v = (torch.randn(B, n, E, generator=g) for n in (L_q, L_k, L_k))
# lang: en
keep = padding_mask(torch.tensor([5, 3]), L_k)[:, 0]  # (B, 1, L_k): single-head scores are (B, L_q, L_k)
# lang: zh
keep = padding_mask(torch.tensor([5, 3]), L_k)[:, 0]  # (B, 1, L_k)：单头注意力的分数是 (B, L_q, L_k)
# lang: end
full = (B, L_q, L_k)

mha = nn.MultiheadAttention(E, num_heads=1, batch_first=True)
# lang: en
# identity projections: mha computes softmax(q kᵀ / √E) v
# lang: zh
# 投影都设为单位矩阵：mha 计算的就是 softmax(q kᵀ / √E) v
# lang: end
with torch.no_grad():
    mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
    mha.in_proj_bias.zero_()
    mha.out_proj.weight.copy_(torch.eye(E))
    mha.out_proj.bias.zero_()


def zero_hidden_attention(q, k, v, mask):
    # lang: en
    """The masking of a widely copied PyTorch tutorial, re-created: positions where mask == 0
    are hidden. Returns (output, weights)."""
    # lang: zh
    """重现一篇流传很广的 PyTorch 教程的掩码做法：mask == 0 的位置被遮住。返回 (output, weights)。"""
    # lang: end
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


def true_masked_attention(q, k, v, mask):
    # lang: en
    """The masking of a popular from-scratch Transformer tutorial, re-created: True is masked, and
    the mask must have the scores' full shape (it is reshaped with .view). Returns (output, weights)."""
    # lang: zh
    """重现一篇流行的从零实现 Transformer 的教程的掩码做法：True 表示遮住，而且掩码必须与分数的形状
    完全相同（它用 .view 改变形状）。返回 (output, weights)。"""
    # lang: end
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(mask.view(scores.shape), float("-inf")).softmax(dim=-1)
    return weights @ v, weights


ours, _ = scaled_dot_product_attention(q, k, v, keep_mask=keep)
with torch.no_grad():
    outputs = {
        "F.sdpa(attn_mask=keep)": F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
        "F.sdpa(attn_mask=to_additive(keep))": F.scaled_dot_product_attention(
            q, k, v, attn_mask=masks.to_additive(keep)),
        "mha(attn_mask=to_ignore(keep))": mha(q, k, v, attn_mask=masks.to_ignore(keep).expand(full))[0],
        "mha(attn_mask=to_additive(keep))": mha(q, k, v, attn_mask=masks.to_additive(keep).expand(full))[0],
        "mha(key_padding_mask=to_key_padding(keep))": mha(q, k, v, key_padding_mask=masks.to_key_padding(keep))[0],
        "mha(key_padding_mask=to_additive(keep)[:, 0])": mha(
            q, k, v, key_padding_mask=masks.to_additive(keep)[:, 0])[0],
        "zero_hidden_attention(keep.int())": zero_hidden_attention(q, k, v, keep.int())[0],
        "true_masked_attention(to_ignore(keep))": true_masked_attention(
            q, k, v, masks.to_ignore(keep).expand(full))[0],
    }
for name, output in outputs.items():
    # lang: en
    claim(f"{name}: the same output", torch.allclose(output, ours, atol=1e-6))
    # lang: zh
    claim(f"{name}：输出相同", torch.allclose(output, ours, atol=1e-6))
    # lang: end

# %% [markdown] tags=["lang-en"]
# The causal conventions, on a batch of 5 positions in self-attention. `nn.MultiheadAttention`'s
# `is_causal=True` is only a *hint* that the `attn_mask` you pass is the causal mask (so that the
# layer may use a faster causal kernel); it does not build the mask for you:

# %% [markdown] tags=["lang-zh"] en_hash="20f2cb8284"
# 下面是因果掩码的各种约定，用的是 5 个位置的自注意力。`nn.MultiheadAttention` 的 `is_causal=True` 只是一个*提示*，告诉它你传入的 `attn_mask` 就是因果掩码（这样它可以改用更快的因果计算）；它并不会替你构造掩码：

# %%
# lang: en
x = torch.randn(B, L_k, E, generator=g)  # self-attention over 5 positions
square = nn.Transformer.generate_square_subsequent_mask(L_k)  # (L, L) float
# lang: zh
x = torch.randn(B, L_k, E, generator=g)  # 5 个位置上的自注意力
square = nn.Transformer.generate_square_subsequent_mask(L_k)  # (L, L)，浮点
# lang: end
print(square)
expected, _ = scaled_dot_product_attention(x, x, x, keep_mask=causal_mask(L_k))
with torch.no_grad():
    by_square = mha(x, x, x, attn_mask=square)[0]
    hinted = [mha(x, x, x, attn_mask=square, is_causal=True, need_weights=w)[0] for w in (True, False)]
    try:
        mha(x, x, x, is_causal=True)
        hint_alone_refused = False
    except RuntimeError:
        hint_alone_refused = True
# lang: en
claim("from_additive(generate_square_subsequent_mask(5)) is causal_mask(5)",
      torch.equal(masks.from_additive(square), causal_mask(L_k)))
claim("F.sdpa(is_causal=True): the same output",
      torch.allclose(F.scaled_dot_product_attention(x, x, x, is_causal=True), expected, atol=1e-6))
claim("mha(attn_mask=square): the same output", torch.allclose(by_square, expected, atol=1e-6))
claim("mha(attn_mask=square, is_causal=True): the same output, with need_weights True and False",
      all(torch.allclose(output, expected, atol=1e-6) for output in hinted))
claim("mha(is_causal=True) without an attn_mask raises a RuntimeError: the hint needs the mask", hint_alone_refused)
# lang: zh
claim("from_additive(generate_square_subsequent_mask(5)) 就是 causal_mask(5)",
      torch.equal(masks.from_additive(square), causal_mask(L_k)))
claim("F.sdpa(is_causal=True)：输出相同",
      torch.allclose(F.scaled_dot_product_attention(x, x, x, is_causal=True), expected, atol=1e-6))
claim("mha(attn_mask=square)：输出相同", torch.allclose(by_square, expected, atol=1e-6))
claim("mha(attn_mask=square, is_causal=True)：输出相同，need_weights 取 True 或 False 都一样",
      all(torch.allclose(output, expected, atol=1e-6) for output in hinted))
claim("不传 attn_mask 而只给 mha(is_causal=True)，会抛出 RuntimeError：这个提示离不开掩码", hint_alone_refused)
# lang: end

# %% [markdown] tags=["lang-en"]
# Never give the hint with a mask that is not causal. Measured with torch 2.13, on this layer's
# path (its general path, see section 4): with a padding `attn_mask` and `is_causal=True`, the
# output used the padding mask when `need_weights=True`, and the causal mask *instead of*
# `attn_mask` when `need_weights=False` and no `key_padding_mask` was given. PyTorch's
# documentation warns that a wrong hint can give incorrect results, and that is what it looks
# like.
#
# The converters translate in both directions without losing anything:

# %% [markdown] tags=["lang-zh"] en_hash="bb117dd113"
# 千万不要在掩码并非因果掩码时给出这个提示。用 torch 2.13 在这个层的通用路径上（见第 4 节）实测：传入一个填充用的 `attn_mask` 并设 `is_causal=True` 时，`need_weights=True` 的输出用的是这个填充掩码；而 `need_weights=False` 且没有给 `key_padding_mask` 时，用的却是因果掩码，`attn_mask` 被弃之不用。PyTorch 的文档警告过，错误的提示可能导致错误的结果，实际情形就是这样。
#
# 这些转换函数可以双向转换，不丢失任何信息：

# %%
# lang: en
print(masks.to_key_padding(keep))  # (B, L_k), True at padding
claim("from_key_padding(to_key_padding(keep)) gives keep back, as (B, 1, 1, L_k)",
      torch.equal(masks.from_key_padding(masks.to_key_padding(keep)), keep[:, None]))
claim("from_ignore(to_ignore(keep)) gives keep back", torch.equal(masks.from_ignore(masks.to_ignore(keep)), keep))
claim("from_additive(to_additive(keep)) gives keep back",
      torch.equal(masks.from_additive(masks.to_additive(keep)), keep))
claim("from_zero_hidden reads 0/1 masks, int or float, as keep masks",
      torch.equal(masks.from_zero_hidden(keep.int()), keep) and torch.equal(masks.from_zero_hidden(keep.float()), keep))
# lang: zh
print(masks.to_key_padding(keep))  # (B, L_k)，填充位置为 True
claim("from_key_padding(to_key_padding(keep)) 还原出 keep，形状为 (B, 1, 1, L_k)",
      torch.equal(masks.from_key_padding(masks.to_key_padding(keep)), keep[:, None]))
claim("from_ignore(to_ignore(keep)) 还原出 keep", torch.equal(masks.from_ignore(masks.to_ignore(keep)), keep))
claim("from_additive(to_additive(keep)) 还原出 keep", torch.equal(masks.from_additive(masks.to_additive(keep)), keep))
claim("from_zero_hidden 把 0/1 掩码（整数或浮点）读成保留掩码",
      torch.equal(masks.from_zero_hidden(keep.int()), keep) and torch.equal(masks.from_zero_hidden(keep.float()), keep))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Mixing conventions up
#
# Hand a mask to code that reads the other convention and nothing crashes: the mask is simply
# read backwards. The widely copied tutorial's code, given an additive mask (0 keep, −∞ drop),
# hides every key whose value is 0, the real tokens, and attends only to the padding; sequence
# 0, which has no padding, gets rows with nothing left and turns into NaN:

# %% [markdown] tags=["lang-zh"] en_hash="f14b5ba30b"
# ### 约定混用
#
# 把掩码交给按另一种约定解读它的代码，程序并不会崩溃：掩码只是被反着读了。把加性掩码（0 保留，−∞ 丢弃）交给那篇流传很广的教程的代码，它会遮住所有值为 0 的键，也就是真实词元，只去关注填充；序列 0 没有填充，它的每一行什么都不剩，于是变成 NaN：

# %%
inverted, inverted_weights = zero_hidden_attention(q, k, v, masks.to_additive(keep))
# lang: en
claim("sequence 1 gives its 3 real tokens zero weight: it attends only to its padding",
      torch.equal(inverted_weights[1, :, :3], torch.zeros(L_q, 3)))
claim("sequence 0, which has no padding, is NaN everywhere", inverted[0].isnan().all())
# lang: zh
claim("序列 1 给它的 3 个真实词元的权重为零：它只关注填充",
      torch.equal(inverted_weights[1, :, :3], torch.zeros(L_q, 3)))
claim("序列 0 没有填充，它的输出处处是 NaN", inverted[0].isnan().all())
# lang: end

# %% [markdown] tags=["lang-en"]
# So `course_utils.masks` refuses to guess. A 0/1 integer mask could mean keep or ignore; a
# float mask with values like −1e9 or 0.5 is a bias on the scores, not a mask; a (B, L_k) mask
# could be read as (L_q, L_k). Each gets an error that says what was given and what is needed:

# %% [markdown] tags=["lang-zh"] en_hash="023c8bbed9"
# 所以 `course_utils.masks` 拒绝猜测。0/1 的整数掩码可能表示保留，也可能表示忽略；含有 −1e9、0.5 这类值的浮点掩码是加在分数上的偏置，而不是掩码；(B, L_k) 的掩码可能被当成 (L_q, L_k)。遇到这些情况，都会报错，说明收到了什么、需要什么：

# %%
# lang: en
ambiguous = [
    lambda: masks.from_ignore(keep.int()),  # is 1 "keep" or "ignore"?
    lambda: masks.from_additive(torch.tensor([0.0, -1e9, 0.5])),  # a bias, not a mask
    lambda: masks.from_zero_hidden(masks.to_additive(keep)),  # an additive mask read as 0 = hidden
    lambda: masks.to_key_padding(keep[:, 0]),  # (B, L_k): which axis is the batch?
]
# lang: zh
ambiguous = [
    lambda: masks.from_ignore(keep.int()),  # 1 表示“保留”还是“忽略”？
    lambda: masks.from_additive(torch.tensor([0.0, -1e9, 0.5])),  # 这是偏置，不是掩码
    lambda: masks.from_zero_hidden(masks.to_additive(keep)),  # 把加性掩码按“0 = 遮住”来读
    lambda: masks.to_key_padding(keep[:, 0]),  # (B, L_k)：哪一维是批量？
]
# lang: end
for convert in ambiguous:
    try:
        convert()
    except ArgumentError as error:
        print(error)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. Fully masked rows
#
# Sometimes a query has no key left to attend to: an empty sequence, a padded query under a
# mask that also hides queries, the first queries of a bottom-right causal mask with
# $L_q > L_k$. The naive recipe writes −∞ into every hidden score, so that row is all −∞, and
# the softmax divides $0$ by $0$:
#
# $$\mathrm{softmax}(-\infty, \dots, -\infty)_j = \frac{e^{-\infty}}{\sum_{j'} e^{-\infty}} = \frac{0}{0} = \mathrm{NaN}.$$
#
# Below, query 1 of a single sequence may see no key.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="09f03d0124"
# ## 4. 全遮蔽行
#
# 有时一个查询没有任何键可以关注：序列是空的；掩码把填充位置的查询也遮住了；$L_q > L_k$ 时右下角对齐的因果掩码的前几个查询。按朴素的做法，每个被遮住的分数都写入 −∞，于是这一行全是 −∞，softmax 就成了 $0$ 除以 $0$：
#
# $$\mathrm{softmax}(-\infty, \dots, -\infty)_j = \frac{e^{-\infty}}{\sum_{j'} e^{-\infty}} = \frac{0}{0} = \mathrm{NaN}.$$
#
# 下面这个序列中，查询 1 一个键都看不到。

# %%
q1, k1, v1 = (torch.randn(1, 3, 4, generator=g) for _ in range(3))
keep1 = torch.tensor([[True, True, False], [False, False, False], [True, True, True]]).unsqueeze(0)  # (1, 3, 3)
print(keep1[0])

scores1 = q1 @ k1.transpose(-2, -1) / 2.0  # √d_k = 2
naive = scores1.masked_fill(~keep1, float("-inf")).softmax(dim=-1)
print(naive[0])
# lang: en
claim("row 1 of the weights is NaN; rows 0 and 2 are ordinary weights",
      naive[0, 1].isnan().all() and torch.isfinite(naive[0, [0, 2]]).all())
# lang: zh
claim("权重的第 1 行是 NaN；第 0 行和第 2 行是正常的权重",
      naive[0, 1].isnan().all() and torch.isfinite(naive[0, [0, 2]]).all())
# lang: end

# %% [markdown] tags=["lang-en"]
# A NaN does not stay in its row, and the backward pass is where it does the most harm. To see
# it, the loss must depend on the attention's *output*: a loss on the weights alone can hide it,
# since every row of weights sums to 1 whatever the scores. So take the output `weights @ v`, a
# fixed random weighting `probe` of it, `loss = (output * probe).sum()`, and ask which of the
# gradients of q, k and v contain NaN.

# %% [markdown] tags=["lang-zh"] en_hash="8cf08cc054"
# NaN 不会老老实实待在自己那一行，它在反向传播中危害最大。要看到这一点，损失必须依赖注意力的*输出*：只依赖权重的损失可能把它藏起来，因为无论分数是多少，每一行权重之和都是 1。所以取输出 `weights @ v`，用一组固定的随机系数 `probe` 给它加权，令 `loss = (output * probe).sum()`，再看 q、k、v 的梯度里哪些含有 NaN。

# %%
def naive_attention(q, k, v, keep):
    # lang: en
    """softmax(q kᵀ / 2) v, with −∞ written into the hidden scores by masked_fill: the usual recipe."""
    # lang: zh
    """softmax(q kᵀ / 2) v，用 masked_fill 把 −∞ 写进被遮住的分数：最常见的做法。"""
    # lang: end
    scores = q @ k.transpose(-2, -1) / 2.0
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1) @ v


# lang: en
probe = torch.randn(1, 3, 4, generator=g)  # a fixed random weighting of the output
# lang: zh
probe = torch.randn(1, 3, 4, generator=g)  # 给输出加权的一组固定随机系数
# lang: end
q, k, v = (t.clone().requires_grad_() for t in (q1, k1, v1))
loss = (naive_attention(q, k, v, keep1) * probe).sum()
loss.backward()
# lang: en
claim("the loss is NaN", loss.isnan())
claim("v's gradient is NaN in every row: query 1's NaN weights touch every value", v.grad.isnan().all())
claim("q's and k's gradients are finite (query 1's is 0): masked_fill's backward gives hidden scores no gradient",
      torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and (q.grad[0, 1] == 0).all())
# lang: zh
claim("损失是 NaN", loss.isnan())
claim("v 的梯度每一行都是 NaN：查询 1 的 NaN 权重碰到了每一个值", v.grad.isnan().all())
claim("q 和 k 的梯度是有限的（查询 1 的梯度为 0）：masked_fill 的反向传播不给被遮住的分数任何梯度",
      torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and (q.grad[0, 1] == 0).all())
# lang: end

q, k, v = (t.clone().requires_grad_() for t in (q1, k1, v1))
# lang: en
added = q @ k.transpose(-2, -1) / 2.0 + masks.to_additive(keep1)  # the mask added, not written
# lang: zh
added = q @ k.transpose(-2, -1) / 2.0 + masks.to_additive(keep1)  # 把掩码加上去，而不是写进去
# lang: end
((added.softmax(dim=-1) @ v) * probe).sum().backward()
# lang: en
claim("with an additive mask the NaN goes further: q's gradient is NaN in row 1, k's and v's in every row",
      q.grad[0, 1].isnan().all() and torch.isfinite(q.grad[0, [0, 2]]).all()
      and k.grad.isnan().all() and v.grad.isnan().all())
# lang: zh
claim("用加性掩码时，NaN 走得更远：q 的梯度在第 1 行是 NaN，k 和 v 的梯度每一行都是 NaN",
      q.grad[0, 1].isnan().all() and torch.isfinite(q.grad[0, [0, 2]]).all()
      and k.grad.isnan().all() and v.grad.isnan().all())
# lang: end

# %% [markdown] tags=["lang-en"]
# One optimizer step with such a gradient writes NaN into the weights of the layer that produced
# v (and, with an additive mask, q and k too). From then on every output of the model is NaN,
# for every input, though only one query of one sequence had nothing to attend to.
#
# What do PyTorch's own functions return for such a row? `nn.MultiheadAttention` has two code
# paths. Its **fast path** (`torch._native_multi_head_attention`) runs only when all of these
# hold: eval mode, autograd off (or nothing requiring grad), self-attention with query, key and
# value the *same* tensor, `batch_first=True`, an even number of heads, and bool masks; otherwise
# its **general path** runs (`F.multi_head_attention_forward`), which computes the softmax itself
# when `need_weights=True` (the default) and calls `F.scaled_dot_product_attention` when
# `need_weights=False`. The cell below measures every case, on a fully masked row (an
# `attn_mask` that hides every key from query 1) and on a fully padded sequence (a
# `key_padding_mask` that is all True for sequence 1). With torch 2.13 it gave:
#
# | call | path | fully masked row | fully padded sequence |
# | --- | --- | --- | --- |
# | `F.scaled_dot_product_attention`, bool or float mask | | 0 | 0 |
# | `nn.MultiheadAttention`, `need_weights=True` (default) | general, its own softmax | NaN | NaN |
# | `nn.MultiheadAttention`, `need_weights=False` | general, calls `F.scaled_dot_product_attention` | 0 | 0 |
# | `nn.MultiheadAttention`, eval and `torch.no_grad()`, either `need_weights` | fast | NaN | NaN |
#
# (A 0 here is the attention output; the layer then adds its `out_proj` bias, which starts at
# zero.) Turning the fast path off with `torch.backends.mha.set_fastpath_enabled(False)` turns
# its NaN into 0: proof that it is other code. F.sdpa's zeros are measured behaviour of recent
# versions, not a documented promise: older versions gave NaN. The table printed below is what
# *your* installed torch gives.

# %% [markdown] tags=["lang-zh"] en_hash="77f1e54116"
# 用这样的梯度做一步优化，就会把 NaN 写进产生 v 的那一层的权重（用加性掩码时，还有产生 q 和 k 的层）。从此以后，无论输入是什么，模型的每个输出都是 NaN，尽管起因只是一条序列里有一个查询无键可看。
#
# PyTorch 自己的函数在这样的一行上返回什么？`nn.MultiheadAttention` 有两条代码路径。只有以下条件全部满足时，才会走它的**快速路径**（`torch._native_multi_head_attention`）：处于 eval 模式；关闭了自动求导（或者没有任何张量需要梯度）；是自注意力，而且查询、键、值是*同一个*张量；`batch_first=True`；头数为偶数；掩码是 bool 类型。否则走它的**通用路径**（`F.multi_head_attention_forward`）：`need_weights=True`（默认值）时它自己计算 softmax，`need_weights=False` 时它调用 `F.scaled_dot_product_attention`。下面的单元格把每种情形都测了一遍，既测全遮蔽行（一个对查询 1 遮住所有键的 `attn_mask`），也测全部是填充的序列（一个对序列 1 全为 True 的 `key_padding_mask`）。用 torch 2.13 测得：
#
# | 调用 | 路径 | 全遮蔽行 | 全部是填充的序列 |
# | --- | --- | --- | --- |
# | `F.scaled_dot_product_attention`，bool 或浮点掩码 | | 0 | 0 |
# | `nn.MultiheadAttention`，`need_weights=True`（默认） | 通用路径，自己算 softmax | NaN | NaN |
# | `nn.MultiheadAttention`，`need_weights=False` | 通用路径，调用 `F.scaled_dot_product_attention` | 0 | 0 |
# | `nn.MultiheadAttention`，eval 模式加 `torch.no_grad()`，`need_weights` 取任意值 | 快速路径 | NaN | NaN |
#
# （这里的 0 指注意力的输出；之后这个层还会加上 `out_proj` 的偏置，它的初始值为零。）用 `torch.backends.mha.set_fastpath_enabled(False)` 关掉快速路径，它的 NaN 就变成了 0：这证明快速路径是另一套代码。F.sdpa 给出的零是较新版本实测的行为，而不是文档承诺的结果：较老的版本给出的是 NaN。下面打印的表格，就是*你*安装的 torch 给出的结果。

# %%
def outcome(rows):
    # lang: en
    """How fully masked rows came out: "NaN" when every number is NaN, "0" when every number is 0."""
    # lang: zh
    """全遮蔽行的结果：每个数都是 NaN 时为 "NaN"，每个数都是 0 时为 "0"。"""
    # lang: end
    return "NaN" if bool(rows.isnan().all()) else "0" if bool((rows == 0).all()) else str(rows)


def both(by_row, by_padding):
    # lang: en
    """The outcomes of query 1 in by_row and of sequence 1 in by_padding, side by side."""
    # lang: zh
    """并排给出 by_row 中查询 1 的结果和 by_padding 中序列 1 的结果。"""
    # lang: end
    return f"{outcome(by_row[:, 1]):>5} {outcome(by_padding[1]):>5}"


# lang: en
xb = torch.randn(2, 3, 4, generator=g)  # two sequences; query, key and value are this one tensor
keep_row = keep1[0]  # (3, 3): query 1 may attend to nothing
all_padding = torch.tensor([[False] * 3, [True] * 3])  # key_padding_mask: sequence 1 is all padding
keep_padding = ~all_padding[:, None, :]  # (2, 1, 3): the same as a keep mask
# lang: zh
xb = torch.randn(2, 3, 4, generator=g)  # 两条序列；查询、键、值都是这同一个张量
keep_row = keep1[0]  # (3, 3)：查询 1 什么都不能关注
all_padding = torch.tensor([[False] * 3, [True] * 3])  # key_padding_mask：序列 1 全是填充
keep_padding = ~all_padding[:, None, :]  # (2, 1, 3)：同一个掩码的保留掩码形式
# lang: end
with torch.no_grad():
    sdpa_bool = both(F.scaled_dot_product_attention(xb, xb, xb, attn_mask=keep_row),
                     F.scaled_dot_product_attention(xb, xb, xb, attn_mask=keep_padding))
    sdpa_float = both(F.scaled_dot_product_attention(xb, xb, xb, attn_mask=masks.to_additive(keep_row)),
                      F.scaled_dot_product_attention(xb, xb, xb, attn_mask=masks.to_additive(keep_padding)))

# lang: en
torch.manual_seed(2)  # the weights nn.MultiheadAttention draws
mha2 = nn.MultiheadAttention(4, num_heads=2, batch_first=True)  # two heads: the fast path needs an even number
# lang: zh
torch.manual_seed(2)  # nn.MultiheadAttention 随机初始化的权重
mha2 = nn.MultiheadAttention(4, num_heads=2, batch_first=True)  # 两个头：快速路径要求头数为偶数
# lang: end


def measure(**options):
    # lang: en
    """mha2 with `options` on both fully masked cases (self-attention on xb)."""
    # lang: zh
    """在两种出现全遮蔽行的情形下以 `options` 调用 mha2（xb 上的自注意力）。"""
    # lang: end
    return both(mha2(xb, xb, xb, attn_mask=masks.to_ignore(keep_row), **options)[0],
                mha2(xb, xb, xb, key_padding_mask=all_padding, **options)[0])


mha2.train()
general = measure(), measure(need_weights=False)
mha2.eval()
with torch.no_grad():
    fast = measure(), measure(need_weights=False)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        fast_off = measure(need_weights=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)

# lang: en
print("(fully masked row, fully padded sequence)")
print(sdpa_bool, "  F.sdpa, bool attn_mask")
print(sdpa_float, "  F.sdpa, float attn_mask")
print(general[0], "  nn.MultiheadAttention, general path, need_weights=True")
print(general[1], "  nn.MultiheadAttention, general path, need_weights=False")
print(fast[0], "  nn.MultiheadAttention, fast path, need_weights=True")
print(fast[1], "  nn.MultiheadAttention, fast path, need_weights=False")
print(fast_off, "  nn.MultiheadAttention, eval and no_grad with the fast path turned off, need_weights=False")
# lang: zh
print("（全遮蔽行，全是填充的序列）")
print(sdpa_bool, "  F.sdpa，bool attn_mask")
print(sdpa_float, "  F.sdpa，浮点 attn_mask")
print(general[0], "  nn.MultiheadAttention，通用路径，need_weights=True")
print(general[1], "  nn.MultiheadAttention，通用路径，need_weights=False")
print(fast[0], "  nn.MultiheadAttention，快速路径，need_weights=True")
print(fast[1], "  nn.MultiheadAttention，快速路径，need_weights=False")
print(fast_off, "  nn.MultiheadAttention，eval 模式加 no_grad，但关掉快速路径，need_weights=False")
# lang: end

# %% [markdown] tags=["lang-en"]
# So the same layer, on the same inputs, returns NaN or 0 depending on its mode, on autograd and
# on `need_weights`, and `F.scaled_dot_product_attention` returns 0 only in recent versions.
# The package defines the row instead: `masked_softmax` gives a fully masked row all-zero
# weights, so its output row is zero, in every torch version and dtype, and the gradient stays
# finite. It finds those rows with `~keep.any(dim=-1, keepdim=True)`, gives them finite scores
# before the softmax and zero weights after it. Here is the same loss through it:

# %% [markdown] tags=["lang-zh"] en_hash="ac8ef0c43b"
# 可见同一个层、同样的输入，返回 NaN 还是 0，取决于它所处的模式、是否开启自动求导以及 `need_weights`；而 `F.scaled_dot_product_attention` 只在较新的版本里返回 0。工具包则明确规定了这一行的结果：`masked_softmax` 让全遮蔽行（掩码遮住了所有键的行）的权重全为 0，于是该行的输出为零，无论 torch 版本和数据类型如何都是这样，梯度也保持有限。它先用 `~keep.any(dim=-1, keepdim=True)` 找出这些行，在 softmax 之前给它们填上有限的分数，之后再把它们的权重置零。下面用它计算同样的损失：

# %%
q, k, v = (t.clone().requires_grad_() for t in (q1, k1, v1))
scores = q @ k.transpose(-2, -1) / 2.0
scores.retain_grad()
weights = masked_softmax(scores, keep1)
print(weights[0].detach())
loss = ((weights @ v) * probe).sum()
loss.backward()
ours1, _ = scaled_dot_product_attention(q1, k1, v1, keep_mask=keep1)
sdpa = F.scaled_dot_product_attention(q1, k1, v1, attn_mask=keep1)
# lang: en
claim("masked_softmax: row 1's weights are all 0, and the loss is finite",
      (weights[0, 1] == 0).all() and loss.isfinite())
claim("the gradients of q, k and v are all finite",
      torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all())
claim("every hidden score gets exactly zero gradient, and so does query 1's q",
      (scores.grad[~keep1] == 0).all() and (q.grad[0, 1] == 0).all())
claim("our attention equals F.scaled_dot_product_attention on the rows that keep a key",
      torch.allclose(ours1[0, [0, 2]], sdpa[0, [0, 2]], atol=1e-6))
claim("and its fully masked row is 0", (ours1[0, 1] == 0).all())
# lang: zh
claim("masked_softmax：第 1 行的权重全为 0，损失是有限的", (weights[0, 1] == 0).all() and loss.isfinite())
claim("q、k、v 的梯度全都是有限的",
      torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all())
claim("每个被遮住的分数的梯度都精确为零，查询 1 的 q 的梯度也是",
      (scores.grad[~keep1] == 0).all() and (q.grad[0, 1] == 0).all())
claim("在保留了键的行上，我们的注意力与 F.scaled_dot_product_attention 相同",
      torch.allclose(ours1[0, [0, 2]], sdpa[0, [0, 2]], atol=1e-6))
claim("而它的全遮蔽行是 0", (ours1[0, 1] == 0).all())
# lang: end

# %% [markdown] tags=["lang-en"]
# ### −∞ or a finite fill value?
#
# Many implementations write a large negative number such as −1e9 instead of −∞. In float32,
# on a row that keeps at least one key, that changes nothing: $e^{-10^9}$ underflows to exactly
# 0, so the weights are identical. On a fully masked row it does change something: every score
# is −1e9, the softmax sees equal scores, and the row gets **uniform** weights: the query
# attends to the padding, silently, with no NaN to warn you.

# %% [markdown] tags=["lang-zh"] en_hash="ce7bac5192"
# ### 用 −∞ 还是有限值填充？
#
# 很多实现写入的不是 −∞，而是 −1e9 这样很大的负数。在 float32 中，只要这一行至少保留了一个键，结果就没有任何变化：$e^{-10^9}$ 下溢为精确的 0，权重完全相同。在全遮蔽行（掩码遮住了所有键的行）上就不同了：每个分数都是 −1e9，softmax 看到的是一组相等的分数，这一行于是得到**均匀**的权重：查询悄无声息地关注了填充位置，连个 NaN 都不会出来提醒你。

# %%
s = scores1[0]  # (3, 3) float32
with_inf = s.masked_fill(~keep1[0], float("-inf")).softmax(dim=-1)
with_1e9 = s.masked_fill(~keep1[0], -1e9).softmax(dim=-1)
print(with_1e9[1])
# lang: en
claim("rows that keep a key: identical weights with −∞ and with −1e9", torch.equal(with_inf[[0, 2]], with_1e9[[0, 2]]))
claim("the fully masked row: uniform with −1e9, 1/3 on every hidden key",
      torch.allclose(with_1e9[1], torch.full((3,), 1 / 3)))
# lang: zh
claim("保留了键的行：用 −∞ 和用 −1e9 得到的权重完全相同", torch.equal(with_inf[[0, 2]], with_1e9[[0, 2]]))
claim("全遮蔽行：用 −1e9 时权重均匀，每个被遮住的键都分到 1/3", torch.allclose(with_1e9[1], torch.full((3,), 1 / 3)))
# lang: end

# %% [markdown] tags=["lang-en"]
# In float16 the largest finite number is 65504, so −1e9 does not exist there. `masked_fill`
# refuses to write it, and an additive −1e9 mask turns into −∞ when cast, bringing the NaN
# back. The safe finite value is `torch.finfo(torch.float16).min`, but on a fully masked row it
# still gives uniform weights. Only an explicit rule, as in `masked_softmax`, gives zeros in
# every dtype:

# %% [markdown] tags=["lang-zh"] en_hash="f1521e341b"
# 在 float16 中，最大的有限数是 65504，−1e9 根本无法表示。`masked_fill` 拒绝写入它；而 −1e9 的加性掩码在类型转换时会变成 −∞，NaN 又回来了。安全的有限值是 `torch.finfo(torch.float16).min`，但在全遮蔽行上它仍然给出均匀的权重。只有像 `masked_softmax` 那样明确规定的规则，才能在任何数据类型下都给出零：

# %%
half = s.half()
try:
    half.masked_fill(~keep1[0], -1e9)
    refusal = ""
except RuntimeError as error:
    refusal = str(error)
additive_1e9 = (half + torch.zeros(3, 3).masked_fill(~keep1[0], -1e9).half()).softmax(dim=-1)
smallest = torch.finfo(torch.float16).min
print(smallest)
with_smallest = half.masked_fill(~keep1[0], smallest).softmax(dim=-1)
ours_half = masked_softmax(half, keep1[0])
# lang: en
claim("−1e9 cast to float16 is −∞", torch.tensor(-1e9).half().isneginf())
claim("masked_fill refuses to write −1e9 into float16: a RuntimeError about overflow", "overflow" in refusal)
claim("an additive −1e9 mask in float16 brings the NaN back on the fully masked row", additive_1e9[1].isnan().all())
claim("torch.finfo(torch.float16).min gives that row uniform weights, 1/3 each",
      torch.allclose(with_smallest[1].float(), torch.full((3,), 1 / 3), atol=1e-3))
claim("masked_softmax gives it zeros, and stays float16",
      (ours_half[1] == 0).all() and ours_half.dtype == torch.float16)
# lang: zh
claim("−1e9 转换成 float16 就是 −∞", torch.tensor(-1e9).half().isneginf())
claim("masked_fill 拒绝把 −1e9 写进 float16：抛出一个关于溢出（overflow）的 RuntimeError", "overflow" in refusal)
claim("float16 下的 −1e9 加性掩码让全遮蔽行重新出现 NaN", additive_1e9[1].isnan().all())
claim("torch.finfo(torch.float16).min 给这一行均匀的权重，每个 1/3",
      torch.allclose(with_smallest[1].float(), torch.full((3,), 1 / 3), atol=1e-3))
claim("masked_softmax 给出零，而且仍然是 float16", (ours_half[1] == 0).all() and ours_half.dtype == torch.float16)
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: a masked softmax
#
# Write `my_masked_softmax(scores, keep_mask)`: the softmax over the last axis of `scores`
# (..., L_q, L_k), where keys with `keep_mask` False get exactly zero weight and a fully masked
# row gets all-zero weights, never NaN. `keep_mask` broadcasts against `scores`. The check also
# compares gradients, so a fully masked row must not send NaN backward either. `torch.softmax` is
# fine, but the check refuses the course's own `masks.masked_softmax`, which is this exercise's
# answer (and so every course function that calls it). Among its cases: a hidden key that scores
# far above the kept ones, and scores that are not contiguous.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.
#
# 1. find the fully masked rows: `~keep_mask.any(dim=-1, keepdim=True)`;
# 2. fill the hidden scores with −∞, and the fully masked rows with any finite number;
# 3. take the softmax, then set the fully masked rows' weights to 0.

# %% [markdown] tags=["lang-zh"] en_hash="38638948ba"
# ### 练习 3：带掩码的 softmax
#
# 写出 `my_masked_softmax(scores, keep_mask)`：对 `scores` (..., L_q, L_k) 沿最后一维做 softmax；`keep_mask` 为 False 的键权重必须精确为零；全遮蔽行的权重全为零，绝不能是 NaN。`keep_mask` 可以与 `scores` 广播。检查还会比较梯度，所以全遮蔽行在反向传播时也不能传回 NaN。可以用 `torch.softmax`，但检查不接受课程自带的 `masks.masked_softmax`（它正是本题的答案），因此也不接受调用了它的其他课程函数。检查用例里有分数远高于保留键的被遮住的键，也有不连续的分数。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。
#
# 1. 找出全遮蔽行：`~keep_mask.any(dim=-1, keepdim=True)`；
# 2. 被遮住的分数填入 −∞，全遮蔽行填入任意有限值；
# 3. 做 softmax，再把全遮蔽行的权重置为 0。

# %% tags=["exercise"] exercise="02.masked_softmax"
def my_masked_softmax(scores, keep_mask):
    # lang: en
    """scores: (..., L_q, L_k) float tensor; keep_mask: bool tensor, broadcastable to the shape of
    scores (without enlarging it), True where the query may attend to the key.

    Returns the weights: a tensor with the shape and dtype of scores, the softmax over the keys
    (the last axis) with exactly 0 on hidden keys. A fully masked row is all zeros, and so is
    its gradient: never NaN.
    """
    # lang: zh
    """scores：形状为 (..., L_q, L_k) 的浮点张量；keep_mask：bool 张量，能广播到 scores 的形状
    （而不把它撑大），查询可以关注该键时为 True。

    返回权重：形状和 dtype 都与 scores 相同，是沿键（最后一维）做的 softmax，被遮住的键权重精确为 0。
    全遮蔽行全为零，它的梯度也是：绝不能是 NaN。
    """
    # lang: end
    ### BEGIN SOLUTION
    nothing_kept = ~keep_mask.any(dim=-1, keepdim=True)  # (..., L_q, 1)
    # lang: en
    scores = scores.masked_fill(~keep_mask, float("-inf"))  # hidden keys: exp(-inf) = 0
    scores = scores.masked_fill(nothing_kept, 0.0)  # an all -inf row would give 0/0
    # lang: zh
    scores = scores.masked_fill(~keep_mask, float("-inf"))  # 被遮住的键：exp(-inf) = 0
    scores = scores.masked_fill(nothing_kept, 0.0)  # 全是 -inf 的一行会得到 0/0
    # lang: end
    return scores.softmax(dim=-1).masked_fill(nothing_kept, 0.0)
    ### END SOLUTION


# %%
from course_utils import check
check("02.masked_softmax", my_masked_softmax)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Spot the bug: whose mask does this head get?
#
# A popular from-scratch Transformer tutorial computes all heads of its multi-head attention
# with one batched call. It projects Q, K and V to (B, L, H, D), then moves the heads in front
# with `permute(2, 0, 1, 3)` and flattens to (H·B, L, D). In that layout slot $n$ holds head $h$
# of item $b$ with $n = h \cdot B + b$: **head-major**. Its mask, (B, L_q, L_k), is copied for
# the heads with `mask.unsqueeze(1).repeat(1, H, 1, 1)` and flattened to (B·H, L_q, L_k), where
# slot $n$ holds item $b$'s mask with $n = b \cdot H + h$: **batch-major**.
#
# Neither layout is wrong on its own: `nn.MultiheadAttention` itself reads a 3-D `attn_mask`
# (B·H, L_q, L_k) batch-major, exactly as this `repeat` builds it. The bug is that the two
# disagree. **The mask's layout must match the scores' layout**, and here whenever B > 1 some
# slots get another item's mask. With B = 3 and H = 2, the tutorial's layout (left), and the
# two ways to make the layouts agree: repeat the mask head-major like Q, K and V (middle), or
# lay Q, K and V out batch-major like the mask (right):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="a42dba4b70"
# ## 5. 找 bug：这个头拿到的是谁的掩码？
#
# 一篇流行的从零实现 Transformer 的教程，用一次批量调用算完多头注意力的所有头。它把 Q、K、V 投影成 (B, L, H, D)，再用 `permute(2, 0, 1, 3)` 把头维移到最前，展平成 (H·B, L, D)。在这种布局中，槽位 $n$ 存放第 $b$ 个样本的第 $h$ 个头，$n = h \cdot B + b$：**头优先**。而它的掩码 (B, L_q, L_k) 用 `mask.unsqueeze(1).repeat(1, H, 1, 1)` 为每个头复制一份，再展平成 (B·H, L_q, L_k)，其中槽位 $n$ 存放第 $b$ 个样本的掩码，$n = b \cdot H + h$：**批量优先**。
#
# 这两种布局本身都没有错：`nn.MultiheadAttention` 自己读取3 维 `attn_mask` (B·H, L_q, L_k) 时就是按批量优先，和这个 `repeat` 构造出来的完全一样。bug 在于两者不一致。**掩码的布局必须与分数的布局一致**，而这里只要 B > 1，就有槽位拿到别的样本的掩码。B = 3、H = 2 时，左图是这篇教程的布局；让两种布局一致有两种办法：把掩码也按头优先复制，与 Q、K、V 一致（中图）；或者把 Q、K、V 改成批量优先，与掩码一致（右图）：

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained")
viz.head_batch_picture(3, 2, mask_order="batch", qkv_order="head", ax=axes[0])
viz.head_batch_picture(3, 2, mask_order="head", qkv_order="head", ax=axes[1])
viz.head_batch_picture(3, 2, mask_order="batch", qkv_order="batch", ax=axes[2])
plt.show()

# %% [markdown] tags=["lang-en"]
# Left, the tutorial's layout: four of six slots pair a head with the wrong item's mask. Middle,
# fix 1: `mask.repeat(H, 1, 1)` is head-major, so slot $h \cdot B + b$ gets item $b$'s mask.
# Right, fix 2: `permute(0, 2, 1, 3)` gives (B, H, L, D), flattened to (B·H, L, D) with slot
# $b \cdot H + h$, the layout `nn.MultiheadAttention` uses. (Keeping the (B, H, L_q, L_k) layout
# throughout, as this course does, avoids the question altogether: a (B, 1, L_q, L_k) mask then
# broadcasts over the heads.)
#
# Below is a short re-creation of the tutorial's forward pass in our own code and keep-mask
# convention, with `qkv_order` and `mask_order` choosing each layout. It borrows the weights of
# an `nn.MultiheadAttention`, so PyTorch's layer is the referee.

# %% [markdown] tags=["lang-zh"] en_hash="8d3be2fc8e"
# 左图是这篇教程的布局：六个槽位中有四个把头和错误样本的掩码配在了一起。中图是修复方法 1：`mask.repeat(H, 1, 1)` 按头优先复制，于是槽位 $h \cdot B + b$ 拿到的正是第 $b$ 个样本的掩码。右图是修复方法 2：`permute(0, 2, 1, 3)` 得到 (B, H, L, D)，展平成 (B·H, L, D) 后槽位为 $b \cdot H + h$，也就是 `nn.MultiheadAttention` 所用的布局。（像本课程这样始终保持 (B, H, L_q, L_k) 的布局，就根本不会遇到这个问题：(B, 1, L_q, L_k) 的掩码会自动在各个头上广播。）
#
# 下面用我们自己的代码和保留掩码约定，简短地重现这篇教程的前向计算，`qkv_order` 和 `mask_order` 分别选择 Q/K/V 和掩码的布局。它借用一个 `nn.MultiheadAttention` 的权重，让 PyTorch 的层来当裁判。

# %%
def tutorial_mha(x, mha, keep, qkv_order="head", mask_order="batch"):
    # lang: en
    """The multi-head self-attention of a popular from-scratch Transformer tutorial, re-created
    with mha's weights. x: (B, L, E); keep: (B, L, L) keep mask. qkv_order and mask_order lay out
    the B·H axis of Q, K, V and of the mask: "head" is head-major (slot h·B + b), "batch" is
    batch-major (slot b·H + h). The tutorial uses "head" for Q, K, V and "batch" for the mask.
    Returns (output, weights), the weights in the layout of Q, K, V."""
    # lang: zh
    """用 mha 的权重重现一篇流行的从零实现 Transformer 的教程中的多头自注意力。x：(B, L, E)；
    keep：(B, L, L) 的保留掩码。qkv_order 和 mask_order 分别决定 Q、K、V 和掩码在 B·H 这一维上的布局：
    "head" 是头优先（槽位 h·B + b），"batch" 是批量优先（槽位 b·H + h）。这篇教程对 Q、K、V 用 "head"，
    对掩码用 "batch"。返回 (output, weights)，权重按 Q、K、V 的布局排列。"""
    # lang: end
    B, L, E = x.shape
    H = mha.num_heads
    D = E // H
    W_q, W_k, W_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)

    def split(t):  # (B, L, E) -> (B, L, H, D) -> (B·H, L, D)
        t = t.view(B, L, H, D)
        if qkv_order == "head":
            return t.permute(2, 0, 1, 3).reshape(H * B, L, D)  # (H, B, L, D): h·B + b
        return t.permute(0, 2, 1, 3).reshape(B * H, L, D)  # (B, H, L, D): b·H + h

    q, k, v = split(x @ W_q.T + b_q), split(x @ W_k.T + b_k), split(x @ W_v.T + b_v)
    if mask_order == "batch":
        mask = keep.unsqueeze(1).repeat(1, H, 1, 1).view(B * H, L, L)  # (B, H, L, L): b·H + h
    else:
        mask = keep.repeat(H, 1, 1)  # (H·B, L, L): h·B + b
    out, weights = scaled_dot_product_attention(q, k, v, keep_mask=mask)  # (B·H, L, D)
    if qkv_order == "head":
        out = out.view(H, B, L, D).permute(1, 2, 0, 3)  # (B, L, H, D)
    else:
        out = out.view(B, H, L, D).permute(0, 2, 1, 3)  # (B, L, H, D)
    return mha.out_proj(out.reshape(B, L, E)), weights


# %% [markdown] tags=["lang-en"]
# Three sequences of lengths 5, 3 and 4, two heads, in float64 so that "equal" means equal to
# many digits. Compare the tutorial's layout and both fixes with `nn.MultiheadAttention` given
# the same padding:

# %% [markdown] tags=["lang-zh"] en_hash="22b9883d8f"
# 三条序列，长度分别为 5、3、4，两个头，用 float64 计算，让“相等”精确到很多位。给 `nn.MultiheadAttention` 同样的填充，把这篇教程的布局和两种修复逐一与它比较：

# %%
B, H, L, E = 3, 2, 5, 8
# lang: en
torch.manual_seed(1)  # the weights nn.MultiheadAttention draws
# lang: zh
torch.manual_seed(1)  # nn.MultiheadAttention 随机初始化的权重
# lang: end
mha3 = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
x = torch.randn(B, L, E, generator=g, dtype=torch.float64)
lengths = torch.tensor([5, 3, 4])
pad = padding_mask(lengths, L)  # (B, 1, 1, L)
# lang: en
keep = pad[:, 0].expand(B, L, L)  # (B, L, L), the tutorial's mask shape
# lang: zh
keep = pad[:, 0].expand(B, L, L)  # (B, L, L)，这篇教程的掩码形状
# lang: end

with torch.no_grad():
    reference, _ = mha3(x, x, x, key_padding_mask=masks.to_key_padding(pad))
    buggy, buggy_weights = tutorial_mha(x, mha3, keep, qkv_order="head", mask_order="batch")
    fix_mask, _ = tutorial_mha(x, mha3, keep, qkv_order="head", mask_order="head")
    fix_qkv, _ = tutorial_mha(x, mha3, keep, qkv_order="batch", mask_order="batch")
gap = (buggy - reference).abs().max().item()
# lang: en
claim(f"the tutorial's layout (head-major Q/K/V, batch-major mask) differs from nn.MultiheadAttention by {gap:.2f}",
      gap > 0.1)
claim("fix 1, the mask repeated head-major like Q/K/V, equals nn.MultiheadAttention",
      torch.allclose(fix_mask, reference))
claim("fix 2, Q/K/V laid out batch-major like the mask, equals nn.MultiheadAttention",
      torch.allclose(fix_qkv, reference))
# lang: zh
claim(f"这篇教程的布局（Q/K/V 头优先，掩码批量优先）与 nn.MultiheadAttention 相差 {gap:.2f}", gap > 0.1)
claim("修复方法 1：掩码像 Q/K/V 一样按头优先复制，结果等于 nn.MultiheadAttention", torch.allclose(fix_mask, reference))
claim("修复方法 2：Q/K/V 像掩码一样按批量优先排列，结果等于 nn.MultiheadAttention", torch.allclose(fix_qkv, reference))
# lang: end

# %% [markdown] tags=["lang-en"]
# And PyTorch's own layout: give `nn.MultiheadAttention` the tutorial's batch-major mask itself,
# as a 3-D `attn_mask`, and compare with each sequence run alone under its own (L, L) mask. The
# head-major mask of fix 1, handed to the same layer, is now the wrong one:

# %% [markdown] tags=["lang-zh"] en_hash="a7117cb9cc"
# 再看 PyTorch 自己的布局：把这篇教程的批量优先掩码原样作为3 维 `attn_mask` 交给 `nn.MultiheadAttention`，再与每条序列单独用它自己的 (L, L) 掩码计算的结果比较。修复方法 1 的头优先掩码交给同一个层，这回反倒成了错的：

# %%
ignore = masks.to_ignore(keep)  # (B, L, L)
batch_major = ignore.unsqueeze(1).repeat(1, H, 1, 1).view(B * H, L, L)  # b·H + h
head_major = ignore.repeat(H, 1, 1)  # h·B + b
with torch.no_grad():
    by_batch_major, _ = mha3(x, x, x, attn_mask=batch_major)
    by_head_major, _ = mha3(x, x, x, attn_mask=head_major)
    one_by_one = torch.cat([mha3(x[b:b + 1], x[b:b + 1], x[b:b + 1], attn_mask=ignore[b])[0] for b in range(B)])
# lang: en
claim("nn.MultiheadAttention with the batch-major (B·H, L, L) attn_mask equals each sequence alone under its mask",
      torch.allclose(by_batch_major, one_by_one))
claim("and equals the key_padding_mask result", torch.allclose(by_batch_major, reference))
claim("given the head-major mask, it is wrong: nn.MultiheadAttention reads a 3-D attn_mask batch-major",
      not torch.allclose(by_head_major, reference))
# lang: zh
claim("给 nn.MultiheadAttention 批量优先的 (B·H, L, L) attn_mask，结果等于每条序列用自己的掩码单独计算的结果",
      torch.allclose(by_batch_major, one_by_one))
claim("也等于用 key_padding_mask 的结果", torch.allclose(by_batch_major, reference))
claim("给它头优先的掩码，结果就错了：nn.MultiheadAttention 按批量优先读取 3 维 attn_mask",
      not torch.allclose(by_head_major, reference))
# lang: end

# %% [markdown] tags=["lang-en"]
# Which (head, item) slots of the tutorial's layout put weight on their own item's padding?
# Slot $n = h \cdot B + b$ of the weights belongs to head $h$ of item $b$:

# %% [markdown] tags=["lang-zh"] en_hash="41d722ad10"
# 在这篇教程的布局里，哪些（头，样本）槽位把权重放在了自己样本的填充位置上？权重的槽位 $n = h \cdot B + b$ 属于第 $b$ 个样本的第 $h$ 个头：

# %%
reads_padding = set()
for n in range(B * H):
    h, b = divmod(n, B)
    if buggy_weights[n][:, lengths[b]:].sum() > 0:
        reads_padding.add((h, b))
# lang: en
claim("exactly two slots read their own padding: (head 0, item 1) and (head 1, item 1)",
      reads_padding == {(0, 1), (1, 1)})
# lang: zh
claim("恰好有两个槽位读到了自己的填充：（头 0，样本 1）和（头 1，样本 1）", reads_padding == {(0, 1), (1, 1)})
# lang: end

# %% [markdown] tags=["lang-en"]
# Item 1, the shortest, has both heads reading its padding; other slots lose real tokens of
# their own item instead (head 0 of item 2 gets item 1's mask and cannot see its key 3). With a
# single sequence the two orders coincide ($n = h$ either way), so a test with B = 1 never sees
# the bug:

# %% [markdown] tags=["lang-zh"] en_hash="196d785ac2"
# 最短的样本 1，两个头都读到了它的填充；另一些槽位则反过来丢掉了自己样本的真实词元（样本 2 的头 0 拿到了样本 1 的掩码，看不到它的键 3）。只有一条序列时，两种顺序完全一致（两种情况下都是 $n = h$），所以用 B = 1 测试永远发现不了这个 bug：

# %%
with torch.no_grad():
    one_reference, _ = mha3(x[1:2], x[1:2], x[1:2], key_padding_mask=masks.to_key_padding(pad[1:2]))
    one_buggy, _ = tutorial_mha(x[1:2], mha3, keep[1:2])
# lang: en
claim("with B = 1 the tutorial's layout equals nn.MultiheadAttention", torch.allclose(one_buggy, one_reference))
# lang: zh
claim("B = 1 时，这篇教程的布局与 nn.MultiheadAttention 的结果相同", torch.allclose(one_buggy, one_reference))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. Explore
#
# Move the two sliders to choose the lengths of a batch of two sequences (padded to 6), and tick
# "causal mask" to add the look-ahead mask. For each sequence you see the keep mask and the
# attention weights it gives to fixed random queries and keys. Set a length to 0 to see fully
# masked rows: their weights are all zero.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="32998a274d"
# ## 6. 动手探索
#
# 拖动两个滑块，选择一个批量中两条序列的长度（填充到 6），勾选“因果掩码”即可加上前瞻掩码。每条序列都会显示它的保留掩码，以及这个掩码作用在固定的随机查询和键上得到的注意力权重。把某个长度设为 0，就能看到全遮蔽行：它们的权重全为零。

# %% tags=["nbval-ignore-output"]
mask_explorer(length_1=6, length_2=3, causal=False)

# %% [markdown] tags=["lang-en"]
# The explorer draws with `mask_view`, an ordinary function. Here it is for lengths 4 and 2 with
# the causal mask, and for an empty first sequence:

# %% [markdown] tags=["lang-zh"] en_hash="0fb627888f"
# 探索器用普通函数 `mask_view` 作图。下面是长度为 4 和 2、加上因果掩码的情形，以及第一条序列为空的情形：

# %%
for lengths_and_causal in ((4, 2, True), (0, 5, False)):
    _, summary = mask_view(*lengths_and_causal)
    print(summary)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - A mask says which keys each query may attend to. Padding masks hide the filler of short
#   sequences, (B, 1, 1, L_k); causal masks hide the future, a lower triangle (L_q, L_k),
#   aligned at the top left (`is_causal=True`) or, for queries that are the last positions as
#   in decoding with a KV cache, at the bottom right (`causal_lower_right`).
# - Masks broadcast from the right. Give them the scores' number of axes, size 1 where they do
#   not vary; a (B, L_k) or (B, 1, L_k) mask against (B, H, L_q, L_k) scores is wrong, silently
#   so when sizes happen to match, and a (B, L_k) mask against one query's (B, H, 1, L_k) scores
#   grows the result.
# - Conventions differ: True means keep for this course and `F.scaled_dot_product_attention`,
#   ignore for `nn.MultiheadAttention` and the from-scratch Transformer tutorial; float masks
#   are added to the scores (0 and −∞), as `generate_square_subsequent_mask` builds them;
#   `nn.MultiheadAttention`'s `is_causal` is only a hint that needs the mask. `course_utils.masks`
#   converts at the boundary and refuses to guess.
# - A fully masked row is NaN with the naive recipe, and its NaN reaches the gradients of v (with
#   an additive mask, of q and k too). PyTorch returns NaN or 0 depending on the function, the
#   path and the version; this course defines it as 0. A finite fill value hides the problem by
#   attending to the padding, and −1e9 is −∞ in float16.
# - In a (B·H) layout the mask's order must match the order of Q, K and V: head-major with
#   head-major, batch-major with batch-major (`nn.MultiheadAttention`'s 3-D `attn_mask` is
#   batch-major); B = 1 hides a mismatch.
#
# Next, lesson 03: self-attention and cross-attention, learned on tiny toy tasks.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="967553f3c1"
# ## 小结
#
# - 掩码说明每个查询可以关注哪些键。填充掩码遮住短序列的填充，形状为 (B, 1, 1, L_k)；因果掩码遮住未来，是一个下三角 (L_q, L_k)，按左上角对齐（`is_causal=True`），或者在查询是最后几个位置时（如带 KV 缓存的解码）按右下角对齐（`causal_lower_right`）。
# - 掩码从右往左广播。让它的维数与分数相同，不变化的维度大小取 1；(B, L_k) 或 (B, 1, L_k) 的掩码配 (B, H, L_q, L_k) 的分数是错的，在大小碰巧相等时还不会报错；而 (B, L_k) 的掩码配只有一个查询的 (B, H, 1, L_k) 分数，会把结果撑大。
# - 约定各不相同：在本课程和 `F.scaled_dot_product_attention` 中 True 表示保留，在 `nn.MultiheadAttention` 和那篇从零实现 Transformer 的教程中 True 表示忽略；浮点掩码加到分数上（0 和 −∞），`generate_square_subsequent_mask` 构造的就是这种掩码；`nn.MultiheadAttention` 的 `is_causal` 只是一个提示，仍然需要掩码。`course_utils.masks` 在边界上做转换，并且拒绝猜测。
# - 全遮蔽行：朴素做法得到 NaN，而且这个 NaN 会进入 v 的梯度（用加性掩码时还会进入 q 和 k 的梯度）。PyTorch 返回 NaN 还是 0，取决于函数、代码路径和版本；本课程规定它为 0。有限的填充值会让查询去关注填充位置，把问题掩盖起来；而且在 float16 中 −1e9 就是 −∞。
# - 在 (B·H) 布局中，掩码的顺序必须与 Q、K、V 的顺序一致：头优先配头优先，批量优先配批量优先（`nn.MultiheadAttention` 的3 维 `attn_mask` 是批量优先）；B = 1 会掩盖顺序不一致的问题。
#
# 下一课（第 03 课）：自注意力与交叉注意力，在小小的玩具任务上学出来。
