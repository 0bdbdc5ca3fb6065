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
# # FlashAttention from scratch
#
# Full attention computes an $L \times L$ matrix of scores for every head, and the plain code
# stores it, then stores its softmax: at $L = 8192$ with 8 heads that is 2.1 GB (2 GiB) each, in
# float32.
# Lesson 05 asked which of those scores are worth computing. This lesson keeps every score and
# still never stores the matrix. The trick is exact, not an approximation: softmax(QKᵀ)V can be
# computed one block of keys at a time, with a running maximum and a running sum per row. It is
# what FlashAttention does (Dao et al., 2022; FlashAttention-2, Dao, 2023), and what PyTorch's own
# CPU attention does. On a GPU its main gain is time, from the traffic it saves between the chip and
# its memory (section 2 says how); on this CPU the lesson measures what comes out the same on every
# machine: the memory a call allocates, and that the result is exact.
#
# In this lesson you will
#
# 1. compute a softmax from pieces of its row (the **online softmax**) and merge two partial
#    results exactly;
# 2. write attention as a loop over tiles of queries and keys that keeps only $O(L \cdot d)$ state,
#    prove it gives `F.scaled_dot_product_attention`'s [values]{.not-term} and gradients, and measure its memory
#    as $L$ grows;
# 3. skip the tiles a causal mask or a sliding window hides entirely, and mask only the tiles it
#    cuts;
# 4. write the backward the real kernels use, which keeps one log-sum-exp per row and recomputes the
#    weights tile by tile instead of storing them, as a `torch.autograd.Function`; check its
#    gradients against PyTorch's and measure the memory of a training step; and see which kernel
#    `F.scaled_dot_product_attention` picks on this CPU.
#
# There are four exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="271b656832"
# # 从零实现 FlashAttention
#
# 完整注意力要为每个头算出一个 $L \times L$ 的分数矩阵，朴素的代码会把它存下来，再存下它的 softmax：在 $L = 8192$、8 个头时，float32 下每个矩阵都要 2.1 GB（2 GiB）。第 05 课问的是：这些分数里哪些值得算。本课一个分数也不少算，却始终不存下这个矩阵。这个技巧是精确的，不是近似：softmax(QKᵀ)V 可以每次只处理一块键，每一行只需维护一个运行最大值和一个累计和。FlashAttention（Dao 等，2022；FlashAttention-2，Dao，2023）做的就是这件事，PyTorch 自己的 CPU 注意力也是这样做的。在 GPU 上，它最大的好处是省时间，靠的是减少芯片与显存之间的数据搬运（第 2 节会讲怎样减少）；在这台 CPU 上，本课测量的是在任何机器上结果都一样的东西：一次调用分配了多少内存，以及结果是否精确。
#
# 本课你将：
#
# 1. 用一行分数的若干片段算出 softmax，即**在线 softmax**（online softmax），并把两个部分结果精确地合并起来；
# 2. 把注意力写成逐个分块（tile）计算的循环：每个分块是一块查询对一块键的分数，整个循环只保留 $O(L \cdot d)$ 的状态；证明它的输出值和梯度都与 `F.scaled_dot_product_attention` 相同，并测量随 $L$ 增长它占用的内存；
# 3. 跳过被因果掩码或滑动窗口整块遮住的分块，只给被掩码穿过的分块加掩码；
# 4. 写出真正的核函数所用的反向传播：每行只保留一个 log-sum-exp，逐块重计算权重而不是把它们存下来，并把它写成一个 `torch.autograd.Function`；拿它的梯度与 PyTorch 的对照，测量训练一步所需的内存；再看看在这台 CPU 上 `F.scaled_dot_product_attention` 选用哪个核函数。
#
# 本课共有四道练习，每道练习后面都跟着一个检查单元。

# %%
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, measured, setup
from course_utils.tiled import (
    SKIP,
    SoftmaxState,
    finish,
    flash_attention,
    keep_of,
    materialised_attention,
    online_softmax,
    peak_bytes,
    piece_state,
    sdpa_backend,
    tile_kinds,
    tiled_attention,
)
from course_utils.viz import cost_lines, format_bytes
from course_utils.viz.tiled import slope, tile_grid
from course_utils.widgets.tiled import tiles_explorer

setup(lang="en")
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. The online softmax
#
# Softmax needs the whole row: $\mathrm{softmax}(s)_j = e^{s_j} / \sum_k e^{s_k}$, and every careful
# implementation first subtracts the row's maximum $m$, so that no $e^{s}$ overflows. Suppose the
# row arrives in pieces. After each piece keep two numbers: $m$, the largest score so far, and
# $\ell = \sum e^{s - m}$ over the scores so far. When a new piece brings a larger maximum $m'$, the
# old sum was taken against the old $m$; every one of its terms is too large by a factor
# $e^{m' - m}$, so it shrinks by $e^{m - m'} \le 1$:
#
# $$m' = \max(m, \max_j s_j),\qquad \ell' = \ell\, e^{m - m'} + \sum_j e^{s_j - m'} .$$
#
# This is the **online softmax** of Milakov and Gimelshein (2018). Their single pass over the row
# computes the normaliser, $m$ and $\ell$ together, where the usual safe softmax reads the row once
# for its maximum and once more for its sum; writing the outputs $e^{s_j - m} / \ell$ still takes
# a pass of its own. So three passes become two (four memory accesses per element become three);
# the softmax becomes a single pass only when it is fused with what follows it, a top-$k$ in their
# paper, the product with $V$ in FlashAttention (section 2). At the end
# $\mathrm{softmax}(s)_j = e^{s_j - m} / \ell$ exactly, whatever the pieces were. A score
# of $-\infty$ (a masked key) adds $e^{-\infty} = 0$; a piece of nothing but $-\infty$ has
# $m = -\infty$, $\ell = 0$ and changes nothing, provided the code never computes
# $e^{-\infty - (-\infty)}$, which is NaN.
#
# Here is one row of 8 scores cut before positions 3 and 5, with two masked keys; `piece_state`
# takes each piece alone, the loop merges them, left to right and then right to left:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d03398bfa6"
# ## 1. 在线 softmax
#
# softmax 需要整行：$\mathrm{softmax}(s)_j = e^{s_j} / \sum_k e^{s_k}$，而稳妥的实现都会先减去这一行的最大值 $m$，以免某个 $e^{s}$ 溢出。假设这一行是分成若干片段陆续到来的。每处理完一段，保留两个数：$m$，到目前为止最大的分数；$\ell = \sum e^{s - m}$，对到目前为止的分数求和。当新的片段带来更大的最大值 $m'$ 时，旧的和是以旧的 $m$ 为基准算的，它的每一项都大了 $e^{m' - m}$ 倍，所以要乘上 $e^{m - m'} \le 1$ 缩小：
#
# $$m' = \max(m, \max_j s_j),\qquad \ell' = \ell\, e^{m - m'} + \sum_j e^{s_j - m'} .$$
#
# 这就是 Milakov 和 Gimelshein（2018）提出的**在线 softmax**。他们只扫一遍就同时算出归一化所需的 $m$ 和 $\ell$，而通常的安全 softmax 要为最大值读一遍整行，为求和再读一遍；不过，写出输出 $e^{s_j - m} / \ell$ 仍要单独再扫一遍。所以三遍变成了两遍（每个元素的内存访问从 4 次降到 3 次）；只有与后面的运算融合起来，softmax 才真正只需一遍：在他们的论文里是与 top-$k$ 融合，在 FlashAttention 里是与乘 $V$ 融合（第 2 节）。最后，无论这一行是怎样切开的，都精确地有 $\mathrm{softmax}(s)_j = e^{s_j - m} / \ell$。分数为 $-\infty$（被掩码遮住的键）的项贡献 $e^{-\infty} = 0$；一个全是 $-\infty$ 的片段有 $m = -\infty$、$\ell = 0$，什么都不改变，前提是代码永远不去算 $e^{-\infty - (-\infty)}$，那是 NaN。
#
# 下面是一行 8 个分数，在位置 3 和 5 之前切开，其中有两个键被遮住；`piece_state` 单独处理每一段，循环把它们合并起来，先从左到右，再从右到左：

# %%
row = torch.tensor([1.0, 3.0, float("-inf"), 0.5, 6.0, 2.0, float("-inf"), 5.5], dtype=torch.float64)
m, ell = torch.tensor(float("-inf"), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
for start, stop in ((0, 3), (3, 5), (5, 8)):
    piece = piece_state(row[start:stop])
    top = torch.maximum(m, piece.m)
    ell = ell * torch.exp(m - top) + piece.ell * torch.exp(piece.m - top)
    m = top
    # lang: en
    print(f"after scores {start}…{stop - 1}: m = {m.item():.2f}, ℓ = {ell.item():.4f}")
    # lang: zh
    print(f"处理完分数 {start}…{stop - 1}：m = {m.item():.2f}，ℓ = {ell.item():.4f}")
    # lang: end
from_pieces = torch.exp(row - m) / ell
m_back, ell_back = torch.tensor(float("-inf"), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
for start, stop in ((5, 8), (3, 5), (0, 3)):
    piece = piece_state(row[start:stop])
    top = torch.maximum(m_back, piece.m)
    ell_back = ell_back * torch.exp(m_back - top) + piece.ell * torch.exp(piece.m - top)
    m_back = top
# lang: en
claim("e^(s − m) / ℓ from the three pieces equals torch.softmax of the whole row (float64, to 1e-15)",
      torch.allclose(from_pieces, torch.softmax(row, -1), rtol=0, atol=1e-15))
claim("merged right to left, the pieces give the same m and ℓ (to 1e-14)",
      bool(m_back == m) and torch.allclose(ell_back, ell, rtol=0, atol=1e-14))
# lang: zh
claim("由三段得到的 e^(s − m) / ℓ 与对整行做 torch.softmax 的结果相同（float64，误差不超过 1e-15）",
      torch.allclose(from_pieces, torch.softmax(row, -1), rtol=0, atol=1e-15))
claim("从右到左合并，这三段给出同样的 m 和 ℓ（误差不超过 1e-14）",
      bool(m_back == m) and torch.allclose(ell_back, ell, rtol=0, atol=1e-14))
# lang: end

# %% [markdown] tags=["lang-en"]
# In exact arithmetic any cut, merged in any order, gives the same numbers. In floating point each
# cut and each order rounds in its own way, so the results agree to within rounding, not bit for
# bit: the claims above and below allow $10^{-14}$ and $10^{-15}$ in float64. `online_softmax(scores,
# cuts)` does the same for every row of a tensor; below, all 127 ways to cut a row of 8 scores, on rows with masked keys, a row whose first
# half is masked (a fully masked piece for many cuts) and a fully masked row, which gets zeros:

# %% [markdown] tags=["lang-zh"] en_hash="7ca5137c1d"
# 按精确算术，无论怎样切、按什么顺序合并，得到的数都相同。在浮点运算中，每种切法、每种顺序各有各的舍入，所以结果只在舍入误差之内一致，而不是逐位相同：上面和下面的结论在 float64 下分别允许 $10^{-14}$ 和 $10^{-15}$ 的误差。`online_softmax(scores, cuts)` 对张量的每一行做同样的事。下面试遍把 8 个分数切开的全部 127 种方式，用到的几行各有特点：一行有被掩码遮住的键；一行前一半全被遮住（许多切法下会切出整段被遮住的片段）；还有一个全遮蔽行，它得到的是全零：

# %%
import itertools

g = torch.Generator().manual_seed(0)
rows = torch.randn(4, 8, generator=g, dtype=torch.float64) * 3
rows[0, [1, 6]] = float("-inf")
rows[1, :4] = float("-inf")
# lang: en
rows[3] = float("-inf")  # a fully masked row
# lang: zh
rows[3] = float("-inf")  # 全遮蔽行
# lang: end
exact = torch.softmax(rows[:3], -1)
cut_sets = [c for n in range(1, 8) for c in itertools.combinations(range(1, 8), n)]
worst = max((online_softmax(rows, cuts)[:3] - exact).abs().max().item() for cuts in cut_sets)
all_zero = all(not online_softmax(rows, cuts)[3].any() for cuts in cut_sets)
# lang: en
claim(f"all {len(cut_sets)} ways to cut the rows give torch.softmax's weights (largest difference below 1e-15)",
      len(cut_sets) == 127 and worst < 1e-15)
claim("the fully masked row gets all-zero weights under every cut, never NaN", all_zero)
# lang: zh
claim(f"全部 {len(cut_sets)} 种切法都得到 torch.softmax 的权重（最大差值小于 1e-15）",
      len(cut_sets) == 127 and worst < 1e-15)
claim("全遮蔽行在每一种切法下得到的都是全零权重，从不是 NaN", all_zero)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Carrying the values along
#
# Attention needs $\mathrm{softmax}(s)\,V$, not the weights. Add a third quantity to the state, the
# **accumulator** $acc = \sum_j e^{s_j - m}\, v_j$ (a vector of $d_v$ features), rescaled exactly
# like $\ell$ when $m$ grows. Then the output row is $acc / \ell$, and the state of a row is
# $(m, \ell, acc)$. Two states of disjoint pieces of the same row merge in one step: both are
# brought to the larger maximum,
#
# $$m = \max(m_1, m_2),\quad \ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m},\quad
# acc = acc_1 e^{m_1 - m} + acc_2 e^{m_2 - m}.$$
#
# The merge does not care where the pieces come from: two threads, two machines, two halves of a
# long sequence. That is how a long sequence's keys are split across workers and merged at the end:
# Flash-Decoding splits a long KV cache across a GPU's cores this way, Ring Attention a sequence
# across devices.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5760202e6d"
# ### 把值也带上
#
# 注意力要的是 $\mathrm{softmax}(s)\,V$，而不是权重本身。给状态加上第三个量：**累加器**（accumulator）$acc = \sum_j e^{s_j - m}\, v_j$（一个有 $d_v$ 个特征的向量），$m$ 变大时，它和 $\ell$ 一样要重新缩放。于是输出行就是 $acc / \ell$，一行的状态是 $(m, \ell, acc)$。同一行中两个互不重叠的片段，它们的状态一步就能合并：两者都重新缩放到较大的那个最大值，
#
# $$m = \max(m_1, m_2),\quad \ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m},\quad
# acc = acc_1 e^{m_1 - m} + acc_2 e^{m_2 - m}.$$
#
# 合并并不关心片段从哪里来：两个线程、两台机器、长序列的前后两半都行。长序列的键就是这样分给多个工作单元，最后再合并的：Flash-Decoding 就这样把很长的 KV 缓存分给 GPU 的各个计算单元，Ring Attention 则这样把一条序列分到多台设备上。

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: merge two partial softmaxes
#
# Write `my_merge_states(m1, ell1, acc1, m2, ell2, acc2)`: the state of two disjoint pieces of the
# same rows, from the state of each. `m1`, `ell1`, `m2`, `ell2` have shape $(B, L)$ (one number per
# row), `acc1`, `acc2` shape $(B, L, d_v)$. Return `(m, ell, acc)` with `m = max(m1, m2)` and both
# pieces rescaled to it, as in the formula above, in the dtype of the inputs. A piece may be fully
# masked: its `m` is $-\infty$, its `ell` and `acc` are 0. Where both pieces of a row are, the result
# is `m` $= -\infty$, `ell` $= 0$, `acc` $= 0$, never NaN. The check compares values only, not
# gradients, and refuses the course's `tiled.merge_states`, which is this exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="4e51796e7c"
# ### 练习 1：合并两个部分 softmax
#
# 写出 `my_merge_states(m1, ell1, acc1, m2, ell2, acc2)`：由同一批行中两个互不重叠的片段各自的状态，求出它们合起来的状态。`m1`、`ell1`、`m2`、`ell2` 的形状为 $(B, L)$（每行一个数），`acc1`、`acc2` 的形状为 $(B, L, d_v)$。返回 `(m, ell, acc)`，其中 `m = max(m1, m2)`，两段都按上面的公式重新缩放到它，dtype 与输入相同。某一段可能整段被掩码遮住：它的 `m` 是 $-\infty$，`ell` 和 `acc` 都是 0。如果一行的两段都是这样，结果应为 `m` $= -\infty$、`ell` $= 0$、`acc` $= 0$，绝不能是 NaN。检查只比较数值，不比较梯度；检查不接受课程自带的 `tiled.merge_states`，它正是本题的答案。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="08.merge_states"
def my_merge_states(m1, ell1, acc1, m2, ell2, acc2):
    # lang: en
    """Merge the online-softmax states of two disjoint pieces of the same rows.

    m1, ell1, m2, ell2: (B, L); acc1, acc2: (B, L, d_v). A fully masked piece has
    m = -inf, ell = 0, acc = 0.
    Returns (m, ell, acc): m = max(m1, m2), and with a_i = exp(m_i - m),
    ell = ell1 * a_1 + ell2 * a_2, acc = acc1 * a_1 + acc2 * a_2
    (m = -inf, ell = 0, acc = 0 where both pieces are fully masked, never NaN).
    """
    # lang: zh
    """合并同一批行中两个互不重叠片段的在线 softmax 状态。

    m1、ell1、m2、ell2：(B, L)；acc1、acc2：(B, L, d_v)。整段被遮住的片段
    m = -inf、ell = 0、acc = 0。
    返回 (m, ell, acc)：m = max(m1, m2)；记 a_i = exp(m_i - m)，则
    ell = ell1 * a_1 + ell2 * a_2，acc = acc1 * a_1 + acc2 * a_2
    （两段都被整段遮住时 m = -inf、ell = 0、acc = 0，绝不是 NaN）。
    """
    # lang: end
    ### BEGIN SOLUTION
    m = torch.maximum(m1, m2)
    # lang: en
    finite = torch.where(m == float("-inf"), torch.zeros_like(m), m)  # never -inf - (-inf)
    # lang: zh
    finite = torch.where(m == float("-inf"), torch.zeros_like(m), m)  # 避免出现 -inf - (-inf)
    # lang: end
    a1, a2 = torch.exp(m1 - finite), torch.exp(m2 - finite)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]
    ### END SOLUTION


# %%
from course_utils import check
check("08.merge_states", my_merge_states)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Tiling attention
#
# Now the whole of attention. Cut the queries into blocks of `block_q` rows and the keys and values
# into blocks of `block_k`. For query block $i$, start from the empty state ($m = -\infty$,
# $\ell = 0$, $acc = 0$) and visit the key blocks one after the other: compute one **tile** of
# scores $S = Q_i K_j^\top / \sqrt{d}$, of shape $(b_q, b_k)$, update the state of its rows with
# it, and throw it away. After the last key block, $O_i = acc / \ell$. The only scores that ever
# exist are one tile's, and the state is $O(b_q \cdot d_v)$ per block. The picture shows the
# causal case of section 3, where the tiles above the diagonal are not even computed:
#
# ![Causal tiled attention: a grid of query blocks by key/value blocks, those below the diagonal computed, those on it masked, those above it skipped; for each query block a running max, a running sum and an accumulator, updated tile by tile, then the output and the log-sum-exp](../../images/08_tiling_en.svg)
#
# The loop order, query blocks outside and key blocks inside, so that a query block's state stays in
# fast memory until its output is written once, and the single division by $\ell$ at the end instead
# of after every tile, are FlashAttention-2's (Dao, 2023). FlashAttention-1 looped over the key
# blocks outside and kept each output block normalised, reading it back and rescaling it at every
# step.
#
# `tiled_attention(query, key, value, block_q=…, block_k=…)` is this loop, for any leading axes
# $(B, H)$; it returns the output and, per row, the **log-sum-exp**
# $\mathrm{lse} = m + \log \ell = \log \sum_j e^{s_j}$, which section 4 puts to use. Any block sizes
# give `F.scaled_dot_product_attention`'s output; gradients flow through the loop by autograd:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d7e573b150"
# ## 2. 把注意力分块
#
# 现在来做完整的注意力。把查询切成每块 `block_q` 行，把键和值切成每块 `block_k` 行。对第 $i$ 个查询块，从空状态（$m = -\infty$、$\ell = 0$、$acc = 0$）出发，依次处理各个键块：算出分数的一个**分块**（tile）$S = Q_i K_j^\top / \sqrt{d}$，形状为 $(b_q, b_k)$，用它更新这些行的状态，然后丢掉它。处理完最后一个键块后，$O_i = acc / \ell$。任何时候存在的分数都只有一个分块，每个查询块的状态是 $O(b_q \cdot d_v)$。下图画的是第 3 节的因果情形，对角线以上的分块根本不算：
#
# ![因果分块注意力：查询块 × 键/值块的分块网格，对角线以下的分块直接计算，对角线上的分块加掩码，对角线以上的分块跳过；每个查询块保留运行最大值、累计和与累加器，逐块更新，最后得到输出和 log-sum-exp](../../images/08_tiling_zh.svg)
#
# 这种循环顺序来自 FlashAttention-2（Dao，2023）：外层遍历查询块，内层遍历键/值块，于是一个查询块的状态一直留在片上存储里，直到它的输出一次写出；最后也只除一次 $\ell$，而不是每算完一个分块就除一次。FlashAttention-1 则是外层遍历键/值块，并让每个输出块始终保持归一化，每一步都要把它读回来重新缩放。
#
# `tiled_attention(query, key, value, block_q=…, block_k=…)` 就是这个循环，前导维度 $(B, H)$ 任意；它返回输出，以及每一行的 **log-sum-exp** $\mathrm{lse} = m + \log \ell = \log \sum_j e^{s_j}$，第 4 节会用到它。无论块的大小如何，输出都与 `F.scaled_dot_product_attention` 相同；梯度由 autograd 沿这个循环反向传回：

# %%
g = torch.Generator().manual_seed(1)
q, k, v = (torch.randn(2, 3, 37, 16, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
# lang: en
probe = torch.randn(2, 3, 37, 16, generator=g, dtype=torch.float64)  # a random weighted sum to differentiate
# lang: zh
probe = torch.randn(2, 3, 37, 16, generator=g, dtype=torch.float64)  # 对输出做随机加权求和，再求导
# lang: end
expected = F.scaled_dot_product_attention(q, k, v)
expected_grads = torch.autograd.grad((expected * probe).sum(), (q, k, v))
all_equal = True
for block_q, block_k in ((2, 3), (5, 7), (16, 16), (64, 64)):
    output, lse = tiled_attention(q, k, v, block_q=block_q, block_k=block_k)
    grads = torch.autograd.grad((output * probe).sum(), (q, k, v))
    all_equal &= torch.allclose(output, expected, rtol=0, atol=1e-12)
    all_equal &= all(torch.allclose(a, b, rtol=0, atol=1e-12) for a, b in zip(grads, expected_grads))
scores = q @ k.transpose(-2, -1) / math.sqrt(16)
# lang: en
claim("with blocks of 2×3, 5×7, 16×16 and 64×64, the output and the gradients for Q, K and V equal "
      "F.scaled_dot_product_attention's (float64, to 1e-12)", all_equal)
claim("lse = m + log ℓ is torch.logsumexp of each row of scores", torch.allclose(lse, torch.logsumexp(scores, -1)))
# lang: zh
claim("分块为 2×3、5×7、16×16 和 64×64 时，输出以及 Q、K、V 的梯度都与 F.scaled_dot_product_attention 相同"
      "（float64，误差不超过 1e-12）", all_equal)
claim("lse = m + log ℓ 等于对每一行分数做 torch.logsumexp", torch.allclose(lse, torch.logsumexp(scores, -1)))
# lang: end

# %% [markdown] tags=["lang-en"]
# Step through it. The explorer runs the tiled forward of one head with 8 queries and 8 keys
# ($d = 4$, $d_v = 2$) one tile at a time: the grid shows the tiles done (solid), the tile of this
# step (red) and the ones still to come (pale); the table lists each query's $m$, $\ell$ and its
# output row so far beside the exact one. Watch a row's output jump when a tile brings a larger
# maximum, and settle on the exact value once its last tile is done:

# %% [markdown] tags=["lang-zh"] en_hash="6f17e70d98"
# 一步一步地看。下面的探索器对一个头（8 个查询、8 个键，$d = 4$，$d_v = 2$）一次一个分块地运行分块前向计算：网格中实心的是已完成的分块，红框是这一步的分块，浅色的是尚未计算的分块；表中列出每个查询的 $m$、$\ell$，以及它目前的输出行和精确输出。注意：某个分块带来更大的最大值时，这一行的输出会跳一下；等它的最后一个分块完成后，输出就停在精确值上：

# %% tags=["nbval-ignore-output"]
tiles_explorer(block=2, causal=False)

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: one tiled forward
#
# Write `my_tiled_attention(query, key, value, block_q, block_k)` for query $(B, L_q, d)$, key
# $(B, L_k, d)$ and value $(B, L_k, d_v)$: loop over the blocks of `block_q` queries and, for each,
# over the blocks of `block_k` keys and values (the last block of each may be shorter), keep
# $(m, \ell, acc)$ per query, and return `(output, lse)`: the output $(B, L_q, d_v)$, equal to
# softmax$(QK^\top/\sqrt{d})V$, and the log-sum-exp of every row of scaled scores, $(B, L_q)$, in the
# dtype of the inputs. Never build more scores than one $(b_q, b_k)$ tile. The check compares
# values and gradients (for query, key and value), then the largest tensor your function makes: on
# a case with long keys, all the scores at once, or a block of queries against every key, is more
# than it allows. It refuses `F.scaled_dot_product_attention`,
# `torch.softmax`, `F.softmax`, `Tensor.softmax`, `torch.logsumexp` and `Tensor.logsumexp`, and the
# course's `tiled.tiled_attention`, `tiled.materialised_attention` and
# `attention.scaled_dot_product_attention`.

# %% [markdown] tags=["lang-zh"] en_hash="a31e85baf7"
# ### 练习 2：一次分块前向计算
#
# 写出 `my_tiled_attention(query, key, value, block_q, block_k)`，其中 query 形状为 $(B, L_q, d)$，key 为 $(B, L_k, d)$，value 为 $(B, L_k, d_v)$：外层遍历由 `block_q` 个查询组成的查询块，内层遍历由 `block_k` 个键和值组成的键/值块（两者的最后一块都可以短一些），为每个查询维护 $(m, \ell, acc)$，返回 `(output, lse)`：输出形状为 $(B, L_q, d_v)$，等于 softmax$(QK^\top/\sqrt{d})V$；以及每一行缩放后分数的 log-sum-exp，形状为 $(B, L_q)$；dtype 与输入相同。任何时候构造的分数都不要超过一个 $(b_q, b_k)$ 分块。检查会比较数值和梯度（对 query、key 和 value），再看你的函数构造的最大张量：在键很长的测试用例上，一次算出全部分数，或者让一个查询块一次对上所有的键，都会超出检查允许的大小。检查不接受 `F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp` 和 `Tensor.logsumexp`，也不接受课程自带的 `tiled.tiled_attention`、`tiled.materialised_attention` 和 `attention.scaled_dot_product_attention`。

# %% tags=["exercise"] exercise="08.tiled_forward"
def my_tiled_attention(query, key, value, block_q, block_k):
    # lang: en
    """Attention one (block_q x block_k) tile of scores at a time.

    query: (B, L_q, d); key: (B, L_k, d); value: (B, L_k, d_v).
    block_q, block_k: queries and keys per block (the last block may be shorter).
    Returns (output, lse): output (B, L_q, d_v) = softmax(Q K^T / sqrt(d)) V;
    lse (B, L_q) = log of the sum of exp(scaled score) over each row.
    """
    # lang: zh
    """一次只处理一个 (block_q x block_k) 分数分块的注意力。

    query：(B, L_q, d)；key：(B, L_k, d)；value：(B, L_k, d_v)。
    block_q、block_k：每个块中查询和键的个数（最后一块可以短一些）。
    返回 (output, lse)：output (B, L_q, d_v) = softmax(Q K^T / sqrt(d)) V；
    lse (B, L_q) = 每一行缩放后分数的 exp 之和的对数。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[-1]
    outputs, lses = [], []
    for i0 in range(0, L_q, block_q):
        q = query[:, i0:i0 + block_q] / math.sqrt(d)  # (B, b_q, d)
        b_q = q.shape[1]
        m = torch.full((B, b_q), float("-inf"), dtype=query.dtype)
        ell = torch.zeros(B, b_q, dtype=query.dtype)
        acc = torch.zeros(B, b_q, d_v, dtype=query.dtype)
        for j0 in range(0, L_k, block_k):
            # lang: en
            s = q @ key[:, j0:j0 + block_k].transpose(1, 2)  # (B, b_q, b_k): one tile of scores
            # lang: zh
            s = q @ key[:, j0:j0 + block_k].transpose(1, 2)  # (B, b_q, b_k)：一个分数分块
            # lang: end
            m_new = torch.maximum(m, s.amax(-1))
            # lang: en
            shrink = torch.exp(m - m_new)  # exp(m_old - m_new) <= 1: rescales what was summed so far
            # lang: zh
            shrink = torch.exp(m - m_new)  # exp(m_old - m_new) <= 1：把此前的和重新缩放
            # lang: end
            p = torch.exp(s - m_new[..., None])
            ell = ell * shrink + p.sum(-1)
            acc = acc * shrink[..., None] + p @ value[:, j0:j0 + block_k]
            m = m_new
        outputs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    return torch.cat(outputs, dim=1), torch.cat(lses, dim=1)
    ### END SOLUTION


# %%
from course_utils import check
check("08.tiled_forward", my_tiled_attention)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### What it saves: peak memory as L grows
#
# `peak_bytes(function, …)` runs a function and counts, operator by operator, the bytes of the
# tensors it creates (its result included), and the most of them alive at any one moment: the
# **peak memory** of the call, the same count on every machine (scratch memory that one operator
# takes for itself, such as a BLAS library's workspace, is not seen). First, what code that forms
# the whole matrix holds at its peak, in units of one $(1, 2, L, L)$ float32 matrix ($L = 1024$,
# 2 heads of $d = 64$, no gradients): the course's `materialised_attention`, the textbook line
# `softmax(q @ kᵀ / √d) @ v`, PyTorch's own math kernel, and the textbook line with its softmax
# written in place:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5842dee9c1"
# ### 它省下了什么：随 L 增长的峰值内存
#
# `peak_bytes(function, …)` 运行一个函数，逐个算子统计它创建的张量（包括它的返回值）所占的字节数，以及任一时刻同时存活的最大字节数：也就是这次调用的**峰值内存**（peak memory），在任何机器上数出来都一样（单个算子内部自己占用的临时内存，例如 BLAS 库的工作区，不在统计之内）。先看建出整个矩阵的代码在峰值时占着多少，以一个 $(1, 2, L, L)$ 的 float32 矩阵为单位（$L = 1024$，2 个 $d = 64$ 的头，不求梯度）：课程的 `materialised_attention`、教科书式的一行 `softmax(q @ kᵀ / √d) @ v`、PyTorch 自己的 math 核函数，以及把 softmax 改成原地计算的那一行：

# %%
L = 1024
g = torch.Generator().manual_seed(7)
q, k, v = (torch.randn(1, 2, L, 64, generator=g) for _ in range(3))
# lang: en
matrix_bytes = 2 * L * L * 4  # one (1, 2, L, L) float32 matrix
# lang: zh
matrix_bytes = 2 * L * L * 4  # 一个 (1, 2, L, L) 的 float32 矩阵
# lang: end


def plain_attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def in_place_attention(q, k, v):
    # lang: en
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (B, H, L, L): scale q, not the product
    scores.sub_(scores.amax(-1, keepdim=True)).exp_()  # written into the scores: no second matrix
    # lang: zh
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (B, H, L, L)：缩放 q，而不是缩放乘积
    scores.sub_(scores.amax(-1, keepdim=True)).exp_()  # 写回分数本身：不产生第二个矩阵
    # lang: end
    return scores.div_(scores.sum(-1, keepdim=True)) @ v


with torch.no_grad():
    held = {
        "materialised_attention": peak_bytes(materialised_attention, q, k, v)[1],
        "plain_attention": peak_bytes(plain_attention, q, k, v)[1],
        "math": peak_bytes(torch.ops.aten._scaled_dot_product_attention_math, q, k, v)[1],
        "in_place_attention": peak_bytes(in_place_attention, q, k, v)[1],
    }
    same = torch.allclose(in_place_attention(q, k, v), F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)
shares = {name: counted / matrix_bytes for name, counted in held.items()}
# lang: en
names = {"plain_attention": "softmax(q @ kᵀ / √d) @ v", "math": "PyTorch's math kernel",
         "in_place_attention": "the same, softmax in place"}
# lang: zh
names = {"plain_attention": "softmax(q @ kᵀ / √d) @ v", "math": "PyTorch 的 math 核函数",
         "in_place_attention": "同一行，softmax 原地计算"}
# lang: end
for name, share in shares.items():
    # lang: en
    print(f"{names.get(name, name):28} {share:.2f} matrices")
    # lang: zh
    print(f"{names.get(name, name):28} {share:.2f} 个矩阵")
    # lang: end
# lang: en
claim(f"at its peak materialised_attention holds {shares['materialised_attention']:.2f} L×L matrices, the textbook line "
      f"{shares['plain_attention']:.2f}, PyTorch's math kernel {shares['math']:.2f}, and the textbook line "
      f"with its softmax in place {shares['in_place_attention']:.2f} (the last 0.06: the output, L·d numbers)",
      round(shares["materialised_attention"], 2) == 3.00 and shares["plain_attention"] == 2
      and round(shares["math"], 2) == 2.06 and round(shares["in_place_attention"], 2) == 1.06)
claim("the in-place version gives F.scaled_dot_product_attention's output (float32, to 1e-5)", same)
# lang: zh
claim(f"峰值时，materialised_attention 占用 {shares['materialised_attention']:.2f} 个 L×L 矩阵，教科书式的那一行占 "
      f"{shares['plain_attention']:.2f} 个，PyTorch 的 math 核函数占 {shares['math']:.2f} 个，"
      f"softmax 原地计算的那一行占 {shares['in_place_attention']:.2f} 个（最后的 0.06 是输出，L·d 个数）",
      round(shares["materialised_attention"], 2) == 3.00 and shares["plain_attention"] == 2
      and round(shares["math"], 2) == 2.06 and round(shares["in_place_attention"], 2) == 1.06)
claim("原地计算的版本与 F.scaled_dot_product_attention 的输出相同（float32，误差不超过 1e-5）", same)
# lang: end

# %% [markdown] tags=["lang-en"]
# Where the copies come from. `materialised_attention` writes `q @ kᵀ * scale`: the product and its
# scaled copy are both alive until the multiplication returns (two matrices); it then subtracts the
# log-sum-exp, and `scores − lse` is a third matrix beside the scores until `exp` turns it into the
# weights. Scaling $q$ first (an $L \times d$ tensor, not an $L \times L$ one) and leaving
# subtract, exponentiate and divide to `torch.softmax`, one operator, leaves two: the scores and the
# weights, each alive while the other is computed from it. PyTorch's math kernel holds the same two
# (and its output). Only in-place operators get down to one: `sub_`, `exp_` and `div_` write into
# the scores themselves, which autograd would refuse (the backward of `exp` needs its output, which
# `div_` overwrites). One
# matrix is the floor for any code that forms the scores at all: tiling removes the floor itself.
#
# So the fair baseline is the textbook line, not `materialised_attention`. Against it, as $L$ grows
# (8 heads of $d = 64$, float32, no gradients, tiles of 64 × 64):

# %% [markdown] tags=["lang-zh"] en_hash="c9c08c916d"
# 这些副本是从哪里来的？`materialised_attention` 写的是 `q @ kᵀ * scale`：乘积和它缩放后的副本要一直共存到乘法返回（两个矩阵）；接着它减去 log-sum-exp，`scores − lse` 在 `exp` 把它变成权重之前，是与分数并存的第三个矩阵。先缩放 $q$（它是 $L \times d$ 的张量，而不是 $L \times L$ 的），再把减、取指数、除这几步交给 `torch.softmax` 这一个算子，就只剩两个：分数和权重，由其中一个算出另一个时，两者同时存活。PyTorch 的 math 核函数占着的也是这两个（外加输出）。只有原地算子才能降到一个：`sub_`、`exp_` 和 `div_` 直接写进分数本身，而 autograd 不允许这样做（`exp` 的反向传播要用到它的输出，而 `div_` 把输出改写了）。只要代码建出了分数，一个矩阵就是下限；分块去掉的正是这个下限本身。
#
# 所以公平的比较对象是教科书式的那一行，而不是 `materialised_attention`。下面让 $L$ 增长，与它比较（8 个 $d = 64$ 的头，float32，不求梯度，64 × 64 的分块）：

# %%
lengths = [256, 512, 1024, 2048]
tiled_bytes, plain_bytes = [], []
with torch.no_grad():
    for L in lengths:
        g = torch.Generator().manual_seed(L)
        q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))
        (output, _), counted = peak_bytes(tiled_attention, q, k, v, block_q=64, block_k=64)
        tiled_bytes.append(counted)
        plain_bytes.append(peak_bytes(plain_attention, q, k, v)[1])
        # lang: en
        print(f"L = {L:4}: tiled {format_bytes(tiled_bytes[-1]):>8}, textbook line {format_bytes(plain_bytes[-1]):>8}")
        # lang: zh
        print(f"L = {L:4}：分块版 {format_bytes(tiled_bytes[-1]):>8}，教科书式的一行 {format_bytes(plain_bytes[-1]):>8}")
        # lang: end
same = torch.allclose(output, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)
tiled_slope, plain_slope = slope(lengths, tiled_bytes), slope(lengths, plain_bytes)
fig, ax = plt.subplots(figsize=(6.0, 3.8))
# lang: en
cost_lines(ax, lengths, {f"tiled (64 × 64 tiles), slope {tiled_slope:.2f}": tiled_bytes,
                         f"softmax(q @ kᵀ / √d) @ v, slope {plain_slope:.2f}": plain_bytes},
           "sequence length L", "peak bytes of the tensors created", in_bytes=True)
# lang: zh
cost_lines(ax, lengths, {f"分块版（64 × 64 分块），斜率 {tiled_slope:.2f}": tiled_bytes,
                         f"softmax(q @ kᵀ / √d) @ v，斜率 {plain_slope:.2f}": plain_bytes},
           "序列长度 L", "所建张量的峰值字节数", in_bytes=True)
# lang: end
plt.show()
# lang: en
claim("at L = 2048 the tiled output equals F.scaled_dot_product_attention's (float32, to 1e-5)", same)
claim(f"on log-log axes the tiled version's memory grows with slope {tiled_slope:.2f} (≈ 1: like L), the textbook "
      f"line's with slope {plain_slope:.2f} (≈ 2: like L²)",
      0.8 <= tiled_slope <= 1.1 and 1.9 <= plain_slope <= 2.1)
claim(f"at L = 2048 the tiled version needs 1/{plain_bytes[-1] / tiled_bytes[-1]:.0f} of the textbook line's memory",
      25 < plain_bytes[-1] / tiled_bytes[-1] < 35)
# lang: zh
claim("L = 2048 时，分块版的输出与 F.scaled_dot_product_attention 相同（float32，误差不超过 1e-5）", same)
claim(f"在双对数坐标上，分块版的内存以斜率 {tiled_slope:.2f} 增长（≈ 1：与 L 成正比），教科书式的那一行以斜率 "
      f"{plain_slope:.2f} 增长（≈ 2：与 L² 成正比）",
      0.8 <= tiled_slope <= 1.1 and 1.9 <= plain_slope <= 2.1)
claim(f"L = 2048 时，分块版只需教科书式那一行内存的 1/{plain_bytes[-1] / tiled_bytes[-1]:.0f}",
      25 < plain_bytes[-1] / tiled_bytes[-1] < 35)
# lang: end

# %% [markdown] tags=["lang-en"]
# And time? Our tiles are a Python loop of small matrix products, which should lose to one large
# product. The times below (one thread, $L = 2048$, 4 heads) change from run to run and from machine
# to machine; the claim after them does not:

# %% [markdown] tags=["lang-zh"] en_hash="5587bb61e5"
# 那么时间呢？我们的分块是 Python 循环里的一串小矩阵乘法，按理说应该比不过一次大的矩阵乘法。下面的耗时（单线程，$L = 2048$，4 个头）每次运行都不一样，也因机器而异；后面的结论则不会变：

# %% tags=["nbval-ignore-output"]
def milliseconds(function, repeat=3):
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return 1000 * best


q4, k4, v4 = q[:, :4], k[:, :4], v[:, :4]  # (1, 4, 2048, 64)
runs = {
    "tiled_attention (256 × 256)": lambda: tiled_attention(q4, k4, v4, block_q=256, block_k=256),
    "softmax(q @ kᵀ / √d) @ v": lambda: plain_attention(q4, k4, v4),
    "materialised_attention": lambda: materialised_attention(q4, k4, v4),
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q4, k4, v4),
}
# lang: en
times = {name: math.inf for name in runs}  # best of two, the versions taking turns
# lang: zh
times = {name: math.inf for name in runs}  # 两次中最快的一次，各版本轮流运行
# lang: end
threads = torch.get_num_threads()
# lang: en
torch.set_num_threads(1)  # one thread, however many the notebook has: the times compare code, not threads
# lang: zh
torch.set_num_threads(1)  # 单线程，无论笔记本有几个线程：比较的是代码，而不是线程
# lang: end
try:
    with torch.no_grad():
        for _ in range(2):
            for name, run in runs.items():
                times[name] = min(times[name], milliseconds(run, repeat=1))
finally:
    torch.set_num_threads(threads)
for name, ms in times.items():
    # lang: en
    print(f"{name:32} {ms:8.1f} ms")
    # lang: zh
    print(f"{name:32} {ms:8.1f} 毫秒")
    # lang: end

# %%
# lang: en
claim("here the Python loop over 256 × 256 tiles takes less time than materialised_attention",
      times["tiled_attention (256 × 256)"] < times["materialised_attention"])
# lang: zh
claim("在这里，对 256 × 256 分块的 Python 循环比 materialised_attention 用时更少",
      times["tiled_attention (256 × 256)"] < times["materialised_attention"])
# lang: end

# %% [markdown] tags=["lang-en"]
# The loop wins, although it runs the same multiply-adds and pays Python's overhead on every tile.
# The cost it avoids is memory traffic: at $L = 2048$ one $(1, 4, L, L)$ float32 matrix is 67 MB,
# more than a CPU's caches usually hold, so every extra pass over it (scale it, subtract the
# log-sum-exp, exponentiate it) goes out to main memory and back, while a 256 × 256 tile of 4 heads
# (1 MB) stays in the caches from its product with $K$ to its product with $V$. On this machine the
# textbook line, with its one pass fewer, usually sits between the two. That is the FlashAttention
# argument in small.
#
# On a GPU it is the whole argument, and it is about memory *traffic*, not size. The plain version
# writes the $L \times L$ scores to the GPU's main memory (HBM), reads them back for the softmax,
# writes the weights and reads them again for the product with $V$. The tiled kernel keeps each tile
# in the chip's small, fast on-chip memory (SRAM) and touches HBM only to read $Q$, $K$ and $V$ ($K$
# and $V$ once per query block) and to write $O$ and the log-sum-exp: $\Theta(L^2 d^2 / M)$ accesses
# for an SRAM of $M$ numbers, instead of $\Theta(L d + L^2)$ (Dao et al., 2022, Theorem 2). That is
# fewer because $L^2 d^2 / M = L^2 \cdot (d^2 / M)$ and $d^2$ is many times smaller than $M$: heads
# have $d = 64$ to $128$, so $d^2$ is 4,096 to 16,384 numbers (8 to 32 KB in a 16-bit float type),
# against an SRAM of about 100 KB (the paper's figures). A compiled kernel also has no Python loop.
#
# Our tiles on a GPU keep the memory and lose the speed. Each tile is a few small kernels launched
# from a Python loop, so the loop pays a launch thousands of times, while F.sdpa's compiled kernel
# does the whole job in one: on an H200 at $L = 16384$ with tiles of 256 × 256, 1.0 s against
# 16 ms, some 60 times slower. The memory carries over: the tiles' peak stayed near F.sdpa's
# (68 MiB against 32 MiB) where the materialised version needed 24 GiB. Speed on a GPU is the
# kernel's, which lesson 09 writes. If this runtime has a GPU, the next cell runs the four versions
# above there, their time and the memory each call adds; the one after shows the course's benchmark
# as it ran on a GPU.

# %% [markdown] tags=["lang-zh"] en_hash="1c1e7d78fd"
# 尽管做的乘加次数相同，还要为每个分块付出 Python 的开销，循环还是赢了。它省下的是访存搬运量：$L = 2048$ 时，一个 $(1, 4, L, L)$ 的 float32 矩阵有 67 MB，通常超出 CPU 缓存的容量，所以对它多扫的每一遍（缩放、减去 log-sum-exp、取指数）都要到主存走一个来回；而 4 个头的 256 × 256 分块（1 MB）从与 $K$ 相乘到与 $V$ 相乘，一直留在缓存里。在这台机器上，少扫一遍的教科书式那一行通常介于两者之间。这就是缩小版的 FlashAttention 论证。
#
# 在 GPU 上，这就是论证的全部，而它说的是内存的**搬运量**，不是占用量。朴素的做法把 $L \times L$ 的分数写进 GPU 的显存（HBM），为了算 softmax 再读回来，写出权重，为了与 $V$ 相乘又读一遍。分块核函数则把每个分块留在芯片上又小又快的片上存储（SRAM）里，只在读 $Q$、$K$、$V$（每个查询块把 $K$ 和 $V$ 读一遍）和写 $O$ 及 log-sum-exp 时才访问 HBM：对于能放下 $M$ 个数的 SRAM，访问次数是 $\Theta(L^2 d^2 / M)$，而不是 $\Theta(L d + L^2)$（Dao 等，2022，定理 2）。前者之所以更少，是因为 $L^2 d^2 / M = L^2 \cdot (d^2 / M)$，而 $d^2$ 比 $M$ 小很多倍：头的维度 $d$ 为 64 到 128，$d^2$ 就是 4,096 到 16,384 个数（16 位浮点类型下为 8 到 32 KB），而 SRAM 约有 100 KB（论文给出的数字）。编译好的核函数也没有 Python 循环。
#
# 我们的分块放到 GPU 上，内存的优势保住了，速度却输了。每个分块都是从 Python 循环里启动的几个小核函数，循环要付上千次启动开销，而 F.sdpa 编译好的核函数一次启动就做完全部工作：在一块 H200 上，$L = 16384$、分块为 256 × 256 时，1.0 秒对 16 毫秒，慢了约 60 倍。内存的结论依然成立：分块版的峰值与 F.sdpa 相近（68 MiB 对 32 MiB），而完整矩阵版需要 24 GiB。GPU 上的速度要靠核函数本身，这是第 09 课要写的。如果当前运行环境有 GPU，下一个单元会在 GPU 上运行上面的四个版本，给出每次调用的耗时和新增的内存；再下一个单元展示课程的基准测试在一块 GPU 上的结果。

# %% tags=["nbval-ignore-output"]
def size(n):
    return "–" if n is None else format_bytes(n)


def gpu_runs(device):
    q_gpu, k_gpu, v_gpu = (t.to(device) for t in (q4, k4, v4))
    versions = {
        "tiled_attention (256 × 256)": lambda: tiled_attention(q_gpu, k_gpu, v_gpu, block_q=256, block_k=256),
        "softmax(q @ kᵀ / √d) @ v": lambda: plain_attention(q_gpu, k_gpu, v_gpu),
        "materialised_attention": lambda: materialised_attention(q_gpu, k_gpu, v_gpu),
        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q_gpu, k_gpu, v_gpu),
    }
    with torch.no_grad():
        for name, run in versions.items():
            # lang: en
            # the bytes torch's allocator adds at the call's peak, its output included; then its time
            # lang: zh
            # 调用在峰值时让 torch 的分配器多占的字节数（包括输出）；然后是耗时
            # lang: end
            _, added = measured.cuda_peak_bytes(run, device)
            ms = measured.milliseconds(run, device)
            # lang: en
            print(f"{name:32} {ms:8.2f} ms {size(added):>10}")
            # lang: zh
            print(f"{name:32} {ms:8.2f} 毫秒 {size(added):>10}")
            # lang: end


measured.on_gpu(gpu_runs)

# %%
def rounded(t):
    return "–" if t is None else f"{t:.2f}"


# lang: en
measured.table("tiled", {
    "L": lambda row: row["L"],
    "tiled (ms)": lambda row: rounded(row["tiled_ms"]),
    "F.sdpa (ms)": lambda row: rounded(row["sdpa_ms"]),
    "tiled / F.sdpa": lambda row: measured.ratio(row["tiled_ms"], row["sdpa_ms"], digits=0),
    "tiled memory": lambda row: size(row["tiled_bytes"]),
    "F.sdpa memory": lambda row: size(row["sdpa_bytes"]),
    "materialised memory": lambda row: size(row["materialised_bytes"]),
})
# lang: zh
measured.table("tiled", {
    "L": lambda row: row["L"],
    "分块（毫秒）": lambda row: rounded(row["tiled_ms"]),
    "F.sdpa（毫秒）": lambda row: rounded(row["sdpa_ms"]),
    "分块 / F.sdpa": lambda row: measured.ratio(row["tiled_ms"], row["sdpa_ms"], digits=0),
    "分块的内存": lambda row: size(row["tiled_bytes"]),
    "F.sdpa 的内存": lambda row: size(row["sdpa_bytes"]),
    "完整矩阵版的内存": lambda row: size(row["materialised_bytes"]),
})
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Causal and block-sparse tiles
#
# With a causal mask, query $i$ sees keys $j \le i$. A tile whose first key comes after its last
# query ($j_0 > i_1 - 1$) is hidden entirely: the tiled loop can **skip** it, not compute it and
# mask it. A tile that lies entirely below the diagonal needs no mask at all. Only the tiles the
# diagonal cuts through need one. `tile_kinds` says which is which. Why about half: the visible
# scores are $L(L + 1)/2$ of the $L^2$, and the tiles round that triangle up to whole tiles, so with
# $n$ blocks a side causal attention computes $n(n + 1)/2$ of the $n^2$ tiles, a share of
# $(n + 1)/(2n)$ that tends to one half as $n$ grows. The same holds for any mask that
# hides whole tiles: a sliding window (lesson 07) keeps a band of tiles along the diagonal, and a
# block mask, such as two independent documents packed into one sequence, keeps whole blocks. That
# is the bridge to lesson 05's question, which scores are worth computing: here the answer is
# given by the mask, tile by tile, and the result stays exact. (The first FlashAttention paper
# already has this block-sparse variant.)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f2f3d2b92b"
# ## 3. 因果分块与块稀疏分块
#
# 有因果掩码时，查询 $i$ 只能看到 $j \le i$ 的键。如果一个分块的第一个键位于它最后一个查询之后（$j_0 > i_1 - 1$），它就被整块遮住了：分块循环可以直接**跳过**它，而不是先算出来再遮住。完全位于对角线以下的分块根本不需要掩码，只有被对角线穿过的分块才需要。`tile_kinds` 会告诉我们每个分块属于哪一类。为什么大约省一半？可见的分数是 $L^2$ 个中的 $L(L + 1)/2$ 个，而分块把这个三角形向上取整到整块，所以每边有 $n$ 个块时，因果注意力算的是 $n^2$ 个分块中的 $n(n + 1)/2$ 个，占比 $(n + 1)/(2n)$，$n$ 越大越接近一半。任何能遮住整个分块的掩码都是如此：滑动窗口（第 07 课）保留沿对角线的一条带状分块，而块掩码（例如把两篇互不相关的文档拼进同一条序列）保留的是一个个完整的方块区域。这正好接上第 05 课的问题：哪些分数值得算。在这里，答案由掩码逐块给出，而结果依然是精确的。（第一篇 FlashAttention 论文里就已经有这种块稀疏的版本。）

# %%
L, block = 1024, 128
documents = torch.zeros(L, L, dtype=torch.bool)
# lang: en
documents[:384, :384] = documents[384:, 384:] = True  # two documents of 384 and 640 tokens, one sequence
# lang: zh
documents[:384, :384] = documents[384:, 384:] = True  # 两篇文档，384 和 640 个词元，拼成一条序列
# lang: end
documents &= keep_of(L, L, causal=True)
pictures = {
    "causal": tile_kinds(L, L, block, block, causal=True),
    "window": tile_kinds(L, L, block, block, causal=True, window=256),
    "documents": tile_kinds(L, L, block, block, keep_mask=documents),
}
fig, axes = plt.subplots(1, 3, figsize=(12.0, 4.2), layout="constrained")
# lang: en
titles = {"causal": "causal", "window": "causal, window of 256", "documents": "two documents, causal"}
# lang: zh
titles = {"causal": "因果", "window": "因果，窗口 256", "documents": "两篇文档，因果"}
# lang: end
for ax, (name, kinds) in zip(axes, pictures.items()):
    tile_grid(kinds, ax=ax, title=titles[name], legend=name == "documents")
plt.show()
computed = {name: int((kinds != SKIP).sum()) for name, kinds in pictures.items()}
# lang: en
claim("causal: 36 of the 64 tiles (8 · 9 / 2), 8 of them masked (the diagonal)",
      computed["causal"] == 36 and int((pictures["causal"] == 1).sum()) == 8)
claim(f"a window of 256 keys: {computed['window']} tiles; two documents: {computed['documents']} tiles",
      computed["window"] == 21 and computed["documents"] == 21)
# lang: zh
claim("因果：64 个分块中算 36 个（8 · 9 / 2），其中 8 个需要掩码（对角线上的）",
      computed["causal"] == 36 and int((pictures["causal"] == 1).sum()) == 8)
claim(f"窗口为 256 个键：{computed['window']} 个分块；两篇文档：{computed['documents']} 个分块",
      computed["window"] == 21 and computed["documents"] == 21)
# lang: end

# %% [markdown] tags=["lang-en"]
# Skipping changes nothing in the result. Each of the three masks, on 8 heads of $L = 1024$, gives
# `F.scaled_dot_product_attention`'s output with the same mask, and `FlopCounterMode` (lesson 07)
# counts the multiply-adds of the matrix products that ran:

# %% [markdown] tags=["lang-zh"] en_hash="1d4c3590d7"
# 跳过分块不会改变结果。在 8 个头、$L = 1024$ 上，三种掩码各自都与带同一掩码的 `F.scaled_dot_product_attention` 输出相同；`FlopCounterMode`（第 07 课）则数出实际运行的矩阵乘法做了多少次乘加：

# %%
g = torch.Generator().manual_seed(2)
q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))
with torch.no_grad():
    runs = {
        "causal": (tiled_attention(q, k, v, block_q=block, block_k=block, causal=True)[0],
                   F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "window": (tiled_attention(q, k, v, block_q=block, block_k=block, causal=True, window=256)[0],
                   F.scaled_dot_product_attention(q, k, v, attn_mask=keep_of(L, L, causal=True, window=256))),
        "documents": (tiled_attention(q, k, v, block_q=block, block_k=block, keep_mask=documents)[0],
                      F.scaled_dot_product_attention(q, k, v, attn_mask=documents)),
    }
all_same = all(torch.allclose(ours, theirs, rtol=0, atol=1e-5) for ours, theirs in runs.values())
from torch.utils.flop_counter import FlopCounterMode


def multiply_adds(**masking):
    # lang: en
    """The multiply-adds of the tiled loop's matrix products on one head (they depend on shapes only)."""
    # lang: zh
    """分块循环中矩阵乘法在一个头上的乘加次数（只取决于形状）。"""
    # lang: end
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        tiled_attention(q[:, :1], k[:, :1], v[:, :1], block_q=block, block_k=block, **masking)
    return counter.get_total_flops() // 2


every_tile = multiply_adds()
work = {"causal": multiply_adds(causal=True), "window": multiply_adds(causal=True, window=256),
        "documents": multiply_adds(keep_mask=documents)}
# lang: en
claim("causal, window and documents: the tiled output equals F.scaled_dot_product_attention's with the same "
      "mask (float32, to 1e-5)", all_same)
claim(f"the matrix products' multiply-adds fall with the tiles: causal {work['causal'] / every_tile:.4f} of the full "
      f"loop's (36/64), "
      f"window and documents {work['window'] / every_tile:.4f} (21/64)",
      64 * work["causal"] == 36 * every_tile and 64 * work["window"] == 64 * work["documents"] == 21 * every_tile)
# lang: zh
claim("因果、窗口和两篇文档三种情形下，分块版的输出都与带同一掩码的 F.scaled_dot_product_attention 相同"
      "（float32，误差不超过 1e-5）", all_same)
claim(f"矩阵乘法的乘加次数与分块数同比例减少：因果是完整循环的 {work['causal'] / every_tile:.4f}"
      f"（36/64），"
      f"窗口和两篇文档都是 {work['window'] / every_tile:.4f}（21/64）",
      64 * work["causal"] == 36 * every_tile and 64 * work["window"] == 64 * work["documents"] == 21 * every_tile)
# lang: end

# %% [markdown] tags=["lang-en"]
# Time falls less than the arithmetic in this Python loop, where each tile's fixed costs (the loop
# itself, launching small operators, masking the diagonal tiles) weigh as much as its multiply-adds;
# a compiled kernel with larger tiles comes closer to the count. These times change from run to run
# and from machine to machine:

# %% [markdown] tags=["lang-zh"] en_hash="5263fa5b21"
# 在这个 Python 循环里，时间减少得没有运算量那么多：每个分块都有固定开销（循环本身、启动一个个小算子、给对角线上的分块加掩码），与它的乘加相比并不小；编译好的核函数用更大的分块，会更接近运算量的比例。这些耗时每次运行都不一样，也因机器而异：

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    full_ms = milliseconds(lambda: tiled_attention(q, k, v, block_q=block, block_k=block))
    causal_ms = milliseconds(lambda: tiled_attention(q, k, v, block_q=block, block_k=block, causal=True))
    window_ms = milliseconds(lambda: tiled_attention(q, k, v, block_q=block, block_k=block, causal=True, window=256))
# lang: en
print(f"every tile: {full_ms:.1f} ms; causal: {causal_ms:.1f} ms ({causal_ms / full_ms:.2f}×); "
      f"window of 256: {window_ms:.1f} ms ({window_ms / full_ms:.2f}×)")
# lang: zh
print(f"全部分块：{full_ms:.1f} 毫秒；因果：{causal_ms:.1f} 毫秒（{causal_ms / full_ms:.2f}×）；"
      f"窗口 256：{window_ms:.1f} 毫秒（{window_ms / full_ms:.2f}×）")
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: causal tile skipping
#
# Write `my_causal_tiled_attention(query, key, value, block_q, block_k)`: causal self-attention
# (query $i$ sees keys $j \le i$; query, key and value all have length $L$) computed tile by tile
# as in Exercise 2, returning `(output, lse, tiles)`: the output $(B, L, d_v)$, the log-sum-exp
# $(B, L)$ of the visible scaled scores of each row, and `tiles`, the number of tiles you computed,
# a Python `int`. Skip every tile that the causal mask hides entirely (do not compute it and do not
# count it); mask the tiles the diagonal cuts through, by the positions of their queries and keys in
# the whole sequence; compute the others without a mask. `block_q` and `block_k` may differ. The
# check compares values and gradients (for query, key and value) and the count. It refuses
# `F.scaled_dot_product_attention`, `torch.softmax`, `F.softmax`, `Tensor.softmax`,
# `torch.logsumexp` and `Tensor.logsumexp`, and the course's `tiled.tiled_attention`,
# `tiled.materialised_attention`, `tiled.tile_kinds` and `attention.scaled_dot_product_attention`.

# %% [markdown] tags=["lang-zh"] en_hash="926fc762d5"
# ### 练习 3：因果分块的跳过
#
# 写出 `my_causal_tiled_attention(query, key, value, block_q, block_k)`：像练习 2 那样逐块计算因果自注意力（查询 $i$ 只能看到 $j \le i$ 的键；query、key、value 的长度都是 $L$），返回 `(output, lse, tiles)`：输出形状为 $(B, L, d_v)$；每一行可见的缩放后分数的 log-sum-exp，形状为 $(B, L)$；以及 `tiles`，你实际计算的分块个数，一个 Python `int`。凡是被因果掩码整块遮住的分块都要跳过（不计算，也不计数）；被对角线穿过的分块，按其中查询和键在整个序列中的位置加掩码；其余分块不加掩码直接计算。`block_q` 和 `block_k` 可以不同。检查会比较数值、梯度（对 query、key 和 value）以及分块个数。检查不接受 `F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp` 和 `Tensor.logsumexp`，也不接受课程自带的 `tiled.tiled_attention`、`tiled.materialised_attention`、`tiled.tile_kinds` 和 `attention.scaled_dot_product_attention`。

# %% tags=["exercise"] exercise="08.causal_tiles"
def my_causal_tiled_attention(query, key, value, block_q, block_k):
    # lang: en
    """Causal attention one tile at a time, skipping the tiles the mask hides entirely.

    query, key: (B, L, d); value: (B, L, d_v); query i sees keys j <= i.
    block_q, block_k: queries and keys per block (they may differ).
    Returns (output, lse, tiles): output (B, L, d_v); lse (B, L); tiles, the number of
    tiles computed (an int).
    """
    # lang: zh
    """逐块计算因果注意力，跳过被掩码整块遮住的分块。

    query、key：(B, L, d)；value：(B, L, d_v)；查询 i 只能看到 j <= i 的键。
    block_q、block_k：每个块中查询和键的个数（可以不同）。
    返回 (output, lse, tiles)：output (B, L, d_v)；lse (B, L)；tiles 为实际计算的
    分块个数（int）。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L, d = query.shape
    d_v = value.shape[-1]
    outputs, lses, tiles = [], [], 0
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        q = query[:, i0:i1] / math.sqrt(d)
        m = torch.full((B, i1 - i0), float("-inf"), dtype=query.dtype)
        ell = torch.zeros(B, i1 - i0, dtype=query.dtype)
        acc = torch.zeros(B, i1 - i0, d_v, dtype=query.dtype)
        for j0 in range(0, L, block_k):
            j1 = min(j0 + block_k, L)
            if j0 > i1 - 1:
                # lang: en
                break  # this tile and every later one: all keys after the block's last query
                # lang: zh
                break  # 这个分块以及之后的所有分块：键都在本查询块最后一个查询之后
                # lang: end
            tiles += 1
            s = q @ key[:, j0:j1].transpose(1, 2)
            if j1 - 1 > i0:
                # lang: en
                future = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None]  # global positions
                # lang: zh
                future = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None]  # 全局位置
                # lang: end
                s = s.masked_fill(future, float("-inf"))
            # lang: en
            m_new = torch.maximum(m, s.amax(-1))  # finite: key block 0 holds key 0, seen by every query
            # lang: zh
            m_new = torch.maximum(m, s.amax(-1))  # 有限值：键块 0 里有键 0，每个查询都看得到
            # lang: end
            shrink = torch.exp(m - m_new)
            p = torch.exp(s - m_new[..., None])
            ell = ell * shrink + p.sum(-1)
            acc = acc * shrink[..., None] + p @ value[:, j0:j1]
            m = m_new
        outputs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    return torch.cat(outputs, dim=1), torch.cat(lses, dim=1), tiles
    ### END SOLUTION


# %%
from course_utils import check
check("08.causal_tiles", my_causal_tiled_attention)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. What the real kernels do
#
# ### The backward recomputes
#
# Our tiled code saves memory in the forward pass only. With gradients on, autograd keeps what
# each tile's backward needs, every tile's $P = e^{S - m}$ among it, so the $L \times L$ numbers are
# stored after all, in pieces:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="8c3bf55b09"
# ## 4. 真正的核函数做了什么
#
# ### 反向传播靠重计算
#
# 我们的分块代码只在前向计算中省内存。一旦要求梯度，autograd 就要保存每个分块反向传播所需的东西，其中包括每个分块的 $P = e^{S - m}$，于是这 $L \times L$ 个数最终还是被存了下来，只不过是分块存的：

# %%
L = 512
g = torch.Generator().manual_seed(3)
q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))
# lang: en
matrix_bytes = 8 * L * L * 4  # one (1, 8, L, L) float32 matrix
# lang: zh
matrix_bytes = 8 * L * L * 4  # 一个 (1, 8, L, L) 的 float32 矩阵
# lang: end
with torch.no_grad():
    forward_only = peak_bytes(tiled_attention, q, k, v, block_q=64, block_k=64)[1]
with_graph = peak_bytes(tiled_attention, q.requires_grad_(), k, v, block_q=64, block_k=64)[1]
# lang: en
print(f"one (1, 8, {L}, {L}) matrix: {format_bytes(matrix_bytes)}")
print(f"tiled forward, no gradients: {format_bytes(forward_only)}; with autograd: {format_bytes(with_graph)}")
claim("without gradients the tiled forward needs less than a third of one L×L matrix; with autograd it keeps more than one",
      forward_only < matrix_bytes / 3 and with_graph > matrix_bytes)
# lang: zh
print(f"一个 (1, 8, {L}, {L}) 矩阵：{format_bytes(matrix_bytes)}")
print(f"分块前向计算，不求梯度：{format_bytes(forward_only)}；用 autograd：{format_bytes(with_graph)}")
claim("不求梯度时，分块前向计算所需内存不到一个 L×L 矩阵的三分之一；用 autograd 时，它保存的超过一个 L×L 矩阵",
      forward_only < matrix_bytes / 3 and with_graph > matrix_bytes)
# lang: end

# %% [markdown] tags=["lang-en"]
# FlashAttention writes its own backward instead. Beside the output $O$ it saves only $O(L)$
# numbers, one or two per row (FlashAttention-1 kept $m$ and $\ell$; FlashAttention-2 keeps only
# their combination, the log-sum-exp), and recomputes each tile's weights in the backward from $Q$,
# $K$ and that number: $P = e^{S - \mathrm{lse}}$, with no running max and no sum, because
# $\mathrm{lse}$ already holds both. The softmax's gradient needs one more number per row,
# $\sum_j P_{ij}\, dP_{ij}$ with $dP = dO\, V^\top$; it equals $\sum_c dO_{ic}\, O_{ic}$, computed from
# the output and its gradient before the loop, so no $L \times L$ matrix is needed for it either. The
# price is one more $QK^\top$ product per tile; the saving, at $L = 8192$ with 8 heads:

# %% [markdown] tags=["lang-zh"] en_hash="891eef98aa"
# FlashAttention 自己写了反向传播。除了输出 $O$，它只保存 $O(L)$ 个数，每行一两个（FlashAttention-1 保存 $m$ 和 $\ell$；FlashAttention-2 只保存两者合成的 log-sum-exp）。反向传播时，再由 $Q$、$K$ 和这个数重新算出每个分块的权重：$P = e^{S - \mathrm{lse}}$，不需要运行最大值，也不需要求和，因为 $\mathrm{lse}$ 已经包含了两者。softmax 的梯度还要每行一个数 $\sum_j P_{ij}\, dP_{ij}$，其中 $dP = dO\, V^\top$；它等于 $\sum_c dO_{ic}\, O_{ic}$，在循环开始前由输出和输出的梯度算出，所以这里也用不着 $L \times L$ 矩阵。代价是每个分块多做一次 $QK^\top$ 乘法；省下的内存，以 $L = 8192$、8 个头为例：

# %%
L_big = 8192
# lang: en
weights_big = 8 * L_big * L_big * 4  # P for the backward, float32
lse_big = 8 * L_big * 4  # one number per row
# lang: zh
weights_big = 8 * L_big * L_big * 4  # 为反向传播存下的 P，float32
lse_big = 8 * L_big * 4  # 每行一个数
# lang: end
g = torch.Generator().manual_seed(4)
q, k, v = (torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64) for _ in range(3))
output, lse = tiled_attention(q, k, v, block_q=32, block_k=32)
scores = q @ k.transpose(-2, -1) / 4
# lang: en
d_output = torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64)  # the gradient that reaches O
per_row = (torch.softmax(scores, -1) * (d_output @ v.transpose(-2, -1))).sum(-1)  # Σ_j P dP: (L, L) matrices
from_output = (d_output * output).sum(-1)  # Σ_c dO O: no (L, L) matrix
# lang: zh
d_output = torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64)  # 传到 O 的梯度
per_row = (torch.softmax(scores, -1) * (d_output @ v.transpose(-2, -1))).sum(-1)  # Σ_j P dP：要用 (L, L) 矩阵
from_output = (d_output * output).sum(-1)  # Σ_c dO O：不用 (L, L) 矩阵
# lang: end
# lang: en
recomputed = torch.exp(scores - lse[..., None])  # a tile of it needs only its scores and lse
# lang: zh
recomputed = torch.exp(scores - lse[..., None])  # 其中每个分块只需要它自己的分数和 lse
# lang: end
# lang: en
claim(f"storing the weights for the backward would take {format_bytes(weights_big)}, the log-sum-exp {format_bytes(lse_big)}",
      weights_big == 2 * 2**30 and lse_big == 256 * 2**10)
claim("exp(S − lse) recomputes softmax(S) to rounding (float64, to 2e-15)",
      torch.allclose(recomputed, torch.softmax(scores, -1), rtol=0, atol=2e-15))
claim("Σ_j P_ij dP_ij of every row equals Σ_c dO_ic O_ic (float64, to 1e-12)",
      torch.allclose(per_row, from_output, rtol=0, atol=1e-12))
# lang: zh
claim(f"为反向传播存下权重要 {format_bytes(weights_big)}，而 log-sum-exp 只要 {format_bytes(lse_big)}",
      weights_big == 2 * 2**30 and lse_big == 256 * 2**10)
claim("exp(S − lse) 重新算出的就是 softmax(S)，只差舍入误差（float64，误差不超过 2e-15）",
      torch.allclose(recomputed, torch.softmax(scores, -1), rtol=0, atol=2e-15))
claim("每一行的 Σ_j P_ij dP_ij 都等于 Σ_c dO_ic O_ic（float64，误差不超过 1e-12）",
      torch.allclose(per_row, from_output, rtol=0, atol=1e-12))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Writing the backward
#
# Here is that backward, tile by tile, in FlashAttention-2's loop order (its Algorithm 2): key
# blocks outside, query blocks inside. For key block $j$, start from $dK_j = dV_j = 0$ and visit
# every query block $i$ that sees it:
#
# $$S = Q_i K_j^\top / \sqrt d,\quad P = e^{S - \mathrm{lse}_i},\quad dV_j \mathrel{+}= P^\top dO_i,
# \quad dP = dO_i V_j^\top,\quad dS = P \circ (dP - D_i),$$
# $$dQ_i \mathrel{+}= dS\, K_j / \sqrt d,\qquad dK_j \mathrel{+}= dS^\top Q_i / \sqrt d,$$
#
# with $D_i = \sum_c dO_{ic} O_{ic}$ computed once, before the loop. $dK_j$ and $dV_j$ stay in fast
# memory for the whole inner loop and are written once; $dQ_i$ collects one term from every key
# block. On a GPU the key blocks run in parallel, so those terms land in the same rows of $dQ$ and
# must be added atomically in HBM. The Triton tutorial's fused attention avoids that: after a small
# pass that computes $D$, it runs two loops, one over the query blocks of each key block for $dK$
# and $dV$, one over the key blocks of each query block for $dQ$, and recomputes $P$ in both: more
# arithmetic, no atomic adds. On this CPU, in one Python loop, nothing runs in parallel, and the
# first order computes each tile's $P$ once, so the course uses it.
#
# As in the forward, a causal mask lets the loop skip the tiles it hides entirely and mask only the
# ones the diagonal cuts through. In the backward that is not only a saving: recomputed as
# $e^{S - \mathrm{lse}}$, a hidden entry is not 0 unless the loop skips or masks it.
#
# `tiled_backward` is this loop. `TiledAttention`, a `torch.autograd.Function`, runs
# `tiled_attention` without a graph, saves its output and log-sum-exp beside the inputs, and calls
# `tiled_backward` when autograd asks; `flash_attention(...)` calls it. Its gradients are
# `F.scaled_dot_product_attention`'s:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="48d01c9b37"
# ### 写出反向传播
#
# 下面就逐块写出这个反向传播，循环顺序采用 FlashAttention-2 的（即它的算法 2）：外层遍历键/值块，内层遍历查询块。对第 $j$ 个键块，从 $dK_j = dV_j = 0$ 出发，依次处理能看到它的每个查询块 $i$：
#
# $$S = Q_i K_j^\top / \sqrt d,\quad P = e^{S - \mathrm{lse}_i},\quad dV_j \mathrel{+}= P^\top dO_i,
# \quad dP = dO_i V_j^\top,\quad dS = P \circ (dP - D_i),$$
# $$dQ_i \mathrel{+}= dS\, K_j / \sqrt d,\qquad dK_j \mathrel{+}= dS^\top Q_i / \sqrt d,$$
#
# 其中 $D_i = \sum_c dO_{ic} O_{ic}$ 在循环开始前算好一次。整个内层循环中，$dK_j$ 和 $dV_j$ 一直留在片上存储里，最后只写出一次；$dQ_i$ 则从每个键块各收到一项。在 GPU 上，各个键块是并行处理的，这些项会落到 $dQ$ 的同一批行上，只能在 HBM 里用原子加法累加。Triton 教程中的融合注意力（fused attention）避开了这一点：先用一小趟计算出 $D$，再跑两个循环，一个对每个键块遍历查询块，求 $dK$ 和 $dV$；另一个对每个查询块遍历键块，求 $dQ$；两个循环里都重新计算 $P$：算术多了，却不需要原子加法。在这台 CPU 上，一个 Python 循环里没有任何并行，而第一种顺序每个分块的 $P$ 只算一次，所以本课程采用它。
#
# 与前向计算一样，因果掩码让循环可以跳过被整块遮住的分块，只给被对角线穿过的分块加掩码。在反向传播中，这不只是省计算：按 $e^{S - \mathrm{lse}}$ 重新算出来时，被遮住的元素只有在循环跳过它或给它加了掩码时才是 0。
#
# `tiled_backward` 就是这个循环。`TiledAttention` 是一个 `torch.autograd.Function`：它不建计算图地运行 `tiled_attention`，除输入外只保存输出和 log-sum-exp，在 autograd 需要时调用 `tiled_backward`；`flash_attention(...)` 调用的就是它。它的梯度与 `F.scaled_dot_product_attention` 的相同：

# %%
g = torch.Generator().manual_seed(6)
agree = []
for L_q, L_k, block_q, block_k, causal in ((37, 37, 5, 7, False), (37, 37, 8, 3, True), (13, 29, 4, 6, False)):
    q = torch.randn(2, 3, L_q, 16, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 3, L_k, 16, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    # lang: en
    probe = torch.randn(2, 3, L_q, 16, generator=g, dtype=torch.float64)  # a random weighted sum to differentiate
    # lang: zh
    probe = torch.randn(2, 3, L_q, 16, generator=g, dtype=torch.float64)  # 对输出做随机加权求和，再求导
    # lang: end
    output, _ = flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
    ours = torch.autograd.grad((output * probe).sum(), (q, k, v))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    theirs = torch.autograd.grad((expected * probe).sum(), (q, k, v))
    agree.append(torch.allclose(output, expected, rtol=0, atol=1e-12)
                 and all(torch.allclose(a, b, rtol=0, atol=1e-12) for a, b in zip(ours, theirs)))
# lang: en
claim("flash_attention's output and its backward's gradients for Q, K and V equal F.scaled_dot_product_attention's "
      "(float64, to 1e-12): L = 37 with 5 × 7 tiles, causal L = 37 with 8 × 3 tiles, 13 queries over 29 keys",
      all(agree))
# lang: zh
claim("flash_attention 的输出，以及它的反向传播给出的 Q、K、V 的梯度，都与 F.scaled_dot_product_attention 的相同"
      "（float64，误差不超过 1e-12）：L = 37、5 × 7 的分块；因果、L = 37、8 × 3 的分块；13 个查询对 29 个键",
      all(agree))
# lang: end

# %% [markdown] tags=["lang-en"]
# What it saves is memory in a training step: below, the peak memory of the forward and the backward
# together as $L$ grows (2 heads of $d = 64$, float32, tiles of 64 × 64), for `flash_attention`,
# for `tiled_attention` differentiated by autograd, and for the textbook line differentiated by
# autograd:

# %% [markdown] tags=["lang-zh"] en_hash="6ced0c9777"
# 它省下的是训练一步所需的内存。下面让 $L$ 增长，测量前向计算与反向传播合在一起的峰值内存（2 个 $d = 64$ 的头，float32，64 × 64 的分块），对象有三个：`flash_attention`、由 autograd 求导的 `tiled_attention`，以及由 autograd 求导的教科书式那一行：

# %%
def forward_and_backward(attention):
    # lang: en
    """One training step of `attention` alone: its output, then the gradients for q, k and v."""
    # lang: zh
    """只含 `attention` 的一步训练：先算输出，再求 q、k、v 的梯度。"""
    # lang: end
    def step(q, k, v, d_output):
        return torch.autograd.grad(attention(q, k, v), (q, k, v), d_output)
    return step


versions = {
    "flash_attention": lambda q, k, v: flash_attention(q, k, v, block_q=64, block_k=64)[0],
    "tiled_attention": lambda q, k, v: tiled_attention(q, k, v, block_q=64, block_k=64)[0],
    "plain_attention": plain_attention,
}
step_lengths = [256, 512, 1024]
step_bytes = {name: [] for name in versions}
for L in step_lengths:
    g = torch.Generator().manual_seed(L)
    q, k, v = (torch.randn(1, 2, L, 64, generator=g, requires_grad=True) for _ in range(3))
    d_output = torch.randn(1, 2, L, 64, generator=g)
    for name, attention in versions.items():
        step_bytes[name].append(peak_bytes(forward_and_backward(attention), q, k, v, d_output)[1])
step_slopes = {name: slope(step_lengths, counted) for name, counted in step_bytes.items()}
fig, ax = plt.subplots(figsize=(6.0, 3.8))
# lang: en
labels = {"flash_attention": "flash_attention (its own backward)", "tiled_attention": "tiled_attention, autograd",
          "plain_attention": "softmax(q @ kᵀ / √d) @ v, autograd"}
cost_lines(ax, step_lengths, {f"{labels[name]}, slope {step_slopes[name]:.2f}": counted
                              for name, counted in step_bytes.items()},
           "sequence length L", "peak bytes, forward and backward", in_bytes=True)
# lang: zh
labels = {"flash_attention": "flash_attention（自己的反向传播）", "tiled_attention": "tiled_attention，autograd",
          "plain_attention": "softmax(q @ kᵀ / √d) @ v，autograd"}
cost_lines(ax, step_lengths, {f"{labels[name]}，斜率 {step_slopes[name]:.2f}": counted
                              for name, counted in step_bytes.items()},
           "序列长度 L", "前向与反向的峰值字节数", in_bytes=True)
# lang: end
plt.show()
# lang: en
doubled = {name: counted[-1] / counted[-2] for name, counted in step_bytes.items()}  # from L = 512 to 1024
# lang: zh
doubled = {name: counted[-1] / counted[-2] for name, counted in step_bytes.items()}  # 从 L = 512 到 1024
# lang: end
ratio = step_bytes["plain_attention"][-1] / step_bytes["flash_attention"][-1]
# lang: en
claim(f"forward and backward, from L = 512 to 1024: flash_attention's memory grows {doubled['flash_attention']:.1f}× "
      f"(≈ 2 when L doubles: like L, plus one tile's fixed share), autograd through the tiles "
      f"{doubled['tiled_attention']:.1f}× and through the textbook line {doubled['plain_attention']:.1f}× "
      "(towards 4: like L², the weights they keep)",
      1.7 <= doubled["flash_attention"] <= 2.1 and doubled["tiled_attention"] >= 2.8
      and 3.7 <= doubled["plain_attention"] <= 4.1)
claim(f"at L = 1024 a training step of flash_attention needs 1/{ratio:.0f} of the textbook line's memory, and less "
      "than a fifth of autograd through the same tiles",
      ratio > 8 and 5 * step_bytes["flash_attention"][-1] < step_bytes["tiled_attention"][-1])
# lang: zh
claim(f"前向加反向，从 L = 512 到 1024：flash_attention 的内存增长到 {doubled['flash_attention']:.1f} 倍"
      f"（L 翻倍时 ≈ 2：与 L 成正比，另有一个分块的固定部分）；让 autograd 逐块求导的版本增长到 "
      f"{doubled['tiled_attention']:.1f} 倍，教科书式那一行增长到 {doubled['plain_attention']:.1f} 倍"
      "（趋向 4：与 L² 成正比，因为它们保存了权重）",
      1.7 <= doubled["flash_attention"] <= 2.1 and doubled["tiled_attention"] >= 2.8
      and 3.7 <= doubled["plain_attention"] <= 4.1)
claim(f"L = 1024 时，flash_attention 训练一步只需教科书式那一行内存的 1/{ratio:.0f}，"
      "不到让 autograd 对同样的分块求导所需内存的五分之一",
      ratio > 8 and 5 * step_bytes["flash_attention"][-1] < step_bytes["tiled_attention"][-1])
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 4: the tiled backward
#
# Write `my_tiled_backward(query, key, value, output, lse, d_output, block_q, block_k, causal)`:
# the gradients of attention's output with respect to query, key and value, computed tile by tile
# from what the forward saved. query is $(B, L_q, d)$, key $(B, L_k, d)$, value $(B, L_k, d_v)$;
# output $(B, L_q, d_v)$ and lse $(B, L_q)$ are what the tiled forward returned for them, and
# d_output $(B, L_q, d_v)$ is the gradient that reaches the output. With `causal=True`,
# $L_q = L_k$ and query $i$ sees keys $j \le i$, as in Exercise 3. Compute
# $D = \sum_c dO \cdot O$ for every row once, then visit the tiles (in either loop order):
# recompute each tile's weights as $P = e^{S - \mathrm{lse}}$ and add its parts to dQ, dK and dV.
# With `causal=True`, skip every tile the mask hides entirely (do not compute it, do not count it)
# and mask the tiles the diagonal cuts through, by global positions. Return
# `(d_query, d_key, d_value, tiles)`: three tensors of the shapes and dtype of query, key and
# value, and the number of tiles you computed, a Python `int`. Never build more scores than one
# $(b_q, b_k)$ tile. The check compares the three gradients and the count with the right ones,
# then, as in Exercise 2, the largest tensor your function makes: on a case with long keys, all
# the scores at once are more than it allows. It refuses `F.scaled_dot_product_attention`,
# `torch.softmax`, `F.softmax`, `Tensor.softmax`, `torch.logsumexp` and `Tensor.logsumexp`;
# autograd itself, `torch.autograd.grad` and `torch.autograd.backward` (which `.backward()` and
# `torch.func` call); and the course's `tiled.tiled_backward`, `tiled.flash_attention`,
# `tiled.tiled_attention`, `tiled.materialised_attention`, `tiled.tile_kinds` and
# `attention.scaled_dot_product_attention`.

# %% [markdown] tags=["lang-zh"] en_hash="706a594d8f"
# ### 练习 4：分块反向传播
#
# 写出 `my_tiled_backward(query, key, value, output, lse, d_output, block_q, block_k, causal)`：由前向计算保存下来的东西，逐块算出注意力输出对 query、key、value 的梯度。query 的形状为 $(B, L_q, d)$，key 为 $(B, L_k, d)$，value 为 $(B, L_k, d_v)$；output $(B, L_q, d_v)$ 和 lse $(B, L_q)$ 是分块前向计算对它们的返回值；d_output $(B, L_q, d_v)$ 是传到输出的梯度。`causal=True` 时，$L_q = L_k$，查询 $i$ 只能看到 $j \le i$ 的键，与练习 3 相同。先为每一行算出一次 $D = \sum_c dO \cdot O$，再遍历各个分块（两种循环顺序都可以）：把每个分块的权重重新算成 $P = e^{S - \mathrm{lse}}$，把它贡献的部分加到 dQ、dK 和 dV 上。`causal=True` 时，跳过被掩码整块遮住的每个分块（不计算，也不计数），并按全局位置给被对角线穿过的分块加掩码。返回 `(d_query, d_key, d_value, tiles)`：三个张量，形状和 dtype 分别与 query、key、value 相同；以及你实际计算的分块个数，一个 Python `int`。任何时候构造的分数都不要超过一个 $(b_q, b_k)$ 分块。检查会把三个梯度和分块个数与正确结果比较，再像练习 2 那样看你的函数构造的最大张量：在键很长的测试用例上，一次算出全部分数就超出了允许的大小。检查不接受 `F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp` 和 `Tensor.logsumexp`；不接受 autograd 本身，即 `torch.autograd.grad` 和 `torch.autograd.backward`（`.backward()` 和 `torch.func` 调用的就是它们）；也不接受课程自带的 `tiled.tiled_backward`、`tiled.flash_attention`、`tiled.tiled_attention`、`tiled.materialised_attention`、`tiled.tile_kinds` 和 `attention.scaled_dot_product_attention`。

# %% tags=["exercise"] exercise="08.tiled_backward"
def my_tiled_backward(query, key, value, output, lse, d_output, block_q, block_k, causal):
    # lang: en
    """The gradients of attention for query, key and value, one tile at a time.

    query: (B, L_q, d); key: (B, L_k, d); value: (B, L_k, d_v).
    output: (B, L_q, d_v) and lse: (B, L_q), what the tiled forward returned.
    d_output: (B, L_q, d_v), the gradient that reaches the output.
    block_q, block_k: queries and keys per block; causal: query i sees keys j <= i (L_q = L_k).
    Returns (d_query, d_key, d_value, tiles): gradients shaped like query, key, value;
    tiles, the number of tiles computed (an int).
    """
    # lang: zh
    """逐块求注意力对 query、key、value 的梯度。

    query：(B, L_q, d)；key：(B, L_k, d)；value：(B, L_k, d_v)。
    output：(B, L_q, d_v) 和 lse：(B, L_q)，分块前向计算的返回值。
    d_output：(B, L_q, d_v)，传到输出的梯度。
    block_q、block_k：每个块中查询和键的个数；causal：查询 i 只能看到 j <= i 的键（L_q = L_k）。
    返回 (d_query, d_key, d_value, tiles)：形状分别与 query、key、value 相同的梯度；
    tiles 为实际计算的分块个数（int）。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L_q, d = query.shape
    L_k = key.shape[1]
    scale = 1 / math.sqrt(d)
    # lang: en
    D = (d_output * output).sum(-1)  # (B, L_q): Σ_j P dP of each row, with no (L_q, L_k) matrix
    # lang: zh
    D = (d_output * output).sum(-1)  # (B, L_q)：每一行的 Σ_j P dP，不用 (L_q, L_k) 矩阵
    # lang: end
    d_query = torch.zeros_like(query)
    d_key, d_value = torch.zeros_like(key), torch.zeros_like(value)
    tiles = 0
    # lang: en
    # key blocks outside: dK_j and dV_j are summed over the query blocks, then written once
    # lang: zh
    # 外层遍历键块：dK_j 和 dV_j 对各查询块累加，最后只写一次
    # lang: end
    for j0 in range(0, L_k, block_k):
        j1 = min(j0 + block_k, L_k)
        k, v = key[:, j0:j1], value[:, j0:j1]
        d_k, d_v = torch.zeros_like(k), torch.zeros_like(v)
        for i0 in range(0, L_q, block_q):
            i1 = min(i0 + block_q, L_q)
            if causal and j0 > i1 - 1:
                # lang: en
                continue  # every key after the block's last query: nothing visible
                # lang: zh
                continue  # 键都在本查询块最后一个查询之后：没有任何可见元素
                # lang: end
            tiles += 1
            q = query[:, i0:i1] * scale
            s = q @ k.transpose(1, 2)  # (B, b_q, b_k)
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], float("-inf"))
            # lang: en
            p = torch.exp(s - lse[:, i0:i1, None])  # the softmax itself: lse holds the max and the sum
            # lang: zh
            p = torch.exp(s - lse[:, i0:i1, None])  # 就是 softmax 本身：lse 已包含最大值和求和
            # lang: end
            d_o = d_output[:, i0:i1]
            d_v = d_v + p.transpose(1, 2) @ d_o
            d_s = p * (d_o @ v.transpose(1, 2) - D[:, i0:i1, None])
            d_query[:, i0:i1] += d_s @ k * scale
            d_k = d_k + d_s.transpose(1, 2) @ q
        d_key[:, j0:j1], d_value[:, j0:j1] = d_k, d_v
    return d_query, d_key, d_value, tiles
    ### END SOLUTION


# %%
from course_utils import check
check("08.tiled_backward", my_tiled_backward)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Which kernel `F.scaled_dot_product_attention` picks on this CPU
#
# `F.scaled_dot_product_attention` chooses among several kernels. On a CPU, PyTorch 2.13 has two:
# a tiled one in the spirit of this lesson (the operator `_scaled_dot_product_flash_attention_for_cpu`)
# and the plain "math" one that builds the matrix. `sdpa_backend` reads which one ran from the
# names of the operators that ran (PyTorch's profiler shows the same names). These are measurements of PyTorch 2.13 on a CPU, not documented
# promises: other versions and GPUs choose differently.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="54444322cc"
# ### `F.scaled_dot_product_attention` 在这台 CPU 上选用哪个核函数
#
# `F.scaled_dot_product_attention` 会在几个核函数之间挑选。在 CPU 上，PyTorch 2.13 有两个：一个与本课思路相同的分块核函数（算子 `_scaled_dot_product_flash_attention_for_cpu`），以及建出整个矩阵的朴素 math 核函数。`sdpa_backend` 从实际运行的算子名中读出用的是哪一个；PyTorch 的性能分析器（profiler）显示的也是这些名字。下面这些是对 CPU 上 PyTorch 2.13 的测量结果，不是文档给出的承诺：别的版本和 GPU 的选择各不相同。

# %%
g = torch.Generator().manual_seed(5)
q, k, v = (torch.randn(1, 8, 64, 32, generator=g) for _ in range(3))
causal_keep = keep_of(64, 64, causal=True)
found = {
    "(B, H, L, d)": sdpa_backend(q, k, v),
    "is_causal=True": sdpa_backend(q, k, v, is_causal=True),
    "attn_mask=keep": sdpa_backend(q, k, v, attn_mask=causal_keep),
    "float64": sdpa_backend(q.double(), k.double(), v.double()),
    "(H, L, d)": sdpa_backend(q[0], k[0], v[0]),
    "d_v=16": sdpa_backend(q, k, v[..., :16]),
    "dropout_p=0.1": sdpa_backend(q, k, v, dropout_p=0.1),
}
for inputs, kernel in found.items():
    print(f"{inputs:15} {kernel}")
tiled_kind = [name for name in ("(B, H, L, d)", "is_causal=True", "attn_mask=keep", "float64") if found[name] == "flash"]
math_kind = [name for name in ("(H, L, d)", "d_v=16", "dropout_p=0.1") if found[name] == "math"]
flash_output, flash_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
version = ".".join(torch.__version__.split(".")[:2])
ours, our_lse = tiled_attention(q, k, v, block_q=16, block_k=16)
# lang: en
claim(f"PyTorch {version}, CPU: (B, H, L, d) inputs run the tiled flash kernel, causal, with a bool mask, in float32 "
      "and float64", len(tiled_kind) == 4)
claim(f"PyTorch {version}, CPU: 3-D inputs (no head axis), values of another width than the keys, and dropout fall "
      "back to the math kernel", len(math_kind) == 3)
claim("the flash kernel keeps a log-sum-exp per row too, and it equals ours (to 1e-5)",
      torch.allclose(flash_lse, our_lse, rtol=0, atol=1e-5) and torch.allclose(flash_output, ours, rtol=0, atol=1e-5))
# lang: zh
claim(f"PyTorch {version}，CPU：形状为 (B, H, L, d) 的输入都走分块的 flash 核函数，无论是否因果、是否带 bool 掩码，"
      "也无论是 float32 还是 float64", len(tiled_kind) == 4)
claim(f"PyTorch {version}，CPU：3 维输入（没有头这一维）、值的宽度与键不同、使用 dropout 时，"
      "都退回 math 核函数", len(math_kind) == 3)
claim("flash 核函数同样为每一行保留一个 log-sum-exp，而且与我们算出的相同（误差不超过 1e-5）",
      torch.allclose(flash_lse, our_lse, rtol=0, atol=1e-5) and torch.allclose(flash_output, ours, rtol=0, atol=1e-5))
# lang: end

# %% [markdown] tags=["lang-en"]
# So reshaping to $(B, H, L, d)$ before calling it, as lesson 04's fused layer does, is what gets
# the tiled kernel; three axes get the math kernel and its $L \times L$ matrix. The course's
# benchmark measures the versions side by side up to $L = 16384$, with tiles of 256 × 256, and
# checks two bars at $L = 8192$ on one CPU thread: the memory the tiled call adds to the process stays under 1/20 of
# what the textbook line adds, and the causal version takes at most 0.6 times as long as the
# full one (larger tiles and longer rows leave the fixed costs per tile less weight than in the
# timings above).

# %% [markdown] tags=["lang-zh"] en_hash="f8f0b1db2e"
# 所以，像第 04 课的融合版那样，在调用之前先整理成 $(B, H, L, d)$ 的形状，才能用上分块核函数；3 维的输入只能走 math 核函数和它的 $L \times L$ 矩阵。课程的基准测试用 256 × 256 的分块，把这几个版本并排测到 $L = 16384$，并在单个 CPU 线程上、$L = 8192$ 处检查两条界限：分块版调用给进程增加的内存不到教科书式那一行的 1/20；因果版的耗时至多是完整版的 0.6 倍（分块更大、行更长，每个分块的固定开销所占的比重就比上面的计时小）。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - The **online softmax** keeps, per row, a running max $m$ and a running sum
#   $\ell = \sum e^{s - m}$; when $m$ grows, what was summed shrinks by $e^{m_{old} - m_{new}}$. Two
#   partial states merge exactly in arithmetic, in any order, whatever the split, fully masked
#   pieces included (as long as no $e^{-\infty + \infty}$ is computed); in floating point, to within
#   rounding. Milakov and Gimelshein's online softmax computes the normaliser in one pass over the
#   row; fused with the product with $V$, all of attention takes one pass over the keys.
# - Tiled attention carries an accumulator $acc = \sum e^{s - m} v$ beside them and divides once at
#   the end (FlashAttention-2's loop order and single division). It gives
#   `F.scaled_dot_product_attention`'s values and gradients, and the memory it allocates grows like
#   $L$ instead of $L^2$. The fair baseline is the textbook line, which holds two $L \times L$
#   matrices at its peak; careless code holds more, in-place code one. Even on this CPU the extra
#   passes over $L \times L$ matrices cost time; on a GPU the gain is the HBM traffic saved,
#   $\Theta(L^2 d^2 / M)$ accesses instead of $\Theta(L d + L^2)$, by a compiled kernel: our
#   Python tiles keep their memory there but run some 60 times slower than F.sdpa.
# - A mask that hides whole tiles lets the loop skip them: causal attention computes about half the
#   tiles, $(n + 1)/(2n)$ of the arithmetic, and masks only those on the diagonal; sliding windows and
#   block masks skip more.
# - Real kernels also save memory in the backward: they keep the output and one log-sum-exp per row,
#   recompute the weights tile by tile as $P = e^{S - \mathrm{lse}}$ and take $D = \sum dO \circ O$
#   per row from the output, so no $L \times L$ matrix is ever stored. FlashAttention-2 loops over
#   the key blocks outside, summing $dK$ and $dV$ in fast memory and $dQ$ across key blocks.
#   Written as a `torch.autograd.Function`, it gives PyTorch's gradients, and a training step's
#   memory grows like $L$, where autograd through the same tiles grows like $L^2$. On a CPU,
#   PyTorch 2.13's `F.scaled_dot_product_attention` runs a tiled kernel for 4-D inputs and falls
#   back to the math kernel for 3-D inputs, values of another width and dropout.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="7c45f4390a"
# ## 小结
#
# - **在线 softmax** 为每一行维护运行最大值 $m$ 和累计和 $\ell = \sum e^{s - m}$；$m$ 变大时，已经求和的部分要乘以 $e^{m_{old} - m_{new}}$（这个系数不超过 1）。在精确算术下，两个部分状态的合并没有任何误差，与顺序无关，与切法无关，整段被遮住的片段也不例外（只要不去算 $e^{-\infty + \infty}$）；在浮点运算中，则是在舍入误差之内一致。Milakov 和 Gimelshein 的在线 softmax 只扫一遍就算出归一化所需的量；再与乘 $V$ 融合起来，整个注意力只需把键扫一遍。
# - 分块注意力在它们旁边再带一个累加器 $acc = \sum e^{s - m} v$，最后只除一次（这是 FlashAttention-2 的循环顺序和单次除法）。它的输出值和梯度都与 `F.scaled_dot_product_attention` 相同，分配的内存随 $L$ 而不是 $L^2$ 增长。公平的比较对象是教科书式的那一行，它在峰值时占着两个 $L \times L$ 矩阵；写得随意的代码占得更多，原地计算的代码只占一个。即使在这台 CPU 上，对 $L \times L$ 矩阵多扫几遍也要花时间；在 GPU 上，好处是省下 HBM 的搬运量：访问次数是 $\Theta(L^2 d^2 / M)$，而不是 $\Theta(L d + L^2)$，但这要靠编译好的核函数：我们的 Python 分块在 GPU 上内存依然省，速度却比 F.sdpa 慢约 60 倍。
# - 能遮住整个分块的掩码让循环可以直接跳过这些分块：因果注意力只算大约一半的分块，即 $(n + 1)/(2n)$ 的运算量，而且只给对角线上的分块加掩码；滑动窗口和块掩码能跳过更多。
# - 真正的核函数在反向传播中也省内存：它们只保留输出和每行一个 log-sum-exp，按 $P = e^{S - \mathrm{lse}}$ 逐块重计算权重，每行的 $D = \sum dO \circ O$ 则由输出算出，所以从不存下 $L \times L$ 矩阵。FlashAttention-2 的反向传播外层遍历键/值块，$dK$ 和 $dV$ 在片上存储里累加，$dQ$ 则跨键块累加。把它写成一个 `torch.autograd.Function`，梯度与 PyTorch 的相同，训练一步的内存随 $L$ 增长；而让 autograd 对同样的分块求导，内存随 $L^2$ 增长。在 CPU 上，PyTorch 2.13 的 `F.scaled_dot_product_attention` 对 4 维输入运行分块核函数，对 3 维输入、宽度不同的值以及 dropout 则退回 math 核函数。
