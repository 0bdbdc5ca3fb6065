"""Multi-head attention, measured side by side in one run on one CPU thread (lesson 04).

    .venv/bin/python benchmarks/bench_multihead.py            (or: make bench)
    .venv/bin/python benchmarks/bench_multihead.py --quick    fewer rounds, for a smoke test
    .venv/bin/python benchmarks/bench_multihead.py --strict   exit 1 when the bar is missed

Part 1, the bar: the course's fused layer with F.scaled_dot_product_attention
(``FusedMultiheadAttention(..., need_weights=False)``) is no slower than ``nn.MultiheadAttention``
on a forward pass in inference mode, B = 8, L = 256, E = 512, H = 8 (self-attention, eval mode,
``torch.inference_mode()``). ``nn.MultiheadAttention`` is timed twice: its default call
(``need_weights=True``, head-averaged weights) and ``need_weights=False``; with these settings
both take its fast path (one C++ operator). The naive layer and the fused layer that returns its
weights are timed on the same input for comparison.

Part 2: naive vs fused across head counts (E = 512 fixed, so d = E / H shrinks as H grows), both
returning their (B, H, L, L) weights, and both with need_weights=False.

Every configuration is timed in interleaved rounds (each round runs every candidate once, in
turn), so a change in machine load touches all of them alike; the table gives the median
milliseconds and the ratio to the reference of its part. Timings are not tests: they vary with the
machine and its load; the ratios measured in one run are what to compare.
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it

import torch  # noqa: E402

from course_utils.multihead import FusedMultiheadAttention, NaiveMultiheadAttention  # noqa: E402

B, L, E, H = 8, 256, 512, 8
HEAD_COUNTS = (1, 2, 4, 8, 16, 32, 64)


def layers(embed, heads, seed=0):
    """A naive layer, a fused layer and an nn.MultiheadAttention with the same weights, eval mode."""
    torch.manual_seed(seed)
    naive = NaiveMultiheadAttention(embed, heads).eval()
    fused = FusedMultiheadAttention(embed, heads).eval().copy_weights_from(naive)
    return naive, fused, fused.to_torch().eval()


def interleaved(candidates, rounds, warmup=2):
    """{name: median milliseconds} for {name: call}, timed in `rounds` interleaved rounds."""
    times = {name: [] for name in candidates}
    with torch.inference_mode():
        for _ in range(warmup):
            for call in candidates.values():
                call()
        for _ in range(rounds):
            for name, call in candidates.items():
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(found) for name, found in times.items()}


def check_equal(naive, fused, torch_layer, x):
    """The candidates compute the same output (so the table compares like with like)."""
    with torch.inference_mode():
        expected = fused(x, x, x)[0]
        for output in (naive(x, x, x)[0], fused(x, x, x, need_weights=False)[0],
                       torch_layer(x, x, x, need_weights=False)[0], torch_layer(x, x, x)[0]):
            torch.testing.assert_close(output, expected, atol=1e-4, rtol=1e-4)


def part1(rounds):
    naive, fused, torch_layer = layers(E, H)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(1))
    check_equal(naive, fused, torch_layer, x)
    candidates = {
        "course fused + F.sdpa (need_weights=False)": lambda: fused(x, x, x, need_weights=False),
        "nn.MultiheadAttention, default call (need_weights=True)": lambda: torch_layer(x, x, x),
        "nn.MultiheadAttention, need_weights=False": lambda: torch_layer(x, x, x, need_weights=False),
        "course fused, returns (B, H, L, L) weights": lambda: fused(x, x, x),
        "course naive (loop over heads), returns weights": lambda: naive(x, x, x),
    }
    found = interleaved(candidates, rounds)
    reference = found["nn.MultiheadAttention, default call (need_weights=True)"]
    print(f"Part 1: forward, inference mode, B={B}, L={L}, E={E}, H={H}, one thread, median of {rounds} rounds")
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
    return passed


def part2(rounds):
    print()
    print(f"Part 2: naive vs fused as the number of heads grows (B={B}, L={L}, E={E}, d = E / H), "
          f"median of {rounds} rounds")
    header = f"{'H':>3} {'d':>4} | {'naive ms':>9} {'fused ms':>9} {'naive/fused':>12} | " \
             f"{'naive+sdpa':>11} {'fused+sdpa':>11} {'naive/fused':>12}"
    print(f"{'':10}| {'both return their (B, H, L, L) weights':^32} | {'both need_weights=False (F.sdpa)':^36}")
    print(header)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(2))
    for heads in HEAD_COUNTS:
        naive, fused, _ = layers(E, heads)
        found = interleaved(
            {
                "naive": lambda: naive(x, x, x),
                "fused": lambda: fused(x, x, x),
                "naive_sdpa": lambda: naive(x, x, x, need_weights=False),
                "fused_sdpa": lambda: fused(x, x, x, need_weights=False),
            },
            rounds,
            warmup=1,
        )
        print(f"{heads:>3} {E // heads:>4} | {found['naive']:9.1f} {found['fused']:9.1f} "
              f"{found['naive'] / found['fused']:12.2f} | {found['naive_sdpa']:11.1f} {found['fused_sdpa']:11.1f} "
              f"{found['naive_sdpa'] / found['fused_sdpa']:12.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke test, noisier numbers)")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when the bar is missed")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rounds1, rounds2 = (3, 1) if args.quick else (21, 5)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} thread, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {load:.1f} at start")
    print()
    passed = part1(rounds1)
    part2(rounds2)
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
