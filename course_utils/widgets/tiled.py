"""Lesson 08: step through the tiles of a small attention and watch m, ℓ and the output rows change.

The example is fixed: 8 queries, 8 keys, d = 4, d_v = 2, one head (``EXAMPLE``). ``tile_steps``
runs the tiled forward one tile at a time and keeps every state; ``tiles_view`` draws the tile grid
with the tiles done so far and the output rows so far, and lists each query's m, ℓ and output;
``tiles_explorer`` puts a step slider, a block size and a causal switch on it.
"""

from functools import lru_cache

import ipywidgets as w
import torch

from .. import validation
from ..i18n import message
from ..tiled import FULL, SKIP, SoftmaxState, position_keep, empty_state, finish, tile_kinds, update
from ..viz import new_figure
from ..viz.figures import LayoutPerKey, texts_key
from ..viz.tiled import tile_grid
from .explorer import explorer, reusable

L, D, D_V = 8, 4, 2
#: The block sizes the explorer offers (the same for queries and keys).
BLOCKS = (1, 2, 4, 8)


def _example():
    g = torch.Generator().manual_seed(8)
    q = torch.randn(L, D, generator=g, dtype=torch.float64) * 1.5
    k = torch.randn(L, D, generator=g, dtype=torch.float64) * 1.5
    return q, k, torch.randn(L, D_V, generator=g, dtype=torch.float64)


#: (query, key, value) of the explorer, float64: (8, 4), (8, 4), (8, 2).
EXAMPLE = _example()


def tile_steps(block=2, causal=True):
    """[(tile, kind, states)]: the first entry (None, None, states before any tile), then one per
    computed tile (i, j) in the order the tiled forward takes them. states: {query block i:
    SoftmaxState of its rows}."""
    validation.positive_int("tile_steps", "block", block)
    validation.flag("tile_steps", "causal", causal)
    return list(_steps(block, causal))


@lru_cache(maxsize=16)
def _steps(block, causal):
    q, k, v = EXAMPLE
    q = q / D ** 0.5
    kinds = tile_kinds(L, L, block, block, causal=causal)
    starts = range(0, L, block)
    states = {i: empty_state((min(block, L - s),), D_V, dtype=torch.float64) for i, s in enumerate(starts)}
    steps = [(None, None, dict(states))]
    for i, i0 in enumerate(starts):
        i1 = min(i0 + block, L)
        for j, j0 in enumerate(range(0, L, block)):
            kind = int(kinds[i, j])
            if kind == SKIP:
                continue
            j1 = min(j0 + block, L)
            scores = q[i0:i1] @ k[j0:j1].T
            if causal:
                scores = scores.masked_fill(~position_keep(i0, i1, j0, j1, -float("inf"), 0, "cpu"), float("-inf"))
            states = dict(states)
            states[i] = update(states[i], scores, v[j0:j1])
            steps.append(((i, j), kind, states))
    return tuple(steps)


def _rows(states, block):
    """(m, ℓ, output) for all L rows, from the states of the query blocks."""
    m = torch.cat([states[i].m for i in sorted(states)])
    ell = torch.cat([states[i].ell for i in sorted(states)])
    output = torch.cat([finish(SoftmaxState(*states[i]))[0] for i in sorted(states)])
    return m, ell, output


def exact_output(causal=True):
    """softmax(QKᵀ/√d)V of the example, materialised (the explorer's target)."""
    validation.flag("exact_output", "causal", causal)
    q, k, v = EXAMPLE
    scores = q @ k.T / D ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, -1) @ v


def tiles_view(step=0, block=2, causal=True, figure=None):
    """The explorer's view after `step` computed tiles (clamped to the last): the tile grid and the
    output rows so far beside the exact output; the summary lists each query's m, ℓ and output.
    figure: one this view returned before, updated instead of a new one (what the explorer passes)."""
    if not isinstance(block, int) or isinstance(block, bool) or block not in BLOCKS:
        validation.fail("tiles_view", "block", validation.describe(block),
                        {"en": f"one of {', '.join(map(str, BLOCKS))}", "zh": f"{'、'.join(map(str, BLOCKS))} 之一"})
    validation.whole_number("tiles_view", "step", step)
    validation.flag("tiles_view", "causal", causal)
    steps = _steps(block, causal)
    step = min(step, len(steps) - 1)
    tile, kind, states = steps[step]
    m, ell, output = _rows(states, block)
    exact = exact_output(causal)
    kinds = tile_kinds(L, L, block, block, causal=causal)
    figure = reusable(figure, "tiles")
    if figure is None:  # drawn once; later views redraw the tiles and set the output's pixels
        figure = _tiles_figure()
    grid, rows = figure.axes
    for patch in grid.patches[:]:  # the tiles of the last view (tile_grid sets the ticks and limits again)
        patch.remove()
    tile_grid(kinds, ax=grid, done=step, current=tile, legend=False)
    rows.images[0].set_data(torch.cat([output, exact], dim=1).numpy())
    last = len(steps) - 1
    if tile is None:
        head = message("l08.widget.start", steps=last)
    else:
        i, j = tile
        rows = f"{i * block}–{min((i + 1) * block, L) - 1}" if block > 1 else str(i)
        head = message("l08.widget.tile", step=step, steps=last, i=i, j=j, rows=rows,
                       kind=message("l08.plot.full" if kind == FULL else "l08.plot.partial"))
    lines = [head, message("l08.widget.skipped", skipped=int((kinds == SKIP).sum()), total=kinds.numel()), "",
             message("l08.widget.header")]
    for r in range(L):
        shown = "  −∞" if m[r] == float("-inf") else f"{m[r].item():5.2f}"
        lines.append(f"{r:>5}  {shown:>6}  {ell[r].item():6.3f}   [{output[r, 0].item():5.2f}, {output[r, 1].item():5.2f}]"
                     f"     [{exact[r, 0].item():5.2f}, {exact[r, 1].item():5.2f}]")
    if step == last and torch.allclose(output, exact, rtol=0, atol=1e-6):
        lines += ["", message("l08.widget.done")]
    return figure, "\n".join(lines)


def _tiles_figure():
    """The tiles view's figure: the tile grid's axes (drawn by the view) and the output rows so far
    beside the exact output (pixels set by the view). The grid's tick labels change with the block
    size, so each block size is laid out once (LayoutPerKey)."""
    figure, axes = new_figure(cols=2, size=(8.2, 3.6))
    figure.set_layout_engine(LayoutPerKey(texts_key))
    figure.explorer_key = "tiles"
    rows = axes[0, 1]
    rows.imshow(torch.zeros(L, 2 * D_V).numpy(), cmap="coolwarm", vmin=-2, vmax=2, aspect="auto")
    rows.axvline(D_V - 0.5, color="black", linewidth=2)
    rows.set_xticks(range(2 * D_V), [str(f) for f in range(D_V)] * 2)
    rows.set_yticks(range(L))
    rows.set_xlabel(message("l08.plot.feature"), fontsize=10)
    rows.set_ylabel(message("l08.plot.query"), fontsize=10)
    # a title over each half: the rows so far (left of the line) and the exact output they must reach
    for centre, key in (((D_V - 1) / 2, "l08.plot.output"), (D_V + (D_V - 1) / 2, "l08.plot.exact")):
        rows.text(centre, 1.02, message(key), fontsize=10, ha="center", va="bottom", transform=rows.get_xaxis_transform())
    rows.tick_params(labelsize=10)
    return figure


def tiles_explorer(block=2, causal=True):
    """Move the step slider to run the tiled forward of ``EXAMPLE`` one tile at a time
    (``tiles_view``); pick the block size and whether it is causal."""
    if not isinstance(block, int) or isinstance(block, bool) or block not in BLOCKS:
        validation.fail("tiles_explorer", "block", validation.describe(block),
                        {"en": f"one of {', '.join(map(str, BLOCKS))}", "zh": f"{'、'.join(map(str, BLOCKS))} 之一"})
    validation.flag("tiles_explorer", "causal", causal)
    style = {"description_width": "initial"}
    step = w.IntSlider(value=0, min=0, max=last_step(block, causal), description=message("l08.widget.step"),
                       continuous_update=False, style=style)
    block_choice = w.Dropdown(options=BLOCKS, value=block, description=message("l08.widget.block"), style=style,
                              layout=w.Layout(width="160px"))
    causal_box = w.Checkbox(value=causal, description=message("l08.widget.causal"), style=style)

    def follow_tiling(_change):
        """The slider ends at this tiling's last tile (16 with blocks of 2 and no mask, 1 with blocks of 8):
        its range is set before the view redraws (an observer registered before the explorer's)."""
        step.max = last_step(block_choice.value, causal_box.value)  # a larger value is clamped to it

    block_choice.observe(follow_tiling, names="value")
    causal_box.observe(follow_tiling, names="value")
    return explorer(tiles_view, step=step, block=block_choice, causal=causal_box)


def last_step(block=2, causal=True):
    """The number of tiles the explorer's tiled forward computes with this tiling: its last step."""
    validation.positive_int("last_step", "block", block)
    validation.flag("last_step", "causal", causal)
    return len(_steps(block, causal)) - 1
