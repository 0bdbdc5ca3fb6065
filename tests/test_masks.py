"""course_utils.masks against PyTorch's own masking: F.scaled_dot_product_attention (bool and
additive masks, is_causal, causal_lower_right) and nn.MultiheadAttention (bool and float attn_mask
and key_padding_mask, is_causal); forward values and gradients; converters; errors; fully masked
rows, and what PyTorch's paths return for them (measured with torch 2.13, as lesson 02 says);
lesson 02's mask-layout bug (ERRATA 7)."""

import math
from unittest import mock

import jupytext
import pytest
import torch
import torch.nn.functional as F
from gradients import assert_close_with_grads, grads
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from course_utils import attention, i18n, masks
from course_teacher import bilingual_code, build
from course_utils.validation import ArgumentError


def qkv(batch, l_q, l_k, d, seed=0, lead=(), dtype=torch.float64, grad=True):
    g = torch.Generator().manual_seed(seed)
    shapes = ((*lead, batch, l_q, d), (*lead, batch, l_k, d), (*lead, batch, l_k, d))
    return tuple(torch.randn(s, generator=g, dtype=dtype).requires_grad_(grad) for s in shapes)


def identity_mha(embed_dim, dtype=torch.float64):
    """nn.MultiheadAttention with one head and identity projections: plain attention on its inputs."""
    mha = nn.MultiheadAttention(embed_dim, 1, batch_first=True, dtype=dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(embed_dim, dtype=dtype).repeat(3, 1))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(embed_dim, dtype=dtype))
        mha.out_proj.bias.zero_()
    return mha


# ----------------------------------------------------------------------------- building masks

@pytest.mark.parametrize("lengths, max_len", [([3, 1, 2], 3), ([2, 5, 4, 1], 6), ([1], 1), ([0, 4], 4)])
def test_padding_mask_is_the_inverse_of_a_key_padding_mask(lengths, max_len):
    keep = masks.padding_mask(torch.tensor(lengths), max_len)
    assert keep.shape == (len(lengths), 1, 1, max_len) and keep.dtype == torch.bool
    expected = torch.tensor([[j >= n for j in range(max_len)] for n in lengths])  # True = padding
    assert torch.equal(keep[:, 0, 0], ~expected)


@pytest.mark.parametrize("l_q, l_k", [(4, 4), (1, 1), (3, 5), (5, 2)])
def test_causal_mask_matches_is_causal(l_q, l_k):
    keep = masks.causal_mask(l_q, l_k)
    assert keep.shape == (l_q, l_k)
    q, k, v = qkv(2, l_q, l_k, 4)
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    assert_close_with_grads(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))


def test_causal_mask_defaults_to_square_and_keeps_the_diagonal():
    assert torch.equal(masks.causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())


@pytest.mark.parametrize("l_q, l_k", [(4, 4), (1, 1), (3, 5), (1, 6)])
def test_the_two_alignments_match_causal_upper_left_and_causal_lower_right(l_q, l_k):
    q, k, v = qkv(2, l_q, l_k, 4, seed=13)
    for align, bias in (("top_left", causal_upper_left), ("bottom_right", causal_lower_right)):
        ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=masks.causal_mask(l_q, l_k, align=align))
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=bias(l_q, l_k))
        assert_close_with_grads(ours, theirs, (q, k, v))


@pytest.mark.parametrize("l_q, l_k", [(2, 5), (1, 4), (4, 4)])
def test_bottom_right_is_the_last_rows_of_the_full_causal_mask(l_q, l_k):
    assert torch.equal(masks.causal_mask(l_q, l_k, align="bottom_right"), masks.causal_mask(l_k)[-l_q:])


def test_bottom_right_with_more_queries_than_keys_hides_the_first_queries_entirely():
    keep = masks.causal_mask(5, 2, align="bottom_right")
    assert torch.equal(keep, torch.ones(5, 2, dtype=torch.bool).tril(-3))
    assert torch.equal(keep.any(-1), torch.tensor([False, False, False, True, True]))


def test_decoding_the_last_queries_with_a_cache_is_bottom_right():
    x = torch.randn(1, 6, 4, generator=torch.Generator().manual_seed(14), dtype=torch.float64)
    full, _ = attention.scaled_dot_product_attention(x, x, x, keep_mask=masks.causal_mask(6))
    bottom_right = masks.causal_mask(2, 6, align="bottom_right")
    last, _ = attention.scaled_dot_product_attention(x[:, -2:], x, x, keep_mask=bottom_right)
    torch.testing.assert_close(last, full[:, -2:])


# ----------------------------------------------------------------------------- masked softmax

def _random_keep(shape, seed, hide_row=True):
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(shape, generator=g) > 0.4
    if hide_row:
        keep[..., 0, :] = False  # the first query of every row block sees nothing
    return keep


@pytest.mark.parametrize("keep_shape", [(2, 3, 4, 5), (2, 1, 4, 5), (2, 1, 1, 5), (1, 1, 4, 5), (5,)])
def test_masked_softmax_and_attention_match_sdpa_with_a_bool_mask(keep_shape):
    q, k, v = qkv(3, 4, 5, 8, lead=(2,), seed=3)  # (B, H, L, d) = (2, 3, L, 8)
    keep = _random_keep(keep_shape, seed=4, hide_row=len(keep_shape) > 1)
    ours, weights = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.expand(2, 3, 4, 5))  # F.sdpa wants >= 2-D
    assert_close_with_grads(ours, theirs, (q, k, v))
    # masked_softmax on its own, against the weights F.sdpa implies (softmax with -inf, NaN -> 0)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).detach().requires_grad_()
    theirs = scores.masked_fill(~keep, float("-inf")).softmax(-1).nan_to_num(0.0)
    assert_close_with_grads(masks.masked_softmax(scores, keep), theirs, (scores,))
    torch.testing.assert_close(weights, masks.masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(8), keep))


def test_attention_with_an_additive_mask_matches_sdpa_with_the_same_float_mask():
    q, k, v = qkv(3, 4, 6, 8, seed=5)
    keep = _random_keep((3, 4, 6), seed=6)
    additive = masks.to_additive(keep, torch.float64)
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=masks.from_additive(additive))
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    assert_close_with_grads(ours, theirs, (q, k, v))


def test_attention_matches_multihead_attention_with_attn_mask_and_key_padding_mask():
    q, k, v = qkv(3, 4, 6, 8, seed=7)
    mha = identity_mha(8)
    keep = _random_keep((3, 4, 6), seed=8, hide_row=False)
    keep[..., 0] = True  # nn.MultiheadAttention gives NaN on fully masked rows: tested separately
    ours, weights = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    theirs, their_weights = mha(q, k, v, attn_mask=masks.to_ignore(keep))  # (B·H, L_q, L_k), H = 1
    assert_close_with_grads(ours, theirs, (q, k, v))
    torch.testing.assert_close(weights, their_weights)

    pad = masks.padding_mask(torch.tensor([6, 2, 4]), 6)[:, 0]  # (B, 1, L_k)
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=pad)
    theirs, _ = mha(q, k, v, key_padding_mask=masks.to_key_padding(pad))
    assert_close_with_grads(ours, theirs, (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_fully_masked_rows_give_zero_weights_never_nan(dtype):
    g = torch.Generator().manual_seed(9)
    scores = (3 * torch.randn(2, 3, 4, generator=g)).to(dtype).requires_grad_()
    keep = torch.ones(2, 3, 4, dtype=torch.bool)
    keep[0, 1] = False
    keep[1] = False  # a whole item
    weights = masks.masked_softmax(scores, keep)
    assert weights.dtype == dtype and not weights.isnan().any()
    assert bool((weights[0, 1] == 0).all()) and bool((weights[1] == 0).all())
    torch.testing.assert_close(weights[0, [0, 2]].float(), scores[0, [0, 2]].float().softmax(-1), atol=2e-3, rtol=0)
    (gradient,) = grads(weights, (scores,))
    assert torch.isfinite(gradient).all() and bool((gradient[1] == 0).all())


def test_the_naive_recipe_gives_nan_where_the_package_gives_zeros_like_sdpa():
    q, k, v = qkv(1, 3, 3, 4, grad=False)
    keep = torch.tensor([[[True, False, False], [False, False, False], [True, True, True]]])
    naive = (q @ k.transpose(-2, -1) / 2).masked_fill(~keep, float("-inf")).softmax(-1)
    assert naive[0, 1].isnan().all() and not naive[0, [0, 2]].isnan().any()
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(ours[0, [0, 2]], sdpa[0, [0, 2]])
    assert bool((ours[0, 1] == 0).all())


def test_the_nan_gradient_of_the_naive_recipe_reaches_v_and_with_an_additive_mask_q_and_k():
    """Lesson 02 section 4: a loss on the output (a fixed random weighting of weights @ v)."""
    keep = torch.tensor([[[True, True, False], [False, False, False], [True, True, True]]])
    for seed in range(10):
        q, k, v = qkv(1, 3, 3, 4, seed=seed, dtype=torch.float32)
        scores = q @ k.transpose(-2, -1) / 2
        output = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v
        gq, gk, gv = grads(output, (q, k, v), seed=seed)
        assert gv.isnan().all() and torch.isfinite(gq).all() and torch.isfinite(gk).all() and (gq[0, 1] == 0).all()
        output = (scores + masks.to_additive(keep)).softmax(-1) @ v
        gq, gk, gv = grads(output, (q, k, v), seed=seed)
        assert gq[0, 1].isnan().all() and torch.isfinite(gq[0, [0, 2]]).all() and gk.isnan().all() and gv.isnan().all()
        ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
        gq, gk, gv = grads(ours, (q, k, v), seed=seed)
        assert all(torch.isfinite(g).all() for g in (gq, gk, gv)) and (gq[0, 1] == 0).all()


# ----------------------------------------------------------------------------- what PyTorch returns (torch 2.13)

TORCH_2_13 = pytest.mark.skipif(
    not torch.__version__.startswith("2.13."), reason="lesson 02 reports these as measured with torch 2.13"
)


def _outcome(rows):
    return "NaN" if bool(rows.isnan().all()) else "0" if bool((rows == 0).all()) else "other"


def _spy_fast_path():
    """A patch under which the calls of nn.MultiheadAttention's fast path are counted."""
    calls = []
    real = torch._native_multi_head_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    return mock.patch.object(torch, "_native_multi_head_attention", counting), calls


@TORCH_2_13
@pytest.mark.parametrize("batch, embed", [(2, 4), (3, 8), (2, 16)])
def test_pytorch_on_fully_masked_rows_as_measured_with_torch_2_13(batch, embed):
    g = torch.Generator().manual_seed(embed)
    x = torch.randn(batch, 3, embed, generator=g)
    keep_row = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    all_padding = torch.zeros(batch, 3, dtype=torch.bool)
    all_padding[1] = True
    for mask, hidden in ((keep_row, lambda out: out[:, 1]), (~all_padding[:, None, :], lambda out: out[1])):
        for attn_mask in (mask, masks.to_additive(mask)):  # F.sdpa: 0, bool and float masks
            assert _outcome(hidden(F.scaled_dot_product_attention(x, x, x, attn_mask=attn_mask))) == "0"
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(embed, 2, batch_first=True)

    def measure(**options):
        by_row = mha(x, x, x, attn_mask=~keep_row, **options)[0][:, 1]
        by_padding = mha(x, x, x, key_padding_mask=all_padding, **options)[0][1]
        return _outcome(by_row), _outcome(by_padding)

    spy, calls = _spy_fast_path()
    with spy:
        mha.train()
        assert measure() == ("NaN", "NaN")  # general path, its own softmax
        assert measure(need_weights=False) == ("0", "0")  # general path, calls F.sdpa
        assert not calls
        mha.eval()
        with torch.no_grad():
            assert measure() == ("NaN", "NaN") and measure(need_weights=False) == ("NaN", "NaN")
            assert len(calls) == 4  # each of these ran the fast path
            with torch.inference_mode():
                assert measure(need_weights=False) == ("NaN", "NaN")
            torch.backends.mha.set_fastpath_enabled(False)
            try:
                assert measure(need_weights=False) == ("0", "0")
            finally:
                torch.backends.mha.set_fastpath_enabled(True)
        assert len(calls) == 6


@TORCH_2_13
def test_multihead_attentions_is_causal_hint_as_measured_with_torch_2_13():
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    mha = identity_mha(8)
    causal, _ = attention.scaled_dot_product_attention(x, x, x, keep_mask=masks.causal_mask(5))
    keep = torch.ones(5, 5, dtype=torch.bool)
    keep[:, 3:] = False  # padding, not causal
    padded, _ = attention.scaled_dot_product_attention(x, x, x, keep_mask=keep)
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="Need attn_mask"):
            mha(x, x, x, is_causal=True)
        wrong_hint = {w: mha(x, x, x, attn_mask=~keep, is_causal=True, need_weights=w)[0] for w in (True, False)}
    torch.testing.assert_close(wrong_hint[True], padded)  # the hint is ignored
    torch.testing.assert_close(wrong_hint[False], causal)  # the mask is ignored


def test_masked_softmax_without_a_mask_is_softmax():
    scores = torch.randn(2, 3, 4)
    torch.testing.assert_close(masks.masked_softmax(scores), scores.softmax(-1))


# ----------------------------------------------------------------------------- converters

def test_converters_round_trip():
    keep = _random_keep((2, 3, 4), seed=10)
    assert torch.equal(masks.from_ignore(masks.to_ignore(keep)), keep)
    assert torch.equal(masks.from_additive(masks.to_additive(keep)), keep)
    assert torch.equal(masks.from_zero_hidden(keep.int()), keep)
    assert torch.equal(masks.from_zero_hidden(keep.float()), keep)
    assert torch.equal(masks.from_zero_hidden(keep), keep)
    pad = masks.padding_mask(torch.tensor([4, 1]), 4)
    key_padding = masks.to_key_padding(pad)
    assert key_padding.shape == (2, 4) and torch.equal(key_padding, torch.tensor([[0, 0, 0, 0], [0, 1, 1, 1]]).bool())
    assert torch.equal(masks.from_key_padding(key_padding), pad)
    assert torch.equal(masks.to_key_padding(pad[:, 0]), key_padding)  # (B, 1, L_k) too
    additive = masks.to_additive(keep)
    assert additive.dtype == torch.float32 and set(additive.unique().tolist()) <= {0.0, float("-inf")}


def test_the_tutorials_conventions_read_through_the_converters_match_the_keep_mask():
    q, k, v = qkv(2, 3, 4, 8, grad=False)
    keep = _random_keep((2, 3, 4), seed=11, hide_row=False)
    keep[..., 0] = True
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    zero_hidden = scores.masked_fill(keep.int() == 0, float("-inf")).softmax(-1) @ v  # mask == 0 hidden
    true_masked = scores.masked_fill(masks.to_ignore(keep), float("-inf")).softmax(-1) @ v  # True masked
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    torch.testing.assert_close(zero_hidden, ours)
    torch.testing.assert_close(true_masked, ours)


def test_multihead_attentions_float_masks_are_added_to_the_scores():
    q, k, v = qkv(3, 4, 6, 8, seed=16)
    mha = identity_mha(8)
    pad = masks.padding_mask(torch.tensor([6, 2, 4]), 6)[:, 0]  # (B, 1, L_k)
    ours, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=pad)
    additive = masks.to_additive(pad, torch.float64)
    by_attn_mask, _ = mha(q, k, v, attn_mask=additive.expand(3, 4, 6))
    by_key_padding, _ = mha(q, k, v, key_padding_mask=additive[:, 0])
    assert_close_with_grads(by_attn_mask, ours, (q, k, v))
    assert_close_with_grads(by_key_padding, ours, (q, k, v))
    bias = torch.randn(4, 6, generator=torch.Generator().manual_seed(17), dtype=torch.float64)  # any float: added
    with torch.no_grad():
        biased, _ = mha(q, k, v, attn_mask=bias)
        torch.testing.assert_close(biased, (q @ k.transpose(-2, -1) / math.sqrt(8) + bias).softmax(-1) @ v)


def test_generate_square_subsequent_mask_is_the_additive_causal_mask_and_is_causal_needs_it():
    square = nn.Transformer.generate_square_subsequent_mask(5)
    assert square.dtype == torch.float32 and torch.equal(masks.from_additive(square), masks.causal_mask(5))
    assert torch.equal(masks.to_additive(masks.causal_mask(5)), square)
    x = qkv(2, 5, 5, 8, seed=18)[0]
    causal, _ = attention.scaled_dot_product_attention(x, x, x, keep_mask=masks.causal_mask(5))
    assert_close_with_grads(F.scaled_dot_product_attention(x, x, x, is_causal=True), causal, (x,))
    mha = identity_mha(8)
    for need_weights in (True, False):
        hinted, _ = mha(x, x, x, attn_mask=square.double(), is_causal=True, need_weights=need_weights)
        assert_close_with_grads(hinted, causal, (x,))


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: masks.from_ignore(torch.tensor([[1, 0]])), "ignore_mask"),  # 0/1 ints: keep or ignore?
        (lambda: masks.from_ignore(torch.tensor([[1.0, 0.0]])), "ignore_mask"),
        (lambda: masks.to_ignore(torch.tensor([[1, 0]])), "keep_mask"),
        (lambda: masks.from_key_padding(torch.tensor([[0, 1]])), "key_padding_mask"),
        (lambda: masks.from_key_padding(torch.zeros(2, 1, 3, dtype=torch.bool)), "key_padding_mask"),
        (lambda: masks.to_key_padding(torch.ones(2, 5, dtype=torch.bool)), "keep_mask"),  # (B, L_k) or (L_q, L_k)?
        (lambda: masks.to_key_padding(torch.ones(2, 1, 3, 5, dtype=torch.bool)), "keep_mask"),  # varies by query
        (lambda: masks.from_additive(torch.tensor([0.0, -1e9])), "additive_mask"),  # a bias, not a mask
        (lambda: masks.from_additive(torch.tensor([0.0, 0.5])), "additive_mask"),
        (lambda: masks.from_additive(torch.tensor([0.0, float("nan")])), "additive_mask"),
        (lambda: masks.from_additive(torch.tensor([True, False])), "additive_mask"),
        (lambda: masks.to_additive(torch.tensor([1, 0])), "keep_mask"),
        (lambda: masks.from_zero_hidden(torch.tensor([0.0, float("-inf")])), "mask"),  # additive, read inverted
        (lambda: masks.from_zero_hidden(torch.tensor([0, 2])), "mask"),
        (lambda: masks.padding_mask(torch.tensor([3, 6]), 5), "lengths"),
        (lambda: masks.padding_mask(torch.tensor([3.0]), 5), "lengths"),
        (lambda: masks.padding_mask(torch.tensor([3]), -1), "max_len"),
        (lambda: masks.causal_mask(0), "L_q"),
        (lambda: masks.causal_mask(3, 2.0), "L_k"),
        (lambda: masks.causal_mask(3, 4, align="bottom"), "align"),
        (lambda: masks.causal_mask(3, 4, align=None), "align"),
        (lambda: masks.masked_softmax(torch.zeros(2, 3), torch.ones(2, 3)), "keep_mask"),  # float, not bool
        (lambda: masks.masked_softmax(torch.zeros(2, 3), torch.ones(3, 2, dtype=torch.bool)), "keep_mask"),
        (lambda: masks.masked_softmax(torch.zeros(3), torch.ones(2, 3, dtype=torch.bool)), "keep_mask"),  # enlarges
        (lambda: masks.masked_softmax(torch.zeros(2, 3, dtype=torch.long), None), "scores"),
    ],
)
def test_ambiguous_or_bad_input_names_the_argument(call, argument):
    with pytest.raises(ArgumentError) as caught:
        call()
    text = str(caught.value)
    assert f"argument '{argument}'" in text and " got " in text and "needs" in text


def test_errors_follow_the_notebook_language():
    i18n.set_language("zh")
    with pytest.raises(ArgumentError, match="参数 additive_mask 收到.*含有值 -1000000000.0.*偏置"):
        masks.from_additive(torch.tensor([0.0, -1e9]))


def test_the_attention_function_names_itself_in_mask_errors():
    q, k, v = qkv(2, 3, 4, 8, grad=False)
    with pytest.raises(ArgumentError, match="^scaled_dot_product_attention: argument 'keep_mask'"):
        attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(2, 3, 4))


# ----------------------------------------------------------------------------- ERRATA 7, as lesson 02 shows it

def _lesson_function(name):
    """The function `name` as lesson 02's source defines it (so the test holds the lesson's own code)."""
    namespace = {}
    exec(
        "import torch\nfrom course_utils.attention import scaled_dot_product_attention\n", namespace
    )
    source = jupytext.read(build.lessons()["02"])
    (cell,) = [c for c in source.cells if c.cell_type == "code" and f"def {name}(" in c.source]
    exec(bilingual_code.localize(cell.source, "en"), namespace)
    return namespace[name]


def _layout_case(seed):
    B, H, L, E = 3, 2, 5, 8
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(seed), dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([5, 3, 4])
    pad = masks.padding_mask(lengths, L)
    return mha, x, lengths, pad, pad[:, 0].expand(B, L, L)


@pytest.mark.parametrize("seed", range(10))
def test_the_tutorials_layout_bug_differs_from_multihead_attention_and_both_fixes_match(seed):
    tutorial_mha = _lesson_function("tutorial_mha")
    mha, x, lengths, pad, keep = _layout_case(seed)
    B, H = 3, 2
    reference, _ = mha(x, x, x, key_padding_mask=masks.to_key_padding(pad))
    buggy, weights = tutorial_mha(x, mha, keep, qkv_order="head", mask_order="batch")
    assert (buggy - reference).abs().max() > 0.1  # the lesson's claim, with margin over 10 seeds
    for qkv_order in ("head", "batch"):
        fixed, _ = tutorial_mha(x, mha, keep, qkv_order=qkv_order, mask_order=qkv_order)
        assert_close_with_grads(fixed, reference, (x,))
    # head h of item b sits in slot h·B + b; the shortest item's heads attend to its padding
    on_padding = {divmod(n, B): bool(weights[n][:, lengths[n % B]:].sum() > 0) for n in range(B * H)}
    assert {slot for slot, yes in on_padding.items() if yes} == {(0, 1), (1, 1)}
    # B = 1 hides the bug
    one, _ = tutorial_mha(x[1:2], mha, keep[1:2])
    torch.testing.assert_close(one, mha(x[1:2], x[1:2], x[1:2], key_padding_mask=masks.to_key_padding(pad[1:2]))[0])


@pytest.mark.parametrize("seed", range(3))
def test_multihead_attention_reads_a_3d_attn_mask_batch_major(seed):
    mha, x, _, pad, keep = _layout_case(seed)
    B, H, L = 3, 2, 5
    ignore = masks.to_ignore(keep)
    batch_major = ignore.unsqueeze(1).repeat(1, H, 1, 1).view(B * H, L, L)  # slot b·H + h
    by_batch_major, _ = mha(x, x, x, attn_mask=batch_major)
    one_by_one = torch.cat([mha(x[b : b + 1], x[b : b + 1], x[b : b + 1], attn_mask=ignore[b])[0] for b in range(B)])
    assert_close_with_grads(by_batch_major, one_by_one, (x,))
    reference, _ = mha(x, x, x, key_padding_mask=masks.to_key_padding(pad))
    torch.testing.assert_close(by_batch_major, reference)
    by_head_major, _ = mha(x, x, x, attn_mask=ignore.repeat(H, 1, 1))  # slot h·B + b: not what it reads
    assert not torch.allclose(by_head_major, reference)
