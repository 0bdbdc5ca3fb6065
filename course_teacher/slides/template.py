"""The deck's HTML: nbconvert's reveal template with a 1280×720 layout, the course's style sheet
(in the normal sizes or the hall's), a light and a dark theme, and no network."""

import json

from pygments.formatters import HtmlFormatter

from .sizes import NORMAL, PADDING, SLIDE_HEIGHT, SLIDE_WIDTH

THEMES = {"light": "white", "dark": "black"}  # the course's name -> reveal.js's theme
#: Printed, a slide has this margin around it (of its size, both sides together; 0.04 on a screen):
#: a band above it for a lecturer's label and one below it for the slide's number.
PRINT_MARGIN = 0.1
#: What every printed page of a lecturer's deck says at its top: the deck shows the solutions.
LECTURER_COPY = {"en": "Lecturer's copy — contains the solutions", "zh": "教师用本——含参考答案"}

_DARK_CODE = HtmlFormatter(style="github-dark").get_style_defs("html.theme-dark .reveal .highlight")
_DARK_CODE = "\n".join(line for line in _DARK_CODE.splitlines() if line.startswith("html.theme-dark"))


def style(sizes):
    """The course's style sheet, in `sizes` (sizes.py: the layout's estimates use the same)."""
    return f"""
:root {{ --r-main-font-size: {sizes.text}px; }}
.reveal {{ font-size: {sizes.text}px; }}
.reveal .slides {{ text-align: left; }}
.reveal .slides section {{ padding: 0 {PADDING}px; box-sizing: border-box; }}
.reveal .slides section > section {{ padding: 0; }}
/* notation stays as written: no capitals forced on headings */
.reveal h1, .reveal h2, .reveal h3, .reveal h4, .reveal h5, .reveal h6 {{
  text-transform: none !important; line-height: 1.2; margin: 0 0 0.3em 0; word-wrap: break-word; }}
/* the headings' sizes: .slides outranks the theme's .reveal hN, which comes later in the page */
{"".join(f".reveal .slides h{level} {{ font-size: {sizes.heading_px(level)}px; }}" for level in (1, 2, 3, 4))}
.reveal .celltag_course-continued h3 {{ opacity: 0.8; }}
.reveal p {{ font-size: {sizes.text}px; line-height: 1.3; margin: 0 0 10px 0; }}
.reveal ul, .reveal ol {{ font-size: {sizes.list}px; line-height: 1.35; display: block; margin: 0 0 10px 1.6em; }}
.reveal li p {{ font-size: inherit; margin: 0; }}
/* inline code wraps at its spaces, none of them hanging past the slide's edge (as pre-wrap lets them) */
.reveal p code, .reveal li code {{ white-space: break-spaces; }}
.reveal table {{ font-size: {sizes.table}px; margin: 6px 0 10px 0; table-layout: auto !important; max-width: 100%; }}
.reveal table td code, .reveal table th code {{ white-space: normal; overflow-wrap: anywhere; }}
.reveal table th, .reveal table td {{ padding: 4px 12px; }}
.reveal .jp-InputPrompt, .reveal .jp-OutputPrompt, .reveal .jp-Collapser {{ display: none !important; }}
.reveal .jp-Cell {{ padding: 0; margin: 0; }}
.reveal .jp-Cell-inputWrapper, .reveal .jp-Cell-outputWrapper, .reveal .jp-OutputArea-child {{ margin: 0; }}
.reveal .jp-RenderedHTMLCommon {{ padding: 0; }}
.reveal .jp-CodeCell .jp-InputArea {{ margin: 4px 0; }}
.reveal .jp-CodeCell .highlight pre, .reveal div.highlight > pre {{
  font-size: {sizes.code[0]}px; line-height: 1.3; white-space: pre-wrap; overflow-wrap: anywhere;
  padding: 4px 10px; margin: 0; width: auto; }}
{"".join(f".reveal .celltag_course-code-{px} .highlight pre, .reveal .celltag_course-code-{px} div.highlight > pre {{ font-size: {px}px; }}" for px in sizes.code)}
.reveal .jp-InputArea-editor {{ padding: 0; border-radius: 4px; }}
.reveal pre.course-out {{ line-height: 1.25; white-space: pre; margin: 2px 0; padding: 4px 10px; width: auto;
  box-shadow: none; font-family: monospace, monospace; background: transparent; max-width: none; }}
.reveal .jp-OutputArea-output {{ padding: 0; }}
.reveal img.course-picture, .reveal .course-figure img {{ max-width: none; max-height: none; margin: 2px 0; display: block; }}
.reveal .course-figure {{ display: flex; justify-content: center; }}
.reveal .course-widget {{ font-size: {sizes.widget}px; }}
.reveal .course-controls {{ display: flex; flex-wrap: wrap; gap: 0.2em 1.4em; font-size: {sizes.controls}px;
  margin: 4px 0; }}
{"".join(f".reveal .celltag_course-math-{n} .MathJax_CHTML {{ font-size: {n}0% !important; }}" for n in range(5, 10))}
.reveal .MJXc-display {{ margin: 0.3em 0 !important; }}
/* the handout: no blank page after the last slide */
html.print-pdf .reveal .slides > .pdf-page:last-child {{ break-after: auto !important; page-break-after: auto !important; }}
/* a lecturer's deck, printed: its label on every page, centred in the band PRINT_MARGIN leaves above the slide */
html.print-pdf .reveal .slides .pdf-page::before {{ content: var(--course-copy, none); position: absolute;
  top: {round(SLIDE_HEIGHT * PRINT_MARGIN / 2 - 18) // 2}px; left: {round(SLIDE_WIDTH * PRINT_MARGIN / 2)}px;
  font: bold 18px/1 sans-serif; color: #b00020; }}
/* the dark theme (?theme=dark, or `make slides THEME=dark`): light text, dark code, plots on white */
html.theme-dark {{ --jp-content-font-color0: #fff; --jp-content-font-color1: #eee; --jp-content-font-color2: #ccc;
  --jp-ui-font-color1: #eee; --jp-cell-editor-background: #0d1117; --jp-cell-editor-border-color: #30363d;
  --jp-rendermime-table-row-background: #222; --jp-rendermime-table-row-hover-background: #333;
  --jp-layout-color0: #191919; --jp-layout-color1: #191919; --jp-border-color1: #555; --jp-border-color2: #444; }}
html.theme-dark .reveal .jp-RenderedHTMLCommon, html.theme-dark .reveal pre.course-out {{ color: #eee; }}
html.theme-dark .reveal .jp-RenderedHTMLCommon code {{ background: #2a2a2a; color: #eee; }}
html.theme-dark .reveal .jp-RenderedHTMLCommon table, html.theme-dark .reveal .jp-RenderedHTMLCommon th,
html.theme-dark .reveal .jp-RenderedHTMLCommon td {{ color: #eee; border-color: #666; }}
html.theme-dark .reveal .jp-RenderedHTMLCommon tbody tr:nth-child(odd) {{ background: #222; }}
html.theme-dark .reveal img.course-picture, html.theme-dark .reveal .course-figure img {{ background: #fff; border-radius: 4px; }}
{_DARK_CODE}
"""


#: nbconvert's reveal template, minus what would reach the network: the mermaid import (the
#: lessons draw no mermaid diagrams) and the widget manager (widgets are stills here). reveal.js
#: loads through require.js as a module, so it sets no global: the deck sets `window.Reveal`
#: itself (the same instance), for the browser's console and the test. reveal.js lays the slides
#: out at 1280×720 (16:9), from the top (`center: false`), with no scrolling slides; `?theme=dark`
#: picks the dark theme, `?print-pdf` the print layout (one page a slide, PRINT_MARGIN around it).
TEMPLATE = (
    """{%- extends 'index.html.j2' -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_css -%}
<style type="text/css">
@@STYLE@@
@@COPY@@
</style>
{%- endblock html_head_css -%}
{%- block body_header -%}
<script>
(function () {
  var asked = window.location.search.match(/[?&]theme=(dark|light)/);
  var theme = window.location.search.match(/print-pdf/) ? "light" : (asked ? asked[1] : "@@THEME@@");
  if (theme === "dark") {
    document.documentElement.classList.add("theme-dark");
    document.getElementById("theme").setAttribute("href", "{{ reveal_url_prefix }}/dist/theme/black.css");
  }
})();
</script>
{{ super() }}
{%- endblock body_header -%}
{% block footer_js %}
<script>
require({ waitSeconds: 15 }, ["{{ reveal_url_prefix }}/dist/reveal.js", "{{ reveal_url_prefix }}/plugin/notes/notes.js"],
  function (Reveal, RevealNotes) {
    window.Reveal = Reveal;
    Reveal.initialize({
      controls: true, progress: true, history: true, transition: "slide", slideNumber: "c/t",
      plugins: [RevealNotes], width: @@WIDTH@@, height: @@HEIGHT@@, minScale: 0.1, maxScale: 3.0,
      margin: /print-pdf/.test(window.location.search) ? @@PRINT_MARGIN@@ : 0.04,
      center: false, showNotes: false, pdfMaxPagesPerSlide: 1, pdfSeparateFragments: false,
    });
    Reveal.on("slidechanged", function () {
      if (MathJax.Hub.getAllJax(Reveal.getCurrentSlide())) { MathJax.Hub.Rerender(Reveal.getCurrentSlide()); }
    });
  });
</script>
{% endblock footer_js %}
""".replace("@@WIDTH@@", str(SLIDE_WIDTH))
    .replace("@@HEIGHT@@", str(SLIDE_HEIGHT))
    .replace("@@PRINT_MARGIN@@", str(PRINT_MARGIN))
)


def template(theme="light", sizes=NORMAL, copy=None):
    """The deck's template: opening in `theme`, set in `sizes`; `copy`, a label every printed page
    carries (a lecturer's deck: LECTURER_COPY), or None."""
    label = f":root {{ --course-copy: {json.dumps(copy, ensure_ascii=False)}; }}" if copy else ""
    return TEMPLATE.replace("@@STYLE@@", style(sizes)).replace("@@COPY@@", label).replace("@@THEME@@", theme)
