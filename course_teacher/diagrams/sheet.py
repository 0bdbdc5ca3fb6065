"""The drawing primitives every diagram shares: the course's colours and font sizes, and
``Sheet``, a figure laid out in inches with helpers that draw boxes, text lines, arrows and a
legend in one language.

A text line is a list of parts drawn side by side: plain text (any language), ``$math$``
(mathtext: shapes and formulas; kept apart from Chinese, which mathtext cannot draw) or a part in
backquotes (code, in monospace). A part is a string both languages share or a ``label(en, zh)``.
"""

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as CurvePath
from matplotlib.textpath import text_to_path

# colours: tensors blue, operations orange, the result green, masks red; Q, K, V arrows
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


def label(en, zh):
    """A text in both languages."""
    return {"en": en, "zh": zh}


class Sheet:
    """A figure `width` x `height` inches whose data coordinates are inches (the axes fill the
    figure, one data unit is one inch), plus helpers that draw on it in one language."""

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
        """Draw a line of `parts` side by side, vertically centred on y; ha: where x is.
        Returns the line's width (inches)."""
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

    def legend(self, x, y, entries):
        """A small swatch and its name for each of `entries` [(text, style, rounded, dashed)], one
        row under the other, the first swatch's left edge at x and its centre at y."""
        for row, (text, style, rounded, dashed) in enumerate(entries):
            row_y = y - row * 0.3
            shape = "round,pad=0,rounding_size=0.06" if rounded else "square,pad=0"
            self.ax.add_patch(FancyBboxPatch((x, row_y - 0.09), 0.36, 0.18, boxstyle=shape, linewidth=1.1,
                                             linestyle=(0, (3, 2)) if dashed else "-", **style))
            self.line(x + 0.47, row_y, [text], SMALL, GREY, ha="left")
