"""Write the course's lock files from pyproject.toml (`make lock`; `make lock UPGRADE=1` to move to
the newest versions its ranges allow).

Five files, resolved together so that a package two of them need has one version:
- torch.lock: torch's CPU build, pinned with its hashes, and the index it comes from (PyTorch's CPU
  index, where Linux's CPU wheels are; on PyPI, pip's default, Linux's torch is the CUDA build, 0.5
  GB plus gigabytes of NVIDIA libraries a CPU learner never uses). macOS and Windows get PyPI's own
  wheel, which is the CPU build there: its hashes come from PyPI. Installed first, with --no-deps,
  by `make lab` and the student bundle (torch's own dependencies are in lab.lock);
- lab.lock: every package the course needs to be opened and run (pyproject.toml's dependencies
  and its `lab` extra, all the way down) but Triton: what `make lab`, the student bundle and Binder
  install;
- triton.lock: Triton (lesson 09 alone needs it: 1 GB installed, Linux only), installed by `make
  triton` when the learner reaches lesson 09, and by Binder (postBuild);
- test.lock: what the repository's own work adds on top (the `test` extra, all the way down);
- grade.lock: what a grader needs (pyproject.toml's dependencies alone: the notebooks' code and
  nbformat, no JupyterLab), and torch's CPU build itself: what the platforms' autograders install
  (course_teacher/platforms), every version the one lab.lock has.
Each pin carries the sha256 of every file of its version, for every platform, so pip installs
them with --require-hashes on Linux, macOS and Windows alike (the markers say which platform
needs which package).

torch is left out of lab.lock and test.lock: torch.lock holds the CPU build of the Makefile's TORCH,
and the locks are resolved against that build's metadata (its CPU wheel, from TORCH_WHEELS), so
they never pull the CUDA packages of the default torch. grade.lock pins that CPU build with the
hashes of the wheels TORCH_WHEELS holds. Without --upgrade, the versions already locked are kept
wherever pyproject.toml still allows them.

Needs uv (the Makefile installs it into the environment first).
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LAB, TEST, GRADE = HERE / "lab.lock", HERE / "test.lock", HERE / "grade.lock"
TORCH, TRITON = HERE / "torch.lock", HERE / "triton.lock"
#: Where pip finds torch's CPU build for Linux (and Windows); a lock line, so that the lock says it.
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
#: Where torch's files for macOS and Windows are listed with their hashes (PyPI's JSON API, PEP 691).
PYPI_TORCH = "https://pypi.org/simple/torch/"
#: The platforms whose PyPI wheel of torch is its CPU build (Linux's is the CUDA one).
PYPI_CPU_PLATFORMS = "sys_platform == 'darwin' or sys_platform == 'win32'"
#: Packages that lab.lock leaves to a lock of their own (and pyproject.toml to an extra of that name).
ON_DEMAND = ("triton",)
PYTHON = "3.11"  # the oldest Python pyproject.toml allows: markers cover the newer ones
HEADER = (
    "# {what}\n"
    "# Written by `make lock` (requirements/lock.py) from pyproject.toml: do not edit by hand.\n"
    "# {torch_line}\n"
)
NO_TORCH = "torch is not here: requirements/torch.lock pins its CPU build ({torch}, +cpu), installed first."
CPU_TORCH = "torch is its pinned CPU build ({torch}+cpu), from PyTorch's CPU index."


def entries(text):
    """{name: the entry's lines} of a lock written by uv (an entry starts at an unindented line)."""
    found, name = {}, None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if not line[0].isspace():
            name = re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0].lower().replace("_", "-")
            # one package may have two entries, e.g. a version per Python range, told apart by markers
            marker = line.split(";", 1)[1].rstrip("\\").strip() if ";" in line else ""
            name = f"{name} ; {marker}" if marker else name
            found[name] = []
        found[name].append(line)
    return found


def pin(lines):
    """An entry's "name==version", without its markers and hashes."""
    return lines[0].split(";")[0].rstrip("\\ ").lower()


def write(path, what, torch, chosen, torch_line=NO_TORCH):
    body = "\n".join("\n".join(lines) for _, lines in sorted(chosen.items()))
    path.write_text(HEADER.format(what=what, torch_line=torch_line.format(torch=torch)) + body + "\n")


def split_on_demand(runtime):
    """(runtime less the ON_DEMAND packages, those packages' entries): Triton stays out of the first
    install. (It needs nothing lab.lock lacks: `pip check` after `make triton` says so if that changes.)"""
    def on_demand(name):
        return name.split(" ;")[0] in ON_DEMAND
    return ({n: lines for n, lines in runtime.items() if not on_demand(n)},
            {n: lines for n, lines in runtime.items() if on_demand(n)})


def pypi_cpu_hashes(version):
    """The sha256 of every macOS and Windows file of torch `version` on PyPI (their CPU builds)."""
    request = urllib.request.Request(PYPI_TORCH, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    hashes = sorted(f["hashes"]["sha256"] for f in files
                    if f["filename"].startswith(f"torch-{version}-") and re.search(r"-(macosx_\w+|win_amd64)\.whl$",
                                                                                    f["filename"]))
    if not hashes:
        raise SystemExit(f"lock: PyPI lists no macOS or Windows wheel of torch {version}")
    return hashes


def linux_marker(wheels):
    """Where the Linux CPU wheels of `wheels` install: every Linux, for PyTorch's index (a page), which
    has a wheel for each Python and machine; for a folder, only the Pythons and machines of the wheels
    it holds (pip would find no file with a locked hash elsewhere, and the Makefile says so instead)."""
    folder = Path(wheels)
    if "://" in wheels or not folder.is_dir():
        return "sys_platform == 'linux'"
    tags = set()
    for wheel in folder.glob("torch-*+cpu-*.whl"):
        found = re.search(r"-cp(\d)(\d+)-[^-]+-manylinux[\w.]*?_(x86_64|aarch64)\.whl$", wheel.name)
        if found:
            tags.add((f"{found.group(1)}.{found.group(2)}", found.group(3)))
    tags = sorted(tags)
    if not tags:
        raise SystemExit(f"lock: {wheels} holds no Linux CPU wheel of torch")
    either = " or ".join(f"python_version == '{python}' and platform_machine == '{machine}'" for python, machine in tags)
    return f"sys_platform == 'linux' and ({either})" if len(tags) > 1 else f"sys_platform == 'linux' and {either}"


def write_torch_lock(cpu_entry, torch, wheels=TORCH_INDEX):
    """torch.lock: the CPU build the graders' resolution found (its wheels from TORCH_WHEELS: Linux,
    where linux_marker says), and PyPI's wheels for macOS and Windows, the index named in the file."""
    version = torch.split("==", 1)[1]
    first, *hashes = cpu_entry
    first = first.split(";")[0].rstrip("\\ ")
    lines = [f"--extra-index-url {TORCH_INDEX}",
             f"{first} ; {linux_marker(wheels)} \\", *(h.rstrip("\\ ") + " \\" for h in hashes)]
    lines[-1] = lines[-1].removesuffix(" \\")
    pypi = pypi_cpu_hashes(version)
    lines += [f"torch=={version} ; {PYPI_CPU_PLATFORMS} \\",
              *(f"    --hash=sha256:{h}" + (" \\" if i < len(pypi) - 1 else "") for i, h in enumerate(pypi))]
    header = HEADER.format(what="torch's CPU build, pinned with its hashes: installed first (--no-deps), "
                                "before lab.lock.",
                           torch_line=f"Linux: {first} from PyTorch's CPU index; macOS and Windows: PyPI's wheel, "
                                      "their CPU build.")
    TORCH.write_text(header + "\n".join(lines) + "\n")


def compile_(uv, out, torch, wheels, extras=(), constraint=None, upgrade=False, emit_torch=False):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as override:
        override.write(f"{torch}+cpu\n")
        override.flush()
        command = [uv, "pip", "compile", str(ROOT / "pyproject.toml"), "--universal", "--python-version", PYTHON,
                   "--generate-hashes", "--no-annotate", "--no-header", "--quiet", "--override", override.name,
                   "--find-links", wheels, "-o", str(out)]
        command += [] if emit_torch else ["--no-emit-package", "torch"]
        for extra in extras:
            command += ["--extra", extra]
        command += ["--constraints", str(constraint)] if constraint else []
        command += ["--upgrade"] if upgrade else []
        if subprocess.run(command, check=False, cwd=ROOT).returncode:
            raise SystemExit(f"lock: uv could not resolve pyproject.toml (its message is above). Where it could not "
                             f"reach torch's CPU wheels at {wheels}, name a folder or page that has them: "
                             "make lock TORCH_WHEELS=...")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", default="torch==2.13.0", help="the Makefile's TORCH pin (torch==X.Y.Z)")
    parser.add_argument("--wheels", default="https://download.pytorch.org/whl/cpu/torch/",
                        help="where pip finds torch's CPU wheels: a folder or a page of links")
    parser.add_argument("--upgrade", action="store_true", help="the newest versions pyproject.toml allows")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"torch==\d+(\.\d+)*", args.torch):
        parser.error(f"argument --torch got {args.torch!r}; needs an exact pin such as torch==2.13.0")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("lock: needs uv (pip install uv)")
    with tempfile.TemporaryDirectory() as tmp:
        everything, lab, grade = (Path(tmp) / f"{name}.txt" for name in ("everything", "lab", "grade"))
        # uv keeps the versions of an existing output file: start from the locks
        everything.write_text("".join(p.read_text() for p in (LAB, TEST) if p.exists()))
        compile_(uv, everything, args.torch, args.wheels, extras=("lab", "test", *ON_DEMAND), upgrade=args.upgrade)
        compile_(uv, lab, args.torch, args.wheels, extras=("lab", *ON_DEMAND), constraint=everything)
        # the graders run lesson 09's checks too: Triton is theirs from the start
        compile_(uv, grade, args.torch, args.wheels, extras=ON_DEMAND, constraint=everything, emit_torch=True)
        runtime, full, grader = (entries(path.read_text()) for path in (lab, everything, grade))
    assert all(full.get(name) == lines for name, lines in runtime.items()), "the resolutions disagree"
    # (a package's markers may be narrower in the grader's resolution: its version is the same)
    assert {pin(lines) for lines in grader.values()} - {pin(lines) for lines in full.values()} <= {pin(grader["torch"])}, \
        "the resolutions disagree"
    runtime, on_demand = split_on_demand(runtime)
    write(LAB, "The course's runtime packages but Triton, every one pinned with its hashes.", args.torch, runtime)
    write(TRITON, "Triton, for lesson 09 only (Linux): `make triton` installs it, pinned with its hashes.",
          args.torch, on_demand)
    write_torch_lock(grader["torch"], args.torch, args.wheels)
    write(TEST, "The test tools on top of lab.lock, every one pinned with its hashes.", args.torch,
          {name: lines for name, lines in full.items() if name not in runtime and name not in on_demand})
    write(GRADE, "What the autograders install: the grader's packages, every one pinned with its hashes.",
          args.torch, grader, CPU_TORCH)
    print(f"lock: {len(runtime)} entries in {LAB.relative_to(ROOT)}, {len(on_demand)} in {TRITON.relative_to(ROOT)}, "
          f"{len(full) - len(runtime) - len(on_demand)} in {TEST.relative_to(ROOT)}, {len(grader)} in "
          f"{GRADE.relative_to(ROOT)}, and {TORCH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
