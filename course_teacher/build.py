"""The authoring pipeline: one bilingual source per lesson -> four executed notebooks.

    python -m course_teacher.build                 render and execute every lesson
    python -m course_teacher.build --only 01       just lesson 01
    python -m course_teacher.build --check         re-render without executing; fail on drift (and
                                                 when the exercises' public data or the glossary
                                                 is stale)
    python -m course_teacher.build --check --no-public
                                                 the same, but for the exercises' public data
                                                 (`python -m course_teacher.publish --check`)
    python -m course_teacher.build --markdown      re-render the committed notebooks' markdown
                                                 without executing (the lessons' text, the
                                                 glossary's links): for a change that touches no code
    python -m course_teacher.build --stamp-translations --only 01
                                                 record that lesson 01's Chinese cells are up
                                                 to date with their English cells

A source ``notebooks/source/NN_slug.py`` is a jupytext percent file. Its markdown cells come in
pairs: a ``lang-en`` cell, then its ``lang-zh`` translation, which records ``en_hash``, a short
hash of the English text it translates. Code cells are shared. An exercise cell is tagged
``exercise``, names its id in the metadata (``exercise="01.scaled_dot"``) and marks the learner's
part with ``### BEGIN SOLUTION`` / ``### END SOLUTION``; a later code cell calls
``check("01.scaled_dot", ...)``. Each source renders to notebooks/{en,zh}/ (student: the
solution replaced by a stub) and notebooks/solutions/{en,zh}/.

The glossary (course_teacher.glossary) has one source too, notebooks/source/glossary.toml. The build
writes from it the translation table GLOSSARY.md and the learner's glossary, one page per language
beside the lessons (notebooks/en/glossary.md, notebooks/zh/术语表.md), and every render links the first use of each
defined term in the lesson's markdown to its entry, and anchors the sections the entries link.
``--check`` also reads every Chinese text a learner reads, the lessons' and the package's, the
READMEs' and the glossary's own, against the glossary's avoid list and its terms
(course_teacher.learner_text).

nbgrader: every render carries nbgrader's cell metadata (schema 3), the same in all four. An
exercise cell is a solution cell, grade_id "<exercise>-code" with "_" for the id's "." (nbgrader's
ids may not hold one): "01_scaled_dot-code"; its check cell is a locked test cell worth 1 point,
grade_id "01_scaled_dot"; other cells carry none (nbgrader needs none, and the learner may edit
them). A teacher gives `nbgrader generate_assignment` the SOLUTION render of one language as the
source notebook (one assignment per language: en and zh share file names). It keeps the solution
markers, so nbgrader replaces just the solution by its stub and keeps the function's signature and
docstring; a student render given as source would lose its exercise cells whole (nbgrader replaces
a solution cell without markers by its stub). nbgrader's stub comment is English: for a Chinese
assignment set `c.ClearSolutions.code_stub = {"python": "# 在这里写你的代码\\nraise NotImplementedError()"}`.
A student may submit nbgrader's release or the course's student render: the grade_ids are the
same. Under nbgrader's execution a failed check raises (grading.check): its test cell scores 0.
"""

import argparse
import copy
import hashlib
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from . import bilingual_code, diagrams, learner_text, links, publish
from . import glossary as gloss
from .exercises import EXERCISES
from .messages import text as catalogue
from course_utils.learner import PROGRESS_TAG
# The lessons' table and the rendering live below the build (links, the answer keys and the exercises'
# references read them too); the build's readers find them here as before.
from .sources import (GLOSSARIES, HOMES, LANGUAGES, NOTEBOOKS, ROOT, SOURCES, lessons, notebook_name, student_notebook,
                      tags, targets)
from .render import (BEGIN, CHECK_CALL, CHECK_POINTS, END, IMAGES_LINK, NAV_TAG, SETUP_CALL, colab_link,
                     glossary_link, glossary_source, grade_id, lesson_title, navigation, render, solution_lines, stub)

#: Where the home takes each lesson's time from: the teacher's guide's table "The course at a
#: glance" (minutes in class, minutes at home), so that the two never disagree.
GUIDE_TABLE = ROOT / "guide" / "en.md"

# What every execution runs under, so two runs on two machines print the same things.
EXECUTION_ENV = {"COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
TIMEOUT_S = 300
BUDGET_S, BUDGET_MB = 20, 1536
#: Lessons given more time: lesson 10 trains a small model live and loads a trained one (its issue: 30 s).
LESSON_BUDGET_S = {"10": 30}
# The kernel's peak resident memory in KiB: VmHWM, the high-water mark of this process's own memory.
# Not ru_maxrss where /proc has VmHWM: Linux keeps ru_maxrss across exec, so a kernel started by a
# big process (a pytest worker after heavy tests) would report that process's size as its own.
PEAK_MEMORY_CELL = (
    "import pathlib, resource\n"
    "status = pathlib.Path('/proc/self/status')\n"
    "hwm = [int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith('VmHWM:')] "
    "if status.exists() else []\n"
    "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
)


class Problem(Exception):
    """Something wrong with a lesson, located at a cell."""

    def __init__(self, lesson, where, text):
        super().__init__(f"lesson {lesson}, {where}: {text}")


# ----------------------------------------------------------------------------- sources

def english_hash(text):
    """The short hash a Chinese cell records of the English cell it translates."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:10]


def _where(index, cell):
    first = cell.source.strip().splitlines()[0][:50] if cell.source.strip() else ""
    return f"source cell {index} ({cell.cell_type}: {first!r})"


def glossary():
    """[(English term, Chinese term)] for the glossary's terms marked "checked"."""
    return [(term.en, term.zh) for term in glossary_source()[0] if term.checked]


def _prose(markdown):
    """Markdown without inline code, math, links' targets and the words marked as not the glossary's
    sense (gloss.NOT_TERM): where glossary terms count."""
    markdown = gloss.NOT_TERM.sub(" ", markdown)
    return re.sub(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)", " ", markdown, flags=re.S)


def glossary_problems(lesson, where, english, chinese, terms):
    english, chinese = _prose(english), _prose(chinese)
    return [
        Problem(lesson, where, f"the English cell says {en!r}; the glossary's Chinese term {zh!r} is missing")
        for en, zh in terms
        if re.search(rf"\b{re.escape(en)}", english, flags=re.I) and zh not in chinese
    ]


#: The slide types that start a slide of the deck (course_teacher.slides): the deck's structure.
SLIDE_BREAKS = ("slide", "subslide")


def slide_structure_problems(lesson, source):
    """Where a Chinese cell breaks the deck differently from the English cell it translates: each
    markdown cell and its translation start the same kind of slide (or none), so both languages' decks
    have the same slides and sub-slides in the same order, under the same headings. (Code cells are
    shared by both languages, so their breaks are the same by construction.)"""
    def kind(cell):
        found = cell.metadata.get("slideshow", {}).get("slide_type")
        return found if found in SLIDE_BREAKS else "no break"

    problems = []
    for index, (english, chinese) in enumerate(zip(source.cells, source.cells[1:]), start=1):
        if "lang-en" in tags(english) and "lang-zh" in tags(chinese) and kind(english) != kind(chinese):
            problems.append(Problem(lesson, _where(index, chinese),
                                    f"starts {kind(chinese)!r} where its English cell starts {kind(english)!r}: the "
                                    "two languages' slides must match (give it the English cell's slideshow marker)"))
    return problems


def validate(lesson, source):
    """The problems of a source notebook that need no rendering: translations, exercises, setup,
    slide structure."""
    problems = slide_structure_problems(lesson, source)
    terms = glossary()
    cells = source.cells
    for index, cell in enumerate(cells):
        where = _where(index, cell)
        if cell.cell_type == "markdown":
            if "lang-en" in tags(cell):
                following = cells[index + 1] if index + 1 < len(cells) else None
                if following is None or "lang-zh" not in tags(following):
                    problems.append(Problem(lesson, where, "English cell without its Chinese translation right after it"))
            elif "lang-zh" in tags(cell):
                previous = cells[index - 1] if index > 0 else None
                if previous is None or "lang-en" not in tags(previous):
                    problems.append(Problem(lesson, where, "Chinese cell that does not follow an English cell"))
                    continue
                if cell.metadata.get("en_hash") != english_hash(previous.source):
                    problems.append(
                        Problem(
                            lesson,
                            where,
                            "translation is stale: the English cell before it changed since it was translated "
                            f"(update the Chinese, then `python -m course_teacher.build --stamp-translations --only {lesson}`)",
                        )
                    )
                problems += glossary_problems(lesson, where, previous.source, cell.source, terms)
            else:
                problems.append(Problem(lesson, where, "markdown cell with neither a 'lang-en' nor a 'lang-zh' tag"))
            for name in re.findall(rf"{re.escape(IMAGES_LINK)}([^)\s\"']+)", cell.source):
                if not (ROOT / "images" / name).exists():
                    problems.append(Problem(lesson, where, f"links images/{name}, which does not exist: run `make notebooks`"))
        else:
            problems += [Problem(lesson, where, text) for text in bilingual_code.problems(cell.source)]
        if "exercise" in tags(cell):
            exercise = cell.metadata.get("exercise")
            if exercise not in EXERCISES:
                problems.append(Problem(lesson, where, f"exercise cell names exercise {exercise!r}, which is not registered"))
            if BEGIN not in cell.source or END not in cell.source:
                problems.append(Problem(lesson, where, f"exercise cell without '{BEGIN}' ... '{END}'"))
            later = [c.source for c in cells[index + 1:] if c.cell_type == "code"]
            if not any(re.search(rf"check\(\s*['\"]{re.escape(str(exercise))}['\"]", text) for text in later):
                problems.append(Problem(lesson, where, f"exercise {exercise!r} has no check cell after it"))
    setup_cells = [c for c in cells if c.cell_type == "code" and SETUP_CALL in c.source]
    if len(setup_cells) != 1:
        problems.append(Problem(lesson, "source", f"needs exactly one code cell calling {SETUP_CALL}; found {len(setup_cells)}"))
    return problems


# ----------------------------------------------------------------------------- rendering

# ----------------------------------------------------------------------------- links and the home

def colab_links(lang):
    """The home's line of links that open each lesson in Google Colab (in HTML: the home's Markdown
    links stay those of the lessons beside it)."""
    found = []
    for lesson, path in lessons().items():
        notebook = student_notebook(path, lang).relative_to(ROOT).as_posix()
        found.append(f'<a href="{links.colab_url(notebook)}">{lesson}</a>')
    return catalogue(lang, "colab.home", links=" · ".join(found))


def course_map():
    """{lesson: {"en": what it teaches, "zh": ...}}: the README course map's third column, whose
    two languages are joined by " · "."""
    try:
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    section = readme.split("## Course map", 1)[1].split("\n## ", 1)[0] if "## Course map" in readme else ""
    found = {}
    for line in section.splitlines():
        columns = [column.strip() for column in line.strip().strip("|").split("|")]
        parts = columns[2].split(" · ") if len(columns) >= 3 else []
        if re.fullmatch(r"\d\d", columns[0]) and len(parts) == len(LANGUAGES):
            found[columns[0]] = dict(zip(LANGUAGES, parts))
    return found


def duration(lang, minutes):
    """`minutes` as the home writes a time, in `lang` ("about 2 h 30 min"), on one line: beside the
    home's long column, a browser would break Chinese between any two characters ("约/2/小时"). (The
    attribute unquoted: the notebook's JSON then holds the text as written.)"""
    hours, rest = divmod(minutes, 60)
    if not hours:
        text = catalogue(lang, "home.minutes", minutes=rest)
    else:
        text = catalogue(lang, "home.hours_minutes" if rest else "home.hours", hours=hours, minutes=rest)
    return f"<span style=white-space:nowrap>{text}</span>"


def lesson_times():
    """{lesson: (minutes in class, minutes at home)}, from the guide's table (GUIDE_TABLE)."""
    found = {}
    for line in GUIDE_TABLE.read_text(encoding="utf-8").split("## The course at a glance", 1)[-1].splitlines():
        row = re.fullmatch(r"\|\s*(\d\d) · [^|]*\|\s*(\d+) min\s*\|\s*(\d+) min\s*\|.*", line.strip())
        if row:
            found[row.group(1)] = (int(row.group(2)), int(row.group(3)))
    return found


def render_home(lang):
    """The course home in `lang` (notebooks/{lang}/<HOMES[lang]>): every lesson with its title (its
    source's heading), what it teaches (the README's course map), the time it takes and a link; the
    learner's progress (a cell calling progress(), tagged PROGRESS_TAG, whose committed output is
    "nothing checked yet": `make lab` rewrites it in the learner's copy from their progress file)."""
    teaches, times = course_map(), lesson_times()
    columns = catalogue(lang, "home.columns").split("|")
    rows = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for lesson, path in lessons().items():
        source = read_source(path)
        title = lesson_title(source, lang, lesson)
        what = teaches.get(lesson, {}).get(lang, "")
        time_needed = duration(lang, sum(times[lesson])) if lesson in times else "?"  # (check_home says so)
        rows.append(f"| {lesson} | [{title}]({notebook_name(path, lang)}) | {what} | {time_needed} |")
    intro = catalogue(lang, "home.title") + "\n\n" + catalogue(lang, "home.intro", glossary=GLOSSARIES[lang])
    code = f'from course_utils import progress, setup\n\nsetup(lang="{lang}")\nprogress()'
    cells = [
        nbformat.v4.new_markdown_cell(intro),
        nbformat.v4.new_markdown_cell("\n".join(rows) + "\n\n" + colab_links(lang)),
        nbformat.v4.new_markdown_cell(catalogue(lang, "home.progress")),
        nbformat.v4.new_code_cell(code, metadata={"tags": [PROGRESS_TAG]}),
        nbformat.v4.new_markdown_cell(catalogue(lang, "home.help", glossary=GLOSSARIES[lang])),
    ]
    for number, cell in enumerate(cells):
        cell.id = f"home-{number:03d}"
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return notebook


def homes():
    """[(lang, path of the course home)]."""
    return [(lang, NOTEBOOKS / lang / HOMES[lang]) for lang in LANGUAGES]


def check_home():
    """Problems with the committed course homes: missing, or not what the sources and the README's
    course map give now."""
    problems = []
    teaches = course_map()
    problems += [Problem(lesson, "README.md", "has no row in the course map (its third column: English · 中文)")
                 for lesson in lessons() if lesson not in teaches]
    times = lesson_times()
    problems += [Problem(lesson, str(GUIDE_TABLE.relative_to(ROOT)), "its table at a glance gives the lesson no time")
                 for lesson in lessons() if lesson not in times]
    for lang, path in homes():
        label = path.relative_to(ROOT)
        if not path.exists():
            problems.append(Problem("home", str(label), "not rendered: run `make notebooks`"))
        elif _inputs(nbformat.read(path, as_version=4)) != _inputs(render_home(lang)):
            problems.append(Problem("home", str(label), "differs from a fresh render of the sources and the README's "
                                                        "course map: run `make notebooks`"))
    return problems


# ----------------------------------------------------------------------------- the glossary

def glossary_pages():
    """[(lang, path of the learner's glossary in that language)]: beside the student notebooks, so
    that a lesson links it by its name alone (`glossary.md`, `术语表.md`) wherever the lessons are (the repository, Binder, the
    student zip, the learner's work folder) and the page links the lessons beside it."""
    return [(lang, NOTEBOOKS / lang / GLOSSARIES[lang]) for lang in LANGUAGES]


def lesson_outlines(lang):
    """{lesson: {"notebook": its file name in `lang`, "title": {lang: its title}, "outline": its sections}},
    in the course's order: what the glossary's pages need of the lessons (glossary.outline)."""
    found = {}
    for lesson, path in lessons().items():
        source = read_source(path)
        found[lesson] = {
            "notebook": notebook_name(path, lang),
            "title": {lang: lesson_title(source, lang, lesson) for lang in LANGUAGES},
            "outline": gloss.outline(source.cells, tags),
        }
    return found


def glossary_files():
    """{path: text} of what the build writes from the glossary's source: the translation table
    GLOSSARY.md and the learner's glossary in each language."""
    terms, avoid = glossary_source()
    files = {ROOT / "GLOSSARY.md": gloss.table(terms, avoid)}
    files.update({path: gloss.page(terms, lang, lesson_outlines(lang)) for lang, path in glossary_pages()})
    return files


def write_glossary():
    """Write glossary_files() where they differ; the paths written."""
    written = []
    for path, text in glossary_files().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def check_glossary():
    """Problems with the glossary: a term whose lesson or section does not exist, a definition whose
    Chinese drops a checked term its English uses (the rule the lessons keep, validate), and a
    written file that is not what the source gives now."""
    terms, _avoid = glossary_source()
    where = str((SOURCES / gloss.SOURCE).relative_to(ROOT))
    outlines = {lesson: info["outline"] for lesson, info in lesson_outlines(LANGUAGES[0]).items()}
    problems = [Problem("glossary", where, text) for text in gloss.problems(terms, outlines)]
    checked = [(term.en, term.zh) for term in terms if term.checked]
    for term in gloss.defined(terms):
        problems += glossary_problems("glossary", f"{where}, the definition of {term.en!r}",
                                       term.definition["en"], term.definition["zh"], checked)
    for path, text in glossary_files().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            problems.append(Problem("glossary", str(path.relative_to(ROOT)),
                                    f"differs from what {where} gives: run `make notebooks`"))
    return problems


def check_learner_text(only=None):
    """Every Chinese text a learner reads (course_teacher.learner_text: the lessons, the package's
    messages and labels, the hints and mistakes, the slides' notes, the READMEs, the glossary's
    definitions) against the glossary: no word of its avoid list, no term it translates left in
    English. `only`: just that lesson's source among the lessons."""
    terms, avoid = glossary_source()
    chosen = lessons(only)
    entries = learner_text.texts(ROOT, chosen, tags, read_source, terms)
    names = learner_text.code_names(ROOT, lessons(), read_source)
    return [Problem("glossary", "learner text", text) for text in learner_text.problems(entries, terms, avoid, names)]


# ----------------------------------------------------------------------------- execution

def execute(notebook, path):
    """Run `notebook` in a fresh kernel under EXECUTION_ENV, in the folder it will live in.

    Returns (seconds, peak resident memory of the kernel in MB).
    """
    notebook.cells.append(nbformat.v4.new_code_cell(PEAK_MEMORY_CELL))
    client = NotebookClient(
        notebook,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        coalesce_streams=True,  # stdout may arrive in one chunk or several; commit it as one
    )
    start = time.perf_counter()
    client.execute(env={**os.environ, **EXECUTION_ENV})  # passed on to the kernel's process
    seconds = time.perf_counter() - start
    probe = notebook.cells.pop()
    peak_mb = int(probe.outputs[0]["text"]) / 1024  # KiB (VmHWM, or ru_maxrss on Linux)
    _stable_widget_ids(notebook, path)
    return seconds, peak_mb


def _stable_widget_ids(notebook, path):
    """Replace the random ids of stored widget models by ids derived from the notebook's path,
    so that re-executing an unchanged notebook leaves its file unchanged."""
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    ids = list(state.get("state", {}))
    if not ids:
        return
    text = json.dumps(notebook)
    for number, old in enumerate(ids):
        new = uuid.uuid5(uuid.NAMESPACE_URL, f"{path.relative_to(ROOT)}#{number}").hex
        text = text.replace(old, new)
    notebook.clear()
    notebook.update(nbformat.reads(text, as_version=4))


def write(notebook, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.validate(notebook)
    path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------- check

def _inputs(notebook):
    return [(c.cell_type, c.get("id"), c.source, dict(c.metadata)) for c in notebook.cells]


def check_lesson(lesson, lesson_path):
    """Problems with one lesson's source and its committed notebooks (nothing is executed)."""
    source = read_source(lesson_path)
    problems = validate(lesson, source)
    exercise_cells = [c for c in source.cells if "exercise" in tags(c)]
    secrets = {line.strip() for c in exercise_cells for line in solution_lines(c) if len(line.strip()) >= 8}
    for lang, solutions, path in targets(lesson_path):
        label = path.relative_to(ROOT)
        if not path.exists():
            problems.append(Problem(lesson, str(label), "not rendered: run `make notebooks`"))
            continue
        committed = nbformat.read(path, as_version=4)
        fresh = _inputs(render(source, lang, solutions, lesson))
        found = _inputs(committed)
        for index, (want, have) in enumerate(zip(fresh, found)):
            if want != have:
                first = (want[2].strip().splitlines() or [""])[0][:50]
                problems.append(
                    Problem(lesson, f"{label} cell {index} ({first!r})", "differs from a fresh render of the source: run `make notebooks`")
                )
                break
        else:
            if len(fresh) != len(found):
                problems.append(
                    Problem(lesson, str(label), f"has {len(found)} cells, a fresh render has {len(fresh)}: run `make notebooks`")
                )
        if not solutions:
            for index, cell in enumerate(committed.cells):
                leaked = [s for s in secrets if s in cell.source] + [m for m in (BEGIN, END) if m in cell.source]
                if leaked:
                    problems.append(Problem(lesson, f"{label} cell {index}", f"solution text in a student notebook: {leaked[0]!r}"))
    return problems


# ----------------------------------------------------------------------------- reading

_parsed = {}  # {(path, its text): the notebook jupytext read from it}


def read_source(path):
    """jupytext.read(path), parsed once per text: --check reads each lesson's source about eight times
    (the lesson, the homes' titles, the glossary's outlines in each language, the learner's text), and
    parsing one costs 60 ms, validating every cell. A copy each time: a caller may change what it gets.
    The key is the file's text, so a source rewritten since (stamp_translations) is read again."""
    text = Path(path).read_text(encoding="utf-8")
    key = (str(path), text)
    if key not in _parsed:
        _parsed[key] = jupytext.read(path)
    return copy.deepcopy(_parsed[key])


# ----------------------------------------------------------------------------- commands

def build(only=None):
    """Render and execute every lesson (or one); print each notebook's time and peak memory."""
    print(f"{len(publish.write())} exercises' public cases written", flush=True)
    for path in diagrams.write_all(ROOT / "images"):
        print(f"{path.relative_to(ROOT)}: drawn", flush=True)
    sources, failed = _valid_sources(only)
    for lesson, (lesson_path, source) in sources.items():
        for lang, solutions, path in targets(lesson_path):
            notebook = render(source, lang, solutions, lesson)
            seconds, peak_mb = execute(notebook, path)
            write(notebook, path)
            over = " OVER BUDGET" if seconds > LESSON_BUDGET_S.get(lesson, BUDGET_S) or peak_mb > BUDGET_MB else ""
            print(f"{path.relative_to(ROOT)}: {seconds:.1f} s, peak {peak_mb:.0f} MB{over}", flush=True)
    for lang, path in homes():  # every time: they list every lesson, and cost a few seconds
        notebook = render_home(lang)
        seconds, peak_mb = execute(notebook, path)
        write(notebook, path)
        print(f"{path.relative_to(ROOT)}: {seconds:.1f} s, peak {peak_mb:.0f} MB", flush=True)
    for path in write_glossary():  # every time: its pages name every lesson's sections
        print(f"{path.relative_to(ROOT)}: written", flush=True)
    return 1 if failed else 0


def _valid_sources(only=None):
    """({lesson: (its source's path, the source read)} of the lessons whose source is valid, whether
    any was not): each invalid one's problems printed, and left out."""
    sources, failed = {}, False
    for lesson, lesson_path in lessons(only).items():
        source = read_source(lesson_path)
        problems = validate(lesson, source)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
        if not problems:
            sources[lesson] = (lesson_path, source)
    return sources, failed


def _with_outputs(fresh, committed):
    """`fresh` (a render) with the outputs of `committed` (the notebook on disk): its code cells as
    they were, executed, and its markdown as `fresh` has it. None where a code cell differs, or a
    cell was added or removed: the notebook then needs executing."""
    if len(fresh.cells) != len(committed.cells):
        return None
    cells = []
    for new, old in zip(fresh.cells, committed.cells):
        if new.cell_type != old.cell_type or new.get("id") != old.get("id"):
            return None
        if new.cell_type == "code":
            if new.source != old.source or dict(new.metadata) != dict(old.metadata):
                return None
            cells.append(old)
        else:
            cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = committed.metadata
    return notebook


def refresh_markdown(only=None):
    """Re-render every committed notebook (or one lesson's) and the homes without executing them:
    the markdown a fresh render gives, the code cells and their outputs as committed. For a change
    to the lessons' text or to the glossary's links, which leaves every output as it is. A notebook
    whose code a fresh render changes is left alone and named: it needs `make notebooks`."""
    terms = glossary_source()[0]
    found = []
    sources, failed = _valid_sources(only)
    for lesson, (lesson_path, source) in sources.items():
        found += [(path, render(source, lang, solutions, lesson, terms), lesson)
                  for lang, solutions, path in targets(lesson_path)]
    found += [(path, render_home(lang), None) for lang, path in homes()]
    for path, fresh, lesson in found:
        label = path.relative_to(ROOT)
        committed = nbformat.read(path, as_version=4) if path.exists() else None
        notebook = _with_outputs(fresh, committed) if committed is not None else None
        if notebook is None:
            again = f"make notebooks ONLY={lesson}" if lesson else "make notebooks"
            print(f"error: {label}: its code differs from a fresh render (or it is missing): run `{again}`",
                  file=sys.stderr)
            failed = True
        elif _inputs(notebook) != _inputs(committed):
            write(notebook, path)
            print(f"{label}: markdown re-rendered", flush=True)
    for path in write_glossary():
        print(f"{path.relative_to(ROOT)}: written", flush=True)
    return 1 if failed else 0


def check(only=None, public=True):
    """Every problem --check finds, printed; 1 when there is one. `public=False` leaves out the exercises'
    public data (publish.problems: 8 of the check's 29 CPU-seconds), for a caller that checks it apart:
    `make quick` runs `publish --check` beside this, on the other core."""
    problems = [p for lesson, path in lessons(only).items() for p in check_lesson(lesson, path)]
    problems += check_home()
    problems += check_glossary()
    problems += check_learner_text(only)
    problems += [Problem("exercises", "course_utils/exercises/public", f"{text}: run `make notebooks`")
                 for text in (publish.problems() if public else ())]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    count = len(lessons(only))
    print(f"build --check: {count} lesson(s), {len(problems)} problem(s)")
    return 1 if problems else 0


def stamp_translations(only=None):
    """Record, in each Chinese cell, the hash of the English cell before it."""
    for lesson, lesson_path in lessons(only).items():
        source = jupytext.read(lesson_path)
        for previous, cell in zip(source.cells, source.cells[1:]):
            if "lang-zh" in tags(cell) and "lang-en" in tags(previous):
                cell.metadata["en_hash"] = english_hash(previous.source)
        jupytext.write(source, lesson_path, fmt="py:percent")
        print(f"{lesson_path.relative_to(ROOT)}: translations stamped")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.build", description=__doc__.split("\n")[0])
    parser.add_argument("--only", metavar="NN", help="just lesson NN (e.g. 01)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="re-render without executing; fail on any drift")
    mode.add_argument("--stamp-translations", action="store_true", help="mark the Chinese cells as up to date")
    mode.add_argument("--markdown", action="store_true",
                      help="re-render the committed notebooks' markdown without executing (their code must not change)")
    parser.add_argument("--no-public", action="store_true",
                        help="--check: leave the exercises' public data to `python -m course_teacher.publish --check`")
    args = parser.parse_args(argv)
    if args.no_public and not args.check:
        parser.error("argument --no-public: only with --check")
    if args.check:
        return check(args.only, public=not args.no_public)
    if args.markdown:
        return refresh_markdown(args.only)
    if args.stamp_translations:
        return stamp_translations(args.only)
    return build(args.only)


if __name__ == "__main__":
    sys.exit(main())
