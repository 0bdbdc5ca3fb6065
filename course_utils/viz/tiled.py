"""Lesson 08: which tiles a tiled attention computes, and how far it has got."""

import numpy as np
from matplotlib.patches import Patch, Rectangle

from .. import validation as check
from ..i18n import message
from ..tiled import FULL, PARTIAL, SKIP
from .figures import axes_for, array_of

#: The most tiles a grid draws, one square each.
MAX_TILES = 4096

#: A tile's colour by what happens to it: computed without a mask, computed with one, skipped.
COLOURS = {FULL: "#4a7ab5", PARTIAL: "#e0a040", SKIP: "#f2f2f2"}
PENDING_ALPHA = 0.3


def tile_grid(kinds, ax=None, title=None, done=None, current=None, legend=True):
    """Draw an (n_q, n_k) grid of tiles (``tiled.tile_kinds``): one row per query block, one column per
    key/value block; blue computed without a mask, orange computed with one (a mask cuts through it),
    light grey skipped. done: None (every tile shown as decided) or the number of computed tiles
    already processed, in the order the tiled forward takes them (row by row); the rest are pale.
    current: (i, j) of the tile processed at this step, outlined in red. Returns ax."""
    check.flag("tile_grid", "legend", legend)
    given, kinds = kinds, array_of("tile_grid", "kinds", kinds, 2, "(n_q, n_k)")
    if not np.isin(kinds, (SKIP, PARTIAL, FULL)).all() or kinds.size > MAX_TILES:
        check.fail("tile_grid", "kinds", check.describe(given),
                   {"en": f"at most {MAX_TILES} tiles, each SKIP, PARTIAL or FULL (what tiled.tile_kinds returns)",
                    "zh": f"不超过 {MAX_TILES} 个分块，每个为 SKIP、PARTIAL 或 FULL（即 tiled.tile_kinds 的返回值）"})
    ax = axes_for(ax, (4.0, 4.0))
    n_q, n_k = kinds.shape
    order = [(i, j) for i in range(n_q) for j in range(n_k) if kinds[i, j] != SKIP]
    finished = set(order if done is None else order[:done])
    for i in range(n_q):
        for j in range(n_k):
            kind = int(kinds[i, j])
            pale = kind != SKIP and (i, j) not in finished
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=COLOURS[kind], edgecolor="white", linewidth=1.5,
                                   alpha=PENDING_ALPHA if pale else 1.0))
    if current is not None:
        i, j = current
        ax.add_patch(Rectangle((j, i), 1, 1, fill=False, edgecolor="#c0392b", linewidth=3))
    ax.set_xlim(0, n_k)
    ax.set_ylim(n_q, 0)
    ax.set_aspect("equal")
    step_q, step_k = max(1, n_q // 8), max(1, n_k // 8)
    ax.set_xticks(np.arange(0, n_k, step_k) + 0.5, [str(j) for j in range(0, n_k, step_k)])
    ax.set_yticks(np.arange(0, n_q, step_q) + 0.5, [str(i) for i in range(0, n_q, step_q)])
    ax.tick_params(labelsize=10, length=0)
    ax.set_xlabel(message("l08.plot.key_block"), fontsize=10)
    ax.set_ylabel(message("l08.plot.query_block"), fontsize=10)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    if title:
        computed = int((kinds != SKIP).sum())
        ax.set_title(message("l08.plot.tiles", title=title, computed=computed, total=kinds.size), fontsize=10)
    if legend:
        handles = [Patch(facecolor=COLOURS[kind], edgecolor="#999999", label=message(key))
                   for kind, key in ((FULL, "l08.plot.full"), (PARTIAL, "l08.plot.partial"), (SKIP, "l08.plot.skip"))]
        if done is not None:
            handles.append(Patch(facecolor=COLOURS[FULL], alpha=PENDING_ALPHA, label=message("l08.plot.pending")))
            handles.append(Patch(fill=False, edgecolor="#c0392b", linewidth=2, label=message("l08.plot.current")))
        ax.legend(handles=handles, fontsize=10, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return ax


def slope(lengths, values):
    """The slope of log(values) against log(lengths), least squares: ≈ 1 for memory that grows like
    L, ≈ 2 for L²."""
    x = array_of("slope", "lengths", lengths, 1, "(n,)")
    y = array_of("slope", "values", values, 1, "(n,)")
    if len(x) < 2 or not (np.isfinite(x).all() and (x > 0).all()) or len(set(x.tolist())) < 2:
        check.fail("slope", "lengths", check.describe(lengths),
                   {"en": "at least two different positive lengths", "zh": "至少两个不同的正长度"})
    if len(y) != len(x) or not (np.isfinite(y).all() and (y > 0).all()):
        check.fail("slope", "values", check.describe(values),
                   {"en": f"{len(x)} positive numbers, one per length", "zh": f"{len(x)} 个正数，每个长度一个"})
    x, y = np.log(x), np.log(y)
    return float(np.polyfit(x, y, 1)[0])


