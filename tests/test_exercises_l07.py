"""Lesson 07's exercises beyond the generic tests (tests/test_exercises.py): the references agree
with course_utils.decoding and with PyTorch's F.scaled_dot_product_attention(..., enable_gqa=True)
(values and gradients); other correct ways to write each function pass; the package's answers are
forbidden; the cases are plain data and hold what the module docstring promises."""


import pytest
import torch
import torch.nn.functional as F

from course_teacher.exercises import EXERCISES
from course_utils import decoding
from course_utils.exercises import FAILED, PASSED, evaluate

# the references (and hidden cases) under test, as the registry holds them
_gqa_reference = EXERCISES["07.gqa_attention"].reference
_rope_reference = EXERCISES["07.apply_rope"].reference
_step_reference = EXERCISES["07.cached_attention_step"].reference

IDS = ("07.gqa_attention", "07.apply_rope", "07.cached_attention_step")


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


# ----------------------------------------------------------------------------- 07.gqa_attention


@pytest.mark.parametrize("number", range(8))
def test_the_gqa_reference_is_torchs_and_the_packages_values_and_gradients(number):
    """enable_gqa: torch ≥ 2.5 (verified on 2.13). is_causal aligns top-left, so a causal case with
    L_q < L_k gets the bottom-right keep mask explicitly."""
    q, k, v, causal = _cases("07.gqa_attention")[number]
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    L_q, L_k = q.shape[2], k.shape[2]
    keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q) if causal else None
    ours = _gqa_reference(q, k, v, causal)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(ours, decoding.gqa_attention(q, k, v, causal=causal)[0])
    w = torch.randn_like(ours)
    for a, b in zip(torch.autograd.grad((ours * w).sum(), (q, k, v)), torch.autograd.grad((theirs * w).sum(), (q, k, v))):
        torch.testing.assert_close(a, b)


def _gqa_by_groups(query, key, value, causal):
    """Another right way: fold the query heads into (B, H_kv, G·L_q, d) and attend once per key head."""
    B, H, L_q, d = query.shape
    H_kv, L_k = key.shape[1], key.shape[2]
    q = query.reshape(B, H_kv, H // H_kv * L_q, d)  # heads of one group are neighbours
    scores = q @ key.transpose(-2, -1) / d**0.5  # (B, H_kv, G·L_q, L_k)
    if causal:
        keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q).repeat(H // H_kv, 1)
        scores = scores.masked_fill(~keep, float("-inf"))
    return (scores.softmax(-1) @ value).reshape(B, H, L_q, d)


def _gqa_by_einsum(query, key, value, causal):
    B, H, L_q, d = query.shape
    H_kv, L_k = key.shape[1], key.shape[2]
    q = query.view(B, H_kv, H // H_kv, L_q, d)
    scores = torch.einsum("bkgqd,bkld->bkgql", q, key) / d**0.5
    if causal:
        scores = scores.masked_fill(torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q).logical_not(), -torch.inf)
    return torch.einsum("bkgql,bkld->bkgqd", scores.softmax(-1), value).reshape(B, H, L_q, d)


@pytest.mark.parametrize("function", [_gqa_by_groups, _gqa_by_einsum], ids=lambda f: f.__name__)
def test_other_right_gqa_answers_pass(function):
    verdict = evaluate("07.gqa_attention", function)
    assert verdict.status == PASSED, verdict.message


def test_torchs_own_gqa_is_forbidden():
    def theirs(q, k, v, causal):
        L_q, L_k = q.shape[2], k.shape[2]
        keep = torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q) if causal else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)

    verdict = evaluate("07.gqa_attention", theirs)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_gqa_cases_cover_mqa_mha_a_decode_step_and_both_alignments():
    cases = _cases("07.gqa_attention")
    kinds = {(q.shape[1], k.shape[1]) for q, k, _, _ in cases}
    assert any(kv == 1 for _, kv in kinds) and any(h == kv for h, kv in kinds)
    assert {h // kv for h, kv in kinds} >= {1, 2, 3, 4}
    assert any(q.shape[2] == 1 for q, *_ in cases) and any(q.shape[2] == k.shape[2] for q, k, *_ in cases)
    assert any(not causal for *_, causal in cases) and cases[-1][0].dtype == torch.float64


# ----------------------------------------------------------------------------- 07.apply_rope


@pytest.mark.parametrize("number", range(7))
def test_the_rope_reference_is_the_packages(number):
    x, positions = _cases("07.apply_rope")[number]
    torch.testing.assert_close(_rope_reference(x, positions), decoding.apply_rope(x, positions), rtol=0, atol=1e-6)


def _rope_complex(x, positions):
    """Meta's Llama code: features (2i, 2i + 1) as one complex number, times e^{i p θ_i}."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    turns = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions[:, None] * theta)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * turns).flatten(-2).to(x.dtype)


def _rope_rotate_every_two(x, positions):
    """GPT-J's: rotate_every_two, with cos and sin repeated per pair."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = (positions[:, None].double() * theta).repeat_interleave(2, dim=-1)  # (L, d): θ_0, θ_0, θ_1, θ_1, …
    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * angles.cos().to(x.dtype) + rotated * angles.sin().to(x.dtype)


@pytest.mark.parametrize("function", [_rope_complex, _rope_rotate_every_two], ids=lambda f: f.__name__)
def test_other_right_rope_answers_pass(function):
    verdict = evaluate("07.apply_rope", function)
    assert verdict.status == PASSED, verdict.message


def test_the_packages_rope_is_forbidden():
    verdict = evaluate("07.apply_rope", lambda x, positions: decoding.apply_rope(x, positions))
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_the_rope_cases_start_away_from_zero_and_reach_far_in_float64():
    cases = _cases("07.apply_rope")
    assert cases[0][1][0] > 0 and any(p.tolist() == [0] for _, p in cases)
    assert any(x.shape[-1] == 2 for x, _ in cases) and any(not bool((p.diff() > 0).all()) for _, p in cases)
    assert all(int(p.max()) <= 64 for x, p in cases if x.dtype == torch.float32)  # float32 angles stay exact enough
    assert any(int(p.max()) > 5000 and x.dtype == torch.float64 for x, p in cases)


# ----------------------------------------------------------------------------- 07.cached_attention_step


@pytest.mark.parametrize("number", range(6))
def test_the_step_reference_is_a_row_of_full_attention_with_rope(number):
    """The step's output is the last row of causal attention over the whole sequence, RoPE at 0 … T."""
    q, k, v, k_cache, v_cache = (t.double() for t in _cases("07.cached_attention_step")[number])
    out, keys, values = _step_reference(q, k, v, k_cache, v_cache)
    T = k_cache.shape[2]
    assert keys.shape[2] == values.shape[2] == T + 1
    q_full = decoding.apply_rope(q, torch.tensor([T]))
    full = F.scaled_dot_product_attention(q_full, keys, values)  # one query, the last position: no mask
    torch.testing.assert_close(out, full)
    torch.testing.assert_close(keys[:, :, -1:], decoding.apply_rope(k, torch.tensor([T])))


def _step_with_the_package(q, k, v, k_cache, v_cache):
    """A right answer from the package's pieces: allowed in this exercise."""
    position = torch.tensor([k_cache.shape[2]])
    q, k = decoding.apply_rope(q, position), decoding.apply_rope(k, position)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return decoding.gqa_attention(q, keys, values)[0], keys, values


def _step_with_sdpa(q, k, v, k_cache, v_cache):
    position = torch.tensor([k_cache.shape[2]])
    q, k = _rope_complex(q, position), _rope_complex(k, position)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


@pytest.mark.parametrize("function", [_step_with_the_package, _step_with_sdpa], ids=lambda f: f.__name__)
def test_other_right_steps_pass(function):
    verdict = evaluate("07.cached_attention_step", function)
    assert verdict.status == PASSED, verdict.message


def test_a_top_left_mask_in_a_decode_step_is_named():
    def tril(q, k, v, k_cache, v_cache):
        position = torch.tensor([k_cache.shape[2]])
        q, k = _rope_complex(q, position), _rope_complex(k, position)
        keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
        scores = q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5
        keep = torch.ones(1, keys.shape[2], dtype=torch.bool).tril()  # aligned top-left: key 0 only
        return scores.masked_fill(~keep, float("-inf")).softmax(-1) @ values, keys, values

    verdict = evaluate("07.cached_attention_step", tril)
    assert verdict.status == FAILED and verdict.code == "TOP_LEFT_CAUSAL", verdict.message


def test_the_step_cases_start_with_an_empty_cache_and_reach_40_tokens():
    cases = _cases("07.cached_attention_step")
    lengths = [c[3].shape[2] for c in cases]
    assert lengths[0] > 0 and 0 in lengths and 1 in lengths and max(lengths) == 40
    assert cases[-1][0].dtype == torch.float64
