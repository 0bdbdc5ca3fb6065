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
# # The Transformer block
#
# Lessons 01 to 05 were about attention. A Transformer wraps self-attention and multi-head
# attention in a few more ideas: positional encoding, residual connections, layer normalisation
# and a feed-forward network. This lesson builds them and assembles them into the encoder and
# decoder layers of the original Transformer (Vaswani et al., 2017). It checks every piece against
# PyTorch's own, and trains a tiny encoder–decoder in seconds.
#
# In this lesson you will
#
# 1. give every token its position: the sinusoidal positional encoding and learned position
#    embeddings, and why they are added to the token embeddings;
# 2. build the encoder layer (multi-head self-attention, residual connections, LayerNorm, a
#    position-wise feed-forward network, dropout) and prove it equal to
#    `nn.TransformerEncoderLayer`;
# 3. compare post-norm and pre-norm, and see why pre-norm trains more easily and what a
#    learning-rate warm-up is for;
# 4. build the decoder layer, with its two masks side by side, and prove it equal to
#    `nn.TransformerDecoderLayer`;
# 5. train a tiny encoder–decoder to reverse sequences of different lengths, decode greedily,
#    and look at what it reads; then train a deeper one, post-norm and pre-norm, with and without
#    warm-up;
# 6. count what a layer costs, part by part, and see where attention takes over as $L$ grows.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="a89d424205"
# # Transformer 块
#
# 第 01 到 05 课讲的都是注意力。Transformer 在自注意力和多头注意力的外面，还包了几样东西：位置编码、残差连接（residual connection）、层归一化和前馈网络（feed-forward network）。本课把它们逐一做出来，再组装成最初的 Transformer（Vaswani 等，2017）的编码器层和解码器层。每个部件都要与 PyTorch 自己的实现对照；最后，我们只用几秒钟就训练出一个极小的编码器–解码器。
#
# 本课你将：
#
# 1. 让每个词元（token）知道自己的位置：学习正弦位置编码和可学习的位置嵌入，并弄清为什么要把它们加到词元嵌入上；
# 2. 搭建编码器层（多头自注意力、残差连接、LayerNorm、逐位置的前馈网络、dropout），并证明它与 `nn.TransformerEncoderLayer` 相同；
# 3. 比较后归一化与前归一化，看看为什么前归一化更容易训练，学习率预热（warm-up）又起什么作用；
# 4. 搭建解码器层，把它的两个掩码并排画出来，并证明它与 `nn.TransformerDecoderLayer` 相同；
# 5. 训练一个极小的编码器–解码器，反转长短不一的序列，用贪心解码（greedy decoding）生成答案，并看看它读了什么；再训练一个更深的模型，分别用后归一化和前归一化，加预热和不加预热；
# 6. 逐个部分算出一个层的代价，看看 $L$ 增长时注意力从哪里开始占上风。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import check, claim, norm_study, seq2seq, setup, toy
from course_utils.masks import causal_mask
from course_utils.transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LearnedPositionalEmbedding,
    flops,
    offset_rotation,
    parameter_count,
    sinusoidal_encoding,
)
from course_utils.viz import (
    decoder_maps,
    decoder_masks,
    encoding_curves,
    encoding_heatmap,
    flops_by_part,
    format_bytes,
    gradient_by_layer,
    offset_bars,
    offset_dot_products,
    warmup_curves,
)
from course_utils.widgets import decoding_explorer

setup(lang="en")
# lang: en
torch.set_printoptions(precision=3, sci_mode=False)  # three decimals are plenty to compare encodings
# lang: zh
torch.set_printoptions(precision=3, sci_mode=False)  # 比较编码，三位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. Where is each token? Positional encoding
#
# Attention compares every query with every key, and nothing in that comparison says where a key
# stands in the sequence. Lesson 03 (section 4) found that a self-attention layer is
# **permutation-equivariant**: shuffle the rows of its input, and the rows of its output are
# shuffled the same way. A whole encoder layer (section 2 builds one) is too, since its other
# parts, the feed-forward network and LayerNorm, work on each position alone. Checked on a
# randomly initialised layer, in eval mode (no dropout):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="3316e2b096"
# ## 1. 每个词元在哪里？位置编码
#
# 注意力拿每个查询与每个键作比较，而比较的过程中，没有任何信息告诉它一个键位于序列的哪个位置。第 03 课（第 4 节）发现，自注意力层是**置换等变**的：把输入的行打乱，输出的行也按同样的方式被打乱。整个编码器层（第 2 节会搭建一个）也是如此，因为它的另外两个部分——前馈网络和 LayerNorm——都只对每个位置单独起作用。在一个随机初始化的层上检查一下（eval 模式，没有 dropout）：

# %%
torch.manual_seed(0)
layer = EncoderLayer(d_model=16, nhead=4, d_ff=32).eval()
g = torch.Generator().manual_seed(0)
x = torch.randn(1, 5, 16, generator=g)  # (B, L, E)
order = torch.tensor([2, 0, 4, 1, 3])
with torch.no_grad():
    out, out_shuffled = layer(x), layer(x[:, order])
# lang: en
claim("shuffling the input rows of an encoder layer shuffles its output rows the same way",
      torch.allclose(out_shuffled, out[:, order], atol=1e-6))
# lang: zh
claim("把编码器层输入的行打乱，它输出的行也以同样的方式被打乱",
      torch.allclose(out_shuffled, out[:, order], atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# For language this is fatal: "dog bites man" and "man bites dog" hold the same words. With the
# letters `a`, `b`, `c` as tokens, the `a` of `abc` and the `a` of `cab` come out of the layer as the
# same vector. The fix is to add to each token's embedding a vector that depends only on its
# position, a **positional encoding**. Then the two differ:

# %% [markdown] tags=["lang-zh"] en_hash="a1de00f54b"
# 对语言来说，这是致命的：“狗咬人”和“人咬狗”用的是同样的字。把字母 `a`、`b`、`c` 当作词元，`abc` 里的 `a` 和 `cab` 里的 `a` 经过这个层后得到的是同一个向量。解决办法是给每个词元的嵌入加上一个只取决于其位置的向量，即**位置编码**。加上之后，两者就不同了：

# %%
# lang: en
embed = nn.Embedding(3, 16)  # the tokens a, b, c
abc, cab = torch.tensor([[0, 1, 2]]), torch.tensor([[2, 0, 1]])  # (B, L) token ids
pe3 = sinusoidal_encoding(3, 16)  # (L, E): one vector per position (explained next)
# lang: zh
embed = nn.Embedding(3, 16)  # 词元 a、b、c
abc, cab = torch.tensor([[0, 1, 2]]), torch.tensor([[2, 0, 1]])  # (B, L)：词元编号
pe3 = sinusoidal_encoding(3, 16)  # (L, E)：每个位置一个向量（下面就讲）
# lang: end
with torch.no_grad():
    plain_abc, plain_cab = layer(embed(abc)), layer(embed(cab))
    placed_abc, placed_cab = layer(embed(abc) + pe3), layer(embed(cab) + pe3)
# lang: en
claim("without positions, 'a' comes out the same in 'abc' (position 0) and in 'cab' (position 1)",
      torch.allclose(plain_abc[0, 0], plain_cab[0, 1], atol=1e-6))
claim("with positions added, the two come out different",
      not torch.allclose(placed_abc[0, 0], placed_cab[0, 1], atol=1e-3))
# lang: zh
claim("不加位置时，'abc' 里的 'a'（位置 0）和 'cab' 里的 'a'（位置 1）输出相同",
      torch.allclose(plain_abc[0, 0], plain_cab[0, 1], atol=1e-6))
claim("加上位置之后，两者的输出就不同了",
      not torch.allclose(placed_abc[0, 0], placed_cab[0, 1], atol=1e-3))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Sinusoidal encoding: a clock with many hands
#
# The original Transformer uses fixed vectors, nothing learned. Position $p$ gets $E$ numbers in
# $E/2$ pairs; pair $i$ (features $2i$ and $2i+1$) holds the sine and the cosine of one angle:
#
# $$PE[p, 2i] = \sin(p\,\omega_i), \qquad PE[p, 2i+1] = \cos(p\,\omega_i), \qquad
# \omega_i = 10000^{-2i/E}, \quad i = 0, \dots, E/2 - 1 .$$
#
# Picture each pair as the hand of a clock: $(\sin, \cos)$ is a point on the unit circle, and
# from one position to the next the hand turns by the angle $\omega_i$. Pair 0 turns fast, one
# radian per position, and comes round every $2\pi \approx 6.3$ positions. The last pair turns so
# slowly that it needs tens of thousands of positions for one round (47,117 for $E = 64$; as $E$
# grows, almost $2\pi \cdot 10000 \approx 63\,000$). In between, the wavelengths
# $2\pi/\omega_i$ grow geometrically: each pair's is the previous one's times $10000^{2/E}$. Read
# together, the fast hands tell neighbouring positions apart and the slow hands tell distant ones
# apart, like the second, minute and hour hands of a clock.
#
# Sines sit on the even features and cosines on the odd ones, interleaved, as in the paper.
# Some code puts all the sines first, then all the cosines: the same numbers with the features
# in another order.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="4da0b10b70"
# ### 正弦位置编码：一只有许多指针的钟
#
# 最初的 Transformer 用的是固定的向量，不需要学习。位置 $p$ 得到 $E$ 个数，分成 $E/2$ 对；第 $i$ 对（特征 $2i$ 和 $2i+1$）是同一个角度的正弦和余弦：
#
# $$PE[p, 2i] = \sin(p\,\omega_i), \qquad PE[p, 2i+1] = \cos(p\,\omega_i), \qquad
# \omega_i = 10000^{-2i/E}, \quad i = 0, \dots, E/2 - 1 .$$
#
# 把每一对想象成钟的一根指针：$(\sin, \cos)$ 是单位圆上的一个点，从一个位置走到下一个位置，指针转过角度 $\omega_i$。第 0 对转得快，每个位置转 1 弧度，每隔 $2\pi \approx 6.3$ 个位置转满一圈。最后一对转得极慢，要几万个位置才转满一圈（$E = 64$ 时是 47,117 个位置；$E$ 越大，越接近 $2\pi \cdot 10000 \approx 63\,000$）。两者之间，波长 $2\pi/\omega_i$ 按几何级数增长：每一对的波长都是前一对的 $10000^{2/E}$ 倍。合起来读，快指针区分相邻的位置，慢指针区分相距很远的位置，就像钟上的秒针、分针和时针。
#
# 正弦放在偶数号特征上，余弦放在奇数号特征上，交错排列，与论文一致。有些代码先放全部正弦，再放全部余弦：数值相同，只是特征的顺序不同。

# %%
E = 64
omega = 10000 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)  # (E/2,): ω_i
wavelengths = 2 * math.pi / omega  # (E/2,)
# lang: en
claim(f"E = {E}: the wavelengths run from {wavelengths[0]:.2f} to {wavelengths[-1]:,.0f} positions",
      wavelengths.diff().gt(0).all())
claim(f"each is 10000^(2/E) = {10000 ** (2 / E):.3f} times the one before",
      torch.allclose(wavelengths[1:] / wavelengths[:-1], torch.tensor(10000 ** (2 / E), dtype=torch.float64)))
# lang: zh
claim(f"E = {E}：波长从 {wavelengths[0]:.2f} 个位置一直到 {wavelengths[-1]:,.0f} 个位置",
      wavelengths.diff().gt(0).all())
claim(f"每个波长都是前一个的 10000^(2/E) = {10000 ** (2 / E):.3f} 倍",
      torch.allclose(wavelengths[1:] / wavelengths[:-1], torch.tensor(10000 ** (2 / E), dtype=torch.float64)))
# lang: end

# %% [markdown] tags=["lang-en"]
# `transformer.sinusoidal_encoding(L, E)` returns the $(L, E)$ table. On the left, each row is one
# position's vector: the first columns (fast hands) flicker from row to row, and the columns
# further right change more and more slowly. From feature 40 on, none moves by more than about
# 0.3 over 100 positions (sine near 0, cosine near 1: the stripes). On the right, four features
# against the position: features 0 and 1 are the same fast hand, read as sine and as cosine, a
# quarter turn apart; features 10 and 20 are slower hands.

# %% [markdown] tags=["lang-zh"] en_hash="73db801879"
# `transformer.sinusoidal_encoding(L, E)` 返回形状为 $(L, E)$ 的表。左图中每一行是一个位置的向量：最前面几列（快指针）在相邻行之间来回闪烁，越往右的列变化越慢。从特征 40 起，每个特征在 100 个位置之内的变化都不超过 0.3 左右（正弦接近 0，余弦接近 1，形成条纹）。右图画出四个特征随位置的变化：特征 0 和 1 是同一根快指针，分别按正弦和余弦读出，相差四分之一圈；特征 10 和 20 是较慢的指针。

# %%
pe = sinusoidal_encoding(100, E)  # (L, E)
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
encoding_heatmap(pe, ax=left)
encoding_curves(pe, [0, 1, 10, 20], ax=right)
plt.show()
# lang: en
claim("from feature 40 on, every feature stays within 0.31 of its value at position 0",
      (pe[:, 40:] - pe[0, 40:]).abs().max() < 0.31)
# lang: zh
claim("从特征 40 起，每个特征与它在位置 0 的值相差都不到 0.31",
      (pe[:, 40:] - pe[0, 40:]).abs().max() < 0.31)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Why sines *and* cosines: moving on is a rotation
#
# Moving $k$ positions on adds the angle $k\omega_i$ to pair $i$, whatever $p$ is. Adding an angle
# to $(\sin\theta, \cos\theta)$ rotates the pair:
#
# $$\begin{pmatrix}\sin(\theta + k\omega_i)\\ \cos(\theta + k\omega_i)\end{pmatrix} =
# \begin{pmatrix}\cos k\omega_i & \sin k\omega_i\\ -\sin k\omega_i & \cos k\omega_i\end{pmatrix}
# \begin{pmatrix}\sin\theta\\ \cos\theta\end{pmatrix}.$$
#
# So one matrix $R_k$, block-diagonal with one such $2 \times 2$ block per pair, moves *every*
# position's encoding $k$ places on: $PE[p + k] = PE[p]\,R_k^\top$ for all $p$. A linear map (and
# attention's projections are linear maps) can therefore learn "the token $k$ places back" once
# and use it at every position. That is the reason the paper gives for choosing sines and cosines.
#
# Sines alone would not do: $\sin(\theta + \varphi) = \sin\theta\cos\varphi +
# \cos\theta\sin\varphi$ needs the cosine, which a table of sines does not hold. Indeed no matrix
# can move a table of sines on: at position 0 every sine is 0, and a matrix maps the zero vector
# to zero, not to position $k$'s sines. `transformer.offset_rotation(k, E)` builds $R_k$:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="e298d8dc30"
# ### 为什么既要正弦又要余弦：平移就是旋转
#
# 向后移动 $k$ 个位置，就是给第 $i$ 对加上角度 $k\omega_i$，与 $p$ 是多少无关。给 $(\sin\theta, \cos\theta)$ 加上一个角度，就是把这一对旋转一下：
#
# $$\begin{pmatrix}\sin(\theta + k\omega_i)\\ \cos(\theta + k\omega_i)\end{pmatrix} =
# \begin{pmatrix}\cos k\omega_i & \sin k\omega_i\\ -\sin k\omega_i & \cos k\omega_i\end{pmatrix}
# \begin{pmatrix}\sin\theta\\ \cos\theta\end{pmatrix}.$$
#
# 所以只需一个矩阵 $R_k$（块对角，每一对占一个这样的 $2 \times 2$ 块），就能把*每个*位置的编码向后移动 $k$ 位：对所有 $p$，$PE[p + k] = PE[p]\,R_k^\top$。于是一个线性映射（注意力的各个投影都是线性映射）只要学一次“往回数 $k$ 个位置的词元”，就能用在每个位置上。论文选用正弦和余弦，给出的正是这个理由。
#
# 只有正弦是不行的：$\sin(\theta + \varphi) = \sin\theta\cos\varphi + \cos\theta\sin\varphi$ 离不开余弦，而只有正弦的表里没有余弦。事实上，没有哪个矩阵能把只有正弦的表向后移动：位置 0 上所有的正弦都是 0，而矩阵只能把零向量映射成零向量，得不到位置 $k$ 的那些正弦值。`transformer.offset_rotation(k, E)` 构造 $R_k$：

# %%
pe64 = sinusoidal_encoding(100, E, dtype=torch.float64)  # (L, E)
for k in (1, 7, 30):
    R = offset_rotation(k, E)  # (E, E)
    # lang: en
    claim(f"PE[p + {k}] = PE[p] @ R_{k}ᵀ for every p from 0 to {99 - k}, with one matrix R_{k}",
          torch.allclose(pe64[k:], pe64[:-k] @ R.T))
    # lang: zh
    claim(f"对 0 到 {99 - k} 的每个 p，都有 PE[p + {k}] = PE[p] @ R_{k}ᵀ，用的是同一个矩阵 R_{k}",
          torch.allclose(pe64[k:], pe64[:-k] @ R.T))
    # lang: end

# %% [markdown] tags=["lang-en"]
# A consequence: the dot product of two positions' encodings depends on their offset only. Pair
# $i$ contributes $\sin(p\omega_i)\sin((p+k)\omega_i) + \cos(p\omega_i)\cos((p+k)\omega_i) =
# \cos(k\omega_i)$, so
#
# $$PE[p] \cdot PE[p + k] = \sum_{i=0}^{E/2-1} \cos(k\,\omega_i),$$
#
# the same for every $p$, largest ($E/2$) at $k = 0$, and the same for $k$ and $-k$: the dot
# product alone does not say which of the two positions comes first. The plot draws it from three
# starting positions: the three curves lie on top of each other.

# %% [markdown] tags=["lang-zh"] en_hash="d1741bf6a6"
# 由此可知：两个位置的编码的点积只取决于它们之间的偏移。第 $i$ 对贡献 $\sin(p\omega_i)\sin((p+k)\omega_i) + \cos(p\omega_i)\cos((p+k)\omega_i) = \cos(k\omega_i)$，所以
#
# $$PE[p] \cdot PE[p + k] = \sum_{i=0}^{E/2-1} \cos(k\,\omega_i),$$
#
# 对每个 $p$ 都一样；在 $k = 0$ 时最大（等于 $E/2$）；$k$ 与 $-k$ 的值也相同：单看点积，分不出两个位置谁在前。下图从三个不同的起始位置画出它：三条曲线完全重合。

# %%
positions = torch.arange(100, dtype=torch.float64)
# lang: en
offsets = positions[None, :] - positions[:, None]  # (L, L): k = q - p for the pair (p, q)
# lang: zh
offsets = positions[None, :] - positions[:, None]  # (L, L)：位置对 (p, q) 的偏移 k = q - p
# lang: end
formula = torch.cos(offsets[..., None] * omega).sum(-1)  # (L, L): Σ_i cos(k ω_i)
# lang: en
claim("PE[p] · PE[q] = Σ_i cos((q - p) ω_i) for all 100 × 100 pairs of positions", torch.allclose(pe64 @ pe64.T, formula))
# lang: zh
claim("对全部 100 × 100 对位置，都有 PE[p] · PE[q] = Σ_i cos((q - p) ω_i)", torch.allclose(pe64 @ pe64.T, formula))
# lang: end
offset_dot_products(pe64, starts=[0, 20, 50], max_offset=49)
plt.show()

# %% [markdown] tags=["lang-en"]
# Attention does not take that dot product, though: it compares $PE[p]\,W_Q$ with $PE[q]\,W_K$,
# and the projections can tell the two orders apart. The score of a query at $p$ and a key at $q$
# is $PE[p]\,W_Q W_K^\top\,PE[q]^\top$. If $W_Q W_K^\top$ is symmetric (when $W_Q = W_K$, say),
# swapping the query and the key gives the same score, so the pair still cannot say which of its two
# positions comes first. But $W_Q W_K^\top$ need not be symmetric, and then the score can read the
# sine part of $R_k$ (the off-diagonal entries $\pm\sin k\omega_i$), which changes sign with $k$.
# The extreme case is $W_Q W_K^\top = J$, a quarter turn in every pair (each $2 \times 2$ block
# $\begin{pmatrix}0 & 1\\ -1 & 0\end{pmatrix}$): then pair $i$ contributes
# $\sin(p\omega_i)\cos(q\omega_i) - \cos(p\omega_i)\sin(q\omega_i) = -\sin(k\omega_i)$, and
#
# $$PE[p]\,J\,PE[p + k]^\top = -\sum_{i=0}^{E/2-1} \sin(k\,\omega_i),$$
#
# again the same for every $p$, but opposite for $k$ and $-k$.

# %% [markdown] tags=["lang-zh"] en_hash="e897ab8fe4"
# 不过，注意力算的并不是这个点积：它比较的是 $PE[p]\,W_Q$ 和 $PE[q]\,W_K$，而经过这两个投影，就分得出两种先后顺序了。位置 $p$ 上的查询与位置 $q$ 上的键，分数是 $PE[p]\,W_Q W_K^\top\,PE[q]^\top$。如果 $W_Q W_K^\top$ 是对称矩阵（例如 $W_Q = W_K$ 时），把查询和键对调，分数不变，这一对位置仍然说不出谁在前。但 $W_Q W_K^\top$ 不必对称；不对称时，分数就能读到 $R_k$ 的正弦部分（非对角线上的 $\pm\sin k\omega_i$），而它随 $k$ 变号。最极端的情形是 $W_Q W_K^\top = J$：在每一对上转四分之一圈（每个 $2 \times 2$ 块都是 $\begin{pmatrix}0 & 1\\ -1 & 0\end{pmatrix}$）。这时第 $i$ 对贡献 $\sin(p\omega_i)\cos(q\omega_i) - \cos(p\omega_i)\sin(q\omega_i) = -\sin(k\omega_i)$，于是
#
# $$PE[p]\,J\,PE[p + k]^\top = -\sum_{i=0}^{E/2-1} \sin(k\,\omega_i),$$
#
# 它同样对每个 $p$ 都一样，但 $k$ 与 $-k$ 的值互为相反数。

# %%
g = torch.Generator().manual_seed(0)
# lang: en
W_Q, W_K = torch.randn(2, E, 16, generator=g, dtype=torch.float64)  # two random projections, E -> 16
same = pe64 @ W_Q @ W_Q.T @ pe64.T  # (L, L): query p (row) against key q (column), W_K = W_Q
# lang: zh
W_Q, W_K = torch.randn(2, E, 16, generator=g, dtype=torch.float64)  # 两个随机投影，E -> 16
same = pe64 @ W_Q @ W_Q.T @ pe64.T  # (L, L)：查询 p（行）对键 q（列），W_K = W_Q
# lang: end
different = pe64 @ W_Q @ W_K.T @ pe64.T  # (L, L), W_K ≠ W_Q
J = torch.block_diag(*[torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)] * (E // 2))  # (E, E)
quarter_turn = pe64 @ J @ pe64.T  # (L, L)
# lang: en
claim("W_K = W_Q (so W_Q W_Kᵀ is symmetric): swapping the query and the key changes no score",
      torch.allclose(same, same.T))
claim("W_K ≠ W_Q: swapping them changes the scores", not torch.allclose(different, different.T))
claim("W_Q W_Kᵀ = J: the score of query p and key q is −Σ_i sin((q − p) ω_i) for all 100 × 100 pairs",
      torch.allclose(quarter_turn, -torch.sin(offsets[..., None] * omega).sum(-1)))
claim(f"so a key 5 positions after the query scores {quarter_turn[20, 25]:.2f}, a key 5 positions before it "
      f"{quarter_turn[20, 15]:.2f}", torch.isclose(quarter_turn[20, 25], -quarter_turn[20, 15])
      and quarter_turn[20, 25].abs() > 1)
# lang: zh
claim("W_K = W_Q（于是 W_Q W_Kᵀ 是对称的）：把查询和键对调，没有哪个分数会变", torch.allclose(same, same.T))
claim("W_K ≠ W_Q：对调之后，分数变了", not torch.allclose(different, different.T))
claim("W_Q W_Kᵀ = J：对全部 100 × 100 对位置，查询 p 与键 q 的分数都是 −Σ_i sin((q − p) ω_i)",
      torch.allclose(quarter_turn, -torch.sin(offsets[..., None] * omega).sum(-1)))
claim(f"所以键在查询之后 5 个位置时，分数是 {quarter_turn[20, 25]:.2f}；在查询之前 5 个位置时，分数是 "
      f"{quarter_turn[20, 15]:.2f}", torch.isclose(quarter_turn[20, 25], -quarter_turn[20, 15])
      and quarter_turn[20, 25].abs() > 1)
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the sinusoidal table
#
# Write `my_sinusoidal_encoding(length, d_model)`: the $(L, E)$ float32 table with, for every
# position $p = 0 \dots L-1$ and every pair $i$ of features,
# $PE[p, 2i] = \sin(p / 10000^{2i/E})$ and $PE[p, 2i+1] = \cos(p / 10000^{2i/E})$: sines on the
# even features, cosines on the odd ones, interleaved. An odd $E$ is allowed: its last feature is
# the sine of the last pair, with no room left for that pair's cosine. Computing the angles in
# float64 and rounding once at the end is a good habit (far positions lose digits of their angle in
# float32); return float32. Write it yourself: the check refuses the course's own
# `transformer.sinusoidal_encoding`, which is this exercise's answer, and
# `transformer.offset_rotation`, which gives it too.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="b51a777fcd"
# ### 练习 1：正弦编码表
#
# 写出 `my_sinusoidal_encoding(length, d_model)`：返回形状为 $(L, E)$ 的 float32 表，对每个位置 $p = 0 \dots L-1$ 和每一对特征 $i$，$PE[p, 2i] = \sin(p / 10000^{2i/E})$，$PE[p, 2i+1] = \cos(p / 10000^{2i/E})$：偶数号特征放正弦，奇数号特征放余弦，两者交错排列。$E$ 可以是奇数：这时最后一个特征是最后一对的正弦，已经没有位置再放这一对的余弦。用 float64 计算角度、最后只舍入一次是个好习惯（位置越靠后，float32 丢掉的角度有效数字越多）；返回 float32。请自己写出来：检查不接受课程自带的 `transformer.sinusoidal_encoding`（它正是本题的答案），也不接受同样能得出这张表的 `transformer.offset_rotation`。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="06.sinusoidal_encoding"
def my_sinusoidal_encoding(length, d_model):
    # lang: en
    """The sinusoidal positional encoding of "Attention Is All You Need".

    length: L, the number of positions 0 … L − 1 (an int ≥ 1).
    d_model: E, the number of features (an int ≥ 1; odd allowed).
    Returns a (L, E) float32 tensor PE with, for every pair i of features,
        PE[p, 2i]     = sin(p / 10000^(2i / E))
        PE[p, 2i + 1] = cos(p / 10000^(2i / E))
    sines on the even features, cosines on the odd ones. For an odd E the last feature is
    the sine of pair (E − 1) / 2, whose cosine does not fit.
    """
    # lang: zh
    """《Attention Is All You Need》中的正弦位置编码。

    length：L，位置的个数，位置为 0 … L − 1（≥ 1 的整数）。
    d_model：E，特征的个数（≥ 1 的整数，可以是奇数）。
    返回形状为 (L, E) 的 float32 张量 PE，对每一对特征 i：
        PE[p, 2i]     = sin(p / 10000^(2i / E))
        PE[p, 2i + 1] = cos(p / 10000^(2i / E))
    偶数号特征放正弦，奇数号特征放余弦。E 为奇数时，最后一个特征是第 (E − 1) / 2 对的
    正弦，这一对的余弦放不下。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i for every pair: 0, 2, 4, …
    # lang: zh
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 每一对的 2i：0, 2, 4, …
    # lang: end
    positions = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    angles = positions / 10000 ** (two_i / d_model)  # (L, (E + 1) // 2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angles.sin()
    # lang: en
    pe[:, 1::2] = angles.cos()[:, : d_model // 2]  # an odd E has one cosine fewer
    # lang: zh
    pe[:, 1::2] = angles.cos()[:, : d_model // 2]  # E 为奇数时，余弦少一个
    # lang: end
    return pe.float()
    ### END SOLUTION


# %%
from course_utils import check
check("06.sinusoidal_encoding", my_sinusoidal_encoding)

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: the shift as a rotation
#
# Write `my_offset_rotation(k, d_model)`: the $(E, E)$ float64 matrix $R_k$ that moves every
# sinusoidal encoding $k$ positions on, $PE[p + k] = PE[p]\,R_k^\top$ for every position $p$, as
# `transformer.offset_rotation(k, E)` does. $R_k$ is block-diagonal: pair $i$ (rows and columns
# $2i$ and $2i+1$) gets the $2 \times 2$ block of the formula above,
# $\begin{pmatrix}\cos\varphi_i & \sin\varphi_i\\ -\sin\varphi_i & \cos\varphi_i\end{pmatrix}$ with
# $\varphi_i = k\,\omega_i = k / 10000^{2i/E}$, and every entry outside the blocks is 0. $k$ is any
# integer (a negative $k$ moves back, $k = 0$ gives the identity); $E$ is even. Compute in float64
# and return float64: $k\,\omega_i$ reaches thousands of radians when $k$ does. Before you check
# it, you can try it on your table from Exercise 1: with `table = my_sinusoidal_encoding(40, 8).double()`,
# `table[3:]` should be `table[:-3] @ my_offset_rotation(3, 8).T` to within float32's rounding.
# Write it yourself: the check refuses the course's `transformer.offset_rotation`, which is this
# exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="a393c313bf"
# ### 练习 2：平移就是旋转
#
# 写出 `my_offset_rotation(k, d_model)`：返回形状为 $(E, E)$ 的 float64 矩阵 $R_k$，它把每个正弦位置编码向后移动 $k$ 个位置：对每个位置 $p$，都有 $PE[p + k] = PE[p]\,R_k^\top$，与 `transformer.offset_rotation(k, E)` 相同。$R_k$ 是块对角矩阵：第 $i$ 对（第 $2i$、$2i+1$ 行和列）放上面公式里的 $2 \times 2$ 块 $\begin{pmatrix}\cos\varphi_i & \sin\varphi_i\\ -\sin\varphi_i & \cos\varphi_i\end{pmatrix}$，其中 $\varphi_i = k\,\omega_i = k / 10000^{2i/E}$；块以外的元素都是 0。$k$ 可以是任意整数（$k$ 为负时往回移动，$k = 0$ 时是单位矩阵）；$E$ 是偶数。请用 float64 计算，并以 float64 返回：$k$ 很大时，$k\,\omega_i$ 可以达到几千弧度。检查之前，可以先拿练习 1 里你自己的表试一试：令 `table = my_sinusoidal_encoding(40, 8).double()`，那么 `table[3:]` 与 `table[:-3] @ my_offset_rotation(3, 8).T` 应当只差 float32 的舍入误差。请自己写出来：检查不接受课程自带的 `transformer.offset_rotation`，它正是本题的答案。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="06.offset_rotation"
def my_offset_rotation(k, d_model):
    # lang: en
    """The matrix R_k that moves every sinusoidal encoding k positions on.

    k: the offset, an int (negative: back; 0: the identity).
    d_model: E, even (an int ≥ 2).
    Returns a (E, E) float64 tensor R_k with PE[p + k] = PE[p] @ R_k.T for every position p.
    It is block-diagonal: for every pair i, rows and columns 2i and 2i + 1 hold
        [[cos φ_i,  sin φ_i],
         [-sin φ_i, cos φ_i]],   φ_i = k / 10000^(2i / E),
    and every other entry is 0.
    """
    # lang: zh
    """把每个正弦位置编码向后移动 k 个位置的矩阵 R_k。

    k：偏移量，整数（为负时往回移动；为 0 时是单位矩阵）。
    d_model：E，偶数（≥ 2 的整数）。
    返回形状为 (E, E) 的 float64 张量 R_k，对每个位置 p 都有 PE[p + k] = PE[p] @ R_k.T。
    它是块对角矩阵：对每一对 i，第 2i、2i + 1 行和列放
        [[cos φ_i,  sin φ_i],
         [-sin φ_i, cos φ_i]]，φ_i = k / 10000^(2i / E)，
    其余元素都是 0。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i for every pair
    phi = k / 10000 ** (two_i / d_model)  # (E/2,): the angle each pair turns by
    # lang: zh
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 每一对的 2i
    phi = k / 10000 ** (two_i / d_model)  # (E/2,)：每一对转过的角度
    # lang: end
    c, s = phi.cos(), phi.sin()
    blocks = torch.stack((torch.stack((c, s), dim=-1), torch.stack((-s, c), dim=-1)), dim=-2)  # (E/2, 2, 2)
    return torch.block_diag(*blocks)  # (E, E)
    ### END SOLUTION


# %%
from course_utils import check
check("06.offset_rotation", my_offset_rotation)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Learned position embeddings
#
# The other common choice (BERT, GPT-2) is to learn the vectors: a table of `max_len` rows, one
# trained vector per position, that is, an `nn.Embedding` looked up by position instead of by
# token. `transformer.LearnedPositionalEmbedding(max_len, E)` is such a table; called with a
# length $L$, it returns the first $L$ rows, in the same $(L, E)$ layout as `sinusoidal_encoding`.
# Training finds whatever the task needs, at a price: the table has no built-in relation between
# positions (nothing makes rows 7 and 8 alike unless training does), and it has no row beyond
# `max_len`:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="57257e82e0"
# ### 可学习的位置嵌入
#
# 另一种常见做法（BERT、GPT-2）是把这些向量学出来：一张有 `max_len` 行的表，每个位置一个可训练的向量，也就是一个按位置（而不是按词元）查表的 `nn.Embedding`。`transformer.LearnedPositionalEmbedding(max_len, E)` 就是这样一张表；用长度 $L$ 调用它，返回表的前 $L$ 行，布局 $(L, E)$ 与 `sinusoidal_encoding` 相同。任务需要什么，训练就学出什么，但这是有代价的：表里的位置之间没有任何内在联系（除非训练让第 7 行和第 8 行变得相像，否则它们毫无关系），而且超出 `max_len` 的位置没有对应的行：

# %%
torch.manual_seed(0)
learned = LearnedPositionalEmbedding(max_len=16, d_model=E)
# lang: en
claim("the table holds 16 × 64 = 1024 learned numbers", sum(p.numel() for p in learned.parameters()) == 1024)
claim("learned(10) is the first 10 rows of the table, shape (10, 64)",
      learned(10).shape == (10, 64) and torch.equal(learned(10), learned.embedding.weight[:10]))
# lang: zh
claim("这张表有 16 × 64 = 1024 个可学习的数", sum(p.numel() for p in learned.parameters()) == 1024)
claim("learned(10) 就是表的前 10 行，形状为 (10, 64)",
      learned(10).shape == (10, 64) and torch.equal(learned(10), learned.embedding.weight[:10]))
# lang: end
try:
    learned(20)
except ValueError as error:
    print(error)
# lang: en
claim("the sines and cosines go on to any length: 10,000 positions, shape (10000, 64)",
      sinusoidal_encoding(10_000, E).shape == (10_000, 64))
# lang: zh
claim("正弦和余弦可以延伸到任意长度：10,000 个位置，形状为 (10000, 64)",
      sinusoidal_encoding(10_000, E).shape == (10_000, 64))
# lang: end

# %% [markdown] tags=["lang-en"]
# That the sinusoidal table is defined at any length does not mean a model trained on short
# sequences uses far positions well; it only means nothing breaks.

# %% [markdown] tags=["lang-zh"] en_hash="06f434b405"
# 正弦表在任何长度上都有定义，并不意味着在短序列上训练的模型能用好很远的位置；它只保证程序不会出错。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Added, not concatenated
#
# Lesson 03's toy models (section 5) **concatenated** a learned position embedding to each token
# embedding: `toy.ReverseModel` makes each position [token (16 features) ; position (16 features)],
# so its attention works on 32 features. The standard Transformer **adds** them: $x = \text{embedding}
# \cdot \sqrt{E} + PE$, and the width stays $E$. (The paper multiplies the token embeddings by
# $\sqrt{E}$ without saying why. A common reading: embeddings initialised at about $1/\sqrt{E}$ per
# feature would otherwise be small next to the encoding's values of about $\pm 1$.)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="29d556ccce"
# ### 相加，而不是拼接
#
# 第 03 课（第 5 节）的玩具模型把可学习的位置嵌入**拼接**在每个词元嵌入的后面：`toy.ReverseModel` 把每个位置表示成 [词元（16 个特征）; 位置（16 个特征）]，所以它的注意力处理的是 32 个特征。标准的 Transformer 则把两者**相加**：$x = \text{embedding} \cdot \sqrt{E} + PE$，宽度保持为 $E$。（论文把词元嵌入乘以 $\sqrt{E}$，但没有说明原因。一种常见的解释是：嵌入初始化时每个特征约为 $1/\sqrt{E}$，不放大的话，与取值约为 $\pm 1$ 的位置编码相比就太小了。）

# %%
# lang: en
tokens = torch.tensor([[3, 1, 4, 0, 5, 9, 2, 6]])  # (B, L): 8 letters
# lang: zh
tokens = torch.tensor([[3, 1, 4, 0, 5, 9, 2, 6]])  # (B, L)：8 个字母
# lang: end
torch.manual_seed(0)
model03 = toy.ReverseModel()
token_embedding = nn.Embedding(10, E)
# lang: en
concatenated = torch.cat([model03.token(tokens), model03.position[:8].expand(1, 8, -1)], dim=-1)  # lesson 03
nn.init.normal_(token_embedding.weight, std=E ** -0.5)  # small, as when shared with an output layer
added = token_embedding(tokens) * math.sqrt(E) + sinusoidal_encoding(8, E)  # the standard way
# lang: zh
concatenated = torch.cat([model03.token(tokens), model03.position[:8].expand(1, 8, -1)], dim=-1)  # 第 03 课
nn.init.normal_(token_embedding.weight, std=E ** -0.5)  # 初始值很小，就像与输出层共享权重时那样
added = token_embedding(tokens) * math.sqrt(E) + sinusoidal_encoding(8, E)  # 标准做法
# lang: end
# lang: en
claim(f"concatenated: 16 token + 16 position features, shape {tuple(concatenated.shape)}",
      concatenated.shape == (1, 8, 32))
claim(f"added: the width stays E = {E}, shape {tuple(added.shape)}", added.shape == (1, 8, E))
# lang: zh
claim(f"拼接：16 个词元特征加 16 个位置特征，形状为 {tuple(concatenated.shape)}",
      concatenated.shape == (1, 8, 32))
claim(f"相加：宽度仍为 E = {E}，形状为 {tuple(added.shape)}", added.shape == (1, 8, E))
# lang: end

# %% [markdown] tags=["lang-en"]
# Adding seems to blur two different things into one vector. Why does it work? In a wide space
# there is room to keep them apart: two random directions in $E$ dimensions are nearly
# orthogonal (their cosine is about $1/\sqrt{E}$), so a token's embedding and a position's encoding
# barely overlap, and a learned projection can read mostly the one or the other. The largest
# $|\cos|$ between 64 random token embeddings and the encodings of 64 positions:

# %% [markdown] tags=["lang-zh"] en_hash="9cf734e360"
# 相加似乎把两种不同的东西混进了一个向量。为什么行得通？在很宽的空间里，有足够的余地把它们分开：$E$ 维空间里两个随机方向几乎正交（夹角余弦约为 $1/\sqrt{E}$），所以词元的嵌入和位置的编码几乎不重叠，学出来的投影可以主要读取其中之一。下面是 64 个随机词元嵌入与 64 个位置的编码之间 $|\cos|$ 的最大值：

# %%
def largest_cosine(width, seed=0):
    # lang: en
    """The largest |cos| between 64 random token directions and the encodings of positions 0 … 63."""
    # lang: zh
    """64 个随机词元方向与位置 0 … 63 的编码之间 |cos| 的最大值。"""
    # lang: end
    gen = torch.Generator().manual_seed(seed)
    token_directions = F.normalize(torch.randn(64, width, generator=gen), dim=-1)  # (V, E)
    position_directions = F.normalize(sinusoidal_encoding(64, width), dim=-1)  # (L, E)
    return (token_directions @ position_directions.T).abs().max()


narrow, wide = largest_cosine(16), largest_cosine(512)
# lang: en
claim(f"E = 16: some token and some position overlap a lot, |cos| up to {narrow:.2f}", narrow > 0.5)
claim(f"E = 512: no pair overlaps much, |cos| at most {wide:.2f} (1/√512 = {512 ** -0.5:.2f})", wide < 0.25)
# lang: zh
claim(f"E = 16：有的词元与有的位置重叠很多，|cos| 高达 {narrow:.2f}", narrow > 0.5)
claim(f"E = 512：没有哪一对重叠很多，|cos| 至多 {wide:.2f}（1/√512 = {512 ** -0.5:.2f}）", wide < 0.25)
# lang: end

# %% [markdown] tags=["lang-en"]
# This shows that there is room, not that a trained model uses it. It does make it plausible that
# adding costs little in a model of realistic width, and adding keeps every layer at $E$
# features, where concatenating would widen every layer by the size of the position part.

# %% [markdown] tags=["lang-zh"] en_hash="bdea3addf1"
# 这只说明有这样的余地，并不说明训练好的模型确实利用了它。不过，它让人有理由相信：在宽度合乎实际的模型里，相加几乎没有代价。而相加让每一层处理的始终是 $E$ 个特征；拼接则会让每一层都加宽，多出位置部分的宽度。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. The encoder layer
#
# An encoder layer wraps self-attention in three more ideas:
#
# - a **residual connection** around each sub-layer: the sub-layer's input is added to its output,
#   so a layer only has to learn a change to its input;
# - **layer normalisation** (`nn.LayerNorm`): each position's vector is normalised to mean 0 and
#   variance 1 over its $E$ features, then scaled and shifted by learned $\gamma$ and $\beta$;
# - a **position-wise feed-forward network** after the attention.
#
# Both sub-layers, multi-head self-attention and then the feed-forward network, are wrapped the
# same way. The original paper puts each LayerNorm after the residual sum (**post-norm**); most
# models today put it on the branch, before the sub-layer (**pre-norm**):
#
# $$\text{post-norm:}\quad x \leftarrow \mathrm{LN}\big(x + \mathrm{Sublayer}(x)\big)
# \qquad\qquad
# \text{pre-norm:}\quad x \leftarrow x + \mathrm{Sublayer}\big(\mathrm{LN}(x)\big)$$
#
# with Sublayer the multi-head self-attention, then the feed-forward network. In PyTorch these
# are `nn.TransformerEncoderLayer(..., norm_first=False)` (the default) and `norm_first=True`.
#
# ![The encoder layer: post-norm on the left, pre-norm on the right](../../images/06_encoder_layer_en.svg)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="9662d6f60e"
# ## 2. 编码器层
#
# 编码器层在自注意力之外又加了三样东西：
#
# - 每个子层外面的**残差连接**：把子层的输入加到它的输出上，于是一个层只需学习对输入的改动；
# - **层归一化**（`nn.LayerNorm`）：把每个位置的向量在它的 $E$ 个特征上归一化到均值为 0、方差为 1，再用可学习的 $\gamma$ 和 $\beta$ 缩放、平移；
# - 注意力之后的**逐位置前馈网络**。
#
# 两个子层（先是多头自注意力，再是前馈网络）都这样包装。原论文把每个 LayerNorm 放在残差相加之后（**后归一化**，Post-LN）；如今大多数模型把它放在支路上、子层之前（**前归一化**，Pre-LN）：
#
# $$\text{后归一化：}\quad x \leftarrow \mathrm{LN}\big(x + \mathrm{Sublayer}(x)\big)
# \qquad\qquad
# \text{前归一化：}\quad x \leftarrow x + \mathrm{Sublayer}\big(\mathrm{LN}(x)\big)$$
#
# 其中 Sublayer 依次是多头自注意力和前馈网络。在 PyTorch 里，两者分别是 `nn.TransformerEncoderLayer(..., norm_first=False)`（默认）和 `norm_first=True`。
#
# ![编码器层：左为后归一化，右为前归一化](../../images/06_encoder_layer_zh.svg)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### The feed-forward network
#
# $\mathrm{FFN}(x) = W_2\,\mathrm{ReLU}(W_1 x + b_1) + b_2$: two linear layers, $E \to F \to E$
# ($F = 4E$ in the paper: 512 → 2048 → 512), applied to every position **on its own**, with the
# same weights at every position. Attention is where positions exchange information; the
# feed-forward network is where each position's features are mixed non-linearly. Change one
# position of `transformer.FeedForward`'s input, and only that row of its output changes:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="82060f13fc"
# ### 前馈网络
#
# $\mathrm{FFN}(x) = W_2\,\mathrm{ReLU}(W_1 x + b_1) + b_2$：两个线性层，$E \to F \to E$（论文中 $F = 4E$：512 → 2048 → 512），对每个位置**单独**作用，每个位置用的是同一组权重。位置之间交换信息靠的是注意力；每个位置自身的特征做非线性混合，靠的是前馈网络。改动 `transformer.FeedForward` 输入中的一个位置，输出只有对应的一行会变：

# %%
torch.manual_seed(0)
ffn = FeedForward(d_model=16, d_ff=64)
x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(2))  # (B, L, E)
changed = x.clone()
# lang: en
changed[:, 2] += 1.0  # change position 2 only
# lang: zh
changed[:, 2] += 1.0  # 只改动位置 2
# lang: end
others = [0, 1, 3, 4]
with torch.no_grad():
    before, after = ffn(x), ffn(changed)
# lang: en
claim("changing position 2 changes output row 2", (after[:, 2] - before[:, 2]).abs().amax(-1).gt(0.01).all())
claim("and leaves every other row exactly as it was", torch.equal(after[:, others], before[:, others]))
# lang: zh
claim("改动位置 2，输出的第 2 行随之改变", (after[:, 2] - before[:, 2]).abs().amax(-1).gt(0.01).all())
claim("其余各行一点都没变", torch.equal(after[:, others], before[:, others]))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### The layer, checked against PyTorch's
#
# `transformer.EncoderLayer(d_model, nhead, d_ff, dropout, norm_first)` puts it together: lesson
# 04's `FusedMultiheadAttention` (section 3), a `FeedForward`, two LayerNorms and dropout, batch-first
# $(B, L, E)$. `EncoderLayer.to_torch()` builds an `nn.TransformerEncoderLayer(..., batch_first=True)`
# with the same weights, and `EncoderLayer.from_torch(layer)` goes the other way.
#
# The comparison runs in float64, for both norm orders, on 3 sequences of lengths 6, 4 and 2,
# padded to 6. PyTorch's `src_key_padding_mask` is bool $(B, L)$, **True at padding**; the
# course's layer takes the same mask as `key_padding_mask`. Only real positions are compared: a
# padded position's output means nothing (it attends to the real positions, and no position
# attends to it), and what PyTorch returns there depends on its code path (below). For the
# gradients, a fixed random read-out of the real positions is backpropagated to the input.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="ee058205e9"
# ### 这个层与 PyTorch 的层对照
#
# `transformer.EncoderLayer(d_model, nhead, d_ff, dropout, norm_first)` 把这些部件组装起来：第 04 课（第 3 节）的 `FusedMultiheadAttention`、一个 `FeedForward`、两个 LayerNorm 和 dropout，批量在前，形状为 $(B, L, E)$。`EncoderLayer.to_torch()` 构造一个权重相同的 `nn.TransformerEncoderLayer(..., batch_first=True)`，`EncoderLayer.from_torch(layer)` 则反过来。
#
# 对照用 float64 计算，两种归一化顺序都测，输入是长度分别为 6、4、2 的 3 条序列，都填充到 6。PyTorch 的 `src_key_padding_mask` 是形状为 $(B, L)$ 的 bool 张量，**True 表示填充**；本课程的层把同一个掩码作为 `key_padding_mask` 接收。只比较真实位置：填充位置的输出没有意义（它关注真实位置，却没有任何位置关注它），而 PyTorch 在那里返回什么，取决于它走哪条代码路径（见下文）。比较梯度时，对真实位置取一个固定的随机读出，再反向传播到输入。

# %%
lengths = torch.tensor([6, 4, 2])
# lang: en
padding = torch.arange(6) >= lengths[:, None]  # (B, L): True at padding (PyTorch's convention)
# lang: zh
padding = torch.arange(6) >= lengths[:, None]  # (B, L)：True 表示填充（PyTorch 的约定）
# lang: end
real = ~padding
g64 = torch.Generator().manual_seed(1)
x64 = torch.randn(3, 6, 16, generator=g64, dtype=torch.float64, requires_grad=True)  # (B, L, E)
# lang: en
probe = torch.randn(3, 6, 16, generator=g64, dtype=torch.float64) * real[..., None]  # zero at padding
# lang: zh
probe = torch.randn(3, 6, 16, generator=g64, dtype=torch.float64) * real[..., None]  # 填充位置为零
# lang: end
for norm_first in (False, True):
    torch.manual_seed(0)
    ours = EncoderLayer(16, 4, 32, dropout=0.1, norm_first=norm_first).double().eval()
    theirs = ours.to_torch().eval()
    out_ours = ours(x64, key_padding_mask=padding)
    out_theirs = theirs(x64, src_key_padding_mask=padding)
    (grad_ours,) = torch.autograd.grad((out_ours * probe).sum(), x64)
    (grad_theirs,) = torch.autograd.grad((out_theirs * probe).sum(), x64)
    copied_back = EncoderLayer.from_torch(theirs).eval()(x64, key_padding_mask=padding)
    # lang: en
    name = "pre-norm" if norm_first else "post-norm"
    claim(f"{name}: the same outputs as nn.TransformerEncoderLayer at every real position",
          torch.allclose(out_ours[real], out_theirs[real]))
    claim(f"{name}: the same gradient with respect to the input", torch.allclose(grad_ours, grad_theirs))
    claim(f"{name}: from_torch copies PyTorch's layer back to the same outputs", torch.equal(copied_back, out_ours))
    # lang: zh
    name = "前归一化" if norm_first else "后归一化"
    claim(f"{name}：在每个真实位置上，输出都与 nn.TransformerEncoderLayer 相同",
          torch.allclose(out_ours[real], out_theirs[real]))
    claim(f"{name}：对输入的梯度相同", torch.allclose(grad_ours, grad_theirs))
    claim(f"{name}：from_torch 把 PyTorch 的层拷贝回来，输出完全相同", torch.equal(copied_back, out_ours))
    # lang: end

# %% [markdown] tags=["lang-en"]
# One of PyTorch's surprises (measured with torch 2.13). In eval mode under `torch.no_grad()`, the
# usual way to run a model for inference, `nn.TransformerEncoderLayer` takes a fused **fast
# path**. It computes the same numbers, except for an item that is padding everywhere, where it
# returns NaN: the fully masked rows of lesson 02 §4, whose table shows the same for
# `nn.MultiheadAttention`'s fast path. `nn.TransformerEncoder` adds one more difference: when it
# packs the batch into nested tensors (it does so for post-norm layers on this path), it returns
# exact zeros at padded positions. Hence: compare real positions only, and give every item at least
# one real token. Then the fast path computes the course's numbers:

# %% [markdown] tags=["lang-zh"] en_hash="6b08703e60"
# PyTorch 的一个出人意料之处（用 torch 2.13 测得）：在 eval 模式下、`torch.no_grad()` 之中（推理时通常就这样运行模型），`nn.TransformerEncoderLayer` 会走一条融合的**快速路径**。它算出的数值相同，只有一种情况例外：全是填充的样本，它在那里返回 NaN。这就是第 02 课第 4 节讲过的全遮蔽行（掩码遮住了所有键的行），那里的表格显示 `nn.MultiheadAttention` 的快速路径也是如此。`nn.TransformerEncoder` 还有一处不同：它把批量打包成嵌套张量时（在这条路径上，后归一化的层会这样做），在填充位置返回精确的零。所以：只比较真实位置，并且让每个样本至少有一个真实的词元。这样，快速路径算出的就是本课程的层的数值：

# %%
with torch.no_grad():
    # lang: en
    fast = theirs(x64, src_key_padding_mask=padding)  # eval, no_grad: the fast path
    # lang: zh
    fast = theirs(x64, src_key_padding_mask=padding)  # eval 模式加 no_grad：快速路径
    # lang: end
    general = ours(x64, key_padding_mask=padding)
# lang: en
claim("at every real position the fast path and the course's layer agree", torch.allclose(fast[real], general[real]))
# lang: zh
claim("在每个真实位置上，快速路径与本课程的层一致", torch.allclose(fast[real], general[real]))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Dropout
#
# In training mode the layer's dropout zeroes a random fraction $p$ of the numbers it is given
# (and scales the rest by $1/(1-p)$) in three places: each sub-layer's output, just before it is
# added to the residual, and the feed-forward network's hidden layer. PyTorch's layer also drops
# attention weights inside its `nn.MultiheadAttention`; the course's attention has no dropout, so
# `to_torch` sets that one to 0. In `eval()` mode nothing is dropped and the layer is a fixed function:

# %% [markdown] tags=["lang-zh"] en_hash="c40c1eb174"
# ### Dropout
#
# 在训练模式下，层里的 dropout 会把传给它的数随机置零一部分（比例为 $p$），并把其余的数乘以 $1/(1-p)$。这发生在三个地方：每个子层的输出（就在它加到残差上之前），以及前馈网络的隐藏层。PyTorch 的层还会在它的 `nn.MultiheadAttention` 内部对注意力权重做 dropout；本课程的注意力没有 dropout，所以 `to_torch` 把那一处设为 0。在 `eval()` 模式下什么都不丢，这个层就是一个确定的函数：

# %%
torch.manual_seed(0)
# lang: en
noisy = EncoderLayer(16, 4, 32, dropout=0.1)  # a new layer is in training mode
# lang: zh
noisy = EncoderLayer(16, 4, 32, dropout=0.1)  # 新建的层处于训练模式
# lang: end
x16 = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(3))  # (B, L, E)
with torch.no_grad():
    first, second = noisy(x16), noisy(x16)
    noisy.eval()
    third, fourth = noisy(x16), noisy(x16)
torch_copy = noisy.to_torch()
# lang: en
claim("training mode: two calls on the same input differ (other numbers are dropped)", not torch.equal(first, second))
claim("eval mode: nothing is dropped, and two calls agree exactly", torch.equal(third, fourth))
claim("to_torch: attention-weights dropout 0, the other dropouts p = 0.1",
      torch_copy.self_attn.dropout == 0.0 and torch_copy.dropout.p == torch_copy.dropout1.p == torch_copy.dropout2.p == 0.1)
# lang: zh
claim("训练模式：对同一个输入调用两次，结果不同（丢掉的数不同）", not torch.equal(first, second))
claim("eval 模式：什么都不丢，两次调用的结果完全相同", torch.equal(third, fourth))
claim("to_torch：注意力权重的 dropout 为 0，其余 dropout 的 p = 0.1",
      torch_copy.self_attn.dropout == 0.0 and torch_copy.dropout.p == torch_copy.dropout1.p == torch_copy.dropout2.p == 0.1)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Post-norm or pre-norm
#
# Section 2 built both orders and checked both against PyTorch. Which one to use? The original
# Transformer is post-norm; GPT-2 and most large models since are pre-norm, because deep pre-norm
# stacks train more easily. Post-norm Transformers need a learning-rate **warm-up**
# (the first few thousand steps at a small, growing learning rate) and without one often fail to
# train at all; pre-norm ones train without it (Xiong et al., 2020, *On Layer Normalization in the
# Transformer Architecture*). The reason lies in the path the gradient takes back down the stack.
#
# Call the input of layer $n$ $x_n$: the stack runs from $x_0$ to its top, $x_N$. In pre-norm, each
# layer only adds something to its input, so
#
# $$x_N = x_0 + \sum_{n=0}^{N-1} \mathrm{Branch}_n(x_n),$$
#
# where $\mathrm{Branch}_n$ is layer $n$'s two sub-layers, each applied to a normalised copy. The
# sum is a straight path from every layer to the top with nothing on it, and the chain rule gives
#
# $$\frac{\partial \mathcal{L}}{\partial x_n} = \frac{\partial \mathcal{L}}{\partial x_N} +
# \big(\text{what the branches above } n \text{ add}\big):$$
#
# the gradient at the top reaches every layer whole. In post-norm, every residual sum goes through
# a LayerNorm, two per layer, so on its way down to layer $n$ the gradient passes $2(N - n)$ of
# them. Each one's backward pass divides the gradient by the standard deviation of the sum it
# normalised and removes two directions from it (the mean, and the normalised vector itself),
# while each sub-layer's branch adds a gradient of its own. How these balance is not a fixed
# fraction per layer: it depends on the depth and on the weights.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="1858f6d2db"
# ## 3. 后归一化还是前归一化
#
# 第 2 节把两种顺序都搭了出来，也都与 PyTorch 对照过。该用哪一种？最初的 Transformer 用后归一化；GPT-2 以及此后大多数大模型用前归一化，因为很深的前归一化堆叠更容易训练。后归一化的 Transformer 需要学习率**预热**（warm-up，即最初几千步使用较小且逐渐增大的学习率），没有预热往往根本训练不起来；前归一化的不需要预热也能训练（Xiong 等，2020，*On Layer Normalization in the Transformer Architecture*）。原因在于梯度沿着堆叠往回传的路径。
#
# 把第 $n$ 层的输入记作 $x_n$：整个堆叠从 $x_0$ 一直到顶端 $x_N$。在前归一化中，每一层只是往它的输入上加一些东西，所以
#
# $$x_N = x_0 + \sum_{n=0}^{N-1} \mathrm{Branch}_n(x_n),$$
#
# 其中 $\mathrm{Branch}_n$ 是第 $n$ 层的两个子层，各自作用在归一化后的副本上。这个和式是一条从每一层直达顶端的直路，路上什么都没有。由链式法则得
#
# $$\frac{\partial \mathcal{L}}{\partial x_n} = \frac{\partial \mathcal{L}}{\partial x_N} +
# \big(\text{第 } n \text{ 层以上的支路贡献的部分}\big)：$$
#
# 顶端的梯度原封不动地到达每一层。在后归一化中，每个残差和都要经过一个 LayerNorm，每层两个，所以梯度往下传到第 $n$ 层，要穿过 $2(N - n)$ 个 LayerNorm。每个 LayerNorm 在反向传播时，都把梯度除以它所归一化的那个和的标准差，并去掉梯度在两个方向上的分量（均值的方向，以及归一化后的向量本身的方向）；与此同时，每个子层的支路又会加进它自己的一份梯度。两者如何相抵，并不是每层一个固定的比例，而是取决于深度，也取决于权重。

# %% [markdown] tags=["lang-en"]
# Measured on a stack of $N = 24$ layers ($E = 64$, $H = 4$, $F = 256$), as PyTorch initialises
# them, without dropout, on 4 random sequences of 16 positions; the loss is a fixed random
# read-out of the output. A pre-norm stack's top is never normalised, so it ends with one more
# LayerNorm (as `nn.TransformerEncoder(..., norm=nn.LayerNorm(E))` does).
# `norm_study.layer_gradients` returns the size of the gradient at every $x_n$; the plot divides
# it by the size at the top, $x_N$:

# %% [markdown] tags=["lang-zh"] en_hash="c0af2ecaff"
# 在一个 $N = 24$ 层的堆叠上测量（$E = 64$，$H = 4$，$F = 256$），各层用 PyTorch 的默认初始化，不用 dropout，输入是 4 条长 16 的随机序列；损失是对输出的一个固定的随机读出。前归一化堆叠的顶端从未被归一化，所以最后还要再接一个 LayerNorm（`nn.TransformerEncoder(..., norm=nn.LayerNorm(E))` 也是这样做的）。`norm_study.layer_gradients` 返回每个 $x_n$ 处梯度的大小；图中把它除以顶端 $x_N$ 处梯度的大小：

# %%
post = norm_study.layer_gradients(norm_first=False, layers=24, seed=0)
pre = norm_study.layer_gradients(norm_first=True, layers=24, seed=0)
gradient_by_layer(post.inputs, pre.inputs)
plt.show()
faded = post.relative  # (N + 1,): x_0 … x_24
# lang: en
lower = faded[:17]  # x_0 … x_16: below the top 8 layers
claim(f"pre-norm: no layer's input gets less gradient than the top (the smallest ratio is {pre.relative[:-1].min():.2f})",
      pre.relative[:-1].min() >= 1)
claim(f"pre-norm: at x_0 it is {pre.relative[0]:.2f} times the top's: each branch on the way adds to it",
      pre.relative[0] > 1.3)
claim(f"post-norm: over the top 8 layers (x_24 down to x_16) it falls to {faded[16]:.2f} of the top's", faded[16] < 0.8)
claim(f"then it stops falling: from x_16 down to x_0 it stays between {lower.min():.2f} and {lower.max():.2f}",
      lower.max() - lower.min() < 0.1)
claim(f"had it kept falling at the rate of the top 8 layers, x_0 would get {faded[16] ** 3:.2f} of the top's; "
      f"it gets {faded[0]:.2f}", faded[0] > faded[16] ** 3 + 0.1)
# lang: zh
lower = faded[:17]  # x_0 … x_16：最上面 8 层以下
claim(f"前归一化：没有哪一层的输入得到的梯度比顶端小（最小的比值是 {pre.relative[:-1].min():.2f}）",
      pre.relative[:-1].min() >= 1)
claim(f"前归一化：到 x_0 时，梯度是顶端的 {pre.relative[0]:.2f} 倍：沿途每条支路都往上加了一些",
      pre.relative[0] > 1.3)
claim(f"后归一化：经过最上面 8 层（从 x_24 到 x_16），梯度降到了顶端的 {faded[16]:.2f}", faded[16] < 0.8)
claim(f"然后就不再下降了：从 x_16 一直到 x_0，它都在 {lower.min():.2f} 和 {lower.max():.2f} 之间",
      lower.max() - lower.min() < 0.1)
claim(f"如果一直按最上面 8 层的速度下降，到 x_0 时只剩顶端的 {faded[16] ** 3:.2f}；"
      f"实际上是 {faded[0]:.2f}", faded[0] > faded[16] ** 3 + 0.1)
# lang: end

# %% [markdown] tags=["lang-en"]
# So the post-norm gradient does not shrink by the same factor at every LayerNorm. In this
# measurement it falls over the top third of the stack and then stays level, about 0.7 of the top's
# all the way down to $x_0$. Another random initialisation gives other numbers, but the same
# picture: a fall near the top, then no steady decay.

# %% [markdown] tags=["lang-zh"] en_hash="7e1ceb7d45"
# 可见，后归一化的梯度并不是每经过一个 LayerNorm 就按同一个比例缩小。在这次测量中，它在堆叠最上面的三分之一里下降，之后就保持平稳，一直到 $x_0$ 都在顶端的 0.7 左右。换一个随机初始化，数值会不同，但图形一样：先在顶部附近下降，之后并不持续衰减。

# %% [markdown] tags=["lang-en"]
# The open path has a price: nothing holds the pre-norm stream $x_n$ to a fixed size. Every layer
# adds to it, so it grows with depth, and the final LayerNorm is needed. In post-norm, every
# $x_n$ after the first is a LayerNorm's output, of root-mean-square (RMS) size 1 at
# initialisation ($\gamma = 1$, $\beta = 0$):

# %% [markdown] tags=["lang-zh"] en_hash="a036b5e436"
# 这条畅通的路是有代价的：前归一化中没有任何东西把 $x_n$ 限制在固定的大小。每一层都往上加一些，所以它随深度增长，最后那个 LayerNorm 也就必不可少。在后归一化中，第一个之后的每个 $x_n$ 都是某个 LayerNorm 的输出，初始化时（$\gamma = 1$，$\beta = 0$）其均方根（RMS）大小为 1：

# %%
# lang: en
claim(f"pre-norm: the RMS of x_n grows from {pre.stream[0]:.2f} at x_0 to {pre.stream[-1]:.2f} at x_24",
      pre.stream[-1] > 1.5 * pre.stream[0])
claim("post-norm: every x_n after x_0 has RMS 1, within 1 %", (post.stream[1:] - 1).abs().max() < 0.01)
# lang: zh
claim(f"前归一化：x_n 的 RMS 从 x_0 处的 {pre.stream[0]:.2f} 增长到 x_24 处的 {pre.stream[-1]:.2f}",
      pre.stream[-1] > 1.5 * pre.stream[0])
claim("后归一化：x_0 之后每个 x_n 的 RMS 都是 1，误差不到 1%", (post.stream[1:] - 1).abs().max() < 0.01)
# lang: end

# %% [markdown] tags=["lang-en"]
# Where does warm-up come in? Xiong et al. show that at initialisation the gradient of a
# post-norm stack's last layers does not shrink as the stack grows deeper, while a pre-norm
# stack's does (its final LayerNorm divides by the grown stream). With the same learning rate,
# the first steps move a deep post-norm stack's top layers by a lot; warm-up keeps those steps
# small until the weights have settled. The gradient over all the parameters of the last layer,
# 24 layers against 6:

# %% [markdown] tags=["lang-zh"] en_hash="9520a90854"
# 那么预热起什么作用？Xiong 等人证明：初始化时，后归一化堆叠最后几层的梯度不会随堆叠加深而变小，前归一化堆叠的却会变小（它最后的 LayerNorm 要除以已经变大的 $x_N$）。学习率相同时，训练最初的几步会让很深的后归一化堆叠的顶部几层变化很大；预热让这几步的步子保持很小，直到权重稳定下来。下面比较最后一层全部参数的梯度，24 层对 6 层：

# %%
post6 = norm_study.layer_gradients(norm_first=False, layers=6, seed=0)
pre6 = norm_study.layer_gradients(norm_first=True, layers=6, seed=0)
# lang: en
claim(f"post-norm: the last layer's gradient with 24 layers is {post.top_layer / post6.top_layer:.2f} times that with 6",
      post.top_layer / post6.top_layer > 0.9)
claim(f"pre-norm: {pre.top_layer / pre6.top_layer:.2f} times: it shrinks as the stack deepens",
      pre.top_layer / pre6.top_layer < 0.85)
claim(f"with 6 layers, post-norm's gradient only falls to {post6.relative.min():.2f} of the top's on the way down",
      post6.relative.min() > 0.9)
# lang: zh
claim(f"后归一化：24 层时最后一层的梯度是 6 层时的 {post.top_layer / post6.top_layer:.2f} 倍",
      post.top_layer / post6.top_layer > 0.9)
claim(f"前归一化：{pre.top_layer / pre6.top_layer:.2f} 倍：堆叠越深，它越小",
      pre.top_layer / pre6.top_layer < 0.85)
claim(f"只有 6 层时，后归一化的梯度在往下传的途中只降到顶端的 {post6.relative.min():.2f}",
      post6.relative.min() > 0.9)
# lang: end

# %% [markdown] tags=["lang-en"]
# The last line is a caution about this small measurement. PyTorch's default initialisation
# keeps each sub-layer's output small next to the residual, so at 6 layers the LayerNorms barely
# change the gradient. The fading grows with depth, and it can grow during training, as the
# sub-layers' outputs grow.
#
# What does a warm-up look like? The original Transformer's learning rate at step $s$ (counted
# from 1), with $w = 4000$ warm-up steps, is
#
# $$\mathrm{lr}(s) = E^{-1/2} \cdot \min\big(s^{-1/2},\ s \cdot w^{-3/2}\big):$$
#
# the second term wins for $s < w$, so the rate rises linearly, from almost 0 up to
# $E^{-1/2}\,w^{-1/2}$ at step $w$; after that the first term wins, and it falls as $1/\sqrt{s}$.
# With $E = 512$:

# %% [markdown] tags=["lang-zh"] en_hash="8cd81a022c"
# 最后一行提醒我们，这个小实验有它的局限。PyTorch 的默认初始化让每个子层的输出比残差小得多，所以只有 6 层时，LayerNorm 几乎不改变梯度。层数越多，衰减越明显；训练过程中子层的输出变大以后，衰减也可能加剧。
#
# 预热具体是什么样的？最初的 Transformer 在第 $s$ 步（从 1 数起）的学习率是（预热 $w = 4000$ 步）
#
# $$\mathrm{lr}(s) = E^{-1/2} \cdot \min\big(s^{-1/2},\ s \cdot w^{-3/2}\big)：$$
#
# $s < w$ 时取的是第二项，所以学习率从接近 0 线性上升，到第 $w$ 步达到 $E^{-1/2}\,w^{-1/2}$；此后取第一项，学习率按 $1/\sqrt{s}$ 下降。取 $E = 512$：

# %%
def paper_learning_rate(step, d_model=512, warmup=4000):
    # lang: en
    """The original Transformer's learning rate at training step `step` (1, 2, …)."""
    # lang: zh
    """最初的 Transformer 在第 `step` 步（1, 2, …）的学习率。"""
    # lang: end
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


rates = {step: paper_learning_rate(step) for step in range(1, 20_001)}
peak = max(rates, key=rates.get)
# lang: en
claim(f"the largest learning rate, {rates[peak]:.1e}, is at step {peak} = w; at step 1 it is {rates[1]:.1e}",
      peak == 4000 and rates[1] < rates[peak] / 1000)
claim(f"from there it falls as 1/√s: at step 16000 it is {rates[16_000] / rates[peak]:.2f} of the peak",
      math.isclose(rates[16_000], rates[peak] / 2))
# lang: zh
claim(f"学习率在第 {peak} 步（即 w）达到最大，为 {rates[peak]:.1e}；第 1 步时只有 {rates[1]:.1e}",
      peak == 4000 and rates[1] < rates[peak] / 1000)
claim(f"此后按 1/√s 下降：第 16000 步时是峰值的 {rates[16_000] / rates[peak]:.2f}",
      math.isclose(rates[16_000], rates[peak] / 2))
# lang: end

# %% [markdown] tags=["lang-en"]
# Does a deep post-norm stack really need it? Section 5, once it has a task and a model to train,
# trains a deeper encoder–decoder both ways, with and without warm-up, and measures it.
#
# Pre-norm is not free either: its stream grows, it needs the final LayerNorm, and post-norm,
# when it does train (with warm-up), is often reported to end up slightly better (Liu et al.,
# 2020, *Understanding the Difficulty of Training Transformers*). In PyTorch the choice is one
# argument, `norm_first`.

# %% [markdown] tags=["lang-zh"] en_hash="0b90fdf3d8"
# 很深的后归一化堆叠真的离不开预热吗？第 5 节有了任务和要训练的模型之后，会训练一个更深的编码器–解码器，两种归一化、加不加预热都试一遍，量一量结果。
#
# 前归一化也不是没有代价：它的 $x_n$ 会不断增长，最后必须接一个 LayerNorm；而且据报道，后归一化一旦训练成功（借助预热），最终效果往往还略好一些（Liu 等，2020，*Understanding the Difficulty of Training Transformers*）。在 PyTorch 里，这个选择只是一个参数：`norm_first`。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The decoder layer and its two masks
#
# The encoder reads the source; the decoder writes the target, one token after another. A decoder
# layer has three sub-layers, and wraps each of them, like the encoder layer, in a residual
# connection and a LayerNorm:
#
# 1. **causal self-attention** over the target written so far: position $i$ sees target positions
#    $0 \dots i$ only (lesson 02, section 1);
# 2. **cross-attention** over the **memory** (the encoder's output): the queries come from the
#    decoder, the keys and values from the memory (lesson 03, section 2);
# 3. the position-wise **feed-forward network**.
#
# In post-norm form, with $Y$ the target side and $M$ the memory:
#
# $$Y \leftarrow \mathrm{LN}_1\big(Y + \mathrm{SelfAttn}(Y)\big),\quad
# Y \leftarrow \mathrm{LN}_2\big(Y + \mathrm{CrossAttn}(Y, M)\big),\quad
# Y \leftarrow \mathrm{LN}_3\big(Y + \mathrm{FFN}(Y)\big).$$
#
# Pre-norm moves each LayerNorm onto its sub-layer's input, as in the encoder layer (section 2):
# $Y \leftarrow Y + \mathrm{SelfAttn}(\mathrm{LN}_1(Y))$, and so on. The decoder never normalises
# the memory itself.
#
# A batch of two sequence pairs makes the shapes concrete. Item 0 has a source of 6 tokens and a
# target of 3; item 1 a source of 3 and a target of 5. Padded to the longest, $L_s = 6$ and
# $L_t = 5$: the two sides of an item have different lengths, and so do the two items. The
# embeddings are random here (section 5 learns real ones). The layers take their padding the way
# PyTorch's do, as bool $(B, L)$ tensors that are **True at padding**; `DecoderLayer` adds the
# causal part itself (`causal=True`, the default).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="05f4d38c0d"
# ## 4. 解码器层及其两个掩码
#
# 编码器负责读入源序列，解码器则逐个词元地写出目标序列。解码器层有三个子层，每个子层也像编码器层那样，外面包着残差连接和 LayerNorm：
#
# 1. **因果自注意力**：在目前已写出的目标序列上做自注意力，位置 $i$ 只能看到目标位置 $0 \dots i$（第 02 课第 1 节）；
# 2. **交叉注意力**：对 **memory（编码器输出）** 做注意力，查询来自解码器，键和值来自 memory（第 03 课第 2 节）；
# 3. 逐位置的**前馈网络**。
#
# 记目标一侧为 $Y$，memory 为 $M$，后归一化的写法是：
#
# $$Y \leftarrow \mathrm{LN}_1\big(Y + \mathrm{SelfAttn}(Y)\big),\quad
# Y \leftarrow \mathrm{LN}_2\big(Y + \mathrm{CrossAttn}(Y, M)\big),\quad
# Y \leftarrow \mathrm{LN}_3\big(Y + \mathrm{FFN}(Y)\big).$$
#
# 前归一化的写法与编码器层（第 2 节）相同，把每个 LayerNorm 移到子层的输入端：$Y \leftarrow Y + \mathrm{SelfAttn}(\mathrm{LN}_1(Y))$，另外两个子层依此类推。解码器本身从不对 memory 做归一化。
#
# 为了把形状看得具体些，我们取一个含两对序列的批量。样本 0 的源序列有 6 个词元、目标序列有 3 个；样本 1 的源序列有 3 个、目标序列有 5 个。各自填充到最大长度后，$L_s = 6$，$L_t = 5$：同一样本的源和目标长短不一，两个样本之间也不一样。这里的嵌入是随机生成的（第 5 节会训练出真正的嵌入）。和 PyTorch 的层一样，这些层用形状为 $(B, L)$ 的 bool 张量表示填充，**True 表示填充**；因果的部分由 `DecoderLayer` 自己加上（`causal=True`，默认值）。

# %%
torch.manual_seed(0)
d_model, nhead, d_ff = 16, 4, 32
source_lengths, target_lengths = torch.tensor([6, 3]), torch.tensor([3, 5])
L_s, L_t = int(source_lengths.max()), int(target_lengths.max())  # 6, 5
# lang: en
source_padding = torch.arange(L_s) >= source_lengths[:, None]  # (B, L_s), True at padding (PyTorch's convention)
target_padding = torch.arange(L_t) >= target_lengths[:, None]  # (B, L_t), True at padding
# lang: zh
source_padding = torch.arange(L_s) >= source_lengths[:, None]  # (B, L_s)，True 表示填充（PyTorch 的约定）
target_padding = torch.arange(L_t) >= target_lengths[:, None]  # (B, L_t)，True 表示填充
# lang: end
source = torch.randn(2, L_s, d_model)  # (B, L_s, E)
target = torch.randn(2, L_t, d_model)  # (B, L_t, E)

encoder = EncoderLayer(d_model, nhead, d_ff).eval()
decoder = DecoderLayer(d_model, nhead, d_ff).eval()
# lang: en
memory = encoder(source, key_padding_mask=source_padding)  # (B, L_s, E): the encoder's output
# lang: zh
memory = encoder(source, key_padding_mask=source_padding)  # (B, L_s, E)：编码器输出
# lang: end
output, (self_weights, cross_weights) = decoder(target, memory, tgt_key_padding_mask=target_padding,
                                                memory_key_padding_mask=source_padding, need_weights=True)
print(tuple(output.shape), tuple(self_weights.shape), tuple(cross_weights.shape))
# lang: en
claim("the output has the target's shape (B, L_t, E) = (2, 5, 16): one vector per target position",
      tuple(output.shape) == (2, L_t, d_model))
claim("the self-attention's weights are (B, H, L_t, L_t), the cross-attention's (B, H, L_t, L_s): "
      "target queries against memory keys", self_weights.shape == (2, nhead, L_t, L_t)
      and cross_weights.shape == (2, nhead, L_t, L_s))
# lang: zh
claim("输出的形状与目标序列相同，(B, L_t, E) = (2, 5, 16)：每个目标位置一个向量",
      tuple(output.shape) == (2, L_t, d_model))
claim("自注意力的权重是 (B, H, L_t, L_t)，交叉注意力的权重是 (B, H, L_t, L_s)："
      "目标序列的查询对 memory 的键", self_weights.shape == (2, nhead, L_t, L_t)
      and cross_weights.shape == (2, nhead, L_t, L_s))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Checked against `nn.TransformerDecoderLayer`
#
# `DecoderLayer.from_torch` copies the weights of PyTorch's layer (`to_torch` goes the other
# way). PyTorch's padding masks are the ones we already pass, True at padding. Its bool
# `tgt_mask` points the other way from the course's keep masks (lesson 02, section 3): True where
# a query must **not** attend, so the causal part is `~causal_mask(L_t)`. (PyTorch's own
# `nn.Transformer.generate_square_subsequent_mask` gives a float mask of 0 and −∞; beside bool
# padding masks it still works, but warns that mixing the two kinds is deprecated.) In eval mode,
# without dropout, for both norm orders:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="cedb4eba24"
# ### 与 `nn.TransformerDecoderLayer` 对照
#
# `DecoderLayer.from_torch` 拷贝 PyTorch 层的权重（`to_torch` 则反过来）。PyTorch 的填充掩码就是我们已经在传的那种，True 表示填充。它的 bool `tgt_mask` 与课程的保留掩码方向相反（第 02 课第 3 节）：True 表示查询**不得**关注该键，所以因果部分要写成 `~causal_mask(L_t)`。（PyTorch 自带的 `nn.Transformer.generate_square_subsequent_mask` 给出的是由 0 和 −∞ 组成的浮点掩码；和 bool 填充掩码一起用也能算，但会警告说混用两种掩码已被弃用。）在 eval 模式下（没有 dropout），两种归一化顺序的结果如下：

# %%
for norm_first in (False, True):
    torch.manual_seed(1)
    theirs = nn.TransformerDecoderLayer(d_model, nhead, d_ff, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderLayer.from_torch(theirs).eval()
    mine = ours(target, memory, tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
    # lang: en
    pytorchs = theirs(target, memory, tgt_mask=~causal_mask(L_t), tgt_is_causal=True,  # bool: True = must NOT attend
                      tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
    order = "pre-norm" if norm_first else "post-norm"
    claim(f"{order}: DecoderLayer gives nn.TransformerDecoderLayer's output at every target position "
          "(the padded ones too)", torch.allclose(mine, pytorchs, atol=1e-5))
    # lang: zh
    pytorchs = theirs(target, memory, tgt_mask=~causal_mask(L_t), tgt_is_causal=True,  # bool：True = 不得关注
                      tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
    order = "前归一化" if norm_first else "后归一化"
    claim(f"{order}：DecoderLayer 在每个目标位置都给出与 nn.TransformerDecoderLayer 相同的输出"
          "（填充位置也一样）", torch.allclose(mine, pytorchs, atol=1e-5))
    # lang: end

# %% [markdown] tags=["lang-en"]
# The call above also passes `tgt_is_causal=True`. That argument is a promise, not a request: it
# tells PyTorch that `tgt_mask` *is* the causal mask, so that a kernel may apply its own causal
# mask instead of reading yours. Without a `tgt_mask` it raises an error, and PyTorch never checks
# that the mask you pass is causal. Depending on the other arguments (and on whether autograd is
# on), PyTorch either trusts the promise or reads your mask, so a false promise gives results that
# change with them. Pass it only together with the causal `tgt_mask`:

# %% [markdown] tags=["lang-zh"] en_hash="3aed129a06"
# 上面的调用还传了 `tgt_is_causal=True`。这个参数是一个承诺，而不是一个请求：它告诉 PyTorch，`tgt_mask` *就是*因果掩码，于是核函数可以直接套用自己的因果掩码，而不去读你的掩码。不传 `tgt_mask` 时它会报错；而你传入的掩码是不是因果的，PyTorch 从不检查。根据其他参数的不同（以及是否开启了 autograd），PyTorch 要么相信这个承诺，要么读取你给的掩码；所以一个不实的承诺，会让结果随这些条件而变。只在同时传入因果 `tgt_mask` 时才传它：

# %%
# lang: en
hides_nothing = torch.zeros(L_t, L_t, dtype=torch.bool)  # a bool tgt_mask that hides no key
no_padding = torch.zeros(2, L_t, dtype=torch.bool)  # a padding mask with no padding in it
# lang: zh
hides_nothing = torch.zeros(L_t, L_t, dtype=torch.bool)  # 一个不遮住任何键的 bool tgt_mask
no_padding = torch.zeros(2, L_t, dtype=torch.bool)  # 一个其中没有任何填充的填充掩码
# lang: end
causal_output = theirs(target, memory, tgt_mask=~causal_mask(L_t))
open_output = theirs(target, memory, tgt_mask=hides_nothing)
false_promise = theirs(target, memory, tgt_mask=hides_nothing, tgt_is_causal=True)
false_promise_padded = theirs(target, memory, tgt_mask=hides_nothing, tgt_is_causal=True, tgt_key_padding_mask=no_padding)
try:
    theirs(target, memory, tgt_is_causal=True)
    raised = False
except RuntimeError:
    raised = True
# lang: en
claim("a tgt_mask that hides nothing, promised causal, without a padding mask: the output is causal (the mask was "
      "never read)", torch.allclose(false_promise, causal_output, atol=1e-6))
claim("the same call with a padding mask that hides nothing: the output is not causal (the mask was used)",
      torch.allclose(false_promise_padded, open_output, atol=1e-6)
      and not torch.allclose(false_promise_padded, causal_output, atol=1e-3))
claim("tgt_is_causal=True without a tgt_mask raises a RuntimeError", raised)
# lang: zh
claim("不遮住任何键的 tgt_mask，承诺为因果，且不传填充掩码：输出是因果的"
      "（掩码根本没被读取）", torch.allclose(false_promise, causal_output, atol=1e-6))
claim("同样的调用，加上一个不遮住任何位置的填充掩码：输出不再是因果的（掩码被用上了）",
      torch.allclose(false_promise_padded, open_output, atol=1e-6)
      and not torch.allclose(false_promise_padded, causal_output, atol=1e-3))
claim("只传 tgt_is_causal=True 而不传 tgt_mask 会抛出 RuntimeError", raised)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### The two masks
#
# A decoder layer attends twice, so it needs two masks. In the course's convention both are keep
# masks, True where a query may attend to a key:
#
# - the **target mask**, for the self-attention: target query $i$ may attend to target key $j$
#   when $j \le i$ (causal) **and** $j$ is a real target token, not padding. Per item it is
#   $(L_t, L_t)$, square, because the queries and the keys are the same target positions. You
#   built it in lesson 02, Exercise 2.
# - the **source mask**, for the cross-attention: target query $i$ may attend to memory
#   position $j$ when $j$ is a real source token. Per item it is $(L_t, L_s)$: queries from the
#   target, keys from the source, $L_q \ne L_k$ as in lesson 03. It has no causal part, because
#   the whole source is known before the decoder writes its first token; every target position
#   may read all of it, so all its rows are the same.
#
# The layer builds them from what it is given: `causal=True` and `tgt_key_padding_mask` make the
# target mask, `memory_key_padding_mask` the source mask. The masks it used can be read off its
# attention weights: a hidden key gets exactly zero weight, a kept one a positive weight. For each
# item, the cells where the first head's weights are not zero (light: may attend, dark: hidden):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="40da41db05"
# ### 两个掩码
#
# 解码器层要做两次注意力，所以需要两个掩码。按课程的约定，它们都是保留掩码，True 表示查询可以关注该键：
#
# - **目标掩码**（target mask），用于自注意力：当 $j \le i$（因果）**并且** $j$ 是目标序列的真实词元而不是填充时，目标查询 $i$ 可以关注目标键 $j$。每个样本的目标掩码形状为 $(L_t, L_t)$，是方的，因为查询和键是同一组目标位置。你在第 02 课的练习 2 里已经构造过它。
# - **源掩码**（source mask），用于交叉注意力：当 $j$ 是源序列的真实词元时，目标查询 $i$ 可以关注 memory 的位置 $j$。每个样本的源掩码形状为 $(L_t, L_s)$：查询来自目标序列，键来自源序列，和第 03 课一样 $L_q \ne L_k$。它没有因果的部分，因为解码器写出第一个词元之前，整个源序列就已经知道了；每个目标位置都可以读它的全部，所以源掩码的各行都相同。
#
# 层根据收到的参数构造这两个掩码：`causal=True` 与 `tgt_key_padding_mask` 组成目标掩码，`memory_key_padding_mask` 组成源掩码。它实际用了什么掩码，可以从注意力权重上读出来：被遮住的键权重恰好为零，保留的键权重为正。下图对每个样本画出第一个头的权重不为零的单元格（浅色表示可以关注，深色表示被遮住）：

# %%
# lang: en
target_used = self_weights[:, 0] > 0  # (B, L_t, L_t): where head 0 gave a key some weight
# lang: zh
target_used = self_weights[:, 0] > 0  # (B, L_t, L_t)：头 0 给了权重的位置
# lang: end
memory_used = cross_weights[:, 0] > 0  # (B, L_t, L_s)
decoder_masks(target_used, memory_used)
plt.show()

# %% [markdown] tags=["lang-en"]
# Item 0's target mask is the causal triangle with its padded keys 3 and 4 cut off; its source
# mask is all light, for its source fills all 6 positions. Item 1 is the other way round: its
# target is full, so its target mask is the plain triangle, while its source mask hides the
# padded positions 3, 4 and 5 in every row. The same facts, stated for every head:

# %% [markdown] tags=["lang-zh"] en_hash="ed426fbc86"
# 样本 0 的目标掩码是因果三角形去掉填充的键 3、4 所在的两列；它的源序列占满了 6 个位置，所以源掩码全是浅色。样本 1 正好相反：目标序列没有填充，目标掩码就是完整的三角形；源掩码则在每一行都遮住了填充位置 3、4、5。下面这些事实对所有的头都成立：

# %%
# lang: en
future = ~causal_mask(L_t)  # (L_t, L_t): key j > query i
# lang: zh
future = ~causal_mask(L_t)  # (L_t, L_t)：键 j > 查询 i
# lang: end
padded_target_key = target_padding[:, None, None, :].expand_as(self_weights)  # (B, H, L_t, L_t)
padded_source_key = source_padding[:, None, None, :].expand_as(cross_weights)  # (B, H, L_t, L_s)
# lang: en
claim("the self-attention gives exactly zero weight to the future (above the diagonal), in every head",
      bool((self_weights[..., future] == 0).all()))
claim("and to the target's padded keys", bool((self_weights[padded_target_key] == 0).all()))
claim("the cross-attention gives exactly zero weight to the source's padded positions",
      bool((cross_weights[padded_source_key] == 0).all()))
claim("every head of an item uses the same two masks: a mask belongs to the item, not to the head",
      torch.equal(self_weights > 0, target_used[:, None].expand_as(self_weights))
      and torch.equal(cross_weights > 0, memory_used[:, None].expand_as(cross_weights)))
claim("all rows of a source mask are the same: it depends on the key only",
      torch.equal(memory_used, memory_used[:, :1].expand_as(memory_used)))
claim("and every row of weights still sums to 1, in both attentions",
      torch.allclose(self_weights.sum(-1), torch.ones(2, nhead, L_t))
      and torch.allclose(cross_weights.sum(-1), torch.ones(2, nhead, L_t)))
# lang: zh
claim("自注意力给未来（对角线以上）的权重恰好为零，每个头都是如此", bool((self_weights[..., future] == 0).all()))
claim("给目标序列中填充位置的键的权重也恰好为零", bool((self_weights[padded_target_key] == 0).all()))
claim("交叉注意力给源序列中填充位置的权重恰好为零", bool((cross_weights[padded_source_key] == 0).all()))
claim("同一个样本的每个头都用同样的两个掩码：掩码属于样本，而不属于头",
      torch.equal(self_weights > 0, target_used[:, None].expand_as(self_weights))
      and torch.equal(cross_weights > 0, memory_used[:, None].expand_as(cross_weights)))
claim("源掩码的各行都相同：它只取决于键", torch.equal(memory_used, memory_used[:, :1].expand_as(memory_used)))
claim("两种注意力里，每一行权重之和仍然都是 1",
      torch.allclose(self_weights.sum(-1), torch.ones(2, nhead, L_t))
      and torch.allclose(cross_weights.sum(-1), torch.ones(2, nhead, L_t)))
# lang: end

# %% [markdown] tags=["lang-en"]
# The rows of item 0's padded target *queries* 3 and 4 are computed too: they attend to the real
# positions, and their outputs are thrown away later (the loss of section 5 skips them). With the
# padding on the right no row is fully masked: key 0 is real and in no query's future, so the
# target mask keeps it for every query. Padding on the left would make query 0's row fully masked
# (lesson 02, section 4); `DecoderLayer` gives such a row a zero attention output.

# %% [markdown] tags=["lang-zh"] en_hash="a7306e99f0"
# 样本 0 里，填充位置上的目标*查询* 3 和 4 也有自己的一行，同样会被计算：它们关注真实位置，算出的输出随后被丢弃（第 5 节的损失会跳过它们）。填充在右侧时不会出现全遮蔽行：键 0 是真实词元，又不在任何查询的未来，目标掩码对每个查询都保留它。如果填充在左侧，查询 0 那一行就成了全遮蔽行（第 02 课第 4 节）；对这样的行，`DecoderLayer` 给出的注意力输出是零。

# %% [markdown] tags=["lang-en"]
# ### What the masks guarantee
#
# Three facts follow, checked by changing the inputs:
#
# - changing a later target token changes no earlier output: the output at position $i$ depends
#   on target tokens $0 \dots i$ only, so training on whole targets at once (teacher forcing,
#   section 5) shows each position only what generating up to it would;
# - changing whatever sits at a padded source position changes nothing at all, anywhere;
# - while changing one real source token changes every target position of its item: the source
#   mask has no causal part.

# %% [markdown] tags=["lang-zh"] en_hash="0c7d8d2c10"
# ### 掩码保证了什么
#
# 由此可以得出三条事实，我们通过改动输入来检验：
#
# - 改动靠后的目标词元，不会改变任何更靠前的输出：位置 $i$ 的输出只取决于目标词元 $0 \dots i$，所以用整个目标序列一次性训练时（这种训练方式叫教师强制，teacher forcing，见第 5 节），每个位置看到的正是逐个生成到该位置时能看到的东西；
# - 无论填充的源位置上放的是什么，改动它都不会改变任何地方的任何输出；
# - 而改动一个真实的源词元，会改变该样本的每一个目标位置：源掩码没有因果的部分。

# %%
def decode(y, m):
    return decoder(y, m, tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)


before = decode(target, memory)  # (B, L_t, E)
later_target, padded_memory, real_memory = target.clone(), memory.clone(), memory.clone()
# lang: en
later_target[1, 3:] = torch.randn(2, d_model)  # item 1: new target tokens at positions 3 and 4
padded_memory[1, 3:] = torch.randn(3, d_model)  # item 1: new values at its padded source positions 3, 4, 5
real_memory[1, 0] += 1.0  # item 1: a change to its real source position 0
# lang: zh
later_target[1, 3:] = torch.randn(2, d_model)  # 样本 1：位置 3 和 4 换成新的目标词元
padded_memory[1, 3:] = torch.randn(3, d_model)  # 样本 1：填充的源位置 3、4、5 换成新的值
real_memory[1, 0] += 1.0  # 样本 1：改动真实的源位置 0
# lang: end
after_target, after_padded, after_real = decode(later_target, memory), decode(target, padded_memory), decode(target, real_memory)
# lang: en
claim("new target tokens at item 1's positions 3 and 4 leave its outputs at positions 0, 1, 2 exactly the same",
      torch.equal(after_target[1, :3], before[1, :3]))
claim("and change its outputs at positions 3 and 4", bool((after_target[1, 3:] != before[1, 3:]).any(-1).all()))
claim("new values at item 1's padded source positions change no output at all", torch.equal(after_padded, before))
claim("a change to item 1's real source position 0 changes every one of its target positions",
      bool((after_real[1] != before[1]).any(-1).all()))
# lang: zh
claim("把样本 1 位置 3 和 4 的目标词元换掉，它在位置 0、1、2 的输出完全不变",
      torch.equal(after_target[1, :3], before[1, :3]))
claim("而它在位置 3 和 4 的输出变了", bool((after_target[1, 3:] != before[1, 3:]).any(-1).all()))
claim("把样本 1 填充的源位置换成新的值，没有任何输出改变", torch.equal(after_padded, before))
claim("改动样本 1 真实的源位置 0，它的每一个目标位置都变了", bool((after_real[1] != before[1]).any(-1).all()))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: a post-norm decoder layer
#
# Write the forward pass of the original paper's decoder layer: post-norm (`norm_first=False`),
# without dropout (as in `eval()` mode) and without biases. The exercise cell gives you its six
# sub-layers, built from the layer's weights, each keeping the $(B, L, E)$ layout of its first
# argument:
#
# - `norm1`, `norm2`, `norm3`: the three LayerNorms;
# - `self_attention(h, key_padding_mask=None, causal=False)`: multi-head attention of `h` over
#   itself;
# - `cross_attention(h, memory, key_padding_mask=None, causal=False)`: queries from `h`, keys and
#   values from `memory`;
# - `feed_forward(h)`: the position-wise feed-forward network.
#
# In both attentions `key_padding_mask` is bool $(B, L_k)$, over the keys, **True at padding**
# (PyTorch's convention; None: no padding), and `causal=True` hides every key after its query.
# Your part is the wiring: the order of the three sub-layers, where each norm and each residual
# goes, what each attention reads, and which mask and which `causal` each one gets. Hide the
# target's padding from the self-attention too: behind the causal mask this changes only the
# outputs at padded target positions, but the check compares every position, as PyTorch computes
# them all. Return the dtype of `x` (the inputs may be float32 or float64), and leave the
# arguments as they are: write `x = x + …`, not `x += …`, which would change the caller's tensor
# (the check refuses a function that changes its arguments).
#
# The weights are those of `nn.TransformerDecoderLayer(E, num_heads, F, bias=False,
# batch_first=True)`: `norm1.weight`, `self_attn.in_proj_weight`, `self_attn.out_proj.weight`,
# `norm2.weight`, then `multihead_attn.in_proj_weight` and `multihead_attn.out_proj.weight` for the
# cross-attention, `norm3.weight`, `linear1.weight`, `linear2.weight`. So you can compare with it
# outside your function; inside it, the check refuses the ready-made layers: PyTorch's
# `TransformerEncoderLayer.forward` and `TransformerDecoderLayer.forward`, and the course's
# `EncoderLayer.forward` and `DecoderLayer.forward`. The check also compares the gradients with
# respect to `x`, `memory` and every weight.

# %% [markdown] tags=["lang-zh"] en_hash="daa08222c1"
# ### 练习 3：后归一化的解码器层
#
# 写出原论文中解码器层的前向计算：后归一化（`norm_first=False`），不带 dropout（相当于 `eval()` 模式），也不带偏置。练习单元已经用这一层的权重搭好了它的六个子层，每个子层输出的布局都与它的第一个参数相同，为 $(B, L, E)$：
#
# - `norm1`、`norm2`、`norm3`：三个 LayerNorm；
# - `self_attention(h, key_padding_mask=None, causal=False)`：`h` 对自身做的多头注意力；
# - `cross_attention(h, memory, key_padding_mask=None, causal=False)`：查询来自 `h`，键和值来自 `memory`；
# - `feed_forward(h)`：逐位置的前馈网络。
#
# 两种注意力的 `key_padding_mask` 都是形状为 $(B, L_k)$ 的 bool 张量，作用在键上，**True 表示填充**（PyTorch 的约定；None 表示没有填充）；`causal=True` 遮住每个查询之后的所有键。你要做的是把它们连起来：三个子层的先后顺序，每个归一化和每条残差连接放在哪里，每个注意力读取什么，以及各自用哪个掩码、要不要 `causal`。自注意力也要遮住目标序列的填充：有因果掩码挡着，这只会改变目标序列中填充位置的输出；但 PyTorch 会计算每一个位置，检查也比较每一个位置。返回值的 dtype 与 `x` 相同（输入可能是 float32，也可能是 float64）。不要改动传进来的参数：写 `x = x + …`，不要写 `x += …`，后者会改掉调用者的张量（检查不接受改动参数的函数）。
#
# 这些权重就是 `nn.TransformerDecoderLayer(E, num_heads, F, bias=False, batch_first=True)` 的权重：`norm1.weight`、`self_attn.in_proj_weight`、`self_attn.out_proj.weight`、`norm2.weight`，交叉注意力用的 `multihead_attn.in_proj_weight` 和 `multihead_attn.out_proj.weight`，再加上 `norm3.weight`、`linear1.weight`、`linear2.weight`。所以你可以在函数之外拿它来对照；但在函数里，检查不接受现成的层：PyTorch 的 `TransformerEncoderLayer.forward` 和 `TransformerDecoderLayer.forward`，以及课程自带的 `EncoderLayer.forward` 和 `DecoderLayer.forward`。检查也会比较对 `x`、对 `memory` 和对每个权重的梯度。

# %% tags=["exercise"] exercise="06.post_norm_decoder"
def post_norm_decoder_layer(x, memory, tgt_key_padding_mask, memory_key_padding_mask, norm1_weight,
                            self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
                            cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight, num_heads):
    # lang: en
    """One post-norm Transformer decoder layer (norm_first=False), without dropout and biases.

    x: (B, L_t, E) float, the target side. memory: (B, L_s, E), the encoder's output, same dtype.
    tgt_key_padding_mask: (B, L_t) bool, True at the target's PADDING, or None.
    memory_key_padding_mask: (B, L_s) bool, True at the source's PADDING, or None.
    The weights, named as in nn.TransformerDecoderLayer(E, num_heads, F, bias=False):
    norm1_weight, norm2_weight, norm3_weight (E,); self_in_proj_weight and
    cross_in_proj_weight (3E, E) (self_attn's and multihead_attn's in_proj_weight);
    self_out_proj_weight, cross_out_proj_weight (E, E); linear1_weight (F, E);
    linear2_weight (E, F). num_heads: H, dividing E.
    The six sub-layers below are given. In a post-norm layer each sub-layer reads the
    current x, its output is added to x, and the sum is normalised: norm1 after the
    causal self-attention, norm2 after the cross-attention over the memory, norm3 after
    the feed-forward network. Each attention hides the padding of its own keys.
    Returns (B, L_t, E), the dtype of x.
    """
    # lang: zh
    """一个后归一化的 Transformer 解码器层（norm_first=False），不带 dropout 和偏置。

    x：(B, L_t, E) 浮点张量，目标一侧。memory：(B, L_s, E)，编码器的输出，dtype 相同。
    tgt_key_padding_mask：(B, L_t) 的 bool 张量，True 表示目标序列的填充，或为 None。
    memory_key_padding_mask：(B, L_s) 的 bool 张量，True 表示源序列的填充，或为 None。
    各权重的名字与 nn.TransformerDecoderLayer(E, num_heads, F, bias=False) 中一致：
    norm1_weight、norm2_weight、norm3_weight：(E,)；self_in_proj_weight 和
    cross_in_proj_weight：(3E, E)（即 self_attn 和 multihead_attn 的 in_proj_weight）；
    self_out_proj_weight、cross_out_proj_weight：(E, E)；linear1_weight：(F, E)；
    linear2_weight：(E, F)。num_heads：H，能整除 E。
    下面的六个子层已经给出。在后归一化层里，每个子层读取当前的 x，它的输出加到 x 上，
    再对这个和做归一化：因果自注意力之后用 norm1，对 memory 的交叉注意力之后用 norm2，
    前馈网络之后用 norm3。每个注意力都遮住它自己那些键中的填充。
    返回 (B, L_t, E)，dtype 与 x 相同。
    """
    # lang: end
    E = x.shape[-1]

    def attention(h, context, in_proj_weight, out_proj_weight, key_padding_mask, causal):
        B, L_q, L_k = h.shape[0], h.shape[1], context.shape[1]
        q = F.linear(h, in_proj_weight[:E])  # (B, L_q, E)
        # lang: en
        k, v = F.linear(context, in_proj_weight[E:]).chunk(2, dim=-1)  # (B, L_k, E) each
        # lang: zh
        k, v = F.linear(context, in_proj_weight[E:]).chunk(2, dim=-1)  # 各为 (B, L_k, E)
        # lang: end
        q, k, v = (t.view(B, -1, num_heads, E // num_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, L, d)
        keep = torch.ones(L_q, L_k, dtype=torch.bool)
        if causal:
            # lang: en
            keep = keep.tril()  # key j <= query i
            # lang: zh
            keep = keep.tril()  # 键 j <= 查询 i
            # lang: end
        if key_padding_mask is not None:
            keep = keep & ~key_padding_mask[:, None, None, :]  # (B, 1, L_q, L_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)  # (B, H, L_q, L_k)
        # lang: en
        weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1).nan_to_num(0.0)  # a row with no key: 0
        # lang: zh
        weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1).nan_to_num(0.0)  # 没有键的行：0
        # lang: end
        out = (weights @ v).transpose(1, 2).reshape(B, L_q, E)
        return F.linear(out, out_proj_weight)  # (B, L_q, E)

    def norm1(h):
        return F.layer_norm(h, (E,), norm1_weight)

    def norm2(h):
        return F.layer_norm(h, (E,), norm2_weight)

    def norm3(h):
        return F.layer_norm(h, (E,), norm3_weight)

    def self_attention(h, key_padding_mask=None, causal=False):
        return attention(h, h, self_in_proj_weight, self_out_proj_weight, key_padding_mask, causal)

    def cross_attention(h, memory, key_padding_mask=None, causal=False):
        return attention(h, memory, cross_in_proj_weight, cross_out_proj_weight, key_padding_mask, causal)

    def feed_forward(h):
        return F.linear(F.relu(F.linear(h, linear1_weight)), linear2_weight)  # (B, L, E) -> (B, L, F) -> (B, L, E)

    ### BEGIN SOLUTION
    # lang: en
    # Each sub-layer reads x, and the sum of x and its output is normalised. The self-attention
    # gets the target mask (causal and the target's padding), the cross-attention the source
    # mask (the source's padding only) and the memory.
    # lang: zh
    # 每个子层读取 x，x 与子层输出之和再做归一化。自注意力用目标掩码（因果加上目标序列的填充），
    # 交叉注意力用源掩码（只有源序列的填充），并读取 memory。
    # lang: end
    x = norm1(x + self_attention(x, tgt_key_padding_mask, causal=True))
    x = norm2(x + cross_attention(x, memory, memory_key_padding_mask))
    return norm3(x + feed_forward(x))
    ### END SOLUTION


# %%
from course_utils import check
check("06.post_norm_decoder", post_norm_decoder_layer)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. A tiny encoder–decoder learns to reverse
#
# Time to put the pieces to work. The task: read a few letters and write them backwards,
# `abc⟩` → `cba⟩`. The sources have 1 to 8 letters and end with the end token `⟩`; a batch
# mixes lengths, so every sequence is padded with `·` to the batch's longest. The task needs
# every part of this lesson:
#
# - **positions**: reversing is about *where* a letter sits, so without positional encoding the
#   model could not do it (section 1);
# - **the source mask**: the padding must not count as letters, in the encoder's self-attention
#   and in the decoder's cross-attention;
# - **the target mask**: the decoder is trained on whole answers at once, yet must write one token
#   at a time.
#
# The decoder is trained with **teacher forcing**: it reads the right answer shifted one step to
# the right, after a start token `⟨`, and predicts every next token at once. Its input at step
# $t$ is the answer's tokens before $t$; its target is the token at $t$. (So it never reads the
# answer's `⟩`: nothing comes after it.) The causal part of the target mask keeps step $t$ from
# peeking at the token it must predict.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c9677f7b90"
# ## 5. 一个极小的编码器–解码器学会反转序列
#
# 现在让这些部件一起工作。任务是反转（reverse）：读入几个字母，按相反的顺序写出来，`abc⟩` → `cba⟩`。源序列有 1 到 8 个字母，最后是结束词元 `⟩`；同一批量里的序列长短不一，所以每条都用 `·` 填充到这个批量中最长的长度。本课的每个部件在这里都用得上：
#
# - **位置**：反转看的是字母*在哪里*，没有位置编码，模型就做不到（第 1 节）；
# - **源掩码**：在编码器的自注意力和解码器的交叉注意力里，填充都不能当作字母；
# - **目标掩码**：训练时解码器一次读入整个答案，生成时却只能一个词元一个词元地写。
#
# 解码器用**教师强制**训练：它读入右移一位的正确答案（开头是起始词元 `⟨`），一次算出所有位置的预测，每个位置预测紧跟在它后面的那个词元。第 $t$ 步的输入是答案中 $t$ 之前的词元，要预测的是第 $t$ 个词元。（所以它从不读入答案末尾的 `⟩`：`⟩` 之后没有要预测的词元了。）目标掩码的因果部分保证第 $t$ 步偷看不到它要预测的词元。

# %%
batch5 = seq2seq.random_batch(4, torch.Generator().manual_seed(7))
# lang: en
print("source     decoder input  target")
# lang: zh
print("源序列     解码器输入     目标")
# lang: end
for source, target_in, target_out in zip(batch5.source, batch5.target_in, batch5.target_out):
    print(f"{seq2seq.show(source):10} {seq2seq.show(target_in):14} {seq2seq.show(target_out)}")
# lang: en
claim("the decoder's input is the target shifted one step right, after the start token ⟨, without the ⟩",
      torch.equal(batch5.target_in[:, 1:], batch5.target_out[:, :-1].masked_fill(batch5.target_out[:, :-1] == seq2seq.EOS,
                                                                                  seq2seq.PAD))
      and bool((batch5.target_in[:, 0] == seq2seq.BOS).all()))
# lang: zh
claim("解码器的输入就是目标向右移一步，前面加上起始词元 ⟨，去掉 ⟩",
      torch.equal(batch5.target_in[:, 1:], batch5.target_out[:, :-1].masked_fill(batch5.target_out[:, :-1] == seq2seq.EOS,
                                                                                  seq2seq.PAD))
      and bool((batch5.target_in[:, 0] == seq2seq.BOS).all()))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# The model, `seq2seq.Reverser`, is the picture below with $E = 32$, two heads and $F = 64$: a
# token embedding shared by both sides, plus the sinusoidal encoding (added without section 1's
# $\sqrt{E}$: `nn.Embedding` starts its vectors at about 1 per feature, already as large as the
# encoding's values, which never exceed 1; multiplied by $\sqrt{32} \approx 5.7$ they would start
# out drowning the positions);
# one pre-norm `EncoderLayer` and one pre-norm `DecoderLayer` from this lesson, each stack followed
# by a final LayerNorm (a pre-norm stack never normalises its residual stream otherwise); and a
# linear read-out to the 13 tokens (10 letters, `·`, `⟨`, `⟩`). The masks come from the tokens
# themselves: a position holding `·` is padding.
#
# ![A one-layer pre-norm encoder–decoder and its two masks](../../images/06_encoder_decoder_en.svg)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c2c7402cf8"
# 模型 `seq2seq.Reverser` 就是下图，取 $E = 32$、两个头、$F = 64$。源和目标共用一个词元嵌入，嵌入加上正弦位置编码；这里没有乘第 1 节的 $\sqrt{E}$，因为 `nn.Embedding` 初始化的向量每个特征本来就约为 1，已经和位置编码一样大（位置编码的取值不超过 1）；再乘以 $\sqrt{32} \approx 5.7$，一开始就会淹没位置信息。中间是本课写的一个前归一化 `EncoderLayer` 和一个前归一化 `DecoderLayer`，每个堆叠后面各接一个 LayerNorm（否则前归一化的堆叠从不对残差流做归一化），最后是一个线性读出层，给出 13 个词元（10 个字母，加上 `·`、`⟨`、`⟩`）的 logits。掩码直接由词元得出：放着 `·` 的位置就是填充。
#
# ![单层前归一化编码器–解码器及其两个掩码](../../images/06_encoder_decoder_zh.svg)

# %% [markdown] tags=["lang-en"]
# Training: Adam, 250 steps, each on 64 fresh random sequences; the loss is the cross-entropy of
# every real target token (`ignore_index` skips the padding), and the learning rate falls
# linearly to zero so that the last steps polish rather than jump. A few seconds on one CPU thread. The
# model is then asked to reverse 500 held-out sources with greedy decoding (below), and must get
# every token of an answer right for it to count.

# %% [markdown] tags=["lang-zh"] en_hash="5c832212fc"
# 训练：用 Adam 训练 250 步，每步用 64 条新的随机序列；损失是每个真实目标词元的交叉熵（`ignore_index` 跳过填充），学习率线性降到零，让最后几步做精细调整，而不是来回跳。在一个 CPU 线程上只需几秒。训练完后，让模型用贪心解码（见下文）反转 500 条留出（held-out）的源序列；一个答案的每个词元都对，才算对。

# %%
run = seq2seq.train(seed=0)
model = run.model
fig, ax = plt.subplots(figsize=(6, 2.8), layout="constrained")
ax.plot(run.losses)
ax.set_yscale("log")
# lang: en
ax.set(xlabel="training step", ylabel="cross-entropy loss")
claim("more than 95 % of the 500 held-out sources come out exactly reversed", run.accuracy > 0.95)
# lang: zh
ax.set(xlabel="训练步数", ylabel="交叉熵损失")
claim("500 条留出的源序列中，超过 95% 被一字不差地反转了过来", run.accuracy > 0.95)
# lang: end
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Greedy decoding
#
# At generation time there is no right answer to feed in. **Greedy decoding** starts the decoder
# with `⟨` alone, takes the most likely next token, appends it to the decoder's input, and runs
# the decoder again, until it writes `⟩`. The encoder runs once: its memory does not change while
# the answer grows.
#
# Training and generation agree because of the target mask. Feed the finished answer back in,
# shifted right, all at once (teacher forcing on the model's own answer): at every step the
# decoder predicts the same token it chose while generating, because at step $t$ it sees exactly
# what it saw then, the tokens before $t$, and nothing after.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="1a64d20655"
# ### 贪心解码
#
# 生成时没有正确答案可以喂进去。**贪心解码**让解码器从只有 `⟨` 开始，取最可能的下一个词元，把它接到解码器输入的后面，再运行一次解码器，直到写出 `⟩` 为止。编码器只运行一次：答案变长的时候，它的 memory 不变。
#
# 训练和生成之所以一致，靠的是目标掩码。把写完的答案右移一步，一次性喂回去（在模型自己的答案上做教师强制）：每一步解码器预测出的词元，都与它生成时选的那个相同，因为第 $t$ 步看到的正好是它当时看到的东西——$t$ 之前的词元，而看不到之后的任何词元。

# %%
texts = ["abcdefgh", "badge", "jade", "c"]
answers = {}
for text in texts:
    source = seq2seq.source_of(text)  # (1, n + 1)
    answers[text] = seq2seq.show(seq2seq.greedy_decode(model, source)[0])
    print(f"{text + '⟩':10} → {answers[text]}")
test = seq2seq.held_out(50)
# lang: en
generated = seq2seq.greedy_decode(model, test.source)  # (50, T): one token at a time
fed = torch.cat([torch.full((50, 1), seq2seq.BOS), generated[:, :-1]], dim=1)  # its own answer, shifted right
# lang: zh
generated = seq2seq.greedy_decode(model, test.source)  # (50, T)：一次生成一个词元
fed = torch.cat([torch.full((50, 1), seq2seq.BOS), generated[:, :-1]], dim=1)  # 它自己的答案，右移一步
# lang: end
with torch.no_grad():
    at_once = model(test.source, fed).argmax(-1)  # (50, T)
# lang: en
after_end = generated == seq2seq.PAD  # (50, T): the steps after a sequence's ⟩
# lang: zh
after_end = generated == seq2seq.PAD  # (50, T)：每条序列 ⟩ 之后的那些步
# lang: end
# lang: en
claim("every one of these four comes out reversed, ⟩ last", all(answers[t] == t[::-1] + "⟩" for t in texts))
claim("on 50 held-out sources, the model fed its own answer all at once predicts at every step the token "
      "it chose one step at a time", torch.equal(at_once.masked_fill(after_end, seq2seq.PAD), generated))
# lang: zh
claim("这四个都被正确地反转了，最后是 ⟩", all(answers[t] == t[::-1] + "⟩" for t in texts))
claim("在 50 条留出的源序列上，把模型自己的答案一次性喂回去，"
      "它在每一步预测的词元都与逐个生成时选的相同",
      torch.equal(at_once.masked_fill(after_end, seq2seq.PAD), generated))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### What the decoder reads
#
# To write the letter at step $t$ of a source of $n$ letters, the decoder needs source position
# $n - 1 - t$: its cross-attention should form an anti-diagonal. Below, the decoder reverses one
# source. Each row of the figure is one head: on the left its self-attention (the target mask's
# triangle), on the right its cross-attention over the source. A query row is labelled with the
# token the step read and the token it wrote; masked cells (weight exactly 0) are hatched grey.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5d103f2c55"
# ### 解码器读了什么
#
# 对一个有 $n$ 个字母的源序列，要在第 $t$ 步写出字母，解码器需要源序列的位置 $n - 1 - t$：它的交叉注意力应当形成一条反对角线。下面让解码器反转一个源序列。图中每一行是一个头：左边是它的自注意力（目标掩码的三角形），右边是它对源序列的交叉注意力。每个查询行都标出这一步读入的词元和写出的词元；被遮住的单元格（权重恰好为 0）画成灰色斜线。

# %%
decoder_maps(model, "dbgeja")
plt.show()

# %% [markdown] tags=["lang-en"]
# The anti-diagonal is there, but blurred: a step gives roughly half of its weight to the position
# it needs and spreads most of the rest over the neighbours. Yet the answers come out right, as
# the accuracy above showed. The weight by offset from the needed position, averaged over the
# heads and over every letter step of the 500 held-out sources:

# %% [markdown] tags=["lang-zh"] en_hash="aab06d557d"
# 反对角线确实有，但有些模糊：每一步把大约一半的权重给了它需要的位置，其余的大多分给了相邻的位置。尽管如此，答案还是对的，前面的准确率已经说明了这一点。下面按偏离所需位置的距离统计权重，对所有头、对 500 条留出源序列中写字母的每一步取平均：

# %%
test = seq2seq.held_out()
with torch.no_grad():
    _, (_, cross5) = model(test.source, test.target_in, need_weights=True)  # (500, H, L_t, L_s)
profile = seq2seq.offset_profile(cross5, test)
offset_bars(profile)
plt.show()
# lang: en
claim("on average the needed source position gets more than 0.35 of the weight", profile[0] > 0.35)
claim("and more than any other offset", all(profile[0] > weight for offset, weight in profile.items() if offset))
# lang: zh
claim("平均而言，所需的源位置得到的权重超过 0.35", profile[0] > 0.35)
claim("而且比任何其他偏移处的权重都大", all(profile[0] > weight for offset, weight in profile.items() if offset))
# lang: end

# %% [markdown] tags=["lang-en"]
# Try it yourself: pick a held-out example with the slider, or type up to 8 letters from `a` to
# `j`. The explorer pads every source to 9 positions, the longest a source can be, so the source
# mask is at work too: the padding's columns are hatched. Do long sources go wrong more often?
# Does a repeated letter confuse it?

# %% [markdown] tags=["lang-zh"] en_hash="d93d34854b"
# 自己试一试：用滑块挑一个留出的样例，或者输入最多 8 个 `a` 到 `j` 之间的字母。探索器会把每个源序列都填充到 9 个位置（源序列最长就是 9 个位置），所以源掩码也在起作用：填充所在的列画成了斜线。长的源序列是不是更容易出错？重复的字母会不会把它弄糊涂？

# %%
decoding_explorer(model)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Warm-up, measured
#
# Section 3 said that a deep post-norm stack needs a learning-rate warm-up and a pre-norm one does
# not. Here is that on the reverse task: the same model with 4 encoder and 4 decoder layers instead
# of 1, trained for 100 steps of 32 sequences at a peak learning rate of 0.015, three times from
# the same start: post-norm without warm-up, post-norm with a warm-up of $W = 30$ steps, and
# pre-norm without warm-up. Without warm-up the learning rate falls linearly from its peak, as
# above. With it, step $t = 0 \dots T - 1$ of $T = 100$ uses
#
# $$\mathrm{lr}_t = \mathrm{lr} \cdot \min\Big(\frac{t + 1}{W},\ \frac{T - t}{T - W}\Big):$$
#
# the first term wins during the first $W$ steps, a linear rise to the peak; then the second, the
# same linear fall, from the peak to $\mathrm{lr}/(T - W)$ at the last step. (`seq2seq.learning_rate`
# computes it.) Each run is then scored by its loss on the 500 held-out sources, with teacher
# forcing. The three runs take a few seconds.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="30caf0b147"
# ### 实测预热的作用
#
# 第 3 节说过：很深的后归一化堆叠离不开学习率预热，前归一化的则不需要。下面在反转任务上实际看一看。模型还是上面那个，只是编码器和解码器各有 4 层，而不是 1 层；用 32 条序列一步，训练 100 步，学习率峰值为 0.015。从同一个起点出发训练三次：后归一化不预热，后归一化预热 $W = 30$ 步，前归一化不预热。不预热时，学习率和上面一样从峰值线性下降。预热时，总共 $T = 100$ 步，第 $t = 0 \dots T - 1$ 步的学习率是
#
# $$\mathrm{lr}_t = \mathrm{lr} \cdot \min\Big(\frac{t + 1}{W},\ \frac{T - t}{T - W}\Big)：$$
#
# 前 $W$ 步取第一项，学习率线性上升到峰值；之后取第二项，学习率同样线性下降，最后一步降到 $\mathrm{lr}/(T - W)$。（`seq2seq.learning_rate` 算的就是它。）训练完后，用教师强制算出每个模型在 500 条留出源序列上的损失，作为它的成绩。三次训练一共只要几秒钟。

# %%
# lang: en
schedules = [(False, 0), (False, norm_study.WARMUP_STEPS), (True, 0)]  # (norm_first, warm-up steps)
# lang: zh
schedules = [(False, 0), (False, norm_study.WARMUP_STEPS), (True, 0)]  # (norm_first, 预热步数)
# lang: end
runs = {schedule: norm_study.warmup_run(*schedule, seed=0) for schedule in schedules}
warmup_curves(list(runs.values()))
plt.show()
post_cold, post_warm, pre_cold = (runs[schedule].held_out_loss for schedule in schedules)
answers = seq2seq.held_out().target_out
counts = torch.bincount(answers[answers != seq2seq.PAD], minlength=seq2seq.VOCAB).double()
frequencies = counts[counts > 0] / counts.sum()
# lang: en
guessing = -(frequencies * frequencies.log()).sum().item()  # the entropy of the answers' tokens
# lang: zh
guessing = -(frequencies * frequencies.log()).sum().item()  # 答案中词元分布的熵
# lang: end
# lang: en
claim(f"guessing every token from how often it occurs in the held-out answers scores {guessing:.2f}",
      round(guessing, 2) == 2.36)
claim("post-norm without warm-up: after 100 steps its held-out loss is still above 1.3", post_cold > 1.3)
claim("post-norm with the 30-step warm-up: below 1.0", post_warm < 1.0)
claim("pre-norm without warm-up: below 1.0 too", pre_cold < 1.0)
claim("post-norm without warm-up ends at more than twice the loss of either other run",
      post_cold > 2 * max(post_warm, pre_cold))
# lang: zh
claim(f"只按每个词元在留出答案中出现的频率去猜，损失是 {guessing:.2f}", round(guessing, 2) == 2.36)
claim("后归一化、不预热：训练 100 步之后，留出集上的损失仍高于 1.3", post_cold > 1.3)
claim("后归一化、预热 30 步：低于 1.0", post_warm < 1.0)
claim("前归一化、不预热：同样低于 1.0", pre_cold < 1.0)
claim("后归一化不预热时，最终的损失是另外两次中任何一次的两倍以上", post_cold > 2 * max(post_warm, pre_cold))
# lang: end

# %% [markdown] tags=["lang-en"]
# The curves change from run to run (another machine rounds differently, and a hundred steps
# amplify it), but which run lags does not: started at the full learning rate, the deep post-norm
# stack learns far more slowly than the other two, and after 100 steps its loss is still more than
# twice theirs. The same stack with 30 gentle steps first learns, and the pre-norm stack learns
# without them: at this depth and this learning rate, the post-norm stack is the one that needs
# the warm-up.

# %% [markdown] tags=["lang-zh"] en_hash="71e7ace937"
# 这几条曲线每次运行都会有些不同（换一台机器，舍入就不一样，一百步训练会把差别放大），但落后的总是同一次：一开始就用满学习率，很深的后归一化堆叠学得比另外两次慢得多，100 步之后，它的损失仍是另外两次的两倍以上。同一个堆叠先用 30 步较小的学习率热身，就学得起来；前归一化的堆叠不热身也学得起来。在这个深度和学习率下，离不开预热的是后归一化的堆叠。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. What a layer costs
#
# A layer's **parameters** do not depend on the length: the same weights serve a sentence of 5
# tokens and a document of 5000. Its **arithmetic** does. `parameter_count(layer)` and
# `flops(layer, L)` split both by part. Take the base model of *Attention Is All You Need*:
# $E = 512$, $H = 8$, $F = 2048$. With biases, an attention sub-layer holds four $E \times E$
# projections and their biases, $4E^2 + 4E$ numbers; the feed-forward network two matrices and
# two biases, $2EF + F + E$; each LayerNorm its $\gamma$ and $\beta$, $2E$. None of them has an
# $L$ in it, and the number of heads changes none of them (lesson 04).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="0faab2ed3e"
# ## 6. 一个层的代价
#
# 一个层的**参数**与长度无关：同一组权重既处理 5 个词元的句子，也处理 5000 个词元的文档。它的**计算量**却与长度有关。`parameter_count(layer)` 和 `flops(layer, L)` 把两者都按部分拆开。以 *Attention Is All You Need* 的 base 模型为例：$E = 512$，$H = 8$，$F = 2048$。带偏置时，一个注意力子层有四个 $E \times E$ 的投影及其偏置，共 $4E^2 + 4E$ 个数；前馈网络有两个矩阵和两个偏置，共 $2EF + F + E$ 个；每个 LayerNorm 有它的 $\gamma$ 和 $\beta$，共 $2E$ 个。这些式子里都没有 $L$，头数也不影响其中任何一项（第 04 课）。

# %%
torch.manual_seed(0)
E, H, d_ff = 512, 8, 2048
base = EncoderLayer(E, H, d_ff)
params = parameter_count(base)
# lang: en
names = {"attention": "attention", "feed_forward": "feed-forward network", "norms": "two LayerNorms",
         "total": "the whole layer"}
# lang: zh
names = {"attention": "注意力", "feed_forward": "前馈网络", "norms": "两个 LayerNorm", "total": "整个层"}
# lang: end
for part, count in params.items():
    print(f"{count:>9,}  {names[part]}")
# lang: en
claim("attention: 4E² + 4E = 1,050,624 parameters", params["attention"] == 4 * E**2 + 4 * E == 1_050_624)
claim("feed-forward network: 2EF + F + E = 2,099,712, about twice the attention's",
      params["feed_forward"] == 2 * E * d_ff + d_ff + E == 2_099_712
      and round(params["feed_forward"] / params["attention"]) == 2)
claim("two LayerNorms: 2 · 2E = 2,048", params["norms"] == 2 * 2 * E == 2_048)
claim("two thirds of the layer's 3,152,384 parameters are in the feed-forward network",
      params["total"] == 3_152_384 and round(params["feed_forward"] / params["total"], 2) == 0.67)
claim("nn.TransformerEncoderLayer(512, 8, 2048) has the same number",
      params["total"] == sum(p.numel() for p in base.to_torch().parameters()))
# lang: zh
claim("注意力：4E² + 4E = 1,050,624 个参数", params["attention"] == 4 * E**2 + 4 * E == 1_050_624)
claim("前馈网络：2EF + F + E = 2,099,712 个，约为注意力的两倍",
      params["feed_forward"] == 2 * E * d_ff + d_ff + E == 2_099_712
      and round(params["feed_forward"] / params["attention"]) == 2)
claim("两个 LayerNorm：2 · 2E = 2,048 个", params["norms"] == 2 * 2 * E == 2_048)
claim("这个层的 3,152,384 个参数中，三分之二在前馈网络里",
      params["total"] == 3_152_384 and round(params["feed_forward"] / params["total"], 2) == 0.67)
claim("nn.TransformerEncoderLayer(512, 8, 2048) 的参数个数相同",
      params["total"] == sum(p.numel() for p in base.to_torch().parameters()))
# lang: end

# %% [markdown] tags=["lang-en"]
# The arithmetic for one sequence of $L$ positions, in multiply-adds (`flops` counts the matrix
# products; a multiply-add is two floating-point operations):
#
# | part | multiply-adds |
# | --- | --- |
# | attention: the projections of $Q$, $K$, $V$ and the output | $4LE^2$ |
# | attention: the scores $QK^\top$, then the weights times $V$ | $2L^2E$ |
# | feed-forward network | $2LEF$ |
# | two LayerNorms ($\gamma \hat x + \beta$) | $2LE$ |
#
# Every row grows like $L$ except the second, the scores and the weighted sum of the values:
# every query meets every key, $L^2$ pairs. So attention catches up with the feed-forward network
# where (dividing by $2LE$)
#
# $$4LE^2 + 2L^2E = 2LEF \iff 2E + L = F \iff L = F - 2E,$$
#
# which is $2048 - 1024 = 1024$ for the base model. Since its $F = 4E$, it is also where the
# scores catch up with the projections: $2L^2E = 4LE^2 \iff L = 2E = 1024$.

# %% [markdown] tags=["lang-zh"] en_hash="e0ba0719a0"
# 一条有 $L$ 个位置的序列所需的计算量，以乘加次数计（`flops` 统计的是矩阵乘积；一次乘加是两次浮点运算）：
#
# | 部分 | 乘加次数 |
# | --- | --- |
# | 注意力：$Q$、$K$、$V$ 和输出的投影 | $4LE^2$ |
# | 注意力：分数 $QK^\top$，以及权重乘 $V$ | $2L^2E$ |
# | 前馈网络 | $2LEF$ |
# | 两个 LayerNorm（$\gamma \hat x + \beta$） | $2LE$ |
#
# 除了第二行（分数，以及对值的加权求和），每一行都随 $L$ 线性增长：第二行要让每个查询遇上每个键，共 $L^2$ 对。所以注意力追上前馈网络的位置是（两边同除以 $2LE$）
#
# $$4LE^2 + 2L^2E = 2LEF \iff 2E + L = F \iff L = F - 2E,$$
#
# 对 base 模型来说就是 $2048 - 1024 = 1024$。由于它的 $F = 4E$，这里也正是分数追上投影的地方：$2L^2E = 4LE^2 \iff L = 2E = 1024$。

# %%
lengths = [2**k for k in range(4, 15)]  # 16 … 16384
counts = [flops(base, L) for L in lengths]
crossover = d_ff - 2 * E
at = {L: flops(base, L) for L in (crossover - 1, crossover, crossover + 1)}
for L, c in zip(lengths, counts):
    # lang: en
    print(f"L = {L:5}: attention {c['attention'] / c['total']:4.0%}, feed-forward {c['feed_forward'] / c['total']:4.0%}")
    # lang: zh
    print(f"L = {L:5}：注意力 {c['attention'] / c['total']:4.0%}，前馈网络 {c['feed_forward'] / c['total']:4.0%}")
    # lang: end
share = {L: c["attention"] / c["total"] for L, c in zip(lengths, counts)}
decoder_base = DecoderLayer(E, H, d_ff)
decoder_counts = [flops(decoder_base, L) for L in [1] + lengths]
# lang: en
claim("at L = F − 2E = 1024, attention's multiply-adds equal the feed-forward network's exactly",
      crossover == 1024 and at[1024]["attention"] == at[1024]["feed_forward"] == 2_147_483_648)
claim("at L = 1023 the feed-forward network costs more, at L = 1025 attention does",
      at[1023]["attention"] < at[1023]["feed_forward"] and at[1025]["attention"] > at[1025]["feed_forward"])
claim("attention's share grows with L: 36 % at L = 128, 82 % at L = 8192, 89 % at L = 16384",
      list(share.values()) == sorted(share.values())
      and [round(share[L], 2) for L in (128, 8192, 16384)] == [0.36, 0.82, 0.89])
claim("a decoder layer has two attentions: with a memory as long as the target, they cost more than its "
      "feed-forward network at every length, L = 1 included",
      all(c["self_attention"] + c["cross_attention"] > c["feed_forward"] for c in decoder_counts))
# lang: zh
claim("L = F − 2E = 1024 时，注意力的乘加次数与前馈网络的恰好相等",
      crossover == 1024 and at[1024]["attention"] == at[1024]["feed_forward"] == 2_147_483_648)
claim("L = 1023 时前馈网络的计算量更大，L = 1025 时注意力的更大",
      at[1023]["attention"] < at[1023]["feed_forward"] and at[1025]["attention"] > at[1025]["feed_forward"])
claim("注意力所占的比例随 L 增长：L = 128 时为 36%，L = 8192 时为 82%，L = 16384 时为 89%",
      list(share.values()) == sorted(share.values())
      and [round(share[L], 2) for L in (128, 8192, 16384)] == [0.36, 0.82, 0.89])
claim("解码器层有两个注意力：memory 与目标序列一样长时，在任何长度下（包括 L = 1），"
      "它们的计算量都超过前馈网络",
      all(c["self_attention"] + c["cross_attention"] > c["feed_forward"] for c in decoder_counts))
# lang: end

# %% [markdown] tags=["lang-en"]
# The same numbers drawn: each part's multiply-adds (left, log scale) and its share of the layer's
# (right), with the crossover at $L = 1024$ dashed. The norms are too cheap to see on the right.

# %% [markdown] tags=["lang-zh"] en_hash="8af558d3e4"
# 把同样的数画出来：左图是每个部分的乘加次数（对数刻度），右图是它占整层的比例；虚线是 $L = 1024$ 处的分界长度。LayerNorm 的计算量太小，在右图里看不出来。

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
flops_by_part(lengths, counts, ax=axes[0], crossover=crossover)
flops_by_part(lengths, counts, ax=axes[1], crossover=crossover, share=True)
plt.show()

# %% [markdown] tags=["lang-en"]
# Beyond the crossover attention dominates, and its share keeps growing toward 1: its $L^2$ term
# outgrows every other term, which all grow like $L$. Memory follows the same pattern: a layer
# that keeps its weights stores $(B, H, L, L)$ numbers (lesson 05, section 1), while its
# parameters stay fixed. That $L^2$ term is what lesson 05's ProbSparse attention attacks: it
# scores every query against a sample of $U = c \cdot \lceil \ln L \rceil$ keys, and then only the
# $u = c \cdot \lceil \ln L \rceil$ queries it picks against all the keys, so the scores cost about
# $L \ln L$ instead of $L^2$. It is only as good as its assumption, though: it stays close to full
# attention when a few queries dominate each head (their rows peaked, the rest nearly flat), and
# gives the others no better than mean(V) when none do (lesson 05, section 8). It leaves the
# projections and the feed-forward network as they are, so below the crossover it saves little.

# %% [markdown] tags=["lang-zh"] en_hash="ad9f5abb29"
# 过了分界长度，注意力就占了大头，而且它的比例还在不断逼近 1：它的 $L^2$ 项比其他各项增长得都快，其他各项都只随 $L$ 线性增长。内存也是同样的规律：一个要保留权重的层要存下 $(B, H, L, L)$ 个数（第 05 课第 1 节），而它的参数始终不变。第 05 课的 ProbSparse 注意力针对的正是这个 $L^2$ 项：它先让每个查询只与 $U = c \cdot \lceil \ln L \rceil$ 个采样的键打分，再只让挑出的 $u = c \cdot \lceil \ln L \rceil$ 个查询与全部键打分，于是分数的代价大约是 $L \ln L$，而不是 $L^2$。不过，它的好坏取决于它的假设是否成立：每个头里只有少数几个查询占主导（它们的权重行有尖峰，其余的行几乎是平的）时，它与完整注意力很接近；没有这样的查询时，它给其余查询的结果并不比 mean(V) 好（第 05 课第 8 节）。投影和前馈网络它都原样保留，所以在分界长度以下，它省不了多少。

# %%
# lang: en
weights_bytes = 1 * H * crossover**2 * 4  # the (B, H, L, L) weights of one sequence at L = 1024, float32
# lang: zh
weights_bytes = 1 * H * crossover**2 * 4  # L = 1024 时一条序列的权重 (B, H, L, L)，float32
# lang: end
params_bytes = params["total"] * 4
# lang: en
claim(f"at L = 1024 one sequence's attention weights take {format_bytes(weights_bytes)}, more than the layer's "
      f"{format_bytes(params_bytes)} of parameters", weights_bytes == 33_554_432 > params_bytes == 12_609_536)
# lang: zh
claim(f"L = 1024 时，一条序列的注意力权重就占 {format_bytes(weights_bytes)}，超过了整层参数的 "
      f"{format_bytes(params_bytes)}", weights_bytes == 33_554_432 > params_bytes == 12_609_536)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Attention alone ignores order. A positional encoding gives each position a vector, added to
#   its token embedding (the width stays $E$). The sinusoidal one pairs features into sines and
#   cosines at geometric frequencies, so a shift by $k$ positions is one rotation $R_k$ for every
#   position, and it extends to any length; a learned table cannot go past its last row.
# - An encoder layer is multi-head self-attention and a position-wise feed-forward network, each
#   wrapped in a residual connection and a LayerNorm, with dropout on each sub-layer's output.
#   Built from lesson 04's attention, it gives `nn.TransformerEncoderLayer`'s values and
#   gradients.
# - Post-norm (the original) puts each LayerNorm on the main path; pre-norm moves it into the
#   branch and leaves an identity path from every layer to the top, so the gradient at the top
#   reaches every layer whole. Deep pre-norm stacks train without the learning-rate warm-up that
#   post-norm ones need (without one, a post-norm encoder–decoder of 4 + 4 layers learned far more slowly); the
#   price is a residual stream that grows with depth and needs a final LayerNorm.
# - A decoder layer adds cross-attention over the memory between its causal self-attention and
#   its feed-forward network. It has two masks: the target mask (causal and target padding,
#   $(L_t, L_t)$) and the source mask (source padding, $(L_t, L_s)$, no causal part).
# - Trained with teacher forcing, a one-layer encoder–decoder learns to reverse sequences of 1 to
#   8 letters in seconds; greedy decoding writes the answer one token at a time, and the causal
#   mask makes it see what it saw in training.
# - With $F = 4E$, the feed-forward network holds two thirds of a layer's parameters; attention's
#   cost grows with $L^2$ and overtakes it from $L = F - 2E$ on. That is where lesson 05's
#   ProbSparse attention can earn its keep, provided a few queries dominate each head's attention.
#
# That is the whole Transformer block: every piece of it, from the shapes of lesson 00 to the
# masks, the heads and the cost, is now code you have read or written and checked against
# PyTorch's. Two lessons go past it: lesson 07 runs a trained model the way it is served, one
# token at a time from a cache of keys and values, and lesson 08 computes the same attention in
# tiles without ever storing the $L \times L$ weights.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b7caf198da"
# ## 小结
#
# - 单靠注意力分不出顺序。位置编码给每个位置一个向量，加到它的词元嵌入上（宽度仍是 $E$）。正弦位置编码把特征两两配成频率按几何级数排列的正弦和余弦，于是平移 $k$ 个位置对每个位置都是同一个旋转 $R_k$，而且可以延伸到任意长度；可学习的位置表则超不出它的最后一行。
# - 编码器层由多头自注意力和逐位置的前馈网络组成，每个子层都包在残差连接和 LayerNorm 里，子层的输出上还有 dropout。用第 04 课的注意力搭出来的编码器层，输出值和梯度都与 `nn.TransformerEncoderLayer` 相同。
# - 后归一化（原论文的做法）把每个 LayerNorm 放在主路径上；前归一化把它移进支路，让每一层到顶端都有一条恒等路径，顶端的梯度能原封不动地到达每一层。很深的前归一化堆叠不需要后归一化所需的学习率预热也能训练（编码器、解码器各 4 层的后归一化模型，不预热时学得慢得多）；代价是残差流随深度增长，最后必须再接一个 LayerNorm。
# - 解码器层在因果自注意力和前馈网络之间加了一个在 memory 上的交叉注意力。它有两个掩码：目标掩码（因果加上目标序列的填充，$(L_t, L_t)$）和源掩码（源序列的填充，$(L_t, L_s)$，没有因果部分）。
# - 用教师强制训练，一个单层的编码器–解码器几秒钟就学会反转 1 到 8 个字母；贪心解码一次写一个词元，因果掩码让它看到的正是训练时看到的。
# - 当 $F = 4E$ 时，前馈网络占了一个层三分之二的参数；注意力的代价随 $L^2$ 增长，从 $L = F - 2E$ 起超过前馈网络。第 05 课的 ProbSparse 注意力可以在这里派上用场，前提是每个头里只有少数几个查询占主导。
#
# 这就是完整的 Transformer 块：从第 00 课的形状，到掩码、多头和代价，每一个部件如今都是你读过或亲手写过、并与 PyTorch 对照过的代码。后面还有两课：第 07 课像实际部署那样运行训练好的模型，借助 KV 缓存一次生成一个词元；第 08 课分块计算同样的注意力，自始至终不存下 $L \times L$ 的权重。
