"""Masks: which keys each query may attend to, and how to read every other convention.

Inside this package a mask means one thing: a boolean **keep** mask, True where a query may
attend to a key (the meaning of the boolean ``attn_mask`` of ``F.scaled_dot_product_attention``).
It broadcasts against scores of shape (..., L_q, L_k), for example (B, H, L_q, L_k):

    padding_mask(lengths, L_k)                       (B, 1, 1, L_k)  hides each sequence's padded keys
    causal_mask(L_q, L_k)                            (L_q, L_k)      hides the keys after each query, aligned
                                                                     at the top left (F.sdpa's is_causal=True)
    causal_mask(L_q, L_k, align="bottom_right")      (L_q, L_k)      the same for queries that are the last
                                                                     L_q positions (torch.nn.attention.bias.
                                                                     causal_lower_right; decoding with a cache)

Other code points the other way. The converters below translate at the boundary, and refuse
a mask whose meaning they would have to guess:

    convention                                            True / 1 / 0.0 means  to keep mask      from keep mask
    bool attn_mask of nn.MultiheadAttention, and a        ignore                from_ignore       to_ignore
      popular from-scratch Transformer tutorial's
      masked_fill(mask, -inf)
    bool key_padding_mask of nn.MultiheadAttention,       ignore (padding)      from_key_padding  to_key_padding
      (B, L_k)
    additive float mask: the float attn_mask of F.sdpa    0 keep, -inf drop     from_additive     to_additive
      and nn.MultiheadAttention, a float
      key_padding_mask (B, L_k),
      nn.Transformer.generate_square_subsequent_mask
    a widely copied PyTorch tutorial's                    1 keep, 0 hidden      from_zero_hidden  (already keep)
      masked_fill(mask == 0, -inf)

``masked_softmax`` turns scores and a keep mask into attention weights. A row whose keys are all
hidden has nothing to average: it gets all-zero weights, so the attention output row is zero
(what ``F.scaled_dot_product_attention`` returns in torch 2.13: measured, not documented; older
versions gave NaN), never NaN, in every floating dtype, and its gradient is zero too.
"""

import torch

from . import validation as check
from .i18n import language

KEEP_NEEDED = {
    "en": "a bool tensor, True where a query may attend to a key",
    "zh": "bool 张量，True 表示该查询可以关注该键",
}


def _bool(function, argument, mask, needed):
    """`mask` must be a bool tensor; `needed` says what it means (and what to do with 0/1 numbers)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        check.fail(function, argument, check.describe(mask), needed)
    return check.dense(function, argument, mask)


def check_keep_mask(function, keep_mask, scores):
    """Validate a keep mask against (..., L_q, L_k) scores: bool, and broadcasting to the
    scores' shape (never enlarging it). Returns keep_mask."""
    if not isinstance(function, str):
        check.fail("check_keep_mask", "function", check.describe(function),
                   {"en": "the name of the function to blame (a str)", "zh": "出错时要指名的函数名（str）"})
    if not isinstance(getattr(scores, "shape", None), (tuple, torch.Size)) or \
            not isinstance(getattr(scores, "device", None), torch.device):  # a tensor, or a stand-in for one
        check.fail(function, "scores", check.describe(scores),
                   {"en": "the scores (..., L_q, L_k): a tensor", "zh": "注意力分数 (..., L_q, L_k)：张量"})
    _bool(function, "keep_mask", keep_mask, KEEP_NEEDED)
    if keep_mask.device != scores.device:
        where = scores.device.type
        check.fail(function, "keep_mask", check.describe(keep_mask),
                   {"en": f"a mask on the device of the scores ({where}); move it with .to({where!r})",
                    "zh": f"与注意力分数在同一设备（{where}）上的掩码；可用 .to({where!r}) 移过去"})
    if not check.broadcasts(keep_mask.shape, scores.shape):
        check.fail(
            function,
            "keep_mask",
            check.describe(keep_mask),
            {
                "en": f"a shape that broadcasts to the scores' {tuple(scores.shape)}",
                "zh": f"能广播到注意力分数形状 {tuple(scores.shape)} 的形状",
            },
        )
    return keep_mask


# ----------------------------------------------------------------------------- building masks

def padding_mask(lengths, max_len):
    """Keep mask of a right-padded batch: True at the real tokens (position < length).

    Args:
        lengths: (B,) integer tensor, the number of real tokens of each sequence, 0 ≤ length ≤ max_len.
        max_len: L_k, the padded length.

    Returns:
        (B, 1, 1, L_k) bool, so it broadcasts against scores (B, H, L_q, L_k): every head and
        every query of sequence b hides the same keys, its padding.
    """
    function = "padding_mask"
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 0:
        check.fail(function, "max_len", check.describe(max_len), {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
    check.fits_in_memory(function, "max_len", max_len, max_len, 8)  # the positions 0 … max_len - 1, int64
    ok = (
        isinstance(lengths, torch.Tensor)
        and lengths.ndim == 1
        and not lengths.is_floating_point()
        and lengths.dtype != torch.bool
    )
    if ok:
        check.dense(function, "lengths", lengths)
        check.has_values(function, "lengths", lengths)
        check.fits_in_memory(function, "max_len", max_len, lengths.numel() * max_len)  # the (B, L_k) mask
    if not ok or (lengths.numel() and (lengths.min() < 0 or lengths.max() > max_len)):
        check.fail(
            function,
            "lengths",
            check.describe(lengths),
            {
                "en": f"a (B,) integer tensor of lengths between 0 and max_len = {max_len}",
                "zh": f"形状为 (B,) 的整数张量，每个长度在 0 到 max_len = {max_len} 之间",
            },
        )
    keep = torch.arange(max_len, device=lengths.device) < lengths[:, None]  # (B, L_k)
    return keep[:, None, None, :]  # (B, 1, 1, L_k)


ALIGNMENTS = ("top_left", "bottom_right")


def causal_mask(L_q, L_k=None, *, align="top_left", device=None):
    """Keep mask of a decoder (look-ahead mask): each query may attend to the keys up to its own
    position, not to later ones.

    Args:
        L_q: number of queries; L_k: number of keys (default L_q).
        align: where query 0 sits among the keys when L_q != L_k (the same mask when L_q == L_k).
            "top_left" (default): query i is position i, so it sees keys 0 … i, as
            ``F.scaled_dot_product_attention(..., is_causal=True)`` and
            ``torch.nn.attention.bias.causal_upper_left`` align it. Right when the queries are the
            first L_q positions of the keys' sequence.
            "bottom_right": the queries are the *last* L_q positions, so query i is position
            i + L_k - L_q and sees keys 0 … i + L_k - L_q, as ``torch.nn.attention.bias.causal_lower_right``
            aligns it. Right when decoding with a cache of earlier keys: the new queries come last.
            With L_q > L_k the first L_q - L_k queries then see no key (fully masked rows).
        device: where to make it (a torch.device or a name such as "cuda"); None: torch's default
            device, as torch.ones. Give the scores' device (``device=scores.device``) on a GPU.

    Returns:
        (L_q, L_k) bool, True where query i may attend to key j. Broadcasts against (..., L_q, L_k).
    """
    L_k = L_q if L_k is None else L_k
    for argument, value in (("L_q", L_q), ("L_k", L_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            check.fail("causal_mask", argument, check.describe(value), {"en": "an int ≥ 1", "zh": "≥ 1 的整数"})
    if align not in ALIGNMENTS:
        needed = {"en": '"top_left" or "bottom_right"', "zh": '"top_left" 或 "bottom_right"'}
        check.fail("causal_mask", "align", check.describe(align), needed)
    device = check.device("causal_mask", "device", device)
    check.fits_in_memory("causal_mask", "L_q" if L_q >= L_k else "L_k", max(L_q, L_k), L_q * L_k)  # bools
    offset = 0 if align == "top_left" else L_k - L_q  # the position of query 0 among the keys
    return torch.ones(L_q, L_k, dtype=torch.bool, device=device).tril_(offset)  # (L_q, L_k): key j ≤ query i + offset


# ----------------------------------------------------------------------------- masked softmax

def masked_softmax(scores, keep_mask=None, *, caller="masked_softmax"):
    """Softmax over the last axis (the keys) of `scores`, giving hidden keys exactly zero weight.

    Args:
        scores: (..., L_q, L_k) floating-point tensor (float16 too).
        keep_mask: None, or a bool tensor broadcastable to scores; True = may attend.
        caller: the function that errors name (a caller passes its own name, so a learner reads
            the function they called).

    Returns:
        (..., L_q, L_k) weights: each row sums to 1 over its kept keys; a row whose keys are all
        hidden is all zeros (a defined result), never NaN; its gradient is zero too.
    """
    check.tensor(caller, "scores", scores, layout="(..., L_q, L_k)")
    check.scores_fit(caller, "scores", scores, scores.shape, scores.dtype)  # its weights are as large again
    if keep_mask is None:
        return torch.softmax(scores, dim=-1)
    keep = check_keep_mask(caller, keep_mask, scores)
    hidden_row = ~keep.any(dim=-1, keepdim=True)  # rows with nothing to attend to
    # -inf gives hidden keys exactly zero weight, in any dtype (a finite fill such as -1e9 is
    # -inf in float16 anyway). A fully hidden row would be all -inf, and softmax of it is
    # 0/0 = NaN, so give that row finite scores first and zero its weights after.
    scores = scores.masked_fill(~keep, float("-inf")).masked_fill(hidden_row, 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(hidden_row, 0.0)


# ----------------------------------------------------------------------------- converters

_IGNORE_NEEDED = {
    "en": "a bool tensor, True where a query must NOT attend (nn.MultiheadAttention's bool attn_mask); "
    "a 0/1 number mask is ambiguous: use mask.bool() if 1 means ignore, from_zero_hidden if 0 means hidden",
    "zh": "bool 张量，True 表示该查询不得关注该键（nn.MultiheadAttention 的 bool attn_mask）；"
    "0/1 数值掩码含义不明：若 1 表示忽略，请先用 mask.bool()；若 0 表示遮住，请用 from_zero_hidden",
}


def from_ignore(ignore_mask):
    """Keep mask from an ignore mask, where True means "must not attend": the bool ``attn_mask``
    of ``nn.MultiheadAttention``, and the masks of a popular from-scratch Transformer tutorial
    (``masked_fill(mask, -inf)``). Any shape; returns ~ignore_mask."""
    return ~_bool("from_ignore", "ignore_mask", ignore_mask, _IGNORE_NEEDED)


def to_ignore(keep_mask):
    """Ignore mask (True = must not attend) for ``nn.MultiheadAttention``'s bool ``attn_mask``,
    which takes (L_q, L_k) or (B·H, L_q, L_k) (batch-major: slot b·H + h). Returns ~keep_mask."""
    return ~_bool("to_ignore", "keep_mask", keep_mask, KEEP_NEEDED)


def from_key_padding(key_padding_mask):
    """Keep mask from ``nn.MultiheadAttention``'s ``key_padding_mask``.

    Args:
        key_padding_mask: (B, L_k) bool, True at padding (keys to ignore).

    Returns:
        (B, 1, 1, L_k) bool keep mask, True at real tokens.
    """
    function, argument = "from_key_padding", "key_padding_mask"
    needed = {
        "en": "a (B, L_k) bool tensor, True at padding; a 0/1 number mask is ambiguous: use mask.bool() if 1 "
        "means padding",
        "zh": "形状为 (B, L_k) 的 bool 张量，True 表示填充位置；"
        "0/1 数值掩码含义不明：若 1 表示填充，请先用 mask.bool()",
    }
    _bool(function, argument, key_padding_mask, needed)
    if key_padding_mask.ndim != 2:
        check.fail(function, argument, check.describe(key_padding_mask), needed)
    return ~key_padding_mask[:, None, None, :]  # (B, 1, 1, L_k)


def to_key_padding(keep_mask):
    """``key_padding_mask`` for ``nn.MultiheadAttention`` (True = padding) from a per-key keep mask.

    Args:
        keep_mask: (B, 1, 1, L_k) or (B, 1, L_k) bool, True at real tokens. A (B, L_k) mask is
            refused: against scores it would line up with (L_q, L_k), so its meaning is unclear.

    Returns:
        (B, L_k) bool, True at padding.
    """
    function = "to_key_padding"
    needed = {
        "en": "a (B, 1, 1, L_k) or (B, 1, L_k) bool keep mask, the same for every query",
        "zh": "形状为 (B, 1, 1, L_k) 或 (B, 1, L_k) 的 bool 保留掩码，对每个查询都相同",
    }
    _bool(function, "keep_mask", keep_mask, needed)
    if keep_mask.ndim not in (3, 4) or any(size != 1 for size in keep_mask.shape[1:-1]):
        check.fail(function, "keep_mask", check.describe(keep_mask), needed)
    B, L_k = keep_mask.shape[0], keep_mask.shape[-1]
    return ~keep_mask.reshape(B, L_k)  # (B, L_k): True = padding


def from_additive(additive_mask):
    """Keep mask from an additive float mask (added to the scores): 0 keeps a key, -inf drops it.

    A float mask with other values (finite, non-zero: -1e9, 0.5, ...) is a bias on the scores, not
    a mask, and is refused, as are NaN and +inf. Any shape; returns additive_mask == 0.
    """
    function, argument = "from_additive", "additive_mask"
    needed = {
        "en": "a float tensor holding only 0 (keep) and -inf (drop)",
        "zh": "只含 0（保留）和 -inf（丢弃）的浮点张量",
    }
    if not isinstance(additive_mask, torch.Tensor) or not additive_mask.is_floating_point():
        check.fail(function, argument, check.describe(additive_mask), needed)
    check.dense(function, argument, additive_mask)
    check.has_values(function, argument, additive_mask)
    keep = additive_mask == 0
    dropped = additive_mask == float("-inf")
    if not bool((keep | dropped).all()):
        other = additive_mask[~(keep | dropped)][0].item()
        got = check.describe(additive_mask) + (
            f", with the value {other}" if language() == "en" else f"，含有值 {other}"
        )
        more = {
            "en": "; finite non-zero values are a bias on the scores, not a mask",
            "zh": "；有限的非零值是加在分数上的偏置，而不是掩码",
        }
        check.fail(function, argument, got, {lang: needed[lang] + more[lang] for lang in needed})
    return keep


def to_additive(keep_mask, dtype=torch.float32):
    """Additive float mask, added to the scores: 0.0 where keep_mask is True, -inf where it is
    False. Same shape as keep_mask. The float ``attn_mask`` of ``F.scaled_dot_product_attention``
    and ``nn.MultiheadAttention`` and a float ``key_padding_mask`` are read this way (give the
    mask the query's dtype)."""
    _bool("to_additive", "keep_mask", keep_mask, KEEP_NEEDED)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        check.fail("to_additive", "dtype", check.describe(dtype),
                   {"en": "a floating dtype such as torch.float32: only a float holds -inf",
                    "zh": "浮点类型，例如 torch.float32：只有浮点数能表示 -inf"})
    return torch.zeros(keep_mask.shape, dtype=dtype, device=keep_mask.device).masked_fill(~keep_mask, float("-inf"))


def from_zero_hidden(mask):
    """Keep mask from the convention of a widely copied PyTorch tutorial,
    ``scores.masked_fill(mask == 0, -inf)``: 0 hides a key,
    1 (or True) keeps it. Bool, integer or float masks of 0s and 1s; anything else (an additive
    mask's -inf, which that code would read inverted) is refused. Returns mask != 0."""
    needed = {
        "en": "a tensor of 0s (hidden) and 1s (keep); for an additive 0 / -inf mask use from_additive",
        "zh": "只含 0（遮住）和 1（保留）的张量；0 / -inf 的加性掩码请用 from_additive",
    }
    if isinstance(mask, torch.Tensor):
        check.dense("from_zero_hidden", "mask", mask)
        check.has_values("from_zero_hidden", "mask", mask)
    if not isinstance(mask, torch.Tensor) or not bool(((mask == 0) | (mask == 1)).all()):
        check.fail("from_zero_hidden", "mask", check.describe(mask), needed)
    return mask != 0
