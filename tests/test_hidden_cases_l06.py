"""The grader's hidden cases of lesson 06 judge only what the exercises' texts fix: every right answer
(the independent set of test_learner_answers_l04_l06, and two decoder layers written apart from it)
passes the public and the hidden cases of every seed tried, not only the teacher's seed of the
other tests. (Seed 8231 once drew a decoder case with E = 2, where a layer norm's gradient is
rounding, and failed a float64 decoder from scratch and a loop over the batch: l06_transformer.py.)"""

import math

import pytest
import test_learner_answers_l04_l06 as answers
import torch
from learner_answers import PASSES
from prepared import evaluate  # the teacher's verdict, each Reference prepared once per seed (tests/prepared.py)

pytestmark = pytest.mark.slow

SEEDS = [8231, 24, *range(1, 9)]  # the two seeds that failed once, and 8 more (30 seeds passed at stop 36: 9 min)


def _decoder_from_scratch_float64(x, memory, tgt_key_padding_mask, memory_key_padding_mask, norm1_weight,
                                  self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
                                  cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight, num_heads):
    """Every sum in float64, its own layer norm and softmax; a row with no key gives 0, as the given
    sub-layers' does."""
    dtype = x.dtype
    x, memory = x.double(), memory.double()
    weights = [w.double() for w in (norm1_weight, self_in_proj_weight, self_out_proj_weight, norm2_weight,
                                    cross_in_proj_weight, cross_out_proj_weight, norm3_weight, linear1_weight,
                                    linear2_weight)]
    E, H = x.shape[-1], num_heads

    def norm(h, weight):
        centred = h - h.mean(-1, keepdim=True)
        return centred / torch.sqrt((centred ** 2).mean(-1, keepdim=True) + 1e-5) * weight

    def attention(h, context, in_proj, out_proj, padding, causal):
        B, L_q, L_k = h.shape[0], h.shape[1], context.shape[1]

        def heads(t):
            return t.reshape(B, -1, H, E // H).permute(0, 2, 1, 3)

        q, k, v = heads(h @ in_proj[:E].T), heads(context @ in_proj[E:2 * E].T), heads(context @ in_proj[2 * E:].T)
        keep = torch.ones(L_q, L_k, dtype=torch.bool)
        if causal:
            keep = torch.tril(keep)
        keep = keep.expand(B, 1, L_q, L_k)
        if padding is not None:
            keep = keep & ~padding[:, None, None, :]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(E // H)).masked_fill(~keep, -1e300)
        e = torch.exp(scores - scores.max(-1, keepdim=True).values) * keep
        total = e.sum(-1, keepdim=True)
        w = torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e))
        return (w @ v).permute(0, 2, 1, 3).reshape(B, L_q, E) @ out_proj.T

    x = norm(x + attention(x, x, weights[1], weights[2], tgt_key_padding_mask, True), weights[0])
    x = norm(x + attention(x, memory, weights[4], weights[5], memory_key_padding_mask, False), weights[3])
    return norm(x + torch.relu(x @ weights[7].T) @ weights[8].T, weights[6]).to(dtype)


def _decoder_looping_over_the_batch(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
    """One item at a time, each by the float64 layer above."""
    def item(mask, b):
        return None if mask is None else mask[b:b + 1]

    return torch.cat([_decoder_from_scratch_float64(x[b:b + 1], memory[b:b + 1], item(tgt_key_padding_mask, b),
                                                    item(memory_key_padding_mask, b), *weights_and_heads)
                      for b in range(x.shape[0])])


RIGHT = [(exercise, function) for exercise, function, expected in answers.ANSWERS
         if exercise.startswith("06.") and expected == PASSES]
#: (Seed 24's hidden case 13 failed both on a gradient 1.6e-5 from the float32 reference's own rounding: the
#: exercise's tolerance is 1e-4 since.)
RIGHT += [("06.post_norm_decoder", f) for f in (_decoder_from_scratch_float64, _decoder_looping_over_the_batch)]


def _pairs():
    return [tuple(p.values) if hasattr(p, "values") else p for p in RIGHT]


def test_every_exercise_of_lesson_06_has_several_right_answers_here():
    counts = {e: sum(1 for x, _ in _pairs() if x == e) for e in {x for x, _ in _pairs()}}
    assert set(counts) == {"06.sinusoidal_encoding", "06.offset_rotation", "06.post_norm_decoder"}, counts
    assert min(counts.values()) >= 3, counts


@pytest.mark.parametrize("exercise, function", RIGHT, ids=[f"{e}-{f.__name__}-{i}" for i, (e, f) in enumerate(_pairs())])
def test_a_right_answer_passes_the_hidden_cases_of_every_seed(exercise, function):
    failed = []
    for seed in SEEDS:
        verdict = evaluate(exercise, function, hidden_seed=seed)
        if verdict.status != "passed":
            failed.append((seed, verdict.code, verdict.message.splitlines()[0][:200]))
    assert not failed, failed
