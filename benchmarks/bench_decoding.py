"""Greedy decoding with a KV cache against recomputing every token, side by side in one run, on one
CPU thread and on a GPU (lesson 07).

    .venv/bin/python benchmarks/bench_decoding.py                 (or: make bench)
    .venv/bin/python benchmarks/bench_decoding.py --quick         64 and 256 new tokens only, one round
    .venv/bin/python benchmarks/bench_decoding.py --device cuda   the GPU only (--out DIR: where the JSON goes)

It measures on every device present (the CPU, and a CUDA GPU when torch sees one) and writes each
device's figures to course_utils/results/decoding-<device>.json (course_utils.measured: the format):
one figure per model and N, {"model", "batch", "N", "cache_s", "recompute_s"}.

The model is ``decoding.TinyDecoder`` with its default sizes (vocabulary 64, E = 64, 4 query heads
over 2 key/value heads, 2 layers, d_ff = 128, RoPE), random weights, eval mode, float32. From one
8-token prompt it generates N = 64, 256 and 1024 new tokens greedily, twice: with the cache
(``generate(..., cache=True)``: the prompt prefilled once, then one token per step) and by
recomputing the whole sequence at every step (``cache=False``). Both runs must choose the same
tokens (checked). The two are timed in interleaved rounds (each round runs both), so a change in
machine load touches both alike; the table gives the median seconds and the ratio
recompute / cache, which grows with N: the cache makes a step cost O(T), recomputing O(T²).

On a GPU the same tiny model is timed (each run waited for with torch.cuda.synchronize), and a larger
one besides, "larger" (E = 1024, 16 query heads over 4 key/value heads, 4 layers, d_ff = 4096, a
batch of 16 sequences, N = 128 and 512): at the tiny model's size a GPU step costs its kernel
launches whatever it computes, with or without the cache, while the larger model's steps are big
enough for the work that recomputing adds to show. (On one CPU thread the larger model's recomputing
would take the better part of an hour, so the CPU times the tiny model only.)
Timings are not tests: they vary with the machine and its load; the ratios of one run are what to
compare.
"""

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py beside this file

import torch

import record
from course_utils.decoding import make_tiny_decoder

LENGTHS = (64, 256, 1024)
#: {model: (its make_tiny_decoder options, batch, the numbers of new tokens, the devices it runs on)}
MODELS = {
    "tiny": ({}, 1, LENGTHS, ("cpu", "cuda")),
    "larger": ({"d_model": 1024, "heads": 16, "kv_heads": 4, "layers": 4, "d_ff": 4096}, 16, (128, 512), ("cuda",)),
}




def measure(device, quick=False):
    """Time both ways for every model that runs on `device`; print a table. Returns (settings, figures)
    or raises RuntimeError when the two ways chose different tokens."""
    figures, settings = [], {"prompt": 8, "dtype": "float32", "threads": 1 if device == "cpu" else None}
    for name, (options, batch, lengths, where) in MODELS.items():
        if device not in where:
            continue
        lengths = lengths[:2] if quick and name == "tiny" else lengths[:1] if quick else lengths
        model = make_tiny_decoder(seed=0, **options).to(device)
        prompt = torch.randint(0, model.vocab, (batch, 8), generator=torch.Generator().manual_seed(0)).to(device)
        model.generate(prompt, 8, cache=True)  # warm-up
        model.generate(prompt, 8, cache=False)
        sizes = ", ".join(f"{key} {value}" for key, value in options.items()) or "the default sizes"
        settings[f"{name}_model"] = sizes
        print(f"\n{name} decoder ({sizes}), batch {batch}, median seconds")
        print(f"{'new tokens':>10}  {'cache (s)':>10}  {'recompute (s)':>14}  {'recompute / cache':>18}")
        for n in lengths:
            rounds = 1 if quick or n >= 1024 or name != "tiny" else 3
            cached, recomputed = [], []
            for _ in range(rounds):
                seconds, (tokens, _) = record.timed(lambda n=n: model.generate(prompt, n, cache=True), device)
                cached.append(seconds)
                seconds, (again, _) = record.timed(lambda n=n: model.generate(prompt, n, cache=False), device)
                recomputed.append(seconds)
                if not torch.equal(tokens, again):
                    raise RuntimeError(f"{name} on {device}: the two chose different tokens at N = {n}")
            c, r = statistics.median(cached), statistics.median(recomputed)
            print(f"{n:>10}  {c:>10.3f}  {r:>14.3f}  {r / c:>17.2f}x")
            figures.append({"model": name, "batch": batch, "N": n, "cache_s": c, "recompute_s": r})
    return settings, figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 and 256 new tokens, one round")
    record.add_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'native')}, one thread")
    for device in record.devices(args.device):
        print(f"\n===== {device}" + (f": {torch.cuda.get_device_name(device)}" if device == "cuda" else ""))
        try:
            settings, figures = measure(device, args.quick)
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return 1
        print(f"\nwritten: {record.write('decoding', device, settings, figures, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
