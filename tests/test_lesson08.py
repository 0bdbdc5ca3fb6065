"""Lesson 08: the facts its notebook states from float arithmetic, on 10 seeds (the notebook uses one
each), the tile explorer (its redraw time, its text in both languages), the tile picture and the
diagram.

The margins in the docstrings were measured on seeds 0-9 under the native kernels (AVX-512 here) and
ATEN_CPU_CAPABILITY=default, with one and with two threads (`make test` runs this module under both
paths): the weakest of the four measurements is given.
"""

import itertools
import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

from course_utils import i18n, viz
from course_teacher import diagrams
from course_utils.tiled import (
    SKIP,
    keep_of,
    materialised_attention,
    online_softmax,
    peak_bytes,
    tile_kinds,
    tiled_attention,
)
from course_utils.validation import ArgumentError
from course_utils.viz.tiled import slope, tile_grid
from course_utils.widgets.tiled import BLOCKS, exact_output, tile_steps, tiles_explorer, tiles_view

SEEDS = range(10)


def _gaps_online_softmax(seed):
    """Section 1: the worst gap to torch.softmax over all 127 cuts of rows like the notebook's."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(4, 8, generator=g, dtype=torch.float64) * 3
    rows[0, [1, 6]] = float("-inf")
    rows[1, :4] = float("-inf")
    rows[3] = float("-inf")
    exact = torch.softmax(rows[:3], -1)
    cuts = [c for n in range(1, 8) for c in itertools.combinations(range(1, 8), n)]
    zero = all(not online_softmax(rows, c)[3].any() for c in cuts)
    return max((online_softmax(rows, c)[:3] - exact).abs().max().item() for c in cuts), zero


@pytest.mark.trains
def test_the_online_softmax_is_torch_softmax_to_1e_15_on_every_cut():
    """Claims: worst gap < 1e-15 (measured: at most 3.3e-16 over 10 seeds; the bar asserted is 5e-16), the fully masked row
    all zeros; the notebook's fixed row of 8 scores to 1e-15 (measured 3.5e-18)."""
    worst = []
    for seed in SEEDS:
        gap, zero = _gaps_online_softmax(seed)
        assert zero
        worst.append(gap)
    assert max(worst) < 1e-15 / 2, worst
    row = torch.tensor([1.0, 3.0, float("-inf"), 0.5, 6.0, 2.0, float("-inf"), 5.5], dtype=torch.float64)
    assert (online_softmax(row, (3, 5)) - torch.softmax(row, -1)).abs().max() < 1e-15 / 2


@pytest.mark.trains
def test_tiled_values_and_gradients_match_sdpa_to_1e_12_in_float64():
    """Claim (section 2): blocks 2×3, 5×7, 16×16, 64×64, float64, to 1e-12 (measured: at most
    2.7e-15 on every path; the bar asserted is 1e-14)."""
    worst = 0.0
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(2, 3, 37, 16, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
        probe = torch.randn(2, 3, 37, 16, generator=g, dtype=torch.float64)
        expected = F.scaled_dot_product_attention(q, k, v)
        expected_grads = torch.autograd.grad((expected * probe).sum(), (q, k, v))
        for block_q, block_k in ((2, 3), (5, 7), (16, 16), (64, 64)):
            output, lse = tiled_attention(q, k, v, block_q=block_q, block_k=block_k)
            grads = torch.autograd.grad((output * probe).sum(), (q, k, v))
            worst = max(worst, (output - expected).abs().max().item(),
                        *[(a - b).abs().max().item() for a, b in zip(grads, expected_grads)])
            assert torch.allclose(lse, torch.logsumexp(q @ k.transpose(-2, -1) / 4, -1))
    assert worst < 1e-12 / 100, worst


@pytest.mark.trains
def test_float32_tiled_outputs_match_sdpa_to_1e_5_with_every_mask():
    """Claims (sections 2–4): float32, L = 256 (the notebook's 1024 and 2048 cost more than this
    test may spend: the gap is one of a row's weighted average, it does not grow with L), causal, a window of 256, two
    documents, and the flash kernel's own output and log-sum-exp, to 1e-5 (measured: at most
    9.5e-7 on every path; the notebook's own L = 2048 case: 1.6e-7; the bar
    asserted is 2.5e-6)."""
    worst = 0.0
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        L = 256
        q, k, v = (torch.randn(1, 8, L, 64, generator=g) for _ in range(3))
        documents = torch.zeros(L, L, dtype=torch.bool)
        documents[:96, :96] = documents[96:, 96:] = True
        documents &= keep_of(L, L, causal=True)
        with torch.no_grad():
            pairs = [
                (tiled_attention(q, k, v, block_q=64, block_k=64)[0], F.scaled_dot_product_attention(q, k, v)),
                (tiled_attention(q, k, v, block_q=128, block_k=128, causal=True)[0],
                 F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                (tiled_attention(q, k, v, block_q=128, block_k=128, causal=True, window=256)[0],
                 F.scaled_dot_product_attention(q, k, v, attn_mask=keep_of(L, L, causal=True, window=256))),
                (tiled_attention(q, k, v, block_q=128, block_k=128, keep_mask=documents)[0],
                 F.scaled_dot_product_attention(q, k, v, attn_mask=documents)),
            ]
            small = [t[..., :64, :32] for t in (q, k, v)]
            flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*small)
            ours = tiled_attention(*small, block_q=16, block_k=16)
        pairs += [(flash[0], ours[0]), (flash[1], ours[1])]
        worst = max(worst, *[(a - b).abs().max().item() for a, b in pairs])
    assert worst < 1e-5 / 4, worst


@pytest.mark.trains
def test_recomputing_the_weights_from_the_lse_is_softmax_to_1e_15():
    """Claim (section 4): exp(S − lse) = softmax(S), float64, to 2e-15 (measured: at most 6.7e-16 on an AMD EPYC's
    native kernels, 5.6e-16 under ATEN_CPU_CAPABILITY=default, with one and two threads; 2.2e-16 on an AVX-512
    machine; the bar asserted is 1e-15)."""
    worst = 0.0
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64) for _ in range(3))
        _, lse = tiled_attention(q, k, v, block_q=32, block_k=32)
        scores = q @ k.transpose(-2, -1) / 4
        worst = max(worst, (torch.exp(scores - lse[..., None]) - torch.softmax(scores, -1)).abs().max().item())
    assert worst < 2e-15 / 2, worst


def test_the_memory_the_notebook_counts_grows_like_l_and_l_squared():
    """Section 2's counts are operator by operator, the same on every path (no float arithmetic):
    checked here at the two shortest lengths and against the notebook's slopes' bounds over
    256 … 1024 (the notebook adds 2048)."""
    lengths, tiled_bytes, plain_bytes = [256, 512, 1024], [], []
    with torch.no_grad():
        for L in lengths:
            q, k, v = (torch.randn(1, 8, L, 64) for _ in range(3))
            tiled_bytes.append(peak_bytes(tiled_attention, q, k, v, block_q=64, block_k=64)[1])
            plain_bytes.append(peak_bytes(materialised_attention, q, k, v)[1])
    assert 0.75 <= slope(lengths, tiled_bytes) <= 1.1 and 1.9 <= slope(lengths, plain_bytes) <= 2.1
    assert plain_bytes[-1] > 20 * tiled_bytes[-1]


def test_the_tile_counts_the_notebook_states():
    L, block = 1024, 128
    documents = torch.zeros(L, L, dtype=torch.bool)
    documents[:384, :384] = documents[384:, 384:] = True
    documents &= keep_of(L, L, causal=True)
    assert int((tile_kinds(L, L, block, block, causal=True) != SKIP).sum()) == 36
    assert int((tile_kinds(L, L, block, block, causal=True, window=256) != SKIP).sum()) == 21
    assert int((tile_kinds(L, L, block, block, keep_mask=documents) != SKIP).sum()) == 21
    n = 8192 // 128
    assert int((tile_kinds(8192, 8192, 128, 128, causal=True) != SKIP).sum()) == n * (n + 1) // 2


# ----------------------------------------------------------------------------- the explorer


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_last_step_of_the_explorer_is_the_exact_output(block, causal):
    steps = tile_steps(block, causal)
    kinds = tile_kinds(8, 8, block, block, causal=causal)
    assert len(steps) == 1 + int((kinds != SKIP).sum())
    states = steps[-1][2]
    output = torch.cat([states[i].acc / states[i].ell[:, None] for i in sorted(states)])
    torch.testing.assert_close(output, exact_output(causal), rtol=0, atol=1e-12)


def test_every_view_of_the_explorer_draws(one_thread):
    """Every block size, both settings, three steps (the first, one inside, past the last: clamped).
    Its redraw time (view and PNG, ≤ 0.3 s on one thread) is measured by hand, not in a test."""
    for block in BLOCKS:
        for causal in (False, True):
            for step in (0, 64):
                figure, text = tiles_view(step, block, causal)
                assert viz.figure_png(figure).startswith(b"\x89PNG") and "m" in text


def test_the_explorer_speaks_chinese():
    i18n.set_language("zh")
    box = tiles_explorer()
    assert "步骤" in box.controls["step"].description and box.controls["block"].description == "块大小"
    _, text = tiles_view(100, 4, True)
    assert "每一行都已完成" in text and "查询" in text
    assert not any(word in text for word in ("step", "query", "rows", "every"))


def test_the_explorer_refuses_bad_arguments():
    with pytest.raises(ArgumentError, match="'block'"):
        tiles_view(0, 3, True)
    with pytest.raises(ArgumentError, match="'step'"):
        tiles_view(-1, 2, True)
    with pytest.raises(ArgumentError, match="'causal'"):
        tiles_explorer(causal="yes")


def test_the_tile_grid_draws_every_tile_and_a_legend():
    matplotlib.use("Agg")
    _figure, axes = viz.new_figure()
    tile_grid(tile_kinds(8, 8, 2, 2, causal=True), ax=axes[0, 0], title="causal", done=3, current=(1, 0))
    assert len(axes[0, 0].patches) == 16 + 1  # the tiles and the red outline
    assert axes[0, 0].get_legend() is not None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_diagram_draws_in_both_languages(lang):
    assert "08_tiling" in diagrams.DIAGRAMS
    data = diagrams.svg("08_tiling", lang)
    assert data.startswith(b"<?xml") and len(data) > 10_000


def test_the_notebook_states_the_bars_of_the_benchmark_consistently():
    """The lesson says causal tiles are about half: n(n + 1) / 2 of n² at L = 8192, blocks of 128."""
    n = 64
    assert math.isclose(n * (n + 1) / 2 / n**2, 0.5078125)


def test_autograd_through_the_tiles_keeps_more_than_an_l_by_l_matrix():
    """Section 4's counts (operator by operator, no float arithmetic): at L = 512, 8 heads, tiles of
    64, the forward without gradients creates 2.5 MB at its peak, less than a third of one
    (1, 8, L, L) float32 matrix (8.4 MB); with autograd, 12.0 MB stay alive, more than one."""
    L = 512
    q, k, v = (torch.randn(1, 8, L, 64) for _ in range(3))
    matrix_bytes = 8 * L * L * 4
    with torch.no_grad():
        forward_only = peak_bytes(tiled_attention, q, k, v, block_q=64, block_k=64)[1]
    with_graph = peak_bytes(tiled_attention, q.requires_grad_(), k, v, block_q=64, block_k=64)[1]
    assert forward_only < matrix_bytes / 3 and with_graph > matrix_bytes


@pytest.mark.trains
def test_merging_right_to_left_gives_the_same_state_and_the_backward_row_sums_agree():
    """Section 1's new claim (the pieces merged right to left give the same m and ℓ, to 1e-14) on the
    notebook's row (measured: 0) and on 10 random rows like section 1's; section 4's (Σ_j P dP = Σ_c dO O
    per row, float64, to 1e-12) on seeds 0–9 with the notebook's shapes. Measured under the native
    kernels and ATEN_CPU_CAPABILITY=default, one thread: ℓ at most 8.9e-16 apart (200 random rows; the
    bar asserted is 2.5e-15), the row sums at most 1.8e-15 (the bar asserted is 1e-14)."""
    from course_utils.tiled import piece_state

    def merged(row, pieces):
        m, ell = torch.tensor(float("-inf"), dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
        for start, stop in pieces:
            piece = piece_state(row[start:stop])
            top = torch.maximum(m, piece.m)
            ell = ell * torch.exp(m - top) + piece.ell * torch.exp(piece.m - top)
            m = top
        return m, ell

    rows = [torch.tensor([1.0, 3.0, float("-inf"), 0.5, 6.0, 2.0, float("-inf"), 5.5], dtype=torch.float64)]
    rows += [torch.randn(8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3 for seed in SEEDS]
    for row in rows:
        forward, backward = merged(row, ((0, 3), (3, 5), (5, 8))), merged(row, ((5, 8), (3, 5), (0, 3)))
        assert forward[0] == backward[0] and (forward[1] - backward[1]).abs() < 1e-14 / 4
    worst = 0.0
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64) for _ in range(3))
        output, _ = tiled_attention(q, k, v, block_q=32, block_k=32)
        d_output = torch.randn(1, 2, 100, 16, generator=g, dtype=torch.float64)
        scores = q @ k.transpose(-2, -1) / 4
        per_row = (torch.softmax(scores, -1) * (d_output @ v.transpose(-2, -1))).sum(-1)
        worst = max(worst, (per_row - (d_output * output).sum(-1)).abs().max().item())
    assert worst < 1e-12 / 100, worst


def test_skipped_tiles_cut_the_multiply_adds_in_proportion():
    """Section 3's count (shapes alone fix it): on L = 1024, tiles of 128, the matrix products of the
    causal loop do 36/64 of the full loop's multiply-adds, the window of 256 and the two documents 21/64."""
    from torch.utils.flop_counter import FlopCounterMode

    L, block = 1024, 128
    documents = torch.zeros(L, L, dtype=torch.bool)
    documents[:384, :384] = documents[384:, 384:] = True
    documents &= keep_of(L, L, causal=True)
    q, k, v = (torch.randn(1, 1, L, 64) for _ in range(3))

    def multiply_adds(**masking):
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            tiled_attention(q, k, v, block_q=block, block_k=block, **masking)
        return counter.get_total_flops() // 2

    every = multiply_adds()
    assert 64 * multiply_adds(causal=True) == 36 * every
    assert 64 * multiply_adds(causal=True, window=256) == 64 * multiply_adds(keep_mask=documents) == 21 * every


# ----------------------------------------------------------------------------- section 2: the baseline and time


def _plain_attention(q, k, v):
    """The notebook's textbook line."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _in_place_attention(q, k, v):
    """The notebook's textbook line with its softmax in place."""
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
    scores.sub_(scores.amax(-1, keepdim=True)).exp_()
    return scores.div_(scores.sum(-1, keepdim=True)) @ v


def test_the_l_by_l_matrices_each_version_holds_at_its_peak():
    """Section 2's counts (operator by operator, the same on every path): at L = 1024, 2 heads of 64,
    materialised_attention holds 3.00 (1, 2, L, L) matrices at its peak, the textbook line 2.00, PyTorch's
    math kernel 2.06, the in-place line 1.06 (0.06: the output, L·d of L·L numbers); and the in-place line
    is attention."""
    L = 1024
    q, k, v = (torch.randn(1, 2, L, 64) for _ in range(3))
    matrix = 2 * L * L * 4
    with torch.no_grad():
        counts = [peak_bytes(f, q, k, v)[1] / matrix for f in (
            materialised_attention, _plain_attention, torch.ops.aten._scaled_dot_product_attention_math,
            _in_place_attention)]
        torch.testing.assert_close(_in_place_attention(q, k, v), F.scaled_dot_product_attention(q, k, v),
                                   rtol=0, atol=1e-5)
    assert [round(c, 2) for c in counts] == [3.00, 2.00, 2.06, 1.06] and counts[1] == 2


def test_the_textbook_line_needs_thirty_times_the_tiled_memory_at_2048():
    """Section 2's headline: 1/30 at L = 2048 (measured 30.1). Every count is a multiple of the number of
    heads, so 2 heads give the notebook's ratio for 8 at a quarter of the memory."""
    q, k, v = (torch.randn(1, 2, 2048, 64) for _ in range(3))
    with torch.no_grad():
        ratio = peak_bytes(_plain_attention, q, k, v)[1] / peak_bytes(tiled_attention, q, k, v, block_q=64,
                                                                         block_k=64)[1]
    assert 25 < ratio < 35 and round(ratio) == 30


@pytest.mark.trains
def test_the_tiled_loop_with_large_tiles_beats_materialised_attention_on_one_thread(one_thread):
    """Section 2's time claim: the loop over 256 × 256 tiles takes less time than materialised_attention
    (L = 2048, 4 heads of 64, one thread, best of two, the versions taking turns). Measured on a 2-core
    AMD EPYC under load from other jobs, the ratio was 0.35–0.40 (native kernels) and 0.46–0.58
    (ATEN_CPU_CAPABILITY=default); the bar asserted is 0.8."""
    import time

    q, k, v = (torch.randn(1, 4, 2048, 64) for _ in range(3))
    runs = {"tiled": lambda: tiled_attention(q, k, v, block_q=256, block_k=256),
            "materialised": lambda: materialised_attention(q, k, v)}
    best = {name: math.inf for name in runs}
    with torch.no_grad():
        for _ in range(3):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - start)
    assert best["tiled"] < 0.8 * best["materialised"], best


# ----------------------------------------------------------------------------- section 4: the backward


@pytest.mark.trains
def test_flash_attentions_backward_gives_sdpas_gradients_to_1e_12_in_float64():
    """Section 4's claim (the notebook's three shapes, float64, to 1e-12), on 10 seeds, with the lse's
    gradient too, a window and a keep mask with a fully masked row (its gradients are 0, never NaN).
    Measured: at most 3.1e-15 (native kernels) and 2.7e-15 (ATEN_CPU_CAPABILITY=default); the bar asserted
    is 1e-13."""
    from course_utils.tiled import flash_attention

    worst = 0.0
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        for L_q, L_k, block_q, block_k, causal in ((37, 37, 5, 7, False), (37, 37, 8, 3, True), (13, 29, 4, 6, False)):
            q = torch.randn(2, 3, L_q, 16, generator=g, dtype=torch.float64, requires_grad=True)
            k, v = (torch.randn(2, 3, L_k, 16, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
            probe = torch.randn(2, 3, L_q, 16, generator=g, dtype=torch.float64)
            probe_lse = torch.randn(2, 3, L_q, generator=g, dtype=torch.float64)
            output, lse = flash_attention(q, k, v, block_q=block_q, block_k=block_k, causal=causal)
            ours = torch.autograd.grad((output * probe).sum() + (lse * probe_lse).sum(), (q, k, v))
            expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            scores = q @ k.transpose(-2, -1) / 4
            if causal:
                scores = scores.masked_fill(torch.ones(L_q, L_k, dtype=torch.bool).triu(1), float("-inf"))
            theirs = torch.autograd.grad((expected * probe).sum() + (torch.logsumexp(scores, -1) * probe_lse).sum(),
                                         (q, k, v))
            worst = max(worst, (output - expected).abs().max().item(),
                        *[(a - b).abs().max().item() for a, b in zip(ours, theirs)])
        # a window, and a keep mask that hides every key from query 2
        q, k, v = (torch.randn(1, 2, 19, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
        keep = keep_of(19, 19, causal=True, window=5) & torch.ones(19, 19, dtype=torch.bool).index_fill(0, torch.tensor(2), False)
        output, _ = flash_attention(q, k, v, block_q=4, block_k=3, causal=True, window=5, keep_mask=keep)
        ours = torch.autograd.grad(output.sum(), (q, k, v))
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        theirs = torch.autograd.grad(expected.sum(), (q, k, v))
        assert (ours[0][:, :, 2] == 0).all() and all(g.isfinite().all() for g in ours)
        worst = max(worst, *[(a - b).abs().max().item() for a, b in zip(ours, theirs)])
    assert worst < 1e-12 / 10, worst


def test_a_training_steps_memory_grows_like_l_with_flash_attention_and_like_l_squared_without():
    """Section 4's counts (operator by operator, no float arithmetic): forward and backward, 2 heads of 64,
    tiles of 64, L = 512 → 1024: flash_attention's peak grows 1.8×, autograd through the tiles 3.1×, through the
    textbook line 3.8×; at L = 1024 flash_attention needs 1/11 of the textbook line's memory and less than a
    fifth of autograd through the tiles."""
    from course_utils.tiled import flash_attention

    versions = {"flash": lambda q, k, v: flash_attention(q, k, v, block_q=64, block_k=64)[0],
                "tiles": lambda q, k, v: tiled_attention(q, k, v, block_q=64, block_k=64)[0],
                "plain": _plain_attention}
    counted = {name: [] for name in versions}
    for L in (512, 1024):
        q, k, v = (torch.randn(1, 2, L, 64, requires_grad=True) for _ in range(3))
        d_output = torch.randn(1, 2, L, 64)
        for name, attention in versions.items():
            step = lambda q, k, v, attention=attention: torch.autograd.grad(attention(q, k, v), (q, k, v), d_output)
            counted[name].append(peak_bytes(step, q, k, v)[1])
    grows = {name: c[1] / c[0] for name, c in counted.items()}
    assert 1.7 <= grows["flash"] <= 2.1 and grows["tiles"] >= 2.8 and 3.7 <= grows["plain"] <= 4.1, grows
    assert counted["plain"][1] / counted["flash"][1] > 8 and 5 * counted["flash"][1] < counted["tiles"][1]


def test_tiled_backward_refuses_what_does_not_fit_the_forward():
    from course_utils.tiled import tiled_backward

    q, k, v = (torch.randn(1, 5, 4) for _ in range(3))
    output, lse = tiled_attention(q, k, v, block_q=2, block_k=2)
    with pytest.raises(ArgumentError, match="'lse'"):
        tiled_backward(q, k, v, output, lse[..., :4], output)
    with pytest.raises(ArgumentError, match="'d_output'"):
        tiled_backward(q, k, v, output, lse, output.double())
    with pytest.raises(ArgumentError, match="'d_lse'"):
        tiled_backward(q, k, v, output, lse, output, d_lse=lse[..., :3])
    with pytest.raises(ArgumentError, match="'block_k'"):
        tiled_backward(q, k, v, output, lse, output, block_k=0)


def test_peak_bytes_counts_an_in_place_result_once():
    """An in-place operator returns the tensor it was given: it is no new tensor (and holding it twice
    once crashed the count, a weak reference comparing two tensors)."""
    def grow():
        x = torch.zeros(1000)
        x += 1
        x.mul_(2)
        return x

    assert peak_bytes(grow)[1] == 4000


def test_the_explorers_slider_ends_at_the_last_tile_of_each_tiling():
    box = tiles_explorer(block=2, causal=False)
    step, block, causal = (box.controls[name] for name in ("step", "block", "causal"))
    assert step.max == 16
    step.value = 16
    block.value = 8
    assert (step.max, step.value) == (1, 1)
    causal.value = True
    block.value = 1
    assert step.max == 36 == len(tile_steps(1, True)) - 1
