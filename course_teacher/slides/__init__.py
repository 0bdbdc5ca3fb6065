"""Lecture slides: one offline reveal.js deck per lesson and language, and a PDF handout.

    python -m course_teacher.slides                 every lesson, both languages
    python -m course_teacher.slides --only 01       just lesson 01
    python -m course_teacher.slides --lang zh       just the Chinese decks
    python -m course_teacher.slides --theme dark    decks that open in the dark theme
    python -m course_teacher.slides --out DIR       write to DIR instead of slides/decks
    python -m course_teacher.slides --handout       also print each deck to a PDF (one slide a page)

Writes ``slides/decks/{en,zh}/NN_slug.html`` from the executed solution notebooks
(``notebooks/solutions/{en,zh}/``: a lecture shows the worked code and its outputs, which the
student renders lack), and with ``--handout`` ``slides/decks/handouts/{en,zh}/NN_slug.pdf``
(the handouts folder of ``--out``). The decks need no network: reveal.js, MathJax 2 (the version nbconvert's reveal template drives), require.js
and jQuery are copied from ``slides/node_modules/`` into ``slides/decks/assets/``, and the
lessons' diagrams are embedded in the HTML. ``make slides`` installs those packages from the npm
registry with ``npm ci`` (pinned in the committed ``slides/package-lock.json``): the one step
that needs the network. Copy ``slides/decks/`` to the lecture room's machine as a whole and open
a deck in a browser; ``S`` opens the speaker view with the notes.

Every slide fits a 16:9 screen (1280×720) without scrolling (layout.py packs each section into
as many sub-slides as it needs); the prose of the lessons is in the speaker notes, with an
estimate of the minutes a slide takes (notes.py). The theme is light, or dark with ``?theme=dark``
after a deck's address (or built as the default with ``--theme dark``, ``make slides THEME=dark``).

The slide structure comes from the cells' ``slideshow`` metadata, with two rules applied here:

- a markdown cell that opens with a ``###`` heading and has no slide type becomes a sub-slide
  (the lessons mark their sections ``##`` as slides; their subsections are the details);
- a code cell that calls ``setup(lang=...)`` (the lesson's imports and setup) is skipped.

Interactive explorers need a kernel, which a deck has not: each widget is replaced by a still of
its saved state (its picture, its summary and its controls' values), and the notebook's widget
state is dropped, so no widget manager is loaded from a CDN.
"""

import argparse
import time
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import SlidesExporter

from ..build import NOTEBOOKS, ROOT, lessons
from .assets import ASSET_FILES, NODE_MODULES, SLIDES, _missing_packages, copy_assets
from .layout import count_slides, slide_notebook
from .sizes import SETUP_RE, SLIDE_HEIGHT, SLIDE_WIDTH, WIDGET_STATE, WIDGET_VIEW
from .template import THEMES, template

__all__ = [
    "ASSET_FILES",
    "DECKS",
    "HANDOUTS",
    "LANGUAGES",
    "NODE_MODULES",
    "SETUP_RE",
    "SLIDES",
    "SLIDE_HEIGHT",
    "SLIDE_WIDTH",
    "THEMES",
    "WIDGET_STATE",
    "WIDGET_VIEW",
    "_missing_packages",
    "build",
    "build_deck",
    "copy_assets",
    "count_slides",
    "main",
    "slide_notebook",
]  # fmt: skip

DECKS = SLIDES / "decks"
HANDOUTS = DECKS / "handouts"  # beside the decks: copied to the lecture machine with them
ASSETS = DECKS / "assets"
LANGUAGES = ("en", "zh")
HTML_LANG = {"en": "en", "zh": "zh"}  # nbconvert accepts ISO 639-1 codes only


def exporter(lang, theme="light"):
    return SlidesExporter(
        extra_loaders=[DictLoader({"course_slides.html.j2": template(theme)})],
        template_file="course_slides.html.j2",
        reveal_url_prefix="../assets/reveal.js",
        reveal_theme="white",  # the light theme's sheet; the page swaps in black.css for the dark one
        reveal_scroll=False,  # no scrolling slides: each fits the screen
        mathjax_url="../assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url="../assets/requirejs/require.js",
        jquery_url="../assets/jquery/dist/jquery.min.js",
        language_code=HTML_LANG[lang],  # <html lang="zh">: the browser picks a Chinese font
    )


def build_deck(lesson_path, lang, decks=DECKS, theme="light"):
    """Write one deck into `decks`/lang/; return (its path, its number of slides, its size in bytes)."""
    source = NOTEBOOKS / "solutions" / lang / lesson_path.with_suffix(".ipynb").name
    if not source.exists():
        raise SystemExit(f"slides: {source.relative_to(ROOT)} is missing: run `make notebooks`")
    notebook = slide_notebook(nbformat.read(source, as_version=4), lang)
    body, _ = exporter(lang, theme).from_notebook_node(
        notebook, resources={"metadata": {"path": str(ROOT), "name": source.stem}}
    )
    # the notes hold the lesson's prose, math included: MathJax leaves them as TeX for the speaker view
    body = body.replace('<aside class="notes">', '<aside class="notes tex2jax_ignore">')
    target = decks / lang / f"{source.stem}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target, count_slides(notebook), len(body.encode())


def _shown(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def build(only=None, langs=LANGUAGES, decks=DECKS, theme="light", handouts=None):
    """Write the decks (every lesson, or one) and their assets; print each deck's slides and size.
    With `handouts` (a folder), print each deck to a PDF there too."""
    decks = Path(decks).resolve()
    copy_assets(decks / "assets")
    written = []
    for lesson_path in lessons(only).values():
        for lang in langs:
            start = time.perf_counter()
            path, slides, size = build_deck(lesson_path, lang, decks, theme)
            written.append((path, slides))
            print(
                f"{_shown(path)}: {slides} slides, {size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s",
                flush=True,
            )
    assets = sum(f.stat().st_size for f in (decks / "assets").rglob("*") if f.is_file())
    print(f"{_shown(decks / 'assets')}: {assets / 1e6:.1f} MB (shared by every deck)")
    if handouts is not None:
        from .handout import print_handouts

        print_handouts([path for path, _ in written], decks, Path(handouts).resolve())
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.slides", description=__doc__.split("\n")[0])
    parser.add_argument("--only", metavar="NN", help="just lesson NN (e.g. 01)")
    parser.add_argument("--lang", choices=LANGUAGES, help="just one language")
    parser.add_argument("--theme", choices=sorted(THEMES), default="light", help="the theme a deck opens in")
    parser.add_argument("--out", metavar="DIR", default=DECKS, help="where the decks go (default: slides/decks)")
    parser.add_argument(
        "--handout", nargs="?", const="", metavar="DIR",
        help="also print each deck to a PDF, one slide a page (default folder: handouts/ in the decks' folder)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    handouts = args.handout if args.handout != "" else Path(args.out) / "handouts"
    return build(args.only, (args.lang,) if args.lang else LANGUAGES, args.out, args.theme, handouts)
