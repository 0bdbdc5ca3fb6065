"""Every install of torch gets its CPU build, from hashes, as pip with its default settings resolves it.

Our machines carry a local CPU wheel of torch (pip's find-links) that satisfies a bare `torch==X`;
a learner's pip has no such folder and takes PyPI's Linux wheel, the CUDA build. So these tests run
pip without any configuration (PIP_CONFIG_FILE=/dev/null, no PIP_* variable) and offline, against
two indexes built here: "PyPI", whose torch==X for Linux is a stand-in CUDA build (a tiny wheel that
requires NVIDIA's libraries, as the real one does), and "PyTorch's CPU index", holding the real CPU
wheel of /opt/wheels under its own name. Each install command the course gives (the Makefile's,
hence the student bundle's; the READMEs' without make; every autograder's) is resolved by
`pip install --dry-run --report`, and the report must show the CPU build with one of the lock's hashes.
"""

import hashlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from course_teacher import platforms

ROOT = Path(__file__).resolve().parent.parent
TORCH_LOCK = ROOT / "requirements" / "torch.lock"
PYTORCH_INDEX = "https://download.pytorch.org/whl/cpu"
LOCAL_WHEELS = Path("/opt/wheels")


def lock_entries(text):
    """[(Requirement, [sha256])] of a requirements file's entries (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        spec, *hashes = re.split(r"\s+--hash=sha256:", line)
        found.append((Requirement(spec.strip()), [h.strip() for h in hashes]))
    return found


def problems(report, allowed_hashes):
    """What is wrong with the torch a pip report installs: [] when it is a CPU build, pinned, from a
    hash of the lock."""
    chosen = [item for item in report["install"] if item["metadata"]["name"].lower() == "torch"]
    if len(chosen) != 1:
        return [f"the report installs {len(chosen)} torch"]
    item = chosen[0]
    found = []
    version, requires = item["metadata"]["version"], item["metadata"].get("requires_dist", [])
    if sys.platform == "linux" and not version.endswith("+cpu"):
        found.append(f"torch {version} is not the CPU build (+cpu)")
    if any(re.match(r"(nvidia|cuda|triton)", r, re.I) for r in requires):
        found.append(f"torch {version} requires CUDA libraries: {[r for r in requires if 'nvidia' in r][:3]}")
    digest = item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
    if digest not in allowed_hashes:
        found.append(f"torch's file {item['download_info']['url']} has sha256 {digest}, not one of the lock's")
    return found


def _cpu_wheel():
    wheels = sorted(LOCAL_WHEELS.glob("torch-*+cpu-*.whl")) if LOCAL_WHEELS.is_dir() else []
    if not wheels:
        pytest.skip("no local CPU wheel of torch (/opt/wheels) to stand in for PyTorch's CPU index")
    return wheels[0]


def _fake_cuda_wheel(folder, version, tag):
    """A wheel named as PyPI's Linux torch, whose metadata requires NVIDIA's libraries."""
    name = f"torch-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl"
    info = f"torch-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
                            "Requires-Dist: nvidia-cudnn-cu13==9.13.0.50; platform_system == \"Linux\"\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                         f"Tag: {tag}-{tag}-manylinux_2_28_x86_64\n",
        "torch/__init__.py": "",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(path, text)
    (folder / name).write_bytes(buffer.getvalue())
    return folder / name


def _index(folder, wheels):
    """A PEP 503 simple index in `folder` listing `wheels` with their sha256, as real indexes do."""
    page = folder / "torch"
    page.mkdir(parents=True)
    links = "".join(f'<a href="{wheel.resolve().as_uri()}#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}">'
                    f"{wheel.name}</a>\n" for wheel in wheels)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return folder.resolve().as_uri()


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """(PyPI stand-in, PyTorch CPU index stand-in) as file:// addresses."""
    cpu = _cpu_wheel()
    version = re.match(r"torch-([^+-]+)", cpu.name).group(1)
    tag = cpu.name.split("-")[2]
    root = tmp_path_factory.mktemp("indexes")
    (root / "files").mkdir()
    pypi = _index(root / "pypi", [_fake_cuda_wheel(root / "files", version, tag)])
    pytorch = _index(root / "pytorch", [cpu])
    return pypi, pytorch


def resolve(arguments, indexes, cwd):
    """pip's report of `pip install ARGUMENTS` with its default settings (no configuration, no PIP_*
    variable), offline: PyPI and PyTorch's CPU index are the local stand-ins. A requirements file's
    own --index-url / --extra-index-url naming PyTorch's index is pointed at its stand-in."""
    pypi, pytorch = indexes
    arguments = [a.replace(PYTORCH_INDEX, pytorch) for a in arguments]
    rewritten = []
    for i, argument in enumerate(arguments):
        if i and arguments[i - 1] == "-r":
            copy = Path(cwd, "_resolved_" + Path(argument).name)
            copy.write_text(Path(cwd, argument).read_text().replace(PYTORCH_INDEX, pytorch))
            argument = str(copy)
        rewritten.append(argument)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environment.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=pypi, PIP_DISABLE_PIP_VERSION_CHECK="1")
    report = Path(cwd, "_report.json")
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), *rewritten]
    result = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{shlex.join(command)}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"
    return json.loads(report.read_text())


def _lock_hashes():
    return {h for requirement, hashes in lock_entries(TORCH_LOCK.read_text()) for h in hashes
            if requirement.name == "torch"}


def test_the_checker_refuses_pypis_cuda_build_and_an_unpinned_torch(indexes, tmp_path):
    # what a bare pin gets from pip's default index on Linux: the CUDA build, which the checker names
    report = resolve(["--no-deps", "torch==" + re.match(r"torch-([^+-]+)", _cpu_wheel().name).group(1)],
                     indexes, tmp_path)
    found = problems(report, _lock_hashes())
    assert any("not the CPU build" in p for p in found) and any("CUDA" in p for p in found), found
    assert any("not one of the lock's" in p for p in found)


def test_the_torch_lock_pins_a_cpu_build_for_every_platform_with_hashes():
    entries = lock_entries(TORCH_LOCK.read_text())
    assert f"--extra-index-url {PYTORCH_INDEX}" in TORCH_LOCK.read_text().splitlines()
    assert entries and all(requirement.name == "torch" for requirement, _ in entries)
    for platform in ("linux", "darwin", "win32"):
        chosen = [(r, h) for r, h in entries if r.marker is None or r.marker.evaluate({"sys_platform": platform})]
        assert len(chosen) == 1, f"torch.lock has {len(chosen)} entries for {platform}"
        (requirement, hashes), = chosen
        (spec,) = requirement.specifier
        assert spec.operator == "==" and hashes, f"{platform}: {requirement} is not pinned with hashes"
        # PyPI's Linux wheel is the CUDA build; its macOS and Windows wheels are the CPU ones
        if platform == "linux":
            assert spec.version.endswith("+cpu"), f"Linux gets {requirement}, not the CPU build"


def test_the_locks_linux_hash_is_the_cpu_wheels():
    wheel = _cpu_wheel()
    linux = [h for r, h in lock_entries(TORCH_LOCK.read_text())
             if Marker(str(r.marker)).evaluate({"sys_platform": "linux"})]
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() in linux[0]
    grade = {h for r, hashes in lock_entries((ROOT / "requirements" / "grade.lock").read_text()) if r.name == "torch"
             for h in hashes}
    assert grade <= set(linux[0]), "grade.lock and torch.lock pin different CPU builds"


def _make_plan(target, cwd=ROOT):
    plan = subprocess.run(["make", "-n", "-B", target, "VENV=/nonexistent/venv"], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)
    assert plan.returncode == 0, plan.stderr
    return plan.stdout


def _torch_installs(plan):
    """The arguments after `pip install` of every command of `plan` that installs torch."""
    found = []
    for line in plan.splitlines():
        words = shlex.split(line) if "pip" in line and " install " in line else []
        if "install" in words and ("torch" in line):
            found.append(words[words.index("install") + 1:])
    return found


@pytest.mark.parametrize("target", ["lab", "setup"])
def test_the_makefiles_torch_install_resolves_to_the_cpu_build(target, indexes, tmp_path):
    installs = _torch_installs(_make_plan(target))
    assert len(installs) == 1, installs
    (arguments,) = installs
    assert "--require-hashes" in arguments, f"make {target} installs torch without hashes: {arguments}"
    (tmp_path / "requirements").mkdir()
    for name in ("torch.lock",):
        (tmp_path / "requirements" / name).write_text((ROOT / "requirements" / name).read_text())
    report = resolve([a for a in arguments if a != "--quiet"], indexes, tmp_path)
    assert problems(report, _lock_hashes()) == []


def test_the_readmes_commands_without_make_install_torch_from_its_lock(indexes, tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "torch.lock").write_text(TORCH_LOCK.read_text())
    for readme in ("README.md", "README.student.md"):
        lines = [line.split("#")[0] for line in (ROOT / readme).read_text(encoding="utf-8").splitlines()
                 if re.search(r"pip(\.exe)? install .*torch", line)]
        assert lines, f"{readme} gives no command that installs torch"
        for line in lines:
            words = shlex.split(line)
            arguments = words[words.index("install") + 1:]
            assert "--require-hashes" in arguments and "requirements/torch.lock" in arguments, f"{readme}: {line}"
            assert problems(resolve(arguments, indexes, tmp_path), _lock_hashes()) == []


def test_every_autograder_installs_torchs_cpu_build_from_its_hashes(indexes, tmp_path):
    """autograder.py's own pip call: torch.txt (grade.lock's torch) from settings' torch_index alone."""
    text = (ROOT / "course_teacher" / "platforms" / "autograder.py").read_text()
    call = r'"--require-hashes",\s*"--no-deps",\s*"--index-url",\s*SETTINGS\["torch_index"\],\s*"-r",\s*str\(HERE / "torch.txt"\)'
    assert re.search(call, text), "autograder.py no longer installs torch.txt as this test resolves it"
    grade = (ROOT / "requirements" / "grade.lock").read_text()
    entry = re.search(r"^torch==.*?(?=^\S)", grade, re.S | re.M).group(0)
    (tmp_path / "torch.txt").write_text(entry)
    report = resolve(["--require-hashes", "--no-deps", "--index-url", platforms.TORCH_INDEX, "-r", "torch.txt"],
                     indexes, tmp_path)
    assert problems(report, _lock_hashes()) == []


def test_where_the_lock_holds_no_torch_make_lab_says_so(tmp_path):
    """A Python or machine that no line of torch.lock names installs no torch there: `make lab` then
    stops at once with what to do, instead of a broken environment. Here the guard of `make -n lab`
    runs with an interpreter that cannot see torch (python -S: no site-packages)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    plan = subprocess.run(["make", "-n", "-B", "lab", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True).stdout
    guard = re.search(r"^.*find_spec\('torch'\).*?exit 2; }$", plan, re.M | re.S).group(0)
    done = subprocess.run(["bash", "-c", guard], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "has no CPU build of torch for Python" in done.stdout, done.stdout + done.stderr
    assert "PYTHON=python3.11" in done.stdout and "make lock" in done.stdout
    # with torch importable, the guard lets the install go on
    seen = subprocess.run(["bash", "-c", guard.replace(str(venv / "bin" / "python"), sys.executable)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert seen.returncode == 0, seen.stdout
