"""Lesson 09's exercises that complete FlashAttention (course_teacher/exercises/l09_flash_complete.py),
beyond the generic tests (tests/test_exercises.py): the references agree with torch.softmax and with
autograd's gradient of F.scaled_dot_product_attention; the cases hold what the module docstring
promises; the lesson's solutions pass on the public and hidden cases; and a Triton kernel carrying each
known mistake (the lesson's solution with one line changed) is named by the check.

The kernels run through Triton's interpreter: about 1 to 3 s a check on one thread of this machine."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from course_teacher.exercises.l09_flash_complete import _blocks_reference, _dq_reference
from course_teacher.exercises.reference import evaluate as evaluate_hidden
from course_utils import triton_setup
from course_utils.exercises import FAILED, PASSED
from cells import run_cell

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

IDS = ("09.softmax_blocks", "09.backward_dq")
HIDDEN_SEED = 12345
F32 = {"atol": 1e-5, "rtol": 1e-4}


def _cases(exercise, hidden=False):
    spec = EXERCISES[exercise]
    draw = spec.hidden if hidden else spec.cases
    return draw(torch.Generator().manual_seed(HIDDEN_SEED if hidden else spec.seed))


@pytest.mark.parametrize("exercise", IDS)
def test_every_tensor_of_a_case_is_float32_and_neither_all_zeros_nor_all_minus_infinity(exercise):
    for case in _cases(exercise) + _cases(exercise, hidden=True):
        for arg in case:
            if isinstance(arg, torch.Tensor):
                assert arg.dtype == torch.float32, exercise  # the interpreter's NumPy has no bfloat16
                assert (arg.isfinite() & (arg != 0)).any(), exercise


def test_the_long_row_softmax_reference_is_torchs_and_its_cases_need_every_part_of_the_kernel():
    cases = _cases("09.softmax_blocks")
    for x, block in cases + _cases("09.softmax_blocks", hidden=True):
        torch.testing.assert_close(_blocks_reference(x, block), torch.softmax(x, -1), **F32)
        assert block >= 16 and not block & (block - 1) and x.shape[-1] > block  # longer than one block
    widths = [(x.shape[-1], block) for x, block in cases]
    assert any(n % block for n, block in widths) and any(not n % block for n, block in widths)
    assert any(x.amax() > 500 for x, _ in cases) and any(x.amax() < -500 for x, _ in cases)
    # a row whose max comes after its first block: the running sum must be rescaled
    x, block = cases[0]
    finite = x.masked_fill(~x.isfinite(), -1e9)
    assert (finite[:, block:].amax(-1) > finite[:, :block].amax(-1) + 5).any()


def _attention_grad_q(q, k, v, d_out, causal):
    q = q.double().requires_grad_()
    out = F.scaled_dot_product_attention(q, k.double(), v.double(), is_causal=causal)
    (grad,) = torch.autograd.grad(out, q, d_out.double())
    return grad


@pytest.mark.parametrize("hidden", [False, True])
def test_the_dq_reference_is_autograds_gradient_of_sdpa(hidden):
    for case in _cases("09.backward_dq", hidden):
        q, k, v, output, lse, d_out, block_q, block_k, causal = case
        expected = _attention_grad_q(q, k, v, d_out, causal)
        torch.testing.assert_close(_dq_reference(*case).double(), expected, atol=1e-5, rtol=1e-4)
        # the forward's output and lse in the case are sdpa's and the log-sum-exp of its scaled scores
        s = q.double() @ k.double().transpose(1, 2) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), atol=1e-5, rtol=1e-5)
    first = _cases("09.backward_dq")[0]
    assert first[-1] is True and first[0].shape[1] % first[7]  # causal, with a partial last key block


# ----------------------------------------------------------------------------- the lesson's solutions


def _solutions(exercise=None):
    """The source of the lesson's solutions: every exercise cell, or the one of `exercise`."""
    import jupytext

    from course_teacher import build

    cells = jupytext.read(build.lessons()["09"]).cells
    return "\n\n".join(cell.source for cell in cells if "exercise" in build.tags(cell)
                        and exercise in (None, cell.metadata.get("exercise")))


def _run(source):
    namespace = {}
    exec("import math\nimport torch\nimport torch.nn.functional as F\nfrom course_utils.triton_setup import load\n"
         "load()\nimport triton\nimport triton.language as tl\n", namespace)  # what lesson 09's setup cell imports
    run_cell(source, namespace)  # with its text in linecache, as a notebook runs a cell
    return namespace


@pytest.mark.parametrize("exercise, function", [("09.softmax_blocks", "softmax_blocks"),
                                                ("09.backward_dq", "backward_dq")])
def test_the_lessons_solution_passes_on_the_public_and_hidden_cases(exercise, function):
    verdict = evaluate_hidden(exercise, _run(_solutions())[function], hidden_seed=HIDDEN_SEED)
    assert verdict.status == PASSED, verdict.message


#: (exercise, function, mistake, a line of the solution, what a learner with that mistake wrote instead;
#: every occurrence is replaced)
BUGS = [
    ("09.softmax_blocks", "softmax_blocks", "SUM_NOT_RESCALED", "ell = ell * tl.exp(m - m_new) + ", "ell = ell + "),
    ("09.softmax_blocks", "softmax_blocks", "PADDING_AS_ZERO",
     'x = tl.load(X + row * n + columns, mask=columns < n, other=float("-inf"))\n            m_new',
     "x = tl.load(X + row * n + columns, mask=columns < n, other=0.0)\n            m_new"),
    ("09.softmax_blocks", "softmax_blocks", "LAST_BLOCK_MISSING", "for start in range(0, n, BLOCK):",
     "for start in range(0, n // BLOCK * BLOCK, BLOCK):"),
    ("09.softmax_blocks", "softmax_blocks", "NO_MAX_SHIFT",
     "ell = ell * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)", "ell = ell + tl.sum(tl.exp(x), axis=0)"),
    ("09.backward_dq", "backward_dq", "NO_D", "ds = p * (dp - delta[:, None])\n            dq", "ds = p * dp\n            dq"),
    ("09.backward_dq", "backward_dq", "DS_WITHOUT_P", "ds = p * (dp - delta[:, None])\n            dq",
     "ds = dp - delta[:, None]\n            dq"),
    ("09.backward_dq", "backward_dq", "DQ_UNSCALED", "dq * scale,", "dq,"),
    ("09.backward_dq", "backward_dq", "CAUSAL_UNMASKED",
     "                keep = keep & (columns[None, :] <= rows[:, None])\n            p = tl.where(keep, p, 0.0)\n"
     "            dp = tl.dot(do, tl.trans(v), input_precision=\"ieee\")\n            ds = p * (dp - delta[:, None])\n"
     "            dq",
     "                pass\n            p = tl.where(keep, p, 0.0)\n"
     "            dp = tl.dot(do, tl.trans(v), input_precision=\"ieee\")\n            ds = p * (dp - delta[:, None])\n"
     "            dq"),
    ("09.backward_dq", "backward_dq", "LAST_KEY_BLOCK_MISSING", "for start_k in range(0, end, BLOCK_K):",
     "for start_k in range(0, end // BLOCK_K * BLOCK_K, BLOCK_K):"),
]


@pytest.mark.slow  # (nine kernels, each checked on the public cases: about 20 s interpreted)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflows the mistakes are about
@pytest.mark.parametrize("exercise, function, code, right, wrong", BUGS, ids=[b[2] for b in BUGS])
def test_a_triton_kernel_with_each_known_mistake_is_named(exercise, function, code, right, wrong):
    source = _solutions(exercise)
    assert source.count(right) == 1 or code == "LAST_BLOCK_MISSING", f"{right!r} is not one line of the solution"
    wrong_source = source.replace(right, wrong)  # (LAST_BLOCK_MISSING: both passes' loops)
    if code == "NO_MAX_SHIFT":  # without the max, the second pass has none to subtract either
        assert wrong_source.count("tl.exp(x - m) / ell") == 1
        wrong_source = wrong_source.replace("tl.exp(x - m) / ell", "tl.exp(x) / ell")
    verdict = evaluate_hidden(exercise, _run(wrong_source)[function])
    assert verdict.status == FAILED and verdict.code == code, verdict.message


def test_a_mistake_kernel_is_only_named_where_it_is_the_mistake():
    """The long-row softmax of exercise 1's one-block kernel (only the first block of each row) fails
    without being taken for a known mistake it is not."""
    source = _solutions("09.softmax_blocks").replace("for start in range(0, n, BLOCK):",
                                                     "for start in range(0, BLOCK, BLOCK):")
    verdict = evaluate_hidden("09.softmax_blocks", _run(source)["softmax_blocks"])
    assert verdict.status == FAILED and verdict.code is None, verdict.message


#: Every exercise of lesson 09 and the name its solution function has in the lesson.
LESSON_09 = [("09.softmax_kernel", "softmax_rows"), ("09.softmax_blocks", "softmax_blocks"), ("09.matmul_kernel", "matmul"),
             ("09.flash_forward", "flash_forward"), ("09.causal_forward", "causal_forward"),
             ("09.backward_dkdv", "backward_dkdv"), ("09.backward_dq", "backward_dq")]


@pytest.mark.parametrize("exercise, function", LESSON_09, ids=[e for e, _ in LESSON_09])
def test_every_tensor_the_lessons_solutions_make_is_on_their_inputs_device(exercise, function):
    """On a GPU the check hands the solutions CUDA tensors, and a compiled kernel refuses a CPU one: every
    tensor a solution makes must follow its inputs. Shown here without a GPU: with "meta" as torch's
    default device, a tensor made without naming a device lands there, and the interpreter cannot run
    a kernel on it; one made on the inputs' device (CPU) runs."""
    solution = _run(_solutions())[function]
    case = _cases(exercise)[0]
    with torch.device("meta"):
        result = solution(*case)
    for tensor in result if isinstance(result, tuple) else (result,):
        assert tensor.device.type == "cpu", (exercise, tensor.device)
