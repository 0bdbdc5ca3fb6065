"""course_utils.attention against PyTorch's own: forward values and gradients."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from gradients import assert_close_with_grads, grads

from course_utils import attention, i18n
from course_utils.validation import ArgumentError

# (batch, L_q, L_k, d_k, d_v): square, L_q != L_k both ways, length 1, a wide d_k
SHAPES = [(2, 4, 4, 8, 8), (3, 5, 7, 16, 6), (2, 9, 3, 4, 5), (1, 1, 1, 8, 3), (2, 1, 6, 64, 2), (4, 6, 1, 3, 7)]


def qkv(shape, seed=0, grad=False):
    batch, l_q, l_k, d_k, d_v = shape
    g = torch.Generator().manual_seed(seed)
    tensors = (
        torch.randn(batch, l_q, d_k, generator=g, dtype=torch.float64),
        torch.randn(batch, l_k, d_k, generator=g, dtype=torch.float64),
        torch.randn(batch, l_k, d_v, generator=g, dtype=torch.float64),
    )
    return tuple(t.requires_grad_(grad) for t in tensors)


@pytest.mark.parametrize("shape", SHAPES)
def test_sdpa_matches_pytorch(shape):
    q, k, v = qkv(shape, grad=True)
    output, weights = attention.scaled_dot_product_attention(q, k, v)
    assert_close_with_grads(output, F.scaled_dot_product_attention(q, k, v), (q, k, v))
    assert weights.shape == (shape[0], shape[1], shape[2])
    torch.testing.assert_close(weights.sum(-1), torch.ones(shape[:2], dtype=weights.dtype))


@pytest.mark.parametrize("shape", SHAPES)
def test_sdpa_with_keep_mask_matches_pytorch(shape):
    q, k, v = qkv(shape, grad=True)
    g = torch.Generator().manual_seed(2)
    keep = torch.rand(shape[0], shape[1], shape[2], generator=g) > 0.3
    keep[..., 0] = True  # every row keeps at least one key here; fully hidden rows are tested below
    output, weights = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    assert_close_with_grads(output, F.scaled_dot_product_attention(q, k, v, attn_mask=keep), (q, k, v))
    assert bool((weights[~keep] == 0).all())


def test_sdpa_broadcasts_mask_and_leading_axes():
    # (B, H, L, D) inputs and a (B, 1, 1, L_k) padding-style mask, as multi-head attention uses
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, requires_grad=True) for _ in range(3))
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]]).view(2, 1, 1, 5)
    output, _ = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    assert_close_with_grads(output, F.scaled_dot_product_attention(q, k, v, attn_mask=keep), (q, k, v))


def test_fully_hidden_rows_give_zeros_and_finite_gradients():
    q, k, v = qkv((2, 3, 4, 8, 5), grad=True)
    keep = torch.ones(2, 3, 4, dtype=torch.bool)
    keep[1, 2] = False  # query 2 of item 1 may attend to nothing
    output, weights = attention.scaled_dot_product_attention(q, k, v, keep_mask=keep)
    assert bool((weights[1, 2] == 0).all()) and bool((output[1, 2] == 0).all())
    assert not output.isnan().any()
    # PyTorch's fused attention (torch >= 2.5) defines the same: a zero row
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    for gradient in grads(output, (q, k, v)):
        assert torch.isfinite(gradient).all()


def test_custom_scale():
    q, k, v = qkv((2, 3, 4, 8, 5))
    output, _ = attention.scaled_dot_product_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, scale=0.5))


@pytest.mark.parametrize("shape", SHAPES)
def test_dot_and_scaled_dot_scores(shape):
    q, k, _ = qkv(shape, grad=True)
    reference = torch.bmm(q, k.transpose(1, 2))
    assert_close_with_grads(attention.dot_scores(q, k), reference, (q, k))
    assert_close_with_grads(attention.scaled_dot_scores(q, k), reference / math.sqrt(shape[3]), (q, k))


@pytest.mark.parametrize("shape", SHAPES)
def test_bilinear_scores_match_nn_functional_bilinear(shape):
    batch, l_q, l_k, d_q, _ = shape
    d_k = d_q + 2  # a bilinear score lets queries and keys differ in size
    g = torch.Generator().manual_seed(4)
    q = torch.randn(batch, l_q, d_q, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(batch, l_k, d_k, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(d_q, d_k, generator=g, dtype=torch.float64, requires_grad=True)
    # F.bilinear scores aligned pairs; expand to every (query, key) pair
    pairs_q = q.unsqueeze(2).expand(batch, l_q, l_k, d_q)
    pairs_k = k.unsqueeze(1).expand(batch, l_q, l_k, d_k)
    reference = F.bilinear(pairs_q, pairs_k, w.unsqueeze(0)).squeeze(-1)
    assert_close_with_grads(attention.bilinear_scores(q, k, w), reference, (q, k, w))


@pytest.mark.parametrize("shape", SHAPES)
def test_additive_scores_match_an_mlp_on_the_concatenation(shape):
    batch, l_q, l_k, d_q, _ = shape
    d_k, d_h = d_q + 1, 5
    g = torch.Generator().manual_seed(5)
    q = torch.randn(batch, l_q, d_q, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(batch, l_k, d_k, generator=g, dtype=torch.float64, requires_grad=True)
    hidden = torch.nn.Linear(d_q + d_k, d_h, bias=False, dtype=torch.float64)
    out = torch.nn.Linear(d_h, 1, bias=False, dtype=torch.float64)
    concat = torch.cat(
        [q.unsqueeze(2).expand(batch, l_q, l_k, d_q), k.unsqueeze(1).expand(batch, l_q, l_k, d_k)], dim=-1
    )
    reference = out(torch.tanh(hidden(concat))).squeeze(-1)
    w_q, w_k = hidden.weight[:, :d_q].T, hidden.weight[:, d_q:].T
    ours = attention.additive_scores(q, k, w_q, w_k, out.weight[0])
    assert_close_with_grads(ours, reference, (q, k, hidden.weight, out.weight))


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda q, k, v: attention.scaled_dot_product_attention(q, k[..., :-1], v), "key"),
        (lambda q, k, v: attention.scaled_dot_product_attention(q, k, v[:, :-1]), "value"),
        (lambda q, k, v: attention.scaled_dot_product_attention(q[0, 0], k, v), "query"),
        (lambda q, k, v: attention.scaled_dot_product_attention(q.long(), k, v), "query"),
        (lambda q, k, v: attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(2, 3, 4)), "keep_mask"),
        (
            lambda q, k, v: attention.scaled_dot_product_attention(
                q, k, v, keep_mask=torch.ones(2, 3, 5, dtype=torch.bool)
            ),
            "keep_mask",
        ),
        (lambda q, k, v: attention.dot_scores(q, k[..., :-1]), "key"),
        (lambda q, k, v: attention.bilinear_scores(q, k, torch.ones(8, 7)), "weight"),
        (lambda q, k, v: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 3), torch.ones(4)), "w_key"),
        (lambda q, k, v: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 4), torch.ones(3)), "v"),
    ],
)
def test_bad_input_names_the_argument_what_it_got_and_what_it_needs(call, argument):
    q, k, v = (t.float() for t in qkv((2, 3, 4, 8, 5)))
    with pytest.raises(ArgumentError) as caught:
        call(q, k, v)
    text = str(caught.value)
    assert f"argument '{argument}'" in text and " got " in text and "needs" in text


BAD_CALLS = [
    lambda q, k, v: attention.scaled_dot_product_attention(q, k[..., :-1], v),
    lambda q, k, v: attention.scaled_dot_product_attention(q, k, v[:, :-1]),
    lambda q, k, v: attention.scaled_dot_product_attention(q, k, v[:1]),
    lambda q, k, v: attention.scaled_dot_product_attention(q[0, 0], k, v),
    lambda q, k, v: attention.scaled_dot_product_attention(q.long(), k, v),
    lambda q, k, v: attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(2, 3, 4)),
    lambda q, k, v: attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(2, 3, 5, dtype=torch.bool)),
    lambda q, k, v: attention.dot_scores(q, k[..., :-1]),
    lambda q, k, v: attention.scaled_dot_scores(q, k[:1]),
    lambda q, k, v: attention.bilinear_scores(q, k, torch.ones(8, 7)),
    lambda q, k, v: attention.additive_scores(q, k, torch.ones(7, 4), torch.ones(8, 4), torch.ones(4)),
    lambda q, k, v: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 3), torch.ones(4)),
    lambda q, k, v: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 4), torch.ones(3)),
]
#: What a Chinese error may hold in Latin letters: code (function and argument names, axis names,
#: dtypes, Python literals), never an English word.
CODE_WORDS = {
    "scaled_dot_product_attention", "dot_scores", "scaled_dot_scores", "bilinear_scores", "additive_scores",
    "query", "key", "value", "keep_mask", "weight", "w_query", "w_key", "v",
    "L_q", "L_k", "d_q", "d_k", "d_v", "d_h", "float32", "float64", "int64", "bool", "True", "False",
}


@pytest.mark.parametrize("call", BAD_CALLS)
def test_chinese_errors_hold_no_english_words(call):
    q, k, v = (t.float() for t in qkv((2, 3, 4, 8, 5)))
    i18n.set_language("zh")
    with pytest.raises(ArgumentError) as caught:
        call(q, k, v)
    text = str(caught.value)
    english = [word for word in re.findall(r"[A-Za-z][A-Za-z_0-9]*", text) if word not in CODE_WORDS]
    assert not english, f"English in a Chinese error: {english}: {text}"
    assert "参数" in text and "收到" in text and "需要" in text, text


def test_errors_follow_the_notebook_language():
    q, k, v = qkv((2, 3, 4, 8, 5))
    i18n.set_language("zh")
    try:
        with pytest.raises(ValueError, match="参数 key 收到"):
            attention.scaled_dot_product_attention(q, k[..., :-1], v)
    finally:
        i18n.set_language("en")
