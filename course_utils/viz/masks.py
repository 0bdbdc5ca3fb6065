"""Mask pictures, and which head of which item gets which mask (lessons 02 and 04)."""

import matplotlib
import numpy as np
import torch
from matplotlib.patches import Rectangle

from .. import validation as check
from ..i18n import message
from .figures import axes_for, array_of

# ---- lesson 02: mask pictures, and which head of which item gets which mask


def mask_picture(keep, ax=None, title=None):
    """Draw an (L_q, L_k) keep mask: one row per query, one column per key; kept cells light,
    hidden cells dark. A row that is dark all along is a fully masked row."""
    keep = (array_of("mask_picture", "keep", keep, 2, "(L_q, L_k)") != 0).astype(float)  # True (or ≠ 0): kept
    ax = axes_for(ax)
    n_q, n_k = keep.shape
    colours = matplotlib.colors.ListedColormap(["#3b3b4f", "#f4e6a6"])  # hidden, keep
    ax.imshow(keep, cmap=colours, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(n_k))
    ax.set_yticks(range(n_q))
    ax.set_xticks(np.arange(-0.5, n_k), minor=True)
    ax.set_yticks(np.arange(-0.5, n_q), minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel(message("plot.key"))
    ax.set_ylabel(message("plot.query"))
    if title:
        ax.set_title(title, fontsize=10)
    return ax


#: The most (head, item) slots a picture draws, one row each: more would not be read (nor fit a page).
MAX_PICTURED_SLOTS = 64


def _slots_of(function, batch, heads, mask_order, qkv_order, most=None):
    """The sizes and orders of a (B·H) layout: positive ints, each order "batch" or "head"."""
    check.positive_int(function, "batch", batch)
    check.positive_int(function, "heads", heads)
    check.one_of(function, "mask_order", mask_order, ("batch", "head"))
    check.one_of(function, "qkv_order", qkv_order, ("head", "batch"))
    check.fits_in_memory(function, "batch" if batch >= heads else "heads", max(batch, heads), batch * heads, 200)
    if most is not None and batch * heads > most:
        check.fail(function, "batch" if batch >= heads else "heads", check.describe(max(batch, heads)),
                   {"en": f"at most {most} slots (batch · heads) to draw, one row each",
                    "zh": f"batch · heads 不超过 {most}：每个槽位画一行"})


def head_slots(batch, heads, mask_order="batch", qkv_order="head"):
    """The (B·H) axis of a multi-head layout: [(head, item of Q/K/V, item whose mask that slot
    gets)] for each slot. qkv_order "head": Q/K/V put heads first, slot h·B + b (what
    ``permute(2, 0, 1, 3)`` on (B, L, H, D) then a view gives); "batch": items first, slot
    b·H + h (``permute(0, 2, 1, 3)``, the layout of nn.MultiheadAttention). mask_order "batch":
    the mask was repeated batch-major (slot b·H + h, what ``mask.unsqueeze(1).repeat(1, H, 1, 1)``
    gives, and the layout of nn.MultiheadAttention's 3-D attn_mask); "head": head-major."""
    _slots_of("head_slots", batch, heads, mask_order, qkv_order)
    slots = []
    for n in range(batch * heads):
        head, item = divmod(n, batch) if qkv_order == "head" else (n % heads, n // heads)
        slots.append((head, item, n // heads if mask_order == "batch" else n % batch))
    return slots


def head_batch_picture(batch, heads, mask_order="batch", ax=None, qkv_order="head"):
    """Draw which item's mask each (head, item) slot of a (B·H, L_q, L_k) layout gets (see
    ``head_slots`` for the two orders): left, the slot's queries, keys and values (coloured by
    item); right, the mask it is paired with (coloured by the item it belongs to), a red ✗ where
    the two items differ."""
    _slots_of("head_batch_picture", batch, heads, mask_order, qkv_order, most=MAX_PICTURED_SLOTS)
    slots = head_slots(batch, heads, mask_order, qkv_order)
    ax = axes_for(ax, (6.5, 0.45 * len(slots) + 1.0))
    colours = matplotlib.colormaps["Pastel1"]
    for n, (head, item, mask_item) in enumerate(slots):
        y = -n - 1
        ax.text(-0.2, y + 0.4, message("l02.plot.slot", n=n), ha="right", va="center", fontsize=10)
        ax.add_patch(Rectangle((0, y), 3.0, 0.8, color=colours(item % 9)))
        ax.text(1.5, y + 0.4, message("l02.plot.qkv_slot", h=head, b=item), ha="center", va="center", fontsize=10)
        wrong = mask_item != item
        ax.add_patch(Rectangle((3.8, y), 3.0, 0.8, facecolor=colours(mask_item % 9),
                               edgecolor="red" if wrong else "none", linewidth=2))
        ax.text(5.3, y + 0.4, message("l02.plot.mask_slot", b=mask_item), ha="center", va="center", fontsize=10)
        ax.text(7.0, y + 0.4, "✗" if wrong else "✓", ha="left", va="center", fontsize=11,
                color="red" if wrong else "green")
    header = "l02.plot.mask_header_batch" if mask_order == "batch" else "l02.plot.mask_header_head"
    qkv_header = "l02.plot.qkv_header" if qkv_order == "head" else "l02.plot.qkv_header_batch"
    ax.text(1.5, 0.1, message(qkv_header), ha="center", va="bottom", fontsize=10)
    ax.text(5.3, 0.1, message(header), ha="center", va="bottom", fontsize=10)
    ax.set_xlim(-1.6, 7.5)
    ax.set_ylim(-len(slots) - 0.2, 1.4)
    ax.set_axis_off()
    return ax
