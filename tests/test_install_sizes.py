"""Every size the READMEs state is the measured one: what `make lab` installs (torch's CPU build and
requirements/lab.lock) and what `make triton` adds (requirements/triton.lock), summed over the files
each installed package records (its RECORD) and their compiled bytecode, in this environment, which
`make setup` installed from the same locks. (Measured once by hand in a fresh folder, the student
bundle's `make lab` environment held 1,303 MiB, 1.37 GB, its pip and setuptools included.)"""

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "requirements"))
import lock  # requirements/lock.py: `make lock`

#: The learner-facing texts that state sizes, and what each must state.
STATED = {"README.md": ("lab", "triton"), "README.student.md": ("lab", "triton"),
          "guide/en.md": ("triton",), "guide/zh.md": ("triton",)}
#: A size as the texts write it: one decimal, in GB.
SIZE = re.compile(r"(\d+\.\d) GB")


def _installed_bytes(name):
    """The bytes of a package's installed files (its RECORD) and of the bytecode pip compiled for
    them at install time (__pycache__, which RECORD may not list)."""
    files = {Path(path.locate()) for path in metadata.distribution(name).files or ()}
    files |= {compiled for path in list(files) if path.suffix == ".py"
              for compiled in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc")}
    return sum(path.stat().st_size for path in files if path.is_file())


def _lock_names(path):
    names = []
    for key in lock.entries(path.read_text()):
        name, _, marker = key.partition(" ; ")
        if not marker or Marker(marker).evaluate():
            names.append(name)
    return names


@pytest.fixture(scope="module")
def measured():
    """{"lab": GB that `make lab` installs, "triton": GB that `make triton` adds}, to one decimal."""
    triton = _lock_names(lock.TRITON)
    if not triton:
        pytest.skip("Triton has no wheel for this platform: its size is measured on Linux")
    lab = sum(map(_installed_bytes, ["torch", *_lock_names(lock.LAB)]))
    return {"lab": round(lab / 1e9, 1), "triton": round(sum(map(_installed_bytes, triton)) / 1e9, 1)}


def test_the_sizes_are_measured_from_something(measured):
    # torch alone is over half a gigabyte installed: a parser that found nothing would say 0.0
    assert measured["lab"] >= 0.8 and measured["triton"] >= 0.3, measured


@pytest.mark.parametrize("name", sorted(STATED))
def test_every_size_a_text_states_is_a_measured_one(name, measured):
    text = (ROOT / name).read_text(encoding="utf-8")
    stated = {float(size) for size in SIZE.findall(text)}
    for what in STATED[name]:
        assert measured[what] in stated, f"{name} never states {what}'s measured size, {measured[what]} GB: {stated}"
    assert stated <= set(measured.values()), \
        f"{name} states {sorted(stated - set(measured.values()))} GB; measured: {measured}"
