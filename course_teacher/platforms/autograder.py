"""One lesson's autograder on a grading platform: Gradescope or Classroom 50.

Built by ``python -m course_teacher.platforms`` (see its docstring), which puts this file beside
everything it needs, and nothing else:

- ``settings.json``: the platform, the lesson, its language, its notebook's name, what each
  exercise is worth, the time the grading may take, where torch's CPU build comes from;
- ``requirements.txt`` and ``torch.txt``: the grader's packages and torch's CPU build (the course's
  requirements/grade.lock, in two parts), every one pinned with its hashes;
- ``wheels/``: the course's student package (``course_utils``) and its grader
  (``course_teacher.grade``), built from the commit the teacher chose;
- ``key/``: the answer key (course_teacher/grade/key.py): the lesson's exercises and the cells of
  its notebooks in both languages, and each exercise's expected results on its cases as data,
  the hidden ones drawn from the teacher's seed. No reference implementation, no seed.

It uses the standard library only, so the platform's own Python runs it. The course runs in a
virtual environment of its own, installed from the files above (``--install VENV``: Gradescope's
setup.sh, once, when the image is built; on Classroom 50 on the first run), offline from then on.
It grades the one notebook of the lesson with ``python -I -m course_teacher.grade --key`` in an
empty temporary folder (``-I``: nothing of the student's folder or environment on the import path),
in the bubblewrap sandbox where the platform allows one; where it does not (the grader exits with
NO_SANDBOX), this script, which runs in a container holding this one submission, grades again with
``--no-sandbox`` (the kernel then runs as an unprivileged uid when this runs as root, where the
machine lets that uid run Python: course_teacher/grade/runner.py), and turns the grader's result.json and feedback.md into the
platform's results, written after the grader is done (whatever a notebook wrote there is replaced):

- Gradescope: /autograder/results/results.json (its specification: a test per exercise with
  score, max_score and output; the feedback, Markdown, as the submission's output);
- Classroom 50: ./result.json in the student's checkout (classroom50/result/v1), with the graded
  commit's date as ``datetime`` and the time of grading as ``graded_at``, and the feedback as
  ./release-body.md.

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
NO_SANDBOX = 3  # the grader's exit code when it cannot make its sandbox here (course_teacher/grade/grader.py)
MISSING = {"en": "No notebook to grade: upload {expected} (the lesson's notebook, {lang}), as JupyterLab saved it.",
           "zh": "没有可评分的笔记本：请提交 {expected}（这一课的{lang}笔记本），即 JupyterLab 保存的原文件。"}
LANGUAGE_NAMES = {"en": {"en": "English", "zh": "Chinese"}, "zh": {"en": "英文", "zh": "中文"}}


def _expected():
    """The lesson's notebook's file name in the autograder's language (01_注意力基础.ipynb in Chinese)."""
    return SETTINGS["notebook"]


def install(venv):
    """The course's interpreter in `venv`, installed there from this autograder's files when it is
    not yet, every package hash-checked: torch's CPU build from settings' torch_index (alone: pip
    would ask that index for every package otherwise), the grader's packages from the package
    index, then the course's two wheels."""
    python = venv / "bin" / "python"
    marker = venv / f".installed-{SETTINGS['course']}"
    if marker.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "--require-hashes", "--no-deps", "--index-url", SETTINGS["torch_index"],
                    "-r", str(HERE / "torch.txt")], check=True)
    subprocess.run([*pip, "--require-hashes", "--no-deps", "-r", str(HERE / "requirements.txt")], check=True)
    subprocess.run([*pip, "--no-deps", "--no-index", *(str(HERE / "wheels" / w) for w in SETTINGS["wheels"])],
                   check=True)
    subprocess.run([str(python), "-m", "pip", "check", "--disable-pip-version-check"], check=True)
    marker.touch()
    return python


def grade(python, notebook, student):
    """The grader's (result, feedback) for `notebook`, or (None, why) when there is none to grade."""
    if notebook is None or not notebook.is_file() or notebook.is_symlink():
        return None, "missing"
    if notebook.stat().st_size > MAX_BYTES:
        return None, "missing"
    if os.geteuid() == 0:  # Gradescope: the kernel drops root (course_teacher/grade/runner.py) and cannot read it
        os.chmod(HERE / "key", 0o700)
    with tempfile.TemporaryDirectory(prefix="course-autograder-") as work:
        work = Path(work)
        folder = work / "submissions"
        folder.mkdir()
        shutil.copyfile(notebook, folder / _expected())  # by the lesson's name, whatever it was uploaded as
        command = [str(python), "-I", "-m", "course_teacher.grade", str(folder), "--out", str(work / "grades"),
                   "--lesson", SETTINGS["lesson"], "--key", str(HERE / "key"), "--student", student, "--jobs", "1",
                   "--submission-timeout", str(SETTINGS["timeout_s"])]
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=SETTINGS["timeout_s"] + 120,
                              check=False)
        print(done.stdout, done.stderr, sep="\n")  # the platform keeps this for the teacher only
        if done.returncode == NO_SANDBOX:  # a platform's container, which cannot make bwrap's namespaces:
            # it holds this one submission and nothing of anyone else's, so the grader runs without its
            # sandbox here, said so, and as an unprivileged uid where it runs as root
            done = subprocess.run(command + ["--no-sandbox"], cwd=work, capture_output=True, text=True,
                                  timeout=SETTINGS["timeout_s"] + 120, check=False)
            print(done.stdout, done.stderr, sep="\n")
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


def _gradescope_student(root, notebook):
    """Who handed the submission in, as Gradescope's submission_metadata.json names them (the
    group's names joined), else the uploaded notebook's file name."""
    try:
        metadata = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        names = [str(user.get("name") or user.get("email") or "").strip() for user in metadata.get("users") or []]
        names = [name for name in names if name]
    except (OSError, ValueError, AttributeError):
        names = []
    return ", ".join(names) if names else (notebook.stem if notebook is not None else "student")


def gradescope(root, python):
    """Grade /autograder/submission's notebook: the one named as the lesson's, else the only one."""
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in notebooks if p.name == _expected()]
    notebook = named[0] if named else notebooks[0] if len(notebooks) == 1 else None
    result, feedback = grade(python, notebook, _gradescope_student(root, notebook))
    if result is None:
        result, feedback = _missing_result()
    results = {
        "score": result["score"],
        "output": feedback,
        "output_format": "md",
        "test_output_format": "md",
        "tests": [{"name": t["test-name"], "score": t["score"], "max_score": t["max-score"],
                   "output": t.get("message", ""), "output_format": "md", "visibility": "visible"}
                  for t in result["tests"]],
    }
    (root / "results").mkdir(parents=True, exist_ok=True)
    written = root / "results" / "results.json.partial"
    written.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(written, root / "results" / "results.json")  # whatever a notebook put there, replaced whole
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
    for name, text in (("result.json", json.dumps(result, indent=2, ensure_ascii=False)), ("release-body.md", feedback)):
        (checkout / name).unlink(missing_ok=True)  # a file the student committed there (or a link) is replaced
        (checkout / name).write_text(text, encoding="utf-8")
    return result


def main(argv=None):
    """`autograder.py` as the platform runs it; `--install VENV` makes the course's environment
    (Gradescope's setup.sh)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--install" in argv:  # Gradescope's setup.sh: the course's environment, once, when the image is built
        install(Path(argv[argv.index("--install") + 1]))
        return 0
    if SETTINGS["platform"] == "gradescope":
        root = Path(os.environ.get("GRADESCOPE_ROOT", GRADESCOPE))
        gradescope(root, install(root / "venv"))
    else:
        classroom50(Path.cwd(), install(HERE / ".venv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
