"""Greedy decoding with a KV cache against recomputing every token, side by side in one run on one
CPU thread (lesson 07).

    .venv/bin/python benchmarks/bench_decoding.py            (or: make bench)
    .venv/bin/python benchmarks/bench_decoding.py --quick    64 and 256 new tokens only, one round

The model is ``decoding.TinyDecoder`` with its default sizes (vocabulary 64, E = 64, 4 query heads
over 2 key/value heads, 2 layers, d_ff = 128, RoPE), random weights, eval mode, float32. From one
8-token prompt it generates N = 64, 256 and 1024 new tokens greedily, twice: with the cache
(``generate(..., cache=True)``: the prompt prefilled once, then one token per step) and by
recomputing the whole sequence at every step (``cache=False``). Both runs must choose the same
tokens (checked). The two are timed in interleaved rounds (each round runs both), so a change in
machine load touches both alike; the table gives the median seconds and the ratio
recompute / cache, which grows with N: the cache makes a step cost O(T), recomputing O(T²).
Timings are not tests: they vary with the machine and its load; the ratios of one run are what to
compare.
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it

import torch

from course_utils.decoding import make_tiny_decoder

LENGTHS = (64, 256, 1024)


def timed(call):
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 and 256 new tokens, one round")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lengths = LENGTHS[:2] if args.quick else LENGTHS
    model = make_tiny_decoder(seed=0)
    prompt = torch.randint(0, model.vocab, (1, 8), generator=torch.Generator().manual_seed(0))
    model.generate(prompt, 8, cache=True)  # warm-up
    model.generate(prompt, 8, cache=False)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'native')}, one thread")
    print(f"{'new tokens':>10}  {'cache (s)':>10}  {'recompute (s)':>14}  {'recompute / cache':>18}")
    for n in lengths:
        rounds = 1 if args.quick or n >= 1024 else 3
        cached, recomputed = [], []
        for _ in range(rounds):
            seconds, (tokens, _) = timed(lambda n=n: model.generate(prompt, n, cache=True))
            cached.append(seconds)
            seconds, (again, _) = timed(lambda n=n: model.generate(prompt, n, cache=False))
            recomputed.append(seconds)
            if not torch.equal(tokens, again):
                print(f"the two chose different tokens at N = {n}", file=sys.stderr)
                return 1
        c, r = statistics.median(cached), statistics.median(recomputed)
        print(f"{n:>10}  {c:>10.3f}  {r:>14.3f}  {r / c:>17.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
