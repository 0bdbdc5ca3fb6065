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
# # Attention basics
#
# Attention lets a model decide, for every position it computes, which other positions to read
# from, and how much. Every attention layer in this course, up to the Transformer, is built from
# one small operation: compare a **query** with a set of **keys**, turn the comparisons into
# weights, and return the weighted average of the **values**.
#
# In this lesson you will
#
# 1. read queries, keys and values as a *soft* dictionary lookup;
# 2. compute four score functions (additive, bilinear, dot, scaled dot) on the same data, and
#    write one of them yourself;
# 3. write a numerically stable softmax and see what a temperature does;
# 4. measure why the dot product is divided by $\sqrt{d_k}$;
# 5. write scaled dot-product attention from scratch and check it against PyTorch.
#
# There are three exercises. A check cell follows each one: it says whether your function is
# right and, if not, which known mistake it makes.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="00fb673fa2"
# # 注意力基础
#
# 注意力（attention）让模型在计算每个位置时自行决定：从哪些其他位置读取信息，各读多少。本课程中的所有注意力层，直到 Transformer，都由同一个小运算搭建而成：把一个**查询**（query）与一组**键**（key）逐一比较，把比较结果变成权重，再用这些权重对**值**（value）求加权平均。
#
# 本课你将：
#
# 1. 把查询、键、值理解为一次“软”的字典查找；
# 2. 在同一份数据上计算四种评分函数（加性、双线性、点积、缩放点积），并亲手实现其中一种；
# 3. 写出数值稳定的 softmax，并看看温度起什么作用；
# 4. 通过实际测量，弄清点积为什么要除以 $\sqrt{d_k}$；
# 5. 从零实现缩放点积注意力，并与 PyTorch 的实现对照。
#
# 本课共有三道练习。每道练习后面都跟着一个检查单元：它会告诉你函数是否正确；如果不对，还会指出你犯的是哪一种常见错误。

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import check, claim, setup
from course_utils.attention import (
    additive_scores,
    bilinear_scores,
    dot_scores,
    scaled_dot_product_attention,
    scaled_dot_scores,
)
from course_utils.i18n import message
from course_utils.viz import heatmap
from course_utils.widgets import scaling_explorer, scaling_view

setup(lang="en")
# lang: en
torch.set_printoptions(precision=2, sci_mode=False)  # two decimals are plenty to read weights
# lang: zh
torch.set_printoptions(precision=2, sci_mode=False)  # 读权重，两位小数足够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. Queries, keys and values
#
# A Python `dict` answers a lookup by finding the one key equal to the query and returning its
# value. Attention makes the lookup *soft*: it scores the query against **every** key, turns the
# scores into weights that are positive and sum to 1, and returns the weighted average of all
# the values:
#
# $$\alpha_j = \frac{\exp\big(\mathrm{score}(q, k_j)\big)}{\sum_{j'} \exp\big(\mathrm{score}(q, k_{j'})\big)},
# \qquad \mathrm{output} = \sum_j \alpha_j \, v_j .$$
#
# The keys are what the query is compared with; the values are what comes back. The
# $\alpha_j$ are the **attention weights**, and the step that turns scores into them is the
# softmax (section 3).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d5d3fba084"
# ## 1. 查询、键和值
#
# Python 的 `dict` 查找时，会找到与查询完全相等的那一个键，返回它对应的值。注意力把这种查找变“软”了：它拿查询与**每一个**键打分，把分数变成一组全为正、总和为 1 的权重，再返回所有值的加权平均：
#
# $$\alpha_j = \frac{\exp\big(\mathrm{score}(q, k_j)\big)}{\sum_{j'} \exp\big(\mathrm{score}(q, k_{j'})\big)},
# \qquad \mathrm{output} = \sum_j \alpha_j \, v_j .$$
#
# 键是查询拿来比较的对象，值是最终取回的内容。这些 $\alpha_j$ 就是**注意力权重**；把分数变成权重的那一步是 softmax（见第 3 节）。

# %% [markdown] tags=["lang-en"]
# A toy lookup in the plane. Four keys point east, north, west and south; their values are the
# numbers 10, 20, 30 and 40. The score is the dot product $q \cdot k_j$. There are three
# queries, and they all point the same way, north and a little west; they differ only in
# length: a short one (length 0.1), a medium one (length 1) and a long one (length 7).

# %% [markdown] tags=["lang-zh"] en_hash="5d351bbf70"
# 先在平面上做一次玩具查找。四个键分别指向东、北、西、南，对应的值是 10、20、30、40 四个数。分数取点积 $q \cdot k_j$。三个查询指向同一个方向（北偏西一点），彼此只差在长度上：一个短（长度 0.1），一个中等（长度 1），一个长（长度 7）。

# %%
keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])  # → ↑ ← ↓
# lang: en
values = torch.tensor([[10.0], [20.0], [30.0], [40.0]])  # one number per key
direction = torch.tensor([-1.0, 3.0]) / math.sqrt(10.0)  # a unit vector: north, a little west
lengths = torch.tensor([0.1, 1.0, 7.0])  # short, medium, long
queries = lengths.unsqueeze(-1) * direction  # (3, 2): one direction, three lengths
# lang: zh
values = torch.tensor([[10.0], [20.0], [30.0], [40.0]])  # 每个键对应一个数
direction = torch.tensor([-1.0, 3.0]) / math.sqrt(10.0)  # 单位向量：朝北，略偏西
lengths = torch.tensor([0.1, 1.0, 7.0])  # 短、中、长
queries = lengths.unsqueeze(-1) * direction  # (3, 2)：同一个方向，三种长度
# lang: end

# lang: en
scores = queries @ keys.T  # (3, 4): each of the 3 queries against each of the 4 keys
alpha = torch.softmax(scores, dim=-1)  # each row is positive and sums to 1
output = alpha @ values  # (3, 1): one weighted average per query
# lang: zh
scores = queries @ keys.T  # (3, 4)：3 个查询，每个都与 4 个键各打一次分
alpha = torch.softmax(scores, dim=-1)  # 每一行都为正，且和为 1
output = alpha @ values  # (3, 1)：每个查询得到一个加权平均
# lang: end
print(queries)
print(alpha)
print(output)

short, medium, long = alpha  # (4,) (4,) (4,)
# lang: en
claim("the three queries share one direction; only their lengths differ",
      torch.allclose(queries / queries.norm(dim=-1, keepdim=True), direction.expand(3, 2)))
claim("the long query puts more than 0.95 of its weight on the north key", long[1] > 0.95)
claim("the long query returns within 0.5 of 20, the north key's value", (output[2] - 20).abs() < 0.5)
claim("the short query's weights are all within 0.03 of 1/4", ((short - 1 / 4).abs() < 0.03).all())
claim("the short query returns within 1 of 25, the mean of the values", (output[0] - 25).abs() < 1)
claim("the medium query gives the north key its largest weight, between 0.4 and 0.6",
      (medium.argmax() == 1) & (0.4 < medium[1]) & (medium[1] < 0.6))
# lang: zh
claim("三个查询方向相同，只有长度不同",
      torch.allclose(queries / queries.norm(dim=-1, keepdim=True), direction.expand(3, 2)))
claim("长查询把超过 0.95 的权重给了朝北的键", long[1] > 0.95)
claim("长查询返回的值与朝北键的值 20 相差不到 0.5", (output[2] - 20).abs() < 0.5)
claim("短查询的每个权重与 1/4 相差都不到 0.03", ((short - 1 / 4).abs() < 0.03).all())
claim("短查询返回的值与所有值的平均数 25 相差不到 1", (output[0] - 25).abs() < 1)
claim("中等查询把最大的权重给了朝北的键，这个权重在 0.4 与 0.6 之间",
      (medium.argmax() == 1) & (0.4 < medium[1]) & (medium[1] < 0.6))
# lang: end

# %% [markdown] tags=["lang-en"]
# As a picture: one row per query, one column per key, the weight in each cell.

# %% [markdown] tags=["lang-zh"] en_hash="c533937ada"
# 画成图：每一行是一个查询，每一列是一个键，格子里是对应的权重。

# %%
# lang: en
heatmap(alpha, queries=["short", "medium", "long"], keys=["→ 10", "↑ 20", "← 30", "↓ 40"], vmax=1.0)
# lang: zh
heatmap(alpha, queries=["短", "中", "长"], keys=["→ 10", "↑ 20", "← 30", "↓ 40"], vmax=1.0)
# lang: end
plt.show()

# %% [markdown] tags=["lang-en"]
# The three queries differ only in length, yet their rows are very different. The long query
# puts almost all its weight (0.99) on the north key and returns 20.12, almost exactly that
# key's value: nearly a hard lookup. The short query spreads its weight almost evenly (every
# weight within 0.03 of 1/4) and returns 24.69, close to 25, the mean of all four values. The
# medium query lies in between: about half its weight goes north, and it returns 22.80. The
# direction decides which key wins; the length, that is the **size of the scores, decides how
# sharp the lookup is**. Keep this in mind for section 4.
#
# In practice every query is handled at once. Stack the queries into $Q$ of shape
# $(L_q, d_k)$, the keys into $K$, $(L_k, d_k)$, and the values into $V$, $(L_k, d_v)$. One
# matrix product scores every pair, $S = QK^\top$ of shape $(L_q, L_k)$; the softmax runs along
# each row; and the product with $V$ averages the values, $(L_q, d_v)$. A batch axis in front
# changes nothing. The package's `scaled_dot_product_attention` takes $(B, L, d)$ tensors and
# returns `(output, weights)`, in that order:

# %% [markdown] tags=["lang-zh"] en_hash="8dbb930eb8"
# 三个查询只差在长度上，它们的权重行却大不相同。长查询几乎把全部权重（0.99）都给了朝北的键，返回 20.12，几乎正好是这个键的值，接近一次“硬”查找。短查询把权重分得几乎均匀（每个权重与 1/4 相差都不到 0.03），返回 24.69，接近四个值的平均数 25。中等查询介于两者之间：约一半的权重给了北，返回 22.80。方向决定哪个键胜出，长度，也就是**分数的大小，决定了查找有多“尖锐”**。第 4 节还会用到这一点。
#
# 实际计算时，所有查询是一起处理的。把查询堆叠成矩阵 $Q$，形状为 $(L_q, d_k)$；键堆叠成 $K$，形状为 $(L_k, d_k)$；值堆叠成 $V$，形状为 $(L_k, d_v)$。一次矩阵乘法 $S = QK^\top$ 就给所有的查询–键对打了分，形状为 $(L_q, L_k)$；softmax 沿每一行进行；再与 $V$ 相乘，对值求平均，得到 $(L_q, d_v)$。在最前面加一个批量维度，这些都不受影响。工具包中的 `scaled_dot_product_attention` 接收形状为 $(B, L, d)$ 的张量，并按 `(output, weights)` 的顺序返回结果：

# %%
B, L_q, L_k, d_k, d_v = 2, 3, 5, 8, 4
Q, K, V = torch.randn(B, L_q, d_k), torch.randn(B, L_k, d_k), torch.randn(B, L_k, d_v)

output, weights = scaled_dot_product_attention(Q, K, V)
print("output.shape  =", tuple(output.shape))  # (B, L_q, d_v)
print("weights.shape =", tuple(weights.shape))  # (B, L_q, L_k)
# lang: en
claim("every row of the weights sums to 1", torch.allclose(weights.sum(dim=-1), torch.ones(B, L_q)))
# lang: zh
claim("权重的每一行之和都为 1", torch.allclose(weights.sum(dim=-1), torch.ones(B, L_q)))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Four ways to score a query against a key
#
# The score function decides what "similar" means. Four classic choices:
#
# | score function | $\mathrm{score}(q, k)$ | learned parameters | needs $d_q = d_k$ |
# | --- | --- | --- | --- |
# | additive, or MLP (Bahdanau) | $v^\top \tanh(W_q q + W_k k)$ | $W_q, W_k, v$ | no |
# | bilinear (Luong's "general") | $q^\top W k$ | $W$ | no |
# | dot | $q^\top k$ | none | yes |
# | scaled dot | $q^\top k / \sqrt{d_k}$ | none | yes |
#
# Additive attention runs a small neural network on every (query, key) pair. The bilinear score
# learns which features of the query should match which features of the key. The dot product
# learns nothing and needs queries and keys of the same size; the scaled dot product divides it
# by $\sqrt{d_k}$ (section 4 says why). Here are all four on the same queries and keys,
# computed by `course_utils.attention`. In code, vectors are rows, so the weights are stored
# transposed: `w_query` has shape $(d_q, d_h)$ and projects with `query @ w_query`.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="377fcf1987"
# ## 2. 给查询和键打分的四种方法
#
# 评分函数决定了“相似”的含义。经典的选择有四种：
#
# | 评分函数 | $\mathrm{score}(q, k)$ | 可学习参数 | 要求 $d_q = d_k$ |
# | --- | --- | --- | --- |
# | 加性，又称 MLP（Bahdanau） | $v^\top \tanh(W_q q + W_k k)$ | $W_q, W_k, v$ | 否 |
# | 双线性（Luong 的 “general”） | $q^\top W k$ | $W$ | 否 |
# | 点积 | $q^\top k$ | 无 | 是 |
# | 缩放点积 | $q^\top k / \sqrt{d_k}$ | 无 | 是 |
#
# 加性注意力对每一个（查询，键）对都运行一个小型神经网络。双线性评分学习的是：查询的哪些特征应当与键的哪些特征相匹配。点积没有需要学习的参数，但要求查询和键的维度相同；缩放点积再把点积除以 $\sqrt{d_k}$（原因见第 4 节）。下面用 `course_utils.attention` 在同一组查询和键上算出这四种分数。代码中的向量是行向量，所以权重以转置的形式存放：`w_query` 的形状是 $(d_q, d_h)$，投影写作 `query @ w_query`。

# %%
g = torch.Generator().manual_seed(0)
B, L_q, L_k, d, d_h = 1, 4, 6, 8, 16
Q = torch.randn(B, L_q, d, generator=g)
K = torch.randn(B, L_k, d, generator=g)
# lang: en
W = torch.randn(d, d, generator=g) / math.sqrt(d)  # bilinear: (d_q, d_k)
W_q = torch.randn(d, d_h, generator=g) / math.sqrt(d)  # additive: (d_q, d_h)
W_k = torch.randn(d, d_h, generator=g) / math.sqrt(d)  # additive: (d_k, d_h)
v = torch.randn(d_h, generator=g)  # additive: (d_h,)
# lang: zh
W = torch.randn(d, d, generator=g) / math.sqrt(d)  # 双线性：(d_q, d_k)
W_q = torch.randn(d, d_h, generator=g) / math.sqrt(d)  # 加性：(d_q, d_h)
W_k = torch.randn(d, d_h, generator=g) / math.sqrt(d)  # 加性：(d_k, d_h)
v = torch.randn(d_h, generator=g)  # 加性：(d_h,)
# lang: end

scores = {
    "l01.score_additive": additive_scores(Q, K, W_q, W_k, v),
    "l01.score_bilinear": bilinear_scores(Q, K, W),
    "l01.score_dot": dot_scores(Q, K),
    "l01.score_scaled_dot": scaled_dot_scores(Q, K),
}
for name, score in scores.items():
    # lang: en
    print(tuple(score.shape), message(name))  # (B, L_q, L_k) for all four
    # lang: zh
    print(tuple(score.shape), message(name))  # 四种都是 (B, L_q, L_k)
    # lang: end

# %% [markdown] tags=["lang-en"]
# Additive, bilinear and dot scores put the keys in different orders, so they give the queries
# different attention weights. The scaled dot divides every dot score by the same $\sqrt{d}$: it
# keeps the dot's order, and its weights are flatter. (The parameters here are random; in a
# model they are learned.)

# %% [markdown] tags=["lang-zh"] en_hash="6afa889208"
# 加性、双线性和点积三种分数给键排出的顺序各不相同，因此得到的注意力权重也各不相同。缩放点积把每个点积分数都除以同一个 $\sqrt{d}$：键的顺序与点积相同，权重则更平缓。（这里的参数是随机的；在模型中，它们是学出来的。）

# %%
fig, axes = plt.subplots(1, 4, figsize=(12, 3.0), layout="constrained")
for ax, (name, score) in zip(axes, scores.items()):
    heatmap(torch.softmax(score[0], dim=-1), ax=ax, title=message(name), vmax=1.0, colorbar=False)
plt.show()

order = {name: score[0].argsort(dim=-1, descending=True) for name, score in scores.items()}  # (L_q, L_k)
largest = {name: torch.softmax(score[0], dim=-1).amax(dim=-1) for name, score in scores.items()}  # (L_q,)
pairs = [("l01.score_additive", "l01.score_bilinear"), ("l01.score_additive", "l01.score_dot"),
         ("l01.score_bilinear", "l01.score_dot")]
differ = all(not torch.equal(order[a][i], order[b][i]) for a, b in pairs for i in range(L_q))
# lang: en
claim("for every query, additive, bilinear and dot put the keys in three different orders", differ)
claim("scaled dot puts the keys in the same order as dot",
      torch.equal(order["l01.score_scaled_dot"], order["l01.score_dot"]))
claim("for every query, the largest scaled-dot weight is smaller than the largest dot weight",
      (largest["l01.score_scaled_dot"] < largest["l01.score_dot"]).all())
# lang: zh
claim("对每个查询，加性、双线性和点积给键排出的顺序两两不同", differ)
claim("缩放点积给键排出的顺序与点积相同",
      torch.equal(order["l01.score_scaled_dot"], order["l01.score_dot"]))
claim("对每个查询，缩放点积的最大权重都小于点积的最大权重",
      (largest["l01.score_scaled_dot"] < largest["l01.score_dot"]).all())
# lang: end

# %% [markdown] tags=["lang-en"]
# The package scores every pair at once, with matrix products and broadcasting. Written out one
# pair at a time, straight from the formulas in the table, they give the same numbers:

# %% [markdown] tags=["lang-zh"] en_hash="d6a8e3402a"
# 工具包借助矩阵乘法和广播，一次算出所有配对的分数。直接照着表中的公式一对一对地写出来，得到的数完全相同：

# %%
# lang: en
q, k = Q[0], K[0]  # drop the batch axis: (L_q, d), (L_k, d)
# lang: zh
q, k = Q[0], K[0]  # 去掉批量维度：(L_q, d) 和 (L_k, d)
# lang: end
one_pair = {
    "l01.score_additive": lambda i, j: v @ torch.tanh(q[i] @ W_q + k[j] @ W_k),
    "l01.score_bilinear": lambda i, j: q[i] @ W @ k[j],
    "l01.score_dot": lambda i, j: torch.dot(q[i], k[j]),
    "l01.score_scaled_dot": lambda i, j: torch.dot(q[i], k[j]) / math.sqrt(d),
}
for name, pair_score in one_pair.items():
    by_hand = torch.tensor([[pair_score(i, j).item() for j in range(L_k)] for i in range(L_q)])
    same = torch.allclose(by_hand, scores[name][0], atol=1e-5)
    # lang: en
    claim(f"{message(name)}: pair by pair = the package's scores", same)
    # lang: zh
    claim(f"{message(name)}：逐对计算 = 工具包的分数", same)
    # lang: end

# %% [markdown] tags=["lang-en"]
# ### The additive score is an MLP
#
# Why is the additive score also called the MLP score? Concatenate the query and the key into
# one vector $[q; k]$ and feed it to a network with one hidden layer: weight $W_1$, then tanh,
# then an output weight $w_2$. Split $W_1$ into the columns that meet $q$ and the columns that
# meet $k$, $W_1 = [\,W_q \;\; W_k\,]$:
#
# $$w_2^\top \tanh\big(W_1 [q; k]\big) = w_2^\top \tanh(W_q q + W_k k),$$
#
# which is the additive score with $v = w_2$. Let us build that MLP with `torch.nn`, give it
# the weights above and run it on every concatenated pair:

# %% [markdown] tags=["lang-zh"] en_hash="4e94601442"
# ### 加性评分就是一个 MLP
#
# 加性评分为什么又叫 MLP 评分？把查询和键拼接成一个向量 $[q; k]$，送进一个只有一个隐藏层的网络：先乘权重 $W_1$，再过 tanh，最后乘输出权重 $w_2$。把 $W_1$ 按列拆成与 $q$ 相乘的部分和与 $k$ 相乘的部分，即 $W_1 = [\,W_q \;\; W_k\,]$，就有
#
# $$w_2^\top \tanh\big(W_1 [q; k]\big) = w_2^\top \tanh(W_q q + W_k k),$$
#
# 这正是 $v = w_2$ 时的加性评分。下面用 `torch.nn` 搭出这个 MLP，装上前面的权重，再把它作用在每一个拼接好的配对上：

# %%
# lang: en
mlp = torch.nn.Sequential(
    torch.nn.Linear(2 * d, d_h, bias=False),  # W_1, acting on [q; k]
    torch.nn.Tanh(),
    torch.nn.Linear(d_h, 1, bias=False),  # w_2
)
# lang: zh
mlp = torch.nn.Sequential(
    torch.nn.Linear(2 * d, d_h, bias=False),  # W_1，作用在 [q; k] 上
    torch.nn.Tanh(),
    torch.nn.Linear(d_h, 1, bias=False),  # w_2
)
# lang: end
with torch.no_grad():
    # lang: en
    mlp[0].weight.copy_(torch.cat([W_q, W_k]).T)  # nn.Linear stores (out, in) = (d_h, 2d)
    # lang: zh
    mlp[0].weight.copy_(torch.cat([W_q, W_k]).T)  # nn.Linear 按 (out, in) = (d_h, 2d) 存放权重
    # lang: end
    mlp[2].weight.copy_(v.unsqueeze(0))  # (1, d_h)

# lang: en
every_q = Q.unsqueeze(2).expand(B, L_q, L_k, d)  # query i repeated along the keys
every_k = K.unsqueeze(1).expand(B, L_q, L_k, d)  # key j repeated along the queries
concatenated = torch.cat([every_q, every_k], dim=-1)  # (B, L_q, L_k, 2d): every [q; k]
# lang: zh
every_q = Q.unsqueeze(2).expand(B, L_q, L_k, d)  # 第 i 个查询沿键的方向重复
every_k = K.unsqueeze(1).expand(B, L_q, L_k, d)  # 第 j 个键沿查询的方向重复
concatenated = torch.cat([every_q, every_k], dim=-1)  # (B, L_q, L_k, 2d)：所有的 [q; k]
# lang: end
print(tuple(concatenated.shape))
mlp_scores = mlp(concatenated).squeeze(-1)  # (B, L_q, L_k)
same = torch.allclose(mlp_scores, scores["l01.score_additive"], atol=1e-5)
# lang: en
claim("the MLP on [q; k] gives the additive scores", same)
# lang: zh
claim("作用在 [q; k] 上的 MLP 给出的正是加性分数", same)
# lang: end

# %% [markdown] tags=["lang-en"]
# The concatenated tensor holds $L_q \cdot L_k$ vectors of size $d_q + d_k$, one per pair.
# The split form never builds it: project the queries once, the keys once, and let
# broadcasting add every query's projection to every key's.
#
# ### Exercise 1: additive scores
#
# Write `my_additive_scores(query, key, w_query, w_key, v)` without the concatenation:
#
# 1. project: `query @ w_query` has shape $(B, L_q, d_h)$ and `key @ w_key` has shape $(B, L_k, d_h)$;
# 2. insert a size-1 axis into each, so that broadcasting pairs every query with every key:
#    $(B, L_q, 1, d_h) + (B, 1, L_k, d_h) \to (B, L_q, L_k, d_h)$;
# 3. apply tanh, then multiply by `v` to get $(B, L_q, L_k)$.
#
# The check tries shapes where $L_q \ne L_k$ and $d_q \ne d_k$. It refuses the course's own
# `attention.additive_scores`, which is this exercise's answer.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="26eb00f15d"
# 拼接后的张量装着 $L_q \cdot L_k$ 个长度为 $d_q + d_k$ 的向量，每个配对一个。拆开后的写法根本不需要构造它：查询只投影一次，键也只投影一次，再借助广播把每个查询的投影与每个键的投影相加。
#
# ### 练习 1：加性评分
#
# 不做拼接，写出 `my_additive_scores(query, key, w_query, w_key, v)`：
#
# 1. 投影：`query @ w_query` 的形状是 $(B, L_q, d_h)$，`key @ w_key` 的形状是 $(B, L_k, d_h)$；
# 2. 给两者各插入一个长度为 1 的维度，让广播把每个查询与每个键配成对：
#    $(B, L_q, 1, d_h) + (B, 1, L_k, d_h) \to (B, L_q, L_k, d_h)$；
# 3. 先做 tanh，再与 `v` 相乘，得到 $(B, L_q, L_k)$。
#
# 检查会在 $L_q \ne L_k$、$d_q \ne d_k$ 的形状上测试你的函数，并且不接受课程自带的 `attention.additive_scores`（它正是本题的答案）。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="01.additive_scores"
def my_additive_scores(query, key, w_query, w_key, v):
    # lang: en
    """Additive (MLP) scores vᵀ tanh(W_q q + W_k k) for every (query, key) pair.

    query: (B, L_q, d_q), key: (B, L_k, d_k), w_query: (d_q, d_h), w_key: (d_k, d_h), v: (d_h,);
    float tensors, all of one dtype (float32 or float64).
    Returns the scores, shape (B, L_q, L_k), of that same dtype.
    """
    # lang: zh
    """对每一个（查询，键）对计算加性（MLP）分数 vᵀ tanh(W_q q + W_k k)。

    query: (B, L_q, d_q)，key: (B, L_k, d_k)，w_query: (d_q, d_h)，w_key: (d_k, d_h)，v: (d_h,)；
    都是浮点张量，dtype 全部相同（float32 或 float64）。
    返回分数，形状为 (B, L_q, L_k)，dtype 与输入相同。
    """
    # lang: end
    ### BEGIN SOLUTION
    projected_q = (query @ w_query).unsqueeze(-2)  # (B, L_q, 1, d_h)
    projected_k = (key @ w_key).unsqueeze(-3)  # (B, 1, L_k, d_h)
    return torch.tanh(projected_q + projected_k) @ v  # (B, L_q, L_k, d_h) @ (d_h,) -> (B, L_q, L_k)
    ### END SOLUTION


# %%
from course_utils import check
check("01.additive_scores", my_additive_scores)

# %% [markdown] tags=["lang-en"]
# ### What each costs
#
# Additive attention learns the most parameters and evaluates a tanh of size $d_h$ for every
# pair. Bilinear attention learns one $d_q \times d_k$ matrix. Dot and scaled dot learn nothing
# and cost one matrix product, which is fast on any hardware; that is why the Transformer scores
# with the scaled dot product. The learned parameters in our example:

# %% [markdown] tags=["lang-zh"] en_hash="801154e947"
# ### 各自的代价
#
# 加性注意力要学习的参数最多，而且要为每个配对计算一次长度为 $d_h$ 的 tanh。双线性注意力只学习一个 $d_q \times d_k$ 的矩阵。点积和缩放点积没有任何要学的参数，只需一次矩阵乘法，在什么硬件上都很快；Transformer 正是因此采用缩放点积评分。本例中各自的可学习参数个数如下：

# %%
parameters = {
    "l01.score_additive": W_q.numel() + W_k.numel() + v.numel(),
    "l01.score_bilinear": W.numel(),
    "l01.score_dot": 0,
    "l01.score_scaled_dot": 0,
}
for name, count in parameters.items():
    print(f"{count:>4}", message(name))

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Softmax and temperature
#
# $$\mathrm{softmax}(s)_j = \frac{e^{s_j}}{\sum_{j'} e^{s_{j'}}}$$
#
# Softmax makes every weight positive, makes them sum to 1, and keeps the order of the scores.
# Two more properties matter for attention:
#
# - **Adding the same constant to every score changes nothing**:
#   $e^{s_j + c} / \sum_{j'} e^{s_{j'} + c} = e^{s_j} / \sum_{j'} e^{s_{j'}}$. Only the
#   differences between scores count.
# - **Multiplying the scores does change the weights.** Divide them by a temperature $T$,
#   $\mathrm{softmax}(s / T)$: a small $T$ stretches the differences, and the weights approach a
#   one-hot vector on the largest score (a hard lookup); a large $T$ shrinks them, and the
#   weights approach uniform.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="461bb35d45"
# ## 3. softmax 与温度
#
# $$\mathrm{softmax}(s)_j = \frac{e^{s_j}}{\sum_{j'} e^{s_{j'}}}$$
#
# softmax 让每个权重都为正、总和为 1，并且保持分数的大小顺序。对注意力来说，还有两条性质很重要：
#
# - **所有分数加上同一个常数，结果不变**：
#   $e^{s_j + c} / \sum_{j'} e^{s_{j'} + c} = e^{s_j} / \sum_{j'} e^{s_{j'}}$。起作用的只有分数之间的差。
# - **把分数乘上一个倍数，权重就会改变。** 把分数除以温度 $T$，即 $\mathrm{softmax}(s / T)$：$T$ 小时，分数之间的差距被拉大，权重趋向于落在最大分数上的 one-hot 向量（也就是“硬”查找）；$T$ 大时，差距被压缩，权重趋向均匀分布。

# %%
scores = torch.tensor([2.0, 1.0, 0.5, -1.0])
temperatures = [0.25, 1.0, 4.0]

alphas = {}
fig, axes = plt.subplots(1, 3, figsize=(9, 2.6), sharey=True, layout="constrained")
for ax, temperature in zip(axes, temperatures):
    alpha = alphas[temperature] = torch.softmax(scores / temperature, dim=-1)
    print(f"T = {temperature}:", alpha)
    ax.bar(range(len(scores)), alpha.numpy(), color="tab:orange")
    ax.set_title(f"T = {temperature}")
    ax.set_xticks(range(len(scores)))
    ax.set_xlabel(message("plot.key"))
axes[0].set_ylim(0, 1)
axes[0].set_ylabel(message("l01.weight"))
plt.show()

same_order = all(torch.equal(alpha.argsort(), scores.argsort()) for alpha in alphas.values())
# lang: en
claim("at every temperature the weights keep the order of the scores", same_order)
claim("T = 0.25: more than 0.95 of the weight lands on the largest score", alphas[0.25][0] > 0.95)
claim("T = 4: every weight lies within 0.1 of 1/4", ((alphas[4.0] - 1 / 4).abs() < 0.1).all())
# lang: zh
claim("在每个温度下，权重的大小顺序都与分数相同", same_order)
claim("T = 0.25：超过 0.95 的权重落在最大的分数上", alphas[0.25][0] > 0.95)
claim("T = 4：每个权重与 1/4 相差都不到 0.1", ((alphas[4.0] - 1 / 4).abs() < 0.1).all())
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Large scores overflow
#
# In float32, $e^x$ is `inf` for every $x$ above about 88.7. A softmax written straight from the
# formula then divides `inf` by `inf`:

# %% [markdown] tags=["lang-zh"] en_hash="d58eb8594a"
# ### 大分数会上溢
#
# 在 float32 中，只要 $x$ 超过约 88.7，$e^x$ 就是 `inf`。直接照公式写的 softmax 于是会拿 `inf` 除以 `inf`：

# %%
big = torch.tensor([1000.0, 999.0, 998.0])
naive = big.exp() / big.exp().sum()
# lang: en
print(big.exp())  # overflows
# lang: zh
print(big.exp())  # 上溢
# lang: end
print(naive)  # inf / inf
# lang: en
print(torch.softmax(big, dim=-1))  # fine
claim("exp overflows to inf for every score here", big.exp().isinf().all())
claim("the formula as written gives NaN", naive.isnan().all())
claim("softmax(big - 1000) = softmax(big): a shift changes nothing",
      torch.allclose(torch.softmax(big - 1000.0, dim=-1), torch.softmax(big, dim=-1)))
# lang: zh
print(torch.softmax(big, dim=-1))  # 没问题
claim("这里每个分数的 exp 都上溢为 inf", big.exp().isinf().all())
claim("照公式直接计算得到 NaN", naive.isnan().all())
claim("softmax(big - 1000) = softmax(big)：平移不改变任何结果",
      torch.allclose(torch.softmax(big - 1000.0, dim=-1), torch.softmax(big, dim=-1)))
# lang: end

# %% [markdown] tags=["lang-en"]
# PyTorch's softmax is fine because it uses the first property: it subtracts each row's maximum
# before exponentiating. The largest exponent is then $e^0 = 1$, so nothing overflows, and the
# sum is at least 1, so nothing divides by zero either (the same trick saves very negative
# scores, whose exponentials would all underflow to 0).
#
# ### Exercise 2: a stable softmax
#
# Write `my_softmax(scores)`: the softmax over the last axis of a tensor of any shape
# $(\dots, L)$, safe for large scores, from elementary operations. The check refuses every
# ready-made softmax: torch's `torch.softmax`, `F.softmax`, `Tensor.softmax` and
# `torch.special.softmax`, their logarithms `torch.log_softmax`, `F.log_softmax`,
# `Tensor.log_softmax` and `torch.special.log_softmax`, and the course's `masks.masked_softmax`,
# which without a mask is the same softmax. Subtract each row's maximum
# (`amax(dim=-1, keepdim=True)`), exponentiate, and divide by each row's sum. Without
# `keepdim=True` the row maxima lose their last axis and broadcast against the wrong one. The
# check includes scores around +500 and −500, and one tensor whose rows sit around +500, −300
# and 0 at once, so one shift for the whole tensor is not enough: each row needs its own. It
# also tries a 1-D tensor, rows of length 1, float64 scores, scores that are not contiguous, and
# scores around +800 and −800, where `exp()` overflows or underflows even in float64 (beyond
# about +709 and −745): computing in float64 is no way round the shift.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="2c9f538bba"
# PyTorch 的 softmax 没有这个问题，因为它利用了第一条性质：先让每一行减去该行的最大值，再取指数。这样最大的指数项是 $e^0 = 1$，不会上溢；分母至少为 1，也不会除以零（分数非常负时同样适用，否则它们的指数会全部下溢为 0）。
#
# ### 练习 2：数值稳定的 softmax
#
# 写出 `my_softmax(scores)`：对任意形状 $(\dots, L)$ 的张量沿最后一维做 softmax，分数很大时也不出问题。只用基本运算来写：检查不接受任何现成的 softmax，包括 torch 的 `torch.softmax`、`F.softmax`、`Tensor.softmax` 和 `torch.special.softmax`，它们的对数版本 `torch.log_softmax`、`F.log_softmax`、`Tensor.log_softmax` 和 `torch.special.log_softmax`，以及课程自带的 `masks.masked_softmax`（不传掩码时，它算的就是同一个 softmax）。先减去每一行的最大值（`amax(dim=-1, keepdim=True)`），再取指数，最后除以每一行的和。不加 `keepdim=True` 的话，每行的最大值会丢掉最后一维，于是沿错误的维度广播。检查用例里有 +500 和 −500 左右的分数，还有一个张量，它的各行分别在 +500、−300 和 0 附近，所以整个张量只减一个数是不够的，每一行都要减去自己的最大值。检查还会测试一维张量、长度为 1 的行、float64 分数、不连续的分数，以及 +800 和 −800 左右的分数：即便在 float64 中，`exp()` 也会在指数超过约 +709 时上溢、低于约 −745 时下溢，所以换成 float64 计算也绕不开减去最大值这一步。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="01.softmax"
def my_softmax(scores):
    # lang: en
    """Softmax over the last axis of `scores`, without overflow for large scores.

    scores: a float tensor (float32 or float64) of any shape (..., L).
    Returns a tensor of the same shape and dtype whose rows (along the last axis) are positive
    and sum to 1. Built from elementary operations: torch's softmax and log_softmax are not allowed.
    """
    # lang: zh
    """沿 `scores` 的最后一维做 softmax，分数很大时也不上溢。

    scores：任意形状 (..., L) 的浮点张量（float32 或 float64）。
    返回形状和 dtype 都与输入相同的张量，其中每一行（沿最后一维）都为正，且和为 1。
    只用基本运算实现：不能调用 torch 的 softmax 和 log_softmax。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    shifted = scores - scores.amax(dim=-1, keepdim=True)  # each row's largest score becomes 0
    exponentials = shifted.exp()  # in (0, 1]: nothing overflows
    return exponentials / exponentials.sum(dim=-1, keepdim=True)  # each row sums to 1
    # lang: zh
    shifted = scores - scores.amax(dim=-1, keepdim=True)  # 每一行的最大分数变成 0
    exponentials = shifted.exp()  # 落在 (0, 1] 内：不会上溢
    return exponentials / exponentials.sum(dim=-1, keepdim=True)  # 每一行之和为 1
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
check("01.softmax", my_softmax)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. Why divide by √d_k?
#
# Suppose the entries of $q$ and $k$ are independent, with mean 0 and variance 1 (roughly what
# initialisation and normalisation layers give). Then $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a
# sum of $d_k$ independent terms, each with mean 0 and variance 1, so
#
# $$\mathrm{Var}(q \cdot k) = d_k, \qquad \mathrm{Var}\Big(\frac{q \cdot k}{\sqrt{d_k}}\Big) = 1 .$$
#
# A typical score grows like $\sqrt{d_k}$. By section 3, large scores act like a low
# temperature: the softmax **saturates**, nearly all the weight lands on one key, and the
# gradient that training needs to move the scores vanishes. Dividing by $\sqrt{d_k}$ is a
# temperature $T = \sqrt{d_k}$, chosen to cancel exactly this growth.
#
# Let us measure it rather than believe it. For $d_k$ from 1 to 512 we draw random queries and
# keys and record the variance of the scores, the largest softmax weight over 16 keys, and the
# size of the softmax's gradient. That gradient, the Jacobian of $\alpha = \mathrm{softmax}(s)$
# with respect to $s$, is $J = \mathrm{diag}(\alpha) - \alpha\alpha^\top$; it is zero when
# $\alpha$ is one-hot.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="38355919a5"
# ## 4. 为什么要除以 √d_k？
#
# 假设 $q$ 和 $k$ 的各个分量相互独立，均值为 0、方差为 1（参数初始化和归一化层给出的大致就是这种情形）。那么 $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ 是 $d_k$ 个独立项之和，每一项的均值为 0、方差为 1，所以
#
# $$\mathrm{Var}(q \cdot k) = d_k, \qquad \mathrm{Var}\Big(\frac{q \cdot k}{\sqrt{d_k}}\Big) = 1 .$$
#
# 分数的典型大小按 $\sqrt{d_k}$ 增长。由第 3 节可知，分数很大就相当于温度很低：softmax 会**饱和**，几乎所有权重都落在一个键上，训练时用来调整分数的梯度也随之消失。除以 $\sqrt{d_k}$，相当于取温度 $T = \sqrt{d_k}$，恰好抵消这种增长。
#
# 与其相信推导，不如动手测一测。对 1 到 512 之间的各个 $d_k$，我们随机生成查询和键，记录分数的方差、16 个键上 softmax 的最大权重，以及 softmax 梯度的大小。这个梯度就是 $\alpha = \mathrm{softmax}(s)$ 对 $s$ 的雅可比矩阵 $J = \mathrm{diag}(\alpha) - \alpha\alpha^\top$；$\alpha$ 为 one-hot 向量时，它等于零。

# %%
D_K = [2**power for power in range(10)]  # 1, 2, 4, ..., 512
PAIRS, QUERIES, KEYS = 20_000, 1_000, 16
g = torch.Generator().manual_seed(1)


def jacobian_norm(alpha):
    # lang: en
    """Mean Frobenius norm of the softmax Jacobian diag(α) - ααᵀ over the rows of alpha, (N, L)."""
    # lang: zh
    """softmax 的雅可比矩阵 diag(α) - ααᵀ 的 Frobenius 范数，对 alpha (N, L) 的各行取平均。"""
    # lang: end
    jacobian = torch.diag_embed(alpha) - alpha.unsqueeze(-1) * alpha.unsqueeze(-2)  # (N, L, L)
    return jacobian.norm(dim=(-2, -1)).mean().item()


# lang: en
# float64 keeps the printed digits the same on every machine
# lang: zh
# 用 float64，打印出的数字在每台机器上都一样
# lang: end
rows = []
for d_k in D_K:
    # lang: en
    q, k = torch.randn(2, PAIRS, d_k, generator=g, dtype=torch.float64)  # PAIRS (q, k) pairs
    # lang: zh
    q, k = torch.randn(2, PAIRS, d_k, generator=g, dtype=torch.float64)  # PAIRS 个 (q, k) 对
    # lang: end
    dots = (q * k).sum(dim=-1)  # (PAIRS,)
    queries = torch.randn(QUERIES, 1, d_k, generator=g, dtype=torch.float64)
    # lang: en
    keys = torch.randn(QUERIES, KEYS, d_k, generator=g, dtype=torch.float64)  # 16 keys per query
    # lang: zh
    keys = torch.randn(QUERIES, KEYS, d_k, generator=g, dtype=torch.float64)  # 每个查询 16 个键
    # lang: end
    raw = (queries @ keys.transpose(-2, -1)).squeeze(-2)  # (QUERIES, KEYS)
    alpha_raw = torch.softmax(raw, dim=-1)
    alpha_scaled = torch.softmax(raw / math.sqrt(d_k), dim=-1)
    rows.append(
        {
            "d_k": d_k,
            "var": dots.var().item(),
            "var_scaled": (dots / math.sqrt(d_k)).var().item(),
            "max_raw": alpha_raw.amax(dim=-1).mean().item(),
            "max_scaled": alpha_scaled.amax(dim=-1).mean().item(),
            "grad_raw": jacobian_norm(alpha_raw),
            "grad_scaled": jacobian_norm(alpha_scaled),
        }
    )

print(f"{'d_k':>4} {'Var(q·k)':>9} {'Var(q·k/√d_k)':>14} {'max α':>6} {'max α/√':>8} {'‖J‖':>5} {'‖J‖/√':>6}")
for r in rows:
    print(
        f"{r['d_k']:>4} {r['var']:>9.1f} {r['var_scaled']:>14.2f} {r['max_raw']:>6.2f} "
        f"{r['max_scaled']:>8.2f} {r['grad_raw']:>5.2f} {r['grad_scaled']:>6.2f}"
    )

# %% [markdown] tags=["lang-en"]
# The columns marked "/√" divide the scores by $\sqrt{d_k}$ before the softmax. Three facts
# to take away, each checked below: unscaled, the variance grows linearly with $d_k$ (its ratio
# to $d_k$ stays near 1); scaled, it stays near 1; and without scaling the largest weight climbs
# towards 1 while the gradient shrinks (from $d_k = 8$ on), down to less than a third of the
# scaled one at $d_k = 512$. Scaled, neither moves much: whatever $d_k$, the largest weight
# stays between 0.15 and 0.3 and the gradient between 0.25 and 0.35.

# %% [markdown] tags=["lang-zh"] en_hash="b1d2e0939f"
# 标有“/√”的列在 softmax 之前先把分数除以了 $\sqrt{d_k}$。要记住三个事实（下面逐一验证）：不缩放时，方差随 $d_k$ 线性增长（与 $d_k$ 之比始终接近 1）；缩放后，方差始终接近 1；不缩放时，最大权重逐渐逼近 1，梯度则（从 $d_k = 8$ 起）越来越小，到 $d_k = 512$ 时不到缩放后的三分之一。缩放后，两者都变化不大：无论 $d_k$ 多大，最大权重始终在 0.15 与 0.3 之间，梯度始终在 0.25 与 0.35 之间。

# %%
# lang: en
column = {name: [r[name] for r in rows] for name in rows[0]}  # one list per column of the table
from_8 = column["grad_raw"][D_K.index(8):]  # the unscaled ‖J‖ from d_k = 8 to 512
# lang: zh
column = {name: [r[name] for r in rows] for name in rows[0]}  # 表中每一列对应一个列表
from_8 = column["grad_raw"][D_K.index(8):]  # 不缩放时从 d_k = 8 到 512 的 ‖J‖
# lang: end
var_is_d_k = all(0.9 < r["var"] / r["d_k"] < 1.1 for r in rows)
var_scaled_is_1 = all(0.9 < v < 1.1 for v in column["var_scaled"])
max_raw_grows = all(a < b for a, b in zip(column["max_raw"], column["max_raw"][1:]))
grad_raw_shrinks = all(a > b for a, b in zip(from_8, from_8[1:]))
scaled_stays = all(0.15 < m < 0.3 for m in column["max_scaled"]) and all(
    0.25 < j < 0.35 for j in column["grad_scaled"]
)
# lang: en
claim("unscaled: Var(q·k) / d_k lies between 0.9 and 1.1 for every d_k", var_is_d_k)
claim("scaled: Var(q·k / √d_k) lies between 0.9 and 1.1 for every d_k", var_scaled_is_1)
claim("unscaled: the largest weight grows with every doubling of d_k", max_raw_grows)
claim("unscaled: at d_k = 512 the largest weight is above 0.9", rows[-1]["max_raw"] > 0.9)
claim("unscaled: ‖J‖ shrinks with every doubling of d_k from 8 to 512", grad_raw_shrinks)
claim("at d_k = 512 the unscaled ‖J‖ is less than a third of the scaled one",
      rows[-1]["grad_raw"] < rows[-1]["grad_scaled"] / 3)
claim("scaled: for every d_k the largest weight lies between 0.15 and 0.3, ‖J‖ between 0.25 and 0.35",
      scaled_stays)
# lang: zh
claim("不缩放：对每个 d_k，Var(q·k) / d_k 都在 0.9 与 1.1 之间", var_is_d_k)
claim("缩放后：对每个 d_k，Var(q·k / √d_k) 都在 0.9 与 1.1 之间", var_scaled_is_1)
claim("不缩放：d_k 每翻一倍，最大权重都变大", max_raw_grows)
claim("不缩放：d_k = 512 时最大权重超过 0.9", rows[-1]["max_raw"] > 0.9)
claim("不缩放：从 d_k = 8 到 512，d_k 每翻一倍，‖J‖ 都变小", grad_raw_shrinks)
claim("d_k = 512 时，不缩放的 ‖J‖ 不到缩放后的三分之一",
      rows[-1]["grad_raw"] < rows[-1]["grad_scaled"] / 3)
claim("缩放后：对每个 d_k，最大权重都在 0.15 与 0.3 之间，‖J‖ 都在 0.25 与 0.35 之间",
      scaled_stays)
# lang: end

# %%
d_ks = [r["d_k"] for r in rows]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), layout="constrained")
panels = [("var", "var_scaled", "l01.variance_title"), ("max_raw", "max_scaled", "l01.max_weight_title"),
          ("grad_raw", "grad_scaled", "l01.gradient_title")]
for ax, (raw_key, scaled_key, title) in zip(axes, panels):
    ax.plot(d_ks, [r[raw_key] for r in rows], "o-", label="q·k")
    ax.plot(d_ks, [r[scaled_key] for r in rows], "s-", label="q·k / √d_k")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d_k")
    ax.set_title(message(title, keys=KEYS), fontsize=10)
axes[0].set_yscale("log", base=2)
axes[0].plot(d_ks, d_ks, "k:", lw=1, label="d_k")
axes[1].axhline(1 / KEYS, color="gray", ls=":", lw=1, label=message("l01.uniform", keys=KEYS))
axes[1].set_ylim(0, 1)
axes[2].set_ylim(0, None)
for ax in axes:
    ax.legend()
plt.show()

# %% [markdown] tags=["lang-en"]
# ### Explore
#
# Move the slider through $d_k$ and tick or untick "divide by √d_k". On the left: the scores of
# 4096 random (query, key) pairs beside the standard normal curve. On the right: one query's
# softmax weights over 16 keys. Unscaled, the scores spread out as $d_k$ grows and the weights
# collapse onto one key; scaled, the picture hardly changes with $d_k$. The text below the plot
# gives the standard deviation of the scores and the largest weight.

# %% [markdown] tags=["lang-zh"] en_hash="0f45ea1f03"
# ### 动手探索
#
# 拖动滑块改变 $d_k$，并勾选或取消“除以 √d_k”。左图是 4096 个随机（查询，键）对的分数，旁边画着标准正态分布曲线作对照；右图是一个查询在 16 个键上的 softmax 权重。不缩放时，随着 $d_k$ 增大，分数越来越分散，权重坍缩到一个键上；缩放后，图像几乎不随 $d_k$ 变化。图下方的文字给出分数的标准差和最大权重。

# %% tags=["nbval-ignore-output"]
scaling_explorer(d_k=64, scaled=False)

# %% [markdown] tags=["lang-en"]
# The explorer draws its picture with `scaling_view`, an ordinary function; here it is for
# $d_k = 512$, without and with the division:

# %% [markdown] tags=["lang-zh"] en_hash="d22b8691b8"
# 探索器用普通函数 `scaling_view` 作图；下面是 $d_k = 512$ 时不缩放和缩放两种情况：

# %%
for scaled in (False, True):
    _, summary = scaling_view(d_k=512, scaled=scaled)
    print(summary)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 5. Scaled dot-product attention from scratch
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big)\, V$$
#
# ![Scaled dot-product attention, step by step](../../images/01_sdpa_en.svg)
#
# Three steps, with the shapes, batch first (the optional mask step in the diagram is the
# subject of lesson 02):
#
# 1. **scores** $QK^\top / \sqrt{d_k}$: $(B, L_q, d_k)$ @ $(B, d_k, L_k)$ → $(B, L_q, L_k)$.
#    Transpose only the keys' last two axes, `key.transpose(-2, -1)` or `key.mT`: `key.T`
#    reverses every axis, the batch axis included (and is deprecated for more than two axes).
# 2. **weights**: the softmax over the last axis, the keys, so that each query's weights sum to 1.
# 3. **output**: weights @ $V$: $(B, L_q, L_k)$ @ $(B, L_k, d_v)$ → $(B, L_q, d_v)$.
#
# Return `(output, weights)`, in that order, as every attention function in this course does.
# A widely copied PyTorch tutorial returns them the other way round, and the layer built on it
# silently passes the weights on as if they were the output.
#
# ### Exercise 3: scaled dot-product attention
#
# Write `my_attention(query, key, value)`. You may use `torch.softmax` (or your `my_softmax`),
# but the check refuses `F.scaled_dot_product_attention` and the course's own
# `attention.scaled_dot_product_attention`: the point is to write it.
# The check tries $L_q \ne L_k$, $d_k \ne d_v$, sequences of length 1, a batch of one,
# $d_k = 64$, float64 inputs, and a key and value that are not contiguous in memory.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="370295e417"
# ## 5. 从零实现缩放点积注意力
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\Big(\frac{QK^\top}{\sqrt{d_k}}\Big)\, V$$
#
# ![缩放点积注意力的计算步骤](../../images/01_sdpa_zh.svg)
#
# 分三步完成，批量维度在最前（图中可选的掩码一步是第 02 课的主题）：
#
# 1. **分数** $QK^\top / \sqrt{d_k}$：$(B, L_q, d_k)$ @ $(B, d_k, L_k)$ → $(B, L_q, L_k)$。
#    只转置键的最后两个维度，即 `key.transpose(-2, -1)` 或 `key.mT`；`key.T` 会把所有维度（包括批量维度）整个反转，而且在超过两维时已被弃用。
# 2. **权重**：沿最后一维（键）做 softmax，使每个查询的权重之和为 1。
# 3. **输出**：权重 @ $V$：$(B, L_q, L_k)$ @ $(B, L_k, d_v)$ → $(B, L_q, d_v)$。
#
# 按 `(output, weights)` 的顺序返回，本课程中所有注意力函数都是如此。一篇流传很广的 PyTorch 教程把两者的顺序写反了，建立在它之上的层于是悄无声息地把权重当作输出传了下去。
#
# ### 练习 3：缩放点积注意力
#
# 写出 `my_attention(query, key, value)`。可以使用 `torch.softmax`（或者你自己写的 `my_softmax`），但检查不接受 `F.scaled_dot_product_attention` 和课程自带的 `attention.scaled_dot_product_attention`：这道练习就是要你亲手写出它。检查会测试 $L_q \ne L_k$、$d_k \ne d_v$、长度为 1 的序列、只有一个样本的批量、$d_k = 64$、float64 输入，以及在内存中不连续的键和值等情形。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="01.scaled_dot"
def my_attention(query, key, value):
    # lang: en
    """Scaled dot-product attention, softmax(Q Kᵀ / √d_k) V, written by you.

    query: (B, L_q, d_k), key: (B, L_k, d_k), value: (B, L_k, d_v); float tensors, all of one
    dtype (float32 or float64).
    Returns (output, weights): output (B, L_q, d_v) and weights (B, L_q, L_k), both of that
    same dtype; each row of weights sums to 1. Do not call F.scaled_dot_product_attention or
    course_utils.attention.scaled_dot_product_attention.
    """
    # lang: zh
    """缩放点积注意力 softmax(Q Kᵀ / √d_k) V，由你亲手实现。

    query: (B, L_q, d_k)，key: (B, L_k, d_k)，value: (B, L_k, d_v)；都是浮点张量，dtype 全部相同
    （float32 或 float64）。
    返回 (output, weights)：output 形状为 (B, L_q, d_v)，weights 形状为 (B, L_q, L_k)，dtype 都与
    输入相同；weights 的每一行之和为 1。不要调用 F.scaled_dot_product_attention 或
    course_utils.attention.scaled_dot_product_attention。
    """
    # lang: end
    ### BEGIN SOLUTION
    scale = 1.0 / math.sqrt(query.shape[-1])  # 1 / √d_k
    attention_scores = query @ key.transpose(-2, -1) * scale  # (B, L_q, L_k)
    # lang: en
    attention_weights = attention_scores.softmax(dim=-1)  # each query's row sums to 1
    # lang: zh
    attention_weights = attention_scores.softmax(dim=-1)  # 每个查询的那一行之和为 1
    # lang: end
    return attention_weights @ value, attention_weights  # (B, L_q, d_v), (B, L_q, L_k)
    ### END SOLUTION


# %%
from course_utils import check
check("01.scaled_dot", my_attention)

# %% [markdown] tags=["lang-en"]
# ### Checked against PyTorch
#
# `torch.nn.functional.scaled_dot_product_attention` computes the same thing in one fused call
# and returns only the output. The package's `scaled_dot_product_attention`, the reference your
# function was just checked against, agrees with it to within $10^{-5}$ on every shape below,
# including a heads axis, $(B, H, L, d)$:

# %% [markdown] tags=["lang-zh"] en_hash="9b2958bbe5"
# ### 与 PyTorch 对照
#
# `torch.nn.functional.scaled_dot_product_attention` 用一次融合调用完成同样的计算，只返回输出。工具包里的 `scaled_dot_product_attention` 就是刚才检查你的函数时所用的参考实现，它在下面每一种形状上都与 PyTorch 一致，误差不超过 $10^{-5}$，包括带注意力头维度的 $(B, H, L, d)$：

# %%
g = torch.Generator().manual_seed(3)
# lang: en
# each shape: (leading axes, L_q, L_k, d_k, d_v)
# lang: zh
# 每种形状依次给出：前导维度、L_q、L_k、d_k、d_v
# lang: end
shapes = [
    ((2,), 5, 7, 16, 6),
    ((1,), 1, 1, 8, 3),
    ((3,), 4, 4, 64, 64),
    ((2, 4), 6, 9, 32, 32),
]
for lead, l_q, l_k, dim_k, dim_v in shapes:
    Q = torch.randn(*lead, l_q, dim_k, generator=g)
    K = torch.randn(*lead, l_k, dim_k, generator=g)
    V = torch.randn(*lead, l_k, dim_v, generator=g)
    ours, _ = scaled_dot_product_attention(Q, K, V)
    theirs = F.scaled_dot_product_attention(Q, K, V)
    same = torch.allclose(ours, theirs, atol=1e-5)
    # lang: en
    claim(f"Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}: the same output as PyTorch's", same)
    # lang: zh
    claim(f"Q {tuple(Q.shape)}，K {tuple(K.shape)}，V {tuple(V.shape)}：输出与 PyTorch 的相同", same)
    # lang: end

# %% [markdown] tags=["lang-en"]
# ### A picture
#
# Six keys, and six queries that are noisy copies of those keys in a shuffled order; the values
# are one-hot, value $j$ being the $j$-th unit vector. Each query should find its own key: the
# weights show the shuffle as one bright cell per row (more than half the row's weight), and
# with one-hot values the output equals the weights.

# %% [markdown] tags=["lang-zh"] en_hash="b2a7d2711c"
# ### 画成图
#
# 六个键，外加六个查询：每个查询都是某个键加上噪声后的副本，顺序被打乱；值都是 one-hot 向量，第 $j$ 个值就是第 $j$ 个单位向量。每个查询都应当找到属于自己的那个键：权重矩阵每一行都有一个亮格（超过一半的权重），正好显示出打乱后的顺序；而由于值是 one-hot 的，输出恰好等于权重。

# %%
g = torch.Generator().manual_seed(4)
L, d_k = 6, 32
K = torch.randn(1, L, d_k, generator=g)
shuffle = torch.tensor([3, 0, 5, 1, 4, 2])
# lang: en
Q = K[:, shuffle] + 0.5 * torch.randn(1, L, d_k, generator=g)  # query i is a noisy copy of key shuffle[i]
V = torch.eye(L).unsqueeze(0)  # value j = unit vector e_j
# lang: zh
Q = K[:, shuffle] + 0.5 * torch.randn(1, L, d_k, generator=g)  # 查询 i 是键 shuffle[i] 加噪声后的副本
V = torch.eye(L).unsqueeze(0)  # 值 j = 单位向量 e_j
# lang: end

output, weights = scaled_dot_product_attention(Q, K, V)
# lang: en
own = weights[0, torch.arange(L), shuffle]  # (L,): each query's weight on its own key
# lang: zh
own = weights[0, torch.arange(L), shuffle]  # (L,)：每个查询给自己那个键的权重
# lang: end
# lang: en
claim("each query gives its own key the largest weight", torch.equal(weights[0].argmax(dim=-1), shuffle))
claim("each query gives its own key more than half its weight", (own > 0.5).all())
claim("with one-hot values the output equals the weights", torch.allclose(output, weights))
# lang: zh
claim("每个查询都把最大的权重给了属于自己的键", torch.equal(weights[0].argmax(dim=-1), shuffle))
claim("每个查询给自己那个键的权重都超过一半", (own > 0.5).all())
claim("值是 one-hot 向量时，输出等于权重", torch.allclose(output, weights))
# lang: end
heatmap(weights[0], vmax=1.0)
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - Attention is a soft lookup: score the query against every key, softmax the scores into
#   attention weights, average the values with them. It returns `(output, weights)`.
# - Four score functions: additive (an MLP on $[q; k]$, computed without the concatenation),
#   bilinear, dot and scaled dot. The last two learn nothing and cost one matrix product.
# - Softmax ignores a constant shift (subtract the maximum, and large scores cannot overflow) and
#   sharpens as the scores grow: dividing by a temperature controls it.
# - Unscaled dot products have variance $d_k$. Dividing by $\sqrt{d_k}$ keeps it at 1, so the
#   softmax does not saturate and its gradient survives.
#
# Next, lesson 02: masks, to ignore padding and to stop a query from looking ahead.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="f1a5760bd2"
# ## 小结
#
# - 注意力是一次“软”查找：拿查询与每个键打分，用 softmax 把分数变成注意力权重，再用这些权重对值求平均。它返回 `(output, weights)`。
# - 四种评分函数：加性（对 $[q; k]$ 的 MLP，计算时无需真正拼接）、双线性、点积和缩放点积。后两种没有要学习的参数，只需一次矩阵乘法。
# - softmax 不受整体平移的影响（先减去最大值，大分数就不会上溢）；分数越大，分布越尖锐，用温度可以调节这一点。
# - 未缩放的点积方差为 $d_k$。除以 $\sqrt{d_k}$ 让方差保持为 1，softmax 就不会饱和，梯度也得以保留。
#
# 下一课（第 02 课）讲掩码：用它忽略填充位置，并阻止查询“偷看”后面的内容。

