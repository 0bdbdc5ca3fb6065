"""Autograders for the platforms schools grade on: Gradescope and Classroom 50.

    python -m course_teacher.platforms gradescope  [--lesson 03] [--lang en] [--seed N] [--out dist/platforms]
    python -m course_teacher.platforms classroom50 [--lesson 03] [--lang en] [--seed N] [--out dist/platforms]
    make gradescope SEED=N            make classroom50 SEED=N

Each writes one autograder per lesson and language (or the ones asked for), with the course
pinned: the course is built into a wheel from this checkout (check out the tag you teach with
first), and that wheel, not the student's files, holds the grader and the exercises' references.

- Gradescope: ``gradescope/<NN>-<lang>.zip`` holds setup.sh (Python 3.11 and bubblewrap from
  apt, then the course in /autograder/venv), run_autograder, autograder.py, settings.json and the
  wheel, at the zip's root as Gradescope's specification asks. Upload it as the assignment's
  autograder (Ubuntu 22.04 base image). Students upload their notebook of the lesson.
- Classroom 50: ``classroom50/<NN>-<lang>/`` holds autograder.py, settings.json and the wheel:
  copy the folder into your classroom50 repository as ``CLASSROOM/autograders/ASSIGNMENT/``, and
  give the assignment the runtime ``{"python": "3.11", "apt": ["bubblewrap"]}``. It grades
  ``notebooks/<lang>/<lesson's notebook>`` of the student's repository.

Hidden cases: each autograder draws them from ``--seed`` (default: the course's public seed,
which every student can read in the course's code). On Gradescope the autograder is the
teacher's alone; on Classroom 50 the folder is as private as your classroom50 repository, and
the grading runs in the student's repository, whose workflow the student can edit: use
Classroom 50 for feedback, and grade for marks with ``make grade`` or classroom/grade-class.yml.
autograder.py says what runs where.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from course_teacher.exercises import EXERCISES
from course_teacher.exercises.reference import DEFAULT_HIDDEN_SEED
from course_teacher import build, release

HERE = Path(__file__).resolve().parent
PLATFORMS = ("gradescope", "classroom50")
TORCH = "torch==2.13.0"  # as the Makefile pins it: the CPU build
TIMEOUT_S = 1200  # the grader's run on one notebook, at most (its own limits are tighter)
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image (Ubuntu 22.04).
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3.11 python3.11-venv bubblewrap git
python3.11 /autograder/source/autograder.py --install /autograder/venv
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission; autograder.py writes /autograder/results/results.json.
set -euo pipefail
cd /autograder/source
exec python3.11 -I /autograder/source/autograder.py
"""


def lessons():
    """{lesson: notebook stem}, from the sources."""
    return {lesson: source.stem for lesson, source in build.lessons().items()}


def settings(platform, lesson, lang, seed, wheel):
    exercises = sorted(e for e in EXERCISES if e.startswith(lesson + "."))
    return {"platform": platform, "lesson": lesson, "lang": lang, "stem": lessons()[lesson], "seed": seed,
            "torch": TORCH, "wheel": wheel.name, "timeout_s": TIMEOUT_S,
            "exercises": [{"id": e, "points": EXERCISES[e].points} for e in exercises]}


def build_wheel(folder):
    """The course as a wheel, built from this checkout into `folder` (no dependencies, no network)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(folder), str(build.ROOT)], check=True, capture_output=True)
    (wheel,) = Path(folder).glob("course_utils-*.whl")
    return wheel


def _files(platform, lesson, lang, seed, wheel):
    """{name: (bytes, executable)} of one autograder."""
    files = {"autograder.py": ((HERE / "autograder.py").read_bytes(), False),
             "settings.json": (json.dumps(settings(platform, lesson, lang, seed, wheel), indent=2).encode(), False),
             wheel.name: (wheel.read_bytes(), False)}
    if platform == "gradescope":
        files["setup.sh"] = (SETUP.encode(), True)
        files["run_autograder"] = (RUN.encode(), True)
    return files


def write(platform, out, seed=DEFAULT_HIDDEN_SEED, only_lessons=None, langs=build.LANGUAGES):
    """Write the autograders of `platform` under `out`/<platform>/; the paths written."""
    chosen = [lesson for lesson in lessons() if not only_lessons or lesson in only_lessons]
    target = Path(out) / platform
    target.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as folder:
        wheel = build_wheel(folder)
        for lesson in chosen:
            for lang in langs:
                files = _files(platform, lesson, lang, seed, wheel)
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
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("course_utils-*.whl"):
        stale.unlink()
    for name, (content, executable) in files.items():
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
    paths = write(args.platform, args.out, DEFAULT_HIDDEN_SEED if args.seed is None else args.seed,
                  args.lesson, tuple(args.lang or build.LANGUAGES))
    for path in paths:
        print(path)
    return 0
