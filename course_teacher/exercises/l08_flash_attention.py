"""Lesson 08's exercises: merging two partial softmaxes, one tiled forward pass, causal tile skipping, the
tiled backward.

The references are written here in plain code (tests/test_exercises_l08.py proves they agree with
``course_utils.tiled`` and with PyTorch: F.scaled_dot_product_attention and torch.logsumexp, values
and gradients). A state of a piece of a row is (m, ell, acc): its largest score, Σ exp(s − m) and
Σ exp(s − m) · v.

- 08.merge_states: (m1, ell1, acc1, m2, ell2, acc2) -> (m, ell, acc), values only (the text says
  so: which of two equal maxima a gradient goes to is a choice, not a fact). Cases: rows where
  either piece has the larger max, equal maxima, a fully masked piece on either side (m = −∞,
  ell = 0, acc = 0) and on both, maxima in the hundreds (exp(m) alone overflows float32), batch 1,
  length 1, one value feature, float64.
- 08.tiled_forward: (query, key, value, block_q, block_k) -> (output, lse), gradients compared.
  Cases: lengths that the blocks do not divide (on each side on its own), blocks of 1, blocks
  longer than the sequence (one tile), L_q > L_k and L_q < L_k, d_v ≠ d, float64, scores spread
  wide so the running max changes from tile to tile, scores past 88 (exp(s) overflows float32
  without the running max), and rows whose every score is below −130 (a running max started at 0
  instead of −∞ stays there, and exp(s − 0) underflows to 0: 0 / 0).
- 08.causal_tiles: (query, key, value, block_q, block_k) -> (output, lse, tiles), L_q = L_k,
  top-left causal (F.sdpa's is_causal); tiles is the number of tiles computed (an int), so a
  function that computes every tile and masks the hidden ones is told apart. Cases: block_q ≠
  block_k both ways, equal blocks, blocks of 1, one tile, float64.
- 08.tiled_backward: (query, key, value, output, lse, d_output, block_q, block_k, causal) ->
  (d_query, d_key, d_value, tiles), values only (the reference runs without a graph); output and
  lse are the forward's on the case (computed in float64), d_output random. FlashAttention-2's
  backward: D = Σ dO ∘ O per row, then key blocks outside, P = exp(S − lse) per tile. Cases: causal
  (L_q = L_k, top-left) and not, block_q ≠ block_k both ways, tails on both sides, L_q ≠ L_k, one
  tile, blocks of 1, d_v ≠ d, float64, scores past 88, and long keys for the size limit (as
  08.tiled_forward's); hidden cases of other shapes (``_backward_hidden``). Its mistakes are the ones the
  maths invites (D, P, the scale, the transposes, the sums, the causal skip and mask, the count, the
  dtype), each a function a learner could have written: an independent set of learners' answers
  (tests/test_learner_answers_l09.py) has its verdicts named by them.

The first case of each exercise is one where every known mistake runs and shows (but NO_MAX_SHIFT
and MAX_STARTS_AT_ZERO of 08.tiled_forward, which only the cases with scores past 88 and below −130
show; and 08.tiled_backward's, whose first case has square tiles so that P @ dO runs: on it
TILE_LOCAL_MASK, BLOCK_INDEX_SKIP, SKIP_BY_FIRST_QUERY, MASK_BY_BLOCK_INDEX and SQUARE_TILES give the right
numbers, the next case, with block_q ≠ block_k, shows them; QUERY_TAIL_DROPPED shows where block_q does
not divide L_q, GRADIENTS_FLOAT32 on the float64 case). No tensor a case
passes is all zeros or all −∞, so a check that compares inputs before and after sees an in-place
edit of any of them.
"""

import math

import torch

from .registry import Exercise, Mistake, register

NEG_INF = float("-inf")

# ----------------------------------------------------------------------------- 08.merge_states


def _piece(generator, shape, n, shift, dtype):
    """(m, ell, acc) of a piece of n random scores per row, shifted by `shift` (a (B, L) tensor)."""
    B, L, d_v = shape
    scores = torch.randn(B, L, n, generator=generator, dtype=torch.float64) * 2 + shift[..., None]
    values = torch.randn(B, L, n, d_v, generator=generator, dtype=torch.float64)
    m = scores.amax(-1)
    p = torch.exp(scores - m[..., None])
    return m.to(dtype), p.sum(-1).to(dtype), (p[..., None] * values).sum(-2).to(dtype)


def _empty(state, rows):
    """`state` with the rows `rows` (a list of (b, l)) made fully masked: m = −∞, ell = 0, acc = 0."""
    m, ell, acc = (t.clone() for t in state)
    for b, l in rows:
        m[b, l], ell[b, l], acc[b, l] = NEG_INF, 0.0, 0.0
    return m, ell, acc


def _merge_case(generator, B, L, d_v, *, dtype=torch.float32, spread=3.0, offset=0.0, empty1=(), empty2=(),
                ties=()):
    shift1 = torch.randn(B, L, generator=generator, dtype=torch.float64) * spread + offset
    shift2 = torch.randn(B, L, generator=generator, dtype=torch.float64) * spread - offset
    first = _piece(generator, (B, L, d_v), 3, shift1, dtype)
    second = _piece(generator, (B, L, d_v), 4, shift2, dtype)
    for b, l in ties:  # the two maxima equal
        second[0][b, l] = first[0][b, l]
    return (*_empty(first, empty1), *_empty(second, empty2))


def _merge_cases(generator):
    g = generator
    return [
        # first: 2 × 3 rows, either piece with the larger max, no empty piece: every mistake shows
        _merge_case(g, 2, 3, 4),
        _merge_case(g, 1, 1, 1),  # batch 1, length 1, one value feature
        _merge_case(g, 3, 2, 5, empty1=[(0, 0)], empty2=[(1, 1), (2, 0)]),  # a masked piece on either side
        _merge_case(g, 2, 4, 3, empty1=[(0, 1), (1, 3)], empty2=[(0, 1), (1, 0)]),  # both pieces of row (0, 1)
        _merge_case(g, 2, 4, 3, dtype=torch.float64, ties=[(0, 0), (1, 2)]),  # float64, equal maxima
        _merge_case(g, 1, 6, 2, spread=1.0, offset=300.0),  # maxima ±300: exp(m) alone overflows
        _merge_case(g, 4, 1, 7),
    ]


def _merge_hidden(generator):
    """The grader's cases: other shapes than the public ones (and other values), each edge again."""
    g = generator
    return [
        _merge_case(g, 3, 5, 2),
        _merge_case(g, 2, 3, 6, empty1=[(1, 2)], empty2=[(0, 0), (1, 2)]),  # a masked piece, and both in (1, 2)
        _merge_case(g, 1, 4, 4, dtype=torch.float64, ties=[(0, 3)]),
        _merge_case(g, 2, 2, 3, spread=1.0, offset=250.0),
    ]


def _merge_reference(m1, ell1, acc1, m2, ell2, acc2):
    with torch.no_grad():  # values only: the text says so
        m = torch.maximum(m1, m2)
        safe = torch.where(m == NEG_INF, torch.zeros_like(m), m)  # both pieces empty: no −∞ − (−∞)
        alpha, beta = torch.exp(m1 - safe), torch.exp(m2 - safe)
        return m, ell1 * alpha + ell2 * beta, acc1 * alpha[..., None] + acc2 * beta[..., None]


def _merge_no_rescale(m1, ell1, acc1, m2, ell2, acc2):
    m, ell, _ = _merge_reference(m1, ell1, acc1, m2, ell2, acc2)
    return m, ell, acc1 + acc2


def _merge_new_max_for_old_sum(m1, ell1, acc1, m2, ell2, acc2):
    m, _, acc = _merge_reference(m1, ell1, acc1, m2, ell2, acc2)
    return m, ell1 + ell2, acc


def _merge_inverted(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    safe = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    alpha, beta = torch.exp(safe - m1), torch.exp(safe - m2)
    return m, ell1 * alpha + ell2 * beta, acc1 * alpha[..., None] + acc2 * beta[..., None]


def _merge_unguarded(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    alpha, beta = torch.exp(m1 - m), torch.exp(m2 - m)  # NaN where both are −∞
    return m, ell1 * alpha + ell2 * beta, acc1 * alpha[..., None] + acc2 * beta[..., None]


def _merge_empty_max_zero(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)  # the stand-in returned as the max
    alpha, beta = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, ell1 * alpha + ell2 * beta, acc1 * alpha[..., None] + acc2 * beta[..., None]


def _merge_divided(m1, ell1, acc1, m2, ell2, acc2):
    m, ell, acc = _merge_reference(m1, ell1, acc1, m2, ell2, acc2)
    return m, ell, acc / ell[..., None]  # the output, not the accumulator (0 / 0 where both are empty)


def _merge_first_max(m1, ell1, acc1, m2, ell2, acc2):
    beta = torch.exp(m2 - torch.where(m1 == NEG_INF, torch.zeros_like(m1), m1))
    return m1, ell1 + ell2 * beta, acc1 + acc2 * beta[..., None]


register(
    Exercise(
        id="08.merge_states",
        reference=_merge_reference,
        cases=_merge_cases,
        hidden=_merge_hidden,
        forbidden=("course_utils.tiled.merge_states",),
        mistakes=(
            Mistake(
                "NO_RESCALE",
                _merge_no_rescale,
                {
                    "en": "acc = acc1 + acc2: the accumulators were added as they are. Each was summed with its "
                    "own max, acc1 = Σ exp(s − m1)·v, so before adding, each must be brought to the new max m: "
                    "acc1 · exp(m1 − m) + acc2 · exp(m2 − m). (ell is right: do the same to acc.)",
                    "zh": "acc = acc1 + acc2：两个累加器被原样相加了。它们各自是按自己的最大值求和的，"
                    "acc1 = Σ exp(s − m1)·v，所以相加之前都要重新缩放到新的最大值 m："
                    "acc1 · exp(m1 − m) + acc2 · exp(m2 − m)。（ell 是对的：对 acc 做同样的事。）",
                },
            ),
            Mistake(
                "NEW_MAX_FOR_OLD_SUM",
                _merge_new_max_for_old_sum,
                {
                    "en": "ell = ell1 + ell2: the two sums were added as if both had been taken with the new max m. "
                    "ell1 = Σ exp(s − m1) was taken with m1: rescale it, ell1 · exp(m1 − m), and ell2 the same "
                    "way, exactly as acc (which is right).",
                    "zh": "ell = ell1 + ell2：两个和被直接相加，就好像它们都是按新的最大值 m 算出来的。"
                    "ell1 = Σ exp(s − m1) 是以 m1 为基准算的：要重新缩放成 ell1 · exp(m1 − m)，ell2 也一样，"
                    "与 acc 的做法完全相同（acc 是对的）。",
                },
            ),
            Mistake(
                "RESCALE_INVERTED",
                _merge_inverted,
                {
                    "en": "The factors are exp(m − m1) and exp(m − m2): upside down. The new max m is the larger, "
                    "so a piece's terms shrink when they move to it: multiply by exp(m1 − m) ≤ 1 and "
                    "exp(m2 − m) ≤ 1.",
                    "zh": "缩放因子写成了 exp(m − m1) 和 exp(m − m2)：上下颠倒了。新的最大值 m 更大，"
                    "所以重新缩放到它时各项应当变小：乘 exp(m1 − m) ≤ 1 和 exp(m2 − m) ≤ 1。",
                },
            ),
            Mistake(
                "EMPTY_PIECE_NAN",
                _merge_unguarded,
                {
                    "en": "NaN where both pieces are fully masked: their maxima are −∞, so m = −∞ and "
                    "exp(m1 − m) = exp(−∞ + ∞) = NaN. Nothing was seen there: the merged state must be "
                    "m = −∞, ell = 0, acc = 0. Subtract a finite stand-in where m is −∞, e.g. "
                    "torch.where(m == -inf, 0, m), so that exp(−∞ − 0) = 0.",
                    "zh": "两段都被完全遮住的行出现了 NaN：它们的最大值都是 −∞，于是 m = −∞，"
                    "exp(m1 − m) = exp(−∞ + ∞) = NaN。这一行什么都没看到：合并后的状态应为 m = −∞、ell = 0、acc = 0。"
                    "在 m 为 −∞ 的地方改减一个有限的替代值，例如 torch.where(m == -inf, 0, m)，这样 exp(−∞ − 0) = 0。",
                },
            ),
            Mistake(
                "FIRST_MAX_KEPT",
                _merge_first_max,
                {
                    "en": "m is m1, the first piece's max, and only the second piece was rescaled to it. When m2 > m1 "
                    "the factor exp(m2 − m1) is larger than 1 and can overflow; the state's m must be the larger "
                    "of the two, m = max(m1, m2), and both pieces are rescaled to it.",
                    "zh": "m 取了第一段的最大值 m1，只把第二段重新缩放了过去。当 m2 > m1 时，因子 exp(m2 − m1) 大于 1，"
                    "可能溢出；状态里的 m 必须是两者中较大的那个，m = max(m1, m2)，两段都重新缩放到它。",
                },
            ),
            Mistake(
                "EMPTY_MAX_ZERO",
                _merge_empty_max_zero,
                {
                    "en": "Where both pieces are fully masked the merged m is 0: the finite stand-in that keeps "
                    "exp(−∞ − m) away from NaN replaced m itself. Nothing was seen in that row, so its m stays −∞ "
                    "(a later piece with any finite max must win against it). Use the stand-in only inside the "
                    "exponent: safe = torch.where(m == -inf, 0, m), exp(m1 − safe), and return m.",
                    "zh": "两段都被完全遮住的行，合并后的 m 成了 0：为了避免 exp(−∞ − m) 得到 NaN 而用的有限替代值，"
                    "把 m 本身也替换掉了。这一行什么都没看到，它的 m 应保持 −∞（之后任何有有限最大值的段都必须胜过它）。"
                    "替代值只用在指数里：safe = torch.where(m == -inf, 0, m)，计算 exp(m1 − safe)，返回的仍是 m。",
                },
            ),
            Mistake(
                "ACC_DIVIDED",
                _merge_divided,
                {
                    "en": "acc comes back divided by ell: that is the output of the merged piece, not its state. "
                    "The state keeps the sum acc = acc1 · exp(m1 − m) + acc2 · exp(m2 − m), so that a third piece "
                    "can still be merged in; the division by ell happens once, at the very end.",
                    "zh": "返回的 acc 被 ell 除过了：那是合并后这一段的输出，而不是它的状态。状态里保存的是和，"
                    "acc = acc1 · exp(m1 − m) + acc2 · exp(m2 − m)，这样之后还能再合并第三段；除以 ell 只在最后做一次。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 08.tiled_forward
# (query (B, L_q, d), key (B, L_k, d), value (B, L_k, d_v), block_q, block_k) -> (output, lse)


def _qkv(generator, B, L_q, L_k, d, d_v, *, dtype=torch.float32, spread=1.0):
    q = torch.randn(B, L_q, d, generator=generator, dtype=torch.float64) * spread
    k = torch.randn(B, L_k, d, generator=generator, dtype=torch.float64)
    k = k * torch.linspace(0.5, 2.5, L_k, dtype=torch.float64)[:, None]  # later keys score wider: the max moves
    v = torch.randn(B, L_k, d_v, generator=generator, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _tiled_cases(generator):
    g = generator
    return [
        (*_qkv(g, 2, 7, 10, 4, 3, spread=2.0), 3, 4),  # first: tails on both sides, 3 key tiles
        (*_qkv(g, 1, 1, 1, 2, 2), 1, 1),  # one query, one key
        (*_qkv(g, 2, 5, 5, 3, 4), 1, 1),  # tiles of one score
        (*_qkv(g, 3, 5, 6, 4, 2), 16, 16),  # blocks longer than the sequence: one tile
        (*_qkv(g, 2, 8, 8, 4, 4, dtype=torch.float64, spread=2.0), 2, 4),  # float64, blocks divide L
        (*_qkv(g, 1, 6, 9, 16, 1), 6, 2),  # d_v = 1, d = 16; block_q = L_q
        (*_qkv(g, 2, 9, 3, 4, 3), 4, 2),  # L_q > L_k
        (*_qkv(g, 1, 4, 12, 5, 3, spread=3.0), 3, 5),  # L_q < L_k, wide scores
        (*_qkv(g, 2, 5, 7, 4, 3, spread=40.0), 2, 3),  # scores past 88: exp(s) overflows float32 without the max
        (*_qkv(g, 1, 16, 48, 2, 2), 8, 4),  # long keys, small heads: all the scores (768) or a row of tiles
        # against every key (384) are more than _tiled_largest allows (192); one tile is 32
        (*_far_below_zero(*_qkv(g, 2, 6, 7, 4, 3), rows=((0, 2), (1, 5))), 4, 3),  # rows of scores below −130
    ]


def _tiled_hidden(generator):
    """The grader's cases: other lengths, blocks and widths than the public ones, each edge again
    (tails, one tile, float64, scores past 88, a row below −130, long keys for the size limit)."""
    g = generator
    return [
        (*_qkv(g, 1, 9, 13, 4, 2, spread=2.0), 4, 5),
        (*_qkv(g, 2, 3, 4, 6, 3), 8, 8),  # one tile
        (*_qkv(g, 1, 6, 6, 2, 5, dtype=torch.float64), 3, 2),
        (*_qkv(g, 1, 4, 9, 4, 3, spread=40.0), 3, 4),  # scores past 88
        (*_far_below_zero(*_qkv(g, 1, 5, 8, 4, 2), rows=((0, 3),)), 2, 3),  # a row below −130
        (*_qkv(g, 1, 12, 40, 2, 2), 6, 4),  # long keys: 480 scores against a limit of 160
    ]


def _far_below_zero(query, key, value, rows):
    """The case with the queries of `rows` ((b, i) pairs) turned so that every score of theirs is
    below −130: a running max that starts at 0 instead of −∞ never moves for them, and
    exp(s − 0) underflows to 0 in float32 (below about −104) and in float64 (below about −745 it
    would too), so ell = 0 and the output 0 / 0 = NaN; the running max from −∞ gives the softmax."""
    d = query.shape[-1]
    key = key.clone()
    key[..., 0] = key[..., 0].abs() + 2.0  # every key's feature 0 in [2, …)
    query = query.clone()
    for b, i in rows:
        query[b, i] = 0.0
        query[b, i, 0] = -70.0 * math.sqrt(d)  # score = −70 · key[..., 0] ≤ −140
    return query, key, value


def _tiled_largest(query, key, value, block_q, block_k):
    """The most elements a tensor may hold in a tiled forward: twice the largest of the inputs, the
    output and one tile of scores (room for a padded or reshaped copy of an input), never the whole
    (L_q, L_k) matrix on the cases built for it."""
    B, L_q, _ = query.shape
    tile = B * min(block_q, L_q) * min(block_k, key.shape[1])
    return 2 * max(query.numel(), key.numel(), value.numel(), B * L_q * value.shape[-1], tile)


def _tiles_reference(query, key, value, block_q, block_k, causal=False, keep=None, skip=None, count=False,
                     rescale=True, rescale_sum=True, divide_early=False, scaled=True, lse_max=True, key_tail=True,
                     divide=True, as_tensor=False, max_from=NEG_INF, guard=True):
    """The tiled forward, with the switches the mistakes below flip. keep(i0, i1, j0, j1, device) ->
    bool tile on that device (the inputs', a GPU's too) or None (no mask); skip(i, j, i0, i1, j0,
    j1) -> True to skip a tile."""
    B, L_q, d = query.shape
    L_k, d_v = key.shape[1], value.shape[-1]
    scale = 1 / math.sqrt(d) if scaled else 1.0
    outputs, lses, computed = [], [], 0
    key_starts = range(0, L_k, block_k) if key_tail else range(0, (L_k // block_k) * block_k, block_k)
    for i0 in range(0, L_q, block_q):
        i1 = min(i0 + block_q, L_q)
        q = query[:, i0:i1] * scale  # (B, b_q, d)
        m = torch.full((B, i1 - i0), max_from, dtype=query.dtype, device=query.device)
        ell = torch.zeros(B, i1 - i0, dtype=query.dtype, device=query.device)
        acc = torch.zeros(B, i1 - i0, d_v, dtype=query.dtype, device=query.device)
        for j0 in key_starts:
            j1 = min(j0 + block_k, L_k)
            if skip is not None and skip(i0 // block_q, j0 // block_k, i0, i1, j0, j1):
                continue
            computed += 1
            s = q @ key[:, j0:j1].transpose(1, 2)  # (B, b_q, b_k)
            mask = keep(i0, i1, j0, j1, query.device) if keep is not None else None
            if mask is not None:
                s = s.masked_fill(~mask, NEG_INF)
            m_new = torch.maximum(m, s.detach().amax(-1))
            safe = torch.where(m_new == NEG_INF, torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m - safe)
            p = torch.exp(s - safe[..., None])
            ell_scaled = ell * alpha if rescale_sum else ell
            acc_scaled = acc * alpha[..., None] if rescale else acc
            ell = ell_scaled + p.sum(-1)
            acc = acc_scaled + p @ value[:, j0:j1]
            if divide_early:  # acc becomes the output so far, then is treated as the running sum again
                acc = acc / ell[..., None]
            m = m_new
        seen = ell > 0 if guard else torch.ones_like(ell, dtype=torch.bool)  # unguarded: 0 / 0 where ell = 0
        ell_safe = torch.where(seen, ell, torch.ones_like(ell))
        outputs.append(acc if divide_early or not divide else acc / ell_safe[..., None])
        lses.append(torch.where(seen, (m if lse_max else 0) + torch.log(ell_safe), torch.full_like(m, NEG_INF)))
    result = torch.cat(outputs, dim=1), torch.cat(lses, dim=1)
    return (*result, torch.tensor(computed) if as_tensor else computed) if count else result


def _tiled_no_max(query, key, value, block_q, block_k):
    """Tiles summed as exp(s), with no running max: exp overflows float32 once a score passes 88."""
    L_q, d = query.shape[1], query.shape[2]
    outputs, lses = [], []
    for i0 in range(0, L_q, block_q):
        q = query[:, i0:i0 + block_q] / math.sqrt(d)
        ell = torch.zeros(q.shape[:2], dtype=query.dtype)
        acc = torch.zeros(*q.shape[:2], value.shape[-1], dtype=query.dtype)
        for j0 in range(0, key.shape[1], block_k):
            p = torch.exp(q @ key[:, j0:j0 + block_k].transpose(1, 2))
            ell = ell + p.sum(-1)
            acc = acc + p @ value[:, j0:j0 + block_k]
        outputs.append(acc / ell[..., None])
        lses.append(torch.log(ell))
    return torch.cat(outputs, dim=1), torch.cat(lses, dim=1)


def _tiled_reference(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k)


register(
    Exercise(
        id="08.tiled_forward",
        reference=_tiled_reference,
        cases=_tiled_cases,
        hidden=_tiled_hidden,
        largest=_tiled_largest,
        forbidden=("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                   "torch.logsumexp", "Tensor.logsumexp", "course_utils.tiled.tiled_attention",
                   "course_utils.tiled.materialised_attention",
                   "course_utils.attention.scaled_dot_product_attention"),
        mistakes=(
            Mistake(
                "NO_RESCALE",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, rescale=False),
                {
                    "en": "The accumulator is not rescaled when the max grows: acc + p @ v_j instead of "
                    "acc · exp(m_old − m_new) + p @ v_j. What acc holds was summed with the old max; each tile "
                    "that raises the max must shrink it by exp(m_old − m_new), as it shrinks ell.",
                    "zh": "最大值变大时没有重新缩放累加器：写成了 acc + p @ v_j，应为 acc · exp(m_old − m_new) + p @ v_j。"
                    "acc 里的内容是按旧的最大值求和的；每个让最大值变大的分块，都要像对 ell 那样把它缩小 "
                    "exp(m_old − m_new) 倍。",
                },
            ),
            Mistake(
                "NEW_MAX_FOR_OLD_SUM",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, rescale_sum=False),
                {
                    "en": "ell_new = ell_old + Σ exp(s − m_new): the old sum is used as if it had been taken with the new "
                    "max. It was taken with m_old: ell_new = ell_old · exp(m_old − m_new) + Σ exp(s − m_new). (The "
                    "accumulator is rescaled right.)",
                    "zh": "ell_new = ell_old + Σ exp(s − m_new)：把旧的和当成是按新的最大值算出来的。它其实是按 m_old 算的："
                    "ell_new = ell_old · exp(m_old − m_new) + Σ exp(s − m_new)。（累加器的重新缩放是对的。）",
                },
            ),
            Mistake(
                "DIVIDE_EARLY",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, divide_early=True),
                {
                    "en": "The accumulator is divided by ell inside the loop, after every tile. Keep it a sum, "
                    "acc = Σ exp(s − m)·v, rescaled as the max grows, and divide once, after the last tile of the "
                    "row: output = acc / ell. (With a single key tile both give the same numbers; with several "
                    "they do not.)",
                    "zh": "在循环里、每个分块之后都用 ell 除了累加器。累加器应当一直是和，acc = Σ exp(s − m)·v，"
                    "最大值变大时重新缩放它；只在这一行的最后一个分块之后除一次：output = acc / ell。"
                    "（键只有一个块时两种写法结果相同；有多个键块时就不同了。）",
                },
            ),
            Mistake(
                "NO_SCALE",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, scaled=False),
                {
                    "en": "The scores are not scaled: each tile's scores are q_i k_jᵀ / √d, as in "
                    "F.scaled_dot_product_attention (and the log-sum-exp is of those scaled scores).",
                    "zh": "分数没有缩放：每个分块的分数应为 q_i k_jᵀ / √d，与 F.scaled_dot_product_attention 相同"
                    "（log-sum-exp 也是对缩放后的分数求的）。",
                },
            ),
            Mistake(
                "KEY_TAIL_DROPPED",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, key_tail=False),
                {
                    "en": "The last keys are never seen when block_k does not divide L_k: the loop over key blocks "
                    "stops at L_k // block_k full blocks. Loop over the starts range(0, L_k, block_k) and cut the "
                    "last block short: key[:, j0:min(j0 + block_k, L_k)].",
                    "zh": "当 block_k 不能整除 L_k 时，最后几个键从未被看到：键块的循环只走了 L_k // block_k 个完整的块。"
                    "应按起点 range(0, L_k, block_k) 循环，并让最后一块短一些：key[:, j0:min(j0 + block_k, L_k)]。",
                },
            ),
            Mistake(
                "LSE_WITHOUT_MAX",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, lse_max=False),
                {
                    "en": "The log-sum-exp is log(ell), without the max: ell = Σ exp(s − m), so "
                    "log Σ exp(s) = m + log(ell). (The output is right.)",
                    "zh": "log-sum-exp 写成了 log(ell)，少了最大值：ell = Σ exp(s − m)，所以 "
                    "log Σ exp(s) = m + log(ell)。（输出是对的。）",
                },
            ),
            Mistake(
                "NO_MAX_SHIFT",
                _tiled_no_max,
                {
                    "en": "The tiles are summed as exp(s), with no running max. In exact arithmetic that is the same "
                    "softmax, but exp overflows float32 as soon as a score passes about 88 (float64: 709): ell and "
                    "acc become inf and the output NaN. Keep the running max m of each row, sum exp(s − m), and "
                    "rescale ell and acc by exp(m_old − m_new) when it grows; lse = m + log(ell).",
                    "zh": "分块是按 exp(s) 直接求和的，没有维护行的最大值。精确计算时这是同一个 softmax，但只要有分数超过"
                    "大约 88（float64 是 709），exp 就会在 float32 中溢出：ell 和 acc 变成 inf，输出变成 NaN。"
                    "应维护每一行的当前最大值 m，对 exp(s − m) 求和，m 变大时用 exp(m_old − m_new) 重新缩放 ell 和 acc；"
                    "lse = m + log(ell)。",
                },
            ),
            Mistake(
                "MAX_STARTS_AT_ZERO",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, max_from=0.0, guard=False),
                {
                    "en": "The running max starts at 0 instead of −∞. In exact arithmetic any start gives the same "
                    "softmax, and it does here for most rows; but a row whose scores are all far below 0 keeps m = 0, "
                    "and exp(s − 0) underflows to 0 (in float32 below about −104): ell = 0 and the output is "
                    "0 / 0 = NaN. Start from what nothing seen means, m = −∞ (torch.full(..., float('-inf'))), so "
                    "that the first tile's max replaces it.",
                    "zh": "运行最大值从 0 开始，而不是从 −∞ 开始。精确计算时从哪里开始都得到同样的 softmax，这里的大多数行也确实如此；"
                    "但如果一行的分数都远小于 0，m 就一直停在 0，exp(s − 0) 下溢为 0（float32 中低于大约 −104 时）："
                    "ell = 0，输出为 0 / 0 = NaN。应从“什么都还没看到”出发，即 m = −∞（torch.full(..., float('-inf'))），"
                    "这样第一个分块的最大值就会取代它。",
                },
            ),
            Mistake(
                "NOTHING_RESCALED",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, rescale=False, rescale_sum=False),
                {
                    "en": "Neither ell nor acc is rescaled when the max grows: each tile's exp(s − m_new) is added to "
                    "sums that were taken with the old max. Both must shrink by exp(m_old − m_new) first: "
                    "ell = ell · a + Σ exp(s − m_new), acc = acc · a + exp(s − m_new) @ v_j, a = exp(m_old − m_new).",
                    "zh": "最大值变大时，ell 和 acc 都没有重新缩放：每个分块的 exp(s − m_new) 被加到了按旧最大值求出的和上。"
                    "两者都要先缩小 exp(m_old − m_new) 倍：ell = ell · a + Σ exp(s − m_new)，"
                    "acc = acc · a + exp(s − m_new) @ v_j，其中 a = exp(m_old − m_new)。",
                },
            ),
            Mistake(
                "NOT_DIVIDED",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, divide=False),
                {
                    "en": "The output is the accumulator itself, acc = Σ exp(s − m)·v, never divided by ell. After a "
                    "row's last tile, output = acc / ell: the weights exp(s − m) / ell are what sum to 1.",
                    "zh": "输出就是累加器本身，acc = Σ exp(s − m)·v，从来没有除以 ell。一行的最后一个分块算完之后，"
                    "output = acc / ell：加起来为 1 的是权重 exp(s − m) / ell。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 08.causal_tiles
# (query (B, L, d), key (B, L, d), value (B, L, d_v), block_q, block_k) -> (output, lse, tiles)


def _causal_cases(generator):
    g = generator
    return [
        (*_qkv(g, 2, 10, 10, 4, 3, spread=2.0), 4, 3),  # first: block_q > block_k, tiles cut by the diagonal
        (*_qkv(g, 1, 1, 1, 2, 2), 1, 1),  # one position
        (*_qkv(g, 2, 8, 8, 3, 4), 2, 2),  # equal blocks that divide L
        (*_qkv(g, 1, 11, 11, 4, 2), 2, 5),  # block_q < block_k
        (*_qkv(g, 3, 6, 6, 4, 4), 16, 16),  # one tile
        (*_qkv(g, 2, 9, 9, 4, 2, dtype=torch.float64, spread=2.0), 3, 3),  # float64
        (*_qkv(g, 1, 7, 7, 8, 5), 1, 4),  # queries one at a time
        (*_qkv(g, 2, 12, 12, 4, 4), 5, 1),  # keys one at a time
    ]


def _causal_hidden(generator):
    """The grader's cases: other lengths and blocks than the public ones (and other values)."""
    g = generator
    return [
        (*_qkv(g, 1, 13, 13, 4, 3, spread=2.0), 5, 2),
        (*_qkv(g, 2, 7, 7, 2, 2), 3, 4),
        (*_qkv(g, 1, 10, 10, 6, 4, dtype=torch.float64), 4, 4),
        (*_qkv(g, 2, 5, 5, 4, 3), 1, 2),
    ]


def _global_keep(offset=0):
    """keep(i0, i1, j0, j1, device): key j visible from query i when j ≤ i + offset (0: causal)."""
    def keep(i0, i1, j0, j1, device=None):
        return torch.arange(j0, j1, device=device)[None, :] <= torch.arange(i0, i1, device=device)[:, None] + offset
    return keep


def _hidden_tile(offset=0):
    """skip(i, j, i0, i1, j0, j1): the tile holds no visible entry (its first key after its last query)."""
    return lambda i, j, i0, i1, j0, j1: j0 > i1 - 1 + offset


def _causal_reference(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k, keep=_global_keep(), skip=_hidden_tile(), count=True)


def _causal_no_skip(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k, keep=_global_keep(), count=True)


def _causal_unmasked(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k, skip=_hidden_tile(), count=True)


def _causal_off_by_one(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k, keep=_global_keep(1), skip=_hidden_tile(1),
                            count=True)


def _causal_local_mask(query, key, value, block_q, block_k):
    def local(i0, i1, j0, j1, device):  # the tile's own row and column numbers: right only on a square diagonal tile
        return torch.ones(i1 - i0, j1 - j0, dtype=torch.bool, device=device).tril()
    crossing = _hidden_tile()
    return _tiles_reference(query, key, value, block_q, block_k, count=True, skip=crossing,
                            keep=lambda i0, i1, j0, j1, device: local(i0, i1, j0, j1, device) if j1 - 1 > i0 else None)


def _causal_hides_itself(query, key, value, block_q, block_k):
    """keep j < i, unguarded as a learner writes it: query 0 sees nothing, exp(−∞ + ∞) gives it NaN."""
    B, L, d = query.shape
    outputs, lses, computed = [], [], 0
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        m = torch.full((B, i1 - i0), NEG_INF, dtype=query.dtype)
        ell = torch.zeros(B, i1 - i0, dtype=query.dtype)
        acc = torch.zeros(B, i1 - i0, value.shape[-1], dtype=query.dtype)
        for j0 in range(0, L, block_k):
            j1 = min(j0 + block_k, L)
            if j0 > i1 - 1:
                continue
            computed += 1
            s = query[:, i0:i1] @ key[:, j0:j1].transpose(1, 2) / math.sqrt(d)
            if j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] >= torch.arange(i0, i1)[:, None], NEG_INF)
            m_new = torch.maximum(m, s.amax(-1))
            alpha, p = torch.exp(m - m_new), torch.exp(s - m_new[..., None])
            ell, acc, m = ell * alpha + p.sum(-1), acc * alpha[..., None] + p @ value[:, j0:j1], m_new
        outputs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    return torch.cat(outputs, dim=1), torch.cat(lses, dim=1), computed


def _causal_block_index(query, key, value, block_q, block_k):
    return _tiles_reference(query, key, value, block_q, block_k, keep=_global_keep(), count=True,
                            skip=lambda i, j, i0, i1, j0, j1: j > i)


register(
    Exercise(
        id="08.causal_tiles",
        reference=_causal_reference,
        cases=_causal_cases,
        hidden=_causal_hidden,
        forbidden=("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                   "torch.logsumexp", "Tensor.logsumexp", "course_utils.tiled.tiled_attention",
                   "course_utils.tiled.materialised_attention", "course_utils.tiled.tile_kinds",
                   "course_utils.attention.scaled_dot_product_attention"),
        mistakes=(
            Mistake(
                "NO_SKIP",
                _causal_no_skip,
                {
                    "en": "The output is right, but the count holds every tile: the tiles above the diagonal were "
                    "counted, whether they were computed (masked entirely) or skipped after being counted. A tile "
                    "whose first key comes after its last query, j0 > i1 − 1, holds nothing visible: skip it "
                    "(continue) before counting, and count only the tiles you compute.",
                    "zh": "输出是对的，但计数包含了每一个分块：对角线上方的分块也被数了进去，不管它们是被计算了（整块遮住），"
                    "还是先计数再跳过。第一个键位于最后一个查询之后（j0 > i1 − 1）的分块里没有任何可见的元素："
                    "在计数之前跳过它（continue），并且只数你计算了的分块。",
                },
            ),
            Mistake(
                "DIAGONAL_UNMASKED",
                _causal_unmasked,
                {
                    "en": "The tiles above the diagonal are skipped, but the tiles the diagonal cuts through are "
                    "computed without a mask, so a query sees the later keys of its own tile. Mask those tiles: "
                    "hide key j from query i where j > i, with their positions in the whole sequence.",
                    "zh": "对角线上方的分块跳过了，但被对角线穿过的分块没有加掩码，于是查询能看到同一分块里位置更靠后的键。"
                    "要给这些分块加掩码：按它们在整个序列中的位置，对查询 i 遮住 j > i 的键 j。",
                },
            ),
            Mistake(
                "DIAGONAL_OFF_BY_ONE",
                _causal_off_by_one,
                {
                    "en": "Each query sees one key too many: the mask keeps j ≤ i + 1 (an off-by-one, often from "
                    "mixing positions counted from 0 and from 1). Query i sees keys j ≤ i: itself and "
                    "everything before it.",
                    "zh": "每个查询多看到了一个键：掩码保留了 j ≤ i + 1（差一错误，常见于把从 0 数和从 1 数的位置混在一起）。"
                    "查询 i 应看到 j ≤ i 的键：它自己以及它之前的所有位置。",
                },
            ),
            Mistake(
                "TILE_LOCAL_MASK",
                _causal_local_mask,
                {
                    "en": "The mask of a tile cut by the diagonal is built from the tile's own row and column "
                    "numbers (tril of a b_q × b_k block). That is right only for a square tile that sits on the "
                    "diagonal; with block_q ≠ block_k the diagonal crosses tiles elsewhere. Compare the global "
                    "positions: key j0 + c is visible from query i0 + r when j0 + c ≤ i0 + r.",
                    "zh": "被对角线穿过的分块，其掩码是用分块自己的行号和列号构造的（对 b_q × b_k 的块取 tril）。"
                    "这只对恰好位于对角线上的正方形分块成立；block_q ≠ block_k 时，对角线会从别处穿过分块。"
                    "应比较全局位置：当 j0 + c ≤ i0 + r 时，查询 i0 + r 能看到键 j0 + c。",
                },
            ),
            Mistake(
                "BLOCK_INDEX_SKIP",
                _causal_block_index,
                {
                    "en": "Tiles were skipped by their block numbers, j > i. That is the rule only when "
                    "block_q = block_k; otherwise a tile with j > i can still hold visible keys (or one with "
                    "j ≤ i hold none). Skip by positions: the tile is hidden when its first key comes after its "
                    "last query, j0 > i1 − 1.",
                    "zh": "按块编号 j > i 跳过了分块。只有 block_q = block_k 时这条规则才对；否则 j > i 的分块里仍可能有"
                    "可见的键（j ≤ i 的分块也可能一个都没有）。应按位置跳过：当分块的第一个键位于它最后一个查询之后，"
                    "即 j0 > i1 − 1 时，这个分块整块不可见。",
                },
            ),
            Mistake(
                "CAUSAL_HIDES_ITSELF",
                _causal_hides_itself,
                {
                    "en": "The mask also hides each query's own key (it keeps j < i), so query 0 sees nothing and "
                    "gets NaN. A position may attend to itself: keep key j for query i when j ≤ i.",
                    "zh": "掩码把每个查询自己的键也遮住了（只保留了 j < i），于是查询 0 什么都看不到，得到 NaN。"
                    "一个位置可以关注它自己：当 j ≤ i 时，查询 i 保留键 j。",
                },
            ),
            Mistake(
                "NO_SCALE",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, keep=_global_keep(), skip=_hidden_tile(),
                                                         count=True, scaled=False),
                {
                    "en": "The scores are not scaled: each tile's scores are q_i k_jᵀ / √d, as in "
                    "F.scaled_dot_product_attention (and the log-sum-exp is of those scaled scores).",
                    "zh": "分数没有缩放：每个分块的分数应为 q_i k_jᵀ / √d，与 F.scaled_dot_product_attention 相同"
                    "（log-sum-exp 也是对缩放后的分数求的）。",
                },
            ),
            Mistake(
                "TILES_NOT_INT",
                lambda q, k, v, bq, bk: _tiles_reference(q, k, v, bq, bk, keep=_global_keep(), skip=_hidden_tile(),
                                                         count=True, as_tensor=True),
                {
                    "en": "The output and lse are right, but the number of tiles comes back as a tensor. Return a "
                    "Python int: count with tiles += 1 on an int, or convert at the end with int(...).",
                    "zh": "输出和 lse 都是对的，但分块数返回成了张量。应返回 Python 的 int：用一个 int 做 tiles += 1 计数，"
                    "或者最后用 int(...) 转换。",
                },
            ),
            Mistake(
                "SQUARE_TILES",
                lambda q, k, v, bq, bk: _causal_reference(q, k, v, bq, bq),
                {
                    "en": "The output is right, but the tiles are block_q × block_q: the keys were cut into blocks "
                    "of block_q too, so the count is of other tiles. Cut the queries by block_q and the keys and "
                    "values by block_k; the two may differ.",
                    "zh": "输出是对的，但分块是 block_q × block_q 的：键也按 block_q 切块了，所以数出来的是别的分块。"
                    "查询按 block_q 切，键和值按 block_k 切；两者可以不同。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 08.tiled_backward
# (query (B, L_q, d), key (B, L_k, d), value (B, L_k, d_v), output (B, L_q, d_v), lse (B, L_q),
#  d_output (B, L_q, d_v), block_q, block_k, causal) -> (d_query, d_key, d_value, tiles)


def _backward_case(generator, B, L_q, L_k, d, d_v, block_q, block_k, causal, *, dtype=torch.float32, spread=1.0):
    """A case: random query, key, value (the later keys wider, so the weights are uneven), the
    forward's output and lse computed in float64 (top-left causal when `causal`), and a random
    gradient reaching the output."""
    q, k, v = _qkv(generator, B, L_q, L_k, d, d_v, dtype=torch.float64, spread=spread)
    scores = q @ k.transpose(1, 2) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(L_q, L_k, dtype=torch.bool).triu(1), NEG_INF)
    lse = torch.logsumexp(scores, -1)
    output = torch.exp(scores - lse[..., None]) @ v
    d_output = torch.randn(B, L_q, d_v, generator=generator, dtype=torch.float64)
    return (*(t.to(dtype) for t in (q, k, v, output, lse, d_output)), block_q, block_k, causal)


def _backward_cases(generator):
    g = generator
    return [
        _backward_case(g, 2, 8, 8, 4, 3, 4, 4, True, spread=2.0),  # first: causal, square tiles (P @ dO runs)
        _backward_case(g, 2, 10, 10, 4, 3, 4, 3, True, spread=2.0),  # causal, block_q > block_k, tails
        _backward_case(g, 2, 7, 11, 4, 3, 3, 4, False, spread=2.0),  # L_q < L_k, tails on both sides
        _backward_case(g, 1, 1, 1, 2, 2, 1, 1, True),  # one position
        _backward_case(g, 2, 9, 4, 3, 5, 2, 3, False),  # L_q > L_k, d_v > d
        _backward_case(g, 2, 6, 6, 4, 2, 16, 16, True),  # one tile
        _backward_case(g, 1, 8, 8, 4, 4, 2, 4, True, dtype=torch.float64, spread=2.0),  # float64, blocks divide L
        _backward_case(g, 2, 5, 5, 3, 3, 1, 1, False),  # tiles of one score
        _backward_case(g, 1, 11, 11, 8, 2, 2, 5, True),  # block_q < block_k
        _backward_case(g, 1, 6, 9, 4, 3, 4, 2, False, spread=2.5),  # wide scores: the weights far from even
        _backward_case(g, 1, 16, 48, 2, 2, 8, 4, False),  # long keys: all the scores (768) are more than the
        # limit (192); one tile is 32
    ]


def _backward_hidden(generator):
    """The grader's cases: other lengths, blocks and widths than the public ones (and other values)."""
    g = generator
    return [
        _backward_case(g, 1, 13, 13, 4, 2, 5, 2, True, spread=2.0),
        _backward_case(g, 3, 5, 8, 2, 4, 2, 3, False),
        _backward_case(g, 2, 12, 12, 6, 3, 3, 3, True),
        _backward_case(g, 1, 7, 7, 4, 5, 3, 6, True, dtype=torch.float64),
        _backward_case(g, 2, 11, 6, 4, 3, 4, 4, False, spread=2.5),
        _backward_case(g, 1, 20, 60, 2, 2, 5, 4, False),  # long keys again: 1200 scores against a limit of 240
    ]


def _backward_largest(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """As 08.tiled_forward's limit: twice the largest of the inputs, the output and one tile."""
    return _tiled_largest(query, key, value, block_q, block_k)


def _backward_reference(query, key, value, output, lse, d_output, block_q, block_k, causal, *, use_D=True,
                        D_per_tile=False, weights="lse", scaled=True, dq_scaled=True, dk_scaled=True,
                        dv_transposed=True, dk_transposed=True, sum_k=True, sum_v=True, sum_q=True,
                        skip="positions", mask="positions",
                        square=False, as_tensor=False, exact=True, weights_scaled=True, sign=1.0, D_over="features",
                        dq_twice=False, dk_twice=False, query_tail=True, extra_tiles=0):
    """FlashAttention-2's backward (key blocks outside, query blocks inside), with the switches the
    mistakes below flip. skip: "positions" (j0 > i1 − 1), "never", "blocks" (j > i); mask:
    "positions", "none", "local" (tril of the tile), and the learners' slips: skip "first_query" (j0 > i0: the
    diagonal tiles whose keys start after the block's first query lost), mask "strict" (j ≥ i hidden: a query
    loses its own key), "local_all" (the tile's own row and column numbers, on every tile computed),
    "same_index" (the global mask, only on the tile whose key-block number is the query block's).
    weights: "lse" (exp(S − lse)), "tile_max" (exp(S − the tile's row max)), "tile_max_unmasked" (the same
    max taken over the hidden scores too, the hidden weights zeroed after exp), "raw" (exp(S)), "tile_softmax"
    (softmax within the tile), "lse_key_rows" (the lse of the key block's positions, lse[:, j0:j1]),
    "lse_along_keys" (the query block's lse with its new axis in the middle, subtracted along the keys).
    weights_scaled: False recomputes P from the unscaled scores (dQ and dK still scaled); sign: −1 flips dS;
    D_over: "features" (D_i = Σ_c dO_ic O_ic), "block" (one number per query block, summed over its rows too),
    "d_output" (Σ_c dO_ic, without O) or "batch" (summed over the batch too: one D per position for every
    batch element). dq_twice / dk_twice: the scale applied twice; query_tail: False leaves out the partial
    last query block (L_q // block_q blocks); extra_tiles: added to the count.

    exact: computed in float64 and rounded to the case's dtype at the end (the reference: the
    gradients are sums of terms of both signs, and the expected values should carry no float32
    rounding of their own, so that the tolerance covers a learner's float32 arithmetic alone);
    otherwise in the case's dtype, as a learner computes (the mistakes: some of their numbers, such
    as exp(S) unnormalised, are sums of large terms that only the same precision reproduces)."""
    dtype = query.dtype
    if exact:
        query, key, value, output, lse, d_output = (t.double() for t in (query, key, value, output, lse, d_output))
    with torch.no_grad():
        B, L_q, d = query.shape
        L_k = key.shape[1]
        block_k = block_q if square else block_k
        scale = 1 / math.sqrt(d) if scaled else 1.0
        D = (d_output * output).sum(-1)  # (B, L_q)
        d_query, d_key, d_value = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
        tiles = 0
        for j0 in range(0, L_k, block_k):
            j1 = min(j0 + block_k, L_k)
            k, v = key[:, j0:j1], value[:, j0:j1]
            d_k, d_v = torch.zeros_like(k), torch.zeros_like(v)
            for i0 in range(0, L_q if query_tail else L_q // block_q * block_q, block_q):
                i1 = min(i0 + block_q, L_q)
                if causal and (skip == "positions" and j0 > i1 - 1 or skip == "blocks" and j0 // block_k > i0 // block_q
                               or skip == "first_query" and j0 > i0):
                    continue
                tiles += 1
                q = query[:, i0:i1] * scale  # (B, b_q, d)
                s = (q if weights_scaled else query[:, i0:i1]) @ k.transpose(1, 2)  # (B, b_q, b_k)
                unmasked = s
                rows, columns = (torch.arange(*ends, device=query.device) for ends in ((i0, i1), (j0, j1)))
                hidden = None  # the entries the mask hides (made where the inputs are)
                if causal and (mask == "positions" or mask == "same_index" and j0 // block_k == i0 // block_q):
                    hidden = columns[None, :] > rows[:, None]
                elif causal and mask == "strict":
                    hidden = columns[None, :] >= rows[:, None]
                elif causal and mask == "local_all":
                    hidden = (columns - j0)[None, :] > (rows - i0)[:, None]
                elif causal and mask == "local" and j1 - 1 > i0:
                    hidden = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool, device=query.device).triu(1)
                if hidden is not None:
                    s = s.masked_fill(hidden, NEG_INF)
                if weights == "tile_max_unmasked":
                    p = torch.exp(unmasked - unmasked.amax(-1, keepdim=True))
                    p = p.masked_fill(hidden, 0.0) if hidden is not None else p
                elif weights == "lse":
                    p = torch.exp(s - lse[:, i0:i1, None])
                elif weights == "lse_key_rows":  # (runs only where the key block is as long as the query block)
                    p = torch.exp(s - lse[:, j0:j1, None])
                elif weights == "lse_along_keys":  # its new axis in the middle: runs only on square tiles
                    p = torch.exp(s - lse[:, i0:i1][:, None, :])
                elif weights == "tile_max":
                    p = torch.exp(s - s.amax(-1, keepdim=True))
                elif weights == "raw":
                    p = torch.exp(s)
                else:
                    e = torch.exp(s - s.amax(-1, keepdim=True))
                    p = e / e.sum(-1, keepdim=True)
                d_o = d_output[:, i0:i1]
                part_v = p.transpose(1, 2) @ d_o if dv_transposed else p @ d_o
                d_v = d_v + part_v if sum_v else part_v
                d_p = d_o @ v.transpose(1, 2)  # (B, b_q, b_k)
                row = (p * d_p).sum(-1) if D_per_tile else D[:, i0:i1]
                if D_over == "block":
                    row = (d_o * output[:, i0:i1]).sum(1).sum(-1)[:, None].expand(-1, i1 - i0)  # (B, b_q)
                elif D_over == "d_output":
                    row = d_o.sum(-1)
                elif D_over == "batch":
                    row = (d_output * output).sum((0, -1))[i0:i1].expand(B, -1)
                d_s = sign * (p * (d_p - row[..., None]) if use_D else p * d_p)
                part_q = d_s @ k * (scale if dq_scaled else 1.0) * (scale if dq_twice else 1.0)
                d_query[:, i0:i1] = d_query[:, i0:i1] + part_q if sum_q else part_q
                part_k = (d_s.transpose(1, 2) @ q if dk_transposed else d_s @ q) * (1.0 if dk_scaled else 1 / scale)
                part_k = part_k * scale if dk_twice else part_k
                d_k = d_k + part_k if sum_k else part_k
            d_key[:, j0:j1], d_value[:, j0:j1] = d_k, d_v
        grads = (t.to(dtype) for t in (d_query, d_key, d_value))
        tiles += extra_tiles
        return (*grads, torch.tensor(tiles) if as_tensor else tiles)


def _backward_mistake(**switches):
    return lambda *case: _backward_reference(*case, exact=False, **switches)


def _backward_whole_rows(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """Each query block's scores taken against every key at once, (b_q, L_k): right gradients, one "tile" per
    query block counted."""
    *grads, _ = _backward_reference(query, key, value, output, lse, d_output, block_q, block_k, causal, exact=False)
    return (*grads, -(-query.shape[1] // block_q))


def _backward_float32(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """The gradients allocated as torch.zeros(shape): float32 whatever the inputs' dtype."""
    *grads, tiles = _backward_reference(query, key, value, output, lse, d_output, block_q, block_k, causal, exact=False)
    return (*(g.to(torch.float32) for g in grads), tiles)


register(
    Exercise(
        id="08.tiled_backward",
        reference=_backward_reference,
        atol=5e-5,  # a right float32 answer sits within 0.03 of this tolerance of the float64 reference (40 seeds)
        rtol=5e-4,
        cases=_backward_cases,
        hidden=_backward_hidden,
        largest=_backward_largest,
        forbidden=("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                   "torch.logsumexp", "Tensor.logsumexp", "torch.autograd.grad", "torch.autograd.backward",
                   "course_utils.tiled.tiled_backward", "course_utils.tiled.flash_attention",
                   "course_utils.tiled.tiled_attention", "course_utils.tiled.materialised_attention",
                   "course_utils.tiled.tile_kinds", "course_utils.attention.scaled_dot_product_attention"),
        mistakes=(
            Mistake(
                "NO_D",
                _backward_mistake(use_D=False),
                {
                    "en": "dS = P ∘ dP: the row term D is missing. The softmax's gradient is "
                    "dS_ij = P_ij (dP_ij − Σ_k P_ik dP_ik), and that sum is D_i = Σ_c dO_ic O_ic, one number per row, "
                    "computed once before the loop from d_output and output: dS = P ∘ (dP − D). (dV is right: it "
                    "does not go through the softmax.)",
                    "zh": "dS = P ∘ dP：少了每行的那一项 D。softmax 的梯度是 dS_ij = P_ij (dP_ij − Σ_k P_ik dP_ik)，"
                    "而这个和就是 D_i = Σ_c dO_ic O_ic：每行一个数，在循环开始前由 d_output 和 output 算出一次："
                    "dS = P ∘ (dP − D)。（dV 是对的：它不经过 softmax。）",
                },
            ),
            Mistake(
                "D_PER_TILE",
                _backward_mistake(D_per_tile=True),
                {
                    "en": "D was summed over the tile, (P ∘ dP).sum(-1) of the keys in this tile only. D_i is a sum "
                    "over every key of the row, Σ_j P_ij dP_ij, and no tile holds them all: take it from the output "
                    "instead, D = (d_output * output).sum(-1), once, before the loop. (With a single key block the "
                    "two agree; with several they do not.)",
                    "zh": "D 只对这个分块求了和，即只对本分块里的键算 (P ∘ dP).sum(-1)。D_i 是对这一行所有键的和 "
                    "Σ_j P_ij dP_ij，没有哪个分块包含全部的键：应改由输出来算，D = (d_output * output).sum(-1)，"
                    "在循环开始前算一次。（只有一个键块时两者相同；有多个键块时就不同了。）",
                },
            ),
            Mistake(
                "P_TILE_MAX",
                _backward_mistake(weights="tile_max"),
                {
                    "en": "The weights were recomputed as in the forward's tile, exp(S − the tile's row max): those are "
                    "not yet the softmax, they still await the rescaling and the division by ℓ that the forward did "
                    "after its last tile. The saved lse holds both: P = exp(S − lse) is the softmax itself, tile by "
                    "tile, with no running max and no sum.",
                    "zh": "权重按前向计算中分块的方式重新算成了 exp(S − 本分块这一行的最大值)：这还不是 softmax，"
                    "它还缺前向计算在最后一个分块之后所做的重新缩放和除以 ℓ。保存下来的 lse 已经包含了这两者："
                    "P = exp(S − lse) 就是 softmax 本身，逐块可算，不需要运行最大值，也不需要求和。",
                },
            ),
            Mistake(
                "LSE_OF_KEY_ROWS",
                _backward_mistake(weights="lse_key_rows"),
                {
                    "en": "The weights were recomputed with the lse of the key block's positions, lse[:, j0:j1]: the "
                    "lse belongs to the queries, one per row of scores. P = exp(S − lse[:, i0:i1, None]), the query "
                    "block's lse along a new last axis.",
                    "zh": "重新计算权重时用了键块那些位置的 lse，即 lse[:, j0:j1]：lse 属于查询，分数的每一行一个。"
                    "应为 P = exp(S − lse[:, i0:i1, None])：查询块的 lse，并在最后加一个新维度。",
                },
            ),
            Mistake(
                "LSE_ALONG_KEYS",
                _backward_mistake(weights="lse_along_keys"),
                {
                    "en": "The query block's lse got its new axis in the wrong place, lse[:, i0:i1][:, None, :] (or "
                    ".unsqueeze(1)): it lines up with the keys, so column i of the scores loses query i's lse (it only "
                    "runs when the tile is square). The lse belongs to the rows: the new axis goes last, "
                    "P = exp(S − lse[:, i0:i1, None]) (or .unsqueeze(-1)).",
                    "zh": "查询块的 lse 新加的维度放错了位置，写成了 lse[:, i0:i1][:, None, :]（或 .unsqueeze(1)）："
                    "它与键对齐了，于是分数的第 i 列减去的是查询 i 的 lse（只有分块是正方形时才能运行）。lse 属于行："
                    "新维度要放在最后，P = exp(S − lse[:, i0:i1, None])（或 .unsqueeze(-1)）。",
                },
            ),
            Mistake(
                "P_TILE_MAX_UNMASKED",
                _backward_mistake(weights="tile_max_unmasked"),
                {
                    "en": "The weights were recomputed as in the forward's tile, exp(S − the tile's row max), the max "
                    "even taken before the causal mask hid the later keys. These are not the softmax: the saved lse "
                    "already holds the row's max and sum, and P = exp(S − lse), with the hidden scores set to −∞ "
                    "first, is the softmax itself, tile by tile.",
                    "zh": "权重按前向计算中分块的方式重新算成了 exp(S − 本分块这一行的最大值)，而且这个最大值是在因果掩码"
                    "遮住后面的键之前取的。这不是 softmax：保存下来的 lse 已经包含了这一行的最大值和总和，"
                    "先把被遮住的分数设为 −∞，再算 P = exp(S − lse)，逐块得到的就是 softmax 本身。",
                },
            ),
            Mistake(
                "P_WITHOUT_LSE",
                _backward_mistake(weights="raw"),
                {
                    "en": "The weights were recomputed as exp(S), without subtracting the row's lse: they are not "
                    "normalised (and overflow once a score passes about 88 in float32). P = exp(S − lse), with lse "
                    "the log-sum-exp the forward saved for each row.",
                    "zh": "权重重新算成了 exp(S)，没有减去这一行的 lse：它们没有归一化（在 float32 中分数超过大约 88 "
                    "就会溢出）。应为 P = exp(S − lse)，lse 是前向计算为每一行保存的 log-sum-exp。",
                },
            ),
            Mistake(
                "P_TILE_SOFTMAX",
                _backward_mistake(weights="tile_softmax"),
                {
                    "en": "The weights were recomputed as a softmax within the tile: each tile's rows sum to 1 on their "
                    "own. A row's weights sum to 1 over all its keys, across every key block: P = exp(S − lse), "
                    "with the lse the forward saved for the whole row.",
                    "zh": "权重在分块内部重新做了 softmax：每个分块的行各自加起来为 1。一行的权重是对它的所有键、"
                    "跨越全部键块加起来为 1 的：P = exp(S − lse)，lse 是前向计算为整行保存的那个值。",
                },
            ),
            Mistake(
                "DV_NOT_TRANSPOSED",
                _backward_mistake(dv_transposed=False),
                {
                    "en": "dV_j was summed as P @ dO_i. Value j is used by every query i with weight P_ij, so its "
                    "gradient sums over the queries: dV_j = Σ_i P_ijᵀ dO_i = Pᵀ @ dO_i, a (b_k, d_v) block (P @ dO "
                    "only runs when the tile is square, and then sums over the wrong axis).",
                    "zh": "dV_j 写成了 P @ dO_i。值 j 被每个查询 i 以权重 P_ij 使用，所以它的梯度要对查询求和："
                    "dV_j = Pᵀ @ dO_i，形状为 (b_k, d_v)（P @ dO 只有在分块是正方形时才能运行，而且求和的维度不对）。",
                },
            ),
            Mistake(
                "DK_NOT_TRANSPOSED",
                _backward_mistake(dk_transposed=False),
                {
                    "en": "dK_j was summed as dS @ Q_i. Key j meets every query i through S_ij = scale · q_i · k_j, so "
                    "its gradient sums over the queries: dK_j = scale · dSᵀ @ Q_i, a (b_k, d) block (dS @ Q only runs "
                    "when the tile is square, and then sums over the wrong axis).",
                    "zh": "dK_j 写成了 dS @ Q_i。键 j 通过 S_ij = scale · q_i · k_j 与每个查询 i 相遇，所以它的梯度要对查询求和："
                    "dK_j = scale · dSᵀ @ Q_i，形状为 (b_k, d)（dS @ Q 只有在分块是正方形时才能运行，而且求和的维度不对）。",
                },
            ),
            Mistake(
                "DKV_NOT_SUMMED",
                _backward_mistake(sum_k=False, sum_v=False),
                {
                    "en": "dK_j and dV_j keep only the last query block's part: each query block was assigned (=) "
                    "instead of added (+=). A key block is seen by every query block, and its gradient is the sum "
                    "of their parts: start dK_j and dV_j at zero and add each tile's.",
                    "zh": "dK_j 和 dV_j 只留下了最后一个查询块的那一份：每个查询块都是赋值（=）而不是累加（+=）。"
                    "每个查询块都会看到这个键块，它的梯度是各查询块那一份的和：dK_j 和 dV_j 从零开始，把每个分块的那一份加上去。",
                },
            ),
            Mistake(
                "DK_NOT_SUMMED",
                _backward_mistake(sum_k=False),
                {
                    "en": "dK_j keeps only the last query block's part (dV is summed right): it was assigned (=) "
                    "instead of added (+=). Every query block that sees key block j adds its dSᵀ @ Q_i · scale.",
                    "zh": "dK_j 只留下了最后一个查询块的那一份（dV 的累加是对的）：它是赋值（=）而不是累加（+=）。"
                    "能看到键块 j 的每个查询块都要把自己的 dSᵀ @ Q_i · scale 加上去。",
                },
            ),
            Mistake(
                "DV_NOT_SUMMED",
                _backward_mistake(sum_v=False),
                {
                    "en": "dV_j keeps only the last query block's part (dK is summed right): it was assigned (=) "
                    "instead of added (+=). Every query block that sees key block j adds its Pᵀ @ dO_i.",
                    "zh": "dV_j 只留下了最后一个查询块的那一份（dK 的累加是对的）：它是赋值（=）而不是累加（+=）。"
                    "能看到键块 j 的每个查询块都要把自己的 Pᵀ @ dO_i 加上去。",
                },
            ),
            Mistake(
                "DQ_NOT_SUMMED",
                _backward_mistake(sum_q=False),
                {
                    "en": "dQ_i keeps only the last key block's part: each key block was assigned (=) instead of added "
                    "(+=). A query sees every key block, and its gradient is the sum over them: start dQ at zero and "
                    "add each tile's dS @ K_j · scale.",
                    "zh": "dQ_i 只留下了最后一个键块的那一份：每个键块都是赋值（=）而不是累加（+=）。一个查询会看到每个键块，"
                    "它的梯度是对所有键块的和：dQ 从零开始，把每个分块的 dS @ K_j · scale 加上去。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _backward_mistake(scaled=False),
                {
                    "en": "The scale is missing everywhere: the scores are S = Q Kᵀ / √d, as in the forward (without "
                    "it exp(S − lse) is not the softmax), and the chain rule brings the same 1/√d into "
                    "dQ = dS @ K / √d and dK = dSᵀ @ Q / √d.",
                    "zh": "各处都少了缩放：分数是 S = Q Kᵀ / √d，与前向计算相同（少了它，exp(S − lse) 就不是 softmax），"
                    "链式法则还会把同一个 1/√d 带进 dQ = dS @ K / √d 和 dK = dSᵀ @ Q / √d。",
                },
            ),
            Mistake(
                "P_UNSCALED",
                _backward_mistake(weights_scaled=False),
                {
                    "en": "The weights were recomputed from unscaled scores, exp(Q Kᵀ − lse): the forward's lse is "
                    "the log-sum-exp of S = Q Kᵀ / √d, so P = exp(S − lse) needs the same 1/√d (dQ and dK carry "
                    "theirs already).",
                    "zh": "权重是用没有缩放的分数重新算的，exp(Q Kᵀ − lse)：前向保存的 lse 是 S = Q Kᵀ / √d 的 "
                    "log-sum-exp，所以 P = exp(S − lse) 也要乘同一个 1/√d（dQ 和 dK 已经各自乘上了）。",
                },
            ),
            Mistake(
                "DS_SIGN_FLIPPED",
                _backward_mistake(sign=-1.0),
                {
                    "en": "dQ and dK have the wrong sign (dV is right): dS = P ∘ (dP − D), the row term D subtracted "
                    "from dP, not dP from D.",
                    "zh": "dQ 和 dK 的符号反了（dV 是对的）：dS = P ∘ (dP − D)，是从 dP 里减去每行的 D，而不是从 D 里减去 dP。",
                },
            ),
            Mistake(
                "D_OVER_QUERIES",
                _backward_mistake(D_over="block"),
                {
                    "en": "D was summed over the whole query block (its rows and features) into one number: D is one "
                    "number per query, D_i = Σ_c dO_ic O_ic, summed over the features of row i only: "
                    "(d_output * output).sum(-1), of shape (B, L_q).",
                    "zh": "D 对整个查询块（所有行和所有特征）求和，成了一个数：D 是每个查询一个数，D_i = Σ_c dO_ic O_ic，"
                    "只对第 i 行的特征求和：(d_output * output).sum(-1)，形状为 (B, L_q)。",
                },
            ),
            Mistake(
                "D_FROM_D_OUTPUT",
                _backward_mistake(D_over="d_output"),
                {
                    "en": "D was taken from d_output alone, dO.sum(-1): D_i = Σ_k P_ik dP_ik = Σ_c dO_ic O_ic needs "
                    "the output too, D = (d_output * output).sum(-1), once, before the loop. (dV is right: it does "
                    "not go through the softmax.)",
                    "zh": "D 只用 d_output 算了，即 dO.sum(-1)：D_i = Σ_k P_ik dP_ik = Σ_c dO_ic O_ic，还需要输出，"
                    "应为 D = (d_output * output).sum(-1)，在循环开始前算一次。（dV 是对的：它不经过 softmax。）",
                },
            ),
            Mistake(
                "D_OVER_BATCH",
                _backward_mistake(D_over="batch"),
                {
                    "en": "D was summed over the batch axis too, (d_output * output).sum((0, -1)): every batch element "
                    "got the same D. D is one number per query of each batch element, summed over the features "
                    "alone: (d_output * output).sum(-1), of shape (B, L_q).",
                    "zh": "D 还对批次维求了和，(d_output * output).sum((0, -1))：批次里的每个样本都得到了同一个 D。"
                    "D 是每个样本的每个查询一个数，只对特征求和：(d_output * output).sum(-1)，形状为 (B, L_q)。",
                },
            ),
            Mistake(
                "GRAD_NOT_SCALED",
                _backward_mistake(dq_scaled=False, dk_scaled=False),
                {
                    "en": "dQ and dK are √d times too large: the scores are S = Q Kᵀ / √d, so the chain rule "
                    "multiplies both by the same 1/√d: dQ = dS @ K / √d, dK = dSᵀ @ Q / √d. (dV is right.)",
                    "zh": "dQ 和 dK 大了 √d 倍：分数是 S = Q Kᵀ / √d，所以链式法则给两者都乘上同一个 1/√d："
                    "dQ = dS @ K / √d，dK = dSᵀ @ Q / √d。（dV 是对的。）",
                },
            ),
            Mistake(
                "DQ_NOT_SCALED",
                _backward_mistake(dq_scaled=False),
                {
                    "en": "dQ is √d times too large (dK is right): S = Q Kᵀ / √d, so dQ = dS @ K / √d. Scaling the "
                    "queries once, q = Q_i / √d, makes dK = dSᵀ @ q right by itself, but dQ still needs its own 1/√d.",
                    "zh": "dQ 大了 √d 倍（dK 是对的）：S = Q Kᵀ / √d，所以 dQ = dS @ K / √d。把查询先缩放一次，"
                    "q = Q_i / √d，dK = dSᵀ @ q 自然就对了，但 dQ 仍然要乘上它自己的 1/√d。",
                },
            ),
            Mistake(
                "DK_NOT_SCALED",
                _backward_mistake(dk_scaled=False),
                {
                    "en": "dK is √d times too large (dQ is right): S = Q Kᵀ / √d, so dK = dSᵀ @ Q / √d. Scaling the "
                    "keys once makes dQ = dS @ K_j / √d right by itself, but dK still needs its own 1/√d.",
                    "zh": "dK 大了 √d 倍（dQ 是对的）：S = Q Kᵀ / √d，所以 dK = dSᵀ @ Q / √d。把键先缩放一次，"
                    "dQ = dS @ K_j / √d 自然就对了，但 dK 仍然要乘上它自己的 1/√d。",
                },
            ),
            Mistake(
                "DQ_SCALED_TWICE",
                _backward_mistake(dq_twice=True),
                {
                    "en": "dQ is √d times too small (dK is right): the scale was applied twice, dS @ K / √d / √d, "
                    "often once through keys or queries scaled in advance and once more by hand. The chain rule "
                    "brings one 1/√d: dQ = dS @ K / √d.",
                    "zh": "dQ 小了 √d 倍（dK 是对的）：缩放乘了两次，dS @ K / √d / √d，常见的情形是先缩放了键或查询，"
                    "又手动再乘了一次。链式法则只带来一个 1/√d：dQ = dS @ K / √d。",
                },
            ),
            Mistake(
                "GRAD_SCALED_TWICE",
                _backward_mistake(dq_twice=True, dk_twice=True),
                {
                    "en": "dQ and dK are √d times too small (dV is right): the scale was applied twice to both, "
                    "for instance to queries scaled in advance and then to the products again. The chain rule "
                    "brings one 1/√d to each: dQ = dS @ K / √d, dK = dSᵀ @ Q / √d.",
                    "zh": "dQ 和 dK 都小了 √d 倍（dV 是对的）：两者都乘了两次缩放，比如查询已经预先缩放过，乘积又再乘了一次。"
                    "链式法则只给每个带来一个 1/√d：dQ = dS @ K / √d，dK = dSᵀ @ Q / √d。",
                },
            ),
            Mistake(
                "CAUSAL_IGNORED",
                _backward_mistake(skip="never", mask="none"),
                {
                    "en": "With causal=True the backward computes every tile, unmasked. Recomputed as exp(S − lse), the "
                    "hidden entries are not 0: they are what the weights would be without the mask, so gradients flow "
                    "to later keys and values. Skip the tiles hidden entirely (j0 > i1 − 1) and mask the ones the "
                    "diagonal cuts through, exactly as the forward did.",
                    "zh": "causal=True 时，反向传播把每个分块都算了，而且没有加掩码。按 exp(S − lse) 重新算出来时，被遮住的元素"
                    "并不是 0，而是没有掩码时的权重，于是梯度流向了后面的键和值。要像前向计算那样：跳过整块被遮住的分块"
                    "（j0 > i1 − 1），给被对角线穿过的分块加掩码。",
                },
            ),
            Mistake(
                "NO_SKIP",
                _backward_mistake(skip="never"),
                {
                    "en": "The gradients are right, but the count holds every tile: the tiles above the diagonal were "
                    "counted, whether they were computed (masked entirely) or skipped after being counted. In the "
                    "backward as in the forward, a tile whose first key comes after its last query, j0 > i1 − 1, "
                    "holds nothing visible: skip it, and count only the tiles you compute.",
                    "zh": "梯度是对的，但计数包含了每一个分块：对角线上方的分块也被数了进去，不管它们是被计算了（整块遮住），"
                    "还是先计数再跳过。反向传播和前向计算一样，第一个键位于最后一个查询之后（j0 > i1 − 1）的分块里"
                    "没有任何可见的元素：跳过它，并且只数你计算了的分块。",
                },
            ),
            Mistake(
                "DIAGONAL_UNMASKED",
                _backward_mistake(mask="none"),
                {
                    "en": "The hidden tiles are skipped, but the tiles the diagonal cuts through are recomputed without "
                    "a mask, so exp(S − lse) gives weight to the later keys of the query's own tile. Mask them by "
                    "global positions: hide key j from query i where j > i.",
                    "zh": "整块被遮住的分块跳过了，但被对角线穿过的分块在重新计算时没有加掩码，于是 exp(S − lse) "
                    "给查询所在分块里位置更靠后的键也分了权重。要按全局位置给它们加掩码：对查询 i 遮住 j > i 的键 j。",
                },
            ),
            Mistake(
                "CAUSAL_HIDES_ITSELF",
                _backward_mistake(mask="strict"),
                {
                    "en": "The mask also hides each query's own key (it hides j ≥ i, keeping j < i), so P_ii = 0 and "
                    "query 0 gets no gradient at all. The forward let a position attend to itself: hide key j from "
                    "query i only where j > i.",
                    "zh": "掩码把每个查询自己的键也遮住了（遮住了 j ≥ i，只保留 j < i），于是 P_ii = 0，查询 0 完全得不到梯度。"
                    "前向计算允许一个位置关注它自己：只有 j > i 时才对查询 i 遮住键 j。",
                },
            ),
            Mistake(
                "TILE_LOCAL_MASK",
                _backward_mistake(mask="local"),
                {
                    "en": "The mask of a tile cut by the diagonal is built from the tile's own row and column numbers "
                    "(tril of a b_q × b_k block), right only for a square tile sitting on the diagonal. Compare "
                    "global positions: key j0 + c is visible from query i0 + r when j0 + c ≤ i0 + r.",
                    "zh": "被对角线穿过的分块，其掩码是用分块自己的行号和列号构造的（对 b_q × b_k 的块取 tril），"
                    "这只对恰好位于对角线上的正方形分块成立。应比较全局位置：当 j0 + c ≤ i0 + r 时，查询 i0 + r 能看到键 j0 + c。",
                },
            ),
            Mistake(
                "LOCAL_MASK_EVERY_TILE",
                _backward_mistake(mask="local_all"),
                {
                    "en": "Every tile was masked with the tile's own row and column numbers (c > r hidden): the tiles "
                    "below the diagonal, whose keys all come before their queries, lost their upper triangle, and a "
                    "tile cut by the diagonal away from its corner was cut in the wrong place. Compare global "
                    "positions: key j0 + c is visible from query i0 + r when j0 + c ≤ i0 + r.",
                    "zh": "每个分块都用分块自己的行号和列号加了掩码（遮住 c > r）：对角线下方的分块，其键全都在查询之前，"
                    "却被遮掉了上三角；对角线没有从角上穿过的分块，也切错了位置。应比较全局位置："
                    "当 j0 + c ≤ i0 + r 时，查询 i0 + r 能看到键 j0 + c。",
                },
            ),
            Mistake(
                "QUERY_TAIL_DROPPED",
                _backward_mistake(query_tail=False),
                {
                    "en": "The last queries are never reached when block_q does not divide L_q: the loop over query "
                    "blocks stops at L_q // block_q full blocks, so their dQ stays 0 and their parts of dK and dV "
                    "are missing. Loop over the starts range(0, L_q, block_q) and cut the last block short: "
                    "query[:, i0:min(i0 + block_q, L_q)].",
                    "zh": "当 block_q 不能整除 L_q 时，最后几个查询从未被处理：查询块的循环只走了 L_q // block_q 个完整的块，"
                    "于是它们的 dQ 一直是 0，dK 和 dV 里也少了它们的那一份。应按起点 range(0, L_q, block_q) 循环，"
                    "并让最后一块短一些：query[:, i0:min(i0 + block_q, L_q)]。",
                },
            ),
            Mistake(
                "BLOCK_INDEX_SKIP",
                _backward_mistake(skip="blocks"),
                {
                    "en": "Tiles were skipped by their block numbers, j > i: the rule only when block_q = block_k. "
                    "Skip by positions: a tile is hidden when its first key comes after its last query, j0 > i1 − 1.",
                    "zh": "按块编号 j > i 跳过了分块：只有 block_q = block_k 时这条规则才对。应按位置跳过："
                    "当分块的第一个键位于它最后一个查询之后，即 j0 > i1 − 1 时，这个分块整块不可见。",
                },
            ),
            Mistake(
                "SKIP_BY_FIRST_QUERY",
                _backward_mistake(skip="first_query"),
                {
                    "en": "A tile was skipped when its first key comes after the block's first query, j0 > i0: the "
                    "diagonal crosses such a tile, and its later queries see some of its keys, whose parts are lost. "
                    "A tile is hidden entirely only when its first key comes after its last query, j0 > i1 − 1.",
                    "zh": "只要分块的第一个键位于查询块的第一个查询之后（j0 > i0），就跳过了这个分块：对角线穿过这样的分块，"
                    "块里靠后的查询能看到它的一部分键，这些部分就丢了。只有当分块的第一个键位于它最后一个查询之后，"
                    "即 j0 > i1 − 1 时，它才整块不可见。",
                },
            ),
            Mistake(
                "MASK_BY_BLOCK_INDEX",
                _backward_mistake(mask="same_index"),
                {
                    "en": "Only the tile whose key-block number equals its query-block number was masked: the diagonal "
                    "tile only when block_q = block_k. With other blocks the diagonal cuts through other tiles too, "
                    "and their later keys are seen. Mask every tile the diagonal cuts through (j1 − 1 > i0), by "
                    "global positions, or simply every tile you compute.",
                    "zh": "只给键块编号等于查询块编号的那个分块加了掩码：只有 block_q = block_k 时它才是对角线上的分块。"
                    "块大小不同时，对角线还会穿过别的分块，它们里面靠后的键就被看到了。要按全局位置给被对角线穿过的每个分块"
                    "（j1 − 1 > i0）加掩码，或者干脆给你计算的每个分块都加。",
                },
            ),
            Mistake(
                "SQUARE_TILES",
                _backward_mistake(square=True),
                {
                    "en": "The gradients are right, but the tiles are block_q × block_q: the keys were cut into blocks "
                    "of block_q too, so the count is of other tiles. Cut the queries by block_q and the keys and "
                    "values by block_k.",
                    "zh": "梯度是对的，但分块是 block_q × block_q 的：键也按 block_q 切块了，所以数出来的是别的分块。"
                    "查询按 block_q 切，键和值按 block_k 切。",
                },
            ),
            Mistake(
                "TILES_NOT_INT",
                _backward_mistake(as_tensor=True),
                {
                    "en": "The gradients are right, but the number of tiles comes back as a tensor. Return a Python "
                    "int: count with tiles += 1 on an int, or convert at the end with int(...).",
                    "zh": "梯度都是对的，但分块数返回成了张量。应返回 Python 的 int：用一个 int 做 tiles += 1 计数，"
                    "或者最后用 int(...) 转换。",
                },
            ),
            Mistake(
                "TILES_OFF_BY_ONE",
                _backward_mistake(extra_tiles=1),
                {
                    "en": "The gradients are right, but the count is one more than the tiles computed: start it at 0 "
                    "and add 1 for each tile you compute, after the skip (not once more at the end, nor from 1).",
                    "zh": "梯度是对的，但计数比实际计算的分块多了一个：计数从 0 开始，在跳过的判断之后，每计算一个分块加 1"
                    "（不要在最后再加一次，也不要从 1 开始）。",
                },
            ),
            Mistake(
                "WHOLE_KEY_ROWS",
                _backward_whole_rows,
                {
                    "en": "The gradients are right, but the count is the number of query blocks: each query block's "
                    "scores were taken against all the keys at once, a (b_q, L_k) block rather than a tile. Cut the "
                    "keys into blocks of block_k too, compute one (b_q, b_k) tile at a time, and count the tiles.",
                    "zh": "梯度是对的，但计数等于查询块的个数：每个查询块的分数是一次对所有键算的，是 (b_q, L_k) 的块而不是分块。"
                    "键也要按 block_k 切块，一次只算一个 (b_q, b_k) 分块，并数分块的个数。",
                },
            ),
            Mistake(
                "GRADIENTS_FLOAT32",
                _backward_float32,
                {
                    "en": "The gradients come back in float32 whatever the inputs' dtype: torch.zeros(shape) makes "
                    "float32. Allocate them like the tensors they are the gradients of, torch.zeros_like(query) "
                    "(and key, value), so that a float64 input gets float64 gradients.",
                    "zh": "不管输入是什么 dtype，梯度都以 float32 返回：torch.zeros(shape) 构造的是 float32。应按它们对应的张量来分配，"
                    "torch.zeros_like(query)（key、value 同理），这样 float64 的输入得到的梯度也是 float64。",
                },
            ),
        ),
    )
)
