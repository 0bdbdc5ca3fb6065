"""Learners' answers to lessons 04-06's exercises, written blind from what a learner reads (the
student notebook and the course_utils modules it teaches), each with the verdict its check must
give: PASSES for a right answer written another way than the obvious one; for a wrong one the code
of the mistake it names, None where the check catches it without naming it (the verdict then says
what differs), or CRASHES where the answer raises. Every answer is judged the grader's way too, on
the hidden cases. The test at the end counts how many wrong answers are caught and named.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from learner_answers import CRASHES, PASSES, Answers, holds, named
from prepared import evaluate as evaluate_hidden  # the teacher's verdict, each Reference prepared once

from course_utils.exercises import EXERCISES, evaluate

HIDDEN_SEED = 12345  # a teacher's
ANSWERS = Answers()
answer = ANSWERS.answer

# ----------------------------------------------------------------------------- 04.fused_forward

def _heads(t, num_heads):
    B, L, HD = t.shape
    return t.view(B, L, num_heads, HD // num_heads).transpose(1, 2)  # (B, H, L, d)


@answer("04.fused_forward", PASSES)
def ff_einsum(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, Lq, _ = query.shape
    Lk = key.shape[1]
    H = num_heads
    q = torch.einsum("ble,ef->blf", query, w_q).reshape(B, Lq, H, -1)
    k = torch.einsum("ble,ef->blf", key, w_k).reshape(B, Lk, H, -1)
    v = torch.einsum("ble,ef->blf", value, w_v).reshape(B, Lk, H, -1)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    w = s.softmax(-1)
    o = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, Lq, -1)
    return o @ w_o, w


@answer("04.fused_forward", PASSES)
def ff_loop_heads(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    dk = w_q.shape[1] // num_heads
    dv = w_v.shape[1] // num_heads
    q, k, v = query @ w_q, key @ w_k, value @ w_v
    outs, ws = [], []
    for h in range(num_heads):
        qh = q[..., h * dk:(h + 1) * dk]
        kh = k[..., h * dk:(h + 1) * dk]
        vh = v[..., h * dv:(h + 1) * dv]
        wh = torch.softmax(qh @ kh.transpose(1, 2) / dk ** 0.5, dim=-1)
        outs.append(wh @ vh)
        ws.append(wh)
    return torch.cat(outs, -1) @ w_o, torch.stack(ws, 1)


@answer("04.fused_forward", PASSES)
def ff_float64_inside(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    dt = query.dtype
    query, key, value, w_q, w_k, w_v, w_o = (t.double() for t in (query, key, value, w_q, w_k, w_v, w_o))
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    s = s - s.amax(-1, keepdim=True)
    e = s.exp()
    w = e / e.sum(-1, keepdim=True)
    o = (w @ v).permute(0, 2, 1, 3).flatten(2)
    return (o @ w_o).to(dt), w.to(dt)


@answer("04.fused_forward", PASSES)
def ff_linear_layout(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, Lq, _ = query.shape
    q = F.linear(query, w_q.T).view(B, Lq, num_heads, -1).permute(0, 2, 1, 3)
    k = F.linear(key, w_k.T).view(B, key.shape[1], num_heads, -1).permute(0, 2, 3, 1)  # (B, H, d, Lk)
    v = F.linear(value, w_v.T).view(B, key.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    w = F.softmax(torch.matmul(q, k) / math.sqrt(q.size(-1)), dim=-1)
    o = torch.matmul(w, v).transpose(1, 2).contiguous().view(B, Lq, -1)
    return F.linear(o, w_o.T), w


@answer("04.fused_forward", "NO_SCALE")
def ff_no_scale(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "SCALE_BY_E")
def ff_scale_model_dim(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(w_q.shape[1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "SCALE_BY_D_V")
def ff_scale_dv(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(v.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "D_K_FROM_E_Q")
def ff_scale_from_eq(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    d_k = query.shape[-1] // num_heads  # assumes H * d_k == E_q
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(d_k)).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "WRONG_VIEW")
def ff_view_no_transpose(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, Lq, _ = query.shape
    Lk = key.shape[1]
    q = (query @ w_q).view(B, num_heads, Lq, -1)
    k = (key @ w_k).view(B, num_heads, Lk, -1)
    v = (value @ w_v).view(B, num_heads, Lk, -1)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).reshape(B, Lq, -1) @ w_o, w


@answer("04.fused_forward", "MERGE_NO_TRANSPOSE")
def ff_merge_no_transpose(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, Lq, _ = query.shape
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).reshape(B, Lq, -1) @ w_o, w


@answer("04.fused_forward", "SOFTMAX_DIM")
def ff_softmax_queries(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-2)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "AVERAGED_WEIGHTS")
def ff_weights_averaged(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w.mean(1)


@answer("04.fused_forward", "NO_OUT_PROJ")
def ff_no_out_proj(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2), w


@answer("04.fused_forward", CRASHES)
def ff_value_from_key(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(key @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "D_V_AS_D_K")
def ff_dv_equals_dk(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    B, Lq, _ = query.shape
    d = w_q.shape[1] // num_heads
    q = (query @ w_q).view(B, -1, num_heads, d).transpose(1, 2)
    k = (key @ w_k).view(B, -1, num_heads, d).transpose(1, 2)
    v = (value @ w_v).view(B, -1, num_heads, d).transpose(1, 2)  # d_v taken as d_k
    w = (q @ k.mT / math.sqrt(d)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(B, Lq, -1) @ w_o, w


@answer("04.fused_forward", "INPUT_MODIFIED")
def ff_query_scaled_in_place(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    query /= math.sqrt(w_q.shape[1] // num_heads)
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", "FLOAT32")
def ff_float32(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    query, key, value, w_q, w_k, w_v, w_o = (t.float() for t in (query, key, value, w_q, w_k, w_v, w_o))
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w


@answer("04.fused_forward", None)
def ff_weights_transposed(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = _heads(query @ w_q, num_heads), _heads(key @ w_k, num_heads), _heads(value @ w_v, num_heads)
    w = (q @ k.mT / math.sqrt(q.shape[-1])).softmax(-1)
    return (w @ v).transpose(1, 2).flatten(2) @ w_o, w.transpose(-2, -1)


@answer("04.fused_forward", "FORBIDDEN")
def ff_torch_mha_forward(query, key, value, w_q, w_k, w_v, w_o, num_heads):
    E = w_q.shape[1]
    out, w = F.multi_head_attention_forward(
        query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), E, num_heads, None, None, None, None,
        False, 0.0, w_o.T, None, use_separate_proj_weight=True, q_proj_weight=w_q.T, k_proj_weight=w_k.T,
        v_proj_weight=w_v.T, average_attn_weights=False)
    return out.transpose(0, 1), w

# ----------------------------------------------------------------------------- 04.score_matrices

def _qk_heads(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    return in_proj_weight[:E].view(num_heads, d, E), in_proj_weight[E:2 * E].view(num_heads, d, E), d


@answer("04.score_matrices", PASSES)
def sm_einsum(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight, num_heads)
    return torch.einsum("hdi,hdj->hij", wq, wk) / math.sqrt(d)


@answer("04.score_matrices", PASSES)
def sm_loop(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    w_q, w_k, _ = in_proj_weight.chunk(3, dim=0)
    mats = []
    for h in range(num_heads):
        rows = slice(h * d, (h + 1) * d)
        mats.append(w_q[rows].T @ w_k[rows] / d ** 0.5)
    return torch.stack(mats)


@answer("04.score_matrices", PASSES)
def sm_bmm_float64(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    w = in_proj_weight.double()
    wq = w[:E].reshape(num_heads, -1, E).transpose(1, 2)  # (H, E, d)
    wk = w[E:2 * E].reshape(num_heads, -1, E)  # (H, d, E)
    return (torch.bmm(wq, wk) / math.sqrt(E / num_heads)).to(in_proj_weight.dtype)


@answer("04.score_matrices", PASSES)
def sm_scale_query_first(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    wq = in_proj_weight[:E] * d ** -0.5  # a new tensor: the argument stays as it is
    return torch.matmul(wq.view(num_heads, d, E).mT, in_proj_weight[E:2 * E].view(num_heads, d, E))


@answer("04.score_matrices", "NO_SCALE")
def sm_no_scale(in_proj_weight, num_heads):
    wq, wk, _ = _qk_heads(in_proj_weight, num_heads)
    return wq.mT @ wk


@answer("04.score_matrices", "SCALE_BY_E")
def sm_scale_model_dim(in_proj_weight, num_heads):
    wq, wk, _ = _qk_heads(in_proj_weight, num_heads)
    return wq.mT @ wk / math.sqrt(in_proj_weight.shape[1])


@answer("04.score_matrices", "SCALE_BY_D")
def sm_scale_by_d(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight, num_heads)
    return wq.mT @ wk / d


@answer("04.score_matrices", "QK_SWAPPED")
def sm_transposed(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight, num_heads)
    return wk.mT @ wq / math.sqrt(d)


@answer("04.score_matrices", "V_FOR_K")
def sm_key_from_v_rows(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    wq = in_proj_weight[:E].view(num_heads, d, E)
    wk = in_proj_weight[2 * E:].view(num_heads, d, E)
    return wq.mT @ wk / math.sqrt(d)


@answer("04.score_matrices", "HEADS_INTERLEAVED")
def sm_interleaved_heads(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    wq = in_proj_weight[:E].view(d, num_heads, E).transpose(0, 1)
    wk = in_proj_weight[E:2 * E].view(d, num_heads, E).transpose(0, 1)
    return wq.mT @ wk / math.sqrt(d)


@answer("04.score_matrices", "IN_OUT_LAYOUT")
def sm_formula_layout_columns(in_proj_weight, num_heads):
    # takes the (out, in) block as if it were the formula's (in, out) and splits columns
    E = in_proj_weight.shape[1]
    d = E // num_heads
    wq, wk = in_proj_weight[:E], in_proj_weight[E:2 * E]
    return torch.stack([wq[:, h * d:(h + 1) * d] @ wk[:, h * d:(h + 1) * d].T for h in range(num_heads)]) / math.sqrt(d)


@answer("04.score_matrices", None)
def sm_summed_heads(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight, num_heads)
    A = wq.mT @ wk / math.sqrt(d)
    return A.sum(0, keepdim=True).expand(num_heads, -1, -1)


@answer("04.score_matrices", "NO_GRAPH")
def sm_no_grad(in_proj_weight, num_heads):
    with torch.no_grad():
        wq, wk, d = _qk_heads(in_proj_weight, num_heads)
        return wq.mT @ wk / math.sqrt(d)


@answer("04.score_matrices", "NO_GRAPH")
def sm_numpy(in_proj_weight, num_heads):
    w = in_proj_weight.detach().numpy()
    E = w.shape[1]
    d = E // num_heads
    out = [w[h * d:(h + 1) * d].T @ w[E + h * d:E + (h + 1) * d] / math.sqrt(d) for h in range(num_heads)]
    return torch.tensor(__import__("numpy").stack(out))


@answer("04.score_matrices", "INPUT_MODIFIED")
def sm_scales_in_place(in_proj_weight, num_heads):
    E = in_proj_weight.shape[1]
    d = E // num_heads
    with torch.no_grad():
        in_proj_weight[:E] /= math.sqrt(d)
    wq, wk, _ = _qk_heads(in_proj_weight, num_heads)
    return wq.mT @ wk


@answer("04.score_matrices", "FLOAT32")
def sm_float32(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight.float(), num_heads)
    return wq.mT @ wk / math.sqrt(d)


@answer("04.score_matrices", None)
def sm_integer_head_size_sqrt(in_proj_weight, num_heads):
    wq, wk, d = _qk_heads(in_proj_weight, num_heads)
    return wq.mT @ wk / math.isqrt(d)  # integer square root: right only when d is a square

# ----------------------------------------------------------------------------- 04.attn_mask

@answer("04.attn_mask", PASSES)
def am_expand_reshape(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k).reshape(B * num_heads, L_q, L_k)


@answer("04.attn_mask", PASSES)
def am_repeat_interleave(key_padding_mask, num_heads, L_q):
    m = key_padding_mask.repeat_interleave(num_heads, dim=0)  # (B*H, L_k)
    return m.unsqueeze(1).repeat(1, L_q, 1)


@answer("04.attn_mask", PASSES)
def am_loop(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    out = torch.zeros(B * num_heads, L_q, L_k, dtype=torch.bool)
    for b in range(B):
        for h in range(num_heads):
            out[b * num_heads + h] = key_padding_mask[b]
    return out


@answer("04.attn_mask", PASSES)
def am_einsum_float_then_bool(key_padding_mask, num_heads, L_q):
    ones = torch.ones(num_heads, L_q)
    m = torch.einsum("bk,hq->bhqk", key_padding_mask.float(), ones)
    return m.flatten(0, 1) > 0.5


@answer("04.attn_mask", "HEAD_ORDER")
def am_repeat_head_major(key_padding_mask, num_heads, L_q):
    return key_padding_mask.repeat(num_heads, 1).unsqueeze(1).expand(-1, L_q, -1)


@answer("04.attn_mask", "MASK_INVERTED")
def am_inverted(key_padding_mask, num_heads, L_q):
    return (~key_padding_mask).repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", "FOUR_AXES")
def am_four_dims(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k)


@answer("04.attn_mask", "NO_QUERY_AXIS")
def am_no_query_axis(key_padding_mask, num_heads, L_q):
    return key_padding_mask.repeat_interleave(num_heads, 0).unsqueeze(1)


@answer("04.attn_mask", "FLOAT_MASK")
def am_float_minus_inf(key_padding_mask, num_heads, L_q):
    m = torch.zeros(key_padding_mask.shape, dtype=torch.float).masked_fill(key_padding_mask, float("-inf"))
    return m.repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", None)
def am_int(key_padding_mask, num_heads, L_q):
    return key_padding_mask.long().repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", "SQUARE")
def am_square(key_padding_mask, num_heads, L_q):
    L_k = key_padding_mask.shape[1]
    return key_padding_mask.repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_k, -1)


@answer("04.attn_mask", "INPUT_MODIFIED")
def am_in_place(key_padding_mask, num_heads, L_q):
    key_padding_mask.logical_not_()
    keep = key_padding_mask.repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)
    return ~keep


@answer("04.attn_mask", None)
def am_queries_masked(key_padding_mask, num_heads, L_q):
    # hides padded queries too: the square mask of a padded self-attention
    m = key_padding_mask[:, None, :] | key_padding_mask[:, :, None]
    return m.repeat_interleave(num_heads, 0)[:, :L_q]


@answer("04.attn_mask", "NO_HEAD_AXIS")
def am_ignore_heads(key_padding_mask, num_heads, L_q):
    return key_padding_mask[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", "RIGHT_PADDING_ASSUMED")
def am_from_lengths(key_padding_mask, num_heads, L_q):
    _, L_k = key_padding_mask.shape
    lengths = (~key_padding_mask).sum(1)  # assumes the padding is at the end
    m = torch.arange(L_k)[None, :] >= lengths[:, None]
    return m.repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", "FULL_ITEM_CLEARED")
def am_unmask_full_rows(key_padding_mask, num_heads, L_q):
    m = key_padding_mask & ~key_padding_mask.all(-1, keepdim=True)  # avoid NaN rows
    return m.repeat_interleave(num_heads, 0)[:, None, :].expand(-1, L_q, -1)


@answer("04.attn_mask", CRASHES)
def am_view_of_expand(key_padding_mask, num_heads, L_q):
    B, L_k = key_padding_mask.shape
    return key_padding_mask[:, None, None, :].expand(B, num_heads, L_q, L_k).view(B * num_heads, L_q, L_k)
# ----------------------------------------------------------------------------- 05.sampled_measure

@answer("05.sampled_measure", PASSES)
def ms_gather_keys(query, key, index):
    k = key[:, :, index]  # (B, H, L_Q, U, D)
    s = (query.unsqueeze(-2) * k).sum(-1)  # (B, H, L_Q, U)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", PASSES)
def ms_einsum(query, key, index):
    s = torch.einsum("bhqd,bhqud->bhqu", query, key[:, :, index])
    return s.amax(-1) - s.sum(-1) / index.shape[1]


@answer("05.sampled_measure", PASSES)
def ms_full_then_gather(query, key, index):
    B, H, _, _ = query.shape
    scores = query @ key.transpose(-2, -1)  # (B, H, L_Q, L_K)
    s = scores.gather(-1, index.expand(B, H, *index.shape))
    return s.max(dim=-1)[0] - s.mean(dim=-1)


@answer("05.sampled_measure", PASSES)
def ms_loop_queries(query, key, index):
    out = torch.empty(query.shape[:-1], dtype=torch.float64)
    for i in range(query.shape[2]):
        s = (key[:, :, index[i]].double() @ query[:, :, i].double().unsqueeze(-1)).squeeze(-1)  # (B, H, U)
        out[:, :, i] = s.max(-1).values - s.mean(-1)
    return out.to(query.dtype)


@answer("05.sampled_measure", "SCALED")
def ms_scaled(query, key, index):
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1) / math.sqrt(query.shape[-1])
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "DIVIDES_BY_L_K")
def ms_divide_by_lk(query, key, index):
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1)
    return s.max(-1).values - s.sum(-1) / key.shape[-2]


@answer("05.sampled_measure", "ALL_KEYS")
def ms_all_keys(query, key, index):
    s = query @ key.mT
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "MAX_OVER_ALL_KEYS")
def ms_max_all_mean_sampled(query, key, index):
    full = query @ key.mT
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1)
    return full.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "DROPS_REPEATS")
def ms_unique_positions(query, key, index):
    out = []
    for i in range(query.shape[2]):
        s = (key[:, :, index[i].unique()] @ query[:, :, i].unsqueeze(-1)).squeeze(-1)
        out.append(s.max(-1).values - s.mean(-1))
    return torch.stack(out, -1)


@answer("05.sampled_measure", "LOG_SUM_EXP")
def ms_logsumexp(query, key, index):
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1)
    return s.logsumexp(-1) - s.mean(-1)


@answer("05.sampled_measure", "MEAN_MINUS_MAX")
def ms_mean_minus_max(query, key, index):
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1)
    return s.mean(-1) - s.max(-1).values


@answer("05.sampled_measure", PASSES)
def ms_transposed_index_einsum(query, key, index):
    s = torch.einsum("bhqd,bhuqd->bhqu", query, key[:, :, index.T])  # (B, H, U, L_Q, D), read as such
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "INDEX_TRANSPOSED")
def ms_index_transposed(query, key, index):
    s = torch.einsum("bhqd,bhqud->bhqu", query, key[:, :, index.T])  # (B, H, U, L_Q, D) read as (B, H, L_Q, U, D)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", None)
def ms_first_row_for_all(query, key, index):
    s = query @ key[:, :, index[0]].mT  # one sample for every query
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "FLOAT32")
def ms_float32(query, key, index):
    s = (query.float().unsqueeze(-2) * key.float()[:, :, index]).sum(-1)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "INPUT_MODIFIED")
def ms_in_place(query, key, index):
    query.unsqueeze_(-2)
    s = (query * key[:, :, index]).sum(-1)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", "FORBIDDEN")
def ms_course_function(query, key, index):
    from course_utils import probsparse
    s = probsparse.sampled_scores(query, key, index)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", CRASHES)
def ms_index_on_batch_axis(query, key, index):
    k = key[:, index]  # indexes the heads, not the positions
    s = (query.unsqueeze(-2) * k.transpose(1, 2)).sum(-1)
    return s.max(-1).values - s.mean(-1)


@answer("05.sampled_measure", None)
def ms_abs_max(query, key, index):
    s = (query.unsqueeze(-2) * key[:, :, index]).sum(-1)
    return s.abs().max(-1).values - s.mean(-1)

# ----------------------------------------------------------------------------- 05.top_u_attention

def _full(query, key, value):
    return torch.softmax(query @ key.mT / math.sqrt(query.shape[-1]), -1) @ value


@answer("05.top_u_attention", PASSES)
def tu_where(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    lazy = value.mean(-2, keepdim=True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), lazy)


@answer("05.top_u_attention", PASSES)
def tu_gather_scatter(query, key, value, measure, u):
    B, H, L_Q, D = query.shape
    top = measure.topk(u, dim=-1).indices  # (B, H, u)
    q = query.gather(-2, top.unsqueeze(-1).expand(B, H, u, D))
    rows = _full(q, key, value)  # (B, H, u, D_v)
    out = value.mean(-2, keepdim=True).expand(B, H, L_Q, value.shape[-1]).clone()
    return out.scatter(-2, top.unsqueeze(-1).expand_as(rows), rows)


@answer("05.top_u_attention", PASSES)
def tu_loop(query, key, value, measure, u):
    B, H, L_Q, _ = query.shape
    rows = []
    for b in range(B):
        for h in range(H):
            order = torch.argsort(measure[b, h], descending=True)[:u]
            out = value[b, h].mean(0).repeat(L_Q, 1)
            att = torch.softmax(query[b, h, order] @ key[b, h].T / query.shape[-1] ** 0.5, dim=-1) @ value[b, h]
            out[order] = att
            rows.append(out)
    return torch.stack(rows).view(B, H, L_Q, -1)


@answer("05.top_u_attention", PASSES)
def tu_course_helpers(query, key, value, measure, u):
    from course_utils import probsparse
    top = probsparse.select_queries(measure, u)
    lazy = probsparse.lazy_context(value, query.shape[-2]).clone()
    idx = top.unsqueeze(-1).expand(*top.shape, query.shape[-1])
    rows = _full(query.gather(-2, idx), key, value)
    lazy.scatter_(-2, top.unsqueeze(-1).expand_as(rows), rows)
    return lazy


@answer("05.top_u_attention", "SMALLEST_U")
def tu_smallest(query, key, value, measure, u):
    top = measure.topk(u, dim=-1, largest=False).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "NO_SCALE")
def tu_no_scale(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    full = torch.softmax(query @ key.mT, -1) @ value
    return torch.where(chosen.unsqueeze(-1), full, value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "LAZY_ZERO")
def tu_lazy_zero(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return _full(query, key, value) * chosen.unsqueeze(-1)


@answer("05.top_u_attention", None)
def tu_lazy_mean_features(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.mean(-1, keepdim=True)[..., :1, :])


@answer("05.top_u_attention", "IGNORES_MEASURE")
def tu_first_u(query, key, value, measure, u):
    chosen = torch.arange(query.shape[-2]) < u
    return torch.where(chosen[:, None], _full(query, key, value), value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "U_OFF_BY_ONE")
def tu_u_plus_one(query, key, value, measure, u):
    top = measure.topk(min(u + 1, measure.shape[-1]), dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.mean(-2, keepdim=True))


@answer("05.top_u_attention", None)
def tu_topk_over_batch(query, key, value, measure, u):
    B, H, L_Q = measure.shape
    top = measure.reshape(-1).topk(u).indices  # u queries over everything
    chosen = torch.zeros(B * H * L_Q, dtype=torch.bool)
    chosen[top] = True
    return torch.where(chosen.view(B, H, L_Q, 1), _full(query, key, value), value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "SOFTMAX_OVER_ALL_QUERIES")
def tu_softmax_dim2(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    full = torch.softmax(query @ key.mT / math.sqrt(query.shape[-1]), -2) @ value
    return torch.where(chosen.unsqueeze(-1), full, value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "SCALE_BY_D_V")
def tu_scale_dv(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    full = torch.softmax(query @ key.mT / math.sqrt(value.shape[-1]), -1) @ value
    return torch.where(chosen.unsqueeze(-1), full, value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "GRADIENT")
def tu_lazy_detached(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.detach().mean(-2, keepdim=True))


@answer("05.top_u_attention", None)
def tu_writes_into_expand(query, key, value, measure, u):
    B, H, L_Q, _ = query.shape
    top = measure.topk(u, dim=-1).indices
    out = value.mean(-2, keepdim=True).expand(B, H, L_Q, value.shape[-1])
    full = _full(query, key, value)
    for b in range(B):
        for h in range(H):
            out[b, h, top[b, h]] = full[b, h, top[b, h]]
    return out


@answer("05.top_u_attention", "INPUT_MODIFIED")
def tu_measure_in_place(query, key, value, measure, u):
    measure -= measure.amax(-1, keepdim=True)
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.mean(-2, keepdim=True))


@answer("05.top_u_attention", "FLOAT32")
def tu_float32(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value.mean(-2, keepdim=True)).float()


@answer("05.top_u_attention", CRASHES)
def tu_lazy_own_value(query, key, value, measure, u):
    top = measure.topk(u, dim=-1).indices
    chosen = torch.zeros_like(measure, dtype=torch.bool).scatter(-1, top, True)
    return torch.where(chosen.unsqueeze(-1), _full(query, key, value), value[..., :query.shape[-2], :])

# ----------------------------------------------------------------------------- 05.causal_prob_sparse

def _causal_full(query, key, value):
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    s = (query @ key.mT / math.sqrt(query.shape[-1])).masked_fill(~keep, float("-inf"))
    return s.softmax(-1) @ value


def _chosen(selected, L):
    return torch.zeros(*selected.shape[:-1], L, dtype=torch.bool).scatter(-1, selected, True).unsqueeze(-1)


def _cummean(value):
    L = value.shape[-2]
    return value.cumsum(-2) / torch.arange(1, L + 1, dtype=value.dtype).unsqueeze(-1)


@answer("05.causal_prob_sparse", PASSES)
def cp_where(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _causal_full(query, key, value), _cummean(value))


@answer("05.causal_prob_sparse", PASSES)
def cp_gather_scatter(query, key, value, selected):
    from course_utils import probsparse
    _, _, L, D = query.shape
    q = query.gather(-2, selected.unsqueeze(-1).expand(*selected.shape, D))  # (B, H, u, D)
    keep = probsparse.causal_keep(selected, L)  # (B, H, u, L)
    s = (q @ key.mT / math.sqrt(D)).masked_fill(~keep, float("-inf"))
    rows = s.softmax(-1) @ value
    lazy = probsparse.lazy_context(value, L, causal=True)
    return lazy.scatter(-2, selected.unsqueeze(-1).expand_as(rows), rows)


@answer("05.causal_prob_sparse", PASSES)
def cp_loop(query, key, value, selected):
    B, H, L, D = query.shape
    out = []
    for b in range(B):
        for h in range(H):
            rows = []
            chosen = set(selected[b, h].tolist())
            for i in range(L):
                if i in chosen:
                    w = torch.softmax(key[b, h, :i + 1] @ query[b, h, i] / math.sqrt(D), 0)
                    rows.append(w @ value[b, h, :i + 1])
                else:
                    rows.append(value[b, h, :i + 1].mean(0))
            out.append(torch.stack(rows))
    return torch.stack(out).view(B, H, L, -1)


@answer("05.causal_prob_sparse", PASSES)
def cp_float64_triu_mask(query, key, value, selected):
    L = query.shape[-2]
    future = torch.triu(torch.ones(L, L), diagonal=1).bool()
    s = (query.double() @ key.double().transpose(-1, -2)) / math.sqrt(query.shape[-1])
    w = torch.where(future, torch.tensor(float("-inf"), dtype=torch.float64), s).softmax(-1)
    full = (w @ value.double()).to(query.dtype)
    lazy = torch.tril(torch.ones(L, L, dtype=value.dtype))
    lazy = (lazy / lazy.sum(-1, keepdim=True)) @ value
    return torch.where(_chosen(selected, L), full, lazy)


@answer("05.causal_prob_sparse", "LAZY_SEES_FUTURE")
def cp_lazy_mean_all(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _causal_full(query, key, value),
                       value.mean(-2, keepdim=True))


@answer("05.causal_prob_sparse", "CHOSEN_SEES_FUTURE")
def cp_no_causal_for_chosen(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _full(query, key, value), _cummean(value))


@answer("05.causal_prob_sparse", None)
def cp_strict_mask(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).tril(-1)
    s = (query @ key.mT / math.sqrt(query.shape[-1])).masked_fill(~keep, float("-inf"))
    full = s.softmax(-1).nan_to_num(0.0) @ value
    return torch.where(_chosen(selected, L), full, _cummean(value))


@answer("05.causal_prob_sparse", "MASK_BY_ROW")
def cp_mask_by_rank(query, key, value, selected):
    # the mask of the chosen rows built from their rank 0 … u-1, not their positions
    B, H, L, D = query.shape
    u = selected.shape[-1]
    q = query.gather(-2, selected.unsqueeze(-1).expand(B, H, u, D))
    keep = torch.arange(L) <= torch.arange(u)[:, None]
    rows = (q @ key.mT / math.sqrt(D)).masked_fill(~keep, float("-inf")).softmax(-1) @ value
    return _cummean(value).scatter(-2, selected.unsqueeze(-1).expand_as(rows), rows)


@answer("05.causal_prob_sparse", "CUMSUM_NOT_MEAN")
def cp_cumsum_not_divided(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _causal_full(query, key, value), value.cumsum(-2))


@answer("05.causal_prob_sparse", "CUMSUM_OVER_L")
def cp_cummean_divided_by_L(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _causal_full(query, key, value),
                       value.cumsum(-2) / value.shape[-2])


@answer("05.causal_prob_sparse", None)
def cp_cummean_off_by_one(query, key, value, selected):
    L = value.shape[-2]
    lazy = value.cumsum(-2) / torch.arange(2, L + 2, dtype=value.dtype).unsqueeze(-1)
    return torch.where(_chosen(selected, L), _causal_full(query, key, value), lazy)


@answer("05.causal_prob_sparse", "NO_SCALE")
def cp_no_scale(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    full = (query @ key.mT).masked_fill(~keep, float("-inf")).softmax(-1) @ value
    return torch.where(_chosen(selected, L), full, _cummean(value))


@answer("05.causal_prob_sparse", "MASK_FLIPPED")
def cp_mask_triu(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).triu()
    full = (query @ key.mT / math.sqrt(query.shape[-1])).masked_fill(~keep, float("-inf")).softmax(-1) @ value
    return torch.where(_chosen(selected, L), full, _cummean(value))


@answer("05.causal_prob_sparse", "MASKED_WITH_ZERO")
def cp_fill_zero(query, key, value, selected):
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    full = (query @ key.mT / math.sqrt(query.shape[-1])).masked_fill(~keep, 0.0).softmax(-1) @ value
    return torch.where(_chosen(selected, L), full, _cummean(value))


@answer("05.causal_prob_sparse", "SHARED_SELECTION")
def cp_selection_of_first_item(query, key, value, selected):
    L = query.shape[-2]
    chosen = torch.zeros(L, dtype=torch.bool)
    chosen[selected[0, 0]] = True
    return torch.where(chosen[:, None], _causal_full(query, key, value), _cummean(value))


@answer("05.causal_prob_sparse", None)
def cp_lazy_own_value(query, key, value, selected):
    return torch.where(_chosen(selected, query.shape[-2]), _causal_full(query, key, value), value)


@answer("05.causal_prob_sparse", "INPUT_MODIFIED")
def cp_scaled_in_place(query, key, value, selected):
    query /= math.sqrt(query.shape[-1])
    L = query.shape[-2]
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    full = (query @ key.mT).masked_fill(~keep, float("-inf")).softmax(-1) @ value
    return torch.where(_chosen(selected, L), full, _cummean(value))


@answer("05.causal_prob_sparse", "FLOAT32")
def cp_float32(query, key, value, selected):
    return cp_where(query.float(), key.float(), value.float(), selected)


@answer("05.causal_prob_sparse", None)
def cp_rows_in_sorted_order(query, key, value, selected):
    # sorts the positions for the mask but scatters with the unsorted ones
    _, _, L, D = query.shape
    ordered = selected.sort(-1).values
    q = query.gather(-2, ordered.unsqueeze(-1).expand(*selected.shape, D))
    keep = torch.arange(L) <= ordered.unsqueeze(-1)
    rows = (q @ key.mT / math.sqrt(D)).masked_fill(~keep, float("-inf")).softmax(-1) @ value
    return _cummean(value).scatter(-2, selected.unsqueeze(-1).expand_as(rows), rows)
# ----------------------------------------------------------------------------- 06.sinusoidal_encoding

@answer("06.sinusoidal_encoding", PASSES)
def pe_float64_slices(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / 10000 ** (two_i / d_model)  # (L, ceil(E/2))
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, :d_model // 2])
    return pe.float()


@answer("06.sinusoidal_encoding", PASSES)
def pe_python_loop(length, d_model):
    pe = torch.empty(length, d_model)
    for p in range(length):
        for j in range(d_model):
            i = j // 2
            a = p / 10000 ** (2 * i / d_model)
            pe[p, j] = math.sin(a) if j % 2 == 0 else math.cos(a)
    return pe


@answer("06.sinusoidal_encoding", PASSES)
def pe_stack_interleave(length, d_model):
    pairs = (d_model + 1) // 2
    div = torch.exp(torch.arange(pairs, dtype=torch.float64) * (-2 * math.log(10000.0) / d_model))
    angle = torch.arange(length, dtype=torch.float64).unsqueeze(1) * div
    pe = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(length, 2 * pairs)
    return pe[:, :d_model].to(torch.float32)


@answer("06.sinusoidal_encoding", PASSES)
def pe_outer_pow(length, d_model):
    freq = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -torch.arange(d_model).div(2, rounding_mode="floor") * 2.0 / d_model)
    angle = torch.outer(torch.arange(length, dtype=torch.float64), freq)  # (L, E)
    even = torch.arange(d_model) % 2 == 0
    return torch.where(even, angle.sin(), angle.cos()).float()


@answer("06.sinusoidal_encoding", "HALVES")
def pe_blocks(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([angle.sin(), angle.cos()], -1)[:, :d_model].float()


@answer("06.sinusoidal_encoding", "PAIR_INDEX_WITHOUT_TWO")
def pe_i_over_e(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange((d_model + 1) // 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, :d_model // 2].cos()
    return pe.float()


@answer("06.sinusoidal_encoding", "FEATURE_INDEX_EXPONENT")
def pe_feature_index_exponent(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(d_model, dtype=torch.float64) / d_model)  # j / E for every feature j
    pe = angle.clone()
    pe[:, 0::2] = angle[:, 0::2].sin()
    pe[:, 1::2] = angle[:, 1::2].cos()
    return pe.float()


@answer("06.sinusoidal_encoding", "SIN_COS_SWAPPED")
def pe_sin_cos_swapped(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.cos()
    pe[:, 1::2] = angle[:, :d_model // 2].sin()
    return pe.float()


@answer("06.sinusoidal_encoding", "ODD_D_MODEL_CRASHES")
def pe_even_only(length, d_model):
    # the usual tutorial code: right for an even E, a crash for an odd one
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.float()


@answer("06.sinusoidal_encoding", "POSITIONS_FROM_ONE")
def pe_positions_from_one(length, d_model):
    pos = torch.arange(1, length + 1, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, :d_model // 2].cos()
    return pe.float()


@answer("06.sinusoidal_encoding", PASSES)  # float64 angles are advised, not required: float32 stays within tolerance
def pe_float32_angles(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[:d_model // 2])
    return pe


@answer("06.sinusoidal_encoding", "FLOAT64")
def pe_returns_float64(length, d_model):
    return pe_float64_slices(length, d_model).double()


@answer("06.sinusoidal_encoding", None)
def pe_batch_dim(length, d_model):
    return pe_float64_slices(length, d_model).unsqueeze(0)


@answer("06.sinusoidal_encoding", "INTEGER_EXPONENT")
def pe_integer_exponent(length, d_model):
    pe = torch.zeros(length, d_model)
    for p in range(length):
        for i in range(0, d_model, 2):
            a = p / 10000 ** (i // d_model)  # integer division: the exponent is always 0
            pe[p, i] = math.sin(a)
            if i + 1 < d_model:
                pe[p, i + 1] = math.cos(a)
    return pe


@answer("06.sinusoidal_encoding", "FEATURE_INDEX_EXPONENT")
def pe_cos_uses_next_exponent(length, d_model):
    pe = torch.zeros(length, d_model)
    for p in range(length):
        for j in range(0, d_model, 2):
            pe[p, j] = math.sin(p / 10000 ** (j / d_model))
            if j + 1 < d_model:
                pe[p, j + 1] = math.cos(p / 10000 ** ((j + 1) / d_model))  # the Annotated-Transformer-blog slip
    return pe


@answer("06.sinusoidal_encoding", None)
def pe_half_e(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / (d_model // 2))
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, :d_model // 2].cos()
    return pe.float()


@answer("06.sinusoidal_encoding", "FORBIDDEN")
def pe_course_function(length, d_model):
    from course_utils import transformer
    return transformer.sinusoidal_encoding(length, d_model)

# ----------------------------------------------------------------------------- 06.offset_rotation

def _omega(d_model, dtype=torch.float64):
    return 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=dtype) / d_model)


@answer("06.offset_rotation", PASSES)
def rot_loop(k, d_model):
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        phi = k / 10000 ** (2 * i / d_model)
        c, s = math.cos(phi), math.sin(phi)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, s
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = -s, c
    return R


@answer("06.offset_rotation", PASSES)
def rot_block_diag(k, d_model):
    phi = k * _omega(d_model)
    blocks = [torch.stack([torch.stack([p.cos(), p.sin()]), torch.stack([-p.sin(), p.cos()])]) for p in phi]
    return torch.block_diag(*blocks)


@answer("06.offset_rotation", PASSES)
def rot_strided(k, d_model):
    phi = k * _omega(d_model)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    i = torch.arange(d_model // 2)
    R[2 * i, 2 * i] = phi.cos()
    R[2 * i, 2 * i + 1] = phi.sin()
    R[2 * i + 1, 2 * i] = -phi.sin()
    R[2 * i + 1, 2 * i + 1] = phi.cos()
    return R


@answer("06.offset_rotation", PASSES)
def rot_kron(k, d_model):
    phi = k * _omega(d_model)
    eye = torch.eye(d_model // 2, dtype=torch.float64)
    c = torch.kron(torch.diag(phi.cos()), torch.eye(2, dtype=torch.float64))
    s = torch.kron(torch.diag(phi.sin()), torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64))
    return c + s + 0 * torch.kron(eye, torch.zeros(2, 2, dtype=torch.float64))


@answer("06.offset_rotation", "TRANSPOSED")
def rot_transposed(k, d_model):
    return rot_strided(k, d_model).T.contiguous()


@answer("06.offset_rotation", "PAIR_INDEX_WITHOUT_TWO")
def rot_i_over_e(k, d_model):
    phi = k / 10000 ** (torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    return torch.block_diag(*[torch.tensor([[p.cos(), p.sin()], [-p.sin(), p.cos()]], dtype=torch.float64) for p in phi])


@answer("06.offset_rotation", None)
def rot_float32_angles(k, d_model):
    phi = (k * _omega(d_model, torch.float32))
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    i = torch.arange(d_model // 2)
    R[2 * i, 2 * i] = phi.cos().double()
    R[2 * i, 2 * i + 1] = phi.sin().double()
    R[2 * i + 1, 2 * i] = -phi.sin().double()
    R[2 * i + 1, 2 * i + 1] = phi.cos().double()
    return R


@answer("06.offset_rotation", "FLOAT32")
def rot_returns_float32(k, d_model):
    return rot_strided(k, d_model).float()


@answer("06.offset_rotation", None)
def rot_abs_k(k, d_model):
    return rot_strided(abs(k), d_model)


@answer("06.offset_rotation", "HALVES")
def rot_half_split(k, d_model):
    # rotary-style layout: pair i is features i and i + E/2
    phi = k * _omega(d_model)
    h = d_model // 2
    i = torch.arange(h)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    R[i, i] = phi.cos()
    R[i, i + h] = phi.sin()
    R[i + h, i] = -phi.sin()
    R[i + h, i + h] = phi.cos()
    return R


@answer("06.offset_rotation", "ANGLE_INVERTED")
def rot_omega_multiplied(k, d_model):
    phi = k * 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    i = torch.arange(d_model // 2)
    R[2 * i, 2 * i] = phi.cos()
    R[2 * i, 2 * i + 1] = phi.sin()
    R[2 * i + 1, 2 * i] = -phi.sin()
    R[2 * i + 1, 2 * i + 1] = phi.cos()
    return R


@answer("06.offset_rotation", "LAST_PAIR_MISSING")
def rot_last_pair_missing(k, d_model):
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2 - 1):
        phi = k / 10000 ** (2 * i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[math.cos(phi), math.sin(phi)], [-math.sin(phi), math.cos(phi)]])
    return R


@answer("06.offset_rotation", None)
def rot_diag_only(k, d_model):
    phi = k * _omega(d_model)
    return torch.diag(phi.cos().repeat_interleave(2))


@answer("06.offset_rotation", None)
def rot_sin_cos_swapped(k, d_model):
    phi = k * _omega(d_model)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    i = torch.arange(d_model // 2)
    R[2 * i, 2 * i] = phi.sin()
    R[2 * i, 2 * i + 1] = phi.cos()
    R[2 * i + 1, 2 * i] = -phi.cos()
    R[2 * i + 1, 2 * i + 1] = phi.sin()
    return R


@answer("06.offset_rotation", None)
def rot_degrees(k, d_model):
    return rot_strided(math.radians(k), d_model)


@answer("06.offset_rotation", "FORBIDDEN")
def rot_course_function(k, d_model):
    from course_utils import transformer
    return transformer.offset_rotation(k, d_model)

# ----------------------------------------------------------------------------- 06.post_norm_decoder

def _sublayers(x, self_in_proj_weight, self_out_proj_weight, cross_in_proj_weight, cross_out_proj_weight,
               norm1_weight, norm2_weight, norm3_weight, linear1_weight, linear2_weight, num_heads):
    """The six sub-layers the exercise cell gives, as the cell writes them."""
    E = x.shape[-1]

    def attention(h, context, in_proj_weight, out_proj_weight, key_padding_mask, causal):
        B, L_q, L_k = h.shape[0], h.shape[1], context.shape[1]
        q = F.linear(h, in_proj_weight[:E])
        k, v = F.linear(context, in_proj_weight[E:]).chunk(2, dim=-1)
        q, k, v = (t.view(B, -1, num_heads, E // num_heads).transpose(1, 2) for t in (q, k, v))
        keep = torch.ones(L_q, L_k, dtype=torch.bool)
        if causal:
            keep = keep.tril()
        if key_padding_mask is not None:
            keep = keep & ~key_padding_mask[:, None, None, :]
        scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)
        weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
        out = (weights @ v).transpose(1, 2).reshape(B, L_q, E)
        return F.linear(out, out_proj_weight)

    norm1 = lambda h: F.layer_norm(h, (E,), norm1_weight)
    norm2 = lambda h: F.layer_norm(h, (E,), norm2_weight)
    norm3 = lambda h: F.layer_norm(h, (E,), norm3_weight)

    def self_attention(h, key_padding_mask=None, causal=False):
        return attention(h, h, self_in_proj_weight, self_out_proj_weight, key_padding_mask, causal)

    def cross_attention(h, memory, key_padding_mask=None, causal=False):
        return attention(h, memory, cross_in_proj_weight, cross_out_proj_weight, key_padding_mask, causal)

    def feed_forward(h):
        return F.linear(F.relu(F.linear(h, linear1_weight)), linear2_weight)

    return norm1, norm2, norm3, self_attention, cross_attention, feed_forward


def decoder_answer(expected):
    """Registers a wiring: wiring(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff)."""
    def add(wiring):
        def post_norm_decoder_layer(x, memory, tgt_key_padding_mask, memory_key_padding_mask, norm1_weight,
                                    self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
                                    cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight, num_heads):
            parts = _sublayers(x, self_in_proj_weight, self_out_proj_weight, cross_in_proj_weight,
                               cross_out_proj_weight, norm1_weight, norm2_weight, norm3_weight, linear1_weight,
                               linear2_weight, num_heads)
            return wiring(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *parts)

        post_norm_decoder_layer.__name__ = wiring.__name__
        ANSWERS.append(("06.post_norm_decoder", post_norm_decoder_layer, expected))
        return wiring

    return add


@decoder_answer(PASSES)
def dec_plain(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(x + ff(x))


@decoder_answer(PASSES)
def dec_named_steps(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    attended = sa(x, tgt_pad, True)
    h1 = norm1(torch.add(x, attended))
    h2 = norm2(h1 + ca(h1, memory, mem_pad, False))
    return norm3(h2 + ff(h2))


@decoder_answer(PASSES)
def dec_item_by_item(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    outs = []
    for b in range(x.shape[0]):
        xb, mb = x[b:b + 1], memory[b:b + 1]
        tp = None if tgt_pad is None else tgt_pad[b:b + 1]
        mp = None if mem_pad is None else mem_pad[b:b + 1]
        xb = norm1(xb + sa(xb, key_padding_mask=tp, causal=True))
        xb = norm2(xb + ca(xb, mb, key_padding_mask=mp))
        outs.append(norm3(xb + ff(xb)))
    return torch.cat(outs)


@decoder_answer("PRE_NORM")
def dec_pre_norm(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = x + sa(norm1(x), key_padding_mask=tgt_pad, causal=True)
    x = x + ca(norm2(x), memory, key_padding_mask=mem_pad)
    return x + ff(norm3(x))


@decoder_answer("NO_CAUSAL")
def dec_not_causal(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(x + ff(x))


@decoder_answer("CAUSAL_ON_CROSS")
def dec_cross_causal(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad, causal=True))
    return norm3(x + ff(x))


@decoder_answer("TARGET_PADDING_MISSING")
def dec_no_target_padding(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(x + ff(x))


@decoder_answer("MEMORY_PADDING_MISSING")
def dec_no_memory_padding(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm2(x + ca(x, memory))
    return norm3(x + ff(x))


@decoder_answer("MASKS_SWAPPED")
def dec_masks_swapped(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=mem_pad, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=tgt_pad))
    return norm3(x + ff(x))


@decoder_answer("RESIDUAL_AFTER_NORM")
def dec_norm_inside_residual(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = x + norm1(sa(x, key_padding_mask=tgt_pad, causal=True))
    x = x + norm2(ca(x, memory, key_padding_mask=mem_pad))
    return x + norm3(ff(x))


@decoder_answer("NO_FFN_RESIDUAL")
def dec_no_ffn_residual(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(ff(x))


@decoder_answer("NORMS_SWAPPED")
def dec_norms_swapped(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm3(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm2(x + ff(x))


@decoder_answer("CROSS_READS_INPUT")
def dec_cross_reads_input(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    h = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    h = norm2(h + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(h + ff(h))


@decoder_answer("FFN_BEFORE_CROSS")
def dec_ffn_before_cross(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + sa(x, key_padding_mask=tgt_pad, causal=True))
    x = norm2(x + ff(x))
    return norm3(x + ca(x, memory, key_padding_mask=mem_pad))


@decoder_answer("INPUT_MODIFIED")
def dec_in_place(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x += sa(x, key_padding_mask=tgt_pad, causal=True)
    x = norm1(x)
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(x + ff(x))


@decoder_answer("KEEP_MASKS")
def dec_keep_masks(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    # passes "keep" masks (True = attend) where the sub-layers want True at padding
    tp = None if tgt_pad is None else ~tgt_pad
    mp = None if mem_pad is None else ~mem_pad
    x = norm1(x + sa(x, key_padding_mask=tp, causal=True))
    x = norm2(x + ca(x, memory, key_padding_mask=mp))
    return norm3(x + ff(x))


@decoder_answer("FLOAT32")
def dec_float32(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    return dec_plain(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff).float()


@decoder_answer(None)
def dec_self_attends_memory(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    x = norm1(x + ca(x, memory, key_padding_mask=mem_pad))
    x = norm2(x + ca(x, memory, key_padding_mask=mem_pad))
    return norm3(x + ff(x))


@decoder_answer("FORBIDDEN")
def dec_torch_layer(x, memory, tgt_pad, mem_pad, norm1, norm2, norm3, sa, ca, ff):
    E = x.shape[-1]
    layer = torch.nn.TransformerDecoderLayer(E, 1, 4, dropout=0.0, bias=False, batch_first=True).to(x.dtype)
    return layer(x, memory)

# ----------------------------------------------------------------------------- the verdicts


@pytest.mark.parametrize("exercise, function, expected", ANSWERS, ids=ANSWERS.ids)
def test_a_learners_answer_gets_its_verdict(exercise, function, expected):
    verdict = evaluate(exercise, function)
    assert holds(verdict, expected), (verdict.status, verdict.code, verdict.message)


@pytest.mark.slow  # (the grader's hidden cases: not in `make quick`)
@pytest.mark.parametrize("exercise, function, expected", ANSWERS, ids=ANSWERS.ids)
def test_a_learners_answer_gets_the_same_verdict_from_the_grader(exercise, function, expected):
    """As the grader judges it, on the public cases and hidden ones drawn from a teacher's seed: a right
    answer passes there too, and a wrong one fails the same way (named by the same mistake where the
    public cases name one)."""
    verdict = evaluate_hidden(exercise, function, hidden_seed=HIDDEN_SEED)
    assert holds(verdict, expected), (verdict.status, verdict.code, verdict.message)


def test_every_exercise_has_its_right_and_wrong_answers():
    exercises = {e for e in EXERCISES if e[:3] in ("04.", "05.", "06.")}
    for exercise in exercises:
        right = [x for e, _, x in ANSWERS if e == exercise and x == PASSES]
        wrong = [x for e, _, x in ANSWERS if e == exercise and x != PASSES]
        assert len(right) >= 3 and len(wrong) >= 10, (exercise, len(right), len(wrong))
    assert {e for e, _, _ in ANSWERS} == exercises


def test_every_wrong_answer_is_caught_and_seven_in_ten_are_named():
    wrong = ANSWERS.wrong()
    found = [code for code in wrong if named(code)]
    assert len(wrong) >= 100 and len(found) >= 0.7 * len(wrong), (len(found), len(wrong))
