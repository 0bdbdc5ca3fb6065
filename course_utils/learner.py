"""The learner's own folder: copies of the notebooks to work in, and every check's verdicts.

    python -m course_utils lab work --lang en    what `make lab` runs: the copies below, then JupyterLab
    python -m course_utils copy work             copy the course's notebooks into work/, refresh the homes
    python -m course_utils update work           bring in the lessons the course changed, keeping your answers

``make lab`` opens the course from a folder of the learner's own, ``work/`` (git-ignored), so that
JupyterLab's autosave never edits the course's notebooks and a ``git pull`` never conflicts::

    work/
      .course-work      says that this folder is a learner's (checks record their verdicts only here),
                        and what was copied: each lesson's course version and its exercise stubs
      progress.json     each exercise's verdicts (written by check(), read by progress())
      en/  zh/          the learner's copies of notebooks/en/ and notebooks/zh/ (each language's files
                        have names of their own, course_utils.file_names), and in each the glossary,
                        a copy of the course's in that language (below)
        before-update/  the learner's previous copies of the lessons an update replaced, the date first
      images/           a copy of the course's diagrams, which the lessons link (below)
      .workspaces/      JupyterLab's layout, one per language (course_utils.launch)

JupyterLab is rooted at ``work/`` (course_utils.launch), so the solutions and the course's own
notebooks are not in its file browser. A lesson links its diagrams as ``../../images/x.svg``: on disk,
from ``work/en/``, that is the course's ``images/``; in JupyterLab, which resolves a link that climbs
above its root at the root, it is ``work/images/``. Both exist (``sync_assets``). A lesson links its
glossary beside it, ``glossary.md#term``, and the glossary links the lessons beside it: in
``work/en/`` both are the learner's (``sync_assets`` copies the glossary there, replacing it whenever
the course's changed: it holds nothing of the learner's).

``copy`` copies what the learner lacks: everything on the first launch, a lesson the course gained
since. It never overwrites a lesson the learner has. The course home (``index.ipynb``, ``首页.ipynb``) holds nothing
of the learner's: it is replaced when the course's home changed since it was copied, and its progress
cell's output is rewritten from progress.json (``refresh_homes``) at each launch and by each check that
records a verdict, so the home opens showing the progress as it is, and an open home follows it
(``course_utils.live_progress``). ``changed_lessons`` names the lessons the course changed since they were copied,
and ``update`` brings them in (``merge``): each exercise cell the learner changed is kept (matched by
its exercise id, wherever the new version puts it); each cell the learner added is kept after the cell
it followed (found by exercise id, text or id); a course cell the learner changed keeps the change
where the course left it as it was; every other cell is the course's new one; the update says what it
kept and where, and the learner's previous copy is kept in a folder of its own,
``before-update/<date>_<time>_NN_name.ipynb``.
A lesson the course renamed (the Chinese copies had the English names before) is a changed lesson: ``copy``
does not copy it again beside the learner's old-named copy, and ``update`` merges that copy into the lesson under
its new name (matched by its number, ``renamed_lessons``), the old file kept in ``before-update/``.
Updates before kept the previous copy beside the lesson (``NN_name.before-update-<time>.ipynb``): ``copy`` and
``update`` move each into ``before-update/``, named as now (``move_old_copies``), and say so.
Which cells are the course's is what the copy recorded (each cell's id and a digest of its text). Every file is
written beside its place and moved over it, the old copy first: an update stopped at any point
leaves each notebook whole, the learner's answers in one of them at least.

A check records its verdict only where a work folder says it is one: the folder the notebook runs
in, or the one above it, holds ``.course-work``. So nothing is written when the course's own
notebooks run (the build, nbval, Binder: ``notebooks/`` holds no such file), nor in the teacher's
grader (its kernels run in an empty read-only folder, and under nbgrader's execution nothing is
recorded either). Recording never changes a verdict and never fails a check: an unreadable or
corrupt file is started afresh, a folder that cannot be written is left alone.

What a verdict does to the record (both languages write the one file): a pass is never overwritten
by a stub merely run (a "not attempted" verdict, as Run All in the other language's copy gives,
changes nothing where an attempt is recorded); any other verdict is the exercise's latest, and the
latest pass is kept beside it, so a failure after a pass shows as a failure that passed before.
"""

import hashlib
import html
import json
import os
import time
from pathlib import Path
from typing import NamedTuple

from . import atomic_files, file_names, i18n
from . import validation as check
from .exercises.public import EXERCISES  # (the ids alone: the progress table lists every exercise)
from .live_progress import live_html, trust

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
MARKER, PROGRESS = ".course-work", "progress.json"
#: Each language's course home (course_utils.file_names).
HOMES = file_names.HOMES
#: What the work folder holds of the course itself, for the lessons' links (see the module's docstring):
#: {its path in the work folder: its path in the course}.
ASSETS = {"images": "images",
          **{f"{lang}/{name}": f"notebooks/{lang}/{name}" for lang, name in file_names.GLOSSARIES.items()}}
FORMAT = 2
#: The statuses a verdict can have (course_utils.exercises.grading), in the progress file's words.
STATUSES = ("passed", "failed", "not attempted", "crashed")
NOT_ATTEMPTED = "not attempted"
#: How many verdicts an exercise's history keeps (the latest; the latest pass is kept whatever follows).
HISTORY = 20
#: The tag of the course home's progress cell (course_teacher.build.render_home).
PROGRESS_TAG = "course-progress"
#: The style of the progress table's cells: JupyterLab aligns a table's cells to the right, which
#: scatters ids and words of different lengths, and a lesson beside its exercises to their middle.
LEFT = "text-align: left; vertical-align: top"


def _digest(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


# ----------------------------------------------------------------------------- notebooks as data

def _read_notebook(path):
    """The notebook at `path` as a dict (None when it cannot be read)."""
    try:
        notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return notebook if isinstance(notebook, dict) and isinstance(notebook.get("cells"), list) else None


def _dumps(notebook):
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------- argument checks

def _folder(function, argument, value, optional=False):
    """`value` as a Path: a folder's path (a str or a path), or None when `optional`."""
    if optional and value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        check.fail(function, argument, check.describe(value),
                   {"en": "a folder's path, such as 'work'" + (" (or None)" if optional else ""),
                    "zh": "文件夹路径，例如 'work'" + ("（或 None）" if optional else "")})
    return Path(value)


def _lang(function, value, optional=False):
    """`value`, a language of the course ("en" or "zh"; None when `optional`: the one set up)."""
    if optional and value is None:
        return None
    return check.one_of(function, "lang", value, i18n.LANGUAGES)


def _languages(function, value):
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, str) and v in i18n.LANGUAGES for v in value):
        check.fail(function, "languages", check.describe(value),
                   {"en": f"a tuple of the course's languages, {i18n.LANGUAGES}",
                    "zh": f"由课程语言组成的元组 {i18n.LANGUAGES}"})
    return value


def _dict(function, argument, value, needed, optional=False):
    """`value` when it is a dict (notebook data, a record); `needed` says which, in both languages."""
    if not (isinstance(value, dict) or (optional and value is None)):
        check.fail(function, argument, check.describe(value), needed)
    return value


NOTEBOOK_NEEDED = {"en": "a notebook as a dict, with its list of 'cells'", "zh": "dict 形式的笔记本，含 'cells' 列表"}


def _notebook(function, argument, value):
    if not isinstance(value, dict) or not isinstance(value.get("cells"), list) or \
            not all(isinstance(cell, dict) for cell in value["cells"]):
        check.fail(function, argument, check.describe(value), NOTEBOOK_NEEDED)
    return value


def _source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def exercise_of(cell):
    """The exercise id of an exercise cell ("01.scaled_dot"), else None."""
    _dict("exercise_of", "cell", cell, {"en": "a notebook cell (a dict)", "zh": "笔记本单元格（dict）"})
    metadata = cell.get("metadata") or {}
    if cell.get("cell_type") == "code" and "exercise" in (metadata.get("tags") or []):
        exercise = metadata.get("exercise")
        return exercise if isinstance(exercise, str) else None
    return None


def _inputs(notebook, exercises=True):
    """The cells' types and sources (the exercise cells' left out unless `exercises`)."""
    return [(cell.get("cell_type"), _source(cell)) for cell in notebook["cells"]
            if exercises or exercise_of(cell) is None]


def _cell_key(cell):
    """A short digest of a cell's type and source: what says two cells hold the same thing."""
    return _digest(json.dumps([cell.get("cell_type"), _source(cell)]))[:16]


def version_of(notebook):
    """What the learner copied of a course notebook: a digest of its cells' inputs (outputs aside: a
    lesson run again is the same lesson), a digest of each exercise cell's source (its stub), and each
    cell's id and digest (_cell_key), which tell the course's cells from those the learner adds."""
    _notebook("version_of", "notebook", notebook)
    return {"course": _digest(json.dumps(_inputs(notebook))),
            "exercises": {exercise_of(c): _digest(_source(c)) for c in notebook["cells"] if exercise_of(c)},
            "cells": [[c.get("id"), _cell_key(c)] for c in notebook["cells"]]}


# ----------------------------------------------------------------------------- the marker

def _read_marker(work):
    try:
        data = json.loads((Path(work) / MARKER).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _section(marker, name):
    found = marker.get(name)
    return found if isinstance(found, dict) else {}


def _write_marker(work, homes, lessons):
    marker = {"about": "The attention course's work folder: your own copies of the notebooks, and "
                       f"{PROGRESS}, each exercise's verdicts. `lessons` records the course's version "
                       "of each lesson you copied (`python -m course_utils update` reads it).",
              "homes": homes, "lessons": lessons}
    atomic_files.write(Path(work) / MARKER, json.dumps(marker, indent=1, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- the copies

def copy_course(work, course=NOTEBOOKS, languages=i18n.LANGUAGES):
    """Copy the course's student notebooks (course/{en,zh}/*.ipynb) into work/{en,zh}/ where the
    learner has none; replace the learner's home only when the course's home changed since it was
    copied. Records what each copied lesson was. Returns the paths written."""
    _folder("copy_course", "work", work)
    _folder("copy_course", "course", course)
    _languages("copy_course", languages)
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    marker = _read_marker(work)
    homes, lessons = _section(marker, "homes"), _section(marker, "lessons")
    written = []
    for lang in languages:
        (work / lang).mkdir(exist_ok=True)
        renamed = _old_names(work, course, lang, lessons)
        _drop_old_home(work, course, lang, lessons)
        for source in sorted((Path(course) / lang).glob("*.ipynb")):
            target, key = work / lang / source.name, f"{lang}/{source.name}"
            if source.name in renamed:
                continue  # the learner's copy under its old name: `update` brings it in under the new one
            data = source.read_bytes()
            if source.name == HOMES[lang]:
                digest = _digest(data)
                if target.exists() and homes.get(lang) == digest:
                    continue
                homes[lang] = digest
            elif target.exists():
                if key not in lessons:  # copied before copies were recorded: recorded once known
                    _adopt(lessons, key, target, source)
                continue  # the learner's copy: never overwritten
            else:
                notebook = _read_notebook(source)
                if notebook is not None:
                    lessons[key] = version_of(notebook)
            atomic_files.write(target, data)
            written.append(target)
    _write_marker(work, homes, lessons)
    return written


def _old_names(work, course, lang, lessons):
    """{the course's name of a lesson: the name of the learner's copy of it under an old name} in `lang`: a
    lesson notebook of work/`lang`/ with the number of a course lesson the learner has no copy of under its
    name now, which is either recorded as copied (`lessons`, the marker's) or named as that language's
    copies were before (the Chinese copies had the names of the English ones). A notebook of the learner's
    own (``01_my_notes.ipynb``) is neither."""
    folder, lessons_here = Path(work) / lang, {}
    names = {path.name for path in (Path(course) / lang).glob("*.ipynb")}
    for name in names:
        if file_names.lesson_number(name):
            lessons_here.setdefault(file_names.lesson_number(name), name)
    elsewhere = {path.name for other in i18n.LANGUAGES if other != lang
                 for path in (Path(course) / other).glob("*.ipynb")}
    found = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")) if folder.is_dir() else []:
        new = lessons_here.get(file_names.lesson_number(path.name))
        if new is None or path.name in names or (folder / new).exists():
            continue
        if f"{lang}/{path.name}" in lessons or path.name in elsewhere:
            found.setdefault(new, path.name)
    return found


def move_old_copies(work, languages=i18n.LANGUAGES):
    """Move each copy an earlier update kept beside its lesson (``work/zh/01_attention_basics.before-update-
    20261128-073413.ipynb``) into its language's before-update/ folder, named as an update names it now
    (file_names.moved_before_update): they cluttered the file browser and read like lessons. A name taken
    there by another file gets a number (``…_01_attention_basics-2.ipynb``): nothing is overwritten; a copy
    whose bytes are already there under that name is the same file, moved before, and is removed. Returns
    [(its old path, its new path)]; a second run finds nothing to move."""
    _folder("move_old_copies", "work", work)
    _languages("move_old_copies", languages)
    moved = []
    for lang in languages:
        folder = Path(work) / lang
        for path in sorted(folder.glob("*.before-update-*.ipynb")) if folder.is_dir() else []:
            try:
                if not path.is_file():
                    continue
                place = file_names.moved_before_update(path.name, path.stat().st_mtime)
                if place is None:
                    continue
                target, there = _free_place(folder / place, path.read_bytes())
                if there:
                    path.unlink()  # the same bytes are there already (put back from a backup?): one is enough
                else:
                    target.parent.mkdir(exist_ok=True)
                    os.rename(path, target)  # (one file system: the file is in one place or the other)
            except OSError:
                continue  # a file that cannot be read or moved stays where it is, as it is
            moved.append((path, target))
    return moved


def _free_place(wanted, data):
    """(where a file holding `data` goes, whether it is there already): `wanted`, or the first of `wanted`
    with -2, -3, … after its stem that no file holds, unless one on the way holds `data` already."""
    for number in range(1, 10_000):
        place = wanted if number == 1 else wanted.with_name(f"{wanted.stem}-{number}{wanted.suffix}")
        if not place.exists():
            return place, False
        if place.is_file() and place.read_bytes() == data:
            return place, True
    raise OSError(f"no free name for {wanted}")


def renamed_lessons(work, course=NOTEBOOKS, languages=i18n.LANGUAGES):
    """[(lang, the course's name of a lesson, the name of the learner's copy)] of the lessons the learner
    has under an old name (_old_names): what `update` moves to the new name."""
    _folder("renamed_lessons", "work", work)
    _folder("renamed_lessons", "course", course)
    _languages("renamed_lessons", languages)
    lessons = _section(_read_marker(work), "lessons")
    return [(lang, new, old) for lang in languages
            for new, old in sorted(_old_names(work, course, lang, lessons).items())]


def _drop_old_home(work, course, lang, lessons):
    """Remove from work/`lang`/ a copy of the home under another language's home name (the Chinese home
    was index.ipynb before), and any record of it (`lessons`): a home holds nothing of the learner's, and
    two would read alike."""
    for name in set(HOMES.values()) - {HOMES[lang]}:
        old = Path(work) / lang / name
        if old.is_file() and not (Path(course) / lang / name).exists():
            old.unlink()
            lessons.pop(f"{lang}/{name}", None)


def _adopt(lessons, key, target, source):
    """A copy made before copies were recorded: where its cells (but the exercises) are the course's
    now, it is a copy of this version, recorded as such."""
    mine, theirs = _read_notebook(target), _read_notebook(source)
    if mine is not None and theirs is not None and _same_lesson(mine, theirs):
        lessons[key] = version_of(theirs)


def _same_lesson(mine, theirs):
    """Whether the learner's copy `mine` is a copy of `theirs`, as far as its cells tell: every cell
    of `theirs` but the exercises is in `mine`, in order (the learner may have added cells of their own)."""
    cells = iter(_inputs(mine, exercises=False))
    return all(cell in cells for cell in _inputs(theirs, exercises=False))


def changed_lessons(work, course=NOTEBOOKS, languages=i18n.LANGUAGES):
    """[(lang, notebook's name)] of the lessons the learner has whose course version changed since
    they were copied (a copy whose version was never recorded: where it is not a copy of the course's
    now, _same_lesson)."""
    _folder("changed_lessons", "work", work)
    _folder("changed_lessons", "course", course)
    _languages("changed_lessons", languages)
    work = Path(work)
    lessons = _section(_read_marker(work), "lessons")
    changed = []
    for lang in languages:
        renamed = _old_names(work, course, lang, lessons)
        for source in sorted((Path(course) / lang).glob("*.ipynb")):
            target = work / lang / source.name
            if source.name in renamed:
                changed.append((lang, source.name))  # under its new name: `update` moves the learner's copy
                continue
            if source.name == HOMES[lang] or not target.exists():
                continue
            theirs = _read_notebook(source)
            if theirs is None:
                continue
            recorded = lessons.get(f"{lang}/{source.name}")
            if isinstance(recorded, dict):
                if recorded.get("course") != version_of(theirs)["course"]:
                    changed.append((lang, source.name))
            else:
                mine = _read_notebook(target)
                if mine is None or not _same_lesson(mine, theirs):
                    changed.append((lang, source.name))
    return changed


def _changed_by_learner(cell, exercise, copied, new_cell):
    """Whether the learner changed an exercise cell: its source differs from the stub they were
    given (`copied`: the stubs' digests, None where unknown: then from the new stub)."""
    if copied is not None and exercise in copied:
        return _digest(_source(cell)) != copied[exercise]
    return _source(cell).strip() != _source(new_cell).strip()


class Merged(NamedTuple):
    """What merge() made: the new notebook, and what of the learner's it holds or left out."""
    notebook: dict
    #: exercise ids whose answer was kept
    kept: list
    #: exercise ids answered that the new version lacks (the answer stays in the old copy)
    lost: list
    #: the learner's own cells kept: [{"cell": its first line, "number": its place (1 = first), "after": the
    #: first line of the cell it follows now, None at the top}]
    own: list = []
    #: course cells the learner changed, kept changed (the course did not change them): their first lines
    edits_kept: list = []
    #: course cells the learner changed that the course changed or removed: the course's stands (first lines)
    edits_left: list = []


def preview(cell, width=40):
    """A cell's first non-blank line, shortened to `width` characters: how a message names a cell."""
    _dict("preview", "cell", cell, {"en": "a notebook cell (a dict)", "zh": "笔记本单元格（dict）"})
    check.whole_number("preview", "width", width, 2, 10_000)
    line = next((line.strip() for line in _source(cell).splitlines() if line.strip()), "")
    return line if len(line) <= width else line[:width - 1] + "…"


def _course_cells(mine, theirs, recorded):
    """{index in mine: (its id, the key of the course's cell it was)} of the cells of `mine` that came
    from the course (the rest, but the exercises, are the learner's own): its id is one the course gave
    (`recorded`: [[id, key]] of the copied version; None for a copy from before it was recorded: the new
    version's ids), or it holds what a course cell held."""
    ids = dict(map(tuple, recorded)) if recorded is not None else {c.get("id"): _cell_key(c) for c in theirs["cells"]}
    keys = set(ids.values()) | {_cell_key(c) for c in theirs["cells"]}
    found = {}
    for index, cell in enumerate(mine["cells"]):
        key, cell_id = _cell_key(cell), cell.get("id")
        if exercise_of(cell):
            found[index] = (cell_id, key)
        elif cell_id is not None and cell_id in ids:
            # a copy from before the record: an id the new version gives another text says nothing of an edit
            found[index] = (cell_id, ids[cell_id] if recorded is not None else key)
        elif key in keys:
            found[index] = (cell_id, key)
    return found


def _place(cell, origin, theirs, keys, start):
    """The index in `theirs` of the course cell that `cell` of the learner's copy was (`origin`: its id
    and the key it had when copied): the same exercise; else the same text (the one with its id, else
    the first at or after `start`, else the first); else the same id. None where the new version lacks it."""
    exercise = exercise_of(cell)
    cells = theirs["cells"]
    if exercise:
        return next((i for i, c in enumerate(cells) if exercise_of(c) == exercise), None)
    cell_id, key = origin
    same = [i for i, k in enumerate(keys) if k == key]
    if same:
        return next((i for i in same if cells[i].get("id") == cell_id),
                    next((i for i in same if i >= start), same[0]))
    return next((i for i, c in enumerate(cells) if cell_id is not None and c.get("id") == cell_id), None)


def merge(mine, theirs, copied=None, cells=None):
    """The course's new notebook `theirs` with what the learner wrote in `mine`:

    - each exercise cell the learner changed (`copied`: what they were given, see _changed_by_learner)
      takes the place of the new version's cell of the same exercise id, with its source and outputs;
    - each cell the learner added (one the course did not give: `cells`, the ids and digests of the
      copied version's cells, see version_of and _course_cells) is kept, with its outputs, after the
      cell it followed (found in the new version by its exercise id, its text or its id; where the new
      version lacks it, after the one before it; at the top where none is left);
    - a course cell the learner changed keeps the change where the course left that cell as it was;
    - every other cell is the new version's (a course cell the learner deleted comes back).

    Returns a Merged."""
    _notebook("merge", "mine", mine)
    _notebook("merge", "theirs", theirs)
    _dict("merge", "copied", copied, {"en": "None or {exercise: digest of its stub}", "zh": "None 或 {练习: 其存根的摘要}"},
          optional=True)
    if cells is not None and (not isinstance(cells, list) or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(v, (str, type(None))) for v in pair)
            for pair in cells)):
        check.fail("merge", "cells", check.describe(cells),
                   {"en": "None or [[cell id, digest]], what version_of records", "zh": "None 或 [[单元格 id, 摘要]]，即 version_of 记录的内容"})
    answers = {}
    for cell in mine["cells"]:
        exercise = exercise_of(cell)
        if exercise and exercise not in answers:
            answers[exercise] = cell
    merged = json.loads(json.dumps(theirs))
    keys = [_cell_key(c) for c in theirs["cells"]]
    stubs = {exercise_of(c): c for c in theirs["cells"] if exercise_of(c)}
    kept = []
    for cell in merged["cells"]:
        exercise = exercise_of(cell)
        answer = answers.get(exercise) if exercise else None
        if answer is not None and _changed_by_learner(answer, exercise, copied, stubs[exercise]):
            _take(cell, answer)
            kept.append(exercise)
    lost = [exercise for exercise, cell in answers.items()
            if exercise not in stubs and _changed_by_learner(cell, exercise, copied, {"source": ""})]

    course = _course_cells(mine, theirs, cells)
    places, after, last, taken = {}, {}, -1, set()  # after: {index in theirs (-1: the top): the learner's cells}
    edits_kept, edits_left = [], []
    for index, cell in enumerate(mine["cells"]):
        if index not in course:
            after.setdefault(last, []).append(cell)
            continue
        place = _place(cell, course[index], theirs, keys, last + 1)
        if place is not None and place in taken and not exercise_of(cell):
            place = None  # two cells of the learner's copy held the same text: the first keeps the place
        if place is not None:
            taken.add(place)
            last = place
        if exercise_of(cell) or _cell_key(cell) == course[index][1]:
            continue
        if cells is not None:  # a course cell the learner changed (a copy recorded before cannot tell)
            if place is not None and keys[place] == course[index][1]:
                _take(merged["cells"][place], cell)
                edits_kept.append(preview(cell))
            else:
                edits_left.append(preview(cell))
    ids = {c.get("id") for c in merged["cells"]}
    result, own = list(after.get(-1, [])), []
    for index, cell in enumerate(merged["cells"]):
        result.append(cell)
        result += after.get(index, [])
    for number, cell in enumerate(result, 1):
        if not any(cell is c for c in merged["cells"]):
            cell = json.loads(json.dumps(cell))
            result[number - 1] = cell
            if cell.get("id") in ids:  # (ids are unique in a notebook)
                cell["id"] = f"own-{_digest(json.dumps(cell))[:12]}"
            before = next((result[i] for i in range(number - 2, -1, -1)), None)
            own.append({"cell": preview(cell), "number": number, "after": preview(before) if before else None})
    merged["cells"] = result
    return Merged(merged, kept, lost, own, edits_kept, edits_left)


def _take(cell, mine):
    """Put the learner's `mine` (source, outputs, execution count) into the new version's `cell`."""
    cell["source"] = mine.get("source", "")
    if cell.get("cell_type") == "code":
        cell["outputs"] = mine.get("outputs", [])
        cell["execution_count"] = mine.get("execution_count")


def update_course(work, course=NOTEBOOKS, languages=i18n.LANGUAGES, only=None, now=None):
    """Bring in every lesson the course changed since the learner copied it (`only`: lessons whose
    number is in it, e.g. ["01"]): merge() of the learner's copy and the course's, the learner's
    previous copy kept beside it. Returns [Updated]."""
    _folder("update_course", "work", work)
    _folder("update_course", "course", course)
    _languages("update_course", languages)
    if only is not None and (not isinstance(only, (tuple, list)) or not all(isinstance(n, str) for n in only)):
        check.fail("update_course", "only", check.describe(only),
                   {"en": "None or a list of lesson numbers, such as ['01']", "zh": "None 或课程编号列表，例如 ['01']"})
    if now is not None:
        check.number("update_course", "now", now, non_negative=True)
    work = Path(work)
    now = time.time() if now is None else now  # one time for every copy this update keeps
    renamed = {(lang, new): old for lang, new, old in renamed_lessons(work, course, languages)}
    done = []
    for lang, name in changed_lessons(work, course, languages):
        if only and name[:2] not in only:
            continue
        old_name = renamed.get((lang, name))
        target, source = work / lang / name, Path(course) / lang / name
        mine_path = work / lang / (old_name or name)  # the learner's copy: under its old name, if renamed
        mine, theirs = _read_notebook(mine_path), _read_notebook(source)
        if theirs is None:
            continue
        marker = _read_marker(work)
        lessons = _section(marker, "lessons")
        recorded = lessons.get(f"{lang}/{old_name or name}")
        copied = recorded.get("exercises") if isinstance(recorded, dict) else None
        cells = recorded.get("cells") if isinstance(recorded, dict) else None
        try:
            found = merge(mine or {"cells": []}, theirs, copied if isinstance(copied, dict) else None, cells)
        except check.ArgumentError:  # a record damaged by hand: merged as a copy from before the record
            found = merge(mine or {"cells": []}, theirs, None, None)
        old = work / lang / file_names.before_update(mine_path.name, now)
        # the learner's copy first, whole, in before-update/; then the new lesson over it (a renamed lesson:
        # then the old name gone); then the record
        old.parent.mkdir(exist_ok=True)
        atomic_files.write(old, mine_path.read_bytes())
        atomic_files.write(target, _dumps(found.notebook))
        if old_name:
            mine_path.unlink()
            lessons.pop(f"{lang}/{old_name}", None)
        lessons[f"{lang}/{name}"] = version_of(theirs)
        _write_marker(work, _section(marker, "homes"), lessons)
        done.append(Updated(target, old, *found[1:], renamed_from=mine_path if old_name else None))
    return done


class Updated(NamedTuple):
    """A lesson update_course brought in: its path, the learner's previous copy, and what merge() kept
    of the learner's (Merged's fields after its notebook, in the same order)."""
    path: Path
    old: Path
    kept: list
    lost: list
    own: list = []
    edits_kept: list = []
    edits_left: list = []
    #: the learner's copy's path under its old name, where the lesson was renamed (else None)
    renamed_from: Path = None


def sync_assets(work, root=ROOT):
    """Copy what the lessons link of the course (ASSETS: the diagrams, the glossary) into the work
    folder, where it is missing or differs. Returns the paths written."""
    _folder("sync_assets", "work", work)
    _folder("sync_assets", "root", root)
    work, written = Path(work), []
    for name, course_name in ASSETS.items():
        source = Path(root) / course_name
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for path in files:
            if not path.is_file():
                continue
            target = work / name / path.relative_to(source) if source.is_dir() else work / name
            data = path.read_bytes()
            if target.is_file() and target.read_bytes() == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_files.write(target, data)
            written.append(target)
    for lang, name in ((lang, name) for lang in i18n.LANGUAGES for name in set(file_names.GLOSSARIES.values())):
        old = work / lang / name  # another language's glossary name: this one's before it had its own
        if f"{lang}/{name}" not in ASSETS and old.is_file() and not (Path(root) / "notebooks" / lang / name).exists():
            old.unlink()
    return written


# ----------------------------------------------------------------------------- the record

def work_folder(start=None):
    """The learner's work folder for a notebook running in `start` (default: the current folder):
    `start` or the folder above it, whichever holds the marker; else None."""
    _folder("work_folder", "start", start, optional=True)
    try:
        start = Path(start or os.getcwd()).resolve()
    except OSError:
        return None
    for folder in (start, start.parent):
        if (folder / MARKER).is_file() and not folder.is_relative_to(NOTEBOOKS):
            return folder
    return None


def _recording_allowed():
    # not under nbgrader's execution, nor in a kernel of the course's grader (it sets COURSE_GRADING)
    return not os.environ.get("NBGRADER_EXECUTION") and not os.environ.get("COURSE_GRADING")


def load(work):
    """{exercise: {"status", "code", "when", ...}} from `work`'s progress file; {} when there is none,
    or it cannot be read (a corrupt file counts as no progress, and the next record starts it afresh)."""
    _folder("load", "work", work)
    try:
        data = json.loads((Path(work) / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    exercises = data.get("exercises") if isinstance(data, dict) else None
    if not isinstance(exercises, dict):
        return {}
    return {name: entry for name, entry in exercises.items()
            if isinstance(name, str) and isinstance(entry, dict) and entry.get("status") in STATUSES}


def merged_entry(previous, verdict):
    """An exercise's record after `verdict` ({"status", "code", "when", "lang"}), given its record so
    far (None for none): see the module's docstring. The record is the latest verdict that counts,
    with "passed" (the latest pass: {"when", "lang"}) and "history" (the last HISTORY verdicts)."""
    if not isinstance(verdict, dict) or verdict.get("status") not in STATUSES or \
            not all(key in verdict for key in ("when", "lang")):
        check.fail("merged_entry", "verdict", check.describe(verdict),
                   {"en": f"a dict with 'status' (one of {', '.join(STATUSES)}), 'code', 'when' and 'lang'",
                    "zh": f"dict，含 'status'（{'、'.join(STATUSES)} 之一）、'code'、'when' 和 'lang'"})
    previous = previous if isinstance(previous, dict) and previous.get("status") in STATUSES else None
    if previous is not None and verdict["status"] == NOT_ATTEMPTED and previous["status"] != NOT_ATTEMPTED:
        return previous  # a stub merely run says nothing of the attempt recorded
    history = previous.get("history") if previous is not None else None
    history = [h for h in history if isinstance(h, dict)] if isinstance(history, list) else (
        [{key: previous.get(key) for key in ("status", "code", "when", "lang")}] if previous is not None else [])
    if history and history[-1].get("status") == NOT_ATTEMPTED and verdict["status"] == NOT_ATTEMPTED:
        history.pop()  # the stub run again: one line for it
    entry = dict(verdict, history=(history + [dict(verdict)])[-HISTORY:])
    if verdict["status"] == "passed":
        entry["passed"] = {"when": verdict["when"], "lang": verdict["lang"]}
    elif previous is not None:
        earlier = previous.get("passed")
        if not isinstance(earlier, dict) and previous["status"] == "passed":
            earlier = {"when": previous.get("when"), "lang": previous.get("lang")}
        if isinstance(earlier, dict):
            entry["passed"] = earlier
    return entry


def record(verdict, start=None, lang=None):
    """Keep `verdict` (a grading.Verdict), written in `lang` (default: the language set up), in the
    learner's progress file (see merged_entry). Returns the file's path, or None where nothing was
    written (no work folder, the grader, an error). Never raises for a file or folder problem."""
    if not _recording_allowed():
        return None
    work = work_folder(start)
    if work is None:
        return None
    try:
        exercises = load(work)
        name = str(verdict.exercise)
        exercises[name] = merged_entry(exercises.get(name), {
            "status": str(verdict.status),
            "code": None if verdict.code is None else str(verdict.code),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "lang": lang or i18n.language(),
        })
        text = json.dumps({"format": FORMAT, "exercises": dict(sorted(exercises.items()))}, indent=1, ensure_ascii=False)
        atomic_files.write(work / PROGRESS, text + "\n")
    except OSError:
        return None
    try:
        refresh_homes(work)  # the home shows it at once, open or not (course_utils.live_progress)
    except (OSError, check.ArgumentError):
        pass  # the verdict is recorded: a home that cannot be rewritten is rewritten at the next launch
    return work / PROGRESS


# ----------------------------------------------------------------------------- the table

def state_text(entry, lang):
    """An exercise's latest check, as the table shows it ("✘ not yet (NO_SCALE); ✔ passed before, on 2025-03-01")."""
    _lang("state_text", lang)
    if entry is not None and (not isinstance(entry, dict) or entry.get("status") not in STATUSES):
        check.fail("state_text", "entry", check.describe(entry),
                   {"en": f"None or a record with a 'status' of {', '.join(STATUSES)}",
                    "zh": f"None，或 'status' 为 {'、'.join(STATUSES)} 之一的记录"})
    if entry is None:
        return i18n.text(lang, "progress.unchecked")
    state = i18n.text(lang, f"progress.{entry['status']}")
    if entry["status"] in ("failed", "crashed") and entry.get("code"):
        state += f" ({entry['code']})"
    earlier = entry.get("passed")
    if entry["status"] != "passed" and isinstance(earlier, dict):
        state += i18n.text(lang, "progress.passed_before", date=str(earlier.get("when") or "")[:10])
    return state


def progress_rows(exercises, recorded, lang):
    """[(lesson, "✔ passed of total" for the lesson, exercise, latest check)] for every exercise, in `lang`."""
    _lang("progress_rows", lang)
    if isinstance(exercises, (str, bytes)) or not hasattr(exercises, "__iter__") or \
            not all(isinstance(e, str) for e in exercises):
        check.fail("progress_rows", "exercises", check.describe(exercises),
                   {"en": "exercise ids, such as ['01.scaled_dot']", "zh": "练习编号，例如 ['01.scaled_dot']"})
    if not isinstance(recorded, dict) or not all(isinstance(entry, dict) for entry in recorded.values()):
        check.fail("progress_rows", "recorded", check.describe(recorded),
                   {"en": "{exercise: its record}, what load() returns", "zh": "{练习: 其记录}，即 load() 的返回值"})
    lessons = {}
    for exercise in exercises:
        lessons.setdefault(exercise.split(".", 1)[0], []).append(exercise)
    rows = []
    for lesson, names in lessons.items():
        passed = sum(recorded.get(name, {}).get("status") == "passed" for name in names)
        count = i18n.text(lang, "progress.lesson_count" if passed else "progress.lesson_count_none",
                          passed=passed, total=len(names))  # a tick where something passed, not at zero
        rows += [(lesson, count, name, state_text(recorded.get(name), lang)) for name in names]
    return rows


def progress_text(start=None, lang=None):
    """(text, html or None): the learner's progress, as plain text and as an HTML table with a row per
    exercise and, per lesson, how many of its exercises pass."""
    _folder("progress_text", "start", start, optional=True)
    _lang("progress_text", lang, optional=True)
    lang = lang or i18n.language()
    work = work_folder(start)
    recorded = load(work) if work is not None else {}
    exercises = EXERCISES
    if not any(name in recorded for name in exercises):
        return i18n.text(lang, "progress.none"), None
    rows = progress_rows(exercises, recorded, lang)
    passed = sum(recorded.get(name, {}).get("status") == "passed" for name in exercises)
    summary = i18n.text(lang, "progress.summary", passed=passed, total=len(exercises))
    columns = i18n.text(lang, "progress.columns").split("|")
    text = "\n".join([summary, "", " | ".join(columns), *(" | ".join(row) for row in rows)])
    body, done = [], set()
    for lesson, count, exercise, state in rows:
        cells = ""
        if lesson not in done:  # the lesson and its count once, beside all its exercises
            done.add(lesson)
            span = sum(row[0] == lesson for row in rows)
            cells = (f'<td rowspan="{span}" style="{LEFT}">{html.escape(lesson)}</td>'
                     f'<td rowspan="{span}" class="course-lesson-count" style="{LEFT}">{html.escape(count)}</td>')
        body.append(f'<tr>{cells}<td style="{LEFT}">{html.escape(exercise)}</td>'
                    f'<td style="{LEFT}">{html.escape(state)}</td></tr>')
    head = "".join(f'<th style="{LEFT}">{html.escape(column)}</th>' for column in columns)
    table = (f"<p>{html.escape(summary)}</p><table><thead><tr>{head}</tr></thead><tbody>"
             + "".join(body) + "</tbody></table>")
    return text, table


def progress_outputs(start=None, lang=None, home=None):
    """The outputs a run of the home's progress cell gives (what progress() displays), as notebook data;
    with `home` (the home's path from the work folder, "en/index.ipynb"), the output the learner's home
    keeps, which follows the checks while it is open (course_utils.live_progress)."""
    _folder("progress_outputs", "start", start, optional=True)
    _lang("progress_outputs", lang, optional=True)
    if home is not None and not isinstance(home, str):
        check.fail("progress_outputs", "home", check.describe(home),
                   {"en": "None or the home's path in the work folder, such as 'en/index.ipynb'",
                    "zh": "None，或首页在工作文件夹中的路径，例如 'en/index.ipynb'"})
    text, table = progress_text(start, lang)
    if home is not None:
        shown = table if table is not None else f"<p>{html.escape(text)}</p>"
        return [{"data": {"text/html": live_html(shown, home, PROGRESS_TAG), "text/plain": text}, "metadata": {},
                 "output_type": "display_data"}]
    if table is None:
        return [{"name": "stdout", "output_type": "stream", "text": text + "\n"}]
    return [{"data": {"text/html": table, "text/plain": text}, "metadata": {}, "output_type": "display_data"}]


def progress(lang=None):
    """Show which exercises you have passed: each check's latest verdict, from your work folder's
    progress.json, in the notebook's language (or `lang`, "en" or "zh")."""
    _lang("progress", lang, optional=True)
    text, table = progress_text(lang=lang)
    if table is None:
        print(text)
        return
    try:
        from IPython.display import display

        display({"text/plain": text, "text/html": table}, raw=True)
    except ImportError:
        print(text)


def _joined(value):
    """Notebook data with its multiline strings joined (a file may hold "text" as a list of lines)."""
    if isinstance(value, dict):
        return {key: _joined(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return "".join(value)
    if isinstance(value, list):
        return [_joined(item) for item in value]
    return value


def refresh_homes(work, languages=i18n.LANGUAGES, sign=True):
    """Rewrite the output of each home's progress cell (tagged PROGRESS_TAG, or the code cell that
    calls progress()) from progress.json, as running it would, so that the home opens showing the
    progress as it is, and follows it while open (course_utils.live_progress: with `sign`, the home is
    signed so that JupyterLab runs the script that does it). Launches and checks call it. Returns the
    homes written."""
    _folder("refresh_homes", "work", work)
    _languages("refresh_homes", languages)
    if not isinstance(sign, bool):
        check.fail("refresh_homes", "sign", check.describe(sign), {"en": "True or False", "zh": "True 或 False"})
    written = []
    for lang in languages:
        path = Path(work) / lang / HOMES[lang]
        notebook = _read_notebook(path)
        if notebook is None:
            continue
        cells = [c for c in notebook["cells"] if c.get("cell_type") == "code"]
        cell = next((c for c in cells if PROGRESS_TAG in ((c.get("metadata") or {}).get("tags") or [])),
                    next((c for c in cells if "progress()" in _source(c)), None))
        if cell is None:
            continue
        outputs = progress_outputs(path.parent, lang, home=f"{lang}/{HOMES[lang]}")
        if _joined(cell.get("outputs")) == outputs:
            continue
        cell["outputs"], cell["execution_count"] = outputs, None
        atomic_files.write(path, _dumps(notebook))
        if sign:
            trust(path)
        written.append(path)
    return written


# ----------------------------------------------------------------------------- the commands

def prepare(work, lang, course=NOTEBOOKS, root=ROOT, announce=True):
    """What every launch does first: copy what the learner lacks, the lessons' diagrams and glossary,
    refresh the homes' progress; say what was copied and (`announce`) which lessons the course changed
    (the launch says it itself, after JupyterLab's log). Returns those lessons."""
    _folder("prepare", "work", work)
    _lang("prepare", lang)
    _say_moved(lang, move_old_copies(work))
    for path in copy_course(work, course):
        print(i18n.text(lang, "learner.copied", path=path))
    sync_assets(work, root)
    refresh_homes(work)
    for lang_home in (Path(work) / name / HOMES[name] for name in i18n.LANGUAGES):
        if lang_home.is_file():  # signed with this user's key, whoever wrote it last (`make update`, a check)
            trust(lang_home)
    changed = changed_lessons(work, course)
    if changed and announce:
        names = ", ".join(f"{name_lang}/{name}" for name_lang, name in changed)
        print(i18n.text(lang, "learner.changed", lessons=names, work=work))
    return changed


def _say_moved(lang, moved):
    """Say where each copy move_old_copies moved went (one line each: a learner looking for it finds it)."""
    for old, new in moved:
        print(i18n.text(lang, "learner.old_copy_moved", old=old, new=new.relative_to(old.parent).as_posix()))


def update(work, lang, course=NOTEBOOKS, only=None):
    """`python -m course_utils update`: print what update_course did."""
    _folder("update", "work", work)
    _lang("update", lang)
    _say_moved(lang, move_old_copies(work))
    done = update_course(work, course, only=only)
    for lesson in done:
        kept_text = ", ".join(lesson.kept) if lesson.kept else i18n.text(lang, "learner.kept_none")
        old_copy = lesson.old.relative_to(lesson.path.parent).as_posix()  # before-update/<date>_<time>_<name>
        if lesson.renamed_from is not None:
            print(i18n.text(lang, "learner.renamed", old=lesson.renamed_from, path=lesson.path.name))
        print(i18n.text(lang, "learner.updated", path=lesson.path, kept=kept_text, old=old_copy))
        for exercise in lesson.lost:
            print(i18n.text(lang, "learner.lost", exercise=exercise, old=old_copy))
        for own in lesson.own:
            if own["after"] is None:
                print(i18n.text(lang, "learner.own_top", cell=own["cell"], number=own["number"]))
            else:
                print(i18n.text(lang, "learner.own_kept", cell=own["cell"], number=own["number"], after=own["after"]))
        for cell in lesson.edits_kept:
            print(i18n.text(lang, "learner.edit_kept", cell=cell))
        for cell in lesson.edits_left:
            print(i18n.text(lang, "learner.edit_left", cell=cell, old=old_copy))
    if not done:
        print(i18n.text(lang, "learner.up_to_date"))
    refresh_homes(work)
    return done
