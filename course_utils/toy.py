"""Two tiny tasks whose right attention pattern is known, and the models that learn them.

- **reverse**: a sequence of L tokens -> the same tokens in reverse order ("abcd" -> "dcba").
  ``ReverseModel`` has one self-attention layer; to solve the task, position i must read
  position L-1-i, so its learned weights form an anti-diagonal.
- **double**: a sequence of L tokens -> every token said twice ("abc" -> "aabbcc").
  ``EncoderDecoder`` has an encoder (token and position embeddings) and a decoder with one query
  per output position and one cross-attention layer; output position i must read source
  position i // 2, so its learned weights form a staircase of 2L rows and L columns.

Tokens are the integers 0 .. vocab-1, shown as the letters a, b, c, ... Everything here is
deterministic: the data come from the caller's ``torch.Generator`` (or one seeded from
``seed``), the initial weights from ``seed``, and no function touches torch's global random
state. Training takes a second or two on one CPU thread.

What training reliably gives (tests/test_toy.py checks it on 10 seeds; run the tests under
``ATEN_CPU_CAPABILITY=default`` as well as on the CPU's native vector kernels): at least 95 % of
the held-out output tokens right, and on each of the first 50 held-out examples every query
gives the position the task needs more than half of its weight, more than 90 % on average. Not
every row is one-hot: once the answers are right, the loss no longer pushes the last few rows
to sharpen. The learning rate is 0.01 because at 0.02 training was chaotic: a seed's run ended
differently on each kernel path (their rounding differs), and some rows kept only about 0.6 of
their weight on the needed position, so "every query's largest weight beats the rest by 0.5"
held on one kernel path and failed on another. At 0.01 a seed gives nearly the same run on
every kernel path (measured on 20 seeds: the weakest row's weight agreed to 0.02 or better).
"""

from dataclasses import dataclass, field

import torch
from torch import nn

from . import validation as check
from .layers import CrossAttention, SelfAttention
from .optim import Adam

LENGTH, VOCAB = 8, 10  # sequences of 8 tokens out of 10
TASKS = ("reverse", "double")


def letters(tokens):
    """'abc...' for a 1-D sequence of token ids."""
    if isinstance(tokens, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        tokens = torch.tensor(tokens, dtype=torch.int64)
    check.tokens("letters", "tokens", tokens, 26, ndim=1, layout="(L,)")
    return "".join(chr(ord("a") + t) for t in tokens.tolist())


# ----------------------------------------------------------------------------- argument checks


def _task(function, task):
    return check.one_of(function, "task", task, TASKS)


def _seed(function, seed, argument="seed", offsets=(0,)):
    """A seed (or an example's index, which picks its seed) is any int torch.manual_seed takes
    once each of `offsets` is added (negative ones too, up to 2**64 − 1), never a bool."""
    return check.seed(function, argument, seed, offsets)


#: What train and train_neighbours add to the seed for the held-out data's generator.
HELD_OUT_SEED = 1_000_000
#: What example adds to an index for its generator.
EXAMPLES_FROM = 10_000


def _sizes(function, length, vocab, shortest=1):
    """`length` and `vocab` as a batch needs them: ints with shortest ≤ length ≤ vocab."""
    check.positive_int(function, "vocab", vocab)
    check.fits_in_memory(function, "vocab", vocab, vocab, 16)  # one sequence's random order of the vocab
    if not isinstance(length, int) or isinstance(length, bool) or not shortest <= length <= vocab:
        needed = {"en": f"an int from {shortest} to vocab = {vocab}", "zh": f"{shortest} 到 vocab = {vocab} 之间的整数"}
        check.fail(function, "length", check.describe(length), needed)


def _batch_size(function, argument, size, vocab=VOCAB, generator=None):
    """A number of sequences to draw: an int ≥ 0 whose (size, vocab) random draw fits in memory."""
    check.whole_number(function, argument, size)
    check.fits_in_memory(function, argument, size, size * vocab, 16)  # float32 draws and int64 order
    if generator is not None:
        check.generator(function, "generator", generator)


def _model_sizes(function, sizes, parameters):
    """Every size in `sizes` ({name: value}) a positive int, and the model's `parameters` (a
    function of the sizes) few enough to fit in memory (float32)."""
    for name, value in sizes.items():
        check.positive_int(function, name, value)
    largest = max(sizes, key=sizes.get)
    check.fits_in_memory(function, largest, sizes[largest], parameters(**sizes), 4)


def _model(function, model, kinds=None):
    kinds = kinds or MODELS
    names = " / ".join(kind.__name__ for kind in kinds)
    return check.module(function, "model", model, kinds,
                        {"en": f"a toy model ({names})", "zh": f"玩具任务模型（{names}）"})


def _model_tokens(function, model, tokens, ndim, layout, kinds=None, *, some=False):
    """`model` a toy model and `tokens` token ids it can read: ids below its vocab, no longer
    than its position table, on the model's device; with `some`, at least one sequence (a
    fraction of nothing has no value)."""
    _model(function, model, kinds)
    check.tokens(function, "tokens", tokens, model.token.num_embeddings, ndim=ndim, layout=layout,
                 max_length=model.position.shape[0])
    check.on_device(function, "tokens", tokens, model.position.device, {"en": "the model's parameters",
                                                                        "zh": "模型参数"})
    if some and not tokens.shape[0]:
        check.fail(function, "tokens", check.describe(tokens),
                   {"en": "at least one sequence (N ≥ 1): the fraction right of no answer at all has no value",
                    "zh": "至少一条序列（N ≥ 1）：没有任何答案时，答对的比例没有定义"})
    return tokens


def _targets(function, targets, expected):
    """Targets must be a tensor of the shape of the model's answers, `expected`."""
    if not isinstance(targets, torch.Tensor) or tuple(targets.shape) != tuple(expected):
        check.fail(function, "targets", check.describe(targets),
                   {"en": f"a tensor of shape {tuple(expected)}, one target per answer of the model",
                    "zh": f"形状为 {tuple(expected)} 的张量，模型的每个答案对应一个目标"})
    check.dense(function, "targets", targets)
    check.has_values(function, "targets", targets)
    return targets


def _weights(function, weights, *, ndims=None, square=False):
    """Attention weights: a floating-point tensor with values, of (..., L_out, L) layout."""
    check.tensor(function, "weights", weights, min_ndim=2, layout="(..., L_out, L)")
    check.has_values(function, "weights", weights)
    if (ndims and weights.ndim not in ndims) or (square and weights.shape[-1] != weights.shape[-2]):
        layout = "(H, L, L) / (N, H, L, L)" if ndims else "(..., L, L)"
        check.fail(function, "weights", check.describe(weights),
                   {"en": f"self-attention weights of shape {layout}", "zh": f"形状为 {layout} 的自注意力权重"})
    return weights


def target_positions(task, length=LENGTH):
    """Which source position each output position copies: the alignment a model must learn."""
    function = "target_positions"
    _task(function, task)
    check.whole_number(function, "length", length)
    check.fits_in_memory(function, "length", length, 2 * length, 36)  # a Python list of ints
    if task == "reverse":
        return list(range(length - 1, -1, -1))  # output i <- source L-1-i: the anti-diagonal
    return [i // 2 for i in range(2 * length)]  # output i <- source i // 2: a staircase


def make_batch(task, size, generator, length=LENGTH, vocab=VOCAB):
    """`size` random sequences and their targets: tokens (size, L) and targets (size, L_out).

    The tokens of a sequence are all different (L <= vocab), so exactly one source position
    holds the token an output position needs: the right attention map is unique.
    """
    function = "make_batch"
    _task(function, task)
    _sizes(function, length, vocab)
    _batch_size(function, "size", size, vocab)
    if generator is not None:
        check.generator(function, "generator", generator)
    return _make_batch(task, size, generator, length, vocab)


def _make_batch(task, size, generator, length, vocab):
    device = None if generator is None else generator.device  # where the generator draws (None: the default)
    shuffled = torch.rand(size, vocab, generator=generator, device=device).argsort(dim=-1)  # (N, vocab): a random order
    tokens = shuffled[:, :length]  # (N, L): L different tokens
    return tokens, tokens[:, target_positions(task, length)]  # (N, L_out)


def example(task, index, length=LENGTH, vocab=VOCAB):
    """Example number `index` (a fixed sequence for each index, held out from training): (tokens, target),
    drawn on the CPU (the same example on every machine)."""
    function = "example"
    _task(function, task)
    _seed(function, index, "index", (EXAMPLES_FROM,))
    _sizes(function, length, vocab)
    return _example(task, index, length, vocab)


def _example(task, index, length, vocab):
    tokens, targets = _make_batch(task, 1, torch.Generator().manual_seed(EXAMPLES_FROM + index), length, vocab)
    return tokens[0], targets[0]


def examples(task, count, length=LENGTH, vocab=VOCAB):
    """Examples 0 .. count-1 stacked: tokens (count, L) and targets (count, L_out). The tokens are
    the same for every task. It makes `count` examples one by one, as many as asked (about 30 µs
    each: 10**5 take seconds, 10**8 most of an hour)."""
    function = "examples"
    _task(function, task)
    check.positive_int(function, "count", count)
    _sizes(function, length, vocab)
    pairs = [_example(task, index, length, vocab) for index in range(count)]
    return torch.stack([tokens for tokens, _ in pairs]), torch.stack([target for _, target in pairs])


class ReverseModel(nn.Module):
    """One self-attention layer between token/position embeddings and a read-out.

    Each position is the concatenation [token embedding ; position embedding]: the position half
    lets a query say *where* it wants to read from (without it, self-attention cannot tell
    positions apart and could not reverse anything), and the token half is *what* is read.

    ``forward(tokens)``: tokens (B, L) int64 -> (logits (B, L, vocab), weights (B, L, L)).
    """

    def __init__(self, length=LENGTH, vocab=VOCAB, token_dim=16, position_dim=16, positions=True):
        super().__init__()
        _model_sizes("ReverseModel", {"length": length, "vocab": vocab, "token_dim": token_dim,
                                      "position_dim": position_dim},
                     lambda length, vocab, token_dim, position_dim: vocab * token_dim + length * position_dim
                     + 5 * (token_dim + position_dim) ** 2 + vocab * (token_dim + position_dim))
        self.token = nn.Embedding(vocab, token_dim)
        self.position = nn.Parameter(torch.randn(length, position_dim))  # learned, one row per position
        # False: the position half is all zeros (for the lesson's comparison); 'no' is a str, not False
        self.positions = check.flag("ReverseModel", "positions", positions)
        self.attention = SelfAttention(token_dim + position_dim)
        self.readout = nn.Linear(token_dim + position_dim, vocab)

    def forward(self, tokens):
        _model_tokens("ReverseModel.forward", self, tokens, 2, "(B, L)")
        B, L = tokens.shape
        where = self.position[:L] if self.positions else torch.zeros_like(self.position[:L])
        x = torch.cat([self.token(tokens), where.expand(B, L, -1)], dim=-1)  # (B, L, E)
        out, weights = self.attention(x)  # (B, L, E), (B, L, L)
        return self.readout(out), weights  # (B, L, vocab), (B, L, L)


class EncoderDecoder(nn.Module):
    """A tiny encoder-decoder: the encoder embeds each source token with its position ("memory");
    the decoder has one learned query vector per output position, reads the memory with one
    cross-attention layer, and predicts a token from what it read.

    ``forward(tokens)``: tokens (B, L) int64 -> (logits (B, L_out, vocab), weights (B, L_out, L)).
    The decoder (E_q = query_dim) and the memory (E_kv = token_dim + position_dim) differ in size.
    """

    def __init__(self, length=LENGTH, out_length=2 * LENGTH, vocab=VOCAB, token_dim=16, position_dim=16, query_dim=24):
        super().__init__()
        _model_sizes("EncoderDecoder", {"length": length, "out_length": out_length, "vocab": vocab,
                                        "token_dim": token_dim, "position_dim": position_dim, "query_dim": query_dim},
                     lambda length, out_length, vocab, token_dim, position_dim, query_dim: vocab * token_dim
                     + length * position_dim + out_length * query_dim + 4 * (query_dim + token_dim + position_dim) ** 2
                     + vocab * query_dim)
        self.token = nn.Embedding(vocab, token_dim)
        self.position = nn.Parameter(torch.randn(length, position_dim))  # source positions
        self.queries = nn.Parameter(torch.randn(out_length, query_dim))  # one per output position
        self.attention = CrossAttention(query_dim, kv_dim=token_dim + position_dim)
        self.readout = nn.Linear(query_dim, vocab)

    def forward(self, tokens):
        _model_tokens("EncoderDecoder.forward", self, tokens, 2, "(B, L)")
        B, L = tokens.shape
        memory = torch.cat([self.token(tokens), self.position[:L].expand(B, L, -1)], dim=-1)  # (B, L, E_kv)
        x = self.queries.expand(B, -1, -1)  # (B, L_out, E_q)
        out, weights = self.attention(x, memory)  # (B, L_out, E_q), (B, L_out, L)
        return self.readout(out), weights  # (B, L_out, vocab), (B, L_out, L)


def make_model(task, seed=0, **options):
    """The untrained model for `task`, its weights drawn from `seed` (global RNG state untouched),
    on torch's default device."""
    _task("make_model", task)
    _seed("make_model", seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return (ReverseModel if task == "reverse" else EncoderDecoder)(**options)


@dataclass
class Run:
    """What ``train`` returns: the trained model, its loss at every step and its accuracy on
    held-out sequences (the fraction of output tokens it gets right)."""

    task: str
    model: nn.Module
    losses: list = field(repr=False)
    accuracy: float


@torch.no_grad()
def accuracy(model, tokens, targets):
    """The fraction of output tokens `model` predicts right on tokens (N, L) with targets (N, L_out),
    N ≥ 1 (no answer at all has no fraction right: N = 0 is refused)."""
    _model_tokens("accuracy", model, tokens, 2, "(N, L)", some=True)
    logits, _ = model(tokens)
    _targets("accuracy", targets, logits.shape[:-1])
    check.on_device("accuracy", "targets", targets, tokens.device, "tokens")
    # an id the model cannot output would count as wrong without a word, as it is refused in tokens
    check.tokens("accuracy", "targets", targets, logits.shape[-1], ndim=targets.ndim,
                 layout=str(tuple(logits.shape[:-1])))
    return (logits.argmax(dim=-1) == targets).double().mean().item()


@torch.no_grad()
def attention_map(model, tokens):
    """The model's attention weights for one sequence of tokens (L,): (L_out, L); for a batch of
    sequences (N, L): (N, L_out, L)."""
    _model("attention_map", model)
    _model_tokens("attention_map", model, tokens, 2 if isinstance(tokens, torch.Tensor) and tokens.ndim == 2 else 1,
                  "(L,) / (N, L)")
    if tokens.ndim == 2:
        return model(tokens)[1]
    return model(tokens.unsqueeze(0))[1][0]


@torch.no_grad()
def predict(model, tokens):
    """The model's output tokens for one sequence of tokens (L,): (L_out,)."""
    _model_tokens("predict", model, tokens, 1, "(L,)")
    return model(tokens.unsqueeze(0))[0][0].argmax(dim=-1)


def needed_weights(weights, task):
    """The weight each query gives the position `task` needs: (..., L_out) for (..., L_out, L) weights."""
    _weights("needed_weights", weights)
    _task("needed_weights", task)
    return _needed_weights(weights, task)


def _needed_weights(weights, task):
    wanted = torch.tensor(target_positions(task, weights.shape[-1]), device=weights.device)  # (L_out,)
    if weights.shape[-2] != len(wanted):
        check.fail("needed_weights", "weights", check.describe(weights),
                   {"en": f"shape (..., {len(wanted)}, L) for task {task!r}",
                    "zh": f"任务 {task!r} 需要形状 (..., {len(wanted)}, L)"})
    return weights.gather(-1, wanted.expand(*weights.shape[:-1]).unsqueeze(-1)).squeeze(-1)


def alignment_margin(weights, task):
    """How far the position `task` needs is ahead of the strongest other key, at the weakest
    query: min over queries of (its weight there - its largest other weight). Positive when every
    query's largest weight sits where the task needs it."""
    _weights("alignment_margin", weights)
    _task("alignment_margin", task)
    return _alignment_margin(weights, task)


def _alignment_margin(weights, task):
    wanted = torch.tensor(target_positions(task, weights.shape[-1]), device=weights.device)
    if weights.shape[-2] != len(wanted):
        return float("-inf")
    best = _needed_weights(weights, task)  # (..., L_out)
    others = weights.scatter(-1, wanted.expand(*weights.shape[:-1]).unsqueeze(-1), float("-inf"))
    return (best - others.amax(dim=-1)).min().item()


def alignment_found(weights, task, margin=0.0):
    """Whether every query's largest weight sits on the position `task` needs, (L_out, L) weights,
    and beats every other key's weight by more than `margin`."""
    _weights("alignment_found", weights)
    _task("alignment_found", task)
    check.number("alignment_found", "margin", margin)
    return _alignment_margin(weights, task) > margin


def _fit(model, next_batch, steps, lr):
    """Adam on `steps` fresh batches from `next_batch()` -> (tokens, targets), with the cross-entropy
    of every answer; leaves the model in eval mode and returns the loss of each step. Every toy
    task trains this way, so their runs differ only in their data and their model. The batches are
    drawn on the CPU (the same data on every machine) and moved to the model's device."""
    optimiser = Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    device = model.position.device
    losses = []
    for _ in range(steps):
        tokens, targets = (tensor.to(device) for tensor in next_batch())
        logits, _ = model(tokens)  # (B, ..., vocab): one row of logits per answer
        loss = loss_fn(logits.flatten(0, -2), targets.flatten())
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step(lr)
        losses.append(loss.item())
    model.eval()
    return losses


def train(task, seed=0, steps=300, batch=64, lr=0.01, held_out=500, **options):
    """Train the model for `task` ("reverse" or "double") with Adam on fresh random batches.

    Deterministic for a given seed and number of threads (data and weights come from `seed`;
    the global random state is left as it was). Returns a ``Run``; its accuracy is measured on
    `held_out` ≥ 1 sequences drawn from a separate generator.

    It runs `steps` steps, as many as asked (no upper bound): about 3 ms each on one CPU thread,
    so 300 take a second and 10**6 most of an hour (interrupt the kernel to stop). The model is
    built on torch's default device; the batches are drawn on the CPU and moved there.
    """
    function = "train"
    _task(function, task)
    _seed(function, seed, offsets=(0, HELD_OUT_SEED))
    check.whole_number(function, "steps", steps)
    _batch_size(function, "batch", batch)
    check.positive_int(function, "batch", batch)
    check.number(function, "lr", lr, non_negative=True, maximum=torch.finfo(torch.float32).max)
    _batch_size(function, "held_out", held_out)
    check.positive_int(function, "held_out", held_out)  # an accuracy on no sequence at all has no value
    model = make_model(task, seed, **options)
    data = torch.Generator().manual_seed(seed)
    losses = _fit(model, lambda: _make_batch(task, batch, data, LENGTH, VOCAB), steps, lr)
    test_tokens, test_targets = _make_batch(task, held_out, torch.Generator().manual_seed(seed + HELD_OUT_SEED),
                                            LENGTH, VOCAB)
    device = model.position.device
    return Run(task, model, losses, accuracy(model, test_tokens.to(device), test_targets.to(device)))


# ----------------------------------------------------------------------------- lesson 04: neighbours
#
# The neighbours task: every position says both of its neighbours, the token on its left and the
# token on its right; the sequence wraps around, so position 0's left neighbour is position L-1
# ("abcd" -> a: (d, b), b: (a, c), c: (b, d), d: (c, a)). ``NeighboursModel`` has one multi-head
# self-attention layer and a read-out of both answers: a linear one (the default), or a small MLP
# (``readout="mlp"``: Linear, ReLU, Linear, the feed-forward shape of a Transformer block).
#
# One head with the linear read-out cannot do it. Its output at a query is one weighted average of
# the values, w_left·v_left + w_right·v_right + ...; a linear read-out scores every letter by
# adding what each side contributes, so the side with the larger weight wins both answers: one
# side comes out right, the other at about chance. Unequal weights do carry both letters, though:
# one head with the MLP read-out learns the task by giving its neighbours unequal weights (about
# 0.25 and 0.7) and letting the MLP tell which letter came with which weight. Two heads with the
# linear read-out learn it too: one head reads the left neighbour, the other the right one, and
# the output projection keeps the two apart. Heads add capacity; they are not strictly necessary.
#
# What training reliably gives (tests/test_lesson04.py proves it on 10 seeds, under torch's
# portable kernels and the CPU's native vector kernels alike, with the margins in its docstrings):
# with two heads and the linear read-out, at least 95 % of the held-out answers right, one head
# giving its left neighbour and the other its right neighbour at least 0.6 of its weight at every
# query of the 50 held-out examples (about 0.9 on average); with one head and the linear read-out,
# fewer than 75 % right (one side above 90 %, the other below 30 %), also after five times as many
# steps; with one head and the MLP read-out, at least 95 % right, its head giving both neighbours
# together more than 0.8 of its weight and one of them at least 0.1 more than the other, at every
# query of the 50 held-out examples. The position embeddings start small (0.5 times a standard
# normal): started at 1, some seeds ended with both heads reading a mixture of both neighbours
# (which the read-out can untangle, so the answers were still mostly right).

from .multihead import FusedMultiheadAttention  # noqa: E402  (lesson 04's layer, used only below)

#: The two answers of every position, in the order of the targets' last axis.
SIDES = ("left", "right")
#: The first held-out example of the neighbours task (its examples never meet training data).
NEIGHBOURS_EXAMPLES_FROM = 20_000


def neighbour_positions(length=LENGTH):
    """{side: the position each query must read}: left i - 1, right i + 1, wrapping around."""
    check.positive_int("neighbour_positions", "length", length)
    check.fits_in_memory("neighbour_positions", "length", length, 2 * length, 36)  # two Python lists of ints
    return {"left": [(i - 1) % length for i in range(length)], "right": [(i + 1) % length for i in range(length)]}


def neighbours_batch(size, generator, length=LENGTH, vocab=VOCAB):
    """`size` random sequences: tokens (N, L), all different within a sequence, and targets
    (N, L, 2): for each position the token on its left and the token on its right."""
    function = "neighbours_batch"
    _sizes(function, length, vocab, shortest=2)
    _batch_size(function, "size", size, vocab)
    if generator is not None:
        check.generator(function, "generator", generator)
    return _neighbours_batch(size, generator, length, vocab)


def _neighbours_batch(size, generator, length, vocab):
    device = None if generator is None else generator.device  # where the generator draws (None: the default)
    tokens = torch.rand(size, vocab, generator=generator, device=device).argsort(dim=-1)[:, :length]  # (N, L)
    where = neighbour_positions(length)
    return tokens, torch.stack([tokens[:, where[side]] for side in SIDES], dim=-1)  # (N, L, 2)


def neighbours_example(index, length=LENGTH, vocab=VOCAB):
    """Held-out example number `index` of the neighbours task: (tokens (L,), targets (L, 2)), drawn on
    the CPU (the same example on every machine)."""
    function = "neighbours_example"
    _seed(function, index, "index", (NEIGHBOURS_EXAMPLES_FROM,))
    _sizes(function, length, vocab, shortest=2)
    generator = torch.Generator().manual_seed(NEIGHBOURS_EXAMPLES_FROM + index)
    tokens, targets = _neighbours_batch(1, generator, length, vocab)
    return tokens[0], targets[0]


#: The read-outs a ``NeighboursModel`` can have.
READOUTS = ("linear", "mlp")
#: The largest spread of NeighboursModel's position vectors at the start (the lesson uses 0.5): far
#: past it the scores overflow, and long before it training cannot move them.
MAX_POSITION_SCALE = 100.0


class NeighboursModel(nn.Module):
    """[token embedding ; position embedding] -> one ``FusedMultiheadAttention`` self-attention
    layer with `heads` heads -> a read-out of the left and the right neighbour: ``readout="linear"``
    (one ``nn.Linear``) or ``"mlp"`` (Linear to `hidden` features, ReLU, Linear; `hidden` defaults
    to 4E, as in a Transformer block's feed-forward network).

    ``forward(tokens)``: tokens (B, L) int64 -> (logits (B, L, 2, vocab), weights (B, H, L, L)).
    """

    def __init__(self, heads=2, length=LENGTH, vocab=VOCAB, token_dim=16, position_dim=16, position_scale=0.5,
                 readout="linear", hidden=None):
        super().__init__()
        function = "NeighboursModel"
        _model_sizes(function, {"heads": heads, "length": length, "vocab": vocab, "token_dim": token_dim,
                                "position_dim": position_dim},
                     lambda heads, length, vocab, token_dim, position_dim: vocab * token_dim + length * position_dim
                     + 4 * (token_dim + position_dim) ** 2 + 2 * vocab * (token_dim + position_dim))
        _heads(function, heads, token_dim + position_dim)
        # the spread of the position vectors at the start: 1e300 overflows the scores into NaN logits
        check.number(function, "position_scale", position_scale, non_negative=True, maximum=MAX_POSITION_SCALE)
        if readout not in READOUTS:
            check.fail("NeighboursModel", "readout", check.describe(readout),
                       {"en": f"one of {READOUTS}", "zh": f"{READOUTS} 之一"})
        E = token_dim + position_dim
        hidden = 4 * E if hidden is None else check.positive_int("NeighboursModel", "hidden", hidden)
        self.vocab = vocab
        self.token = nn.Embedding(vocab, token_dim)
        self.position = nn.Parameter(position_scale * torch.randn(length, position_dim))  # learned, one per position
        self.attention = FusedMultiheadAttention(E, heads)
        answers = len(SIDES) * vocab
        if readout == "linear":
            self.readout = nn.Linear(E, answers)
        else:
            self.readout = nn.Sequential(nn.Linear(E, hidden), nn.ReLU(), nn.Linear(hidden, answers))

    def forward(self, tokens):
        _model_tokens("NeighboursModel.forward", self, tokens, 2, "(B, L)")
        B, L = tokens.shape
        x = torch.cat([self.token(tokens), self.position[:L].expand(B, L, -1)], dim=-1)  # (B, L, E)
        out, weights = self.attention(x, x, x)  # (B, L, E), (B, H, L, L)
        return self.readout(out).view(B, L, len(SIDES), self.vocab), weights


def train_neighbours(heads=2, seed=0, steps=300, batch=64, lr=0.01, held_out=500, **options):
    """Train a ``NeighboursModel`` with `heads` heads (and the model's `options`, e.g.
    ``readout="mlp"``) with Adam on fresh random batches, as ``train`` does for the other tasks
    (deterministic for a seed and a number of threads; the global random state is left alone).
    Returns a ``Run``; its accuracy is the fraction of the held-out answers (two per position) it
    gets right, on `held_out` ≥ 1 sequences. It runs `steps` steps, as many as asked (about 3 ms
    each on one CPU thread: 10**6 take most of an hour); the model is built on torch's default
    device and the batches, drawn on the CPU, are moved there."""
    function = "train_neighbours"
    check.positive_int(function, "heads", heads)
    sizes = (options.get("token_dim", 16), options.get("position_dim", 16))
    if all(isinstance(size, int) for size in sizes):
        _heads(function, heads, sum(sizes))
    _seed(function, seed, offsets=(0, HELD_OUT_SEED))
    check.whole_number(function, "steps", steps)
    _batch_size(function, "batch", batch)
    check.positive_int(function, "batch", batch)
    check.number(function, "lr", lr, non_negative=True, maximum=torch.finfo(torch.float32).max)
    _batch_size(function, "held_out", held_out)
    check.positive_int(function, "held_out", held_out)  # an accuracy on no sequence at all has no value
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = NeighboursModel(heads, **options)
    data = torch.Generator().manual_seed(seed)
    losses = _fit(model, lambda: _neighbours_batch(batch, data, LENGTH, VOCAB), steps, lr)
    test_tokens, test_targets = _neighbours_batch(held_out, torch.Generator().manual_seed(seed + HELD_OUT_SEED),
                                                  LENGTH, VOCAB)
    device = model.position.device
    return Run("neighbours", model, losses, accuracy(model, test_tokens.to(device), test_targets.to(device)))


@torch.no_grad()
def side_accuracy(model, tokens, targets):
    """The fraction of left answers and of right answers `model` gets right on tokens (N, L) with
    targets (N, L, 2), N ≥ 1: a (2,) tensor in the order of SIDES."""
    _model_tokens("side_accuracy", model, tokens, 2, "(N, L)", (NeighboursModel,), some=True)
    logits, _ = model(tokens)
    _targets("side_accuracy", targets, logits.shape[:-1])
    check.on_device("side_accuracy", "targets", targets, tokens.device, "tokens")
    return (logits.argmax(dim=-1) == targets).double().mean(dim=(0, 1))


@torch.no_grad()
def head_maps(model, tokens):
    """Every head's attention weights for one sequence of tokens (L,): (H, L, L)."""
    _model_tokens("head_maps", model, tokens, 1, "(L,)", (NeighboursModel,))
    return model(tokens.unsqueeze(0))[1][0]


def neighbour_weights(weights):
    """The weight each query gives its left and its right neighbour: (..., L, 2) for (..., L, L)
    weights (the last axis in the order of SIDES)."""
    _weights("neighbour_weights", weights, square=True)
    return _neighbour_weights(weights)


def _neighbour_weights(weights):
    where = neighbour_positions(weights.shape[-1])
    rows = torch.arange(weights.shape[-1], device=weights.device)
    return torch.stack([weights[..., rows, where[side]] for side in SIDES], dim=-1)


def head_sides(weights, threshold=0.6):
    """For (H, L, L) maps of one sequence, or (N, H, L, L) of several: for each head, the side whose
    neighbour gets more than `threshold` of the head's weight at every query (of every sequence),
    or None when neither does."""
    _weights("head_sides", weights, ndims=(3, 4), square=True)
    check.number("head_sides", "threshold", threshold)
    found = _neighbour_weights(weights)  # (..., H, L, 2)
    if found.ndim == 4:
        found = found.transpose(0, 1).flatten(1, 2)  # (H, N·L, 2)
    lowest = found.amin(dim=-2)  # (H, 2): the weakest query of each head, for each side
    return [next((side for side, low in zip(SIDES, row.tolist()) if low > threshold), None) for row in lowest]


def _heads(function, heads, E):
    """`heads` must divide the model's width E = token_dim + position_dim."""
    if E % heads:
        check.fail(function, "heads", check.describe(heads),
                   {"en": f"a divisor of token_dim + position_dim = {E}, so that every head gets E / H features",
                    "zh": f"token_dim + position_dim = {E} 的约数，这样每个头才能分到 E / H 个特征"})


#: The toy models ``accuracy``, ``attention_map`` and ``predict`` take.
MODELS = (ReverseModel, EncoderDecoder, NeighboursModel)
