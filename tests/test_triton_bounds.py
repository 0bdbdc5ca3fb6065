"""course_utils.triton_bounds: under Triton's interpreter a kernel touches only the tensors of its launch.

The interpreter turns pointers into raw addresses of the process, so without the checks a kernel
could read any memory (a check's expected values) or write it (a verdict). Each test launches one
tiny program: one compiled-for-the-interpreter kernel serves several tests.
"""

import pytest
import torch

from course_utils import i18n, triton_setup

try:
    triton_setup.load()
except triton_setup.TritonMissing:
    pytest.skip("Triton is not installed here", allow_module_level=True)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime import interpreter  # noqa: E402  (the test reads the interpreter's insides; a learner may not)

from course_utils import triton_bounds  # noqa: E402

pytestmark = pytest.mark.skipif(not triton_setup.interpreted(), reason="the checks are the interpreter's")


@triton.jit
def _copy(k, out, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = k[i + SHIFT] for i < n: SHIFT = 1 is the ragged block's off-by-one."""
    i = tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(k + i + SHIFT, mask=i < n), mask=i < n)


@triton.jit
def _peek(k, out, address):
    """out[0] = the float32 at `address`, reached from k's pointer: any memory of the process."""
    tl.store(out, tl.load(k + (address - k.to(tl.int64)) // 4))


@triton.jit
def _poke(k, address, value):
    """Writes `value` at `address`, reached from k's pointer."""
    tl.store(k + (address - k.to(tl.int64)) // 4, value)


def _error(launch):
    with pytest.raises(triton_bounds.OutOfBounds) as caught:  # itself, not Triton's InterpreterError around it
        launch()
    return str(caught.value)


def test_a_kernel_within_its_tensors_runs_and_masked_off_addresses_are_not_checked():
    k, out = torch.arange(20.0), torch.zeros(20)
    _copy[(1,)](k, out, 20, SHIFT=0, BLOCK=32)  # lanes 20..31 point past k's end, masked off
    assert torch.equal(out, k)


def test_one_element_past_the_end_is_refused_and_named():
    k, out = torch.arange(20.0), torch.full((20,), -1.0)
    message = _error(lambda: _copy[(1,)](k, out, 20, SHIFT=1, BLOCK=32))
    assert message.startswith("program (0, 0) loads outside k: element offset 20 past its end")
    assert "(its elements lie at offsets 0 to 19)" in message
    assert torch.equal(out, torch.full((20,), -1.0))  # nothing stored: the program stopped at the load


def test_the_message_is_in_the_notebooks_language():
    k, out = torch.arange(20.0), torch.zeros(20)
    i18n.set_language("zh")
    try:
        message = _error(lambda: _copy[(1,)](k, out, 20, SHIFT=1, BLOCK=32))
    finally:
        i18n.set_language("en")
    assert message.startswith("程序 (0, 0) 在 k 之外读取：元素偏移 20 超出了它的末尾")


def test_a_hidden_value_cannot_be_read_from_its_address():
    hidden = torch.tensor([1234.5, 6789.0])  # the check's expected values, say: in the process, not passed
    k, out = torch.zeros(4), torch.zeros(1)
    message = _error(lambda: _peek[(1,)](k, out, hidden.data_ptr()))
    assert "lies in no tensor given to this launch" in message or "outside" in message
    assert out.item() == 0.0
    _peek[(1,)](k, out, k.data_ptr() + 8)  # the same kernel, at an address inside k: allowed
    assert out.item() == 0.0 and k.data_ptr() + 8 < k.data_ptr() + 16


def test_a_hidden_value_cannot_be_written_and_a_subclass_cannot_move_its_extent():
    verdict = torch.tensor([0.0])

    class Elsewhere(torch.Tensor):
        def data_ptr(self):  # what the interpreter's pointer becomes: the verdict's address
            return verdict.data_ptr()

    k = torch.zeros(4).as_subclass(Elsewhere)
    _error(lambda: _poke[(1,)](torch.zeros(4), verdict.data_ptr(), 1.0))
    with pytest.raises(Exception):
        _poke[(1,)](k, verdict.data_ptr() + 4096, 1.0)
    assert verdict.item() == 0.0


def test_a_strided_view_allows_its_span_only():
    base = torch.arange(8.0)
    view = base.as_strided((4,), (2,))  # elements 0, 2, 4, 6 of base: its span is offsets 0 to 6
    out = torch.zeros(4)
    _copy[(1,)](view, out, 4, SHIFT=0, BLOCK=4)  # contiguous reads of the view's span: inside the storage
    assert torch.equal(out, base[:4])
    message = _error(lambda: _copy[(1,)](view, out, 4, SHIFT=4, BLOCK=4))  # offsets 4 to 7: 7 is past the span
    assert message.startswith("program (0, 0) loads outside k: element offset 7 past its end")


def test_install_is_idempotent_and_puts_the_checks_back_when_replaced():
    checked = interpreter._interpreter
    triton_bounds.install()
    assert interpreter._interpreter is checked
    interpreter._interpreter = checked._raw  # what a learner's code would do, were it not refused by the scan
    try:
        triton_bounds.install()
        assert getattr(interpreter._interpreter, "_course_bounds", False)
        k, out = torch.arange(20.0), torch.zeros(20)
        _error(lambda: _copy[(1,)](k, out, 20, SHIFT=1, BLOCK=32))
    finally:
        triton_bounds.install()


def test_the_interpreters_insides_are_those_the_checks_were_written_for():
    """The checks wrap Triton internals (the C module's memory functions, two GridExecutor methods, the program's
    index): each exists with the signature expected, on the Triton that is locked and tested."""
    assert triton_bounds.differences(interpreter) == []
    assert triton.__version__.startswith("3.9."), "lesson 09 is tested with Triton 3.9 (requirements/triton.lock)"


def test_an_unknown_name_of_the_interpreter_fails_closed(monkeypatch):
    checked = interpreter._interpreter
    with pytest.raises(triton_bounds.TritonChanged, match="'load_gather'"):
        checked.load_gather  # noqa: B018 (a memory function a later Triton might add: refused, not passed through)
    assert checked.RMW_OP is checked._raw.RMW_OP  # the names that touch no memory pass through


def test_a_triton_whose_insides_differ_is_refused_at_install(monkeypatch):
    raw = interpreter._interpreter._raw

    class Later:  # a C module with one more memory function than 3.9's
        def __getattr__(self, name):
            return getattr(raw, name)

        def __dir__(self):
            return [*dir(raw), "load_gather"]

    monkeypatch.setattr(interpreter, "_interpreter", Later())
    with pytest.raises(triton_bounds.TritonChanged, match="load_gather, unknown to the bounds checks"):
        triton_bounds.install()
    monkeypatch.undo()
    triton_bounds.install()
    assert getattr(interpreter._interpreter, "_course_bounds", False)
