"""Write the course's lock files from pyproject.toml (`make lock`; `make lock UPGRADE=1` to move to
the newest versions its ranges allow).

Two files, resolved together so that a package both need has one version:
- lab.lock: every package the course itself needs (pyproject.toml's dependencies, all the way
  down): what `make lab`, the student bundle and Binder install;
- test.lock: what the repository's own work adds on top (the `test` extra, all the way down).
Each pin carries the sha256 of every file of its version, for every platform, so pip installs
them with --require-hashes on Linux, macOS and Windows alike (the markers say which platform
needs which package).

torch is left out of both: the Makefile installs the CPU build it pins (TORCH), and the locks are
resolved against that build's metadata (its CPU wheel, from TORCH_WHEELS), so they never pull
the CUDA packages of the default torch. Without --upgrade, the versions already locked are kept
wherever pyproject.toml still allows them.

Needs uv (the Makefile installs it into the environment first).
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LAB, TEST = HERE / "lab.lock", HERE / "test.lock"
PYTHON = "3.11"  # the oldest Python pyproject.toml allows: markers cover the newer ones
HEADER = (
    "# {what}\n"
    "# Written by `make lock` (requirements/lock.py) from pyproject.toml: do not edit by hand.\n"
    "# torch is not here: the Makefile installs its pinned CPU build ({torch}) first.\n"
)


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


def write(path, what, torch, chosen):
    body = "\n".join("\n".join(lines) for _, lines in sorted(chosen.items()))
    path.write_text(HEADER.format(what=what, torch=torch) + body + "\n")


def compile_(uv, out, torch, wheels, extra=None, constraint=None, upgrade=False):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as override:
        override.write(f"{torch}+cpu\n")
        override.flush()
        command = [uv, "pip", "compile", str(ROOT / "pyproject.toml"), "--universal", "--python-version", PYTHON,
                   "--generate-hashes", "--no-annotate", "--no-header", "--quiet", "--override", override.name,
                   "--find-links", wheels, "--no-emit-package", "torch", "-o", str(out)]
        command += ["--extra", extra] if extra else []
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
        everything, lab = Path(tmp) / "everything.txt", Path(tmp) / "lab.txt"
        # uv keeps the versions of an existing output file: start from both locks
        everything.write_text("".join(p.read_text() for p in (LAB, TEST) if p.exists()))
        compile_(uv, everything, args.torch, args.wheels, extra="test", upgrade=args.upgrade)
        compile_(uv, lab, args.torch, args.wheels, constraint=everything)
        runtime, full = entries(lab.read_text()), entries(everything.read_text())
    assert all(full.get(name) == lines for name, lines in runtime.items()), "the two resolutions disagree"
    write(LAB, "The course's runtime packages, every one pinned with its hashes.", args.torch, runtime)
    write(TEST, "The test tools on top of lab.lock, every one pinned with its hashes.", args.torch,
          {name: lines for name, lines in full.items() if name not in runtime})
    print(f"lock: {len(runtime)} entries in {LAB.relative_to(ROOT)}, {len(full) - len(runtime)} in "
          f"{TEST.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
