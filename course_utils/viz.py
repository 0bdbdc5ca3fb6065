"""Plots the lessons draw: attention heatmaps and friends, in a style that renders Chinese.

Plot helpers draw on an Axes (a new figure when none is given) and return it; a notebook cell
ends with ``plt.show()``, so no ``<Figure ...>`` text is ever printed. Widgets use
``figure_png``, which renders a figure that pyplot never sees (so it is not shown twice).
"""

import io
from importlib.util import find_spec
from pathlib import Path

import matplotlib
import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .i18n import message

#: The CJK font shipped by the `mplfonts` package (a project dependency), so Chinese renders on
#: a machine with no system CJK fonts. DejaVu Sans stays first: Latin letters and math symbols
#: come from it, and matplotlib falls back to Noto for the glyphs DejaVu lacks.
CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"
CJK_FONT_NAME = "Noto Sans CJK SC"


def _cjk_font_path():
    spec = find_spec("mplfonts")  # locate the files only; importing mplfonts is not needed
    return Path(spec.submodule_search_locations[0]) / "fonts" / CJK_FONT_FILE


def use_course_style():
    """Set the course's plotting style and a font that renders both English and Chinese."""
    if CJK_FONT_NAME not in {font.name for font in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(_cjk_font_path()))
    matplotlib.rcParams.update(
        {
            # a list of families (not the generic "sans-serif") turns on per-glyph fallback
            "font.family": ["DejaVu Sans", CJK_FONT_NAME],
            "font.sans-serif": ["DejaVu Sans", CJK_FONT_NAME],
            "figure.figsize": (6.0, 4.0),
            "figure.dpi": 80,
            "axes.grid": False,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "image.cmap": "viridis",
        }
    )


def _axes(ax, size=None):
    """`ax`, or the axes of a new pyplot figure (shown when the cell ends) when it is None."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

    return plt.subplots(figsize=size)[1]


def _matrix(values, name):
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"{name}: argument 'weights' got shape {tuple(values.shape)}; needs a 2-D (L_q, L_k) matrix")
    return values


def heatmap(weights, ax=None, queries=None, keys=None, title=None, annotate=None, vmin=0.0, vmax=None, colorbar=True):
    """Draw an (L_q, L_k) attention matrix: one row per query, one column per key.

    queries / keys: optional tick labels. annotate: write each value in its cell (default: when
    the matrix is at most 8 x 8). vmin / vmax: colour range (weights live in [0, 1]).
    """
    weights = _matrix(weights, "heatmap")
    ax = _axes(ax)
    n_q, n_k = weights.shape
    image = ax.imshow(weights, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xlabel(message("plot.key"))
    ax.set_ylabel(message("plot.query"))
    ax.set_xticks(range(n_k), keys if keys is not None else range(n_k))
    ax.set_yticks(range(n_q), queries if queries is not None else range(n_q))
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = n_q <= 8 and n_k <= 8
    if annotate:
        top = float(weights.max()) if vmax is None else vmax
        for i in range(n_q):
            for j in range(n_k):
                value = float(weights[i, j])
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if value > 0.6 * top else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def new_figure(*, rows=1, cols=1, size=(6.0, 3.5)):
    """A figure outside pyplot (for widgets) and its axes."""
    figure = Figure(figsize=size, dpi=80, layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, axes


def figure_png(figure):
    """The figure as PNG bytes (for an ipywidgets Image)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


# ---- pictures of memory layout, broadcasting and heads (lesson 00)


def memory_order(tensor, ax=None, title=None):
    """Draw how `tensor` reads its memory: the storage it views on top, its elements in index
    order (row-major: the last axis fastest) below, and a line from each element to the memory
    cell it is read from. Parallel lines: contiguous; crossing lines: a view that reads memory
    out of order; several lines from one cell: an expanded (stride-0) axis.

    Meant for small tensors (a few dozen elements); each cell shows the value it holds.
    """
    tensor = tensor.detach().cpu()
    ax = _axes(ax, (8.0, 2.2))
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
            ax.text(left + i + 0.46, y + 0.4, labels[i], ha="center", va="center", fontsize=7,
                    color="white" if shades[i] < 0.6 else "black")
        return left

    shade = [float(o) / max(cells - 1, 1) for o in range(cells)]
    top = row(cells, 2.0, [_number(v) for v in memory.tolist()], shade)
    bottom = row(len(values), 0.0, [_number(v) for v in values.tolist()], [shade[o] for o in offsets.tolist()])
    for i, offset in enumerate(offsets.tolist()):
        ax.plot([bottom + i + 0.46, top + offset + 0.46], [0.8, 2.0], color="0.45", linewidth=0.7)
    ax.text(-0.3, 2.4, message("l00.plot.memory"), ha="right", va="center", fontsize=9)
    ax.text(-0.3, 0.4, message("l00.plot.index_order"), ha="right", va="center", fontsize=9)
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
    axes = broadcast_axes(shape_a, shape_b)
    n = len(axes)
    ax = _axes(ax, (1.2 * n + 2.0, 2.2))
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
        ax.text(column + 0.45, 3.05, header, ha="center", va="bottom", fontsize=9, color="0.3")
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
    ax = _axes(ax, (8.0, 0.5 * length + 1.2))
    width = heads * head_dim
    colours = matplotlib.colormaps["Pastel1"]

    def cell(x, row, number, head):
        ax.add_patch(Rectangle((x, -row - 1), 0.92, 0.92, color=colours(head % 9)))
        ax.text(x + 0.46, -row - 0.54, str(number), ha="center", va="center", fontsize=8)

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
        ax.text(left + head_dim / 2, 0.35, message("l00.plot.head", h=head), ha="center", va="bottom", fontsize=9)
    right = width + gap + heads * (head_dim + 0.6) - 0.6
    ax.annotate("", xy=(width + gap - 0.3, -length / 2), xytext=(width + 0.3, -length / 2),
                arrowprops={"arrowstyle": "->", "color": "0.3"})
    ax.text(width + gap + (right - width - gap) / 2, 1.0, "(H, L, D)", ha="center", va="bottom", fontsize=10)
    ax.set_xlim(-0.2, right + 0.2)
    ax.set_ylim(-length - 0.2, 1.6)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax


# ---- lesson 02: mask pictures, and which head of which item gets which mask


def mask_picture(keep, ax=None, title=None):
    """Draw an (L_q, L_k) keep mask: one row per query, one column per key; kept cells light,
    hidden cells dark. A row that is dark all along is a fully masked row."""
    keep = _matrix(torch.as_tensor(keep).bool().float(), "mask_picture")
    ax = _axes(ax)
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


def head_slots(batch, heads, mask_order="batch", qkv_order="head"):
    """The (B·H) axis of a multi-head layout: [(head, item of Q/K/V, item whose mask that slot
    gets)] for each slot. qkv_order "head": Q/K/V put heads first, slot h·B + b (what
    ``permute(2, 0, 1, 3)`` on (B, L, H, D) then a view gives); "batch": items first, slot
    b·H + h (``permute(0, 2, 1, 3)``, the layout of nn.MultiheadAttention). mask_order "batch":
    the mask was repeated batch-major (slot b·H + h, what ``mask.unsqueeze(1).repeat(1, H, 1, 1)``
    gives, and the layout of nn.MultiheadAttention's 3-D attn_mask); "head": head-major."""
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
    slots = head_slots(batch, heads, mask_order, qkv_order)
    ax = _axes(ax, (6.5, 0.45 * len(slots) + 1.0))
    colours = matplotlib.colormaps["Pastel1"]
    for n, (head, item, mask_item) in enumerate(slots):
        y = -n - 1
        ax.text(-0.2, y + 0.4, message("l02.plot.slot", n=n), ha="right", va="center", fontsize=9)
        ax.add_patch(Rectangle((0, y), 3.0, 0.8, color=colours(item % 9)))
        ax.text(1.5, y + 0.4, message("l02.plot.qkv_slot", h=head, b=item), ha="center", va="center", fontsize=9)
        wrong = mask_item != item
        ax.add_patch(Rectangle((3.4, y), 3.0, 0.8, facecolor=colours(mask_item % 9),
                               edgecolor="red" if wrong else "none", linewidth=2))
        ax.text(4.9, y + 0.4, message("l02.plot.mask_slot", b=mask_item), ha="center", va="center", fontsize=9)
        ax.text(6.6, y + 0.4, "✗" if wrong else "✓", ha="left", va="center", fontsize=11,
                color="red" if wrong else "green")
    header = "l02.plot.mask_header_batch" if mask_order == "batch" else "l02.plot.mask_header_head"
    qkv_header = "l02.plot.qkv_header" if qkv_order == "head" else "l02.plot.qkv_header_batch"
    ax.text(1.5, 0.1, message(qkv_header), ha="center", va="bottom", fontsize=9)
    ax.text(4.9, 0.1, message(header), ha="center", va="bottom", fontsize=9)
    ax.set_xlim(-1.6, 7.1)
    ax.set_ylim(-len(slots) - 0.2, 1.4)
    ax.set_axis_off()
    return ax


# ---- lesson 04: one map per head, and cost curves


def head_grid(maps, axes=None, queries=None, keys=None, row_titles=None, head_title="l04.plot.head"):
    """Draw attention maps, one per head: `maps` is (H, L_q, L_k) for one row of H maps, or
    (R, H, L_q, L_k) for R rows (e.g. one per example or per model). Each map is a heatmap on the
    colour range [0, 1]; the columns are titled with the head's number, the rows with
    `row_titles`. axes: an (R, H) array of Axes (default: a new pyplot figure). Returns the axes."""
    maps = torch.as_tensor(maps).detach().cpu()
    if maps.ndim == 3:
        maps = maps.unsqueeze(0)
    if maps.ndim != 4:
        raise ValueError(f"head_grid: argument 'maps' got shape {tuple(maps.shape)}; needs (H, L_q, L_k) or "
                         "(R, H, L_q, L_k)")
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


def cost_lines(ax, xs, series, xlabel, ylabel, title=None, logy=True):
    """Draw one line per entry of `series` ({label: [y for each x]}) against `xs`, with markers, a
    log-scaled y axis (costs span decades) and a legend. Returns ax."""
    for label, ys in series.items():
        ax.plot(xs, ys, marker="o", markersize=4, label=label)
    if logy:
        ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return ax
