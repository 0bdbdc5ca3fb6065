"""How long every explorer of lessons 00–08 and 10 takes to redraw when one of its controls moves, on one
CPU thread.

    .venv/bin/python benchmarks/bench_widgets.py            (or: make bench)
    .venv/bin/python benchmarks/bench_widgets.py --quick    3 calls per control instead of 7
    .venv/bin/python benchmarks/bench_widgets.py --only walkthrough   the explorers whose name holds a word

A redraw is what the browser waits for after an input: the widget's own callback, the view (the
figure and the summary) and the PNG the image shows. It is measured as that: the explorer is built
as the notebook builds it (``course_utils.widgets``), then a control is set to another value, which
runs the callback synchronously in this process (ipywidgets' ``observe``), and back, again and
again. The time of one redraw is wall-clock time around one assignment; the table gives the median
of the calls after a warm-up (the first call of a control, and the models' training, are not
timed), in wall-clock seconds and in seconds of the process's CPU time (user + system), which the
time slices other processes take do not inflate: on a busy machine it is the better guess of the
time on an idle one. The trained models are the ones the lessons train (seed 0). A figure laid out
once per set of texts (lessons 01, 07, 08: ``viz.figures.LayoutPerKey``) is timed here on texts the
warm-up laid out; a move to texts never shown costs one layout more (lesson 01: about 0.12 s of CPU
instead of 0.09, on a sweep of every d_k).

The bar: every redraw within 0.3 s on one thread. Timings depend on the machine and on its load;
this is a benchmark, never a test (the tests check the structure that keeps redraws fast: the
figure is drawn once and updated, computations that a control does not change are cached).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported

import argparse
import statistics
import sys
import time

import torch

torch.set_num_threads(1)

from course_utils import corpus, gpt, seq2seq, toy, widgets
from course_utils.viz import use_course_style

#: The bar: seconds a redraw may take on one thread.
BAR = 0.3


def _controls(box, names):
    """The explorer's controls by the name its view gives them (`names`: in the order of the
    explorer's controls, for a course older than ``box.controls``)."""
    return getattr(box, "controls", None) or dict(zip(names, box.children[0].children))


def explorers():
    """(name, build) for every explorer of the course; build() returns (box, {control: (a, b)}),
    two values each control moves between."""
    def reverse_models():
        return toy.train("reverse", seed=0).model, toy.train("double", seed=0).model

    def shakespeare_gpt():
        """A GPT of the shipped model's size (6 layers, E = 256, 8 heads, context 128: 4.8 M parameters),
        untrained: what a redraw costs does not depend on the weights."""
        text = corpus.load("shakespeare")
        model = gpt.make_gpt(text.vocab_size, seed=0, layers=6, d_model=256, heads=8, context=128).eval()
        return model, text, text.text[:120]

    return [
        ("permute (00)", lambda: (widgets.permute_explorer(),
                                  {"order": [(0, 1, 2), (2, 0, 1)], "contiguous": [False, True]})),
        ("broadcast (00)", lambda: (widgets.broadcast_explorer(),
                                    {"mask": [widgets.MASK_SHAPES[0], widgets.MASK_SHAPES[1]],
                                     "scores": [widgets.SCORES_SHAPES[0], widgets.SCORES_SHAPES[3]]})),
        ("scaling (01)", lambda: (widgets.scaling_explorer(),
                                  {"d_k": [64, 512], "scaled": [False, True]})),
        ("mask (02)", lambda: (widgets.mask_explorer(),
                               {"length_1": [6, 2], "length_2": [3, 0], "causal": [False, True]})),
        ("attention maps (03)", lambda: (widgets.attention_maps_explorer(*reverse_models()),
                                         {"example": [0, 17]})),
        ("heads (04)", lambda: (widgets.heads_explorer(toy.train_neighbours(seed=0, heads=2).model),
                                {"example": [0, 17], "head": [0, 1]})),
        ("walkthrough (05)", lambda: (widgets.walkthrough_explorer(),
                                      {"length": [96, 16384], "batch": [32, 256], "heads": [8, 64],
                                       "dim": [64, 128], "factor": [5, 10]})),
        ("decoding (06)", lambda: (widgets.decoding_explorer(seq2seq.train(seed=0).model),
                                   {"example": [0, 17], "text": ["", "abcdefgh"]})),
        ("cache (07)", lambda: (widgets.cache_explorer(),
                                {"tokens": [6, 20], "variant": ["GQA", "MHA"], "window": [0, 4]})),
        ("tiles (08)", lambda: (widgets.tiles_explorer(block=2, causal=False),
                                {"step": [3, 9], "block": [2, 4], "causal": [False, True]})),
        ("next character (10)", lambda: (widgets.next_character_explorer(*shakespeare_gpt()),
                                         {"temperature": [0.8, 1.2], "top_k": [0, 10], "seed": [0, 1]})),
    ]


def measure(control, values, calls):
    """Median seconds of `calls` redraws, `control` moved between `values` (after one untimed move):
    (wall-clock, CPU time of the process)."""
    start_value = control.value
    control.value = values[1] if control.value == values[0] else values[0]  # warm-up
    wall, cpu = [], []
    for _ in range(calls):
        target = values[0] if control.value != values[0] else values[1]
        begin, begin_cpu = time.perf_counter(), time.process_time()
        control.value = target
        wall.append(time.perf_counter() - begin)
        cpu.append(time.process_time() - begin_cpu)
    control.value = start_value
    return statistics.median(wall), statistics.median(cpu)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 calls per control instead of 7")
    parser.add_argument("--only", default="", help="only the explorers whose name holds this word")
    args = parser.parse_args(argv)
    use_course_style()
    calls = 3 if args.quick else 7
    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, median of {calls} redraws each")
    print(f"{'explorer':<22}{'control':<12}{'wall s':>8}{'cpu s':>8}{'PNG KiB':>9}  bar {BAR} s (cpu)")
    for title, build in explorers():
        if args.only not in title:
            continue
        box, moves = build()
        controls = _controls(box, list(moves))
        for name, values in moves.items():
            wall, cpu = measure(controls[name], values, calls)
            png = len(box.image.value) / 1024  # what one redraw sends to the browser (before base64)
            rows.append((title, name, wall, cpu))
            print(f"{title:<22}{name:<12}{wall:>8.3f}{cpu:>8.3f}{png:>9.1f}  {'ok' if cpu <= BAR else 'SLOW'}",
                  flush=True)
    slow = [row for row in rows if row[3] > BAR]
    print(f"{len(rows) - len(slow)} of {len(rows)} controls redraw within {BAR} s of CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
