"""Lesson 06's exercises beyond the generic tests (tests/test_exercises.py): the references agree
with course_utils.transformer, course_utils.masks and PyTorch's own layers; other correct ways to
write each function pass, values and gradients (so the check does not demand the reference's own
route); the package's encoding and layers are forbidden; a learner's change to torch's global
state is caught and undone; the cases are plain data (they cross to a grader's kernel) and hold
what the module docstring promises."""

import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_teacher.exercises import EXERCISES, prepare
from course_teacher.exercises.l06_transformer import (
    _layer_reference,
    _masks_reference,
    _sinusoidal_reference,
    _sublayers,
)
from course_utils import masks, transformer
from course_utils.exercises import FAILED, PASSED, evaluate
from course_utils.i18n import message


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


def test_every_case_is_plain_data_that_crosses_to_a_kernel():
    """The grader sends the calls with torch.save and the kernel loads them with weights_only=True."""
    for exercise in ("06.sinusoidal_encoding", "06.pre_norm_layer", "06.decoder_masks"):
        calls = prepare(EXERCISES[exercise]).calls
        buffer = io.BytesIO()
        torch.save(calls, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=True)
        assert len(loaded["args"]) == len(calls["args"])


# ----------------------------------------------------------------------------- 06.sinusoidal_encoding


@pytest.mark.parametrize("length, d_model", [(1, 1), (1, 2), (7, 5), (50, 64), (200, 3), (1000, 512)])
def test_the_sinusoidal_reference_is_the_packages_encoding(length, d_model):
    ours = _sinusoidal_reference(length, d_model)
    assert ours.dtype == torch.float32 and ours.shape == (length, d_model)
    # two texts of one formula: equal to float32's rounding (elementwise kernels round alike on one
    # path, but another path or thread count may take another loop for some elements)
    torch.testing.assert_close(ours, transformer.sinusoidal_encoding(length, d_model), rtol=0, atol=1e-6)


def test_the_sinusoidal_reference_follows_the_formula_entry_by_entry():
    length, d_model = 9, 7
    table = _sinusoidal_reference(length, d_model)
    for p in range(length):
        for feature in range(d_model):
            angle = p / 10000 ** ((feature - feature % 2) / d_model)
            expected = math.sin(angle) if feature % 2 == 0 else math.cos(angle)
            assert abs(table[p, feature].item() - expected) < 1e-6


def _encoding_exp_log(length, d_model):
    """The widely copied form: float32 throughout, exp(-log(10000)·2i/E), slices 0::2 and 1::2."""
    position = torch.arange(length).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]
    return pe


def _encoding_loop(length, d_model):
    rows = [[(math.sin if j % 2 == 0 else math.cos)(p / 10000 ** (2 * (j // 2) / d_model)) for j in range(d_model)]
            for p in range(length)]
    return torch.tensor(rows, dtype=torch.float32)


def _encoding_stack(length, d_model):
    pairs = (d_model + 1) // 2
    angles = torch.outer(torch.arange(length, dtype=torch.float32), 10000.0 ** (-torch.arange(pairs) * 2 / d_model))
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)[:, :d_model]


def _encoding_where(length, d_model):
    feature = torch.arange(d_model)
    angles = torch.arange(length)[:, None] / 10000 ** ((feature - feature % 2) / d_model)
    return torch.where(feature % 2 == 0, angles.sin(), angles.cos()).float()


@pytest.mark.parametrize("function", [_encoding_exp_log, _encoding_loop, _encoding_stack, _encoding_where],
                         ids=lambda f: f.__name__)
def test_other_right_encodings_pass(function):
    verdict = evaluate("06.sinusoidal_encoding", function)
    assert verdict.status == PASSED, verdict.message


def test_calling_the_packages_encoding_fails_as_forbidden():
    verdict = evaluate("06.sinusoidal_encoding", lambda length, d_model: transformer.sinusoidal_encoding(length, d_model))
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "course_utils.transformer.sinusoidal_encoding" in verdict.message


def test_a_learner_who_changes_the_default_dtype_is_told_and_the_dtype_is_put_back():
    def float64_by_default(length, d_model):
        torch.set_default_dtype(torch.float64)  # torch.zeros below is then float64
        pe = torch.zeros(length, d_model)
        pe[:, 0::2] = _encoding_exp_log(length, d_model)[:, 0::2]
        pe[:, 1::2] = _encoding_exp_log(length, d_model)[:, 1::2]
        return pe

    verdict = evaluate("06.sinusoidal_encoding", float64_by_default)
    assert torch.get_default_dtype() == torch.float32
    assert verdict.status == FAILED and verdict.code == "FLOAT64", verdict.message
    assert message("check.setting.default_dtype") in verdict.message


def test_the_sinusoidal_cases_cover_length_1_d_model_2_and_odd_d_model():
    cases = _cases("06.sinusoidal_encoding")
    assert any(length == 1 for length, _ in cases) and any(d == 2 for _, d in cases)
    assert sum(d % 2 for _, d in cases) >= 2
    assert any(length > d for length, d in cases) and any(d > length for length, d in cases)
    assert all(length <= 64 for length, _ in cases)  # float32 angles p·ω stay well inside the tolerance


# ----------------------------------------------------------------------------- 06.pre_norm_layer


def _weights(case):
    x, mask, norm1, in_proj, out_proj, norm2, linear1, linear2, heads = case
    return x, mask, heads, {"norm1.weight": norm1, "self_attn.in_proj_weight": in_proj,
                            "self_attn.out_proj.weight": out_proj, "norm2.weight": norm2,
                            "linear1.weight": linear1, "linear2.weight": linear2}


def _torch_layer(x, heads, state):
    E, d_ff = x.shape[-1], state["linear1.weight"].shape[0]
    layer = nn.TransformerEncoderLayer(E, heads, d_ff, dropout=0.0, norm_first=True, bias=False, batch_first=True,
                                       dtype=x.dtype)
    layer.load_state_dict(state)
    return layer


@pytest.mark.parametrize("index", range(7))
def test_the_layer_reference_is_pytorchs_and_the_courses_pre_norm_layer_values_and_gradients(index):
    case = _cases("06.pre_norm_layer")[index]
    x, mask, heads, state = _weights(case)
    torch_layer = _torch_layer(x, heads, state)
    course_layer = transformer.EncoderLayer.from_torch(torch_layer)
    tolerance = {"atol": 1e-5, "rtol": 1e-4} if x.dtype == torch.float32 else {"atol": 1e-10, "rtol": 1e-9}

    x_ref = x.clone().requires_grad_()
    weights = [w.clone().requires_grad_() for w in case[2:8]]
    ours = _layer_reference(x_ref, mask, *weights, heads)
    x_torch = x.clone().requires_grad_()
    theirs = torch_layer(x_torch, src_key_padding_mask=mask)
    course = course_layer(x.clone(), key_padding_mask=mask)
    torch.testing.assert_close(ours, theirs, **tolerance)
    torch.testing.assert_close(ours, course, **tolerance)

    probe = torch.randn(ours.shape, generator=torch.Generator().manual_seed(index), dtype=x.dtype)
    (ours * probe).sum().backward()
    (theirs * probe).sum().backward()
    torch.testing.assert_close(x_ref.grad, x_torch.grad, **tolerance)
    for weight, name in zip(weights, state):
        parameter = dict(torch_layer.named_parameters())[name]
        torch.testing.assert_close(weight.grad, parameter.grad, **tolerance)


def _stub_solution(x, key_padding_mask, norm1_weight, in_proj_weight, out_proj_weight, norm2_weight,
                   linear1_weight, linear2_weight, num_heads):
    """The exercise cell as a learner completes it: its given sub-layers (the module builds the same
    ones), then the three lines."""
    norm1, norm2, self_attention, feed_forward = _sublayers(norm1_weight, in_proj_weight, out_proj_weight,
                                                            norm2_weight, linear1_weight, linear2_weight, num_heads)
    x = x + self_attention(norm1(x), key_padding_mask)
    return x + feed_forward(norm2(x))


def _layer_by_hand(x, key_padding_mask, norm1_weight, in_proj_weight, out_proj_weight, norm2_weight,
                   linear1_weight, linear2_weight, num_heads):
    """Everything written out: LayerNorm from mean and variance, attention with masked_fill."""

    def layer_norm(h, weight):
        mean = h.mean(-1, keepdim=True)
        variance = h.var(-1, keepdim=True, unbiased=False)
        return (h - mean) / torch.sqrt(variance + 1e-5) * weight

    B, L, E = x.shape
    d = E // num_heads
    h = layer_norm(x, norm1_weight)
    q, k, v = (h @ in_proj_weight.T).split(E, dim=-1)
    q, k, v = (t.reshape(B, L, num_heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    out = (torch.softmax(scores, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, L, E)
    x = x + out @ out_proj_weight.T
    return x + torch.relu(layer_norm(x, norm2_weight) @ linear1_weight.T) @ linear2_weight.T


def _layer_through_pytorch_functions(x, key_padding_mask, norm1_weight, in_proj_weight, out_proj_weight,
                                     norm2_weight, linear1_weight, linear2_weight, num_heads):
    """nn.functional's multi-head attention (sequence-first) and layer_norm."""
    E = x.shape[-1]
    h = F.layer_norm(x, (E,), norm1_weight).transpose(0, 1)  # (L, B, E)
    attended, _ = F.multi_head_attention_forward(
        h, h, h, E, num_heads, in_proj_weight, None, None, None, False, 0.0, out_proj_weight, None,
        training=False, key_padding_mask=key_padding_mask, need_weights=False)
    x = x + attended.transpose(0, 1)
    return x + F.linear(F.relu(F.linear(F.layer_norm(x, (E,), norm2_weight), linear1_weight)), linear2_weight)


@pytest.mark.parametrize("function", [_stub_solution, _layer_by_hand, _layer_through_pytorch_functions],
                         ids=lambda f: f.__name__)
def test_other_right_layers_pass_values_and_gradients(function):
    verdict = evaluate("06.pre_norm_layer", function)
    assert verdict.status == PASSED, verdict.message


def test_borrowing_pytorchs_layer_fails_as_forbidden():
    def borrowed(x, key_padding_mask, *weights_and_heads):
        *weights, heads = weights_and_heads
        state = dict(zip(["norm1.weight", "self_attn.in_proj_weight", "self_attn.out_proj.weight", "norm2.weight",
                          "linear1.weight", "linear2.weight"], weights))
        layer = _torch_layer(x, heads, {name: w.detach() for name, w in state.items()})
        return torch.func.functional_call(layer, state, (x,), {"src_key_padding_mask": key_padding_mask})

    verdict = evaluate("06.pre_norm_layer", borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "torch.nn.TransformerEncoderLayer.forward" in verdict.message


def test_a_learner_who_turns_gradients_off_gets_no_graph_and_grad_mode_comes_back():
    def without_gradients(*args):
        torch.set_grad_enabled(False)
        return _stub_solution(*args)

    verdict = evaluate("06.pre_norm_layer", without_gradients)
    assert torch.is_grad_enabled()
    assert verdict.status == FAILED and verdict.code == "NO_GRAPH", verdict.message
    assert message("check.setting.grad_mode") in verdict.message


def test_a_layer_that_detaches_a_weight_fails_on_its_gradient():
    def detached_norm(x, key_padding_mask, norm1_weight, *rest):
        return _stub_solution(x, key_padding_mask, norm1_weight.detach(), *rest)

    verdict = evaluate("06.pre_norm_layer", detached_norm)
    assert verdict.status == FAILED and verdict.code == "GRADIENT" and "norm1_weight" in verdict.message


def test_the_layer_cases_vary_every_size_and_pad_no_item_whole():
    cases = _cases("06.pre_norm_layer")
    sizes = [(x.shape, heads, case[6].shape[0]) for case in cases for x, heads in [(case[0], case[8])]]
    assert any(shape[0] == 1 for shape, _, _ in sizes) and any(shape[1] == 1 for shape, _, _ in sizes)
    assert {heads for _, heads, _ in sizes} >= {1, 2, 8}
    assert any(d_ff != 4 * shape[2] for shape, _, d_ff in sizes)
    assert any(case[1] is None for case in cases) and any(case[0].dtype == torch.float64 for case in cases)
    for case in cases:
        x, mask = case[0], case[1]
        assert not torch.equal(case[2], case[5])  # two different norms
        assert x.mean().abs() > 0.3 and x.std() > 1.5  # far from normalised
        if mask is not None:
            assert mask.dtype == torch.bool and mask.shape == x.shape[:2]
            assert (~mask).any(-1).all()  # no item is padding only
            if x.shape[0] > 1 and x.shape[1] > 1:
                assert len(set((~mask).sum(-1).tolist())) > 1  # items of different lengths
    first_mask = cases[0][1]
    assert first_mask.any(-1).all()  # every item padded: the inverted mask leaves every query a key


# ----------------------------------------------------------------------------- 06.decoder_masks


@pytest.mark.parametrize("index", range(6))
def test_the_masks_reference_is_lesson_02s_masks_and_the_opposite_of_pytorchs(index):
    source_lengths, source_len, target_lengths, target_len = _cases("06.decoder_masks")[index]
    self_keep, cross_keep = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    B = target_lengths.shape[0]
    assert self_keep.dtype == cross_keep.dtype == torch.bool
    assert self_keep.shape == (B, target_len, target_len) and cross_keep.shape == (B, target_len, source_len)
    assert torch.equal(self_keep, (masks.padding_mask(target_lengths, target_len) & masks.causal_mask(target_len))[:, 0])
    assert torch.equal(cross_keep, masks.padding_mask(source_lengths, source_len)[:, 0].expand(-1, target_len, -1))
    # PyTorch: an additive causal mask (-inf above the diagonal) and key padding masks, True at padding
    tgt_padding = torch.arange(target_len) >= target_lengths[:, None]
    memory_padding = torch.arange(source_len) >= source_lengths[:, None]
    hidden = nn.Transformer.generate_square_subsequent_mask(target_len) == -math.inf
    assert torch.equal(~self_keep, hidden | tgt_padding[:, None, :])
    assert torch.equal(~cross_keep, memory_padding[:, None, :].expand(-1, target_len, -1))


def test_the_two_masks_make_a_decoder_layer_compute_what_pytorchs_padding_masks_make_it_compute():
    torch.manual_seed(0)
    layer = transformer.DecoderLayer(8, 2, 16, dropout=0.0).eval()
    source_lengths, source_len, target_lengths, target_len = _cases("06.decoder_masks")[1]
    self_keep, cross_keep = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    x, memory = torch.randn(3, target_len, 8), torch.randn(3, source_len, 8)
    expected = layer(x, memory, tgt_key_padding_mask=torch.arange(target_len) >= target_lengths[:, None],
                     memory_key_padding_mask=torch.arange(source_len) >= source_lengths[:, None])
    ours = layer(x, memory, causal=False, keep_mask=self_keep[:, None], memory_key_padding_mask=~cross_keep[:, 0])
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(layer.to_torch()(x, memory, tgt_mask=~self_keep.repeat_interleave(2, 0),
                                                memory_mask=~cross_keep.repeat_interleave(2, 0)), expected)


def _masks_with_the_package(source_lengths, source_len, target_lengths, target_len):
    self_keep = masks.padding_mask(target_lengths, target_len) & masks.causal_mask(target_len)  # (B, 1, L_t, L_t)
    cross_keep = masks.padding_mask(source_lengths, source_len).repeat(1, 1, target_len, 1)  # (B, 1, L_t, L_s)
    return self_keep.squeeze(1), cross_keep.squeeze(1)


def _masks_by_loops(source_lengths, source_len, target_lengths, target_len):
    B = len(target_lengths)
    self_keep = torch.zeros(B, target_len, target_len, dtype=torch.bool)
    cross_keep = torch.zeros(B, target_len, source_len, dtype=torch.bool)
    for b in range(B):
        for i in range(target_len):
            for j in range(target_len):
                self_keep[b, i, j] = j <= i and j < target_lengths[b]
            cross_keep[b, i, : source_lengths[b]] = True
    return self_keep, cross_keep


def _masks_from_padding(source_lengths, source_len, target_lengths, target_len):
    """PyTorch's masks first (True = hide), then turned into keep masks."""
    tgt_padding = torch.arange(target_len)[None, :] >= target_lengths.unsqueeze(-1)
    memory_padding = torch.arange(source_len)[None, :] >= source_lengths.unsqueeze(-1)
    future = torch.triu(torch.ones(target_len, target_len), diagonal=1).bool()
    self_keep = ~(future | tgt_padding[:, None, :])
    cross_keep = ~memory_padding[:, None, :] & torch.ones(1, target_len, 1, dtype=torch.bool)
    return self_keep, cross_keep


@pytest.mark.parametrize("function", [_masks_with_the_package, _masks_by_loops, _masks_from_padding],
                         ids=lambda f: f.__name__)
def test_other_right_masks_pass(function):
    verdict = evaluate("06.decoder_masks", function)
    assert verdict.status == PASSED, verdict.message


def test_float_masks_fail_naming_the_dtype():
    def floats(*args):
        return tuple(m.float() for m in _masks_reference(*args))

    verdict = evaluate("06.decoder_masks", floats)
    assert verdict.status == FAILED and "bool" in verdict.message and "float32" in verdict.message


def test_the_mask_cases_vary_every_length_on_its_own():
    cases = _cases("06.decoder_masks")
    assert any(s_len > t_len for _, s_len, _, t_len in cases) and any(s_len < t_len for _, s_len, _, t_len in cases)
    assert any(int(s.max()) < s_len for s, s_len, _, _ in cases) and any(int(t.max()) < t_len for _, _, t, t_len in cases)
    assert any((s == s_len).any() for s, s_len, _, _ in cases) and any((t == t_len).any() for _, _, t, t_len in cases)
    assert any((s == 1).any() for s, _, _, _ in cases) and any((t == 1).any() for _, _, t, _ in cases)
    assert any(len(t) == 1 for _, _, t, _ in cases) and any(t_len == 1 for _, _, _, t_len in cases)
    for s, s_len, t, t_len in cases:
        assert s.dtype == t.dtype == torch.int64 and len(s) == len(t)
        assert (s >= 1).all() and (s <= s_len).all() and (t >= 1).all() and (t <= t_len).all()
    s, _, t, _ = cases[0]
    assert not torch.equal(s, t) and (t < t.max()).any()  # the first case tells every mistake apart
