"""No link a learner can follow from the student side reaches a solution.

Every Binder and Colab link the student side prints (the README's Binder section, the student
README, the Colab badge the build puts at the top of each student notebook and the home's line of
Colab links, the guide's) is parsed back to (repository, branch, path) and followed into the tree
`make release` commits as the branch `student` (here into a bare repository of the test's own): the
path is there, and the tree holds nothing of the teacher's. `make hub-links` refuses a repository
whose branch holds the solutions, reading its tree with git."""

import re
import subprocess
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from course_teacher import build, links, release

URL = re.compile(r"""https://(?:mybinder\.org|colab\.research\.google\.com)/[^\s)"'<>]+""")


def _git(*arguments, cwd=None):
    return subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=True).stdout


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory):
    """(bare repository, {path: blob}) of the student branch as `make release` writes it."""
    bare = tmp_path_factory.mktemp("course.git")
    _git("init", "--quiet", "--bare", str(bare))
    commit = release.student_branch(git_dir=bare)
    assert _git("--git-dir", str(bare), "rev-parse", links.STUDENT_BRANCH).strip() == commit
    listing = _git("--git-dir", str(bare), "-c", "core.quotepath=off", "ls-tree", "-r", links.STUDENT_BRANCH)  # 首页.ipynb
    tree = {line.split("\t", 1)[1]: line.split()[2] for line in listing.splitlines()}
    return bare, tree


def opened(url):
    """(owner, name, branch, path) that a Binder or Colab link opens."""
    parts = urlsplit(url)
    path = parts.path.strip("/").split("/")
    if parts.netloc == "mybinder.org":
        assert path[:2] == ["v2", "gh"] and len(path) == 5, url
        (urlpath,) = parse_qs(parts.query)["urlpath"]
        return path[2], path[3], path[4], urlpath.removeprefix("lab/tree/")
    assert path[0] == "github" and path[3] == "blob", url
    return path[1], path[2], path[4], unquote("/".join(path[5:]))


def printed_links():
    """{where: [urls]} of every Binder and Colab link the student side prints."""
    found = {
        "README.md": URL.findall((build.ROOT / "README.md").read_text(encoding="utf-8")),
        "the student README": URL.findall(release.student_readme()),
        "guide/en.md": URL.findall((build.ROOT / "guide" / "en.md").read_text(encoding="utf-8")),
        "guide/zh.md": URL.findall((build.ROOT / "guide" / "zh.md").read_text(encoding="utf-8")),
    }
    for lang in build.LANGUAGES:
        found[f"the {lang} home"] = URL.findall(build.colab_links(lang))
        for lesson in build.lessons():
            found[f"lesson {lesson}'s badge ({lang})"] = URL.findall(build.colab_link(lesson, lang))
    return {where: [u for u in urls if u not in (links.BADGE, links.COLAB_BADGE_WEB)] for where, urls in found.items()}


def test_the_student_branch_holds_the_student_bundle_and_nothing_of_the_teachers(student_tree):
    _, tree = student_tree
    assert set(tree) == set(release.student_files())
    assert not [path for path in tree if path.startswith(links.TEACHERS_PATHS)]


def test_every_student_link_opens_a_file_of_the_student_branch(student_tree):
    bare, tree = student_tree
    owner, name = links.repository()
    every = printed_links()
    assert all(every[f"lesson {lesson}'s badge ({lang})"] for lesson in build.lessons() for lang in build.LANGUAGES)
    assert len(every["the student README"]) == 2 * 2 * len(build.lessons())  # Binder and Colab, both languages
    for where, urls in every.items():
        for url in urls:
            o, n, branch, path = opened(url)
            assert (o, n, branch) == (owner, name, links.STUDENT_BRANCH), f"{where}: {url} opens {o}/{n}@{branch}"
            assert path in tree, f"{where}: {url} opens {path}, which the student branch lacks"
            shown = _git("--git-dir", str(bare), "cat-file", "blob", tree[path])
            assert "solution" not in path and shown == (build.ROOT / path).read_text(encoding="utf-8"), url


def test_the_link_check_sees_a_link_to_the_main_branch():
    # the check above must be able to fail: the repository's own branch holds the solutions
    main = links.colab_url("notebooks/solutions/en/01_attention_basics.ipynb")
    assert opened(main)[2] == links.BRANCH != links.STUDENT_BRANCH


def test_a_second_release_of_the_same_files_adds_no_commit(student_tree):
    bare, _ = student_tree
    first = _git("--git-dir", str(bare), "rev-parse", links.STUDENT_BRANCH).strip()
    assert release.student_branch(git_dir=bare) == first


def _repository_with(folder, files):
    _git("init", "--quiet", "-b", "main", str(folder))
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    _git("add", "-A", cwd=folder)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "x", cwd=folder)
    return folder.as_uri()


def test_hub_links_refuse_a_repository_that_holds_the_solutions(tmp_path, student_tree):
    teachers = _repository_with(tmp_path / "course", {"notebooks/en/01.ipynb": "{}",
                                                      "notebooks/solutions/en/01.ipynb": "{}"})
    with pytest.raises(SystemExit, match=r"holds the teacher's files, the solutions among them \(notebooks/solutions/"):
        links.refuse_teachers_repository(teachers, "main")
    assert links.teachers_files(student_tree[0].as_uri(), links.STUDENT_BRANCH) == []
    links.refuse_teachers_repository(student_tree[0].as_uri(), links.STUDENT_BRANCH)  # the student branch passes


def test_hub_links_name_a_branch_they_cannot_read(tmp_path):
    with pytest.raises(SystemExit, match="could not read the branch 'nope'"):
        links.teachers_files(_repository_with(tmp_path / "r", {"a": "b"}), "nope")


def test_make_hub_links_prints_nothing_for_a_teachers_repository(monkeypatch, capsys):
    monkeypatch.setattr(links, "teachers_files", lambda repo, branch: ["notebooks/solutions/en/01.ipynb"])
    with pytest.raises(SystemExit, match="solutions"):
        links.main(["--hub", "https://hub.example.edu",
                    "--repo", "https://github.com/attention-course/attention-course"])
    assert "git-pull" not in capsys.readouterr().out
