"""ProbSparse attention, measured side by side in one run, on one CPU thread and on a GPU (lesson 05).

    .venv/bin/python benchmarks/bench_probsparse.py                 (or: make bench)
    .venv/bin/python benchmarks/bench_probsparse.py --quick         fewer lengths and rounds, a smoke test
    .venv/bin/python benchmarks/bench_probsparse.py --strict        exit 1 when a bar is missed
    .venv/bin/python benchmarks/bench_probsparse.py --device cuda   the GPU only (--out DIR: where the JSON goes)

It measures on every device present (the CPU, and a CUDA GPU when torch sees one) and writes each
device's figures to course_utils/results/probsparse-<device>.json (course_utils.measured: the format):
one figure per L, {"L", "U", "course_ms", "original_ms", "sdpa_ms", "course_bytes", "original_bytes",
"sdpa_bytes"} (median milliseconds; peak extra bytes of one call).

Three candidates, a forward pass in inference mode (``torch.inference_mode()``) on random inputs,
self-attention, B = 1, H = 8, D = D_v = 64, factor 5 (U = u = 5·⌈ln L⌉), for L from 96 to 16384:

- course: ``course_utils.probsparse.prob_sparse_attention`` (sampled scores by
  ``torch.sparse.sampled_addmm``, never a (B, H, L, U, D) tensor);
- original: the algorithm of the official Informer code's ProbAttention without a mask (Informer2020,
  ``models/attn.py``), which the widely copied re-implementation lesson 05 dissects takes step for
  step, re-created below (``original``): K_expand,
  the gathered K_sample (B, H, L_Q, U, D), its matmul with Q, the measure M, top-u, Q_reduce, the
  scaled attention of the chosen queries and the mean(V) context. It computes what the course
  computes: the scores use matmul and the scale is applied, as the official code does (the
  re-implementation's einsum and missing scale, ERRATA 9 and 10, are not re-created); its measure
  divides by the sample size U, as the course's does (ERRATA 12: both codes divide by L_K, which
  changes which queries win, so the outputs would differ).
  It takes the same contiguous (B, H, L, D) tensors as the others (the Informer layer transposes
  its (B, L, H, D) inputs first and copies its output back; that cost is left out);
- F.sdpa: full attention, ``F.scaled_dot_product_attention``.

Both ProbSparse candidates get the same sampled indices (drawn once per length, outside the timed
call) and the benchmark checks that they return the same output before timing them.

Time: every length is timed in interleaved rounds (each round runs every candidate once, in turn),
so a change in machine load touches all alike; the table gives median milliseconds of wall-clock
time, and in brackets of the process's CPU time (user + system), which the time slices other
processes take do not inflate: on a busy machine it is the better guess of the time on an idle
one. The bars use wall-clock time. Full attention takes seconds at large L (tens of seconds at
16384), so it runs in the first round and then only while its total stays under 10 s.

Memory, "peak extra MB": what one call adds to the process at its peak, measured for each
(candidate, L) in a fresh subprocess: the inputs and the indices are made first, every candidate
runs once at L = 96 (so that libraries have loaded), then the kernel's high-water mark of resident
memory is reset (``echo 5 > /proc/self/clear_refs``) and the result is VmHWM after the call minus
VmRSS before it (``/proc/self/status``); where clear_refs is not writable, ru_maxrss (the peak of the
process's life) after the call minus VmRSS before it. The output tensor (B·H·L·D·4 bytes, 16.8 MB
at L = 8192) counts, for every candidate. The subprocess runs with MALLOC_MMAP_THRESHOLD_=65536:
glibc then maps every block of 64 KiB or more on its own and unmaps it when freed, so freed memory
that malloc kept from earlier work cannot hide new memory.

On a GPU: L from 512 to 32768 (the GPU's F.sdpa is fast enough to run every round); every call is
waited for (torch.cuda.synchronize) before its time is taken; the peak extra memory is what torch's
allocator reports (torch.cuda.max_memory_allocated after a reset, minus what was allocated before),
measured in this process.

Bars (issue 9), on the CPU: at L = 8192 the course's version is at least 10× faster than the
re-created original and uses at most 1/20 of its peak extra memory; it is faster than F.sdpa at
every L ≥ 512. On a GPU the same comparisons are reported, not held to a bar: there F.sdpa runs one
fused kernel while ProbSparse launches a dozen small ones, and the ratio to F.sdpa changes sign with L.
The log-log slopes of time and memory against L are fitted over L ≥ 2048.

Timings are not tests: they vary with the machine and its load; the ratios measured in one run are
what to compare.
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py beside this file

import torch
import torch.nn.functional as F

import record
from course_utils.measured import cuda_peak_bytes
from course_utils.probsparse import prob_sparse_attention, sample_count, sample_keys
from course_utils.probsparse_study import log_log_slope

B, H, D, FACTOR = 1, 8, 64, 5
LENGTHS = {"cpu": (96, 512, 2048, 4096, 8192, 16384), "cuda": (512, 2048, 8192, 16384, 32768)}
QUICK_LENGTHS = {"cpu": (96, 512, 2048, 8192), "cuda": (512, 2048, 8192)}
BAR_LENGTH = 8192
CANDIDATES = ("course", "original", "F.sdpa")


# ----------------------------------------------------------------------------- the re-created original


def original(queries, keys, values, index_sample, factor=FACTOR, scale=None):
    """The official Informer code's ProbAttention (no mask), on (B, H, L, D) tensors, with the
    sampled indices passed in. Its steps, in its order; the measure divided by the sample size (see
    the module docstring). Its index tensors are made on the inputs' device (the official code makes
    them on the CPU), so that a GPU's run indexes with GPU tensors alone."""
    B, H, L_K, E = keys.shape
    _, _, L_Q, _ = queries.shape
    U_part = min(factor * math.ceil(math.log(L_K)), L_K)
    u = min(factor * math.ceil(math.log(L_Q)), L_Q)

    # _prob_QK: every query's sampled keys, gathered
    K_expand = keys.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
    K_sample = K_expand[:, :, torch.arange(L_Q, device=keys.device).unsqueeze(1), index_sample, :]
    Q_K_sample = torch.matmul(queries.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)
    M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), U_part)
    M_top = M.topk(u, sorted=False)[1]
    b, h = torch.arange(B, device=keys.device)[:, None, None], torch.arange(H, device=keys.device)[None, :, None]
    Q_reduce = queries[b, h, M_top, :]
    scores_top = torch.matmul(Q_reduce, keys.transpose(-2, -1))

    # forward: scale, the initial context (mean of V), then the chosen queries' attention
    scores_top = scores_top * (scale or 1.0 / math.sqrt(E))
    context = values.mean(dim=-2).unsqueeze(-2).expand(B, H, L_Q, values.shape[-1]).clone()
    attn = torch.softmax(scores_top, dim=-1)
    context[b, h, M_top, :] = torch.matmul(attn, values)
    return context


# ----------------------------------------------------------------------------- inputs and candidates


def inputs(length, device="cpu"):
    """q, k, v (B, H, L, D) and the sampled indices (L, U), the same for every candidate (drawn on
    the CPU, then moved: every device gets the same numbers)."""
    g = torch.Generator().manual_seed(length)
    q, k, v = (torch.randn(B, H, length, D, generator=g) for _ in range(3))
    index = sample_keys(length, length, sample_count(length, FACTOR), generator=g)
    return tuple(t.to(device) for t in (q, k, v, index))


def _wait(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def calls(q, k, v, index):
    return {
        "course": lambda: prob_sparse_attention(q, k, v, factor=FACTOR, index=index)[0],
        "original": lambda: original(q, k, v, index),
        "F.sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
    }


def check_same_output(q, k, v, index):
    """The two ProbSparse candidates compute the same output (same queries chosen, same values)."""
    with torch.inference_mode():
        found = calls(q, k, v, index)
        torch.testing.assert_close(found["course"](), found["original"](), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- time


def timed(length, rounds, full_budget_s, device="cpu"):
    """{candidate: [(wall seconds, CPU seconds), ...]} in interleaved rounds. F.sdpa runs in the
    first round and then only while its total stays within `full_budget_s`."""
    q, k, v, index = inputs(length, device)
    check_same_output(q, k, v, index)
    found = calls(q, k, v, index)
    times = {name: [] for name in CANDIDATES}
    with torch.inference_mode():
        for round_ in range(rounds):
            for name, call in found.items():
                if name == "F.sdpa" and round_ > 0 and sum(wall for wall, _ in times[name]) > full_budget_s:
                    continue
                _wait(device)
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                _wait(device)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


# ----------------------------------------------------------------------------- memory


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # kB
    raise KeyError(field)


def memory_child(name, length):
    """Run in a fresh process: the peak extra bytes of one call of `name` at `length` (JSON)."""
    torch.set_num_threads(1)
    with torch.inference_mode():
        calls(*inputs(96))[name]()  # load what the call loads, at a small size
        q, k, v, index = inputs(length)
        call = calls(q, k, v, index)[name]
        before = _status("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
            method = "clear_refs"
        except OSError:
            method = "ru_maxrss"
        output = call()
        if method == "clear_refs":
            peak = _status("VmHWM")
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB
        del output
    print(json.dumps({"bytes": peak - before, "method": method}))


def peak_extra(name, length, device="cpu"):
    """(bytes, method): on a GPU, torch's allocator's peak in this process; on the CPU, from a fresh subprocess."""
    if torch.device(device).type == "cuda":
        with torch.inference_mode():
            call = calls(*inputs(length, device))[name]
            output, peak = cuda_peak_bytes(call, device)
        del output
        return peak, "torch.cuda.max_memory_allocated"
    environment = dict(os.environ, OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="65536")
    done = subprocess.run(
        [sys.executable, __file__, "--memory-child", name, str(length)],
        capture_output=True, text=True, env=environment, check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found["bytes"], found["method"]


# ----------------------------------------------------------------------------- report


def measure(device, quick=False):
    """Time and weigh every candidate at every length on `device`; print the tables. Returns (settings,
    figures, bars): bars [(text, passed)], held on the CPU only."""
    lengths = (QUICK_LENGTHS if quick else LENGTHS)[device]
    print(f"ProbSparse forward, inference mode, B={B}, H={H}, D={D}, factor {FACTOR}, float32, on "
          f"{'one CPU thread' if device == 'cpu' else torch.cuda.get_device_name(device)}; "
          f"'original' = the official Informer code's algorithm re-created (divisor U)")
    print()
    with torch.inference_mode():  # every candidate once at a small size: libraries loaded, nothing timed yet
        for call in calls(*inputs(96, device)).values():
            call()
    _wait(device)
    times, cpu, paired, rounds_run, memory, methods = {}, {}, {}, {}, {}, set()
    for length in lengths:
        if device == "cpu":
            rounds = (3 if length <= 4096 else 2) if quick else (21 if length <= 2048 else 11 if length <= 8192 else 5)
        else:
            rounds = 5 if quick else 11
        found = timed(length, rounds, full_budget_s=2.0 if quick else 10.0, device=device)
        times[length] = {name: 1000 * statistics.median(w for w, _ in found[name]) for name in CANDIDATES}
        cpu[length] = {name: 1000 * statistics.median(c for _, c in found[name]) for name in CANDIDATES}
        paired[length] = statistics.median(o[0] / c[0] for o, c in zip(found["original"], found["course"]))
        rounds_run[length] = (len(found["course"]), len(found["F.sdpa"]))
        memory[length] = {}
        for name in CANDIDATES:
            memory[length][name], method = peak_extra(name, length, device)
            methods.add(method)

    mb = 1e6
    clock = "wall clock (CPU time of the process in brackets)" if device == "cpu" else "wall clock, each call waited for"
    print(f"Time, milliseconds: median over interleaved rounds, {clock}")
    header = (f"{'L':>6} {'U=u':>4} | {'course':>16} {'original':>18} {'F.sdpa':>20} | "
              f"{'orig/course':>16} {'paired':>6} {'sdpa/course':>11} | rounds")
    print(header)
    print("-" * len(header))
    for length in lengths:
        t, c = times[length], cpu[length]
        print(f"{length:>6} {sample_count(length, FACTOR):>4} | {t['course']:7.1f} ({c['course']:6.1f}) "
              f"{t['original']:8.1f} ({c['original']:7.1f}) {t['F.sdpa']:9.1f} ({c['F.sdpa']:8.1f}) | "
              f"{t['original'] / t['course']:6.1f} ({c['original'] / c['course']:6.1f}) {paired[length]:6.1f} "
              f"{t['F.sdpa'] / t['course']:11.2f} | {rounds_run[length][0]} ({rounds_run[length][1]})")
    print("'paired': median over the rounds of original/course within one round; rounds: course and original "
          "(F.sdpa in brackets).")
    print()
    print(f"Peak extra memory of one call, MB ({', '.join(sorted(methods))})")
    header = f"{'L':>6} | {'course':>8} {'original':>9} {'F.sdpa':>8} | {'original/course':>15}"
    print(header)
    print("-" * len(header))
    for length in lengths:
        m = memory[length]
        print(f"{length:>6} | {m['course'] / mb:8.1f} {m['original'] / mb:9.1f} {m['F.sdpa'] / mb:8.1f} | "
              f"{m['original'] / max(m['course'], 1):15.1f}")

    fitted = [length for length in lengths if length >= 2048]
    if len(fitted) >= 2:
        print()
        print(f"log-log slopes over L = {', '.join(map(str, fitted))}:")
        for name in CANDIDATES:
            print(f"  {name:9} time {log_log_slope(fitted, [times[x][name] for x in fitted]):5.2f}   "
                  f"memory {log_log_slope(fitted, [max(memory[x][name], 1) for x in fitted]):5.2f}")

    print()
    bars = []
    if BAR_LENGTH in times:
        t, c, m = times[BAR_LENGTH], cpu[BAR_LENGTH], memory[BAR_LENGTH]
        speed, share = t["original"] / t["course"], m["course"] / m["original"]
        text = (f"at L = {BAR_LENGTH}, course ≥ 10× faster than the re-created original: {t['course']:.1f} ms vs "
                f"{t['original']:.1f} ms, {speed:.1f}× (paired {paired[BAR_LENGTH]:.1f}×, CPU time "
                f"{c['original'] / c['course']:.1f}×)")
        bars.append((text, speed >= 10))
        text = (f"at L = {BAR_LENGTH}, course's peak extra memory ≤ 1/20 of the original's: "
                f"{m['course'] / mb:.1f} MB vs {m['original'] / mb:.1f} MB, 1/{1 / share:.0f}")
        bars.append((text, share <= 1 / 20))
    slower = [length for length in lengths if length >= 512 and times[length]["course"] >= times[length]["F.sdpa"]]
    where = "yes" if not slower else "not at L = " + ", ".join(map(str, slower))
    bars.append((f"course faster than F.sdpa at every L ≥ 512: {where}", not slower))
    for text, passed in bars:
        print(f"{'bar' if device == 'cpu' else 'report'}: {text}: "
              f"{('PASS' if passed else 'MISSED') if device == 'cpu' else ('yes' if passed else 'no')}")
    settings = {"B": B, "H": H, "D": D, "factor": FACTOR, "dtype": "float32",
                "mode": "forward, torch.inference_mode()", "threads": 1 if device == "cpu" else None,
                "memory": ", ".join(sorted(methods))}
    figures = [{"L": length, "U": sample_count(length, FACTOR),
                **{f"{key}_ms": times[length][name] for name, key in KEYS.items()},
                **{f"{key}_bytes": memory[length][name] for name, key in KEYS.items()}} for length in lengths]
    return settings, figures, bars if device == "cpu" else []


#: the candidates' keys in the JSON figures
KEYS = {"course": "course", "original": "original", "F.sdpa": "sdpa"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer lengths and rounds (a smoke test, noisier numbers)")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a bar is missed (CPU)")
    parser.add_argument("--memory-child", nargs=2, metavar=("CANDIDATE", "L"), help=argparse.SUPPRESS)
    record.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return 0
    torch.set_num_threads(1)
    print(record.machine_line())
    passed = True
    for device in record.devices(args.device):
        print(f"\n===== {device}\n")
        settings, figures, bars = measure(device, args.quick)
        passed = passed and all(ok for _, ok in bars)
        print(f"\nwritten: {record.write('probsparse', device, settings, figures, args.out)}")
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
