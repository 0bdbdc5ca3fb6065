"""The environment a fresh clone installs is exactly the locked one, and every description of it
agrees: pyproject.toml (the ranges), requirements/torch.lock, lab.lock, triton.lock and test.lock (the
exact versions, with hashes, that `make lab`, `make triton` and `make setup` install), environment.yml
and postBuild (Binder and conda) and the Makefile. Also: the kernel path a test run asks torch for is
the one it gets."""

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import torch
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "requirements"))
import lock  # requirements/lock.py: `make lock`

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path):
    """[(name, version, marker or None, number of hashes)] of a lock file."""
    found = []
    for lines in lock.entries(path.read_text()).values():
        requirement = Requirement(lines[0].rstrip("\\ "))
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{path.name}: {lines[0]} is not an exact pin"
        hashes = sum(line.strip().startswith("--hash=sha256:") for line in lines)
        found.append((_name(requirement.name), spec.version, requirement.marker, hashes))
    return found


LAB, TEST, GRADE, TRITON = pins(lock.LAB), pins(lock.TEST), pins(lock.GRADE), pins(lock.TRITON)
LOCKED_TORCH = re.search(r"^LOCKED_TORCH := torch==(\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)


def test_the_parser_sees_what_is_there():
    # guards the tests below against a parser that finds nothing and so misses nothing
    assert {"numpy", "jupyterlab", "ipywidgets", "matplotlib"} <= {name for name, *_ in LAB}
    assert {"pytest", "nbval", "playwright"} <= {name for name, *_ in TEST}


def test_every_pin_is_exact_and_hashed_and_torch_is_left_to_its_own_lock():
    for name, version, _, hashes in LAB + TEST + TRITON:
        assert hashes >= 1, f"{name}=={version} has no hash"
    assert "torch" not in {name for name, *_ in LAB + TEST + TRITON}, "torch belongs to requirements/torch.lock"
    for path in (lock.LAB, lock.TEST, lock.TRITON):
        assert f"(torch=={LOCKED_TORCH}," in path.read_text().split("\n", 3)[2], \
            f"{path.name} was locked for another torch"
    # (tests/test_torch_install.py: what torch.lock pins, and that each install resolves it to the CPU build)
    pinned = set(re.findall(r"^torch==([^+\s;]+)", lock.TORCH.read_text(), re.MULTILINE))
    assert pinned == {LOCKED_TORCH}, f"torch.lock pins {pinned}, the Makefile's LOCKED_TORCH {LOCKED_TORCH}"


def test_triton_is_left_to_its_own_lock_and_extra():
    assert [name for name, *_ in TRITON] == ["triton"], "triton.lock holds Triton alone"
    assert "triton" not in {name for name, *_ in LAB + TEST}
    assert not any("triton" in r for r in PROJECT["dependencies"]), "Triton is an extra, installed on demand"
    (extra,) = PROJECT["optional-dependencies"]["triton"]
    for _, version, marker, _ in TRITON:
        assert Requirement(extra).specifier.contains(version) and str(marker), "triton.lock: Linux only, in range"


def _locked_versions(entries, name):
    return [(version, marker) for locked, version, marker, _ in entries if locked == name]


@pytest.mark.parametrize("extra", [None, "lab", "test", "triton"])
def test_every_dependency_in_pyproject_is_locked_within_its_range(extra):
    requirements = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    where = {"test": LAB + TEST, "triton": TRITON}.get(extra, LAB)
    for requirement in map(Requirement, requirements):
        if _name(requirement.name) == "torch":
            continue
        versions = _locked_versions(where, _name(requirement.name))
        assert versions, f"{requirement.name} is in pyproject.toml but not in the lock: run `make lock`"
        for version, _ in versions:
            assert requirement.specifier.contains(version, prereleases=True), \
                f"the lock has {requirement.name}=={version}, outside pyproject.toml's {requirement}: run `make lock`"


def test_the_test_lock_holds_only_what_the_lab_lock_lacks():
    assert not {name for name, *_ in LAB} & {name for name, *_ in TEST}


def test_the_grade_lock_is_the_lab_locks_versions_for_what_a_grader_needs_and_torchs_cpu_build():
    """What the autograders install (course_teacher/platforms): pyproject's dependencies (no JupyterLab,
    no test tool), every one at the lab lock's version, and torch's CPU build at the Makefile's pin."""
    lab = {(name, version) for name, version, *_ in LAB}
    assert ("torch", f"{LOCKED_TORCH}+cpu") in {(name, version) for name, version, *_ in GRADE}
    lab |= {(name, version) for name, version, *_ in TRITON}  # the graders run lesson 09's checks too
    for name, version, _, hashes in GRADE:
        assert hashes >= 1, f"{name}=={version} has no hash"
        assert name == "torch" or (name, version) in lab, f"grade.lock has {name}=={version}, lab.lock another"
    names = {name for name, *_ in GRADE}
    assert {"numpy", "matplotlib", "ipykernel", "nbformat", "ipywidgets"} <= names
    assert not names & {"jupyterlab", "jupyter-server", "jupytext", "nbclient", "pytest", "notebook"}
    required = {_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert required <= names


def test_this_environment_has_exactly_the_locked_versions():
    # what `make setup` installed: on a fresh clone (CI) this proves the lock was installed
    for name, version, marker, _ in LAB + TEST + TRITON:
        if marker is None or Marker(str(marker)).evaluate():
            assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}, locked {version}"


def test_the_makefile_installs_the_locks_with_their_hashes():
    makefile = (ROOT / "Makefile").read_text()
    for variable, path in (("LAB_LOCK", lock.LAB), ("TEST_LOCK", lock.TEST), ("TRITON_LOCK", lock.TRITON),
                           ("TORCH_LOCK", lock.TORCH)):
        assert f"{variable} := {path.relative_to(ROOT)}" in makefile
        assert f"--require-hashes --no-deps -r $({variable})" in makefile
    assert "install --quiet --no-deps -e ." in makefile and "$(PIP) check" in makefile


def test_pip_finds_nothing_missing_or_broken():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_environment_yml_installs_the_lab_lock_and_binder_the_package():
    # Binder (repo2docker) reads environment.yml as YAML; a local `-r` makes it copy the repository
    # in before building, and its postBuild installs this package (not hash-checkable, so apart).
    yaml = pytest.importorskip("yaml")  # PyYAML comes with jupytext, a runtime dependency
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert environment["name"] and environment["channels"] == ["conda-forge"]
    conda = [d for d in environment["dependencies"] if isinstance(d, str)]
    (pip,) = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert sorted(c.split("=")[0] for c in conda) == ["pip", "python", "pytorch"] and "cpu" in " ".join(conda)
    assert pip == [f"-r {lock.LAB.relative_to(ROOT)}"], "every pip package of Binder comes from the lab lock"
    post_build = (ROOT / "postBuild").read_text()
    assert "pip install --no-cache-dir --no-deps -e ." in post_build and os.access(ROOT / "postBuild", os.X_OK)
    # lesson 09 on Binder (where the lesson sends macOS and Windows learners): Triton, from its lock
    assert f"pip install --no-cache-dir --require-hashes --no-deps -r {lock.TRITON.relative_to(ROOT)}" in post_build


@pytest.mark.trains  # selected with the training tests, so it runs under every path they run under
def test_the_kernel_path_asked_for_is_the_one_torch_runs():
    # `make test` and `make test-paths` prove facts on several CPU kernel paths by setting
    # ATEN_CPU_CAPABILITY; a torch that ignored it would run the native path twice, unnoticed.
    asked = os.environ.get("ATEN_CPU_CAPABILITY")
    if not asked:
        pytest.skip("ATEN_CPU_CAPABILITY is not set: torch runs the CPU's native path")
    assert torch.backends.cpu.get_cpu_capability().lower() == asked.lower()


def test_torch_lock_and_triton_lock_are_what_make_lock_writes(monkeypatch, tmp_path):
    """lock.py's own writers, given the resolutions the committed locks hold (PyPI's hashes of the
    macOS and Windows wheels as committed: `make lock` asks PyPI), write the committed files."""
    committed = lock.TORCH.read_text()
    pypi = re.search(r"^torch==[^+\s]+ ; sys_platform == 'darwin'.*", committed, re.M | re.S).group(0)
    monkeypatch.setattr(lock, "pypi_cpu_hashes", lambda version: re.findall(r"sha256:(\w+)", pypi))
    monkeypatch.setattr(lock, "TORCH", tmp_path / "torch.lock")
    linux = re.search(r"^torch==\S+\+cpu ; (.+?) \\$", committed, re.M).group(1)
    monkeypatch.setattr(lock, "linux_marker", lambda wheels: linux)  # written from the wheels it was locked with
    grade = lock.entries(lock.GRADE.read_text())
    lock.write_torch_lock(grade["torch"], f"torch=={LOCKED_TORCH}")
    assert (tmp_path / "torch.lock").read_text() == committed
    runtime = {**lock.entries(lock.LAB.read_text()), **lock.entries(lock.TRITON.read_text())}
    rest, on_demand = lock.split_on_demand(runtime)
    assert rest == lock.entries(lock.LAB.read_text()) and on_demand == lock.entries(lock.TRITON.read_text())


def test_the_linux_marker_names_the_pythons_and_machines_a_folder_of_wheels_holds(tmp_path):
    assert lock.linux_marker("https://download.pytorch.org/whl/cpu/torch/") == "sys_platform == 'linux'"
    for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_aarch64.whl", "torch-2.13.0-cp311-none-macosx_11_0_arm64.whl"):
        (tmp_path / name).touch()
    assert lock.linux_marker(str(tmp_path)) == (
        "sys_platform == 'linux' and (python_version == '3.11' and platform_machine == 'x86_64' or "
        "python_version == '3.12' and platform_machine == 'aarch64')")
