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
# 1. build a padding mask and a causal (look-ahead) mask and see what they do to the weights;
# 2. learn which mask shapes broadcast correctly against (B, H, L_q, L_k) scores;
# 3. meet every mask convention PyTorch and our two seed tutorials use, and convert between them;
# 4. find out what happens to a query whose keys are all hidden, and why −1e9 is not −∞;
# 5. find and fix a real bug: a multi-head layer that hands each head another item's mask.
#
# In this course a mask is always a **keep mask**: a bool tensor, True where the query may
# attend to the key. There are three exercises.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="271893fee7"
# # 掩码
#
# 注意力让每个查询都能看到每个键。但有些键常常必须藏起来：一是为了把长短不一的序列放进同一个批量而补上的填充；二是在解码器里，句子中排在后面的词。**掩码**（mask）对每一个（查询, 键）对说明：这个查询能不能关注这个键。
#
# 本课你将：
#
# 1. 构造填充掩码和因果（前瞻）掩码，看看它们如何改变权重；
# 2. 弄清哪些形状的掩码能与 (B, H, L_q, L_k) 的分数正确广播；
# 3. 认识 PyTorch 和两篇种子教程用到的所有掩码约定，并在它们之间转换；
# 4. 看看一个查询的所有键都被遮住时会发生什么，以及为什么 −1e9 不等于 −∞；
# 5. 找出并修复一个真实的 bug：一个多头层把别的样本的掩码交给了某些头。
#
# 在本课程中，掩码总是**保留掩码**：一个 bool 张量，查询可以关注该键时为 True。本课共有三道练习。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import check, masks, setup, viz
from course_utils.attention import scaled_dot_product_attention
from course_utils.masks import causal_mask, masked_softmax, padding_mask
from course_utils.validation import ArgumentError
from course_utils.viz import heatmap, mask_picture
from course_utils.widgets import mask_explorer, mask_view

setup(lang="en")
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights

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
x = torch.randn(B, L, d, generator=g)  # self-attention: queries, keys and values are x
keep = padding_mask(lengths, L)  # (B, 1, 1, L_k)
print(tuple(keep.shape))
print(keep[1, 0, 0])  # sequence 1: three real tokens, then two padding positions

_, plain = scaled_dot_product_attention(x, x, x)  # (B, L, L), no mask
_, padded = scaled_dot_product_attention(x, x, x, keep_mask=keep[:, 0])  # (B, 1, L_k) for 3-D scores
print(plain[1, :, 3:].sum().item() > 0)  # without the mask, sequence 1 attends to its padding
print(torch.equal(padded[1, :, 3:], torch.zeros(L, 2)))  # with it, not at all
print(torch.allclose(padded.sum(dim=-1), torch.ones(B, L)))  # and each row still sums to 1

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
# included (a token may look at itself).
#
# `causal_mask(L_q, L_k)` returns that (L_q, L_k) triangle. When $L_q \ne L_k$ it is aligned
# at the top left, as `F.scaled_dot_product_attention(..., is_causal=True)` aligns it: query
# $i$ sees keys $0 \dots i$.

# %% [markdown] tags=["lang-zh"] en_hash="3f0ce8b581"
# ### 因果（前瞻）掩码
#
# 解码器逐个词元地生成序列，所以训练时位置 $i$ 上的查询不能看到 $i$ 之后的词元：在生成的时刻，它们还不存在。因果掩码在 $j \le i$ 时为查询 $i$ 保留键 $j$：这是一个包含对角线的下三角（词元可以看自己）。
#
# `causal_mask(L_q, L_k)` 返回这个 (L_q, L_k) 的三角形。$L_q \ne L_k$ 时，它按左上角对齐，与 `F.scaled_dot_product_attention(..., is_causal=True)` 的对齐方式一致：查询 $i$ 看得到键 $0 \dots i$。

# %%
print(causal_mask(4))
print(causal_mask(3, 5))

x0 = x[:1]  # one sequence, (1, L, d)
out, causal = scaled_dot_product_attention(x0, x0, x0, keep_mask=causal_mask(L))
print(torch.allclose(out, F.scaled_dot_product_attention(x0, x0, x0, is_causal=True), atol=1e-6))

# %% [markdown] tags=["lang-en"]
# The proof that nothing leaks from the future: change the last token and run again. Every
# output before the last position stays exactly the same.

# %% [markdown] tags=["lang-zh"] en_hash="0bcb78831e"
# 证明没有信息从未来泄漏：改动最后一个词元，再算一遍。最后一个位置之前的每个输出都完全不变。

# %%
changed = x0.clone()
changed[0, -1] = torch.randn(d, generator=g)
out_changed, _ = scaled_dot_product_attention(changed, changed, changed, keep_mask=causal_mask(L))
print(torch.equal(out[0, :-1], out_changed[0, :-1]), torch.equal(out[0, -1], out_changed[0, -1]))

fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
mask_picture(causal_mask(L), ax=axes[0], title="causal_mask(5)")
heatmap(causal[0], ax=axes[1], title="keep_mask=causal_mask(5)", vmax=1.0, colorbar=False)
plt.show()

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the causal mask
#
# Write `my_causal_mask(L_q, L_k)`: a bool tensor of shape (L_q, L_k), True where key $j \le$
# query $i$. `torch.ones(..., dtype=torch.bool).tril()` does it in one line; so does comparing
# a column of query positions with a row of key positions. The check tries $L_q \ne L_k$ both
# ways and $1 \times 1$.

# %% [markdown] tags=["lang-zh"] en_hash="00a9fa625b"
# ### 练习 1：因果掩码
#
# 写出 `my_causal_mask(L_q, L_k)`：一个形状为 (L_q, L_k) 的 bool 张量，键 $j \le$ 查询 $i$ 时为 True。`torch.ones(..., dtype=torch.bool).tril()` 一行就能做到；把一列查询位置与一行键位置相比较也可以。检查会测试 $L_q \ne L_k$ 的两种情形以及 $1 \times 1$。

# %% tags=["exercise"] exercise="02.causal_mask"
def my_causal_mask(L_q, L_k):
    """Keep mask of a decoder: (L_q, L_k) bool, True where key j <= query i."""
    ### BEGIN SOLUTION
    query_position = torch.arange(L_q)[:, None]  # (L_q, 1)
    key_position = torch.arange(L_k)[None, :]  # (1, L_k)
    return key_position <= query_position  # (L_q, L_k)
    ### END SOLUTION


# %%
check("02.causal_mask", my_causal_mask)

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: padding and causal together
#
# A decoder batch needs both masks: key $j$ is visible to query $i$ of sequence $b$ when it is
# a real token **and** not in the future. Write `my_decoder_mask(lengths, max_len)` returning
# the keep mask of shape (B, 1, L, L). Combine the two masks with `&`; broadcasting turns
# (B, 1, 1, L) and (L, L) into (B, 1, L, L). You may use `padding_mask` and `causal_mask`. The
# check includes a sequence of length 0, whose rows are all hidden.

# %% [markdown] tags=["lang-zh"] en_hash="3c0bac2281"
# ### 练习 2：同时使用填充掩码和因果掩码
#
# 解码器的批量两种掩码都需要：对第 $b$ 条序列的查询 $i$，键 $j$ 既是真实词元、**又**不在未来时才可见。写出 `my_decoder_mask(lengths, max_len)`，返回形状为 (B, 1, L, L) 的保留掩码。用 `&` 合并两个掩码；广播会把 (B, 1, 1, L) 与 (L, L) 变成 (B, 1, L, L)。可以使用 `padding_mask` 和 `causal_mask`。检查用例里有一条长度为 0 的序列，它的所有行都被遮住。

# %% tags=["exercise"] exercise="02.decoder_mask"
def my_decoder_mask(lengths, max_len):
    """lengths: (B,) integers. Returns the keep mask (B, 1, max_len, max_len) of a padded decoder batch."""
    ### BEGIN SOLUTION
    real_key = torch.arange(max_len) < lengths[:, None]  # (B, L): key j is a real token
    not_future = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # (L, L): key j <= query i
    return real_key[:, None, None, :] & not_future  # (B, 1, 1, L) & (L, L) -> (B, 1, L, L)
    ### END SOLUTION


# %%
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
# thing? Each line prints the mask's axes and the two answers.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="fbda819d74"
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
# 形状错误时，只有在大小冲突的情况下才会明确报错。如果大小碰巧相等（$B = H$ 或 $B = L_q$），代码照样运行，却悄无声息地把另一条序列的掩码交给了某个头或某个查询。下面的代码对每个形状检查两件事：能不能广播？含义对不对？每一行依次打印掩码的各个维度和这两个问题的答案。

# %%
SCORES_AXES = ("B", "H", "L_q", "L_k")
MASKS = [("L_k",), ("B", "1", "1", "L_k"), ("B", "1", "L_q", "L_k"), ("1", "1", "L_q", "L_k"),
         ("B", "1", "L_k"), ("B", "L_k")]


def try_mask(axes, sizes):
    """Broadcast a mask with named `axes` against scores of `sizes` (B, H, L_q, L_k).
    Returns (broadcasts?, every mask axis lands on the scores axis of its name or has size 1?)."""
    size = dict(zip(SCORES_AXES, sizes), **{"1": 1})
    try:
        torch.broadcast_shapes(tuple(size[a] for a in axes), sizes)
    except RuntimeError:
        return False, False
    lands_on = SCORES_AXES[len(SCORES_AXES) - len(axes):]  # aligned from the right
    return True, all(a == "1" or a == s for a, s in zip(axes, lands_on))


for sizes in [(2, 4, 3, 5), (2, 2, 3, 5), (2, 4, 2, 5)]:  # then B = H, then B = L_q
    print("scores.shape =", sizes)
    for axes in MASKS:
        broadcasts, right = try_mask(axes, sizes)
        print(f"   ({', '.join(axes)})".ljust(22), broadcasts, right)

# %% [markdown] tags=["lang-en"]
# With B = 2, H = 4, L_q = 3 both wrong shapes fail. With B = H = 2, the (B, 1, L_k) mask
# broadcasts and is still wrong; with B = L_q = 2, so does (B, L_k). Here is how the shapes
# line up in the two silent cases, beside the right padding mask (blue: a size-1 axis that is
# repeated):

# %% [markdown] tags=["lang-zh"] en_hash="541c81c0e6"
# 当 B = 2、H = 4、L_q = 3 时，两个错误形状都会报错。当 B = H = 2 时，(B, 1, L_k) 的掩码能广播，但依然是错的；当 B = L_q = 2 时，(B, L_k) 也是如此。下图画出这两种悄无声息的情形中形状是怎样对齐的，旁边是正确的填充掩码（蓝色表示被重复的大小为 1 的维度）：

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 2.4), layout="constrained")
cases = [((2, 1, 1, 5), (2, 4, 3, 5), "(B, 1, 1, L_k)"), ((2, 1, 5), (2, 2, 3, 5), "(B, 1, L_k), B = H"),
         ((2, 5), (2, 4, 2, 5), "(B, L_k), B = L_q")]
for ax, (mask_shape, scores_shape, title) in zip(axes, cases):
    viz.broadcast_picture(mask_shape, scores_shape, ax=ax, names=("keep", "scores"), axis_names=SCORES_AXES)
    ax.set_title(title, fontsize=10)
plt.show()

# %% [markdown] tags=["lang-en"]
# The rule: give a mask as many axes as the scores, with size 1 where it does not vary. The
# package's functions refuse a mask that cannot broadcast to the scores:

# %% [markdown] tags=["lang-zh"] en_hash="e618f3dee0"
# 规则是：让掩码的维数与分数相同，不变化的维度大小取 1。对于无法广播到分数形状的掩码，工具包的函数会直接拒绝：

# %%
scores = torch.randn(2, 4, 3, 5, generator=g)
for mask in (padding_mask(lengths, 5), padding_mask(lengths, 5)[:, 0]):  # (B, 1, 1, L_k), then (B, 1, L_k)
    try:
        print(tuple(masked_softmax(scores, mask).shape))
    except ArgumentError as error:
        print(error)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. One mask, many conventions
#
# Every library agrees on what a mask is for, and they disagree on which way it points:
#
# | where | argument | True / 1 / 0.0 means | `course_utils.masks` |
# | --- | --- | --- | --- |
# | this course | `keep_mask`, bool | True: may attend | (the canonical form) |
# | `F.scaled_dot_product_attention` | bool `attn_mask` | True: may attend | the keep mask itself |
# | `F.scaled_dot_product_attention` | float `attn_mask` | added to the scores: 0 keep, −∞ drop | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | bool `attn_mask`, (L_q, L_k) or (B·H, L_q, L_k) | True: must **not** attend | `to_ignore` / `from_ignore` |
# | `nn.MultiheadAttention` | `key_padding_mask`, (B, L_k) | True: padding, ignore | `to_key_padding` / `from_key_padding` |
# | seed 001 | `masked_fill(mask == 0, -inf)` | 0 hidden, 1 keep | `from_zero_hidden` |
# | seed 002 | `masked_fill(mask, -inf)` | True: masked | `to_ignore` / `from_ignore` |
#
# Let us prove each row: the same padded batch through every convention gives the same output.
# For `nn.MultiheadAttention` we take one head and set its projections to the identity, so that
# it computes plain attention on the inputs, like the others.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="874bb1b83a"
# ## 3. 同一个掩码，多种约定
#
# 各个库对掩码的用途意见一致，对它指向哪一边却各执一词：
#
# | 出处 | 参数 | True / 1 / 0.0 的含义 | `course_utils.masks` |
# | --- | --- | --- | --- |
# | 本课程 | `keep_mask`，bool | True：可以关注 | （标准形式） |
# | `F.scaled_dot_product_attention` | bool `attn_mask` | True：可以关注 | 就是保留掩码本身 |
# | `F.scaled_dot_product_attention` | 浮点 `attn_mask` | 加到分数上：0 保留，−∞ 丢弃 | `to_additive` / `from_additive` |
# | `nn.MultiheadAttention` | bool `attn_mask`，(L_q, L_k) 或 (B·H, L_q, L_k) | True：**不得**关注 | `to_ignore` / `from_ignore` |
# | `nn.MultiheadAttention` | `key_padding_mask`，(B, L_k) | True：填充，忽略 | `to_key_padding` / `from_key_padding` |
# | 种子教程 001 | `masked_fill(mask == 0, -inf)` | 0 遮住，1 保留 | `from_zero_hidden` |
# | 种子教程 002 | `masked_fill(mask, -inf)` | True：遮住 | `to_ignore` / `from_ignore` |
#
# 下面逐行验证：同一个带填充的批量，经过每一种约定，得到的输出都相同。对于 `nn.MultiheadAttention`，我们只用一个头，并把它的投影设为单位矩阵，使它和其他函数一样，直接在输入上计算普通的注意力。

# %%
B, L_q, L_k, E = 2, 4, 5, 8
q, k, v = (torch.randn(B, n, E, generator=g) for n in (L_q, L_k, L_k))
keep = padding_mask(torch.tensor([5, 3]), L_k)[:, 0]  # (B, 1, L_k): single-head scores are (B, L_q, L_k)

mha = nn.MultiheadAttention(E, num_heads=1, batch_first=True)
with torch.no_grad():  # identity projections: mha computes softmax(q kᵀ / √E) v
    mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
    mha.in_proj_bias.zero_()
    mha.out_proj.weight.copy_(torch.eye(E))
    mha.out_proj.bias.zero_()


def seed001_attention(q, k, v, mask):
    """A re-creation of seed 001's masking: positions where mask == 0 are hidden. -> (output, weights)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


def seed002_attention(q, k, v, mask):
    """A re-creation of seed 002's masking: True is masked (and the mask must be full-size). -> (output, weights)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(mask.view(scores.shape), float("-inf")).softmax(dim=-1)
    return weights @ v, weights


ours, _ = scaled_dot_product_attention(q, k, v, keep_mask=keep)
with torch.no_grad():
    outputs = {
        "F.sdpa(attn_mask=keep)": F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
        "F.sdpa(attn_mask=to_additive(keep))": F.scaled_dot_product_attention(
            q, k, v, attn_mask=masks.to_additive(keep)),
        "mha(attn_mask=to_ignore(keep))": mha(q, k, v, attn_mask=masks.to_ignore(keep).expand(B, L_q, L_k))[0],
        "mha(key_padding_mask=to_key_padding(keep))": mha(q, k, v, key_padding_mask=masks.to_key_padding(keep))[0],
        "seed001(keep.int())": seed001_attention(q, k, v, keep.int())[0],
        "seed002(to_ignore(keep))": seed002_attention(q, k, v, masks.to_ignore(keep).expand(B, L_q, L_k))[0],
    }
for name, output in outputs.items():
    print(f"{name:<44}", torch.allclose(output, ours, atol=1e-6))

# %% [markdown] tags=["lang-en"]
# The converters translate in both directions without losing anything:

# %% [markdown] tags=["lang-zh"] en_hash="74ab42d969"
# 这些转换函数可以双向转换，不丢失任何信息：

# %%
print(masks.to_key_padding(keep))  # (B, L_k), True at padding
print(torch.equal(masks.from_key_padding(masks.to_key_padding(keep)), keep[:, None]))  # back as (B, 1, 1, L_k)
print(torch.equal(masks.from_ignore(masks.to_ignore(keep)), keep))
print(torch.equal(masks.from_additive(masks.to_additive(keep)), keep))
print(torch.equal(masks.from_zero_hidden(keep.int()), keep), torch.equal(masks.from_zero_hidden(keep.float()), keep))

# %% [markdown] tags=["lang-en"]
# ### Mixing conventions up
#
# Hand a mask to code that reads the other convention and nothing crashes: the mask is simply
# read backwards. Seed 001's code, given an additive mask (0 keep, −∞ drop), hides every key
# whose value is 0, the real tokens, and attends only to the padding; sequence 0, which has no
# padding, gets a row with nothing left and turns into NaN:

# %% [markdown] tags=["lang-zh"] en_hash="91d1e20b2e"
# ### 约定混用
#
# 把掩码交给按另一种约定解读它的代码，程序并不会崩溃：掩码只是被反着读了。把加性掩码（0 保留，−∞ 丢弃）交给种子教程 001 的代码，它会遮住所有值为 0 的键，也就是真实词元，只去关注填充；序列 0 没有填充，它的每一行什么都不剩，于是变成 NaN：

# %%
inverted, inverted_weights = seed001_attention(q, k, v, masks.to_additive(keep))
print(torch.equal(inverted_weights[1, :, :3], torch.zeros(L_q, 3)))  # sequence 1: zero weight on its 3 real tokens
print(inverted[0].isnan().all().item())  # sequence 0: NaN everywhere

# %% [markdown] tags=["lang-en"]
# So `course_utils.masks` refuses to guess. A 0/1 integer mask could mean keep or ignore; a
# float mask with values like −1e9 or 0.5 is a bias on the scores, not a mask; a (B, L_k) mask
# could be read as (L_q, L_k). Each gets an error that says what was given and what is needed:

# %% [markdown] tags=["lang-zh"] en_hash="023c8bbed9"
# 所以 `course_utils.masks` 拒绝猜测。0/1 的整数掩码可能表示保留，也可能表示忽略；含有 −1e9、0.5 这类值的浮点掩码是加在分数上的偏置，而不是掩码；(B, L_k) 的掩码可能被当成 (L_q, L_k)。遇到这些情况，都会报错，说明收到了什么、需要什么：

# %%
ambiguous = [
    lambda: masks.from_ignore(keep.int()),  # is 1 "keep" or "ignore"?
    lambda: masks.from_additive(torch.tensor([0.0, -1e9, 0.5])),  # a bias, not a mask
    lambda: masks.from_zero_hidden(masks.to_additive(keep)),  # an additive mask read as 0 = hidden
    lambda: masks.to_key_padding(keep[:, 0]),  # (B, L_k): which axis is the batch?
]
for convert in ambiguous:
    try:
        convert()
    except ArgumentError as error:
        print(error)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. Fully masked rows
#
# Sometimes a query has no key left to attend to: an empty sequence, a padded query under a
# mask that also hides queries, a window with nothing in it. The naive recipe writes −∞ into
# every hidden score, so that row is all −∞, and the softmax divides $0$ by $0$:
#
# $$\mathrm{softmax}(-\infty, \dots, -\infty)_j = \frac{e^{-\infty}}{\sum_{j'} e^{-\infty}} = \frac{0}{0} = \mathrm{NaN}.$$
#
# A NaN does not stay in its row: the next layer mixes it into every position, and the
# gradient carries it back into every weight. Below, query 1 of a single sequence may see no key.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="3c267c387a"
# ## 4. 全遮蔽行
#
# 有时一个查询没有任何键可以关注：序列是空的；掩码把填充位置的查询也遮住了；某个窗口里什么都没有。按朴素的做法，每个被遮住的分数都写入 −∞，于是这一行全是 −∞，softmax 就成了 $0$ 除以 $0$：
#
# $$\mathrm{softmax}(-\infty, \dots, -\infty)_j = \frac{e^{-\infty}}{\sum_{j'} e^{-\infty}} = \frac{0}{0} = \mathrm{NaN}.$$
#
# NaN 不会老老实实待在自己那一行：下一层会把它混进每一个位置，梯度也会把它带回每一个权重。下面这个序列中，查询 1 一个键都看不到。

# %%
q1, k1, v1 = (torch.randn(1, 3, 4, generator=g) for _ in range(3))
keep1 = torch.tensor([[True, True, False], [False, False, False], [True, True, True]]).unsqueeze(0)  # (1, 3, 3)
print(keep1[0])

scores1 = (q1 @ k1.transpose(-2, -1) / 2.0).requires_grad_()  # √d_k = 2
naive = scores1.masked_fill(~keep1, float("-inf")).softmax(dim=-1)
print(naive[0].detach())  # row 1 is NaN
naive.sum().backward()
print(scores1.grad.isnan().any().item())  # and the gradient is NaN too

# %% [markdown] tags=["lang-en"]
# What do PyTorch's own functions return for such a row? Measured here, with the installed
# torch (2.13 when this lesson was written):

# %% [markdown] tags=["lang-zh"] en_hash="bd58c2ff5e"
# PyTorch 自己的函数在这样的一行上返回什么？下面用当前安装的 torch（编写本课时为 2.13）实际测一测：

# %%
sdpa = F.scaled_dot_product_attention(q1, k1, v1, attn_mask=keep1)
print("F.sdpa(attn_mask=keep1)             ", sdpa[0, 1])  # query 1's output row
sdpa_additive = F.scaled_dot_product_attention(q1, k1, v1, attn_mask=masks.to_additive(keep1))
print("F.sdpa(attn_mask=to_additive(keep1))", sdpa_additive[0, 1])

mha1 = nn.MultiheadAttention(4, num_heads=1, batch_first=True)
with torch.no_grad():
    all_padding = torch.ones(1, 3, dtype=torch.bool)  # key_padding_mask: every key is padding
    out_padding, _ = mha1(q1, k1, v1, key_padding_mask=all_padding)
    out_ignore, _ = mha1(q1, k1, v1, attn_mask=masks.to_ignore(keep1[0]))  # row 1 all True = ignore
print("mha(key_padding_mask=all True)      ", out_padding.isnan().all().item())  # the whole sequence is NaN
print("mha(attn_mask=to_ignore(keep1))     ", out_ignore[0, 1].isnan().all().item())  # query 1's row is NaN

# %% [markdown] tags=["lang-en"]
# `F.scaled_dot_product_attention` defines the row: its output is 0. `nn.MultiheadAttention`
# does not: the row (with `key_padding_mask`, the whole sequence) is NaN. The package follows
# `F.scaled_dot_product_attention`: `masked_softmax` gives a fully masked row all-zero weights,
# so its output row is zero, and the gradient stays finite. It finds those rows with
# `~keep.any(dim=-1, keepdim=True)`, gives them finite scores before the softmax and zero
# weights after it.

# %% [markdown] tags=["lang-zh"] en_hash="6c54b3544f"
# `F.scaled_dot_product_attention` 对这一行有明确的定义：输出为 0。`nn.MultiheadAttention` 则没有：这一行（用 `key_padding_mask` 时是整条序列）都是 NaN。工具包与 `F.scaled_dot_product_attention` 保持一致：`masked_softmax` 让全遮蔽行（掩码遮住了所有键的行）的权重全为 0，于是该行的输出为零，梯度也保持有限。它先用 `~keep.any(dim=-1, keepdim=True)` 找出这些行，在 softmax 之前给它们填上有限的分数，之后再把它们的权重置零。

# %%
scores1.grad = None
weights = masked_softmax(scores1, keep1)
print(weights[0].detach())  # row 1: zeros
weights.sum().backward()
print(scores1.grad.isnan().any().item())
ours1, _ = scaled_dot_product_attention(q1, k1, v1, keep_mask=keep1)
print(torch.allclose(ours1, sdpa, atol=1e-6))  # the same as F.scaled_dot_product_attention

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
# 很多实现写入的不是 −∞，而是 −1e9 这样很大的负数。在 float32 中，只要这一行至少保留了一个键，结果就没有任何变化：$e^{-10^9}$ 下溢为精确的 0，权重完全相同。在全遮蔽行（掩码遮住了所有键）上就不同了：每个分数都是 −1e9，softmax 看到的是一组相等的分数，这一行于是得到**均匀**的权重：查询悄无声息地关注了填充位置，连个 NaN 都不会出来提醒你。

# %%
s = scores1.detach()[0]  # (3, 3) float32
with_inf = s.masked_fill(~keep1[0], float("-inf")).softmax(dim=-1)
with_1e9 = s.masked_fill(~keep1[0], -1e9).softmax(dim=-1)
print(torch.equal(with_inf[[0, 2]], with_1e9[[0, 2]]))  # rows with a kept key: identical
print(with_1e9[1])  # the fully masked row: uniform, 1/3 on every hidden key

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
print(torch.tensor(-1e9).half())  # −1e9 is not finite in float16
try:
    half.masked_fill(~keep1[0], -1e9)
except RuntimeError as error:
    print(type(error).__name__, "overflow" in str(error))
print((half + torch.zeros(3, 3).masked_fill(~keep1[0], -1e9).half()).softmax(dim=-1)[1])  # additive −1e9: NaN
smallest = torch.finfo(torch.float16).min
print(smallest, half.masked_fill(~keep1[0], smallest).softmax(dim=-1)[1])  # finite: uniform on padding
print(masked_softmax(half, keep1[0])[1], masked_softmax(half, keep1[0]).dtype)  # the package: zeros

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: a masked softmax
#
# Write `my_masked_softmax(scores, keep_mask)`: the softmax over the last axis of `scores`
# (..., L_q, L_k), where keys with `keep_mask` False get exactly zero weight and a row whose keys
# are all hidden gets all-zero weights, never NaN. `keep_mask` broadcasts against `scores`.
#
# 1. find the fully masked rows: `~keep_mask.any(dim=-1, keepdim=True)`;
# 2. fill the hidden scores with −∞, and the fully masked rows with any finite number;
# 3. take the softmax, then set the fully masked rows' weights to 0.

# %% [markdown] tags=["lang-zh"] en_hash="2e28efc698"
# ### 练习 3：带掩码的 softmax
#
# 写出 `my_masked_softmax(scores, keep_mask)`：对 `scores` (..., L_q, L_k) 沿最后一维做 softmax；`keep_mask` 为 False 的键权重必须精确为零；所有键都被遮住的一行，权重全为零，绝不能是 NaN。`keep_mask` 可以与 `scores` 广播。
#
# 1. 找出全遮蔽行：`~keep_mask.any(dim=-1, keepdim=True)`；
# 2. 被遮住的分数填入 −∞，全遮蔽行填入任意有限值；
# 3. 做 softmax，再把全遮蔽行的权重置为 0。

# %% tags=["exercise"] exercise="02.masked_softmax"
def my_masked_softmax(scores, keep_mask):
    """scores: (..., L_q, L_k); keep_mask: bool, broadcastable to scores, True = may attend.

    Returns the weights, shape of scores; fully masked rows are all zeros.
    """
    ### BEGIN SOLUTION
    nothing_kept = ~keep_mask.any(dim=-1, keepdim=True)  # (..., L_q, 1)
    scores = scores.masked_fill(~keep_mask, float("-inf"))  # hidden keys: exp(-inf) = 0
    scores = scores.masked_fill(nothing_kept, 0.0)  # an all -inf row would give 0/0
    return scores.softmax(dim=-1).masked_fill(nothing_kept, 0.0)
    ### END SOLUTION


# %%
check("02.masked_softmax", my_masked_softmax)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Spot the bug: whose mask does this head get?
#
# Seed 002's multi-head attention computes all heads with one batched call. It projects Q, K
# and V to (B, L, H, D), then moves the heads in front with `permute(2, 0, 1, 3)` and flattens
# to (H·B, L, D). In that layout slot $n$ holds head $h$ of item $b$ with $n = h \cdot B + b$:
# **head-major**. Its mask, (B, L_q, L_k), is copied for the heads with
# `mask.unsqueeze(1).repeat(1, H, 1, 1)` and flattened to (B·H, L_q, L_k), where slot $n$ holds
# item $b$'s mask with $n = b \cdot H + h$: **batch-major**. The two orders disagree, so
# whenever B > 1 some slots get another item's mask. With B = 3 and H = 2:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="63092f053c"
# ## 5. 找 bug：这个头拿到的是谁的掩码？
#
# 种子教程 002 的多头注意力用一次批量调用算完所有的头。它把 Q、K、V 投影成 (B, L, H, D)，再用 `permute(2, 0, 1, 3)` 把头维移到最前，展平成 (H·B, L, D)。在这种布局中，槽位 $n$ 存放第 $b$ 个样本的第 $h$ 个头，$n = h \cdot B + b$：**头优先**。而它的掩码 (B, L_q, L_k) 用 `mask.unsqueeze(1).repeat(1, H, 1, 1)` 为每个头复制一份，再展平成 (B·H, L_q, L_k)，其中槽位 $n$ 存放第 $b$ 个样本的掩码，$n = b \cdot H + h$：**批量优先**。两种顺序对不上，所以只要 B > 1，就有槽位拿到别的样本的掩码。B = 3、H = 2 时：

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 3.6), layout="constrained")
viz.head_batch_picture(3, 2, mask_order="batch", ax=axes[0])
viz.head_batch_picture(3, 2, mask_order="head", ax=axes[1])
plt.show()

# %% [markdown] tags=["lang-en"]
# Left, the seed's layout: four of six slots pair a head with the wrong item's mask. Right, the
# fix: repeat the mask head-major too, `mask.repeat(H, 1, 1)`, so slot $h \cdot B + b$ gets item
# $b$'s mask. (Keeping the (B, H, L_q, L_k) layout throughout, as this course does, avoids the
# question altogether: a (B, 1, L_q, L_k) mask then broadcasts over the heads.)
#
# Below is a short re-creation of the seed's forward pass in our own code and keep-mask
# convention, with `mask_order` choosing the seed's repeat or the fix. It borrows the weights of
# an `nn.MultiheadAttention`, so PyTorch's layer is the referee.

# %% [markdown] tags=["lang-zh"] en_hash="5ff0edf1b4"
# 左图是种子教程的布局：六个槽位中有四个把头和错误样本的掩码配在了一起。右图是修复后的布局：掩码也按头优先的顺序复制，即 `mask.repeat(H, 1, 1)`，于是槽位 $h \cdot B + b$ 拿到的正是第 $b$ 个样本的掩码。（像本课程这样始终保持 (B, H, L_q, L_k) 的布局，就根本不会遇到这个问题：(B, 1, L_q, L_k) 的掩码会自动在各个头上广播。）
#
# 下面用我们自己的代码和保留掩码约定，简短地重现种子教程的前向计算，`mask_order` 选择种子教程的复制方式或修复后的方式。它借用一个 `nn.MultiheadAttention` 的权重，让 PyTorch 的层来当裁判。

# %%
def seed002_style_mha(x, mha, keep, mask_order="batch"):
    """Re-creation of seed 002's MultiHeadAttention forward (self-attention) with mha's weights.

    x: (B, L, E); keep: (B, L, L) keep mask. mask_order "batch" repeats the mask as the seed does
    (slot b·H + h), "head" as Q, K and V are laid out (slot h·B + b). Returns (output, weights).
    """
    B, L, E = x.shape
    H = mha.num_heads
    D = E // H
    W_q, W_k, W_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)

    def heads_first(t):  # (B, L, E) -> (B, L, H, D) -> (H, B, L, D) -> (H·B, L, D): slot h·B + b
        return t.view(B, L, H, D).permute(2, 0, 1, 3).reshape(H * B, L, D)

    q, k, v = heads_first(x @ W_q.T + b_q), heads_first(x @ W_k.T + b_k), heads_first(x @ W_v.T + b_v)
    if mask_order == "batch":
        mask = keep.unsqueeze(1).repeat(1, H, 1, 1).view(B * H, L, L)  # (B, H, L, L): slot b·H + h
    else:
        mask = keep.repeat(H, 1, 1)  # (H·B, L, L): slot h·B + b, like q, k, v
    out, weights = scaled_dot_product_attention(q, k, v, keep_mask=mask)  # (H·B, L, D)
    out = out.view(H, B, L, D).permute(1, 2, 0, 3).reshape(B, L, E)  # back to (B, L, H·D)
    return mha.out_proj(out), weights


# %% [markdown] tags=["lang-en"]
# Three sequences of lengths 5, 3 and 4, two heads, in float64 so that "equal" means equal to
# many digits. Compare both versions with `nn.MultiheadAttention` given the same padding:

# %% [markdown] tags=["lang-zh"] en_hash="9ea487e75e"
# 三条序列，长度分别为 5、3、4，两个头，用 float64 计算，让“相等”精确到很多位。给 `nn.MultiheadAttention` 同样的填充，与两个版本逐一比较：

# %%
B, H, L, E = 3, 2, 5, 8
torch.manual_seed(1)  # the weights nn.MultiheadAttention draws
mha2 = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
x = torch.randn(B, L, E, generator=g, dtype=torch.float64)
lengths = torch.tensor([5, 3, 4])
pad = padding_mask(lengths, L)  # (B, 1, 1, L)
keep = pad[:, 0].expand(B, L, L)  # (B, L, L), the seed's mask shape

with torch.no_grad():
    reference, _ = mha2(x, x, x, key_padding_mask=masks.to_key_padding(pad))
    buggy, buggy_weights = seed002_style_mha(x, mha2, keep, mask_order="batch")
    fixed, _ = seed002_style_mha(x, mha2, keep, mask_order="head")
print("buggy", torch.allclose(buggy, reference), round((buggy - reference).abs().max().item(), 2))
print("fixed", torch.allclose(fixed, reference))

# %% [markdown] tags=["lang-en"]
# The seed's version is off by tenths. Which (head, item) slots put weight on their own item's
# padding? Slot $n = h \cdot B + b$ of the weights belongs to head $h$ of item $b$; each line
# below prints (head, item) and whether it does:

# %% [markdown] tags=["lang-zh"] en_hash="98d0e8f08a"
# 种子教程的版本差了零点几。哪些（头, 样本）槽位把权重放在了自己样本的填充位置上？权重的槽位 $n = h \cdot B + b$ 属于第 $b$ 个样本的第 $h$ 个头；下面每一行打印（头, 样本）以及它是否这样做了：

# %%
for n in range(B * H):
    h, b = divmod(n, B)
    on_padding = buggy_weights[n][:, lengths[b]:].sum().item()  # weight on item b's padded keys
    print((h, b), on_padding > 0)

# %% [markdown] tags=["lang-en"]
# Item 1, the shortest, has both heads reading its padding. With a single sequence the two
# orders coincide ($n = h$ either way), so a test with B = 1 never sees the bug:

# %% [markdown] tags=["lang-zh"] en_hash="b6e7d69c63"
# 最短的样本 1，两个头都读到了它的填充。只有一条序列时，两种顺序完全一致（两种情况下都是 $n = h$），所以用 B = 1 测试永远发现不了这个 bug：

# %%
with torch.no_grad():
    one_reference, _ = mha2(x[1:2], x[1:2], x[1:2], key_padding_mask=masks.to_key_padding(pad[1:2]))
    one_buggy, _ = seed002_style_mha(x[1:2], mha2, keep[1:2], mask_order="batch")
print(torch.allclose(one_buggy, one_reference))

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
#   sequences, (B, 1, 1, L_k); causal masks hide the future, a lower triangle (L_q, L_k).
# - Masks broadcast from the right. Give them the scores' number of axes, size 1 where they do
#   not vary; a (B, L_k) or (B, 1, L_k) mask against (B, H, L_q, L_k) scores is wrong, and
#   silently so when the sizes happen to match.
# - Conventions differ: True means keep for this course and `F.scaled_dot_product_attention`,
#   ignore for `nn.MultiheadAttention` and seed 002; additive masks use 0 and −∞; seed 001 hides
#   where the mask is 0. `course_utils.masks` converts at the boundary and refuses to guess.
# - A fully masked row is NaN with the naive recipe, NaN in `nn.MultiheadAttention`, zero in
#   `F.scaled_dot_product_attention` and in this course. A finite fill value hides the problem
#   by attending to the padding, and −1e9 is −∞ in float16.
# - In a (H·B) layout the mask must be repeated in the same order as Q, K and V; B = 1 hides a
#   mismatch.
#
# Next, lesson 03: self-attention and cross-attention, learned on tiny toy tasks.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b6f7fdf92d"
# ## 小结
#
# - 掩码说明每个查询可以关注哪些键。填充掩码遮住短序列的填充，形状为 (B, 1, 1, L_k)；因果掩码遮住未来，是一个下三角 (L_q, L_k)。
# - 掩码从右往左广播。让它的维数与分数相同，不变化的维度大小取 1；(B, L_k) 或 (B, 1, L_k) 的掩码配 (B, H, L_q, L_k) 的分数是错的，而且在大小碰巧相等时不会报错。
# - 约定各不相同：在本课程和 `F.scaled_dot_product_attention` 中 True 表示保留，在 `nn.MultiheadAttention` 和种子教程 002 中 True 表示忽略；加性掩码用 0 和 −∞；种子教程 001 在掩码为 0 处遮住。`course_utils.masks` 在边界上做转换，并且拒绝猜测。
# - 全遮蔽行：朴素做法得到 NaN，`nn.MultiheadAttention` 也得到 NaN，`F.scaled_dot_product_attention` 和本课程得到零。有限的填充值会让查询去关注填充位置，把问题掩盖起来；而且在 float16 中 −1e9 就是 −∞。
# - 在 (H·B) 布局中，掩码必须按与 Q、K、V 相同的顺序复制；B = 1 会掩盖顺序不一致的问题。
#
# 下一课（第 03 课）：自注意力与交叉注意力，在小小的玩具任务上学出来。
