"""The PDF handout: each deck printed by Chromium (through playwright) in reveal.js's print
layout, `?print-pdf`: one 16:9 page a slide, in the light theme, without the notes."""

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


def count_pages(pdf_bytes):
    """The number of pages of a PDF, from its page objects (Chromium writes them uncompressed)."""
    return len(PAGE_RE.findall(pdf_bytes))


def launch(playwright):
    kwargs = {"executable_path": str(CHROMIUM)} if CHROMIUM.exists() else {}
    return playwright.chromium.launch(headless=True, args=CHROMIUM_ARGS, **kwargs)


def print_deck(browser, deck, target):
    """Print `deck` (an HTML file) to the PDF `target`; return its number of pages and the pages
    whose slide does not fit the page."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline, as in the lecture room
    page = context.new_page()
    try:
        page.goto(deck.as_uri() + "?print-pdf")
        page.wait_for_function(PRINT_READY_JS, timeout=READY_MS)
        page.wait_for_timeout(300)  # reveal.js sizes the pages once the fonts are in
        page.wait_for_function(PRINT_READY_JS, timeout=READY_MS)
        overflowing = page.evaluate(OVERFLOWING_JS)
        target.parent.mkdir(parents=True, exist_ok=True)
        pdf = page.pdf(path=str(target), prefer_css_page_size=True, print_background=True)
    finally:
        context.close()
    return count_pages(pdf), overflowing


def print_handouts(decks, root, handouts):
    """Print every deck in `decks` (paths under `root`) to `handouts`/lang/NN_slug.pdf."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            for deck in decks:
                start = time.perf_counter()
                target = handouts / deck.relative_to(root).with_suffix(".pdf")
                pages, overflowing = print_deck(browser, deck, target)
                cut = f", pages cut off: {[index + 1 for index in overflowing]}" if overflowing else ""
                print(f"{target}: {pages} pages{cut}, {time.perf_counter() - start:.1f} s", flush=True)
        finally:
            browser.close()
