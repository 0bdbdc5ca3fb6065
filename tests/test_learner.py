"""The learner's own folder (course_utils.learner): the copies `make lab` opens, and the progress file
each check writes its latest verdict to, shown by progress() in the notebook's language."""

import contextlib
import html
import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import nbformat

import pytest

from course_teacher.grade import runner
from course_utils import atomic_files, file_names, i18n, launch, learner, live_progress
from course_teacher import build
from course_utils.exercises import EXERCISES, grading

FIRST, SECOND = EXERCISES[0], EXERCISES[1]


@pytest.fixture(autouse=True)
def jupyter_data(tmp_path, monkeypatch):
    """A Jupyter data folder of the test's own: where the homes' signatures go (live_progress.trust)."""
    folder = tmp_path / "jupyter-data"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(folder))
    return folder


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
    assert recorded(work)[FIRST]["passed"]["when"], "the pass before it is kept"
    assert [h["status"] for h in recorded(work)[FIRST]["history"]] == ["failed", "passed", "crashed"]
    assert not [p for p in work.iterdir() if p.name.startswith(".")
                and p.name != learner.MARKER], "no partial file left"


def test_a_pass_is_never_overwritten_by_a_stub_run_in_the_other_language(work):
    """Both languages write one file: Run All in the Chinese copy, whose exercise is still the stub,
    gives "not attempted", which leaves the English pass standing. A failure after the pass is the
    latest verdict, shown with the pass kept, in both languages."""
    learner.record(verdict(FIRST, grading.PASSED), work / "en", lang="en")
    learner.record(verdict(FIRST, grading.NOT_ATTEMPTED), work / "zh", lang="zh")
    entry = recorded(work)[FIRST]
    assert entry["status"] == "passed" and entry["lang"] == "en" and len(entry["history"]) == 1
    for lang in ("en", "zh"):
        assert f"{FIRST} | {i18n.text(lang, 'progress.passed')}\n" in learner.progress_text(work / "zh", lang)[0] + "\n"
    learner.record(verdict(FIRST, grading.FAILED, "NO_SCALE"), work / "zh", lang="zh")
    entry = recorded(work)[FIRST]
    assert entry["status"] == "failed" and entry["lang"] == "zh" and entry["passed"]["lang"] == "en"
    date = entry["passed"]["when"][:10]
    for lang in ("en", "zh"):
        text, table = learner.progress_text(work / "en", lang)
        state = (i18n.text(lang, "progress.failed") + " (NO_SCALE)"
                 + i18n.text(lang, "progress.passed_before", date=date))
        assert f"{FIRST} | {state}" in text and html.escape(state) in table
        assert text.splitlines()[0] == i18n.text(lang, "progress.summary", passed=0, total=len(EXERCISES))
    # a stub run after a failure changes nothing either; the pass comes back as the latest verdict
    learner.record(verdict(FIRST, grading.NOT_ATTEMPTED), work / "en", lang="en")
    assert recorded(work)[FIRST]["status"] == "failed"
    learner.record(verdict(FIRST, grading.PASSED), work / "en", lang="en")
    assert recorded(work)[FIRST]["status"] == "passed"


def test_the_history_is_bounded_and_a_stub_run_again_is_one_line(work):
    for _ in range(3):
        learner.record(verdict(FIRST, grading.NOT_ATTEMPTED), work / "en")
    assert [h["status"] for h in recorded(work)[FIRST]["history"]] == ["not attempted"]
    for number in range(learner.HISTORY + 5):
        learner.record(verdict(FIRST, grading.FAILED, f"CODE{number}"), work / "en")
    history = recorded(work)[FIRST]["history"]
    assert len(history) == learner.HISTORY and history[-1]["code"] == f"CODE{learner.HISTORY + 4}"
    assert "passed" not in recorded(work)[FIRST]


def test_a_progress_file_of_the_first_format_is_read_and_carried_on(work):
    """progress.json as the course wrote it before (the latest verdict only): a pass there is kept too."""
    (work / learner.PROGRESS).write_text(json.dumps({"format": 1, "exercises": {
        FIRST: {"status": "passed", "code": None, "when": "2025-01-02T10:00:00+0000"}}}))
    learner.record(verdict(FIRST, grading.NOT_ATTEMPTED), work / "en")
    assert recorded(work)[FIRST]["status"] == "passed"
    learner.record(verdict(FIRST, grading.FAILED, "NO_SCALE"), work / "en")
    assert recorded(work)[FIRST]["passed"] == {"when": "2025-01-02T10:00:00+0000", "lang": None}
    assert [h["status"] for h in recorded(work)[FIRST]["history"]] == ["passed", "failed"]


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

    monkeypatch.setattr(atomic_files.tempfile, "mkstemp", refuse)  # every file of the work folder is written whole
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
    lesson = FIRST.split(".")[0]
    in_lesson = [e for e in EXERCISES if e.startswith(lesson + ".")]
    for lang in ("en", "zh"):
        text, table = learner.progress_text(work / "en", lang)
        assert text.splitlines()[0] == i18n.text(lang, "progress.summary", passed=1, total=len(EXERCISES))
        assert f"{FIRST} | {i18n.text(lang, 'progress.passed')}" in text
        assert f"{SECOND} | {i18n.text(lang, 'progress.failed')} (NO_SCALE)" in text
        assert i18n.text(lang, "progress.columns").split("|")[3] in table and "<table>" in table
        # a ✔ count per lesson, once beside the lesson's exercises
        count = i18n.text(lang, "progress.lesson_count", passed=1, total=len(in_lesson))
        assert f"{lesson} | {count} | {FIRST}" in text
        assert table.count(f'rowspan="{len(in_lesson)}" class="course-lesson-count" style="{learner.LEFT}">'
                           f'{html.escape(count)}<') == 1
        assert table.count("course-lesson-count") == len({e.split(".")[0] for e in EXERCISES})
        # no tick where nothing passed; every cell left-aligned (JupyterLab aligns table cells right)
        other = next(e for e in EXERCISES if not e.startswith(lesson + "."))
        none = i18n.text(lang, "progress.lesson_count_none", passed=0,
                         total=sum(e.startswith(other[:3]) for e in EXERCISES))
        assert f"{other[:2]} | {none} | {other}" in text and "✔" not in none
        assert len(re.findall(r"<t[dh][ >]", table)) == table.count(f'style="{learner.LEFT}"')
    text, _ = learner.progress_text(work / "en", "zh")
    assert "passed" not in text and "Lesson" not in text and " of " not in text  # nothing English in the Chinese table


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
        for name in (*names, learner.HOMES[lang]):
            (folder / lang / name).write_text(f"course {lang} {name}")
    return folder


def test_the_first_launch_copies_every_notebook(tmp_path):
    source = course(tmp_path)
    written = learner.copy_course(tmp_path / "work", source)
    assert sorted(p.relative_to(tmp_path / "work").as_posix() for p in written) == sorted(
        f"{lang}/{name}" for lang in ("en", "zh") for name in ("00_a.ipynb", "01_b.ipynb", learner.HOMES[lang]))
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
    home = learner.HOMES["en"]
    (work / "en" / home).write_text("home, with the progress cell run")
    assert learner.copy_course(work, source) == []
    (source / "en" / home).write_text("course en home, with lesson 02")
    assert learner.copy_course(work, source) == [work / "en" / home]
    assert (work / "en" / home).read_text() == "course en home, with lesson 02"


def test_make_lab_copies_the_course_and_shows_the_progress_on_the_home(tmp_path):
    """The launch's first step (`python -m course_utils copy`, as `make lab`'s `lab` command runs it),
    on the real course, into a temporary work folder: every student notebook and both homes, the
    diagrams and glossary the lessons link, and each home's progress cell showing progress.json as it
    is, in the home's language, without the learner running it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / learner.MARKER).write_text("{}")
    learner.record(verdict(FIRST, grading.PASSED), work, lang="en")
    done = subprocess.run([sys.executable, "-m", "course_utils", "copy", str(work)], cwd=build.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr  # the learner's first screen, before JupyterLab starts
    for lang in build.LANGUAGES:
        assert sorted(p.name for p in (work / lang).glob("*.ipynb")) == sorted(
            p.name for p in (build.NOTEBOOKS / lang).glob("*.ipynb"))
        home = nbformat.read(work / lang / learner.HOMES[lang], as_version=4)
        cell = next(c for c in home.cells if learner.PROGRESS_TAG in c.metadata.get("tags", []))
        (output,) = cell.outputs
        assert output.output_type == "display_data", output
        count = i18n.text(lang, "progress.lesson_count", passed=1, total=sum(e.startswith(FIRST[:3]) for e in EXERCISES))
        assert html.escape(count) in output.data["text/html"]
        assert i18n.text(lang, "progress.summary", passed=1, total=len(EXERCISES)) in output.data["text/plain"]
    for name in (f"images/{p.name}" for p in (build.ROOT / "images").iterdir()):
        assert (work / name).read_bytes() == (build.ROOT / name).read_bytes(), name
    for lang, page in build.glossary_pages():  # beside the lessons that link it
        assert (work / lang / page.name).read_bytes() == page.read_bytes(), page
    assert "work/" in (build.ROOT / ".gitignore").read_text().splitlines()


def progress_output(work, lang):
    home = nbformat.read(work / lang / learner.HOMES[lang], as_version=4)
    nbformat.validate(home)
    (output,) = next(c for c in home.cells if learner.PROGRESS_TAG in c.metadata.get("tags", [])).outputs
    return home, output


def test_the_homes_progress_is_rewritten_by_every_check_and_signed_so_that_it_follows_the_checks_while_open(
        tmp_path, jupyter_data):
    """The launch rewrites the homes' progress output in the learner's copies, and so does every check
    that records a verdict: a home opened later shows it. The output is the table, in a box that its
    script keeps current while the home is open (live_progress), and the home is signed with the
    learner's Jupyter key, so that JupyterLab runs the script."""
    from nbformat.sign import NotebookNotary

    work = tmp_path / "work"
    learner.copy_course(work)
    written = learner.refresh_homes(work)  # nothing checked yet: "nothing yet", in its live box
    assert written == [work / lang / learner.HOMES[lang] for lang in build.LANGUAGES] and learner.refresh_homes(work) == []
    _, output = progress_output(work, "en")
    assert html.escape(i18n.text("en", "progress.none")) in output.data["text/html"]
    learner.record(verdict(SECOND, grading.FAILED, "NO_SCALE"), work / "zh", lang="zh")
    assert learner.refresh_homes(work) == []  # the check has rewritten them already
    for lang in build.LANGUAGES:
        home, output = progress_output(work, lang)
        text, table = learner.progress_text(work / lang, lang)
        assert output.data == {"text/plain": text,
                               "text/html": live_progress.live_html(table, f"{lang}/{learner.HOMES[lang]}", learner.PROGRESS_TAG)}
        assert output.data["text/html"].startswith(f'<div data-course-progress="{lang}/{learner.HOMES[lang]}">{table}</div><script>')
        assert NotebookNotary(data_dir=str(jupyter_data)).check_signature(home), lang
    assert learner.copy_course(work) == []  # a refreshed home is not a changed course home
    # the signature is the learner's key's: another Jupyter (another key) does not trust it
    (tmp_path / "elsewhere").mkdir()
    assert not NotebookNotary(data_dir=str(tmp_path / "elsewhere")).check_signature(
        nbformat.read(work / "en" / learner.HOMES["en"], as_version=4))


def test_a_check_in_a_lesson_shows_on_the_home_without_running_it(tmp_path, monkeypatch, capsys):
    """What the learner hit: a check, then "← Course home" said "No exercise checked yet". The check
    cell's own record (a lesson's kernel runs in work/zh/) rewrites both homes' files, which a home
    opened then (or the open one's script) shows."""
    work = tmp_path / "work"
    learner.copy_course(work)
    learner.refresh_homes(work)
    _, before = progress_output(work, "zh")
    assert html.escape(i18n.text("zh", "progress.none")) in before.data["text/html"]
    monkeypatch.chdir(work / "zh")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    grading.check("01.scaled_dot", lambda q, k, v: (_ for _ in ()).throw(NotImplementedError()))
    capsys.readouterr()
    for lang in build.LANGUAGES:
        _, after = progress_output(work, lang)
        assert i18n.text(lang, "progress.summary", passed=0, total=len(EXERCISES)) in after.data["text/plain"]
        assert html.escape(i18n.text(lang, "progress.not attempted")) in after.data["text/html"]


def test_the_live_homes_script_reads_only_its_homes_file_and_the_tables_box():
    """The script the home's output carries (run by JupyterLab in a trusted notebook): it asks the
    server for the home's own file, by its path, and puts in the box only what the box held there."""
    page = live_progress.live_html("<table></table>", "zh/index.ipynb", learner.PROGRESS_TAG)
    script = page.split("<script>", 1)[1]
    assert script.endswith("</script>") and script.count("<script>") == 0
    assert 'var path = "zh/index.ipynb", tag = "course-progress", attribute = "data-course-progress";' in script
    assert '"api/contents/"' in script and "content=" in script and "setInterval" in script
    assert "eval(" not in script and "new Function" not in script
    with pytest.raises(ValueError, match="home"):
        learner.progress_outputs(lang="en", home=3)


# ----------------------------------------------------------------------------- updates

def cell(kind, text, exercise=None):
    metadata = {"tags": ["exercise"], "exercise": exercise} if exercise else {}
    found = {"cell_type": kind, "id": f"c{abs(hash((kind, text))) % 10**8}", "metadata": metadata, "source": text}
    if kind == "code":
        found.update(execution_count=None, outputs=[])
    return found


def lesson(*cells):
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def stub(name, signature="x"):
    return f'def {name}({signature}):\n    # YOUR CODE HERE\n    raise NotImplementedError("exercise 01.{name}")'


VERSION_1 = lesson(cell("markdown", "# A lesson"), cell("code", stub("alpha"), "01.alpha"),
                   cell("code", 'check("01.alpha", alpha)'), cell("markdown", "Between."),
                   cell("code", stub("beta"), "01.beta"), cell("code", 'check("01.beta", beta)'))
# the course changes it: beta moves first with a new stub, alpha's check and stub change, a new exercise
VERSION_2 = lesson(cell("markdown", "# A lesson, revised"), cell("markdown", "Beta first, now."),
                   cell("code", stub("beta", "x, y"), "01.beta"), cell("code", 'check("01.beta", beta)'),
                   cell("code", stub("alpha", "x, scale=1.0"), "01.alpha"),
                   cell("code", 'check("01.alpha", alpha, cases=3)'),
                   cell("code", stub("gamma"), "01.gamma"), cell("code", 'check("01.gamma", gamma)'))
ANSWER = "def alpha(x):\n    return 2 * x"
#: The Chinese home as JupyterLab's addresses spell it (percent-encoded).
HOME_ZH_NAME = file_names.HOMES["zh"]
HOME_ZH = urllib.parse.quote(HOME_ZH_NAME)


def write_course(folder, notebook):
    for lang in ("en", "zh"):
        (folder / lang).mkdir(parents=True, exist_ok=True)
        (folder / lang / "01_a.ipynb").write_text(json.dumps(notebook))
        (folder / lang / learner.HOMES[lang]).write_text(json.dumps(lesson(cell("markdown", f"home {lang}"))))
    return folder


def answered(work, lang="en"):
    """The learner answers alpha in their copy, runs it (an output) and plays in a cell of their own."""
    path = work / lang / "01_a.ipynb"
    notebook = json.loads(path.read_text())
    alpha = next(c for c in notebook["cells"] if learner.exercise_of(c) == "01.alpha")
    alpha["source"], alpha["outputs"], alpha["execution_count"] = ANSWER, [
        {"name": "stdout", "output_type": "stream", "text": "mine\n"}], 3
    notebook["cells"].append(cell("code", "print('scratch')"))
    path.write_text(json.dumps(notebook))
    return path.read_bytes()


def _text(cell):
    """A notebook cell's text, whether the file holds it as one string or as a list of lines."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def sources(path):
    return [(c["cell_type"], _text(c)) for c in json.loads(path.read_text())["cells"]]


def test_an_update_keeps_the_answers_by_exercise_id_whose_cells_moved_and_changed(tmp_path, capsys):
    course, work = write_course(tmp_path / "course", VERSION_1), tmp_path / "work"
    learner.copy_course(work, course)
    assert learner.changed_lessons(work, course) == []
    before = answered(work)
    write_course(course, VERSION_2)
    assert learner.changed_lessons(work, course) == [("en", "01_a.ipynb"), ("zh", "01_a.ipynb")]
    learner.prepare(work, "zh", course)
    said = capsys.readouterr().out
    assert i18n.text("zh", "learner.changed", lessons="en/01_a.ipynb, zh/01_a.ipynb", work=work) in said
    assert learner.copy_course(work, course) == [] and (work / "en" / "01_a.ipynb").read_bytes() == before

    done = learner.update_course(work, course, now=1_700_000_000)
    (path, old, kept, lost, own, *_), (zh_path, _, zh_kept, _, zh_own, *_) = done
    assert (path, kept, lost, zh_path, zh_kept) == (work / "en" / "01_a.ipynb", ["01.alpha"], [], work / "zh" / "01_a.ipynb", [])
    assert old == path.parent / file_names.before_update("01_a.ipynb", 1_700_000_000) and old.read_bytes() == before
    assert old.parent.name == "before-update" and old.name.endswith("_01_a.ipynb")  # the date first, in a folder
    expected = [(c["cell_type"], _text(c)) for c in VERSION_2["cells"]]
    expected[4] = ("code", ANSWER)  # alpha's cell, where the new version has it; beta: the new stub
    # the learner's scratch cell followed beta's check: it follows it still, wherever the new version has it
    expected.insert(4, ("code", "print('scratch')"))
    assert sources(path) == expected
    assert own == [{"cell": "print('scratch')", "number": 5, "after": 'check("01.beta", beta)'}] and zh_own == []
    alpha = next(c for c in json.loads(path.read_text())["cells"] if learner.exercise_of(c) == "01.alpha")
    assert alpha["outputs"][0]["text"] == "mine\n" and alpha["id"] == VERSION_2["cells"][4]["id"]
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
    assert sources(zh_path) == [(c["cell_type"], _text(c)) for c in VERSION_2["cells"]]
    assert learner.changed_lessons(work, course) == [] and learner.update_course(work, course) == []
    # the next course version: alpha's answer is the learner's still (its stub digest is the new one's)
    write_course(course, lesson(*VERSION_2["cells"], cell("markdown", "An epilogue.")))
    learner.update_course(work, course, only=["01"], languages=("en",))
    assert ("code", ANSWER) in sources(path) and ("markdown", "An epilogue.") in sources(path)


def numbered(*cells):
    """A lesson as the build renders it: cell ids by position (cell-000, ...), so a new version that
    inserts a cell gives the same id to another cell."""
    found = lesson(*cells)
    for number, each in enumerate(found["cells"]):
        each["id"] = f"cell-{number:03d}"
    return found


def own(kind, text, cell_id):
    """A cell the learner added in JupyterLab (which gives it an id of its own)."""
    return dict(cell(kind, text), id=cell_id)


COPIED = numbered(cell("markdown", "# A lesson"), cell("markdown", "Alpha scales its input."),
                  cell("code", stub("alpha"), "01.alpha"), cell("code", 'check("01.alpha", alpha)'),
                  cell("markdown", "Between."), cell("code", "x = torch.ones(3)"),
                  cell("code", stub("beta"), "01.beta"), cell("code", 'check("01.beta", beta)'),
                  cell("markdown", "The end."))
# the course's next version: a new heading text (the same id), beta moved first with a new check, the
# end removed; "Alpha scales", alpha's check, "Between." and the demo cell as they were, further down
NEWER = numbered(cell("markdown", "# A lesson, revised"), cell("markdown", "Beta comes first now."),
                 cell("code", stub("beta"), "01.beta"), cell("code", 'check("01.beta", beta, cases=3)'),
                 cell("markdown", "Alpha scales its input."), cell("code", stub("alpha"), "01.alpha"),
                 cell("code", 'check("01.alpha", alpha)'), cell("markdown", "Between."),
                 cell("code", "x = torch.ones(3)"))


def test_an_update_keeps_the_cells_the_learner_added_after_the_cell_they_followed_and_says_where(tmp_path, capsys):
    """The learner added cells (one at the top, a hint after the heading, a note and an experiment after
    alpha's check), changed two of the course's cells, deleted one and answered alpha. After the update:
    each added cell follows the cell it followed (found by its text where the course moved it, by its
    id where the course reworded it; at the top where it was first), the change to a cell the course
    left as it was is kept, the change to one the course changed too is named (it stays in the old
    copy), the deleted course cell is back, and the update says all of it."""
    course, work = write_course(tmp_path / "course", COPIED), tmp_path / "work"
    learner.copy_course(work, course)
    path = work / "en" / "01_a.ipynb"
    copy = json.loads(path.read_text())
    c = copy["cells"]
    c[2]["source"] = ANSWER
    c[5]["source"] = "x = torch.ones(3) * 2"  # changed; the course leaves it as it was
    c[7]["source"] = 'check("01.beta", beta)  # twice'  # changed; the course changes it too
    copy["cells"] = [own("code", "import numpy as np", "a1b2-top"), c[0], own("code", 'hint("01.alpha")', "a1b2-hint"),
                     *c[2:4], own("markdown", "My note: alpha doubles.", "a1b2-note"),
                     own("code", "alpha(torch.ones(2))", "a1b2-try"), *c[4:]]  # c[1] deleted
    path.write_text(json.dumps(copy))
    write_course(course, NEWER)
    (done, _) = learner.update(work, "en", course)
    said = capsys.readouterr().out

    new = [(k, t) for k, t in ((c["cell_type"], _text(c)) for c in NEWER["cells"])]
    new[5] = ("code", ANSWER)
    new[8] = ("code", "x = torch.ones(3) * 2")
    expected = [("code", "import numpy as np"), new[0], ("code", 'hint("01.alpha")'), *new[1:7],
                ("markdown", "My note: alpha doubles."), ("code", "alpha(torch.ones(2))"), *new[7:]]
    assert sources(path) == expected
    cells = json.loads(path.read_text())["cells"]
    assert [c["id"] for c in cells if c["id"].startswith("a1b2")] == ["a1b2-top", "a1b2-hint", "a1b2-note", "a1b2-try"]
    assert len({c["id"] for c in cells}) == len(cells)
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
    assert done.kept == ["01.alpha"] and done.edits_kept == ["x = torch.ones(3) * 2"]
    assert done.edits_left == ['check("01.beta", beta)  # twice']
    assert done.own == [
        {"cell": "import numpy as np", "number": 1, "after": None},
        {"cell": 'hint("01.alpha")', "number": 3, "after": "# A lesson, revised"},
        {"cell": "My note: alpha doubles.", "number": 10, "after": 'check("01.alpha", alpha)'},
        {"cell": "alpha(torch.ones(2))", "number": 11, "after": "My note: alpha doubles."}]
    for key, fields in [("learner.own_top", dict(cell="import numpy as np", number=1)),
                        ("learner.own_kept", dict(cell='hint("01.alpha")', number=3, after="# A lesson, revised")),
                        ("learner.own_kept", dict(cell="My note: alpha doubles.", number=10,
                                                  after='check("01.alpha", alpha)')),
                        ("learner.edit_kept", dict(cell="x = torch.ones(3) * 2")),
                        ("learner.edit_left", dict(cell='check("01.beta", beta)  # twice', old=f"before-update/{done.old.name}"))]:
        assert i18n.text("en", key, **fields) in said, (key, said)
    assert ("code", 'check("01.beta", beta)  # twice') in sources(done.old)
    # the next version: the learner's cells and change are theirs still
    write_course(course, lesson(*NEWER["cells"], cell("markdown", "An epilogue.")))
    (again, _) = learner.update_course(work, course)
    assert [o["cell"] for o in again.own] == [o["cell"] for o in done.own] and again.edits_kept == done.edits_kept
    assert sources(path) == [*expected, ("markdown", "An epilogue.")]


def test_an_update_of_a_copy_made_before_cells_were_recorded_keeps_the_cells_it_cannot_find_in_the_course(tmp_path):
    """A copy recorded without its cells (an earlier course): the learner's cells are those whose text
    and id the new version lacks; the course's it still has are not doubled."""
    course, work = write_course(tmp_path / "course", COPIED), tmp_path / "work"
    learner.copy_course(work, course)
    path = work / "en" / "01_a.ipynb"
    copy = json.loads(path.read_text())
    copy["cells"].insert(4, own("markdown", "My note.", "a1b2-note"))
    path.write_text(json.dumps(copy))
    marker = json.loads((work / learner.MARKER).read_text())
    for record in marker["lessons"].values():
        del record["cells"]
    (work / learner.MARKER).write_text(json.dumps(marker))
    write_course(course, NEWER)
    (done, _) = learner.update_course(work, course)
    assert done.own == [{"cell": "My note.", "number": 8, "after": 'check("01.alpha", alpha)'}]
    assert len(sources(path)) == len(NEWER["cells"]) + 1


def test_an_exercise_the_new_version_lacks_is_named_and_stays_in_the_old_copy(tmp_path, capsys):
    course, work = write_course(tmp_path / "course", VERSION_1), tmp_path / "work"
    learner.copy_course(work, course)
    answered(work)
    write_course(course, lesson(*[c for c in VERSION_2["cells"] if "alpha" not in _text(c)]))
    learner.update(work, "en", course)
    said = capsys.readouterr().out
    (old,) = (work / "en" / "before-update").glob("*_01_a.ipynb")
    assert i18n.text("en", "learner.lost", exercise="01.alpha", old=f"before-update/{old.name}") in said
    assert ("code", ANSWER) in sources(old) and ("code", ANSWER) not in sources(work / "en" / "01_a.ipynb")
    learner.update(work, "en", course)
    assert i18n.text("en", "learner.up_to_date") in capsys.readouterr().out


def test_an_interrupted_update_loses_nothing_and_runs_again(tmp_path, monkeypatch):
    """Stopped as it moves the new lesson over the learner's copy (Ctrl-C, a full disk): the copy is
    as it was, the old copy beside it, nothing half-written; run again, the update completes."""
    course, work = write_course(tmp_path / "course", VERSION_1), tmp_path / "work"
    learner.copy_course(work, course)
    before = answered(work)
    write_course(course, VERSION_2)
    replace = os.replace

    def interrupted(source, target):
        if Path(target).name == "01_a.ipynb":
            raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(learner.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        learner.update_course(work, course, languages=("en",))
    monkeypatch.setattr(learner.os, "replace", replace)
    assert (work / "en" / "01_a.ipynb").read_bytes() == before
    assert [p.read_bytes() for p in (work / "en" / "before-update").glob("*_01_a.ipynb")] == [before]
    assert not [p for p in (work / "en").iterdir() if p.name.startswith(".")]
    assert learner.changed_lessons(work, course, ("en",)) == [("en", "01_a.ipynb")]
    learner.update_course(work, course, languages=("en",))
    assert ("code", ANSWER) in sources(work / "en" / "01_a.ipynb")


def test_an_update_moves_a_lesson_copied_under_its_old_chinese_name_to_the_new_one(tmp_path, capsys):
    """A learner who started before the Chinese copies had Chinese names: their work/zh/01_a.ipynb (the
    English name) holds answers. The launch neither copies the renamed lesson beside it nor keeps the old
    home; `make update` merges the copy into the lesson's new name (matched by its number), keeps the old
    file in before-update/ and says so; a notebook of the learner's own with a lesson's number stays."""
    course, work = tmp_path / "course", tmp_path / "work"
    for lang in ("en", "zh"):  # the course as it was: both languages under the same names
        (course / lang).mkdir(parents=True)
        (course / lang / "01_a.ipynb").write_text(json.dumps(VERSION_1))
        (course / lang / "index.ipynb").write_text(json.dumps(lesson(cell("markdown", f"home {lang}"))))
    learner.copy_course(work, course)
    before = answered(work, "zh")
    (work / "zh" / "01_my_notes.ipynb").write_text(json.dumps(lesson(cell("markdown", "my notes"))))
    # the course now: the Chinese lesson and home under Chinese names (the lesson's text unchanged)
    (course / "zh" / "01_a.ipynb").rename(course / "zh" / "01_甲.ipynb")
    (course / "zh" / "index.ipynb").unlink()
    (course / "zh" / HOME_ZH_NAME).write_text(json.dumps(lesson(cell("markdown", "首页"))))

    assert learner.renamed_lessons(work, course) == [("zh", "01_甲.ipynb", "01_a.ipynb")]
    assert learner.copy_course(work, course) == [work / "zh" / HOME_ZH_NAME]  # the lesson: not beside the old copy
    assert sorted(p.name for p in (work / "zh").iterdir()) == ["01_a.ipynb", "01_my_notes.ipynb", HOME_ZH_NAME]
    assert learner.changed_lessons(work, course) == [("zh", "01_甲.ipynb")]

    (done,) = learner.update(work, "zh", course)
    said = capsys.readouterr().out
    new, old_copy = work / "zh" / "01_甲.ipynb", done.old
    assert done.path == new and done.renamed_from == work / "zh" / "01_a.ipynb" and done.kept == ["01.alpha"]
    assert i18n.text("zh", "learner.renamed", old=work / "zh" / "01_a.ipynb", path="01_甲.ipynb") in said
    assert f"before-update/{old_copy.name}" in said and old_copy.read_bytes() == before
    assert old_copy.parent == work / "zh" / "before-update" and old_copy.name.endswith("_01_a.ipynb")
    assert not (work / "zh" / "01_a.ipynb").exists() and (work / "zh" / "01_my_notes.ipynb").exists()
    assert ("code", ANSWER) in sources(new) and ("code", "print('scratch')") in sources(new)
    recorded = json.loads((work / learner.MARKER).read_text())["lessons"]
    assert set(recorded) == {"en/01_a.ipynb", "zh/01_甲.ipynb"}
    assert learner.changed_lessons(work, course) == [] and learner.copy_course(work, course) == []
    learner.update(work, "en", course)
    assert i18n.text("en", "learner.up_to_date") in capsys.readouterr().out


def test_a_copy_made_before_copies_were_recorded_is_adopted_or_merged_against_the_new_stubs(tmp_path):
    """A learner's copy from before the record (a marker without "lessons"): the same lesson as the
    course's is recorded as a copy of it; a lesson the course changed since is reported, and its
    exercise cells that differ from the new stubs are kept."""
    course, work = write_course(tmp_path / "course", VERSION_1), tmp_path / "work"
    learner.copy_course(work, course)
    answered(work)
    (work / learner.MARKER).write_text(json.dumps({"homes": {}}))
    assert learner.changed_lessons(work, course) == []
    learner.copy_course(work, course)
    assert set(json.loads((work / learner.MARKER).read_text())["lessons"]) == {"en/01_a.ipynb", "zh/01_a.ipynb"}
    (work / learner.MARKER).write_text(json.dumps({"homes": {}}))
    write_course(course, VERSION_2)
    learner.copy_course(work, course)  # not adopted: its cells are not the course's now
    assert learner.changed_lessons(work, course) == [("en", "01_a.ipynb"), ("zh", "01_a.ipynb")]
    (_, _, kept, *_), _ = learner.update_course(work, course)
    assert "01.alpha" in kept and ("code", ANSWER) in sources(work / "en" / "01_a.ipynb")


def test_make_update_runs_the_update_in_the_learners_language(tmp_path):
    course, work = write_course(tmp_path / "course", VERSION_1), tmp_path / "work"
    learner.copy_course(work, course)
    answered(work)
    write_course(course, VERSION_2)
    done = subprocess.run([sys.executable, "-m", "course_utils", "update", str(work), "--lang", "zh", "--only", "01",
                           "--course", str(course)], cwd=build.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "01.alpha" in done.stdout and "已换成课程的新版本" in done.stdout, done.stdout
    plan = subprocess.run(["make", "-n", "update", "ONLY=01", "LANG=zh_CN.UTF-8"], cwd=build.ROOT,
                          capture_output=True, text=True, timeout=60)
    assert '-m course_utils update "work" --lang zh --only 01' in plan.stdout, plan.stdout


# ----------------------------------------------------------------------------- the launch

def test_make_lab_starts_the_lab_command_with_its_options():
    def plan(*options):
        # --no-print-directory: under `make test` this make is a sub-make, whose last line would be "Leaving directory"
        done = subprocess.run(["make", "--no-print-directory", "-n", "lab", *options], cwd=build.ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[-1]

    assert plan("LANG=en_US.UTF-8").endswith('-m course_utils lab "work" --lang en --port 8888 --ip localhost ')
    assert plan("LANG=zh", "NO_BROWSER=1", "IP=0.0.0.0", "PORT=9999").endswith(
        '-m course_utils lab "work" --lang zh --port 9999 --ip 0.0.0.0 --no-browser')
    assert "--no-browser" not in plan("NO_BROWSER=0")
    readme = (build.ROOT / "README.md").read_text(encoding="utf-8")
    for text in ("make lab NO_BROWSER=1", "IP=0.0.0.0", "PORT=", "make update"):
        assert text in readme, text


def test_the_lab_is_rooted_at_the_work_folder_and_opens_the_home():
    line = launch.command("work", "zh", 9999, "0.0.0.0", browser=False)
    assert f"--ServerApp.root_dir={(build.ROOT / 'work').resolve()}" in line or "--ServerApp.root_dir=" in " ".join(line)
    assert "--LabApp.default_url=/lab/tree/zh/%E9%A6%96%E9%A1%B5.ipynb" in line and "--no-browser" in line  # 首页.ipynb
    assert "--LabApp.default_url=/lab/tree/en/index.ipynb" in launch.command("work", "en")
    assert "--ServerApp.ip=0.0.0.0" in line and "--ServerApp.port=9999" in line
    assert "--no-browser" not in launch.command("work", "en")


#: What JupyterLab prints as it starts (jupyter_server 2: its addresses twice, then more log), as a
#: stand-in that prints it and stays up a moment, then ends with the status it is given.
FAKE_LAB = r"""
import sys, time
sys.stderr.write('''[I ServerApp] jupyterlab | extension was successfully loaded.
[I ServerApp] Jupyter Server 2.21.1 is running at:
[I ServerApp] http://localhost:8931/lab/tree/zh/index.ipynb?token=abc123
[I ServerApp]     http://127.0.0.1:8931/lab/tree/zh/index.ipynb?token=abc123
[C ServerApp]
    To access the server, open this file in a browser:
        file:///tmp/jpserver-1-open.html
    Or copy and paste one of these URLs:
        http://localhost:8931/lab/tree/zh/index.ipynb?token=abc123
        http://127.0.0.1:8931/lab/tree/zh/index.ipynb?token=abc123
[I ServerApp] Skipped non-installed server(s): bash-language-server
''')
sys.stderr.flush()
time.sleep(float(sys.argv[1]))
print('[I ServerApp] Shutting down 0 kernels', flush=True)
sys.exit(int(sys.argv[2]))
"""


def test_the_launch_says_the_one_address_to_open_and_the_changed_lessons_last(tmp_path):
    """`make lab`'s own words come after JupyterLab's start-up log, where the learner looks: the one
    address to open (of the two it prints, the one on the host it listens on, with the token), then
    the lessons the course changed; JupyterLab's output passes through whole, and its exit status."""
    import io

    script = tmp_path / "fake_lab.py"
    script.write_text(FAKE_LAB)
    changed = [("zh", "01_attention_basics.ipynb")]
    address = "http://127.0.0.1:8931/lab/tree/zh/index.ipynb?token=abc123"
    said = launch.announcement("zh", address, False, True, 8931, changed, "work")
    assert said == [i18n.text("zh", "launch.open", url=address), i18n.text("zh", "launch.address", port=8931),
                    i18n.text("zh", "learner.changed", lessons="zh/01_attention_basics.ipynb", work="work")]
    out = io.StringIO()
    status = launch.serve([sys.executable, str(script), "4", "7"],
                          lambda found: launch.announcement("zh", found, False, True, 8931, changed, "work"),
                          "127.0.0.1", out)
    text = out.getvalue()
    assert status == 7 and text.count(said[0]) == 1, text
    start = text.index(said[0])
    assert text[start:].startswith("\n".join(said)), text  # the address, the remote hint, the changed lessons
    assert text.index("Skipped non-installed") < start < text.index("Shutting down")  # after the start-up log
    # JupyterLab ends before it printed an address: the launch still says which lessons changed, at the end
    (tmp_path / "silent.py").write_text("import sys; print('[E] port in use'); sys.exit(1)")
    out = io.StringIO()
    assert launch.serve([sys.executable, str(tmp_path / "silent.py")],
                        lambda found: launch.announcement("en", found, True, False, 1, changed, "work"),
                        "127.0.0.1", out) == 1
    assert "port in use" in out.getvalue() and out.getvalue().rstrip().endswith(
        i18n.text("en", "learner.changed", lessons="zh/01_attention_basics.ipynb", work="work"))
    assert launch.pick_address(["http://myhost:8888/lab?token=t", "http://127.0.0.1:8888/lab?token=t"],
                               "0.0.0.0") == "http://myhost:8888/lab?token=t"


#: A layout as JupyterLab 4 saves it (work/.workspaces/en/default-37a8.jupyterlab-workspace), trimmed of
#: panels this test does not touch; its main area split in two, with two lessons and the home in it.
def saved_layout(widgets, current, cwd="en"):
    return {"data": {
        "layout-restorer:data": {
            "main": {"dock": {"type": "split-area", "orientation": "horizontal", "sizes": [0.5, 0.5], "children": [
                {"type": "tab-area", "currentIndex": 0, "widgets": widgets[:2]},
                {"type": "tab-area", "currentIndex": 0, "widgets": widgets[2:]}]}, "current": current},
            "left": {"collapsed": False, "visible": True, "current": "filebrowser", "widgets": ["filebrowser"]}},
        "file-browser-filebrowser:cwd": {"path": cwd},
        **{w: {"data": {"path": w.split(":", 1)[1], "factory": "Notebook"}} for w in widgets},
        "docmanager:recents": {"opened": [], "closed": []}}, "metadata": {"id": "default"}}


def test_a_relaunch_reopens_the_home_and_the_last_lesson_only(tmp_path):
    work = tmp_path / "work"
    learner.copy_course(work)
    folder = launch.workspaces(work, "en")
    folder.mkdir(parents=True)
    path = folder / "default-37a8.jupyterlab-workspace"
    ids = [f"notebook:en/{n}" for n in ("00_tensor_shapes.ipynb", "index.ipynb", "05_probsparse.ipynb",
                                        "03_self_cross_attention.ipynb")]
    # the current tab is a lesson: it is the one kept
    path.write_text(json.dumps(saved_layout(ids, ids[2])))
    assert launch.trim_workspace(work, "en") == [path]
    saved = json.loads(path.read_text())
    assert saved["data"]["layout-restorer:data"]["main"] == {
        "dock": {"type": "tab-area", "currentIndex": 1, "widgets": [ids[1], ids[2]]}, "current": ids[2]}
    assert sorted(k for k in saved["data"] if k.startswith("notebook:")) == sorted([ids[1], ids[2]])
    assert saved["data"]["layout-restorer:data"]["left"]["current"] == "filebrowser"
    assert launch.trim_workspace(work, "en") == []  # nothing more to cut
    # the current tab is the home: the lesson saved last is kept
    path.write_text(json.dumps(saved_layout(ids, ids[1])))
    os.utime(work / "en" / "00_tensor_shapes.ipynb", (2_000_000_000, 2_000_000_000))
    launch.trim_workspace(work, "en")
    assert json.loads(path.read_text())["data"]["layout-restorer:data"]["main"]["dock"]["widgets"] == [ids[1], ids[0]]
    # saved by the JupyterLab of before, rooted at the repository: its paths are the work folder's now
    old = [f"notebook:work/en/{n}" for n in ("index.ipynb", "01_attention_basics.ipynb", "no_such.ipynb")]
    path.write_text(json.dumps(saved_layout(old, old[1], cwd="work/en")))
    launch.trim_workspace(work, "en")
    saved = json.loads(path.read_text())
    assert saved["data"]["layout-restorer:data"]["main"]["dock"]["widgets"] == [
        "notebook:en/index.ipynb", "notebook:en/01_attention_basics.ipynb"]
    assert saved["data"]["file-browser-filebrowser:cwd"] == {"path": "en"}
    assert not [k for k in saved["data"] if k.startswith("notebook:work/")]
    path.write_text("{not json")  # a layout it cannot read is left to JupyterLab
    assert launch.trim_workspace(work, "en") == []


@pytest.mark.slow  # (starts a JupyterLab server: not in `make quick`)
def test_the_lab_command_starts_without_a_browser_prints_its_token_and_serves_the_work_folder(tmp_path):
    """`python -m course_utils lab work --no-browser --port N`, as `make lab NO_BROWSER=1 PORT=N` runs
    it: the address with its token printed, the server rooted at the work folder (the learner's copies
    and the diagrams, nothing of the course's own), the lessons' ../../images/ links served from there."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    work, home = tmp_path / "work", tmp_path / "jupyter"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_PREFER_ENV_PATH="1", IPYTHONDIR=str(home / "ipython"))
    log = tmp_path / "lab.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "course_utils", "lab", str(work), "--lang", "zh",
                                    "--no-browser", "--port", str(port), "--ip", "127.0.0.1"], cwd=tmp_path, env=env,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    token = None
    try:
        deadline = time.monotonic() + 90
        while token is None and time.monotonic() < deadline and process.poll() is None:
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab/tree/zh/{re.escape(HOME_ZH)}\?token=(\w+)", log.read_text())
            token = found and found.group(1)
            time.sleep(0.2)
        assert token, log.read_text()[-3000:]
        # the launch's own words, after JupyterLab's: the one address, with the token
        deadline = time.monotonic() + 60
        opened = i18n.text("zh", "launch.open", url=f"http://127.0.0.1:{port}/lab/tree/zh/{HOME_ZH}?token={token}")
        while opened not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert opened in log.read_text() and i18n.text("zh", "launch.address", port=port) in log.read_text()

        def get(path):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={token}", timeout=10) as answer:
                return answer.read()

        listing = {item["name"] for item in json.loads(get("/api/contents/"))["content"]}
        assert {"en", "zh", "images"} <= listing and not listing & {"notebooks", "course_utils"}
        assert {"术语表.md", "首页.ipynb"} <= {item["name"] for item in json.loads(get("/api/contents/zh"))["content"]}
        # JupyterLab resolves zh/../../images/x.svg, a link above its root, at the root: work/images/x.svg
        assert get("/files/images/01_sdpa_zh.svg") == (build.ROOT / "images" / "01_sdpa_zh.svg").read_bytes()
    finally:
        if token:
            with contextlib.suppress(Exception):
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/shutdown?token={token}", method="POST"), timeout=5).close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=10)
