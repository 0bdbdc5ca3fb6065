"""The GitHub Classroom workflow template (classroom/autograding.yml): it parses, it grades with the
grader's real command line, it takes the grader from the course (never from the student's push),
and its summary step merges the per-notebook results into one result.json."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_teacher.grade import grader

yaml = pytest.importorskip("yaml")  # jupytext depends on PyYAML, so it is there

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "classroom" / "autograding.yml"


@pytest.fixture(scope="module")
def steps():
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["grade"]["steps"]


def _step(steps, name):
    return next(step for step in steps if step.get("name") == name)


def test_the_grader_comes_from_the_pinned_course_not_from_the_push(steps):
    checkouts = [step for step in steps if str(step.get("uses", "")).startswith("actions/checkout")]
    student, course = checkouts
    assert "repository" not in student.get("with", {})
    assert course["with"]["repository"] == "${{ vars.COURSE_REPOSITORY }}"
    assert course["with"]["ref"] == "${{ vars.COURSE_REF }}"
    install = _step(steps, "Install the course")["run"]
    assert "./course" in install and "submission" not in install
    assert _step(steps, "Grade")["working-directory"] == "course"


def test_the_grade_step_uses_options_the_grader_has(steps, capsys):
    command = _step(steps, "Grade")["run"]
    assert command.strip().startswith("python -m course_teacher.grade ")
    with pytest.raises(SystemExit):
        grader.main(["--help"])
    usage = capsys.readouterr().out
    for option in re.findall(r"(--[a-z-]+)", command):
        assert option in usage, f"the workflow passes {option}, which the grader does not take"


def test_the_summary_step_merges_every_notebook_into_one_result(steps, tmp_path):
    script = _step(steps, "Feedback in the job summary, one result.json for the push")["run"]
    code = script.split("<<'PY'\n", 1)[1].rsplit("PY", 1)[0]
    grades = tmp_path / "grades"
    for name, score, tests in (("00_tensor_shapes", 2, ["00.a", "00.b", "00.c"]), ("01_attention_basics", 1, ["01.a"])):
        folder = grades / "ada" / name
        folder.mkdir(parents=True)
        result = {"schema": "classroom50/result/v1", "score": score, "max-score": len(tests),
                  "tests": [{"test-name": t, "passed": i < score, "score": int(i < score), "max-score": 1}
                            for i, t in enumerate(tests)]}
        (folder / "result.json").write_text(json.dumps(result))
        (folder / "feedback.md").write_text(f"# {name}\n")
    summary = tmp_path / "summary.md"
    environment = dict(os.environ, GITHUB_STEP_SUMMARY=str(summary))
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment, check=True)
    merged = json.loads((grades / "result.json").read_text())
    assert (merged["score"], merged["max-score"]) == (3, 4)
    assert [test["test-name"] for test in merged["tests"]] == ["00.a", "00.b", "00.c", "01.a"]
    text = summary.read_text()
    assert "3 / 4" in text and "# 00_tensor_shapes" in text and "# 01_attention_basics" in text
