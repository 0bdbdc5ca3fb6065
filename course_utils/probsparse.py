"""ProbSparse self-attention (Informer, Zhou et al. 2021): attend with the few queries that matter.

Full attention scores every query against every key: O(L_Q · L_K) time and memory. ProbSparse
observes that most queries are "lazy": their softmax row is close to uniform, so their output is
close to the mean of the values. Only a few "active" queries have a peaked row. The paper's query
sparsity measurement M (its Eq. 2) is log-sum-exp minus the mean of a query's scores; what the
algorithm computes is its estimate M̄ = max − mean (Eq. 4; Lemma 1: M̄ ≤ M ≤ M̄ + ln L_K). It

1. samples U = factor · ⌈ln L_K⌉ keys for every query (``sample_keys``) and scores each query
   against its own sample only (``sampled_scores``: (B, H, L_Q, U), never (L_Q, L_K));
2. rates each query by M̄ = max − mean of those scores (``sparsity_measure``; a uniform row has
   M̄ = 0, a peaked one a large M̄);
3. keeps the u = factor · ⌈ln L_Q⌉ queries with the largest M̄ (``select_queries``) and gives only
   them full attention over all keys;
4. gives every other (lazy) query the mean of the values: of all values, or in causal mode the
   cumulative mean of the values up to its own position, so that no query sees the future.

Two implementations of the same algorithm, with the same arguments and results:

- ``prob_sparse_attention_plain`` takes each step the way the official Informer code
  (Informer2020, ``models/attn.py``) and a widely copied re-implementation of it do, to be read:
  it builds every query's sampled keys as a (B, H, L_Q, U, D) tensor (``K_sample``).
- ``prob_sparse_attention`` never builds ``K_sample``: the U scores of each query are a *sampled*
  matrix product (``torch.sparse.sampled_addmm``, written straight into the values of one CSR
  pattern that every batch item and head share), so its extra memory is O(L · U), not
  O(L · U · D); the chosen queries attend through ``F.scaled_dot_product_attention``. Given the
  same sampled indices both choose the same queries and return the same values (up to float
  rounding: the products are summed in another order). ``benchmarks/bench_probsparse.py``
  measures it against that algorithm and against full attention.

Layout: query (B, H, L_Q, D), key (B, H, L_K, D), value (B, H, L_K, D_v), as for
``F.scaled_dot_product_attention``. Both return ``(output, selected)``: output (B, H, L_Q, D_v)
and the indices of the chosen queries, (B, H, u) in increasing position; with
``need_weights=True`` the second result is instead the (B, H, L_Q, L_K) weights every query
effectively used (a lazy row is uniform: its output is the mean of the values it may see).

In causal mode query i samples its keys from positions 0 … i only (the official code samples them
from all L_K positions, so that a query's measure reads later keys), and a lazy query i gets the mean
of v_0 … v_i (the official code gives it their sum, ``V.cumsum(dim=-2)``, which grows with i).

Every public function checks its arguments and fails with an ``ArgumentError`` that names the
argument, what it got and what it needs, in the notebook's language; none can crash the process
(``torch.sparse.sampled_addmm`` does, given more sampled keys per query than there are keys: then
the keys are gathered instead).

Randomness only comes from the ``generator`` argument (a ``torch.Generator``), never from the
global random state: the same generator state gives the same sample, and a call leaves every
other random number of the notebook as it was. ``index`` passes a sample in directly.

``trace`` (a ``Trace``) records every intermediate tensor with its shape, whether it is a view of
another tensor (no memory of its own) and its bytes: the lesson's shape walkthrough. The
algorithm also runs on meta tensors (``walkthrough``), which have shapes but no data, so the
walkthrough of any size costs nothing.
"""

import contextlib
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import validation as check
from .i18n import language, message

# --------------------------------------------------------------------------- argument checks


def _int_tensor(function, argument, value, layout, ndim=None):
    """`value` when it is an int64 tensor (with `ndim` axes, if given); otherwise an ArgumentError."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or (ndim is not None and value.ndim != ndim):
        check.fail(function, argument, check.describe(value),
                   {"en": f"an int64 tensor {layout}", "zh": f"int64 张量 {layout}"})
    return check.dense(function, argument, value)


def _generator(function, generator):
    """`generator` when it is None or a torch.Generator (on any device: ``sample_keys`` draws where
    the generator is and puts the sample where the inputs are)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        check.fail(function, "generator", check.describe(generator),
                   {"en": "None or a torch.Generator", "zh": "None 或 torch.Generator"})
    return generator


def _float_tensor(function, argument, value, layout, ndim=4):
    """`value` when it is a floating-point tensor with `ndim` axes; otherwise an ArgumentError."""
    check.tensor(function, argument, value, min_ndim=ndim, layout=layout)
    if value.ndim != ndim:
        check.fail(function, argument, check.describe(value),
                   {"en": f"a {ndim}-D floating-point tensor {layout}", "zh": f"{ndim} 维浮点张量 {layout}"})
    return value


def _index_values(function, index, length_k, length_q=None, causal=False):
    """Fail unless every entry of `index` (L_Q, U) is a key position in [0, L_K) (in causal mode,
    also at most its own row's position). Reads the index only when it has data."""
    if index.is_meta or index.numel() == 0:
        return
    low, high = torch.aminmax(index)  # one pass over the index
    bad = bool(low < 0 or high >= length_k)
    if causal and not bad:
        bad = bool((index > torch.arange(index.shape[0], device=index.device).unsqueeze(1)).any())
    if bad:
        where = ({"en": "key positions ≤ the query's own", "zh": "不超过该查询自身位置的键位置"} if causal
                 else {"en": f"key positions in [0, {length_k})", "zh": f"[0, {length_k}) 内的键位置"})
        shape = f"({length_q}, U)" if length_q is not None else "(L_Q, U)"
        check.fail(function, "index", check.describe(index),
                   {"en": f"an int64 tensor of shape {shape} holding {where['en']}",
                    "zh": f"形状为 {shape}、取值为{where['zh']}的 int64 张量"})


# --------------------------------------------------------------------------- sizes and sampling


def sample_count(length, factor=5):
    """factor · ⌈ln length⌉, at most ``length``: U for L_K keys, u for L_Q queries."""
    check.positive_int("sample_count", "length", length)
    check.positive_int("sample_count", "factor", factor)
    return min(length, factor * math.ceil(math.log(length))) if length > 1 else length


def sample_keys(length_q, length_k, count, *, causal=False, generator=None, device=None):
    """(length_q, count) int64: for each query, ``count`` key positions drawn uniformly with
    replacement from all ``length_k`` keys, or in causal mode (self-attention: length_q ==
    length_k) from positions 0 … i for query i, so that the measure of query i never reads a
    later key. One sample serves every batch item and head, as in the Informer code.

    Drawing from fewer keys has a price: an early query's sample holds few distinct keys, so its
    max − mean tends to be smaller, and causal mode chooses fewer early queries (lesson 05, section 5).

    The sample is drawn where ``generator`` is (a CPU generator, as the lessons seed, gives the
    same sample on a GPU as on the CPU: the few int64 positions are drawn there and moved), or,
    without one, on ``device``; it is returned on ``device`` (None: torch's default device)."""
    function = "sample_keys"
    for name, value in (("length_q", length_q), ("length_k", length_k), ("count", count)):
        check.whole_number(function, name, value, 1, check.INT64_MAX)  # positions and sizes torch holds
    check.flag(function, "causal", causal)
    if causal and length_q != length_k:
        check.fail(function, "length_k", check.describe(length_k),
                   {"en": f"length_q = {length_q}: causal mode is self-attention",
                    "zh": f"length_q = {length_q}：因果模式用于自注意力"})
    device = check.device(function, "device", device)
    device = device if device is not None else check.default_device()  # as torch.randint
    generator = _generator(function, generator)
    drawn_on = generator.device if generator is not None else device  # a generator draws on its own device
    # (length_q, count) int64, and in causal mode as many float32 draws beside them
    largest = max((("length_q", length_q), ("count", count)), key=lambda pair: pair[1])
    check.fits_in_memory(function, *largest, length_q * count, 12 if causal else 8)
    if not causal:
        return torch.randint(length_k, (length_q, count), generator=generator, device=drawn_on).to(device)
    visible = torch.arange(1, length_q + 1, device=drawn_on).unsqueeze(1)  # query i sees i + 1 keys
    return (torch.rand(length_q, count, generator=generator, device=drawn_on) * visible).long().to(device)


# --------------------------------------------------------------------------- the steps


def sampled_scores(query, key, index):
    """(B, H, L_Q, U): scores[b, h, i, s] = query[b, h, i] · key[b, h, index[i, s]], unscaled.

    query (B, H, L_Q, D) and key (B, H, L_K, D) of one floating dtype; index (L_Q, U) int64, key
    positions in [0, L_K) (repeats allowed), on query's device.

    Only U entries of each row of Q Kᵀ are needed: a sampled dense–dense product, computed by
    ``torch.sparse.sampled_addmm`` straight from Q and K, without gathering the sampled keys. No
    gradient flows through it when query and key need none (the scores only choose queries); when
    they do, for a dtype or device ``sampled_addmm`` lacks, or when a row samples more keys than
    there are (U > L_K: ``sampled_addmm`` would crash the process), the keys are gathered a block of
    queries at a time instead (differentiable, the same values up to rounding).
    """
    function = "sampled_scores"
    _float_tensor(function, "query", query, "(B, H, L_Q, D)")
    _float_tensor(function, "key", key, "(B, H, L_K, D)")
    B, H, L_Q, D = query.shape
    if key.shape[:2] != (B, H) or key.dtype != query.dtype or key.device != query.device:
        check.fail(function, "key", check.describe(key),
                   {"en": f"a tensor (B, H, L_K, D) with (B, H) = {(B, H)}, dtype {query.dtype} and device "
                          f"'{query.device}', like query",
                    "zh": f"形状为 (B, H, L_K, D) 的张量，且 (B, H) = {(B, H)}、类型 {query.dtype}、设备 "
                          f"'{query.device}' 都与 query 一致"})
    check.same_size(function, "key", key, -1, D, {"en": "query's D", "zh": "query 的 D"})
    L_K = key.shape[-2]
    _int_tensor(function, "index", index, f"({L_Q}, U)", ndim=2)
    if index.shape[0] != L_Q or index.shape[1] < 1 or index.device != query.device:
        check.fail(function, "index", check.describe(index),
                   {"en": f"an int64 tensor of shape ({L_Q}, U), U ≥ 1, on query's device '{query.device}'",
                    "zh": f"形状为 ({L_Q}, U)（U ≥ 1）、与 query 同在设备 '{query.device}' 上的 int64 张量"})
    _index_values(function, index, L_K, L_Q)
    U = index.shape[-1]
    if query.is_meta:  # the walkthrough: shapes only, and sampled_addmm has no meta kernel
        return query.new_empty(B, H, L_Q, U)
    if query.numel() == 0 or key.numel() == 0:
        return query.new_zeros(B, H, L_Q, U)
    differentiable = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad)
    supported = query.device.type == "cpu" and query.dtype in (torch.float32, torch.float64)
    if differentiable or not supported or U > L_K:
        return _gathered_scores(query, key, index)
    # One CSR pattern for every (batch, head): row i holds the U sampled columns of query i. The
    # product is written into the pattern's own values (out=pattern): no copy of the pattern, and
    # values start at zero because the kernel adds beta · value (0 · NaN would be NaN).
    rows = torch.arange(0, L_Q * U + 1, U, dtype=index.dtype, device=query.device).expand(B * H, -1)
    columns = index.reshape(1, -1).expand(B * H, -1)  # int64, the index itself: no copy
    values = query.new_zeros(B * H, L_Q * U)
    pattern = _csr_tensor(rows, columns, values, (B * H, L_Q, L_K))
    mat1 = query.reshape(B * H, L_Q, D)
    mat2 = key.reshape(B * H, L_K, D).transpose(-2, -1)
    torch.sparse.sampled_addmm(pattern, mat1, mat2, beta=0.0, out=pattern)
    return values.view(B, H, L_Q, U)


_CSR_WARNING = "Sparse CSR tensor support is in beta state"
_csr_warning_consumed = False


def _csr_tensor(rows, columns, values, size):
    """torch.sparse_csr_tensor, without the warning PyTorch gives (once per process) when the
    first one is made: "Sparse CSR tensor support is in beta state" is not the learner's concern.
    The filter is set only until that first tensor: setting one makes Python show again the
    warnings it had shown once already."""
    global _csr_warning_consumed
    if _csr_warning_consumed:
        return torch.sparse_csr_tensor(rows, columns, values, size, check_invariants=False, device=values.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CSR_WARNING, category=UserWarning)
        tensor = torch.sparse_csr_tensor(rows, columns, values, size, check_invariants=False, device=values.device)
    _csr_warning_consumed = True
    return tensor


def _gathered_scores(query, key, index, block_bytes=2**24):
    """sampled_scores by gathering the sampled keys a block of queries at a time (at most about
    ``block_bytes`` of gathered keys at once): differentiable, any dtype and device."""
    B, H, L_Q, D = query.shape
    U = index.shape[-1]
    block = max(1, block_bytes // max(1, B * H * U * D * query.element_size()))
    pieces = []
    for start in range(0, L_Q, block):
        rows = index[start : start + block]  # (block, U)
        sampled = key[:, :, rows, :]  # (B, H, block, U, D)
        pieces.append((query[:, :, start : start + block].unsqueeze(-2) @ sampled.transpose(-2, -1)).squeeze(-2))
    return torch.cat(pieces, dim=-2) if len(pieces) > 1 else pieces[0]


def sparsity_measure(scores):
    """M̄ = max − mean of each query's (sampled) scores, over the last axis: (..., L_Q, U) -> (..., L_Q).

    The paper's max-mean measurement (Informer, Eq. 4), the estimate of its measure M =
    log-sum-exp − mean (Eq. 2): M̄ ≤ M ≤ M̄ + ln U over the same scores. A query whose scores are
    all alike (a flat softmax row) gets M̄ ≈ 0; one with a few large scores gets a large M̄.
    """
    check.tensor("sparsity_measure", "scores", scores, min_ndim=1, layout="(..., L_Q, U)")
    if scores.shape[-1] == 0:
        check.fail("sparsity_measure", "scores", check.describe(scores),
                   {"en": "at least one score per query on the last axis", "zh": "最后一维上每个查询至少有一个分数"})
    return scores.amax(-1) - scores.sum(-1) / scores.shape[-1]


def select_queries(measure, count):
    """(..., count) int64: the positions of the ``count`` queries with the largest measure (the
    last axis of ``measure``, (..., L_Q)), in increasing position (the order does not change the
    result; increasing is easy to read)."""
    check.tensor("select_queries", "measure", measure, min_ndim=1, layout="(..., L_Q)")
    check.positive_int("select_queries", "count", count)
    if count > measure.shape[-1]:
        check.fail("select_queries", "count", check.describe(count),
                   {"en": f"at most L_Q = {measure.shape[-1]}, the queries there are",
                    "zh": f"不超过 L_Q = {measure.shape[-1]}，即查询的个数"})
    return measure.topk(count, dim=-1).indices.sort(dim=-1).values


def lazy_context(value, length_q, causal=False):
    """What a lazy query gets, (B, H, L_Q, D_v): the mean of all values, or in causal mode the mean
    of the values at positions 0 … i for query i (a cumulative mean; causal mode is
    self-attention: ``length_q`` must be L). value: (B, H, L, D_v), floating, L ≥ 1."""
    function = "lazy_context"
    _float_tensor(function, "value", value, "(B, H, L, D_v)")
    B, H, _, D_v = value.shape  # the result is (B, H, L_Q, D_v), a view when not causal: torch must shape it
    check.whole_number(function, "length_q", length_q, 1, check.INT64_MAX // max(1, B * H * D_v))
    check.flag(function, "causal", causal)
    if value.shape[-2] == 0:
        check.fail(function, "value", check.describe(value), {"en": "at least one position", "zh": "至少一个位置"})
    if causal and length_q != value.shape[-2]:
        check.fail(function, "length_q", check.describe(length_q),
                   {"en": f"value's L = {value.shape[-2]}: causal mode is self-attention",
                    "zh": f"value 的 L = {value.shape[-2]}：因果模式用于自注意力"})
    if causal:
        counts = torch.arange(1, value.shape[-2] + 1, dtype=value.dtype, device=value.device)
        return value.cumsum(-2) / counts.unsqueeze(-1)
    B, H, _, D_v = value.shape
    return value.mean(-2, keepdim=True).expand(B, H, length_q, D_v)


def causal_keep(selected, length_k):
    """(..., u, L_K) bool: True where the selected query at position p may see key j (j ≤ p).
    selected: (..., u) int64 positions."""
    _int_tensor("causal_keep", "selected", selected, "(..., u)")
    check.dense("causal_keep", "selected", selected)
    check.positive_int("causal_keep", "length_k", length_k)
    if selected.device.type == "meta":  # shapes only (lesson 05's walkthrough): nothing allocated, no value to read
        return torch.empty(*selected.shape, length_k, dtype=torch.bool, device="meta")
    # the (..., u, L_K) bools and the positions 0 … L_K − 1 (int64)
    check.fits_in_memory("causal_keep", "length_k", length_k, selected.numel() * length_k + 8 * length_k)
    if selected.numel():  # a position outside 0 … L_K − 1 would keep every key (past the end) or none (negative)
        low, high = torch.stack(torch.aminmax(selected)).tolist()
        if low < 0 or high >= length_k:
            check.fail("causal_keep", "selected", check.describe(selected) + (
                f"（取值 {low} … {high}）" if language() == "zh" else f" (values {low} … {high})"),
                {"en": f"query positions in 0 … {length_k - 1} (length_k = {length_k})",
                 "zh": f"0 … {length_k - 1} 之间的查询位置（length_k = {length_k}）"})
    return torch.arange(length_k, device=selected.device) <= selected.unsqueeze(-1)


def _rows(tensor, selected):
    """tensor[b, h, selected[b, h, r]] for every r: (B, H, L, X) -> (B, H, u, X), a gather."""
    return tensor.gather(-2, selected.unsqueeze(-1).expand(*selected.shape, tensor.shape[-1]))


def _put_rows(context, selected, rows):
    """A copy of ``context`` with rows[b, h, r] at position selected[b, h, r] (autograd-friendly)."""
    return context.scatter(-2, selected.unsqueeze(-1).expand(*selected.shape, rows.shape[-1]), rows)


def _uniform_weights(context_shape, length_k, causal, like):
    """The weights a lazy query effectively uses, (B, H, L_Q, L_K): 1/L_K, or 1/(i+1) on keys ≤ i."""
    B, H, L_Q, _ = context_shape
    if causal:
        keep = torch.ones(L_Q, length_k, dtype=like.dtype, device=like.device).tril()
        weights = keep / keep.sum(-1, keepdim=True)
    else:
        weights = torch.full((L_Q, length_k), 1.0 / length_k, dtype=like.dtype, device=like.device)
    return weights.expand(B, H, L_Q, length_k)


# --------------------------------------------------------------------------- the trace


@dataclass(frozen=True)
class Step:
    """One intermediate of the algorithm.

    ``view``: it shares memory with an input or an earlier step (a view, an expand, a reshape);
    ``bytes``: the memory it allocated (0 for a view); ``logical_bytes``: numel × element size,
    what it would take with memory of its own (K_expand's is huge, its ``bytes`` are 0).
    """

    name: str
    shape: tuple
    dtype: torch.dtype
    view: bool
    bytes: int
    logical_bytes: int


def _storage(tensor):
    # The identity of the memory block behind a tensor. Meta tensors have no data pointer, but they
    # do have a storage object, shared by their views like any tensor's.
    return tensor.untyped_storage()._cdata


class Trace:
    """The steps one call went through, in order. Pass one as ``trace=`` to either implementation."""

    def __init__(self):
        self.steps = []
        self._known = set()  # the storages of the inputs and of every step so far
        # The storages themselves, held while the call runs: a storage freed in mid-call could
        # otherwise be reborn at the same address and pass a new tensor off as a view.
        self._alive = []

    def inputs(self, *tensors):
        """Note the inputs' memory, so that a view of an input is seen as one."""
        for number, tensor in enumerate(tensors):
            if not isinstance(tensor, torch.Tensor):
                check.fail("Trace.inputs", f"tensors[{number}]", check.describe(tensor),
                           {"en": "a tensor", "zh": "张量"})
        for tensor in tensors:
            self._alive.append(tensor.untyped_storage())
            self._known.add(_storage(tensor))

    @contextlib.contextmanager
    def call(self, *inputs):
        """The span of one call: notes its inputs, lets go of its tensors when it ends."""
        self.inputs(*inputs)
        try:
            yield self
        finally:
            self._alive.clear()
            self._known.clear()

    def record(self, name, tensor):
        """Add ``tensor`` as step ``name`` and return it unchanged."""
        if not isinstance(name, str) or not name:
            check.fail("Trace.record", "name", check.describe(name), {"en": "a step's name, a non-empty string",
                                                                      "zh": "步骤名，即非空字符串"})
        if not isinstance(tensor, torch.Tensor):
            check.fail("Trace.record", "tensor", check.describe(tensor), {"en": "a tensor", "zh": "张量"})
        storage = _storage(tensor)
        view = storage in self._known
        self._known.add(storage)
        self._alive.append(tensor.untyped_storage())
        new_bytes = 0 if view else tensor.untyped_storage().nbytes()
        logical = tensor.numel() * tensor.element_size()
        self.steps.append(Step(name, tuple(tensor.shape), tensor.dtype, view, new_bytes, logical))
        return tensor

    def __getitem__(self, name):
        """The step called ``name``; a KeyError that lists the steps there are when none is."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"{name!r}: " + message("l05.trace.no_step", names=", ".join(s.name for s in self.steps) or "-"))

    def __iter__(self):
        return iter(self.steps)

    def __len__(self):
        return len(self.steps)

    @property
    def total_bytes(self):
        """The memory all steps allocated together: an upper bound of the extra memory of a call."""
        return sum(step.bytes for step in self.steps)


class _NoTrace:
    """Stands in for a Trace when none is asked for, so the algorithm reads without `if trace:`."""

    @staticmethod
    def call(*inputs):
        return contextlib.nullcontext()

    @staticmethod
    def record(name, tensor):
        return tensor


# --------------------------------------------------------------------------- validation


def _validate(function, query, key, value, factor, scale, causal, generator, index, need_weights, trace):
    """Check every argument; return (B, H, L_Q, L_K, D, U, u)."""
    check.tensor(function, "query", query, min_ndim=4, layout="(B, H, L_Q, D)")
    if query.ndim != 4:
        check.fail(function, "query", check.describe(query), {"en": "a 4-D tensor (B, H, L_Q, D)", "zh": "4 维张量 (B, H, L_Q, D)"})
    B, H, L_Q, D = query.shape
    for name, tensor, layout in (("key", key, "(B, H, L_K, D)"), ("value", value, "(B, H, L_K, D_v)")):
        check.tensor(function, name, tensor, min_ndim=4, layout=layout)
        if tensor.ndim != 4 or tensor.shape[:2] != (B, H):
            check.fail(
                function,
                name,
                check.describe(tensor),
                {"en": f"a 4-D tensor {layout} with (B, H) = {(B, H)} like query", "zh": f"4 维张量 {layout}，且 (B, H) = {(B, H)} 与 query 一致"},
            )
        if tensor.dtype != query.dtype:
            check.fail(function, name, check.describe(tensor), {"en": f"query's dtype, {query.dtype}", "zh": f"与 query 相同的类型 {query.dtype}"})
        if tensor.device != query.device:
            check.fail(function, name, f"{check.describe(tensor)} on '{tensor.device}'",
                       {"en": f"query's device, '{query.device}'", "zh": f"与 query 相同的设备 '{query.device}'"})
    check.same_size(function, "key", key, -1, D, {"en": "query's D", "zh": "query 的 D"})
    L_K = key.shape[-2]
    check.same_size(function, "value", value, -2, L_K, {"en": "key's L_K", "zh": "key 的 L_K"})
    if L_Q == 0 or L_K == 0:
        check.fail(function, "query" if L_Q == 0 else "key", check.describe(query if L_Q == 0 else key), {"en": "at least one position", "zh": "至少一个位置"})
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
        check.fail(function, "factor", check.describe(factor), {"en": "a positive int (usually 5)", "zh": "正整数（通常为 5）"})
    if D == 0:  # no feature: no score to rank the queries by, and 1/√D has no value
        check.fail(function, "query", check.describe(query), {"en": "at least one feature (D ≥ 1)", "zh": "至少一个特征（D ≥ 1）"})
    check.scale(function, scale, query.dtype, positive=True)  # ∞, NaN or 1e300 in float32: NaN outputs
    check.flag(function, "causal", causal)
    if causal and L_Q != L_K:
        check.fail(
            function,
            "key",
            check.describe(key),
            {"en": f"L_K = L_Q = {L_Q}: causal mode is self-attention", "zh": f"L_K = L_Q = {L_Q}：因果模式用于自注意力"},
        )
    _generator(function, generator)
    check.flag(function, "need_weights", need_weights)
    if need_weights:  # the (B, H, L_Q, L_K) weights every query uses, built whole
        check.attention_scores_fit(function, query, key, alternative=check.NO_WEIGHTS)
    if trace is not None and not isinstance(trace, Trace):
        check.fail(function, "trace", check.describe(trace), {"en": "None or a probsparse.Trace", "zh": "None 或 probsparse.Trace"})
    U, u = sample_count(L_K, factor), sample_count(L_Q, factor)
    if index is not None:
        where = {"en": "key positions ≤ the query's own", "zh": "不超过该查询自身位置的键位置"} if causal else {"en": f"key positions in [0, {L_K})", "zh": f"[0, {L_K}) 内的键位置"}
        if (not isinstance(index, torch.Tensor) or index.dtype != torch.int64 or tuple(index.shape) != (L_Q, U)
                or index.device != query.device):
            check.fail(
                function,
                "index",
                check.describe(index),
                {"en": f"an int64 tensor of shape (L_Q, U) = ({L_Q}, {U}) on query's device holding {where['en']}",
                 "zh": f"形状为 (L_Q, U) = ({L_Q}, {U})、与 query 在同一设备上、取值为{where['zh']}的 int64 张量"},
            )
        check.dense(function, "index", index)
        _index_values(function, index, L_K, L_Q, causal)
    return B, H, L_Q, L_K, D, U, u


# --------------------------------------------------------------------------- the two implementations


def prob_sparse_attention(
    query, key, value, *, factor=5, scale=None, causal=False, generator=None, index=None, need_weights=False, trace=None
):
    """ProbSparse attention without ever gathering the sampled keys. See the module docstring.

    Args:
        query, key, value: (B, H, L_Q, D), (B, H, L_K, D), (B, H, L_K, D_v), one float dtype.
        factor: c in U = c·⌈ln L_K⌉ sampled keys per query and u = c·⌈ln L_Q⌉ chosen queries.
        scale: multiplies the chosen queries' scores; default 1/√D. A positive finite number that
            the dtype can hold (1e300 in float32 would be ∞, every weight NaN).
        causal: self-attention for a decoder: query i sees keys 0 … i only (needs L_Q == L_K).
        generator: the torch.Generator the keys are sampled with (None: the default generator).
        index: (L_Q, U) int64, a sample to use instead of drawing one.
        need_weights: return the (B, H, L_Q, L_K) effective weights instead of the selection.
        trace: a Trace that records every intermediate.

    Returns:
        ``(output, selected)``: (B, H, L_Q, D_v) and the chosen queries (B, H, u), or
        ``(output, weights)`` with need_weights=True.
    """
    _, _, L_Q, L_K, D, U, u = _validate(
        "prob_sparse_attention", query, key, value, factor, scale, causal, generator, index, need_weights, trace
    )
    trace = _NoTrace() if trace is None else trace
    with trace.call(query, key, value):  # the trace keeps this call's tensors alive until it ends
        scale = 1.0 / math.sqrt(D) if scale is None else scale
        if index is None:
            index = sample_keys(L_Q, L_K, U, causal=causal, generator=generator, device=query.device)
        trace.record("index_sample", index)

        with torch.no_grad():  # the selection is a choice, not a function to differentiate
            scores = trace.record("scores_sample", sampled_scores(query, key, index))
            measure = trace.record("M", sparsity_measure(scores))
            selected = trace.record("selected", select_queries(measure, u))

        chosen = trace.record("Q_reduce", _rows(query, selected))
        keep = causal_keep(selected, L_K) if causal else None
        if need_weights:
            scores_top = (chosen @ key.transpose(-2, -1)) * scale
            if keep is not None:
                scores_top = scores_top.masked_fill(~keep, float("-inf"))
            weights_top = trace.record("weights_top", scores_top.softmax(-1))
            attended = weights_top @ value
        else:
            attended = F.scaled_dot_product_attention(chosen, key, value, attn_mask=keep, scale=scale)
        trace.record("attended", attended)
        context = trace.record("context_init", lazy_context(value, L_Q, causal))
        output = trace.record("context", _put_rows(context, selected, attended))
        if not need_weights:
            return output, selected
        weights = _put_rows(_uniform_weights(output.shape, L_K, causal, value), selected, weights_top)
        return output, weights


def prob_sparse_attention_plain(
    query, key, value, *, factor=5, scale=None, causal=False, generator=None, index=None, need_weights=False, trace=None
):
    """ProbSparse attention step by step, the way the Informer ProbSparse code takes the steps.

    The same arguments and results as ``prob_sparse_attention``; the same sample gives the same
    selection. It gathers every query's U sampled keys into a (B, H, L_Q, U, D) tensor first,
    which is easy to read and costly: the walkthrough shows how costly.
    """
    B, H, L_Q, L_K, D, U, u = _validate(
        "prob_sparse_attention_plain", query, key, value, factor, scale, causal, generator, index, need_weights, trace
    )
    trace = _NoTrace() if trace is None else trace
    with trace.call(query, key, value):  # the trace keeps this call's tensors alive until it ends
        scale = 1.0 / math.sqrt(D) if scale is None else scale
        if index is None:
            index = sample_keys(L_Q, L_K, U, causal=causal, generator=generator, device=query.device)

        # 1. Every query's own sample of keys. K_expand repeats K once per query without copying (a
        #    view with stride 0 on the new axis); indexing it with (query, sample) pairs copies.
        K_expand = trace.record("K_expand", key.unsqueeze(-3).expand(B, H, L_Q, L_K, D))
        trace.record("index_sample", index)
        query_rows = torch.arange(L_Q, device=query.device).unsqueeze(1)  # (L_Q, 1) pairs with (L_Q, U)
        with torch.no_grad():
            K_sample = trace.record("K_sample", K_expand[:, :, query_rows, index, :])  # (B, H, L_Q, U, D)
            # 2. Each query against its own sample only: (1, D) @ (D, U) per query.
            scores = trace.record("scores_sample", (query.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2))
            # 3. The sparsity measure: max − mean over the U sampled scores (the mean divides by U).
            measure = trace.record("M", sparsity_measure(scores))
            # 4. The u most active queries.
            selected = trace.record("selected", measure.topk(u, dim=-1).indices.sort(dim=-1).values)

        # 5. Full, scaled attention for the chosen queries only.
        batch = torch.arange(B, device=query.device).view(B, 1, 1)
        head = torch.arange(H, device=query.device).view(1, H, 1)
        Q_reduce = trace.record("Q_reduce", query[batch, head, selected])  # (B, H, u, D)
        scores_top = trace.record("scores_top", Q_reduce @ key.transpose(-2, -1) * scale)  # (B, H, u, L_K)
        if causal:  # the chosen query at position p sees keys 0 … p only
            scores_top = scores_top.masked_fill(~causal_keep(selected, L_K), float("-inf"))
        weights_top = trace.record("weights_top", torch.softmax(scores_top, dim=-1))
        attended = trace.record("attended", weights_top @ value)  # (B, H, u, D_v)

        # 6. Lazy queries get the mean of the values they may see; the chosen rows are then replaced.
        if causal:
            V_mean = trace.record("V_cummean", value.cumsum(-2) / torch.arange(1, L_K + 1, dtype=value.dtype, device=value.device).unsqueeze(-1))
            context = V_mean.clone()
        else:
            V_mean = trace.record("V_mean", value.mean(-2))  # (B, H, D_v)
            context = V_mean.unsqueeze(-2).expand(B, H, L_Q, value.shape[-1]).clone()
        trace.record("context_init", context)
        context = context.index_put((batch, head, selected), attended)  # out of place: autograd-friendly
        trace.record("context", context)
        if not need_weights:
            return context, selected
        weights = _uniform_weights(context.shape, L_K, causal, value).clone()
        weights[batch, head, selected] = weights_top
        return context, weights


# --------------------------------------------------------------------------- the walkthrough


def walkthrough(batch=32, heads=8, length=96, dim=64, factor=5, *, fast=False, causal=False):
    """The Trace of one call at any size, computed on meta tensors: shapes and bytes, no data, no
    time. The defaults are the sizes of the Informer ProbSparse code's own printout."""
    sizes = {"batch": batch, "heads": heads, "length": length, "dim": dim, "factor": factor}
    for name, value in sizes.items():
        check.positive_int("walkthrough", name, value)
    # meta tensors hold no data, but their shapes are int64: K_expand, (B, H, L, L, D), the largest
    largest = max(("batch", "heads", "length", "dim"), key=sizes.get)
    if batch * heads * length * length * dim > check.INT64_MAX:
        check.fail("walkthrough", largest, check.describe(sizes[largest]),
                   {"en": f"sizes whose largest tensor, (B, H, L, L, D), torch can shape: B·H·L²·D ≤ 2**63 − 1, "
                          f"not {batch * heads * length * length * dim:,}",
                    "zh": f"最大的张量 (B, H, L, L, D) 能被 torch 表示的大小：B·H·L²·D ≤ 2**63 − 1，"
                          f"而不是 {batch * heads * length * length * dim:,}"})
    check.flag("walkthrough", "fast", fast)
    check.flag("walkthrough", "causal", causal)
    q, k, v = (torch.empty(batch, heads, length, dim, device="meta") for _ in range(3))
    U = sample_count(length, factor)
    index = torch.empty(length, U, dtype=torch.int64, device="meta")
    trace = Trace()
    implementation = prob_sparse_attention if fast else prob_sparse_attention_plain
    implementation(q, k, v, factor=factor, causal=causal, index=index, trace=trace)
    return trace
