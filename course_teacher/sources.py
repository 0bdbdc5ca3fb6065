"""The course's lessons: where their sources are and where each one renders to.

What every tool that reads the lessons needs and nothing more (the build, the rendering, the links, the answer
keys, the exercises' references), so that none of them imports the build to find them.
``notebooks/source/NN_slug.py`` is lesson NN's one source (course_teacher.build renders it); its four notebooks
are ``notebooks/{en,zh}/<name>`` and ``notebooks/solutions/{en,zh}/<name>``, where the name is each language's
(``notebook_name``: ``01_attention_basics.ipynb``, ``01_注意力基础.ipynb``; course_utils.file_names holds the
table, the homes' and the glossaries' names too). The readers here look
the folders up when called: a test that builds a throwaway course moves them
(``monkeypatch.setattr(sources, "SOURCES", ...)``).
"""

from pathlib import Path

from course_utils import file_names
from course_utils.file_names import GLOSSARIES, HOMES

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "source"
LANGUAGES = ("en", "zh")


def lessons(only=None):
    """{"01": path of notebooks/source/01_*.py, ...}, optionally just the one numbered `only`."""
    found = {path.name[:2]: path for path in sorted(SOURCES.glob("[0-9][0-9]_*.py"))}
    if only is not None:
        if only not in found:
            raise SystemExit(f"build: argument '--only' got {only!r}; needs one of {', '.join(found)}")
        found = {only: found[only]}
    return found


def tags(cell):
    """A cell's tags (``lang-en``, ``exercise``, ...)."""
    return cell.metadata.get("tags", [])


def notebook_name(lesson_path, lang):
    """The file name of the lesson whose source is `lesson_path` (notebooks/source/NN_slug.py), in `lang`."""
    return file_names.lesson_notebook(Path(lesson_path).stem, lang)


def student_notebook(lesson_path, lang):
    """The path of a lesson's student notebook in `lang` (notebooks/{lang}/<its name>)."""
    return NOTEBOOKS / lang / notebook_name(lesson_path, lang)


def targets(lesson_path):
    """[(lang, solutions, path of the rendered notebook)] for one lesson source."""
    return [
        (lang, solutions, NOTEBOOKS / ("solutions" if solutions else "") / lang / notebook_name(lesson_path, lang))
        for solutions in (False, True)
        for lang in LANGUAGES
    ]
