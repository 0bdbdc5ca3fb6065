"""Binder and Colab links to every lesson notebook, and the README section that lists them
(``make readme``); the cell that installs the course on Colab; nbgitpuller links for a school's own
JupyterHub (``make hub-links``).

    python -m course_teacher.links            print every notebook's Binder link
    python -m course_teacher.links --readme   rewrite the README's Binder section
    python -m course_teacher.links --check    fail when the README's Binder section is out of date
    python -m course_teacher.links --hub https://hub.example.edu --repo https://github.com/you/attention-student
                                            print a Markdown table of nbgitpuller links, lesson by language

A hub link (nbgitpuller's ``/hub/user-redirect/git-pull``) clones or updates ``--repo`` in the
learner's home on the hub, then opens the lesson in JupyterLab. Point it at a repository that
holds the student bundle (``make release``, unzipped, pushed), or at this repository's branch
``student`` (``--branch student``), never at its main branch: that one holds the solutions, and
``--hub`` refuses a branch whose tree holds any of the teacher's files (it reads the tree with git).

Every student link (Binder, Colab: the README, the student README, each student notebook's badge)
opens the branch ``student`` (STUDENT_BRANCH): ``make release`` commits the student bundle's files
there (course_teacher.release), and the teacher pushes it with the release. A solution's Colab link
opens the main branch, for the teacher.

The repository's public address is set in one place: pyproject.toml, ``[project.urls] Repository``
(a GitHub address). A fork sets its own there and runs ``make readme``. The lessons come from the
sources (``sources.lessons()``), each link text from the first heading of the notebook it opens; so a
new lesson, or a renamed one, means running ``make readme`` again (tests/test_links.py fails until then).

A link opens JupyterLab on mybinder.org at one notebook:
``https://mybinder.org/v2/gh/OWNER/REPO/student?urlpath=lab%2Ftree%2Fnotebooks%2Fen%2F01_attention_basics.ipynb``.
Binder builds the environment from the top-level environment.yml.

A Colab link opens GitHub's copy of a notebook on the same branch in Google Colab:
``https://colab.research.google.com/github/OWNER/REPO/blob/student/notebooks/en/01_attention_basics.ipynb``.
Colab has torch but not the course, so every lesson's first code cell (``colab_cell``, which the
build puts there) installs it on Colab, and only there: the student bundle of the notebook's
version, ``make release``'s attention-course-student-<version>.zip, which the teacher attaches to
the GitHub release ``v<version>`` (course_utils and its public data; no solutions, no teacher's side).
"""

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from urllib.parse import quote, urlsplit

from . import sources

BINDER = "https://mybinder.org/v2/gh"
BADGE = "https://mybinder.org/badge_logo.svg"
COLAB = "https://colab.research.google.com/github"
#: Colab's badge on the web: the README's (GitHub shows it; a page read online).
COLAB_BADGE_WEB = "https://colab.research.google.com/assets/colab-badge.svg"
#: The badge at the top of every lesson (render.colab_link), inside the notebook itself: a lesson is
#: read offline in JupyterLab, where a remote image is a broken one. (JupyterLab's sanitizer keeps a
#: data: image; its links are checked, not its images' sources.)
COLAB_BADGE = "data:image/svg+xml;base64," + base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20">'
    b'<rect width="117" height="20" rx="3" fill="#555"/><rect x="52" width="65" height="20" rx="3" fill="#f9ab00"/>'
    b'<rect x="52" width="6" height="20" fill="#f9ab00"/>'
    b'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
    b'<text x="7" y="14">Open in</text><text x="60" y="14">Colab</text></g></svg>').decode("ascii")
#: The repository's own branch: the README on GitHub, and the solutions' Colab links (the teacher's).
BRANCH = "main"
#: The branch every student link opens: the student bundle alone (``make release`` writes it from
#: release.student_files(), the teacher pushes it), so that neither Binder's file browser nor a
#: Colab link can show a solution. The repository's main branch holds notebooks/solutions/.
STUDENT_BRANCH = "student"
#: What a student repository or branch must never hold (release.student_files() leaves them out).
TEACHERS_PATHS = ("notebooks/solutions/", "notebooks/source/", "course_teacher/")
README = sources.ROOT / "README.md"
START, END = "<!-- binder:start -->", "<!-- binder:end -->"
LANGUAGE_NAMES = {"en": "English", "zh": "中文"}


def _project():
    """pyproject.toml's [project] table: the course's (sources.ROOT's), or, in a course folder without one
    (a test's), the one of the repository this module comes from."""
    file = sources.ROOT / "pyproject.toml"
    if not file.is_file():
        file = Path(__file__).resolve().parent.parent / "pyproject.toml"
    return tomllib.loads(file.read_text(encoding="utf-8"))["project"]


def repository():
    """(owner, name) of the course's GitHub repository, from pyproject.toml's [project.urls] Repository."""
    return parse_repository(_project().get("urls", {}).get("Repository", ""))


def parse_repository(address):
    """(owner, name) of a GitHub address such as https://github.com/OWNER/REPO (or REPO.git)."""
    parts = urlsplit(address)
    path = parts.path.strip("/").removesuffix(".git").split("/")
    if parts.scheme != "https" or parts.netloc != "github.com" or len(path) != 2 or not all(path):
        raise SystemExit(
            f"links: pyproject.toml's [project.urls] Repository is {address!r}; "
            "needs a GitHub address like https://github.com/OWNER/REPO (Binder builds from GitHub)"
        )
    return path[0], path[1]


def branch_of(notebook):
    """The branch a link to `notebook` opens: a solution's, the repository's own (the teacher's); any
    other, the student branch, which holds the student bundle and nothing of the teacher's."""
    return BRANCH if notebook.startswith(TEACHERS_PATHS) else STUDENT_BRANCH


def binder_url(notebook):
    """The Binder link that opens `notebook` (a path relative to the repository, e.g.
    notebooks/en/01_attention_basics.ipynb) in JupyterLab, from the student branch: Binder builds it
    from the bundle's environment.yml and postBuild, and its file browser shows the bundle alone."""
    owner, name = repository()
    where = "/".join(quote(part, safe="") for part in (owner, name, branch_of(notebook)))
    return f"{BINDER}/{where}?urlpath={quote('lab/tree/' + notebook, safe='')}"


def colab_url(notebook):
    """The link that opens `notebook` (a path relative to the repository) in Google Colab, from
    GitHub's copy on its branch (branch_of: the student branch for a student notebook)."""
    owner, name = repository()
    where = "/".join(quote(part, safe="") for part in (owner, name))
    return f"{COLAB}/{where}/blob/{quote(branch_of(notebook), safe='')}/{quote(notebook)}"


def version():
    """The course's version, pyproject.toml's: the student bundle a Colab notebook installs."""
    return _project()["version"]


def student_bundle_url(at_version=None):
    """Where a Colab notebook installs the course from: the student bundle of its version
    (``make release``'s attention-course-student-<version>.zip: course_utils and its public data, no
    teacher's side), attached to the repository's GitHub release v<version>."""
    owner, name = repository()
    at_version = at_version or version()
    return (f"https://github.com/{quote(owner, safe='')}/{quote(name, safe='')}/releases/download/"
            f"v{quote(at_version, safe='')}/attention-course-student-{quote(at_version, safe='')}.zip")


def colab_cell(lang, at_version=None):
    """The code of a lesson's first code cell: on Colab (the module google.colab is loaded) it installs
    the course at `at_version` unless that version is installed already, and turns on Colab's widget
    manager, which ipywidgets 8 needs there; anywhere else it does nothing."""
    at_version = at_version or version()
    return COLAB_CELL[lang].format(url=student_bundle_url(at_version), version=at_version).strip()


# The cell's comment in each language; its code, the same in both. Short, and silent off Colab: a
# learner in JupyterLab reads one line and runs past it.
COLAB_COMMENT = {
    "en": "# Google Colab only (elsewhere this does nothing): install the course at this notebook's version.\n",
    "zh": "# 只在 Google Colab 上起作用（在其他地方什么也不做）：安装与本笔记本同一版本的课程。\n",
}
# (Colab's custom widget manager is what ipywidgets 8 needs there.)
COLAB_CODE = """import sys

if "google.colab" in sys.modules:
    import importlib, importlib.metadata, subprocess
    try:
        installed = importlib.metadata.version("course_utils")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != "{version}":
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{url}"], check=True)
        importlib.invalidate_caches()
    from google.colab import output
    output.enable_custom_widget_manager()
"""
COLAB_CELL = {lang: comment + COLAB_CODE for lang, comment in COLAB_COMMENT.items()}


def hub_url(hub, repo, notebook, branch=BRANCH):
    """The nbgitpuller link that pulls `repo` (a git address) into the learner's home on the
    JupyterHub at `hub` and opens `notebook` (a path inside the repository) in JupyterLab. The
    clone lands in a folder named after the repository, which the path must name; `?autodecode`
    spares the learner JupyterLab's question about workspaces (nbgitpuller's URL options)."""
    hub_parts, repo_parts = urlsplit(hub), urlsplit(repo)
    if hub_parts.scheme not in ("https", "http") or not hub_parts.netloc or hub_parts.query:
        raise SystemExit(f"links: --hub is {hub!r}; needs the hub's address, like https://hub.example.edu")
    folder = repo_parts.path.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
    if repo_parts.scheme not in ("https", "http") or not folder:
        raise SystemExit(f"links: --repo is {repo!r}; needs a git address, like https://github.com/you/attention-student")
    query = "&".join([f"repo={quote(repo, safe='')}", f"branch={quote(branch, safe='')}",
                      f"urlpath={quote(f'lab/tree/{folder}/{notebook}?autodecode', safe='')}"])
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def teachers_files(repo, branch):
    """The paths of `repo`'s `branch` (any address git clones) that a learner must never see
    (TEACHERS_PATHS), read from the branch's tree itself: [] for a student repository."""
    with tempfile.TemporaryDirectory() as folder:
        clone = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--no-checkout", "--filter=blob:none",
                                "--branch", branch, repo, folder], capture_output=True, text=True, timeout=300,
                               check=False, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
        if clone.returncode:
            raise SystemExit(f"links: could not read the branch {branch!r} of --repo {repo!r} (git says: "
                             f"{clone.stderr.strip()[-300:]}); the hub clones it, so it must be reachable")
        # (core.quotepath off: the Chinese notebooks' paths as they are, not quoted in octal escapes)
        tree = subprocess.run(["git", "-C", folder, "-c", "core.quotepath=off", "ls-tree", "-r", "--name-only", "HEAD"],
                              capture_output=True,
                              text=True, timeout=120, check=True).stdout.splitlines()
    return [path for path in tree if path.startswith(TEACHERS_PATHS)]


def refuse_teachers_repository(repo, branch):
    """SystemExit, with what to do instead, when `repo`'s `branch` holds the teacher's files."""
    found = teachers_files(repo, branch)
    if found:
        raise SystemExit(
            f"links: --repo {repo!r} (branch {branch!r}) holds the teacher's files, the solutions among them "
            f"({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}): a hub link would pull them into every "
            f"learner's home. Give the student bundle's repository (`make release`, unzipped, pushed), or this "
            f"repository's branch {STUDENT_BRANCH!r} (`make release` writes it) with --branch {STUDENT_BRANCH}.")


def hub_table(hub, repo, branch=BRANCH):
    """A Markdown table of every lesson's nbgitpuller link, a column per language."""
    rows = {}
    for lesson, lang, notebook in notebooks():
        rows.setdefault(lesson, {})[lang] = f"[{title(notebook)}]({hub_url(hub, repo, notebook, branch)})"
    languages = sources.LANGUAGES
    return "\n".join([
        "| # | " + " | ".join(LANGUAGE_NAMES[lang] for lang in languages) + " |",
        "| --- |" + " --- |" * len(languages),
        *[f"| {lesson} | " + " | ".join(row[lang] for lang in languages) + " |" for lesson, row in rows.items()],
    ])


def notebooks():
    """[(lesson, lang, path relative to the repository)] of every student notebook, lesson by lesson."""
    return [
        (lesson, lang, path.relative_to(sources.ROOT).as_posix())
        for lesson, source in sources.lessons().items()
        for lang, solutions, path in sources.targets(source)
        if not solutions
    ]


def title(notebook):
    """A notebook's title: its first heading, without a leading lesson number ("00 · ")."""
    path = sources.ROOT / notebook
    if not path.exists():
        raise SystemExit(f"links: {notebook} does not exist: render it first with `make notebooks`")
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            heading = re.search(r"^#\s+(.+?)\s*$", "".join(cell["source"]), re.MULTILINE)
            if heading:
                return re.sub(r"^\d\d\s*·\s*", "", heading.group(1))
    raise SystemExit(f"links: {notebook} has no heading to name its link after")


def section():
    """The README's Binder section, markers included, generated from the address and the lessons."""
    rows = {}
    for lesson, lang, notebook in notebooks():
        label = (f"[![Binder]({BADGE}) {title(notebook)}]({binder_url(notebook)}) "
                 f"[![Open in Colab]({COLAB_BADGE_WEB})]({colab_url(notebook)})")
        rows.setdefault(lesson, {})[lang] = label
    languages = sources.LANGUAGES
    table = [
        "| # | " + " | ".join(LANGUAGE_NAMES[lang] for lang in languages) + " |",
        "| --- |" + " --- |" * len(languages),
    ] + [f"| {lesson} | " + " | ".join(row[lang] for lang in languages) + " |" for lesson, row in rows.items()]
    return "\n".join([
        START,
        "<!-- generated by `make readme` from pyproject.toml's [project.urls] Repository: edit there, not here -->",
        "## Run on Binder or Colab · 在 Binder 或 Colab 上运行",
        "",
        "Open a lesson in JupyterLab in your browser, with nothing to install. Binder first builds the",
        "environment from `environment.yml`, which can take several minutes after the repository changes.",
        "A Binder session is temporary: to keep your work, download the notebook (File › Download).",
        "无需安装，直接在浏览器的 JupyterLab 中打开一课。Binder 会先按 `environment.yml` 构建环境，",
        "仓库有改动后的第一次启动可能要等几分钟。Binder 会话是临时的：想保留自己的答案，请下载笔记本（文件 › 下载）。",
        "",
        "Or open it in Google Colab (the second badge): the lesson's first cell installs the course at the",
        "notebook's version and turns on Colab's widget manager. With a GPU runtime (Runtime › Change runtime",
        "type) the sections about speed and memory measure on the GPU too. Colab keeps your work only in a copy",
        "you save: File › Save a copy in Drive, or File › Download. (The record of your checks that `progress()`",
        "shows is kept only in the work folder `make lab` opens, not on Colab.)",
        "也可以在 Google Colab 中打开（第二个徽章）：课程的第一个单元会安装与笔记本同一版本的课程，并打开 Colab 的",
        "部件管理器。选用带 GPU 的运行时（代码执行程序 › 更改运行时类型）时，讲速度和内存的小节也会在 GPU 上测量。",
        "Colab 只在你保存的副本里留住你的答案：文件 › 在云端硬盘中保存一份副本，或 文件 › 下载。",
        "（`progress()` 显示的检查记录只保存在 `make lab` 打开的工作文件夹里，Colab 上没有。）",
        "",
        *table,
        "",
        "Every link opens the branch `student`: the student bundle alone, no solutions, which `make release`",
        "writes and the teacher pushes with each release (`git push origin student`).",
        "每个链接打开的都是 `student` 分支：其中只有学生版课程包，没有参考答案；它由 `make release` 生成，",
        "老师在每次发布时推送（`git push origin student`）。",
        "",
        "The links are generated by `make readme` from the repository's address, set in one place:",
        "`[project.urls] Repository` in `pyproject.toml`. A fork changes the address there and runs `make readme`.",
        "这些链接由 `make readme` 根据仓库地址生成，地址只在一处设置：`pyproject.toml` 的",
        "`[project.urls] Repository`。fork 之后，在那里改成自己的地址，再运行 `make readme`。",
        END,
    ])


def with_section(readme):
    """`readme` (its text) with the Binder section between the markers replaced by a fresh one."""
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise SystemExit(f"links: README.md needs exactly one {START} ... {END} pair, in that order")
    before, rest = readme.split(START)
    after = rest.split(END)[1]
    return before + section() + after


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_teacher.links", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--readme", action="store_true", help="rewrite the README's Binder section")
    mode.add_argument("--check", action="store_true", help="fail when the README's Binder section is out of date")
    mode.add_argument("--hub", help="a JupyterHub's address: print nbgitpuller links to it (with --repo)")
    parser.add_argument("--repo", help="with --hub: the git address of the repository holding the student bundle")
    parser.add_argument("--branch", default=BRANCH, help=f"with --hub: the branch to pull (default: {BRANCH})")
    args = parser.parse_args(argv)
    if args.hub or args.repo:
        if not (args.hub and args.repo):
            parser.error("--hub and --repo go together")
        table = hub_table(args.hub, args.repo, args.branch)  # the addresses' errors first: they need no network
        refuse_teachers_repository(args.repo, args.branch)
        print(table)
        return 0
    if not (args.readme or args.check):
        for _lesson, _lang, notebook in notebooks():
            print(f"{notebook}: {binder_url(notebook)}")
        return 0
    current = README.read_text(encoding="utf-8")
    fresh = with_section(current)
    if args.check:
        if fresh != current:
            print("README.md's Binder section is out of date: run `make readme`", file=sys.stderr)
            return 1
        print("README.md's Binder section is up to date")
        return 0
    if fresh != current:
        README.write_text(fresh, encoding="utf-8")
    print(f"README.md: Binder section {'rewritten' if fresh != current else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
