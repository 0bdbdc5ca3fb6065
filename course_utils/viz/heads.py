"""One attention map per head, and cost curves (lesson 04)."""

import numpy as np
import torch
from matplotlib import ticker

from matplotlib.axes import Axes

from .. import validation as check
from ..i18n import message
from .figures import array_of, heatmap
from .probsparse import byte_tick

# ---- lesson 04: one map per head, and cost curves


#: The most maps a grid draws, one heatmap each.
MAX_MAPS = 64


def head_grid(maps, axes=None, queries=None, keys=None, row_titles=None, head_title="l04.plot.head"):
    """Draw attention maps, one per head: `maps` is (H, L_q, L_k) for one row of H maps, or
    (R, H, L_q, L_k) for R rows (e.g. one per example or per model). Each map is a heatmap on the
    colour range [0, 1]; the columns are titled with the head's number, the rows with
    `row_titles`. axes: an (R, H) array of Axes (default: a new pyplot figure). Returns the axes."""
    given = maps
    ndim = maps.ndim if isinstance(maps, torch.Tensor) else np.ndim(maps) if isinstance(maps, (list, tuple, np.ndarray)) else 0
    maps = torch.from_numpy(array_of("head_grid", "maps", maps, 3 if ndim == 3 else 4, "(H, L_q, L_k) / (R, H, L_q, L_k)"))
    if maps.ndim == 3:
        maps = maps.unsqueeze(0)
    if maps.shape[0] * maps.shape[1] > MAX_MAPS:
        check.fail("head_grid", "maps", check.describe(given),
                   {"en": f"at most {MAX_MAPS} maps to draw", "zh": f"要画的注意力图不超过 {MAX_MAPS} 张"})
    rows, heads = maps.shape[:2]
    if axes is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        _, axes = plt.subplots(rows, heads, figsize=(2.6 * heads + 0.4, 2.5 * rows + 0.3), squeeze=False,
                               layout="constrained")
    axes = np.asarray(axes).reshape(rows, heads)
    for r in range(rows):
        for h in range(heads):
            ax = axes[r, h]
            heatmap(maps[r, h], ax=ax, queries=queries, keys=keys, vmax=1.0, annotate=False, colorbar=False)
            ax.set_title(message(head_title, h=h), fontsize=10)
            if h:
                ax.set_ylabel("")
            if row_titles is not None and h == 0:
                ax.set_ylabel(f"{row_titles[r]}\n{message('plot.query')}")
    return axes


def cost_lines(ax, xs, series, xlabel, ylabel, title=None, logy=True, in_bytes=False):
    """Draw one line per entry of `series` ({label: [y for each x]}) against `xs`, with markers, a
    log-scaled y axis (costs span decades) and a legend. in_bytes: the values are byte counts,
    and the y ticks say so in units that fit them ("500 kB", "2 MB", "10 GB"). Returns ax.

    The y axis gets at least three labelled ticks, written as plain numbers (or bytes): evenly
    spaced ones when the values span less than a factor of 3, then 1, 1.5, 2, 3, 5 and 7 times a
    power of ten, 1, 2, 5 times one when they span more than a factor of 30, and the powers of ten
    alone past a factor of 1000. (A plain log axis whose values stay within one decade shows a
    single tick, or none.)"""
    function = "cost_lines"
    if not isinstance(ax, Axes):
        check.fail(function, "ax", check.describe(ax), {"en": "a matplotlib Axes", "zh": "matplotlib 的 Axes"})
    if not all(x > 0 for x in array_of(function, "xs", xs, 1, "(n,)")):
        check.fail(function, "xs", check.describe(xs), {"en": "positive sizes (a log₂ axis)", "zh": "正的大小（log₂ 坐标轴）"})
    if not isinstance(series, dict) or not all(isinstance(label, str) for label in series):
        check.fail(function, "series", check.describe(series),
                   {"en": "a dict {label: [y for each x]}", "zh": "字典 {标签: [每个 x 对应的 y]}"})
    if any(len(array_of(function, "series", ys, 1, f"({len(xs)},)")) != len(xs) for ys in series.values()):
        check.fail(function, "series", check.describe(series),
                   {"en": f"{len(xs)} values per label, one per x", "zh": f"每个标签 {len(xs)} 个值，每个 x 一个"})
    check.flag(function, "logy", logy)
    check.flag(function, "in_bytes", in_bytes)
    for argument, value in (("xlabel", xlabel), ("ylabel", ylabel)):
        if not isinstance(value, str):
            check.fail(function, argument, check.describe(value), {"en": "a str", "zh": "str（字符串）"})
    for label, ys in series.items():
        ax.plot(xs, ys, marker="o", markersize=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    if logy:
        ax.set_yscale("log")
        values = [y for ys in series.values() for y in ys if y > 0]
        spread = max(values) / min(values) if values else 1.0
        if spread < 3:
            ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10], min_n_ticks=3))
        else:
            subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if spread < 30 else (1.0, 2.0, 5.0) if spread < 1000 else (1.0,)
            ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(byte_tick if in_bytes else _plain_number))
    ax.minorticks_off()
    ax.tick_params(labelsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10)
    return ax


def _plain_number(value, _position=None):
    """A tick label: 0.5, 2, 40, 1000 (no powers of ten to decode, no trailing zeros)."""
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
