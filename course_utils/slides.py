"""Lecture slides: one offline reveal.js deck per lesson and language.

    python -m course_utils.slides                 every lesson, both languages
    python -m course_utils.slides --only 01       just lesson 01
    python -m course_utils.slides --lang zh       just the Chinese decks
    python -m course_utils.slides --out DIR       write to DIR instead of slides/decks

Writes ``slides/decks/{en,zh}/NN_slug.html`` from the executed solution notebooks
(``notebooks/solutions/{en,zh}/``: a lecture shows the worked code and its outputs, which the
student renders lack). The decks need no network: reveal.js, MathJax 2 (the version nbconvert's
reveal template drives), require.js and jQuery (the template loads reveal.js through require.js and
scrolls long slides with jQuery) are copied from ``slides/node_modules/`` into
``slides/decks/assets/``, and the lessons' diagrams are embedded in the HTML. ``make slides``
installs those packages from the npm registry with ``npm ci`` (pinned in the committed
``slides/package-lock.json``): the one step that needs the network. Copy ``slides/decks/`` to
the lecture room's machine as a whole and open a deck in a browser.

The slide structure comes from the cells' ``slideshow`` metadata, with two rules applied here:

- a markdown cell that opens with a ``###`` heading and has no slide type becomes a sub-slide
  (the lessons mark their sections ``##`` as slides; their subsections are the details);
- a code cell that calls ``setup(lang=...)`` (the lesson's imports and setup) is skipped.

Interactive explorers need a kernel, which a deck has not: each widget is replaced by a still of
its saved state (its picture, its summary and its controls' values), and the notebook's widget
state is dropped, so no widget manager is loaded from a CDN.
"""

import argparse
import copy
import html
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import SlidesExporter

from .build import NOTEBOOKS, ROOT, lessons

SLIDES = ROOT / "slides"
NODE_MODULES = SLIDES / "node_modules"
DECKS = SLIDES / "decks"
ASSETS = DECKS / "assets"
LANGUAGES = ("en", "zh")
HTML_LANG = {"en": "en", "zh": "zh"}  # nbconvert accepts ISO 639-1 codes only

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SETUP_RE = re.compile(r"\bsetup\(\s*lang\s*=")
DETAIL_RE = re.compile(r"\A\s*###\s")
#: A diagram link of a solution render (../../../images/NAME.svg), made relative to the repository,
#: the only folder nbconvert embeds images from here (it refuses paths that leave its folder).
IMAGE_LINK_RE = re.compile(r"\]\((?:\.\./)+images/")

#: What is copied from slides/node_modules/ into slides/decks/assets/: (package, paths inside it).
#: MathJax without its unpacked sources, test pages, accessibility extension (which names a CDN)
#: and fonts other than the TeX woff set the CommonHTML output uses; reveal.js's white theme only.
ASSET_FILES = {
    "reveal.js": ["dist/reveal.css", "dist/reset.css", "dist/reveal.js", "dist/theme/white.css",
                  "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js", "LICENSE"],
    "mathjax": ["MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "extensions", "jax/input/TeX", "jax/element",
                "jax/output/CommonHTML", "fonts/HTML-CSS/TeX/woff", "localization", "LICENSE"],
    "requirejs": ["require.js"],
    "jquery": ["dist/jquery.min.js", "LICENSE.txt"],
}  # fmt: skip
ASSET_EXCLUDE = ("extensions/a11y",)

#: nbconvert's reveal template, minus what would reach the network: the mermaid import (the
#: lessons draw no mermaid diagrams) and the widget manager (widgets are stills here). reveal.js
#: loads through require.js as a module, so it sets no global: the deck sets `window.Reveal`
#: itself (the same instance), for the browser's console and the test.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block footer_js %}
{{ super() }}
<script>
require(["{{ reveal_url_prefix }}/dist/reveal.js"], function(Reveal) { window.Reveal = Reveal; });
</script>
{% endblock footer_js %}
"""


def _missing_packages():
    return [name for name in ASSET_FILES if not (NODE_MODULES / name / "package.json").exists()]


def copy_assets(assets=ASSETS):
    """Copy the browser libraries from slides/node_modules/ into `assets` (slides/decks/assets/)."""
    missing = _missing_packages()
    if missing:
        raise SystemExit(
            f"slides: {', '.join(missing)} not installed in {NODE_MODULES.relative_to(ROOT)}: "
            "run `make slides` (it runs `npm ci --prefix slides`)"
        )
    if assets.exists():
        shutil.rmtree(assets)
    for package, paths in ASSET_FILES.items():
        for relative in paths:
            source, target = NODE_MODULES / package / relative, assets / package / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(
                    source, target,
                    ignore=lambda folder, names, package=package: [
                        name for name in names
                        if any(f"{package}/{x}" in (Path(folder) / name).as_posix() for x in ASSET_EXCLUDE)
                    ],
                )  # fmt: skip
            else:
                shutil.copy2(source, target)


# ----------------------------------------------------------------------------- notebook -> slides


def _widget_still(model_id, state, depth=0):
    """HTML for the saved state of widget `model_id` and its children: pictures, HTML, values."""
    model = state.get(model_id)
    if model is None or depth > 20:
        return ""
    name, values = model["model_name"], model["state"]
    if "children" in values:
        inner = "".join(
            _widget_still(child.removeprefix("IPY_MODEL_"), state, depth + 1) for child in values["children"]
        )
        direction = "row" if name == "HBoxModel" else "column"
        return f'<div style="display:flex;flex-direction:{direction};gap:0.3em 1.5em;flex-wrap:wrap">{inner}</div>'
    if name == "ImageModel":
        for buffer in model.get("buffers", []):
            if buffer.get("path") == ["value"]:
                mime = f"image/{values.get('format', 'png')}".replace("svg", "svg+xml")
                return f'<img src="data:{mime};base64,{buffer["data"]}" style="max-width:100%">'
        return ""
    if name == "HTMLModel":
        return f"<div>{values.get('value', '')}</div>"
    if "value" in values or "index" in values:  # a control: show its label and current value
        value = values.get("value")
        if value is None and "index" in values and values.get("_options_labels"):
            value = values["_options_labels"][values["index"]]
        label = html.escape(str(values.get("description", "")))
        return f'<span class="course-control"><b>{label}</b> {html.escape(str(value))}</span>'
    return ""


def slide_notebook(notebook):
    """A copy of `notebook` ready for the slides exporter: setup cells skipped, subsections as
    sub-slides, widgets replaced by stills of their saved state."""
    notebook = copy.deepcopy(notebook)
    state = notebook.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in notebook.cells:
        slideshow = cell.metadata.setdefault("slideshow", {})
        if cell.cell_type == "code" and SETUP_RE.search(cell.source):
            slideshow["slide_type"] = "skip"
        elif cell.cell_type == "markdown" and DETAIL_RE.match(cell.source):
            slideshow.setdefault("slide_type", "subslide")
        if cell.cell_type == "markdown":
            cell.source = IMAGE_LINK_RE.sub("](images/", cell.source)
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                output["data"] = {"text/html": _widget_still(view["model_id"], state), "text/plain": ""}
    return notebook


def count_slides(notebook):
    """How many slides reveal.js shows for `notebook` (slide and sub-slide cells)."""
    return sum(cell.metadata.get("slideshow", {}).get("slide_type") in ("slide", "subslide") for cell in notebook.cells)


def exporter(lang):
    return SlidesExporter(
        extra_loaders=[DictLoader({"course_slides.html.j2": TEMPLATE})],
        template_file="course_slides.html.j2",
        reveal_url_prefix="../assets/reveal.js",
        reveal_theme="white",
        reveal_scroll=True,  # long slides scroll rather than spill off the projector
        mathjax_url="../assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url="../assets/requirejs/require.js",
        jquery_url="../assets/jquery/dist/jquery.min.js",
        embed_images=True,  # the lessons' diagrams go into the HTML: a deck needs no images/ folder
        language_code=HTML_LANG[lang],  # <html lang="zh">: the browser picks a Chinese font
    )


def build_deck(lesson_path, lang, decks=DECKS):
    """Write one deck into `decks`/lang/; return (its path, its number of slides, its size in bytes)."""
    source = NOTEBOOKS / "solutions" / lang / lesson_path.with_suffix(".ipynb").name
    if not source.exists():
        raise SystemExit(f"slides: {source.relative_to(ROOT)} is missing: run `make notebooks`")
    notebook = slide_notebook(nbformat.read(source, as_version=4))
    body, _ = exporter(lang).from_notebook_node(
        notebook, resources={"metadata": {"path": str(ROOT), "name": source.stem}}
    )
    target = decks / lang / f"{source.stem}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target, count_slides(notebook), len(body.encode())


def _shown(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def build(only=None, langs=LANGUAGES, decks=DECKS):
    """Write the decks (every lesson, or one) and their assets; print each deck's slides and size."""
    decks = Path(decks).resolve()
    copy_assets(decks / "assets")
    for lesson_path in lessons(only).values():
        for lang in langs:
            start = time.perf_counter()
            path, slides, size = build_deck(lesson_path, lang, decks)
            print(
                f"{_shown(path)}: {slides} slides, {size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s",
                flush=True,
            )
    assets = sum(f.stat().st_size for f in (decks / "assets").rglob("*") if f.is_file())
    print(f"{_shown(decks / 'assets')}: {assets / 1e6:.1f} MB (shared by every deck)")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_utils.slides", description=__doc__.split("\n")[0])
    parser.add_argument("--only", metavar="NN", help="just lesson NN (e.g. 01)")
    parser.add_argument("--lang", choices=LANGUAGES, help="just one language")
    parser.add_argument("--out", metavar="DIR", default=DECKS, help="where the decks go (default: slides/decks)")
    args = parser.parse_args(argv)
    return build(args.only, (args.lang,) if args.lang else LANGUAGES, args.out)


if __name__ == "__main__":
    sys.exit(main())
