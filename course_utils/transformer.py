"""The Transformer block, written to be read, checked against PyTorch's own.

A Transformer layer wraps attention in three more ideas, each a few lines below:

- **positional encoding**: attention by itself ignores order (permuting the keys permutes nothing
  in the output), so each position gets a vector added to its token embedding: fixed sines and
  cosines (``sinusoidal_encoding``) or a learned table (``LearnedPositionalEmbedding``);
- **residual connections and LayerNorm** around every sub-layer, after it (post-norm, the
  original paper, ``norm_first=False``) or before it (pre-norm, ``norm_first=True``):

      post-norm:  x = LayerNorm(x + Sublayer(x))
      pre-norm:   x = x + Sublayer(LayerNorm(x))

- a **position-wise feed-forward network** (``FeedForward``): the same two-layer MLP applied to
  every position on its own, E -> d_ff -> E.

``EncoderLayer`` = self-attention + feed-forward; ``DecoderLayer`` = causal self-attention +
cross-attention over the encoder's output ("memory") + feed-forward. Both are batch-first, (B, L, E),
use ``FusedMultiheadAttention`` from ``course_utils.multihead`` and copy their weights to and from
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (``from_torch`` / ``to_torch``),
with which they agree in values and gradients (tests/test_transformer.py).

Masks follow the course: ``keep_mask`` is bool, True where a query may attend to a key;
``*_key_padding_mask`` is bool (B, L), True at padding, as in PyTorch. A query that may attend to no
key gets a zero attention output (PyTorch gives NaN there under ``torch.no_grad()``; with autograd
on, its general path gives zeros too: measured on torch 2.13).

One difference from PyTorch, on purpose: PyTorch's layers also apply dropout to the attention
weights (inside ``nn.MultiheadAttention``); the course's attention has no dropout, so these layers
drop only the sub-layer outputs and the feed-forward's hidden layer. ``to_torch`` therefore sets the
PyTorch attention's dropout to 0, so that the copy drops the same things in training mode too (not
the same random entries under one seed: PyTorch's attention output is stored sequence-first, so
the same random stream lands on other positions; measured). In ``eval()`` mode (no dropout at all)
the two agree whatever the dropout.

``parameter_count`` and ``flops`` split a layer's cost by part, for plots of where the cost goes as
the length L grows (attention's L² term).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import validation as check
from .masks import causal_mask
from .multihead import FusedMultiheadAttention, torch_parameters

ACTIVATIONS = ("relu", "gelu")

# ----------------------------------------------------------------------------- argument checks


def _probability(function, argument, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        check.fail(function, argument, check.describe(value),
                   {"en": "a number p with 0 ≤ p < 1", "zh": "满足 0 ≤ p < 1 的数"})
    return float(value)


def _positive_number(function, argument, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
        check.fail(function, argument, check.describe(value), {"en": "a positive number", "zh": "正数"})
    return float(value)


def _activation(function, value):
    if value not in ACTIVATIONS:
        check.fail(function, "activation", check.describe(value), {"en": '"relu" or "gelu"', "zh": '"relu" 或 "gelu"'})
    return value


def _sequence(function, argument, value, d_model, layout, reference, batch=None):
    """`value` must be a float (B, L, d_model) tensor (with batch size `batch` when given), with the
    dtype and device of the layer's parameter `reference` (its first projection's weight)."""
    check.tensor(function, argument, value, min_ndim=3, layout=layout)
    check.alike(function, argument, value, reference, "self.self_attn.q_proj.weight")
    if value.ndim != 3 or value.shape[-1] != d_model:
        check.fail(function, argument, check.describe(value),
                   {"en": f"shape {layout} with E = d_model = {d_model}",
                    "zh": f"形状 {layout}，其中 E = d_model = {d_model}"})
    if batch is not None and value.shape[0] != batch:
        check.fail(function, argument, check.describe(value),
                   {"en": f"the batch size of x, {batch}, on axis 0", "zh": f"第 0 维为批量大小 {batch}，与 x 一致"})
    return value


def _padding(function, argument, mask, B, L, x):
    """A key-padding mask must be bool (B, L), True at padding, where `x` is; returns it (None stays None)."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (B, L):
        check.fail(function, argument, check.describe(mask),
                   {"en": f"a (B, L) = {(B, L)} bool tensor, True at padding (a 0/1 number mask is ambiguous: "
                    "use mask.bool() if 1 means padding)",
                    "zh": f"形状为 (B, L) = {(B, L)} 的 bool 张量，True 表示填充位置"
                    "（0/1 数值掩码含义不明：若 1 表示填充，请先用 mask.bool()）"})
    check.mask_on_device_of(function, argument, mask, x, "x")
    return mask


def _keep(function, keep_mask, shape, x):
    """An extra keep mask must be a bool tensor, where x is, that broadcasts to `shape` (B, H, L, L)."""
    return None if keep_mask is None else check.keep_mask(function, keep_mask, shape, "(B, H, L, L)", x, "x")


# ----------------------------------------------------------------------------- positional encodings


def sinusoidal_encoding(length, d_model, base=10000.0, dtype=torch.float32):
    """The fixed positional encoding of "Attention Is All You Need".

    Feature pair i (features 2i and 2i+1) turns at its own frequency ω_i = base^(-2i / d_model),
    from 1 radian per position (i = 0) down to almost 1/base (the slowest pair):

        PE[pos, 2i]     = sin(pos · ω_i)
        PE[pos, 2i + 1] = cos(pos · ω_i)

    sin on even features and cos on odd ones, interleaved (the paper's layout and most code's; some
    code puts all sines first, then all cosines: the same numbers with the features permuted).

    Args:
        length: L, the number of positions (0 … L-1).
        d_model: E, the number of features. An odd d_model keeps the sine of the last frequency
            and has no room for its cosine: it is the even-size table for d_model + 1 without its
            last column (the frequencies stay base^(-2i / d_model)). Its last feature then has no
            partner to rotate with, so ``offset_rotation`` needs an even d_model.
        base: the wavelength scale (10000 in the paper); the slowest pair repeats every ≈ 2π·base
            positions.
        dtype: a floating dtype for the result.

    Returns:
        (length, d_model) tensor with values in [-1, 1]. The angles are computed in float64 and
        rounded once at the end: pos · ω in float32 loses digits for large pos (pos = 10⁴ keeps only
        ~3 decimals of the angle), which would make far positions noisy.
    """
    function = "sinusoidal_encoding"
    check.positive_int(function, "length", length)
    check.positive_int(function, "d_model", d_model)
    _positive_number(function, "base", base)
    check.floating_dtype(function, "dtype", dtype)
    largest = "length" if length >= d_model else "d_model"
    check.fits_in_memory(function, largest, max(length, d_model), length * (d_model + 1), 32)  # float64 steps
    pairs = (d_model + 1) // 2  # an odd d_model still needs a frequency for its last (sine-only) feature
    omega = base ** (-2.0 * torch.arange(pairs, dtype=torch.float64) / d_model)  # (pairs,), ω_0 = 1
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega  # (L, pairs): pos · ω_i
    # stack (sin, cos) on a new last axis, then flatten: sin_0, cos_0, sin_1, cos_1, … (interleaved)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(length, 2 * pairs)  # (L, 2·pairs)
    return table[:, :d_model].to(dtype)  # (L, E): drops the last cosine when d_model is odd


def offset_rotation(k, d_model, base=10000.0, dtype=torch.float64):
    """The matrix that moves every sinusoidal encoding k positions on: PE[pos + k] = PE[pos] @ R_kᵀ.

    Moving k positions adds the angle k·ω_i to pair i, whatever pos is, and adding an angle to
    (sin θ, cos θ) is a rotation:

        sin(θ + φ) =  cos φ · sin θ + sin φ · cos θ
        cos(θ + φ) = -sin φ · sin θ + cos φ · cos θ,      φ = k·ω_i

    So R_k is block diagonal with one 2×2 block [[cos φ, sin φ], [-sin φ, cos φ]] per pair, acting
    on the column (sin θ, cos θ). It depends on k only, not on pos: a fixed linear map takes any
    position's encoding to the one k later, which is why attention can learn relative offsets from
    these encodings. (It also holds for negative k, and for the whole table at once:
    PE[k:] = PE[:-k] @ R_kᵀ.)

    Args:
        k: the offset, an int (negative goes back).
        d_model: E, even (an odd E has a last feature with no partner, see ``sinusoidal_encoding``).
        base: the same base as the encoding.
        dtype: a floating dtype; the angles are computed in float64 first.

    Returns:
        (d_model, d_model) orthogonal matrix R_k.
    """
    function = "offset_rotation"
    if not isinstance(k, int) or isinstance(k, bool) or abs(k) > check.INT64_MAX:
        check.fail(function, "k", check.describe(k), {"en": "an int (the offset in positions) from −(2**63 − 1) to 2**63 − 1",
                                                      "zh": "−(2**63 − 1) 到 2**63 − 1 之间的整数（位置偏移量）"})
    check.positive_int(function, "d_model", d_model)
    if d_model % 2:
        check.fail(function, "d_model", check.describe(d_model),
                   {"en": "an even number: each sine feature needs its cosine partner to rotate with",
                    "zh": "偶数：每个正弦特征都需要与之配对的余弦特征才能一起旋转"})
    _positive_number(function, "base", base)
    check.floating_dtype(function, "dtype", dtype)
    check.fits_in_memory(function, "d_model", d_model, d_model * d_model, 16)  # the (E, E) matrix, float64
    omega = base ** (-2.0 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)  # (E/2,)
    phi = k * omega  # (E/2,): the angle each pair turns by
    c, s = phi.cos(), phi.sin()
    blocks = torch.stack((torch.stack((c, s), -1), torch.stack((-s, c), -1)), -2)  # (E/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)  # (E, E)


class LearnedPositionalEmbedding(nn.Module):
    """A learned positional encoding: one trained vector per position, an ``nn.Embedding`` of
    positions (BERT and GPT-2 do this). Unlike sines and cosines, it knows no position beyond
    ``max_len`` and has no built-in relation between positions: training must find one.

    Args:
        max_len: the number of positions it has a vector for.
        d_model: E, the size of each vector.

    ``forward(length, offset=0)`` -> (length, d_model): the vectors of positions offset … offset +
    length - 1, the same layout as ``sinusoidal_encoding(length, d_model)``; add it to (B, L, E)
    token embeddings (it broadcasts over B).
    """

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = check.positive_int("LearnedPositionalEmbedding", "max_len", max_len)
        self.d_model = check.positive_int("LearnedPositionalEmbedding", "d_model", d_model)
        check.parameters_fit("LearnedPositionalEmbedding", {"max_len": max_len, "d_model": d_model}, max_len * d_model)
        self.embedding = nn.Embedding(max_len, d_model)  # row p is position p's vector

    def forward(self, length, offset=0):
        function = "LearnedPositionalEmbedding.forward"
        check.positive_int(function, "length", length)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            check.fail(function, "offset", check.describe(offset), {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
        if offset + length > self.max_len:
            last = self.max_len - 1
            if offset == 0:  # the usual call, learned(length): say it without the offset
                needed = {"en": f"length ≤ max_len = {self.max_len}: the table has vectors for positions 0 … {last} "
                          "only, and a learned table knows nothing of later positions",
                          "zh": f"length ≤ max_len = {self.max_len}：这张表只有位置 0 … {last} 的向量，"
                          "学习得到的表对更靠后的位置一无所知"}
            else:
                needed = {"en": f"offset + length ≤ max_len = {self.max_len}: positions offset … offset + length − 1 "
                          f"= {offset} … {offset + length - 1} must lie in the table's 0 … {last}",
                          "zh": f"offset + length ≤ max_len = {self.max_len}：位置 offset … offset + length − 1 "
                          f"= {offset} … {offset + length - 1} 必须落在表的 0 … {last} 之内"}
            check.fail(function, "length", check.describe(length), needed)
        positions = torch.arange(offset, offset + length, device=self.embedding.weight.device)  # (L,)
        return self.embedding(positions)  # (L, E)


# ----------------------------------------------------------------------------- feed-forward


class FeedForward(nn.Module):
    """The position-wise feed-forward network: linear2(dropout(activation(linear1(x)))).

    "Position-wise": it acts on the last axis only, so every position goes through the same MLP on
    its own (no information moves between positions here; only attention does that).

    Args:
        d_model: E, the input and output features.
        d_ff: the hidden width (4·E in the paper: 512 -> 2048).
        dropout: dropout on the hidden layer (training mode only).
        activation: "relu" (the paper) or "gelu" (exact, erf-based: BERT, GPT; PyTorch's "gelu").

    Parameters ``linear1`` (E -> d_ff) and ``linear2`` (d_ff -> E), named as in PyTorch's layers.
    ``forward(x)``: (..., E) -> (..., E).
    """

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu", bias=True):
        super().__init__()
        name = "FeedForward"
        self.d_model = check.positive_int(name, "d_model", d_model)
        self.d_ff = check.positive_int(name, "d_ff", d_ff)
        check.parameters_fit(name, {"d_model": d_model, "d_ff": d_ff}, 2 * d_model * d_ff)
        self.activation = _activation(name, activation)
        self.linear1 = nn.Linear(d_model, d_ff, bias=check.flag(name, "bias", bias))  # E -> d_ff
        self.dropout = nn.Dropout(_probability(name, "dropout", dropout))
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # d_ff -> E

    def forward(self, x):
        check.tensor("FeedForward.forward", "x", x, layout="(..., E)")
        check.same_size("FeedForward.forward", "x", x, -1, self.d_model, "d_model")
        check.alike("FeedForward.forward", "x", x, self.linear1.weight, "self.linear1.weight")
        hidden = self.linear1(x)  # (..., d_ff)
        hidden = F.relu(hidden) if self.activation == "relu" else F.gelu(hidden)  # the only non-linearity
        return self.linear2(self.dropout(hidden))  # (..., E)


# ----------------------------------------------------------------------------- the layers


class _Layer(nn.Module):
    """What both layers share: their settings, checks and the copying of common parts (not used alone)."""

    def __init__(self, d_model, nhead, d_ff, dropout, activation, norm_first, layer_norm_eps, bias):
        super().__init__()
        name = type(self).__name__
        self.d_model = check.positive_int(name, "d_model", d_model)
        self.nhead = check.positive_int(name, "nhead", nhead)
        if d_model % nhead:
            check.fail(name, "nhead", check.describe(nhead),
                       {"en": f"a divisor of d_model = {d_model}, so that every head gets d_model / nhead features",
                        "zh": f"d_model = {d_model} 的约数，这样每个头才能分到 d_model / nhead 个特征"})
        self.d_ff = check.positive_int(name, "d_ff", d_ff)
        check.parameters_fit(name, {"d_model": d_model, "d_ff": d_ff}, 8 * d_model * d_model + 2 * d_model * d_ff)
        self.dropout_p = _probability(name, "dropout", dropout)
        self.activation = _activation(name, activation)
        self.norm_first = check.flag(name, "norm_first", norm_first)
        self.layer_norm_eps = float(check.epsilon(name, "layer_norm_eps", layer_norm_eps))  # 1e39: all zeros
        self.bias = check.flag(name, "bias", bias)

    def _norm(self):
        return nn.LayerNorm(self.d_model, eps=self.layer_norm_eps, bias=self.bias)

    def _settings(self):
        """The constructor arguments of the matching PyTorch layer, on this layer's device and dtype."""
        weight = next(self.parameters())
        return {"d_model": self.d_model, "nhead": self.nhead, "dim_feedforward": self.d_ff,
                "dropout": self.dropout_p, "activation": self.activation, "layer_norm_eps": self.layer_norm_eps,
                "batch_first": True, "norm_first": self.norm_first, "bias": self.bias, "dtype": weight.dtype,
                "device": weight.device}

    @classmethod
    def _from_settings(cls, function, layer):
        """A new layer of this kind with `layer`'s (a PyTorch layer's) sizes and settings, no weights yet."""
        activation = _torch_activation(function, layer.activation)
        attention = layer.self_attn
        if attention.bias_k is not None or attention.add_zero_attn or not attention._qkv_same_embed_dim:
            check.fail(function, "layer", type(layer).__name__,
                       {"en": "a layer whose attention has no add_bias_kv, no add_zero_attn and kdim = vdim = d_model",
                        "zh": "其注意力未启用 add_bias_kv、add_zero_attn，且 kdim = vdim = d_model 的层"})
        weight = layer.linear1.weight
        with torch.device(weight.device):  # made where the PyTorch layer is, not on the CPU first
            ours = cls(attention.embed_dim, attention.num_heads, layer.linear1.out_features, dropout=layer.dropout.p,
                       activation=activation, norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
                       bias=layer.linear1.bias is not None)
        return ours.to(weight.dtype)

    def _copy_common(self, layer, norms, to_torch):
        """Copy the feed-forward and the norms between this layer and PyTorch's `layer`, either way."""
        pairs = [(self.feed_forward.linear1, layer.linear1), (self.feed_forward.linear2, layer.linear2)]
        pairs += [(getattr(self, name), getattr(layer, name)) for name in norms]
        for ours, theirs in pairs:
            source, target = (ours, theirs) if to_torch else (theirs, ours)
            target.load_state_dict(source.state_dict())  # same parameter names: weight, bias


def _torch_activation(function, activation):
    """"relu" or "gelu" for the activation a PyTorch layer holds (a function or a module)."""
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    check.fail(function, "layer", check.describe(activation),
               {"en": "a layer with activation relu or (exact) gelu", "zh": "激活函数为 relu 或（精确）gelu 的层"})


def _copy_attention_to_torch(ours, mha):
    """Copy FusedMultiheadAttention `ours` into the existing nn.MultiheadAttention `mha`; set its
    attention-weights dropout to 0, which the course's attention does not have."""
    packed = ours.packed_weights()
    with torch.no_grad():
        for name, target in torch_parameters(mha).items():
            if target is not None:
                target.copy_(packed[name])
    mha.dropout = 0.0


class EncoderLayer(_Layer):
    """One Transformer encoder layer: self-attention then feed-forward, each with a residual
    connection and a LayerNorm; the same computation as ``nn.TransformerEncoderLayer(...,
    batch_first=True)``.

        post-norm (norm_first=False):  x = norm1(x + dropout1(SelfAttention(x)))
                                       x = norm2(x + dropout2(FeedForward(x)))
        pre-norm  (norm_first=True):   x = x + dropout1(SelfAttention(norm1(x)))
                                       x = x + dropout2(FeedForward(norm2(x)))

    Pre-norm leaves a clean path x -> x + … -> x + … from input to output (no norm on it), so the
    gradient reaches early layers undamped and deep stacks train without a learning-rate warm-up;
    post-norm normalises the sum, which keeps activations bounded but rescales the gradient at
    every layer. (A pre-norm stack needs one final LayerNorm, which nn.TransformerEncoder adds.)

    Args:
        d_model: E. nhead: H, dividing E. d_ff: the feed-forward's hidden width.
        dropout: on both sub-layer outputs and the feed-forward's hidden layer (not on the attention
            weights; see the module docstring).
        activation: "relu" or "gelu". norm_first: pre-norm when True. layer_norm_eps: LayerNorm's ε.
        bias: whether the linear layers and the LayerNorms learn biases.

    Parameters ``self_attn`` (FusedMultiheadAttention), ``feed_forward`` (FeedForward), ``norm1``,
    ``norm2`` (LayerNorm).
    """

    def __init__(self, d_model, nhead, d_ff, dropout=0.1, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5, bias=True):
        super().__init__(d_model, nhead, d_ff, dropout, activation, norm_first, layer_norm_eps, bias)
        self.self_attn = FusedMultiheadAttention(d_model, nhead, bias=bias)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias)
        self.norm1, self.norm2 = self._norm(), self._norm()
        self.dropout1, self.dropout2 = nn.Dropout(self.dropout_p), nn.Dropout(self.dropout_p)

    def forward(self, x, key_padding_mask=None, keep_mask=None, need_weights=False):
        """
        Args:
            x: (B, L, E) float.
            key_padding_mask: optional bool (B, L), True at padding: no position attends to it.
                Padded positions still get an output (they attend to the real ones); PyTorch's
                layer computes the same there; ignore them downstream.
            keep_mask: optional bool broadcastable to (B, H, L, L), True where a query may attend
                to a key (e.g. ``masks.causal_mask(L)``); combined with key_padding_mask.
            need_weights: also return the attention weights.

        Returns:
            (B, L, E); with need_weights, ``(output, weights (B, H, L, L))``.
        """
        function = "EncoderLayer.forward"
        _sequence(function, "x", x, self.d_model, "(B, L, E)", self.self_attn.q_proj.weight)
        _padding(function, "key_padding_mask", key_padding_mask, x.shape[0], x.shape[1], x)
        _keep(function, keep_mask, (x.shape[0], self.nhead, x.shape[1], x.shape[1]), x)
        check.flag(function, "need_weights", need_weights)
        if need_weights:  # the (B, H, L, L) weights it returns, named here rather than in self_attn
            check.attention_scores_fit(function, x, x, (x.shape[0], self.nhead), check.NO_WEIGHTS, ("x", "x"))

        weights = []

        def attend(h):  # (B, L, E) -> (B, L, E), the attention sub-layer
            out, w = self.self_attn(h, h, h, keep_mask=keep_mask, key_padding_mask=key_padding_mask,
                                    need_weights=need_weights)
            weights.append(w)
            return self.dropout1(out)

        if self.norm_first:
            x = x + attend(self.norm1(x))  # the residual path itself is never normalised
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            x = self.norm1(x + attend(x))  # normalise the sum of input and sub-layer output
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return (x, weights[0]) if need_weights else x

    @classmethod
    def from_torch(cls, layer):
        """A new EncoderLayer with the settings and weights of ``nn.TransformerEncoderLayer`` `layer`
        (either batch layout: the weights do not depend on it). Its attention dropout is not kept."""
        function = "EncoderLayer.from_torch"
        if not isinstance(layer, nn.TransformerEncoderLayer):
            check.fail(function, "layer", type(layer).__name__,
                       {"en": "an nn.TransformerEncoderLayer", "zh": "nn.TransformerEncoderLayer"})
        ours = cls._from_settings(function, layer)
        ours.self_attn.copy_weights_from(layer.self_attn)
        ours._copy_common(layer, ("norm1", "norm2"), to_torch=False)
        return ours

    def to_torch(self):
        """A new ``nn.TransformerEncoderLayer(..., batch_first=True)`` computing what this layer
        computes (its attention dropout set to 0): ``layer(x, src_key_padding_mask=…)``."""
        layer = nn.TransformerEncoderLayer(**self._settings())
        _copy_attention_to_torch(self.self_attn, layer.self_attn)
        self._copy_common(layer, ("norm1", "norm2"), to_torch=True)
        return layer.train(self.training)


class DecoderLayer(_Layer):
    """One Transformer decoder layer: causal self-attention, cross-attention over the encoder's
    output ("memory"), feed-forward; each with a residual and a LayerNorm (three of them). The same
    computation as ``nn.TransformerDecoderLayer(..., batch_first=True)``.

        post-norm:  x = norm1(x + SelfAttention(x, causal))
                    x = norm2(x + CrossAttention(x, memory))
                    x = norm3(x + FeedForward(x))
        pre-norm:   x = x + SelfAttention(norm1(x), causal), and so on (memory is not normalised here)

    The decoder has two masks. The target mask (``causal``, plus ``tgt_key_padding_mask``) keeps
    position i from seeing target positions after i, so training on a whole sentence at once
    matches generating it one token at a time. The memory mask (``memory_key_padding_mask``)
    hides the source sequence's padding from the cross-attention. It needs no causal part: the
    whole source is known before decoding starts.

    Args: those of ``EncoderLayer``. Parameters ``self_attn``, ``cross_attn`` (PyTorch's
    ``multihead_attn``), ``feed_forward``, ``norm1``, ``norm2``, ``norm3``.
    """

    def __init__(self, d_model, nhead, d_ff, dropout=0.1, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5, bias=True):
        super().__init__(d_model, nhead, d_ff, dropout, activation, norm_first, layer_norm_eps, bias)
        self.self_attn = FusedMultiheadAttention(d_model, nhead, bias=bias)
        self.cross_attn = FusedMultiheadAttention(d_model, nhead, bias=bias)  # queries: x; keys, values: memory
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias)
        self.norm1, self.norm2, self.norm3 = self._norm(), self._norm(), self._norm()
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(self.dropout_p) for _ in range(3))

    def forward(self, x, memory, tgt_key_padding_mask=None, memory_key_padding_mask=None, causal=True,
                keep_mask=None, need_weights=False):
        """
        Args:
            x: (B, L_t, E) float, the target side.
            memory: (B, L_m, E) float, the encoder's output.
            tgt_key_padding_mask: optional bool (B, L_t), True at the target's padding.
            memory_key_padding_mask: optional bool (B, L_m), True at the source's padding.
            causal: hide later target positions in the self-attention (``masks.causal_mask``);
                PyTorch: ``tgt_mask=~causal_mask(L_t)`` (bool, True = may NOT attend; its own float
                ``generate_square_subsequent_mask`` warns beside bool padding masks).
            keep_mask: optional extra bool mask for the self-attention, broadcastable to
                (B, H, L_t, L_t), True = may attend; combined with the causal mask.
            need_weights: also return the attention weights.

        Returns:
            (B, L_t, E); with need_weights, ``(output, (self_weights (B, H, L_t, L_t),
            cross_weights (B, H, L_t, L_m)))``.

        With causal=True and a target padded on the LEFT, query 0 may see only key 0, which is
        padding: a row with no key, which gets a zero attention output here and NaN in PyTorch
        under ``torch.no_grad()`` (with autograd on, its general path gives ours; torch 2.13).
        """
        function = "DecoderLayer.forward"
        _sequence(function, "x", x, self.d_model, "(B, L_t, E)", self.self_attn.q_proj.weight)
        B, L_t = x.shape[:2]
        _sequence(function, "memory", memory, self.d_model, "(B, L_m, E)", self.self_attn.q_proj.weight, batch=B)
        _padding(function, "tgt_key_padding_mask", tgt_key_padding_mask, B, L_t, x)
        _padding(function, "memory_key_padding_mask", memory_key_padding_mask, B, memory.shape[1], x)
        _keep(function, keep_mask, (B, self.nhead, L_t, L_t), x)
        check.flag(function, "causal", causal)
        check.flag(function, "need_weights", need_weights)
        if need_weights:  # the (B, H, L_t, L_t) and (B, H, L_t, L_m) weights it returns
            check.attention_scores_fit(function, x, x, (B, self.nhead), check.NO_WEIGHTS, ("x", "x"))
            check.attention_scores_fit(function, x, memory, (B, self.nhead), check.NO_WEIGHTS, ("x", "memory"))
        # (L_t, L_t): key j ≤ query i, made where x is; an empty target (L_t = 0) has nothing to hide
        keep = causal_mask(L_t, device=x.device) if causal and L_t else None
        if keep_mask is not None:
            keep = keep_mask if keep is None else keep & keep_mask  # a bad keep_mask is named by self_attn
        weights = []

        def attend_self(h):
            out, w = self.self_attn(h, h, h, keep_mask=keep, key_padding_mask=tgt_key_padding_mask,
                                    need_weights=need_weights)
            weights.append(w)
            return self.dropout1(out)

        def attend_memory(h):
            out, w = self.cross_attn(h, memory, memory, key_padding_mask=memory_key_padding_mask,
                                     need_weights=need_weights)
            weights.append(w)
            return self.dropout2(out)

        if self.norm_first:
            x = x + attend_self(self.norm1(x))
            x = x + attend_memory(self.norm2(x))
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            x = self.norm1(x + attend_self(x))
            x = self.norm2(x + attend_memory(x))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return (x, tuple(weights)) if need_weights else x

    @classmethod
    def from_torch(cls, layer):
        """A new DecoderLayer with the settings and weights of ``nn.TransformerDecoderLayer`` `layer`."""
        function = "DecoderLayer.from_torch"
        if not isinstance(layer, nn.TransformerDecoderLayer):
            check.fail(function, "layer", type(layer).__name__,
                       {"en": "an nn.TransformerDecoderLayer", "zh": "nn.TransformerDecoderLayer"})
        ours = cls._from_settings(function, layer)
        ours.self_attn.copy_weights_from(layer.self_attn)
        ours.cross_attn.copy_weights_from(layer.multihead_attn)
        ours._copy_common(layer, ("norm1", "norm2", "norm3"), to_torch=False)
        return ours

    def to_torch(self):
        """A new ``nn.TransformerDecoderLayer(..., batch_first=True)`` computing what this layer
        computes (attention dropout 0). Call it as ``layer(x, memory, tgt_mask=~causal_mask(L_t),
        tgt_is_causal=True, tgt_key_padding_mask=…, memory_key_padding_mask=…)``."""
        layer = nn.TransformerDecoderLayer(**self._settings())
        _copy_attention_to_torch(self.self_attn, layer.self_attn)
        _copy_attention_to_torch(self.cross_attn, layer.multihead_attn)
        self._copy_common(layer, ("norm1", "norm2", "norm3"), to_torch=True)
        return layer.train(self.training)


# ----------------------------------------------------------------------------- cost by part


def _parts(layer):
    """(attention modules by part name, feed-forward linears, norms) of a course or PyTorch layer."""
    if isinstance(layer, (EncoderLayer, nn.TransformerEncoderLayer)):
        attention = {"attention": layer.self_attn}
        norms = [layer.norm1, layer.norm2]
    elif isinstance(layer, DecoderLayer):
        attention = {"self_attention": layer.self_attn, "cross_attention": layer.cross_attn}
        norms = [layer.norm1, layer.norm2, layer.norm3]
    elif isinstance(layer, nn.TransformerDecoderLayer):
        attention = {"self_attention": layer.self_attn, "cross_attention": layer.multihead_attn}
        norms = [layer.norm1, layer.norm2, layer.norm3]
    else:
        return None
    linears = [layer.feed_forward.linear1, layer.feed_forward.linear2] if isinstance(layer, _Layer) else [
        layer.linear1, layer.linear2]
    return attention, linears, norms


def _layer_argument(function, layer):
    parts = _parts(layer)
    if parts is None:
        check.fail(function, "layer", type(layer).__name__,
                   {"en": "an EncoderLayer, a DecoderLayer, an nn.TransformerEncoderLayer or an "
                    "nn.TransformerDecoderLayer",
                    "zh": "EncoderLayer、DecoderLayer、nn.TransformerEncoderLayer 或 nn.TransformerDecoderLayer"})
    return parts


def parameter_count(layer):
    """The learned numbers of a layer (the course's or PyTorch's) by part, as a dict:

    encoder: ``{"attention", "feed_forward", "norms", "total"}``; decoder: ``{"self_attention",
    "cross_attention", "feed_forward", "norms", "total"}``. With biases, an attention has
    4E² + 4E, the feed-forward 2·E·d_ff + d_ff + E, each LayerNorm 2E. None depends on L.
    """
    attention, linears, norms = _layer_argument("parameter_count", layer)

    def count(modules):
        return sum(p.numel() for module in modules for p in module.parameters())

    counts = {name: count([module]) for name, module in attention.items()}
    counts["feed_forward"] = count(linears)
    counts["norms"] = count(norms)
    counts["total"] = sum(counts.values())
    return counts


def flops(layer, length, memory_length=None):
    """Multiply-adds for one sequence (B = 1) of `length` positions through `layer`, by part.

    E = d_model, F = d_ff, L = length, M = memory_length (default L):

        attention (self):  4·L·E²   the projections Q, K, V and the output (each L·E·E)
                         + 2·L²·E   the scores Q·Kᵀ (H heads · L · L · E/H) and weights·V (as many)
        cross-attention:   2·L·E² + 2·M·E²   (Q and the output for L queries, K and V for M keys)
                         + 2·L·M·E
        feed_forward:      2·L·E·F
        norms:             L·E per LayerNorm (the scale γ·x̂ + β, one multiply-add per number)

    The L² term is why attention's share grows with L: for E = 512, F = 2048 it passes the
    feed-forward's 2·L·E·F when 2·L²·E + 4·L·E² > 2·L·E·F, i.e. L > F - 2E = 1024. The causal mask
    hides half the scores but the full L × L product is still computed (and counted). Not counted:
    biases, softmax, activations, residual additions and the normalisation's mean and variance
    (element-wise work, O(L·E) or O(H·L²), not matrix products).

    Returns a dict like ``parameter_count``'s keys (one more: ``"total"``), in multiply-adds
    (FLOPs ≈ 2 × these).
    """
    function = "flops"
    attention, linears, norms = _layer_argument(function, layer)
    L = check.positive_int(function, "length", length)
    M = L if memory_length is None else check.positive_int(function, "memory_length", memory_length)
    E, F_ = linears[0].in_features, linears[0].out_features
    counts = {}
    for name in attention:
        if name == "cross_attention":
            counts[name] = 2 * L * E * E + 2 * M * E * E + 2 * L * M * E
        else:
            counts[name] = 4 * L * E * E + 2 * L * L * E
    counts["feed_forward"] = 2 * L * E * F_
    counts["norms"] = len(norms) * L * E
    counts["total"] = sum(counts.values())
    return counts
