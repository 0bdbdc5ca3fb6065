"""Multi-head attention written two ways, and weight transfer between them and PyTorch's own.

Multi-head attention runs H attentions ("heads") side by side. Head h has its own projections
W_Q^h, W_K^h, W_V^h, each to d = E / H features, attends in that small subspace, and the H
outputs, concatenated to E features, go through one output projection W_O:

    head_h = softmax(Q_h K_hᵀ / √d) V_h,   Q_h = query W_Q^h, K_h = key W_K^h, V_h = value W_V^h
    output = [head_0, ..., head_{H-1}] W_O

The two layers below compute exactly this, with the same parameters laid out differently:

- ``NaiveMultiheadAttention``: H independent ``AttentionHead`` modules, each with its own three
  ``nn.Linear`` layers, run one after the other in a Python loop; their outputs are concatenated
  and projected by ``out_proj``. It reads like the formula.
- ``FusedMultiheadAttention``: one ``nn.Linear`` each for Q, K and V that projects for all heads
  at once (its weight is the H per-head weights stacked, head 0's rows first), a reshape to
  (B, H, L, d), one batched attention call for every head, a reshape back, ``out_proj``. It is
  how ``nn.MultiheadAttention`` and most models do it.

Both take ``(query, key, value)`` of shapes (B, L_q, E), (B, L_k, kdim), (B, L_k, vdim):
self-attention passes the same tensor three times, cross-attention the decoder side as query and
the encoder's output as key and value (``kdim`` / ``vdim`` may differ from E). Both return
``(output, weights)``: output (B, L_q, E) and the weights of every head, (B, H, L_q, L_k), never
averaged. Masks: ``keep_mask`` (bool, True where a query may attend to a key, broadcastable to
(B, H, L_q, L_k)) and ``key_padding_mask`` (bool (B, L_k), True at padding, as in
``nn.MultiheadAttention``). A query that may attend to no key gets zero weights and a zero
attention output (so ``out_proj``'s bias), never NaN; ``nn.MultiheadAttention`` returns NaN
there on most of its code paths.

``packed_weights`` / ``load_packed_weights`` read and write either layer's parameters in one
layout, the one ``nn.MultiheadAttention`` uses; ``to_torch`` and ``from_torch`` convert both ways.
"""

import torch
import torch.nn.functional as F
from torch import nn

from . import validation as check
from .attention import scaled_dot_product_attention
from .masks import check_keep_mask

#: The names of the packed layout: (out, in) weights and biases, as ``nn.Linear`` stores them.
PACKED_NAMES = ("q_weight", "k_weight", "v_weight", "out_weight", "q_bias", "k_bias", "v_bias", "out_bias")


def split_heads(x, num_heads):
    """(B, L, H·d) -> (B, H, L, d): head h gets features h·d … (h+1)·d - 1 (a view, no copy)."""
    check.tensor("split_heads", "x", x, min_ndim=3, layout="(B, L, H·d)", floating=False)
    if x.ndim != 3:
        check.fail("split_heads", "x", check.describe(x),
                   {"en": "a tensor of shape (B, L, H·d)", "zh": "形状为 (B, L, H·d) 的张量"})
    check.positive_int("split_heads", "num_heads", num_heads)
    if x.shape[-1] % num_heads:
        check.fail("split_heads", "num_heads", check.describe(num_heads),
                   {"en": f"a divisor of x's last axis, {x.shape[-1]}, so that every head gets the same number "
                    "of features",
                    "zh": f"x 最后一维大小 {x.shape[-1]} 的约数，这样每个头才能分到相同数量的特征"})
    B, L, E = x.shape
    return x.view(B, L, num_heads, E // num_heads).transpose(1, 2)  # (B, H, L, d)


def merge_heads(x):
    """(B, H, L, d) -> (B, L, H·d), head 0's features first: the inverse of ``split_heads``."""
    check.tensor("merge_heads", "x", x, min_ndim=4, layout="(B, H, L, d)", floating=False)
    if x.ndim != 4:
        check.fail("merge_heads", "x", check.describe(x),
                   {"en": "a tensor of shape (B, H, L, d)", "zh": "形状为 (B, H, L, d) 的张量"})
    B, H, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, H * d)  # one copy: the transposed view is not contiguous


class AttentionHead(nn.Module):
    """One head of a naive multi-head layer: its own W_Q, W_K, W_V and scaled dot-product attention.

    Args:
        embed_dim, kdim, vdim: the feature sizes of query, key and value.
        head_dim: d, the size each is projected to.
        bias: whether the projections learn a bias.

    ``forward(query, key, value, keep_mask=None, need_weights=True)`` -> (output (B, L_q, d),
    weights (B, L_q, L_k), or None when need_weights is False and F.scaled_dot_product_attention runs).
    """

    def __init__(self, embed_dim, head_dim, kdim=None, vdim=None, bias=True):
        super().__init__()
        name = "AttentionHead"
        check.positive_int(name, "embed_dim", embed_dim)
        check.positive_int(name, "head_dim", head_dim)
        kdim = embed_dim if kdim is None else check.positive_int(name, "kdim", kdim)
        vdim = embed_dim if vdim is None else check.positive_int(name, "vdim", vdim)
        check.flag(name, "bias", bias)  # bias='no' would build biases
        sizes = {"embed_dim": embed_dim, "head_dim": head_dim, "kdim": kdim, "vdim": vdim}
        largest = max(sizes, key=sizes.get)
        check.fits_in_memory(name, largest, sizes[largest], head_dim * (embed_dim + kdim + vdim), 4)
        self.embed_dim, self.head_dim, self.kdim, self.vdim = embed_dim, head_dim, kdim, vdim
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)  # E -> d
        self.k_proj = nn.Linear(kdim, head_dim, bias=bias)  # kdim -> d
        self.v_proj = nn.Linear(vdim, head_dim, bias=bias)  # vdim -> d

    def forward(self, query, key, value, keep_mask=None, need_weights=True):
        function = "AttentionHead.forward"
        _check_qkv(function, query, key, value, (self.embed_dim, self.kdim, self.vdim), self.q_proj.weight,
                   "self.q_proj.weight")
        if keep_mask is not None:
            check_keep_mask(function, keep_mask, _Scores((query.shape[0], query.shape[1], key.shape[1]), query.device))
        check.flag(function, "need_weights", need_weights)
        if need_weights:  # the (B, L_q, L_k) weights it returns
            check.attention_scores_fit(function, query, key, alternative=check.NO_WEIGHTS)
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, L, d) each
        if need_weights:
            return scaled_dot_product_attention(q, k, v, keep_mask=keep_mask)  # (B, L_q, d), (B, L_q, L_k)
        return _sdpa(q, k, v, keep_mask), None


class _Scores:
    """The shape and device of attention scores not computed yet, for checking a mask against them."""

    def __init__(self, shape, device):
        self.shape, self.device = shape, device


def _check_qkv(function, query, key, value, sizes, reference, source):
    """query (B, L_q, E), key (B, L_k, kdim), value (B, L_k, vdim) for `sizes` = (E, kdim, vdim):
    floating-point tensors with the dtype and device of the layer's parameter `reference`."""
    for argument, tensor, size, layout in (
        ("query", query, sizes[0], "(B, L_q, E)"),
        ("key", key, sizes[1], "(B, L_k, kdim)"),
        ("value", value, sizes[2], "(B, L_k, vdim)"),
    ):
        check.tensor(function, argument, tensor, min_ndim=3, layout=layout)
        if tensor.ndim != 3 or tensor.shape[-1] != size:
            name = layout.strip("()").split(", ")[-1]
            check.fail(
                function,
                argument,
                check.describe(tensor),
                {
                    "en": f"shape {layout} with {name} = {size}, the size the layer was built for",
                    "zh": f"形状 {layout}，其中 {name} = {size}，即构建该层时设定的大小",
                },
            )
        check.alike(function, argument, tensor, reference, source)
    B, L_k = query.shape[0], key.shape[1]
    for argument, tensor in (("key", key), ("value", value)):
        if tensor.shape[0] != B:
            check.fail(
                function,
                argument,
                check.describe(tensor),
                {"en": f"the batch size of query, {B}, on axis 0", "zh": f"第 0 维为批量大小 {B}，与 query 一致"},
            )
    if value.shape[1] != L_k:
        check.fail(
            function,
            "value",
            check.describe(value),
            {"en": f"one value per key: L_k = {L_k} on axis 1", "zh": f"每个键对应一个值：第 1 维为 L_k = {L_k}"},
        )


def _sdpa(q, k, v, keep_mask):
    """PyTorch's fused attention, with the package's promise for a row that keeps no key: zeros.

    (Recent PyTorch returns zeros there already; older versions returned NaN.)"""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep_mask)
    if keep_mask is None:
        return out
    return out.masked_fill(~keep_mask.any(dim=-1, keepdim=True), 0.0)


class _Multihead(nn.Module):
    """What both layers share: sizes, argument checks, masks, and weight transfer (not used alone)."""

    def __init__(self, embed_dim, num_heads, kdim, vdim, bias, head_dim):
        super().__init__()
        name = type(self).__name__
        check.positive_int(name, "embed_dim", embed_dim)
        check.positive_int(name, "num_heads", num_heads)
        kdim = embed_dim if kdim is None else check.positive_int(name, "kdim", kdim)
        vdim = embed_dim if vdim is None else check.positive_int(name, "vdim", vdim)
        check.flag(name, "bias", bias)  # bias='no' would build biases
        if head_dim is None:
            if embed_dim % num_heads:
                check.fail(
                    name,
                    "num_heads",
                    check.describe(num_heads),
                    {
                        "en": f"a divisor of embed_dim = {embed_dim}, so that every head gets E / H features",
                        "zh": f"embed_dim = {embed_dim} 的约数，这样每个头才能分到 E / H 个特征",
                    },
                )
            head_dim = embed_dim // num_heads
        check.positive_int(name, "head_dim", head_dim)
        # all the heads' projections together, H·d × (E + kdim + vdim), and out_proj, E × H·d: what is
        # built, not one head of it (a naive layer of 1024 heads of 1024 features is 16 GB)
        sizes = {"embed_dim": embed_dim, "num_heads": num_heads, "kdim": kdim, "vdim": vdim, "head_dim": head_dim}
        largest = max(sizes, key=sizes.get)
        check.fits_in_memory(name, largest, sizes[largest], num_heads * head_dim * (2 * embed_dim + kdim + vdim), 4)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.kdim, self.vdim, self.bias = kdim, vdim, bias

    # -- checks

    def _check_inputs(self, query, key, value, keep_mask, key_padding_mask, need_weights):
        """Validate the arguments; return the keep mask they add up to (None when there is none)."""
        function = f"{type(self).__name__}.forward"
        _check_qkv(function, query, key, value, (self.embed_dim, self.kdim, self.vdim), self.out_proj.weight,
                   "self.out_proj.weight")
        B, L_q, L_k = query.shape[0], query.shape[1], key.shape[1]
        check.flag(function, "need_weights", need_weights)  # a string such as 'no' is no False
        if need_weights:  # the (B, H, L_q, L_k) weights it returns, every head's
            check.attention_scores_fit(function, query, key, (B, self.num_heads), check.NO_WEIGHTS)
        keep = None
        scores_shape = (B, self.num_heads, L_q, L_k)
        if keep_mask is not None:
            keep = check.keep_mask(function, keep_mask, scores_shape, "(B, H, L_q, L_k)", query, "query")
            keep = keep[(None,) * max(0, 2 - keep.ndim)]  # a 0-D or 1-D mask as (1, 1) or (1, L_k): a view
        if key_padding_mask is not None:
            ok = isinstance(key_padding_mask, torch.Tensor) and key_padding_mask.dtype == torch.bool
            if not ok or tuple(key_padding_mask.shape) != (B, L_k):
                check.fail(
                    function,
                    "key_padding_mask",
                    check.describe(key_padding_mask),
                    {
                        "en": f"a (B, L_k) = {(B, L_k)} bool tensor, True at padding (keys to ignore)",
                        "zh": f"形状为 (B, L_k) = {(B, L_k)} 的 bool 张量，True 表示填充位置（要忽略的键）",
                    },
                )
            check.mask_on_device_of(function, "key_padding_mask", key_padding_mask, query, "query")
            real = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, L_k): True at real keys
            keep = real if keep is None else keep & real
        return keep

    # -- weight transfer

    def packed_weights(self):
        """This layer's parameters in ``nn.MultiheadAttention``'s layout, as a dict of PACKED_NAMES:
        q_weight (H·d, E), k_weight (H·d, kdim), v_weight (H·d, vdim): (out, in) matrices whose rows
        h·d … (h+1)·d - 1 belong to head h; out_weight (E, H·d); the biases (None without bias).
        New tensors, detached from the layer."""
        raise NotImplementedError

    def load_packed_weights(self, packed):
        """Copy `packed` (a dict as ``packed_weights`` returns) into this layer; returns self."""
        raise NotImplementedError

    def _packed_shapes(self):
        """{name: shape (None without bias)} of the packed layout for this layer's sizes."""
        E, Hd = self.embed_dim, self.num_heads * self.head_dim
        bias = (lambda shape: shape) if self.bias else (lambda shape: None)
        return {"q_weight": (Hd, E), "k_weight": (Hd, self.kdim), "v_weight": (Hd, self.vdim), "out_weight": (E, Hd),
                "q_bias": bias((Hd,)), "k_bias": bias((Hd,)), "v_bias": bias((Hd,)), "out_bias": bias((E,))}

    def _check_packed(self, packed):
        """`packed` must hold every name of PACKED_NAMES with a tensor of this layer's shape."""
        function = f"{type(self).__name__}.load_packed_weights"
        shapes = self._packed_shapes()
        needed = [name for name in PACKED_NAMES if shapes[name] is not None]  # no bias: no bias entry needed
        ok = isinstance(packed, dict) and all(name in packed for name in needed)
        for name in needed if ok else ():
            value, shape = packed[name], shapes[name]
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                ok = False
                break
            check.has_values(function, "packed", value)
        if not ok:
            shown = ", ".join(f"{name} {shape}" for name, shape in shapes.items() if shape is not None)
            check.fail(function, "packed", check.describe(packed),
                       {"en": f"a dict as packed_weights() returns, with tensors of these shapes: {shown}",
                        "zh": f"与 packed_weights() 返回值相同的字典，其中张量的形状为：{shown}"})

    def copy_weights_from(self, other):
        """Copy the parameters of `other` (a naive or fused layer, or an ``nn.MultiheadAttention``)
        of the same sizes into this layer; returns self."""
        if not isinstance(other, (_Multihead, nn.MultiheadAttention)):
            check.fail(f"{type(self).__name__}.copy_weights_from", "other", check.describe(other),
                       {"en": "a NaiveMultiheadAttention, FusedMultiheadAttention or nn.MultiheadAttention layer",
                        "zh": "NaiveMultiheadAttention、FusedMultiheadAttention 或 nn.MultiheadAttention 层"})
        packed = torch_packed_weights(other) if isinstance(other, nn.MultiheadAttention) else other.packed_weights()
        shapes = {name: None if value is None else tuple(value.shape) for name, value in packed.items()}
        mine = {name: None if value is None else tuple(value.shape) for name, value in self.packed_weights().items()}
        if shapes != mine or other.num_heads != self.num_heads:
            check.fail(
                f"{type(self).__name__}.copy_weights_from",
                "other",
                type(other).__name__,
                {
                    "en": f"a layer with the same sizes (embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                    f"kdim={self.kdim}, vdim={self.vdim}, bias={self.bias})",
                    "zh": f"大小相同的层（embed_dim={self.embed_dim}、num_heads={self.num_heads}、"
                    f"kdim={self.kdim}、vdim={self.vdim}、bias={self.bias}）",
                },
            )
        return self.load_packed_weights(packed)

    @classmethod
    def from_torch(cls, mha):
        """A new layer of this kind with the sizes and weights of ``nn.MultiheadAttention`` `mha`."""
        if not isinstance(mha, nn.MultiheadAttention) or mha.bias_k is not None or mha.add_zero_attn:
            check.fail(
                f"{cls.__name__}.from_torch",
                "mha",
                type(mha).__name__,
                {
                    "en": "an nn.MultiheadAttention without add_bias_kv or add_zero_attn",
                    "zh": "未启用 add_bias_kv 与 add_zero_attn 的 nn.MultiheadAttention",
                },
            )
        weight = mha.out_proj.weight
        with torch.device(weight.device):  # made where mha is, not on the CPU first
            layer = cls(mha.embed_dim, mha.num_heads, kdim=mha.kdim, vdim=mha.vdim, bias=mha.in_proj_bias is not None)
        return layer.to(weight.dtype).copy_weights_from(mha)

    def to_torch(self):
        """A new ``nn.MultiheadAttention(..., batch_first=True)`` with this layer's weights. Called
        with ``average_attn_weights=False`` it returns this layer's output and (B, H, L_q, L_k) weights."""
        if self.num_heads * self.head_dim != self.embed_dim:
            check.fail(
                f"{type(self).__name__}.to_torch",
                "self",
                f"head_dim = {self.head_dim}",
                {
                    "en": f"heads of size embed_dim / num_heads = {self.embed_dim // self.num_heads}, "
                    "the only size nn.MultiheadAttention has",
                    "zh": f"每个头的大小为 embed_dim / num_heads = {self.embed_dim // self.num_heads}，"
                    "nn.MultiheadAttention 只支持这一种",
                },
            )
        weight = next(self.parameters())
        mha = nn.MultiheadAttention(self.embed_dim, self.num_heads, bias=self.bias, kdim=self.kdim, vdim=self.vdim,
                                    batch_first=True, dtype=weight.dtype, device=weight.device)
        packed = self.packed_weights()
        with torch.no_grad():
            for name, target in torch_parameters(mha).items():
                if target is not None:
                    target.copy_(packed[name])
        return mha


def torch_parameters(mha):
    """The parameters of ``nn.MultiheadAttention`` `mha` under the names of the packed layout: views
    into its tensors (their ``.grad`` is the matching slice of its gradients after backward once
    read again). With kdim = vdim = E it keeps Q, K and V in one (3E, E) ``in_proj_weight``, rows
    Q then K then V; otherwise in ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``."""
    _torch_mha("torch_parameters", "mha", mha)
    E = mha.embed_dim
    if mha._qkv_same_embed_dim:
        q, k, v = mha.in_proj_weight.split(E)  # (E, E) each: rows 0…E-1 are Q, then K, then V
    else:
        q, k, v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    biases = mha.in_proj_bias.split(E) if mha.in_proj_bias is not None else (None, None, None)
    return dict(zip(PACKED_NAMES, (q, k, v, mha.out_proj.weight, *biases, mha.out_proj.bias)))


def torch_packed_weights(mha):
    """``torch_parameters(mha)`` detached and copied: the packed layout of an nn.MultiheadAttention."""
    _torch_mha("torch_packed_weights", "mha", mha)
    return {name: None if p is None else p.detach().clone() for name, p in torch_parameters(mha).items()}


class NaiveMultiheadAttention(_Multihead):
    """Multi-head attention as H independent heads in a loop (easy to read, slow for many heads).

    Args:
        embed_dim: E, the features of each query position (and of the output).
        num_heads: H, the number of heads.
        kdim, vdim: the features of each key and value position (default E), for cross-attention.
        bias: whether the projections learn a bias (as in ``nn.MultiheadAttention``).
        head_dim: d, each head's size; default E / H. A larger d (up to d = E, "full-size heads")
            multiplies the parameters; ``nn.MultiheadAttention`` only has d = E / H.

    Parameters: ``heads``, a ModuleList of H ``AttentionHead`` (each q_proj E -> d, k_proj kdim -> d,
    v_proj vdim -> d), and ``out_proj`` (H·d -> E).

    ``forward(query, key, value, keep_mask=None, key_padding_mask=None, need_weights=True)``:
        query: (B, L_q, E); key: (B, L_k, kdim); value: (B, L_k, vdim). Self-attention: the same
            tensor three times.
        keep_mask: optional bool, broadcastable to (B, H, L_q, L_k); True where a query may attend
            to a key. A mask with an H axis gives each head its own mask. Broadcasting reads the
            axes from the right: (L_q, L_k) is the same for every item and head, a 3-D mask is
            (H, L_q, L_k), one per head (not per batch item: that is (B, 1, L_q, L_k)).
        key_padding_mask: optional bool (B, L_k); True at padding (nn.MultiheadAttention's meaning).
        need_weights: False runs F.scaled_dot_product_attention in each head and returns no weights.
    Returns ``(output (B, L_q, E), weights (B, H, L_q, L_k) or None)``.
    """

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, bias=True, head_dim=None):
        super().__init__(embed_dim, num_heads, kdim, vdim, bias, head_dim)
        check.modules_fit("NaiveMultiheadAttention", "num_heads", num_heads, 4 * num_heads + 2)  # 4 per head
        self.heads = nn.ModuleList(
            AttentionHead(embed_dim, self.head_dim, self.kdim, self.vdim, bias) for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(num_heads * self.head_dim, embed_dim, bias=bias)  # H·d -> E

    def forward(self, query, key, value, keep_mask=None, key_padding_mask=None, need_weights=True):
        keep = self._check_inputs(query, key, value, keep_mask, key_padding_mask, need_weights)
        outputs, weights = [], []
        for h, head in enumerate(self.heads):  # one head at a time
            out, w = head(query, key, value, keep_mask=_mask_of_head(keep, h), need_weights=need_weights)
            outputs.append(out)  # (B, L_q, d): keep the head's output, not its weights
            weights.append(w)  # (B, L_q, L_k)
        concatenated = torch.cat(outputs, dim=-1)  # (B, L_q, H·d): the heads side by side
        output = self.out_proj(concatenated)  # (B, L_q, E): W_O mixes the heads
        return output, torch.stack(weights, dim=1) if need_weights else None  # (B, H, L_q, L_k)

    def packed_weights(self):
        found = {}
        for kind in ("q", "k", "v"):
            projections = [getattr(head, f"{kind}_proj") for head in self.heads]
            found[f"{kind}_weight"] = torch.cat([p.weight for p in projections])  # (H·d, in): head 0's rows first
            found[f"{kind}_bias"] = torch.cat([p.bias for p in projections]) if self.bias else None  # (H·d,)
        found["out_weight"] = self.out_proj.weight
        found["out_bias"] = self.out_proj.bias if self.bias else None
        return {name: None if found[name] is None else found[name].detach().clone() for name in PACKED_NAMES}

    def load_packed_weights(self, packed):
        self._check_packed(packed)
        d = self.head_dim
        with torch.no_grad():
            for h, head in enumerate(self.heads):
                rows = slice(h * d, (h + 1) * d)  # head h's rows of the packed matrices
                for kind in ("q", "k", "v"):
                    projection = getattr(head, f"{kind}_proj")
                    projection.weight.copy_(packed[f"{kind}_weight"][rows])
                    if self.bias:
                        projection.bias.copy_(packed[f"{kind}_bias"][rows])
            self.out_proj.weight.copy_(packed["out_weight"])
            if self.bias:
                self.out_proj.bias.copy_(packed["out_bias"])
        return self


def _mask_of_head(keep, h):
    """Head h's part of a keep mask that broadcasts to (B, H, L_q, L_k): a mask that broadcasts to
    (B, L_q, L_k). Broadcasting lines the axes up from the right, so a 3-D mask is (H, L_q, L_k),
    its first axis the heads (as in the fused layer and F.scaled_dot_product_attention), never
    the batch; a 2-D one is (L_q, L_k), the same for every head."""
    if keep is None:
        return None
    keep = keep[(None,) * (4 - keep.ndim)]  # (B or 1, H or 1, L_q or 1, L_k or 1): a view, the missing axes in front
    return keep[:, h if keep.shape[1] > 1 else 0]  # (B or 1, L_q or 1, L_k or 1)


class FusedMultiheadAttention(_Multihead):
    """Multi-head attention with one projection for all heads and one batched attention call.

    Args:
        embed_dim: E, the features of each query position (and of the output).
        num_heads: H, the number of heads; it must divide E (each head has d = E / H features).
        kdim, vdim: the features of each key and value position (default E), for cross-attention.
        bias: whether the projections learn a bias (as in ``nn.MultiheadAttention``).

    Parameters: ``q_proj`` (E -> E), ``k_proj`` (kdim -> E), ``v_proj`` (vdim -> E), ``out_proj``
    (E -> E), each an ``nn.Linear``. Row block h·d … (h+1)·d - 1 of q_proj.weight is head h's W_Q.

    ``forward(query, key, value, keep_mask=None, key_padding_mask=None, need_weights=True)``: the
    arguments of ``NaiveMultiheadAttention.forward``. With need_weights=False the attention is one
    call of F.scaled_dot_product_attention (fast, and no (B, H, L_q, L_k) weights are ever stored).
    Returns ``(output (B, L_q, E), weights (B, H, L_q, L_k) or None)``.
    """

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, bias=True):
        super().__init__(embed_dim, num_heads, kdim, vdim, bias, None)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # E -> H·d, every head at once
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)  # kdim -> H·d
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)  # vdim -> H·d
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # H·d -> E

    def forward(self, query, key, value, keep_mask=None, key_padding_mask=None, need_weights=True):
        keep = self._check_inputs(query, key, value, keep_mask, key_padding_mask, need_weights)
        H = self.num_heads
        q = split_heads(self.q_proj(query), H)  # (B, H, L_q, d)
        k = split_heads(self.k_proj(key), H)  # (B, H, L_k, d)
        v = split_heads(self.v_proj(value), H)  # (B, H, L_k, d)
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, keep_mask=keep)  # (B, H, L_q, d), (B, H, L_q, L_k)
        else:
            out, weights = _sdpa(q, k, v, keep), None  # (B, H, L_q, d)
        return self.out_proj(merge_heads(out)), weights  # (B, L_q, E)

    def packed_weights(self):
        found = {}
        for kind, projection in (("q", self.q_proj), ("k", self.k_proj), ("v", self.v_proj), ("out", self.out_proj)):
            found[f"{kind}_weight"] = projection.weight.detach().clone()
            found[f"{kind}_bias"] = projection.bias.detach().clone() if self.bias else None
        return {name: found[name] for name in PACKED_NAMES}

    def load_packed_weights(self, packed):
        self._check_packed(packed)
        with torch.no_grad():
            for kind in ("q", "k", "v", "out"):
                projection = getattr(self, f"{kind}_proj")
                projection.weight.copy_(packed[f"{kind}_weight"])
                if self.bias:
                    projection.bias.copy_(packed[f"{kind}_bias"])
        return self


def packed_gradients(layer):
    """The gradients of `layer` (naive, fused or ``nn.MultiheadAttention``) after a backward pass,
    in the packed layout of ``packed_weights`` (None where a parameter has no gradient or no bias):
    so the gradients of the three kinds of layer can be compared entry by entry."""
    if not isinstance(layer, (_Multihead, nn.MultiheadAttention)):
        check.fail("packed_gradients", "layer", check.describe(layer),
                   {"en": "a NaiveMultiheadAttention, FusedMultiheadAttention or nn.MultiheadAttention layer",
                    "zh": "NaiveMultiheadAttention、FusedMultiheadAttention 或 nn.MultiheadAttention 层"})
    if isinstance(layer, nn.MultiheadAttention):
        found = _torch_grads(layer)
        return {name: None if p is None or p.grad is None else p.grad.clone() for name, p in found.items()}
    if isinstance(layer, NaiveMultiheadAttention):
        found = {}
        for kind in ("q", "k", "v"):
            projections = [getattr(head, f"{kind}_proj") for head in layer.heads]
            found[f"{kind}_weight"] = _cat_grads([p.weight for p in projections])
            found[f"{kind}_bias"] = _cat_grads([p.bias for p in projections]) if layer.bias else None
        found["out_weight"] = _grad(layer.out_proj.weight)
        found["out_bias"] = _grad(layer.out_proj.bias) if layer.bias else None
        return {name: found[name] for name in PACKED_NAMES}
    found = {}
    for kind in ("q", "k", "v", "out"):
        projection = getattr(layer, f"{kind}_proj")
        found[f"{kind}_weight"] = _grad(projection.weight)
        found[f"{kind}_bias"] = _grad(projection.bias) if layer.bias else None
    return {name: found[name] for name in PACKED_NAMES}


def _grad(parameter):
    return None if parameter is None or parameter.grad is None else parameter.grad.clone()


def _cat_grads(parameters):
    grads = [p.grad for p in parameters]
    return None if any(g is None for g in grads) else torch.cat(grads)


def _torch_grads(mha):
    """nn.MultiheadAttention's parameters under the packed names, with .grad split like the weights."""
    E = mha.embed_dim

    class _Slice:  # a (grad) holder for a slice of a packed parameter
        def __init__(self, parameter, index):
            self.grad = None if parameter.grad is None else parameter.grad.split(E)[index]

    if mha._qkv_same_embed_dim:
        q, k, v = (_Slice(mha.in_proj_weight, i) for i in range(3))
    else:
        q, k, v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    biases = [_Slice(mha.in_proj_bias, i) for i in range(3)] if mha.in_proj_bias is not None else [None] * 3
    return dict(zip(PACKED_NAMES, (q, k, v, mha.out_proj.weight, *biases, mha.out_proj.bias)))


def parameter_count(module):
    """The number of learned numbers in `module`."""
    check.module("parameter_count", "module", module)
    return sum(p.numel() for p in module.parameters())


def operators(call, sizes=False):
    """Run ``call()`` and list the PyTorch operators (ATen ops, such as "aten.mm.default") it ran,
    in order. Returns (result, [operator names]); with ``sizes=True``, (result, [(operator name,
    the number of elements of the largest tensor it returned)]).

    It watches at the dispatcher, below Python (``TorchDispatchMode``), so it sees what actually
    ran: for ``nn.MultiheadAttention`` it tells its fast path (one operator,
    "aten._native_multi_head_attention.default") from its general path (many); for
    ``F.scaled_dot_product_attention`` it names the kernel that ran (its flash kernel on the CPU,
    "aten._scaled_dot_product_flash_attention_for_cpu.default", or the operators of its math
    fallback), and ``sizes`` shows whether any of them made a (B, H, L_q, L_k) tensor."""
    _callable("operators", "call", call)
    check.flag("operators", "sizes", sizes)
    from torch.utils._python_dispatch import TorchDispatchMode  # PyTorch's hook for watching operators

    class _Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.found = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            returned = out if isinstance(out, (tuple, list)) else (out,)
            largest = max((t.numel() for t in returned if isinstance(t, torch.Tensor)), default=0)
            self.found.append((str(func), largest) if sizes else str(func))
            return out

    with _Record() as record:
        result = call()
    return result, record.found


FAST_PATH = "aten._native_multi_head_attention.default"


def took_fast_path(mha, *args, **kwargs):
    """Whether ``mha(*args, **kwargs)`` (an ``nn.MultiheadAttention`` call) runs the fast path."""
    _torch_mha("took_fast_path", "mha", mha)
    _, names = operators(lambda: mha(*args, **kwargs))
    return FAST_PATH in names


def milliseconds(call, repeat=5, warmup=1):
    """The median wall time of ``call()`` in milliseconds, over `repeat` runs after `warmup` runs.
    It calls as many times as asked (no upper bound): repeat=10**6 of a 10 ms call takes hours."""
    import statistics
    import time

    _callable("milliseconds", "call", call)
    check.positive_int("milliseconds", "repeat", repeat)
    check.whole_number("milliseconds", "warmup", warmup)

    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _torch_mha(function, argument, mha):
    return check.module(function, argument, mha, nn.MultiheadAttention,
                        {"en": "an nn.MultiheadAttention layer", "zh": "nn.MultiheadAttention 层"})


def _callable(function, argument, call):
    if not callable(call):
        check.fail(function, argument, check.describe(call),
                   {"en": "a function to call with no arguments, e.g. lambda: layer(x, x, x)",
                    "zh": "可无参数调用的函数，例如 lambda: layer(x, x, x)"})
    return call
