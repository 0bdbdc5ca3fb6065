"""course_utils.layers against PyTorch's own: nn.MultiheadAttention with one head and
F.scaled_dot_product_attention on the projected tensors, forward values and gradients."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import i18n
from course_utils.layers import CrossAttention, SelfAttention
from course_utils.validation import ArgumentError

# (batch, L, E) for self-attention: a few lengths, length 1
SELF_SHAPES = [(2, 5, 8), (1, 1, 4), (3, 7, 6)]
# (batch, L_q, L_kv, E_q, E_kv): L_q != L_kv both ways, E_q != E_kv (separate projection weights
# in nn.MultiheadAttention), E_q == E_kv (its packed in_proj_weight), a length-1 query and memory
CROSS_SHAPES = [(2, 3, 5, 8, 6), (1, 1, 4, 4, 4), (2, 6, 1, 8, 3), (2, 4, 7, 8, 8), (3, 5, 2, 4, 10)]


def make_layer(kind, e_q, e_kv, bias=True, seed=0):
    torch.manual_seed(seed)
    layer = SelfAttention(e_q, bias=bias) if kind == "self" else CrossAttention(e_q, kv_dim=e_kv, bias=bias)
    return layer.double()


def inputs(batch, l_q, l_kv, e_q, e_kv, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, l_q, e_q, generator=g, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(batch, l_kv, e_kv, generator=g, dtype=torch.float64, requires_grad=True)
    return x, memory


def keep_mask(batch, l_q, l_kv, seed=2):
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(batch, l_q, l_kv, generator=g) > 0.4
    keep[..., -1] = True  # every query keeps a key here; fully hidden rows are tested separately
    return keep


def cases():
    for batch, length, e in SELF_SHAPES:
        yield "self", batch, length, length, e, e
    for shape in CROSS_SHAPES:
        yield ("cross", *shape)


CASES = list(cases())
IDS = [f"{kind}-{'x'.join(map(str, shape))}" for kind, *shape in CASES]


def run_ours(layer, kind, x, memory, keep=None):
    return layer(x, keep_mask=keep) if kind == "self" else layer(x, memory, keep_mask=keep)


def probe_loss(output, weights, seed=3):
    """A fixed random linear function of both results, so gradients flow through each."""
    g = torch.Generator().manual_seed(seed)
    return (output * torch.randn(output.shape, generator=g, dtype=output.dtype)).sum() + (
        weights * torch.randn(weights.shape, generator=g, dtype=weights.dtype)
    ).sum()


def layer_grads(layer):
    return [p.grad for proj in layer._projections() for p in (proj.weight, proj.bias) if p is not None]


def multihead_grads(mha):
    """mha's gradients in the order of layer_grads: (weight, bias) of q, k, v, out."""
    E = mha.embed_dim  # in_proj_weight / in_proj_bias are packed: read their gradients' slices
    if mha._qkv_same_embed_dim:
        weight_grads = list(mha.in_proj_weight.grad.split(E))
    else:
        weight_grads = [mha.q_proj_weight.grad, mha.k_proj_weight.grad, mha.v_proj_weight.grad]
    weight_grads.append(mha.out_proj.weight.grad)
    if mha.in_proj_bias is None:
        return weight_grads
    bias_grads = [*mha.in_proj_bias.grad.split(E), mha.out_proj.bias.grad]
    return [g for pair in zip(weight_grads, bias_grads) for g in pair]


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "keep-mask"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_multihead_attention_forward_and_gradients(case, bias, masked):
    kind, batch, l_q, l_kv, e_q, e_kv = case
    layer = make_layer(kind, e_q, e_kv, bias=bias)
    mha = layer.to_multihead()
    x, memory = inputs(batch, l_q, l_kv, e_q, e_kv)
    if kind == "self":
        memory = x
    keep = keep_mask(batch, l_q, l_kv) if masked else None

    output, weights = run_ours(layer, kind, x, memory, keep)
    # nn.MultiheadAttention's boolean attn_mask means "may NOT attend", (B * H, L_q, L_k) with H = 1
    theirs, their_weights = mha(x, memory, memory, attn_mask=None if keep is None else ~keep)
    torch.testing.assert_close(output, theirs)
    torch.testing.assert_close(weights, their_weights)
    assert output.shape == (batch, l_q, e_q) and weights.shape == (batch, l_q, l_kv)

    ours_in = torch.autograd.grad(probe_loss(output, weights), (x,) if kind == "self" else (x, memory))
    theirs_in = torch.autograd.grad(probe_loss(theirs, their_weights), (x,) if kind == "self" else (x, memory))
    for a, b in zip(ours_in, theirs_in):
        torch.testing.assert_close(a, b)

    output, weights = run_ours(layer, kind, x, memory, keep)
    probe_loss(output, weights).backward()
    theirs, their_weights = mha(x, memory, memory, attn_mask=None if keep is None else ~keep)
    probe_loss(theirs, their_weights).backward()
    mine, other = layer_grads(layer), multihead_grads(mha)
    assert len(mine) == len(other) == (8 if bias else 4)
    for a, b in zip(mine, other):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "keep-mask"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_pytorch_sdpa_on_the_projected_tensors(case, masked):
    kind, batch, l_q, l_kv, e_q, e_kv = case
    layer = make_layer(kind, e_q, e_kv)
    x, memory = inputs(batch, l_q, l_kv, e_q, e_kv)
    if kind == "self":
        memory = x
    keep = keep_mask(batch, l_q, l_kv) if masked else None
    output, _ = run_ours(layer, kind, x, memory, keep)
    q, k, v = layer.q_proj(x), layer.k_proj(memory), layer.v_proj(memory)
    theirs = layer.out_proj(F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    torch.testing.assert_close(output, theirs)
    params = list(layer.parameters())
    wrt = [x, *params] if kind == "self" else [x, memory, *params]
    g = torch.Generator().manual_seed(4)
    probe = torch.randn(output.shape, generator=g, dtype=output.dtype)
    for a, b in zip(torch.autograd.grad((output * probe).sum(), wrt), torch.autograd.grad((theirs * probe).sum(), wrt)):
        torch.testing.assert_close(a, b)


def test_a_mask_broadcasts_over_the_batch_and_hides_keys():
    layer = make_layer("cross", 8, 6)
    x, memory = inputs(3, 4, 5, 8, 6)
    keep = torch.tensor([True, True, False, True, False])  # (L_kv,): e.g. padding at 2 and 4
    _, weights = layer(x, memory, keep_mask=keep)
    assert bool((weights[..., ~keep] == 0).all())
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, dtype=weights.dtype))


def test_a_query_that_may_attend_to_nothing_gets_zero_weights_and_the_output_bias():
    layer = make_layer("self", 4, 4)
    x, _ = inputs(2, 3, 3, 4, 4)
    keep = torch.ones(2, 3, 3, dtype=torch.bool)
    keep[1, 0] = False  # batch item 1, query 0: nothing to attend to
    output, weights = layer(x, keep_mask=keep)
    assert bool((weights[1, 0] == 0).all()) and not output.isnan().any()
    torch.testing.assert_close(output[1, 0], layer.out_proj.bias)


@pytest.mark.parametrize("kind", ["self", "cross"])
def test_from_multihead_copies_a_pytorch_layer(kind):
    e_q, e_kv = 8, (8 if kind == "self" else 5)
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(e_q, 1, kdim=e_kv, vdim=e_kv, batch_first=True, dtype=torch.float64)
    layer = make_layer(kind, e_q, e_kv, seed=6).from_multihead(mha)
    x, memory = inputs(2, 3, 4, e_q, e_kv)
    if kind == "self":
        memory = x
    output, weights = run_ours(layer, kind, x, memory)
    theirs, their_weights = mha(x, memory, memory)
    torch.testing.assert_close(output, theirs)
    torch.testing.assert_close(weights, their_weights)


def test_from_multihead_rejects_a_layer_of_other_sizes():
    with pytest.raises(ArgumentError, match="'mha'.*num_heads=1"):
        SelfAttention(8).from_multihead(nn.MultiheadAttention(8, 2))
    with pytest.raises(ArgumentError, match="'mha'"):
        CrossAttention(8, kv_dim=6).from_multihead(nn.MultiheadAttention(8, 1))


def test_parameter_counts_equal_multihead_attentions():
    for layer in (SelfAttention(8), CrossAttention(8, kv_dim=5), CrossAttention(6, bias=False)):
        mha = layer.to_multihead()
        assert sum(p.numel() for p in layer.parameters()) == sum(p.numel() for p in mha.parameters())


# ----------------------------------------------------------------------------- errors

def test_self_attention_names_x_and_the_size_it_needs():
    with pytest.raises(ArgumentError) as caught:
        SelfAttention(8)(torch.randn(2, 5, 6))
    text = str(caught.value)
    assert "SelfAttention.forward" in text and "'x'" in text and "(2, 5, 6)" in text and "E = 8" in text


def test_cross_attention_names_the_side_whose_features_do_not_fit():
    layer = CrossAttention(8, kv_dim=6)
    with pytest.raises(ArgumentError) as caught:
        layer(torch.randn(2, 3, 8), torch.randn(2, 4, 8))
    text = str(caught.value)
    assert "'memory'" in text and "(2, 4, 8)" in text and "E_kv = 6" in text
    with pytest.raises(ArgumentError) as caught:
        layer(torch.randn(2, 3, 6), torch.randn(2, 4, 6))
    text = str(caught.value)
    assert "'x'" in text and "(2, 3, 6)" in text and "E_q = 8" in text


def test_other_bad_inputs_are_named():
    layer = CrossAttention(4, kv_dim=4)
    with pytest.raises(ArgumentError, match="'x'"):
        layer(torch.randn(3, 4), torch.randn(1, 3, 4))  # no batch axis
    with pytest.raises(ArgumentError, match="'memory'.*batch size"):
        layer(torch.randn(2, 3, 4), torch.randn(3, 3, 4))
    with pytest.raises(ArgumentError, match="'x'"):
        layer(torch.ones(2, 3, 4, dtype=torch.long), torch.randn(2, 3, 4))
    with pytest.raises(ArgumentError, match="'keep_mask'"):
        layer(torch.randn(2, 3, 4), torch.randn(2, 5, 4), keep_mask=torch.ones(2, 3, 4, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'embed_dim'"):
        SelfAttention(0)
    with pytest.raises(ArgumentError, match="'kv_dim'"):
        CrossAttention(4, kv_dim=2.5)


def test_errors_are_in_chinese_when_the_notebook_is():
    i18n.set_language("zh")
    with pytest.raises(ArgumentError) as caught:
        CrossAttention(8, kv_dim=6)(torch.randn(2, 3, 8), torch.randn(2, 4, 8))
    assert "参数 memory" in str(caught.value) and "E_kv = 6" in str(caught.value)
