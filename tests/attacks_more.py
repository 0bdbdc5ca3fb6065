"""Routes to full marks without solving that an independent review of `make grade` found, in the format of
tests/test_grade_attacks.py's ATTACKS (label: (lesson notebook, {exercise: its cell's new text} or (before exercise, a
new cell), the reason the feedback must name)), for the integrator to merge into that test's run.

Before their fixes each scored full marks through `python -m course_teacher.grade` (seed 8231) and passed the
notebook's own check. Unlike ATTACKS' entries these are not sent to review by the scan (every name they use is on
the allow-list): the run-time rules refuse them while the learner's function runs, so the exercise scores 0 with the
refusal's code as its mistake (FOREIGN_DATA, SOLVER) and the feedback names the reason below. The unit tests of the
fixes are in tests/test_redteam_fixes.py."""

L02, L09 = "02_masking.ipynb", "09_flash_triton.ipynb"

# Kernels that do no work: one reads its input and stores back what the output already holds, one only reads.
_IDLE_KERNELS = '''@triton.jit
def touch_kernel(X, Y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < n, other=0.0)
    y = tl.load(Y + i, mask=i < n, other=0.0)
    tl.store(Y + i, y, mask=i < n)


@triton.jit
def read_kernel(X, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + i, mask=i < n, other=0.0)


'''

ATTACKS_MORE = {
    # lesson 09: the answer computed in NumPy and written through a NumPy view of the output (no aten operation
    # sees it), then "written" by a kernel that stores back what it loads; fixed by the kernel ledger's memory check
    "numpy-view-kernel": (L09, {
        "09.softmax_kernel": _IDLE_KERNELS + "def softmax_rows(x):\n    import numpy as np\n    x = x.contiguous()\n"
                                             "    y = torch.empty_like(x)\n    a = x.numpy()\n"
                                             "    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                             "    y.numpy()[...] = e / e.sum(-1, keepdims=True)\n"
                                             "    touch_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
                                             "    return y",
        "09.matmul_kernel": _IDLE_KERNELS + "def matmul(a, b, block_m, block_n, block_k):\n"
                                            "    a, b = a.contiguous(), b.contiguous()\n"
                                            "    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype)\n"
                                            "    c.numpy()[...] = a.numpy() @ b.numpy()\n"
                                            "    read_kernel[(triton.cdiv(a.numel(), 1024),)](a, a.numel(), BLOCK=1024)\n"
                                            "    read_kernel[(triton.cdiv(b.numel(), 1024),)](b, b.numel(), BLOCK=1024)\n"
                                            "    touch_kernel[(triton.cdiv(c.numel(), 1024),)](c, c, c.numel(), BLOCK=1024)\n"
                                            "    return c",
    }, "NumPy"),
    # the same through DLPack, which no aten operation sees at all (Tensor.numpy at least runs aten.detach)
    "dlpack-view-kernel": (L09, {
        "09.softmax_kernel": _IDLE_KERNELS + "def softmax_rows(x):\n    import numpy as np\n    x = x.contiguous()\n"
                                             "    y = torch.empty_like(x)\n    a = np.from_dlpack(x)\n"
                                             "    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                             "    np.from_dlpack(y)[...] = e / e.sum(-1, keepdims=True)\n"
                                             "    touch_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
                                             "    return y",
    }, "NumPy"),
    # a course function that computes the answer under another name: tiled.keep_of is a causal keep mask
    "keep-of": (L02, {"02.causal_mask": "from course_utils import tiled\n\n\ndef my_causal_mask(L_q, L_k):\n"
                                        "    return tiled.keep_of(L_q, L_k, causal=True)"}, "course_utils.tiled"),
    # probsparse.causal_keep(positions, L_k) too (the positions clamped: a query past the keys sees them all)
    "causal-keep": (L02, {"02.causal_mask": "import torch\nfrom course_utils import probsparse\n\n\n"
                                            "def my_causal_mask(L_q, L_k):\n"
                                            "    return probsparse.causal_keep(torch.arange(L_q).clamp(max=L_k - 1), L_k)"},
                    "course_utils.probsparse"),
    # a table another course function computed at the cell's top level (outside the call: no tracer sees it), sliced
    # by the answer: a top-left causal mask is the top-left corner of a larger one
    "precompute-keep-of": (L02, {"02.causal_mask": "from course_utils import tiled\n\n"
                                                   "BIG = tiled.keep_of(256, 256, causal=True)\n\n\n"
                                                   "def my_causal_mask(L_q, L_k, table=BIG):\n"
                                                   "    return table[:L_q, :L_k].clone()"}, "course_utils.tiled.keep_of"),
}

#: Found and NOT fixed (still full marks through `make grade`, seed 8231, 9/9, and the notebook's check): the inputs read
#: outside any launch (DLPack), the answer computed in NumPy and written one value per launch as a scalar argument, a
#: read-only kernel to "read" the input. The memory check cannot see it (every byte of the output is written by a
#: launch). Not part of ATTACKS_MORE: it would fail the merged test until fixed (see the review's report).
OPEN = {
    "scalar-kernel": (L09, {"09.softmax_kernel": _IDLE_KERNELS + "@triton.jit\ndef put_kernel(Y, i, v):\n"
                                                 "    tl.store(Y + i, v)\n\n\n"
                                                 "def softmax_rows(x):\n    import numpy as np\n    x = x.contiguous()\n"
                                                 "    y = torch.empty_like(x)\n    a = np.from_dlpack(x)\n"
                                                 "    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                                 "    r = e / e.sum(-1, keepdims=True)\n"
                                                 "    read_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\n"
                                                 "    for i, v in enumerate(r.ravel().tolist()):\n"
                                                 "        put_kernel[(1,)](y, i, v)\n    return y"}, "NumPy"),
}
