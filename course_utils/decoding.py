"""Attention at inference time: the KV cache, grouped-query attention, rotary positions and
sliding windows, written to be read and checked against PyTorch's own (tests/test_decoding.py).

A causal decoder generates one token at a time. The keys and values of a past token depend on
that token and the tokens before it only, never on later ones, so they never change once computed:
a **KV cache** keeps them, laid out (B, H_kv, T, d), and each new token computes its own query,
key and value, appends its key and value to the cache and attends over all T + 1 of them.
Generation then costs O(T) per new token instead of recomputing the whole prefix, O(T²).

- ``repeat_kv`` and ``gqa_attention``: **grouped-query attention** (GQA). H query heads share
  H_kv key/value heads, H_kv dividing H; query head h reads key/value head h // (H / H_kv). Copying
  the key/value heads to H (``repeat_kv``) must repeat each one next to itself
  (``repeat_interleave``), never tile them (``repeat``, which pairs the wrong heads); but a copy
  costs H/H_kv times the cache at every step, so ``gqa_attention`` makes none: it stacks the
  queries of each group along the length axis and reads each key/value head once. H_kv = 1 is
  multi-query attention (MQA), H_kv = H multi-head (MHA). The same as
  ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (torch ≥ 2.5).
- ``rope_angles``, ``apply_rope``, ``rope_permutation``: **rotary position embedding** (RoPE).
  Rotate every pair of a query's or key's features by its position times the pair's frequency;
  then q·k depends on the two positions through their offset only. Two layouts are in use: pairs of
  neighbouring features (2i, 2i + 1) ("interleaved": the RoFormer paper, GPT-J, Meta's original
  Llama code) and pairs (i, i + d/2) ("half": GPT-NeoX, Hugging Face's Llama). They are the same
  rotation with the features permuted (``rope_permutation``), so weights trained for one layout
  give other scores in the other unless their rows are permuted.
- ``window_keep_mask``: **sliding-window attention**: query i sees keys i − W + 1 … i (W keys, itself
  included), lesson 02's causal mask with a band.
- ``KVCache``: the cache, growing, or with ``window=W`` a rolling buffer of W slots (slot = position
  mod W) whose memory stays bounded however long the generation runs.
- ``TinyDecoder``: a small decoder-only language model with all of the above (GQA, RoPE, optional
  window), whose ``generate`` runs greedy decoding with the cache or by recomputing, for the
  lesson's checks and ``benchmarks/bench_decoding.py``.
- ``CachedReverser``: greedy decoding of lesson 06's trained encoder–decoder (``seq2seq.Reverser``)
  with a KV cache in each decoder layer (self-attention: growing; cross-attention: the memory's
  keys and values, computed once). It gives ``seq2seq.greedy_decode``'s tokens and, in float64,
  its logits.
- ``cache_bytes`` and ``PUBLISHED``: the cache's size per token for published model shapes.

Layouts: heads first, (B, H, L, d), as in lesson 04's fused attention and in PyTorch's
``scaled_dot_product_attention``. Masks are keep masks: True where a query may attend to a key.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from . import validation as check

LAYOUTS = ("interleaved", "half")

# ----------------------------------------------------------------------------- argument checks


def _heads(function, argument, value, layout):
    """A floating (B, H, L, d) tensor."""
    check.tensor(function, argument, value, min_ndim=4, layout=layout)
    if value.ndim != 4:
        check.fail(function, argument, check.describe(value),
                   {"en": f"a floating-point tensor of shape {layout}", "zh": f"形状为 {layout} 的浮点张量"})
    check.has_values(function, argument, value)
    return value


def _layout(function, layout):
    return check.one_of(function, "layout", layout, LAYOUTS)


def _window(function, window):
    """None, or a number of positions W ≥ 1 that int64 holds (positions are compared with p − W)."""
    if window is not None:
        check.whole_number(function, "window", window, 1, check.INT64_MAX)
    return window


def _some_positions(function, argument, tokens):
    """(B, L) tokens with L ≥ 1: a step with no token has nothing to attend from."""
    if not tokens.shape[-1]:
        check.fail(function, argument, check.describe(tokens),
                   {"en": "at least one token on the last axis", "zh": "最后一维至少有一个词元"})
    return tokens


def _positions(function, positions, length, reference):
    """An int64 (L,) tensor of positions ≥ 0, L = `length`, on `reference`'s device."""
    ok = isinstance(positions, torch.Tensor) and positions.dtype in (torch.int64, torch.int32) \
        and positions.ndim == 1 and positions.shape[0] == length
    if not ok:
        check.fail(function, "positions", check.describe(positions),
                   {"en": f"an int64 tensor of shape (L,) = ({length},): each position's index in the sequence",
                    "zh": f"形状为 (L,) = ({length},) 的 int64 张量：每个位置在序列中的序号"})
    check.dense(function, "positions", positions)
    check.has_values(function, "positions", positions)
    if positions.numel() and int(positions.min()) < 0:
        check.fail(function, "positions", check.describe(positions),
                   {"en": "positions ≥ 0", "zh": "≥ 0 的位置"})
    check.mask_on_device_of(function, "positions", positions, reference, "x")
    return positions


# ----------------------------------------------------------------------------- grouped-query attention


def repeat_kv(x, groups):
    """(B, H_kv, T, d) -> (B, H_kv·groups, T, d): each key/value head repeated `groups` times in
    place, so that heads h·groups … (h+1)·groups − 1 all read key/value head h.

    ``x.repeat_interleave(groups, dim=1)`` gives [k0, k0, k1, k1]; ``x.repeat(1, groups, 1, 1)`` gives
    [k0, k1, k0, k1], which hands query head 1 the key/value head of query head 2's group."""
    function = "repeat_kv"
    _heads(function, "x", x, "(B, H_kv, T, d)")
    check.positive_int(function, "groups", groups)
    check.fits_in_memory(function, "groups", groups, x.numel() * groups, x.element_size())
    return x.repeat_interleave(groups, dim=1)  # (B, H_kv·groups, T, d)


def gqa_attention(query, key, value, causal=False, keep_mask=None, window=None):
    """Scaled dot-product attention with H query heads over H_kv key/value heads.

    Args:
        query: (B, H, L_q, d).
        key, value: (B, H_kv, L_k, d), H_kv dividing H; query head h reads key/value head
            h // (H / H_kv). H_kv = H is multi-head attention, H_kv = 1 multi-query attention.
        causal: the queries are the last L_q positions of the L_k keys (a decode step: the cache
            holds the first L_k − L_q), so query i, at position L_k − L_q + i, sees keys 0 … that
            position. (``F.scaled_dot_product_attention(is_causal=True)`` aligns the other way, query
            i sees keys 0 … i, which agrees only when L_q = L_k; lesson 02's two alignments.)
        keep_mask: optional bool, broadcastable to (B, H, L_q, L_k), True where a query may attend.
        window: optional W ≥ 1 (with causal): query at position p sees keys p − W + 1 … p only.

    Returns ``(output (B, H, L_q, d), weights (B, H, L_q, L_k))``. A query that may attend to no key
    gets zero weights and a zero output, never NaN.
    """
    function = "gqa_attention"
    _heads(function, "query", query, "(B, H, L_q, d)")
    _heads(function, "key", key, "(B, H_kv, L_k, d)")
    _heads(function, "value", value, "(B, H_kv, L_k, d)")
    B, H, L_q, d = query.shape
    for argument, tensor in (("key", key), ("value", value)):
        check.alike(function, argument, tensor, query, "query")
        if tensor.shape[0] != B or tensor.shape[-1] != d:
            check.fail(function, argument, check.describe(tensor),
                       {"en": f"shape (B, H_kv, L_k, d) with B = {B} and d = {d}, as in query",
                        "zh": f"形状 (B, H_kv, L_k, d)，其中 B = {B}、d = {d}，与 query 一致"})
    H_kv, L_k = key.shape[1], key.shape[2]
    if H_kv == 0 or H % H_kv:
        check.fail(function, "key", check.describe(key),
                   {"en": f"a number of key/value heads H_kv that divides query's H = {H}",
                    "zh": f"键/值头数 H_kv 能整除 query 的头数 H = {H}"})
    if tuple(value.shape[1:3]) != (H_kv, L_k):
        check.fail(function, "value", check.describe(value),
                   {"en": f"one value per key: (H_kv, L_k) = {(H_kv, L_k)} on axes 1 and 2",
                    "zh": f"每个键对应一个值：第 1、2 维为 (H_kv, L_k) = {(H_kv, L_k)}"})
    check.flag(function, "causal", causal)
    _window(function, window)
    if window is not None and not causal:
        check.fail(function, "window", check.describe(window),
                   {"en": "None unless causal=True (a window counts back from each query's position)",
                    "zh": "None，除非 causal=True（窗口是从每个查询的位置往回数的）"})
    if causal and L_q > L_k:
        check.fail(function, "query", check.describe(query),
                   {"en": f"at most L_k = {L_k} queries when causal: the queries are the last positions of the keys",
                    "zh": f"causal 时查询数不超过 L_k = {L_k}：查询是这些键的最后几个位置"})
    keep = None
    if causal:  # (L_q, L_k); L_q = 0 (no query at all) gives an empty mask and an empty output
        keep = _window_keep(L_q, L_k, window, query.device)
    if keep_mask is not None:
        check.keep_mask(function, keep_mask, (B, H, L_q, L_k), "(B, H, L_q, L_k)", query, "query")
        keep = keep_mask if keep is None else keep & keep_mask
    check.attention_scores_fit(function, query, key, (B, H))  # the (B, H, L_q, L_k) weights it returns
    groups = H // H_kv
    # Query head h = g·groups + r reads key/value head g. Rather than copying each key/value head
    # `groups` times (repeat_kv: H/H_kv times the cache's bytes, written and read again at every
    # step), stack the queries of a group along the length axis, as the real kernels do: every
    # key/value head is read as it is.
    q = query.reshape(B, H_kv, groups * L_q, d)  # (B, H_kv, G·L_q, d): a view when query is contiguous
    scores = (q @ key.transpose(-2, -1) / math.sqrt(d)).view(B, H, L_q, L_k)  # (B, H, L_q, L_k)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = scores.softmax(dim=-1)
    if keep is not None:
        weights = weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)  # a row with no key: zeros, not NaN
    output = weights.view(B, H_kv, groups * L_q, L_k) @ value  # (B, H_kv, G·L_q, d)
    return output.view(B, H, L_q, d), weights  # (B, H, L_q, d), (B, H, L_q, L_k)


def window_keep_mask(length_q, length_k=None, window=None, device=None):
    """(L_q, L_k) bool keep mask for the last L_q of L_k positions (bottom-right aligned): query i,
    at position p = L_k − L_q + i, keeps keys j with p − W < j ≤ p. Without `window` it is the
    causal mask; with W it is a band of W keys (the query's own included)."""
    function = "window_keep_mask"
    check.positive_int(function, "length_q", length_q)
    length_k = length_q if length_k is None else check.positive_int(function, "length_k", length_k)
    if length_q > length_k:
        check.fail(function, "length_q", check.describe(length_q),
                   {"en": f"at most length_k = {length_k}: the queries are the last positions of the keys",
                    "zh": f"不超过 length_k = {length_k}：查询是这些键的最后几个位置"})
    _window(function, window)
    device = check.device(function, "device", device)
    check.fits_in_memory(function, "length_k", length_k, length_q * length_k, 1)
    return _window_keep(length_q, length_k, window, device)


def _window_keep(length_q, length_k, window, device):
    """window_keep_mask without its checks (any L_q ≥ 0), a band cut with tril_ and triu_ in place:
    one byte per entry, no table of positions. Query i (position p = L_k − L_q + i) keeps key j
    when j − i ≤ L_k − L_q, and with W also when j − i > L_k − L_q − W (clamped to the matrix's
    edge: a window wider than the keys is none)."""
    offset = length_k - length_q  # query i sits at position i + offset
    keep = torch.ones(length_q, length_k, dtype=torch.bool, device=device).tril_(offset)
    if window is not None:
        keep.triu_(max(-length_q, offset - window + 1))
    return keep  # (L_q, L_k)


def pool_kv_heads(weight, num_heads, kv_heads, bias=None):
    """Turn an MHA key or value projection into a GQA one by mean-pooling its heads, the GQA paper's
    starting point (Ainslie et al., 2023): the (H·d, E) weight (``nn.Linear`` layout, head h's rows
    h·d … (h+1)·d − 1) -> (H_kv·d, E), group g the mean of heads g·G … (g+1)·G − 1, G = H / H_kv.
    Returns the pooled weight, or ``(weight, bias)`` when a (H·d,) bias is given."""
    function = "pool_kv_heads"
    check.tensor(function, "weight", weight, min_ndim=2, layout="(H·d, E)")
    check.positive_int(function, "num_heads", num_heads)
    check.positive_int(function, "kv_heads", kv_heads)
    if weight.ndim != 2 or weight.shape[0] % num_heads or not weight.numel():
        check.fail(function, "weight", check.describe(weight),
                   {"en": f"shape (H·d, E) with H = num_heads = {num_heads} dividing its first axis",
                    "zh": f"形状 (H·d, E)，其第 0 维能被 H = num_heads = {num_heads} 整除"})
    _kv_heads_divide(function, "num_heads", num_heads, kv_heads)
    d, G = weight.shape[0] // num_heads, num_heads // kv_heads
    pooled = weight.reshape(kv_heads, G, d, -1).mean(dim=1).reshape(kv_heads * d, -1)  # (H_kv·d, E)
    if bias is None:
        return pooled
    check.tensor(function, "bias", bias, min_ndim=1, layout="(H·d,)")
    if tuple(bias.shape) != (weight.shape[0],):
        check.fail(function, "bias", check.describe(bias),
                   {"en": f"shape (H·d,) = ({weight.shape[0]},)", "zh": f"形状 (H·d,) = ({weight.shape[0]},)"})
    return pooled, bias.reshape(kv_heads, G, d).mean(dim=1).reshape(-1)


def pooled_copy(model, kv_heads=1):
    """A copy of a trained ``seq2seq.Reverser`` whose decoder self-attentions use `kv_heads` key/value
    heads, each the mean of its group (``pool_kv_heads``), with no retraining. Stored the MHA way:
    every query head of a group gets its group's pooled projection (grouped-query attention is
    multi-head attention whose key/value projections are tied within each group)."""
    import copy

    from . import seq2seq

    check.module("pooled_copy", "model", model, seq2seq.Reverser)
    check.positive_int("pooled_copy", "kv_heads", kv_heads)
    pooled = copy.deepcopy(model)
    with torch.no_grad():
        for layer in pooled.decoder:
            attention = layer.self_attn
            H = attention.num_heads
            if H % kv_heads:
                check.fail("pooled_copy", "kv_heads", check.describe(kv_heads),
                           {"en": f"a divisor of the model's {H} heads", "zh": f"模型头数 {H} 的约数"})
            G = H // kv_heads
            for projection in (attention.k_proj, attention.v_proj):
                weight, bias = pool_kv_heads(projection.weight, H, kv_heads, projection.bias)
                d = weight.shape[0] // kv_heads
                projection.weight.copy_(weight.reshape(kv_heads, 1, d, -1).expand(-1, G, -1, -1).reshape(H * d, -1))
                projection.bias.copy_(bias.reshape(kv_heads, 1, d).expand(-1, G, -1).reshape(-1))
    return pooled.eval()


# ----------------------------------------------------------------------------- rotary positions


def rope_angles(positions, head_dim, base=10000.0):
    """(L, d/2) float64 angles: position p times θ_i = base^(−2i/d) for every pair i (pair 0 turns
    1 radian per position, the last about 1/base): the frequencies of lesson 06's sinusoidal table."""
    function = "rope_angles"
    check.tensor(function, "positions", positions, min_ndim=1, layout="(L,)", floating=False)
    if positions.ndim != 1 or positions.is_floating_point() or positions.dtype == torch.bool:
        check.fail(function, "positions", check.describe(positions),
                   {"en": "an int64 tensor of shape (L,)", "zh": "形状为 (L,) 的 int64 张量"})
    check.positive_int(function, "head_dim", head_dim)
    if head_dim % 2:
        check.fail(function, "head_dim", check.describe(head_dim),
                   {"en": "an even number: RoPE rotates the features in pairs",
                    "zh": "偶数：RoPE 把特征两两配对旋转"})
    check.number(function, "base", base, positive=True)
    check.fits_in_memory(function, "head_dim", head_dim, positions.shape[0] * head_dim // 2 + head_dim, 8)
    theta = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device) / head_dim)
    return positions.to(torch.float64)[:, None] * theta  # (L, d/2)


def apply_rope(x, positions, layout="interleaved", base=10000.0):
    """Rotate every feature pair of `x` by its position's angle (rotary position embedding).

    Args:
        x: (B, H, L, d) queries or keys, d even.
        positions: (L,) int64, the absolute position of each of the L rows (a decode step with T
            cached tokens passes ``torch.tensor([T])``).
        layout: "interleaved": pair i is features (2i, 2i + 1); "half": pair i is features
            (i, i + d/2). Both rotate pair (a, b) by the angle φ = p·θ_i:
            (a, b) -> (a cos φ − b sin φ, a sin φ + b cos φ).
        base: θ_i = base^(−2i/d) (10000 in RoFormer and Llama 2; Llama 3 uses 500000).

    Returns a tensor like `x`. The angles are computed in float64, the result in x's dtype. Then
    ``apply_rope(q, [m]) · apply_rope(k, [n])`` depends on m − n only: rotating both by m adds
    nothing to their relative angle.
    """
    function = "apply_rope"
    _heads(function, "x", x, "(B, H, L, d)")
    _layout(function, layout)
    if x.shape[-1] % 2 or not x.shape[-1]:
        check.fail(function, "x", check.describe(x),
                   {"en": "an even d ≥ 2 on the last axis: RoPE rotates the features in pairs",
                    "zh": "最后一维 d 为不小于 2 的偶数：RoPE 把特征两两配对旋转"})
    _positions(function, positions, x.shape[2], x)
    check.number(function, "base", base, positive=True)
    angles = rope_angles(positions, x.shape[-1], base)  # (L, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, d/2) each
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # (B, H, L, d/2): features 2i and 2i + 1
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # back to 2i, 2i + 1
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]  # (B, H, L, d/2): features i and i + d/2
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def rope_permutation(head_dim):
    """The (d,) int64 order that turns the interleaved layout into the half layout:
    ``apply_rope(x[..., order], p, "half") == apply_rope(x, p, "interleaved")[..., order]``.
    order = [0, 2, 4, …, 1, 3, 5, …]: the first feature of every pair, then the second. To move
    weights trained for one layout to the other, permute the rows of each head's W_Q and W_K by it
    (what the conversion of Meta's Llama weights to Hugging Face's layout does)."""
    check.positive_int("rope_permutation", "head_dim", head_dim)
    if head_dim % 2:
        check.fail("rope_permutation", "head_dim", check.describe(head_dim),
                   {"en": "an even number: RoPE rotates the features in pairs", "zh": "偶数：RoPE 把特征两两配对旋转"})
    check.fits_in_memory("rope_permutation", "head_dim", head_dim, head_dim, 8)
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


# ----------------------------------------------------------------------------- the cache


class KVCache:
    """The keys and values of the tokens seen so far, (B, H_kv, T, d), for one attention layer.

    ``update(key, value)`` takes the new tokens' keys and values (B, H_kv, L_new, d), already
    rotated at their absolute positions when RoPE is used (a cached key is never rotated again),
    stores them and returns ``(keys, values, positions)``: everything the new queries may attend
    to, and the absolute position of each of those keys (L,) int64.

    With ``window=W`` the cache is a rolling buffer of W slots: the token at position p lives in
    slot p mod W and overwrites the token W positions before it, which no later query may see. Its
    memory stays W tokens however long the generation runs; ``update`` returns the W − 1 latest
    kept keys before the new ones (the first new query may see them), and a chunk of several new
    queries masks with ``positions`` (``window_keep_mask`` for the usual case). The buffer is made
    at the first update, so W slots of the batch's keys and values must fit in memory.

    Keys and values may have different head sizes (d_k ≠ d_v), with or without a window; every
    update gives the batch, heads, head sizes, dtype and device of the first.

    ``seen``: tokens appended so far (the next token's position). ``nbytes``: the bytes stored.
    """

    def __init__(self, window=None):
        self.window = _window("KVCache", window)
        self.keys = self.values = None  # (B, H_kv, slots, d)
        self.seen = 0
        self.slot_positions = None  # (slots,) int64: the position each slot holds, −1 when empty

    def update(self, key, value):
        function = "KVCache.update"
        _heads(function, "key", key, "(B, H_kv, L_new, d)")
        _heads(function, "value", value, "(B, H_kv, L_new, d)")
        check.alike(function, "value", value, key, "key")
        if value.shape[:3] != key.shape[:3]:
            check.fail(function, "value", check.describe(value),
                       {"en": f"one value per key: (B, H_kv, L_new) = {tuple(key.shape[:3])} on the first three axes",
                        "zh": f"每个键对应一个值：前三维为 (B, H_kv, L_new) = {tuple(key.shape[:3])}"})
        if self.keys is not None:
            for argument, tensor, stored in (("key", key, self.keys), ("value", value, self.values)):
                if tensor.shape[:2] != stored.shape[:2] or tensor.shape[-1] != stored.shape[-1] \
                        or tensor.dtype != stored.dtype or tensor.device != stored.device:
                    check.fail(function, argument, check.describe(tensor),
                               {"en": f"the batch, heads, head size, dtype and device of the cached ones, "
                                      f"{check.describe(stored)}",
                                "zh": f"与缓存中的张量（{check.describe(stored)}）相同的批量、头数、头大小、类型和设备"})
        L_new = key.shape[2]
        if self.window is not None and self.keys is None:  # the buffer: W slots of keys and of values
            B, H_kv, _, d_k = key.shape
            check.fits_in_memory(function, "window", self.window, self.window * B * H_kv * (d_k + value.shape[-1]),
                                 key.element_size())
        new_positions = torch.arange(self.seen, self.seen + L_new, device=key.device)  # (L_new,)
        if self.window is None:
            if self.keys is None:
                self.keys, self.values = key, value
            else:
                self.keys = torch.cat([self.keys, key], dim=2)  # (B, H_kv, T + L_new, d)
                self.values = torch.cat([self.values, value], dim=2)
            self.seen += L_new
            return self.keys, self.values, torch.arange(self.seen, device=key.device)
        # rolling buffer: what the new queries may see is the kept keys, then the new ones
        kept = self._kept_order()
        if kept is not None:  # only the W − 1 latest can be seen by the first new query, at position seen
            kept = kept[self.slot_positions[kept] > self.seen - self.window]
        old_k = self.keys[:, :, kept] if kept is not None else key[:, :, :0]
        old_v = self.values[:, :, kept] if kept is not None else value[:, :, :0]
        old_p = self.slot_positions[kept] if kept is not None else new_positions[:0]
        keys, values = torch.cat([old_k, key], dim=2), torch.cat([old_v, value], dim=2)
        positions = torch.cat([old_p, new_positions])
        W = self.window
        if self.keys is None:  # keys and values may differ in size (d_k ≠ d_v), as without a window
            B, H_kv = key.shape[:2]
            self.keys = key.new_zeros(B, H_kv, W, key.shape[-1])
            self.values = value.new_zeros(B, H_kv, W, value.shape[-1])
            self.slot_positions = torch.full((W,), -1, dtype=torch.int64, device=key.device)
        last = slice(max(0, L_new - W), L_new)  # only the last W new tokens survive
        slots = new_positions[last] % W
        self.keys[:, :, slots] = key[:, :, last]
        self.values[:, :, slots] = value[:, :, last]
        self.slot_positions[slots] = new_positions[last]
        self.seen += L_new
        return keys, values, positions

    def _kept_order(self):
        """The filled slots in order of position (None when empty)."""
        if self.slot_positions is None:
            return None
        filled = (self.slot_positions >= 0).nonzero().flatten()
        return filled[self.slot_positions[filled].argsort()]

    @property
    def length(self):
        """How many tokens the cache holds now (≤ window with a window)."""
        if self.keys is None:
            return 0
        return self.keys.shape[2] if self.window is None else int((self.slot_positions >= 0).sum())

    @property
    def nbytes(self):
        if self.keys is None:
            return 0
        return self.keys.element_size() * (self.keys.numel() + self.values.numel())


def cache_bytes(layers, kv_heads, head_dim, tokens=1, batch=1, bytes_per_number=2):
    """The bytes a KV cache holds: 2 (a key and a value) × layers × H_kv × d × tokens × batch ×
    bytes per number (2 in float16/bfloat16, the usual inference dtypes)."""
    for argument, value in (("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim), ("tokens", tokens),
                            ("batch", batch), ("bytes_per_number", bytes_per_number)):
        check.positive_int("cache_bytes", argument, value)
    return 2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_number


@dataclass(frozen=True)
class Shape:
    """A published model's attention shape: layers, query heads H, key/value heads H_kv, head size d,
    sliding window (None: every earlier token)."""

    name: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    window: int = None


#: Published configurations (each model's released config.json / paper): the cache-size plot's models.
PUBLISHED = (
    Shape("Llama-2-7B", 32, 32, 32, 128),  # MHA
    Shape("Llama-2-70B", 80, 64, 8, 128),  # GQA, 8 groups of 8
    Shape("Falcon-7B", 32, 71, 1, 64),  # MQA
    Shape("Mistral-7B", 32, 32, 8, 128, window=4096),  # v0.1: GQA and a sliding window of 4096 (later versions: none)
)


# ----------------------------------------------------------------------------- a tiny decoder-only model


def _block_sizes(function, d_model, heads, kv_heads, d_ff, window, layout):
    """The sizes of a TinyBlock, checked where the learner gives them (the block, or the decoder
    that builds its blocks): a bad one would fail later inside apply_rope or gqa_attention."""
    for argument, value in (("d_model", d_model), ("heads", heads), ("kv_heads", kv_heads), ("d_ff", d_ff)):
        check.positive_int(function, argument, value)
    if d_model % heads or (d_model // heads) % 2:
        check.fail(function, "heads", check.describe(heads),
                   {"en": f"a divisor of d_model = {d_model} leaving an even head size (RoPE rotates pairs)",
                    "zh": f"d_model = {d_model} 的约数，且每个头的大小为偶数（RoPE 两两旋转）"})
    _kv_heads_divide(function, "heads", heads, kv_heads)
    _window(function, window)
    _layout(function, layout)


class TinyBlock(nn.Module):
    """A pre-norm decoder block: causal GQA self-attention with RoPE, then a feed-forward network."""

    def __init__(self, d_model, heads, kv_heads, d_ff, window=None, layout="interleaved"):
        super().__init__()
        _block_sizes("TinyBlock", d_model, heads, kv_heads, d_ff, window, layout)
        check.parameters_fit("TinyBlock", {"d_model": d_model, "d_ff": d_ff}, d_model * (4 * d_model + 2 * d_ff))
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.window, self.layout = window, layout
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, heads * self.head_dim, bias=False)  # E -> H·d
        self.k_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)  # E -> H_kv·d: the smaller cache
        self.v_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(heads * self.head_dim, d_model, bias=False)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, positions, cache=None):
        """x (B, L, E), positions (L,) int64; with a KVCache, attend to it and extend it."""
        function = "TinyBlock.forward"
        E = self.norm1.normalized_shape[0]
        check.floats_alike(function, "x", x, self.q_proj.weight, "self.q_proj.weight", min_ndim=3, layout="(B, L, E)")
        if x.ndim != 3 or x.shape[-1] != E:
            check.fail(function, "x", check.describe(x),
                       {"en": f"shape (B, L, E) with E = {E}, the size the block was built for",
                        "zh": f"形状 (B, L, E)，其中 E = {E}，即构建该块时设定的大小"})
        B, L, _ = x.shape
        if not isinstance(positions, torch.Tensor) or positions.dtype != torch.int64 or positions.shape != (L,):
            check.fail(function, "positions", check.describe(positions),
                       {"en": f"an int64 tensor of shape (L,) = ({L},), one position per row of x",
                        "zh": f"形状为 (L,) = ({L},) 的 int64 张量，x 的每一行一个位置"})
        check.on_device(function, "positions", positions, x.device, "x")
        if cache is not None and not isinstance(cache, KVCache):
            check.fail(function, "cache", check.describe(cache),
                       {"en": "None or a KVCache", "zh": "None 或 KVCache"})
        if cache is None:  # the (B, H, L, L) weights of the causal attention below
            check.scores_fit(function, "x", x, (B, self.heads, L, L), x.dtype)
        h = self.norm1(x)
        q = self.q_proj(h).view(B, L, self.heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(h).view(B, L, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, L, d)
        v = self.v_proj(h).view(B, L, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, positions, self.layout), apply_rope(k, positions, self.layout)  # before caching
        if cache is None:
            out, _ = gqa_attention(q, k, v, causal=True, window=self.window)
        else:
            keys, values, key_positions = cache.update(k, v)
            keep = (key_positions[None, :] <= positions[:, None])  # (L, L_k)
            if self.window is not None:
                keep &= key_positions[None, :] > positions[:, None] - self.window
            out, _ = gqa_attention(q, keys, values, keep_mask=keep)
        x = x + self.out_proj(out.transpose(1, 2).reshape(B, L, E))
        return x + self.ff(self.norm2(x))


class TinyDecoder(nn.Module):
    """A small decoder-only language model: token embedding, pre-norm blocks of GQA self-attention
    with RoPE (optionally a sliding window) and feed-forward, a final LayerNorm and a read-out.
    Positions come from RoPE only (no table added to the embedding), so it takes any length.

    ``forward(tokens)`` (B, L) -> logits (B, L, vocab), every position at once (what training and
    recomputing do). ``generate(prompt, new_tokens, cache=True)`` greedy-decodes."""

    def __init__(self, vocab=64, d_model=64, heads=4, kv_heads=2, layers=2, d_ff=128, window=None,
                 layout="interleaved"):
        super().__init__()
        function = "TinyDecoder"
        for argument, value in (("vocab", vocab), ("layers", layers)):
            check.positive_int(function, argument, value)
        _block_sizes(function, d_model, heads, kv_heads, d_ff, window, layout)
        check.parameters_fit(function, {"vocab": vocab, "d_model": d_model, "layers": layers, "d_ff": d_ff},
                             layers * d_model * (4 * d_model + 2 * d_ff) + 2 * vocab * d_model)
        check.modules_fit(function, "layers", layers, 11 * layers + 4)  # 11 modules per block
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(TinyBlock(d_model, heads, kv_heads, d_ff, window, layout) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, vocab, bias=False)

    def _tokens(self, function, argument, tokens):
        check.tokens(function, argument, tokens, self.vocab, ndim=2, layout="(B, L)")
        return _some_positions(function, argument, tokens)

    def forward(self, tokens, start=0, caches=None):
        """Logits (B, L, vocab) of `tokens` (B, L) at positions start … start + L − 1; with
        `caches` (one KVCache per block) the earlier tokens' keys and values come from them. A cache
        holding T tokens expects start = T; another start is taken as given (lesson 07 shows what a
        wrong one does), so the caller keeps them in step."""
        function = "TinyDecoder.forward"
        self._tokens(function, "tokens", tokens)
        check.on_device(function, "tokens", tokens, self.embed.weight.device,
                        {"en": "the model's parameters", "zh": "模型参数"})
        # positions start … start + L − 1 are int64 (torch.arange's end, start + L, too)
        check.whole_number(function, "start", start, 0, check.INT64_MAX - tokens.shape[1])
        if caches is not None and (not isinstance(caches, (list, tuple)) or len(caches) != len(self.blocks)
                                   or not all(isinstance(c, KVCache) for c in caches)):
            check.fail(function, "caches", check.describe(caches),
                       {"en": f"None or a list of {len(self.blocks)} KVCache, one per block",
                        "zh": f"None，或由 {len(self.blocks)} 个 KVCache 组成的列表（每个块一个）"})
        if caches is None:  # each block's (B, H, L, L) weights, named here rather than in a block
            B, L = tokens.shape
            check.scores_fit(function, "tokens", tokens, (B, self.blocks[0].heads, L, L), self.embed.weight.dtype)
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, positions, None if caches is None else caches[i])
        return self.readout(self.norm(x))

    @torch.no_grad()
    def generate(self, prompt, new_tokens, cache=True):
        """Greedy decoding: `prompt` (B, P) -> (tokens (B, new_tokens), logits (B, new_tokens, vocab)),
        each step's logits for the token it chose. With ``cache`` the prompt runs once (prefill) and
        each step feeds one token; without, each step recomputes the whole sequence so far.

        It makes `new_tokens` steps, as many as asked (no upper bound): a few milliseconds each at
        the default sizes, more as the sequence grows without the cache (each step recomputes it
        all), and the cache and the logits grow by one token per step; 10**6 steps take hours."""
        function = "TinyDecoder.generate"
        self._tokens(function, "prompt", prompt)
        if not prompt.shape[1]:
            check.fail(function, "prompt", check.describe(prompt),
                       {"en": "at least one token per sequence", "zh": "每条序列至少一个词元"})
        check.positive_int(function, "new_tokens", new_tokens)
        check.flag(function, "cache", cache)
        tokens, chosen, logits = prompt, [], []
        if cache:
            caches = [KVCache(block.window) for block in self.blocks]
            step_logits = self(prompt, 0, caches)[:, -1]  # prefill: the whole prompt at once
        else:
            step_logits = self(prompt)[:, -1]
        for _ in range(new_tokens):
            following = step_logits.argmax(dim=-1)  # (B,)
            chosen.append(following)
            logits.append(step_logits)
            if len(chosen) == new_tokens:
                break
            if cache:  # decode: the new token alone, at its absolute position
                step_logits = self(following[:, None], tokens.shape[1], caches)[:, -1]
            tokens = torch.cat([tokens, following[:, None]], dim=1)
            if not cache:  # recompute: every token again
                step_logits = self(tokens)[:, -1]
        return torch.stack(chosen, dim=1), torch.stack(logits, dim=1)


def make_tiny_decoder(seed=0, dtype=torch.float32, **options):
    """An untrained TinyDecoder (random weights from `seed`, global random state untouched), in eval
    mode, on torch's default device."""
    check.seed("make_tiny_decoder", "seed", seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        check.fail("make_tiny_decoder", "dtype", check.describe(dtype),
                   {"en": "a floating-point dtype such as torch.float64", "zh": "浮点类型，例如 torch.float64"})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyDecoder(**options).to(dtype).eval()


# ----------------------------------------------------------------------------- lesson 06's model, cached


class CachedReverser:
    """Greedy decoding of a trained ``seq2seq.Reverser`` one token at a time with a KV cache.

    Each decoder layer keeps its self-attention's keys and values (B, H, T, d), one position more
    per step, and its cross-attention's keys and values of the memory, computed once. The Reverser
    adds sinusoidal positions to its embeddings, so step t embeds its token at position t (not 0:
    the off-by-one a cached decoder must avoid). Keys at the target's padding (the PAD a finished
    sequence keeps emitting) are hidden, as ``Reverser.decode`` hides them.

    ``decode(source)`` -> (tokens (B, T), logits (B, T, vocab)): the tokens of
    ``seq2seq.greedy_decode(model, source)`` and, step by step, the logits that recomputation gives.
    """

    def __init__(self, model):
        from . import seq2seq

        self.model = check.module("CachedReverser", "model", model, seq2seq.Reverser,
                                  {"en": "a seq2seq.Reverser (e.g. seq2seq.train(seed=0).model)",
                                   "zh": "seq2seq.Reverser（例如 seq2seq.train(seed=0).model）"})
        self.seq2seq = seq2seq

    @staticmethod
    def _project(attention, x):
        """(B, L, E) -> (B, H, L, d) with attention's q_proj, k_proj or v_proj given as `x`'s projection."""
        B, L, E = x.shape
        H = attention.num_heads
        return x.view(B, L, H, E // H).transpose(1, 2)

    def _attend(self, attention, h, keys, values, keep):
        B, L, E = h.shape
        q = self._project(attention, attention.q_proj(h))  # (B, H, 1, d)
        out, _ = gqa_attention(q, keys, values, keep_mask=keep)  # H_kv = H here: plain multi-head
        return attention.out_proj(out.transpose(1, 2).reshape(B, L, E))

    def _layer_step(self, layer, cache, memory_kv, x, self_keep, memory_keep):
        """One decoder layer on the new position x (B, 1, E): what ``DecoderLayer.forward`` computes
        there, with the self-attention's keys and values from (and into) `cache`."""
        a = layer.self_attn

        def attend_self(h):
            keys, values, _ = cache.update(self._project(a, a.k_proj(h)), self._project(a, a.v_proj(h)))
            return self._attend(a, h, keys, values, self_keep)

        def attend_memory(h):
            return self._attend(layer.cross_attn, h, *memory_kv, memory_keep)

        if layer.norm_first:
            x = x + attend_self(layer.norm1(x))
            x = x + attend_memory(layer.norm2(x))
            return x + layer.feed_forward(layer.norm3(x))
        x = layer.norm1(x + attend_self(x))
        x = layer.norm2(x + attend_memory(x))
        return layer.norm3(x + layer.feed_forward(x))

    @torch.no_grad()
    def decode(self, source, max_steps=None):
        seq2seq, model = self.seq2seq, self.model
        function = "CachedReverser.decode"
        model._source(function, source, seq2seq.MAX_LENGTH + 1)
        B, L_s = source.shape
        steps = seq2seq.decoding_steps(function, max_steps, L_s + 1)  # 1 … 10: the positions the model has
        memory = model._encode(source)  # the encoder runs once, as in greedy_decode
        memory_keep = (source != seq2seq.PAD)[:, None, None, :]  # (B, 1, 1, L_s)
        cross = []  # per layer: the memory's keys and values, (B, H, L_s, d), computed once
        for layer in model.decoder:
            a = layer.cross_attn
            cross.append((self._project(a, a.k_proj(memory)), self._project(a, a.v_proj(memory))))
        caches = [KVCache() for _ in model.decoder]
        target_real = []  # (B,) per step: whether the token fed at that step is real (not PAD)
        token = torch.full((B,), seq2seq.BOS, device=source.device)
        done = torch.zeros(B, dtype=torch.bool, device=source.device)
        chosen, logits = [], []
        for t in range(steps):
            x = model.embed(token[:, None]) + model.positions[t]  # (B, 1, E): position t, not 0
            target_real.append(token != seq2seq.PAD)
            self_keep = torch.stack(target_real, dim=1)[:, None, None, :]  # (B, 1, 1, t + 1)
            for layer, cache, memory_kv in zip(model.decoder, caches, cross):
                x = self._layer_step(layer, cache, memory_kv, x, self_keep, memory_keep)
            step = model.readout(model.decoder_norm(x))[:, 0]  # (B, vocab)
            following = step.argmax(dim=-1).masked_fill(done, seq2seq.PAD)
            chosen.append(following)
            logits.append(step)
            done |= following == seq2seq.EOS
            token = following
            if done.all():
                break
        return torch.stack(chosen, dim=1), torch.stack(logits, dim=1)


@torch.no_grad()
def recomputed_logits(model, source, tokens):
    """The logits ``seq2seq.greedy_decode`` computes at each of its steps, (B, T, vocab), for its
    answer `tokens` (B, T): step t reruns the decoder on BOS and tokens 0 … t − 1."""
    from . import seq2seq

    function = "recomputed_logits"
    check.module(function, "model", model, seq2seq.Reverser)
    model._source(function, source, seq2seq.MAX_LENGTH + 1)
    check.tokens(function, "tokens", tokens, seq2seq.VOCAB, ndim=2, layout="(B, T)", max_length=seq2seq.MAX_LENGTH + 1)
    _some_positions(function, "tokens", tokens)
    if tokens.shape[0] != source.shape[0]:
        check.fail(function, "tokens", check.describe(tokens),
                   {"en": f"one answer per source: B = {source.shape[0]} on axis 0",
                    "zh": f"每个源序列一个答案：第 0 维为 B = {source.shape[0]}"})
    check.on_device(function, "tokens", tokens, source.device, "source")
    memory = model._encode(source)
    B, T = tokens.shape
    fed = torch.cat([tokens.new_full((B, 1), seq2seq.BOS), tokens], dim=1)
    steps = [model.decode(fed[:, : t + 1], memory, source)[:, -1] for t in range(T)]
    return torch.stack(steps, dim=1)  # (B, T, vocab)


def _kv_heads_divide(function, name, heads, kv_heads):
    """Refuse a number of key/value heads that does not divide the query heads (`name` = `heads`)."""
    if heads % kv_heads:
        check.fail(function, "kv_heads", check.describe(kv_heads),
                   {"en": f"a divisor of {name} = {heads}", "zh": f"{name} = {heads} 的约数"})
