"""The learner's own folder (course_utils.learner): the copies `make lab` opens, and the progress file
each check writes its latest verdict to, shown by progress() in the notebook's language."""

import json
import os
import stat
import subprocess
import sys

import pytest

from course_teacher.grade import runner
from course_utils import i18n, learner
from course_teacher import build
from course_utils.exercises import EXERCISES, grading

FIRST, SECOND = EXERCISES[0], EXERCISES[1]


@pytest.fixture
def work(tmp_path):
    """A learner's work folder, as `make lab` leaves it, with the notebook running in work/en/."""
    folder = tmp_path / "work"
    (folder / "en").mkdir(parents=True)
    (folder / learner.MARKER).write_text("{}")
    return folder


def verdict(exercise, status, code=None):
    return grading.Verdict(exercise, status, "message", code)


def recorded(work):
    return json.loads((work / learner.PROGRESS).read_text(encoding="utf-8"))["exercises"]


# ----------------------------------------------------------------------------- the record

def test_a_check_records_its_verdict_and_the_latest_wins(work):
    assert learner.record(verdict(FIRST, grading.FAILED, "NO_SCALE"), work / "en") == work / learner.PROGRESS
    assert recorded(work)[FIRST]["status"] == "failed" and recorded(work)[FIRST]["code"] == "NO_SCALE"
    learner.record(verdict(SECOND, grading.NOT_ATTEMPTED), work / "en")
    learner.record(verdict(FIRST, grading.PASSED), work / "en")
    assert {k: v["status"] for k, v in recorded(work).items()} == {FIRST: "passed", SECOND: "not attempted"}
    learner.record(verdict(FIRST, grading.CRASHED), work / "en")  # latest, not best: what the code does now
    assert recorded(work)[FIRST]["status"] == "crashed"
    assert not [p for p in work.iterdir() if p.name.startswith(".progress-")], "no partial file left"


def test_the_check_itself_records_without_changing_its_verdict(work, monkeypatch, capsys):
    monkeypatch.chdir(work / "en")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    grading.check("01.scaled_dot", lambda q, k, v: (_ for _ in ()).throw(NotImplementedError()))
    printed = capsys.readouterr().out
    assert recorded(work)["01.scaled_dot"]["status"] == "not attempted"
    assert printed == grading.evaluate("01.scaled_dot", lambda q, k, v: (_ for _ in ()).throw(NotImplementedError())).message + "\n"


def test_a_failing_record_never_fails_the_check(work, monkeypatch, capsys):
    monkeypatch.chdir(work / "en")
    monkeypatch.setattr(learner, "record", lambda verdict: 1 / 0)
    grading.check("01.scaled_dot", lambda q, k, v: (_ for _ in ()).throw(NotImplementedError()))
    assert "01.scaled_dot" in capsys.readouterr().out


def test_nothing_is_recorded_outside_a_work_folder(tmp_path, monkeypatch):
    """The course's own notebooks (the build, nbval, Binder) run in notebooks/{en,zh}/: no marker there."""
    assert learner.record(verdict(FIRST, grading.PASSED), build.NOTEBOOKS / "en") is None
    assert learner.record(verdict(FIRST, grading.PASSED), tmp_path) is None
    assert not (build.NOTEBOOKS / learner.PROGRESS).exists() and not (build.NOTEBOOKS / "en" / learner.PROGRESS).exists()
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_recorded_under_the_graders(work, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert learner.record(verdict(FIRST, grading.PASSED), work / "en") is None
    monkeypatch.delenv("NBGRADER_EXECUTION")
    # the course's grader: its kernels run with COURSE_GRADING set
    monkeypatch.setenv("COURSE_GRADING", runner.KERNEL_ENV["COURSE_GRADING"])
    assert learner.record(verdict(FIRST, grading.PASSED), work / "en") is None
    assert not (work / learner.PROGRESS).exists()


@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
def test_a_grader_kernel_records_nothing(work):
    """A kernel with the grader's environment, even in a learner's work folder: a check prints its
    verdict and writes nothing. The same kernel without it records (so the variable is what stops it)."""
    code = "from course_utils import check\ncheck('01.scaled_dot', lambda q, k, v: 1)\nprint('done')"

    def run(environment):
        return subprocess.run([sys.executable, "-c", code], cwd=work / "en", capture_output=True, text=True,
                              timeout=120, env={"PATH": os.environ.get("PATH", ""), "HOME": str(work / "home"),
                                                **environment})

    done = run(runner.KERNEL_ENV)
    assert done.returncode == 0 and done.stdout.strip().endswith("done"), done.stderr
    assert not (work / learner.PROGRESS).exists()
    learner_kernel = {k: v for k, v in runner.KERNEL_ENV.items() if k != "COURSE_GRADING"}
    assert run(learner_kernel).returncode == 0 and "01.scaled_dot" in recorded(work)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_work_folder_is_left_alone(work):
    work.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert learner.record(verdict(FIRST, grading.PASSED), work / "en") is None
    finally:
        work.chmod(stat.S_IRWXU)
    assert not (work / learner.PROGRESS).exists()


def test_an_unwritable_progress_file_is_left_alone(work, monkeypatch):
    """Any OSError (a full disk, a read-only folder, even as root) leaves the record undone, silently."""
    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(learner.tempfile, "mkstemp", refuse)
    assert learner.record(verdict(FIRST, grading.PASSED), work / "en") is None
    assert not (work / learner.PROGRESS).exists()


@pytest.mark.parametrize("content", ["{not json", "[]", '{"exercises": 3}', '{"exercises": {"x": {"status": "won"}}}', ""])
def test_a_corrupt_progress_file_counts_as_none_and_is_started_afresh(work, content):
    (work / learner.PROGRESS).write_text(content)
    assert learner.load(work) == {}
    assert learner.progress_text(work / "en", "en") == (i18n.text("en", "progress.none"), None)
    learner.record(verdict(FIRST, grading.PASSED), work / "en")
    assert list(recorded(work)) == [FIRST]


# ----------------------------------------------------------------------------- the table

def test_progress_speaks_the_notebooks_language(work):
    learner.record(verdict(FIRST, grading.PASSED), work / "en")
    learner.record(verdict(SECOND, grading.FAILED, "NO_SCALE"), work / "en")
    for lang in ("en", "zh"):
        text, table = learner.progress_text(work / "en", lang)
        assert text.splitlines()[0] == i18n.text(lang, "progress.summary", passed=1, total=len(EXERCISES))
        assert f"{FIRST} | {i18n.text(lang, 'progress.passed')}" in text
        assert f"{SECOND} | {i18n.text(lang, 'progress.failed')} (NO_SCALE)" in text
        assert i18n.text(lang, "progress.columns").split("|")[2] in table and "<table>" in table
    text, _ = learner.progress_text(work / "en", "zh")
    assert "passed" not in text and "Lesson" not in text  # nothing English in the Chinese table


def test_progress_shows_the_language_set_up_and_nothing_yet(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    previous = i18n.language()
    try:
        i18n.set_language("zh")
        learner.progress()
    finally:
        i18n.set_language(previous)
    assert capsys.readouterr().out == i18n.text("zh", "progress.none") + "\n"


# ----------------------------------------------------------------------------- the copies

def course(tmp_path, names=("00_a.ipynb", "01_b.ipynb")):
    folder = tmp_path / "course"
    for lang in ("en", "zh"):
        (folder / lang).mkdir(parents=True, exist_ok=True)
        for name in (*names, learner.HOME):
            (folder / lang / name).write_text(f"course {lang} {name}")
    return folder


def test_the_first_launch_copies_every_notebook(tmp_path):
    source = course(tmp_path)
    written = learner.copy_course(tmp_path / "work", source)
    assert sorted(p.relative_to(tmp_path / "work").as_posix() for p in written) == sorted(
        f"{lang}/{name}" for lang in ("en", "zh") for name in ("00_a.ipynb", "01_b.ipynb", learner.HOME))
    assert (tmp_path / "work" / "zh" / "01_b.ipynb").read_text() == "course zh 01_b.ipynb"
    assert learner.work_folder(tmp_path / "work" / "en") == tmp_path / "work"


def test_the_learners_copies_are_never_overwritten_and_new_lessons_are_added(tmp_path):
    source = course(tmp_path)
    work = tmp_path / "work"
    learner.copy_course(work, source)
    (work / "en" / "00_a.ipynb").write_text("my answers")
    (work / "en" / learner.PROGRESS).write_text("{}")
    (source / "en" / "00_a.ipynb").write_text("course en 00_a, revised")
    (source / "en" / "02_c.ipynb").write_text("course en 02_c")  # a lesson added later
    assert learner.copy_course(work, source) == [work / "en" / "02_c.ipynb"]
    assert (work / "en" / "00_a.ipynb").read_text() == "my answers"
    assert learner.copy_course(work, source) == []  # nothing new: nothing written


def test_the_home_follows_the_course(tmp_path):
    """The home lists the lessons and holds nothing of the learner's: a new home replaces it; an
    unchanged one is left as the learner's JupyterLab saved it."""
    source = course(tmp_path)
    work = tmp_path / "work"
    learner.copy_course(work, source)
    (work / "en" / learner.HOME).write_text("home, with the progress cell run")
    assert learner.copy_course(work, source) == []
    (source / "en" / learner.HOME).write_text("course en home, with lesson 02")
    assert learner.copy_course(work, source) == [work / "en" / learner.HOME]
    assert (work / "en" / learner.HOME).read_text() == "course en home, with lesson 02"


def test_make_lab_copies_the_course_into_the_work_folder(tmp_path):
    """The Makefile's copy step, on the real course, into a temporary work folder: every student
    notebook and both homes, at the depth where ../../images/ still reaches the diagrams."""
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, "-m", "course_utils", "copy", str(work)], cwd=build.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr  # the learner's first screen, before JupyterLab starts
    for lang in build.LANGUAGES:
        assert sorted(p.name for p in (work / lang).glob("*.ipynb")) == sorted(
            p.name for p in (build.NOTEBOOKS / lang).glob("*.ipynb"))
    makefile = (build.ROOT / "Makefile").read_text()
    assert '$(PY) -m course_utils copy "$(WORK)"' in makefile
    assert "--LabApp.default_url=/lab/tree/$(WORK)/$(COURSE_LANG)/index.ipynb" in makefile
    assert '--LabApp.workspaces_dir="$(abspath $(WORK))/.workspaces/$(COURSE_LANG)"' in makefile
    assert '"fetchNews": "false"' in makefile
    assert "work/" in (build.ROOT / ".gitignore").read_text().splitlines()
