"""Experiments lesson 05 runs on ProbSparse: the inputs, the measures and the sweeps behind its
"when is it accurate" plots, its spot-the-bug symptoms and its look at a trained model.

The lesson's notebook calls these functions once, with one generator; ``tests/test_lesson05_facts.py``
calls them with many, and proves that every threshold the notebook states holds on all of them.

Names follow the Informer paper: a query's sparsity measurement M (Eq. 2) is the log-sum-exp of its
scores minus their mean; ProbSparse ranks queries by its estimate M̄ = max − mean (Eq. 4), computed
from a sample of keys. ``exact_measure`` is M̄ over *all* keys, the quantity the sample estimates.

Inputs (layout (B, H, L, D), like ``course_utils.probsparse``):

- ``random_inputs``: queries, keys and values drawn from N(0, 1). With D = 64 a query's scores
  q·k/√D have a spread of about 1 here, so *every* row of the softmax is uneven: no query is lazy,
  none stands out.
- ``few_dominant_queries``: most queries short (N(0, 0.1²) features: their softmax row is nearly
  uniform, they are lazy), a few long ones (N(0, 3²): a peaked row, active). Dominance by length.
- ``aligned_queries``: every query of the same length; the keys come in groups, a few queries
  point at a group (dominant: their row piles onto it), more point away from one (their row
  spreads over the other groups), the rest point where the keys do not differ (lazy). Dominance
  by direction, which the widely copied re-implementation's einsum cannot see.
- ``with_shared_feature`` and ``add_offset``: keys that share a common offset, as a key
  projection's bias gives.

Measures: ``exact_measure``, ``most_active``, ``recall``, ``overlap``, ``relative_error``,
``rows``; ``early_share`` (where the chosen queries sit); ``trained_attention_rows`` (M̄ of every
row of a trained ``seq2seq.Reverser``'s attention).

Everything random comes from the ``generator`` argument, never from the global random state. Every
function checks its arguments and names a bad one (``course_utils.validation``).
"""

import math

import torch
import torch.nn.functional as F

from . import probsparse
from . import validation as check

#: Feature scale of lazy and of active queries in ``few_dominant_queries``.
LAZY_SCALE, ACTIVE_SCALE = 0.1, 3.0


# --------------------------------------------------------------------------- argument checks


def _generator(function, generator):
    if not isinstance(generator, torch.Generator):
        check.fail(function, "generator", check.describe(generator), {"en": "a torch.Generator", "zh": "torch.Generator"})
    return generator


def _sizes(function, **sizes):
    for name, value in sizes.items():
        check.positive_int(function, name, value)


def _query_key(function, query, key):
    """Check (B, H, L_Q, D) and (B, H, L_K, D) floating tensors of one dtype and device, L ≥ 1."""
    for name, value, layout in (("query", query, "(B, H, L_Q, D)"), ("key", key, "(B, H, L_K, D)")):
        check.tensor(function, name, value, min_ndim=4, layout=layout)
        if value.ndim != 4 or value.shape[-2] == 0 or value.is_meta:
            check.fail(function, name, check.describe(value),
                       {"en": f"a 4-D floating-point tensor {layout} with data and at least one position",
                        "zh": f"有数据、至少一个位置的 4 维浮点张量 {layout}"})
    B, H, _, D = query.shape
    if key.shape[:2] != (B, H) or key.shape[-1] != D or key.dtype != query.dtype or key.device != query.device:
        check.fail(function, "key", check.describe(key),
                   {"en": f"(B, H) = {(B, H)}, D = {D}, dtype and device like query's",
                    "zh": f"(B, H) = {(B, H)}、D = {D}，类型和设备都与 query 一致"})


def _positions(function, argument, value, length=None):
    """Check an int64 tensor of positions (B, H, n), n ≥ 1, each in [0, length) when given."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.ndim != 3 or value.shape[-1] == 0:
        check.fail(function, argument, check.describe(value),
                   {"en": "an int64 tensor of positions (B, H, n), n ≥ 1", "zh": "位置组成的 int64 张量 (B, H, n)，n ≥ 1"})
    if length is not None and value.numel() and not value.is_meta and bool((value < 0).any() or (value >= length).any()):
        check.fail(function, argument, check.describe(value),
                   {"en": f"positions in [0, {length})", "zh": f"[0, {length}) 内的位置"})


def _count(function, argument, value, most):
    check.positive_int(function, argument, value)
    if value > most:
        check.fail(function, argument, check.describe(value), {"en": f"at most {most}", "zh": f"不超过 {most}"})


def _callable(function, argument, value):
    if not callable(value):
        check.fail(function, argument, check.describe(value), {"en": "a function", "zh": "函数"})


def _numbers(function, argument, value, positive=True, at_least=1):
    """A list of real numbers (positive ones when asked), at least `at_least` of them."""
    ok = isinstance(value, (list, tuple)) and len(value) >= at_least and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and (x > 0 or not positive)
        for x in value)
    if not ok:
        kind = {"en": "positive", "zh": "正"} if positive else {"en": "finite", "zh": "有限"}
        check.fail(function, argument, check.describe(value),
                   {"en": f"a list of at least {at_least} {kind['en']} numbers",
                    "zh": f"至少 {at_least} 个{kind['zh']}数组成的列表"})
    return list(value)


# --------------------------------------------------------------------------- inputs


def random_inputs(batch, heads, length, dim, *, generator):
    """(query, key, value), each (B, H, L, D) with N(0, 1) entries."""
    _sizes("random_inputs", batch=batch, heads=heads, length=length, dim=dim)
    _generator("random_inputs", generator)
    return tuple(torch.randn(batch, heads, length, dim, generator=generator) for _ in range(3))


def few_dominant_queries(batch, heads, length, dim, *, active=10, generator):
    """(query, key, value, positions): random keys and values; in each (batch, head), ``active``
    queries at random positions are long (features N(0, 3²)) and all the others short (N(0, 0.1²)).

    positions: (B, H, active) int64, the positions of the long queries (not sorted).
    """
    _sizes("few_dominant_queries", batch=batch, heads=heads, length=length, dim=dim)
    _count("few_dominant_queries", "active", active, length)
    query, key, value = random_inputs(batch, heads, length, dim, generator=generator)
    query = query * LAZY_SCALE
    positions = torch.rand(batch, heads, length, generator=generator).argsort(-1)[..., :active]
    long_rows = ACTIVE_SCALE * torch.randn(batch, heads, active, dim, generator=generator)
    query = query.scatter(-2, positions.unsqueeze(-1).expand(-1, -1, -1, dim), long_rows)
    return query, key, value, positions


def aligned_queries(batch, heads, length, dim, *, active=10, averse=100, groups=8, size=4.0, generator):
    """(query, key, value, positions): a few queries dominate by their direction, not their length.

    In each (batch, head): every key belongs to one of ``groups`` groups, ``key = √D · c_g + noise``,
    where the groups' directions c_g are at right angles to each other and lie in the first D/2
    features, and the noise is N(0, 0.25²) in every feature. Every query has the same length
    ``size``:

    - ``active`` queries point at a group (q = size · c_g): their softmax row piles onto that
      group's keys (1/groups of them), the truly dominant queries;
    - ``averse`` queries point away from one (q = −size · c_g): their row avoids that group and
      spreads evenly over the others;
    - every other query points in a random direction of the last D/2 features, where the keys only
      differ by their noise: a nearly uniform row, lazy.

    An active and an averse query have scores that spread equally widely over the keys; only the
    sign tells them apart. positions: (B, H, active) int64, the active queries' positions.
    D must be even, with at least ``groups`` features in each half.
    """
    function = "aligned_queries"
    _sizes(function, batch=batch, heads=heads, length=length, dim=dim, groups=groups)
    _generator(function, generator)
    if dim % 2 or dim // 2 < groups:
        check.fail(function, "dim", check.describe(dim),
                   {"en": f"an even number with at least groups = {groups} features in each half",
                    "zh": f"偶数，且每一半至少有 groups = {groups} 个特征"})
    _count(function, "active", active, length)
    if not isinstance(averse, int) or isinstance(averse, bool) or not 0 <= averse <= length - active:
        check.fail(function, "averse", check.describe(averse),
                   {"en": f"an int from 0 to length − active = {length - active}",
                    "zh": f"0 到 length − active = {length - active} 之间的整数"})
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 < size < math.inf:
        check.fail(function, "size", check.describe(size), {"en": "a positive number", "zh": "正数"})
    B, H, L, D, half = batch, heads, length, dim, dim // 2
    # orthonormal group directions in the first half of the features: (B, H, groups, half)
    directions = torch.linalg.qr(torch.randn(B, H, half, groups, generator=generator)).Q.transpose(-2, -1)
    centres = torch.zeros(B, H, groups, D)
    centres[..., :half] = directions
    group = torch.randint(groups, (B, H, L), generator=generator)  # each key's group
    key = math.sqrt(D) * centres.gather(-2, group.unsqueeze(-1).expand(-1, -1, -1, D))
    key = key + 0.25 * torch.randn(B, H, L, D, generator=generator)
    value = torch.randn(B, H, L, D, generator=generator)
    query = torch.zeros(B, H, L, D)  # lazy: a random direction among the last half of the features
    query[..., half:] = torch.randn(B, H, L, D - half, generator=generator)
    query = query / query.norm(dim=-1, keepdim=True)
    chosen = active + averse
    positions = torch.rand(B, H, L, generator=generator).argsort(-1)[..., :chosen]
    pointed = centres.gather(-2, torch.randint(groups, (B, H, chosen), generator=generator).unsqueeze(-1).expand(-1, -1, -1, D))
    sign = torch.cat([torch.ones(active), -torch.ones(averse)]).view(1, 1, chosen, 1)
    query = query.scatter(-2, positions.unsqueeze(-1).expand(-1, -1, -1, D), sign * pointed)
    return size * query, key, value, positions[..., :active]


def with_shared_feature(query, key, *, generator):
    """(query, key) made ready for a common key offset: the last feature becomes a shared one.

    Every key's last feature is set to 0 (``add_offset`` then puts the offset there), and every
    query's to a random N(0, 1) number of its own: how strongly that query reads the shared
    feature, drawn the same way for active and for lazy queries. The other D − 1 features, which
    decide how peaked each row is, stay as they were.
    """
    _query_key("with_shared_feature", query, key)
    _generator("with_shared_feature", generator)
    query, key = query.clone(), key.clone()
    query[..., -1] = torch.randn(query.shape[:-1], generator=generator, dtype=query.dtype)
    key[..., -1] = 0.0
    return query, key


def add_offset(key, offset):
    """``key`` with the vector b = (0, …, 0, offset) added to every key (see ``with_shared_feature``).

    Query i's score with every key then rises by the same amount, query[i, -1] · offset: a
    constant per query, which changes neither its softmax row nor max − mean of its scores.
    """
    check.tensor("add_offset", "key", key, min_ndim=1, layout="(..., D)")
    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not math.isfinite(offset):
        check.fail("add_offset", "offset", check.describe(offset), {"en": "a finite number", "zh": "有限的数"})
    shift = torch.zeros(key.shape[-1], dtype=key.dtype, device=key.device)
    if key.shape[-1]:
        shift[-1] = offset
    return key + shift


# --------------------------------------------------------------------------- measures


def exact_measure(query, key, causal=False):
    """(B, H, L_Q): M̄ = max − mean of each query's unscaled scores q·k over *all* L_K keys (in
    causal mode over keys 0 … i for query i, which needs L_Q = L_K): the quantity the sampled
    measure estimates."""
    _query_key("exact_measure", query, key)
    check.attention_scores_fit("exact_measure", query, key)  # it builds the (B, H, L_Q, L_K) scores whole
    check.flag("exact_measure", "causal", causal)
    keep = None
    if causal:
        if query.shape[-2] != key.shape[-2]:
            check.fail("exact_measure", "key", check.describe(key),
                       {"en": "L_K = L_Q: causal mode is self-attention", "zh": "L_K = L_Q：因果模式用于自注意力"})
        keep = probsparse.causal_keep(torch.arange(query.shape[-2], device=query.device), key.shape[-2])
    return _exact_from(query @ key.transpose(-2, -1), keep)  # (B, H, L_Q, L_K) scores first


def _exact_from(all_scores, keep=None):
    """M̄ from the full (B, H, L_Q, L_K) score matrix, when it is already there (over the keys
    ``keep`` (L_Q, L_K) allows, when given)."""
    if keep is None:
        return all_scores.amax(-1) - all_scores.mean(-1)
    top = all_scores.masked_fill(~keep, -math.inf).amax(-1)
    return top - (all_scores * keep).sum(-1) / keep.sum(-1)


def most_active(query, key, count):
    """(B, H, count) int64: the positions of the ``count`` queries with the largest exact M̄."""
    _query_key("most_active", query, key)
    _count("most_active", "count", count, query.shape[-2])
    return exact_measure(query, key).topk(count, dim=-1).indices


def recall(chosen, truth):
    """The fraction of the positions in ``truth`` (B, H, n) that are among ``chosen`` (B, H, u),
    averaged over batch and heads: a float in [0, 1]."""
    _positions("recall", "chosen", chosen)
    _positions("recall", "truth", truth)
    if chosen.shape[:2] != truth.shape[:2]:
        check.fail("recall", "truth", check.describe(truth),
                   {"en": f"(B, H) = {tuple(chosen.shape[:2])} like chosen", "zh": f"(B, H) = {tuple(chosen.shape[:2])}，与 chosen 一致"})
    found = (truth.unsqueeze(-1) == chosen.unsqueeze(-2)).any(-1)  # (B, H, n)
    return found.float().mean().item()


def overlap(chosen, intended):
    """The fraction of ``intended`` (B, H, u) that ``chosen`` (B, H, u) also holds (``recall``
    under the name that fits two selections of the same size)."""
    return recall(chosen, intended)


def relative_error(output, reference):
    """‖output − reference‖ / ‖reference‖ over the whole tensor: 0 is exact; replacing every
    output by the mean of the values gives about 0.8 on random inputs."""
    for name, value in (("output", output), ("reference", reference)):
        check.tensor("relative_error", name, value, min_ndim=0)
        if value.is_meta:
            check.fail("relative_error", name, check.describe(value), {"en": "a tensor with data", "zh": "有数据的张量"})
    if output.shape != reference.shape:
        check.fail("relative_error", "output", check.describe(output),
                   {"en": f"reference's shape {tuple(reference.shape)}", "zh": f"与 reference 相同的形状 {tuple(reference.shape)}"})
    return ((output - reference).double().norm() / reference.double().norm()).item()


def rows(tensor, positions):
    """tensor[b, h, positions[b, h, r]] for every r: (B, H, L, X) -> (B, H, n, X)."""
    check.tensor("rows", "tensor", tensor, min_ndim=4, layout="(B, H, L, X)", floating=False)
    _positions("rows", "positions", positions, tensor.shape[-2])
    if tensor.ndim != 4 or positions.shape[:2] != tensor.shape[:2]:
        check.fail("rows", "positions", check.describe(positions),
                   {"en": f"(B, H) = {tuple(tensor.shape[:2])} like a 4-D tensor", "zh": f"(B, H) = {tuple(tensor.shape[:2])}，与 4 维的 tensor 一致"})
    return tensor.gather(-2, positions.unsqueeze(-1).expand(*positions.shape, tensor.shape[-1]))


# --------------------------------------------------------------------------- choosing queries


def _sample(function, query, key, index):
    """Check ``index`` (L_Q, U) int64 against the keys: every entry a key position."""
    L_Q, L_K = query.shape[-2], key.shape[-2]
    if (not isinstance(index, torch.Tensor) or index.dtype != torch.int64 or index.ndim != 2
            or index.shape[0] != L_Q or index.shape[1] == 0 or index.device != query.device):
        check.fail(function, "index", check.describe(index),
                   {"en": f"an int64 tensor ({L_Q}, U), U ≥ 1, on query's device", "zh": f"与 query 同设备的 int64 张量 ({L_Q}, U)，U ≥ 1"})
    if bool((index < 0).any() or (index >= L_K).any()):
        check.fail(function, "index", check.describe(index),
                   {"en": f"key positions in [0, {L_K})", "zh": f"[0, {L_K}) 内的键位置"})


def chosen_by(query, key, index, count, *, scores=None, measure=probsparse.sparsity_measure):
    """(B, H, count): the queries ProbSparse's steps choose from the sample ``index`` (L_Q, U).

    Both steps can be swapped for another version to see what it changes: ``scores(query,
    K_sample)`` computes the (B, H, L_Q, U) sampled scores from the gathered keys K_sample
    (B, H, L_Q, U, D) (default: ``probsparse.sampled_scores``), and ``measure(scores)`` rates each
    query (default: M̄ = max − mean, ``probsparse.sparsity_measure``).
    """
    _query_key("chosen_by", query, key)
    _sample("chosen_by", query, key, index)
    _count("chosen_by", "count", count, query.shape[-2])
    if scores is not None:
        _callable("chosen_by", "scores", scores)
    _callable("chosen_by", "measure", measure)
    if scores is None:
        sampled = probsparse.sampled_scores(query, key, index)
    else:
        sampled = scores(query, key[:, :, index])  # K_sample: (B, H, L_Q, U, D)
    return probsparse.select_queries(measure(sampled), count)


def attend_chosen(query, key, value, selected):
    """ProbSparse's output (B, H, L_Q, D_v) for a given choice of queries ``selected`` (B, H, u):
    full scaled attention for those, the mean of all values for every other query."""
    _query_key("attend_chosen", query, key)
    check.tensor("attend_chosen", "value", value, min_ndim=4, layout="(B, H, L_K, D_v)")
    if value.ndim != 4 or value.shape[:3] != key.shape[:3] or value.dtype != key.dtype:
        check.fail("attend_chosen", "value", check.describe(value),
                   {"en": f"(B, H, L_K) = {tuple(key.shape[:3])} and dtype like key's",
                    "zh": f"(B, H, L_K) = {tuple(key.shape[:3])}，类型与 key 一致"})
    _positions("attend_chosen", "selected", selected, query.shape[-2])
    if selected.shape[:2] != query.shape[:2]:
        check.fail("attend_chosen", "selected", check.describe(selected),
                   {"en": f"(B, H) = {tuple(query.shape[:2])} like query", "zh": f"(B, H) = {tuple(query.shape[:2])}，与 query 一致"})
    attended = F.scaled_dot_product_attention(rows(query, selected), key, value)  # (B, H, u, D_v)
    context = probsparse.lazy_context(value, query.shape[-2])
    return context.scatter(-2, selected.unsqueeze(-1).expand(*selected.shape, value.shape[-1]), attended)


def early_share(query, key, *, causal, generator, factor=5):
    """The share of the chosen queries (u = factor·⌈ln L⌉ per (batch item, head), from a sample of
    U = factor·⌈ln L⌉ keys per query drawn with ``generator``) that sit in the first quarter of the
    sequence. Self-attention (L_Q = L_K = L). In causal mode query i samples keys 0 … i only."""
    _query_key("early_share", query, key)
    check.flag("early_share", "causal", causal)
    _generator("early_share", generator)
    check.positive_int("early_share", "factor", factor)
    L = query.shape[-2]
    if key.shape[-2] != L:
        check.fail("early_share", "key", check.describe(key), {"en": f"L_K = L_Q = {L}", "zh": f"L_K = L_Q = {L}"})
    U = u = probsparse.sample_count(L, factor)
    index = probsparse.sample_keys(L, L, U, causal=causal, generator=generator, device=query.device)
    selected = probsparse.select_queries(probsparse.sparsity_measure(probsparse.sampled_scores(query, key, index)), u)
    return (selected < L / 4).double().mean().item()


def _sampled_from(all_scores, index):
    """The sampled scores (B, H, L_Q, U), read off the full (B, H, L_Q, L_K) score matrix: the
    same numbers ``probsparse.sampled_scores`` computes, cheaper when the full matrix is there."""
    B, H, L_Q, _ = all_scores.shape
    return all_scores.gather(-1, index.expand(B, H, L_Q, index.shape[-1]))


# --------------------------------------------------------------------------- the experiments


def accuracy_by_length(lengths, *, batch=1, heads=8, dim=64, generator):
    """How close ProbSparse's output is to full attention's, as the length grows.

    For each length, on random inputs and on inputs with a few dominant queries (10 per head):
    the relative error of ProbSparse (default factor 5, sampled with ``generator``) and of the
    mean of the values given to every query, both against ``F.scaled_dot_product_attention``.

    Returns {"random": {"probsparse": [...], "mean": [...]}, "dominant": {...}}, one number per
    length.
    """
    if not isinstance(lengths, (list, tuple)) or not lengths or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 10 for n in lengths):
        check.fail("accuracy_by_length", "lengths", check.describe(lengths),
                   {"en": "a list of int lengths of at least 10 (10 dominant queries each)",
                    "zh": "由至少为 10 的整数长度组成的列表（每个长度含 10 个主导查询）"})
    _sizes("accuracy_by_length", batch=batch, heads=heads, dim=dim)
    _generator("accuracy_by_length", generator)
    found = {kind: {"probsparse": [], "mean": []} for kind in ("random", "dominant")}
    for length in lengths:
        inputs = {
            "random": random_inputs(batch, heads, length, dim, generator=generator),
            "dominant": few_dominant_queries(batch, heads, length, dim, generator=generator)[:3],
        }
        for kind, (query, key, value) in inputs.items():
            full = F.scaled_dot_product_attention(query, key, value)
            sparse, _ = probsparse.prob_sparse_attention(query, key, value, generator=generator)
            mean = probsparse.lazy_context(value, length)
            found[kind]["probsparse"].append(relative_error(sparse, full))
            found[kind]["mean"].append(relative_error(mean, full))
    return found


def recall_by_sample_size(query, key, factors, *, truth_count=10, factor=5, generator):
    """Recall of the ``truth_count`` truly most active queries (by the exact M̄) among the
    u = factor·⌈ln L_Q⌉ queries chosen, when each query samples U = f·⌈ln L_K⌉ keys, for each f in
    ``factors`` (U is capped at L_K; the keys are drawn with replacement, so even U = L_K misses
    some). Returns ([U for each f], [recall for each f])."""
    _query_key("recall_by_sample_size", query, key)
    check.attention_scores_fit("recall_by_sample_size", query, key)  # it builds the (B, H, L_Q, L_K) scores whole
    factors = _numbers("recall_by_sample_size", "factors", factors)
    for f in factors:
        check.positive_int("recall_by_sample_size", "factors", f)
    L_Q, L_K = query.shape[-2], key.shape[-2]
    _count("recall_by_sample_size", "truth_count", truth_count, L_Q)
    check.positive_int("recall_by_sample_size", "factor", factor)
    _generator("recall_by_sample_size", generator)
    all_scores = query @ key.transpose(-2, -1)
    truth = _exact_from(all_scores).topk(truth_count, dim=-1).indices
    count = probsparse.sample_count(L_Q, factor)
    sizes, recalls = [], []
    for f in factors:
        size = probsparse.sample_count(L_K, f)
        index = probsparse.sample_keys(L_Q, L_K, size, generator=generator, device=query.device)
        measure = probsparse.sparsity_measure(_sampled_from(all_scores, index))
        sizes.append(size)
        recalls.append(recall(probsparse.select_queries(measure, count), truth))
    return sizes, recalls


def recall_by_offset(query, key, offsets, measures, *, truth_count=10, factor=5, generator):
    """Recall of the ``truth_count`` truly most active queries as a common key offset grows.

    ``query`` and ``key`` come from ``with_shared_feature``; for each offset the keys get
    ``add_offset(key, offset)``. One sample of keys (default factor) serves every offset and
    every measure, so only the offset and the measure change. ``measures`` is {name:
    measure(sampled_scores) -> (B, H, L_Q)}. Returns {name: [recall for each offset]}.
    """
    _query_key("recall_by_offset", query, key)
    check.attention_scores_fit("recall_by_offset", query, key)  # it builds the (B, H, L_Q, L_K) scores whole
    offsets = _numbers("recall_by_offset", "offsets", offsets, positive=False)
    if not isinstance(measures, dict) or not measures or not all(callable(m) for m in measures.values()):
        check.fail("recall_by_offset", "measures", check.describe(measures),
                   {"en": "a non-empty dict {name: measure function}", "zh": "非空字典 {名字: 度量函数}"})
    L_Q, L_K = query.shape[-2], key.shape[-2]
    _count("recall_by_offset", "truth_count", truth_count, L_Q)
    check.positive_int("recall_by_offset", "factor", factor)
    _generator("recall_by_offset", generator)
    count = probsparse.sample_count(L_Q, factor)
    index = probsparse.sample_keys(L_Q, L_K, probsparse.sample_count(L_K, factor), generator=generator,
                                   device=query.device)
    found = {name: [] for name in measures}
    for offset in offsets:
        shifted = add_offset(key, offset)
        all_scores = query @ shifted.transpose(-2, -1)
        truth = _exact_from(all_scores).topk(truth_count, dim=-1).indices
        sampled = _sampled_from(all_scores, index)
        for name, measure in measures.items():
            found[name].append(recall(probsparse.select_queries(measure(sampled), count), truth))
    return found


# --------------------------------------------------------------------------- a trained model

#: The attentions of a ``seq2seq.Reverser`` that ``trained_attention_rows`` reads, by name.
ATTENTIONS = ("encoder_self", "decoder_self", "cross")


def trained_attention_rows(model, batch):
    """Every row of every attention head of a trained ``seq2seq.Reverser`` on ``batch`` (a
    ``seq2seq.Batch``): {name: (measure, peak)} for name in ``ATTENTIONS``, each (R,) float64 over
    the R rows of real (not padding) queries that may see at least two keys.

    measure: M̄ = max − mean of the row's scaled scores q·k/√d over the keys the query may see
    (not padding; in the decoder's self-attention, not later positions either); peak: the row's
    largest softmax weight times n, the number of keys it may see (1: a uniform row, n: all the
    weight on one key). The queries and keys are read off the projections by forward hooks; the
    model runs once, in inference mode, on the teacher-forced batch.
    """
    from . import seq2seq  # lesson 06's model; imported here, where it is used

    if not isinstance(model, seq2seq.Reverser):
        check.fail("trained_attention_rows", "model", check.describe(model),
                   {"en": "a seq2seq.Reverser", "zh": "seq2seq.Reverser"})
    if not isinstance(batch, seq2seq.Batch):
        check.fail("trained_attention_rows", "batch", check.describe(batch),
                   {"en": "a seq2seq.Batch", "zh": "seq2seq.Batch"})
    modules = {"encoder_self": [layer.self_attn for layer in model.encoder],
               "decoder_self": [layer.self_attn for layer in model.decoder],
               "cross": [layer.cross_attn for layer in model.decoder]}
    caught, hooks = {name: [] for name in modules}, []
    for name, attentions in modules.items():
        for attention in attentions:
            pair = {}
            caught[name].append((attention.num_heads, pair))
            hooks.append(attention.q_proj.register_forward_hook(lambda m, i, out, pair=pair: pair.__setitem__("q", out)))
            hooks.append(attention.k_proj.register_forward_hook(lambda m, i, out, pair=pair: pair.__setitem__("k", out)))
    try:
        with torch.inference_mode():
            model(batch.source, batch.target_in)
    finally:
        for hook in hooks:
            hook.remove()
    source_real, target_real = batch.source != seq2seq.PAD, batch.target_in != seq2seq.PAD  # (N, L_s), (N, L_t)
    L_t = batch.target_in.shape[1]
    later = torch.ones(L_t, L_t, dtype=torch.bool).tril()  # (L_t, L_t): True where a query may see a key
    views = {  # (keys a query may see (N, L_q, L_k), which queries are real (N, L_q))
        "encoder_self": (source_real[:, None, :].expand(-1, source_real.shape[1], -1), source_real),
        "decoder_self": (target_real[:, None, :] & later, target_real),
        "cross": (source_real[:, None, :].expand(-1, L_t, -1), target_real),
    }
    found = {}
    for name in ATTENTIONS:
        keep, real = views[name]
        measures, peaks = [], []
        for heads, pair in caught[name]:
            q = pair["q"].double().unflatten(-1, (heads, -1)).transpose(1, 2)  # (N, H, L_q, d)
            k = pair["k"].double().unflatten(-1, (heads, -1)).transpose(1, 2)  # (N, H, L_k, d)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (N, H, L_q, L_k)
            visible = keep.unsqueeze(1).expand_as(scores)
            n = visible.sum(-1)  # (N, H, L_q)
            top = scores.masked_fill(~visible, -math.inf).amax(-1)
            mean = scores.masked_fill(~visible, 0.0).sum(-1) / n.clamp(min=1)
            weights = scores.masked_fill(~visible, -math.inf).softmax(-1)
            rows_kept = real.unsqueeze(1).expand_as(n) & (n >= 2)
            measures.append((top - mean)[rows_kept])
            peaks.append((weights.amax(-1) * n)[rows_kept])
        found[name] = (torch.cat(measures), torch.cat(peaks))
    return found


def log_log_slope(xs, ys):
    """The least-squares slope of log y against log x: how a cost grows with x (2: like x²)."""
    xs = _numbers("log_log_slope", "xs", xs, at_least=2)
    ys = _numbers("log_log_slope", "ys", ys, at_least=2)
    if len(xs) != len(ys) or len(set(xs)) < 2:
        check.fail("log_log_slope", "ys", check.describe(ys),
                   {"en": f"one number for each of the {len(xs)} xs, which must not all be equal",
                    "zh": f"与 xs 一一对应的 {len(xs)} 个数（xs 不能全相等）"})
    x = torch.tensor(xs, dtype=torch.float64).log()
    y = torch.tensor(ys, dtype=torch.float64).log()
    x, y = x - x.mean(), y - y.mean()
    return ((x * y).sum() / (x * x).sum()).item()
