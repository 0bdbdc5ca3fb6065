"""Triton for lesson 09: compiled on a GPU, run by Triton's interpreter on a CPU, or said to be missing.

Triton decides at each ``@triton.jit`` whether a kernel is compiled or interpreted, from the
environment variable ``TRITON_INTERPRET`` (read when the decorator runs, and by older Triton releases
once, when ``triton`` is imported). So the switch has to be set before the first kernel is defined,
and safest before ``triton`` is imported at all: ``load()`` does both, and every module of the course
that defines kernels imports Triton through it.

The interpreter turns pointers into raw addresses of the process: ``load()`` installs
``course_utils.triton_bounds`` with it, so that a kernel's load or store outside the tensors of its
launch is an error that names the tensor and the offset instead of a read of any memory.

The interpreter runs every program of a kernel's grid one after the other in NumPy, on CPU tensors:
slow (a tile is a NumPy array, a program a Python call), exact enough to check values to float32's
precision, and the same source that compiles on a GPU. Where no CUDA device exists, the interpreter is
the only way a kernel runs, so ``load()`` turns it on there whatever the environment said: a learner
cannot turn it off to have a check skip their kernel (a compiled kernel cannot take a CPU tensor).

Triton publishes wheels for Linux on x86-64 and aarch64 only. Elsewhere (macOS, Windows) ``load()``
raises ``TritonMissing``, an ImportError whose message says so in the notebook's language and where
to run the lesson instead.
"""

import os
import sys

import torch

from . import triton_bounds, triton_compile, triton_halves, triton_interpreter, triton_launches
from .i18n import pick

#: The float32 precision of ``tl.dot`` where a kernel does not choose one. On a GPU Triton's default is TF32
#: (10 bits of mantissa: errors near 1e-3, far outside the checks' 5e-5); IEEE keeps the GPU's float32 products
#: exact to float32 as the interpreter's are, so one tolerance holds on both. A kernel that wants TF32's speed
#: says so with ``tl.dot(a, b, input_precision="tf32")``.
DOT_PRECISION = "ieee"

_MISSING = {  # where Triton has wheels (Linux): it is only not installed yet
    "en": "Triton is not installed here yet. The course leaves it out of the first install (it adds about 1 GB and "
          "serves lesson 09 only): run `make triton` in the course's folder, then restart this notebook's kernel.",
    "zh": "这里还没有安装 Triton。课程的首次安装不包含它（它另占大约 1 GB，只有第 09 课用到）：请在课程文件夹里运行 "
          "`make triton`，然后重启这个笔记本的内核。",
}
_UNSUPPORTED = {  # where Triton publishes no wheels at all
    "en": "Triton is not installed here: it exists for Linux on x86-64 and aarch64 only, so lesson 09's "
          "kernels cannot run on macOS or Windows. Open the lesson on Colab or Binder (their links are in the "
          "course map) or on a Linux machine; the outputs saved in this notebook stay readable meanwhile.",
    "zh": "这里没有安装 Triton：它只提供 x86-64 和 aarch64 上 Linux 的版本，所以第 09 课的核函数无法在 macOS 或 "
          "Windows 上运行。请在 Colab 或 Binder 上打开本课（链接见课程地图），或者换一台 Linux 机器；在此之前，"
          "笔记本里保存的输出照样可以阅读。",
}


def _why_missing():
    return _MISSING if sys.platform.startswith("linux") else _UNSUPPORTED


class TritonMissing(ImportError):
    """Triton cannot be imported on this machine; the message says why and where to go instead."""


def wants_interpreter():
    """Whether kernels must run interpreted here: when no CUDA device exists (nothing could compile
    them otherwise), or when TRITON_INTERPRET=1 was asked for on a GPU machine."""
    return not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") == "1"


def load():
    """Import Triton, interpreted where ``wants_interpreter()``, its memory bounds-checked there.

    Sets TRITON_INTERPRET before the import (older releases read it then) and Triton's own switch
    after it (3.x reads it at each ``@triton.jit``), so kernels defined after this call run the same
    way whichever release is installed; then ``triton_bounds.install()``, so that an interpreted
    kernel touches only the tensors of its launch. Raises ``TritonMissing`` where Triton is not
    installed. Returns nothing on purpose: the caller writes ``import triton`` after it, so that the
    grader's scan knows the name ``triton`` as the module (a value a call returned is one it cannot
    follow, and would let ``t = load(); t.compiler...`` pass unread)."""
    interpret = wants_interpreter()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ["TRITON_F32_DEFAULT"] = DOT_PRECISION  # read when a kernel compiles, and part of its cache key
    # Triton 3.9 warns at every first compile that fused multiply-adds will be off by default in 3.10; keep
    # today's behaviour (fused, as the committed GPU timings ran) and the warning out of the learner's verdicts.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:
        import triton
    except ImportError as error:
        raise TritonMissing(pick(_why_missing())) from error
    triton_compile.snapshot()  # triton.language before any kernel ran: the interpreter leaves it patched
    knobs = getattr(triton, "knobs", None)
    if knobs is not None and interpret:
        knobs.runtime.interpret = True
    if knobs is not None and hasattr(knobs, "language"):
        knobs.language.fp32_default = DOT_PRECISION
    triton_launches.install()
    if interpret:
        triton_bounds.install()
        triton_halves.install()  # bfloat16 computed as a GPU computes it, not as integers
        triton_interpreter.install()  # the interpreter's repeated work done once, its results the same


def available():
    """Whether Triton imports here (through ``load()``, so the interpreter is set first)."""
    try:
        load()
    except TritonMissing:
        return False
    return True


def missing_message():
    """The sentence ``TritonMissing`` carries, in the notebook's language."""
    return pick(_why_missing())


def device():
    """Where lesson 09's tensors go: the GPU when kernels compile for one, else the CPU (the interpreter runs
    them there, also on a GPU machine with TRITON_INTERPRET=1). Checks and timing cells make their cases here."""
    return torch.device("cpu") if wants_interpreter() else torch.device("cuda")


def interpreted():
    """Whether kernels defined now run through the interpreter (after ``load()``)."""
    triton = sys.modules.get("triton")
    knobs = getattr(triton, "knobs", None) if triton is not None else None
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"
