"""Lesson 05's modules never crash a kernel: every public function of ``probsparse``,
``probsparse_study``, ``viz.probsparse``, ``widgets.probsparse`` and ``diagrams.l05_probsparse``,
called on a grid of awkward inputs (sizes 0 and 1, more sampled keys than keys, L_Q != L_K,
float16, bfloat16, int64 and bool tensors, meta tensors, wrong types), either returns or raises a
clear error: an ``ArgumentError`` that names the function and the argument (``Trace[name]``: a
KeyError that lists the steps there are). Anything else fails the test, and so does a crash:
the calls run in a subprocess, which prints the number of each call before making it, so a
segmentation fault (as ``torch.sparse.sampled_addmm`` gave for U > L_K) names its call instead
of killing pytest.
"""

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

HERE = Path(__file__).resolve()


def _tensors():
    """{name: tensor}: the awkward tensors the grid draws from."""
    import torch

    g = torch.Generator().manual_seed(0)
    found = {}
    for B, H, L, D in ((2, 2, 10, 4), (2, 2, 4, 4), (1, 1, 1, 3), (2, 2, 0, 4), (1, 2, 4, 4), (2, 1, 7, 1)):
        for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            found[f"x{B}{H}{L}{D}_{dtype}"] = torch.randn(B, H, L, D, generator=g).to(dtype)
        found[f"x{B}{H}{L}{D}_int64"] = torch.randint(-3, 3, (B, H, L, D), generator=g)
        found[f"x{B}{H}{L}{D}_bool"] = torch.rand(B, H, L, D, generator=g) > 0.5
        found[f"x{B}{H}{L}{D}_meta"] = torch.empty(B, H, L, D, device="meta")
    found["x3d"] = torch.randn(2, 10, 4, generator=g)
    found["x0d"] = torch.tensor(1.0)
    return found


def _indices():
    import torch

    g = torch.Generator().manual_seed(1)
    return {
        "i10x5_lk4": torch.randint(4, (10, 5), generator=g),  # U = 5 > L_K = 4: sampled_addmm's crash
        "i10x3_lk4": torch.randint(4, (10, 3), generator=g),
        "i10x8_lk10": torch.randint(10, (10, 8), generator=g),
        "i1x2": torch.zeros(1, 2, dtype=torch.int64),
        "i10x0": torch.zeros(10, 0, dtype=torch.int64),
        "i10x5_far": torch.full((10, 5), 10**12),
        "i10x5_neg": torch.full((10, 5), -1),
        "i10x5_int32": torch.zeros(10, 5, dtype=torch.int32),
        "i10x5_float": torch.zeros(10, 5),
        "i10x5_meta": torch.empty(10, 5, dtype=torch.int64, device="meta"),
        "i4x25_causal": torch.zeros(4, 25, dtype=torch.int64),
        "i_list": [[0, 1]],
    }


def calls():
    """[(label, function, args, kwargs)]: every call the fuzz makes, in order."""
    import torch

    from course_utils import probsparse as ps
    from course_utils import probsparse_study as study
    from course_utils import seq2seq
    from course_teacher.diagrams import l05_probsparse as diagram
    from course_utils.viz import probsparse as viz
    from course_utils.widgets import probsparse as widgets

    T, I = _tensors(), _indices()
    gen = torch.Generator().manual_seed(2)
    ints = (0, 1, 5, -2, 2.5, True, None, "5")
    picked = ["x22104_torch.float32", "x22104_torch.float64", "x22104_torch.float16", "x22104_torch.bfloat16",
              "x22104_int64", "x22104_bool", "x22104_meta", "x1113_torch.float32", "x2204_torch.float32",
              "x1244_torch.float32", "x2171_torch.float32", "x2244_torch.float32", "x2244_torch.float64",
              "x2244_torch.float16", "x2244_meta", "x3d", "x0d"]
    tensors = [T[name] for name in picked]
    found = []

    def add(function, *args, **kwargs):
        found.append((f"{function.__module__}.{function.__qualname__}", function, args, kwargs))

    # probsparse: sizes and sampling
    for length, factor in itertools.product(ints, (0, 1, 5, True, "5")):
        add(ps.sample_count, length, factor)
    for lq, lk, count in itertools.product((0, 1, 5), (0, 1, 5), (0, 1, 7)):
        for causal in (False, True, 1):
            add(ps.sample_keys, lq, lk, count, causal=causal, generator=gen)
    for device in (None, "meta", "cpu", "nope", 5, torch.device("meta")):
        for generator in (None, gen, 3):
            add(ps.sample_keys, 6, 6, 3, generator=generator, device=device)
    # the steps
    for q, k in itertools.product(tensors, tensors):
        for index in I.values():
            add(ps.sampled_scores, q, k, index)
    for t in (*tensors, torch.zeros(3, 0), [1.0, 2.0]):
        add(ps.sparsity_measure, t)
        for count in (0, 1, 3, 11, 2.0):
            add(ps.select_queries, t, count)
        for length_q, causal in itertools.product((0, 1, 10, 4, "x"), (False, True, None)):
            add(ps.lazy_context, t, length_q, causal)
    for selected in (torch.tensor([[[0, 3]]]), torch.tensor([[[0, 3]]], dtype=torch.int32), torch.zeros(1, 0, dtype=torch.long),
                     torch.empty(1, 2, dtype=torch.long, device="meta"), [0, 1], torch.tensor(2)):
        for length_k in (0, 1, 5, -1, 2.0):
            add(ps.causal_keep, selected, length_k)
    # the two implementations
    for implementation in (ps.prob_sparse_attention, ps.prob_sparse_attention_plain):
        for q, k, v in itertools.product(tensors[:8], tensors[:8], tensors[:3]):
            add(implementation, q, k, v)
        q = T["x22104_torch.float32"]
        for options in ({"causal": True}, {"need_weights": True}, {"need_weights": 1}, {"trace": ps.Trace()},
                        {"trace": "t"}, {"factor": 100}, {"factor": 0}, {"scale": float("nan")}, {"scale": -1},
                        {"generator": gen}, {"generator": "g"}, {"causal": True, "need_weights": True},
                        *({"index": index} for index in I.values()),
                        *({"index": index, "causal": True} for index in I.values())):
            add(implementation, q, q, q, **options)
        small = T["x1244_torch.float32"]
        add(implementation, small, small, small, factor=10, causal=True, need_weights=True)
        meta = T["x22104_meta"]
        add(implementation, meta, meta, meta, causal=True, need_weights=True)
        add(implementation, meta, meta, meta, index=I["i10x5_meta"])
    for sizes in itertools.product((0, 1, 3, True), (1, 2), (1, 2, 17), (1, 8), (1, 5, 0)):
        add(ps.walkthrough, *sizes)
    add(ps.walkthrough, fast="yes")
    add(ps.walkthrough, causal=None)
    add(ps.walkthrough, 1, 1, 1, 1, 1, fast=True, causal=True)
    # the trace
    trace = ps.Trace()
    for name, tensor in (("a", T["x22104_torch.float32"]), ("", T["x22104_torch.float32"]), (3, T["x0d"]),
                         ("m", T["x22104_meta"]), ("b", [1.0]), ("c", None)):
        add(trace.record, name, tensor)
    add(trace.inputs, T["x22104_torch.float32"], 5)
    add(trace.inputs)
    add(trace.__getitem__, "nothing")
    add(trace.__getitem__, 3)
    add(trace.call, 5)

    # the study
    for sizes in itertools.product((0, 1, 12), (1, 2), (0, 1, 12), (1, 4, 64)):
        add(study.random_inputs, *sizes, generator=gen)
        add(study.few_dominant_queries, *sizes, generator=gen)
        add(study.few_dominant_queries, *sizes, active=20, generator=gen)
        add(study.aligned_queries, *sizes, generator=gen)
        add(study.aligned_queries, *sizes, active=2, averse=3, groups=2, generator=gen)
    add(study.random_inputs, 1, 1, 4, 4, generator=None)
    add(study.aligned_queries, 1, 1, 12, 4, active=2, averse=20, groups=2, generator=gen)
    add(study.aligned_queries, 1, 1, 12, 4, active=2, averse=2, groups=2, size=-1.0, generator=gen)
    for q, k in itertools.product(tensors, tensors):
        add(study.with_shared_feature, q, k, generator=gen)
        add(study.exact_measure, q, k)
        add(study.exact_measure, q, k, causal=True)
        for count in (0, 1, 3, 50):
            add(study.most_active, q, k, count)
            for index in (I["i10x3_lk4"], I["i10x8_lk10"], I["i10x5_far"], I["i_list"]):
                add(study.chosen_by, q, k, index, count)
        add(study.early_share, q, k, causal=True, generator=gen)
        add(study.early_share, q, k, causal=False, generator=gen, factor=0)
        add(study.recall_by_sample_size, q, k, [1, 2], truth_count=2, generator=gen)
        add(study.recall_by_offset, q, k, [0, 10], {"u": ps.sparsity_measure}, truth_count=2, generator=gen)
    for t in tensors:
        for offset in (0, 1.5, float("inf"), "1", None):
            add(study.add_offset, t, offset)
        for positions in (torch.zeros(2, 2, 1, dtype=torch.long), torch.full((2, 2, 1), 99), torch.zeros(2, 2, 0, dtype=torch.long),
                          torch.zeros(1, 1, 1, dtype=torch.int32), [0]):
            add(study.rows, t, positions)
            add(study.recall, positions, positions)
            add(study.overlap, positions, torch.zeros(2, 2, 1, dtype=torch.long))
            add(study.attend_chosen, t, t, t, positions)
        for other in tensors[:4]:
            add(study.relative_error, t, other)
    for lengths in ([10, 12], [0], [9], [], (10,), "10", [10.0]):
        add(study.accuracy_by_length, lengths, heads=1, dim=4, generator=gen)
    add(study.recall_by_sample_size, T["x22104_torch.float32"], T["x22104_torch.float32"], [0], generator=gen)
    add(study.recall_by_sample_size, T["x22104_torch.float32"], T["x22104_torch.float32"], [1], truth_count=11,
        generator=gen)
    add(study.recall_by_offset, T["x22104_torch.float32"], T["x22104_torch.float32"], [0], {}, generator=gen)
    add(study.recall_by_offset, T["x22104_torch.float32"], T["x22104_torch.float32"], [float("nan")],
        {"u": ps.sparsity_measure}, generator=gen)
    model, batch = seq2seq.make_model(0), seq2seq.held_out(3)
    for m, b in ((model, batch), (None, batch), (model, None), (torch.nn.Linear(2, 2), batch), (model, "batch")):
        add(study.trained_attention_rows, m, b)
    for xs, ys in (([1, 2], [1, 4]), ([1], [1]), ([1, 1], [1, 2]), ([1, 2], [0, 1]), ([1, 2], [1]), ("ab", "cd"),
                   ([1, float("inf")], [1, 2])):
        add(study.log_log_slope, xs, ys)

    # the pictures
    from matplotlib.figure import Figure

    def ax():
        return Figure().subplots()

    for count in (0, 999, 2**70, -1, 1.5, float("nan"), float("inf"), "3", None, True):
        add(viz.format_bytes, count)
    weights = (torch.rand(3, 5), torch.rand(3, 5).double(), torch.rand(3, 5).half(), torch.zeros(0, 5), torch.rand(5),
               torch.empty(3, 5, device="meta"), torch.ones(3, 5, dtype=torch.bool), torch.ones(3, 5, dtype=torch.int64),
               [[0.5, 0.5]], None)
    for w in weights:
        for measures in (torch.rand(3), [1.0, 2.0, 3.0], [1.0], None, "abc", torch.empty(3, device="meta")):
            add(viz.weight_rows, w, measures, ax=ax())
        add(viz.weight_rows, w, [1.0, 2.0, 3.0], ax=ax(), labels=["a"])
        add(viz.weight_rows, w, [1.0, 2.0, 3.0], ax="axes")
        for selected in (torch.tensor([0, 2]), torch.tensor([7]), torch.tensor([-1]), torch.tensor([0.5]), [0], None):
            add(viz.chosen_weights, w, selected, ax=ax())
        add(viz.chosen_weights, w, torch.tensor([0]), ax=ax(), title=3)
    plain, fast = ps.walkthrough(1, 1, 8, 4), ps.walkthrough(1, 1, 8, 4, fast=True)
    for a, b in ((plain, fast), (fast, plain), (ps.Trace(), fast), (None, fast), (plain, "fast")):
        add(viz.walkthrough_bars, a, b, ax=ax())
    add(viz.walkthrough_bars, plain, fast, ax=ax(), title=5)
    for trace in (plain, ps.Trace(), None, "trace"):
        add(widgets.walkthrough_table, trace)
    for sizes in ({}, {"length": 1}, {"length": 16384, "batch": 256, "heads": 64, "dim": 128, "factor": 10},
                  {"length": 0}, {"batch": True}, {"heads": 2.5}, {"dim": "64"}, {"factor": None}):
        add(widgets.walkthrough_view, **sizes)
    for sizes in ({}, {"length": 100}, {"length": 96.0}, {"dim": 7}, {"batch": 0}, {"batch": 1000}, {"factor": 11},
                  {"heads": "8"}, {"length": True}):
        add(widgets.walkthrough_explorer, **sizes)
    for lang in ("en", "zh", "fr", None, 3):
        add(diagram.probsparse, lang)
    return found


def _child():
    """Make every call, printing before each its number and after it how it ended."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    warnings.simplefilter("ignore")
    from course_utils.validation import ArgumentError

    returned = 0
    for number, (label, function, args, kwargs) in enumerate(calls()):
        print(f"CALL {number} {label}", flush=True)
        try:
            function(*args, **kwargs)
            returned += 1
        except ArgumentError as error:
            text = str(error)
            if "argument " not in text and "参数 " not in text:
                print(f"UNCLEAR {number} {label}: ArgumentError without the argument: {text[:200]}", flush=True)
        except KeyError as error:
            if not (label.endswith("__getitem__") and ("the steps are" in str(error) or "已有的步骤" in str(error))):
                print(f"UNCLEAR {number} {label}: KeyError {str(error)[:200]}", flush=True)
        except Exception as error:  # noqa: BLE001 (what the test looks for)
            print(f"UNCLEAR {number} {label}: {type(error).__name__}: {str(error)[:200]}", flush=True)
        import matplotlib.pyplot as plt

        plt.close("all")
    print(f"RETURNED {returned}", flush=True)
    print("DONE", flush=True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_public_function_of_lesson_05_crashes_or_fails_unclearly(lang):
    code = (f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); from course_utils import i18n; "
            f"i18n.set_language({lang!r}); import test_lesson05_fuzz as fuzz; fuzz._child()")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=900,
                          cwd=HERE.parent.parent)
    lines = done.stdout.splitlines()
    last = next((line for line in reversed(lines) if line.startswith("CALL ")), "no call")
    assert done.returncode == 0 and lines and lines[-1] == "DONE", (
        f"the process ended with code {done.returncode} during {last}\n{done.stderr[-2000:]}")
    unclear = [line for line in lines if line.startswith("UNCLEAR")]
    assert not unclear, "\n".join(unclear[:30]) + f"\n({len(unclear)} in all)"
    assert sum(line.startswith("CALL ") for line in lines) > 5000
    assert int(lines[-2].split()[1]) > 500  # and a good share of them return something


def test_the_fuzz_itself_catches_a_crash():
    """A call that kills the process is reported as a failure naming it, not a pytest crash."""
    code = "import os, signal; print('CALL 0 boom', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and done.stdout.strip() == "CALL 0 boom"
