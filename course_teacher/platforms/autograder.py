"""One lesson's autograder on a grading platform: Gradescope or Classroom 50.

Built by ``python -m course_teacher.platforms`` (see its docstring), which puts this file beside a
``settings.json`` (the lesson, the language, the teacher's seed, what each exercise is worth) and
the course itself as a wheel, built from the commit the teacher chose: the grader that runs is the
one that commit holds, whatever the student's repository or upload contains.

It uses the standard library only, so the platform's own Python can run it; the course runs in a
virtual environment of its own (Gradescope's setup.sh makes it once; on Classroom 50 this script
makes it on its first run). It grades the one notebook of the lesson with ``python -I -m
course_teacher.grade`` in an empty temporary folder (``-I``: nothing of the student's working
folder or environment on the import path), in the bubblewrap sandbox where the platform allows
one, and turns the grader's result.json and feedback.md into the platform's results:

- Gradescope: /autograder/results/results.json (its specification: a test per exercise with
  score, max_score, output; the feedback as the submission's output);
- Classroom 50: ./result.json in the student's checkout (classroom50/result/v1), with the graded
  commit's date as ``datetime`` and the time of grading as ``graded_at``.

A missing or unreadable notebook scores 0 on every exercise with a message saying what was
expected, never a crash: a non-zero exit is kept for the platform's own failures (the course could
not be installed).
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# beside a built autograder; in the course's own package (where it is the template) there is none
SETTINGS = json.loads((HERE / "settings.json").read_text(encoding="utf-8")) if (HERE / "settings.json").exists() else {}
GRADESCOPE = Path("/autograder")
MAX_BYTES = 20 * 2**20  # the grader's own cap on a submitted notebook
MISSING = {"en": "No notebook to grade: upload {expected} (the lesson's notebook, {lang}), as JupyterLab saved it.",
           "zh": "没有可评分的笔记本：请提交 {expected}（这一课的{lang}笔记本），即 JupyterLab 保存的原文件。"}
LANGUAGE_NAMES = {"en": {"en": "English", "zh": "Chinese"}, "zh": {"en": "英文", "zh": "中文"}}


def _expected():
    return f"{SETTINGS['stem']}.ipynb"


def course_python(venv):
    """The course's interpreter in `venv`, installed there from the wheel beside this file when it
    is not yet (torch first, pinned to its CPU build, so that nothing pulls a CUDA build)."""
    python = venv / "bin" / "python"
    marker = venv / f".installed-{SETTINGS['wheel']}"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, SETTINGS["torch"], "--index-url", "https://download.pytorch.org/whl/cpu"], check=True)
        subprocess.run([*pip, str(HERE / SETTINGS["wheel"])], check=True)
        marker.touch()
    return python


def grade(python, notebook, student):
    """The grader's (result, feedback) for `notebook`, or (None, why) when there is none to grade."""
    if notebook is None or not notebook.is_file() or notebook.is_symlink():
        return None, "missing"
    if notebook.stat().st_size > MAX_BYTES:
        return None, "missing"
    with tempfile.TemporaryDirectory(prefix="course-autograder-") as work:
        work = Path(work)
        folder = work / "submissions" / student
        folder.mkdir(parents=True)
        shutil.copyfile(notebook, folder / _expected())  # by the lesson's name, whatever it was uploaded as
        command = [str(python), "-I", "-m", "course_teacher.grade", str(work / "submissions"), "--out",
                   str(work / "grades"), "--lesson", SETTINGS["lesson"], "--seed", str(SETTINGS["seed"]),
                   "--jobs", "1"]
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=SETTINGS["timeout_s"], check=False)
        print(done.stdout, done.stderr, sep="\n")  # the platform keeps this for the teacher only
        results = sorted((work / "grades").rglob("result.json"))
        if not results:
            raise SystemExit(f"the grader wrote no result (exit code {done.returncode})")
        return (json.loads(results[0].read_text(encoding="utf-8")),
                results[0].with_name("feedback.md").read_text(encoding="utf-8"))


def _missing_result():
    """Every exercise 0, saying what was expected (the feedback in the lesson's language)."""
    lang = SETTINGS["lang"]
    text = MISSING[lang].format(expected=_expected(), lang=LANGUAGE_NAMES[lang][lang])
    tests = [{"test-name": e["id"], "passed": False, "score": 0, "max-score": e["points"], "status": "not attempted",
              "mistake": "MISSING", "message": text} for e in SETTINGS["exercises"]]
    return {"schema": "classroom50/result/v1", "score": 0, "max-score": sum(e["points"] for e in SETTINGS["exercises"]),
            "tests": tests}, text


def gradescope(root, python):
    """Grade /autograder/submission's notebook: the one named as the lesson's, else the only one."""
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in notebooks if p.name == _expected()]
    notebook = named[0] if named else notebooks[0] if len(notebooks) == 1 else None
    result, feedback = grade(python, notebook, "student")
    if result is None:
        result, feedback = _missing_result()
    results = {
        "score": result["score"],
        "output": feedback,
        "tests": [{"name": t["test-name"], "score": t["score"], "max_score": t["max-score"],
                   "output": t.get("message", ""), "visibility": "visible"} for t in result["tests"]],
    }
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    return results


def _commit_date(checkout):
    done = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=checkout, capture_output=True, text=True, check=False)
    seconds = done.stdout.strip()
    when = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC) if seconds.isdigit() else None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


def classroom50(checkout, python):
    """Grade notebooks/<lang>/<lesson's notebook> of the student's checkout into ./result.json."""
    notebook = checkout / "notebooks" / SETTINGS["lang"] / _expected()
    result, feedback = grade(python, notebook, os.environ.get("OWNER") or "student")
    if result is None:
        result, feedback = _missing_result()
    for field, variable in (("classroom", "CLASSROOM"), ("assignment", "ASSIGNMENT"), ("owner", "OWNER"),
                            ("submission", "SUBMISSION_TAG"), ("commit", "COMMIT_URL"), ("release", "RELEASE_URL"),
                            ("review", "REVIEW_URL")):
        if os.environ.get(variable):
            result[field] = os.environ[variable]
    if "review" not in result and "commit" in result:
        result["review"] = result["commit"]
    result["datetime"] = _commit_date(checkout) or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result["graded_at"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (checkout / "result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    (checkout / "release-body.md").write_text(feedback, encoding="utf-8")
    return result


def main(argv=None):
    """`autograder.py` as the platform runs it; `--install VENV` makes the course's environment
    (Gradescope's setup.sh); `--python PATH` uses a course already installed there."""
    argv = sys.argv[1:] if argv is None else argv
    if "--install" in argv:  # Gradescope's setup.sh: the course's environment, once, when the image is built
        course_python(Path(argv[argv.index("--install") + 1]))
        return 0
    python = Path(argv[argv.index("--python") + 1]) if "--python" in argv else None
    if SETTINGS["platform"] == "gradescope":
        root = Path(os.environ.get("GRADESCOPE_ROOT", GRADESCOPE))
        gradescope(root, python or root / "venv" / "bin" / "python")
    else:
        classroom50(Path.cwd(), python or course_python(HERE / ".venv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
