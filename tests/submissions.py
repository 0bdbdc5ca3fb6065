"""Submissions built from the committed renders, for the tests of grading (test_grade,
test_grade_hostile, test_platforms): a student render with some exercise cells answered, a
learner's own cell inserted, or every exercise solved."""

import textwrap
from pathlib import Path

import nbformat

from course_utils import file_names

ROOT = Path(__file__).resolve().parents[1]


def render(name, lang, solutions=False):
    """A committed render: notebooks/<lang>/<the lesson's name there>, or the solutions' (name: the English one,
    00_tensor_shapes.ipynb; in Chinese the lesson is 00_张量形状入门.ipynb, course_utils.file_names)."""
    folder = ROOT / "notebooks" / ("solutions" if solutions else "") / lang
    return nbformat.read(str(folder / file_names.lesson_notebook(Path(name).stem, lang)), as_version=4)


def exercise_cell(notebook, exercise):
    return next(c for c in notebook.cells if c.metadata.get("exercise") == exercise)


def answer(notebook, exercise, source):
    """The notebook with exercise `exercise`'s cell holding `source`."""
    exercise_cell(notebook, exercise).source = textwrap.dedent(source).strip()
    return notebook


def insert(notebook, before_exercise, source):
    """A new code cell (the learner's own) just before an exercise cell; its number (from 1)."""
    index = notebook.cells.index(exercise_cell(notebook, before_exercise))
    notebook.cells.insert(index, nbformat.v4.new_code_cell(textwrap.dedent(source).strip()))
    return index + 1


def solved(name, lang, only=None):
    """The student render with the exercise cells (`only` those, if given) replaced by the solutions'."""
    notebook, solutions = render(name, lang), render(name, lang, solutions=True)
    for cell in notebook.cells:
        exercise = cell.metadata.get("exercise")
        if exercise and (only is None or exercise in only):
            cell.source = exercise_cell(solutions, exercise).source
    return notebook


def save(notebook, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))
    return path
