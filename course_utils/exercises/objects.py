"""Arguments that are objects: lesson 10's exercises take a model, a block or a random generator, and
a case crosses to a grader's kernel as plain data (tensors, numbers, lists, dicts: wire.py).

For each exercise listed in ``BUILT`` a case holds the object's data, and the check builds the object
right before each call of the learner's function (``call``): its tensors are views of the case's
data, so an in-place edit of a weight shows as a changed argument, and a gradient reaches the data
(``10.causal_block``: the gradient with respect to ``block`` is every parameter's, flattened).

Some exercises are judged by what the function did, not by its value alone (``finish``, run by the
judge in its own process on what came back from the call):

- ``10.sample_next``: at temperature > 0 the draws are random, so the check calls the function three
  times (the same generator state twice, then another) and turns what it saw into a code the whole
  case shares: 0 when every draw is one the rule allows, their frequencies match the softmax within
  ``MARGIN`` standard deviations, the same state gave the same draws, another state other draws
  (where more than one character may be drawn) and torch's global generator was left alone; else
  the first property that failed (``CODES``). At temperature 0 the draws are compared as they are.
- ``10.generate_cached``: the model counts the positions fed through it (its embedding sees every
  token); more than the cache's rule needs (``fed_needed``) is reported as ``FedTooManyTokens``.

Nothing here is shown to a learner as an answer; the distribution a sample is compared with is what
the exercise's text fixes (softmax(logits / temperature) over the top-k logits, ties kept).
"""

import math

import torch

from .. import gpt
from ..i18n import message

#: The exercises whose cases hold an object's data, and the positions of those arguments.
BUILT = {"10.causal_block": (1,), "10.sample_next": (3,), "10.generate_cached": (0,)}
#: The exercises the judge reads through ``finish``.
JUDGED = ("10.sample_next", "10.generate_cached")

#: How many standard deviations (of a frequency, at its largest, p = 1/2) a character's frequency may be
#: from its probability before a sample reads as drawn from another distribution.
MARGIN = 5.0

#: What a sampler did wrong at temperature > 0, by the first property that failed (0: nothing).
CODES = {"outside": 1, "distribution": 2, "not_reproducible": 3, "global_generator": 4, "ignores_generator": 5}

# Taken at import: a learner's code that replaces them changes nothing here.
_get_rng_state, _set_rng_state, _equal = torch.get_rng_state, torch.set_rng_state, torch.equal
_Generator, _full = torch.Generator, torch.full
_bincount, _unique, _softmax = torch.bincount, torch.unique, torch.softmax


class FedTooManyTokens(Exception):
    """A generation fed more positions through the model than the KV cache's rule needs."""


# ----------------------------------------------------------------------------- building the objects

def block_size(parameters, d_model):
    """(heads, d_ff) of the ``gpt.Block`` whose parameters `parameters` (heads, n / heads) hold, for
    width `d_model` = E: n = 4E² + 5E + 2E·d_ff + d_ff (two LayerNorms, four bias-free projections,
    the MLP's two layers with biases)."""
    E, n = d_model, parameters.numel()
    d_ff, rest = divmod(n - 4 * E * E - 5 * E, 2 * E + 1)
    if rest or d_ff < 1:
        raise ValueError(f"{tuple(parameters.shape)} parameters make no block of width {E}")
    return parameters.shape[0], d_ff


def block_data(block):
    """The case data of a ``gpt.Block`` (learned positions): its parameters flattened in the order
    ``named_parameters`` gives them, shaped (heads, n / heads)."""
    flat = torch.cat([p.detach().reshape(-1) for p in block.parameters()])
    return flat.reshape(block.attention.heads, -1)


def block(parameters, d_model):
    """The ``gpt.Block`` whose parameters are views of `parameters` (``block_data``'s layout)."""
    heads, d_ff = block_size(parameters, d_model)
    # the structure only (its tensors are the case's), made where the data is, the global random state kept
    with torch.random.fork_rng(devices=[]), torch.device(parameters.device):
        made = gpt.Block(d_model, heads, d_ff)
    _attach(made, parameters.reshape(-1))
    return made


def gpt_data(model):
    """The case data of a ``gpt.GPT`` (learned positions): its sizes and its parameters flattened."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])  # the tied matrix once
    return gpt_data_of(model.config, flat)


def gpt_data_of(c, flat):
    """The case data of the ``gpt.GPT`` of config `c` whose parameters, flattened, are `flat`."""
    return {"vocab": c.vocab, "context": c.context, "d_model": c.d_model, "heads": c.heads, "layers": c.layers,
            "d_ff": c.d_ff, "parameters": flat}


def gpt_model(data):
    """The ``gpt.GPT`` in eval mode that `data` (``gpt_data``'s) describes, its tensors views of the data's."""
    sizes = {key: int(data[key]) for key in ("context", "d_model", "heads", "layers", "d_ff")}
    with torch.random.fork_rng(devices=[]), torch.device(data["parameters"].device):
        made = gpt.GPT(gpt.GPTConfig(int(data["vocab"]), **sizes))
    _attach(made, data["parameters"])
    return made.eval()


def _attach(module, flat):
    """Replace every parameter of `module` by a view of the 1-D tensor `flat`, in ``named_parameters``
    order (a tied parameter, listed once, stays tied): plain tensors on the graph of `flat`."""
    parameters = list(module.parameters())
    total = sum(p.numel() for p in parameters)
    if flat.dim() != 1 or flat.numel() != total:
        raise ValueError(f"{flat.numel()} numbers for a module of {total} parameters")
    views, offset = {}, 0
    for parameter in parameters:
        views[id(parameter)] = flat[offset: offset + parameter.numel()].view(parameter.shape)
        offset += parameter.numel()
    for owner in module.modules():
        for name, parameter in list(owner.named_parameters(recurse=False)):
            delattr(owner, name)
            setattr(owner, name, views[id(parameter)])


# ----------------------------------------------------------------------------- calling and judging

def call(exercise, run, function, args):
    """What the check keeps of `function` on a case's arguments `args` (fresh copies of its data):
    ``run(function, *arguments)`` (the sandbox's call, or a plain one) on the objects the data
    stands for, and, for the exercises judged by behaviour, what the calls showed."""
    if exercise == "10.causal_block":
        x, parameters = args
        return run(function, x, block(parameters, x.shape[-1]))
    if exercise == "10.generate_cached":
        data, prompt, new_tokens = args
        model = gpt_model(data)
        fed = [0]

        def count(module, inputs):  # every token the model reads goes through its embedding
            tokens = inputs[0]
            if isinstance(tokens, torch.Tensor):
                fed[0] += tokens.numel()

        model.embed.register_forward_pre_hook(count)
        batch = prompt.shape[0] if isinstance(prompt, torch.Tensor) and prompt.dim() else 1
        return run(function, model, prompt, new_tokens), fed[0] / max(batch, 1)
    if exercise == "10.sample_next":
        logits, temperature, top_k, seed = args
        if temperature == 0:  # the argmax: one call, judged by its value
            return run(_watching, function, logits, temperature, top_k, _generator(seed))
        draws = [run(_watching, function, copy, temperature, top_k, _generator(s))
                 for copy, s in ((logits, seed), (logits.clone(), seed), (logits.clone(), seed + 1))]
        return tuple(d[0] for d in draws) + (any(d[1] for d in draws),)
    return run(function, *args)


def _generator(seed):
    return None if seed is None else _Generator().manual_seed(int(seed))


def _watching(function, *args):
    """(function(*args), whether it changed torch's global random state), the state put back."""
    before = _get_rng_state()
    result = function(*args)
    changed = not _equal(_get_rng_state(), before)
    _set_rng_state(before)
    return result, changed


def finish(exercise, args, kept):
    """What the judge compares with the expected result, from what ``call`` kept on case `args` (the
    case's data). Raises FedTooManyTokens for a generation that fed more than it needed."""
    if exercise == "10.generate_cached":
        tokens, fed = kept
        data, prompt, new_tokens = args
        needed = fed_needed(prompt.shape[1], new_tokens, int(data["context"]))
        if fed > needed:
            raise FedTooManyTokens(message("ex10.fed_too_many", fed=_count(fed), needed=needed))
        return tokens
    if exercise == "10.sample_next":
        logits, temperature, top_k, _ = args
        if temperature == 0:
            return kept[0]
        return _sampling_code(logits, temperature, top_k, kept)
    return kept


def _count(value):
    return int(value) if float(value).is_integer() else round(float(value), 2)


def fed_needed(prompt_length, new_tokens, context):
    """How many positions greedy generation with the KV cache feeds through the model: the window's
    text once, then one token a step, and the window's text again each time it jumps
    (``gpt.window_start`` with keep = context // 2, as ``GPT.generate``)."""
    keep = max(1, context // 2)
    length = prompt_length
    start = gpt.window_start(length, context, keep)
    fed = length - start
    for _ in range(new_tokens - 1):
        length += 1
        now = gpt.window_start(length, context, keep)
        fed += 1 if now == start else length - now
        start = now
    return fed


def allowed(logits, top_k):
    """(B, V) bool: the characters the rule may draw (the top_k largest logits, ties with the k-th kept)."""
    if top_k is None:
        return torch.ones_like(logits, dtype=torch.bool)
    kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
    return logits >= kth


def probabilities(logits, temperature, top_k):
    """(B, V): softmax(logits / temperature) over the characters ``allowed`` keeps."""
    scaled = (logits.double() / temperature).masked_fill(~allowed(logits, top_k), -math.inf)
    return _softmax(scaled, dim=-1)


def _is_draws(value, logits):
    return type(value) is torch.Tensor and value.dtype == torch.int64 and tuple(value.shape) == logits.shape[:1] \
        and value.device == logits.device


def _sampling_code(logits, temperature, top_k, kept):
    """The case's code (``CODES``) for three calls' draws and whether the global generator moved,
    repeated to the draws' shape (B,) int64 (so a result of another kind is judged as itself)."""
    first, again, other, changed = kept
    B, V = logits.shape
    for draws in (first, again, other):
        if not _is_draws(draws, logits):
            return draws
    may = allowed(logits, top_k)
    code = 0
    for draws in (first, again, other):
        if bool(((draws < 0) | (draws >= V)).any()) or not bool(may.gather(1, draws.clamp(0, V - 1)[:, None]).all()):
            code = CODES["outside"]
    if not code and not _matches(logits, temperature, top_k, first):
        code = CODES["distribution"]
    if not code and not _equal(first, again):
        code = CODES["not_reproducible"]
    if not code and changed:
        code = CODES["global_generator"]
    if not code and int(may.sum(dim=-1).max()) > 1 and _equal(first, other):
        code = CODES["ignores_generator"]
    return _full((), code, dtype=torch.int64, device=logits.device).expand(B)


def _matches(logits, temperature, top_k, draws):
    """Whether, for each group of equal rows of `logits`, the draws' frequencies are within MARGIN
    standard deviations (at p = 1/2, the largest) of the rule's probabilities."""
    rows, group = _unique(logits, dim=0, return_inverse=True)
    expected = probabilities(rows, temperature, top_k)  # (G, V)
    for g in range(rows.shape[0]):
        mine = draws[group == g]
        n = mine.numel()
        seen = _bincount(mine, minlength=logits.shape[1]).double() / n
        if float((seen - expected[g]).abs().max()) > MARGIN * 0.5 / math.sqrt(n):
            return False
    return True
