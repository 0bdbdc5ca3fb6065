"""The course's plotting style (English and Chinese), figures, and the attention heatmap."""

import dataclasses
import io
from importlib.util import find_spec
from pathlib import Path

import matplotlib
import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from PIL import Image

from .. import validation as check
from ..i18n import message

#: The CJK font shipped by the `mplfonts` package (a project dependency), so Chinese renders on
#: a machine with no system CJK fonts. DejaVu Sans stays first: Latin letters and math symbols
#: come from it, and matplotlib falls back to Noto for the glyphs DejaVu lacks.
CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"
#: The family name the course gives that file, and no other file has: matplotlib picks a font by
#: its family name, and a machine with its own Noto Sans CJK (Debian's and Ubuntu's fonts-noto-cjk,
#: a .ttc of the same family) would otherwise draw the pictures with that one, glyphs and metrics
#: differing. Under this name every machine draws with the shipped file.
CJK_FONT_NAME = "Noto Sans CJK SC (course)"


def _cjk_font_path():
    spec = find_spec("mplfonts")  # locate the files only; importing mplfonts is not needed
    return Path(spec.submodule_search_locations[0]) / "fonts" / CJK_FONT_FILE


def use_course_style():
    """Set the course's plotting style and a font that renders both English and Chinese."""
    manager = font_manager.fontManager
    if CJK_FONT_NAME not in {font.name for font in manager.ttflist}:
        path = str(_cjk_font_path())
        shipped = font_manager.ttfFontProperty(font_manager.get_font(path))
        manager.ttflist.append(dataclasses.replace(shipped, name=CJK_FONT_NAME))
        manager.addfont(path)  # (its own name too; and it clears findfont's cache of earlier answers)
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


def axes_for(ax, size=None):
    """`ax`, or the axes of a new pyplot figure (shown when the cell ends) when it is None."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

    return plt.subplots(figsize=size)[1]


def array_of(function, argument, values, ndim, layout):
    """`values` (a tensor with values, a NumPy array or nested lists of numbers) as a float64 NumPy
    array of `ndim` axes laid out as `layout` (e.g. "(L_q, L_k)"); anything else, a meta tensor
    (a shape without values) or another number of axes, is refused naming `argument`."""
    needed = {"en": f"numbers of shape {layout}: a tensor, an array or nested lists",
              "zh": f"形状为 {layout} 的数值：张量、数组或嵌套列表"}
    given = values
    if isinstance(values, torch.Tensor):
        check.dense(function, argument, check.has_values(function, argument, values))
        values = values.detach().cpu().to(torch.float64).numpy()  # bfloat16 and bool have no NumPy float view
    try:
        found = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        check.fail(function, argument, check.describe(given), needed)
    if found.ndim != ndim:
        check.fail(function, argument, check.describe(given) if not isinstance(given, np.ndarray)
                   else check.describe(torch.from_numpy(found)), needed)
    return found


def _matrix(values, name):
    return array_of(name, "weights", values, 2, "(L_q, L_k)")


def figure_of(function, argument, value):
    """`value` when it is a matplotlib Figure (what the package draws on)."""
    if not isinstance(value, Figure):
        check.fail(function, argument, check.describe(value),
                   {"en": "a matplotlib Figure, such as new_figure()[0]", "zh": "matplotlib 的 Figure，例如 new_figure()[0]"})
    return value


def heatmap(weights, ax=None, queries=None, keys=None, title=None, annotate=None, vmin=0.0, vmax=None, colorbar=True):
    """Draw an (L_q, L_k) attention matrix: one row per query, one column per key.

    queries / keys: optional tick labels. annotate: write each value in its cell (default: when
    the matrix is at most 8 x 8). vmin / vmax: colour range (weights live in [0, 1]).
    """
    check.flag("heatmap", "colorbar", colorbar)  # 'no' is a str, and a str is true
    if annotate is not None:
        check.flag("heatmap", "annotate", annotate)
    weights = _matrix(weights, "heatmap")
    ax = axes_for(ax)
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
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=10,
                        color="black" if value > 0.6 * top else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def new_figure(*, rows=1, cols=1, size=(6.0, 3.5)):
    """A figure outside pyplot (for widgets) and its axes."""
    check.positive_int("new_figure", "rows", rows)
    check.positive_int("new_figure", "cols", cols)
    if not isinstance(size, (tuple, list)) or len(size) != 2 or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) and 0 < s <= 100 for s in size):
        check.fail("new_figure", "size", check.describe(size),
                   {"en": "(width, height) in inches, each from 0 to 100", "zh": "以英寸计的 (宽, 高)，每个在 0 到 100 之间"})
    check.modules_fit("new_figure", "rows", rows, rows * cols)  # one Axes each, as slow to make as a module
    figure = Figure(figsize=size, dpi=80, layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, axes


def keep_layout(figure):
    """Let the figure's layout engine place its axes once, then keep those places: later drawings
    skip the layout, which measures every text and would double the time of each redraw. For a
    figure an explorer updates in place, whose texts keep their sizes. Returns the figure."""
    figure_of("keep_layout", "figure", figure)
    figure.draw_without_rendering()
    figure.set_layout_engine("none")
    return figure


class LayoutPerKey(ConstrainedLayoutEngine):
    """Constrained layout, run once per value of ``key(figure)`` and remembered: for a figure an
    explorer updates in place whose texts change with its controls, but only among a few layouts.
    key: a function of the figure, called at each draw, that gives what the axes' places depend
    on (the texts whose size sets the margins: tick labels, titles), all else staying the same.
    Laying out measures every text and costs as much as drawing the figure: an update whose key
    was seen before sets the axes where that layout put them (exactly where it would put them
    again) and skips it. For figures without colorbars, suptitles or figure legends (only the
    axes are placed again)."""

    def __init__(self, key, **kwargs):
        if not callable(key):  # called with the figure at each draw
            check.fail("LayoutPerKey", "key", check.describe(key),
                       {"en": "a function of the figure, such as texts_key", "zh": "以图为参数的函数，例如 texts_key"})
        super().__init__(**kwargs)
        self._key = key
        self._places = {}
        #: How many times the figure was laid out (tests read it): once per key seen.
        self.laid_out = 0

    def execute(self, fig):
        key = self._key(fig)
        places = self._places.get(key)
        if places is None:
            super().execute(fig)
            self.laid_out += 1
            self._places[key] = [ax.get_position(original=True).frozen() for ax in fig.axes]
            return
        for ax, place in zip(fig.axes, places):
            ax._set_position(place)  # as constrained layout places an axes (both positions)


def texts_key(figure):
    """A LayoutPerKey key: every axes' titles, axis labels and tick labels, as text (what sets the
    margins of a figure whose other artists stay inside its axes)."""
    figure_of("texts_key", "figure", figure)
    return tuple(
        (tuple(ax.get_title(loc) for loc in ("left", "center", "right")), ax.get_xlabel(), ax.get_ylabel(),
         tuple(label.get_text() for label in ax.get_xticklabels()),
         tuple(label.get_text() for label in ax.get_yticklabels()))
        for ax in figure.axes
    )


def figure_png(figure):
    """The figure as PNG bytes (for an ipywidgets Image). It is drawn on its own Agg canvas, made
    on the first call and kept, so a figure redrawn again and again reuses its renderer, and the
    pixels are compressed quickly (an explorer's picture is sent once, never stored)."""
    figure_of("figure_png", "figure", figure)
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    canvas.draw()
    width, height = canvas.get_width_height(physical=True)
    buffer = io.BytesIO()
    Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
        buffer, format="png", compress_level=1)
    return buffer.getvalue()
