"""Lessons 01 and 02: why divide by √d_k, and padding and causal masks."""

import functools
import math

import ipywidgets as w
import numpy as np
import torch

from .. import masks, validation
from ..i18n import message
from ..viz import heatmap, keep_layout, mask_picture, new_figure
from ..viz.figures import LayoutPerKey
from .explorer import explorer, reusable

# ---- lesson 01: why divide by √d_k

#: The d_k values the scaling explorer offers: the powers of two from 1 to 512.
D_K_CHOICES = tuple(2**power for power in range(10))


@functools.lru_cache(maxsize=16)
def _scaling_scores(d_k, queries, keys, seed):
    """The unscaled scores q · k of ``scaling_view`` (N, L_k): the same for both positions of the
    checkbox, so ticking it recomputes nothing."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(queries, 1, d_k, generator=generator, dtype=torch.float64)  # (N, 1, d_k)
    k = torch.randn(queries, keys, d_k, generator=generator, dtype=torch.float64)  # (N, L_k, d_k): own keys
    return (q @ k.transpose(-2, -1)).squeeze(-2)  # (N, L_k)


def scaling_view(d_k=64, scaled=False, queries=256, keys=16, seed=0, figure=None):
    """Why attention divides by √d_k, for one d_k: how spread out the scores q · k are, and how
    sharp a query's softmax over `keys` keys becomes, with or without the division.

    Draws `queries` random queries of size d_k and `keys` random keys for each of them, every
    entry standard normal, from a generator seeded with `seed` (so a view never changes), in
    float64 (so the rounded numbers of the summary are the same on every machine).

    Returns ``(figure, summary)``: the figure shows the histogram of all queries x keys scores
    beside the standard normal curve, and query 0's softmax weights; the summary states the
    scores' standard deviation, query 0's largest weight and the largest weight averaged over
    all queries (1/keys would be uniform attention, 1 a one-hot lookup). figure: one this view
    returned before, drawn again instead of a new one (what the explorer passes).
    """
    validation.positive_int("scaling_view", "d_k", d_k)
    validation.flag("scaling_view", "scaled", scaled)
    scores = _scaling_scores(d_k, queries, keys, seed)  # (N, L_k)
    if scaled:
        scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=-1)  # (N, L_k)
    std = scores.std().item()
    largest = weights.amax(dim=-1)  # (N,)
    mode = message("l01.scaled" if scaled else "l01.unscaled")

    figure = reusable(figure, "scaling")
    if figure is None:  # drawn once; later views replace only what the scores change
        figure = _scaling_figure(keys)
    left, right = figure.axes[:2]
    reach = max(4.0, 4.0 * std)  # the x-range follows the scores, so the normal curve shrinks as they spread
    # the histogram: one filled outline whose data is replaced (40 bars made anew, and the data limits
    # measured over them, cost as much as the rest of the view); its limits computed, with autoscale's margins
    density, edges = np.histogram(scores.flatten().numpy(), bins=HISTOGRAM_BINS, range=(-reach, reach), density=True)
    left.patches[0].set_data(density, edges)
    x = torch.linspace(-reach, reach, 400)
    left.lines[0].set_data(x.numpy(), (torch.exp(-x**2 / 2) / math.sqrt(2 * math.pi)).numpy())
    top = max(float(density.max()), 1 / math.sqrt(2 * math.pi))
    left.set_xlim(-reach * 1.1, reach * 1.1)
    left.set_ylim(0, top * 1.05)
    left.set_title(message("l01.scores_title", n=scores.numel(), mode=mode), fontsize=10)
    for bar, weight in zip(right.patches, weights[0].tolist()):
        bar.set_height(weight)
    summary = message(
        "l01.scaling_summary",
        d_k=d_k,
        mode=mode,
        std=std,
        top=largest[0].item(),
        queries=queries,
        mean_top=largest.mean().item(),
    )
    return figure, summary


#: The bins of the scores' histogram.
HISTOGRAM_BINS = 40


def _scaling_figure(keys):
    """The scaling view's figure with what no control changes: the axes, their labels, the normal
    curve (its data set by the view), `keys` bars of query 0's weights (heights set by the view),
    the uniform line and the legends. The texts that change with d_k (tick labels, the left title)
    move the axes among a few layouts, each computed once (LayoutPerKey)."""
    figure, (axes,) = new_figure(rows=1, cols=2, size=(9.0, 3.4))
    figure.set_layout_engine(LayoutPerKey(_scaling_layout_key))
    figure.explorer_key = "scaling"
    left, right = axes
    left.stairs(np.zeros(HISTOGRAM_BINS), np.linspace(-1, 1, HISTOGRAM_BINS + 1), fill=True, color="tab:blue", alpha=0.7)
    left.plot([], [], "k--", lw=1, label=message("l01.standard_normal"))
    left.set_xlabel(message("l01.score"))
    left.set_ylabel(message("l01.density"))
    left.legend(loc="upper right", fontsize=10)
    right.bar(range(keys), [0.0] * keys, color="tab:orange")
    right.axhline(1 / keys, color="gray", ls=":", lw=1, label=message("l01.uniform", keys=keys))
    right.set_ylim(0, 1)
    right.set_xticks(range(0, keys, max(1, keys // 8)))
    right.set_xlabel(message("plot.key"))
    right.set_ylabel(message("l01.weight"))
    right.set_title(message("l01.weights_title", keys=keys), fontsize=10)
    right.legend(loc="upper right", fontsize=10)
    return figure


def _scaling_layout_key(figure):
    """What the scaling figure's layout depends on: the left axes' title and y tick labels (their
    width sets its left margin; the right axes' texts never change). Its x tick labels, whatever
    the scores' range, have the same height and sit well inside the margins (tests check that a
    redraw matches a new figure's layout)."""
    left = figure.axes[0]
    # the labels as the locator and formatter make them for the limits now (a label read off the axis
    # may still be the last drawing's)
    formatter, ticks = left.yaxis.get_major_formatter(), left.yaxis.get_major_locator()()
    return left.get_title(), tuple(formatter.format_ticks(ticks))


def scaling_explorer(d_k=64, scaled=False):
    """A d_k slider (1 to 512, powers of two) and a "divide by √d_k" checkbox over ``scaling_view``."""
    if not isinstance(d_k, int) or isinstance(d_k, bool) or d_k not in D_K_CHOICES:
        validation.fail("scaling_explorer", "d_k", validation.describe(d_k),
                        {"en": f"one of the slider's sizes, {', '.join(map(str, D_K_CHOICES))}",
                         "zh": f"滑块上的大小之一：{'、'.join(map(str, D_K_CHOICES))}"})
    validation.flag("scaling_explorer", "scaled", scaled)
    return explorer(
        scaling_view,
        d_k=w.SelectionSlider(options=D_K_CHOICES, value=d_k, description="d_k", continuous_update=False),
        scaled=w.Checkbox(value=scaled, description=message("l01.divide_by_sqrt"), indent=False),
    )


# ---- lesson 02: padding and causal masks


#: The padded length of the mask explorer's batch of two sequences.
MASK_MAX_LEN = 6


def mask_view(length_1=6, length_2=3, causal=False, max_len=MASK_MAX_LEN, seed=0, figure=None):
    """The mask explorer's view: a batch of two sequences of lengths `length_1` and `length_2`,
    padded to `max_len`, with the look-ahead (causal) mask on or off.

    Builds the keep mask, padding_mask (B, 1, 1, L) & causal_mask (L, L) when `causal`, and the
    attention weights it gives to fixed random queries and keys (a generator seeded with `seed`,
    so the view never changes). Returns ``(figure, summary)``: the figure shows each sequence's
    mask beside its weights; the summary says how many keys each query may see and how many rows
    are fully masked (their weights are all zero). figure: one this view returned before, whose
    four pictures are updated in place (what the explorer passes; faster than a new figure).
    """
    validation.flag("mask_view", "causal", causal)
    for argument, value in (("length_1", length_1), ("length_2", length_2)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= max_len:
            validation.fail("mask_view", argument, validation.describe(value),
                            {"en": f"an int from 0 to {max_len}", "zh": f"0 到 {max_len} 之间的整数"})
    lengths = torch.tensor([length_1, length_2])
    keep = masks.padding_mask(lengths, max_len)  # (B, 1, 1, L)
    if causal:
        keep = keep & masks.causal_mask(max_len)  # (B, 1, L, L)
    keep = keep.expand(2, 1, max_len, max_len)[:, 0]  # (B, L_q, L_k): one picture per sequence
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, max_len, 4, generator=generator, dtype=torch.float64)
    k = torch.randn(2, max_len, 4, generator=generator, dtype=torch.float64)
    weights = masks.masked_softmax(q @ k.transpose(-2, -1) / 2.0, keep)  # (B, L_q, L_k); √d_k = 2

    figure = reusable(figure, ("mask", max_len))
    if figure is None:  # drawn once; later views only change the four pictures' pixels
        figure, axes = new_figure(rows=2, cols=2, size=(7.5, 6.0))
        blank = torch.zeros(max_len, max_len)
        for b in range(2):
            mask_picture(blank, ax=axes[b, 0], title=message("l02.plot.mask_title", n=b + 1))
            heatmap(blank, ax=axes[b, 1], title=message("l02.plot.weights_title", n=b + 1), vmax=1.0, annotate=False)
        keep_layout(figure)
        figure.explorer_key = ("mask", max_len)
    for b in range(2):
        figure.axes[2 * b].images[0].set_data(keep[b].float().numpy())
        figure.axes[2 * b + 1].images[0].set_data(weights[b].numpy())
    lines = [message("l02.summary", lengths=(length_1, length_2), causal=message("l02.on" if causal else "l02.off"))]
    for b in range(2):
        lines.append(message("l02.visible", n=b + 1, counts=keep[b].sum(dim=-1).tolist()))
    lines.append(message("l02.hidden_rows", count=int((~keep.any(dim=-1)).sum())))
    return figure, "\n".join(lines)


def mask_explorer(length_1=6, length_2=3, causal=False):
    """Two length sliders (0 to MASK_MAX_LEN) and a causal checkbox over ``mask_view``."""
    validation.whole_number("mask_explorer", "length_1", length_1, 0, MASK_MAX_LEN)
    validation.whole_number("mask_explorer", "length_2", length_2, 0, MASK_MAX_LEN)
    validation.flag("mask_explorer", "causal", causal)

    def slider(value, n):
        return w.IntSlider(value=value, min=0, max=MASK_MAX_LEN, description=message("l02.sequence", n=n),
                           continuous_update=False)

    return explorer(
        mask_view,
        length_1=slider(length_1, 1),
        length_2=slider(length_2, 2),
        causal=w.Checkbox(value=causal, description=message("l02.causal"), indent=False),
    )
