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
# # FlashAttention as a real kernel, in Triton
#
# Lesson 08 computed attention tile by tile with Python loops: the right numbers and $O(L \cdot d)$
# memory, but on a GPU some 60 times slower than `F.scaled_dot_product_attention` (section 1 prints the
# committed H200 figures). Every tile there is a handful of separate GPU kernels,
# each launched from Python, each reading its inputs from the GPU's main memory and writing its result
# back. This lesson writes the same algorithm as **one** kernel, in Triton: a program per block of
# queries keeps its tile of scores in the chip's own fast memory from the first key to the last.
#
# On a GPU Triton compiles the kernels you write here. On a CPU its interpreter runs the very same
# source instead, one program after another in NumPy: slowly, but enough to check every number a kernel
# computes and every address it touches, so every check of this lesson runs on a laptop.
#
# The interpreter is not a GPU, though. It never runs two programs at once, so a race between programs
# never shows; it multiplies float32 in float32, where a GPU may round the products to TF32 or compute
# in float16; it knows nothing of the registers and shared memory that `num_warps` and `num_stages`
# share out; and it runs Python the compiler refuses, such as a `break` in a kernel's loop. So the checks
# also hand your kernel to the front end of Triton's compiler, on the CPU: what a GPU would refuse is
# refused here too.
#
# The answer must be the kernel's. Outside its launches your function may only allocate, view and copy
# tensors, and what it hands a launch (the grid, the scalar arguments, the tensors and where in them, the
# values a kernel reads besides its arguments) follows from the shapes alone. So the checks call your
# function once more, first, on inputs of the same shapes but other values, and refuse it when anything
# but the data its kernels load differs between the two calls: an answer computed on the host (with NumPy,
# or `.item()`) and handed to a kernel is not the kernel's.
#
# In this lesson you will
#
# 1. see what a Triton program is and what a kernel launch costs;
# 2. write a row softmax kernel (the max shift in one program), then one for rows longer than a block
#    (the online softmax in one row), then a matrix product with `tl.dot`, one program per output tile;
# 3. write the FlashAttention forward kernel: one program per block of queries, lesson 08's online
#    softmax over the key blocks, the log-sum-exp written out, the partial last block masked;
# 4. make it causal: the blocks above the diagonal never loaded, the diagonal block masked;
# 5. write the kernel of the backward that computes dK and dV, recomputing the weights from the lse;
# 6. write the rest of FlashAttention's backward, the dQ kernel, and tie your kernels together in a
#    `torch.autograd.Function` of your own, whose gradients are PyTorch's; then run the forward on float16
#    and bfloat16 inputs, with float32 sums;
# 7. see how fast the kernels are on a GPU against PyTorch's own, honestly, what the fast kernels do
#    that ours do not, and step one program through its key blocks.
#
# There are nine exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2c16ad317f"
# # 用 Triton 把 FlashAttention 写成真正的核函数
#
# 第 08 课用 Python 循环逐块计算注意力：数值正确，内存为 $O(L \cdot d)$，但在 GPU 上比 `F.scaled_dot_product_attention` 慢了约 60 倍（第 1 节会打印出提交在课程里的 H200 实测数字）。那里的每个分块都是若干个独立的 GPU 核函数，每个都由 Python 启动，每个都从显存（HBM）读入输入、再把结果写回去。本课用 Triton 把同一个算法写成**一个**核函数：负责一块查询的程序，从第一个键到最后一个键，都把自己的分数分块留在芯片上的片上存储（SRAM）里。
#
# 在 GPU 上，Triton 会编译你在这里写的核函数。在 CPU 上则由 Triton 的解释器运行同一份源代码，用 NumPy 一个程序接一个程序地执行：很慢，但足以检查核函数算出的每个数、访问的每个地址，所以本课的每个检查在笔记本电脑上都能做。
#
# 不过，解释器并不是 GPU。它从不同时运行两个程序，所以程序之间的数据竞争永远不会暴露；它用 float32 计算 float32 的乘法，而 GPU 可能把乘积舍入到 TF32，或者干脆用 float16 计算；它对 `num_warps` 和 `num_stages` 所分配的寄存器和共享内存一无所知；它还会照常运行编译器拒绝的 Python 写法，比如核函数循环里的 `break`。所以检查还会在 CPU 上把你的核函数交给 Triton 编译器的前端：GPU 上通不过的写法，在这里同样通不过。
#
# 答案必须由核函数算出。在核函数启动之外，你的函数只能分配张量、取视图和复制；交给一次启动的东西（网格、标量参数、张量以及在张量中的位置，还有核函数在参数之外读取的值）都只由形状决定。所以检查会先换一组形状相同、数值不同的输入，把你的函数多调用一次：两次调用之间，除了核函数加载的数据，只要还有别的不一样，检查就不接受。在主机上（用 NumPy 或 `.item()`）算好答案再交给核函数，那就不是核函数算出的答案。
#
# 本课你将：
#
# 1. 看看 Triton 的程序是什么，启动一次核函数要花多少时间；
# 2. 写一个逐行 softmax 核函数（在一个程序里减去最大值），再写一个处理比一个块还长的行的版本（一行里的在线 softmax），然后用 `tl.dot` 写一个矩阵乘法，每个输出分块一个程序；
# 3. 写 FlashAttention 的前向核函数：每块查询一个程序，对各个键块做第 08 课的在线 softmax，写出 log-sum-exp，给不满的最后一块加掩码；
# 4. 把它改成因果的：对角线上方的块从不读入，对角线块加掩码；
# 5. 写反向传播中计算 dK 和 dV 的核函数，用 lse 重新算出权重；
# 6. 写完 FlashAttention 反向传播的其余部分，即 dQ 核函数，再用你自己的 `torch.autograd.Function` 把这些核函数连起来，它的梯度与 PyTorch 的一致；然后让前向以 float16 和 bfloat16 为输入运行，用 float32 求和；
# 7. 如实地看看这些核函数在 GPU 上与 PyTorch 自己的相比有多快，快的核函数多做了哪些我们没做的事，再让一个程序一步一步走过它的键块。
#
# 本课共有九道练习，每道练习后面都跟着一个检查单元。

# %%
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, measured, setup, triton_setup
from course_utils.tiled import tiled_attention
from course_utils.widgets.flash_program import program_explorer

setup(lang="en")
torch.set_printoptions(precision=3, sci_mode=False)
triton_setup.load()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from course_utils import flash_triton  # noqa: E402

# lang: en
# where the lesson's tensors live: a GPU compiles the kernels and takes only its own tensors; the
# interpreter (no GPU, or TRITON_INTERPRET=1) runs them on CPU tensors
# lang: zh
# 本课的张量放在哪里：GPU 编译核函数，只接受它自己的张量；解释器（没有 GPU，或设置了 TRITON_INTERPRET=1）
# 在 CPU 张量上运行核函数
# lang: end
device = triton_setup.device()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. The GPU in one picture
#
# A GPU is many small processors (132 on an H200, the GPU every figure of this lesson was measured on)
# beside a large, slow memory (HBM: 141 GB on an H200, read at about 4.8 TB/s) and, on each processor,
# a small fast one (on-chip SRAM: up to 228 KB of shared memory, besides the registers, read many
# times faster). A Triton **kernel** is the code of one **program**; a **launch** runs a **grid** of
# programs, each on the block of data its `tl.program_id` names. Inside a program everything is a
# block: `tl.arange(0, 64)` is 64 positions at once, `tl.load` brings a block from HBM into registers,
# `tl.dot` multiplies two blocks, `tl.store` writes a block back. `tl.dot` runs on the **tensor cores**
# for float16 and bfloat16, and for float32 when it may round the inputs to TF32 (a GPU's default);
# asked for float32 to IEEE precision, `tl.dot(a, b, input_precision="ieee")`, as every check of this
# lesson needs, it runs on the ordinary float32 units instead, several times slower.
#
# ![A Triton kernel's grid: one program per query block; in the GPU's main memory (HBM) Q, K, V and O as blocks; program 2 loads its query block once into its fast memory (SRAM), streams the key and value blocks through it one at a time with its running max, sum and accumulator, and writes its output block and log-sum-exp once](../../images/09_programs_en.svg)
#
# Two numbers decide what is fast. A launch costs microseconds before any work is done; and attention's
# steps other than the two matrix products do about one FLOP per byte they move, while the chip can do
# hundreds. Lesson 08's loop launches several kernels per tile and moves every tile's scores through
# HBM; one fused kernel launches once and keeps the scores in SRAM. The cell below measures the first
# number on this machine, what a torch call costs when it does almost nothing, and prints the committed
# GPU figures: the cost of one call of a Triton kernel's Python wrapper that does almost nothing there
# (the wrapper's checks and the launch together), and lesson 08's tiles against PyTorch's kernel.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="02cf334170"
# ## 1. 一张图看懂 GPU
#
# GPU 由许多小处理器组成（H200 上有 132 个，本课的每个数字都是在 H200 上测得的），旁边是又大又慢的显存（HBM：H200 上有 141 GB，读取速度约每秒 4.8 TB），每个处理器上还有一块又小又快的片上存储（SRAM：除寄存器外，最多 228 KB 共享内存，读起来快许多倍）。Triton 的**核函数**是一个**程序**的代码；一次**启动**会运行由许多程序组成的**网格**，每个程序处理 `tl.program_id` 指定给它的那一块数据。在程序内部，一切都是块：`tl.arange(0, 64)` 一次就是 64 个位置，`tl.load` 把一块数据从 HBM 读进寄存器，`tl.dot` 把两块相乘，`tl.store` 把一块写回去。对 float16 和 bfloat16，以及允许把输入舍入到 TF32 的 float32（GPU 的默认做法），`tl.dot` 在**张量核心**上运行；如果要求 float32 达到 IEEE 精度，即 `tl.dot(a, b, input_precision="ieee")`（本课的每个检查都需要这样），它就改在普通的 float32 运算单元上运行，要慢好几倍。
#
# ![Triton 核函数的网格：每个查询块一个程序；GPU 主存（HBM）里的 Q、K、V 和 O 都分成块；程序 2 把自己的查询块读入片上存储（SRAM）一次，让键块和值块一块一块地流过，同时保留运行最大值、累计和与累加器，最后把输出块和 log-sum-exp 各写回一次](../../images/09_programs_zh.svg)
#
# 决定快慢的是两个数。一次启动在做任何工作之前就要花几微秒；而注意力里除了两次矩阵乘法以外的步骤，每搬运一个字节大约只做一次浮点运算，芯片却能做几百次。第 08 课的循环每个分块要启动好几个核函数，每个分块的分数都要经过 HBM 来回搬运；一个融合的核函数只启动一次，分数始终留在 SRAM 里。下面的单元在这台机器上测量第一个数，即一次几乎不做事的 torch 调用要花多少时间，并打印提交在课程里的 GPU 数字：在那块 GPU 上调用一次几乎不做事的 Triton 核函数的 Python 包装函数要花多少时间（包装函数的检查和启动合在一起），以及第 08 课的分块与 PyTorch 核函数的对比。

# %% tags=["nbval-ignore-output"]
tiny = torch.ones(1)
launch_us = measured.milliseconds(lambda: [tiny.add(1) for _ in range(1000)], repeat=5)
gpu = measured.load("flash_triton", "cuda")
# lang: en
print(f"one tiny torch call on this CPU: {launch_us:.2f} µs")
# lang: zh
print(f"这台 CPU 上一次很小的 torch 调用：{launch_us:.2f} 微秒")
# lang: end
print(gpu.provenance() if gpu else measured.missing("flash_triton"))
if gpu:
    # lang: en
    print(f"one call of flash_triton.softmax_rows on one row of 16 there (wrapper and launch): "
          f"{gpu.settings['launch_us']:.1f} µs")
    # lang: zh
    print(f"在那块 GPU 上对一行 16 个数调用一次 flash_triton.softmax_rows（包装函数加启动）："
          f"{gpu.settings['launch_us']:.1f} 微秒")
    # lang: end
tiles = measured.load("tiled", "cuda")
if tiles:
    longest = max(tiles.rows(), key=lambda row: row["L"])
    print(tiles.provenance())
    # lang: en
    print(f"L = {longest['L']}: lesson 08's Python tiles {longest['tiled_ms']:.0f} ms, F.sdpa {longest['sdpa_ms']:.1f} ms "
          f"({measured.ratio(longest['tiled_ms'], longest['sdpa_ms'], 0)} slower)")
    claim("lesson 08's tiles are some 60 times slower than F.sdpa there (between 50 and 80 times)",
          50 <= longest["tiled_ms"] / longest["sdpa_ms"] <= 80)
    # lang: zh
    print(f"L = {longest['L']}：第 08 课的 Python 分块 {longest['tiled_ms']:.0f} 毫秒，F.sdpa {longest['sdpa_ms']:.1f} 毫秒"
          f"（慢 {measured.ratio(longest['tiled_ms'], longest['sdpa_ms'], 0)}）")
    claim("在那块 GPU 上，第 08 课的分块比 F.sdpa 慢约 60 倍（在 50 到 80 倍之间）",
          50 <= longest["tiled_ms"] / longest["sdpa_ms"] <= 80)
    # lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. A first kernel: softmax, one program per row
#
# The row softmax is lesson 01's, written for one program: load the row as one block, subtract its max
# (so that no `exp` overflows), exponentiate, divide by the sum, store. A block's length must be a power
# of two (`tl.arange` needs one), so a row of 37 is loaded as 64 positions: the 27 past the end are
# masked, and what a masked load gives there (`other=`) matters.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="45d696bfc8"
# ## 2. 第一个核函数：softmax，每行一个程序
#
# 逐行 softmax 就是第 01 课的那个，只是写成一个程序：把这一行作为一个块读进来，减去它的最大值（这样任何 `exp` 都不会溢出），取指数，除以和，写回去。块的长度必须是 2 的幂（`tl.arange` 要求如此），所以长 37 的一行按 64 个位置读入：末尾之后的 27 个位置被掩码遮住，而被遮住的位置读出什么（`other=`）很要紧。

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the softmax kernel
#
# Write `softmax_rows(x)` for a float32 tensor x of shape $(R, n)$: define a Triton kernel inside the
# function (decorated with `triton.jit`) that one program per row runs, with `BLOCK = triton.next_power_of_2(n)`
# columns loaded at once, and return the softmax of every row over its last axis, $(R, n)$ float32,
# allocated with `torch.full(..., float("nan"))` so that a row your kernel never stores shows. The check runs your kernel through Triton's interpreter on cases with rows in the thousands and far
# below zero, with $n$ a power of two and not, and with −∞ entries (weight 0). It compares the numbers only (a
# kernel's output is not on autograd's graph). It refuses `torch.softmax`, `F.softmax`,
# `Tensor.softmax` and the course's `flash_triton.softmax_rows` and `masks.masked_softmax`.

# %% [markdown] tags=["lang-zh"] en_hash="e0614b3a11"
# ### 练习 1：softmax 核函数
#
# 写出 `softmax_rows(x)`，x 是形状为 $(R, n)$ 的 float32 张量：在函数内部定义一个 Triton 核函数（用 `triton.jit` 装饰），每行由一个程序运行，一次读入 `BLOCK = triton.next_power_of_2(n)` 列，返回每一行沿最后一维的 softmax，形状 $(R, n)$，float32，用 `torch.full(..., float("nan"))` 分配，这样核函数漏写的行会显现出来。检查会用 Triton 的解释器运行你的核函数，测试用例里有数值上千的行和远小于 0 的行，$n$ 有 2 的幂也有不是的，还有 −∞ 元素（权重为 0）。检查只比较数值（核函数的输出不在 autograd 的计算图上）。检查不接受 `torch.softmax`、`F.softmax`、`Tensor.softmax`，也不接受课程自带的 `flash_triton.softmax_rows` 和 `masks.masked_softmax`。

# %% tags=["exercise"] exercise="09.softmax_kernel"
def softmax_rows(x):
    # lang: en
    """Softmax over the last axis of x (R, n) float32, one Triton program per row.

    Returns (R, n) float32.
    """
    # lang: zh
    """对 x (R, n)（float32）的最后一维做 softmax，每行一个 Triton 程序。

    返回 (R, n)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def softmax_kernel(X, Y, n, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        columns = tl.arange(0, BLOCK)
        x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        tl.store(Y + row * n + columns, e / tl.sum(e, axis=0), mask=columns < n)

    x = x.contiguous()
    R, n = x.shape
    y = torch.full_like(x, float("nan"))
    softmax_kernel[(R,)](x, y, n, BLOCK=triton.next_power_of_2(n))
    return y
    ### END SOLUTION


# %%
from course_utils import check
check("09.softmax_kernel", softmax_rows)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### A row longer than one block
#
# One program per row loads its whole row as one block: fine for a row of 37, not for a row of 100,000,
# whose block would not fit in a program's registers. A longer row is read in blocks of `BLOCK` columns,
# one after another, and the max the shift needs is known only after the last of them. Lesson 08's
# online softmax needs no look ahead: keep a running max $m$ and a running sum $\ell = \sum e^{x - m}$.
# When a block brings a larger max $m'$, what $\ell$ holds was summed with the old one, so
# $\ell \leftarrow \ell\, e^{m - m'} + \sum_\text{block} e^{x - m'}$. After the last block, a second pass
# writes $e^{x - m} / \ell$. This is FlashAttention's trick in one row: the forward kernel below carries
# the same $m$ and $\ell$ through the key blocks, and an accumulator beside them, so that it needs no
# second pass at all.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="ebb67686c3"
# ### 比一个块还长的行
#
# 每行一个程序、把整行作为一个块读入：对长 37 的一行没有问题，对长 100,000 的一行就不行了，那样的块装不进一个程序的寄存器。更长的行要按每块 `BLOCK` 列一块接一块地读，而减去最大值所需的那个最大值，要到读完最后一块才知道。第 08 课的在线 softmax 不需要预先知道它：维护运行最大值 $m$ 和累计和 $\ell = \sum e^{x - m}$。某一块带来更大的最大值 $m'$ 时，$\ell$ 里原有的项是按旧的最大值加起来的，所以 $\ell \leftarrow \ell\, e^{m - m'} + \sum_\text{块} e^{x - m'}$。读完最后一块后，再遍历一遍，写出 $e^{x - m} / \ell$。这就是 FlashAttention 的诀窍，只不过用在一行上：后面的前向核函数带着同样的 $m$ 和 $\ell$ 走过各个键块，旁边再加一个累加器，于是连第二遍都不需要了。

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: the softmax of long rows
#
# Write `softmax_blocks(x, block)` for a float32 x of shape $(R, n)$ and `block`, a power of two ≥ 16
# smaller than $n$: a kernel defined inside the function (decorated with `triton.jit`), one program per
# row, that walks its row in blocks of `block` columns twice: a first pass keeping the running max and
# the running sum, a second writing the weights. Return the softmax of every row over its last axis,
# $(R, n)$ float32, allocated with `torch.full(..., float("nan"))` so that a column your kernel never
# writes shows. The check runs your kernel through Triton's interpreter on rows whose max comes in a
# late block, rows in the thousands and far below zero, $n$ a multiple of the block and not, and −∞
# entries; it compares the numbers, and it refuses a kernel that loads more than `block` columns of a
# row at once (a whole row as one block ignores `block`, however right its numbers). It refuses
# `torch.softmax`, `F.softmax`, `Tensor.softmax`, `torch.logsumexp`, `Tensor.logsumexp` and the
# course's `flash_triton.softmax_rows`, `masks.masked_softmax` and `tiled.online_softmax`.

# %% [markdown] tags=["lang-zh"] en_hash="502dd72de4"
# ### 练习 2：长行的 softmax
#
# 写出 `softmax_blocks(x, block)`，x 是形状为 $(R, n)$ 的 float32 张量，`block` 是小于 $n$、不小于 16 的 2 的幂：在函数内部定义一个核函数（用 `triton.jit` 装饰），每行一个程序，按每块 `block` 列把这一行走两遍：第一遍维护运行最大值和累计和，第二遍写出权重。返回每一行沿最后一维的 softmax，形状 $(R, n)$，float32，用 `torch.full(..., float("nan"))` 分配，这样核函数漏写的列会显现出来。检查会用 Triton 的解释器运行你的核函数，测试用例里有最大值出现在靠后的块里的行、数值上千的行和远小于 0 的行，$n$ 有是块大小整数倍的也有不是的，还有 −∞ 元素；检查比较数值，并且不接受一次读取一行中多于 `block` 列的核函数（把整行当作一个块读入就忽略了 `block`，哪怕数值全对）。检查也不接受 `torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp`、`Tensor.logsumexp`，也不接受课程自带的 `flash_triton.softmax_rows`、`masks.masked_softmax` 和 `tiled.online_softmax`。

# %% tags=["exercise"] exercise="09.softmax_blocks"
def softmax_blocks(x, block):
    # lang: en
    """Softmax over the last axis of x (R, n) float32, one Triton program per row, in blocks of `block`.

    block: a power of two >= 16, smaller than n. Returns (R, n) float32.
    """
    # lang: zh
    """对 x (R, n)（float32）的最后一维做 softmax，每行一个 Triton 程序，每块 `block` 列。

    block：小于 n、不小于 16 的 2 的幂。返回 (R, n)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def softmax_blocks_kernel(X, Y, n, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        m = tl.full((), float("-inf"), tl.float32)
        ell = tl.zeros((), tl.float32)
        for start in range(0, n, BLOCK):
            columns = start + tl.arange(0, BLOCK)
            x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(x, axis=0))
            ell = ell * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        for start in range(0, n, BLOCK):
            columns = start + tl.arange(0, BLOCK)
            x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))
            tl.store(Y + row * n + columns, tl.exp(x - m) / ell, mask=columns < n)

    x = x.contiguous()
    R, n = x.shape
    y = torch.full((R, n), float("nan"), device=x.device)
    softmax_blocks_kernel[(R,)](x, y, n, BLOCK=block)
    return y
    ### END SOLUTION


# %%
from course_utils import check
check("09.softmax_blocks", softmax_blocks)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. A matrix product, one program per output tile
#
# `tl.dot` multiplies two blocks: an $(m, k)$ block by a $(k, n)$ one gives $(m, n)$. The attention
# kernels below use it twice per key block, so here it is on its own first. The output $C = AB$,
# $(M, N)$, is cut into tiles of `BLOCK_M` rows by `BLOCK_N` columns, and one program owns one tile:
# the grid is `(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))`, `tl.program_id(0)` its row block and
# `tl.program_id(1)` its column block. The tile's sums run over the whole inner dimension $K$, which
# does not fit in one block: the program walks it in steps of `BLOCK_K`, loads a
# `(BLOCK_M, BLOCK_K)` block of $A$ and a `(BLOCK_K, BLOCK_N)` block of $B$ at each step, and adds their
# product to a float32 accumulator that lives through the loop. The last block of every edge can be
# partial: rows past
# $M$, columns past $N$ and, in the last step, inner positions past $K$, which are loaded as 0 so that
# they add nothing.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="cb58e8f369"
# ## 3. 矩阵乘法，每个输出分块一个程序
#
# `tl.dot` 把两个块相乘：$(m, k)$ 的块乘 $(k, n)$ 的块得到 $(m, n)$。后面的注意力核函数在每个键块上要用它两次，所以先单独练一练。输出 $C = AB$ 的形状是 $(M, N)$，把它切成 `BLOCK_M` 行、`BLOCK_N` 列的分块，每个分块由一个程序负责：网格是 `(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))`，`tl.program_id(0)` 是它的行块，`tl.program_id(1)` 是它的列块。分块里的每个和都要遍历整个内维 $K$，而 $K$ 一个块装不下：程序按 `BLOCK_K` 一步步走过内维，每一步读入 $A$ 的一个 `(BLOCK_M, BLOCK_K)` 块和 $B$ 的一个 `(BLOCK_K, BLOCK_N)` 块，把它们的乘积加到一个贯穿整个循环的 float32 累加器上。每条边上的最后一块都可能不满：超出 $M$ 的行、超出 $N$ 的列，以及最后一步里超出 $K$ 的内维位置；最后这些要读成 0，这样它们什么也不加。

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: the matrix-product kernel
#
# Write `matmul(a, b, block_m, block_n, block_k)` for float32 a $(M, K)$ and b $(K, N)$: a kernel
# defined inside the function (decorated with `triton.jit`), launched on the grid
# `(triton.cdiv(M, block_m), triton.cdiv(N, block_n))`, one program per output tile, looping over the
# inner dimension in blocks of `block_k` with `tl.dot` (the three block sizes are powers of two ≥ 16;
# $M$, $N$ and $K$ need not be multiples of them). Return $C = AB$, $(M, N)$ float32, allocated with
# `torch.full(..., float("nan"))` so that a tile your kernel never stores shows. The check runs your
# kernel through Triton's interpreter on cases ragged on every side, with one block, with $K$ shorter
# than two blocks and longer than four, and with a grid that is not square; it compares the numbers only. It
# refuses `torch.matmul`, `torch.mm`, `torch.bmm`, `torch.einsum`, `torch.tensordot`, `Tensor.matmul`,
# `Tensor.mm`, the `@` operator (`Tensor.__matmul__`) and `F.linear`.
#
# On a GPU, write every `tl.dot` of float32 blocks as `tl.dot(a, b, input_precision="ieee")`: a GPU
# rounds float32 inputs to TF32 by default (10 bits of mantissa), which misses the check's tolerance;
# the interpreter computes in float32 either way. Allocate on the inputs' device (`device=a.device`).

# %% [markdown] tags=["lang-zh"] en_hash="2746d85741"
# ### 练习 3：矩阵乘法核函数
#
# 写出 `matmul(a, b, block_m, block_n, block_k)`，a 为 $(M, K)$，b 为 $(K, N)$，都是 float32：在函数内部定义一个核函数（用 `triton.jit` 装饰），在网格 `(triton.cdiv(M, block_m), triton.cdiv(N, block_n))` 上启动，每个输出分块一个程序，用 `tl.dot` 按每块 `block_k` 遍历内维（三个块大小都是不小于 16 的 2 的幂；$M$、$N$ 和 $K$ 不必是它们的整数倍）。返回 $C = AB$，形状 $(M, N)$，float32，用 `torch.full(..., float("nan"))` 分配，这样核函数漏写的分块会显现出来。检查会用 Triton 的解释器运行你的核函数，测试用例里每条边上都有不满的最后一块，也有只有一个块的、$K$ 不到两个块的和超过四个块的，还有不是正方形的网格；检查只比较数值。检查不接受 `torch.matmul`、`torch.mm`、`torch.bmm`、`torch.einsum`、`torch.tensordot`、`Tensor.matmul`、`Tensor.mm`、`@` 运算符（`Tensor.__matmul__`）和 `F.linear`。
#
# 在 GPU 上，float32 块的每个 `tl.dot` 都要写成 `tl.dot(a, b, input_precision="ieee")`：GPU 默认把 float32 输入舍入到 TF32（尾数只有 10 位），达不到检查的容差；解释器则无论如何都用 float32 计算。在输入所在的设备上分配张量（`device=a.device`）。

# %% tags=["exercise"] exercise="09.matmul_kernel"
def matmul(a, b, block_m, block_n, block_k):
    # lang: en
    """a @ b as one Triton kernel, one program per (block_m, block_n) tile of the output.

    a: (M, K); b: (K, N); float32. block_m, block_n, block_k: powers of two >= 16.
    Returns (M, N) float32.
    """
    # lang: zh
    """用一个 Triton 核函数算 a @ b，输出的每个 (block_m, block_n) 分块一个程序。

    a: (M, K)；b: (K, N)；float32。block_m、block_n、block_k：不小于 16 的 2 的幂。
    返回 (M, N)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def matmul_kernel(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        columns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for start in range(0, K, BLOCK_K):
            inner = start + tl.arange(0, BLOCK_K)
            a_block = tl.load(A + rows[:, None] * K + inner[None, :],
                              mask=(rows[:, None] < M) & (inner[None, :] < K), other=0.0)
            b_block = tl.load(B + inner[:, None] * N + columns[None, :],
                              mask=(inner[:, None] < K) & (columns[None, :] < N), other=0.0)
            acc += tl.dot(a_block, b_block, input_precision="ieee")
        tl.store(C + rows[:, None] * N + columns[None, :], acc, mask=(rows[:, None] < M) & (columns[None, :] < N))

    a, b = a.contiguous(), b.contiguous()
    (M, K), N = a.shape, b.shape[1]
    c = torch.full((M, N), float("nan"), device=a.device)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    matmul_kernel[grid](a, b, c, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
    ### END SOLUTION


# %%
from course_utils import check
check("09.matmul_kernel", matmul)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The forward kernel
#
# One program owns a block of `BLOCK_Q` queries of one (batch·head): `tl.program_id(0)` is its query
# block, `tl.program_id(1)` its batch·head. It loads its queries once, then walks the key blocks with
# lesson 08's state per query: the running max `m`, the running sum `ell` and the accumulator `acc`,
# `acc` and `ell` both shrunk by `alpha = exp(m_old − m_new)` when the max grows. At the end it stores
# `acc / ell` and the log-sum-exp `m + log(ell)`, which the backward needs. The last key block runs
# past $L_k$: the keys past the end are loaded as 0, and their scores must be made −∞.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="fb3fae0474"
# ## 4. 前向核函数
#
# 一个程序负责某个（批量·头）中的一块 `BLOCK_Q` 个查询：`tl.program_id(0)` 是它的查询块，`tl.program_id(1)` 是它的批量·头。它只读入一次自己的查询，然后带着第 08 课里每个查询的状态走过各个键块：运行最大值 `m`、累计和 `ell` 和累加器 `acc`；最大值变大时，`acc` 和 `ell` 都要乘上 `alpha = exp(m_old − m_new)` 缩小。最后它写出 `acc / ell` 和反向传播需要的 log-sum-exp `m + log(ell)`。最后一个键块会越过 $L_k$：越过末尾的那些键读成 0，它们的分数必须设成 −∞。

# %% [markdown] tags=["lang-en"]
# Forget the mask on that last block and a compiled kernel reads past the tensor's end: whatever lies
# there in the GPU's memory, or a crash, with no word of where. The course's interpreter checks every
# address a program loads or stores against the tensors passed to its launch, so the same mistake stops
# with the program, the tensor and the offset. Here 40 numbers are copied in blocks of 16, unmasked:
# programs 0 and 1 are fine, program 2 reaches element 40 of a tensor of 40. (`triton.jit(f)` is the
# decorator written as a call: the exercises leave the decorator to you.)

# %% [markdown] tags=["lang-zh"] en_hash="f83ddc07ec"
# 如果忘了给最后这一块加掩码，编译后的核函数就会读到张量末尾之外：读到 GPU 显存里恰好在那儿的任何东西，或者直接崩溃，却不告诉你是在哪里。课程的解释器会把程序读写的每个地址与这次启动传入的张量逐一比对，所以同样的错误会停下来，并指出是哪个程序、哪个张量、哪个偏移。下面把 40 个数按每块 16 个复制，不加掩码：程序 0 和 1 没问题，程序 2 却碰到了只有 40 个元素的张量的第 40 号元素。（`triton.jit(f)` 就是把装饰器写成函数调用：练习里的装饰器留给你自己写。）

# %% tags=["nbval-ignore-output"]
def copy_blocks(X, Y, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offsets, tl.load(X + offsets))


copy_blocks = triton.jit(copy_blocks)
x = torch.arange(40.0, device=device)
try:
    copy_blocks[(triton.cdiv(40, 16),)](x, torch.empty_like(x), BLOCK=16)
except IndexError as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown] tags=["lang-en"]
# ### Exercise 4: the forward kernel
#
# Write `flash_forward(query, key, value, block_q, block_k)` for float32 query $(BH, L_q, d)$, key
# $(BH, L_k, d)$ and value $(BH, L_k, d_v)$, not causal: a kernel defined inside the function, launched on
# the grid `(triton.cdiv(L_q, block_q), BH)`, one program per block of `block_q` queries looping over
# the key blocks of `block_k` (both powers of two ≥ 16; $L_q$, $L_k$, $d$ and $d_v$ need not be). Return
# `(output, lse)`: output $(BH, L_q, d_v)$ = softmax$(QK^\top/\sqrt{d})V$ and lse $(BH, L_q)$, the
# log-sum-exp of every row of scaled scores, both float32. Allocate both with
# `torch.full(..., float("nan"))`, so that an element your kernel forgets to store shows. The check
# compares the numbers only, on cases with partial last blocks, $L_q \ne L_k$ both ways and scores past 88. It
# refuses `F.scaled_dot_product_attention`, `torch.softmax`, `F.softmax`, `Tensor.softmax`,
# `torch.logsumexp`, `Tensor.logsumexp`, `torch.matmul`, `torch.bmm`, `torch.einsum`, and the course's
# `flash_triton.flash_forward`, `flash_triton.flash_attention`, `tiled.tiled_attention`,
# `tiled.flash_attention` and `tiled.materialised_attention`.
#
# As in exercise 3, write float32 `tl.dot`s with `input_precision="ieee"` and allocate on the inputs' device.

# %% [markdown] tags=["lang-zh"] en_hash="ccf79599c8"
# ### 练习 4：前向核函数
#
# 写出 `flash_forward(query, key, value, block_q, block_k)`，query 为 $(BH, L_q, d)$，key 为 $(BH, L_k, d)$，value 为 $(BH, L_k, d_v)$，都是 float32，不带因果掩码：在函数内部定义核函数，在网格 `(triton.cdiv(L_q, block_q), BH)` 上启动，每块 `block_q` 个查询一个程序，遍历每块 `block_k` 个键的键块（两者都是不小于 16 的 2 的幂；$L_q$、$L_k$、$d$ 和 $d_v$ 不必是）。返回 `(output, lse)`：output 形状为 $(BH, L_q, d_v)$，等于 softmax$(QK^\top/\sqrt{d})V$；lse 形状为 $(BH, L_q)$，是每一行缩放后分数的 log-sum-exp，两者都是 float32。两者都用 `torch.full(..., float("nan"))` 分配，这样核函数漏写的元素会显现出来。检查只比较数值，测试用例里有不满的最后一块、$L_q \ne L_k$（两个方向都有）和超过 88 的分数。检查不接受 `F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp`、`Tensor.logsumexp`、`torch.matmul`、`torch.bmm`、`torch.einsum`，也不接受课程自带的 `flash_triton.flash_forward`、`flash_triton.flash_attention`、`tiled.tiled_attention`、`tiled.flash_attention` 和 `tiled.materialised_attention`。
#
# 与练习 3 一样，float32 的 `tl.dot` 要写 `input_precision="ieee"`，并在输入所在的设备上分配张量。

# %% tags=["exercise"] exercise="09.flash_forward"
def flash_forward(query, key, value, block_q, block_k):
    # lang: en
    """FlashAttention's forward as one Triton kernel, one program per block of queries.

    query: (BH, L_q, d); key: (BH, L_k, d); value: (BH, L_k, d_v); float32.
    block_q, block_k: queries per program, keys per step (powers of two >= 16).
    Returns (output, lse): output (BH, L_q, d_v); lse (BH, L_q), float32.
    """
    # lang: zh
    """用一个 Triton 核函数实现 FlashAttention 的前向，每块查询一个程序。

    query：(BH, L_q, d)；key：(BH, L_k, d)；value：(BH, L_k, d_v)；float32。
    block_q、block_k：每个程序的查询数、每一步的键数（不小于 16 的 2 的幂）。
    返回 (output, lse)：output (BH, L_q, d_v)；lse (BH, L_q)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def forward_kernel(Q, K, V, O, LSE, L_q, L_k, d, d_v, scale,
                       BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        start_q = tl.program_id(0) * BLOCK_Q
        bh = tl.program_id(1).to(tl.int64)
        rows = start_q + tl.arange(0, BLOCK_Q)
        dims = tl.arange(0, BLOCK_D)
        dims_v = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + bh * L_q * d + rows[:, None] * d + dims[None, :],
                    mask=(rows[:, None] < L_q) & (dims[None, :] < d), other=0.0)
        m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
        ell = tl.zeros((BLOCK_Q,), tl.float32)
        acc = tl.zeros((BLOCK_Q, BLOCK_DV), tl.float32)
        for start_k in range(0, L_k, BLOCK_K):
            columns = start_k + tl.arange(0, BLOCK_K)
            k = tl.load(K + bh * L_k * d + columns[:, None] * d + dims[None, :],
                        mask=(columns[:, None] < L_k) & (dims[None, :] < d), other=0.0)
            v = tl.load(V + bh * L_k * d_v + columns[:, None] * d_v + dims_v[None, :],
                        mask=(columns[:, None] < L_k) & (dims_v[None, :] < d_v), other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            s = tl.where(columns[None, :] < L_k, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            ell = ell * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            m = m_new
        tl.store(O + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :], acc / ell[:, None],
                 mask=(rows[:, None] < L_q) & (dims_v[None, :] < d_v))
        tl.store(LSE + bh * L_q + rows, m + tl.log(ell), mask=rows < L_q)

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    BH, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[2]
    output = torch.full((BH, L_q, d_v), float("nan"), device=query.device)
    lse = torch.full((BH, L_q), float("nan"), device=query.device)
    grid = (triton.cdiv(L_q, block_q), BH)
    forward_kernel[grid](query, key, value, output, lse, L_q, L_k, d, d_v, 1 / math.sqrt(d),
                         BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=max(16, triton.next_power_of_2(d)),
                         BLOCK_DV=max(16, triton.next_power_of_2(d_v)))
    return output, lse
    ### END SOLUTION


# %%
from course_utils import check
check("09.flash_forward", flash_forward)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Causal: the blocks above the diagonal are never loaded
#
# With `is_causal` (top left, as F.scaled_dot_product_attention), query $i$ sees keys $j \le i$. A program
# whose queries are $[s, s + b_q)$ needs no key at or past $s + b_q$: its loop ends there, and about half
# the work of the whole grid is never done. The blocks wholly before $s$ are seen by every query of the
# program and need no mask; the diagonal block (or blocks, when $b_q > b_k$) needs the mask
# `columns <= rows`, and a partial last block the mask `columns < L`. The solution below applies both
# masks to every block it loads: one `tl.where` per block, simple and right. `flash_triton` splits the
# loop in two, as Triton's tutorial does, so that only the blocks a mask cuts through pay for it.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="759dbe17f5"
# ## 5. 因果：对角线上方的块从不读入
#
# 使用 `is_causal`（左上角对齐，与 F.scaled_dot_product_attention 相同）时，查询 $i$ 能看到键 $j \le i$。一个负责查询 $[s, s + b_q)$ 的程序，用不到位置在 $s + b_q$ 及之后的键：循环就在那里结束，整个网格大约一半的工作根本不用做。完全位于 $s$ 之前的块，程序里的每个查询都能整块看到，不需要掩码；对角线上的块（$b_q > b_k$ 时是几块）需要掩码 `columns <= rows`，不满的最后一块需要掩码 `columns < L`。下面的参考答案对读入的每一块都加上这两个掩码：每块一次 `tl.where`，简单而且正确。`flash_triton` 则像 Triton 的教程那样把循环拆成两段，只有被掩码切到的块才付出这份代价。

# %% [markdown] tags=["lang-en"]
# ### Exercise 5: causal block skipping
#
# Write `causal_forward(query, key, value, block_q, block_k)`: exercise 4's kernel with `is_causal`, for
# $L_q = L_k = L$ and `block_q` a multiple of `block_k`, returning `(output, lse, loaded)`: output and lse
# as in exercise 4 (allocated with NaN), and loaded, an int64 tensor $(BH, \lceil L / b_q \rceil)$ in
# which each program stores how many key blocks it loaded. A program that loads every block and masks
# gives the right outputs but not the right counts. The check compares the numbers only; it refuses what
# exercise 4's refuses: `F.scaled_dot_product_attention`, `torch.softmax`, `F.softmax`,
# `Tensor.softmax`, `torch.logsumexp`, `Tensor.logsumexp`, `torch.matmul`, `torch.bmm`, `torch.einsum`,
# `flash_triton.flash_forward`, `flash_triton.flash_attention`, `tiled.tiled_attention`,
# `tiled.flash_attention` and `tiled.materialised_attention`.
#
# As in exercise 3, write float32 `tl.dot`s with `input_precision="ieee"` and allocate on the inputs' device.

# %% [markdown] tags=["lang-zh"] en_hash="d2276d64f9"
# ### 练习 5：因果跳块
#
# 写出 `causal_forward(query, key, value, block_q, block_k)`：练习 4 的核函数加上 `is_causal`，适用于 $L_q = L_k = L$、`block_q` 是 `block_k` 的整数倍的情形，返回 `(output, lse, loaded)`：output 和 lse 与练习 4 相同（用 NaN 分配），loaded 是形状为 $(BH, \lceil L / b_q \rceil)$ 的 int64 张量，每个程序在里面写下自己读入了多少个键块。读入所有块再加掩码的程序，数值是对的，计数却不对。检查只比较数值；它不接受的与练习 4 相同：`F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp`、`Tensor.logsumexp`、`torch.matmul`、`torch.bmm`、`torch.einsum`、`flash_triton.flash_forward`、`flash_triton.flash_attention`、`tiled.tiled_attention`、`tiled.flash_attention` 和 `tiled.materialised_attention`。
#
# 与练习 3 一样，float32 的 `tl.dot` 要写 `input_precision="ieee"`，并在输入所在的设备上分配张量。

# %% tags=["exercise"] exercise="09.causal_forward"
def causal_forward(query, key, value, block_q, block_k):
    # lang: en
    """The forward kernel with is_causal; each program counts the key blocks it loads.

    query, key: (BH, L, d); value: (BH, L, d_v); float32; block_q a multiple of block_k.
    Returns (output, lse, loaded): output (BH, L, d_v); lse (BH, L);
    loaded (BH, number of query blocks) int64.
    """
    # lang: zh
    """带 is_causal 的前向核函数；每个程序统计自己读入的键块数。

    query、key：(BH, L, d)；value：(BH, L, d_v)；float32；block_q 是 block_k 的整数倍。
    返回 (output, lse, loaded)：output (BH, L, d_v)；lse (BH, L)；
    loaded (BH, 查询块数) int64。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def causal_kernel(Q, K, V, O, LSE, LOADED, L, d, d_v, scale, n_blocks,
                      BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        block = tl.program_id(0)
        start_q = block * BLOCK_Q
        bh = tl.program_id(1).to(tl.int64)
        rows = start_q + tl.arange(0, BLOCK_Q)
        dims = tl.arange(0, BLOCK_D)
        dims_v = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + bh * L * d + rows[:, None] * d + dims[None, :],
                    mask=(rows[:, None] < L) & (dims[None, :] < d), other=0.0)
        m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
        ell = tl.zeros((BLOCK_Q,), tl.float32)
        acc = tl.zeros((BLOCK_Q, BLOCK_DV), tl.float32)
        loaded = 0
        end = tl.minimum(start_q + BLOCK_Q, L)
        for start_k in range(0, end, BLOCK_K):
            columns = start_k + tl.arange(0, BLOCK_K)
            k = tl.load(K + bh * L * d + columns[:, None] * d + dims[None, :],
                        mask=(columns[:, None] < L) & (dims[None, :] < d), other=0.0)
            v = tl.load(V + bh * L * d_v + columns[:, None] * d_v + dims_v[None, :],
                        mask=(columns[:, None] < L) & (dims_v[None, :] < d_v), other=0.0)
            loaded += 1
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            s = tl.where((columns[None, :] <= rows[:, None]) & (columns[None, :] < L), s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            ell = ell * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            m = m_new
        tl.store(O + bh * L * d_v + rows[:, None] * d_v + dims_v[None, :], acc / ell[:, None],
                 mask=(rows[:, None] < L) & (dims_v[None, :] < d_v))
        tl.store(LSE + bh * L + rows, m + tl.log(ell), mask=rows < L)
        tl.store(LOADED + bh * n_blocks + block, loaded)

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    BH, L, d = query.shape
    d_v = value.shape[2]
    n_blocks = triton.cdiv(L, block_q)
    output = torch.full((BH, L, d_v), float("nan"), device=query.device)
    lse = torch.full((BH, L), float("nan"), device=query.device)
    loaded = torch.empty(BH, n_blocks, dtype=torch.int64, device=query.device)
    causal_kernel[(n_blocks, BH)](query, key, value, output, lse, loaded, L, d, d_v, 1 / math.sqrt(d), n_blocks,
                                  BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=max(16, triton.next_power_of_2(d)),
                                  BLOCK_DV=max(16, triton.next_power_of_2(d_v)))
    return output, lse, loaded
    ### END SOLUTION


# %%
from course_utils import check
check("09.causal_forward", causal_forward)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. The backward: dK and dV from the saved lse
#
# The backward never stores the weights either. From the forward it keeps the output $O$
# and the lse; per query it computes $D = \mathrm{rowsum}(dO \circ O)$ once. Then one program per key
# block holds its keys and values and loops over the query blocks that see them, recomputing each tile's
# weights $P = \exp(S - \mathrm{lse})$ and accumulating $dV \mathrel{+}= P^\top dO$ and
# $dK \mathrel{+}= dS^\top Q \cdot \text{scale}$, with $dS = P \circ (dP - D)$, $dP = dO\,V^\top$.
#
# $dQ = dS\,K \cdot \text{scale}$ needs a sum over the key blocks, which this loop visits in different
# programs. Triton's fused-attention tutorial, whose design this lesson follows, gives dQ a second
# kernel, one program per query block, that loops over the key blocks and recomputes $S$, $P$ and $dP$
# there (exercise 7). FlashAttention-2 itself (Algorithm 2 of its paper) does not: inside the dK/dV loop
# it adds each tile's share of dQ to dQ in HBM with atomic adds. The trade-off: the atomics make one
# pass, but they need a float32 dQ buffer, and they add in whatever order the programs arrive, so dQ
# changes in its last bits from run to run; the split runs two more matrix products per tile, and
# gives the same dQ every time.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5417495f49"
# ## 6. 反向传播：用保存的 lse 算 dK 和 dV
#
# 反向传播同样从不存下权重。它从前向保留输出 $O$ 和 lse；对每个查询只算一次 $D = \mathrm{rowsum}(dO \circ O)$。然后每个键块一个程序，持有自己的键和值，遍历能看到它们的查询块，为每个分块重新算出权重 $P = \exp(S - \mathrm{lse})$，并累加 $dV \mathrel{+}= P^\top dO$ 和 $dK \mathrel{+}= dS^\top Q \cdot \text{scale}$，其中 $dS = P \circ (dP - D)$，$dP = dO\,V^\top$。
#
# $dQ = dS\,K \cdot \text{scale}$ 要对所有键块求和，而这个循环是在不同的程序里访问这些键块的。本课沿用的 Triton 融合注意力教程给 dQ 另写一个核函数：每个查询块一个程序，遍历各个键块，在那里重新算出 $S$、$P$ 和 $dP$（练习 7）。FlashAttention-2 本身（论文中的算法 2）不是这样做的：它在 dK/dV 的循环里，用原子加法把每个分块对 dQ 的贡献加到显存中的 dQ 上。两者各有取舍：原子加法只需遍历一遍，但需要一块 float32 的 dQ 缓冲区，而且加法的顺序取决于各个程序到达的先后，所以每次运行的 dQ 在最后几位上都会有差别；拆成两个核函数则每个分块要多做两次矩阵乘法，但每次得到的 dQ 都完全相同。

# %% [markdown] tags=["lang-en"]
# ### Exercise 6: the dK/dV kernel
#
# Write `backward_dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal)` for float32
# query $(BH, L_q, d)$, key $(BH, L_k, d)$, value $(BH, L_k, d_v)$, the forward's output $(BH, L_q, d_v)$
# and lse $(BH, L_q)$, and d_output $(BH, L_q, d_v)$: launch one program per key block (a kernel
# defined inside the function) that loops over the query blocks, computes $D$ from the blocks of dO and
# O it loads, recomputes $P$ from lse (masked when `causal`, where $L_q = L_k$) and accumulates dK and dV. Return `(d_key, d_value)`, the
# gradients of $\sum \text{output} \circ \text{d\_output}$ with respect to key and value, float32,
# allocated with `torch.full(..., float("nan"))` so that a row your kernel never stores shows. The
# check compares their numbers with PyTorch's gradients. It refuses `torch.autograd.grad`,
# `Tensor.backward`, `torch.matmul`, `torch.bmm`, `torch.einsum`, and the course's
# `flash_triton.flash_backward` and `tiled.tiled_backward`.
#
# As in exercise 3, write float32 `tl.dot`s with `input_precision="ieee"` and allocate on the inputs' device.

# %% [markdown] tags=["lang-zh"] en_hash="c4116dcda8"
# ### 练习 6：dK/dV 核函数
#
# 写出 `backward_dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal)`，其中 query 为 $(BH, L_q, d)$，key 为 $(BH, L_k, d)$，value 为 $(BH, L_k, d_v)$，output $(BH, L_q, d_v)$ 和 lse $(BH, L_q)$ 是前向的结果，d_output 为 $(BH, L_q, d_v)$，都是 float32：为每个键块启动一个程序（核函数定义在函数内部），遍历各个查询块，用读入的 dO 和 O 的块算出 $D$，用 lse 重新算出 $P$（`causal` 时加掩码，此时 $L_q = L_k$），累加 dK 和 dV。返回 `(d_key, d_value)`，即 $\sum \text{output} \circ \text{d\_output}$ 对 key 和 value 的梯度，float32，用 `torch.full(..., float("nan"))` 分配，这样核函数漏写的行会显现出来。检查会把它们与 PyTorch 算出的梯度比较（数值）。检查不接受 `torch.autograd.grad`、`Tensor.backward`、`torch.matmul`、`torch.bmm`、`torch.einsum`，也不接受课程自带的 `flash_triton.flash_backward` 和 `tiled.tiled_backward`。
#
# 与练习 3 一样，float32 的 `tl.dot` 要写 `input_precision="ieee"`，并在输入所在的设备上分配张量。

# %% tags=["exercise"] exercise="09.backward_dkdv"
def backward_dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal):
    # lang: en
    """dK and dV of attention by one Triton kernel, one program per key block.

    query: (BH, L_q, d); key: (BH, L_k, d); value: (BH, L_k, d_v); output: (BH, L_q, d_v);
    lse: (BH, L_q); d_output: (BH, L_q, d_v); float32. causal: is_causal (L_q = L_k).
    Returns (d_key, d_value): (BH, L_k, d) and (BH, L_k, d_v), float32.
    """
    # lang: zh
    """用一个 Triton 核函数算注意力的 dK 和 dV，每个键块一个程序。

    query：(BH, L_q, d)；key：(BH, L_k, d)；value：(BH, L_k, d_v)；output：(BH, L_q, d_v)；
    lse：(BH, L_q)；d_output：(BH, L_q, d_v)；float32。causal：is_causal（L_q = L_k）。
    返回 (d_key, d_value)：(BH, L_k, d) 和 (BH, L_k, d_v)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def dkdv_kernel(Q, K, V, O, DO, LSE, DK, DV, L_q, L_k, d, d_v, scale, CAUSAL: tl.constexpr,
                    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        start_k = tl.program_id(0) * BLOCK_K
        bh = tl.program_id(1).to(tl.int64)
        columns = start_k + tl.arange(0, BLOCK_K)
        dims = tl.arange(0, BLOCK_D)
        dims_v = tl.arange(0, BLOCK_DV)
        k = tl.load(K + bh * L_k * d + columns[:, None] * d + dims[None, :],
                    mask=(columns[:, None] < L_k) & (dims[None, :] < d), other=0.0)
        v = tl.load(V + bh * L_k * d_v + columns[:, None] * d_v + dims_v[None, :],
                    mask=(columns[:, None] < L_k) & (dims_v[None, :] < d_v), other=0.0)
        dk = tl.zeros((BLOCK_K, BLOCK_D), tl.float32)
        dv = tl.zeros((BLOCK_K, BLOCK_DV), tl.float32)
        start = (start_k // BLOCK_Q) * BLOCK_Q if CAUSAL else 0
        for start_q in range(start, L_q, BLOCK_Q):
            rows = start_q + tl.arange(0, BLOCK_Q)
            q = tl.load(Q + bh * L_q * d + rows[:, None] * d + dims[None, :],
                        mask=(rows[:, None] < L_q) & (dims[None, :] < d), other=0.0)
            in_rows = (rows[:, None] < L_q) & (dims_v[None, :] < d_v)
            do = tl.load(DO + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :], mask=in_rows, other=0.0)
            o = tl.load(O + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :], mask=in_rows, other=0.0)
            delta = tl.sum(do * o, axis=1)
            lse = tl.load(LSE + bh * L_q + rows, mask=rows < L_q, other=0.0)
            p = tl.exp(tl.dot(q, tl.trans(k), input_precision="ieee") * scale - lse[:, None])
            keep = (rows[:, None] < L_q) & (columns[None, :] < L_k)
            if CAUSAL:
                keep = keep & (columns[None, :] <= rows[:, None])
            p = tl.where(keep, p, 0.0)
            dv += tl.dot(tl.trans(p), do, input_precision="ieee")
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds), q, input_precision="ieee")
        tl.store(DK + bh * L_k * d + columns[:, None] * d + dims[None, :], dk * scale,
                 mask=(columns[:, None] < L_k) & (dims[None, :] < d))
        tl.store(DV + bh * L_k * d_v + columns[:, None] * d_v + dims_v[None, :], dv,
                 mask=(columns[:, None] < L_k) & (dims_v[None, :] < d_v))

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    output, d_output, lse = output.contiguous(), d_output.contiguous(), lse.contiguous()
    BH, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[2]
    d_key, d_value = torch.full_like(key, float("nan")), torch.full_like(value, float("nan"))
    dkdv_kernel[(triton.cdiv(L_k, block_k), BH)](query, key, value, output, d_output, lse, d_key, d_value,
                                                 L_q, L_k, d, d_v, 1 / math.sqrt(d), CAUSAL=causal,
                                                 BLOCK_Q=block_q, BLOCK_K=block_k,
                                                 BLOCK_D=max(16, triton.next_power_of_2(d)),
                                                 BLOCK_DV=max(16, triton.next_power_of_2(d_v)))
    return d_key, d_value
    ### END SOLUTION


# %%
from course_utils import check
check("09.backward_dkdv", backward_dkdv)

# %% [markdown] tags=["lang-en"]
# ### Exercise 7: the dQ kernel
#
# Write `backward_dq(query, key, value, output, lse, d_output, block_q, block_k, causal)`, with exercise
# 6's arguments: launch one program per block of `block_q` queries on the grid
# `(triton.cdiv(L_q, block_q), BH)` (a kernel defined inside the function) that computes $D$ for its
# queries from the blocks of dO and O it loads, then loops over the key blocks its queries see (when
# `causal`, up to its diagonal), recomputes $P$ from lse, masked as in the forward, and accumulates
# $dQ = dS\,K \cdot \text{scale}$ in float32. Return d_query $(BH, L_q, d)$, the gradient of
# $\sum \text{output} \circ \text{d\_output}$ with respect to query, float32, allocated with
# `torch.full(..., float("nan"))`. The check compares its numbers with PyTorch's gradient. It refuses
# what exercise 6 refuses: `torch.autograd.grad`, `Tensor.backward`, `torch.matmul`, `torch.bmm`,
# `torch.einsum`, and the course's `flash_triton.flash_backward` and `tiled.tiled_backward`.
#
# As in exercise 3, write float32 `tl.dot`s with `input_precision="ieee"` and allocate on the inputs' device.

# %% [markdown] tags=["lang-zh"] en_hash="d7e73dc70c"
# ### 练习 7：dQ 核函数
#
# 写出 `backward_dq(query, key, value, output, lse, d_output, block_q, block_k, causal)`，参数与练习 6 相同：在网格 `(triton.cdiv(L_q, block_q), BH)` 上启动，每块 `block_q` 个查询一个程序（核函数定义在函数内部）。程序先用读入的 dO 和 O 的块算出自己这些查询的 $D$，再遍历这些查询能看到的键块（`causal` 时到自己的对角线为止），用 lse 重新算出 $P$，像前向那样加掩码，并用 float32 累加 $dQ = dS\,K \cdot \text{scale}$。返回 d_query，形状 $(BH, L_q, d)$，即 $\sum \text{output} \circ \text{d\_output}$ 对 query 的梯度，float32，用 `torch.full(..., float("nan"))` 分配。检查会把它的数值与 PyTorch 算出的梯度比较。它不接受的与练习 6 相同：`torch.autograd.grad`、`Tensor.backward`、`torch.matmul`、`torch.bmm`、`torch.einsum`，以及课程自带的 `flash_triton.flash_backward` 和 `tiled.tiled_backward`。
#
# 与练习 3 一样，float32 的 `tl.dot` 要写 `input_precision="ieee"`，并在输入所在的设备上分配张量。

# %% tags=["exercise"] exercise="09.backward_dq"
def backward_dq(query, key, value, output, lse, d_output, block_q, block_k, causal):
    # lang: en
    """dQ of attention by one Triton kernel, one program per query block.

    query: (BH, L_q, d); key: (BH, L_k, d); value: (BH, L_k, d_v); output: (BH, L_q, d_v);
    lse: (BH, L_q); d_output: (BH, L_q, d_v); float32. causal: is_causal (L_q = L_k).
    Returns d_query: (BH, L_q, d), float32.
    """
    # lang: zh
    """用一个 Triton 核函数算注意力的 dQ，每个查询块一个程序。

    query：(BH, L_q, d)；key：(BH, L_k, d)；value：(BH, L_k, d_v)；output：(BH, L_q, d_v)；
    lse：(BH, L_q)；d_output：(BH, L_q, d_v)；float32。causal：is_causal（L_q = L_k）。
    返回 d_query：(BH, L_q, d)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def dq_kernel(Q, K, V, O, DO, LSE, DQ, L_q, L_k, d, d_v, scale, CAUSAL: tl.constexpr,
                  BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        start_q = tl.program_id(0) * BLOCK_Q
        bh = tl.program_id(1).to(tl.int64)
        rows = start_q + tl.arange(0, BLOCK_Q)
        dims = tl.arange(0, BLOCK_D)
        dims_v = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + bh * L_q * d + rows[:, None] * d + dims[None, :],
                    mask=(rows[:, None] < L_q) & (dims[None, :] < d), other=0.0)
        in_rows = (rows[:, None] < L_q) & (dims_v[None, :] < d_v)
        do = tl.load(DO + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :], mask=in_rows, other=0.0)
        o = tl.load(O + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :], mask=in_rows, other=0.0)
        delta = tl.sum(do * o, axis=1)
        lse = tl.load(LSE + bh * L_q + rows, mask=rows < L_q, other=0.0)
        dq = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
        end = tl.minimum(start_q + BLOCK_Q, L_k) if CAUSAL else L_k
        for start_k in range(0, end, BLOCK_K):
            columns = start_k + tl.arange(0, BLOCK_K)
            k = tl.load(K + bh * L_k * d + columns[:, None] * d + dims[None, :],
                        mask=(columns[:, None] < L_k) & (dims[None, :] < d), other=0.0)
            v = tl.load(V + bh * L_k * d_v + columns[:, None] * d_v + dims_v[None, :],
                        mask=(columns[:, None] < L_k) & (dims_v[None, :] < d_v), other=0.0)
            p = tl.exp(tl.dot(q, tl.trans(k), input_precision="ieee") * scale - lse[:, None])
            keep = (rows[:, None] < L_q) & (columns[None, :] < L_k)
            if CAUSAL:
                keep = keep & (columns[None, :] <= rows[:, None])
            p = tl.where(keep, p, 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            ds = p * (dp - delta[:, None])
            dq += tl.dot(ds, k, input_precision="ieee")
        tl.store(DQ + bh * L_q * d + rows[:, None] * d + dims[None, :], dq * scale,
                 mask=(rows[:, None] < L_q) & (dims[None, :] < d))

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    output, d_output, lse = output.contiguous(), d_output.contiguous(), lse.contiguous()
    BH, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[2]
    d_query = torch.full((BH, L_q, d), float("nan"), device=query.device)
    dq_kernel[(triton.cdiv(L_q, block_q), BH)](query, key, value, output, d_output, lse, d_query,
                                               L_q, L_k, d, d_v, 1 / math.sqrt(d), CAUSAL=causal,
                                               BLOCK_Q=block_q, BLOCK_K=block_k,
                                               BLOCK_D=max(16, triton.next_power_of_2(d)),
                                               BLOCK_DV=max(16, triton.next_power_of_2(d_v)))
    return d_query
    ### END SOLUTION


# %%
from course_utils import check
check("09.backward_dq", backward_dq)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Exercise 8: the whole FlashAttention, one `torch.autograd.Function`
#
# Your four kernels are FlashAttention; what ties them together is a `torch.autograd.Function`. Autograd
# calls its `forward` on the way forward and its `backward` on the way back, and what `forward` keeps on
# `ctx` (tensors through `ctx.save_for_backward`, anything else as an attribute) is all `backward` has.
# `backward` gets the gradient of the output and returns one value per argument of `forward`, by
# position: a gradient for each tensor, `None` for each number or flag.
#
# Complete `FlashAttention` inside `attention_and_gradients(query, key, value, d_output, block_q, block_k, causal)`:
# `forward(ctx, query, key, value, block_q, block_k, causal)` runs your kernel of exercise 5
# (`causal_forward`) when `causal` and that of exercise 4 (`flash_forward`) otherwise, keeps what the
# backward needs and returns the output $(BH, L_q, d_v)$; `backward(ctx, d_output)` runs your kernels of
# exercises 6 and 7 with the same `causal`. Autograd may hand `backward` a `d_output` that is not
# contiguous (the check's first case does): make it contiguous before a kernel reads it as rows. The end of
# the function, given, runs your Function as autograd does and returns `(output, d_query, d_key, d_value)`.
# The check compares them with `F.scaled_dot_product_attention`'s output and autograd's gradients of it,
# causal as in exercises 5 to 7 ($L_q = L_k$, `block_q` a multiple of `block_k`). Every number must come
# from your kernels: the check refuses `F.scaled_dot_product_attention` itself, `torch.softmax`, `F.softmax`,
# `Tensor.softmax`, `torch.logsumexp`, `Tensor.logsumexp`, `torch.matmul`, `torch.bmm`, `torch.einsum`, and
# the course's `flash_triton.flash_attention`, `flash_triton.flash_forward`, `flash_triton.flash_backward`,
# `tiled.tiled_attention` and `tiled.tiled_backward`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="ce8d04e0ad"
# ### 练习 8：完整的 FlashAttention，一个 `torch.autograd.Function`
#
# 你写的四个核函数就是 FlashAttention；把它们连在一起的是一个 `torch.autograd.Function`。autograd 在前向时调用它的 `forward`，在反向时调用它的 `backward`；`forward` 存在 `ctx` 上的东西（张量用 `ctx.save_for_backward`，其他的存成属性）就是 `backward` 能拿到的全部。`backward` 接收输出的梯度，并按位置为 `forward` 的每个参数返回一个值：每个张量一个梯度，每个数或标志一个 `None`。
#
# 在 `attention_and_gradients(query, key, value, d_output, block_q, block_k, causal)` 里补全 `FlashAttention`：`forward(ctx, query, key, value, block_q, block_k, causal)` 在 `causal` 时调用你在练习 5 写的核函数（`causal_forward`），否则调用练习 4 的（`flash_forward`），保存反向传播需要的东西，返回输出 $(BH, L_q, d_v)$；`backward(ctx, d_output)` 用同一个 `causal` 调用你在练习 6 和 7 写的核函数。autograd 交给 `backward` 的 `d_output` 不一定是连续的（检查的第一个测试用例就不是）：在核函数把它按行读取之前，先把它变成连续的。函数末尾是给定的代码，它像 autograd 那样运行你的 Function，返回 `(output, d_query, d_key, d_value)`。检查会把它们与 `F.scaled_dot_product_attention` 的输出以及 autograd 对它求出的梯度比较；因果的要求与练习 5 到 7 相同（$L_q = L_k$，`block_q` 是 `block_k` 的整数倍）。每个数都必须来自你的核函数：检查不接受 `F.scaled_dot_product_attention` 本身，也不接受 `torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp`、`Tensor.logsumexp`、`torch.matmul`、`torch.bmm`、`torch.einsum`，以及课程自带的 `flash_triton.flash_attention`、`flash_triton.flash_forward`、`flash_triton.flash_backward`、`tiled.tiled_attention` 和 `tiled.tiled_backward`。

# %% tags=["exercise"] exercise="09.flash_function"
def attention_and_gradients(query, key, value, d_output, block_q, block_k, causal):
    # lang: en
    """Attention's output and its gradients through your kernels, tied together by a torch.autograd.Function.

    query: (BH, L_q, d); key: (BH, L_k, d); value: (BH, L_k, d_v); d_output: (BH, L_q, d_v); float32.
    block_q, block_k: the kernels' block sizes; causal: is_causal (L_q = L_k).
    Returns (output, d_query, d_key, d_value): (BH, L_q, d_v), (BH, L_q, d), (BH, L_k, d), (BH, L_k, d_v).
    """
    # lang: zh
    """用 torch.autograd.Function 把你的核函数连起来，算出注意力的输出和它的梯度。

    query：(BH, L_q, d)；key：(BH, L_k, d)；value：(BH, L_k, d_v)；d_output：(BH, L_q, d_v)；float32。
    block_q、block_k：核函数的块大小；causal：is_causal（L_q = L_k）。
    返回 (output, d_query, d_key, d_value)：(BH, L_q, d_v)、(BH, L_q, d)、(BH, L_k, d)、(BH, L_k, d_v)。
    """
    # lang: end

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query, key, value, block_q, block_k, causal):
            ### BEGIN SOLUTION
            if causal:
                output, lse, _ = causal_forward(query, key, value, block_q, block_k)
            else:
                output, lse = flash_forward(query, key, value, block_q, block_k)
            ctx.save_for_backward(query, key, value, output, lse)
            ctx.block_q, ctx.block_k, ctx.causal = block_q, block_k, causal
            return output
            ### END SOLUTION

        @staticmethod
        def backward(ctx, d_output):
            ### BEGIN SOLUTION
            query, key, value, output, lse = ctx.saved_tensors
            saved = (query, key, value, output, lse, d_output.contiguous(), ctx.block_q, ctx.block_k, ctx.causal)
            d_key, d_value = backward_dkdv(*saved)
            return backward_dq(*saved), d_key, d_value, None, None, None
            ### END SOLUTION

    # lang: en
    # given: autograd runs your Function, forward then backward, with d_output as the output's gradient
    # (under enable_grad: the gradients are this function's result, even when it is called under no_grad)
    # lang: zh
    # 给定的代码：autograd 运行你的 Function，先 forward 后 backward，d_output 是输出的梯度
    # （放在 enable_grad 里：梯度是这个函数的返回值，即使在 no_grad 下调用它也要算出来）
    # lang: end
    with torch.enable_grad():
        leaves = [tensor.detach().requires_grad_() for tensor in (query, key, value)]
        result = FlashAttention.apply(*leaves, block_q, block_k, causal)
        gradients = torch.autograd.grad(result, leaves, d_output, allow_unused=True, materialize_grads=True)
    return (result.detach(), *gradients)


# %%
from course_utils import check
check("09.flash_function", attention_and_gradients)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Exercise 9: half precision, float32 sums
#
# A GPU's tensor cores multiply float16 and bfloat16, which is why every fast attention takes them: half
# the memory traffic, and products several times faster than float32's. What they cannot do is *sum* in
# half precision. float16 keeps 11 significant bits and stops at 65,504; bfloat16 keeps 8 (with float32's
# range). A long row's sums (ℓ, and the output's accumulator, a sum of up to $L_k$ weighted values) lose
# those bits or overflow, so every FlashAttention loads half inputs, multiplies them with `tl.dot` into a
# **float32** result, keeps m, ℓ and the accumulator in float32, and rounds once, when it stores the output
# in the inputs' dtype. lse stays float32: the backward recomputes each weight as $\exp(s - \text{lse})$.
#
# Write `flash_forward_half(query, key, value, block_q, block_k)`: exercise 4's forward for query, key and
# value in float16 or bfloat16 (all three the same), returning `(output, lse)`: output in the inputs' dtype,
# lse float32 (allocate both with `torch.full(..., float("nan"), dtype=...)`). Load the blocks in their own
# dtype and give `tl.dot` half blocks (no `input_precision`: it concerns float32 only), `p.to(v.dtype)`
# for P·V. The check allows $5\times10^{-3} + 10^{-2}\,|x|$ around float64's answer $x$: measured, the
# lesson's kernel is within $9.8\times10^{-4}$ (float16) and $7.8\times10^{-3}$ (bfloat16) of
# `F.scaled_dot_product_attention` in float64 on the same inputs, one rounding of the output. Its cases
# hold a float16 row whose sum passes 65,504 and a bfloat16 row whose sum loses bits. It refuses what
# exercise 4 refuses: `F.scaled_dot_product_attention`, `torch.softmax`, `F.softmax`, `Tensor.softmax`,
# `torch.logsumexp`, `Tensor.logsumexp`, `torch.matmul`, `torch.bmm`, `torch.einsum`, and the course's
# `flash_triton.flash_forward`, `flash_triton.flash_attention`, `tiled.tiled_attention`,
# `tiled.flash_attention` and `tiled.materialised_attention`. (Casting P to half before its row sum moves ℓ by at most $2^{-11}$ (float16) or
# $2^{-9}$ (bfloat16): inside that tolerance, so no check can see it.)
#
# On a CPU, Triton's interpreter holds a bfloat16 block as the raw bits of its numbers, which NumPy cannot
# compute with (it has no bfloat16); the course widens them to float32 for each operation and rounds the
# result back to the nearest, as a GPU does, so the same kernel gives a GPU's numbers here.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="fb6d0a7fe5"
# ### 练习 9：半精度输入，float32 求和
#
# GPU 的张量核心做的是 float16 和 bfloat16 的乘法，所以快的注意力实现都用它们：内存读写减半，乘法比 float32 快好几倍。
# 但它们不能用半精度*求和*。float16 只有 11 位有效数字，最大只能表示 65,504；bfloat16 只有 8 位（取值范围和 float32 相同）。
# 长的一行要求的和（ℓ，以及输出的累加器，它是最多 $L_k$ 个加权值的和）会丢掉这些位，或者溢出。所以每个 FlashAttention
# 都以半精度读入输入，用 `tl.dot` 相乘得到 **float32** 的结果，m、ℓ 和累加器都保持 float32，只在按输入的数据类型写回输出时
# 舍入一次。lse 保持 float32：反向传播要用 $\exp(s - \text{lse})$ 重新算出每一个权重。
#
# 写出 `flash_forward_half(query, key, value, block_q, block_k)`：练习 4 的前向，查询、键和值（query、key、value）是 float16
# 或 bfloat16（三者相同），返回 `(output, lse)`：output 用输入的数据类型，lse 用 float32（两者都用
# `torch.full(..., float("nan"), dtype=...)` 分配）。按各自的数据类型读入各块，交给 `tl.dot` 的是半精度的块（不写
# `input_precision`：它只对 float32 起作用），P·V 用 `p.to(v.dtype)`。检查允许的误差是 float64 结果 $x$ 周围
# $5\times10^{-3} + 10^{-2}\,|x|$：实测本课的核函数与同样输入上 float64 的 `F.scaled_dot_product_attention` 相差不超过
# $9.8\times10^{-4}$（float16）和 $7.8\times10^{-3}$（bfloat16），也就是输出的一次舍入。测试用例里有一行 float16 的和超过了
# 65,504，还有一行 bfloat16 的和丢了位。检查不接受练习 4 不接受的那些函数：`F.scaled_dot_product_attention`、`torch.softmax`、`F.softmax`、`Tensor.softmax`、`torch.logsumexp`、`Tensor.logsumexp`、`torch.matmul`、`torch.bmm`、`torch.einsum`，以及课程自带的 `flash_triton.flash_forward`、`flash_triton.flash_attention`、`tiled.tiled_attention`、`tiled.flash_attention` 和 `tiled.materialised_attention`。（在行求和之前就把 P 转成半精度，ℓ 最多变化
# $2^{-11}$（float16）或 $2^{-9}$（bfloat16）：落在这个误差范围之内，任何检查都看不出来。）
#
# 在 CPU 上，Triton 的解释器把 bfloat16 的块存成其中每个数的原始比特，NumPy 没法拿它们计算（NumPy 没有 bfloat16）；
# 课程在每次运算时把它们扩展成 float32，再把结果舍入回最接近的 bfloat16，和 GPU 的做法一样，所以同一个核函数在这里
# 得到的就是 GPU 上的数值。

# %% tags=["exercise"] exercise="09.flash_forward_half"
def flash_forward_half(query, key, value, block_q, block_k):
    # lang: en
    """FlashAttention's forward on float16 or bfloat16 inputs, with float32 sums.

    query: (BH, L_q, d); key: (BH, L_k, d); value: (BH, L_k, d_v); all float16 or all bfloat16.
    block_q, block_k: queries per program, keys per step (powers of two >= 16).
    Returns (output, lse): output (BH, L_q, d_v) in the inputs' dtype; lse (BH, L_q) float32.
    """
    # lang: zh
    """输入为 float16 或 bfloat16 的 FlashAttention 前向，用 float32 求和。

    query：(BH, L_q, d)；key：(BH, L_k, d)；value：(BH, L_k, d_v)；都是 float16 或都是 bfloat16。
    block_q、block_k：每个程序的查询数、每一步的键数（不小于 16 的 2 的幂）。
    返回 (output, lse)：output (BH, L_q, d_v)，数据类型与输入相同；lse (BH, L_q)，float32。
    """
    # lang: end
    ### BEGIN SOLUTION
    @triton.jit
    def half_kernel(Q, K, V, O, LSE, L_q, L_k, d, d_v, scale,
                    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
        start_q = tl.program_id(0) * BLOCK_Q
        bh = tl.program_id(1).to(tl.int64)
        rows = start_q + tl.arange(0, BLOCK_Q)
        dims = tl.arange(0, BLOCK_D)
        dims_v = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + bh * L_q * d + rows[:, None] * d + dims[None, :],
                    mask=(rows[:, None] < L_q) & (dims[None, :] < d), other=0.0)
        m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
        ell = tl.zeros((BLOCK_Q,), tl.float32)
        acc = tl.zeros((BLOCK_Q, BLOCK_DV), tl.float32)
        for start_k in range(0, L_k, BLOCK_K):
            columns = start_k + tl.arange(0, BLOCK_K)
            k = tl.load(K + bh * L_k * d + columns[:, None] * d + dims[None, :],
                        mask=(columns[:, None] < L_k) & (dims[None, :] < d), other=0.0)
            v = tl.load(V + bh * L_k * d_v + columns[:, None] * d_v + dims_v[None, :],
                        mask=(columns[:, None] < L_k) & (dims_v[None, :] < d_v), other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where(columns[None, :] < L_k, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            ell = ell * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        tl.store(O + bh * L_q * d_v + rows[:, None] * d_v + dims_v[None, :],
                 (acc / ell[:, None]).to(O.dtype.element_ty),
                 mask=(rows[:, None] < L_q) & (dims_v[None, :] < d_v))
        tl.store(LSE + bh * L_q + rows, m + tl.log(ell), mask=rows < L_q)

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    BH, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[2]
    output = torch.full((BH, L_q, d_v), float("nan"), dtype=query.dtype, device=query.device)
    lse = torch.full((BH, L_q), float("nan"), dtype=torch.float32, device=query.device)
    grid = (triton.cdiv(L_q, block_q), BH)
    half_kernel[grid](query, key, value, output, lse, L_q, L_k, d, d_v, 1 / math.sqrt(d),
                      BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=max(16, triton.next_power_of_2(d)),
                      BLOCK_DV=max(16, triton.next_power_of_2(d_v)))
    return output, lse
    ### END SOLUTION


# %%
from course_utils import check
check("09.flash_forward_half", flash_forward_half)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Speed, honestly
#
# On a CPU the interpreter runs NumPy one program at a time: it checks kernels, it does not measure
# them. The speed of these kernels is a GPU's, measured by `benchmarks/bench_flash_triton.py` (forward
# and backward TFLOP/s against `F.scaled_dot_product_attention`, in the dtypes the table names, one (batch·head) count per
# length so that every run does the same number of tokens) and committed with the GPU, PyTorch and
# date it was measured on. The table shows them; a ratio of 1 would be PyTorch's own kernel (the
# backend it picked is named, read as lesson 08 reads it).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d10a60bd40"
# ## 7. 老老实实地谈速度
#
# 在 CPU 上，解释器用 NumPy 一次运行一个程序：它用来检查核函数，而不是测量它们的速度。这些核函数的速度是 GPU 上的速度，由 `benchmarks/bench_flash_triton.py` 测量（前向和反向的 TFLOP/s，与 `F.scaled_dot_product_attention` 对比，数据类型见表中的 dtype 列，每个长度配一个（批量·头）数，让每次运行处理的词元数相同），连同测量所用的 GPU、PyTorch 版本和日期一起提交。下表列出这些结果；比值为 1 就等于 PyTorch 自己的核函数（表中写出它选用的后端，读法与第 08 课相同）。

# %% tags=["nbval-ignore-output"]
# lang: en
measured.table("flash_triton", {
    "dtype": lambda row: row.get("dtype", "float16"),
    "causal": lambda row: "yes" if row["causal"] else "no", "L": lambda row: row["L"], "d": lambda row: row["d"],
    "forward TFLOP/s": lambda row: f"{row['triton_forward_tflops']:.0f}",
    "forward ÷ F.sdpa": lambda row: measured.ratio(row["sdpa_forward_ms"], row["triton_forward_ms"]),
    "backward TFLOP/s": lambda row: f"{row['triton_backward_tflops']:.0f}",
    "backward ÷ F.sdpa": lambda row: measured.ratio(row["sdpa_backward_ms"], row["triton_backward_ms"]),
    "F.sdpa's backend": lambda row: row["sdpa_backend"].split(",")[0].strip("_"),
})
# lang: zh
measured.table("flash_triton", {
    "dtype": lambda row: row.get("dtype", "float16"),
    "因果": lambda row: "是" if row["causal"] else "否", "L": lambda row: row["L"], "d": lambda row: row["d"],
    "前向 TFLOP/s": lambda row: f"{row['triton_forward_tflops']:.0f}",
    "前向 ÷ F.sdpa": lambda row: measured.ratio(row["sdpa_forward_ms"], row["triton_forward_ms"]),
    "反向 TFLOP/s": lambda row: f"{row['triton_backward_tflops']:.0f}",
    "反向 ÷ F.sdpa": lambda row: measured.ratio(row["sdpa_backward_ms"], row["triton_backward_ms"]),
    "F.sdpa 的后端": lambda row: row["sdpa_backend"].split(",")[0].strip("_"),
})
# lang: end
if gpu is not None:
    tiled_ms = {L: gpu.settings.get(f"lesson08_tiled_forward_ms_L{L}") for L in gpu.settings["lengths"]}
    flash_ms = {row["L"]: row["triton_forward_ms"] for row in gpu.rows(causal=False)}
    for L in sorted(tiled_ms):
        # lang: en
        print(f"L = {L}: lesson 08's Python tiles {tiled_ms[L]:.1f} ms, this lesson's kernel {flash_ms[L]:.2f} ms "
              f"({measured.ratio(tiled_ms[L], flash_ms[L], 0)} faster)")
        # lang: zh
        print(f"L = {L}：第 08 课的 Python 分块 {tiled_ms[L]:.1f} 毫秒，本课的核函数 {flash_ms[L]:.2f} 毫秒"
              f"（快 {measured.ratio(tiled_ms[L], flash_ms[L], 0)}）")
        # lang: end

# %% [markdown] tags=["lang-en"]
# The same figures as a picture: the kernels' throughput as a share of PyTorch's, forward and backward
# (the cell prints the range of each). The backward gives up more, and one reason can be counted. The
# FLOP count credits the backward with five matrix products per tile, 2.5 times the forward's two. The
# split runs seven: the dK/dV kernel computes $S = QK^\top$, $dP = dO\,V^\top$, $P^\top dO$ and
# $dS^\top Q$, and the dQ kernel computes $S$ and $dP$ again before $dS\,K$. Even if every product ran
# as fast as in a kernel that does only the five, the split's backward would show 5/7 ≈ 0.71 of that
# kernel's throughput, and the ratios the cell prints lie around that figure. What else stands between
# it and PyTorch's kernel (the table names the backend F.sdpa picked) was not measured here.

# %% [markdown] tags=["lang-zh"] en_hash="5f18d19664"
# 同样的数字画成图：核函数的吞吐量占 PyTorch 的比例，前向和反向各一组（单元会打印出两者各自的范围）。反向差得多一些，其中一个原因可以数出来。浮点运算次数的算法认为反向在每个分块上做五次矩阵乘法，是前向两次的 2.5 倍；拆开的两个核函数却做了七次：dK/dV 核函数算 $S = QK^\top$、$dP = dO\,V^\top$、$P^\top dO$ 和 $dS^\top Q$，dQ 核函数在算 $dS\,K$ 之前又把 $S$ 和 $dP$ 算了一遍。即使每次乘法都和只做那五次乘法的核函数一样快，这种拆法的反向吞吐量也只有后者的 5/7 ≈ 0.71，单元打印出的比值就落在这个数附近。除此之外它与 PyTorch 的核函数（表中写出了 F.sdpa 选用的后端）还差在哪里，这里没有测量。

# %% tags=["nbval-ignore-output"]
if gpu is not None:
    # lang: en
    # the picture shows one dtype and head size: float16, the smallest d measured
    # lang: zh
    # 图中只画一种数据类型和头维度：float16，以及测过的最小的 d
    # lang: end
    d_shown = min(row["d"] for row in gpu.rows())
    rows = [row for row in gpu.rows(d=d_shown) if row.get("dtype", "float16") == "float16"]
    forward = [row["forward_ratio"] for row in gpu.rows()]
    backward = [row["backward_ratio"] for row in gpu.rows()]
    # lang: en
    print(f"every row of the table: forward {min(forward):.2f}–{max(forward):.2f} × F.sdpa, "
          f"backward {min(backward):.2f}–{max(backward):.2f} ×")
    # lang: zh
    print(f"表中所有行：前向为 F.sdpa 的 {min(forward):.2f}–{max(forward):.2f} 倍，"
          f"反向为 {min(backward):.2f}–{max(backward):.2f} 倍")
    # lang: end
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    at = torch.arange(len(rows), dtype=torch.float64)
    # lang: en
    names = [f"L={row['L']}" + ("\ncausal" if row["causal"] else "") for row in rows]
    ax.bar(at - 0.2, [row["forward_ratio"] for row in rows], width=0.4, label="forward")
    ax.bar(at + 0.2, [row["backward_ratio"] for row in rows], width=0.4, label="backward")
    ax.set_ylabel("× F.scaled_dot_product_attention")
    # lang: zh
    names = [f"L={row['L']}" + ("\n因果" if row["causal"] else "") for row in rows]
    ax.bar(at - 0.2, [row["forward_ratio"] for row in rows], width=0.4, label="前向")
    ax.bar(at + 0.2, [row["backward_ratio"] for row in rows], width=0.4, label="反向")
    ax.set_ylabel("相对 F.scaled_dot_product_attention 的倍数")
    # lang: end
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(at.tolist(), names)
    ax.set_ylim(0, 1.1)
    ax.legend(loc=4)
    ax.set_title(f"{gpu.device_name}, float16, d = {d_shown}")
    plt.show()

# %% [markdown] tags=["lang-en"]
# And live, on this runtime, at sizes the interpreter finishes quickly: the same kernel's forward against
# lesson 08's tiles and PyTorch's own kernel. On a CPU the interpreter is the slowest by far, one Python
# call per program and one NumPy array per block: its job is to run the kernel's source so that every
# check can run anywhere, not to be fast. On a GPU runtime the same cell times the compiled kernel.

# %% [markdown] tags=["lang-zh"] en_hash="7f3e288c10"
# 再在当前运行环境上现场跑一次，尺寸小到解释器很快就能算完：同一个核函数的前向，对照第 08 课的分块实现和 PyTorch 自己的核函数。在 CPU 上，解释器是最慢的，慢得多：每个程序一次 Python 调用，每个块一个 NumPy 数组。它的任务是运行核函数的源代码，让每个检查在哪里都能做，而不是追求速度。在有 GPU 的运行环境里，同一个单元测的是编译后的核函数。

# %% tags=["nbval-ignore-output"]
interpreted = triton_setup.interpreted()
for L in (32, 64):
    q, k, v = torch.randn(3, 1, 1, L, 16, generator=torch.Generator().manual_seed(L)).to(device).unbind(0)
    # lang: en
    # the interpreter runs once (it is slow and does the same each time); a compiled kernel warms up first
    # lang: zh
    # 解释器只运行一次（它很慢，每次做的都一样）；编译后的核函数先预热
    # lang: end
    kernel_ms = measured.milliseconds(lambda: flash_triton.flash_attention(q, k, v, block_q=16, block_k=16),
                                      device=device, repeat=1 if interpreted else 10, warmup=0 if interpreted else 2)
    tiles_ms = measured.milliseconds(lambda: tiled_attention(q, k, v, block_q=16, block_k=16), device=device, repeat=3)
    sdpa_ms = measured.milliseconds(lambda: F.scaled_dot_product_attention(q, k, v), device=device, repeat=3)
    # lang: en
    route = "interpreted kernel" if interpreted else "compiled kernel"
    print(f"L = {L:>3}: {route} {kernel_ms:7.1f} ms, lesson 08's tiles {tiles_ms:5.2f} ms, "
          f"F.sdpa {sdpa_ms:5.3f} ms")
    # lang: zh
    route = "解释器运行的核函数" if interpreted else "编译后的核函数"
    print(f"L = {L:>3}：{route} {kernel_ms:7.1f} 毫秒，第 08 课的分块 {tiles_ms:5.2f} 毫秒，"
          f"F.sdpa {sdpa_ms:5.3f} 毫秒")
    # lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. How the fast kernels go faster
#
# The lesson's kernels are written to be read. The fast ones (Triton's tutorial, FlashAttention-2 and 3,
# PyTorch's own) do the same arithmetic with a few more habits, each small:
#
# - **exp2, with log₂e folded into the scale.** A GPU computes $e^x$ as $2^{x \log_2 e}$ anyway; the
#   scores are multiplied by the scale already, so multiplying by scale · log₂e once gives base-2 scores,
#   and `tl.exp2` saves a multiply per score. The max and the sum do not care about the base; only the
#   lse is turned back, $\text{lse} = (m_2 + \log_2 \ell) \ln 2$. `flash_triton` does this.
# - **P in float16 before P·V.** The weights are made in float32, then rounded to float16 (or bfloat16)
#   so that the second product runs on the tensor cores too; the accumulator stays float32. `flash_triton`
#   does this for half-precision inputs (`p.to(v.dtype)`).
# - **int64 offsets.** `bh * stride` in int32 wraps around once it passes $2^{31}$: with 2,048 heads of
#   16,384 × 128, head 1,024 already starts at $2^{31}$. Cast the program's number to int64 before it
#   multiplies a stride (`.to(tl.int64)`) and every offset built from it is int64; the lesson's
#   solutions and `flash_triton` do.
# - **Block pointers or tensor descriptors** (`tl.make_block_ptr`, `tl.make_tensor_descriptor`): the
#   kernel names a tensor's shape, strides and block once and moves the block along, instead of building
#   a grid of offsets and masks; the compiler then knows each load is a rectangle, and on a Hopper GPU
#   may have the chip's tensor memory accelerator (TMA) bring it in while the program computes.
#   `flash_triton` builds its offsets by hand; what descriptors would gain here was not measured.
# - **num_warps, num_stages and autotuning.** How many warps of 32 threads run a program, and how many
#   loads are in flight ahead of the loop (software pipelining), change the speed and not the numbers.
#   `@triton.autotune` tries a list of configurations on the first call for each size and keeps the
#   fastest; `benchmarks/bench_flash_triton.py` does the same by hand, and the cell below prints the
#   configurations it kept. The interpreter ignores both settings.
#
# The cell below checks on this machine what can be checked without a GPU: the exp2 identity, the error
# a float16 P costs, and int32's wrap-around.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="eb9dafe459"
# ## 8. 快的核函数快在哪里
#
# 本课的核函数是为了好读而写的。快的核函数（Triton 的教程、FlashAttention-2 和 3、PyTorch 自己的）做的是同样的运算，只是多了几个习惯，每个都不大：
#
# - **用 exp2，并把 log₂e 并进缩放。** GPU 本来就把 $e^x$ 算成 $2^{x \log_2 e}$；分数反正要乘缩放，改成一次乘上 scale · log₂e，就得到以 2 为底的分数，`tl.exp2` 为每个分数省下一次乘法。最大值和求和与底数无关，只有 lse 要换回来：$\text{lse} = (m_2 + \log_2 \ell) \ln 2$。`flash_triton` 就是这样做的。
# - **在 P·V 之前把 P 变成 float16。** 权重先用 float32 算出来，再舍入成 float16（或 bfloat16），这样第二次矩阵乘法也能在张量核心上运行；累加器仍是 float32。对半精度输入，`flash_triton` 就这样做（`p.to(v.dtype)`）。
# - **int64 偏移。** 用 int32 算 `bh * stride`，一旦超过 $2^{31}$ 就会回绕：2,048 个头、每个 16,384 × 128 时，第 1,024 号头的起点就已经是 $2^{31}$。在程序编号乘以步长之前先把它转成 int64（`.to(tl.int64)`），由它算出的每个偏移就都是 int64；本课的参考答案和 `flash_triton` 都这样做。
# - **块指针或张量描述符**（`tl.make_block_ptr`、`tl.make_tensor_descriptor`）：核函数只需说明一次张量的形状、步长和块，然后移动这个块，而不必自己拼出偏移和掩码的网格；这样编译器就知道每次读取都是一个矩形，在 Hopper GPU 上还可以在程序计算的同时，让芯片的张量内存加速器（TMA）把它搬进来。`flash_triton` 是手写偏移的；改用描述符在这里能快多少，没有测量。
# - **num_warps、num_stages 和自动调优。** 一个程序由多少个线程束（每个 32 个线程）运行、循环之前提前发出多少次读取（软件流水线），改变的是速度，不是数值。`@triton.autotune` 在每种尺寸第一次调用时试一遍给定的配置，留下最快的；`benchmarks/bench_flash_triton.py` 手动做了同样的事，下面的单元会打印出它留下的配置。解释器忽略这两个设置。
#
# 下面的单元在这台机器上检查不用 GPU 就能检查的几件事：exp2 的恒等式、float16 的 P 带来的误差，以及 int32 的回绕。

# %%
g = torch.Generator().manual_seed(9)
scores = torch.randn(64, 64, generator=g) * 4
same = torch.allclose(torch.exp(scores), torch.exp2(scores * flash_triton.LOG2E), rtol=1e-5)
# lang: en
claim("exp(s) = exp2(s · log₂e), to float32's rounding", same)
# lang: zh
claim("exp(s) = exp2(s · log₂e)，在 float32 的舍入误差以内", same)
# lang: end
p = torch.softmax(scores, -1)
v = torch.randn(64, 64, generator=g)
half_error = ((p.half().float() @ v) - p @ v).abs().max().item()
# lang: en
# each weight moves by at most 2⁻¹¹ of itself and the weights sum to 1: the output by at most 2⁻¹¹ · max|v|
# (and 1 % more: float32's own rounding of the two sums)
# lang: zh
# 每个权重的变化至多是它自身的 2⁻¹¹，而权重之和为 1：所以输出的变化至多为 2⁻¹¹ · max|v|
# （再加 1%：两次求和本身在 float32 中的舍入）
# lang: end
bound = 2 ** -11 * v.abs().max().item() * 1.01
# lang: en
claim("P rounded to float16 before P·V moves the output by at most 2⁻¹¹ · max|v|", half_error <= bound)
# lang: zh
claim("在 P·V 之前把 P 舍入成 float16，输出的变化至多为 2⁻¹¹ · max|v|", half_error <= bound)
# lang: end
bh, stride = torch.tensor(1024, dtype=torch.int32), 16384 * 128
# lang: en
claim(f"bh · stride in int32 wraps around: 1024 · {stride} gives {int(bh * stride)}", int(bh * stride) != 1024 * stride)
# lang: zh
claim(f"用 int32 算 bh · stride 会回绕：1024 · {stride} 得到 {int(bh * stride)}", int(bh * stride) != 1024 * stride)
# lang: end

# %% tags=["nbval-ignore-output"]
if gpu is not None:
    kept = sorted({(row.get("dtype", "float16"), row["d"], row["causal"], row["forward_config"], row["backward_config"])
                   for row in gpu.rows()})
    for dtype, d, causal, forward_config, backward_config in kept:
        # lang: en
        print(f"{dtype}, d = {d}, causal = {causal}: forward (block_q×block_k×num_warps×num_stages) {forward_config}, "
              f"backward {backward_config}")
        # lang: zh
        print(f"{dtype}，d = {d}，因果 = {causal}：前向（block_q×block_k×num_warps×num_stages）{forward_config}，"
              f"反向 {backward_config}")
        # lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 9. Explorer: one program through its key blocks
#
# Pick a query block and whether the attention is causal, then move the slider: the program loads its
# key blocks one after the other. The left picture shows which blocks it has loaded, the one it loads
# now and those it never loads (causal: every block above the diagonal); the summary says which need a
# mask (the diagonal block, the last block, which holds 8 keys only) and lists each of its 16 rows'
# running max $m$ and sum $\ell$. When a block brings a larger max, $\ell$ is first multiplied by
# $e^{m_\text{old} - m_\text{new}} < 1$ and then the block's own sum is added, so $\ell$ can fall or
# grow; check that the last step ends with $m + \log \ell$, the lse the kernel stores.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="4e9138f5d7"
# ## 9. 探索器：一个程序走过它的键块
#
# 选一个查询块，再选注意力是否因果，然后拖动滑块：这个程序一块接一块地读入它的键块。左图显示它已经读入的块、正在读入的块，以及从不读入的块（因果时对角线上方的所有块）；下方的文字说明哪些块需要掩码（对角线块，以及只有 8 个键、不满的最后一块），并列出它 16 行各自的运行最大值 $m$ 和累计和 $\ell$。某一块带来更大的最大值时，$\ell$ 先乘上 $e^{m_\text{old} - m_\text{new}} < 1$，再加上这一块自己的和，所以 $\ell$ 可能变小，也可能变大；再核对一下：最后一步结束时，$m + \log \ell$ 就是核函数存下的 lse。

# %% tags=["nbval-ignore-output"]
program_explorer(block=2, causal=True)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - A Triton kernel is one program's code; a launch runs a grid of programs, each on its own block.
# - The softmax kernel shifts by the row's max and loads the positions past the row's end as −∞.
# - A matrix product takes one program per output tile and a float32 accumulator through the loop over
#   the inner dimension, its partial last block loaded as 0.
# - The FlashAttention forward is lesson 08's online softmax in one program per query block, its tile of
#   scores never leaving the chip; it writes the lse for the backward and masks the partial last block.
# - Causal, the blocks above the diagonal are never loaded; only the diagonal block(s) and a partial last
#   block need a mask (the lesson's solution masks every block it loads, `flash_triton` only those).
# - The backward recomputes the weights from the lse, with $D = \mathrm{rowsum}(dO \circ O)$: dK and dV
#   in one kernel, dQ in a second (Triton's tutorial), where FlashAttention-2 adds dQ up with atomics.
# - A `torch.autograd.Function` ties the kernels together: forward keeps q, k, v, the output and the lse
#   on `ctx`; backward returns one value per argument of forward, a gradient for each tensor and `None`
#   for the rest.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="a48b7667cc"
# ## 小结
#
# - Triton 核函数是一个程序的代码；一次启动运行由许多程序组成的网格，每个程序处理自己的那一块。
# - softmax 核函数减去这一行的最大值，把越过行尾的位置读成 −∞。
# - 矩阵乘法每个输出分块一个程序，float32 累加器贯穿沿内维的整个循环，不满的最后一块读成 0。
# - FlashAttention 的前向就是第 08 课的在线 softmax，每块查询一个程序，分数分块从不离开芯片；它为反向传播写出 lse，并给不满的最后一块加掩码。
# - 因果时，对角线上方的块从不读入；只有对角线块和不满的最后一块需要掩码（本课的参考答案给读入的每一块都加掩码，`flash_triton` 只给这些块加）。
# - 反向传播用 lse 重新算出权重，其中 $D = \mathrm{rowsum}(dO \circ O)$：dK 和 dV 在一个核函数里算，dQ 在另一个核函数里算（Triton 教程的做法），而 FlashAttention-2 用原子加法累加 dQ。
# - `torch.autograd.Function` 把这些核函数连在一起：forward 把 q、k、v、输出和 lse 存在 `ctx` 上；backward 为 forward 的每个参数返回一个值，每个张量一个梯度，其余的返回 `None`。
