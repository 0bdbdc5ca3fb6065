"""Pictures of ProbSparse attention (lesson 05): softmax rows with their sparsity measure, the
effective weights with the chosen queries marked, and the bytes of each step of the walkthrough."""

import torch
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from ..i18n import message
from .figures import _axes, _matrix, heatmap

#: The colours of the two implementations in the walkthrough's bar chart, and of chosen queries.
PLAIN_COLOUR, FAST_COLOUR, CHOSEN_COLOUR = "#d9822b", "#2b7bba", "#c0392b"


def format_bytes(count):
    """A byte count for people: "0 B", "19.2 kB", "157.3 MB", "2.1 GB" (powers of 1000)."""
    count = int(count)
    if count < 1000:
        return f"{count} B"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000
        if count < 1000 or unit == "TB":
            return f"{count:.1f} {unit}"


def weight_rows(weights, measures, ax=None, labels=None):
    """Draw R softmax rows (an (R, L_K) matrix) as bar charts stacked in one Axes, the first row on
    top, each labelled with its sparsity measure M (``measures``, R numbers) and its largest weight,
    with a dashed line at the uniform weight 1 / L_K. labels: optional prefixes of the rows' labels
    (e.g. the queries' names). One Axes, not R: it draws in a fraction of the time. Returns ax."""
    weights = _matrix(weights, "weight_rows")
    rows, length = weights.shape
    measures = [float(m) for m in torch.as_tensor(measures).flatten()]
    if len(measures) != rows:
        raise ValueError(f"weight_rows: argument 'measures' got {len(measures)} numbers; needs one per row ({rows})")
    ax = _axes(ax, (6.5, 1.1 * rows + 0.8))
    gap = 1.45  # a row's bars reach 1 at most; the rest is room for its label
    for r in range(rows):
        base = (rows - 1 - r) * gap
        ax.bar(range(length), weights[r], bottom=base, width=0.8, color=FAST_COLOUR)
        ax.plot([-0.6, length - 0.4], [base + 1.0 / length] * 2, color="0.35", linestyle="--", linewidth=1)
        ax.axhline(base, color="0.75", linewidth=0.8)
        text = message("l05.plot.row_measure", m=measures[r], top=weights[r].max())
        ax.text(-0.5, base + 1.08, message("l05.plot.row_label", label=labels[r], text=text) if labels is not None else text, fontsize=9, va="bottom")
    ax.text(length - 0.4, (rows - 1) * gap + 1.0 / length + 0.04, message("l05.plot.uniform", n=length),
            ha="right", va="bottom", fontsize=8, color="0.35")
    ax.set_xlim(-0.8, length - 0.2)
    ax.set_ylim(-0.05, (rows - 1) * gap + 1.35)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xlabel(message("plot.key"))
    return ax


def chosen_weights(weights, selected, ax=None, title=None):
    """Draw the (L_Q, L_K) weights ProbSparse attention effectively used, with the rows of the
    chosen queries (``selected``, their positions) marked in red on the query axis; every other
    row is a lazy query's uniform row. Returns ax."""
    weights = _matrix(weights, "chosen_weights")
    chosen = {int(i) for i in torch.as_tensor(selected).flatten()}
    ax = _axes(ax, (5.5, 4.6))
    n_q, n_k = weights.shape
    heatmap(weights, ax=ax, title=title, annotate=False, vmax=None)
    step = 1 if n_k <= 24 else max(1, n_k // 12)
    ax.set_xticks(range(0, n_k, step), [str(j) for j in range(0, n_k, step)], fontsize=7)
    ax.set_yticks(range(n_q), [f"{i} ◂" if i in chosen else str(i) for i in range(n_q)], fontsize=7)
    for label in ax.get_yticklabels():
        if label.get_text().endswith("◂"):
            label.set_color(CHOSEN_COLOUR)
    ax.set_ylabel(message("l05.plot.query_chosen"))
    return ax


def walkthrough_bars(plain, fast, ax=None, title=None):
    """Draw the memory each step of the walkthrough allocates, for the plain version (a ``Trace``)
    and the fast one, as horizontal bars on a log scale, one pair per step in the plain version's
    order. A view allocates nothing: its bar is drawn empty and dashed, at the size it would have
    as a copy. A step one version does not take has no bar. Returns ax."""
    names = [step.name for step in plain]
    names += [step.name for step in fast if step.name not in names]
    found = {"plain": {s.name: s for s in plain}, "fast": {s.name: s for s in fast}}
    ax = _axes(ax, (7.5, 0.42 * len(names) + 1.4))
    height = 0.38
    for offset, version, colour in ((-height / 2, "plain", PLAIN_COLOUR), (height / 2, "fast", FAST_COLOUR)):
        for row, name in enumerate(names):
            step = found[version].get(name)
            if step is None:
                continue
            y = row + offset
            if step.bytes:
                ax.barh(y, step.bytes / 1e6, height=height, color=colour)
                ax.text(step.bytes / 1e6 * 1.15, y, format_bytes(step.bytes), va="center", fontsize=7)
            else:
                ax.barh(y, step.logical_bytes / 1e6, height=height, fill=False, edgecolor=colour, linestyle="--")
                ax.text(step.logical_bytes / 1e6 * 1.15, y, message("l05.plot.view_bar", size=format_bytes(step.logical_bytes)),
                        va="center", fontsize=7)
    legend = [Patch(color=PLAIN_COLOUR, label=message("l05.plot.plain")), Patch(color=FAST_COLOUR, label=message("l05.plot.fast"))]
    ax.set_xscale("log")
    # plain byte counts on the ticks: mathtext powers of ten are slow to draw, and less readable
    ax.xaxis.set_major_locator(LogLocator(base=100))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_bytes(round(x * 1e6))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(message("l05.plot.allocated"))
    left, right = ax.get_xlim()
    ax.set_xlim(left, right * 150)  # room for the labels at the ends of the bars
    ax.legend(handles=legend, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
