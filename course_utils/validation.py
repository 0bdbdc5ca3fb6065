"""Argument checks that fail with a sentence a learner can act on.

Every error names the function, the argument, what it got and what it needs, in the
notebook's language, e.g.
``scaled_dot_product_attention: argument 'key' got a tensor of shape (2, 5, 7) and dtype float32;
needs size 8 on the last axis to match query's d_q.`` or, in Chinese,
``scaled_dot_product_attention：参数 key 收到形状为 (2, 5, 7)、类型为 float32 的张量；需要最后一维的大小为 8，
与 query 的 d_q 一致。``

Every text a caller passes that a learner reads (what is needed, where a size comes from) is a
plain string only when it is code in both languages (a shape, a name); anything with words is an
{"en": ..., "zh": ...} dict, so that a Chinese message holds no English words. Axes are said in
words: -1 is "the last axis" / "最后一维", not "axis -1" / "第 -1 维".
"""

import unicodedata

import torch

from .i18n import language, message, pick

# Ordinal words for axes counted from the end: -2 is the second-to-last, ..., -9 the ninth-to-last.
_ORDINALS = {
    "en": ("", "", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"),
    "zh": ("", "", "二", "三", "四", "五", "六", "七", "八", "九"),
}


class ArgumentError(ValueError):
    """An argument of the wrong kind, shape or dtype. A ValueError, so `except ValueError` works."""


def text(value):
    """`value` in the current language: an {"en": ..., "zh": ...} dict picks one, a string is itself."""
    return pick(value) if isinstance(value, dict) else str(value)


def _is_wide(character):
    """A Chinese character or full-width punctuation (no space goes between two of these)."""
    return unicodedata.east_asian_width(character) in ("W", "F")


def _spaced(piece):
    """`piece` to follow a Chinese word in a zh message: a space before Latin letters, digits or
    symbols ("收到 int …"), none before Chinese ("收到形状为 …"), the usual Chinese typography."""
    return piece if not piece or _is_wide(piece[0]) else " " + piece


def _spaced_after(piece):
    """The space, if any, between `piece` and a Chinese word that follows it."""
    return "" if not piece or _is_wide(piece[-1]) else " "


def fail(function, argument, got, needed):
    """Raise ArgumentError. `got` and `needed` are plain strings or {"en": ..., "zh": ...} dicts."""
    for name, value in (("function", function), ("argument", argument)):
        if not isinstance(value, str):  # a checker called the wrong way: say so, in the same words
            function, argument, got, needed = "fail", name, describe(value), \
                {"en": "the name of a function or argument (a str)", "zh": "函数名或参数名（str）"}
            break
    got, needed = text(got), text(needed)
    if language() == "zh":
        # the zh template puts no space after 收到 / 需要: the pieces bring their own where one belongs
        got, needed = _spaced(got), _spaced(needed)
    raise ArgumentError(
        message("error.argument", function=function, argument=argument, got=got, needed=needed)
    )


def positive_int(function, argument, value):
    """`value` when it is an int ≥ 1 (not a bool); otherwise an ArgumentError naming `argument`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        fail(function, argument, describe(value), {"en": "a positive int", "zh": "正整数"})
    return value


def flag(function, argument, value):
    """`value` when it is True or False; otherwise an ArgumentError naming `argument`."""
    if not isinstance(value, bool):
        fail(function, argument, describe(value), {"en": "True or False", "zh": "True 或 False"})
    return value


def shape_tuple(function, argument, value):
    """`value` when it is a shape: a tuple (or list, or torch.Size) of ints ≥ 0."""
    if not isinstance(value, (tuple, list, torch.Size)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        fail(function, argument, describe(value), {"en": "a shape: a tuple of sizes ≥ 0", "zh": "形状：由 ≥ 0 的大小组成的元组"})
    return value


def broadcasts(shape, target):
    """Whether a tensor of `shape` broadcasts to `target` without making it larger.

    Plain Python on purpose: the first call of ``torch.broadcast_shapes`` imports ``torch._refs``,
    1.4 s that every lesson paid at its first masked attention (measured)."""
    for argument, value in (("shape", shape), ("target", target)):
        shape_tuple("broadcasts", argument, value)
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def describe(value):
    """A short description of `value` for an error message: shape and dtype for a tensor."""
    zh = language() == "zh"
    if isinstance(value, torch.Tensor):
        shape = tuple(value.shape)
        dtype = str(value.dtype).replace("torch.", "")
        # a sparse tensor says so: most of torch takes dense (strided) tensors only
        kind = "" if value.layout == torch.strided else str(value.layout).replace("torch.", "") + " "
        if value.device.type != "cpu":  # where it is matters too: a meta tensor has no values to read
            where = value.device.type
            return f"{where} 上形状为 {shape}、类型为 {dtype} 的 {kind}张量" if zh and kind else \
                f"{where} 上形状为 {shape}、类型为 {dtype} 的张量" if zh else \
                f"a {kind}tensor of shape {shape} and dtype {dtype} on {where}"
        if zh:
            return f"形状为 {shape}、类型为 {dtype} 的 {kind}张量" if kind else f"形状为 {shape}、类型为 {dtype} 的张量"
        return f"a {kind}tensor of shape {shape} and dtype {dtype}"
    if value is None:
        return "None"
    kind, shown = type(value).__name__, repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"类型为 {kind} 的值 {shown}" if zh else f"{kind} {shown}"


def axis_name(axis):
    """The axis `axis` in words, as an {"en", "zh"} dict: 0 -> "axis 0" / "第 0 维",
    -1 -> "the last axis" / "最后一维", -2 -> "the second-to-last axis" / "倒数第二维"."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        fail("axis_name", "axis", describe(axis), {"en": "an int", "zh": "整数"})
    if axis >= 0:
        return {"en": f"axis {axis}", "zh": f"第 {axis} 维"}
    if axis == -1:
        return {"en": "the last axis", "zh": "最后一维"}
    if -axis < len(_ORDINALS["en"]):
        return {"en": f"the {_ORDINALS['en'][-axis]}-to-last axis", "zh": f"倒数第{_ORDINALS['zh'][-axis]}维"}
    return {"en": f"axis {axis} (counted from the end)", "zh": f"倒数第 {-axis} 维"}


def tensor(function, argument, value, *, min_ndim=1, layout="", floating=True):
    """Check that `value` is a tensor with at least `min_ndim` axes (floating-point if asked).

    `layout` names the axes the caller expects, e.g. "(..., L_q, d_k)", for the message.
    """
    if isinstance(value, torch.Tensor) and value.ndim >= min_ndim:
        if not floating or value.is_floating_point():
            return dense(function, argument, value)
    kind = {"en": "a floating-point tensor", "zh": "浮点张量"} if floating else {"en": "a tensor", "zh": "张量"}
    needed = {"en": f"{kind['en']} of shape {layout}", "zh": f"形状为 {layout} 的{kind['zh']}"} if layout else kind
    fail(function, argument, describe(value), needed)


def dense(function, argument, value):
    """`value` when it is a dense (strided) tensor: a sparse one (COO, CSR, ...) would fail deep inside
    torch, whose operators mostly take dense tensors only."""
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        fail(function, argument, describe(value),
             {"en": "a dense tensor; turn a sparse one into one with .to_dense()",
              "zh": "稠密张量；稀疏张量可用 .to_dense() 转成稠密的"})
    return value


def _a_tensor(function, argument, value, min_ndim=0):
    """`value` when it is a tensor with at least `min_ndim` axes: the checks below read its shape,
    dtype or device, and are public, so a learner who calls one with something else is told so."""
    if not isinstance(value, torch.Tensor) or value.ndim < min_ndim:
        fail(function, argument, describe(value),
             {"en": f"a tensor with at least {min_ndim} axes", "zh": f"至少 {min_ndim} 维的张量"} if min_ndim else
             {"en": "a tensor", "zh": "张量"})
    return value


def same_size(function, argument, value, axis, size, source):
    """Check that `value.shape[axis] == size`, where `size` comes from `source`.

    `source` says where in both languages, e.g. {"en": "query's d_q", "zh": "query 的 d_q"}; a plain
    string (e.g. "d_model") is shown as it is in both, so use one only for a name that is code.
    """
    whole_number("same_size", "axis", axis, -INT64_MAX)
    whole_number("same_size", "size", size)
    _a_tensor(function, argument, value, min_ndim=axis + 1 if axis >= 0 else -axis)
    if value.shape[axis] != size:
        where, source = axis_name(axis), source if isinstance(source, dict) else {"en": source, "zh": source}
        fail(
            function,
            argument,
            describe(value),
            {
                "en": f"size {size} on {where['en']} to match {source['en']}",
                "zh": f"{where['zh']}的大小为 {size}，与{_spaced(source['zh'])}{_spaced_after(source['zh'])}一致",
            },
        )


def alike(function, argument, value, reference, source):
    """Check that tensor `value` has the dtype and the device of tensor `reference`, named by `source`
    (code, e.g. "query"): mixing float32 with float64, or a CPU tensor with one elsewhere, would
    otherwise fail deep inside torch with a message that names neither argument."""
    _a_tensor(function, argument, value)
    if value.dtype != reference.dtype or value.device != reference.device:
        dtype, device = str(reference.dtype).replace("torch.", ""), reference.device.type
        fail(
            function,
            argument,
            describe(value),
            {
                "en": f"the dtype and device of {source} ({dtype} on {device}); convert it with .to({source})",
                "zh": f"与 {source} 相同的类型和设备（{device} 上的 {dtype}）；可用 .to({source}) 转换",
            },
        )
    return value


def mask_on_device_of(function, argument, mask, reference, source):
    """Check that `mask` is dense and lives on the device of tensor `reference`, named by `source`
    (code, e.g. "query" or "x"): a mask elsewhere would fail deep inside torch."""
    dense(function, argument, _a_tensor(function, argument, mask))
    if mask.device != reference.device:
        where = reference.device.type
        fail(function, argument, describe(mask),
             {"en": f"a mask on the device of {source} ({where}); move it with .to({where!r})",
              "zh": f"与 {source} 在同一设备（{where}）上的掩码；可用 .to({where!r}) 移过去"})
    return mask


def keep_mask(function, value, shape, layout, reference, source):
    """`value`, an extra keep mask, when it is a bool tensor that broadcasts to `shape` (its axes
    named by `layout`, e.g. "(B, H, L_q, L_k)") on the device of tensor `reference` (named `source`)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or not broadcasts(value.shape, shape):
        fail(function, "keep_mask", describe(value),
             {"en": f"a bool tensor, True where a query may attend to a key, that broadcasts to {layout} = {shape}",
              "zh": f"bool 张量，True 表示该查询可以关注该键，且能广播到 {layout} = {shape}"})
    dense(function, "keep_mask", value)
    return mask_on_device_of(function, "keep_mask", value, reference, source)


def attention_inputs(function, query, key, value, query_dtype=None, names=("query", "key", "value")):
    """Check the three tensors of a blocked attention call (lesson 08's tiles, lesson 09's kernels):
    (..., L_q, d), (..., L_k, d) and (..., L_k, d_v), the same leading (batch, head) axes, key and value
    of query's dtype and device, query with values. `query_dtype(function, "query", query)`, when
    given, judges query's dtype first, so that a dtype the function refuses is said of query rather
    than as key's mismatch with it. `names`: the three arguments' names in the caller's signature."""
    q_name, k_name, v_name = names
    tensor(function, q_name, query, min_ndim=2, layout="(..., L_q, d)")
    tensor(function, k_name, key, min_ndim=2, layout="(..., L_k, d)")
    tensor(function, v_name, value, min_ndim=2, layout="(..., L_k, d_v)")
    if query_dtype is not None:
        query_dtype(function, q_name, query)
    for argument, other in ((k_name, key), (v_name, value)):
        alike(function, argument, other, query, q_name)
    has_values(function, q_name, query)
    same_size(function, k_name, key, -1, query.shape[-1], {"en": f"{q_name}'s d", "zh": f"{q_name} 的 d"})
    same_size(function, v_name, value, -2, key.shape[-2], {"en": f"{k_name}'s L_k", "zh": f"{k_name} 的 L_k"})
    for argument, other in ((k_name, key), (v_name, value)):
        if other.shape[:-2] != query.shape[:-2]:
            fail(function, argument, describe(other),
                 {"en": f"the leading (batch, head) axes of {q_name}, {tuple(query.shape[:-2])}",
                  "zh": f"与 {q_name} 相同的前导（批量、头）维度 {tuple(query.shape[:-2])}"})


def _memory():
    """(bytes, limited): the memory a tensor may take here: this machine's, or less where the
    process may map less (a limit on its address space, ``ulimit -v``, minus what it maps already);
    None when the system does not say (Windows)."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): trust the allocator
        return None, False
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", encoding="ascii") as statm:
                mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            if soft - mapped < total:
                return max(0, soft - mapped), True
    except (ImportError, OSError, ValueError):
        pass
    return total, False


def fits_in_memory(function, argument, value, count, itemsize=1):
    """Check that a tensor of `count` elements of `itemsize` bytes, sized by `value`, can exist at all:
    one larger than this machine's memory fails later inside torch's allocator (or is killed by the
    system) with a message that names no argument."""
    number("fits_in_memory", "count", count, non_negative=True)
    number("fits_in_memory", "itemsize", itemsize, positive=True)
    total, limited = _memory()
    if total is None:
        return value
    if count * itemsize > total:
        where = ({"en": f"the {total / 2**30:,.1f} GiB this process may still map",
                  "zh": f"本进程还能映射的 {total / 2**30:,.1f} GiB"} if limited else
                 {"en": f"this machine's {total / 2**30:,.0f} GiB", "zh": f"本机的 {total / 2**30:,.0f} GiB 内存"})
        fail(
            function,
            argument,
            describe(value),
            {
                "en": f"a size whose result fits in memory: it would hold {count:,} elements, "
                f"{count * itemsize / 2**30:,.0f} GiB, more than {where['en']}",
                "zh": f"结果能放进内存的大小：结果将有 {count:,} 个元素，共 {count * itemsize / 2**30:,.0f} GiB，"
                f"超过{where['zh']}",
            },
        )
    return value


#: The most modules a constructor builds: each costs tens of microseconds in Python, so 100,000 take
#: seconds and a million (a typo: layers=10**6) minutes, however little memory their parameters hold.
MAX_MODULES = 100_000


def modules_fit(function, argument, value, count):
    """Check that a model of `count` ``nn.Module`` objects, counted by `value` (its layers, its
    heads), can be built in a lesson's time."""
    whole_number("modules_fit", "count", count)
    if count > MAX_MODULES:
        fail(function, argument, describe(value),
             {"en": f"a size that builds at most {MAX_MODULES:,} modules: it would build {count:,}, "
                    "which takes minutes in Python",
              "zh": f"构建的模块不超过 {MAX_MODULES:,} 个的大小：它将构建 {count:,} 个模块，在 Python 中要花好几分钟"})
    return value


#: The most bytes one L_q × L_k tensor of scores (or of weights) may take: a forward pass that would
#: materialise more is refused before it allocates. 1 GiB is half of what Binder gives a lesson; a
#: (1, 40000, 64) input, 10 MB, asks for 6.4 GB of scores. Raise it (or set None for no limit but the
#: machine's memory) where a measurement needs larger: ``course_utils.validation.MAX_SCORE_BYTES = 8 * 2**30``.
MAX_SCORE_BYTES = 2**30


def scores_fit(function, argument, value, shape, dtype, alternative=None, device=None):
    """Check, before a forward pass allocates them, that scores of `shape` (..., L_q, L_k) in `dtype`
    fit under ``MAX_SCORE_BYTES`` (and, on the CPU, in this machine's memory); else an ArgumentError
    naming `argument` (the input that makes them large, `value`), the sizes and the bytes, and the way
    out: `alternative` ({"en", "zh"}: the function's own way not to build them, e.g. need_weights=False),
    lesson 08's tiled attention, or a larger limit. `device`: where they would be (default: `value`'s).
    Every function that materialises scores calls it."""
    import math

    shape_tuple("scores_fit", "shape", tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) else shape)
    where = device if device is not None else value.device if isinstance(value, torch.Tensor) else default_device()
    where = torch.device(where).type
    if where == "meta":  # a meta tensor holds a shape only: its scores take no memory (lesson 05's walkthrough)
        return value
    count = math.prod(int(size) for size in shape)
    itemsize = dtype.itemsize if isinstance(dtype, torch.dtype) else 4
    limit, memory = MAX_SCORE_BYTES, False
    total, _ = _memory() if where == "cpu" else (None, False)
    if total is not None and (limit is None or total < limit):
        limit, memory = total, True  # the machine's memory, not the setting, is what stops them here
    if limit is None or count * itemsize <= limit:
        return value
    shape, size = tuple(int(s) for s in shape), count * itemsize
    ways = {"en": "", "zh": ""} if alternative is None else \
        {"en": f"{alternative['en']}, or ", "zh": f"{alternative['zh']}，或者"}
    allowed = {"en": f"the {limit:,} bytes of memory left here", "zh": f"这里剩余的 {limit:,} 字节内存"} if memory \
        else {"en": f"the {limit:,} bytes allowed", "zh": f"允许的 {limit:,} 字节"}
    raise_it = {"en": "", "zh": ""} if memory else \
        {"en": ", or raise course_utils.validation.MAX_SCORE_BYTES", "zh": "；或调大 course_utils.validation.MAX_SCORE_BYTES"}
    fail(function, argument, describe(value),
         {"en": f"sizes whose scores fit: scores of shape {shape} would take {size:,} bytes ({size / 2**30:,.1f} GiB), "
                f"more than {allowed['en']}; use {ways['en']}lesson 08's tiled.tiled_attention "
                f"or the fused F.scaled_dot_product_attention, which never hold them all{raise_it['en']}",
          "zh": f"能放下注意力分数的尺寸：形状为 {shape} 的分数将占 {size:,} 字节（{size / 2**30:,.1f} GiB），"
                f"超过{allowed['zh']}；请改用{_spaced(ways['zh'])}"
                "第 08 课的 tiled.tiled_attention 或融合的 F.scaled_dot_product_attention，它们不会同时保存全部分数"
                f"{raise_it['zh']}"})
    return value


def attention_scores_fit(function, query, key, lead=None, alternative=None, names=("query", "key")):
    """``scores_fit`` for the (*lead, L_q, L_k) scores of `query` (..., L_q, d) against `key` (..., L_k, d):
    `lead` defaults to query's leading axes (a layer passes (B, H)); the longer of the two sequences is
    blamed, under its name in `names`."""
    _a_tensor(function, names[0], query, 2)
    _a_tensor(function, names[1], key, 2)
    lead = tuple(query.shape[:-2]) if lead is None else tuple(lead)
    L_q, L_k = query.shape[-2], key.shape[-2]
    argument, value = (names[0], query) if L_q >= L_k else (names[1], key)
    return scores_fit(function, argument, value, (*lead, L_q, L_k), query.dtype, alternative)


#: What a layer with a ``need_weights`` argument offers instead of its weights.
NO_WEIGHTS = {"en": "need_weights=False", "zh": "need_weights=False"}


def parameters_fit(function, sizes, count):
    """A model's parameters (`count` float32 numbers) fit in memory; else name the largest of
    `sizes` ({argument: size}), the one to make smaller."""
    if not isinstance(sizes, dict) or not sizes:
        fail("parameters_fit", "sizes", describe(sizes), {"en": "a dict {argument: size}", "zh": "字典 {参数名: 大小}"})
    largest = max(sizes, key=sizes.get)
    return fits_in_memory(function, largest, sizes[largest], count, 4)


def has_values(function, argument, value):
    """Check that tensor `value` holds values that can be read (a meta tensor has a shape only)."""
    if _a_tensor(function, argument, value).device.type == "meta":
        fail(function, argument, describe(value),
             {"en": "a tensor with values (a meta tensor has a shape but no values to read)",
              "zh": "有数值的张量（meta 张量只有形状，没有可读取的数值）"})
    return value


def device(function, argument, value):
    """`value` as a torch.device that tensors can be made on here (None stays None): a name such as
    'cpu', or an accelerator this machine has. Anything else would fail inside torch, later."""
    import torch

    if value is None:
        return None
    try:
        where = value if isinstance(value, torch.device) else torch.device(value)
        torch.empty(0, device=where)
        return where
    except (TypeError, ValueError, RuntimeError, AssertionError):
        fail(function, argument, describe(value),
             {"en": "None, a torch.device or a device name this machine has, such as 'cpu'",
              "zh": "None、torch.device，或本机有的设备名，例如 'cpu'"})


def default_device():
    """The device a tensor made without ``device=`` lands on: torch's default device (the CPU unless
    ``torch.set_default_device`` says otherwise). A function whose inputs hold no tensor makes its
    tensors there, as torch's own factories do."""
    get = getattr(torch, "get_default_device", None)  # torch >= 2.3
    return get() if get is not None else torch.empty(0).device


def on_device(function, argument, value, device, source):
    """`value`, a tensor, when it lives on `device`, the device of `source` (words, as an
    {"en", "zh"} dict, or code): a tensor elsewhere would fail deep inside torch."""
    if not isinstance(device, (torch.device, str)):
        fail("on_device", "device", describe(device), {"en": "a torch.device", "zh": "torch.device"})
    if _a_tensor(function, argument, value).device != device:
        source = source if isinstance(source, dict) else {"en": source, "zh": source}
        where = torch.device(device).type
        fail(function, argument, describe(value),
             {"en": f"a tensor on the device of {source['en']} ({where}); move it with .to({where!r})",
              "zh": f"与{_spaced(source['zh'])}{_spaced_after(source['zh'])}在同一设备（{where}）上的张量；"
                    f"可用 .to({where!r}) 移过去"})
    return value


def floating_dtype(function, argument, value):
    """`value` when it is a floating-point torch.dtype."""
    import torch

    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        fail(function, argument, describe(value),
             {"en": "a floating-point dtype such as torch.float32", "zh": "浮点类型，例如 torch.float32"})
    return value


def whole_number(function, argument, value, minimum=0, maximum=None):
    """`value` when it is an int ≥ `minimum` (and ≤ `maximum` when given; not a bool): a seed, an
    index, an offset, a count that may be 0; otherwise an ArgumentError naming `argument`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum or \
            (maximum is not None and value > maximum):
        needed = {"en": f"an int ≥ {minimum}", "zh": f"≥ {minimum} 的整数"} if maximum is None else \
            {"en": f"an int from {minimum} to {maximum}", "zh": f"{minimum} 到 {maximum} 之间的整数"}
        fail(function, argument, describe(value), needed)
    return value


#: The largest int64, the largest position or size a tensor of int64 indices can hold.
INT64_MAX = 2**63 - 1

#: The seeds ``torch.manual_seed`` takes: any int in [−2⁶³, 2⁶⁴).
SEEDS = (-(2**63), 2**64 - 1)


def seed(function, argument, value, offsets=(0,)):
    """`value` when it is an int (not a bool) such that ``torch.manual_seed(value + offset)`` takes
    every offset of `offsets` (a function that seeds one generator with `value` and another with
    `value + 1_000_000` passes (0, 1_000_000)): one outside [−2⁶³, 2⁶⁴) would overflow inside
    torch with a message that names no argument."""
    low, high = max(SEEDS[0] - offset for offset in offsets), min(SEEDS[1] - offset for offset in offsets)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        fail(function, argument, describe(value),
             {"en": f"an int from {low} to {high}, a seed torch.manual_seed takes",
              "zh": f"{low} 到 {high} 之间的整数（torch.manual_seed 能接受的种子）"})
    return value


def number(function, argument, value, *, positive=False, non_negative=False, maximum=None):
    """`value` when it is a finite real number (an int or a float, not a bool), > 0 if `positive`,
    ≥ 0 if `non_negative`, ≤ `maximum` when given (a step size that float32 must hold)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)
    if not ok or (positive and not value > 0) or (non_negative and not value >= 0) or \
            (maximum is not None and value > maximum):
        needed = {"en": "a positive number", "zh": "正数"} if positive else \
            {"en": "a finite number ≥ 0", "zh": "≥ 0 的有限数"} if non_negative else \
            {"en": "a finite number", "zh": "有限的数"}
        if maximum is not None and non_negative and not positive:
            needed = {"en": f"a finite number from 0 to {maximum:.3g}", "zh": f"0 到 {maximum:.3g} 之间的有限数"}
        elif maximum is not None:
            needed = {"en": f"{needed['en']} at most {maximum:.3g}", "zh": f"不超过 {maximum:.3g} 的{needed['zh']}"}
        fail(function, argument, describe(value), needed)
    return value


#: The range of an ε (Adam's, LayerNorm's): float32's smallest normal number, below which it is lost
#: beside a square root and the division it guards is by 0 (NaN, ∞); and 1, past which it drowns
#: what it is added to (1e300 is ∞ in float32: every update, every normalised value, 0).
EPSILON_RANGE = (float(torch.finfo(torch.float32).tiny), 1.0)


def epsilon(function, argument, value):
    """`value`, an ε added to a denominator so that it is never 0, when it is a number in
    EPSILON_RANGE: 0 gives NaN and ∞ for a zero or tiny gradient, 1e39 all zeros."""
    low, high = EPSILON_RANGE
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        fail(function, argument, describe(value),
             {"en": f"a number from {low:.3g} (float32's smallest normal number) to {high:g}, a small guard "
                    "against dividing by zero such as 1e-5",
              "zh": f"{low:.3g}（float32 能表示的最小正规数）到 {high:g} 之间的数：防止除以零的小量，例如 1e-5"})
    return value


def scale(function, value, dtype, *, positive=False, tensors=False):
    """`value`, the factor the scores are multiplied by, when it is None or a finite number (> 0 if
    `positive`) that `dtype` can hold (a 0-dim tensor too, if `tensors`): NaN or ±∞, or 1e300 in
    float32 (which rounds to ∞), would turn every weight into NaN without a word."""
    import math

    limit = torch.finfo(dtype).max if isinstance(dtype, torch.dtype) and dtype.is_floating_point else math.inf
    if value is None:
        return None
    shown = value
    if tensors and isinstance(value, torch.Tensor) and value.ndim == 0 and value.layout == torch.strided \
            and value.device.type != "meta" and (value.is_floating_point() or value.dtype in (torch.int64, torch.int32)):
        shown = value.item()  # one number: reading it costs one copy, and it is what the scores are multiplied by
    ok = isinstance(shown, (int, float)) and not isinstance(shown, bool) and _finite(shown) \
        and abs(shown) <= limit and (not positive or shown > 0)
    if not ok:
        kind = {"en": "a positive number", "zh": "正数"} if positive else {"en": "a finite number", "zh": "有限的数"}
        if tensors:
            kind = {"en": f"{kind['en']} (or a 0-dim tensor of one)", "zh": f"{kind['zh']}（或装着它的 0 维张量）"}
        fail(function, "scale", describe(value),
             {"en": f"None (for 1/√d) or {kind['en']} of size at most {limit:.3g}, the largest {_name(dtype)} holds",
              "zh": f"None（即 1/√d）或{kind['zh']}，其大小不超过 {_name(dtype)} 能表示的最大值 {limit:.3g}"})
    return value


def _finite(value):
    """Whether the int or float `value` is finite: an int always is (``math.isfinite`` would turn
    one past 1e308 into a float first, and raise an OverflowError)."""
    import math

    return isinstance(value, int) or math.isfinite(value)


def _name(dtype):
    return str(dtype).replace("torch.", "")


def function_of_nothing(function, argument, value):
    """`value` when it can be called (with no arguments: a measured call, a view to redraw)."""
    if not callable(value):
        fail(function, argument, describe(value),
             {"en": "a function to call with no arguments, e.g. lambda: layer(x, x, x)",
              "zh": "可无参数调用的函数，例如 lambda: layer(x, x, x)"})
    return value


def one_of(function, argument, value, choices):
    """`value` when it is one of `choices` (strings, shown as code)."""
    if not isinstance(choices, (tuple, list)) or not all(isinstance(c, str) for c in choices):
        fail("one_of", "choices", describe(choices), {"en": "a tuple of str", "zh": "由 str 组成的元组"})
    if not isinstance(value, str) or value not in choices:
        fail(function, argument, describe(value),
             {"en": f"one of {', '.join(map(repr, choices))}", "zh": f"{'、'.join(map(repr, choices))} 之一"})
    return value


def module(function, argument, value, kind=None, needed=None):
    """`value` when it is an ``nn.Module`` (an instance of `kind` when given); `needed` says what is
    wanted in both languages (default: the name of the kind)."""
    from torch import nn

    kind = kind or nn.Module
    if not isinstance(value, kind):
        names = kind if isinstance(kind, tuple) else (kind,)
        shown = " / ".join(k.__name__ if k is not nn.Module else "nn.Module" for k in names)
        needed = needed or {"en": f"a model ({shown})", "zh": f"模型（{shown}）"}
        fail(function, argument, describe(value), needed)
    return value


def generator(function, argument, value):
    """`value` when it is a ``torch.Generator`` (the source of every random number drawn)."""
    if not isinstance(value, torch.Generator):
        fail(function, argument, describe(value),
             {"en": "a torch.Generator, e.g. torch.Generator().manual_seed(0)",
              "zh": "torch.Generator（随机数生成器），例如 torch.Generator().manual_seed(0)"})
    return value


#: The dtypes ``nn.Embedding`` takes as indices.
TOKEN_DTYPES = (torch.int64, torch.int32)


def tokens(function, argument, value, vocab, *, ndim, layout, max_length=None):
    """Check that `value` is a tensor of token ids: int64 (or int32) with `ndim` axes laid out as
    `layout` (e.g. "(B, L)"), at most `max_length` positions on the last axis when given, every id
    in 0 … vocab - 1. One reduction and one read for the range: cheap beside a model's forward."""
    positive_int("tokens", "vocab", vocab)
    whole_number("tokens", "ndim", ndim)
    if not isinstance(value, torch.Tensor) or value.ndim != ndim or value.dtype not in TOKEN_DTYPES:
        fail(function, argument, describe(value),
             {"en": f"an int64 tensor of token ids of shape {layout}", "zh": f"形状为 {layout} 的 int64 词元 id 张量"})
    dense(function, argument, value)
    has_values(function, argument, value)
    if max_length is not None and value.shape[-1] > max_length:
        fail(function, argument, describe(value),
             {"en": f"at most {max_length} positions on the last axis, the length the model was built for",
              "zh": f"最后一维最多 {max_length} 个位置，即构建模型时设定的长度"})
    if value.numel():
        low, high = torch.stack(torch.aminmax(value)).tolist()
        if low < 0 or high >= vocab:
            fail(function, argument, describe(value) + (f"（取值 {low} … {high}）" if language() == "zh"
                                                          else f" (values {low} … {high})"),
                 {"en": f"token ids in 0 … {vocab - 1} (vocab = {vocab})",
                  "zh": f"0 … {vocab - 1} 之间的词元 id（vocab = {vocab}）"})
    return value


def floats_alike(function, argument, value, reference, source, *, min_ndim=1, layout=""):
    """A floating-point tensor with the dtype and device of `reference` (a layer's parameter, named
    `source`): ``tensor`` then ``alike``."""
    tensor(function, argument, value, min_ndim=min_ndim, layout=layout)
    return alike(function, argument, value, reference, source)
