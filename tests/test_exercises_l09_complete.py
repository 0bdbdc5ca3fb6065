"""Lesson 09's exercises that complete FlashAttention (course_teacher/exercises/l09_flash_complete.py),
beyond the generic tests (tests/test_exercises.py): the references agree with torch.softmax and with
autograd's gradient of F.scaled_dot_product_attention; the cases hold what the module docstring
promises; the lesson's solutions pass on the public and hidden cases; a Triton kernel carrying each
known mistake (the lesson's solution with one line changed) is named by the check; and the
autograd.Function of exercise 8 is held to the kernel rule through its backward.

The kernels run through Triton's interpreter: about 1 to 3 s a check on one thread of this machine."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from prepared import evaluate as evaluate_hidden  # the teacher's verdict, each Reference prepared once
from course_utils import triton_setup
from course_utils.exercises import CRASHED, FAILED, PASSED, evaluate
from cells import run_cell

# the references (and hidden cases) under test, as the registry holds them
_blocks_reference = EXERCISES["09.softmax_blocks"].reference
_dq_reference = EXERCISES["09.backward_dq"].reference
_function_reference = EXERCISES["09.flash_function"].reference

pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

IDS = ("09.softmax_blocks", "09.backward_dq", "09.flash_function")
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


@pytest.mark.parametrize("hidden", [False, True])
def test_the_function_reference_is_sdpas_output_and_autograds_gradients(hidden):
    for case in _cases("09.flash_function", hidden):
        q, k, v, d_out, block_q, block_k, causal = case
        leaves = [t.double().requires_grad_() for t in (q, k, v)]
        expected = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        gradients = torch.autograd.grad(expected, leaves, d_out.double())
        for ours, theirs in zip(_function_reference(*case), (expected.detach(), *gradients)):
            torch.testing.assert_close(ours.double(), theirs, **F32)
        if causal:  # as exercises 5 to 7 ask
            assert q.shape[1] == k.shape[1] and block_q % block_k == 0
    cases = _cases("09.flash_function", hidden)
    assert cases[0][-1] is True  # the first case is causal, where every mistake shows
    assert not cases[0][3].is_contiguous()  # a d_output as autograd may hand it to backward
    assert cases[0][1].shape[-1] == cases[0][2].shape[-1]  # d = d_v: swapped dK and dV are values, not an error
    if hidden:  # (the public case is one: each costs three launches in the notebook)
        assert {case[-1] for case in cases} == {True, False}
        assert any(k.shape[-1] != v.shape[-1] for _, k, v, *_ in cases)


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


@pytest.mark.slow  # (Triton's interpreter on every case: `make test` runs it, not `make quick`)
@pytest.mark.parametrize("exercise, function", [("09.softmax_blocks", "softmax_blocks"),
                                                ("09.backward_dq", "backward_dq"),
                                                ("09.flash_function", "attention_and_gradients")])
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
    # the mistakes issue 36 found caught but unnamed
    ("09.backward_dq", "backward_dq", "D_FROM_D_OUTPUT", "delta = tl.sum(do * o, axis=1)", "delta = tl.sum(do, axis=1)"),
    ("09.backward_dq", "backward_dq", "D_WRONG_AXIS", "delta = tl.sum(do * o, axis=1)", "delta = tl.sum(do * o, axis=0)"),
    ("09.backward_dq", "backward_dq", "DS_SIGN_FLIPPED", "ds = p * (dp - delta[:, None])\n            dq",
     "ds = p * (delta[:, None] - dp)\n            dq"),
    ("09.backward_dq", "backward_dq", "KEY_LOOP_ONE_SHORT", "for start_k in range(0, end, BLOCK_K):",
     "for start_k in range(0, end - BLOCK_K, BLOCK_K):"),
    ("09.backward_dq", "backward_dq", "GRID_ROUNDED_DOWN", "dq_kernel[(triton.cdiv(L_q, block_q), BH)]",
     "dq_kernel[(L_q // block_q, BH)]"),
]


@pytest.mark.slow  # (14 kernels, each checked on the public and hidden cases: about 40 s interpreted)
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
             ("09.backward_dkdv", "backward_dkdv"), ("09.backward_dq", "backward_dq"),
             ("09.flash_function", "attention_and_gradients")]


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


#: The Function's mistakes, in the lesson's solution: (mistake, [(a line of the solution, what a learner wrote)])
FUNCTION_BUGS = [
    ("DK_DV_SWAPPED", [("return backward_dq(*saved), d_key, d_value,", "return backward_dq(*saved), d_value, d_key,")]),
    ("CAUSAL_DROPPED_IN_BACKWARD", [("ctx.block_q, ctx.block_k, ctx.causal)", "ctx.block_q, ctx.block_k, False)")]),
    ("CAUSAL_IGNORED", [("            if causal:\n                output, lse, _ = causal_forward",
                         "            if False:\n                output, lse, _ = causal_forward"),
                        ("ctx.block_q, ctx.block_k, ctx.causal)", "ctx.block_q, ctx.block_k, False)")]),
    ("DQ_MISSING", [("return backward_dq(*saved), d_key, d_value,", "return None, d_key, d_value,")]),
]


def _function_with(edits):
    source = _solutions()
    for right, wrong in edits:
        assert source.count(right) == 1, f"{right!r} is not one line of the solution"
        source = source.replace(right, wrong)
    return _run(source)["attention_and_gradients"]


@pytest.mark.slow  # (four Functions, each checked on the public cases: a few seconds interpreted)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("code, edits", FUNCTION_BUGS, ids=[b[0] for b in FUNCTION_BUGS])
def test_a_function_with_each_known_mistake_is_named(code, edits):
    verdict = evaluate_hidden("09.flash_function", _function_with(edits))
    assert verdict.status == FAILED and verdict.code == code, verdict.message


@pytest.mark.slow
def test_one_gradient_too_few_gets_a_crashed_verdict_in_autograds_words():
    """backward returns one value per argument of forward: one too few (or a tensor for the flag) is an error
    autograd raises in the check's call, a crashed verdict that quotes it, never a pass."""
    function = _function_with([("return backward_dq(*saved), d_key, d_value, None, None, None",
                                "return backward_dq(*saved), d_key, d_value, None, None")])
    verdict = evaluate("09.flash_function", function)
    assert verdict.status == CRASHED and "incorrect number of gradients" in verdict.message, verdict.message


@pytest.mark.slow
def test_kernels_that_read_d_output_as_contiguous_rows_fail_on_the_strided_case():
    """Exercises 6 and 7 hand their kernels contiguous d_outputs; here autograd's may not be: kernels that index
    it as rows without making it contiguous read it in the wrong order, and the check fails them."""
    function = _function_with([
        ("saved = (query, key, value, output, lse, d_output.contiguous(),", "saved = (query, key, value, output, lse, d_output,"),
    ] + [("output, d_output, lse = output.contiguous(), d_output.contiguous(), lse.contiguous()\n    BH, L_q, d = query.shape\n"
          "    L_k, d_v = key.shape[1], value.shape[2]\n    d_" + name,
          "output, lse = output.contiguous(), lse.contiguous()\n    BH, L_q, d = query.shape\n"
          "    L_k, d_v = key.shape[1], value.shape[2]\n    d_" + name) for name in ("key, d_value", "query = ")])
    verdict = evaluate("09.flash_function", function)
    assert verdict.status == FAILED, verdict.message


def _plain_function(backward_in_torch):
    """A right Function whose backward (and, unless `backward_in_torch`, forward too) computes in plain torch."""
    namespace = _run(_solutions())

    def scores(q, k, causal):
        s = (q @ k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        return s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf")) if causal else s

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, block_q, block_k, causal):
            if backward_in_torch:
                output, lse, *_ = (namespace["causal_forward"] if causal else namespace["flash_forward"])(
                    q, k, v, block_q, block_k)
            else:
                s = scores(q, k, causal)
                m = s.amax(-1, keepdim=True)
                lse = (m + torch.exp(s - m).sum(-1, keepdim=True).log()).squeeze(-1)
                output = torch.exp(s - lse[..., None]) @ v
            ctx.save_for_backward(q, k, v, output, lse)
            ctx.causal = causal
            return output

        @staticmethod
        def backward(ctx, d_output):
            q, k, v, output, lse = ctx.saved_tensors
            scale = 1 / math.sqrt(q.shape[-1])
            p = torch.exp(scores(q, k, ctx.causal) - lse[..., None])
            ds = p * (d_output @ v.transpose(1, 2) - (d_output * output).sum(-1, keepdim=True))
            return ds @ k * scale, ds.transpose(1, 2) @ q * scale, p.transpose(1, 2) @ d_output, None, None, None

    def attention_and_gradients(query, key, value, d_output, block_q, block_k, causal):
        leaves = [t.detach().requires_grad_() for t in (query, key, value)]
        result = Plain.apply(*leaves, block_q, block_k, causal)
        return (result.detach(), *torch.autograd.grad(result, leaves, d_output))

    return attention_and_gradients


@pytest.mark.slow
@pytest.mark.parametrize("backward_in_torch", [True, False], ids=["backward", "forward-and-backward"])
def test_a_right_function_whose_arithmetic_is_plain_torch_is_refused(backward_in_torch):
    """The kernel rule watches the whole call, autograd's backward included: a Function that leaves its
    backward (or all of it) to torch fails with the rule's verdict, though its numbers are right."""
    function = _plain_function(backward_in_torch)
    numbers = evaluate_hidden(dataclasses.replace(EXERCISES["09.flash_function"], forbidden=(),
                                                  id="09.flash_function.numbers"), function)
    assert numbers.status == PASSED, numbers.message  # (under another id no rule applies: the numbers are right)
    verdict = evaluate("09.flash_function", function)
    assert verdict.status == FAILED and verdict.code == "TORCH_OUTSIDE_KERNEL", verdict.message
