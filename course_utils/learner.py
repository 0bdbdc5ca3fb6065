"""The learner's own folder: copies of the notebooks to work in, and each check's latest verdict.

    python -m course_utils copy work             copy the course's notebooks into work/ (`make lab`)

``make lab`` opens the course from a folder of the learner's own, ``work/`` (git-ignored), so that
JupyterLab's autosave never edits the course's notebooks and a ``git pull`` never conflicts::

    work/
      .course-work      says that this folder is a learner's (checks record their verdicts only here)
      progress.json     each exercise's latest verdict (written by check(), read by progress())
      en/  zh/          the learner's copies of notebooks/en/ and notebooks/zh/

``work/en/`` sits as deep as ``notebooks/en/``, so the lessons' links to ``../../images/`` still reach
the diagrams. ``copy`` copies what the learner lacks: everything on the first launch, a lesson the
course gained since. It never overwrites a lesson the learner has. The one exception is the course
home (``index.ipynb``), which holds nothing of the learner's: it is replaced when the course's home
changed since it was copied (a new lesson appears in it).

A check records its verdict only where a work folder says it is one: the folder the notebook runs
in, or the one above it, holds ``.course-work``. So nothing is written when the course's own
notebooks run (the build, nbval, Binder: ``notebooks/`` holds no such file), nor in the teacher's
grader (its kernels run in an empty read-only folder, and under nbgrader's execution nothing is
recorded either). Recording never changes a verdict and never fails a check: an unreadable or
corrupt file is started afresh, a folder that cannot be written is left alone.
"""

import argparse
import hashlib
import html
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import i18n

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
MARKER, PROGRESS, HOME = ".course-work", "progress.json", "index.ipynb"
FORMAT = 1
#: The statuses a verdict can have (course_utils.exercises.grading), in the progress file's words.
STATUSES = ("passed", "failed", "not attempted", "crashed")


# ----------------------------------------------------------------------------- the copies

def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_marker(work):
    try:
        data = json.loads((work / MARKER).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def copy_course(work, course=NOTEBOOKS, languages=i18n.LANGUAGES):
    """Copy the course's student notebooks (course/{en,zh}/*.ipynb) into work/{en,zh}/ where the
    learner has none; replace the learner's home only when the course's home changed since it was
    copied. Returns the paths written."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    marker = _read_marker(work)
    homes = marker.get("homes") if isinstance(marker.get("homes"), dict) else {}
    written = []
    for lang in languages:
        (work / lang).mkdir(exist_ok=True)
        for source in sorted((Path(course) / lang).glob("*.ipynb")):
            target = work / lang / source.name
            if source.name == HOME:
                digest = _digest(source)
                if target.exists() and homes.get(lang) == digest:
                    continue
                homes[lang] = digest
            elif target.exists():
                continue  # the learner's copy: never overwritten
            shutil.copyfile(source, target)
            written.append(target)
    marker = {"about": "The attention course's work folder: your own copies of the notebooks, and "
                       f"{PROGRESS}, the latest verdict of each exercise's check.", "homes": homes}
    (work / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return written


# ----------------------------------------------------------------------------- the record

def work_folder(start=None):
    """The learner's work folder for a notebook running in `start` (default: the current folder):
    `start` or the folder above it, whichever holds the marker; else None."""
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
    """{exercise: {"status", "code", "when"}} from `work`'s progress file; {} when there is none, or
    it cannot be read (a corrupt file counts as no progress, and the next record starts it afresh)."""
    try:
        data = json.loads((Path(work) / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    exercises = data.get("exercises") if isinstance(data, dict) else None
    if not isinstance(exercises, dict):
        return {}
    return {name: entry for name, entry in exercises.items()
            if isinstance(name, str) and isinstance(entry, dict) and entry.get("status") in STATUSES}


def record(verdict, start=None):
    """Keep `verdict` (a grading.Verdict) as its exercise's latest in the learner's progress file.
    Returns the file's path, or None where nothing was written (no work folder, the grader, an
    error). Never raises for a file or folder problem."""
    if not _recording_allowed():
        return None
    work = work_folder(start)
    if work is None:
        return None
    try:
        exercises = load(work)
        exercises[str(verdict.exercise)] = {
            "status": str(verdict.status),
            "code": None if verdict.code is None else str(verdict.code),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        text = json.dumps({"format": FORMAT, "exercises": dict(sorted(exercises.items()))}, indent=1, ensure_ascii=False)
        # written beside the file, then moved over it: a kernel stopped mid-write leaves the old file whole
        handle, partial = tempfile.mkstemp(prefix=".progress-", suffix=".json", dir=work)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text + "\n")
            os.replace(partial, work / PROGRESS)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    except OSError:
        return None
    return work / PROGRESS


# ----------------------------------------------------------------------------- the table

def _exercises():
    from .exercises import EXERCISES

    return EXERCISES


def progress_rows(exercises, recorded, lang):
    """[(lesson, exercise, latest check)] for every exercise, in the language `lang`."""
    rows = []
    for exercise in exercises:
        entry = recorded.get(exercise)
        if entry is None:
            state = i18n.text(lang, "progress.unchecked")
        else:
            state = i18n.text(lang, f"progress.{entry['status']}")
            if entry["status"] == "failed" and entry.get("code"):
                state += f" ({entry['code']})"
        rows.append((exercise.split(".", 1)[0], exercise, state))
    return rows


def progress_text(start=None, lang=None):
    """(text, html or None): the learner's progress, as plain text and as an HTML table."""
    lang = lang or i18n.language()
    work = work_folder(start)
    recorded = load(work) if work is not None else {}
    exercises = _exercises()
    if not any(name in recorded for name in exercises):
        return i18n.text(lang, "progress.none"), None
    rows = progress_rows(exercises, recorded, lang)
    passed = sum(recorded.get(name, {}).get("status") == "passed" for name in exercises)
    summary = i18n.text(lang, "progress.summary", passed=passed, total=len(exercises))
    columns = i18n.text(lang, "progress.columns").split("|")
    text = "\n".join([summary, "", " | ".join(columns), *(" | ".join(row) for row in rows)])
    cells = lambda tag, values: "".join(f"<{tag}>{html.escape(v)}</{tag}>" for v in values)
    table = (f"<p>{html.escape(summary)}</p><table><thead><tr>{cells('th', columns)}</tr></thead><tbody>"
             + "".join(f"<tr>{cells('td', row)}</tr>" for row in rows) + "</tbody></table>")
    return text, table


def progress(lang=None):
    """Show which exercises you have passed: each check's latest verdict, from your work folder's
    progress.json, in the notebook's language (or `lang`, "en" or "zh")."""
    text, table = progress_text(lang=lang)
    if table is None:
        print(text)
        return
    try:
        from IPython.display import display

        display({"text/plain": text, "text/html": table}, raw=True)
    except ImportError:
        print(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_utils", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser("copy", help="copy the course's notebooks into a work folder (never overwriting the learner's)")
    copy.add_argument("work", help="the work folder, e.g. work")
    args = parser.parse_args(argv)
    written = copy_course(Path(args.work))
    for path in written:
        print(f"{path}: copied from the course")
    return 0


if __name__ == "__main__":
    sys.exit(main())
