"""Wrong answers to lessons 00-03's exercises, written the way learners write them (not the way the
known mistakes are written on the teacher's side), each with the verdict its check must give: the
code of the mistake it names, or None where the check catches it without naming it (the verdict
then says what differs). One right answer that looks wrong passes. Every wrong answer is caught;
the test at the end counts how many are named.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from learner_answers import PASSES, Answers, holds, named

from course_utils.exercises import evaluate

ANSWERS = Answers()
answer = ANSWERS.answer

# ----------------------------------------------------------------------------- 00.padding_mask

@answer("00.padding_mask", "MASK_INVERTED")
def mask_ge(lengths, max_len):
    return (torch.arange(max_len).unsqueeze(0) >= lengths.unsqueeze(1)).unsqueeze(1).unsqueeze(1)


@answer("00.padding_mask", "FLOAT_MASK")
def mask_loop_float(lengths, max_len):
    m = torch.zeros(len(lengths), max_len)
    for i, n in enumerate(lengths):
        m[i, :n] = 1
    return m.view(len(lengths), 1, 1, max_len)


@answer("00.padding_mask", "NO_UNSQUEEZE")
def mask_two_dims(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


@answer("00.padding_mask", "UNSQUEEZED_AT_END")
def mask_view_end(lengths, max_len):
    return (torch.arange(max_len) < lengths.view(-1, 1)).view(len(lengths), max_len, 1, 1)


@answer("00.padding_mask", "POSITIONS_FROM_ONE")
def mask_from_one(lengths, max_len):
    pos = torch.arange(1, max_len + 1)
    return (pos < lengths.unsqueeze(-1))[:, None, None]


@answer("00.padding_mask", "MAX_LEN_IGNORED")
def mask_maxlen_from_lengths(lengths, max_len):
    L = lengths.max().item()
    return (torch.arange(L)[None] < lengths[:, None])[:, None, None, :]


@answer("00.padding_mask", "OFF_BY_ONE")
def mask_le(lengths, max_len):
    return (torch.arange(max_len) <= lengths[:, None]).unsqueeze(1).unsqueeze(2)


@answer("00.padding_mask", "INPUT_MODIFIED")
def mask_mutates(lengths, max_len):
    lengths.unsqueeze_(-1)
    return (torch.arange(max_len) < lengths)[:, None, None, :]


@answer("00.padding_mask", "EXPANDED_TO_SQUARE")
def mask_expand(lengths, max_len):
    m = (torch.arange(max_len) < lengths[:, None])[:, None, None, :]
    return m.expand(len(lengths), 1, max_len, max_len)


@answer("00.padding_mask", None)
def mask_int(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None]).int()[:, None, None, :]

# ----------------------------------------------------------------------------- 00.scores_einsum

@answer("00.scores_einsum", "LAYOUT_BHLD")
def es_bhqk_inputs(q, k):
    return torch.einsum("bhqd,bhkd->bhqk", q, k)


@answer("00.scores_einsum", "POSITIONS_SAME_LETTER")
def es_same_pos(q, k):
    return torch.einsum("bihd,bihd->bhi", q, k)


@answer("00.scores_einsum", None)
def es_out_order(q, k):
    return torch.einsum("bqhd,bkhd->bqkh", q, k)


@answer("00.scores_einsum", "SCALED")
def es_scaled(q, k):
    return torch.einsum("bqhd,bkhd->bhqk", q, k) / q.size(-1) ** 0.5


@answer("00.scores_einsum", "OUTPUT_TRANSPOSED")
def es_kq(q, k):
    return torch.einsum("bqhd,bkhd->bhkq", q, k)

# ----------------------------------------------------------------------------- 00.split_heads

@answer("00.split_heads", "VIEW_NO_PERMUTE")
def sp_view_direct(x, num_heads):
    B, L, E = x.shape
    return x.view(B, num_heads, L, E // num_heads)


@answer("00.split_heads", "NO_TRANSPOSE")
def sp_no_transpose(x, num_heads):
    B, L, _ = x.shape
    return x.view(B, L, num_heads, -1)


@answer("00.split_heads", "WRONG_PERMUTE")
def sp_permute_wrong(x, num_heads):
    B, L, _ = x.shape
    return x.view(B, L, num_heads, -1).permute(0, 2, 3, 1)


@answer("00.split_heads", "CHUNKS_CONCATENATED")
def sp_chunk_cat(x, num_heads):
    return torch.cat(torch.chunk(x, num_heads, dim=2), dim=1)


@answer("00.split_heads", "HEAD_SIZE_SWAPPED")
def sp_head_dim_swapped(x, num_heads):
    B, L, _ = x.shape
    return x.view(B, L, -1, num_heads).transpose(1, 2)


@answer("00.split_heads", "HEADS_BEFORE_BATCH")
def sp_stack0(x, num_heads):
    return torch.stack(x.chunk(num_heads, -1), dim=0)

# ----------------------------------------------------------------------------- 00.merge_heads

@answer("00.merge_heads", "VIEW_NOT_CONTIGUOUS")
def mh_view(x):
    B, H, L, D = x.shape
    return x.transpose(1, 2).view(B, L, H * D)


@answer("00.merge_heads", "RESHAPE_NO_PERMUTE")
def mh_reshape(x):
    B, H, L, D = x.shape
    return x.reshape(B, L, H * D)


@answer("00.merge_heads", "CONCAT_ALONG_POSITIONS")
def mh_cat_wrong(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=1)


@answer("00.merge_heads", "FLATTEN_POSITIONS_TOO")
def mh_flatten1(x):
    return x.permute(0, 2, 1, 3).flatten(1)


@answer("00.merge_heads", "HEADS_AVERAGED")
def mh_mean(x):
    return x.mean(dim=1)


@answer("00.merge_heads", "HEAD_DIM_FIRST")
def mh_permute_dh(x):
    B, _, L, _ = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, -1)

# ----------------------------------------------------------------------------- 01.softmax

@answer("01.softmax", "NO_MAX_SHIFT")
def sm_naive(s):
    return torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)


@answer("01.softmax", None)
def sm_f64(s):
    e = torch.exp(s.double())
    return (e / e.sum(dim=-1, keepdim=True)).float()


@answer("01.softmax", "FLOAT64_NO_SHIFT")
def sm_f64_to(s):
    e = s.to(torch.float64).exp()
    return (e / e.sum(-1, keepdim=True)).to(s.dtype)


@answer("01.softmax", "GLOBAL_SHIFT")
def sm_global_max(s):
    e = torch.exp(s - s.max())
    return e / e.sum(-1, keepdim=True)


@answer("01.softmax", "DIM_1")
def sm_dim1(s):
    e = torch.exp(s - s.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


@answer("01.softmax", "DIM_0")
def sm_dim0(s):
    e = torch.exp(s - s.max(dim=0, keepdim=True).values)
    return e / e.sum(dim=0, keepdim=True)


@answer("01.softmax", "SUM_KEEPDIM_MISSING")
def sm_nokeepdim_sum(s):
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1)


@answer("01.softmax", "GLOBAL_SUM")
def sm_sum_all(s):
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / torch.sum(e)


@answer("01.softmax", "SHIFT_NUMERATOR_ONLY")
def sm_numerator_only(s):
    return torch.exp(s - s.amax(-1, keepdim=True)) / torch.exp(s).sum(-1, keepdim=True)


@answer("01.softmax", "INPUT_MODIFIED")
def sm_inplace(s):
    s -= s.amax(-1, keepdim=True)
    e = s.exp()
    return e / e.sum(-1, keepdim=True)


@answer("01.softmax", "LOG_SOFTMAX")
def sm_log(s):
    return s - torch.logsumexp(s, dim=-1, keepdim=True)


@answer("01.softmax", "VIEW_NOT_CONTIGUOUS")
def sm_view(s):
    flat = s.view(-1, s.shape[-1])
    e = torch.exp(flat - flat.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).view(s.shape)


@answer("01.softmax", None)
def sm_clamp(s):
    e = torch.exp(s.clamp(-80, 80))
    return e / e.sum(-1, keepdim=True)


@answer("01.softmax", None)
def sm_min_shift(s):
    e = torch.exp(s - s.amin(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

# ----------------------------------------------------------------------------- 01.scaled_dot

@answer("01.scaled_dot", "NO_SCALE")
def sd_noscale(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1); return w @ v, w


@answer("01.scaled_dot", "SCALE_DK")
def sd_dk(q, k, v):
    w = torch.softmax(q @ k.transpose(1, 2) / q.size(-1), dim=-1); return w @ v, w


@answer("01.scaled_dot", "SCALE_HARD_CODED")
def sd_eight(q, k, v):
    w = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / 8, dim=-1); return torch.bmm(w, v), w


@answer("01.scaled_dot", "SCALE_BY_L_Q")
def sd_size1(q, k, v):
    d_k = q.size(1)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1); return w @ v, w


@answer("01.scaled_dot", "SOFTMAX_BATCH_DIM")
def sd_nodim(q, k, v):
    w = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])); return w @ v, w


@answer("01.scaled_dot", "KEY_T")
def sd_kT(q, k, v):
    w = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1); return w @ v, w


@answer("01.scaled_dot", "KEY_TRANSPOSE_01")
def sd_t01(q, k, v):
    w = torch.softmax(torch.matmul(q, k.transpose(0, 1)) / math.sqrt(q.shape[-1]), dim=-1); return w @ v, w


@answer("01.scaled_dot", "KEY_RESHAPED")
def sd_reshape(q, k, v):
    B, L, D = k.shape
    w = torch.softmax(q @ k.reshape(B, D, L) / math.sqrt(D), dim=-1); return w @ v, w


@answer("01.scaled_dot", "KEY_VIEWED")
def sd_view(q, k, v):
    B, L, D = k.shape
    w = torch.softmax(q @ k.view(B, D, L) / math.sqrt(D), dim=-1); return w @ v, w


@answer("01.scaled_dot", "SWAPPED_RETURN")
def sd_swapped(q, k, v):
    w = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1); return w, w @ v


@answer("01.scaled_dot", "RETURNS_SCORES")
def sd_scores(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1]); return torch.softmax(s, -1) @ v, s


@answer("01.scaled_dot", "SOFTMAX_DIM")
def sd_dim1(q, k, v):
    w = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=1); return w @ v, w


@answer("01.scaled_dot", "SCALE_DV")
def sd_dv(q, k, v):
    w = torch.softmax(q @ k.mT / math.sqrt(v.shape[-1]), dim=-1); return w @ v, w


@answer("01.scaled_dot", None)
def sd_float_sqrt_tensor(q, k, v):
    w = torch.softmax(q @ k.mT / torch.sqrt(torch.tensor(q.shape[-1], dtype=torch.float32)), dim=-1); return (w @ v).float(), w.float()


@answer("01.scaled_dot", "INPUT_MODIFIED")
def sd_inplace(q, k, v):
    q /= math.sqrt(q.shape[-1])
    w = torch.softmax(q @ k.mT, dim=-1); return w @ v, w

# ----------------------------------------------------------------------------- 01.additive_scores

@answer("01.additive_scores", "V_ON_THE_LEFT")
def ad_vleft(q, k, wq, wk, v):
    return v @ torch.tanh((q @ wq).unsqueeze(2) + (k @ wk).unsqueeze(1))


@answer("01.additive_scores", "TANH_MISSING")
def ad_no_tanh(q, k, wq, wk, v):
    return ((q @ wq).unsqueeze(2) + (k @ wk).unsqueeze(1)) @ v


@answer("01.additive_scores", "NO_V")
def ad_sum(q, k, wq, wk, v):
    return torch.tanh((q @ wq).unsqueeze(2) + (k @ wk).unsqueeze(1)).sum(-1)


@answer("01.additive_scores", "TRANSPOSED")
def ad_unsq_wrong(q, k, wq, wk, v):
    return torch.tanh((q @ wq).unsqueeze(1) + (k @ wk).unsqueeze(2)) @ v


@answer("01.additive_scores", "WEIGHTS_TRANSPOSED")
def ad_weights_T(q, k, wq, wk, v):
    return torch.tanh((q @ wq.T).unsqueeze(2) + (k @ wk.T).unsqueeze(1)) @ v


@answer("01.additive_scores", "TRANSPOSED")
def ad_einsum_wrong(q, k, wq, wk, v):
    h = torch.tanh(torch.einsum("bqd,dh->bqh", q, wq)[:, :, None] + torch.einsum("bkd,dh->bkh", k, wk)[:, None])
    return torch.einsum("bqkh,h->bkq", h, v)

# ----------------------------------------------------------------------------- 02.causal_mask

@answer("02.causal_mask", "FLOAT_MASK")
def cm_float(L_q, L_k):
    return torch.tril(torch.ones(L_q, L_k))


@answer("02.causal_mask", "MASK_INVERTED")
def cm_triu1(L_q, L_k):
    return torch.triu(torch.ones(L_q, L_k, dtype=torch.bool), diagonal=1)


@answer("02.causal_mask", "HIDES_DIAGONAL")
def cm_gt(L_q, L_k):
    return torch.arange(L_q)[:, None] > torch.arange(L_k)[None]


@answer("02.causal_mask", "SEES_NEXT_KEY")
def cm_tril1(L_q, L_k):
    return torch.ones(L_q, L_k).tril(diagonal=1).bool()


@answer("02.causal_mask", "TRANSPOSED")
def cm_T(L_q, L_k):
    return torch.arange(L_k)[:, None] <= torch.arange(L_q)[None, :]


@answer("02.causal_mask", "IGNORES_L_K")
def cm_square(L_q, L_k):
    return torch.tril(torch.ones(L_q, L_q)).bool()


@answer("02.causal_mask", "IGNORES_L_Q")
def cm_square_k(L_q, L_k):
    return torch.tril(torch.ones(L_k, L_k)).bool()


@answer("02.causal_mask", None)
def cm_bottom(L_q, L_k):
    return torch.ones(L_k, L_k, dtype=torch.bool).tril()[-L_q:]


@answer("02.causal_mask", "ADDITIVE_MASK")
def cm_additive(L_q, L_k):
    return torch.triu(torch.full((L_q, L_k), float("-inf")), diagonal=1)


@answer("02.causal_mask", None)
def cm_uint8(L_q, L_k):
    return torch.tril(torch.ones(L_q, L_k, dtype=torch.uint8))

# ----------------------------------------------------------------------------- 02.decoder_mask

@answer("02.decoder_mask", "OR_NOT_AND")
def dm_or(lengths, max_len):
    pad = (torch.arange(max_len) < lengths[:, None])[:, None, None, :]
    return pad | torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "FLOAT_MASK")
def dm_float(lengths, max_len):
    pad = (torch.arange(max_len) < lengths[:, None]).float()[:, None, None, :]
    return pad * torch.tril(torch.ones(max_len, max_len))


@answer("02.decoder_mask", "HIDES_PADDED_QUERIES")
def dm_query_pad(lengths, max_len):
    pad = (torch.arange(max_len) < lengths[:, None])[:, None, :, None]
    return pad & torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "NO_HEAD_AXIS")
def dm_no_head(lengths, max_len):
    pad = (torch.arange(max_len) < lengths[:, None])[:, None, :]
    return pad & torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "OFF_BY_ONE")
def dm_le(lengths, max_len):
    pad = (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]
    return pad & torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "CAUSAL_UPPER")
def dm_triu(lengths, max_len):
    pad = (torch.arange(max_len) < lengths[:, None])[:, None, None, :]
    return pad & torch.triu(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "INPUT_MODIFIED")
def dm_mutates(lengths, max_len):
    lengths.clamp_(max=max_len)
    lengths -= 1
    pad = (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]
    return pad & torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))


@answer("02.decoder_mask", "MASK_INVERTED")
def dm_inverted(lengths, max_len):
    pad = (torch.arange(max_len) >= lengths[:, None])[:, None, None, :]
    return pad | torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1)


@answer("02.decoder_mask", "IGNORES_MAX_LEN")
def dm_maxlen(lengths, max_len):
    L = int(lengths.max())
    pad = (torch.arange(L) < lengths[:, None])[:, None, None, :]
    return pad & torch.tril(torch.ones(L, L, dtype=torch.bool))

# ----------------------------------------------------------------------------- 02.masked_softmax

@answer("02.masked_softmax", "NAN_ON_FULLY_MASKED")
def ms_naive(scores, keep_mask):
    return torch.softmax(scores.masked_fill(~keep_mask, float("-inf")), dim=-1)


@answer("02.masked_softmax", "FILL_ZERO_ONLY")
def ms_zero(scores, keep_mask):
    return torch.softmax(scores.masked_fill(keep_mask == 0, 0), dim=-1)


@answer("02.masked_softmax", "FINITE_FILL")
def ms_1e9(scores, keep_mask):
    return torch.softmax(scores.masked_fill(~keep_mask, -1e9), dim=-1)


@answer("02.masked_softmax", "MASK_INVERTED")
def ms_inverted(scores, keep_mask):
    w = torch.softmax(scores.masked_fill(keep_mask, float("-inf")), dim=-1)
    return torch.nan_to_num(w)


@answer("02.masked_softmax", "MASK_AFTER_SOFTMAX")
def ms_after(scores, keep_mask):
    return torch.softmax(scores, dim=-1) * keep_mask


@answer("02.masked_softmax", None)
def ms_renorm(scores, keep_mask):
    w = torch.softmax(scores, -1) * keep_mask
    return w / w.sum(-1, keepdim=True).clamp_min(1e-12)


@answer("02.masked_softmax", "INPUT_MODIFIED")
def ms_inplace(scores, keep_mask):
    empty = ~keep_mask.any(-1, keepdim=True)
    scores.masked_fill_(~keep_mask, float("-inf"))
    scores.masked_fill_(empty, 0)
    return scores.softmax(-1).masked_fill(empty, 0)


@answer("02.masked_softmax", "NO_KEEPDIM")
def ms_nokeepdim(scores, keep_mask):
    empty = ~keep_mask.any(-1)
    w = scores.masked_fill(~keep_mask, float("-inf")).masked_fill(empty, 0).softmax(-1)
    return w.masked_fill(empty, 0)


@answer("02.masked_softmax", PASSES)  # right: torch.where sends no gradient to the hidden scores, so no NaN
def ms_where_nan(scores, keep_mask):
    w = torch.softmax(torch.where(keep_mask, scores, float("-inf")), -1)
    return torch.where(torch.isnan(w), torch.zeros_like(w), w)


@answer("02.masked_softmax", "SOFTMAX_DIM")
def ms_dim2(scores, keep_mask):
    empty = ~keep_mask.any(-1, keepdim=True)
    w = scores.masked_fill(~keep_mask, float("-inf")).masked_fill(empty, 0).softmax(-2)
    return w.masked_fill(empty, 0)

# ----------------------------------------------------------------------------- 03.self_attention

@answer("03.self_attention", "SCALE_BY_E")
def sa_scale_E(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(x.shape[-1]), -1); return w @ v, w


@answer("03.self_attention", "SCALE_BY_D_V")
def sa_scale_dv(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(v.shape[-1]), -1); return w @ v, w


@answer("03.self_attention", "WEIGHTS_TRANSPOSED")
def sa_linear_T(x, w_q, w_k, w_v):
    q, k, v = F.linear(x, w_q), F.linear(x, w_k), F.linear(x, w_v)
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1); return w @ v, w


@answer("03.self_attention", "SOFTMAX_BATCH_DIM")
def sa_nodim(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.nn.Softmax()(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])); return w @ v, w


@answer("03.self_attention", "MATMUL_ORDER")
def sa_order(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1); return v @ w, w


@answer("03.self_attention", None)
def sa_float32(x, w_q, w_k, w_v):
    q, k, v = x.float() @ w_q.float(), x.float() @ w_k.float(), x.float() @ w_v.float()
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1); return w @ v, w


@answer("03.self_attention", "QK_SWAPPED")
def sa_kq(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(k @ q.transpose(1, 2) / math.sqrt(q.shape[-1]), -1); return w @ v, w

# ----------------------------------------------------------------------------- 03.cross_attention

@answer("03.cross_attention", "KV_FROM_QUERY")
def ca_self(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1); return w @ v, w


@answer("03.cross_attention", "SIDES_SWAPPED")
def ca_sides(x, memory, w_q, w_k, w_v):
    q, k, v = memory @ w_q, x @ w_k, x @ w_v
    w = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1); return w @ v, w


@answer("03.cross_attention", "SCALE_BY_E_KV")
def ca_scale_kv(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    w = torch.softmax(q @ k.mT / math.sqrt(memory.size(-1)), -1); return w @ v, w


@answer("03.cross_attention", "SCALE_BY_D_V")
def ca_scale_dv(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    w = torch.softmax(q @ k.mT / math.sqrt(v.size(-1)), -1); return w @ v, w


@answer("03.cross_attention", "SOFTMAX_BATCH_DIM")
def ca_nodim(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    w = F.softmax(q @ k.mT / math.sqrt(q.size(-1))); return w @ v, w


@answer("03.cross_attention", "SOFTMAX_DIM")
def ca_dim1(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    w = F.softmax(q @ k.mT / math.sqrt(q.size(-1)), dim=1); return w @ v, w


@answer("03.cross_attention", "V_FROM_QUERY")
def ca_v_from_x(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, x @ w_v
    w = torch.softmax(q @ k.mT / math.sqrt(q.size(-1)), -1); return w @ v, w

# ----------------------------------------------------------------------------- 03.alignment

@answer("03.alignment", "MASK_UNUSED")
def al_nomask(weights, keep_mask):
    return weights.argmax(-1)


@answer("03.alignment", "FILL_ZERO")
def al_zero(weights, keep_mask):
    best = (weights * keep_mask).argmax(dim=-1)
    best[~keep_mask.any(-1)] = -1
    return best


@answer("03.alignment", "NO_EMPTY_ROW")
def al_no_empty(weights, keep_mask):
    return weights.masked_fill(~keep_mask, float("-inf")).argmax(-1)


@answer("03.alignment", "RETURNS_MAX_VALUES")
def al_values(weights, keep_mask):
    vals, _ = weights.masked_fill(~keep_mask, float("-inf")).max(-1)
    return vals.masked_fill(~keep_mask.any(-1), -1)


@answer("03.alignment", "ARGMAX_KEEPDIM")
def al_keepdim(weights, keep_mask):
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(-1, keepdim=True)
    return torch.where(keep_mask.any(-1, keepdim=True), best, -1)


@answer("03.alignment", "ARGMAX_QUERIES")
def al_dim1(weights, keep_mask):
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(1)
    return best.masked_fill(~keep_mask.any(1), -1)


@answer("03.alignment", "EMPTY_TEST_ALL")
def al_all(weights, keep_mask):
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(-1)
    return torch.where(keep_mask.all(-1), best, -1)


@answer("03.alignment", None)
def al_float_minus1(weights, keep_mask):
    best = weights.masked_fill(~keep_mask, float("-inf")).argmax(-1)
    return torch.where(keep_mask.any(-1), best.float(), torch.tensor(-1.0))


@answer("03.alignment", "MASK_INVERTED_IN_FILL")
def al_inverted(weights, keep_mask):
    best = weights.masked_fill(keep_mask, float("-inf")).argmax(-1)
    return best.masked_fill(~keep_mask.any(-1), -1)


@pytest.mark.parametrize("exercise, function, expected", ANSWERS, ids=ANSWERS.ids)
def test_a_learners_answer_gets_its_verdict(exercise, function, expected):
    verdict = evaluate(exercise, function)
    assert holds(verdict, expected), (verdict.status, verdict.code, verdict.message)


def test_every_wrong_answer_is_caught_and_nine_in_ten_are_named():
    wrong = ANSWERS.wrong()
    found = [code for code in wrong if named(code)]
    assert len(wrong) >= 100 and len(found) >= 0.85 * len(wrong), (len(found), len(wrong))
