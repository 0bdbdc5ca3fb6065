"""course_utils.multihead against PyTorch: the naive and the fused layer equal each other and
nn.MultiheadAttention (weights copied every way), forward values and gradients, with and without
masks, for self- and cross-attention with kdim/vdim; parameter counts; argument checks; and the
references of lesson 04's exercises against PyTorch.

nn.MultiheadAttention returns NaN for a query whose keys are all hidden, where the course's layers
(and F.scaled_dot_product_attention in recent PyTorch) return a zero attention output: the
comparisons below keep at least one key for every query, and the fully hidden case is tested on
its own.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_teacher.exercises import EXERCISES
from course_utils import i18n
from course_utils.multihead import (
    FAST_PATH,
    PACKED_NAMES,
    FusedMultiheadAttention,
    NaiveMultiheadAttention,
    merge_heads,
    operators,
    packed_gradients,
    parameter_count,
    split_heads,
    took_fast_path,
    torch_packed_weights,
)
from course_utils.validation import ArgumentError

# (batch, L_q, L_k, E, kdim, vdim, H): self-attention shapes (L_q = L_k, kdim = vdim = E: PyTorch's
# packed in_proj_weight) and cross-attention ones (separate q/k/v weights), one head, length 1
SELF = [(2, 5, 5, 8, 8, 8, 2), (1, 1, 1, 4, 4, 4, 4), (3, 6, 6, 6, 6, 6, 3), (2, 4, 4, 8, 8, 8, 1)]
CROSS = [(2, 3, 5, 8, 6, 6, 2), (3, 4, 7, 8, 6, 5, 4), (1, 1, 3, 6, 10, 4, 3), (2, 6, 1, 4, 4, 7, 2)]
SHAPES = [("self", *shape) for shape in SELF] + [("cross", *shape) for shape in CROSS]
IDS = [f"{kind}-{'x'.join(map(str, shape))}" for kind, *shape in SHAPES]
MASKS = ["none", "keep", "per-head", "padding", "both"]


def layers(E, kdim, vdim, H, bias=True, seed=0):
    """A naive layer, a fused one and an nn.MultiheadAttention, all with the same weights, float64."""
    torch.manual_seed(seed)
    naive = NaiveMultiheadAttention(E, H, kdim=kdim, vdim=vdim, bias=bias).double()
    fused = FusedMultiheadAttention(E, H, kdim=kdim, vdim=vdim, bias=bias).double().copy_weights_from(naive)
    return naive, fused, fused.to_torch()


def inputs(kind, B, L_q, L_k, E, kdim, vdim, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "self":
        x = torch.randn(B, L_q, E, generator=g, dtype=torch.float64, requires_grad=True)
        return x, x, x
    return (
        torch.randn(B, L_q, E, generator=g, dtype=torch.float64, requires_grad=True),
        torch.randn(B, L_k, kdim, generator=g, dtype=torch.float64, requires_grad=True),
        torch.randn(B, L_k, vdim, generator=g, dtype=torch.float64, requires_grad=True),
    )


def masks(which, B, H, L_q, L_k, seed=2):
    """(keep_mask, key_padding_mask) for the course's layers; every query keeps at least one key."""
    g = torch.Generator().manual_seed(seed)
    keep = padding = None
    if which in ("keep", "both"):
        keep = torch.rand(B, 1, L_q, L_k, generator=g) > 0.4  # the same for every head
        keep[..., 0] = True
    if which == "per-head":
        keep = torch.rand(B, H, L_q, L_k, generator=g) > 0.4  # a mask for each head
        keep[..., -1] = True
    if which in ("padding", "both"):
        lengths = torch.randint(1, L_k + 1, (B,), generator=g)
        padding = torch.arange(L_k) >= lengths[:, None]  # (B, L_k): True at padding, key 0 always real
    return keep, padding


def torch_masks(keep, padding, B, H, L_q, L_k):
    """The same masks for nn.MultiheadAttention: attn_mask (True = ignore), 3-D batch-major."""
    attn_mask = None if keep is None else (~keep).expand(B, H, L_q, L_k).reshape(B * H, L_q, L_k)
    return attn_mask, padding


def run(layer, args, keep, padding, B, H, L_q, L_k, probes):
    if isinstance(layer, nn.MultiheadAttention):
        attn_mask, key_padding_mask = torch_masks(keep, padding, B, H, L_q, L_k)
        output, weights = layer(*args, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                average_attn_weights=False)
    else:
        output, weights = layer(*args, keep_mask=keep, key_padding_mask=padding)
    loss = (output * probes[0]).sum() + (weights * probes[1]).sum()
    wrt = list(dict.fromkeys(args))  # self-attention passes one tensor three times
    input_grads = torch.autograd.grad(loss, wrt, retain_graph=True)
    layer.zero_grad()
    loss.backward()
    return output, weights, input_grads, packed_gradients(layer)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("which", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_naive_fused_and_pytorch_agree_on_values_and_gradients(shape, which, bias):
    kind, B, L_q, L_k, E, kdim, vdim, H = shape
    three = layers(E, kdim, vdim, H, bias=bias)
    args = inputs(kind, B, L_q, L_k, E, kdim, vdim)
    keep, padding = masks(which, B, H, L_q, L_k)
    g = torch.Generator().manual_seed(3)
    probes = (torch.randn(B, L_q, E, generator=g, dtype=torch.float64),
              torch.randn(B, H, L_q, L_k, generator=g, dtype=torch.float64))
    results = [run(layer, args, keep, padding, B, H, L_q, L_k, probes) for layer in three]
    first = results[0]
    assert first[0].shape == (B, L_q, E) and first[1].shape == (B, H, L_q, L_k)
    for other in results[1:]:
        torch.testing.assert_close(other[0], first[0])
        torch.testing.assert_close(other[1], first[1])
        for a, b in zip(other[2], first[2]):
            torch.testing.assert_close(a, b)
        for name in PACKED_NAMES:
            if first[3][name] is None:
                assert other[3][name] is None and not bias and name.endswith("bias")
            else:
                torch.testing.assert_close(other[3][name], first[3][name], msg=name)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_need_weights_false_runs_pytorchs_fused_attention_and_gives_the_same_output(shape):
    kind, B, L_q, L_k, E, kdim, vdim, H = shape
    naive, fused, _ = layers(E, kdim, vdim, H)
    args = inputs(kind, B, L_q, L_k, E, kdim, vdim)
    keep, padding = masks("both", B, H, L_q, L_k)
    expected, _ = fused(*args, keep_mask=keep, key_padding_mask=padding)
    for layer in (naive, fused):
        output, weights = layer(*args, keep_mask=keep, key_padding_mask=padding, need_weights=False)
        assert weights is None
        torch.testing.assert_close(output, expected)
    _, names = operators(lambda: fused(*args, need_weights=False))
    assert any("scaled_dot_product" in name for name in names)


def test_the_fused_layer_equals_f_scaled_dot_product_attention_on_its_projections():
    _, fused, _ = layers(8, 6, 5, 2)
    query, key, value = inputs("cross", 2, 3, 4, 8, 6, 5)
    q, k, v = (split_heads(p(t), 2) for p, t in ((fused.q_proj, query), (fused.k_proj, key), (fused.v_proj, value)))
    expected = fused.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v)))
    torch.testing.assert_close(fused(query, key, value)[0], expected)


def test_split_and_merge_heads_are_inverse_and_put_head_0_first():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    heads = split_heads(x, 4)  # (2, 4, 3, 2)
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[:, 1], x[..., 2:4])  # head 1: features 2 and 3
    assert torch.equal(merge_heads(heads), x)


# ----------------------------------------------------------------------------- weight transfer

@pytest.mark.parametrize("cls", [NaiveMultiheadAttention, FusedMultiheadAttention])
@pytest.mark.parametrize("sizes", [(8, 8, 8, 2), (8, 6, 5, 4), (6, 6, 6, 1)], ids=["packed", "kdim-vdim", "one-head"])
def test_from_torch_copies_every_weight(cls, sizes):
    E, kdim, vdim, H = sizes
    torch.manual_seed(7)
    mha = nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_()  # biases too: PyTorch starts them at zero, which would hide a bias mix-up
    layer = cls.from_torch(mha)
    args = inputs("cross", 2, 3, 5, E, kdim, vdim)
    torch.testing.assert_close(layer(*args)[0], mha(*args)[0])
    torch.testing.assert_close(layer(*args)[1], mha(*args, average_attn_weights=False)[1])
    for name, value in layer.packed_weights().items():
        torch.testing.assert_close(value, torch_packed_weights(mha)[name])


def test_naive_and_fused_copy_each_other_both_ways_and_the_rows_of_head_h_are_block_h():
    naive, fused, _ = layers(8, 8, 8, 4)
    d = 2
    for h, head in enumerate(naive.heads):
        for kind in ("q", "k", "v"):
            block = getattr(fused, f"{kind}_proj").weight[h * d:(h + 1) * d]
            assert torch.equal(block, getattr(head, f"{kind}_proj").weight)
    torch.manual_seed(8)
    other = FusedMultiheadAttention(8, 4).double()
    back = NaiveMultiheadAttention(8, 4).double().copy_weights_from(other)
    args = inputs("self", 2, 4, 4, 8, 8, 8)
    torch.testing.assert_close(back(*args)[0], other(*args)[0])
    assert not torch.allclose(back(*args)[0], naive(*args)[0])


def test_copying_between_layers_of_other_sizes_is_refused():
    with pytest.raises(ArgumentError, match="'other'"):
        FusedMultiheadAttention(8, 2).copy_weights_from(NaiveMultiheadAttention(8, 4))
    with pytest.raises(ArgumentError, match="'other'"):
        FusedMultiheadAttention(8, 2).copy_weights_from(nn.MultiheadAttention(8, 2, kdim=6, vdim=6))
    with pytest.raises(ArgumentError, match="'mha'"):
        FusedMultiheadAttention.from_torch(nn.Linear(8, 8))
    with pytest.raises(ArgumentError, match="'mha'"):
        NaiveMultiheadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ArgumentError, match="nn.MultiheadAttention"):
        NaiveMultiheadAttention(8, 2, head_dim=8).to_torch()


# ----------------------------------------------------------------------------- fully hidden rows

def test_a_query_with_no_key_gets_zero_weights_and_the_output_bias_where_pytorch_gives_nan():
    naive, fused, mha = layers(8, 6, 5, 2)
    query, key, value = inputs("cross", 3, 4, 5, 8, 6, 5)
    padding = torch.tensor([[False] * 5, [True] * 5, [False, False, True, True, True]])  # item 1: all padding
    theirs, _ = mha(query, key, value, key_padding_mask=padding)
    assert theirs[1].isnan().all()
    for layer in (naive, fused):
        for need_weights in (True, False):
            output, weights = layer(query, key, value, key_padding_mask=padding, need_weights=need_weights)
            torch.testing.assert_close(output[1], layer.out_proj.bias.expand(4, 8))
            torch.testing.assert_close(output[[0, 2]], theirs[[0, 2]])  # rows that keep a key agree
            if need_weights:
                assert bool((weights[1] == 0).all())
            output.sum().backward()
            assert all(not p.grad.isnan().any() for p in layer.parameters())
            assert not query.grad.isnan().any()
            layer.zero_grad()
            query.grad = None


# ----------------------------------------------------------------------------- parameter counts

@pytest.mark.parametrize("E, H", [(8, 1), (8, 2), (12, 3), (512, 8)])
def test_parameter_counts_do_not_depend_on_the_number_of_heads(E, H):
    expected = 4 * E * E + 4 * E
    assert parameter_count(NaiveMultiheadAttention(E, H)) == expected
    assert parameter_count(FusedMultiheadAttention(E, H)) == expected
    assert parameter_count(nn.MultiheadAttention(E, H)) == expected
    assert parameter_count(FusedMultiheadAttention(E, H, bias=False)) == 4 * E * E


def test_parameter_counts_with_kdim_vdim_and_with_full_size_heads():
    E, kdim, vdim, H = 8, 6, 5, 2
    expected = E * E + E * kdim + E * vdim + E * E + 4 * E
    for layer in (NaiveMultiheadAttention(E, H, kdim, vdim), FusedMultiheadAttention(E, H, kdim, vdim),
                  nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim)):
        assert parameter_count(layer) == expected
    E, H = 512, 8
    full = NaiveMultiheadAttention(E, H, head_dim=E)  # every head projects to E features
    assert parameter_count(full) == 3 * H * (E * E + E) + H * E * E + E
    args = [torch.randn(1, 3, E)] * 3
    assert full(*args)[0].shape == (1, 3, E)


# ----------------------------------------------------------------------------- heads as a sum, small heads' rank

@pytest.mark.trains
def test_concatenating_the_heads_and_applying_w_o_is_a_sum_of_one_term_per_head():
    """The notebook's claim: out_proj of the concatenated heads = Σ_h head_h · W_Oʰ + bias, within
    torch.allclose(atol=1e-6), float32. Seeds 0-9, three shapes each (the notebook's E = 8, H = 2,
    kdim = vdim = 6 among them): the largest difference measured is 1.2e-7 (one float32 rounding),
    under the native kernels and ATEN_CPU_CAPABILITY=default, one and two threads alike; asserted
    below 2e-7, a margin of 5x to the claim's 1e-6."""
    worst = 0.0
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        for B, L_q, L_k, E, E_kv, H in [(2, 3, 5, 8, 6, 2), (3, 4, 7, 16, 16, 4), (1, 5, 2, 12, 9, 3)]:
            torch.manual_seed(seed)
            naive = NaiveMultiheadAttention(E, H, kdim=E_kv, vdim=E_kv)
            x, memory = torch.randn(B, L_q, E, generator=g), torch.randn(B, L_k, E_kv, generator=g)
            d = E // H
            with torch.no_grad():
                output, _ = naive(x, memory, memory)
                terms = [head(x, memory, memory)[0] @ naive.out_proj.weight[:, h * d:(h + 1) * d].T
                         for h, head in enumerate(naive.heads)]  # (B, L_q, E) each
                worst = max(worst, (output - (sum(terms) + naive.out_proj.bias)).abs().max().item())
    assert worst < 2e-7, worst


@pytest.mark.trains
def test_each_heads_score_matrix_has_rank_d_with_a_wide_gap_at_the_notebooks_tolerance():
    """The notebook's claims: with E = 16, each of four heads' W_Q^h W_K^hᵀ has rank 4 = d, one head
    of d = 16 has rank 16, and each of the four heads' 12 × 12 scores on a sequence (biases
    included) has rank 4; all in float64, torch.linalg.matrix_rank(rtol=1e-9). Seeds 0-9: the
    smallest kept singular value, relative to the largest, is at least 5.9e-5 (asserted > 1e-6,
    1,000 times rtol), the largest dropped one at most 1.8e-16 (asserted < 1e-12, rtol / 1,000);
    the same under the native kernels and ATEN_CPU_CAPABILITY=default, one and two threads."""
    kept, dropped = 1.0, 0.0
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        four, one = NaiveMultiheadAttention(16, 4).double(), NaiveMultiheadAttention(16, 1).double()
        x = torch.randn(1, 12, 16, generator=g, dtype=torch.float64)
        with torch.no_grad():
            products = [(head.q_proj.weight.T @ head.k_proj.weight, 4) for head in four.heads]  # (E, E)
            products.append((one.heads[0].q_proj.weight.T @ one.heads[0].k_proj.weight, 16))
            products += [(head.q_proj(x)[0] @ head.k_proj(x)[0].T, 4) for head in four.heads]  # (L, L)
        for product, rank in products:
            assert int(torch.linalg.matrix_rank(product, rtol=1e-9)) == rank
            s = torch.linalg.svdvals(product)
            s = s / s[0]
            kept = min(kept, s[rank - 1].item())
            if rank < len(s):
                dropped = max(dropped, s[rank].item())
    assert kept > 1e-6 and dropped < 1e-12, (kept, dropped)


# ----------------------------------------------------------------------------- the fast path

@pytest.mark.trains  # which kernel F.sdpa picks could depend on the CPU kernel path: run on both
def test_operators_with_sizes_tells_the_flash_kernel_from_the_math_fallback():
    """What the notebook states: F.scaled_dot_product_attention's flash kernel makes no (B, H, L, L)
    tensor; its math fallback (taken with dropout) does; and with need_weights=True the fused layer
    makes one. Under no_grad, float32 and float64 alike; the same under the native kernels and
    ATEN_CPU_CAPABILITY=default (the largest tensor the flash call makes is (B, L, E) = 16,384
    numbers, an eighth of the 131,072 weights)."""
    flash = "aten._scaled_dot_product_flash_attention_for_cpu.default"
    for dtype in (torch.float32, torch.float64):
        layer = FusedMultiheadAttention(64, 8).to(dtype)
        x = torch.randn(2, 128, 64, dtype=dtype)
        q = torch.randn(2, 8, 128, 8, dtype=dtype)
        every = 2 * 8 * 128 * 128
        with torch.no_grad():
            (_, weights), found = operators(lambda: layer(x, x, x, need_weights=False), sizes=True)
            _, dropped = operators(lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.1), sizes=True)
            _, stored = operators(lambda: layer(x, x, x), sizes=True)
        assert weights is None
        assert flash in dict(found) and max(size for _, size in found) < every
        assert flash not in dict(dropped) and max(size for _, size in dropped) >= every
        assert max(size for _, size in stored) >= every
    _, names = operators(lambda: torch.ones(3) + 1)
    assert all(isinstance(name, str) for name in names)


def test_took_fast_path_sees_pytorchs_fast_path_and_only_it():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 3, 8)
    with torch.inference_mode():
        assert took_fast_path(mha, x, x, x)
        assert not took_fast_path(mha, x, x, x.clone())
        _, names = operators(lambda: mha(x, x, x))
    assert names == [FAST_PATH]
    assert not took_fast_path(mha, x, x, x)  # autograd on


# ----------------------------------------------------------------------------- argument checks

def test_bad_inputs_are_named():
    layer = FusedMultiheadAttention(8, 2, kdim=6, vdim=5)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 6), torch.randn(2, 4, 5)
    with pytest.raises(ArgumentError, match="'query'.*E = 8"):
        layer(torch.randn(2, 3, 7), k, v)
    with pytest.raises(ArgumentError, match="'key'.*kdim = 6"):
        layer(q, torch.randn(2, 4, 8), v)
    with pytest.raises(ArgumentError, match="'value'.*vdim = 5"):
        layer(q, k, torch.randn(2, 4, 6))
    with pytest.raises(ArgumentError, match="'value'.*L_k = 4"):
        layer(q, k, torch.randn(2, 3, 5))
    with pytest.raises(ArgumentError, match="'key'.*batch size"):
        layer(q, torch.randn(3, 4, 6), v)
    with pytest.raises(ArgumentError, match="'query'"):
        layer(torch.ones(2, 3, 8, dtype=torch.long), k, v)
    with pytest.raises(ArgumentError, match="'keep_mask'.*\\(2, 2, 3, 4\\)"):
        layer(q, k, v, keep_mask=torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'keep_mask'"):
        layer(q, k, v, keep_mask=torch.ones(3, 4))  # not bool
    with pytest.raises(ArgumentError, match="'key_padding_mask'.*\\(2, 4\\)"):
        layer(q, k, v, key_padding_mask=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ArgumentError, match="'num_heads'.*divisor"):
        FusedMultiheadAttention(8, 3)
    with pytest.raises(ArgumentError, match="'embed_dim'"):
        NaiveMultiheadAttention(0, 1)
    with pytest.raises(ArgumentError, match="'kdim'"):
        NaiveMultiheadAttention(8, 2, kdim=2.5)


def test_errors_follow_the_notebooks_language():
    i18n.set_language("zh")
    layer = NaiveMultiheadAttention(8, 2, kdim=6, vdim=6)
    with pytest.raises(ArgumentError) as caught:
        layer(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 6))
    text = str(caught.value)
    assert "参数 key" in text and "kdim = 6" in text and "needs" not in text
    with pytest.raises(ArgumentError) as caught:
        FusedMultiheadAttention(8, 3)
    assert "约数" in str(caught.value)


# ----------------------------------------------------------------------------- the exercises' references

def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


@pytest.mark.parametrize("number", range(6))
def test_the_fused_forward_reference_is_pytorchs_attention_head_by_head(number):
    query, key, value, w_q, w_k, w_v, w_o, H = _cases("04.fused_forward")[number]
    args = [t.double().requires_grad_() for t in (query, key, value, w_q, w_k, w_v, w_o)]
    output, weights = EXERCISES["04.fused_forward"].reference(*args, H)
    q, k, v = (split_heads(x @ w, H) for x, w in zip(args[:3], args[3:6]))
    expected = merge_heads(F.scaled_dot_product_attention(q, k, v)) @ args[6]
    torch.testing.assert_close(output, expected)
    assert weights.shape == (query.shape[0], H, query.shape[1], key.shape[1])
    probe = torch.randn(output.shape, generator=torch.Generator().manual_seed(4), dtype=output.dtype)
    ours, theirs = (torch.autograd.grad((result * probe).sum(), args) for result in (output, expected))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_the_fused_forward_reference_is_nn_multihead_attention_without_biases_where_sizes_allow():
    query, key, value, w_q, w_k, w_v, w_o, H = _cases("04.fused_forward")[0]  # E_q = H·d = E_out
    mha = nn.MultiheadAttention(8, H, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        mha.out_proj.weight.copy_(w_o.T)
    output, weights = EXERCISES["04.fused_forward"].reference(query, key, value, w_q, w_k, w_v, w_o, H)
    theirs, their_weights = mha(query, key, value, average_attn_weights=False)
    torch.testing.assert_close(output, theirs)
    torch.testing.assert_close(weights, their_weights)


@pytest.mark.parametrize("number", range(7))
def test_the_score_matrices_reference_gives_nn_multihead_attentions_weights_head_by_head(number):
    """softmax(X A_h Xᵀ) over the keys is head h's weights in nn.MultiheadAttention (bias=False), for
    the in_proj_weight of every public case, in its dtype; and X_q A_h X_kᵀ is head h's scaled
    scores from the fused layer's own projections."""
    in_proj_weight, H = _cases("04.score_matrices")[number]
    E = in_proj_weight.shape[1]
    A = EXERCISES["04.score_matrices"].reference(in_proj_weight, H)
    assert A.shape == (H, E, E) and A.dtype == in_proj_weight.dtype
    mha = nn.MultiheadAttention(E, H, bias=False, batch_first=True, dtype=in_proj_weight.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(in_proj_weight)
    x = torch.randn(2, 5, E, generator=torch.Generator().manual_seed(number), dtype=in_proj_weight.dtype)
    _, theirs = mha(x, x, x, average_attn_weights=False)  # (B, H, L, L)
    ours = torch.softmax(x[:, None] @ A @ x[:, None].transpose(-2, -1), dim=-1)  # (B, H, L, L)
    torch.testing.assert_close(ours, theirs)
    fused = FusedMultiheadAttention(E, H, bias=False).to(in_proj_weight.dtype)
    fused.load_packed_weights(dict(zip(("q_weight", "k_weight", "v_weight"), in_proj_weight.split(E)),
                                   out_weight=torch.eye(E, dtype=in_proj_weight.dtype)))
    q, k = split_heads(fused.q_proj(x), H), split_heads(fused.k_proj(x), H)  # (B, H, L, d)
    scores = q @ k.transpose(-2, -1) / (E // H) ** 0.5
    torch.testing.assert_close(x[:, None] @ A @ x[:, None].transpose(-2, -1), scores)


def test_the_score_matrices_cases_have_float64_one_head_and_heads_of_one_feature():
    cases = _cases("04.score_matrices")
    assert {w.dtype for w, _ in cases} == {torch.float32, torch.float64}
    assert {H for _, H in cases} >= {1, 2, 3, 4, 6}
    assert any(w.shape[1] == H for w, H in cases)  # d = 1
    assert all(w.shape == (3 * w.shape[1], w.shape[1]) and w.shape[1] % H == 0 for w, H in cases)


def test_the_fused_forward_cases_have_a_float64_case():
    assert {case[0].dtype for case in _cases("04.fused_forward")} == {torch.float32, torch.float64}


@pytest.mark.parametrize("number", range(5))
def test_the_attn_mask_reference_is_what_nn_multihead_attention_does_with_key_padding_mask(number):
    key_padding_mask, H, L_q = _cases("04.attn_mask")[number]
    mask = EXERCISES["04.attn_mask"].reference(key_padding_mask, H, L_q)
    B, L_k = key_padding_mask.shape
    assert mask.shape == (B * H, L_q, L_k) and mask.dtype == torch.bool
    keep_some = key_padding_mask.clone()
    keep_some[:, 0] = False  # nn.MultiheadAttention would give NaN on a fully padded item: keep key 0
    mask = EXERCISES["04.attn_mask"].reference(keep_some, H, L_q)
    torch.manual_seed(9)
    mha = nn.MultiheadAttention(2 * H, H, batch_first=True, kdim=3, vdim=3)
    g = torch.Generator().manual_seed(10)
    query, memory = torch.randn(B, L_q, 2 * H, generator=g), torch.randn(B, L_k, 3, generator=g)
    torch.testing.assert_close(mha(query, memory, memory, attn_mask=mask)[0],
                               mha(query, memory, memory, key_padding_mask=keep_some)[0])


def test_the_attn_mask_cases_have_a_fully_padded_item_and_left_padding():
    cases = _cases("04.attn_mask")
    assert any(bool(mask.all(dim=-1).any()) for mask, _, _ in cases)
    assert any(bool(mask[:, 0].any() & ~mask[:, -1].all()) for mask, _, _ in cases)
    assert {H for _, H, _ in cases} >= {1, 2, 3, 4}
