"""Score functions and scaled dot-product attention, written to be read.

Shapes: queries are (..., L_q, d_q), keys (..., L_k, d_k), values (..., L_k, d_v); the leading
axes (batch, heads, ...) must match. Every score function returns (..., L_q, L_k): one score for
each (query, key) pair. Attention returns ``(output, weights)``, in that order, always.

Masks mean one thing everywhere in this package: a boolean ``keep_mask``, True where a query
may attend to a key (the meaning of the boolean mask of ``F.scaled_dot_product_attention``).

Every function here that builds the (..., L_q, L_k) scores whole refuses, before building them,
scores of more than ``validation.MAX_SCORE_BYTES`` bytes (1 GiB; raise it, or set None, to go
further): lesson 08's ``tiled.tiled_attention`` and ``F.scaled_dot_product_attention`` never hold
them all.
"""

import math

import torch

from . import masks
from . import validation as check


def _pair(function, query, key, same_features=True):
    """Validate a (query, key) pair; return (d_q, d_k)."""
    check.tensor(function, "query", query, min_ndim=2, layout="(..., L_q, d_q)")
    check.tensor(function, "key", key, min_ndim=2, layout="(..., L_k, d_k)")
    check.alike(function, "key", key, query, "query")
    if key.shape[:-2] != query.shape[:-2]:
        check.fail(
            function,
            "key",
            check.describe(key),
            {
                "en": f"the same leading (batch) axes as query, {tuple(query.shape[:-2])}",
                "zh": f"与 query 相同的前导（批量）维度 {tuple(query.shape[:-2])}",
            },
        )
    if same_features:
        check.same_size(function, "key", key, -1, query.shape[-1], {"en": "query's d_q", "zh": "query 的 d_q"})
    return query.shape[-1], key.shape[-1]


def dot_scores(query, key):
    """score(q, k) = q · k. Needs d_q == d_k. Returns (..., L_q, L_k)."""
    _pair("dot_scores", query, key)
    check.attention_scores_fit("dot_scores", query, key)
    return query @ key.transpose(-2, -1)


def scaled_dot_scores(query, key):
    """score(q, k) = q · k / √d_k: the dot product, kept at unit variance as d_k grows."""
    _, d_k = _pair("scaled_dot_scores", query, key)
    check.attention_scores_fit("scaled_dot_scores", query, key)
    return query @ key.transpose(-2, -1) / math.sqrt(max(d_k, 1))  # d_k = 0: every score is 0 anyway


def bilinear_scores(query, key, weight):
    """score(q, k) = qᵀ W k with W of shape (d_q, d_k): lets queries and keys differ in size."""
    d_q, d_k = _pair("bilinear_scores", query, key, same_features=False)
    check.attention_scores_fit("bilinear_scores", query, key)
    check.tensor("bilinear_scores", "weight", weight, min_ndim=2, layout=f"({d_q}, {d_k})")
    check.alike("bilinear_scores", "weight", weight, query, "query")
    if tuple(weight.shape) != (d_q, d_k):
        check.fail(
            "bilinear_scores",
            "weight",
            check.describe(weight),
            {"en": f"a tensor of shape (d_q, d_k) = ({d_q}, {d_k})", "zh": f"形状为 (d_q, d_k) = ({d_q}, {d_k}) 的张量"},
        )
    return query @ weight @ key.transpose(-2, -1)


def additive_scores(query, key, w_query, w_key, v):
    """score(q, k) = vᵀ tanh(W_q q + W_k k), Bahdanau's "additive" or MLP score.

    w_query: (d_q, d_h), w_key: (d_k, d_h), v: (d_h,). Equal to an MLP on the concatenation
    [q; k] with weight [W_q; W_k], without ever building the (L_q, L_k, d_q + d_k) concatenation.
    """
    d_q, d_k = _pair("additive_scores", query, key, same_features=False)
    check.tensor("additive_scores", "w_query", w_query, min_ndim=2, layout=f"({d_q}, d_h)")
    check.alike("additive_scores", "w_query", w_query, query, "query")
    check.same_size("additive_scores", "w_query", w_query, 0, d_q, {"en": "query's d_q", "zh": "query 的 d_q"})
    d_h = w_query.shape[1]
    check.tensor("additive_scores", "w_key", w_key, min_ndim=2, layout=f"({d_k}, {d_h})")
    check.alike("additive_scores", "w_key", w_key, query, "query")
    if tuple(w_key.shape) != (d_k, d_h):
        check.fail(
            "additive_scores",
            "w_key",
            check.describe(w_key),
            {"en": f"a tensor of shape (d_k, d_h) = ({d_k}, {d_h})", "zh": f"形状为 (d_k, d_h) = ({d_k}, {d_h}) 的张量"},
        )
    check.tensor("additive_scores", "v", v, layout=f"({d_h},)")
    check.alike("additive_scores", "v", v, query, "query")
    if tuple(v.shape) != (d_h,):
        check.fail(
            "additive_scores",
            "v",
            check.describe(v),
            {"en": f"a tensor of shape (d_h,) = ({d_h},)", "zh": f"形状为 (d_h,) = ({d_h},) 的张量"},
        )
    # the sum q + k below is (..., L_q, L_k, d_h): d_h numbers per score, built whole
    L_q, L_k = query.shape[-2], key.shape[-2]
    check.scores_fit("additive_scores", "query" if L_q >= L_k else "key", query if L_q >= L_k else key,
                     (*query.shape[:-2], L_q, L_k, d_h), query.dtype)
    q = (query @ w_query).unsqueeze(-2)  # (..., L_q, 1, d_h)
    k = (key @ w_key).unsqueeze(-3)  # (..., 1, L_k, d_h)
    return torch.tanh(q + k) @ v  # (..., L_q, L_k)


def scaled_dot_product_attention(query, key, value, keep_mask=None, scale=None):
    """softmax(Q Kᵀ / √d_k) V, returning ``(output, weights)``.

    Args:
        query: (..., L_q, d_k) float tensor.
        key: (..., L_k, d_k), same leading axes as query.
        value: (..., L_k, d_v).
        keep_mask: optional bool tensor broadcastable to (..., L_q, L_k); True = may attend.
        scale: multiplies the scores; default 1/√d_k. A finite number (or a 0-dim tensor holding
            one) that query's dtype can hold: NaN, ±∞ or 1e300 in float32 are refused.

    Returns:
        output: (..., L_q, d_v), the weighted average of the values for each query.
        weights: (..., L_q, L_k), each row sums to 1, or is all zeros where the keep-mask hides
            every key of that row (then the output row is zero too, as in
            ``F.scaled_dot_product_attention``); never NaN.
    """
    function = "scaled_dot_product_attention"
    _, d_k = _pair(function, query, key)
    check.tensor(function, "value", value, min_ndim=2, layout="(..., L_k, d_v)")
    check.alike(function, "value", value, query, "query")
    check.same_size(function, "value", value, -2, key.shape[-2], {"en": "key's L_k", "zh": "key 的 L_k"})
    if value.shape[:-2] != key.shape[:-2]:
        check.fail(
            function,
            "value",
            check.describe(value),
            {
                "en": f"the same leading (batch) axes as key, {tuple(key.shape[:-2])}",
                "zh": f"与 key 相同的前导（批量）维度 {tuple(key.shape[:-2])}",
            },
        )
    check.scale(function, scale, query.dtype, tensors=True)  # NaN, ±∞ or past the dtype's range: all-NaN weights
    check.attention_scores_fit(function, query, key)  # before they exist: (..., L_q, L_k)
    if scale is None:
        scale = 1.0 / math.sqrt(d_k) if d_k else 1.0  # d_k = 0: every score is 0 whatever the scale

    scores = query @ key.transpose(-2, -1) * scale  # (..., L_q, L_k)
    weights = masks.masked_softmax(scores, keep_mask, caller=function)  # fully hidden rows: zeros, never NaN
    return weights @ value, weights
