"""Argument errors read as one language: a Chinese message has no English words outside code,
shapes and dtypes, says axes in words, follows Chinese spacing, and carries the same facts as
its English twin. Checked on the helpers themselves and on an error from every caller."""

import ast
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from course_utils import attention, i18n, layers, masks, multihead, toy, validation, widgets
from course_utils.validation import ArgumentError

# ----------------------------------------------------------------------------- what the tests read

# Letters that are code in a Chinese message: identifiers with _ . = or digits, single-letter shape
# symbols, and these names (argument names, Python and torch types, literals).
CODE_WORDS = {
    "bool", "int", "float", "str", "list", "tuple", "NoneType", "None", "True", "False", "inf", "nan",
    "query", "key", "value", "memory", "mask", "scores", "weight", "lengths", "softmax", "vocab",
    "Linear", "nn", "reverse", "double", "d_q", "d_k", "d_h", "E", "L", "B", "H",
}
CAMEL_CASE = re.compile(r"[A-Z][a-z]+[A-Z]\w*")  # a class name, e.g. FusedMultiheadAttention
WORD = re.compile(r"(?<![\w.=\-'])[A-Za-z][A-Za-z']+(?![\w.=(])")
WIDE = r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]"  # Chinese characters and full-width punctuation
# Things both languages of one message must state: shapes like (2, 5, 7), (B, L_k) or (d_h,),
# numbers, dtypes, code identifiers.
FACTS = re.compile(r"\((?:[\w.]+|, ?)*\)|-?\d+(?:\.\d+)?|\bfloat\d+|\bint\d+|\b\w+_\w+\b")


def facts(text):
    """The facts of a message; a word in brackets, like "(batch)", is prose, not a shape."""
    return {fact for fact in FACTS.findall(text) if not fact.startswith("(") or re.search(r"[\d,_]", fact)}


def english_words(message, function, argument):
    """The English words of a Chinese message, outside its function/argument names and code."""
    body = message.removeprefix(f"{function}：参数 {argument} ")
    return [word for word in WORD.findall(body)
            if "'" in word or word not in CODE_WORDS and not CAMEL_CASE.fullmatch(word)]


def stray_spaces(message):
    """Spaces a Chinese typesetter would not put: between two Chinese characters, or next to
    full-width punctuation."""
    return re.findall(rf"{WIDE} {WIDE}|{WIDE} (?=[，。；：、）])|[，。；：、（] ", message)


def raised(call, lang):
    i18n.set_language(lang)
    try:
        with pytest.raises(ArgumentError) as caught:
            call()
    finally:
        i18n.set_language("en")
    return str(caught.value)


# ----------------------------------------------------------------------------- the helpers

@pytest.mark.parametrize(
    ("axis", "en", "zh"),
    [
        (0, "axis 0", "第 0 维"),
        (2, "axis 2", "第 2 维"),
        (-1, "the last axis", "最后一维"),
        (-2, "the second-to-last axis", "倒数第二维"),
        (-3, "the third-to-last axis", "倒数第三维"),
        (-12, "axis -12 (counted from the end)", "倒数第 12 维"),
    ],
)
def test_axes_are_said_in_words(axis, en, zh):
    assert validation.axis_name(axis) == {"en": en, "zh": zh}


def test_same_size_says_the_axis_and_the_source_in_the_notebooks_language():
    source = {"en": "query's d_q", "zh": "query 的 d_q"}
    call = lambda: validation.same_size("f", "key", torch.zeros(2, 5, 7), -1, 8, source)  # noqa: E731
    assert raised(call, "en") == (
        "f: argument 'key' got a tensor of shape (2, 5, 7) and dtype float32; "
        "needs size 8 on the last axis to match query's d_q."
    )
    assert raised(call, "zh") == (
        "f：参数 key 收到形状为 (2, 5, 7)、类型为 float32 的张量；需要最后一维的大小为 8，与 query 的 d_q 一致。"
    )


def test_same_size_still_takes_a_plain_string_for_a_name_that_is_code():
    call = lambda: validation.same_size("f", "x", torch.zeros(3, 4), 0, 2, "d_model")  # noqa: E731
    assert raised(call, "zh").endswith("需要第 0 维的大小为 2，与 d_model 一致。")
    assert "needs size 2 on axis 0 to match d_model." in raised(call, "en")


def test_a_chinese_source_gets_no_space_before_or_after_it():
    source = {"en": "the batch", "zh": "批量大小"}
    call = lambda: validation.same_size("f", "x", torch.zeros(3, 4), -2, 2, source)  # noqa: E731
    assert "与批量大小一致" in raised(call, "zh")


@pytest.mark.parametrize(
    ("got", "needed", "expected"),
    [
        ("形状为 (2,) 的张量", "浮点张量", "收到形状为 (2,) 的张量；需要浮点张量。"),
        ("int 3", "≥ 0 的整数", "收到 int 3；需要 ≥ 0 的整数。"),
        ({"en": "x", "zh": "（空）"}, {"en": "y", "zh": "(B, L) 的张量"}, "收到（空）；需要 (B, L) 的张量。"),
    ],
)
def test_the_chinese_template_spaces_only_between_chinese_and_latin(got, needed, expected):
    text = raised(lambda: validation.fail("f", "x", got, needed), "zh")
    assert text == "f：参数 x " + expected


def test_describe_says_what_a_non_tensor_is_in_the_notebooks_language():
    assert validation.describe(3) == "int 3"
    i18n.set_language("zh")
    assert validation.describe(3) == "类型为 int 的值 3"
    long = validation.describe("x" * 200)
    assert long.endswith("...") and len(long) < 80


# ----------------------------------------------------------------------------- every caller

def _model(task):
    return toy.make_model(task, seed=0)


q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 5)
CALLERS = {
    "dot_scores d_q": (lambda: attention.dot_scores(q, k[..., :-1]), "dot_scores", "key"),
    "dot_scores not a tensor": (lambda: attention.dot_scores([1.0], k), "dot_scores", "query"),
    "dot_scores batch": (lambda: attention.dot_scores(q, k[:1]), "dot_scores", "key"),
    "bilinear weight": (lambda: attention.bilinear_scores(q, k, torch.ones(8, 7)), "bilinear_scores", "weight"),
    "additive w_query": (
        lambda: attention.additive_scores(q, k, torch.ones(7, 4), torch.ones(8, 4), torch.ones(4)),
        "additive_scores", "w_query",
    ),
    "additive w_key": (
        lambda: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 3), torch.ones(4)),
        "additive_scores", "w_key",
    ),
    "additive v": (
        lambda: attention.additive_scores(q, k, torch.ones(8, 4), torch.ones(8, 4), torch.ones(3)),
        "additive_scores", "v",
    ),
    "sdpa L_k": (
        lambda: attention.scaled_dot_product_attention(q, k, v[:, :-1]), "scaled_dot_product_attention", "value",
    ),
    "sdpa leading axes": (
        lambda: attention.scaled_dot_product_attention(q, k, torch.randn(1, 2, 4, 5)),
        "scaled_dot_product_attention", "value",
    ),
    "sdpa keep_mask dtype": (
        lambda: attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(3, 4)),
        "scaled_dot_product_attention", "keep_mask",
    ),
    "sdpa keep_mask shape": (
        lambda: attention.scaled_dot_product_attention(q, k, v, keep_mask=torch.ones(5, 3, 4, dtype=torch.bool)),
        "scaled_dot_product_attention", "keep_mask",
    ),
    "masked_softmax scores": (
        lambda: masks.masked_softmax(torch.zeros(2, 3, dtype=torch.long)), "masked_softmax", "scores",
    ),
    "padding_mask max_len": (lambda: masks.padding_mask(torch.tensor([1]), -1), "padding_mask", "max_len"),
    "padding_mask lengths": (lambda: masks.padding_mask(torch.tensor([5]), 3), "padding_mask", "lengths"),
    "causal_mask": (lambda: masks.causal_mask(0), "causal_mask", "L_q"),
    "causal_mask align": (lambda: masks.causal_mask(3, 4, align="middle"), "causal_mask", "align"),
    "from_ignore": (lambda: masks.from_ignore(torch.ones(2, 2)), "from_ignore", "ignore_mask"),
    "to_ignore": (lambda: masks.to_ignore(torch.ones(2, 2)), "to_ignore", "keep_mask"),
    "from_key_padding": (
        lambda: masks.from_key_padding(torch.ones(2, 1, 3, dtype=torch.bool)), "from_key_padding", "key_padding_mask",
    ),
    "to_key_padding": (
        lambda: masks.to_key_padding(torch.ones(2, 3, dtype=torch.bool)), "to_key_padding", "keep_mask",
    ),
    "from_additive": (lambda: masks.from_additive(torch.tensor([0.0, -1e9])), "from_additive", "additive_mask"),
    "to_additive": (lambda: masks.to_additive(torch.ones(2)), "to_additive", "keep_mask"),
    "from_zero_hidden": (lambda: masks.from_zero_hidden(torch.tensor([0.0, 2.0])), "from_zero_hidden", "mask"),
    "SelfAttention embed_dim": (lambda: layers.SelfAttention(0), "SelfAttention", "embed_dim"),
    "SelfAttention x": (
        lambda: layers.SelfAttention(8)(torch.randn(2, 5, 6)), "SelfAttention.forward", "x",
    ),
    "CrossAttention memory": (
        lambda: layers.CrossAttention(8, kv_dim=6)(torch.randn(2, 3, 8), torch.randn(2, 4, 8)),
        "CrossAttention.forward", "memory",
    ),
    "CrossAttention batch": (
        lambda: layers.CrossAttention(4)(torch.randn(2, 3, 4), torch.randn(3, 3, 4)),
        "CrossAttention.forward", "memory",
    ),
    "from_multihead": (
        lambda: layers.SelfAttention(4).from_multihead(nn.Linear(4, 4)), "SelfAttention.from_multihead", "mha",
    ),
    "multihead num_heads": (lambda: multihead.FusedMultiheadAttention(8, 3), "FusedMultiheadAttention", "num_heads"),
    "multihead query": (
        lambda: multihead.NaiveMultiheadAttention(8, 2)(q[..., :6], k, k), "NaiveMultiheadAttention.forward", "query",
    ),
    "multihead value L_k": (
        lambda: multihead.FusedMultiheadAttention(8, 2)(q, k, k[:, :3]), "FusedMultiheadAttention.forward", "value",
    ),
    "multihead key_padding_mask": (
        lambda: multihead.FusedMultiheadAttention(8, 2)(q, k, k, key_padding_mask=torch.ones(2, 3, dtype=torch.bool)),
        "FusedMultiheadAttention.forward", "key_padding_mask",
    ),
    "multihead copy_weights_from": (
        lambda: multihead.FusedMultiheadAttention(8, 2).copy_weights_from(multihead.FusedMultiheadAttention(8, 4)),
        "FusedMultiheadAttention.copy_weights_from", "other",
    ),
    "toy task": (lambda: toy.target_positions("sort", 4), "target_positions", "task"),
    "toy length": (
        lambda: toy.make_batch("reverse", 2, torch.Generator(), length=0), "make_batch", "length",
    ),
    "scaling_view": (lambda: widgets.scaling_view(d_k=0), "scaling_view", "d_k"),
    "mask_view": (lambda: widgets.mask_view(length_1=9), "mask_view", "length_1"),
    "attention_maps_view": (
        lambda: widgets.attention_maps_view(_model("reverse"), _model("double"), example=-1),
        "attention_maps_view", "example",
    ),
    "heads_view example": (
        lambda: widgets.heads_view(toy.NeighboursModel(heads=2), example=-1), "heads_view", "example",
    ),
    "heads_view head": (lambda: widgets.heads_view(toy.NeighboursModel(heads=2), head=2), "heads_view", "head"),
    "tensor() of None": (lambda: validation.tensor("f", "x", None), "f", "x"),
}


@pytest.mark.parametrize("case", CALLERS, ids=list(CALLERS))
def test_every_chinese_error_is_chinese_outside_code(case):
    call, function, argument = CALLERS[case]
    text = raised(call, "zh")
    assert text.startswith(f"{function}：参数 {argument} "), text
    english = english_words(text, function, argument)
    assert not english, f"English words {english} in: {text}"
    assert not stray_spaces(text), f"stray spaces {stray_spaces(text)} in: {text}"
    assert not re.search(r"第 -\d+ 维|axis -\d", text), text


@pytest.mark.parametrize("case", CALLERS, ids=list(CALLERS))
def test_both_languages_of_an_error_state_the_same_facts(case):
    call, function, argument = CALLERS[case]
    en, zh = raised(call, "en"), raised(call, "zh")
    assert en.startswith(f"{function}: argument '{argument}' got "), en
    en_facts = facts(en.removeprefix(f"{function}: argument '{argument}' "))
    zh_facts = facts(zh.removeprefix(f"{function}：参数 {argument} "))
    assert en_facts == zh_facts, f"\n{en}\n{zh}"


def plain_texts_with_words(sources):
    """The calls of validation's fail/same_size in `sources` ({name: Python text}) whose `needed`
    (or `source`) is a plain string holding words: English shown in a Chinese message."""
    found = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            position = {"fail": 3, "same_size": 5}.get(node.func.attr)
            if position is None or not isinstance(node.func.value, ast.Name) or len(node.args) <= position:
                continue
            argument = node.args[position]
            if isinstance(argument, ast.Constant | ast.JoinedStr):
                literal = " ".join(part.value for part in ast.walk(argument)
                                   if isinstance(part, ast.Constant) and isinstance(part.value, str))
                if english_words(literal, "", ""):
                    found.append(f"{name}:{node.lineno}: {literal!r}")
    return found


def test_no_caller_passes_words_in_one_language_only():
    # reaches the call sites the list above does not cover yet
    package = Path(validation.__file__).parent
    sources = {str(path.relative_to(package)): path.read_text() for path in sorted(package.rglob("*.py"))}
    found = plain_texts_with_words(sources)
    assert not found, f"give these an {{'en': ..., 'zh': ...}} dict: {found}"


def test_the_word_finder_finds_english_and_spares_code():
    # guards the tests above against a pattern that finds nothing and so passes everything
    text = "f：参数 key 收到形状为 (2, 5)、类型为 float32 的张量；需要最后一维的大小为 8，与 query's d_q 一致，shape of x。"
    assert english_words(text, "f", "key") == ["query's", "shape", "of"]
    assert english_words("f：参数 x 收到 nn.MultiheadAttention、num_heads=1、mask.bool() 与 -inf。", "f", "x") == []
    assert stray_spaces("收到 形状为；需要 张量 。") == ["到 形", "要 张", "量 。"]
    code = 'check.same_size(f, "k", k, -1, n, "query\'s d_q")\ncheck.fail(f, "w", got, f"shape ({n},)")\n' \
        'check.fail(f, "w", got, f"({n}, d_h)")\ncheck.fail(f, "w", got, {"en": "a tensor", "zh": "张量"})\n'
    assert [found.split(":")[1] for found in plain_texts_with_words({"m.py": code})] == ["1", "2"]


# ----------------------------------------------------------------------------- the checks' own contract

_HOSTILE = [None, 0, -1, 2**64, 10**400, 1.5, float("nan"), float("inf"), "x", [1], (1, 2), object(), True,
            torch.float32, torch.tensor(1.0), torch.zeros(0), torch.zeros(2, 3, dtype=torch.bool),
            torch.empty(2, 3, device="meta"), torch.randn(2, 3).to_sparse()]
_REFERENCE = torch.randn(2, 3)
#: Each public check, called as the course calls it, with the value a learner passes varied.
_CHECKS = {
    "positive_int": lambda x: validation.positive_int("f", "a", x),
    "flag": lambda x: validation.flag("f", "a", x),
    "tensor": lambda x: validation.tensor("f", "a", x),
    "dense": lambda x: validation.dense("f", "a", x),
    "same_size": lambda x: validation.same_size("f", "a", x, -1, 3, "s"),
    "same_size_axis_1": lambda x: validation.same_size("f", "a", x, 1, 3, "s"),
    "alike": lambda x: validation.alike("f", "a", x, _REFERENCE, "q"),
    "mask_on_device_of": lambda x: validation.mask_on_device_of("f", "a", x, _REFERENCE, "q"),
    "keep_mask": lambda x: validation.keep_mask("f", x, (2, 3), "(A, B)", _REFERENCE, "q"),
    "has_values": lambda x: validation.has_values("f", "a", x),
    "device": lambda x: validation.device("f", "a", x),
    "on_device": lambda x: validation.on_device("f", "a", x, torch.device("cpu"), "q"),
    "floating_dtype": lambda x: validation.floating_dtype("f", "a", x),
    "whole_number": lambda x: validation.whole_number("f", "a", x),
    "seed": lambda x: validation.seed("f", "a", x),
    "number": lambda x: validation.number("f", "a", x, positive=True, maximum=10.0),
    "scale": lambda x: validation.scale("f", x, torch.float32, tensors=True),
    "one_of": lambda x: validation.one_of("f", "a", x, ("a", "b")),
    "module": lambda x: validation.module("f", "a", x),
    "generator": lambda x: validation.generator("f", "a", x),
    "tokens": lambda x: validation.tokens("f", "a", x, 10, ndim=2, layout="(B, L)"),
    "floats_alike": lambda x: validation.floats_alike("f", "a", x, _REFERENCE, "w"),
}


@pytest.mark.parametrize("check", sorted(_CHECKS))
def test_each_check_given_anything_returns_or_names_the_argument(check):
    """The checks are public (course_utils.validation): whatever a learner hands one, it returns or
    raises an ArgumentError that names the argument, never an AttributeError on a non-tensor or an
    OverflowError on an int past a float (10**400), the 12 unclear errors an outside fuzz found."""
    unclear = []
    for value in _HOSTILE:
        try:
            _CHECKS[check](value)
        except validation.ArgumentError as error:
            assert "'a'" in str(error) or "keep_mask" in str(error) or "scale" in str(error), error
        except Exception as error:  # noqa: BLE001 - any other error is the finding
            unclear.append(f"{validation.describe(value)}: {type(error).__name__}: {error}")
    assert not unclear, "\n".join(unclear)
