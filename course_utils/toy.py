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
state. Training takes a few seconds on one CPU thread.
"""

from dataclasses import dataclass, field

import torch
from torch import nn

from . import validation as check
from .layers import CrossAttention, SelfAttention

LENGTH, VOCAB = 8, 10  # sequences of 8 tokens out of 10
TASKS = ("reverse", "double")


def letters(tokens):
    """'abc...' for a 1-D sequence of token ids."""
    return "".join(chr(ord("a") + int(t)) for t in tokens)


def target_positions(task, length=LENGTH):
    """Which source position each output position copies: the alignment a model must learn."""
    _task(task)
    if task == "reverse":
        return list(range(length - 1, -1, -1))  # output i <- source L-1-i: the anti-diagonal
    return [i // 2 for i in range(2 * length)]  # output i <- source i // 2: a staircase


def make_batch(task, size, generator, length=LENGTH, vocab=VOCAB):
    """`size` random sequences and their targets: tokens (size, L) and targets (size, L_out).

    The tokens of a sequence are all different (L <= vocab), so exactly one source position
    holds the token an output position needs: the right attention map is unique.
    """
    if not 1 <= length <= vocab:
        needed = {"en": f"1 to vocab = {vocab}", "zh": f"1 到 vocab = {vocab}"}
        check.fail("make_batch", "length", check.describe(length), needed)
    shuffled = torch.rand(size, vocab, generator=generator).argsort(dim=-1)  # (N, vocab): a random order
    tokens = shuffled[:, :length]  # (N, L): L different tokens
    return tokens, tokens[:, target_positions(task, length)]  # (N, L_out)


def example(task, index, length=LENGTH, vocab=VOCAB):
    """Example number `index` (a fixed sequence for each index, held out from training): (tokens, target)."""
    tokens, targets = make_batch(task, 1, torch.Generator().manual_seed(10_000 + index), length, vocab)
    return tokens[0], targets[0]


def _task(task):
    if task not in TASKS:
        check.fail("toy", "task", check.describe(task), {"en": f"one of {TASKS}", "zh": f"{TASKS} 之一"})
    return task


class ReverseModel(nn.Module):
    """One self-attention layer between token/position embeddings and a read-out.

    Each position is the concatenation [token embedding ; position embedding]: the position half
    lets a query say *where* it wants to read from (without it, self-attention cannot tell
    positions apart and could not reverse anything), and the token half is *what* is read.

    ``forward(tokens)``: tokens (B, L) int64 -> (logits (B, L, vocab), weights (B, L, L)).
    """

    def __init__(self, length=LENGTH, vocab=VOCAB, token_dim=16, position_dim=16, positions=True):
        super().__init__()
        self.token = nn.Embedding(vocab, token_dim)
        self.position = nn.Parameter(torch.randn(length, position_dim))  # learned, one row per position
        self.positions = positions  # False: the position half is all zeros (for the lesson's comparison)
        self.attention = SelfAttention(token_dim + position_dim)
        self.readout = nn.Linear(token_dim + position_dim, vocab)

    def forward(self, tokens):
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
        self.token = nn.Embedding(vocab, token_dim)
        self.position = nn.Parameter(torch.randn(length, position_dim))  # source positions
        self.queries = nn.Parameter(torch.randn(out_length, query_dim))  # one per output position
        self.attention = CrossAttention(query_dim, kv_dim=token_dim + position_dim)
        self.readout = nn.Linear(query_dim, vocab)

    def forward(self, tokens):
        B, L = tokens.shape
        memory = torch.cat([self.token(tokens), self.position[:L].expand(B, L, -1)], dim=-1)  # (B, L, E_kv)
        x = self.queries.expand(B, -1, -1)  # (B, L_out, E_q)
        out, weights = self.attention(x, memory)  # (B, L_out, E_q), (B, L_out, L)
        return self.readout(out), weights  # (B, L_out, vocab), (B, L_out, L)


def make_model(task, seed=0, **options):
    """The untrained model for `task`, its weights drawn from `seed` (global RNG state untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return (ReverseModel if _task(task) == "reverse" else EncoderDecoder)(**options)


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
    """The fraction of output tokens `model` predicts right on tokens (N, L) with targets (N, L_out)."""
    logits, _ = model(tokens)
    return (logits.argmax(dim=-1) == targets).double().mean().item()


@torch.no_grad()
def attention_map(model, tokens):
    """The model's attention weights for one sequence of tokens (L,): (L_out, L)."""
    return model(tokens.unsqueeze(0))[1][0]


@torch.no_grad()
def predict(model, tokens):
    """The model's output tokens for one sequence of tokens (L,): (L_out,)."""
    return model(tokens.unsqueeze(0))[0][0].argmax(dim=-1)


def alignment_found(weights, task, margin=0.0):
    """Whether every query's largest weight sits on the position `task` needs, (L_out, L) weights,
    and beats every other key's weight by more than `margin`."""
    wanted = torch.tensor(target_positions(task, weights.shape[-1]))
    if weights.shape[0] != len(wanted):
        return False
    rows = torch.arange(len(wanted))
    best = weights[rows, wanted]
    others = weights.clone()
    others[rows, wanted] = float("-inf")
    return bool((best - others.amax(dim=-1) > margin).all())


def train(task, seed=0, steps=300, batch=64, lr=0.02, held_out=500, **options):
    """Train the model for `task` ("reverse" or "double") with Adam on fresh random batches.

    Deterministic for a given seed and number of threads (data and weights come from `seed`;
    the global random state is left as it was). Returns a ``Run``; its accuracy is measured on
    `held_out` sequences drawn from a separate generator.
    """
    model = make_model(task, seed, **options)
    data = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        tokens, targets = make_batch(task, batch, data)
        logits, _ = model(tokens)  # (B, L_out, vocab)
        loss = loss_fn(logits.flatten(0, 1), targets.flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    model.eval()
    test_tokens, test_targets = make_batch(task, held_out, torch.Generator().manual_seed(seed + 1_000_000))
    return Run(task, model, losses, accuracy(model, test_tokens, test_targets))
