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
# # 00 · Tensor shapes primer
#
# Attention code is mostly bookkeeping of shapes. One line of maths,
# $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$, becomes a dozen lines that split, transpose,
# broadcast and merge axes. Most bugs in attention code are shape bugs: an axis in the wrong
# place that still runs and quietly gives wrong numbers.
#
# This lesson is the toolbox for the lessons that follow:
#
# 1. how a tensor sits in memory: shape, stride, contiguous;
# 2. which operations copy the data and which are free views: `view` versus `reshape`;
# 3. `permute` and `transpose`;
# 4. `squeeze` and `unsqueeze`;
# 5. broadcasting, the way masks are applied;
# 6. `einsum`, side by side with the matrix products it replaces;
# 7. splitting and merging heads, the reshapes of multi-head attention.
#
# The letters used for sizes throughout the course:
#
# | letter | meaning |
# | --- | --- |
# | $B$ | batch size: how many sequences are processed together |
# | $L$ | sequence length; $L_q$ for the queries, $L_k$ for the keys |
# | $H$ | number of heads |
# | $D$ | features per head ($d_k$ in the attention formula) |
# | $d_\text{model} = H \cdot D$ | features per position |
#
# There are four exercises. A check cell follows each one: it says whether your function is
# right and, if not, which known mistake it makes.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="9dd40231c5"
# # 00 · 张量形状入门
#
# 注意力的代码，大半是在和形状打交道。数学上一行 $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$，
# 落到代码里就成了十几行拆分、转置、广播、合并维度的操作。注意力代码里的 bug 也多半出在形状上：
# 某个维度放错了位置，程序照样能跑，结果却悄悄错了。
#
# 这一课为后面各课备好工具：
#
# 1. 张量在内存中如何存放：形状、步长、连续；
# 2. 哪些操作会拷贝数据，哪些只是零开销的视图：`view` 与 `reshape` 的区别；
# 3. `permute` 与 `transpose`；
# 4. `squeeze` 与 `unsqueeze`；
# 5. 广播，也就是施加掩码的方式；
# 6. `einsum`，并与它所替代的矩阵乘法逐一对照；
# 7. 拆分与合并多头，即多头注意力所需的几步形状变换。
#
# 全课程统一用下列字母表示大小：
#
# | 字母 | 含义 |
# | --- | --- |
# | $B$ | 批量大小：一次同时处理多少条序列 |
# | $L$ | 序列长度；查询一侧记作 $L_q$，键一侧记作 $L_k$ |
# | $H$ | 头的个数 |
# | $D$ | 每个头的特征数（即注意力公式中的 $d_k$） |
# | $d_\text{model} = H \cdot D$ | 每个位置的特征数 |
#
# 本课共有四道练习，每道练习后面都有一个检查单元：它会告诉你函数是否正确；如果不对，还会指出属于哪一种常见错误。

# %%
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, setup, viz
from course_utils.widgets import broadcast_explorer, broadcast_view, permute_explorer, permute_view

setup(lang="en")


def shares_memory(a, b):
    """True when a and b read the same block of memory: one is a view of the other."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. A tensor is a flat block of memory plus strides
#
# The numbers of a tensor live in one flat block of memory, its *storage*. The shape says how
# many indices each axis has. The **stride** says how many places to move in memory for one step
# along an axis. Element $(i_0, \dots, i_{n-1})$ sits at
#
# $$\text{offset} = \sum_k i_k \cdot \text{stride}_k$$
#
# (plus a fixed start offset, 0 in this lesson). A tensor is **contiguous** when reading its
# elements in index order, last axis fastest, is the same as reading its memory from left to
# right: the last stride is 1, and every other stride is the next axis's stride times the next
# axis's size.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="1324f4595b"
# ## 1. 张量 = 一块平铺的内存 + 步长
#
# 张量里的数存放在一块平铺的一维内存中，这块内存叫作*存储*（storage）。形状规定每个维度有几个下标；
# **步长**（stride）规定沿某个维度走一步，在内存里要跨过几个位置。元素 $(i_0, \dots, i_{n-1})$ 的位置是
#
# $$\text{offset} = \sum_k i_k \cdot \text{stride}_k$$
#
# （另加一个固定的起始偏移，本课中都是 0）。如果按下标顺序（最后一维变化最快）读取元素，
# 恰好等于从左到右读取内存，这个张量就是**连续**的（contiguous）：最后一维的步长为 1，
# 其余每一维的步长都等于后一维的步长乘以后一维的大小。

# %%
x = torch.arange(12).view(3, 4)
print(x)
print(tuple(x.shape), x.stride(), x.is_contiguous())

# %% [markdown] tags=["lang-en"]
# Stepping down one row skips 4 numbers in memory, stepping right one column skips 1: the
# stride is (4, 1). Since `x` holds 0, 1, 2, … in memory order, each value is also its offset,
# so we can check the formula on one element: `x[2, 1]` should sit at $2 \cdot 4 + 1 \cdot 1 = 9$.

# %% [markdown] tags=["lang-zh"] en_hash="2ad50b9fde"
# 向下走一行要跨过内存中的 4 个数，向右走一列只跨过 1 个，所以步长是 (4, 1)。`x` 在内存中依次存放 0, 1, 2, …，
# 每个元素的值恰好就是它的偏移量，因此可以拿一个元素验证公式：`x[2, 1]` 应当位于 $2 \cdot 4 + 1 \cdot 1 = 9$。

# %%
i, j = 2, 1
print(i * x.stride(0) + j * x.stride(1), x[i, j].item())

# %% [markdown] tags=["lang-en"]
# The picture shows the memory on top and the elements in index order below, with a line from
# each element to the memory cell it is read from. For `x` the lines are parallel: `x` is
# contiguous. Its transpose `x.t()` reads the *same* memory in another order, so the lines
# cross: the stride is now (1, 4), and the transpose is not contiguous.

# %% [markdown] tags=["lang-zh"] en_hash="466c73dedb"
# 下图上方是内存，下方是按下标顺序排列的元素，每条线把一个元素连到它读取的内存格。`x` 的连线互相平行：
# `x` 是连续的。它的转置 `x.t()` 用另一种顺序读取*同一块*内存，连线便交叉起来：步长变成了 (1, 4)，
# 转置后的张量不再连续。

# %%
fig, axes = plt.subplots(2, 1, figsize=(8, 4), layout="constrained")
viz.memory_order(x, ax=axes[0], title=f"x   stride {x.stride()}")
viz.memory_order(x.t(), ax=axes[1], title=f"x.t()   stride {x.t().stride()}")
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. View or copy?
#
# A **view** is a new shape and stride over the *same* storage. Making one costs the same
# whatever the tensor's size, $O(1)$, and a write through the view shows in the original. A
# **copy** allocates new memory and moves every element: $O(n)$ time and memory.
#
# - `x.view(shape)` always returns a view. It never copies, so it fails when the new shape
#   cannot be read from the existing memory with some strides.
# - `x.reshape(shape)` returns a view when it can and a copy when it must. The values are right
#   either way, but the code does not tell you which of the two you got.
# - `x.contiguous()` returns `x` itself when `x` is already contiguous, and a contiguous copy
#   otherwise.
#
# We prove each claim with `shares_memory(a, b)`, defined in the setup cell: it compares the
# address of the storage behind two tensors.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="773d78d94c"
# ## 2. 视图还是副本？
#
# **视图**（view）是在*同一块*存储上换一套形状和步长。不论张量多大，创建视图的开销都是 $O(1)$；
# 通过视图写入的内容，原张量也能看到。**副本**（copy）则要申请新内存并搬运每一个元素，时间和内存都是 $O(n)$。
#
# - `x.view(shape)` 总是返回视图。它从不拷贝，所以当新形状无法用某组步长在现有内存上读出时，它会直接报错。
# - `x.reshape(shape)` 能返回视图就返回视图，不得不拷贝时才拷贝。两种情况下数值都对，
#   但单看代码，你无从得知拿到的是哪一种。
# - `x.contiguous()` 在 `x` 已经连续时返回 `x` 本身，否则返回一个连续的副本。
#
# 下面用 setup 单元中定义的 `shares_memory(a, b)` 逐条验证：它比较两个张量背后存储的地址。

# %%
v = x.view(2, 6)
print(tuple(v.shape), v.stride(), shares_memory(v, x))
v[0, 0] = 100  # write through the view ...
print(x[0, 0].item())  # ... and the original sees it
x[0, 0] = 0

# %% [markdown] tags=["lang-en"]
# The transpose `x.t()` is a view too, but not a contiguous one. Flattening it into 12 numbers
# would read memory in the order 0, 4, 8, 1, 5, …, which no single stride can express, so
# `view` refuses with a `RuntimeError` (whose message suggests `.reshape(...)`), and `reshape`
# makes a copy instead.

# %% [markdown] tags=["lang-zh"] en_hash="29e2ff65fc"
# 转置 `x.t()` 也是视图，但不是连续的。把它展平成 12 个数，需要按 0, 4, 8, 1, 5, … 的顺序读内存，
# 任何单一步长都表达不了这个顺序。于是 `view` 抛出 `RuntimeError` 拒绝执行（报错信息会建议改用 `.reshape(...)`），
# 而 `reshape` 则改为拷贝一份。

# %%
t = x.t()
print(t.stride(), t.is_contiguous(), shares_memory(t, x))
try:
    t.view(12)
except RuntimeError as error:
    print(type(error).__name__)
flat = t.reshape(12)
print(flat, shares_memory(flat, x))

# %% [markdown] tags=["lang-en"]
# Check the three rules: `reshape` of a contiguous tensor is a view, `reshape` of a
# non-contiguous one is a copy, and `contiguous()` copies only when it has to.

# %% [markdown] tags=["lang-zh"] en_hash="42be5303a5"
# 验证上面三条规则：对连续张量 `reshape` 得到视图，对不连续的张量 `reshape` 得到副本，
# `contiguous()` 只在必要时才拷贝。

# %%
print(shares_memory(x.reshape(6, 2), x))
print(shares_memory(t.reshape(12), x))
print(x.contiguous() is x, shares_memory(t.contiguous(), x))

# %% [markdown] tags=["lang-en"]
# What each operation of this lesson costs:
#
# | operation | returns | cost |
# | --- | --- | --- |
# | `view`, `transpose`, `permute`, `.T`, `.mT`, `squeeze`, `unsqueeze`, `expand`, slicing | a view | $O(1)$, nothing moves |
# | `reshape`, `flatten`, `unflatten` | a view if the strides allow it, else a copy | $O(1)$ or $O(n)$ |
# | `contiguous()` | `x` itself if contiguous, else a copy | $O(1)$ or $O(n)$ |
# | `clone()`, `a + b`, `masked_fill`, `@`, `einsum` | a new tensor | $O(n)$ or more |
#
# A view is free when you make it, but a non-contiguous view can make the *next* operation
# slower, or force it to copy. That is why the later lessons copy at a few chosen places, with
# `reshape` or `.contiguous()`, and nowhere else.

# %% [markdown] tags=["lang-zh"] en_hash="e0f2b65f28"
# 本课涉及的各个操作的开销：
#
# | 操作 | 返回 | 开销 |
# | --- | --- | --- |
# | `view`、`transpose`、`permute`、`.T`、`.mT`、`squeeze`、`unsqueeze`、`expand`、切片 | 视图 | $O(1)$，不搬运数据 |
# | `reshape`、`flatten`、`unflatten` | 步长允许时返回视图，否则返回副本 | $O(1)$ 或 $O(n)$ |
# | `contiguous()` | 已连续时返回 `x` 本身，否则返回副本 | $O(1)$ 或 $O(n)$ |
# | `clone()`、`a + b`、`masked_fill`、`@`、`einsum` | 新张量 | $O(n)$ 或更多 |
#
# 视图在创建时没有开销，但不连续的视图可能让*下一个*操作变慢，甚至迫使它先拷贝一份。
# 所以后面几课只在少数选定的位置用 `reshape` 或 `.contiguous()` 拷贝，其他地方一律不拷贝。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. `permute` and `transpose`
#
# To reorder axes, PyTorch reorders the strides and leaves the memory alone.
# `x.transpose(i, j)` swaps two axes; `x.permute(p)` puts the old axis $p_k$ at position $k$:
#
# $$y = x.\mathrm{permute}(p): \qquad y.\mathrm{shape}[k] = x.\mathrm{shape}[p_k], \qquad y.\mathrm{stride}[k] = x.\mathrm{stride}[p_k].$$
#
# `x.T` reverses all axes; `x.mT` swaps the last two, the matrix transpose of every matrix in a
# batch. That is what $K^\top$ means in attention: `k.transpose(-2, -1)`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2f0e06ed03"
# ## 3. `permute` 与 `transpose`
#
# 重排维度时，PyTorch 只重排步长，内存原封不动。`x.transpose(i, j)` 交换两个维度；
# `x.permute(p)` 把原来的第 $p_k$ 维放到第 $k$ 个位置：
#
# $$y = x.\mathrm{permute}(p): \qquad y.\mathrm{shape}[k] = x.\mathrm{shape}[p_k], \qquad y.\mathrm{stride}[k] = x.\mathrm{stride}[p_k].$$
#
# `x.T` 把所有维度倒序；`x.mT` 交换最后两维，也就是对一批矩阵中的每个矩阵做转置。
# 注意力公式里的 $K^\top$ 指的正是这个：`k.transpose(-2, -1)`。

# %%
x3 = torch.arange(24).view(2, 3, 4)
y = x3.permute(2, 0, 1)
print(tuple(x3.shape), x3.stride())
print(tuple(y.shape), y.stride(), y.is_contiguous(), shares_memory(y, x3))

# %% [markdown] tags=["lang-en"]
# Check: element $(k, i, j)$ of `y` is element $(i, j, k)$ of `x3`, and the inverse
# permutation, `permute(1, 2, 0)`, gives back exactly `x3`.

# %% [markdown] tags=["lang-zh"] en_hash="ddd70bd0dd"
# 验证：`y` 的元素 $(k, i, j)$ 就是 `x3` 的元素 $(i, j, k)$；用逆排列 `permute(1, 2, 0)` 恰好还原出 `x3`。

# %%
print(y[3, 1, 2].item() == x3[1, 2, 3].item())
print(torch.equal(y.permute(1, 2, 0), x3))

# %% [markdown] tags=["lang-en"]
# Try every order of the three axes of `x3` below (the explorer calls it `x`). The text shows the
# shape, the stride and whether the result shares memory with `x`; the picture shows how the
# result reads memory. Tick `.contiguous()` to copy the result into memory laid out in index
# order: the lines straighten and the memory is no longer shared, except for the order
# (0, 1, 2), which is contiguous already, so `.contiguous()` returns `x` itself.

# %% [markdown] tags=["lang-zh"] en_hash="4cd25ae0d5"
# 在下面试试 `x3` 三个维度的所有排列（探索器里把它叫作 `x`）。文字给出形状、步长，以及结果是否与 `x` 共享内存；
# 图中显示结果如何读取内存。勾选 `.contiguous()` 会把结果拷贝到按下标顺序排布的新内存里：连线变直，
# 也不再共享内存。唯一的例外是顺序 (0, 1, 2)：它本来就是连续的，`.contiguous()` 直接返回 `x` 本身。

# %% tags=["nbval-ignore-output"]
permute_explorer()

# %% [markdown] tags=["lang-en"]
# The explorer's view is a plain function; here it is for one setting, the copy of `x.permute(0, 2, 1)`:

# %% [markdown] tags=["lang-zh"] en_hash="ba893492f0"
# 探索器背后的视图函数就是一个普通函数。下面是其中一种设置，即 `x.permute(0, 2, 1)` 的副本：

# %%
_, summary = permute_view(order=(0, 2, 1), contiguous=True)
print(summary)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. `squeeze` and `unsqueeze`
#
# An axis of size 1 holds no extra data, so adding or removing one is always a view.
# `unsqueeze(d)` inserts a size-1 axis at position `d`. Indexing with `None` does the same and
# can insert several at once: `lengths[:, None]` is `lengths.unsqueeze(1)`. `squeeze(d)` removes
# axis `d` if its size is 1.
#
# Beware of `squeeze()` without an argument: it removes *every* size-1 axis, including a batch
# axis that happens to hold a single sequence.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="e871a01666"
# ## 4. `squeeze` 与 `unsqueeze`
#
# 大小为 1 的维度不带来额外的数据，因此增删这样的维度永远只是视图。`unsqueeze(d)` 在第 `d` 个位置插入一个大小为 1 的维度；
# 用 `None` 做索引效果相同，还能一次插入好几个：`lengths[:, None]` 就是 `lengths.unsqueeze(1)`。
# `squeeze(d)` 在第 `d` 维大小为 1 时把它去掉。
#
# 小心不带参数的 `squeeze()`：它会去掉*所有*大小为 1 的维度，连碰巧只有一条序列的批量维也不放过。

# %%
lengths = torch.tensor([5, 3])  # B = 2 sequences
print(tuple(lengths.unsqueeze(1).shape), tuple(lengths[:, None].shape), tuple(lengths[:, None, None, None].shape))

one = torch.zeros(1, 7, 1)  # a batch of one sequence: 7 positions, 1 feature each
print(tuple(one.squeeze().shape), tuple(one.squeeze(-1).shape), shares_memory(one.squeeze(-1), one))

# %% [markdown] tags=["lang-en"]
# `squeeze()` turned the (1, 7, 1) batch into a (7,) vector: code that expects (B, L) would
# now read the 7 positions as 7 sequences. Name the axis you mean, `squeeze(-1)`.

# %% [markdown] tags=["lang-zh"] en_hash="0d0f6a2dc6"
# `squeeze()` 把形状为 (1, 7, 1) 的批量变成了 (7,) 的向量：期待 (B, L) 的代码会把这 7 个位置误当成 7 条序列。
# 要去掉哪一维就写明哪一维：`squeeze(-1)`。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Broadcasting
#
# An elementwise operation on two tensors of different shapes lines the shapes up from the
# right. Two sizes fit when they are equal or one of them is 1; a missing leading axis counts
# as 1. On every axis the result takes the larger size:
#
# $$\text{out}_k = \max(a_k, b_k) \quad \text{if } a_k = b_k \text{ or } \min(a_k, b_k) = 1, \text{ otherwise an error.}$$
#
# A size-1 axis is *repeated* along the other tensor's size without being copied.
#
# This is how attention applies a **mask**. The scores have shape (B, H, L_q, L_k): one score
# per sequence, head, query and key. A **padding** mask marks which keys are real tokens rather
# than padding. It depends only on the sequence and the key, so it has shape (B, L_k). Give it
# two size-1 axes, (B, 1, 1, L_k): it then lines up with B and L_k and is repeated over every
# head and every query.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b444e5fc1a"
# ## 5. 广播
#
# 对两个形状不同的张量做逐元素运算时，两者的形状从右往左对齐。对齐后同一维上的两个大小要么相等，要么有一个是 1；
# 左边缺少的维度按大小 1 计。结果在每一维上取较大的那个大小：
#
# $$\text{out}_k = \max(a_k, b_k) \quad \text{若 } a_k = b_k \text{ 或 } \min(a_k, b_k) = 1\text{；否则报错。}$$
#
# 大小为 1 的维度会沿另一个张量的大小*重复*，但并不真的拷贝。
#
# 注意力正是这样施加**掩码**的。分数的形状是 (B, H, L_q, L_k)：每条序列、每个头、每个查询、每个键各有一个分数。
# **填充**掩码标出哪些键是真实的词元、哪些只是填充。它只取决于序列和键，所以形状是 (B, L_k)。
# 给它加上两个大小为 1 的维度，变成 (B, 1, 1, L_k)，它就与 B 和 L_k 对齐，并在所有头、所有查询上重复。

# %%
fig, ax = plt.subplots(figsize=(7, 2.4), layout="constrained")
viz.broadcast_picture((2, 1, 1, 5), (2, 4, 3, 5), ax=ax, names=("keep", "scores"), axis_names=("B", "H", "L_q", "L_k"))
plt.show()

# %% [markdown] tags=["lang-en"]
# In code: two sequences padded to $L_k = 5$, the first with 5 real tokens, the second with 3.
# The mask follows the course's convention: `keep` is True where a query may attend to the key.
# `masked_fill` writes $-\infty$ wherever `keep` is False, so those keys get zero weight after
# the softmax.

# %% [markdown] tags=["lang-zh"] en_hash="d6df74937d"
# 用代码来写：两条序列都填充到 $L_k = 5$，第一条有 5 个真实词元，第二条只有 3 个。掩码沿用本课程的约定：
# `keep` 在查询可以关注该键的位置为 True。`masked_fill` 在 `keep` 为 False 的位置写入 $-\infty$，
# 这些键经过 softmax 后权重就为 0。

# %%
B, H, L_q, L_k = 2, 4, 3, 5
scores = torch.randn(B, H, L_q, L_k)
keep = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])  # (B, L_k)
keep4 = keep[:, None, None, :]  # (B, 1, 1, L_k)
masked = scores.masked_fill(~keep4, float("-inf"))  # (B, H, L_q, L_k)
print(tuple(keep4.shape), tuple(masked.shape))
print(masked[1, 0])  # sequence 1, head 0: its last two keys are masked for every query

# %% [markdown] tags=["lang-en"]
# Check that the mask was never copied: `expand` builds the very view broadcasting reads,
# with stride 0 on the repeated axes, over the mask's own 10 booleans.

# %% [markdown] tags=["lang-zh"] en_hash="687c8e73b5"
# 验证掩码从未被拷贝：`expand` 构造的正是广播时读取的那个视图，被重复的维度步长为 0，底下仍是掩码自己的 10 个布尔值。

# %%
big = keep4.expand(B, H, L_q, L_k)
print(tuple(big.shape), big.stride(), shares_memory(big, keep))

# %% [markdown] tags=["lang-en"]
# Why not use the (B, L_k) mask as it is? Broadcasting would line it up with the *last two* axes
# of the scores, (L_q, L_k). When $L_q \ne B$ that fails loudly. When $L_q = B$ it runs and masks
# the wrong entries: query $i$ of every sequence gets the mask of sequence $i$.

# %% [markdown] tags=["lang-zh"] en_hash="a64f829382"
# 为什么不直接用 (B, L_k) 的掩码？广播会把它与分数的*最后两维* (L_q, L_k) 对齐。$L_q \ne B$ 时会明确报错；
# $L_q = B$ 时却能顺利运行，只是遮错了位置：每条序列的第 $i$ 个查询用的都是第 $i$ 条序列的掩码。

# %%
scores_2 = torch.randn(B, H, 2, L_k)  # L_q = B = 2
right = scores_2.masked_fill(~keep4, float("-inf"))
wrong = scores_2.masked_fill(~keep, float("-inf"))  # runs: keep lines up with (L_q, L_k)
print(tuple(wrong.shape), torch.equal(wrong, right))

# %% [markdown] tags=["lang-en"]
# Pick a mask shape and a scores shape below and see how they line up: blue marks a size-1 (or
# missing) axis that is repeated, red a clash. Try the mask (2, 5) with each scores shape, and
# (2, 1, 5, 1), which lines up but masks queries instead of keys.

# %% [markdown] tags=["lang-zh"] en_hash="578b39dc21"
# 在下面选一个掩码形状和一个分数形状，看它们如何对齐：蓝色表示被重复的大小为 1（或缺失）的维度，红色表示冲突。
# 试试掩码 (2, 5) 配上每一种分数形状，再试试 (2, 1, 5, 1)：它能对齐，遮住的却是查询而不是键。

# %% tags=["nbval-ignore-output"]
broadcast_explorer()

# %% [markdown] tags=["lang-en"]
# The view function for the silent case above, the (B, L_k) mask against scores with $L_q = B$:

# %% [markdown] tags=["lang-zh"] en_hash="bbf17b8eb5"
# 对上面那种不报错的情况，即 (B, L_k) 的掩码配上 $L_q = B$ 的分数，直接调用视图函数：

# %%
_, summary = broadcast_view(mask=(2, 5), scores=(2, 4, 2, 5))
print(summary)

# %% [markdown] tags=["lang-en"]
# ### Exercise 00.padding_mask
#
# Build the keep mask from the sequence lengths instead of writing it by hand. `lengths` has
# shape (B,) and holds the number of real tokens of each sequence; `max_len` is $L_k$. Return a
# boolean mask of shape (B, 1, 1, L_k) that is True where the key position is a real token,
# that is where position < length (positions count from 0).
#
# Hint: compare a (L_k,) tensor of positions with a (B, 1) view of the lengths and let
# broadcasting build the (B, L_k) grid; then add the two size-1 axes.

# %% [markdown] tags=["lang-zh"] en_hash="45386ed638"
# ### 练习 00.padding_mask
#
# 不再手写，而是根据序列长度构造保留掩码，让填充位置为 False。`lengths` 的形状是 (B,)，存放每条序列的真实词元数；`max_len` 就是 $L_k$。
# 返回一个形状为 (B, 1, 1, L_k) 的布尔掩码：键的位置是真实词元时为 True，即位置 < 长度（位置从 0 开始计数）。
#
# 提示：把形状为 (L_k,) 的位置张量与长度的 (B, 1) 视图相比较，让广播生成 (B, L_k) 的网格；再补上两个大小为 1 的维度。

# %% tags=["exercise"] exercise="00.padding_mask"
def padding_mask(lengths, max_len):
    """lengths: (B,) integers. Returns the keep mask (B, 1, 1, max_len), True at real tokens."""
    ### BEGIN SOLUTION
    positions = torch.arange(max_len)  # (L_k,)
    real = positions < lengths.unsqueeze(-1)  # (L_k,) against (B, 1) -> (B, L_k)
    return real[:, None, None, :]  # (B, 1, 1, L_k)
    ### END SOLUTION


# %%
check("00.padding_mask", padding_mask)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. `einsum`
#
# `torch.einsum` names every axis with a letter. A letter that appears in the inputs but not
# after `->` is summed over; the letters after `->` are the axes of the result, in that order.
# The attention scores are the **dot product** of every query with every key, for every
# sequence and head:
#
# $$S_{bhqk} = \sum_d Q_{bhqd}\, K_{bhkd}.$$
#
# Written as `einsum`, the formula is the code. With matrix products, $K$ needs a transpose first:
#
# | what | `einsum` | matrix products and transposes |
# | --- | --- | --- |
# | scores $QK^\top$ | `torch.einsum("bhqd,bhkd->bhqk", q, k)` | `q @ k.transpose(-2, -1)` |
# | weighted sum of the values | `torch.einsum("bhqk,bhkd->bhqd", w, v)` | `w @ v` |
# | linear layer without bias | `torch.einsum("bli,oi->blo", x, W)` | `x @ W.T` |
# | one dot product per row | `torch.einsum("bld,bld->bl", a, c)` | `(a * c).sum(-1)` |

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="44cf114f00"
# ## 6. `einsum`
#
# `torch.einsum` 给每个维度起一个字母名。出现在输入里、却没有出现在 `->` 之后的字母会被求和消掉；
# `->` 之后的字母就是结果的各个维度，顺序也照此排列。注意力分数是每条序列、每个头上，每个查询与每个键的**点积**：
#
# $$S_{bhqk} = \sum_d Q_{bhqd}\, K_{bhkd}.$$
#
# 用 `einsum` 写，公式本身就是代码；用矩阵乘法写，则要先把 $K$ 转置：
#
# | 计算 | `einsum` | 矩阵乘法与转置 |
# | --- | --- | --- |
# | 分数 $QK^\top$ | `torch.einsum("bhqd,bhkd->bhqk", q, k)` | `q @ k.transpose(-2, -1)` |
# | 对值加权求和 | `torch.einsum("bhqk,bhkd->bhqd", w, v)` | `w @ v` |
# | 不带偏置的线性层 | `torch.einsum("bli,oi->blo", x, W)` | `x @ W.T` |
# | 每行一个点积 | `torch.einsum("bld,bld->bl", a, c)` | `(a * c).sum(-1)` |

# %%
q = torch.randn(2, 4, 3, 8)  # (B, H, L_q, D)
k = torch.randn(2, 4, 5, 8)  # (B, H, L_k, D)
v = torch.randn(2, 4, 5, 6)  # (B, H, L_k, D_v)

s_einsum = torch.einsum("bhqd,bhkd->bhqk", q, k)
s_matmul = q @ k.transpose(-2, -1)
print(tuple(s_einsum.shape), torch.allclose(s_einsum, s_matmul, atol=1e-5))

w = torch.softmax(s_einsum, dim=-1)
o_einsum = torch.einsum("bhqk,bhkd->bhqd", w, v)
print(tuple(o_einsum.shape), torch.allclose(o_einsum, w @ v, atol=1e-5))

# %% [markdown] tags=["lang-en"]
# `einsum` is neither magic nor free. It returns a new tensor, and underneath it permutes the
# axes and calls the same batched matrix product, copying an input first when its memory is
# not laid out for that. What it buys is clarity: every axis is named in one place, and the
# transposes are done for you, as the next exercise shows.

# %% [markdown] tags=["lang-zh"] en_hash="09d2d99f55"
# `einsum` 既不神奇，也不免费。它返回一个新张量；底层先重排维度，再调用同样的批量矩阵乘法，
# 输入的内存布局不合适时还会先拷贝一份。它换来的是清晰：所有维度在一处命名，转置也替你做好了，下一道练习就会用到这一点。

# %% [markdown] tags=["lang-en"]
# ### Exercise 00.scores_einsum
#
# Right after the projection, queries and keys come laid out as (B, L, H, D): sequence,
# position, head, feature (section 7 shows why). Compute the scores (B, H, L_q, L_k) straight
# from that layout, with a single `torch.einsum` and no `transpose` or `permute`. `q` has shape
# (B, L_q, H, D) and `k` has shape (B, L_k, H, D); return the unscaled scores.

# %% [markdown] tags=["lang-zh"] en_hash="0ea4cfbc31"
# ### 练习 00.scores_einsum
#
# 刚做完投影时，查询和键的布局是 (B, L, H, D)：序列、位置、头、特征（第 7 节会说明原因）。
# 请直接从这种布局算出分数 (B, H, L_q, L_k)：只用一次 `torch.einsum`，不用 `transpose` 或 `permute`。
# `q` 的形状是 (B, L_q, H, D)，`k` 的形状是 (B, L_k, H, D)；返回未缩放的分数。

# %% tags=["exercise"] exercise="00.scores_einsum"
def scores_einsum(q, k):
    """q: (B, L_q, H, D), k: (B, L_k, H, D). Returns the scores (B, H, L_q, L_k)."""
    ### BEGIN SOLUTION
    return torch.einsum("bqhd,bkhd->bhqk", q, k)
    ### END SOLUTION


# %%
check("00.scores_einsum", scores_einsum)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Splitting and merging heads
#
# **Multi-head attention** runs $H$ attentions side by side, each on its own $D$ features. One
# linear layer projects the input (B, L, d_model) for all heads at once, to (B, L, H·D). Along
# the feature axis of each position sit head 0's $D$ features, then head 1's, and so on. To
# attend head by head we need (B, H, L, D), where the last two axes form one (L, D) matrix per
# head. In the picture, one sequence with $L = 3$, $H = 2$, $D = 3$, each feature numbered by
# its place in memory:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="a0050b4f6e"
# ## 7. 拆分与合并多头
#
# **多头注意力**让 $H$ 个注意力并排运行，每个头只用自己的 $D$ 个特征。一个线性层一次性为所有头做投影，
# 把输入 (B, L, d_model) 变成 (B, L, H·D)。每个位置的特征维上，先是第 0 个头的 $D$ 个特征，接着是第 1 个头的，依此类推。
# 要逐个头计算注意力，需要的形状是 (B, H, L, D)：最后两维为每个头构成一个 (L, D) 矩阵。
# 下图是一条序列，$L = 3$，$H = 2$，$D = 3$，每个特征按它在内存中的位置编号：

# %%
fig, ax = plt.subplots(figsize=(8, 2.3), layout="constrained")
viz.split_heads_picture(3, 2, 3, ax=ax)
plt.show()

# %% [markdown] tags=["lang-en"]
# Two steps get there. First split the last axis into (H, D), heads first; this is a view,
# since it only cuts one contiguous axis in two. Then swap the position and head axes; also a
# view, but no longer contiguous. A single `view` straight to (B, H, L, D) has the right shape
# and the wrong numbers: it cuts memory into blocks of $L \cdot D$ numbers, each spanning
# several positions.
#
# ### Exercise 00.split_heads
#
# Write `split_heads(x, num_heads)`: `x` has shape (B, L, H·D) with $H$ = `num_heads`; return
# (B, H, L, D).

# %% [markdown] tags=["lang-zh"] en_hash="136110aae4"
# 分两步完成。先把最后一维拆成 (H, D)，头在前；这只是把一个连续的维度一分为二，所以是视图。
# 再交换位置维和头维；这仍是视图，但已经不连续了。如果一步 `view` 直接变成 (B, H, L, D)，形状是对的，数却错了：
# 它把内存切成每块 $L \cdot D$ 个数，每一块横跨好几个位置。
#
# ### 练习 00.split_heads
#
# 写出 `split_heads(x, num_heads)`：`x` 的形状是 (B, L, H·D)，其中 $H$ = `num_heads`；返回 (B, H, L, D)。

# %% tags=["exercise"] exercise="00.split_heads"
def split_heads(x, num_heads):
    """x: (B, L, H·D) with H = num_heads. Returns (B, H, L, D)."""
    ### BEGIN SOLUTION
    B, L, HD = x.shape
    x = x.view(B, L, num_heads, HD // num_heads)  # (B, L, H, D)
    return x.transpose(1, 2)  # (B, H, L, D), a view that is not contiguous
    ### END SOLUTION


# %%
check("00.split_heads", split_heads)

# %% [markdown] tags=["lang-en"]
# Here is the result in memory, for one sequence with $L = 2$, $H = 2$, $D = 2$ (written with
# `unflatten`, another way to split an axis). It is a view of the projection's memory that
# reads it out of order, so it is not contiguous. That matters on the way back.

# %% [markdown] tags=["lang-zh"] en_hash="6a3a063d43"
# 下面看拆分结果在内存中的样子：一条序列，$L = 2$，$H = 2$，$D = 2$（这里用 `unflatten` 拆分维度，这是另一种写法）。
# 它是投影结果那块内存的视图，但读取顺序被打乱了，所以不连续。这一点在合并时很关键。

# %%
tiny = torch.arange(8).view(1, 2, 4)  # (B, L, H·D)
tiny_heads = tiny.unflatten(-1, (2, 2)).transpose(1, 2)  # (B, H, L, D)
print(tuple(tiny_heads.shape), tiny_heads.stride(), tiny_heads.is_contiguous(), shares_memory(tiny_heads, tiny))
fig, ax = plt.subplots(figsize=(6, 2), layout="constrained")
viz.memory_order(tiny_heads, ax=ax, title="(B, H, L, D)")
plt.show()

# %% [markdown] tags=["lang-en"]
# After attention, the heads' outputs (B, H, L, D) go back to (B, L, H·D), so that one linear
# layer can mix the heads. Swap the head and position axes back, then merge (H, D) into one
# axis. After the swap the tensor is not contiguous, so `view` cannot merge the two axes
# (except in corner cases such as $L = 1$). `reshape`, or `.contiguous()` followed by `view`,
# copies the data once: the one copy in the shape handling of multi-head attention.
#
# ### Exercise 00.merge_heads
#
# Write `merge_heads(x)`, the inverse of `split_heads`: `x` has shape (B, H, L, D); return
# (B, L, H·D), head 0's $D$ features first.

# %% [markdown] tags=["lang-zh"] en_hash="a41ca2f533"
# 注意力算完后，各个头的输出 (B, H, L, D) 要变回 (B, L, H·D)，好让一个线性层把各头的结果混合起来。
# 先把头维和位置维换回来，再把 (H, D) 合并成一维。交换之后张量不再连续，`view` 无法合并这两维
# （$L = 1$ 之类的特殊情况除外）。`reshape`，或先 `.contiguous()` 再 `view`，会把数据拷贝一次：
# 这是多头注意力的形状处理中唯一的一次拷贝。
#
# ### 练习 00.merge_heads
#
# 写出 `merge_heads(x)`，即 `split_heads` 的逆操作：`x` 的形状是 (B, H, L, D)；返回 (B, L, H·D)，第 0 个头的 $D$ 个特征在前。

# %% tags=["exercise"] exercise="00.merge_heads"
def merge_heads(x):
    """x: (B, H, L, D). Returns (B, L, H·D)."""
    ### BEGIN SOLUTION
    B, H, L, D = x.shape
    x = x.transpose(1, 2)  # (B, L, H, D), not contiguous
    return x.reshape(B, L, H * D)  # copies; .view would fail here
    ### END SOLUTION


# %%
check("00.merge_heads", merge_heads)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. All together: the shapes of multi-head attention
#
# Every tool of this lesson in one forward pass of multi-head self-attention over the two
# padded sequences of section 5, with the shape after each step. Lesson 01 explains the
# attention itself and lesson 04 turns this into a module; here the point is the shapes, and
# the check against PyTorch's own `F.scaled_dot_product_attention`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="7dd11c4197"
# ## 8. 综合：多头注意力中的形状
#
# 把本课的所有工具串起来：对第 5 节那两条填充过的序列做一次多头自注意力的前向计算，并打印每一步之后的形状。
# 注意力本身在第 01 课讲解，第 04 课会把它写成模块；这里关注的是形状，以及与 PyTorch 自带的
# `F.scaled_dot_product_attention` 的对照。

# %%
H, D = 4, 3
x = torch.randn(B, L_k, H * D)  # (B, L, d_model): the two sequences of section 5
w_q, w_k, w_v = (torch.randn(H * D, H * D) / (H * D) ** 0.5 for _ in range(3))

q, k, v = (x @ w for w in (w_q, w_k, w_v))  # each (B, L, H·D)
q, k, v = (t.unflatten(-1, (H, D)).transpose(1, 2) for t in (q, k, v))  # each (B, H, L, D)
scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / D**0.5  # (B, H, L_q, L_k)
weights = torch.softmax(scores.masked_fill(~keep4, float("-inf")), dim=-1)  # keep4: (B, 1, 1, L_k)
heads = weights @ v  # (B, H, L_q, D)
out = heads.transpose(1, 2).flatten(2)  # (B, L_q, H·D): the one copy
for name, tensor in [("q", q), ("scores", scores), ("weights", weights), ("heads", heads), ("out", out)]:
    print(f"{name:>8}", tuple(tensor.shape))

reference = F.scaled_dot_product_attention(q, k, v, attn_mask=keep4)
print(torch.allclose(heads, reference, atol=1e-5), shares_memory(out, heads))

# %% [markdown] tags=["lang-en"]
# ## Summary
#
# - A tensor is storage plus shape and stride. It is contiguous when index order is memory order.
# - `view`, `transpose`, `permute`, `squeeze`, `unsqueeze` and `expand` are views: free, and
#   they share memory. `reshape` and `contiguous()` copy only when they must; `view` never does
#   and fails instead.
# - Broadcasting lines shapes up from the right and repeats size-1 axes without copying: a
#   padding mask of shape (B, 1, 1, L_k) fits scores of shape (B, H, L_q, L_k). A mask with
#   too few axes can line up with the wrong axes and still run.
# - `einsum` names the axes and does the transposes; it costs what the matrix product costs.
# - Splitting heads is a view then a transpose; merging heads is a transpose then a copy.
#
# Next, lesson 01 builds scaled dot-product attention on these shapes, and lesson 02 looks at
# masks and their conventions in depth.

# %% [markdown] tags=["lang-zh"] en_hash="ea356b310e"
# ## 小结
#
# - 张量 = 存储 + 形状 + 步长。下标顺序与内存顺序一致时，张量就是连续的。
# - `view`、`transpose`、`permute`、`squeeze`、`unsqueeze`、`expand` 返回的都是视图：没有开销，且共享内存。
#   `reshape` 和 `contiguous()` 只在必要时拷贝；`view` 从不拷贝，做不到就报错。
# - 广播从右往左对齐形状，并在不拷贝的前提下重复大小为 1 的维度：形状为 (B, 1, 1, L_k) 的填充掩码
#   正好能与形状为 (B, H, L_q, L_k) 的分数配合。维度不够的掩码可能与错误的维度对齐，却照样能运行。
# - `einsum` 为各维命名并替你完成转置；它的开销与对应的矩阵乘法相同。
# - 拆分多头 = 一次视图 + 一次转置；合并多头 = 一次转置 + 一次拷贝。
#
# 下一课（第 01 课）会在这些形状之上实现缩放点积注意力，第 02 课则深入讨论掩码及其各种约定。
