"""Lesson 05, sections 7-9: every threshold the notebook states about the Informer ProbSparse
code's defects, about when ProbSparse is accurate and about its memory, proved on many random
draws (the notebook makes one). `make test` runs the `trains` tests under
ATEN_CPU_CAPABILITY=default, `make test-paths` on every kernel path the CPU has.

The defects are re-created in the lesson itself (code first, for the learner to read); the tests
take those functions from the lesson source, so the numbers proved here are the numbers of the
code the learner reads. The experiments come from ``course_utils.probsparse_study``, which the
notebook calls with one generator and these tests with twenty.
"""

import ast
import math

import jupytext
import pytest
import torch
import torch.nn.functional as F

from course_utils import probsparse
from course_teacher import build
from course_utils import probsparse_study as study
from course_teacher.bilingual_code import localize

SEEDS = range(20)  # the notebook draws from one generator; a threshold must hold on all of these

pytestmark = pytest.mark.usefixtures("one_thread")  # as the notebooks run


def _lesson_functions(*names):
    """The functions and classes ``names`` as lesson 05's English source defines them (their code
    only: the cells around them do not run), in a namespace with torch, nn, F, math, probsparse."""
    namespace = {"torch": torch, "nn": torch.nn, "F": F, "math": math, "probsparse": probsparse}
    found = set()
    for cell in jupytext.read(build.lessons()["05"]).cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(localize(cell.source, "en"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                exec(compile(ast.Module([node], type_ignores=[]), "lesson05", "exec"), namespace)  # noqa: S102 (the lesson's own code)
                found.add(node.name)
    assert found == set(names), f"lesson 05 defines none of {set(names) - found}"
    return [namespace[name] for name in names]


def _report(label, values):
    print(f"\n{label}: from {min(values):.3f} to {max(values):.3f} over {len(values)} draws")


# ----------------------------------------------------------------------------- section 7: the defects


@pytest.mark.trains
def test_the_einsum_misses_the_queries_that_dominate_by_direction():
    """7.1, on the notebook's inputs (``study.aligned_queries``: L = 512, D = 64, 8 heads, 10 queries
    pointing at a group of keys, 100 pointing away from one, every query of length 4). Measured over
    20 draws, native kernels and ATEN_CPU_CAPABILITY=default alike:

    - the exact M̄ ranks the 10 dominant queries first in every head (recall 1.0 on every draw);
    - the correct sampled product finds 0.938 to 1.0 of them (the notebook says ≥ 0.9);
    - the einsum finds 0.262 to 0.675 (< 0.75);
    - relative error on the dominant queries' rows: correct 0.000 to 0.233 (< 0.3), einsum 0.543 to
      0.803 (> 0.4);
    - whole output: the einsum's error is 1.41 to 1.75 times the correct product's (> 1.25).
    """
    (informer_sampled_scores,) = _lesson_functions("informer_sampled_scores")
    found, missed, right_rows, wrong_rows, ratios = [], [], [], [], []
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v, dominant = study.aligned_queries(1, 8, 512, 64, generator=g)
        count = probsparse.sample_count(512)
        index = probsparse.sample_keys(512, 512, count, generator=g)
        K_sample = k[:, :, index]
        scores = informer_sampled_scores(q, K_sample)
        intended_scores = (q.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze(-2)
        assert not torch.allclose(scores, intended_scores, atol=1.0)
        assert torch.allclose(scores, q @ K_sample.sum(2).transpose(-2, -1), rtol=1e-4, atol=1e-2)
        assert torch.allclose(probsparse.sampled_scores(q, k, index), intended_scores, atol=1e-4)
        assert study.recall(study.most_active(q, k, 10), dominant) == 1.0, seed
        right = study.chosen_by(q, k, index, count)
        wrong = study.chosen_by(q, k, index, count, scores=informer_sampled_scores)
        full = F.scaled_dot_product_attention(q, k, v)
        right_output, wrong_output = study.attend_chosen(q, k, v, right), study.attend_chosen(q, k, v, wrong)
        found.append(study.recall(right, dominant))
        missed.append(study.recall(wrong, dominant))
        right_rows.append(study.relative_error(study.rows(right_output, dominant), study.rows(full, dominant)))
        wrong_rows.append(study.relative_error(study.rows(wrong_output, dominant), study.rows(full, dominant)))
        ratios.append(study.relative_error(wrong_output, full) / study.relative_error(right_output, full))
    for label, values in (("correct recall", found), ("einsum recall", missed), ("correct rows' error", right_rows),
                          ("einsum rows' error", wrong_rows), ("whole-output error ratio", ratios)):
        _report(label, values)
    assert min(found) >= 0.92 and max(missed) < 0.72
    assert max(right_rows) < 0.27 and min(wrong_rows) > 0.45 and min(ratios) > 1.3


@pytest.mark.trains
def test_the_einsum_still_finds_long_queries():
    """7.1: on 10 long queries among 512 short ones the broken einsum chooses all 10."""
    (informer_sampled_scores,) = _lesson_functions("informer_sampled_scores")
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, _, active = study.few_dominant_queries(1, 8, 512, 64, generator=g)
        count = probsparse.sample_count(512)
        index = probsparse.sample_keys(512, 512, count, generator=g)
        assert study.recall(study.chosen_by(q, k, index, count, scores=informer_sampled_scores), active) == 1.0, seed


@pytest.mark.trains
def test_without_the_scale_every_query_chosen_is_full_attention_with_scale_one():
    """7.2, on the notebook's sizes (B = H = 2, L = 8, D = 16)."""
    (informer_attend,) = _lesson_functions("informer_attend")
    closest_to_default = math.inf
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = study.random_inputs(2, 2, 8, 16, generator=g)
        out = informer_attend(q, k, v, scale=1 / math.sqrt(16))
        assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, scale=1.0), atol=1e-6)
        closest_to_default = min(closest_to_default, (out - F.scaled_dot_product_attention(q, k, v)).abs().max().item())
        fixed, _ = probsparse.prob_sparse_attention(q, k, v, generator=g)
        assert torch.allclose(fixed, F.scaled_dot_product_attention(q, k, v), atol=1e-6)
    print(f"\nsmallest largest-difference from scale 1/√D: {closest_to_default:.3f}")
    assert closest_to_default > 10 * 1e-2  # the notebook says: not allclose at atol 1e-2


@pytest.mark.trains
def test_the_dropout_is_never_called_until_the_fix_calls_it():
    """7.3 on the notebook's sizes: the re-created layer gives one output in training and in
    evaluation mode; the fixed layer's two training calls differ, its evaluation call does not."""
    InformerDropoutLayer, FixedDropoutLayer = _lesson_functions("InformerDropoutLayer", "FixedDropoutLayer")
    for seed in SEEDS:
        torch.manual_seed(seed)  # dropout draws from the global random state
        q, k, v = study.random_inputs(2, 2, 8, 16, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            layer = InformerDropoutLayer(attention_dropout=0.1)
            in_eval = layer.eval()(q, k, v)
            layer.train()
            assert torch.equal(layer(q, k, v), in_eval) and torch.equal(layer(q, k, v), in_eval)
            fixed = FixedDropoutLayer(attention_dropout=0.1).train()
            assert not torch.equal(fixed(q, k, v), fixed(q, k, v))
            assert torch.equal(fixed.eval()(q, k, v), in_eval)


@pytest.mark.trains
def test_dividing_by_the_key_length_loses_the_active_queries_under_a_key_offset():
    """7.4: dividing by U chooses all 10 active queries at every offset; dividing by L_K at
    least 9 of 10 without an offset and fewer than 3 in 10 at offset 200 (measured: 1.0 on
    every draw, and 0.04 to 0.14)."""
    (informer_measure,) = _lesson_functions("informer_measure")
    offsets = (0, 10, 20, 50, 100, 200)
    without, at_200 = [], []
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, _, _ = study.few_dominant_queries(1, 8, 512, 64, generator=g)
        q, k = study.with_shared_feature(q, k, generator=g)
        found = study.recall_by_offset(q, k, offsets, {
            "U": probsparse.sparsity_measure,
            "L_K": lambda scores: informer_measure(scores, 512),
        }, generator=g)
        assert min(found["U"]) == 1.0, (seed, found)
        without.append(found["L_K"][0])
        at_200.append(found["L_K"][-1])
    _report("dividing by L_K, no offset", without)
    _report("dividing by L_K, offset 200", at_200)
    assert min(without) >= 0.9 and max(at_200) < 0.25  # the notebook says >= 0.9 and < 0.3


def test_the_shared_feature_leaves_every_row_and_the_exact_measure_alone():
    """7.4's construction: an offset adds a constant to each query's row, so softmax, the exact
    measure and the truly active queries do not change with it."""
    g = torch.Generator().manual_seed(0)
    q, k, v, active = study.few_dominant_queries(1, 2, 64, 16, active=4, generator=g)
    q, k = study.with_shared_feature(q, k, generator=g)
    shifted = study.add_offset(k, 50.0)
    assert torch.equal(shifted[..., :-1], k[..., :-1]) and (shifted[..., -1] == 50.0).all()
    assert torch.allclose(F.scaled_dot_product_attention(q, shifted, v), F.scaled_dot_product_attention(q, k, v), atol=1e-4)
    assert torch.allclose(study.exact_measure(q, shifted), study.exact_measure(q, k), atol=1e-3)
    assert study.recall(study.most_active(q, shifted, 4), active) == 1.0


@pytest.mark.trains
def test_the_lazy_mean_leaks_and_causal_mode_does_not():
    """7.5: the re-created lazy step moves output 0 by 1/L when v[L-1] changes; causal mode
    leaves every output before j unchanged when v[j] changes (bit for bit), for several j."""
    (informer_lazy_context,) = _lesson_functions("informer_lazy_context")
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = study.random_inputs(1, 8, 96, 64, generator=g)
        index = probsparse.sample_keys(96, 96, probsparse.sample_count(96), causal=True, generator=g)
        before, _ = probsparse.prob_sparse_attention(q, k, v, causal=True, index=index)
        for j in (95, int(torch.randint(1, 95, (1,), generator=g))):
            changed = v.clone()
            changed[:, :, j] += 1.0
            moved = informer_lazy_context(changed, 96)[:, :, 0] - informer_lazy_context(v, 96)[:, :, 0]
            assert torch.allclose(moved, torch.full_like(moved, 1 / 96), atol=1e-5)
            after, _ = probsparse.prob_sparse_attention(q, k, changed, causal=True, index=index)
            assert torch.equal(after[:, :, :j], before[:, :, :j]), (seed, j)
            assert not torch.equal(after[:, :, j], before[:, :, j]), (seed, j)


@pytest.mark.trains
def test_the_official_causal_mode_reads_later_keys_and_sums_the_values():
    """7.5, the official code's causal mode, re-created: with its sample (from all keys) the measure
    of every query 0 … 47 changes when only keys 48 … 95 are doubled, with the course's causal
    sample none does; its lazy row i is i + 1 times the cumulative mean, and at the last position
    its features are on average 9.38 to 10.20 times a value's (measured over 20 draws, native and
    default kernels alike; the notebook says > 5)."""
    official_causal_sample, official_causal_lazy = _lesson_functions("official_causal_sample", "official_causal_lazy")
    ratios = []
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = study.random_inputs(1, 8, 96, 64, generator=g)
        changed = k.clone()
        changed[:, :, 48:] *= 2.0
        U = probsparse.sample_count(96)
        for index, moves in ((official_causal_sample(96, 96, U, g), True),
                             (probsparse.sample_keys(96, 96, U, causal=True, generator=g), False)):
            before = probsparse.sparsity_measure(probsparse.sampled_scores(q, k, index))
            after = probsparse.sparsity_measure(probsparse.sampled_scores(q, changed, index))
            moved = ~torch.isclose(after[..., :48], before[..., :48], atol=1e-5)
            assert bool(moved.all()) if moves else not bool(moved.any()), (seed, moves)
        summed = official_causal_lazy(v)
        mean = probsparse.lazy_context(v, 96, causal=True)
        assert torch.allclose(summed, torch.arange(1, 97).unsqueeze(-1) * mean, atol=1e-4)
        ratios.append((summed[:, :, -1].abs().mean() / v.abs().mean()).item())
    _report("last lazy row's features / a value's, on average", ratios)
    assert min(ratios) > 6


@pytest.mark.trains
def test_the_habits_and_their_fix():
    """7.6: the re-created forward pass (global random state, prints, one tensor) gives two outputs
    for one input, shifts the notebook's later random numbers and prints 3 lines a call; the course's
    call with a generator gives one output, leaves the global state, prints nothing."""
    (informer_forward,) = _lesson_functions("informer_forward")
    import contextlib
    import io

    for seed in SEEDS:
        q, k, v = study.random_inputs(1, 8, 96, 64, generator=torch.Generator().manual_seed(seed))
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        expected = torch.rand(3)
        torch.set_rng_state(state)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            first, second = informer_forward(q, k, v), informer_forward(q, k, v)
        assert not torch.equal(first, second), seed
        assert not torch.equal(torch.rand(3), expected) and printed.getvalue().count("\n") == 6
        torch.set_rng_state(state)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            ours = [probsparse.prob_sparse_attention(q, k, v, generator=torch.Generator().manual_seed(14))[0]
                    for _ in range(2)]
        assert torch.equal(*ours) and torch.equal(torch.rand(3), expected) and printed.getvalue() == ""


# ----------------------------------------------------------------------------- section 8: accuracy


@pytest.fixture(scope="module")
def accuracy():
    """The notebook's error sweep, once per seed."""
    return [study.accuracy_by_length((128, 256, 512, 1024), generator=torch.Generator().manual_seed(seed)) for seed in range(10)]


@pytest.mark.trains
def test_on_random_inputs_probsparse_is_no_better_than_the_mean_of_the_values(accuracy):
    """From L = 512 on, ProbSparse's error is at least 0.9 of mean(V)'s (measured: 0.95 to 0.98)."""
    ratios = [run["random"]["probsparse"][i] / run["random"]["mean"][i] for run in accuracy for i in (2, 3)]
    _report("random inputs, L >= 512: ProbSparse's error / mean(V)'s", ratios)
    assert min(ratios) >= 0.92


@pytest.mark.trains
def test_with_a_few_dominant_queries_probsparse_is_close(accuracy):
    """ProbSparse's error below 0.1 and mean(V)'s above 0.5 at every L (measured: at most 0.07,
    at least 0.71)."""
    sparse = [e for run in accuracy for e in run["dominant"]["probsparse"]]
    mean = [e for run in accuracy for e in run["dominant"]["mean"]]
    _report("a few dominant queries: ProbSparse's error", sparse)
    _report("a few dominant queries: mean(V)'s error", mean)
    assert max(sparse) < 0.08 and min(mean) > 0.6


@pytest.mark.trains
def test_recall_as_the_sample_grows():
    """Dominant: all 10 found at every U; random: fewer than half at U = 35 (measured: at most
    0.26), more at U = L_K than at U = 7 (by at least 0.2 on every draw), but below 0.9 even then
    (measured: at most 0.78)."""
    factors = (1, 2, 5, 10, 20, 50, 74)
    at_default, first, last = [], [], []
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, _ = study.random_inputs(1, 8, 512, 64, generator=g)
        qd, kd, _, _ = study.few_dominant_queries(1, 8, 512, 64, generator=g)
        sizes, random_recall = study.recall_by_sample_size(q, k, factors, generator=g)
        _, dominant_recall = study.recall_by_sample_size(qd, kd, factors, generator=g)
        assert sizes == [7, 14, 35, 70, 140, 350, 512]
        assert min(dominant_recall) == 1.0, seed
        at_default.append(random_recall[2])
        first.append(random_recall[0])
        last.append(random_recall[-1])
        assert random_recall[-1] > random_recall[0] + 0.2, (seed, random_recall)
    _report("random inputs, recall at U = 35", at_default)
    _report("random inputs, recall at U = 7", first)
    _report("random inputs, recall at U = 512", last)
    assert max(at_default) < 0.4 and max(last) < 0.9


@pytest.mark.trains
def test_a_trained_reverser_has_lazy_self_attention_and_active_cross_attention():
    """Section 8's look at lesson 06's reverser (``seq2seq.train(seed)``, its default 250 steps), on
    200 held-out sequences, seeds 0 to 9 (the notebook trains seed 0). A row is lazy when no key gets
    twice the uniform weight. Measured, native kernels and ATEN_CPU_CAPABILITY=default, one thread:
    lazy share of the decoder's self-attention 0.686 to 0.830 (the notebook says > 0.5), of the
    encoder's 0.409 to 0.813 (> 1/3), of the cross-attention 0.088 to 0.190 (< 0.3); the larger
    median M̄ of the two self-attentions is 0.060 to 0.344 of the cross-attention's (< 0.5). (The
    default kernels: 0.706-0.827, 0.413-0.795, 0.090-0.190, 0.062-0.344.)"""
    from course_utils import seq2seq

    held_out = seq2seq.held_out(200)
    shares = {name: [] for name in study.ATTENTIONS}
    ratios = []
    for seed in range(10):
        rows = study.trained_attention_rows(seq2seq.train(seed=seed).model, held_out)
        for name, (measure, peak) in rows.items():
            shares[name].append((peak < 2).double().mean().item())
        medians = {name: measure.median().item() for name, (measure, _) in rows.items()}
        ratios.append(max(medians["encoder_self"], medians["decoder_self"]) / medians["cross"])
    for name, values in shares.items():
        _report(f"lazy share, {name}", values)
    _report("larger self-attention median M̄ / cross-attention's", ratios)
    assert min(shares["decoder_self"]) > 0.6 and min(shares["encoder_self"]) > 0.37
    assert max(shares["cross"]) < 0.25 and max(ratios) < 0.42


def test_trained_attention_rows_reads_every_real_row_once():
    """The measure and peak of a row come from the scores the model computes: on an untrained model,
    M̄ matches max − mean of the self-attention weights' log, and the rows counted are the real
    queries that see at least two keys."""
    from course_utils import seq2seq

    model = seq2seq.make_model(0).eval()
    batch = seq2seq.held_out(20)
    rows = study.trained_attention_rows(model, batch)
    source_rows = int((batch.source != seq2seq.PAD).sum())
    target_rows = int((batch.target_in != seq2seq.PAD).sum()) - len(batch.lengths)  # BOS sees one key
    heads = model.encoder[0].self_attn.num_heads
    assert len(rows["encoder_self"][0]) == heads * source_rows
    assert len(rows["decoder_self"][0]) == heads * target_rows
    assert len(rows["cross"][0]) == heads * int((batch.target_in != seq2seq.PAD).sum())
    for measure, peak in rows.values():
        assert (measure >= 0).all() and (peak >= 1 - 1e-9).all()


# ----------------------------------------------------------------------------- section 9: memory


def test_memory_slopes_and_sizes():
    """The notebook's memory facts, from walkthrough traces (exact: no sampling, no timing)."""
    lengths = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    plain = [probsparse.walkthrough(1, 8, n, 64, fast=False) for n in lengths]
    fast = [probsparse.walkthrough(1, 8, n, 64, fast=True) for n in lengths]
    weights = [8 * n * n * 4 for n in lengths]
    assert study.log_log_slope(lengths[3:], weights[3:]) == pytest.approx(2, abs=1e-9)
    for traces in (plain, fast):
        assert 1 < study.log_log_slope(lengths[3:], [t.total_bytes for t in traces[3:]]) < 1.2
    at8192 = lengths.index(8192)
    assert plain[at8192].total_bytes > 20 * fast[at8192].total_bytes
    crossing = [w > t.total_bytes for w, t in zip(weights, plain)]
    assert crossing == [False] * 5 + [True] * 3  # the weights pass the plain version between 2048 and 4096


def test_log_log_slope_reads_powers():
    xs = [2.0, 4.0, 8.0, 16.0]
    assert study.log_log_slope(xs, [x**3 for x in xs]) == pytest.approx(3)
    assert study.log_log_slope(xs, [5 * x for x in xs]) == pytest.approx(1)


def test_recall_and_overlap_count_positions_not_order():
    chosen = torch.tensor([[[5, 1, 3, 7]]])
    assert study.recall(chosen, torch.tensor([[[1, 2]]])) == 0.5
    assert study.overlap(chosen, torch.tensor([[[7, 5, 3, 1]]])) == 1.0
    assert study.relative_error(torch.ones(4), torch.ones(4)) == 0.0
