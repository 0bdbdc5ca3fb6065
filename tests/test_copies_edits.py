"""Copies of the course's code told after the trivial edits a copier makes (issue 37, 5;
course_teacher/grade/copies.py): variables renamed, statements added or reordered, comments and
docstrings changed. Each goes to the teacher's review naming the function it copies (the feedback's
words, in both languages, are grade.copy's); the lessons' worked solutions, 00 to 09, are never
taken for a copy (test_copies.py checks the independent answers)."""

import ast
import inspect
import textwrap

import answer_keys
import pytest
from submissions import render

from course_teacher.grade import copies, grader, messages
from course_utils import masks

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
