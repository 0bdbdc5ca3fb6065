"""`make release`: the student zip has what a learner needs to run every lesson and no solution, the
solutions zip has every solution notebook, and two builds give the same bytes."""

import functools
import json
import os
import re
import subprocess
import sys
import time
import zipfile

import nbformat
import pytest

from course_teacher import build, release

LANGUAGES = build.LANGUAGES
# A solution shorter than this (after comments and indentation go) could be ordinary code anywhere.
MIN_SOLUTION_CHARS = 12


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    student, solutions = release.release(out=tmp_path_factory.mktemp("dist"))
    return student, solutions


def _top():
    return f"{release.NAME}-{release.version()}/"


def _contents(path):
    """{repository-relative path: bytes} of a release zip; every entry sits under the one top folder."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert all(name.startswith(_top()) for name in names), f"{path.name}: entries outside {_top()}"
        return {name.removeprefix(_top()): archive.read(name) for name in names}


def test_the_zips_carry_the_chinese_names_as_utf8_and_read_back_the_same(zips):
    """The Chinese notebooks' names (01_注意力基础.ipynb): each entry whose name is not ASCII says it is
    UTF-8 (the zip's flag 0x800, which Python's zipfile sets), so every unzip reads the same name back."""
    for path in zips:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
        chinese = [info for info in infos if not info.filename.isascii()]
        assert chinese and all(info.flag_bits & 0x800 for info in chinese), path.name
    names = set(_contents(zips[0]))
    for lang, notebook in build.homes():
        assert notebook.relative_to(build.ROOT).as_posix() in names
    assert {f"notebooks/zh/{build.notebook_name(source, 'zh')}" for source in build.lessons().values()} <= names


def test_the_zips_are_named_after_the_version(zips):
    student, solutions = zips
    assert student.name == f"attention-course-student-{release.version()}.zip"
    assert solutions.name == f"attention-course-solutions-{release.version()}.zip"


def test_the_student_zip_has_every_lesson_in_both_languages_and_what_make_lab_needs(zips):
    files = _contents(zips[0])
    for lesson, source in build.lessons().items():
        for lang in LANGUAGES:
            assert f"notebooks/{lang}/{build.notebook_name(source, lang)}" in files, f"student zip lacks lesson {lesson} ({lang})"
    for name in ("README.md", "GLOSSARY.md", "LICENSE", "Makefile", "pyproject.toml", "environment.yml", "course_utils/__init__.py",
                 "notebooks/en/glossary.md", "notebooks/zh/术语表.md", "notebooks/zh/首页.ipynb", "requirements/lab.lock",
                 "requirements/torch.lock", "requirements/triton.lock", "postBuild"):
        assert name in files, f"student zip lacks {name}"
    assert b"\nlab:" in files["Makefile"]
    # every diagram a notebook shows comes along
    shown = {m for name, data in files.items() if name.endswith(".ipynb") for m in re.findall(rb"\.\./\.\./(images/[\w.\-]+)", data)}
    assert shown, "the parser found no diagram link in the student notebooks"
    assert {m.decode() for m in shown} <= set(files), "student zip lacks a diagram its notebooks show"


def test_the_solutions_zip_has_every_solution_notebook_and_only_those(zips):
    files = _contents(zips[1])
    expected = {
        f"notebooks/solutions/{lang}/{build.notebook_name(source, lang)}" for source in build.lessons().values()
        for lang in LANGUAGES
    }
    assert set(files) == expected


def test_course_utils_imports_from_an_extracted_student_zip(zips, tmp_path):
    with zipfile.ZipFile(zips[0]) as archive:
        archive.extractall(tmp_path)
    course = tmp_path / _top()
    env = {**os.environ, "PYTHONPATH": str(course)}
    result = subprocess.run(
        [sys.executable, "-c", "import course_utils; print(course_utils.__file__)"],
        cwd=course, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # the copy in the zip was imported, not the repository's (installed in the venv in editable mode)
    assert result.stdout.strip().startswith(str(course)), result.stdout


@pytest.mark.slow  # (a wheel built and two fresh processes: 20 s under a load of 10 on 2 cores)
def test_the_committed_gpu_figures_travel_with_course_utils(zips, tmp_path):
    """The lessons show the benchmarks' committed GPU figures (course_utils.measured reads
    course_utils/results/*.json): a learner gets them from the student zip as unzipped, and from the
    wheel pip builds of it, which is what a Colab lesson's first cell installs (package data of
    course_utils). Each is read back in a fresh process from the artifact, never the repository."""
    from course_utils import measured

    committed = sorted(path.name for path in measured.RESULTS.glob("*.json"))
    assert committed, "no committed results to look for"
    with zipfile.ZipFile(zips[0]) as archive:
        archive.extractall(tmp_path / "unzipped")
    course = tmp_path / "unzipped" / _top()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(tmp_path / "wheel"), str(course)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheel").glob("course_utils-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "installed")
    script = ("import sys\nfrom course_utils import measured\nprint(measured.RESULTS)\n"
              "for name in sys.argv[1:]:\n    print(measured.load(*name.removesuffix('.json').rsplit('-', 1)).provenance())\n")
    for where in (course, tmp_path / "installed"):
        env = {**os.environ, "PYTHONPATH": str(where)}
        result = subprocess.run([sys.executable, "-c", script, *committed], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        folder, *provenances = result.stdout.splitlines()
        assert folder == str(where / "course_utils" / "results"), folder  # the artifact's copy, not the repository's
        assert [line.split("(course_utils/results/")[1][:-2] for line in provenances] == committed, provenances


def test_the_student_zip_holds_the_exercises_public_data_and_no_teachers_side(zips):
    """The checks need each exercise's public cases (data); the references, the mistakes as functions,
    the hidden cases and the grader are the teacher's (course_teacher) and stay out. tests/test_student_side.py
    proves that no function of course_utils, the package this zip ships, passes an exercise."""
    from course_utils.exercises import public

    names = _contents(zips[0])
    assert {f"course_utils/exercises/public/{e}.pt" for e in public.EXERCISES} <= set(names)
    assert not [n for n in names if n.startswith("course_teacher/") or "/grade/" in n]


def test_no_solution_path_and_no_clutter_in_the_student_zip(zips):
    for name in _contents(zips[0]):
        parts = name.split("/")
        assert "solutions" not in parts and not name.startswith("notebooks/source/"), name
        assert parts[0] not in {"tests", "test-artifacts", ".venv", "dist", "benchmarks", ".git", "course_teacher"}, name
        assert "__pycache__" not in parts and not name.endswith(".pyc"), name


# ----------------------------------------------------------------------------- solution text

def _code(text):
    """Code lines without comments or indentation, blank lines dropped: what a leak would share."""
    lines = (re.sub(r"(^|\s)#.*$", "", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


@functools.cache  # (two tests read them: 44 notebooks read and validated each time)
def _solutions():
    """((lesson, exercise id, solution code), ...): each exercise cell's lines that the solution render
    has and the student render has not, comments and markers dropped."""
    found = []
    for lesson, source in build.lessons().items():
        for lang in LANGUAGES:
            student = nbformat.read(build.NOTEBOOKS / lang / build.notebook_name(source, lang), as_version=4)
            solution = nbformat.read(build.NOTEBOOKS / "solutions" / lang / build.notebook_name(source, lang), as_version=4)
            stubs = {cell.id: cell for cell in student.cells}
            for cell in solution.cells:
                if "exercise" not in cell.metadata.get("tags", []):
                    continue
                stub_lines = set(stubs[cell.id].source.splitlines())
                blocks, block = [], []  # a cell may hold several solution blocks, each searched alone
                for line in cell.source.splitlines():
                    if line not in stub_lines and line.strip() not in (build.BEGIN, build.END):
                        block.append(line)
                    elif block:
                        blocks, block = blocks + [block], []
                blocks += [block] if block else []
                code = GAP.join(filter(None, (_code("\n".join(lines)) for lines in blocks)))
                found.append((lesson, cell.metadata["exercise"], code))
    return tuple(found)


GAP = "\n\n"  # between a cell's solution blocks (_code drops blank lines, so no block holds one)


def _searched(code):
    """The blocks of a solution's code long enough to be searched for."""
    return [block for block in code.split(GAP) if len(block) >= MIN_SOLUTION_CHARS]


def _readable_text(name, data):
    """What a reader of the file sees, as code lines: a notebook's cell sources and outputs, or the file."""
    if not name.endswith(".ipynb"):
        return _code(data.decode("utf-8", errors="replace"))
    notebook = json.loads(data)
    pieces = []
    for cell in notebook["cells"]:
        pieces.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            pieces.append("".join(output.get("text", "")))
            pieces += ["".join(v) if isinstance(v, list) else str(v) for v in output.get("data", {}).values()]
    return _code("\n".join(pieces))


def _leaks(files, solutions):
    """[(file, exercise id)] where a solution's code appears in a file, line for line."""
    texts = {name: "\n" + _readable_text(name, data) + "\n" for name, data in files.items()}
    leaks = []
    for lesson, exercise, code in solutions:
        for name, text in texts.items():
            if any(f"\n{block}\n" in text for block in _searched(code)):
                leaks.append((name, exercise))
    return leaks


def test_no_exercise_solution_appears_in_the_student_zip(zips):
    solutions = _solutions()
    files = _contents(zips[0])
    exercise_cells = sum(
        "exercise" in cell.get("metadata", {}).get("tags", [])
        for name, data in files.items() if name.endswith(".ipynb")
        for cell in json.loads(data)["cells"]
    )
    # one solution per exercise cell of every student notebook, none of them empty
    assert len(solutions) == exercise_cells and all(code for _, _, code in solutions)
    assert not _leaks(files, solutions)


def test_the_leak_detector_finds_the_solutions_where_they_are(zips):
    # guards the test above against a detector that never matches: every solution is in the solutions zip
    solutions = [s for s in _solutions() if _searched(s[2])]
    assert solutions
    files = _contents(zips[1])
    found = {exercise for _, exercise in _leaks(files, solutions)}
    assert found == {exercise for _, exercise, _ in solutions}
    # and every block of each, not only one
    texts = ["\n" + _readable_text(name, data) + "\n" for name, data in files.items()]
    missing = [(exercise, block[:40]) for _, exercise, code in solutions for block in _searched(code)
               if not any(f"\n{block}\n" in text for text in texts)]
    assert not missing


# ----------------------------------------------------------------------------- determinism

def test_two_builds_give_the_same_bytes(zips, tmp_path):
    again = release.release(out=tmp_path)
    for first, second in zip(zips, again):
        assert first.read_bytes() == second.read_bytes(), f"{first.name} differs between two builds"
    with zipfile.ZipFile(again[0]) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        assert {info.date_time for info in archive.infolist()} == {release.timestamp()}


def test_every_file_carries_the_release_commits_date(monkeypatch):
    """Not 1980 (JupyterLab showed "46 years ago"): the commit's time, or SOURCE_DATE_EPOCH's."""
    committed = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=build.ROOT, capture_output=True, text=True)
    if committed.returncode == 0 and committed.stdout.strip().isdigit():
        assert release.timestamp() == time.gmtime(int(committed.stdout) // 2 * 2)[:6]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1795000000")  # 2026-11-18 11:06:40 UTC
    assert release.timestamp() == (2026, 11, 18, 11, 6, 40)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "12")  # before zip's earliest date
    assert release.timestamp() == release.EARLIEST


# ----------------------------------------------------------------------------- a bundle of its own

def test_the_student_readme_is_the_learners_not_the_repositorys(zips):
    """Its own README in both languages: how to start, every lesson (the repository README's course
    map, linking the student notebooks), where help is; nothing of the repository's own work."""
    readme = _contents(zips[0])["README.md"].decode("utf-8")
    assert readme == release.student_readme()
    assert "make lab" in readme and "make lab LANG=zh" in readme and "LICENSE" in readme
    assert "## Start · 开始" in readme and "GLOSSARY.md" in readme
    assert all(f"notebooks/{lang}/{build.GLOSSARIES[lang]}" in readme for lang in LANGUAGES)
    for lesson, source in build.lessons().items():
        for lang in LANGUAGES:
            assert f"(notebooks/{lang}/{build.notebook_name(source, lang)})" in readme, (lesson, lang)
    for repository_only in ("solutions/", "make test", "make grade", "course_teacher", "maintainer", "nbgrader",
                            "<!-- course map -->"):
        assert repository_only not in readme, repository_only


def test_make_lab_installs_only_what_a_learner_needs_and_make_test_says_what_the_bundle_is(zips, tmp_path):
    """In the unzipped bundle, `make lab` installs the course without the test extras, and a target
    of the repository's own work stops with a message instead of installing them (make -n: nothing
    runs but the guard itself)."""
    with zipfile.ZipFile(zips[0]) as archive:
        archive.extractall(tmp_path)
    course = tmp_path / _top()
    plan = subprocess.run(["make", "-n", "lab"], cwd=course, capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert "--require-hashes --no-deps -r requirements/lab.lock" in plan.stdout and "install --quiet --no-deps -e ." in plan.stdout
    # torch's CPU build from its lock first (tests/test_torch_install.py resolves it); Triton on demand only
    assert "--require-hashes --no-deps -r requirements/torch.lock" in plan.stdout
    assert "test.lock" not in plan.stdout and ".[test]" not in plan.stdout and "triton.lock" not in plan.stdout
    on_demand = subprocess.run(["make", "-n", "triton"], cwd=course, capture_output=True, text=True, timeout=60)
    assert on_demand.returncode == 0 and "--require-hashes --no-deps -r requirements/triton.lock" in on_demand.stdout
    venv = course / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    stamp = subprocess.run(["make", "-n", "-p"], cwd=course, capture_output=True, text=True, timeout=60).stdout
    lab_stamp = re.search(r"^LAB_STAMP := (.+)$", stamp, re.M).group(1).replace("$(VENV)", ".venv")
    lab_stamp = lab_stamp.replace("$(TORCH_TAG)", re.search(r"^TORCH_TAG := (.+)$", stamp, re.M).group(1))
    (course / lab_stamp).touch()  # as if `make lab` had run
    done = subprocess.run(["make", "test"], cwd=course, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "student bundle" in done.stdout and "make lab" in done.stdout, done.stdout


# ----------------------------------------------------------------------------- installed from itself

def test_a_hubs_image_is_built_from_the_student_bundle_alone(zips):
    """A school's JupyterHub image is built with repo2docker from the unzipped student bundle (README):
    what repo2docker reads (environment.yml, postBuild) is in it, installs only the lab lock and the
    bundle's own package, and the bundle holds no solution and no teacher's side (the tests above)."""
    files = _contents(zips[0])
    assert files["environment.yml"] == (build.ROOT / "environment.yml").read_bytes()
    assert files["postBuild"] == (build.ROOT / "postBuild").read_bytes()
    assert b"-r requirements/lab.lock" in files["environment.yml"] and "requirements/lab.lock" in files
    assert b"pip install --no-cache-dir --no-deps -e ." in files["postBuild"]
    readme = (build.ROOT / "README.md").read_text(encoding="utf-8")
    hub = readme.split("**JupyterHub.**", 1)[1].split("\n- **", 1)[0]
    assert "student bundle" in hub and "repo2docker" in hub and "repo2docker --no-run --image-name attention-course ." not in hub


@pytest.mark.platforms
def test_the_student_bundle_installs_from_its_zip_alone_and_runs_a_lesson(zips, tmp_path):
    """As a learner gets it: the zip unzipped in a folder of its own, on a machine that does not hold
    this repository (platform_runs' container); `make lab`'s install (the lock, torch, the bundle's
    package), then, offline, the learner's copies and a lesson run in each language: every cell runs
    but the exercises' stubs, whose checks say "not attempted"; no teacher's package is importable."""
    from platform_runs import run

    with zipfile.ZipFile(zips[0]) as archive:
        archive.extractall(tmp_path)
    course, inside = tmp_path / _top(), "/home/learner/course"
    plan = subprocess.run(["make", "-np"], cwd=course, capture_output=True, text=True, timeout=60).stdout
    torch_tag = re.search(r"^TORCH_TAG := (.+)$", plan, re.M).group(1)
    stamp = re.search(r"^LAB_STAMP := (.+)$", plan, re.M).group(1).replace("$(VENV)", ".venv")
    stamp = stamp.replace("$(TORCH_TAG)", torch_tag)
    run({course: inside}, ["make", stamp], network=True, cwd=inside, timeout=1800)
    script = (
        "set -e; .venv/bin/python -m course_utils copy work; "
        "! .venv/bin/python -c 'import course_teacher' 2>/dev/null; "
        ".venv/bin/jupyter lab --version; "
        "for lang in en zh; do .venv/bin/jupyter nbconvert --to notebook --execute --allow-errors "
        "--ExecutePreprocessor.timeout=300 --output-dir /tmp/ran/$lang work/$lang/01_*.ipynb; done; "
        "cp -r /tmp/ran ."
    )
    run({course: inside}, ["bash", "-c", script], network=False, cwd=inside, timeout=900)
    for lang in LANGUAGES:
        notebook = nbformat.read(str(course / "ran" / lang / build.notebook_name(build.lessons()["01"], lang)),
                                 as_version=4)
        errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
                  if output.get("output_type") == "error"]
        stubs = [cell for cell in notebook.cells if cell.metadata.get("exercise")]
        # a stub only defines its function (which raises when called): Run All raises nothing, and each
        # check says the exercise is not attempted yet
        assert not errors and len(stubs) == 3, errors
        printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
        assert printed.count("○") >= 3, printed[-2000:]  # each check: not attempted
