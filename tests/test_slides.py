"""The lecture decks (`make slides`, course_utils/slides.py) work with no network.

Builds lesson 01's decks, English and Chinese, into a temporary folder; checks that no written
file names a CDN; then opens each deck from file:// in headless Chromium (Debian's
``/usr/bin/chromium``, driven by playwright) with every http(s) request aborted and recorded, and
checks that reveal.js starts, shows as many slides as the notebook has slide and sub-slide cells,
that MathJax typeset the math, that the Chinese deck shows Chinese text, and that no request
(file:// included) failed.

The browser libraries come from ``slides/node_modules/`` (``npm ci --prefix slides``, which the
test runs when they are missing; it needs the npm registry). Without the browser or npm the test
is skipped, except under ``CI=true``, where it fails.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_utils import slides

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip
LESSON = "01"
NOTEBOOK = "01_attention_basics"
# Hosts that serve libraries to web pages. A link to a project's home page in a licence comment is
# harmless; a URL to one of these is what a deck would try to fetch.
CDN = re.compile(
    r"https?://[^\s\"'<>)]*(unpkg\.com|jsdelivr\.net|cdnjs\.|cloudflare\.com|googleapis\.com|gstatic\.com|"
    r"code\.jquery\.com|cdn\.|mathjax\.org/mathjax|bootstrapcdn|rawgit|githack)",
    re.IGNORECASE,
)
READY_MS = 30_000
HAN = re.compile(r"[\u4e00-\u9fff]")
MATH_IDLE_JS = "() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"
FIRST_SLIDE_MATH_WIDTH_JS = """() => Math.max(0, ...[...Reveal.getCurrentSlide().querySelectorAll('.MathJax_CHTML')]
    .map(element => element.getBoundingClientRect().width))"""


def _unavailable(message):
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (under CI=true this is a failure)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """Lesson 01's decks in both languages, in a temporary folder (the teacher's slides/decks/ is left alone)."""
    if slides._missing_packages():
        npm = shutil.which("npm")
        if npm is None:
            _unavailable("the slides need reveal.js and MathJax from npm, and npm is not installed")
        command = [npm, "ci", "--prefix", str(slides.SLIDES), "--ignore-scripts", "--no-audit", "--no-fund"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            _unavailable(f"`npm ci --prefix slides` failed (no npm registry?):\n{result.stderr[-2000:]}")
    out = tmp_path_factory.mktemp("decks")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "course_utils.slides", "--only", LESSON, "--out", str(out)], cwd=ROOT, check=True
    )
    print(f"decks for lesson {LESSON} built in {time.perf_counter() - start:.1f} s")
    return out


def test_decks_name_no_cdn(decks):
    written = [path for path in decks.rglob("*") if path.is_file()]
    assert {f"{lang}/{NOTEBOOK}.html" for lang in slides.LANGUAGES} <= {
        path.relative_to(decks).as_posix() for path in written
    }
    found = []
    for path in written:
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{path.relative_to(decks)}: {match.group(0)}" for match in CDN.finditer(text)]
    assert not found, "CDN URLs in the written files:\n" + "\n".join(found[:20])


def test_setup_cell_skipped_and_details_are_subslides():
    notebook = nbformat.read(ROOT / "notebooks/solutions/en" / f"{NOTEBOOK}.ipynb", as_version=4)
    prepared = slides.slide_notebook(notebook)
    kinds = [cell.metadata["slideshow"].get("slide_type", "-") for cell in prepared.cells]
    setup = [i for i, cell in enumerate(prepared.cells) if 'setup(lang="en")' in cell.source]
    assert setup and all(kinds[i] == "skip" for i in setup)
    assert kinds.count("slide") >= 5 and kinds.count("subslide") >= 1
    assert "widgets" not in prepared.metadata  # no widget manager would be loaded
    assert all(
        slides.WIDGET_VIEW not in output.get("data", {})
        for cell in prepared.cells
        for output in cell.get("outputs", [])
    )


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.exists():
        _unavailable(f"the slides test needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_deck_offline_in_browser(decks, chromium, lang):
    deck = decks / lang / f"{NOTEBOOK}.html"
    notebook = nbformat.read(ROOT / "notebooks/solutions" / lang / f"{NOTEBOOK}.ipynb", as_version=4)
    expected_slides = slides.count_slides(slides.slide_notebook(notebook))
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, locale="zh-CN" if lang == "zh" else "en-US")
    blocked, failed, page_errors = [], [], []

    def block(route):
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^https?://"), block)  # no network: only file:// (and data:) may load
    page = context.new_page()
    page.on("requestfailed", lambda request: failed.append(f"{request.url}: {request.failure}"))
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    try:
        page.goto(deck.as_uri())
        page.wait_for_function("() => window.Reveal && Reveal.isReady && Reveal.isReady()", timeout=READY_MS)
        assert page.evaluate("() => Reveal.getTotalSlides()") == expected_slides
        # MathJax 2 (CommonHTML output) typeset the formulas, none failed, and the first slide's
        # formula (the lesson's plan names sqrt(d_k)) is drawn with a width
        page.wait_for_function(MATH_IDLE_JS, timeout=READY_MS)
        assert page.locator(".MathJax_CHTML").count() > 0, "no math typeset"
        assert page.locator(".MathJax_Error, .mjx-error").count() == 0, "MathJax could not render some math"
        assert page.evaluate(FIRST_SLIDE_MATH_WIDTH_JS) > 0, "the first slide's math is not drawn"
        assert "[Math Processing Error]" not in page.inner_text("body")
        first = page.evaluate("() => Reveal.getCurrentSlide().innerText")
        if lang == "zh":
            assert HAN.search(first), f"no Chinese text on the zh deck's first slide: {first[:200]!r}"
        else:
            assert "Attention" in first
        # walk to the last slide: every slide can be shown
        page.evaluate("() => { const total = Reveal.getTotalSlides(); for (let i = 0; i < total; i++) Reveal.next(); }")
        assert page.evaluate("() => Reveal.isLastSlide()")
        ARTIFACTS.mkdir(exist_ok=True)
        page.evaluate("() => Reveal.slide(0, 0)")
        page.wait_for_function(MATH_IDLE_JS, timeout=READY_MS)  # the deck re-typesets a slide it shows
        page.screenshot(path=ARTIFACTS / f"slides-{LESSON}-{lang}.png")
    finally:
        context.close()
    assert not blocked, "the deck tried the network:\n" + "\n".join(blocked)
    assert not failed, "requests failed:\n" + "\n".join(failed)
    assert not page_errors, "JavaScript errors:\n" + "\n".join(page_errors)
