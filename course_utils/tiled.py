"""Attention that never stores its L×L matrix: the online softmax and the tiled forward (lesson 08).

The online softmax. A row of scores s seen in pieces keeps three numbers per row, a **state**:

    m    the largest score seen so far (−∞ before any)
    ell  Σ exp(s − m) over the scores seen so far       (ℓ in the lesson)
    acc  Σ exp(s − m) · v over the same scores            (a vector of d_v features; optional)

Two states of disjoint pieces merge exactly (``merge_states``): with m = max(m₁, m₂),

    ell = ell₁ · exp(m₁ − m) + ell₂ · exp(m₂ − m),   acc = acc₁ · exp(m₁ − m) + acc₂ · exp(m₂ − m),

and at the end softmax(s) · V = acc / ell, log Σ exp(s) = m + log ell (``finish``). A piece whose
scores are all −∞ (every key masked) has m = −∞, ell = 0, acc = 0: it changes nothing in a merge,
and a row with nothing at all gives output 0 and log-sum-exp −∞ (never NaN; the output and
F.scaled_dot_product_attention agree there).

The tiled forward (``tiled_attention``) runs that merge over tiles: for each block of ``block_q``
queries, over the blocks of ``block_k`` keys and values, one (block_q × block_k) tile of scores at a
time. It keeps O(L · d) state, never the (L_q, L_k) matrix, and returns ``(output, lse)``, the
log-sum-exp of every row, which FlashAttention's backward reuses to recompute the weights instead
of storing them. Tiles that a causal mask, a sliding window or a block mask hide entirely are
skipped (``tile_kinds`` says which); tiles that a mask cuts through get the mask; the others run
without one.

The tiled backward (``tiled_backward``) is FlashAttention-2's: from the forward's output and lse
alone (never the weights), D = Σ dO ∘ O per row once, then key blocks outside and query blocks
inside, each tile's weights recomputed as P = exp(S − lse). ``TiledAttention`` is the
``torch.autograd.Function`` that pairs the two, and ``flash_attention`` calls it: what autograd keeps
for the backward is O(L), not every tile's weights.

Masks follow the package's meaning (masks.py): ``keep_mask`` True where a query may attend to a
key; ``causal=True`` is F.scaled_dot_product_attention's ``is_causal`` (aligned at the top left:
query i sees keys j ≤ i); ``window=w`` keeps keys with i − w < j (and j < i + w when not causal).

``materialised_attention`` is a plain version that builds the whole matrix (three (L_q, L_k) matrices
alive at its peak: lesson 08 shows where each comes from), ``peak_bytes`` counts
the bytes of the tensors a call creates (the notebook's deterministic memory measure), and
``sdpa_backend`` reads which kernel F.scaled_dot_product_attention ran from the operators that ran.
"""

import functools
import itertools
import math
import weakref
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import validation as check
from .masks import check_keep_mask

#: What ``tile_kinds`` says of a tile: hidden entirely (not computed), cut by the mask, all visible.
SKIP, PARTIAL, FULL = 0, 1, 2

NEG_INF = float("-inf")


class SoftmaxState(NamedTuple):
    """The running state of a softmax over pieces of its rows (see the module docstring).

    m: (...,) the largest score of each row so far; ell: (...,) Σ exp(s − m);
    acc: (..., d_v) Σ exp(s − m) · v, or None for a softmax without values."""

    m: torch.Tensor
    ell: torch.Tensor
    acc: torch.Tensor = None


def _safe(m):
    """m with −∞ replaced by 0, to subtract from scores: a row that has seen only −∞ scores gets
    exp(−∞ − 0) = 0 everywhere instead of exp(−∞ + ∞) = NaN."""
    return torch.where(m == NEG_INF, torch.zeros_like(m), m)


def piece_state(scores, values=None):
    """The state of one piece of each row: scores (..., n), values None or (..., n, d_v).

    A row whose n scores are all −∞ gets m = −∞, ell = 0, acc = 0. The max is detached: the
    result of a softmax does not depend on which constant is subtracted, so no gradient flows
    through it (FlashAttention treats it as a constant too)."""
    check.tensor("piece_state", "scores", scores, min_ndim=1, layout="(..., n)")
    if values is not None:
        check.tensor("piece_state", "values", values, min_ndim=2, layout="(..., n, d_v)")
        check.alike("piece_state", "values", values, scores, "scores")
        if values.shape[:-1] != scores.shape:
            check.fail("piece_state", "values", check.describe(values),
                       {"en": f"shape {tuple(scores.shape)} + (d_v,): one value vector per score",
                        "zh": f"形状 {tuple(scores.shape)} + (d_v,)：每个分数对应一个值向量"})
    m = scores.detach().amax(dim=-1) if scores.shape[-1] else scores.new_full(scores.shape[:-1], NEG_INF)
    p = torch.exp(scores - _safe(m)[..., None])  # (..., n), 0 at −∞ scores
    acc = None if values is None else (p[..., None, :] @ values).squeeze(-2)  # (..., d_v)
    return SoftmaxState(m, p.sum(dim=-1), acc)


def empty_state(rows, d_v=None, *, dtype=torch.float32, device=None):
    """The state of nothing seen yet: m = −∞, ell = 0 (and acc = 0 of d_v features) for `rows`,
    the leading shape (a tuple), on `device` (None: torch's default device, as torch.zeros)."""
    function = "empty_state"
    if not isinstance(rows, (tuple, list, torch.Size)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in rows):
        check.fail(function, "rows", check.describe(rows),
                   {"en": "a tuple of sizes ≥ 0, the rows' leading shape, e.g. (B, H, L_q)",
                    "zh": "由 ≥ 0 的大小组成的元组，即这些行的前导形状，例如 (B, H, L_q)"})
    if d_v is not None:
        check.whole_number(function, "d_v", d_v)
    check.floating_dtype(function, "dtype", dtype)
    device = check.device(function, "device", device)
    count = math.prod(rows)
    # the larger factor of count · (2 + d_v) is the one to make smaller
    culprit = ("d_v", d_v) if d_v is not None and 2 + d_v > count else ("rows", rows)
    check.fits_in_memory(function, *culprit, count * (2 + (d_v or 0)), torch.finfo(dtype).bits // 8)
    m = torch.full(tuple(rows), NEG_INF, dtype=dtype, device=device)
    acc = None if d_v is None else torch.zeros(*rows, d_v, dtype=dtype, device=device)
    return SoftmaxState(m, torch.zeros_like(m), acc)


def _check_state(function, argument, state, *, values=False):
    """`state` when it is a SoftmaxState whose tensors fit together: m and ell floating-point
    tensors of one shape (the rows), dtype and device, and acc None (a softmax without values) or
    (rows..., d_v) of their dtype and device; with `values`, acc is needed."""
    needed = {"en": "a SoftmaxState (m, ell, acc), e.g. from piece_state",
              "zh": "SoftmaxState (m, ell, acc)，例如 piece_state 的返回值"}
    if not isinstance(state, SoftmaxState):
        check.fail(function, argument, check.describe(state), needed)
    m, ell, acc = state
    tensors_ok = isinstance(m, torch.Tensor) and isinstance(ell, torch.Tensor) and m.is_floating_point() \
        and m.layout == torch.strided and ell.layout == torch.strided
    if not tensors_ok or ell.shape != m.shape or ell.dtype != m.dtype or ell.device != m.device:
        check.fail(function, argument, f"SoftmaxState(m={check.describe(m)}, ell={check.describe(ell)})",
                   {"en": "a SoftmaxState whose m and ell are dense floating-point tensors of one shape (the rows), "
                          "dtype and device, e.g. from piece_state or empty_state",
                    "zh": "SoftmaxState，其 m 与 ell 为形状（即这些行）、类型和设备都相同的稠密浮点张量，"
                          "例如 piece_state 或 empty_state 的返回值"})
    if acc is None and values:
        check.fail(function, argument, f"SoftmaxState(acc=None, m={check.describe(m)})",
                   {"en": "a state with values (acc of shape rows + (d_v,)), e.g. empty_state(rows, d_v)",
                    "zh": "带值的状态（acc 的形状为 rows + (d_v,)），例如 empty_state(rows, d_v)"})
    if acc is not None and (not isinstance(acc, torch.Tensor) or acc.layout != torch.strided or acc.ndim != m.ndim + 1
                            or acc.shape[:-1] != m.shape or acc.dtype != m.dtype or acc.device != m.device):
        check.fail(function, argument, f"SoftmaxState(acc={check.describe(acc)}, m={check.describe(m)})",
                   {"en": f"acc None or a tensor of shape {tuple(m.shape)} + (d_v,), the dtype and device of m",
                    "zh": f"acc 为 None，或形状为 {tuple(m.shape)} + (d_v,)、类型和设备与 m 相同的张量"})
    return state


def merge_states(a, b):
    """The state of two disjoint pieces of the same rows, exactly: both rescaled to the larger max.

    Where both maxima are −∞ (both pieces fully masked) the result is m = −∞, ell = 0, acc = 0."""
    _check_state("merge_states", "a", a)
    _check_state("merge_states", "b", b)
    if a.m.shape != b.m.shape or (a.acc is None) != (b.acc is None) or (
            a.acc is not None and a.acc.shape != b.acc.shape) or a.m.dtype != b.m.dtype or a.m.device != b.m.device:
        check.fail("merge_states", "b", check.describe(b.m),
                   {"en": f"a state of the same rows as a, m of shape {tuple(a.m.shape)} in a's dtype and device, "
                          "with acc of a's shape exactly when a has one",
                    "zh": f"与 a 对应同一批行的状态：m 的形状为 {tuple(a.m.shape)}，类型和设备与 a 相同；"
                          "a 有 acc 时它也要有，且形状相同"})
    return _merge(a, b)


def _merge(a, b):
    m = torch.maximum(a.m, b.m)
    safe = _safe(m)
    alpha, beta = torch.exp(a.m - safe), torch.exp(b.m - safe)  # each ≤ 1; 0 for a −∞ piece
    ell = a.ell * alpha + b.ell * beta
    acc = None if a.acc is None else a.acc * alpha[..., None] + b.acc * beta[..., None]
    return SoftmaxState(m, ell, acc)


def finish(state):
    """(output, lse) of a state: output = acc / ell (0 where ell = 0, a row with nothing to attend
    to; None without acc), lse = m + log ell, the log-sum-exp of the row (−∞ for such a row)."""
    _check_state("finish", "state", state)
    return _finish(state)


def _finish(state):
    seen = state.ell > 0
    ell = torch.where(seen, state.ell, torch.ones_like(state.ell))  # 1 where empty: acc is 0 there
    lse = torch.where(seen, state.m + torch.log(ell), torch.full_like(state.m, NEG_INF))
    output = None if state.acc is None else state.acc / ell[..., None]
    return output, lse


def online_softmax(scores, boundaries):
    """softmax(scores) over the last axis, computed from its pieces: the row is cut before each
    index in `boundaries` (e.g. (3, 5) cuts 8 scores into 0–2, 3–4, 5–7), each piece's state is
    taken alone and the states merged left to right; then exp(s − m) / ell with the merged m, ell.
    A row of only −∞ scores gives zeros."""
    check.tensor("online_softmax", "scores", scores, min_ndim=1, layout="(..., n)")
    n = scores.shape[-1]
    if n == 0:  # no column: nothing to cut, and no softmax of nothing
        check.fail("online_softmax", "scores", check.describe(scores),
                   {"en": "at least one score per row (n ≥ 1)", "zh": "每行至少一个分数（n ≥ 1）"})
    if not isinstance(boundaries, (tuple, list)) or any(
            not isinstance(b, int) or isinstance(b, bool) for b in boundaries) or list(boundaries) != sorted(
            set(boundaries)) or any(b <= 0 or b >= n for b in boundaries):
        check.fail("online_softmax", "boundaries", check.describe(boundaries),
                   {"en": f"a tuple of increasing ints between 1 and {n - 1}, where the row is cut",
                    "zh": f"由 1 到 {n - 1} 之间递增整数组成的元组：在这些位置把行切开"})
    edges = [0, *boundaries, n]
    state = empty_state(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for start, stop in itertools.pairwise(edges):
        state = _merge(state, piece_state(scores[..., start:stop]))
    seen = state.ell > 0
    ell = torch.where(seen, state.ell, torch.ones_like(state.ell))
    return torch.exp(scores - _safe(state.m)[..., None]) / ell[..., None]


# ----------------------------------------------------------------------------- which tiles


def _allowed_offsets(causal, window):
    """The offsets j − i a query i may look at, as an interval [low, high] (±inf when open)."""
    high = 0 if causal else (window - 1 if window is not None else math.inf)
    low = -(window - 1) if window is not None else -math.inf
    return low, high


def _position_kind(i0, i1, j0, j1, low, high):
    """SKIP, PARTIAL or FULL for queries i0 … i1−1 against keys j0 … j1−1, by offsets alone."""
    least, most = j0 - (i1 - 1), (j1 - 1) - i0  # the offsets j − i this tile holds
    if most < low or least > high:
        return SKIP
    return FULL if low <= least and most <= high else PARTIAL


def position_keep(i0, i1, j0, j1, low, high, device):
    """(i1 − i0, j1 − j0) bool: True where key j is within the allowed offsets of query i. The mask
    depends only on the tile's shape and on j0 − i0: every diagonal tile of equal blocks shares one
    (cached, and never written to)."""
    return _offset_keep(i1 - i0, j1 - j0, j0 - i0, low, high, str(device))


@functools.lru_cache(maxsize=256)
def _offset_keep(rows, columns, start, low, high, device):
    return _band(rows, columns, start, low, high, device)


def _band(rows, columns, start, low, high, device):
    """(rows, columns) bool, True where low ≤ start + c − r ≤ high (r the row, c the column): a
    band between two diagonals, cut with tril_ and triu_ in place, so that it takes one byte per
    entry and no table of offsets. A diagonal past the matrix's edge is clamped to the edge (a
    window of 2**100 is no window), so no int64 overflows whatever the window."""
    keep = torch.ones(rows, columns, dtype=torch.bool, device=device)
    if high < math.inf:  # start + c − r ≤ high: on or below the diagonal c − r = high − start
        keep.tril_(max(-rows, min(columns, high - start)))
    if low > -math.inf:  # start + c − r ≥ low: on or above the diagonal c − r = low − start
        keep.triu_(max(-rows, min(columns, low - start)))
    return keep


def _check_blocks(function, block_q, block_k, causal, window):
    check.positive_int(function, "block_q", block_q)
    check.positive_int(function, "block_k", block_k)
    check.flag(function, "causal", causal)
    if window is not None:
        check.positive_int(function, "window", window)


def _tile_fits(function, query, key, block_q, block_k):
    """The largest tile's (..., b_q, b_k) scores fit under the package's limit: block_q = L_q and
    block_k = L_k make tiled attention the materialised one, and the blocks are then to blame."""
    b_q, b_k = min(block_q, query.shape[-2]), min(block_k, key.shape[-2])
    argument, value = ("block_q", block_q) if b_q >= b_k else ("block_k", block_k)
    check.scores_fit(function, argument, value, (*query.shape[:-2], b_q, b_k), query.dtype,
                     {"en": "smaller blocks", "zh": "更小的分块"}, device=query.device)


def tile_kinds(L_q, L_k, block_q, block_k, *, causal=False, window=None, keep_mask=None):
    """(n_q, n_k) int64 tensor: for each tile, SKIP (0: every entry hidden, not computed), PARTIAL
    (1: the mask cuts through it) or FULL (2: every entry visible). n_q = ⌈L_q / block_q⌉,
    n_k = ⌈L_k / block_k⌉. keep_mask: None or bool broadcastable to (L_q, L_k) (a tile is hidden
    when it is hidden for every leading index)."""
    function = "tile_kinds"
    check.positive_int(function, "L_q", L_q)
    check.positive_int(function, "L_k", L_k)
    _check_blocks(function, block_q, block_k, causal, window)
    if keep_mask is not None:
        check.tensor(function, "keep_mask", keep_mask, min_ndim=2, layout="(..., L_q, L_k)", floating=False)
        check.has_values(function, "keep_mask", keep_mask)
        check_keep_mask(function, keep_mask, _Scores((*keep_mask.shape[:-2], L_q, L_k), keep_mask.device))
        keep_mask = keep_mask.expand(*keep_mask.shape[:-2], L_q, L_k)
    n_q, n_k = -(-L_q // block_q), -(-L_k // block_k)
    # a length no sequence could have (one float32 per position past memory) is the length's fault;
    # otherwise blocks too small for the lengths are
    for name, length in (("L_q", L_q), ("L_k", L_k)):
        check.fits_in_memory(function, name, length, length, 4)
    # the table (int64) and as many Python ints while it is filled: 2**20 × 2**20 tiles would be 8 TiB
    check.fits_in_memory(function, "block_q" if n_q >= n_k else "block_k", block_q if n_q >= n_k else block_k,
                         n_q * n_k, 8 + 32)
    low, high = _allowed_offsets(causal, window)
    kinds = [[_tile_kind(i * block_q, min((i + 1) * block_q, L_q), j * block_k, min((j + 1) * block_k, L_k), low,
                         high, keep_mask, None)[0] for j in range(n_k)] for i in range(n_q)]
    # where the mask is (torch's default device without one), as every result of the package
    device = keep_mask.device if keep_mask is not None else check.default_device()
    return torch.tensor(kinds, dtype=torch.int64, device=device)


def _tile_kind(i0, i1, j0, j1, low, high, keep_mask, device):
    """(kind, keep) of one tile: keep is None for FULL and SKIP, the tile's bool mask for PARTIAL,
    made on `device` (None: the kind alone is wanted). Without keep_mask the kind follows from the
    offsets j − i the tile holds, which form one interval: exact, with no mask to read (the mask of
    a PARTIAL tile is made only to be applied)."""
    kind = _position_kind(i0, i1, j0, j1, low, high)
    if kind == SKIP or (kind == FULL and keep_mask is None):
        return kind, None
    if keep_mask is None:
        return kind, None if device is None else position_keep(i0, i1, j0, j1, low, high, device)
    keep = None if kind == FULL else position_keep(i0, i1, j0, j1, low, high, keep_mask.device)
    tile = keep_mask[..., i0:i1, j0:j1]
    keep = tile if keep is None else tile & keep
    if not keep.any():
        return SKIP, None
    return (FULL, None) if keep.all() else (PARTIAL, keep)


class _Scores:
    """The shape and device of scores not computed, for checking a mask against them."""

    def __init__(self, shape, device):
        self.shape, self.device = tuple(shape), device


# ----------------------------------------------------------------------------- attention


def _check_qkv(function, query, key, value, keep_mask, scale):
    check.attention_inputs(function, query, key, value)
    if query.shape[-2] == 0 or key.shape[-2] == 0:
        check.fail(function, "query" if query.shape[-2] == 0 else "key",
                   check.describe(query if query.shape[-2] == 0 else key),
                   {"en": "at least one position", "zh": "至少一个位置"})
    if keep_mask is not None:
        check_keep_mask(function, keep_mask, _Scores((*query.shape[:-1], key.shape[-2]), query.device))
    if scale is not None:
        check.scale(function, scale, query.dtype)  # a finite number the dtype holds: ∞ or 1e300 in float32, NaN weights
        return float(scale)
    return 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0


def update(state, scores, values):
    """One step of the online softmax: `state` of the rows so far, merged with the tile of
    `scores` (..., b_q, b_k) and its `values` (..., b_k, d_v). The rescaling written out (the
    same arithmetic as ``merge_states(state, piece_state(scores, values))``)."""
    function = "update"
    _check_state(function, "state", state, values=True)
    rows, d_v = tuple(state.m.shape), state.acc.shape[-1]
    check.tensor(function, "scores", scores, min_ndim=1, layout="(..., b_q, b_k)")
    if tuple(scores.shape[:-1]) != rows:
        check.fail(function, "scores", check.describe(scores),
                   {"en": f"shape {rows} + (b_k,): one score per key of the tile for each of the state's rows",
                    "zh": f"形状 {rows} + (b_k,)：状态的每一行对该分块的每个键各有一个分数"})
    check.alike(function, "scores", scores, state.m, "state.m")
    check.tensor(function, "values", values, min_ndim=2, layout="(..., b_k, d_v)")
    wanted = (*rows[:-1], scores.shape[-1], d_v)
    if tuple(values.shape) != wanted:
        check.fail(function, "values", check.describe(values),
                   {"en": f"shape {wanted}: one value vector of state.acc's d_v = {d_v} features per key of the tile",
                    "zh": f"形状 {wanted}：该分块的每个键对应一个值向量，特征数为 state.acc 的 d_v = {d_v}"})
    check.alike(function, "values", values, state.m, "state.m")
    return _update(state, scores, values)


def _update(state, scores, values):
    m_new = torch.maximum(state.m, scores.detach().amax(dim=-1))  # (..., b_q)
    safe = _safe(m_new)
    alpha = torch.exp(state.m - safe)  # how much the old state shrinks: exp(m_old − m_new) ≤ 1
    p = torch.exp(scores - safe[..., None])  # (..., b_q, b_k)
    return SoftmaxState(m_new, state.ell * alpha + p.sum(dim=-1), state.acc * alpha[..., None] + p @ values)


def tiled_attention(query, key, value, *, block_q=64, block_k=64, causal=False, window=None, keep_mask=None,
                    scale=None):
    """softmax(Q Kᵀ · scale) V one (block_q × block_k) tile at a time, returning ``(output, lse)``.

    Args:
        query: (..., L_q, d) float tensor; key: (..., L_k, d); value: (..., L_k, d_v), the same
            leading axes (e.g. (B, H)), dtype and device.
        block_q, block_k: the tile's size: queries per block, keys per block (any ints ≥ 1; the
            last block of each may be shorter).
        causal: F.scaled_dot_product_attention's is_causal: query i sees keys j ≤ i.
        window: None, or w: query i sees keys with i − w < j (and j < i + w when not causal).
        keep_mask: None, or bool broadcastable to (..., L_q, L_k), True = may attend (combined
            with causal and window).
        scale: multiplies the scores; default 1/√d.

    Returns:
        output: (..., L_q, d_v), equal to F.scaled_dot_product_attention's; a row that may attend
            to no key is 0 (as F.sdpa gives), never NaN.
        lse: (..., L_q), log Σ_j exp(score_ij) over the visible keys; −∞ for such a row.

    Tiles hidden entirely are skipped; only the tiles a mask cuts through are masked. Gradients
    flow through the tiles by autograd (which stores every tile's intermediates: the real kernels
    recompute them in the backward instead)."""
    function = "tiled_attention"
    scale = _check_qkv(function, query, key, value, keep_mask, scale)
    _check_blocks(function, block_q, block_k, causal, window)
    _tile_fits(function, query, key, block_q, block_k)
    *lead, L_q, _ = query.shape
    L_k, d_v = key.shape[-2], value.shape[-1]
    if keep_mask is not None:
        keep_mask = keep_mask.expand(*lead, L_q, L_k)  # a view: slicing a tile out of it costs nothing
    low, high = _allowed_offsets(causal, window)
    outputs, lses = [], []
    for i0 in range(0, L_q, block_q):
        i1 = min(i0 + block_q, L_q)
        q = query[..., i0:i1, :] * scale  # (..., b_q, d): scaled once per block, not once per tile
        state = empty_state((*lead, i1 - i0), d_v, dtype=query.dtype, device=query.device)
        for j0 in range(0, L_k, block_k):
            j1 = min(j0 + block_k, L_k)
            kind, keep = _tile_kind(i0, i1, j0, j1, low, high, keep_mask, query.device)
            if kind == SKIP:
                continue
            scores = q @ key[..., j0:j1, :].transpose(-2, -1)  # (..., b_q, b_k): the only scores that exist
            if kind == PARTIAL:
                scores = scores.masked_fill(~keep, NEG_INF)
            state = _update(state, scores, value[..., j0:j1, :])
        output, lse = _finish(state)
        outputs.append(output)
        lses.append(lse)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


def _check_saved(function, query, value, output, lse, d_output):
    """The forward's output and lse, and the gradient that reaches the output, against the inputs."""
    *lead, L_q, _ = query.shape
    shapes = {"output": (*lead, L_q, value.shape[-1]), "lse": (*lead, L_q), "d_output": (*lead, L_q, value.shape[-1])}
    for argument, tensor in (("output", output), ("lse", lse), ("d_output", d_output)):
        check.tensor(function, argument, tensor, min_ndim=1)
        check.alike(function, argument, tensor, query, "query")
        if tuple(tensor.shape) != shapes[argument]:
            check.fail(function, argument, check.describe(tensor),
                       {"en": f"shape {shapes[argument]}, from query {tuple(query.shape)} and value "
                              f"{tuple(value.shape)}",
                        "zh": f"形状 {shapes[argument]}（由 query {tuple(query.shape)} 和 value "
                              f"{tuple(value.shape)} 决定）"})


def tiled_backward(query, key, value, output, lse, d_output, *, block_q=64, block_k=64, causal=False, window=None,
                   keep_mask=None, scale=None, d_lse=None):
    """The gradients (d_query, d_key, d_value) of ``tiled_attention``'s output, one tile at a time,
    from what the forward keeps: its `output` and its `lse`, never the (L_q, L_k) weights.

    Args: query, key, value, block_q, block_k, causal, window, keep_mask, scale as for
    ``tiled_attention``; output (..., L_q, d_v) and lse (..., L_q), what it returned;
    d_output (..., L_q, d_v), the gradient that reaches the output; d_lse, None or (..., L_q),
    the gradient that reaches the lse.

    FlashAttention-2's loop order (its Algorithm 2): key blocks outside, query blocks inside, so
    that a key block's dK and dV are summed in place over every query block that sees it and
    written once; dQ collects one term from every key block. Each tile recomputes its weights from
    the scores and the row's lse, P = exp(S − lse) (exactly softmax(S), no running max), and uses
    the row sums D = Σ_c dO · O, taken once before the loop:

        dV_j += Pᵀ dO_i,   dP = dO_i V_jᵀ,   dS = P ∘ (dP − D_i),
        dQ_i += scale · dS K_j,   dK_j += scale · dSᵀ Q_i.

    Tiles hidden entirely are skipped, those a mask cuts through masked, as in the forward. A row
    with no visible key (lse = −∞) gets zero gradients."""
    function = "tiled_backward"
    scale = _check_qkv(function, query, key, value, keep_mask, scale)
    _check_blocks(function, block_q, block_k, causal, window)
    _tile_fits(function, query, key, block_q, block_k)
    _check_saved(function, query, value, output, lse, d_output)
    if d_lse is not None:
        check.tensor(function, "d_lse", d_lse, min_ndim=1)
        check.alike(function, "d_lse", d_lse, query, "query")
        if d_lse.shape != lse.shape:
            check.fail(function, "d_lse", check.describe(d_lse),
                       {"en": f"the shape of lse, {tuple(lse.shape)}", "zh": f"与 lse 相同的形状 {tuple(lse.shape)}"})
    *lead, L_q, _ = query.shape
    L_k = key.shape[-2]
    if keep_mask is not None:
        keep_mask = keep_mask.expand(*lead, L_q, L_k)
    low, high = _allowed_offsets(causal, window)
    D = (d_output * output).sum(dim=-1)  # (..., L_q): Σ_j P_ij dP_ij, without any (L_q, L_k) matrix
    if d_lse is not None:
        D = D - d_lse  # d lse_i / d S_ij = P_ij: folds into the same term
    safe_lse = _safe(lse)  # a row with nothing visible: every score −∞, exp(−∞ − 0) = 0
    d_query = torch.zeros_like(query)
    d_key, d_value = torch.empty_like(key), torch.empty_like(value)
    for j0 in range(0, L_k, block_k):
        j1 = min(j0 + block_k, L_k)
        k, v = key[..., j0:j1, :], value[..., j0:j1, :]  # (..., b_k, d), (..., b_k, d_v)
        d_k, d_v = torch.zeros_like(k), torch.zeros_like(v)  # summed over the query blocks, written once
        for i0 in range(0, L_q, block_q):
            i1 = min(i0 + block_q, L_q)
            kind, keep = _tile_kind(i0, i1, j0, j1, low, high, keep_mask, query.device)
            if kind == SKIP:
                continue
            # In place from here on (nothing here is differentiated again): two tiles alive, not five.
            q = query[..., i0:i1, :] * scale  # (..., b_q, d)
            p = q @ k.transpose(-2, -1)  # (..., b_q, b_k): the scores, recomputed
            if kind == PARTIAL:
                p.masked_fill_(~keep, NEG_INF)
            p.sub_(safe_lse[..., i0:i1, None]).exp_()  # P = exp(S − lse): the weights, exactly
            d_o = d_output[..., i0:i1, :]  # (..., b_q, d_v)
            d_v += p.transpose(-2, -1) @ d_o
            d_s = (d_o @ v.transpose(-2, -1)).sub_(D[..., i0:i1, None]).mul_(p)  # dS = P ∘ (dP − D)
            d_query[..., i0:i1, :] += (d_s @ k).mul_(scale)
            d_k += d_s.transpose(-2, -1) @ q
        d_key[..., j0:j1, :], d_value[..., j0:j1, :] = d_k, d_v
    return d_query, d_key, d_value


class TiledAttention(torch.autograd.Function):
    """``tiled_attention`` with FlashAttention's backward: the forward runs without a graph and
    keeps only its output and lse beside the inputs; the backward is ``tiled_backward``."""

    @staticmethod
    def forward(ctx, query, key, value, block_q, block_k, causal, window, keep_mask, scale):
        output, lse = tiled_attention(query, key, value, block_q=block_q, block_k=block_k, causal=causal,
                                      window=window, keep_mask=keep_mask, scale=scale)
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.options = {"block_q": block_q, "block_k": block_k, "causal": causal, "window": window,
                       "keep_mask": keep_mask, "scale": scale}
        return output, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_output, d_lse):
        query, key, value, output, lse = ctx.saved_tensors
        grads = tiled_backward(query, key, value, output, lse, d_output, d_lse=d_lse, **ctx.options)
        return (*grads, None, None, None, None, None, None)


def flash_attention(query, key, value, *, block_q=64, block_k=64, causal=False, window=None, keep_mask=None,
                    scale=None):
    """``tiled_attention``'s ``(output, lse)``, with FlashAttention's backward (``TiledAttention``):
    what autograd keeps for the backward is the output and one lse per row, O(L) beside the inputs,
    instead of every tile's weights."""
    _check_qkv("flash_attention", query, key, value, keep_mask, scale)
    _check_blocks("flash_attention", block_q, block_k, causal, window)
    _tile_fits("flash_attention", query, key, block_q, block_k)
    return TiledAttention.apply(query, key, value, block_q, block_k, causal, window, keep_mask, scale)


def keep_of(L_q, L_k, *, causal=False, window=None, device=None):
    """The (L_q, L_k) keep mask that `causal` and `window` mean (None when both are off), on
    `device` (None: torch's default device). It takes L_q · L_k bytes, nothing more."""
    check.positive_int("keep_of", "L_q", L_q)
    check.positive_int("keep_of", "L_k", L_k)
    check.flag("keep_of", "causal", causal)
    if window is not None:
        check.positive_int("keep_of", "window", window)
    device = check.device("keep_of", "device", device)
    if not causal and window is None:
        return None
    check.fits_in_memory("keep_of", "L_k" if L_k >= L_q else "L_q", max(L_q, L_k), L_q * L_k)  # one bool each
    low, high = _allowed_offsets(causal, window)
    return _band(L_q, L_k, 0, low, high, device)  # the caller's own, never the tiles' cache


def materialised_attention(query, key, value, *, causal=False, window=None, keep_mask=None, scale=None):
    """The same ``(output, lse)`` as ``tiled_attention``, the plain way: the whole (..., L_q, L_k)
    matrix of scores, masked, then softmax and a product with the values."""
    function = "materialised_attention"
    scale = _check_qkv(function, query, key, value, keep_mask, scale)
    check.flag(function, "causal", causal)
    if window is not None:
        check.positive_int(function, "window", window)
    check.attention_scores_fit(function, query, key)  # the whole (..., L_q, L_k), before it exists
    L_q, L_k = query.shape[-2], key.shape[-2]
    keep = keep_of(L_q, L_k, causal=causal, window=window, device=query.device)
    if keep_mask is not None:
        keep = keep_mask if keep is None else keep_mask & keep
    scores = query @ key.transpose(-2, -1) * scale  # (..., L_q, L_k): all of it, at once
    if keep is not None:
        scores = scores.masked_fill(~keep, NEG_INF)
    lse = torch.logsumexp(scores, dim=-1)  # (..., L_q); −∞ for a row with no visible key
    weights = torch.exp(scores - torch.where(lse == NEG_INF, torch.zeros_like(lse), lse)[..., None])
    return weights @ value, lse


# ----------------------------------------------------------------------------- measuring


class _PeakBytes(TorchDispatchMode):
    """Counts the bytes of every storage that an operator creates while the mode is on, and the
    largest total alive at any moment. A storage is new when no argument of the operator shares
    it (a view or an in-place result is not new); it stops counting when the last tensor that the
    counted operators returned for it is freed."""

    def __init__(self):
        super().__init__()
        self.live, self.now, self.peak, self.refs = {}, 0, 0, {}  # refs by id: a weakref compares its tensors

    def _release(self, key, ref):
        self.refs.pop(id(ref), None)
        holders = self.live.get(key)
        if holders is not None:
            holders[0] -= 1
            if holders[0] == 0:
                self.now -= holders[1]
                del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        inputs = list(_tensors(args)) + list(_tensors(tuple((kwargs or {}).values())))
        given = {_storage_key(t) for t in inputs}
        for tensor in _tensors(result if isinstance(result, (tuple, list)) else (result,)):
            if any(tensor is t for t in inputs):
                continue  # an in-place operator returns the tensor it was given: no new holder
            key = _storage_key(tensor)
            if key in given and key not in self.live:
                continue  # a view of, or an in-place edit of, a tensor from before the call
            holders = self.live.get(key)
            if holders is None:
                holders = self.live[key] = [0, tensor.untyped_storage().nbytes()]
                self.now += holders[1]
                self.peak = max(self.peak, self.now)
            holders[0] += 1
            ref = weakref.ref(tensor, lambda ref, key=key: self._release(key, ref))
            self.refs[id(ref)] = ref
        return result


def _tensors(items):
    """The tensors among `items` and in the lists and tuples among them (one level: what aten
    operators take and return)."""
    for item in items:
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (tuple, list)):
            yield from (t for t in item if isinstance(t, torch.Tensor))


def _storage_key(tensor):
    return tensor.untyped_storage().data_ptr(), tensor.device.type


def peak_bytes(function, *args, **kwargs):
    """(result, bytes): what function(*args, **kwargs) returns, and the largest number of bytes
    that the tensors it creates (its result included) hold at any one moment of the call, counted
    operator by operator: the same count on every machine for the same code path. Memory a
    kernel takes for itself inside one operator (scratch buffers of a fused kernel, a BLAS
    library's workspace) is not seen: measure the process (its peak resident memory) for that."""
    if not callable(function):
        check.fail("peak_bytes", "function", check.describe(function),
                   {"en": "a function to call", "zh": "可调用的函数"})
    counter = _PeakBytes()
    with counter:
        result = function(*args, **kwargs)
    return result, counter.peak


class _OperatorNames(TorchDispatchMode):
    """Records the name of every aten operator that runs while the mode is on."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def sdpa_backend(query, key, value, **options):
    """Which kernel ``F.scaled_dot_product_attention(query, key, value, **options)`` ran, read from
    the names of the aten operators that ran: "flash" (_scaled_dot_product_flash_attention_for_cpu,
    the tiled CPU kernel) or "math" (the composite one: bmm, softmax, bmm, with the whole matrix);
    another name as it is. (The profiler's operator names say the same: aten::_scaled_dot_product_
    flash_attention_for_cpu against aten::_scaled_dot_product_attention_math.) A measurement of this
    torch version on this machine, not a promise."""
    import torch.nn.functional as F

    function = "sdpa_backend"
    for argument, tensor in (("query", query), ("key", key), ("value", value)):
        check.tensor(function, argument, tensor, min_ndim=2)
        check.alike(function, argument, tensor, query, "query")
        check.has_values(function, argument, tensor)
    check.same_size(function, "key", key, -1, query.shape[-1], {"en": "query's d", "zh": "query 的 d"})
    check.same_size(function, "value", value, -2, key.shape[-2], {"en": "key's L_k", "zh": "key 的 L_k"})
    for argument, tensor in (("key", key), ("value", value)):
        if not options.get("enable_gqa") and tensor.shape[:-2] != query.shape[:-2]:
            check.fail(function, argument, check.describe(tensor),
                       {"en": f"the leading (batch, head) axes of query, {tuple(query.shape[:-2])}",
                        "zh": f"与 query 相同的前导（批量、头）维度 {tuple(query.shape[:-2])}"})
    if 0 in query.shape[-2:] or 0 in key.shape[-2:]:
        check.fail(function, "query" if 0 in query.shape[-2:] else "key",
                   check.describe(query if 0 in query.shape[-2:] else key),
                   {"en": "at least one position and one feature", "zh": "至少一个位置、一个特征"})
    recorder = _OperatorNames()
    with recorder:
        F.scaled_dot_product_attention(query, key, value, **options)
    names = set(recorder.names)
    if "_scaled_dot_product_flash_attention_for_cpu" in names:
        return "flash"
    if names & {"bmm", "matmul", "mm"} and names & {"_softmax", "softmax", "_safe_softmax"}:
        return "math"
    return ", ".join(sorted(names))
