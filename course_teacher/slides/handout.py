"""The PDF handouts, each deck printed by Chromium (through playwright) in reveal.js's print
layout, `?print-pdf`: in the light theme, without the notes, and one of two ways:

- the lecturer's: the solution deck, one 16:9 page a slide, every page labelled at its top as the
  lecturer's copy with the solutions (the deck's style sheet sets the label: template.py);
- the students': the student deck (from the student notebooks: exercise stubs, no solution), four
  slides to an A4 landscape page, 2 × 2 (SHEET), with no notes: a slide's text prints at about
  7 pt and its code at 4 to 5 pt, still read on paper; six to a page would take the code to 3 pt.
"""

import re
import time
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip
READY_MS = 60_000
PAGE_RE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
#: reveal.js has laid the print pages out and MathJax has typeset every formula
PRINT_READY_JS = """() => window.Reveal && Reveal.isReady() && document.querySelectorAll('.pdf-page').length > 0
    && window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"""


#: the print pages whose slide is taller or wider than the page (reveal.js would cut it)
OVERFLOWING_JS = """() => [...document.querySelectorAll('.pdf-page')].map((page, index) => {
    const slide = page.querySelector('section'), config = Reveal.getConfig();
    return slide && (slide.scrollHeight > config.height + 1 || slide.scrollWidth > config.width + 1) ? index : null;
  }).filter(index => index !== null)"""

#: The students' sheet: an A4 page, landscape, in mm, with `columns` × `rows` slides on it.
SHEET = {"width": 297, "height": 210, "margin": 8, "gap": 5, "columns": 2, "rows": 2}

#: Gathers reveal.js's print pages (one a slide) onto sheets of columns × rows, each scaled down
#: with CSS zoom (its text stays text), framed, with the deck's title and the sheet's number above.
SHEETS_JS = """(sheet) => {
  const mm = 96 / 25.4, pages = [...document.querySelectorAll('.pdf-page')];
  const width = parseFloat(document.body.style.width), height = parseFloat(document.body.style.height);
  const cell = (sheet.width - 2 * sheet.margin - (sheet.columns - 1) * sheet.gap) / sheet.columns;
  const zoom = Math.min(cell * mm / width, (sheet.height - 2 * sheet.margin - 8 - sheet.rows * sheet.gap) * mm
                        / sheet.rows / height);
  const style = document.createElement('style');
  style.textContent = `
    @page { size: ${sheet.width}mm ${sheet.height}mm; margin: 0; }
    html.print-pdf body { width: ${sheet.width}mm !important; height: auto !important; }
    .course-sheet { box-sizing: border-box; width: ${sheet.width}mm; height: ${sheet.height}mm; overflow: hidden;
      padding: ${sheet.margin}mm; display: grid; grid-template-columns: repeat(${sheet.columns}, 1fr);
      grid-template-rows: 8mm repeat(${sheet.rows}, auto); gap: ${sheet.gap}mm; align-content: start;
      justify-items: center; break-after: page; }
    .course-sheet:last-child { break-after: auto; }
    .course-sheet > header { grid-column: 1 / -1; display: flex; justify-content: space-between; width: 100%;
      font: 11pt sans-serif; color: #444; border-bottom: 0.3mm solid #999; }
    html.print-pdf .reveal .slides .course-sheet .pdf-page { zoom: ${zoom}; width: ${width}px; outline: 3px solid #999;
      break-after: auto !important; page-break-after: auto !important; }`;
  document.head.appendChild(style);
  const title = (document.querySelector('.pdf-page h1') || document.querySelector('.pdf-page h2') || {}).innerText
    || document.title;
  const container = pages[0].parentNode, perSheet = sheet.columns * sheet.rows;
  const count = Math.ceil(pages.length / perSheet);
  for (let index = 0; index < count; index++) {
    const element = document.createElement('div'), header = document.createElement('header');
    element.className = 'course-sheet';
    header.innerHTML = `<span></span><span>${index + 1} / ${count}</span>`;
    header.firstChild.textContent = title;
    element.appendChild(header);
    pages.slice(index * perSheet, (index + 1) * perSheet).forEach(page => element.appendChild(page));
    container.appendChild(element);
  }
}"""


def count_pages(pdf_bytes):
    """The number of pages of a PDF, from its page objects (Chromium writes them uncompressed)."""
    return len(PAGE_RE.findall(pdf_bytes))


def launch(playwright):
    kwargs = {"executable_path": str(CHROMIUM)} if CHROMIUM.exists() else {}
    return playwright.chromium.launch(headless=True, args=CHROMIUM_ARGS, **kwargs)


def print_deck(browser, deck, target, per_sheet=1):
    """Print `deck` (an HTML file) to the PDF `target`: one slide a page, or with `per_sheet` 4 four
    slides to an A4 sheet (SHEET). Return its number of pages and the slides (their index) that do
    not fit their page."""
    assert per_sheet in (1, SHEET["columns"] * SHEET["rows"]), per_sheet
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline, as in the lecture room
    page = context.new_page()
    try:
        page.goto(deck.as_uri() + "?print-pdf")
        page.wait_for_function(PRINT_READY_JS, timeout=READY_MS)
        page.wait_for_timeout(300)  # reveal.js sizes the pages once the fonts are in
        page.wait_for_function(PRINT_READY_JS, timeout=READY_MS)
        overflowing = page.evaluate(OVERFLOWING_JS)
        if per_sheet > 1:
            page.evaluate(SHEETS_JS, SHEET)
        target.parent.mkdir(parents=True, exist_ok=True)
        pdf = page.pdf(path=str(target), prefer_css_page_size=True, print_background=True)
    finally:
        context.close()
    return count_pages(pdf), overflowing


def print_handouts(decks, root, handouts, per_sheet=1):
    """Print every deck in `decks` (paths under `root`) to `handouts`/lang/NN_slug.pdf."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            for deck in decks:
                start = time.perf_counter()
                target = handouts / deck.relative_to(root).with_suffix(".pdf")
                pages, overflowing = print_deck(browser, deck, target, per_sheet)
                cut = f", slides cut off: {[index + 1 for index in overflowing]}" if overflowing else ""
                print(f"{target}: {pages} pages{cut}, {time.perf_counter() - start:.1f} s", flush=True)
        finally:
            browser.close()
