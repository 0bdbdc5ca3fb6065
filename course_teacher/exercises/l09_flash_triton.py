"""Lesson 09's exercises: Triton kernels the learner writes, checked through Triton's interpreter on a CPU.

The learner's function launches a kernel of their own; what it returns is compared, as for every
exercise, with references written here in plain torch (float64, then float32; tests/test_exercises_l09.py
proves they agree with F.scaled_dot_product_attention, torch.softmax and autograd, and that the
reference kernels of ``course_utils.flash_triton`` pass). A kernel's output is not on autograd's graph,
so every reference runs without one: values only (the texts say so), and the backward exercise's
values *are* gradients, compared with PyTorch's. Tensors are float32 (the interpreter's NumPy has no
bfloat16) and small: each case is a few blocks of 16 on one or two (batch·head), a fraction of a
second interpreted. Every length a kernel meets is a power of two ≥ 16 for its blocks (tl.arange needs
one; tl.dot needs 16 on a GPU); the lengths of the data are not.

- 09.softmax_kernel: (x (R, n)) -> softmax over the last axis, one program per row, BLOCK the next
  power of two ≥ n. Cases: n below, at and above a power of two, rows in the thousands (exp(s)
  overflows float32 without the max shift) and far below zero, −∞ entries in a row.
- 09.flash_forward: (query (BH, L_q, d), key (BH, L_k, d), value (BH, L_k, d_v), block_q, block_k) ->
  (output, lse), not causal. Cases: L_k not a multiple of block_k (the ragged last key block), L_q
  not one of block_q, L_q ≠ L_k both ways, d_v ≠ d, d not a power of two, keys of one whole block, scores
  past 88, scores wide enough that the running max moves from block to block, every score far below −87.
- 09.causal_forward: the same with is_causal (top-left, L_q = L_k), returning (output, lse, loaded):
  loaded (BH, number of query blocks) int64, the number of key blocks each program loaded, so that a
  program that loads every block and masks is told apart from one that never loads those above the
  diagonal. block_q is a multiple of block_k (the text says so).
- 09.backward_dkdv: (query, key, value, output, lse, d_output, block_q, block_k, causal) ->
  (d_key, d_value): one program per key block looping over the query blocks, P recomputed from lse,
  D = rowsum(dO ∘ O). output and lse are the forward's (float64, then float32), d_output random.

The first case of each exercise shows every known mistake but NO_MAX_SHIFT and M_FROM_ZERO (only the cases
with scores past 88, or with every score far below −87, show them), SCALE_PADDED_D (a head size that is not a
power of two), COUNT_NOT_CLIPPED (a last query block whose loop would run a whole key block past L), and in
the backward STORED_AT_QUERY_OFFSET (block_q ≠ block_k) and LAST_QUERY_BLOCK_MISSING against
QUERY_LOOP_ONE_SHORT (L_q a whole number of blocks).
Two mistakes are caught but left unnamed, since no emulation reproduces a real kernel's numbers within the
tolerance: P rounded to float16 before P·V (a rounding boundary moves with float32's last bit) and the
backward's P from unscaled scores (exp of arguments past 40 in float32). D_WRONG_AXIS (D summed over the
block's rows) gives numbers only where the padded feature block is BLOCK_Q long; elsewhere the interpreter
refuses the broadcast, and the emulation raises its InterpreterError (compiled on a GPU the error is the
compiler's: caught there, not named). The mistakes are the kernels' own,
emulated here block by block: a mistake is
named only when the learner's kernel gives its numbers on every case, so each emulation follows what a
kernel with that bug computes (padding loaded as 0, the key blocks a causal program visits), and each was
checked against a Triton kernel carrying the bug (tests/test_exercises_l09.py). An output the kernel
never writes is what it was allocated with: the texts ask for NaN (torch.full(..., float("nan"))), so
that a forgotten store shows. No tensor a case passes is
all zeros or all −∞.
"""

import math

import torch

from .registry import Exercise, Mistake, register

NEG_INF = float("-inf")
#: The forward exercises' absolute tolerance: their cases with scores past 88 reach about 200, where one
#: float32 rounding of a score is 1.5e-5, so a right kernel's weights (and outputs) differ from the
#: float64 reference by a few 1e-5 (2.2e-5 measured on the grader's default hidden seed; 1e-5 failed the
#: lesson's solution there). Every known mistake is off by far more.
FORWARD_ATOL = 5e-5


def _next_power_of_2(n):
    return 1 << (n - 1).bit_length()


# ----------------------------------------------------------------------------- 09.softmax_kernel


def _rows(generator, R, n, *, spread=3.0, offset=0.0, minus_inf=()):
    x = torch.randn(R, n, generator=generator, dtype=torch.float64) * spread + offset
    for r, c in minus_inf:
        x[r, c] = NEG_INF
    return (x.to(torch.float32),)


def _softmax_cases(generator):
    g = generator
    first = _rows(g, 4, 37, spread=4.0)[0]
    first[1] += 1000.0  # a row in the thousands: exp overflows float32 without the max shift
    return [
        (first,),  # first: n = 37 (padded to 64), one row near 1000: every mistake shows
        _rows(g, 3, 16),  # n a power of two: no padding at all
        _rows(g, 2, 100, spread=2.0),
        _rows(g, 5, 17, offset=-1000.0),  # rows far below zero: exp underflows to 0 without the shift
        _rows(g, 2, 33, minus_inf=((0, 3), (1, 0), (1, 32))),  # −∞ entries: weight 0
        _rows(g, 1, 64, spread=20.0),
    ]


def _softmax_hidden(generator):
    g = generator
    big = _rows(g, 3, 29, spread=3.0)[0]
    big[2] += 900.0
    return [(big,), _rows(g, 2, 50), _rows(g, 4, 20, offset=-800.0), _rows(g, 1, 32, minus_inf=((0, 5),))]


def _softmax_reference(x):
    with torch.no_grad():  # a kernel's output has no graph: values only
        x = x.double()
        e = torch.exp(x - x.amax(-1, keepdim=True))  # (what the check forbids the learner, it avoids too)
        return (e / e.sum(-1, keepdim=True)).to(torch.float32)


def _softmax_no_shift(x):
    e = torch.exp(x)  # float32, as the kernel: inf past 88, 0 below −104
    return e / e.sum(-1, keepdim=True)


def _softmax_padding_zero(x):
    n = x.shape[-1]
    padded = torch.nn.functional.pad(x.double(), (0, _next_power_of_2(n) - n), value=0.0)  # other=0.0
    e = torch.exp(padded - padded.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True))[..., :n].to(x.dtype)


def _softmax_sum_not_shifted(x):
    shifted = torch.exp(x - x.amax(-1, keepdim=True))
    return shifted / torch.exp(x).sum(-1, keepdim=True)


def _softmax_divided_by_max(x):
    e = torch.exp(x.double() - x.double().amax(-1, keepdim=True))
    return (e / e.amax(-1, keepdim=True)).to(torch.float32)  # the max of e is 1: e itself


def _softmax_block_is_n(x):
    """BLOCK = n: right where n is a power of two; elsewhere tl.arange refuses it, and the interpreter raises."""
    n = x.shape[-1]
    if n & (n - 1):
        from triton.runtime.errors import InterpreterError  # the error a kernel with this mistake raises here

        raise InterpreterError("ValueError(\"arange's range must be a power of 2\")")
    return _softmax_reference(x)


def _softmax_grid_one_short(x):
    """A grid of R − 1 programs (at least one): the last row is never written and keeps its NaN."""
    out = _softmax_reference(x)
    out[max(x.shape[0] - 1, 1):] = float("nan")
    return out


register(
    Exercise(
        id="09.softmax_kernel",
        reference=_softmax_reference,
        cases=_softmax_cases,
        hidden=_softmax_hidden,
        forbidden=("torch.softmax", "F.softmax", "Tensor.softmax", "course_utils.flash_triton.softmax_rows",
                   "course_utils.masks.masked_softmax"),
        mistakes=(
            Mistake(
                "NO_MAX_SHIFT",
                _softmax_no_shift,
                {
                    "en": "exp(x) / Σ exp(x) without the max shift: a row whose values pass about 88 overflows "
                    "float32 (inf / inf = NaN), and one far below zero underflows (0 / 0). Subtract the row's max "
                    "first, x = x − tl.max(x, axis=0): the same softmax, and every exp is at most 1.",
                    "zh": "没有减去最大值就算了 exp(x) / Σ exp(x)：某一行的值超过大约 88 时 float32 会溢出（inf / inf = NaN），"
                    "远小于 0 时又会下溢（0 / 0）。先减去这一行的最大值，x = x − tl.max(x, axis=0)：softmax 不变，"
                    "而每个 exp 都不超过 1。",
                },
            ),
            Mistake(
                "PADDING_AS_ZERO",
                _softmax_padding_zero,
                {
                    "en": "The columns past n were loaded as 0 (tl.load's other=0.0): a block is a power of two, so a "
                    "row of 37 is loaded as 64, and the 27 padding zeros each add exp(0 − max) to the sum. Load "
                    "them as −∞ instead, tl.load(..., mask=columns < n, other=float('-inf')): exp(−∞) = 0.",
                    "zh": "n 之后的列被当成 0 读了进来（tl.load 的 other=0.0）：块的长度是 2 的幂，所以长 37 的一行按 64 读入，"
                    "补上的 27 个 0 各自给和加了 exp(0 − max)。应把它们读成 −∞："
                    "tl.load(..., mask=columns < n, other=float('-inf'))，因为 exp(−∞) = 0。",
                },
            ),
            Mistake(
                "BLOCK_NOT_POWER_OF_2",
                _softmax_block_is_n,
                {
                    "en": "BLOCK = n: tl.arange(0, BLOCK) needs a power of two, so every row whose length is not one is "
                    "refused. Load BLOCK = triton.next_power_of_2(n) columns and mask the ones ≥ n, "
                    "mask=columns < n, other=float('-inf').",
                    "zh": "写成了 BLOCK = n：tl.arange(0, BLOCK) 要求 2 的幂，所以长度不是 2 的幂的行都会被拒绝。应读入 "
                    "BLOCK = triton.next_power_of_2(n) 列，并把 ≥ n 的列遮住：mask=columns < n, other=float('-inf')。",
                },
            ),
            Mistake(
                "GRID_ONE_SHORT",
                _softmax_grid_one_short,
                {
                    "en": "The grid has one program too few, (R − 1,): the last row is never written and keeps its NaN. "
                    "One program per row: grid = (R,).",
                    "zh": "网格少了一个程序，写成了 (R − 1,)：最后一行从来没有写出，一直是 NaN。每行一个程序：grid = (R,)。",
                },
            ),
            Mistake(
                "DIVIDED_BY_MAX",
                _softmax_divided_by_max,
                {
                    "en": "The weights are divided by their max, not their sum: e / tl.max(e, axis=0) is e itself (its "
                    "max is exp(0) = 1), so a row sums to more than 1. Divide by tl.sum(e, axis=0).",
                    "zh": "权重除以的是它们的最大值而不是和：e / tl.max(e, axis=0) 就是 e 本身（它的最大值是 exp(0) = 1），"
                    "所以一行加起来大于 1。应除以 tl.sum(e, axis=0)。",
                },
            ),
            Mistake(
                "SUM_NOT_SHIFTED",
                _softmax_sum_not_shifted,
                {
                    "en": "The numerator is shifted, exp(x − max), but the sum is Σ exp(x), taken before the shift: "
                    "the weights no longer sum to 1 (and the sum overflows where the shift was needed). Sum what "
                    "you divide: e = tl.exp(x − max), then e / tl.sum(e, axis=0).",
                    "zh": "分子减了最大值，exp(x − max)，分母却是减之前的 Σ exp(x)：权重加起来不再等于 1"
                    "（而且在需要减最大值的地方，这个和会溢出）。被除的和要用同一组数：e = tl.exp(x − max)，"
                    "再算 e / tl.sum(e, axis=0)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.matmul_kernel


def _operands(generator, M, K, N):
    a = torch.randn(M, K, generator=generator, dtype=torch.float64)
    b = torch.randn(K, N, generator=generator, dtype=torch.float64)
    return a.to(torch.float32), b.to(torch.float32)


def _matmul_cases(generator):
    g = generator
    return [
        (*_operands(g, 37, 40, 20), 16, 16, 16),  # first: a 3 × 2 grid, K ragged (16 + 16 + 8): every mistake shows
        (*_operands(g, 16, 16, 16), 16, 16, 16),  # one block each way
        (*_operands(g, 50, 23, 33), 32, 16, 16),  # block_m ≠ block_n, K < 2 blocks
        (*_operands(g, 5, 70, 9), 16, 32, 16),  # one tiny output block, a long inner dimension (4 blocks and 6)
        (*_operands(g, 33, 17, 64), 16, 32, 16),  # a column of one row past the blocks
    ]


def _matmul_hidden(generator):
    g = generator
    return [(*_operands(g, 29, 45, 50), 16, 16, 16), (*_operands(g, 40, 9, 18), 32, 16, 16)]  # the first grid 2 × 4


def _product(a, b):
    """a b in float64, as broadcast products summed over the inner axis: the mistakes run as a learner's
    function does, under the check's watch, so they avoid the products it refuses (and the reference too)."""
    return (a.double()[:, :, None] * b.double()[None, :, :]).sum(1)


def _matmul_reference(a, b, block_m, block_n, block_k):
    with torch.no_grad():  # a kernel's output has no graph: values only
        return _product(a, b).to(torch.float32)


def _matmul_last_block_missing(a, b, block_m, block_n, block_k):
    whole = a.shape[1] // block_k * block_k  # range(0, K // BLOCK_K * BLOCK_K, BLOCK_K): the ragged block is left out
    return _product(a[:, :whole], b[:whole]).to(torch.float32)


def _matmul_accumulator_reset(a, b, block_m, block_n, block_k):
    last = (a.shape[1] - 1) // block_k * block_k  # acc = tl.dot(a, b): only the last step's product is left
    return _product(a[:, last:], b[last:]).to(torch.float32)


def _matmul_one_block_short(a, b, block_m, block_n, block_k):
    whole = (math.ceil(a.shape[1] / block_k) - 1) * block_k  # range(0, K - BLOCK_K, BLOCK_K): one step short
    return _product(a[:, :whole], b[:whole]).to(torch.float32)


def _matmul_grid_rounded_down(a, b, block_m, block_n, block_k):
    """The grid (M // block_m, N // block_n): the ragged last row and column blocks have no program and keep
    the NaN the output was allocated with."""
    out = _matmul_reference(a, b, block_m, block_n, block_k)
    out[a.shape[0] // block_m * block_m:, :] = float("nan")
    out[:, b.shape[1] // block_n * block_n:] = float("nan")
    return out


def _matmul_grid_swapped(a, b, block_m, block_n, block_k):
    """Program (i, j) of the grid (cdiv(M, block_m), cdiv(N, block_n)) took program_id(1) for its rows and
    program_id(0) for its columns: it computes block (j, i), masked, so an output block (r, c) is written
    only where a program (c, r) exists, and keeps its NaN elsewhere."""
    M, N = a.shape[0], b.shape[1]
    out = _matmul_reference(a, b, block_m, block_n, block_k)
    rows_written = math.ceil(N / block_n) * block_m  # row blocks r < cdiv(N, block_n)
    columns_written = math.ceil(M / block_m) * block_n  # column blocks c < cdiv(M, block_m)
    out[rows_written:, :] = float("nan")
    out[:, columns_written:] = float("nan")
    return out


register(
    Exercise(
        id="09.matmul_kernel",
        reference=_matmul_reference,
        cases=_matmul_cases,
        hidden=_matmul_hidden,
        forbidden=("torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.tensordot", "Tensor.matmul",
                   "Tensor.mm", "Tensor.__matmul__", "F.linear"),
        mistakes=(
            Mistake(
                "LAST_INNER_BLOCK_MISSING",
                _matmul_last_block_missing,
                {
                    "en": "The loop over the inner dimension stops before its ragged last block: range(0, K // BLOCK_K "
                    "* BLOCK_K, BLOCK_K) leaves out the last K mod BLOCK_K terms of every sum. Loop over "
                    "range(0, K, BLOCK_K) and mask the last block's loads, mask=inner < K, other=0.0: a padded term "
                    "is 0 · 0.",
                    "zh": "沿内维的循环在不满的最后一块之前就停了：range(0, K // BLOCK_K * BLOCK_K, BLOCK_K) "
                    "把每个和的最后 K mod BLOCK_K 项漏掉了。应遍历 range(0, K, BLOCK_K)，并给最后一块的读取加掩码，"
                    "mask=inner < K, other=0.0：补出来的项是 0 · 0。",
                },
            ),
            Mistake(
                "ACCUMULATOR_RESET",
                _matmul_accumulator_reset,
                {
                    "en": "Only the last inner block's product is left: acc = tl.dot(a, b) replaces the accumulator "
                    "at every step instead of adding to it. Make acc = tl.zeros((BLOCK_M, BLOCK_N), "
                    "dtype=tl.float32) once, before the loop, and write acc += tl.dot(a, b) inside it.",
                    "zh": "只剩下了最后一个内维块的乘积：acc = tl.dot(a, b) 在每一步都把累加器换掉了，而不是加上去。"
                    "应在循环之前只做一次 acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)，循环里写 "
                    "acc += tl.dot(a, b)。",
                },
            ),
            Mistake(
                "INNER_LOOP_ONE_SHORT",
                _matmul_one_block_short,
                {
                    "en": "The loop over the inner dimension is one block short: range(0, K - BLOCK_K, BLOCK_K) never "
                    "reaches the last block (when K is one block, it runs not at all). Loop over range(0, K, BLOCK_K) "
                    "and mask the last block's loads, mask=inner < K, other=0.0.",
                    "zh": "沿内维的循环少走了一块：range(0, K - BLOCK_K, BLOCK_K) 永远到不了最后一块（K 只有一块时，"
                    "循环一次都不执行）。应遍历 range(0, K, BLOCK_K)，并给最后一块的读取加掩码，mask=inner < K, other=0.0。",
                },
            ),
            Mistake(
                "GRID_ROUNDED_DOWN",
                _matmul_grid_rounded_down,
                {
                    "en": "The grid was rounded down, (M // BLOCK_M, N // BLOCK_N): the ragged last row and column "
                    "blocks get no program and keep their NaN. Round up, (triton.cdiv(M, BLOCK_M), "
                    "triton.cdiv(N, BLOCK_N)), and let the masks cut what lies past the edges.",
                    "zh": "网格向下取整了，(M // BLOCK_M, N // BLOCK_N)：不满的最后一行块和最后一列块没有程序负责，"
                    "一直是 NaN。应向上取整，(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，由掩码去掉边界之外的部分。",
                },
            ),
            Mistake(
                "GRID_AXES_SWAPPED",
                _matmul_grid_swapped,
                {
                    "en": "The rows and columns of the grid are swapped: the grid is (cdiv(M, BLOCK_M), "
                    "cdiv(N, BLOCK_N)), so tl.program_id(0) numbers the row blocks and tl.program_id(1) the column "
                    "blocks. Read the other way, the masks hide the programs that fall outside, and the output "
                    "blocks no program reaches keep their NaN.",
                    "zh": "网格的行和列弄反了：网格是 (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))，所以 tl.program_id(0) "
                    "是行块的编号，tl.program_id(1) 是列块的编号。反过来读时，越界的程序被掩码遮住，"
                    "没有程序负责的输出块就一直是 NaN。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- the forward, emulated


def _qkv(generator, BH, L_q, L_k, d, d_v, *, spread=1.0):
    q = torch.randn(BH, L_q, d, generator=generator, dtype=torch.float64) * spread
    k = torch.randn(BH, L_k, d, generator=generator, dtype=torch.float64)
    k = k * torch.linspace(0.5, 2.5, L_k, dtype=torch.float64)[:, None]  # later keys score wider: the max moves
    v = torch.randn(BH, L_k, d_v, generator=generator, dtype=torch.float64)
    return q.to(torch.float32), k.to(torch.float32), v.to(torch.float32)


def _blocks(query, key, value, block_q, block_k, *, causal=False, rescale_acc=True, lse_max=True, lse_written=True,
            ragged_masked=True, scaled=True, shift=True, end_at=None, diagonal_masked=True, count=False,
            scale_kind="right", m_start=NEG_INF, key_slack=0, key_end=None, strict_diagonal=False, rows_run=None,
            count_extra=0):
    """What a forward kernel computes, block by block, with the switches the mistakes flip (float64).

    end_at(start_q) -> the end of the key blocks a causal program loads (default: its last query + 1).
    scale_kind: "right" 1/√d, "twice" 1/d, "padded" 1/√BLOCK_D (the head size rounded up to a power of two ≥ 16).
    m_start: the running max's first value (0 for the mistake: then exp runs in float32, as the kernel's, where
    a row whose scores all lie far below −87 underflows to 0). key_slack: the ragged mask keeps columns
    < L_k + key_slack. key_end: where a not-causal program's key loop ends (default L_k). strict_diagonal: the
    causal mask columns < rows, and no guard against a row that sees nothing (the kernel's exp(−∞ + ∞) = NaN).
    rows_run: the query rows some program ran (the others keep NaN). count_extra: added to each count."""
    BH, L_q, d = query.shape
    L_k = key.shape[1]
    q, k, v = query.double(), key.double(), value.double()
    scale = {"right": 1 / math.sqrt(d), "twice": 1 / d,
             "padded": 1 / math.sqrt(max(16, _next_power_of_2(d)))}[scale_kind] if scaled else 1.0
    in_float32 = m_start != NEG_INF
    outputs, lses, loaded = [], [], []
    at = {"device": query.device}  # every tensor made here, where the case's tensors are
    for start_q in range(0, L_q, block_q):
        rows = torch.arange(start_q, min(start_q + block_q, L_q), **at)
        m = torch.full((BH, len(rows)), m_start, dtype=torch.float64, **at)
        ell = torch.zeros(BH, len(rows), dtype=torch.float64, **at)
        acc = torch.zeros(BH, len(rows), v.shape[-1], dtype=torch.float64, **at)
        end = L_k if key_end is None else key_end
        if causal:
            end = end_at(start_q) if end_at is not None else min(start_q + block_q, L_k)
        starts = range(0, end, block_k)
        loaded.append(len(starts) + count_extra)
        for start_k in starts:
            columns = torch.arange(start_k, start_k + block_k, **at)  # the whole block, padding included
            inside = columns < L_k
            kb = torch.zeros(BH, block_k, d, dtype=torch.float64, **at)
            vb = torch.zeros(BH, block_k, v.shape[-1], dtype=torch.float64, **at)
            # (slices: boolean indexing costs 30 ms a call here, measured); none past L_k
            count_in = max(0, min(block_k, L_k - start_k))
            kb[:, :count_in] = k[:, start_k:start_k + count_in]  # tl.load(..., other=0.0)
            vb[:, :count_in] = v[:, start_k:start_k + count_in]
            s = (q[:, rows] @ kb.transpose(1, 2)) * scale  # (BH, b_q, block_k)
            inside = columns < L_k + key_slack
            keep = inside[None, :].expand(len(rows), block_k) if ragged_masked else torch.ones(len(rows), block_k,
                                                                                                 dtype=torch.bool, **at)
            if causal and diagonal_masked:
                keep = keep & ((columns[None, :] < rows[:, None]) if strict_diagonal else
                               (columns[None, :] <= rows[:, None]))
            s = s.masked_fill(~keep, NEG_INF)
            if shift:
                m_new = torch.maximum(m, s.amax(-1))
                safe = m_new if strict_diagonal else torch.where(m_new == NEG_INF, torch.zeros_like(m_new), m_new)
                if in_float32:  # exp as the kernel's, in float32: exp(−300) is 0 there, not 1e−130
                    alpha = torch.exp((m - safe).float()).double()
                    p = torch.exp((s - safe[..., None]).float()).double()
                else:
                    alpha = torch.exp(m - safe)
                    p = torch.exp(s - safe[..., None])
            else:  # no running max: exp of the scores themselves, in float32 as the kernel computes them
                m_new, alpha = torch.zeros_like(m), torch.ones_like(m)
                p = torch.exp(s.float()).double()
            ell = ell * alpha + p.sum(-1)
            acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ vb
            m = m_new
        outputs.append(acc / ell[..., None])  # 0 / 0 = NaN where a row saw nothing (no guard: none is needed)
        lse = m if lse_max == "only" else (m if lse_max else 0.0) + torch.log(ell)
        lses.append(lse if lse_written else torch.full_like(lse, float("nan")))  # as allocated: the text says NaN
    output = torch.cat(outputs, dim=1).to(query.dtype)
    lse = torch.cat(lses, dim=1).to(torch.float32)
    if rows_run is not None:  # the rows no program ran keep the NaN they were allocated with
        output[:, rows_run:] = float("nan")
        lse[:, rows_run:] = float("nan")
    if count:
        return output, lse, torch.tensor(loaded, dtype=torch.int64, **at).expand(BH, -1).clone()
    return output, lse


def _scores(query, key, causal):
    s = query.double() @ key.double().transpose(1, 2) / math.sqrt(query.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), NEG_INF)
    return s


def _attention(query, key, value, causal):
    """softmax(q kᵀ / √d) v and the log-sum-exp of each row, float64 then float32 (written out: the
    softmax and logsumexp the check forbids the learner, the reference does not call either)."""
    s = _scores(query, key, causal)
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    total = e.sum(-1, keepdim=True)
    output = (e / total) @ value.double()
    return output.to(query.dtype), (m + torch.log(total)).squeeze(-1).to(torch.float32)


# ----------------------------------------------------------------------------- 09.flash_forward


def _far_below(generator, BH, L_q, L_k, d, d_v, level=6.0):
    """Queries near +level and keys near −level in every dimension: every scaled score of every row near
    −level² · √d (−144 for level 6, d = 16), far below the −87 past which exp(s − 0) underflows float32 (a
    running max started at 0 gives 0 / 0 there; from −∞, the right lse is about that score + log L_k). The values
    lie on a grid of 1/8, so every product and sum in q · k is exact in float32: a kernel's scores carry no
    rounding of their own, and a mistake's emulation meets them to the last bit (unscaled, too)."""
    q = level + torch.randint(-4, 5, (BH, L_q, d), generator=generator, dtype=torch.float64) / 8
    k = -(level + torch.randint(-4, 5, (BH, L_k, d), generator=generator, dtype=torch.float64) / 8)
    v = torch.randn(BH, L_k, d_v, generator=generator, dtype=torch.float64)
    return q.to(torch.float32), k.to(torch.float32), v.to(torch.float32)


def _forward_cases(generator):
    g = generator
    # (each case costs its launch and each (program, key block) step, interpreted: the notebook's budget keeps
    # them few; a key loop one block short and one that leaves out the partial block are told apart by case 2)
    return [
        (*_qkv(g, 1, 37, 45, 16, 8, spread=2.0), 16, 16),  # first: ragged on both sides, 3 key blocks
        (*_qkv(g, 2, 50, 16, 16, 20), 32, 16),  # L_q > L_k, two (batch·head)s, the keys one whole block
        (*_qkv(g, 1, 20, 40, 24, 16, spread=3.0), 32, 16),  # L_q < L_k, d not a power of two, wide scores
        (*_qkv(g, 1, 24, 40, 16, 16, spread=40.0), 16, 32),  # scores past 88, block_k > block_q
        (*_far_below(g, 1, 16, 24, 16, 16), 16, 16),  # every score near −144: a running max must start at −∞
    ]


def _forward_hidden(generator):
    g = generator
    return [
        (*_qkv(g, 1, 29, 53, 16, 12, spread=2.0), 16, 16),
        (*_qkv(g, 2, 40, 21, 20, 16), 32, 16),
        (*_qkv(g, 1, 17, 33, 16, 16, spread=40.0), 16, 16),  # scores past 88
        (*_far_below(g, 1, 20, 17, 16, 8, level=8.0), 16, 16),  # every score near −256
    ]


def _forward_reference(query, key, value, block_q, block_k):
    with torch.no_grad():
        return _attention(query, key, value, causal=False)


def _forward(**switches):
    def mistake(query, key, value, block_q, block_k):
        return _blocks(query, key, value, block_q, block_k, **switches)
    return mistake


#: What both forward exercises refuse (exercise 4's text says: what exercise 3's refuses).
FORWARD_FORBIDDEN = ("F.scaled_dot_product_attention", "torch.softmax", "F.softmax", "Tensor.softmax",
                     "torch.logsumexp", "Tensor.logsumexp", "torch.matmul", "torch.bmm", "torch.einsum",
                     "course_utils.flash_triton.flash_forward", "course_utils.flash_triton.flash_attention",
                     "course_utils.tiled.tiled_attention", "course_utils.tiled.flash_attention",
                     "course_utils.tiled.materialised_attention")

register(
    Exercise(
        id="09.flash_forward",
        atol=FORWARD_ATOL,
        reference=_forward_reference,
        cases=_forward_cases,
        hidden=_forward_hidden,
        forbidden=FORWARD_FORBIDDEN,
        mistakes=(
            Mistake(
                "RESCALE_SUM_ONLY",
                _forward(rescale_acc=False),
                {
                    "en": "The running sum is rescaled when the max grows, but the accumulator is not: "
                    "acc + tl.dot(p, v) instead of acc · alpha[:, None] + tl.dot(p, v), alpha = exp(m_old − m_new). "
                    "What acc holds was summed with the old max, exactly as ell was.",
                    "zh": "最大值变大时只重新缩放了累计和，没有缩放累加器：写成了 acc + tl.dot(p, v)，"
                    "应为 acc · alpha[:, None] + tl.dot(p, v)，其中 alpha = exp(m_old − m_new)。acc 里的内容和 ell 一样，"
                    "是按旧的最大值求和的。",
                },
            ),
            Mistake(
                "LSE_NOT_WRITTEN",
                _forward(lse_written=False),
                {
                    "en": "The output is right but lse is still the NaN it was allocated with: the kernel never "
                    "stores it. At the end of the program, tl.store(LSE + rows, m + log(ell), mask=rows < L_q): the "
                    "backward recomputes every weight from it.",
                    "zh": "输出是对的，但 lse 还是分配时填入的 NaN：核函数从来没有写它。"
                    "程序最后要 tl.store(LSE + rows, m + log(ell), mask=rows < L_q)：反向传播要靠它重新算出每一个权重。",
                },
            ),
            Mistake(
                "LSE_WITHOUT_MAX",
                _forward(lse_max=False),
                {
                    "en": "lse is log(ell), without the max: ell = Σ exp(s − m), so log Σ exp(s) = m + log(ell) "
                    "(in base 2 with the scale folded in: (m₂ + log2(ell)) · ln 2). The output is right.",
                    "zh": "lse 写成了 log(ell)，少了最大值：ell = Σ exp(s − m)，所以 log Σ exp(s) = m + log(ell)"
                    "（如果用以 2 为底、把缩放并进去的写法：(m₂ + log2(ell)) · ln 2）。输出是对的。",
                },
            ),
            Mistake(
                "LSE_IS_MAX",
                _forward(lse_max="only"),
                {
                    "en": "lse is the running max m alone, without log(ell): ell = Σ exp(s − m), so log Σ exp(s) = m + "
                    "log(ell). The output is right.",
                    "zh": "lse 只写了运行最大值 m，少了 log(ell)：ell = Σ exp(s − m)，所以 log Σ exp(s) = m + log(ell)。"
                    "输出是对的。",
                },
            ),
            Mistake(
                "RAGGED_KEYS_UNMASKED",
                _forward(ragged_masked=False),
                {
                    "en": "The last key block runs past L_k and its padding takes part: those keys were loaded as 0 "
                    "(other=0.0), so their scores are 0, not −∞, and each adds exp(0 − m) to the sum. Mask the "
                    "scores of the columns ≥ L_k: s = tl.where(columns[None, :] < L_k, s, float('-inf')).",
                    "zh": "最后一个键块越过了 L_k，补出来的部分也参与了计算：这些键被读成 0（other=0.0），"
                    "所以分数是 0 而不是 −∞，每一个都给和加了 exp(0 − m)。要把列号 ≥ L_k 的分数遮住："
                    "s = tl.where(columns[None, :] < L_k, s, float('-inf'))。",
                },
            ),
            Mistake(
                "NO_SCALE",
                _forward(scaled=False),
                {
                    "en": "The scores are not scaled: s = q kᵀ / √d, as in F.scaled_dot_product_attention (in base 2, "
                    "multiply by scale · log2(e) once).",
                    "zh": "分数没有缩放：s = q kᵀ / √d，与 F.scaled_dot_product_attention 相同"
                    "（如果用以 2 为底的写法，就一次乘上 scale · log2(e)）。",
                },
            ),
            Mistake(
                "NO_MAX_SHIFT",
                _forward(shift=False),
                {
                    "en": "The blocks are summed as exp(s), with no running max: exp overflows float32 once a score "
                    "passes about 88, and ell and acc become inf (the output NaN). Keep the running max m, sum "
                    "exp(s − m) and rescale by exp(m_old − m_new) when it grows.",
                    "zh": "各块按 exp(s) 直接求和，没有维护运行最大值：分数一旦超过大约 88，exp 就会在 float32 中溢出，"
                    "ell 和 acc 变成 inf（输出变成 NaN）。要维护运行最大值 m，对 exp(s − m) 求和，"
                    "m 变大时用 exp(m_old − m_new) 重新缩放。",
                },
            ),
            Mistake(
                "M_FROM_ZERO",
                _forward(m_start=0.0),
                {
                    "en": "The running max starts at 0 instead of −∞: right while some score of a row is above about "
                    "−87, but a row whose scores all lie far below that sums exp(s − 0), which underflows float32 to "
                    "0: ell = 0, the output 0 / 0 = NaN and lse = −∞. Start it at −∞, m = tl.full((BLOCK_Q,), "
                    "float('-inf'), tl.float32): the first block's max then takes its place.",
                    "zh": "运行最大值从 0 而不是 −∞ 开始：只要一行里有分数高于大约 −87 就没问题，但如果一行的分数全都远低于它，"
                    "求的就是 exp(s − 0)，在 float32 中下溢为 0：ell = 0，输出是 0 / 0 = NaN，lse = −∞。应从 −∞ 开始，"
                    "m = tl.full((BLOCK_Q,), float('-inf'), tl.float32)：第一个块的最大值自然会取代它。",
                },
            ),
            Mistake(
                "SCALE_TWICE",
                _forward(scale_kind="twice"),
                {
                    "en": "The scores are scaled twice, q kᵀ / d instead of q kᵀ / √d: the scale is applied once, "
                    "either to the scores or to q, not both (nor squared).",
                    "zh": "分数被缩放了两次，成了 q kᵀ / d，而不是 q kᵀ / √d：缩放只做一次，要么乘在分数上，要么乘在 q 上，"
                    "不能两处都乘（也不能平方）。",
                },
            ),
            Mistake(
                "SCALE_PADDED_D",
                _forward(scale_kind="padded"),
                {
                    "en": "The scores are scaled by the block's head size, 1/√BLOCK_D, not the head's: BLOCK_D is d "
                    "rounded up to a power of two (tl.arange needs one), and the padding dimensions hold zeros. The "
                    "scale is 1/√d of the real d, passed from the function: 1 / math.sqrt(d).",
                    "zh": "分数按块的头维度 1/√BLOCK_D 缩放了，而不是按真正的头维度：BLOCK_D 是把 d 向上取到 2 的幂（tl.arange 需要），"
                    "补出来的维度都是 0。缩放应是真实 d 的 1/√d，由函数传进来：1 / math.sqrt(d)。",
                },
            ),
            Mistake(
                "KEY_MASK_PAST_END",
                _forward(key_slack=1),
                {
                    "en": "The ragged key mask is off by one, columns <= L_k: the column L_k is padding (loaded as 0, "
                    "its score 0) and takes part. Keep the columns < L_k: s = tl.where(columns[None, :] < L_k, s, "
                    "float('-inf')).",
                    "zh": "不满的最后一个键块的掩码差了一位，写成了 columns <= L_k：第 L_k 列是补出来的（读成 0，分数为 0），也参与了计算。"
                    "应只保留 columns < L_k 的列：s = tl.where(columns[None, :] < L_k, s, float('-inf'))。",
                },
            ),
            Mistake(
                "KEY_MASK_LAST_KEY_LOST",
                _forward(key_slack=-1),
                {
                    "en": "The ragged key mask is off by one, columns < L_k − 1: the last key never takes part. The "
                    "keys are 0 … L_k − 1, so keep the columns < L_k.",
                    "zh": "不满的最后一个键块的掩码差了一位，写成了 columns < L_k − 1：最后一个键从未参与计算。键的编号是 0 … L_k − 1，"
                    "所以要保留 columns < L_k 的列。",
                },
            ),
            Mistake(
                "LAST_KEY_BLOCK_MISSING",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, key_end=k.shape[1] // bk * bk),
                {
                    "en": "The key loop stops before the ragged last block: range(0, L_k // BLOCK_K * BLOCK_K, "
                    "BLOCK_K) leaves out the last L_k mod BLOCK_K keys. Loop over range(0, L_k, BLOCK_K) and mask "
                    "the last block.",
                    "zh": "键的循环在不满的最后一块之前就停了：range(0, L_k // BLOCK_K * BLOCK_K, BLOCK_K) 漏掉了最后 "
                    "L_k mod BLOCK_K 个键。应遍历 range(0, L_k, BLOCK_K)，并给最后一块加掩码。",
                },
            ),
            Mistake(
                "KEY_LOOP_ONE_SHORT",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, key_end=k.shape[1] - bk),
                {
                    "en": "The key loop is one block short: range(0, L_k − BLOCK_K, BLOCK_K) never reaches the last "
                    "key block (with one block of keys it runs not at all: 0 / 0). Loop over range(0, L_k, BLOCK_K).",
                    "zh": "键的循环少走了一块：range(0, L_k − BLOCK_K, BLOCK_K) 永远到不了最后一个键块（键只有一块时，"
                    "循环一次都不执行：0 / 0）。应遍历 range(0, L_k, BLOCK_K)。",
                },
            ),
            Mistake(
                "GRID_ROUNDED_DOWN",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, rows_run=q.shape[1] // bq * bq),
                {
                    "en": "The grid was rounded down, L_q // BLOCK_Q programs per batch·head: the ragged last block "
                    "of queries gets no program, and its output and lse keep their NaN. Round up: triton.cdiv(L_q, "
                    "BLOCK_Q).",
                    "zh": "网格向下取整了，每个 batch·head 只有 L_q // BLOCK_Q 个程序：不满的最后一块查询没有程序负责，"
                    "它的输出和 lse 一直是 NaN。应向上取整：triton.cdiv(L_q, BLOCK_Q)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.causal_forward


def _causal_cases(generator):
    g = generator
    return [
        (*_qkv(g, 1, 45, 45, 16, 8, spread=2.0), 16, 16),  # first: 3 query blocks, the last ragged
        (*_far_below(g, 1, 16, 16, 16, 16), 16, 16),  # one block, only the diagonal, every score near −144
        (*_qkv(g, 1, 40, 40, 24, 16), 32, 16),  # block_q = 2 · block_k: two diagonal key blocks; unclipped,
        # the last query block's loop would load the block at 48, wholly past L
        (*_qkv(g, 2, 17, 17, 16, 20, spread=3.0), 16, 16),  # a last block of one query, two (batch·head)s
    ]


def _causal_hidden(generator):
    g = generator
    return [(*_qkv(g, 1, 53, 53, 16, 12, spread=2.0), 16, 16), (*_qkv(g, 2, 40, 40, 20, 16), 32, 16),
            (*_far_below(g, 1, 20, 20, 16, 8, level=8.0), 16, 16)]


def _loaded(BH, L, block_q, block_k, end_at=None, device=None):
    ends = [end_at(s) if end_at else min(s + block_q, L) for s in range(0, L, block_q)]
    counts = torch.tensor([len(range(0, e, block_k)) for e in ends], dtype=torch.int64, device=device)
    return counts.expand(BH, -1).clone()


def _causal_reference(query, key, value, block_q, block_k):
    with torch.no_grad():
        output, lse = _attention(query, key, value, causal=True)
        return output, lse, _loaded(query.shape[0], query.shape[1], block_q, block_k, device=query.device)


def _causal_every_block(query, key, value, block_q, block_k):
    L = key.shape[1]
    return _blocks(query, key, value, block_q, block_k, causal=True, end_at=lambda s: L, count=True)


register(
    Exercise(
        id="09.causal_forward",
        atol=FORWARD_ATOL,
        reference=_causal_reference,
        cases=_causal_cases,
        hidden=_causal_hidden,
        forbidden=FORWARD_FORBIDDEN,
        mistakes=(
            Mistake(
                "NO_BLOCK_SKIPPING",
                _causal_every_block,
                {
                    "en": "The values are right, but every program loads every key block and masks the ones above the "
                    "diagonal: they are all −∞, loaded for nothing. End the loop at the block's last query: "
                    "range(0, min(start_q + BLOCK_Q, L), BLOCK_K), about half the work of a causal row.",
                    "zh": "数值是对的，但每个程序都读入了所有的键块，再把对角线上方的块遮住：那些全是 −∞，白读了。"
                    "循环应在本块最后一个查询处结束：range(0, min(start_q + BLOCK_Q, L), BLOCK_K)，"
                    "因果的一行只需要大约一半的工作量。",
                },
            ),
            Mistake(
                "DIAGONAL_SKIPPED",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, end_at=lambda s: s, count=True),
                {
                    "en": "The loop stops before the diagonal block: range(0, start_q, BLOCK_K) loads only the blocks "
                    "wholly before the program's first query, so each query misses the keys of its own block (itself "
                    "included) and the first block sees nothing at all (0 / 0). The diagonal block is loaded too, "
                    "with the mask columns ≤ rows: end at min(start_q + BLOCK_Q, L).",
                    "zh": "循环在对角线块之前就停了：range(0, start_q, BLOCK_K) 只读入完全位于本程序第一个查询之前的块，"
                    "于是每个查询都漏掉了自己所在块里的键（包括它自己），第一个块更是什么都没看到（0 / 0）。"
                    "对角线块也要读入，并加上掩码 columns ≤ rows：循环结束于 min(start_q + BLOCK_Q, L)。",
                },
            ),
            Mistake(
                "DIAGONAL_UNMASKED",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, diagonal_masked=False, count=True),
                {
                    "en": "The right blocks are loaded, but the diagonal block is not masked: a query sees the keys "
                    "after it up to the end of its block. In the diagonal block, s = tl.where(columns[None, :] <= "
                    "rows[:, None], s, float('-inf')); the blocks wholly before it need no mask.",
                    "zh": "读入的块是对的，但对角线块没有加掩码：查询看到了自己之后、直到本块末尾的那些键。"
                    "在对角线块里要写 s = tl.where(columns[None, :] <= rows[:, None], s, float('-inf'))；"
                    "完全位于它之前的块不需要掩码。",
                },
            ),
            Mistake(
                "DIAGONAL_EXCLUDED",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, strict_diagonal=True, count=True),
                {
                    "en": "The diagonal mask is columns < rows: a query does not see itself, and the first query sees "
                    "no key at all (its max stays −∞ and exp(−∞ − (−∞)) is NaN). Causal attention keeps the keys up "
                    "to and including the query: columns[None, :] <= rows[:, None].",
                    "zh": "对角线掩码写成了 columns < rows：查询看不到自己，第一个查询更是一个键也看不到（它的最大值一直是 −∞，"
                    "exp(−∞ − (−∞)) 是 NaN）。因果注意力保留的是直到查询本身（含）的键：columns[None, :] <= rows[:, None]。",
                },
            ),
            Mistake(
                "M_FROM_ZERO",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, count=True, m_start=0.0),
                {
                    "en": "The running max starts at 0 instead of −∞: right while some score of a row is above about "
                    "−87, but a row whose scores all lie far below that sums exp(s − 0), which underflows float32 to "
                    "0: ell = 0, the output 0 / 0 = NaN and lse = −∞. Start it at −∞, m = tl.full((BLOCK_Q,), "
                    "float('-inf'), tl.float32).",
                    "zh": "运行最大值从 0 而不是 −∞ 开始：只要一行里有分数高于大约 −87 就没问题，但如果一行的分数全都远低于它，"
                    "求的就是 exp(s − 0)，在 float32 中下溢为 0：ell = 0，输出是 0 / 0 = NaN，lse = −∞。应从 −∞ 开始，"
                    "m = tl.full((BLOCK_Q,), float('-inf'), tl.float32)。",
                },
            ),
            Mistake(
                "COUNT_OFF_BY_ONE",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, count=True, count_extra=1),
                {
                    "en": "The values are right, but every count is one too many: loaded starts at 1 (or is bumped "
                    "once more after the loop). Start it at 0 and add 1 for each key block the loop loads.",
                    "zh": "数值是对的，但每个计数都多了 1：loaded 从 1 开始（或者在循环之后又加了一次）。应从 0 开始，"
                    "循环每读入一个键块就加 1。",
                },
            ),
            Mistake(
                "COUNT_NOT_CLIPPED",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, count=True, end_at=lambda s: s + bq),
                {
                    "en": "The values are right, but the last query block loads (and counts) key blocks wholly past "
                    "L: its loop ends at start_q + BLOCK_Q, not clipped to the sequence. End it at "
                    "tl.minimum(start_q + BLOCK_Q, L).",
                    "zh": "数值是对的，但最后一个查询块读入（并计数）了完全位于 L 之后的键块：它的循环结束于 start_q + BLOCK_Q，"
                    "没有按序列长度截断。应结束于 tl.minimum(start_q + BLOCK_Q, L)。",
                },
            ),
            Mistake(
                "CAUSAL_LOOP_ONE_SHORT",
                lambda q, k, v, bq, bk: _blocks(q, k, v, bq, bk, causal=True, count=True,
                                                end_at=lambda s: min(s + bq, k.shape[1]) - bk),
                {
                    "en": "The key loop is one block short: it ends BLOCK_K before the block's last query, so the "
                    "diagonal block is never loaded (the first query block loads nothing: 0 / 0). End at "
                    "tl.minimum(start_q + BLOCK_Q, L).",
                    "zh": "键的循环少走了一块：它在本块最后一个查询之前 BLOCK_K 处就结束了，于是对角线块从未读入"
                    "（第一个查询块什么也没读：0 / 0）。应结束于 tl.minimum(start_q + BLOCK_Q, L)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 09.backward_dkdv


def _backward_case(generator, BH, L_q, L_k, d, d_v, block_q, block_k, causal, spread=1.0):
    q, k, v = _qkv(generator, BH, L_q, L_k, d, d_v, spread=spread)
    output, lse = _attention(q, k, v, causal)
    d_output = torch.randn(BH, L_q, d_v, generator=generator, dtype=torch.float64).to(torch.float32)
    return q, k, v, output, lse, d_output, block_q, block_k, causal


def _backward_cases(generator):
    g = generator
    # (few (program, query block) steps each: every one costs the interpreter four tl.dot and the notebook's time)
    return [
        _backward_case(g, 1, 37, 37, 16, 8, 16, 16, True, spread=2.0),  # first: causal, ragged
        _backward_case(g, 1, 45, 29, 24, 16, 32, 16, False),  # L_q > L_k, d not a power of two
        _backward_case(g, 1, 20, 50, 16, 16, 16, 32, False, spread=2.0),  # L_q < L_k, block_k > block_q
        _backward_case(g, 2, 32, 32, 16, 16, 32, 16, True),  # block_q = 2 · block_k, two (batch·head)s
    ]


def _backward_hidden(generator):
    g = generator
    return [_backward_case(g, 1, 33, 33, 16, 12, 16, 16, True), _backward_case(g, 2, 27, 40, 20, 16, 16, 16, False)]


def _visited(L_q, L_k, block_q, block_k, causal, device=None, rows_end=None, skip_diagonal=False):
    """(L_q, L_k) bool: the (query, key) pairs a dK/dV program meets at all. Causal, the program of a key
    block starts at the query block that holds its first key (skip_diagonal: at the block after it); every
    pair otherwise. rows_end: where the query loop stops (the query blocks from there on are never visited)."""
    rows = torch.arange(L_q, device=device)[:, None]
    if not causal:
        visited = torch.ones(L_q, L_k, dtype=torch.bool, device=device)
    else:
        first_row = (torch.arange(L_k, device=device) // block_k * block_k) // block_q * block_q  # (L_k,)
        visited = rows >= first_row[None, :] + (block_q if skip_diagonal else 0)
    return visited if rows_end is None else visited & (rows < rows_end)


def delta_per_block(d_output, output, block_q):
    """(BH, L_q) float64: D summed over the query rows of each block too, one number per block
    (tl.sum(tl.sum(do * o, axis=1), axis=0)), each row of the block given that total."""
    D = (d_output.double() * output.double()).sum(-1)
    for start in range(0, D.shape[1], block_q):
        D[:, start:start + block_q] = D[:, start:start + block_q].sum(1, keepdim=True)
    return D


def padded_scale(d):
    """1/√BLOCK_D: the scale of a head size rounded up to the block's power of two (≥ 16), a mistake."""
    return 1 / math.sqrt(max(16, _next_power_of_2(d)))


def delta_wrong_axis(d_output, output, block_q):
    """(BH, L_q) float64: D summed over the query rows of each block instead of the features,
    tl.sum(do * o, axis=0), then read as one number per row, delta[:, None]: row start_q + i gets the sum
    of column i over its block (0 past d_v). Only where the padded feature block is BLOCK_Q long do the
    shapes agree; elsewhere Triton refuses the broadcast (the mistakes raise as it does)."""
    BH, L_q, d_v = output.shape
    if max(16, 1 << (d_v - 1).bit_length()) != block_q:
        from triton.runtime.errors import InterpreterError  # the error a kernel with this mistake raises here

        raise InterpreterError("ValueError('Cannot make_shape_compatible: incompatible dimensions')")
    product = d_output.double() * output.double()
    D = torch.zeros(BH, L_q, dtype=torch.float64, device=output.device)
    for start in range(0, L_q, block_q):
        sums = product[:, start:start + block_q].sum(1)  # (BH, d_v): one per feature
        rows = min(block_q, L_q - start, d_v)
        D[:, start:start + rows] = sums[:, :rows]
    return D


def _dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal, *, delta="right", times_p=True,
          scale_dk=1, masked=True, sign=1.0, query_loop_short=False, whole_query_blocks=False, padded=False,
          skip_diagonal=False, store_at_query_offset=False, keys_run=None):
    """dK and dV from the saved output and lse (float64), with the switches the mistakes flip.

    masked: True (columns <= rows), False, or "strict" (columns < rows); sign: −1 flips dS;
    delta: "right", "none", "squares" (dO ∘ dO), "d_output" (dO alone), "axis0" (summed over the block's rows),
    "block" (summed over the block's rows and features); scale_dk: how many times dK is scaled (0, 1, 2);
    query_loop_short: the query loop ends one block early, range(start, L_q − BLOCK_Q, BLOCK_Q);
    whole_query_blocks: it runs L_q // BLOCK_Q blocks; padded: the scale is 1/√BLOCK_D; skip_diagonal (causal):
    the loop starts one query block after the key block's first query; store_at_query_offset: program i stores
    its rows at i · BLOCK_Q instead of i · BLOCK_K; keys_run: the key rows some program ran (a grid rounded down)."""
    q, k, v, o, do = (t.double() for t in (query, key, value, output, d_output))
    scale = padded_scale(query.shape[-1]) if padded else 1 / math.sqrt(query.shape[-1])
    s = q @ k.transpose(1, 2) * scale
    p = torch.exp(s - lse.double()[..., None])
    L_q = query.shape[1]
    rows_end = len(range(0, L_q - block_q, block_q)) * block_q if query_loop_short else \
        L_q // block_q * block_q if whole_query_blocks else None
    visited = _visited(L_q, key.shape[1], block_q, block_k, causal, query.device, rows_end, skip_diagonal)
    if causal:
        later = torch.ones(p.shape[-2:], dtype=torch.bool, device=p.device).triu(0 if masked == "strict" else 1)
        keep = visited & ~later if masked else visited
        p = p.masked_fill(~keep, 0.0)
    else:
        p = p.masked_fill(~visited, 0.0)  # (all visited, but for a query loop one block short)
    d_value = p.transpose(1, 2) @ do
    dp = do @ v.transpose(1, 2)
    D = delta_wrong_axis(d_output, output, block_q) if delta == "axis0" else \
        delta_per_block(d_output, output, block_q) if delta == "block" else \
        {"right": (do * o).sum(-1), "none": torch.zeros_like(lse.double()), "squares": (do * do).sum(-1),
         "d_output": do.sum(-1)}[delta]
    ds = sign * (p * (dp - D[..., None]) if times_p else (dp - D[..., None]).masked_fill(~visited, 0.0))
    d_key = ds.transpose(1, 2) @ q * scale ** scale_dk
    if store_at_query_offset:
        d_key, d_value = (_stored_at_query_offset(t, block_q, block_k) for t in (d_key, d_value))
    if keys_run is not None:  # the key rows no program ran keep the NaN they were allocated with
        d_key[:, keys_run:], d_value[:, keys_run:] = float("nan"), float("nan")
    return d_key.to(key.dtype), d_value.to(value.dtype)


def _stored_at_query_offset(rows, block_q, block_k):
    """What a dK/dV kernel stores when program i writes its BLOCK_K rows at i · BLOCK_Q (masked < L_k): the
    rows no program reaches keep the NaN they were allocated with; where two programs' rows overlap, the
    later program's (the interpreter runs them in order). A program's rows past L_k hold 0 (no key there)."""
    BH, L_k, width = rows.shape
    padded = torch.cat([rows, rows.new_zeros(BH, block_k, width)], dim=1)
    stored = torch.full_like(rows, float("nan"))
    for program in range(-(-L_k // block_k)):
        at = program * block_q
        count = max(0, min(block_k, L_k - at))
        stored[:, at:at + count] = padded[:, program * block_k:program * block_k + count]
    return stored


def _backward_reference(query, key, value, output, lse, d_output, block_q, block_k, causal):
    with torch.no_grad():
        return _dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal)


def _backward(**switches):
    def mistake(query, key, value, output, lse, d_output, block_q, block_k, causal):
        return _dkdv(query, key, value, output, lse, d_output, block_q, block_k, causal, **switches)
    return mistake


register(
    Exercise(
        id="09.backward_dkdv",
        reference=_backward_reference,
        cases=_backward_cases,
        hidden=_backward_hidden,
        forbidden=("torch.autograd.grad", "Tensor.backward", "torch.matmul", "torch.bmm",
                   "torch.einsum", "course_utils.flash_triton.flash_backward",
                   "course_utils.tiled.tiled_backward"),
        mistakes=(
            Mistake(
                "NO_D",
                _backward(delta="none"),
                {
                    "en": "dS = P ∘ dP, without D: the softmax's backward is dS = P ∘ (dP − D), D = rowsum(dO ∘ O) "
                    "per query (the same as rowsum(P ∘ dP), computed from what the forward saved). Load D with "
                    "each query block and subtract it: ds = p * (dp - D[:, None]).",
                    "zh": "写成了 dS = P ∘ dP，少了 D：softmax 的反向传播是 dS = P ∘ (dP − D)，每个查询的 "
                    "D = rowsum(dO ∘ O)（等于 rowsum(P ∘ dP)，但只用前向保存下来的量就能算）。"
                    "随每个查询块读入 D 再减去：ds = p * (dp - D[:, None])。",
                },
            ),
            Mistake(
                "D_WRONG_TENSORS",
                _backward(delta="squares"),
                {
                    "en": "D is computed from the wrong tensors: D = rowsum(dO ∘ O), the output's gradient times the "
                    "output, row by row (d_output * output).sum(-1): not dO with itself.",
                    "zh": "D 用错了张量：D = rowsum(dO ∘ O)，是输出的梯度乘以输出本身，逐行求和 "
                    "(d_output * output).sum(-1)：不是 dO 乘它自己。",
                },
            ),
            Mistake(
                "DS_WITHOUT_P",
                _backward(times_p=False),
                {
                    "en": "dS = dP − D, without the weights: the softmax's backward multiplies by P, "
                    "dS = P ∘ (dP − D), so a key with weight 0 (masked, or far below the others) gets no gradient. "
                    "ds = p * (dp - D[:, None]).",
                    "zh": "写成了 dS = dP − D，少乘了权重：softmax 的反向传播要乘上 P，dS = P ∘ (dP − D)，"
                    "所以权重为 0 的键（被遮住的，或者远小于其他键的）得不到梯度。应为 ds = p * (dp - D[:, None])。",
                },
            ),
            Mistake(
                "DK_UNSCALED",
                _backward(scale_dk=0),
                {
                    "en": "dK misses the scale: S = q kᵀ · scale, so dK = dSᵀ Q · scale (dV is right).",
                    "zh": "dK 少乘了缩放：S = q kᵀ · scale，所以 dK = dSᵀ Q · scale（dV 是对的）。",
                },
            ),
            Mistake(
                "CAUSAL_UNMASKED",
                _backward(masked=False),
                {
                    "en": "With causal=True the query blocks before the key block are skipped, but the recomputed P "
                    "is not masked in the blocks that are visited: the forward gave the keys after a query weight 0, "
                    "so the backward must too, p = tl.where(columns[None, :] <= rows[:, None], p, 0.0).",
                    "zh": "causal=True 时，键块之前的查询块被跳过了，但在访问到的块里，重新算出的 P 没有加掩码："
                    "前向给查询之后的键的权重是 0，反向也必须如此，p = tl.where(columns[None, :] <= rows[:, None], p, 0.0)。",
                },
            ),
            Mistake(
                "D_FROM_D_OUTPUT",
                _backward(delta="d_output"),
                {
                    "en": "D is computed from dO alone, d_output.sum(-1): D = rowsum(dO ∘ O), the output's gradient "
                    "times the output, row by row: (d_output * output).sum(-1).",
                    "zh": "D 只用 dO 算了，d_output.sum(-1)：D = rowsum(dO ∘ O)，是输出的梯度乘以输出本身，逐行求和："
                    "(d_output * output).sum(-1)。",
                },
            ),
            Mistake(
                "DS_SIGN_FLIPPED",
                _backward(sign=-1.0),
                {
                    "en": "dK has the wrong sign (dV is right): dS = P ∘ (dP − D), D subtracted from dP, not dP from "
                    "D: ds = p * (dp - D[:, None]).",
                    "zh": "dK 的符号反了（dV 是对的）：dS = P ∘ (dP − D)，是从 dP 里减去 D，而不是从 D 里减去 dP："
                    "ds = p * (dp - D[:, None])。",
                },
            ),
            Mistake(
                "D_WRONG_AXIS",
                _backward(delta="axis0"),
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
                "QUERY_LOOP_ONE_SHORT",
                _backward(query_loop_short=True),
                {
                    "en": "The loop over the query blocks is one block short: range(start, L_q − BLOCK_Q, BLOCK_Q) "
                    "never reaches the last query block, so its queries add nothing to any dK or dV (with one block "
                    "of queries the loop runs not at all). Loop over range(start, L_q, BLOCK_Q) and mask the last "
                    "block's rows.",
                    "zh": "对查询块的循环少走了一块：range(start, L_q − BLOCK_Q, BLOCK_Q) 永远到不了最后一个查询块，"
                    "所以这一块的查询对 dK 和 dV 都没有贡献（查询只有一块时，循环一次都不执行）。应遍历 "
                    "range(start, L_q, BLOCK_Q)，并给最后一块的行加掩码。",
                },
            ),
            Mistake(
                "D_PER_BLOCK",
                _backward(delta="block"),
                {
                    "en": "D is summed over the whole query block, rows and features, one number for every row: "
                    "D is one number per query row, delta = tl.sum(do * o, axis=1), summed over the features only.",
                    "zh": "D 对整个查询块求了和，行和特征都加了进去，每一行用的都是同一个数：D 是每个查询行一个数，"
                    "只沿特征求和：delta = tl.sum(do * o, axis=1)。",
                },
            ),
            Mistake(
                "DK_SCALED_TWICE",
                _backward(scale_dk=2),
                {
                    "en": "dK is scaled twice, dSᵀ Q · scale²: S = Q Kᵀ · scale, so dK = dSᵀ Q · scale, once (dV is "
                    "right).",
                    "zh": "dK 被缩放了两次，成了 dSᵀ Q · scale²：S = Q Kᵀ · scale，所以 dK = dSᵀ Q · scale，只乘一次"
                    "（dV 是对的）。",
                },
            ),
            Mistake(
                "SCALE_PADDED_D",
                _backward(padded=True),
                {
                    "en": "The scale is 1/√BLOCK_D, the head size rounded up to the block's power of two, not 1/√d of "
                    "the real head: P is recomputed from the wrong scores and dK scaled by the wrong factor. Pass "
                    "1 / math.sqrt(d) from the function.",
                    "zh": "缩放用了 1/√BLOCK_D，即向上取到块的 2 的幂的头维度，而不是真实头维度的 1/√d：P 是用错误的分数重新算的，"
                    "dK 也乘错了因子。应由函数传入 1 / math.sqrt(d)。",
                },
            ),
            Mistake(
                "CAUSAL_IGNORED",
                lambda q, k, v, o, lse, do, bq, bk, causal: _dkdv(q, k, v, o, lse, do, bq, bk, False),
                {
                    "en": "With causal=True the kernel visits every query block and never masks: the recomputed P "
                    "gives the keys after each query the weight the forward never gave them. Start the loop at the "
                    "query block that holds the key block's first key and keep columns[None, :] <= rows[:, None].",
                    "zh": "causal=True 时，核函数访问了所有查询块，而且从不加掩码：重新算出的 P 给了每个查询之后的键权重，"
                    "而前向从来没有给过。循环应从包含键块第一个键的那个查询块开始，并保留 columns[None, :] <= rows[:, None]。",
                },
            ),
            Mistake(
                "DIAGONAL_SKIPPED",
                _backward(skip_diagonal=True),
                {
                    "en": "With causal=True the query loop starts one block too late, after the query block that holds "
                    "the key block's first key: the queries on the diagonal, which see these keys, add nothing. "
                    "Start at (start_k // BLOCK_Q) * BLOCK_Q and mask that block.",
                    "zh": "causal=True 时，查询的循环晚开始了一块，从包含键块第一个键的查询块之后才开始：对角线上那些能看到这些键的查询"
                    "没有贡献。应从 (start_k // BLOCK_Q) * BLOCK_Q 开始，并给这一块加掩码。",
                },
            ),
            Mistake(
                "LAST_QUERY_BLOCK_MISSING",
                _backward(whole_query_blocks=True),
                {
                    "en": "The query loop leaves out the partial last block: L_q // BLOCK_Q blocks, rounded down, so "
                    "the last L_q mod BLOCK_Q queries add nothing to dK and dV. Loop over triton.cdiv(L_q, BLOCK_Q) "
                    "blocks (range(start, L_q, BLOCK_Q)) and mask the last one's rows.",
                    "zh": "查询的循环漏掉了不满的最后一块：L_q // BLOCK_Q 是向下取整的块数，于是最后 L_q mod BLOCK_Q 个查询对 dK 和 "
                    "dV 没有贡献。应遍历 triton.cdiv(L_q, BLOCK_Q) 个块（range(start, L_q, BLOCK_Q)），并给最后一块的行加掩码。",
                },
            ),
            Mistake(
                "GRID_ROUNDED_DOWN",
                lambda q, k, v, o, lse, do, bq, bk, causal: _dkdv(q, k, v, o, lse, do, bq, bk, causal,
                                                                 keys_run=k.shape[1] // bk * bk),
                {
                    "en": "The grid was rounded down, L_k // BLOCK_K programs per batch·head: the partial last block "
                    "of keys gets no program, and its rows of dK and dV keep their NaN. Round up: triton.cdiv(L_k, "
                    "BLOCK_K).",
                    "zh": "网格向下取整了，每个 batch·head 只有 L_k // BLOCK_K 个程序：不满的最后一块键没有程序负责，"
                    "dK 和 dV 的这些行一直是 NaN。应向上取整：triton.cdiv(L_k, BLOCK_K)。",
                },
            ),
            Mistake(
                "STORED_AT_QUERY_OFFSET",
                _backward(store_at_query_offset=True),
                {
                    "en": "dK and dV are stored at the query block's offset, program_id(0) · BLOCK_Q: a program owns the "
                    "BLOCK_K keys from program_id(0) · BLOCK_K, and stores its rows there, columns = start_k + "
                    "tl.arange(0, BLOCK_K). Where BLOCK_Q ≠ BLOCK_K the rows land elsewhere (or nowhere: NaN).",
                    "zh": "dK 和 dV 存到了查询块的偏移 program_id(0) · BLOCK_Q 处：一个程序负责的是从 program_id(0) · BLOCK_K "
                    "开始的 BLOCK_K 个键，也应存到那里，columns = start_k + tl.arange(0, BLOCK_K)。BLOCK_Q ≠ BLOCK_K 时，"
                    "这些行会落到别处（或者哪里都没写：NaN）。",
                },
            ),
            Mistake(
                "DIAGONAL_EXCLUDED",
                _backward(masked="strict"),
                {
                    "en": "The causal mask is columns < rows: the recomputed P drops each query's weight on itself, "
                    "which the forward kept. Keep the keys up to and including the query: columns[None, :] <= "
                    "rows[:, None].",
                    "zh": "因果掩码写成了 columns < rows：重新算出的 P 去掉了每个查询对它自己的权重，而前向是保留了的。"
                    "应保留直到查询本身（含）的键：columns[None, :] <= rows[:, None]。",
                },
            ),
        ),
    )
)
