"""What the grader reads (course_teacher.grade.submission): hostile files in a submissions folder.

Each case is a finding of the security review, run here and shown fixed: a pipe, a link to
/dev/zero, a link to /etc/passwd, a link to another student's notebook, a 21 MB file, a socket,
files that are not JSON or not notebooks (their contents never quoted), and a notebook whose
cells are another lesson's than its file name or the assignment says. The notebooks are small
ones built here with nbformat; nothing runs a kernel.
"""

import json
import os
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_teacher.grade import submission
from course_teacher.grade.submission import MAX_BYTES, reason

LINK, SPECIAL = reason("NOT_REGULAR", "en", "link"), reason("NOT_REGULAR", "en", "special")


def _notebook(lesson="00", checks=False, metadata=True, lang="en"):
    """A small notebook of `lesson`: a setup cell and one exercise cell per exercise (marked by
    its metadata, and/or followed by a check cell)."""
    from course_teacher.exercises import EXERCISES

    cells = [nbformat.v4.new_code_cell(f'from course_utils import setup\nsetup(lang="{lang}")')]
    for exercise in sorted(e for e in EXERCISES if e.startswith(lesson + ".")):
        name = exercise.split(".", 1)[1]
        cell = nbformat.v4.new_code_cell(f"def {name}(*args):\n    return None")
        if metadata:
            cell.metadata["exercise"] = exercise
        cells.append(cell)
        if checks:
            cells.append(nbformat.v4.new_code_cell(f'check("{exercise}", {name})'))
    return nbformat.v4.new_notebook(cells=cells)


def _save(notebook, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))
    return path


def _within(seconds, function, *args, **kwargs):
    """function(*args, **kwargs), which must return within `seconds` (it runs in a daemon thread:
    a call that blocks fails the test instead of hanging it)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 (handed back to the test)
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{function.__name__} blocked for more than {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _problems(found):
    return {f.key: (f.problem, f.kind) for f in found}


# ----------------------------------------------------------------------------- special files

def test_a_pipe_named_like_a_notebook_is_reported_and_blocks_nothing(tmp_path):
    """Finding: a FIFO named x.ipynb blocked the grader forever (nbformat opened it and waited
    for a writer). Now the walk reports it and reading it returns at once."""
    root = tmp_path / "submissions"
    _save(_notebook(), root / "alice" / "00_x.ipynb")
    os.mkfifo(root / "alice" / "x.ipynb")
    os.mkfifo(root / "y.ipynb")
    found = _within(10, submission.find, root)
    assert _problems(found) == {"alice/00_x": (None, None), "alice/x": ("NOT_REGULAR", "special"),
                                "y": ("NOT_REGULAR", "special")}
    for item in found:
        read = _within(10, submission.read, item.path, item.key, item.student)
        if item.problem:
            assert (read.problem, read.unreadable, read.cells) == ("NOT_REGULAR", SPECIAL, [])
        else:
            assert read.problem is None and read.lesson == "00" and read.cells
    # the pipe given alone, as the one submission
    assert _problems(_within(10, submission.find, root / "y.ipynb")) == {"y": ("NOT_REGULAR", "special")}


def test_a_link_to_dev_zero_is_not_followed(tmp_path):
    """Finding: a link to /dev/zero named z.ipynb grew the grader to the OOM killer. Now it is
    reported as a link, never opened; /dev/zero given itself is refused before it is opened."""
    os.symlink("/dev/zero", tmp_path / "z.ipynb")
    assert _problems(submission.find(tmp_path)) == {"z": ("NOT_REGULAR", "link")}
    started = time.monotonic()
    read = _within(10, submission.read, tmp_path / "z.ipynb", "z", "z")
    assert (read.problem, read.kind, read.unreadable) == ("NOT_REGULAR", "link", LINK)
    read = _within(10, submission.read, "/dev/zero", "z", "z")
    assert (read.problem, read.kind, read.unreadable) == ("NOT_REGULAR", "special", SPECIAL)
    assert time.monotonic() - started < 5


def test_a_device_named_like_a_notebook_is_never_opened(tmp_path, monkeypatch):
    """A character device (/dev/zero's numbers) named d.ipynb, where the system lets us make one:
    reported, and refused from its lstat before any open."""
    import stat

    try:
        os.mknod(tmp_path / "d.ipynb", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except (OSError, AttributeError):
        pytest.skip("cannot make a device node here")
    assert _problems(submission.find(tmp_path)) == {"d": ("NOT_REGULAR", "special")}
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *args, **kwargs: opened.append(args) or real_open(*args, **kwargs))
    read = _within(10, submission.read, tmp_path / "d.ipynb", "d", "d")
    assert (read.problem, read.unreadable, opened) == ("NOT_REGULAR", SPECIAL, [])


def test_a_link_to_etc_passwd_is_not_read_and_nothing_quotes_it(tmp_path):
    """Finding: a link to /etc/passwd had its first line quoted in the feedback (the JSON
    parser's error message quotes the file). Now a link is not read, and a file that is not JSON
    or not a notebook gets a fixed sentence that quotes nothing of it."""
    passwd = Path("/etc/passwd").read_text(encoding="utf-8", errors="replace")
    first = passwd.splitlines()[0]
    os.symlink("/etc/passwd", tmp_path / "p.ipynb")
    (tmp_path / "copy.ipynb").write_text(passwd, encoding="utf-8")  # its contents, as a regular file
    (tmp_path / "json.ipynb").write_text(json.dumps({"secret": first}), encoding="utf-8")
    (tmp_path / "bytes.ipynb").write_bytes(b"\xff\xfe" + first.encode())
    (tmp_path / "deep.ipynb").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (tmp_path / "cells.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                      "cells": [{"cell_type": first, "source": first}]}))
    expected = {"p": ("NOT_REGULAR", LINK), "copy": ("NOT_JSON", reason("NOT_JSON", "en")),
                "json": ("NOT_NOTEBOOK", reason("NOT_NOTEBOOK", "en")), "bytes": ("NOT_JSON", reason("NOT_JSON", "en")),
                "deep": ("NOT_JSON", reason("NOT_JSON", "en")), "cells": ("NOT_NOTEBOOK", reason("NOT_NOTEBOOK", "en"))}
    for item in submission.find(tmp_path):
        read = submission.read(item.path, item.key, item.student)
        assert (read.problem, read.unreadable) == expected[item.key]
        assert first not in repr(read) and "root:" not in repr(read)
    # the sentences exist in both languages and say nothing of the file
    for problem in submission.PROBLEMS:
        assert reason(problem, "zh") != reason(problem, "en") and "{" not in reason(problem, "zh")


def test_a_link_to_another_notebook_is_not_graded_as_the_students(tmp_path):
    """Finding: a notebook that was a link to the solution or to another student's work was
    graded as the linker's. Now it is reported as a link and has no cells; a link to a whole
    folder is not walked."""
    root = tmp_path / "submissions"
    solution = _save(_notebook(), tmp_path / "solutions" / "00_x.ipynb")
    _save(_notebook(), root / "alice" / "00_x.ipynb")
    (root / "bob").mkdir()
    os.symlink("../alice/00_x.ipynb", root / "bob" / "00_x.ipynb")
    (root / "carol").mkdir()
    os.symlink(solution, root / "carol" / "00_x.ipynb")
    os.symlink("alice", root / "dan")  # a student folder that is a link: not walked
    os.symlink("alice", root / "erin.ipynb")  # a link to a folder, named like a notebook: reported
    found = submission.find(root)
    assert [(f.key, f.student, f.problem, f.kind) for f in found] == [
        ("alice/00_x", "alice", None, None), ("bob/00_x", "bob", "NOT_REGULAR", "link"),
        ("carol/00_x", "carol", "NOT_REGULAR", "link"), ("erin", "erin", "NOT_REGULAR", "link")]
    for item in found[1:]:
        read = submission.read(item.path, item.key, item.student)
        assert (read.problem, read.unreadable, read.cells) == ("NOT_REGULAR", LINK, [])
    # what find returns still unpacks as (path, key, student)
    path, key, student = found[0]
    assert (path, key, student) == (root / "alice" / "00_x.ipynb", "alice/00_x", "alice")


def test_a_socket_named_like_a_notebook_is_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short relative path: a socket's address has at most 108 bytes
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("s.ipynb")
        assert _problems(submission.find(tmp_path)) == {"s": ("NOT_REGULAR", "special")}
        read = _within(10, submission.read, tmp_path / "s.ipynb", "s", "s")
        assert (read.problem, read.unreadable) == ("NOT_REGULAR", SPECIAL)
    finally:
        server.close()


def test_a_file_over_20_mb_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A 21 MB notebook is refused from its size: not a byte of it is read."""
    big = tmp_path / "00_big.ipynb"
    with open(big, "wb") as file:
        file.truncate(21_000_000)  # sparse: no disk, and no time, spent
    assert os.path.getsize(big) > MAX_BYTES
    reads = []
    monkeypatch.setattr(os, "read", lambda *args: reads.append(args) or b"")
    read = submission.read(big, "00_big", "s")
    assert (read.problem, read.unreadable, read.lesson, reads) == ("TOO_LARGE", reason("TOO_LARGE", "en"), "00", [])
    assert "20 MB" in read.unreadable and "20 MB" in reason("TOO_LARGE", "zh")
    monkeypatch.undo()
    # at the limit it is read (and judged on what it is)
    with open(big, "r+b") as file:
        file.truncate(MAX_BYTES)
    assert submission.read(big, "00_big", "s").problem == "NOT_JSON"


def test_hidden_entries_and_the_output_folder_are_skipped_and_the_order_is_the_paths(tmp_path):
    for path in ("b/00_x.ipynb", "a/week1/00_x.ipynb", "a/00_x.ipynb", "a.ipynb", ".hidden/00_x.ipynb",
                 "a/.ipynb_checkpoints/00_x-checkpoint.ipynb", "a/.00_x.ipynb", "grades/c/00_x.ipynb", "a/notes.txt"):
        _save(_notebook(), tmp_path / path)
    os.symlink(tmp_path / "grades", tmp_path / "out")  # the output folder, reached through a link: skipped too
    found = submission.find(tmp_path, skip=tmp_path / "out")
    assert [(f.key, f.student, f.problem) for f in found] == [
        ("a/00_x", "a", None), ("a/week1/00_x", "a", None), ("a", "a", None), ("b/00_x", "b", None)]
    assert submission.find(tmp_path / "grades", skip=tmp_path / "grades") == []


# ----------------------------------------------------------------------------- the lesson

def test_a_solved_lesson_00_saved_as_lesson_06_is_a_mismatch(tmp_path):
    """Finding: a lesson 00 notebook saved as 06_transformer.ipynb was graded as lesson 00, full
    marks. Now the lesson graded is the file name's (06), and the mismatch is recorded."""
    read = submission.read(_save(_notebook("00"), tmp_path / "06_transformer.ipynb"), "k", "s")
    assert (read.lesson, read.cells_lesson, read.name_lesson, read.problem) == ("06", "00", "06", None)
    assert read.mismatch == "its exercise cells are lesson 00's, but its file name says lesson 06"
    # the lesson from the check calls when the metadata is gone; the sentence in the notebook's language
    read = submission.read(_save(_notebook("00", checks=True, metadata=False, lang="zh"), tmp_path / "06_t.ipynb"), "k", "s")
    assert (read.lesson, read.cells_lesson, read.lang) == ("06", "00", "zh")
    assert read.mismatch == "它的练习单元格属于第 00 课，文件名却是第 06 课"
    # agreeing cells and name: no mismatch
    read = submission.read(_save(_notebook("06"), tmp_path / "06_transformer_ok.ipynb"), "k", "s")
    assert (read.lesson, read.mismatch) == ("06", None)


def test_the_assignment_lesson_must_match_the_cells(tmp_path):
    """`--lesson 01` given a lesson 00 notebook: a mismatch, lesson 01 graded."""
    path = _save(_notebook("00"), tmp_path / "00_tensor_shapes.ipynb")
    read = submission.read(path, "k", "s", lesson="01")
    assert (read.lesson, read.assignment, read.cells_lesson) == ("01", "01", "00")
    assert read.mismatch == "its exercise cells are lesson 00's, but this assignment is lesson 01"
    assert submission.read(path, "k", "s", lesson="00").mismatch is None
    assert submission.read(path, "k", "s", lesson=0).mismatch is None  # 0, "0" and "00" are lesson 00
    # cells, name and assignment all differ: both said
    read = submission.read(_save(_notebook("00"), tmp_path / "06_x.ipynb"), "k", "s", lesson="01")
    assert read.lesson == "01" and "file name says lesson 06 and this assignment is lesson 01" in read.mismatch
    # the cells carry no lesson: the file name's, checked against the assignment
    empty = _save(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), tmp_path / "06_empty.ipynb")
    assert (submission.read(empty, "k", "s").lesson, submission.read(empty, "k", "s").mismatch) == ("06", None)
    read = submission.read(empty, "k", "s", lesson="01")
    assert (read.lesson, read.mismatch) == ("01", "its file name says lesson 06, but this assignment is lesson 01")
    # no lesson anywhere: the assignment's, else none (as before)
    nameless = _save(nbformat.v4.new_notebook(cells=[]), tmp_path / "notes.ipynb")
    assert submission.read(nameless, "k", "s").lesson is None
    assert (submission.read(nameless, "k", "s", lesson="02").lesson, submission.read(nameless, "k", "s").mismatch) == ("02", None)
    with pytest.raises(ValueError, match="not one of the course's lessons"):
        submission.read(path, "k", "s", lesson="99")


def test_an_unreadable_file_keeps_the_lesson_of_its_name_or_the_assignment(tmp_path):
    (tmp_path / "00_broken.ipynb").write_text("{ not JSON", encoding="utf-8")
    read = submission.read(tmp_path / "00_broken.ipynb", "k", "s")
    assert (read.problem, read.lesson, read.mismatch) == ("NOT_JSON", "00", None)
    read = submission.read(tmp_path / "00_broken.ipynb", "k", "s", lesson="01")
    assert (read.lesson, read.mismatch) == ("01", "its file name says lesson 00, but this assignment is lesson 01")
