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
# # ProbSparse attention
#
# Full attention scores every query against every key: $L_Q \times L_K$ scores in every head, so
# its time and memory grow with the square of the length. Informer (Zhou et al., 2021), a model
# for long time series, starts from an observation: most queries spread their weight almost
# evenly over the keys, and only a few have a peaked softmax row. Its **ProbSparse** attention
# gives full attention to those few queries only. It finds them cheaply, from a small random
# sample of keys per query, and gives every other query the mean of the values.
#
# In this lesson you will
#
# 1. see what full attention costs as the sequence grows;
# 2. tell **active** queries from **lazy** ones with the sparsity measure $M$ = max − mean of a
#    query's scores, and see how it relates to log-sum-exp;
# 3. estimate $M$ from $U = c \cdot \lceil \ln L_K \rceil$ sampled keys per query, with a
#    `torch.Generator`;
# 4. attend with the $u = c \cdot \lceil \ln L_Q \rceil$ queries of largest $M$ only, and give
#    the lazy ones the mean of the values;
# 5. make it causal, for a decoder, and check exactly what can and cannot see the future;
# 6. walk through the shape and the memory of every intermediate tensor, for the sizes the
#    Informer ProbSparse code prints and for any sizes you pick;
# 7. find the defects of the Informer ProbSparse code, code first;
# 8. measure when ProbSparse is accurate and when it is not;
# 9. measure its cost as $L$ grows, against PyTorch's own attention.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="7009f62c3e"
# # ProbSparse 注意力
#
# 完整的注意力要让每个查询与每个键打分：每个头都有 $L_Q \times L_K$ 个分数，所以它的时间和内存随长度的平方增长。Informer（Zhou 等，2021）是一个面向长时间序列的模型，它的出发点是一个观察：大多数查询把权重几乎平均地分给各个键，只有少数查询的 softmax 行有尖峰。它的 **ProbSparse** 注意力只给这少数查询做完整的注意力。它用一种廉价的办法找出这些查询（每个查询只看随机抽取的一小部分键），其余每个查询都直接得到值的平均。
#
# 本课你将：
#
# 1. 看到完整注意力的代价如何随序列变长而增长；
# 2. 用稀疏性度量 $M$（一个查询的分数的最大值减去平均值）区分**活跃查询**和**惰性查询**，并看到它与 log-sum-exp 的关系；
# 3. 用 `torch.Generator` 为每个查询采样 $U = c \cdot \lceil \ln L_K \rceil$ 个键，由此估计 $M$；
# 4. 只让 $M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询做注意力，惰性查询则得到值的平均；
# 5. 把它改成因果的，用于解码器，并弄清楚到底什么能看到未来、什么不能；
# 6. 逐步查看每个中间张量的形状和内存：既用 Informer ProbSparse 代码打印的那组尺寸，也用你自己选的任意尺寸；
# 7. 先读代码，找出 Informer ProbSparse 代码的缺陷；
# 8. 测量 ProbSparse 什么时候准确、什么时候不准确；
# 9. 测量它的代价随 $L$ 的增长，并与 PyTorch 自己的注意力对比。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import math
from functools import partial

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, setup
from course_utils.i18n import message
from course_utils.multihead import milliseconds
from course_utils.probsparse import (
    prob_sparse_attention,
    prob_sparse_attention_plain,
    sample_count,
    sample_keys,
    sampled_scores,
    sparsity_measure,
    walkthrough,
)
from course_utils.viz import chosen_weights, format_bytes, memory_order, weight_rows
from course_utils.widgets import walkthrough_explorer, walkthrough_table, walkthrough_view

setup(lang="en")
# lang: en
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights
# lang: zh
torch.set_printoptions(precision=2, sci_mode=False)  # 读权重，两位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. The problem: $L_Q \times L_K$ scores
#
# Self-attention over a sequence of $L$ positions scores every query against every key: in each
# head, $L^2$ dot products of $D$ numbers, a softmax over every row of $L$ scores, then $L^2$
# products with the values. Doubling the length quadruples the work. A layer that keeps its
# weights, $(B, H, L, L)$, also quadruples its memory, while the queries, keys and values,
# $(B, H, L, D)$ each, only double. For one sequence ($B = 1$) with $H = 8$ heads of $D = 64$
# features in float32 (4 bytes a number):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="66758e8515"
# ## 1. 问题所在：$L_Q \times L_K$ 个分数
#
# 在一个有 $L$ 个位置的序列上做自注意力，每个查询都要与每个键打分：每个头里有 $L^2$ 个由 $D$ 个数构成的点积，对每一行的 $L$ 个分数做一次 softmax，再与值做 $L^2$ 次乘积。长度翻倍，计算量就变成四倍。一个要保留权重 $(B, H, L, L)$ 的层，内存也变成四倍，而查询、键和值（形状都是 $(B, H, L, D)$）只变成两倍。取一条序列（$B = 1$）、$H = 8$ 个头、每个头 $D = 64$ 个特征，float32（每个数 4 字节）：

# %%
B1, H1, D1 = 1, 8, 64
lengths = (96, 512, 2048, 8192)
# lang: en
weights_bytes = [B1 * H1 * L * L * 4 for L in lengths]  # the (B, H, L, L) weights
qkv_bytes = [3 * B1 * H1 * L * D1 * 4 for L in lengths]  # Q, K and V, (B, H, L, D) each
# lang: zh
weights_bytes = [B1 * H1 * L * L * 4 for L in lengths]  # 权重 (B, H, L, L)
qkv_bytes = [3 * B1 * H1 * L * D1 * 4 for L in lengths]  # Q、K、V，各为 (B, H, L, D)
# lang: end
for L, w_bytes, x_bytes in zip(lengths, weights_bytes, qkv_bytes):
    # lang: en
    print(f"L = {L:5}: {L * L:>10,} scores per head, weights {format_bytes(w_bytes):>9}, Q, K and V {format_bytes(x_bytes):>8}")
    # lang: zh
    print(f"L = {L:5}：每个头 {L * L:>10,} 个分数，权重 {format_bytes(w_bytes):>9}，Q、K、V 共 {format_bytes(x_bytes):>8}")
    # lang: end

# lang: en
claim("at L = 8192 the weights of one call take 2.1 GB, more than a 2 GB Binder machine has",
      weights_bytes[-1] == 2_147_483_648)
claim("from L = 2048 to L = 8192 (4 times as long) the weights grow 16 times, Q, K and V 4 times",
      weights_bytes[-1] == 16 * weights_bytes[-2] and qkv_bytes[-1] == 4 * qkv_bytes[-2])
# lang: zh
claim("L = 8192 时，一次调用的权重就要 2.1 GB，超过了 2 GB 的 Binder 机器的全部内存",
      weights_bytes[-1] == 2_147_483_648)
claim("从 L = 2048 到 L = 8192（长度变为 4 倍），权重增长 16 倍，Q、K、V 只增长 4 倍",
      weights_bytes[-1] == 16 * weights_bytes[-2] and qkv_bytes[-1] == 4 * qkv_bytes[-2])
# lang: end

# %% [markdown] tags=["lang-en"]
# PyTorch's `F.scaled_dot_product_attention` never stores the weights (lesson 04, section 8), but
# it still computes all $L^2$ scores of every head. Its time per call for one sequence
# ($B = 1$, $H = 8$, $D = 64$), in milliseconds (the median of 2 runs); times vary from machine to machine, so the
# notebook check skips them:

# %% [markdown] tags=["lang-zh"] en_hash="a9b14fe2ae"
# PyTorch 的 `F.scaled_dot_product_attention` 从不存下权重（第 04 课第 8 节），但它仍然要算出每个头的全部 $L^2$ 个分数。下面是它对一条序列（$B = 1$，$H = 8$，$D = 64$）每次调用的耗时，单位为毫秒（取 2 次的中位数）；耗时因机器而异，所以笔记本检查会跳过它们：

# %% tags=["nbval-ignore-output"]
g = torch.Generator().manual_seed(0)
for L in (128, 256, 512, 1024):
    q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))  # (B, H, L, D)
    ms = milliseconds(partial(F.scaled_dot_product_attention, q, k, v), repeat=2)
    print(f"L = {L:5}: {ms:7.2f} ms")

# %% [markdown] tags=["lang-en"]
# What does not vary is the arithmetic: $2 \cdot B H L^2 D$ multiply-adds (the scores, then the
# weights times the values), four times as many for every doubling of $L$. Time series of
# thousands of steps, Informer's subject, are where this becomes the bottleneck. Section 9
# measures ProbSparse against it.

# %% [markdown] tags=["lang-zh"] en_hash="f6c4545014"
# 不随机器变化的是算术量：$2 \cdot B H L^2 D$ 次乘加（先算分数，再用权重乘值），$L$ 每翻一倍，它就变成四倍。Informer 处理的是长达数千步的时间序列，这时它就成了瓶颈。第 9 节会拿 ProbSparse 与它比较。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Active and lazy queries
#
# Query $i$ scores the keys, $s_{ij} = q_i \cdot k_j / \sqrt{D}$; its weights are
# $p_{ij} = \mathrm{softmax}_j(s_{ij})$ and its output is $o_i = \sum_j p_{ij} v_j$. Two extremes:
#
# - an **active** query has a peaked row: a few keys take almost all of its weight, and its
#   output is close to their values;
# - a **lazy** query has a flat row: every key gets about $1/L_K$, and its output is close to the
#   mean of the values, $\bar v = \frac{1}{L_K}\sum_j v_j$, whatever the query is.
#
# Informer's observation is that in trained models the queries' activity has a long tail: most
# queries are lazy, a few are active. For a lazy query, computing its $L_K$ scores is wasted work:
# $\bar v$ is computed once and serves them all.
#
# Four queries make the two extremes concrete. All four point along key 5, with lengths 0.5, 2, 5
# and 12 (random keys and values, $L_K = 32$, $D = 8$). The longer the query, the more its
# scores spread, and the more peaked its row:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2160e6cc90"
# ## 2. 活跃查询与惰性查询
#
# 查询 $i$ 给各个键打分：$s_{ij} = q_i \cdot k_j / \sqrt{D}$；它的权重是 $p_{ij} = \mathrm{softmax}_j(s_{ij})$，输出是 $o_i = \sum_j p_{ij} v_j$。有两种极端情形：
#
# - **活跃查询**的行有尖峰：少数几个键拿走了它几乎全部的权重，它的输出接近这几个键的值；
# - **惰性查询**的行是平的：每个键都分到大约 $1/L_K$，它的输出接近值的平均 $\bar v = \frac{1}{L_K}\sum_j v_j$，与查询本身是什么几乎无关。
#
# Informer 的观察是：在训练好的模型里，查询的活跃程度呈长尾分布，大多数查询是惰性的，只有少数是活跃的。对惰性查询来说，算出它的 $L_K$ 个分数是白费功夫：$\bar v$ 只需算一次，就能给所有惰性查询用。
#
# 用四个查询把这两种极端情形具体化。四个查询都指向键 5 的方向，长度分别为 0.5、2、5 和 12（键和值是随机的，$L_K = 32$，$D = 8$）。查询越长，它的分数就拉得越开，它的行也就越尖：

# %%
g2 = torch.Generator().manual_seed(0)
L_K, D = 32, 8
keys = torch.randn(L_K, D, generator=g2)  # (L_K, D)
values = torch.randn(L_K, 4, generator=g2)  # (L_K, D_v)
query_lengths = torch.tensor([0.5, 2.0, 5.0, 12.0])
# lang: en
queries = query_lengths[:, None] * keys[5] / keys[5].norm()  # (4, D): along key 5, lengths 0.5 … 12
# lang: zh
queries = query_lengths[:, None] * keys[5] / keys[5].norm()  # (4, D)：沿键 5 的方向，长度 0.5 … 12
# lang: end
scores = queries @ keys.T / math.sqrt(D)  # (4, L_K)
weights = scores.softmax(-1)  # (4, L_K)
outputs = weights @ values  # (4, D_v)
mean_value = values.mean(0)  # (D_v,)
# lang: en
claim(f"query 0 (length 0.5): its largest weight is {weights[0].max():.3f}, close to the uniform 1/32 = 0.031",
      weights[0].max() < 0.06)
claim("and its output is within 0.1 of mean(V) in every feature", (outputs[0] - mean_value).abs().max() < 0.1)
claim(f"query 3 (length 12): key 5 takes {weights[3, 5]:.3f} of its weight", weights[3, 5] > 0.99)
claim("and its output is within 0.02 of v_5 in every feature", (outputs[3] - values[5]).abs().max() < 0.02)
# lang: zh
claim(f"查询 0（长度 0.5）：它的最大权重是 {weights[0].max():.3f}，接近均匀权重 1/32 = 0.031",
      weights[0].max() < 0.06)
claim("它的输出的每个特征与 mean(V) 相差都不到 0.1", (outputs[0] - mean_value).abs().max() < 0.1)
claim(f"查询 3（长度 12）：键 5 拿走了它 {weights[3, 5]:.3f} 的权重", weights[3, 5] > 0.99)
claim("它的输出的每个特征与 v_5 相差都不到 0.02", (outputs[3] - values[5]).abs().max() < 0.02)
# lang: end

# %% [markdown] tags=["lang-en"]
# ### The sparsity measure $M$ = max − mean
#
# How far is a row from uniform? Informer's **sparsity measure** compares a query's largest score
# with its average one:
#
# $$M(q_i, K) = \max_j s_{ij} - \frac{1}{L_K}\sum_j s_{ij}.$$
#
# $M = 0$ exactly when all the scores are equal (a uniform row), and it grows with the gap between
# the top score and the rest. It comes from the Kullback–Leibler divergence of the row from the
# uniform distribution, which works out to log-sum-exp minus the mean:
#
# $$\mathrm{KL}(\mathrm{uniform} \,\|\, p_i) = \mathrm{LSE}_j(s_{ij}) - \frac{1}{L_K}\sum_j s_{ij} - \ln L_K,
# \qquad \mathrm{LSE}_j(s_{ij}) = \ln \sum_j e^{s_{ij}}.$$
#
# Log-sum-exp is a smooth maximum: $\max_j s_{ij} \le \mathrm{LSE}_j(s_{ij}) \le \max_j s_{ij} + \ln L_K$
# (the sum has $L_K$ terms, the largest of them $e^{\max}$). So $\mathrm{LSE} - \text{mean}$ and
# $M$ = max − mean differ by at most $\ln L_K$, and
#
# $$\mathrm{KL}(\mathrm{uniform} \,\|\, p_i) \;\le\; M(q_i, K) \;\le\; \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K .$$
#
# A small $M$ forces a small divergence: a row close to uniform, an output close to $\bar v$.
# Pinsker's inequality makes that precise: every feature of $o_i - \bar v$ is at most
# $\sqrt{2M}\,\max_j |v_j|$ in size. Checked on the four rows, and on 1000 random rows of scores
# (float64, spreads from 0.01 to 10):

# %% [markdown] tags=["lang-zh"] en_hash="8fc0e19103"
# ### 稀疏性度量 $M$ = 最大值 − 平均值
#
# 一行离均匀分布有多远？Informer 的**稀疏性度量**拿一个查询的最大分数与它的平均分数作比较：
#
# $$M(q_i, K) = \max_j s_{ij} - \frac{1}{L_K}\sum_j s_{ij}.$$
#
# 当且仅当所有分数都相等（均匀的行）时 $M = 0$；最大分数与其余分数拉得越开，$M$ 就越大。它来源于这一行相对均匀分布的 KL 散度，算出来正好是 log-sum-exp 减去平均值：
#
# $$\mathrm{KL}(\mathrm{uniform} \,\|\, p_i) = \mathrm{LSE}_j(s_{ij}) - \frac{1}{L_K}\sum_j s_{ij} - \ln L_K,
# \qquad \mathrm{LSE}_j(s_{ij}) = \ln \sum_j e^{s_{ij}}.$$
#
# log-sum-exp 是一个平滑的最大值：$\max_j s_{ij} \le \mathrm{LSE}_j(s_{ij}) \le \max_j s_{ij} + \ln L_K$（这个和有 $L_K$ 项，其中最大的一项是 $e^{\max}$）。所以 $\mathrm{LSE}$ − 平均值与 $M$ = 最大值 − 平均值最多相差 $\ln L_K$，并且
#
# $$\mathrm{KL}(\mathrm{uniform} \,\|\, p_i) \;\le\; M(q_i, K) \;\le\; \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K .$$
#
# $M$ 小，散度就一定小：这一行接近均匀，输出接近 $\bar v$。Pinsker 不等式把这一点说得很精确：$o_i - \bar v$ 的每个特征的绝对值都不超过 $\sqrt{2M}\,\max_j |v_j|$。下面在这四行上验证，也在 1000 行随机分数上验证（float64，分数的离散程度从 0.01 到 10）：

# %%
def lse_facts(scores):
    # lang: en
    """For rows of scores (R, L_K): max, LSE, mean, M and KL(uniform ‖ softmax row), each (R,)."""
    # lang: zh
    """对若干行分数 (R, L_K)：最大值、LSE、平均值、M 和 KL(uniform ‖ softmax 行)，形状都是 (R,)。"""
    # lang: end
    n = scores.shape[-1]
    top, lse, mean = scores.amax(-1), scores.logsumexp(-1), scores.mean(-1)
    kl = (-math.log(n) - scores.log_softmax(-1)).mean(-1)  # Σ_j (1/n) · ln((1/n) / p_j)
    return top, lse, mean, top - mean, kl


g_rows = torch.Generator().manual_seed(1)
spread = torch.logspace(-2, 1, 1000, dtype=torch.float64)[:, None]  # (1000, 1)
random_rows = spread * torch.randn(1000, L_K, generator=g_rows, dtype=torch.float64)  # (1000, L_K)
for rows in (scores.double(), random_rows):
    top, lse, mean, M, kl = lse_facts(rows)
    ln_n, slack = math.log(L_K), 1e-9
    facts = [
        bool(((top <= lse + slack) & (lse <= top + ln_n + slack)).all()),
        torch.allclose(kl, lse - mean - ln_n),
        bool(((kl <= M + slack) & (M <= kl + ln_n + slack)).all()),
    ]
    # lang: en
    claim(f"{len(rows)} rows: max ≤ LSE ≤ max + ln L_K; KL = LSE − mean − ln L_K; KL ≤ M ≤ KL + ln L_K", all(facts))
    # lang: zh
    claim(f"{len(rows)} 行：max ≤ LSE ≤ max + ln L_K；KL = LSE − 平均值 − ln L_K；KL ≤ M ≤ KL + ln L_K", all(facts))
    # lang: end

M_rows = lse_facts(scores)[3]
bound = (2 * M_rows).sqrt() * values.abs().max()  # (4,)
print("M =", M_rows)
# lang: en
claim("M grows with the query's length (it is proportional to it)", bool((M_rows.diff() > 0).all()))
claim("every feature of o_i − mean(V) is at most √(2M)·max|v| in size, for all four queries",
      bool(((outputs - mean_value).abs().amax(-1) <= bound).all()))
# lang: zh
claim("M 随查询的长度增大（与长度成正比）", bool((M_rows.diff() > 0).all()))
claim("对四个查询，o_i − mean(V) 的每个特征的绝对值都不超过 √(2M)·max|v|",
      bool(((outputs - mean_value).abs().amax(-1) <= bound).all()))
# lang: end

# %% [markdown] tags=["lang-en"]
# The four rows, each with its $M$ (the dashed line is the uniform weight $1/32$):

# %% [markdown] tags=["lang-zh"] en_hash="ae6f4a6684"
# 这四行各自的 $M$ 如下（虚线是均匀权重 $1/32$）：

# %%
fig, ax = plt.subplots(figsize=(6.5, 5.0), layout="constrained")
weight_rows(weights, M_rows, ax=ax, labels=[f"|q| = {t:g}" for t in query_lengths.tolist()])
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Estimating $M$ from a sample of keys
#
# Computing $M$ exactly needs all $L_K$ scores of the query: the very cost ProbSparse wants to
# avoid. It estimates $M$ instead from a sample: for each query, $U = c \cdot \lceil \ln L_K \rceil$
# key positions drawn at random (with replacement), where $c$ is the `factor` (5 by default),
# and the max and the mean are taken over those $U$ scores only. $U$ grows with the logarithm of
# the length (and never exceeds $L_K$):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="dc4709d827"
# ## 3. 用键的样本估计 $M$
#
# 精确计算 $M$ 需要这个查询的全部 $L_K$ 个分数，而这正是 ProbSparse 想要省掉的代价。所以它改用样本来估计 $M$：为每个查询随机抽取（有放回）$U = c \cdot \lceil \ln L_K \rceil$ 个键的位置，其中 $c$ 是 `factor`（默认为 5），最大值和平均值都只在这 $U$ 个分数上计算。$U$ 随长度的对数增长（并且不会超过 $L_K$）：

# %%
for L in (12, 96, 512, 2048, 8192, 16384):
    U = sample_count(L)
    # lang: en
    print(f"L_K = {L:5}: U = {U:2} sampled keys per query, {100 * U / L:5.1f} % of the row")
    # lang: zh
    print(f"L_K = {L:5}：每个查询采样 U = {U:2} 个键，占整行的 {100 * U / L:5.1f}%")
    # lang: end
# lang: en
claim("from L_K = 96 to 8192 the length grows 85 times, U only 2 times (25 to 50)",
      sample_count(96) == 25 and sample_count(8192) == 50)
# lang: zh
claim("从 L_K = 96 到 8192，长度增长 85 倍，U 只增长 2 倍（从 25 到 50）",
      sample_count(96) == 25 and sample_count(8192) == 50)
# lang: end

# %% [markdown] tags=["lang-en"]
# The course's `course_utils.probsparse` has one function per step:
#
# - `sample_keys(L_Q, L_K, U, generator=...)`: the sample, $(L_Q, U)$ int64; row $i$ holds the key
#   positions of query $i$. One sample serves every batch item and every head, as in the Informer
#   code.
# - `sampled_scores(query, key, index)`: $(B, H, L_Q, U)$, each query scored against its own $U$
#   keys only; the $(L_Q, L_K)$ matrix of scores is never formed.
# - `sparsity_measure(scores)`: max − mean over the last axis, $(B, H, L_Q)$.
#
# As in the Informer code, these scores are **unscaled**, $q_i \cdot k_j$ without the $1/\sqrt{D}$:
# the scale multiplies every query's $M$ by the same positive number, so it does not change which
# queries have the largest $M$. With $D = 64$ the scale is $1/8$, a power of two, and dividing by
# it is exact in floating point, so the check below can ask for bit-for-bit equality:

# %% [markdown] tags=["lang-zh"] en_hash="44a96396b7"
# 本课程的 `course_utils.probsparse` 为每一步提供一个函数：
#
# - `sample_keys(L_Q, L_K, U, generator=...)`：样本，形状为 $(L_Q, U)$ 的 int64 张量；第 $i$ 行是查询 $i$ 所抽到的键的位置。与 Informer 代码一样，批量中的每个样本、每个头都共用这一份键的样本。
# - `sampled_scores(query, key, index)`：形状为 $(B, H, L_Q, U)$，每个查询只与自己的 $U$ 个键打分；$(L_Q, L_K)$ 的分数矩阵从头到尾都不会出现。
# - `sparsity_measure(scores)`：在最后一维上取最大值减平均值，形状为 $(B, H, L_Q)$。
#
# 与 Informer 代码一样，这些分数是**未缩放**的，即 $q_i \cdot k_j$，不乘 $1/\sqrt{D}$：缩放让每个查询的 $M$ 都乘上同一个正数，所以不会改变哪些查询的 $M$ 最大。$D = 64$ 时缩放系数是 $1/8$，恰好是 2 的幂，在浮点数里除以它是精确的，所以下面的检查可以要求逐位相等：

# %%
B, H, L, D = 2, 4, 96, 64
g3 = torch.Generator().manual_seed(0)
query, key, value = (torch.randn(B, H, L, D, generator=g3) for _ in range(3))  # (B, H, L, D)
U = sample_count(L)
index = sample_keys(L, L, U, generator=torch.Generator().manual_seed(1))  # (L_Q, U)
sample_scores = sampled_scores(query, key, index)  # (B, H, L_Q, U)
M = sparsity_measure(sample_scores)  # (B, H, L_Q)
print("index:", tuple(index.shape), " scores:", tuple(sample_scores.shape), " M:", tuple(M.shape))
print("index[0] =", index[0].tolist())
# lang: en
every_score = query @ key.transpose(-2, -1)  # (B, H, L_Q, L_K): only to check, never needed
# lang: zh
every_score = query @ key.transpose(-2, -1)  # (B, H, L_Q, L_K)：只用来检查，算法本身并不需要
# lang: end
picked = every_score.gather(-1, index.expand(B, H, L, U))  # (B, H, L_Q, U)
M_scaled = sparsity_measure(sample_scores / math.sqrt(D))
# lang: en
claim("scores[b, h, i, s] is q_i · k_j for j = index[i, s], in every batch item and head",
      torch.allclose(sample_scores, picked, atol=1e-4))
claim("M computed from the scaled scores is exactly M / 8", torch.equal(M_scaled, M / 8))
claim(f"so the same {U} queries have the largest M in every (batch item, head)",
      torch.equal(M_scaled.topk(U).indices, M.topk(U).indices))
# lang: zh
claim("scores[b, h, i, s] 就是 q_i · k_j，其中 j = index[i, s]，对每个样本、每个头都成立",
      torch.allclose(sample_scores, picked, atol=1e-4))
claim("由缩放后的分数算出的 M 恰好等于 M / 8", torch.equal(M_scaled, M / 8))
claim(f"所以在每个（批量样本，头）里，M 最大的都是同样的 {U} 个查询",
      torch.equal(M_scaled.topk(U).indices, M.topk(U).indices))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Why a `torch.Generator`
#
# The sample is random. Drawn from a generator of its own, `torch.Generator().manual_seed(n)`, it
# is reproducible (the same generator state gives the same sample) and it leaves alone the global
# random state that every other random call of the notebook draws from (`torch.randn` without a
# generator, dropout, the initial weights of a new layer). Section 7 shows what goes wrong when a
# layer samples from the global state instead.

# %% [markdown] tags=["lang-zh"] en_hash="4ec5e611f9"
# ### 为什么用 `torch.Generator`
#
# 键的样本是随机的。从一个独立的随机数生成器 `torch.Generator().manual_seed(n)` 中抽取，它就可以复现（生成器状态相同，样本就相同），也不会动到全局随机状态，而笔记本里其他所有随机调用（不带生成器的 `torch.randn`、dropout、新建层的初始权重）都从全局随机状态中抽取。第 7 节会展示一个层改从全局状态中采样时会出什么问题。

# %%
global_state = torch.get_rng_state()
first = sample_keys(L, L, U, generator=torch.Generator().manual_seed(1))
again = sample_keys(L, L, U, generator=torch.Generator().manual_seed(1))
other = sample_keys(L, L, U, generator=torch.Generator().manual_seed(2))
# lang: en
claim("the same generator state gives the same sample (the one used above)", torch.equal(first, again) and torch.equal(first, index))
claim("another state gives another sample", not torch.equal(first, other))
claim("and the global random state is exactly as it was", torch.equal(torch.get_rng_state(), global_state))
# lang: zh
claim("生成器状态相同，样本就相同（也就是上面用的那一份）", torch.equal(first, again) and torch.equal(first, index))
claim("换一个状态，就得到另一份样本", not torch.equal(first, other))
claim("而全局随机状态与原来完全一样", torch.equal(torch.get_rng_state(), global_state))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: the sampled measure
#
# Write `sampled_measure(query, key, index)`. `query` is $(B, H, L_Q, D)$, `key` $(B, H, L_K, D)$,
# and `index` is $(L_Q, U)$ int64: row $i$ holds the $U$ key positions sampled for query $i$, the
# same for every batch item and head. Return $M$, $(B, H, L_Q)$ in query's dtype: for each query,
# the max minus the mean of its $U$ sampled **unscaled** scores $q_i \cdot k_{\mathrm{index}[i, s]}$.
# A position may appear twice in a row of `index` (the sample is drawn with replacement): it counts
# twice in the mean, which divides by $U$. Write the steps yourself: the check does not accept a
# call to `course_utils.probsparse`. A start: `key[:, :, index]` is $(B, H, L_Q, U, D)$, every
# query's own keys.

# %% [markdown] tags=["lang-zh"] en_hash="200f8a606d"
# ### 练习 1：用样本估计的度量
#
# 写出 `sampled_measure(query, key, index)`。`query` 的形状为 $(B, H, L_Q, D)$，`key` 为 $(B, H, L_K, D)$，`index` 是形状为 $(L_Q, U)$ 的 int64 张量：第 $i$ 行是为查询 $i$ 抽取的 $U$ 个键的位置，批量中的每个样本、每个头都相同。返回 $M$，形状为 $(B, H, L_Q)$，dtype 与 query 相同：对每个查询，取它的 $U$ 个**未缩放**的采样分数 $q_i \cdot k_{\mathrm{index}[i, s]}$ 的最大值减平均值。`index` 的同一行里可能出现同一个位置两次（样本是有放回抽取的）：在平均值里它也算两次，平均值除以的是 $U$。请自己写出每一步：检查不接受对 `course_utils.probsparse` 的调用。提示：`key[:, :, index]` 的形状是 $(B, H, L_Q, U, D)$，也就是每个查询自己的那些键。

# %% tags=["exercise"] exercise="05.sampled_measure"
def sampled_measure(query, key, index):
    # lang: en
    """The sparsity measure of every query, from its sampled keys only.

    query: (B, H, L_Q, D), key: (B, H, L_K, D), float32 or float64.
    index: (L_Q, U) int64; row i holds the U key positions sampled for query i (repeats
    allowed), one sample shared by every batch item and head.
    Returns M: (B, H, L_Q), query's dtype, with M[b, h, i] the max minus the mean of the U
    unscaled scores query[b, h, i] · key[b, h, index[i, s]], s = 0 … U − 1 (no 1/√D: a
    positive scale does not change which queries rank highest).
    """
    # lang: zh
    """只用采样到的键，算出每个查询的稀疏性度量。

    query：(B, H, L_Q, D)，key：(B, H, L_K, D)，float32 或 float64。
    index：(L_Q, U) 的 int64 张量；第 i 行是为查询 i 采样的 U 个键位置（可以重复），
    所有批量样本和所有头共用同一份采样。
    返回 M：(B, H, L_Q)，dtype 与 query 相同；M[b, h, i] 是 U 个未缩放分数
    query[b, h, i] · key[b, h, index[i, s]]（s = 0 … U − 1）的最大值减去平均值
    （不乘 1/√D：乘以一个正数不会改变哪些查询排在最前面）。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    K_sample = key[:, :, index]  # (B, H, L_Q, U, D): every query's own U keys
    scores = (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)  # (B, H, L_Q, U): (1, D) @ (D, U)
    # lang: zh
    K_sample = key[:, :, index]  # (B, H, L_Q, U, D)：每个查询自己的 U 个键
    scores = (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)  # (B, H, L_Q, U)：(1, D) @ (D, U)
    # lang: end
    return scores.amax(-1) - scores.mean(-1)
    ### END SOLUTION


# %%
check("05.sampled_measure", sampled_measure)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The top $u$ queries attend; the lazy ones get mean(V)
#
# With an estimate of $M$ for every query, ProbSparse keeps in each (batch item, head) the
# $u = c \cdot \lceil \ln L_Q \rceil$ queries with the largest $M$, the **chosen** queries, and
# gives them full, scaled attention over all the keys: $u \times L_K$ scores instead of
# $L_Q \times L_K$. Every other query is treated as lazy: its output is $\bar v$, the mean of the
# values, computed once per (batch item, head).
#
# ![ProbSparse attention](../../images/05_probsparse_en.svg)
#
# `prob_sparse_attention(query, key, value, factor=..., generator=...)` takes these steps and
# returns `(output, selected)`: the output, $(B, H, L_Q, D_v)$, and the positions of the chosen
# queries, $(B, H, u)$, in increasing order. With `need_weights=True` its second result is
# instead the $(B, H, L_Q, L_K)$ weights every query effectively used: a chosen query's softmax
# row, a lazy query's uniform row $1/L_K$. Here $L = 24$ and `factor=2`, so
# $U = u = 2 \cdot \lceil \ln 24 \rceil = 8$: 8 of the 24 queries are chosen in each head.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="dcf4d180bd"
# ## 4. 前 $u$ 个查询做注意力，惰性查询得到 mean(V)
#
# 有了每个查询的 $M$ 的估计值，ProbSparse 在每个（批量样本，头）里保留 $M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询，即**被选中的**查询，让它们在全部键上做完整的、带缩放的注意力：只需 $u \times L_K$ 个分数，而不是 $L_Q \times L_K$ 个。其余每个查询都当作惰性查询：它的输出是 $\bar v$，即值的平均，每个（批量样本，头）只算一次。
#
# ![ProbSparse 注意力](../../images/05_probsparse_zh.svg)
#
# `prob_sparse_attention(query, key, value, factor=..., generator=...)` 完成这些步骤，返回 `(output, selected)`：输出，形状为 $(B, H, L_Q, D_v)$；以及被选中查询的位置，形状为 $(B, H, u)$，按从小到大排列。传入 `need_weights=True` 时，第二个返回值换成每个查询实际使用的 $(B, H, L_Q, L_K)$ 权重：被选中查询的 softmax 行，惰性查询的均匀行 $1/L_K$。这里 $L = 24$，`factor=2`，所以 $U = u = 2 \cdot \lceil \ln 24 \rceil = 8$：每个头在 24 个查询中选出 8 个。

# %%
L4, D4 = 24, 8
g4 = torch.Generator().manual_seed(2)
q4, k4, v4 = (torch.randn(1, 2, L4, D4, generator=g4) for _ in range(3))  # (B, H, L, D)
output, selected = prob_sparse_attention(q4, k4, v4, factor=2, generator=torch.Generator().manual_seed(3))
_, weights4 = prob_sparse_attention(q4, k4, v4, factor=2, generator=torch.Generator().manual_seed(3),
                                    need_weights=True)  # (B, H, L, L)
print("selected =", selected)
lazy = torch.ones(1, 2, L4, dtype=torch.bool).scatter(-1, selected, False)  # (B, H, L_Q)
v_mean = v4.mean(-2, keepdim=True).expand_as(output)  # (B, H, L_Q, D_v)
# lang: en
claim("8 queries are chosen in each head, in increasing position",
      selected.shape == (1, 2, 8) and bool((selected.diff(dim=-1) > 0).all()))
claim("every lazy query's output is mean(V)", torch.allclose(output[lazy], v_mean[lazy]))
claim("a lazy query's row of weights is uniform, 1/24", torch.allclose(weights4[lazy], torch.full((1, L4), 1 / L4)))
claim("the weights times V give the output, row for row", torch.allclose(weights4 @ v4, output, atol=1e-6))
# lang: zh
claim("每个头选出 8 个查询，按位置从小到大排列",
      selected.shape == (1, 2, 8) and bool((selected.diff(dim=-1) > 0).all()))
claim("每个惰性查询的输出都是 mean(V)", torch.allclose(output[lazy], v_mean[lazy]))
claim("惰性查询的权重行是均匀的，都是 1/24", torch.allclose(weights4[lazy], torch.full((1, L4), 1 / L4)))
claim("权重乘以 V 逐行给出输出", torch.allclose(weights4 @ v4, output, atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# The weights of head 0. The chosen queries (marked ◂) have a softmax row of their own; every
# other row is the same flat $1/24$:

# %% [markdown] tags=["lang-zh"] en_hash="731384797d"
# 头 0 的权重。被选中的查询（标有 ◂）各有自己的 softmax 行；其余各行都是同样平坦的 $1/24$：

# %%
fig, ax = plt.subplots(figsize=(5.6, 4.8), layout="constrained")
chosen_weights(weights4[0, 0], selected[0, 0], ax=ax)
plt.show()

# %% [markdown] tags=["lang-en"]
# When $L_Q \le c \cdot \lceil \ln L_Q \rceil$, $u$ is every query: at $L = 12$ with the default
# factor 5, $u = \min(12, 5 \cdot 3) = 12$. Then no query is lazy, and ProbSparse must be exactly
# full attention. The tests compare values and gradients with `F.scaled_dot_product_attention`;
# here the values:

# %% [markdown] tags=["lang-zh"] en_hash="2da16346b5"
# 当 $L_Q \le c \cdot \lceil \ln L_Q \rceil$ 时，$u$ 就是全部查询：$L = 12$、默认因子 5 时，$u = \min(12, 5 \cdot 3) = 12$。这时没有惰性查询，ProbSparse 必须与完整的注意力完全一致。测试会把输出值和梯度都与 `F.scaled_dot_product_attention` 比较；这里只比较输出值：

# %%
q12, k12, v12 = (torch.randn(2, 3, 12, 8, generator=g4) for _ in range(3))  # (B, H, L, D)
full_output, every = prob_sparse_attention(q12, k12, v12, generator=torch.Generator().manual_seed(0))
# lang: en
claim("at L = 12 every query is chosen", torch.equal(every, torch.arange(12).expand(2, 3, 12)))
claim("and the output is F.scaled_dot_product_attention's",
      torch.allclose(full_output, F.scaled_dot_product_attention(q12, k12, v12), atol=1e-6))
# lang: zh
claim("L = 12 时，每个查询都被选中", torch.equal(every, torch.arange(12).expand(2, 3, 12)))
claim("输出与 F.scaled_dot_product_attention 的相同",
      torch.allclose(full_output, F.scaled_dot_product_attention(q12, k12, v12), atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: the top $u$ queries attend, the lazy ones average
#
# Write `top_u_attention(query, key, value, measure, u)`. `query` is $(B, H, L_Q, D)$, `key`
# $(B, H, L_K, D)$, `value` $(B, H, L_K, D_v)$; `measure` is $(B, H, L_Q)$, a measure of every
# query computed already, and `u` an int. In each (batch item, head), the `u` queries with the
# largest measure get $\mathrm{softmax}(q K^\top / \sqrt{D})\, V$; every other query gets the mean
# of all the values. Return $(B, H, L_Q, D_v)$ in query's dtype. The check also compares
# gradients. `value.mean(-2, keepdim=True).expand(...)` is a view whose rows share memory, so do
# not write rows into it: write into a `.clone()`, or build the result with `scatter`.

# %% [markdown] tags=["lang-zh"] en_hash="06b10573ed"
# ### 练习 2：前 $u$ 个查询做注意力，惰性查询取平均
#
# 写出 `top_u_attention(query, key, value, measure, u)`。`query` 的形状为 $(B, H, L_Q, D)$，`key` 为 $(B, H, L_K, D)$，`value` 为 $(B, H, L_K, D_v)$；`measure` 的形状为 $(B, H, L_Q)$，是已经算好的每个查询的度量；`u` 是一个整数。在每个（批量样本，头）里，度量最大的 `u` 个查询得到 $\mathrm{softmax}(q K^\top / \sqrt{D})\, V$；其余每个查询都得到全部值的平均。返回 $(B, H, L_Q, D_v)$，dtype 与 query 相同。检查还会比较梯度。`value.mean(-2, keepdim=True).expand(...)` 是一个视图，各行共用同一块内存，所以不要往里面写行：先 `.clone()` 再写，或者用 `scatter` 构造结果。

# %% tags=["exercise"] exercise="05.top_u_attention"
def top_u_attention(query, key, value, measure, u):
    # lang: en
    """Full attention for the u most active queries, the mean of the values for the lazy ones.

    query: (B, H, L_Q, D), key: (B, H, L_K, D), value: (B, H, L_K, D_v), float32 or float64.
    measure: (B, H, L_Q), the sparsity measure of every query (no two equal in a row);
    u: an int, 1 ≤ u ≤ L_Q. In each (batch item, head) the u queries with the largest measure
    get softmax(q · Kᵀ / √D) · V over all L_K keys; every other query gets the mean of all values.
    Returns (B, H, L_Q, D_v), query's dtype.
    """
    # lang: zh
    """度量最大的 u 个活跃查询做完整的注意力，惰性查询得到所有值的平均。

    query：(B, H, L_Q, D)，key：(B, H, L_K, D)，value：(B, H, L_K, D_v)，float32 或 float64。
    measure：(B, H, L_Q)，每个查询的稀疏性度量（同一行中没有相等的值）；
    u：整数，1 ≤ u ≤ L_Q。在每个（批量样本，头）中，度量最大的 u 个查询在全部 L_K 个键上
    计算 softmax(q · Kᵀ / √D) · V；其余每个查询都得到所有值的平均。
    返回 (B, H, L_Q, D_v)，dtype 与 query 相同。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, H, L_Q, D = query.shape
    D_v = value.shape[-1]
    top = measure.topk(u, dim=-1).indices  # (B, H, u)
    chosen = query.gather(-2, top.unsqueeze(-1).expand(B, H, u, D))  # (B, H, u, D)
    weights = torch.softmax(chosen @ key.transpose(-2, -1) / math.sqrt(D), dim=-1)  # (B, H, u, L_K)
    # lang: en
    context = value.mean(-2, keepdim=True).expand(B, H, L_Q, D_v)  # every query lazy to start with
    # lang: zh
    context = value.mean(-2, keepdim=True).expand(B, H, L_Q, D_v)  # 先让每个查询都是惰性的
    # lang: end
    return context.scatter(-2, top.unsqueeze(-1).expand(B, H, u, D_v), weights @ value)
    ### END SOLUTION


# %%
check("05.top_u_attention", top_u_attention)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Causal mode: ProbSparse in a decoder
#
# In a decoder, query $i$ may see keys $0 \dots i$ only (lesson 02's causal mask). Three steps
# change:
#
# - a chosen query at position $p$ attends to keys $0 \dots p$ only: its row of scores is masked
#   like any causal row;
# - a lazy query $i$ gets the mean of the values it may see, $v_0 \dots v_i$: the **cumulative
#   mean**, `value.cumsum(-2)` divided by $i + 1$ in row $i$, instead of the mean of all the values;
# - the sample of query $i$ is drawn from positions $0 \dots i$, so that its measure never reads a
#   later key.
#
# `prob_sparse_attention(..., causal=True)` does all three (it needs $L_Q = L_K$). The inputs of
# section 4, causal now:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="821c80a5c7"
# ## 5. 因果模式：解码器里的 ProbSparse
#
# 在解码器里，查询 $i$ 只能看到键 $0 \dots i$（第 02 课的因果掩码）。有三步要改：
#
# - 位置 $p$ 上被选中的查询只对键 $0 \dots p$ 做注意力：它的分数行像任何因果行一样加上掩码；
# - 惰性查询 $i$ 得到它能看到的那些值 $v_0 \dots v_i$ 的平均，即**累积均值**：第 $i$ 行是 `value.cumsum(-2)` 除以 $i + 1$，而不是全部值的平均；
# - 查询 $i$ 的样本只从位置 $0 \dots i$ 中抽取，这样它的度量永远不会读到后面的键。
#
# `prob_sparse_attention(..., causal=True)` 把这三步都做了（它要求 $L_Q = L_K$）。还是第 4 节的输入，这次用因果模式：

# %%
causal_index = sample_keys(L4, L4, 8, causal=True, generator=torch.Generator().manual_seed(3))  # (L_Q, U)
causal_output, causal_selected = prob_sparse_attention(q4, k4, v4, factor=2, causal=True, index=causal_index)
_, causal_weights = prob_sparse_attention(q4, k4, v4, factor=2, causal=True, index=causal_index, need_weights=True)
causal_lazy = torch.ones(1, 2, L4, dtype=torch.bool).scatter(-1, causal_selected, False)  # (B, H, L_Q)
# lang: en
cumulative_mean = v4.cumsum(-2) / torch.arange(1, L4 + 1).unsqueeze(-1)  # row i: mean of v_0 … v_i
# lang: zh
cumulative_mean = v4.cumsum(-2) / torch.arange(1, L4 + 1).unsqueeze(-1)  # 第 i 行：v_0 … v_i 的平均
# lang: end
positions = torch.arange(L4).unsqueeze(-1)  # (L_Q, 1)
# lang: en
claim("the sample of query i holds positions 0 … i only", bool((causal_index <= positions).all()))
claim("no query gives any weight to a later key", bool((causal_weights.triu(diagonal=1) == 0).all()))
claim("each lazy query i gets the mean of v_0 … v_i", torch.allclose(causal_output[causal_lazy], cumulative_mean[causal_lazy]))
# lang: zh
claim("查询 i 的样本只包含位置 0 … i", bool((causal_index <= positions).all()))
claim("没有任何查询给后面的键分配权重", bool((causal_weights.triu(diagonal=1) == 0).all()))
claim("每个惰性查询 i 得到 v_0 … v_i 的平均", torch.allclose(causal_output[causal_lazy], cumulative_mean[causal_lazy]))
# lang: end

fig, ax = plt.subplots(figsize=(5.6, 4.8), layout="constrained")
chosen_weights(causal_weights[0, 0], causal_selected[0, 0], ax=ax)
plt.show()

# %% [markdown] tags=["lang-en"]
# A lazy row $i$ is now $1/(i+1)$ on keys $0 \dots i$: the higher up the row, the fewer keys it
# averages. With every query chosen ($L = 12$, factor 5), causal ProbSparse must be exactly causal
# attention:

# %% [markdown] tags=["lang-zh"] en_hash="5f8a56088f"
# 现在惰性行 $i$ 在键 $0 \dots i$ 上都是 $1/(i+1)$：行越靠上，平均的键越少。当每个查询都被选中时（$L = 12$，因子 5），因果 ProbSparse 必须与因果注意力完全一致：

# %%
full_causal, _ = prob_sparse_attention(q12, k12, v12, causal=True, generator=torch.Generator().manual_seed(0))
# lang: en
claim("at L = 12 causal ProbSparse is F.scaled_dot_product_attention(is_causal=True)",
      torch.allclose(full_causal, F.scaled_dot_product_attention(q12, k12, v12, is_causal=True), atol=1e-6))
# lang: zh
claim("L = 12 时，因果 ProbSparse 与 F.scaled_dot_product_attention(is_causal=True) 相同",
      torch.allclose(full_causal, F.scaled_dot_product_attention(q12, k12, v12, is_causal=True), atol=1e-6))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### What can and cannot see the future
#
# **The values never leak**: changing $v_j$ never changes an output before position $j$. A chosen
# row hides key $j$ from every query before it, the cumulative mean of row $i$ stops at $v_i$, and
# the choice of queries reads queries and keys, never values. Below, the last value changes, and
# the first 23 outputs stay the same, bit for bit:

# %% [markdown] tags=["lang-zh"] en_hash="edf7ec552d"
# ### 什么能看到未来，什么不能
#
# **值永远不会泄漏**：改变 $v_j$ 永远不会改变位置 $j$ 之前的任何输出。被选中的行对 $j$ 之前的每个查询都遮住了键 $j$，第 $i$ 行的累积均值到 $v_i$ 为止，而选择查询时只读查询和键，从不读值。下面改动最后一个值，前 23 个输出逐位保持不变：

# %%
v_changed = v4.clone()
# lang: en
v_changed[:, :, -1] += 5.0  # change v_23 only
# lang: zh
v_changed[:, :, -1] += 5.0  # 只改动 v_23
# lang: end
changed_output, changed_selected = prob_sparse_attention(q4, k4, v_changed, factor=2, causal=True, index=causal_index)
# lang: en
claim("the same queries are chosen", torch.equal(changed_selected, causal_selected))
claim("outputs 0 … 22 are exactly the same", torch.equal(changed_output[:, :, :-1], causal_output[:, :, :-1]))
claim("output 23 changed", not torch.allclose(changed_output[:, :, -1], causal_output[:, :, -1]))
# lang: zh
claim("选中的查询相同", torch.equal(changed_selected, causal_selected))
claim("输出 0 … 22 完全相同", torch.equal(changed_output[:, :, :-1], causal_output[:, :, :-1]))
claim("输出 23 变了", not torch.allclose(changed_output[:, :, -1], causal_output[:, :, -1]))
# lang: end

# %% [markdown] tags=["lang-en"]
# **Which queries are chosen, though, is a competition among all positions**: the top $u$ of the
# whole sequence. The measure of query $i$ reads keys $0 \dots i$ only, but whether query $i$ wins
# depends on the measures of the later queries, which read later keys. So changing a later key
# can change whether an earlier query is chosen, and with it that query's output: attention over
# keys $0 \dots i$ or the cumulative mean. Below, the same sample is reused and the keys at
# positions $12 \dots 23$ are multiplied by 10:

# %% [markdown] tags=["lang-zh"] en_hash="dcb237653c"
# **然而，选中哪些查询，是所有位置之间的一场竞争**：选的是整个序列的前 $u$ 名。查询 $i$ 的度量只读键 $0 \dots i$，但查询 $i$ 能否胜出，还取决于后面那些查询的度量，而它们读的是后面的键。所以，改变一个后面的键，可能改变一个前面的查询是否被选中，进而改变这个查询的输出：要么是对键 $0 \dots i$ 的注意力，要么是累积均值。下面沿用同一份样本，把位置 $12 \dots 23$ 上的键都乘以 10：

# %%
k_changed = k4.clone()
# lang: en
k_changed[:, :, 12:] *= 10.0  # keys 12 … 23 only
# lang: zh
k_changed[:, :, 12:] *= 10.0  # 只改动键 12 … 23
# lang: end
late_output, late_selected = prob_sparse_attention(q4, k_changed, v4, factor=2, causal=True, index=causal_index)
measure_before = sparsity_measure(sampled_scores(q4, k4, causal_index))  # (B, H, L_Q)
measure_after = sparsity_measure(sampled_scores(q4, k_changed, causal_index))
early_before = {p for p in causal_selected[0, 0].tolist() if p < 12}
early_after = {p for p in late_selected[0, 0].tolist() if p < 12}
# lang: en
print("head 0, chosen before 12:", sorted(early_before), "-> now:", sorted(early_after))
# lang: zh
print("头 0 中位置 12 之前被选中的查询：", sorted(early_before), "-> 现在：", sorted(early_after))
# lang: end
dropped = min(early_before - early_after)
# lang: en
claim("the measures of queries 0 … 11 did not change (up to float rounding): they read keys 0 … 11 only",
      torch.allclose(measure_after[..., :12], measure_before[..., :12], atol=1e-5))
claim(f"yet query {dropped}, chosen before, is lazy now", dropped not in late_selected[0, 0].tolist())
claim(f"and its output changed, from attention over keys 0 … {dropped} to the mean of v_0 … v_{dropped}",
      not torch.allclose(late_output[0, 0, dropped], causal_output[0, 0, dropped])
      and torch.allclose(late_output[0, 0, dropped], cumulative_mean[0, 0, dropped]))
# lang: zh
claim("查询 0 … 11 的度量没有变（只差浮点舍入）：它们只读键 0 … 11",
      torch.allclose(measure_after[..., :12], measure_before[..., :12], atol=1e-5))
claim(f"然而之前被选中的查询 {dropped} 现在成了惰性查询", dropped not in late_selected[0, 0].tolist())
claim(f"它的输出也变了：从对键 0 … {dropped} 的注意力变成了 v_0 … v_{dropped} 的平均",
      not torch.allclose(late_output[0, 0, dropped], causal_output[0, 0, dropped])
      and torch.allclose(late_output[0, 0, dropped], cumulative_mean[0, 0, dropped]))
# lang: end

# %% [markdown] tags=["lang-en"]
# So causal ProbSparse keeps the values of the future out of every output, but not the future's
# influence on which queries attend. The original Informer code's causal mode chooses its queries
# the same way, by a top $u$ over the whole sequence.

# %% [markdown] tags=["lang-zh"] en_hash="2dfb056101"
# 所以，因果 ProbSparse 让未来的值进不了任何输出，却挡不住未来对“哪些查询做注意力”的影响。Informer 原始代码的因果模式也是这样选查询的：在整个序列上取前 $u$ 名。

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: the causal step
#
# Write `causal_prob_sparse(query, key, value, selected)`. `query` and `key` are $(B, H, L, D)$,
# `value` $(B, H, L, D_v)$, and `selected` is $(B, H, u)$ int64: the positions of the chosen
# queries of each (batch item, head), distinct, in any order. A chosen query at position $p$ gets
# $\mathrm{softmax}(q_p K^\top / \sqrt{D})\, V$ over keys $0 \dots p$ only; every other query $i$
# gets the mean of $v_0 \dots v_i$. Return $(B, H, L, D_v)$ in query's dtype. The check compares
# gradients too.

# %% [markdown] tags=["lang-zh"] en_hash="e9860806b5"
# ### 练习 3：因果的这一步
#
# 写出 `causal_prob_sparse(query, key, value, selected)`。`query` 和 `key` 的形状为 $(B, H, L, D)$，`value` 为 $(B, H, L, D_v)$，`selected` 是形状为 $(B, H, u)$ 的 int64 张量：每个（批量样本，头）中被选中查询的位置，互不相同，顺序任意。位置 $p$ 上被选中的查询只在键 $0 \dots p$ 上得到 $\mathrm{softmax}(q_p K^\top / \sqrt{D})\, V$；其余每个查询 $i$ 都得到 $v_0 \dots v_i$ 的平均。返回 $(B, H, L, D_v)$，dtype 与 query 相同。检查也会比较梯度。

# %% tags=["exercise"] exercise="05.causal_prob_sparse"
def causal_prob_sparse(query, key, value, selected):
    # lang: en
    """ProbSparse self-attention for a decoder: no query sees a later position.

    query, key: (B, H, L, D), value: (B, H, L, D_v), float32 or float64.
    selected: (B, H, u) int64, the positions of the chosen queries of each (batch item, head),
    distinct, in any order. The chosen query at position p gets softmax(q_p · k_j / √D) over
    the keys j = 0 … p, times their values; every other query i gets the mean of v_0 … v_i.
    Returns (B, H, L, D_v), query's dtype.
    """
    # lang: zh
    """用于解码器的 ProbSparse 自注意力：任何查询都看不到它之后的位置。

    query、key：(B, H, L, D)，value：(B, H, L, D_v)，float32 或 float64。
    selected：(B, H, u) 的 int64 张量，是每个（批量样本，头）中被选中查询的位置，互不相同，
    顺序任意。位置 p 上被选中的查询在键 j = 0 … p 上计算 softmax(q_p · k_j / √D)，再乘以
    这些键对应的值；其余每个查询 i 都得到 v_0 … v_i 的平均。
    返回 (B, H, L, D_v)，dtype 与 query 相同。
    """
    # lang: end
    ### BEGIN SOLUTION
    B, H, L, D = query.shape
    D_v, u = value.shape[-1], selected.shape[-1]
    counts = torch.arange(1, L + 1, dtype=value.dtype).unsqueeze(-1)  # (L, 1)
    # lang: en
    context = value.cumsum(-2) / counts  # (B, H, L, D_v): row i is the mean of v_0 … v_i
    # lang: zh
    context = value.cumsum(-2) / counts  # (B, H, L, D_v)：第 i 行是 v_0 … v_i 的平均
    # lang: end
    chosen = query.gather(-2, selected.unsqueeze(-1).expand(B, H, u, D))  # (B, H, u, D)
    scores = chosen @ key.transpose(-2, -1) / math.sqrt(D)  # (B, H, u, L)
    # lang: en
    future = torch.arange(L) > selected.unsqueeze(-1)  # (B, H, u, L): True on keys after p
    # lang: zh
    future = torch.arange(L) > selected.unsqueeze(-1)  # (B, H, u, L)：p 之后的键为 True
    # lang: end
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (B, H, u, L)
    return context.scatter(-2, selected.unsqueeze(-1).expand(B, H, u, D_v), weights @ value)
    ### END SOLUTION


# %%
check("05.causal_prob_sparse", causal_prob_sparse)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. The shape walkthrough
#
# The Informer ProbSparse code prints the shape of every intermediate tensor of one call with
# $B = 32$, $H = 8$, $L = 96$, $D = 64$ and factor 5. The course's implementation prints nothing;
# it records. Pass a `Trace` as `trace=` and every step is noted with its shape, whether it is a
# **view** of a tensor that exists already (no memory of its own) or a new tensor, and the bytes
# it allocated. `probsparse.walkthrough(...)` runs the algorithm on *meta* tensors, which have a
# shape and a dtype but no data, so the walkthrough of any size takes no memory and no time.
#
# The plain version, `prob_sparse_attention_plain`, takes the steps the way the Informer code
# does. "As a copy" is the tensor's number of elements times their size: what it would take with
# memory of its own.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="788c75b7bc"
# ## 6. 形状逐步解析
#
# Informer ProbSparse 代码在 $B = 32$、$H = 8$、$L = 96$、$D = 64$、因子为 5 时，把一次调用中每个中间张量的形状都打印了出来。本课程的实现什么也不打印，而是把它们记录下来：把一个 `Trace` 作为 `trace=` 传入，每一步都会记下它的形状、它是一个已有张量的**视图**（没有自己的内存）还是一个新张量，以及它分配了多少字节。`probsparse.walkthrough(...)` 在 *meta* 张量上运行整个算法；meta 张量只有形状和 dtype，没有数据，所以任意尺寸的逐步解析都不占内存，也不花时间。
#
# 朴素版 `prob_sparse_attention_plain` 按 Informer 代码的方式完成每一步。“若为副本”是张量的元素个数乘以每个元素的大小，即它若有自己的内存需要占多少。

# %%
plain = walkthrough(batch=32, heads=8, length=96, dim=64, factor=5)
print(walkthrough_table(plain))
# lang: en
# the shapes the Informer ProbSparse code prints for B = 32, L = 96, H = 8, D = 64
# lang: zh
# Informer ProbSparse 代码在 B = 32、L = 96、H = 8、D = 64 时打印的形状
# lang: end
printed = {
    "K_expand": (32, 8, 96, 96, 64), "index_sample": (96, 25), "K_sample": (32, 8, 96, 25, 64),
    "Q_K_sample": (32, 8, 96, 25), "M": (32, 8, 96), "M_top": (32, 8, 25), "Q_reduce": (32, 8, 25, 64),
    "Q_K": (32, 8, 25, 96), "V_sum": (32, 8, 64), "context_init": (32, 8, 96, 64),
}
# lang: en
our_names = {"Q_K_sample": "scores_sample", "M_top": "selected", "Q_K": "scores_top", "V_sum": "V_mean"}  # the rest: same name
# lang: zh
our_names = {"Q_K_sample": "scores_sample", "M_top": "selected", "Q_K": "scores_top", "V_sum": "V_mean"}  # 其余同名
# lang: end
expand, sample = plain["K_expand"], plain["K_sample"]
# lang: en
claim("every shape the Informer code prints is the shape of the same step here",
      all(plain[our_names.get(name, name)].shape == shape for name, shape in printed.items()))
claim("K_expand is a view: 0 bytes of its own, though as a copy it would take 604.0 MB",
      expand.view and expand.bytes == 0 and expand.logical_bytes == 32 * 8 * 96 * 96 * 64 * 4)
claim("K_sample is new: B·H·L_Q·U·D·4 = 157,286,400 bytes", sample.bytes == 32 * 8 * 96 * 25 * 64 * 4 == 157_286_400)
claim(f"K_sample alone is {100 * sample.bytes / plain.total_bytes:.0f} % of all the plain version allocates",
      sample.bytes > 0.8 * plain.total_bytes)
# lang: zh
claim("Informer 代码打印的每个形状，都与这里同一步的形状相同",
      all(plain[our_names.get(name, name)].shape == shape for name, shape in printed.items()))
claim("K_expand 是视图：自己的内存为 0 字节，而若为副本则要占 604.0 MB",
      expand.view and expand.bytes == 0 and expand.logical_bytes == 32 * 8 * 96 * 96 * 64 * 4)
claim("K_sample 是新张量：B·H·L_Q·U·D·4 = 157,286,400 字节", sample.bytes == 32 * 8 * 96 * 25 * 64 * 4 == 157_286_400)
claim(f"仅 K_sample 就占朴素版全部分配内存的 {100 * sample.bytes / plain.total_bytes:.0f}%",
      sample.bytes > 0.8 * plain.total_bytes)
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Why `K_expand` costs nothing and `K_sample` costs everything
#
# `K.unsqueeze(-3).expand(B, H, L_Q, L_K, D)` repeats the keys once per query without copying: the
# new axis has stride 0, so all $L_Q$ repeats read the same memory (lesson 00). Indexing it with
# one (query, sample) pair per row, `K_expand[:, :, rows, index_sample]`, is advanced indexing,
# and advanced indexing always copies: $L_Q \cdot U$ keys of $D$ numbers, for every batch item and
# head. A tiny version, with $L_Q = 4$ queries, $L_K = 3$ keys of $D = 2$ features and $U = 2$:
# every element of `K_expand` reads one of K's 6 memory cells, several elements the same cell;
# `K_sample` has 16 cells of its own.

# %% [markdown] tags=["lang-zh"] en_hash="8d60e5a5c9"
# ### 为什么 `K_expand` 不花一分钱，而 `K_sample` 花掉了几乎全部
#
# `K.unsqueeze(-3).expand(B, H, L_Q, L_K, D)` 为每个查询把所有键重复一遍，却不拷贝数据：新维度的步长为 0，所以这 $L_Q$ 份重复读的都是同一块内存（第 00 课）。用每行一对（查询，样本）的方式去索引它，即 `K_expand[:, :, rows, index_sample]`，属于高级索引，而高级索引总是会拷贝：每个样本、每个头都要拷贝 $L_Q \cdot U$ 个键，每个键 $D$ 个数。下面是一个极小的版本：$L_Q = 4$ 个查询，$L_K = 3$ 个键，每个键 $D = 2$ 个特征，$U = 2$。`K_expand` 的每个元素都读 K 的 6 个内存单元之一，好几个元素读的是同一个单元；`K_sample` 则有自己的 16 个单元。

# %%
K = torch.arange(6).view(3, 2)  # (L_K, D)
K_expand = K.unsqueeze(0).expand(4, 3, 2)  # (L_Q, L_K, D)
tiny_index = torch.tensor([[0, 2], [1, 1], [2, 0], [0, 1]])  # (L_Q, U)
K_sample = K_expand[torch.arange(4).unsqueeze(1), tiny_index]  # (L_Q, U, D)
fig, axes = plt.subplots(2, 1, figsize=(8, 4.4), layout="constrained")
memory_order(K_expand, ax=axes[0], title=message("l05.plot.expand_title"))
memory_order(K_sample, ax=axes[1], title=message("l05.plot.sample_title"))
plt.show()
print("K_expand.stride() =", K_expand.stride(), "  K_sample.stride() =", K_sample.stride())
# lang: en
claim("K_expand has stride 0 on the query axis and reads K's own 6 cells",
      K_expand.stride(0) == 0 and K_expand.data_ptr() == K.data_ptr() and K_expand.untyped_storage().nbytes() == 6 * 8)
claim("K_sample has memory of its own: 4·2·2 = 16 cells", K_sample.data_ptr() != K.data_ptr()
      and K_sample.untyped_storage().nbytes() == 16 * 8)
# lang: zh
claim("K_expand 在查询维上的步长为 0，读的是 K 自己的 6 个单元",
      K_expand.stride(0) == 0 and K_expand.data_ptr() == K.data_ptr() and K_expand.untyped_storage().nbytes() == 6 * 8)
claim("K_sample 有自己的内存：4·2·2 = 16 个单元", K_sample.data_ptr() != K.data_ptr()
      and K_sample.untyped_storage().nbytes() == 16 * 8)
# lang: end

# %% [markdown] tags=["lang-en"]
# ### The fast version: no `K_sample`
#
# The $U$ scores of a query are $U$ entries of one row of $Q K^\top$: a *sampled* matrix product.
# `torch.sparse.sampled_addmm` computes exactly the entries a sparse pattern names, straight from
# $Q$ and $K$; `prob_sparse_attention` gives it the sample as one pattern shared by every batch
# item and head, and never gathers a key. It also leaves the lazy rows' mean as an expanded view
# until the chosen rows are written in. Same sizes:

# %% [markdown] tags=["lang-zh"] en_hash="870bab7f8e"
# ### 快速版：没有 `K_sample`
#
# 一个查询的 $U$ 个分数，就是 $Q K^\top$ 某一行中的 $U$ 个元素：这是一个*采样*矩阵乘法。`torch.sparse.sampled_addmm` 直接由 $Q$ 和 $K$ 算出一个稀疏模式所指定的那些元素；`prob_sparse_attention` 把键的样本作为一个稀疏模式交给它（批量中的所有样本、所有头共用这一个模式），从不收集任何键。在写入被选中的行之前，它也让惰性行的平均值一直保持为一个展开（expand）得到的视图。同样的尺寸：

# %%
fast = walkthrough(batch=32, heads=8, length=96, dim=64, factor=5, fast=True)
print(walkthrough_table(fast))
# lang: en
claim("the fast version has no K_expand and no K_sample", not {"K_expand", "K_sample"} & {step.name for step in fast})
claim(f"it allocates {format_bytes(fast.total_bytes)}, less than a tenth of the plain version's "
      f"{format_bytes(plain.total_bytes)}", fast.total_bytes < plain.total_bytes / 10)
# lang: zh
claim("快速版既没有 K_expand，也没有 K_sample", not {"K_expand", "K_sample"} & {step.name for step in fast})
claim(f"它只分配 {format_bytes(fast.total_bytes)}，不到朴素版的 "
      f"{format_bytes(plain.total_bytes)} 的十分之一", fast.total_bytes < plain.total_bytes / 10)
# lang: end

# %% [markdown] tags=["lang-en"]
# Given the same sample, the two versions choose the same queries and return the same output (up
# to float rounding: the products are summed in another order). On real tensors of the Informer
# code's per-head sizes ($B = 2$ here):

# %% [markdown] tags=["lang-zh"] en_hash="fd02efd3ed"
# 给定同一份样本，两个版本选中相同的查询，返回相同的输出（只差浮点舍入：乘积的求和顺序不同）。下面在与 Informer 代码每个头尺寸相同的真实张量上验证（这里 $B = 2$）：

# %%
g6 = torch.Generator().manual_seed(6)
q6, k6, v6 = (torch.randn(2, 8, 96, 64, generator=g6) for _ in range(3))  # (B, H, L, D)
index6 = sample_keys(96, 96, 25, generator=g6)  # (L_Q, U)
plain_output, plain_selected = prob_sparse_attention_plain(q6, k6, v6, index=index6)
fast_output, fast_selected = prob_sparse_attention(q6, k6, v6, index=index6)
# lang: en
claim("both versions choose the same 25 queries in each of the 16 (batch item, head) pairs",
      torch.equal(plain_selected, fast_selected))
claim("and return the same output", torch.allclose(plain_output, fast_output, atol=1e-5))
# lang: zh
claim("在全部 16 个（批量样本，头）中，两个版本都选中相同的 25 个查询", torch.equal(plain_selected, fast_selected))
claim("并且返回相同的输出", torch.allclose(plain_output, fast_output, atol=1e-5))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Explore the walkthrough
#
# The explorer starts at the Informer code's sizes. Its chart shows the bytes every step of both
# versions allocates, on a log scale; the dashed outline is `K_expand`, a view, drawn at the size
# it would have as a copy. Move the slider to pick the length $L$; type the batch size $B$ and the
# number of heads $H$, pick the features per head $D$ and the factor $c$. The chart and the tables
# follow. Everything runs on meta tensors, so even $L = 16384$ answers at once.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="0787e9b687"
# ### 探索逐步解析
#
# 探索器一开始用的就是 Informer 代码的那组尺寸。图中用对数刻度画出两个版本每一步分配的字节数；虚线框是 `K_expand`：它是视图，按它若为副本时的大小画出。拖动滑块选择长度 $L$；输入批量大小 $B$ 和头数 $H$，再选择每个头的特征数 $D$ 和因子 $c$。图和表会随之更新。一切都在 meta 张量上运行，所以即便 $L = 16384$ 也能立即给出结果。

# %% tags=["nbval-ignore-output"]
walkthrough_explorer()

# %% [markdown] tags=["lang-en"]
# The explorer draws with `walkthrough_view`, an ordinary function. Its text for one sequence
# ($B = 1$) of $L = 8192$, with $H = 8$, $D = 64$:

# %% [markdown] tags=["lang-zh"] en_hash="3042b78dc6"
# 探索器用普通函数 `walkthrough_view` 作图。下面是它对一条序列（$B = 1$）、$L = 8192$、$H = 8$、$D = 64$ 给出的文字：

# %%
_, text = walkthrough_view(length=8192, batch=1, heads=8, dim=64, factor=5)
print(text)
long_plain = walkthrough(batch=1, heads=8, length=8192, dim=64, factor=5)
long_fast = walkthrough(batch=1, heads=8, length=8192, dim=64, factor=5, fast=True)
# lang: en
claim("at L = 8192, K_sample alone takes 838.9 MB (U = 50)", long_plain["K_sample"].bytes == 8 * 8192 * 50 * 64 * 4)
claim("the fast version allocates less than 40 MB in all", long_fast.total_bytes < 40e6)
# lang: zh
claim("L = 8192 时，仅 K_sample 就要 838.9 MB（U = 50）", long_plain["K_sample"].bytes == 8 * 8192 * 50 * 64 * 4)
claim("快速版一共分配不到 40 MB", long_fast.total_bytes < 40e6)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Full attention scores $L_Q \times L_K$ pairs in every head: the work, and the memory of weights
#   that are kept, grow with $L^2$ (2.1 GB of weights at $L = 8192$ for one sequence of 8 heads).
# - Most queries are lazy: a flat softmax row, an output close to $\bar v$. The sparsity measure
#   $M$ = max − mean of a query's scores tells active from lazy; it is within $\ln L_K$ of
#   log-sum-exp − mean, so $\mathrm{KL}(\mathrm{uniform} \| p) \le M \le \mathrm{KL} + \ln L_K$.
# - ProbSparse estimates $M$ from $U = c \cdot \lceil \ln L_K \rceil$ sampled keys per query (one
#   $(L_Q, U)$ sample for every batch item and head, unscaled scores), drawn from a
#   `torch.Generator`: reproducible, and the global random state untouched.
# - The $u = c \cdot \lceil \ln L_Q \rceil$ queries with the largest $M$ attend over all keys;
#   the others get mean(V). With every query chosen it is exactly full attention.
# - Causal mode: chosen rows masked, lazy query $i$ gets the mean of $v_0 \dots v_i$, query $i$
#   samples keys $0 \dots i$. No value leaks into an earlier output; which queries are chosen is a
#   top $u$ over the whole sequence, so a later key can change it.
# - The walkthrough: `K_expand` is a free stride-0 view; `K_sample`, $(B, H, L_Q, U, D)$, is
#   most of the plain version's memory (157 MB of 181 MB at the Informer code's sizes). The fast
#   version computes the sampled scores with `sampled_addmm` and never builds it.
# - The Informer ProbSparse code has defects that run without an error and are easy to miss;
#   each one can be reproduced, measured and fixed (section 7).
# - ProbSparse is only as accurate as its assumption: close to full attention when a few queries
#   dominate, no better than mean(V) when none do (section 8).
# - Its cost grows far more slowly with $L$ than full attention's, but whether it is faster depends
#   on how the sampled scores are computed (section 9).
#
# Next: lesson 06, the Transformer block built around attention.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="0d7da855d4"
# ## 小结
#
# - 完整的注意力在每个头里都要给 $L_Q \times L_K$ 对打分：计算量以及保留下来的权重所占的内存都随 $L^2$ 增长（一条序列、8 个头，$L = 8192$ 时权重就要 2.1 GB）。
# - 大多数查询是惰性的：softmax 行是平的，输出接近 $\bar v$。稀疏性度量 $M$（一个查询的分数的最大值减平均值）能区分活跃查询和惰性查询；它与 log-sum-exp − 平均值最多相差 $\ln L_K$，所以 $\mathrm{KL}(\mathrm{uniform} \| p) \le M \le \mathrm{KL} + \ln L_K$。
# - ProbSparse 为每个查询采样 $U = c \cdot \lceil \ln L_K \rceil$ 个键来估计 $M$（批量中的每个样本、每个头共用一份 $(L_Q, U)$ 的键样本，分数不缩放），样本从 `torch.Generator` 中抽取：可以复现，也不动全局随机状态。
# - $M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询在全部键上做注意力，其余查询得到 mean(V)。每个查询都被选中时，它与完整的注意力完全一致。
# - 因果模式：被选中的行加掩码，惰性查询 $i$ 得到 $v_0 \dots v_i$ 的平均，查询 $i$ 只从键 $0 \dots i$ 中采样。任何值都不会泄漏到更早的输出里；但选中哪些查询是在整个序列上取前 $u$ 名，所以后面的键可以改变它。
# - 逐步解析：`K_expand` 是一个不花钱的、步长为 0 的视图；`K_sample` 的形状为 $(B, H, L_Q, U, D)$，占了朴素版的大部分内存（在 Informer 代码的尺寸下，181 MB 里占 157 MB）。快速版用 `sampled_addmm` 计算采样分数，从不构造它。
# - Informer ProbSparse 代码有一些缺陷，运行时不报错，很容易被忽略；每一个都可以复现、测量并修复（第 7 节）。
# - ProbSparse 的准确程度取决于它的假设是否成立：少数查询占主导时接近完整的注意力，没有这样的查询时并不比 mean(V) 更好（第 8 节）。
# - 它的代价随 $L$ 的增长比完整的注意力慢得多，但它是否真的更快，取决于采样分数是怎样计算的（第 9 节）。
#
# 下一课（第 06 课）：围绕注意力搭建的 Transformer 块。
