"""Pictures of ProbSparse attention (lesson 05): softmax rows with their sparsity measure, the
effective weights with the chosen queries marked, and the bytes of each step of the walkthrough."""

import math
import numbers

import torch
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .. import validation
from ..i18n import message
from ..probsparse import Trace
from .figures import axes_for, heatmap

#: The colours of the two implementations in the walkthrough's bar chart, and of chosen queries.
PLAIN_COLOUR, FAST_COLOUR, CHOSEN_COLOUR = "#d9822b", "#2b7bba", "#c0392b"


#: Byte units, powers of 1000.
_UNITS = ("kB", "MB", "GB", "TB", "PB", "EB")


def format_bytes(count):
    """A byte count for people: "0 B", "19.2 kB", "157.3 MB", "2.1 GB" (powers of 1000, up to EB)."""
    if isinstance(count, bool) or not isinstance(count, (int, float)) or not 0 <= count < float("inf"):
        validation.fail("format_bytes", "count", validation.describe(count),
                        {"en": "a byte count, a number ≥ 0", "zh": "字节数，即不小于 0 的数"})
    count = int(count)
    if count < 1000:
        return f"{count} B"
    for unit in _UNITS:
        count /= 1000
        if count < 1000 or unit == _UNITS[-1]:
            return f"{count:.1f} {unit}"


def byte_tick(value, _position=None):
    """A tick label on a byte axis: "1 B", "10 kB", "100 MB", "1 GB" (no decimals on round values)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)  # matplotlib gives NumPy's floats
    validation.number("byte_tick", "value", value)
    if value < 1000:
        return f"{value:g} B"
    for unit in _UNITS:
        value /= 1000
        if value < 1000 or unit == _UNITS[-1]:
            return f"{value:g} {unit}"


def _weights(function, weights):
    """`weights` as a float tensor (R, L_K) with data, R, L_K ≥ 1; otherwise an ArgumentError."""
    if not isinstance(weights, torch.Tensor) or weights.ndim != 2 or weights.is_meta or 0 in weights.shape \
            or weights.is_complex():
        validation.fail(function, "weights", validation.describe(weights),
                        {"en": "a real 2-D tensor (R, L_K) with data, at least one row and one key",
                         "zh": "有数据的二维实数张量 (R, L_K)，至少一行、一个键"})
    return weights.detach().cpu().double()


def _ax(function, ax):
    if ax is not None and not isinstance(ax, Axes):
        validation.fail(function, "ax", validation.describe(ax), {"en": "None or a matplotlib Axes", "zh": "None 或 matplotlib 的 Axes"})
    return ax


def weight_rows(weights, measures, ax=None, labels=None):
    """Draw R softmax rows (an (R, L_K) matrix) as bar charts stacked in one Axes, the first row on
    top, each labelled with its max-mean measure M̄ (``measures``, R numbers) and its largest
    weight, with a dashed line at the uniform weight 1 / L_K. labels: optional prefixes of the rows'
    labels (e.g. the queries' names), R strings. One Axes, not R: it draws in a fraction of the
    time. Returns ax."""
    weights = _weights("weight_rows", weights)
    rows, length = weights.shape
    try:
        measures = [float(m) for m in torch.as_tensor(measures, device="cpu").flatten()]
    except (TypeError, ValueError, RuntimeError, NotImplementedError):
        measures = None
    if measures is None or len(measures) != rows:
        validation.fail("weight_rows", "measures", validation.describe(measures),
                        {"en": f"one number per row ({rows})", "zh": f"每行一个数（共 {rows} 个）"})
    if labels is not None and (not isinstance(labels, (list, tuple)) or len(labels) != rows):
        validation.fail("weight_rows", "labels", validation.describe(labels),
                        {"en": f"None or one label per row ({rows})", "zh": f"None，或每行一个标签（共 {rows} 个）"})
    ax = axes_for(_ax("weight_rows", ax), (6.5, 1.1 * rows + 0.8))
    gap = 1.45  # a row's bars reach 1 at most; the rest is room for its label
    for r in range(rows):
        base = (rows - 1 - r) * gap
        ax.bar(range(length), weights[r].tolist(), bottom=base, width=0.8, color=FAST_COLOUR)
        ax.plot([-0.6, length - 0.4], [base + 1.0 / length] * 2, color="0.35", linestyle="--", linewidth=1)
        ax.axhline(base, color="0.75", linewidth=0.8)
        text = message("l05.plot.row_measure", m=measures[r], top=weights[r].max().item())
        ax.text(-0.5, base + 1.08, message("l05.plot.row_label", label=labels[r], text=text) if labels is not None else text, fontsize=10, va="bottom")
    ax.text(length - 0.4, (rows - 1) * gap + 1.0 / length + 0.04, message("l05.plot.uniform", n=length),
            ha="right", va="bottom", fontsize=10, color="0.35")
    ax.set_xlim(-0.8, length - 0.2)
    ax.set_ylim(-0.05, (rows - 1) * gap + 1.35)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xlabel(message("plot.key"))
    return ax


def chosen_weights(weights, selected, ax=None, title=None):
    """Draw the (L_Q, L_K) weights ProbSparse attention effectively used, with the rows of the
    chosen queries (``selected``, their positions, an int tensor) marked in red on the query axis;
    every other row is a lazy query's uniform row. Returns ax."""
    weights = _weights("chosen_weights", weights)
    n_q, n_k = weights.shape
    if (not isinstance(selected, torch.Tensor) or selected.dtype not in (torch.int64, torch.int32) or selected.is_meta
            or bool(((selected < 0) | (selected >= n_q)).any())):
        validation.fail("chosen_weights", "selected", validation.describe(selected),
                        {"en": f"an int tensor of query positions in [0, {n_q})", "zh": f"由 [0, {n_q}) 内的查询位置组成的整数张量"})
    if title is not None and not isinstance(title, str):
        validation.fail("chosen_weights", "title", validation.describe(title), {"en": "None or a string", "zh": "None 或字符串"})
    chosen = {int(i) for i in selected.flatten().tolist()}
    ax = axes_for(_ax("chosen_weights", ax), (6.4, 6.0))
    heatmap(weights, ax=ax, title=title, annotate=False, vmax=None)
    # 10-point labels: every key up to 16 keys, then every other (or fewer); every query up to 32
    step = 1 if n_k <= 16 else 2 if n_k <= 32 else max(1, n_k // 12)
    ax.set_xticks(range(0, n_k, step), [str(j) for j in range(0, n_k, step)], fontsize=10)
    ystep = 1 if n_q <= 32 else max(1, n_q // 24)
    ax.set_yticks(range(0, n_q, ystep), [f"{i} ◂" if i in chosen else str(i) for i in range(0, n_q, ystep)], fontsize=10)
    for label in ax.get_yticklabels():
        if label.get_text().endswith("◂"):
            label.set_color(CHOSEN_COLOUR)
    ax.set_ylabel(message("l05.plot.query_chosen"))
    return ax


def walkthrough_bars(plain, fast, ax=None, title=None):
    """Draw the memory each step of the walkthrough allocates, for the plain version (a ``Trace``)
    and the fast one, as horizontal bars on a log scale of bytes, one pair per step in the plain
    version's order. A view allocates nothing: its bar is drawn empty and dashed, at the size it
    would have as a copy. A step one version does not take has no bar. Ticks at round byte counts
    (1 kB, 1 MB, 1 GB, …); every bar is labelled with its size. Returns ax."""
    _ax("walkthrough_bars", ax)
    if title is not None and not isinstance(title, str):
        validation.fail("walkthrough_bars", "title", validation.describe(title), {"en": "None or a string", "zh": "None 或字符串"})
    for name, trace in (("plain", plain), ("fast", fast)):
        if not isinstance(trace, Trace) or not len(trace):
            validation.fail("walkthrough_bars", name, validation.describe(trace),
                            {"en": "a probsparse.Trace with at least one step", "zh": "至少有一步的 probsparse.Trace"})
    names = [step.name for step in plain]
    names += [step.name for step in fast if step.name not in names]
    found = {"plain": {s.name: s for s in plain}, "fast": {s.name: s for s in fast}}
    ax = axes_for(ax, (7.5, 0.45 * len(names) + 1.4))
    height = 0.4
    drawn = []
    for offset, version, colour in ((-height / 2, "plain", PLAIN_COLOUR), (height / 2, "fast", FAST_COLOUR)):
        for row, name in enumerate(names):
            step = found[version].get(name)
            if step is None:
                continue
            y = row + offset
            size = max(step.bytes or step.logical_bytes, 1)  # 1 byte at least: a log axis has no 0
            drawn.append(size)
            if step.bytes:
                ax.barh(y, size, height=height, color=colour)
                label = format_bytes(step.bytes)
            else:
                ax.barh(y, size, height=height, fill=False, edgecolor=colour, linestyle="--")
                label = message("l05.plot.view_bar", size=format_bytes(step.logical_bytes))
            ax.text(size * 1.2, y, label, va="center", fontsize=10)
    legend = [Patch(color=PLAIN_COLOUR, label=message("l05.plot.plain")), Patch(color=FAST_COLOUR, label=message("l05.plot.fast"))]
    ax.set_xscale("log")
    low = 10 ** math.floor(math.log10(min(drawn)))
    high = max(drawn)
    span = math.log10(high / low)
    ax.set_xlim(low, high * 10 ** max(1.2, 0.3 * span))  # room for the labels at the ends of the bars
    # round byte counts on the ticks, powers of 1000 (or of 10 when the range is narrow): plain text,
    # faster to draw than mathtext powers of ten, and easier to read
    step = 3 if span > 6 else 1
    first = 3 * math.floor(math.log10(low) / 3) if step == 3 else math.floor(math.log10(low))
    ticks = [10.0**e for e in range(first, math.ceil(math.log10(high)) + 1, step) if 10.0**e >= low]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(byte_tick))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize=10)
    ax.set_yticks(range(len(names)), names, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel(message("l05.plot.allocated"), fontsize=10)
    ax.legend(handles=legend, fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    if title:
        ax.set_title(title, fontsize=11)
    return ax
