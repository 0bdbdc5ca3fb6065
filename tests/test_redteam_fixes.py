"""What an independent review of the grader found (tests/attacks_more.py runs the same routes through `make grade`),
each fixed where the routes converge, checked here in the notebook's check and through the grader's path (wired):

- lesson 09, a kernel that does not do the work: the answer computed in NumPy and written through a NumPy or DLPack
  view of the output (no aten operation sees that), then "written" by a kernel that stores back what it loads. The
  kernel ledger now keeps the bytes of every storage the call touched and refuses memory changed where neither torch
  nor a launch wrote it (FOREIGN_DATA, "memory"), whatever route wrote it;
- a course function that computes the answer under another name (``tiled.keep_of(L_q, L_k, causal=True)`` is
  02.causal_mask's causal mask; ``probsparse.causal_keep``): where the exercise is a course function written again
  (rules.OWN_CODE), any course function entered from outside the course is refused (SOLVER), by the module its code
  belongs to; and the scan forbids a course function anywhere such an exercise's function reaches, so that a table
  computed by one at a cell's top level (outside the call, where no tracer sees it) and sliced by the answer is
  FORBIDDEN too;
- lesson 09, the answer computed on the host and handed to the launches as data (each value a scalar argument of a
  launch of its own, a global the kernel reads, a pointer's offset, torch's fill values, the grid): the check calls the
  function once more, first, on inputs of the same shapes but other values, and the two calls' launches and torch
  operations must be the same in everything but the data (DATA_IN_ARGUMENTS, kernels.differs).

Controls: the lessons' own answers still pass (tests/test_exercises.py runs every solution; one each here)."""

import numpy as np
import pytest
import torch

from course_teacher.exercises import EXERCISES
from course_teacher.grade import scan, submission
from course_utils import probsparse, tiled, triton_setup
from course_utils.exercises import FAILED, PASSED, evaluate, grading, kernels, rules
from wired import wired

# ----------------------------------------------------------------------------- a course function under another name


def _own_causal_mask(L_q, L_k):
    return torch.arange(L_k)[None, :] <= torch.arange(L_q)[:, None]


def _keep_of(L_q, L_k):
    return tiled.keep_of(L_q, L_k, causal=True)


def _causal_keep(L_q, L_k):
    return probsparse.causal_keep(torch.arange(L_q), L_k)


@pytest.mark.parametrize("function", [_keep_of, _causal_keep])
def test_a_course_function_that_computes_the_answer_under_another_name_is_refused(function):
    for verdict in (evaluate("02.causal_mask", function), wired("02.causal_mask", function)):
        assert verdict.status == FAILED and verdict.code == "SOLVER", verdict.message
        assert "course_utils." in verdict.message


def test_the_learners_own_mask_still_passes_in_the_notebook_and_through_the_grader():
    assert evaluate("02.causal_mask", _own_causal_mask).status == PASSED
    assert wired("02.causal_mask", _own_causal_mask).status == PASSED


def test_only_course_modules_count_as_course_code():
    assert rules.course_module("course_utils.tiled") and rules.course_module("course_utils")
    assert not rules.course_module("course_utils.exercises.sandbox")  # the check's own instruments
    assert not rules.course_module("course_utilsx") and not rules.course_module("__main__")
    assert not rules.course_module(None)


def _scan(exercise, source, function, *others):
    """The scan's verdict on `exercise` with `source` as its cell (the first) and `others` as the learner's next cells."""
    target = (exercise, 1, tuple(EXERCISES[exercise].forbidden), function)
    cells = [submission.Cell(1 + i, text) for i, text in enumerate((source,) + others)]
    return scan.scan(cells, frozenset(), [target]).verdict(exercise)


def test_a_table_another_course_function_computed_before_the_call_is_forbidden_by_the_scan():
    source = ("from course_utils import tiled\n\nBIG = tiled.keep_of(256, 256, causal=True)\n\n\n"
              "def my_causal_mask(L_q, L_k, table=BIG):\n    return table[:L_q, :L_k].clone()")
    verdict = _scan("02.causal_mask", source, "my_causal_mask")
    assert verdict is not None and verdict.mistake == scan.FORBIDDEN, verdict
    assert [hit.name for hit in verdict.hits] == ["course_utils.tiled.keep_of"]


def test_the_scan_leaves_course_code_alone_where_the_exercise_does_not_reach_it_or_hands_it_out():
    own = "import torch\n\n\ndef my_causal_mask(L_q, L_k):\n    return torch.ones(L_q, L_k, dtype=torch.bool).tril()"
    assert _scan("02.causal_mask", own, "my_causal_mask") is None
    elsewhere = "from course_utils import tiled\nshown = tiled.keep_of(4, 4, causal=True)"
    assert _scan("02.causal_mask", own, "my_causal_mask", elsewhere) is None  # a cell the function never reads
    checked = own + "\n\n\nfrom course_utils import check\ncheck('02.causal_mask', my_causal_mask)"
    assert _scan("02.causal_mask", checked, "my_causal_mask") is None  # the check is no course code here
    look = own + "\n\n\nfrom course_utils import tiled\nprint(tiled.keep_of(3, 5, causal=True))"
    assert _scan("02.causal_mask", look, "my_causal_mask") is None  # a look in its cell: only shown
    kept = own + "\n\n\nfrom course_utils import tiled\nT = {}\nT.update(big=tiled.keep_of(256, 256, causal=True))"
    assert _scan("02.causal_mask", kept, "my_causal_mask").mistake == scan.FORBIDDEN  # kept where code reads it
    # the same table computed in another cell, read by the function: found there
    table = "from course_utils import tiled\nBIG = tiled.keep_of(256, 256, causal=True)"
    reads = "def my_causal_mask(L_q, L_k):\n    return BIG[:L_q, :L_k].clone()"
    assert _scan("02.causal_mask", reads, "my_causal_mask", table).mistake == scan.FORBIDDEN
    # an exercise that is not a course function written again may use the course's (02.decoder_mask)
    uses = "from course_utils import masks\n\n\ndef my_decoder_mask(lengths, L):\n    return masks.causal_mask(L)"
    assert _scan("02.decoder_mask", uses, "my_decoder_mask") is None


# ----------------------------------------------------------------------------- lesson 09: memory written outside


@pytest.fixture(scope="module")
def triton():
    pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)
    triton_setup.load()
    import triton
    import triton.language as tl

    @triton.jit
    def store_back(X, Y, n, BLOCK: tl.constexpr):  # reads X, "writes" Y with what Y already holds
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.load(X + i, mask=i < n, other=0.0)
        tl.store(Y + i, tl.load(Y + i, mask=i < n, other=0.0), mask=i < n)

    return triton, store_back


def _numpy_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _softmax_through(view, triton, store_back):
    def softmax_rows(x):
        x = x.contiguous()
        y = torch.empty_like(x)
        view(y)[...] = _numpy_softmax(view(x))
        store_back[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

    return softmax_rows


@pytest.mark.parametrize("view", [torch.Tensor.numpy, np.from_dlpack], ids=["numpy", "dlpack"])
def test_a_result_written_through_a_numpy_view_and_stored_back_by_a_kernel_is_refused(triton, view):
    function = _softmax_through(view, *triton)
    for verdict in (evaluate("09.softmax_kernel", function), wired("09.softmax_kernel", function)):
        assert verdict.status == FAILED and verdict.code == "FOREIGN_DATA", verdict.message


# ----------------------------------------------------------------------------- lesson 09: the values in the launches


def _defined(source, name):
    """The function `name` that `source` (a lesson 09 cell: Triton kernels and a function that launches them) defines,
    run as a notebook runs a cell (its text kept where triton.jit reads a kernel's source)."""
    import linecache
    import types

    import triton
    import triton.language as tl

    filename = f"<attack {name} {len(linecache.cache)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType("__main__")
    module.__dict__.update(torch=torch, triton=triton, tl=tl)
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 (the test's own text)
    return module.__dict__[name]


def _refused(exercise, function, *args):
    """The DATA_IN_ARGUMENTS refusals of `function` called as `exercise`'s check calls it, on one small case `args`
    (the check's collect: the same call on other values first)."""
    calls = {"args": [args], "differentiable": False, "attached": [[]], "weights": [[]],
             "forbidden": list(EXERCISES[exercise].forbidden), "largest": [None], "exercise": exercise}
    return [r for r in grading.collect(calls, function, 60).refused if r[0] == "DATA_IN_ARGUMENTS"]


# (attack table, label, exercise, the function's name, what the refusal's detail names)
_VALUE_ROUTES = [
    ("ATTACKS_MORE", "scalar-kernel", "09.softmax_kernel", "softmax_rows", "launch 2 argument v0"),
    ("ATTACKS_MORE", "values-in-launches", "09.softmax_kernel", "softmax_rows", "launch 2 global V0"),
    ("ATTACKS_MORE", "values-in-launches", "09.softmax_blocks", "softmax_blocks", "launch 1 argument TOP"),
    ("ATTACKS_MORE", "values-in-launches", "09.matmul_kernel", "matmul", "aten.fill_"),
    ("SLOW", "grid-digits", "09.softmax_kernel", "softmax_rows", "grid"),
]


def _arguments(exercise):
    generator = torch.Generator().manual_seed(5)
    if exercise == "09.matmul_kernel":
        return torch.randn(5, 7, generator=generator), torch.randn(7, 3, generator=generator), 16, 16, 16
    x = torch.randn(2, 9, generator=generator)
    return (x, 16) if exercise == "09.softmax_blocks" else (x,)


@pytest.mark.parametrize("table, label, exercise, name, named", _VALUE_ROUTES,
                         ids=[f"{r[1]}-{r[2]}" for r in _VALUE_ROUTES])
def test_an_answer_computed_on_the_host_and_handed_to_the_launches_is_refused(triton, table, label, exercise, name,
                                                                               named):
    """OPEN's route (each value a scalar argument) and its neighbours: a global the kernel reads, a pointer's offset
    chosen by the values, fill values, the grid. Every one passes without the second call (its values are right)."""
    import attacks_more

    function = _defined(getattr(attacks_more, table)[label][1][exercise], name)
    refused = _refused(exercise, function, *_arguments(exercise))
    assert len(refused) == 1 and named in refused[0][1], refused


def test_the_same_route_is_refused_by_the_notebooks_check_and_through_the_grader(triton):
    import attacks_more

    function = _defined(attacks_more.ATTACKS_MORE["scalar-kernel"][1]["09.softmax_kernel"], "softmax_rows")
    notebook, grader = evaluate("09.softmax_kernel", function), wired("09.softmax_kernel", function)
    for verdict in (notebook, grader):
        assert verdict.status == FAILED and verdict.code == "DATA_IN_ARGUMENTS", verdict.message
        assert attacks_more.ATTACKS_MORE["scalar-kernel"][2] in verdict.message
    assert "`v0`" in notebook.message and "`v0`" not in grader.message  # (a parameter's name is the learner's)


def test_a_real_kernel_launches_the_same_whatever_the_values(triton):
    """The control: the lesson's own answers (tests/test_exercises.py runs every one) launch what the shapes fix."""
    from test_exercises import SOLUTIONS

    for exercise in ("09.softmax_kernel", "09.softmax_blocks", "09.matmul_kernel"):
        assert _refused(exercise, SOLUTIONS[exercise], *_arguments(exercise)) == [], exercise


def test_where_two_traces_differ_is_said_in_the_graders_words():
    code = (lambda: 0).__code__
    launch = ("launch", code, (1, 1, 1), (("X", (("input", 0),)), ("v", ("float", "0.5"))), (("G", ("int", 1)),))
    assert kernels.differs([launch], [launch]) is None
    assert kernels.differs([launch], [launch[:2] + ((2, 1, 1),) + launch[3:]]) == "launch 1 grid"
    assert kernels.differs([launch], [launch[:3] + ((launch[3][0], ("v", ("float", "0.25"))),) + launch[4:]]) == \
        "launch 1 argument v"
    assert kernels.differs([launch], [launch[:4] + ((("G", ("int", 2)),),)]) == "launch 1 global G"
    assert kernels.differs([launch], [("launch", (lambda: 1).__code__) + launch[2:]]) == "launch 1 kernel"
    assert kernels.differs([launch], [launch, launch]) == "launch 2 missing"
    fill = ("operation", "aten.fill_", (("float", "0.5"),), ("dict",), ())
    assert kernels.differs([fill, launch], [fill[:2] + ((("float", "0.7"),),) + fill[3:], launch]) == \
        "operation 1 aten.fill_"
    # the grader keeps its own words only: a parameter's or global's name is the learner's
    assert kernels.grader_words("launch 3 argument leak_4x4") == "launch 3 argument"
    assert kernels.grader_words("operation 2 aten.fill_") == "operation 2 aten.fill_"
    assert kernels.grader_words("operation 2 aten.not_an_op_x") == "operation 2"
    assert kernels.grader_words("anything else") == "" and kernels.grader_words("raised") == "raised"
