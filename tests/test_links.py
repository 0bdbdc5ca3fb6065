"""Binder, Colab and CI. The README's Binder section (and its Colab links): generated from the one repository address in
pyproject.toml and the lessons there are, up to date, and every link well formed and opening a
notebook that exists. The GitHub Actions workflow: valid YAML that runs `make test` through .ci/run
and keeps the test artifacts."""

import json
import re
import tomllib
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pytest

from course_teacher import build, links

README = build.ROOT / "README.md"


def _section(readme):
    start, end = readme.index(links.START), readme.index(links.END)
    return readme[start:end]


def _address():
    return tomllib.loads((build.ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def test_the_readme_binder_section_is_what_make_readme_writes():
    readme = README.read_text(encoding="utf-8")
    assert links.with_section(readme) == readme, "README.md's Binder section is out of date: run `make readme`"


def test_every_binder_link_is_well_formed_and_opens_a_notebook_that_exists():
    owner, name = urlsplit(_address()).path.strip("/").removesuffix(".git").split("/")
    urls = re.findall(r"\]\((https?://[^)\s]+)\)", _section(README.read_text(encoding="utf-8")))
    opened = []
    for url in urls:
        if url in (links.BADGE, links.COLAB_BADGE_WEB) or url.startswith(links.COLAB + "/"):
            continue  # the Colab links: the next test
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("https", "mybinder.org"), url
        assert parts.path.split("/")[1:] == ["v2", "gh", owner, name, links.STUDENT_BRANCH], url
        query = parse_qs(parts.query, strict_parsing=True)
        assert list(query) == ["urlpath"] and len(query["urlpath"]) == 1, url
        urlpath = query["urlpath"][0]
        # URL-encoded: the value carries no bare '/', and decodes back to what it was made from
        assert parts.query == "urlpath=" + quote(urlpath, safe=""), url
        notebook = urlpath.removeprefix("lab/tree/")
        assert urlpath.startswith("lab/tree/") and re.fullmatch(r"notebooks/(en|zh)/\d\d_\w+\.ipynb", notebook), url
        assert (build.ROOT / notebook).is_file(), f"{url} opens {notebook}, which does not exist"
        opened.append(notebook)
    every = [
        f"notebooks/{lang}/{build.notebook_name(source, lang)}" for source in build.lessons().values() for lang in build.LANGUAGES
    ]
    assert sorted(opened) == sorted(every), "the Binder section must link each lesson once in each language"


def _colab_notebook(url, owner, name):
    """The notebook a Colab link opens, parsed back from the link (asserting its form on the way)."""
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == ("https", "colab.research.google.com", "", ""), url
    path = parts.path.split("/")
    assert path[1:5] == ["github", owner, name, "blob"], url
    # a student notebook opens from the student branch, a solution (the teacher's) from the main one
    solution = path[6:8] == ["notebooks", "solutions"]
    assert path[5] == (links.BRANCH if solution else links.STUDENT_BRANCH), url
    notebook = unquote("/".join(path[6:]))
    assert quote(notebook) == "/".join(path[6:]), f"{url}: the notebook's path is not quoted as a URL path"
    return notebook


def test_every_colab_link_is_well_formed_and_opens_a_notebook_that_exists():
    owner, name = urlsplit(_address()).path.strip("/").removesuffix(".git").split("/")
    section = _section(README.read_text(encoding="utf-8"))
    urls = [url for url in re.findall(r"\]\((https?://[^)\s]+)\)", section) if url.startswith(links.COLAB + "/")]
    opened = [_colab_notebook(url, owner, name) for url in urls]
    assert all((build.ROOT / notebook).is_file() for notebook in opened), opened
    # each lesson once in each language, in the same row as its Binder link
    every = [f"notebooks/{lang}/{build.notebook_name(source, lang)}" for source in build.lessons().values() for lang in build.LANGUAGES]
    assert sorted(opened) == sorted(every), "the section must give each lesson's Colab link once in each language"
    pairs = 0
    for line in section.splitlines():
        for binder, colab in re.findall(r"urlpath=lab%2Ftree%2F([^)]+)\) \[!\[Open in Colab\]\([^)]+\)\]\(([^)]+)\)", line):
            assert unquote(binder) == _colab_notebook(colab, owner, name)
            pairs += 1
    assert pairs == len(every)


def test_every_lesson_links_its_own_colab_page_at_the_top_and_the_home_links_each_lesson():
    """In the rendered notebooks (the build's first cell, Colab's HTML badge) and the course homes. The
    committed notebooks, read as JSON: what a learner opens, and what `build --check` proves a fresh
    render gives (rendering all 44 here cost 29 s of `make quick`)."""
    owner, name = urlsplit(_address()).path.strip("/").removesuffix(".git").split("/")
    for lesson, path in build.lessons().items():
        for lang, solutions, target in build.targets(path):
            top = "".join(json.loads(target.read_text(encoding="utf-8"))["cells"][0]["source"])
            (url,) = re.findall(r'<a href="([^"]+)"><img src="' + re.escape(links.COLAB_BADGE), top)
            assert _colab_notebook(url, owner, name) == target.relative_to(build.ROOT).as_posix()
    for lang in build.LANGUAGES:
        home = "\n".join(cell.source for cell in build.render_home(lang).cells)
        found = [_colab_notebook(url, owner, name) for url in re.findall(r'<a href="([^"]+)">\d\d</a>', home)]
        assert found == [f"notebooks/{lang}/{build.notebook_name(path, lang)}" for path in build.lessons().values()]


def test_the_address_is_set_in_one_place():
    # pyproject.toml holds it; the README's Binder section is generated from it; nothing else spells it out
    owner_repo = urlsplit(_address()).path.strip("/").removesuffix(".git")
    places = [build.ROOT / name for name in ("Makefile", "environment.yml")]
    places += sorted((build.ROOT / "course_utils").rglob("*.py")) + sorted((build.ROOT / ".github").rglob("*.yml"))
    spelled = [p.relative_to(build.ROOT).as_posix() for p in places if owner_repo in p.read_text(encoding="utf-8")]
    assert not spelled, f"the repository address is written out in {spelled}: read it from pyproject.toml instead"
    readme = README.read_text(encoding="utf-8")
    outside = readme.replace(_section(readme), "")
    assert owner_repo not in outside, "README.md spells the address out of its generated Binder section"


@pytest.mark.parametrize(
    "address, expected",
    [
        ("https://github.com/someone/attention-course", ("someone", "attention-course")),
        ("https://github.com/someone/attention-course.git", ("someone", "attention-course")),
        ("https://github.com/someone/attention-course/", ("someone", "attention-course")),
    ],
)
def test_a_github_address_gives_owner_and_name(address, expected):
    assert links.parse_repository(address) == expected


@pytest.mark.parametrize(
    "address",
    ["", "http://github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a", "https://github.com/a/b/tree/main"],
)
def test_an_address_binder_cannot_build_from_is_refused(address):
    with pytest.raises(SystemExit, match="Repository"):
        links.parse_repository(address)


def test_the_section_needs_its_markers():
    with pytest.raises(SystemExit, match="binder:start"):
        links.with_section("# a README without the markers\n")


def test_the_check_command_passes_on_the_committed_readme(capsys):
    assert links.main(["--check"]) == 0


# ----------------------------------------------------------------------------- CI

WORKFLOW = build.ROOT / ".github" / "workflows" / "test.yml"


def test_the_ci_workflow_runs_make_test_and_keeps_the_artifacts():
    yaml = pytest.importorskip("yaml")  # PyYAML comes with jupytext, a runtime dependency
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)
    (job,) = workflow["jobs"].values()
    assert job["runs-on"].startswith("ubuntu")
    assert re.fullmatch(r"python:3\.11-\w+", job["container"]), "the job runs Python 3.11, in Debian"
    steps = job["steps"]
    uses = [step.get("uses", "").split("@")[0] for step in steps]
    assert uses[0] == "actions/checkout"
    cache = steps[uses.index("actions/cache")]
    assert cache["with"]["path"] == job["env"]["PIP_CACHE_DIR"], "the cache keeps the folder pip downloads to"
    # CI installs as a learner does, with pip's default settings: the torch lock names its own index
    assert not any(name.startswith("PIP_") and "INDEX" in name for name in job["env"])
    assert "requirements/*.lock" in cache["with"]["key"], "a new lock is a new download"
    runs = [step["run"] for step in steps if "run" in step]
    assert runs == ["bash .ci/run"]
    ci_run = (build.ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install" in ci_run and "chromium" in ci_run and "fonts-wqy-microhei" in ci_run
    assert ci_run.rstrip().endswith("make test")
    upload = steps[uses.index("actions/upload-artifact")]
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == "test-artifacts"
    assert uses.index("actions/upload-artifact") > steps.index(next(s for s in steps if "run" in s))


# ----------------------------------------------------------------------------- a school's JupyterHub

def test_a_hub_link_pulls_the_student_repository_and_opens_the_lesson():
    url = links.hub_url("https://hub.example.edu/", "https://github.com/you/attention-student.git",
                        "notebooks/zh/02_masking.ipynb", branch="spring")
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    query = parse_qs(parts.query, strict_parsing=True)
    assert query == {"repo": ["https://github.com/you/attention-student.git"], "branch": ["spring"],
                     "urlpath": ["lab/tree/attention-student/notebooks/zh/02_masking.ipynb?autodecode"]}


def test_the_hub_table_has_every_lesson_in_both_languages():
    table = links.hub_table("https://hub.example.edu", "https://github.com/you/attention-student")
    for lesson, lang, notebook in links.notebooks():
        assert links.hub_url("https://hub.example.edu", "https://github.com/you/attention-student", notebook) in table
    assert table.count("\n| ") == len(build.lessons()) + 1


@pytest.mark.parametrize("hub, repo", [("hub.example.edu", "https://github.com/a/b"),
                                       ("https://hub.example.edu/?x=1", "https://github.com/a/b"),
                                       ("https://hub.example.edu", "git@github.com:a/b.git"),
                                       ("https://hub.example.edu", "https://github.com/")])
def test_a_wrong_hub_or_repository_address_is_named(hub, repo):
    with pytest.raises(SystemExit, match="--hub|--repo"):
        links.hub_url(hub, repo, "notebooks/en/00_tensor_shapes.ipynb")


def test_hub_and_repo_go_together(capsys):
    with pytest.raises(SystemExit):
        links.main(["--hub", "https://hub.example.edu"])
    assert "--hub and --repo go together" in capsys.readouterr().err


def test_the_lessons_colab_badge_needs_no_network():
    """Read offline in JupyterLab, a lesson's top line shows its Colab badge from the notebook itself
    (a data: image), never a remote image that would be broken there."""
    import base64

    assert links.COLAB_BADGE.startswith("data:image/svg+xml;base64,")
    svg = base64.b64decode(links.COLAB_BADGE.split(",", 1)[1]).decode()
    assert svg.startswith("<svg") and "Colab" in svg and "http" not in svg.replace("http://www.w3.org/2000/svg", "")
    for lesson in build.lessons():
        for lang in build.LANGUAGES:
            badge = build.colab_link(lesson, lang)
            assert not re.search(r'<img src="https?:', badge), badge
