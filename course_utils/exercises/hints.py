"""Two hints for every exercise, asked for one at a time: ``hint("07.gqa_attention")``.

The first is a nudge (where to look, what to think about), the second the idea (the method in words,
never the code). A learner asks for them: a failing check says they exist (grading.check), and each
call gives the next one. They are written from what the lesson shows before the exercise, in the
notebook's language, with the glossary's terms (tests/test_hints.py holds them to it).
"""

from .. import i18n, validation

#: exercise -> (the nudge, the idea), each {"en": ..., "zh": ...}
HINTS = {
    "00.split_heads": (
        {"en": "Write the shapes down: x is (B, L, H·D) and the result (B, H, L, D). Which axis has to be cut in "
               "two, and which two axes then change places?",
         "zh": "先把形状写下来：x 是 (B, L, H·D)，结果是 (B, H, L, D)。哪一维要一分为二？之后哪两维要交换位置？"},
        {"en": "Cut the last axis into (H, D) with a view, which keeps every position's features together: "
               "(B, L, H, D). Then swap the positions and the heads, axes 1 and 2.",
         "zh": "先用 view 把最后一维切成 (H, D)，这样每个位置的特征仍然在一起：(B, L, H, D)。再交换位置维和头维，也就是第 1、2 维。"},
    ),
    "00.merge_heads": (
        {"en": "It is split_heads backwards. Before the features of the heads can sit side by side, which axis "
               "must be next to D?",
         "zh": "这就是把 split_heads 倒过来做。要让各个头的特征并排放在一起，哪一维必须挨着 D？"},
        {"en": "Swap axes 1 and 2 back, (B, L, H, D), then merge the last two axes into H·D. The swap leaves the "
               "tensor not contiguous, so merge with reshape (a view cannot).",
         "zh": "先把第 1、2 维换回来，得到 (B, L, H, D)，再把最后两维合并成 H·D。交换之后张量不再连续，所以要用 reshape 合并"
               "（view 做不到）。"},
    ),
    "00.padding_mask": (
        {"en": "A position is real when it is smaller than its sequence's length. How do you compare every "
               "position with every length at once?",
         "zh": "位置小于所在序列的长度时，就是真实的词元。怎样一次把每个位置和每个长度都比较一遍？"},
        {"en": "Compare torch.arange(max_len), shape (L_k,), with the lengths as a column, (B, 1): broadcasting "
               "gives (B, L_k). Then add the two size-1 axes for the heads and the queries: (B, 1, 1, L_k).",
         "zh": "把 torch.arange(max_len)（形状 (L_k,)）和排成一列的长度 (B, 1) 比较：广播得到 (B, L_k)。再为头和查询"
               "插入两个大小为 1 的维度：(B, 1, 1, L_k)。"},
    ),
    "00.scores_einsum": (
        {"en": "Give every axis of q and k a letter. Which letters do q and k share, and which one disappears "
               "from the result?",
         "zh": "给 q 和 k 的每一维都起一个字母。q 和 k 共用哪些字母？哪一个字母不出现在结果里？"},
        {"en": "The inputs are (B, L, H, D): name them bqhd and bkhd, the same d in both so that einsum sums the "
               "dot product over it, and write the output's letters in the order you want: bhqk.",
         "zh": "输入是 (B, L, H, D)：分别记作 bqhd 和 bkhd，两边用同一个 d，einsum 才会沿它求点积；箭头后面按想要的顺序"
               "写出结果的字母：bhqk。"},
    ),
    "01.scaled_dot": (
        {"en": "Three steps: scores, weights, output. Which axes of query and key meet in the scores, and over "
               "which axis does each query's row of weights sum to 1?",
         "zh": "三步：分数、权重、输出。分数里查询和键的哪些维度相遇？每个查询的那一行权重沿哪一维加起来等于 1？"},
        {"en": "Scores are query @ key with the key's last two axes transposed, divided by √d_k (d_k is the "
               "query's last size); softmax over the keys, dim=-1; then weights @ value.",
         "zh": "分数是 query @ key（把键的最后两维转置），再除以 √d_k（d_k 是查询最后一维的大小）；沿键的方向做 softmax，"
               "dim=-1；最后是 weights @ value。"},
    ),
    "01.softmax": (
        {"en": "exp overflows for large scores. What can you subtract from every score of a row without changing "
               "the softmax?",
         "zh": "分数很大时 exp 会溢出。从一行的每个分数里减去什么，softmax 的结果不会变？"},
        {"en": "Subtract each row's largest score (amax over the last axis, keepdim=True): the largest becomes 0 "
               "and every exp is at most 1. Then divide the exps by their row's sum.",
         "zh": "减去每一行最大的分数（沿最后一维取 amax，keepdim=True）：最大的变成 0，每个 exp 都不超过 1。再用每个 exp "
               "除以它所在行的和。"},
    ),
    "01.additive_scores": (
        {"en": "Every query must meet every key before the tanh. Project both first: what shapes do the "
               "projected queries and keys have?",
         "zh": "每个查询都要先和每个键相加，再过 tanh。先把两边都投影：投影后的查询和键各是什么形状？"},
        {"en": "Project, (B, L_q, d_h) and (B, L_k, d_h); give the queries a size-1 key axis and the keys a "
               "size-1 query axis, so that adding them broadcasts to (B, L_q, L_k, d_h); tanh, then @ v.",
         "zh": "投影得到 (B, L_q, d_h) 和 (B, L_k, d_h)；给查询插入一个大小为 1 的键维度，给键插入一个大小为 1 的查询维度，"
               "相加时广播成 (B, L_q, L_k, d_h)；过 tanh，再 @ v。"},
    ),
    "02.causal_mask": (
        {"en": "Query i may see key j when j ≤ i. Can you compare a column of query positions with a row of key "
               "positions?",
         "zh": "查询 i 能看到键 j 的条件是 j ≤ i。能不能把一列查询位置和一行键位置直接比较？"},
        {"en": "torch.arange(L_q) as a column (L_q, 1) and torch.arange(L_k) as a row (1, L_k): the comparison "
               "key ≤ query broadcasts to the bool (L_q, L_k) mask, also when L_q ≠ L_k.",
         "zh": "把 torch.arange(L_q) 排成一列 (L_q, 1)，torch.arange(L_k) 排成一行 (1, L_k)：比较 键 ≤ 查询 会广播成"
               "布尔型的 (L_q, L_k) 掩码，L_q ≠ L_k 时也一样。"},
    ),
    "02.decoder_mask": (
        {"en": "This mask is two masks at once: which keys are real tokens (per sequence), and which keys are "
               "not in the future (the same for every sequence).",
         "zh": "这个掩码是两个掩码的合成：哪些键是真实的词元（每个序列各不相同），哪些键不在未来（每个序列都一样）。"},
        {"en": "Build the padding part as (B, L) and give it the shape (B, 1, 1, L); build the causal part as "
               "(L, L) with tril; & them: broadcasting gives (B, 1, L, L).",
         "zh": "把填充部分做成 (B, L)，再变成 (B, 1, 1, L)；用 tril 做出 (L, L) 的因果部分；两者做 &：广播得到 (B, 1, L, L)。"},
    ),
    "02.masked_softmax": (
        {"en": "Hidden keys must weigh exactly 0: what score gives exp(score) = 0? And what happens to a fully "
               "masked row then?",
         "zh": "被掩码遮住的键，权重必须恰好是 0：分数取什么值，exp(分数) 才等于 0？那么全遮蔽行又会怎样？"},
        {"en": "Fill the hidden scores with -inf before the softmax. A fully masked row would be -inf everywhere "
               "(0/0 = NaN): find those rows first (no key kept), give them any finite scores, and set their "
               "weights to 0 after the softmax.",
         "zh": "softmax 之前把被掩码遮住的分数填成 -inf。全遮蔽行会处处是 -inf（0/0 = NaN）：先找出这些行（一个键也没保留），"
               "把它们的分数换成任意有限值，softmax 之后再把它们的权重置为 0。"},
    ),
    "03.self_attention": (
        {"en": "Self-attention is lesson 01's attention where the queries, keys and values all come from x. "
               "What are q, k and v here?",
         "zh": "自注意力就是第 01 课的注意力，只是查询、键、值都来自 x。这里的 q、k、v 分别是什么？"},
        {"en": "q = x @ w_q, k = x @ w_k, v = x @ w_v; then the scaled dot-product attention of lesson 01: "
               "softmax(q kᵀ / √d_k) over the keys, times v; return the output and the weights.",
         "zh": "q = x @ w_q，k = x @ w_k，v = x @ w_v；然后就是第 01 课的缩放点积注意力：沿键的方向求 softmax(q kᵀ / √d_k)，"
               "再乘以 v；返回输出和权重。"},
    ),
    "03.cross_attention": (
        {"en": "Which side gives the queries, and which side gives the keys and values?",
         "zh": "查询来自哪一边？键和值又来自哪一边？"},
        {"en": "Queries from x (x @ w_q), keys and values from memory (memory @ w_k, memory @ w_v); the weights "
               "are (B, L_q, L_kv), one row per query, and the rest is the attention of self_attention.",
         "zh": "查询来自 x（x @ w_q），键和值来自 memory（memory @ w_k、memory @ w_v）；权重是 (B, L_q, L_kv)，每个查询一行，"
               "其余与自注意力完全相同。"},
    ),
    "03.alignment": (
        {"en": "argmax picks the largest weight of a row, hidden keys included. How can a hidden key never win? "
               "And what is left to do for a row with no key kept?",
         "zh": "argmax 会在一行里挑出最大的权重，被遮住的键也算在内。怎样让被遮住的键永远赢不了？一个键也没保留的行又该怎么办？"},
        {"en": "Fill the hidden entries with -inf (masked_fill with ~keep_mask) and take argmax over the keys; "
               "then put -1 in the rows where keep_mask has no True (any over the keys).",
         "zh": "把保留掩码为 False 的位置填成 -inf（用 ~keep_mask 做 masked_fill），再沿键的方向取 argmax；然后在 keep_mask 没有 True "
               "的行（沿键的方向用 any 判断）里填 -1。"},
    ),
    "04.fused_forward": (
        {"en": "Project once for all heads, then split the heads as lesson 00's split_heads did. Where do the "
               "heads go so that one batched matrix product serves them all?",
         "zh": "所有头共用一次投影，再像第 00 课的 split_heads 那样把头拆开。头应该放在哪一维上，一次批量矩阵乘法就能算完所有头？"},
        {"en": "query @ w_q viewed as (B, L_q, H, d_k) and transposed to (B, H, L_q, d_k), the same for keys and "
               "values; attention per head (scores divided by √d_k); merge the heads back, (B, L_q, H·d_v), then "
               "@ w_o. Return the weights of every head, (B, H, L_q, L_k).",
         "zh": "查询 query @ w_q 先 view 成 (B, L_q, H, d_k)，再转置成 (B, H, L_q, d_k)，键和值也一样；每个头各自做注意力（分数除以 √d_k）；"
               "再把头合并回去，(B, L_q, H·d_v)，然后 @ w_o。返回所有头的权重，(B, H, L_q, L_k)。"},
    ),
    "04.score_matrices": (
        {"en": "in_proj_weight stacks Q's, K's and V's (E, E) blocks. Within Q's block, which rows belong to head "
               "h?",
         "zh": "in_proj_weight 依次堆叠了 Q、K、V 三个 (E, E) 的块。在 Q 的块里，哪些行属于头 h？"},
        {"en": "Split the weight into its three blocks, view Q's and K's as (H, d, E): head h's d rows. A head's "
               "score matrix is its Q rows transposed times its K rows, (E, d) @ (d, E), divided by √d.",
         "zh": "把权重切成三块，把 Q 和 K 的块 view 成 (H, d, E)：头 h 的 d 行。一个头的分数矩阵是它的 Q 行转置后乘以它的 K 行，"
               "(E, d) @ (d, E)，再除以 √d。"},
    ),
    "04.attn_mask": (
        {"en": "The mask is the same for every query and every head of an item. In what order does "
               "nn.MultiheadAttention number the B·H slots?",
         "zh": "对同一条数据，每个查询、每个头的掩码都一样。nn.MultiheadAttention 是按什么顺序给 B·H 个槽位编号的？"},
        {"en": "Give key_padding_mask a head axis and a query axis, (B, 1, 1, L_k), expand it to (B, H, L_q, L_k) "
               "and reshape to (B·H, L_q, L_k): item b's heads are the slots b·H … b·H + H − 1.",
         "zh": "给 key_padding_mask 插入头维度和查询维度，(B, 1, 1, L_k)，expand 成 (B, H, L_q, L_k)，再 reshape 成 (B·H, L_q, L_k)："
               "第 b 条数据的各个头就是槽位 b·H … b·H + H − 1。"},
    ),
    "05.sampled_measure": (
        {"en": "Each query has its own U sampled keys. Gather them first: what shape do the sampled keys of every "
               "query have?",
         "zh": "每个查询都有自己采样的 U 个键。先把它们取出来：所有查询采样到的键合起来是什么形状？"},
        {"en": "key[:, :, index] gives (B, H, L_Q, U, D), each query's U keys; the dot product of each query with "
               "its own keys gives (B, H, L_Q, U); the measure is the max minus the mean over the last axis.",
         "zh": "用索引取 key[:, :, index]，得到 (B, H, L_Q, U, D)，即每个查询自己的 U 个键；每个查询和自己的键求点积得到 (B, H, L_Q, U)；"
               "稀疏性度量就是沿最后一维的最大值减去平均值。"},
    ),
    "05.top_u_attention": (
        {"en": "Start from the lazy answer for every query, then overwrite the rows of the u chosen ones. Which "
               "function gives the positions of the u largest measures?",
         "zh": "先给每个查询都填上惰性查询的答案，再改写被选中的 u 个查询所在的行。哪个函数能给出度量最大的 u 个位置？"},
        {"en": "topk(u) on the measure gives the positions; gather those queries, attend with them over all keys; "
               "fill every row with the mean of the values, and scatter the u outputs into their rows "
               "(out-of-place: the gradients must flow).",
         "zh": "对度量做 topk(u) 得到位置；用 gather 取出这些查询，对全部键做注意力；先把每一行都填成值的平均，再用 scatter "
               "把 u 个输出写回各自的行（不要原地修改：梯度要能流过）。"},
    ),
    "05.causal_prob_sparse": (
        {"en": "Two causal things: a lazy query i gets the mean of v_0 … v_i only, and a chosen query at position p "
               "sees keys 0 … p only. Which tensor operation gives all those running means at once?",
         "zh": "有两处因果：惰性查询 i 只取 v_0 … v_i 的平均，位置 p 上被选中的查询只看键 0 … p。哪个张量操作能一次算出所有这些累积均值？"},
        {"en": "The cumulative mean is value.cumsum over the positions divided by 1, 2, …, L. For the chosen "
               "queries, mask the keys after their position with -inf before the softmax, then scatter their "
               "outputs over the cumulative means.",
         "zh": "累积均值就是沿位置对 value 做 cumsum，再依次除以 1, 2, …, L。对被选中的查询，softmax 之前把它所在位置之后的键"
               "用 -inf 掩码遮住，再把它们的输出用 scatter 写到累积均值上。"},
    ),
    "06.sinusoidal_encoding": (
        {"en": "Every pair of features shares one frequency. Compute the angle of every (position, pair) first: "
               "what shape is it?",
         "zh": "每一对特征共用一个频率。先算出每个（位置，特征对）的角度：它是什么形状？"},
        {"en": "positions (L, 1) divided by 10000^(2i / E) for 2i = 0, 2, 4, … gives (L, ⌈E/2⌉) angles; their sines "
               "go to the even features, [:, 0::2], and their cosines to the odd ones, [:, 1::2], one fewer when E "
               "is odd. Compute in float64, return float32.",
         "zh": "把位置 (L, 1) 除以 10000^(2i / E)（2i = 0, 2, 4, …），得到 (L, ⌈E/2⌉) 个角度；正弦放在偶数特征 [:, 0::2]，"
               "余弦放在奇数特征 [:, 1::2]，E 为奇数时余弦少一个。用 float64 计算，返回 float32。"},
    ),
    "06.offset_rotation": (
        {"en": "Moving k positions on turns every pair of features by its own angle. What is that angle for pair "
               "i, and what 2 × 2 matrix turns a pair by it?",
         "zh": "向后移动 k 个位置，相当于把每一对特征各自旋转一个角度。第 i 对的角度是多少？把一对特征旋转这个角度的 2 × 2 矩阵是什么？"},
        {"en": "φ_i = k / 10000^(2i / E); each pair's block is [[cos φ_i, sin φ_i], [−sin φ_i, cos φ_i]]; "
               "put the E/2 blocks on the diagonal (torch.block_diag), in float64.",
         "zh": "φ_i = k / 10000^(2i / E)；每一对的块是 [[cos φ_i, sin φ_i], [−sin φ_i, cos φ_i]]；把这 E/2 个块放在对角线上"
               "（torch.block_diag），用 float64。"},
    ),
    "06.post_norm_decoder": (
        {"en": "A post-norm decoder layer is three sublayers, each added to its input and then normalised. Which "
               "three, in which order, and which masks does each take?",
         "zh": "后归一化的解码器层由三个子层组成，每个子层的输出加回它的输入，再做归一化。是哪三个？按什么顺序？各自用哪些掩码？"},
        {"en": "x = norm1(x + causal self-attention of x, hiding the target's padding); x = norm2(x + "
               "cross-attention from x to memory, hiding the source's padding); x = norm3(x + the feed-forward "
               "network of x). The padding masks say True at padding: turn them into keep masks.",
         "zh": "x = norm1(x + x 的因果自注意力，遮住目标序列的填充)；x = norm2(x + 从 x 到 memory 的交叉注意力，遮住源序列的填充)；"
               "x = norm3(x + x 的前馈网络)。填充掩码在填充处为 True：要先把它们转换成保留掩码。"},
    ),
    "07.gqa_attention": (
        {"en": "H query heads share H_kv key/value heads: query head h reads key/value head h // (H // H_kv). "
               "Can you give every query head its own copy of the right key/value head?",
         "zh": "H 个查询头共用 H_kv 个键/值头：查询头 h 读的是键/值头 h // (H // H_kv)。能不能给每个查询头配上一份对应键/值头的副本？"},
        {"en": "repeat_interleave(H // H_kv, dim=1) on key and value gives [k0, k0, k1, k1] (not repeat's "
               "[k0, k1, k0, k1]); then attention as usual. Causal here is aligned at the bottom right: query i "
               "sees keys 0 … L_k − L_q + i, tril with diagonal L_k − L_q.",
         "zh": "对 key 和 value 做 repeat_interleave(H // H_kv, dim=1)，得到 [k0, k0, k1, k1]（而不是 repeat 的 [k0, k1, k0, k1]）；"
               "然后照常做注意力。这里的因果是右下对齐的：查询 i 看到键 0 … L_k − L_q + i，即 diagonal 为 L_k − L_q 的 tril。"},
    ),
    "07.apply_rope": (
        {"en": "The features go in pairs (2i, 2i + 1). Take the first and the second feature of every pair as two "
               "tensors: what does each pair become?",
         "zh": "特征两两成对 (2i, 2i + 1)。把每一对的第一个和第二个特征分别取成两个张量：每一对会变成什么？"},
        {"en": "a = x[..., 0::2], b = x[..., 1::2]; φ = position × 10000^(−2i/d), shape (L, d/2); the new pair is "
               "(a cos φ − b sin φ, a sin φ + b cos φ), interleaved back: stack on a last axis and flatten it.",
         "zh": "a = x[..., 0::2]，b = x[..., 1::2]；φ = 位置 × 10000^(−2i/d)，形状 (L, d/2)；新的一对是 "
               "(a cos φ − b sin φ, a sin φ + b cos φ)，再交错放回去：在最后新加的一维上 stack，然后 flatten。"},
    ),
    "07.cached_attention_step": (
        {"en": "The new token sits at position T, the cache's length. What must be rotated, what goes into the "
               "cache, and what does the query attend to?",
         "zh": "新词元的位置是 T，也就是缓存的长度。哪些要旋转？什么要放进缓存？查询关注的是哪些键？"},
        {"en": "Rotate q and k at position T (read T before appending), append the rotated k and the plain v to "
               "the caches along the positions, then attend with q over all T + 1 keys: no mask is needed.",
         "zh": "在位置 T 上旋转 q 和 k（在追加之前读出 T），沿位置维度把旋转后的 k 和原样的 v 追加到缓存里，再用 q 对全部 T + 1 个"
               "键做注意力：不需要掩码。"},
    ),
    "08.merge_states": (
        {"en": "Both pieces must be brought to a common maximum before they can be added. Which one, and by what "
               "factor is each rescaled?",
         "zh": "两部分要先重新缩放到同一个最大值上才能相加。是哪个最大值？每一部分乘以什么系数？"},
        {"en": "m = max(m1, m2), a_i = exp(m_i − m); add ell and acc scaled by them. Where both are -inf, "
               "-inf − (-inf) is NaN: subtract 0 there instead of m (torch.where).",
         "zh": "m = max(m1, m2)，a_i = exp(m_i − m)；把 ell 和 acc 乘上各自的系数再相加。两部分都是 -inf 的地方，-inf − (-inf) "
               "是 NaN：在那里减去 0 而不是 m（用 torch.where）。"},
    ),
    "08.tiled_forward": (
        {"en": "For each block of queries, keep three running things over the blocks of keys: which ones, and "
               "what happens to them when a tile raises the running max?",
         "zh": "对每个查询块，沿着键块保留三个运行量：是哪三个？某个分块让运行最大值变大时，它们要怎么变？"},
        {"en": "Start m = -inf, ell = 0, acc = 0. Per tile: scores (scaled by 1/√d), m_new = max(m, row max), "
               "rescale ell and acc by exp(m − m_new), add exp(scores − m_new) and its product with the value "
               "block. At the end output = acc / ell and lse = m + log(ell).",
         "zh": "初始 m = -inf，ell = 0，acc = 0。每个分块：算分数（乘以 1/√d），m_new = max(m, 该行最大值)，用 exp(m − m_new) "
               "重新缩放 ell 和 acc，再加上 exp(分数 − m_new) 及它与值块的乘积。最后 output = acc / ell，lse = m + log(ell)。"},
    ),
    "08.causal_tiles": (
        {"en": "Compare a tile's first key with its block's last query. Which tiles are hidden whole, which are "
               "whole visible, and which need a mask?",
         "zh": "比较一个分块的第一个键和它所在块的最后一个查询。哪些分块被整个遮住？哪些完全可见？哪些需要掩码？"},
        {"en": "Skip (do not count) a tile whose first key comes after the block's last query; mask with -inf "
               "only a tile whose last key comes after the block's first query; the rest is the tiled forward. "
               "Count the tiles you compute.",
         "zh": "如果分块的第一个键在该块最后一个查询之后，就跳过它（不计数）；只有分块的最后一个键在该块第一个查询之后时，才用 -inf "
               "做掩码；其余与分块前向传播相同。数一数你计算了多少个分块。"},
    ),
    "08.tiled_backward": (
        {"en": "The forward's lse lets you recompute any tile's weights exactly. What else does a row need for the "
               "softmax's backward, without an (L_q, L_k) matrix?",
         "zh": "有了前向传播的 lse，就能精确地重算任何一个分块的权重。对 softmax 求反向时，每一行还需要什么，而且不能用 "
               "(L_q, L_k) 矩阵？"},
        {"en": "D = (d_output · output) summed over the features, per row. Per tile: P = exp(scaled scores − lse); "
               "d_value += Pᵀ d_output; dP = d_output valueᵀ; dS = P (dP − D); d_query += dS key / √d and "
               "d_key += dSᵀ query / √d. Skip the causal tiles the forward skipped, and count the rest.",
         "zh": "D = (d_output · output) 沿特征求和，每行一个。每个分块：P = exp(缩放后的分数 − lse)；d_value += Pᵀ d_output；"
               "dP = d_output valueᵀ；dS = P (dP − D)；查询的梯度 d_query += dS key / √d，d_key += dSᵀ query / √d。跳过前向传播跳过的因果分块，"
               "其余的计数。"},
    ),
    "09.softmax_kernel": (
        {"en": "One program owns one row: which row is it, and where does that row start in memory? Load the whole "
               "row in one block of BLOCK columns; what should a column past n hold so that it changes neither the "
               "max nor the sum?",
         "zh": "一个程序负责一行：它是哪一行，这一行在内存里从哪里开始？用一个 BLOCK 列的块一次读入整行；超出 n 的列该读成什么，"
               "才既不改变最大值、也不改变总和？"},
        {"en": "The program's number, tl.program_id(0), is its row; tl.arange over BLOCK gives the columns. Load the "
               "row masked by column < n with other=-inf. Subtract the row's tl.max before tl.exp (the max shift: no overflow at scores in the "
               "thousands), divide by the tl.sum, and store with the same mask.",
         "zh": "程序的编号 tl.program_id(0) 就是它的行号；在 BLOCK 上取 tl.arange 得到各列。以“列 < n”为掩码读入这一行，"
               "other=-inf。"
               "先减去这一行的 tl.max 再取 tl.exp（减去最大值：分数上千也不会溢出），除以 tl.sum，再用同一个掩码写回。"},
    ),
    "09.matmul_kernel": (
        {"en": "One program owns one (block_m, block_n) tile of the output. Which rows of a and which columns of b "
               "does that tile need, and how many blocks of block_k does the inner dimension K take, the last one "
               "included?",
         "zh": "一个程序负责输出的一个 (block_m, block_n) 分块。这个分块需要 a 的哪些行、b 的哪些列？内维 K 要分成多少个 "
               "block_k 的块，连最后一块也算上？"},
        {"en": "Make the rows from tl.program_id(0) and the columns from tl.program_id(1). Start a float32 "
               "accumulator of zeros before the loop; at each inner step load a (block_m, block_k) block of a and a "
               "(block_k, block_n) block of b, masking every index against its length with 0 for what lies outside, "
               "and add tl.dot of the two. Store the tile once, masked on rows and columns.",
         "zh": "行号由 tl.program_id(0) 得出，列号由 tl.program_id(1) 得出。循环之前先建一个全零的 float32 累加器；内维的每一步"
               "读入 a 的一个 (block_m, block_k) 块和 b 的一个 (block_k, block_n) 块，每个索引都和它的长度比较作为掩码，"
               "越界的位置读成 0，再把两块的 tl.dot 加到累加器上。最后把整个分块写回一次，行和列都加掩码。"},
    ),
    "09.flash_forward": (
        {"en": "Lesson 08's loop, one program per block of queries: which three running quantities does each query "
               "row carry from one key block to the next, and what must happen to two of them when the running max "
               "grows?",
         "zh": "还是第 08 课的循环，每个查询块一个程序：每个查询行从一个键块带到下一个键块的是哪三个量？运行最大值变大时，"
               "其中两个要怎样处理？"},
        {"en": "Keep m (start at -inf), the running sum (0) and a float32 accumulator (0) per row. Per key block: "
               "scores = tl.dot(q, tl.trans(k)) · scale, set to -inf past L_k; m_new = max(m, row max); "
               "alpha = exp(m − m_new); p = exp(scores − m_new); sum = sum · alpha + row sum of p; "
               "acc = acc · alpha + tl.dot(p, v). At the end store acc / sum and lse = m + log(sum), masked on the "
               "ragged rows.",
         "zh": "每行保存 m（初值 -inf）、累计和（初值 0）和一个 float32 累加器（初值 0）。每个键块：scores = "
               "tl.dot(q, tl.trans(k)) · scale，超出 L_k 的置为 -inf；m_new = max(m, 行最大值)；alpha = exp(m − m_new)；"
               "p = exp(scores − m_new)；累计和 = 累计和 · alpha + p 的行和；acc = acc · alpha + tl.dot(p, v)。"
               "最后写回 acc / 累计和与 lse = m + log(累计和)，不满的最后一块里的行要加掩码。"},
    ),
    "09.causal_forward": (
        {"en": "Under a causal mask, a query block never needs a key that comes after its own last query. So where "
               "can its loop over the key blocks stop, and which of the blocks it does load still needs a mask?",
         "zh": "在因果掩码下，一个查询块永远用不到排在它最后一个查询之后的键。那么它对键块的循环可以在哪里停下？读入的块里，"
               "哪些还需要掩码？"},
        {"en": "Stop the loop at min(start_q + block_q, L): the blocks above the diagonal are never loaded. Mask only "
               "where a key position exceeds its query position (the diagonal blocks), count the blocks you loaded "
               "and store that count in loaded for this program.",
         "zh": "循环到 min(start_q + block_q, L) 为止：对角线上方的块从不读入。只在键位置大于查询位置的地方加掩码"
               "（对角线上的块），数一数读入了几个块，把这个数写进本程序在 loaded 里的位置。"},
    ),
    "09.backward_dkdv": (
        {"en": "A program owns one block of keys and values and visits the query blocks. From the saved lse it can "
               "rebuild every weight it needs without a softmax; what per-row number, made from blocks it loads, "
               "does the softmax's backward still need?",
         "zh": "一个程序负责一个键块和值块，依次访问各个查询块。用保存的 lse，它不必再做 softmax 就能重建需要的每个权重；"
               "softmax 的反向传播还需要每行的哪个数？它可以由程序读入的哪些块算出来？"},
        {"en": "D = (d_output · output) summed over the features, per query row, from the two blocks. Per query block: "
               "P = exp(q kᵀ · scale − lse), zero where causal hides a key; dV += Pᵀ d_output; dP = d_output vᵀ; "
               "dS = P (dP − D); dK += dSᵀ q · scale. Accumulate both in float32 and store them once, masked on the "
               "ragged rows.",
         "zh": "D = (d_output · output) 沿特征求和，每个查询行一个。每个查询块：P = exp(q kᵀ · scale − lse)，因果遮住的键处为 0；"
               "dV += Pᵀ d_output；dP = d_output vᵀ；dS = P (dP − D)；dK += dSᵀ q · scale。两者都用 float32 累加，"
               "最后写回一次，不满的最后一块里的行要加掩码。"},
    ),
    "09.softmax_blocks": (
        {"en": "The row no longer fits in one block, and its max is known only after the last one. Which two "
               "running quantities can a program carry from block to block, and what must happen to the second "
               "when the first grows?",
         "zh": "一行已经装不进一个块了，而它的最大值要到最后一块才知道。程序可以从一块带到下一块的是哪两个运行中的量？"
               "第一个变大时，第二个要怎样处理？"},
        {"en": "First loop over the row's blocks: load each masked by column < n with other=-inf, m_new = max(m, the "
               "block's tl.max), ell = ell · exp(m − m_new) + the block's sum of exp(x − m_new), then move m up to "
               "m_new. "
               "Second loop: load the same blocks again and store exp(x − m) / ell with the same mask.",
         "zh": "第一个循环遍历这一行的各块：以“列 < n”为掩码读入，other=-inf；m_new = max(m, 这一块的 tl.max)；"
               "ell = ell · exp(m − m_new) + 这一块 exp(x − m_new) 的和；再把 m 更新为 m_new。第二个循环再读一遍同样的块，"
               "用同一个掩码写回 exp(x − m) / ell。"},
    ),
    "09.backward_dq": (
        {"en": "This time a program owns one block of queries and keeps it for the whole loop. Which key blocks does "
               "it visit (causal or not), and which rows of dS does it need to rebuild on each of them?",
         "zh": "这一次一个程序负责一个查询块，整个循环都持有它。它要访问哪些键块（因果与否有什么不同）？"
               "在每个键块上，它要重建 dS 的哪些行？"},
        {"en": "Load q, d_output and output once; D = (d_output · output) summed over the features. Loop over the "
               "key blocks up to min(start_q + block_q, L_k) when causal, else L_k: P = exp(q kᵀ · scale − lse), "
               "zero where causal hides a key or past L_k; dP = d_output vᵀ; dS = P (dP − D); dQ += dS k. Store "
               "dQ · scale once, masked.",
         "zh": "只读入一次 q、d_output 和 output；D = (d_output · output) 沿特征求和。遍历键块，因果时到 "
               "min(start_q + block_q, L_k) 为止，否则到 L_k：P = exp(q kᵀ · scale − lse)，因果遮住的键和超出 L_k "
               "的位置为 0；dP = d_output vᵀ；dS = P (dP − D)；dQ += dS k。最后把 dQ · scale 写回一次，加掩码。"},
    ),
    "09.flash_function": (
        {"en": "What does backward need that only forward has? And autograd matches what backward returns to "
               "forward's arguments: how many values must it return, in which order?",
         "zh": "backward 需要哪些只有 forward 才有的东西？另外，autograd 是把 backward 的返回值和 forward 的参数一一对应起来的："
               "它要返回几个值，按什么顺序？"},
        {"en": "In forward, run causal_forward or flash_forward by causal; keep query, key, value, output and lse "
               "with ctx.save_for_backward and the block sizes and causal on ctx. In backward, read them back, make "
               "d_output contiguous, run backward_dkdv and backward_dq with the same causal, and return one value per "
               "argument of forward: the three gradients, then None for each number and flag.",
         "zh": "forward 里按 causal 调用 causal_forward 或 flash_forward；用 ctx.save_for_backward 保存查询、键、值（query、key、value）、"
               "output 和 lse，把块大小和 causal 存到 ctx 上。backward 里把它们取回，把 d_output 变成连续的，用同一个 causal "
               "调用 backward_dkdv 和 backward_dq，并为 forward 的每个参数返回一个值：先是三个梯度，再给每个数和标志返回 None。"},
    ),
    "09.flash_forward_half": (
        {"en": "The inputs are float16 or bfloat16, and tl.dot multiplies them exactly. Which numbers of the "
               "kernel are sums over a whole row, and how many bits does each half dtype keep (or how large a number "
               "can float16 hold)?",
         "zh": "输入是 float16 或 bfloat16，tl.dot 对它们的乘法是精确的。核函数里哪些数是对整整一行求的和？"
               "每种半精度类型能保留几位（float16 最大又能表示多大的数）？"},
        {"en": "Exercise 4's kernel with q, k and v loaded in their own dtype: tl.dot of two half blocks gives "
               "float32 scores; m, ell and the accumulator are made float32 (tl.zeros(..., tl.float32)) and stay so; "
               "P is rounded to v's dtype only for its product with v. Allocate the output with dtype=query.dtype "
               "(the store rounds once) and lse with dtype=torch.float32.",
         "zh": "练习 4 的核函数，q、k、v 按各自的数据类型读入：两个半精度块的 tl.dot 得到 float32 的分数；m、ell 和累加器"
               "都建成 float32（tl.zeros(..., tl.float32)）并一直保持；P 只在与 v 相乘时舍入到 v 的数据类型。"
               "输出按查询的数据类型分配，dtype=query.dtype（写回时只舍入一次），lse 按 dtype=torch.float32 分配。"},
    ),
    # lesson 10
    "10.causal_block": (
        {"en": "Follow the block in order: which sub-layer reads the normalised x, and what is added to x itself? "
               "Where do the heads split, and what must the mask let each position see?",
         "zh": "按块的顺序来：哪个子层读归一化后的 x？加到 x 本身上的又是什么？头在哪里切分？掩码要让每个位置看到什么？"},
        {"en": "h = block.norm1(x); q, k, v = mha.q_proj(h), ... each .view(B, L, H, d).transpose(1, 2); attention "
               "with the keep mask torch.ones(L, L, dtype=torch.bool).tril() (lesson 01's scaled_dot_product_attention "
               "takes it as keep_mask); merge with .transpose(1, 2).reshape(B, L, E); x = x + mha.out_proj(...); "
               "then the second residual: the feed-forward network of block.norm2 of that x, added to it.",
         "zh": "h = block.norm1(x)；q, k, v = mha.q_proj(h) 等，各自 .view(B, L, H, d).transpose(1, 2)；用保留掩码 "
               "torch.ones(L, L, dtype=torch.bool).tril() 做注意力（第 01 课的 scaled_dot_product_attention 通过 keep_mask "
               "接收它）；转置回来再合并各头：.transpose(1, 2).reshape(B, L, E)；x = x + mha.out_proj(...)；"
               "最后是第二个残差：把 block.norm2 作用于这个 x 后送进前馈网络，再加回 x。"},
    ),
    "10.lm_loss": (
        {"en": "Which logits predict which token? Line up logits[:, t] with the token it must predict, and decide "
               "which of those targets count in the mean.",
         "zh": "哪个位置的 logits 预测哪个词元？把 logits[:, t] 和它要预测的词元对齐，再想清楚哪些目标要计入平均。"},
        {"en": "predictions = logits[:, :-1].reshape(-1, V), targets = tokens[:, 1:].reshape(-1); "
               "F.cross_entropy(predictions, targets, ignore_index=pad_id) (with pad_id None, no ignore_index): "
               "it takes the log-softmax itself and averages over the targets that are not pad_id.",
         "zh": "predictions = logits[:, :-1].reshape(-1, V)，targets = tokens[:, 1:].reshape(-1)；"
               "F.cross_entropy(predictions, targets, ignore_index=pad_id)（pad_id 为 None 时不传 ignore_index）："
               "它自己会做 log-softmax，并对不等于 pad_id 的目标词元求平均。"},
    ),
    "10.sample_next": (
        {"en": "Three steps: which logits keep a chance, how the temperature reshapes them, and where the randomness "
               "comes from. What does temperature 0 mean, and why can it not be divided by?",
         "zh": "分三步：哪些 logits 还有机会，温度怎样改变它们，随机性从哪里来。温度为 0 是什么意思？为什么不能用它做除数？"},
        {"en": "With top_k: kth = logits.topk(top_k, dim=-1).values[:, -1:], logits = logits.masked_fill(logits < kth, "
               "float('-inf')). Temperature 0: the argmax of the logits along the last axis. Else p = (logits / temperature).softmax(-1) "
               "and torch.multinomial(p, 1, generator=generator)[:, 0].",
         "zh": "有 top_k 时，用掩码把小于第 k 大值的 logit 填成 -inf：kth = logits.topk(top_k, dim=-1).values[:, -1:]，logits = logits.masked_fill(logits < kth, "
               "float('-inf'))。温度为 0：取 logits 沿最后一维的 argmax。否则 p = (logits / temperature).softmax(-1)，"
               "再 torch.multinomial(p, 1, generator=generator)[:, 0]。"},
    ),
    "10.generate_cached": (
        {"en": "The caches remember the window's keys and values: what must go through the model once, what at each "
               "step, and what happens when the next token no longer fits in the context?",
         "zh": "缓存记住了窗口内的键和值：哪些只需送进模型一次？每一步又送什么？下一个词元在上下文里放不下时怎么办？"},
        {"en": "One KVCache per block. Prefill: the prompt's window (from gpt.window_start(P, C, C // 2)) goes through "
               "model(..., start=0, caches=...) once, and its last logits give the first token. Each step: append the "
               "argmax; if gpt.window_start of the new length is the window's start still, feed that one token at its "
               "position inside the window (its index minus the window's start); if it moved, make fresh caches and "
               "prefill the new window's tokens.",
         "zh": "每个块一个 KVCache。预填充：提示的窗口（起点由 gpt.window_start(P, C, C // 2) 给出）经 "
               "model(..., start=0, caches=...) 送进模型一次，它最后一个位置的 logits 给出第一个词元。之后每一步："
               "把 argmax 得到的词元追加到文本后面；如果新长度下 gpt.window_start 的结果仍是窗口原来的起点，就只把这一个"
               "词元按它在窗口中的位置（它的索引减去窗口起点）送进模型；如果起点变了，就新建缓存，把新窗口里的词元预填充进去。"},
    ),
}

#: How many hints of each exercise this kernel has given.
HINTS_GIVEN = {}


def hint(exercise, stage=None):
    """Print the next hint for `exercise` (an id such as "07.gqa_attention"): the first call a nudge,
    the second the idea; `stage` (1 or 2) shows that one. Returns None."""
    validation.one_of("hint", "exercise", exercise, tuple(HINTS))
    if stage is not None and (isinstance(stage, bool) or stage not in (1, 2)):
        validation.fail("hint", "stage", validation.describe(stage), {"en": "1, 2 or None", "zh": "1、2 或 None"})
    lang = i18n.language()
    number = stage or min(HINTS_GIVEN.get(exercise, 0) + 1, len(HINTS[exercise]))
    HINTS_GIVEN[exercise] = max(HINTS_GIVEN.get(exercise, 0), number)
    lines = [i18n.text(lang, "hint.text", exercise=exercise, number=number, total=len(HINTS[exercise]),
                       text=HINTS[exercise][number - 1][lang])]
    lines.append(i18n.text(lang, "hint.next" if number < len(HINTS[exercise]) else "hint.last", exercise=exercise))
    print("\n".join(lines))
