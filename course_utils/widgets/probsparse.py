"""Lesson 05: the ProbSparse shape walkthrough, as a table and as an explorer of any size.

``probsparse.walkthrough`` runs the algorithm on meta tensors (shapes, no data), so the table of
every intermediate costs nothing to compute, whatever the sizes: a learner can ask for
L = 16384 and see what a (B, H, L, U, D) tensor would take without allocating it.
"""

import unicodedata

import ipywidgets as w

from .. import validation
from ..i18n import message
from ..probsparse import Trace, sample_count, walkthrough
from ..viz import keep_layout, new_figure
from ..viz.probsparse import format_bytes, walkthrough_bars
from .explorer import explorer, reusable

#: The sequence lengths the explorer's slider offers (96: the Informer code's own example).
LENGTHS = (16, 32, 64, 96, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: The feature sizes per head it offers.
DIMS = (16, 32, 64, 128)


def _width(text):
    """Columns `text` takes in a monospaced font (a Chinese character takes two)."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def _pad(text, width, right=False):
    gap = " " * max(0, width - _width(text))
    return gap + text if right else text + gap


def walkthrough_table(trace):
    """The steps of a ``Trace`` as a text table: step, shape, whether it is a view or a new tensor,
    the memory it allocated, and its size as a copy (numel × element size), with the total."""
    if not isinstance(trace, Trace):
        validation.fail("walkthrough_table", "trace", validation.describe(trace),
                        {"en": "a probsparse.Trace", "zh": "probsparse.Trace"})
    header = [message("l05.walk.step"), message("l05.walk.shape"), message("l05.walk.kind"),
              message("l05.walk.bytes"), message("l05.walk.logical")]
    rows = [
        [step.name, str(step.shape), message("l05.walk.view" if step.view else "l05.walk.new"),
         format_bytes(step.bytes), format_bytes(step.logical_bytes)]
        for step in trace
    ]
    rows.append([message("l05.walk.total"), "", "", format_bytes(trace.total_bytes), ""])
    widths = [max(_width(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for number, row in enumerate([header, *rows]):
        if number == len(rows):  # a rule above the total
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
        lines.append("  ".join(_pad(cell, width, right=i >= 3) for i, (cell, width) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def _check_sizes(function, **sizes):
    for name, value in sizes.items():
        validation.positive_int(function, name, value)


def walkthrough_view(length=96, batch=32, heads=8, dim=64, factor=5, figure=None):
    """The walkthrough explorer's view: both implementations' traces for (B, H, L, D) = (`batch`,
    `heads`, `length`, `dim`) inputs and `factor`.

    Returns ``(figure, summary)``: the figure is the bytes each step allocates, both versions side
    by side (``viz.probsparse.walkthrough_bars``); the summary gives U and u, the table of each
    version and how much of the plain version's memory K_sample takes. figure: one this view
    returned before, whose bars are drawn again on the same axes and layout (what the explorer
    passes; faster than a new figure).
    """
    _check_sizes("walkthrough_view", length=length, batch=batch, heads=heads, dim=dim, factor=factor)
    plain = walkthrough(batch, heads, length, dim, factor)
    fast = walkthrough(batch, heads, length, dim, factor, fast=True)
    sizes = f"B={batch}, H={heads}, L={length}, D={dim}"
    title = message("l05.walk.title", sizes=sizes, factor=factor)
    figure = reusable(figure, "walkthrough")
    if figure is None:  # laid out once: the steps' names, the title's and the ticks' heights stay
        figure, axes = new_figure(size=(7.5, 7.6))
        walkthrough_bars(plain, fast, ax=axes[0, 0], title=title)
        keep_layout(figure)
        figure.explorer_key = "walkthrough"
    else:
        ax = figure.axes[0]
        ax.cla()
        walkthrough_bars(plain, fast, ax=ax, title=title)
    sample = plain["K_sample"]
    summary = "\n".join([
        message("l05.walk.counts", sizes=sizes, factor=factor, U=sample_count(length, factor),
                u=sample_count(length, factor)),
        "",
        message("l05.plot.plain"),
        walkthrough_table(plain),
        "",
        message("l05.plot.fast"),
        walkthrough_table(fast),
        "",
        message("l05.walk.verdict", sample=format_bytes(sample.bytes),
                share=100 * sample.bytes / plain.total_bytes, fast=format_bytes(fast.total_bytes),
                ratio=plain.total_bytes / fast.total_bytes),
    ])
    return figure, summary


def walkthrough_explorer(length=96, batch=32, heads=8, dim=64, factor=5):
    """Pick L (a slider), B, H, D and the factor and see every intermediate of both versions of
    ProbSparse attention: its shape, whether it is a view, its bytes (``walkthrough_view``).
    The starting values must be ones the controls offer: L one of ``LENGTHS``, D one of ``DIMS``,
    B from 1 to 256, H from 1 to 64, the factor from 1 to 10."""
    function = "walkthrough_explorer"
    for name, value, choices in (("length", length, LENGTHS), ("dim", dim, DIMS)):
        if not isinstance(value, int) or isinstance(value, bool) or value not in choices:
            validation.fail(function, name, validation.describe(value),
                            {"en": f"one of {', '.join(map(str, choices))}", "zh": f"{'、'.join(map(str, choices))} 之一"})
    for name, value, most in (("batch", batch, 256), ("heads", heads, 64), ("factor", factor, 10)):
        validation.positive_int(function, name, value)
        if value > most:
            validation.fail(function, name, validation.describe(value),
                            {"en": f"an int from 1 to {most}", "zh": f"1 到 {most} 之间的整数"})
    style = {"description_width": "initial"}
    return explorer(
        walkthrough_view,
        length=w.SelectionSlider(options=LENGTHS, value=length, description="L", continuous_update=False),
        batch=w.BoundedIntText(value=batch, min=1, max=256, description="B", style=style,
                               layout=w.Layout(width="120px")),
        heads=w.BoundedIntText(value=heads, min=1, max=64, description="H", style=style,
                               layout=w.Layout(width="120px")),
        dim=w.Dropdown(options=DIMS, value=dim, description="D", style=style, layout=w.Layout(width="120px")),
        factor=w.IntSlider(value=factor, min=1, max=10, description=message("l05.walk.factor"),
                           continuous_update=False, style=style),
    )
