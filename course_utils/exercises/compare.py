"""Comparing a learner's result with the reference's: None when they agree, else a sentence
saying what differs (type, exact dtype, shape, a new NaN, the largest gap and where; for bool and
integer results, how many entries differ and the first, shown as True/False or integers).

The comparison uses functions taken when the package is imported, and never calls a method a
learner's object could define (__eq__, __iter__, a tensor subclass's __torch_function__): a
learner's code that replaces torch.allclose (say) cannot change how its answer is judged.
"""

import torch

from ..i18n import message

_allclose, _isnan, _abs, _ne, _any, _sum = torch.allclose, torch.isnan, torch.abs, torch.ne, torch.any, torch.sum
_nonzero, _nan_to_num, _argmax, _unravel = torch.nonzero, torch.nan_to_num, torch.argmax, torch.unravel_index
_detach, _double, _item = torch.Tensor.detach, torch.Tensor.double, torch.Tensor.item


def difference(expected, got, tolerance, where=None, returns=()):
    """None when `got` matches `expected` within tolerance (atol, rtol); else a sentence saying how not.
    returns: the names of the values a tuple result holds, as the exercise's docstring gives them
    ("output", "lse"), so that a verdict names the one that differs."""
    where = where or message("diff.result")
    if got is None and expected is not None:
        return message("diff.none", where=where)
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(expected, got, tolerance, where)
    if isinstance(expected, (tuple, list)):
        if not issubclass(type(got), (tuple, list)):
            return message("diff.type", where=where, expected=_kind(expected), got=_kind(got))
        got = list((tuple.__iter__ if issubclass(type(got), tuple) else list.__iter__)(got))  # not a learner's __iter__
        if len(got) != len(expected):
            return message("diff.length", where=where, expected=len(expected), got=len(got))
        for index, (e, g) in enumerate(zip(expected, got)):
            found = difference(e, g, tolerance, _item_name(index, returns))
            if found:
                return found
        return None
    if type(got) is not type(expected):
        return message("diff.type", where=where, expected=_kind(expected), got=_kind(got))
    if got != expected:
        return message("diff.equal", where=where, expected=expected, got=got)
    return None


def _tensor_difference(expected, got, tolerance, where):
    if not issubclass(type(got), torch.Tensor):
        return message("diff.type", where=where, expected=_kind(expected), got=_kind(got))
    if type(got) is not torch.Tensor:  # a subclass could answer any question about itself
        return message("diff.subclass", where=where, got=type(got).__name__)
    if got.dtype != expected.dtype:
        return message("diff.dtype", where=where, expected=_dtype(expected.dtype), got=_dtype(got.dtype))
    if got.layout != torch.strided or got.is_nested or got.device != expected.device:
        return message("diff.plain", where=where, expected=expected.device, got=f"{got.layout}, {got.device}")
    if got.shape != expected.shape:
        return message("diff.shape", where=where, expected=tuple(expected.shape), got=tuple(got.shape))
    got = _detach(got)
    if not expected.is_floating_point():  # bool and integer results: every entry exactly
        differs = _ne(got, expected)
        if not _any(differs):
            return None
        first = _index(_nonzero(differs)[0])
        return message(
            "diff.entries", where=where, count=int(_sum(differs)), total=differs.numel(), index=first,
            got=_item(got[first]), expected=_item(expected[first]),
        )
    found = gap(expected, got, tolerance)
    if found:
        return message("diff.nan" if found[0] == "nan" else "diff.value", where=where, **found[1])
    return None


def gap(expected, got, tolerance):
    """None when the floating-point tensors agree; else ("nan", {index}) for a NaN the expected
    tensor has not there, or ("value", {diff, index, got, expected}) for the largest gap."""
    expected, got = _double(_detach(expected)), _double(got)
    new_nan = _isnan(got) & ~_isnan(expected)
    if _any(new_nan):
        return "nan", {"index": _index(_nonzero(new_nan)[0])}
    atol, rtol = tolerance
    if _allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True):
        return None
    distance = _nan_to_num(_abs(got - expected), nan=float("inf"))
    worst = _unravel(_argmax(distance), distance.shape)
    return "value", {
        "diff": _item(distance[worst]), "index": _index(worst), "got": _item(got[worst]),
        "expected": _item(expected[worst]),
    }


def tensors(value, where=None, returns=()):
    """[(where, tensor)] for every tensor in a result (a tensor, or a tuple or list of them); the top
    level's items named by `returns` (as ``difference`` names them)."""
    if issubclass(type(value), torch.Tensor):
        return [(where, value)]
    if issubclass(type(value), (tuple, list)):
        items = (tuple.__iter__ if issubclass(type(value), tuple) else list.__iter__)(value)
        return [found for index, item in enumerate(items) for found in tensors(item, _item_name(index, returns))]
    return []


def _item_name(index, returns):
    """How a verdict names item `index` of a tuple result: its name when `returns` gives one."""
    if index < len(returns):
        return message("diff.returned", name=returns[index], number=index + 1)
    return message("diff.item", number=index + 1)


def _index(position):
    return tuple(int(i) for i in position)


def _dtype(dtype):
    return str(dtype).replace("torch.", "")


def _kind(value):
    if type(value) is torch.Tensor:  # (a subclass's .dtype would run its own code)
        return f"Tensor[{_dtype(value.dtype)}]"
    if issubclass(type(value), (tuple, list)):
        size = (tuple.__len__ if issubclass(type(value), tuple) else list.__len__)(value)
        return f"{type(value).__name__}[{size} items]"
    return type(value).__name__
