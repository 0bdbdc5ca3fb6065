"""Lesson 10's GPT: a training step with the course's attention against the same model with F.sdpa,
and generation with the KV cache against recomputation, side by side in one run (one CPU thread; a
CUDA GPU when torch sees one).

    .venv/bin/python benchmarks/bench_gpt.py                 (or: make bench)
    .venv/bin/python benchmarks/bench_gpt.py --quick         fewer rounds
    .venv/bin/python benchmarks/bench_gpt.py --device cuda   the GPU only (--out DIR: where the JSON goes)

**Training step.** The model is nanoGPT's CPU configuration at character level (context 64, E = 128,
4 heads, 4 layers, d_ff = 512, the 65 characters of Shakespeare: 0.8 M parameters), a batch of 12
windows, AdamW: forward, loss, backward, clipping and step, timed in interleaved rounds: "plain", the
same model written with PyTorch's modules (nn.MultiheadAttention, which runs F.sdpa), and the course's
GPT with every attention implementation of ``gpt.ATTENTIONS`` this device runs well ("sdpa":
PyTorch's fused kernel between the course's parts; "course": lesson 01's attention with lesson 02's
mask, every weight materialised; "tiled": lesson 08's tiles, a Python loop over them; "triton":
lesson 09's kernels, on a GPU only). All start from the same weights and must give the same first
loss (checked). The figures to read: sdpa / plain, what the course's parts cost (the course's goal:
at most 1.1), and course / sdpa, what materialising the weights costs.

**Generation.** 256 characters after an 8-character prompt, sampled (temperature 0.8, top-k 10, one
seed) with the KV cache and by recomputing the window at every step; both must choose the same
characters (checked). The 0.8 M-parameter model with its context of 64 (the window jumps past it,
``GPT.generate``'s default keep of 32) and of 512 (the whole text fits), and a model of the lesson's
shipped size (4.8 M parameters: 6 layers, E = 256, 8 heads, context 128). The figure to read is
recompute / cache (the course's goal: at least 5).

Where a cached step goes, at the lesson's size on one thread (measured on the 2-CPU machine the course
is built on, busy, in thread CPU time, so the parts are rough): the matrix-vector products read all 19
MB of float32 weights once per character, about 1.3 ms when they stream from beyond the processor's
own caches (about 14 GB/s; 40 GB/s when one (E, 4E) matrix stays in them); the rest is the fixed price
of the step's ~170 small operations (21 a layer, tests/test_gpt.py counts them at the dispatcher; the
sampling's ~20, inside torch.multinomial's checks included) and of the Python around them, higher than
in a loop of one operation because the weights have just pushed everything else out of the caches.
Three things cost more than their arithmetic and are gone (``gpt._GenerationCache``): oneDNN's GELU,
which sets up a primitive at every call (about a tenth of a step; PyTorch's own kernel now,
``gpt._pytorch_gelu``), the calls of the block's nn.LayerNorm and nn.Linear modules (their functions
are called with the weights gathered once), and a new tensor for each residual: a step about a sixth
shorter, the same characters. The prefills (the prompt's, then 64 positions at each of the window's
three jumps) add about 0.2 ms a character. What remains is mostly the weights' reads and the
operations' fixed price, which the cache does not remove: the ratio grows with the model and the
context, and falls on a busy machine, where a small operation waits longer than a large one. So on the
CPU each time is also given as this thread's CPU time, which leaves the waiting for a core out.

The 0.8 M model with a context of 64 has the lowest ratio (about 3) not because of the refill of 32
positions every 33 characters (7 prefills, a few % of the cached run; keep 16, 32 or 48 give the same
ratio, 56 a lower one, 64, nanoGPT's crop, 1.4) but because at that size recomputing 32 to 64
positions costs only about three cached steps: both are mostly the same operations' fixed price, on 32
to 64 rows or on one. keep stays context // 2: lesson 10's exercise and its checks are written for it.

Timings are not tests: they vary with the machine and its load; compare the figures of one run.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it
sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py beside this file

import record
import torch
from torch import nn

from course_utils import corpus as corpora
from course_utils import gpt

SIZES = {"context": 64, "d_model": 128, "heads": 4, "layers": 4, "d_ff": 512}
BATCH = 12
NEW = 256




class PlainBlock(nn.Module):
    """The course's block written with PyTorch's modules: nn.LayerNorm, nn.MultiheadAttention (F.sdpa
    inside, need_weights=False), nn.Linear and GELU."""

    def __init__(self, ours):
        super().__init__()
        E, F_ = ours.norm1.normalized_shape[0], ours.feed_forward.d_ff
        self.norm1, self.norm2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.attention = ours.attention.mha.to_torch()
        self.mlp = nn.Sequential(nn.Linear(E, F_), nn.GELU(), nn.Linear(F_, E))
        self.norm1.load_state_dict(ours.norm1.state_dict())
        self.norm2.load_state_dict(ours.norm2.state_dict())
        self.mlp[0].load_state_dict(ours.feed_forward.linear1.state_dict())
        self.mlp[2].load_state_dict(ours.feed_forward.linear2.state_dict())

    def forward(self, x, hidden):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=hidden, need_weights=False, is_causal=True)[0]
        return x + self.mlp(self.norm2(x))


class PlainGPT(nn.Module):
    """``gpt.GPT`` written with PyTorch's modules only, with a GPT's weights."""

    def __init__(self, ours):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(ours.embed.weight.detach().clone(), freeze=False)
        self.positions = nn.Embedding.from_pretrained(ours.positions.embedding.weight.detach().clone(), freeze=False)
        self.blocks = nn.ModuleList(PlainBlock(block) for block in ours.blocks)
        self.norm = nn.LayerNorm(ours.config.d_model)
        self.norm.load_state_dict(ours.norm.state_dict())

    def forward(self, tokens):
        L = tokens.shape[1]
        hidden = torch.ones(L, L, dtype=torch.bool, device=tokens.device).triu(1)  # True: may not attend
        x = self.embed(tokens) + self.positions(torch.arange(L, device=tokens.device))
        for block in self.blocks:
            x = block(x, hidden)
        return self.norm(x) @ self.embed.weight.T  # tied read-out


def training_steps(device, rounds, steps):
    """{name: median seconds per step} over `rounds` interleaved rounds of `steps` steps: "plain" (the
    model in PyTorch's modules) and the course's GPT with each attention implementation this device
    runs well."""
    shakespeare = corpora.load("shakespeare")
    implementations = [a for a in gpt.ATTENTIONS if a != "triton" or device == "cuda"]
    models = {"plain": None}
    for attention in implementations:
        models[attention] = gpt.make_gpt(shakespeare.vocab_size, seed=0, attention=attention, **SIZES)
    models["plain"] = PlainGPT(models["sdpa"])
    runs = {name: (model.to(device), torch.optim.AdamW(model.parameters(), lr=1e-3), torch.Generator().manual_seed(1))
            for name, model in models.items()}
    times = {name: [] for name in runs}

    def step(model, optimizer, generator):
        x, y = shakespeare.batch("train", BATCH, SIZES["context"], generator)
        loss = gpt.lm_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    first = {name: step(*run).item() for name, run in runs.items()}  # a warm-up, and the same loss from each
    if max(first.values()) - min(first.values()) > 1e-4:
        raise RuntimeError(f"the models' first losses differ: {first}")
    for _ in range(rounds):
        for name, run in runs.items():
            seconds, _ = record.timed(lambda run=run: [step(*run) for _ in range(steps)], device)
            times[name].append(seconds / steps)
    return {name: statistics.median(t) for name, t in times.items()}


#: The generation's models: (name, sizes). "lesson" is the size of the model the lesson ships (4.8 M parameters).
GENERATORS = (("0.8M", SIZES), ("0.8M", SIZES | {"context": 512}),
              ("lesson", {"context": 128, "d_model": 256, "heads": 8, "layers": 6, "d_ff": 1024}))


def generation(device, rounds, sizes):
    """{(cache, "wall" or "cpu"): median seconds} of generating NEW characters both ways (cache True or
    False): the wall clock, and on the CPU also the CPU time of this thread (time.thread_time), the
    figure a busy machine disturbs least: on one thread it leaves out the time spent waiting for a core."""
    model = gpt.make_gpt(65, seed=0, attention="sdpa", **sizes).to(device).eval()
    context = sizes["context"]
    prompt = torch.randint(0, 65, (1, 8), generator=torch.Generator().manual_seed(0)).to(device)
    times = {(cache, clock): [] for cache in (True, False) for clock in ("wall", "cpu")}
    chosen = {}
    for _ in range(rounds):
        for cache in (True, False):
            generator = torch.Generator().manual_seed(2)
            started = time.thread_time()
            seconds, (tokens, _) = record.timed(
                lambda g=generator, c=cache: model.generate(prompt, NEW, temperature=0.8, top_k=10, generator=g,
                                                            cache=c),
                device)
            times[cache, "cpu"].append(time.thread_time() - started)
            times[cache, "wall"].append(seconds)
            chosen[cache] = tokens
    if not torch.equal(chosen[True], chosen[False]):
        raise RuntimeError(f"context {context}: the cache and recomputation chose different characters")
    return {key: statistics.median(t) if device == "cpu" or key[1] == "wall" else None for key, t in times.items()}


def measure(device, quick=False):
    rounds = 3 if quick else 7
    print(f"\n{device}: " + (record.machine_line() if device == "cpu" else torch.cuda.get_device_name(device)))
    step = training_steps(device, rounds, 3 if quick else 5)
    print(f"\ntraining step (batch {BATCH} × {SIZES['context']} characters, 0.8 M parameters), median ms:")
    for name, seconds in step.items():
        print(f"  {name:8s} {seconds * 1e3:8.1f}   {seconds / step['plain']:.2f}× plain")
    figures = [{"part": "train_step", "model": name, "step_ms": s * 1e3} for name, s in step.items()]
    print(f"\ngeneration of {NEW} characters (batch 1), median seconds:")
    for name, sizes in GENERATORS:
        s = generation(device, rounds, sizes)
        cpu = f" (CPU time: {s[True, 'cpu']:.3f} s, {s[False, 'cpu']:.3f} s, {s[False, 'cpu'] / s[True, 'cpu']:.1f}×)" \
            if device == "cpu" else ""
        print(f"  {name:6s} context {sizes['context']:4d}: cache {s[True, 'wall']:.3f} s, recompute "
              f"{s[False, 'wall']:.3f} s, recompute / cache {s[False, 'wall'] / s[True, 'wall']:.1f}×{cpu}")
        figures.append({"part": "generate", "model": name, "context": sizes["context"], "N": NEW,
                        "cache_s": s[True, "wall"], "recompute_s": s[False, "wall"],
                        "cache_cpu_s": s[True, "cpu"], "recompute_cpu_s": s[False, "cpu"]})
    settings = {"sizes": ", ".join(f"{k} {v}" for k, v in SIZES.items()), "batch": BATCH, "rounds": rounds,
                "threads": torch.get_num_threads() if device == "cpu" else None}
    return settings, figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    record.add_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for device in record.devices(args.device):
        settings, figures = measure(device, args.quick)
        print("written:", record.write("gpt", device, settings, figures, args.out))


if __name__ == "__main__":
    main()
