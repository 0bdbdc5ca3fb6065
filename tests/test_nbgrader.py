"""nbgrader on the course's notebooks: generate_assignment, autograde and export, unchanged.

A course folder in a temporary directory (its own nbgrader_config.py, exchange, Jupyter and
IPython folders: nothing of the user's configuration leaks in) gets lesson 00 in each language as
an assignment. Its source notebook is the solution render (build.py's docstring says why), trimmed
to the setup cell and the exercise and check cells, so the test stays fast. Submissions: nbgrader's
release as handed out (stubs), the release with every exercise solved, and the course's own student
render with one exercise solved, one wrong (and its check cell edited to `pass`: nbgrader puts the
locked cell back), one left as the stub and one solved. The scores per check cell (grade_id) are
read from the gradebook, and the totals from `nbgrader export`'s CSV. And an answer cell that rebinds
`check` to a no-op scores nothing it did not earn: each locked check cell imports `check` itself.
"""

import csv
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import torch

from course_teacher import build
from course_utils.exercises import grading

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

LESSON = "00"
POINTS = build.CHECK_POINTS
LIMIT_S = 300  # a guard against a hung command, not a timing: the test takes ~40 s alone
#: A check cell's first line: the check it calls is imported inside the locked cell, so that no
#: answer cell can hand it another `check`.
CHECK_IMPORT = "from course_utils import check\n"


def _trimmed(notebook):
    """The setup cell and the cells nbgrader knows (exercises and their checks), in order."""
    keep = [c for c in notebook.cells if "nbgrader" in c.metadata or "setup(lang=" in c.source]
    notebook.cells = keep
    return notebook


def _renders(lang):
    path = build.lessons(LESSON)[LESSON]
    source = jupytext.read(path)
    return build.notebook_name(path, lang), _trimmed(build.render(source, lang, True)), _trimmed(build.render(source, lang, False))


def _exercise_cells(notebook):
    """{exercise id: cell} of a rendered (or released) notebook, found by nbgrader's grade_id."""
    return {
        c.metadata["nbgrader"]["grade_id"].removesuffix("-code"): c
        for c in notebook.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def _solved(cell):
    """A learner's right answer: the solution render's code, without the markers."""
    return "\n".join(line for line in cell.source.splitlines() if line.strip() not in (build.BEGIN, build.END))


def _nbgrader(course, env, *args):
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course, env=env, capture_output=True, text=True, timeout=LIMIT_S, check=False,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def course(tmp_path):
    """(course folder, environment for nbgrader): a fresh course, config and Jupyter folders in tmp."""
    root = tmp_path / "course"
    root.mkdir()
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'attention'\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        f"c.Exchange.root = {str(tmp_path / 'exchange')!r}\n"
        "c.Execute.timeout = 120\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER", "IPYTHON"))}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        (tmp_path / name.lower()).mkdir()
        env[name] = str(tmp_path / name.lower())
    env.update(build.EXECUTION_ENV, JUPYTER_PLATFORM_DIRS="1")
    # nbgrader runs `alembic` (installed beside it) by name for its gradebook
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return root, env


def test_generate_autograde_and_export_score_each_check(course):
    root, env = course
    renders = {lang: _renders(lang) for lang in build.LANGUAGES}
    names = {lang: renders[lang][0] for lang in build.LANGUAGES}  # each language's file name (01_注意力基础.ipynb)
    assignments = {lang: f"l{LESSON}-{lang}" for lang in build.LANGUAGES}  # one per language
    for lang, assignment in assignments.items():
        (root / "source" / assignment).mkdir(parents=True)
        nbformat.write(renders[lang][1], root / "source" / assignment / names[lang])
    _nbgrader(root, env, "generate_assignment", f"l{LESSON}-*")

    expected = {}  # (student, assignment) -> {grade_id: score}
    for lang, assignment in assignments.items():
        _, solution, student = renders[lang]
        release = nbformat.read(root / "release" / assignment / names[lang], as_version=4)
        released, solved = _exercise_cells(release), _exercise_cells(solution)
        exercises = sorted(released)
        assert exercises == sorted(_exercise_cells(student)) and len(exercises) == 4
        for exercise, cell in released.items():  # nbgrader replaced just the solution: signature and docstring stay
            assert cell.source.startswith(solved[exercise].source.split("\n", 1)[0]), cell.source
            assert build.BEGIN not in cell.source and "raise NotImplementedError()" in cell.source
            secret = [line.strip() for line in build.solution_lines(solved[exercise]) if len(line.strip()) > 8]
            assert not any(line in cell.source for line in secret), cell.source

        # the course's own student render: right, wrong (its check cell edited away), stub, right
        right, wrong, stub, last = exercises  # sorted: merge_heads, padding_mask, scores_einsum, split_heads
        submissions = {"course": nbformat.from_dict(student)}
        own = _exercise_cells(submissions["course"])
        own[right].source, own[last].source = _solved(solved[right]), _solved(solved[last])
        own[wrong].source = own[wrong].source.replace('raise NotImplementedError("exercise', "return None  # (")
        for cell in submissions["course"].cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == wrong:
                cell.source = "pass"
        expected[("course", assignment)] = {right: POINTS, wrong: 0, stub: 0, last: POINTS}
        if lang == "en":  # nbgrader's release as handed out, and solved (one language: each run costs a kernel)
            submissions["stub"], submissions["solved"] = release, nbformat.from_dict(release)
            for exercise, cell in _exercise_cells(submissions["solved"]).items():
                cell.source = _solved(solved[exercise])
            expected[("stub", assignment)] = dict.fromkeys(exercises, 0)
            expected[("solved", assignment)] = dict.fromkeys(exercises, POINTS)
        for student_id, notebook in submissions.items():
            folder = root / "submitted" / student_id / assignment
            folder.mkdir(parents=True)
            nbformat.write(notebook, folder / names[lang])
    _nbgrader(root, env, "autograde", f"l{LESSON}-*")

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "attention") as gradebook:
        for (student_id, assignment), want in expected.items():
            lang = next(lang for lang, name in assignments.items() if name == assignment)
            notebook = gradebook.find_submission_notebook(names[lang].removesuffix(".ipynb"), assignment, student_id)
            found = {grade.name: grade.score for grade in notebook.grades if grade.cell.max_score > 0}
            assert found == want, (student_id, assignment, found)
            assert {grade.max_score for grade in notebook.grades} == {POINTS}

    # a failed check raises its verdict; a passed one prints it, with nothing on stderr
    for lang, assignment in assignments.items():
        graded = nbformat.read(root / "autograded" / "course" / assignment / names[lang], as_version=4)
        by_id = {c.metadata["nbgrader"]["grade_id"]: c for c in graded.cells if "nbgrader" in c.metadata}
        assert by_id[wrong].source.startswith(CHECK_IMPORT), "nbgrader puts the locked check cell back"
        assert [o.ename for o in by_id[wrong].outputs if o.output_type == "error"] == ["AssertionError"]
        assert [o.name for o in by_id[right].outputs] == ["stdout"]

    _nbgrader(root, env, "export")
    with open(root / "grades.csv", newline="") as file:
        rows = {(row["student_id"], row["assignment"]): float(row["score"]) for row in csv.DictReader(file)}
    students = {student_id for student_id, _ in expected}
    totals = {(s, a): 0.0 for s in students for a in assignments.values()}  # no submission: 0
    assert rows == {**totals, **{key: float(sum(want.values())) for key, want in expected.items()}}


def test_an_answer_cell_that_rebinds_check_scores_zero(course):
    """`check = lambda *a, **k: None` in an answer cell would turn every later check into a no-op, and
    nbgrader gives a test cell that raises nothing its points: each locked check cell imports the real
    check first, so a wrong answer still scores 0 (and a right one its points)."""
    root, env = course
    name, solution, _ = _renders("en")
    assignment = f"l{LESSON}-en"
    (root / "source" / assignment).mkdir(parents=True)
    nbformat.write(solution, root / "source" / assignment / name)
    _nbgrader(root, env, "generate_assignment", assignment)
    release = nbformat.read(root / "release" / assignment / name, as_version=4)
    for cell in release.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            assert cell.source.startswith(CHECK_IMPORT) and "\ncheck(" in cell.source, cell.source

    no_op = "\n\ncheck = lambda *args, **kwargs: None  # every later check() would do nothing\n"
    submission, solved = nbformat.from_dict(release), _exercise_cells(solution)
    right, wrong, *stubs = sorted(_exercise_cells(submission))
    cells = _exercise_cells(submission)
    cells[right].source = _solved(solved[right]) + no_op
    cells[wrong].source = cells[wrong].source.replace("raise NotImplementedError()", "return None") + no_op
    for stub in stubs:
        cells[stub].source += no_op
    folder = root / "submitted" / "rebinder" / assignment
    folder.mkdir(parents=True)
    nbformat.write(submission, folder / name)
    _nbgrader(root, env, "autograde", assignment)

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "attention") as gradebook:
        notebook = gradebook.find_submission_notebook(name.removesuffix(".ipynb"), assignment, "rebinder")
        found = {grade.name: grade.score for grade in notebook.grades if grade.cell.max_score > 0}
    assert found == {right: POINTS, wrong: 0, **dict.fromkeys(stubs, 0)}, found


# ----------------------------------------------------------------------------- check() under nbgrader

def _padding_mask(*, warn=False, right=True):
    """Lesson 00's padding_mask exercise, solved (or wrong), optionally warning as it runs."""
    namespace = {"torch": torch}
    exec(_solved(_exercise_cells(_renders("en")[1])[build.grade_id("00.padding_mask")]), namespace)  # noqa: S102 (the solution render)
    solved = namespace["padding_mask"]

    def padding_mask(lengths, max_len):
        if warn:
            import warnings

            warnings.warn("a warning of the learner's code", UserWarning, stacklevel=1)
        return solved(lengths, max_len) if right else ~solved(lengths, max_len)

    return padding_mask


@pytest.mark.parametrize("where", ["now", "at import"])
def test_under_nbgrader_a_failed_check_raises_its_verdict(monkeypatch, capsys, where):
    if where == "now":
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    else:  # a learner's cell that unsets the variable changes nothing
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
        monkeypatch.setattr(grading, "UNDER_NBGRADER", True)
    with pytest.raises(AssertionError) as raised:
        grading.check("00.padding_mask", _padding_mask(right=False))
    assert str(raised.value) == grading.evaluate("00.padding_mask", _padding_mask(right=False)).message
    stub = _exercise_cells(_renders("en")[2])[build.grade_id("00.padding_mask")].source
    namespace = {"torch": torch}
    exec(stub, namespace)  # noqa: S102 (the student render's stub)
    with pytest.raises(AssertionError):
        grading.check("00.padding_mask", namespace["padding_mask"])  # not attempted scores 0 too


def test_under_nbgrader_a_passed_check_prints_its_verdict_and_nothing_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    grading.check("00.padding_mask", _padding_mask(warn=True))
    out, err = capsys.readouterr()
    assert err == "" and "a warning of the learner's code" in out
    assert grading.evaluate("00.padding_mask", _padding_mask()).message in out


def test_outside_nbgrader_check_prints_and_never_raises(monkeypatch, capsys):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(grading, "UNDER_NBGRADER", False)
    grading.check("00.padding_mask", _padding_mask(right=False, warn=True))
    out, err = capsys.readouterr()
    verdict = grading.evaluate("00.padding_mask", _padding_mask(right=False)).message
    # the verdict, then (a failure) the line that says how to ask for the exercise's hints
    assert out.strip() == verdict + "\n" + grading.message("check.hint_offer", exercise="00.padding_mask")
    assert "a warning of the learner's code" in err  # as today: the learner's warnings go where they go
