"""The lecture decks (`make slides`, course_teacher/slides/) fit the screen, carry speaker notes and
work with no network; the handout (`make handout`) prints one page a slide.

Builds every lesson's decks, English and Chinese, once into a temporary folder (the teacher's
slides/decks/ is left alone); checks that no written file names a CDN; then opens each deck from
file:// in headless Chromium (Debian's ``/usr/bin/chromium``, driven by playwright) at 1280×720
with every http(s) request aborted and recorded, and checks that reveal.js starts with as many
slides as the prepared notebook has slide and sub-slide cells, that MathJax typeset the math,
that no request (file:// included) failed, that the title slide fits when the deck opens, and for
EVERY slide:

- its content is no taller than the 720 px slide (nothing to scroll, nothing cut at the bottom);
- no code, output, table, formula or picture is wider than its box or runs off the slide's right
  edge (scrollWidth ≤ clientWidth + 1);
- no heading has its text transformed to capitals (notation such as √d_k stays as written);
- its speaker note is not empty, is in the deck's language (Han characters in the Chinese deck,
  and none of the English labels), and on an exercise's slide names every mistake its check names.

Slides that cannot fit would be listed in OVERSIZED_SLIDES, and the test checks that the slides
that do not fit are exactly those. The dark theme (``?theme=dark``) is checked on lesson 01; the
handout PDF of every deck has as many pages as the deck has slides, each page 16:9.

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

from course_teacher.exercises import EXERCISES
from course_teacher import slides
from course_teacher.build import lessons
from course_teacher.slides import handout, outputs

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
LESSONS = {path.stem: path for path in lessons(None).values()}
DECKS = [(lang, stem) for stem in LESSONS for lang in slides.LANGUAGES]
WIDTH, HEIGHT = slides.SLIDE_WIDTH, slides.SLIDE_HEIGHT
# Hosts that serve libraries to web pages. A link to a project's home page in a licence comment is
# harmless; a URL to one of these is what a deck would try to fetch.
CDN = re.compile(
    r"https?://[^\s\"'<>)]*(unpkg\.com|jsdelivr\.net|cdnjs\.|cloudflare\.com|googleapis\.com|gstatic\.com|"
    r"code\.jquery\.com|cdn\.|mathjax\.org/mathjax|bootstrapcdn|rawgit|githack)",
    re.IGNORECASE,
)
READY_MS = 60_000
HAN = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_LABELS = re.compile(r"\b(Say|Show|Minutes|Ask|Exercise):")
#: Slides the builder cannot make fit at any legible size: (deck, slide title). None today; a slide
#: that stops fitting, or one listed here that fits again, fails the test.
OVERSIZED_SLIDES = set()
MATH_IDLE_JS = "() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"
READY_JS = "() => window.Reveal && Reveal.isReady && Reveal.isReady()"
#: Measures the slide shown: its content's height, what is wider than its box, headings in
#: capitals, its notes, in the slide's own pixels (the deck is scaled to the window).
MEASURE_JS = r"""(slide) => {
  const scale = Reveal.getScale(), box = slide.getBoundingClientRect();
  let bottom = slide.scrollHeight;
  for (const element of slide.querySelectorAll('*')) {
    if (element.closest('aside.notes')) continue;
    const rect = element.getBoundingClientRect();
    if (rect.width || rect.height) bottom = Math.max(bottom, (rect.bottom - box.top) / scale);
  }
  const wide = [];
  for (const element of slide.querySelectorAll(
      'pre, code, table, .highlight, .jp-OutputArea-output, .MJXc-display, img, .course-widget')) {
    const rect = element.getBoundingClientRect(), right = (rect.right - box.left) / scale;
    if (element.scrollWidth > element.clientWidth + 1 || right > WIDTH + 1)
      wide.push(`${element.tagName.toLowerCase()}.${element.className}: scrollWidth ${element.scrollWidth} > `
                + `clientWidth ${element.clientWidth}, right edge ${Math.round(right)}`);
  }
  const headings = [...slide.querySelectorAll('h1, h2, h3, h4, h5, h6')];
  const notes = document.createElement('div');
  notes.innerHTML = Reveal.getSlideNotes(slide) || '';
  return {
    title: headings.length ? headings[0].innerText.trim() : '(no heading)',
    height: Math.ceil(bottom), wide,
    capitals: headings.filter(h => getComputedStyle(h).textTransform !== 'none').map(h => h.innerText),
    notes: notes.innerText.trim(), text: slide.innerText,
  };
}""".replace("WIDTH", str(WIDTH))
#: Shows every slide in turn (reveal.js re-typesets a slide's math when it shows it) and measures it.
MEASURE_ALL_JS = """async () => {
  const measure = MEASURE;
  const results = [];
  for (const slide of Reveal.getSlides()) {
    const { h, v } = Reveal.getIndices(slide);
    Reveal.slide(h, v);
    await new Promise(resolve => MathJax.Hub.Queue(resolve));
    results.push(Object.assign({ index: `${h}.${v}` }, measure(slide)));
  }
  return results;
}""".replace("MEASURE", MEASURE_JS)


def _unavailable(message):
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (under CI=true this is a failure)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """Every lesson's decks in both languages, in a temporary folder."""
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
    subprocess.run([sys.executable, "-m", "course_teacher.slides", "--out", str(out)], cwd=ROOT, check=True)
    print(f"decks built in {time.perf_counter() - start:.1f} s")
    return out


def _prepared(lang, stem):
    notebook = nbformat.read(ROOT / "notebooks/solutions" / lang / f"{stem}.ipynb", as_version=4)
    return slides.slide_notebook(notebook, lang)


def test_decks_name_no_cdn(decks):
    written = [path for path in decks.rglob("*") if path.is_file()]
    assert {f"{lang}/{stem}.html" for lang, stem in DECKS} <= {path.relative_to(decks).as_posix() for path in written}
    found = []
    for path in written:
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{path.relative_to(decks)}: {match.group(0)}" for match in CDN.finditer(text)]
    assert not found, "CDN URLs in the written files:\n" + "\n".join(found[:20])


def test_setup_cell_skipped_details_subslides_and_notes():
    notebook = nbformat.read(ROOT / "notebooks/solutions/en/01_attention_basics.ipynb", as_version=4)
    prepared = slides.slide_notebook(notebook, "en")
    kinds = [cell.metadata["slideshow"].get("slide_type", "-") for cell in prepared.cells]
    assert not any('setup(lang="en")' in cell.source for cell in prepared.cells)  # skipped: not in the deck
    assert kinds.count("slide") >= 5 and kinds.count("subslide") >= 1
    # a cell opening with a ### subsection starts a sub-slide
    details = [
        cell.source.split("\n")[0]
        for cell in notebook.cells
        if cell.cell_type == "markdown" and cell.source.startswith("### ") and "slideshow" not in cell.metadata
    ]
    subslides = {
        cell.source.split("\n")[0]
        for cell in prepared.cells
        if cell.metadata["slideshow"].get("slide_type") == "subslide"
    }
    assert details and set(details) <= subslides
    # every slide ends with its notes; the prose is in the notes, not on the slide
    starts = [i for i, kind in enumerate(kinds) if kind in ("slide", "subslide")]
    for start, end in zip(starts, starts[1:] + [len(kinds)]):
        assert kinds[start:end].count("notes") == 1, prepared.cells[start].source[:80]
    prose = "Attention lets a model decide, for every position it computes"
    assert any(prose in cell.source for cell in prepared.cells if cell.metadata["slideshow"]["slide_type"] == "notes")
    assert not any(
        prose in cell.source for cell in prepared.cells if cell.metadata["slideshow"]["slide_type"] != "notes"
    )
    assert "widgets" not in prepared.metadata  # no widget manager would be loaded
    assert all(
        slides.WIDGET_VIEW not in output.get("data", {})
        for cell in prepared.cells
        for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_long_output_trimmed_with_marker(lang):
    wide_and_long = "\n".join(f"{i:3d} " + "x" * 300 for i in range(80))
    markup, height, trimmed = outputs._fit_text_output(wide_and_long, 400, lang)
    assert trimmed and height <= 400
    assert "…" in markup and markup.count("\n") < 30
    assert re.search(r"font-size:(\d+)px", markup) and int(re.search(r"font-size:(\d+)px", markup).group(1)) >= 12
    short = outputs._fit_text_output("tensor([1., 2.])", 400, lang)
    assert not short[2] and "…" not in short[0]


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.exists():
        _unavailable(f"the slides test needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = handout.launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


class Offline:
    """A page in a context with no network: http(s) requests are aborted and recorded."""

    def __init__(self, browser, lang):
        locale = "zh-CN" if lang == "zh" else "en-US"
        self.context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale=locale)
        self.blocked, self.failed, self.errors = [], [], []
        self.context.route(re.compile(r"^https?://"), self._block)
        self.page = self.context.new_page()
        self.page.on("requestfailed", lambda request: self.failed.append(f"{request.url}: {request.failure}"))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _block(self, route):
        self.blocked.append(route.request.url)
        route.abort()

    def open(self, url):
        self.page.goto(url)
        self.page.wait_for_function(READY_JS, timeout=READY_MS)
        self.page.wait_for_function(MATH_IDLE_JS, timeout=READY_MS)
        return self.page

    def close(self):
        self.context.close()
        assert not self.blocked, "the deck tried the network:\n" + "\n".join(self.blocked)
        assert not self.failed, "requests failed:\n" + "\n".join(self.failed)
        assert not self.errors, "JavaScript errors:\n" + "\n".join(self.errors)


def _problems(deck_name, lang, measured):
    """Everything wrong with the measured slides, and the set of slides that do not fit."""
    problems, oversized = [], set()
    for slide in measured:
        where = f"{deck_name} slide {slide['index']} {slide['title']!r}"
        if slide["height"] > HEIGHT:
            oversized.add((deck_name, slide["title"]))
            problems.append(f"{where}: {slide['height']} px tall > {HEIGHT}")
        problems += [f"{where}: too wide: {element}" for element in slide["wide"]]
        problems += [f"{where}: heading in capitals: {heading!r}" for heading in slide["capitals"]]
        notes = slide["notes"]
        if not notes:
            problems.append(f"{where}: no speaker notes")
        elif lang == "zh" and (not HAN.search(notes) or ENGLISH_LABELS.search(notes)):
            problems.append(f"{where}: notes not in Chinese: {notes[:120]!r}")
        elif lang == "en" and not re.search(r"\bMinutes: about [\d.]+ min", notes):
            problems.append(f"{where}: notes without the minutes: {notes[:120]!r}")
        for exercise_id in re.findall(r'check\("([^"]+)"', slide["text"]):
            missing = [m.code for m in EXERCISES[exercise_id].mistakes if m.code not in notes]
            if missing or not re.search(r"\b(Ask|提问)", notes):
                problems.append(f"{where}: the notes of exercise {exercise_id} lack the question or {missing}")
    return problems, oversized


@pytest.mark.parametrize(("lang", "stem"), DECKS, ids=[f"{lang}-{stem[:2]}" for lang, stem in DECKS])
def test_deck_fits_the_screen_in_browser(decks, chromium, lang, stem):
    deck = decks / lang / f"{stem}.html"
    expected_slides = slides.count_slides(_prepared(lang, stem))
    browser = Offline(chromium, lang)
    try:
        page = browser.open(deck.as_uri())
        assert page.evaluate("() => Reveal.getTotalSlides()") == expected_slides
        # MathJax 2 (CommonHTML output) typeset the formulas and none failed
        assert page.locator(".MathJax_CHTML").count() > 0, "no math typeset"
        assert page.locator(".MathJax_Error, .mjx-error").count() == 0, "MathJax could not render some math"
        assert "[Math Processing Error]" not in page.inner_text("body")
        # the title slide fits as the deck opens: its heading and its last line inside the window
        first = page.evaluate(f"() => ({MEASURE_JS})(Reveal.getCurrentSlide())")
        title_box = page.locator(".present h1").first.bounding_box()
        assert first["height"] <= HEIGHT and title_box and title_box["y"] >= 0, first
        assert HAN.search(first["text"]) if lang == "zh" else re.search(r"[A-Za-z]{4}", first["text"])
        measured = page.evaluate(MEASURE_ALL_JS)
        assert len(measured) == expected_slides
        if stem.startswith("01"):
            ARTIFACTS.mkdir(exist_ok=True)
            page.evaluate("() => Reveal.slide(0, 0)")
            page.wait_for_function(MATH_IDLE_JS, timeout=READY_MS)
            page.screenshot(path=ARTIFACTS / f"slides-01-{lang}.png")
    finally:
        browser.close()
    problems, oversized = _problems(f"{lang}/{stem}", lang, measured)
    expected = {slide for slide in OVERSIZED_SLIDES if slide[0] == f"{lang}/{stem}"}
    assert oversized == expected, f"slides that do not fit: {sorted(oversized)}, expected {sorted(expected)}"
    problems = [p for p in problems if not any(p.startswith(f"{d} ") and repr(t) in p for d, t in expected)]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    heights = [slide["height"] for slide in measured]
    print(
        f"{lang}/{stem}: {len(measured)} slides, tallest {max(heights)} px, {sum(bool(s['notes']) for s in measured)} with notes"
    )


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_dark_theme(decks, chromium, lang):
    deck = decks / lang / "01_attention_basics.html"
    browser = Offline(chromium, lang)
    try:
        page = browser.open(deck.as_uri() + "?theme=dark")
        colours = page.evaluate("""() => [getComputedStyle(document.body).backgroundColor,
            getComputedStyle(document.querySelector('.present h1')).color,
            getComputedStyle(document.querySelector('.jp-RenderedHTMLCommon')).color]""")
        measured = page.evaluate(MEASURE_ALL_JS)
    finally:
        browser.close()

    def brightness(colour):
        red, green, blue = map(int, re.findall(r"\d+", colour)[:3])
        return (red + green + blue) / 3

    background, heading, text = colours
    assert brightness(background) < 60 and brightness(heading) > 180 and brightness(text) > 180, colours
    problems, oversized = _problems(f"{lang}/01_attention_basics (dark)", lang, measured)
    assert not oversized and not problems, "\n".join(problems[:30])


#: The decks the handout test prints: the longest deck in one language and the last in the other.
#: Printing is the same code for every deck, and every deck's slides are measured at the screen's
#: size above; printing all of them took 75 s of `make test`'s 2 cores for nothing more.
PRINTED = [(lang, stem) for lang, stem in DECKS if (lang, stem[:2]) in (("en", "05"), ("zh", max(LESSONS)[:2]))]


def test_handout_one_page_per_slide(decks, chromium, tmp_path):
    """`make handout`'s printing: one 16:9 page a slide, no blank page (two decks, see PRINTED)."""
    assert len(PRINTED) == 2
    failures, counts = [], []
    for lang, stem in PRINTED:
        expected = slides.count_slides(_prepared(lang, stem))
        pdf = tmp_path / lang / f"{stem}.pdf"
        pages, overflowing = handout.print_deck(chromium, decks / lang / f"{stem}.html", pdf)
        if overflowing:
            failures.append(f"{lang}/{stem}: slides taller or wider than their page: {overflowing}")
        data = pdf.read_bytes()
        boxes = {tuple(map(float, box)) for box in re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", data)}
        counts.append(f"{lang}/{stem}: {pages}")
        if pages != expected:
            failures.append(f"{lang}/{stem}: {pages} pages for {expected} slides")
        if not boxes or any(abs(width / height - 16 / 9) > 0.01 for width, height in boxes):
            failures.append(f"{lang}/{stem}: pages not 16:9: {boxes}")
    print("handout pages: " + ", ".join(counts))
    assert not failures, "\n".join(failures)


def test_page_counter_counts_pages():
    two = b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] >>\n2 0 obj << /Type /Page >>\n3 0 obj <</Type/Page/Parent 1 0 R>>"
    assert handout.count_pages(two) == 2
