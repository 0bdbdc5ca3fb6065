"""Experiments lesson 05 runs on ProbSparse: the inputs, the measures and the sweeps behind its
"when is it accurate" plots and its spot-the-bug symptoms.

The lesson's notebook calls these functions once, with one generator; ``tests/test_lesson05_facts.py``
calls them with many, and proves that every threshold the notebook states holds on all of them.

Inputs (layout (B, H, L, D), like ``course_utils.probsparse``):

- ``random_inputs``: queries, keys and values drawn from N(0, 1). With D = 64 a query's scores
  q·k/√D have a spread of about 1 here, so *every* row of the softmax is peaked: no query is lazy.
- ``few_dominant_queries``: most queries short (N(0, 0.1²) features: their softmax row is nearly
  uniform, they are lazy), a few long ones (N(0, 3²): a peaked row, active). This is the situation
  ProbSparse was designed for.
- ``with_shared_feature`` and ``add_offset``: keys that share a common offset, as a key
  projection's bias gives.

Measures: ``exact_measure`` (max − mean of a query's scores over *all* keys: the truth the sample
estimates), ``most_active``, ``recall``, ``overlap``, ``relative_error``.

Everything random comes from the ``generator`` argument, never from the global random state.
"""

import torch
import torch.nn.functional as F

from . import probsparse

#: Feature scale of lazy and of active queries in ``few_dominant_queries``.
LAZY_SCALE, ACTIVE_SCALE = 0.1, 3.0


# --------------------------------------------------------------------------- inputs


def random_inputs(batch, heads, length, dim, *, generator):
    """(query, key, value), each (B, H, L, D) with N(0, 1) entries."""
    return tuple(torch.randn(batch, heads, length, dim, generator=generator) for _ in range(3))


def few_dominant_queries(batch, heads, length, dim, *, active=10, generator):
    """(query, key, value, positions): random keys and values; in each (batch, head), ``active``
    queries at random positions are long (features N(0, 3²)) and all the others short (N(0, 0.1²)).

    positions: (B, H, active) int64, the positions of the long queries (not sorted).
    """
    query, key, value = random_inputs(batch, heads, length, dim, generator=generator)
    query = query * LAZY_SCALE
    positions = torch.rand(batch, heads, length, generator=generator).argsort(-1)[..., :active]
    long_rows = ACTIVE_SCALE * torch.randn(batch, heads, active, dim, generator=generator)
    query = query.scatter(-2, positions.unsqueeze(-1).expand(-1, -1, -1, dim), long_rows)
    return query, key, value, positions


def with_shared_feature(query, key, *, generator):
    """(query, key) made ready for a common key offset: the last feature becomes a shared one.

    Every key's last feature is set to 0 (``add_offset`` then puts the offset there), and every
    query's to a random N(0, 1) number of its own: how strongly that query reads the shared
    feature, drawn the same way for active and for lazy queries. The other D − 1 features, which
    decide how peaked each row is, stay as they were.
    """
    query, key = query.clone(), key.clone()
    query[..., -1] = torch.randn(query.shape[:-1], generator=generator)
    key[..., -1] = 0.0
    return query, key


def add_offset(key, offset):
    """``key`` with the vector b = (0, …, 0, offset) added to every key (see ``with_shared_feature``).

    Query i's score with every key then rises by the same amount, query[i, -1] · offset: a
    constant per query, which changes neither its softmax row nor max − mean of its scores.
    """
    shift = torch.zeros(key.shape[-1], dtype=key.dtype)
    shift[-1] = offset
    return key + shift


# --------------------------------------------------------------------------- measures


def exact_measure(query, key):
    """(B, H, L_Q): max − mean of each query's unscaled scores q·k over *all* L_K keys, the
    quantity the sampled measure estimates."""
    return _exact_from(query @ key.transpose(-2, -1))  # (B, H, L_Q, L_K) scores first


def _exact_from(all_scores):
    """The exact measure from the full (B, H, L_Q, L_K) score matrix, when it is already there."""
    return all_scores.amax(-1) - all_scores.mean(-1)


def most_active(query, key, count):
    """(B, H, count) int64: the positions of the ``count`` queries with the largest exact measure."""
    return exact_measure(query, key).topk(count, dim=-1).indices


def recall(chosen, truth):
    """The fraction of the positions in ``truth`` (B, H, n) that are among ``chosen`` (B, H, u),
    averaged over batch and heads: a float in [0, 1]."""
    found = (truth.unsqueeze(-1) == chosen.unsqueeze(-2)).any(-1)  # (B, H, n)
    return found.float().mean().item()


def overlap(chosen, intended):
    """The fraction of ``intended`` (B, H, u) that ``chosen`` (B, H, u) also holds (``recall``
    under the name that fits two selections of the same size)."""
    return recall(chosen, intended)


def relative_error(output, reference):
    """‖output − reference‖ / ‖reference‖ over the whole tensor: 0 is exact; replacing every
    output by the mean of the values gives about 0.8 on random inputs."""
    return ((output - reference).norm() / reference.norm()).item()


# --------------------------------------------------------------------------- choosing queries


def chosen_by(query, key, index, count, *, scores=None, measure=probsparse.sparsity_measure):
    """(B, H, count): the queries ProbSparse's steps choose from the sample ``index`` (L_Q, U).

    Both steps can be swapped for another version to see what it changes: ``scores(query,
    K_sample)`` computes the (B, H, L_Q, U) sampled scores from the gathered keys K_sample
    (B, H, L_Q, U, D) (default: ``probsparse.sampled_scores``), and ``measure(scores)`` rates each
    query (default: max − mean, ``probsparse.sparsity_measure``).
    """
    if scores is None:
        sampled = probsparse.sampled_scores(query, key, index)
    else:
        sampled = scores(query, key[:, :, index])  # K_sample: (B, H, L_Q, U, D)
    return probsparse.select_queries(measure(sampled), count)


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
    """Recall of the ``truth_count`` truly most active queries (by the exact measure) among the
    u = factor·⌈ln L_Q⌉ queries chosen, when each query samples U = f·⌈ln L_K⌉ keys, for each f in
    ``factors`` (U is capped at L_K; the keys are drawn with replacement, so even U = L_K misses
    some). Returns ([U for each f], [recall for each f])."""
    L_Q, L_K = query.shape[-2], key.shape[-2]
    all_scores = query @ key.transpose(-2, -1)
    truth = _exact_from(all_scores).topk(truth_count, dim=-1).indices
    count = probsparse.sample_count(L_Q, factor)
    sizes, recalls = [], []
    for f in factors:
        size = probsparse.sample_count(L_K, f)
        index = probsparse.sample_keys(L_Q, L_K, size, generator=generator)
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
    L_Q, L_K = query.shape[-2], key.shape[-2]
    count = probsparse.sample_count(L_Q, factor)
    index = probsparse.sample_keys(L_Q, L_K, probsparse.sample_count(L_K, factor), generator=generator)
    found = {name: [] for name in measures}
    for offset in offsets:
        shifted = add_offset(key, offset)
        all_scores = query @ shifted.transpose(-2, -1)
        truth = _exact_from(all_scores).topk(truth_count, dim=-1).indices
        sampled = _sampled_from(all_scores, index)
        for name, measure in measures.items():
            found[name].append(recall(probsparse.select_queries(measure(sampled), count), truth))
    return found


def log_log_slope(xs, ys):
    """The least-squares slope of log y against log x: how a cost grows with x (2: like x²)."""
    x = torch.tensor(xs, dtype=torch.float64).log()
    y = torch.tensor(ys, dtype=torch.float64).log()
    x, y = x - x.mean(), y - y.mean()
    return ((x * y).sum() / (x * x).sum()).item()
