"""Self-attention and cross-attention as ``torch.nn`` layers, built on the package's
``scaled_dot_product_attention``.

Both layers learn four linear maps, as ``nn.MultiheadAttention`` with one head does:

- ``q_proj`` turns the query side into queries, ``k_proj`` and ``v_proj`` turn the key/value side
  into keys and values (all of size ``embed_dim``);
- ``out_proj`` maps the attention output back to ``embed_dim``. A single head would not need it,
  but keeping it makes a layer the one-head case of multi-head attention (lesson 04), gives it the
  same parameters as ``nn.MultiheadAttention(embed_dim, num_heads=1, kdim=..., vdim=...)``, and
  lets ``to_multihead`` / ``from_multihead`` copy weights across, so tests compare the two.

The only difference between the layers is where the keys and values come from:

- ``SelfAttention(x)``: queries, keys and values all come from the same sequence x, (B, L, E);
  the weights are (B, L, L).
- ``CrossAttention(x, memory)``: queries come from x, the decoder side, (B, L_q, E_q); keys and
  values come from memory, the encoder's output, (B, L_kv, E_kv); the weights are (B, L_q, L_kv).
  L_q and L_kv, E_q and E_kv may all differ.

Both return ``(output, weights)``, in that order, and take an optional boolean ``keep_mask``,
True where a query may attend to a key.
"""

import types

import torch
from torch import nn

from . import validation as check
from .attention import scaled_dot_product_attention
from .masks import check_keep_mask


class _ProjectedAttention(nn.Module):
    """The parameters and the arithmetic both layers share (not used on its own)."""

    def __init__(self, embed_dim, kv_dim, bias):
        super().__init__()
        for name, size in (("embed_dim", embed_dim), ("kv_dim", kv_dim)):
            check.positive_int(type(self).__name__, name, size)
        check.flag(type(self).__name__, "bias", bias)  # bias='no' would build biases
        check.fits_in_memory(type(self).__name__, "embed_dim" if embed_dim >= kv_dim else "kv_dim",
                             max(embed_dim, kv_dim), 2 * embed_dim * (embed_dim + kv_dim), 4)  # the four weights
        self.embed_dim, self.kv_dim = embed_dim, kv_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # E_q -> E_q
        self.k_proj = nn.Linear(kv_dim, embed_dim, bias=bias)  # E_kv -> E_q
        self.v_proj = nn.Linear(kv_dim, embed_dim, bias=bias)  # E_kv -> E_q
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # E_q -> E_q

    def _check(self, argument, value, size, layout, size_name):
        """`value` must be a float (B, L, size) tensor; else a bilingual error naming `argument`."""
        function = f"{type(self).__name__}.forward"
        check.tensor(function, argument, value, min_ndim=3, layout=layout)
        check.alike(function, argument, value, self.q_proj.weight, "self.q_proj.weight")
        if value.ndim != 3 or value.shape[-1] != size:
            check.fail(
                function,
                argument,
                check.describe(value),
                {
                    "en": f"shape {layout} with {size_name} = {size}, the feature size the layer was built for",
                    "zh": f"形状 {layout}，其中 {size_name} = {size}，即构建该层时设定的特征数",
                },
            )

    def _check_mask(self, keep_mask, x, memory):
        """A keep mask must broadcast to the (B, L_q, L_kv) weights; named as this layer's argument."""
        if keep_mask is not None:
            weights = types.SimpleNamespace(shape=(x.shape[0], x.shape[1], memory.shape[1]), device=x.device)
            check_keep_mask(f"{type(self).__name__}.forward", keep_mask, weights)

    def _attend(self, x, memory, keep_mask):
        self._check_mask(keep_mask, x, memory)
        # the (B, L_q, L_kv) weights this layer returns, before any is computed
        check.attention_scores_fit(f"{type(self).__name__}.forward", x, memory,
                                   names=("x", "x" if memory is x else "memory"))
        q = self.q_proj(x)  # (B, L_q, E)
        k = self.k_proj(memory)  # (B, L_kv, E)
        v = self.v_proj(memory)  # (B, L_kv, E)
        output, weights = scaled_dot_product_attention(q, k, v, keep_mask=keep_mask)  # (B, L_q, E), (B, L_q, L_kv)
        return self.out_proj(output), weights

    # -- weight transfer with nn.MultiheadAttention (one head, batch_first)

    def to_multihead(self):
        """A new ``nn.MultiheadAttention(num_heads=1, batch_first=True)`` with this layer's weights.

        Called as ``mha(x, memory, memory)`` (``mha(x, x, x)`` for self-attention) it returns the
        same output and the same (B, L_q, L_kv) weights as this layer (with one head, the average
        over heads that it returns by default is that head's weights).
        """
        bias = self.q_proj.bias is not None
        mha = nn.MultiheadAttention(
            self.embed_dim, 1, bias=bias, kdim=self.kv_dim, vdim=self.kv_dim, batch_first=True,
            dtype=self.q_proj.weight.dtype, device=self.q_proj.weight.device,
        )
        mha.load_state_dict(self._multihead_state(mha))
        return mha

    def from_multihead(self, mha):
        """Copy the weights of a one-head ``nn.MultiheadAttention`` of matching sizes into this layer;
        returns self."""
        if not isinstance(mha, nn.MultiheadAttention) or mha.num_heads != 1 or mha.embed_dim != self.embed_dim \
                or mha.kdim != self.kv_dim or mha.vdim != self.kv_dim \
                or (mha.in_proj_bias is None) != (self.q_proj.bias is None):
            check.fail(
                f"{type(self).__name__}.from_multihead",
                "mha",
                type(mha).__name__,
                {
                    "en": f"nn.MultiheadAttention with num_heads=1, embed_dim={self.embed_dim}, kdim=vdim={self.kv_dim}, "
                    f"bias={self.q_proj.bias is not None}",
                    "zh": f"num_heads=1、embed_dim={self.embed_dim}、kdim=vdim={self.kv_dim}、"
                    f"bias={self.q_proj.bias is not None} 的 nn.MultiheadAttention",
                },
            )
        with torch.no_grad():
            for mine, theirs in zip(self._projections(), self.multihead_parameters(mha)):
                for name in ("weight", "bias"):
                    if getattr(mine, name) is not None:
                        getattr(mine, name).copy_(theirs[name])
        return self

    def _projections(self):
        return (self.q_proj, self.k_proj, self.v_proj, self.out_proj)

    @staticmethod
    def multihead_parameters(mha):
        """The q, k, v and out projections of a one-head ``nn.MultiheadAttention``, as four dicts
        {"weight": (out, in) tensor, "bias": (out,) tensor or None}. They are views into mha's
        parameters (and their ``.grad`` gives the matching slices of mha's gradients)."""
        if not isinstance(mha, nn.MultiheadAttention) or mha.num_heads != 1:
            check.fail("multihead_parameters", "mha", type(mha).__name__,
                       {"en": "an nn.MultiheadAttention with num_heads=1", "zh": "num_heads=1 的 nn.MultiheadAttention"})
        E = mha.embed_dim
        if mha._qkv_same_embed_dim:  # one packed (3E, E) in_proj_weight
            weights = mha.in_proj_weight.split(E)
        else:  # separate q, k, v weights, because kdim or vdim differ from embed_dim
            weights = (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
        biases = mha.in_proj_bias.split(E) if mha.in_proj_bias is not None else (None, None, None)
        found = [{"weight": w, "bias": b} for w, b in zip(weights, biases)]
        return found + [{"weight": mha.out_proj.weight, "bias": mha.out_proj.bias}]

    def _multihead_state(self, mha):
        state = {}
        if mha._qkv_same_embed_dim:
            state["in_proj_weight"] = torch.cat([p.weight for p in self._projections()[:3]])  # (3E, E)
        else:
            state["q_proj_weight"] = self.q_proj.weight
            state["k_proj_weight"] = self.k_proj.weight
            state["v_proj_weight"] = self.v_proj.weight
        state["out_proj.weight"] = self.out_proj.weight
        if self.q_proj.bias is not None:
            state["in_proj_bias"] = torch.cat([p.bias for p in self._projections()[:3]])  # (3E,)
            state["out_proj.bias"] = self.out_proj.bias
        return {name: value.detach().clone() for name, value in state.items()}


class SelfAttention(_ProjectedAttention):
    """Self-attention: queries, keys and values are all projected from the same sequence.

    Args:
        embed_dim: E, the number of features of each position of x (and of the output).
        bias: whether the four projections learn a bias (as in ``nn.MultiheadAttention``).

    ``forward(x, keep_mask=None) -> (output, weights)``:
        x: (B, L, E) float tensor.
        keep_mask: optional bool tensor broadcastable to (B, L, L); True where query i may attend
            to key j (e.g. a causal mask). A query that may attend to nothing gets zero weights
            and a zero attention output (so the layer returns out_proj's bias there).
        output: (B, L, E). weights: (B, L, L), row i = how much position i reads from each position.
    """

    def __init__(self, embed_dim, bias=True):
        super().__init__(embed_dim, embed_dim, bias)

    def forward(self, x, keep_mask=None):
        self._check("x", x, self.embed_dim, "(B, L, E)", "E")
        return self._attend(x, x, keep_mask)  # keys and values from x itself


class CrossAttention(_ProjectedAttention):
    """Cross-attention: queries from one sequence (the decoder's), keys and values from another
    (the encoder's output, "memory").

    Args:
        embed_dim: E_q, the number of features of each position of x (and of the output).
        kv_dim: E_kv, the number of features of each position of memory (default: E_q).
        bias: whether the four projections learn a bias (as in ``nn.MultiheadAttention``).

    ``forward(x, memory, keep_mask=None) -> (output, weights)``:
        x: (B, L_q, E_q) float tensor, the decoder side: one query per position.
        memory: (B, L_kv, E_kv) float tensor, the encoder side: one key and one value per position.
        keep_mask: optional bool tensor broadcastable to (B, L_q, L_kv); True where a query may
            attend to a key (e.g. False on the encoder's padding). A query that may attend to
            nothing gets zero weights and a zero attention output.
        output: (B, L_q, E_q). weights: (B, L_q, L_kv), row i = how much decoder position i reads
            from each encoder position: the alignment.
    """

    def __init__(self, embed_dim, kv_dim=None, bias=True):
        super().__init__(embed_dim, embed_dim if kv_dim is None else kv_dim, bias)

    def forward(self, x, memory, keep_mask=None):
        self._check("x", x, self.embed_dim, "(B, L_q, E_q)", "E_q")
        self._check("memory", memory, self.kv_dim, "(B, L_kv, E_kv)", "E_kv")
        if memory.shape[0] != x.shape[0]:
            check.fail(
                "CrossAttention.forward",
                "memory",
                check.describe(memory),
                {
                    "en": f"the batch size of x, {x.shape[0]}, on axis 0",
                    "zh": f"第 0 维为批量大小 {x.shape[0]}，与 x 一致",
                },
            )
        return self._attend(x, memory, keep_mask)
