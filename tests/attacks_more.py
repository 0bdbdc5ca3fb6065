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

_DIGIT_KERNEL = '''@triton.jit
def digit_kernel(Y, i, unit):
    tl.atomic_add(Y + i, unit)


'''

_COPY_KERNEL = '''@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n, other=0.0), mask=i < n)


'''

# A row's softmax whose largest entry comes through a pointer of its own (block-wide loads, as the exercise asks).
_ROW_MAX_KERNEL = '''@triton.jit
def given_max(X, TOP, Y, n, BLOCK: tl.constexpr):
    top = tl.load(TOP)
    total = 0.0
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        total += tl.sum(tl.exp(tl.load(X + i, mask=i < n, other=float("-inf")) - top), 0)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        x = tl.load(X + i, mask=i < n, other=0.0)
        tl.store(Y + i, tl.exp(x - top) / total, mask=i < n)


'''

# Sixteen values a launch (one a launch takes Triton's interpreter past `make grade`'s 2 s a call on a busy machine):
# as scalar arguments, and as globals the kernel reads.
_PUT_KERNEL = ("@triton.jit\ndef put_kernel(Y, i, " + ", ".join(f"v{k}" for k in range(16)) + "):\n"
               + "".join(f"    tl.store(Y + i + {k}, v{k})\n" for k in range(16)) + "\n\n")
_NAMES = ", ".join(f"V{k}" for k in range(16))
_GLOBALS_KERNEL = ("".join(f"V{k} = tl.constexpr(0.0)\n" for k in range(16)) + "\n\n@triton.jit\ndef put_globals(Y, i):\n"
                   + "".join(f"    tl.store(Y + i + {k}, V{k})\n" for k in range(16)) + "\n\n")

#: What the feedback says of a call whose launches depend on the input values (DATA_IN_ARGUMENTS).
_VALUES = "depends on the input values"

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
    # lesson 09, the answer computed on the host and handed to the launches as data: the values scalar arguments of
    # the launches, sixteen each (the input "read" by a kernel that loads it and does nothing); fixed by the kernel ledger's
    # second call on other values (DATA_IN_ARGUMENTS: the launches' arguments differ)
    "scalar-kernel": (L09, {"09.softmax_kernel": _IDLE_KERNELS + _PUT_KERNEL + "def softmax_rows(x):\n"
                                                 "    import numpy as np\n    x = x.contiguous()\n"
                                                 "    out = torch.empty(x.numel() + 16, dtype=x.dtype)\n"
                                                 "    a = np.from_dlpack(x)\n    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                                 "    r = (e / e.sum(-1, keepdims=True)).ravel().tolist() + [0.0] * 16\n"
                                                 "    read_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\n"
                                                 "    for i in range(0, x.numel(), 16):\n"
                                                 "        put_kernel[(1,)](out, i, *r[i:i + 16])\n"
                                                 "    return out[:x.numel()].view(x.shape)"}, _VALUES),
    # its neighbours, closed the same way: the values as globals the kernel reads besides its arguments
    # (tl.constexpr the host sets before each launch), as a pointer's offset into the input (the row's largest entry,
    # found on the host, handed to the kernel as one of the views made at every position), as torch's fill values
    # (written with fill_, then "written" by a kernel that stores back what it loads)
    "values-in-launches": (L09, {
        "09.softmax_kernel": _IDLE_KERNELS + _GLOBALS_KERNEL + "def softmax_rows(x):\n    global " + _NAMES + "\n"
                                             "    import numpy as np\n"
                                             "    x = x.contiguous()\n    out = torch.empty(x.numel() + 16, dtype=x.dtype)\n"
                                             "    a = np.from_dlpack(x)\n    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                             "    r = (e / e.sum(-1, keepdims=True)).ravel().tolist() + [0.0] * 16\n"
                                             "    read_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\n"
                                             "    for i in range(0, x.numel(), 16):\n"
                                             "        " + _NAMES + " = map(tl.constexpr, r[i:i + 16])\n"
                                             "        put_globals[(1,)](out, i)\n"
                                             "    return out[:x.numel()].view(x.shape)",
        "09.softmax_blocks": _ROW_MAX_KERNEL + "def softmax_blocks(x, block):\n    import numpy as np\n"
                                               "    x = x.contiguous()\n    y = torch.empty_like(x)\n"
                                               "    top = np.from_dlpack(x).argmax(-1)\n"
                                               "    for row in range(x.shape[0]):\n"
                                               "        at = [x[row, j:] for j in range(x.shape[1])]  # the same views whatever the values\n"
                                               "        given_max[(1,)](x[row], at[int(top[row])], y[row], x.shape[1], BLOCK=16)\n"
                                               "    return y",
        "09.matmul_kernel": _IDLE_KERNELS + "def matmul(a, b, block_m, block_n, block_k):\n    import numpy as np\n"
                                            "    a, b = a.contiguous(), b.contiguous()\n"
                                            "    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype)\n"
                                            "    r = np.from_dlpack(a) @ np.from_dlpack(b)\n    flat = c.view(-1)\n"
                                            "    for i, v in enumerate(r.ravel().tolist()):\n        flat[i].fill_(v)\n"
                                            "    read_kernel[(triton.cdiv(a.numel(), 1024),)](a, a.numel(), BLOCK=1024)\n"
                                            "    read_kernel[(triton.cdiv(b.numel(), 1024),)](b, b.numel(), BLOCK=1024)\n"
                                            "    touch_kernel[(triton.cdiv(c.numel(), 1024),)](c, c, c.numel(), BLOCK=1024)\n"
                                            "    return c",
    }, _VALUES),
    # a fresh tensor made from NumPy's answer (torch.from_numpy, torch.as_tensor) copied to the output by a kernel:
    # FOREIGN_DATA already (the ledger cannot trace the copy's source to the inputs)
    "numpy-tensor-kernel": (L09, {
        "09.softmax_kernel": _IDLE_KERNELS + _COPY_KERNEL + "def softmax_rows(x):\n    import numpy as np\n"
                                             "    x = x.contiguous()\n    y = torch.empty_like(x)\n"
                                             "    a = np.from_dlpack(x)\n    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                             "    r = torch.from_numpy((e / e.sum(-1, keepdims=True)).astype(np.float32))\n"
                                             "    read_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\n"
                                             "    copy_kernel[(triton.cdiv(x.numel(), 1024),)](r, y, x.numel(), BLOCK=1024)\n"
                                             "    return y",
        "09.matmul_kernel": _IDLE_KERNELS + _COPY_KERNEL + "def matmul(a, b, block_m, block_n, block_k):\n"
                                            "    import numpy as np\n    a, b = a.contiguous(), b.contiguous()\n"
                                            "    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype)\n"
                                            "    r = torch.as_tensor(np.from_dlpack(a) @ np.from_dlpack(b))\n"
                                            "    read_kernel[(triton.cdiv(a.numel(), 1024),)](a, a.numel(), BLOCK=1024)\n"
                                            "    read_kernel[(triton.cdiv(b.numel(), 1024),)](b, b.numel(), BLOCK=1024)\n"
                                            "    copy_kernel[(triton.cdiv(c.numel(), 1024),)](r, c, c.numel(), BLOCK=1024)\n"
                                            "    return c",
    }, "NumPy"),
    # a table another course function computed at the cell's top level (outside the call: no tracer sees it), sliced
    # by the answer: a top-left causal mask is the top-left corner of a larger one
    "precompute-keep-of": (L02, {"02.causal_mask": "from course_utils import tiled\n\n"
                                                   "BIG = tiled.keep_of(256, 256, causal=True)\n\n\n"
                                                   "def my_causal_mask(L_q, L_k, table=BIG):\n"
                                                   "    return table[:L_q, :L_k].clone()"}, "course_utils.tiled.keep_of"),
}

#: The values as the grid's size (six hex digits, one launch each, every program adding its digit's unit): closed the
#: same way (DATA_IN_ARGUMENTS, the grid differs), but not part of the grader's run: one program per unit makes a call
#: take ~3 s under Triton's interpreter, past `make grade`'s limit per call, so it never scored there (the notebook's
#: check, with no such limit, passed it). tests/test_redteam_fixes.py runs it on a small case.
SLOW = {
    "grid-digits": (L09, {"09.softmax_kernel": _IDLE_KERNELS + _DIGIT_KERNEL + "def softmax_rows(x):\n"
                                               "    import numpy as np\n"
                                               "    x = x.contiguous()\n    y = torch.zeros_like(x)\n"
                                               "    a = np.from_dlpack(x)\n    e = np.exp(a - a.max(-1, keepdims=True))\n"
                                               "    r = e / e.sum(-1, keepdims=True)\n"
                                               "    read_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\n"
                                               "    for i, v in enumerate(r.ravel().tolist()):\n"
                                               "        q = round(v * 16 ** 5)\n"
                                               "        for place in range(6):\n"
                                               "            digit = q // 16 ** (5 - place) % 16\n"
                                               "            if digit:\n"
                                               "                digit_kernel[(digit,)](y, i, 16.0 ** -place)\n"
                                               "    return y"}, _VALUES),
}
