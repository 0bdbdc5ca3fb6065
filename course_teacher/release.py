"""The course as two zips: the student bundle a teacher hands out, and the solutions (``make release``).

    python -m course_teacher.release              write both zips to dist/
    python -m course_teacher.release --out DIR    write them to DIR

``attention-course-student-<version>.zip`` holds what a learner needs to run the course: the student
notebooks (English and Chinese), the course homes and the glossaries beside them, the diagrams they show,
course_utils, and the files that set it up
(pyproject.toml, requirements/lab.lock, torch.lock and triton.lock, environment.yml and postBuild for
Binder and a hub's image, the
Makefile for ``make lab``, GLOSSARY.md, LICENSE), with a
README of its own: README.student.md, whose course map is the repository README's (one table, kept
in one place), less the links to the solutions.
``attention-course-solutions-<version>.zip`` holds the solution notebooks, for the teacher. Both put
their files under the same top folder, ``attention-course-<version>/``, at the paths they have in the
repository: unzipped in one place, the solutions land in ``notebooks/solutions/`` beside the course,
and their diagram links work. The version is pyproject.toml's.

What goes into the student zip is named, never "everything but ...": a file nobody listed cannot
leak. Not named, so never in it: notebooks/solutions/, the lesson sources notebooks/source/*.py
(they hold every exercise's solution), tests, benchmarks, test-artifacts/, .venv and caches.
Which lessons there are comes from the sources (``build.lessons()``); each must have its rendered
notebooks. The release packages the committed notebooks as they are; ``make release`` runs
``make check`` first, so they match their sources.

The zips are deterministic: sorted entries, one timestamp for every file (the release commit's
time, or SOURCE_DATE_EPOCH where it is set, as reproducible builds do), fixed permissions and
compression, so two runs over the same commit give the same bytes.
"""

import argparse
import io
import os
import re
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

from . import build

ROOT = build.ROOT
DIST = ROOT / "dist"
NAME = "attention-course"
#: The files at the top of the repository a learner needs: the package's metadata (pip installs
#: course_utils from it), the conda/Binder environment (environment.yml, postBuild: what a school's
#: JupyterHub image is built from with repo2docker), `make lab`, and what to read first.
TOP_FILES = ("GLOSSARY.md", "LICENSE", "Makefile", "environment.yml", "postBuild", "pyproject.toml",
             "requirements/lab.lock", "requirements/torch.lock", "requirements/triton.lock")
#: The student zip's README.md, and where the repository README's course map goes into it.
STUDENT_README, COURSE_MAP = "README.student.md", "<!-- course map -->"
PACKAGE = "course_utils"
#: Never packaged from inside course_utils: bytecode, editor and notebook leftovers.
JUNK_DIRS = {"__pycache__", ".ipynb_checkpoints"}
JUNK_SUFFIXES = (".pyc", ".pyo", ".swp", ".orig", ".rej", "~")
#: The same, as shutil.ignore_patterns takes them (hidden files too).
JUNK_PATTERNS = (*JUNK_DIRS, *(f"*{suffix}" for suffix in JUNK_SUFFIXES), ".*")
# How a rendered notebook links a diagram (build.IMAGES_LINK, one folder deeper for solutions).
IMAGE_LINK = re.compile(r"(?:\.\./)+(images/[\w.\-]+)")
#: 1980-01-01, the earliest time a zip entry can carry: the date where no commit gives one.
EARLIEST = (1980, 1, 1, 0, 0, 0)


def version():
    """The course's version, from pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _rel(path):
    return path.relative_to(ROOT).as_posix()


def _notebooks(solutions):
    """Every lesson's rendered notebooks, student or solution renders, both languages."""
    paths = []
    for lesson, source in build.lessons().items():
        for _lang, is_solution, path in build.targets(source):
            if is_solution != solutions:
                continue
            if not path.exists():
                raise SystemExit(
                    f"release: lesson {lesson} has no {_rel(path)}: render it first with `make notebooks ONLY={lesson}`"
                )
            paths.append(path)
    return paths


def _linked_images(notebooks):
    """The files of images/ that these notebooks show."""
    names = {match for path in notebooks for match in IMAGE_LINK.findall(path.read_text(encoding="utf-8"))}
    missing = sorted(name for name in names if not (ROOT / name).is_file())
    if missing:
        raise SystemExit(f"release: the notebooks show images that do not exist: {missing}")
    return [ROOT / name for name in names]


def _package_files():
    """Every file of course_utils/, less bytecode and editor leftovers."""
    files = []
    for folder, dirs, names in os.walk(ROOT / PACKAGE):
        dirs[:] = [d for d in dirs if d not in JUNK_DIRS and not d.startswith(".")]
        files += [Path(folder, n) for n in names if not n.startswith(".") and not n.endswith(JUNK_SUFFIXES)]
    return files


def epoch():
    """The release's time in seconds: SOURCE_DATE_EPOCH's, else the commit's being released (HEAD);
    0 outside a git checkout."""
    seconds = os.environ.get("SOURCE_DATE_EPOCH")
    if not seconds:
        try:
            seconds = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True,
                                     text=True, timeout=30, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            seconds = ""
    return int(seconds) if seconds.isdigit() else 0


def timestamp():
    """Every entry's date: epoch()'s, in UTC; 1980-01-01 outside a git checkout. A learner's
    JupyterLab then shows when the course was made."""
    seconds = epoch()
    seconds -= seconds % 2  # a zip entry's time counts in steps of 2 seconds
    return max(EARLIEST, time.gmtime(seconds)[:6])


def student_readme():
    """README.student.md with the repository README's course map in place of its marker: the
    lessons' rows, whose links point at the student notebooks (the solutions' line stays out)."""
    text = (ROOT / STUDENT_README).read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Course map", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    if COURSE_MAP not in text or len(table) < 3 or any("solutions/" in line for line in table):
        raise SystemExit(f"release: {STUDENT_README} needs {COURSE_MAP!r}, and README.md a course map table")
    return text.replace(COURSE_MAP, "\n".join(table))


def student_files():
    """The repository-relative paths of everything in the student zip, sorted (README.md is
    student_readme()'s, written in its place)."""
    notebooks = _notebooks(solutions=False) + [path for _lang, path in build.homes()]  # `make lab` opens the homes
    glossaries = [path for _lang, path in build.glossary_pages()]  # what the lessons and the homes link
    files = notebooks + glossaries + _linked_images(notebooks) + _package_files() + [ROOT / name for name in TOP_FILES]
    paths = sorted({_rel(f) for f in files} | {"README.md"})
    # The list above is built only from named places; this guards it against a future edit.
    leaked = [p for p in paths if p.startswith(("notebooks/solutions/", "notebooks/source/"))]
    if leaked:
        raise SystemExit(f"release: solutions would leak into the student zip: {leaked}")
    return paths


def solution_files():
    """The repository-relative paths of the solution notebooks, sorted."""
    return sorted(_rel(f) for f in _notebooks(solutions=True))


def write_zip(target, paths, top, replaced=None):
    """Write `paths` (relative to the repository) into the zip `target`, under the folder `top`;
    `replaced` maps a path to the bytes written for it instead of the file's.

    Same files in, same bytes out: sorted entries, one timestamp, fixed permissions and
    compression. Written beside the target first, then moved over it, so a failed run leaves no
    half-written zip.
    """
    replaced, date = replaced or {}, timestamp()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(paths):
            info = zipfile.ZipInfo(f"{top}/{path}", date_time=date)
            info.create_system = 3  # Unix, whatever system builds it, so the permissions below count
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            info.compress_type = zipfile.ZIP_DEFLATED
            content = replaced[path] if path in replaced else (ROOT / path).read_bytes()
            archive.writestr(info, content, compresslevel=9)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, target)
    return target


def release(out=DIST):
    """Write the student zip and the solutions zip to `out`; return their paths."""
    v = version()
    top = f"{NAME}-{v}"
    return [
        write_zip(out / f"{NAME}-student-{v}.zip", student_files(), top,
                  replaced={"README.md": student_readme().encode("utf-8")}),
        write_zip(out / f"{NAME}-solutions-{v}.zip", solution_files(), top),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.release", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DIST), help="folder for the zips (default: dist/)")
    args = parser.parse_args(argv)
    for path in release(out=Path(args.out).resolve()):
        with zipfile.ZipFile(path) as archive:
            count = len(archive.namelist())
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown}: {count} files, {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
