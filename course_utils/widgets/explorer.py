"""The one way every explorer is built: controls, a view, a picture and a summary."""

import html

import ipywidgets as w

from ..viz import figure_png


def explorer(view, **controls):
    """A VBox of `controls`, the view's figure and its summary, updated whenever a control moves.

    view(**values) -> (matplotlib Figure or None, str). Returns the VBox; its ``.image`` and
    ``.summary`` attributes are the output widgets (tests read them).
    """
    image = w.Image(format="png", layout=w.Layout(max_width="640px"))
    summary = w.HTML()

    def update(_change=None):
        figure, text = view(**{name: control.value for name, control in controls.items()})
        if figure is not None:
            image.value = figure_png(figure)
        image.layout.display = None if figure is not None else "none"
        summary.value = f"<pre style='margin:0'>{html.escape(text)}</pre>"

    for control in controls.values():
        control.observe(update, names="value")
    update()
    box = w.VBox([w.HBox(list(controls.values())), image, summary])
    box.image, box.summary = image, summary
    return box
