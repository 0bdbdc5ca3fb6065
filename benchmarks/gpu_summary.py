"""The headline figures of the benchmarks' results in a folder, a few lines each (gpu_session.sh ends with them).

    python benchmarks/gpu_summary.py OUT/results [cuda]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it

from course_utils import measured  # noqa: E402


def mib(n):
    return "-" if n is None else f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def ratio(a, b):
    return "-" if a is None or b is None or not b else f"{a / b:.2f}x"


def lines(result):
    """What each benchmark's file says in brief: the lessons' comparisons, as ratios."""
    name = result.benchmark
    if name == "probsparse":
        yield "ProbSparse (course) against F.sdpa, speed-up = sdpa time / course time; original / course:"
        for row in result.rows():
            yield (f"  L = {row['L']:>5}: {ratio(row['sdpa_ms'], row['course_ms']):>7} ({row['course_ms']} ms vs "
                   f"{row['sdpa_ms']} ms); original/course {ratio(row['original_ms'], row['course_ms'])}; "
                   f"memory course {mib(row['course_bytes'])}, original {mib(row['original_bytes'])}, "
                   f"sdpa {mib(row['sdpa_bytes'])}")
    elif name == "decoding":
        yield "KV cache: recompute time / cache time:"
        for row in result.rows():
            yield (f"  {row['model']:>6} batch {row['batch']:>2} N = {row['N']:>4}: "
                   f"{ratio(row['recompute_s'], row['cache_s']):>7} ({row['cache_s']} s vs {row['recompute_s']} s)")
    elif name == "tiled":
        yield "Tiled (Python loop) against F.sdpa: time ratio, peak extra memory:"
        for row in result.rows():
            yield (f"  L = {row['L']:>5}: tiled {row['tiled_ms']} ms, sdpa {row['sdpa_ms']} ms "
                   f"({ratio(row['tiled_ms'], row['sdpa_ms'])}); causal/tiled "
                   f"{ratio(row['tiled_causal_ms'], row['tiled_ms'])}; memory tiled {mib(row['tiled_bytes'])}, "
                   f"sdpa {mib(row['sdpa_bytes'])}, textbook {mib(row['textbook_bytes'])}, "
                   f"materialised {mib(row['materialised_bytes'])} in {row['materialised_ms']} ms")
    elif name == "multihead":
        bar = {row["candidate"]: row["ms"] for row in result.rows(part="bar")}
        yield (f"Fused + F.sdpa against nn.MultiheadAttention (B=8, L=256, E=512): "
               f"{ratio(bar.get('fused_sdpa'), bar.get('torch_default'))} of its default call's time, "
               f"{ratio(bar.get('fused_sdpa'), bar.get('torch_no_weights'))} of need_weights=False's")
        for row in result.rows(part="lesson"):
            yield (f"  lesson 04 sweep H = {row['H']:>2}: naive {row['naive_ms']} ms, fused {row['fused_ms']} ms, "
                   f"nn.MHA {row['torch_ms']} ms, fused+sdpa {row['sdpa_ms']} ms")


def main(folder, device="cuda"):
    found = False
    for benchmark in ("multihead", "probsparse", "decoding", "tiled"):
        try:
            result = measured.load(benchmark, device, folder)
        except ValueError as error:
            print(f"{benchmark}: {error}")
            continue
        if result is None:
            print(f"{benchmark}: no {benchmark}-{device}.json in {folder}")
            continue
        found = True
        print(f"{benchmark}: {result.device_name}, torch {result.torch}, {result.date}")
        for line in lines(result):
            print(line)
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
