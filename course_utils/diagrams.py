"""The diagrams the lessons' markdown shows, drawn by code in both languages into images/.

``write_all(folder)`` draws every diagram in English and Chinese and returns the files written;
the build calls it before it executes the lessons, so the pictures never drift from the code.
``DIAGRAMS`` names them (with the alt text a lesson's markdown gives each), so tests and lessons
can enumerate them; ``markdown_link(name, lang)`` is the line a lesson's markdown cell uses.

The files are SVG with every letter drawn as a path (matplotlib's ``svg.fonttype = "path"``), so
Chinese shows in any browser without fonts, and they are byte-reproducible: a fixed hash salt, no
date, no creator, no random ids. The course style and its CJK font come from
``viz.use_course_style`` inside ``matplotlib.rc_context``, so drawing changes no global setting.
A missing glyph is an error, not a warning: a diagram with a hole in a label never gets written.

Each diagram is laid out in inches (the axes fill the figure, one data unit is one inch). A text
line is a list of parts drawn side by side: plain text (any language), ``$math$`` (mathtext:
shapes and formulas; kept apart from Chinese, which mathtext cannot draw) or a part in backquotes
(code, in monospace).
"""

import warnings
from importlib.metadata import version
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as CurvePath
from matplotlib.textpath import text_to_path

from . import viz

LANGUAGES = ("en", "zh")

# What the SVG writer gets, so two runs write the same bytes: no date, no creator (it would name
# the matplotlib version and a URL), no format/type entries (the type is a URL too).
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
SVG_SETTINGS = {"svg.fonttype": "path", "svg.hashsalt": "attention-course-diagrams", "svg.id": None}
#: The DOCTYPE line matplotlib writes names the SVG 1.1 DTD by URL; browsers ignore it and SVG 2
#: drops it, so the files leave it out and carry only local references.
_DOCTYPE = ('<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n'
            '  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n')

# colours: tensors blue, operations orange, the returned pair green, masks red; Q, K, V arrows
# keep one colour each in every diagram
INK, GREY = "#333333", "#6b6b6b"
TENSOR = {"facecolor": "#e8f1fb", "edgecolor": "#4a7ab5"}
OPERATION = {"facecolor": "#fdf0dc", "edgecolor": "#c98a2b"}
OPTIONAL = {"facecolor": "#ffffff", "edgecolor": "#8a8a8a"}
RESULT = {"facecolor": "#e6f4e1", "edgecolor": "#4f8a3f"}
ATTENTION = {"facecolor": "#fdf0dc", "edgecolor": "#c98a2b"}
PANEL = {"facecolor": "#f4f4f4", "edgecolor": "none"}
MASK = "#a33b2f"
QKV = {"Q": "#2f6db5", "K": "#c96a12", "V": "#3d8b37"}
SIZE, SMALL = 10, 9  # font sizes (points)


def _t(en, zh):
    return {"en": en, "zh": zh}


# ----------------------------------------------------------------------------- drawing helpers

class _Sheet:
    """A figure `width` x `height` inches whose data coordinates are inches, plus helpers that
    draw boxes, text lines and arrows on it in one language."""

    def __init__(self, width, height, lang):
        self.lang = lang
        self.figure = Figure(figsize=(width, height), dpi=72)
        self.ax = self.figure.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()

    def say(self, text):
        """`text` in this sheet's language: a {"en", "zh"} dict, or a string both share."""
        return text[self.lang] if isinstance(text, dict) else text

    def line(self, x, y, parts, size=SIZE, color=INK, ha="center"):
        """Draw a line of `parts` side by side, vertically centred on y; ha: where x is."""
        texts, widths = [], []
        for part in parts if isinstance(parts, list) else [parts]:
            part = self.say(part)
            style = {}
            if part.startswith("`"):
                part, style = part.strip("`"), {"family": "DejaVu Sans Mono"}
            elif part.startswith("$"):
                part = part.replace(", ", r",\,")  # mathtext sets no space after a comma
            text = self.ax.text(0, y - 0.36 * size / 72, part, fontsize=size, color=color,
                                ha="left", va="baseline", **style)
            texts.append(text)
            # measured as the SVG writer draws it: glyph outlines, unhinted (points, 72 an inch)
            ismath = part.startswith("$") and part.endswith("$")
            widths.append(text_to_path.get_text_width_height_descent(part, text.get_fontproperties(), ismath)[0] / 72)
        gap = 0.35 * size / 72  # about one space
        total = sum(widths) + gap * (len(texts) - 1)
        left = {"center": x - total / 2, "left": x, "right": x - total}[ha]
        for text, width in zip(texts, widths):
            text.set_x(left)
            left += width + gap
        return total

    def lines(self, x, y, rows, ha="center"):
        """Draw several lines centred as a block on y. rows: [(parts, size, colour)]."""
        heights = [1.45 * size / 72 for _, size, _ in rows]
        top = y + sum(heights) / 2
        for (parts, size, color), height in zip(rows, heights):
            self.line(x, top - height / 2, parts, size, color, ha)
            top -= height

    def box(self, x, y, width, height, rows, style, rounded=False, dashed=False):
        """A box centred on (x, y) holding `rows` (see lines)."""
        shape = "round,pad=0,rounding_size=0.1" if rounded else "square,pad=0"
        self.ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle=shape,
                                         linewidth=1.3, linestyle=(0, (4, 3)) if dashed else "-", **style))
        self.lines(x, y, rows)

    def arrow(self, *points, color=INK, dashed=False, width=1.3):
        """An arrow along the polyline through `points`, its head at the last one."""
        path = CurvePath(points, [CurvePath.MOVETO] + [CurvePath.LINETO] * (len(points) - 1))
        self.ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=13, color=color,
                                          linewidth=width, linestyle=(0, (4, 3)) if dashed else "-",
                                          shrinkA=0, shrinkB=0, joinstyle="miter"))

    def dot(self, x, y, color=INK):
        self.ax.plot([x], [y], marker="o", markersize=4.5, color=color)


# ----------------------------------------------------------------------------- 01: SDPA, step by step

SDPA = {
    "Q": _t("queries Q", "查询 Q"),
    "K": _t("keys K", "键 K"),
    "V": _t("values V", "值 V"),
    "matmul": _t("MatMul", "矩阵乘法"),
    "every_pair": _t("every query against every key", "每个查询与每个键做点积"),
    "scale": _t("Scale", "缩放"),
    "no_saturation": _t("keeps softmax from saturating", "防止 softmax 饱和"),
    "mask": _t("Mask (optional)", "掩码（可选）"),
    "mask_fill": _t("where keep is False: score → −∞", "keep 为 False 处：分数 → −∞"),
    "softmax": _t("Softmax over the keys", "对键做 softmax"),
    "last_axis": _t("last axis, dim = −1: each row sums to 1", "最后一维 dim = −1：每行之和为 1"),
    "weights": _t("weights", "注意力权重"),
    "average": _t("a weighted average of the values", "对值加权平均"),
    "return": _t("return", "返回"),
    "keep": _t("keep mask", "保留掩码"),
    "may_attend": _t("True = may attend", "True：可以关注"),
    "broadcasts": _t("broadcasts to", "可广播为"),
    "scores": _t("scores", "分数"),
    "scaled": _t("scaled scores", "缩放后的分数"),
    "masked": _t("masked scores", "遮蔽后的分数"),
    "attention_weights": _t("attention weights", "注意力权重"),
    "output": _t("output", "输出"),
    "legend_tensor": _t("tensor", "张量"),
    "legend_operation": _t("operation", "运算"),
    "legend_optional": _t("optional", "可选"),
}


def sdpa(lang):
    """Scaled dot-product attention as a flow: Q, K, V → MatMul → Scale → Mask (optional) →
    Softmax → MatMul with V → (output, weights), the shape of every tensor beside it."""
    s = SDPA
    sheet = _Sheet(8.0, 6.9, lang)
    cx, op_w, op_h = 3.55, 2.7, 0.56
    half = op_h / 2
    top, matmul, scale, mask, softmax, combine, result = 6.4, 5.35, 4.45, 3.55, 2.65, 1.45, 0.45
    side = 0.12  # gap between an arrow and the labels beside it

    def beside(y, name, shape):
        if name:
            sheet.line(cx - side, y, [name], SMALL, GREY, ha="right")
        sheet.line(cx + side, y, [shape], SIZE, INK, ha="left")

    # the inputs
    inputs = {"Q": (2.45, "$(B, L_q, d_k)$"), "K": (4.65, "$(B, L_k, d_k)$"), "V": (6.85, "$(B, L_k, d_v)$")}
    for letter, (x, shape) in inputs.items():
        sheet.box(x, top, 1.8, 0.62, [([s[letter]], SIZE, QKV[letter]), ([shape], SIZE, INK)], TENSOR, rounded=True)
    for letter in "QK":  # straight down: both inputs sit above the MatMul box
        x = inputs[letter][0]
        sheet.arrow((x, top - 0.31), (x, matmul + half), color=QKV[letter])

    # the chain of operations, each arrow labelled with the tensor it carries
    sheet.box(cx, matmul, op_w, op_h, [([s["matmul"], r"$QK^{\top}$"], SIZE, INK),
                                       ([s["every_pair"]], SMALL, GREY)], OPERATION)
    sheet.arrow((cx, matmul - half), (cx, scale + half))
    beside((matmul + scale) / 2, s["scores"], "$(B, L_q, L_k)$")
    sheet.box(cx, scale, op_w, op_h, [([s["scale"], r"$\div\ \sqrt{d_k}$"], SIZE, INK),
                                      ([s["no_saturation"]], SMALL, GREY)], OPERATION)
    sheet.arrow((cx, scale - half), (cx, mask + half))
    beside((scale + mask) / 2, s["scaled"], "$(B, L_q, L_k)$")
    sheet.box(cx, mask, op_w, op_h, [([s["mask"]], SIZE, MASK), ([s["mask_fill"]], SMALL, GREY)],
              OPTIONAL, dashed=True)
    sheet.box(1.0, mask, 1.75, 0.95, [([s["keep"]], SIZE, MASK), ([s["may_attend"]], SMALL, INK),
                                      ([s["broadcasts"]], SMALL, GREY), (["$(B, L_q, L_k)$"], SMALL, INK)],
              OPTIONAL, rounded=True, dashed=True)
    sheet.arrow((1.875, mask), (cx - op_w / 2, mask), color=MASK, dashed=True)
    sheet.arrow((cx, mask - half), (cx, softmax + half))
    beside((mask + softmax) / 2, s["masked"], "$(B, L_q, L_k)$")
    sheet.box(cx, softmax, op_w, op_h, [([s["softmax"]], SIZE, INK), ([s["last_axis"]], SMALL, GREY)], OPERATION)

    # the weights go on to the values and are returned too
    sheet.arrow((cx, softmax - half), (cx, combine + half))
    label_y, branch_y = softmax - half - 0.2, combine + half + 0.22
    beside(label_y, s["attention_weights"], "$(B, L_q, L_k)$")
    sheet.dot(cx, branch_y)
    left = 0.55
    sheet.arrow((cx, branch_y), (left, branch_y), (left, result), (cx - op_w / 2, result))
    sheet.box(cx, combine, op_w, op_h, [([s["matmul"], s["weights"], r"$\cdot$", "$V$"], SIZE, INK),
                                        ([s["average"]], SMALL, GREY)], OPERATION)
    v = inputs["V"][0]
    sheet.arrow((v, top - 0.31), (v, combine), (cx + op_w / 2, combine), color=QKV["V"])
    sheet.arrow((cx, combine - half), (cx, result + 0.25))
    beside((combine - half + result + 0.25) / 2, s["output"], "$(B, L_q, d_v)$")
    sheet.box(cx, result, op_w, 0.5, [([s["return"], "`(output, weights)`"], SIZE, INK)], RESULT, rounded=True)

    # legend
    for row, (text, style, rounded, dashed) in enumerate(
        [(s["legend_tensor"], TENSOR, True, False), (s["legend_operation"], OPERATION, False, False),
         (s["legend_optional"], OPTIONAL, False, True)]
    ):
        y = 0.85 - row * 0.3
        shape = "round,pad=0,rounding_size=0.06" if rounded else "square,pad=0"
        sheet.ax.add_patch(FancyBboxPatch((5.75, y - 0.09), 0.36, 0.18, boxstyle=shape, linewidth=1.1,
                                          linestyle=(0, (3, 2)) if dashed else "-", **style))
        sheet.line(6.22, y, [text], SMALL, GREY, ha="left")
    return sheet.figure


# ----------------------------------------------------------------------------- 03: where Q, K, V come from

SOURCES = {
    "encoder": _t("Encoder", "编码器"),
    "decoder": _t("Decoder", "解码器"),
    "source": _t("source sequence: the encoder's states", "源序列：编码器的状态"),
    "target": _t("target sequence: the decoder's states", "目标序列：解码器的状态"),
    "self": _t("self-attention", "自注意力"),
    "cross": _t("cross-attention", "交叉注意力"),
    "weights": _t("weights", "注意力权重"),
    "source_padding": _t("mask: source padding, on the keys", "掩码：源序列的填充，作用于键"),
    "causal_padding": _t("mask: causal and target padding", "掩码：因果掩码与目标序列的填充"),
    "memory": _t("memory (the encoder's output)", "memory（编码器输出）"),
    "from_decoder": _t("from the decoder", "来自解码器"),
    "from_encoder": _t("from the encoder", "来自编码器"),
    "output": _t("decoder output", "解码器的输出"),
    "note": _t("Keep masks: True = may attend. One layer of each; residuals, normalization and "
               "feed-forward omitted.",
               "保留掩码：True 表示可以关注。编码器和解码器各画一层，省略了残差连接、归一化和前馈网络。"),
}


def qkv_sources(lang):
    """Where Q, K and V come from: encoder self-attention, decoder self-attention and
    cross-attention, with the sequence lengths and the mask each one applies."""
    s = SOURCES
    sheet = _Sheet(8.0, 6.6, lang)
    enc, dec, width = 1.8, 6.2, 3.0
    header, inputs, attention, cross, output = 6.2, 5.5, 4.0, 2.45, 1.15
    in_h, att_h = 0.6, 1.05

    for x, name, bottom in ((enc, s["encoder"], cross - 0.55), (dec, s["decoder"], output - 0.5)):
        sheet.ax.add_patch(FancyBboxPatch((x - width / 2 - 0.2, bottom), width + 0.4, header + 0.25 - bottom,
                                          boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
        sheet.line(x, header, [name], 11, INK)

    def attention_box(x, y, title, weights, mask, mask_shape):
        sheet.box(x, y, width, att_h, [([title], SIZE, INK), ([s["weights"], weights], SMALL, INK),
                                       ([mask], SMALL, MASK), (mask_shape, SMALL, MASK)], ATTENTION)

    def projections(x, name):
        for offset, letter in zip((-1.05, 0.0, 1.05), "QKV"):
            a = x + offset - 0.2
            sheet.arrow((a, inputs - in_h / 2), (a, attention + att_h / 2), color=QKV[letter])
            sheet.line(a + 0.07, (inputs - in_h / 2 + attention + att_h / 2) / 2,
                       [f"${letter} = {name}W_{letter}$"], SIZE, QKV[letter], ha="left")

    # encoder: self-attention over the source; its output is the memory
    sheet.box(enc, inputs, width, in_h, [([s["source"]], SIZE, INK), (["$X$", "$(B, L_{src}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)
    projections(enc, "X")
    attention_box(enc, attention, s["self"], "$(B, L_{src}, L_{src})$", s["source_padding"], ["$(B, 1, L_{src})$"])
    memory_h = 0.6
    sheet.arrow((enc, attention - att_h / 2), (enc, cross + memory_h / 2))
    sheet.line(enc + 0.1, (attention - att_h / 2 + cross + memory_h / 2) / 2, ["$(B, L_{src}, d)$"], SIZE, INK,
               ha="left")
    sheet.box(enc, cross, width, memory_h, [([s["memory"]], SIZE, INK), (["$M$", "$(B, L_{src}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)

    # decoder: causal self-attention over the target, then cross-attention into the memory
    sheet.box(dec, inputs, width, in_h, [([s["target"]], SIZE, INK), (["$Y$", "$(B, L_{tgt}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)
    projections(dec, "Y")
    attention_box(dec, attention, s["self"], "$(B, L_{tgt}, L_{tgt})$", s["causal_padding"],
                  ["$(L_{tgt}, L_{tgt})$", "`&`", "$(B, 1, L_{tgt})$"])
    q = dec
    sheet.arrow((q, attention - att_h / 2), (q, cross + att_h / 2), color=QKV["Q"])
    middle = (attention - att_h / 2 + cross + att_h / 2) / 2
    sheet.line(q + 0.08, middle, ["$Q$", s["from_decoder"]], SIZE, QKV["Q"], ha="left")
    sheet.line(q - 0.08, middle, ["$(B, L_{tgt}, d)$"], SIZE, INK, ha="right")
    attention_box(dec, cross, s["cross"], "$(B, L_{tgt}, L_{src})$", s["source_padding"], ["$(B, 1, L_{src})$"])
    gap_left, gap_right = enc + width / 2, dec - width / 2
    for letter, dy in (("K", 0.14), ("V", -0.14)):
        sheet.arrow((gap_left, cross + dy), (gap_right, cross + dy), color=QKV[letter])
        sheet.line((gap_left + gap_right) / 2, cross + dy + (0.13 if dy > 0 else -0.13),
                   [f"${letter} = MW_{letter}$"], SIZE, QKV[letter])
    sheet.line((gap_left + gap_right) / 2, cross + 0.52, [s["from_encoder"]], SMALL, GREY)
    sheet.arrow((dec, cross - att_h / 2), (dec, output + 0.25))
    sheet.box(dec, output, width, 0.5, [([s["output"], "$(B, L_{tgt}, d)$"], SIZE, INK)], RESULT, rounded=True)

    sheet.line(0.15, 0.3, [s["note"]], SMALL, GREY, ha="left")
    return sheet.figure


# ----------------------------------------------------------------------------- the registry and writing

#: Every diagram: name -> (draw(lang) -> Figure, {"en", "zh"} alt text). Files: images/NAME_LANG.svg.
DIAGRAMS = {
    "01_sdpa": (sdpa, _t("Scaled dot-product attention, step by step", "缩放点积注意力的计算步骤")),
    "03_qkv_sources": (qkv_sources, _t("Where Q, K and V come from: encoder self-attention, decoder "
                                       "self-attention and cross-attention",
                                       "Q、K、V 从哪里来：编码器自注意力、解码器自注意力与交叉注意力")),
}


def file_name(name, lang):
    return f"{name}_{lang}.svg"


def markdown_link(name, lang):
    """The markdown line that shows diagram `name` in a lesson's `lang` cell."""
    return f"![{DIAGRAMS[name][1][lang]}](../../images/{file_name(name, lang)})"


def svg(name, lang):
    """Diagram `name` in `lang`, as the bytes of its SVG file."""
    import io

    draw = DIAGRAMS[name][0]
    with matplotlib.rc_context(), warnings.catch_warnings():
        # a label with a glyph no font has would be drawn with a hole: refuse it
        warnings.filterwarnings("error", message=r"Glyph .* missing from", category=UserWarning)
        matplotlib.rcdefaults()  # not the caller's settings or matplotlibrc: the same picture everywhere
        viz.use_course_style()
        matplotlib.rcParams.update(SVG_SETTINGS)
        figure = draw(lang)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata=SVG_METADATA)
    text = buffer.getvalue().replace(_DOCTYPE, "")
    stamp = (f"<!-- Drawn by course_utils/diagrams.py with matplotlib {version('matplotlib')} and mplfonts "
             f"{version('mplfonts')}: edit the code, then run `make notebooks`. -->\n")
    first, rest = text.split("\n", 1)  # after the <?xml ...?> declaration
    return (first + "\n" + stamp + rest).encode("utf-8")


def write_all(folder):
    """Draw every diagram in every language into `folder`; return the paths, in DIAGRAMS order.
    A file whose bytes are already right is left alone (its modification time too)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in DIAGRAMS:
        for lang in LANGUAGES:
            path = folder / file_name(name, lang)
            data = svg(name, lang)
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)
            paths.append(path)
    return paths
