"""Pictures of memory layout, broadcasting and heads (lessons 00 and 04)."""

import matplotlib
import torch
from matplotlib.patches import Rectangle

from .. import validation as check
from ..i18n import message
from .figures import axes_for

# ---- pictures of memory layout, broadcasting and heads (lesson 00)


#: The most cells a memory picture draws (one box and one number each): more would not be read.
MAX_CELLS = 1024
#: The most boxes split_heads_picture draws (L · H · D, twice).
MAX_BOXES = 1024


def memory_order(tensor, ax=None, title=None):
    """Draw how `tensor` reads its memory: the storage it views on top, its elements in index
    order (row-major: the last axis fastest) below, and a line from each element to the memory
    cell it is read from. Parallel lines: contiguous; crossing lines: a view that reads memory
    out of order; several lines from one cell: an expanded (stride-0) axis.

    Meant for small tensors (a few dozen elements); each cell shows the value it holds.
    """
    check.tensor("memory_order", "tensor", tensor, min_ndim=0, floating=False)
    check.has_values("memory_order", "tensor", tensor)
    if tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1) > MAX_CELLS:
        check.fail("memory_order", "tensor", check.describe(tensor),
                   {"en": f"a small tensor: at most {MAX_CELLS} memory cells to draw, one box each",
                    "zh": f"小张量：要画的内存单元不超过 {MAX_CELLS} 个，每个一格"})
    tensor = tensor.detach().cpu()
    ax = axes_for(ax, (8.0, 2.2))
    # the whole storage as a flat tensor, and the storage offset of each element in index order
    cells = tensor.untyped_storage().nbytes() // tensor.element_size()
    memory = tensor.as_strided((cells,), (1,), 0)
    offsets = torch.arange(cells).as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).flatten()
    values = tensor.flatten()
    width = max(cells, len(values))
    colours = matplotlib.colormaps["viridis"]

    def row(count, y, labels, shades):
        left = (width - count) / 2
        for i in range(count):
            ax.add_patch(Rectangle((left + i, y), 0.92, 0.8, color=colours(shades[i])))
            ax.text(left + i + 0.46, y + 0.4, labels[i], ha="center", va="center", fontsize=10,
                    color="white" if shades[i] < 0.6 else "black")
        return left

    shade = [float(o) / max(cells - 1, 1) for o in range(cells)]
    top = row(cells, 2.0, [_number(v) for v in memory.tolist()], shade)
    bottom = row(len(values), 0.0, [_number(v) for v in values.tolist()], [shade[o] for o in offsets.tolist()])
    for i, offset in enumerate(offsets.tolist()):
        ax.plot([bottom + i + 0.46, top + offset + 0.46], [0.8, 2.0], color="0.45", linewidth=0.7)
    ax.text(-0.3, 2.4, message("l00.plot.memory"), ha="right", va="center", fontsize=10)
    ax.text(-0.3, 0.4, message("l00.plot.index_order"), ha="right", va="center", fontsize=10)
    ax.set_xlim(-0.2, width + 0.1)
    ax.set_ylim(-0.1, 2.9)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def _number(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def broadcast_axes(shape_a, shape_b):
    """How broadcasting lines up two shapes: one (size_a, size_b, size_out, status) per axis of
    the result, leftmost first. Shapes are aligned from the right; a missing axis (None) counts
    as size 1. status: "same", "stretch_a" / "stretch_b" (that side's size 1 is repeated), or
    "clash" (sizes differ and neither is 1; size_out is None then)."""
    check.shape_tuple("broadcast_axes", "shape_a", shape_a)
    check.shape_tuple("broadcast_axes", "shape_b", shape_b)
    n = max(len(shape_a), len(shape_b))
    a = [None] * (n - len(shape_a)) + list(shape_a)
    b = [None] * (n - len(shape_b)) + list(shape_b)
    axes = []
    for size_a, size_b in zip(a, b):
        one_a = 1 if size_a is None else size_a
        one_b = 1 if size_b is None else size_b
        if one_a == one_b:
            axes.append((size_a, size_b, one_a, "same"))
        elif one_a == 1:
            axes.append((size_a, size_b, one_b, "stretch_a"))
        elif one_b == 1:
            axes.append((size_a, size_b, one_a, "stretch_b"))
        else:
            axes.append((size_a, size_b, None, "clash"))
    return axes


def broadcast_picture(shape_a, shape_b, ax=None, names=("a", "b"), axis_names=None):
    """Draw two shapes aligned from the right, as broadcasting aligns them, and the result below.

    One column per axis. Blue: a size-1 (or missing) axis repeated to the other size; red: two
    sizes that clash. names: the row labels of the two shapes; axis_names: column headers
    (default: the axis numbers counted from the right, -1 the last).
    """
    check.shape_tuple("broadcast_picture", "shape_a", shape_a)
    check.shape_tuple("broadcast_picture", "shape_b", shape_b)
    axes = broadcast_axes(shape_a, shape_b)
    n = len(axes)
    ax = axes_for(ax, (1.2 * n + 2.0, 2.2))
    plain, stretched, clash, result = "#e4e4e4", "#bcd7f2", "#f2a7a7", "#c5e8bc"
    for column, (size_a, size_b, size_out, status) in enumerate(axes):
        for row, size, mine in ((2, size_a, "stretch_a"), (1, size_b, "stretch_b")):
            colour = clash if status == "clash" else stretched if status == mine else plain
            text = "(1)" if size is None else str(size)
            if status == mine:
                text += f"→{size_out}"
            ax.add_patch(Rectangle((column, row), 0.9, 0.8, color=colour,
                                                      linestyle="--" if size is None else "-",
                                                      fill=size is not None, linewidth=1.2))
            ax.text(column + 0.45, row + 0.4, text, ha="center", va="center", fontsize=10)
        colour = clash if size_out is None else result
        ax.add_patch(Rectangle((column, 0), 0.9, 0.8, color=colour))
        ax.text(column + 0.45, 0.4, "✗" if size_out is None else str(size_out), ha="center", va="center",
                fontsize=10)
        skipped = n - len(axis_names or ())  # axis names are aligned from the right too
        header = axis_names[column - skipped] if axis_names and column >= skipped else str(column - n)
        ax.text(column + 0.45, 3.05, header, ha="center", va="bottom", fontsize=10, color="0.3")
    labels = (names[0], names[1], message("l00.plot.result"))
    for row, label in zip((2, 1, 0), labels):
        ax.text(-0.15, row + 0.4, label, ha="right", va="center", fontsize=10)
    ax.set_xlim(-0.1, n)
    ax.set_ylim(-0.1, 3.5)
    ax.set_axis_off()
    return ax


def split_heads_picture(length, heads, head_dim, ax=None):
    """Draw what splitting heads does: the (L, H·D) features of one sequence, each cell numbered
    by its place in memory and coloured by the head it belongs to, and the H matrices (L, D)
    they split into, one per head."""
    for argument, value in (("length", length), ("heads", heads), ("head_dim", head_dim)):
        check.positive_int("split_heads_picture", argument, value)
    if length * heads * head_dim > MAX_BOXES:
        check.fail("split_heads_picture", "length", check.describe(length),
                   {"en": f"sizes with at most {MAX_BOXES} features to draw (length · heads · head_dim)",
                    "zh": f"length · heads · head_dim 不超过 {MAX_BOXES}：每个特征画一格"})
    ax = axes_for(ax, (8.0, 0.5 * length + 1.2))
    width = heads * head_dim
    colours = matplotlib.colormaps["Pastel1"]

    def cell(x, row, number, head):
        ax.add_patch(Rectangle((x, -row - 1), 0.92, 0.92, color=colours(head % 9)))
        ax.text(x + 0.46, -row - 0.54, str(number), ha="center", va="center", fontsize=10)

    for row in range(length):
        for feature in range(width):
            cell(feature, row, row * width + feature, feature // head_dim)
    ax.text(width / 2, 0.35, "(L, H·D)", ha="center", va="bottom", fontsize=10)
    gap = 2.0
    for head in range(heads):
        left = width + gap + head * (head_dim + 0.6)
        for row in range(length):
            for d in range(head_dim):
                cell(left + d, row, row * width + head * head_dim + d, head)
        ax.text(left + head_dim / 2, 0.35, message("l00.plot.head", h=head), ha="center", va="bottom", fontsize=10)
    right = width + gap + heads * (head_dim + 0.6) - 0.6
    ax.annotate("", xy=(width + gap - 0.3, -length / 2), xytext=(width + 0.3, -length / 2),
                arrowprops={"arrowstyle": "->", "color": "0.3"})
    ax.text(width + gap + (right - width - gap) / 2, 1.0, "(H, L, D)", ha="center", va="bottom", fontsize=10)
    ax.set_xlim(-0.2, right + 0.2)
    ax.set_ylim(-length - 0.2, 1.6)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax
