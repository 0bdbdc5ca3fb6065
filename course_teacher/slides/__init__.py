"""Lecture slides: one offline reveal.js deck per lesson and language, and the PDF handouts.

    python -m course_teacher.slides                 every lesson, both languages
    python -m course_teacher.slides --only 01       just lesson 01
    python -m course_teacher.slides --lang zh       just the Chinese decks
    python -m course_teacher.slides --theme dark    decks that open in the dark theme
    python -m course_teacher.slides --size hall     decks for a large room: code and output at 24 px or more
    python -m course_teacher.slides --out DIR       write to DIR instead of slides/decks
    python -m course_teacher.slides --handout       also print the handouts: the students' and the lecturer's

Writes ``slides/decks/{en,zh}/NN_slug.html`` from the executed solution notebooks
(``notebooks/solutions/{en,zh}/``: a lecture shows the worked code and its outputs, which the
student renders lack). Each theme and size has a folder of its own, so that no build overwrites
another's: ``slides/decks/`` holds the light decks in the normal sizes, ``dark/``, ``hall/`` and
``hall-dark/`` in it the others (`deck_folder`). The decks need no network: reveal.js, MathJax 2
(the version nbconvert's reveal template drives), require.js and jQuery are copied from
``slides/node_modules/`` into ``slides/decks/assets/``, which every folder's decks share, and the
lessons' diagrams are embedded in the HTML. ``make slides`` installs those packages from the npm
registry with ``npm ci`` (pinned in the committed ``slides/package-lock.json``): the one step
that needs the network. Copy ``slides/decks/`` to the lecture room's machine as a whole and open
a deck in a browser; ``S`` opens the speaker view with the notes.

``--handout`` prints two handouts per deck, in the light theme (handout.py), into ``handouts/`` of
the size's folder (``slides/decks/handouts/``, ``slides/decks/hall/handouts/``):

- ``student/{en,zh}/NN_slug.pdf``, for the students: built from the student notebooks
  (``notebooks/{en,zh}/``: each exercise a ``raise NotImplementedError`` stub, no solution), four
  slides to an A4 page, no notes; the deck it is printed from is beside it (``NN_slug.html``);
- ``lecturer/{en,zh}/NN_slug.pdf``, for the lecturer only: the solution decks, one slide a page,
  every page labelled as the lecturer's copy with the solutions.

Every slide fits a 16:9 screen (1280×720) without scrolling (layout.py packs each section into
as many sub-slides as it needs, in the fonts of its size: sizes.py); the prose of the lessons is
in the speaker notes, with an estimate of the minutes a slide takes (notes.py), and their math is
set as HTML when the deck is built, since the speaker view has no MathJax (texhtml.py). The theme
is light, or dark with ``?theme=dark`` after a deck's address (or built as the default with
``--theme dark``, ``make slides THEME=dark``).

The slide structure comes from the cells' ``slideshow`` metadata, with two rules applied here:

- a markdown cell that opens with a ``###`` heading and has no slide type becomes a sub-slide
  (the lessons mark their sections ``##`` as slides; their subsections are the details);
- a code cell that calls ``setup(lang=...)`` (the lesson's imports and setup) is skipped.

Interactive explorers need a kernel, which a deck has not: each widget is replaced by a still of
its saved state (its picture, its summary and its controls' values), and the notebook's widget
state is dropped, so no widget manager is loaded from a CDN.
"""

import argparse
import os
import re
import time
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import SlidesExporter

from ..build import NOTEBOOKS, ROOT, lessons, notebook_name
from .assets import ASSET_FILES, NODE_MODULES, SLIDES, missing_packages, copy_assets
from .layout import count_slides, slide_notebook
from .sizes import SETUP_RE, SIZES, SLIDE_HEIGHT, SLIDE_WIDTH, WIDGET_STATE, WIDGET_VIEW
from .template import LECTURER_COPY, THEMES, template
from .texhtml import notes_math

__all__ = [
    "ASSET_FILES",
    "DECKS",
    "LANGUAGES",
    "LECTURER_COPY",
    "NODE_MODULES",
    "SETUP_RE",
    "SIZES",
    "SLIDES",
    "SLIDE_HEIGHT",
    "SLIDE_WIDTH",
    "THEMES",
    "WIDGET_STATE",
    "WIDGET_VIEW",
    "missing_packages",
    "build",
    "build_deck",
    "build_decks",
    "copy_assets",
    "count_slides",
    "deck_folder",
    "handout_folder",
    "main",
    "slide_notebook",
]  # fmt: skip

DECKS = SLIDES / "decks"
LANGUAGES = ("en", "zh")
HTML_LANG = {"en": "en", "zh": "zh"}  # nbconvert accepts ISO 639-1 codes only
NOTES_RE = re.compile(r'<aside class="notes">(.*?)</aside>', re.DOTALL)


def deck_folder(decks, theme="light", size="normal"):
    """Where the decks of a theme and size go: `decks` itself for light and normal (as always),
    else a folder named for what differs (dark/, hall/, hall-dark/)."""
    name = "-".join(part for part in (size, theme) if part not in ("normal", "light"))
    return Path(decks) / name if name else Path(decks)


def handout_folder(decks, size="normal"):
    """Where the handouts of a size go: handouts/ in its light folder (a handout prints light)."""
    return deck_folder(decks, "light", size) / "handouts"


def exporter(lang, theme, size, assets, copy):
    return SlidesExporter(
        extra_loaders=[DictLoader({"course_slides.html.j2": template(theme, SIZES[size], copy)})],
        template_file="course_slides.html.j2",
        reveal_url_prefix=f"{assets}/reveal.js",
        reveal_theme="white",  # the light theme's sheet; the page swaps in black.css for the dark one
        reveal_scroll=False,  # no scrolling slides: each fits the screen
        mathjax_url=f"{assets}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url=f"{assets}/requirejs/require.js",
        jquery_url=f"{assets}/jquery/dist/jquery.min.js",
        language_code=HTML_LANG[lang],  # <html lang="zh">: the browser picks a Chinese font
    )


def build_deck(lesson_path, lang, folder, assets, theme="light", size="normal", student=False):
    """Write one deck into `folder`/lang/, its links to `assets` relative; return (its path, its
    number of slides, its size in bytes). A lecturer's deck shows the solutions and has speaker
    notes; a student's (`student`) comes from the student notebook and has no notes."""
    name = notebook_name(lesson_path, lang)  # the deck is named as the notebook: 01_注意力基础.html in zh
    source = NOTEBOOKS / lang / name if student else NOTEBOOKS / "solutions" / lang / name
    if not source.exists():
        raise SystemExit(f"slides: {_shown(source)} is missing: run `make notebooks`")
    notebook = slide_notebook(nbformat.read(source, as_version=4), lang, SIZES[size], notes=not student)
    target = Path(folder) / lang / f"{source.stem}.html"
    relative = Path(os.path.relpath(assets, target.parent)).as_posix()
    body, _ = exporter(lang, theme, size, relative, None if student else LECTURER_COPY[lang]).from_notebook_node(
        notebook, resources={"metadata": {"path": str(ROOT), "name": source.stem}}
    )
    # the notes hold the lesson's prose: its math set as HTML for the speaker view (which has no
    # MathJax), and out of MathJax's way in the deck (a dollar left in the prose stays a dollar)
    body = NOTES_RE.sub(lambda match: f'<aside class="notes tex2jax_ignore">{notes_math(match.group(1))}</aside>', body)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target, count_slides(notebook), len(body.encode())


def _shown(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def build_decks(only, langs, folder, assets, theme="light", size="normal", student=False):
    """Write the decks of every lesson (or one) in `langs` into `folder`; print each one's slides
    and size; return their paths."""
    written = []
    for lesson_path in lessons(only).values():
        for lang in langs:
            start = time.perf_counter()
            path, slides, size_bytes = build_deck(lesson_path, lang, folder, assets, theme, size, student)
            written.append(path)
            print(
                f"{_shown(path)}: {slides} slides, {size_bytes / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s",
                flush=True,
            )
    return written


def build(only=None, langs=LANGUAGES, decks=DECKS, theme="light", size="normal", handouts=None):
    """Write the decks (every lesson, or one) of `theme` and `size` into their folder under `decks`
    (deck_folder), and the assets they share. With `handouts` (a folder), also the student decks
    there, and both handouts of every deck: handouts/student/ and handouts/lecturer/."""
    decks = Path(decks).resolve()
    assets = decks / "assets"
    copy_assets(assets)
    folder = deck_folder(decks, theme, size)
    lecturer = build_decks(only, langs, folder, assets, theme, size)
    total = sum(f.stat().st_size for f in assets.rglob("*") if f.is_file())
    print(f"{_shown(assets)}: {total / 1e6:.1f} MB (shared by every deck)")
    if handouts is not None:
        from .handout import print_handouts

        handouts = Path(handouts).resolve()
        student = build_decks(only, langs, handouts / "student", assets, "light", size, student=True)
        print_handouts(lecturer, folder, handouts / "lecturer")
        print_handouts(student, handouts / "student", handouts / "student", per_sheet=4)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.slides", description=__doc__.split("\n")[0])
    parser.add_argument("--only", metavar="NN", help="just lesson NN (e.g. 01)")
    parser.add_argument("--lang", choices=LANGUAGES, help="just one language")
    parser.add_argument("--theme", choices=sorted(THEMES), default="light", help="the theme a deck opens in")
    parser.add_argument(
        "--size", choices=sorted(SIZES), default="normal",
        help="the fonts: normal, or hall (a large room: code and output at 24 px or more, more slides)",
    )  # fmt: skip
    parser.add_argument("--out", metavar="DIR", default=DECKS, help="where the decks go (default: slides/decks)")
    parser.add_argument(
        "--handout", nargs="?", const="", metavar="DIR",
        help="also print the handouts: DIR/student/ (no solutions, 4 slides a page) and DIR/lecturer/ "
             "(the solutions, one slide a page); default DIR: handouts/ in the size's folder",
    )  # fmt: skip
    args = parser.parse_args(argv)
    handouts = args.handout if args.handout != "" else handout_folder(args.out, args.size)
    langs = (args.lang,) if args.lang else LANGUAGES
    return build(args.only, langs, args.out, args.theme, args.size, handouts)
