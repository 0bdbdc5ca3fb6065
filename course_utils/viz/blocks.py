"""Pictures of the Transformer block (lesson 06): the decoder's two masks side by side, and where a
layer's multiply-adds go as the length L grows."""

import math

import numpy as np
import torch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from .. import validation as check
from ..i18n import message
from .masks import mask_picture

#: The parts ``transformer.flops`` names (each has a label "viz.cost.<part>" in the catalogue) and their
#: colours in the cost plots (attention warm, the feed-forward cool).
PART_COLOURS = {
    "attention": "#d9822b",
    "self_attention": "#d9822b",
    "cross_attention": "#c0392b",
    "feed_forward": "#2b7bba",
    "norms": "#7f8c8d",
}


# ----------------------------------------------------------------------------- the decoder's two masks


def _keep_masks(function, argument, mask, layout):
    """`mask` as a 3-D bool tensor (B, L_q, L_k); a 2-D (L_q, L_k) mask is one item."""
    needed = {"en": f"a bool keep mask (True = may attend) of shape {layout} or one item's (L_t, L_k)",
              "zh": f"形状为 {layout}（或单个样本的 (L_t, L_k)）的 bool 保留掩码（True 表示可以关注）"}
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.ndim not in (2, 3) or 0 in mask.shape:
        check.fail(function, argument, check.describe(mask), needed)
    return mask.detach().cpu()[None] if mask.ndim == 2 else mask.detach().cpu()


def decoder_masks(target_keep, memory_keep, axes=None):
    """Draw a decoder's two keep masks side by side, one row per item of the batch.

    Args:
        target_keep: bool (B, L_t, L_t), the self-attention's mask (the target mask): True where
            target position i may attend to target position j (the causal triangle, less the
            target's padded keys).
        memory_keep: bool (B, L_t, L_s), the cross-attention's mask (the source mask): True where
            target position i may attend to source position j of the memory (its real positions).
            A 2-D mask in either argument is one item.
        axes: optional (B, 2) array of Axes (default: a new pyplot figure, the columns as wide as
            L_t and L_s, so that every cell is square).

    Light cells may attend, dark cells are hidden (as ``mask_picture`` draws them). Returns the figure.
    """
    function = "decoder_masks"
    target = _keep_masks(function, "target_keep", target_keep, "(B, L_t, L_t)")
    memory = _keep_masks(function, "memory_keep", memory_keep, "(B, L_t, L_s)")
    B, L_t, L_k = target.shape
    if L_k != L_t:
        check.fail(function, "target_keep", check.describe(target_keep),
                   {"en": "a square (B, L_t, L_t) mask: self-attention's queries and keys are the same target positions",
                    "zh": "方形的 (B, L_t, L_t) 掩码：自注意力的查询和键是同一组目标位置"})
    if memory.shape[:2] != (B, L_t):
        check.fail(function, "memory_keep", check.describe(memory_keep),
                   {"en": f"shape (B, L_t, L_s) with B = {B} items and L_t = {L_t} target positions, as target_keep",
                    "zh": f"形状 (B, L_t, L_s)，其中 B = {B} 个样本、L_t = {L_t} 个目标位置，与 target_keep 一致"})
    L_s = memory.shape[-1]
    if axes is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        # fixed spacing in inches instead of a layout engine: constrained layout doubles the drawing time
        cell, row_gap, column_gap = 0.5, 0.85, 0.45  # inches: a mask cell, room for labels and titles
        height, width = cell * L_t, cell * (L_t + L_s) / 2  # one Axes' height, the mean width
        figure, axes = plt.subplots(B, 2, figsize=(2 * width + column_gap + 0.8, B * (height + row_gap) + 0.2),
                                    squeeze=False, gridspec_kw={"width_ratios": [L_t, L_s]})
        figure.subplots_adjust(hspace=row_gap / height, wspace=column_gap / width)
    axes = np.asarray(axes)
    if axes.shape != (B, 2):
        check.fail(function, "axes", f"{axes.shape}", {"en": f"a ({B}, 2) array of Axes: one row per item",
                                                       "zh": f"形状为 ({B}, 2) 的 Axes 数组：每个样本一行"})
    for b in range(B):
        left, right = axes[b]
        mask_picture(target[b], ax=left)
        left.set_title(message("viz.decoder.target_title", b=b), fontsize=10)
        left.set_xlabel(message("viz.decoder.target_keys"))
        left.set_ylabel(message("viz.decoder.queries"))
        mask_picture(memory[b], ax=right)
        right.set_title(message("viz.decoder.memory_title", b=b), fontsize=10)
        right.set_xlabel(message("viz.decoder.memory_keys"))
        right.set_ylabel("")
    return axes[0, 0].figure


# ----------------------------------------------------------------------------- a layer's cost by part

_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value, _position=None):
    """A tick label "10⁹" in plain characters: matplotlib's default, mathtext, is slow to draw."""
    exponent = round(math.log10(value)) if value > 0 else None
    return "" if exponent is None else "10" + str(exponent).translate(_SUPERSCRIPTS)



def flops_by_part(lengths, counts, ax=None, crossover=None, share=False, title=None):
    """Draw where a layer's multiply-adds go as the length grows, one line (or band) per part.

    Args:
        lengths: the lengths L, increasing positive ints (drawn on a log₂ axis).
        counts: one dict per length, as ``transformer.flops(layer, L)`` returns (the same parts in
            each; "total" is used for the shares, not drawn as a part).
        crossover: optional length to mark with a dashed line (e.g. where attention catches up
            with the feed-forward network).
        share: False: each part's multiply-adds on a log axis; True: each part's share of the total,
            stacked (the bands add up to 1).
        title: optional title.

    Returns ax.
    """
    function = "flops_by_part"
    lengths = list(lengths) if isinstance(lengths, (list, tuple, range)) else lengths
    if (not isinstance(lengths, list) or not lengths
            or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths)
            or lengths != sorted(set(lengths))):
        check.fail(function, "lengths", check.describe(lengths),
                   {"en": "a list of increasing positive ints", "zh": "递增的正整数列表"})
    counts = list(counts) if isinstance(counts, (list, tuple)) else counts
    if (not isinstance(counts, list) or len(counts) != len(lengths) or not all(isinstance(c, dict) for c in counts)
            or any(set(c) != set(counts[0]) or "total" not in c for c in counts)):
        check.fail(function, "counts", check.describe(counts),
                   {"en": f"a list of {len(lengths)} dicts (one per length) with the same parts and a \"total\", "
                    "as transformer.flops returns",
                    "zh": f"由 {len(lengths)} 个字典组成的列表（每个长度一个），各字典的部分相同且含 \"total\"，"
                    "即 transformer.flops 的返回值"})
    if crossover is not None and (isinstance(crossover, bool) or not isinstance(crossover, (int, float))
                                  or not crossover > 0):
        check.fail(function, "crossover", check.describe(crossover), {"en": "a positive length", "zh": "正的长度"})
    parts = [name for name in counts[0] if name != "total"]
    values = {name: np.array([c[name] for c in counts], dtype=float) for name in parts}
    total = np.array([c["total"] for c in counts], dtype=float)
    labels = [message(f"viz.cost.{name}") if name in PART_COLOURS else name for name in parts]
    colours = [PART_COLOURS.get(name, f"C{k}") for k, name in enumerate(parts)]
    if ax is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        ax = plt.subplots(figsize=(6.0, 3.6))[1]
    if share:
        ax.stackplot(lengths, *[values[name] / total for name in parts], labels=labels, colors=colours, alpha=0.85)
        ax.set_ylim(0, 1)
        ax.set_ylabel(message("viz.cost.share_axis"))
    else:
        for name, label, colour in zip(parts, labels, colours):
            ax.plot(lengths, values[name], marker="o", markersize=3, label=label, color=colour)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(FuncFormatter(_power_of_ten))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylabel(message("viz.cost.flops_axis"))
    ax.set_xscale("log", base=2)
    ax.set_xlim(lengths[0], lengths[-1])
    ax.set_xticks(lengths, [str(n) for n in lengths], fontsize=10)
    ax.minorticks_off()
    ax.set_xlabel(message("viz.cost.length_axis"))
    if crossover is not None:
        ax.axvline(crossover, color="black", linestyle="--", linewidth=1)
        ax.annotate(message("viz.cost.crossover", length=crossover), (crossover, 0.02), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", fontsize=10, ha="left", va="bottom")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10, loc="upper left")
    return ax

