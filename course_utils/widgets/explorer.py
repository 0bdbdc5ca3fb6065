"""The one way every explorer is built: controls, a view, a picture and a summary."""

import html
import inspect

import ipywidgets as w
from torch import nn

from .. import validation
from ..viz import figure_png
from ..viz.figures import figure_of


def explorer(view, **controls):
    """A VBox of `controls`, the view's figure and its summary, updated whenever a control moves.

    view(**values) -> (matplotlib Figure or None, str). A view that takes a ``figure`` argument is
    handed the figure it returned last time (None the first time), so that it can update that
    figure's artists instead of drawing a new figure: making a figure and laying it out costs more
    than most views compute. Returns the VBox; its ``.image`` and ``.summary`` attributes are the
    output widgets, ``.controls`` the controls by name, ``.figure`` the figure shown (tests read them).
    """
    validation.function_of_nothing("explorer", "view", view)  # called with the controls' values
    for name, control in controls.items():
        if not isinstance(control, w.ValueWidget):
            validation.fail("explorer", name, validation.describe(control),
                            {"en": "a control with a value, such as ipywidgets.IntSlider(...)",
                             "zh": "有取值的控件，例如 ipywidgets.IntSlider(...)"})
    takes_figure = "figure" in inspect.signature(view).parameters
    # The picture is shown at its own size, one pixel of the PNG to one pixel of the page, so it is
    # as crisp as it was drawn and its text keeps the size it was drawn at; a narrower page scales it
    # down (max-width), keeping its proportions. Its width is set: in the VBox (a flex column that
    # stretches its children) an image of no set width would be stretched to the cell's width, blurred.
    image = w.Image(format="png", layout=w.Layout(max_width="100%", height="auto", align_self="flex-start"))
    summary = w.HTML()

    def update(_change=None):
        values = {name: control.value for name, control in controls.items()}
        figure, text = view(figure=box.figure, **values) if takes_figure else view(**values)
        if figure is not None:
            image.value = figure_png(figure)
            image.layout.width = f"{shown_width(figure)}px"  # sent only when it changes
            box.figure = figure
        image.layout.display = None if figure is not None else "none"
        summary.value = f"<pre style='margin:0'>{html.escape(text)}</pre>"

    box = w.VBox([w.HBox(list(controls.values())), image, summary])
    box.image, box.summary, box.controls, box.figure = image, summary, controls, None
    for control in controls.values():
        control.observe(update, names="value")
    update()
    return box


def shown_width(figure):
    """The width in pixels of `figure`'s last PNG (figure_png: drawn on its Agg canvas), the width the
    explorer shows it at."""
    figure_of("shown_width", "figure", figure)
    return figure.canvas.get_width_height(physical=True)[0]


def reusable(figure, key):
    """`figure` when a view drew it under the same `key` (the view's name and whatever fixes the
    figure's layout: its artists can be updated in place), else None."""
    return figure if figure is not None and getattr(figure, "explorer_key", None) == key else None


def model_state(model):
    """What changes whenever `model`'s parameters change in place (an optimizer step bumps each
    tensor's version counter): with the model itself, a key to cache what the model computes."""
    validation.module("model_state", "model", model)
    return tuple(parameter._version for parameter in model.parameters())
