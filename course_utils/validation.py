"""Argument checks that fail with a sentence a learner can act on.

Every error names the function, the argument, what it got and what it needs, in the
notebook's language, e.g.
``scaled_dot_product_attention: argument 'key' got a tensor of shape (2, 5, 7); needs ...``.
"""

import torch

from .i18n import language, message, pick


class ArgumentError(ValueError):
    """An argument of the wrong kind, shape or dtype. A ValueError, so `except ValueError` works."""


def fail(function, argument, got, needed):
    """Raise ArgumentError. `needed` is a plain string or an {"en": ..., "zh": ...} dict."""
    if isinstance(needed, dict):
        needed = pick(needed)
    raise ArgumentError(
        message("error.argument", function=function, argument=argument, got=got, needed=needed)
    )


def describe(value):
    """A short description of `value` for an error message: shape and dtype for a tensor."""
    if isinstance(value, torch.Tensor):
        shape = tuple(value.shape)
        dtype = str(value.dtype).replace("torch.", "")
        if language() == "zh":
            return f"形状为 {shape}、类型为 {dtype} 的张量"
        return f"a tensor of shape {shape} and dtype {dtype}"
    return f"{type(value).__name__} {value!r}"[:80]


def tensor(function, argument, value, *, min_ndim=1, layout="", floating=True):
    """Check that `value` is a tensor with at least `min_ndim` axes (floating-point if asked).

    `layout` names the axes the caller expects, e.g. "(..., L_q, d_k)", for the message.
    """
    if isinstance(value, torch.Tensor) and value.ndim >= min_ndim:
        if not floating or value.is_floating_point():
            return value
    kind = {"en": "a floating-point tensor", "zh": "浮点张量"} if floating else {"en": "a tensor", "zh": "张量"}
    shape = {"en": f" of shape {layout}", "zh": f"，形状为 {layout}"} if layout else {"en": "", "zh": ""}
    fail(function, argument, describe(value), {lang: kind[lang] + shape[lang] for lang in kind})


def same_size(function, argument, value, axis, size, source):
    """Check that `value.shape[axis] == size`, where `size` comes from `source` (e.g. "query's d_k")."""
    if value.shape[axis] != size:
        fail(
            function,
            argument,
            describe(value),
            {
                "en": f"size {size} on axis {axis} to match {source}",
                "zh": f"第 {axis} 维大小为 {size}，与 {source} 一致",
            },
        )
