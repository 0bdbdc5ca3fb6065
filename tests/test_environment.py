"""The Binder/conda environment and the pip package describe the same course, and the kernel
path a test run asks torch for is the one it gets.

environment.yml holds exactly pyproject.toml's runtime dependencies (plus python and pip): Binder
builds it for learners, who never run the test tools of the `test` extra, and each package less
makes that build quicker. The tests (`make test`) install the `test` extra with pip."""

import os
import re
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name, where they differ


def _name(requirement):
    return re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def environment_names():
    """The package names of environment.yml's dependencies (conda's and pip's), less this package."""
    names = set()
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("\ndependencies:") :].splitlines():
        match = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if match and not line.strip().startswith("- -e"):
            names.add(_name(match.group(1)))
    return names


def test_every_runtime_dependency_is_in_environment_yml():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    missing = {
        _name(r) for r in project["dependencies"] if CONDA_NAMES.get(_name(r), _name(r)) not in environment_names()
    }
    assert not missing, f"environment.yml lacks {sorted(missing)} (runtime dependencies in pyproject.toml)"


def _runtime_names(project):
    return {CONDA_NAMES.get(_name(r), _name(r)) for r in project["dependencies"]}


def test_environment_yml_has_nothing_beyond_the_runtime_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = environment_names() - {"python", "pip"} - _runtime_names(project)
    assert not extra, f"environment.yml has {sorted(extra)}, which pyproject.toml does not list as runtime dependencies"


def test_environment_yml_leaves_the_test_tools_out():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    test_tools = {_name(r) for r in project["optional-dependencies"]["test"]}
    assert test_tools, "the parser found no test extra in pyproject.toml"
    assert not test_tools & environment_names(), f"Binder needs no test tools: {sorted(test_tools & environment_names())}"


def test_environment_installs_this_package_and_the_cpu_build():
    text = (ROOT / "environment.yml").read_text()
    assert "- -e ." in text and "cpu" in text


def test_the_parser_sees_what_is_there():
    # guards the test above against a parser that finds nothing and so misses nothing
    assert {"pytorch", "numpy", "jupyterlab", "mplfonts", "ipywidgets"} <= environment_names()


@pytest.mark.trains  # selected with the training tests, so it runs under every path they run under
def test_the_kernel_path_asked_for_is_the_one_torch_runs():
    # `make test` and `make test-paths` prove facts on several CPU kernel paths by setting
    # ATEN_CPU_CAPABILITY; a torch that ignored it would run the native path twice, unnoticed.
    asked = os.environ.get("ATEN_CPU_CAPABILITY")
    if not asked:
        pytest.skip("ATEN_CPU_CAPABILITY is not set: torch runs the CPU's native path")
    assert torch.backends.cpu.get_cpu_capability().lower() == asked.lower()


def test_environment_yml_is_what_binder_can_read():
    # Binder (repo2docker) reads it as YAML: a name, conda-forge, and a pip list that installs this
    # package from the repository (a local `-e .` makes repo2docker copy the repository in first).
    yaml = pytest.importorskip("yaml")  # PyYAML comes with jupytext, a runtime dependency
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert environment["name"] and environment["channels"] == ["conda-forge"]
    (pip,) = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert "-e ." in pip and "pip" in environment["dependencies"]
