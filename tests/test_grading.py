"""Hostile learners against the check engine (grading.py, sandbox.py).

Each test hands `evaluate` a function that tries to pass a wrong answer, to break the notebook, or
to hang it, and proves the verdict is right and the world is as it was afterwards (the autouse
fixture at the top checks the world after every test; `_changes_when_called_bare` proves the
hostile function really changes it, so that the checks are not vacuous).
"""

import builtins
import dataclasses
import io
import math
import re
import signal
import sys
import time
import types
import warnings

import pytest
import torch
import torch.nn.functional as F

import course_utils.attention

# `evaluate` here is the check engine judged against the teacher's references, looked up when called:
# a test can change an exercise (its forbidden names, its reference) and see the engine follow. (What a
# notebook's check does, against the public data, is the same engine: tests/test_exercises.py.)
from course_teacher.exercises import EXERCISES, TRANSPOSES, Exercise, evaluate, register
from course_utils import i18n
from course_utils.attention import scaled_dot_product_attention as imported_early  # as a learner might
from course_utils.exercises import CRASHED, FAILED, PASSED, check, public, sandbox
from course_utils.exercises.grading import fallback_names, names_of

# ----------------------------------------------------------------------------- right answers

def attention_(query, key, value):  # 01.scaled_dot
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ value, weights


def softmax_(scores):  # 01.softmax
    exponentials = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return exponentials / exponentials.sum(dim=-1, keepdim=True)


def masked_softmax_(scores, keep_mask):  # 02.masked_softmax
    nothing_kept = ~keep_mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~keep_mask, float("-inf")).masked_fill(nothing_kept, 0.0)
    return scores.softmax(dim=-1).masked_fill(nothing_kept, 0.0)


def causal_(L_q, L_k):  # 02.causal_mask
    return torch.ones(L_q, L_k, dtype=torch.bool).tril()


def alignment_(weights, keep_mask):  # 03.alignment
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(dim=-1)
    return best.masked_fill(~keep_mask.any(dim=-1), -1)


def self_attention_(x, w_q, w_k, w_v):  # 03.self_attention
    return attention_(x @ w_q, x @ w_k, x @ w_v)


def scores_einsum_(q, k):  # 00.scores_einsum
    return torch.einsum("bqhd,bkhd->bhqk", q, k)


RIGHT = {
    "01.scaled_dot": attention_, "01.softmax": softmax_, "02.masked_softmax": masked_softmax_,
    "02.causal_mask": causal_, "03.alignment": alignment_, "03.self_attention": self_attention_,
    "00.scores_einsum": scores_einsum_,
}

# ----------------------------------------------------------------------------- the world, after every test

ORIGINAL = {
    (torch, "softmax"): torch.softmax,
    (torch, "allclose"): torch.allclose,
    (torch, "set_default_dtype"): torch.set_default_dtype,
    (torch.Tensor, "softmax"): torch.Tensor.softmax,
    (course_utils.attention, "scaled_dot_product_attention"): course_utils.attention.scaled_dot_product_attention,
    (builtins, "sum"): sum,
}


ORIGINAL_SDPA_CODE = course_utils.attention.scaled_dot_product_attention.__code__


def _world_is_as_it_was():
    for (owner, name), value in ORIGINAL.items():
        assert getattr(owner, name) is value, f"{name} was not restored"
    assert course_utils.attention.scaled_dot_product_attention.__code__ is ORIGINAL_SDPA_CODE
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    assert not torch.are_deterministic_algorithms_enabled() and not torch.is_anomaly_enabled()
    assert torch._C._len_torch_function_stack() == 0
    assert torch.zeros(1).device.type == "cpu" and torch.get_default_device().type == "cpu"
    assert sys.getprofile() is None and sys.gettrace() is None
    assert sorted(EXERCISES) == SORTED_IDS and all(EXERCISES[e] is SPECS[e] for e in SORTED_IDS)


SORTED_IDS = sorted(EXERCISES)
SPECS = dict(EXERCISES)


@pytest.fixture(autouse=True)
def the_world_is_restored_after_every_test():
    _world_is_as_it_was()
    yield
    _world_is_as_it_was()


def _changes_when_called_bare(function, exercise):
    """What `function` changes when called outside the check (on the exercise's first case); the
    sandbox's own snapshot puts it back. Proves a hostile function really is hostile."""
    spec = EXERCISES[exercise]
    first = spec.cases(torch.Generator().manual_seed(spec.seed))[0]
    saved = sandbox.snapshot()
    try:
        function(*first)
    except BaseException:  # noqa: BLE001  (a hostile function may raise anything but KeyboardInterrupt)
        pass
    finally:
        changed = sandbox.restore(saved)
    assert changed, "the function changes nothing: the test proves nothing"
    return changed


def _first_case(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))[0]


# ----------------------------------------------------------------------------- patching torch and the package

def test_replacing_torch_softmax_and_returning_matching_garbage_fails():
    def hostile(query, key, value):
        torch.softmax = lambda scores, dim=-1, **kwargs: torch.full_like(scores, 0.5)
        weights = torch.softmax(query @ key.transpose(-2, -1), dim=-1)
        return weights @ value, weights

    _changes_when_called_bare(hostile, "01.scaled_dot")
    verdict = evaluate("01.scaled_dot", hostile)
    assert verdict.status == FAILED, verdict.message
    assert "torch.softmax (replaced)" in verdict.message and "put everything back" in verdict.message
    assert torch.softmax is ORIGINAL[torch, "softmax"]


def test_replacing_torch_allclose_to_always_agree_fails():
    def hostile(x, w_q, w_k, w_v):
        torch.allclose = lambda *args, **kwargs: True
        torch.Tensor.allclose = lambda *args, **kwargs: True
        B, L, _ = x.shape
        return torch.zeros(B, L, w_v.shape[1]), torch.zeros(B, L, L)

    verdict = evaluate("03.self_attention", hostile)
    assert verdict.status == FAILED and "torch.allclose (replaced)" in verdict.message, verdict.message
    assert torch.allclose(torch.zeros(1), torch.ones(1)) is False


def test_replacing_the_packages_reference_and_returning_matching_garbage_fails():
    def garbage_attention(query, key, value, keep_mask=None, scale=None):
        weights = torch.ones(*query.shape[:-1], key.shape[-2], dtype=value.dtype) / key.shape[-2]
        return weights @ value, weights

    def hostile(x, w_q, w_k, w_v):  # 03.self_attention's reference calls the package's function
        course_utils.attention.scaled_dot_product_attention = garbage_attention
        return course_utils.attention.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)

    verdict = evaluate("03.self_attention", hostile)
    assert verdict.status == FAILED, verdict.message
    assert "course_utils.attention.scaled_dot_product_attention (replaced)" in verdict.message
    assert course_utils.attention.scaled_dot_product_attention is ORIGINAL[course_utils.attention,
                                                                          "scaled_dot_product_attention"]


def test_swapping_the_body_of_the_packages_reference_is_undone_before_the_next_check():
    def uniform(query, key, value, keep_mask=None, scale=None):
        weights = torch.ones(*query.shape[:-1], key.shape[-2], dtype=value.dtype) / key.shape[-2]
        return weights @ value, weights

    def poisons(query, key, value):  # the same function object, another body: no attribute is rebound
        course_utils.attention.scaled_dot_product_attention.__code__ = uniform.__code__
        return uniform(query, key, value)

    def matches_the_poison(x, w_q, w_k, w_v):  # would pass if 03.self_attention's reference were poisoned
        return uniform(x @ w_q, x @ w_k, x @ w_v)

    verdict = evaluate("01.scaled_dot", poisons)
    assert verdict.status == FAILED and "scaled_dot_product_attention.__code__ (replaced)" in verdict.message
    assert course_utils.attention.scaled_dot_product_attention.__code__ is ORIGINAL_SDPA_CODE
    assert evaluate("03.self_attention", matches_the_poison).status == FAILED


_SDPA = course_utils.attention.scaled_dot_product_attention
# every route that sets a function's parts: the sandbox reads the parts again only after CPython's audit event for
# such a write (audit.attribute_writes), so each route must raise it
_BODY_SWAPS = {
    "attribute": lambda body: setattr(_SDPA, "__code__", body.__code__),
    "object.__setattr__": lambda body: object.__setattr__(_SDPA, "__code__", body.__code__),
    "the descriptor": lambda body: types.FunctionType.__code__.__set__(_SDPA, body.__code__),
    "defaults": lambda body: setattr(_SDPA, "__defaults__", (None, 0.0)),
}


@pytest.mark.parametrize("route", _BODY_SWAPS)
def test_a_swapped_body_or_default_is_seen_and_undone_by_every_route_in_every_call(route):
    def uniform(query, key, value, keep_mask=None, scale=None):
        weights = torch.ones(*query.shape[:-1], key.shape[-2], dtype=value.dtype) / key.shape[-2]
        return weights @ value, weights

    def poisons(query, key, value):
        _BODY_SWAPS[route](uniform)
        return uniform(query, key, value)

    defaults = _SDPA.__defaults__
    for _ in range(2):  # the second call's snapshot reads the parts the first call's restore put back
        verdict = evaluate("01.scaled_dot", poisons)
        assert verdict.status == FAILED and "scaled_dot_product_attention.__code__ (replaced)" in verdict.message
        assert _SDPA.__code__ is ORIGINAL_SDPA_CODE and _SDPA.__defaults__ is defaults


def test_swapping_how_a_check_reads_its_data_is_undone():
    original = public.load

    def hostile(scores):
        public.load = lambda exercise: None
        return scores

    verdict = evaluate("01.softmax", hostile)
    assert verdict.status == FAILED and "course_utils.exercises.public.load (replaced)" in verdict.message, verdict.message
    assert public.load is original


def test_replacing_builtins_does_not_fail_a_right_answer():
    def patches_sum_then_answers(scores):
        builtins.sum = lambda *args, **kwargs: 0
        return softmax_(scores)

    verdict = evaluate("01.softmax", patches_sum_then_answers)
    assert verdict.status == PASSED and "builtins.sum (replaced)" in verdict.message, verdict.message


def test_a_torch_function_mode_left_active_is_removed_and_cannot_fake_a_pass():
    from torch.overrides import TorchFunctionMode

    class Agreeable(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.allclose, torch.equal):
                return True
            return func(*args, **(kwargs or {}))

    def hostile(query, key, value):
        Agreeable().__enter__()  # never exited
        return torch.zeros(*query.shape[:-1], value.shape[-1]), torch.zeros(*query.shape[:-1], key.shape[-2])

    verdict = evaluate("01.scaled_dot", hostile)
    assert verdict.status == FAILED and "TorchFunctionMode" in verdict.message, verdict.message


# ----------------------------------------------------------------------------- global settings

def test_setting_the_default_dtype_is_undone_and_reported():
    def sets_float64_then_answers(scores):
        torch.set_default_dtype(torch.float64)
        return softmax_(scores)  # computed from its inputs: still float32

    verdict = evaluate("01.softmax", sets_float64_then_answers)
    assert verdict.status == PASSED and "the default dtype" in verdict.message, verdict.message
    assert "torch.Storage" not in verdict.message  # set_default_dtype's own doing, not worth a word
    assert torch.get_default_dtype() == torch.float32

    def sets_float64_and_builds_a_new_tensor(scores):
        torch.set_default_dtype(torch.float64)
        return torch.zeros(scores.shape) + softmax_(scores)  # float64 now

    verdict = evaluate("01.softmax", sets_float64_and_builds_a_new_tensor)
    assert verdict.status == FAILED and "dtype float32" in verdict.message and "float64" in verdict.message


def test_turning_gradients_off_fails_as_no_graph_and_is_undone():
    def hostile(query, key, value):
        torch.set_grad_enabled(False)
        return attention_(query, key, value)

    verdict = evaluate("01.scaled_dot", hostile)
    assert verdict.code == "NO_GRAPH" and "grad mode" in verdict.message, verdict.message
    assert torch.is_grad_enabled()


def test_a_check_called_with_gradients_off_still_compares_gradients():
    def detached(query, key, value):
        return tuple(t.detach() for t in attention_(query, key, value))

    with torch.no_grad():
        verdict = evaluate("01.scaled_dot", detached)
        assert not torch.is_grad_enabled()  # the notebook's setting is left as it was
    assert verdict.code == "NO_GRAPH", verdict.message


#: Guards a hostile function entered and keeps for good: kept for the whole run, as a notebook's would be (a
#: guard entered under the check's dispatch mode restores, when it dies, the dispatch keys of that moment).
_KEPT = []


def test_entering_inference_mode_for_good_is_undone():
    kept = _KEPT

    def hostile(scores):
        mode = torch.inference_mode()
        mode.__enter__()
        kept.append(mode)  # kept alive: inference mode stays on
        return softmax_(scores)

    verdict = evaluate("01.softmax", hostile)
    assert verdict.code == "NO_GRAPH" and "inference mode" in verdict.message, verdict.message
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_deterministic_algorithms_anomaly_detection_and_the_default_device_are_undone():
    torch.use_deterministic_algorithms(False)  # its first call imports torch._inductor: seconds, not the learner's
    def hostile(scores):
        torch.use_deterministic_algorithms(True)
        torch.autograd.set_detect_anomaly(True)
        torch.set_default_device("meta")
        torch.set_num_threads(1)
        return softmax_(scores)

    verdict = evaluate("01.softmax", hostile)
    assert verdict.status == PASSED, verdict.message
    for what in ("deterministic algorithms", "anomaly detection", "the default device"):
        assert what in verdict.message


def test_no_grad_inside_and_detach_fail_as_no_graph():
    def no_grad_inside(scores, keep_mask):
        with torch.no_grad():
            return masked_softmax_(scores, keep_mask)

    def detached(scores, keep_mask):
        return masked_softmax_(scores, keep_mask).detach()

    for function in (no_grad_inside, detached):
        verdict = evaluate("02.masked_softmax", function)
        assert verdict.status == FAILED and verdict.code == "NO_GRAPH", verdict.message
        assert "computation graph" in verdict.message and "test case 1 (scores" in verdict.message


def test_other_gradients_fail_naming_the_argument():
    class WrongBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, scores):
            return softmax_(scores)

        @staticmethod
        def backward(ctx, grad):
            return 2 * grad

    def straight_through(scores):  # the right values, attached, but with a zero gradient
        return softmax_(scores).detach() + 0 * scores

    for function in (WrongBackward.apply, straight_through):
        verdict = evaluate("01.softmax", function)
        assert verdict.status == FAILED and verdict.code == "GRADIENT", verdict.message
        assert "gradient with respect to '" in verdict.message


def test_the_gradient_message_names_the_argument_by_the_learners_name():
    def straight_through(query, key, value):
        output, weights = attention_(query, key, value)
        return output, weights.detach() + 0 * query.sum()  # attached, but not through the softmax

    verdict = evaluate("01.scaled_dot", straight_through)
    assert verdict.code == "GRADIENT" and "with respect to 'query'" in verdict.message, verdict.message


def test_an_in_place_edit_autograd_refuses_fails_with_its_reason():
    def in_place(scores):
        exponentials = (scores - scores.amax(dim=-1, keepdim=True)).exp()
        exponentials /= exponentials.sum(dim=-1, keepdim=True)  # overwrites what exp's backward needs
        return exponentials

    verdict = evaluate("01.softmax", in_place)
    assert verdict.status == FAILED and verdict.code == "BACKWARD", verdict.message
    assert "inplace" in verdict.message


# ----------------------------------------------------------------------------- exact dtypes and types

def test_float_where_int64_is_expected_fails_naming_both_dtypes():
    verdict = evaluate("03.alignment", lambda w, m: alignment_(w, m).float())
    assert verdict.status == FAILED and "int64" in verdict.message and "float32" in verdict.message


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.uint8])
def test_numbers_where_bool_is_expected_fail_naming_both_dtypes(dtype):
    verdict = evaluate("02.causal_mask", lambda L_q, L_k: causal_(L_q, L_k).to(dtype))
    assert verdict.status == FAILED and "bool" in verdict.message, verdict.message
    assert str(dtype).replace("torch.", "") in verdict.message


def test_float64_where_float32_is_expected_fails():
    verdict = evaluate("01.softmax", lambda s: softmax_(s.double()))
    assert verdict.status == FAILED and "float64" in verdict.message and "float32" in verdict.message


def test_a_tensor_subclass_that_lies_fails():
    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func in (torch.allclose, torch.equal, torch.Tensor.__eq__):
                return True
            return super().__torch_function__(func, types, args, kwargs)

    for values in (torch.zeros_like, softmax_):  # garbage, and even the right values
        verdict = evaluate("01.softmax", lambda scores: values(scores).as_subclass(Liar))
        assert verdict.status == FAILED and "Liar" in verdict.message and "subclass" in verdict.message


def test_a_missing_return_gets_a_hint():
    def forgot(scores):
        softmax_(scores)

    def forgot_tuple(query, key, value):
        attention_(query, key, value)

    assert "forget to `return`" in evaluate("01.softmax", forgot).message
    assert "forget to `return`" in evaluate("01.scaled_dot", forgot_tuple).message


# ----------------------------------------------------------------------------- exits, hangs, prints, errors

def test_sys_exit_becomes_a_crashed_verdict():
    for function in (lambda s: sys.exit(), lambda s: sys.exit(3), lambda s: exit()):
        verdict = evaluate("01.softmax", function)
        assert verdict.status == CRASHED and verdict.code == "SystemExit" and "sys.exit()" in verdict.message


def test_keyboard_interrupt_still_stops_the_check_and_the_world_is_restored():
    def interrupted(scores):
        torch.softmax = None
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate("01.softmax", interrupted)
    assert torch.softmax is ORIGINAL[torch, "softmax"]


def _loops(scores):
    while True:
        pass


def _swallows_exceptions(scores):
    while True:
        try:
            sum(range(1000))
        except Exception:  # noqa: BLE001 - the learner's, trying to swallow the time limit
            pass


def _returns_after_the_alarm(scores):
    try:
        while True:
            pass
    except BaseException:  # noqa: BLE001 - swallows the time limit once, then returns a right answer
        return softmax_(scores)


def _swallows_base_exception(scores):  # ran 15 s and 40 s against the 50 ms alarm alone
    while True:
        try:
            sum(range(1000))
        except BaseException:  # noqa: BLE001
            pass


def _bare_except_retries(scores):  # the retry loop a learner writes, spelt `except:`
    while True:
        try:
            return softmax_(scores.view(-1, 7))  # fails on most shapes, and is retried for ever
        except:  # noqa: E722
            continue


def _nested_handlers(scores):
    while True:
        try:
            try:
                while True:
                    try:
                        sum(range(10))
                    except BaseException:  # noqa: BLE001
                        pass
            except BaseException:  # noqa: BLE001
                pass
        except BaseException:  # noqa: BLE001
            pass


def _handler_removes_the_tracer(scores):  # what beats a time limit raised from a trace function
    while True:
        try:
            try:
                while True:
                    sum(range(10))
            except BaseException:  # noqa: BLE001
                pass
        except BaseException:  # noqa: BLE001
            sys.settrace(None)
            sys.setprofile(None)


def _recursive_handlers(scores):
    def again(depth):
        try:
            again(depth + 1)
        except BaseException:  # noqa: BLE001
            again(depth + 1)

    again(0)


def _suppressed(scores):
    import contextlib

    while True:
        with contextlib.suppress(BaseException):
            sum(range(1000))


def _finally_continue(scores):
    while True:
        try:
            sum(range(1000))
        finally:
            continue  # noqa: B012 - swallows whatever was raised


def _generator_swallows(scores):
    def numbers():
        while True:
            try:
                yield 1
            except BaseException:  # noqa: BLE001
                pass

    for _ in numbers():
        try:
            pass
        except BaseException:  # noqa: BLE001
            pass


def _sleeps(scores):
    while True:
        try:
            time.sleep(1)
        except BaseException:  # noqa: BLE001
            pass


LOOPS = [_loops, _swallows_exceptions, _returns_after_the_alarm, _swallows_base_exception, _bare_except_retries,
         _nested_handlers, _handler_removes_the_tracer, _recursive_handlers, _suppressed, _finally_continue,
         _generator_swallows, _sleeps]


@pytest.mark.parametrize("function", LOOPS, ids=[f.__name__.strip("_") for f in LOOPS])
def test_a_function_that_never_ends_gets_a_time_limit_verdict(function):
    """However its handlers catch the time limit (see sandbox.CallTimer), within a fraction of a second
    of it (the recursive one unwinds about a thousand frames, each raising anew)."""
    handler, started = signal.getsignal(signal.SIGALRM), time.monotonic()
    verdict = evaluate("01.softmax", function, time_limit=0.2)
    assert time.monotonic() - started < 5
    assert verdict.status == CRASHED and verdict.code == "TIME_LIMIT", verdict.message
    assert "0.2 s" in verdict.message and "test case 1 (scores" in verdict.message
    assert "put everything back" not in verdict.message  # the learner's own `with` could not undo its settings
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == handler


def test_the_time_limit_ends_a_loop_of_long_torch_operations_when_one_returns(one_thread):
    """A torch operation in C is not interrupted: the call ends as the operation running at the
    limit returns, raising there."""
    a = torch.randn(700, 700)
    started = time.monotonic()
    for _ in range(5):
        a @ a @ a
    operation = (time.monotonic() - started) / 5

    def multiplies(scores):
        while True:
            try:
                a @ a @ a
            except BaseException:  # noqa: BLE001
                pass

    started = time.monotonic()
    verdict = evaluate("01.softmax", multiplies, time_limit=0.2)
    assert verdict.code == "TIME_LIMIT", verdict.message
    assert time.monotonic() - started < 0.2 + 4 * operation + 2


def test_a_backward_pass_that_never_ends_gets_a_time_limit_verdict():
    class Endless(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return softmax_(x)

        @staticmethod
        def backward(ctx, grad):
            while True:
                try:
                    sum(range(1000))
                except BaseException:  # noqa: BLE001
                    pass

    started = time.monotonic()
    verdict = evaluate("01.softmax", Endless.apply, time_limit=0.2)
    assert time.monotonic() - started < 5
    assert verdict.code == "TIME_LIMIT", verdict.message


def test_a_right_answers_check_pays_nothing_for_the_time_limit(monkeypatch):
    """Until the time is up no handler runs and no tracer is set: a right answer runs as fast as
    without the limit."""
    fired, traced = [], []
    original = sandbox.CallTimer._fire
    monkeypatch.setattr(sandbox.CallTimer, "_fire", lambda self, *args: fired.append(1) or original(self, *args))

    def right(x, w_q, w_k, w_v):  # (an exercise that forbids no Python function, whose calls a tracer watches)
        traced.append((sys.gettrace(), sys.getprofile()))
        return self_attention_(x, w_q, w_k, w_v)

    assert evaluate("03.self_attention", right).status == PASSED
    assert fired == [] and set(traced) == {(None, None)}


def test_the_default_time_limit_is_ten_seconds_and_a_right_answer_is_far_below_it():
    assert sandbox.TIME_LIMIT == 10.0
    assert evaluate("01.softmax", softmax_, time_limit=0.5).status == PASSED


def test_printed_output_is_capped_over_the_whole_check(capsys):
    def chatty(scores):
        print("x" * 1_000_000)
        sys.stderr.write("y" * 1_000_000)
        for _ in range(10_000):
            print("line")
        return softmax_(scores)

    started = time.monotonic()
    check("01.softmax", chatty)
    out, err = capsys.readouterr()
    assert time.monotonic() - started < 5
    cut = "your function printed more; the check cut the rest"
    assert (out + err).count(cut) == 1
    printed = (out + err).replace(cut, "").replace("…", "").replace("✔ 01.softmax: passed on", "")
    assert printed.count("x") + printed.count("y") + printed.count("line") * 4 <= sandbox.OUTPUT_LIMIT
    assert "passed" in out  # the verdict itself is never cut


def test_replacing_sys_stdout_is_undone(capsys):
    def hostile(scores):
        sys.stdout = io.StringIO()
        return softmax_(scores)

    check("01.softmax", hostile)
    assert "passed" in capsys.readouterr().out and "sys.stdout" in evaluate("01.softmax", hostile).message


def test_a_learners_warnings_are_shown_once(capsys):
    def careful(scores):
        warnings.warn("look out")
        return softmax_(scores)

    verdict = evaluate("01.softmax", careful)
    assert verdict.status == PASSED and capsys.readouterr().err.count("UserWarning: look out") == 1


def test_not_implemented_on_one_case_only_is_incomplete_not_unattempted():
    calls = []

    def partly(scores):
        calls.append(scores.shape)
        if len(calls) == 3:
            raise NotImplementedError("the large scores")
        return softmax_(scores)

    verdict = evaluate("01.softmax", partly)
    assert verdict.status == CRASHED and verdict.code == "NotImplementedError", verdict.message
    assert "incomplete" in verdict.message and "test case 3 (scores" in verdict.message


def test_key_T_on_three_axes_gets_a_hint_every_time():
    def with_T(query, key, value):
        weights = torch.softmax(query @ key.T / math.sqrt(query.shape[-1]), dim=-1)
        return weights @ value, weights

    for _ in range(2):  # torch warns once per process; the check hints every time
        verdict = evaluate("01.scaled_dot", with_T)
        assert verdict.status != PASSED and "`.transpose(-2, -1)`" in verdict.message and "`.mT`" in verdict.message

    def with_mT(query, key, value):
        return attention_(query, key.mT.mT, value)

    verdict = evaluate("01.scaled_dot", with_mT)
    assert verdict.status == PASSED and ".transpose(-2, -1)" not in verdict.message


def test_in_place_edits_of_the_inputs_fail_naming_the_argument_and_reach_no_other_call():
    seen = []

    def edits_in_place(scores, keep_mask):
        seen.append(scores.clone())
        nothing_kept = ~keep_mask.any(dim=-1, keepdim=True)
        scores.masked_fill_(~keep_mask, float("-inf")).masked_fill_(nothing_kept, 0.0)
        return scores.softmax(dim=-1).masked_fill(nothing_kept, 0.0)

    def zeroes_its_inputs(weights, keep_mask):
        result = alignment_(weights, keep_mask)
        keep_mask.zero_()
        return result

    verdict = evaluate("02.masked_softmax", edits_in_place)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message
    assert "changed its argument `scores` in place" in verdict.message and "`scores = scores.clone()`" in verdict.message
    assert "test case 1 (scores (4, 4, 4), keep_mask (4, 4, 4))" in verdict.message
    first_run = [t.clone() for t in seen]
    assert evaluate("02.masked_softmax", edits_in_place).code == "INPUT_MODIFIED"
    assert all(torch.equal(a, b) for a, b in zip(first_run, seen[len(first_run):]))  # fresh copies each time
    verdict = evaluate("03.alignment", zeroes_its_inputs)
    assert verdict.code == "INPUT_MODIFIED" and "`keep_mask`" in verdict.message, verdict.message


@pytest.mark.parametrize("edit", [
    lambda t: t.add_(1), lambda t: t.unsqueeze_(0), lambda t: t.transpose_(-2, -1), lambda t: t.__setitem__(0, 0.5),
    lambda t: setattr(t, "data", t.data.double()), lambda t: t.set_(torch.zeros(2)), lambda t: t.mul_(1).neg_().neg_().add_(1e-3),
], ids=["add_", "unsqueeze_", "transpose_", "setitem", "data-dtype", "set_", "tiny"])
def test_every_kind_of_change_to_an_argument_is_seen(edit):
    """Values, shape, layout and dtype: whatever the function changes in what it was given."""
    def changes_scores(scores):
        result = softmax_(scores)
        with torch.no_grad():
            edit(scores)
        return result

    verdict = evaluate("01.softmax", changes_scores)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message


def test_a_change_undone_before_returning_is_no_change_and_nan_equals_nan():
    def restores(scores):
        saved = scores.clone()
        with torch.no_grad():
            scores.mul_(2)
            scores.copy_(saved)
        return softmax_(scores)

    assert evaluate("01.softmax", restores).status == PASSED
    from course_utils.exercises.grading import changed_arguments, same_value

    nan = torch.tensor([1.0, float("nan")])
    assert same_value(nan, nan.clone()) and not same_value(nan, torch.tensor([1.0, 2.0]))
    assert not same_value(torch.tensor([0.0]), torch.tensor([-0.0]))  # bit for bit
    assert not same_value(torch.ones(2), torch.ones(2, dtype=torch.float64)) and not same_value(torch.ones(2), [1.0, 1.0])
    assert same_value([1, (2, torch.zeros(1))], [1, (2, torch.zeros(1))]) and not same_value([1, 2], [1, 2, 3])
    assert same_value({"a": 1}, {"a": 1}) and not same_value({"a": 1}, {"a": 2}) and same_value(None, None)
    assert changed_arguments((torch.zeros(2), 3, [1]), (torch.zeros(2), 3, [1, 2])) == [2]


def test_an_argument_changed_in_place_is_named_in_chinese_too():
    i18n.set_language("zh")

    def decrements(lengths, max_len):
        lengths -= 0  # a no-op: not a change
        lengths.sub_(1).add_(1)  # and back: not a change
        positions = torch.arange(max_len)
        lengths.clamp_(max=max_len - 1)  # changes the lengths equal to max_len
        return (positions < lengths[:, None])[:, None, None, :]

    verdict = evaluate("00.padding_mask", decrements)
    assert verdict.code == "INPUT_MODIFIED", verdict.message
    assert "原地修改了参数 `lengths`" in verdict.message and "`lengths = lengths.clone()`" in verdict.message


# ----------------------------------------------------------------------------- forbidden calls

@pytest.fixture
def forbid(monkeypatch):
    """forbid(exercise, names): the exercise with `forbidden` set to `names`, for this test."""

    def set_forbidden(exercise, names):
        monkeypatch.setitem(EXERCISES, exercise, dataclasses.replace(EXERCISES[exercise], forbidden=names))

    yield set_forbidden
    monkeypatch.undo()


SDPA = ("F.scaled_dot_product_attention", "course_utils.attention.scaled_dot_product_attention")


def test_calling_a_forbidden_torch_function_fails_naming_it(forbid):
    forbid("01.scaled_dot", SDPA)

    def with_torch(query, key, value):  # the right output, through torch's own function
        output = F.scaled_dot_product_attention(query, key, value)
        return output, attention_(query, key, value)[1]

    verdict = evaluate("01.scaled_dot", with_torch)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "`F.scaled_dot_product_attention`" in verdict.message
    assert evaluate("01.scaled_dot", attention_).status == PASSED


def test_the_packages_reference_is_caught_however_it_was_imported(forbid):
    forbid("01.scaled_dot", SDPA)
    for function in (imported_early, lambda q, k, v: imported_early(q, k, v),
                     lambda q, k, v: course_utils.attention.scaled_dot_product_attention(q, k, v)):
        verdict = evaluate("01.scaled_dot", function)
        assert verdict.code == "FORBIDDEN" and "course_utils.attention.scaled_dot_product_attention" in verdict.message


@pytest.mark.parametrize("function", [
    lambda q, k: q.transpose(1, 2) @ k.permute(0, 2, 3, 1),
    lambda q, k: torch.transpose(q, 1, 2) @ torch.transpose(k, 1, 2).transpose(-2, -1),
    lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3)),
    lambda q, k: torch.einsum("bqhd,bkhd->bhqk", q, k).mT.mT,
    lambda q, k: torch.einsum("bhqd,bhdk->bhqk", q.swapaxes(1, 2), k.movedim(1, 3).transpose(1, 2)),
], ids=["transpose-permute", "torch.transpose", "permute", "mT", "swapaxes-movedim"])
def test_no_transpose_means_none(forbid, function):
    forbid("00.scores_einsum", TRANSPOSES)
    verdict = evaluate("00.scores_einsum", function)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert evaluate("00.scores_einsum", scores_einsum_).status == PASSED


def test_a_forbidden_name_must_name_something():
    with pytest.raises(ValueError, match="no attribute"):
        register(Exercise("99.nothing", abs, lambda g: [], forbidden=("torch.no_such_function",)))
    with pytest.raises(ValueError, match="tuple of names"):
        register(Exercise("99.nothing", abs, lambda g: [], forbidden="torch.softmax"))
    assert "99.nothing" not in EXERCISES


def test_every_reference_runs_before_any_learner_code(monkeypatch):
    order = []
    spec = EXERCISES["01.softmax"]

    def reference(scores):
        order.append("reference")
        return spec.reference(scores)

    def learner(scores):
        order.append("learner")
        return softmax_(scores)

    monkeypatch.setitem(EXERCISES, "01.softmax", dataclasses.replace(spec, reference=reference))
    assert evaluate("01.softmax", learner).status == PASSED
    assert "reference" in order and "learner" in order
    assert order.index("learner") > max(i for i, who in enumerate(order) if who == "reference")
    monkeypatch.undo()


# ----------------------------------------------------------------------------- messages

def test_a_failure_names_the_cases_arguments_and_their_shapes():
    def wrong_shape(query, key, value):
        output, weights = attention_(query, key, value)
        return output.unsqueeze(0), weights

    spec = EXERCISES["01.scaled_dot"]
    cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    label = ", ".join(f"{name} {tuple(t.shape)}" for name, t in zip(("query", "key", "value"), cases[0]))
    assert f"Case 1 ({label}): " in evaluate("01.scaled_dot", wrong_shape).message
    i18n.set_language("zh")
    label = "，".join(f"{name} {tuple(t.shape)}" for name, t in zip(("query", "key", "value"), cases[0]))
    assert f"第 1 组测试（{label}）：" in evaluate("01.scaled_dot", wrong_shape).message


def test_argument_names_come_from_the_learner_then_the_reference_then_positions():
    assert names_of(lambda scores: 0, 1) == ["scores"]
    assert names_of(lambda *args: 0, 1) is None and names_of(max, 1) is None
    assert fallback_names(["s"], 1) == ["s"]
    assert fallback_names([], 2) == ["argument 1", "argument 2"]


def test_boolean_results_are_shown_as_true_and_false():
    def checkerboard(L_q, L_k):  # a wrong mask no known mistake explains
        return (torch.arange(L_q)[:, None] + torch.arange(L_k)) % 2 == 0

    verdict = evaluate("02.causal_mask", checkerboard)
    assert verdict.status == FAILED and verdict.code is None, verdict.message
    assert re.search(r"\(yours (True|False), expected (True|False)\)", verdict.message), verdict.message
    assert "1.0" not in verdict.message and "L_q = " in verdict.message


def test_new_verdicts_speak_chinese():
    i18n.set_language("zh")

    def hostile(scores):
        torch.softmax = None
        with torch.no_grad():
            return softmax_(scores)

    text = evaluate("01.softmax", hostile).message
    assert "脱离了计算图" in text and "恢复原状" in text and "torch.softmax（被替换）" in text
    assert "尚未作答" in evaluate("01.softmax", lambda s: (_ for _ in ()).throw(NotImplementedError)).message
    assert "忘了写 `return`" in evaluate("01.softmax", lambda s: None).message


def test_every_check_and_diff_message_has_both_languages_and_formats():
    from course_utils.i18n import MESSAGES

    ours = {k: v for k, v in MESSAGES.items() if k.startswith(("check.", "diff."))}
    assert len(ours) > 40 and all(set(v) == {"en", "zh"} and all(v.values()) for v in ours.values())
    for name, _, _ in sandbox.TORCH_SETTINGS:
        assert f"check.setting.{name}" in ours


# ----------------------------------------------------------------------------- garbage collection

def test_no_garbage_collection_runs_while_the_notebooks_check_calls_and_judges():
    """A learner's object in a reference cycle, whose __del__ fixes a wrong result, must not run between
    the call and the verdict (a collection would run it out of every watch, with the result in hand):
    the notebook's check, as the grader's kernel, turns collection off until the verdict is made."""
    import gc

    from course_utils.exercises import evaluate as notebook_evaluate

    seen = []

    def softmax(x):
        seen.append(gc.isenabled())
        out = torch.zeros_like(x)  # wrong, until collected

        class Fixer:
            def __del__(self):
                e = (x - x.max(-1, keepdim=True).values).exp()
                out.copy_(e / e.sum(-1, keepdim=True))

        fixer = Fixer()
        fixer.cycle = fixer  # freed only by a collection, which the check's own allocations would start
        return out

    assert gc.isenabled()
    verdict = notebook_evaluate("01.softmax", softmax)
    assert gc.isenabled(), "collection must resume after the check"
    assert seen and not any(seen), seen
    assert verdict.status == FAILED and "Case 1 " in verdict.message, verdict.message
