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
  FORBIDDEN too.

Controls: the lessons' own answers still pass (tests/test_exercises.py runs every solution; one each here)."""

import numpy as np
import pytest
import torch

from course_teacher.exercises import EXERCISES
from course_teacher.grade import scan, submission
from course_utils import probsparse, tiled, triton_setup
from course_utils.exercises import FAILED, PASSED, evaluate, rules
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
