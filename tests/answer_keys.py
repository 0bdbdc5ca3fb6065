"""Answer keys for the tests that grade or read a key in their own process (grader.grade_one, a key's
plan), shared by the whole test session.

``grader.default_answers()`` writes the key of every lesson, once per process: a minute of CPU (lesson
10's references above all), paid again by each pytest-xdist worker that needs one. These tests grade
or read one lesson, so they share ``key(tmp_path_factory, "00")``: the key of the lessons named, with
the public seed that default_answers uses (the same cases, so the same verdicts), written by
grader.write_answers (the teacher side in a process of its own, as the grader does) once per test
session, by whichever worker asks first; the other waits on a file lock and reads it."""

import fcntl
import functools
import os
import shutil

from course_teacher.grade import grader
from course_teacher.grade import key as answer_key


def shared_folder(tmp_path_factory):
    """The folder every xdist worker of this session shares (the session's base temporary folder
    without xdist): where what a session makes once is kept (here, and test_grade_hostile's runs)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def key(tmp_path_factory, *lessons):
    """The answer key of `lessons` ("00", ...), public seed, written once per test session."""
    return _read(shared_folder(tmp_path_factory) / f"answer-key-{'-'.join(sorted(lessons))}")


@functools.cache
def _read(folder):
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / answer_key.INDEX).is_file():
            return answer_key.read(folder)
        written = folder.with_name(f"{folder.name}.writing")  # a worker killed while writing leaves no half key
        shutil.rmtree(written, ignore_errors=True)
        grader.write_answers(written, answer_key.DEFAULT_SEED, folder.name.split("-")[2:])
        written.rename(folder)
        return answer_key.read(folder)
