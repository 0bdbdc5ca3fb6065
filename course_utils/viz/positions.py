"""Pictures of positions and of post-norm against pre-norm (lesson 06): the sinusoidal encoding as a
heatmap and as curves, the dot product of two positions' encodings against their offset, the
gradient that reaches each layer of a post-norm and a pre-norm stack, and the training loss and
learning rate of deeper post-norm and pre-norm models trained with and without a warm-up."""

import numpy as np
import torch

from .. import validation as check
from ..i18n import message
from .figures import axes_for

#: The colours of the two norm orders, wherever they are drawn side by side.
POST_COLOUR, PRE_COLOUR = "#c0392b", "#2b7bba"


def _table(function, table):
    """`table` (a tensor or array of L rows, E columns) as a float numpy array."""
    try:
        values = table.detach().cpu().double().numpy() if isinstance(table, torch.Tensor) else np.asarray(table)
    except (TypeError, ValueError, RuntimeError):
        values = None
    if values is not None and values.ndim == 2 and 0 not in values.shape and values.dtype.kind in "fiu":
        return values.astype(float)
    check.fail(function, "table", check.describe(table),
               {"en": "a 2-D (L, E) table of numbers: one row per position, one column per feature",
                "zh": "二维 (L, E) 数值表：每个位置一行，每个特征一列"})


def _ints(function, argument, values, low, high):
    """`values` as a list of ints in [low, high) (a non-empty list, tuple or range)."""
    items = list(values) if isinstance(values, (list, tuple, range)) else None
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) and low <= v < high for v in items):
        check.fail(function, argument, check.describe(values),
                   {"en": f"a non-empty list of ints from {low} to {high - 1}",
                    "zh": f"非空的整数列表，每个数在 {low} 到 {high - 1} 之间"})
    return items


def encoding_heatmap(table, ax=None, title=None):
    """Draw a positional-encoding table, (L, E): one row per position (top to bottom), one column per
    feature, from -1 (blue) through 0 (white) to 1 (red), with a colour bar. The default title names
    its size. Returns ax."""
    values = _table("encoding_heatmap", table)
    length, width = values.shape
    ax = axes_for(ax, (5.0, 4.0))
    image = ax.imshow(values, cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xlabel(message("viz.positions.feature"))
    ax.set_ylabel(message("viz.positions.position"))
    ax.set_title(title if title is not None else message("viz.positions.table_title", length=length, width=width),
                 fontsize=10)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def encoding_curves(table, features, ax=None, title=None):
    """Draw some features of an (L, E) encoding table against the position, one line each, labelled
    with the feature's number and whether it is a sine (even feature) or a cosine (odd feature), as
    in ``transformer.sinusoidal_encoding``. features: the column numbers to draw. Returns ax."""
    values = _table("encoding_curves", table)
    length, width = values.shape
    columns = _ints("encoding_curves", "features", features, 0, width)
    ax = axes_for(ax, (6.0, 3.2))
    positions = np.arange(length)
    for j in columns:
        kind = message("viz.positions.sine" if j % 2 == 0 else "viz.positions.cosine")
        ax.plot(positions, values[:, j], label=message("viz.positions.curve", feature=j, kind=kind), linewidth=1.4)
    ax.set_xlim(0, length - 1)
    ax.set_xlabel(message("viz.positions.position"))
    ax.set_ylabel(message("viz.positions.value"))
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10, loc="lower left")
    return ax


def offset_dot_products(table, starts, max_offset, ax=None, title=None):
    """Draw, for each start position p in `starts`, the dot product PE[p] · PE[p + k] of two rows of
    an (L, E) encoding table against the offset k = 0 … max_offset. When the lines lie on top of each
    other, the dot product depends on the offset k only, not on where the pair starts. Every
    p + max_offset must be a row of the table. Returns ax."""
    values = _table("offset_dot_products", table)
    length = values.shape[0]
    if isinstance(max_offset, bool) or not isinstance(max_offset, int) or not 0 < max_offset < length:
        check.fail("offset_dot_products", "max_offset", check.describe(max_offset),
                   {"en": f"an int from 1 to {length - 1} (the table has {length} positions)",
                    "zh": f"1 到 {length - 1} 之间的整数（表中有 {length} 个位置）"})
    first = _ints("offset_dot_products", "starts", starts, 0, length - max_offset)
    ax = axes_for(ax, (6.0, 3.2))
    offsets = np.arange(max_offset + 1)
    for n, p in enumerate(first):
        dots = values[p + offsets] @ values[p]  # (max_offset + 1,): PE[p + k] · PE[p]
        ax.plot(offsets, dots, label=message("viz.positions.start", p=p), linewidth=3.2 - 2.2 * n / max(1, len(first) - 1),
                alpha=0.85)
    ax.axhline(0, color="0.6", linewidth=0.8)
    ax.set_xlim(0, max_offset)
    ax.set_xlabel(message("viz.positions.offset"))
    ax.set_ylabel(message("viz.positions.dot"))
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10)
    return ax


def _sizes(argument, given):
    """`given` (a tensor, array or list of N + 1 positive numbers) as a 1-D float numpy array."""
    try:
        values = given.detach().cpu().double().numpy() if isinstance(given, torch.Tensor) else np.asarray(given, dtype=float)
    except (TypeError, ValueError, NotImplementedError):  # NotImplementedError: a meta tensor, no values to read
        values = None
    if values is None or values.ndim != 1 or len(values) < 2 or not (np.isfinite(values) & (values > 0)).all():
        check.fail("gradient_by_layer", argument, check.describe(given),
                   {"en": "a 1-D sequence of N + 1 ≥ 2 positive gradient sizes, one per x_n (n = 0 … N)",
                    "zh": "一维序列，含 N + 1 ≥ 2 个正的梯度大小，每个 x_n（n = 0 … N）一个"})
    return values


def gradient_by_layer(post, pre, ax=None, title=None):
    """Draw the gradient that reaches each layer's input in a post-norm and a pre-norm stack, divided
    by the gradient at the top of the stack (so both lines end at 1), with a dashed line at 1.

    Args:
        post, pre: (N + 1,) sizes ‖∂loss/∂x_n‖ for n = 0 … N, x_N the top (``norm_study.LayerGradients.inputs``),
            the same N for both.
        ax: optional Axes. title: optional title.

    Returns ax.
    """
    pre_given = pre
    post, pre = _sizes("post", post), _sizes("pre", pre)
    if len(pre) != len(post):
        check.fail("gradient_by_layer", "pre", check.describe(pre_given),
                   {"en": f"as many sizes as post ({len(post)}): the same number of layers",
                    "zh": f"与 post 一样多的数（{len(post)} 个）：层数相同"})
    ax = axes_for(ax, (6.0, 3.4))
    layers = np.arange(len(post))
    ax.plot(layers, pre / pre[-1], marker="o", markersize=3, color=PRE_COLOUR, label=message("viz.positions.pre"))
    ax.plot(layers, post / post[-1], marker="o", markersize=3, color=POST_COLOUR, label=message("viz.positions.post"))
    ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1)
    ax.set_xlim(0, len(post) - 1)
    ax.set_xlabel(message("viz.positions.layer_axis"))
    ax.set_ylabel(message("viz.positions.gradient_axis"))
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10)
    return ax


def _runs(runs):
    """`runs` as a list of warm-up runs (objects with norm_first, warmup, losses and rates, such as
    ``norm_study.WarmupRun``), all of the same length."""
    items = list(runs) if isinstance(runs, (list, tuple)) else None
    fields = ("norm_first", "warmup", "losses", "rates")
    if not items or not all(all(hasattr(run, name) for name in fields) for run in items) or len(
            {len(run.losses) for run in items} | {len(run.rates) for run in items}) != 1:
        check.fail("warmup_curves", "runs", check.describe(runs),
                   {"en": "a non-empty list of norm_study.warmup_run results, all of the same length",
                    "zh": "非空列表，每一项都是 norm_study.warmup_run 的结果，步数相同"})
    return items


def warmup_curves(runs, axes=None):
    """Draw some ``norm_study.warmup_run`` results: on the left the training loss at every step (log
    scale), one line per run, post-norm red and pre-norm blue, dashed with a warm-up; on the right the
    learning rate at every step, once for each schedule (without warm-up, with it).

    Args:
        runs: a list of ``norm_study.WarmupRun``.
        axes: optional pair of Axes (loss, learning rate); a new 1 × 2 figure when None.

    Returns the pair of Axes.
    """
    items = _runs(runs)
    if axes is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")[1]
    from matplotlib.axes import Axes

    if not (isinstance(axes, (list, tuple, np.ndarray)) and len(axes) == 2 and all(isinstance(a, Axes) for a in axes)):
        check.fail("warmup_curves", "axes", check.describe(axes),
                   {"en": "None or a pair of matplotlib Axes (the loss's, the learning rate's)",
                    "zh": "None，或一对 matplotlib Axes（画损失的和画学习率的）"})
    loss_ax, rate_ax = axes
    steps = np.arange(1, len(items[0].losses) + 1)
    for run in items:
        order = message("viz.positions.pre" if run.norm_first else "viz.positions.post")
        label = message("viz.warmup.with" if run.warmup else "viz.warmup.without", order=order, steps=run.warmup)
        loss_ax.plot(steps, run.losses, color=PRE_COLOUR if run.norm_first else POST_COLOUR,
                     linestyle="--" if run.warmup else "-", linewidth=1.4, label=label)
    loss_ax.set_yscale("log")
    from matplotlib.ticker import LogLocator, NullLocator, ScalarFormatter

    loss_ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))  # 0.5, 1, 2, 3: plain numbers, not 2 × 10⁰
    loss_ax.yaxis.set_major_formatter(ScalarFormatter())
    loss_ax.yaxis.set_minor_locator(NullLocator())
    loss_ax.set_xlim(1, steps[-1])
    loss_ax.set_xlabel(message("viz.warmup.step"))
    loss_ax.set_ylabel(message("viz.warmup.loss"))
    loss_ax.legend(fontsize=10)
    drawn = set()
    for run in items:
        if run.warmup in drawn:
            continue
        drawn.add(run.warmup)
        label = message("viz.warmup.schedule_with" if run.warmup else "viz.warmup.schedule_without", steps=run.warmup)
        rate_ax.plot(steps, run.rates, color="0.25", linestyle="--" if run.warmup else "-", linewidth=1.4, label=label)
    rate_ax.set_xlim(1, steps[-1])
    rate_ax.set_ylim(bottom=0)
    rate_ax.set_xlabel(message("viz.warmup.step"))
    rate_ax.set_ylabel(message("viz.warmup.rate"))
    rate_ax.legend(fontsize=10)
    return loss_ax, rate_ax
