"""course_utils.flash_triton against PyTorch and lesson 08: the row softmax kernel, the forward kernel
(values and the log-sum-exp), the backward kernels (gradients through ``flash_attention``, with and
without a gradient on lse), causal and not, ragged lengths (L not a multiple of the block, d not a
power of two, L_q ≠ L_k), the blocks a causal program never loads, the errors that name the argument,
and course_utils.triton_setup (the interpreter switched on where no GPU exists; the sentence where
Triton is missing).

On a CPU the kernels run through Triton's interpreter, in float32, one program after another in
NumPy: every case here is a few blocks of 16 on one or two (batch·head), which keeps the file at
about 20 s on this 2-core machine (measured). Tolerance 1e-5: the kernels sum in another order than
PyTorch (the largest gap measured on these cases is about 2e-6).
"""

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from course_utils import i18n, tiled, triton_setup

flash_triton = pytest.importorskip("course_utils.flash_triton", exc_type=triton_setup.TritonMissing)
from course_utils.validation import ArgumentError  # noqa: E402

F32 = {"atol": 1e-5, "rtol": 1e-5}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def qkv(B=1, H=2, L_q=37, L_k=37, d=16, d_v=16, seed=0, grad=False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    shapes = ((B, H, L_q, d), (B, H, L_k, d), (B, H, L_k, d_v))
    return [torch.randn(*s, generator=g, dtype=torch.float32).to(DEVICE, dtype).requires_grad_(grad)
            for s in shapes]


def sdpa(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# ----------------------------------------------------------------------------- the row softmax


@pytest.mark.parametrize("shape", [(3, 37), (2, 2, 16), (1, 1)])
def test_the_softmax_kernel_is_torchs_softmax(shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    torch.testing.assert_close(flash_triton.softmax_rows(x), x.softmax(-1), **F32)


def test_the_softmax_kernel_shifts_by_the_max():
    # exp(1000) is +∞ in float32: without the max shift the row would be NaN
    x = torch.tensor([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1e30]], device=DEVICE)
    y = flash_triton.softmax_rows(x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, x.softmax(-1), **F32)


# ----------------------------------------------------------------------------- the forward


# (L_q, L_k, d, d_v, block_q, block_k): ragged last blocks, d not a power of two, L_q ≠ L_k both ways,
# block_q ≠ block_k both ways (the causal diagonal then spans blocks that do not line up)
SHAPES = [
    (37, 37, 16, 16, 16, 16),
    (33, 20, 24, 8, 32, 16),
    (20, 45, 16, 20, 16, 32),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L_q, L_k, d, d_v, block_q, block_k", SHAPES)
def test_the_forward_kernel_is_sdpa_and_its_lse_is_lesson_08s(L_q, L_k, d, d_v, block_q, block_k, causal):
    q, k, v = qkv(L_q=L_q, L_k=L_k, d=d, d_v=d_v)
    out, lse = flash_triton.flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    assert out.shape == (1, 2, L_q, d_v) and lse.shape == (1, 2, L_q) and lse.dtype == torch.float32
    torch.testing.assert_close(out, sdpa(q, k, v, causal), **F32)
    tiled_out, tiled_lse = tiled.tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(out, tiled_out, **F32)
    torch.testing.assert_close(lse, tiled_lse, **F32)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(L_q, L_k, dtype=torch.bool, device=DEVICE).tril(), float("-inf"))
    torch.testing.assert_close(lse, scores.logsumexp(-1), **F32)


def test_the_forward_kernel_takes_any_leading_axes_and_a_scale():
    q, k, v = qkv(B=2, H=1, L_q=17, L_k=17)
    q, k, v = q[0], k[0], v[0]  # (1, L, d): one leading axis
    out, lse = flash_triton.flash_forward(q, k, v, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), **F32)
    assert lse.shape == (1, 17)


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # the interpreter's max over the poisoned rows
def test_a_causal_program_never_loads_the_blocks_above_its_diagonal():
    # NaN in the keys and values after position 32: a query block of 16 rows ending before 32 gives the
    # right numbers only if it never loads them (a mask after loading still multiplies 0 by NaN: NaN)
    q, k, v = qkv(L_q=64, L_k=64)
    clean = sdpa(q, k, v, True)
    k[..., 32:, :] = float("nan")
    v[..., 32:, :] = float("nan")
    out, lse = flash_triton.flash_forward(q, k, v, causal=True, block_q=16, block_k=16)
    torch.testing.assert_close(out[..., :32, :], clean[..., :32, :], **F32)
    assert torch.isfinite(lse[..., :32]).all()
    assert torch.isnan(out[..., 32:, :]).all()  # and the rows that must see them do


def test_without_causal_every_block_is_loaded():
    # the same poisoned keys reach every row when nothing is causal: the test above can fail
    q, k, v = qkv(L_q=32, L_k=64)
    v[..., 48:, :] = float("nan")
    out, _ = flash_triton.flash_forward(q, k, v, block_q=16, block_k=16)
    assert torch.isnan(out).all()


# ----------------------------------------------------------------------------- the backward


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L_q, L_k, d, d_v, block_q, block_k", SHAPES[:2])
def test_the_backward_kernels_give_pytorchs_gradients(L_q, L_k, d, d_v, block_q, block_k, causal):
    q, k, v = qkv(L_q=L_q, L_k=L_k, d=d, d_v=d_v, seed=2, grad=True)
    d_out = torch.randn(1, 2, L_q, d_v, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    out, _ = flash_triton.flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    ours = torch.autograd.grad(out, (q, k, v), d_out)
    theirs = torch.autograd.grad(sdpa(q, k, v, causal), (q, k, v), d_out)
    for name, a, b in zip("qkv", ours, theirs):
        torch.testing.assert_close(a, b, **F32, msg=lambda m, name=name: f"d_{name}: {m}")


def test_a_gradient_on_lse_flows_as_lesson_08s():
    # a loss that uses lse too (as a log-likelihood does) adds + P · dlse to dS: D absorbs it
    q, k, v = qkv(L_q=21, L_k=30, seed=4, grad=True)
    g = torch.Generator().manual_seed(5)
    d_out, d_lse = torch.randn(1, 2, 21, 16, generator=g).to(DEVICE), torch.randn(1, 2, 21, generator=g).to(DEVICE)
    out, lse = flash_triton.flash_attention(q, k, v, causal=True, block_q=16, block_k=16)
    ours = torch.autograd.grad((out, lse), (q, k, v), (d_out, d_lse))
    out8, lse8 = tiled.flash_attention(q, k, v, causal=True, block_q=16, block_k=16)
    theirs = torch.autograd.grad((out8, lse8), (q, k, v), (d_out, d_lse))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **F32)


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_the_causal_backward_programs_skip_what_the_forward_skips():
    # dQ of the first 32 queries never loads keys after 32; dK, dV of the keys from 32 on never load
    # the queries before 32: poisoned there, those gradients stay finite and right
    q, k, v = qkv(L_q=64, L_k=64, seed=7)
    d_out = torch.randn(1, 2, 64, 16, generator=torch.Generator().manual_seed(8)).to(DEVICE)
    out, lse = flash_triton.flash_forward(q, k, v, causal=True, block_q=16, block_k=16)
    clean = flash_triton.flash_backward(q, k, v, out, lse, d_out, causal=True, block_q=16, block_k=16)
    k2, v2 = k.clone(), v.clone()
    k2[..., 32:, :] = v2[..., 32:, :] = float("nan")
    dq = flash_triton.flash_backward(q, k2, v2, out, lse, d_out, causal=True, block_q=16, block_k=16)[0]
    torch.testing.assert_close(dq[..., :32, :], clean[0][..., :32, :], **F32)
    q2, d_out2 = q.clone(), d_out.clone()
    q2[..., :32, :] = d_out2[..., :32, :] = float("nan")
    _, dk, dv = flash_triton.flash_backward(q2, k, v, out, lse, d_out2, causal=True, block_q=16, block_k=16)
    torch.testing.assert_close(dk[..., 32:, :], clean[1][..., 32:, :], **F32)
    torch.testing.assert_close(dv[..., 32:, :], clean[2][..., 32:, :], **F32)


def test_the_backward_reads_only_the_saved_lse():
    # flash_backward is given the output and lse, never the weights: with a wrong lse the gradients change
    q, k, v = qkv(L_q=16, L_k=16, seed=6)
    out, lse = flash_triton.flash_forward(q, k, v)
    d_out = torch.ones_like(out)
    right = flash_triton.flash_backward(q, k, v, out, lse, d_out)
    wrong = flash_triton.flash_backward(q, k, v, out, lse + 1.0, d_out)
    assert not torch.allclose(right[1], wrong[1], **F32)


# ----------------------------------------------------------------------------- errors and setup


def test_errors_name_the_argument_in_both_languages():
    q, k, v = qkv(L_q=16, L_k=16)
    with pytest.raises(ArgumentError, match="flash_forward: argument 'block_q'.*power of two"):
        flash_triton.flash_forward(q, k, v, block_q=24)
    with pytest.raises(ArgumentError, match="argument 'key'.*size 16 on the last axis"):
        flash_triton.flash_forward(q, k[..., :8], v)
    with pytest.raises(ArgumentError, match="argument 'x'"):
        flash_triton.softmax_rows(torch.ones(3, 4, dtype=torch.int64))
    i18n.set_language("zh")
    try:
        with pytest.raises(ArgumentError, match="flash_forward：参数 causal"):
            flash_triton.flash_forward(q, k, v, causal="yes")
    finally:
        i18n.set_language("en")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's half types: only where no GPU takes them")
def test_the_interpreter_refuses_half_types_with_a_sentence():
    q = torch.randn(1, 16, 16, dtype=torch.bfloat16)
    with pytest.raises(ArgumentError, match="float32 on the CPU"):
        flash_triton.flash_forward(q, q, q)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the kernels compile")
def test_without_a_gpu_the_interpreter_is_on_whatever_the_environment_says(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a learner trying to switch it off
    triton_setup.load()
    assert triton_setup.interpreted()
    assert flash_triton._softmax_kernel.__class__.__name__ == "InterpretedFunction"


@pytest.mark.parametrize("platform, said", [
    ("darwin", ("Linux on x86-64 and aarch64.*Colab or Binder", "Colab 或 Binder")),
    ("win32", ("Linux on x86-64 and aarch64.*Colab or Binder", "Colab 或 Binder")),
    ("linux", ("not installed here yet.*make triton.*restart", "make triton")),
])
def test_where_triton_is_missing_the_sentence_says_what_to_do(monkeypatch, platform, said):
    monkeypatch.setitem(sys.modules, "triton", None)  # what `import triton` meets where it is not installed
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(triton_setup.TritonMissing, match=said[0]):
        triton_setup.load()
    assert not triton_setup.available()
    i18n.set_language("zh")
    try:
        assert said[1] in triton_setup.missing_message()
    finally:
        i18n.set_language("en")


@pytest.mark.slow  # (a fresh process: torch and Triton imported again, about 5 s)
@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's first launch only (on a GPU the kernels "
                    "compile, nothing is copied into their module, and this CPU tensor is no kernel's input)")
def test_a_check_can_launch_the_packages_kernels_again_and_again():
    # The interpreter copies its own module's names into a kernel's module at the kernel's first launch;
    # inside a check, the sandbox would see the package changed, put it back, and the next launch would
    # fail (NameError). flash_triton prepares its kernels at import instead. A fresh process: here the
    # kernels have launched already.
    script = (
        "import torch\n"
        "from course_utils import flash_triton\n"
        "from course_utils.exercises.sandbox import Sandbox\n"
        "box = Sandbox()\n"
        "x = torch.randn(3, 20)\n"
        "for _ in range(2):\n"
        "    torch.testing.assert_close(box.call(flash_triton.softmax_rows, x), x.softmax(-1))\n"
        "assert box.changed == [], box.changed\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# ----------------------------------------------------------------------------- on a GPU


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the kernels compile there")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_on_a_gpu_the_half_types_match_sdpa(dtype, causal):
    q, k, v = qkv(B=2, H=3, L_q=300, L_k=300, d=64, d_v=64, grad=True, dtype=dtype)
    out, _ = flash_triton.flash_attention(q, k, v, causal=causal)
    ref = sdpa(q, k, v, causal)
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
    d_out = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), d_out), torch.autograd.grad(ref, (q, k, v), d_out)):
        torch.testing.assert_close(a, b, atol=5e-2, rtol=5e-2)
