"""The GitHub Actions workflow a teacher grades a class with (classroom/grade-class.yml): it parses,
only the teacher can start it, it stops with a clear error when a variable or secret it needs is
unset, it takes the grader from the pinned course (never from a student's repository), copies only
the lesson's notebooks out of each student's repository, and calls the grader with options it has."""

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from course_teacher.grade import grader

yaml = pytest.importorskip("yaml")  # jupytext depends on PyYAML, so it is there

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "classroom" / "grade-class.yml"
SET = {"COURSE_REPOSITORY": "teacher/attention-course", "COURSE_REF": "v0.1.0", "COURSE_LANG": "zh",
       "LESSON": "03", "HAS_SEED": "true", "HAS_TOKEN": "true"}


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def steps(workflow):
    return workflow["jobs"]["grade"]["steps"]


def _step(steps, name):
    return next(step for step in steps if step.get("name") == name)


def _bash(script, environment, cwd):
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env={"PATH": os.environ["PATH"], **environment},
                          capture_output=True, text=True, check=False)


def test_only_the_teacher_starts_it_a_students_push_does_not(workflow):
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}


def test_the_grader_comes_from_the_pinned_course_never_from_a_student(steps):
    checkouts = [step for step in steps if str(step.get("uses", "")).startswith("actions/checkout")]
    roster, course = checkouts
    assert "repository" not in roster["with"] and roster["with"]["sparse-checkout"] == "roster.txt"
    assert course["with"]["repository"] == "${{ vars.COURSE_REPOSITORY }}"
    assert course["with"]["ref"] == "${{ vars.COURSE_REF }}"
    install = _step(steps, "Install the course and the sandbox")["run"]
    assert "pip install --quiet --no-deps -e ./course" in install and "bubblewrap" in install
    # torch's CPU build and the grader's packages from the grade lock, with their hashes, before the course
    assert install.index("--require-hashes --no-deps -r course/requirements/grade.lock") < install.index("-e ./course")
    assert "pip check" in install
    assert "submissions" not in install and "work/" not in install
    assert _step(steps, "Grade")["working-directory"] == "course"


@pytest.mark.parametrize("unset", sorted(SET))
def test_a_missing_setting_stops_the_job_and_is_named(steps, unset, tmp_path):
    script = _step(steps, "Everything the grading needs is set")["run"]
    assert _bash(script, SET, tmp_path).returncode == 0
    environment = {**SET, unset: "" if unset not in ("HAS_SEED", "HAS_TOKEN") else "false"}
    done = _bash(script, environment, tmp_path)
    named = {"HAS_SEED": "COURSE_SEED", "HAS_TOKEN": "ROSTER_TOKEN", "LESSON": "lesson"}.get(unset, unset)
    assert done.returncode == 1 and "::error::" in done.stdout and named in done.stdout, done.stdout


def test_a_wrong_language_or_lesson_is_refused(steps, tmp_path):
    script = _step(steps, "Everything the grading needs is set")["run"]
    for wrong in ({"COURSE_LANG": "fr"}, {"LESSON": "3"}, {"LESSON": "03; rm -rf /"}):
        done = _bash(script, {**SET, **wrong}, tmp_path)
        assert done.returncode == 1, wrong


def test_only_the_lessons_notebooks_are_taken_from_each_repository(steps, tmp_path):
    """A fake `git` stands in for GitHub: each student's repository holds notebooks of two lessons
    in both languages, a script and a link; only the lesson's notebooks in the course language reach
    submissions/. A repository that cannot be read, or holds no such notebook, is named."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text(_fake_git())
    (fake / "git").chmod((fake / "git").stat().st_mode | stat.S_IEXEC)
    (tmp_path / "teacher").mkdir()
    (tmp_path / "teacher" / "roster.txt").write_text("# the class\nada/course-work\n\nbo/work  # late\nghost/gone\ncy/empty\n")
    script = _step(steps, "The students' work, as data")["run"]
    environment = {**SET, "TOKEN": "t0ken", "PATH": f"{fake}:{os.environ['PATH']}"}
    done = _bash(script, environment, tmp_path)
    assert done.returncode == 0, done.stderr
    taken = sorted(p.relative_to(tmp_path / "submissions").as_posix() for p in (tmp_path / "submissions").rglob("*"))
    assert taken == ["ada", "ada/03_自注意力与交叉注意力.ipynb", "bo", "bo/03_自注意力与交叉注意力.ipynb", "cy"]  # the zh name
    assert "could not read ghost/gone" in done.stdout and "cy/empty has no notebooks/zh/03_*.ipynb" in done.stdout
    assert not (tmp_path / "work").exists()
    bad = tmp_path / "teacher" / "roster.txt"
    bad.write_text("not-a-repository\n")
    assert _bash(script, environment, tmp_path).returncode != 0


def _fake_git():
    """A `git clone URL FOLDER` that makes a student's repository (and fails for ghost/*)."""
    return """#!/bin/bash
for last; do :; done
case "$*" in *github.com/ghost/*) exit 128 ;; *github.com/cy/*) mkdir -p "$last"; exit 0 ;; esac
mkdir -p "$last/notebooks/zh" "$last/notebooks/en"
echo '{}' > "$last/notebooks/zh/03_自注意力与交叉注意力.ipynb"
echo '{}' > "$last/notebooks/zh/02_masking.ipynb"
echo '{}' > "$last/notebooks/en/03_self_cross_attention.ipynb"
echo 'import os' > "$last/notebooks/zh/03_evil.py"
ln -s /etc/passwd "$last/notebooks/zh/03_link.ipynb"
"""


def test_the_grade_step_uses_options_the_grader_has(steps, capsys):
    command = _step(steps, "Grade")["run"]
    assert command.strip().startswith("python -m course_teacher.grade ")
    assert '--lesson "$LESSON"' in command and '--seed "$COURSE_SEED"' in command
    with pytest.raises(SystemExit):
        grader.main(["--help"])
    usage = capsys.readouterr().out
    for option in re.findall(r"(--[a-z-]+)", command):
        assert option in usage, f"the workflow passes {option}, which the grader does not take"
