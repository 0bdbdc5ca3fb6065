"""The allow-list of callables (course_teacher/grade/policy.py) against the routes a red team took to
full marks without solving (issue 37, list 1-3), read by the scan as the grader reads a notebook:
each goes to the teacher's review (REVIEW) or scores its exercise 0 (FORBIDDEN), and the honest
code beside each attack, the same but for the attack, has no finding. The same attacks run through
`make grade` in test_grade_attacks.py."""

import pytest
from test_scan import L01, L02, Lesson

from course_teacher.grade import policy, scan

L00, L08, L09 = "00_tensor_shapes.ipynb", "08_flash_attention.ipynb", "09_flash_triton.ipynb"

HONEST_SOFTMAX = "def my_softmax(x):\n    e = (x - x.max(-1, keepdim=True).values).exp()\n    return e / e.sum(-1, keepdim=True)"

#: label: (lesson, exercise, an extra cell before the exercise's or None, the exercise cell's new text
#: or None, the construct the review names). Every payload is harmless: the scan never runs it.
TEXT_RUNNERS = {
    "sympy-parse_expr": (L01, "01.softmax", "import sympy\nsympy.parse_expr('1 + 1', transformations=())", None, "sympy"),
    "sympy-from": (L01, "01.softmax", "from sympy.parsing.sympy_parser import parse_expr as p\np('1')", None, "sympy"),
    "benchmark-timer": (L00, "00.padding_mask", "import torch.utils.benchmark as b\nb.Timer(stmt='1 + 1').timeit(1)",
                        None, "torch.utils.benchmark"),
    "pil-unsafe_eval": (L02, "02.causal_mask", "from PIL import ImageMath\nImageMath.unsafe_eval('1')", None, "PIL"),
    "collect_env-run": (L00, "00.padding_mask", "from torch.utils import collect_env\ncollect_env.run('true')", None,
                        "torch.utils.collect_env"),
    "matplotlib-testing": (L00, "00.padding_mask", "import matplotlib.testing.compare as c\nc.compare_images",
                           None, "matplotlib"),
    "switch_backend": (L00, "00.padding_mask", "import matplotlib.pyplot as plt\nplt.switch_backend('module://x')",
                       None, "matplotlib.pyplot.switch_backend"),
    "npzfile": (L00, "00.padding_mask", "import numpy\nnumpy.lib.npyio.NpzFile('x.npz')", None, "numpy.lib.npyio"),
    "model_zoo": (L00, "00.padding_mask", "import torch\ntorch.utils.model_zoo.load_url('file:///x')", None,
                  "torch.utils.model_zoo"),
    "dataloader-workers": (L00, "00.padding_mask", "from torch.utils.data import DataLoader\n"
                                                   "list(DataLoader(range(4), num_workers=2))", None, "torch.utils.data"),
    "open": (L00, "00.padding_mask", "text = open('x.py').read()", None, "builtin open"),
    "io-open": (L00, "00.padding_mask", "import io\nio.open('x.py')", None, "io"),
    "pandas-eval": (L00, "00.padding_mask", "import pandas\npandas.eval('1 + 1')", None, "pandas"),
    "opt_einsum-backend": (L00, "00.padding_mask", "import opt_einsum\nopt_einsum.contract('i->i', [1], backend='os')",
                           None, "opt_einsum"),
}

#: Reference functions under other names: label: (lesson, exercise, its cell's new text, the name hit).
OTHER_NAMES = {
    "online_softmax-01": (L01, "01.softmax", "from course_utils import tiled\n\n\ndef my_softmax(x):\n"
                                             "    return tiled.online_softmax(x, ())", "course_utils.tiled.online_softmax"),
    "online_softmax-09": (L09, "09.softmax_kernel", "from course_utils.tiled import online_softmax\n\n\n"
                                                   "def softmax_rows(x):\n"
                                             "    return online_softmax(x, ())", "course_utils.tiled.online_softmax"),
    "special-softmax-01": (L01, "01.softmax", "import torch\n\n\ndef my_softmax(x):\n"
                                              "    return torch.special.softmax(x, -1)", "torch.special.softmax"),
    "special-logsumexp-08": (L08, "08.tiled_forward", "import torch\n\n\n"
                                                      "def my_tiled_attention(query, key, value, block_q, block_k):\n"
                                                      "    s = query @ key.mT * query.shape[-1] ** -0.5\n"
                                                      "    lse = torch.special.logsumexp(s, -1)\n"
                                                      "    return (s - lse[..., None]).exp() @ value, lse",
                             "torch.special.logsumexp"),
    "sdpa-as-softmax-01": (L01, "01.softmax", "import torch\nimport torch.nn.functional as F\n\n\ndef my_softmax(x):\n"
                                              "    eye = torch.eye(x.shape[-1], dtype=x.dtype)\n"
                                              "    return F.scaled_dot_product_attention(x, eye, eye, scale=1)",
                           "F.scaled_dot_product_attention"),
}


def _lesson(lesson, exercise, extra, source):
    found = Lesson(lesson, solved=True)
    if source is not None:
        found.answer(exercise, source)
    if extra is not None:
        found.before(exercise, extra)
    return found


@pytest.mark.parametrize("label", sorted(TEXT_RUNNERS))
def test_what_runs_text_starts_processes_or_opens_files_is_for_review(label):
    lesson, exercise, extra, source, construct = TEXT_RUNNERS[label]
    assert not _lesson(lesson, exercise, None, None).scan(), "the honest notebook beside it"
    findings = _lesson(lesson, exercise, extra, source).scan()
    assert construct in [hit.name for hit in findings.review], findings
    assert findings.verdict(exercise).mistake == scan.REVIEW


@pytest.mark.parametrize("label", sorted(OTHER_NAMES))
def test_a_reference_function_under_another_name_is_forbidden(label):
    lesson, exercise, source, name = OTHER_NAMES[label]
    honest = _lesson(lesson, exercise, None, None)
    assert not honest.scan(), "the solved notebook"
    findings = _lesson(lesson, exercise, None, source).scan()
    assert findings.verdict(exercise).mistake == scan.FORBIDDEN, findings
    assert name in [hit.name for hit in findings.forbidden[exercise]], findings


def test_an_honest_softmax_beside_them_is_no_finding():
    assert not _lesson(L01, "01.softmax", None, HONEST_SOFTMAX).scan()


@pytest.mark.parametrize("name", [
    "sympy.parse_expr", "PIL.ImageMath.unsafe_eval", "torch.utils.benchmark.Timer", "torch.utils.collect_env.run",
    "matplotlib.testing.compare.compare_images", "matplotlib.pyplot.switch_backend", "numpy.lib.npyio.NpzFile",
    "torch.utils.model_zoo.load_url", "torch.utils.data.DataLoader", "builtins.open", "io.open", "io.FileIO",
    "numpy.loadtxt", "numpy.fromfile", "numpy.testing", "pandas.eval", "scipy.LowLevelCallable", "seaborn",
    "tqdm.contrib.concurrent.process_map", "matplotlib.use", "torch.profiler.profile", "triton.language.inline_asm_elementwise", "torch.ops.aten",
])
def test_the_allow_list_names_no_text_evaluator_process_or_file(name):
    assert not policy.allowed(name)


@pytest.mark.parametrize("name", [
    "torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.transpose", "math.sqrt", "builtins.len",
    "course_utils.masks.causal_mask", "triton.language.load", "triton.jit", "io.StringIO", "einops.rearrange",
    "matplotlib.pyplot.subplots", "numpy.arange", "tqdm.tqdm", "IPython.display.display",
])
def test_the_allow_list_holds_what_the_lessons_teach(name):
    assert policy.allowed(name)


def test_what_computes_a_forbidden_operation_is_forbidden_with_it():
    names = policy.also_forbidden(("torch.softmax",))
    assert {"torch.special.softmax", "course_utils.tiled.online_softmax", "F.scaled_dot_product_attention"} <= set(names)
    assert set(policy.also_forbidden(("torch.logsumexp",))) >= {"torch.special.logsumexp", "Tensor.logsumexp"}
    assert policy.also_forbidden(("torch.matmul",)) == ("torch.matmul",)  # nothing else computes a product alone
