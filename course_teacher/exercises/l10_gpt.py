"""Lesson 10's exercises: the causal decoder block, the language-model loss, sampling the next
character, and greedy generation with the KV cache, past the context too.

A case crosses to a grader's kernel as plain data, so the block and the model travel as their
parameters (course_utils/exercises/objects.py builds the ``gpt.Block`` or ``gpt.GPT`` the learner's
function receives, its tensors views of the case's, and the generator from a seed). Every function
here also accepts the data itself, as the generic tests call them on a case's arguments.

The references are plain code; tests/test_exercises_l10.py proves them equal to ``course_utils.gpt``
(``Block.forward``, ``lm_loss`` on shifted targets, ``sample_next``, ``GPT.generate``), values and
gradients. The first case of each exercise is one where every known mistake runs and shows:

- 10.causal_block: several heads (2 … 8, and 1, where splitting and merging cannot go wrong), one
  position, float64; the gradient with respect to ``block`` is every parameter's;
- 10.lm_loss: rows with different numbers of padded targets, a pad id that is not 0, no padding,
  a pad id that does not occur, one prediction (T = 2), float64;
- 10.sample_next: judged by behaviour (objects.py): a tie at the k-th logit, temperatures below and
  above 1, top_k = 1, two different rows in one batch, and temperature 0 (the argmax, its first index
  on ties) with and without a generator;
- 10.generate_cached: a generation that runs past the context (the window jumps), a prompt that fills
  the context, one longer than it, a single new token, one layer, several jumps.
"""

import math

import torch
import torch.nn.functional as F

from course_utils import gpt
from course_utils.decoding import KVCache
from course_utils.exercises import objects

from .registry import Exercise, Mistake, randn, register


def _sizes(generator, count, low, high):
    """`count` integers drawn uniformly from [low, high] by the grader's generator."""
    return [int(n) for n in torch.randint(low, high + 1, (count,), generator=generator)]


def _draw(generator, low, high):
    return _sizes(generator, 1, low, high)[0]


def _parameters(g, module, dtype=torch.float32):
    """Parameters for `module`'s structure (in ``named_parameters`` order, flattened): LayerNorm weights
    near 1, biases and positions near 0, every other matrix N(0, 1/fan_in), so that no layer is the
    identity, as a trained model's are not."""
    drawn = []
    for name, parameter in module.named_parameters():
        shape = parameter.shape
        if "norm" in name and name.endswith("weight"):
            values = 1 + 0.2 * randn(g, *shape)
        elif name.endswith("bias"):
            values = 0.2 * randn(g, *shape)
        elif name.startswith("embed") or name.startswith("positions"):
            values = randn(g, *shape)
        else:
            values = randn(g, *shape) / math.sqrt(shape[-1])
        drawn.append(values.reshape(-1))
    return torch.cat(drawn).to(dtype)


# ----------------------------------------------------------------------------- 10.causal_block
# x (B, L, E), block a gpt.Block (learned positions) -> (B, L, E):
#   h = norm1(x); q, k, v = h W_Q, h W_K, h W_V split into H heads; causal attention; heads merged;
#   x = x + out_proj(...); return x + feed_forward(norm2(x)).


def _as_block(block, x):
    return objects.block(block, x.shape[-1]) if isinstance(block, torch.Tensor) else block


def _block_case(g, B, L, E, H, d_ff, dtype=torch.float32):
    with torch.device("meta"):
        structure = gpt.Block(E, H, d_ff)
    parameters = _parameters(g, structure, dtype).reshape(H, -1)
    return randn(g, B, L, E).to(dtype), parameters


def _block_cases(generator):
    # (B, L, E, H, d_ff). First 4 heads of 4 over 5 positions: every mistake shows; then one position,
    # three heads, one head (where splitting and merging cannot go wrong), head size 4 with 8 heads, float64.
    g = generator
    return [
        _block_case(g, 2, 5, 16, 4, 32),
        _block_case(g, 1, 1, 8, 2, 16),
        _block_case(g, 2, 7, 12, 3, 24),
        _block_case(g, 1, 6, 8, 1, 8),
        _block_case(g, 2, 4, 32, 8, 64),
        _block_case(g, 2, 5, 8, 2, 16, torch.float64),
    ]


def _hidden_block_cases(generator):
    """The grader's: sizes drawn from its generator (E ≤ 32, L ≤ 12), one in float64; and, whatever the
    draws, one case with two heads or more and three positions or more, as the first public one."""
    g, cases = generator, []
    for number in range(5):
        heads = _draw(g, 2 if number == 0 else 1, 4)
        head_size = 2 * _draw(g, 1, 32 // (2 * heads))
        E = heads * head_size
        length = _draw(g, 3 if number == 0 else 1, 12)
        cases.append(_block_case(g, _draw(g, 1, 2), length, E, heads, E * _draw(g, 1, 2),
                                 torch.float64 if number == 4 else torch.float32))
    return cases


def _causal_block(x, block, *, post_norm=False, mask="causal", scale="head", split="transpose", merge="transpose",
                  residual="input", second_norm="norm2", parallel=False, softmax_dim=-1):
    """The pre-norm block, written out, with one of the slips its keywords name."""
    block = _as_block(block, x)
    B, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads
    d = E // H
    h = x if post_norm else block.norm1(x)

    def heads(t):  # (B, L, E) -> (B, H, L, d)
        return t.view(B, L, H, d).transpose(1, 2) if split == "transpose" else t.reshape(B, H, L, d)

    q, k, v = heads(m.q_proj(h)), heads(m.k_proj(h)), heads(m.v_proj(h))
    scores = q @ k.transpose(-2, -1)  # (B, H, L, L)
    if scale == "head":
        scores = scores / math.sqrt(d)
    elif scale == "width":
        scores = scores / math.sqrt(E)
    keep = {"causal": torch.ones(L, L, dtype=torch.bool, device=x.device).tril(),
            "strict": torch.ones(L, L, dtype=torch.bool, device=x.device).tril(-1),
            "none": None}[mask]
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    out = scores.softmax(dim=softmax_dim) @ v  # (B, H, L, d)
    out = out.transpose(1, 2).reshape(B, L, E) if merge == "transpose" else out.reshape(B, L, E)
    attended = m.out_proj(out)  # (B, L, E)
    if post_norm:
        x = block.norm1(x + attended)
        return block.norm2(x + block.feed_forward(x))
    if parallel:
        return x + attended + block.feed_forward(block.norm2(x))
    x = (h if residual == "normed" else x) + attended
    norm = block.norm2 if second_norm == "norm2" else block.norm1
    return x + block.feed_forward(norm(x))


def _block_reference(x, block):
    return _causal_block(x, block)


register(
    Exercise(
        id="10.causal_block",
        reference=_block_reference,
        cases=_block_cases,
        hidden=_hidden_block_cases,
        forbidden=("course_utils.gpt.Block.forward", "course_utils.gpt.CausalSelfAttention.forward",
                   "course_utils.gpt.causal_attention", "F.scaled_dot_product_attention",
                   "torch.nn.MultiheadAttention.forward", "course_utils.multihead.FusedMultiheadAttention.forward"),
        mistakes=(),
    )
)


# ----------------------------------------------------------------------------- 10.lm_loss
# logits (B, T, V), tokens (B, T) int64, pad_id -> 0-dim: the mean cross-entropy of tokens[:, t + 1]
# under logits[:, t], t = 0 … T − 2, over the targets that are not pad_id.


def _loss_case(g, B, T, V, pad_id=None, pads=(), dtype=torch.float32, leading=False):
    """Tokens drawn from the V − 1 ids that are not pad_id; row b ends with pads[b] pad ids (or starts with
    them when `leading`)."""
    logits = (2 * randn(g, B, T, V)).to(dtype)
    ids = torch.tensor([i for i in range(V) if i != pad_id])
    tokens = ids[torch.randint(len(ids), (B, T), generator=g)]
    for row, count in enumerate(pads):
        if count:
            if leading:
                tokens[row, :count] = pad_id
            else:
                tokens[row, T - count:] = pad_id
    return logits, tokens, pad_id


def _loss_cases(generator):
    # First three rows with 0, 2 and 4 padded targets at their ends (every mistake shows: the rows'
    # means differ from the mean over all); then no padding (pad_id None), one prediction (T = 2),
    # padding at the start of a row with a pad id that is not 0, a pad id that does not occur, float64.
    g = generator
    return [
        _loss_case(g, 3, 7, 6, 0, (0, 2, 4)),
        _loss_case(g, 2, 5, 5),
        _loss_case(g, 1, 2, 3),
        _loss_case(g, 2, 8, 9, 3, (3, 1), leading=True),
        _loss_case(g, 2, 5, 6, 5),
        _loss_case(g, 2, 6, 4, 1, (1, 3), torch.float64),
    ]


def _hidden_loss_cases(generator):
    """The grader's: sizes, pad ids and padding drawn from its generator, one in float64; whatever the
    draws, one case whose rows hold different numbers of padded targets (and one target or more each)."""
    g, cases = generator, []
    for number in range(5):
        B, T, V = _draw(g, 2 if number == 0 else 1, 4), _draw(g, 3 if number == 0 else 2, 12), _draw(g, 3, 20)
        pad_id = _draw(g, 0, V - 1) if number in (0, 2, 4) else None
        if number == 0:
            pads = [min(row, T - 2) for row in range(B)]  # 0, 1, 2, ... padded targets: different counts
        elif pad_id is not None:
            pads = _sizes(g, B, 0, T - 2)
        else:
            pads = ()
        cases.append(_loss_case(g, B, T, V, pad_id, pads, torch.float64 if number == 4 else torch.float32,
                                leading=number == 2))
    return cases


def _lm_loss(logits, tokens, pad_id=None, *, shift="right", probabilities="log_softmax", ignore_pad=True,
             pad_from="targets", reduction="mean"):
    """The loss, written out, with one of the slips its keywords name."""
    B, T, V = logits.shape
    if shift == "right":
        predictions, targets, inputs = logits[:, :-1], tokens[:, 1:], tokens[:, :-1]  # (B, T − 1, V), (B, T − 1)
    elif shift == "none":
        predictions, targets, inputs = logits, tokens, tokens
    else:  # the wrong way: logits[:, t + 1] predicting tokens[:, t]
        predictions, targets, inputs = logits[:, 1:], tokens[:, :-1], tokens[:, 1:]
    if probabilities == "log_softmax":
        log_p = predictions.log_softmax(dim=-1)
    elif probabilities == "softmax_first":  # cross-entropy of the softmax: a softmax taken twice
        log_p = predictions.softmax(dim=-1).log_softmax(dim=-1)
    else:  # the logits taken as log-probabilities (nll_loss on raw logits)
        log_p = predictions
    losses = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T')
    keep = torch.ones_like(targets, dtype=torch.bool)
    if pad_id is not None and ignore_pad:
        keep = (targets if pad_from == "targets" else inputs) != pad_id
    losses = losses * keep
    if reduction == "mean":
        return losses.sum() / keep.sum()
    if reduction == "sum":
        return losses.sum()
    if reduction == "all":  # the padded positions zeroed but counted
        return losses.sum() / keep.numel()
    return (losses.sum(dim=1) / keep.sum(dim=1)).mean()  # "rows": the mean of each row's mean


def _loss_reference(logits, tokens, pad_id=None):
    V = logits.shape[-1]
    predictions, targets = logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1)  # (B·(T − 1), V), (B·(T − 1),)
    return F.cross_entropy(predictions, targets, ignore_index=-100 if pad_id is None else pad_id)


register(
    Exercise(
        id="10.lm_loss",
        reference=_loss_reference,
        cases=_loss_cases,
        hidden=_hidden_loss_cases,
        mistakes=(),
    )
)


# ----------------------------------------------------------------------------- 10.sample_next
# logits (B, V), temperature, top_k, generator -> (B,) int64: temperature 0, the argmax; else one draw
# per row from softmax(logits / temperature) over the top_k largest logits (ties with the k-th kept),
# with `generator` only. Judged by behaviour (objects.py): each case of temperature > 0 repeats its rows
# DRAWS times, so that the frequencies can be compared with the probabilities.

DRAWS = 2000


def _as_generator(generator):
    return torch.Generator().manual_seed(int(generator)) if isinstance(generator, int) else generator


def _repeated(*rows, draws=DRAWS):
    """Each row repeated `draws` times, in one batch: a view (the case's data stays small)."""
    if len(rows) == 1:
        return rows[0][None, :].expand(draws, -1)
    return torch.cat([row[None, :].expand(draws, -1) for row in rows])


def _distinct_row(g, V, top_k=None, scale=1.5):
    """A row of V logits whose top_k largest are clear of the others (no tie at the k-th)."""
    while True:
        row = scale * randn(g, V)
        ordered = row.sort(descending=True).values
        if top_k is None or top_k == V or float(ordered[top_k - 1] - ordered[top_k]) > 0.3:
            return row


def _sample_cases(generator):
    # (logits, temperature, top_k, generator's seed). First a tie at the 3rd largest logit with top_k = 3
    # at temperature 1: every mistake of top-k and of the generator shows; then temperature 0.5 without
    # top-k, 2.0 with top_k = 2, two different rows in one batch, top_k = 1 (no choice), and temperature
    # 0 (the argmax, the first index on ties) without a generator and with one and top_k.
    g = generator
    tie = torch.tensor([1.0, 2.0, -0.5, 1.5, 1.0, 0.2, 0.8, -1.0])  # the 3rd largest, 1.0, twice
    ties = torch.tensor([[0.5, 2.0, 2.0, -1.0, 0.0, 1.0, 0.3], [1.0, 1.0, 1.0, 0.0, -2.0, 0.5, 0.1]])
    greedy = torch.cat([ties, randn(g, 3, 7)])
    return [
        (_repeated(tie), 1.0, 3, 11),
        (_repeated(_distinct_row(g, 10)), 0.5, None, 12),
        (_repeated(_distinct_row(g, 6, 2)), 2.0, 2, 13),
        (_repeated(_distinct_row(g, 5), _distinct_row(g, 5)), 1.0, None, 14),
        (_repeated(_distinct_row(g, 7, 1)), 1.5, 1, 15),
        (greedy, 0.0, None, None),
        (randn(g, 4, 9), 0.0, 2, 16),
    ]


def _hidden_sample_cases(generator):
    """The grader's: sizes, temperatures, top_k and seeds drawn from its generator; whatever the draws,
    a tie at the k-th largest logit, a temperature below 1 and one above, two rows, and temperature 0."""
    g = generator
    V = _draw(g, 5, 12)
    k = _draw(g, 2, V - 2)
    row = _distinct_row(g, V, k)
    row[row.sort(descending=True).indices[k]] = row.sort(descending=True).values[k - 1]  # a tie at the k-th
    seeds = _sizes(g, 4, 0, 10**6)
    low, high = 0.3 + 0.5 * float(torch.rand(1, generator=g)), 1.3 + float(torch.rand(1, generator=g))
    return [
        (_repeated(row), 1.0, k, seeds[0]),
        (_repeated(_distinct_row(g, _draw(g, 4, 12))), low, None, seeds[1]),
        (_repeated(_distinct_row(g, V, k)), high, k, seeds[2]),
        (_repeated(_distinct_row(g, 6), _distinct_row(g, 6)), 1.0, None, seeds[3]),
        (randn(g, _draw(g, 2, 6), _draw(g, 3, 12)), 0.0, None, None),
    ]


def _sample(logits, temperature=1.0, top_k=None, generator=None, *, use_generator="given", scale="divide",
            top="ties_kept", greedy_at_zero=True, always_greedy=False, keep_axis=False):
    """sample_next, written out, with one of the slips its keywords name."""
    generator = _as_generator(generator)
    if top_k is not None and top != "ignored":
        if top == "ties_kept":
            kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest
            logits = logits.masked_fill(logits < kth, float("-inf"))
        elif top == "kth_dropped":
            kth = logits.topk(top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits <= kth, float("-inf"))
        else:  # "indices": exactly k kept, whichever of tied logits topk returns
            keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(top_k, dim=-1).indices, True)
            logits = logits.masked_fill(~keep, float("-inf"))
    if always_greedy or (temperature == 0 and greedy_at_zero):
        return logits.argmax(dim=-1)
    scaled = logits / temperature if scale == "divide" else logits * temperature
    probabilities = scaled.softmax(dim=-1)  # (B, V)
    if use_generator == "given":
        drawn = torch.multinomial(probabilities, 1, generator=generator)
    elif use_generator == "global":
        drawn = torch.multinomial(probabilities, 1)
    else:  # a generator of its own
        drawn = torch.multinomial(probabilities, 1, generator=torch.Generator().manual_seed(0))
    return drawn if keep_axis else drawn[:, 0]  # (B, 1) -> (B,)


def _sample_reference(logits, temperature=1.0, top_k=None, generator=None):
    return _sample(logits, temperature, top_k, generator)


register(
    Exercise(
        id="10.sample_next",
        reference=_sample_reference,
        cases=_sample_cases,
        hidden=_hidden_sample_cases,
        forbidden=("course_utils.gpt.sample_next",),
        mistakes=(),
    )
)


# ----------------------------------------------------------------------------- 10.generate_cached
# model a gpt.GPT (eval), prompt (B, P) int64, new_tokens -> (B, new_tokens) int64: greedy, one KVCache
# per block, the prompt's window prefilled once, one token a step; past the context, fresh caches
# prefilled with the last context // 2 tokens when the next token would not fit (gpt.window_start).


def _as_model(model):
    return objects.gpt_model(model) if isinstance(model, dict) else model


def _gpt_case(g, B, P, new_tokens, vocab=11, context=8, d_model=16, heads=2, layers=2):
    """A model whose greedy choices are clear (the two largest logits of every step at least 0.05 apart),
    a prompt and a number of tokens to generate."""
    config = gpt.GPTConfig(vocab, context=context, d_model=d_model, heads=heads, layers=layers)
    with torch.device("meta"):
        structure = gpt.GPT(config)
    while True:
        data = objects.gpt_data_of(config, _parameters(g, structure))
        prompt = torch.randint(vocab, (B, P), generator=g)
        model = objects.gpt_model(data)
        with torch.no_grad():
            _, logits = model.generate(prompt, new_tokens, temperature=0, cache=False)
        top = logits.topk(2, dim=-1).values
        if float((top[..., 0] - top[..., 1]).min()) > 0.05:
            return data, prompt, new_tokens


def _generate_cases(generator):
    # (B, P, new_tokens, sizes). First a prompt of 3 and 14 new tokens with context 8: the window jumps
    # twice and every mistake shows; then a prompt that fills the context, one longer than it, a single
    # new token, one layer with context 6 and several jumps, a generation that stays within the context.
    g = generator
    return [
        _gpt_case(g, 2, 3, 14),
        _gpt_case(g, 2, 8, 5),
        _gpt_case(g, 1, 12, 6),
        _gpt_case(g, 2, 4, 1),
        _gpt_case(g, 1, 2, 20, vocab=7, context=6, layers=1),
        _gpt_case(g, 2, 2, 5),
    ]


def _hidden_generate_cases(generator):
    """The grader's: sizes drawn from its generator; whatever the draws, one generation that runs past
    the context from a short prompt, and one that stays within it."""
    g, cases = generator, []
    for number in range(4):
        context = _draw(g, 5, 10)
        prompt = _draw(g, 1, 3) if number < 2 else _draw(g, 1, 2 * context)
        new = _draw(g, context + 2, 2 * context + 4) if number == 0 else \
            _draw(g, 2, context - prompt) if number == 1 else _draw(g, 1, 2 * context)
        heads = _draw(g, 1, 2)
        cases.append(_gpt_case(g, _draw(g, 1, 2), prompt, new, vocab=_draw(g, 5, 16), context=context,
                               d_model=8 * heads, heads=heads, layers=_draw(g, 1, 2)))
    return cases


@torch.no_grad()
def _generate(model, prompt, new_tokens, *, cache=True, keep=None, position_shift=0, jump="fresh",
              shared_cache=False, prefill_row=-1, with_prompt=False):
    """Greedy generation with one KVCache per block, written out, with one of the slips its keywords name."""
    model = _as_model(model)
    C = model.config.context
    keep = max(1, C // 2) if keep is None else keep
    layers = len(model.blocks)

    def fresh():
        return [KVCache()] * layers if shared_cache else [KVCache() for _ in range(layers)]

    tokens, chosen = prompt, []
    start = gpt.window_start(prompt.shape[1], C, keep)
    caches = fresh()
    step = model(tokens[:, start:], start=0, caches=caches)[:, prefill_row]  # the prefill: (B, V)
    for i in range(new_tokens):
        following = step.argmax(dim=-1)  # (B,)
        chosen.append(following)
        if i == new_tokens - 1:
            break
        tokens = torch.cat([tokens, following[:, None]], dim=1)
        n = tokens.shape[1]
        now = gpt.window_start(n, C, keep)
        if not cache:  # the whole window again, every step
            step = model(tokens[:, now:])[:, -1]
        elif now == start:  # one cached step: the new token at its place in the window
            step = model(following[:, None], start=n - 1 - start + position_shift, caches=caches)[:, -1]
        elif jump == "fresh":
            start, caches = now, fresh()
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
        elif jump == "last_only":  # fresh caches, but only the newest token fed again
            start, caches = n - 1, fresh()
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
        else:  # "stale": the window's text fed again into the caches that hold the old one
            start = now
            step = model(tokens[:, start:], start=0, caches=caches)[:, -1]
    generated = torch.stack(chosen, dim=1)  # (B, new_tokens)
    return torch.cat([prompt, generated], dim=1) if with_prompt else generated


def _generate_reference(model, prompt, new_tokens):
    return _generate(model, prompt, new_tokens)


register(
    Exercise(
        id="10.generate_cached",
        reference=_generate_reference,
        cases=_generate_cases,
        hidden=_hidden_generate_cases,
        forbidden=("course_utils.gpt.GPT.generate",),
        mistakes=(),
    )
)
