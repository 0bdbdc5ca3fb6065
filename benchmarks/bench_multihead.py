"""Multi-head attention, measured side by side in one run, on one CPU thread and on a GPU (lesson 04).

    .venv/bin/python benchmarks/bench_multihead.py                 (or: make bench)
    .venv/bin/python benchmarks/bench_multihead.py --quick         fewer rounds, for a smoke test
    .venv/bin/python benchmarks/bench_multihead.py --strict        exit 1 when the bar is missed
    .venv/bin/python benchmarks/bench_multihead.py --device cuda   the GPU only (--out DIR: where the JSON goes)

It measures on every device present (the CPU, and a CUDA GPU when torch sees one) and writes each
device's figures to course_utils/results/multihead-<device>.json (course_utils.measured: the format).

Part 1, the bar: the course's fused layer with F.scaled_dot_product_attention
(``FusedMultiheadAttention(..., need_weights=False)``) is no slower than ``nn.MultiheadAttention``
on a forward pass in inference mode, B = 8, L = 256, E = 512, H = 8 (self-attention, eval mode,
``torch.inference_mode()``). ``nn.MultiheadAttention`` is timed twice: its default call
(``need_weights=True``, head-averaged weights) and ``need_weights=False``; with these settings
both take its fast path (one C++ operator). The naive layer and the fused layer that returns its
weights are timed on the same input for comparison.

Part 2: naive vs fused across head counts (E = 512 fixed, so d = E / H shrinks as H grows), both
returning their (B, H, L, L) weights, and both with need_weights=False.

Part 3, the lesson's sweep: lesson 04 §8 times the four versions (naive, fused, nn.MultiheadAttention
with need_weights=False, fused + F.sdpa) at B = 2, L = 64, E = 256 for H = 1, 4, 16, 64 on the CPU
as it runs; this is the same sweep, so that its GPU figures can stand beside the lesson's.

Every configuration is timed in interleaved rounds (each round runs every candidate once, in
turn), so a change in machine load touches all of them alike; the table gives the median
milliseconds and the ratio to the reference of its part. On a GPU each call is waited for
(torch.cuda.synchronize) before its time is taken. Timings are not tests: they vary with the
machine and its load; the ratios measured in one run are what to compare.

The JSON figures: {"part": "bar", "candidate", "ms"}, {"part": "heads", "H", "d", "naive_ms",
"fused_ms", "naive_sdpa_ms", "fused_sdpa_ms"} and {"part": "lesson", "H", "naive_ms", "fused_ms",
"torch_ms", "sdpa_ms"}.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py beside this file

import torch  # noqa: E402

import record  # noqa: E402
from course_utils.multihead import FusedMultiheadAttention, NaiveMultiheadAttention  # noqa: E402

B, L, E, H = 8, 256, 512, 8
HEAD_COUNTS = (1, 2, 4, 8, 16, 32, 64)
#: lesson 04 §8's sweep over the number of heads: (batch, length, embed) and the head counts
LESSON_SIZES, LESSON_HEADS = (2, 64, 256), (1, 4, 16, 64)
#: the part-1 candidates' keys in the JSON figures
BAR_KEYS = {
    "course fused + F.sdpa (need_weights=False)": "fused_sdpa",
    "nn.MultiheadAttention, default call (need_weights=True)": "torch_default",
    "nn.MultiheadAttention, need_weights=False": "torch_no_weights",
    "course fused, returns (B, H, L, L) weights": "fused_weights",
    "course naive (loop over heads), returns weights": "naive_weights",
}


def layers(embed, heads, seed=0, device="cpu"):
    """A naive layer, a fused layer and an nn.MultiheadAttention with the same weights, eval mode, on `device`."""
    torch.manual_seed(seed)
    naive = NaiveMultiheadAttention(embed, heads).eval()
    fused = FusedMultiheadAttention(embed, heads).eval().copy_weights_from(naive)
    return naive.to(device), fused.to(device), fused.to_torch().eval().to(device)


def _wait(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(candidates, rounds, warmup=2, device="cpu"):
    """{name: median milliseconds} for {name: call}, timed in `rounds` interleaved rounds."""
    times = {name: [] for name in candidates}
    with torch.inference_mode():
        for _ in range(warmup):
            for call in candidates.values():
                call()
        _wait(device)
        for _ in range(rounds):
            for name, call in candidates.items():
                start = time.perf_counter()
                call()
                _wait(device)
                times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(found) for name, found in times.items()}


def check_equal(naive, fused, torch_layer, x):
    """The candidates compute the same output (so the table compares like with like)."""
    with torch.inference_mode():
        expected = fused(x, x, x)[0]
        for output in (naive(x, x, x)[0], fused(x, x, x, need_weights=False)[0],
                       torch_layer(x, x, x, need_weights=False)[0], torch_layer(x, x, x)[0]):
            torch.testing.assert_close(output, expected, atol=1e-4, rtol=1e-4)


def part1(rounds, device="cpu"):
    naive, fused, torch_layer = layers(E, H, device=device)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(1)).to(device)
    check_equal(naive, fused, torch_layer, x)
    candidates = {
        "course fused + F.sdpa (need_weights=False)": lambda: fused(x, x, x, need_weights=False),
        "nn.MultiheadAttention, default call (need_weights=True)": lambda: torch_layer(x, x, x),
        "nn.MultiheadAttention, need_weights=False": lambda: torch_layer(x, x, x, need_weights=False),
        "course fused, returns (B, H, L, L) weights": lambda: fused(x, x, x),
        "course naive (loop over heads), returns weights": lambda: naive(x, x, x),
    }
    found = interleaved(candidates, rounds, device=device)
    reference = found["nn.MultiheadAttention, default call (need_weights=True)"]
    print(f"Part 1: forward, inference mode, B={B}, L={L}, E={E}, H={H}, {_where(device)}, median of {rounds} rounds")
    print(f"{'':58} {'ms':>8} {'/ nn.MHA default':>17}")
    for name, ms in found.items():
        print(f"{name:58} {ms:8.1f} {ms / reference:17.2f}")
    ours = found["course fused + F.sdpa (need_weights=False)"]
    best_torch = min(reference, found["nn.MultiheadAttention, need_weights=False"])
    passed = ours <= reference
    print()
    print(f"bar: course fused + F.sdpa no slower than nn.MultiheadAttention's default call: "
          f"{ours:.1f} ms vs {reference:.1f} ms, ratio {ours / reference:.2f}: {'PASS' if passed else 'MISSED'}")
    print(f"     and against its faster call (need_weights=False): ratio {ours / best_torch:.2f}")
    figures = [{"part": "bar", "candidate": BAR_KEYS[name], "ms": ms} for name, ms in found.items()]
    return passed, figures


def _where(device):
    return "one thread" if torch.device(device).type == "cpu" else torch.cuda.get_device_name(device)


def part2(rounds, device="cpu"):
    print()
    print(f"Part 2: naive vs fused as the number of heads grows (B={B}, L={L}, E={E}, d = E / H), "
          f"median of {rounds} rounds")
    header = f"{'H':>3} {'d':>4} | {'naive ms':>9} {'fused ms':>9} {'naive/fused':>12} | " \
             f"{'naive+sdpa':>11} {'fused+sdpa':>11} {'naive/fused':>12}"
    print(f"{'':10}| {'both return their (B, H, L, L) weights':^32} | {'both need_weights=False (F.sdpa)':^36}")
    print(header)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(2)).to(device)
    figures = []
    for heads in HEAD_COUNTS:
        naive, fused, _ = layers(E, heads, device=device)
        found = interleaved(
            {
                "naive": lambda: naive(x, x, x),
                "fused": lambda: fused(x, x, x),
                "naive_sdpa": lambda: naive(x, x, x, need_weights=False),
                "fused_sdpa": lambda: fused(x, x, x, need_weights=False),
            },
            rounds,
            warmup=1,
            device=device,
        )
        print(f"{heads:>3} {E // heads:>4} | {found['naive']:9.1f} {found['fused']:9.1f} "
              f"{found['naive'] / found['fused']:12.2f} | {found['naive_sdpa']:11.1f} {found['fused_sdpa']:11.1f} "
              f"{found['naive_sdpa'] / found['fused_sdpa']:12.2f}")
        figures.append({"part": "heads", "H": heads, "d": E // heads,
                        **{f"{name}_ms": ms for name, ms in found.items()}})
    return figures


def part3(rounds, device="cpu"):
    """Lesson 04 §8's sweep over H, timed as the benchmark times (interleaved rounds)."""
    batch, length, embed = LESSON_SIZES
    print()
    print(f"Part 3: lesson 04's sweep (B={batch}, L={length}, E={embed}), milliseconds per call, median of {rounds} rounds")
    print(f"{'H':>3} | {'naive':>8} {'fused':>8} {'nn.MHA':>8} {'fused+sdpa':>11}")
    x = torch.randn(batch, length, embed, generator=torch.Generator().manual_seed(3)).to(device)
    figures = []
    for heads in LESSON_HEADS:
        naive, fused, torch_layer = layers(embed, heads, device=device)
        found = interleaved({
            "naive": lambda: naive(x, x, x),
            "fused": lambda: fused(x, x, x),
            "torch": lambda: torch_layer(x, x, x, need_weights=False),
            "sdpa": lambda: fused(x, x, x, need_weights=False),
        }, rounds, warmup=1, device=device)
        print(f"{heads:>3} | {found['naive']:8.2f} {found['fused']:8.2f} {found['torch']:8.2f} {found['sdpa']:11.2f}")
        figures.append({"part": "lesson", "H": heads, **{f"{name}_ms": ms for name, ms in found.items()}})
    return figures


def measure(device, quick=False):
    """(settings, figures, whether the bar passed) of every part on `device`."""
    rounds1, rounds2, rounds3 = (3, 1, 3) if quick else (21, 5, 7)
    passed, bar = part1(rounds1, device)
    figures = bar + part2(rounds2, device) + part3(rounds3, device)
    settings = {"dtype": "float32", "mode": "forward, eval mode, torch.inference_mode()", "B": B, "L": L, "E": E,
                "bar_H": H, "lesson_B": LESSON_SIZES[0], "lesson_L": LESSON_SIZES[1], "lesson_E": LESSON_SIZES[2],
                "threads": torch.get_num_threads() if device == "cpu" else None,
                "rounds": [rounds1, rounds2, rounds3]}
    return settings, figures, passed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke test, noisier numbers)")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when the bar is missed")
    record.add_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(record.machine_line())
    passed = True
    for device in record.devices(args.device):
        print(f"\n===== {device}: {_where(device)}\n")
        settings, figures, bar = measure(device, args.quick)
        passed = passed and bar
        print(f"\nwritten: {record.write('multihead', device, settings, figures, args.out)}")
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
