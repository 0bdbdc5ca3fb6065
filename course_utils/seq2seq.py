"""Lesson 06's tiny encoder–decoder: it learns to reverse sequences of different lengths.

The task: a source of 1 to 8 letters and an end token -> the same letters in reverse order, then
the end token ("abc⟩" -> "cba⟩"). The source's end token marks where it stops, a landmark the
decoder can count back from. A batch holds sequences of different lengths, so every sequence is padded to
the batch's longest with the token PAD, and the masks of lesson 02 keep the padding out:

- the encoder's self-attention and the decoder's cross-attention get the source's padding mask;
- the decoder's self-attention gets the target mask: causal, and the target's padding.

The decoder is trained with teacher forcing: it reads the target shifted right (a start token
BOS, then the answer so far) and predicts every next token at once. At generation time,
``greedy_decode`` feeds its own predictions back one token at a time; the causal mask is what
makes the two agree (position i never saw anything after i during training).

Everything is deterministic: data come from a ``torch.Generator``, initial weights from ``seed``,
and no function touches torch's global random state.

What training reliably gives (tests/test_seq2seq.py proves it on 10 seeds, under the portable
and the native CPU kernels): see ``train``.
"""

from dataclasses import dataclass, field

import torch
from torch import nn

from . import validation as check
from .i18n import language
from .optim import Adam
from .transformer import DecoderLayer, EncoderLayer, sinusoidal_encoding

PAD, BOS, EOS = 0, 1, 2  # the special tokens; the letters a, b, c, ... are 3, 4, 5, ...
SPECIALS = ("·", "⟨", "⟩")  # how PAD, BOS and EOS are shown
LETTERS = 10  # a .. j
VOCAB = len(SPECIALS) + LETTERS
MAX_LENGTH = 8  # the longest source


def show(tokens):
    """'cba⟩' for a 1-D sequence of token ids (padding shown as '·')."""
    if isinstance(tokens, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        tokens = torch.tensor(tokens, dtype=torch.int64)
    check.tokens("show", "tokens", tokens, VOCAB, ndim=1, layout="(L,)")
    return "".join(SPECIALS[t] if t < len(SPECIALS) else chr(ord("a") + t - len(SPECIALS)) for t in tokens.tolist())


# ----------------------------------------------------------------------------- argument checks


def _seed(function, seed, argument="seed"):
    """A seed is any int torch.manual_seed takes (negative ones too, up to 2**64 − 1), never a bool."""
    return check.seed(function, argument, seed)


def _count(function, argument, value, per_item):
    """A number of sequences: a positive int whose `per_item` int64 numbers each fit in memory."""
    check.positive_int(function, argument, value)
    check.fits_in_memory(function, argument, value, value * per_item, 8)
    return value


def _reverser(function, model):
    return check.module(function, "model", model, Reverser, {"en": "a Reverser model (see make_model)",
                                                             "zh": "Reverser 模型（见 make_model）"})


def _device(model):
    """Where `model`'s parameters are: its inputs go there (held-out data are drawn on the CPU, the
    same on every machine, and moved)."""
    return model.embed.weight.device


def decoding_steps(function, max_steps, default):
    """A number of decoding steps: None (`default`), or an int from 1 to MAX_LENGTH + 2, the
    positions the model has a sinusoidal row for (step t feeds a token at position t)."""
    if max_steps is None:
        return default
    return check.whole_number(function, "max_steps", max_steps, 1, MAX_LENGTH + 2)


def _batch(function, batch):
    if not isinstance(batch, Batch):
        check.fail(function, "batch", check.describe(batch),
                   {"en": "a Batch (from make_batch, random_batch or held_out)",
                    "zh": "Batch（由 make_batch、random_batch 或 held_out 得到）"})
    return batch


def _reverser_sizes(function, d_model=32, nhead=2, d_ff=64, layers=1, dropout=0.0, norm_first=True):
    """The sizes of a Reverser, checked under the name of `function` (make_model or Reverser)."""
    check.positive_int(function, "d_model", d_model)
    check.positive_int(function, "nhead", nhead)
    if d_model % nhead:
        check.fail(function, "nhead", check.describe(nhead),
                   {"en": f"a divisor of d_model = {d_model}, so that every head gets d_model / nhead features",
                    "zh": f"d_model = {d_model} 的约数，这样每个头才能分到 d_model / nhead 个特征"})
    check.positive_int(function, "d_ff", d_ff)
    check.positive_int(function, "layers", layers)
    check.flag(function, "norm_first", norm_first)
    sizes = {"d_model": d_model, "d_ff": d_ff, "layers": layers}
    largest = max(sizes, key=sizes.get)
    # every layer pair (an encoder and a decoder layer: 10·E·(E + d_ff) numbers or fewer), not one of them
    check.fits_in_memory(function, largest, sizes[largest], layers * 10 * d_model * (d_model + d_ff), 4)
    check.modules_fit(function, "layers", layers, 35 * layers + 6)  # about 35 modules per layer pair


def encode_letters(text):
    """The token ids (L,) int64 of a string of letters a .. j."""
    return _encode_letters("encode_letters", text)


def _encode_letters(function, text):
    if not isinstance(text, str) or not text or any(not "a" <= c < chr(ord("a") + LETTERS) for c in text):
        check.fail(function, "text", check.describe(text),
                   {"en": f"a non-empty string of the letters a to {chr(ord('a') + LETTERS - 1)}",
                    "zh": f"由字母 a 到 {chr(ord('a') + LETTERS - 1)} 组成的非空字符串"})
    return torch.tensor([ord(c) - ord("a") + len(SPECIALS) for c in text])


def source_of(text):
    """The source (1, n + 1) for a string of n ≤ MAX_LENGTH letters a .. j: its letters, then EOS."""
    tokens = _encode_letters("source_of", text)
    if len(tokens) > MAX_LENGTH:
        check.fail("source_of", "text", check.describe(text),
                   {"en": f"at most {MAX_LENGTH} letters (the model saw no longer source)",
                    "zh": f"至多 {MAX_LENGTH} 个字母（模型没见过更长的源序列）"})
    return torch.cat([tokens, torch.tensor([EOS])])[None]


@dataclass
class Batch:
    """Padded sequences, L_s = L_t = the longest source's letters + 1: source = letters + EOS
    (N, L_s); target_in = BOS + the letters reversed (N, L_t); target_out = the letters reversed +
    EOS (N, L_t); lengths (N,): each source's number of letters."""

    source: torch.Tensor
    target_in: torch.Tensor
    target_out: torch.Tensor
    lengths: torch.Tensor


def make_batch(lengths, letters):
    """The Batch for sources of `lengths` (N,) whose letters (N, >= max length) are token ids of
    letters, 3 … VOCAB − 1 (a … j), int64 (or int32), on the device of `lengths`."""
    function = "make_batch"
    if not isinstance(lengths, torch.Tensor) or lengths.ndim != 1 or lengths.dtype != torch.int64 \
            or not lengths.numel():
        check.fail(function, "lengths", check.describe(lengths),
                   {"en": "a non-empty int64 tensor of shape (N,), each source's number of letters",
                    "zh": "形状为 (N,) 的非空 int64 张量，即每个源序列的字母数"})
    check.dense(function, "lengths", lengths)
    check.has_values(function, "lengths", lengths)
    if not isinstance(letters, torch.Tensor) or letters.dtype not in check.TOKEN_DTYPES or letters.ndim != 2 \
            or letters.shape[0] != len(lengths):
        check.fail(function, "letters", check.describe(letters),
                   {"en": f"an int64 tensor of letter ids of shape (N, L) with N = {len(lengths)}, one row per length",
                    "zh": f"形状为 (N, L)、其中 N = {len(lengths)}（每个长度对应一行）的 int64 字母 id 张量"})
    check.dense(function, "letters", letters)
    check.has_values(function, "letters", letters)
    check.on_device(function, "letters", letters, lengths.device, "lengths")
    low, high = torch.stack(torch.aminmax(lengths)).tolist()
    if low < 0 or high > letters.shape[1]:
        check.fail(function, "lengths", check.describe(lengths) + (f"（取值 {low} … {high}）" if language() == "zh"
                                                                   else f" (values {low} … {high})"),
                   {"en": f"lengths from 0 to {letters.shape[1]}, the number of letters in each row of letters",
                    "zh": f"0 到 {letters.shape[1]} 之间的长度（letters 每行有 {letters.shape[1]} 个字母）"})
    N, L, device = len(lengths), high, lengths.device
    positions = torch.arange(L, device=device)  # (L,)
    real = positions < lengths[:, None]  # (N, L): True at a real letter
    used = letters[:, :L][real]  # the letters the sources take (those past a source's length are unread)
    if used.numel():
        first, last = torch.stack(torch.aminmax(used)).tolist()
        if first < len(SPECIALS) or last >= VOCAB:  # PAD, BOS or EOS among the letters, or no token at all
            shown = f"（取值 {first} … {last}）" if language() == "zh" else f" (values {first} … {last})"
            check.fail(function, "letters", check.describe(letters) + shown,
                       {"en": f"letter ids in {len(SPECIALS)} … {VOCAB - 1} (a … {chr(ord('a') + LETTERS - 1)}; "
                              f"0, 1 and 2 are PAD, BOS and EOS) where a source has a letter",
                        "zh": f"源序列有字母的位置上取 {len(SPECIALS)} … {VOCAB - 1} 之间的字母 id"
                              f"（a … {chr(ord('a') + LETTERS - 1)}；0、1、2 是三个特殊词元）"})
    source = letters[:, :L].masked_fill(~real, PAD)  # (N, L)
    backwards = (lengths[:, None] - 1 - positions).clamp(min=0)  # (N, L): position i reads length-1-i
    reversed_ = source.gather(1, backwards).masked_fill(~real, PAD)  # (N, L)
    pad = source.new_full((N, 1), PAD)
    source = torch.cat([source, pad], dim=1).scatter(1, lengths[:, None], EOS)  # (N, L + 1): ends with EOS
    target_out = torch.cat([reversed_, pad], dim=1).scatter(1, lengths[:, None], EOS)  # (N, L + 1)
    target_in = torch.cat([source.new_full((N, 1), BOS), reversed_], dim=1)  # (N, L + 1)
    return Batch(source, target_in, target_out, lengths)


def random_batch(size, generator, max_length=MAX_LENGTH):
    """`size` random sources of 1 .. max_length letters (from `generator`) and their targets."""
    function = "random_batch"
    _count(function, "max_length", max_length, 1)
    _count(function, "size", size, 4 * max_length)
    check.fits_in_memory(function, "size" if size >= max_length else "max_length", max(size, max_length),
                         size * max_length, 32)
    if generator is not None:
        check.generator(function, "generator", generator)
    device = None if generator is None else generator.device  # where the generator draws (None: the default)
    lengths = torch.randint(1, max_length + 1, (size,), generator=generator, device=device)
    letters = torch.randint(len(SPECIALS), VOCAB, (size, max_length), generator=generator, device=device)
    return make_batch(lengths, letters)


def held_out(count=500, seed=10_000):
    """`count` fixed sources, drawn from their own generator (training draws from the seed's), on
    the CPU: the same sources on every machine (move them with ``.to`` where a model is elsewhere)."""
    _count("held_out", "count", count, 4 * MAX_LENGTH)
    _seed("held_out", seed)
    return random_batch(count, torch.Generator().manual_seed(seed))


class Reverser(nn.Module):
    """Embedding + sinusoidal positions -> encoder layers -> decoder layers -> a linear read-out.

    Pre-norm layers (``norm_first=True``, the default) with a final LayerNorm after each stack, as
    pre-norm models need (the residual stream is never normalised inside the layers). With
    ``norm_first=False`` the layers are post-norm and the final LayerNorms stay (as in
    ``nn.Transformer``, whose stacks end with one whatever the order): the models of lesson 06's
    warm-up experiment differ in the norm order only. The source and the target share one token
    embedding, to which the sinusoidal encoding is added unscaled. (The original Transformer
    multiplies the embedding by √E first; with PyTorch's N(0, 1) embedding initialisation that
    drowns the positions, of size about 1 per feature pair: measured here, reversing then reached
    35–65 % of the held-out sources exactly in 400 steps instead of 90 %+.)
    """

    def __init__(self, d_model=32, nhead=2, d_ff=64, layers=1, dropout=0.0, norm_first=True):
        super().__init__()
        _reverser_sizes("Reverser", d_model, nhead, d_ff, layers, dropout, norm_first)
        self.d_model = d_model
        self.embed = nn.Embedding(VOCAB, d_model)
        self.register_buffer("positions", sinusoidal_encoding(MAX_LENGTH + 2, d_model), persistent=False)
        options = {"dropout": dropout, "norm_first": check.flag("Reverser", "norm_first", norm_first)}
        self.encoder = nn.ModuleList(EncoderLayer(d_model, nhead, d_ff, **options) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, nhead, d_ff, **options) for _ in range(layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, VOCAB)

    def _embed(self, tokens):
        return self.embed(tokens) + self.positions[: tokens.shape[1]]  # (B, L, E)

    def _source(self, function, source, longest=MAX_LENGTH + 2):
        check.tokens(function, "source", source, VOCAB, ndim=2, layout="(B, L_s)", max_length=longest)
        return check.on_device(function, "source", source, self.embed.weight.device,
                               {"en": "the model's parameters", "zh": "模型参数"})

    def encode(self, source):
        """source (B, L_s) -> memory (B, L_s, E)."""
        self._source("Reverser.encode", source)
        return self._encode(source)

    def _encode(self, source):
        x, padding = self._embed(source), source == PAD
        for layer in self.encoder:
            x = layer(x, key_padding_mask=padding)
        return self.encoder_norm(x)

    def decode(self, target_in, memory, source, need_weights=False):
        """Logits (B, L_t, VOCAB) for every next token; with need_weights also the last decoder
        layer's (self_weights (B, H, L_t, L_t), cross_weights (B, H, L_t, L_s))."""
        x = self._embed(target_in)
        options = {"tgt_key_padding_mask": target_in == PAD, "memory_key_padding_mask": source == PAD}
        weights = None
        for layer in self.decoder:
            if need_weights:
                x, weights = layer(x, memory, need_weights=True, **options)
            else:
                x = layer(x, memory, **options)
        logits = self.readout(self.decoder_norm(x))
        return (logits, weights) if need_weights else logits

    def forward(self, source, target_in, need_weights=False):
        """Teacher forcing: logits (B, L_t, VOCAB) for every position of target_in at once."""
        function = "Reverser.forward"
        self._source(function, source)
        check.tokens(function, "target_in", target_in, VOCAB, ndim=2, layout="(B, L_t)", max_length=MAX_LENGTH + 2)
        check.on_device(function, "target_in", target_in, source.device, "source")
        if target_in.shape[0] != source.shape[0] or not target_in.shape[1]:
            check.fail(function, "target_in", check.describe(target_in),
                       {"en": f"shape (B, L_t) with B = {source.shape[0]}, the batch size of source, and L_t ≥ 1",
                        "zh": f"形状 (B, L_t)，其中 B = {source.shape[0]}（与 source 的批量大小一致），且 L_t ≥ 1"})
        check.flag(function, "need_weights", need_weights)
        return self.decode(target_in, self._encode(source), source, need_weights)


def make_model(seed=0, **options):
    """An untrained Reverser, its weights drawn from `seed` (global random state untouched)."""
    _seed("make_model", seed)
    _reverser_sizes("make_model", **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Reverser(**options)


@dataclass
class Run:
    """What ``train`` returns: the model (in eval mode), its loss at every step, and the fraction
    of held-out sources it reverses exactly with greedy decoding."""

    model: nn.Module
    losses: list = field(repr=False)
    accuracy: float


@torch.no_grad()
def greedy_decode(model, source, max_steps=None):
    """Generate the answer one token at a time, each step feeding back the tokens chosen so far.

    source (B, L_s) -> tokens (B, T) int64, T ≤ max_steps (default L_s + 1): after a sequence's
    EOS every further token is PAD. The encoder runs once; the decoder runs on the growing prefix.
    max_steps: 1 … MAX_LENGTH + 2 = 10, the positions the model has a sinusoidal row for (step t
    feeds the token at position t); a sequence that has said EOS stops there.
    """
    function = "greedy_decode"
    _reverser(function, model)
    model._source(function, source, MAX_LENGTH + 1)  # L_s + 1 steps must fit the position table
    B, L_s = source.shape
    steps = decoding_steps(function, max_steps, L_s + 1)
    memory = model._encode(source)
    out = torch.full((B, 1), BOS, device=source.device)
    done = torch.zeros(B, dtype=torch.bool, device=source.device)
    for _ in range(steps):
        logits = model.decode(out, memory, source)  # (B, t, VOCAB)
        following = logits[:, -1].argmax(dim=-1).masked_fill(done, PAD)  # (B,)
        out = torch.cat([out, following[:, None]], dim=1)
        done |= following == EOS
        if done.all():
            break
    return out[:, 1:]  # (B, T): without the BOS


def needed_positions(batch):
    """(N, L_t) int64: the source position each output step must read: letter n-1-t at step t < n,
    the source's EOS (position n) at step n; 0 at the padding steps after it."""
    _batch("needed_positions", batch)
    t = torch.arange(batch.target_out.shape[1], device=batch.lengths.device)  # (L_t,)
    n = batch.lengths[:, None]  # (N, 1)
    return torch.where(t < n, n - 1 - t, torch.where(t == n, n, 0))


def offset_profile(weights, batch, reach=3):
    """The cross-attention weight by offset from the needed source position, averaged over heads
    and every letter step of the batch: {offset: mean weight} for offsets -reach .. reach.
    weights: (N, H, L_t, L_s), where the batch is. An offset that leads outside every source
    (|offset| ≥ L_s) has weight 0. The batch needs at least one letter: with every source empty
    there is no step to average over."""
    function = "offset_profile"
    _batch(function, batch)
    check.whole_number(function, "reach", reach)
    check.fits_in_memory(function, "reach", reach, 2 * reach + 1, 100)  # the dict: an int and a float per offset
    shape = (batch.source.shape[0], "H", batch.target_out.shape[1], batch.source.shape[1])
    check.tensor(function, "weights", weights, min_ndim=4, layout="(N, H, L_t, L_s)")
    check.has_values(function, "weights", weights)
    if weights.ndim != 4 or not weights.shape[1] or any(
            size != wanted for size, wanted in zip(weights.shape, shape) if wanted != "H"):
        shown = "(" + ", ".join(map(str, shape)) + ")"
        check.fail(function, "weights", check.describe(weights),
                   {"en": f"the batch's cross-attention weights, of shape (N, H, L_t, L_s) = {shown}",
                    "zh": f"该批量的交叉注意力权重，形状为 (N, H, L_t, L_s) = {shown}"})
    check.on_device(function, "weights", weights, batch.lengths.device, "batch")
    needed = needed_positions(batch)  # (N, L_t)
    letters = torch.arange(needed.shape[1], device=needed.device) < batch.lengths[:, None]  # the steps that say a letter
    said = letters.sum().item()
    if not said:
        check.fail(function, "batch", f"Batch(lengths={check.describe(batch.lengths)})",
                   {"en": "a batch with at least one letter: with every source empty there is no step to average over",
                    "zh": "至少有一个字母的批量：所有源序列都为空时，没有可以求平均的步"})
    mean = weights.mean(1)  # (N, L_t, L_s)
    L_s = mean.shape[-1]
    profile = {}
    for offset in range(-reach, reach + 1):
        if abs(offset) >= L_s:  # outside every source (the needed position is in 0 … L_s − 1): weight 0
            profile[offset] = 0.0
            continue
        at = needed + offset
        inside = letters & (at >= 0) & (at < L_s)
        got = mean.gather(-1, at.clamp(0, L_s - 1)[..., None]).squeeze(-1)  # (N, L_t)
        profile[offset] = (got * inside).sum().item() / said  # outside the source: weight 0
    return profile


def exact(predicted, batch):
    """(N,) bool: whether each greedy answer is the reversed source followed by EOS."""
    _batch("exact", batch)
    N = batch.target_out.shape[0]
    check.tensor("exact", "predicted", predicted, min_ndim=2, layout="(N, T)", floating=False)
    check.has_values("exact", "predicted", predicted)
    if predicted.ndim != 2 or predicted.shape[0] != N:
        check.fail("exact", "predicted", check.describe(predicted),
                   {"en": f"shape (N, T) with N = {N}, one answer per source of the batch",
                    "zh": f"形状 (N, T)，其中 N = {N}，该批量的每个源序列对应一个答案"})
    check.on_device("exact", "predicted", predicted, batch.target_out.device, "batch")
    target = batch.target_out
    T = max(predicted.shape[1], target.shape[1])
    pad = lambda t: nn.functional.pad(t, (0, T - t.shape[1]), value=PAD)
    return (pad(predicted) == pad(target)).all(dim=1)


def learning_rate(step, steps, lr, warmup=0):
    """The step size of training step `step` (0 … steps − 1): with T = steps and W = warmup,

        lr_t = lr · min((t + 1) / W, (T − t) / (T − W))

    a linear warm-up from lr / W to lr over the first W steps, then a linear fall to lr / (T − W)
    at the last step. Without warm-up (W = 0) it is lr · (1 − t / T): the fall alone, from lr.

    steps ≥ 1, 0 ≤ step < steps and 0 ≤ warmup < steps are ints, lr a finite number ≥ 0: every
    result is then in [0, lr] (a step past the last would give a negative rate, steps = warmup a
    division by zero)."""
    function = "learning_rate"
    check.positive_int(function, "steps", steps)
    check.whole_number(function, "step", step, 0, steps - 1)
    check.whole_number(function, "warmup", warmup, 0, steps - 1)
    check.number(function, "lr", lr, non_negative=True)
    if warmup == 0:
        return lr * (1 - step / steps)
    return lr * min((step + 1) / warmup, (steps - step) / (steps - warmup))


def train(seed=0, steps=250, batch=64, lr=1.5e-2, warmup=0, evaluate=True, **options):
    """Train a Reverser with Adam and teacher forcing (cross-entropy on the real target tokens,
    padding ignored) on fresh random batches; its accuracy is measured on ``held_out()`` (None when
    not `evaluate`). The step size follows ``learning_rate``: without `warmup` it falls linearly from
    `lr` to 0, so the last steps polish instead of jumping around; with `warmup` = W it first rises
    linearly over W steps. `options` go to the Reverser (``layers``, ``norm_first``, …).

    It runs `steps` steps, as many as asked (no upper bound): about 10 ms each on one CPU thread
    at the default sizes, so 250 take seconds and 10**6 take hours (interrupt the kernel to stop).
    The model is built on torch's default device and the batches (drawn on the CPU, the same on
    every machine) are moved there."""
    _seed("train", seed)
    check.positive_int("train", "steps", steps)
    _count("train", "batch", batch, 4 * MAX_LENGTH)
    check.number("train", "lr", lr, non_negative=True, maximum=torch.finfo(torch.float32).max)
    check.flag("train", "evaluate", evaluate)
    model = make_model(seed, **options)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < steps:
        check.fail("train", "warmup", check.describe(warmup),
                   {"en": f"an int from 0 (no warm-up) to steps − 1 = {steps - 1}",
                    "zh": f"0（不预热）到 steps − 1 = {steps - 1} 之间的整数"})
    data = torch.Generator().manual_seed(seed)  # on the CPU: the same batches on every machine
    device = _device(model)  # torch's default device, where make_model built it
    optimiser = Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    losses = []
    model.train()
    for step in range(steps):
        b = _to(random_batch(batch, data), device)
        logits = model(b.source, b.target_in)  # (B, L_t, VOCAB)
        loss = loss_fn(logits.flatten(0, 1), b.target_out.flatten())
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step(learning_rate(step, steps, lr, warmup))
        losses.append(loss.item())
    model.eval()
    if not evaluate:
        return Run(model, losses, None)
    test = _to(held_out(), device)
    return Run(model, losses, exact(greedy_decode(model, test.source), test).double().mean().item())


def _to(batch, device):
    """`batch` with every tensor on `device` (itself when they are there already)."""
    if batch.lengths.device == torch.device(device):
        return batch
    return Batch(*(tensor.to(device) for tensor in (batch.source, batch.target_in, batch.target_out, batch.lengths)))


def held_out_loss(model, count=500):
    """The cross-entropy of `model`'s teacher-forced predictions on the first `count` held-out
    sources (every real target token; padding ignored)."""
    _reverser("held_out_loss", model)
    _count("held_out_loss", "count", count, 4 * MAX_LENGTH)
    test = _to(held_out(count), _device(model))
    with torch.no_grad():
        logits = model(test.source, test.target_in)
    return nn.functional.cross_entropy(logits.flatten(0, 1), test.target_out.flatten(), ignore_index=PAD).item()
