"""What a slide measures: its sizes in CSS pixels, and estimates of how tall (and wide) each piece
of a lesson is on it. template.py's style sheet sets the same sizes; the browser test measures.

The fonts come in two sets (`SIZES`): the normal one, and the hall's, for a room where the back
row sits far from the screen: code and its output at 24 px or more, the other text scaled to
match. The slide stays 1280×720 in both; the hall's slides hold less, so there are more of them."""

import math
import os
import re
import struct
import unicodedata
from dataclasses import dataclass

# ----------------------------------------------------------------------------- the slide's sizes
# Every number here is a CSS pixel of the 1280×720 slide; template.py's style sheet uses the same.

SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720
PADDING = 24  # the slide's left and right padding
CONTENT_WIDTH = SLIDE_WIDTH - 2 * PADDING
#: The height a slide's content is packed to: below 720, for what the estimate misses.
BUDGET = 650
LINE = 1.3  # line height of text, lists and code
MONO_EM = 0.602  # the advance of a monospace character (DejaVu Sans Mono), in em
BLOCK_PAD = 22  # a code or output block's padding and margin, top and bottom together
PICTURE_SCALE = (1.25, 1.8)  # a plot's scale: at least this to share a slide, at most this alone


@dataclass(frozen=True)
class Sizes:
    """A deck's fonts, in px. `code` and `output` are tried largest first: a code cell takes the
    largest that fits where it is (the smallest only on a slide of its own), an output the largest
    its widest line and its length allow, and below `output_min` a wide output's lines are cut."""

    text: int  # paragraphs
    list: int
    table: int
    heading: tuple  # levels 1, 2, 3, 4 (and deeper)
    code: tuple
    output: tuple
    output_min: int
    widget: int  # an explorer's summary
    controls: int  # an explorer's controls and their values

    def heading_px(self, level):
        return self.heading[min(level, len(self.heading)) - 1]


NORMAL = Sizes(text=26, list=24, table=22, heading=(52, 38, 30, 26), code=(18, 16, 14), output=(18, 16, 14),
               output_min=12, widget=18, controls=20)  # fmt: skip
#: A 150-seat room: nothing of code or output below 24 px (14 px is legible from the front rows only).
HALL = Sizes(text=34, list=32, table=28, heading=(60, 48, 40, 34), code=(24,), output=(24,),
             output_min=24, widget=24, controls=26)  # fmt: skip
SIZES = {"normal": NORMAL, "hall": HALL}

#: COURSE_SLIDES_DEBUG=1: each piece carries its estimated height as a class (course-estimate-NNN),
#: to compare with what the browser measures when the sizes here or in the style sheet change.
DEBUG = bool(os.environ.get("COURSE_SLIDES_DEBUG"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SETUP_RE = re.compile(r"\bsetup\(\s*lang\s*=")
DETAIL_RE = re.compile(r"\A\s*###\s")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*)$")
LIST_RE = re.compile(r"^\s{0,3}([-*+]|\d+[.)])\s+")
IMAGE_RE = re.compile(r"^!\[([^\]]*)\]\(((?:\.\./)*)images/([^)\s]+)\)\s*$")
HAN_RE = re.compile(r"[\u4e00-\u9fff]")
MATH_INLINE_RE = re.compile(r"\$[^$]+\$")


def text_columns(text):
    """Monospace columns `text` takes: East Asian wide characters count as about two."""
    return sum(1.7 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _text_width(text, px):
    """Estimated width in px of proportional `text` at font size `px` (math counted roughly)."""
    text = MATH_INLINE_RE.sub(lambda m: "x" * max(1, int(len(m.group(0)) * 0.85)), text)
    text = re.sub(r"[*_`]", "", re.sub(r"\]\([^)]*\)", "]", text))
    wide = len(HAN_RE.findall(text)) + sum(
        unicodedata.east_asian_width(ch) in "WF" for ch in text if not HAN_RE.match(ch)
    )
    return (wide * 1.0 + (len(text) - wide) * 0.53) * px


def text_lines(text, px, width=CONTENT_WIDTH):
    return sum(max(1, math.ceil(_text_width(line, px) / width)) for line in text.split("\n") if line.strip())


# ----------------------------------------------------------------------------- markdown blocks


class Block:
    """A piece of a slide. kind: heading, prose, math, list, table, image, html, fence, code, output."""

    def __init__(self, kind, text="", height=0.0, **extra):
        self.kind, self.text, self.height = kind, text, height
        self.__dict__.update(extra)

    def __repr__(self):
        return f"Block({self.kind}, {self.height:.0f}px, {self.text[:40]!r})"


def markdown_blocks(source):
    """Split a markdown cell into blocks: headings, prose paragraphs, display math, lists, tables,
    images, fenced code. A paragraph that holds display math gives the math a block of its own."""
    blocks, lines, i = [], source.split("\n"), 0

    def take_until(stop):
        nonlocal i
        start = i
        while i < len(lines) and not stop(lines[i]):
            i += 1
        return "\n".join(lines[start:i])

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif HEADING_RE.match(stripped):
            level, text = HEADING_RE.match(stripped).groups()
            blocks.append(Block("heading", text, level=len(level)))
            i += 1
        elif stripped.startswith("$$"):
            start = i
            closed = stripped.endswith("$$") and len(stripped) > 2 and stripped.count("$$") >= 2
            i += 1
            while not closed and i < len(lines):
                closed = lines[i].strip().endswith("$$")
                i += 1
            blocks.append(Block("math", "\n".join(lines[start:i])))
        elif stripped.startswith("```"):
            start = i
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                i += 1
            i += 1
            blocks.append(Block("fence", "\n".join(lines[start:i])))
        elif stripped.startswith("|"):
            blocks.append(Block("table", take_until(lambda x: not x.strip().startswith("|"))))
        elif IMAGE_RE.match(stripped):
            blocks.append(Block("image", stripped))
            i += 1
        elif stripped.startswith("<"):
            blocks.append(Block("html", take_until(lambda x: not x.strip())))
        elif LIST_RE.match(line):
            start = i
            i += 1
            while i < len(lines):
                if (
                    lines[i].strip()
                    and (LIST_RE.match(lines[i]) or lines[i].startswith((" ", "\t")))
                    or not lines[i].strip()
                    and i + 1 < len(lines)
                    and (LIST_RE.match(lines[i + 1]) or lines[i + 1].startswith(("  ", "\t")))
                ):
                    i += 1
                else:
                    break
            blocks.append(Block("list", "\n".join(lines[start:i]).rstrip()))
        else:
            text = take_until(
                lambda x: (
                    not x.strip()
                    or x.strip().startswith(("$$", "|", "```"))
                    or bool(HEADING_RE.match(x.strip()))
                    or bool(LIST_RE.match(x))
                )
            )
            blocks.append(Block("prose", text))
    return blocks


def heading_height(text, level, sizes):
    px = sizes.heading_px(level)
    return text_lines(text, px) * px * 1.2 + 0.6 * px


def math_height(tex, sizes):
    rows = tex.count("\\\\") + 1
    tall = any(word in tex for word in ("\\frac", "\\sum", "\\Big", "\\big", "\\sqrt", "\\prod", "\\begin"))
    return rows * sizes.text * (3 if tall else 2) + 12


def math_width(tex, sizes):
    """A rough width in px of display math at the text size (command names render short)."""
    body = re.sub(r"\\(mathrm|text|operatorname)\{([^}]*)\}", r"\2", tex.strip("$ \n"))
    body = re.sub(r"\\(qquad)", "MMMM", body)
    body = re.sub(r"\\(quad|;|,|!)", "M", body)
    body = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", lambda m: max(m.group(1), m.group(2), key=len), body)
    body = re.sub(r"\\[a-zA-Z]+", "x", body)
    body = re.sub(r"[{}^_]", "", body)
    return len(body.replace(" ", "")) * sizes.text * 0.62


def list_items(text):
    """The top-level items of a markdown list, each with its continuation lines."""
    items = []
    for line in text.split("\n"):
        if LIST_RE.match(line) and not line.startswith((" ", "\t")) or not items:
            items.append(line)
        else:
            items[-1] += "\n" + line
    return items


def list_height(text, sizes):
    items = list_items(text)
    lines = sum(text_lines(re.sub(r"\n\s+", " ", item), sizes.list, CONTENT_WIDTH - 80) + 0.15 for item in items)
    return lines * sizes.list * 1.35 + 16


def table_rows(text):
    """(header lines, body rows) of a markdown table."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) >= 2 and re.match(r"^\|?[\s:|-]+\|?$", lines[1].strip()):
        return lines[:2], lines[2:]
    return [], lines


def _row_height(row, sizes):
    cells = [cell for cell in row.strip().strip("|").split("|")]
    width = sum(_text_width(cell.strip(), sizes.table) + 30 for cell in cells)
    lines = max(1, math.ceil(width * 1.15 / CONTENT_WIDTH))
    tall = 12 if ("\\frac" in row or "\\sqrt" in row or "_" in row and "$" in row) else 0
    return lines * sizes.table * 1.3 + 18 + tall


def table_height(text, sizes):
    header, rows = table_rows(text)
    return sum(_row_height(row, sizes) for row in header[:1] + rows) + 16


def image_size(data, mime):
    """(width, height) in px of a PNG or SVG (bytes)."""
    if mime == "image/png" and data[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", data[16:24])
    if mime == "image/svg+xml":
        head = data[:2000].decode("utf-8", "replace")
        match = re.search(r'<svg[^>]*?\swidth="([\d.]+)(pt|px)?"[^>]*?\sheight="([\d.]+)(pt|px)?"', head)
        if match:
            factor = 4 / 3 if match.group(2) == "pt" else 1
            return float(match.group(1)) * factor, float(match.group(3)) * factor
    return 800, 450


def fit_box(width, height, max_height, max_scale, max_width=CONTENT_WIDTH):
    scale = min(max_width / width, max_height / height, max_scale)
    return round(width * scale), round(height * scale), scale
