"""Rendering: one lesson's source -> the notebook a learner opens, in one language, as a student's or with the
solutions (course_teacher.build executes and writes what this gives; the answer keys and the exercises'
references read the student render through here too).

A render keeps the markdown of its language, localises the shared code, replaces each exercise's solution by a
stub (``stub``) in the student's, adds nbgrader's metadata, links the first use of each glossary term, and puts
a link to the course home first and to the next lesson last (``navigation``).
"""

import re

import jupytext
import nbformat

from . import bilingual_code, links, sources
from . import glossary as gloss
from .messages import text as catalogue
from .sources import tags

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SETUP_CALL = 'setup(lang="en")'
# cell metadata that belongs to the source, not to the notebooks a learner opens
SOURCE_ONLY_METADATA = {"en_hash", "lines_to_next_cell", "cell_marker", "lines_to_end_of_cell_marker"}
#: How a source (in notebooks/source/) links a diagram of images/; rendered notebooks sit at the
#: same depth (notebooks/en/), solutions one folder deeper (notebooks/solutions/en/).
IMAGES_LINK = "../../images/"
STUB_COMMENT = {"en": "# YOUR CODE HERE", "zh": "# 在这里写你的代码"}
#: What the stub's NotImplementedError says, in the notebook's language (the check reads any
#: NotImplementedError on every case as "not attempted", whatever it says).
STUB_ERROR = {"en": "exercise {exercise}", "zh": "练习 {exercise}"}
#: The tag of the cells that link a lesson to the course home (one per language beside the student
#: notebooks, sources.HOMES: notebooks/en/index.ipynb, notebooks/zh/首页.ipynb) and to the next lesson.
NAV_TAG = "course-nav"
#: nbgrader's cell metadata (its schema 3) and what each check is worth
NBGRADER_SCHEMA, CHECK_POINTS = 3, 1
#: a cell that checks an exercise: check("01.scaled_dot", ...)
CHECK_CALL = re.compile(r"""^\s*check\(\s*['"]([^'"]+)['"]""", flags=re.MULTILINE)


def glossary_source():
    """(terms, avoid) of the glossary's source, notebooks/source/glossary.toml (course_teacher.glossary)."""
    path = sources.SOURCES / gloss.SOURCE
    try:
        return gloss.load(path)
    except OSError as error:
        raise SystemExit(f"build: cannot read the glossary's source {path}: {error}") from None
    except gloss.GlossaryError as error:
        raise SystemExit(f"build: {error}") from None


def solution_lines(cell):
    """The lines between the solution markers of an exercise cell."""
    lines, inside = [], False
    for line in cell.source.splitlines():
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def stub(text, exercise, lang):
    """An exercise cell's code with its solution replaced by a NotImplementedError naming the
    exercise in the notebook's language."""
    out, inside = [], False
    for line in text.splitlines():
        if line.strip() == BEGIN:
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + STUB_COMMENT[lang])
            out.append(f'{indent}raise NotImplementedError("{STUB_ERROR[lang].format(exercise=exercise)}")')
        elif line.strip() == END:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def grade_id(exercise):
    """nbgrader's id of an exercise's check cell: "01.scaled_dot" -> "01_scaled_dot" (nbgrader's
    ids allow letters, digits, "_" and "-")."""
    return exercise.replace(".", "_")


def nbgrader_metadata(cell, exercises):
    """nbgrader's metadata for a source cell: a solution cell for an exercise, a locked test cell for
    its check (the first check cell of each exercise in `exercises`, the ids still unclaimed: they
    are removed), else None."""
    if "exercise" in tags(cell):
        cell_id, role = f"{grade_id(cell.metadata['exercise'])}-code", {"solution": True, "grade": False, "locked": False}
    else:
        found = CHECK_CALL.findall(cell.source) if cell.cell_type == "code" else []
        claimed = [exercise for exercise in found if exercise in exercises]
        if len(claimed) != 1:
            return None
        exercises.discard(claimed[0])
        cell_id, role = grade_id(claimed[0]), {"solution": False, "grade": True, "locked": True, "points": CHECK_POINTS}
    return {**role, "grade_id": cell_id, "schema_version": NBGRADER_SCHEMA}


def glossary_link(lang, solutions):
    """How a render in `lang` links the learner's glossary: the page beside the student notebooks
    (notebooks/{lang}/<its name>, sources.GLOSSARIES), from the solutions one folder deeper."""
    page = sources.GLOSSARIES[lang]
    return f"../../{lang}/{page}" if solutions else page


def render(source, lang, solutions, lesson=None, terms=None):
    """The notebook a learner opens: one language's markdown, the shared code, stubs or solutions;
    with `lesson` (its number), a link to the course home first and a link to the next lesson last.
    In the markdown, the first use of each term the glossary defines links to its entry (`terms`:
    the glossary's, read from its source when not given), and every section of this lesson that
    the glossary says teaches a term carries the anchor its entry links to (course_teacher.glossary)."""
    terms = glossary_source()[0] if terms is None else terms
    linker = gloss.Linker(terms, lang, lesson, glossary_link(lang, solutions))
    anchors = gloss.section_anchors(source.cells, tags, terms, lesson)
    cells = []
    exercises = {c.metadata["exercise"] for c in source.cells if "exercise" in tags(c)}
    for index, cell in enumerate(source.cells):
        metadata = {key: value for key, value in cell.metadata.items() if key not in SOURCE_ONLY_METADATA}
        if cell.cell_type == "markdown":
            if f"lang-{lang}" in tags(cell):
                text = cell.source.replace(IMAGES_LINK, "../" + IMAGES_LINK) if solutions else cell.source
                text = gloss.unmark(linker(gloss.anchor_headings(text, anchors.get(index, {}))))
                cells.append(nbformat.v4.new_markdown_cell(text, metadata=metadata))
            continue
        text = bilingual_code.localize(cell.source, lang).replace(SETUP_CALL, f'setup(lang="{lang}")')
        if SETUP_CALL in cell.source:
            text = colab_setup(lang) + "\n\n" + text  # the lesson's first code cell: on Colab, install the course
        if "exercise" in tags(cell) and not solutions:
            text = stub(text, cell.metadata["exercise"], lang)
        nbgrader = nbgrader_metadata(cell, exercises)
        if nbgrader:
            metadata["nbgrader"] = nbgrader
        cells.append(nbformat.v4.new_code_cell(text, metadata=metadata))
    if lesson is not None:
        top, bottom = navigation(lesson, lang, solutions)
        cells = [top, *cells, bottom]
    for number, cell in enumerate(cells):
        cell.id = f"cell-{number:03d}"  # stable ids: a re-render changes nothing it need not
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return notebook


def heading(source, lang):
    """The first heading of a source's markdown in `lang` ("00 · Tensor shapes primer"), or None."""
    for cell in source.cells:
        if cell.cell_type == "markdown" and f"lang-{lang}" in tags(cell):
            found = re.search(r"^#\s+(.+?)\s*$", cell.source, flags=re.MULTILINE)
            if found:
                return found.group(1)
    return None


def lesson_title(source, lang, lesson):
    """A lesson's title in `lang`: its first heading without a leading number ("Tensor shapes primer")."""
    return re.sub(r"^\d\d\s*·\s*", "", heading(source, lang) or lesson)


def _nav_cell(text, slide_type):
    return nbformat.v4.new_markdown_cell(text, metadata={"slideshow": {"slide_type": slide_type}, "tags": [NAV_TAG]})


def navigation(lesson, lang, solutions):
    """(first cell, last cell) of lesson `lesson`'s render: a link to the course home; a link to the
    next lesson and the home (the last lesson: the home). Relative links, so they work in
    JupyterLab, on Binder and in the learner's copies (work/en/ beside work/en/index.ipynb). The
    solutions link the next solution and the student home (../../en/index.ipynb); the slides keep
    the next lesson's link only (slides/layout.py), and skip the first cell. Each language links
    its own names (sources.notebook_name, sources.HOMES)."""
    home = f"../../{lang}/{sources.HOMES[lang]}" if solutions else sources.HOMES[lang]
    found = sources.lessons()
    numbers = list(found)
    later = numbers[numbers.index(lesson) + 1:] if lesson in numbers else []
    top = _nav_cell(catalogue(lang, "nav.home", link=home) + " · " + colab_link(lesson, lang, solutions), "skip")
    if not later:
        return top, _nav_cell(catalogue(lang, "nav.last", link=home), "-")
    following = found[later[0]]
    title = f"{later[0]} · {lesson_title(jupytext.read(following), lang, later[0])}"
    text = catalogue(lang, "nav.next", title=title, link=sources.notebook_name(following, lang))
    return top, _nav_cell(text + "\n\n" + catalogue(lang, "nav.home", link=home), "-")


def colab_link(lesson, lang, solutions=False):
    """The badge that opens lesson `lesson`'s notebook in `lang` (its solutions with `solutions`) in
    Google Colab (course_teacher.links: from the repository's address, as the Binder links are). In
    HTML, Colab's own form of its badge: the Markdown links of a cell stay the course's own."""
    notebook = sources.notebook_name(sources.lessons()[lesson], lang)
    path = sources.NOTEBOOKS / ("solutions" if solutions else "") / lang / notebook
    return catalogue(lang, "colab.open", badge=links.COLAB_BADGE, link=links.colab_url(path.relative_to(sources.ROOT).as_posix()))


def colab_setup(lang):
    """What a lesson's setup cell (its first code cell) begins with: code that installs the course on
    Colab and does nothing elsewhere (links.colab_cell)."""
    return links.colab_cell(lang)
