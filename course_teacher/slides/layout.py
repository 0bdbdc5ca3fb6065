"""From a lesson's notebook to slides that fit a 1280×720 screen.

The lessons are written to be read: long sections of prose, code and outputs. A slide shows the
heading, formulas, lists, tables, pictures, code and outputs; the prose moves into the speaker
notes. Each section (a cell marked `slide`, or a `###` subsection) is packed into as many
sub-slides as it needs, by an estimate of each piece's height in the slide's pixels (sizes.py,
the sizes of the deck's style sheet in template.py, normal or the hall's). The browser test
measures the result.
"""

import base64
import copy
import html
import re

import nbformat

from ..build import NAV_TAG, ROOT
from ..glossary import plain
from .notes import LABELS, minutes, note_markdown
from .outputs import code_height, fit_text_output, split_code, widget_parts, widget_picture
from .sizes import (
    BUDGET,
    CONTENT_WIDTH,
    DEBUG,
    DETAIL_RE,
    HAN_RE,
    IMAGE_RE,
    LINE,
    NORMAL,
    PICTURE_SCALE,
    SETUP_RE,
    WIDGET_STATE,
    WIDGET_VIEW,
    fit_box,
    heading_height,
    image_size,
    list_height,
    math_height,
    math_width,
    table_height,
    text_lines,
    list_items,
    markdown_blocks,
    table_rows,
)

#: A link to a lesson's notebook beside this one, in a lesson's links (build.navigation)
LESSON_LINK = re.compile(r"\]\((\d\d_[\w-]+)\.ipynb\)")

# ----------------------------------------------------------------------------- packing


class Page:
    """One slide being filled: its cells, its height so far, and what its notes will say."""

    def __init__(self, slide_type, heading=None):
        self.slide_type, self.cells, self.height = slide_type, [], 0.0
        self.say, self.exercises, self.code_lines, self.pictures, self.outputs = [], [], 0, 0, 0
        self.visible = 0  # blocks shown besides the heading
        if heading is not None:
            self.cells.append(heading[0])
            self.height += heading[1]

    @property
    def room(self):
        return BUDGET - self.height


def _markdown_cell(source, tags=()):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["slideshow"] = {"slide_type": "-"}
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def _output_cell(markup, tags=()):
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": markup, "text/plain": ""})]
    cell.metadata["slideshow"] = {"slide_type": "-"}
    cell.metadata["transient"] = {"remove_source": True}
    cell.metadata["tags"] = ["course-output", *tags]
    return cell


def _image_markup(path_name, alt, room):
    path = ROOT / "images" / path_name
    data = path.read_bytes()
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    width, height = image_size(data, mime)
    shown_w, shown_h, _ = fit_box(width, height, room - 12, 3.0)
    encoded = base64.b64encode(data).decode()
    markup = (
        f'<div class="course-figure"><img alt="{html.escape(alt)}" src="data:{mime};base64,{encoded}" '
        f'style="width:{shown_w}px;height:{shown_h}px"></div>'
    )
    return markup, shown_h + 12, shown_h / height


class Packer:
    """Packs one section's blocks into pages (a slide and its continuation sub-slides), set in
    `sizes`; with `notes` False (a student's deck) the pages get no speaker notes."""

    def __init__(self, lang, slide_type, title, level, sizes, notes=True):
        self.lang, self.title, self.level, self.sizes, self.notes = lang, title, level, sizes, notes
        self.pages = [Page(slide_type)]
        self.pending_say = []

    @property
    def page(self):
        return self.pages[-1]

    def heading_room(self):
        """The room a new continuation page offers: the budget less its heading."""
        return BUDGET - heading_height(self._continued_title(), 3, self.sizes)

    def _continued_title(self):
        continued = LABELS[self.lang]["continued"]
        return f"{self.title}{'' if self.lang == 'zh' else ' '}{continued}" if self.title else continued

    def new_page(self):
        title = self._continued_title()
        heading = (_markdown_cell(f"### {title}", tags=("course-continued",)), heading_height(title, 3, self.sizes))
        self.pages.append(Page("subslide", heading))

    def ensure(self, height):
        """Start a new page unless `height` fits on this one (a page with nothing shown yet keeps it)."""
        if height > self.page.room and self.page.visible > 0:
            self.new_page()

    def place(self, cell, height, count=True):
        if DEBUG:  # the estimate, as a class the browser can read beside the measured height
            cell.metadata.setdefault("tags", []).append(f"course-estimate-{round(height)}")
        self.page.cells.append(cell)
        self.page.height += height
        if count:
            self.page.visible += 1
        if self.pending_say:
            self.page.say += self.pending_say
            self.pending_say = []

    def picture(self, make, min_scale=0.0):
        """Place a picture made by `make(room) -> (markup, height, scale)`: on this page if it keeps
        most of the size it would have on a page of its own, else on a new page."""
        markup, height, scale = make(self.page.room)
        if self.page.visible:
            alone = make(self.heading_room())
            if height > self.page.room or height < 0.8 * alone[1] or scale < min_scale:
                self.new_page()
                markup, height, scale = make(self.page.room)
        self.place(_output_cell(markup), height)
        self.page.pictures += 1

    def heading(self, block):
        height = heading_height(block.text, block.level, self.sizes)
        self.page.cells.append(_markdown_cell("#" * block.level + " " + block.text))
        self.page.height += height

    def markdown(self, block):
        if block.kind == "prose":
            self.pending_say.append(block.text)
            return
        if block.kind == "image":
            match = IMAGE_RE.match(block.text)
            self.picture(lambda room: _image_markup(match.group(3), match.group(1), room))
            return
        source, tags, sizes = block.text, (), self.sizes
        if block.kind == "math":
            height = math_height(block.text, sizes)
            width = math_width(block.text, sizes)
            if width > CONTENT_WIDTH * 0.95:  # a wide formula: a smaller font, or one line per formula
                scale = max(0.6, CONTENT_WIDTH * 0.95 / width)
                tags = (f"course-math-{int(scale * 10)}",)
                height *= scale
        elif block.kind == "list" and list_height(block.text, sizes) > self.page.room:
            self._pieces(list_items(block.text), lambda text: list_height(text, sizes), lambda items: "\n".join(items))
            return
        elif block.kind == "table" and table_height(block.text, sizes) > self.page.room:
            header, rows = table_rows(block.text)
            self._pieces(
                rows,
                lambda text: table_height("\n".join(header + [text]), sizes),
                lambda rows: "\n".join(header + rows),
            )
            return
        elif block.kind == "list":
            height = list_height(block.text, sizes)
        elif block.kind == "table":
            height = table_height(block.text, sizes)
        elif block.kind == "fence":
            height = code_height(block.text, sizes.code[0])
        else:
            height = text_lines(re.sub(r"<[^>]+>", "", block.text), sizes.text) * sizes.text * LINE + 20
        self.ensure(height)
        self.place(_markdown_cell(source, tags), height)

    def _pieces(self, parts, height_of, join):
        """Place a list's items or a table's rows, as many on each page as fit."""
        chunk = []
        for part in parts:
            if not chunk:
                self.ensure(height_of(join([part])))
            if chunk and height_of(join(chunk + [part])) > self.page.room:
                self.place(_markdown_cell(join(chunk)), height_of(join(chunk)))
                self.new_page()
                chunk = []
            chunk.append(part)
        if chunk:
            self.ensure(height_of(join(chunk)))
            self.place(_markdown_cell(join(chunk)), height_of(join(chunk)))

    def code(self, cell, state):
        source = cell.source.rstrip()
        first = len(self.pages) - 1
        if source:
            self._code_source(cell, source)
        check = re.search(r'\bcheck\("([^"]+)"', source)
        for exercise_id in (cell.metadata.get("exercise"), check.group(1) if check else None):
            for page in self.pages[first:]:  # every page the exercise's code is on
                if exercise_id and exercise_id not in page.exercises:
                    page.exercises.append(exercise_id)
        for output in cell.get("outputs", []):
            self._output(output, state)

    def _code_source(self, cell, source):
        """Place a code cell's source: where it is, at a size but the smallest (18 or 16 px); else on
        a page of its own at the largest size that fits (down to 14 px); else in pieces, each on a
        sub-slide of its own (at 16 px). The hall has one size, 24 px, for all three."""
        code = self.sizes.code
        shared, split = code[:-1] or code, code[min(1, len(code) - 1)]
        fitting = [px for px in shared if code_height(source, px) <= self.page.room]
        if not fitting and self.page.visible:
            self.new_page()
            fitting = [px for px in code if code_height(source, px) <= self.page.room]
        elif not fitting:
            fitting = [px for px in code if code_height(source, px) <= self.page.room]
        if fitting:
            pieces = [(source, fitting[0])]
        else:  # too long for any slide: pieces, each a code block of its own on a sub-slide
            pieces = [(piece, split) for piece in split_code(source, split, self.heading_room())]
        for index, (piece, size) in enumerate(pieces):
            if index:
                self.new_page()
            new = copy.deepcopy(cell)
            new.source, new.outputs = piece, []
            new.execution_count = None
            new.metadata["slideshow"] = {"slide_type": "-"}
            new.metadata.pop("transient", None)
            new.metadata["tags"] = [f"course-code-{size}"]
            self.place(new, code_height(piece, size))
            self.page.code_lines += piece.count("\n") + 1

    def _output(self, output, state):
        data = output.get("data", {})
        view = data.get(WIDGET_VIEW)
        if view:
            parts = widget_parts(view["model_id"], state)  # a still: the picture, then its summary
            self.picture(lambda room: widget_picture(parts, room, self.sizes), min_scale=1.0)
            for text in parts["texts"]:
                self._text(text)
            return
        for mime in ("image/png", "image/svg+xml"):
            if mime in data:
                raw = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
                if mime == "image/png":
                    payload = raw.replace("\n", "")
                    width, height = image_size(base64.b64decode(payload), mime)
                else:
                    payload = base64.b64encode(raw.encode()).decode()
                    width, height = image_size(raw.encode(), mime)

                def make(room, payload=payload, mime=mime, width=width, height=height):
                    shown_w, shown_h, scale = fit_box(width, height, room - 8, PICTURE_SCALE[1])
                    markup = (
                        f'<img class="course-picture" src="data:{mime};base64,{payload}" '
                        f'style="width:{shown_w}px;height:{shown_h}px">'
                    )
                    return markup, shown_h + 8, scale

                self.picture(make, min_scale=PICTURE_SCALE[0])
                return
        if "text/html" in data and "text/plain" not in data:
            self.ensure(200)
            self.place(_output_cell("".join(data["text/html"])), 200)
            return
        if output.get("output_type") == "stream":
            text = output.get("text", "")
        else:
            text = data.get("text/plain", "")
        text = text if isinstance(text, str) else "".join(text)
        if output.get("output_type") == "error":
            text = "\n".join(output.get("traceback", []))
        self._text(text)

    def _text(self, text):
        """Place a printed output: on this page if it fits whole, else on a page of its own, cut to fit."""
        if not text.strip():
            return
        markup, height, trimmed = fit_text_output(text, self.page.room, self.lang, self.sizes)
        if (trimmed or height > self.page.room) and self.page.visible:
            alone = fit_text_output(text, self.heading_room(), self.lang, self.sizes)
            if height > self.page.room or alone[1] > height or not alone[2]:  # too tall here, or more shows alone
                self.new_page()
                markup, height, trimmed = fit_text_output(text, self.page.room, self.lang, self.sizes)
        self.place(_output_cell(markup), height)
        self.page.outputs += 1

    def finish(self):
        """The section's cells: each page's, its first marked as a slide or sub-slide, and its notes."""
        if self.pending_say:
            self.page.say += self.pending_say
            self.pending_say = []
        cells = []
        for page in self.pages:
            if not page.cells:
                continue
            if page.visible == 0 and page.say:  # only a heading: its first paragraph shows too
                lead = page.say[0]
                page.cells.append(_markdown_cell(lead, tags=("course-lead",)))
            page.cells[0].metadata["slideshow"] = {"slide_type": page.slide_type}
            cells += page.cells + ([self._note(page)] if self.notes else [])
        return cells

    def _note(self, page):
        say = "\n\n".join(page.say)
        kind = "code" if page.code_lines or page.outputs else ("picture" if page.pictures else "default")
        value = minutes(say, page.code_lines, page.pictures, page.outputs, bool(page.exercises))
        note = _markdown_cell(note_markdown(self.lang, say, kind, page.exercises, value))
        note.metadata["slideshow"] = {"slide_type": "notes"}
        return note


def _deck_links(source):
    """A lesson's link to the next lesson (build.navigation), as a deck shows it: to the next deck
    (NN_slug.ipynb -> NN_slug.html, its neighbour in slides/decks/{en,zh}/); the lines that link
    anything else (the course home, which has no deck) are left out."""
    lines = [line for line in source.splitlines() if line.strip()]
    kept = [LESSON_LINK.sub(r"](\1.html)", line) for line in lines if LESSON_LINK.search(line)]
    return "\n\n".join(kept)


def deck_language(notebook):
    tags = {tag for cell in notebook.cells for tag in cell.metadata.get("tags", [])}
    if "lang-zh" in tags:
        return "zh"
    if "lang-en" in tags:
        return "en"
    text = "".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    return "zh" if len(HAN_RE.findall(text)) > 50 else "en"


def slide_notebook(notebook, lang=None, sizes=NORMAL, notes=True):
    """A copy of `notebook` ready for the slides exporter: setup cells skipped, subsections as
    sub-slides, each section packed into slides that fit 1280×720 in `sizes` (sizes.py), the prose
    in speaker notes (or, with `notes` False, nowhere), widgets replaced by stills of their saved
    state (no widget manager, no widget state), and the glossary's links and anchors left out (a
    deck has no glossary beside it: course_teacher.glossary.plain)."""
    notebook = copy.deepcopy(notebook)
    lang = lang or deck_language(notebook)
    state = notebook.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    cells, packer, title, level = [], None, "", 2
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = plain(cell.source)
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if cell.cell_type == "markdown" and DETAIL_RE.match(cell.source) and kind in ("-", "fragment"):
            kind = "subslide"
        if kind == "skip" or (cell.cell_type == "code" and SETUP_RE.search(cell.source)):
            continue
        blocks = markdown_blocks(cell.source) if cell.cell_type == "markdown" else []
        if kind in ("slide", "subslide") or packer is None:
            if blocks and blocks[0].kind == "heading":
                title, level = re.sub(r"\s*\{[^}]*\}\s*$", "", blocks[0].text), blocks[0].level
            if packer is not None:
                cells += packer.finish()
            slide_type = "slide" if packer is None else (kind if kind in ("slide", "subslide") else "slide")
            packer = Packer(lang, slide_type, title, level, sizes, notes)
        if kind == "notes":
            packer.pending_say.append(cell.source)
        elif cell.cell_type == "markdown" and NAV_TAG in cell.metadata.get("tags", []):
            links = _deck_links(cell.source)
            if links:
                packer.ensure(sizes.text * LINE + 20)
                packer.place(_markdown_cell(links, tags=(NAV_TAG,)), sizes.text * LINE + 20)
        elif cell.cell_type == "markdown":
            for block in blocks:
                if block.kind == "heading" and not packer.page.cells:
                    packer.heading(block)
                elif block.kind == "heading":
                    packer.ensure(heading_height(block.text, block.level, sizes) + 80)
                    packer.heading(block)
                else:
                    packer.markdown(block)
        elif cell.cell_type == "code":
            packer.code(cell, state)
    if packer is not None:
        cells += packer.finish()
    for number, cell in enumerate(cells):
        cell["id"] = f"slide-cell-{number}"
    notebook.cells = cells
    return notebook


def count_slides(notebook):
    """How many slides reveal.js shows for `notebook` (slide and sub-slide cells)."""
    return sum(cell.metadata.get("slideshow", {}).get("slide_type") in ("slide", "subslide") for cell in notebook.cells)
