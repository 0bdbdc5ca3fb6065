"""Every text of every course figure is readable where it is shown: at least 10 points at the size
the picture is displayed, and no axis reads an absurd value.

Displayed size: a figure is drawn at 80 dpi and shown at its own size (an explorer's picture up to
800 pixels wide, ``widgets.explorer``; a notebook's figure up to 12 inches, 960 pixels, what a
JupyterLab cell shows on a laptop beside its file browser); a wider figure would be scaled down,
and its text with it. The views and plot helpers are drawn here in both languages; the lessons'
own plotting code is read from their sources.
"""

import ast
import re
from pathlib import Path

import matplotlib.text
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import i18n, probsparse, seq2seq, toy, viz, widgets

#: The smallest text, in points at the displayed size.
SMALLEST = 10
#: The widest a figure is shown without scaling, in pixels: an explorer's picture, a notebook's figure.
EXPLORER_WIDTH, NOTEBOOK_WIDTH = 800, 960
SOURCES = sorted((Path(__file__).parents[1] / "notebooks" / "source").glob("0[0-6]_*.py"))


def too_small(figure, width):
    """The texts of `figure` (text, displayed size in points) below SMALLEST once it is shown at most
    `width` pixels wide, and the figure's width in pixels."""
    figure.draw_without_rendering()  # ticks and their labels exist once the figure is drawn
    pixels = figure.get_figwidth() * figure.dpi
    scale = min(1.0, width / pixels)
    small = sorted({(text.get_text(), round(text.get_fontsize() * scale, 1))
                    for text in figure.findobj(matplotlib.text.Text)
                    if text.get_visible() and text.get_text().strip() and text.get_fontsize() * scale < SMALLEST})
    return small


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return {"neighbours": toy.NeighboursModel(heads=2).eval(), "reverse": toy.ReverseModel().eval(),
            "double": toy.EncoderDecoder().eval(), "reverser": seq2seq.make_model(0).eval()}


def views(models):
    """(name, call) for every explorer's view, at its starting values and at the ends of its ranges."""
    return [
        ("permute", lambda: widgets.permute_view((2, 0, 1), True)),
        ("broadcast", lambda: widgets.broadcast_view((2, 5), (2, 4, 1, 5))),
        ("scaling 1", lambda: widgets.scaling_view(1, False)),
        ("scaling 512", lambda: widgets.scaling_view(512, True)),
        ("mask", lambda: widgets.mask_view(4, 0, True)),
        ("attention maps", lambda: widgets.attention_maps_view(models["reverse"], models["double"], 3)),
        ("heads", lambda: widgets.heads_view(models["neighbours"], 3, 1)),
        ("walkthrough", lambda: widgets.walkthrough_view()),
        ("walkthrough smallest", lambda: widgets.walkthrough_view(16, 1, 1, 16, 1)),
        ("walkthrough largest", lambda: widgets.walkthrough_view(16384, 256, 64, 128, 10)),
        ("decoding", lambda: widgets.decoding_view(models["reverser"], 3)),
        ("decoding, 8 letters", lambda: widgets.decoding_view(models["reverser"], text="abcdefgh")),
    ]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_explorer_shows_text_of_10_points_at_least(models, language):
    i18n.set_language(language)
    for name, call in views(models):
        figure, _ = call()
        assert figure.get_figwidth() * figure.dpi <= EXPLORER_WIDTH, name
        assert too_small(figure, EXPLORER_WIDTH) == [], name


def plots():
    """(name, draw) for the plot helpers; draw(figure) draws on an empty figure."""
    g = torch.Generator().manual_seed(0)
    weights = torch.softmax(torch.randn(24, 24, generator=g), dim=-1)
    plain = probsparse.walkthrough(32, 8, 96, 64, 5)
    fast = probsparse.walkthrough(32, 8, 96, 64, 5, fast=True)

    def one(draw, size):
        def make():
            figure = Figure(figsize=size, dpi=80, layout="constrained")
            draw(figure.subplots())
            return figure
        return make

    return [
        ("heatmap with numbers", one(lambda ax: viz.heatmap(weights[:6, :6], ax=ax), (4.5, 3.6))),
        ("memory_order", one(lambda ax: viz.memory_order(torch.arange(24).view(2, 3, 4).permute(2, 0, 1), ax=ax),
                             (9.0, 2.4))),
        ("head_batch_picture", one(lambda ax: viz.head_batch_picture(3, 2, ax=ax), (4.0, 3.8))),
        ("mask_picture", one(lambda ax: viz.mask_picture(torch.ones(6, 6, dtype=torch.bool).tril(), ax=ax, title="t"),
                             (4.0, 3.5))),
        ("cost_lines", one(lambda ax: viz.cost_lines(ax, [64, 128, 256], {"a": [0.7, 0.8, 0.9], "b": [1, 2, 3]},
                                                     "x", "y"), (4.0, 4.0))),
        ("cost_lines in bytes", one(lambda ax: viz.cost_lines(ax, [128, 1024, 16384], {"a": [5e5, 3e7, 8.6e9]}, "x", "y",
                                                              in_bytes=True), (6.5, 3.6))),
        ("weight_rows", one(lambda ax: viz.weight_rows(weights[:4], [0.1, 0.2, 0.3, 0.4], ax=ax), (6.5, 5.0))),
        ("chosen_weights", one(lambda ax: viz.chosen_weights(weights, torch.tensor([3, 6, 9]), ax=ax), (6.4, 6.0))),
        ("walkthrough_bars", one(lambda ax: viz.walkthrough_bars(plain, fast, ax=ax, title="t"), (7.5, 7.6))),
        ("offset_bars", one(lambda ax: viz.offset_bars({-2: 0.1, -1: 0.2, 0: 0.6, 1: 0.1}, ax=ax), (5.0, 3.0))),
    ]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_plot_helper_shows_text_of_10_points_at_least(language):
    i18n.set_language(language)
    for name, make in plots():
        assert too_small(make(), NOTEBOOK_WIDTH) == [], name


def _code_cells(path):
    return [cell for cell in path.read_text(encoding="utf-8").split("# %%") if not cell.lstrip().startswith("[markdown]")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.stem[:2])
def test_the_lessons_plotting_code_asks_for_no_small_text_and_no_figure_wider_than_12_inches(path):
    found = []
    for cell in _code_cells(path):
        for match in re.finditer(r"(?:fontsize|labelsize)=(\d+(?:\.\d+)?)", cell):
            if float(match.group(1)) < SMALLEST:
                found.append(match.group(0))
        found += re.findall(r"fontsize=\"(?:x+-)?small\"", cell)
        for match in re.finditer(r"figsize=\(([^,]+),", cell):
            if float(ast.literal_eval(match.group(1))) * 80 > NOTEBOOK_WIDTH:
                found.append(match.group(0))
    assert found == []


def _tick_labels(ax, axis):
    ax.figure.draw_without_rendering()
    getter = ax.get_xticklabels if axis == "x" else ax.get_yticklabels
    low, high = ax.get_xlim() if axis == "x" else ax.get_ylim()
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    return [label.get_text() for label, tick in zip(getter(), ticks) if min(low, high) <= tick <= max(low, high)]


BYTES = re.compile(r"^\d{1,3} (B|kB|MB|GB|TB|PB|EB)$")  # "1 kB", "100 MB": never "10000.0 TB"


@pytest.mark.parametrize("sizes", [(16, 1, 1, 16, 1), (96, 32, 8, 64, 5), (16384, 256, 64, 128, 10)])
def test_the_walkthroughs_byte_axis_reads_round_counts_in_units_that_fit(sizes):
    figure, _ = widgets.walkthrough_view(*sizes)
    labels = _tick_labels(figure.axes[0], "x")
    assert len(labels) >= 2 and all(BYTES.match(label) for label in labels), labels


def test_a_cost_plot_in_bytes_reads_units_that_fit():
    figure = Figure(figsize=(6.5, 3.6), dpi=80, layout="constrained")
    ax = figure.subplots()
    viz.cost_lines(ax, [128, 1024, 16384], {"a": [5e5, 3e7, 8.6e9], "b": [7.5e6, 8e7, 1.8e9]}, "L", "memory",
                   in_bytes=True)
    labels = _tick_labels(ax, "y")
    assert len(labels) >= 3 and all(BYTES.match(label) for label in labels), labels


def test_a_log_axis_within_one_decade_gets_several_labelled_ticks():
    figure = Figure(figsize=(4.0, 4.0), dpi=80, layout="constrained")
    ax = figure.subplots()
    viz.cost_lines(ax, [64, 128, 256, 512], {"a": [0.7, 0.8, 1.1, 1.5], "b": [0.75, 0.9, 1.2, 1.9]}, "x", "ms")
    assert len([label for label in _tick_labels(ax, "y") if label]) >= 3
