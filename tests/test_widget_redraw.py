"""What keeps the explorers' redraws fast, checked as structure, never as time (the times are
measured by benchmarks/bench_widgets.py): the figure is made once and updated when a control
moves, a figure whose texts keep their sizes is laid out once, the PNG is drawn on the figure's own
canvas, and what a control does not change is not computed again. And an updated figure shows
exactly what a new one would."""

import io

import numpy as np
import pytest
import torch
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from PIL import Image

from course_utils import seq2seq, toy, viz, widgets
from course_utils.widgets import attention, flash_program, models
from course_utils.widgets import seq2seq as seq2seq_widgets
from course_utils.widgets.explorer import model_state

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def nets():
    torch.manual_seed(0)
    return {"neighbours": toy.NeighboursModel(heads=2).eval(), "reverse": toy.ReverseModel().eval(),
            "double": toy.EncoderDecoder().eval(), "reverser": seq2seq.make_model(0).eval()}


def explorers(nets):
    """(name, build: a new explorer, {control: another value}, laid out once); built only when a
    test needs it (a lesson 03-06 explorer runs its model when built). The figures whose texts
    change with their controls are laid out once per set of texts (LayoutPerKey), checked below."""
    return [
        ("permute", widgets.permute_explorer, {"order": (2, 0, 1), "contiguous": True}, True),
        ("broadcast", widgets.broadcast_explorer, {"mask": (2, 5), "scores": (2, 4, 1, 5)}, False),
        ("scaling", widgets.scaling_explorer, {"d_k": 512, "scaled": True}, False),
        ("mask", widgets.mask_explorer, {"length_1": 2, "length_2": 0, "causal": True}, True),
        ("attention maps", lambda: widgets.attention_maps_explorer(nets["reverse"], nets["double"]), {"example": 7},
         True),
        ("heads", lambda: widgets.heads_explorer(nets["neighbours"]), {"example": 7, "head": 1}, True),
        ("walkthrough", widgets.walkthrough_explorer,
         {"length": 16384, "batch": 256, "heads": 64, "dim": 128, "factor": 10}, True),
        ("decoding", lambda: widgets.decoding_explorer(nets["reverser"]), {"example": 7, "text": "abc"}, False),
        ("cache", widgets.cache_explorer, {"tokens": 20, "variant": "MQA", "window": 4}, False),
        ("tiles", widgets.tiles_explorer, {"step": 3, "block": 4, "causal": False}, False),
        ("program", flash_program.program_explorer, {"block": 1, "causal": False, "step": 2}, False),
    ]


#: The most bytes of PNG an explorer sends per redraw (the largest, lesson 06's, is about 53 KiB at
#: 80 dpi): a larger picture (more dots per inch, a bigger figure) costs every redraw its encoding
#: here, and its transfer and decoding in the browser.
MOST_PNG_BYTES = 96 * 1024


@pytest.mark.slow  # (every explorer drawn again: `make test`'s, not the inner loop's)
def test_every_explorer_keeps_its_figure_and_canvas_lays_out_once_where_it_can_and_sends_a_small_picture(nets):
    for name, build, moves, laid_out_once in explorers(nets):
        box = build()
        figure, canvas = box.figure, box.figure.canvas
        assert len(box.image.value) <= MOST_PNG_BYTES, (name, len(box.image.value))
        for control, value in moves.items():
            before = box.image.value
            box.controls[control].value = value
            assert box.figure is figure and figure.canvas is canvas, (name, control)
            assert box.image.value != before, (name, control)  # it did redraw
            assert len(box.image.value) <= MOST_PNG_BYTES, (name, control, len(box.image.value))
            if laid_out_once:  # no layout engine: nothing is measured again on a redraw
                assert isinstance(figure.get_layout_engine(), (type(None), PlaceHolderLayoutEngine)), (name, control)


def _pixels(png):
    return np.asarray(Image.open(io.BytesIO(png)))


@pytest.mark.slow  # (every explorer drawn again: `make test`'s, not the inner loop's)
@pytest.mark.parametrize("name", ["permute", "broadcast", "scaling", "mask", "attention maps", "heads", "decoding",
                                  "cache", "tiles", "program"])
def test_an_updated_figure_shows_exactly_what_a_new_one_would(nets, name):
    build, moves = next((build, moves) for n, build, moves, _ in explorers(nets) if n == name)
    box = build()
    for control, value in moves.items():
        box.controls[control].value = value
    values = {control: widget.value for control, widget in box.controls.items()}
    fresh = build()
    for control, value in values.items():
        fresh.controls[control].value = value
    if name != "decoding":  # a new explorer at these values draws a figure of its own only once
        assert fresh.figure is not box.figure
    assert np.array_equal(_pixels(box.image.value), _pixels(viz.figure_png(fresh.figure)))


# (explorer, moves: the last one's texts laid out before, by another state of the same texts)
LAID_OUT_PER_KEY = [
    (widgets.scaling_explorer, [("d_k", 128), ("d_k", 1), ("d_k", 256)]),
    (widgets.tiles_explorer, [("block", 4), ("step", 1), ("block", 2), ("step", 5)]),
    (widgets.cache_explorer, [("window", 4), ("variant", "MHA"), ("window", 0), ("variant", "GQA"), ("window", 4)]),
    (flash_program.program_explorer, [("step", 1), ("block", 1), ("step", 2), ("block", 2), ("step", 3)]),
]


@pytest.mark.parametrize("build, moves", LAID_OUT_PER_KEY, ids=["scaling", "tiles", "cache", "program"])
def test_a_figure_laid_out_per_key_lays_out_only_new_texts_and_shows_what_a_new_figure_would(build, moves):
    """The layout of a figure updated in place is computed once per set of texts (LayoutPerKey) and
    then only reused; a reused layout puts the axes exactly where a new figure's layout puts them."""
    box = build()
    engine = box.figure.get_layout_engine()
    assert isinstance(engine, viz.figures.LayoutPerKey)
    for control, value in moves:
        box.controls[control].value = value
    assert engine.laid_out < 1 + len(moves), "every redraw laid the figure out again"
    values = {control: widget.value for control, widget in box.controls.items()}
    view = {"scaling_explorer": widgets.scaling_view, "tiles_explorer": widgets.tiles_view,
            "cache_explorer": widgets.cache_view, "program_explorer": flash_program.program_view}[build.__name__]
    fresh, _ = view(**values)
    assert fresh is not box.figure
    assert np.array_equal(_pixels(box.image.value), _pixels(viz.figure_png(fresh)))


def test_the_walkthrough_redrawn_on_its_kept_layout_says_what_a_new_one_says():
    figure, _ = widgets.walkthrough_view()
    again, summary = widgets.walkthrough_view(16384, 256, 64, 128, 10, figure=figure)
    new, new_summary = widgets.walkthrough_view(16384, 256, 64, 128, 10)
    assert again is figure and summary == new_summary

    def texts(figure):
        ax = figure.axes[0]
        figure.draw_without_rendering()
        return ([t.get_text() for t in ax.texts], [t.get_text() for t in ax.get_xticklabels()], ax.get_title(),
                [p.get_width() for p in ax.patches], ax.get_xlim())

    assert texts(again) == texts(new)


def test_a_control_that_does_not_change_a_computation_does_not_repeat_it(nets):
    attention._scaling_scores.cache_clear()
    widgets.scaling_view(d_k=64, scaled=False)
    widgets.scaling_view(d_k=64, scaled=True)  # ticking "divide by √d_k" draws no new scores
    assert attention._scaling_scores.cache_info().hits == 1

    models._heads_run.cache_clear()
    box = widgets.heads_explorer(nets["neighbours"])
    box.controls["head"].value = 1  # another head of the same example: the model does not run again
    assert models._heads_run.cache_info().misses == 1 and models._heads_run.cache_info().hits == 1

    seq2seq_widgets._decoded.cache_clear()
    box = widgets.decoding_explorer(nets["reverser"])
    box.controls["example"].value = 7
    box.controls["example"].value = 0  # back to a source decoded before
    assert seq2seq_widgets._decoded.cache_info().hits == 1


def test_a_model_changed_in_place_is_computed_again():
    torch.manual_seed(1)
    model = toy.NeighboursModel(heads=2).eval()
    widgets.heads_view(model, example=3, head=0)
    map_before = models._heads_run(model, model_state(model), 3)[2].clone()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(-1.5)  # an in-place change, as an optimizer step makes
    widgets.heads_view(model, example=3, head=0)
    map_after = models._heads_run(model, model_state(model), 3)[2]
    assert not torch.equal(map_before, map_after)


def test_every_explorer_shows_its_picture_at_its_own_size(nets):
    """One pixel of the PNG to one pixel of the page: the image's width is the PNG's, it is not
    stretched to the cell's width by its flex column, and a narrower page scales it down whole."""
    for name, build, moves, _ in explorers(nets):
        box = build()
        for control, value in [(None, None), *moves.items()]:
            if control is not None:
                box.controls[control].value = value
            layout = box.image.layout
            assert layout.width == f"{Image.open(io.BytesIO(box.image.value)).width}px", (name, control)
            assert (layout.max_width, layout.height, layout.align_self) == ("100%", "auto", "flex-start"), name


#: ipywidgets' CSS (its variables): a control with a description is 300 px wide, its label 80 px; a
#: toggle button is as wide as its style's button_width, plus 2 px of margin on each side. JupyterLab's
#: output area at a 1280-pixel-wide window is about 1000 px wide.
INLINE_PX, LABEL_PX, BUTTON_MARGIN_PX, OUTPUT_PX = 300, 80, 4, 1000


def test_lesson_07s_variant_buttons_sit_on_one_row_beside_the_other_controls():
    """The learner saw MHA / GQA / MQA wrap onto two rows: at ipywidgets' 148-px buttons, the row of
    controls (slider, buttons, menu) is wider than the output area, and the buttons' box wraps."""
    from course_utils.widgets import decoding

    box = widgets.cache_explorer()
    variant = box.controls["variant"]
    width = int(variant.style.button_width.removesuffix("px"))
    assert width == decoding.VARIANT_BUTTON_PX
    row = INLINE_PX + LABEL_PX + len(variant.options) * (width + BUTTON_MARGIN_PX) + INLINE_PX
    assert row <= OUTPUT_PX, row
    assert LABEL_PX + 3 * (148 + BUTTON_MARGIN_PX) + 2 * INLINE_PX > OUTPUT_PX  # (what wrapped before)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lesson_08s_output_plot_names_each_half(lang):
    """The rows so far, left of the line, and the exact output, right of it: each half has its title,
    over it, and the two do not touch."""
    from course_utils import i18n, setup
    from course_utils.widgets.tiled import D_V

    previous = i18n.language()
    try:
        setup(lang)
        figure, _ = widgets.tiles_view(3, 2, True)
        viz.figure_png(figure)  # drawn: the texts have their places
    finally:
        i18n.set_language(previous)
    rows = figure.axes[1]
    titles = {t.get_text(): t.get_window_extent() for t in rows.texts}
    left, right = titles[i18n.text(lang, "l08.plot.output")], titles[i18n.text(lang, "l08.plot.exact")]
    line = rows.transData.transform((D_V - 0.5, 0))[0]
    box = rows.get_window_extent()
    assert box.x0 <= left.x0 and left.x1 < line < right.x0 and right.x1 <= box.x1, (left, line, right, box)
    assert left.y0 >= box.y1 and right.y0 >= box.y1
