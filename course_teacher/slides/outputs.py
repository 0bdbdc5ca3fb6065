"""Code, printed outputs and widgets, set for a slide: code at the largest font that fits (or in
pieces), outputs in a font narrow enough for their widest line and cut with a visible "…" where
they are too long, widgets as stills of their saved state."""

import base64
import html
import math
import re
import unicodedata

from .notes import LABELS
from .sizes import (
    BLOCK_PAD,
    CONTENT_WIDTH,
    LINE,
    MONO_EM,
    PICTURE_SCALE,
    text_columns,
    fit_box,
    image_size,
)


def code_height(source, px):
    columns = (CONTENT_WIDTH - 24) / (MONO_EM * px)
    lines = sum(max(1, math.ceil(text_columns(line) / columns)) for line in source.split("\n"))
    return lines * px * LINE + BLOCK_PAD


def split_code(source, px, room):
    """Split code into pieces that fit `room` px at font `px`, preferably at blank lines."""
    lines, pieces, start = source.split("\n"), [], 0
    while start < len(lines):
        end = start + 1
        while end < len(lines) and code_height("\n".join(lines[start : end + 1]), px) <= room:
            end += 1
        if end < len(lines):  # break at the last blank line in the piece's second half
            blanks = [j for j in range(start + 1, end) if not lines[j].strip() and j - start >= (end - start) // 2]
            if blanks:
                end = blanks[-1] + 1
        pieces.append("\n".join(lines[start:end]).strip("\n"))
        start = end
    return [piece for piece in pieces if piece.strip()]


def fit_text_output(text, room, lang, sizes):
    """(html, height, trimmed) of a printed output: a font of `sizes.output` small enough for its
    widest line (cut with "…" beyond the smallest), and lines beyond what `room` holds replaced by
    a "…" line."""
    lines = text.rstrip("\n").split("\n")
    widest = max((text_columns(line) for line in lines), default=1)
    usable = (CONTENT_WIDTH - 40) * 0.92  # 8% for characters a fallback font draws wider
    px = max(sizes.output_min, min(sizes.output[0], math.floor(usable / (MONO_EM * max(widest, 1)))))
    trimmed = False
    columns = int(usable / (MONO_EM * px))
    if widest > columns:
        cut = []
        for line in lines:
            if text_columns(line) > columns:
                keep, count = "", 0.0
                for ch in line:
                    count += 1.7 if unicodedata.east_asian_width(ch) in "WF" else 1
                    if count > columns - 2:
                        break
                    keep += ch
                line, trimmed = keep + " …", True
            cut.append(line)
        lines = cut
    line_px = lambda size: size * 1.25
    for size in [px] + [s for s in sizes.output if s < px]:
        if len(lines) * line_px(size) + BLOCK_PAD <= room:
            px = size
            break
    else:
        px = min(px, sizes.output[-1])
        keep = max(3, int((room - BLOCK_PAD) / line_px(px)) - 1)
        hidden = len(lines) - keep
        more = {"en": f"… ({hidden + 2} more lines)", "zh": f"…（另有 {hidden + 2} 行）"}[lang]
        lines = lines[: keep - 2] + [more] + lines[-2:]
        trimmed = True
    body = html.escape("\n".join(lines))
    title = f' title="{html.escape(LABELS[lang]["trimmed"])}"' if trimmed else ""
    markup = f'<pre class="course-out" style="font-size:{px}px"{title}>{body}</pre>'
    return markup, len(lines) * line_px(px) + BLOCK_PAD, trimmed


def _widget_parts(model_id, state, parts, depth=0):
    """Collect the saved state of widget `model_id` and its children: pictures, texts, controls."""
    model = state.get(model_id)
    if model is None or depth > 20:
        return
    name, values = model["model_name"], model["state"]
    if "children" in values:
        for child in values["children"]:
            _widget_parts(child.removeprefix("IPY_MODEL_"), state, parts, depth + 1)
    elif name == "ImageModel":
        for buffer in model.get("buffers", []):
            if buffer.get("path") == ["value"]:
                mime = f"image/{values.get('format', 'png')}".replace("svg", "svg+xml")
                parts["pictures"].append((mime, buffer["data"]))
    elif name == "HTMLModel":
        value = values.get("value", "")
        pre = re.fullmatch(r"\s*<pre[^>]*>(.*)</pre>\s*", value, re.DOTALL)
        if pre:
            parts["texts"].append(html.unescape(pre.group(1)))
        elif value.strip():
            parts["html"].append(value)
    elif "value" in values or "index" in values:  # a control: its label and current value
        value = values.get("value")
        if value is None and "index" in values and values.get("_options_labels"):
            value = values["_options_labels"][values["index"]]
        label = html.escape(str(values.get("description", "")))
        parts["controls"].append(f'<span class="course-control"><b>{label}</b> {html.escape(str(value))}</span>')


def widget_parts(model_id, state):
    """The saved state of a widget: {"pictures": [(mime, base64)], "texts": [str], "html": [str],
    "controls": [html]}."""
    parts = {"pictures": [], "texts": [], "html": [], "controls": []}
    _widget_parts(model_id, state, parts)
    return parts


def widget_picture(parts, room, sizes):
    """(html, height, scale) of a widget's controls and its pictures, scaled to what `room` allows."""
    markup, height = [], 0.0
    if parts["controls"]:
        markup.append(f'<div class="course-controls">{"".join(parts["controls"])}</div>')
        height += 2 * sizes.controls * math.ceil(len(parts["controls"]) / 4)  # about four to a line
    markup += [f'<div class="course-widget-html">{piece}</div>' for piece in parts["html"]]
    height += sizes.widget * 10 / 3 * len(parts["html"])
    scale = 1.0
    for mime, data in parts["pictures"]:
        width, tall = image_size(base64.b64decode(data), mime)
        room_each = (room - height - 10) / max(1, len(parts["pictures"]))
        shown_w, shown_h, scale = fit_box(width, tall, room_each, PICTURE_SCALE[1])
        markup.append(
            f'<img class="course-picture" src="data:{mime};base64,{data}" style="width:{shown_w}px;height:{shown_h}px">'
        )
        height += shown_h + 8
    return f'<div class="course-widget">{"".join(markup)}</div>', height, scale
