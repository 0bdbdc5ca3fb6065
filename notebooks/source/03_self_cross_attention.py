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
# # Self-attention and cross-attention
#
# Lesson 01 computed attention from queries, keys and values that were simply given. In a model
# they are made from the data by learned projections, and *where* they are made from gives the
# two kinds of attention layer every Transformer uses:
#
# - **self-attention**: queries, keys and values all come from the same sequence, so every
#   position reads from the other positions of its own sequence;
# - **cross-attention**: the queries come from one sequence (a decoder's) and the keys and
#   values from another (the encoder's output), so every decoder position reads from the input.
#
# In this lesson you will
#
# 1. build both layers, check them against PyTorch's `nn.MultiheadAttention`, and write each
#    one's forward pass yourself;
# 2. find two bugs in the self- and cross-attention code of a widely copied PyTorch tutorial;
# 3. see that self-attention without positions cannot tell positions apart (it is
#    *permutation-equivariant*), and why that matters;
# 4. train two tiny models in a second or two each and watch their attention maps become the pattern
#    the task needs: an anti-diagonal for reversing a sequence, a staircase for an
#    encoder–decoder that says every token twice;
# 5. read a hard alignment off the attention weights, and explore the learned maps.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="9c2f1c5459"
# # 自注意力与交叉注意力
#
# 第 01 课计算注意力时，查询、键和值都是直接给定的。在模型里，它们是由可学习的投影从数据中算出来的；而它们*从哪里*算出来，就区分出了每个 Transformer 都会用到的两种注意力层：
#
# - **自注意力**（self-attention）：查询、键和值都来自同一个序列，于是每个位置都从自己所在序列的其他位置读取信息；
# - **交叉注意力**（cross-attention）：查询来自一个序列（解码器的序列），键和值来自另一个序列（编码器的输出），于是解码器的每个位置都从输入中读取信息。
#
# 本课你将：
#
# 1. 搭建这两种层，与 PyTorch 的 `nn.MultiheadAttention` 对照，并亲手写出各自的前向计算；
# 2. 找出一篇流传很广的 PyTorch 教程在自注意力与交叉注意力代码中的两个 bug；
# 3. 看到不带位置信息的自注意力分不清各个位置（它是*置换等变*的），以及这为什么要紧；
# 4. 用一两秒训练两个极小的模型，看着它们的注意力图变成任务所需的模式：反转序列时是一条反对角线，把每个词元重复两遍的编码器–解码器则是一道阶梯；
# 5. 从注意力权重中读出硬对齐，并动手探索学到的注意力图。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import math
import time

import matplotlib.pyplot as plt
import torch
from torch import nn

from course_utils import check, claim, setup, toy
from course_utils.attention import scaled_dot_product_attention
from course_utils.i18n import message
from course_utils.layers import CrossAttention, SelfAttention
from course_utils.viz import heatmap
from course_utils.widgets import EXAMPLES, attention_maps_explorer, attention_maps_view

setup(lang="en")
# lang: en
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights
# lang: zh
torch.set_printoptions(precision=2, sci_mode=False)  # 读权重，两位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. Self-attention
#
# Take a sequence $X$ of $L$ positions with $E$ features each, shape $(L, E)$. Self-attention
# makes a query, a key and a value for *every* position with three learned matrices, and then
# runs the scaled dot-product attention of lesson 01:
#
# $$Q = X W_q,\quad K = X W_k,\quad V = X W_v,\qquad
# \mathrm{SelfAttention}(X) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big) V .$$
#
# $W_q$ and $W_k$ are $(E, d_k)$, $W_v$ is $(E, d_v)$. Position $i$'s query is compared with
# every position's key, so the attention weights are $(L, L)$: row $i$ says how much position
# $i$ reads from each position of the same sequence. The three matrices are what training
# learns: what a position asks for ($W_q$), how it advertises itself ($W_k$), and what it hands
# over when chosen ($W_v$).
#
# ### Exercise 1: the self-attention forward pass
#
# Write `my_self_attention(x, w_q, w_k, w_v)` for a batch, $x$ of shape $(B, L, E)$: project,
# then attend. Return `(output, weights)`, shapes $(B, L, d_v)$ and $(B, L, L)$. Divide by
# $\sqrt{d_k}$, the size of the projected queries and keys, not by $\sqrt{E}$. The check tries
# a batch of one, length 1, sizes where $L$, $E$, $d_k$ and $d_v$ all differ, $d_k = 32$ and
# float64 inputs (the results keep the inputs' dtype); it also compares the gradients of your
# result with the reference's, so compute it with ordinary tensor operations (no
# `torch.no_grad()`, no `.detach()`).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="ddeea1bc2b"
# ## 1. 自注意力
#
# 设序列 $X$ 有 $L$ 个位置，每个位置有 $E$ 个特征，形状为 $(L, E)$。自注意力用三个可学习的矩阵为*每一个*位置各算出一个查询、一个键和一个值，再执行第 01 课的缩放点积注意力：
#
# $$Q = X W_q,\quad K = X W_k,\quad V = X W_v,\qquad
# \mathrm{SelfAttention}(X) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big) V .$$
#
# $W_q$ 和 $W_k$ 的形状是 $(E, d_k)$，$W_v$ 的形状是 $(E, d_v)$。第 $i$ 个位置的查询要与每个位置的键比较，所以注意力权重的形状是 $(L, L)$：第 $i$ 行表示位置 $i$ 从同一序列的各个位置分别读取多少。训练学的正是这三个矩阵：一个位置想找什么（$W_q$），它怎样介绍自己（$W_k$），以及被选中时交出什么（$W_v$）。
#
# ### 练习 1：自注意力的前向计算
#
# 写出批量版本的 `my_self_attention(x, w_q, w_k, w_v)`，其中 $x$ 的形状为 $(B, L, E)$：先投影，再做注意力。按 `(output, weights)` 的顺序返回，形状分别为 $(B, L, d_v)$ 和 $(B, L, L)$。要除以 $\sqrt{d_k}$（投影后查询和键的维度），而不是 $\sqrt{E}$。检查会测试批量大小为 1、长度为 1、$L$、$E$、$d_k$、$d_v$ 各不相同、$d_k = 32$ 以及 float64 输入的情形（结果的 dtype 与输入相同）；它还会把你的结果的梯度与参考实现的梯度对照，所以请用普通的张量运算来计算（不要用 `torch.no_grad()`，也不要 `.detach()`）。

# %% tags=["exercise"] exercise="03.self_attention"
def my_self_attention(x, w_q, w_k, w_v):
    # lang: en
    """Self-attention: queries, keys and values all projected from x.

    x: (B, L, E), w_q: (E, d_k), w_k: (E, d_k), w_v: (E, d_v), float tensors, all of one dtype
    (float32 or float64).
    Returns (output, weights), tensors of that dtype, of shapes (B, L, d_v) and (B, L, L):
    weights = softmax(Q Kᵀ / √d_k) over the keys, output = weights @ V.
    """
    # lang: zh
    """自注意力：查询、键和值都由 x 投影得到。

    x：(B, L, E)，w_q：(E, d_k)，w_k：(E, d_k)，w_v：(E, d_v)，均为浮点张量，dtype 全部相同
    （float32 或 float64）。
    返回 (output, weights)，dtype 与输入相同，形状分别为 (B, L, d_v) 和 (B, L, L)：
    weights = softmax(Q Kᵀ / √d_k)（沿键的维度），output = weights @ V。
    """
    # lang: end
    ### BEGIN SOLUTION
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (B, L, d_k), (B, L, d_k), (B, L, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, L, L)
    # lang: en
    weights = torch.softmax(scores, dim=-1)  # each position's row sums to 1
    # lang: zh
    weights = torch.softmax(scores, dim=-1)  # 每个位置的那一行之和为 1
    # lang: end
    return weights @ v, weights  # (B, L, d_v), (B, L, L)
    ### END SOLUTION


# %%
from course_utils import check
check("03.self_attention", my_self_attention)

# %% [markdown] tags=["lang-en"]
# ### The layer
#
# `course_utils.layers.SelfAttention` is the same computation as a `torch.nn` module: the
# projections are `nn.Linear` layers (with a bias, and with $d_k = d_v = E$), and one more
# projection, `out_proj`, maps the result back to $E$ features, as in `nn.MultiheadAttention`.
# A single head would not need it; we keep it so that this layer is exactly multi-head attention
# with one head (lesson 04). It takes $(B, L, E)$ and returns `(output, weights)`:

# %% [markdown] tags=["lang-zh"] en_hash="559fad88d9"
# ### 做成一个层
#
# `course_utils.layers.SelfAttention` 把同样的计算写成了一个 `torch.nn` 模块：各个投影都是 `nn.Linear` 层（带偏置，且 $d_k = d_v = E$），另外还有一个投影 `out_proj`，把结果映射回 $E$ 个特征，与 `nn.MultiheadAttention` 一样。单头注意力本来用不着它；保留它，是为了让这个层恰好等于只有一个头的多头注意力（第 04 课）。它接收 $(B, L, E)$，返回 `(output, weights)`：

# %%
g = torch.Generator().manual_seed(0)
B, L, E = 2, 5, 8
x = torch.randn(B, L, E, generator=g)

self_attention = SelfAttention(E)
output, weights = self_attention(x)
print("x.shape       =", tuple(x.shape))  # (B, L, E)
print("output.shape  =", tuple(output.shape))  # (B, L, E)
print("weights.shape =", tuple(weights.shape))  # (B, L, L)

# %% [markdown] tags=["lang-en"]
# Two checks. First, PyTorch's `nn.MultiheadAttention` with one head, given the same weights
# (`to_multihead` copies them), returns the same output and the same weights; for
# self-attention it is called with the same tensor three times. Second, without biases the
# layer is your formula followed by `out_proj` (an `nn.Linear` stores its matrix as
# (out, in), so $W_q$ is `q_proj.weight.T`):

# %% [markdown] tags=["lang-zh"] en_hash="5fe8d0c319"
# 做两项检查。第一，只有一个头的 PyTorch `nn.MultiheadAttention` 装上相同的权重（由 `to_multihead` 复制过去）后，给出相同的输出和相同的权重；用于自注意力时，要把同一个张量传三次。第二，去掉偏置后，这个层就是你写的公式再接上 `out_proj`（`nn.Linear` 以 (out, in) 的形式存放矩阵，所以 $W_q$ 是 `q_proj.weight.T`）：

# %%
mha = self_attention.to_multihead()  # nn.MultiheadAttention(E, num_heads=1, batch_first=True)
their_output, their_weights = mha(x, x, x)
plain = SelfAttention(E, bias=False)
W_q, W_k, W_v, W_o = (p.weight.T for p in (plain.q_proj, plain.k_proj, plain.v_proj, plain.out_proj))
by_formula, _ = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)
# lang: en
claim("nn.MultiheadAttention with the same weights returns the same output and the same weights",
      torch.allclose(output, their_output, atol=1e-6) and torch.allclose(weights, their_weights, atol=1e-6))
claim("without biases, the layer is the formula followed by out_proj",
      torch.allclose(plain(x)[0], by_formula @ W_o, atol=1e-6))
# lang: zh
claim("装上相同权重的 nn.MultiheadAttention 返回相同的输出和相同的权重",
      torch.allclose(output, their_output, atol=1e-6) and torch.allclose(weights, their_weights, atol=1e-6))
claim("去掉偏置后，这个层就是公式再接上 out_proj",
      torch.allclose(plain(x)[0], by_formula @ W_o, atol=1e-6))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Cross-attention
#
# A translation model reads a source sentence with an **encoder** and writes the translation
# with a **decoder**. The picture shows one layer of each, as in the original Transformer. In
# the encoder, queries, keys and values all come from the source: self-attention. The decoder
# first runs self-attention over the target written so far (causal: each position sees only
# the ones before it, lesson 02). Then, while it writes, each decoder position must look things
# up in the source. That is **cross-attention**: the queries come from the decoder, the keys
# and values from the encoder's output $M$, often called the *memory*.
#
# ![Where queries, keys and values come from](../../images/03_qkv_sources_en.svg)
#
# The picture gives both sides one width $d$ and names the lengths $L_{tgt}$ and $L_{src}$.
# Here we name them by the side they belong to: the decoder's sequence $Y$ has shape
# $(L_q, E_q)$, the memory $M$ has shape $(L_{kv}, E_{kv})$, and the widths may differ:
#
# $$Q = Y W_q,\quad K = M W_k,\quad V = M W_v,\qquad
# \mathrm{CrossAttention}(Y, M) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big) V .$$
#
# Nothing forces the two sequences to be alike: $L_q$ and $L_{kv}$ differ (a translation is
# rarely as long as its source), and so may $E_q$ and $E_{kv}$; only $W_q$ and $W_k$ must
# meet in the same $d_k$. The weights are $(L_q, L_{kv})$: row $i$ says which source positions
# decoder position $i$ reads, the **alignment** between output and input.
#
# ### Exercise 2: the cross-attention forward pass
#
# Write `my_cross_attention(x, memory, w_q, w_k, w_v)`: `x` is the decoder side $Y$,
# $(B, L_q, E_q)$, `memory` is $(B, L_{kv}, E_{kv})$, `w_q` is $(E_q, d_k)$, `w_k` is
# $(E_{kv}, d_k)$ and `w_v` is $(E_{kv}, d_v)$. Return `(output, weights)`, shapes
# $(B, L_q, d_v)$ and $(B, L_q, L_{kv})$. The check tries a batch of one, $L_q \ne L_{kv}$,
# $E_q \ne E_{kv}$, $d_k \ne d_v$, sequences of length 1 on either side, and float64 inputs
# (the results keep the inputs' dtype).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="79e516eab2"
# ## 2. 交叉注意力
#
# 翻译模型用**编码器**（encoder）读入源句子，用**解码器**（decoder）写出译文。下图画出了两者各一层，和最初的 Transformer 一样。在编码器里，查询、键和值都来自源序列，这是自注意力。解码器先对已经写出的目标序列做自注意力（因果的：每个位置只能看到它之前的位置，见第 02 课）。接着，在写的过程中，解码器的每个位置都要到源句子里查找信息。这就是**交叉注意力**：查询来自解码器，键和值来自编码器的输出 $M$，常称为 *memory*。
#
# ![查询、键和值从哪里来](../../images/03_qkv_sources_zh.svg)
#
# 图中两侧使用同一个宽度 $d$，长度记作 $L_{tgt}$ 和 $L_{src}$。这里我们按所属的一侧来命名：解码器的序列 $Y$ 形状为 $(L_q, E_q)$，memory $M$ 的形状为 $(L_{kv}, E_{kv})$，两侧宽度可以不同：
#
# $$Q = Y W_q,\quad K = M W_k,\quad V = M W_v,\qquad
# \mathrm{CrossAttention}(Y, M) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big) V .$$
#
# 两个序列不必相似：$L_q$ 与 $L_{kv}$ 可以不同（译文很少和原文一样长），$E_q$ 与 $E_{kv}$ 也可以不同；只有 $W_q$ 和 $W_k$ 必须映射到同一个 $d_k$。权重的形状是 $(L_q, L_{kv})$：第 $i$ 行表示解码器位置 $i$ 读取了源序列的哪些位置，也就是输出与输入之间的**对齐**（alignment）。
#
# ### 练习 2：交叉注意力的前向计算
#
# 写出 `my_cross_attention(x, memory, w_q, w_k, w_v)`：`x` 是解码器一侧的 $Y$，形状为 $(B, L_q, E_q)$；`memory` 为 $(B, L_{kv}, E_{kv})$，`w_q` 为 $(E_q, d_k)$，`w_k` 为 $(E_{kv}, d_k)$，`w_v` 为 $(E_{kv}, d_v)$。按 `(output, weights)` 的顺序返回，形状分别为 $(B, L_q, d_v)$ 和 $(B, L_q, L_{kv})$。检查会测试批量大小为 1、$L_q \ne L_{kv}$、$E_q \ne E_{kv}$、$d_k \ne d_v$、任一侧长度为 1 以及 float64 输入的情形（结果的 dtype 与输入相同）。

# %% tags=["exercise"] exercise="03.cross_attention"
def my_cross_attention(x, memory, w_q, w_k, w_v):
    # lang: en
    """Cross-attention: queries from x (the decoder side), keys and values from memory (the encoder side).

    x: (B, L_q, E_q), memory: (B, L_kv, E_kv), w_q: (E_q, d_k), w_k: (E_kv, d_k), w_v: (E_kv, d_v),
    float tensors, all of one dtype (float32 or float64).
    Returns (output, weights), tensors of that dtype, of shapes (B, L_q, d_v) and (B, L_q, L_kv).
    """
    # lang: zh
    """交叉注意力：查询来自 x（解码器一侧），键和值来自 memory（编码器一侧）。

    x：(B, L_q, E_q)，memory：(B, L_kv, E_kv)，w_q：(E_q, d_k)，w_k：(E_kv, d_k)，w_v：(E_kv, d_v)，
    均为浮点张量，dtype 全部相同（float32 或 float64）。
    返回 (output, weights)，dtype 与输入相同，形状分别为 (B, L_q, d_v) 和 (B, L_q, L_kv)。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    q = x @ w_q  # (B, L_q, d_k): one query per decoder position
    k, v = memory @ w_k, memory @ w_v  # (B, L_kv, d_k), (B, L_kv, d_v): from the encoder side
    # lang: zh
    q = x @ w_q  # (B, L_q, d_k)：解码器的每个位置一个查询
    k, v = memory @ w_k, memory @ w_v  # (B, L_kv, d_k), (B, L_kv, d_v)：来自编码器一侧
    # lang: end
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (B, L_q, L_kv)
    return weights @ v, weights  # (B, L_q, d_v), (B, L_q, L_kv)
    ### END SOLUTION


# %%
from course_utils import check
check("03.cross_attention", my_cross_attention)

# %% [markdown] tags=["lang-en"]
# The package's `CrossAttention(embed_dim=E_q, kv_dim=E_kv)` takes `(x, memory)`. Its PyTorch
# twin is `nn.MultiheadAttention(E_q, num_heads=1, kdim=E_kv, vdim=E_kv)`, called as
# `mha(x, memory, memory)`:

# %% [markdown] tags=["lang-zh"] en_hash="c96f1dd28d"
# 工具包中的 `CrossAttention(embed_dim=E_q, kv_dim=E_kv)` 接收 `(x, memory)`。它在 PyTorch 中的对应物是 `nn.MultiheadAttention(E_q, num_heads=1, kdim=E_kv, vdim=E_kv)`，调用方式为 `mha(x, memory, memory)`：

# %%
B, L_q, L_kv, E_q, E_kv = 2, 3, 5, 8, 6
decoder_x = torch.randn(B, L_q, E_q, generator=g)
memory = torch.randn(B, L_kv, E_kv, generator=g)

cross_attention = CrossAttention(E_q, kv_dim=E_kv)
cross_output, cross_weights = cross_attention(decoder_x, memory)
print("x.shape       =", tuple(decoder_x.shape))  # (B, L_q, E_q)
print("memory.shape  =", tuple(memory.shape))  # (B, L_kv, E_kv)
print("output.shape  =", tuple(cross_output.shape))  # (B, L_q, E_q)
print("weights.shape =", tuple(cross_weights.shape))  # (B, L_q, L_kv)

mha = cross_attention.to_multihead()
their_output, their_weights = mha(decoder_x, memory, memory)
# lang: en
claim("nn.MultiheadAttention with the same weights returns the same output and the same weights",
      torch.allclose(cross_output, their_output, atol=1e-6) and torch.allclose(cross_weights, their_weights, atol=1e-6))
# lang: zh
claim("装上相同权重的 nn.MultiheadAttention 返回相同的输出和相同的权重",
      torch.allclose(cross_output, their_output, atol=1e-6) and torch.allclose(cross_weights, their_weights, atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# Side by side, the weights of the first batch item: self-attention is square, one row and one
# column per position of the same sequence; cross-attention has one row per decoder position
# and one column per encoder position. (The layers are untrained, so the weights are spread
# out; section 5 trains them.)

# %% [markdown] tags=["lang-zh"] en_hash="035ec26b47"
# 把第一个批量样本的权重并排画出来：自注意力的权重是方阵，行和列都对应同一序列的各个位置；交叉注意力的权重每行对应一个解码器位置，每列对应一个编码器位置。（这两个层尚未训练，所以权重比较分散；第 5 节会训练它们。）

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), layout="constrained")
heatmap(weights[0], ax=left, title=message("l03.self_attention"), vmax=1.0, colorbar=False)
heatmap(cross_weights[0], ax=right, title=message("l03.cross_attention"), vmax=1.0)
plt.show()

# %% [markdown] tags=["lang-en"]
# A layer built for $E_{kv} = 6$ cannot read a memory with 8 features: the key projection
# would fail deep inside `nn.Linear` with a message about "mat1 and mat2". The layers check
# their inputs first and say which argument is wrong, what it got and what it needs:

# %% [markdown] tags=["lang-zh"] en_hash="c3595282ce"
# 为 $E_{kv} = 6$ 构建的层读不了有 8 个特征的 memory：键的投影会在 `nn.Linear` 深处出错，报出一条关于 “mat1 and mat2” 的信息。我们的层会先检查输入，并指明哪个参数出了错、收到的是什么、需要的是什么：

# %%
try:
    # lang: en
    cross_attention(decoder_x, decoder_x)  # memory with E_q = 8 features instead of E_kv = 6
    # lang: zh
    cross_attention(decoder_x, decoder_x)  # memory 有 E_q = 8 个特征，而不是 E_kv = 6 个
    # lang: end
except ValueError as error:
    print(error)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Spot the bug
#
# A widely copied PyTorch tutorial builds exactly these layers: an attention function, a
# self-attention layer on top of it, and a cross-attention layer. The cell below re-creates its
# design in a few lines of our own code, with the same structure and the same two bugs. Run
# it: it defines the three pieces and raises no error.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c5b360f5fb"
# ## 3. 找 bug
#
# 一篇流传很广的 PyTorch 教程正好搭建了这几个层：一个注意力函数，建立在它之上的自注意力层，以及一个交叉注意力层。下面的单元用几行我们自己的代码重现了它的设计，结构相同，两个 bug 也相同。运行它：它定义这三部分，不会报错。

# %%
def tutorial_attention(q, k, v):
    # lang: en
    """Scaled dot-product attention. Returns (output, weights)."""
    # lang: zh
    """缩放点积注意力。返回 (output, weights)。"""
    # lang: end
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights, weights @ v


class TutorialSelfAttention(nn.Module):
    # lang: en
    """Self-attention: queries, keys and values from x. Returns (output, weights)."""
    # lang: zh
    """自注意力：查询、键和值都来自 x。返回 (output, weights)。"""
    # lang: end

    def __init__(self, embed_dim):
        super().__init__()
        self.w_q, self.w_k, self.w_v = (nn.Linear(embed_dim, embed_dim) for _ in range(3))

    def forward(self, x, mask=None):
        out, weights = tutorial_attention(self.w_q(x), self.w_k(x), self.w_v(x))
        return out, weights


class TutorialCrossAttention(nn.Module):
    # lang: en
    """Cross-attention: queries from q, keys and values from kv.
    Returns (output, weights), the weights of shape (B, L_kv, L_kv)."""
    # lang: zh
    """交叉注意力：查询来自 q，键和值来自 kv。
    返回 (output, weights)，其中权重的形状为 (B, L_kv, L_kv)。"""
    # lang: end

    def __init__(self, embed_dim):
        super().__init__()
        self.attention = TutorialSelfAttention(embed_dim)

    def forward(self, q, kv, mask=None):
        return self.attention(q, kv, kv, mask=mask)

# %% [markdown] tags=["lang-en"]
# **Your turn.** Before you read on, find the two bugs in the cell above. Two pairs of
# questions lead to them. In which order does `tutorial_attention` return its pair, and in which
# order does `TutorialSelfAttention.forward` unpack it? What does `TutorialCrossAttention.forward`
# pass to the layer it wraps, and what does that layer's `forward` accept? Try the layers in a
# cell of your own: `TutorialSelfAttention(8)(x)` with the `x` of section 1, $(B, L, E) = (2, 5, 8)$,
# and look at the shape of what comes back. The next cell names the first bug.

# %% [markdown] tags=["lang-zh"] en_hash="cddd8daa5e"
# **轮到你了。** 往下读之前，先找出上面单元里的两个 bug。下面两组问题会把你引到它们那里。`tutorial_attention` 按什么顺序返回那一对结果？`TutorialSelfAttention.forward` 又按什么顺序拆开它？`TutorialCrossAttention.forward` 向它包装的层传了些什么？那个层的 `forward` 又接收什么？可以在你自己新建的单元里试一试这些层：用第 1 节的 `x`（$(B, L, E) = (2, 5, 8)$）调用 `TutorialSelfAttention(8)(x)`，看看返回结果的形状。下一个单元会点明第一个 bug。

# %% [markdown] tags=["lang-en"]
# **Bug 1: the return order.** `tutorial_attention` returns `(weights, output)`, while its
# docstring (and every caller) says `(output, weights)`. `TutorialSelfAttention` unpacks the
# pair as `out, weights`, so its "output" is the weight matrix:

# %% [markdown] tags=["lang-zh"] en_hash="ab7c88386d"
# **Bug 1：返回顺序。** `tutorial_attention` 返回的是 `(weights, output)`，而它的文档字符串（以及所有调用者）说的是 `(output, weights)`。`TutorialSelfAttention` 把这一对按 `out, weights` 拆开，于是它的“输出”其实是权重矩阵：

# %%
out, _ = TutorialSelfAttention(E)(x)
print("out.shape =", tuple(out.shape))
# lang: en
claim("the layer's output has shape (B, L, L) = (2, 5, 5), not (B, L, E) = (2, 5, 8)", tuple(out.shape) == (B, L, L))
claim("each of its rows sums to 1: it is the attention weights", torch.allclose(out.sum(dim=-1), torch.ones(B, L)))
# lang: zh
claim("这个层的输出形状为 (B, L, L) = (2, 5, 5)，而不是 (B, L, E) = (2, 5, 8)", tuple(out.shape) == (B, L, L))
claim("它的每一行之和都是 1：这正是注意力权重", torch.allclose(out.sum(dim=-1), torch.ones(B, L)))
# lang: end

# %% [markdown] tags=["lang-en"]
# With $L \ne E$ the shape gives it away; with $L = E$ nothing would fail and the next layer
# would compute on attention weights. The fix: return `(output, weights)` everywhere, as
# `course_utils` does, and check the output's shape.
#
# **Bug 2: cross-attention built on self-attention.** `TutorialCrossAttention` wraps
# `TutorialSelfAttention`, whose `forward(x, mask)` takes one sequence, and calls it with the
# decoder input and the memory twice. Python binds the first memory argument to `mask`, then
# receives `mask` again by name, and the layer cannot run at all:

# %% [markdown] tags=["lang-zh"] en_hash="b8b51c7dd5"
# 因为 $L \ne E$，形状暴露了问题；若 $L = E$，什么都不会报错，下一层就会拿注意力权重去计算。修正方法：所有地方都按 `(output, weights)` 返回（`course_utils` 正是如此），并检查输出的形状。
#
# **Bug 2：在自注意力之上搭交叉注意力。** `TutorialCrossAttention` 包装的是 `TutorialSelfAttention`，而后者的 `forward(x, mask)` 只接收一个序列；调用时却传入了解码器输入和两次 memory。Python 把第一个 memory 参数绑定到 `mask` 上，随后又按名字收到一次 `mask`，这个层根本无法运行：

# %%
try:
    TutorialCrossAttention(E)(torch.randn(B, L_q, E, generator=g), torch.randn(B, L_kv, E, generator=g))
    raised = None
except TypeError as error:
    raised = error
# lang: en
claim("the call raises TypeError: got multiple values for argument 'mask'",
      raised is not None and "multiple values for argument 'mask'" in str(raised))
# lang: zh
claim("调用时抛出 TypeError：参数 mask 收到了两个值",
      raised is not None and "multiple values for argument 'mask'" in str(raised))
# lang: end

# %% [markdown] tags=["lang-en"]
# Cross-attention needs a layer with two inputs, one for the queries and one for the keys and
# values: `CrossAttention(x, memory)` of section 2. (The class's docstring is wrong too: the
# weights are $(B, L_q, L_{kv})$, not $(B, L_{kv}, L_{kv})$.)
#
# The lesson from both bugs: return `(output, weights)` in one fixed order, and test a layer on
# shapes where $L_q$, $L_k$ and the feature sizes all differ, so that a mix-up cannot hide. The
# same tutorial has a third bug, in its multi-head layers, which builds on bug 1; lesson 04,
# which comes next, builds multi-head attention and takes that bug apart.

# %% [markdown] tags=["lang-zh"] en_hash="7319803a3b"
# 交叉注意力需要一个有两个输入的层：一个给查询，一个给键和值，也就是第 2 节的 `CrossAttention(x, memory)`。（这个类的文档字符串也写错了：权重的形状是 $(B, L_q, L_{kv})$，而不是 $(B, L_{kv}, L_{kv})$。）
#
# 这两个 bug 的教训是：始终按同一个固定顺序返回 `(output, weights)`；测试一个层时，选用 $L_q$、$L_k$ 与各特征维度全都不相同的形状，让混淆无处藏身。同一篇教程在多头注意力层里还有第三个 bug，它是在 bug 1 的基础上产生的；紧接着的第 04 课会搭建多头注意力，并在那里剖析这个 bug。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. Self-attention does not know where things are
#
# Shuffle the positions of the input, run self-attention, and compare with running it first
# and shuffling after. Each output row is a weighted average over *all* positions, and the
# weights depend only on the contents of the query and the keys, never on where they sit. So
# shuffling the input just shuffles the output the same way: for any permutation matrix $P$,
#
# $$\mathrm{SelfAttention}(PX) = P\,\mathrm{SelfAttention}(X), \qquad
# \mathrm{weights}(PX) = P\,\mathrm{weights}(X)\,P^\top .$$
#
# Self-attention is **permutation-equivariant**. Numerically, with the layer of section 1:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="1b62a7f9c6"
# ## 4. 自注意力不知道位置
#
# 先打乱输入的位置再做自注意力，与先做自注意力再打乱，结果相比如何？每一行输出都是对*所有*位置的加权平均，而权重只取决于查询和键的内容，与它们所处的位置无关。所以打乱输入只会让输出以同样的方式被打乱：对任意置换矩阵 $P$，
#
# $$\mathrm{SelfAttention}(PX) = P\,\mathrm{SelfAttention}(X), \qquad
# \mathrm{weights}(PX) = P\,\mathrm{weights}(X)\,P^\top .$$
#
# 自注意力是**置换等变**（permutation-equivariant）的。用第 1 节的层做数值验证：

# %%
# lang: en
x6 = torch.randn(1, 6, E, generator=g)  # six positions, named a..f below
order = torch.tensor([2, 0, 5, 1, 4, 3])  # the shuffled sequence is c a f b e d
# lang: zh
x6 = torch.randn(1, 6, E, generator=g)  # 六个位置，下面分别记作 a..f
order = torch.tensor([2, 0, 5, 1, 4, 3])  # 打乱后的序列是 c a f b e d
# lang: end
out, w = self_attention(x6)
out_shuffled, w_shuffled = self_attention(x6[:, order])
# lang: en
claim("shuffling the input shuffles the output rows the same way",
      torch.allclose(out_shuffled, out[:, order], atol=1e-6))
claim("and shuffles the rows and the columns of the weights the same way",
      torch.allclose(w_shuffled, w[:, order][:, :, order], atol=1e-6))
# lang: zh
claim("打乱输入，输出的各行也以同样的方式被打乱",
      torch.allclose(out_shuffled, out[:, order], atol=1e-6))
claim("权重的行和列也以同样的方式被打乱",
      torch.allclose(w_shuffled, w[:, order][:, :, order], atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# As a picture: the right map is the left one with its rows and columns shuffled; every
# (query, key) pair keeps its weight, wherever the pair moved.

# %% [markdown] tags=["lang-zh"] en_hash="d9040eeba5"
# 画成图：右图就是把左图的行和列打乱后的样子；每一对（查询，键）无论被挪到哪里，权重都保持不变。

# %%
names = list("abcdef")
shuffled_names = [names[i] for i in order.tolist()]
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
heatmap(w[0], ax=left, queries=names, keys=names, title="a b c d e f", vmax=1.0, colorbar=False)
heatmap(w_shuffled[0], ax=right, queries=shuffled_names, keys=shuffled_names, title=" ".join(shuffled_names), vmax=1.0)
plt.show()

# %% [markdown] tags=["lang-en"]
# So a self-attention layer cannot reverse a sequence: "reverse" means "position $i$ reads
# position $L-1-i$", and the layer has no idea which position is which. The fix is to give every
# position a vector of its own, a **positional encoding** (here a learned position embedding),
# combined with the input. The positions stay put when the tokens move, so the symmetry is
# broken:

# %% [markdown] tags=["lang-zh"] en_hash="a507ddd948"
# 因此，自注意力层无法反转一个序列：“反转”的意思是“位置 $i$ 读取位置 $L-1-i$”，而这个层根本不知道哪个位置是哪个。解决办法是给每个位置一个专属的向量，即**位置编码**（positional encoding，这里用的是可学习的位置嵌入），并把它与输入结合起来。词元移动时位置保持不动，对称性就此被打破：

# %%
# lang: en
positions = torch.randn(1, 6, E, generator=g)  # one vector per position, not per token
# lang: zh
positions = torch.randn(1, 6, E, generator=g)  # 每个位置一个向量，而不是每个词元一个
# lang: end
out_with, _ = self_attention(x6 + positions)
# lang: en
out_with_shuffled, _ = self_attention(x6[:, order] + positions)  # the tokens move, the positions stay
claim("with positions added, shuffling the input no longer just shuffles the output",
      not torch.allclose(out_with_shuffled, out_with[:, order], atol=1e-3))
# lang: zh
out_with_shuffled, _ = self_attention(x6[:, order] + positions)  # 词元移动了，位置留在原处
claim("加上位置之后，打乱输入就不再只是把输出同样打乱了",
      not torch.allclose(out_with_shuffled, out_with[:, order], atol=1e-3))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Learning an attention pattern
#
# Two toy tasks whose right attention map we know in advance. Tokens are letters; each input
# is 8 different letters out of 10, so exactly one input position holds the letter an output
# position needs.
#
# - **reverse**: `dbgejahf` → `fhajegbd`. `toy.ReverseModel` embeds each token, concatenates a
#   learned position embedding to it, applies one `SelfAttention` layer and a linear read-out.
#   Output position $i$ must read input position $7 - i$: the map should become the
#   **anti-diagonal**.
# - **double**: `dbgejahf` → `ddbbggeejjaahhff`, every letter said twice. `toy.EncoderDecoder`'s
#   encoder embeds each token with its position (the memory, $E_{kv} = 32$); its decoder has one
#   learned query vector for each of the 16 output positions ($E_q = 24$) and one
#   `CrossAttention` layer. Output position $i$ must read input position $\lfloor i/2 \rfloor$:
#   a **staircase** of 16 rows and 8 columns.
#
# Before training, the weights are whatever the random initial weights give:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="9376a586a1"
# ## 5. 学出一种注意力模式
#
# 下面是两个玩具任务，我们事先就知道正确的注意力图是什么样子。词元用字母表示；每个输入是从 10 个字母中取出的 8 个互不相同的字母，所以某个输出位置需要的字母恰好只出现在一个输入位置上。
#
# - **反转**（reverse）：`dbgejahf` → `fhajegbd`。`toy.ReverseModel` 先为每个词元做嵌入，在其后拼接一个可学习的位置嵌入，然后经过一个 `SelfAttention` 层和一个线性读出层。输出位置 $i$ 必须读取输入位置 $7 - i$：注意力图应当变成**反对角线**。
# - **重复**（double）：`dbgejahf` → `ddbbggeejjaahhff`，每个字母说两遍。`toy.EncoderDecoder` 的编码器把每个词元连同它的位置一起嵌入（即 memory，$E_{kv} = 32$）；解码器为 16 个输出位置各准备一个可学习的查询向量（$E_q = 24$），再接一个 `CrossAttention` 层。输出位置 $i$ 必须读取输入位置 $\lfloor i/2 \rfloor$：一道 16 行 8 列的**阶梯**。
#
# 训练之前，权重由随机的初始参数决定：

# %%
tokens, target = toy.example("reverse", 0)
print(toy.letters(tokens), "->", toy.letters(target), "|", toy.letters(toy.example("double", 0)[1]))
before = {task: toy.attention_map(toy.make_model(task, seed=0), tokens) for task in toy.TASKS}
print({task: tuple(weights.shape) for task, weights in before.items()})  # (L_out, L)

# %% [markdown] tags=["lang-en"]
# Training: Adam with learning rate 0.01 on fresh random batches of 64 sequences, 300 steps,
# cross-entropy on every output token. Each run takes a second or two on one CPU thread. The
# times and the exact losses below change from machine to machine; what does not change, the
# accuracy and where each query looks, comes right after them:

# %% [markdown] tags=["lang-zh"] en_hash="d62b55ab0a"
# 训练：用学习率为 0.01 的 Adam，在每步新生成的 64 个随机序列上训练 300 步，对每个输出词元计算交叉熵。在单个 CPU 线程上，每次训练只需一两秒。下面的耗时和确切的损失值因机器而异；不变的结论（准确率，以及每个查询看向哪里）紧接在它们后面：

# %% tags=["nbval-ignore-output"]
runs, seconds = {}, {}
for task in toy.TASKS:
    start = time.perf_counter()
    runs[task] = toy.train(task, seed=0)
    seconds[task] = time.perf_counter() - start
    name = message(f"l03.{task}")
    # lang: en
    print(f"{name}: {seconds[task]:.2f} s, final loss {runs[task].losses[-1]:.5f}")
    # lang: zh
    print(f"{name}：{seconds[task]:.2f} 秒，最终损失 {runs[task].losses[-1]:.5f}")
    # lang: end

fig, ax = plt.subplots(figsize=(6, 2.8), layout="constrained")
for task, run in runs.items():
    ax.plot(run.losses, label=message(f"l03.{task}"))
ax.set_yscale("log")
ax.set_xlabel(message("l03.step"))
ax.set_ylabel(message("l03.loss"))
ax.legend()
plt.show()

# %% [markdown] tags=["lang-en"]
# What does not vary from machine to machine, nor with the random numbers training starts from:
# both models get at least 95 % of the output tokens of 500 held-out sequences right; and on
# each of the 50 held-out examples the explorer below offers, every query gives the position the
# task needs more than half of its weight (so that position is also its largest weight), and on
# average more than 90 %. Not every row is one-hot: once the answers are right, the loss no
# longer pushes the last few rows to sharpen.

# %% [markdown] tags=["lang-zh"] en_hash="a98570eff6"
# 不随机器变化、也不随训练起始的随机数变化的是：两个模型在 500 个留出序列上都答对了至少 95% 的输出词元；而在下面探索器提供的 50 个留出样例中，每个查询都把一半以上的权重给了任务所需的位置（因此那个位置也是它权重最大的位置），平均下来超过 90%。并不是每一行都是 one-hot：一旦答案都对了，损失就不再推动最后那几行变得更尖锐。

# %%
# lang: en
inputs, _ = toy.examples("reverse", EXAMPLES)  # (50, L): both tasks read the same inputs
# lang: zh
inputs, _ = toy.examples("reverse", EXAMPLES)  # (50, L)：两个任务读的是同样的输入
# lang: end
for task, run in runs.items():
    needed = toy.needed_weights(toy.attention_map(run.model, inputs), task)  # (50, L_out)
    name = message(f"l03.{task}")
    # lang: en
    claim(f"{name}: at least 95 % of the held-out output tokens are right", run.accuracy >= 0.95)
    claim(f"{name}: on all {EXAMPLES} examples, every query gives the needed position more than half its weight",
          (needed > 0.5).all())
    claim(f"{name}: on average, the needed position gets more than 90 % of a query's weight", needed.mean() > 0.9)
    # lang: zh
    claim(f"{name}：留出序列中至少 95% 的输出词元预测正确", run.accuracy >= 0.95)
    claim(f"{name}：在全部 {EXAMPLES} 个样例中，每个查询都把一半以上的权重给了所需的位置",
          (needed > 0.5).all())
    claim(f"{name}：平均而言，所需的位置得到一个查询 90% 以上的权重", needed.mean() > 0.9)
    # lang: end

# %% [markdown] tags=["lang-en"]
# Before and after, on the example above: the random maps became the anti-diagonal and the
# staircase.

# %% [markdown] tags=["lang-zh"] en_hash="6fc71fe95b"
# 在上面那个样例上对比训练前后：随机的注意力图分别变成了反对角线和阶梯。

# %%
fig, axes = plt.subplots(2, 2, figsize=(9, 7.5), layout="constrained", height_ratios=[1, 1.6])
for row, task in zip(axes, toy.TASKS):
    after = toy.attention_map(runs[task].model, tokens)
    title = message("l03.self_title" if task == "reverse" else "l03.cross_title")
    for ax, weights_map, when in ((row[0], before[task], "l03.before"), (row[1], after, "l03.after")):
        heatmap(weights_map, ax=ax, keys=list(toy.letters(tokens)), vmax=1.0, annotate=False, colorbar=False,
                title=message("l03.map_title", title=title, when=message(when)))
plt.show()

# %% [markdown] tags=["lang-en"]
# And the positions are what made it possible. The same model trained with its position half
# set to zero is permutation-equivariant (section 4): output position $i$ sees its own letter
# and the set of all eight, never where they are. The letter it needs is one of the other
# seven, and nothing says which, so the best it can do is guess: right about 1 time in 7
# (14 %), far below the bar.

# %% [markdown] tags=["lang-zh"] en_hash="fc5b3c442d"
# 而这要归功于位置信息。把同一个模型的位置那一半置零后再训练，它就是置换等变的（见第 4 节）：输出位置 $i$ 能看到自己的字母和全部八个字母组成的集合，却看不到它们在哪里。它需要的字母是另外七个中的一个，而没有任何信息说明是哪一个，所以它最多只能猜：大约 7 次猜对 1 次（14%），远低于门槛。

# %%
without_positions = toy.train("reverse", seed=0, positions=False)
# lang: en
claim("without positions, fewer than 20 % of the output tokens are right", without_positions.accuracy < 0.2)
# lang: zh
claim("没有位置信息时，答对的输出词元不到 20%", without_positions.accuracy < 0.2)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. Reading the alignment
#
# A trained map is close to one-hot, so a **hard alignment** summarises it: for each query, the
# key with the largest weight. For the double model on our example, output position $i$ reads
# input position:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f9b5ef2271"
# ## 6. 读出对齐
#
# 训练好的注意力图接近 one-hot，因此可以用**硬对齐**来概括它：对每个查询，取权重最大的那个键。对于重复模型和上面的样例，输出位置 $i$ 读取的输入位置是：

# %%
cross_map = toy.attention_map(runs["double"].model, tokens)  # (16, 8)
# lang: en
hard = cross_map.argmax(dim=-1)  # (L_out,): one key per query
# lang: zh
hard = cross_map.argmax(dim=-1)  # (L_out,)：每个查询一个键
# lang: end
print(hard.tolist())
# lang: en
claim("it is the staircase: output position i reads input position i // 2", hard.tolist() == toy.target_positions("double"))
# lang: zh
claim("这正是阶梯：输出位置 i 读取输入位置 i // 2", hard.tolist() == toy.target_positions("double"))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: a hard alignment with a mask
#
# In a batch, sources have different lengths and the padding positions must never be chosen
# (lesson 02). Write `my_alignment(weights, keep_mask)`: `weights` is $(B, L_q, L_k)$,
# `keep_mask` is a bool tensor of the same shape, True where a key counts. Return a
# $(B, L_q)$ int64 tensor: for each query, the index of the kept key with the largest weight,
# and $-1$ for a query whose mask keeps no key at all. The weights may be any real numbers: the
# check also passes raw scores, some of them negative. Hint: `masked_fill` the hidden weights
# with $-\infty$ before the argmax, then handle the empty rows (`keep_mask.any(dim=-1)`).

# %% [markdown] tags=["lang-zh"] en_hash="c8b625e754"
# ### 练习 3：带掩码的硬对齐
#
# 在一个批量中，源序列长短不一，填充位置绝不能被选中（第 02 课）。写出 `my_alignment(weights, keep_mask)`：`weights` 的形状为 $(B, L_q, L_k)$，`keep_mask` 是形状相同的 bool 张量，True 表示该键有效。返回形状为 $(B, L_q)$ 的 int64 张量：对每个查询，给出有效键中权重最大者的索引；若某个查询的掩码一个键也没有保留，则返回 $-1$。权重可以是任意实数：检查也会传入原始分数，其中有些是负数。提示：取 argmax 之前先用 `masked_fill` 把被遮住的权重设为 $-\infty$，再处理空行（`keep_mask.any(dim=-1)`）。

# %% tags=["exercise"] exercise="03.alignment"
def my_alignment(weights, keep_mask):
    # lang: en
    """For each query, the kept key with the largest weight; -1 where no key is kept.

    weights: (B, L_q, L_k) float tensor (float32 or float64), any real values (attention weights
    or raw scores).
    keep_mask: (B, L_q, L_k) bool tensor, True = the key counts.
    Returns a (B, L_q) torch.int64 tensor.
    """
    # lang: zh
    """对每个查询，给出有效键中权重最大者的索引；没有任何有效键时给出 -1。

    weights：(B, L_q, L_k) 浮点张量（float32 或 float64），可以是任意实数（注意力权重或原始分数）。
    keep_mask：(B, L_q, L_k) bool 张量，True 表示该键有效。
    返回形状为 (B, L_q) 的 torch.int64 张量。
    """
    # lang: end
    ### BEGIN SOLUTION
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(dim=-1)  # (B, L_q)
    # lang: en
    return best.masked_fill(~keep_mask.any(dim=-1), -1)  # no key to choose: -1
    # lang: zh
    return best.masked_fill(~keep_mask.any(dim=-1), -1)  # 没有键可选：-1
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
check("03.alignment", my_alignment)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Explore the learned maps
#
# Move the slider to pick one of 50 held-out example sequences. Left: the reverse model's
# self-attention map; right: the double model's cross-attention map. The columns are labelled
# with the input letters and the rows with the letters each model outputs, so a bright cell
# shows which input letter an output letter was read from. The text gives both predictions
# and whether they are right.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="8ff2187183"
# ## 7. 探索学到的注意力图
#
# 拖动滑块，从 50 个留出样例序列中选一个。左图是反转模型的自注意力图，右图是重复模型的交叉注意力图。各列标注的是输入字母，各行标注的是模型输出的字母，所以一个亮格表示某个输出字母是从哪个输入字母读来的。下方文字给出两个模型的预测以及是否正确。

# %% tags=["nbval-ignore-output"]
attention_maps_explorer(runs["reverse"].model, runs["double"].model)

# %% [markdown] tags=["lang-en"]
# The explorer draws with `attention_maps_view`, an ordinary function; here is its text for
# example 7:

# %% [markdown] tags=["lang-zh"] en_hash="2bba1e9b7c"
# 探索器用普通函数 `attention_maps_view` 作图；下面是它对样例 7 给出的文字：

# %%
_, summary = attention_maps_view(runs["reverse"].model, runs["double"].model, example=7)
print(summary)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Self-attention projects queries, keys and values from one sequence; its weights are
#   $(L, L)$. Cross-attention takes the queries from the decoder and the keys and values from
#   the encoder's memory; its weights are $(L_q, L_{kv})$, the alignment, and the two sides may
#   differ in length and in feature size.
# - `SelfAttention` and `CrossAttention` return `(output, weights)` and equal
#   `nn.MultiheadAttention` with one head; a feature-size mismatch gets an error that names the
#   argument.
# - A widely copied PyTorch tutorial has two bugs in these layers: a swapped return order that
#   turns the output into the weights, and a cross-attention built on a one-input layer. Test
#   on shapes where every size differs.
# - Without positions, self-attention is permutation-equivariant; a positional encoding lets it
#   learn position-based patterns such as the anti-diagonal of reversal.
# - Tiny models learn the expected maps in a second or two: every query puts more than half of
#   its weight on the position the task needs, and a hard alignment (argmax over the kept keys)
#   reads the maps out.
#
# Next: lesson 04, multi-head attention: several of these layers side by side, each with its own
# projections, fused into one. It also takes apart the tutorial's third bug, in its multi-head
# layers.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="52e16dbf85"
# ## 小结
#
# - 自注意力从同一个序列投影出查询、键和值，权重形状为 $(L, L)$。交叉注意力的查询来自解码器，键和值来自编码器的 memory，权重形状为 $(L_q, L_{kv})$，即对齐；两侧的长度和特征维度都可以不同。
# - `SelfAttention` 和 `CrossAttention` 返回 `(output, weights)`，与只有一个头的 `nn.MultiheadAttention` 结果一致；特征维度不匹配时，报错会指明是哪个参数。
# - 一篇流传很广的 PyTorch 教程在这两个层里有两个 bug：返回顺序颠倒，使输出变成了权重；交叉注意力建立在只有一个输入的层之上。测试时要用各个维度都不相同的形状。
# - 不带位置信息的自注意力是置换等变的；加上位置编码，它才能学会基于位置的模式，比如反转任务的反对角线。
# - 极小的模型一两秒就学会了预期的注意力图：每个查询都把一半以上的权重放在任务所需的位置上；硬对齐（在有效键上取 argmax）可以把注意力图读出来。
#
# 下一课（第 04 课）讲多头注意力：把若干个这样的层并排放置，各有各的投影，再融合成一个。它还会剖析那篇教程的第三个 bug，它出在多头注意力层里。
