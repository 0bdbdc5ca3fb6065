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
in one place), less the links to the solutions, followed by each lesson's Binder and Colab links (the
student branch's).
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

With ``--student-branch`` (``make release``), the student bundle's files are also committed as the
branch ``student`` of this repository (``student_branch``), which every student link opens (Binder,
Colab: course_teacher.links); the teacher pushes it with the release.

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
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

from . import build, links

ROOT = build.ROOT
DIST = ROOT / "dist"
NAME = "attention-course"
#: The files at the top of the repository a learner needs: the package's metadata (pip installs
#: course_utils from it), the conda/Binder environment (environment.yml, postBuild: what a school's
#: JupyterHub image is built from with repo2docker), `make lab`, and what to read first.
TOP_FILES = ("GLOSSARY.md", "LICENSE", "Makefile", "environment.yml", "postBuild", "pyproject.toml",
             "requirements/lab.lock", "requirements/torch.lock", "requirements/triton.lock")
#: The student zip's README.md, and where the repository README's course map goes into it, and
#: where the table of each lesson's Binder and Colab links (the student branch's) goes.
STUDENT_README, COURSE_MAP, ONLINE = "README.student.md", "<!-- course map -->", "<!-- online -->"
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
    if COURSE_MAP not in text or ONLINE not in text or len(table) < 3 or any("solutions/" in line for line in table):
        raise SystemExit(f"release: {STUDENT_README} needs {COURSE_MAP!r} and {ONLINE!r}, "
                         "and README.md a course map table")
    return text.replace(COURSE_MAP, "\n".join(table)).replace(ONLINE, online_table())


def online_table():
    """Each lesson's Binder and Colab links, a column per language: the student branch's notebooks
    (course_teacher.links), never the repository's main branch, which holds the solutions."""
    rows = {}
    for lesson, lang, notebook in links.notebooks():
        binder, colab = links.binder_url(notebook), links.colab_url(notebook)
        rows.setdefault(lesson, {})[lang] = f"[Binder]({binder}) · [Colab]({colab})"
    names = [links.LANGUAGE_NAMES[lang] for lang in build.LANGUAGES]
    return "\n".join(["| # | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names),
                      *(f"| {lesson} | " + " | ".join(row[lang] for lang in build.LANGUAGES) + " |"
                        for lesson, row in rows.items())])


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


def _git(arguments, *, git_dir, text=None, environment=None):
    result = subprocess.run(["git", "--git-dir", str(git_dir), *arguments], input=text, capture_output=True,
                            text=True, timeout=300, check=False, env={**os.environ, **(environment or {})})
    if result.returncode:
        raise SystemExit(f"release: git {arguments[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


def student_branch(git_dir=None, branch=links.STUDENT_BRANCH):
    """Commit the student bundle (student_files(), its README the student's) as the tip of `branch` in
    the repository `git_dir` (this checkout's by default), and return the commit. The branch is what
    every student link opens (course_teacher.links): the bundle's files at their paths, nothing else.
    Written with git's plumbing through an index of its own, so the checkout and its index are left as
    they are; a tree that did not change adds no commit. The commit's dates are the release's."""
    git_dir = git_dir or _git_dir()
    paths = student_files()
    contents = {path: (student_readme().encode("utf-8") if path == "README.md" else (ROOT / path).read_bytes())
                for path in paths}
    with tempfile.TemporaryDirectory() as folder:
        index = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        entries = []
        for path, content in contents.items():
            blob = subprocess.run(["git", "--git-dir", str(git_dir), "hash-object", "-w", "--stdin"], input=content,
                                  capture_output=True, timeout=120, check=True).stdout.decode().strip()
            entries.append(f"100644 {blob}\t{path}")
        _git(["update-index", "--add", "--index-info"], git_dir=git_dir, text="\n".join(entries) + "\n",
             environment=index)
        tree = _git(["write-tree"], git_dir=git_dir, environment=index)
    ref = f"refs/heads/{branch}"
    parent = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "-q", "--verify", ref + "^{commit}"],
                            capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    if parent and _git(["rev-parse", parent + "^{tree}"], git_dir=git_dir) == tree:
        return parent
    date = f"{epoch()} +0000"
    who = {"GIT_AUTHOR_NAME": "make release", "GIT_AUTHOR_EMAIL": "release@localhost", "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": "make release", "GIT_COMMITTER_EMAIL": "release@localhost", "GIT_COMMITTER_DATE": date}
    commit = _git(["commit-tree", tree, *(["-p", parent] if parent else []), "-m",
                   f"The student bundle of version {version()}: what every student link opens"],
                  git_dir=git_dir, environment=who)
    _git(["update-ref", ref, commit, *([parent] if parent else [])], git_dir=git_dir)
    return commit


def _git_dir():
    found = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60, check=False)
    if found.returncode:
        raise SystemExit("release: --student-branch needs a git checkout of the course")
    return (ROOT / found.stdout.strip()).resolve()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.release", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DIST), help="folder for the zips (default: dist/)")
    parser.add_argument("--student-branch", action="store_true",
                        help=f"also commit the student bundle as the branch {links.STUDENT_BRANCH!r}, "
                             "which the student links open")
    args = parser.parse_args(argv)
    for path in release(out=Path(args.out).resolve()):
        with zipfile.ZipFile(path) as archive:
            count = len(archive.namelist())
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown}: {count} files, {path.stat().st_size / 1024:.0f} KiB")
    if args.student_branch:
        commit = student_branch()
        print(f"branch {links.STUDENT_BRANCH}: {commit[:12]}, the student bundle alone. Publish it with the release, "
              f"before learners follow a link: git push origin {links.STUDENT_BRANCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
