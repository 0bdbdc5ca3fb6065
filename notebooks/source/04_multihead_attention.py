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
# # Multi-head attention
#
# The layers of lesson 03 have one head: for each query, one set of weights over the keys and
# one weighted average of the values. **Multi-head attention** runs $H$ such heads side by side.
# Each head projects the input to its own small space of $d = E / H$ features, attends there,
# and the $H$ results are put side by side and mixed by one output projection $W_O$:
#
# $$\mathrm{head}_h = \mathrm{softmax}\Big(\frac{Q_h K_h^\top}{\sqrt{d}}\Big) V_h,\quad
# Q_h = X_q W_Q^h,\ K_h = X_k W_K^h,\ V_h = X_v W_V^h,\qquad
# \mathrm{MultiHead} = [\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]\, W_O .$$
#
# In this lesson you will
#
# 1. see what several heads add: a tiny task that one head followed by a linear read-out cannot
#    learn, that two heads learn in a second or two, one head reading each side, and that one head
#    learns too when a small MLP reads its output;
# 2. write multi-head attention two ways, **naive** (one module per head, run in a loop) and
#    **fused** (one projection for all heads, one batched attention call), see that concatenating
#    the heads and applying $W_O$ is a sum of one term per head, and prove that the two compute the
#    same thing as each other and as PyTorch's `nn.MultiheadAttention`, with masks, for
#    cross-attention, values and gradients;
# 3. count their parameters, and see what small heads cost: each head compares queries and keys
#    along only $d$ directions;
# 4. meet what `nn.MultiheadAttention` does that surprises people;
# 5. find two bugs that tutorials ship in their multi-head code;
# 6. measure what each version costs, in time and in memory;
# 7. explore what the heads of a trained model read.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="900fec3a4f"
# # 多头注意力
#
# 第 03 课的层只有一个头：每个查询对所有键给出一组权重，对值做一次加权平均。**多头注意力**（multi-head attention）让 $H$ 个这样的头并排工作。每个头把输入投影到自己的一个只有 $d = E / H$ 个特征的小空间，在那里做注意力；$H$ 个结果并排拼在一起，再由一个输出投影（output projection）$W_O$ 混合起来：
#
# $$\mathrm{head}_h = \mathrm{softmax}\Big(\frac{Q_h K_h^\top}{\sqrt{d}}\Big) V_h,\quad
# Q_h = X_q W_Q^h,\ K_h = X_k W_K^h,\ V_h = X_v W_V^h,\qquad
# \mathrm{MultiHead} = [\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]\, W_O .$$
#
# 本课你将：
#
# 1. 看看多个头带来了什么：一个极小的任务，一个头后面接线性读出层（read-out）学不会；两个头一两秒就能学会，每个头负责一侧；而一个头后面换成小型 MLP 来读它的输出，也能学会；
# 2. 用两种方式写出多头注意力：**朴素版**（naive，每个头一个模块，在循环里逐个运行）和**融合版**（fused，所有头共用一次投影、一次批量注意力调用）；看到“把各个头拼接起来再乘 $W_O$”其实是每个头各贡献一项、再求和；并证明两种写法彼此相同，也与 PyTorch 的 `nn.MultiheadAttention` 相同：带掩码、用于交叉注意力，输出值和梯度都一致；
# 3. 数一数它们的参数，并看看头变小要付出什么代价：每个头只能沿 $d$ 个方向比较查询和键；
# 4. 认识 `nn.MultiheadAttention` 那些出人意料的行为；
# 5. 找出教程在多头注意力代码里常见的两个 bug；
# 6. 测量每个版本在时间和内存上的代价；
# 7. 探索一个训练好的模型里各个头读取的内容。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import check, claim, measured, setup, toy
from course_utils.attention import scaled_dot_product_attention
from course_utils.i18n import message
from course_utils.multihead import (
    FusedMultiheadAttention,
    NaiveMultiheadAttention,
    operators,
    packed_gradients,
    parameter_count,
    took_fast_path,
)
from course_utils.viz import cost_lines, head_grid
from course_utils.widgets import EXAMPLES, heads_explorer, heads_view

setup(lang="en")
# lang: en
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights
# lang: zh
torch.set_printoptions(precision=2, sci_mode=False)  # 读权重，两位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. What do several heads add?
#
# A head gives each query one weighted average of the values. When a query needs two things from
# two places, that one average holds both, mixed together; whether they can be told apart again
# depends on what reads the average. The **neighbours** task makes that concrete: every position
# of a sequence of 8 different letters must say both of its neighbours, the letter on its left and
# the letter on its right (the sequence wraps around, so position 0's left neighbour is position 7):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="13ab388063"
# ## 1. 多个头带来了什么？
#
# 一个头只给每个查询一个值的加权平均。如果一个查询需要从两个地方各取一样东西，这一个平均里两样都有，只是混在了一起；还能不能把它们分开，要看后面读它的是什么。**邻居**（neighbours）任务把这一点变得很具体：一个由 8 个互不相同的字母组成的序列，每个位置都要说出它的两个邻居，即左边的字母和右边的字母（序列首尾相接，所以位置 0 的左邻是位置 7）：

# %%
tokens, targets = toy.neighbours_example(0)  # (L,), (L, 2)
# lang: en
print("input:           ", toy.letters(tokens))
print("left neighbours: ", toy.letters(targets[:, 0]))  # position i's answer: the letter at i - 1
print("right neighbours:", toy.letters(targets[:, 1]))  # the letter at i + 1
# lang: zh
print("输入：", toy.letters(tokens))
print("左邻：", toy.letters(targets[:, 0]))  # 位置 i 的答案：位置 i - 1 上的字母
print("右邻：", toy.letters(targets[:, 1]))  # 位置 i + 1 上的字母
# lang: end

# %% [markdown] tags=["lang-en"]
# `toy.NeighboursModel` embeds each letter, concatenates a learned position embedding, applies
# one multi-head self-attention layer ($E = 32$) and a read-out that predicts both neighbours.
# We train three versions:
#
# - **one head, linear read-out.** The head can give a query's weight to the left neighbour, to
#   the right one, or split it between them; its output is then $w_\ell v_\ell + w_r v_r$, one
#   weighted average of their value vectors. A linear read-out scores every letter by adding up
#   what the two sides contribute; trained, it gets the side with the larger weight right and
#   only guesses the other (training five times as long does not change that).
# - **two heads of $d = 16$ features, linear read-out.** One head can read the left neighbour and
#   the other the right one, and the output projection keeps the two results apart. This attention
#   layer has exactly the parameters of the one-head layer; only the split into heads differs.
# - **one head, MLP read-out.** The same single head, read by a small MLP (a linear layer to 128
#   features, ReLU, a linear layer: the shape of the feed-forward network every Transformer block
#   has).
#
# Each trains with Adam for 300 steps on fresh random batches of 64 sequences. The times and
# losses below change from run to run and from machine to machine:

# %% [markdown] tags=["lang-zh"] en_hash="ca8e991e74"
# `toy.NeighboursModel` 为每个字母做嵌入，在其后拼接一个可学习的位置嵌入，然后经过一个多头自注意力层（$E = 32$），最后由一个读出层预测两个邻居。我们训练三个版本：
#
# - **一个头，线性读出层。** 这个头可以把一个查询的权重给左邻、给右邻，或者分给两者；于是它的输出是 $w_\ell v_\ell + w_r v_r$，即两者值向量的一个加权平均。线性读出层给每个字母打分时，只是把两侧的贡献加在一起；训练之后，它答对的是权重较大的那一侧，另一侧只能靠猜（训练时间延长到五倍也无济于事）。
# - **两个头，每个头 $d = 16$ 个特征，线性读出层。** 一个头可以读左邻，另一个头读右邻，输出投影让两个结果各自分开。这个注意力层的参数与单头的层完全相同，区别只在于是否拆成多个头。
# - **一个头，MLP 读出层。** 还是那一个头，只是改由一个小型 MLP 来读它的输出（一个线性层映射到 128 个特征，ReLU，再接一个线性层：每个 Transformer 块里的前馈网络（feed-forward network）都是这个结构）。
#
# 每个模型都用 Adam 在每步新生成的 64 个随机序列上训练 300 步。下面的耗时和损失每次运行都不一样，也因机器而异：

# %% tags=["nbval-ignore-output"]
# lang: en
# keys of the course's message catalogue: message(key) gives each model's name in the notebook's language
# lang: zh
# 键来自课程的文案目录：message(key) 给出每个模型在当前笔记本语言下的名字
# lang: end
versions = {
    "l04.plot.one_head": dict(heads=1),
    "l04.plot.two_heads": dict(heads=2),
    "l04.plot.mlp_head": dict(heads=1, readout="mlp"),
}
runs = {}
for name, options in versions.items():
    start = time.perf_counter()
    runs[name] = toy.train_neighbours(seed=0, **options)
    seconds = time.perf_counter() - start
    # lang: en
    print(f"{message(name)}: {seconds:.1f} s, final loss {runs[name].losses[-1]:.4f}, accuracy {runs[name].accuracy:.3f}")
    # lang: zh
    print(f"{message(name)}：{seconds:.1f} 秒，最终损失 {runs[name].losses[-1]:.4f}，准确率 {runs[name].accuracy:.3f}")
    # lang: end
one, two, mlp = runs.values()

# %% [markdown] tags=["lang-en"]
# What does not change from run to run or from machine to machine (measured on held-out
# sequences, which training never sees):

# %% [markdown] tags=["lang-zh"] en_hash="ddc0246e9f"
# 下面这些则不随运行或机器而变（在训练从未见过的留出（held-out）序列上测得）：

# %%
held_out = torch.stack([toy.neighbours_example(i)[0] for i in range(EXAMPLES)])  # (50, L)
answers = torch.stack([toy.neighbours_example(i)[1] for i in range(EXAMPLES)])  # (50, L, 2)
maps = torch.stack([toy.head_maps(two.model, sequence) for sequence in held_out])  # (50, H, L, L)
# lang: en
sides = toy.head_sides(maps)  # for each head: "left", "right" or None
# the accuracy on each side, larger first; each query's weight on its two neighbours, (50, 1, L, 2)
# lang: zh
sides = toy.head_sides(maps)  # 每个头读的是哪一侧："left"、"right" 或 None
# 每一侧的答对率（大的在前）；每个查询给两个邻居的权重，形状 (50, 1, L, 2)
# lang: end
better, worse = toy.side_accuracy(one.model, held_out, answers).sort(descending=True).values.tolist()
one_shares = toy.neighbour_weights(torch.stack([toy.head_maps(one.model, s) for s in held_out]))
# lang: en
claim("the one-head and the two-head layer have the same number of parameters",
      parameter_count(one.model) == parameter_count(two.model))
claim("two heads get at least 95% of the held-out answers right", two.accuracy >= 0.95)
claim("one head with the linear read-out gets fewer than 75% right", one.accuracy < 0.75)
claim(f"on the {EXAMPLES} held-out examples it gets one side more than 90% right and the other fewer than 30%",
      better > 0.9 and worse < 0.3)
claim("its head gives each neighbour more than 0.25 of its weight at every query", bool((one_shares > 0.25).all()))
claim(f"of the two heads, one gives its left neighbour, the other its right neighbour, more than 0.6 of its "
      f"weight at every query of the {EXAMPLES} held-out examples", set(sides) == {"left", "right"})
# lang: zh
claim("单头层和两头层的参数个数相同", parameter_count(one.model) == parameter_count(two.model))
claim("两个头答对了至少 95% 的留出答案", two.accuracy >= 0.95)
claim("一个头加线性读出层，答对的不到 75%", one.accuracy < 0.75)
claim(f"在 {EXAMPLES} 个留出样例上，它对一侧的答对率超过 90%，对另一侧不到 30%", better > 0.9 and worse < 0.3)
claim("它的头在每个查询上给两个邻居的权重都超过 0.25", bool((one_shares > 0.25).all()))
claim(f"两个头中一个把超过 0.6 的权重给了左邻，另一个给了右邻，"
      f"在全部 {EXAMPLES} 个留出样例的每个查询上都是如此", set(sides) == {"left", "right"})
# lang: end

# %% [markdown] tags=["lang-en"]
# So one head with a linear read-out answers one side and guesses the other. Is that because one
# average cannot carry two letters? No. A weighted average with *unequal* weights, say
# $0.25\,v_\ell + 0.7\,v_r$, still records which letter came with which weight. A linear read-out,
# which only adds up what it reads, does not untangle it here; a nonlinear read-out can. The
# third model is the same single head, read by an MLP:

# %% [markdown] tags=["lang-zh"] en_hash="396f494e87"
# 可见，一个头加线性读出层只能答对一侧，另一侧只能猜。这是因为一次平均装不下两个字母吗？不是。权重*不相等*的加权平均，比如 $0.25\,v_\ell + 0.7\,v_r$，仍然记录着哪个字母配的是哪个权重。线性读出层只会把读到的东西加起来，在这里解不开它；非线性的读出层却能解开。第三个模型还是那一个头，只是改由 MLP 来读：

# %%
mlp_maps = torch.stack([toy.head_maps(mlp.model, sequence) for sequence in held_out])  # (50, 1, L, L)
# lang: en
shares = toy.neighbour_weights(mlp_maps)[:, 0]  # (50, L, 2): the weight each query gives its left and its right neighbour
# lang: zh
shares = toy.neighbour_weights(mlp_maps)[:, 0]  # (50, L, 2)：每个查询给左邻和右邻的权重
# lang: end
smaller, larger = shares.min(dim=-1).values, shares.max(dim=-1).values  # (50, L), (50, L)
# lang: en
claim("one head with the MLP read-out gets at least 95% of the held-out answers right", mlp.accuracy >= 0.95)
claim(f"at every query of the {EXAMPLES} held-out examples, its head gives the two neighbours "
      "together more than 0.8 of its weight", bool((smaller + larger > 0.8).all()))
claim("and never equal shares: one neighbour gets at least 0.1 more than the other", bool((larger - smaller > 0.1).all()))
claim("on average the smaller share is below 0.35 and the larger above 0.6",
      smaller.mean() < 0.35 and larger.mean() > 0.6)
# lang: zh
claim("一个头加 MLP 读出层，答对了至少 95% 的留出答案", mlp.accuracy >= 0.95)
claim(f"在 {EXAMPLES} 个留出样例的每个查询上，"
      "它的头给两个邻居的权重合计超过 0.8", bool((smaller + larger > 0.8).all()))
claim("而且两份权重从不相等：一个邻居总比另一个多至少 0.1", bool((larger - smaller > 0.1).all()))
claim("平均而言，较小的一份低于 0.35，较大的一份高于 0.6", smaller.mean() < 0.35 and larger.mean() > 0.6)
# lang: end

# %% [markdown] tags=["lang-en"]
# Heads add capacity; they are not strictly necessary. Every Transformer block follows its
# attention with such an MLP, and, as the MLP model shows, one head can pack two places into one
# average. What two heads give is a simpler solution: each head reads one place, each result keeps its own $d$ features,
# and even a linear read-out can use them.
#
# The maps on the example above. First, the single head of the linear model: it splits its weight
# between the two neighbours almost evenly. Then the two heads of the two-head model: one is the
# diagonal just below the main one (query $i$ reads key $i-1$, and query 0 reads key 7 in the
# corner), the other the diagonal just above it. Last, the single head of the MLP model: both
# diagonals again, one clearly stronger than the other. Each head found its own pattern; nothing
# in the code told it which.

# %% [markdown] tags=["lang-zh"] en_hash="75b3a81d17"
# 多个头增加的是容量（capacity），并不是非有不可。每个 Transformer 块在注意力之后都接着这样一个 MLP，而且 MLP 模型表明，一个头也能把两个位置装进一次平均里。两个头给出的是更简单的解法：每个头只读一个位置，各自的结果占着自己的 $d$ 个特征，连线性读出层都能直接用上。
#
# 下面是上面那个样例（example）上的注意力图。第一幅是线性模型的那个头：它把权重几乎平均地分给了两个邻居。接下来两幅是两头模型的两个头：一个是紧贴主对角线下方的那条对角线（查询 $i$ 读键 $i-1$，查询 0 读角落里的键 7），另一个是紧贴主对角线上方的那条。最后一幅是 MLP 模型的那个头：又是两条对角线，一条明显比另一条深。每个头都找到了自己的模式，代码里并没有任何地方告诉它该学哪一个。

# %%
letters = list(toy.letters(tokens))
panels = [("l04.plot.one_head", one, 0), ("l04.plot.two_heads", two, 0), ("l04.plot.two_heads", two, 1),
          ("l04.plot.mlp_head", mlp, 0)]
fig, axes = plt.subplots(1, 4, figsize=(12, 3.8), layout="constrained")
for ax, (name, run, h) in zip(axes, panels):
    head_grid(toy.head_maps(run.model, tokens)[h:h + 1], axes=[ax], queries=letters, keys=letters)
    ax.set_title(message("l04.plot.model_head", model=message(name), h=h), fontsize=11)
    if ax is not axes[0]:
        ax.set_ylabel("")
plt.show()

# %% [markdown] tags=["lang-en"]
# Heads are not always this tidy. With more heads than the task needs, several heads may read
# the same neighbour and others a mixture; and even two heads can, from some starting points,
# each read a different mixture of both neighbours, which the output projection can still
# untangle (two different mixtures of two letters determine both). What the heads give you is
# room: $H$ places to attend at once, each in its own subspace.

# %% [markdown] tags=["lang-zh"] en_hash="1752e387d0"
# 头并不总是分得这么整齐。头数多于任务所需时，可能有好几个头读同一个邻居，另一些头读的是混合；即便只有两个头，从某些随机起点出发，它们也可能各自读取两个邻居的不同混合，而输出投影仍然能把它们解开（两个字母的两种不同混合足以确定这两个字母）。多个头提供的是空间：可以同时在 $H$ 个地方做注意力，每个头都在自己的子空间里。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. The naive layer: one module per head
#
# The formula read literally: $H$ independent heads, each an `AttentionHead` with its own three
# `nn.Linear` projections to $d$ features (query side $E \to d$, key side $k_{dim} \to d$, value
# side $v_{dim} \to d$), run one after the other; their outputs are concatenated to $H \cdot d = E$
# features and projected by `out_proj`. The forward pass of `NaiveMultiheadAttention` is a loop:
#
# ```python
# outputs, weights = [], []
# for h, head in enumerate(self.heads):            # one head at a time
#     out, w = head(query, key, value, keep_mask=...)  # (B, L_q, d), (B, L_q, L_k)
#     outputs.append(out)                          # keep the head's output, not its weights
#     weights.append(w)
# output = self.out_proj(torch.cat(outputs, dim=-1))  # (B, L_q, H·d) -> (B, L_q, E)
# return output, torch.stack(weights, dim=1)       # (B, L_q, E), (B, H, L_q, L_k)
# ```
#
# Like every layer of this course it returns `(output, weights)`; the weights are every head's,
# $(B, H, L_q, L_k)$. For cross-attention the keys and values come from another sequence whose
# features may differ in size ($k_{dim}$, $v_{dim}$), as in lesson 03:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="afb7969905"
# ## 2. 朴素版：每个头一个模块
#
# 按字面实现公式：$H$ 个相互独立的头，每个头是一个 `AttentionHead`，有自己的三个 `nn.Linear` 投影，都投影到 $d$ 个特征（查询一侧 $E \to d$，键一侧 $k_{dim} \to d$，值一侧 $v_{dim} \to d$），逐个运行；它们的输出拼接成 $H \cdot d = E$ 个特征，再经过 `out_proj` 投影。`NaiveMultiheadAttention` 的前向计算就是一个循环：
#
# ```python
# outputs, weights = [], []
# for h, head in enumerate(self.heads):            # 一次一个头
#     out, w = head(query, key, value, keep_mask=...)  # (B, L_q, d), (B, L_q, L_k)
#     outputs.append(out)                          # 保留这个头的输出，而不是权重
#     weights.append(w)
# output = self.out_proj(torch.cat(outputs, dim=-1))  # (B, L_q, H·d) -> (B, L_q, E)
# return output, torch.stack(weights, dim=1)       # (B, L_q, E), (B, H, L_q, L_k)
# ```
#
# 与本课程的每个层一样，它返回 `(output, weights)`；权重是每个头各自的权重，形状为 $(B, H, L_q, L_k)$。用于交叉注意力时，键和值来自另一个序列，其特征数可以不同（$k_{dim}$、$v_{dim}$），这与第 03 课相同：

# %%
g = torch.Generator().manual_seed(0)
B, L_q, L_k, E, E_kv, H = 2, 3, 5, 8, 6, 2
x = torch.randn(B, L_q, E, generator=g)  # (B, L_q, E)
memory = torch.randn(B, L_k, E_kv, generator=g)  # (B, L_k, E_kv)

torch.manual_seed(0)
naive = NaiveMultiheadAttention(E, H, kdim=E_kv, vdim=E_kv)
# lang: en
output, weights = naive(x, memory, memory)  # cross-attention: keys and values from memory
# lang: zh
output, weights = naive(x, memory, memory)  # 交叉注意力：键和值来自 memory
# lang: end
print("output.shape  =", tuple(output.shape))  # (B, L_q, E)
print("weights.shape =", tuple(weights.shape))  # (B, H, L_q, L_k)
print({name: tuple(p.shape) for name, p in naive.heads[0].named_parameters()})  # (d, E), (d,), (d, E_kv), ...

# %% [markdown] tags=["lang-en"]
# ### Concatenate, then project: a sum over heads
#
# `out_proj` multiplies the concatenation $[\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]$, $H \cdot d$
# features, by $W_O$. Cut $W_O$'s $H \cdot d$ rows into $H$ blocks of $d$, block $h$ being $W_O^h$,
# and the product becomes a sum with one term per head:
#
# $$[\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]\, W_O = \sum_h \mathrm{head}_h\, W_O^h .$$
#
# So the heads never mix inside the layer: each writes its own term into the $E$ output features,
# and $W_O^h$ decides where it lands. `nn.Linear` stores `out_proj.weight` as $(E, H \cdot d)$,
# (out, in), so $W_O^h$ is its columns $h d \dots (h+1) d - 1$, transposed:

# %% [markdown] tags=["lang-zh"] en_hash="db52160d65"
# ### 先拼接再投影，就是对各个头求和
#
# `out_proj` 把拼接结果 $[\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]$（共 $H \cdot d$ 个特征）乘以 $W_O$。把 $W_O$ 的 $H \cdot d$ 行切成 $H$ 块、每块 $d$ 行，记第 $h$ 块为 $W_O^h$，这个乘积就变成了每个头一项的和：
#
# $$[\mathrm{head}_0, \dots, \mathrm{head}_{H-1}]\, W_O = \sum_h \mathrm{head}_h\, W_O^h .$$
#
# 所以在层的内部，各个头从不相互混合：每个头往 $E$ 个输出特征里写入自己的一项，写到哪里由 $W_O^h$ 决定。`nn.Linear` 以 (out, in) 的形式把 `out_proj.weight` 存为 $(E, H \cdot d)$，所以 $W_O^h$ 就是它的第 $h d \dots (h+1) d - 1$ 列，再转置：

# %%
d = E // H
W_O = naive.out_proj.weight  # (E, H·d)
terms = []
for h, head in enumerate(naive.heads):
    head_output, _ = head(x, memory, memory)  # (B, L_q, d)
    W_O_h = W_O[:, h * d:(h + 1) * d].T  # (d, E)
    terms.append(head_output @ W_O_h)  # (B, L_q, E)
# lang: en
claim("out_proj of the concatenated heads = Σ_h head_h · W_Oʰ, plus out_proj's bias",
      torch.allclose(output, sum(terms) + naive.out_proj.bias, atol=1e-6))
# lang: zh
claim("拼接各个头后经过 out_proj 的结果 = Σ_h head_h · W_Oʰ，再加上 out_proj 的偏置",
      torch.allclose(output, sum(terms) + naive.out_proj.bias, atol=1e-6))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Spot the bug: a loop that keeps the wrong thing
#
# The widely copied PyTorch tutorial whose layers lesson 03 took apart also has multi-head
# layers. Its attention function is the one of lesson 03's bug 1; its multi-head layer loops
# over the heads like the naive layer above. The cell below re-creates the layer in a few lines
# of our own code, with the same structure and the same bug. Read it first.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f5b0f5e404"
# ### 找 bug：一个留错了东西的循环
#
# 第 03 课剖析过那篇流传很广的 PyTorch 教程，它也写了多头注意力层。它的注意力函数就是第 03 课 bug 1 里的那个；它的多头注意力层像上面的朴素版一样在各个头上循环。下面的单元用几行我们自己的代码重现了这个层，结构相同，bug 也相同。先读一读。

# %%
def tutorial_attention(q, k, v):
    # lang: en
    """Scaled dot-product attention. Returns (output, weights)."""
    # lang: zh
    """缩放点积注意力。返回 (output, weights)。"""
    # lang: end
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights, weights @ v


class TutorialMultiHead(nn.Module):
    # lang: en
    """Multi-head attention: one projection per head for Q, K and V, then fc_out."""
    # lang: zh
    """多头注意力：每个头为 Q、K、V 各有一个投影，最后接 fc_out。"""
    # lang: end

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        head_dim = embed_dim // num_heads
        self.w_q = nn.ModuleList(nn.Linear(embed_dim, head_dim) for _ in range(num_heads))
        self.w_k = nn.ModuleList(nn.Linear(embed_dim, head_dim) for _ in range(num_heads))
        self.w_v = nn.ModuleList(nn.Linear(embed_dim, head_dim) for _ in range(num_heads))
        self.fc_out = nn.Linear(embed_dim, embed_dim)

    def forward(self, q, k, v):
        heads = []
        for w_q, w_k, w_v in zip(self.w_q, self.w_k, self.w_v):
            attention, _ = tutorial_attention(w_q(q), w_k(k), w_v(v))
            heads.append(attention)
        # lang: en
        return self.fc_out(torch.cat(heads, dim=-1))  # concatenate the heads, then project
        # lang: zh
        return self.fc_out(torch.cat(heads, dim=-1))  # 把各个头拼接起来，再做投影
        # lang: end

# %% [markdown] tags=["lang-en"]
# **Your turn.** What does the loop append to `heads`: which item of `tutorial_attention`'s pair,
# and what is that item's shape? What shape does `fc_out` expect? Then run the layer twice, with
# $E = 8$ and two heads of $d = 4$: once on 5 keys, once on 4 keys. Think about why the two runs
# end differently before you read on.

# %% [markdown] tags=["lang-zh"] en_hash="7d490fff68"
# **轮到你了。** 循环往 `heads` 里追加的是什么：是 `tutorial_attention` 返回的那一对中的哪一项？它的形状是什么？`fc_out` 要求的输入形状又是什么？然后运行这个层两次，$E = 8$，两个头，每个头 $d = 4$：一次用 5 个键，一次用 4 个键。往下读之前，先想一想两次运行为什么结果不同。

# %%
torch.manual_seed(1)
buggy = TutorialMultiHead(8, num_heads=2)
# lang: en
q = torch.randn(1, 3, 8, generator=g)  # 3 queries, E = 8
kv5 = torch.randn(1, 5, 8, generator=g)  # 5 keys
kv4 = torch.randn(1, 4, 8, generator=g)  # 4 keys
# lang: zh
q = torch.randn(1, 3, 8, generator=g)  # 3 个查询，E = 8
kv5 = torch.randn(1, 5, 8, generator=g)  # 5 个键
kv4 = torch.randn(1, 4, 8, generator=g)  # 4 个键
# lang: end
other_values = torch.randn(1, 4, 8, generator=g)  # (1, 4, 8)
try:
    buggy(q, kv5, kv5)
    raised = None
except RuntimeError as error:
    raised = error
out4 = buggy(q, kv4, kv4)
# lang: en
claim("with 5 keys the layer raises a RuntimeError", raised is not None)
claim(f"with 4 keys it runs and returns the shape of its input, {tuple(out4.shape)}", out4.shape == q.shape)
claim("and its output stays the same when the values change", torch.allclose(out4, buggy(q, kv4, other_values)))
# lang: zh
claim("用 5 个键时，这个层抛出 RuntimeError", raised is not None)
claim(f"用 4 个键时，它能运行，返回与输入相同的形状 {tuple(out4.shape)}", out4.shape == q.shape)
claim("而且换掉值之后，它的输出保持不变", torch.allclose(out4, buggy(q, kv4, other_values)))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The bug: the loop keeps the weights.** `tutorial_attention` returns `(weights, output)`
# (lesson 03's bug 1), and the loop keeps the first item. Each head appends its weights,
# $(B, L_q, L_k)$, instead of its output, $(B, L_q, d)$, so the concatenation is
# $(B, L_q, H \cdot L_k)$ where $(B, L_q, H \cdot d) = (B, L_q, E)$ was meant. With 5 keys that
# is 10 features for an `fc_out` that takes 8: the crash. With $L_k = d = 4$ the shapes fit by
# accident: the layer runs, and its output is computed from the weights alone, so the values
# never reach it. Silent nonsense of the right shape.
#
# The fix keeps each head's output. The fixed loop is exactly `NaiveMultiheadAttention`: given
# the same weights, head by head, it returns the same output:

# %% [markdown] tags=["lang-zh"] en_hash="d5fe505599"
# **Bug：循环留下的是权重。** `tutorial_attention` 返回的是 `(weights, output)`（第 03 课的 bug 1），而循环保留了第一项。于是每个头追加的是它的权重 $(B, L_q, L_k)$，而不是它的输出 $(B, L_q, d)$，拼接结果是 $(B, L_q, H \cdot L_k)$，而本意是 $(B, L_q, H \cdot d) = (B, L_q, E)$。有 5 个键时，这是 10 个特征，而 `fc_out` 只接收 8 个：于是崩溃。当 $L_k = d = 4$ 时，形状碰巧对上：层照常运行，它的输出只由权重算出，值根本到不了输出。这是形状正确、悄无声息的错误结果。
#
# 修复方法是保留每个头的输出。修好的循环恰好就是 `NaiveMultiheadAttention`：逐头装上相同的权重后，它返回相同的输出：

# %%
class FixedMultiHead(TutorialMultiHead):
    def forward(self, q, k, v):
        heads = []
        for w_q, w_k, w_v in zip(self.w_q, self.w_k, self.w_v):
            # lang: en
            _, out = tutorial_attention(w_q(q), w_k(k), w_v(v))  # the second item is the output
            # lang: zh
            _, out = tutorial_attention(w_q(q), w_k(k), w_v(v))  # 第二项才是输出
            # lang: end
            heads.append(out)
        return self.fc_out(torch.cat(heads, dim=-1))


fixed = FixedMultiHead(8, num_heads=2)
fixed.load_state_dict(buggy.state_dict())
twin = NaiveMultiheadAttention(8, 2)
for head, w_q, w_k, w_v in zip(twin.heads, fixed.w_q, fixed.w_k, fixed.w_v):
    for ours, theirs in ((head.q_proj, w_q), (head.k_proj, w_k), (head.v_proj, w_v)):
        ours.load_state_dict(theirs.state_dict())
twin.out_proj.load_state_dict(fixed.fc_out.state_dict())
# lang: en
claim("the fixed layer runs with 5 keys", fixed(q, kv5, kv5).shape == q.shape)
claim("it equals NaiveMultiheadAttention with the same weights",
      torch.allclose(fixed(q, kv5, kv5), twin(q, kv5, kv5)[0], atol=1e-6))
claim("and its output depends on the values", not torch.allclose(fixed(q, kv4, kv4), fixed(q, kv4, other_values)))
# lang: zh
claim("修好的层用 5 个键也能运行", fixed(q, kv5, kv5).shape == q.shape)
claim("装上相同的权重后，它与 NaiveMultiheadAttention 的结果相同",
      torch.allclose(fixed(q, kv5, kv5), twin(q, kv5, kv5)[0], atol=1e-6))
claim("而且它的输出随值而变", not torch.allclose(fixed(q, kv4, kv4), fixed(q, kv4, other_values)))
# lang: end

# %% [markdown] tags=["lang-en"]
# The lesson, once more: return `(output, weights)` in one fixed order, and test on shapes where
# $L_k$, $d$ and $E$ all differ. The same tutorial also has a variant whose every head is full
# size ($d = E$); section 4 counts what that costs.

# %% [markdown] tags=["lang-zh"] en_hash="65fce80100"
# 再强调一次教训：始终按同一个固定顺序返回 `(output, weights)`，并用 $L_k$、$d$、$E$ 全都不同的形状来测试。同一篇教程还有一个变体，它的每个头都是完整大小（$d = E$）；第 4 节会算一算这要付出多少代价。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. The fused layer: one projection for all heads
#
# The $H$ query projections of the naive layer are $H$ matrices of shape $(d, E)$ (an
# `nn.Linear` stores its weight as (out, in)). Stack them, head 0's rows first: one $(H \cdot d, E)
# = (E, E)$ matrix, one `nn.Linear`, and one matrix product computes the queries of every head
# at once, $(B, L_q, E)$. Lesson 00's `split_heads` cuts the last axis into heads,
# $(B, L_q, H, d)$, and moves them forward, $(B, H, L_q, d)$; the same for keys and values. Then
# one batched attention call handles every head of every item, the scores are
# $(B, H, L_q, L_k)$, and `merge_heads` goes back to $(B, L_q, H \cdot d)$ for `out_proj`:
#
# ```python
# q = split_heads(self.q_proj(query), H)   # (B, H, L_q, d)
# k = split_heads(self.k_proj(key), H)     # (B, H, L_k, d)
# v = split_heads(self.v_proj(value), H)   # (B, H, L_k, d)
# out, weights = scaled_dot_product_attention(q, k, v, keep_mask=keep)  # every head at once
# return self.out_proj(merge_heads(out)), weights  # (B, L_q, E), (B, H, L_q, L_k)
# ```
#
# That is `FusedMultiheadAttention`, and the way `nn.MultiheadAttention` and most models do it.
# Given the naive layer's numbers, it gives the naive layer's results:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2ac22965e0"
# ## 3. 融合版：所有头共用一次投影
#
# 朴素版的 $H$ 个查询投影是 $H$ 个形状为 $(d, E)$ 的矩阵（`nn.Linear` 以 (out, in) 的形式存放权重）。把它们按第 0 个头在前的顺序上下叠起来，就得到一个 $(H \cdot d, E) = (E, E)$ 的矩阵、一个 `nn.Linear`，一次矩阵乘法就能同时算出所有头的查询，形状为 $(B, L_q, E)$。第 00 课的 `split_heads` 把最后一维切成多个头，$(B, L_q, H, d)$，再把头维移到前面，$(B, H, L_q, d)$；键和值同样处理。然后一次批量注意力调用就处理了每个样本（item，批量中的一条序列）的每个头，注意力分数的形状为 $(B, H, L_q, L_k)$；最后 `merge_heads` 变回 $(B, L_q, H \cdot d)$，交给 `out_proj`：
#
# ```python
# q = split_heads(self.q_proj(query), H)   # (B, H, L_q, d)
# k = split_heads(self.k_proj(key), H)     # (B, H, L_k, d)
# v = split_heads(self.v_proj(value), H)   # (B, H, L_k, d)
# out, weights = scaled_dot_product_attention(q, k, v, keep_mask=keep)  # 一次算完所有头
# return self.out_proj(merge_heads(out)), weights  # (B, L_q, E), (B, H, L_q, L_k)
# ```
#
# 这就是 `FusedMultiheadAttention`，也是 `nn.MultiheadAttention` 和大多数模型的做法。装上朴素版的参数后，它给出与朴素版相同的结果：

# %%
fused = FusedMultiheadAttention(E, H, kdim=E_kv, vdim=E_kv).copy_weights_from(naive)
fused_output, fused_weights = fused(x, memory, memory)
d = E // H
# lang: en
claim("rows d … 2d - 1 of the fused q_proj.weight are head 1's q_proj.weight",
      torch.equal(fused.q_proj.weight[d:2 * d], naive.heads[1].q_proj.weight))
claim("the fused layer returns the naive layer's output", torch.allclose(fused_output, output, atol=1e-6))
claim("and its weights, (B, H, L_q, L_k)", torch.allclose(fused_weights, weights, atol=1e-6))
# lang: zh
claim("融合版 q_proj.weight 的第 d … 2d - 1 行正是第 1 个头的 q_proj.weight",
      torch.equal(fused.q_proj.weight[d:2 * d], naive.heads[1].q_proj.weight))
claim("融合版返回的输出与朴素版相同", torch.allclose(fused_output, output, atol=1e-6))
claim("权重 (B, H, L_q, L_k) 也相同", torch.allclose(fused_weights, weights, atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the fused forward pass
#
# Write `my_multihead(query, key, value, w_q, w_k, w_v, w_o, num_heads)` from plain matrices in
# the formula's layout (`query @ w_q`, no biases). `query` is $(B, L_q, E_q)$, `key`
# $(B, L_k, E_k)$, `value` $(B, L_k, E_v)$; `w_q` is $(E_q, H \cdot d_k)$, `w_k` $(E_k, H \cdot d_k)$,
# `w_v` $(E_v, H \cdot d_v)$ and `w_o` $(H \cdot d_v, E_{out})$ with $H$ = `num_heads`. Project, split
# into heads, attend in every head at once (scale by $\sqrt{d_k}$), merge, project with `w_o`.
# Return `(output, weights)`: $(B, L_q, E_{out})$ and every head's weights $(B, H, L_q, L_k)$,
# both in the dtype of the inputs. The check tries one head, one query, one key, $d_k \ne d_v$,
# $E_{out} \ne E_q$ and float64 inputs, and compares gradients too. It refuses PyTorch's
# `F.multi_head_attention_forward`, the function `nn.MultiheadAttention` runs, which would do
# all of this for you. Leave the arguments unchanged: a function that changes one in place (say,
# `query /= ...`) fails the check.

# %% [markdown] tags=["lang-zh"] en_hash="f4292ef40e"
# ### 练习 1：融合版的前向计算
#
# 用公式布局下的普通矩阵（`query @ w_q`，不带偏置）写出 `my_multihead(query, key, value, w_q, w_k, w_v, w_o, num_heads)`。`query` 的形状为 $(B, L_q, E_q)$，`key` 为 $(B, L_k, E_k)$，`value` 为 $(B, L_k, E_v)$；`w_q` 为 $(E_q, H \cdot d_k)$，`w_k` 为 $(E_k, H \cdot d_k)$，`w_v` 为 $(E_v, H \cdot d_v)$，`w_o` 为 $(H \cdot d_v, E_{out})$，其中 $H$ = `num_heads`。先投影，再拆成多头，在所有头上一次做完注意力（除以 $\sqrt{d_k}$），合并，最后用 `w_o` 投影。按 `(output, weights)` 的顺序返回：$(B, L_q, E_{out})$ 和每个头各自的权重 $(B, H, L_q, L_k)$，两者的 dtype 都与输入相同。检查会测试只有一个头、只有一个查询、只有一个键、$d_k \ne d_v$、$E_{out} \ne E_q$ 以及 float64 输入的情形，还会比较梯度。检查不接受 PyTorch 的 `F.multi_head_attention_forward`：`nn.MultiheadAttention` 运行的就是这个函数，它会替你把这些步骤全部做完。不要改动参数：原地修改了某个参数（比如 `query /= ...`）的函数通不过检查。

# %% tags=["exercise"] exercise="04.fused_forward"
def my_multihead(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    # lang: en
    """Multi-head attention with one projection for all heads and one batched attention call.

    query: (B, L_q, E_q), key: (B, L_k, E_k), value: (B, L_k, E_v), float32 or float64.
    w_q: (E_q, H·d_k), w_k: (E_k, H·d_k), w_v: (E_v, H·d_v), w_o: (H·d_v, E_out); H = num_heads.
    Returns (output, weights): output (B, L_q, E_out) and the weights of every head
    (B, H, L_q, L_k), in the dtype of the inputs, each head's scores divided by √d_k.
    """
    # lang: zh
    """用一次投影处理所有头、一次批量调用完成注意力的多头注意力。

    query：(B, L_q, E_q)，key：(B, L_k, E_k)，value：(B, L_k, E_v)，均为 float32 或 float64。
    w_q：(E_q, H·d_k)，w_k：(E_k, H·d_k)，w_v：(E_v, H·d_v)，w_o：(H·d_v, E_out)；H = num_heads。
    返回 (output, weights)：output 为 (B, L_q, E_out)，weights 为每个头各自的权重 (B, H, L_q, L_k)，
    dtype 都与输入相同；每个头的分数都除以 √d_k。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L_q, _ = query.shape
    L_k = key.shape[1]
    q = (query @ w_q).view(B, L_q, num_heads, -1).transpose(1, 2)  # (B, H, L_q, d_k)
    k = (key @ w_k).view(B, L_k, num_heads, -1).transpose(1, 2)  # (B, H, L_k, d_k)
    v = (value @ w_v).view(B, L_k, num_heads, -1).transpose(1, 2)  # (B, H, L_k, d_v)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (B, H, L_q, L_k)
    out = (weights @ v).transpose(1, 2).reshape(B, L_q, -1)  # (B, L_q, H·d_v)
    return out @ w_o, weights
    ### END SOLUTION


# %%
from course_utils import check
check("04.fused_forward", my_multihead)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The same numbers in three layouts
#
# The naive layer, the fused layer and `nn.MultiheadAttention` hold exactly the same numbers,
# arranged differently:
#
# | | query projection | key / value projections | output |
# | --- | --- | --- | --- |
# | naive | `heads[h].q_proj.weight`, $(d, E)$ for each $h$ | `heads[h].k_proj.weight` $(d, k_{dim})$, `heads[h].v_proj.weight` $(d, v_{dim})$ | `out_proj.weight` $(E, H \cdot d)$ |
# | fused | `q_proj.weight`, $(E, E)$: rows $h d \dots (h+1) d - 1$ are head $h$'s | `k_proj.weight` $(E, k_{dim})$, `v_proj.weight` $(E, v_{dim})$ | `out_proj.weight` |
# | `nn.MultiheadAttention`, $k_{dim} = v_{dim} = E$ | `in_proj_weight`, $(3E, E)$: Q's rows, then K's, then V's | (inside `in_proj_weight`) | `out_proj.weight` |
# | `nn.MultiheadAttention`, other $k_{dim}$ or $v_{dim}$ | `q_proj_weight` $(E, E)$ | `k_proj_weight` $(E, k_{dim})$, `v_proj_weight` $(E, v_{dim})$ | `out_proj.weight` |
#
# The biases follow the same rows (`in_proj_bias` is $(3E,)$). `to_torch()` and
# `from_torch(mha)` convert between the course's layers and PyTorch's; here is what PyTorch's
# layer holds in each case:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="68206415b8"
# ## 4. 同一组数，三种布局
#
# 朴素版、融合版和 `nn.MultiheadAttention` 保存的是完全相同的一组数，只是排列方式不同：
#
# | | 查询投影 | 键 / 值投影 | 输出 |
# | --- | --- | --- | --- |
# | 朴素版 | `heads[h].q_proj.weight`，每个 $h$ 一个 $(d, E)$ | `heads[h].k_proj.weight` $(d, k_{dim})$、`heads[h].v_proj.weight` $(d, v_{dim})$ | `out_proj.weight` $(E, H \cdot d)$ |
# | 融合版 | `q_proj.weight`，$(E, E)$：第 $h d \dots (h+1) d - 1$ 行属于第 $h$ 个头 | `k_proj.weight` $(E, k_{dim})$、`v_proj.weight` $(E, v_{dim})$ | `out_proj.weight` |
# | `nn.MultiheadAttention`，$k_{dim} = v_{dim} = E$ | `in_proj_weight`，$(3E, E)$：先是 Q 的行，然后是 K 的，再然后是 V 的 | （在 `in_proj_weight` 里） | `out_proj.weight` |
# | `nn.MultiheadAttention`，$k_{dim}$ 或 $v_{dim}$ 与 $E$ 不同 | `q_proj_weight` $(E, E)$ | `k_proj_weight` $(E, k_{dim})$、`v_proj_weight` $(E, v_{dim})$ | `out_proj.weight` |
#
# 偏置也按同样的行排列（`in_proj_bias` 的形状为 $(3E,)$）。`to_torch()` 和 `from_torch(mha)` 在本课程的层与 PyTorch 的层之间相互转换；下面是两种情形下 PyTorch 的层各自保存了什么：

# %%
# lang: en
torch_self = FusedMultiheadAttention(E, H).to_torch()  # kdim = vdim = E
torch_cross = fused.to_torch()  # kdim = vdim = E_kv = 6
# lang: zh
torch_self = FusedMultiheadAttention(E, H).to_torch()  # kdim = vdim = E 的情形
torch_cross = fused.to_torch()  # kdim = vdim = E_kv = 6 的情形
# lang: end
for mha in (torch_self, torch_cross):
    print({name: tuple(p.shape) for name, p in mha.named_parameters()})

# %% [markdown] tags=["lang-en"]
# ### Parameter counts
#
# With $k_{dim} = v_{dim} = E$, the four projections of the fused layer hold $4E^2$ weights and
# $4E$ biases, and so do the naive layer ($H$ heads of $3(dE + d)$, plus `out_proj`) and
# `nn.MultiheadAttention`: the number of heads does not change the count, only how the numbers
# are cut up. The tutorial's variant with full-size heads ($d = E$, `fc_out` from $H \cdot E$ to
# $E$) is another model: about $H$ times as many parameters. For $E = 512$, $H = 8$:

# %% [markdown] tags=["lang-zh"] en_hash="b0c00358ee"
# ### 参数个数
#
# 当 $k_{dim} = v_{dim} = E$ 时，融合版的四个投影共有 $4E^2$ 个权重和 $4E$ 个偏置；朴素版（$H$ 个头，每个头 $3(dE + d)$ 个参数，再加上 `out_proj`）和 `nn.MultiheadAttention` 也是这么多。头数只决定这些数怎么切分，不改变总数。那篇教程里每个头都取完整大小的变体（$d = E$，`fc_out` 从 $H \cdot E$ 映射到 $E$）就是另一个模型了：参数大约多出 $H$ 倍。取 $E = 512$、$H = 8$：

# %%
E_big, H_big = 512, 8
counts = {
    "NaiveMultiheadAttention": parameter_count(NaiveMultiheadAttention(E_big, H_big)),
    "FusedMultiheadAttention": parameter_count(FusedMultiheadAttention(E_big, H_big)),
    "nn.MultiheadAttention": parameter_count(nn.MultiheadAttention(E_big, H_big)),
    "head_dim = E": parameter_count(NaiveMultiheadAttention(E_big, H_big, head_dim=E_big)),
}
for name, count in counts.items():
    print(f"{name:24} {count:>10,}")
ratio = counts["head_dim = E"] / counts["FusedMultiheadAttention"]
# lang: en
claim("naive, fused and nn.MultiheadAttention all have 4E² + 4E parameters",
      len(set(list(counts.values())[:3])) == 1 and counts["FusedMultiheadAttention"] == 4 * E_big**2 + 4 * E_big)
claim("for every number of heads that divides E",
      len({parameter_count(FusedMultiheadAttention(E_big, heads)) for heads in (1, 2, 8, 64)}) == 1)
claim(f"full-size heads have {ratio:.3f} times as many, about H = {H_big}", abs(ratio - H_big) < 0.01)
# lang: zh
claim("朴素版、融合版和 nn.MultiheadAttention 的参数个数都是 4E² + 4E",
      len(set(list(counts.values())[:3])) == 1 and counts["FusedMultiheadAttention"] == 4 * E_big**2 + 4 * E_big)
claim("头数取 E 的任意约数时都是如此",
      len({parameter_count(FusedMultiheadAttention(E_big, heads)) for heads in (1, 2, 8, 64)}) == 1)
claim(f"完整大小的头，参数个数是融合版的 {ratio:.3f} 倍，约为 H = {H_big} 倍", abs(ratio - H_big) < 0.01)
# lang: end

# %% [markdown] tags=["lang-en"]
# So a fair comparison of one head with $H$ heads keeps $E$ fixed (as section 1 did); the
# full-size variant mixes the effect of the heads with that of eight times the parameters.

# %% [markdown] tags=["lang-zh"] en_hash="ec3a1bb32f"
# 所以，公平地比较一个头和 $H$ 个头，要保持 $E$ 不变（第 1 节就是这样做的）；完整大小的变体则把多头的作用和八倍参数的作用混在了一起。

# %% [markdown] tags=["lang-en"]
# ### What small heads cost
#
# The count stays $4E^2 + 4E$ whatever $H$ is; what $H$ changes is what one head can compute.
# Biases aside, head $h$ scores query $x_q$ against key $x_k$ as
#
# $$\frac{(x_q W_Q^h)(x_k W_K^h)^\top}{\sqrt d} = x_q\, \frac{W_Q^h {W_K^h}^\top}{\sqrt d}\, x_k^\top ,$$
#
# with $W_Q^h$ and $W_K^h$ of shape $(E, d)$. Their product is an $E \times E$ matrix of rank at most
# $d$: one head measures how well a query matches a key along only $d$ of the directions of the $E$
# features. That is the price of splitting $E$ into $H$ heads: more places to attend at once, each
# with a narrower view. (One head of $d = E$ compares along all $E$ directions, but gives each
# query a single pattern.)

# %% [markdown] tags=["lang-zh"] en_hash="587f8209a0"
# ### 头变小要付出什么
#
# 无论 $H$ 是多少，参数个数都是 $4E^2 + 4E$；$H$ 改变的是一个头能算出什么。不计偏置，第 $h$ 个头给查询 $x_q$ 和键 $x_k$ 打的分数是
#
# $$\frac{(x_q W_Q^h)(x_k W_K^h)^\top}{\sqrt d} = x_q\, \frac{W_Q^h {W_K^h}^\top}{\sqrt d}\, x_k^\top ,$$
#
# 其中 $W_Q^h$ 和 $W_K^h$ 的形状都是 $(E, d)$。它们的乘积是一个 $E \times E$ 矩阵，秩（rank）至多为 $d$：一个头只能在 $E$ 个特征所张成的空间里，沿其中 $d$ 个方向衡量查询与键是否匹配。这就是把 $E$ 拆成 $H$ 个头的代价：能同时关注的地方多了，每个头的视野却窄了。（$d = E$ 的单个头能沿全部 $E$ 个方向比较，但每个查询只能得到一种注意力模式。）

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: every head's score matrix
#
# `nn.MultiheadAttention` keeps $W_Q$, $W_K$ and $W_V$ packed in one `in_proj_weight` of shape
# $(3E, E)$ (section 4's table): Q's $E$ rows, then K's, then V's, each block stored (out, in) as
# `nn.Linear` stores a weight, and within Q's rows (and K's), head 0's $d$ rows first. Write
# `my_score_matrices(in_proj_weight, num_heads)`: return the $(H, E, E)$ tensor whose entry $h$ is
# $A_h = W_Q^h {W_K^h}^\top / \sqrt d$, $d = E / H$, so that head $h$'s scores, biases aside, are
# $X_q A_h X_k^\top$. Return it in the dtype of `in_proj_weight` (the check tries float32 and
# float64). The check tries one head, heads of $d = 1$ and several sizes, and compares gradients
# with respect to `in_proj_weight` too: build the result with tensor operations (no `.detach()`, no
# `torch.no_grad()`, no NumPy). Leave `in_proj_weight` unchanged: a function that changes it in
# place (say, scaling its rows with `/=`) fails the check.

# %% [markdown] tags=["lang-zh"] en_hash="eeddbd1eac"
# ### 练习 2：每个头的分数矩阵
#
# `nn.MultiheadAttention` 把 $W_Q$、$W_K$、$W_V$ 打包存放在一个形状为 $(3E, E)$ 的 `in_proj_weight` 里（见第 4 节的表格）：先是 Q 的 $E$ 行，然后是 K 的，再然后是 V 的；每一块都像 `nn.Linear` 存放权重那样按 (out, in) 存放；在 Q（以及 K）的行里，第 0 个头的 $d$ 行排在最前。写出 `my_score_matrices(in_proj_weight, num_heads)`：返回形状为 $(H, E, E)$ 的张量，其中第 $h$ 项是 $A_h = W_Q^h {W_K^h}^\top / \sqrt d$，$d = E / H$，这样第 $h$ 个头的分数（不计偏置）就是 $X_q A_h X_k^\top$。返回值的 dtype 与 `in_proj_weight` 相同（检查会测试 float32 和 float64）。检查会测试只有一个头、$d = 1$ 的头以及多种大小的情形，还会比较对 `in_proj_weight` 的梯度：请用张量运算构造结果（不要用 `.detach()`、`torch.no_grad()` 或 NumPy）。不要改动 `in_proj_weight`：原地修改它（比如用 `/=` 缩放它的行）的函数通不过检查。

# %% tags=["exercise"] exercise="04.score_matrices"
def my_score_matrices(in_proj_weight, num_heads):
    # lang: en
    """Every head's score matrix W_Q^h W_K^hᵀ / √d, from nn.MultiheadAttention's packed weight.

    in_proj_weight: (3E, E): Q's rows, then K's, then V's, each block (out, in); head h's rows of
    Q (and of K) are h·d … (h+1)·d - 1, d = E / num_heads.
    Returns (H, E, E) in the dtype of in_proj_weight: entry h is A_h = W_Q^h W_K^hᵀ / √d, so
    that head h's scores (biases aside) are X_q @ A_h @ X_kᵀ.
    """
    # lang: zh
    """由 nn.MultiheadAttention 打包的权重得到每个头的分数矩阵 W_Q^h W_K^hᵀ / √d。

    in_proj_weight：(3E, E)，先是 Q 的行，然后是 K 的，再然后是 V 的，每一块都是 (out, in)；
    Q（以及 K）中第 h 个头的行是第 h·d … (h+1)·d - 1 行，d = E / num_heads。
    返回 (H, E, E)，dtype 与 in_proj_weight 相同：第 h 项是 A_h = W_Q^h W_K^hᵀ / √d，
    这样第 h 个头的分数（不计偏置）就是 X_q @ A_h @ X_kᵀ。
    """
    # lang: end
    ### BEGIN SOLUTION
    E = in_proj_weight.shape[1]
    d = E // num_heads
    q_rows, k_rows, _ = in_proj_weight.split(E)  # 3 × (E, E)
    # lang: en
    # (H, d, E): entry h is (W_Q^h)ᵀ, stored (out, in); the same for K
    # lang: zh
    # (H, d, E)：第 h 项是按 (out, in) 存放的 (W_Q^h)ᵀ；K 也一样
    # lang: end
    q = q_rows.view(num_heads, d, E)
    k = k_rows.view(num_heads, d, E)
    return q.transpose(1, 2) @ k / math.sqrt(d)  # (H, E, d) @ (H, d, E) = (H, E, E)
    ### END SOLUTION

# %%
from course_utils import check
check("04.score_matrices", my_score_matrices)

# %% [markdown] tags=["lang-en"]
# The ranks, on a layer with $E = 16$: each of four heads of $d = 4$, and one head of $d = 16$.
# `heads[h].q_proj.weight` is $(W_Q^h)^\top$, stored (out, in):

# %% [markdown] tags=["lang-zh"] en_hash="806c0312ce"
# 下面在 $E = 16$ 的层上看看秩：四个头、每个 $d = 4$，以及一个 $d = 16$ 的头。`heads[h].q_proj.weight` 就是按 (out, in) 存放的 $(W_Q^h)^\top$：

# %%
torch.manual_seed(6)
four_heads = NaiveMultiheadAttention(16, 4).double()
one_head = NaiveMultiheadAttention(16, 1).double()


def score_rank(head):
    # lang: en
    """The rank of W_Q^h W_K^hᵀ, (E, d) @ (d, E), for one head of a naive layer."""
    # lang: zh
    """朴素版层中一个头的 W_Q^h W_K^hᵀ（(E, d) @ (d, E)）的秩。"""
    # lang: end
    product = head.q_proj.weight.T @ head.k_proj.weight  # (E, E)
    return int(torch.linalg.matrix_rank(product, rtol=1e-9))


x16 = torch.randn(1, 12, 16, generator=g, dtype=torch.float64)  # (B, L, E) = (1, 12, 16)
# lang: en
# each head's (L, L) scores on that sequence, biases included
# lang: zh
# 每个头在这条序列上的 (L, L) 分数，包括偏置
# lang: end
with torch.no_grad():
    sequence_ranks = [int(torch.linalg.matrix_rank(head.q_proj(x16)[0] @ head.k_proj(x16)[0].T, rtol=1e-9))
                      for head in four_heads.heads]
# lang: en
claim("each of the four heads' 16 × 16 matrices W_Q^h W_K^hᵀ has rank 4 = d",
      [score_rank(head) for head in four_heads.heads] == [4] * 4)
claim("the one head of d = 16 has rank 16", score_rank(one_head.heads[0]) == 16)
claim("on a sequence of 12 positions, each of the four heads' 12 × 12 score matrices has rank 4 too",
      sequence_ranks == [4] * 4)
# lang: zh
claim("四个头各自的 16 × 16 矩阵 W_Q^h W_K^hᵀ，秩都是 4 = d", [score_rank(head) for head in four_heads.heads] == [4] * 4)
claim("d = 16 的单个头，秩为 16", score_rank(one_head.heads[0]) == 16)
claim("在一条 12 个位置的序列上，四个头各自的 12 × 12 分数矩阵秩也都是 4", sequence_ranks == [4] * 4)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Three ways, one result
#
# Now the proof that the three layers compute the same function, in float64 so that "equal"
# means equal to many digits: the same outputs, the same weights of every head (PyTorch's with
# `average_attn_weights=False`), the same gradients with respect to the inputs and to every
# parameter (read in the packed layout by `packed_gradients`). Two settings:
#
# - cross-attention with $k_{dim} = 6$, $v_{dim} = 5$ and a key-padding mask (sequences of 7,
#   5 and 2 keys);
# - self-attention ($k_{dim} = v_{dim} = E$, PyTorch's packed `in_proj_weight`) with a causal
#   mask, given to the course's layers as a keep mask and to PyTorch as `attn_mask = ~keep`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5224f7a40e"
# ## 5. 三种写法，同一个结果
#
# 现在来证明这三个层计算的是同一个函数。用 float64 计算，让“相等”精确到很多位：输出相同，每个头的权重相同（PyTorch 的层使用 `average_attn_weights=False`），对输入和对每个参数的梯度也相同（用 `packed_gradients` 按打包布局读出）。分两种情形：
#
# - 交叉注意力，$k_{dim} = 6$，$v_{dim} = 5$，带键填充掩码（key padding mask；三条序列分别有 7、5、2 个键）；
# - 自注意力（$k_{dim} = v_{dim} = E$，对应 PyTorch 打包的 `in_proj_weight`），带因果掩码：以保留掩码（keep mask）的形式传给本课程的层，以 `attn_mask = ~keep` 的形式传给 PyTorch。

# %%
def three_layers(kdim, vdim, seed=0):
    # lang: en
    """A naive layer (E = 8, H = 2, float64) and a fused one and nn.MultiheadAttention with its weights."""
    # lang: zh
    """一个朴素版层（E = 8，H = 2，float64），以及装上它的权重的融合版层和 nn.MultiheadAttention。"""
    # lang: end
    torch.manual_seed(seed)
    naive_layer = NaiveMultiheadAttention(8, 2, kdim=kdim, vdim=vdim).double()
    fused_layer = FusedMultiheadAttention(8, 2, kdim=kdim, vdim=vdim).double().copy_weights_from(naive_layer)
    return naive_layer, fused_layer, fused_layer.to_torch()


def run(layer, inputs, probes, keep=None, padding=None):
    # lang: en
    """Output, weights, input gradients and packed parameter gradients of a fixed random loss."""
    # lang: zh
    """输出、权重，以及一个固定随机损失对输入的梯度和按打包布局排列的参数梯度。"""
    # lang: end
    for t in inputs:
        t.grad = None
    layer.zero_grad()
    if isinstance(layer, nn.MultiheadAttention):
        ignore = None if keep is None else ~keep
        output, weights = layer(*inputs, attn_mask=ignore, key_padding_mask=padding, average_attn_weights=False)
    else:
        output, weights = layer(*inputs, keep_mask=keep, key_padding_mask=padding)
    ((output * probes[0]).sum() + (weights * probes[1]).sum()).backward()
    return [output, weights, *(t.grad for t in inputs), *packed_gradients(layer).values()]


def same(results):
    return all(
        (a is None and b is None) or torch.allclose(a, b)
        for first, other in zip(results, results[1:]) for a, b in zip(first, other)
    )


g64 = torch.Generator().manual_seed(1)
query = torch.randn(3, 4, 8, generator=g64, dtype=torch.float64, requires_grad=True)  # (B, L_q, E)
# lang: en
key = torch.randn(3, 7, 6, generator=g64, dtype=torch.float64, requires_grad=True)  # (B, L_k, kdim)
value = torch.randn(3, 7, 5, generator=g64, dtype=torch.float64, requires_grad=True)  # (B, L_k, vdim)
# lang: zh
key = torch.randn(3, 7, 6, generator=g64, dtype=torch.float64, requires_grad=True)  # 形状 (B, L_k, kdim)
value = torch.randn(3, 7, 5, generator=g64, dtype=torch.float64, requires_grad=True)  # 形状 (B, L_k, vdim)
# lang: end
sequence = torch.randn(3, 7, 8, generator=g64, dtype=torch.float64, requires_grad=True)  # (B, L, E)
# lang: en
padding = torch.arange(7) >= torch.tensor([7, 5, 2])[:, None]  # (B, L_k): True at padding
causal = torch.ones(7, 7, dtype=torch.bool).tril()  # (L, L): key j ≤ query i
# lang: zh
padding = torch.arange(7) >= torch.tensor([7, 5, 2])[:, None]  # (B, L_k)：True 表示填充
causal = torch.ones(7, 7, dtype=torch.bool).tril()  # (L, L)：键 j ≤ 查询 i
# lang: end
cross_probes = [torch.randn(3, 4, 8, generator=g64, dtype=torch.float64),
                torch.randn(3, 2, 4, 7, generator=g64, dtype=torch.float64)]
self_probes = [torch.randn(3, 7, 8, generator=g64, dtype=torch.float64),
               torch.randn(3, 2, 7, 7, generator=g64, dtype=torch.float64)]

cross = three_layers(kdim=6, vdim=5)
self_ = three_layers(kdim=8, vdim=8, seed=1)
cross_inputs, self_inputs = (query, key, value), (sequence, sequence, sequence)
# lang: en
claim("cross-attention, no mask: the same outputs, weights and gradients",
      same([run(layer, cross_inputs, cross_probes) for layer in cross]))
claim("cross-attention with the key-padding mask: the same",
      same([run(layer, cross_inputs, cross_probes, padding=padding) for layer in cross]))
claim("self-attention, no mask: the same", same([run(layer, self_inputs, self_probes) for layer in self_]))
claim("self-attention with the causal mask: the same",
      same([run(layer, self_inputs, self_probes, keep=causal) for layer in self_]))
# lang: zh
claim("交叉注意力，不带掩码：输出、权重和梯度都相同",
      same([run(layer, cross_inputs, cross_probes) for layer in cross]))
claim("交叉注意力，带键填充掩码：同样相同",
      same([run(layer, cross_inputs, cross_probes, padding=padding) for layer in cross]))
claim("自注意力，不带掩码：同样相同", same([run(layer, self_inputs, self_probes) for layer in self_]))
claim("自注意力，带因果掩码：同样相同",
      same([run(layer, self_inputs, self_probes, keep=causal) for layer in self_]))
# lang: end

# %% [markdown] tags=["lang-en"]
# One place where they differ on purpose: an item whose keys are all padding, the fully masked
# rows that lesson 02 §4 took apart (`nn.MultiheadAttention` gives NaN there on its default call).
# The course's layers give zero weights and a zero attention output, so the layer returns
# `out_proj`'s bias; everywhere a query keeps at least one key, the two agree:

# %% [markdown] tags=["lang-zh"] en_hash="f57804417d"
# 有一处它们是有意不同的：所有键都是填充的样本，也就是第 02 课第 4 节剖析过的全遮蔽行（掩码遮住了所有键的行，`nn.MultiheadAttention` 的默认调用在那里给出 NaN）。本课程的层给出全零的权重和全零的注意力输出，于是这个层返回 `out_proj` 的偏置；只要一个查询至少保留了一个键，两者就完全一致：

# %%
all_padding = padding.clone()
# lang: en
all_padding[2] = True  # item 2: nothing but padding
# lang: zh
all_padding[2] = True  # 样本 2：全是填充
# lang: end
_, fused_cross, torch_cross64 = cross
ours, _ = fused_cross(query, key, value, key_padding_mask=all_padding)
theirs, _ = torch_cross64(query, key, value, key_padding_mask=all_padding)
# lang: en
claim("the course's layer returns out_proj's bias for the item with no real key", torch.allclose(ours[2], fused_cross.out_proj.bias.expand(4, 8)))
claim("and for the other items the two agree", torch.allclose(ours[:2], theirs[:2]))
# lang: zh
claim("对没有任何真实键的样本，本课程的层返回 out_proj 的偏置", torch.allclose(ours[2], fused_cross.out_proj.bias.expand(4, 8)))
claim("而其他样本上两者一致", torch.allclose(ours[:2], theirs[:2]))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. What `nn.MultiheadAttention` does that surprises people
#
# ### `batch_first` is False unless you say so
#
# Created without `batch_first=True`, the layer reads its inputs as $(L, B, E)$, sequence first:
# the convention of PyTorch's recurrent layers (`nn.RNN`, `nn.LSTM` and `nn.GRU` default to
# `batch_first=False` too). Hand it a batch-first $(B, L, E)$ tensor and nothing fails: it
# takes the batch axis for the sequence and attends *across the items of the batch*:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="ec2cc6a2a4"
# ## 6. `nn.MultiheadAttention` 那些出人意料的行为
#
# ### 不声明时，`batch_first` 为 False
#
# 创建时如果没有写 `batch_first=True`，这个层会把输入当作 $(L, B, E)$ 来读，即序列在前（sequence-first）：这是 PyTorch 循环层的约定（`nn.RNN`、`nn.LSTM`、`nn.GRU` 的 `batch_first` 默认也是 False）。交给它一个批量在前的 $(B, L, E)$ 张量，什么也不会报错：它把批量维当成了序列维，于是在*批量里的各个样本之间*做注意力：

# %%
torch.manual_seed(2)
# lang: en
mha_default = nn.MultiheadAttention(8, 2)  # batch_first not given
# lang: zh
mha_default = nn.MultiheadAttention(8, 2)  # 没有给出 batch_first
# lang: end
mha_first = nn.MultiheadAttention(8, 2, batch_first=True)
# lang: en
mha_first.load_state_dict(mha_default.state_dict())  # the same weights
x3 = torch.randn(3, 5, 8, generator=g)  # (B, L, E): 3 sequences of 5 positions
# lang: zh
mha_first.load_state_dict(mha_default.state_dict())  # 相同的权重
x3 = torch.randn(3, 5, 8, generator=g)  # (B, L, E)：3 条序列，每条 5 个位置
# lang: end
out_default, w_default = mha_default(x3, x3, x3)
out_first, _ = mha_first(x3, x3, x3)
x3_changed = x3.clone()
# lang: en
x3_changed[1] += 1.0  # change sequence 1 only
print("weights.shape =", tuple(w_default.shape))  # (N, L, L) = (5, 3, 3): L = 3 "positions" per "sequence"
# lang: zh
x3_changed[1] += 1.0  # 只改动序列 1
print("weights.shape =", tuple(w_default.shape))  # (N, L, L) = (5, 3, 3)：每条“序列”只有 L = 3 个“位置”
# lang: end
# lang: en
claim("batch_first is False by default", mha_default.batch_first is False)
claim("as in nn.RNN, nn.LSTM and nn.GRU", all(not layer(4, 4).batch_first for layer in (nn.RNN, nn.LSTM, nn.GRU)))
claim("it runs on (B, L, E) and returns that shape", out_default.shape == x3.shape)
claim("but its output is not the batch_first=True layer's", not torch.allclose(out_default, out_first, atol=1e-4))
claim("and changing sequence 1 changes the output of sequence 0",
      not torch.allclose(mha_default(x3_changed, x3_changed, x3_changed)[0][0], out_default[0], atol=1e-4))
# lang: zh
claim("batch_first 默认为 False", mha_default.batch_first is False)
claim("nn.RNN、nn.LSTM、nn.GRU 也是如此", all(not layer(4, 4).batch_first for layer in (nn.RNN, nn.LSTM, nn.GRU)))
claim("它在 (B, L, E) 上照常运行，并返回同样的形状", out_default.shape == x3.shape)
claim("但它的输出与 batch_first=True 的层不同", not torch.allclose(out_default, out_first, atol=1e-4))
claim("而且改动序列 1 会改变序列 0 的输出",
      not torch.allclose(mha_default(x3_changed, x3_changed, x3_changed)[0][0], out_default[0], atol=1e-4))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### The weights it returns are averaged over the heads
#
# By default (`need_weights=True`, `average_attn_weights=True`) the second result is the mean of
# the heads' weights, $(B, L_q, L_k)$: the per-head patterns of section 1 would be averaged into
# a blur. Ask for `average_attn_weights=False` to get $(B, H, L_q, L_k)$, what the course's
# layers always return; ask for `need_weights=False` when you need no weights at all (then
# `None` comes back, and the layer can use a faster kernel).

# %% [markdown] tags=["lang-zh"] en_hash="b3d4d1cd35"
# ### 它返回的权重是各个头的平均
#
# 默认情况下（`need_weights=True`，`average_attn_weights=True`），第二个返回值是各个头权重的平均，形状为 $(B, L_q, L_k)$：第 1 节那种各个头各自的模式会被平均成一片模糊。传入 `average_attn_weights=False` 才能得到 $(B, H, L_q, L_k)$，这正是本课程的层始终返回的；完全不需要权重时传入 `need_weights=False`（这时返回 `None`，这个层也可以用更快的核函数）。

# %%
ours_first = FusedMultiheadAttention.from_torch(mha_first)
_, ours_weights = ours_first(x3, x3, x3)  # (B, H, L, L)
_, averaged = mha_first(x3, x3, x3)
_, per_head = mha_first(x3, x3, x3, average_attn_weights=False)
_, nothing = mha_first(x3, x3, x3, need_weights=False)
print(tuple(averaged.shape), tuple(per_head.shape), nothing)
# lang: en
claim("by default it returns the mean over the heads", torch.allclose(averaged, ours_weights.mean(dim=1), atol=1e-6))
claim("with average_attn_weights=False, every head's weights", torch.allclose(per_head, ours_weights, atol=1e-6))
# lang: zh
claim("默认返回的是各个头的平均", torch.allclose(averaged, ours_weights.mean(dim=1), atol=1e-6))
claim("传入 average_attn_weights=False 时，返回每个头各自的权重", torch.allclose(per_head, ours_weights, atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Its fast path, and when it runs
#
# `nn.MultiheadAttention` has a second implementation, its **fast path**: one C++ operator,
# `torch._native_multi_head_attention`, instead of the Python code of its general path. Which
# one ran is invisible from outside, so we watch the operators PyTorch dispatches
# (`course_utils.multihead.operators`) and look for that one. The baseline below takes it: eval
# mode, autograd off (`torch.inference_mode()`), self-attention with the *same* tensor as query,
# key and value, `batch_first=True`, two heads. Then one condition changes at a time (measured
# with torch 2.13):

# %% [markdown] tags=["lang-zh"] en_hash="727e89e5b2"
# ### 它的快速路径，以及什么时候会走
#
# `nn.MultiheadAttention` 还有第二套实现，即它的**快速路径**（fast path）：一个 C++ 算子 `torch._native_multi_head_attention`，取代通用路径（general path）里的 Python 代码。从外面看不出跑的是哪一条路径，所以我们观察 PyTorch 分派了哪些算子（`course_utils.multihead.operators`），看其中有没有这一个。下面的基准情形走的是快速路径：eval 模式，关闭自动求导（`torch.inference_mode()`），自注意力且查询、键、值是*同一个*张量，`batch_first=True`，两个头。然后每次只改变一个条件（用 torch 2.13 测得）：

# %%
torch.manual_seed(3)
mha_fast = nn.MultiheadAttention(8, 2, batch_first=True).eval()
x_fast = torch.randn(3, 5, 8, generator=g)
# lang: en
padding_fast = torch.tensor([[False] * 5, [False] * 4 + [True], [False] * 3 + [True] * 2])  # items 1 and 2 end in padding
# lang: zh
padding_fast = torch.tensor([[False] * 5, [False] * 4 + [True], [False] * 3 + [True] * 2])  # 样本 1 和 2 末尾是填充
# lang: end


def variant(**changes):
    # lang: en
    """A copy of mha_fast built with `changes` (e.g. num_heads=3), in eval mode."""
    # lang: zh
    """按 `changes`（例如 num_heads=3）重新构建的 mha_fast，处于 eval 模式。"""
    # lang: end
    options = {"embed_dim": 8, "num_heads": 2, "batch_first": True, **changes}
    return nn.MultiheadAttention(**options).eval()


with torch.inference_mode():
    fast = {
        "baseline": took_fast_path(mha_fast, x_fast, x_fast, x_fast),
        "need_weights": took_fast_path(mha_fast, x_fast, x_fast, x_fast, need_weights=True),
        "padding": took_fast_path(mha_fast, x_fast, x_fast, x_fast, key_padding_mask=padding_fast),
        "copy": took_fast_path(mha_fast, x_fast, x_fast, x_fast.clone()),
        "odd": took_fast_path(variant(num_heads=1), x_fast, x_fast, x_fast),
        "batch_first": took_fast_path(variant(batch_first=False), x_fast, x_fast, x_fast),
        "bias": took_fast_path(variant(bias=False), x_fast, x_fast, x_fast),
        "float_mask": took_fast_path(mha_fast, x_fast, x_fast, x_fast,
                                     attn_mask=torch.zeros(5, 5).masked_fill(~causal[:5, :5], float("-inf"))),
    }
    mha_fast.train()
    fast["train"] = took_fast_path(mha_fast, x_fast, x_fast, x_fast)
    mha_fast.eval()
# lang: en
fast["autograd"] = took_fast_path(mha_fast, x_fast, x_fast, x_fast)  # outside inference_mode
# lang: zh
fast["autograd"] = took_fast_path(mha_fast, x_fast, x_fast, x_fast)  # 在 inference_mode 之外
# lang: end
# lang: en
claim("baseline: the fast path", fast["baseline"])
claim("need_weights=True (the default) does not stop it: the fast path computes the weights too", fast["need_weights"])
claim("a bool key_padding_mask: still the fast path", fast["padding"])
claim("value a copy of the same numbers (x.clone()): the general path, as for any cross-attention", not fast["copy"])
claim("one head (an odd number): the general path", not fast["odd"])
claim("batch_first=False: the general path", not fast["batch_first"])
claim("bias=False: the general path", not fast["bias"])
claim("a float (additive) attn_mask: the general path", not fast["float_mask"])
claim("training mode: the general path", not fast["train"])
claim("autograd on, with parameters that require grad: the general path", not fast["autograd"])
# lang: zh
claim("基准情形：快速路径", fast["baseline"])
claim("need_weights=True（默认值）并不会阻止它：快速路径也会计算权重", fast["need_weights"])
claim("bool 类型的 key_padding_mask：仍然走快速路径", fast["padding"])
claim("value 是同样数值的副本（x.clone()）：走通用路径，任何交叉注意力都是如此", not fast["copy"])
claim("一个头（奇数个头）：走通用路径", not fast["odd"])
claim("batch_first=False：走通用路径", not fast["batch_first"])
claim("bias=False：走通用路径", not fast["bias"])
claim("浮点（加性）attn_mask：走通用路径", not fast["float_mask"])
claim("训练模式：走通用路径", not fast["train"])
claim("开启自动求导且参数需要梯度：走通用路径", not fast["autograd"])
# lang: end

# %% [markdown] tags=["lang-en"]
# A one-head `nn.MultiheadAttention`, like lesson 03's comparisons, never takes it. Do the two
# paths compute the same? On these inputs, padding included, they agree to rounding. They differ
# only on an item whose keys are all padding: lesson 02 §4 has the table of what every path returns
# there, and section 5 above showed the NaN of the default call.

# %% [markdown] tags=["lang-zh"] en_hash="c9a7001d19"
# 因此，只有一个头的 `nn.MultiheadAttention`（比如第 03 课拿来对照的那个）从来不会走快速路径。两条路径算出的结果一样吗？在这些输入上（包括填充），两者只差舍入误差。它们只在所有键都是填充的样本上不同：每条路径在那里返回什么，见第 02 课第 4 节的表格；默认调用返回的 NaN，上面第 5 节已经展示过。

# %%
with torch.inference_mode():
    fast_output, _ = mha_fast(x_fast, x_fast, x_fast, key_padding_mask=padding_fast, need_weights=False)
    # lang: en
    mha_fast.train()  # the general path (its dropout is 0)
    # lang: zh
    mha_fast.train()  # 通用路径（它的 dropout 为 0）
    # lang: end
    general_output, _ = mha_fast(x_fast, x_fast, x_fast, key_padding_mask=padding_fast, need_weights=False)
    mha_fast.eval()
# lang: en
claim("the fast path and the general path agree on every item", torch.allclose(fast_output, general_output, atol=1e-5))
# lang: zh
claim("快速路径与通用路径在每个样本上都一致", torch.allclose(fast_output, general_output, atol=1e-5))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Its 3-D `attn_mask` is batch-major
#
# `attn_mask` may be $(L_q, L_k)$, the same for every item and head, or 3-D,
# $(B \cdot H, L_q, L_k)$: one mask per head of every item, with True meaning *must not attend*.
# Inside, PyTorch views its scores as $(B, H, L_q, L_k)$ and flattens the first two axes, so slot
# $n$ is head $h$ of item $b$ with $n = b \cdot H + h$: **batch-major**, all heads of item 0
# first. A mask laid out head-major ($n = h \cdot B + b$) is accepted without complaint and given to
# the wrong heads. Here each item and each head gets its own mask; the course's fused layer
# takes them as a $(B, H, L_q, L_k)$ keep mask:

# %% [markdown] tags=["lang-zh"] en_hash="480febb9ec"
# ### 它的 3 维 `attn_mask` 是批量优先的
#
# `attn_mask` 可以是 $(L_q, L_k)$，对每个样本、每个头都一样；也可以是 3 维的 $(B \cdot H, L_q, L_k)$：每个样本的每个头各有一个掩码，True 表示*不得关注*。在内部，PyTorch 把注意力分数看作 $(B, H, L_q, L_k)$，再把前两维展平，于是槽位（slot）$n$ 是第 $b$ 个样本的第 $h$ 个头，$n = b \cdot H + h$：**批量优先**（batch-major），样本 0 的所有头排在最前面。按头优先（head-major，$n = h \cdot B + b$）排列的掩码也会被照单全收，然后交给错误的头。下面每个样本、每个头都有自己的掩码；本课程的融合版层以 $(B, H, L_q, L_k)$ 保留掩码的形式接收它们：

# %%
B3, H3, L3 = 3, 2, 5
# lang: en
keep_per_head = torch.rand(B3, H3, L3, L3, generator=g) > 0.3  # (B, H, L_q, L_k): a mask per item and head
keep_per_head[..., 0] = True  # every query keeps a key
# lang: zh
keep_per_head = torch.rand(B3, H3, L3, L3, generator=g) > 0.3  # (B, H, L_q, L_k)：每个样本、每个头各一个掩码
keep_per_head[..., 0] = True  # 每个查询都保留至少一个键
# lang: end
ours_masked, _ = ours_first(x3, x3, x3, keep_mask=keep_per_head)
# lang: en
batch_major = (~keep_per_head).reshape(B3 * H3, L3, L3)  # slot b·H + h
head_major = (~keep_per_head).transpose(0, 1).reshape(B3 * H3, L3, L3)  # slot h·B + b
# lang: zh
batch_major = (~keep_per_head).reshape(B3 * H3, L3, L3)  # 槽位 b·H + h
head_major = (~keep_per_head).transpose(0, 1).reshape(B3 * H3, L3, L3)  # 槽位 h·B + b
# lang: end
# lang: en
claim("the batch-major (B·H, L_q, L_k) mask gives the course's result",
      torch.allclose(mha_first(x3, x3, x3, attn_mask=batch_major)[0], ours_masked, atol=1e-6))
claim("a head-major one runs too, and gives another result",
      not torch.allclose(mha_first(x3, x3, x3, attn_mask=head_major)[0], ours_masked, atol=1e-6))
# lang: zh
claim("批量优先的 (B·H, L_q, L_k) 掩码给出与本课程相同的结果",
      torch.allclose(mha_first(x3, x3, x3, attn_mask=batch_major)[0], ours_masked, atol=1e-6))
claim("头优先的掩码也能运行，却给出另一个结果",
      not torch.allclose(mha_first(x3, x3, x3, attn_mask=head_major)[0], ours_masked, atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: the mask of the batched call
#
# A common case: each item has its padding, $(B, L_k)$, and you want to pass it as the 3-D
# `attn_mask` (for example to combine it with a per-head mask). Write
# `my_attn_mask(key_padding_mask, num_heads, L_q)`: `key_padding_mask` is a $(B, L_k)$ bool tensor,
# True at padding. Return the bool $(B \cdot H, L_q, L_k)$ mask that `nn.MultiheadAttention`
# accepts as `attn_mask`, True where a query must not attend, every head and every query of
# item $b$ hiding item $b$'s padding, in PyTorch's slot order. The check tries a fully padded
# item, one head, one query, $L_q < L_k$, $L_q > L_k$ and padding on the left. Leave
# `key_padding_mask` unchanged: a function that changes it in place (say, inverting it with
# `logical_not_()`) fails the check.

# %% [markdown] tags=["lang-zh"] en_hash="b6a511c041"
# ### 练习 3：批量调用的掩码
#
# 一个常见的情形：每个样本都有自己的填充，$(B, L_k)$，而你想把它作为 3 维的 `attn_mask` 传进去（比如要把它与每个头各自的掩码合并）。写出 `my_attn_mask(key_padding_mask, num_heads, L_q)`：`key_padding_mask` 是 $(B, L_k)$ 的 bool 张量，True 表示填充。返回 `nn.MultiheadAttention` 可作为 `attn_mask` 接收的 bool 掩码 $(B \cdot H, L_q, L_k)$，True 表示查询不得关注该键；第 $b$ 个样本的每个头、每个查询都遮住第 $b$ 个样本的填充，槽位顺序与 PyTorch 一致。检查会测试全部是填充的样本、只有一个头、只有一个查询、$L_q < L_k$、$L_q > L_k$ 以及在左侧填充的情形。不要改动 `key_padding_mask`：原地修改它（比如用 `logical_not_()` 把它取反）的函数通不过检查。

# %% tags=["exercise"] exercise="04.attn_mask"
def my_attn_mask(key_padding_mask, num_heads, L_q):
    # lang: en
    """nn.MultiheadAttention's 3-D bool attn_mask from a key padding mask.

    key_padding_mask: (B, L_k) bool, True at padding. num_heads: H. L_q: the number of queries.
    Returns a (B·H, L_q, L_k) bool tensor, True where a query must not attend; slot b·H + h
    (head h of item b) hides item b's padding.
    """
    # lang: zh
    """由键填充掩码得到 nn.MultiheadAttention 的 3 维 bool attn_mask。

    key_padding_mask：(B, L_k) 的 bool 张量，True 表示填充。num_heads：H。L_q：查询的个数。
    返回 (B·H, L_q, L_k) 的 bool 张量，True 表示查询不得关注该键；槽位 b·H + h
    （第 b 个样本的第 h 个头）遮住第 b 个样本的填充。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, L_k = key_padding_mask.shape
    mask = key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k)  # (B, H, L_q, L_k)
    # lang: en
    return mask.reshape(B * num_heads, L_q, L_k)  # slot b·H + h
    # lang: zh
    return mask.reshape(B * num_heads, L_q, L_k)  # 槽位 b·H + h
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
check("04.attn_mask", my_attn_mask)

# %% [markdown] tags=["lang-en"]
# ### Dropout on the attention weights
#
# `nn.MultiheadAttention(..., dropout=p)` drops attention *weights*: after the softmax, each
# weight is zeroed with probability $p$ and the others are divided by $1 - p$, before they
# multiply the values. Nothing else is dropped (not the output projection). It acts only in
# training mode, so the same input gives a different output on every call there, and the
# weights it returns are the dropped ones, whose rows no longer sum to 1. In eval mode it is
# off. (The course's layers have no dropout: they are only for looking at attention.)

# %% [markdown] tags=["lang-zh"] en_hash="9623dfbf4e"
# ### 注意力权重上的 dropout
#
# `nn.MultiheadAttention(..., dropout=p)` 丢弃的是注意力*权重*：softmax 之后，每个权重以概率 $p$ 被置零，其余的除以 $1 - p$，然后再去乘值。别的东西都不丢弃（输出投影也不）。它只在训练模式下起作用，所以在训练模式下同一个输入每次调用都会得到不同的输出，而它返回的权重是丢弃之后的，各行之和不再是 1。在 eval 模式下它是关闭的。（本课程的层没有 dropout：它们只用来观察注意力。）

# %%
torch.manual_seed(4)
mha_dropout = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
# lang: en
ours_no_dropout = FusedMultiheadAttention.from_torch(mha_dropout)  # the same weights, no dropout
# lang: zh
ours_no_dropout = FusedMultiheadAttention.from_torch(mha_dropout)  # 相同的权重，没有 dropout
# lang: end
mha_dropout.train()
out_a, w_a = mha_dropout(x3, x3, x3, average_attn_weights=False)
out_b, _ = mha_dropout(x3, x3, x3, average_attn_weights=False)
mha_dropout.eval()
out_c, w_c = mha_dropout(x3, x3, x3, average_attn_weights=False)
ones = torch.ones(B3, H3, L3)
# lang: en
claim("training mode: two calls on the same input give different outputs", not torch.allclose(out_a, out_b))
claim("the returned weights are the dropped ones: some are exactly 0 and the rows no longer sum to 1",
      (w_a == 0).any() and not torch.allclose(w_a.sum(dim=-1), ones))
claim("eval mode: no dropout; the rows sum to 1 and the output is the layer's without dropout",
      torch.allclose(w_c.sum(dim=-1), ones) and torch.allclose(out_c, ours_no_dropout(x3, x3, x3)[0], atol=1e-6))
# lang: zh
claim("训练模式：同一个输入调用两次，输出不同", not torch.allclose(out_a, out_b))
claim("返回的权重是丢弃之后的：有些恰好为 0，各行之和也不再是 1",
      (w_a == 0).any() and not torch.allclose(w_a.sum(dim=-1), ones))
claim("eval 模式：没有 dropout；各行之和为 1，输出与不带 dropout 的层相同",
      torch.allclose(w_c.sum(dim=-1), ones) and torch.allclose(out_c, ours_no_dropout(x3, x3, x3)[0], atol=1e-6))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 7. Spot the bug: heads that see only their own slice
#
# Lesson 02 §5 took apart one bug of from-scratch tutorials that compute all heads in one batched
# call: Q, K and V laid out head-major, the mask batch-major. Here is another, from a from-scratch
# Transformer tutorial whose multi-head layer has been copied into many repositories. Its
# projections are `nn.Linear(head_dim, head_dim)`, and it applies them *after* cutting the input
# into heads. The cell below re-creates the layer in a few lines of our own code, with the same
# structure and the same two defects. Read it first.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b00e2026b5"
# ## 7. 找 bug：只看得到自己那一片的头
#
# 第 02 课第 5 节剖析过从零实现 Transformer 的教程在一次批量调用里算完所有头时的一个 bug：Q、K、V 按头优先排列，掩码却按批量优先排列。这里是另一个，出自一篇从零实现 Transformer 的教程，它的多头注意力层被复制进了许多代码仓库。它的投影是 `nn.Linear(head_dim, head_dim)`，而且是在把输入切成多个头*之后*才做投影。下面的单元用几行我们自己的代码重现了这个层，结构相同，两个缺陷也相同。先读一读。

# %%
class SlicedMultiHead(nn.Module):
    # lang: en
    """Multi-head self-attention that cuts its input into heads, then projects every slice."""
    # lang: zh
    """先把输入切成多个头、再逐片投影的多头自注意力。"""
    # lang: end

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        d = self.head_dim
        self.w_q, self.w_k, self.w_v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.fc_out = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):  # x: (B, L, E)
        B, L, E = x.shape
        H, d = self.num_heads, self.head_dim
        pieces = x.view(B, L, H, d)  # (B, L, H, d)
        q, k, v = self.w_q(pieces), self.w_k(pieces), self.w_v(pieces)  # 3 × (B, L, H, d)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k)  # (B, H, L, L)
        weights = torch.softmax(scores / math.sqrt(E), dim=-1)
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, L, E)  # (B, L, H·d)
        return self.fc_out(out), weights

# %% [markdown] tags=["lang-en"]
# **Your turn.** Take $E = 8$ and two heads of $d = 4$. How many parameters does the layer have,
# next to `FusedMultiheadAttention(8, 2)`? Which features of the input can head 0's weights depend
# on? What happens to the heads when the two halves of the input are swapped? And what are the
# scores divided by?

# %% [markdown] tags=["lang-zh"] en_hash="4d9a4dc5a0"
# **轮到你了。** 取 $E = 8$，两个头，每个头 $d = 4$。这个层有多少个参数？`FusedMultiheadAttention(8, 2)` 又有多少？第 0 个头的权重取决于输入的哪些特征？把输入的前后两半对调，各个头会怎样？分数又除以了什么？

# %%
torch.manual_seed(5)
sliced = SlicedMultiHead(8, 2)
x_sliced = torch.randn(2, 5, 8, generator=g)  # (B, L, E)
other_half = x_sliced.clone()
# lang: en
# features 4 … 7 changed, 0 … 3 kept; then the two halves swapped
# lang: zh
# 改动特征 4 … 7，保留 0 … 3；再把前后两半对调
# lang: end
other_half[..., 4:] = torch.randn(2, 5, 4, generator=g)
swapped = torch.cat([x_sliced[..., 4:], x_sliced[..., :4]], dim=-1)
with torch.no_grad():
    _, w_sliced = sliced(x_sliced)  # (B, H, L, L)
    _, w_other = sliced(other_half)
    _, w_swapped = sliced(swapped)
ours_count, fused_count = parameter_count(sliced), parameter_count(FusedMultiheadAttention(8, 2))
# lang: en
claim(f"it has {ours_count} parameters (3·d² + E² + E), FusedMultiheadAttention(8, 2) has {fused_count} (4E² + 4E)",
      ours_count == 3 * 4**2 + 8**2 + 8 and fused_count == 4 * 8**2 + 4 * 8)
claim("head 0's weights stay the same when features 4 … 7 of the input change, head 1's do not",
      torch.allclose(w_other[:, 0], w_sliced[:, 0], atol=1e-6) and not torch.allclose(w_other[:, 1], w_sliced[:, 1]))
claim("swap the two halves of the input, and the two heads swap their weights",
      torch.allclose(w_swapped[:, 0], w_sliced[:, 1], atol=1e-6) and torch.allclose(w_swapped[:, 1], w_sliced[:, 0], atol=1e-6))
# lang: zh
claim(f"它有 {ours_count} 个参数（3·d² + E² + E），FusedMultiheadAttention(8, 2) 有 {fused_count} 个（4E² + 4E）",
      ours_count == 3 * 4**2 + 8**2 + 8 and fused_count == 4 * 8**2 + 4 * 8)
claim("输入的特征 4 … 7 改变时，第 0 个头的权重保持不变，第 1 个头的权重却变了",
      torch.allclose(w_other[:, 0], w_sliced[:, 0], atol=1e-6) and not torch.allclose(w_other[:, 1], w_sliced[:, 1]))
claim("把输入的前后两半对调，两个头的权重也随之对调",
      torch.allclose(w_swapped[:, 0], w_sliced[:, 1], atol=1e-6) and torch.allclose(w_swapped[:, 1], w_sliced[:, 0], atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# **Two defects.** First, the projections come too late. Cutting the input into $H$ slices of $d$
# features *before* projecting gives head $h$ only features $h d \dots (h+1) d - 1$ of the input,
# and one `nn.Linear(d, d)` serves every head: the heads share $3 d^2$ weights, where the formula
# gives each head its own $W_Q^h$, $W_K^h$, $W_V^h$ of $E \times d$, and no head can ever read a
# feature outside its slice. Second, the scores are divided by $\sqrt E$, not by $\sqrt d$, the size
# of the vectors each head compares.
#
# The layer runs and nothing fails: what is wrong is what it can compute, and that is all this
# section shows (how much it costs on a task is not measured here). It *is* a
# `FusedMultiheadAttention` whose $W_Q$, $W_K$ and $W_V$ are block-diagonal, the same
# $(d, d)$ block repeated $H$ times, without biases, and whose queries are scaled by a further
# $\sqrt{d / E} = 1 / \sqrt H$. The fix projects first and splits afterwards: one `nn.Linear(E, E)`
# each for Q, K and V, a reshape to $(B, H, L, d)$, and $\sqrt d$. That is `FusedMultiheadAttention`.
# The special case, checked:

# %% [markdown] tags=["lang-zh"] en_hash="a5f14cbea4"
# **两个缺陷。** 第一，投影来得太晚。先把输入切成 $H$ 片、每片 $d$ 个特征，*再*做投影，第 $h$ 个头就只能拿到输入的第 $h d \dots (h+1) d - 1$ 个特征，而且同一个 `nn.Linear(d, d)` 供所有头共用：所有头共享 $3 d^2$ 个权重，而按公式，每个头都有自己的 $W_Q^h$、$W_K^h$、$W_V^h$，形状都是 $E \times d$；没有哪个头能读到自己那一片以外的特征。第二，分数除以的是 $\sqrt E$，而不是每个头所比较的向量的大小 $\sqrt d$。
#
# 这个层能运行，也不报错：错在它能算的东西，本节展示的也只是这一点（它在具体任务上会差多少，这里没有测量）。它**就是**一个 `FusedMultiheadAttention`：其 $W_Q$、$W_K$、$W_V$ 是块对角（block-diagonal）矩阵（同一个 $(d, d)$ 块重复 $H$ 次），没有偏置，查询还要再乘以 $\sqrt{d / E} = 1 / \sqrt H$。修复方法是先投影、后拆分：Q、K、V 各用一个 `nn.Linear(E, E)`，再 reshape 成 $(B, H, L, d)$，并除以 $\sqrt d$。这正是 `FusedMultiheadAttention`。验证这个特例：

# %%
H_s, d_s = 2, 4
as_fused = FusedMultiheadAttention(8, H_s)
with torch.no_grad():
    for ours_proj, theirs_proj, scale in ((as_fused.q_proj, sliced.w_q, math.sqrt(d_s / 8)),
                                          (as_fused.k_proj, sliced.w_k, 1.0), (as_fused.v_proj, sliced.w_v, 1.0)):
        # lang: en
        # (E, E): the (d, d) block H times along the diagonal
        # lang: zh
        # (E, E)：(d, d) 块沿对角线重复 H 次
        # lang: end
        ours_proj.weight.copy_(torch.block_diag(*[theirs_proj.weight] * H_s) * scale)
        ours_proj.bias.zero_()
    as_fused.out_proj.load_state_dict(sliced.fc_out.state_dict())
    expected_sliced, _ = sliced(x_sliced)
    got_fused, _ = as_fused(x_sliced, x_sliced, x_sliced)
# lang: en
claim("the tutorial's layer equals FusedMultiheadAttention with block-diagonal W_Q, W_K, W_V, no biases, "
      "and the queries scaled by √(d/E)", torch.allclose(got_fused, expected_sliced, atol=1e-6))
# lang: zh
claim("这篇教程的层等于这样一个 FusedMultiheadAttention：W_Q、W_K、W_V 块对角，没有偏置，"
      "查询再乘以 √(d/E)", torch.allclose(got_fused, expected_sliced, atol=1e-6))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. What it costs
#
# Both layers do the same arithmetic; they differ in how they hand it to PyTorch:
#
# - the **naive** layer runs, for every head, three small projections (each produces $d$
#   features), one attention call and a few bookkeeping operators, from a Python loop;
# - the **fused** layer runs three projections that produce all $E$ features at once, one
#   attention call for all heads, two reshapes;
# - `nn.MultiheadAttention` is fused too (here in eval mode under `torch.inference_mode()`, with
#   `need_weights=False`, so it takes its fast path when $H$ is even);
# - **fused + F.sdpa** is the fused layer with `need_weights=False`: one
#   `F.scaled_dot_product_attention` call, whose flash kernel never forms the $(B, H, L_q, L_k)$
#   weights (shown further down).
#
# The timings below are this runtime's CPU (a batch of 2 sequences unless said otherwise;
# milliseconds per call, the median of 3); they change from run to run and from machine to machine,
# and a GPU's come after them, then what stays the same everywhere.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="efd8788a67"
# ## 8. 代价
#
# 两个层做的算术完全相同，区别在于它们怎样把这些算术交给 PyTorch：
#
# - **朴素版**在 Python 循环里为每个头执行三个小投影（每个只产生 $d$ 个特征）、一次注意力调用和几个做簿记的算子；
# - **融合版**执行三个一次产生全部 $E$ 个特征的投影、一次覆盖所有头的注意力调用、两次 reshape；
# - `nn.MultiheadAttention` 也是融合的（这里处于 eval 模式，在 `torch.inference_mode()` 下调用，`need_weights=False`，所以 $H$ 为偶数时走它的快速路径）；
# - **融合版 + F.sdpa** 是 `need_weights=False` 的融合版：一次 `F.scaled_dot_product_attention` 调用，它的 flash 核函数（flash kernel）从不构造 $(B, H, L_q, L_k)$ 的权重（后面会展示）。
#
# 下面的耗时是在当前运行环境的 CPU 上测的（除非另有说明，批量为 2 条序列；单位是每次调用的毫秒数，取 3 次的中位数）；它们每次运行都不一样，也因机器而异。GPU 上的耗时跟在后面，再后面是在哪里都不变的东西。

# %% tags=["nbval-ignore-output"]
def timings(batch, length, embed, heads, device="cpu"):
    # lang: en
    """Milliseconds per call of the four versions, on one random (batch, length, embed) input on `device`."""
    # lang: zh
    """四个版本每次调用的毫秒数，输入是 `device` 上一个随机的 (batch, length, embed) 张量。"""
    # lang: end
    torch.manual_seed(0)
    naive_layer = NaiveMultiheadAttention(embed, heads).eval()
    fused_layer = FusedMultiheadAttention(embed, heads).eval().copy_weights_from(naive_layer)
    torch_layer = fused_layer.to_torch().eval()
    naive_layer, fused_layer, torch_layer = (layer.to(device) for layer in (naive_layer, fused_layer, torch_layer))
    inputs = torch.randn(batch, length, embed).to(device)
    calls = {
        "l04.plot.naive": lambda: naive_layer(inputs, inputs, inputs),
        "l04.plot.fused": lambda: fused_layer(inputs, inputs, inputs),
        "l04.plot.torch": lambda: torch_layer(inputs, inputs, inputs, need_weights=False),
        "l04.plot.sdpa": lambda: fused_layer(inputs, inputs, inputs, need_weights=False),
    }
    with torch.inference_mode():
        # lang: en
        # measured.milliseconds waits for a GPU to finish each call before it stops the clock
        # lang: zh
        # measured.milliseconds 在 GPU 上会等每次调用真正算完才停表
        # lang: end
        return {message(name): measured.milliseconds(call, device, repeat=3) for name, call in calls.items()}


def sweep(values, make, device="cpu"):
    found = [timings(*make(value), device) for value in values]
    return {name: [row[name] for row in found] for name in found[0]}


head_counts, widths, lengths = (1, 4, 16, 64), (64, 128, 256, 512), (64, 128, 256, 512)
by_heads = sweep(head_counts, lambda h: (2, 64, 256, h))  # E = 256, L = 64
by_width = sweep(widths, lambda e: (2, 64, e, 8))  # H = 8, L = 64
by_length = sweep(lengths, lambda length: (1, length, 128, 8))  # B = 1, E = 128, H = 8

fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), layout="constrained")
cost_lines(axes[0], head_counts, by_heads, message("l04.plot.heads_axis"), message("l04.plot.time"))
cost_lines(axes[1], widths, by_width, message("l04.plot.width_axis"), message("l04.plot.time"))
cost_lines(axes[2], lengths, by_length, message("l04.plot.length_axis"), message("l04.plot.time"))
for ax in axes[1:]:
    # lang: en
    ax.get_legend().remove()  # the first panel's legend names the lines of all three
    # lang: zh
    ax.get_legend().remove()  # 第一幅图的图例也适用于另外两幅
    # lang: end
plt.show()
# lang: en
print("milliseconds per call, E = 256, L = 64")
# lang: zh
print("每次调用的毫秒数，E = 256，L = 64")
# lang: end
def by_heads_table(by_heads):
    print("".join(f"{f'H={h}':>8}" for h in head_counts))
    for name, values in by_heads.items():
        print("".join(f"{ms:8.2f}" for ms in values), "  ", name)


by_heads_table(by_heads)

# %% [markdown] tags=["lang-en"]
# Where the naive loop loses: many small heads. Each head is a handful of operators on tiny
# matrices, and each operator has a fixed cost (Python, dispatch, a kernel launch) that does not
# shrink with $d$; at $H = 64$ the loop pays it hundreds of times for products of $d = 4$
# columns, while the fused layer pays it a dozen times for full-width products. Where it does
# not lose much: few, wide heads on long sequences, where the time goes into the matrix products
# and the $L_q \times L_k$ scores, which are the same arithmetic either way.
#
# On a GPU the same holds, more so. The arithmetic of these sizes costs a GPU almost nothing, and
# what is left is the fixed cost of each operator, a kernel launch of a few microseconds: the
# fused layer's dozen launches take about the same time at every $H$, the naive loop's grow with
# $H$. On an H200 (the course's benchmark, the table after the next cell), at $H = 64$ the loop
# took about 30 times as long as the fused layer (16 ms against 0.5 ms), where a CPU's loop takes a
# few times as long; `nn.MultiheadAttention` and the fused layer with F.sdpa stay near 0.3 ms. If
# this runtime has a GPU, the next cell times the four versions there.

# %% [markdown] tags=["lang-zh"] en_hash="a54cb33ed5"
# 朴素循环吃亏的地方：很多个小头。每个头都是在很小的矩阵上执行的少数几个算子，而每个算子都有固定的开销（Python、分派、启动核函数），这部分开销不会随 $d$ 变小；$H = 64$ 时，循环要为只有 $d = 4$ 列的乘积付出几百次这样的开销，而融合版只为全宽度的乘积付十几次。它吃亏不多的地方：头少而宽、序列又长时，时间主要花在矩阵乘法和 $L_q \times L_k$ 的分数上，而这两种写法的算术量完全相同。
#
# 在 GPU 上也是这样，而且更明显。这种规模的算术对 GPU 来说几乎不花时间，剩下的就是每个算子的固定开销，也就是一次几微秒的核函数启动：融合版的十几次启动在任何 $H$ 下耗时都差不多，朴素循环的启动次数却随 $H$ 增长。在一块 H200 上（课程的基准测试，见下一个单元之后的表），$H = 64$ 时循环的耗时约为融合版的 30 倍（16 毫秒对 0.5 毫秒），而在 CPU 上循环只慢几倍；`nn.MultiheadAttention` 和用 F.sdpa 的融合版都在 0.3 毫秒左右。如果当前运行环境有 GPU，下一个单元会在 GPU 上给这四个版本计时。

# %% tags=["nbval-ignore-output"]
def gpu_timings(device):
    # lang: en
    # the sizes of the CPU's table above: B = 2, E = 256, L = 64
    # lang: zh
    # 与上面 CPU 那张表的规模相同：B = 2，E = 256，L = 64
    # lang: end
    by_heads_table(sweep(head_counts, lambda h: (2, 64, 256, h), device))


measured.on_gpu(gpu_timings)

# %%
# lang: en
print("milliseconds per call on a GPU, B = 2, E = 256, L = 64 (the sizes of the table above)")
# lang: zh
print("GPU 上每次调用的毫秒数，B = 2，E = 256，L = 64（与上面那张表的规模相同）")
# lang: end
measured.table("multihead", {
    "H": lambda row: row["H"],
    message("l04.plot.naive"): lambda row: row["naive_ms"],
    message("l04.plot.fused"): lambda row: row["fused_ms"],
    message("l04.plot.torch"): lambda row: row["torch_ms"],
    message("l04.plot.sdpa"): lambda row: row["sdpa_ms"],
}, part="lesson")

# %% [markdown] tags=["lang-en"]
# What does not change from machine to machine, a CPU or a GPU: the number of operators each layer
# runs.

# %% [markdown] tags=["lang-zh"] en_hash="74db6e2006"
# 不随机器变化的（无论是 CPU 还是 GPU），是每个层执行的算子个数：

# %%
x_small = torch.randn(2, 16, 64, generator=g)
operator_counts = {}
for heads in (1, 4, 16, 64):
    naive_layer, fused_layer = NaiveMultiheadAttention(64, heads), FusedMultiheadAttention(64, heads)
    with torch.inference_mode():
        operator_counts[heads] = (len(operators(lambda: naive_layer(x_small, x_small, x_small))[1]),
                                  len(operators(lambda: fused_layer(x_small, x_small, x_small))[1]))
# lang: en
print({f"H={heads}": counts for heads, counts in operator_counts.items()})  # (naive, fused)
# lang: zh
print({f"H={heads}": counts for heads, counts in operator_counts.items()})  # （朴素版，融合版）
# lang: end
# lang: en
claim("the fused layer runs the same number of operators whatever H is", len({c[1] for c in operator_counts.values()}) == 1)
claim("the naive layer's count grows with H: at H = 64 it runs more than 20 times as many",
      operator_counts[64][0] > 20 * operator_counts[64][1])
# lang: zh
claim("无论 H 是多少，融合版执行的算子个数都相同", len({c[1] for c in operator_counts.values()}) == 1)
claim("朴素版的算子个数随 H 增长：H = 64 时超过融合版的 20 倍", operator_counts[64][0] > 20 * operator_counts[64][1])
# lang: end

# %% [markdown] tags=["lang-en"]
# ### The memory of returning the weights
#
# A layer that returns its weights must store $B \cdot H \cdot L_q \cdot L_k$ numbers, which grows
# with the square of the length, while its queries, keys, values and output grow linearly. With
# $B = 8$, $E = 512$, $H = 8$ in float32 (4 bytes a number):

# %% [markdown] tags=["lang-zh"] en_hash="35cb80d0da"
# ### 返回权重的内存代价
#
# 一个返回权重的层必须存下 $B \cdot H \cdot L_q \cdot L_k$ 个数，它随长度的平方增长；而查询、键、值和输出只随长度线性增长。取 $B = 8$、$E = 512$、$H = 8$，float32（每个数 4 字节）：

# %%
B_mem, E_mem, H_mem = 8, 512, 8
memory_lengths = (256, 512, 1024, 2048, 4096)
weights_mb = [B_mem * H_mem * n * n * 4 / 2**20 for n in memory_lengths]
activations_mb = [4 * B_mem * n * E_mem * 4 / 2**20 for n in memory_lengths]
fig, ax = plt.subplots(figsize=(6, 3.4), layout="constrained")
cost_lines(ax, memory_lengths, {message("l04.plot.weights_memory"): weights_mb,
                                message("l04.plot.activations_memory"): activations_mb},
           message("l04.plot.length_axis"), message("l04.plot.memory"), title=message("l04.plot.memory_title"))
plt.show()

small_layer = FusedMultiheadAttention(64, 8)
x_memory = torch.randn(2, 128, 64, generator=g)  # (B, L, E)
q_memory = torch.randn(2, 8, 128, 8, generator=g)  # (B, H, L, d)
every_weight = 2 * 8 * 128 * 128  # B·H·L²
flash = "aten._scaled_dot_product_flash_attention_for_cpu.default"
with torch.no_grad():
    _, stored = small_layer(x_memory, x_memory, x_memory)
    # lang: en
    # watched: [(operator, the number of elements of its largest result)]
    # lang: zh
    # watched：[(算子, 它最大的结果有多少个元素)]
    # lang: end
    (_, not_stored), watched = operators(lambda: small_layer(x_memory, x_memory, x_memory, need_weights=False),
                                         sizes=True)
    _, with_dropout = operators(lambda: F.scaled_dot_product_attention(q_memory, q_memory, q_memory, dropout_p=0.1),
                                sizes=True)
# lang: en
claim("at L = 4096 the weights alone take 4 GiB, more than a 2 GB Binder machine has", weights_mb[-1] == 4 * 1024)
claim("the returned weights take B·H·L²·4 bytes (2·8·128²·4 = 1 MiB here)",
      stored.numel() * stored.element_size() == 2 * 8 * 128 * 128 * 4)
claim("with need_weights=False no weights come back", not_stored is None)
claim("F.sdpa ran its flash kernel, and no operator of the call made a tensor of B·H·L² numbers",
      flash in dict(watched) and max(size for _, size in watched) < every_weight)
claim("with dropout, F.sdpa takes its math fallback, which does form all B·H·L² weights",
      flash not in dict(with_dropout) and max(size for _, size in with_dropout) >= every_weight)
# lang: zh
claim("L = 4096 时，光是权重就要 4 GiB，超过了 2 GB 的 Binder 机器的全部内存", weights_mb[-1] == 4 * 1024)
claim("返回的权重占 B·H·L²·4 字节（这里是 2·8·128²·4 = 1 MiB）",
      stored.numel() * stored.element_size() == 2 * 8 * 128 * 128 * 4)
claim("need_weights=False 时不返回权重", not_stored is None)
claim("F.sdpa 走的是它的 flash 核函数，这次调用中没有哪个算子构造出含 B·H·L² 个数的张量",
      flash in dict(watched) and max(size for _, size in watched) < every_weight)
claim("带 dropout 时，F.sdpa 改走它的 math 回退路径，而这条路径确实会构造出全部 B·H·L² 个权重",
      flash not in dict(with_dropout) and max(size for _, size in with_dropout) >= every_weight)
# lang: end

# %% [markdown] tags=["lang-en"]
# That is why fast attention kernels (the flash kernels of `F.scaled_dot_product_attention`,
# FlashAttention on GPUs) never form the weights: they compute each query's softmax in blocks and
# keep only the output, plus one number per query for the backward pass. Ask a layer for its
# weights when you want to look at them, as this lesson does, not in training runs.

# %% [markdown] tags=["lang-zh"] en_hash="f774e5a945"
# 这就是快速注意力核函数（`F.scaled_dot_product_attention` 的 flash 核函数、GPU 上的 FlashAttention）从不构造权重矩阵的原因：它们分块计算每个查询的 softmax，只保留输出，外加每个查询一个供反向传播使用的数。只在想看权重的时候（比如本课）才让层返回权重，训练时不要这样做。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 9. Explore the heads
#
# Move the slider to pick one of 50 held-out examples of the neighbours task, and pick a head of
# the two-head model of section 1. The map's rows and columns are labelled with the letters of
# the input; the text says which neighbour the head reads on this example and gives the model's
# answers.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c895ed7c6d"
# ## 9. 探索各个头
#
# 拖动滑块，从邻居任务的 50 个留出样例中选一个，再选第 1 节两头模型的一个头。注意力图的行和列都标注了输入的字母；下方文字说明这个头在该样例上读的是哪一侧的邻居，并给出模型的答案。

# %% tags=["nbval-ignore-output"]
heads_explorer(two.model)

# %% [markdown] tags=["lang-en"]
# The explorer draws with `heads_view`, an ordinary function. Here is its text for example 7 and
# the head that reads the left neighbour (which of the two heads that is depends on training):

# %% [markdown] tags=["lang-zh"] en_hash="2666f83874"
# 探索器用普通函数 `heads_view` 作图。下面是它对样例 7、读左邻的那个头给出的文字（两个头中哪一个读左邻，取决于训练）：

# %%
_, summary = heads_view(two.model, example=7, head=sides.index("left"))
print(summary)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Multi-head attention runs $H$ heads side by side, each attending in its own $d = E / H$
#   features; concatenating their outputs and applying $W_O$ is the sum
#   $\sum_h \mathrm{head}_h W_O^h$. Section 1: one head with a linear read-out answers only one
#   neighbour; two heads learn both, one head per side; one head with an MLP read-out learns both
#   too, from unequal weights. Heads add capacity; they are not strictly necessary.
# - The naive layer loops over $H$ modules; the fused layer stacks their projections into one and
#   attends for all heads in one batched call. Same parameters (also the same number, $4E^2 + 4E$,
#   for any $H$), same outputs, same gradients as each other and as `nn.MultiheadAttention`, whose
#   `in_proj_weight` packs Q, K and V, head 0's rows first. What $H$ changes is each head's view:
#   $W_Q^h {W_K^h}^\top$ has rank at most $d$.
# - `nn.MultiheadAttention`: `batch_first=False` by default (sequence first, like PyTorch's
#   recurrent layers); averaged weights unless `average_attn_weights=False`; a fast path under
#   narrow conditions (eval, no autograd, self-attention on one tensor, even $H$, bias, ...); NaN
#   for an item whose keys are all padding; a batch-major 3-D `attn_mask`; dropout on the weights,
#   in training mode only.
# - Two tutorial bugs: a loop that concatenates the heads' weights instead of their outputs (test
#   with $L_k \ne d$), and heads that each project only their own slice of the input, with one
#   shared $(d, d)$ weight and scores divided by $\sqrt E$. (Lesson 02 §5 has a third: a head-major
#   Q/K/V layout paired with a batch-major mask; test with $B > 1$.)
# - The naive loop costs operators per head (it loses with many small heads); returning the
#   weights costs $B H L^2$ numbers, which the flash kernel of `F.scaled_dot_product_attention`
#   never forms.
#
# Next: lesson 05, ProbSparse attention (Informer), which tries to attend with fewer than
# $L_q \times L_k$ scores.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="eb1bf93e3e"
# ## 小结
#
# - 多头注意力让 $H$ 个头并排工作，每个头在自己的 $d = E / H$ 个特征里做注意力；把它们的输出拼接起来再乘以 $W_O$，等于求和 $\sum_h \mathrm{head}_h W_O^h$。第 1 节：一个头加线性读出层只能答对一侧的邻居；两个头能学会两侧，每侧一个头；一个头加 MLP 读出层也能学会两侧，靠的是不相等的权重。多个头增加的是容量，并不是非有不可。
# - 朴素版在 $H$ 个模块上循环；融合版把它们的投影叠成一个，并用一次批量调用为所有头做注意力。两者参数相同（对任意 $H$，参数个数也都是 $4E^2 + 4E$），输出相同，梯度也相同，并且都与 `nn.MultiheadAttention` 一致；后者的 `in_proj_weight` 把 Q、K、V 打包在一起，每一部分中第 0 个头的行在最前。$H$ 改变的是每个头的视野：$W_Q^h {W_K^h}^\top$ 的秩至多为 $d$。
# - `nn.MultiheadAttention`：`batch_first` 默认为 False（序列在前，与 PyTorch 的循环层一样）；除非传入 `average_attn_weights=False`，否则返回的是平均后的权重；只在严格的条件下（eval、不求导、在同一个张量上做自注意力、头数为偶数、带偏置……）才走快速路径；所有键都是填充的样本得到 NaN；3 维 `attn_mask` 是批量优先的；dropout 作用在权重上，而且只在训练模式下生效。
# - 教程里的两个 bug：循环拼接的是各个头的权重而不是输出（测试时要让 $L_k \ne d$）；每个头只投影输入中属于自己的那一片，共用一个 $(d, d)$ 权重，分数还除以了 $\sqrt E$。（第 02 课第 5 节还有第三个：头优先的 Q/K/V 布局配上了批量优先的掩码；测试时要让 $B > 1$。）
# - 朴素循环的开销按头计算（头多而小时它吃亏）；返回权重要存下 $B H L^2$ 个数，而 `F.scaled_dot_product_attention` 的 flash 核函数从不构造它们。
#
# 下一课（第 05 课）：ProbSparse 注意力（Informer），它试图用少于 $L_q \times L_k$ 个分数来做注意力。
