"""Plots the lessons draw: attention heatmaps and friends, in a style that renders Chinese.

Plot helpers draw on an Axes (a new figure when none is given) and return it; a notebook cell
ends with ``plt.show()``, so no ``<Figure ...>`` text is ever printed. Widgets use
``figure_png``, which renders a figure that pyplot never sees (so it is not shown twice).

One module per topic; everything is importable from ``course_utils.viz`` itself:
``figures`` (style, fonts, new figures, the heatmap), ``shapes`` (memory layout, broadcasting,
split heads), ``masks`` (mask pictures, head/batch slots), ``heads`` (per-head maps, cost curves),
``probsparse`` (softmax rows and their measure, chosen queries, the walkthrough's bytes),
``blocks`` (the Transformer block: the decoder's two masks, a layer's multiply-adds by part),
``positions`` (positional encodings as pictures, post-norm against pre-norm: the gradient by layer
and training with and without a learning-rate warm-up),
``seq2seq`` (the trained encoder–decoder: its decoder's two maps, cross-attention by offset),
``decoding`` (KV cache sizes of published models, its growth, a rolling cache's slots, a decode
step's cost), ``tiled`` (the grid of tiles: computed, cut by the mask, skipped).
"""

from .blocks import decoder_masks, flops_by_part
from .decoding import cache_bytes_bars, cache_growth, cache_slots, step_costs
from .figures import CJK_FONT_FILE, CJK_FONT_NAME, figure_png, heatmap, keep_layout, new_figure, use_course_style
from .heads import cost_lines, head_grid
from .masks import head_batch_picture, head_slots, mask_picture
from .positions import encoding_curves, encoding_heatmap, gradient_by_layer, offset_dot_products, warmup_curves
from .probsparse import chosen_weights, format_bytes, walkthrough_bars, weight_rows
from .seq2seq import decoder_maps, offset_bars
from .shapes import broadcast_axes, broadcast_picture, memory_order, split_heads_picture
from .tiled import tile_grid

__all__ = [
    "CJK_FONT_FILE",
    "CJK_FONT_NAME",
    "broadcast_axes",
    "broadcast_picture",
    "cache_bytes_bars",
    "cache_growth",
    "cache_slots",
    "chosen_weights",
    "cost_lines",
    "decoder_maps",
    "decoder_masks",
    "encoding_curves",
    "encoding_heatmap",
    "figure_png",
    "flops_by_part",
    "format_bytes",
    "gradient_by_layer",
    "head_batch_picture",
    "head_grid",
    "head_slots",
    "heatmap",
    "keep_layout",
    "mask_picture",
    "memory_order",
    "new_figure",
    "offset_bars",
    "offset_dot_products",
    "split_heads_picture",
    "step_costs",
    "tile_grid",
    "use_course_style",
    "walkthrough_bars",
    "warmup_curves",
    "weight_rows",
]
