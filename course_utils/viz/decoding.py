"""Pictures of attention at inference time (lesson 07): the KV cache's bytes for published model
shapes, and the slots of a cache (growing, or rolling with a sliding window) as a grid."""

import matplotlib
import numpy as np
from matplotlib.axes import Axes

from .. import validation
from ..decoding import PUBLISHED, Shape, cache_bytes
from ..i18n import message
from .figures import axes_for
from .probsparse import byte_tick  # lesson 05's byte axis, written once

#: One colour per kind of attention: MHA, GQA, MQA.
KIND_COLOURS = {"MHA": "#d9822b", "GQA": "#2b7bba", "MQA": "#3d8b37"}


def kind(shape):
    """"MHA", "GQA" or "MQA" for a ``decoding.Shape``: H_kv = H, 1 < H_kv < H, H_kv = 1."""
    if not isinstance(shape, Shape):
        validation.fail("kind", "shape", validation.describe(shape),
                        {"en": "a decoding.Shape, such as decoding.PUBLISHED[0]", "zh": "decoding.Shape，例如 decoding.PUBLISHED[0]"})
    if shape.kv_heads == shape.heads:
        return "MHA"
    return "MQA" if shape.kv_heads == 1 else "GQA"


def _ax(function, ax):
    if ax is not None and not isinstance(ax, Axes):
        validation.fail(function, "ax", validation.describe(ax), {"en": "None or a matplotlib Axes",
                                                                   "zh": "None 或 matplotlib 的 Axes"})
    return axes_for(ax)


def cache_bytes_bars(shapes=PUBLISHED, ax=None, title=None):
    """Horizontal bars: each model's KV cache per token, all layers, float16 (2 bytes a number), on a
    log scale, coloured by kind (MHA / GQA / MQA) and labelled with its H / H_kv. Returns ax."""
    function = "cache_bytes_bars"
    if not isinstance(shapes, (list, tuple)) or not shapes or not all(isinstance(s, Shape) for s in shapes):
        validation.fail(function, "shapes", validation.describe(shapes),
                        {"en": "a non-empty list of decoding.Shape", "zh": "由 decoding.Shape 组成的非空列表"})
    ax = _ax(function, ax)
    per_token = [cache_bytes(s.layers, s.kv_heads, s.head_dim) for s in shapes]
    rows = np.arange(len(shapes))[::-1]
    ax.barh(rows, per_token, color=[KIND_COLOURS[kind(s)] for s in shapes])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(byte_tick))
    ax.set_yticks(rows, [s.name for s in shapes])
    for row, s, size in zip(rows, shapes, per_token):
        ax.text(size * 1.15, row, f"{kind(s)}  H = {s.heads}, H_kv = {s.kv_heads}", va="center", fontsize=10)
    ax.set_xlim(min(per_token) / 2, max(per_token) * 40)
    ax.set_xlabel(message("l07.plot.bytes_per_token"))
    ax.tick_params(labelsize=10)
    ax.minorticks_off()
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def cache_growth(tokens, shapes=PUBLISHED, ax=None, title=None):
    """One line per model: the bytes of one sequence's KV cache (float16) against its length in
    `tokens` (a list of ints); a model with a sliding window stops growing at its window. Returns ax."""
    function = "cache_growth"
    if not isinstance(tokens, (list, tuple)) or not tokens or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in tokens):
        validation.fail(function, "tokens", validation.describe(tokens),
                        {"en": "a non-empty list of positive ints", "zh": "由正整数组成的非空列表"})
    ax = _ax(function, ax)
    for s in shapes:
        kept = [min(t, s.window) if s.window else t for t in tokens]
        ax.plot(tokens, [cache_bytes(s.layers, s.kv_heads, s.head_dim, k) for k in kept], marker="o", markersize=3,
                color=KIND_COLOURS[kind(s)], linestyle="--" if s.window else "-", label=s.name)
    ax.set_xscale("log", base=2)
    shown = tokens[::2] if len(tokens) > 6 else tokens
    ax.set_xticks(shown, [f"{t:,}" for t in shown])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(byte_tick))
    ax.set_xlabel(message("l07.plot.tokens"))
    ax.set_ylabel(message("l07.plot.cache_bytes"))
    ax.tick_params(labelsize=10)
    ax.minorticks_off()
    ax.legend(fontsize=10)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def cache_slots(slot_positions, kv_heads, newest, ax=None, title=None):
    """A cache's slots as a grid: one row per key/value head, one column per slot, each column
    labelled with the position of the token it holds (every head holds the same positions), the
    newest token's column in green, empty slots blank. Returns ax."""
    function = "cache_slots"
    if not isinstance(slot_positions, (list, tuple)) or not slot_positions or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in slot_positions):
        validation.fail(function, "slot_positions", validation.describe(slot_positions),
                        {"en": "a non-empty list of ints (−1: an empty slot)", "zh": "非空的整数列表（−1 表示空槽）"})
    validation.positive_int(function, "kv_heads", kv_heads)
    ax = _ax(function, ax)
    slots = len(slot_positions)
    state = np.array([[0 if p < 0 else 2 if p == newest else 1 for p in slot_positions]] * kv_heads, dtype=float)
    colours = matplotlib.colors.ListedColormap(["#f4f4f4", "#c8dcf0", "#9fd08f"])  # empty, cached, newest
    ax.imshow(state, cmap=colours, vmin=0, vmax=2, aspect="auto")
    ax.set_xticks(range(slots), [str(p) if p >= 0 else "" for p in slot_positions])
    ax.set_yticks(range(kv_heads), [message("l07.plot.kv_head", h=h) for h in range(kv_heads)])
    ax.set_xticks(np.arange(-0.5, slots), minor=True)
    ax.set_yticks(np.arange(-0.5, kv_heads), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.tick_params(labelsize=10)
    ax.set_xlabel(message("l07.plot.slot"))
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def step_costs(lengths, cached, recomputed, ax=None, title=None):
    """Multiply-adds for the next token against the tokens so far, T (log–log): one line with the
    KV cache, one recomputing every token. Returns ax."""
    function = "step_costs"
    for argument, values in (("lengths", lengths), ("cached", cached), ("recomputed", recomputed)):
        if not isinstance(values, (list, tuple)) or len(values) != len(lengths) or not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
            validation.fail(function, argument, validation.describe(values),
                            {"en": "a non-empty list of positive numbers, one per length",
                             "zh": "由正数组成的非空列表，每个长度一个"})
    ax = _ax(function, ax)
    ax.plot(lengths, cached, marker="o", markersize=4, color=KIND_COLOURS["GQA"], label=message("l07.plot.cached"))
    ax.plot(lengths, recomputed, marker="o", markersize=4, color=KIND_COLOURS["MHA"],
            label=message("l07.plot.recomputed"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.minorticks_off()
    ax.set_xlabel(message("l07.plot.step_axis"))
    ax.set_ylabel(message("l07.plot.flops_axis"))
    ax.tick_params(labelsize=10)
    ax.legend(fontsize=10)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
