"""A work folder from before the renaming meets the course of now (course_utils.learner, course_utils.launch):
the copies earlier updates kept beside the lessons (``01_attention_basics.before-update-20261128-073413.ipynb``)
move to before-update/ under the names updates give now, and a saved JupyterLab layout that names a Chinese
lesson by its old (English) name reopens it under its new one."""

import json
import os
import time

import pytest

from course_utils import file_names, i18n, launch, learner

#: The lesson's names, as the course's table gives them (the layout's rewrite goes by that table).
EN = "01_attention_basics.ipynb"
ZH = file_names.lesson_notebook("01_attention_basics", "zh")
STAMP = "20261128-073413"
#: Where a copy stamped STAMP goes now, in its language's folder (the date and time read from the old name).
MOVED = "before-update/2026-11-28_073413_01_attention_basics.ipynb"
#: A time stamp the old name pattern holds but no clock gives: the file's mtime names it instead.
MTIME = 1_790_000_000


@pytest.fixture(autouse=True)
def jupyter_data(tmp_path, monkeypatch):
    """A Jupyter data folder of the test's own: where the homes' signatures go (live_progress.trust)."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))


def lesson(*texts):
    cells = [{"cell_type": "markdown", "id": f"m{number}", "metadata": {}, "source": text}
             for number, text in enumerate(texts)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def write_course(course, renamed):
    """The course with lesson 01 and the homes: before the renaming (`renamed` False) both languages under the
    English names; after it, the Chinese ones under the table's names."""
    for lang in ("en", "zh"):
        folder = course / lang
        folder.mkdir(parents=True, exist_ok=True)
        for path in folder.iterdir():
            path.unlink()
        chinese = renamed and lang == "zh"
        (folder / (ZH if chinese else EN)).write_text(lesson(f"# lesson 01 ({lang})", "Scores."))
        (folder / (file_names.HOMES["zh"] if chinese else "index.ipynb")).write_text(lesson(f"home {lang}"))
    return course


def layout(widgets, current):
    """A JupyterLab 4 layout (work/.workspaces/zh/*.jupyterlab-workspace), trimmed to what trim_workspace reads."""
    return {"data": {"layout-restorer:data": {"main": {"dock": {"type": "tab-area", "currentIndex": 0,
                                                               "widgets": widgets}, "current": current}},
                     "file-browser-filebrowser:cwd": {"path": "zh"},
                     **{w: {"data": {"path": w.split(":", 1)[1], "factory": "Notebook"}} for w in widgets}},
            "metadata": {"id": "default"}}


def files(work):
    """{path in the work folder: bytes} of every file but the marker, the progress and the layouts."""
    return {p.relative_to(work).as_posix(): p.read_bytes() for p in sorted(work.rglob("*"))
            if p.is_file() and p.name not in (learner.MARKER, learner.PROGRESS) and ".workspaces" not in p.parts}


@pytest.fixture
def old_work(tmp_path):
    """(course, work): a learner's work folder as the course of before left it, and the course of now. The
    learner answered lesson 01 in Chinese (under its English name), an earlier update kept copies beside the
    lessons in both languages, and JupyterLab's layout names the Chinese lesson by its old name."""
    course, work = tmp_path / "course", tmp_path / "work"
    learner.copy_course(work, write_course(course, renamed=False))
    (work / "zh" / EN).write_text(lesson("# lesson 01 (zh)", "Scores.", "我的笔记"))
    for lang in ("en", "zh"):
        (work / lang / f"01_attention_basics.before-update-{STAMP}.ipynb").write_text(lesson(f"old copy {lang}"))
    garbled = work / "zh" / "01_attention_basics.before-update-renamed by hand.ipynb"
    garbled.write_text(lesson("a copy renamed by hand"))
    os.utime(garbled, (MTIME, MTIME))
    folder = launch.workspaces(work, "zh")
    folder.mkdir(parents=True)
    widgets = ["notebook:zh/index.ipynb", f"notebook:zh/{EN}", "notebook:zh/02_masking.ipynb"]
    (folder / "default-37a8.jupyterlab-workspace").write_text(json.dumps(layout(widgets, widgets[1])))
    return write_course(course, renamed=True), work


def test_copy_and_update_move_old_copies_and_bring_the_layouts_tab_back_under_the_new_name(old_work, capsys):
    course, work = old_work
    before = files(work)
    old_copies = {f"{lang}/01_attention_basics.before-update-{STAMP}.ipynb": f"{lang}/{MOVED}" for lang in ("en", "zh")}
    from_mtime = file_names.before_update("01_attention_basics.ipynb", MTIME)
    old_copies["zh/01_attention_basics.before-update-renamed by hand.ipynb"] = f"zh/{from_mtime}"

    learner.prepare(work, "zh", course)  # what `make lab` and `python -m course_utils copy` do first
    said = capsys.readouterr().out
    after = files(work)
    for old, new in old_copies.items():
        assert old not in after and after[new] == before[old], (old, new)  # moved, byte for byte
        line = i18n.text("zh", "learner.old_copy_moved", old=work / old, new=new.split("/", 1)[1])
        assert line in said.splitlines(), said
    assert "moved to" not in said  # the Chinese learner reads Chinese
    assert after[f"zh/{EN}"] == before[f"zh/{EN}"]  # the lesson under its old name waits for `make update`

    # before the update the learner's copy is under the old name: the layout keeps it as it is
    path = next(launch.workspaces(work, "zh").glob("*.jupyterlab-workspace"))
    launch.trim_workspace(work, "zh", course)
    assert json.loads(path.read_text())["data"]["layout-restorer:data"]["main"]["current"] == f"notebook:zh/{EN}"
    path.write_text(json.dumps(layout(["notebook:zh/index.ipynb", f"notebook:zh/{EN}", "notebook:zh/02_masking.ipynb"],
                                      f"notebook:zh/{EN}")))

    (done,) = learner.update(work, "zh", course)
    said = capsys.readouterr().out
    assert done.path == work / "zh" / ZH and not (work / "zh" / EN).exists()
    assert ".before-update-" not in said, said  # nothing left to move: not a word of it
    assert ("markdown", "我的笔记") in [(c["cell_type"], "".join(c["source"])) for c in
                                        json.loads((work / "zh" / ZH).read_text())["cells"]]

    # the layout names the lesson by its old name: it comes back under the new one; what names nothing goes
    assert launch.trim_workspace(work, "zh", course) == [path]
    saved = json.loads(path.read_text())["data"]
    home, tab = f"notebook:zh/{file_names.HOMES['zh']}", f"notebook:zh/{ZH}"
    assert saved["layout-restorer:data"]["main"] == {
        "dock": {"type": "tab-area", "currentIndex": 1, "widgets": [home, tab]}, "current": tab}
    assert sorted(k for k in saved if k.startswith("notebook:")) == sorted([home, tab])
    assert saved[tab] == {"data": {"path": f"zh/{ZH}", "factory": "Notebook"}}
    assert launch.trim_workspace(work, "zh", course) == []

    # idempotent: copy and update again move nothing, say nothing of it, and leave every file as it is
    settled = files(work)
    learner.prepare(work, "zh", course)
    learner.update(work, "en", course)
    said = capsys.readouterr().out
    assert said == i18n.text("en", "learner.up_to_date") + "\n", said
    assert files(work) == settled


def test_a_layout_saved_by_the_repository_rooted_lab_or_naming_no_lesson(old_work, capsys):
    """`make update` run first moves the old copies too (said in English to an English learner). The old name is
    rewritten also under the repository-rooted JupyterLab's prefix (work/zh/…); a name of the learner's own with a
    lesson's number, or of no file at all, matches nothing and is dropped as before."""
    course, work = old_work
    before = files(work)
    learner.update(work, "en", course)
    said, after = capsys.readouterr().out, files(work)
    for lang in ("en", "zh"):
        old = f"{lang}/01_attention_basics.before-update-{STAMP}.ipynb"
        assert after[f"{lang}/{MOVED}"] == before[old] and old not in after
        assert i18n.text("en", "learner.old_copy_moved", old=work / old, new=MOVED) in said.splitlines(), said
    path = next(launch.workspaces(work, "zh").glob("*.jupyterlab-workspace"))
    for saved, kept in ((f"work/zh/{EN}", f"zh/{ZH}"), ("zh/01_my_notes.ipynb", None), ("zh/99_gone.ipynb", None),
                        (f"en/{EN}", f"en/{EN}"), (f"zh/{ZH}", f"zh/{ZH}")):
        path.write_text(json.dumps(layout([f"notebook:{saved}"], f"notebook:{saved}")))
        launch.trim_workspace(work, "zh", course)
        widgets = json.loads(path.read_text())["data"]["layout-restorer:data"]["main"]["dock"]["widgets"]
        assert widgets == [f"notebook:zh/{file_names.HOMES['zh']}"] + ([f"notebook:{kept}"] if kept else []), saved


def test_a_new_work_folder_hears_nothing_of_old_copies(tmp_path, capsys):
    course, work = write_course(tmp_path / "course", renamed=True), tmp_path / "work"
    learner.prepare(work, "zh", course)
    said = capsys.readouterr().out
    assert said.splitlines() == [i18n.text("zh", "learner.copied", path=work / lang / name)
                                 for lang in ("en", "zh") for name in sorted(p.name for p in (course / lang).iterdir())]
    learner.update(work, "zh", course)
    assert capsys.readouterr().out == i18n.text("zh", "learner.up_to_date") + "\n"
    assert learner.move_old_copies(work) == [] and not list(work.rglob("before-update"))


def test_a_taken_name_is_never_overwritten_and_a_copy_already_there_is_not_kept_twice(tmp_path):
    work = tmp_path / "work"
    folder = work / "en" / "before-update"
    folder.mkdir(parents=True)
    taken = folder / MOVED.split("/", 1)[1]
    taken.write_text("a later update's copy of the same second")
    first = work / "en" / f"01_attention_basics.before-update-{STAMP}.ipynb"
    first.write_text("the old copy")
    assert learner.move_old_copies(work) == [(first, taken.with_name(taken.stem + "-2.ipynb"))]
    assert taken.read_text() == "a later update's copy of the same second"
    assert taken.with_name(taken.stem + "-2.ipynb").read_text() == "the old copy"
    first.write_text("the old copy")  # the same file again (put back from a backup): already there, not doubled
    assert learner.move_old_copies(work) == [(first, taken.with_name(taken.stem + "-2.ipynb"))]
    assert not first.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted([taken.name, taken.stem + "-2.ipynb"])
    # what is not an old copy stays: a lesson, a notes file, a notebook of the learner's, a folder with such a name
    (work / "en" / EN).write_text("lesson")
    (work / "en" / "my.before-update-ideas.ipynb").write_text("mine")
    (work / "en" / "notes.before-update.txt").write_text("notes")
    (work / "en" / f"x.before-update-{STAMP}.ipynb").mkdir()
    assert learner.move_old_copies(work) == []


def test_the_old_names_new_place_and_bad_arguments():
    assert file_names.moved_before_update(f"01_attention_basics.before-update-{STAMP}.ipynb", 0) == MOVED
    assert file_names.moved_before_update(f"{ZH[:-6]}.before-update-{STAMP}.ipynb", 0) == MOVED.replace(EN, ZH)
    stamp = time.strftime(file_names.BEFORE_UPDATE_TIME, time.localtime(MTIME))
    assert file_names.moved_before_update("01_x.before-update-20261399-999999.ipynb", MTIME) == \
        f"before-update/{stamp}_01_x.ipynb"  # no such day: the file's time
    for name in (EN, "01_x.before-update.ipynb", "index.ipynb", file_names.before_update(EN, 0).split("/")[1]):
        assert file_names.moved_before_update(name, 0) is None, name
    for call, argument in ((lambda: file_names.moved_before_update("en/01_x.before-update-1.ipynb", 0), "name"),
                           (lambda: file_names.moved_before_update(None, 0), "name"),
                           (lambda: file_names.moved_before_update("01_x.ipynb", "now"), "mtime"),
                           (lambda: learner.move_old_copies(3), "work"),
                           (lambda: learner.move_old_copies("work", languages=("fr",)), "languages")):
        with pytest.raises(ValueError, match=f"argument '{argument}'"):
            call()
