"""The answer key the grader grades against: what it needs to read and judge a lesson's notebooks,
as data, and nothing that computes an answer.

A key is a folder::

    key.json     the format, and for each lesson it holds and each language: the lesson's exercises
                 in notebook order (id, the name of the learner's function, points, the names the
                 exercise forbids) and the text of every code cell of the course's student notebook
                 (the cells the learner did not write: the scan reads them only for the names they
                 bind); and the fingerprints of the course's own functions (copies.py), to tell a copy
    <id>.pt      each exercise's grading.Reference on its public and hidden cases: arguments, the
                 expected results and gradients, what each known mistake gives there (the format
                 of course_utils/exercises/public, read with ``torch.load(weights_only=True)``)

``python -m course_teacher.publish --key FOLDER --seed N`` writes one from the course's sources
and references (teacher side); ``read`` needs nothing but the student package and torch, so an
autograder ships a key beside the grader instead of the references that made it. ``make grade``
writes a key from the checkout into a temporary folder, then grades against it like any other.

A key holds no function, only data: on a platform whose files the public can read (Classroom 50),
the hidden cases and their expected results are readable, and the key's docs say so.
"""

import functools
import io
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.exercises import public

FORMAT = "course_teacher.grade.key/1"
INDEX = "key.json"
#: The hidden cases' seed when the teacher gives none. It is public (this line): set your own with
#: ``make grade SEED=...`` (``--seed``) so that no learner can know the hidden cases.
DEFAULT_SEED = 20_261_125


class NotAKey(ValueError):
    """A folder that is not an answer key this grader can read (the message says why)."""


@dataclass(frozen=True)
class Exercise:
    """One exercise as the grader reads a notebook for it."""

    id: str
    function: str  # the name the exercise gave the learner's function
    points: int
    forbidden: tuple = ()  # the names its check refuses, as the registry writes them


class Key:
    """An answer key, read from its folder (``read``)."""

    def __init__(self, folder, lessons, copies=None):
        self.folder = Path(folder)
        self._lessons = lessons  # {lesson: {lang: {"exercises": [...], "cells": [...]}}}
        self.copies = dict(copies or {})  # {fingerprint: what it is the fingerprint of}

    @property
    def lessons(self):
        """The lessons this key grades, in order ("00", "01", ...)."""
        return tuple(sorted(self._lessons))

    def exercises(self, lesson):
        """The ids of `lesson`'s exercises, in notebook order (empty for a lesson the key lacks)."""
        langs = self._lessons.get(lesson, {})
        return tuple(e["id"] for e in next(iter(langs.values()))["exercises"]) if langs else ()

    @functools.cache
    def plan(self, lesson, lang):
        """(exercises, course cells) of `lesson` in `lang`: its Exercises in notebook order and the
        stripped text of every code cell of the course's student notebook in that language."""
        entry = self._lessons[lesson][lang]
        exercises = tuple(Exercise(e["id"], e["function"], int(e["points"]), tuple(e["forbidden"]))
                          for e in entry["exercises"])
        return exercises, frozenset(text.strip() for text in entry["cells"])

    @functools.cache
    def course_cells(self, lesson):
        """The text of every code cell the course distributes for `lesson`, in every language (a
        learner may hand in either)."""
        return frozenset().union(*(self.plan(lesson, lang)[1] for lang in self._lessons[lesson]))

    @functools.cache
    def reference(self, exercise):
        """The grading.Reference of `exercise` on the key's cases (public and hidden)."""
        if exercise not in {e for lesson in self._lessons for e in self.exercises(lesson)}:
            raise NotAKey(f"the answer key in {self.folder} has no exercise {exercise!r}")
        return public.load(exercise, self.folder / f"{exercise}.pt")


def read(folder):
    """The Key in `folder`; NotAKey (a ValueError) when it is not one."""
    folder = Path(folder)
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise NotAKey(f"{folder} holds no answer key ({INDEX}: {error})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT or not isinstance(index.get("lessons"), dict):
        raise NotAKey(f"{folder / INDEX} is not an answer key of format {FORMAT!r}: write it again with "
                        "`python -m course_teacher.publish --key`")
    copies = index.get("copies", {})
    if not isinstance(copies, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in copies.items()):
        raise NotAKey(f"{folder / INDEX}: its copies are not a table of fingerprints")
    key = Key(folder, index["lessons"], copies)
    for lesson in key.lessons:
        for exercise in key.exercises(lesson):
            if not (folder / f"{exercise}.pt").is_file():
                raise NotAKey(f"the answer key in {folder} lacks {exercise}.pt")
    return key


def encode(references, plans, copies):
    """{file name: bytes} of a key: `references` {id: grading.Reference}, `plans` {lesson: {lang:
    {"exercises": [{"id", "function", "points", "forbidden"}], "cells": [text]}}}, `copies`
    {fingerprint: label}."""
    files = {INDEX: json.dumps({"format": FORMAT, "lessons": plans, "copies": copies}, indent=1,
                               ensure_ascii=False, sort_keys=True).encode("utf-8")}
    for exercise, reference in sorted(references.items()):
        buffer = io.BytesIO()
        torch.save(public.encode(reference), buffer)
        files[f"{exercise}.pt"] = buffer.getvalue()
    return files
