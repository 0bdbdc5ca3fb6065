"""A pytest plugin for `make test`'s notebook step (``-p nbval_env``): each notebook's kernel starts with the
settings of its kind, so the solutions and the student notebooks run in one pytest invocation.

`make test` ran them as two: the solutions on the CPU's native kernels with two torch threads (the build
wrote their outputs on one, so this proves printed outputs do not depend on the number of threads), then
the student notebooks on the portable kernels (ATEN_CPU_CAPABILITY=default) with one thread. Each
invocation started its own pytest and workers, and the first one's last notebook ran alone on one core
while the other waited for the second invocation. One invocation, with the settings chosen here per
notebook, keeps each notebook's settings and hands all of them, longest first, to the same workers.

nbval starts a notebook's kernel when its first cell is set up, and the kernel takes this process's
environment then (jupyter_client copies os.environ): so the settings are put in os.environ just before.
"""

import os
import pathlib

import pytest

#: The kernel path `make test` was started with: None, the CPU's native kernels (or the one a run asks for,
#: e.g. `ATEN_CPU_CAPABILITY=avx2 make test`), which the solutions keep, as they did in a run of their own.
STARTED_PATH = os.environ.get("ATEN_CPU_CAPABILITY")

#: (the folder, under the repository, that holds the notebooks; the environment their kernel starts with).
#: None: the variable is unset. First match wins.
SETTINGS = (
    ("notebooks/solutions", {"COURSE_THREADS": "2", "ATEN_CPU_CAPABILITY": STARTED_PATH}),
    ("notebooks", {"COURSE_THREADS": "1", "ATEN_CPU_CAPABILITY": "default"}),
)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def settings_for(path):
    """The environment (variable: value, None for unset) a notebook at `path` runs with; {} for a file
    outside every folder of SETTINGS (it keeps the environment pytest was started with)."""
    try:
        relative = pathlib.Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return {}
    for folder, variables in SETTINGS:
        if relative.startswith(f"{folder}/"):
            return dict(variables)
    return {}


def apply(variables, environ=os.environ):
    for name, value in variables.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the first cell of a notebook (whose setup starts the kernel), its kind's settings."""
    if item.path.suffix == ".ipynb":
        apply(settings_for(item.path))
