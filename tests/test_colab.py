"""Google Colab: every lesson's first code cell installs the course on Colab, at the notebook's
version, and turns on Colab's widget manager; anywhere else it does nothing. The cell runs here with
a fake ``google.colab`` module (and pip and the installed version faked), as Colab would run it."""

import importlib.metadata
import re
import subprocess
import sys
import types
from urllib.parse import urlsplit

import pytest

from course_teacher import build, links, release


class Colab:
    """A fake google.colab: records the calls the cell makes to Colab and to pip."""

    def __init__(self, monkeypatch, installed=None, pip_fails=False):
        self.widget_manager, self.pip = 0, []
        google, colab, output = (types.ModuleType(name) for name in ("google", "google.colab", "google.colab.output"))
        output.enable_custom_widget_manager = self._enable
        colab.output, google.colab = output, colab
        for name, module in (("google", google), ("google.colab", colab), ("google.colab.output", output)):
            monkeypatch.setitem(sys.modules, name, module)
        self._installed, self._pip_fails = installed, pip_fails
        monkeypatch.setattr(importlib.metadata, "version", self._version)
        monkeypatch.setattr(subprocess, "run", self._run)

    def _enable(self):
        self.widget_manager += 1

    def _version(self, name):
        if name != "course_utils" or self._installed is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return self._installed

    def _run(self, command, check=False, **_):
        self.pip.append(command)
        if self._pip_fails and check:
            raise subprocess.CalledProcessError(1, command)
        return subprocess.CompletedProcess(command, 0)


def run_cell(lang="en"):
    exec(compile(links.colab_cell(lang), "<the lesson's first cell>", "exec"), {})


def test_elsewhere_the_cell_does_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("the cell ran a command off Colab"))
    for lang in build.LANGUAGES:
        run_cell(lang)


@pytest.mark.parametrize("lang", build.LANGUAGES)
@pytest.mark.parametrize("installed", [None, "0.0.1"])
def test_on_colab_it_installs_the_notebooks_version_and_turns_on_the_widget_manager(monkeypatch, lang, installed):
    colab = Colab(monkeypatch, installed=installed)
    run_cell(lang)
    (command,) = colab.pip
    assert command[:5] == [sys.executable, "-m", "pip", "install", "--quiet"] and len(command) == 6
    assert command[5] == links.student_bundle_url(links.version())
    assert colab.widget_manager == 1


def test_on_colab_with_this_version_installed_it_only_turns_on_the_widget_manager(monkeypatch):
    colab = Colab(monkeypatch, installed=links.version())
    run_cell()
    assert colab.pip == [] and colab.widget_manager == 1


def test_a_failed_install_stops_the_cell_with_pips_error(monkeypatch):
    colab = Colab(monkeypatch, pip_fails=True)
    with pytest.raises(subprocess.CalledProcessError):
        run_cell()
    assert colab.widget_manager == 0


def test_the_install_is_the_student_bundle_of_this_version_on_the_repositorys_release():
    """Parsed back: github.com/OWNER/REPO/releases/download/v<version>/<make release's student zip>."""
    owner, name = links.repository()
    parts = urlsplit(links.student_bundle_url())
    assert (parts.scheme, parts.netloc, parts.query) == ("https", "github.com", "")
    assert parts.path.split("/")[1:] == [owner, name, "releases", "download", f"v{release.version()}",
                                         f"{release.NAME}-student-{release.version()}.zip"]
    assert links.version() == release.version()


@pytest.mark.parametrize("lang", build.LANGUAGES)
def test_every_lessons_first_code_cell_begins_with_the_install(lang):
    for lesson, path in build.lessons().items():
        notebook = build.render(build.jupytext.read(path), lang, False, lesson)
        first = next(cell for cell in notebook.cells if cell.cell_type == "code")
        assert first.source.startswith(links.colab_cell(lang) + "\n\n"), lesson
        assert f'setup(lang="{lang}")' in first.source, lesson
        compile(first.source, lesson, "exec")
        # the comments are in the notebook's language
        assert bool(re.search(r"[\u4e00-\u9fff]", links.colab_cell(lang))) == (lang == "zh")
