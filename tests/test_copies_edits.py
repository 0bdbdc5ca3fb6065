"""Copies of the course's code told after the trivial edits a copier makes (issue 37, 5;
course_teacher/grade/copies.py): variables renamed, statements added or reordered, comments and
docstrings changed. Each goes to the teacher's review naming the function it copies (the feedback's
words, in both languages, are grade.copy's); the lessons' worked solutions, 00 to 09, are never
taken for a copy (test_copies.py checks the independent answers)."""

import ast
import inspect
import re
import textwrap

import answer_keys
import padding_mask_copies
import pytest
from submissions import render

from course_teacher.grade import copies, messages
from course_utils import masks

pytestmark = pytest.mark.slow  # (the grader and its answer key: `make test`'s, not the inner loop's)

LESSONS = ("00_tensor_shapes", "01_attention_basics", "02_masking", "03_self_cross_attention",
           "04_multihead_attention", "05_probsparse", "06_transformer", "07_inference_attention",
           "08_flash_attention", "09_flash_triton", "10_gpt")


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    return answer_keys.key(tmp_path_factory, "00")  # (the course's fingerprints are in every lesson's key)


def _source():
    return textwrap.dedent(inspect.getsource(masks.padding_mask))


def _renamed(source):
    return source.replace("def padding_mask(lengths, max_len):", "def padding_mask(lens, size):") \
        .replace("lengths", "lens").replace("max_len", "size").replace("keep", "visible").replace("function", "me")


def _reordered(source):
    """Two statements that do not depend on each other swapped (max_len's memory check, then `ok =`)."""
    tree = ast.parse(source)
    body = tree.body[0].body
    at = next(i for i, s in enumerate(body) if isinstance(s, ast.Assign) and s.targets[0].id in ("ok",))
    assert isinstance(body[at - 1], ast.Expr)  # the memory check
    body[at - 1], body[at] = body[at], body[at - 1]
    return ast.unparse(tree)


def _with(source, line, after="    function = \"padding_mask\"\n"):
    assert after in source
    return source.replace(after, after + line)


EDITS = {
    "as it is": _source,
    "a line added": lambda: _with(_source(), "    unused = 0\n"),
    "renamed, a line added": lambda: _with(_renamed(_source()), "    unused = 0\n", "    me = \"padding_mask\"\n"),
    "a comment and a docstring": lambda: _source().replace('"""Keep mask', '"""My own mask. Keep mask')
    .replace("    function = ", "    # my name\n    function = "),
    "reordered": lambda: _reordered(_source()),
    "reordered, renamed, statements added": lambda: _with(_reordered(_renamed(_source())),
                                                          "    total = 0\n    scale = 1.0\n", "    me = 'padding_mask'\n"),
    "a statement inside a block": lambda: _source().replace(
        "    if ok:\n", "    if ok:\n        extra = None\n"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_padding_mask_edited_trivially_is_a_copy_naming_it(answers, edit):
    source = EDITS[edit]()
    assert source != _source() or edit == "as it is"
    (function,) = copies.functions(source).values()
    assert copies.copy_of(function, answers.copies) == "course_utils.masks.padding_mask"


def test_the_review_names_the_copy_in_both_languages():
    for lang in ("en", "zh"):
        text = messages.text(lang, "grade.copy", exercise="00.padding_mask", cell=3,
                             source="`course_utils.masks.padding_mask`")
        assert "course_utils.masks.padding_mask" in text and "00.padding_mask" in text


def test_an_honest_padding_mask_is_no_copy(answers):
    (function,) = copies.functions("def padding_mask(lengths, max_len):\n"
                                   "    positions = torch.arange(max_len, device=lengths.device)\n"
                                   "    return (positions[None, :] < lengths[:, None])[:, None, None, :]").values()
    assert copies.copy_of(function, answers.copies) is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_worked_solution_of_any_lesson_is_taken_for_a_copy(answers, lang):
    count = 0
    for stem in LESSONS:
        for cell in render(f"{stem}.ipynb", lang, solutions=True).cells:
            if cell.cell_type == "code" and cell.metadata.get("exercise"):
                for function in copies.functions(cell.source).values():
                    count += 1
                    assert copies.copy_of(function, answers.copies) is None, (stem, function.name)
    assert count >= 30


def test_normalising_is_the_same_whatever_the_order_of_independent_statements():
    one = ("def f(a, b):\n    x = a * 2 + a.sum(-1, keepdim=True)\n    y = b + 1 - b.mean(0)\n"
           "    z = torch.stack([x, y]).sum(0).exp().log().clamp(min=0.5, max=2.0)\n    return z * z + x - y")
    two = ("def g(p, q):\n    v = q + 1 - q.mean(0)\n    u = p * 2 + p.sum(-1, keepdim=True)\n"
           "    w = torch.stack([u, v]).sum(0).exp().log().clamp(min=0.5, max=2.0)\n    return w * w + u - v")
    (first,), (second,) = copies.functions(one).values(), copies.functions(two).values()
    assert copies.statements(first) and copies.statements(first) == copies.statements(second)
    three = one.replace("a * 2", "a * 3")  # a constant changed: another statement
    (third,) = copies.functions(three).values()
    assert copies.statements(first) != copies.statements(third)


# ----------------------------------------------------------------------------- the helper renamed or moved

#: The copy with the helper its body calls (the course's argument checks, ``check``: course_utils.validation)
#: renamed or moved into the learner's cell (tests/padding_mask_copies.py): a module alias, a class, functions,
#: a class or lambdas of the function's own. What the body calls is named by what it does there, not by where it
#: lives or what it is called.
MOVED = {
    "its checks in a class of the cell's": padding_mask_copies.in_a_class,
    "its checks in a class of another name": lambda: padding_mask_copies.in_a_class("arguments"),
    "its checks as functions of the cell's": padding_mask_copies.as_functions,
    "its checks as functions renamed": lambda: padding_mask_copies.as_functions(lambda name: f"my_{name}"),
    "its checks in a class inside it": padding_mask_copies.with_local_helpers,
    "its checks as lambdas inside it": padding_mask_copies.with_lambdas,
    "its checks as lambdas inside it, named like torch's": lambda: padding_mask_copies.with_lambdas(
        padding_mask_copies.API_NAMES.get),
    "the module alias renamed": lambda: _source().replace("check.", "v."),
    "torch under an alias": lambda: _source().replace("torch.", "t."),
}


@pytest.mark.parametrize("edit", sorted(MOVED))
def test_padding_mask_with_its_helper_renamed_or_moved_is_a_copy_naming_it(answers, edit):
    function = copies.functions(MOVED[edit]())["padding_mask"]
    assert copies.copy_of(function, answers.copies) == "course_utils.masks.padding_mask"


#: The next edits a copier makes: a constant inlined, an ``if`` turned around, a comparison written the other way.
NEXT = {
    "the function's name inlined": lambda: _source().replace('    function = "padding_mask"\n', "")
    .replace("function,", '"padding_mask",'),
    "an if turned around": lambda: _source().replace(
        "    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 0:\n",
        "    if isinstance(max_len, int) and not isinstance(max_len, bool) and max_len >= 0:\n        pass\n    else:\n"),
    "an if turned around, names renamed": lambda: _renamed(_source()).replace(
        "    if not isinstance(size, int) or isinstance(size, bool) or size < 0:\n",
        "    if size >= 0 and not isinstance(size, bool) and isinstance(size, int):\n        pass\n    else:\n"),
    "an if with an else turned around": lambda: _source().replace(
        "    if ok:\n", "    if not ok:\n        pass\n    else:\n"),
    "comparisons the other way": lambda: _source().replace("lengths.min() < 0", "0 > lengths.min()")
    .replace("lengths.max() > max_len", "max_len < lengths.max()"),
    "a check dropped": lambda: _source().replace(
        '    check.fits_in_memory(function, "max_len", max_len, max_len, 8)  # the positions 0 … max_len - 1, int64\n',
        ""),
    "a helper's call written out": lambda: _source().replace('check.describe(max_len)', 'f"{max_len!r}"'),
    "two checks dropped": lambda: _source().replace(
        '    check.fits_in_memory(function, "max_len", max_len, max_len, 8)  # the positions 0 … max_len - 1, int64\n',
        "").replace('        check.has_values(function, "lengths", lengths)\n', ""),
    "its failures raised": lambda: re.sub(r"check\.fail\(", "raise ValueError(", _source()),
}


#: Honest answers that check their arguments with helpers of their own (one a class named ``check``, as the
#: course's module alias is): the rule that names a helper by what it does must not make them copies.
HONEST = {
    "a class named check": padding_mask_copies.HONEST_CLASS_CHECK,
    "helpers of the cell's": '''
        import torch

        def need(condition, what):
            if not condition:
                raise ValueError(what)

        def padding_mask(lengths, max_len):
            need(isinstance(max_len, int) and not isinstance(max_len, bool) and max_len >= 0, "max_len: an int >= 0")
            need(isinstance(lengths, torch.Tensor) and lengths.ndim == 1, "lengths: a (B,) tensor")
            need(not lengths.is_floating_point() and lengths.dtype != torch.bool, "lengths: integers")
            if lengths.numel():
                need(0 <= lengths.min() and lengths.max() <= max_len, "lengths: between 0 and max_len")
            keep = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
            return keep[:, None, None, :]
    ''',
    "validation inlined": '''
        import torch

        def padding_mask(lengths, max_len):
            if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 0:
                raise ValueError(f"padding_mask: max_len must be an int >= 0, got {max_len!r}")
            if not isinstance(lengths, torch.Tensor) or lengths.ndim != 1 or lengths.is_floating_point():
                raise ValueError(f"padding_mask: lengths must be a (B,) integer tensor, got {lengths!r}")
            if lengths.numel() and (lengths.min() < 0 or lengths.max() > max_len):
                raise ValueError(f"padding_mask: lengths must lie between 0 and {max_len}")
            keep = torch.arange(max_len, device=lengths.device) < lengths[:, None]
            return keep[:, None, None, :]
    ''',
}


@pytest.mark.parametrize("answer", sorted(HONEST))
def test_an_honest_padding_mask_with_checks_of_its_own_is_no_copy(answers, answer):
    function = copies.functions(textwrap.dedent(HONEST[answer]))["padding_mask"]
    assert copies.statements(function) and copies.copy_of(function, answers.copies) is None


def test_no_learners_padding_mask_is_a_copy(answers):
    """The independently written answers of 00.padding_mask (tests/test_learner_answers.py), right and wrong."""
    import test_learner_answers

    collected = [(f, expected) for exercise, f, expected in test_learner_answers.ANSWERS if exercise == "00.padding_mask"]
    assert len(collected) >= 9
    read = 0
    for function, _ in collected:
        (found,) = copies.functions(textwrap.dedent(inspect.getsource(function))).values()
        read += copies.statements(found) is not None  # (the one-liners are too small to tell: never a copy)
        assert copies.copy_of(found, answers.copies) is None, function.__name__
    assert read >= 3


def _function(body, name="f"):
    (function,) = copies.functions(f"def {name}(a, b):\n" + textwrap.indent(body, "    ")).values()
    return function


def test_a_copy_may_lack_a_few_statements_of_a_large_course_function_only():
    """Statements changed or dropped still tell a copy of a course function of TOLERANT_FROM statements or more: one,
    a fifth from ten on (the independent answers and worked solutions come no nearer than three short of eight, two
    thirds short of ten or more); of a smaller function, every statement must be there."""
    lines = [f"print(torch.linalg.norm(a[{i}] * b.sum(-1, keepdim=True), dim=-1) + {i})" for i in range(20)]
    assert [copies.tolerated(size) for size in (7, 8, 9, 10, 14, 15, 20)] == [0, 1, 1, 2, 2, 3, 4]
    for size in (copies.TOLERANT_FROM - 1, copies.TOLERANT_FROM, 10, 15):
        course = _function("\n".join(lines[:size]))
        table = {copies.fingerprint(course): "course"}
        assert sum(copies.statements(course).values()) == size
        for short in range(4):
            copied = _function("\n".join(lines[short:size] + ["print(a)"]), "g")
            assert copies.copy_of(copied, table) == ("course" if short <= copies.tolerated(size) else None), (size, short)


#: More edits of a copier's: a value named once written out where it is read, the parts of an ``and`` reordered, a
#: statement wrapped in a ``try`` that changes nothing.
MORE = {
    "a value written out where it is read": lambda: _source().replace(
        "    keep = torch.arange(max_len, device=lengths.device) < lengths[:, None]  # (B, L_k)\n"
        "    return keep[:, None, None, :]",
        "    return (torch.arange(max_len, device=lengths.device) < lengths[:, None])[:, None, None, :]"),
    "the parts of an and reordered": lambda: _source().replace(
        "        and lengths.ndim == 1\n        and not lengths.is_floating_point()\n",
        "        and not lengths.is_floating_point()\n        and lengths.ndim == 1\n"),
    "in a try that changes nothing": lambda: _source().replace(
        "    keep = ", "    try:\n        pass\n    except Exception:\n        raise\n    keep = "),
}


LATER = {**NEXT, **MORE}  # the edits a copier makes after EDITS'
assert len(LATER) == len(NEXT) + len(MORE)  # no edit hides another


@pytest.mark.parametrize("edit", sorted(LATER))
def test_padding_mask_after_the_next_trivial_edits_is_a_copy_naming_it(answers, edit):
    source = LATER[edit]()
    assert source != _source()
    function = copies.functions(source)["padding_mask"]
    assert copies.copy_of(function, answers.copies) == "course_utils.masks.padding_mask"
