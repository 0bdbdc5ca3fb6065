"""Answers to lessons 07-08's exercises, written the way learners write them (not the way the known
mistakes are written on the teacher's side), each with the verdict its check must give: PASSES for a
right answer written another way, the code of the mistake a wrong one makes, or None where the check
catches it without naming it (the verdict then says what differs). The answers were written from the
student notebooks alone, before the teacher's side was read. Every wrong answer is caught; the test at
the end counts how many are named. A slow test judges every answer as the grader does (public and
hidden cases) and expects the same status.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from learner_answers import PASSES, Answers, holds, named

from course_utils import decoding, tiled
from course_utils.exercises import PASSED, evaluate

ANSWERS = Answers()
answer = ANSWERS.answer


#: Answers that break a rule of the text too finely for the check to see: tiles of another size that
#: hold no more than the exercise's limit on a tensor allows (08.tiled_forward's check measures the
#: largest tensor a call makes, which catches every score at once, not a tile of the wrong shape), so
#: they pass. (exercise, function)
BEYOND_VALUES = []


def beyond_values(exercise):
    def add(function):
        BEYOND_VALUES.append((exercise, function))
        return function

    return add


def _softmax(s, dim=-1):
    """A softmax written by hand, as a learner who may not call torch.softmax writes it."""
    e = torch.exp(s - s.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)

# ----------------------------------------------------------------------------- 07.gqa_attention


def _bottom_right(L_q, L_k, device=None):
    """(L_q, L_k) keep mask: query i sees keys 0 ... L_k - L_q + i."""
    return torch.ones(L_q, L_k, dtype=torch.bool, device=device).tril(L_k - L_q)


@answer("07.gqa_attention", PASSES)
def gqa_repeat_interleave(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    s = query @ k.transpose(-2, -1) / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@answer("07.gqa_attention", PASSES)
def gqa_grouped_einsum(query, key, value, causal):
    B, H, Lq, d = query.shape
    Hkv, Lk = key.size(1), key.size(2)
    q = query.reshape(B, Hkv, H // Hkv, Lq, d)  # neighbouring heads form a group
    s = torch.einsum("bhgqd,bhkd->bhgqk", q, key) * d**-0.5
    if causal:
        keep = torch.arange(Lk)[None, :] <= torch.arange(Lq)[:, None] + (Lk - Lq)
        s = torch.where(keep, s, torch.tensor(float("-inf"), dtype=s.dtype))
    out = torch.einsum("bhgqk,bhkd->bhgqd", _softmax(s), value)
    return out.reshape(B, H, Lq, value.size(-1))


@answer("07.gqa_attention", PASSES)
def gqa_loop_float64(query, key, value, causal):
    _, H, Lq, d = query.shape
    Hkv, Lk = key.size(1), key.size(2)
    outs = []
    for h in range(H):
        kv = h // (H // Hkv)
        s = query[:, h].double() @ key[:, kv].double().transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(~_bottom_right(Lq, Lk), -1e30)
        outs.append(F.softmax(s, -1) @ value[:, kv].double())
    return torch.stack(outs, dim=1).to(query.dtype)


@answer("07.gqa_attention", PASSES)
def gqa_expand(query, key, value, causal):
    B, H, Lq, d = query.shape
    _, Hkv, Lk, dv = value.shape
    k = key[:, :, None].expand(B, Hkv, H // Hkv, Lk, d).reshape(B, H, Lk, d)
    v = value[:, :, None].expand(B, Hkv, H // Hkv, Lk, dv).reshape(B, H, Lk, dv)
    s = torch.matmul(query / math.sqrt(d), k.mT)
    if causal:
        s = s + torch.zeros(Lq, Lk, dtype=s.dtype).masked_fill(torch.ones(Lq, Lk, dtype=torch.bool).triu(Lk - Lq + 1),
                                                                float("-inf"))
    return s.softmax(-1) @ v


@answer("07.gqa_attention", "REPEAT_NOT_INTERLEAVE")
def gqa_tiled_repeat(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1)
    s = query @ k.transpose(-2, -1) / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@answer("07.gqa_attention", "REPEAT_NOT_INTERLEAVE")
def gqa_modulo_head(query, key, value, causal):
    H, Hkv = query.size(1), key.size(1)
    idx = torch.tensor([h % Hkv for h in range(H)])
    s = query @ key[:, idx].mT / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ value[:, idx]


@answer("07.gqa_attention", "NO_SCALE")
def gqa_no_scale(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-2, -1)
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", "SCALE_BY_D")
def gqa_scale_by_d(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-2, -1) / query.size(-1)
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", "SOFTMAX_DIM")
def gqa_softmax_queries(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-2, -1) / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, dim=-2) @ v


@answer("07.gqa_attention", "TOP_LEFT_CAUSAL")
def gqa_top_left(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-2, -1) / math.sqrt(query.size(-1))
    if causal:
        keep = torch.tril(torch.ones(query.size(2), key.size(2), dtype=torch.bool))
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", "IGNORES_CAUSAL")
def gqa_causal_ignored(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    return torch.softmax(query @ k.mT / math.sqrt(query.size(-1)), -1) @ v


@answer("07.gqa_attention", "CAUSAL_HIDES_ITSELF")
def gqa_strict_diagonal(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.mT / math.sqrt(query.size(-1))
    if causal:
        Lq, Lk = query.size(2), key.size(2)
        hidden = torch.ones(Lq, Lk, dtype=torch.bool).triu(Lk - Lq)  # hides the query's own key too
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", None)
def gqa_one_kv_head(query, key, value, causal):
    # written for multi-query attention: every query head reads key/value head 0
    s = query @ key[:, :1].mT / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ value[:, :1]


@answer("07.gqa_attention", "FLOAT64")
def gqa_returns_float64(query, key, value, causal):
    G = query.size(1) // key.size(1)
    q, k, v = query.double(), key.double().repeat_interleave(G, 1), value.double().repeat_interleave(G, 1)
    s = q @ k.mT / math.sqrt(q.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(q.size(2), k.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", "RETURNS_WEIGHTS")
def gqa_returns_pair(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.mT / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    w = torch.softmax(s, -1)
    return w @ v, w


@answer("07.gqa_attention", "FORBIDDEN")
def gqa_sdpa(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    mask = _bottom_right(query.size(2), key.size(2)) if causal else None
    return F.scaled_dot_product_attention(query, k, v, attn_mask=mask)


@answer("07.gqa_attention", "INPUT_MODIFIED")
def gqa_scales_query_in_place(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    with torch.no_grad():
        query /= math.sqrt(query.size(-1))
    s = query @ k.mT
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), float("-inf"))
    return torch.softmax(s, -1) @ v


@answer("07.gqa_attention", "MASK_AFTER_SOFTMAX")
def gqa_mask_after_softmax(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    w = torch.softmax(query @ k.mT / math.sqrt(query.size(-1)), -1)
    if causal:
        w = w * _bottom_right(query.size(2), key.size(2))  # zeroed, not renormalised
    return w @ v


@answer("07.gqa_attention", "FILL_ZERO")
def gqa_fill_zero(query, key, value, causal):
    G = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.mT / math.sqrt(query.size(-1))
    if causal:
        s = s.masked_fill(~_bottom_right(query.size(2), key.size(2)), 0.0)
    return torch.softmax(s, -1) @ v

# ----------------------------------------------------------------------------- 07.apply_rope


def _angles(positions, d, dtype=torch.float64):
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=dtype) / d)  # (d/2,)
    return positions.to(dtype)[:, None] * theta  # (L, d/2)


@answer("07.apply_rope", PASSES)
def rope_slices(x, positions):
    phi = _angles(positions, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


@answer("07.apply_rope", PASSES)
def rope_complex(x, positions):
    d = x.size(-1)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    rot = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), _angles(positions, d))
    return torch.view_as_real(z * rot).reshape(x.shape).to(x.dtype)


@answer("07.apply_rope", PASSES)
def rope_matrices(x, positions):
    phi = _angles(positions, x.size(-1))
    c, s = phi.cos(), phi.sin()
    R = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # (L, d/2, 2, 2)
    pairs = x.double().unflatten(-1, (-1, 2))  # (B, H, L, d/2, 2)
    return torch.einsum("lpij,bhlpj->bhlpi", R, pairs).flatten(-2).to(x.dtype)


@answer("07.apply_rope", PASSES)
def rope_rotate_every_two(x, positions):
    phi = _angles(positions, x.size(-1)).repeat_interleave(2, dim=-1)  # (L, d): φ0 φ0 φ1 φ1 ...
    rotated = torch.empty_like(x)
    rotated[..., 0::2] = -x[..., 1::2]
    rotated[..., 1::2] = x[..., 0::2]
    return x * phi.cos().to(x.dtype) + rotated * phi.sin().to(x.dtype)


@answer("07.apply_rope", "HALF_SPLIT")
def rope_half_layout(x, positions):
    d = x.size(-1)
    phi = _angles(positions, d)
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


@answer("07.apply_rope", "EXPONENT_WITHOUT_TWO")
def rope_exponent_without_two(x, positions):
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    phi = positions.double()[:, None] * theta
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "EXPONENT_DOUBLED")
def rope_exponent_twice_two(x, positions):
    d = x.size(-1)
    i = torch.arange(0, d, 2, dtype=torch.float64)  # already 2i
    phi = positions.double()[:, None] * 10000.0 ** (-2 * i / d)
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "POSITIONS_FROM_ZERO")
def rope_positions_ignored(x, positions):
    phi = _angles(torch.arange(x.size(2)), x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "ROTATION_REVERSED")
def rope_backwards(x, positions):
    phi = _angles(positions, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos + b * sin, -a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "FLOAT32_ANGLES")
def rope_float32_angles(x, positions):
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    phi = positions.float()[:, None] * theta
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "FLOAT64")
def rope_returns_float64(x, positions):
    phi = _angles(positions, x.size(-1))
    a, b = x[..., 0::2].double(), x[..., 1::2].double()
    return torch.stack((a * phi.cos() - b * phi.sin(), a * phi.sin() + b * phi.cos()), -1).flatten(-2)


@answer("07.apply_rope", "INPUT_MODIFIED")
def rope_in_place(x, positions):
    phi = _angles(positions, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    with torch.no_grad():
        a, b = x[..., 0::2].clone(), x[..., 1::2].clone()
        x[..., 0::2] = a * cos - b * sin
        x[..., 1::2] = a * sin + b * cos
    return x


@answer("07.apply_rope", "FORBIDDEN")
def rope_course_function(x, positions):
    return decoding.apply_rope(x, positions)


@answer("07.apply_rope", "HALVES_OUT")
def rope_not_interleaved_back(x, positions):
    phi = _angles(positions, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)  # pairs put back as two halves


@answer("07.apply_rope", None)
def rope_positions_from_one(x, positions):
    phi = _angles(positions + 1, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", None)
def rope_d_hard_coded(x, positions):
    theta = 10000.0 ** (-torch.arange(0, x.size(-1), 2, dtype=torch.float64) / 16)  # d of the lesson's example
    phi = positions.double()[:, None] * theta
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


@answer("07.apply_rope", "NO_GRAPH")
def rope_numpy(x, positions):
    import numpy as np

    d = x.size(-1)
    xs = x.detach().numpy().astype(np.float64)
    phi = positions.numpy()[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    a, b = xs[..., 0::2], xs[..., 1::2]
    out = np.stack((a * np.cos(phi) - b * np.sin(phi), a * np.sin(phi) + b * np.cos(phi)), -1).reshape(xs.shape)
    return torch.from_numpy(out).to(x.dtype)


@answer("07.apply_rope", None)
def rope_cos_sin_swapped(x, positions):
    phi = _angles(positions, x.size(-1))
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * sin - b * cos, a * cos + b * sin), -1).flatten(-2)

# ----------------------------------------------------------------------------- 07.cached_attention_step


def _rope(x, position):
    """A learner's my_apply_rope (interleaved), at one position for every row."""
    positions = torch.full((x.size(2),), position, dtype=torch.int64) if isinstance(position, int) else position
    return rope_slices(x, positions)


@answer("07.cached_attention_step", PASSES)
def step_plain(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    w = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return w @ values, keys, values


@answer("07.cached_attention_step", PASSES)
def step_einsum(q, k, v, k_cache, v_cache):
    pos = torch.tensor([k_cache.shape[-2]])
    q, k = rope_complex(q, pos), rope_complex(k, pos)
    keys, values = torch.cat((k_cache, k), -2), torch.cat((v_cache, v), -2)
    s = torch.einsum("bhqd,bhkd->bhqk", q, keys) / q.shape[-1] ** 0.5
    return torch.einsum("bhqk,bhkd->bhqd", _softmax(s), values), keys, values


@answer("07.cached_attention_step", PASSES)
def step_via_gqa(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    keys = torch.cat([k_cache, _rope(k, T)], dim=2)
    values = torch.cat([v_cache, v], dim=2)
    return gqa_repeat_interleave(_rope(q, T), keys, values, False), keys, values


@answer("07.cached_attention_step", PASSES)
def step_float64_inside(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    keys = torch.cat([k_cache, _rope(k, T)], dim=2)
    values = torch.cat([v_cache, v], dim=2)
    s = _rope(q, T).double() @ keys.double().mT / math.sqrt(q.size(-1))
    out = F.softmax(s, -1) @ values.double()
    return out.to(q.dtype), keys, values


def _step(q, k, v, k_cache, v_cache, *, q_pos, k_pos, scale=True):
    q, k = _rope(q, q_pos), _rope(k, k_pos)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    s = q @ keys.mT
    if scale:
        s = s / math.sqrt(q.size(-1))
    return torch.softmax(s, -1) @ values, keys, values


@answer("07.cached_attention_step", "POSITION_ZERO")
def step_at_zero(q, k, v, k_cache, v_cache):
    return _step(q, k, v, k_cache, v_cache, q_pos=0, k_pos=0)


@answer("07.cached_attention_step", "OFF_BY_ONE")
def step_at_t_plus_one(q, k, v, k_cache, v_cache):
    keys = torch.cat([k_cache, k], dim=2)  # appended first, then its length read
    T = keys.size(2)
    return _step(q, k, v, k_cache, v_cache, q_pos=T, k_pos=T)


@answer("07.cached_attention_step", "KEY_NOT_ROTATED")
def step_key_not_rotated(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q = _rope(q, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


@answer("07.cached_attention_step", "QUERY_NOT_ROTATED")
def step_query_not_rotated(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    keys, values = torch.cat([k_cache, _rope(k, T)], dim=2), torch.cat([v_cache, v], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


@answer("07.cached_attention_step", "ROTATED_AGAIN")
def step_rotates_cache_again(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    keys = torch.cat([k_cache, k], dim=2)
    keys = rope_slices(keys, torch.arange(T + 1))  # every key rotated (again) at its position
    values = torch.cat([v_cache, v], dim=2)
    q = _rope(q, T)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


@answer("07.cached_attention_step", "CACHED_UNROTATED")
def step_caches_unrotated_key(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q_r, k_r = _rope(q, T), _rope(k, T)
    keys_now = torch.cat([k_cache, k_r], dim=2)
    values = torch.cat([v_cache, v], dim=2)
    out = torch.softmax(q_r @ keys_now.mT / math.sqrt(q.size(-1)), -1) @ values
    return out, torch.cat([k_cache, k], dim=2), values


@answer("07.cached_attention_step", "NO_SCALE")
def step_no_scale(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    return _step(q, k, v, k_cache, v_cache, q_pos=T, k_pos=T, scale=False)


@answer("07.cached_attention_step", "PREPENDED")
def step_prepends(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k, k_cache], dim=2), torch.cat([v, v_cache], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


@answer("07.cached_attention_step", "SOFTMAX_DIM")
def step_softmax_over_query(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), dim=-2) @ values, keys, values


@answer("07.cached_attention_step", "NO_GRAPH")
def step_detached_caches(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    out = torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values
    return out, keys.detach(), values.detach()


@answer("07.cached_attention_step", "TOP_LEFT_CAUSAL")
def step_top_left_causal(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    s = q @ keys.mT / math.sqrt(q.size(-1))
    s = s.masked_fill(~torch.ones(1, T + 1, dtype=torch.bool).tril(), float("-inf"))  # is_causal's alignment
    return torch.softmax(s, -1) @ values, keys, values


@answer("07.cached_attention_step", "HALF_SPLIT")
def step_half_layout(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    pos = torch.tensor([T])
    q, k = rope_half_layout(q, pos), rope_half_layout(k, pos)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


@answer("07.cached_attention_step", "FLOAT64")
def step_returns_float64(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T).double(), _rope(k, T).double()
    keys, values = torch.cat([k_cache.double(), k], dim=2), torch.cat([v_cache.double(), v.double()], dim=2)
    return torch.softmax(q @ keys.mT / math.sqrt(q.size(-1)), -1) @ values, keys, values


# The text asks for the attention without F.scaled_dot_product_attention, but this check does not refuse it:
# it is Exercise 1's forbidden function, and the grader's reading of the notebook scores Exercise 1 zero
# wherever it appears (course_teacher/grade/scan.py), as the text says. The values are right, so it passes here.
@answer("07.cached_attention_step", PASSES)
def step_sdpa(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


@answer("07.cached_attention_step", "INPUT_MODIFIED")
def step_scales_q_in_place(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    with torch.no_grad():
        q.mul_(q.size(-1) ** -0.5)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    return torch.softmax(q @ keys.mT, -1) @ values, keys, values


@answer("07.cached_attention_step", None)
def step_forgets_new_token(q, k, v, k_cache, v_cache):
    T = k_cache.size(2)
    q, k = _rope(q, T), _rope(k, T)
    keys, values = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    if T == 0:
        return v.clone(), keys, values
    s = q @ k_cache.mT / math.sqrt(q.size(-1))  # attends over the cache only
    return torch.softmax(s, -1) @ v_cache, keys, values

# ----------------------------------------------------------------------------- 08.merge_states


@answer("08.merge_states", PASSES)
def merge_where(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1 = torch.where(m1 == float("-inf"), torch.zeros_like(m1), torch.exp(m1 - m))
    a2 = torch.where(m2 == float("-inf"), torch.zeros_like(m2), torch.exp(m2 - m))
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", PASSES)
def merge_nan_to_num(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.max(m1, m2)
    a1, a2 = torch.exp(m1 - m).nan_to_num(0.0), torch.exp(m2 - m).nan_to_num(0.0)
    return m, a1 * ell1 + a2 * ell2, a1.unsqueeze(-1) * acc1 + a2.unsqueeze(-1) * acc2


@answer("08.merge_states", PASSES)
def merge_safe_max(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.stack([m1, m2]).amax(0)
    safe = m.masked_fill(torch.isinf(m), 0.0)  # exp(-inf - 0) = 0 where both are empty
    a1, a2 = (m1 - safe).exp(), (m2 - safe).exp()
    return m, ell1 * a1 + ell2 * a2, torch.einsum("bl,bld->bld", a1, acc1) + torch.einsum("bl,bld->bld", a2, acc2)


@answer("08.merge_states", PASSES)
def merge_elementwise_loop(m1, ell1, acc1, m2, ell2, acc2):
    m, ell, acc = torch.empty_like(m1), torch.empty_like(ell1), torch.empty_like(acc1)
    for b in range(m1.size(0)):
        for i in range(m1.size(1)):
            x1, x2 = m1[b, i].item(), m2[b, i].item()
            top = max(x1, x2)
            if top == float("-inf"):
                m[b, i], ell[b, i], acc[b, i] = top, 0.0, 0.0
                continue
            a1, a2 = math.exp(x1 - top), math.exp(x2 - top)
            m[b, i], ell[b, i] = top, ell1[b, i] * a1 + ell2[b, i] * a2
            acc[b, i] = acc1[b, i] * a1 + acc2[b, i] * a2
    return m, ell, acc


@answer("08.merge_states", "EMPTY_PIECE_NAN")
def merge_no_guard(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", "NO_RESCALE")
def merge_acc_not_rescaled(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m).nan_to_num(0.0), torch.exp(m2 - m).nan_to_num(0.0)
    return m, ell1 * a1 + ell2 * a2, acc1 + acc2


@answer("08.merge_states", "NEW_MAX_FOR_OLD_SUM")
def merge_ell_not_rescaled(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m).nan_to_num(0.0), torch.exp(m2 - m).nan_to_num(0.0)
    return m, ell1 + ell2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", None)
def merge_exponent_flipped(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m - m1).nan_to_num(0.0, posinf=0.0), torch.exp(m - m2).nan_to_num(0.0, posinf=0.0)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", None)
def merge_min(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.minimum(m1, m2)
    a1, a2 = torch.exp(m1 - m).nan_to_num(0.0), torch.exp(m2 - m).nan_to_num(0.0)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", "EMPTY_MAX_ZERO")
def merge_empty_m_zero(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    empty = torch.isinf(m)
    m = m.masked_fill(empty, 0.0)  # avoids -inf - -inf, but reports m = 0
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", None)
def merge_guard_ell_only(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    ell = (ell1 * a1 + ell2 * a2).nan_to_num(0.0)
    return m, ell, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", "INPUT_MODIFIED")
def merge_max_in_place(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2, out=m1)  # m1 is overwritten
    a1 = torch.exp(m1 - m).nan_to_num(0.0)
    a2 = torch.exp(m2 - m).nan_to_num(0.0)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1[..., None] + acc2 * a2[..., None]


@answer("08.merge_states", "FORBIDDEN")
def merge_course_function(m1, ell1, acc1, m2, ell2, acc2):
    return tuple(tiled.merge_states(tiled.SoftmaxState(m1, ell1, acc1), tiled.SoftmaxState(m2, ell2, acc2)))


@answer("08.merge_states", None)
def merge_float32(m1, ell1, acc1, m2, ell2, acc2):
    m1, ell1, acc1, m2, ell2, acc2 = (t.float() for t in (m1, ell1, acc1, m2, ell2, acc2))
    return merge_where(m1, ell1, acc1, m2, ell2, acc2)


@answer("08.merge_states", None)
def merge_order_swapped(m1, ell1, acc1, m2, ell2, acc2):
    m, ell, acc = merge_where(m1, ell1, acc1, m2, ell2, acc2)
    return m, acc, ell


@answer("08.merge_states", "ACC_DIVIDED")
def merge_normalised(m1, ell1, acc1, m2, ell2, acc2):
    m, ell, acc = merge_where(m1, ell1, acc1, m2, ell2, acc2)
    return m, ell, acc / ell[..., None]


@answer("08.merge_states", None)
def merge_pick_larger(m1, ell1, acc1, m2, ell2, acc2):
    first = m1 >= m2  # keeps the piece with the larger maximum, drops the other
    return (torch.where(first, m1, m2), torch.where(first, ell1, ell2), torch.where(first[..., None], acc1, acc2))


@answer("08.merge_states", "RuntimeError")
def merge_no_unsqueeze(m1, ell1, acc1, m2, ell2, acc2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m).nan_to_num(0.0), torch.exp(m2 - m).nan_to_num(0.0)
    return m, ell1 * a1 + ell2 * a2, acc1 * a1 + acc2 * a2

# ----------------------------------------------------------------------------- 08.tiled_forward


def _tiled(query, key, value, block_q, block_k, *, scale=True, rescale=True, shift=True, lse_kind="full",
           divide=True, dtype=None, drop_last=False, dv_scale=False):
    """A learner's tiled forward with switches for the mistakes below."""
    B, Lq, d = query.shape
    Lk, dv = key.size(1), value.size(-1)
    dt = dtype or query.dtype
    q_all, k_all, v_all = query.to(dt), key.to(dt), value.to(dt)
    c = 1 / math.sqrt(dv if dv_scale else d) if scale else 1.0
    stop_q = Lq - Lq % block_q if drop_last else Lq
    stop_k = Lk - Lk % block_k if drop_last else Lk
    outs, lses = [], []
    for i in range(0, stop_q, block_q):
        q = q_all[:, i:i + block_q]
        m = torch.full(q.shape[:2], float("-inf"), dtype=dt)
        ell = torch.zeros(q.shape[:2], dtype=dt)
        acc = torch.zeros(B, q.size(1), dv, dtype=dt)
        for j in range(0, stop_k, block_k):
            s = q @ k_all[:, j:j + block_k].transpose(1, 2) * c
            if shift:
                m_new = torch.maximum(m, s.amax(-1))
                p = torch.exp(s - m_new[..., None])
                a = torch.exp(m - m_new) if rescale else torch.ones_like(m)
            else:
                m_new = torch.zeros_like(m)
                p = torch.exp(s)
                a = torch.ones_like(m)
            ell = ell * a + p.sum(-1)
            acc = acc * a[..., None] + p @ v_all[:, j:j + block_k]
            m = m_new
        outs.append(acc / ell[..., None] if divide else acc)
        lses.append({"full": m + torch.log(ell), "log_ell": torch.log(ell), "m": m}[lse_kind])
    out, lse = torch.cat(outs, 1), torch.cat(lses, 1)
    return out.to(query.dtype) if dtype is not None and dtype != torch.float32 else out, lse.to(
        query.dtype) if dtype is not None and dtype != torch.float32 else lse


@answer("08.tiled_forward", PASSES)
def tiled_plain(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k)


@answer("08.tiled_forward", PASSES)
def tiled_split_einsum(query, key, value, block_q, block_k):
    scale = query.size(-1) ** -0.5
    outs, lses = [], []
    for q in torch.split(query, block_q, dim=1):
        m = ell = acc = None
        for k, v in zip(torch.split(key, block_k, dim=1), torch.split(value, block_k, dim=1)):
            s = torch.einsum("bqd,bkd->bqk", q, k) * scale
            tile_max = s.amax(-1)
            if m is None:
                m = tile_max
                p = torch.exp(s - m[..., None])
                ell, acc = p.sum(-1), torch.einsum("bqk,bkv->bqv", p, v)
            else:
                new = torch.maximum(m, tile_max)
                p = torch.exp(s - new[..., None])
                ell = ell * torch.exp(m - new) + p.sum(-1)
                acc = acc * torch.exp(m - new)[..., None] + torch.einsum("bqk,bkv->bqv", p, v)
                m = new
        outs.append(acc / ell[..., None])
        lses.append(m + ell.log())
    return torch.cat(outs, 1), torch.cat(lses, 1)


@answer("08.tiled_forward", PASSES)
def tiled_float64_inside(query, key, value, block_q, block_k):
    out, lse = _tiled(query.double(), key.double(), value.double(), block_q, block_k)
    return out.to(query.dtype), lse.to(query.dtype)


@answer("08.tiled_forward", PASSES)
def tiled_keys_outer(query, key, value, block_q, block_k):
    B, Lq, d = query.shape
    m = torch.full((B, Lq), float("-inf"), dtype=query.dtype)
    ell = torch.zeros(B, Lq, dtype=query.dtype)
    acc = torch.zeros(B, Lq, value.size(-1), dtype=query.dtype)
    for j in range(0, key.size(1), block_k):  # keys outside, queries inside: the same tiles
        ms, ells, accs = [], [], []
        for i in range(0, Lq, block_q):
            s = query[:, i:i + block_q] @ key[:, j:j + block_k].mT / math.sqrt(d)
            mi = m[:, i:i + block_q]
            new = torch.maximum(mi, s.amax(-1))
            p = (s - new[..., None]).exp()
            a = (mi - new).exp()
            ms.append(new)
            ells.append(ell[:, i:i + block_q] * a + p.sum(-1))
            accs.append(acc[:, i:i + block_q] * a[..., None] + p @ value[:, j:j + block_k])
        m, ell, acc = torch.cat(ms, 1), torch.cat(ells, 1), torch.cat(accs, 1)
    return acc / ell[..., None], m + ell.log()


@answer("08.tiled_forward", PASSES)
def tiled_detached_max(query, key, value, block_q, block_k):
    d = query.size(-1)
    outs, lses = [], []
    for i in range(0, query.size(1), block_q):
        q = query[:, i:i + block_q]
        m = torch.full(q.shape[:2], -math.inf, dtype=query.dtype)
        ell = torch.zeros(q.shape[:2], dtype=query.dtype)
        acc = torch.zeros(*q.shape[:2], value.size(-1), dtype=query.dtype)
        for j in range(0, key.size(1), block_k):
            s = q @ key[:, j:j + block_k].mT / math.sqrt(d)
            new = torch.maximum(m, s.detach().amax(-1))  # the shift needs no gradient
            p = torch.exp(s - new[..., None])
            ell = ell * torch.exp(m - new) + p.sum(-1)
            acc = acc * torch.exp(m - new)[..., None] + p @ value[:, j:j + block_k]
            m = new
        outs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    return torch.cat(outs, 1), torch.cat(lses, 1)


@answer("08.tiled_forward", "NO_SCALE")
def tiled_no_scale(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, scale=False)


@answer("08.tiled_forward", "LSE_WITHOUT_MAX")
def tiled_lse_log_ell(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, lse_kind="log_ell")


@answer("08.tiled_forward", None)
def tiled_lse_is_max(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, lse_kind="m")


@answer("08.tiled_forward", "NO_MAX_SHIFT")
def tiled_no_max_shift(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, shift=False)


@answer("08.tiled_forward", "NOTHING_RESCALED")
def tiled_no_rescale(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, rescale=False)


@answer("08.tiled_forward", "ValueError")
def tiled_drops_last_block(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, drop_last=True)


@answer("08.tiled_forward", "NOT_DIVIDED")
def tiled_not_divided(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, divide=False)


@answer("08.tiled_forward", None)
def tiled_scale_dv(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, dv_scale=True)


@answer("08.tiled_forward", None)
def tiled_float32(query, key, value, block_q, block_k):
    return _tiled(query, key, value, block_q, block_k, dtype=torch.float32)


@answer("08.tiled_forward", "FORBIDDEN")
def tiled_softmax_per_tile(query, key, value, block_q, block_k):
    # normalises each tile on its own and averages the tiles
    outs = []
    for i in range(0, query.size(1), block_q):
        q = query[:, i:i + block_q]
        parts = [torch.softmax(q @ key[:, j:j + block_k].mT / math.sqrt(q.size(-1)), -1) @ value[:, j:j + block_k]
                 for j in range(0, key.size(1), block_k)]
        outs.append(sum(parts) / len(parts))
    out = torch.cat(outs, 1)
    return out, torch.zeros(out.shape[:2], dtype=out.dtype)


@answer("08.tiled_forward", "TOO_LARGE")
def tiled_whole_matrix(query, key, value, block_q, block_k):
    s = query @ key.mT / math.sqrt(query.size(-1))  # every score at once, then "tiles" of nothing
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    ell = p.sum(-1, keepdim=True)
    return p @ value / ell, (m + ell.log()).squeeze(-1)


@answer("08.tiled_forward", "FORBIDDEN")
def tiled_logsumexp(query, key, value, block_q, block_k):
    out, _ = _tiled(query, key, value, block_q, block_k)
    return out, torch.logsumexp(query @ key.mT / math.sqrt(query.size(-1)), -1)


@answer("08.tiled_forward", "INPUT_MODIFIED")
def tiled_scales_query_in_place(query, key, value, block_q, block_k):
    with torch.no_grad():
        query.mul_(1 / math.sqrt(query.size(-1)))
    return _tiled(query, key, value, block_q, block_k, scale=False)


@answer("08.tiled_forward", "NEW_MAX_FOR_OLD_SUM")
def tiled_ell_old_max(query, key, value, block_q, block_k):
    d = query.size(-1)
    outs, lses = [], []
    for i in range(0, query.size(1), block_q):
        q = query[:, i:i + block_q]
        m = torch.full(q.shape[:2], -math.inf, dtype=query.dtype)
        ell = torch.zeros(q.shape[:2], dtype=query.dtype)
        acc = torch.zeros(*q.shape[:2], value.size(-1), dtype=query.dtype)
        for j in range(0, key.size(1), block_k):
            s = q @ key[:, j:j + block_k].mT / math.sqrt(d)
            new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - new[..., None])
            ell = ell + p.sum(-1)  # the old sum is not brought to the new maximum
            acc = acc * torch.exp(m - new)[..., None] + p @ value[:, j:j + block_k]
            m = new
        outs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    return torch.cat(outs, 1), torch.cat(lses, 1)


@beyond_values("08.tiled_forward")
def tiled_square_blocks(query, key, value, block_q, block_k):
    out, lse = _tiled(query, key, value, block_q, block_q)  # block_k ignored: same values, other tiles
    return out, lse

# ----------------------------------------------------------------------------- 08.causal_tiles


def _causal(query, key, value, block_q, block_k, *, skip="right", mask="global", strict=False, count="computed",
            scale=True, reverse=False, lse_masked=True, as_tensor=False, mask_all=False, block_k_is_q=False):
    """A learner's causal tiled forward with switches for the mistakes below."""
    B, L, d = query.shape
    dv = value.size(-1)
    if block_k_is_q:
        block_k = block_q
    c = 1 / math.sqrt(d) if scale else 1.0
    outs, lses, tiles, total = [], [], 0, 0
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        q = query[:, i0:i1]
        m = torch.full((B, i1 - i0), float("-inf"), dtype=query.dtype)
        ell = torch.zeros(B, i1 - i0, dtype=query.dtype)
        acc = torch.zeros(B, i1 - i0, dv, dtype=query.dtype)
        starts = list(range(0, L, block_k))
        for j0 in (reversed(starts) if reverse else starts):
            j1 = min(j0 + block_k, L)
            total += 1
            hidden = {"right": j0 > i1 - 1, "index": j0 // block_k > i0 // block_q, "off_by_one": j0 >= i1 - 1,
                      "never": False}[skip]
            if hidden:
                continue
            tiles += 1
            s = q @ key[:, j0:j1].mT * c
            cut = j1 - 1 > i0
            if cut or mask_all:
                qi = torch.arange(i0, i1) if mask == "global" else torch.arange(i1 - i0)
                kj = torch.arange(j0, j1) if mask == "global" else torch.arange(j1 - j0)
                keep = kj[None, :] < qi[:, None] if strict else kj[None, :] <= qi[:, None]
                if mask != "none":
                    s = s.masked_fill(~keep, float("-inf"))
            new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - new[..., None])
            a = torch.exp(m - new)
            ell = ell * a + p.sum(-1)
            acc = acc * a[..., None] + p @ value[:, j0:j1]
            m = new
        outs.append(acc / ell[..., None])
        lses.append(m + torch.log(ell))
    n = {"computed": tiles, "all": total}[count]
    return torch.cat(outs, 1), torch.cat(lses, 1), (torch.tensor(n) if as_tensor else n)


@answer("08.causal_tiles", PASSES)
def causal_plain(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k)


@answer("08.causal_tiles", PASSES)
def causal_mask_every_tile(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, mask_all=True)


@answer("08.causal_tiles", PASSES)
def causal_bounded_key_loop(query, key, value, block_q, block_k):
    _, L, d = query.shape
    outs, lses, tiles = [], [], 0
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        rows = torch.arange(i0, i1)[:, None]
        m = ell = acc = None
        for j0 in range(0, i1, block_k):  # key blocks starting at or before the last query: the others are hidden
            j1 = min(j0 + block_k, L)
            tiles += 1
            s = torch.einsum("bqd,bkd->bqk", query[:, i0:i1], key[:, j0:j1]) / math.sqrt(d)
            s = torch.where(torch.arange(j0, j1)[None, :] <= rows, s, torch.tensor(-math.inf, dtype=s.dtype))
            top = s.amax(-1) if m is None else torch.maximum(m, s.amax(-1))
            p = torch.exp(s - top[..., None])
            if m is None:
                ell, acc = p.sum(-1), p @ value[:, j0:j1]
            else:
                a = torch.exp(m - top)
                ell, acc = ell * a + p.sum(-1), acc * a[..., None] + p @ value[:, j0:j1]
            m = top
        outs.append(acc / ell[..., None])
        lses.append(m + ell.log())
    return torch.cat(outs, 1), torch.cat(lses, 1), tiles


@answer("08.causal_tiles", PASSES)
def causal_float64_inside(query, key, value, block_q, block_k):
    out, lse, n = _causal(query.double(), key.double(), value.double(), block_q, block_k)
    return out.to(query.dtype), lse.to(query.dtype), n


@answer("08.causal_tiles", "BLOCK_INDEX_SKIP")
def causal_skip_by_block_index(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, skip="index")


@answer("08.causal_tiles", "NO_SKIP")
def causal_counts_every_tile(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, count="all")


@answer("08.causal_tiles", "NO_SKIP")
def causal_no_skip(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, skip="never", mask_all=True)


@answer("08.causal_tiles", "CAUSAL_HIDES_ITSELF")
def causal_strict_mask(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, strict=True)


@answer("08.causal_tiles", "TILE_LOCAL_MASK")
def causal_local_positions(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, mask="local")


@answer("08.causal_tiles", "DIAGONAL_UNMASKED")
def causal_diagonal_unmasked(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, mask="none")


@answer("08.causal_tiles", "TILES_NOT_INT")
def causal_count_as_tensor(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, as_tensor=True)


@answer("08.causal_tiles", None)
def causal_skip_off_by_one(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, skip="off_by_one")


@answer("08.causal_tiles", None)
def causal_diagonal_first(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, reverse=True)


@answer("08.causal_tiles", "NO_SCALE")
def causal_no_scale(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, scale=False)


@answer("08.causal_tiles", "SQUARE_TILES")
def causal_square_blocks(query, key, value, block_q, block_k):
    return _causal(query, key, value, block_q, block_k, block_k_is_q=True)


@answer("08.causal_tiles", "FORBIDDEN")
def causal_tile_kinds(query, key, value, block_q, block_k):
    kinds = tiled.tile_kinds(query.size(1), key.size(1), block_q, block_k, causal=True)
    out, lse, _ = _causal(query, key, value, block_q, block_k)
    return out, lse, int((kinds != tiled.SKIP).sum())


@answer("08.causal_tiles", None)
def causal_lse_unmasked(query, key, value, block_q, block_k):
    out, _, n = _causal(query, key, value, block_q, block_k)
    _, lse, _ = _causal(query, key, value, block_q, block_k, skip="never", mask="none")
    return out, lse, n


@answer("08.causal_tiles", None)
def causal_counts_masked_only(query, key, value, block_q, block_k):
    out, lse, _ = _causal(query, key, value, block_q, block_k)
    L = query.size(1)
    n = sum(1 for i0 in range(0, L, block_q) for j0 in range(0, L, block_k)
            if j0 <= min(i0 + block_q, L) - 1 and min(j0 + block_k, L) - 1 > i0)
    return out, lse, n


@answer("08.causal_tiles", None)
def causal_top_left_of_tile(query, key, value, block_q, block_k):
    # skips a tile when its first key comes after its FIRST query: drops keys the later rows see
    B, L, d = query.shape
    outs, lses, tiles = [], [], 0
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        m = torch.full((B, i1 - i0), -math.inf, dtype=query.dtype)
        ell = torch.zeros(B, i1 - i0, dtype=query.dtype)
        acc = torch.zeros(B, i1 - i0, value.size(-1), dtype=query.dtype)
        for j0 in range(0, L, block_k):
            if j0 > i0:
                continue
            j1 = min(j0 + block_k, L)
            tiles += 1
            s = query[:, i0:i1] @ key[:, j0:j1].mT / math.sqrt(d)
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], -math.inf)
            new = torch.maximum(m, s.amax(-1))
            p, a = torch.exp(s - new[..., None]), torch.exp(m - new)
            ell, acc, m = ell * a + p.sum(-1), acc * a[..., None] + p @ value[:, j0:j1], new
        outs.append(acc / ell[..., None])
        lses.append(m + ell.log())
    return torch.cat(outs, 1), torch.cat(lses, 1), tiles


@answer("08.tiled_forward", "MAX_STARTS_AT_ZERO")
def tiled_max_from_zero(query, key, value, block_q, block_k):
    d = query.size(-1)
    outs, lses = [], []
    for i in range(0, query.size(1), block_q):
        q = query[:, i:i + block_q] / math.sqrt(d)
        m = torch.zeros(q.shape[:2], dtype=query.dtype)  # "the max so far": starts at 0
        ell = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:2], value.size(-1), dtype=query.dtype)
        for j in range(0, key.size(1), block_k):
            s = q @ key[:, j:j + block_k].mT
            new = torch.max(m, s.max(-1).values)
            p = (s - new.unsqueeze(-1)).exp()
            ell = ell * (m - new).exp() + p.sum(-1)
            acc = acc * (m - new).exp().unsqueeze(-1) + p @ value[:, j:j + block_k]
            m = new
        outs.append(acc / ell.unsqueeze(-1))
        lses.append(m + ell.log())
    return torch.cat(outs, 1), torch.cat(lses, 1)


@answer("08.tiled_forward", PASSES)
def tiled_max_from_a_huge_negative(query, key, value, block_q, block_k):
    """Starts the max at −1e30 instead of −∞: the first tile replaces it, exp(−1e30 − m) is 0."""
    d = query.size(-1)
    outs, lses = [], []
    for i in range(0, query.size(1), block_q):
        q = query[:, i:i + block_q] / math.sqrt(d)
        m = torch.full(q.shape[:2], -1e30, dtype=query.dtype)
        ell = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:2], value.size(-1), dtype=query.dtype)
        for j in range(0, key.size(1), block_k):
            s = q @ key[:, j:j + block_k].mT
            new = torch.max(m, s.max(-1).values)
            p = (s - new.unsqueeze(-1)).exp()
            ell = ell * (m - new).exp() + p.sum(-1)
            acc = acc * (m - new).exp().unsqueeze(-1) + p @ value[:, j:j + block_k]
            m = new
        outs.append(acc / ell.unsqueeze(-1))
        lses.append(m + ell.log())
    return torch.cat(outs, 1), torch.cat(lses, 1)


# ----------------------------------------------------------------------------- 08.tiled_backward


def _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, *, D_kind="output", p_kind="lse",
         dq_scale=True, dk_scale=True, s_scale=True, dv_t=True, dk_t=True, dk_add=True, skip="positions",
         mask="positions", count_all=False, as_tensor=False, sign=1.0, dtype=None):
    """A learner's backward, query blocks outside (the order of the forward they wrote), with switches."""
    dt = dtype or query.dtype
    q_all, k_all, v_all = query.to(dt), key.to(dt), value.to(dt)
    o, l, do = output.to(dt), lse.to(dt), d_output.to(dt)
    B, Lq, d = q_all.shape
    Lk = k_all.size(1)
    c = 1 / math.sqrt(d)
    if D_kind == "output":
        D = (do * o).sum(-1)
    dq, dk, dv = torch.zeros_like(q_all), torch.zeros_like(k_all), torch.zeros_like(v_all)
    n = 0
    for i in range(0, Lq, block_q):
        i_end = min(i + block_q, Lq)
        for j in range(0, Lk, block_k):
            j_end = min(j + block_k, Lk)
            if count_all:
                n += 1
            if causal and skip == "positions" and j > i_end - 1:
                continue
            if causal and skip == "blocks" and j // block_k > i // block_q:
                continue
            if not count_all:
                n += 1
            s = q_all[:, i:i_end] @ k_all[:, j:j_end].mT * (c if s_scale else 1.0)
            if causal and mask == "positions":
                s = s.masked_fill(torch.arange(j, j_end)[None, :] > torch.arange(i, i_end)[:, None], -math.inf)
            if p_kind == "lse":
                p = torch.exp(s - l[:, i:i_end, None])
            elif p_kind == "tile":
                p = torch.exp(s - s.max(-1, keepdim=True).values)
            elif p_kind == "raw":
                p = torch.exp(s)
            else:
                p = _softmax(s)
            dp = do[:, i:i_end] @ v_all[:, j:j_end].mT
            if D_kind == "output":
                Di = D[:, i:i_end, None]
            elif D_kind == "tile":
                Di = (p * dp).sum(-1, keepdim=True)
            else:
                Di = 0.0
            ds = sign * p * (dp - Di)
            dv[:, j:j_end] += (p.mT if dv_t else p) @ do[:, i:i_end]
            dq[:, i:i_end] += ds @ k_all[:, j:j_end] * (c if dq_scale else 1.0)
            part = (ds.mT if dk_t else ds) @ q_all[:, i:i_end] * (c if dk_scale else 1.0)
            if dk_add:
                dk[:, j:j_end] += part
            else:
                dk[:, j:j_end] = part
    grads = [t.to(query.dtype) for t in (dq, dk, dv)]
    return (*grads, torch.tensor(n) if as_tensor else n)


@answer("08.tiled_backward", PASSES)
def backward_queries_outer(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal)


@answer("08.tiled_backward", PASSES)
def backward_keys_outer_in_place(query, key, value, output, lse, d_output, block_q, block_k, causal):
    B, Lq, d = query.shape
    Lk = key.size(1)
    qs = query * d ** -0.5
    delta = torch.einsum("bqc,bqc->bq", d_output, output)
    dq = torch.zeros_like(query)
    dks, dvs, count = [], [], 0
    for j0 in range(0, Lk, block_k):
        kj, vj = key[:, j0:j0 + block_k], value[:, j0:j0 + block_k]
        dkj, dvj = torch.zeros_like(kj), torch.zeros_like(vj)
        first = (j0 // block_q) * block_q if causal else 0  # the first query block that can see key j0
        for i0 in range(first, Lq, block_q):
            count += 1
            s = qs[:, i0:i0 + block_q] @ kj.transpose(1, 2)
            if causal:
                hide = torch.arange(j0, j0 + kj.size(1)).view(1, -1) > torch.arange(i0, i0 + s.size(1)).view(-1, 1)
                s.masked_fill_(hide, float("-inf"))
            p = s.sub_(lse[:, i0:i0 + block_q].unsqueeze(-1)).exp_()
            dvj += p.transpose(1, 2) @ d_output[:, i0:i0 + block_q]
            ds = (d_output[:, i0:i0 + block_q] @ vj.transpose(1, 2)).sub_(delta[:, i0:i0 + block_q].unsqueeze(-1))
            ds.mul_(p)
            dq[:, i0:i0 + block_q] += ds @ kj * d ** -0.5
            dkj += ds.transpose(1, 2) @ qs[:, i0:i0 + block_q]
        dks.append(dkj)
        dvs.append(dvj)
    return dq, torch.cat(dks, 1), torch.cat(dvs, 1), count


@answer("08.tiled_backward", PASSES)
def backward_split_and_lists(query, key, value, output, lse, d_output, block_q, block_k, causal):
    d = query.size(-1)
    D = (output * d_output).sum(dim=2)
    q_blocks = list(torch.split(query, block_q, dim=1))
    k_blocks, v_blocks = torch.split(key, block_k, dim=1), torch.split(value, block_k, dim=1)
    dq = [torch.zeros_like(b) for b in q_blocks]
    dk = [torch.zeros_like(b) for b in k_blocks]
    dv = [torch.zeros_like(b) for b in v_blocks]
    tiles = 0
    for a, qb in enumerate(q_blocks):
        rows = torch.arange(a * block_q, a * block_q + qb.size(1))
        for b, (kb, vb) in enumerate(zip(k_blocks, v_blocks)):
            cols = torch.arange(b * block_k, b * block_k + kb.size(1))
            if causal and cols[0] > rows[-1]:
                continue
            tiles += 1
            s = torch.einsum("bid,bjd->bij", qb, kb) / math.sqrt(d)
            if causal:
                s = torch.where(cols[None, :] <= rows[:, None], s, torch.tensor(-math.inf, dtype=s.dtype))
            p = torch.exp(s - lse[:, rows][..., None])
            dv[b] = dv[b] + torch.einsum("bij,bic->bjc", p, d_output[:, rows])
            ds = p * (torch.einsum("bic,bjc->bij", d_output[:, rows], vb) - D[:, rows][..., None])
            dq[a] = dq[a] + torch.einsum("bij,bjd->bid", ds, kb) / math.sqrt(d)
            dk[b] = dk[b] + torch.einsum("bij,bid->bjd", ds, qb) / math.sqrt(d)
    return torch.cat(dq, 1), torch.cat(dk, 1), torch.cat(dv, 1), tiles


@answer("08.tiled_backward", PASSES)
def backward_float64_inside(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dtype=torch.float64)


@answer("08.tiled_backward", "NO_D")
def backward_forgets_D(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, D_kind="none")


@answer("08.tiled_backward", "D_PER_TILE")
def backward_D_from_the_tile(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, D_kind="tile")


@answer("08.tiled_backward", "P_TILE_MAX")
def backward_p_like_the_forward(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, p_kind="tile")


@answer("08.tiled_backward", "P_WITHOUT_LSE")
def backward_p_raw(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, p_kind="raw")


@answer("08.tiled_backward", "P_TILE_SOFTMAX")
def backward_p_softmax_of_tile(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, p_kind="softmax")


@answer("08.tiled_backward", "DV_NOT_TRANSPOSED")
def backward_dv_p_at_do(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dv_t=False)


@answer("08.tiled_backward", "DK_NOT_TRANSPOSED")
def backward_dk_ds_at_q(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dk_t=False)


@answer("08.tiled_backward", "DK_NOT_SUMMED")
def backward_dk_assigned(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """dK assigned per tile, dV added: only dK keeps the last query block's part."""
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dk_add=False)


@answer("08.tiled_backward", "DQ_NOT_SCALED")
def backward_dq_not_scaled(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dq_scale=False)


@answer("08.tiled_backward", "GRAD_NOT_SCALED")
def backward_grads_not_scaled(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dq_scale=False, dk_scale=False)


@answer("08.tiled_backward", "NO_SCALE")
def backward_scale_forgotten(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, dq_scale=False, dk_scale=False,
                s_scale=False)


@answer("08.tiled_backward", "P_UNSCALED")
def backward_scores_not_scaled_only(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, s_scale=False)


@answer("08.tiled_backward", "CAUSAL_IGNORED")
def backward_causal_forgotten(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, skip="never", mask="none")


@answer("08.tiled_backward", "NO_SKIP")
def backward_masks_but_never_skips(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, skip="never")


@answer("08.tiled_backward", "NO_SKIP")
def backward_counts_before_skipping(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, count_all=True)


@answer("08.tiled_backward", "DIAGONAL_UNMASKED")
def backward_diagonal_unmasked(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, mask="none")


@answer("08.tiled_backward", "BLOCK_INDEX_SKIP")
def backward_skips_by_block_number(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, skip="blocks")


@answer("08.tiled_backward", "TILES_NOT_INT")
def backward_tiles_tensor(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, as_tensor=True)


@answer("08.tiled_backward", "DS_SIGN_FLIPPED")
def backward_sign_flipped(query, key, value, output, lse, d_output, block_q, block_k, causal):
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal, sign=-1.0)


@answer("08.tiled_backward", "TOO_LARGE")
def backward_global_mask(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """Builds the causal mask once, for the whole (L_q, L_k) matrix, and slices it per tile."""
    keep = torch.ones(query.size(1), key.size(1), dtype=torch.bool).tril()
    dq, dk, dv, n = _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal)
    return dq, dk, dv, n + 0 * int(keep[0, 0])


@answer("08.tiled_backward", "TOO_LARGE")
def backward_whole_matrix(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """The gradients from the whole (L_q, L_k) matrix at once, and the tile count computed apart."""
    d = query.size(-1)
    s = query @ key.mT / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), -math.inf)
    p = torch.exp(s - lse[..., None])
    dp = d_output @ value.mT
    ds = p * (dp - (d_output * output).sum(-1, keepdim=True))
    n_q, n_k = -(-query.size(1) // block_q), -(-key.size(1) // block_k)
    tiles = sum(1 for i in range(n_q) for j in range(n_k)
                if not causal or j * block_k <= min((i + 1) * block_q, query.size(1)) - 1)
    return ds @ key / math.sqrt(d), ds.mT @ query / math.sqrt(d), p.mT @ d_output, tiles


@answer("08.tiled_backward", "FORBIDDEN")
def backward_autograd_of_sdpa(query, key, value, output, lse, d_output, block_q, block_k, causal):
    leaves = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        grads = torch.autograd.grad(out, leaves, d_output)
    *_, n = _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal)
    return (*grads, n)


@answer("08.tiled_backward", "INPUT_MODIFIED")
def backward_scales_d_output_in_place(query, key, value, output, lse, d_output, block_q, block_k, causal):
    d_output *= 1.0  # "make sure it is a float tensor"
    d_output[..., 0] += 0.0 * d_output[..., 0] + 1e-3
    return _bwd(query, key, value, output, lse, d_output, block_q, block_k, causal)


@answer("08.tiled_backward", "D_OVER_QUERIES")
def backward_D_summed_over_queries(query, key, value, output, lse, d_output, block_q, block_k, causal):
    """D as the sum of dO ∘ O over the queries of the block instead of over the features of a row."""
    d = query.size(-1)
    dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    n = 0
    for i in range(0, query.size(1), block_q):
        D = (d_output[:, i:i + block_q] * output[:, i:i + block_q]).sum(1).sum(-1)  # (B,)
        for j in range(0, key.size(1), block_k):
            if causal and j > min(i + block_q, query.size(1)) - 1:
                continue
            n += 1
            s = query[:, i:i + block_q] @ key[:, j:j + block_k].mT / math.sqrt(d)
            if causal:
                s = s.masked_fill(torch.arange(j, j + s.size(2))[None] > torch.arange(i, i + s.size(1))[:, None],
                                  -math.inf)
            p = torch.exp(s - lse[:, i:i + block_q, None])
            ds = p * (d_output[:, i:i + block_q] @ value[:, j:j + block_k].mT - D[:, None, None])
            dv[:, j:j + block_k] += p.mT @ d_output[:, i:i + block_q]
            dq[:, i:i + block_q] += ds @ key[:, j:j + block_k] / math.sqrt(d)
            dk[:, j:j + block_k] += ds.mT @ query[:, i:i + block_q] / math.sqrt(d)
    return dq, dk, dv, n


@pytest.mark.slow  # (a regression corpus of a minute and a half: `make test`'s, not the inner loop's)
@pytest.mark.parametrize("exercise, function, expected", ANSWERS, ids=ANSWERS.ids)
def test_a_learners_answer_gets_its_verdict(exercise, function, expected):
    verdict = evaluate(exercise, function)
    assert holds(verdict, expected), (verdict.status, verdict.code, verdict.message)


@pytest.mark.slow  # (the grader's hidden cases)
@pytest.mark.parametrize("exercise, function, expected", ANSWERS, ids=ANSWERS.ids)
def test_the_grader_gives_each_answer_the_same_verdict(exercise, function, expected):
    from prepared import evaluate as grade  # the teacher's verdict, each Reference prepared once

    public, graded = evaluate(exercise, function), grade(exercise, function, hidden_seed=12345)
    assert graded.status == public.status and holds(graded, expected), graded.message


@pytest.mark.parametrize("exercise, function", BEYOND_VALUES, ids=[f"{e}-{f.__name__}" for e, f in BEYOND_VALUES])
def test_what_no_value_shows_passes(exercise, function):
    """Tiles of another size give the right values and stay within the limit on a tensor's size."""
    assert evaluate(exercise, function).status == PASSED


def test_every_wrong_answer_is_caught_and_seven_in_ten_are_named():
    by_exercise = {}
    for exercise, _, expected in ANSWERS:
        by_exercise.setdefault(exercise, []).append(expected)
    assert sorted(by_exercise) == ["07.apply_rope", "07.cached_attention_step", "07.gqa_attention",
                                   "08.causal_tiles", "08.merge_states", "08.tiled_backward", "08.tiled_forward"]
    for exercise, verdicts in by_exercise.items():  # 3 or more right answers and 10 or more wrong ones each
        right = verdicts.count(PASSES)
        assert right >= 3 and len(verdicts) - right >= 10, (exercise, right, len(verdicts) - right)
    wrong = ANSWERS.wrong()
    found = [code for code in wrong if named(code)]
    assert len(wrong) >= 80 and len(found) >= 0.7 * len(wrong), (len(found), len(wrong))
