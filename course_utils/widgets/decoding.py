"""Lesson 07: watch a KV cache fill up, token by token, for MHA, GQA and MQA, with or without a
sliding window (a rolling buffer), and what it weighs."""

import ipywidgets as w
import torch
from matplotlib.figure import Figure

from .. import validation
from ..decoding import KVCache, cache_bytes
from ..i18n import message
from ..viz.decoding import cache_slots
from ..viz.figures import LayoutPerKey, texts_key
from ..viz.probsparse import format_bytes
from .explorer import explorer, reusable

#: The attention variants the explorer offers: name -> key/value heads, for H = 8 query heads.
VARIANTS = {"MHA": 8, "GQA": 2, "MQA": 1}
#: The sliding windows it offers (0: none).
WINDOWS = (0, 4, 8)
#: The most tokens it generates.
MOST_TOKENS = 24
HEAD_DIM = 64
#: The width of each of the MHA / GQA / MQA buttons, in pixels.
VARIANT_BUTTON_PX = 56
#: Llama-2-70B's 64 query heads over as many key/value heads as each variant would give it.
LLAMA_70B_KV = {"MHA": 64, "GQA": 8, "MQA": 1}


def cache_view(tokens=6, variant="GQA", window=0, figure=None):
    """The cache explorer's view: a layer with 8 query heads and VARIANTS[variant] key/value heads
    (d = 64) generates `tokens` tokens (1 to MOST_TOKENS) one at a time through a ``KVCache``
    (with ``window`` > 0: a rolling buffer of that many slots). Returns ``(figure, summary)``: the
    cache's slots per key/value head, each holding a token's position (the newest in green), and its
    bytes for this toy layer and for Llama-2-70B's shape with the same H_kv. figure: one this view
    returned before, resized to this grid and drawn again instead of a new one (what the explorer
    passes)."""
    function = "cache_view"
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MOST_TOKENS:
        validation.fail(function, "tokens", validation.describe(tokens),
                        {"en": f"an int from 1 to {MOST_TOKENS}", "zh": f"1 到 {MOST_TOKENS} 之间的整数"})
    validation.one_of(function, "variant", variant, tuple(VARIANTS))
    if not isinstance(window, int) or isinstance(window, bool) or window not in WINDOWS:
        validation.fail(function, "window", validation.describe(window),
                        {"en": f"one of {', '.join(map(str, WINDOWS))} (0: no window)",
                         "zh": f"{'、'.join(map(str, WINDOWS))} 之一（0 表示没有窗口）"})
    kv = VARIANTS[variant]
    cache = KVCache(window=window or None)
    keys = 0
    for _ in range(tokens):
        step = torch.zeros(1, kv, 1, 1)  # the values do not matter here, only where they go
        keys = cache.update(step, step)[0].shape[2]
    if window:
        slots = cache.slot_positions.tolist()
    else:
        slots = list(range(tokens))
    held = cache.length
    size = (min(max(6.0, 1.2 + 0.4 * len(slots)), 11.0), 1.1 + 0.36 * kv)
    figure = reusable(figure, "cache")
    if figure is None:
        figure = Figure(figsize=size, dpi=80, layout=LayoutPerKey(_layout_key))
        figure.add_subplot()
        figure.explorer_key = "cache"
    figure.set_size_inches(size)  # the grid's size follows the slots and heads
    ax = figure.axes[0]
    for image in ax.images[:]:  # the last grid (cache_slots sets the ticks and limits again)
        image.remove()
    cache_slots(slots, kv, tokens - 1, ax=ax, title=message("l07.widget.title", variant=variant, n=tokens, held=held))
    toy = cache_bytes(1, kv, HEAD_DIM, held)
    big = cache_bytes(80, LLAMA_70B_KV[variant], 128, held)
    summary = message("l07.widget.summary", n=tokens, variant=variant,
                      window=window or message("l07.widget.no_window"), held=held, kv=kv, big_kv=LLAMA_70B_KV[variant],
                      toy=format_bytes(toy), big=format_bytes(big), keys=keys)
    return figure, summary


def _layout_key(figure):
    """What the cache figure's layout depends on: its size and its texts (LayoutPerKey)."""
    return tuple(figure.get_size_inches()), texts_key(figure)


def cache_explorer(tokens=6, variant="GQA", window=0):
    """A slider for the number of tokens generated, a choice of MHA / GQA / MQA and of a sliding
    window, over ``cache_view``."""
    validation.whole_number("cache_explorer", "tokens", tokens, 1, MOST_TOKENS)
    validation.one_of("cache_explorer", "variant", variant, tuple(VARIANTS))
    if not isinstance(window, int) or isinstance(window, bool) or window not in WINDOWS:
        validation.fail("cache_explorer", "window", validation.describe(window),
                        {"en": f"one of {', '.join(map(str, WINDOWS))} (0: no window)",
                         "zh": f"{'、'.join(map(str, WINDOWS))} 之一（0 表示没有窗口）"})

    return explorer(
        cache_view,
        tokens=w.IntSlider(value=tokens, min=1, max=MOST_TOKENS, description=message("l07.widget.tokens"),
                           continuous_update=False),
        # buttons as wide as their three letters (ipywidgets' are 148 px each): the three then sit on one
        # row beside the slider and the window's menu, where at their width they wrapped onto two
        variant=w.ToggleButtons(options=list(VARIANTS), value=variant, description=message("l07.widget.variant"),
                                style={"button_width": f"{VARIANT_BUTTON_PX}px"}),
        window=w.Dropdown(options=[(message("l07.widget.no_window") if n == 0 else str(n), n) for n in WINDOWS],
                          value=window, description=message("l07.widget.window")),
    )
