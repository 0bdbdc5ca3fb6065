"""Lesson 09's Triton kernels (course_utils.flash_triton) against F.scaled_dot_product_attention on a
CUDA GPU: forward and forward + backward throughput in TFLOP/s, side by side in one run.

    .venv/bin/python benchmarks/bench_flash_triton.py            (or: make bench, on a GPU)
    .venv/bin/python benchmarks/bench_flash_triton.py --quick    L = 1024 and 4096, d = 64, float16: a smoke test
    .venv/bin/python benchmarks/bench_flash_triton.py --dtypes float16   one dtype (default: float16 and bfloat16)
    .venv/bin/python benchmarks/bench_flash_triton.py --strict   exit 1 when a target is missed

Inputs: float16 and bfloat16 (each a row of its own), H = 16, B · L = 16,384 tokens (B = 16 at L = 1,024 … B = 1 at L = 16,384), d = 64 and
128, causal and not, gradients for the backward. FLOPs counted as FlashAttention's papers count them:
forward 4 · B · H · L² · d (two matrix products), halved when causal; backward 2.5 × the forward (five
products, the scores recomputed). Time: triton.testing.do_bench (median of repeated calls after warm-up,
the L2 cache flushed between them); the backward is timed as forward + backward minus the forward, the
way the kernels run under autograd.

Block sizes and launch options: for each (dtype, d, causal), the configurations in FORWARD_CONFIGS and
BACKWARD_CONFIGS are tried once at L = 4,096 and the fastest is kept for every L (printed): what an
autotuner does, written out. F.sdpa's backend is read from the operators that ran
(course_utils.tiled.sdpa_backend, as lesson 08 does) and printed beside its numbers.

Targets (the design's, issue 36): on an H100/H200-class GPU the kernels' forward at least 0.9 × F.sdpa's
throughput, the backward at least 0.7 ×, at every (dtype, d, causal, L); the backward's FLOP count credits
5 matrix products where its two kernels run 7, so 0.7 × asks each product to run at F.sdpa's speed. Triton
runs only on a CUDA GPU here: on a CPU the script says so and exits (the interpreter measures NumPy, not a GPU). Results: course_utils/results/
flash_triton-cuda.json (benchmarks/record.py), which lesson 09 shows on a CPU.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_utils without installing it
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py beside this file

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import record  # noqa: E402

H, TOKENS = 16, 16384
LENGTHS = (1024, 2048, 4096, 8192, 16384)
DIMS = (64, 128)
DTYPES = ("float16", "bfloat16")
TUNE_L = 4096
#: (block_q, block_k, num_warps, num_stages) tried for the forward and for the backward
FORWARD_CONFIGS = [(64, 64, 4, 3), (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 32, 4, 4),
                   (64, 32, 4, 4)]
BACKWARD_CONFIGS = [(32, 64, 4, 2), (64, 64, 4, 2), (32, 128, 8, 2), (64, 128, 8, 2), (32, 32, 4, 3)]
TARGETS = {"forward": 0.9, "backward": 0.7}


def inputs(L, d, seed=0, dtype="float16"):
    g = torch.Generator(device="cuda").manual_seed(seed)
    B = max(1, TOKENS // L)
    return [torch.randn(B, H, L, d, device="cuda", dtype=getattr(torch, dtype), generator=g).requires_grad_(True)
            for _ in range(3)]


def flops(q, causal, part):
    B, H_, L, d = q.shape
    forward = 4 * B * H_ * L * L * d / (2 if causal else 1)
    return forward * (2.5 if part == "backward" else 1.0)


def timed_ms(call, do_bench):
    return do_bench(call, warmup=25, rep=100)


def calls(q, k, v, causal, forward_config, backward_config, flash_triton):
    """{name: (forward call, forward + backward call)} for the kernels and F.sdpa."""
    d_out = torch.randn_like(q)
    fq, fk, fw, fs = forward_config
    bq, bk, bw, bs = backward_config

    def ours_forward():
        return flash_triton.flash_forward(q, k, v, causal=causal, block_q=fq, block_k=fk, num_warps=fw,
                                          num_stages=fs)

    def ours_both():
        out, lse = ours_forward()
        return flash_triton.flash_backward(q, k, v, out, lse, d_out, causal=causal, block_q=bq, block_k=bk,
                                           num_warps=bw, num_stages=bs)

    def sdpa_forward():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def sdpa_both():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return torch.autograd.grad(out, (q, k, v), d_out)

    return {"triton": (ours_forward, ours_both), "F.sdpa": (sdpa_forward, sdpa_both)}


def check_same(q, k, v, causal, forward_config, backward_config, flash_triton):
    """The kernels' output and gradients match F.sdpa's at this size (2e-2, bfloat16 5e-2), or the run stops."""
    found = calls(q, k, v, causal, forward_config, backward_config, flash_triton)
    out = found["triton"][0]()[0]
    ref = found["F.sdpa"][0]()
    tolerance = 5e-2 if q.dtype == torch.bfloat16 else 2e-2  # bfloat16 keeps 8 bits of mantissa, float16 11
    torch.testing.assert_close(out, ref, atol=tolerance, rtol=tolerance)
    ours, theirs = found["triton"][1](), found["F.sdpa"][1]()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=5e-2, rtol=5e-2)


def tune(d, causal, flash_triton, do_bench, dtype="float16"):
    """The fastest forward and backward configurations at L = TUNE_L."""
    q, k, v = inputs(TUNE_L, d, dtype=dtype)
    best_forward = min(FORWARD_CONFIGS, key=lambda c: _try(lambda: flash_triton.flash_forward(
        q, k, v, causal=causal, block_q=c[0], block_k=c[1], num_warps=c[2], num_stages=c[3]), do_bench))
    out, lse = flash_triton.flash_forward(q, k, v, causal=causal)
    d_out = torch.randn_like(out)
    best_backward = min(BACKWARD_CONFIGS, key=lambda c: _try(lambda: flash_triton.flash_backward(
        q, k, v, out, lse, d_out, causal=causal, block_q=c[0], block_k=c[1], num_warps=c[2], num_stages=c[3]),
        do_bench))
    return best_forward, best_backward


def _try(call, do_bench):
    """The call's time, or +∞ where the configuration does not compile (shared memory too small)."""
    try:
        return timed_ms(call, do_bench)
    except Exception as error:  # noqa: BLE001  (Triton's out-of-resources errors have no common base)
        print(f"  (a configuration failed: {type(error).__name__}: {str(error).splitlines()[0][:100]})")
        return float("inf")


def measure(quick, dtypes=DTYPES):
    from course_utils import flash_triton
    from course_utils.tiled import sdpa_backend
    from triton.testing import do_bench

    lengths = (1024, 4096) if quick else LENGTHS
    dims = (64,) if quick else DIMS
    dtypes = ("float16",) if quick else tuple(dtypes)
    figures = []
    print(f"{', '.join(dtypes)}, H = {H}, B · L = {TOKENS} tokens, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    for dtype, d, causal in ((t, d, c) for t in dtypes for d in dims for c in (False, True)):
        forward_config, backward_config = tune(d, causal, flash_triton, do_bench, dtype)
        q, k, v = inputs(1024, d, dtype=dtype)
        backend = sdpa_backend(q, k, v, is_causal=causal)
        print(f"\n{dtype}, d = {d}, causal = {causal}: forward blocks (block_q, block_k, num_warps, num_stages) = "
              f"{forward_config}, backward = {backward_config}; F.sdpa runs '{backend}'")
        print(f"{'L':>6} | {'fwd TFLOP/s':>11} {'sdpa':>7} {'ratio':>6} | {'bwd TFLOP/s':>11} {'sdpa':>7} {'ratio':>6}")
        for L in lengths:
            q, k, v = inputs(L, d, dtype=dtype)
            check_same(q, k, v, causal, forward_config, backward_config, flash_triton)
            found = calls(q, k, v, causal, forward_config, backward_config, flash_triton)
            row = {"dtype": dtype, "d": d, "causal": causal, "L": L, "B": q.shape[0], "sdpa_backend": backend,
                   "forward_config": "×".join(map(str, forward_config)),
                   "backward_config": "×".join(map(str, backward_config))}
            for name, (forward, both) in found.items():
                f_ms = timed_ms(forward, do_bench)
                b_ms = max(timed_ms(both, do_bench) - f_ms, 1e-6)
                key = "triton" if name == "triton" else "sdpa"
                row[f"{key}_forward_ms"], row[f"{key}_backward_ms"] = f_ms, b_ms
                row[f"{key}_forward_tflops"] = flops(q, causal, "forward") / f_ms / 1e9
                row[f"{key}_backward_tflops"] = flops(q, causal, "backward") / b_ms / 1e9
            row["forward_ratio"] = row["triton_forward_tflops"] / row["sdpa_forward_tflops"]
            row["backward_ratio"] = row["triton_backward_tflops"] / row["sdpa_backward_tflops"]
            figures.append(row)
            print(f"{L:>6} | {row['triton_forward_tflops']:>11.1f} {row['sdpa_forward_tflops']:>7.1f} "
                  f"{row['forward_ratio']:>6.2f} | {row['triton_backward_tflops']:>11.1f} "
                  f"{row['sdpa_backward_tflops']:>7.1f} {row['backward_ratio']:>6.2f}")
    launch_us = launch_cost_us(flash_triton, do_bench)
    print(f"\none launch of a one-row softmax kernel: {launch_us:.1f} µs (the cost a Python loop of kernels pays per step)")
    tiled_rows = lesson_08(do_bench)
    settings = {"dtype": ", ".join(dtypes), "H": H, "tokens": TOKENS, "lengths": list(lengths), "dims": list(dims),
                "timing": "triton.testing.do_bench, warmup 25 ms, rep 100 ms, median",
                "flops": "forward 4·B·H·L²·d (halved when causal), backward 2.5 × forward",
                "launch_us": launch_us, "triton": triton_version()}
    for L, tiled, whole in tiled_rows:
        settings[f"lesson08_tiled_forward_ms_L{L}"] = tiled
        settings[f"lesson08_materialised_forward_ms_L{L}"] = whole
    return settings, figures


def launch_cost_us(flash_triton, do_bench):
    """Microseconds per launch of a kernel with almost nothing to do (one row of 16): the fixed cost."""
    x = torch.randn(1, 16, device="cuda")
    flash_triton.softmax_rows(x)
    return do_bench(lambda: flash_triton.softmax_rows(x), warmup=25, rep=100) * 1000


def lesson_08(do_bench):
    """[L, tiled_attention's forward ms, the materialised version's ms] at d = 64, not causal: lesson 08's
    Python loop of tiles (256 × 256) on the GPU, each tile a few kernel launches."""
    from course_utils import validation
    from course_utils.tiled import materialised_attention, tiled_attention

    validation.MAX_SCORE_BYTES = None  # the materialised version is measured whole on purpose (2 GiB at L = 4096)
    rows = []
    for L in (1024, 4096):
        q, k, v = (t.detach() for t in inputs(L, 64))
        with torch.no_grad():
            tiled = do_bench(lambda: tiled_attention(q, k, v, block_q=256, block_k=256), warmup=5, rep=50)
            whole = do_bench(lambda: materialised_attention(q, k, v), warmup=5, rep=50)
        rows.append([L, tiled, whole])
        print(f"lesson 08 at L = {L}, d = 64: tiled_attention {tiled:.2f} ms, materialised {whole:.2f} ms")
    return rows


def triton_version():
    import triton

    return triton.__version__


def missed(figures):
    """The (row, part) pairs below their target."""
    return [(row, part) for row in figures for part, bar in TARGETS.items() if row[f"{part}_ratio"] < bar]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="L = 1024 and 4096, d = 64 only")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES), help="the input dtypes measured")
    record.add_arguments(parser)
    args = parser.parse_args(argv)
    if "cuda" not in record.devices(args.device):
        print("bench_flash_triton: no CUDA GPU here, nothing to measure (Triton's interpreter on a CPU runs NumPy; "
              "lesson 09 shows the committed GPU results instead)")
        return 0
    settings, figures = measure(args.quick, args.dtypes)
    print(f"\nwritten: {record.write('flash_triton', 'cuda', settings, figures, args.out)}")
    below = missed(figures)
    for row, part in below:
        print(f"below target: {part} at {row['dtype']}, d = {row['d']}, causal = {row['causal']}, L = {row['L']}: "
              f"{row[f'{part}_ratio']:.2f} × F.sdpa < {TARGETS[part]}")
    if not below:
        print(f"every target met: forward ≥ {TARGETS['forward']} ×, backward ≥ {TARGETS['backward']} × F.sdpa")
    return 1 if below and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
