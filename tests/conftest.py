"""Every test starts and ends in English, with the course's plot style: a test that switches the
language (or a font) cannot leak into the next one. And `one_thread` / `threads`, for the tests that
compare floats bit for bit.

Floats and threads. torch splits a reduction (a sum, a matrix product, a mean) into one chunk per
thread, and even an elementwise op into chunks whose edges decide which elements take the vectorised
loop; so the last bits of a result can change with the number of threads, and with the CPU's kernels
(AVX-512, AVX2 or the portable ones). A test that compares floats bit for bit (``torch.equal``, ``==``,
printed digits) therefore fixes the thread count for both sides of the comparison, with the fixture
``one_thread`` (module-wide: ``pytestmark = pytest.mark.usefixtures("one_thread")``, or as a test's
argument) or ``threads``, and says so in a comment; every other comparison of floats has a tolerance.

Run the suite as another machine would (what CI has: 2 cores, so torch takes two threads; another CPU
runs other kernels; only the paths this CPU has: `make test-paths` lists them)::

    OMP_NUM_THREADS=2 .venv/bin/python -m pytest -n 2 --dist loadfile tests
    OMP_NUM_THREADS=1 .venv/bin/python -m pytest -n 2 --dist loadfile tests
    ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=2 .venv/bin/python -m pytest -n 2 --dist loadfile tests
    ATEN_CPU_CAPABILITY=avx2 ...      # and avx512, where the CPU has it
    make test-paths                   # the `trains` tests and the student notebooks on every path
"""

import os

import patience
import pytest
import torch

from course_utils import i18n, triton_setup, viz


def _gpu_skip_reason():
    """Why the `gpu` tests cannot run here (None: they can): they need a CUDA device, unless
    COURSE_GPU_TESTS_ON names another device to dry-run them on (tests/test_gpu.py)."""
    if os.environ.get("COURSE_GPU_TESTS_ON", "cuda") != "cuda" or torch.cuda.is_available():
        return None
    return (f"no CUDA GPU here (torch {torch.__version__} sees none): the gpu tests run on a machine with one, "
            "`make test-gpu`")


def _gpu_selected(config):
    """Whether this run asks for the `gpu` tests by name (`-m gpu`, as `make test-gpu` does)."""
    expression = config.getoption("markexpr", "") or ""
    return "gpu" in expression and "not gpu" not in expression


#: The test files that take longest, longest first (seconds of one process each, measured over
#: `make test`'s first step). `make test` runs files whole on two processes (pytest-xdist, --dist
#: loadfile), handed out in collection order (--no-loadscope-reorder: xdist would otherwise start with
#: the files that hold the most tests, and a file of a few long tests, the browser's or the hostile
#: class's, began last and ran alone at the end). Longest first is what keeps the two busy to the end.
# Triton imported as a learner's lesson 09 imports it, before anything else can: torch's FlopCounterMode (lesson
# 06's and 07's tests) imports Triton itself, without the interpreter, and a test module that then loads it finds
# triton.language as that import left it, where the compiler's front end cannot read the kernels (measured:
# tests/test_transformer.py then tests/test_triton_launches.py in one process).
triton_setup.available()


LONGEST_FIRST = (
    "test_grade_hostile.py", "test_browser.py", "test_exercises.py", "test_hidden_cases_l06.py", "test_platforms.py",
    "test_slides.py", "test_lesson06_warmup.py", "test_learner_answers_l07_l08.py", "test_grade.py", "test_lesson04.py",
    "test_grade_attacks.py", "test_widget_redraw.py", "test_lesson05_facts.py", "test_toy.py", "test_gradebook.py",
    "test_seq2seq.py", "test_decoding.py", "test_student_side.py", "test_lesson01.py", "test_grade_sandbox.py",
    "test_train_gpt.py",
)


def _longest_first(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    # `make test` runs every test but the platforms': the gpu tests run only when asked for
    reason = _gpu_skip_reason() if _gpu_selected(config) else "the gpu tests run with `-m gpu` (`make test-gpu`)"
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if reason and gpu:
        skip = pytest.mark.skip(reason=reason)
        for item in gpu:
            item.add_marker(skip)


#: What a file that holds `trains` tests spells: `make test`'s second step (and `make test-paths`) collects
#: only the files that do (Makefile: TRAINS_FILES, by grep), as collecting the whole suite for 138 tests
#: cost each worker three times the CPU (measured: 31 CPU-seconds for every file, 11 for these).
TRAINS_SPELT = "mark.trains"
_spelt = {}  # {path: whether its text spells TRAINS_SPELT}


def pytest_itemcollected(item):
    """A test marked `trains` in a file that does not spell the mark (say, a mark added by a hook or
    built by name) would be left out of the step that runs them: refused here, at every collection."""
    if item.get_closest_marker("trains") is None:
        return
    if item.path not in _spelt:
        _spelt[item.path] = TRAINS_SPELT in item.path.read_text(encoding="utf-8")
    if not _spelt[item.path]:
        raise pytest.UsageError(f"{item.nodeid} is marked trains, but {item.path.name} never spells "
                                f"{TRAINS_SPELT!r}: make test's trains step (Makefile, TRAINS_FILES) would miss it")


def pytest_configure(config):
    # The machine's slowness, measured once per session (tests/patience.py): here in the one process
    # or xdist's controller, which hands its number to the workers (pytest_configure_node).
    given = getattr(config, "workerinput", {}).get("course_slowness")
    patience.calibrate(given)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_configure_node(node):
    node.workerinput["course_slowness"] = patience.calibrated()


def pytest_report_header(config):
    lines = [f"waits stretched by {patience.factor():.1f} (tests/patience.py: the machine's measured slowness)"]
    reason = _gpu_skip_reason()
    if reason and _gpu_selected(config):
        lines.append(f"gpu tests skipped: {reason}")
    return lines


@pytest.fixture(autouse=True)
def english():
    i18n.set_language("en")
    viz.use_course_style()
    yield
    i18n.set_language("en")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tests from the first that asks for it to the module's end, as the
    notebooks run (and as trained facts are proved); restored afterwards. A module that wants it for
    every test says ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def threads():
    """``threads(n)``: run the rest of one test on `n` torch threads; the number is restored afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)
