"""Autograders for the platforms schools grade on: Gradescope and Classroom 50.

    python -m course_teacher.platforms gradescope  [--lesson 03] [--lang en] [--seed N] [--out dist/platforms]
    python -m course_teacher.platforms classroom50 [--lesson 03] [--lang en] [--seed N] [--out dist/platforms]
    make gradescope SEED=N            make classroom50 SEED=N

Each writes one autograder per lesson and language (or the ones asked for), from this checkout
(check out the tag you teach with first). An autograder holds everything it grades with, and
nothing that solves an exercise (autograder.py says what each file is):

    autograder.py  settings.json  requirements.txt  torch.txt  wheels/  key/   (+ setup.sh, run_autograder)

- the course's student package and its grader, as two wheels (``course_utils``; ``course_teacher``
  with its ``grade`` subpackage alone: no reference, no lesson source, no authoring tool);
- the answer key of the lesson (course_teacher/grade/key.py): the plan of its notebooks in both
  languages and the expected results of its cases as data, hidden cases drawn from a seed;
- requirements.txt and torch.txt, the course's requirements/grade.lock: the grader's packages and
  torch's CPU build, each pinned with its hashes (no JupyterLab).

Gradescope: ``gradescope/<NN>-<lang>.zip``, its files at the zip's root as Gradescope's
specification asks. Upload it as the assignment's autograder (base image Ubuntu 22.04; in
Autograder Settings give it 2 GB of memory or more: PyTorch does not fit the default 768 MB).
setup.sh installs Python 3.11 and bubblewrap from apt and the course into /autograder/venv (the
network is needed then, and only then: PyPI and PyTorch's CPU index). Students upload their
notebook of the lesson, under any name. The zip is the teacher's alone: its hidden cases come from
--seed itself, as ``make grade``'s do.

Classroom 50: ``classroom50/<NN>-<lang>/``: copy the folder into your classroom50 repository as
``CLASSROOM/autograders/ASSIGNMENT/`` and give the assignment the runtime ``{"python": "3.11",
"apt": ["bubblewrap"]}``. It grades ``notebooks/<lang>/<lesson's notebook>`` of the student's
repository, in the student's own repository's workflow. What is public there: Classroom 50
publishes every assignment's bundle on the classroom's GitHub Pages site, which anyone can
download, even when the classroom50 repository is private. So the bundle holds no seed and no
code that solves an exercise, and its hidden cases are drawn from a seed of their own (derived
from --seed by a one-way hash, used by no other autograder): reading the bundle shows those cases
and their expected results, and a student who copies them can pass Classroom 50's grading
without solving. Use Classroom 50 for feedback, and grade for marks where students cannot read
the cases: ``make grade`` or classroom/grade-class.yml, with your own --seed.
"""

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from course_utils.exercises import public

from .. import build, release
from ..grade import grader

HERE = Path(__file__).resolve().parent
PLATFORMS = ("gradescope", "classroom50")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # torch's CPU build, not PyPI's much larger CUDA one
GRADE_LOCK = build.ROOT / "requirements" / "grade.lock"
TIMEOUT_S = 480  # the grading of one notebook, at most: within Gradescope's default limit of 10 minutes
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image (Ubuntu 22.04): Python 3.11 and
# bubblewrap, then the course, from this folder's files, into /autograder/venv.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3.11 python3.11-venv bubblewrap
python3.11 /autograder/source/autograder.py --install /autograder/venv
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission; autograder.py writes /autograder/results/results.json.
set -euo pipefail
cd /autograder/source
exec python3.11 -I /autograder/source/autograder.py
"""
#: The staged project of each wheel: its packages (folders, or single files of a package), and what
#: it needs beside the packages the locks install.
WHEELS = {
    "course_utils": {"files": ["course_utils"], "depends": "dependencies"},
    "course_teacher_grade": {"files": ["course_teacher/__init__.py", "course_teacher/grade"],
                             "depends": ["course_utils=={version}"]},
}
PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
requires-python = ">=3.11"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["{top}*"]

[tool.setuptools.package-data]
{package_data}
"""


def lessons():
    """{lesson: notebook stem}, from the sources."""
    return {lesson: source.stem for lesson, source in build.lessons().items()}


def platform_seed(platform, seed):
    """The seed a platform's hidden cases are drawn from: the teacher's own for Gradescope (its zip
    is private, as ``make grade``'s seed is); for Classroom 50, whose bundles are public, one of its
    own, from which the teacher's cannot be told (a one-way hash of it)."""
    if platform != "classroom50":
        return seed
    return int(hashlib.sha256(f"classroom50:{seed}".encode()).hexdigest()[:15], 16)


def settings(platform, lesson, lang, wheels):
    exercises = [e for e in public.EXERCISES if e.startswith(lesson + ".")]
    # "notebook": the file name the lesson has in `lang` (the one the student hands in), the source's stem aside
    return {"platform": platform, "lesson": lesson, "lang": lang, "stem": lessons()[lesson],
            "notebook": build.notebook_name(build.lessons()[lesson], lang),
            "course": release.version(), "wheels": [w.name for w in wheels], "torch_index": TORCH_INDEX,
            "timeout_s": TIMEOUT_S,
            "exercises": [{"id": e, "points": public.load(e).points} for e in exercises]}


def build_wheels(folder):
    """The course's student package and its grader as two wheels in `folder`, built from this
    checkout (no dependencies, no network); their paths."""
    import tomllib

    project = tomllib.loads((build.ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    version = project["project"]["version"]
    data = project["tool"]["setuptools"]["package-data"]
    built = []
    for name, spec in WHEELS.items():
        with tempfile.TemporaryDirectory() as stage:
            stage = Path(stage)
            for part in spec["files"]:
                source = build.ROOT / part
                if source.is_dir():
                    shutil.copytree(source, stage / part, ignore=shutil.ignore_patterns(*release.JUNK_PATTERNS))
                else:
                    (stage / part).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, stage / part)
            top = spec["files"][0].split("/")[0]
            depends = project["project"]["dependencies"] if spec["depends"] == "dependencies" else \
                [d.format(version=version) for d in spec["depends"]]
            package_data = "\n".join(f"{package} = {json.dumps(files)}" for package, files in data.items()
                                     if package == top)
            (stage / "pyproject.toml").write_text(PYPROJECT.format(name=name, version=version, top=top,
                                                  dependencies=json.dumps(depends), package_data=package_data))
            environment = dict(os.environ, SOURCE_DATE_EPOCH=str(release.epoch()))
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "--wheel-dir", str(folder), str(stage)],
                           check=True, capture_output=True, env=environment)
        (wheel,) = Path(folder).glob(f"{name}-*.whl")
        built.append(wheel)
    return built


def _requirements():
    """{"requirements.txt": grade.lock less torch, "torch.txt": its torch entry}: two pip calls, so
    that only torch is looked for on torch's index."""
    header, entries = [], {}
    name = None
    for line in GRADE_LOCK.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            (header if name is None else []).append(line)
            continue
        if not line[0].isspace():
            name = line.split("==")[0].strip().lower()
        entries.setdefault(name, []).append(line)
    if "torch" not in entries:
        raise SystemExit(f"platforms: {GRADE_LOCK.name} pins no torch: run `make lock`")
    text = lambda lines: "\n".join(header + lines) + "\n"  # noqa: E731
    return {"requirements.txt": text([line for n, lines in entries.items() if n != "torch" for line in lines]),
            "torch.txt": text(entries["torch"])}


def _files(platform, lesson, lang, wheels, key):
    """{name: (bytes, executable)} of one autograder."""
    files = {"autograder.py": ((HERE / "autograder.py").read_bytes(), False),
             "settings.json": (json.dumps(settings(platform, lesson, lang, wheels), indent=2).encode(), False),
             **{name: (text.encode(), False) for name, text in _requirements().items()}}
    files.update({f"wheels/{wheel.name}": (wheel.read_bytes(), False) for wheel in wheels})
    files.update({f"key/{path.name}": (path.read_bytes(), False) for path in sorted(Path(key).iterdir())})
    if platform == "gradescope":
        files["setup.sh"] = (SETUP.encode(), True)
        files["run_autograder"] = (RUN.encode(), True)
    return files


def write(platform, out, seed=None, only_lessons=None, langs=build.LANGUAGES):
    """Write the autograders of `platform` under `out`/<platform>/; the paths written. Hidden cases
    from `seed` (default: the public one)."""
    seed = platform_seed(platform, grader.answer_key.DEFAULT_SEED if seed is None else seed)
    chosen = [lesson for lesson in lessons() if not only_lessons or lesson in only_lessons]
    target = Path(out) / platform
    target.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as folder:
        wheels = build_wheels(Path(folder) / "wheels")
        for lesson in chosen:
            key = Path(folder) / f"key-{lesson}"
            grader.write_answers(key, seed, [lesson])
            for lang in langs:
                files = _files(platform, lesson, lang, wheels, key)
                if platform == "gradescope":
                    written.append(_zip(target / f"{lesson}-{lang}.zip", files))
                else:
                    written.append(_folder(target / f"{lesson}-{lang}", files))
    return written


def _zip(path, files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (content, executable) in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=release.timestamp())
            info.create_system, info.compress_type = 3, zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            archive.writestr(info, content)
    path.write_bytes(buffer.getvalue())
    return path


def _folder(path, files):
    if path.exists():
        shutil.rmtree(path)  # an earlier build's wheels and key go with it
    for name, (content, executable) in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(content)
        os.chmod(path / name, 0o755 if executable else 0o644)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.platforms", description=__doc__.split("\n")[0])
    parser.add_argument("platform", choices=PLATFORMS)
    parser.add_argument("--lesson", action="append", help="a lesson (00, 01, ...); repeat for several (default: all)")
    parser.add_argument("--lang", action="append", choices=build.LANGUAGES, help="en or zh (default: both)")
    parser.add_argument("--seed", type=int, default=None, help="your own secret number: it draws the hidden cases")
    parser.add_argument("--out", default=str(build.ROOT / "dist" / "platforms"), help="folder (default: dist/platforms)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.lesson or ()) - set(lessons()))
    if unknown:
        parser.error(f"argument --lesson: {', '.join(unknown)} is not one of the course's lessons ({', '.join(lessons())})")
    if args.seed is None:
        print("note: the hidden cases come from the public default seed; give your own with --seed (SEED=...)",
              file=sys.stderr)
    paths = write(args.platform, args.out, args.seed, args.lesson, tuple(args.lang or build.LANGUAGES))
    for path in paths:
        print(path)
    return 0
