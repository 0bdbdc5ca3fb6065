"""Launches recorded where every route converges, and the GPU compiler's front end run on the CPU.

course_utils.triton_launches sees a launch whichever way it was made (an alias, ``.run``, inside a nested
function), with the tensors each kernel read and wrote under the interpreter; course_utils.triton_compile
refuses, on this CPU, what a GPU's Triton compiler refuses although the interpreter runs it. Kernels are
defined at module level: Triton reads a kernel's source from its file."""

import re
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch

from course_utils import i18n, triton_setup

flash_triton = pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)

import triton  # noqa: E402  (after triton_setup.load(), which the import above ran)
import triton.language as tl  # noqa: E402

from course_utils import triton_compile, triton_launches  # noqa: E402
from course_utils.triton_bounds import OutOfBounds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WEIGHT = torch.ones(4, 4)  # a global tensor a kernel body must not reach
SEEN = []  # what probe() saw: in_launch() while a kernel body ran


def probe():
    SEEN.append(triton_launches.in_launch())


@triton.jit
def copy_kernel(X, Y, UNUSED, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offsets, tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


@triton.jit
def add_kernel(X, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.atomic_add(X + offsets, 1.0, mask=offsets < n)


@triton.jit
def probe_kernel(X, BLOCK: tl.constexpr):
    probe()


@triton.jit
def break_kernel(X, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    for i in range(0, n):
        if i > 2:
            break
        tl.store(X + offsets, tl.load(X + offsets) + 1.0)


@triton.jit
def continue_kernel(X, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    for i in range(0, n):
        if i > 2:
            continue
        tl.store(X + offsets, tl.load(X + offsets) + 1.0)


@triton.jit
def return_in_loop_kernel(X, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    for i in range(0, n):
        if i > 2:
            return
        tl.store(X + offsets, tl.load(X + offsets) + 1.0)


@triton.jit
def early_return_kernel(X, n, BLOCK: tl.constexpr):
    if n > 100:
        return
    tl.store(X + tl.arange(0, BLOCK), 1.0)


@triton.jit
def torch_kernel(X, BLOCK: tl.constexpr):
    torch.addmm(WEIGHT, WEIGHT, WEIGHT)
    tl.store(X + tl.arange(0, BLOCK), 1.0)


@triton.jit
def arange_kernel(X, n):
    tl.store(X + tl.arange(0, n), 1.0)


@triton.jit
def dot_kernel(A, C, BLOCK: tl.constexpr, K: tl.constexpr):
    rows, inner = tl.arange(0, BLOCK), tl.arange(0, K)
    a = tl.load(A + rows[:, None] * K + inner[None, :])
    b = tl.load(A + inner[:, None] * BLOCK + rows[None, :])
    tl.store(C + rows[:, None] * BLOCK + rows[None, :], tl.dot(a, b))


@triton.jit
def if_on_block_kernel(X, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    if x > 0:
        tl.store(X + tl.arange(0, BLOCK), x)


@pytest.fixture(autouse=True)
def english():
    before = i18n.language()
    i18n.set_language("en")
    yield
    i18n.set_language(before)


def _launch_nested(x, y, z):
    def inner():
        copy_kernel[(1,)](x, y, z, 8, BLOCK=16)
    inner()


# ----------------------------------------------------------------------------- launches


def test_every_route_to_a_launch_is_recorded_with_its_grid_and_tensors():
    x, y, z = torch.arange(20.0), torch.zeros(20), torch.zeros(3)
    alias = copy_kernel
    with triton_launches.recording() as launches:
        alias[(triton.cdiv(20, 16),)](x, y, z, 20, BLOCK=16)
        copy_kernel.run(x, y, z, 20, BLOCK=16, warmup=False,
                        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),))
        copy_kernel[(2,)](x, y, z, 20, BLOCK=16)  # the same kernel twice: two launches
        _launch_nested(x, y, z)
    assert [launch.name for launch in launches] == ["copy_kernel"] * 4
    assert [launch.grid for launch in launches] == [(2, 1, 1), (2, 1, 1), (2, 1, 1), (1, 1, 1)]
    assert all(launch.kernel is copy_kernel for launch in launches)
    for launch in launches:
        assert launch.names == ["X", "Y", "UNUSED"]
        assert [t is u for t, u in zip(launch.tensors, (x, y, z))] == [True] * 3
    torch.testing.assert_close(y, x)


def test_read_and_written_are_what_the_kernel_loaded_and_stored():
    x, y, z = torch.arange(20.0), torch.zeros(20), torch.zeros(3)
    counts = torch.zeros(16)
    with triton_launches.recording() as launches:
        copy_kernel[(2,)](x, y, z, 20, BLOCK=16)
        add_kernel[(1,)](counts, 16, BLOCK=16)
    copied, added = launches
    assert (copied.read, copied.written) == ({0}, {1})  # UNUSED (2) was handed over, never touched
    assert (added.read, added.written) == ({0}, {0})  # an atomic reads and writes
    assert counts.eq(1).all()


def test_nothing_is_recorded_outside_recording_and_nested_recordings_both_see():
    x, y, z = torch.arange(20.0), torch.zeros(20), torch.zeros(3)
    with triton_launches.recording() as before:
        pass
    copy_kernel[(2,)](x, y, z, 20, BLOCK=16)
    assert before == []
    with triton_launches.recording() as outer:
        copy_kernel[(2,)](x, y, z, 20, BLOCK=16)
        with triton_launches.recording() as inner:
            copy_kernel[(2,)](x, y, z, 20, BLOCK=16)
    assert (len(outer), len(inner)) == (2, 1) and outer[1] is inner[0]


def test_in_launch_is_true_inside_a_kernel_body_only():
    SEEN.clear()
    assert not triton_launches.in_launch()
    with triton_launches.recording():
        probe_kernel[(2,)](torch.zeros(4), BLOCK=4)
    probe_kernel[(1,)](torch.zeros(4), BLOCK=4)  # outside recording() too
    assert SEEN == [True, True, True] and not triton_launches.in_launch()


# ----------------------------------------------------------------------------- the compiler's front end


def _refusal(kernel, *args, **kwargs):
    """Run the kernel through the interpreter (it accepts it) and return the front end's verdict."""
    with triton_launches.recording() as launches:
        kernel[(1,)](*args, **kwargs)
    (launch,) = launches
    return launch.refused()


@pytest.mark.parametrize("kernel, construct", [
    (break_kernel, "`break`"), (continue_kernel, "`continue`"), (return_in_loop_kernel, "`return`"),
    (torch_kernel, "global"),
])
def test_what_the_interpreter_runs_and_a_gpu_compiler_refuses_is_refused_on_the_cpu(kernel, construct):
    refusal = _refusal(kernel, torch.zeros(16), *((5,) if kernel is not torch_kernel else ()), BLOCK=16)
    assert refusal is not None and construct in refusal and f"`{kernel.__name__}`" in refusal, refusal
    assert re.search(r"line \d+ of it", refusal), refusal
    i18n.set_language("zh")
    chinese = _refusal(kernel, torch.zeros(16), *((5,) if kernel is not torch_kernel else ()), BLOCK=16)
    assert "编译器不接受" in chinese and chinese != refusal


def test_a_return_outside_any_loop_compiles_and_is_not_refused():
    # Triton 3.9's front end takes an early return at the top level of a kernel (it refuses one inside a loop)
    assert _refusal(early_return_kernel, torch.zeros(16), 5, BLOCK=16) is None


def test_the_front_end_refuses_more_than_control_flow():
    x = torch.zeros(64)
    assert "tl.constexpr" in triton_compile.refusal(arange_kernel, (x, 16), {})
    assert "`tl.where" in triton_compile.refusal(if_on_block_kernel, (x,), {"BLOCK": 16})
    # tl.dot's smallest inner size: the interpreter multiplies any, a GPU needs K ≥ 8 (float32), ≥ 16 (float16)
    a, c = torch.zeros(16 * 16), torch.zeros(16 * 16)
    assert "K ≥ 8" in triton_compile.refusal(dot_kernel, (a, c), {"BLOCK": 16, "K": 4})
    assert triton_compile.refusal(dot_kernel, (a, c), {"BLOCK": 16, "K": 8}) is None
    half = torch.zeros(16 * 16, dtype=torch.float16)
    assert "K ≥ 16" in triton_compile.refusal(dot_kernel, (half, half), {"BLOCK": 16, "K": 8})
    assert triton_compile.refusal(dot_kernel, (half, half), {"BLOCK": 16, "K": 16}) is None


def test_the_front_end_shows_no_warning_of_tritons_own():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        triton_compile.refusal(dot_kernel, (torch.zeros(256), torch.zeros(256)), {"BLOCK": 16, "K": 32})
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize("causal", [False, True])
def test_every_reference_kernel_of_the_package_compiles(causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 20, 16, generator=g) for _ in range(3))
    with triton_launches.recording() as launches:
        flash_triton.softmax_rows(torch.randn(3, 20, generator=g))
        out, lse = flash_triton.flash_forward(q, k, v, causal=causal, block_q=16, block_k=16)
        flash_triton.flash_backward(q, k, v, out, lse, torch.randn_like(out), causal=causal, block_q=16, block_k=16)
    names = {launch.name for launch in launches}
    assert names == {"_softmax_kernel", "_forward_kernel", "_preprocess_kernel", "_dkdv_kernel", "_dq_kernel"}
    assert [(launch.name, launch.refused()) for launch in launches if launch.refused()] == []


def _lesson09_solutions():
    """Lesson 09's exercise cells, solutions kept, as a module in a file of its own (Triton reads sources)."""
    text = (ROOT / "notebooks" / "source" / "09_flash_triton.py").read_text(encoding="utf-8")
    cells = re.split(r"^# %%", text, flags=re.M)
    code = ["from course_utils.triton_setup import load\nload()\nimport math\nimport torch\nimport triton\n"
            "import triton.language as tl\n"]
    for cell in cells:
        head, _, body = cell.partition("\n")
        if 'tags=["exercise"]' not in head:
            continue
        lines, skip = [], False
        for line in body.splitlines():
            marker = line.strip()
            if marker in ("# lang: zh",):
                skip = True
            elif marker in ("# lang: en", "# lang: end"):
                skip = False
            elif not skip and marker not in ("### BEGIN SOLUTION", "### END SOLUTION"):
                lines.append(line)
        code.append("\n".join(lines))
    return "\n\n".join(code)


def test_lesson_09s_solution_kernels_compile(tmp_path, monkeypatch):
    from course_teacher.exercises import EXERCISES

    path = tmp_path / "lesson09_solutions.py"
    path.write_text(_lesson09_solutions(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = types.ModuleType("lesson09_solutions")
    module.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    sys.modules.pop("lesson09_solutions", None)
    text = (ROOT / "notebooks" / "source" / "09_flash_triton.py").read_text(encoding="utf-8")
    checked = []
    for exercise, name in re.findall(r'check\("(09\.\w+)", (\w+)\)', text):
        spec, function = EXERCISES[exercise], module.__dict__[name]
        case = spec.cases(torch.Generator().manual_seed(spec.seed))[0]
        with triton_launches.recording() as launches:
            function(*case)
        assert launches, exercise
        assert [launch.refused() for launch in launches] == [None] * len(launches), exercise
        checked.append(exercise)
    assert len(checked) >= 5, checked


# ----------------------------------------------------------------------------- errors explained


def not_a_kernel(X, BLOCK: tl.constexpr):
    pass


def test_explain_names_a_missing_jit_and_leaves_other_errors_alone():
    with pytest.raises(TypeError) as raised:
        not_a_kernel[(1,)](torch.zeros(4), BLOCK=4)
    text = triton_launches.explain(raised.value)
    assert "@triton.jit" in text and "`not_a_kernel" in text, text
    assert triton_launches.explain(ValueError("x")) is None
    assert triton_launches.explain(TypeError("'int' object is not subscriptable")) is None


@triton.jit
def unmasked_kernel(X, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offsets, 1.0)


@triton.jit
def strided_kernel(X, n, stride, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(X + offsets * stride, 1.0, mask=offsets < n)


def test_a_bounds_error_blames_the_mask_or_the_offsets_by_what_the_mask_did():
    with pytest.raises(OutOfBounds) as missing_mask:
        unmasked_kernel[(2,)](torch.zeros(20), BLOCK=16)
    assert "Mask the ragged block" in triton_launches.explain(missing_mask.value)
    with pytest.raises(OutOfBounds) as wrong_stride:
        strided_kernel[(1,)](torch.zeros(4, 5), 5, 5, BLOCK=8)  # 5 rows of a (4, 5) tensor: one row too many
    text = triton_launches.explain(wrong_stride.value)
    assert "stride" in text and "Mask the ragged block" not in text, text


def test_explain_reads_a_compilation_error():
    import ast

    from triton.compiler.errors import UnsupportedLanguageConstruct

    source = "def kernel(X, n):\n    for i in range(0, n):\n        break\n"
    error = UnsupportedLanguageConstruct(source, ast.Break(lineno=3, col_offset=8), "unsupported AST node type: Break")
    text = triton_launches.explain(error)
    assert "line 3 of it: `break`" in text and "`tl.where`" in text, text
