"""Lesson 05, sections 1-6: the walkthrough explorer and its table, the plots, and the facts the
notebook states that rest on sampling or float accumulation, proved over at least 10 seeds (the
tests marked `trains`; `make test` runs them under ATEN_CPU_CAPABILITY=default, `make test-paths` on
every kernel path the CPU has)."""

import math

import ipywidgets as w
import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from course_utils import i18n, viz
from course_utils.probsparse import (
    prob_sparse_attention,
    prob_sparse_attention_plain,
    sample_count,
    sample_keys,
    sampled_scores,
    sparsity_measure,
    walkthrough,
)
from course_utils.validation import ArgumentError
from course_utils.widgets import LENGTHS, walkthrough_explorer, walkthrough_table, walkthrough_view

SEEDS = range(10)
trains = pytest.mark.trains


def _generator(seed):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------- the walkthrough view

@pytest.mark.parametrize(
    ("sizes", "sample", "counts"),
    [
        ({}, "157.3 MB", "U = 25 sampled keys per query, u = 25 chosen queries"),  # the Informer code's sizes
        ({"length": 8192, "batch": 1}, "838.9 MB", "U = 50 sampled keys per query, u = 50 chosen queries"),
        ({"length": 16, "batch": 1, "heads": 1, "dim": 16, "factor": 1}, "3.1 kB", "U = 3 sampled keys"),
        ({"length": 16384, "batch": 256, "heads": 64, "dim": 128, "factor": 10}, "13.7 TB", "U = 100"),
    ],
)
def test_the_view_gives_both_tables_and_a_chart_at_any_size(sizes, sample, counts):
    figure, summary = walkthrough_view(**sizes)
    assert isinstance(figure, Figure) and figure.axes[0].patches  # the bars
    assert counts in summary
    assert f"K_sample alone: {sample}" in summary
    plain_table, fast_table = summary.split("\n\nfast (sampled_addmm, no K_sample)\n")
    assert "K_expand" in plain_table and "K_sample" in plain_table
    assert "K_sample" not in fast_table.split("\n\n")[0] and "K_expand" not in fast_table


def test_the_view_matches_the_walkthrough_it_shows():
    plain = walkthrough(2, 3, 100, 32, 4)
    fast = walkthrough(2, 3, 100, 32, 4, fast=True)
    _, summary = walkthrough_view(length=100, batch=2, heads=3, dim=32, factor=4)
    assert walkthrough_table(plain) in summary and walkthrough_table(fast) in summary
    assert f"U = {sample_count(100, 4)} sampled keys" in summary


def test_the_table_lists_every_step_with_its_shape_kind_and_bytes():
    trace = walkthrough()
    lines = walkthrough_table(trace).splitlines()
    assert lines[0].split() == ["step", "shape", "view", "or", "new", "allocated", "as", "a", "copy"]
    rows = {line.split()[0]: line for line in lines[1:-2]}
    assert list(rows) == [step.name for step in trace]
    assert rows["K_expand"].split()[-5:] == ["view", "0", "B", "604.0", "MB"]
    assert "(32, 8, 96, 25, 64)" in rows["K_sample"] and rows["K_sample"].split()[-4:] == ["157.3", "MB", "157.3", "MB"]
    assert lines[-1].split() == ["total", "180.8", "MB"]
    assert len({len(line) for line in lines[:-2]}) == 1  # the columns line up


def test_the_table_lines_up_in_chinese_too():
    i18n.set_language("zh")
    lines = walkthrough_table(walkthrough(fast=True)).splitlines()
    assert lines[0].startswith("步骤") and "视图或新张量" in lines[0] and lines[-1].startswith("合计")
    widths = {sum(2 if "\u4e00" <= c <= "\u9fff" else 1 for c in line) for line in lines[:-2]}
    assert len(widths) == 1
    _, summary = walkthrough_view()
    assert "每个查询采样 U = 25 个键" in summary and "仅 K_sample 就占 157.3 MB" in summary


@pytest.mark.parametrize(
    ("argument", "value"),
    [("length", 0), ("batch", -1), ("heads", 2.0), ("dim", "64"), ("factor", True), ("factor", None)],
)
def test_the_view_names_a_bad_size(argument, value):
    with pytest.raises(ArgumentError, match=f"walkthrough_view: argument '{argument}'.*a positive int"):
        walkthrough_view(**{argument: value})


def test_the_explorer_has_a_length_slider_first_and_updates_on_every_control():
    box = walkthrough_explorer()
    slider, batch, heads, dim, factor = box.children[0].children
    assert isinstance(slider, w.SelectionSlider) and slider.options == LENGTHS and slider.value == 96
    assert "157.3 MB" in box.summary.value
    image = box.image.value
    slider.value = 8192
    assert "L=8192" in box.summary.value and box.image.value != image
    for control, value, text in ((batch, 1, "B=1,"), (heads, 2, "H=2,"), (dim, 16, "D=16"), (factor, 3, "factor 3")):
        before = box.summary.value
        control.value = value
        assert box.summary.value != before and text in box.summary.value


# ----------------------------------------------------------------------------- plots

def test_format_bytes_uses_powers_of_1000():
    assert [viz.format_bytes(n) for n in (0, 999, 19_200, 157_286_400, 2_147_483_648, 13.7e12, 2.3e15, 4e20)] == [
        "0 B", "999 B", "19.2 kB", "157.3 MB", "2.1 GB", "13.7 TB", "2.3 PB", "400.0 EB"]
    for bad in (-1, "3", None, float("nan"), True):
        with pytest.raises(ArgumentError, match="format_bytes: argument 'count'"):
            viz.format_bytes(bad)


@pytest.mark.parametrize("sizes", [{}, {"length": 16384, "batch": 256, "heads": 64, "dim": 128, "factor": 10},
                                   {"length": 16, "batch": 1, "heads": 1, "dim": 16, "factor": 1}])
def test_the_byte_axis_reads_round_byte_counts_and_the_labels_are_legible(sizes):
    """The explorer's chart: ticks at round byte counts within the units there are (no "10000.0 TB"),
    at least three of them, and every bar label, tick label and step name at 9 points or more."""
    figure, _ = walkthrough_view(**sizes)
    ax = figure.axes[0]
    figure.canvas.draw()
    ticks = [label.get_text() for label in ax.get_xticklabels() if label.get_text()]
    assert len(ticks) >= 3, ticks
    for tick in ticks:
        number, unit = tick.split()
        assert unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB") and float(number) in (1, 10, 100), tick
    assert all(text.get_fontsize() >= 9 for text in ax.texts)
    assert all(label.get_fontsize() >= 9 for label in ax.get_yticklabels() + ax.get_xticklabels())


def test_weight_rows_draws_every_row_with_its_measure():
    weights = torch.rand(3, 10).softmax(-1)
    figure = Figure()
    ax = viz.weight_rows(weights, torch.tensor([0.5, 1.0, 2.0]), ax=figure.subplots(), labels=["a", "b", "c"])
    assert len(ax.patches) == 30
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("a: M̄ = 0.50") for t in texts) and any(t.startswith("c: M̄ = 2.00") for t in texts)
    with pytest.raises(ValueError, match="'measures'"):
        viz.weight_rows(weights, [1.0, 2.0], ax=Figure().subplots())


def test_chosen_weights_marks_the_chosen_queries():
    figure = Figure()
    ax = viz.chosen_weights(torch.rand(6, 6), torch.tensor([1, 4]), ax=figure.subplots())
    assert ax.images
    marked = [label.get_text() for label in ax.get_yticklabels() if label.get_text().endswith("◂")]
    assert marked == ["1 ◂", "4 ◂"]


def test_walkthrough_bars_draws_both_versions_and_the_view_as_an_outline():
    figure = Figure()
    plain, fast = walkthrough(), walkthrough(fast=True)
    ax = viz.walkthrough_bars(plain, fast, ax=figure.subplots())
    filled = [p for p in ax.patches if p.get_fill()]
    outlined = [p for p in ax.patches if not p.get_fill()]
    assert len(filled) == sum(1 for s in plain if s.bytes) + sum(1 for s in fast if s.bytes)
    assert len(outlined) == 1 and outlined[0].get_width() == pytest.approx(604e6, rel=1e-3)  # K_expand, in bytes
    assert ax.get_xscale() == "log"


# ----------------------------------------------------------------------------- section 2's facts

def _lse_facts(scores):
    n = scores.shape[-1]
    top, lse, mean = scores.amax(-1), scores.logsumexp(-1), scores.mean(-1)
    kl = (-math.log(n) - scores.log_softmax(-1)).mean(-1)
    return top, lse, mean, lse - mean, top - mean, kl


@trains
def test_max_lse_and_kl_bound_the_measure_on_every_seed():
    """Section 2: the paper's M = LSE − mean = KL + ln L_K, Lemma 1 (M̄ ≤ M ≤ M̄ + ln L_K), the bound on
    KL by M̄, and Pinsker's bound with M̄, on rows of every spread (exact up to rounding: the slack
    is 1e-9 in float64)."""
    for seed in SEEDS:
        g = _generator(seed)
        for length in (2, 32, 500):
            spread = torch.logspace(-2, 1, 200, dtype=torch.float64)[:, None]
            rows = spread * torch.randn(200, length, generator=g, dtype=torch.float64)
            top, lse, _, M, M_bar, kl = _lse_facts(rows)
            ln_n, slack = math.log(length), 1e-9
            assert ((top <= lse + slack) & (lse <= top + ln_n + slack)).all()
            assert torch.allclose(M, kl + ln_n)
            assert ((M_bar <= M + slack) & (M <= M_bar + ln_n + slack)).all()
            assert ((kl <= M_bar + slack) & (M_bar <= kl + ln_n + slack)).all()
            values = torch.randn(length, 3, generator=g, dtype=torch.float64)
            weights = rows.softmax(-1)
            gap = (weights @ values - values.mean(0)).abs().amax(-1)
            assert (gap <= (2 * M_bar).sqrt() * values.abs().max() + slack).all()  # Pinsker


def test_the_four_queries_of_section_2_say_what_the_notebook_says():
    g = _generator(0)
    keys, values = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)
    lengths = torch.tensor([0.5, 2.0, 5.0, 12.0])
    weights = (lengths[:, None] * keys[5] / keys[5].norm() @ keys.T / math.sqrt(8)).softmax(-1)
    outputs = weights @ values
    assert weights[0].max() < 0.06 and (outputs[0] - values.mean(0)).abs().max() < 0.08  # 0.1 with margin
    assert weights[3, 5] > 0.995 and (outputs[3] - values[5]).abs().max() < 0.015  # 0.99 and 0.02 with margin


# ----------------------------------------------------------------------------- section 3's facts

@trains
# floats compared bit for bit: both sides on one thread (the fixture)
def test_sampled_scores_are_the_sampled_entries_and_the_scale_changes_no_rank_on_every_seed(one_thread):
    for seed in SEEDS:
        g = _generator(seed)
        B, H, L, D = 2, 4, 96, 64
        query, key = (torch.randn(B, H, L, D, generator=g) for _ in range(2))
        U = sample_count(L)
        index = sample_keys(L, L, U, generator=g)
        scores = sampled_scores(query, key, index)
        picked = (query @ key.transpose(-2, -1)).gather(-1, index.expand(B, H, L, U))
        assert torch.allclose(scores, picked, atol=1e-4), seed
        M = sparsity_measure(scores)
        scaled = sparsity_measure(scores / math.sqrt(D))
        assert torch.equal(scaled, M / 8), seed  # dividing by a power of two is exact
        assert torch.equal(scaled.topk(U).indices, M.topk(U).indices), seed


@trains
def test_a_generator_gives_a_reproducible_sample_and_leaves_the_global_state_alone():
    for seed in SEEDS:
        state = torch.get_rng_state()
        first = sample_keys(96, 96, 25, generator=_generator(seed))
        assert torch.equal(first, sample_keys(96, 96, 25, generator=_generator(seed)))
        assert not torch.equal(first, sample_keys(96, 96, 25, generator=_generator(seed + 100)))
        assert torch.equal(torch.get_rng_state(), state)


# ----------------------------------------------------------------------------- sections 4 and 5

def _inputs(seed, length=24, batch=1, heads=2, dim=8):
    g = _generator(seed)
    return [torch.randn(batch, heads, length, dim, generator=g) for _ in range(3)]


def _lazy(selected, length):
    return torch.ones(*selected.shape[:-1], length, dtype=torch.bool).scatter(-1, selected, False)


@trains
def test_lazy_queries_get_the_mean_and_the_weights_give_the_output_on_every_seed():
    for seed in SEEDS:
        q, k, v = _inputs(seed)
        output, selected = prob_sparse_attention(q, k, v, factor=2, generator=_generator(seed + 1))
        _, weights = prob_sparse_attention(q, k, v, factor=2, generator=_generator(seed + 1), need_weights=True)
        lazy = _lazy(selected, 24)
        assert selected.shape == (1, 2, 8) and (selected.diff(dim=-1) > 0).all()
        assert torch.allclose(output[lazy], v.mean(-2, keepdim=True).expand_as(output)[lazy])
        assert torch.allclose(weights[lazy], torch.full((1, 24), 1 / 24))
        assert torch.allclose(weights @ v, output, atol=1e-6), seed


@trains
def test_with_every_query_chosen_it_is_full_attention_causal_or_not_on_every_seed():
    for seed in SEEDS:
        q, k, v = _inputs(seed, length=12, batch=2, heads=3)
        output, every = prob_sparse_attention(q, k, v, generator=_generator(seed))
        assert torch.equal(every, torch.arange(12).expand(2, 3, 12))
        assert torch.allclose(output, F.scaled_dot_product_attention(q, k, v), atol=1e-6)
        causal, _ = prob_sparse_attention(q, k, v, causal=True, generator=_generator(seed))
        assert torch.allclose(causal, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6)


def _causal_story(data_seed, index_seed):
    """Section 5 of the notebook for one pair of seeds (the notebook's: 2 and 3)."""
    q, k, v = _inputs(data_seed)
    index = sample_keys(24, 24, 8, causal=True, generator=_generator(index_seed))
    output, selected = prob_sparse_attention(q, k, v, factor=2, causal=True, index=index)
    _, weights = prob_sparse_attention(q, k, v, factor=2, causal=True, index=index, need_weights=True)
    cumulative = v.cumsum(-2) / torch.arange(1, 25).unsqueeze(-1)
    lazy = _lazy(selected, 24)
    assert (index <= torch.arange(24).unsqueeze(-1)).all()
    assert (weights.triu(diagonal=1) == 0).all()
    assert torch.allclose(output[lazy], cumulative[lazy])

    v_changed = v.clone()
    v_changed[:, :, -1] += 5.0
    changed, changed_selected = prob_sparse_attention(q, k, v_changed, factor=2, causal=True, index=index)
    assert torch.equal(changed_selected, selected)
    assert torch.equal(changed[:, :, :-1], output[:, :, :-1])  # bit for bit
    assert not torch.allclose(changed[:, :, -1], output[:, :, -1])

    k_changed = k.clone()
    k_changed[:, :, 12:] *= 10.0
    late, late_selected = prob_sparse_attention(q, k_changed, v, factor=2, causal=True, index=index)
    before = sparsity_measure(sampled_scores(q, k, index))
    after = sparsity_measure(sampled_scores(q, k_changed, index))
    assert torch.allclose(after[..., :12], before[..., :12], atol=1e-5)
    early_before = {p for p in selected[0, 0].tolist() if p < 12}
    early_after = {p for p in late_selected[0, 0].tolist() if p < 12}
    dropped = early_before - early_after
    assert dropped, (data_seed, index_seed, early_before, early_after)
    p = min(dropped)
    assert not torch.allclose(late[0, 0, p], output[0, 0, p])
    assert torch.allclose(late[0, 0, p], cumulative[0, 0, p])


@trains
@pytest.mark.parametrize("data_seed", [2, *range(10, 19)])
# floats compared bit for bit: both sides on one thread (the fixture)
def test_causal_mode_leaks_no_value_but_later_keys_change_the_choice(data_seed, one_thread):
    """Every value fact holds on all of 200 seeds tried; that head 0 has an early chosen query that
    the larger later keys push out is true of the notebook's example and of about 97 % of random
    ones (on the others no early query was chosen, or none was pushed out), so it is stated of the
    example only."""
    _causal_story(data_seed, 3 if data_seed == 2 else data_seed + 100)


# ----------------------------------------------------------------------------- section 6

@trains
# floats compared bit for bit: both sides on one thread (the fixture)
def test_plain_and_fast_agree_under_the_same_sample_on_every_seed(one_thread):
    for seed in SEEDS:
        g = _generator(seed + 6)
        q, k, v = (torch.randn(2, 8, 96, 64, generator=g) for _ in range(3))
        index = sample_keys(96, 96, 25, generator=g)
        plain_output, plain_selected = prob_sparse_attention_plain(q, k, v, index=index)
        fast_output, fast_selected = prob_sparse_attention(q, k, v, index=index)
        assert torch.equal(plain_selected, fast_selected), seed
        assert torch.allclose(plain_output, fast_output, atol=1e-5), seed


def test_the_walkthrough_reproduces_the_informer_codes_printed_shapes():
    plain = walkthrough()
    printed = {
        "K_expand": (32, 8, 96, 96, 64), "index_sample": (96, 25), "K_sample": (32, 8, 96, 25, 64),
        "scores_sample": (32, 8, 96, 25), "M": (32, 8, 96), "selected": (32, 8, 25), "Q_reduce": (32, 8, 25, 64),
        "scores_top": (32, 8, 25, 96), "V_mean": (32, 8, 64), "context_init": (32, 8, 96, 64),
    }
    assert all(plain[name].shape == shape for name, shape in printed.items())
    fast = walkthrough(fast=True)
    assert fast.total_bytes < plain.total_bytes / 10 and plain["K_sample"].bytes > 0.8 * plain.total_bytes
    assert walkthrough(1, 8, 8192, 64, 5)["K_sample"].bytes == 838_860_800
    assert walkthrough(1, 8, 8192, 64, 5, fast=True).total_bytes < 40e6


@trains
def test_lazy_queries_share_one_output_and_send_no_gradient_to_the_query_projection_on_every_seed():
    """Section 4: with queries x @ W_Q, every lazy query of a head gets exactly the same output, a
    loss on the lazy outputs gives W_Q a gradient of exactly 0, one on the chosen outputs does not
    (causal mode: the lazy outputs differ by position, and still no gradient reaches W_Q)."""
    for seed in SEEDS:
        g = _generator(seed + 4)
        x = torch.randn(1, 2, 24, 8, generator=g)
        W_Q = (torch.randn(8, 8, generator=g) / math.sqrt(8)).requires_grad_()
        _, k, v = _inputs(seed)
        for causal in (False, True):
            output, selected = prob_sparse_attention(x @ W_Q, k, v, factor=2, causal=causal, generator=_generator(seed + 1))
            lazy = _lazy(selected, 24)
            from_lazy = torch.autograd.grad(output[lazy].pow(2).sum(), W_Q, retain_graph=True)[0]
            from_chosen = torch.autograd.grad(output[~lazy].pow(2).sum(), W_Q)[0]
            assert (from_lazy == 0).all() and (from_chosen != 0).any(), (seed, causal)
            if not causal:
                for h in range(2):
                    rows = output[0, h][lazy[0, h]]
                    assert (rows == rows[0]).all(), seed


@trains
def test_causal_sampling_chooses_fewer_early_queries_on_every_seed():
    """Section 5, the notebook's setting (random inputs, B = 4, H = 8, L = 96, D = 64, U = u = 25):
    the share of the chosen queries in the first quarter (a quarter when the choice ignores the
    position). Measured over 20 draws, native kernels and ATEN_CPU_CAPABILITY=default alike: causal
    sampling 0.125 to 0.177 (the notebook says < 0.2), sampling from all keys 0.228 to 0.261 (> 0.2),
    the exact causal M̄ 0.046 to 0.081 and below the causal sampling's share on every draw."""
    from course_utils import probsparse_study as study

    causal, every, exact = [], [], []
    for seed in range(20):
        g = _generator(seed)
        q, k, _ = study.random_inputs(4, 8, 96, 64, generator=g)
        causal.append(study.early_share(q, k, causal=True, generator=g))
        every.append(study.early_share(q, k, causal=False, generator=g))
        exact.append((study.exact_measure(q, k, causal=True).topk(25, dim=-1).indices < 24).double().mean().item())
        assert exact[-1] < causal[-1], seed
    print(f"\ncausal {min(causal):.3f}-{max(causal):.3f}, all keys {min(every):.3f}-{max(every):.3f}, "
          f"exact {min(exact):.3f}-{max(exact):.3f}")
    assert max(causal) < 0.19 and min(every) > 0.21
