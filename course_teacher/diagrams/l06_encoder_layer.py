"""Diagram 06_encoder_layer (lesson 06): one encoder layer drawn twice, post-norm (the original
paper, ``norm_first=False``) beside pre-norm (``norm_first=True``), the input at the bottom. Post-norm
puts each LayerNorm on the main path, after the residual add; pre-norm puts it at the start of
each sub-layer's branch, so the residual path is an unbroken identity path from input to output.
Dropout acts on each sub-layer's output before the add; the key padding mask enters the
self-attention."""

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as CurvePath

from .sheet import GREY, INK, MASK, OPERATION, OPTIONAL, PANEL, RESULT, SIZE, SMALL, TENSOR, Sheet, label

#: LayerNorm's boxes (the part that moves between the two drawings), the identity path of pre-norm
NORM = {"facecolor": "#f1ecf8", "edgecolor": "#6f52a3"}
IDENTITY = "#2e8b3a"

ENCODER_LAYER = {
    "post": label("Post-norm (the original paper)", "后归一化（Post-LN，原论文）"),
    "pre": label("Pre-norm", "前归一化（Pre-LN）"),
    "input": label("input", "输入"),
    "output": label("output", "输出"),
    "attention": label("Multi-head self-attention", "多头自注意力"),
    "same_input": label("from the same input", "来自同一输入"),
    "ffn": label("Feed-forward network", "前馈网络"),
    "each_position": label("each position alone:", "逐位置"),
    "norm": label("LayerNorm", "层归一化"),
    "on_main_path": label("on the main path", "在主路径上"),
    "identity": label("identity path", "恒等路径"),
    "padding": label("True = padding", "True 表示填充"),
    "post_note_1": label("Every path from input to output passes", "从输入到输出的每条路径"),
    "post_note_2": label("through both LayerNorms.", "都要经过两个层归一化。"),
    "green": label("Green:", "沿绿色路径"),
    "pre_note_1": label("reaches the output unchanged,", "原样到达输出，"),
    "pre_note_2": label("plus what each sub-layer adds.", "再加上各子层的输出。"),
    "note": label("Dashed: dropout, active in training only. The key padding mask is bool (B, L), True = padding; "
                  "F = d_ff.",
                  "虚线框：Dropout，只在训练时起作用。键填充掩码为布尔张量 (B, L)，True 表示填充；F = d_ff。"),
}

POST = ("input", "attention", "dropout", "add", "norm", "ffn", "dropout", "add", "norm", "output")
PRE = ("input", "norm", "attention", "dropout", "add", "norm", "ffn", "dropout", "add", "output")
HEIGHT = {"input": 0.38, "output": 0.38, "attention": 0.5, "ffn": 0.5, "dropout": 0.28, "add": 0.3, "norm": 0.32}
GAP, BRANCH_GAP = 0.24, 0.42  # between two parts; where the residual branches off, below a sub-layer's branch
BOX_W, SIDE, R = 1.9, 1.2, 0.15  # box width, the residual line's distance from the centre, the add's radius
MASK_GAP, MASK_W = 0.3, 1.42  # the key padding mask's box: its distance from the attention box, its width
PANEL_W = SIDE + 0.3 + BOX_W / 2 + MASK_GAP + MASK_W + 0.12


def _frame(sheet, x, y, width, height, style, linewidth):
    """A box edge of its own line width (Sheet.box draws 1.3)."""
    sheet.ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="square,pad=0",
                                      linewidth=linewidth, **style))


def _path(sheet, *points, color=INK, width=1.3):
    """A line with no head along the polyline through `points` (an arrow patch, so the collision
    test sees it)."""
    path = CurvePath(points, [CurvePath.MOVETO] + [CurvePath.LINETO] * (len(points) - 1))
    sheet.ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-", color=color, linewidth=width, shrinkA=0,
                                       shrinkB=0, joinstyle="miter", capstyle="butt"))


def _layout(parts, pre, bottom):
    """The centre of each part stacked from `bottom` up: a longer gap where the residual branches
    off (above the input, and above the part that ends the first sub-layer) and below the output."""
    branch_after = "add" if pre else "norm"
    centres, y = [], bottom
    for index, part in enumerate(parts):
        if index:
            y += BRANCH_GAP if parts[index - 1] in ("input", branch_after) or part == "output" else GAP
        centres.append(y + HEIGHT[part] / 2)
        y += HEIGHT[part]
    return centres


def _panel(sheet, cx, bottom, parts, pre):
    """One encoder layer, its parts stacked from `bottom` up around the centre line x = cx."""
    s = ENCODER_LAYER
    centres = _layout(parts, pre, bottom)
    top = {index: centres[index] + HEIGHT[part] / 2 for index, part in enumerate(parts)}
    low = {index: centres[index] - HEIGHT[part] / 2 for index, part in enumerate(parts)}

    for index, (part, y) in enumerate(zip(parts, centres)):
        h = HEIGHT[part]
        if part == "input":
            sheet.box(cx, y, BOX_W, h, [([s["input"], "$x$", "$(B, L, E)$"], SIZE, INK)], TENSOR, rounded=True)
        elif part == "output":
            sheet.box(cx, y, BOX_W, h, [([s["output"], "$(B, L, E)$"], SIZE, INK)], RESULT, rounded=True)
        elif part == "attention":
            sheet.box(cx, y, BOX_W, h, [([s["attention"]], SIZE, INK),
                                        (["$Q, K, V$", s["same_input"]], SMALL, GREY)], OPERATION)
            # the key padding mask enters from the right
            mask_x = cx + BOX_W / 2 + MASK_GAP + MASK_W / 2
            sheet.box(mask_x, y, MASK_W, 0.74, [(["`key_padding_mask`"], SMALL, MASK), (["$(B, L)$"], SMALL, INK),
                                                ([s["padding"]], SMALL, INK)],
                      OPTIONAL, rounded=True, dashed=True)
            sheet.arrow((mask_x - MASK_W / 2, y), (cx + BOX_W / 2, y), color=MASK, dashed=True)
        elif part == "ffn":
            sheet.box(cx, y, BOX_W, h, [([s["ffn"]], SIZE, INK),
                                        ([s["each_position"], r"$E \to F \to E$"], SMALL, GREY)], OPERATION)
        elif part == "dropout":
            sheet.box(cx, y, 1.1, h, [(["Dropout"], SMALL, INK)], OPTIONAL, dashed=True)
        elif part == "add":
            sheet.ax.add_patch(FancyBboxPatch((cx - R, y - R), 2 * R, 2 * R, boxstyle="circle,pad=0", linewidth=1.3,
                                              **OPERATION))
            sheet.line(cx, y, ["$+$"], SIZE, INK)
        elif part == "norm":
            if pre:
                sheet.box(cx, y, BOX_W, h, [([s["norm"]], SIZE, INK)], NORM)
            else:  # on the main path: drawn heavier, and said so
                _frame(sheet, cx, y, BOX_W, h, NORM, 2.6)
                sheet.lines(cx, y, [([s["norm"]], SIZE, INK)])
                sheet.line(cx + BOX_W / 2 + 0.14, y, [s["on_main_path"]], SMALL, NORM["edgecolor"], ha="left")

    # the main line: each part to the next (an add is entered from below, its radius away)
    for index in range(len(parts) - 1):
        start, end = top[index], low[index + 1]
        if pre and parts[index + 1] == "output":  # the identity path's last stretch
            sheet.arrow((cx, start), (cx, end), color=IDENTITY, width=2.6)
        elif pre and parts[index] in ("input", "add"):  # the residual stream: to the branch point, then on up the side
            _path(sheet, (cx, start), (cx, start + BRANCH_GAP / 2), color=IDENTITY, width=2.6)
            sheet.arrow((cx, start + BRANCH_GAP / 2), (cx, end))
        else:
            sheet.arrow((cx, start), (cx, end))

    # the residual connections: from the branch point below each sub-layer's branch, up the left,
    # into the add
    branches = [index for index, part in enumerate(parts[:-1])
                if part in ("input", "add" if pre else "norm") and parts[index + 1] != "output"]
    adds = [index for index, part in enumerate(parts) if part == "add"]
    for branch, add in zip(branches, adds):
        y0, y1 = top[branch] + BRANCH_GAP / 2, centres[add]
        sheet.dot(cx, y0, color=IDENTITY if pre else INK)
        sheet.arrow((cx, y0), (cx - SIDE, y0), (cx - SIDE, y1), (cx - R, y1),
                    color=IDENTITY if pre else INK, width=2.6 if pre else 1.3)
    if pre:  # the last add's output is the layer's output: the identity path ends there
        last = adds[-1]
        sheet.line(cx - 0.12, (top[last] + low[last + 1]) / 2, [s["identity"]], SMALL, IDENTITY, ha="right")


def encoder_layer(lang):
    """Post-norm and pre-norm encoder layers side by side: input x → self-attention (with the key
    padding mask) → dropout → add → LayerNorm → feed-forward → dropout → add → LayerNorm (post), or
    each LayerNorm at the start of its sub-layer's branch (pre), with the identity path marked."""
    s = ENCODER_LAYER
    bottom, stack_bottom, margin, between = 0.55, 1.3, 0.12, 0.16
    stack_top = _layout(POST, False, stack_bottom)[-1] + HEIGHT["output"] / 2
    panel_top, panel_w = stack_top + 0.95, PANEL_W
    sheet = Sheet(2 * margin + 2 * panel_w + between, panel_top + 0.1, lang)
    left_cx = margin + SIDE + 0.3
    for cx, parts, pre, title, formula, code in (
            (left_cx, POST, False, s["post"], r"$x = \mathrm{LN}(x + f(x))$", "`norm_first=False`"),
            (left_cx + panel_w + between, PRE, True, s["pre"], r"$x = x + f(\mathrm{LN}(x))$", "`norm_first=True`")):
        left = cx - SIDE - 0.3
        sheet.ax.add_patch(FancyBboxPatch((left, bottom), panel_w, panel_top - bottom,
                                          boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
        middle = left + panel_w / 2
        sheet.line(middle, panel_top - 0.25, [title], 11, INK)
        sheet.line(middle, panel_top - 0.52, [formula], SIZE, INK)
        sheet.line(middle, panel_top - 0.77, [code], SMALL, GREY)
        _panel(sheet, cx, stack_bottom, parts, pre)
        if pre:
            rows = [([s["green"], "$x$", s["pre_note_1"]], SMALL, IDENTITY), ([s["pre_note_2"]], SMALL, IDENTITY)]
        else:
            rows = [([s["post_note_1"]], SMALL, NORM["edgecolor"]), ([s["post_note_2"]], SMALL, NORM["edgecolor"])]
        sheet.lines(middle, bottom + 0.35, rows)
    sheet.line(0.15, 0.27, [s["note"]], SMALL, GREY, ha="left")
    return sheet.figure
