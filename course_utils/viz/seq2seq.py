"""Pictures of lesson 06's trained encoder–decoder (``course_utils.seq2seq``): what its decoder attends
to while it answers one source, and its cross-attention by offset from the source position it needs.

The maps are taken on the greedy decoding's own output: the decoder is run once, teacher-forced, on
BOS + the answer less its last token, which is exactly what it read while generating (the causal mask
makes row i of that run the step that chose answer token i). Masked cells (the target mask's future and
padding, the source mask's padding) have weight exactly 0 and are drawn hatched grey, so that a masked
cell never looks like a small weight.
"""

from dataclasses import dataclass

import matplotlib
import numpy as np
import torch
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .. import seq2seq
from .. import validation as check
from ..i18n import message
from ..masks import causal_mask
from .figures import figure_of, heatmap

#: How masked cells are drawn on top of a map (weight exactly 0 there).
MASKED_STYLE = {"facecolor": "#d9d9d9", "edgecolor": "#8c8c8c", "hatch": "///", "linewidth": 0.0}
#: The colour of the needed position's bar (offset 0) and of the other offsets.
NEEDED_COLOUR, OTHER_COLOUR = "#d9822b", "#2b7bba"


@dataclass
class Decoding:
    """One source's greedy decoding and the decoder's attention while it produced it.

    source (L_s,) int64 (letters, EOS, any padding); answer (T,) the greedy output; target_in (T,)
    BOS + answer[:-1], what the decoder read at each step; self_weights (H, T, T) and cross_weights
    (H, T, L_s), the last decoder layer's weights; target_keep (T, T) and source_keep (T, L_s), the
    bool keep masks (True = may attend) those weights were computed under.
    """

    source: torch.Tensor
    answer: torch.Tensor
    target_in: torch.Tensor
    self_weights: torch.Tensor
    cross_weights: torch.Tensor
    target_keep: torch.Tensor
    source_keep: torch.Tensor


def _decoding_and_figure(function, result, figure):
    """A Decoding (what ``decoding`` returns) and a matplotlib Figure to draw it on."""
    if not isinstance(result, Decoding):
        check.fail(function, "result", check.describe(result),
                   {"en": "a Decoding, what viz.seq2seq.decoding(model, source) returns",
                    "zh": "Decoding，即 viz.seq2seq.decoding(model, source) 的返回值"})
    figure_of(function, "figure", figure)


def _model(function, model):
    if not isinstance(model, seq2seq.Reverser):
        check.fail(function, "model", check.describe(model),
                   {"en": "a seq2seq.Reverser (e.g. seq2seq.train(seed=0).model)",
                    "zh": "seq2seq.Reverser（例如 seq2seq.train(seed=0).model）"})


def _source(function, source, pad_to):
    """`source` as token ids (L_s,) int64: a string of letters gets its EOS; then padding to `pad_to`."""
    longest = seq2seq.MAX_LENGTH + 1  # letters and the EOS
    if isinstance(source, str):
        try:
            tokens = seq2seq.source_of(source)[0]  # the letters, then EOS
        except check.ArgumentError:
            check.fail(function, "source", check.describe(source),
                       {"en": f"1 to {seq2seq.MAX_LENGTH} of the letters a to {chr(ord('a') + seq2seq.LETTERS - 1)}, "
                              "or a 1-D tensor of token ids",
                        "zh": f"1 到 {seq2seq.MAX_LENGTH} 个 a 到 {chr(ord('a') + seq2seq.LETTERS - 1)} 的字母，"
                              "或一维的词元 id 张量"})
    elif (isinstance(source, torch.Tensor) and source.ndim == 1 and not source.dtype.is_floating_point
          and source.dtype != torch.bool and 1 <= len(source) <= longest
          and bool(((source >= 0) & (source < seq2seq.VOCAB)).all()) and int(source[0]) != seq2seq.PAD):
        tokens = source.detach().cpu().long()
    else:
        check.fail(function, "source", check.describe(source),
                   {"en": f"a string of 1 to {seq2seq.MAX_LENGTH} letters, or a 1-D int tensor of 1 to {longest} "
                          f"token ids from 0 to {seq2seq.VOCAB - 1} that does not start with PAD",
                    "zh": f"1 到 {seq2seq.MAX_LENGTH} 个字母组成的字符串，或一维整数张量：1 到 {longest} 个 "
                          f"0 到 {seq2seq.VOCAB - 1} 的词元 id，且不以 PAD 开头"})
    if pad_to is not None:
        if isinstance(pad_to, bool) or not isinstance(pad_to, int) or not len(tokens) <= pad_to <= longest:
            check.fail(function, "pad_to", check.describe(pad_to),
                       {"en": f"None or an int from {len(tokens)} (the source's length) to {longest}",
                        "zh": f"None，或 {len(tokens)}（源序列的长度）到 {longest} 之间的整数"})
        tokens = torch.cat([tokens, torch.full((pad_to - len(tokens),), seq2seq.PAD)])
    return tokens


@torch.no_grad()
def decoding(model, source, pad_to=None, function="decoding"):
    """Greedy-decode one source with `model` (a ``seq2seq.Reverser``) and take the last decoder
    layer's attention weights on what the decoder read while it answered.

    source: a string of 1 to 8 letters a .. j (its EOS is appended), or a 1-D tensor of token ids
    (e.g. a row of ``seq2seq.held_out().source``, padding included). pad_to: pad the source with PAD
    to this length first (e.g. 9, a held-out batch's width), so the source mask has work to do.
    function: the name an error message gives (the public function that was called).
    Returns a ``Decoding``.
    """
    _model(function, model)
    tokens = _source(function, source, pad_to)  # (L_s,)
    answer = seq2seq.greedy_decode(model, tokens[None])[0]  # (T,)
    target_in = torch.cat([torch.tensor([seq2seq.BOS]), answer[:-1]])  # (T,): what each step read
    _, (self_weights, cross_weights) = model(tokens[None], target_in[None], need_weights=True)
    T = len(answer)
    target_keep = causal_mask(T) & (target_in != seq2seq.PAD)[None, :]  # (T, T)
    source_keep = (tokens != seq2seq.PAD)[None, :].expand(T, -1)  # (T, L_s)
    return Decoding(tokens, answer, target_in, self_weights[0], cross_weights[0], target_keep, source_keep)


def _hatch_masked(ax, keep):
    """Cover every cell where `keep` (L_q, L_k) is False with the masked style (one collection)."""
    cells = [Rectangle((j - 0.5, i - 0.5), 1.0, 1.0) for i, j in zip(*np.nonzero(~keep.numpy()))]
    if cells:
        ax.add_collection(PatchCollection(cells, zorder=2, **MASKED_STYLE))


def _decoding_layout(H, T, L_s):
    """Where ``draw_decoding`` puts everything for H heads, an answer of T steps and a source of L_s
    tokens: the figure's size in inches, and the boxes (figure fractions) of each head's two maps
    and of the colour bar, the y label's and the title's places."""
    cell, narrowest = 0.36, 7.5  # inches per map cell; a map is at least this many cells wide (room for its title)
    widths = [cell * max(T, narrowest), cell * max(L_s, narrowest)]  # inches
    height = cell * T  # one map's height in inches
    left_margin, gap, bar_room = 1.0, 0.65, 1.0  # query labels; the right map's row labels; the colour bar
    top, row_gap, bottom = 0.65, 0.85, 0.85  # title lines; key labels and the next title; key labels and legend
    W = left_margin + widths[0] + gap + widths[1] + bar_room
    Hf = top + H * height + (H - 1) * row_gap + bottom

    def box(x, y, w, h):  # inches from the bottom left -> figure fractions
        return [x / W, y / Hf, w / W, h / Hf]

    maps = []
    for h in range(H):
        y = Hf - top - (h + 1) * height - h * row_gap
        maps.append((box(left_margin, y, widths[0], height), box(left_margin + widths[0] + gap, y, widths[1], height)))
    maps_height = H * height + (H - 1) * row_gap
    return {"size": (W, Hf), "maps": maps, "bar": box(W - bar_room + 0.2, bottom, 0.15, maps_height),
            "ylabel": (0.15 / W, (bottom + maps_height / 2) / Hf), "title": 1 - 0.08 / Hf}


def draw_decoding(result, figure):
    """Draw a ``Decoding`` on an empty `figure`: one row per head, the decoder's self-attention
    (target mask) on the left and its cross-attention over the source (source mask) on the right,
    0.36 inch per row, one colour bar, masked cells hatched. Returns the figure.

    The axes are placed in inches, without a layout engine: constrained layout would measure every
    tick label again and double the drawing time, which an explorer pays on every move. A figure
    this function drew can show another decoding with as many heads through ``redraw_decoding``,
    which moves and updates what is there instead of making it again.
    """
    _decoding_and_figure("draw_decoding", result, figure)
    H, T, L_s = result.cross_weights.shape
    layout = _decoding_layout(H, T, L_s)
    figure.set_layout_engine("none")
    figure.set_size_inches(*layout["size"])
    for h, (left_box, right_box) in enumerate(layout["maps"]):
        left = figure.add_axes(left_box)
        right = figure.add_axes(right_box)
        heatmap(result.self_weights[h], ax=left, vmax=1.0, annotate=False, colorbar=False,
                title=message("viz.seq2seq.self_title", h=h))
        left.set_xlabel(message("viz.seq2seq.self_keys"))
        left.set_ylabel("")  # one label for every row, below: a short answer's maps are lower than it
        heatmap(result.cross_weights[h], ax=right, vmax=1.0, annotate=False, colorbar=False,
                title=message("viz.seq2seq.cross_title", h=h))
        right.set_xlabel(message("viz.seq2seq.cross_keys"))
        right.set_ylabel("")
        for ax in (left, right):
            ax.title.set_fontsize(10)
            ax.set_aspect("auto")
    bar = figure.add_axes(layout["bar"])
    colours = matplotlib.cm.ScalarMappable(norm=matplotlib.colors.Normalize(0.0, 1.0), cmap="viridis")
    figure.colorbar(colours, cax=bar, label=message("viz.seq2seq.weight"))
    figure.supylabel(message("viz.seq2seq.queries"), x=layout["ylabel"][0], y=layout["ylabel"][1], fontsize=10,
                     ha="left", va="center")
    figure.suptitle(" ", fontsize=11, y=layout["title"], va="top")
    figure.legend(handles=[Patch(label=message("viz.seq2seq.masked"), **MASKED_STYLE)], loc="lower center",
                  bbox_to_anchor=(0.5, 0.0), fontsize=10, frameon=False)
    return redraw_decoding(result, figure)


def redraw_decoding(result, figure):
    """Draw a ``Decoding`` on a `figure` that ``draw_decoding`` drew for a decoding with as many heads:
    the figure and its maps are resized and moved to the new lengths, and their pictures, masked
    cells, tick labels and title replaced; nothing is made again (an explorer's redraw). Returns
    the figure."""
    _decoding_and_figure("redraw_decoding", result, figure)
    H, T, L_s = result.cross_weights.shape
    layout = _decoding_layout(H, T, L_s)
    figure.set_size_inches(*layout["size"])
    reads, says = seq2seq.show(result.target_in), seq2seq.show(result.answer)
    queries = [f"{r}→{s}" for r, s in zip(reads, says)]
    for h, boxes in enumerate(layout["maps"]):
        for ax, place, weights, keep, keys in (
                (figure.axes[2 * h], boxes[0], result.self_weights[h], result.target_keep, list(reads)),
                (figure.axes[2 * h + 1], boxes[1], result.cross_weights[h], result.source_keep,
                 list(seq2seq.show(result.source)))):
            ax.set_position(place)
            n_q, n_k = weights.shape
            image = ax.images[0]
            image.set_data(weights.detach().cpu().double().numpy())
            image.set_extent((-0.5, n_k - 0.5, n_q - 0.5, -0.5))
            ax.set_xlim(-0.5, n_k - 0.5)
            ax.set_ylim(n_q - 0.5, -0.5)
            for hatched in list(ax.collections):
                hatched.remove()
            _hatch_masked(ax, keep)
            ax.set_xticks(range(n_k), keys)
            ax.set_yticks(range(n_q), queries)
    figure.axes[2 * H].set_position(layout["bar"])
    figure._supylabel.set_position(layout["ylabel"])
    figure._suptitle.set_y(layout["title"])
    source = seq2seq.show(result.source[result.source != seq2seq.PAD])
    figure._suptitle.set_text(message("viz.seq2seq.suptitle", source=source, answer=says))
    return figure


def decoder_maps(model, source, figure=None, pad_to=None):
    """Draw what the decoder of `model` (a trained ``seq2seq.Reverser``) attends to while it reverses
    one source, on its own greedy answer (see ``decoding`` for `source` and `pad_to`).

    One row per head: left, the self-attention under the target mask (T × T: each step's query
    against the tokens the decoder had read so far, '⟨' then its answer); right, the cross-attention
    over the source (T × L_s: the source's letters, its '⟩' and any padding '·'). A row is labelled
    "read → said": the token the step read and the token it chose. Masked cells (weight exactly 0)
    are hatched grey. figure: an empty matplotlib Figure to draw on (default: a new pyplot figure).
    Returns the figure.
    """
    result = decoding(model, source, pad_to, function="decoder_maps")
    if figure is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        figure = plt.figure()
    elif not isinstance(figure, Figure) or figure.axes:
        check.fail("decoder_maps", "figure", check.describe(figure),
                   {"en": "None or an empty matplotlib Figure", "zh": "None，或空的 matplotlib Figure"})
    return draw_decoding(result, figure)


def offset_bars(profile, ax=None, title=None):
    """Draw ``seq2seq.offset_profile``'s dict {offset: mean cross-attention weight} as bars: the
    offset "source position − needed position" on x (0, the position the step must copy, in
    orange), the mean weight on y, each bar's value written above it. Returns ax."""
    if (not isinstance(profile, dict) or not profile
            or not all(isinstance(k, int) and not isinstance(k, bool) for k in profile)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
                       for v in profile.values())):
        check.fail("offset_bars", "profile", check.describe(profile),
                   {"en": "a non-empty dict {offset (int): mean weight (float)}, as seq2seq.offset_profile returns",
                    "zh": "非空字典 {偏移（int）: 平均权重（float）}，即 seq2seq.offset_profile 的返回值"})
    offsets = sorted(profile)
    values = [float(profile[k]) for k in offsets]
    if ax is None:
        import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

        ax = plt.subplots(figsize=(5.0, 3.0), layout="constrained")[1]
    bars = ax.bar(offsets, values, color=[NEEDED_COLOUR if k == 0 else OTHER_COLOUR for k in offsets])
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], fontsize=10, padding=2)
    ax.set_xticks(offsets, [f"{k:+d}".replace("-", "−") if k else "0" for k in offsets])  # a true minus sign
    ax.set_ylim(0, max(max(values) * 1.18, 0.05))
    ax.set_xlabel(message("viz.seq2seq.offset_axis"))
    ax.set_ylabel(message("viz.seq2seq.offset_weight"))
    if title:
        ax.set_title(title, fontsize=10)
    return ax
