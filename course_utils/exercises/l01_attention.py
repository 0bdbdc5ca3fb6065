"""Lesson 01's exercises: attention basics."""

import math

import torch

from .. import attention
from .registry import Exercise, Mistake, register


def _qkv(generator, batch, l_q, l_k, d_k, d_v):
    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return randn(batch, l_q, d_k), randn(batch, l_k, d_k), randn(batch, l_k, d_v)


def _attention_cases(generator):
    # The first case is square (L_q = L_k = d_k = d_v), so shape mistakes still run there and can
    # be recognised by their values; the others have L_q != L_k, length 1, and a large d_k,
    # where the scale matters most.
    return [
        _qkv(generator, 2, 4, 4, 4, 4),
        _qkv(generator, 3, 5, 7, 8, 6),
        _qkv(generator, 1, 1, 1, 16, 3),
        _qkv(generator, 2, 3, 9, 64, 2),
    ]


def _attend(scores, value, dim=-1):
    weights = torch.softmax(scores, dim=dim)
    return weights @ value, weights


register(
    Exercise(
        id="01.scaled_dot",
        reference=lambda q, k, v: attention.scaled_dot_product_attention(q, k, v),
        cases=_attention_cases,
        mistakes=(
            Mistake(
                "NO_SCALE",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1), v),
                {
                    "en": "The scores are not divided by √d_k, so for large d_k the softmax saturates.",
                    "zh": "注意力分数没有除以 √d_k；d_k 较大时 softmax 会饱和。",
                },
            ),
            Mistake(
                "SCALE_DK",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1) / q.shape[-1], v),
                {
                    "en": "The scores are divided by d_k; divide by its square root, √d_k.",
                    "zh": "分数除以了 d_k；应除以它的平方根 √d_k。",
                },
            ),
            Mistake(
                "SOFTMAX_DIM",
                lambda q, k, v: _attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, dim=-2),
                {
                    "en": "The softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: use dim=-1.",
                    "zh": "softmax 作用在了查询维度（dim=-2）上；每个查询对所有键的权重之和应为 1，请用 dim=-1。",
                },
            ),
            Mistake(
                "TRANSPOSE",
                lambda q, k, v: _attend(q.transpose(-2, -1) @ k / math.sqrt(q.shape[-1]), v),
                {
                    "en": "The query was transposed instead of the key: scores are Q Kᵀ, shape (L_q, L_k).",
                    "zh": "转置的是查询而不是键：分数应为 Q Kᵀ，形状为 (L_q, L_k)。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                lambda q, k, v: attention.scaled_dot_product_attention(q, k, v)[::-1],
                {
                    "en": "The return order is swapped: return (output, weights).",
                    "zh": "返回顺序颠倒了：应返回 (output, weights)。",
                },
            ),
        ),
    )
)
