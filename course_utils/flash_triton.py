"""FlashAttention as Triton kernels (lesson 09): lesson 08's tiles, one program per block.

In Triton a kernel is the code of one **program**; a launch runs a grid of them, each on a block of
the data it finds from its ``tl.program_id``. Each tile lesson 08 held in a Python variable is here a
block held in one program's registers and shared memory (SRAM), loaded once from the GPU's main
memory (HBM) and never written back: that is the whole speed-up, since attention's steps do a few
FLOPs per byte and a GPU computes far faster than it reads memory.

The kernels, in the order the lesson writes them:

- ``softmax_rows``: one program per row; the row's max is subtracted before ``exp`` (the max shift).
- ``flash_forward``: one program per (batch·head, block of ``block_q`` queries). It walks the key
  blocks with lesson 08's online softmax (running max m, running sum ℓ, accumulator), in base 2 with
  the scale folded in (``exp2(s · scale · log₂e − m)`` is one multiply-add cheaper than ``exp``), and
  writes the output and the log-sum-exp of every row (natural log, as ``course_utils.tiled``). Key
  blocks come in two loops: those every query of the block sees entirely, without any mask, then the
  rest with one: the ragged last key block (keys ≥ L_k) and, when causal, the diagonal block(s).
  Causal blocks above the diagonal are never loaded.
- ``flash_backward``: FlashAttention-2's backward. D = rowsum(dO ∘ O) once per row (minus the
  gradient of lse when one flows), then one program per key block accumulating dK and dV over the query
  blocks, and one program per query block accumulating dQ over the key blocks; both recompute the
  weights P = exp(S − lse) from the saved lse instead of storing them (``_recomputed_weights``, one helper).
- ``flash_attention``: the two paired in a ``torch.autograd.Function`` (``TritonAttention``).

Causal means F.scaled_dot_product_attention's ``is_causal``: aligned at the top left, query i sees
keys j ≤ i (every row sees key 0, so no row is empty). Tensors are (..., L, d): any leading axes
(batch, heads), flattened to one "batch·head" axis of the grid. On a CPU the kernels run through
Triton's interpreter (``course_utils.triton_setup``), in float32; on a GPU compiled, in float16,
bfloat16 or float32 (float32 products exact to IEEE, not TF32, so that checks hold to float32's
tolerance there too).
"""

import math

import torch

from . import validation as check
from .triton_setup import load

load()  # before any @triton.jit below: the interpreter is switched on first where it is needed
import triton  # noqa: E402  (after load(), on purpose)
import triton.language as tl  # noqa: E402

LOG2E = 1.4426950408889634  # log₂ e: exp(x) = exp2(x · log₂ e)
LN2 = 0.6931471805599453  # ln 2: log x = log2(x) · ln 2
# The same two inside the kernels, which read a global only when it is a tl.constexpr (the floats above stay
# plain numbers for the code around them: torch multiplies a tensor by a float, not by a constexpr).
_LOG2E, _LN2 = tl.constexpr(LOG2E), tl.constexpr(LN2)

#: The dtypes the kernels take on a GPU; on a CPU (the interpreter) float32 only.
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# ----------------------------------------------------------------------------- the row softmax


@triton.jit
def _softmax_kernel(X, Y, n_columns, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # one program per row; int64: row · stride may pass 2³¹
    columns = tl.arange(0, BLOCK)  # BLOCK is the next power of two ≥ n_columns: tl.arange needs one
    inside = columns < n_columns
    x = tl.load(X + row * stride_x + columns, mask=inside, other=float("-inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)  # the max shift: exp never overflows, the padding's exp(−∞) = 0
    e = tl.exp(x)
    tl.store(Y + row * stride_y + columns, e / tl.sum(e, axis=0), mask=inside)


def softmax_rows(x):
    """softmax over the last axis of `x` (..., n), one Triton program per row; float32 math."""
    function = "softmax_rows"
    check.tensor(function, "x", x, min_ndim=1, layout="(..., n)")
    _check_dtype(function, "x", x)
    check.has_values(function, "x", x)
    rows = x.reshape(-1, x.shape[-1]).contiguous()  # (R, n): one program per row of this
    out = torch.empty_like(rows)
    if rows.numel():
        _softmax_kernel[(rows.shape[0],)](rows, out, rows.shape[1], rows.stride(0), out.stride(0),
                                          BLOCK=max(16, triton.next_power_of_2(rows.shape[1])))
    return out.reshape(x.shape)


# ----------------------------------------------------------------------------- the forward


@triton.jit
def _forward_blocks(acc, ell, m, q, K, V, rows, dims, dims_v, start, end, L_k, d, d_v, stride_kl, stride_vl,
                    qk_scale, BLOCK_K: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                    PRECISION: tl.constexpr):
    """The online softmax over the key blocks [start, end): lesson 08's ``update`` on each."""
    for start_k in range(start, end, BLOCK_K):
        columns = start_k + tl.arange(0, BLOCK_K)
        in_keys = columns[:, None] < L_k
        k = tl.load(K + columns[:, None] * stride_kl + dims[None, :], mask=in_keys & (dims[None, :] < d), other=0.0)
        v = tl.load(V + columns[:, None] * stride_vl + dims_v[None, :], mask=in_keys & (dims_v[None, :] < d_v),
                    other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BLOCK_Q, BLOCK_K), in base 2
        if MASKED:  # only the blocks a mask cuts through pay for it
            keep = columns[None, :] < L_k
            if CAUSAL:
                keep = keep & (columns[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        # a row that has seen only −∞ keeps m = −∞: subtract 0 instead, exp2(−∞) = 0, never NaN
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_safe)  # how much the old state shrinks
        p = tl.exp2(s - m_safe[:, None])
        ell = ell * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new
    return acc, ell, m


@triton.jit
def _forward_kernel(Q, K, V, O, LSE, L_q, L_k, d, d_v, qk_scale,
                    stride_qb, stride_ql, stride_kb, stride_kl, stride_vb, stride_vl, stride_ob, stride_ol,
                    CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    start_q = tl.program_id(0) * BLOCK_Q  # this program's query block
    # its (batch·head), as int64: bh · stride passes 2³¹ elements (int32's end) on long sequences of many heads
    bh = tl.program_id(1).to(tl.int64)
    Q += bh * stride_qb
    K += bh * stride_kb
    V += bh * stride_vb
    rows = start_q + tl.arange(0, BLOCK_Q)
    dims = tl.arange(0, BLOCK_D)
    dims_v = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + rows[:, None] * stride_ql + dims[None, :], mask=(rows[:, None] < L_q) & (dims[None, :] < d),
                other=0.0)
    m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    ell = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, BLOCK_DV), tl.float32)
    # the keys this block sees: all of them, or when causal those up to its last query
    end = tl.minimum(start_q + BLOCK_Q, L_k) if CAUSAL else L_k
    # blocks seen whole by every query of the block: before the first query (causal) and before L_k
    full_end = tl.minimum(start_q, end) if CAUSAL else end
    full_end = (full_end // BLOCK_K) * BLOCK_K
    acc, ell, m = _forward_blocks(acc, ell, m, q, K, V, rows, dims, dims_v, 0, full_end, L_k, d, d_v,
                                  stride_kl, stride_vl, qk_scale, BLOCK_K, False, CAUSAL, PRECISION)
    acc, ell, m = _forward_blocks(acc, ell, m, q, K, V, rows, dims, dims_v, full_end, end, L_k, d, d_v,
                                  stride_kl, stride_vl, qk_scale, BLOCK_K, True, CAUSAL, PRECISION)
    empty = ell == 0.0  # no visible key (none here with causal from the top left; kept for safety)
    out = acc / tl.where(empty, 1.0, ell)[:, None]
    lse = tl.where(empty, float("-inf"), (m + tl.log2(tl.where(empty, 1.0, ell))) * _LN2)  # natural log
    tl.store(O + bh * stride_ob + rows[:, None] * stride_ol + dims_v[None, :], out.to(O.dtype.element_ty),
             mask=(rows[:, None] < L_q) & (dims_v[None, :] < d_v))
    tl.store(LSE + bh * L_q + rows, lse, mask=rows < L_q)


# ----------------------------------------------------------------------------- the backward


@triton.jit
def _recomputed_weights(q, k, lse, rows, columns, L_q, L_k, qk_scale, CAUSAL: tl.constexpr,
                        PRECISION: tl.constexpr):
    """The weights P = exp(S − lse) of one (query block, key block) tile, recomputed from the saved lse instead
    of stored (both backward kernels need them): in base 2, 0 where a query may not see a key."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION)  # (BLOCK_Q, BLOCK_K)
    p = tl.exp2(s * qk_scale - lse[:, None] * _LOG2E)
    keep = (rows[:, None] < L_q) & (columns[None, :] < L_k)
    if CAUSAL:
        keep = keep & (columns[None, :] <= rows[:, None])
    return tl.where(keep, p, 0.0)


@triton.jit
def _preprocess_kernel(O, DO, DLSE, D, L_q, d_v, stride_ob, stride_ol, stride_db, stride_dl,
                       HAS_DLSE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_DV: tl.constexpr):
    start_q = tl.program_id(0) * BLOCK_Q
    bh = tl.program_id(1).to(tl.int64)  # int64 offsets: bh · stride may pass 2³¹ elements
    rows = start_q + tl.arange(0, BLOCK_Q)
    dims_v = tl.arange(0, BLOCK_DV)
    inside = (rows[:, None] < L_q) & (dims_v[None, :] < d_v)
    o = tl.load(O + bh * stride_ob + rows[:, None] * stride_ol + dims_v[None, :], mask=inside, other=0.0)
    do = tl.load(DO + bh * stride_db + rows[:, None] * stride_dl + dims_v[None, :], mask=inside, other=0.0)
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)  # D_i = Σ_c dO_ic · O_ic = Σ_j P_ij dP_ij
    if HAS_DLSE:  # lse's own gradient: ∂lse_i/∂s_ij = P_ij, so it enters dS as + P_ij · dlse_i
        delta -= tl.load(DLSE + bh * L_q + rows, mask=rows < L_q, other=0.0)
    tl.store(D + bh * L_q + rows, delta, mask=rows < L_q)


@triton.jit
def _dkdv_kernel(Q, K, V, DO, LSE, D, DK, DV, L_q, L_k, d, d_v, scale,
                 stride_qb, stride_ql, stride_kb, stride_kl, stride_vb, stride_vl, stride_db, stride_dl,
                 CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                 BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    start_k = tl.program_id(0) * BLOCK_K  # this program's key block, held for the whole loop
    bh = tl.program_id(1).to(tl.int64)  # int64 offsets: bh · stride may pass 2³¹ elements
    Q += bh * stride_qb
    DO += bh * stride_db
    LSE += bh * L_q
    D += bh * L_q
    columns = start_k + tl.arange(0, BLOCK_K)
    dims = tl.arange(0, BLOCK_D)
    dims_v = tl.arange(0, BLOCK_DV)
    in_keys = columns[:, None] < L_k
    k = tl.load(K + bh * stride_kb + columns[:, None] * stride_kl + dims[None, :],
                mask=in_keys & (dims[None, :] < d), other=0.0)
    v = tl.load(V + bh * stride_vb + columns[:, None] * stride_vl + dims_v[None, :],
                mask=in_keys & (dims_v[None, :] < d_v), other=0.0)
    dk = tl.zeros((BLOCK_K, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_K, BLOCK_DV), tl.float32)
    qk_scale = scale * _LOG2E
    # causal: queries before this key block never see it; start at the query block holding key start_k
    start = (start_k // BLOCK_Q) * BLOCK_Q if CAUSAL else 0
    for start_q in range(start, L_q, BLOCK_Q):
        rows = start_q + tl.arange(0, BLOCK_Q)
        in_rows = rows[:, None] < L_q
        q = tl.load(Q + rows[:, None] * stride_ql + dims[None, :], mask=in_rows & (dims[None, :] < d), other=0.0)
        do = tl.load(DO + rows[:, None] * stride_dl + dims_v[None, :], mask=in_rows & (dims_v[None, :] < d_v),
                     other=0.0)
        lse = tl.load(LSE + rows, mask=rows < L_q, other=0.0)
        delta = tl.load(D + rows, mask=rows < L_q, other=0.0)
        p = _recomputed_weights(q, k, lse, rows, columns, L_q, L_k, qk_scale, CAUSAL, PRECISION)  # (BLOCK_Q, BLOCK_K)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)  # dV = Pᵀ dO
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # dP = dO Vᵀ
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP − D), the softmax's backward
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)  # dK = dSᵀ Q (· scale below)
    tl.store(DK + bh * stride_kb + columns[:, None] * stride_kl + dims[None, :], (dk * scale).to(DK.dtype.element_ty),
             mask=in_keys & (dims[None, :] < d))
    tl.store(DV + bh * stride_vb + columns[:, None] * stride_vl + dims_v[None, :], dv.to(DV.dtype.element_ty),
             mask=in_keys & (dims_v[None, :] < d_v))


@triton.jit
def _dq_kernel(Q, K, V, DO, LSE, D, DQ, L_q, L_k, d, d_v, scale,
               stride_qb, stride_ql, stride_kb, stride_kl, stride_vb, stride_vl, stride_db, stride_dl,
               CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
               BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    start_q = tl.program_id(0) * BLOCK_Q  # this program's query block, held for the whole loop
    bh = tl.program_id(1).to(tl.int64)  # int64 offsets: bh · stride may pass 2³¹ elements
    K += bh * stride_kb
    V += bh * stride_vb
    rows = start_q + tl.arange(0, BLOCK_Q)
    dims = tl.arange(0, BLOCK_D)
    dims_v = tl.arange(0, BLOCK_DV)
    in_rows = rows[:, None] < L_q
    q = tl.load(Q + bh * stride_qb + rows[:, None] * stride_ql + dims[None, :], mask=in_rows & (dims[None, :] < d),
                other=0.0)
    do = tl.load(DO + bh * stride_db + rows[:, None] * stride_dl + dims_v[None, :],
                 mask=in_rows & (dims_v[None, :] < d_v), other=0.0)
    lse = tl.load(LSE + bh * L_q + rows, mask=rows < L_q, other=0.0)
    delta = tl.load(D + bh * L_q + rows, mask=rows < L_q, other=0.0)
    dq = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
    qk_scale = scale * _LOG2E
    end = tl.minimum(start_q + BLOCK_Q, L_k) if CAUSAL else L_k  # causal: no block above the diagonal
    for start_k in range(0, end, BLOCK_K):
        columns = start_k + tl.arange(0, BLOCK_K)
        in_keys = columns[:, None] < L_k
        k = tl.load(K + columns[:, None] * stride_kl + dims[None, :], mask=in_keys & (dims[None, :] < d), other=0.0)
        v = tl.load(V + columns[:, None] * stride_vl + dims_v[None, :], mask=in_keys & (dims_v[None, :] < d_v),
                    other=0.0)
        p = _recomputed_weights(q, k, lse, rows, columns, L_q, L_k, qk_scale, CAUSAL, PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)  # dQ = dS K (· scale below)
    tl.store(DQ + bh * stride_qb + rows[:, None] * stride_ql + dims[None, :], (dq * scale).to(DQ.dtype.element_ty),
             mask=in_rows & (dims[None, :] < d))


def _rewrite_now(*kernels):
    """Have Triton's interpreter prepare each kernel now, at import. On a kernel's first launch it
    rewrites the kernel's source and copies the names of its own module into the kernel's module
    (this one), once: done during a check, the check would see the package changed under it and put
    it back, and the next launch would miss those names (NameError, seen with Triton 3.9)."""
    for kernel in kernels:
        rewrite = getattr(kernel, "rewrite", None)  # only an interpreted kernel has one
        if rewrite is not None:
            rewrite()


_rewrite_now(_softmax_kernel, _forward_blocks, _forward_kernel, _recomputed_weights, _preprocess_kernel, _dkdv_kernel,
             _dq_kernel)


# ----------------------------------------------------------------------------- launching


def _check_dtype(function, argument, tensor):
    if tensor.is_cuda and tensor.dtype not in DTYPES:
        check.fail(function, argument, check.describe(tensor),
                   {"en": "float32, float16 or bfloat16", "zh": "float32、float16 或 bfloat16 类型"})
    # the interpreter computes in NumPy, which has no bfloat16 (it read one as garbage: errors of 8e8, measured)
    if not tensor.is_cuda and tensor.dtype != torch.float32:
        check.fail(function, argument, check.describe(tensor),
                   {"en": "float32 on the CPU (Triton's interpreter); float16 and bfloat16 run on a CUDA GPU",
                    "zh": "CPU 上（Triton 的解释器）为 float32；float16 和 bfloat16 要在 CUDA GPU 上运行"})


def _check_qkv(function, query, key, value, scale, block_q, block_k):
    check.attention_inputs(function, query, key, value, query_dtype=_check_dtype)
    for argument, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.shape[-2] == 0 or tensor.shape[-1] == 0:
            check.fail(function, argument, check.describe(tensor),
                       {"en": "at least one position and one feature", "zh": "至少一个位置和一个特征"})
    if query.device.type != "cpu" and not query.is_cuda:
        check.fail(function, "query", check.describe(query),
                   {"en": "a tensor on the CPU (interpreted) or on a CUDA GPU (compiled)",
                    "zh": "CPU 上（解释执行）或 CUDA GPU 上（编译执行）的张量"})
    for argument, block in (("block_q", block_q), ("block_k", block_k)):
        if block is not None and (check.positive_int(function, argument, block) < 16 or block & (block - 1)):
            check.fail(function, argument, check.describe(block),
                       {"en": "a power of two ≥ 16 (tl.arange needs a power of two; 16 is a block tl.dot takes "
                              "for every dtype on a GPU)",
                        "zh": "不小于 16 的 2 的幂（tl.arange 要求 2 的幂；16 是 GPU 上 tl.dot 对每种 dtype 都接受的块大小）"})
    if scale is not None:
        check.scale(function, scale, query.dtype)
        return float(scale)
    return 1.0 / math.sqrt(query.shape[-1])


def _flat(tensor):
    """(..., L, c) → (BH, L, c), contiguous in its last axis (the kernels step it by 1)."""
    return tensor.reshape(-1, *tensor.shape[-2:]).contiguous()


def _precision(tensor):
    # float32 products to IEEE precision on a GPU (its default, TF32, keeps 10 bits of mantissa); the
    # half types' products have one precision only (None: Triton's default)
    return "ieee" if tensor.dtype == torch.float32 else None


def _blocks(query, key, block_q, block_k):
    """The blocks asked for, or defaults: 64 × 64 on a GPU (a tile of scores fits the registers), the
    smallest of 64 and the lengths' next powers of two on a CPU (the interpreter pays per element)."""
    L_q, L_k = query.shape[-2], key.shape[-2]
    default = 64
    block_q = block_q or min(default, max(16, triton.next_power_of_2(L_q)))
    block_k = block_k or min(default, max(16, triton.next_power_of_2(L_k)))
    return block_q, block_k


def _launch(function, num_warps, num_stages):
    """The launch options asked for (Triton's defaults for those left None)."""
    options = {}
    for argument, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if value is not None:
            options[argument] = check.positive_int(function, argument, value)
    return options


def _dims(query, value):
    return max(16, triton.next_power_of_2(query.shape[-1])), max(16, triton.next_power_of_2(value.shape[-1]))


def flash_forward(query, key, value, *, causal=False, scale=None, block_q=None, block_k=None, num_warps=None,
                  num_stages=None):
    """softmax(Q Kᵀ · scale) V by the forward kernel, returning ``(output, lse)``.

    Args:
        query: (..., L_q, d) float32/float16/bfloat16 tensor; key: (..., L_k, d); value: (..., L_k, d_v),
            the same leading axes, dtype and device (CPU: interpreted; CUDA: compiled).
        causal: F.scaled_dot_product_attention's is_causal: query i sees keys j ≤ i.
        scale: multiplies the scores; default 1/√d.
        block_q, block_k: queries per program, keys per step of its loop (powers of two ≥ 16);
            default 64, or less on a CPU for short sequences.
        num_warps, num_stages: how a GPU runs each program (warps of 32 threads; loads in flight
            ahead of the loop, software pipelining); default Triton's. The interpreter ignores both.

    Returns:
        output: (..., L_q, d_v), query's dtype; lse: (..., L_q) float32, log Σ_j exp(score_ij) over the
        visible keys, what ``course_utils.tiled.tiled_attention`` returns."""
    function = "flash_forward"
    scale = _check_qkv(function, query, key, value, scale, block_q, block_k)
    check.flag(function, "causal", causal)
    block_q, block_k = _blocks(query, key, block_q, block_k)
    *lead, L_q, d = query.shape
    L_k, d_v = key.shape[-2], value.shape[-1]
    q, k, v = _flat(query), _flat(key), _flat(value)
    out = torch.empty((q.shape[0], L_q, d_v), dtype=query.dtype, device=query.device)
    lse = torch.empty((q.shape[0], L_q), dtype=torch.float32, device=query.device)
    block_d, block_dv = _dims(query, value)
    grid = (triton.cdiv(L_q, block_q), q.shape[0])  # (query blocks, batch·head)
    _forward_kernel[grid](q, k, v, out, lse, L_q, L_k, d, d_v, scale * LOG2E,
                          q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                          out.stride(0), out.stride(1), CAUSAL=causal, BLOCK_Q=block_q, BLOCK_K=block_k,
                          BLOCK_D=block_d, BLOCK_DV=block_dv, PRECISION=_precision(query),
                          **_launch(function, num_warps, num_stages))
    return out.reshape(*lead, L_q, d_v), lse.reshape(*lead, L_q)


def flash_backward(query, key, value, output, lse, d_output, *, causal=False, scale=None, block_q=None,
                   block_k=None, d_lse=None, num_warps=None, num_stages=None):
    """The gradients ``(d_query, d_key, d_value)`` of ``flash_forward`` from its output and lse alone.

    Args:
        query, key, value, causal, scale, block_q, block_k, num_warps, num_stages: as given to
            ``flash_forward`` (the blocks need not be the forward's).
        output: (..., L_q, d_v) and lse: (..., L_q), what ``flash_forward`` returned.
        d_output: (..., L_q, d_v), the gradient of the loss with respect to output.
        d_lse: None, or (..., L_q), the gradient with respect to lse (when the loss used it).

    Three kernels: D = rowsum(dO ∘ O) − d_lse; dK and dV, one program per key block looping over the
    query blocks that see it; dQ, one program per query block looping over the key blocks it sees."""
    function = "flash_backward"
    scale = _check_qkv(function, query, key, value, scale, block_q, block_k)
    check.flag(function, "causal", causal)
    *lead, L_q, d = query.shape
    L_k, d_v = key.shape[-2], value.shape[-1]
    for argument, tensor, shape in (("output", output, (*lead, L_q, d_v)), ("d_output", d_output, (*lead, L_q, d_v)),
                                    ("lse", lse, (*lead, L_q)), ("d_lse", d_lse, (*lead, L_q))):
        if tensor is None and argument == "d_lse":
            continue
        if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != tuple(shape) or \
                not tensor.is_floating_point() or tensor.device != query.device:
            check.fail(function, argument, check.describe(tensor),
                       {"en": f"a float tensor of shape {tuple(shape)} on query's device",
                        "zh": f"与 query 在同一设备上、形状为 {tuple(shape)} 的浮点张量"})
    block_q, block_k = _blocks(query, key, block_q, block_k)
    q, k, v = _flat(query), _flat(key), _flat(value)
    o, do = _flat(output).to(query.dtype), _flat(d_output).to(query.dtype)
    lse = lse.reshape(-1, L_q).float().contiguous()
    dlse = d_lse.reshape(-1, L_q).float().contiguous() if d_lse is not None else lse  # lse: a placeholder
    BH = q.shape[0]
    delta = torch.empty((BH, L_q), dtype=torch.float32, device=query.device)
    block_d, block_dv = _dims(query, value)
    _preprocess_kernel[(triton.cdiv(L_q, block_q), BH)](o, do, dlse, delta, L_q, d_v, o.stride(0), o.stride(1),
                                                        do.stride(0), do.stride(1), HAS_DLSE=d_lse is not None,
                                                        BLOCK_Q=block_q, BLOCK_DV=block_dv)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    strides = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), do.stride(0), do.stride(1))
    options = dict(CAUSAL=causal, BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=block_d, BLOCK_DV=block_dv,
                   PRECISION=_precision(query), **_launch(function, num_warps, num_stages))
    _dkdv_kernel[(triton.cdiv(L_k, block_k), BH)](q, k, v, do, lse, delta, dk, dv, L_q, L_k, d, d_v, scale,
                                                  *strides, **options)
    _dq_kernel[(triton.cdiv(L_q, block_q), BH)](q, k, v, do, lse, delta, dq, L_q, L_k, d, d_v, scale,
                                                *strides, **options)
    return dq.reshape(query.shape), dk.reshape(key.shape), dv.reshape(value.shape)


class TritonAttention(torch.autograd.Function):
    """``flash_forward`` with ``flash_backward`` as its gradient: autograd keeps the inputs, the
    output and one lse per row, never a weight."""

    @staticmethod
    def forward(ctx, query, key, value, causal, scale, block_q, block_k):
        output, lse = flash_forward(query, key, value, causal=causal, scale=scale, block_q=block_q, block_k=block_k)
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.options = {"causal": causal, "scale": scale, "block_q": block_q, "block_k": block_k}
        return output, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_output, d_lse):
        query, key, value, output, lse = ctx.saved_tensors
        if d_output is None:
            d_output = torch.zeros_like(output)
        grads = flash_backward(query, key, value, output, lse, d_output, d_lse=d_lse, **ctx.options)
        return (*grads, None, None, None, None)


def flash_attention(query, key, value, *, causal=False, scale=None, block_q=None, block_k=None):
    """``flash_forward``'s ``(output, lse)``, differentiable through ``flash_backward``."""
    _check_qkv("flash_attention", query, key, value, scale, block_q, block_k)
    check.flag("flash_attention", "causal", causal)
    return TritonAttention.apply(query, key, value, causal, scale, block_q, block_k)
