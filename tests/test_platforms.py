"""The autograders for Gradescope and Classroom 50 (course_teacher/platforms): each holds the course
as a wheel (the grader comes from it, never from the submission), and, run the way its platform
runs it on a solved, a stub and a missing notebook, writes the results its platform's published
contract asks for: Gradescope's results.json (docs/specs.md of gradescope/autograder_samples) and
Classroom 50's result.json (classroom50/result/v1, its wiki's "Advanced Autograding").

The autograder is run with ``--python`` (the course installed here) instead of the environment it
installs on the platform: the install needs the network."""

import io
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from submissions import render, solved

from course_teacher import platforms
from course_teacher.exercises import EXERCISES
from course_teacher.grade import sandbox

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parents[1]
LESSON, STEM = "00", "00_tensor_shapes"
NOTEBOOK = f"{STEM}.ipynb"
LESSON_POINTS = sum(e.points for name, e in EXERCISES.items() if name.startswith(LESSON + "."))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("platforms")
    zips = platforms.write("gradescope", out, seed=4321, only_lessons=[LESSON], langs=("en",))
    folders = platforms.write("classroom50", out, seed=4321, only_lessons=[LESSON], langs=("zh",))
    return zips[0], folders[0]


def test_the_gradescope_zip_has_its_files_at_the_root_and_the_course_pinned_inside(built):
    with zipfile.ZipFile(built[0]) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        settings = json.loads(archive.read("settings.json"))
        wheel = archive.read(settings["wheel"])
    assert {"setup.sh", "run_autograder", "autograder.py", "settings.json", settings["wheel"]} == set(infos)
    for executable in ("setup.sh", "run_autograder"):
        assert (infos[executable].external_attr >> 16) & stat.S_IXUSR, executable
    assert settings["lesson"] == LESSON and settings["lang"] == "en" and settings["seed"] == 4321
    assert sum(e["points"] for e in settings["exercises"]) == LESSON_POINTS
    with zipfile.ZipFile(io.BytesIO(wheel)) as course:
        names = course.namelist()
    assert "course_teacher/grade/grader.py" in names and "course_utils/exercises/public/00.padding_mask.pt" in names
    assert not [n for n in names if n.startswith("tests/")]


def _gradescope(zip_path, tmp_path, notebook=None, name="my work.ipynb"):
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    (root / "submission").mkdir(parents=True)
    if notebook is not None:
        nbformat.write(notebook, str(root / "submission" / name))
    done = subprocess.run([sys.executable, "-I", str(root / "source" / "autograder.py"), "--python", sys.executable],
                          cwd=root, env={**os.environ, "GRADESCOPE_ROOT": str(root)}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def _valid_gradescope(results):
    """results.json as Gradescope's specification has it: a numeric score, tests with a name, a
    numeric score and max_score, an output string and a known visibility."""
    assert isinstance(results["score"], (int, float)) and isinstance(results["output"], str)
    for test in results["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert test["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert sum(t["max_score"] for t in results["tests"]) == LESSON_POINTS


def test_gradescope_grades_an_uploaded_notebook_whatever_its_name(built, tmp_path):
    if not sandbox.available()[0] and os.environ.get("CI"):
        pytest.fail("no sandbox under CI")
    results = _gradescope(built[0], tmp_path, solved(NOTEBOOK, "en"))
    _valid_gradescope(results)
    assert results["score"] == LESSON_POINTS, results
    assert "00.padding_mask" in results["output"]


def test_gradescope_gives_a_stub_0_and_a_missing_notebook_0_with_a_message(built, tmp_path):
    stub = _gradescope(built[0], tmp_path / "stub", render(NOTEBOOK, "en"))
    _valid_gradescope(stub)
    assert stub["score"] == 0
    missing = _gradescope(built[0], tmp_path / "missing")
    _valid_gradescope(missing)
    assert missing["score"] == 0 and f"upload {STEM}.ipynb" in missing["output"]


def _classroom50(folder, checkout, notebook=None):
    (checkout / "notebooks" / "zh").mkdir(parents=True)
    if notebook is not None:
        nbformat.write(notebook, str(checkout / "notebooks" / "zh" / f"{STEM}.ipynb"))
    git = ["git", "-c", "user.name=ada", "-c", "user.email=ada@example.org"]
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    subprocess.run([*git, "add", "-A"], cwd=checkout, check=True)
    environment = {**os.environ, "GIT_COMMITTER_DATE": "2026-11-20T08:30:00Z", "GIT_AUTHOR_DATE": "2026-11-20T08:30:00Z"}
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "my work"], cwd=checkout, check=True, env=environment)
    runner = {"CLASSROOM": "attn-2026", "ASSIGNMENT": "lesson-00", "OWNER": "ada", "SUBMISSION_TAG": "submit/x-1",
              "COMMIT_URL": "https://github.com/ada/c/commit/1", "RELEASE_URL": "https://github.com/ada/c/releases/1"}
    done = subprocess.run([sys.executable, str(folder / "autograder.py"), "--python", sys.executable], cwd=checkout,
                          env={**os.environ, **runner}, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((checkout / "result.json").read_text(encoding="utf-8"))


def _valid_classroom50(result):
    """result.json as Classroom 50's contract has it (the runner stamps assignment_type)."""
    assert result["schema"] == "classroom50/result/v1"
    assert (result["classroom"], result["assignment"], result["owner"]) == ("attn-2026", "lesson-00", "ada")
    assert result["submission"] == "submit/x-1" and result["review"] == result["commit"]
    assert result["datetime"] == "2026-11-20T08:30:00Z"  # the graded commit's date, not the grading's
    assert result["graded_at"].endswith("Z")
    assert type(result["score"]) is int and type(result["max-score"]) is int
    for test in result["tests"]:
        assert isinstance(test["test-name"], str) and type(test["passed"]) is bool
        assert type(test["score"]) is int and type(test["max-score"]) is int
    assert result["score"] == sum(t["score"] for t in result["tests"])
    assert result["max-score"] == sum(t["max-score"] for t in result["tests"]) == LESSON_POINTS


def test_classroom50_grades_the_lessons_notebook_of_the_checkout(built, tmp_path):
    result = _classroom50(built[1], tmp_path / "solved", solved(NOTEBOOK, "zh"))
    _valid_classroom50(result)
    assert result["score"] == LESSON_POINTS
    assert "00.padding_mask" in (tmp_path / "solved" / "release-body.md").read_text(encoding="utf-8")


def test_classroom50_takes_the_grader_from_its_wheel_not_from_the_students_course_utils(built, tmp_path):
    """A student's checkout with a course_utils of its own that would pass everything: the grader
    runs with -I in a folder of its own, so the student's package is never imported."""
    checkout = tmp_path / "cheat"
    (checkout / "course_teacher" / "grade").mkdir(parents=True)
    (checkout / "course_teacher" / "__init__.py").write_text("")
    (checkout / "course_teacher" / "grade" / "__init__.py").write_text("")
    (checkout / "course_teacher" / "grade" / "__main__.py").write_text(
        "import json, pathlib, sys\nout = pathlib.Path(sys.argv[sys.argv.index('--out') + 1]) / 'x'\n"
        "out.mkdir(parents=True)\n(out / 'result.json').write_text(json.dumps({'score': 99, 'max-score': 99, "
        "'tests': []}))\n(out / 'feedback.md').write_text('forged')\n")
    result = _classroom50(built[1], checkout, render(NOTEBOOK, "zh"))
    _valid_classroom50(result)
    assert result["score"] == 0


def test_classroom50_scores_a_missing_notebook_0_saying_what_it_expected(built, tmp_path):
    result = _classroom50(built[1], tmp_path / "empty")
    _valid_classroom50(result)
    assert result["score"] == 0 and all(t["mistake"] == "MISSING" for t in result["tests"])
    assert f"{STEM}.ipynb" in result["tests"][0]["message"] and "中文" in result["tests"][0]["message"]
