"""The lecture decks (`make slides`, course_teacher/slides/) fit the screen, carry speaker notes and
work with no network; the handouts (`make handout`) keep the solutions from the students.

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
  and none of the English labels), holds no TeX (the speaker view has no MathJax: the notes' math
  is HTML), and on an exercise's slide names every mistake its check names.

Slides that cannot fit would be listed in OVERSIZED_SLIDES, and the test checks that the slides
that do not fit are exactly those. Besides:

- the dark theme: built with ``--theme dark`` it goes to a folder of its own (dark/) and leaves the
  light decks as they were; it and ``?theme=dark`` both show dark (lesson 01);
- the hall size (``--size hall``, lesson 08, hall/): every code and output at 24 px or more, every
  slide fitting 1280×720;
- the speaker view (lesson 01) shows a note's math as HTML;
- the students' decks, every lesson's, built from the student notebooks, hold no solution marker
  and no line of any exercise's solution (which the lecturer's decks do hold) and no notes;
- the handouts (two decks, see PRINTED): the lecturer's has a 16:9 page a slide, each labelled as
  the lecturer's copy, with the solutions; the students' four slides to an A4 page, and neither
  the label nor a solution in its text (read from the PDF itself, a check of its own proving that
  the reading finds what is there).

The browser libraries come from ``slides/node_modules/`` (``npm ci --prefix slides``, which the
test runs when they are missing; it needs the npm registry). Without the browser or npm the test
is skipped, except under ``CI=true``, where it fails.
"""

import io
import math
import os
import re
import shutil
import subprocess
import sys
import time
from html import unescape
from pathlib import Path

import nbformat
import pytest
from pypdf import PdfReader

from course_teacher.exercises import EXERCISES
from course_teacher import glossary, slides
from course_teacher.build import BEGIN, END, lessons, notebook_name
from course_teacher.slides import handout, outputs, texhtml

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
LESSONS = {path.stem: path for path in lessons(None).values()}
STEMS = {stem[:2]: stem for stem in LESSONS}  # "01": "01_attention_basics"
DECKS = [(lang, stem) for stem in LESSONS for lang in slides.LANGUAGES]


def _file(lang, stem, suffix):
    """A lesson's notebook, deck or handout in `lang`, named as its notebook is there (01_注意力基础.html in zh)."""
    return Path(notebook_name(LESSONS[stem], lang)).with_suffix(suffix).name
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
#: TeX as the speaker would see it raw: $...$ math or a \command
RAW_TEX = re.compile(r"\$[^$]+\$|\\[A-Za-z]+")
HALL_PX = 24  # the hall's smallest code and output
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
    if slides.missing_packages():
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


def _build_more(decks, *args):
    """Build more decks into `decks` with the command line's `args` (in this process: the `decks`
    fixture runs the command itself); return the bytes of the light normal decks before and after
    (a build for another theme or size must leave them alone)."""
    light = sorted(decks.glob("[a-z][a-z]/*.html"))
    before = {path: path.read_bytes() for path in light}
    assert slides.main(["--out", str(decks), *args]) == 0
    return before, {path: path.read_bytes() for path in light}


@pytest.fixture(scope="module")
def dark_decks(decks):
    """Lesson 01 built with --theme dark, beside the light decks."""
    return slides.deck_folder(decks, "dark"), _build_more(decks, "--only", "01", "--theme", "dark")


@pytest.fixture(scope="module")
def hall_decks(decks):
    """Lesson 08 (the most code) built with --size hall, beside the light decks."""
    return slides.deck_folder(decks, size="hall"), _build_more(decks, "--only", "08", "--size", "hall")


@pytest.fixture(scope="module")
def student_decks(decks):
    """Every lesson's student decks, both languages, where `--handout` writes them."""
    folder = slides.handout_folder(decks) / "student"
    slides.build_decks(None, slides.LANGUAGES, folder, decks / "assets", student=True)
    return folder


def _prepared(lang, stem, sizes=slides.SIZES["normal"], student=False):
    notebooks = ROOT / "notebooks" if student else ROOT / "notebooks/solutions"
    notebook = nbformat.read(notebooks / lang / _file(lang, stem, ".ipynb"), as_version=4)
    return slides.slide_notebook(notebook, lang, sizes, notes=not student)


def test_decks_name_no_cdn(decks, dark_decks, hall_decks, student_decks):
    written = [path for path in decks.rglob("*") if path.is_file()]
    assert {f"{lang}/{_file(lang, stem, '.html')}" for lang, stem in DECKS} <= {path.relative_to(decks).as_posix() for path in written}
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
    # a cell opening with a ### subsection starts a sub-slide (its heading without the glossary's anchor)
    details = [
        glossary.plain(cell.source).split("\n")[0]
        for cell in notebook.cells
        if cell.cell_type == "markdown" and cell.source.startswith("### ") and "slideshow" not in cell.metadata
    ]
    subslides = {
        cell.source.split("\n")[0]
        for cell in prepared.cells
        if cell.metadata["slideshow"].get("slide_type") == "subslide"
    }
    assert details and set(details) <= subslides
    # a deck has no glossary beside it: no glossary link and no section anchor on a slide or in the notes
    assert any("glossary.md#" in cell.source for cell in notebook.cells)
    assert not any("glossary.md" in cell.source or "<a id=" in cell.source for cell in prepared.cells)
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
    for size, smallest in (("normal", 12), ("hall", HALL_PX)):
        markup, height, trimmed = outputs.fit_text_output(wide_and_long, 400, lang, slides.SIZES[size])
        assert trimmed and height <= 400
        assert "…" in markup and markup.count("\n") < 30
        assert int(re.search(r"font-size:(\d+)px", markup).group(1)) >= smallest
        short = outputs.fit_text_output("tensor([1., 2.])", 400, lang, slides.SIZES[size])
        assert not short[2] and "…" not in short[0]


def test_notes_math_set_as_html():
    """The TeX the notes hold becomes HTML, every formula of every lesson (strictly: a command with
    no HTML fails here), and the code in a note keeps its dollars."""
    assert texhtml.tex_to_html(r"(E_q, H \cdot d_k)") == (
        "(<i>E</i><sub><i>q</i></sub>,\u2009<i>H</i> · <i>d</i><sub><i>k</i></sub>)"
    )
    assert texhtml.tex_to_html(r"-1 - x") == "−1 − <i>x</i>"  # a sign, then a binary minus
    assert texhtml.tex_to_html(r"\sqrt{d_k}").startswith("√<span style=\"text-decoration:overline\">")
    assert "inline-table" in texhtml.tex_to_html(r"\begin{pmatrix}0 & 1\\ -1 & 0\end{pmatrix}")
    assert texhtml.tex_to_html(r"\mathrm{softmax}(s)_j") == "softmax(<i>s</i>)<sub><i>j</i></sub>"
    with pytest.raises(texhtml.UnknownCommand):
        texhtml.tex_to_html(r"\nosuchcommand x", strict=True)
    note = "<p>cost $L \\times L$, in code <code>x$1 + y$</code></p>"
    assert texhtml.notes_math(note) == "<p>cost <i>L</i> × <i>L</i>, in code <code>x$1 + y$</code></p>"
    count = 0
    for path in sorted((ROOT / "notebooks/solutions").glob("*/[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for match in texhtml.MATH_RE.finditer(cell.source if cell.cell_type == "markdown" else ""):
                assert not RAW_TEX.search(texhtml.tex_to_html(match.group(1) or match.group(2), strict=True))
                count += 1
    assert count > 1000


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
        elif RAW_TEX.search(notes):
            problems.append(f"{where}: TeX in the notes: {RAW_TEX.search(notes).group(0)!r}")
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
    deck = decks / lang / _file(lang, stem, ".html")
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


def _brightness(colour):
    red, green, blue = map(int, re.findall(r"\d+", colour)[:3])
    return (red + green + blue) / 3


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_dark_theme_in_its_own_folder(decks, dark_decks, chromium, lang):
    """`--theme dark` writes dark/{en,zh}/ and leaves the light decks alone; the dark deck opens
    dark, and so does a light one with ?theme=dark."""
    folder, (before, after) = dark_decks
    assert folder == decks / "dark" and before == after and before
    for url in ((folder / lang / _file(lang, STEMS["01"], ".html")).as_uri(),
                (decks / lang / _file(lang, STEMS["01"], ".html")).as_uri() + "?theme=dark"):  # fmt: skip
        browser = Offline(chromium, lang)
        try:
            page = browser.open(url)
            colours = page.evaluate("""() => [getComputedStyle(document.body).backgroundColor,
                getComputedStyle(document.querySelector('.present h1')).color,
                getComputedStyle(document.querySelector('.jp-RenderedHTMLCommon')).color]""")
            measured = page.evaluate(MEASURE_ALL_JS) if "?" not in url else []
        finally:
            browser.close()
        background, heading, text = map(_brightness, colours)
        assert background < 60 and heading > 180 and text > 180, (url, colours)
        problems, oversized = _problems(f"{lang}/01_attention_basics (dark)", lang, measured)
        assert not oversized and not problems, "\n".join(problems[:30])


#: The font sizes of every code block and printed output in a deck, and of an explorer's still.
CODE_FONTS_JS = """() => [...document.querySelectorAll(
    '.reveal .slides pre, .reveal .slides pre *, .reveal .course-widget, .reveal .course-controls')]
  .map(element => parseFloat(getComputedStyle(element).fontSize))"""


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_hall_size(decks, hall_decks, chromium, lang):
    """`--size hall` writes hall/{en,zh}/ (the light decks left alone): code and output at 24 px or
    more, and every slide still within 1280×720 (lesson 08, the most code of any lesson)."""
    folder, (before, after) = hall_decks
    assert folder == decks / "hall" and before == after and before
    stem = STEMS["08"]
    expected_slides = slides.count_slides(_prepared(lang, stem, slides.SIZES["hall"]))
    assert expected_slides > slides.count_slides(_prepared(lang, stem))  # the hall's slides hold less
    browser = Offline(chromium, lang)
    try:
        page = browser.open((folder / lang / _file(lang, stem, ".html")).as_uri())
        fonts = page.evaluate(CODE_FONTS_JS)
        measured = page.evaluate(MEASURE_ALL_JS)
    finally:
        browser.close()
    assert len(measured) == expected_slides
    assert len(fonts) > 100 and min(fonts) >= HALL_PX, f"code or output below {HALL_PX} px: {sorted(fonts)[:10]}"
    problems, oversized = _problems(f"hall/{lang}/{stem}", lang, measured)
    assert not oversized and not problems, "\n".join(problems[:30])
    print(f"hall/{lang}/{stem}: {len(measured)} slides, tallest {max(slide['height'] for slide in measured)} px")


def test_speaker_view_shows_math_as_html(decks, chromium):
    """What the speaker sees: reveal.js's speaker view (its own window, no MathJax) shows a slide's
    notes, their math as HTML, with no TeX left."""
    browser = Offline(chromium, "en")
    try:
        page = browser.open((decks / "en" / f"{STEMS['01']}.html").as_uri())
        page.evaluate("""() => { const slide = Reveal.getSlides().find(s => s.querySelector('aside.notes sub'));
                                 const { h, v } = Reveal.getIndices(slide); Reveal.slide(h, v); }""")
        with browser.context.expect_page() as opened:
            page.evaluate("() => Reveal.getPlugin('notes').open()")
        speaker = opened.value
        notes = speaker.locator(".speaker-controls-notes .value")
        speaker.wait_for_function(
            "() => document.querySelector('.speaker-controls-notes .value').innerHTML.includes('<sub>')",
            timeout=READY_MS,
        )
        shown = notes.inner_text()
    finally:
        browser.close()
    assert shown.startswith("Say:") and not RAW_TEX.search(shown), shown[:300]


def _solution_lines(lang, stem):
    """The lines of the lesson's solutions that say something (over 12 characters), each with its
    spaces taken out: the exercise cells' code between the solution markers."""
    notebook = nbformat.read(ROOT / "notebooks/solutions" / lang / _file(lang, stem, ".ipynb"), as_version=4)
    lines = set()
    for cell in notebook.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata:
            solution = cell.source.split(BEGIN, 1)[1].split(END, 1)[0]
            lines |= {re.sub(r"\s", "", line) for line in solution.splitlines() if len(line.strip()) > 12}
    return lines


def _shown_text(deck_html):
    """What a deck shows, without its spaces: its HTML less scripts, styles and tags."""
    body = re.sub(r"<(script|style)\b.*?</\1>", "", deck_html, flags=re.DOTALL)
    return re.sub(r"\s", "", unescape(re.sub(r"<[^>]+>", "", body)))


def _leaks(text, lang, stem):
    """The solution markers and solution lines found in `text` (spaces taken out)."""
    markers = [marker for marker in (BEGIN, END) if re.sub(r"\s", "", marker) in text]
    return markers + sorted(line for line in _solution_lines(lang, stem) if line in text)


@pytest.mark.parametrize("lang", slides.LANGUAGES)
def test_student_decks_hold_no_solution(decks, student_decks, lang):
    """The students' decks (the student handout is printed from them) have each exercise's stub
    and no line of its solution, no solution marker, no notes and no lecturer's label; the
    lecturer's have the label (in the deck's language) and the lines, so the search finds them
    where they are."""
    with_exercises = 0
    for stem in LESSONS:
        student = (student_decks / lang / _file(lang, stem, ".html")).read_text(encoding="utf-8")
        assert BEGIN not in student and END not in student and 'class="notes' not in student, stem
        assert "--course-copy:" not in student, stem
        lecturer_html = (decks / lang / _file(lang, stem, ".html")).read_text(encoding="utf-8")
        assert f'--course-copy: "{slides.LECTURER_COPY[lang]}"' in lecturer_html, stem
        leaks = _leaks(_shown_text(student), lang, stem)
        assert not leaks, f"{lang}/{stem}: {leaks}"
        solutions = _solution_lines(lang, stem)
        if solutions:
            with_exercises += 1
            assert "raiseNotImplementedError" in _shown_text(student), stem
            lecturer = _shown_text(lecturer_html)
            assert set(_leaks(lecturer, lang, stem)) >= solutions, f"{lang}/{stem}: solution lines not found"
    assert with_exercises, "no lesson has an exercise: the search has proved nothing"


def pdf_pages_text(data):
    """The text of each page of a PDF, in the file's order (pypdf reads Chromium's fonts' ToUnicode
    maps, so Chinese comes back as Chinese)."""
    return [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]


#: The decks the handout test prints: the longest deck in one language, the lecturer's handout, and
#: the last in the other, the students'. Printing is the same code for every deck, and every deck's
#: slides are measured at the screen's size above; printing all of them took 75 s of `make test`'s
#: 2 cores for nothing more.
PRINTED = {"lecturer": ("en", STEMS["05"]), "student": ("zh", max(LESSONS))}


def test_handouts(decks, student_decks, chromium, tmp_path):
    """`make handout`'s printing. The lecturer's: one 16:9 page a slide, every page labelled as the
    lecturer's copy, the solutions in it. The students': four slides to an A4 landscape page, no
    label, no solution (in the text of the PDF itself)."""
    failures, counts = [], []
    for kind, (lang, stem) in PRINTED.items():
        deck = (decks if kind == "lecturer" else student_decks) / lang / _file(lang, stem, ".html")
        per_sheet = 1 if kind == "lecturer" else 4
        pdf = tmp_path / kind / lang / f"{stem}.pdf"
        pages, overflowing = handout.print_deck(chromium, deck, pdf, per_sheet)
        slide_count = slides.count_slides(_prepared(lang, stem, student=kind == "student"))
        data = pdf.read_bytes()
        boxes = {tuple(map(float, box)) for box in re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", data)}
        texts = pdf_pages_text(data)
        text = re.sub(r"\s", "", "".join(texts))
        label = slides.LECTURER_COPY[lang]
        counts.append(f"{kind} {lang}/{stem}: {pages} pages")
        if overflowing:
            failures.append(f"{kind} {lang}/{stem}: slides taller or wider than their page: {overflowing}")
        if len(texts) != pages or pages != math.ceil(slide_count / per_sheet):
            failures.append(f"{kind} {lang}/{stem}: {pages} pages ({len(texts)} read) for {slide_count} slides")
        if kind == "lecturer":
            if not boxes or any(abs(width / height - 16 / 9) > 0.01 for width, height in boxes):
                failures.append(f"lecturer {lang}/{stem}: pages not 16:9: {boxes}")
            if not all(re.sub(r"\s", "", label) in re.sub(r"\s", "", page) for page in texts):
                failures.append(f"lecturer {lang}/{stem}: pages without {label!r}")
            if set(_leaks(text, lang, stem)) < _solution_lines(lang, stem) or not _solution_lines(lang, stem):
                failures.append(f"lecturer {lang}/{stem}: the solutions are not in the PDF's text as read")
        else:
            if not boxes or any(abs(width - 841.89) > 1 or abs(height - 595.28) > 1 for width, height in boxes):
                failures.append(f"student {lang}/{stem}: pages not A4 landscape: {boxes}")
            if any(re.sub(r"\s", "", label) in re.sub(r"\s", "", page) for page in texts):
                failures.append(f"student {lang}/{stem}: labelled as the lecturer's copy")
            if _leaks(text, lang, stem) or "raiseNotImplementedError" not in text:
                failures.append(f"student {lang}/{stem}: solutions in it, or no stub: {_leaks(text, lang, stem)}")
    print("handouts: " + ", ".join(counts))
    assert not failures, "\n".join(failures)


def test_page_counter_counts_pages():
    two = b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] >>\n2 0 obj << /Type /Page >>\n3 0 obj <</Type/Page/Parent 1 0 R>>"
    assert handout.count_pages(two) == 2
