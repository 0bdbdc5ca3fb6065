"""Post-norm or pre-norm (lesson 06): where the gradient goes in a stack of encoder layers at
initialisation (section 3), and what a learning-rate warm-up does for a deeper encoder–decoder of
each kind in training (section 5).

``layer_gradients(norm_first, layers, seed)`` builds a stack of ``layers`` ``EncoderLayer``s with
PyTorch's default initialisation and no dropout (a pre-norm stack ends with one more LayerNorm, as
``nn.TransformerEncoder(..., norm=LayerNorm)`` does), runs a batch of random sequences through it,
and backpropagates a fixed random read-out of the output, ``loss = Σ output · probe / √(B·L)``.
It returns the size of the gradient at the input of every layer, at the top of the residual
stream, over the last layer's parameters, and the size of the residual stream itself:

    x_0 -> layer 0 -> x_1 -> … -> layer N-1 -> x_N (-> final LayerNorm, pre-norm only) -> output

Measured on torch 2.13, 10 seeds, native and ATEN_CPU_CAPABILITY=default kernels alike (the numbers
agree to 3 digits; tests/test_lesson06_norms.py proves what the lesson states, with margin), for
N = 24 layers of E = 64, H = 4, d_ff = 256, B = 4 sequences of L = 16 positions:

- pre-norm: the gradient reaching every layer's input is at least the one at the top, x_N (the
  smallest ratio, at the last layer: 1.008 … 1.014), and it grows on the way down: 1.55 … 1.74
  times the top's at x_0. The residual stream grows: its RMS at x_N is 1.77 … 1.98 times x_0's.
- post-norm: the gradient fades on the way down, but not by a steady factor per layer: it falls
  near the top (at x_16, 8 layers below the top: 0.66 … 0.84 of the top's; seed 0: 0.743) and then
  roughly levels off (from x_16 down to x_0 it stays in a band 0.05 … 0.14 wide; seed 0: 0.693 …
  0.743). Its lowest point, anywhere below the top, is 0.54 … 0.75; at x_0 it is 0.58 … 0.85, 0.22 …
  0.41 above the relative[16]³ (0.29 … 0.59) that the top 8 layers' rate, kept up, would leave.
  Each LayerNorm keeps the stream at RMS ≈ 1.
- the last layer's parameter gradient, N = 24 against N = 6: post-norm 1.00 … 1.20 times
  (it does not shrink with depth), pre-norm 0.64 … 0.77 times (the final LayerNorm divides by the
  grown stream). This is Xiong et al. (2020)'s reason for post-norm's learning-rate warm-up.

At N = 6 the post-norm fade is small (0.94 … 0.98): PyTorch's default initialisation makes the
sub-layers' outputs small next to the residual, so each LayerNorm changes the gradient little.

``warmup_run(norm_first, warmup, seed)`` trains lesson 06's encoder–decoder (``seq2seq.Reverser``)
with WARMUP_LAYERS encoder and as many decoder layers, post-norm or pre-norm, with or without a
linear warm-up of the learning rate (``seq2seq.learning_rate``), and measures its teacher-forced
cross-entropy on 500 held-out sources. Measured on torch 2.13, 10 seeds, one thread and two,
native and ATEN_CPU_CAPABILITY=default kernels (tests/test_lesson06_warmup.py proves what the lesson
states, with margin), at WARMUP_SETTINGS (4 + 4 layers, 100 steps of 32 sequences, peak learning
rate 0.015) and a warm-up of WARMUP_STEPS = 30 steps:

- post-norm without warm-up: 1.54 … 2.25 (it learns slowly: a model that guesses every token from
  how often it occurs scores 2.36);
- post-norm with warm-up: 0.30 … 0.61;
- pre-norm without warm-up: 0.50 … 0.83;
- post-norm without warm-up over the larger of the other two, seed by seed: 2.33 … 3.54 times;
- (pre-norm with warm-up, one thread: 0.34 … 0.50; the lesson does not run it.)

Each run of 100 steps takes about 1.3 s on one thread of a quiet machine.
"""

from dataclasses import dataclass

import torch
from torch import nn

from . import seq2seq
from . import validation as check
from .transformer import EncoderLayer

#: The stack the lesson measures: E, H, d_ff, and the batch B of L positions.
D_MODEL, NHEAD, D_FF, BATCH, LENGTH = 64, 4, 256, 4, 16

#: The warm-up experiment: WARMUP_LAYERS encoder and decoder layers, trained as ``seq2seq.train`` does
#: with these settings, and WARMUP_STEPS steps of warm-up when there is one.
WARMUP_LAYERS, WARMUP_STEPS = 4, 30
WARMUP_SETTINGS = {"layers": WARMUP_LAYERS, "steps": 100, "batch": 32, "lr": 0.015}


@dataclass(frozen=True)
class LayerGradients:
    """What ``layer_gradients`` measured, for a stack of N layers.

    inputs: (N + 1,) float64, ‖∂loss/∂x_n‖ for n = 0 … N: x_n is layer n's input, x_N the top of the
        residual stream (the output of the last layer; in a pre-norm stack, before the final LayerNorm).
    top_layer: ‖∂loss/∂θ‖ over all the parameters θ of the last layer.
    stream: (N + 1,) float64, the RMS size of x_n (the root of the mean square of its numbers).
    """

    inputs: torch.Tensor
    top_layer: float
    stream: torch.Tensor

    @property
    def relative(self):
        """(N + 1,): the gradient at each x_n divided by the one at the top, x_N (the last entry is 1)."""
        return self.inputs / self.inputs[-1]


def layer_gradients(norm_first, layers=24, seed=0, batch=BATCH, length=LENGTH, d_model=D_MODEL, nhead=NHEAD,
                    d_ff=D_FF):
    """Measure the gradient through a freshly initialised stack of encoder layers (see the module's docstring).

    Args:
        norm_first: True for pre-norm layers (and a final LayerNorm), False for post-norm.
        layers: N, the number of layers.
        seed: seeds the weights (torch.manual_seed, inside fork_rng: the global state is left as it was) and, through a generator of its own, the input
            and the read-out probe; the same seed gives the same input and probe to both norm orders.
        batch, length, d_model, nhead, d_ff: the sizes (nhead must divide d_model).

    Returns:
        a ``LayerGradients``.
    """
    check.flag("layer_gradients", "norm_first", norm_first)
    for argument, value in (("layers", layers), ("batch", batch), ("length", length), ("d_model", d_model),
                            ("nhead", nhead), ("d_ff", d_ff)):
        check.positive_int("layer_gradients", argument, value)
    check.whole_number("layer_gradients", "seed", seed, 0, check.SEEDS[1] - 1000)  # seeds seed and 1000 + seed
    with torch.random.fork_rng(devices=[]):  # the weights come from `seed`; the caller's random state stays
        torch.manual_seed(seed)
        stack = nn.ModuleList(EncoderLayer(d_model, nhead, d_ff, dropout=0.0, norm_first=norm_first)
                              for _ in range(layers))
    # float64: the numbers the lesson prints are then the same on every CPU's kernels
    stack = stack.double()
    final = nn.LayerNorm(d_model, dtype=torch.float64) if norm_first else nn.Identity()  # pre-norm's stream is never normalised otherwise
    g = torch.Generator().manual_seed(1000 + seed)
    x = torch.randn(batch, length, d_model, generator=g).double().requires_grad_()  # (B, L, E)
    probe = torch.randn(batch, length, d_model, generator=g).double()  # the fixed random read-out
    stream = [x]
    for layer in stack:
        stream.append(layer(stream[-1]))  # x_1 … x_N
    loss = (final(stream[-1]) * probe).sum() / (batch * length) ** 0.5
    top = list(stack[-1].parameters())
    grads = torch.autograd.grad(loss, stream + top)
    inputs = torch.stack([grad.norm() for grad in grads[:layers + 1]])
    top_layer = torch.cat([grad.flatten() for grad in grads[layers + 1:]]).norm().item()
    sizes = torch.stack([h.detach().pow(2).mean().sqrt() for h in stream])
    return LayerGradients(inputs=inputs, top_layer=top_layer, stream=sizes)


@dataclass(frozen=True)
class WarmupRun:
    """What ``warmup_run`` measured.

    norm_first, warmup: the run's norm order and warm-up steps (0: none).
    losses: the training loss at every step. rates: the learning rate of every step.
    held_out_loss: the trained model's teacher-forced cross-entropy on 500 held-out sources.
    """

    norm_first: bool
    warmup: int
    losses: list
    rates: list
    held_out_loss: float


def warmup_run(norm_first, warmup, seed=0):
    """Train the deeper encoder–decoder of the warm-up experiment (see the module's docstring).

    Args:
        norm_first: True for pre-norm layers, False for post-norm (each stack ends with a LayerNorm
            either way).
        warmup: 0 (no warm-up: the learning rate falls linearly from its peak) or WARMUP_STEPS (it
            rises linearly to its peak over that many steps first).
        seed: the initial weights and the training data (``seq2seq.train``'s seed).

    Returns:
        a ``WarmupRun``.
    """
    check.flag("warmup_run", "norm_first", norm_first)
    if warmup not in (0, WARMUP_STEPS) or isinstance(warmup, bool):
        check.fail("warmup_run", "warmup", check.describe(warmup),
                   {"en": f"0 (no warm-up) or {WARMUP_STEPS}", "zh": f"0（不预热）或 {WARMUP_STEPS}"})
    check.whole_number("warmup_run", "seed", seed, 0, check.SEEDS[1])  # a seed torch.manual_seed takes
    run = seq2seq.train(seed=seed, warmup=warmup, evaluate=False, norm_first=norm_first, **WARMUP_SETTINGS)
    steps, lr = WARMUP_SETTINGS["steps"], WARMUP_SETTINGS["lr"]
    rates = [seq2seq.learning_rate(step, steps, lr, warmup) for step in range(steps)]
    return WarmupRun(norm_first, warmup, run.losses, rates, seq2seq.held_out_loss(run.model))
