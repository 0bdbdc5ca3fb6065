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
# # Attention at inference time
#
# Lessons 01 to 06 built attention as the 2017 Transformer uses it: every position of a sequence at
# once. A language model that writes text does something else: it writes one token, reads it back,
# writes the next. The attention in the models people run today (Llama, Mistral, Falcon, …) is
# shaped by that. This lesson builds four ideas from it: two make generation fast and small (the
# cache and shared key/value heads), one puts positions inside attention itself, so that a score
# depends only on how far apart its two tokens are (rotary positions), and one bounds the cache
# (sliding windows). Each is checked against PyTorch's own or against plain recomputation.
#
# In this lesson you will
#
# 1. decode one token at a time with a **KV cache**: see why the keys and values of past tokens
#    never change in a causal decoder, keep them, and prove that cached decoding writes the same
#    tokens (and, in float64, the same logits) as recomputing everything, on lesson 06's trained
#    model too; then count the arithmetic of the next token, O(T) instead of O(T²), and see why a
#    decode step waits on memory rather than on arithmetic;
# 2. share key/value heads between query heads: **multi-query** and **grouped-query attention**,
#    checked against PyTorch's `F.scaled_dot_product_attention` with `enable_gqa=True`, with the classic
#    `repeat` mistake, and the cache of real published models;
# 3. put positions into the attention itself with the **rotary position embedding** (RoPE),
#    lesson 06's rotation applied to queries and keys, in its two layouts, and with a cache;
# 4. bound the cache with **sliding-window attention** and a rolling buffer.
#
# There are three exercises, each followed by a check cell.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="e86d2a148a"
# # 推理时的注意力
#
# 第 01 到 06 课搭建的注意力，用的是 2017 年 Transformer 的方式：一次处理序列的所有位置。而写文字的语言模型做的是另一件事：写出一个词元，把它读回来，再写下一个。今天人们实际运行的模型（Llama、Mistral、Falcon……）里的注意力，正是围绕这个过程设计的。本课由此引出四个想法：两个让生成又快又省内存（缓存和共用的键/值头）；一个把位置直接放进注意力内部，让分数只取决于两个词元相隔多远（旋转位置嵌入）；还有一个给缓存设上限（滑动窗口）。每个想法都与 PyTorch 自己的实现或直接重新计算的结果相对照。
#
# 本课你将：
#
# 1. 用 **KV 缓存**一次解码一个词元。先弄清在因果解码器里过去词元的键和值为什么永远不变，再把它们存下来，并证明带缓存的解码与全部重新计算写出的词元完全相同（在 float64 下，连 logits 也相同），在第 06 课训练好的模型上同样如此。然后数一数生成下一个词元的运算量：O(T)，而不是 O(T²)；并弄清解码步的瓶颈为什么在访存而不在计算；
# 2. 让多个查询头共用键/值头：**多查询注意力**和**分组查询注意力**，与 PyTorch 的 `F.scaled_dot_product_attention` 在 `enable_gqa=True` 时的结果相对照，看看经典的 `repeat` 错误、复制键/值头的代价，以及真实发布的模型的缓存有多大；
# 3. 用**旋转位置嵌入**（RoPE）把位置直接放进注意力：把第 06 课的旋转作用在查询和键上，了解它的两种布局，以及它与缓存如何配合；
# 4. 用**滑动窗口注意力**和滚动缓冲区给缓存设一个上限。
#
# 本课共有三道练习，每道练习后面都跟着一个检查单元。

# %%
import copy
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right
from torch.utils.flop_counter import FlopCounterMode

from course_utils import check, claim, decoding, measured, seq2seq, setup
from course_utils.decoding import KVCache, apply_rope, gqa_attention, rope_permutation, window_keep_mask
from course_utils.i18n import message
from course_utils.tiled import peak_bytes
from course_utils.viz import format_bytes, mask_picture
from course_utils.viz.decoding import cache_bytes_bars, cache_growth, step_costs
from course_utils.widgets.decoding import cache_explorer

setup(lang="en")
# lang: en
torch.set_printoptions(precision=3, sci_mode=False)  # three decimals are plenty to compare
# lang: zh
torch.set_printoptions(precision=3, sci_mode=False)  # 比较数值，三位小数就够了
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 1. One token at a time: the KV cache
#
# A decoder-only language model reads a prompt and then generates: it predicts the next token from
# the last position's logits, appends that token, and predicts again. Done naively, each new token
# runs the whole sequence through the model again. But look at what a causal decoder computes.
# Position $t$ attends to positions $0 \dots t$ only (lesson 02's causal mask), so its hidden state
# in every layer depends on tokens $0 \dots t$ and nothing after them. Its key and value, projections
# of that hidden state, depend on nothing after $t$ either: **once computed, they never change**.
# Only the new token needs its query, key and value computed.
#
# So generation keeps them in a **KV cache**, one per attention layer, laid out like the keys and
# values themselves: $(B, H_{kv}, T, d)$ ($H_{kv}$ key/value heads, section 2 explains why that can
# be fewer than the query heads). It runs in two phases:
#
# - **prefill**: the whole prompt goes through the model at once, as in training, and every layer
#   stores its keys and values; the last position's logits give the first new token;
# - **decode**: one token per step. Its query, key and value are computed, its key and value are
#   appended to the cache ($T \to T + 1$), and its query attends over all $T + 1$ of them.
#
# The model here, `decoding.TinyDecoder`, is a small decoder-only model with the ingredients of
# this lesson (grouped-query attention, rotary positions, an optional window), with random weights:
# what matters now is *that* the cache computes what recomputation computes, not what the model
# says. First, the fact the cache rests on: the logits of the first 5 positions do not change when
# more tokens follow.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="870af0b005"
# ## 1. 一次一个词元：KV 缓存
#
# 仅解码器（decoder-only）的语言模型先读入提示（prompt），然后开始生成：用最后一个位置的 logits 预测下一个词元，把这个词元接到序列末尾，再预测下一个。照直去做的话，每生成一个新词元，都要把整个序列重新送进模型算一遍。但看看因果解码器算的是什么：位置 $t$ 只关注位置 $0 \dots t$（第 02 课的因果掩码），所以位置 $t$ 在每一层的隐藏状态只取决于词元 $0 \dots t$，与之后的词元无关。键和值是隐藏状态的投影，同样与 $t$ 之后的一切无关：**一旦算出来，就再也不会变**。需要新算查询、键和值的，只有新来的那个词元。
#
# 所以生成时把它们存进 **KV 缓存**：每个注意力层一个，布局与键和值本身相同，为 $(B, H_{kv}, T, d)$（$H_{kv}$ 是键/值头的个数，第 2 节会讲为什么它可以比查询头少）。生成分两个阶段：
#
# - **预填充**（prefill）：整个提示一次性通过模型，与训练时一样，每一层把它的键和值存起来；最后一个位置的 logits 给出第一个新词元；
# - **解码**：每步一个词元。算出它的查询、键和值，把键和值追加到缓存里（$T \to T + 1$），再让它的查询在全部 $T + 1$ 个键值上做注意力。
#
# 这里用的模型 `decoding.TinyDecoder` 是一个仅解码器的小模型，包含本课的各个要素（分组查询注意力、旋转位置嵌入、可选的窗口），权重是随机的：现在要紧的是缓存算出的**正是**重新计算得到的结果，而不是模型说了什么。先看缓存所依赖的事实：后面再接上更多词元，前 5 个位置的 logits 也不会变。

# %%
# lang: en
model = decoding.make_tiny_decoder(seed=0, dtype=torch.float64)  # 2 layers, 4 query heads, 2 key/value heads
prompt = torch.tensor([[5, 17, 3, 42, 8, 29, 11, 60]])  # (B, P) = (1, 8) token ids
# lang: zh
model = decoding.make_tiny_decoder(seed=0, dtype=torch.float64)  # 2 层，4 个查询头，2 个键/值头
prompt = torch.tensor([[5, 17, 3, 42, 8, 29, 11, 60]])  # (B, P) = (1, 8)：词元 id
# lang: end
with torch.no_grad():
    all_eight = model(prompt)  # (1, 8, V)
    first_five = model(prompt[:, :5])  # (1, 5, V)
# lang: en
claim("the first 5 positions get the same logits whether 3 more tokens follow or not",
      torch.allclose(all_eight[:, :5], first_five, rtol=0, atol=1e-12))
# lang: zh
claim("无论后面是否还跟着 3 个词元，前 5 个位置得到的 logits 都相同",
      torch.allclose(all_eight[:, :5], first_five, rtol=0, atol=1e-12))
# lang: end

# %% [markdown] tags=["lang-en"]
# `decoding.KVCache` is the cache of one layer: `update(key, value)` appends the new tokens' keys
# and values on axis 2 and returns everything the new queries may attend to. `TinyDecoder` takes one
# cache per layer and the absolute position of its first token (`start`). Fill the caches twice:
# once with all 8 prompt tokens in one call (prefill), once token by token (8 decode steps):

# %% [markdown] tags=["lang-zh"] en_hash="d7bdc77a19"
# `decoding.KVCache` 是一层的缓存：`update(key, value)` 把新词元的键和值沿第 2 维追加进去，并返回新查询可以关注的全部键值。`TinyDecoder` 接收每层一个缓存，以及第一个词元的绝对位置（`start`）。把缓存填两遍：一遍用一次调用放进全部 8 个提示词元（预填充），一遍逐个词元放进去（8 个解码步）：

# %%
at_once = [KVCache() for _ in model.blocks]
one_by_one = [KVCache() for _ in model.blocks]
with torch.no_grad():
    # lang: en
    model(prompt, 0, at_once)  # prefill
    # lang: zh
    model(prompt, 0, at_once)  # 预填充
    # lang: end
    for t in range(8):
        # lang: en
        model(prompt[:, t:t + 1], t, one_by_one)  # decode: token t, at position t
        # lang: zh
        model(prompt[:, t:t + 1], t, one_by_one)  # 解码：词元 t，位于位置 t
        # lang: end
shape = tuple(at_once[0].keys.shape)
# lang: en
claim(f"each layer's cache holds keys and values of shape (B, H_kv, T, d) = {shape}",
      all(tuple(c.keys.shape) == tuple(c.values.shape) == (1, 2, 8, 16) for c in at_once + one_by_one))
claim("filled one token at a time, the caches hold the same keys and values as filled at once",
      all(torch.allclose(a.keys, b.keys, rtol=0, atol=1e-12) and torch.allclose(a.values, b.values, rtol=0, atol=1e-12)
          for a, b in zip(at_once, one_by_one)))
# lang: zh
claim(f"每一层的缓存里，键和值的形状都是 (B, H_kv, T, d) = {shape}",
      all(tuple(c.keys.shape) == tuple(c.values.shape) == (1, 2, 8, 16) for c in at_once + one_by_one))
claim("逐个词元填进去的缓存，与一次填进去的缓存存着相同的键和值",
      all(torch.allclose(a.keys, b.keys, rtol=0, atol=1e-12) and torch.allclose(a.values, b.values, rtol=0, atol=1e-12)
          for a, b in zip(at_once, one_by_one)))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# One decode step, drawn: the new token's query, key and value are computed (four query heads, two
# key/value heads here), rotated at its position (section 3), its key and value are appended to the
# caches, and its query attends over every cached position. Nothing before position $T$ is computed
# again.
#
# ![One decode step with a KV cache: the new token's query, key and value; RoPE at its position on the query and the key, not the value; its key and value appended to the caches, and its 4 query heads attending over 2 key/value heads](../../images/07_kv_cache_en.svg)
#
# `TinyDecoder.generate(prompt, n, cache=True)` does greedy decoding this way; with `cache=False`
# it reruns the whole sequence at every step. The two must choose the same tokens, and, in float64,
# compute the same logits up to rounding:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="d23402a27f"
# 把一个解码步画出来：算出新词元的查询、键和值（这里有四个查询头、两个键/值头），按它的位置旋转（第 3 节），把键和值追加进缓存，再让它的查询在所有缓存的位置上做注意力。位置 $T$ 之前的一切都不再重算。
#
# ![带 KV 缓存的一个解码步：新词元的查询、键和值；按其位置对查询和键做 RoPE，值不旋转；把它的键和值追加进缓存，4 个查询头在 2 个键/值头上做注意力](../../images/07_kv_cache_zh.svg)
#
# `TinyDecoder.generate(prompt, n, cache=True)` 就这样做贪心解码；`cache=False` 时，它每一步都把整个序列重新算一遍。两者必须选出相同的词元，而且在 float64 下，算出的 logits 除了舍入误差之外也必须相同：

# %%
tokens, logits = model.generate(prompt, 40, cache=True)  # (1, 40), (1, 40, V)
again, recomputed = model.generate(prompt, 40, cache=False)
# lang: en
claim("with the cache, greedy decoding writes the same 40 tokens as recomputing", torch.equal(tokens, again))
claim("and every step's logits agree within 1e-12", torch.allclose(logits, recomputed, rtol=0, atol=1e-12))
# lang: zh
claim("使用缓存时，贪心解码写出的 40 个词元与重新计算的相同", torch.equal(tokens, again))
claim("每一步的 logits 相差都不超过 1e-12", torch.allclose(logits, recomputed, rtol=0, atol=1e-12))
# lang: end

# %% [markdown] tags=["lang-en"]
# A random model proves the bookkeeping; a trained one shows it on a model that does something.
# Lesson 06's encoder–decoder reverses sequences of letters; its decoder generates with
# `seq2seq.greedy_decode`, which reruns the decoder on the whole answer so far at every step.
# `decoding.CachedReverser` decodes it with a cache in each decoder layer: the self-attention's
# keys and values grow by one position per step, and the cross-attention's keys and values, computed
# from the encoder's output, are computed once, before the first step (the source never changes
# while the answer is written). Trained again here, with the same seed (a second or two):

# %% [markdown] tags=["lang-zh"] en_hash="24dc888244"
# 随机模型足以验证缓存逻辑无误；训练好的模型则让我们在一个真正会做事的模型上看到同样的结果。第 06 课的编码器–解码器会反转字母序列；它的解码器用 `seq2seq.greedy_decode` 生成，每一步都把到目前为止的整个答案重新送进解码器。`decoding.CachedReverser` 则在每个解码器层里用缓存来解码：自注意力的键和值每步增加一个位置；交叉注意力的键和值由编码器的输出算出，在第一步之前只算一次（写答案的过程中，源序列不会变）。这里用同一个种子重新训练一遍（一两秒钟）：

# %%
# lang: en
reverser = seq2seq.train(seed=0).model  # lesson 06's model
test = seq2seq.held_out()  # 500 held-out sources
# lang: zh
reverser = seq2seq.train(seed=0).model  # 第 06 课的模型
test = seq2seq.held_out()  # 500 条留出源序列
# lang: end
cached_answers, _ = decoding.CachedReverser(reverser).decode(test.source)
# lang: en
claim("on all 500 held-out sources, cached decoding writes exactly the tokens of seq2seq.greedy_decode",
      torch.equal(cached_answers, seq2seq.greedy_decode(reverser, test.source)))
# lang: zh
claim("在全部 500 条留出源序列上，带缓存的解码写出的词元与 seq2seq.greedy_decode 的完全相同",
      torch.equal(cached_answers, seq2seq.greedy_decode(reverser, test.source)))
# lang: end
# lang: en
reverser64 = copy.deepcopy(reverser).double()  # the same weights in float64
# lang: zh
reverser64 = copy.deepcopy(reverser).double()  # 同样的权重，换成 float64
# lang: end
source = test.source[:100]
answer = seq2seq.greedy_decode(reverser64, source)
answer_cached, logits_cached = decoding.CachedReverser(reverser64).decode(source)
# lang: en
claim("in float64, on the first 100 sources, it writes the same tokens and its logits at every step agree with "
      "recomputation's within 1e-12",
      torch.equal(answer_cached, answer)
      and torch.allclose(logits_cached, decoding.recomputed_logits(reverser64, source, answer), rtol=0, atol=1e-12))
# lang: zh
claim("换成 float64，在前 100 条源序列上，它写出的词元同样一致，每一步的 logits "
      "与重新计算的相差都不超过 1e-12",
      torch.equal(answer_cached, answer)
      and torch.allclose(logits_cached, decoding.recomputed_logits(reverser64, source, answer), rtol=0, atol=1e-12))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### What the cache saves
#
# How much work is the next token, when $T$ tokens came before it? Count it instead of guessing:
# PyTorch's `FlopCounterMode` counts the floating-point operations of every matrix product that
# runs (two per multiply-add; the softmax, the LayerNorms and the activation are not matrix products
# and are not counted). With the cache, a step projects one token and scores its queries against
# $T + 1$ keys: a fixed part plus a part that grows like $T$. Recomputing runs all $T + 1$ tokens
# through every layer again, and its attention scores each of them against all $T + 1$ keys (the
# causal mask hides the later keys' scores only after the matrix product has computed them):
# $T + 1$ times the cached step, which grows like $T^2$. That exact factor belongs to plain
# attention, which computes the masked triangle and throws it away; a kernel that skips the tiles
# the mask hides, as lesson 08 builds, does about half of that attention's products.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="baed2eca4a"
# ### 缓存省下了什么
#
# 前面已经有 $T$ 个词元时，生成下一个词元要做多少计算？与其猜，不如数一数：PyTorch 的 `FlopCounterMode` 会统计每一次矩阵乘法的浮点运算次数（每次乘加算两次；softmax、LayerNorm 和激活函数不是矩阵乘法，不计在内）。使用缓存时，一步只对一个词元做投影，再让它的查询与 $T + 1$ 个键打分：一部分固定不变，另一部分随 $T$ 线性增长。重新计算则要把全部 $T + 1$ 个词元重新送进每一层，注意力还要让每个词元与全部 $T + 1$ 个键打分（因果掩码要等矩阵乘法把分数算完，才把后面那些键的分数遮住）。所以重新计算是带缓存的一步的 $T + 1$ 倍，按 $T^2$ 增长。不多不少正好 $T + 1$ 倍，是朴素注意力才有的结果：它把要被遮住的那个三角形也算了出来，再扔掉；像第 08 课那样跳过被掩码遮住的分块的核函数，注意力部分的乘法只需做大约一半。

# %%
# lang: en
small = decoding.make_tiny_decoder(seed=0)  # float32, the same sizes
# lang: zh
small = decoding.make_tiny_decoder(seed=0)  # float32，大小相同
# lang: end
lengths = [32, 64, 128, 256, 512]
cached_cost, recomputed_cost = [], []
g = torch.Generator().manual_seed(1)
for T in lengths:
    sequence = torch.randint(0, 64, (1, T + 1), generator=g)  # (1, T + 1)
    caches = [KVCache() for _ in small.blocks]
    with torch.no_grad():
        # lang: en
        small(sequence[:, :T], 0, caches)  # prefill T tokens
        # lang: zh
        small(sequence[:, :T], 0, caches)  # 预填充 T 个词元
        # lang: end
        with FlopCounterMode(display=False) as counter:
            small(sequence[:, T:], T, caches)  # T
        # lang: en
        cached_cost.append(counter.get_total_flops() // 2)  # multiply-adds: 2 operations each
        # lang: zh
        cached_cost.append(counter.get_total_flops() // 2)  # 乘加次数：每次乘加算 2 次运算
        # lang: end
        with FlopCounterMode(display=False) as counter:
            small(sequence)  # 0 … T
        recomputed_cost.append(counter.get_total_flops() // 2)
# lang: en
claim(f"with the cache the next token costs {cached_cost[0]:,} multiply-adds at T = 32 and {cached_cost[-1]:,} at "
      "T = 512: 61,696 + 256·T, linear in T", all(c == 61_696 + 256 * T for c, T in zip(cached_cost, lengths)))
claim("recomputing costs exactly T + 1 times as much, quadratic in T",
      all(r == (T + 1) * c for r, c, T in zip(recomputed_cost, cached_cost, lengths)))
# lang: zh
claim(f"使用缓存时，T = 32 时下一个词元需要 {cached_cost[0]:,} 次乘加，T = 512 时需要 {cached_cost[-1]:,} 次："
      "即 61,696 + 256·T，随 T 线性增长", all(c == 61_696 + 256 * T for c, T in zip(cached_cost, lengths)))
claim("重新计算的代价恰好是它的 T + 1 倍，随 T 按平方增长",
      all(r == (T + 1) * c for r, c, T in zip(recomputed_cost, cached_cost, lengths)))
# lang: end
# lang: en
per_token = (cached_cost[-1] - cached_cost[0]) // (lengths[-1] - lengths[0])  # multiply-adds per cached token
numbers = sum(c.keys[0, :, 0].numel() + c.values[0, :, 0].numel() for c in caches)  # numbers cached per token
claim(f"each token in the cache adds {per_token} multiply-adds to a decode step and holds {numbers} numbers, each "
      f"read once per step: {per_token // numbers} multiply-adds per number read", per_token == 256 and numbers == 128)
# lang: zh
per_token = (cached_cost[-1] - cached_cost[0]) // (lengths[-1] - lengths[0])  # 缓存里每个词元带来的乘加次数
numbers = sum(c.keys[0, :, 0].numel() + c.values[0, :, 0].numel() for c in caches)  # 每个词元缓存的数的个数
claim(f"缓存里每多一个词元，解码步就多 {per_token} 次乘加；这个词元存了 {numbers} 个数，每步各读一次："
      f"每读一个数只做 {per_token // numbers} 次乘加", per_token == 256 and numbers == 128)
# lang: end
step_costs(lengths, cached_cost, recomputed_cost)
plt.show()

# %% [markdown] tags=["lang-en"]
# Over a whole generation of $N$ tokens that is $O(N^2)$ work in attention with the cache and
# $O(N^3)$ without.
# On a CPU the wall-clock gain is smaller than the count says for a model this small, where
# Python's overhead per step weighs as much as the arithmetic; it grows with the length. (These
# timings change from run to run and from machine to machine.)

# %% [markdown] tags=["lang-zh"] en_hash="615ad12dec"
# 生成 $N$ 个词元的整个过程中，注意力的计算量用缓存是 $O(N^2)$，不用缓存是 $O(N^3)$。在 CPU 上，对这么小的模型，实际耗时的差距没有计数显示的那么大，因为每一步里 Python 的开销与算术本身差不多重；长度越长，差距越大。（这些耗时每次运行、每台机器都不一样。）

# %% tags=["nbval-ignore-output"]
timing_prompt = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(2))
small.generate(timing_prompt, 4, cache=True)
small.generate(timing_prompt, 4, cache=False)
for n in (64, 256):
    start = time.perf_counter()
    small.generate(timing_prompt, n, cache=True)
    with_cache = time.perf_counter() - start
    start = time.perf_counter()
    small.generate(timing_prompt, n, cache=False)
    without = time.perf_counter() - start
    print(message("l07.timing", n=n, cached=1000 * with_cache, recomputed=1000 * without, ratio=without / with_cache))

# %% [markdown] tags=["lang-en"]
# On a GPU the cache saves almost nothing at this size. A decode step of this model is dozens of
# small kernels, and a GPU spends on each about the same few microseconds to launch it whatever it
# computes: with or without the cache, a step costs its launches (on an H200, 256 new tokens took
# 1.13 times as long recomputing, and 1,024 took less). The step is **launch-bound**; the count above is a count of
# work, and a GPU does this little work for free. The cache pays on a GPU once a step is big enough
# to be bound by its work or by its memory traffic: a larger model, a batch of sequences, a long
# context. The course's benchmark measures both on a GPU: this model, and a larger one (E = 1024,
# 16 query heads over 4 key/value heads, 4 layers, a batch of 16). If this runtime has a GPU, the
# next cell times this model there; the one after shows the benchmark's GPU figures.

# %% [markdown] tags=["lang-zh"] en_hash="8047f55094"
# 在 GPU 上，这么小的模型用缓存几乎省不了什么。这个模型的一个解码步有几十个小核函数，GPU 启动每个核函数都要花差不多同样的几微秒，不管它算多少：用不用缓存，一步的耗时都是这些启动的开销（在一块 H200 上，生成 256 个新词元时，重新计算的用时是用缓存的 1.13 倍；生成 1024 个时，重新计算反而更快）。这样的步是**启动受限**（launch-bound）的；上面数的是计算量，而这点计算量对 GPU 来说几乎不花时间。只有当一步大到受计算量或访存量限制时，缓存在 GPU 上才见效：模型更大、一批解码多条序列、上下文更长。课程的基准测试在 GPU 上把两种情形都测了：这个模型，以及一个更大的模型（E = 1024，16 个查询头共用 4 个键/值头，4 层，一批 16 条序列）。如果当前运行环境有 GPU，下一个单元会在 GPU 上给这个模型计时；再下一个单元展示基准测试在 GPU 上的结果。

# %% tags=["nbval-ignore-output"]
def gpu_timing(device):
    on_gpu = copy.deepcopy(small).to(device)
    prompt = timing_prompt.to(device)
    on_gpu.generate(prompt, 4, cache=True)
    on_gpu.generate(prompt, 4, cache=False)
    for n in (64, 256):
        # lang: en
        # measured.milliseconds waits for the GPU to finish before it stops the clock
        # lang: zh
        # measured.milliseconds 等 GPU 算完才停表
        # lang: end
        with_cache = measured.milliseconds(lambda: on_gpu.generate(prompt, n, cache=True), device, repeat=1)
        without = measured.milliseconds(lambda: on_gpu.generate(prompt, n, cache=False), device, repeat=1)
        print(message("l07.timing", n=n, cached=with_cache, recomputed=without, ratio=without / with_cache))


measured.on_gpu(gpu_timing)

# %%
def rounded(t):
    return "–" if t is None else f"{t:.2f}"


# lang: en
measured.table("decoding", {
    "model": lambda row: {"tiny": "tiny", "larger": "larger"}[row["model"]],
    "batch": lambda row: row["batch"],
    "new tokens": lambda row: row["N"],
    "cache (s)": lambda row: rounded(row["cache_s"]),
    "recompute (s)": lambda row: rounded(row["recompute_s"]),
    "recompute / cache": lambda row: measured.ratio(row["recompute_s"], row["cache_s"]),
})
# lang: zh
measured.table("decoding", {
    "模型": lambda row: {"tiny": "小模型", "larger": "大模型"}[row["model"]],
    "批量": lambda row: row["batch"],
    "新词元数": lambda row: row["N"],
    "用缓存（秒）": lambda row: rounded(row["cache_s"]),
    "重新计算（秒）": lambda row: rounded(row["recompute_s"]),
    "重新计算 / 用缓存": lambda row: measured.ratio(row["recompute_s"], row["cache_s"]),
})
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 2. Fewer key/value heads: multi-query and grouped-query attention
#
# The count above is not what makes generation slow on real hardware. A decode step does only a few
# multiply-adds per number it reads from memory: each cached key and value is read once per step and
# used once by each query head that shares it (2 here, the last claim above), and each weight is read
# once per step and used once per sequence. An accelerator does far more arithmetic than that in the
# time it reads a number: an H100 GPU, by NVIDIA's figures, about $10^{15}$ bfloat16 operations per second
# against 3.35 TB/s of memory bandwidth, some 300 operations per byte. So a decode step waits on
# memory: it is **memory-bound**. Prefill is the opposite: its prompt tokens use every weight and
# every key many times, matrix–matrix products that keep the arithmetic units busy
# (**compute-bound**). Serving systems therefore decode many sequences together, so that one read
# of the weights serves the whole batch; but each sequence reads its own cache, and at long
# contexts the caches are most of what a step reads, and must all fit in memory. (vLLM stores them
# in fixed-size blocks of tokens, PagedAttention (Kwon et al., 2023), so that sequences of unknown
# length share that memory without fragmenting it; the attention it computes is the same.)
#
# Lesson 04's multi-head attention gives each of its $H$ heads its own keys and values, so the cache holds
# $2 \cdot H \cdot d$ numbers per token and layer. Two ideas shrink it by letting query heads share
# key/value heads:
#
# - **multi-query attention** (MQA, Shazeer 2019): all $H$ query heads share *one* key/value head;
# - **grouped-query attention** (GQA, Ainslie et al. 2023): the $H$ query heads fall into $H_{kv}$
#   groups of $G = H / H_{kv}$ neighbouring heads, and each group shares one key/value head.
#   $H_{kv} = 1$ is MQA, $H_{kv} = H$ is ordinary multi-head attention (MHA). (Mind the letter: the
#   GQA paper's $G$ is the number of groups, this lesson's $H_{kv}$, so its GQA-1 is MQA and GQA-$H$
#   is MHA; here $G$ is the size of a group, the paper's $H/G$.)
#
# Query head $h$ reads key/value head $h \,//\, G$. The simplest correct code makes $H$ key/value
# heads out of $H_{kv}$ by repeating each one $G$ times next to itself, `repeat_interleave(G, dim=1)`,
# and runs ordinary multi-head attention. Beware of `repeat(1, G, 1, 1)`: it tiles the heads
# instead, $[k_0, k_1, k_0, k_1, \dots]$, and hands query heads another group's key/value head
# (half of them in this example). With $H = 8$ and $H_{kv} = 2$:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="779084e737"
# ## 2. 更少的键/值头：多查询注意力与分组查询注意力
#
# 在真实的硬件上，拖慢生成的并不是上面数出来的运算量。解码步每从内存读一个数，只做寥寥几次乘加：缓存里的每个键和值每步读一次，共用它的每个查询头各用一次（这里是 2 次，见上面最后一条结论）；每个权重每步也读一次，对每条序列只用一次。而加速器读一个数的工夫，能做的算术要多得多：按 NVIDIA 公布的数字，H100 GPU 每秒约做 $10^{15}$ 次 bfloat16 运算，内存带宽却只有 3.35 TB/s，每读一个字节约能做 300 次运算。所以解码步的瓶颈在访存而非计算：它是**访存受限**（memory-bound）的。预填充正好相反：提示里的词元要把每个权重、每个键都用上很多次，这种矩阵乘矩阵的运算能让运算单元一直忙着，是**计算受限**（compute-bound）的。因此，推理服务会把许多条序列放在一起解码，读一遍权重就能供整批序列使用；但每条序列读的是自己的缓存：许多条序列一起解码、上下文又很长时，缓存就占了每步读取量的大头，而且所有序列的缓存都得放得进内存。（vLLM 把缓存按固定大小的词元块存放，即 PagedAttention（Kwon 等，2023），让长度事先未知的序列共用这块内存而不产生碎片；算出的注意力并无不同。）
#
# 第 04 课的多头注意力让 $H$ 个头各有自己的键和值，所以缓存对每个词元、每一层要存 $2 \cdot H \cdot d$ 个数。有两个办法让查询头共用键/值头，从而缩小缓存：
#
# - **多查询注意力**（MQA，Shazeer 2019）：全部 $H$ 个查询头共用**一个**键/值头；
# - **分组查询注意力**（GQA，Ainslie 等，2023）：把 $H$ 个查询头分成 $H_{kv}$ 组，每组是相邻的 $G = H / H_{kv}$ 个头，每组共用一个键/值头。$H_{kv} = 1$ 就是 MQA，$H_{kv} = H$ 就是普通的多头注意力（MHA）。（注意字母的含义：GQA 论文中的 $G$ 是组数，即本课的 $H_{kv}$，所以论文里的 GQA-1 是 MQA，GQA-$H$ 是 MHA；本课的 $G$ 是每组的大小，即论文中的 $H/G$。）
#
# 查询头 $h$ 读的是键/值头 $h \,//\, G$。最简单的正确写法，是把每个键/值头连续重复 $G$ 次（`repeat_interleave(G, dim=1)`），从 $H_{kv}$ 个头得到 $H$ 个，再做普通的多头注意力。小心 `repeat(1, G, 1, 1)`：它把这些头平铺成 $[k_0, k_1, k_0, k_1, \dots]$，于是有些查询头拿到的是别组的键/值头（在这个例子里是一半）。取 $H = 8$、$H_{kv} = 2$：

# %%
# lang: en
heads = torch.arange(2)  # the key/value heads 0 and 1
# lang: zh
heads = torch.arange(2)  # 键/值头 0 和 1
# lang: end
interleaved_heads, tiled_heads = heads.repeat_interleave(4).tolist(), heads.repeat(4).tolist()
# lang: en
claim(f"repeat_interleave gives query heads 0 … 7 the key/value heads {interleaved_heads}",
      interleaved_heads == [h // 4 for h in range(8)])
claim(f"repeat gives them {tiled_heads}: query heads 1, 3, 4 and 6 read the wrong one",
      [h for h in range(8) if tiled_heads[h] != h // 4] == [1, 3, 4, 6])
# lang: zh
claim(f"repeat_interleave 给查询头 0 … 7 分配的键/值头是 {interleaved_heads}",
      interleaved_heads == [h // 4 for h in range(8)])
claim(f"repeat 给的却是 {tiled_heads}：查询头 1、3、4、6 读错了键/值头",
      [h for h in range(8) if tiled_heads[h] != h // 4] == [1, 3, 4, 6])
# lang: end

# %% [markdown] tags=["lang-en"]
# `decoding.gqa_attention(query, key, value, causal=False)` takes query $(B, H, L_q, d)$ and key,
# value $(B, H_{kv}, L_k, d)$. Since version 2.5, PyTorch's `F.scaled_dot_product_attention` does the
# same with `enable_gqa=True` (on older versions that argument does not exist). The two agree, in
# values and in gradients, causal or not:

# %% [markdown] tags=["lang-zh"] en_hash="69574c2bc9"
# `decoding.gqa_attention(query, key, value, causal=False)` 接收形状为 $(B, H, L_q, d)$ 的查询 query，以及形状为 $(B, H_{kv}, L_k, d)$ 的 key 和 value。PyTorch 从 2.5 版起，`F.scaled_dot_product_attention` 加上 `enable_gqa=True` 也能做同样的事（更早的版本没有这个参数）。两者的数值和梯度都一致，无论是否因果：

# %%
g = torch.Generator().manual_seed(0)
q = torch.randn(2, 8, 6, 16, generator=g, dtype=torch.float64, requires_grad=True)  # (B, H, L, d)
k = torch.randn(2, 2, 6, 16, generator=g, dtype=torch.float64, requires_grad=True)  # (B, H_kv, L, d)
v = torch.randn(2, 2, 6, 16, generator=g, dtype=torch.float64, requires_grad=True)
agree = []
for causal in (False, True):
    ours, _ = gqa_attention(q, k, v, causal=causal)  # (B, H, L, d)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    weight = torch.randn(ours.shape, generator=g, dtype=torch.float64)
    grads_ours = torch.autograd.grad((ours * weight).sum(), (q, k, v))
    grads_theirs = torch.autograd.grad((theirs * weight).sum(), (q, k, v))
    agree.append(torch.allclose(ours, theirs) and all(torch.allclose(a, b) for a, b in zip(grads_ours, grads_theirs)))
tiled = F.scaled_dot_product_attention(q, k.repeat(1, 4, 1, 1), v.repeat(1, 4, 1, 1))
ours, _ = gqa_attention(q, k, v)
# lang: en
claim("gqa_attention gives the outputs and the gradients of F.scaled_dot_product_attention(..., enable_gqa=True), "
      "causal and not", all(agree))
claim("tiling with repeat changes the outputs of exactly the query heads 1, 3, 4 and 6",
      [h for h in range(8) if not torch.allclose(tiled[:, h], ours[:, h])] == [1, 3, 4, 6])
# lang: zh
claim("gqa_attention 的输出和梯度与 F.scaled_dot_product_attention(..., enable_gqa=True) 的相同，"
      "无论是否因果", all(agree))
claim("用 repeat 平铺，改变的恰好是查询头 1、3、4、6 的输出",
      [h for h in range(8) if not torch.allclose(tiled[:, h], ours[:, h])] == [1, 3, 4, 6])
# lang: end

# %% [markdown] tags=["lang-en"]
# Right, but the copies undo at every step what GQA saves. `repeat_interleave` writes $H / H_{kv}$
# copies of every cached key and value, and attention then reads the copies, so a decode step moves
# more bytes than multi-head attention would have. Real kernels read key/value head $h \,//\, G$
# where it lies. `gqa_attention` does the same with a reshape: the $G$ query heads of a group are
# laid one after another along the query axis, $(B, H_{kv}, G \cdot L_q, d)$, so that one ordinary
# product per key/value head scores all of them. Counted with `peak_bytes` (lesson 08 introduces
# it: the bytes of the tensors a call creates, the same count on every machine) on one decode step
# over a cache of 4,096 tokens, 8 query heads, 2 key/value heads, $d = 64$, float32:

# %% [markdown] tags=["lang-zh"] en_hash="6bbdbbe994"
# 写法是对的，但这些副本在每一步都把 GQA 省下的又花了回去。`repeat_interleave` 要把缓存里的每个键和值复制成 $H / H_{kv}$ 份，注意力再去读这些副本，于是一个解码步搬运的字节数比多头注意力还多。真正的核函数直接在原处读取键/值头 $h \,//\, G$。`gqa_attention` 用一次 reshape 做到了同样的事：把同一组的 $G$ 个查询头沿查询这一维依次排开，得到 $(B, H_{kv}, G \cdot L_q, d)$，于是每个键/值头只需一次普通的矩阵乘法，就能给这一组的所有查询头打分。下面用 `peak_bytes`（第 08 课会介绍它：统计一次调用所创建张量的字节数，在任何机器上数出来都一样）来数一个解码步，缓存有 4,096 个词元，8 个查询头，2 个键/值头，$d = 64$，float32：

# %%
g = torch.Generator().manual_seed(4)
# lang: en
q_step = torch.randn(1, 8, 1, 64, generator=g)  # one new token's 8 query heads
k_cache, v_cache = torch.randn(2, 1, 2, 4096, 64, generator=g)  # (B, H_kv, T, d) each
# lang: zh
q_step = torch.randn(1, 8, 1, 64, generator=g)  # 一个新词元的 8 个查询头
k_cache, v_cache = torch.randn(2, 1, 2, 4096, 64, generator=g)  # 各为 (B, H_kv, T, d)
# lang: end
cache_size = k_cache.nbytes + v_cache.nbytes


def with_copies(q, k, v):
    k, v = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)  # 2 × (B, H, T, d)
    return torch.softmax(q @ k.transpose(-2, -1) / 8, dim=-1) @ v


with torch.no_grad():
    made = {
        "repeat_interleave": peak_bytes(with_copies, q_step, k_cache, v_cache),
        "gqa_attention": peak_bytes(lambda q, k, v: gqa_attention(q, k, v)[0], q_step, k_cache, v_cache),
        "F.sdpa": peak_bytes(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                             q_step, k_cache, v_cache),
    }
share = {name: counted / cache_size for name, (_, counted) in made.items()}
outputs = [output for output, _ in made.values()]
# lang: en
claim(f"one decode step over a cache of {format_bytes(cache_size)}: repeat_interleave makes {share['repeat_interleave']:.2f} "
      f"times the cache's bytes (its H / H_kv = 4 copies), gqa_attention {share['gqa_attention']:.2f} (the scores, "
      f"no copy), F.scaled_dot_product_attention(..., enable_gqa=True) {share['F.sdpa']:.4f}",
      4 < share["repeat_interleave"] < 4.1 and share["gqa_attention"] < 0.1 and share["F.sdpa"] < 0.01)
claim("and the three give the same output (float32, to 1e-5)",
      all(torch.allclose(o, outputs[0], rtol=0, atol=1e-5) for o in outputs))
# lang: zh
claim(f"在 {format_bytes(cache_size)} 的缓存上做一个解码步：repeat_interleave 创建的字节数是缓存的 "
      f"{share['repeat_interleave']:.2f} 倍（它的 H / H_kv = 4 份副本），gqa_attention 是 {share['gqa_attention']:.2f} 倍"
      f"（只有分数，没有副本），F.scaled_dot_product_attention(..., enable_gqa=True) 是 {share['F.sdpa']:.4f} 倍",
      4 < share["repeat_interleave"] < 4.1 and share["gqa_attention"] < 0.1 and share["F.sdpa"] < 0.01)
claim("三者给出的输出相同（float32，误差不超过 1e-5）",
      all(torch.allclose(o, outputs[0], rtol=0, atol=1e-5) for o in outputs))
# lang: end

# %% [markdown] tags=["lang-en"]
# One more thing to get right in a decode step: with a cache the queries are the **last** $L_q$
# positions of the $L_k$ keys (a step with $T$ cached tokens has $L_q = 1$, $L_k = T + 1$). Query $i$
# stands at position $L_k - L_q + i$ and may see keys $0 \dots L_k - L_q + i$: the causal mask
# aligned to the bottom-right corner, one of lesson 02's two alignments. `is_causal=True` aligns it
# to the top-left (query $i$ sees keys $0 \dots i$), which is the same only when $L_q = L_k$; for a
# single new query it would hide every key but the first. `gqa_attention(..., causal=True)` aligns
# bottom-right:

# %% [markdown] tags=["lang-zh"] en_hash="b7c50f876f"
# 解码步里还有一件事要做对：有缓存时，查询是 $L_k$ 个键中的**最后** $L_q$ 个位置（缓存了 $T$ 个词元的一步，$L_q = 1$，$L_k = T + 1$）。查询 $i$ 位于位置 $L_k - L_q + i$，可以看到键 $0 \dots L_k - L_q + i$：这是对齐到右下角的因果掩码，即第 02 课的两种对齐方式之一。`is_causal=True` 则对齐到左上角（查询 $i$ 看到键 $0 \dots i$），只有 $L_q = L_k$ 时两者才相同；对单独一个新查询，它会把除第一个键之外的所有键都遮住。`gqa_attention(..., causal=True)` 按右下角对齐：

# %%
with torch.no_grad():
    # lang: en
    step, _ = gqa_attention(q[:, :, -1:], k, v, causal=True)  # the last query alone, over all 6 keys
    full, _ = gqa_attention(q, k, v, causal=True)  # all 6 queries
    # lang: zh
    step, _ = gqa_attention(q[:, :, -1:], k, v, causal=True)  # 单独的最后一个查询，对全部 6 个键
    full, _ = gqa_attention(q, k, v, causal=True)  # 全部 6 个查询
    # lang: end
    top_left = F.scaled_dot_product_attention(q[:, :, -1:], k, v, is_causal=True, enable_gqa=True)
# lang: en
claim("the last query alone, aligned bottom-right, gets the last row of the full causal attention",
      torch.allclose(step, full[:, :, -1:]))
claim("with is_causal=True it sees key 0 only (its output is value 0), and gets something else",
      torch.allclose(top_left, v[:, :, :1].repeat_interleave(4, dim=1)) and not torch.allclose(top_left, step))
# lang: zh
claim("单独计算最后一个查询，按右下角对齐，得到的正是完整因果注意力的最后一行", torch.allclose(step, full[:, :, -1:]))
claim("用 is_causal=True，它只看到键 0（输出就是值 0），得到的就是别的结果了",
      torch.allclose(top_left, v[:, :, :1].repeat_interleave(4, dim=1)) and not torch.allclose(top_left, step))
# lang: end

# %% [markdown] tags=["lang-en"]
# The bottom-right mask has a name in PyTorch: `torch.nn.attention.bias.causal_lower_right(L_q, L_k)`,
# passed as `attn_mask`. Libraries do not agree on what `causal=True` means when $L_q \ne L_k$:
# PyTorch's `is_causal` aligns top-left, while the flash-attn library aligns its `causal=True`
# bottom-right since its version 2.1 (before, top-left too). Moving decoding code from one to the
# other keeps the flag and changes the mask: a trap worth a test.

# %% [markdown] tags=["lang-zh"] en_hash="7536161db1"
# 右下角对齐的掩码在 PyTorch 里有个名字：`torch.nn.attention.bias.causal_lower_right(L_q, L_k)`，作为 `attn_mask` 传入。当 $L_q \ne L_k$ 时，各个库对 `causal=True` 的含义并不一致：PyTorch 的 `is_causal` 按左上角对齐，而 flash-attn 库从 2.1 版起让它的 `causal=True` 按右下角对齐（此前也是左上角）。把解码代码从一个库搬到另一个库，标志没变，掩码却变了：这个陷阱值得写一个测试。

# %%
lower_right = F.scaled_dot_product_attention(q[:, :, -2:], k, v, attn_mask=causal_lower_right(2, 6), enable_gqa=True)
# lang: en
claim("causal_lower_right(2, 6) gives the last two queries what gqa_attention(..., causal=True) gives them",
      torch.allclose(lower_right, gqa_attention(q[:, :, -2:], k, v, causal=True)[0]))
# lang: zh
claim("causal_lower_right(2, 6) 给最后两个查询的结果，与 gqa_attention(..., causal=True) 的相同",
      torch.allclose(lower_right, gqa_attention(q[:, :, -2:], k, v, causal=True)[0]))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 1: grouped-query attention
#
# Write `my_gqa_attention(query, key, value, causal)`: query $(B, H, L_q, d)$, key and value
# $(B, H_{kv}, L_k, d)$ with $H_{kv}$ dividing $H$, `causal` a bool. Query head $h$ attends with
# key/value head $h \,//\, (H / H_{kv})$; the scores are $q \cdot k / \sqrt{d}$, then a softmax over
# the keys, then the weighted sum of the values. With `causal=True` the queries are the last $L_q$ of
# the $L_k$ positions: query $i$ may attend to keys $0 \dots L_k - L_q + i$ only (bottom-right
# alignment; $L_q \le L_k$). Return the output $(B, H, L_q, d)$, in the dtype of the inputs (float32
# or float64). The check compares the values and the gradients with respect to query, key and value.
# Write it yourself: the check refuses `F.scaled_dot_product_attention` and the course's
# `decoding.gqa_attention`, which solve it.

# %% [markdown] tags=["lang-zh"] en_hash="0ba1e603d4"
# ### 练习 1：分组查询注意力
#
# 写出 `my_gqa_attention(query, key, value, causal)`：query 的形状为 $(B, H, L_q, d)$，key 和 value 的形状为 $(B, H_{kv}, L_k, d)$，$H_{kv}$ 能整除 $H$；`causal` 是 bool。查询头 $h$ 使用键/值头 $h \,//\, (H / H_{kv})$；分数是 $q \cdot k / \sqrt{d}$，然后对键做 softmax，再对值加权求和。`causal=True` 时，查询是 $L_k$ 个位置中的最后 $L_q$ 个：查询 $i$ 只能关注键 $0 \dots L_k - L_q + i$（右下角对齐；$L_q \le L_k$）。返回形状为 $(B, H, L_q, d)$ 的输出，dtype 与输入相同（float32 或 float64）。检查会比较数值，以及对 query、key、value 的梯度。请自己写出来：检查不接受能直接解出本题的 `F.scaled_dot_product_attention` 和课程自带的 `decoding.gqa_attention`。

# %% tags=["exercise"] exercise="07.gqa_attention"
def my_gqa_attention(query, key, value, causal):
    # lang: en
    """Scaled dot-product attention, H query heads over H_kv key/value heads.

    query: (B, H, L_q, d). key, value: (B, H_kv, L_k, d), H_kv dividing H.
    causal: if True, query i (the queries are the last L_q positions) attends to keys
        0 … L_k − L_q + i only.
    Returns the output (B, H, L_q, d); query head h reads key/value head h // (H // H_kv).
    """
    # lang: zh
    """缩放点积注意力：H 个查询头，H_kv 个键/值头。

    query：(B, H, L_q, d)。key、value：(B, H_kv, L_k, d)，H_kv 能整除 H。
    causal：为 True 时，查询 i（查询是最后 L_q 个位置）只关注键 0 … L_k − L_q + i。
    返回输出 (B, H, L_q, d)；查询头 h 读键/值头 h // (H // H_kv)。
    """
    # lang: end
    ### BEGIN SOLUTION
    groups = query.shape[1] // key.shape[1]
    # lang: en
    keys = key.repeat_interleave(groups, dim=1)  # (B, H, L_k, d): [k0, k0, k1, k1], not [k0, k1, k0, k1]
    # lang: zh
    keys = key.repeat_interleave(groups, dim=1)  # (B, H, L_k, d)：[k0, k0, k1, k1]，不是 [k0, k1, k0, k1]
    # lang: end
    values = value.repeat_interleave(groups, dim=1)
    L_q, L_k = query.shape[2], key.shape[2]
    scores = query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5  # (B, H, L_q, L_k)
    if causal:
        # lang: en
        keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q)  # bottom-right aligned
        # lang: zh
        keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q)  # 右下角对齐
        # lang: end
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(dim=-1) @ values  # (B, H, L_q, d)
    ### END SOLUTION


# %%
from course_utils import check
check("07.gqa_attention", my_gqa_attention)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### What the cache weighs in real models
#
# A token's cache is $2 \times \text{layers} \times H_{kv} \times d$ numbers (a key and a value per
# key/value head and layer), 2 bytes each in float16 or bfloat16, the usual inference dtypes:
# `decoding.cache_bytes`. Here it is for four published configurations (from each model's released
# configuration file): Llama-2-7B (32 layers, 32 heads, $d = 128$, MHA), Llama-2-70B (80 layers,
# 64 query heads over 8 key/value heads, $d = 128$, GQA), Falcon-7B (32 layers, 71 query heads over
# one key/value head, $d = 64$, MQA) and Mistral-7B v0.1 (32 layers, 32 query heads over 8 key/value
# heads, $d = 128$, GQA, and a sliding window of 4096 tokens, section 4; its later versions dropped
# the window). Beside them, the weights a step reads too: Llama-2-7B has a vocabulary of 32,000, a
# width of 4,096 and feed-forward layers of width 11,008, 6.74 billion parameters. Bytes are in
# powers of 1000 (1 kB = 1000 B).

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="bb9df0e27e"
# ### 真实模型的缓存有多大
#
# 一个词元的缓存是 $2 \times \text{层数} \times H_{kv} \times d$ 个数（每层、每个键/值头各一个键和一个值），在推理常用的 float16 或 bfloat16 下每个数占 2 字节：`decoding.cache_bytes`。下面是四个已发布模型的配置（取自各模型公开的配置文件）：Llama-2-7B（32 层，32 个头，$d = 128$，MHA）、Llama-2-70B（80 层，64 个查询头共用 8 个键/值头，$d = 128$，GQA）、Falcon-7B（32 层，71 个查询头共用一个键/值头，$d = 64$，MQA）和 Mistral-7B v0.1（32 层，32 个查询头共用 8 个键/值头，$d = 128$，GQA，外加 4096 个词元的滑动窗口，见第 4 节；后来的版本去掉了窗口）。此外还有每一步同样要读的权重：Llama-2-7B 的词表有 32,000 个词元，宽度为 4,096，前馈层宽度为 11,008，共 67.4 亿个参数。字节数按 1000 进位（1 kB = 1000 B）。

# %%
per_token = {s.name: decoding.cache_bytes(s.layers, s.kv_heads, s.head_dim) for s in decoding.PUBLISHED}
llama7, llama70, falcon, mistral = per_token.values()
vocab, width, ffn, layers = 32_000, 4096, 11_008, 32
# lang: en
# embeddings and output layer, then per layer W_Q, W_K, W_V, W_O, three feed-forward matrices, two norms; the last norm
# lang: zh
# 嵌入层和输出层；每层 W_Q、W_K、W_V、W_O、三个前馈矩阵、两个归一化层；最后一个归一化层
# lang: end
parameters = 2 * vocab * width + layers * (4 * width**2 + 3 * width * ffn + 2 * width) + width
# lang: en
claim(f"Llama-2-7B (MHA): {format_bytes(llama7)} per token, {format_bytes(4096 * llama7)} for one sequence of 4096 tokens",
      llama7 == 524_288)
claim(f"Llama-2-70B (GQA, 8 key/value heads): {format_bytes(llama70)} per token, less than the 7B model's although it "
      "has 2.5 times as many layers", llama70 == 327_680 < llama7)
claim(f"Falcon-7B (MQA): {format_bytes(falcon)} per token, 64 times less than Llama-2-7B", llama7 == 64 * falcon)
claim(f"Mistral-7B (GQA and a window of 4096): {format_bytes(mistral)} per token, at most "
      f"{format_bytes(4096 * mistral)} however long the sequence",
      mistral * 4 == llama7 and decoding.PUBLISHED[3].window == 4096)
claim(f"Llama-2-7B's {parameters / 1e9:.2f} billion parameters weigh {format_bytes(2 * parameters)} in float16: one "
      f"sequence of 4096 tokens adds a cache of {format_bytes(4096 * llama7)}, and it takes "
      f"{2 * parameters / (4096 * llama7):.1f} such sequences decoded together for the caches to weigh what the weights do",
      parameters == 6_738_415_616 and 6 < 2 * parameters / (4096 * llama7) < 7)
# lang: zh
claim(f"Llama-2-7B（MHA）：每个词元 {format_bytes(llama7)}，一条 4096 个词元的序列需要 {format_bytes(4096 * llama7)}",
      llama7 == 524_288)
claim(f"Llama-2-70B（GQA，8 个键/值头）：每个词元 {format_bytes(llama70)}，虽然层数是 7B 模型的 2.5 倍，"
      "缓存却比它还小", llama70 == 327_680 < llama7)
claim(f"Falcon-7B（MQA）：每个词元 {format_bytes(falcon)}，只有 Llama-2-7B 的 1/64", llama7 == 64 * falcon)
claim(f"Mistral-7B（GQA，外加 4096 个词元的窗口）：每个词元 {format_bytes(mistral)}，无论序列多长，最多 "
      f"{format_bytes(4096 * mistral)}",
      mistral * 4 == llama7 and decoding.PUBLISHED[3].window == 4096)
claim(f"Llama-2-7B 的 {parameters / 1e8:.1f} 亿个参数在 float16 下占 {format_bytes(2 * parameters)}；一条 4096 个词元的序列"
      f"再加上 {format_bytes(4096 * llama7)} 的缓存；要 {2 * parameters / (4096 * llama7):.1f} 条这样的序列一起解码，"
      "缓存的总量才赶上权重",
      parameters == 6_738_415_616 and 6 < 2 * parameters / (4096 * llama7) < 7)
# lang: end
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.6), layout="constrained")
cache_bytes_bars(ax=left)
cache_growth([2**n for n in range(7, 17)], ax=right)
plt.show()

# %% [markdown] tags=["lang-en"]
# Try it: the explorer generates up to 24 tokens through a cache with 8 query heads and 8, 2 or 1
# key/value heads, with or without a sliding window (section 4), and shows which position each slot
# of the cache holds (the newest in green) and what the cache weighs.

# %% [markdown] tags=["lang-zh"] en_hash="07a25f0e75"
# 自己试一试：探索器有 8 个查询头，键/值头可选 8 个、2 个或 1 个，可以加滑动窗口（第 4 节），也可以不加。它最多生成 24 个词元，并显示缓存的每个槽位存着哪个位置（最新的用绿色标出），以及缓存有多大。

# %%
cache_explorer()

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### From a trained MHA to GQA
#
# A model trained with multi-head attention can be turned into a GQA one: the GQA paper starts
# from the trained key and value projections, replaces each group's heads by their **mean**, and
# then trains a little more ("uptraining", 5 % of the original training steps in the paper).
# `decoding.pool_kv_heads` does the pooling. The pooling alone costs accuracy, which the paper's
# uptraining then wins back; this lesson measures only the first half. On lesson 06's model, whose
# decoder self-attention has two heads, pooling its two key/value heads into one (MQA) with no
# retraining gives (the exact numbers depend on the machine's arithmetic; the bars below hold on
# any):

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="7fdde2a497"
# ### 从训练好的 MHA 到 GQA
#
# 用多头注意力训练好的模型，可以改造成 GQA 模型：GQA 论文从训练好的键投影和值投影出发，把每组头换成它们的**平均**，然后再训练一小会儿，即追加训练（uptraining），论文里用的是原训练步数的 5%。`decoding.pool_kv_heads` 负责做平均。单是做平均就会损失准确率，论文再靠追加训练把它追回来；本课只测量前一半。第 06 课的模型，解码器的自注意力有两个头；把它的两个键/值头平均合并成一个（MQA），不再训练，结果如下（具体数字取决于机器的浮点运算；下面的界限在任何机器上都成立）：

# %% tags=["nbval-ignore-output"]
pooled = decoding.pooled_copy(reverser, kv_heads=1)
before = seq2seq.exact(seq2seq.greedy_decode(reverser, test.source), test).double().mean().item()
after = seq2seq.exact(seq2seq.greedy_decode(pooled, test.source), test).double().mean().item()
print(message("l07.pooled", before=before, after=after))

# %%
# lang: en
claim("with 2 key/value heads it reverses at least 95 % of the held-out sources exactly; pooled into one, at most 80 %",
      before >= 0.95 and after <= 0.80)
# lang: zh
claim("有 2 个键/值头时，它至少能完全正确地反转 95% 的留出源序列；合并成一个之后，至多 80%", before >= 0.95 and after <= 0.80)
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 3. Positions inside attention: the rotary position embedding (RoPE)
#
# Lesson 06 added a position vector to each token embedding and found that, with sines and cosines,
# moving $k$ positions on is a rotation of each feature pair. RoPE (Su et al., 2021, the RoFormer paper)
# uses that rotation directly, inside attention: it adds nothing to the embeddings, and instead
# rotates every query and every key by its position. Pair $i$ of a vector at position $p$, features
# $(a, b)$, turns by the angle $p\,\theta_i$, with the frequencies of lesson 06,
# $\theta_i = 10000^{-2i/d}$:
#
# $$(a, b) \;\mapsto\; (a \cos p\theta_i - b \sin p\theta_i,\;\; a \sin p\theta_i + b \cos p\theta_i).$$
#
# A rotation keeps lengths, and two rotations compose by adding their angles. The score of a query
# at $m$ and a key at $n$ is, pair by pair, the dot product of two vectors turned by $m\theta_i$ and
# $n\theta_i$: it depends on the angle between them, $(n - m)\theta_i$, and on $q$ and $k$, and not on
# $m$ and $n$ apart. **The scores see only the offset.** That, not the cache, is what RoPE brings:
# any fixed absolute position can be cached too (section 1 cached lesson 06's model, whose
# sinusoidal positions are added to its embeddings, and got recomputation's tokens exactly). With
# RoPE nothing is added to the embeddings, the scores depend on positions through the offset alone, and no table of
# positions ends at a last row (a learned table, such as GPT-2's 1,024 rows, does).
# `decoding.apply_rope(x, positions)` rotates a $(B, H, L, d)$ tensor of queries or keys, row $l$ by
# `positions[l]`:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="8f4817a95c"
# ## 3. 把位置放进注意力：旋转位置嵌入（RoPE）
#
# 第 06 课给每个词元嵌入加上一个位置向量，并发现用正弦和余弦时，往后移动 $k$ 个位置，就是把每一对特征旋转一下。RoPE（Su 等，2021，RoFormer 论文）直接在注意力内部使用这个旋转：它不往嵌入上加任何东西，而是把每个查询、每个键按它自己的位置旋转。位置 $p$ 上的向量的第 $i$ 对特征 $(a, b)$，转过角度 $p\,\theta_i$，频率与第 06 课相同，$\theta_i = 10000^{-2i/d}$：
#
# $$(a, b) \;\mapsto\; (a \cos p\theta_i - b \sin p\theta_i,\;\; a \sin p\theta_i + b \cos p\theta_i).$$
#
# 旋转不改变长度，两次旋转的角度直接相加。位置 $m$ 上的查询与位置 $n$ 上的键的分数，逐对来看，是两个分别转过 $m\theta_i$ 和 $n\theta_i$ 的向量的点积：它取决于两者之间的夹角 $(n - m)\theta_i$ 以及 $q$ 和 $k$ 本身，而与 $m$、$n$ 各自是多少无关。**分数只看得到偏移。** RoPE 带来的正是这一点，而不是“能用缓存”：任何固定的绝对位置都能缓存（第 1 节就缓存了第 06 课的模型，它把正弦位置编码加在嵌入上，写出的词元与重新计算的完全相同）。用 RoPE 时，嵌入上什么都不加，分数与位置的关系只体现在偏移上，也没有一张写到最后一行就用完的位置表（学出来的位置表就会用完，例如 GPT-2 的表只有 1,024 行）。`decoding.apply_rope(x, positions)` 旋转一个形状为 $(B, H, L, d)$ 的查询或键张量，第 $l$ 行按 `positions[l]` 旋转：

# %%
g = torch.Generator().manual_seed(0)
# lang: en
q1 = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)  # one query (B, H, 1, d)
k1 = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)  # one key
# lang: zh
q1 = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)  # 一个查询 (B, H, 1, d)
k1 = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)  # 一个键
# lang: end


def rope_score(m, n, layout="interleaved"):
    # lang: en
    """The score of q1 rotated at position m and k1 rotated at position n."""
    # lang: zh
    """q1 按位置 m 旋转、k1 按位置 n 旋转之后的分数。"""
    # lang: end
    return (apply_rope(q1, torch.tensor([m]), layout) * apply_rope(k1, torch.tensor([n]), layout)).sum()


five_apart = torch.stack([rope_score(m, m + 5) for m in (0, 10, 100, 1000)])
vectors = torch.randn(1, 2, 50, 16, generator=g, dtype=torch.float64)  # (B, H, L, d)
spread = torch.arange(0, 5000, 100)  # (L,) = (50,)
# lang: en
claim(f"query at m, key at m + 5: the score is {five_apart[0]:.4f} for m = 0, 10, 100 and 1000",
      torch.allclose(five_apart, five_apart[0].expand(4)))
claim(f"another offset, another score: {rope_score(0, 6):.4f} at offset 6", not torch.isclose(rope_score(0, 6), five_apart[0]))
claim("rotating keeps the length of every query and key (100 random vectors at positions 0 … 4900)",
      torch.allclose(apply_rope(vectors, spread).norm(dim=-1), vectors.norm(dim=-1)))
# lang: zh
claim(f"查询在 m、键在 m + 5：m = 0、10、100、1000 时，分数都是 {five_apart[0]:.4f}",
      torch.allclose(five_apart, five_apart[0].expand(4)))
claim(f"换一个偏移，分数就变了：偏移为 6 时是 {rope_score(0, 6):.4f}", not torch.isclose(rope_score(0, 6), five_apart[0]))
claim("旋转不改变任何查询和键的长度（100 个随机向量，位置 0 … 4900）",
      torch.allclose(apply_rope(vectors, spread).norm(dim=-1), vectors.norm(dim=-1)))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### Two layouts
#
# Which two features form pair $i$? The RoFormer paper, GPT-J and Meta's original Llama code pair
# neighbours, $(2i, 2i + 1)$: the **interleaved** layout, lesson 06's. GPT-NeoX and Hugging Face's
# Llama code pair feature $i$ with feature $i + d/2$: the **half** layout, which rotates the first
# half of the features against the second. Both are the same rotation; only the order of the features
# differs, and the permutation $[0, 2, 4, \dots, 1, 3, 5, \dots]$ (`decoding.rope_permutation`) takes
# one to the other.
#
# That is why weights cannot move between the layouts unchanged: a trained $W_Q$ and $W_K$ decide
# which output features form a pair. Loaded into code with the other layout, the same weights rotate
# other pairs and give other scores. Permuting the output features of $W_Q$ and $W_K$ (the rows of the
# `nn.Linear` weights, head by head) fixes it; that is what the scripts that convert Meta's Llama
# weights to Hugging Face's layout do. (GPT-J and GPT-NeoX also rotate only part of each head's
# features, a quarter of them; the rest carry no position. This lesson rotates them all, as Llama
# does.)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="3631cc6d7a"
# ### 两种布局
#
# 第 $i$ 对由哪两个特征组成？RoFormer 论文、GPT-J 和 Meta 最初的 Llama 代码把相邻的两个特征配成一对，$(2i, 2i + 1)$：这是**交错**布局，也就是第 06 课的布局。GPT-NeoX 和 Hugging Face 的 Llama 代码则把特征 $i$ 与特征 $i + d/2$ 配成一对：这是**前后两半**布局，它让前一半特征与后一半特征一一配对旋转。两者是同一种旋转，只是特征的顺序不同，排列 $[0, 2, 4, \dots, 1, 3, 5, \dots]$（`decoding.rope_permutation`）把一种布局变成另一种。
#
# 所以权重不能原封不动地在两种布局之间搬来搬去：训练好的 $W_Q$ 和 $W_K$ 决定了哪些输出特征配成一对。把同样的权重装进另一种布局的代码里，旋转的就是别的特征对，得到的分数也不同。把 $W_Q$ 和 $W_K$ 的输出特征（`nn.Linear` 权重的行，逐个头）按这个排列重新排一遍，就对上了；把 Meta 的 Llama 权重转换成 Hugging Face 布局的脚本，做的正是这件事。（GPT-J 和 GPT-NeoX 还只旋转每个头的一部分特征，即四分之一，其余特征不带位置信息。本课像 Llama 一样旋转全部特征。）

# %%
g = torch.Generator().manual_seed(1)
# lang: en
h = torch.randn(1, 1, 6, 8, generator=g, dtype=torch.float64)  # 6 positions, E = 8 features
W_Q, W_K = torch.randn(2, 8, 8, generator=g, dtype=torch.float64)  # x @ W: E -> d = 8, one head
# lang: zh
h = torch.randn(1, 1, 6, 8, generator=g, dtype=torch.float64)  # 6 个位置，E = 8 个特征
W_Q, W_K = torch.randn(2, 8, 8, generator=g, dtype=torch.float64)  # x @ W：E -> d = 8，一个头
# lang: end
positions = torch.arange(6)
order = rope_permutation(8)


def rope_scores(W_Q, W_K, layout):
    # lang: en
    """(L, L) scores of the 6 positions with RoPE in `layout`."""
    # lang: zh
    """6 个位置在 `layout` 布局下使用 RoPE 时的分数 (L, L)。"""
    # lang: end
    queries, keys = apply_rope(h @ W_Q, positions, layout), apply_rope(h @ W_K, positions, layout)
    return (queries @ keys.transpose(-2, -1))[0, 0]


# lang: en
claim(f"the half layout is the interleaved one with the features in the order {order.tolist()}",
      torch.allclose(apply_rope(h[..., order], positions, "half"), apply_rope(h, positions)[..., order]))
claim("the same W_Q and W_K give other scores in the other layout",
      not torch.allclose(rope_scores(W_Q, W_K, "interleaved"), rope_scores(W_Q, W_K, "half")))
claim("with their output features permuted, they give the same scores",
      torch.allclose(rope_scores(W_Q, W_K, "interleaved"), rope_scores(W_Q[:, order], W_K[:, order], "half")))
# lang: zh
claim(f"前后两半布局就是把交错布局的特征按 {order.tolist()} 的顺序重排",
      torch.allclose(apply_rope(h[..., order], positions, "half"), apply_rope(h, positions)[..., order]))
claim("同样的 W_Q 和 W_K，换一种布局就得到别的分数",
      not torch.allclose(rope_scores(W_Q, W_K, "interleaved"), rope_scores(W_Q, W_K, "half")))
claim("把它们的输出特征重排之后，分数就相同了",
      torch.allclose(rope_scores(W_Q, W_K, "interleaved"), rope_scores(W_Q[:, order], W_K[:, order], "half")))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 2: `apply_rope`
#
# Write `my_apply_rope(x, positions)` for the interleaved layout: x is $(B, H, L, d)$ with $d$ even,
# positions an int64 tensor $(L,)$, the absolute position of each of the $L$ rows (they need not
# start at 0, nor be in order). Pair $i$ is features $2i$ and $2i + 1$; rotate it by
# $\varphi = p\,\theta_i$, $\theta_i = 10000^{-2i/d}$:
# $(a, b) \mapsto (a\cos\varphi - b\sin\varphi,\; a\sin\varphi + b\cos\varphi)$, and put the two
# results back on features $2i$ and $2i + 1$. Compute the angles in float64 (positions reach
# thousands, and float32 angles lose digits there) and return a tensor of x's dtype. The check
# compares the values and the gradients with respect to x. Write it yourself: the check refuses the
# course's `decoding.apply_rope`.
# No course function may be called in your answer at all: while your function runs, the check refuses
# every function of the course's package `course_utils` (one that computes the same thing under
# another name too), and the grader also refuses a value one computed beforehand, such as a table
# built at the top of the cell.

# %% [markdown] tags=["lang-zh"] en_hash="2ba2138444"
# ### 练习 2：`apply_rope`
#
# 按交错布局写出 `my_apply_rope(x, positions)`：x 的形状为 $(B, H, L, d)$，$d$ 为偶数；positions 是形状为 $(L,)$ 的 int64 张量，即 $L$ 行各自的绝对位置（不一定从 0 开始，也不一定按顺序）。第 $i$ 对是特征 $2i$ 和 $2i + 1$；把它旋转 $\varphi = p\,\theta_i$，$\theta_i = 10000^{-2i/d}$：$(a, b) \mapsto (a\cos\varphi - b\sin\varphi,\; a\sin\varphi + b\cos\varphi)$，再把两个结果放回特征 $2i$ 和 $2i + 1$。请用 float64 计算角度（位置可以大到几千，float32 的角度在那里会丢失有效数字），返回的张量 dtype 与 x 相同。检查会比较数值和对 x 的梯度。请自己写出来：检查不接受课程自带的 `decoding.apply_rope`。答案里不能调用任何课程函数：你的函数运行期间，检查会拒绝课程包 `course_utils` 里的每一个函数（换了名字、碰巧算出同样结果的函数也一样）；评分程序也不接受事先由课程函数算好的值，比如在单元格顶部构造好的表。

# %% tags=["exercise"] exercise="07.apply_rope"
def my_apply_rope(x, positions):
    # lang: en
    """Rotary position embedding, interleaved layout.

    x: (B, H, L, d), d even. positions: (L,) int64, the position of each row.
    Returns a tensor like x: pair i (features 2i, 2i + 1) of row l rotated by
    φ = positions[l] · 10000^(−2i/d): (a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ).
    """
    # lang: zh
    """旋转位置嵌入，交错布局。

    x：(B, H, L, d)，d 为偶数。positions：(L,) int64，每一行的位置。
    返回与 x 形状相同的张量：第 l 行的第 i 对（特征 2i、2i + 1）旋转
    φ = positions[l] · 10000^(−2i/d)：(a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ)。
    """
    # lang: end
    ### BEGIN SOLUTION
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions.to(torch.float64)[:, None] * theta  # (L, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    # lang: en
    a, b = x[..., 0::2], x[..., 1::2]  # (B, H, L, d/2): the two features of every pair
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # back to 2i, 2i + 1
    # lang: zh
    a, b = x[..., 0::2], x[..., 1::2]  # (B, H, L, d/2)：每一对的两个特征
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # 放回 2i、2i + 1
    # lang: end
    ### END SOLUTION


# %%
from course_utils import check
check("07.apply_rope", my_apply_rope)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ### RoPE with a cache
#
# With a cache, each key is rotated **once, at its absolute position, before it is cached**: a
# cached key never moves again, and since the scores see only offsets, nothing about the earlier
# keys needs to change when a new token arrives. The new token's query and key are rotated at its
# own position $T$, the number of tokens already in the cache, read *before* appending. The classic
# bugs: rotating the new token at position 0 (the row's number in the one-token input, not its
# position in the sequence), or at $T + 1$ (the cache's length after appending). Each shifts its
# offset to every cached key. Here the 8-token prompt is prefilled, and token 7 is decoded at the
# right position and at the two wrong ones:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b3b4082e73"
# ### 带缓存的 RoPE
#
# 有缓存时，每个键都**在存进缓存之前、按自己的绝对位置旋转一次**，存进去之后再也不动；分数只看偏移，所以新词元到来时，之前的键什么都不用改。新词元的查询和键按新词元自己的位置 $T$ 旋转，$T$ 是缓存里已有的词元数，要在追加**之前**读出来。经典的错误有两个：按位置 0 旋转新词元（0 是它在单词元输入里的行号，不是它在序列里的位置），或者按 $T + 1$ 旋转（那是追加之后缓存的长度）。两种错误都会让新词元与每个缓存键之间的偏移出错。下面先预填充 8 个词元的提示，再分别按正确的位置和两个错误的位置解码词元 7：

# %%
def next_logits(start):
    # lang: en
    """Prefill the prompt, then decode token 7 as if it stood at position `start`."""
    # lang: zh
    """先预填充提示，再把词元 7 当作位于位置 `start` 来解码。"""
    # lang: end
    caches = [KVCache() for _ in model.blocks]
    with torch.no_grad():
        model(prompt, 0, caches)  # 0 … 7
        return model(torch.tensor([[7]]), start, caches)[0, -1]  # (V,)


with torch.no_grad():
    # lang: en
    expected = model(torch.cat([prompt, torch.tensor([[7]])], dim=1))[0, -1]  # recompute all 9 tokens
    # lang: zh
    expected = model(torch.cat([prompt, torch.tensor([[7]])], dim=1))[0, -1]  # 重新计算全部 9 个词元
    # lang: end
# lang: en
claim("decoded at its position 8 = T, the new token's logits are recomputation's",
      torch.allclose(next_logits(8), expected, rtol=0, atol=1e-12))
claim("at position 0 or 9 = T + 1 they are not",
      not torch.allclose(next_logits(0), expected, atol=1e-3) and not torch.allclose(next_logits(9), expected, atol=1e-3))
# lang: zh
claim("按它的位置 8 = T 解码，新词元的 logits 与重新计算的相同", torch.allclose(next_logits(8), expected, rtol=0, atol=1e-12))
claim("按位置 0 或 9 = T + 1 解码，就不相同了",
      not torch.allclose(next_logits(0), expected, atol=1e-3) and not torch.allclose(next_logits(9), expected, atol=1e-3))
# lang: end

# %% [markdown] tags=["lang-en"]
# ### Exercise 3: one cached decode step
#
# Write `my_cached_attention_step(q, k, v, k_cache, v_cache)`, the attention of one decode step
# with RoPE and a KV cache, one attention layer, $H$ heads (as many key/value heads as query heads
# here). q, k, v are the new token's projections, $(B, H, 1, d)$, **not** rotated yet; k_cache and
# v_cache $(B, H, T, d)$ hold the $T$ earlier tokens' keys (already rotated at their positions
# $0 \dots T-1$) and values; $T$ may be 0. Rotate q and k at the new token's position, append the
# rotated key and the value to the caches, attend with the one query over all $T + 1$ keys (no mask:
# the new token is the last position), and return `(output, new_k_cache, new_v_cache)`, of shapes
# $(B, H, 1, d)$, $(B, H, T + 1, d)$, $(B, H, T + 1, d)$, in the inputs' dtype. Rotate with your
# `my_apply_rope` from Exercise 2 (check it first: a mistake there shows up here too), and compute
# the attention yourself or with your `my_gqa_attention` from Exercise 1 (`causal=False`). Not with
# the functions Exercises 1 and 2 refuse, `F.scaled_dot_product_attention`, `decoding.gqa_attention`
# and `decoding.apply_rope`: the grader counts them against those exercises wherever they appear in
# your notebook. The check compares the three results and the gradients of each with respect to the
# five inputs.

# %% [markdown] tags=["lang-zh"] en_hash="d54e9de8c9"
# ### 练习 3：带缓存的一个解码步
#
# 写出 `my_cached_attention_step(q, k, v, k_cache, v_cache)`：一个注意力层在一个解码步中的计算，带 RoPE 和 KV 缓存，$H$ 个头（这里键/值头与查询头一样多）。q、k、v 是新词元的投影，形状为 $(B, H, 1, d)$，**还没有**旋转；k_cache 和 v_cache 的形状为 $(B, H, T, d)$，存着之前 $T$ 个词元的键（已经按它们的位置 $0 \dots T-1$ 旋转过）和值；$T$ 可以是 0。按新词元的位置旋转 q 和 k，把旋转后的键和值追加进缓存，用这一个查询在全部 $T + 1$ 个键上做注意力（不用掩码：新词元就是最后一个位置），返回 `(output, new_k_cache, new_v_cache)`，形状分别为 $(B, H, 1, d)$、$(B, H, T + 1, d)$、$(B, H, T + 1, d)$，dtype 与输入相同。旋转用你在练习 2 里写的 `my_apply_rope`（先让它通过检查：那里的错误在这里也会出现）；注意力自己算，或者用你在练习 1 里写的 `my_gqa_attention`（`causal=False`）。不要用练习 1 和练习 2 不接受的函数，即 `F.scaled_dot_product_attention`、`decoding.gqa_attention` 和 `decoding.apply_rope`：无论它们出现在笔记本的哪个地方，评分程序都会算作那两道练习违规。检查会比较三个结果，以及每个结果对五个输入的梯度。

# %% tags=["exercise"] exercise="07.cached_attention_step"
def my_cached_attention_step(q, k, v, k_cache, v_cache):
    # lang: en
    """One decode step of an attention layer with RoPE and a KV cache.

    q, k, v: (B, H, 1, d), the new token's projections, not rotated.
    k_cache, v_cache: (B, H, T, d), the T earlier tokens' keys (rotated at 0 … T − 1) and values.
    Returns (output (B, H, 1, d), new_k_cache (B, H, T + 1, d), new_v_cache (B, H, T + 1, d)).
    """
    # lang: zh
    """带 RoPE 和 KV 缓存的注意力层的一个解码步。

    q、k、v：(B, H, 1, d)，新词元的投影，尚未旋转。
    k_cache、v_cache：(B, H, T, d)，之前 T 个词元的键（已按 0 … T − 1 旋转）和值。
    返回 (output (B, H, 1, d), new_k_cache (B, H, T + 1, d), new_v_cache (B, H, T + 1, d))。
    """
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    position = torch.tensor([k_cache.shape[2]])  # T: read before appending
    # lang: zh
    position = torch.tensor([k_cache.shape[2]])  # T：在追加之前读出
    # lang: end
    q, k = my_apply_rope(q, position), my_apply_rope(k, position)
    keys = torch.cat([k_cache, k], dim=2)  # (B, H, T + 1, d)
    values = torch.cat([v_cache, v], dim=2)
    weights = (q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)  # (B, H, 1, T + 1)
    return weights @ values, keys, values
    ### END SOLUTION


# %%
from course_utils import check
check("07.cached_attention_step", my_cached_attention_step)

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## 4. A bounded cache: sliding-window attention
#
# Even with GQA the cache grows with every token. **Sliding-window attention** lets each query see
# only the last $W$ positions, itself included: key $j$ is kept for the query at position $p$ when
# $p - W < j \le p$. Restricting attention to nearby positions is older than large language models:
# the Image Transformer (Parmar et al., 2018) and Liu et al. (2018), who generated Wikipedia
# articles, attended within local blocks; the Sparse Transformer (Child et al., 2019) and Longformer
# (Beltagy et al., 2020, which adds a few positions that see everything) used local windows in
# longer models; Mistral-7B (Jiang et al., 2023) uses one in every layer, with $W = 4096$, together
# with the rolling buffer cache below.
#
# Mind the count: this course's $W$ is the number of keys a query keeps, itself included, which is
# also the number of slots of the rolling buffer. Sources differ by one here. The Mistral paper has
# the token at position $i$ attend to positions $i - W$ to $i$, $W + 1$ keys with itself, and its
# reference code's mask keeps as many while its rolling buffer holds $W$. In lesson 02's picture the
# course's window is the causal mask with everything further than $W - 1$ below the diagonal hidden,
# a band:

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="5f032d8f90"
# ## 4. 有上限的缓存：滑动窗口注意力
#
# 即使用了 GQA，缓存也随每个词元增长。**滑动窗口注意力**让每个查询只看最后 $W$ 个位置，包括它自己：对位置 $p$ 上的查询，当 $p - W < j \le p$ 时保留键 $j$。把注意力限制在邻近位置，比大语言模型出现得更早：Image Transformer（Parmar 等，2018）以及生成维基百科文章的 Liu 等（2018）都在局部的块内做注意力；Sparse Transformer（Child 等，2019）和 Longformer（Beltagy 等，2020，它另外让少数几个位置看到全部位置）在更长的模型里用上了局部窗口；Mistral-7B（Jiang 等，2023）在每一层都用了它，$W = 4096$，并配上下面要讲的滚动缓冲区。
#
# 注意计数方式：本课程的 $W$ 是一个查询保留的键的个数，包括它自己，也正是滚动缓冲区的槽位数。不同的资料在这里相差一：Mistral 论文让位置 $i$ 上的词元关注位置 $i - W$ 到 $i$，连同它自己共 $W + 1$ 个键；它的参考代码中，掩码保留的也是这么多，滚动缓冲区却只存 $W$ 个。用第 02 课的画法，本课程的窗口就是把因果掩码里离对角线超过 $W - 1$ 的部分也遮住，剩下一条带子：

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(8.5, 3.6), layout="constrained")
mask_picture(window_keep_mask(10), ax=left, title=message("l07.plot.causal"))
mask_picture(window_keep_mask(10, window=4), ax=right, title=message("l07.plot.window", w=4))
plt.show()
band = window_keep_mask(10, window=4)  # (L, L)
# lang: en
claim("with W = 4 each query keeps at most 4 keys: its own and the 3 before it",
      band.sum(-1).tolist() == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4])
# lang: zh
claim("W = 4 时，每个查询至多保留 4 个键：它自己和它前面的 3 个", band.sum(-1).tolist() == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4])
# lang: end

# %% [markdown] tags=["lang-en"]
# Information still travels further than $W$: a layer's position $p$ reads positions down to
# $p - W + 1$, whose outputs in the layer below read $W - 1$ further back, so $n$ layers reach
# $n \cdot (W - 1)$ positions back (measured below on a model of 2 layers with $W = 8$).
#
# The cache then never needs more than $W$ tokens. `KVCache(window=W)` is a **rolling buffer** of $W$
# slots: the token at position $p$ goes into slot $p \bmod W$, overwriting the token $W$ positions
# earlier, which no later query may see. The slots are not in position order (the explorer above
# shows it, with a window), and they need not be: a softmax does not care about the order of its keys,
# and RoPE rotated each key at its own position before it was cached. (`KVCache.update` hands them
# back in position order all the same, which keeps the mask of a chunk of several tokens easy to
# read; the last claim below attends over the slots as they lie.) A model with a window of 8
# generates 40 tokens through rolling caches and by recomputing with the banded mask:

# %% [markdown] tags=["lang-zh"] en_hash="37658deb90"
# 信息传递的距离仍然可以超过 $W$：某一层的位置 $p$ 最远读到位置 $p - W + 1$，而这些位置在下面一层的输出又往回读了 $W - 1$ 个位置，所以 $n$ 层能往回读 $n \cdot (W - 1)$ 个位置（下面在一个 2 层、$W = 8$ 的模型上实测）。
#
# 这样一来，缓存永远不需要超过 $W$ 个词元。`KVCache(window=W)` 是一个有 $W$ 个槽位的**滚动缓冲区**：位置 $p$ 上的词元放进槽位 $p \bmod W$，覆盖掉 $W$ 个位置之前的那个词元，而之后的查询本来也看不到它了。槽位里的顺序不是位置的顺序（在上面的探索器里加上窗口就能看到），也不必是：softmax 不在乎键的顺序，而 RoPE 已经在每个键存进缓存之前按它自己的位置旋转过了。（`KVCache.update` 返回时仍按位置排好顺序，这样一次处理多个词元时，掩码更容易看懂；下面最后一条结论直接在槽位原本的顺序上做注意力。）一个窗口为 8 的模型分别用滚动缓冲区和带状掩码下的重新计算生成 40 个词元：

# %%
windowed = decoding.make_tiny_decoder(seed=0, dtype=torch.float64, window=8)
tokens_w, logits_w = windowed.generate(prompt, 40, cache=True)
again_w, recomputed_w = windowed.generate(prompt, 40, cache=False)
rolling = [KVCache(window=8) for _ in windowed.blocks]
sizes = []
with torch.no_grad():
    for t, token in enumerate(torch.cat([prompt, tokens_w], dim=1)[0]):
        windowed(token.view(1, 1), t, rolling)
        sizes.append(rolling[0].nbytes)
sequence_w = torch.cat([prompt, tokens_w], dim=1)[:, :30]  # (1, 30)
with torch.no_grad():
    last = windowed(sequence_w)[0, -1]  # (V,)
    reach = []
    for p in range(30):
        changed = sequence_w.clone()
        changed[0, p] = (changed[0, p] + 1) % 64
        if not torch.allclose(windowed(changed)[0, -1], last, rtol=0, atol=1e-12):
            reach.append(p)
g = torch.Generator().manual_seed(3)
buffer = KVCache(window=8)
for _ in range(13):
    # lang: en
    buffer.update(*torch.randn(2, 1, 2, 1, 16, generator=g, dtype=torch.float64))  # one token's key and value
    # lang: zh
    buffer.update(*torch.randn(2, 1, 2, 1, 16, generator=g, dtype=torch.float64))  # 一个词元的键和值
    # lang: end
# lang: en
query = torch.randn(1, 4, 1, 16, generator=g, dtype=torch.float64)  # position 12's query, 4 heads
# lang: zh
query = torch.randn(1, 4, 1, 16, generator=g, dtype=torch.float64)  # 位置 12 的查询，4 个头
# lang: end
as_they_lie, _ = gqa_attention(query, buffer.keys, buffer.values)
by_position = buffer.slot_positions.argsort()
in_order, _ = gqa_attention(query, buffer.keys[:, :, by_position], buffer.values[:, :, by_position])
# lang: en
claim("the rolling caches give the tokens of recomputation, with logits within 1e-12",
      torch.equal(tokens_w, again_w) and torch.allclose(logits_w, recomputed_w, rtol=0, atol=1e-12))
claim(f"after {len(sizes)} tokens each rolling cache holds {rolling[0].length} of them, {sizes[-1]:,} bytes, "
      "the same as after 8", all(c.length == 8 for c in rolling) and sizes[7:] == [sizes[7]] * (len(sizes) - 7))
claim(f"with 2 layers and W = 8, the last of {len(sequence_w[0])} tokens depends on tokens {reach[0]} … {reach[-1]}: "
      "2 · (W − 1) = 14 positions back, and on none before", reach == list(range(15, 30)))
claim(f"after 13 tokens the 8 slots of a rolling cache hold positions {buffer.slot_positions.tolist()}; attending "
      "over them as they lie gives the attention in position order (to 1e-12)",
      torch.allclose(as_they_lie, in_order, rtol=0, atol=1e-12))
# lang: zh
claim("滚动缓冲区给出的词元与重新计算的相同，logits 相差不超过 1e-12",
      torch.equal(tokens_w, again_w) and torch.allclose(logits_w, recomputed_w, rtol=0, atol=1e-12))
claim(f"处理了 {len(sizes)} 个词元之后，每个滚动缓冲区里只有其中的 {rolling[0].length} 个，共 {sizes[-1]:,} 字节，"
      "与处理了 8 个词元时一样", all(c.length == 8 for c in rolling) and sizes[7:] == [sizes[7]] * (len(sizes) - 7))
claim(f"2 层、W = 8 时，{len(sequence_w[0])} 个词元中的最后一个取决于词元 {reach[0]} … {reach[-1]}："
      "往回 2 · (W − 1) = 14 个位置，更早的一个也不影响", reach == list(range(15, 30)))
claim(f"处理 13 个词元之后，滚动缓冲区的 8 个槽位依次存着位置 {buffer.slot_positions.tolist()}；"
      "直接按槽位原本的顺序做注意力，与按位置顺序做的结果相同（误差不超过 1e-12）",
      torch.allclose(as_they_lie, in_order, rtol=0, atol=1e-12))
# lang: end

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-en"]
# ## Summary
#
# - In a causal decoder the keys and values of past tokens never change, so generation keeps them in
#   a **KV cache**, $(B, H_{kv}, T, d)$ per layer: prefill runs the prompt at once, each decode step
#   computes one token and appends its key and value. It gives the tokens of full recomputation (and
#   its logits, in float64), on lesson 06's trained model too, and makes the next token cost $O(T)$
#   multiply-adds instead of $O(T^2)$: less time on a CPU, but on a GPU a step of a model as small
#   as this one costs its kernel launches either way (launch-bound), and the cache saves time once a
#   step is big enough to be bound by its work or its memory. A decode step then does only a few
#   multiply-adds per number it reads: it is memory-bound. When many sequences are decoded together at long contexts, their caches are
#   most of what a step reads: one Llama-2-7B sequence of 4,096 tokens has a 2.1 GB cache beside
#   13.5 GB of weights.
# - **Multi-query** and **grouped-query attention** let query heads share key/value heads; query head
#   $h$ reads key/value head $h \,//\, (H / H_{kv})$: copied, that is `repeat_interleave`, not
#   `repeat`; but the copies cost $H / H_{kv}$ times the cache at every step, and real kernels (and
#   `gqa_attention`) read each key/value head where it lies. They shrink the cache by $H / H_{kv}$,
#   which is why most recent large models use them (three of the four above). Mean-pooling a
#   trained model's key/value heads with no retraining costs accuracy (measured here); the GQA
#   paper wins it back with a little more training.
# - The **rotary position embedding** rotates queries and keys by their positions, so scores depend on
#   positions through their offsets only. Its two layouts (interleaved and half) are a permutation apart, and weights must be
#   permuted to move between them. With a cache, rotate each key once, at its absolute position $T$,
#   before caching it.
# - **Sliding-window attention** keeps only the last $W$ keys per query, yet $n$ layers still reach
#   $n \cdot (W - 1)$ positions back; a rolling buffer of $W$ slots bounds the cache however long the
#   generation runs.
#
# The next lesson looks inside `F.scaled_dot_product_attention` itself: FlashAttention computes the
# same attention without ever storing the $L \times L$ weights.

# %% [markdown] slideshow={"slide_type": "slide"} tags=["lang-zh"] en_hash="b585d89c17"
# ## 小结
#
# - 在因果解码器里，过去词元的键和值永远不会变，所以生成时把它们存进 **KV 缓存**，每层一个，形状为 $(B, H_{kv}, T, d)$：预填充一次处理整个提示，每个解码步只算一个词元并追加它的键和值。它给出的词元与完全重新计算的相同（在 float64 下 logits 也相同），在第 06 课训练好的模型上也是如此；生成下一个词元的乘加次数也从 $O(T^2)$ 降到 $O(T)$：在 CPU 上这意味着更少的时间；但在 GPU 上，像本课这么小的模型，一步的耗时无论如何都是核函数启动的开销（启动受限），要等一步大到受计算量或访存量限制，缓存才能省下时间。这样一来，解码步每读一个数只做寥寥几次乘加：它是访存受限的。许多条序列一起解码、上下文又很长时，每步读取量的大头是这些序列的缓存：一条 4,096 个词元的 Llama-2-7B 序列，缓存有 2.1 GB，而权重约有 13.5 GB。
# - **多查询注意力**和**分组查询注意力**让查询头共用键/值头；查询头 $h$ 读键/值头 $h \,//\, (H / H_{kv})$：若要复制，得用 `repeat_interleave`，而不是 `repeat`；但复制出的副本每一步都要多占、多读 $H / H_{kv}$ 倍于缓存的数据，所以真正的核函数（以及 `gqa_attention`）都直接在原处读取每个键/值头。它们把缓存缩小为原来的 $H_{kv} / H$，所以近来的大模型大多采用它们（上面四个模型中有三个）。把训练好的模型的键/值头直接平均合并、不再训练，会损失准确率（本课测过）；GQA 论文再稍加训练，把它追了回来。
# - **旋转位置嵌入**按位置旋转查询和键，于是分数与位置的关系只体现在偏移上。它的两种布局（交错和前后两半）只差一个特征排列，权重要在两者之间搬动，必须先重排。有缓存时，每个键在存进缓存之前按它的绝对位置 $T$ 旋转一次。
# - **滑动窗口注意力**让每个查询只保留最后 $W$ 个键，但 $n$ 层仍能往回读 $n \cdot (W - 1)$ 个位置；有 $W$ 个槽位的滚动缓冲区让缓存无论生成多长都有上限。
#
# 下一课深入 `F.scaled_dot_product_attention` 内部：FlashAttention 算出同样的注意力，却从不存下 $L \times L$ 的权重。
