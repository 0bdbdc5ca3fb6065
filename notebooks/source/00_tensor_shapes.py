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

from course_utils import check, claim, setup, viz
from course_utils.widgets import broadcast_explorer, broadcast_view, permute_explorer, permute_view

setup(lang="en")


def shares_memory(a, b):
    # lang: en
    """True when a and b read the same block of memory: one is a view of the other (or both of a third)."""
    # lang: zh
    """a 与 b 读取同一块内存时为 True：其中一个是另一个的视图（或两者都是同一个张量的视图）。"""
    # lang: end
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
# 张量里的数存放在一块平铺的一维内存中，这块内存叫作*存储*（storage）。形状规定每个维度上的索引有几个取值；
# **步长**（stride）规定沿某个维度走一步，在内存里要跨过几个位置。元素 $(i_0, \dots, i_{n-1})$ 的位置是
#
# $$\text{offset} = \sum_k i_k \cdot \text{stride}_k$$
#
# （另加一个固定的起始偏移，本课中都是 0）。如果按索引顺序（最后一维变化最快）读取元素，
# 恰好等于从左到右读取内存，这个张量就是**连续**的（contiguous）：最后一维的步长为 1，
# 其余每一维的步长都等于后一维的步长乘以后一维的大小。

# %%
x = torch.arange(12).view(3, 4)
print(x)
print(tuple(x.shape), x.stride())
# lang: en
claim("one row down skips 4 places in memory, one column right skips 1: stride (4, 1)", x.stride() == (4, 1))
claim("x is contiguous", x.is_contiguous())
# lang: zh
claim("向下一行跨过内存中的 4 个位置，向右一列跨过 1 个：步长为 (4, 1)", x.stride() == (4, 1))
claim("x 是连续的", x.is_contiguous())
# lang: end

# %% [markdown] tags=["lang-en"]
# Stepping down one row skips 4 numbers in memory, stepping right one column skips 1: the
# stride is (4, 1). Since `x` holds 0, 1, 2, … in memory order, each value is also its offset,
# so we can check the formula on one element: `x[2, 1]` should sit at $2 \cdot 4 + 1 \cdot 1 = 9$.

# %% [markdown] tags=["lang-zh"] en_hash="2ad50b9fde"
# 向下走一行要跨过内存中的 4 个数，向右走一列只跨过 1 个，所以步长是 (4, 1)。`x` 在内存中依次存放 0, 1, 2, …，
# 每个元素的值恰好就是它的偏移量，因此可以拿一个元素验证公式：`x[2, 1]` 应当位于 $2 \cdot 4 + 1 \cdot 1 = 9$。

# %%
i, j = 2, 1
offset = i * x.stride(0) + j * x.stride(1)
print(offset, x[i, j].item())
# lang: en
claim("x[2, 1] sits at offset 2·4 + 1·1 = 9, and its value is 9", offset == 9 and x[i, j].item() == 9)
# lang: zh
claim("x[2, 1] 位于偏移 2·4 + 1·1 = 9 处，它的值也是 9", offset == 9 and x[i, j].item() == 9)
# lang: end

# %% [markdown] tags=["lang-en"]
# The picture shows the memory on top and the elements in index order below, with a line from
# each element to the memory cell it is read from. For `x` the lines are parallel: `x` is
# contiguous. Its transpose `x.t()` reads the *same* memory in another order, so the lines
# cross: the stride is now (1, 4), and the transpose is not contiguous.

# %% [markdown] tags=["lang-zh"] en_hash="466c73dedb"
# 下图上方是内存，下方是按索引顺序排列的元素，每条线把一个元素连到它读取的内存格。`x` 的连线互相平行：
# `x` 是连续的。它的转置 `x.t()` 用另一种顺序读取*同一块*内存，连线便交叉起来：步长变成了 (1, 4)，
# 转置后的张量不再连续。

# %%
fig, axes = plt.subplots(2, 1, figsize=(8, 4), layout="constrained")
# lang: en
viz.memory_order(x, ax=axes[0], title=f"x   stride {x.stride()}")
viz.memory_order(x.t(), ax=axes[1], title=f"x.t()   stride {x.t().stride()}")
# lang: zh
viz.memory_order(x, ax=axes[0], title=f"x   步长 {x.stride()}")
viz.memory_order(x.t(), ax=axes[1], title=f"x.t()   步长 {x.t().stride()}")
# lang: end
plt.show()
# lang: en
claim("x.t() reads the same memory with stride (1, 4), and is not contiguous",
      shares_memory(x.t(), x) and x.t().stride() == (1, 4) and not x.t().is_contiguous())
# lang: zh
claim("x.t() 以步长 (1, 4) 读取同一块内存，它不是连续的",
      shares_memory(x.t(), x) and x.t().stride() == (1, 4) and not x.t().is_contiguous())
# lang: end

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
print(tuple(v.shape), v.stride())
v[0, 0] = 100
print(x[0, 0].item())
# lang: en
claim("v is a view: it shares the memory of x", shares_memory(v, x))
claim("writing 100 through v changed x[0, 0] to 100", x[0, 0].item() == 100)
# lang: zh
claim("v 是视图：它与 x 共享内存", shares_memory(v, x))
claim("通过 v 写入 100 之后，x[0, 0] 也变成了 100", x[0, 0].item() == 100)
# lang: end
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
print(t.stride())
try:
    t.view(12)
    refusal = ""
except RuntimeError as error:
    refusal = str(error)
flat = t.reshape(12)
print(flat)
# lang: en
claim("t is a view of x that is not contiguous", shares_memory(t, x) and not t.is_contiguous())
claim("t.view(12) raises a RuntimeError that suggests .reshape(...)", ".reshape(...)" in refusal)
claim("t.reshape(12) is a copy: it does not share the memory of x", not shares_memory(flat, x))
# lang: zh
claim("t 是 x 的视图，但不连续", shares_memory(t, x) and not t.is_contiguous())
claim("t.view(12) 抛出 RuntimeError，报错信息建议改用 .reshape(...)", ".reshape(...)" in refusal)
claim("t.reshape(12) 是副本：它不与 x 共享内存", not shares_memory(flat, x))
# lang: end

# %% [markdown] tags=["lang-en"]
# Check the three rules: `reshape` of a contiguous tensor is a view, `reshape` of a
# non-contiguous one is a copy, and `contiguous()` copies only when it has to.

# %% [markdown] tags=["lang-zh"] en_hash="42be5303a5"
# 验证上面三条规则：对连续张量 `reshape` 得到视图，对不连续的张量 `reshape` 得到副本，
# `contiguous()` 只在必要时才拷贝。

# %%
# lang: en
claim("reshape of the contiguous x is a view", shares_memory(x.reshape(6, 2), x))
claim("reshape of the non-contiguous t is a copy", not shares_memory(t.reshape(12), x))
claim("x.contiguous() is x itself", x.contiguous() is x)
claim("t.contiguous() is a copy", not shares_memory(t.contiguous(), x))
# lang: zh
claim("对连续的 x 做 reshape，得到视图", shares_memory(x.reshape(6, 2), x))
claim("对不连续的 t 做 reshape，得到副本", not shares_memory(t.reshape(12), x))
claim("x.contiguous() 就是 x 本身", x.contiguous() is x)
claim("t.contiguous() 是副本", not shares_memory(t.contiguous(), x))
# lang: end

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
# `x.T` 把所有维度的顺序整个反过来；`x.mT` 交换最后两维，也就是对一批矩阵中的每个矩阵做转置。
# 注意力公式里的 $K^\top$ 指的正是这个：`k.transpose(-2, -1)`。

# %%
x3 = torch.arange(24).view(2, 3, 4)
p = (2, 0, 1)
y = x3.permute(p)
print(tuple(x3.shape), x3.stride())
print(tuple(y.shape), y.stride())
# lang: en
claim("y.shape[k] = x3.shape[p[k]] and y.stride(k) = x3.stride(p[k]) for every k",
      all(y.shape[k] == x3.shape[p[k]] and y.stride(k) == x3.stride(p[k]) for k in range(3)))
claim("y is a view of the memory of x3, and is not contiguous", shares_memory(y, x3) and not y.is_contiguous())
# lang: zh
claim("对每个 k，都有 y.shape[k] = x3.shape[p[k]]、y.stride(k) = x3.stride(p[k])",
      all(y.shape[k] == x3.shape[p[k]] and y.stride(k) == x3.stride(p[k]) for k in range(3)))
claim("y 是 x3 那块内存的视图，而且不连续", shares_memory(y, x3) and not y.is_contiguous())
# lang: end

# %% [markdown] tags=["lang-en"]
# Check: element $(k, i, j)$ of `y` is element $(i, j, k)$ of `x3`, and the inverse
# permutation, `permute(1, 2, 0)`, gives back exactly `x3`.

# %% [markdown] tags=["lang-zh"] en_hash="ddd70bd0dd"
# 验证：`y` 的元素 $(k, i, j)$ 就是 `x3` 的元素 $(i, j, k)$；用逆排列 `permute(1, 2, 0)` 恰好还原出 `x3`。

# %%
# lang: en
claim("y[k, i, j] == x3[i, j, k] for all 24 elements",
      all(y[k, i, j] == x3[i, j, k] for i in range(2) for j in range(3) for k in range(4)))
claim("permute(1, 2, 0) gives back exactly x3", torch.equal(y.permute(1, 2, 0), x3))
# lang: zh
claim("全部 24 个元素都满足 y[k, i, j] == x3[i, j, k]",
      all(y[k, i, j] == x3[i, j, k] for i in range(2) for j in range(3) for k in range(4)))
claim("permute(1, 2, 0) 恰好还原出 x3", torch.equal(y.permute(1, 2, 0), x3))
# lang: end

# %% [markdown] tags=["lang-en"]
# Try every order of the three axes of `x3` below (the explorer calls it `x`). The text shows the
# shape, the stride and whether the result shares memory with `x`; the picture shows how the
# result reads memory. Tick `.contiguous()` to copy the result into memory laid out in index
# order: the lines straighten and the memory is no longer shared, except for the order
# (0, 1, 2), which is contiguous already: there `.contiguous()` copies nothing and returns the
# view itself, which still shares the memory of `x`.

# %% [markdown] tags=["lang-zh"] en_hash="c8c9b89c39"
# 在下面试试 `x3` 三个维度的所有排列（探索器里把它叫作 `x`）。文字给出形状、步长，以及结果是否与 `x` 共享内存；
# 图中显示结果如何读取内存。勾选 `.contiguous()` 会把结果拷贝到按索引顺序排布的新内存里：连线变直，
# 也不再共享内存。唯一的例外是顺序 (0, 1, 2)：它本来就是连续的，`.contiguous()` 什么也不拷贝，
# 直接返回这个视图本身，它仍与 `x` 共享内存。

# %% tags=["nbval-ignore-output"]
permute_explorer()

# %% [markdown] tags=["lang-en"]
# The explorer's view is a plain function; here it is for one setting, the copy of `x.permute(0, 2, 1)`:

# %% [markdown] tags=["lang-zh"] en_hash="ba893492f0"
# 探索器背后的视图函数就是一个普通函数。下面是其中一种设置，即 `x.permute(0, 2, 1)` 的副本：

# %%
_, summary = permute_view(order=(0, 2, 1), contiguous=True)
print(summary)
copied = x3.permute(0, 2, 1).contiguous()
same = x3.permute(0, 1, 2)
# lang: en
claim("the copy is contiguous and no longer shares memory with x3", copied.is_contiguous() and not shares_memory(copied, x3))
claim("for the order (0, 1, 2), .contiguous() copies nothing: it returns the view itself", same.contiguous() is same)
# lang: zh
claim("副本是连续的，不再与 x3 共享内存", copied.is_contiguous() and not shares_memory(copied, x3))
claim("顺序为 (0, 1, 2) 时，.contiguous() 什么也不拷贝，直接返回这个视图本身", same.contiguous() is same)
# lang: end

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
# lang: en
lengths = torch.tensor([5, 3])  # B = 2 sequences
# lang: zh
lengths = torch.tensor([5, 3])  # B = 2 条序列
# lang: end
print(tuple(lengths.unsqueeze(1).shape), tuple(lengths[:, None].shape), tuple(lengths[:, None, None, None].shape))
# lang: en
claim("lengths[:, None] is lengths.unsqueeze(1), a view",
      torch.equal(lengths[:, None], lengths.unsqueeze(1)) and shares_memory(lengths[:, None], lengths))
# lang: zh
claim("lengths[:, None] 就是 lengths.unsqueeze(1)，而且是视图",
      torch.equal(lengths[:, None], lengths.unsqueeze(1)) and shares_memory(lengths[:, None], lengths))
# lang: end

# lang: en
one = torch.zeros(1, 7, 1)  # a batch of one sequence: 7 positions, 1 feature each
# lang: zh
one = torch.zeros(1, 7, 1)  # 只有一条序列的批量：7 个位置，每个位置 1 个特征
# lang: end
print(tuple(one.squeeze().shape), tuple(one.squeeze(-1).shape))
# lang: en
claim("squeeze() removed the batch axis too: (1, 7, 1) became (7,)", one.squeeze().shape == (7,))
claim("squeeze(-1) removed only the last axis, (1, 7), and is a view",
      one.squeeze(-1).shape == (1, 7) and shares_memory(one.squeeze(-1), one))
# lang: zh
claim("squeeze() 连批量维也去掉了：(1, 7, 1) 变成了 (7,)", one.squeeze().shape == (7,))
claim("squeeze(-1) 只去掉最后一维，得到 (1, 7)，而且是视图",
      one.squeeze(-1).shape == (1, 7) and shares_memory(one.squeeze(-1), one))
# lang: end

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
# lang: en
names = ("keep", "scores")
# lang: zh
names = ("keep（掩码）", "scores（分数）")
# lang: end
viz.broadcast_picture((2, 1, 1, 5), (2, 4, 3, 5), ax=ax, names=names, axis_names=("B", "H", "L_q", "L_k"))
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
hidden = masked.isneginf()  # (B, H, L_q, L_k)
# lang: en
print(masked[1, 0])  # sequence 1, head 0
claim("the last two keys of sequence 1 are −∞ for every head and every query", hidden[1, :, :, 3:].all())
claim("and nothing else is: 2 keys × 4 heads × 3 queries = 24 entries", hidden.sum() == 2 * H * L_q)
# lang: zh
print(masked[1, 0])  # 序列 1，头 0
claim("序列 1 的最后两个键对每个头、每个查询都是 −∞", hidden[1, :, :, 3:].all())
claim("其他位置都不是：2 个键 × 4 个头 × 3 个查询 = 24 个元素", hidden.sum() == 2 * H * L_q)
# lang: end

# %% [markdown] tags=["lang-en"]
# Check that the mask was never copied: `expand` builds the very view broadcasting reads,
# with stride 0 on the repeated axes, over the mask's own 10 booleans.

# %% [markdown] tags=["lang-zh"] en_hash="687c8e73b5"
# 验证掩码从未被拷贝：`expand` 构造的正是广播时读取的那个视图，被重复的维度步长为 0，底下仍是掩码自己的 10 个布尔值。

# %%
big = keep4.expand(B, H, L_q, L_k)
print(tuple(big.shape), big.stride())
# lang: en
claim("big has stride 0 on the repeated axes H and L_q", big.stride(1) == 0 and big.stride(2) == 0)
claim("its 120 entries read the mask's own 10 booleans: the same memory, 10 bytes",
      big.numel() == 120 and shares_memory(big, keep) and big.untyped_storage().nbytes() == 10)
claim("masking with big gives exactly what broadcasting gave", torch.equal(scores.masked_fill(~big, float("-inf")), masked))
# lang: zh
claim("在被重复的 H 维和 L_q 维上，big 的步长为 0", big.stride(1) == 0 and big.stride(2) == 0)
claim("它的 120 个元素读的是掩码自己的 10 个布尔值：同一块内存，共 10 字节",
      big.numel() == 120 and shares_memory(big, keep) and big.untyped_storage().nbytes() == 10)
claim("用 big 遮住分数，结果与广播得到的完全相同", torch.equal(scores.masked_fill(~big, float("-inf")), masked))
# lang: end

# %% [markdown] tags=["lang-en"]
# Why not use the (B, L_k) mask as it is? Broadcasting would line it up with the *last two* axes
# of the scores, (L_q, L_k). When $L_q \ne B$ that fails loudly. When $L_q = B$ it runs and masks
# the wrong entries: query $i$ of every sequence gets the mask of sequence $i$.

# %% [markdown] tags=["lang-zh"] en_hash="a64f829382"
# 为什么不直接用 (B, L_k) 的掩码？广播会把它与分数的*最后两维* (L_q, L_k) 对齐。$L_q \ne B$ 时会明确报错；
# $L_q = B$ 时却能顺利运行，只是遮错了位置：每条序列的第 $i$ 个查询用的都是第 $i$ 条序列的掩码。

# %%
try:
    scores.masked_fill(~keep, float("-inf"))  # L_q = 3, B = 2
    failed = False
except RuntimeError:
    failed = True
# lang: en
claim("with L_q = 3 ≠ B = 2, the (B, L_k) mask raises a RuntimeError", failed)
# lang: zh
claim("L_q = 3 ≠ B = 2 时，(B, L_k) 的掩码会抛出 RuntimeError", failed)
# lang: end

scores_2 = torch.randn(B, H, 2, L_k)  # L_q = B = 2
right = scores_2.masked_fill(~keep4, float("-inf"))
# lang: en
wrong = scores_2.masked_fill(~keep, float("-inf"))  # runs: keep lines up with (L_q, L_k)
# lang: zh
wrong = scores_2.masked_fill(~keep, float("-inf"))  # 照样运行：keep 与 (L_q, L_k) 对齐
# lang: end
print(tuple(wrong.shape))
query_i_gets_mask_i = torch.equal(wrong.isneginf(), (~keep).expand(B, H, 2, L_k))
# lang: en
claim("with L_q = B = 2 it runs, with the shape of the scores", wrong.shape == scores_2.shape)
claim("but it masks other entries than the right mask", not torch.equal(wrong, right))
claim("query i of every sequence got the mask of sequence i", query_i_gets_mask_i)
# lang: zh
claim("L_q = B = 2 时它照样运行，结果的形状与分数相同", wrong.shape == scores_2.shape)
claim("但遮住的位置与正确的掩码不同", not torch.equal(wrong, right))
claim("每条序列的第 i 个查询用的都是第 i 条序列的掩码", query_i_gets_mask_i)
# lang: end

# %% [markdown] tags=["lang-en"]
# The same mask fails silently in a second way, and a common one: decoding. A decoder that
# generates one token at a time scores a single query per step, so its scores have shape
# (B, H, 1, L_k). The (B, L_k) mask now lines its batch axis up with that size-1 query axis, and
# broadcasting repeats the *scores* along it instead of failing: the result is bigger than the
# scores it was made from, (B, H, B, L_k). The softmax and the product with the values run on,
# with B queries per sequence where there was one, and query $i$ again carries the mask of
# sequence $i$. The right mask is the same as before, (B, 1, 1, L_k): it leaves the scores'
# shape alone.

# %% [markdown] tags=["lang-zh"] en_hash="2a73aaa88c"
# 同一个掩码还有第二种不报错的出错方式，而且很常见：解码。解码器每一步只生成一个词元，每步只有一个查询，
# 所以分数的形状是 (B, H, 1, L_k)。这时 (B, L_k) 掩码的批量维与这个大小为 1 的查询维对齐，
# 广播不会报错，而是沿这一维把*分数*重复了：结果比原来的分数还大，形状为 (B, H, B, L_k)。
# 后面的 softmax 和与值相乘都照常运行，只是每条序列本该只有一个查询，现在却有 B 个，
# 而且第 $i$ 个查询用的仍是第 $i$ 条序列的掩码。正确的掩码形状和前面一样，是 (B, 1, 1, L_k)：它不改变分数的形状。

# %%
# lang: en
step = torch.randn(B, H, 1, L_k)  # one decoding step: a single query
grown = step.masked_fill(~keep, float("-inf"))  # runs: keep's B lines up with the size-1 query axis
# lang: zh
step = torch.randn(B, H, 1, L_k)  # 解码的一步：只有一个查询
grown = step.masked_fill(~keep, float("-inf"))  # 照样运行：keep 的 B 维与大小为 1 的查询维对齐
# lang: end
fixed = step.masked_fill(~keep4, float("-inf"))
values = torch.randn(B, H, L_k, 3)  # (B, H, L_k, D_v)
outputs = torch.softmax(grown, dim=-1) @ values
print(tuple(step.shape), tuple(grown.shape), tuple(outputs.shape), tuple(fixed.shape))
# lang: en
claim("the (B, L_k) mask grew the scores (2, 4, 1, 5) into (B, H, B, L_k) = (2, 4, 2, 5)", grown.shape == (B, H, B, L_k))
claim("softmax and the product with the values run on: 2 query rows per sequence, not 1", outputs.shape == (B, H, B, 3))
claim("query row i of every sequence carries the mask of sequence i", torch.equal(grown.isneginf(), (~keep).expand(B, H, B, L_k)))
claim("the (B, 1, 1, L_k) mask keeps the shape of the scores", fixed.shape == step.shape)
# lang: zh
claim("(B, L_k) 掩码把形状为 (2, 4, 1, 5) 的分数撑大成了 (B, H, B, L_k) = (2, 4, 2, 5)", grown.shape == (B, H, B, L_k))
claim("softmax 和与值相乘照常运行：每条序列有 2 行查询，而不是 1 行", outputs.shape == (B, H, B, 3))
claim("每条序列的第 i 行查询带的都是第 i 条序列的掩码", torch.equal(grown.isneginf(), (~keep).expand(B, H, B, L_k)))
claim("(B, 1, 1, L_k) 掩码保持分数的形状不变", fixed.shape == step.shape)
# lang: end

# %% [markdown] tags=["lang-en"]
# A mask must never change the shape of the scores, and that is one line to check after
# masking, `masked.shape == scores.shape` (or before it, without computing anything,
# `torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape`). The in-place
# `masked_fill_` makes the check for you, since it cannot grow the tensor it writes into; so does
# the package's `masks.masked_softmax`, which refuses such a mask.

# %% [markdown] tags=["lang-zh"] en_hash="01cf099135"
# 掩码绝不能改变分数的形状，检查这一点只需一行：遮住分数之后检查 `masked.shape == scores.shape`
# （也可以在遮住之前、不做任何计算，检查 `torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape`）。
# 原地操作的 `masked_fill_` 会替你做这个检查，因为它没法把自己写入的张量撑大；
# 本课程包里的 `masks.masked_softmax` 也会检查，并拒绝这样的掩码。

# %%
try:
    step.clone().masked_fill_(~keep, float("-inf"))
    refused = False
except RuntimeError:
    refused = True
# lang: en
claim("the check tells the two masks apart", grown.shape != step.shape and fixed.shape == step.shape)
claim("masked_fill_ (in place) refuses the (B, L_k) mask with a RuntimeError", refused)
# lang: zh
claim("这个检查能区分两种掩码", grown.shape != step.shape and fixed.shape == step.shape)
claim("原地的 masked_fill_ 以 RuntimeError 拒绝 (B, L_k) 掩码", refused)
# lang: end

# %% [markdown] tags=["lang-en"]
# Pick a mask shape and a scores shape below and see how they line up: blue marks a size-1 (or
# missing) axis that is repeated, red a clash. Try the mask (2, 5) with each scores shape (with
# (2, 4, 1, 5), one decoding step, the scores' own size-1 axis turns blue), and (2, 1, 5, 1),
# which lines up but masks queries instead of keys.

# %% [markdown] tags=["lang-zh"] en_hash="042d373f4a"
# 在下面选一个掩码形状和一个分数形状，看它们如何对齐：蓝色表示被重复的大小为 1（或缺失）的维度，红色表示冲突。
# 试试掩码 (2, 5) 配上每一种分数形状（配上解码一步的 (2, 4, 1, 5) 时，变蓝的是分数自己那个大小为 1 的维度），
# 再试试 (2, 1, 5, 1)：它能对齐，遮住的却是查询而不是键。

# %% tags=["nbval-ignore-output"]
broadcast_explorer()

# %% [markdown] tags=["lang-en"]
# The view function for the two silent cases above, the (B, L_k) mask against scores with
# $L_q = B$ and against the scores of one decoding step:

# %% [markdown] tags=["lang-zh"] en_hash="b85837282f"
# 对上面两种不报错的情况，即 (B, L_k) 的掩码配上 $L_q = B$ 的分数、配上解码一步的分数，直接调用视图函数：

# %%
for scores_shape in [(2, 4, 2, 5), (2, 4, 1, 5)]:
    _, summary = broadcast_view(mask=(2, 5), scores=scores_shape)
    print(summary, end="\n\n")

# %% [markdown] tags=["lang-en"]
# ### Exercise 00.padding_mask
#
# Build the keep mask from the sequence lengths instead of writing it by hand. `lengths` has
# shape (B,) and holds the number of real tokens of each sequence (an integer tensor; a length
# may be 0); `max_len` is $L_k$, the padded length, which may be larger than every length.
# Return a `torch.bool` mask of shape (B, 1, 1, L_k) that is True where the key position is a
# real token, that is where position < length (positions count from 0). The check refuses the
# course's own `masks.padding_mask`, which is this exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.
#
# One rule holds for this exercise and every later one: an exercise's function never changes
# its arguments. The check compares each argument, after your function returns, with what it
# passed, and a function that changed one in place (`lengths -= 1`, or a method whose name ends
# in `_`, such as `masked_fill_`) fails, naming it. If you need to change a value, work on a copy:
# `lengths = lengths.clone()`.
#
# Hint: compare a (L_k,) tensor of positions with a (B, 1) view of the lengths and let
# broadcasting build the (B, L_k) grid; then add the two size-1 axes.

# %% [markdown] tags=["lang-zh"] en_hash="433e6c85f5"
# ### 练习 00.padding_mask
#
# 不再手写，而是根据序列长度构造保留掩码，让填充位置为 False。`lengths` 的形状是 (B,)，存放每条序列的真实词元数
# （整数张量，长度可以为 0）；`max_len` 就是 $L_k$，即填充后的长度，它可以比所有长度都大。
# 返回一个形状为 (B, 1, 1, L_k)、类型为 `torch.bool` 的掩码：键的位置是真实词元时为 True，即位置 < 长度（位置从 0 开始计数）。检查不接受课程自带的 `masks.padding_mask`（它正是本题的答案）。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。
#
# 这道练习以及之后的每一道练习都遵守一条规则：练习的函数绝不改动它的参数。你的函数返回之后，检查会把每个参数与它传入时的样子相比较；原地修改了某个参数的函数（例如 `lengths -= 1`，或名字以 `_` 结尾的方法，如 `masked_fill_`）不能通过，检查会指出是哪个参数。需要改动某个值时，请在副本上操作：`lengths = lengths.clone()`。
#
# 提示：把形状为 (L_k,) 的位置张量与长度的 (B, 1) 视图相比较，让广播生成 (B, L_k) 的网格；再补上两个大小为 1 的维度。

# %% tags=["exercise"] exercise="00.padding_mask"
def padding_mask(lengths, max_len):
    # lang: en
    """The keep mask of a right-padded batch.

    lengths: (B,) integer tensor, the number of real tokens of each sequence (0 ≤ length ≤ max_len).
    max_len: int, L_k, the padded length.
    Returns: (B, 1, 1, max_len) torch.bool tensor, True where position < length (a real token).
    """
    # lang: zh
    """右侧填充的一批序列的保留掩码。

    lengths：形状为 (B,) 的整数张量，每条序列的真实词元数（0 ≤ 长度 ≤ max_len）。
    max_len：int，即 L_k，填充后的长度。
    返回：形状为 (B, 1, 1, max_len) 的 torch.bool 张量，位置 < 长度（真实词元）处为 True。
    """
    # lang: end
    ### BEGIN SOLUTION
    positions = torch.arange(max_len)  # (L_k,)
    # lang: en
    real = positions < lengths.unsqueeze(-1)  # (L_k,) against (B, 1) -> (B, L_k)
    # lang: zh
    real = positions < lengths.unsqueeze(-1)  # (L_k,) 与 (B, 1) 比较 -> (B, L_k)
    # lang: end
    return real[:, None, None, :]  # (B, 1, 1, L_k)
    ### END SOLUTION


# %%
from course_utils import check
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
print(tuple(s_einsum.shape))

w = torch.softmax(s_einsum, dim=-1)
o_einsum = torch.einsum("bhqk,bhkd->bhqd", w, v)
print(tuple(o_einsum.shape))
# lang: en
claim("einsum gives the scores of q @ k.transpose(-2, -1) (to 1e-5)", torch.allclose(s_einsum, s_matmul, atol=1e-5))
claim("and the weighted sum of w @ v (to 1e-5)", torch.allclose(o_einsum, w @ v, atol=1e-5))
# lang: zh
claim("einsum 算出的分数与 q @ k.transpose(-2, -1) 相同（误差在 1e-5 以内）", torch.allclose(s_einsum, s_matmul, atol=1e-5))
claim("加权求和也与 w @ v 相同（误差在 1e-5 以内）", torch.allclose(o_einsum, w @ v, atol=1e-5))
# lang: end

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
# (B, L_q, H, D) and `k` has shape (B, L_k, H, D); return the unscaled scores. The check refuses
# every transpose and every other way to reorder axes: `transpose`, `permute`, `swapaxes`,
# `movedim`, `.T`, `.mT` and their kin.

# %% [markdown] tags=["lang-zh"] en_hash="d3380549c6"
# ### 练习 00.scores_einsum
#
# 刚做完投影时，查询和键的布局是 (B, L, H, D)：序列、位置、头、特征（第 7 节会说明原因）。
# 请直接从这种布局算出分数 (B, H, L_q, L_k)：只用一次 `torch.einsum`，不用 `transpose` 或 `permute`。
# `q` 的形状是 (B, L_q, H, D)，`k` 的形状是 (B, L_k, H, D)；返回未缩放的分数。检查不接受任何转置或其他重排维度的操作，例如 `transpose`、`permute`、`swapaxes`、`movedim`、`.T` 和 `.mT`。

# %% tags=["exercise"] exercise="00.scores_einsum"
def scores_einsum(q, k):
    # lang: en
    """The unscaled attention scores, with one torch.einsum and no transpose or permute.

    q: (B, L_q, H, D) float tensor, the queries.
    k: (B, L_k, H, D) float tensor, the keys.
    Returns: (B, H, L_q, L_k) tensor of q's dtype, scores[b, h, i, j] = q[b, i, h] · k[b, j, h].
    """
    # lang: zh
    """未缩放的注意力分数：只用一次 torch.einsum，不用 transpose 或 permute。

    q：形状为 (B, L_q, H, D) 的浮点张量，即查询。
    k：形状为 (B, L_k, H, D) 的浮点张量，即键。
    返回：形状为 (B, H, L_q, L_k)、dtype 与 q 相同的张量，scores[b, h, i, j] = q[b, i, h] · k[b, j, h]。
    """
    # lang: end
    ### BEGIN SOLUTION
    return torch.einsum("bqhd,bkhd->bhqk", q, k)
    ### END SOLUTION


# %%
from course_utils import check
check("00.scores_einsum", scores_einsum)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Splitting and merging heads
#
# **Multi-head attention** runs $H$ attentions side by side, each on its own $D$ features. One
# linear layer projects the input (B, L, d_model) for all heads at once, to (B, L, H·D). Along
# the feature axis of each position sit head 0's $D$ features, then head 1's, and so on. To
# attend head by head we need (B, H, L, D), where the last two axes form one (L, D) matrix per
# head; afterwards the heads go back to (B, L, H·D). These two reshapes, splitting and merging
# heads, are what lesson 04, multi-head attention, uses next. In the picture, one sequence with
# $L = 3$, $H = 2$, $D = 3$, each feature numbered by its place in memory:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="8c0c5e7a85"
# ## 7. 拆分与合并多头
#
# **多头注意力**让 $H$ 个注意力并排运行，每个头只用自己的 $D$ 个特征。一个线性层一次性为所有头做投影，
# 把输入 (B, L, d_model) 变成 (B, L, H·D)。每个位置的特征维上，先是第 0 个头的 $D$ 个特征，接着是第 1 个头的，依此类推。
# 要逐个头计算注意力，需要的形状是 (B, H, L, D)：最后两维为每个头构成一个 (L, D) 矩阵；算完之后，各个头再变回 (B, L, H·D)。
# 拆分与合并多头这两步形状变换，接下来在第 04 课（多头注意力）中就会用到。
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
# (B, H, L, D). The check refuses the course's own `multihead.split_heads`, which is this
# exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="88beee94e7"
# 分两步完成。先把最后一维拆成 (H, D)，头在前；这只是把一个连续的维度一分为二，所以是视图。
# 再交换位置维和头维；这仍是视图，但已经不连续了。如果一步 `view` 直接变成 (B, H, L, D)，形状是对的，数却错了：
# 它把内存切成每块 $L \cdot D$ 个数，每一块横跨好几个位置。
#
# ### 练习 00.split_heads
#
# 写出 `split_heads(x, num_heads)`：`x` 的形状是 (B, L, H·D)，其中 $H$ = `num_heads`；返回 (B, H, L, D)。检查不接受课程自带的 `multihead.split_heads`（它正是本题的答案）。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="00.split_heads"
def split_heads(x, num_heads):
    # lang: en
    """Split the features of each position into heads.

    x: (B, L, H·D) float tensor, head 0's D features first, then head 1's, ...
    num_heads: int, H (it divides the last axis).
    Returns: (B, H, L, D) tensor of x's dtype, result[b, h, l] = x[b, l, h·D : (h+1)·D].
    """
    # lang: zh
    """把每个位置的特征拆分到各个头。

    x：形状为 (B, L, H·D) 的浮点张量，先是第 0 个头的 D 个特征，然后是第 1 个头的，依此类推。
    num_heads：int，即 H（能整除最后一维）。
    返回：形状为 (B, H, L, D)、dtype 与 x 相同的张量，result[b, h, l] = x[b, l, h·D : (h+1)·D]。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L, HD = x.shape
    x = x.view(B, L, num_heads, HD // num_heads)  # (B, L, H, D)
    # lang: en
    return x.transpose(1, 2)  # (B, H, L, D), a view that is not contiguous
    # lang: zh
    return x.transpose(1, 2)  # (B, H, L, D)，是视图，但不连续
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
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
print(tuple(tiny_heads.shape), tiny_heads.stride())
# lang: en
claim("tiny_heads is a view of the projection's memory, and is not contiguous",
      shares_memory(tiny_heads, tiny) and not tiny_heads.is_contiguous())
# lang: zh
claim("tiny_heads 是投影结果那块内存的视图，而且不连续",
      shares_memory(tiny_heads, tiny) and not tiny_heads.is_contiguous())
# lang: end
fig, ax = plt.subplots(figsize=(6, 2), layout="constrained")
viz.memory_order(tiny_heads, ax=ax, title="(B, H, L, D)")
plt.show()

# %% [markdown] tags=["lang-en"]
# After attention, the heads' outputs (B, H, L, D) go back to (B, L, H·D), so that one linear
# layer can mix the heads. Swap the head and position axes back, then merge (H, D) into one
# axis. After the swap the tensor is not contiguous, so `view` cannot merge the two axes
# (except in corner cases such as $L = 1$). `reshape`, or `.contiguous()` followed by `view`,
# copies the data once: the one copy in the shape handling of multi-head attention. On the
# small example:

# %% [markdown] tags=["lang-zh"] en_hash="8790780cb0"
# 注意力算完后，各个头的输出 (B, H, L, D) 要变回 (B, L, H·D)，好让一个线性层把各头的结果混合起来。
# 先把头维和位置维换回来，再把 (H, D) 合并成一维。交换之后张量不再连续，`view` 无法合并这两维
# （$L = 1$ 之类的特殊情况除外）。`reshape`，或先 `.contiguous()` 再 `view`，会把数据拷贝一次：
# 这是多头注意力的形状处理中唯一的一次拷贝。用上面的小例子验证：

# %%
# lang: en
heads_out = tiny_heads.contiguous()  # what attention returns: a new, contiguous (B, H, L, D)
back = heads_out.transpose(1, 2)  # (B, L, H, D), not contiguous
# lang: zh
heads_out = tiny_heads.contiguous()  # 注意力返回的是新的、连续的 (B, H, L, D)
back = heads_out.transpose(1, 2)  # (B, L, H, D)，不连续
# lang: end
try:
    back.view(1, 2, 4)
    refusal = ""
except RuntimeError as error:
    refusal = str(error)
merged = back.reshape(1, 2, 4)  # (B, L, H·D)
print(merged)
one_position = torch.arange(4).view(1, 2, 1, 2).transpose(1, 2)  # (B, L, H, D), L = 1
# lang: en
claim("after the swap, view cannot merge (H, D): it raises a RuntimeError", refusal != "")
claim("reshape merges them with a copy and gives back the projection's numbers",
      torch.equal(merged, tiny) and not shares_memory(merged, heads_out))
claim("with L = 1 the swapped tensor is still contiguous, so there view works",
      one_position.is_contiguous() and one_position.view(1, 1, 4).shape == (1, 1, 4))
# lang: zh
claim("交换之后，view 无法合并 (H, D)：它抛出了 RuntimeError", refusal != "")
claim("reshape 通过一次拷贝完成合并，还原出投影结果的那些数",
      torch.equal(merged, tiny) and not shares_memory(merged, heads_out))
claim("L = 1 时交换后的张量仍然连续，所以 view 可以运行",
      one_position.is_contiguous() and one_position.view(1, 1, 4).shape == (1, 1, 4))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 00.merge_heads
#
# Write `merge_heads(x)`, the inverse of `split_heads`: `x` has shape (B, H, L, D); return
# (B, L, H·D), head 0's $D$ features first. The check also passes an `x` laid out as
# `split_heads` leaves it (a transposed view, not contiguous), and refuses the course's own
# `multihead.merge_heads`, which is this exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="be0051efca"
# ### 练习 00.merge_heads
#
# 写出 `merge_heads(x)`，即 `split_heads` 的逆操作：`x` 的形状是 (B, H, L, D)；返回 (B, L, H·D)，第 0 个头的 $D$ 个特征在前。检查也会传入按 `split_heads` 的结果那样排布的 `x`（转置得到的视图，不连续），并且不接受课程自带的 `multihead.merge_heads`（它正是本题的答案）。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="00.merge_heads"
def merge_heads(x):
    # lang: en
    """Merge the heads back into the features of each position: the inverse of split_heads.

    x: (B, H, L, D) float tensor.
    Returns: (B, L, H·D) tensor of x's dtype, result[b, l, h·D : (h+1)·D] = x[b, h, l]
    (head 0's D features first).
    """
    # lang: zh
    """把各个头合并回每个位置的特征，即 split_heads 的逆操作。

    x：形状为 (B, H, L, D) 的浮点张量。
    返回：形状为 (B, L, H·D)、dtype 与 x 相同的张量，result[b, l, h·D : (h+1)·D] = x[b, h, l]
    （第 0 个头的 D 个特征在前）。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, H, L, D = x.shape
    # lang: en
    x = x.transpose(1, 2)  # (B, L, H, D), not contiguous
    return x.reshape(B, L, H * D)  # copies; .view would fail here
    # lang: zh
    x = x.transpose(1, 2)  # (B, L, H, D)，不连续
    return x.reshape(B, L, H * D)  # 会拷贝；这里用 .view 会报错
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
check("00.merge_heads", merge_heads)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. All together: the shapes of multi-head attention
#
# Every tool of this lesson in one forward pass of multi-head self-attention over the two
# padded sequences of section 5, with the shape after each step. Lesson 01 explains the
# attention itself and lesson 04, multi-head attention, turns this into a module; here the point
# is the shapes, and the check against PyTorch's own `F.scaled_dot_product_attention`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="11f28d3bb8"
# ## 8. 综合：多头注意力中的形状
#
# 把本课的所有工具串起来：对第 5 节那两条填充过的序列做一次多头自注意力的前向计算，并打印每一步之后的形状。
# 注意力本身在第 01 课讲解，第 04 课（多头注意力）会把它写成模块；这里关注的是形状，以及与 PyTorch 自带的
# `F.scaled_dot_product_attention` 的对照。

# %%
H, D = 4, 3
# lang: en
x = torch.randn(B, L_k, H * D)  # (B, L, d_model): the two sequences of section 5
# lang: zh
x = torch.randn(B, L_k, H * D)  # (B, L, d_model)：第 5 节的那两条序列
# lang: end
w_q, w_k, w_v = (torch.randn(H * D, H * D) / (H * D) ** 0.5 for _ in range(3))

# lang: en
q, k, v = (x @ w for w in (w_q, w_k, w_v))  # each (B, L, H·D)
q, k, v = (t.unflatten(-1, (H, D)).transpose(1, 2) for t in (q, k, v))  # each (B, H, L, D)
# lang: zh
q, k, v = (x @ w for w in (w_q, w_k, w_v))  # 各为 (B, L, H·D)
q, k, v = (t.unflatten(-1, (H, D)).transpose(1, 2) for t in (q, k, v))  # 各为 (B, H, L, D)
# lang: end
scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / D**0.5  # (B, H, L_q, L_k)
weights = torch.softmax(scores.masked_fill(~keep4, float("-inf")), dim=-1)  # keep4: (B, 1, 1, L_k)
heads = weights @ v  # (B, H, L_q, D)
# lang: en
out = heads.transpose(1, 2).flatten(2)  # (B, L_q, H·D): the one copy
# lang: zh
out = heads.transpose(1, 2).flatten(2)  # (B, L_q, H·D)：唯一的一次拷贝
# lang: end
for name, tensor in [("q", q), ("scores", scores), ("weights", weights), ("heads", heads), ("out", out)]:
    print(f"{name:>8}", tuple(tensor.shape))

reference = F.scaled_dot_product_attention(q, k, v, attn_mask=keep4)
# lang: en
claim("the heads equal F.scaled_dot_product_attention's output (to 1e-5)", torch.allclose(heads, reference, atol=1e-5))
claim("out is a copy: flatten could not merge the swapped axes in place", not shares_memory(out, heads))
# lang: zh
claim("各个头的结果与 F.scaled_dot_product_attention 的输出相同（误差在 1e-5 以内）", torch.allclose(heads, reference, atol=1e-5))
claim("out 是副本：交换过的两维无法原地合并，flatten 只好拷贝", not shares_memory(out, heads))
# lang: end

# %% [markdown] tags=["lang-en"]
# ## Summary
#
# - A tensor is storage plus shape and stride. It is contiguous when index order is memory order.
# - `view`, `transpose`, `permute`, `squeeze`, `unsqueeze` and `expand` are views: free, and
#   they share memory. `reshape` and `contiguous()` copy only when they must; `view` never does
#   and fails instead.
# - Broadcasting lines shapes up from the right and repeats size-1 axes without copying: a
#   padding mask of shape (B, 1, 1, L_k) fits scores of shape (B, H, L_q, L_k). A mask with
#   too few axes can line up with the wrong axes and still run, and against a size-1 axis of
#   the scores (one decoding step) it even grows them: check that the scores keep their shape.
# - `einsum` names the axes and does the transposes; it costs what the matrix product costs.
# - Splitting heads is a view then a transpose; merging heads is a transpose then a copy.
#
# Next, lesson 01 builds scaled dot-product attention on these shapes, lesson 02 looks at masks
# and their conventions in depth, and lesson 04, multi-head attention, builds its module on
# splitting and merging heads.

# %% [markdown] tags=["lang-zh"] en_hash="14755819ab"
# ## 小结
#
# - 张量 = 存储 + 形状 + 步长。索引顺序与内存顺序一致时，张量就是连续的。
# - `view`、`transpose`、`permute`、`squeeze`、`unsqueeze`、`expand` 返回的都是视图：没有开销，且共享内存。
#   `reshape` 和 `contiguous()` 只在必要时拷贝；`view` 从不拷贝，做不到就报错。
# - 广播从右往左对齐形状，并在不拷贝的前提下重复大小为 1 的维度：形状为 (B, 1, 1, L_k) 的填充掩码
#   正好能与形状为 (B, H, L_q, L_k) 的分数配合。维度不够的掩码可能与错误的维度对齐，却照样能运行；
#   遇到分数中大小为 1 的维度（解码的一步）时，它甚至会把分数撑大：要检查分数的形状没有变。
# - `einsum` 为各维命名并替你完成转置；它的开销与对应的矩阵乘法相同。
# - 拆分多头 = 一次视图 + 一次转置；合并多头 = 一次转置 + 一次拷贝。
#
# 下一课（第 01 课）会在这些形状之上实现缩放点积注意力，第 02 课深入讨论掩码及其各种约定，
# 第 04 课（多头注意力）则在拆分与合并多头的基础上搭建多头注意力模块。
