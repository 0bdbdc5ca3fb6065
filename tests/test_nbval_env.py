"""`make test` runs the solutions and the student notebooks in one pytest (tests/nbval_env.py): each kind's
kernel still starts with its own settings, as when they ran as two steps (the Makefile's comment says why)."""

import re

import nbval_env

ROOT = nbval_env.ROOT


def test_each_kind_of_notebook_gets_its_settings():
    solutions = {"COURSE_THREADS": "2", "ATEN_CPU_CAPABILITY": nbval_env.STARTED_PATH}
    student = {"COURSE_THREADS": "1", "ATEN_CPU_CAPABILITY": "default"}
    assert nbval_env.settings_for(ROOT / "notebooks/solutions/en/03_self_cross_attention.ipynb") == solutions
    assert nbval_env.settings_for(ROOT / "notebooks/solutions/zh/首页.ipynb") == solutions
    assert nbval_env.settings_for(ROOT / "notebooks/en/03_self_cross_attention.ipynb") == student
    assert nbval_env.settings_for(ROOT / "notebooks/zh/02_掩码.ipynb") == student
    assert nbval_env.settings_for(ROOT / "tests/test_masks.py") == {}
    assert nbval_env.settings_for("/elsewhere/notebooks/en/x.ipynb") == {}


def test_settings_set_and_unset_variables():
    environ = {"ATEN_CPU_CAPABILITY": "default", "COURSE_THREADS": "1", "OTHER": "kept"}
    nbval_env.apply({"COURSE_THREADS": "2", "ATEN_CPU_CAPABILITY": None}, environ)
    assert environ == {"COURSE_THREADS": "2", "OTHER": "kept"}
    nbval_env.apply({"COURSE_THREADS": "1", "ATEN_CPU_CAPABILITY": "default"}, environ)
    assert environ == {"COURSE_THREADS": "1", "ATEN_CPU_CAPABILITY": "default", "OTHER": "kept"}


def test_make_test_runs_every_notebook_once_with_the_plugin():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    notebook_lines = [line for line in recipe.splitlines() if "NBVAL" in line]
    assert notebook_lines == ["\t$(NBVAL) -p tests.nbval_env notebooks/solutions $(STUDENT_NOTEBOOKS)"]
    assert re.search(r"^STUDENT_NOTEBOOKS := notebooks/en notebooks/zh$", makefile, re.MULTILINE)
