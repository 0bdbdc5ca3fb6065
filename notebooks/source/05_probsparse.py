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
# Two codes come up again and again. The **official Informer code** is the authors' own
# (the repository Informer2020, file `models/attn.py`). A **widely copied re-implementation**
# of it, short and easy to find, prints the shape of every intermediate tensor; many readers
# meet ProbSparse there first. They share most of their steps, and some of their defects.
#
# In this lesson you will
#
# 1. see what full attention costs as the sequence grows;
# 2. tell **active** queries from **lazy** ones with the paper's sparsity measure $M$
#    (log-sum-exp − mean of a query's scores) and its estimate $\bar M$ = max − mean;
# 3. estimate $\bar M$ from $U = c \cdot \lceil \ln L_K \rceil$ sampled keys per query, with a
#    `torch.Generator`;
# 4. attend with the $u = c \cdot \lceil \ln L_Q \rceil$ queries of largest $\bar M$ only, and
#    give the lazy ones the mean of the values;
# 5. make it causal, for a decoder, and check exactly what can and cannot see the future;
# 6. walk through the shape and the memory of every intermediate tensor, for the sizes the
#    re-implementation prints and for any sizes you pick;
# 7. find the defects of the re-implementation and of the official code, code first;
# 8. measure when ProbSparse is accurate and when it is not, on a trained model too;
# 9. measure its cost as $L$ grows, against PyTorch's own attention.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="2b47d8e9f5"
# # ProbSparse 注意力
#
# 完整注意力要让每个查询与每个键打分：每个头都有 $L_Q \times L_K$ 个分数，所以它的时间和内存随长度的平方增长。Informer（Zhou 等，2021）是一个面向长时间序列的模型，它的出发点是一个观察：大多数查询把权重几乎平均地分给各个键，只有少数查询的 softmax 行有尖峰。它的 **ProbSparse** 注意力只给这少数查询做完整注意力。它用一种廉价的办法找出这些查询（每个查询只看随机抽取的一小部分键），其余每个查询都直接得到值的平均。
#
# 本课会反复提到两份代码。**Informer 官方代码**是作者自己的实现（仓库 Informer2020 中的 `models/attn.py`）。另有一份**广为流传的重写版**，篇幅短、容易找到，会把每个中间张量的形状都打印出来；很多读者第一次接触 ProbSparse 就是通过它。两者的大部分步骤相同，也有一些相同的缺陷。
#
# 本课你将：
#
# 1. 看到完整注意力的代价如何随序列变长而增长；
# 2. 用论文的稀疏性度量（sparsity measure）$M$（一个查询的分数的 log-sum-exp 减去平均值）及其估计 $\bar M$（最大值减平均值）区分**活跃查询**（active query）和**惰性查询**（lazy query）；
# 3. 用 `torch.Generator` 为每个查询采样 $U = c \cdot \lceil \ln L_K \rceil$ 个键，由此估计 $\bar M$；
# 4. 只让 $\bar M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询做注意力，惰性查询则得到值的平均；
# 5. 把它改成因果的，用于解码器，并弄清楚到底什么能看到未来、什么不能；
# 6. 逐步查看每个中间张量的形状和内存：既用重写版打印的那组尺寸，也用你自己选的任意尺寸；
# 7. 先读代码，找出重写版和官方代码的缺陷；
# 8. 测量 ProbSparse 什么时候准确、什么时候不准确，也在一个训练好的模型上测一测；
# 9. 测量它的代价随 $L$ 的增长，并与 PyTorch 自己的注意力对比。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import contextlib
import io
import math
from functools import partial

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import check, claim, measured, probsparse, seq2seq, setup
from course_utils import probsparse_study as study
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
from course_utils.viz import chosen_weights, cost_lines, format_bytes, memory_order, weight_rows
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
# 在一个有 $L$ 个位置的序列上做自注意力，每个查询都要与每个键打分：每个头里要算 $L^2$ 个 $D$ 维向量的点积，对每一行的 $L$ 个分数做一次 softmax，再用权重与值做 $L^2$ 次乘积。长度翻倍，计算量就变成四倍。一个要保留权重 $(B, H, L, L)$ 的层，内存也变成四倍，而查询、键和值（形状都是 $(B, H, L, D)$）只变成两倍。取一条序列（$B = 1$）、$H = 8$ 个头、每个头 $D = 64$ 个特征，float32（每个数 4 字节）：

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
# ($B = 1$, $H = 8$, $D = 64$), in milliseconds (the median of 2 runs). These numbers change from
# machine to machine and from run to run:

# %% [markdown] tags=["lang-zh"] en_hash="ab9e7eaa8c"
# PyTorch 的 `F.scaled_dot_product_attention` 从不存下权重（第 04 课第 8 节），但它仍然要算出每个头的全部 $L^2$ 个分数。下面是它对一条序列（$B = 1$，$H = 8$，$D = 64$）每次调用的耗时，单位为毫秒（取 2 次的中位数）。这些数字因机器而异，每次运行也会不同：

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
# Informer's authors report that in the models they trained, the queries' activity has a long
# tail: most queries are lazy, a few are active. (Section 8 measures it on a small trained model
# of this course.) For a lazy query, computing its $L_K$ scores is wasted work: $\bar v$ is
# computed once and serves them all.
#
# Four queries make the two extremes concrete. All four point along key 5, with lengths 0.5, 2, 5
# and 12 (random keys and values, $L_K = 32$, $D = 8$). The longer the query, the more its
# scores spread, and the more peaked its row:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5b693c5a01"
# ## 2. 活跃查询与惰性查询
#
# 查询 $i$ 给各个键打分：$s_{ij} = q_i \cdot k_j / \sqrt{D}$；它的权重是 $p_{ij} = \mathrm{softmax}_j(s_{ij})$，输出是 $o_i = \sum_j p_{ij} v_j$。有两种极端情形：
#
# - **活跃查询**（active query）的行有尖峰：少数几个键拿走了它几乎全部的权重，输出接近这几个键的值；
# - **惰性查询**（lazy query）的行是平的：每个键都分到大约 $1/L_K$，输出接近值的平均 $\bar v = \frac{1}{L_K}\sum_j v_j$，查询本身是什么几乎无关紧要。
#
# Informer 的作者报告说，在他们训练的模型里，查询的活跃程度呈长尾分布：大多数查询是惰性的，只有少数是活跃的（第 8 节会在本课程的一个小模型上实测这一点）。对惰性查询来说，算出它的 $L_K$ 个分数纯属白费：$\bar v$ 只需算一次，所有惰性查询都能用。
#
# 下面用四个查询来看这两种极端。四个查询方向相同，都指向键 5，长度分别为 0.5、2、5 和 12（键和值随机生成，$L_K = 32$，$D = 8$）。查询越长，分数拉得越开，行就越尖：

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
# ### The sparsity measure $M$ and its estimate $\bar M$
#
# How far is a row from uniform? Informer measures it with the Kullback–Leibler divergence of the
# uniform distribution from the row, which works out to the log-sum-exp of the scores minus their
# mean. Without the constant $\ln L_K$, that is the paper's **sparsity measure** (its Eq. 2):
#
# $$M(q_i, K) = \mathrm{LSE}_j(s_{ij}) - \frac{1}{L_K}\sum_j s_{ij}
# = \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K,
# \qquad \mathrm{LSE}_j(s_{ij}) = \ln \sum_j e^{s_{ij}}.$$
#
# A uniform row has the smallest possible $M$, $\ln L_K$ (the divergence is 0), and $M$ grows as
# the row moves away from uniform. Log-sum-exp needs every score and an exponential of each; the
# paper replaces it by the max, and ranks the queries by the estimate $\bar M$, the **max-mean
# measurement** (its Eq. 4):
#
# $$\bar M(q_i, K) = \max_j s_{ij} - \frac{1}{L_K}\sum_j s_{ij}.$$
#
# $\bar M = 0$ exactly when all the scores are equal. Log-sum-exp is a smooth maximum:
# $\max_j s_{ij} \le \mathrm{LSE}_j(s_{ij}) \le \max_j s_{ij} + \ln L_K$ (the sum has $L_K$ terms, the
# largest of them $e^{\max}$). Subtract the mean and you get the paper's Lemma 1, and with
# $M = \mathrm{KL} + \ln L_K$ a bound on the divergence:
#
# $$\bar M \;\le\; M \;\le\; \bar M + \ln L_K, \qquad
# \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) \;\le\; \bar M(q_i, K) \;\le\; \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K .$$
#
# A small $\bar M$ forces a small divergence: a row close to uniform, an output close to $\bar v$.
# Pinsker's inequality makes that precise: every feature of $o_i - \bar v$ is at most
# $\sqrt{2 \bar M}\,\max_j |v_j|$ in size. Checked on the four rows, and on 1000 random rows of
# scores (float64, spreads from 0.01 to 10):

# %% [markdown] tags=["lang-zh"] en_hash="4c96e43e1d"
# ### 稀疏性度量 $M$ 及其估计 $\bar M$
#
# 一行离均匀分布有多远？Informer 用均匀分布相对这一行的 KL 散度来衡量，算出来正是分数的 log-sum-exp 减去分数的平均值。去掉常数 $\ln L_K$，就是论文的**稀疏性度量**（式 2）：
#
# $$M(q_i, K) = \mathrm{LSE}_j(s_{ij}) - \frac{1}{L_K}\sum_j s_{ij}
# = \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K,
# \qquad \mathrm{LSE}_j(s_{ij}) = \ln \sum_j e^{s_{ij}}.$$
#
# 均匀的行 $M$ 最小，等于 $\ln L_K$（散度为 0）；行越偏离均匀，$M$ 越大。log-sum-exp 要用到每一个分数，还要对每个分数求指数；论文把它换成最大值，用估计量 $\bar M$，即**最大值−平均值度量**（式 4）给查询排序：
#
# $$\bar M(q_i, K) = \max_j s_{ij} - \frac{1}{L_K}\sum_j s_{ij}.$$
#
# 当且仅当所有分数都相等时 $\bar M = 0$。log-sum-exp 是一个平滑的最大值：$\max_j s_{ij} \le \mathrm{LSE}_j(s_{ij}) \le \max_j s_{ij} + \ln L_K$（这个和有 $L_K$ 项，最大的一项是 $e^{\max}$）。两边减去平均值，就是论文的引理 1；再代入 $M = \mathrm{KL} + \ln L_K$，就得到散度的上下界：
#
# $$\bar M \;\le\; M \;\le\; \bar M + \ln L_K, \qquad
# \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) \;\le\; \bar M(q_i, K) \;\le\; \mathrm{KL}(\mathrm{uniform} \,\|\, p_i) + \ln L_K .$$
#
# $\bar M$ 小，散度就一定小：这一行接近均匀，输出接近 $\bar v$。Pinsker 不等式给出了精确的说法：$o_i - \bar v$ 每个特征的绝对值都不超过 $\sqrt{2 \bar M}\,\max_j |v_j|$。下面在这四行上验证，也在 1000 行随机分数上验证（float64，分数的分散程度从 0.01 到 10）：

# %%
def lse_facts(scores):
    # lang: en
    """For rows of scores (R, L_K): max, LSE, mean, M = LSE − mean, M̄ = max − mean and
    KL(uniform ‖ softmax row), each (R,)."""
    # lang: zh
    """对若干行分数 (R, L_K)：最大值、LSE、平均值、M = LSE − 平均值、M̄ = 最大值 − 平均值，
    以及 KL(uniform ‖ softmax 行)，形状都是 (R,)。"""
    # lang: end
    n = scores.shape[-1]
    top, lse, mean = scores.amax(-1), scores.logsumexp(-1), scores.mean(-1)
    kl = (-math.log(n) - scores.log_softmax(-1)).mean(-1)  # Σ_j (1/n) · ln((1/n) / p_j)
    return top, lse, mean, lse - mean, top - mean, kl


g_rows = torch.Generator().manual_seed(1)
spread = torch.logspace(-2, 1, 1000, dtype=torch.float64)[:, None]  # (1000, 1)
random_rows = spread * torch.randn(1000, L_K, generator=g_rows, dtype=torch.float64)  # (1000, L_K)
for rows in (scores.double(), random_rows):
    top, lse, mean, M, M_bar, kl = lse_facts(rows)
    ln_n, slack = math.log(L_K), 1e-9
    facts = [
        bool(((top <= lse + slack) & (lse <= top + ln_n + slack)).all()),
        torch.allclose(M, kl + ln_n),
        bool(((M_bar <= M + slack) & (M <= M_bar + ln_n + slack)).all()),
        bool(((kl <= M_bar + slack) & (M_bar <= kl + ln_n + slack)).all()),
    ]
    # lang: en
    claim(f"{len(rows)} rows: max ≤ LSE ≤ max + ln L_K; M = KL + ln L_K; M̄ ≤ M ≤ M̄ + ln L_K; KL ≤ M̄ ≤ KL + ln L_K",
          all(facts))
    # lang: zh
    claim(f"{len(rows)} 行：max ≤ LSE ≤ max + ln L_K；M = KL + ln L_K；M̄ ≤ M ≤ M̄ + ln L_K；KL ≤ M̄ ≤ KL + ln L_K",
          all(facts))
    # lang: end

M_bar_rows = lse_facts(scores)[4]
bound = (2 * M_bar_rows).sqrt() * values.abs().max()  # (4,)
print("M̄ =", M_bar_rows)
# lang: en
claim("M̄ grows with the query's length (it is proportional to it)", bool((M_bar_rows.diff() > 0).all()))
claim("every feature of o_i − mean(V) is at most √(2M̄)·max|v| in size, for all four queries",
      bool(((outputs - mean_value).abs().amax(-1) <= bound).all()))
# lang: zh
claim("M̄ 随查询的长度增大（与长度成正比）", bool((M_bar_rows.diff() > 0).all()))
claim("对四个查询，o_i − mean(V) 的每个特征的绝对值都不超过 √(2M̄)·max|v|",
      bool(((outputs - mean_value).abs().amax(-1) <= bound).all()))
# lang: end

# %% [markdown] tags=["lang-en"]
# The four rows, each with its $\bar M$ (the dashed line is the uniform weight $1/32$):

# %% [markdown] tags=["lang-zh"] en_hash="7e7ecf7642"
# 这四行各自的 $\bar M$ 如下（虚线是均匀权重 $1/32$）：

# %%
fig, ax = plt.subplots(figsize=(6.5, 5.0), layout="constrained")
weight_rows(weights, M_bar_rows, ax=ax, labels=[f"|q| = {t:g}" for t in query_lengths.tolist()])
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Estimating $\bar M$ from a sample of keys
#
# Computing $\bar M$ exactly still needs all $L_K$ scores of the query: the very cost ProbSparse
# wants to avoid. It estimates $\bar M$ from a sample instead: for each query,
# $U = c \cdot \lceil \ln L_K \rceil$ key positions drawn at random (with replacement), where $c$ is
# the `factor` (5 by default), and the max and the mean are taken over those $U$ scores only. $U$ grows with the logarithm of
# the length (and never exceeds $L_K$):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="913d803812"
# ## 3. 用键的样本估计 $\bar M$
#
# 精确计算 $\bar M$ 仍然需要这个查询的全部 $L_K$ 个分数，而这正是 ProbSparse 想要省掉的代价。所以它改用样本来估计 $\bar M$：为每个查询随机抽取（有放回）$U = c \cdot \lceil \ln L_K \rceil$ 个键的位置，其中 $c$ 是 `factor`（默认为 5），最大值和平均值都只在这 $U$ 个分数上计算。$U$ 随长度的对数增长（并且不会超过 $L_K$）：

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
#   positions of query $i$. One sample serves every batch item and every head, as in the official
#   code.
# - `sampled_scores(query, key, index)`: $(B, H, L_Q, U)$, each query scored against its own $U$
#   keys only; the $(L_Q, L_K)$ matrix of scores is never formed.
# - `sparsity_measure(scores)`: $\bar M$, max − mean over the last axis, $(B, H, L_Q)$.
#
# As in the official code, these scores are **unscaled**, $q_i \cdot k_j$ without the $1/\sqrt{D}$:
# the scale multiplies every query's $\bar M$ by the same positive number, so it does not change
# which queries have the largest $\bar M$. With $D = 64$ the scale is $1/8$, a power of two, and dividing by
# it is exact in floating point, so the check below can ask for bit-for-bit equality:

# %% [markdown] tags=["lang-zh"] en_hash="5ed1737519"
# 本课程的 `course_utils.probsparse` 为每一步提供一个函数：
#
# - `sample_keys(L_Q, L_K, U, generator=...)`：样本，形状为 $(L_Q, U)$ 的 int64 张量；第 $i$ 行是查询 $i$ 所抽到的键的位置。与官方代码一样，批量中的每个样本、每个头都共用这一份键的样本。
# - `sampled_scores(query, key, index)`：形状为 $(B, H, L_Q, U)$，每个查询只与自己的 $U$ 个键打分；$(L_Q, L_K)$ 的分数矩阵从头到尾都不会出现。
# - `sparsity_measure(scores)`：即 $\bar M$，在最后一维上取最大值减平均值，形状为 $(B, H, L_Q)$。
#
# 与官方代码一样，这些分数是**未缩放**的，即 $q_i \cdot k_j$，不乘 $1/\sqrt{D}$：缩放让每个查询的 $\bar M$ 都乘上同一个正数，所以不会改变哪些查询的 $\bar M$ 最大。$D = 64$ 时缩放系数是 $1/8$，恰好是 2 的幂，在浮点数里除以它是精确的，所以下面的检查可以要求逐位相等：

# %%
B, H, L, D = 2, 4, 96, 64
g3 = torch.Generator().manual_seed(0)
query, key, value = (torch.randn(B, H, L, D, generator=g3) for _ in range(3))  # (B, H, L, D)
U = sample_count(L)
index = sample_keys(L, L, U, generator=torch.Generator().manual_seed(1))  # (L_Q, U)
sample_scores = sampled_scores(query, key, index)  # (B, H, L_Q, U)
M_bar = sparsity_measure(sample_scores)  # (B, H, L_Q)
print("index:", tuple(index.shape), " sample_scores:", tuple(sample_scores.shape), " M_bar:", tuple(M_bar.shape))
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
claim("M̄ computed from the scaled scores is exactly M̄ / 8", torch.equal(M_scaled, M_bar / 8))
claim(f"so the same {U} queries have the largest M̄ in every (batch item, head)",
      torch.equal(M_scaled.topk(U).indices, M_bar.topk(U).indices))
# lang: zh
claim("scores[b, h, i, s] 就是 q_i · k_j，其中 j = index[i, s]，对每个样本、每个头都成立",
      torch.allclose(sample_scores, picked, atol=1e-4))
claim("由缩放后的分数算出的 M̄ 恰好等于 M̄ / 8", torch.equal(M_scaled, M_bar / 8))
claim(f"所以在每个（批量样本，头）里，M̄ 最大的都是同样的 {U} 个查询",
      torch.equal(M_scaled.topk(U).indices, M_bar.topk(U).indices))
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
# same for every batch item and head. Return the sampled $\bar M$, $(B, H, L_Q)$ in query's dtype:
# for each query, the max minus the mean of its $U$ sampled **unscaled** scores
# $q_i \cdot k_{\mathrm{index}[i, s]}$. A position may appear twice in a row of `index` (the sample
# is drawn with replacement): it counts twice in the mean, which divides by $U$. The check compares
# values only, not gradients: the measure only chooses queries, and no gradient flows through it
# (`probsparse` computes it under `torch.no_grad()`). Leave the inputs as they are: a function
# that changes an argument in place fails. Write the steps yourself: the check refuses the course
# functions that compute them, `probsparse.sampled_scores` (and its helper
# `probsparse._gathered_scores`), `probsparse.sparsity_measure`, and the study's
# `probsparse_study.exact_measure`, `probsparse_study._exact_from` and
# `probsparse_study._sampled_from`. A start: `key[:, :, index]` is $(B, H, L_Q, U, D)$, every
# query's own keys.

# %% [markdown] tags=["lang-zh"] en_hash="72bda98865"
# ### 练习 1：用样本估计的度量
#
# 写出 `sampled_measure(query, key, index)`。`query` 的形状为 $(B, H, L_Q, D)$，`key` 为 $(B, H, L_K, D)$，`index` 是形状为 $(L_Q, U)$ 的 int64 张量：第 $i$ 行是为查询 $i$ 抽取的 $U$ 个键的位置，批量中的每个样本、每个头都相同。返回采样估计的 $\bar M$，形状为 $(B, H, L_Q)$，dtype 与 query 相同：对每个查询，取它的 $U$ 个**未缩放**的采样分数 $q_i \cdot k_{\mathrm{index}[i, s]}$ 的最大值减平均值。`index` 的同一行里可能出现同一个位置两次（样本是有放回抽取的）：在平均值里它也算两次，平均值除以的是 $U$。检查只比较数值，不比较梯度：这个度量只用来挑选查询，不会有梯度流过它（`probsparse` 在 `torch.no_grad()` 下计算它）。不要改动输入：原地修改了某个参数的函数通不过检查。请自己写出每一步：检查不接受课程里替你完成这些步骤的函数，即 `probsparse.sampled_scores`（及其辅助函数 `probsparse._gathered_scores`）、`probsparse.sparsity_measure`，以及实验模块里的 `probsparse_study.exact_measure`、`probsparse_study._exact_from` 和 `probsparse_study._sampled_from`。提示：`key[:, :, index]` 的形状是 $(B, H, L_Q, U, D)$，也就是每个查询自己的那些键。

# %% tags=["exercise"] exercise="05.sampled_measure"
def sampled_measure(query, key, index):
    # lang: en
    """The sparsity measure of every query, from its sampled keys only.

    query: (B, H, L_Q, D), key: (B, H, L_K, D), float32 or float64.
    index: (L_Q, U) int64; row i holds the U key positions sampled for query i (repeats
    allowed), one sample shared by every batch item and head.
    Returns M̄: (B, H, L_Q), query's dtype, with M̄[b, h, i] the max minus the mean of the U
    unscaled scores query[b, h, i] · key[b, h, index[i, s]], s = 0 … U − 1 (no 1/√D: a
    positive scale does not change which queries rank highest). Values only: no gradient is
    compared. The inputs stay as they are.
    """
    # lang: zh
    """只用采样到的键，算出每个查询的稀疏性度量。

    query：(B, H, L_Q, D)，key：(B, H, L_K, D)，float32 或 float64。
    index：(L_Q, U) 的 int64 张量；第 i 行是为查询 i 采样的 U 个键位置（可以重复），
    所有批量样本和所有头共用同一份采样。
    返回 M̄：(B, H, L_Q)，dtype 与 query 相同；M̄[b, h, i] 是 U 个未缩放分数
    query[b, h, i] · key[b, h, index[i, s]]（s = 0 … U − 1）的最大值减去平均值
    （不乘 1/√D：乘以一个正数不会改变哪些查询排在最前面）。只比较数值，不比较梯度。
    不要改动输入。
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
from course_utils import check
check("05.sampled_measure", sampled_measure)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. The top $u$ queries attend; the lazy ones get mean(V)
#
# With an estimate of $\bar M$ for every query, ProbSparse keeps in each (batch item, head) the
# $u = c \cdot \lceil \ln L_Q \rceil$ queries with the largest $\bar M$, the **chosen** queries, and
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

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="dde5625eea"
# ## 4. 前 $u$ 个查询做注意力，惰性查询得到 mean(V)
#
# 有了每个查询的 $\bar M$ 估计值，ProbSparse 在每个（批量样本，头）里保留 $\bar M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询，即**被选中的**查询，让它们在全部键上做带缩放的完整注意力：只需 $u \times L_K$ 个分数，而不是 $L_Q \times L_K$ 个。其余每个查询都当作惰性查询：它的输出是 $\bar v$，即值的平均，每个（批量样本，头）只算一次。
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
# Two consequences of giving every lazy query $\bar v$. First, all the lazy queries of a head get
# **the same output**, whatever the query is: a lazy position's output says nothing about its own
# query. Second, a lazy query's output does not depend on its query at all, so in training it
# sends **no gradient** back to the query projection $W_Q$ (the choice itself is made under
# `torch.no_grad()`: it is not a function to differentiate). At each step only the $u$ chosen
# queries of a head teach $W_Q$ anything. Below, the queries come from a linear layer, as in a
# model, and a loss reads the lazy outputs only:

# %% [markdown] tags=["lang-zh"] en_hash="d90eaff42e"
# 给每个惰性查询都输出 $\bar v$，会带来两个后果。第一，同一个头里所有惰性查询的**输出完全相同**，与查询本身是什么无关：惰性位置上的输出，丝毫不反映那个位置的查询。第二，惰性查询的输出根本不依赖它的查询，所以训练时它不会向查询投影 $W_Q$ 传回**任何梯度**（挑选本身在 `torch.no_grad()` 下进行：它不是一个要求导的函数）。每一步里，只有每个头中被选中的 $u$ 个查询能教会 $W_Q$ 一点东西。下面让查询像在模型里一样由一个线性层算出，并让损失只读取惰性查询的输出：

# %%
g_proj = torch.Generator().manual_seed(4)
# lang: en
x4 = torch.randn(1, 2, L4, D4, generator=g_proj)  # (B, H, L, D): what the layer projects
# lang: zh
x4 = torch.randn(1, 2, L4, D4, generator=g_proj)  # (B, H, L, D)：这一层要投影的输入
# lang: end
W_Q = (torch.randn(D4, D4, generator=g_proj) / math.sqrt(D4)).requires_grad_()  # (D, D)
# lang: en
projected = x4 @ W_Q  # (B, H, L, D): the queries
# lang: zh
projected = x4 @ W_Q  # (B, H, L, D)：查询
# lang: end
lazy_output, lazy_selected = prob_sparse_attention(projected, k4, v4, factor=2, generator=torch.Generator().manual_seed(3))
lazy4 = torch.ones(1, 2, L4, dtype=torch.bool).scatter(-1, lazy_selected, False)  # (B, H, L_Q)
# lang: en
from_lazy = torch.autograd.grad(lazy_output[lazy4].pow(2).sum(), W_Q, retain_graph=True)[0]  # d(loss)/d(W_Q)
from_chosen = torch.autograd.grad(lazy_output[~lazy4].pow(2).sum(), W_Q)[0]  # the same, for the chosen rows
# lang: zh
from_lazy = torch.autograd.grad(lazy_output[lazy4].pow(2).sum(), W_Q, retain_graph=True)[0]  # d(损失)/d(W_Q)
from_chosen = torch.autograd.grad(lazy_output[~lazy4].pow(2).sum(), W_Q)[0]  # 同上，换成被选中的行
# lang: end
# lang: en
lazy_rows = lazy_output[0, 0][lazy4[0, 0]]  # (number of lazy queries, D_v)
# lang: zh
lazy_rows = lazy_output[0, 0][lazy4[0, 0]]  # (惰性查询的个数, D_v)
# lang: end
# lang: en
claim("all the lazy queries of head 0 get exactly the same output", bool((lazy_rows == lazy_rows[0]).all()))
claim("a loss on the lazy outputs sends no gradient at all to W_Q", bool((from_lazy == 0).all()))
claim("while a loss on the chosen outputs does", bool((from_chosen != 0).any()))
# lang: zh
claim("头 0 中所有惰性查询的输出完全相同", bool((lazy_rows == lazy_rows[0]).all()))
claim("只读取惰性输出的损失不会给 W_Q 传回任何梯度", bool((from_lazy == 0).all()))
claim("而读取被选中输出的损失会传回梯度", bool((from_chosen != 0).any()))
# lang: end

# %% [markdown] tags=["lang-en"]
# The weights of head 0. The chosen queries (marked ◂) have a softmax row of their own; every
# other row is the same flat $1/24$:

# %% [markdown] tags=["lang-zh"] en_hash="731384797d"
# 头 0 的权重。被选中的查询（标有 ◂）各有自己的 softmax 行；其余各行都是同样平坦的 $1/24$：

# %%
fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
chosen_weights(weights4[0, 0], selected[0, 0], ax=ax)
plt.show()

# %% [markdown] tags=["lang-en"]
# When $L_Q \le c \cdot \lceil \ln L_Q \rceil$, $u$ is every query: at $L = 12$ with the default
# factor 5, $u = \min(12, 5 \cdot 3) = 12$. Then no query is lazy, and ProbSparse must be exactly
# full attention, gradients included. The values, against `F.scaled_dot_product_attention`:

# %% [markdown] tags=["lang-zh"] en_hash="b71e56687e"
# 当 $L_Q \le c \cdot \lceil \ln L_Q \rceil$ 时，$u$ 就是全部查询：$L = 12$、默认因子 5 时，$u = \min(12, 5 \cdot 3) = 12$。这时没有惰性查询，ProbSparse 必须与完整注意力完全一致，梯度也不例外。下面把输出值与 `F.scaled_dot_product_attention` 比较：

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
# gradients, and a function that changes an argument in place (say, `measure -= ...`) fails.
# Any function may be used, the course's own included (`probsparse.select_queries`,
# `probsparse.lazy_context`). `value.mean(-2, keepdim=True).expand(...)` is a view whose rows
# share memory, so do not write rows into it: write into a `.clone()`, or build the result with
# `scatter`.

# %% [markdown] tags=["lang-zh"] en_hash="b1cb32dbc9"
# ### 练习 2：前 $u$ 个查询做注意力，惰性查询取平均
#
# 写出 `top_u_attention(query, key, value, measure, u)`。`query` 的形状为 $(B, H, L_Q, D)$，`key` 为 $(B, H, L_K, D)$，`value` 为 $(B, H, L_K, D_v)$；`measure` 的形状为 $(B, H, L_Q)$，是已经算好的每个查询的度量；`u` 是一个整数。在每个（批量样本，头）里，度量最大的 `u` 个查询得到 $\mathrm{softmax}(q K^\top / \sqrt{D})\, V$；其余每个查询都得到全部值的平均。返回 $(B, H, L_Q, D_v)$，dtype 与 query 相同。检查还会比较梯度；原地修改了某个参数（比如 `measure -= ...`）的函数通不过检查。任何函数都可以用，课程自己的函数（`probsparse.select_queries`、`probsparse.lazy_context`）也可以。`value.mean(-2, keepdim=True).expand(...)` 是一个视图，各行共用同一块内存，所以不要往里面写行：先 `.clone()` 再写，或者用 `scatter` 构造结果。

# %% tags=["exercise"] exercise="05.top_u_attention"
def top_u_attention(query, key, value, measure, u):
    # lang: en
    """Full attention for the u most active queries, the mean of the values for the lazy ones.

    query: (B, H, L_Q, D), key: (B, H, L_K, D), value: (B, H, L_K, D_v), float32 or float64.
    measure: (B, H, L_Q), the sparsity measure of every query (no two equal in a row);
    u: an int, 1 ≤ u ≤ L_Q. In each (batch item, head) the u queries with the largest measure
    get softmax(q · Kᵀ / √D) · V over all L_K keys; every other query gets the mean of all values.
    Returns (B, H, L_Q, D_v), query's dtype; gradients are compared; the inputs stay as they are.
    """
    # lang: zh
    """度量最大的 u 个活跃查询做完整注意力，惰性查询得到所有值的平均。

    query：(B, H, L_Q, D)，key：(B, H, L_K, D)，value：(B, H, L_K, D_v)，float32 或 float64。
    measure：(B, H, L_Q)，每个查询的稀疏性度量（同一行中没有相等的值）；
    u：整数，1 ≤ u ≤ L_Q。在每个（批量样本，头）中，度量最大的 u 个查询在全部 L_K 个键上
    计算 softmax(q · Kᵀ / √D) · V；其余每个查询都得到所有值的平均。
    返回 (B, H, L_Q, D_v)，dtype 与 query 相同；检查会比较梯度；不要改动输入。
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
from course_utils import check
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
# `prob_sparse_attention(..., causal=True)` does all three (it needs $L_Q = L_K$). The official
# code's causal mode does the first only: section 7.5 shows what it does instead. The inputs of
# section 4, causal now:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d68c93118b"
# ## 5. 因果模式：解码器里的 ProbSparse
#
# 在解码器里，查询 $i$ 只能看到键 $0 \dots i$（第 02 课的因果掩码）。有三步要改：
#
# - 位置 $p$ 上被选中的查询只对键 $0 \dots p$ 做注意力：它的分数行像任何因果行一样加上掩码；
# - 惰性查询 $i$ 得到它能看到的那些值 $v_0 \dots v_i$ 的平均，即**累积均值**（cumulative mean）：第 $i$ 行是 `value.cumsum(-2)` 除以 $i + 1$，而不是全部值的平均；
# - 查询 $i$ 的样本只从位置 $0 \dots i$ 中抽取，这样它的度量永远不会读到后面的键。
#
# `prob_sparse_attention(..., causal=True)` 把这三步都做了（它要求 $L_Q = L_K$）。官方代码的因果模式只做了第一步，另外两步它是怎么做的，见第 7.5 节。还是第 4 节的输入，这次用因果模式：

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

fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
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
# ### Causal sampling chooses fewer early queries
#
# Drawing query $i$'s sample from keys $0 \dots i$ has a price. Query 0 can only sample key 0,
# $U$ times over: its scores are all equal, its $\bar M$ is 0, and it is never chosen. Query 5
# samples among 6 keys, so the max of its $U$ scores is the max of at most 6 different ones. The
# earlier the query, the fewer keys its estimate sees and the smaller it tends to be, so fewer
# early queries win. The share of the chosen queries that sit in the first quarter of the
# sequence, on random inputs with $L = 96$ ($U = u = 25$, 4 batch items of 8 heads), against a
# sample drawn from all the keys as without a mask:

# %% [markdown] tags=["lang-zh"] en_hash="75dabb63b2"
# ### 因果采样选中的靠前查询更少
#
# 查询 $i$ 只从键 $0 \dots i$ 中采样，是有代价的。查询 0 只能采到键 0，而且要采 $U$ 次：它的分数全都相等，$\bar M$ 为 0，永远不会被选中。查询 5 只能在 6 个键里采样，它 $U$ 个分数的最大值，最多只是 6 个不同分数中的最大值。查询越靠前，估计时看到的键越少，估计值往往越小，被选中的也就越少。下面在 $L = 96$（$U = u = 25$，4 个样本、各 8 个头）的随机输入上，统计被选中的查询里有多少落在序列的前四分之一，并与不加掩码时那样从全部键中采样的结果对比：

# %%
g5 = torch.Generator().manual_seed(5)
q5, k5, _ = study.random_inputs(4, 8, 96, 64, generator=g5)  # (B, H, L, D)
causal_share = study.early_share(q5, k5, causal=True, generator=g5)
all_keys_share = study.early_share(q5, k5, causal=False, generator=g5)
exact_choice = study.exact_measure(q5, k5, causal=True).topk(25, dim=-1).indices  # (B, H, u)
exact_share = (exact_choice < 24).double().mean().item()
# lang: en
claim("with samples drawn from keys 0 … i, fewer than a fifth of the chosen queries are in the first quarter",
      causal_share < 0.2)
claim("with samples drawn from all keys, more than a fifth are", all_keys_share > 0.2)
claim("and the exact M̄ over keys 0 … i chooses fewer early queries still", exact_share < causal_share)
# lang: zh
claim("从键 0 … i 中采样时，被选中的查询落在前四分之一的不到五分之一", causal_share < 0.2)
claim("从全部键中采样时，则超过五分之一", all_keys_share > 0.2)
claim("而在键 0 … i 上精确计算的 M̄ 选中的靠前查询还要更少", exact_share < causal_share)
# lang: end

# %% [markdown] tags=["lang-en"]
# The exact $\bar M$ over keys $0 \dots i$ is no cure: the max minus the mean of fewer scores is
# smaller too. A causal measure that never reads the future leans towards later queries; one that
# samples all the keys reads the future. Keep it in mind when a decoder's early positions matter.

# %% [markdown] tags=["lang-zh"] en_hash="bb6171f86d"
# 在键 $0 \dots i$ 上精确计算 $\bar M$ 也解决不了问题：分数越少，最大值减平均值也越小。永远不读未来的因果度量会偏向靠后的查询；从全部键中采样的度量则会读到未来。如果解码器靠前的位置很重要，要记住这一点。

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
# influence on which queries attend: the choice is a top $u$ over the whole sequence. The official
# code's causal mode chooses by a top $u$ over the whole sequence too; on top of that, its sample
# for query $i$ is drawn from all the keys, and its lazy queries get a sum instead of a mean
# (section 7.5).

# %% [markdown] tags=["lang-zh"] en_hash="7a10bc53e1"
# 所以，因果 ProbSparse 让未来的值进不了任何输出，却挡不住未来对“哪些查询做注意力”的影响：选的是整个序列的前 $u$ 名。官方代码的因果模式同样在整个序列上取前 $u$ 名；不仅如此，它给查询 $i$ 的样本是从全部键中抽取的，惰性查询得到的也是和而不是平均（见第 7.5 节）。

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: the causal step
#
# Write `causal_prob_sparse(query, key, value, selected)`. `query` and `key` are $(B, H, L, D)$,
# `value` $(B, H, L, D_v)$, and `selected` is $(B, H, u)$ int64: the positions of the chosen
# queries of each (batch item, head), distinct, in any order. A chosen query at position $p$ gets
# $\mathrm{softmax}(q_p K^\top / \sqrt{D})\, V$ over keys $0 \dots p$ only; every other query $i$
# gets the mean of $v_0 \dots v_i$. Return $(B, H, L, D_v)$ in query's dtype. The check compares
# gradients too, and a function that changes an argument in place fails. Any function may be
# used, the course's own included (`probsparse.lazy_context`, `probsparse.causal_keep`).

# %% [markdown] tags=["lang-zh"] en_hash="255272c49f"
# ### 练习 3：因果的这一步
#
# 写出 `causal_prob_sparse(query, key, value, selected)`。`query` 和 `key` 的形状为 $(B, H, L, D)$，`value` 为 $(B, H, L, D_v)$，`selected` 是形状为 $(B, H, u)$ 的 int64 张量：每个（批量样本，头）中被选中查询的位置，互不相同，顺序任意。位置 $p$ 上被选中的查询只在键 $0 \dots p$ 上得到 $\mathrm{softmax}(q_p K^\top / \sqrt{D})\, V$；其余每个查询 $i$ 都得到 $v_0 \dots v_i$ 的平均。返回 $(B, H, L, D_v)$，dtype 与 query 相同。检查也会比较梯度；原地修改了某个参数的函数通不过检查。任何函数都可以用，课程自己的函数（`probsparse.lazy_context`、`probsparse.causal_keep`）也可以。

# %% tags=["exercise"] exercise="05.causal_prob_sparse"
def causal_prob_sparse(query, key, value, selected):
    # lang: en
    """ProbSparse self-attention for a decoder: no query sees a later position.

    query, key: (B, H, L, D), value: (B, H, L, D_v), float32 or float64.
    selected: (B, H, u) int64, the positions of the chosen queries of each (batch item, head),
    distinct, in any order. The chosen query at position p gets softmax(q_p · k_j / √D) over
    the keys j = 0 … p, times their values; every other query i gets the mean of v_0 … v_i.
    Returns (B, H, L, D_v), query's dtype; gradients are compared; the inputs stay as they are.
    """
    # lang: zh
    """用于解码器的 ProbSparse 自注意力：任何查询都看不到它之后的位置。

    query、key：(B, H, L, D)，value：(B, H, L, D_v)，float32 或 float64。
    selected：(B, H, u) 的 int64 张量，是每个（批量样本，头）中被选中查询的位置，互不相同，
    顺序任意。位置 p 上被选中的查询在键 j = 0 … p 上计算 softmax(q_p · k_j / √D)，再乘以
    这些键对应的值；其余每个查询 i 都得到 v_0 … v_i 的平均。
    返回 (B, H, L, D_v)，dtype 与 query 相同；检查会比较梯度；不要改动输入。
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
from course_utils import check
check("05.causal_prob_sparse", causal_prob_sparse)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 6. The shape walkthrough
#
# The widely copied re-implementation prints the shape of every intermediate tensor of one call
# with $B = 32$, $H = 8$, $L = 96$, $D = 64$ and factor 5 (the official code prints nothing, and
# takes the same steps). The course's implementation prints nothing either;
# it records. Pass a `Trace` as `trace=` and every step is noted with its shape, whether it is a
# **view** of a tensor that exists already (no memory of its own) or a new tensor, and the bytes
# it allocated. `probsparse.walkthrough(...)` runs the algorithm on *meta* tensors, which have a
# shape and a dtype but no data, so the walkthrough of any size takes no memory and no time.
#
# The plain version, `prob_sparse_attention_plain`, takes the steps the way both codes do (both
# call the sampled $\bar M$ `M`; the trace keeps their names). "As a copy" is the tensor's number of elements times their size: what it would take with
# memory of its own.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f73b667b57"
# ## 6. 形状逐步解析
#
# 那份广为流传的重写版在 $B = 32$、$H = 8$、$L = 96$、$D = 64$、因子为 5 时，把一次调用中每个中间张量的形状都打印了出来（官方代码什么也不打印，步骤则相同）。本课程的实现也什么都不打印，而是把它们记录下来：把一个 `Trace` 作为 `trace=` 传入，每一步都会记下它的形状、它是一个已有张量的**视图**（没有自己的内存）还是一个新张量，以及它分配了多少字节。`probsparse.walkthrough(...)` 在 *meta* 张量上运行整个算法；meta 张量只有形状和 dtype，没有数据，所以任意尺寸的逐步解析都不占内存，也不花时间。
#
# 朴素版 `prob_sparse_attention_plain` 按这两份代码的方式完成每一步（两份代码都把采样估计的 $\bar M$ 叫作 `M`；记录里沿用它们的名字）。“若为副本”是张量的元素个数乘以每个元素的大小，即它若有自己的内存需要占多少。

# %%
plain = walkthrough(batch=32, heads=8, length=96, dim=64, factor=5)
print(walkthrough_table(plain))
# lang: en
# the shapes the re-implementation prints for B = 32, L = 96, H = 8, D = 64
# lang: zh
# 重写版在 B = 32、L = 96、H = 8、D = 64 时打印的形状
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
claim("every shape the re-implementation prints is the shape of the same step here",
      all(plain[our_names.get(name, name)].shape == shape for name, shape in printed.items()))
claim("K_expand is a view: 0 bytes of its own, though as a copy it would take 604.0 MB",
      expand.view and expand.bytes == 0 and expand.logical_bytes == 32 * 8 * 96 * 96 * 64 * 4)
claim("K_sample is new: B·H·L_Q·U·D·4 = 157,286,400 bytes", sample.bytes == 32 * 8 * 96 * 25 * 64 * 4 == 157_286_400)
claim(f"K_sample alone is {100 * sample.bytes / plain.total_bytes:.0f} % of all the plain version allocates",
      sample.bytes > 0.8 * plain.total_bytes)
# lang: zh
claim("重写版打印的每个形状，都与这里同一步的形状相同",
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
# lang: en
# message(key): the title in the notebook's language, from the course's catalogue (course_utils.i18n)
# lang: zh
# message(key)：从课程的文案目录（course_utils.i18n）中取出当前笔记本语言的标题
# lang: end
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
# to float rounding: the products are summed in another order). On real tensors of the
# re-implementation's per-head sizes ($B = 2$ here):

# %% [markdown] tags=["lang-zh"] en_hash="f931b58c30"
# 给定同一份样本，两个版本选中相同的查询，返回相同的输出（只差浮点舍入：乘积的求和顺序不同）。下面在与重写版每个头尺寸相同的真实张量上验证（这里 $B = 2$）：

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
# The explorer starts at the re-implementation's sizes. Its chart shows the bytes every step of both
# versions allocates, on a log scale; the dashed outline is `K_expand`, a view, drawn at the size
# it would have as a copy. Move the slider to pick the length $L$; type the batch size $B$ and the
# number of heads $H$, pick the features per head $D$ and the factor $c$. The chart and the tables
# follow. Everything runs on meta tensors, so even $L = 16384$ answers at once.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="45840e4cb9"
# ### 探索逐步解析
#
# 探索器一开始用的就是重写版的那组尺寸。图中用对数刻度画出两个版本每一步分配的字节数；虚线框是 `K_expand`：它是视图，按它若为副本时的大小画出。拖动滑块选择长度 $L$；输入批量大小 $B$ 和头数 $H$，再选择每个头的特征数 $D$ 和因子 $c$。图和表会随之更新。一切都在 meta 张量上运行，所以即便 $L = 16384$ 也能立即给出结果。

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
# ## 7. Spot the bug: the re-implementation and the official code
#
# The widely copied re-implementation is a `ProbAttention` module that prints the shape of every
# intermediate (section 6 walked through its steps at its own sizes). It runs without an error,
# and it has eight defects. The official Informer code shares three of them (the dropout, the
# divisor, the global random state) and has two of its own, in its causal mode. Each one below
# is re-created in our own code, small enough to read, then its symptom is measured, then it is
# fixed. (One more is only a nuisance: the re-implementation uses `np` without importing it.)
#
# ### 7.1 The einsum that sums the sampled keys away
#
# Step 1 of the algorithm scores each query against its own $U$ sampled keys. The
# re-implementation gathers them into `K_sample` (B, H, L_Q, U, D), as section 6 showed, and then
# writes the product as an einsum. Here is that line, re-created (same subscripts, our letters):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="70e2d7ab22"
# ## 7. 找 bug：重写版与官方代码
#
# 那份广为流传的重写版是一个 `ProbAttention` 模块，会把每个中间结果的形状都打印出来（第 6 节按它自己的尺寸逐步解析了每一步）。它运行起来不报错，却有八个缺陷。Informer 官方代码也有其中三个（dropout、除数、全局随机状态），另外在因果模式里还有两个自己的缺陷。下面逐一用我们自己的代码重现每个缺陷（短到一眼能读完），测出它的症状，再修好它。（还有一个只是小麻烦：重写版用了 `np` 却没有导入。）
#
# ### 7.1 把采样的键求和求没了的 einsum
#
# 算法的第 1 步让每个查询只与自己的 $U$ 个采样键打分。重写版先把这些键收集成 `K_sample` (B, H, L_Q, U, D)（第 6 节展示过），再用一个 einsum 写出这个乘积。下面重现这一行（[下标]{.not-term}结构相同，字母是我们的）：

# %%
def informer_sampled_scores(query, K_sample):
    # lang: en
    """The re-implementation's sampled scores, re-created.

    query: (B, H, L_Q, D); K_sample: (B, H, L_Q, U, D), query i's own sampled keys in row i.
    Returns (B, H, L_Q, U).
    """
    # lang: zh
    """重现重写版计算采样分数的那一步。

    query：(B, H, L_Q, D)；K_sample：(B, H, L_Q, U, D)，第 i 行是查询 i 自己采样到的键。
    返回 (B, H, L_Q, U)。
    """
    # lang: end
    scores = torch.einsum("bhqxd,bhpsd->bhqxs", query.unsqueeze(-2), K_sample)  # (B, H, L_Q, 1, U)
    return scores.squeeze(-2)


# %% [markdown] tags=["lang-en"]
# **Your turn.** The shapes come out right, (B, H, L_Q, U). Before you read on, look at the
# subscripts: which letter indexes the queries of `query`, which the rows of `K_sample`, and
# which letters survive the arrow?
#
# To see whether it matters, the inputs need queries that truly dominate, and a correct sampled
# measure that finds them; on random inputs not even the correct measure finds the most active
# queries (section 8). So: $L = 512$ positions, $D = 64$, 8 heads, every query of the same
# length. The keys come in 8 groups, each group along its own direction. In each head, 10
# queries point at a group, and their softmax row piles onto that group's keys: they dominate.
# 100 queries point *away* from a group: their row avoids that group and spreads over the others.
# Every other query points where the keys hardly differ: a nearly uniform row, lazy.
# (`study.aligned_queries` builds them; its docstring has the details.) Then the einsum's scores
# against the product it was meant to be, $q_i \cdot k_s$ for the keys $s$ that query $i$ sampled:

# %% [markdown] tags=["lang-zh"] en_hash="67f2e0a520"
# **轮到你了。** 形状是对的：(B, H, L_Q, U)。往下读之前，先看看[下标]{.not-term}：哪个字母索引 `query` 的查询，哪个字母索引 `K_sample` 的行，箭头之后又留下了哪些字母？
#
# 要看出它有没有影响，输入里得有真正占主导的查询，而且正确的采样度量要能找到它们；在随机输入上，连正确的度量也找不出最活跃的查询（第 8 节）。所以这样构造输入：$L = 512$ 个位置，$D = 64$，8 个头，所有查询长度相同。键分成 8 组，每组沿着自己的一个方向。每个头里，有 10 个查询指向某一组，它们的 softmax 行集中在这一组的键上：它们占主导。另有 100 个查询*背离*某一组：它们的行避开这一组，分散在其余各组上。其余的查询都指向键之间几乎没有差别的方向：行几乎是均匀的，属于惰性查询。（`study.aligned_queries` 负责构造，细节见它的文档字符串。）然后把 einsum 的分数与它本来要算的乘积比较：对查询 $i$ 采样到的每个键 $s$，算 $q_i \cdot k_s$：

# %%
bugs_rng = torch.Generator().manual_seed(9)
B71, H71, L71, D71 = 1, 8, 512, 64
q71, k71, v71, dominant71 = study.aligned_queries(B71, H71, L71, D71, generator=bugs_rng)
U71 = u71 = probsparse.sample_count(L71)  # 5·⌈ln 512⌉ = 35
index71 = probsparse.sample_keys(L71, L71, U71, generator=bugs_rng)  # (L_Q, U)
K_sample71 = k71[:, :, index71]  # (B, H, L_Q, U, D)
informer_scores71 = informer_sampled_scores(q71, K_sample71)
# lang: en
intended_scores71 = (q71.unsqueeze(-2) @ K_sample71.transpose(-2, -1)).squeeze(-2)  # each query, its own keys
summed_keys71 = K_sample71.sum(dim=2)  # (B, H, U, D): the s-th sampled keys of ALL queries, added up
# lang: zh
intended_scores71 = (q71.unsqueeze(-2) @ K_sample71.transpose(-2, -1)).squeeze(-2)  # 每个查询配它自己的键
summed_keys71 = K_sample71.sum(dim=2)  # (B, H, U, D)：所有查询的第 s 个采样键加在一起
# lang: end
# lang: en
claim("its scores are not the sampled products q_i · k_s", not torch.allclose(informer_scores71, intended_scores71, atol=1.0))
claim("each of its scores is q_i · (sum over all L_Q queries of their s-th sampled key)",
      torch.allclose(informer_scores71, q71 @ summed_keys71.transpose(-2, -1), rtol=1e-4, atol=1e-2))
# lang: zh
claim("它的分数不是采样乘积 q_i · k_s", not torch.allclose(informer_scores71, intended_scores71, atol=1.0))
claim("它的每个分数都是 q_i ·（全部 L_Q 个查询的第 s 个采样键之和）",
      torch.allclose(informer_scores71, q71 @ summed_keys71.transpose(-2, -1), rtol=1e-4, atol=1e-2))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The bug.** In `"bhqxd,bhpsd->bhqxs"`, `q` runs over the queries of `query` and `p` over the
# rows of `K_sample`, one row per query. `p` is not after the arrow, so einsum sums over it:
# every query is scored against the same $U$ vectors, each the sum of $L_Q$ sampled keys, instead
# of against its own sample. A sum of 512 keys drawn at random is a random vector like any other:
# the einsum's max − mean says how widely query $i$'s scores spread over all the keys, and
# nothing about whether a few of them stand out. A query that points at a group and one that
# points away from it spread equally widely. Which queries does each version choose, and what
# does ProbSparse then output?

# %% [markdown] tags=["lang-zh"] en_hash="f38adcdfc2"
# **Bug 在哪里。** 在 `"bhqxd,bhpsd->bhqxs"` 中，`q` 遍历 `query` 的查询，`p` 遍历 `K_sample` 的行（每个查询一行）。箭头之后没有 `p`，于是 einsum 对它求和：每个查询都和同样的 $U$ 个向量打分，每个向量是 $L_Q$ 个采样键之和，而不是和它自己的样本打分。随机抽出的 512 个键加起来，不过是又一个随机向量：einsum 得到的最大值减平均值，只反映查询 $i$ 的分数在全部键上分散得有多开，却看不出其中是否有少数几个特别突出。指向某一组的查询和背离这一组的查询，分数分散得一样开。两个版本各选中哪些查询？ProbSparse 随后输出什么？

# %%
# lang: en
chosen71 = study.chosen_by(q71, k71, index71, u71)  # (B, H, u): the correct sampled product
# lang: zh
chosen71 = study.chosen_by(q71, k71, index71, u71)  # (B, H, u)：正确的采样乘积
# lang: end
einsum_chosen71 = study.chosen_by(q71, k71, index71, u71, scores=informer_sampled_scores)
full71 = F.scaled_dot_product_attention(q71, k71, v71)  # (B, H, L, D)
# lang: en
output71 = study.attend_chosen(q71, k71, v71, chosen71)  # ProbSparse with each choice
# lang: zh
output71 = study.attend_chosen(q71, k71, v71, chosen71)  # 分别用两种选择的 ProbSparse
# lang: end
einsum_output71 = study.attend_chosen(q71, k71, v71, einsum_chosen71)
found71 = {"correct": study.recall(chosen71, dominant71), "einsum": study.recall(einsum_chosen71, dominant71)}
rows_error71 = {
    "correct": study.relative_error(study.rows(output71, dominant71), study.rows(full71, dominant71)),
    "einsum": study.relative_error(study.rows(einsum_output71, dominant71), study.rows(full71, dominant71)),
}
error71 = {"correct": study.relative_error(output71, full71), "einsum": study.relative_error(einsum_output71, full71)}
# lang: en
claim("the exact M̄ over all keys ranks the 10 dominant queries of every head first",
      study.recall(study.most_active(q71, k71, 10), dominant71) == 1.0)
claim("the correct sampled product chooses at least 9 in 10 of them", found71["correct"] >= 0.9)
claim("the einsum chooses fewer than 3 in 4 of them", found71["einsum"] < 0.75)
claim("on the dominant queries' rows, ProbSparse's relative error is below 0.3 with the correct product, above 0.4 "
      "with the einsum", rows_error71["correct"] < 0.3 and rows_error71["einsum"] > 0.4)
claim("over the whole output, the einsum's error is more than 1.25 times the correct product's",
      error71["einsum"] > 1.25 * error71["correct"])
# lang: zh
claim("在全部键上精确计算的 M̄ 在每个头里都把 10 个主导查询排在最前面",
      study.recall(study.most_active(q71, k71, 10), dominant71) == 1.0)
claim("正确的采样乘积选中了其中至少十分之九", found71["correct"] >= 0.9)
claim("einsum 选中的不到四分之三", found71["einsum"] < 0.75)
claim("在主导查询的那些行上，用正确乘积时 ProbSparse 的相对误差低于 0.3，"
      "用 einsum 时高于 0.4", rows_error71["correct"] < 0.3 and rows_error71["einsum"] > 0.4)
claim("就整个输出而言，einsum 的误差是正确乘积的 1.25 倍以上", error71["einsum"] > 1.25 * error71["correct"])
# lang: end

# %% [markdown] tags=["lang-en"]
# The einsum takes the queries that point away from a group for dominant ones as often as the
# ones that point at a group; every dominant query it misses gets the mean of the values instead
# of its own peaked row.
#
# Why did nobody notice? When the dominant queries are simply the ones whose scores spread the
# most, the einsum finds them. On the inputs of section 8, 10 long queries among 512 short ones,
# it finds them all:

# %% [markdown] tags=["lang-zh"] en_hash="00cfe9a4d1"
# einsum 把背离某一组的查询当成主导查询的频率，与指向某一组的查询一样高；它每漏掉一个主导查询，那个查询就得到值的平均，而不是它自己那一行有尖峰的注意力。
#
# 为什么没人发现？如果主导查询恰好就是分数分散得最开的那些，einsum 照样能找到它们。在第 8 节的输入上（512 个短查询里有 10 个长查询），它全都找到了：

# %%
q71d, k71d, _, active71 = study.few_dominant_queries(B71, H71, L71, D71, generator=bugs_rng)
# lang: en
claim("on 10 long queries among 512 the einsum still chooses all 10: such a test cannot catch it",
      study.recall(study.chosen_by(q71d, k71d, index71, u71, scores=informer_sampled_scores), active71) == 1.0)
# lang: zh
claim("在 512 个查询里有 10 个长查询时，这个 einsum 仍然选中全部 10 个：这样的测试抓不住它",
      study.recall(study.chosen_by(q71d, k71d, index71, u71, scores=informer_sampled_scores), active71) == 1.0)
# lang: end

# %% [markdown] tags=["lang-en"]
# **The fix.** Multiply each query by its own keys,
# `(query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)`: a (1, D) @ (D, U) product
# per query, which is what the official code writes and what
# `probsparse.prob_sparse_attention_plain` does. (As an einsum:
# `"bhqd,bhqsd->bhqs"`, one letter for the query in both.) `probsparse.sampled_scores` computes
# the same numbers without gathering `K_sample` at all:

# %% [markdown] tags=["lang-zh"] en_hash="bf75b9a36a"
# **修法。** 让每个查询只乘它自己的键：`(query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)`，对每个查询做一次 (1, D) @ (D, U) 的乘法。官方代码就是这样写的，`probsparse.prob_sparse_attention_plain` 也是这样做的。（写成 einsum 是 `"bhqd,bhqsd->bhqs"`：两边的查询用同一个字母。）`probsparse.sampled_scores` 根本不收集 `K_sample`，也能算出同样的数：

# %%
# lang: en
claim("probsparse.sampled_scores gives each query's products with its own sampled keys",
      torch.allclose(probsparse.sampled_scores(q71, k71, index71), intended_scores71, atol=1e-4))
# lang: zh
claim("probsparse.sampled_scores 给出的是每个查询与它自己的采样键的乘积",
      torch.allclose(probsparse.sampled_scores(q71, k71, index71), intended_scores71, atol=1e-4))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### 7.2 The scale that is never applied
#
# The chosen queries then get full attention over all keys. The module stores a `scale`
# argument (default $1/\sqrt{D}$, as in lesson 01) and passes it down to this step, re-created:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="362bc33fde"
# ### 7.2 从未用上的缩放
#
# 接下来，被选中的查询对所有键做完整注意力。模块保存了一个 `scale` 参数（默认 $1/\sqrt{D}$，与第 01 课相同），并把它传到这一步。重现如下：

# %%
def informer_attend(chosen, key, value, scale):
    # lang: en
    """The re-implementation's attention of the chosen queries, re-created.

    chosen: (B, H, u, D); key: (B, H, L_K, D); value: (B, H, L_K, D_v). Returns (B, H, u, D_v).
    """
    # lang: zh
    """重现重写版中被选中查询做注意力的那一步。

    chosen：(B, H, u, D)；key：(B, H, L_K, D)；value：(B, H, L_K, D_v)。返回 (B, H, u, D_v)。
    """
    # lang: end
    scores = chosen @ key.transpose(-2, -1)  # (B, H, u, L_K)
    return torch.softmax(scores, dim=-1) @ value


# %% [markdown] tags=["lang-en"]
# When the sequence is short, $u = c \cdot \lceil \ln L \rceil$ is at least $L$ and every query
# is chosen: ProbSparse should then *be* full attention. With $L = 8$ ($u = \min(8, 15) = 8$):

# %% [markdown] tags=["lang-zh"] en_hash="cc657f630b"
# 序列很短时，$u = c \cdot \lceil \ln L \rceil$ 不小于 $L$，所有查询都被选中，这时 ProbSparse 本应*就是*完整注意力。取 $L = 8$（$u = \min(8, 15) = 8$）：

# %%
q72, k72, v72 = study.random_inputs(2, 2, 8, 16, generator=bugs_rng)
out72 = informer_attend(q72, k72, v72, scale=1 / math.sqrt(16))
# lang: en
claim("with L = 8 every query is chosen (u = L)", probsparse.sample_count(8) == 8)
claim("the output is full attention with scale 1", torch.allclose(out72, F.scaled_dot_product_attention(q72, k72, v72, scale=1.0), atol=1e-6))
claim("and not full attention with scale 1/√D", not torch.allclose(out72, F.scaled_dot_product_attention(q72, k72, v72), atol=1e-2))
# lang: zh
claim("L = 8 时所有查询都被选中（u = L）", probsparse.sample_count(8) == 8)
claim("输出是缩放系数为 1 的完整注意力", torch.allclose(out72, F.scaled_dot_product_attention(q72, k72, v72, scale=1.0), atol=1e-6))
claim("而不是缩放系数为 1/√D 的完整注意力", not torch.allclose(out72, F.scaled_dot_product_attention(q72, k72, v72), atol=1e-2))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The bug.** `scale` arrives and is never used: softmax gets the raw scores $q \cdot k$, whose
# spread grows like $\sqrt{D}$, so the weights are far more peaked than intended (lesson 01 showed
# why that saturates softmax). The official code multiplies by `scale or 1/sqrt(D)`.
#
# **The fix** is one factor, `torch.softmax(scores * scale, dim=-1)`. `probsparse` applies it
# (default $1/\sqrt{D}$) to the chosen queries' scores, so with every query chosen it equals
# `F.scaled_dot_product_attention`:

# %% [markdown] tags=["lang-zh"] en_hash="ed32150b41"
# **Bug 在哪里。** `scale` 传进来了，却从没用上：softmax 拿到的是原始分数 $q \cdot k$，它的分散程度随 $\sqrt{D}$ 增长，于是权重比本意尖锐得多（第 01 课讲过这为什么会让 softmax 饱和）。官方代码乘的是 `scale or 1/sqrt(D)`。
#
# **修法**只差一个因子：`torch.softmax(scores * scale, dim=-1)`。`probsparse` 把它（默认 $1/\sqrt{D}$）乘到被选中查询的分数上，所以当所有查询都被选中时，它与 `F.scaled_dot_product_attention` 相同：

# %%
fixed72, _ = probsparse.prob_sparse_attention(q72, k72, v72, generator=bugs_rng)
# lang: en
claim("probsparse with every query chosen equals F.scaled_dot_product_attention",
      torch.allclose(fixed72, F.scaled_dot_product_attention(q72, k72, v72), atol=1e-6))
# lang: zh
claim("所有查询都被选中时，probsparse 与 F.scaled_dot_product_attention 相同",
      torch.allclose(fixed72, F.scaled_dot_product_attention(q72, k72, v72), atol=1e-6))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### 7.3 The dropout that is never called
#
# The module's constructor takes `attention_dropout=0.1`. Re-created, with the attention step
# already fixed:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="80fcc9fb81"
# ### 7.3 从未调用的 dropout
#
# 模块的构造函数接收 `attention_dropout=0.1`。重现如下（注意力那一步已经修好）：

# %%
class InformerDropoutLayer(nn.Module):
    def __init__(self, attention_dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(attention_dropout)

    def forward(self, chosen, key, value):  # (B, H, u, D), (B, H, L_K, D), (B, H, L_K, D_v)
        weights = torch.softmax(chosen @ key.transpose(-2, -1) / math.sqrt(key.shape[-1]), dim=-1)
        return weights @ value


# %%
layer73 = InformerDropoutLayer(attention_dropout=0.1)
with torch.no_grad():
    eval_output73 = layer73.eval()(q72, k72, v72)
    layer73.train()
    first73, second73 = layer73(q72, k72, v72), layer73(q72, k72, v72)
# lang: en
claim("in training mode two calls give the same output", torch.equal(first73, second73))
claim("and it is the output of eval mode: nothing is dropped", torch.equal(first73, eval_output73))
# lang: zh
claim("训练模式下两次调用给出相同的输出", torch.equal(first73, second73))
claim("而且就是 eval 模式的输出：什么也没有丢弃", torch.equal(first73, eval_output73))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The bug.** `self.dropout` is created in `__init__` and appears nowhere in `forward`, so
# `attention_dropout` does nothing, in training or not. The official code has the same line; asked
# about it on GitHub, its authors called it an oversight
# ([Informer2020 #97](https://github.com/zhouhaoyi/Informer2020/issues/97)).
#
# **The fix.** Either call it where it belongs, on the weights (`self.dropout(weights) @ value`),
# or do not offer it. `probsparse` takes the second way: it has no dropout argument, so it
# promises nothing it does not do; a layer that wants dropout on the attention weights can ask
# for them (`need_weights=True`) and drop them itself. The first way, checked:

# %% [markdown] tags=["lang-zh"] en_hash="f08441f2a9"
# **Bug 在哪里。** `self.dropout` 在 `__init__` 里创建，在 `forward` 里却一次也没出现，所以无论是否在训练，`attention_dropout` 都不起作用。官方代码里也有同样的写法；有人在 GitHub 上问起，作者承认这是一处疏忽（[Informer2020 #97](https://github.com/zhouhaoyi/Informer2020/issues/97)）。
#
# **修法。** 要么在该用的地方调用它，作用在权重上（`self.dropout(weights) @ value`）；要么干脆不提供它。`probsparse` 选了第二种：它没有 dropout 参数，所以不承诺它做不到的事；想在注意力权重上做 dropout 的层，可以要回权重（`need_weights=True`）自己来丢弃。验证第一种修法：

# %%
class FixedDropoutLayer(InformerDropoutLayer):
    def forward(self, chosen, key, value):
        weights = torch.softmax(chosen @ key.transpose(-2, -1) / math.sqrt(key.shape[-1]), dim=-1)
        return self.dropout(weights) @ value


fixed73 = FixedDropoutLayer(attention_dropout=0.1)
with torch.no_grad():
    fixed73.train()
    first73, second73 = fixed73(q72, k72, v72), fixed73(q72, k72, v72)
    fixed_eval73 = fixed73.eval()(q72, k72, v72)
# lang: en
claim("now two calls in training mode differ", not torch.equal(first73, second73))
claim("and eval mode still gives the undropped output", torch.equal(fixed_eval73, eval_output73))
# lang: zh
claim("现在训练模式下的两次调用结果不同", not torch.equal(first73, second73))
claim("而 eval 模式仍然给出不做丢弃的输出", torch.equal(fixed_eval73, eval_output73))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### 7.4 Dividing by $L_K$ instead of $U$
#
# The measure is $\bar M$, max − mean of a query's $U$ sampled scores. Re-created:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f5f73ff00a"
# ### 7.4 除以 $L_K$ 而不是 $U$
#
# 度量是 $\bar M$，即一个查询的 $U$ 个采样分数的最大值减去平均值。重现如下：

# %%
def informer_measure(scores, length_k):
    # lang: en
    """The re-implementation's measure, re-created (the official code's is the same).

    scores: (B, H, L_Q, U), each query's sampled scores; length_k: L_K. Returns (B, H, L_Q).
    """
    # lang: zh
    """重现重写版的度量（官方代码的也一样）。

    scores：(B, H, L_Q, U)，每个查询的采样分数；length_k：L_K。返回 (B, H, L_Q)。
    """
    # lang: end
    return scores.amax(-1) - scores.sum(-1) / length_k


# %% [markdown] tags=["lang-en"]
# The mean of $U$ numbers is their sum divided by $U$; this divides by $L_K$. On the inputs so
# far that changes little: keys centred on 0 give sampled scores with a mean near 0, and then
# max − sum/$L_K$ ≈ max − mean. It matters when the keys share a **common offset** $b$, as a key
# projection's bias gives them: every score of query $i$ rises by the same $q_i \cdot b$.
# Softmax does not see a constant added to a whole row, and neither does max − mean; but
# max − sum/$L_K$ keeps $(1 - U/L_K)\, q_i \cdot b$ of it, so it ranks queries by how much they
# agree with $b$ instead of by how peaked their row is.
#
# The experiment: 10 truly active queries among $L = 512$ (the inputs of section 8), and keys
# whose last feature is a shared one, `offset` in every key (so $b = (0, \dots, 0,
# \mathrm{offset})$); every query reads that feature by a random amount of its own, drawn the
# same way for active and lazy queries. The other 63 features, which decide how peaked each row
# is, do not change. How many of the 10 truly active queries (by the exact $\bar M$ over all
# keys) does each divisor choose, as the offset grows? For scale: a key's own features have
# spread 1, so its length is about $\sqrt{64} = 8$.

# %% [markdown] tags=["lang-zh"] en_hash="6e2b60c0e8"
# $U$ 个数的平均值是它们的和除以 $U$；这里却除以了 $L_K$。在前面的输入上这几乎没有影响：键以 0 为中心，采样分数的平均值接近 0，这时“最大值 − 和/$L_K$”≈“最大值 − 平均值”。当所有键带有一个**共同的偏移** $b$ 时（键投影的偏置就会给出这样的偏移），问题就出现了：查询 $i$ 的每个分数都加上同一个 $q_i \cdot b$。softmax 看不到整行加上的常数，“最大值 − 平均值”也看不到；但“最大值 − 和/$L_K$”会留下其中的 $(1 - U/L_K)\, q_i \cdot b$，于是它按查询与 $b$ 的一致程度给查询排序，而不是按它那一行有多尖锐。
#
# 实验：在 $L = 512$ 个查询里有 10 个真正活跃的查询（第 8 节的输入）；键的最后一个特征变成共享特征，每个键在这里都是 `offset`（于是 $b = (0, \dots, 0, \mathrm{offset})$）；每个查询以自己的一个随机权重读取这个特征，活跃查询和惰性查询的权重按同一种方式抽取。决定每一行有多尖锐的其余 63 个特征保持不变。随着偏移增大，两种除数各自能选中这 10 个真正活跃的查询（按在全部键上精确计算的 $\bar M$）中的几个？作为参照：键自身的特征分散程度为 1，所以键的长度约为 $\sqrt{64} = 8$。

# %%
q74, k74, _, _ = study.few_dominant_queries(1, 8, 512, 64, generator=bugs_rng)
q74, k74 = study.with_shared_feature(q74, k74, generator=bugs_rng)
offsets74 = (0, 10, 20, 50, 100, 200)
# lang: en
# keys of the course's message catalogue: message(key) gives each curve's name in the notebook's language
# lang: zh
# 键来自课程的文案目录：message(key) 给出每条曲线在当前笔记本语言下的名字
# lang: end
recalls74 = study.recall_by_offset(q74, k74, offsets74, {
    "l05.bugs.divide_by_u": probsparse.sparsity_measure,
    "l05.bugs.divide_by_lk": lambda scores: informer_measure(scores, 512),
}, generator=bugs_rng)
fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
for name, found in recalls74.items():
    ax.plot(offsets74, found, marker="o", label=message(name))
ax.set_xlabel(message("l05.bugs.offset_axis"))
ax.set_ylabel(message("l05.bugs.recall_axis"))
ax.set_ylim(-0.05, 1.05)
ax.legend()
plt.show()
by_u74, by_length74 = recalls74["l05.bugs.divide_by_u"], recalls74["l05.bugs.divide_by_lk"]
# lang: en
claim("dividing by U chooses all 10 truly active queries at every offset", min(by_u74) == 1.0)
claim("dividing by L_K chooses at least 9 of them without an offset", by_length74[0] >= 0.9)
claim("and fewer than 3 in 10 at offset 200", by_length74[-1] < 0.3)
# lang: zh
claim("除以 U 时，在每个偏移下都选中了全部 10 个真正活跃的查询", min(by_u74) == 1.0)
claim("除以 L_K 时，没有偏移的情况下至少选中其中 9 个", by_length74[0] >= 0.9)
claim("而偏移为 200 时，选中的不到十分之三", by_length74[-1] < 0.3)
# lang: end

# %% [markdown] tags=["lang-en"]
# **The fix** divides by the number of sampled scores, as `probsparse.sparsity_measure` does:
# `scores.sum(-1) / scores.shape[-1]`. The official code has the same divisor. Asked about it on
# GitHub ([Informer2020 #211](https://github.com/zhouhaoyi/Informer2020/issues/211)), its authors
# replied that dividing by the sample size would do as well, and that the divisor makes little
# difference to which top $u$ are chosen. Without an offset that is so (the left of the plot);
# with one, it is not. Longer sequences make it worse: $1 - U/L_K$ grows toward 1, and there are
# more lazy queries to outrank the active ones.

# %% [markdown] tags=["lang-zh"] en_hash="9c52f46dee"
# **修法**是除以采样分数的个数，`probsparse.sparsity_measure` 就是这样做的：`scores.sum(-1) / scores.shape[-1]`。官方代码的除数与重写版相同。有人在 GitHub 上问起这一点（[Informer2020 #211](https://github.com/zhouhaoyi/Informer2020/issues/211)），作者回复说除以样本数也可以，而且既然最后只取前 $u$ 个，用哪个除数对选择结果影响不大。没有偏移时确实如此（图的左端）；有偏移时就不是了。序列越长，问题越严重：$1 - U/L_K$ 越来越接近 1，能排到活跃查询前面的惰性查询也越来越多。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### 7.5 Causal mode: missing, then half right
#
# The re-implementation has no causal mode. A lazy query gets the mean of all the values.
# Re-created:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="11f1e8272f"
# ### 7.5 因果模式：先是没有，后是只对了一半
#
# 重写版没有因果模式。惰性查询得到的是全部值的平均。重现如下：

# %%
def informer_lazy_context(value, length_q):
    # lang: en
    """What the re-implementation gives every query before the chosen ones are filled in,
    re-created. value: (B, H, L_K, D_v). Returns (B, H, L_Q, D_v)."""
    # lang: zh
    """重现重写版在填入被选中查询之前给每个查询的输出。
    value：(B, H, L_K, D_v)。返回 (B, H, L_Q, D_v)。"""
    # lang: end
    B, H, _, D_v = value.shape
    return value.mean(-2, keepdim=True).expand(B, H, length_q, D_v)


# %% [markdown] tags=["lang-en"]
# In a decoder, the output at position $i$ may depend on positions $0 \dots i$ only. Change the
# value at the last position, $v_{L-1}$, and look at output 0:

# %% [markdown] tags=["lang-zh"] en_hash="8227d0118b"
# 在解码器里，位置 $i$ 的输出只能依赖位置 $0 \dots i$。改动最后一个位置的值 $v_{L-1}$，再看输出 0：

# %%
q75, k75, v75 = study.random_inputs(1, 8, 96, 64, generator=bugs_rng)
v75_changed = v75.clone()
# lang: en
# only position L - 1 changes:
# lang: zh
# 只改动位置 L - 1：
# lang: end
v75_changed[:, :, -1] += 1.0
moved75 = informer_lazy_context(v75_changed, 96)[:, :, 0] - informer_lazy_context(v75, 96)[:, :, 0]
# lang: en
claim("a lazy query's output at position 0 moves by 1/L in every feature", torch.allclose(moved75, torch.full_like(moved75, 1 / 96), atol=1e-5))
# lang: zh
claim("位置 0 上惰性查询的输出变了：每个特征都变了 1/L", torch.allclose(moved75, torch.full_like(moved75, 1 / 96), atol=1e-5))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The bug.** The re-implementation has one mode: lazy queries get the mean of *all* values, and
# the chosen queries attend to *all* keys, so in a decoder every output sees the future.
#
# **The official code's causal mode** (`mask_flag=True`, used in its decoder) masks the chosen
# queries' scores, as it should. Its other two steps, re-created:

# %% [markdown] tags=["lang-zh"] en_hash="e036c437e3"
# **Bug 在哪里。** 重写版只有一种模式：惰性查询得到*全部*值的平均，被选中的查询对*全部*键做注意力，所以放进解码器里，每个输出都看得到未来。
#
# **官方代码的因果模式**（`mask_flag=True`，用在它的解码器里）对被选中查询的分数加了掩码，这一步没错。它的另外两步重现如下：

# %%
def official_causal_sample(length_q, length_k, count, generator):
    # lang: en
    """The official code's sample in causal mode, re-created: (L_Q, U) key positions from ALL L_K
    keys, the same line as without a mask (`torch.randint(L_K, (L_Q, sample_k))`)."""
    # lang: zh
    """重现官方代码在因果模式下的采样：(L_Q, U) 个键位置，取自全部 L_K 个键，
    与不加掩码时是同一行代码（`torch.randint(L_K, (L_Q, sample_k))`）。"""
    # lang: end
    return torch.randint(length_k, (length_q, count), generator=generator)


def official_causal_lazy(value):
    # lang: en
    """The official code's lazy context in causal mode, re-created: `V.cumsum(dim=-2)`, row i the
    SUM v_0 + … + v_i. value: (B, H, L, D_v). Returns (B, H, L, D_v)."""
    # lang: zh
    """重现官方代码在因果模式下给惰性查询的输出：`V.cumsum(dim=-2)`，第 i 行是和
    v_0 + … + v_i。value：(B, H, L, D_v)。返回 (B, H, L, D_v)。"""
    # lang: end
    return value.cumsum(dim=-2)


# %% [markdown] tags=["lang-en"]
# On the same inputs: how the sample of each early query reacts when only the later keys change
# (positions 48 … 95 multiplied by 2), and how large the lazy outputs are:

# %% [markdown] tags=["lang-zh"] en_hash="3565218fa4"
# 还是同样的输入：只改动靠后的键（位置 48 … 95 乘以 2）时，每个靠前查询的度量有什么反应；惰性输出又有多大：

# %%
U75 = probsparse.sample_count(96)
k75_changed = k75.clone()
k75_changed[:, :, 48:] *= 2.0
official_index75 = official_causal_sample(96, 96, U75, bugs_rng)  # (L_Q, U)
causal_index75 = probsparse.sample_keys(96, 96, U75, causal=True, generator=bugs_rng)  # (L_Q, U)
measures75 = {
    name: (sparsity_measure(sampled_scores(q75, k75, index)), sparsity_measure(sampled_scores(q75, k75_changed, index)))
    for name, index in (("official", official_index75), ("causal", causal_index75))
}
moved_early75 = {name: ~torch.isclose(after[..., :48], before[..., :48], atol=1e-5)
                 for name, (before, after) in measures75.items()}  # (B, H, 48)
summed75 = official_causal_lazy(v75)  # (B, H, L, D_v)
mean75 = probsparse.lazy_context(v75, 96, causal=True)
counts75 = torch.arange(1, 97).unsqueeze(-1)  # (L, 1): i + 1
# lang: en
claim("official sample: the measure of every one of the queries 0 … 47 changes with the keys 48 … 95",
      bool(moved_early75["official"].all()))
claim("the course's causal sample: none of them changes", not bool(moved_early75["causal"].any()))
claim("the official lazy output of row i is i + 1 times the mean of v_0 … v_i",
      torch.allclose(summed75, counts75 * mean75, atol=1e-4))
claim("so at the last position its features are more than 5 times as large as a value's, on average",
      summed75[:, :, -1].abs().mean() > 5 * v75.abs().mean())
# lang: zh
claim("官方代码的样本：查询 0 … 47 中每一个的度量都随键 48 … 95 而变", bool(moved_early75["official"].all()))
claim("本课程的因果样本：它们一个也不变", not bool(moved_early75["causal"].any()))
claim("官方代码给第 i 行惰性查询的输出是 v_0 … v_i 平均值的 i + 1 倍", torch.allclose(summed75, counts75 * mean75, atol=1e-4))
claim("所以在最后一个位置，它的特征平均比一个值的特征大 5 倍以上", summed75[:, :, -1].abs().mean() > 5 * v75.abs().mean())
# lang: end

# %% [markdown] tags=["lang-en"]
# **Two defects of the official causal mode.** The sample of query $i$ comes from all $L_K$
# keys, so its measure, and with it whether query $i$ is chosen, reads keys after $i$. And a
# lazy query $i$ gets the sum of $v_0 \dots v_i$, not their mean: a uniform row over $i + 1$ keys
# gives the mean, so the sum is $i + 1$ times too large, and it grows along the sequence while
# the chosen rows, softmax averages, do not. (Its `output_attention` weights say $1/L$ on every
# key for a lazy row, which is neither.)
#
# **The fix** is section 5's causal mode, `probsparse.prob_sparse_attention(..., causal=True)`:
# a lazy query at position $i$ gets the cumulative mean of $v_0 \dots v_i$
# (`probsparse.lazy_context(value, L, causal=True)`), a chosen query at position $p$ attends to
# keys $0 \dots p$, and the keys query $i$ samples for its measure are drawn from positions
# $0 \dots i$ (section 5 showed the price: fewer early queries chosen). Which queries are chosen
# is still a top $u$ over the whole sequence, but no value leaks: changing $v_j$ never changes an
# output before $j$. On the same inputs:

# %% [markdown] tags=["lang-zh"] en_hash="22530ad750"
# **官方因果模式的两个缺陷。** 查询 $i$ 的样本取自全部 $L_K$ 个键，所以它的度量（以及查询 $i$ 是否被选中）会读到 $i$ 之后的键。惰性查询 $i$ 得到的是 $v_0 \dots v_i$ 的和，而不是平均：在 $i + 1$ 个键上均匀分配权重，得到的是平均值，所以这个和大了 $i + 1$ 倍，而且沿着序列越来越大，被选中的行（softmax 加权平均）却不会。（它的 `output_attention` 权重给惰性行的每个键都写 $1/L$，与这两者都不符。）
#
# **修法**就是第 5 节的因果模式 `probsparse.prob_sparse_attention(..., causal=True)`：位置 $i$ 上的惰性查询得到 $v_0 \dots v_i$ 的累积均值（`probsparse.lazy_context(value, L, causal=True)`）；位置 $p$ 上被选中的查询只对键 $0 \dots p$ 做注意力；查询 $i$ 为计算度量而采样的键只从位置 $0 \dots i$ 中抽取（代价第 5 节已经展示过：选中的靠前查询更少）。选中哪些查询仍然是在整个序列上取前 $u$ 名，但值永远不会泄漏：改变 $v_j$ 永远不会改变 $j$ 之前的任何输出。还是同样的输入：

# %%
before75, _ = probsparse.prob_sparse_attention(q75, k75, v75, causal=True, index=causal_index75)
after75, _ = probsparse.prob_sparse_attention(q75, k75, v75_changed, causal=True, index=causal_index75)
# lang: en
claim("causal mode: changing v[L-1] changes no output before position L - 1", torch.equal(after75[:, :, :-1], before75[:, :, :-1]))
claim("and it does change output L - 1, which may see it", not torch.equal(after75[:, :, -1], before75[:, :, -1]))
# lang: zh
claim("因果模式下，改动 v[L-1] 不会改变位置 L - 1 之前的任何输出", torch.equal(after75[:, :, :-1], before75[:, :, :-1]))
claim("而它确实改变了能看到它的输出 L - 1", not torch.equal(after75[:, :, -1], before75[:, :, -1]))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### 7.6 Habits: the global random state, prints, one bare tensor
#
# Three habits of the re-implementation, in one re-created forward pass: it samples from the
# global random state (so does the official code), it prints as it goes, and it returns the
# output alone, ignoring its own `output_attention` argument:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="195115a3b3"
# ### 7.6 坏习惯：全局随机状态、print、只返回一个张量
#
# 重写版的三个坏习惯，重现在一次前向计算里：它从全局随机状态中采样（官方代码也是这样），边算边打印，而且只返回输出，不理会它自己的 `output_attention` 参数：

# %%
def informer_forward(query, key, value):
    # lang: en
    """The re-implementation's habits, re-created around the course's steps."""
    # lang: zh
    """围绕课程的步骤，重现重写版的坏习惯。"""
    # lang: end
    L_Q, L_K = query.shape[-2], key.shape[-2]
    index = torch.randint(L_K, (L_Q, probsparse.sample_count(L_K)))  # (L_Q, U)
    print("index_sample:", index.shape)
    output, selected = probsparse.prob_sparse_attention(query, key, value, index=index)
    print("M_top:", selected.shape)
    print("context:", output.shape)
    return output


state76 = torch.get_rng_state()
# lang: en
expected76 = torch.rand(3)  # the notebook's next three random numbers
# lang: zh
expected76 = torch.rand(3)  # 笔记本接下来的三个随机数
# lang: end
torch.set_rng_state(state76)
with contextlib.redirect_stdout(io.StringIO()) as printed76:
    first76, second76 = informer_forward(q75, k75, v75), informer_forward(q75, k75, v75)
# lang: en
shifted76 = torch.rand(3)  # the same draw, after the two calls
# lang: zh
shifted76 = torch.rand(3)  # 同样的抽取，但在两次调用之后
# lang: end
# lang: en
claim("two calls on the same input return different outputs", not torch.equal(first76, second76))
claim("the calls shift the random numbers the notebook draws after them", not torch.equal(shifted76, expected76))
claim("two calls print 6 lines, and each returns one tensor: which queries were chosen is lost",
      printed76.getvalue().count("\n") == 6 and isinstance(first76, torch.Tensor))
# lang: zh
claim("对同一个输入调用两次，返回的输出不同", not torch.equal(first76, second76))
claim("这些调用改变了笔记本在它们之后抽到的随机数", not torch.equal(shifted76, expected76))
claim("两次调用打印了 6 行，每次只返回一个张量：选中了哪些查询，已无从知道",
      printed76.getvalue().count("\n") == 6 and isinstance(first76, torch.Tensor))
# lang: end

# %% [markdown] tags=["lang-en"]
# **The fix.** Section 3 already showed the first: take a `torch.Generator`, as
# `probsparse.sample_keys` and `probsparse.prob_sparse_attention` do (`generator=`). Prints flood
# every training step and cannot be turned off: `probsparse` prints nothing, and records what a
# walkthrough needs in a `probsparse.Trace()` passed as `trace=` (section 6 displayed one). It
# returns `(output, selected)`, and with `need_weights=True` `(output, weights)`, the weights
# every query effectively used:

# %% [markdown] tags=["lang-zh"] en_hash="618b7afdc6"
# **修法。** 第一个问题的修法第 3 节已经展示过：接收一个 `torch.Generator`，`probsparse.sample_keys` 和 `probsparse.prob_sparse_attention` 都是这样做的（`generator=`）。print 会刷满每一个训练步，又关不掉：`probsparse` 什么也不打印，逐步解析需要的信息记录在作为 `trace=` 传入的 `probsparse.Trace()` 里（第 6 节展示过）。它返回 `(output, selected)`；`need_weights=True` 时返回 `(output, weights)`，即每个查询实际使用的权重：

# %%
torch.set_rng_state(state76)
trace76 = probsparse.Trace()
with contextlib.redirect_stdout(io.StringIO()) as printed76:
    output76, selected76 = probsparse.prob_sparse_attention(q75, k75, v75, generator=torch.Generator().manual_seed(14),
                                                            trace=trace76)
    again76, _ = probsparse.prob_sparse_attention(q75, k75, v75, generator=torch.Generator().manual_seed(14))
    _, weights76 = probsparse.prob_sparse_attention(q75, k75, v75, generator=torch.Generator().manual_seed(14),
                                                    need_weights=True)
next76 = torch.rand(3)
print([step.name for step in trace76])
# lang: en
claim("the same generator state gives the same output", torch.equal(output76, again76))
claim("and the notebook's next random numbers are the ones it would have drawn anyway", torch.equal(next76, expected76))
claim("it prints nothing; its trace holds the sampled scores' shape, (B, H, L_Q, U)",
      printed76.getvalue() == "" and trace76["scores_sample"].shape == (1, 8, 96, 25))
claim("it returns the chosen queries, (B, H, u), and on request the weights, each row summing to 1",
      selected76.shape == (1, 8, 25) and torch.allclose(weights76.sum(-1), torch.ones(1, 8, 96)))
# lang: zh
claim("同样的随机数生成器状态给出同样的输出", torch.equal(output76, again76))
claim("而笔记本接下来的随机数，与不调用时抽到的完全一样", torch.equal(next76, expected76))
claim("它什么也不打印；它的记录里有采样分数的形状 (B, H, L_Q, U)",
      printed76.getvalue() == "" and trace76["scores_sample"].shape == (1, 8, 96, 25))
claim("它返回被选中的查询 (B, H, u)，需要时还返回权重，每一行之和为 1",
      selected76.shape == (1, 8, 25) and torch.allclose(weights76.sum(-1), torch.ones(1, 8, 96)))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 8. When is ProbSparse accurate?
#
# ProbSparse gives $u$ queries exact attention and every other query the mean of the values. How
# far is its output from full attention's? The yardstick is the relative error
# $\lVert \text{output} - \text{full} \rVert / \lVert \text{full} \rVert$ against
# `F.scaled_dot_product_attention`, next to the laziest approximation there is: give **every**
# query the mean of the values, `mean(V)`. Two kinds of input, 8 heads, $D = 64$:
#
# - **random**: queries, keys and values with N(0, 1) features. A query's scaled scores then
#   spread by about 1, so its weights vary across keys by factors of $e^{\pm 2}$, and all
#   queries are alike: none is much closer to uniform than another, and none is close enough
#   for `mean(V)` to stand in for it.
# - **a few dominant queries**: 10 long queries per head (features N(0, 3²)) among short ones
#   (N(0, 0.1²)), whose rows are nearly uniform: the situation ProbSparse was designed for.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="213dec868a"
# ## 8. ProbSparse 什么时候准确？
#
# ProbSparse 只给 $u$ 个查询精确的注意力，其余查询一律得到值的平均。它的输出离完整注意力有多远？衡量标准是相对于 `F.scaled_dot_product_attention` 的相对误差 $\lVert \text{output} - \text{full} \rVert / \lVert \text{full} \rVert$，并与最偷懒的近似对比：给**每个**查询都输出值的平均 `mean(V)`。两类输入，8 个头，$D = 64$：
#
# - **随机输入**：查询、键、值的特征都服从 N(0, 1)。这时一个查询缩放后的分数分散程度约为 1，它在各个键上的权重相差 $e^{\pm 2}$ 倍；所有查询都差不多：没有哪一个比别的更接近均匀，也没有哪一个接近到可以用 `mean(V)` 代替。
# - **少数主导查询**：每个头有 10 个长的查询（特征服从 N(0, 3²)），其余都是短的查询（N(0, 0.1²)），它们的行几乎是均匀的：这正是 ProbSparse 的设计所针对的情形。

# %%
facts_rng = torch.Generator().manual_seed(8)
lengths8 = (128, 256, 512, 1024)
errors8 = study.accuracy_by_length(lengths8, generator=facts_rng)
# lang: en
# message(key): the label in the notebook's language, from the course's catalogue (course_utils.i18n)
# lang: zh
# message(key)：从课程的文案目录（course_utils.i18n）中取出当前笔记本语言的标签
# lang: end
series8 = {message(f"l05.facts.{kind}_{method}"): errors8[kind][method]
           for kind in ("random", "dominant") for method in ("probsparse", "mean")}
fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
cost_lines(ax, lengths8, series8, message("l05.facts.length_axis"), message("l05.facts.error_axis"), logy=False)
plt.show()
for name, found in series8.items():
    print("  ".join(f"{error:.2f}" for error in found), "  ", name)

# %%
random8, dominant8 = errors8["random"], errors8["dominant"]
from_512 = [lengths8.index(n) for n in lengths8 if n >= 512]
# lang: en
claim("random inputs, L ≥ 512: ProbSparse's error is at least 0.9 of mean(V)'s",
      all(random8["probsparse"][i] >= 0.9 * random8["mean"][i] for i in from_512))
claim("a few dominant queries: ProbSparse's error is below 0.1 and mean(V)'s above 0.5 at every L",
      max(dominant8["probsparse"]) < 0.1 and min(dominant8["mean"]) > 0.5)
# lang: zh
claim("随机输入、L ≥ 512 时，ProbSparse 的误差至少是 mean(V) 误差的 0.9 倍",
      all(random8["probsparse"][i] >= 0.9 * random8["mean"][i] for i in from_512))
claim("少数主导查询时，在每个 L 上 ProbSparse 的误差都低于 0.1，而 mean(V) 的误差都高于 0.5",
      max(dominant8["probsparse"]) < 0.1 and min(dominant8["mean"]) > 0.5)
# lang: end

# %% [markdown] tags=["lang-en"]
# On random inputs ProbSparse is **no better than mean(V)**: no row is close to uniform, so each
# of the $L - u$ queries it leaves lazy gets a wrong answer, and $u = 5 \lceil \ln L \rceil$ exact rows
# are a vanishing share of $L$ (35 of 512, 35 of 1024). With a few dominant queries it is
# **close**: the lazy rows really are nearly uniform, and the measure finds the few that are not.
# ProbSparse is an assumption about the data, not a free speed-up; check the assumption (are most
# rows of your model's attention nearly uniform?) before you rely on it. The end of this section
# checks it on a trained model.
#
# The second question is whether the sample finds the truly most active queries. For each
# sample size $U = c \lceil \ln L_K \rceil$ (factor $c$ from 1 up to $U = L_K$; $u = 35$ stays
# fixed), the recall: the share of the 10 queries with the largest exact $\bar M$ (over all
# $L_K = 512$ keys) that are among the $u$ chosen:

# %% [markdown] tags=["lang-zh"] en_hash="17b593e9aa"
# 在随机输入上，ProbSparse **并不比 mean(V) 好**：没有哪一行接近均匀，所以它留作惰性的 $L - u$ 个查询个个都得到错误的答案，而 $u = 5 \lceil \ln L \rceil$ 个精确的行在 $L$ 中所占的比例微乎其微（512 个里 35 个，1024 个里 35 个）。有少数主导查询时，它就**很接近**：惰性的行确实几乎均匀，而度量能找出那少数不均匀的行。ProbSparse 是对数据的一个假设，不是白捡的加速；依赖它之前，先检验这个假设（你的模型的注意力里，大多数行是否几乎均匀？）。本节最后会在一个训练好的模型上检验它。
#
# 第二个问题是：采样能否找出真正最活跃的查询？对每个样本量 $U = c \lceil \ln L_K \rceil$（因子 $c$ 从 1 起，直到 $U = L_K$；$u = 35$ 保持不变）计算召回率：按在全部 $L_K = 512$ 个键上精确计算的 $\bar M$，最大的 10 个查询中有多少落在被选中的 $u$ 个查询里：

# %%
# lang: en
factors8 = (1, 2, 5, 10, 20, 50, 74)  # U = c·⌈ln 512⌉ = 7c, at most 512
# lang: zh
factors8 = (1, 2, 5, 10, 20, 50, 74)  # U = c·⌈ln 512⌉ = 7c，最多为 512
# lang: end
q8, k8, _ = study.random_inputs(1, 8, 512, 64, generator=facts_rng)
q8d, k8d, _, _ = study.few_dominant_queries(1, 8, 512, 64, generator=facts_rng)
sizes8, recall_random8 = study.recall_by_sample_size(q8, k8, factors8, generator=facts_rng)
_, recall_dominant8 = study.recall_by_sample_size(q8d, k8d, factors8, generator=facts_rng)
# lang: en
# the two curves' names in the notebook's language, from the course's message catalogue
# lang: zh
# 两条曲线在当前笔记本语言下的名字，取自课程的文案目录
# lang: end
random_name, dominant_name = message("l05.facts.random"), message("l05.facts.dominant")
fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
cost_lines(ax, sizes8, {random_name: recall_random8, dominant_name: recall_dominant8},
           message("l05.facts.sample_axis"), message("l05.facts.recall_axis"), logy=False)
ax.axhline(35 / 512, color="gray", linestyle=":", linewidth=1, label=message("l05.facts.chance"))
ax.set_ylim(-0.05, 1.05)
ax.legend()
plt.show()
# lang: en
print("U:     ", "  ".join(f"{size:5d}" for size in sizes8))
print("recall:", "  ".join(f"{found:5.2f}" for found in recall_random8), "  ", random_name)
print("recall:", "  ".join(f"{found:5.2f}" for found in recall_dominant8), "  ", dominant_name)
# lang: zh
print("U：     ", "  ".join(f"{size:5d}" for size in sizes8))
print("召回率：", "  ".join(f"{found:5.2f}" for found in recall_random8), "  ", random_name)
print("召回率：", "  ".join(f"{found:5.2f}" for found in recall_dominant8), "  ", dominant_name)
# lang: end

# %%
# lang: en
default8 = sizes8.index(probsparse.sample_count(512))  # U = 35, the default factor 5
# lang: zh
default8 = sizes8.index(probsparse.sample_count(512))  # U = 35，即默认因子 5
# lang: end
# lang: en
claim("a few dominant queries: all 10 are found at every sample size, even U = 7", min(recall_dominant8) == 1.0)
claim("random inputs, default U = 35: fewer than half of the 10 are found", recall_random8[default8] < 0.5)
claim("a larger sample finds more: at U = L_K recall is higher than at U = 7", recall_random8[-1] > recall_random8[0])
claim("yet still below 0.9 at U = L_K", recall_random8[-1] < 0.9)
# lang: zh
claim("少数主导查询时，无论样本量多大（哪怕 U = 7），10 个都能全部找到", min(recall_dominant8) == 1.0)
claim("随机输入、默认 U = 35 时，10 个里找到的不到一半", recall_random8[default8] < 0.5)
claim("采样越多找到的越多：U = L_K 时的召回率高于 U = 7 时", recall_random8[-1] > recall_random8[0])
claim("但即使 U = L_K，召回率仍低于 0.9", recall_random8[-1] < 0.9)
# lang: end

# %% [markdown] tags=["lang-en"]
# The measure is estimated from $U$ scores: on random inputs the true measures of the queries
# lie close together, and a sample of 35 keys cannot tell them apart (the maximum of 35 scores
# is usually not the row's maximum; and $U = L_K$ draws with replacement miss about a third of
# the keys, $(1 - 1/L_K)^{L_K} \approx e^{-1}$). When a few queries stand far above the rest, the
# smallest sample sees it. Both sides of the same assumption: ProbSparse works when the data has
# a few dominant queries, and then it works with small samples.

# %% [markdown] tags=["lang-zh"] en_hash="f83847bc52"
# 度量是用 $U$ 个分数估计出来的：在随机输入上，各个查询的真实度量彼此很接近，35 个键的样本分辨不出它们（35 个分数的最大值通常不是整行的最大值；而有放回地抽 $U = L_K$ 次，约有三分之一的键抽不到，$(1 - 1/L_K)^{L_K} \approx e^{-1}$）。当少数几个查询远远高出其余查询时，最小的样本也能看出来。这是同一个假设的两面：数据里有少数主导查询时 ProbSparse 才管用，而那时小样本就够了。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Is the assumption true of a trained model?
#
# Informer's authors found a long tail in the models they trained. Here is a model of this
# course: the tiny encoder–decoder of lesson 06, which learns to reverse sequences of up to 8
# letters (`seq2seq.train`: 250 steps, a couple of seconds). It has three attentions of two
# heads each: the encoder's self-attention, the decoder's (causal) self-attention, and the
# decoder's cross-attention, which reads the source. For every row of every head, on 200
# held-out sequences (kept out of training): its $\bar M$ over the keys it may see, on the
# scaled scores $q \cdot k / \sqrt{d}$, and whether it is lazy in a plain sense, no key getting
# even twice the uniform weight $1/n$ ($n$: the keys it may see; rows with $n = 1$ are left out).
# Training and these numbers change a little from machine to machine:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="24196999c5"
# ### 训练好的模型满足这个假设吗？
#
# Informer 的作者在他们训练的模型里看到了长尾。这里用本课程自己的一个模型来看：第 06 课的小型编码器–解码器，它学习把不超过 8 个字母的序列倒过来（`seq2seq.train`：250 步，几秒钟）。它有三处注意力，各有两个头：编码器的自注意力、解码器的（因果）自注意力，以及读取源序列的解码器交叉注意力。在 200 条留出（held-out）序列（不参与训练）上，对每个头的每一行计算：它在自己能看到的那些键上、用缩放后的分数 $q \cdot k / \sqrt{d}$ 算出的 $\bar M$；以及它在最朴素的意义上是否惰性，即没有哪个键分到均匀权重 $1/n$ 的两倍（$n$ 是它能看到的键数；$n = 1$ 的行不计）。训练结果和下面这些数字在不同机器上会略有不同：

# %% tags=["nbval-ignore-output"]
# lang: en
run8 = seq2seq.train(seed=0)  # lesson 06's reverser, 250 steps of training
# lang: zh
run8 = seq2seq.train(seed=0)  # 第 06 课的反转模型，训练 250 步
# lang: end
# lang: en
rows8 = study.trained_attention_rows(run8.model, seq2seq.held_out(200))  # {attention: (M̄, peak)}
# lang: zh
rows8 = study.trained_attention_rows(run8.model, seq2seq.held_out(200))  # {注意力: (M̄, peak)}
# lang: end
fig, ax = plt.subplots(figsize=(6.5, 3.2), layout="constrained")
# lang: en
bins8 = [0.25 * i for i in range(49)]  # M̄ from 0 to 12
# lang: zh
bins8 = [0.25 * i for i in range(49)]  # M̄ 从 0 到 12
# lang: end
for name, (measure, peak) in rows8.items():
    ax.hist(measure.clamp(max=12).tolist(), bins=bins8, histtype="step", linewidth=1.5, density=True,
            label=message(f"l05.trained.{name}"))
ax.set_xlabel(message("l05.trained.measure_axis"))
ax.set_ylabel(message("l05.trained.density_axis"))
ax.legend()
plt.show()
for name, (measure, peak) in rows8.items():
    print(message("l05.trained.row", name=message(f"l05.trained.{name}"), rows=len(measure),
                  lazy=(peak < 2).double().mean().item(), median=measure.median().item()))

# %%
lazy8 = {name: (peak < 2).double().mean().item() for name, (measure, peak) in rows8.items()}
median8 = {name: measure.median().item() for name, (measure, peak) in rows8.items()}
# lang: en
claim("the decoder's self-attention: more than half of its queries are lazy", lazy8["decoder_self"] > 0.5)
claim("the encoder's self-attention: more than a third of its queries are lazy", lazy8["encoder_self"] > 1 / 3)
claim("the cross-attention: fewer than 3 in 10 of its queries are lazy", lazy8["cross"] < 0.3)
claim("the median M̄ of each self-attention is less than half the cross-attention's",
      max(median8["encoder_self"], median8["decoder_self"]) < 0.5 * median8["cross"])
# lang: zh
claim("解码器自注意力：一半以上的查询是惰性的", lazy8["decoder_self"] > 0.5)
claim("编码器自注意力：三分之一以上的查询是惰性的", lazy8["encoder_self"] > 1 / 3)
claim("交叉注意力：惰性查询不到十分之三", lazy8["cross"] < 0.3)
claim("两处自注意力的 M̄ 中位数，都不到交叉注意力的一半",
      max(median8["encoder_self"], median8["decoder_self"]) < 0.5 * median8["cross"])
# lang: end

# %% [markdown] tags=["lang-en"]
# So the assumption holds in part, and where it holds depends on the attention's job. In the two
# self-attentions many rows are close to uniform: there ProbSparse would lose little. The
# cross-attention must read one particular source letter at each step, and most of its rows are
# peaked: ProbSparse would leave most of them lazy, and get them wrong. Informer itself does the
# same split: its official code uses ProbSparse for the encoder's and the decoder's
# self-attention, and full attention for the decoder's cross-attention.

# %% [markdown] tags=["lang-zh"] en_hash="88f751a540"
# 所以这个假设只部分成立，在哪里成立取决于这处注意力的任务。两处自注意力里，很多行都接近均匀：在那里用 ProbSparse 损失不大。交叉注意力每一步都要读出源序列里某一个特定的字母，它的大多数行都有尖峰：ProbSparse 会把其中大多数当作惰性查询，给出错误的结果。Informer 自己也是这样划分的：官方代码在编码器和解码器的自注意力里用 ProbSparse，在解码器的交叉注意力里用完整注意力。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 9. Cost as $L$ grows
#
# What theory predicts, for $B$ items, $H$ heads, $D$ features:
#
# - **full attention** (`F.scaled_dot_product_attention`) computes $L^2$ scores of $D$
#   multiply–adds each: time $\propto L^2 D$, a slope of 2 on log–log axes. PyTorch's CPU kernel
#   works in blocks and never stores the $L \times L$ weights; a version that does stores
#   $B H L^2$ numbers.
# - **ProbSparse** computes $L \cdot U$ sampled scores, $u \cdot L$ scores for the chosen queries,
#   and $L$ lazy rows, with $U, u \propto \ln L$: time $\propto L \ln L \cdot D$, a slope a
#   little above 1.
# - **the plain version** (`probsparse.prob_sparse_attention_plain`, the way both codes take)
#   gathers `K_sample`, $B H L U D$ numbers, before it multiplies: the same slope, with a large
#   constant in time and in memory. **The fast version** (`probsparse.prob_sparse_attention`)
#   computes the same $L \cdot U$ scores straight from Q and K.
#
# Measured here, one batch item, 8 heads, $D = 64$, milliseconds per call. These times change
# with the machine and its load, from run to run:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="24b34cff1f"
# ## 9. 随 $L$ 增长的代价
#
# 理论的预测（$B$ 个样本，$H$ 个头，$D$ 个特征）：
#
# - **完整注意力**（`F.scaled_dot_product_attention`）计算 $L^2$ 个分数，每个要做 $D$ 次乘加：时间 $\propto L^2 D$，在双对数坐标上斜率为 2。PyTorch 的 CPU 核函数分块计算，从不存下 $L \times L$ 的权重；存下权重的实现要存 $B H L^2$ 个数。
# - **ProbSparse** 计算 $L \cdot U$ 个采样分数、被选中查询的 $u \cdot L$ 个分数，再填好 $L$ 个惰性的行，其中 $U, u \propto \ln L$：时间 $\propto L \ln L \cdot D$，斜率略大于 1。
# - **朴素版**（`probsparse.prob_sparse_attention_plain`，即两份代码的做法）先收集 `K_sample`，共 $B H L U D$ 个数，再做乘法：斜率相同，但时间和内存上的常数都很大。**快速版**（`probsparse.prob_sparse_attention`）直接从 Q 和 K 算出同样的 $L \cdot U$ 个分数。
#
# 下面是在本机上的测量：1 个样本，8 个头，$D = 64$，单位是每次调用的毫秒数。耗时随机器和它的负载而变，每次运行都不一样：

# %% tags=["nbval-ignore-output"]
cost_rng = torch.Generator().manual_seed(9)
time_lengths9 = (128, 256, 512, 1024, 2048)
# lang: en
# keys of the course's message catalogue: message(key) gives each version's name in the notebook's language
# lang: zh
# 键来自课程的文案目录：message(key) 给出每个版本在当前笔记本语言下的名字
# lang: end
attentions9 = {
    "l05.cost.sdpa": F.scaled_dot_product_attention,
    "l05.cost.plain": partial(probsparse.prob_sparse_attention_plain, generator=cost_rng),
    "l05.cost.fast": partial(probsparse.prob_sparse_attention, generator=cost_rng),
}
times9 = {name: [] for name in attentions9}
with torch.inference_mode():
    for attention in attentions9.values():
        # lang: en
        attention(*study.random_inputs(1, 8, 128, 64, generator=cost_rng))  # a first call pays one-time costs
        # lang: zh
        attention(*study.random_inputs(1, 8, 128, 64, generator=cost_rng))  # 第一次调用要付一次性的开销
        # lang: end
    for length in time_lengths9:
        q, k, v = study.random_inputs(1, 8, length, 64, generator=cost_rng)
        for name, attention in attentions9.items():
            times9[name].append(milliseconds(partial(attention, q, k, v), repeat=1, warmup=0))
fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
cost_lines(ax, time_lengths9, {message(name): found for name, found in times9.items()},
           message("l05.cost.length_axis"), message("l05.cost.time_axis"))
plt.show()
# lang: en
print("     L    F.sdpa     plain      fast   (milliseconds per call)")
# lang: zh
print("     L    F.sdpa    朴素版    快速版   （每次调用的毫秒数）")
# lang: end
for i, length in enumerate(time_lengths9):
    print(f"{length:6d}", " ".join(f"{found[i]:9.1f}" for found in times9.values()))

# %% [markdown] tags=["lang-en"]
# **On a GPU the comparison goes the other way**, up to long sequences. There
# `F.scaled_dot_product_attention` is one fused kernel (FlashAttention or its memory-efficient
# cousin): it keeps thousands of arithmetic units busy and never writes the $L \times L$ scores to
# memory. ProbSparse launches a dozen small kernels (the sampled scores, the measure, top-$u$, a
# gather, the chosen rows' attention, a scatter), and each pays its launch and reads its inputs from
# memory again, whatever little it computes. Its smaller arithmetic wins only once full attention's
# $L^2$ work outweighs all that: on an H200, F.sdpa was about 5 times faster at $L = 2048$ and
# ProbSparse about 4 times faster at $L = 32768$. On one CPU thread, where F.sdpa's arithmetic is slow
# too, the course's benchmark finds the fast version ahead from $L = 512$ on. If this runtime has a
# GPU, the next cell measures the two there (on Colab: Runtime › Change runtime type); the one after
# shows the course's benchmark as it ran on a GPU, its ratio F.sdpa's time over ProbSparse's (above
# 1: ProbSparse is faster).

# %% [markdown] tags=["lang-zh"] en_hash="fd33ad4230"
# **在 GPU 上，结论反了过来**，直到序列很长时才会再变。在 GPU 上，`F.scaled_dot_product_attention` 是一个融合核函数（FlashAttention 或与它相近的 memory-efficient 核函数）：它让成千上万个运算单元一直忙着，也从不把 $L \times L$ 的分数写进显存。ProbSparse 则要启动十来个小核函数（采样分数、度量、取前 $u$ 名、收集、被选中行的注意力、散射写回），每个核函数不管算得多少，都要付一次启动开销，再从显存读一遍输入。只有当完整注意力 $L^2$ 的计算量压过这一切时，它较少的运算量才占上风：在一块 H200 上，$L = 2048$ 时 F.sdpa 快约 5 倍，$L = 32768$ 时 ProbSparse 快约 4 倍。在单个 CPU 线程上，F.sdpa 的算术也慢，课程的基准测试发现快速版从 $L = 512$ 起就领先。如果当前运行环境有 GPU，下一个单元会在 GPU 上测量这两者（在 Colab 上：代码执行程序 › 更改运行时类型）；再下一个单元展示课程的基准测试在一块 GPU 上的结果，比值是 F.sdpa 的耗时除以 ProbSparse 的耗时（大于 1 表示 ProbSparse 更快）。

# %% tags=["nbval-ignore-output"]
def gpu_times9(device):
    # lang: en
    # the same calls with the same sample on the GPU; measured.milliseconds waits for each call to finish there
    # lang: zh
    # 在 GPU 上用同样的样本做同样的调用；measured.milliseconds 会等每次调用在 GPU 上真正算完
    # lang: end
    # lang: en
    print("     L    F.sdpa      fast   F.sdpa/fast   (milliseconds per call)")
    # lang: zh
    print("     L    F.sdpa    快速版  F.sdpa/快速版  （每次调用的毫秒数）")
    # lang: end
    gpu_rng = torch.Generator().manual_seed(9)
    with torch.inference_mode():
        for length in (2048, 8192, 16384):
            q, k, v = (t.to(device) for t in study.random_inputs(1, 8, length, 64, generator=gpu_rng))
            index = probsparse.sample_keys(length, length, probsparse.sample_count(length), generator=gpu_rng)
            sdpa_ms = measured.milliseconds(partial(F.scaled_dot_product_attention, q, k, v), device)
            fast_ms = measured.milliseconds(
                partial(probsparse.prob_sparse_attention, q, k, v, index=index.to(device)), device)
            print(f"{length:6d} {sdpa_ms:9.2f} {fast_ms:9.2f} {sdpa_ms / fast_ms:9.2f}×")


measured.on_gpu(gpu_times9)

# %%
# lang: en
measured.table("probsparse", {
    "L": lambda row: row["L"],
    "F.sdpa (ms)": lambda row: row["sdpa_ms"],
    "ProbSparse, fast (ms)": lambda row: row["course_ms"],
    "F.sdpa / fast": lambda row: measured.ratio(row["sdpa_ms"], row["course_ms"]),
})
# lang: zh
measured.table("probsparse", {
    "L": lambda row: row["L"],
    "F.sdpa（毫秒）": lambda row: row["sdpa_ms"],
    "ProbSparse 快速版（毫秒）": lambda row: row["course_ms"],
    "F.sdpa / 快速版": lambda row: measured.ratio(row["sdpa_ms"], row["course_ms"]),
})
# lang: end

# %% [markdown] tags=["lang-en"]
# Read the slopes off the picture: full attention's line steepens toward 2, the two ProbSparse
# lines stay near 1, and the plain version sits above the fast one at every length: the price of
# its gather. One run on a busy machine is noisy, so nothing is concluded from it here. The
# course's benchmark, `benchmarks/bench_probsparse.py` (run it with Python from the course's
# folder), measures full attention, the course's version and a re-creation of the
# re-implementation's algorithm (the defects of 7.1, 7.2 and 7.4 fixed) side by side on one
# thread, from $L = 96$ to $L = 16384$; it checks that the two ProbSparse versions return the
# same output on the same random indices, and prints median times, peak extra memory and the
# log–log slopes fitted over $L \ge 2048$.
#
# Memory needs no stopwatch. Section 6's walkthrough records the bytes each step allocates
# (on meta tensors: no data, so any size is free), and full attention's weights take
# $B H L^2 \cdot 4$ bytes in float32:

# %% [markdown] tags=["lang-zh"] en_hash="5c25361964"
# 从图上读斜率：完整注意力那条线越来越陡，趋向 2；两条 ProbSparse 的线保持在 1 附近；朴素版在每个长度上都高于快速版，这是它收集操作的代价。在一台忙碌的机器上只跑一次，噪声很大，只能看个大概，不能作为结论。课程的基准测试脚本 `benchmarks/bench_probsparse.py`（在课程目录下用 Python 运行）在单线程上把完整注意力、课程的版本和重写版算法的重现版（修好了 7.1、7.2 和 7.4 节的缺陷）放在一起测量，从 $L = 96$ 到 $L = 16384$；它先检查两个 ProbSparse 版本在同样的随机索引下给出同样的输出，再打印时间的中位数、峰值额外内存，以及在 $L \ge 2048$ 上拟合的双对数斜率。
#
# 内存则不需要秒表。第 6 节的逐步解析记录了每一步分配的字节数（在 meta 张量上计算：没有数据，所以多大的尺寸都不花时间），而完整注意力的权重在 float32 下占 $B H L^2 \cdot 4$ 字节：

# %%
memory_lengths9 = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
plain_traces9 = [probsparse.walkthrough(1, 8, n, 64, fast=False) for n in memory_lengths9]
fast_traces9 = [probsparse.walkthrough(1, 8, n, 64, fast=True) for n in memory_lengths9]
# lang: en
# full attention first, so that each version keeps its colour from the time plot
# lang: zh
# 完整注意力放在最前，让每个版本沿用时间图里的颜色
# lang: end
memory9 = {
    "l05.cost.weights": [1 * 8 * n * n * 4 for n in memory_lengths9],
    "l05.cost.plain": [trace.total_bytes for trace in plain_traces9],
    "l05.cost.fast": [trace.total_bytes for trace in fast_traces9],
}
fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
cost_lines(ax, memory_lengths9, {message(name): found for name, found in memory9.items()},
           message("l05.cost.length_axis"), message("l05.cost.memory_axis"), in_bytes=True)
plt.show()
slopes9 = {name: study.log_log_slope(memory_lengths9[3:], found[3:]) for name, found in memory9.items()}
# lang: en
print("     L   weights     plain      fast   (bytes allocated)")
# lang: zh
print("     L      权重    朴素版    快速版   （分配的字节数）")
# lang: end
for i, length in enumerate(memory_lengths9):
    print(f"{length:6d}", " ".join(f"{format_bytes(found[i]):>9}" for found in memory9.values()))
# lang: en
print(" slope", " ".join(f"{slopes9[name]:9.2f}" for name in memory9), "  (fitted from L = 1024 on)")
# lang: zh
print("  斜率", " ".join(f"{slopes9[name]:9.2f}" for name in memory9), "  （从 L = 1024 起拟合）")
# lang: end

# %%
at8192 = memory_lengths9.index(8192)
crossing9 = [weights > plain for weights, plain in zip(memory9["l05.cost.weights"], memory9["l05.cost.plain"])]
# lang: en
claim("full attention's weights: slope 2 (4 times the memory for twice the length)", abs(slopes9["l05.cost.weights"] - 2) < 1e-9)
claim("both ProbSparse versions: slope between 1 and 1.2 from L = 1024 on (L ln L)",
      all(1 < slopes9[name] < 1.2 for name in ("l05.cost.plain", "l05.cost.fast")))
claim("at L = 8192 the plain version allocates more than 20 times what the fast one does",
      memory9["l05.cost.plain"][at8192] > 20 * memory9["l05.cost.fast"][at8192])
claim("full attention's weights take less than the plain version up to L = 2048 and more from L = 4096 on",
      crossing9 == [False] * 5 + [True] * 3)
# lang: zh
claim("完整注意力的权重：斜率为 2（长度翻倍，内存变为 4 倍）", abs(slopes9["l05.cost.weights"] - 2) < 1e-9)
claim("两个 ProbSparse 版本：从 L = 1024 起斜率在 1 与 1.2 之间（L ln L）",
      all(1 < slopes9[name] < 1.2 for name in ("l05.cost.plain", "l05.cost.fast")))
claim("L = 8192 时，朴素版分配的内存是快速版的 20 倍以上",
      memory9["l05.cost.plain"][at8192] > 20 * memory9["l05.cost.fast"][at8192])
claim("L 不超过 2048 时，完整注意力的权重比朴素版占得少；从 L = 4096 起则更多",
      crossing9 == [False] * 5 + [True] * 3)
# lang: end

# %% [markdown] tags=["lang-en"]
# The plain version's memory is almost all `K_sample`, $U \cdot D$ numbers per query. The fast
# version keeps $U$ scores per query and the $(B, H, L, D_v)$ output, so its line sits a factor
# of about $D \cdot U / (U + D)$ lower, with the same slope. Full attention's stored weights grow
# with slope 2 and pass every ProbSparse line (the plain one between $L = 2048$ and $4096$).
# PyTorch's fused kernel avoids storing them, and then ProbSparse's advantage is time (the
# benchmark), not memory.

# %% [markdown] tags=["lang-zh"] en_hash="9cd97b4a38"
# 朴素版的内存几乎全花在 `K_sample` 上：每个查询 $U \cdot D$ 个数。快速版每个查询只存 $U$ 个分数，外加 $(B, H, L, D_v)$ 的输出，所以朴素版约是它的 $D \cdot U / (U + D)$ 倍，斜率相同。完整注意力存下的权重以斜率 2 增长，超过了每一条 ProbSparse 的线（朴素版那条在 $L = 2048$ 与 $4096$ 之间被超过）；PyTorch 的融合核函数不存权重，这时 ProbSparse 的优势在于时间（见基准测试），而不在内存。

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Full attention scores $L_Q \times L_K$ pairs in every head: the work, and the memory of weights
#   that are kept, grow with $L^2$ (2.1 GB of weights at $L = 8192$ for one sequence of 8 heads).
# - A lazy query has a flat softmax row and an output close to $\bar v$. The paper's sparsity
#   measure $M$ = log-sum-exp − mean is $\mathrm{KL}(\mathrm{uniform} \| p) + \ln L_K$; ProbSparse
#   ranks queries by its estimate $\bar M$ = max − mean, with $\bar M \le M \le \bar M + \ln L_K$.
# - ProbSparse estimates $\bar M$ from $U = c \cdot \lceil \ln L_K \rceil$ sampled keys per query
#   (one $(L_Q, U)$ sample for every batch item and head, unscaled scores), drawn from a
#   `torch.Generator`: reproducible, and the global random state untouched.
# - The $u = c \cdot \lceil \ln L_Q \rceil$ queries with the largest $\bar M$ attend over all keys;
#   the others all get the same mean(V), and send no gradient to $W_Q$. With every query chosen
#   it is exactly full attention.
# - Causal mode: chosen rows masked, lazy query $i$ gets the mean of $v_0 \dots v_i$, query $i$
#   samples keys $0 \dots i$ (so fewer early queries are chosen). No value leaks into an earlier
#   output; which queries are chosen is a top $u$ over the whole sequence, so a later key can
#   change it.
# - The walkthrough: `K_expand` is a free stride-0 view; `K_sample`, $(B, H, L_Q, U, D)$, is
#   most of the plain version's memory (157 MB of 181 MB at the re-implementation's sizes). The
#   fast version computes the sampled scores with `sampled_addmm` and never builds it.
# - The widely copied re-implementation has eight defects that run without an error; the official
#   code shares three and its causal mode has two more (samples from all keys, a sum for a mean).
#   Each one can be reproduced, measured and fixed (section 7).
# - ProbSparse is only as accurate as its assumption: close to full attention when a few queries
#   dominate, no better than mean(V) when none do (section 8). In a trained model the
#   self-attentions have many lazy rows, the cross-attention few.
# - Its cost grows far more slowly with $L$ than full attention's, but whether it is faster depends
#   on how the sampled scores are computed and on the device (section 9): on one CPU thread the fast
#   version beats F.sdpa from $L = 512$ on; on a GPU, where F.sdpa is one fused kernel and
#   ProbSparse a dozen small ones, only at tens of thousands of positions.
#
# Next: lesson 06, the Transformer block built around attention.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="c40bf63e79"
# ## 小结
#
# - 完整注意力在每个头里都要给 $L_Q \times L_K$ 对打分：计算量以及保留下来的权重所占的内存都随 $L^2$ 增长（一条序列、8 个头，$L = 8192$ 时权重就要 2.1 GB）。
# - 惰性查询的 softmax 行是平的，输出接近 $\bar v$。论文的稀疏性度量 $M$ = log-sum-exp − 平均值，等于 $\mathrm{KL}(\mathrm{uniform} \| p) + \ln L_K$；ProbSparse 用它的估计 $\bar M$ = 最大值 − 平均值给查询排序，且 $\bar M \le M \le \bar M + \ln L_K$。
# - ProbSparse 为每个查询采样 $U = c \cdot \lceil \ln L_K \rceil$ 个键来估计 $\bar M$（批量中的每个样本、每个头共用一份 $(L_Q, U)$ 的键样本，分数不缩放），样本从 `torch.Generator` 中抽取：可以复现，也不动全局随机状态。
# - $\bar M$ 最大的 $u = c \cdot \lceil \ln L_Q \rceil$ 个查询在全部键上做注意力，其余查询都得到同一个 mean(V)，也不会给 $W_Q$ 传回梯度。每个查询都被选中时，它与完整注意力完全一致。
# - 因果模式：被选中的行加掩码，惰性查询 $i$ 得到 $v_0 \dots v_i$ 的平均，查询 $i$ 只从键 $0 \dots i$ 中采样（因此选中的靠前查询更少）。任何值都不会泄漏到更早的输出里；但选中哪些查询是在整个序列上取前 $u$ 名，所以后面的键可以改变它。
# - 逐步解析：`K_expand` 是一个不花钱的、步长为 0 的视图；`K_sample` 的形状为 $(B, H, L_Q, U, D)$，占了朴素版的大部分内存（在重写版的尺寸下，181 MB 里占 157 MB）。快速版用 `sampled_addmm` 计算采样分数，从不构造它。
# - 那份广为流传的重写版有八个缺陷，运行时都不报错；官方代码也有其中三个，它的因果模式还另有两个（从全部键中采样、用和代替平均）。每一个都可以复现、测量并修复（第 7 节）。
# - ProbSparse 的准确程度取决于它的假设是否成立：少数查询占主导时接近完整注意力，没有这样的查询时并不比 mean(V) 更好（第 8 节）。在训练好的模型里，自注意力有很多惰性的行，交叉注意力则很少。
# - 它的代价随 $L$ 的增长比完整注意力慢得多，但它是否真的更快，取决于采样分数是怎样计算的，也取决于设备（第 9 节）：在单个 CPU 线程上，快速版从 $L = 512$ 起就胜过 F.sdpa；在 GPU 上，F.sdpa 是一个融合核函数，ProbSparse 却是十来个小核函数，要到几万个位置才能胜出。
#
# 下一课（第 06 课）：围绕注意力搭建的 Transformer 块。
