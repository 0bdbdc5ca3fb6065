"""The check's run-time rules (course_utils/exercises/rules.py), enforced where routes converge: each attack
from the reviews gets its named verdict in the notebook's check *and* through the grader's path (the same
Sandbox, its outcomes sent over the wire), a right answer still passes beside it, and what travels back
carries only the grader's own words.

Every function here is a learner's answer; the attacks are the ones issues 36 and 37 list."""

import _thread
import concurrent.futures
import ctypes
import socket
import subprocess
import sys
import threading
import types

import matplotlib.pyplot  # noqa: F401 (loaded before any check, as an earlier cell or test may: see _switch_backend)
import pytest
import sympy.parsing.sympy_parser as parser
import torch
import torch.nn.functional as F

import course_utils.decoding as decoding
import course_utils.tiled as tiled
from course_teacher.exercises import EXERCISES, prepare
from course_utils.exercises import FAILED, PASSED, evaluate, grading, rules, wire
from course_utils.exercises.sandbox import Sandbox
from wired import wired




def _both(exercise, function):
    """(the notebook's verdict, the grader's), which must agree on the status and the code."""
    notebook, grader = evaluate(exercise, function), wired(exercise, function)
    assert (notebook.status, notebook.code) == (grader.status, grader.code), (notebook.message, grader.message)
    return notebook


def _softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def _plain_rope(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


# ----------------------------------------------------------------------------- the controls


@pytest.mark.parametrize("exercise, function", [("01.softmax", _softmax), ("07.apply_rope", _plain_rope)])
def test_a_right_answer_passes_in_the_notebook_and_through_the_grader(exercise, function):
    assert _both(exercise, function).status == PASSED


# ----------------------------------------------------------------------------- forbidden operations, below names


def _softmax_by_sdpa(x):
    n = x.shape[-1]
    eye = torch.eye(n, dtype=x.dtype).expand(*x.shape[:-1], n, n)
    return F.scaled_dot_product_attention(x.unsqueeze(-2), eye, eye, scale=1).squeeze(-2)


def _softmax_without_torch_function(x):
    with torch._C.DisableTorchFunction():
        return torch.softmax(x, -1)


def _softmax_by_the_operator(x):
    return torch.ops.aten._softmax(x, -1, False)


@pytest.mark.parametrize("function", [_softmax_by_sdpa, _softmax_without_torch_function, _softmax_by_the_operator])
def test_a_softmax_by_any_route_is_refused_as_the_aten_operation_that_ran(function):
    verdict = _both("01.softmax", function)
    assert verdict.status == FAILED and verdict.code == "OPERATION", verdict.message
    assert "aten._s" in verdict.message


def test_fused_attention_under_disable_torch_function_is_refused():
    def gqa(query, key, value, causal):
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
        with torch._C.DisableTorchFunction():
            output = F.scaled_dot_product_attention(query, key, value, is_causal=causal)
        return output

    verdict = evaluate("07.gqa_attention", gqa)
    assert verdict.status == FAILED and verdict.code == "OPERATION", verdict.message


# ----------------------------------------------------------------------------- course functions, by identity


_COPIED_ROPE = types.FunctionType(decoding.apply_rope.__code__.replace(co_name="rotate"), vars(decoding), "rotate",
                                  decoding.apply_rope.__defaults__)


@pytest.mark.parametrize("exercise, function", [
    ("01.softmax", lambda x: tiled.online_softmax(x, ())),
    ("07.apply_rope", lambda x, positions: _COPIED_ROPE(x, positions)),
])
def test_a_course_function_that_solves_the_exercise_is_recognised_by_its_code(exercise, function):
    verdict = _both(exercise, function)
    assert verdict.status == FAILED and verdict.code == "SOLVER", verdict.message


def test_the_tracer_switched_off_before_a_course_function_is_refused():
    def untraced(x, positions):
        sys.settrace(None)
        return decoding.apply_rope(x, positions)

    verdict = _both("07.apply_rope", untraced)
    assert verdict.status == FAILED and verdict.code == "UNWATCHED", verdict.message


def test_popping_the_checks_function_mode_is_refused():
    def popped(x, positions):
        torch._C._pop_torch_function_stack()
        return _plain_rope(x, positions)

    verdict = _both("07.apply_rope", popped)
    assert verdict.status == FAILED and verdict.code == "UNWATCHED", verdict.message
    assert torch._C._len_torch_function_stack() == 0  # put back during the call, taken off after it


def test_popping_the_checks_dispatch_mode_is_refused():
    from torch.utils._python_dispatch import _pop_mode

    def popped(x):
        _pop_mode()
        return torch.ops.aten._softmax(x, -1, False)  # unseen by the dispatch mode it popped

    verdict = _both("01.softmax", popped)
    assert verdict.status == FAILED and verdict.code == "UNWATCHED", verdict.message


# ----------------------------------------------------------------------------- no text evaluators, no processes


def _parse_expr(x):
    return parser.parse_expr("__import__('course_utils').tiled.online_softmax", transformations=())(x, ())


def _timer(x):
    import torch.utils.benchmark as benchmark

    benchmark.Timer(stmt="pass").timeit(1)
    return _softmax(x)


def _collect_env(x):
    from torch.utils import collect_env

    collect_env.run("true")
    return _softmax(x)


def _switch_backend(x):
    import matplotlib.pyplot as plt

    plt.switch_backend("module://course_utils_no_such_backend")
    return _softmax(x)


def _import_module(x):
    import importlib

    importlib.import_module("course_utils_no_such_module")  # (importlib raises no audit event: the finder sees it)
    return _softmax(x)


def _file_loaded(x):
    import importlib.util
    import pathlib
    import tempfile

    path = pathlib.Path(tempfile.mkdtemp()) / "hidden.py"
    path.write_text("VALUE = 1\n")
    spec = importlib.util.spec_from_file_location("hidden", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # a file turned into code, past the finder
    return _softmax(x)


def _finder_removed(x):
    sys.meta_path.pop(0)
    return _softmax(x)


def _eval(x):
    return eval("x.exp() / x.exp().sum(-1, keepdim=True)")  # noqa: S307 (the attack)


def _subprocess(x):
    subprocess.run(["true"], check=False)
    return _softmax(x)


def _ctypes(x):
    ctypes.CDLL(None)
    return _softmax(x)


def _socket(x):
    socket.socket().close()
    return _softmax(x)


@pytest.mark.parametrize("function, code", [
    (_eval, "EVALUATOR"), (_parse_expr, "EVALUATOR"), (_timer, "EVALUATOR"), (_collect_env, "PROCESS"),
    (_subprocess, "PROCESS"), (_ctypes, "NATIVE"), (_socket, "SOCKET"), (_switch_backend, "IMPORT"),
    (_import_module, "IMPORT"), (_file_loaded, "EVALUATOR"), (_finder_removed, "UNWATCHED"),
])
def test_text_evaluators_processes_and_foreign_code_are_refused(function, code):
    verdict = _both("01.softmax", function)
    assert verdict.status == FAILED and verdict.code == code, verdict.message


def test_pil_unsafe_eval_is_refused():
    image_math = pytest.importorskip("PIL.ImageMath")
    evaluate_text = getattr(image_math, "unsafe_eval", None) or getattr(image_math, "eval")

    def pil(x):
        evaluate_text("1 + 1")
        return _softmax(x)

    verdict = _both("01.softmax", pil)
    assert verdict.status == FAILED and verdict.code == "EVALUATOR", verdict.message


# ----------------------------------------------------------------------------- one thread


def _thread_module(x):
    _thread.start_new_thread(lambda: None, ())
    return _softmax(x)


def _threading(x):
    found = []
    worker = threading.Thread(target=lambda: found.append(tiled.online_softmax(x, ())))
    worker.start()
    worker.join()
    return found[0]


def _executor(x):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(tiled.online_softmax, x, ()).result()


def _data_loader(x):
    loader = torch.utils.data.DataLoader(list(x), num_workers=1, batch_size=len(x))
    return _softmax(next(iter(loader)))


@pytest.mark.parametrize("function, codes", [
    (_thread_module, {"THREAD"}), (_threading, {"THREAD"}), (_executor, {"THREAD"}),
    (_data_loader, {"THREAD", "PROCESS", "IMPORT"}),
])
def test_threads_executors_and_workers_are_refused(function, codes):
    before = threading.active_count()
    verdict = _both("01.softmax", function)
    assert verdict.status == FAILED and verdict.code in codes, verdict.message
    assert threading.active_count() == before


def test_a_thread_started_during_the_call_is_seen_after_it_even_by_the_original_start():
    sandbox = Sandbox(exercise="01.softmax")
    started, done = threading.Event(), threading.Event()

    def worker():
        started.set()
        done.wait()

    def starts(x):
        _START(worker, ())  # the original, taken before the check: the thread runs on after the call
        started.wait()
        return _softmax(x)

    sandbox.call(starts, torch.randn(2, 3))
    done.set()
    assert ["THREAD", "threading"] in sandbox.refused


_START = _thread.start_new_thread


# ----------------------------------------------------------------------------- the policy and the wire


def test_every_refusal_code_has_a_message_in_both_languages():
    from course_utils.i18n import MESSAGES

    for code in rules.REFUSAL_CODES:
        entry = MESSAGES[f"check.refused.{code}"]
        assert entry["en"] and entry["zh"] and entry["en"] != entry["zh"]


def test_every_forbidden_operation_named_in_the_policy_is_one_torch_has_or_a_known_alias():
    found = [name for names in rules.FORBIDDEN_OPERATIONS.values() for name in names
             if hasattr(torch.ops.aten, name)]
    for core in ("_softmax", "_safe_softmax", "_log_softmax", "logsumexp", "_scaled_dot_product_flash_attention_for_cpu"):
        assert core in found, core  # the policy fails closed: the operations it depends on exist in this torch


def test_the_wire_keeps_only_the_graders_own_words_in_refusals():
    reference = prepare(EXERCISES["01.softmax"])
    outcomes = grading.collect(reference.calls, _softmax, None, eager=True)
    answer = wire.encode(outcomes)
    answer["refused"] = [["IMPORT", "leak_4x4x4_m2251"], ["SOLVER", "torch.leak"], ["NOT_A_CODE", ""],
                         ["TORCH_OUTSIDE_KERNEL", "aten.leak_m2251"], ["OPERATION", "aten._softmax"]]
    received = wire.decode(answer, reference, 10.0)
    assert received.refused == [["OPERATION", "aten._softmax"]]
    answer["refused"] = "EVALUATOR"
    with pytest.raises(wire.WireError):
        wire.decode(answer, reference, 10.0)


def test_no_rule_is_left_active_after_a_check():
    from course_utils.exercises import audit

    evaluate("01.softmax", _eval)
    compile("1", "<test>", "eval")  # the hook is quiet outside a check
    assert _thread.start_new_thread is _START and audit.Refused


# ----------------------------------------------------------------------------- an independent review (issue 37)
# Attacks no earlier test had, each aiming at full marks without solving, beside the honest answer (the
# controls above and test_the_honest_answer_passes_beside_the_leftovers_once_they_are_gone).


class _SoftmaxInBackward(torch.autograd.Function):
    """Zeros forward; the backward (which the check runs while it computes gradients) computes torch's softmax,
    returns its gradient and writes the softmax into the output the check has not yet sent: full marks in the
    grader before the gradient pass ran under the rules."""

    @staticmethod
    def forward(ctx, x):
        out = torch.zeros_like(x)
        ctx.save_for_backward(x)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        y = torch.softmax(x, -1)
        ctx.out.detach().copy_(y)
        return y * (grad - (grad * y).sum(-1, keepdim=True))


def test_a_softmax_in_a_custom_backward_is_refused_in_the_gradient_pass():
    verdict = wired("01.softmax", _SoftmaxInBackward.apply)  # seen by name, and as the aten operation
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "OPERATION"), verdict.message
    assert evaluate("01.softmax", _SoftmaxInBackward.apply).status == FAILED


def _softmax_in_a_hook(x):
    out = torch.zeros_like(x) + 0 * x
    x.register_hook(lambda grad: out.detach().copy_(torch.special.softmax(x.detach(), -1)) and None)
    return out


def test_a_softmax_in_a_tensor_hook_is_refused_in_the_gradient_pass():
    verdict = wired("01.softmax", _softmax_in_a_hook)
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "OPERATION"), verdict.message


class _FixesLater:
    """Hung on the input: when the check frees its copy of the arguments, __del__ writes torch's softmax into the
    result, out of every watch (before, the values of all cases were right by the time they were judged)."""

    def __init__(self, x, out):
        self.x, self.out = x.detach().clone(), out

    def __del__(self):
        self.out.detach().copy_(torch.softmax(self.x, -1))


def _fixed_by_a_finalizer(x):
    e = x.exp()
    out = e / e.sum(-1, keepdim=True)
    out.detach().mul_(0)
    x.keeper = _FixesLater(x, out)
    return out


def test_a_finalizer_cannot_change_a_result_before_it_is_judged():
    for verdict in (wired("01.softmax", _fixed_by_a_finalizer), evaluate("01.softmax", _fixed_by_a_finalizer)):
        assert verdict.status == FAILED and verdict.code != "GRADIENT", verdict.message  # the values are wrong


def _notebook_function(source, name):
    """A function defined as a notebook's cell defines it (its globals are no module's)."""
    namespace = {"torch": torch}
    exec(source, namespace)  # noqa: S102 (a cell's code)
    return namespace, namespace[name]


def test_a_thread_an_earlier_cell_started_fails_the_check_while_it_runs():
    namespace, loop = _notebook_function("stop = []\nimport time\ndef loop():\n    while not stop:\n"
                                         "        time.sleep(0.005)\n", "loop")
    worker = threading.Thread(target=loop)
    worker.start()
    try:
        for verdict in (wired("01.softmax", _softmax), evaluate("01.softmax", _softmax)):
            assert verdict.status == FAILED and verdict.code == "LEFT_RUNNING", verdict.message
    finally:
        namespace["stop"].append(True)
        worker.join()
    assert _both("01.softmax", _softmax).status == PASSED


@pytest.mark.parametrize("left", ["torch_function", "dispatch_mode", "dispatch_keys"])
def test_a_torch_switch_an_earlier_cell_left_on_fails_the_check(left):
    _, quiet = _notebook_function(  # a mode of the notebook's: it computes what the check's mode hands on, unseen
        "from torch.utils._python_dispatch import TorchDispatchMode\n"
        "class Quiet(TorchDispatchMode):\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        return func(*args, **(kwargs or {}))\n", "Quiet")
    guard = {"torch_function": torch._C.DisableTorchFunction, "dispatch_mode": quiet,
             "dispatch_keys": lambda: torch._C._ExcludeDispatchKeyGuard(
                 torch._C.DispatchKeySet(torch._C.DispatchKey.Python))}[left]()
    guard.__enter__()  # an earlier cell's, never left
    try:
        verdicts = [wired("01.softmax", _softmax_by_the_operator), evaluate("01.softmax", _softmax)]
    finally:
        guard.__exit__(None, None, None)
    for verdict in verdicts:
        assert verdict.status == FAILED and verdict.code == "LEFT_RUNNING", verdict.message
        assert left in verdict.message


def test_the_honest_answer_passes_beside_the_leftovers_once_they_are_gone():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):  # a library's mode (a test's, a profiler's), not the notebook's
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    torch.set_default_device("cpu")  # a default device is a torch mode the notebook may hold
    try:
        with Recorder():
            assert _both("01.softmax", _softmax).status == PASSED
    finally:
        torch.set_default_device(None)


def test_the_wire_keeps_left_running_with_the_graders_details_only():
    reference = prepare(EXERCISES["01.softmax"])
    answer = wire.encode(grading.collect(reference.calls, _softmax, None, eager=True))
    answer["refused"] = [["LEFT_RUNNING", "leak_m2251"], ["LEFT_RUNNING", "thread"]]
    assert wire.decode(answer, reference, 10.0).refused == [["LEFT_RUNNING", "thread"]]


_TRANSPOSED_LATER = {}  # filled by another statement than the function's: the scan follows no container


class _ScoresInBackward(torch.autograd.Function):
    """00.scores_einsum (no transpose may compute it) answered with zeros; the backward, which the check runs in
    its gradient pass, computes the scores with a transpose and writes them into the output."""

    @staticmethod
    def forward(ctx, q, k):
        out = q.new_zeros(q.shape[0], q.shape[2], q.shape[1], k.shape[1])
        ctx.save_for_backward(q, k)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k = ctx.saved_tensors
        qh, kh = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, L, D)
        ctx.out.detach().copy_(qh @ kh.transpose(-2, -1))
        return (grad @ kh).transpose(1, 2), (grad.transpose(-2, -1) @ qh).transpose(1, 2)


def test_a_forbidden_name_in_a_custom_backward_is_seen_in_the_gradient_pass():
    verdict = wired("00.scores_einsum", _ScoresInBackward.apply)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_gradient_pass_still_passes_the_honest_answer_where_autograd_is_forbidden():
    assert _both("00.scores_einsum", lambda q, k: torch.einsum("bqhd,bkhd->bhqk", q, k)).status == PASSED


def test_the_kernels_collect_writes_an_answer_the_grader_judges_and_leaves_collection_on(tmp_path):
    """course_utils.exercises.kernel.collect as the grader's command runs it (no garbage collection while it
    collects and encodes, on again after): the honest answer passes, the finalizer's fix arrives too late."""
    import gc

    from course_utils.exercises import kernel

    reference = prepare(EXERCISES["01.softmax"])
    wire.save(dict(reference.calls, time_limit=10.0), tmp_path / "calls.pt")
    for function, status in ((_softmax, PASSED), (_fixed_by_a_finalizer, FAILED)):
        kernel.collect({"my_softmax": function}, "my_softmax", str(tmp_path / "calls.pt"), str(tmp_path / "answer.pt"))
        assert gc.isenabled()
        received = wire.decode(wire.load(tmp_path / "answer.pt"), reference, 10.0)
        verdict = grading.judge(reference, received)
        assert verdict.status == status, verdict.message
