"""ipywidgets explorers the lessons use. Each is a function that returns a widget.

Every explorer is built the same way (``explorer``): some controls, and a *view*, a plain
function of the controls' values that returns ``(figure or None, summary text)``. The widget
re-runs the view when a control moves and shows the figure as a PNG image and the summary as
text. Views are ordinary functions, so tests call them directly, without a browser or kernel.

One module per topic; everything is importable from ``course_utils.widgets`` itself:
``explorer`` (the common frame), ``shapes`` (lesson 00), ``attention`` (lessons 01–02),
``models`` (lessons 03–04, trained toy models), ``probsparse`` (lesson 05, the shape walkthrough),
``seq2seq`` (lesson 06, the trained encoder–decoder's decoding), ``decoding`` (lesson 07, the KV
cache of MHA, GQA and MQA, with a sliding window), ``tiled`` (lesson 08, a tiled forward step by step),
``next_character`` (lesson 10, temperature and top-k against a trained GPT's next character).
"""

from .attention import D_K_CHOICES, MASK_MAX_LEN, mask_explorer, mask_view, scaling_explorer, scaling_view
from .decoding import cache_explorer, cache_view
from .explorer import explorer
from .models import EXAMPLES, attention_maps_explorer, attention_maps_view, heads_explorer, heads_view
from .next_character import next_character_distribution, next_character_explorer, next_character_view
from .probsparse import LENGTHS, walkthrough_explorer, walkthrough_table, walkthrough_view
from .seq2seq import DECODING_EXAMPLES, decoding_explorer, decoding_view
from .shapes import (
    MASK_SHAPES,
    SCORES_AXES,
    SCORES_SHAPES,
    broadcast_explorer,
    broadcast_view,
    permute_explorer,
    permute_view,
)
from .tiled import tiles_explorer, tiles_view

__all__ = [
    "DECODING_EXAMPLES",
    "D_K_CHOICES",
    "EXAMPLES",
    "LENGTHS",
    "MASK_MAX_LEN",
    "MASK_SHAPES",
    "SCORES_AXES",
    "SCORES_SHAPES",
    "attention_maps_explorer",
    "attention_maps_view",
    "broadcast_explorer",
    "broadcast_view",
    "cache_explorer",
    "cache_view",
    "decoding_explorer",
    "decoding_view",
    "explorer",
    "heads_explorer",
    "heads_view",
    "mask_explorer",
    "mask_view",
    "next_character_distribution",
    "next_character_explorer",
    "next_character_view",
    "permute_explorer",
    "permute_view",
    "scaling_explorer",
    "scaling_view",
    "tiles_explorer",
    "tiles_view",
    "walkthrough_explorer",
    "walkthrough_table",
    "walkthrough_view",
]
