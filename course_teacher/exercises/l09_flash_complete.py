"""Lesson 09's exercises that complete FlashAttention: a softmax over rows longer than one block (the
bridge from one program per row to the online softmax), the dQ kernel of the backward, and the
torch.autograd.Function that ties the learner's kernels together.

As in ``l09_flash_triton``, the learner's function launches a kernel of their own and what it returns is
compared with references written here in plain torch (float64, then float32): values only, since a
kernel's output is not on autograd's graph, and the dQ exercise's values *are* gradients, compared with
PyTorch's (tests/test_exercises_l09_complete.py proves the references agree with torch.softmax and with
autograd's gradient of F.scaled_dot_product_attention). Cases are float32 (the interpreter's NumPy has no
bfloat16) and a few blocks of 16: a fraction of a second each, interpreted.

- 09.softmax_blocks: (x (R, n), block) -> softmax over the last axis, one program per row looping over
  the row in blocks of ``block`` (a power of two ≥ 16, smaller than n): a pass that keeps the running max
  and the running sum (rescaled when the max grows), then a pass that writes exp(x − m) / ℓ. Cases: n not
  a multiple of the block and a multiple, rows in the thousands and far below zero, a row whose max
  comes in a late block, −∞ entries.
- 09.backward_dq: (query, key, value, output, lse, d_output, block_q, block_k, causal) -> d_query: one
  program per query block looping over the key blocks it sees (causal: up to its diagonal), P recomputed
  from lse, D = rowsum(dO ∘ O) from the blocks it loads. The split of Triton's fused-attention tutorial. (P recomputed from unscaled
  scores is caught but not named: its weights reach 1e12 and more, where float32's rounding in the kernel
  and float64's here part by more than the tolerance. D_WRONG_AXIS is named where the shapes let it run, as
  in 09.backward_dkdv.)
- 09.flash_function: (query, key, value, d_output, block_q, block_k, causal) -> (output, d_query, d_key,
  d_value): the learner's torch.autograd.Function over their kernels of exercises 4 to 7, run forward and
  backward by the given end of the function (autograd.grad inside the call, so the kernel rule watches the
  backward too: a Function whose backward is plain torch is refused). Values only, as above: the gradients
  are returned values, compared with sdpa's and named by their mistakes (the Function's own: dK and dV
  swapped, causal dropped in the backward or never used, no dQ). The first case is causal with d = d_v
  (swapped dK and dV are values there; where d_v ≠ d autograd refuses them) and a d_output that is not
  contiguous, as autograd may hand one to backward. Each case runs three kernels: one public case, one
  partial block (the kernels' own exercises test their loops); the hidden cases add one that is not causal.
- 09.flash_forward_half: exercise 4's (query, key, value, block_q, block_k) -> (output, lse) on float16 or
  bfloat16 inputs: output in their dtype, lse float32, every sum in float32. The reference is float64 rounded
  once; the tolerance (HALF_ATOL, HALF_RTOL) is measured, one rounding of the output to bfloat16. Cases: a
  float16 row whose Σ p·v passes 65,504 and a bfloat16 row whose block sums lose bits (an accumulator in the
  inputs' dtype fails there: ACCUMULATOR_HALF), ragged blocks in both dtypes. bfloat16 runs in the interpreter
  through ``course_utils.triton_halves``. P cast to the half dtype before its row sum is within the
  tolerance: no case can fail it (the lesson's text says so).

The first case of each exercise shows every known mistake but NO_MAX_SHIFT, which only the cases with
values in the thousands show. Each mistake is emulated block by block as a kernel with that bug computes
it (tests/test_exercises_l09_complete.py runs a Triton kernel with each bug and checks that the check
names it). An element the kernel never stores keeps the NaN the texts ask to allocate with.
"""

import math

import torch

from .l09_flash_triton import delta_per_block, delta_wrong_axis, padded_scale
from .registry import Exercise, Mistake, register

NEG_INF = float("-inf")


# ----------------------------------------------------------------------------- 09.softmax_blocks


def _rows(generator, R, n, *, spread=3.0, offset=0.0, late=None, minus_inf=()):
    x = torch.randn(R, n, generator=generator, dtype=torch.float64) * spread + offset
    if late is not None:  # (row, amount): that row's last quarter lifted, so its max comes in a late block
        row, amount = late
        x[row, 3 * n // 4:] += amount
    for r, c in minus_inf:
        x[r, c] = NEG_INF
    return x.to(torch.float32)


def _blocks_cases(generator):
    g = generator
    first = _rows(g, 4, 70, spread=4.0, late=(2, 30.0))  # 70 = 16 · 4 + 6: a partial last block of 6
    first[1] += 1000.0  # a row in the thousands: exp overflows float32 without the max shift
    return [
        (first, 16),  # first: every mistake but NO_MAX_SHIFT's overflow shows (that one too: row 1)
        (_rows(g, 3, 64, late=(0, 20.0)), 16),  # n a multiple of the block: no partial block
        (_rows(g, 2, 100, spread=2.0, offset=-1000.0), 32),  # rows far below zero
        (_rows(g, 2, 45, minus_inf=((0, 3), (1, 40))), 16),  # −∞ entries, one in the partial block
        (_rows(g, 1, 33, spread=20.0), 32),  # one column past one block
    ]


def _blocks_hidden(generator):
    g = generator
    big = _rows(g, 3, 53, late=(1, 25.0))
    big[0] += 900.0
    return [(big, 16), (_rows(g, 2, 96, offset=-700.0), 32), (_rows(g, 2, 40, minus_inf=((1, 39),)), 16)]


def _blocks_reference(x, block):
    with torch.no_grad():  # a kernel's output has no graph: values only
        x = x.double()
        e = torch.exp(x - x.amax(-1, keepdim=True))  # (the softmax the check forbids, written out)
        return (e / e.sum(-1, keepdim=True)).to(torch.float32)


def _padded(x, block, value):
    """x (R, n) with its last block filled up to a whole block with `value` (float64)."""
    n = x.shape[-1]
    return torch.nn.functional.pad(x.double(), (0, -n % block), value=value)


def _blocks_online(x, block, *, rescale=True, pad=NEG_INF, whole_blocks_only=False, m_start=NEG_INF,
                   one_block_short=False):
    """What a two-pass kernel computes (float64): the running max and sum over the blocks, then
    exp(x − m) / ℓ written block by block; the switches are the mistakes (rescale "inverted": ℓ times
    exp(m_new − m); m_start 0: the running max from 0, its exps in float32 as the kernel's, where a row far
    below zero sums to 0; one_block_short: both loops run cdiv(n, BLOCK) − 1 blocks)."""
    R, n = x.shape
    end = n // block * block if whole_blocks_only else n  # range(0, n // BLOCK * BLOCK, BLOCK): the last left out
    if one_block_short:
        end = (-(-n // block) - 1) * block
    padded = _padded(x[:, :end], block, pad)
    m = torch.full((R,), m_start, dtype=torch.float64, device=x.device)
    ell = torch.zeros(R, dtype=torch.float64, device=x.device)
    exp = (lambda t: torch.exp(t.float()).double()) if m_start != NEG_INF else torch.exp
    for start in range(0, padded.shape[1], block):
        xb = padded[:, start:start + block]
        m_new = torch.maximum(m, xb.amax(-1))
        safe = torch.where(m_new == NEG_INF, torch.zeros_like(m_new), m_new)
        if rescale == "inverted":  # exp(m_new − m): inf at the first block, where m is −∞ and ℓ is 0
            ell = ell * torch.exp(m_new - m) + torch.exp(xb - m_new[:, None]).sum(-1)
        else:
            ell = (ell * exp(m - safe) if rescale else ell) + exp(xb - safe[:, None]).sum(-1)
        m = m_new
    out = torch.full((R, n), float("nan"), dtype=torch.float64, device=x.device)  # as allocated: the text says NaN
    out[:, :end] = exp(x[:, :end].double() - m[:, None]) / ell[:, None]
    return out.to(torch.float32)


def _blocks_no_shift(x, block):
    e = torch.exp(x)  # float32, as the kernel: inf past 88, 0 below −104
    return e / e.sum(-1, keepdim=True)


#: What the long-row softmax refuses: torch's softmax and exp-sum routes, and the course's softmaxes.
BLOCKS_FORBIDDEN = ("torch.softmax", "F.softmax", "Tensor.softmax", "torch.logsumexp", "Tensor.logsumexp",
                    "course_utils.flash_triton.softmax_rows", "course_utils.masks.masked_softmax",
                    "course_utils.tiled.online_softmax")

register(
    Exercise(
        id="09.softmax_blocks",
        reference=_blocks_reference,
        cases=_blocks_cases,
        hidden=_blocks_hidden,
        forbidden=BLOCKS_FORBIDDEN,
        mistakes=(
            Mistake(
                "SUM_NOT_RESCALED",
                lambda x, block: _blocks_online(x, block, rescale=False),
                {
                    "en": "The running sum is not rescaled when a later block brings a larger max: what ℓ holds was "
                    "summed as exp(x − m_old), and the new terms as exp(x − m_new). Multiply it first, "
                    "ell = ell · exp(m − m_new) + tl.sum(tl.exp(x − m_new), axis=0), then set m = m_new.",
                    "zh": "后面的块带来更大的最大值时，累计和没有重新缩放：ℓ 里原有的项是按 exp(x − m_old) 加起来的，"
                    "新加的项却是 exp(x − m_new)。要先乘上缩放因子：ell = ell · exp(m − m_new) + "
                    "tl.sum(tl.exp(x − m_new), axis=0)，然后再令 m = m_new。",
                },
            ),
            Mistake(
                "PADDING_AS_ZERO",
                lambda x, block: _blocks_online(x, block, pad=0.0),
                {
                    "en": "The positions past n in the last block were loaded as 0 (tl.load's other=0.0): each adds "
                    "exp(0 − m) to the sum, and a 0 can even become the row's max. Load them as −∞, "
                    "tl.load(..., mask=columns < n, other=float('-inf')): exp(−∞) = 0.",
                    "zh": "最后一块里超出 n 的位置被读成了 0（tl.load 的 other=0.0）：每个都给和加了 exp(0 − m)，"
                    "0 甚至可能成为这一行的最大值。应把它们读成 −∞：tl.load(..., mask=columns < n, "
                    "other=float('-inf'))，因为 exp(−∞) = 0。",
                },
            ),
            Mistake(
                "LAST_BLOCK_MISSING",
                lambda x, block: _blocks_online(x, block, whole_blocks_only=True),
                {
                    "en": "The loops stop before the partial last block: range(0, n // BLOCK * BLOCK, BLOCK) leaves "
                    "out the last n mod BLOCK columns, which are missing from the sum and never written (they keep "
                    "their NaN). Loop over range(0, n, BLOCK) and mask the loads and stores with columns < n.",
                    "zh": "循环在不满的最后一块之前就停了：range(0, n // BLOCK * BLOCK, BLOCK) 漏掉了最后 n mod BLOCK 列，"
                    "它们既没有加进和里，也从来没有写出（一直是 NaN）。应遍历 range(0, n, BLOCK)，"
                    "读和写都用 columns < n 作掩码。",
                },
            ),
            Mistake(
                "M_FROM_ZERO",
                lambda x, block: _blocks_online(x, block, m_start=0.0),
                {
                    "en": "The running max starts at 0 instead of −∞: right while some value of a row is above about "
                    "−87, but a row whose values all lie far below that sums exp(x − 0), which underflows float32 to "
                    "0: ℓ = 0 and the weights 0 / 0 = NaN. Start it at −∞, m = float('-inf') (tl.full((), "
                    "float('-inf'), tl.float32)): the first block's max then takes its place.",
                    "zh": "运行最大值从 0 而不是 −∞ 开始：只要一行里有值高于大约 −87 就没问题，但如果一行的值全都远低于它，"
                    "求的就是 exp(x − 0)，在 float32 中下溢为 0：ℓ = 0，权重成了 0 / 0 = NaN。应从 −∞ 开始，"
                    "m = float('-inf')（tl.full((), float('-inf'), tl.float32)）：第一个块的最大值自然会取代它。",
                },
            ),
            Mistake(
                "RESCALE_INVERTED",
                lambda x, block: _blocks_online(x, block, rescale="inverted"),
                {
                    "en": "The running sum is rescaled the wrong way up, ℓ · exp(m_new − m): when the max grows, what ℓ "
                    "summed as exp(x − m_old) must shrink, ℓ · exp(m_old − m_new) (at the first block m_old = −∞ "
                    "makes yours inf · 0 = NaN).",
                    "zh": "累计和的缩放因子上下颠倒了，写成了 ℓ · exp(m_new − m)：最大值变大时，ℓ 里按 exp(x − m_old) 加起来的部分"
                    "应该缩小，即 ℓ · exp(m_old − m_new)（在第一块，m_old = −∞ 让你的写法得到 inf · 0 = NaN）。",
                },
            ),
            Mistake(
                "LOOP_ONE_SHORT",
                lambda x, block: _blocks_online(x, block, one_block_short=True),
                {
                    "en": "Both loops are one block short: cdiv(n, BLOCK) − 1 blocks, range(0, n − BLOCK, BLOCK), never "
                    "reach the last block, whose columns are missing from the sum and never written (NaN). Loop over "
                    "range(0, n, BLOCK) and mask the last block.",
                    "zh": "两个循环都少走了一块：cdiv(n, BLOCK) − 1 个块，即 range(0, n − BLOCK, BLOCK)，永远到不了最后一块，"
                    "它的列既没有加进和里，也从来没有写出（NaN）。应遍历 range(0, n, BLOCK)，并给最后一块加掩码。",
                },
            ),
            Mistake(
                "NO_MAX_SHIFT",
                _blocks_no_shift,
                {
                    "en": "exp(x) summed without the max: a row whose values pass about 88 overflows float32 "
                    "(inf / inf = NaN), and one far below zero underflows (0 / 0). Keep the running max m over the "
                    "blocks, sum exp(x − m) and rescale the sum when m grows.",
                    "zh": "没有减去最大值就对 exp(x) 求和：某一行的值超过大约 88 时 float32 会溢出（inf / inf = NaN），"
                    "远小于 0 时又会下溢（0 / 0）。要在各块之间维护运行最大值 m，对 exp(x − m) 求和，m 变大时重新缩放这个和。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.backward_dq


def _qkv(generator, BH, L_q, L_k, d, d_v, spread):
    q = torch.randn(BH, L_q, d, generator=generator, dtype=torch.float64) * spread
    k = torch.randn(BH, L_k, d, generator=generator, dtype=torch.float64)
    k = k * torch.linspace(0.5, 2.5, L_k, dtype=torch.float64)[:, None]  # later keys score wider
    v = torch.randn(BH, L_k, d_v, generator=generator, dtype=torch.float64)
    return q, k, v


def _attention(q, k, v, causal):
    """softmax(q kᵀ / √d) v and each row's log-sum-exp, float64 (written out: no softmax, no logsumexp)."""
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), NEG_INF)
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    total = e.sum(-1, keepdim=True)
    return (e / total) @ v, (m + torch.log(total)).squeeze(-1)


def _dq_case(generator, BH, L_q, L_k, d, d_v, block_q, block_k, causal, spread=1.0):
    q, k, v = _qkv(generator, BH, L_q, L_k, d, d_v, spread)
    output, lse = _attention(q, k, v, causal)
    d_output = torch.randn(BH, L_q, d_v, generator=generator, dtype=torch.float64)
    f32 = [t.to(torch.float32) for t in (q, k, v, output, lse, d_output)]
    return (*f32, block_q, block_k, causal)


def _dq_cases(generator):
    g = generator
    # (few (program, key block) steps each: every one costs the interpreter three tl.dot and the notebook's time)
    return [
        _dq_case(g, 1, 37, 37, 16, 8, 16, 16, True, spread=2.0),  # first: causal, partial last blocks
        _dq_case(g, 1, 45, 29, 24, 16, 32, 16, False),  # L_q > L_k, d not a power of two
        _dq_case(g, 1, 20, 50, 16, 16, 16, 32, False, spread=2.0),  # L_q < L_k, block_k > block_q
        _dq_case(g, 2, 32, 32, 16, 16, 32, 16, True),  # block_q = 2 · block_k, two (batch·head)s
    ]


def _dq_hidden(generator):
    g = generator
    return [_dq_case(g, 1, 33, 33, 16, 12, 16, 16, True), _dq_case(g, 2, 27, 40, 20, 16, 16, 16, False)]


def _seen(L_q, L_k, block_q, block_k, causal, whole_blocks_only=False, device=None, short=False,
          before_diagonal=False):
    """(L_q, L_k) bool: the (query, key) pairs a dQ program meets. It loops over the key blocks up to
    its diagonal (causal: min(start_q + block_q, L_k)) or all of them; with whole_blocks_only, up to
    the last whole block before that end (a loop that leaves the partial block out)."""
    starts = torch.arange(L_q, device=device) // block_q * block_q  # each query's block start
    end = torch.clamp(starts + block_q, max=L_k) if causal else torch.full((L_q,), L_k, device=device)
    if causal and before_diagonal:  # range(0, start_q, BLOCK_K): the diagonal block never loaded
        end = starts
    if whole_blocks_only:
        end = end // block_k * block_k
    if short:  # range(0, end − BLOCK_K, BLOCK_K): the blocks that start before end − BLOCK_K
        end = torch.clamp(torch.ceil((end - block_k).clamp(min=0) / block_k) * block_k, min=0).to(end.dtype)
    return torch.arange(L_k, device=device)[None, :] < end[:, None]


def _dq(query, key, value, output, lse, d_output, block_q, block_k, causal, *, delta="right", times_p=True,
        scale_dq=1, masked=True, whole_blocks_only=False, sign=1.0, key_loop_short=False, rows_run=None,
        padded=False, before_diagonal=False):
    """dQ from the saved output and lse (float64), with the switches the mistakes flip: delta "right", "none",
    "d_output" (dO alone), "axis0" (summed over the block's rows) or "block" (over its rows and features); sign
    −1 flips dS; scale_dq: how many times dQ is scaled (0, 1, 2); masked: True, False or "strict" (columns <
    rows); key_loop_short: the key loop ends one block early; rows_run: the query rows some program ran (the
    others keep their NaN); padded: the scale 1/√BLOCK_D; before_diagonal (causal): the loop ends at start_q."""
    q, k, v, o, do = (t.double() for t in (query, key, value, output, d_output))
    scale = padded_scale(query.shape[-1]) if padded else 1 / math.sqrt(query.shape[-1])
    s = q @ k.transpose(1, 2) * scale
    p = torch.exp(s - lse.double()[..., None])  # the weights, recomputed from lse
    seen = _seen(query.shape[1], key.shape[1], block_q, block_k, causal, whole_blocks_only, device=p.device,
                 short=key_loop_short, before_diagonal=before_diagonal)
    later = torch.ones(p.shape[-2:], dtype=torch.bool, device=p.device).triu(0 if masked == "strict" else 1)
    keep = seen & ~later if causal and masked else seen
    p = p.masked_fill(~keep, 0.0)
    dp = do @ v.transpose(1, 2)
    D = delta_wrong_axis(d_output, output, block_q) if delta == "axis0" else \
        delta_per_block(d_output, output, block_q) if delta == "block" else \
        {"right": (do * o).sum(-1), "none": torch.zeros_like(lse.double()), "d_output": do.sum(-1)}[delta]
    ds = sign * (p * (dp - D[..., None]) if times_p else (dp - D[..., None]).masked_fill(~seen, 0.0))
    d_query = (ds @ k * scale ** scale_dq).to(query.dtype)
    if rows_run is not None:
        d_query[:, rows_run:] = float("nan")
    return d_query


def _dq_reference(query, key, value, output, lse, d_output, block_q, block_k, causal):
    with torch.no_grad():
        return _dq(query, key, value, output, lse, d_output, block_q, block_k, causal)


def _dq_mistake(**switches):
    def mistake(query, key, value, output, lse, d_output, block_q, block_k, causal):
        return _dq(query, key, value, output, lse, d_output, block_q, block_k, causal, **switches)
    return mistake


register(
    Exercise(
        id="09.backward_dq",
        reference=_dq_reference,
        cases=_dq_cases,
        hidden=_dq_hidden,
        forbidden=("torch.autograd.grad", "Tensor.backward", "torch.matmul", "torch.bmm", "torch.einsum",
                   "course_utils.flash_triton.flash_backward", "course_utils.tiled.tiled_backward"),
        mistakes=(
            Mistake(
                "NO_D",
                _dq_mistake(delta="none"),
                {
                    "en": "dS = P ∘ dP, without D: the softmax's backward is dS = P ∘ (dP − D), with "
                    "D = rowsum(dO ∘ O) for each query. Load the query block's O with its dO, "
                    "delta = tl.sum(do * o, axis=1), and use ds = p * (dp - delta[:, None]).",
                    "zh": "写成了 dS = P ∘ dP，少了 D：softmax 的反向传播是 dS = P ∘ (dP − D)，每个查询的 "
                    "D = rowsum(dO ∘ O)。读入 dO 时把这个查询块的 O 也读进来，delta = tl.sum(do * o, axis=1)，"
                    "再写 ds = p * (dp - delta[:, None])。",
                },
            ),
            Mistake(
                "DS_WITHOUT_P",
                _dq_mistake(times_p=False),
                {
                    "en": "dS = dP − D, without the weights: the softmax's backward multiplies by P, "
                    "dS = P ∘ (dP − D), so a key of weight 0 (masked, or far below the others) adds nothing to dQ. "
                    "ds = p * (dp - delta[:, None]).",
                    "zh": "写成了 dS = dP − D，少乘了权重：softmax 的反向传播要乘上 P，dS = P ∘ (dP − D)，"
                    "所以权重为 0 的键（被遮住的，或者远小于其他键的）对 dQ 没有贡献。应为 ds = p * (dp - delta[:, None])。",
                },
            ),
            Mistake(
                "DQ_UNSCALED",
                _dq_mistake(scale_dq=0),
                {
                    "en": "dQ misses the scale: S = Q Kᵀ · scale, so dQ = dS K · scale. Multiply once, when you "
                    "store it.",
                    "zh": "dQ 少乘了缩放：S = Q Kᵀ · scale，所以 dQ = dS K · scale。在写回时乘一次就行。",
                },
            ),
            Mistake(
                "CAUSAL_UNMASKED",
                _dq_mistake(masked=False),
                {
                    "en": "With causal=True the loop stops at the diagonal, but the recomputed P is not masked in "
                    "the diagonal block: the forward gave the keys after a query weight 0, so the backward must too, "
                    "p = tl.where(columns[None, :] <= rows[:, None], p, 0.0).",
                    "zh": "causal=True 时循环停在了对角线处，但在对角线块里重新算出的 P 没有加掩码：前向给查询之后的键的权重是 0，"
                    "反向也必须如此，p = tl.where(columns[None, :] <= rows[:, None], p, 0.0)。",
                },
            ),
            Mistake(
                "LAST_KEY_BLOCK_MISSING",
                _dq_mistake(whole_blocks_only=True),
                {
                    "en": "The loop over the key blocks leaves out the partial last block: range(0, L_k // BLOCK_K "
                    "* BLOCK_K, BLOCK_K) stops before it, so the last L_k mod BLOCK_K keys add nothing to dQ. Loop "
                    "over range(0, end, BLOCK_K) and mask the loads with columns < L_k.",
                    "zh": "对键块的循环漏掉了不满的最后一块：range(0, L_k // BLOCK_K * BLOCK_K, BLOCK_K) 在它之前就停了，"
                    "所以最后 L_k mod BLOCK_K 个键对 dQ 没有贡献。应遍历 range(0, end, BLOCK_K)，读取时用 "
                    "columns < L_k 作掩码。",
                },
            ),
            Mistake(
                "D_FROM_D_OUTPUT",
                _dq_mistake(delta="d_output"),
                {
                    "en": "D is computed from dO alone, tl.sum(do, axis=1): D = rowsum(dO ∘ O), the output's gradient "
                    "times the output, row by row: delta = tl.sum(do * o, axis=1).",
                    "zh": "D 只用 dO 算了，tl.sum(do, axis=1)：D = rowsum(dO ∘ O)，是输出的梯度乘以输出本身，逐行求和："
                    "delta = tl.sum(do * o, axis=1)。",
                },
            ),
            Mistake(
                "D_WRONG_AXIS",
                _dq_mistake(delta="axis0"),
                {
                    "en": "D is summed over the wrong axis: tl.sum(do * o, axis=0) adds up the block's rows, one number "
                    "per feature, and delta[:, None] then reads them as one per query. D is one number per query "
                    "row, summed over the features: delta = tl.sum(do * o, axis=1). (Where the feature block is not "
                    "BLOCK_Q long, Triton refuses the shapes instead.)",
                    "zh": "D 沿错误的维度求和了：tl.sum(do * o, axis=0) 把块里的各行加起来，每个特征得到一个数，"
                    "而 delta[:, None] 又把它们当成每个查询一个数来读。D 是每个查询行一个数，沿特征求和："
                    "delta = tl.sum(do * o, axis=1)。（特征块的长度不等于 BLOCK_Q 时，Triton 会直接拒绝这样的形状。）",
                },
            ),
            Mistake(
                "DS_SIGN_FLIPPED",
                _dq_mistake(sign=-1.0),
                {
                    "en": "dQ has the wrong sign: dS = P ∘ (dP − D), D subtracted from dP, not dP from D: "
                    "ds = p * (dp - delta[:, None]).",
                    "zh": "dQ 的符号反了：dS = P ∘ (dP − D)，是从 dP 里减去 D，而不是从 D 里减去 dP："
                    "ds = p * (dp - delta[:, None])。",
                },
            ),
            Mistake(
                "D_PER_BLOCK",
                _dq_mistake(delta="block"),
                {
                    "en": "D is summed over the whole query block, rows and features, one number for every row: "
                    "D is one number per query row, delta = tl.sum(do * o, axis=1), summed over the features only.",
                    "zh": "D 对整个查询块求了和，行和特征都加了进去，每一行用的都是同一个数：D 是每个查询行一个数，"
                    "只沿特征求和：delta = tl.sum(do * o, axis=1)。",
                },
            ),
            Mistake(
                "DQ_SCALED_TWICE",
                _dq_mistake(scale_dq=2),
                {
                    "en": "dQ is scaled twice, dS K · scale²: S = Q Kᵀ · scale, so dQ = dS K · scale, once.",
                    "zh": "dQ 被缩放了两次，成了 dS K · scale²：S = Q Kᵀ · scale，所以 dQ = dS K · scale，只乘一次。",
                },
            ),
            Mistake(
                "SCALE_PADDED_D",
                _dq_mistake(padded=True),
                {
                    "en": "The scale is 1/√BLOCK_D, the head size rounded up to the block's power of two, not 1/√d of "
                    "the real head: P is recomputed from the wrong scores and dQ scaled by the wrong factor. Pass "
                    "1 / math.sqrt(d) from the function.",
                    "zh": "缩放用了 1/√BLOCK_D，即向上取到块的 2 的幂的头维度，而不是真实头维度的 1/√d：P 是用错误的分数重新算的，"
                    "dQ 也乘错了因子。应由函数传入 1 / math.sqrt(d)。",
                },
            ),
            Mistake(
                "DIAGONAL_EXCLUDED",
                _dq_mistake(masked="strict"),
                {
                    "en": "The causal mask is columns < rows: the recomputed P drops each query's weight on itself, "
                    "which the forward kept. Keep the keys up to and including the query: columns[None, :] <= "
                    "rows[:, None].",
                    "zh": "因果掩码写成了 columns < rows：重新算出的 P 去掉了每个查询对它自己的权重，而前向是保留了的。"
                    "应保留直到查询本身（含）的键：columns[None, :] <= rows[:, None]。",
                },
            ),
            Mistake(
                "DIAGONAL_SKIPPED",
                _dq_mistake(before_diagonal=True),
                {
                    "en": "With causal=True the key loop stops before the diagonal block: range(0, start_q, BLOCK_K) "
                    "loads only the keys wholly before the program's first query, so each query misses the keys of "
                    "its own block (itself included). End at tl.minimum(start_q + BLOCK_Q, L_k) and mask that block.",
                    "zh": "causal=True 时，键的循环在对角线块之前就停了：range(0, start_q, BLOCK_K) 只读入完全位于本程序第一个查询"
                    "之前的键，于是每个查询都漏掉了自己所在块里的键（包括它自己）。应结束于 tl.minimum(start_q + BLOCK_Q, L_k)，"
                    "并给那一块加掩码。",
                },
            ),
            Mistake(
                "KEY_LOOP_ONE_SHORT",
                _dq_mistake(key_loop_short=True),
                {
                    "en": "The key loop is one block short: range(0, end − BLOCK_K, BLOCK_K) never reaches the last key "
                    "block a program should visit (causal: its diagonal block, so the first query block gets no "
                    "gradient at all). Loop over range(0, end, BLOCK_K).",
                    "zh": "键的循环少走了一块：range(0, end − BLOCK_K, BLOCK_K) 永远到不了程序应访问的最后一个键块"
                    "（因果时就是它的对角线块，于是第一个查询块完全得不到梯度）。应遍历 range(0, end, BLOCK_K)。",
                },
            ),
            Mistake(
                "GRID_ROUNDED_DOWN",
                lambda q, k, v, o, lse, do, bq, bk, causal: _dq(q, k, v, o, lse, do, bq, bk, causal,
                                                               rows_run=q.shape[1] // bq * bq),
                {
                    "en": "The grid was rounded down, L_q // BLOCK_Q programs per batch·head: the partial last block "
                    "of queries gets no program, and its rows of dQ keep their NaN. Round up: triton.cdiv(L_q, "
                    "BLOCK_Q).",
                    "zh": "网格向下取整了，每个 batch·head 只有 L_q // BLOCK_Q 个程序：不满的最后一块查询没有程序负责，"
                    "dQ 的这些行一直是 NaN。应向上取整：triton.cdiv(L_q, BLOCK_Q)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.flash_function


def _function_case(generator, BH, L_q, L_k, d, d_v, block_q, block_k, causal, *, spread=1.0, strided=False):
    q, k, v = _qkv(generator, BH, L_q, L_k, d, d_v, spread)
    d_output = torch.randn(BH, L_q, d_v, generator=generator, dtype=torch.float64)
    if strided:  # the gradient as autograd may hand it to backward: the same values, not contiguous
        d_output = d_output.transpose(1, 2).contiguous().transpose(1, 2)
    f32 = [t.to(torch.float32) for t in (q, k, v, d_output)]  # (.to keeps d_output's strides)
    return (*f32, block_q, block_k, causal)


def _function_cases(generator):
    g = generator
    # One case: each runs three kernels, and under the check each launch costs some 0.5 s interpreted, whatever
    # its size. It is causal, so that every mistake shows; the hidden cases add one that is not (d_v ≠ d).
    return [_function_case(g, 1, 20, 20, 16, 16, 32, 32, True, spread=2.0, strided=True)]  # d = d_v, one block


def _function_hidden(generator):
    g = generator
    return [_function_case(g, 1, 24, 24, 16, 16, 16, 16, True, strided=True),
            _function_case(g, 2, 13, 19, 16, 12, 16, 16, False)]


def _gradients(query, key, value, output, lse, d_output, causal, dq_causal=None):
    """dQ, dK and dV (float64) from the saved output and lse, P recomputed from lse (masked when `causal`;
    dQ's by `dq_causal` when given)."""
    q, k, v, o, do = (t.double() for t in (query, key, value, output, d_output))
    scale = 1 / math.sqrt(query.shape[-1])
    unmasked = torch.exp(q @ k.transpose(1, 2) * scale - lse.double()[..., None])
    later = torch.ones(unmasked.shape[-2:], dtype=torch.bool, device=unmasked.device).triu(1)
    p = unmasked.masked_fill(later, 0.0) if causal else unmasked
    dq_causal = causal if dq_causal is None else dq_causal
    p_dq = unmasked.masked_fill(later, 0.0) if dq_causal else unmasked
    D = (do * o).sum(-1, keepdim=True)
    dp = do @ v.transpose(1, 2)
    ds, ds_dq = p * (dp - D), p_dq * (dp - D)
    return ds_dq @ k * scale, ds.transpose(1, 2) @ q * scale, p.transpose(1, 2) @ do


def _function(query, key, value, d_output, block_q, block_k, causal, *, forward_causal=None, backward_causal=None,
              order="right", dq_causal=None, rows_read=False):
    """(output, d_query, d_key, d_value) float32, as the learner's Function gives them, with the switches the
    mistakes flip: which causal flag the forward and the backward use (dq_causal: the dQ kernel's alone); order
    "swapped" returns dV for key and dK for value, "kqv" (dK, dQ, dV), "no_dq" None for query (autograd.grad
    makes it zeros); rows_read: the kernels read d_output as contiguous rows whatever its strides."""
    with torch.no_grad():
        forward_causal = causal if forward_causal is None else forward_causal
        backward_causal = causal if backward_causal is None else backward_causal
        output, lse = _attention(query.double(), key.double(), value.double(), forward_causal)
        if rows_read:  # its storage read as if it were (BH, L_q, d_v) row by row
            BH, L_q, d_v = d_output.shape
            d_output = d_output.as_strided((BH, L_q, d_v), (L_q * d_v, d_v, 1))
        d_query, d_key, d_value = _gradients(query, key, value, output, lse, d_output, backward_causal, dq_causal)
        if order == "kqv":
            if d_key.shape != d_query.shape:
                raise RuntimeError("FlashAttentionBackward returned an invalid gradient at index 0")
            d_query, d_key = d_key, d_query
        if order == "swapped":
            if d_key.shape != d_value.shape:  # what autograd raises for a gradient of another shape
                raise RuntimeError("FlashAttentionBackward returned an invalid gradient at index 1")
            d_key, d_value = d_value, d_key
        elif order == "no_dq":
            d_query = torch.zeros_like(d_query)
        return tuple(t.to(torch.float32) for t in (output, d_query, d_key, d_value))


def _function_reference(query, key, value, d_output, block_q, block_k, causal):
    return _function(query, key, value, d_output, block_q, block_k, causal)


def _function_mistake(**switches):
    def mistake(query, key, value, d_output, block_q, block_k, causal):
        return _function(query, key, value, d_output, block_q, block_k, causal, **switches)
    return mistake


register(
    Exercise(
        id="09.flash_function",
        reference=_function_reference,
        cases=_function_cases,
        hidden=_function_hidden,
        forbidden=("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                   "torch.logsumexp", "Tensor.logsumexp", "torch.matmul", "torch.bmm", "torch.einsum",
                   "course_utils.flash_triton.flash_attention", "course_utils.flash_triton.flash_forward",
                   "course_utils.flash_triton.flash_backward", "course_utils.tiled.tiled_attention",
                   "course_utils.tiled.tiled_backward"),
        mistakes=(
            Mistake(
                "DK_DV_SWAPPED",
                _function_mistake(order="swapped"),
                {
                    "en": "backward returns dV where dK belongs and dK where dV belongs: autograd matches the "
                    "gradients to forward's arguments by position, whatever their names. Return them in "
                    "forward's order, (d_query, d_key, d_value, None, None, None). (Where d_v ≠ d, autograd "
                    "refuses the swapped shapes instead.)",
                    "zh": "backward 把 dV 放在了 dK 的位置、dK 放在了 dV 的位置：autograd 是按位置把梯度对应到 forward "
                    "的参数上的，不看名字。应按 forward 参数的顺序返回：(d_query, d_key, d_value, None, None, None)。"
                    "（d_v ≠ d 时，autograd 会直接拒绝形状不对的梯度。）",
                },
            ),
            Mistake(
                "CAUSAL_DROPPED_IN_BACKWARD",
                _function_mistake(backward_causal=False),
                {
                    "en": "The output is right, but backward runs the kernels without the causal flag: the weights it "
                    "recomputes from lse include the keys after each query, which the forward gave weight 0. Keep "
                    "causal on ctx in forward (ctx.causal = causal) and pass it to both backward kernels.",
                    "zh": "输出是对的，但 backward 调用核函数时没有带上 causal：它用 lse 重新算出的权重包含了每个查询之后的键，"
                    "而前向给这些键的权重是 0。要在 forward 里把 causal 存到 ctx 上（ctx.causal = causal），"
                    "再传给反向的两个核函数。",
                },
            ),
            Mistake(
                "CAUSAL_IGNORED",
                _function_mistake(forward_causal=False, backward_causal=False),
                {
                    "en": "causal is never used: forward always runs the kernel of exercise 4 and backward the "
                    "kernels without the mask, so a causal call attends to every key. With causal=True, run "
                    "causal_forward in forward (its output and lse; loaded is not needed) and pass causal to the "
                    "backward kernels.",
                    "zh": "causal 从来没有用上：forward 总是调用练习 4 的核函数，backward 调用核函数时也不加掩码，"
                    "所以因果的调用也看到了所有的键。causal=True 时，forward 要调用 causal_forward（用它的 output 和 lse；"
                    "loaded 用不到），并把 causal 传给反向的核函数。",
                },
            ),
            Mistake(
                "CAUSAL_IGNORED_IN_FORWARD",
                _function_mistake(forward_causal=False),
                {
                    "en": "forward ignores causal: it always runs the kernel of exercise 4, so a causal call's output "
                    "attends to every key (backward, with causal, then recomputes its weights from that lse). With "
                    "causal=True run causal_forward in forward (its output and lse).",
                    "zh": "forward 忽略了 causal：它总是调用练习 4 的核函数，于是因果调用的输出看到了所有的键"
                    "（而 backward 带着 causal，用这个 lse 重新算权重）。causal=True 时，forward 要调用 causal_forward"
                    "（用它的 output 和 lse）。",
                },
            ),
            Mistake(
                "CAUSAL_DROPPED_IN_DQ",
                _function_mistake(dq_causal=False),
                {
                    "en": "d_key and d_value are right, but the dQ kernel runs without causal: the weights it recomputes "
                    "include the keys after each query. Pass causal to backward_dq as to backward_dkdv.",
                    "zh": "d_key 和 d_value 是对的，但 dQ 核函数调用时没有带上 causal：它重新算出的权重包含了每个查询之后的键。"
                    "要像传给 backward_dkdv 那样，把 causal 也传给 backward_dq。",
                },
            ),
            Mistake(
                "GRADIENTS_OUT_OF_ORDER",
                _function_mistake(order="kqv"),
                {
                    "en": "backward returns the gradients out of order, (dK, dQ, dV): autograd matches them to forward's "
                    "arguments by position, so query gets dK and key gets dQ. Return (d_query, d_key, d_value, None, "
                    "None, None).",
                    "zh": "backward 返回梯度的顺序不对，写成了 (dK, dQ, dV)：autograd 按位置把它们对应到 forward 的参数上，"
                    "于是 query 得到了 dK，key 得到了 dQ。应返回 (d_query, d_key, d_value, None, None, None)。",
                },
            ),
            Mistake(
                "D_OUTPUT_NOT_CONTIGUOUS",
                _function_mistake(rows_read=True),
                {
                    "en": "backward hands d_output to the kernels as autograd gave it, not contiguous, and the kernels "
                    "read it as rows of d_v numbers (offsets row · d_v + column): they read other numbers. Make it "
                    "contiguous first, d_output = d_output.contiguous() (or pass its strides to the kernels).",
                    "zh": "backward 把 autograd 给的 d_output 原样交给了核函数，它并不连续，而核函数按每行 d_v 个数来读"
                    "（偏移 row · d_v + column）：读到的是别的数。先把它变成连续的，d_output = d_output.contiguous()"
                    "（或者把它的步长传给核函数）。",
                },
            ),
            Mistake(
                "DQ_MISSING",
                _function_mistake(order="no_dq"),
                {
                    "en": "d_query is all zeros: backward returns None for query, and autograd reads None as a "
                    "gradient of zero. Run the dQ kernel of exercise 7 in backward and return its result first.",
                    "zh": "d_query 全是 0：backward 对 query 返回了 None，而 autograd 把 None 当作值为 0 的梯度。"
                    "要在 backward 里调用练习 7 的 dQ 核函数，并把它的结果放在第一个返回。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.flash_forward_half

#: Half-precision inputs: float16 (5 bits of exponent, 10 of mantissa: largest 65,504) and bfloat16 (float32's
#: 8 bits of exponent, 7 of mantissa). The forward of exercise 4 on them: dot products, m, ℓ and the output's
#: accumulator in float32, the output in the inputs' dtype, lse in float32.
HALVES = (torch.float16, torch.bfloat16)
#: bfloat16 column values whose sum over 512 keys, accumulated 16 keys at a time in bfloat16, ends 2.5 % to
#: 3 % off (one rounding per block, mostly the same way: a constant's block sum sits off bfloat16's grid by
#: the same amount at every step); found by simulating that accumulation for every value 1 + i/64.
_LOST_BITS_VALUES = (1.0625, 1.1875, 1.3125, 1.4375, 1.5625, 1.625, 1.8125, 1.859375)


def _half_case(generator, BH, L_q, L_k, d, d_v, block_q, block_k, dtype, *, spread=1.0):
    q, k, v = _qkv(generator, BH, L_q, L_k, d, d_v, spread)
    return q.to(dtype), k.to(dtype), v.to(dtype), block_q, block_k


def _past_float16s_range(generator, L_q=16, L_k=1000, d=16, d_v=16):
    """float16, long rows whose values lie near 200 and whose weights are all near 1 (scores within about
    ±0.1): the output is near 200, but Σ p·v passes 65,504, float16's largest number, after some 330 keys. A
    float32 accumulator holds it; a float16 one becomes inf. Ragged: L_k is not a whole number of blocks."""
    q = torch.randn(1, L_q, d, generator=generator, dtype=torch.float64) * 0.1
    k = torch.randn(1, L_k, d, generator=generator, dtype=torch.float64)
    v = 200 + 20 * torch.randn(1, L_k, d_v, generator=generator, dtype=torch.float64)
    return q.to(torch.float16), k.to(torch.float16), v.to(torch.float16), 16, 128


def _bits_lost_in_bfloat16(generator, L_k=512, d=16):
    """bfloat16, every key the same (every score of a row equal, every weight 1/L_k: the output is the mean
    of the values) and each value column a constant of _LOST_BITS_VALUES: 32 steps of 16 keys, where a
    bfloat16 accumulator rounds each step's sum off and ends 2.5 % to 3 % away."""
    q = torch.randn(1, 16, d, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, d, generator=generator, dtype=torch.float64).expand(1, L_k, d).contiguous()
    v = torch.tensor(_LOST_BITS_VALUES, dtype=torch.float64).expand(1, L_k, -1).contiguous()
    return q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16), 16, 16


def _half_cases(generator):
    g = generator
    # (three cases, few (program, key block) steps: each step is some 20 interpreted operations)
    return [
        _past_float16s_range(g),  # first: float16, rows past 65,504, a ragged last key block: every mistake shows
        _bits_lost_in_bfloat16(g),  # bfloat16, a long row whose sum loses bits
        _half_case(g, 2, 40, 21, 24, 16, 32, 16, torch.bfloat16, spread=2.0),  # L_q > L_k, d not a power of two
    ]


def _half_hidden(generator):
    g = generator
    return [_past_float16s_range(g, L_q=20, L_k=1100), _bits_lost_in_bfloat16(g),
            _half_case(g, 1, 29, 53, 16, 12, 16, 16, torch.bfloat16, spread=2.0),
            _half_case(g, 2, 20, 33, 20, 16, 16, 32, torch.float16)]


def _half_reference(query, key, value, block_q, block_k):
    with torch.no_grad():  # float64 from the half inputs (exact), then the output rounded once to their dtype
        output, lse = _attention(query.double(), key.double(), value.double(), False)
        return output.to(query.dtype), lse.to(torch.float32)


def _half_accumulated(query, key, value, block_q, block_k):
    """The output's accumulator held in the inputs' dtype: rounded to it after every key block, as
    acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(v.dtype) does (the rest as the kernel: float32)."""
    with torch.no_grad():
        BH, L_q, d = query.shape
        L_k, dtype = key.shape[1], query.dtype
        q, k, v = query.double(), key.double(), value.double()
        scale = torch.tensor(1 / math.sqrt(d), dtype=torch.float32)
        outputs, lses = [], []
        for start_q in range(0, L_q, block_q):
            rows = slice(start_q, min(start_q + block_q, L_q))
            m = torch.full((BH, rows.stop - rows.start), NEG_INF, device=query.device)
            ell = torch.zeros_like(m)
            acc = torch.zeros(BH, rows.stop - rows.start, v.shape[-1], dtype=dtype, device=query.device)
            for start_k in range(0, L_k, block_k):
                columns = slice(start_k, min(start_k + block_k, L_k))
                s = (q[:, rows] @ k[:, columns].transpose(1, 2)).float() * scale  # exact products, float32
                m_new = torch.maximum(m, s.amax(-1))
                alpha, p = torch.exp(m - m_new), torch.exp(s - m_new[..., None])
                ell = ell * alpha + p.sum(-1)
                pv = (p.to(dtype).double() @ v[:, columns]).float()
                acc = (acc.float() * alpha[..., None] + pv).to(dtype)
                m = m_new
            outputs.append((acc.float() / ell[..., None]).to(dtype))
            lses.append(m + torch.log(ell))
        return torch.cat(outputs, dim=1), torch.cat(lses, dim=1)


def _half_output_float32(query, key, value, block_q, block_k):
    with torch.no_grad():
        output, lse = _attention(query.double(), key.double(), value.double(), False)
        return output.to(torch.float32), lse.to(torch.float32)


def _half_lse_half(query, key, value, block_q, block_k):
    with torch.no_grad():
        output, lse = _attention(query.double(), key.double(), value.double(), False)
        return output.to(query.dtype), lse.to(query.dtype)


#: The tolerance (atol, rtol) of the half-precision forward: one rounding of the output to bfloat16 is up to
#: 2⁻⁹ of it (float16: 2⁻¹¹), and P rounded to the inputs' dtype for P·V adds about as much. Measured: the
#: lesson's kernel against F.scaled_dot_product_attention in float64 on the same inputs, 6 seeds × 4 shapes,
#: is at most 9.8e-4 (float16) and 7.8e-3 (bfloat16) off in the output, 3.8e-6 in lse; with rtol = one
#: bfloat16 step (2⁻⁷ ≈ 7.8e-3) the rest needs atol 2.2e-3. Both doubled, about; every named mistake is
#: off by 1.5 times the tolerance or more (inf, 2.5 %, or a dtype).
HALF_ATOL, HALF_RTOL = 5e-3, 1e-2

register(
    Exercise(
        id="09.flash_forward_half",
        atol=HALF_ATOL,
        rtol=HALF_RTOL,
        reference=_half_reference,
        cases=_half_cases,
        hidden=_half_hidden,
        forbidden=("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                   "torch.logsumexp", "Tensor.logsumexp", "torch.matmul", "torch.bmm", "torch.einsum",
                   "course_utils.flash_triton.flash_forward", "course_utils.flash_triton.flash_attention",
                   "course_utils.tiled.tiled_attention", "course_utils.tiled.flash_attention",
                   "course_utils.tiled.materialised_attention"),
        mistakes=(
            Mistake(
                "ACCUMULATOR_HALF",
                _half_accumulated,
                {
                    "en": "The output's accumulator is held in the inputs' dtype: rounded to float16 or bfloat16 "
                    "after every key block, it loses what a long row adds. float16's largest number is 65,504 "
                    "(a sum of values near 200 over 1,000 keys becomes inf) and bfloat16 keeps 8 significant bits "
                    "(a sum of 32 block sums ends 3 % off). Keep acc, m and ℓ in float32, acc = tl.zeros((BLOCK_Q, "
                    "BLOCK_DV), tl.float32), and round once, when you store the output.",
                    "zh": "输出的累加器用了输入的数据类型：每个键块之后都被舍入到 float16 或 bfloat16，长的一行加进来的东西就丢了。"
                    "float16 能表示的最大数是 65,504（1,000 个接近 200 的值加起来就成了 inf），bfloat16 只保留 8 位有效数字"
                    "（32 个块的和加起来差了 3 %）。acc、m 和 ℓ 都要用 float32，acc = tl.zeros((BLOCK_Q, BLOCK_DV), "
                    "tl.float32)，只在写回输出时舍入一次。",
                },
            ),
            Mistake(
                "OUTPUT_FLOAT32",
                _half_output_float32,
                {
                    "en": "The values are right, but the output is float32: it is returned in the inputs' dtype "
                    "(float16 or bfloat16), which is what the next layer expects and half the memory. Allocate it "
                    "with dtype=query.dtype; tl.store converts the float32 accumulator, or write "
                    "(acc / ell[:, None]).to(O.dtype.element_ty).",
                    "zh": "数值是对的，但输出是 float32：它应当用输入的数据类型（float16 或 bfloat16）返回，下一层要的就是它，"
                    "内存也只要一半。分配时写 dtype=query.dtype；tl.store 会转换 float32 的累加器，"
                    "也可以写 (acc / ell[:, None]).to(O.dtype.element_ty)。",
                },
            ),
            Mistake(
                "LSE_HALF",
                _half_lse_half,
                {
                    "en": "The output is right, but lse is in the inputs' dtype: it stays float32. The backward "
                    "recomputes every weight as exp(s − lse), so an lse rounded to float16 (about 4e-3 near 8) or "
                    "bfloat16 (3e-2) moves every weight of the row by that fraction. Allocate it with "
                    "dtype=torch.float32.",
                    "zh": "输出是对的，但 lse 用了输入的数据类型：它应当保持 float32。反向传播用 exp(s − lse) 重新算出每一个权重，"
                    "所以舍入到 float16（在 8 附近约 4e-3）或 bfloat16（3e-2）的 lse 会让这一行的每个权重都偏离这么多。"
                    "分配时写 dtype=torch.float32。",
                },
            ),
        ),
    )
)
