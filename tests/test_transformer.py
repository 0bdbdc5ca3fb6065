"""course_utils.transformer against PyTorch: EncoderLayer / DecoderLayer equal nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer with weights copied both ways (eval mode, so no dropout), in values and in the
gradients of the inputs and of every parameter, for both norm orders, relu and gelu, key-padding masks,
the decoder's causal and memory masks, float32 and float64, B = 1 and L = 1; PyTorch's fast paths pinned;
sinusoidal encodings against a direct loop, the offset rotation, parameter and FLOP counts, argument checks.

Measured on torch 2.13 (pinned below): with autograd on, PyTorch's layers take their general path, which
gives padded positions the same (finite, meaningless) values as ours, so the comparisons cover every
position. Under no_grad in eval mode a lone nn.TransformerEncoderLayer takes its fused fast path
(aten._transformer_encoder_layer_fwd): the same values, padded positions included, except an item that is
padding everywhere, which it turns into NaN (the general path and ours: finite). nn.TransformerEncoder with
enable_nested_tensor=True packs the real positions only and returns exact zeros at padded ones.
"""

import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from course_utils import i18n
from course_utils.masks import causal_mask
from course_utils.multihead import PACKED_NAMES, operators, packed_gradients
from course_utils.transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LearnedPositionalEmbedding,
    flops,
    offset_rotation,
    parameter_count,
    sinusoidal_encoding,
)
from course_utils.validation import ArgumentError

DTYPES = [torch.float32, torch.float64]
# (B, L, E, H, d_ff): a padded batch, and the edge case of one sequence of one position
SHAPES = [(3, 5, 8, 2, 16), (1, 1, 4, 1, 8)]
SHAPE_IDS = ["B3-L5", "B1-L1"]

pytestmark = pytest.mark.usefixtures("one_thread")  # as the notebooks run


def randomize(module, seed):
    """Random values for every parameter, LayerNorm's γ, β and all biases too (PyTorch starts those at
    1 and 0, which would hide a weight/bias or norm1/norm2 mix-up)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return module


def make_pair(kind, direction, E, H, d_ff, norm_first, activation, dtype, seed=0):
    """(ours, PyTorch's) with the same weights, both in eval mode. direction "from": PyTorch's layer is
    built and randomised, ours copies it (from_torch); "to": ours first, PyTorch's from to_torch."""
    torch.manual_seed(seed)
    if direction == "from":
        cls = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
        theirs = randomize(cls(E, H, d_ff, dropout=0.1, activation=activation, norm_first=norm_first,
                               batch_first=True, dtype=dtype), seed)
        ours = (EncoderLayer if kind == "encoder" else DecoderLayer).from_torch(theirs)
    else:
        ours = (EncoderLayer if kind == "encoder" else DecoderLayer)(E, H, d_ff, activation=activation,
                                                                     norm_first=norm_first)
        ours = randomize(ours.to(dtype), seed)
        theirs = ours.to_torch()
    assert next(ours.parameters()).dtype == dtype and next(theirs.parameters()).dtype == dtype
    return ours.eval(), theirs.eval()


def lengths_padding(B, L, seed):
    """Right padding: item 0 full length, item 1 two positions shorter (at least 1 real position)."""
    lengths = torch.full((B,), L)
    if B > 1:
        lengths[1] = max(1, L - 2)
    if B > 2:
        lengths[2] = max(1, L - 1)
    return torch.arange(L) >= lengths[:, None]  # (B, L): True at padding


def parameter_pairs(ours, theirs):
    """(name, our gradient, PyTorch's gradient) for every parameter, attention ones in the packed layout."""
    attention = [("self_attn", ours.self_attn, theirs.self_attn)]
    if isinstance(ours, DecoderLayer):
        attention.append(("cross_attn", ours.cross_attn, theirs.multihead_attn))
    for prefix, a, b in attention:
        mine, yours = packed_gradients(a), packed_gradients(b)
        for name in PACKED_NAMES:
            yield f"{prefix}.{name}", mine[name], yours[name]
    for name, p in theirs.named_parameters():
        if name.startswith(("linear", "norm")):
            mine = ours.get_parameter(("feed_forward." if name.startswith("linear") else "") + name)
            yield name, mine.grad, p.grad


def compare(ours_fn, theirs_fn, ours, theirs, inputs, tolerance):
    """Values, input gradients and every parameter's gradient agree (a fixed random probe as the loss)."""
    ours.zero_grad()
    theirs.zero_grad()
    a, b = ours_fn(), theirs_fn()
    torch.testing.assert_close(a, b, **tolerance)
    probe = torch.randn(a.shape, generator=torch.Generator().manual_seed(9), dtype=a.dtype)
    grads = [torch.autograd.grad((out * probe).sum(), inputs, retain_graph=True) for out in (a, b)]
    for x, y in zip(*grads):
        torch.testing.assert_close(x, y, **tolerance)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    names = []
    for name, x, y in parameter_pairs(ours, theirs):
        torch.testing.assert_close(x, y, msg=name, **tolerance)
        names.append(name)
    return names


def tolerance(dtype):
    # float32: PyTorch's general path and ours add the same numbers in different orders; through two
    # LayerNorms (whose 1/σ amplifies) that moves a few units in the 6th digit
    return {} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-4}


# ----------------------------------------------------------------------------- the encoder layer


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("direction", ["from", "to"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_encoder_layer_equals_pytorchs_in_values_and_gradients(shape, norm_first, activation, direction, dtype):
    B, L, E, H, d_ff = shape
    ours, theirs = make_pair("encoder", direction, E, H, d_ff, norm_first, activation, dtype)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(1), dtype=dtype, requires_grad=True)
    padding = lengths_padding(B, L, seed=2)
    for mask in (None, padding):
        names = compare(lambda m=mask: ours(x, key_padding_mask=m), lambda m=mask: theirs(x, src_key_padding_mask=m),
                        ours, theirs, [x], tolerance(dtype))
    assert len(names) == 8 + 4 + 4  # attention (packed), linear1/linear2 and norm1/norm2, weights and biases


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_encoder_keep_mask_is_pytorchs_src_mask_the_other_way_round(norm_first):
    ours, theirs = make_pair("encoder", "from", 8, 2, 16, norm_first, "relu", torch.float64)
    x = torch.randn(2, 6, 8, dtype=torch.float64, requires_grad=True)
    keep = causal_mask(6)  # (L, L), True = may attend
    padding = lengths_padding(2, 6, seed=3)
    compare(lambda: ours(x, key_padding_mask=padding, keep_mask=keep),
            lambda: theirs(x, src_mask=~keep, src_key_padding_mask=padding), ours, theirs, [x], {})


def test_the_encoder_without_bias_equals_pytorchs_both_ways():
    torch.manual_seed(0)
    theirs = randomize(nn.TransformerEncoderLayer(8, 4, 12, bias=False, batch_first=True, norm_first=True,
                                                  dtype=torch.float64), 4).eval()
    ours = EncoderLayer.from_torch(theirs).eval()
    assert not ours.bias and ours.norm1.bias is None and ours.feed_forward.linear1.bias is None
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours.to_torch().eval()(x), theirs(x))
    assert parameter_count(ours) == parameter_count(theirs)


# ----------------------------------------------------------------------------- the decoder layer


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("direction", ["from", "to"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_decoder_layer_equals_pytorchs_in_values_and_gradients(shape, norm_first, activation, direction, dtype):
    B, L, E, H, d_ff = shape
    L_m = L + 2  # the memory (source) is longer than the target, to catch a swapped length
    ours, theirs = make_pair("decoder", direction, E, H, d_ff, norm_first, activation, dtype)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, L, E, generator=g, dtype=dtype, requires_grad=True)
    memory = torch.randn(B, L_m, E, generator=g, dtype=dtype, requires_grad=True)
    tgt_padding, memory_padding = lengths_padding(B, L, 2), lengths_padding(B, L_m, 3)
    future = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)  # additive: -inf above the diagonal
    # with bool padding masks PyTorch wants a bool tgt_mask too (it warns about mixed types): True = ignore
    for tgt_mask, tgt_pad, mem_pad in ((future, None, None), (future.isinf(), tgt_padding, memory_padding)):
        names = compare(
            lambda t=tgt_pad, m=mem_pad: ours(x, memory, tgt_key_padding_mask=t, memory_key_padding_mask=m),
            lambda c=tgt_mask, t=tgt_pad, m=mem_pad: theirs(x, memory, tgt_mask=c, tgt_is_causal=True,
                                                            tgt_key_padding_mask=t, memory_key_padding_mask=m),
            ours, theirs, [x, memory], tolerance(dtype))
    assert len(names) == 2 * 8 + 4 + 6
    # causal=False is PyTorch's layer without a tgt_mask (every target position sees every other)
    compare(lambda: ours(x, memory, causal=False, memory_key_padding_mask=memory_padding),
            lambda: theirs(x, memory, memory_key_padding_mask=memory_padding), ours, theirs, [x, memory],
            tolerance(dtype))


def test_the_decoder_is_causal_the_future_of_the_target_does_not_reach_the_past():
    ours, _ = make_pair("decoder", "to", 8, 2, 16, False, "gelu", torch.float64)
    x, memory = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 4, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] += 1.0  # change target positions 4 and 5
    a, b = ours(x, memory), ours(changed, memory)
    torch.testing.assert_close(a[:, :4], b[:, :4])  # positions 0 … 3 cannot see them
    assert not torch.allclose(a[:, 4:], b[:, 4:])
    # the memory is not causal: changing its last position changes every target position
    later = memory.clone()
    later[:, -1] += 1.0
    assert bool((ours(x, later) - a).abs().amax(dim=-1).gt(1e-6).all())


def test_memory_padding_hides_the_padded_source_positions_completely():
    ours, _ = make_pair("decoder", "to", 8, 2, 16, True, "relu", torch.float64)
    x, memory = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
    padding = torch.tensor([[False] * 5, [False, False, True, True, True]])
    garbage = memory.clone()
    garbage[1, 2:] = 1e3  # whatever sits at padded positions
    torch.testing.assert_close(ours(x, memory, memory_key_padding_mask=padding),
                               ours(x, garbage, memory_key_padding_mask=padding))
    output, (self_w, cross_w) = ours(x, memory, memory_key_padding_mask=padding, need_weights=True)
    assert self_w.shape == (2, 2, 3, 3) and cross_w.shape == (2, 2, 3, 5)
    assert bool((cross_w[1, :, :, 2:] == 0).all()) and bool((self_w.triu(1) == 0).all())
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, 2, 3, dtype=torch.float64))
    torch.testing.assert_close(output, ours(x, memory, memory_key_padding_mask=padding))


# ----------------------------------------------------------------------------- PyTorch's fast paths, pinned


def test_pytorchs_fast_path_gives_padded_positions_the_same_values_and_an_all_padding_item_nan():
    ours, theirs = make_pair("encoder", "from", 8, 2, 16, False, "relu", torch.float32)
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(1))
    padding = lengths_padding(3, 5, seed=2)
    with torch.no_grad():
        fast, names = operators(lambda: theirs(x, src_key_padding_mask=padding))
        assert "aten._transformer_encoder_layer_fwd.default" in names  # the fused fast path ran
        torch.testing.assert_close(fast, ours(x, key_padding_mask=padding), rtol=1e-4, atol=1e-4)  # padding too
        everything = torch.tensor([[False] * 5, [True] * 5, [False] * 5])  # item 1 is all padding
        assert theirs(x, src_key_padding_mask=everything)[1].isnan().all()  # fast path: NaN
        assert ours(x, key_padding_mask=everything).isfinite().all()
    slow = theirs(x, src_key_padding_mask=everything)  # autograd on: the general path
    assert slow.isfinite().all()  # torch 2.13's F.sdpa gives a row with no key zeros, as ours does
    torch.testing.assert_close(slow, ours(x, key_padding_mask=everything), rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nn_transformer_encoder_with_nested_tensors_returns_zeros_at_padding():
    ours, theirs = make_pair("encoder", "from", 8, 2, 16, False, "relu", torch.float32)
    stack = nn.TransformerEncoder(theirs, num_layers=1, enable_nested_tensor=True).eval()
    stack.layers[0].load_state_dict(theirs.state_dict())  # TransformerEncoder deep-copies the layer
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(1))
    padding = lengths_padding(3, 5, seed=2)
    with torch.no_grad():
        theirs_out, mine = stack(x, src_key_padding_mask=padding), ours(x, key_padding_mask=padding)
    assert bool((theirs_out[padding] == 0).all())  # exact zeros where the input was padding
    assert bool((mine[padding] != 0).any())  # ours (and the general path) compute something there
    torch.testing.assert_close(theirs_out[~padding], mine[~padding], rtol=1e-4, atol=1e-4)


def test_to_torch_turns_off_the_dropout_pytorch_applies_to_attention_weights():
    ours = EncoderLayer(8, 2, 16, dropout=0.3)
    theirs = ours.to_torch()
    assert theirs.self_attn.dropout == 0.0 and theirs.dropout.p == 0.3 and theirs.dropout1.p == 0.3
    assert theirs.training and not ours.eval().to_torch().training
    decoder = DecoderLayer(8, 2, 16, dropout=0.2).to_torch()
    assert decoder.self_attn.dropout == decoder.multihead_attn.dropout == 0.0 and decoder.dropout3.p == 0.2


def test_need_weights_returns_the_same_output_and_weights_rows_that_sum_to_one():
    ours, _ = make_pair("encoder", "to", 8, 2, 16, True, "gelu", torch.float64)
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    padding = lengths_padding(2, 4, 0)
    output, weights = ours(x, key_padding_mask=padding, need_weights=True)
    torch.testing.assert_close(output, ours(x, key_padding_mask=padding))
    assert weights.shape == (2, 2, 4, 4) and bool((weights[1, :, :, 2:] == 0).all())
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, dtype=torch.float64))


# ----------------------------------------------------------------------------- the feed-forward network


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_is_two_linears_around_the_activation_position_by_position(activation):
    torch.manual_seed(0)
    ff = FeedForward(6, 10, activation=activation).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    hidden = x @ ff.linear1.weight.T + ff.linear1.bias
    hidden = hidden.clamp(min=0) if activation == "relu" else hidden * 0.5 * (1 + torch.erf(hidden / math.sqrt(2)))
    torch.testing.assert_close(ff(x), hidden @ ff.linear2.weight.T + ff.linear2.bias)
    torch.testing.assert_close(ff(x[:, 1:2]), ff(x)[:, 1:2])  # each position on its own


# ----------------------------------------------------------------------------- positional encodings


def loop_encoding(length, d_model, base):
    """The formula, one number at a time, in Python floats."""
    table = [[0.0] * d_model for _ in range(length)]
    for pos in range(length):
        for j in range(d_model):
            i = j // 2  # features 2i and 2i+1 share frequency i
            angle = pos / base ** (2 * i / d_model)
            table[pos][j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return torch.tensor(table, dtype=torch.float64)


@pytest.mark.parametrize("length, d_model, base", [(50, 16, 10000.0), (7, 5, 10000.0), (1, 1, 10000.0),
                                                   (30, 6, 100.0), (3000, 8, 10000.0)])
def test_sinusoidal_encoding_is_the_formula_with_sin_on_even_and_cos_on_odd_features(length, d_model, base):
    expected = loop_encoding(length, d_model, base)
    pe = sinusoidal_encoding(length, d_model, base, dtype=torch.float64)
    assert pe.shape == (length, d_model) and pe.dtype == torch.float64
    torch.testing.assert_close(pe, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(sinusoidal_encoding(length, d_model, base), expected.float(), rtol=0, atol=1e-7)
    assert bool((pe.abs() <= 1).all())
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * (d_model // 2) + [0.0] * (d_model % 2), dtype=torch.float64))


def test_an_odd_d_model_is_the_next_even_table_without_its_last_cosine():
    for d in (3, 5, 9):
        wider = loop_encoding(10, d + 1, 10000.0)
        pe = sinusoidal_encoding(10, d, dtype=torch.float64)
        # the frequencies are base^(-2i/d), not base^(-2i/(d+1)): the table is not a slice of d + 1's
        torch.testing.assert_close(pe, loop_encoding(10, d, 10000.0))
        assert not torch.allclose(pe, wider[:, :d])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_sinusoidal_encoding_has_the_dtype_asked_for_rounded_once_from_float64(dtype):
    pe = sinusoidal_encoding(20, 8, dtype=dtype)
    assert pe.dtype == dtype
    assert torch.equal(pe, sinusoidal_encoding(20, 8, dtype=torch.float64).to(dtype))


@pytest.mark.parametrize("d_model, base", [(16, 10000.0), (2, 10000.0), (8, 50.0)])
@pytest.mark.parametrize("k", [1, 3, 17, -2, 0])
def test_moving_k_positions_on_is_one_fixed_rotation_for_every_position(k, d_model, base):
    pe = sinusoidal_encoding(40, d_model, base, dtype=torch.float64)
    R = offset_rotation(k, d_model, base)
    assert R.shape == (d_model, d_model) and R.dtype == torch.float64
    torch.testing.assert_close(R @ R.T, torch.eye(d_model, dtype=torch.float64))  # a rotation: orthogonal
    assert bool((R.reshape(d_model // 2, 2, d_model // 2, 2).abs().sum((1, 3)).fill_diagonal_(0) == 0).all())
    start, stop = max(0, -k), 40 - max(0, k)  # positions pos with pos and pos + k both in the table
    torch.testing.assert_close(pe[start + k:stop + k], pe[start:stop] @ R.T)
    torch.testing.assert_close(offset_rotation(k, d_model, base) @ offset_rotation(-k, d_model, base),
                               torch.eye(d_model, dtype=torch.float64))
    assert offset_rotation(k, d_model, base, dtype=torch.float32).dtype == torch.float32


def test_the_offset_rotation_of_a_pair_is_its_2x2_block():
    R = offset_rotation(2, 4, base=1.0)  # base 1: every pair turns by 1 radian per position
    c, s = math.cos(2.0), math.sin(2.0)
    torch.testing.assert_close(R[:2, :2], torch.tensor([[c, s], [-s, c]], dtype=torch.float64))


def test_learned_positional_embedding_is_the_table_row_by_row():
    torch.manual_seed(0)
    table = LearnedPositionalEmbedding(10, 4)
    assert table(6).shape == (6, 4) and torch.equal(table(6), table.embedding.weight[:6])
    assert torch.equal(table(3, offset=7), table.embedding.weight[7:10])
    table(4).sum().backward()
    assert bool((table.embedding.weight.grad[:4] == 1).all()) and bool((table.embedding.weight.grad[4:] == 0).all())
    with pytest.raises(ArgumentError, match="'length'.*max_len = 10") as called_plainly:
        table(11)
    # the usual call names no offset, which the learner never passed; a call with one says what it covered
    assert "offset" not in str(called_plainly.value) and "0 … 9" in str(called_plainly.value)
    with pytest.raises(ArgumentError, match=r"offset \+ length ≤ max_len = 10.*= 7 … 10") as called_with_offset:
        table(4, offset=7)
    assert "0 … 9" in str(called_with_offset.value)
    with pytest.raises(ArgumentError, match="'offset'"):
        table(2, offset=-1)


# ----------------------------------------------------------------------------- cost by part


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_counts_by_part_add_up_to_pytorchs_and_follow_the_formulas(bias):
    E, H, F = 16, 4, 40
    for ours in (EncoderLayer(E, H, F, bias=bias), DecoderLayer(E, H, F, bias=bias)):
        theirs = ours.to_torch()
        counts = parameter_count(ours)
        assert counts == parameter_count(theirs)
        assert counts["total"] == sum(p.numel() for p in theirs.parameters()) == sum(
            p.numel() for p in ours.parameters())
        attention = 4 * E * E + 4 * E * bias
        for name in ("attention", "self_attention", "cross_attention"):
            assert counts.get(name, attention) == attention
        assert counts["feed_forward"] == 2 * E * F + (F + E) * bias
        assert counts["norms"] == (2 if isinstance(ours, EncoderLayer) else 3) * E * (1 + bias)


@pytest.mark.parametrize("L, M", [(1, 1), (5, 5), (7, 3)])
def test_flops_of_the_matrix_products_are_what_pytorchs_flop_counter_counts(L, M):
    torch.manual_seed(0)
    encoder, decoder = EncoderLayer(16, 4, 24), DecoderLayer(16, 4, 24)
    x, memory = torch.randn(1, L, 16), torch.randn(1, M, 16)
    # need_weights=True runs the attention as plain matrix products, which the counter sees
    # (it does not count CPU F.scaled_dot_product_attention: measured on torch 2.13)
    for layer, call, kw in ((encoder, lambda: encoder(x, need_weights=True), {}),
                            (decoder, lambda: decoder(x, memory, need_weights=True), {"memory_length": M})):
        with FlopCounterMode(display=False) as counter:
            call()
        counts = flops(layer, L, **kw)
        assert 2 * (counts["total"] - counts["norms"]) == counter.get_total_flops()  # 2 FLOPs per multiply-add
        assert counts == flops(layer.to_torch(), L, **kw)


def test_attentions_share_of_the_flops_grows_with_length_and_passes_the_feed_forward_at_f_minus_2e():
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    shares = [flops(layer, L)["attention"] / flops(layer, L)["total"] for L in (16, 128, 1024, 8192)]
    assert shares == sorted(shares) and shares[-1] > 0.8
    assert flops(layer, 1024)["attention"] == flops(layer, 1024)["feed_forward"]  # L = F - 2E
    assert flops(layer, 1025)["attention"] > flops(layer, 1025)["feed_forward"]


# ----------------------------------------------------------------------------- argument checks


def test_bad_inputs_are_named():
    with pytest.raises(ArgumentError, match="'nhead'.*divisor"):
        EncoderLayer(8, 3, 16)
    with pytest.raises(ArgumentError, match="'d_ff'"):
        DecoderLayer(8, 2, 0)
    with pytest.raises(ArgumentError, match="'activation'.*relu"):
        EncoderLayer(8, 2, 16, activation="tanh")
    with pytest.raises(ArgumentError, match="'dropout'"):
        EncoderLayer(8, 2, 16, dropout=1.5)
    with pytest.raises(ArgumentError, match="'norm_first'"):
        EncoderLayer(8, 2, 16, norm_first=1)
    with pytest.raises(ArgumentError, match="'layer_norm_eps'"):
        EncoderLayer(8, 2, 16, layer_norm_eps=0)
    encoder, decoder = EncoderLayer(8, 2, 16), DecoderLayer(8, 2, 16)
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    with pytest.raises(ArgumentError, match="'x'.*d_model = 8"):
        encoder(torch.randn(2, 3, 6))
    with pytest.raises(ArgumentError, match="'x'"):
        encoder(torch.randn(3, 8))  # a sequence without its batch axis
    with pytest.raises(ArgumentError, match="'key_padding_mask'.*\\(2, 3\\)"):
        encoder(x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'key_padding_mask'.*mask.bool"):
        encoder(x, key_padding_mask=torch.zeros(2, 3))
    with pytest.raises(ArgumentError, match="'memory'.*batch size"):
        decoder(x, torch.randn(3, 4, 8))
    with pytest.raises(ArgumentError, match="'memory_key_padding_mask'.*\\(2, 4\\)"):
        decoder(x, memory, memory_key_padding_mask=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'tgt_key_padding_mask'"):
        decoder(x, memory, tgt_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'causal'"):
        decoder(x, memory, causal=None)
    with pytest.raises(ArgumentError, match="'layer'"):
        EncoderLayer.from_torch(nn.TransformerDecoderLayer(8, 2, 16))
    with pytest.raises(ArgumentError, match="'layer'.*gelu"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh))
    with pytest.raises(ArgumentError, match="'layer'"):
        parameter_count(nn.Linear(2, 2))
    with pytest.raises(ArgumentError, match="'length'"):
        flops(encoder, 0)
    with pytest.raises(ArgumentError, match="'d_model'.*even"):
        offset_rotation(1, 5)
    with pytest.raises(ArgumentError, match="'k'"):
        offset_rotation(1.5, 4)
    with pytest.raises(ArgumentError, match="'length'"):
        sinusoidal_encoding(0, 4)
    with pytest.raises(ArgumentError, match="'dtype'"):
        sinusoidal_encoding(4, 4, dtype=torch.int64)
    with pytest.raises(ArgumentError, match="'base'"):
        sinusoidal_encoding(4, 4, base=-1.0)


def test_errors_follow_the_notebooks_language():
    i18n.set_language("zh")
    with pytest.raises(ArgumentError) as caught:
        EncoderLayer(8, 3, 16)
    assert "参数 nhead" in str(caught.value) and "约数" in str(caught.value)
    with pytest.raises(ArgumentError) as caught:
        DecoderLayer(8, 2, 16)(torch.randn(2, 3, 8), torch.randn(2, 4, 8),
                               memory_key_padding_mask=torch.zeros(2, 3, dtype=torch.bool))
    text = str(caught.value)
    assert "memory_key_padding_mask" in text and "填充" in text and "needs" not in text
