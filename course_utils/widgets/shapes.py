"""Lesson 00's explorers: permute (memory order) and broadcasting a mask against scores."""

import itertools

import ipywidgets as w
import torch

from .. import validation
from ..i18n import message
from ..viz import broadcast_axes, broadcast_picture, keep_layout, memory_order, new_figure
from .explorer import explorer, reusable

# ---- lesson 00: permute and broadcast explorers


def permute_view(order=(0, 1, 2), contiguous=False, figure=None):
    """The permute explorer's view. x = torch.arange(24).view(2, 3, 4) is permuted by `order`
    (and copied with .contiguous() when `contiguous`); returns the picture of how the result
    reads memory, and a summary: shape, stride, contiguity, and whether it shares x's memory.
    figure: one this view returned before, drawn again on the same axes and layout (what the
    explorer passes; faster than a new figure)."""
    if not isinstance(order, (tuple, list)) or sorted(o for o in order if isinstance(o, int)) != [0, 1, 2] \
            or any(isinstance(o, bool) for o in order):
        validation.fail("permute_view", "order", validation.describe(order),
                        {"en": "an order of the three axes, such as (2, 0, 1)", "zh": "三个维度的一种排列，例如 (2, 0, 1)"})
    validation.flag("permute_view", "contiguous", contiguous)
    x = torch.arange(24).view(2, 3, 4)
    y = x.permute(*order)
    code = f"x.permute{tuple(order)}"
    if contiguous:
        y = y.contiguous()  # a copy, unless y is contiguous already (then y itself)
        code += ".contiguous()"
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    figure = reusable(figure, "permute")
    if figure is None:  # laid out once: every order draws the same 24 cells and labels
        figure, axes = new_figure(size=(9.0, 2.4))
        memory_order(y, ax=axes[0, 0], title=code)
        keep_layout(figure)
        figure.explorer_key = "permute"
    else:
        figure.axes[0].cla()
        memory_order(y, ax=figure.axes[0], title=code)
    text = message(
        "l00.permute.summary",
        code=code,
        shape=tuple(y.shape),
        stride=y.stride(),
        contiguous=_yes_no(y.is_contiguous()),
        shares=_yes_no(shares),
        kind=message("l00.view" if shares else "l00.copy"),
    )
    return figure, text


def _yes_no(flag):
    """A boolean as the summary shows it: True / False in English (what Python prints), 是 / 否 in Chinese."""
    return message("l00.true" if flag else "l00.false")


def permute_explorer():
    """Pick an order of the axes of x = torch.arange(24).view(2, 3, 4), optionally copy the
    result with .contiguous(), and see its shape, stride, contiguity and how it reads memory."""
    orders = list(itertools.permutations(range(3)))
    style = {"description_width": "initial"}
    return explorer(
        permute_view,
        order=w.Dropdown(
            options=[(f"x.permute{order}", order) for order in orders],
            value=(0, 1, 2),
            description=message("l00.permute.order"),
            style=style,
        ),
        contiguous=w.Checkbox(value=False, description=message("l00.permute.contiguous"), style=style),
    )


#: The axes of the attention scores the broadcast explorer pairs a mask with.
SCORES_AXES = ("B", "H", "L_q", "L_k")
#: Mask shapes to try (B = 2, L_k = 5): the right one first, then the usual slips.
MASK_SHAPES = ((2, 1, 1, 5), (2, 5), (2, 1, 5), (5,), (2, 1, 5, 1))
#: Scores shapes (B, H, L_q, L_k): L_q = 3; L_q = L_k (self-attention); L_q = B, where a
#: (B, L_k) mask broadcasts without error but lines its batch axis up with the queries; L_q = 1
#: (one decoding step), where a (B, L_k) mask grows the result to (B, H, B, L_k).
SCORES_SHAPES = ((2, 4, 3, 5), (2, 4, 5, 5), (2, 4, 2, 5), (2, 4, 1, 5))


def broadcast_view(mask=(2, 1, 1, 5), scores=(2, 4, 3, 5), figure=None):
    """The broadcast explorer's view: the picture of `mask` and `scores` (B, H, L_q, L_k)
    aligned from the right, and a summary: the result shape or the clash that makes broadcasting
    fail, whether the result grew bigger than the scores, and which scores axes the mask's axes
    line up with. figure: one this view returned before, drawn again (what the explorer passes)."""
    validation.shape_tuple("broadcast_view", "mask", mask)
    validation.shape_tuple("broadcast_view", "scores", scores)
    mask, scores = tuple(mask), tuple(scores)
    axes = broadcast_axes(mask, scores)
    figure = reusable(figure, "broadcast")
    if figure is None:  # the layout engine stays on: the number of columns follows the shapes
        figure, _ = new_figure(size=(6.5, 2.3))
        figure.explorer_key = "broadcast"
    ax = figure.axes[0]
    ax.cla()
    names = (message("l00.broadcast.mask"), message("l00.broadcast.scores"))
    broadcast_picture(mask, scores, ax=ax, names=names, axis_names=SCORES_AXES)
    clashes = [(i - len(axes), a, b) for i, (a, b, _, status) in enumerate(axes) if status == "clash"]
    if clashes:
        axis, size_mask, size_scores = clashes[0]
        first = message("l00.broadcast.clash", mask=mask, scores=scores, axis=axis, size_mask=size_mask,
                        size_scores=size_scores)
    else:
        result = tuple(size for _, _, size, _ in axes)
        first = message("l00.broadcast.ok", mask=mask, scores=scores, result=result)
        named = (None,) * (len(axes) - len(SCORES_AXES)) + SCORES_AXES  # a mask with more axes adds unnamed ones
        grown = [named[i] or str(i - len(axes)) for i, (*_, status) in enumerate(axes) if status == "stretch_b"]
        if grown:  # the scores' own size-1 axes were repeated: the result is bigger than the scores
            names = message("l00.broadcast.separator").join(grown)
            first += "\n" + message("l00.broadcast.grows", result=result, scores=scores, names=names)
    lined_up = SCORES_AXES[len(SCORES_AXES) - len(mask):]
    names = message("l00.broadcast.separator").join(lined_up)
    return figure, first + "\n" + message("l00.broadcast.aligned", names=names)


def broadcast_explorer():
    """Pick a mask shape and a scores shape (B, H, L_q, L_k) and see whether and how they broadcast."""
    style = {"description_width": "initial"}
    return explorer(
        broadcast_view,
        mask=w.Dropdown(options=[(str(s), s) for s in MASK_SHAPES], value=MASK_SHAPES[0],
                        description=message("l00.broadcast.mask"), style=style),
        scores=w.Dropdown(options=[(str(s), s) for s in SCORES_SHAPES], value=SCORES_SHAPES[0],
                          description=message("l00.broadcast.scores"), style=style),
    )
