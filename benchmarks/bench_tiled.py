"""Tiled attention (lesson 08) against the textbook line, materialised attention and
F.scaled_dot_product_attention, side by side in one run on one CPU thread: time and peak extra memory
as L grows.

    .venv/bin/python benchmarks/bench_tiled.py            (or: make bench)
    .venv/bin/python benchmarks/bench_tiled.py --quick    L up to 4096, one round: a smoke test
    .venv/bin/python benchmarks/bench_tiled.py --strict   exit 1 when a bar is missed
    .venv/bin/python benchmarks/bench_tiled.py --full     also the textbook line and the materialised
                                                          version at L = 16384 (two and three (1, 8, L, L)
                                                          float32 matrices: 16 and 24 GiB)

Inputs: B = 1, H = 8, d = 64, float32, no gradients, L = 1024 … 16384. Candidates: the course's
``tiled_attention`` (tiles of 256 × 256) without and with ``causal=True``; the textbook line
softmax(q @ kᵀ / √d) @ v (two (1, 8, L, L) matrices alive at its peak: the fair baseline, lesson 08
§2); ``materialised_attention`` (three at its peak: the product and its scaled copy, then the
scores minus the log-sum-exp); and F.scaled_dot_product_attention (which runs its tiled CPU kernel,
_scaled_dot_product_flash_attention_for_cpu, on these inputs: the script checks it).

Time: each L is timed in interleaved rounds (every candidate once per round, in turn), median.

Peak extra memory, measured honestly on a CPU: Python's tracemalloc does not see torch's
allocations, so each measurement runs in a fresh Python process that makes the inputs, runs the
candidate once on a short sequence (so that libraries and lazy initialisation are in memory), then
resets the kernel's high-water mark of its resident memory (writing 5 to /proc/self/clear_refs;
Linux ≥ 4.0), reads its resident memory (VmRSS), runs the candidate once and reads the high-water
mark (VmHWM). Peak extra = VmHWM − VmRSS before the call: everything the call made resident, its
output included (4 MiB at L = 8192 for every candidate), the allocator's own slack too. Where
/proc/self/clear_refs cannot be written the script says so and reports ru_maxrss-based numbers.

Bars: at L = 8192, the tiled version's peak extra memory ≤ 1/20 of the textbook line's, and the
causal tiled time ≤ 0.6 × the non-causal tiled time. The ratios to F.sdpa and to
materialised_attention are reported (no bar).
Timings vary with the machine and its load; compare the ratios measured in one run.

It measures on every device present (the CPU, and a CUDA GPU when torch sees one; ``--device cuda``
for the GPU only) and writes each device's figures to course_utils/results/tiled-<device>.json
(``--out DIR``: elsewhere; course_utils.measured: the format): one figure per L,
{"L", "<candidate>_ms", "<candidate>_bytes"} for the candidates tiled, tiled_causal, textbook,
materialised and sdpa (null: not run, or failed on the device).

On a GPU: L = 1024, 4096 and 16384 (``--quick``: up to 4096), every candidate at every L (the
materialised version's three (1, 8, L, L) matrices are 24 GiB at L = 16384, which an H100 holds);
each call is waited for (torch.cuda.synchronize) before its time is taken, and the peak extra memory
is what torch's allocator reports (course_utils.measured.cuda_peak_bytes), its output included. No
bars there: the tiles are a Python loop launching small kernels, which a GPU runs many times slower
than F.sdpa's one fused kernel (lesson 09 writes the kernel); the memory bar is reported.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_utils without installing it
sys.path.insert(0, str(ROOT / "benchmarks"))  # record.py beside this file

import math

import torch
import torch.nn.functional as F

import record
from course_utils.measured import cuda_peak_bytes
from course_utils import validation
from course_utils.tiled import materialised_attention, sdpa_backend, tiled_attention

# the whole-matrix candidates are measured at L = 16384 on purpose (8 GiB of scores): no limit but memory
validation.MAX_SCORE_BYTES = None

B, H, D = 1, 8, 64
BLOCK = 256
LENGTHS = (1024, 2048, 4096, 8192, 16384)
CUDA_LENGTHS = (1024, 4096, 16384)
BAR_L = 8192
CANDIDATES = {
    "tiled": lambda q, k, v: tiled_attention(q, k, v, block_q=BLOCK, block_k=BLOCK),
    "tiled causal": lambda q, k, v: tiled_attention(q, k, v, block_q=BLOCK, block_k=BLOCK, causal=True),
    "textbook": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1) @ v,
    "materialised": lambda q, k, v: materialised_attention(q, k, v),
    "F.sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}
#: The (1, 8, L, L) float32 matrices alive at each whole-matrix candidate's peak (lesson 08 §2 counts them).
MATRICES = {"textbook": 2, "materialised": 3}
#: the candidates' keys in the JSON figures
KEYS = {"tiled": "tiled", "tiled causal": "tiled_causal", "textbook": "textbook", "materialised": "materialised",
        "F.sdpa": "sdpa"}


def inputs(L, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, L, D, generator=g).to(device) for _ in range(3)]


def _status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure_memory(name, L):
    """In this (fresh) process: the peak extra resident bytes of one call of candidate `name`."""
    torch.set_num_threads(1)
    call = CANDIDATES[name]
    with torch.no_grad():
        call(*inputs(256, seed=1))  # libraries and lazy initialisation in memory first
        q, k, v = inputs(L)
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current VmRSS
            method = "VmHWM after clear_refs"
        except OSError:
            method = "VmHWM (no reset possible)"
        before = _status("VmRSS")
        output = call(q, k, v)
        peak = _status("VmHWM")
    del output
    print(f"{peak - before} {method}")


def memory(name, L):
    """Peak extra bytes of candidate `name` at length L, measured in a fresh process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, __file__, "--measure-memory", name, str(L)], capture_output=True,
                          text=True, env=env, check=True)
    value, method = done.stdout.strip().split(" ", 1)
    return int(value), method


def interleaved(candidates, args, rounds):
    """{name: median seconds}, every candidate once per round, in turn."""
    times = {name: [] for name in candidates}
    with torch.no_grad():
        for _ in range(rounds):
            for name, call in candidates.items():
                start = time.perf_counter()
                call(*args)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(found) for name, found in times.items()}


def fmt_bytes(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def run(lengths, rounds, full):
    print(f"B={B}, H={H}, d={D}, float32, no gradients, tiles of {BLOCK} × {BLOCK}, one thread, "
          f"median of {rounds} round(s); memory: peak extra resident bytes in a fresh process per measurement")
    q, k, v = inputs(256)
    backend = sdpa_backend(q, k, v)
    print(f"F.scaled_dot_product_attention runs the '{backend}' kernel on these inputs (torch {torch.__version__})")
    print()
    header = f"{'L':>6} | " + " | ".join(f"{name:>12}" for name in CANDIDATES)
    rows_time, rows_memory, results = [], [], {}
    method = None
    for L in lengths:
        q, k, v = inputs(L)
        expected = F.scaled_dot_product_attention(q, k, v)
        with torch.no_grad():
            assert torch.allclose(CANDIDATES["tiled"](q, k, v)[0], expected, atol=1e-4)
        candidates = dict(CANDIDATES)
        if L > 8192 and not full:
            for name in MATRICES:  # their (1, 8, L, L) matrices alone: 16 and 24 GiB at L = 16384
                del candidates[name]
        seconds = interleaved(candidates, (q, k, v), rounds)
        found = {}
        for name in candidates:
            found[name], method = memory(name, L)
        results[L] = (seconds, found)
        def skipped(name):
            return f"{'(' + fmt_bytes(MATRICES.get(name, 0) * B * H * L * L * 4) + ')':>12}"

        rows_time.append(f"{L:>6} | " + " | ".join(f"{1000 * seconds[n]:10.0f}ms" if n in seconds else skipped(n)
                                                    for n in CANDIDATES))
        rows_memory.append(f"{L:>6} | " + " | ".join(f"{fmt_bytes(found[n]):>12}" if n in found else skipped(n)
                                                      for n in CANDIDATES))
        print(f"L = {L} done", file=sys.stderr)
    print("time (median)")
    print(header)
    print("\n".join(rows_time))
    print()
    print(f"peak extra memory ({method}); in parentheses: not run, the bytes its L×L matrices would take")
    print(header)
    print("\n".join(rows_memory))
    print()
    print("ratios")
    print(f"{'L':>6} | {'tiled/sdpa':>10} | {'causal/tiled':>12} | {'tiled mem/textbook mem':>23} | "
          f"{'tiled mem/materialised mem':>27}")
    for L, (seconds, found) in results.items():
        ratios = [f"1/{found[name] / found['tiled']:.0f}" if name in found else "-" for name in MATRICES]
        print(f"{L:>6} | {seconds['tiled'] / seconds['F.sdpa']:10.1f} | "
              f"{seconds['tiled causal'] / seconds['tiled']:12.2f} | {ratios[0]:>23} | {ratios[1]:>27}")
    print()
    if BAR_L not in results:
        print(f"bars: not measured (L = {BAR_L} not run)")
        return True, results, method
    seconds, found = results[BAR_L]
    memory_ok = found["tiled"] * 20 <= found["textbook"]
    causal_ok = seconds["tiled causal"] <= 0.6 * seconds["tiled"]
    print(f"bar: at L = {BAR_L}, tiled peak extra memory ≤ 1/20 of the textbook line's: "
          f"{fmt_bytes(found['tiled'])} vs {fmt_bytes(found['textbook'])} "
          f"(1/{found['textbook'] / found['tiled']:.0f}) -> {'PASS' if memory_ok else 'FAIL'}")
    print(f"bar: at L = {BAR_L}, causal tiled time ≤ 0.6 × non-causal tiled time: "
          f"{seconds['tiled causal'] / seconds['tiled']:.2f} -> {'PASS' if causal_ok else 'FAIL'}")
    print(f"report: at L = {BAR_L}, tiled time / F.sdpa time = {seconds['tiled'] / seconds['F.sdpa']:.1f} "
          "(a Python loop of small matrix products against a compiled kernel)")
    return memory_ok and causal_ok, results, method


def run_cuda(lengths, rounds, device="cuda"):
    """Every candidate at every L on the GPU: {L: ({name: seconds or None}, {name: bytes or None})}.
    A candidate that fails there (a tensor left on the CPU, say) is reported and recorded as null."""
    print(f"B={B}, H={H}, d={D}, float32, no gradients, tiles of {BLOCK} × {BLOCK}, on "
          f"{torch.cuda.get_device_name(device)}, median of {rounds} round(s), each call waited for; "
          "memory: torch's allocator's peak extra bytes")
    results, broken = {}, {}
    with torch.no_grad():
        for call in CANDIDATES.values():  # a first call at a small size: kernels loaded, nothing timed yet
            try:
                call(*inputs(256, seed=1, device=device))
            except RuntimeError:
                pass  # a candidate broken on this device is reported where it is measured, below
        torch.cuda.synchronize(device)
        for L in lengths:
            q, k, v = inputs(L, device=device)
            times, found = {name: [] for name in CANDIDATES}, {}
            for name, call in CANDIDATES.items():
                if name in broken:
                    continue
                try:
                    output, found[name] = cuda_peak_bytes(lambda: call(q, k, v), device)
                    del output
                except (RuntimeError, torch.OutOfMemoryError) as error:
                    broken[name] = str(error).splitlines()[0]
                    print(f"{name} failed on {device} at L = {L}: {broken[name]}")
                torch.cuda.empty_cache()
            for _ in range(rounds):
                for name, call in CANDIDATES.items():
                    if name in found:
                        torch.cuda.synchronize(device)
                        start = time.perf_counter()
                        call(q, k, v)
                        torch.cuda.synchronize(device)
                        times[name].append(time.perf_counter() - start)
            results[L] = ({name: statistics.median(times[name]) if times[name] else None for name in CANDIDATES},
                          {name: found.get(name) for name in CANDIDATES})
            print(f"L = {L} done", file=sys.stderr)
    header = f"{'L':>6} | " + " | ".join(f"{name:>12}" for name in CANDIDATES)
    for title, column, show in (("time (median)", 0, lambda x: f"{1000 * x:10.1f}ms"), ("peak extra memory", 1, fmt_bytes)):
        print(title)
        print(header)
        for L, row in results.items():
            print(f"{L:>6} | " + " | ".join(f"{show(row[column][n]) if row[column][n] is not None else '-':>12}"
                                             for n in CANDIDATES))
        print()
    for L, (seconds, found) in results.items():
        if seconds["tiled"] and seconds["F.sdpa"]:
            print(f"report: at L = {L}, tiled time / F.sdpa time = {seconds['tiled'] / seconds['F.sdpa']:.0f}; "
                  f"tiled peak extra memory {fmt_bytes(found['tiled'])}, F.sdpa's {fmt_bytes(found['F.sdpa'])}"
                  + (f", the textbook line's {fmt_bytes(found['textbook'])}" if found.get("textbook") else ""))
    return results


def figures(results):
    """The JSON figures of {L: ({name: seconds}, {name: bytes})}: milliseconds and bytes, null where not run."""
    rows = []
    for L, (seconds, found) in results.items():
        row = {"L": L}
        row.update({f"{key}_ms": 1000 * seconds[name] if seconds.get(name) is not None else None
                    for name, key in KEYS.items()})
        row.update({f"{key}_bytes": found.get(name) for name, key in KEYS.items()})
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="L up to 4096, one round")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a bar is missed (CPU)")
    parser.add_argument("--full", action="store_true", help="also the materialised version at L = 16384 on the CPU (16 GiB)")
    parser.add_argument("--measure-memory", nargs=2, metavar=("NAME", "L"), help=argparse.SUPPRESS)
    record.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.measure_memory:
        measure_memory(args.measure_memory[0], int(args.measure_memory[1]))
        return 0
    torch.set_num_threads(1)
    print(record.machine_line(load=False))
    passed = True
    for device in record.devices(args.device):
        print(f"\n===== {device}\n")
        settings = {"B": B, "H": H, "D": D, "block": BLOCK, "dtype": "float32", "mode": "forward, torch.no_grad()",
                    "threads": 1 if device == "cpu" else None}
        if device == "cpu":
            lengths = [L for L in LENGTHS if L <= 4096] if args.quick else list(LENGTHS)
            ok, results, method = run(lengths, 1 if args.quick else 3, args.full)
            passed = passed and ok
            settings["memory"] = f"peak extra resident bytes in a fresh process ({method})"
        else:
            lengths = [L for L in CUDA_LENGTHS if L <= 4096] if args.quick else list(CUDA_LENGTHS)
            results = run_cuda(lengths, 1 if args.quick else 3, device)
            settings["memory"] = "torch.cuda.max_memory_allocated"
        print(f"\nwritten: {record.write('tiled', device, settings, figures(results), args.out)}")
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
