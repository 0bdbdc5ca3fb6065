"""Lesson 10's exercises beyond the generic tests (tests/test_exercises.py): the references agree with
course_utils.gpt (Block.forward, lm_loss, sample_next, GPT.generate: values and gradients, every
parameter's too); other right ways to write each function pass, public and hidden cases; the
statistical judgement of a sampler holds with a wide margin; the package's answers are forbidden;
the objects a case stands for are built from plain data (course_utils/exercises/objects.py)."""

import functools
import math
import types

import pytest
import torch
import torch.nn.functional as F
from prepared import evaluate as evaluate_hidden
from prepared import prepared

from course_teacher.exercises import EXERCISES
from course_utils import gpt
from course_utils.attention import scaled_dot_product_attention
from course_utils.decoding import KVCache
from course_utils.exercises import CRASHED, FAILED, PASSED, evaluate, grading, objects
from course_utils.masks import causal_mask


def _mistake(exercise, code):
    """The function of `exercise`'s known mistake `code`, from the registry (the module's names are its own)."""
    return next(m.fn for m in EXERCISES[exercise].mistakes if m.code == code)


BLOCK_REFERENCE = EXERCISES["10.causal_block"].reference
LOSS_REFERENCE = EXERCISES["10.lm_loss"].reference
SAMPLE_REFERENCE = EXERCISES["10.sample_next"].reference
GENERATE_REFERENCE = EXERCISES["10.generate_cached"].reference
SAMPLE_KTH_DROPPED = _mistake("10.sample_next", "KTH_DROPPED")

IDS = ("10.causal_block", "10.lm_loss", "10.sample_next", "10.generate_cached")
SEEDS = (12345, 0, 7)  # a teacher's seed, the public seed, another


@functools.cache  # (drawing a generation's cases runs the model: once per test process; the tests only read them)
def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


@functools.cache
def _hidden(exercise, seed):
    return EXERCISES[exercise].hidden(torch.Generator().manual_seed(seed))


def _passes_everywhere(exercise, function):
    assert evaluate(exercise, function).status == PASSED, evaluate(exercise, function).message
    for seed in SEEDS[:2]:
        verdict = evaluate_hidden(exercise, function, hidden_seed=seed)
        assert verdict.status == PASSED, (seed, verdict.message)


# ----------------------------------------------------------------------------- the objects a case stands for


def test_a_block_built_from_its_data_is_the_block_and_its_gradients_reach_the_data():
    block = gpt.make_gpt(5, seed=3, d_model=12, heads=3, layers=1, context=8).blocks[0]
    data = objects.block_data(block).clone().requires_grad_()
    built = objects.block(data, 12)
    assert isinstance(built, gpt.Block) and built.attention.heads == 3 and objects.block_size(data, 12) == (3, 48)
    x = torch.randn(2, 6, 12)
    ours, theirs = built(x, torch.arange(6))[0], block(x, torch.arange(6))[0]
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn_like(ours)
    (grad,) = torch.autograd.grad((ours * weights).sum(), data)
    expected = torch.autograd.grad((theirs * weights).sum(), list(block.parameters()))
    torch.testing.assert_close(grad.reshape(-1), torch.cat([g.reshape(-1) for g in expected]))


def test_data_that_makes_no_block_or_model_is_refused_naming_the_sizes():
    with pytest.raises(ValueError, match=r"\(2, 7\) parameters make no block of width 4"):
        objects.block(torch.zeros(2, 7), 4)
    data = objects.gpt_data(gpt.make_gpt(5, d_model=8, heads=2, layers=1, context=4))
    data["parameters"] = data["parameters"][:-1]
    with pytest.raises(ValueError, match="numbers for a module of"):
        objects.gpt_model(data)


def test_a_model_built_from_its_data_generates_as_the_model_and_keeps_its_tied_matrix():
    model = gpt.make_gpt(9, seed=1, d_model=16, heads=2, layers=2, context=8)
    built = objects.gpt_model(objects.gpt_data(model))
    assert built.readout.weight is built.embed.weight and not built.training
    prompt = torch.randint(9, (2, 3), generator=torch.Generator().manual_seed(0))
    assert torch.equal(built.generate(prompt, 20, temperature=0)[0], model.generate(prompt, 20, temperature=0)[0])


def _fed(model, call):
    """How many positions per row `call()` feeds through `model`."""
    fed = [0]
    handle = model.embed.register_forward_pre_hook(lambda module, inputs: fed.__setitem__(0, fed[0] + inputs[0].numel()))
    try:
        call()
    finally:
        handle.remove()
    return fed[0]


@pytest.mark.parametrize("prompt_length, new_tokens, context", [(3, 14, 8), (8, 5, 8), (12, 6, 8), (4, 1, 8),
                                                                (2, 20, 6), (2, 5, 8), (1, 30, 5), (9, 9, 3)])
def test_the_tokens_the_cache_rule_needs_are_what_the_packages_cached_generation_feeds(prompt_length, new_tokens,
                                                                                       context):
    model = gpt.make_gpt(7, seed=2, d_model=8, heads=2, layers=1, context=context).eval()
    prompt = torch.randint(7, (2, prompt_length), generator=torch.Generator().manual_seed(1))
    fed = _fed(model, lambda: model.generate(prompt, new_tokens, temperature=0))
    assert fed / 2 == objects.fed_needed(prompt_length, new_tokens, context)
    recomputed = _fed(model, lambda: model.generate(prompt, new_tokens, temperature=0, cache=False))
    assert recomputed / 2 > objects.fed_needed(prompt_length, new_tokens, context) or new_tokens == 1


# ----------------------------------------------------------------------------- 10.causal_block


@pytest.mark.parametrize("number", range(6))
def test_the_block_reference_is_the_packages_block_values_and_gradients_of_x_and_every_parameter(number):
    x, data = _cases("10.causal_block")[number]
    x, data = x.clone().requires_grad_(), data.clone().requires_grad_()
    block = objects.block(data, x.shape[-1])
    ours = BLOCK_REFERENCE(x, block)
    theirs = block(x, torch.arange(x.shape[1]))[0]
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn_like(ours)
    for a, b in zip(torch.autograd.grad((ours * weights).sum(), (x, data)),
                    torch.autograd.grad((theirs * weights).sum(), (x, data))):
        torch.testing.assert_close(a, b)


def _block_per_head(x, block, second_norm=None):
    """Another right way: one head at a time, with its slices of the projections' weights."""
    _, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads
    d = E // H
    h = block.norm1(x)
    q, k, v = m.q_proj(h), m.k_proj(h), m.v_proj(h)  # (B, L, E)
    hidden = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    outputs = []
    for head in range(H):
        part = slice(head * d, (head + 1) * d)
        scores = q[..., part] @ k[..., part].transpose(-2, -1) / math.sqrt(d)  # (B, L, L)
        weights = torch.exp(scores.masked_fill(hidden, float("-inf")) - scores.max(dim=-1, keepdim=True).values)
        outputs.append((weights / weights.sum(dim=-1, keepdim=True)) @ v[..., part])
    x = x + m.out_proj(torch.cat(outputs, dim=-1))
    return x + block.feed_forward((second_norm or block.norm2)(x))


def _block_lesson_01(x, block):
    """Another right way: lesson 01's attention with lesson 02's causal keep mask."""
    B, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads

    def split(t):
        return t.reshape(B, L, H, E // H).permute(0, 2, 1, 3)

    h = block.norm1(x)
    out, _ = scaled_dot_product_attention(split(m.q_proj(h)), split(m.k_proj(h)), split(m.v_proj(h)),
                                          keep_mask=causal_mask(L))
    x = x + m.out_proj(out.permute(0, 2, 1, 3).reshape(B, L, E))
    return x + block.feed_forward(block.norm2(x))


def _block_by_einsum(x, block):
    """Another right way: the weights read off the layers, the heads as an axis of einsum, functional norms."""
    B, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads
    d = E // H
    n1, n2 = block.norm1, block.norm2
    h = F.layer_norm(x, (E,), n1.weight, n1.bias, n1.eps)
    q, k, v = (torch.einsum("ble,fe->blf", h, w.weight).reshape(B, L, H, d) for w in (m.q_proj, m.k_proj, m.v_proj))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * d**-0.5
    scores = scores + torch.full((L, L), float("-inf")).triu(1)
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(dim=-1), v).reshape(B, L, E)
    x = x + out @ m.out_proj.weight.T
    return x + block.feed_forward(F.layer_norm(x, (E,), n2.weight, n2.bias, n2.eps))


@pytest.mark.parametrize("function", [_block_per_head, _block_lesson_01, _block_by_einsum], ids=lambda f: f.__name__)
def test_other_right_blocks_pass_public_and_hidden(function):
    _passes_everywhere("10.causal_block", function)


def test_a_block_whose_parameter_is_cut_off_from_the_graph_fails_on_its_gradient():
    def detached_norm(x, block):
        n = block.norm2
        return _block_per_head(x, block, lambda h: F.layer_norm(h, n.normalized_shape, n.weight.detach(), n.bias, n.eps))

    verdict = evaluate("10.causal_block", detached_norm)
    assert verdict.status == FAILED and verdict.code == "GRADIENT" and "'block'" in verdict.message, verdict.message


def test_a_block_answer_that_changes_a_weight_in_place_fails_naming_block():
    def changes_a_weight(x, block):
        result = _block_per_head(x, block)
        with torch.no_grad():
            block.norm1.weight.mul_(2)
        return result

    verdict = evaluate("10.causal_block", changes_a_weight)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED" and "`block`" in verdict.message


def _block_calls_the_block(x, block):
    return block(x, torch.arange(x.shape[1]))[0]


def _block_calls_its_attention(x, block):
    attended, _ = block.attention(block.norm1(x), torch.arange(x.shape[1]))
    x = x + attended
    return x + block.feed_forward(block.norm2(x))


def _block_calls_torchs_attention(x, block):
    B, L, E = x.shape
    m, H = block.attention.mha, block.attention.heads
    h = block.norm1(x)
    q, k, v = (p(h).view(B, L, H, E // H).transpose(1, 2) for p in (m.q_proj, m.k_proj, m.v_proj))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, L, E)
    x = x + m.out_proj(out)
    return x + block.feed_forward(block.norm2(x))


# A copy of Block.forward under another name, made before any check runs (a call may make no function).
_FORWARD_COPY = types.FunctionType(gpt.Block.forward.__code__, gpt.Block.forward.__globals__, "renamed",
                                   gpt.Block.forward.__defaults__)


def _block_calls_a_copy_of_the_forward(x, block):
    return _FORWARD_COPY(block, x, torch.arange(x.shape[1]))[0]


@pytest.mark.parametrize("function", [_block_calls_the_block, _block_calls_its_attention,
                                      _block_calls_torchs_attention, _block_calls_a_copy_of_the_forward],
                         ids=lambda f: f.__name__)
def test_the_packages_block_and_torchs_attention_are_refused(function):
    verdict = evaluate("10.causal_block", function)
    assert verdict.status == FAILED and verdict.code in ("FORBIDDEN", "SOLVER", "OPERATION"), verdict.message


def test_the_block_cases_hold_one_head_one_position_and_float64():
    cases = _cases("10.causal_block")
    heads = {data.shape[0] for _, data in cases}
    assert 1 in heads and len(heads) >= 4
    assert any(x.shape[1] == 1 for x, _ in cases) and any(x.dtype == torch.float64 for x, _ in cases)
    assert all(x.shape[-1] <= 32 and x.shape[1] <= 12 for x, _ in cases)
    for seed in SEEDS:
        hidden = _hidden("10.causal_block", seed)
        assert all(x.shape[-1] <= 32 and x.shape[1] <= 12 for x, _ in hidden)
        assert any(data.shape[0] >= 2 and x.shape[1] >= 3 for x, data in hidden)


# ----------------------------------------------------------------------------- 10.lm_loss


@pytest.mark.parametrize("number", range(6))
def test_the_loss_reference_is_the_mean_cross_entropy_of_the_next_token_over_the_real_targets(number):
    logits, tokens, pad_id = _cases("10.lm_loss")[number]
    logits = logits.clone().requires_grad_()
    ours = LOSS_REFERENCE(logits, tokens, pad_id)
    targets = tokens[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    each = -logits[:, :-1].log_softmax(-1).gather(-1, targets[..., None])[..., 0]  # (B, T − 1)
    expected = each[keep].mean()
    torch.testing.assert_close(ours, expected)
    if pad_id is None:
        torch.testing.assert_close(ours, gpt.lm_loss(logits[:, :-1], targets))
    torch.testing.assert_close(torch.autograd.grad(ours, logits)[0], torch.autograd.grad(expected, logits)[0])


def _loss_by_gather(logits, tokens, pad_id=None):
    """Another right way: log_softmax, gather, a mask, a sum over a count."""
    log_p = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = tokens[:, 1:]
    picked = log_p.gather(2, targets.unsqueeze(2)).squeeze(2)
    keep = targets.ne(pad_id) if pad_id is not None else torch.ones_like(targets, dtype=torch.bool)
    return -(picked * keep).sum() / keep.sum()


def _loss_per_position(logits, tokens, pad_id=None):
    """Another right way: unreduced cross-entropy, then the mean of the kept entries."""
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, T − 1)
    if pad_id is None:
        return losses.mean()
    return losses[tokens[:, 1:] != pad_id].mean()


@pytest.mark.parametrize("function", [_loss_by_gather, _loss_per_position], ids=lambda f: f.__name__)
def test_other_right_losses_pass_public_and_hidden(function):
    _passes_everywhere("10.lm_loss", function)


def test_the_loss_cases_hold_uneven_padding_a_pad_id_not_zero_and_no_padding():
    cases = _cases("10.lm_loss")
    assert any(pad is None for _, _, pad in cases) and any(pad not in (None, 0) for _, _, pad in cases)
    uneven = [tokens for _, tokens, pad in cases
              if pad is not None and len(set((tokens[:, 1:] == pad).sum(dim=1).tolist())) > 1]
    assert uneven
    for _, tokens, pad in cases:  # every case has a real target (the mean is defined)
        assert pad is None or bool((tokens[:, 1:] != pad).any())
    for seed in SEEDS:
        for _, tokens, pad in _hidden("10.lm_loss", seed):
            assert pad is None or bool((tokens[:, 1:] != pad).any())


# ----------------------------------------------------------------------------- 10.sample_next


def test_the_sampling_reference_draws_what_the_package_draws_from_the_same_generator_state():
    for logits, temperature, top_k, seed in _cases("10.sample_next"):
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        again = None if seed is None else torch.Generator().manual_seed(seed)
        assert torch.equal(SAMPLE_REFERENCE(logits, temperature, top_k, generator),
                           gpt.sample_next(logits, temperature, top_k, again))


def _sample_by_cumulative_sums(logits, temperature=1.0, top_k=None, generator=None):
    """Another right way: inverse transform sampling, one uniform number per row."""
    if top_k is not None:
        kth = torch.sort(logits, dim=-1, descending=True).values[:, top_k - 1:top_k]
        logits = torch.where(logits >= kth, logits, torch.full_like(logits, -math.inf))
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    p = torch.exp(logits / temperature - (logits / temperature).max(dim=-1, keepdim=True).values)
    cumulative = torch.cumsum(p / p.sum(dim=-1, keepdim=True), dim=-1)
    u = torch.rand(logits.shape[0], 1, generator=generator, dtype=cumulative.dtype)
    drawn = (cumulative < u).sum(dim=-1)
    return drawn.clamp(max=logits.shape[1] - 1)  # (a u above the last sum's rounding)


def _sample_by_gumbel(logits, temperature=1.0, top_k=None, generator=None):
    """Another right way: the Gumbel-max trick, argmax of logits / T plus Gumbel noise."""
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[:, [-1]]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if temperature == 0:
        return logits.argmax(-1)
    u = torch.rand(logits.shape, generator=generator).clamp_min(1e-12)
    return (logits / temperature - torch.log(-torch.log(u))).argmax(-1)


def _sample_by_multinomial_of_exponentials(logits, temperature=1.0, top_k=None, generator=None):
    """Another right way: unnormalised exponentials (multinomial normalises), top-k by sorting indices."""
    if top_k is not None:
        values, _ = logits.sort(dim=-1, descending=True)
        logits = logits.masked_fill(logits < values[:, top_k - 1].unsqueeze(-1), -float("inf"))
    if temperature == 0:
        return logits.argmax(dim=1)
    weights = torch.exp((logits - logits.max(dim=1, keepdim=True).values) / temperature)
    return torch.multinomial(weights, num_samples=1, generator=generator).view(-1)


RIGHT_SAMPLERS = [_sample_by_cumulative_sums, _sample_by_gumbel, _sample_by_multinomial_of_exponentials]


@pytest.mark.parametrize("function", RIGHT_SAMPLERS, ids=lambda f: f.__name__)
def test_other_right_samplers_pass_public_and_hidden(function):
    _passes_everywhere("10.sample_next", function)


def _worst_deviation(function, cases):
    """The largest |frequency − probability| of any character, in standard deviations at p = 1/2 (the
    unit objects.MARGIN counts in), over the cases of temperature > 0 and several generator seeds."""
    worst = 0.0
    for logits, temperature, top_k, seed in cases:
        if temperature == 0:
            continue
        rows, group = torch.unique(logits, dim=0, return_inverse=True)
        expected = objects.probabilities(rows, temperature, top_k)
        for offset in range(3):
            draws = function(logits.clone(), temperature, top_k, torch.Generator().manual_seed(seed + 1000 * offset))
            for g in range(rows.shape[0]):
                mine = draws[group == g]
                seen = torch.bincount(mine, minlength=logits.shape[1]).double() / mine.numel()
                worst = max(worst, float((seen - expected[g]).abs().max()) / (0.5 / math.sqrt(mine.numel())))
    return worst


@pytest.mark.slow
def test_right_samplers_stay_far_inside_the_margin_and_distribution_mistakes_far_outside():
    """Over the public cases and three seeds' hidden cases, each drawn with three generator seeds: no right
    sampler comes within 1.5 standard deviations of objects.MARGIN, and each mistake the check names by
    its distribution is at least twice the margin away on some case of every set."""
    sets = [_cases("10.sample_next")] + [_hidden("10.sample_next", seed) for seed in SEEDS]
    for function in RIGHT_SAMPLERS + [SAMPLE_REFERENCE]:
        for cases in sets:
            assert _worst_deviation(function, cases) < objects.MARGIN - 1.5, function.__name__
    for mistake in (_mistake("10.sample_next", "TEMPERATURE_MULTIPLIED"), _mistake("10.sample_next", "TIES_DROPPED"),
                    SAMPLE_KTH_DROPPED,
                    _mistake("10.sample_next", "ALWAYS_GREEDY")):
        for cases in sets:
            usable = [case for case in cases if not (mistake is SAMPLE_KTH_DROPPED and case[2] == 1)]
            assert _worst_deviation(mistake, usable) > 2 * objects.MARGIN, mistake.__name__


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_right_samplers_pass_the_hidden_cases_of_ten_seeds(seed):
    for function in RIGHT_SAMPLERS:
        verdict = evaluate_hidden("10.sample_next", function, hidden_seed=1000 + seed)
        assert verdict.status == PASSED, (function.__name__, verdict.message)


def test_a_right_sampler_on_the_global_generator_is_named():
    def on_the_global_generator(logits, temperature=1.0, top_k=None, generator=None):
        return _sample_by_cumulative_sums(logits, temperature, top_k, None)

    verdict = evaluate("10.sample_next", on_the_global_generator)
    assert verdict.status == FAILED and verdict.code == "GLOBAL_GENERATOR", verdict.message


def test_a_sampler_that_ignores_its_generator_state_is_caught():
    def seeded_once(logits, temperature=1.0, top_k=None, generator=None):
        return _sample_by_gumbel(logits, temperature, top_k, torch.Generator().manual_seed(123))

    assert evaluate("10.sample_next", seeded_once).status == FAILED


def test_a_sampler_that_is_not_reproducible_is_caught():
    count = [0]

    def drifting(logits, temperature=1.0, top_k=None, generator=None):
        count[0] += 1
        if generator is not None:
            torch.rand(count[0], generator=generator)  # another state at every call
        return _sample_by_gumbel(logits, temperature, top_k, generator)

    verdict = evaluate("10.sample_next", drifting)
    assert verdict.status == FAILED, verdict.message


def test_the_packages_sampler_is_forbidden():
    verdict = evaluate("10.sample_next", lambda logits, temperature=1.0, top_k=None, generator=None:
                       gpt.sample_next(logits, temperature, top_k, generator))
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_sampling_cases_hold_a_tie_at_the_kth_both_sides_of_temperature_1_two_rows_and_temperature_0():
    for cases in [_cases("10.sample_next")] + [_hidden("10.sample_next", seed) for seed in SEEDS]:
        temperatures = [t for _, t, _, _ in cases]
        assert 0.0 in temperatures and any(0 < t < 1 for t in temperatures) and any(t > 1 for t in temperatures)
        assert any(torch.unique(logits, dim=0).shape[0] == 2 and t > 0 for logits, t, _, _ in cases)
        tied = [(logits, k) for logits, t, k, _ in cases if k is not None and t > 0
                and int((logits[0] == logits[0].topk(k).values[-1]).sum()) > 1]
        assert tied
        for logits, t, k, seed in cases:
            if t > 0:
                assert seed is not None
                assert torch.unique(logits, dim=0, return_counts=True)[1].min() >= 1000


# ----------------------------------------------------------------------------- 10.generate_cached


@pytest.mark.parametrize("which", ["public", 12345, 0])
def test_the_generation_reference_is_the_packages_recomputation_and_feeds_what_the_rule_needs(which):
    cases = _cases("10.generate_cached") if which == "public" else _hidden("10.generate_cached", which)
    for data, prompt, new_tokens in cases:
        model = objects.gpt_model(data)
        ours = _fed(model, lambda model=model, prompt=prompt, new=new_tokens: GENERATE_REFERENCE(model, prompt, new))
        assert ours / prompt.shape[0] == objects.fed_needed(prompt.shape[1], new_tokens, int(data["context"]))
        expected = model.generate(prompt, new_tokens, temperature=0, cache=False)[0]
        assert torch.equal(GENERATE_REFERENCE(model, prompt, new_tokens), expected)


def _generate_by_caches_length(model, prompt, new_tokens):
    """Another right way: the caches' own count gives each new token's position; row by row."""
    C = model.config.context
    rows = []
    for row in prompt:
        text = row[None, :]
        start = gpt.window_start(text.shape[1], C, C // 2)
        caches = [KVCache() for _ in model.blocks]
        with torch.no_grad():
            logits = model(text[:, start:], 0, caches)[:, -1]
        out = []
        while len(out) < new_tokens:
            token = torch.argmax(logits, dim=-1, keepdim=True)  # (1, 1)
            out.append(token)
            text = torch.cat((text, token), dim=1)
            if len(out) == new_tokens:
                break
            moved = gpt.window_start(text.shape[1], C, C // 2)
            with torch.no_grad():
                if moved != start:
                    start, caches = moved, [KVCache() for _ in model.blocks]
                    logits = model(text[:, start:], 0, caches)[:, -1]
                else:
                    logits = model(token, caches[0].seen, caches)[:, -1]
        rows.append(torch.cat(out, dim=1))
    return torch.cat(rows, dim=0)


@pytest.mark.slow
def test_another_right_generation_passes_public_and_hidden():
    _passes_everywhere("10.generate_cached", _generate_by_caches_length)


def test_recomputing_every_step_in_other_words_is_named_no_cache():
    def from_scratch(model, prompt, new_tokens):  # the right tokens: the window recomputed, caches unused
        text = prompt
        for _ in range(new_tokens):
            start = gpt.window_start(text.shape[1], model.config.context, model.config.context // 2)
            with torch.no_grad():
                text = torch.cat([text, model(text[:, start:])[:, -1].argmax(-1, keepdim=True)], dim=1)
        return text[:, prompt.shape[1]:]

    verdict = evaluate("10.generate_cached", from_scratch)
    assert verdict.status == FAILED and verdict.code == "NO_CACHE", verdict.message
    assert "positions in all" in verdict.message or "NO_CACHE" in verdict.message


def test_the_packages_generation_is_forbidden_cached_or_not():
    for cache in (True, False):
        def packaged(model, prompt, new_tokens, cache=cache):
            return model.generate(prompt, new_tokens, temperature=0, cache=cache)[0]

        verdict = evaluate("10.generate_cached", packaged)
        assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_generation_cases_run_past_the_context_and_stay_within_it():
    for cases in [_cases("10.generate_cached")] + [_hidden("10.generate_cached", seed) for seed in SEEDS]:
        lengths = [(prompt.shape[1], new, int(data["context"])) for data, prompt, new in cases]
        assert any(p + new > c + 1 and p < c for p, new, c in lengths), lengths
        assert any(1 < new and p + new <= c for p, new, c in lengths), lengths


# ----------------------------------------------------------------------------- every exercise


@pytest.mark.parametrize("exercise", [pytest.param(e, marks=[pytest.mark.slow] if e == "10.generate_cached" else [])
                                      for e in IDS])
def test_the_mistakes_are_told_apart_as_the_check_sees_them(exercise):
    """tests/test_exercises.py tells mistakes apart by calling them on a case's data directly; lesson 10's
    check calls them on objects and judges some by what the calls did: here, through the check's own path."""
    reference = prepared(exercise)
    for made in EXERCISES[exercise].mistakes:
        outcomes = grading.collect(reference.calls, made.fn)
        verdict = grading.judge(reference, outcomes)
        assert verdict.code == made.code, (made.code, verdict.message)


@pytest.mark.parametrize("exercise", IDS)
def test_a_function_with_the_wrong_arguments_or_not_a_function_gets_a_verdict_naming_it(exercise):
    verdict = evaluate(exercise, lambda only_one: only_one)
    assert verdict.status == CRASHED and "TypeError" in verdict.message, verdict.message
    verdict = evaluate(exercise, 42)
    assert verdict.status == FAILED and verdict.code == "NOT_CALLABLE" and "int" in verdict.message
    with pytest.raises(ValueError, match="10.nope"):
        evaluate("10.nope", print)


@pytest.mark.parametrize("exercise", IDS)
def test_the_stub_reads_as_not_attempted(exercise):
    def stub(*args):
        raise NotImplementedError("exercise")

    assert evaluate(exercise, stub).status == "not attempted"
