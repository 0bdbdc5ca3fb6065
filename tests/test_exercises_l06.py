"""Lesson 06's exercises beyond the generic tests (tests/test_exercises.py): the references agree
with course_utils.transformer and PyTorch's own nn.TransformerDecoderLayer (values and gradients);
other correct ways to write each function pass, values and gradients (so the check does not demand
the reference's own route); the package's encoding, rotation and layers are forbidden; a learner's
change to torch's global state is caught and undone; the cases are plain data (they cross to a
grader's kernel), hold what the module docstring promises, and show an in-place edit of any input."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_teacher.exercises import EXERCISES
from course_teacher.exercises.l06_transformer import DECODER_WEIGHTS, LONG, decoder_sublayers
from course_utils import transformer
from course_utils.exercises import FAILED, PASSED, evaluate
from course_utils.i18n import message

# the references (and hidden cases) under test, as the registry holds them
_decoder_reference = EXERCISES["06.post_norm_decoder"].reference
_rotation_reference = EXERCISES["06.offset_rotation"].reference
_sinusoidal_reference = EXERCISES["06.sinusoidal_encoding"].reference


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


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


def test_the_sinusoidal_cases_cover_length_1_d_model_2_and_odd_d_model_and_a_table_longer_than_5000():
    cases = _cases("06.sinusoidal_encoding")
    assert any(length == 1 for length, _ in cases) and any(d == 2 for _, d in cases)
    assert sum(d % 2 for _, d in cases) >= 2
    assert any(length > d for length, d in cases) and any(d > length for length, d in cases)
    assert max(length for length, _ in cases) == LONG > 5000
    # float32 angles p·ω stay well inside the tolerance: short tables, and the long one has one
    # feature, angle p·1, exact in float32
    assert all(length <= 64 or d == 1 for length, d in cases)


def _precomputed(length, d_model, max_len=5000):
    """The widely copied module: a max_len table computed once, sliced to the length asked for."""
    return _encoding_exp_log(max_len, d_model)[:length]


def test_a_table_precomputed_for_5000_positions_fails_and_is_named():
    verdict = evaluate("06.sinusoidal_encoding", _precomputed)
    assert verdict.status == FAILED and verdict.code == "TABLE_OF_5000", verdict.message


# ----------------------------------------------------------------------------- 06.offset_rotation


@pytest.mark.parametrize("k, d_model", [(0, 2), (1, 2), (3, 8), (-7, 10), (5003, 16), (-12345, 64)])
def test_the_rotation_reference_is_the_packages_and_moves_the_table(k, d_model):
    R = _rotation_reference(k, d_model)
    assert R.dtype == torch.float64 and R.shape == (d_model, d_model)
    torch.testing.assert_close(R, transformer.offset_rotation(k, d_model), rtol=0, atol=1e-12)
    torch.testing.assert_close(R @ R.T, torch.eye(d_model, dtype=torch.float64))  # a rotation
    table = transformer.sinusoidal_encoding(abs(k) + 20, d_model, dtype=torch.float64)
    if k >= 0:
        torch.testing.assert_close(table[k:], table[: len(table) - k] @ R.T, rtol=0, atol=1e-9)
    else:
        torch.testing.assert_close(table[: len(table) + k], table[-k:] @ R.T, rtol=0, atol=1e-9)


def _rotation_from_a_2x2_loop(k, d_model):
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        phi = k * 10000 ** (-2 * i / d_model)
        R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor(
            [[math.cos(phi), math.sin(phi)], [-math.sin(phi), math.cos(phi)]], dtype=torch.float64)
    return R


def _rotation_from_the_table(k, d_model):
    """The angles' sines and cosines read off the encoding of position |k| (the package's table), and the
    blocks put together with torch.block_diag: right numbers, but the exercise's text now asks for no course
    function at all (rules.OWN_CODE), so it is refused as the package's code."""
    row = transformer.sinusoidal_encoding(abs(k) + 1, d_model, dtype=torch.float64)[abs(k)]  # (E,)
    s, c = row[0::2] * (1 if k >= 0 else -1), row[1::2]
    return torch.block_diag(*[torch.stack([torch.stack([ci, si]), torch.stack([-si, ci])]) for si, ci in zip(s, c)])


def _rotation_by_exp_log_in_float64(k, d_model):
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    phi = k * omega
    R = torch.diag(phi.cos().repeat_interleave(2))
    R[torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)] = phi.sin()
    R[torch.arange(1, d_model, 2), torch.arange(0, d_model, 2)] = -phi.sin()
    return R


@pytest.mark.parametrize("function", [_rotation_from_a_2x2_loop, _rotation_by_exp_log_in_float64],
                         ids=lambda f: f.__name__)
def test_other_right_rotations_pass(function):
    verdict = evaluate("06.offset_rotation", function)
    assert verdict.status == PASSED, verdict.message


def test_a_rotation_read_off_the_packages_table_is_refused_as_the_packages_code():
    verdict = evaluate("06.offset_rotation", _rotation_from_the_table)
    assert verdict.status == FAILED and "course_utils.transformer" in verdict.message, verdict.message


def test_calling_the_packages_rotation_fails_as_forbidden():
    verdict = evaluate("06.offset_rotation", lambda k, d_model: transformer.offset_rotation(k, d_model))
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "course_utils.transformer.offset_rotation" in verdict.message


def test_the_rotation_cases_cover_zero_one_negative_and_large_offsets_and_one_pair():
    cases = _cases("06.offset_rotation")
    offsets, sizes = [k for k, _ in cases], [d for _, d in cases]
    assert 0 in offsets and 1 in offsets and min(offsets) < 0 and max(offsets) > 5000
    assert 2 in sizes and all(d % 2 == 0 for d in sizes) and max(sizes) >= 32
    assert len(set(sizes)) == len(sizes)  # every size once: a size fixed in the code fails somewhere
    first_k, first_d = cases[0]
    assert first_k not in (0, 1) and first_d >= 4  # where every mistake shows


# ----------------------------------------------------------------------------- 06.post_norm_decoder


def _decoder_parts(case):
    x, memory, tgt_padding, memory_padding, *weights, heads = case
    return x, memory, tgt_padding, memory_padding, weights, heads


def _torch_decoder(x, heads, weights):
    E, d_ff = x.shape[-1], weights[-2].shape[0]
    layer = nn.TransformerDecoderLayer(E, heads, d_ff, dropout=0.0, bias=False, batch_first=True, dtype=x.dtype)
    layer.load_state_dict(dict(zip(DECODER_WEIGHTS, weights)))
    return layer


def _torch_call(layer, x, memory, tgt_padding, memory_padding):
    L_t = x.shape[1]
    future = torch.ones(L_t, L_t, dtype=torch.bool).triu(1)  # bool: True = may NOT attend
    return layer(x, memory, tgt_mask=future, tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=memory_padding)


@pytest.mark.parametrize("index", range(8))
def test_the_decoder_reference_is_pytorchs_and_the_courses_post_norm_layer_values_and_gradients(index):
    """Every position, padded target positions included; the gradients with respect to x, memory and
    every weight."""
    x, memory, tgt_padding, memory_padding, weights, heads = _decoder_parts(_cases("06.post_norm_decoder")[index])
    torch_layer = _torch_decoder(x, heads, [w.clone() for w in weights])
    course_layer = transformer.DecoderLayer.from_torch(torch_layer).eval()
    tolerance = {"atol": 1e-5, "rtol": 1e-4} if x.dtype == torch.float32 else {"atol": 1e-10, "rtol": 1e-9}

    leaves = [t.clone().requires_grad_() for t in (x, memory, *weights)]
    ours = _decoder_reference(leaves[0], leaves[1], tgt_padding, memory_padding, *leaves[2:], heads)
    x_torch, memory_torch = x.clone().requires_grad_(), memory.clone().requires_grad_()
    theirs = _torch_call(torch_layer, x_torch, memory_torch, tgt_padding, memory_padding)
    course = course_layer(x, memory, tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=memory_padding)
    assert ours.dtype == x.dtype
    torch.testing.assert_close(ours, theirs, **tolerance)
    torch.testing.assert_close(ours, course, **tolerance)

    probe = torch.randn(ours.shape, generator=torch.Generator().manual_seed(index), dtype=x.dtype)
    (ours * probe).sum().backward()
    (theirs * probe).sum().backward()
    torch.testing.assert_close(leaves[0].grad, x_torch.grad, **tolerance)
    torch.testing.assert_close(leaves[1].grad, memory_torch.grad, **tolerance)
    parameters = dict(torch_layer.named_parameters())
    for leaf, name in zip(leaves[2:], DECODER_WEIGHTS):
        torch.testing.assert_close(leaf.grad, parameters[name].grad, **tolerance)


def _decoder_through_pytorch_functions(x, memory, tgt_key_padding_mask, memory_key_padding_mask, norm1_weight,
                                       self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
                                       cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight,
                                       num_heads):
    """nn.functional's multi-head attention (sequence-first) and layer_norm; the causal mask as a
    float mask of -inf above the diagonal, the padding masks as bool, as PyTorch's layer takes them."""
    E, L_t = x.shape[-1], x.shape[1]

    def attend(h, context, in_proj, out_proj, padding, mask):
        if padding is not None and mask is not None:  # one kind of mask: float, like the causal one
            padding = torch.zeros(padding.shape, dtype=h.dtype).masked_fill(padding, float("-inf"))
        out, _ = F.multi_head_attention_forward(
            h.transpose(0, 1), context.transpose(0, 1), context.transpose(0, 1), E, num_heads, in_proj, None, None,
            None, False, 0.0, out_proj, None, training=False, key_padding_mask=padding, need_weights=False,
            attn_mask=mask)
        return out.transpose(0, 1)

    causal = torch.full((L_t, L_t), float("-inf"), dtype=x.dtype).triu(1)
    x = F.layer_norm(x + attend(x, x, self_in_proj_weight, self_out_proj_weight, tgt_key_padding_mask, causal),
                     (E,), norm1_weight)
    x = F.layer_norm(x + attend(x, memory, cross_in_proj_weight, cross_out_proj_weight, memory_key_padding_mask,
                                None), (E,), norm2_weight)
    hidden = F.relu(x @ linear1_weight.T) @ linear2_weight.T
    return F.layer_norm(x + hidden, (E,), norm3_weight)


def _decoder_by_hand(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
    """Everything written out: LayerNorm from mean and variance, separate Q, K, V weights, keep masks
    built first and applied with masked_fill."""
    (norm1, self_in, self_out, norm2, cross_in, cross_out, norm3, linear1, linear2), heads = (
        weights_and_heads[:-1], weights_and_heads[-1])
    B, L_t, E = x.shape
    L_s, d = memory.shape[1], E // heads

    def layer_norm(h, weight):
        return (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True, unbiased=False) + 1e-5) * weight

    def attend(h, context, in_proj, out_proj, keep):
        W_q, W_k, W_v = in_proj.split(E)
        q = (h @ W_q.T).reshape(B, -1, heads, d).permute(0, 2, 1, 3)
        k = (context @ W_k.T).reshape(B, -1, heads, d).permute(0, 2, 1, 3)
        v = (context @ W_v.T).reshape(B, -1, heads, d).permute(0, 2, 1, 3)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~keep[:, None], float("-inf"))
        return (torch.softmax(scores, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, -1, E) @ out_proj.T

    target_real = torch.ones(B, L_t, dtype=torch.bool) if tgt_key_padding_mask is None else ~tgt_key_padding_mask
    source_real = torch.ones(B, L_s, dtype=torch.bool) if memory_key_padding_mask is None else ~memory_key_padding_mask
    self_keep = torch.ones(L_t, L_t, dtype=torch.bool).tril() & target_real[:, None, :]  # (B, L_t, L_t)
    cross_keep = source_real[:, None, :].expand(B, L_t, L_s)  # (B, L_t, L_s)
    x = layer_norm(x + attend(x, x, self_in, self_out, self_keep), norm1)
    x = layer_norm(x + attend(x, memory, cross_in, cross_out, cross_keep), norm2)
    return layer_norm(x + torch.relu(x @ linear1.T) @ linear2.T, norm3)


@pytest.mark.parametrize("function", [_decoder_through_pytorch_functions, _decoder_by_hand], ids=lambda f: f.__name__)
def test_other_right_decoder_layers_pass_values_and_gradients(function):
    verdict = evaluate("06.post_norm_decoder", function)
    assert verdict.status == PASSED, verdict.message


def test_borrowing_pytorchs_decoder_layer_fails_as_forbidden():
    def borrowed(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
        *weights, heads = weights_and_heads
        layer = _torch_decoder(x, heads, [w.detach() for w in weights])
        future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        return torch.func.functional_call(layer, dict(zip(DECODER_WEIGHTS, weights)), (x, memory), {
            "tgt_mask": future, "tgt_key_padding_mask": tgt_key_padding_mask,
            "memory_key_padding_mask": memory_key_padding_mask})

    verdict = evaluate("06.post_norm_decoder", borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "torch.nn.TransformerDecoderLayer.forward" in verdict.message


def test_borrowing_the_courses_decoder_layer_fails_as_forbidden():
    def borrowed(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
        *weights, heads = weights_and_heads
        layer = transformer.DecoderLayer.from_torch(_torch_decoder(x, heads, [w.detach() for w in weights])).eval()
        return layer(x, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                     memory_key_padding_mask=memory_key_padding_mask)

    verdict = evaluate("06.post_norm_decoder", borrowed)
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message
    assert "course_utils.transformer.DecoderLayer.forward" in verdict.message


def test_a_learner_who_turns_gradients_off_gets_no_graph_and_grad_mode_comes_back():
    def without_gradients(*args):
        torch.set_grad_enabled(False)
        return _decoder_reference(*args)

    verdict = evaluate("06.post_norm_decoder", without_gradients)
    assert torch.is_grad_enabled()
    assert verdict.status == FAILED and verdict.code == "NO_GRAPH", verdict.message
    assert message("check.setting.grad_mode") in verdict.message


@pytest.mark.parametrize("position, name", [(1, "memory"), (4, "norm1_weight"), (8, "cross_in_proj_weight"),
                                            (12, "linear2_weight")])
def test_a_layer_that_detaches_an_input_fails_on_its_gradient(position, name):
    def detached(*args):
        args = list(args)
        args[position] = args[position].detach()
        return _decoder_reference(*args)

    verdict = evaluate("06.post_norm_decoder", detached)
    assert verdict.status == FAILED and verdict.code == "GRADIENT" and name in verdict.message, verdict.message


def test_the_decoder_cases_vary_every_argument_on_its_own():
    cases = _cases("06.post_norm_decoder")
    # (B, L_t, E), L_s, H, F
    shapes = [(case[0].shape, case[1].shape[1], case[-1], case[11].shape[0]) for case in cases]
    assert any(shape[0] == 1 for shape, *_ in shapes) and any(shape[0] == 3 for shape, *_ in shapes)
    assert any(shape[1] == 1 for shape, *_ in shapes) and any(L_s == 1 for _, L_s, _, _ in shapes)
    assert any(L_s > shape[1] for shape, L_s, _, _ in shapes) and any(L_s < shape[1] for shape, L_s, _, _ in shapes)
    assert {heads for *_, heads, _ in shapes} >= {1, 2, 8}
    assert any(d_ff != 4 * shape[2] for shape, _, _, d_ff in shapes)
    tgt, mem = [case[2] for case in cases], [case[3] for case in cases]
    assert any(t is None and m is not None for t, m in zip(tgt, mem))  # each mask None on its own
    assert any(m is None and t is not None for t, m in zip(tgt, mem))
    assert any(t is None and m is None for t, m in zip(tgt, mem))
    assert any(case[0].dtype == torch.float64 for case in cases)
    for case in cases:
        x, memory, tgt_padding, memory_padding = case[:4]
        norms = case[4], case[7], case[10]
        assert memory.dtype == x.dtype and all(w.dtype == x.dtype for w in case[4:13])
        assert not torch.equal(norms[0], norms[1]) and not torch.equal(norms[1], norms[2])  # three different norms
        assert x.mean().abs() > 0.3 and x.std() > 1.5 and memory.mean().abs() > 0.2  # far from normalised
        for padding, sequence in ((tgt_padding, x), (memory_padding, memory)):
            if padding is not None:
                assert padding.dtype == torch.bool and padding.shape == sequence.shape[:2]
                assert (~padding[:, 0]).all()  # right padding: no sequence is all padding
    first = cases[0]
    assert first[0].shape[1] == first[1].shape[1]  # L_s = L_t: the mistakes that need it run there
    assert first[2].any(-1).all() and first[3].any(-1).all()  # every item padded on both sides
    assert any(t is not None and (~t).all(-1).any() for t in tgt)  # and some item not padded at all
    assert any(m is not None and (~m).all(-1).any() for m in mem)


@pytest.mark.parametrize("exercise", ["06.sinusoidal_encoding", "06.offset_rotation", "06.post_norm_decoder"])
def test_every_tensor_a_case_passes_would_show_an_in_place_edit(exercise):
    """A check that compares each case's inputs before and after the call (a generic INPUT_MODIFIED
    verdict) sees an edit only where it changes a value: no floating-point input is all zeros
    (x.zero_(), x *= 0 change it), and every mask is bool with a False in it (~mask and
    mask.logical_not_() change it; so does filling it with True)."""
    for case in _cases(exercise):
        for arg in case:
            if isinstance(arg, torch.Tensor):
                if arg.is_floating_point():
                    assert arg.abs().amax() > 0, exercise
                else:
                    assert arg.dtype == torch.bool and (~arg).any(), exercise


def test_an_in_place_residual_fails_as_input_modified():
    """The classic `x += …` of a residual returns the right values but changes the caller's x: the
    check names it (INPUT_MODIFIED, the argument x), which it can because no case's x is zero."""
    def in_place(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
        norm1, norm2, norm3, self_attention, cross_attention, feed_forward = decoder_sublayers(*weights_and_heads)
        x += self_attention(x, tgt_key_padding_mask, causal=True)  # edits the argument
        x = norm1(x)
        x = norm2(x + cross_attention(x, memory, memory_key_padding_mask))
        return norm3(x + feed_forward(x))

    verdict = evaluate("06.post_norm_decoder", in_place)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message
    assert "x" in verdict.message


def test_inverting_a_mask_in_place_fails_as_input_modified():
    def inverts(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *rest):
        if memory_key_padding_mask is not None:
            memory_key_padding_mask.logical_not_().logical_not_()  # back as it was: no edit to see
        if tgt_key_padding_mask is not None:
            tgt_key_padding_mask.logical_not_()  # and left inverted
            tgt_key_padding_mask = ~tgt_key_padding_mask
        return _decoder_reference(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *rest)

    verdict = evaluate("06.post_norm_decoder", inverts)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message
    assert "tgt_key_padding_mask" in verdict.message
