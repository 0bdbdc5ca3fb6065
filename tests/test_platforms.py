"""The autograders for Gradescope and Classroom 50 (course_teacher/platforms), tested as their
platforms run them (platform_runs.py: built, unpacked where the platform unpacks them, set up and
run in a container that does not hold this repository, without network while grading):

- every solution gets full marks, its stub 0, also under a student's file name, in both languages;
- what a notebook writes where the results go is replaced, and the answer key is out of its reach;
- results.json and result.json as the platforms' contracts have them (Gradescope's specification,
  docs/specs.md of gradescope/autograder_samples; Classroom 50's classroom50/result/v1);
- nothing of the teacher's in them: the Python they hold is the student package and the grader,
  byte for byte (test_student_side.py proves none of it passes an exercise), and data.

`make test` grades a sample (lesson 00 in English on Gradescope, lesson 01 in Chinese on Classroom
50); `make test-platforms` grades every lesson's solution and stub in both languages on both."""

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch
from platform_runs import Classroom50, Gradescope, available, checkout
from submissions import ROOT, render, solved

from course_teacher import build, platforms
from course_teacher.grade import key as answer_key
from course_utils.exercises import public

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

SEED = 4321
STEMS = platforms.lessons()
SAMPLE = {"gradescope": ("00", "en"), "classroom50": ("01", "zh")}


def _name(lesson, lang):
    """The lesson's notebook's file name in `lang` (course_utils.file_names)."""
    return build.notebook_name(build.lessons()[lesson], lang)


def _points(lesson):
    return sum(public.load(e).points for e in public.EXERCISES if e.startswith(lesson + "."))


def _notebook(lesson, lang, kind):
    """The bytes of a lesson's notebook: the committed solution render ("solution"), the student
    render ("stub"), or the student render with the solutions' exercise cells ("solved")."""
    name = f"{STEMS[lesson]}.ipynb"
    notebook = {"solution": lambda: render(name, lang, solutions=True), "stub": lambda: render(name, lang),
                "solved": lambda: solved(name, lang)}[kind]()
    return nbformat.writes(notebook).encode()


def _forged(lesson, lang):
    """The stub, with a first cell that tries to write full marks where the results go, and to read
    the answer key (the scan holds it for review: no kernel runs it)."""
    notebook = render(f"{STEMS[lesson]}.ipynb", lang)
    notebook.cells.insert(1, nbformat.v4.new_code_cell(
        "import json\n"
        "for path in ('/autograder/results/results.json', '/runner/work/result.json'):\n"
        "    try:\n"
        "        open(path, 'w').write(json.dumps({'score': 99, 'tests': []}))\n"
        "    except OSError:\n"
        "        pass\n"
        "print(open('/autograder/source/key/key.json').read(8))"))
    return nbformat.writes(notebook).encode()


@pytest.fixture(scope="module")
def machine():
    ok, why = available()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"the platforms' containers cannot be made under CI: {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sample's artifacts: {platform: path}."""
    out = tmp_path_factory.mktemp("platforms")
    return {platform: platforms.write(platform, out, seed=SEED, only_lessons=[lesson], langs=(lang,))[0]
            for platform, (lesson, lang) in SAMPLE.items()}


# ----------------------------------------------------------------------------- what they hold

def _files(artifact):
    """{name: bytes} of an autograder (a zip, or a folder)."""
    if artifact.suffix == ".zip":
        with zipfile.ZipFile(artifact) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    return {p.relative_to(artifact).as_posix(): p.read_bytes() for p in sorted(artifact.rglob("*")) if p.is_file()}


#: What an autograder's wheels may hold, as paths of this repository: the student package and the
#: grader, no other part of course_teacher (references, lesson sources' tools, publishing).
SHIPPED = ("course_utils/", "course_teacher/__init__.py", "course_teacher/grade/")


def test_an_autograder_holds_the_student_package_the_grader_and_data_nothing_else(built):
    for platform, artifact in built.items():
        files = _files(artifact)
        lesson, lang = SAMPLE[platform]
        top = {name.split("/")[0] for name in files}
        expected = {"autograder.py", "settings.json", "requirements.txt", "torch.txt", "wheels", "key"}
        assert top == expected | ({"setup.sh", "run_autograder"} if platform == "gradescope" else set()), platform
        assert files["autograder.py"] == (ROOT / "course_teacher/platforms/autograder.py").read_bytes()
        settings = json.loads(files["settings.json"])
        assert "seed" not in json.dumps(settings) and str(SEED) not in files["settings.json"].decode()
        assert (settings["lesson"], settings["lang"], settings["stem"]) == (lesson, lang, STEMS[lesson])
        assert settings["notebook"] == _name(lesson, lang)  # what the student hands in: 01_注意力基础.ipynb in zh
        assert sum(e["points"] for e in settings["exercises"]) == _points(lesson)
        shipped = []
        for name, data in files.items():
            if name.startswith("wheels/"):
                with zipfile.ZipFile(io.BytesIO(data)) as wheel:
                    for inner in wheel.namelist():
                        if inner.endswith(".py"):
                            assert inner.startswith(SHIPPED), f"{platform}: {name} holds {inner}"
                            assert wheel.read(inner) == (ROOT / inner).read_bytes(), f"{inner} is not the course's"
                            shipped.append(inner)
                        else:
                            # data only: the public cases, the benchmarks' committed figures the lessons show and
                            # lesson 10's corpora (text, checked by their sha256 when loaded) and trained models
                            # (tensors, read with weights_only)
                            assert ".dist-info/" in inner or inner.startswith(("course_utils/exercises/public/",
                                                                               "course_utils/results/",
                                                                               "course_utils/corpora/",
                                                                               "course_utils/checkpoints/")), inner
            elif name.startswith("key/") and name.endswith(".pt"):
                assert isinstance(torch.load(io.BytesIO(data), weights_only=True), dict)  # data: no code loads
        assert "course_teacher/grade/key.py" in shipped and "course_utils/exercises/grading.py" in shipped
        assert not any(s.startswith("course_teacher/exercises") for s in shipped)


def test_the_requirements_are_the_grade_lock_torch_apart(built):
    files = _files(built["gradescope"])
    lock = (ROOT / "requirements/grade.lock").read_text()
    pins = lambda text: sorted(line.split(" ")[0] for line in text.splitlines() if "==" in line[:60] and line[0] != "#")  # noqa: E731
    assert sorted(pins(files["requirements.txt"].decode()) + pins(files["torch.txt"].decode())) == \
        sorted(pins(lock))
    assert pins(files["torch.txt"].decode()) == ["torch==2.13.0+cpu"]
    assert "\njupyterlab==" not in lock and "\njupyter-server==" not in lock  # the grader needs no JupyterLab
    assert "--hash=sha256:" in files["torch.txt"].decode()


def _key(artifact, folder):
    folder.mkdir()
    for name, data in _files(artifact).items():
        if name.startswith("key/"):
            (folder / name[len("key/"):]).write_bytes(data)
    return answer_key.read(folder)


def test_classroom50s_public_key_draws_its_hidden_cases_from_a_seed_of_its_own(built, tmp_path):
    """Classroom 50's bundle is public: its hidden cases are not the ones a teacher's seed draws
    for Gradescope and `make grade` (lesson 01: every hidden case is random)."""
    lesson, lang = SAMPLE["classroom50"]
    public_key = _key(built["classroom50"], tmp_path / "public")
    private = platforms.write("gradescope", tmp_path, seed=SEED, only_lessons=[lesson], langs=(lang,))[0]
    private_key = _key(private, tmp_path / "private")
    for exercise in public_key.exercises(lesson):
        published = len(public.load(exercise).cases)
        ours, theirs = private_key.reference(exercise).cases, public_key.reference(exercise).cases
        hidden = [(a, b) for x, y in zip(ours[published:], theirs[published:]) for a, b in zip(x.args, y.args)
                  if isinstance(a, torch.Tensor) and a.is_floating_point()]
        assert hidden and not any(a.shape == b.shape and torch.equal(a, b) for a, b in hidden), exercise
    assert platforms.platform_seed("classroom50", SEED) not in (SEED, answer_key.DEFAULT_SEED)


# ----------------------------------------------------------------------------- Gradescope

@pytest.fixture(scope="module")
def gradescope(machine, built, tmp_path_factory):
    platform = Gradescope(tmp_path_factory.mktemp("gradescope"))
    _, apt = platform.setup(built["gradescope"])
    assert "python3.11 python3.11-venv bubblewrap" in apt
    return platform


def _valid_gradescope(results, lesson):
    """results.json as Gradescope's specification has it."""
    assert isinstance(results["score"], (int, float)) and isinstance(results["output"], str)
    assert results["output_format"] == "md"
    for test in results["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert test["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert sum(t["max_score"] for t in results["tests"]) == _points(lesson)


def test_gradescope_gives_a_solution_uploaded_under_a_students_name_full_marks(gradescope, built):
    lesson, lang = SAMPLE["gradescope"]
    metadata = {"users": [{"name": "Alice Chen", "email": "alice@example.edu", "id": 7}]}
    results, _ = gradescope.grade(built["gradescope"], {"Alice_Chen.ipynb": _notebook(lesson, lang, "solution")},
                                  metadata)
    _valid_gradescope(results, lesson)
    assert results["score"] == _points(lesson), results["output"]
    assert "Alice Chen" in results["output"] and "Student: student" not in results["output"]


def test_gradescope_gives_a_stub_0_and_a_missing_notebook_0_with_a_message(gradescope, built):
    lesson, lang = SAMPLE["gradescope"]
    stub, _ = gradescope.grade(built["gradescope"], {"stub.ipynb": _notebook(lesson, lang, "stub")})
    _valid_gradescope(stub, lesson)
    assert stub["score"] == 0 and "NotImplementedError" in stub["output"]
    missing, _ = gradescope.grade(built["gradescope"], {"notes.txt": b"my answers"})
    _valid_gradescope(missing, lesson)
    assert missing["score"] == 0 and f"upload {STEMS[lesson]}.ipynb" in missing["output"]


def test_gradescope_replaces_a_forged_result_and_keeps_the_key_from_the_notebook(gradescope, built):
    lesson, lang = SAMPLE["gradescope"]
    results, _ = gradescope.grade(built["gradescope"], {f"{STEMS[lesson]}.ipynb": _forged(lesson, lang)})
    _valid_gradescope(results, lesson)
    assert results["score"] == 0
    # The grader's scan holds the cell for review before any kernel starts (test_grade_sandbox proves the
    # sandbox behind it with the scan switched off); the results are the grader's own.
    assert "open(path, 'w')" in results["output"] and "Ask your teacher to look at it" in results["output"]


# ----------------------------------------------------------------------------- Classroom 50

@pytest.fixture(scope="module")
def classroom50(machine, built, tmp_path_factory):
    """Classroom 50's runner, after a first run (on a checkout without the notebook) that installed
    the course: the network is there then; every test grades without it."""
    platform = Classroom50(tmp_path_factory.mktemp("classroom50"))
    platform.grade(built["classroom50"], checkout(tmp_path_factory.mktemp("first") / "w", {}), network=True)
    return platform


def _valid_classroom50(result, lesson):
    """result.json as Classroom 50's contract has it (the runner stamps assignment_type)."""
    assert result["schema"] == "classroom50/result/v1"
    assert (result["classroom"], result["assignment"], result["owner"]) == ("attn-2026", "lesson", "ada")
    assert result["submission"] == "submit/x-1" and result["review"] == result["commit"]
    assert result["datetime"] == "2026-11-20T08:30:00Z"  # the graded commit's date, not the grading's
    assert result["graded_at"].endswith("Z")
    assert type(result["score"]) is int and type(result["max-score"]) is int
    for test in result["tests"]:
        assert isinstance(test["test-name"], str) and type(test["passed"]) is bool
        assert type(test["score"]) is int and type(test["max-score"]) is int
    assert result["score"] == sum(t["score"] for t in result["tests"])
    assert result["max-score"] == sum(t["max-score"] for t in result["tests"]) == _points(lesson)


def test_classroom50_grades_the_lessons_notebook_of_the_checkout(classroom50, built, tmp_path):
    lesson, lang = SAMPLE["classroom50"]
    work = checkout(tmp_path / "solved", {f"notebooks/{lang}/{_name(lesson, lang)}": _notebook(lesson, lang, "solution")})
    result, feedback, _ = classroom50.grade(built["classroom50"], work)
    _valid_classroom50(result, lesson)
    assert result["score"] == _points(lesson), feedback
    assert f"{lesson}." in feedback and "ada" in feedback


def test_classroom50_replaces_a_committed_result_and_scores_a_stub_0(classroom50, built, tmp_path):
    lesson, lang = SAMPLE["classroom50"]
    forged = json.dumps({"schema": "classroom50/result/v1", "score": 99, "max-score": 99, "tests": []}).encode()
    work = checkout(tmp_path / "stub", {f"notebooks/{lang}/{_name(lesson, lang)}": _forged(lesson, lang),
                                        "result.json": forged})
    result, _, _ = classroom50.grade(built["classroom50"], work)
    _valid_classroom50(result, lesson)
    assert result["score"] == 0


def test_classroom50_scores_a_missing_notebook_0_saying_what_it_expected(classroom50, built, tmp_path):
    lesson, lang = SAMPLE["classroom50"]
    result, _, _ = classroom50.grade(built["classroom50"], checkout(tmp_path / "empty", {"README.md": b"hi"}))
    _valid_classroom50(result, lesson)
    assert result["score"] == 0 and all(t["mistake"] == "MISSING" for t in result["tests"])
    assert _name(lesson, lang) in result["tests"][0]["message"] and "中文" in result["tests"][0]["message"]


# ----------------------------------------------------------------------------- every lesson (make test-platforms)

@pytest.fixture(scope="module")
def everything(machine, tmp_path_factory):
    """Every lesson's autograders, in both languages, for both platforms: {(platform, lesson, lang): path}."""
    out = tmp_path_factory.mktemp("every-platform")
    found = {}
    for platform in platforms.PLATFORMS:
        for path in platforms.write(platform, out, seed=SEED):
            lesson, lang = path.name.removesuffix(".zip").split("-")
            found[platform, lesson, lang] = path
    return found


@pytest.fixture(scope="module")
def installed(everything, tmp_path_factory):
    gradescope = Gradescope(tmp_path_factory.mktemp("gradescope-all"))
    gradescope.setup(everything["gradescope", "00", "en"])
    classroom50 = Classroom50(tmp_path_factory.mktemp("classroom50-all"))
    classroom50.grade(everything["classroom50", "00", "en"], checkout(tmp_path_factory.mktemp("c") / "w", {}),
                      network=True)
    return {"gradescope": gradescope, "classroom50": classroom50}


@pytest.mark.platforms
@pytest.mark.parametrize("lang", build.LANGUAGES)
@pytest.mark.parametrize("lesson", sorted(STEMS))
@pytest.mark.parametrize("platform", platforms.PLATFORMS)
def test_every_solution_gets_full_marks_and_every_stub_0(everything, installed, platform, lesson, lang, tmp_path):
    artifact = everything[platform, lesson, lang]
    for kind, expected in (("solution", _points(lesson)), ("stub", 0)):
        notebook = _notebook(lesson, lang, kind)
        if platform == "gradescope":
            results, _ = installed[platform].grade(artifact, {f"{kind}.ipynb": notebook})
            _valid_gradescope(results, lesson)
            score, feedback = results["score"], results["output"]
        else:
            work = checkout(tmp_path / kind, {f"notebooks/{lang}/{_name(lesson, lang)}": notebook})
            result, feedback, _ = installed[platform].grade(artifact, work)
            _valid_classroom50(result, lesson)
            score = result["score"]
        assert score == expected, f"{platform} {lesson} {lang} {kind}: {score}\n{feedback}"


def test_the_autograders_scripts_are_executable(built):
    with zipfile.ZipFile(built["gradescope"]) as archive:
        for name in ("setup.sh", "run_autograder"):
            assert (archive.getinfo(name).external_attr >> 16) & stat.S_IXUSR, name
    assert Path(built["classroom50"], "autograder.py").is_file()
