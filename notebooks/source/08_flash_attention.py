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
#    prove it gives `F.scaled_dot_product_attention`'s values and gradients, and measure its memory
#    as $L$ grows;
# 3. skip the tiles a causal mask or a sliding window hides entirely, and mask only the tiles it
#    cuts;
# 4. see what the real kernels add: a backward that recomputes instead of storing, the log-sum-exp
#    they keep per row, and which kernel `F.scaled_dot_product_attention` picks on this CPU.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c61933da11"
# # 从零实现 FlashAttention
#
# 完整的注意力要为每个头算出一个 $L \times L$ 的分数矩阵，朴素的代码会把它存下来，再存下它的 softmax：在 $L = 8192$、8 个头时，float32 下每个矩阵都要 2.1 GB（2 GiB）。第 05 课问的是：这些分数里哪些值得算。本课一个分数也不少算，却始终不存下这个矩阵。这个技巧是精确的，不是近似：softmax(QKᵀ)V 可以一次只处理一块键来计算，每一行只需维护一个运行最大值和一个运行和。FlashAttention（Dao 等，2022；FlashAttention-2，Dao，2023）做的就是这件事，PyTorch 自己的 CPU 注意力也是这样做的。在 GPU 上，它最大的好处是省时间，靠的是减少芯片与显存之间的数据搬运（第 2 节会讲怎样减少）；在这台 CPU 上，本课测量的是在任何机器上结果都一样的东西：一次调用分配了多少内存，以及结果是否精确。
#
# 本课你将：
#
# 1. 用一行分数的若干片段算出 softmax，即**在线 softmax**（online softmax），并把两个部分结果精确地合并起来；
# 2. 把注意力写成对查询和键的分块（tile）的循环，只保留 $O(L \cdot d)$ 的状态；证明它的输出值和梯度都与 `F.scaled_dot_product_attention` 相同，并测量随 $L$ 增长它占用的内存；
# 3. 跳过被因果掩码或滑动窗口整块遮住的分块，只给被掩码穿过的分块加掩码；
# 4. 看看真正的内核还多做了什么：反向传播时重计算而不是存储，每一行保留的 log-sum-exp，以及在这台 CPU 上 `F.scaled_dot_product_attention` 选用哪个内核。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, setup
from course_utils.tiled import (
    SKIP,
    SoftmaxState,
    finish,
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
# This is the **online softmax** of Milakov and Gimelshein (2018), who used it to compute a softmax in
# one pass over its row. At the end $\mathrm{softmax}(s)_j = e^{s_j - m} / \ell$ exactly, whatever
# the pieces were. A score
# of $-\infty$ (a masked key) adds $e^{-\infty} = 0$; a piece of nothing but $-\infty$ has
# $m = -\infty$, $\ell = 0$ and changes nothing, provided the code never computes
# $e^{-\infty - (-\infty)}$, which is NaN.
#
# Here is one row of 8 scores cut before positions 3 and 5, with two masked keys; `piece_state`
# takes each piece alone, the loop merges them, left to right and then right to left:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="cdae5b0d90"
# ## 1. 在线 softmax
#
# softmax 需要整行：$\mathrm{softmax}(s)_j = e^{s_j} / \sum_k e^{s_k}$，而每个细心的实现都会先减去这一行的最大值 $m$，免得某个 $e^{s}$ 溢出。假设这一行是分成若干片段陆续到来的。每处理完一段，保留两个数：$m$，到目前为止最大的分数；$\ell = \sum e^{s - m}$，对到目前为止的分数求和。当新的片段带来更大的最大值 $m'$ 时，旧的和是对着旧的 $m$ 算的，它的每一项都大了 $e^{m' - m}$ 倍，所以要乘上 $e^{m - m'} \le 1$ 缩小：
#
# $$m' = \max(m, \max_j s_j),\qquad \ell' = \ell\, e^{m - m'} + \sum_j e^{s_j - m'} .$$
#
# 这就是 Milakov 和 Gimelshein（2018）提出的**在线 softmax**，他们用它只扫一遍就算出一行的 softmax。最后，无论这一行是怎样切开的，都精确地有 $\mathrm{softmax}(s)_j = e^{s_j - m} / \ell$。分数为 $-\infty$（被掩码遮住的键）的项贡献 $e^{-\infty} = 0$；一个全是 $-\infty$ 的片段有 $m = -\infty$、$\ell = 0$，什么都不改变，前提是代码永远不去算 $e^{-\infty - (-\infty)}$，那是 NaN。
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
# Any cut gives the same result. `online_softmax(scores, cuts)` does the same for every row of a
# tensor; below, all 127 ways to cut a row of 8 scores, on rows with masked keys, a row whose first
# half is masked (a fully masked piece for many cuts) and a fully masked row, which gets zeros:

# %% [markdown] tags=["lang-zh"] en_hash="0c6bd2aef2"
# 怎样切都得到同样的结果。`online_softmax(scores, cuts)` 对张量的每一行做同样的事。下面试遍把 8 个分数切开的全部 127 种方式，用到的几行各有特点：一行有被掩码遮住的键；一行前一半全被遮住（许多切法下会切出整段被遮住的片段）；还有一个全遮蔽行，它得到的是全零：

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
# 注意力要的是 $\mathrm{softmax}(s)\,V$，而不是权重本身。给状态加上第三个量：**累加器**（accumulator）$acc = \sum_j e^{s_j - m}\, v_j$（一个有 $d_v$ 个特征的向量），$m$ 变大时它和 $\ell$ 一样换算。于是输出行就是 $acc / \ell$，一行的状态是 $(m, \ell, acc)$。同一行中两个互不重叠的片段，它们的状态一步就能合并：两者都换算到较大的那个最大值，
#
# $$m = \max(m_1, m_2),\quad \ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m},\quad
# acc = acc_1 e^{m_1 - m} + acc_2 e^{m_2 - m}.$$
#
# 合并并不关心片段从哪里来：两个线程、两台机器、长序列的前后两半都行。长序列的键就是这样分给多个工作单元，最后再合并的：Flash-Decoding 这样把很长的 KV 缓存分给 GPU 的各个计算核心，Ring Attention 则这样把一条序列分到多个设备上。

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

# %% [markdown] tags=["lang-zh"] en_hash="0bcca0fefa"
# ### 练习 1：合并两个部分 softmax
#
# 写出 `my_merge_states(m1, ell1, acc1, m2, ell2, acc2)`：由同一批行中两个互不重叠的片段各自的状态，求出它们合起来的状态。`m1`、`ell1`、`m2`、`ell2` 的形状为 $(B, L)$（每行一个数），`acc1`、`acc2` 的形状为 $(B, L, d_v)$。返回 `(m, ell, acc)`，其中 `m = max(m1, m2)`，两段都按上面的公式换算到它，dtype 与输入相同。某一段可能整段被掩码遮住：它的 `m` 是 $-\infty$，`ell` 和 `acc` 都是 0。如果一行的两段都是这样，结果应为 `m` $= -\infty$、`ell` $= 0$、`acc` $= 0$，绝不能是 NaN。检查只比较数值，不比较梯度；检查不接受课程自带的 `tiled.merge_states`，它正是本题的答案。

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
# 现在来做完整的注意力。把查询切成每块 `block_q` 行，把键和值切成每块 `block_k` 行。对第 $i$ 个查询分块，从空状态（$m = -\infty$、$\ell = 0$、$acc = 0$）出发，依次处理各个键分块：算出分数的一个**分块**（tile）$S = Q_i K_j^\top / \sqrt{d}$，形状为 $(b_q, b_k)$，用它更新这些行的状态，然后丢掉它。处理完最后一个键分块后，$O_i = acc / \ell$。任何时候存在的分数只有一个分块，每个查询分块的状态是 $O(b_q \cdot d_v)$。下图画的是第 3 节的因果情形，对角线以上的分块根本不算：
#
# ![因果分块注意力：查询分块 × 键/值分块的网格，对角线以下的分块直接计算，对角线上的分块加掩码，对角线以上的分块跳过；每个查询分块保留运行最大值、运行和与累加器，逐块更新，最后得到输出和 log-sum-exp](../../images/08_tiling_zh.svg)
#
# 这种循环顺序来自 FlashAttention-2（Dao，2023）：查询分块在外层，键分块在内层，于是一个查询分块的状态一直留在高速存储里，直到它的输出一次写出；最后也只除一次 $\ell$，而不是每个分块之后都除。FlashAttention-1 则把键分块放在外层循环，并让每个输出分块始终保持归一化，每一步都要把它读回来重新缩放。
#
# `tiled_attention(query, key, value, block_q=…, block_k=…)` 就是这个循环，前导维度 $(B, H)$ 任意；它返回输出，以及每一行的 **log-sum-exp** $\mathrm{lse} = m + \log \ell = \log \sum_j e^{s_j}$，第 4 节会用到它。无论分块大小如何，输出都与 `F.scaled_dot_product_attention` 相同；梯度由 autograd 穿过这个循环传回：

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
# 写出 `my_tiled_attention(query, key, value, block_q, block_k)`，其中 query 形状为 $(B, L_q, d)$，key 为 $(B, L_k, d)$，value 为 $(B, L_k, d_v)$：对每 `block_q` 个查询组成的分块循环，在其中再对每 `block_k` 个键和值组成的分块循环（两者的最后一块都可以短一些），为每个查询维护 $(m, \ell, acc)$，返回 `(output, lse)`：输出形状为 $(B, L_q, d_v)$，等于 softmax$(QK^\top/\sqrt{d})V$；以及每一行缩放后分数的 log-sum-exp，形状为 $(B, L_q)$；dtype 与输入相同。任何时候构造的分数都不要超过一个 $(b_q, b_k)$ 分块。检查会比较数值和梯度（对 query、key 和 value），再看你的函数构造的最大张量：在键很长的测试用例上，一次算出全部分数，或者让一块查询一次对上所有的键，都超出了检查允许的大小。检查不接受 `F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp` 和 `Tensor.logsumexp`，也不接受课程自带的 `tiled.tiled_attention`、`tiled.materialised_attention` 和 `attention.scaled_dot_product_attention`。

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
    block_q、block_k：每个分块中查询和键的个数（最后一块可以短一些）。
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
            shrink = torch.exp(m - m_new)  # exp(m_old - m_new) <= 1：换算此前的和
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
# takes for itself, such as a BLAS library's workspace, is not seen). Below: one sequence, 8 heads of
# $d = 64$, float32, no gradients, tiles of 64 × 64, against the materialised version, which builds
# the whole $(1, 8, L, L)$ matrix of scores and then its weights:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="a3c3115324"
# ### 它省下了什么：随 L 增长的峰值内存
#
# `peak_bytes(function, …)` 运行一个函数，逐个算子统计它创建的张量（包括它的返回值）所占的字节数，以及任一时刻同时存活的最大字节数：也就是这次调用的**峰值内存**（peak memory），在任何机器上数出来都一样（单个算子内部自己占用的临时内存，例如 BLAS 库的工作区，不在统计之内）。下面是一条序列、8 个 $d = 64$ 的头、float32、不求梯度、分块为 64 × 64 的情形，与完整矩阵版注意力对比，后者先建出整个 $(1, 8, L, L)$ 的分数矩阵，再建出它的权重：

# %%
lengths = [256, 512, 1024, 2048]
tiled_bytes, plain_bytes = [], []
with torch.no_grad():
    for L in lengths:
        g = torch.Generator().manual_seed(L)
        q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))
        (output, _), counted = peak_bytes(tiled_attention, q, k, v, block_q=64, block_k=64)
        tiled_bytes.append(counted)
        plain_bytes.append(peak_bytes(materialised_attention, q, k, v)[1])
        # lang: en
        print(f"L = {L:4}: tiled {format_bytes(tiled_bytes[-1]):>8}, materialised {format_bytes(plain_bytes[-1]):>8}")
        # lang: zh
        print(f"L = {L:4}：分块版 {format_bytes(tiled_bytes[-1]):>8}，完整矩阵版 {format_bytes(plain_bytes[-1]):>8}")
        # lang: end
same = torch.allclose(output, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)
tiled_slope, plain_slope = slope(lengths, tiled_bytes), slope(lengths, plain_bytes)
fig, ax = plt.subplots(figsize=(6.0, 3.8))
# lang: en
cost_lines(ax, lengths, {f"tiled (64 × 64 tiles), slope {tiled_slope:.2f}": tiled_bytes,
                         f"materialised, slope {plain_slope:.2f}": plain_bytes},
           "sequence length L", "peak bytes of the tensors created", in_bytes=True)
# lang: zh
cost_lines(ax, lengths, {f"分块版（64 × 64 分块），斜率 {tiled_slope:.2f}": tiled_bytes,
                         f"完整矩阵版，斜率 {plain_slope:.2f}": plain_bytes},
           "序列长度 L", "所建张量的峰值字节数", in_bytes=True)
# lang: end
plt.show()
# lang: en
claim("at L = 2048 the tiled output equals F.scaled_dot_product_attention's (float32, to 1e-5)", same)
claim(f"on log-log axes the tiled version's memory grows with slope {tiled_slope:.2f} (≈ 1: like L), the materialised one's with slope {plain_slope:.2f} (≈ 2: like L²)",
      0.8 <= tiled_slope <= 1.1 and 1.9 <= plain_slope <= 2.1)
claim(f"at L = 2048 the tiled version needs 1/{plain_bytes[-1] / tiled_bytes[-1]:.0f} of the materialised version's memory",
      plain_bytes[-1] > 20 * tiled_bytes[-1])
# lang: zh
claim("L = 2048 时，分块版的输出与 F.scaled_dot_product_attention 相同（float32，误差不超过 1e-5）", same)
claim(f"在双对数坐标上，分块版的内存以斜率 {tiled_slope:.2f} 增长（≈ 1：与 L 成正比），完整矩阵版以斜率 {plain_slope:.2f} 增长（≈ 2：与 L² 成正比）",
      0.8 <= tiled_slope <= 1.1 and 1.9 <= plain_slope <= 2.1)
claim(f"L = 2048 时，分块版只需完整矩阵版内存的 1/{plain_bytes[-1] / tiled_bytes[-1]:.0f}（两者之比）",
      plain_bytes[-1] > 20 * tiled_bytes[-1])
# lang: end

# %% [markdown] tags=["lang-en"]
# Time is another matter. Our tiles are a Python loop of small matrix products; the times below
# (one thread, $L = 2048$) change from run to run and from machine to machine:

# %% [markdown] tags=["lang-zh"] en_hash="818b774f71"
# 时间则是另一回事。我们的分块是 Python 循环里的一串小矩阵乘法；下面的耗时（单线程，$L = 2048$）每次运行都不一样，也因机器而异：

# %% tags=["nbval-ignore-output"]
def milliseconds(function, repeat=3):
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return 1000 * best


with torch.no_grad():
    times = {
        "tiled_attention": milliseconds(lambda: tiled_attention(q, k, v, block_q=64, block_k=64), repeat=1),
        "tiled_attention (256 × 256)": milliseconds(lambda: tiled_attention(q, k, v, block_q=256, block_k=256),
                                                    repeat=1),
        "materialised_attention": milliseconds(lambda: materialised_attention(q, k, v), repeat=1),
        "F.scaled_dot_product_attention": milliseconds(lambda: F.scaled_dot_product_attention(q, k, v), repeat=1),
    }
for name, ms in times.items():
    # lang: en
    print(f"{name:32} {ms:8.1f} ms")
    # lang: zh
    print(f"{name:32} {ms:8.1f} 毫秒")
    # lang: end

# %% [markdown] tags=["lang-en"]
# Larger tiles mean fewer trips through the Python loop, at the price of more memory per tile. A
# compiled kernel has no such overhead, and on a GPU the time it saves is the FlashAttention paper's
# real argument, which is about memory *traffic*, not size. The plain version writes the $L \times L$
# scores to the GPU's main memory (HBM), reads them back for the softmax, writes the weights and
# reads them again for the product with $V$. The tiled kernel keeps each tile in the chip's small,
# fast on-chip memory (SRAM) and touches HBM only to read $Q$, $K$ and $V$ ($K$ and $V$ once per
# query block) and to write $O$ and the log-sum-exp: $\Theta(L^2 d^2 / M)$ accesses instead of $\Theta(L d + L^2)$, for an SRAM of $M$
# numbers (Dao et al., 2022). This notebook runs on a CPU and measures neither HBM traffic nor GPU
# time: what it shows is the memory a call allocates, and that the result is exact.

# %% [markdown] tags=["lang-zh"] en_hash="02354fc274"
# 分块越大，Python 循环走的趟数越少，代价是每个分块占的内存更多。编译好的内核没有这种开销。在 GPU 上，它省下的时间才是 FlashAttention 论文真正的论点，而这个论点说的是内存的**搬运量**，不是占用量。朴素的做法把 $L \times L$ 的分数写进 GPU 的显存（HBM），为了算 softmax 再读回来，写出权重，为了与 $V$ 相乘又读一遍。分块内核则把每个分块留在芯片上又小又快的片上存储（SRAM）里，只在读 $Q$、$K$、$V$（每个查询分块把 $K$ 和 $V$ 读一遍）和写 $O$ 及 log-sum-exp 时才访问 HBM：访问次数是 $\Theta(L^2 d^2 / M)$，而不是 $\Theta(L d + L^2)$，其中 $M$ 是 SRAM 能放下的数的个数（Dao 等，2022）。本笔记本在 CPU 上运行，既不测 HBM 的搬运量，也不测 GPU 的耗时：它展示的是一次调用分配的内存，以及结果是精确的。

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
# 有因果掩码时，查询 $i$ 只能看到 $j \le i$ 的键。如果一个分块的第一个键位于它最后一个查询之后（$j_0 > i_1 - 1$），它就被整块遮住了：分块循环可以直接**跳过**它，而不是先算出来再遮住。完全位于对角线以下的分块根本不需要掩码。只有被对角线穿过的分块才需要掩码。`tile_kinds` 会告诉我们每个分块属于哪一类。为什么大约省一半？可见的分数是 $L^2$ 个中的 $L(L + 1)/2$ 个，而分块把这个三角形向上取整到整块，所以每边有 $n$ 个分块时，因果注意力算的是 $n^2$ 个分块中的 $n(n + 1)/2$ 个，占比 $(n + 1)/(2n)$，$n$ 越大越接近一半。任何能遮住整个分块的掩码都是如此：滑动窗口（第 07 课）保留沿对角线的一条带状分块，而块掩码（例如把两篇互不相关的文档拼进同一条序列）保留整块整块的分块。这正好接上第 05 课的问题：哪些分数值得算。在这里，答案由掩码逐块给出，而结果依然是精确的。（第一篇 FlashAttention 论文里就已经有这种块稀疏的版本。）

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
# 在这个 Python 循环里，时间减少得没有运算量那么多：每个分块都有固定开销（循环本身、启动一个个小算子、给对角线上的分块加掩码），与它的乘加相比并不小；编译好的内核用更大的分块，会更接近运算量的比例。这些耗时每次运行都不一样，也因机器而异：

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
    block_q、block_k：每个分块中查询和键的个数（可以不同）。
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
                break  # 这个分块以及之后的所有分块：键都在本分块最后一个查询之后
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
            m_new = torch.maximum(m, s.amax(-1))  # 有限值：键分块 0 里有键 0，每个查询都看得到
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
# ## 4. 真正的内核做了什么
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
claim("exp(S − lse) recomputes softmax(S) exactly (float64, to 1e-15)",
      torch.allclose(recomputed, torch.softmax(scores, -1), rtol=0, atol=1e-15))
claim("Σ_j P_ij dP_ij of every row equals Σ_c dO_ic O_ic (float64, to 1e-12)",
      torch.allclose(per_row, from_output, rtol=0, atol=1e-12))
# lang: zh
claim(f"为反向传播存下权重要 {format_bytes(weights_big)}，而 log-sum-exp 只要 {format_bytes(lse_big)}",
      weights_big == 2 * 2**30 and lse_big == 256 * 2**10)
claim("exp(S − lse) 精确地重新算出 softmax(S)（float64，误差不超过 1e-15）",
      torch.allclose(recomputed, torch.softmax(scores, -1), rtol=0, atol=1e-15))
claim("每一行的 Σ_j P_ij dP_ij 都等于 Σ_c dO_ic O_ic（float64，误差不超过 1e-12）",
      torch.allclose(per_row, from_output, rtol=0, atol=1e-12))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Which kernel `F.scaled_dot_product_attention` picks on this CPU
#
# `F.scaled_dot_product_attention` chooses among several kernels. On a CPU, PyTorch 2.13 has two:
# a tiled one in the spirit of this lesson (the operator `_scaled_dot_product_flash_attention_for_cpu`)
# and the plain "math" one that builds the matrix. `sdpa_backend` reads which one ran from the
# names of the operators that ran (PyTorch's profiler shows the same names). These are measurements of PyTorch 2.13 on a CPU, not documented
# promises: other versions and GPUs choose differently.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="54444322cc"
# ### `F.scaled_dot_product_attention` 在这台 CPU 上选用哪个内核
#
# `F.scaled_dot_product_attention` 会在几个内核之间挑选。在 CPU 上，PyTorch 2.13 有两个：一个与本课思路相同的分块内核（算子 `_scaled_dot_product_flash_attention_for_cpu`），以及建出整个矩阵的朴素 math 内核。`sdpa_backend` 从实际运行的算子名中读出用的是哪一个；PyTorch 的性能分析器（profiler）显示的也是这些名字。下面这些是对 CPU 上 PyTorch 2.13 的测量结果，不是文档给出的承诺：别的版本和 GPU 的选择各不相同。

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
claim(f"PyTorch {version}，CPU：形状为 (B, H, L, d) 的输入走分块的 flash 内核，无论是因果的、带 bool 掩码的，"
      "还是 float32 或 float64", len(tiled_kind) == 4)
claim(f"PyTorch {version}，CPU：3 维输入（没有头这一维）、值的宽度与键不同、使用 dropout 时，"
      "都退回 math 内核", len(math_kind) == 3)
claim("flash 内核同样为每一行保留一个 log-sum-exp，而且与我们算出的相同（误差不超过 1e-5）",
      torch.allclose(flash_lse, our_lse, rtol=0, atol=1e-5) and torch.allclose(flash_output, ours, rtol=0, atol=1e-5))
# lang: end

# %% [markdown] tags=["lang-en"]
# So reshaping to $(B, H, L, d)$ before calling it, as lesson 04's fused layer does, is what gets
# the tiled kernel; three axes get the math kernel and its $L \times L$ matrix. The course's
# benchmark measures the versions side by side up to $L = 16384$, with tiles of 256 × 256, and
# checks two bars at $L = 8192$: the memory the tiled call adds to the process stays under 1/20 of
# what the materialised call adds, and the causal version takes at most 0.6 times as long as the
# full one (larger tiles and longer rows leave the fixed costs per tile less weight than in the
# timings above).

# %% [markdown] tags=["lang-zh"] en_hash="d03765ad6e"
# 所以，像第 04 课的融合版那样，在调用之前先整理成 $(B, H, L, d)$ 的形状，才能用上分块内核；三维的输入只能走 math 内核和它的 $L \times L$ 矩阵。课程的基准测试用 256 × 256 的分块，把这几个版本并排测到 $L = 16384$，并在 $L = 8192$ 处检查两条界限：分块版调用给进程增加的内存不到完整矩阵版的 1/20；因果版的耗时至多是完整版的 0.6 倍（分块更大、行更长，每个分块的固定开销所占的比重就比上面的计时小）。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - The **online softmax** keeps, per row, a running max $m$ and a running sum
#   $\ell = \sum e^{s - m}$; when $m$ grows, what was summed shrinks by $e^{m_{old} - m_{new}}$. Two
#   partial states merge exactly, in any order, whatever the split, fully masked pieces included
#   (as long as no $e^{-\infty + \infty}$ is computed): Milakov and Gimelshein's online softmax.
# - Tiled attention carries an accumulator $acc = \sum e^{s - m} v$ beside them and divides once at
#   the end (FlashAttention-2's loop order and single division). It gives
#   `F.scaled_dot_product_attention`'s values and gradients, and the memory it allocates grows like
#   $L$ instead of $L^2$. On a GPU the larger gain is time, from the HBM traffic it saves; a CPU
#   measurement does not show that.
# - A mask that hides whole tiles lets the loop skip them: causal attention computes about half the
#   tiles, $(n + 1)/(2n)$ of the arithmetic, and masks only those on the diagonal; sliding windows and
#   block masks skip more.
# - Real kernels also save memory in the backward: they keep the output and one log-sum-exp per row
#   and recompute the weights tile by tile ($O(L)$ extra memory). On a CPU, PyTorch 2.13's `F.scaled_dot_product_attention`
#   runs such a tiled kernel for 4-D inputs and falls back to the math kernel for 3-D inputs,
#   values of another width and dropout.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b1ea1af2f0"
# ## 小结
#
# - **在线 softmax** 为每一行维护运行最大值 $m$ 和运行和 $\ell = \sum e^{s - m}$；$m$ 变大时，已经求和的部分要缩小 $e^{m_{old} - m_{new}}$ 倍。两个部分状态可以精确合并，与顺序无关，与切法无关，整段被遮住的片段也不例外（只要不去算 $e^{-\infty + \infty}$）。这就是 Milakov 和 Gimelshein 的在线 softmax。
# - 分块注意力在它们旁边再带一个累加器 $acc = \sum e^{s - m} v$，最后只除一次（这是 FlashAttention-2 的循环顺序和单次除法）。它的输出值和梯度都与 `F.scaled_dot_product_attention` 相同，分配的内存随 $L$ 而不是 $L^2$ 增长。在 GPU 上，更大的好处是减少 HBM 的搬运量、省下时间；在 CPU 上测内存，看不出这一点。
# - 能遮住整个分块的掩码让循环可以直接跳过这些分块：因果注意力只算大约一半的分块，即 $(n + 1)/(2n)$ 的运算量，而且只给对角线上的分块加掩码；滑动窗口和块掩码能跳过更多。
# - 真正的内核在反向传播中也省内存：它们只保留输出和每行一个 log-sum-exp，再逐块重新算出权重（额外内存为 $O(L)$）。在 CPU 上，PyTorch 2.13 的 `F.scaled_dot_product_attention` 对 4 维输入运行这样的分块内核，对 3 维输入、宽度不同的值以及 dropout 则退回 math 内核。
