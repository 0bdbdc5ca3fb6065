"""The check engine's generic rules beyond tests/test_grading.py: an argument changed in place
(INPUT_MODIFIED) and the time limit reach the teacher's grader through the wire with the notebook's
verdict; the wire refuses a malformed list of changed arguments; the rule is written where the course
introduces its exercises; the student render's stub speaks the notebook's language and reads as
not attempted."""

import copy
import os
import re

import jupytext
import pytest
import torch

from course_teacher.exercises import EXERCISES, prepare
from course_utils import i18n
from course_teacher import build
from course_utils.exercises import NOT_ATTEMPTED, evaluate, grading, wire
from wired import wired

ROOT = build.ROOT




def _masks_in_place(scores, keep_mask):
    nothing_kept = ~keep_mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~keep_mask, float("-inf")).masked_fill(nothing_kept, 0.0)
    keep_mask.logical_not_()  # the caller's mask, inverted
    return scores.softmax(dim=-1).masked_fill(nothing_kept, 0.0)


def _decrements(lengths, max_len):
    lengths -= 1  # the caller's lengths
    return (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]


def _scales_in_place(query, key, value):
    query /= query.shape[-1] ** 0.5
    weights = torch.softmax(query @ key.transpose(-2, -1), dim=-1)
    return weights @ value, weights


def _catches_the_time_limit(scores):
    while True:
        try:
            sum(range(1000))
        except BaseException:  # noqa: BLE001
            pass


@pytest.mark.parametrize("exercise, function, name", [
    ("02.masked_softmax", _masks_in_place, "keep_mask"),
    ("00.padding_mask", _decrements, "lengths"),
    ("01.scaled_dot", _scales_in_place, "query"),
], ids=["mask", "lengths", "query"])
def test_through_the_wire_an_argument_changed_in_place_gets_the_notebooks_verdict(exercise, function, name):
    verdict = evaluate(exercise, function)
    assert verdict.code == "INPUT_MODIFIED" and f"`{name}`" in verdict.message, verdict.message
    assert wired(exercise, function) == verdict


def test_through_the_wire_a_caught_time_limit_gets_the_notebooks_verdict():
    there = wired("01.softmax", _catches_the_time_limit, 0.2)
    here = evaluate("01.softmax", _catches_the_time_limit, time_limit=0.2)
    assert there.code == here.code == "TIME_LIMIT" and there.status == here.status
    assert there.message.split(" on test case")[-1] == here.message.split(" on test case")[-1]


def test_the_wire_refuses_a_malformed_list_of_changed_arguments_and_believes_a_claimed_change():
    reference = prepare(EXERCISES["01.softmax"])
    good = wire.encode(grading.collect(reference.calls, lambda s: torch.zeros_like(s), eager=True))
    count = len(good["results"])
    for modified in (None, "0", [[]] * (count - 1), [[1]] + [[]] * (count - 1), [[0, 0]] + [[]] * (count - 1),
                     [[True]] + [[]] * (count - 1), [[-1]] + [[]] * (count - 1), [["0"]] + [[]] * (count - 1)):
        broken = {**good, "modified": modified}
        with pytest.raises(wire.WireError):
            wire.decode(broken, reference, 1.0)
    claimed = copy.deepcopy(good)
    claimed["modified"][2] = [0]  # a kernel may only make its own answer worse
    verdict = grading.judge(reference, wire.decode(claimed, reference, 1.0))
    assert verdict.code == "INPUT_MODIFIED" and "test case 3" in verdict.message


def _all_scores(query, key, value, block_q, block_k):
    """08.tiled_forward's values without its point: every score at once (a softmax by hand)."""
    scores = query @ key.transpose(-2, -1) / query.shape[-1] ** 0.5
    m = scores.amax(-1, keepdim=True)
    p = torch.exp(scores - m)
    ell = p.sum(-1, keepdim=True)
    return p @ value / ell, (m + ell.log()).squeeze(-1)


def _rows_against_every_key(query, key, value, block_q, block_k):
    """A block of queries against every key at once: more than one tile, fewer than all."""
    outputs, lses = [], []
    for i in range(0, query.shape[1], block_q):
        out, lse = _all_scores(query[:, i:i + block_q], key, value, block_q, block_k)
        outputs.append(out)
        lses.append(lse)
    return torch.cat(outputs, 1), torch.cat(lses, 1)


@pytest.mark.parametrize("function", [_all_scores, _rows_against_every_key], ids=["all", "rows"])
def test_an_exercise_that_limits_what_is_held_refuses_more_in_the_notebook_and_through_the_wire(function):
    """08.tiled_forward's text forbids more scores than one tile: right values and gradients built
    from the whole matrix, or from a row of tiles against every key, get TOO_LARGE with the sizes."""
    verdict = evaluate("08.tiled_forward", function)
    assert verdict.code == "TOO_LARGE" and "at most 192" in verdict.message, verdict.message
    assert wired("08.tiled_forward", function) == verdict
    assert evaluate("08.tiled_forward", EXERCISES["08.tiled_forward"].reference).code is None


def test_the_wire_refuses_malformed_sizes_and_only_an_exercise_with_a_limit_measures():
    reference = prepare(EXERCISES["08.tiled_forward"])
    good = wire.encode(grading.collect(reference.calls, EXERCISES["08.tiled_forward"].reference, eager=True))
    count = len(good["results"])
    assert all(size > 0 for size in good["sizes"])
    for sizes in (None, "1", [1] * (count - 1), [-1] * count, [1.5] * count, [True] * count):
        with pytest.raises(wire.WireError):
            wire.decode({**good, "sizes": sizes}, reference, 1.0)
    softmax = prepare(EXERCISES["01.softmax"])
    measured = grading.collect(softmax.calls, lambda s: torch.softmax(s, -1))
    assert set(measured.sizes) == {0} and set(softmax.calls["largest"]) == {None}


RULE = {"en": "an exercise's function never changes its arguments", "zh": "练习的函数绝不改动它的参数"}


def test_the_rule_is_written_where_the_course_introduces_its_exercises():
    """A check enforces nothing its text does not state: lesson 00's first exercise, in both
    languages, and the README's Exercises section say that an exercise's function never changes
    its arguments."""
    cells = jupytext.read(build.lessons()["00"]).cells
    first = next(i for i, cell in enumerate(cells) if "exercise" in build.tags(cell))
    introduction = {lang: " ".join([cell.source for cell in cells[:first]  # the text right before the first exercise
                                    if cell.cell_type == "markdown" and f"lang-{lang}" in build.tags(cell)][-1].split())
                    for lang in RULE}
    assert "00.padding_mask" in introduction["en"] and RULE["en"] in introduction["en"]
    assert "00.padding_mask" in introduction["zh"] and RULE["zh"] in introduction["zh"]
    readme = (ROOT / "README.md").read_text()
    exercises = " ".join(readme.split("## Exercises", 1)[1].split("\n## ", 1)[0].split())
    assert RULE["en"] in exercises and RULE["zh"] in exercises and "INPUT_MODIFIED" in exercises


@pytest.mark.parametrize("lang, text", [("en", "exercise 01.softmax"), ("zh", "练习 01.softmax")])
def test_the_stub_speaks_the_notebooks_language_and_reads_as_not_attempted(lang, text):
    cell = '''def my_softmax(scores):
    """Softmax."""
    ### BEGIN SOLUTION
    return scores
    ### END SOLUTION'''
    stub = build.stub(cell, "01.softmax", lang)
    assert f'raise NotImplementedError("{text}")' in stub and "return scores" not in stub
    namespace = {}
    exec(stub, namespace)
    i18n.set_language(lang)
    verdict = evaluate("01.softmax", namespace["my_softmax"])
    assert verdict.status == NOT_ATTEMPTED and text not in verdict.message


@pytest.mark.parametrize("lesson", sorted(build.lessons()))
def test_every_lessons_chinese_student_notebook_has_chinese_stubs(lesson):
    """As rendered from the source (the committed notebooks follow once re-rendered)."""
    source = jupytext.read(build.lessons()[lesson])
    exercises = [cell.metadata["exercise"] for cell in source.cells if "exercise" in build.tags(cell)]
    for lang, word in (("en", "exercise"), ("zh", "练习")):
        code = "\n".join(cell.source for cell in build.render(source, lang, solutions=False).cells)
        for exercise in exercises:
            assert f'raise NotImplementedError("{word} {exercise}")' in code
        if lang == "zh":
            assert 'NotImplementedError("exercise' not in code


# ----------------------------------------------------------------------------- what a verdict shows of a hidden case

def _on_hidden_cases(exercise, behave):
    """A learner's 01.softmax that is right on the notebook's (public) cases and does `behave(x)` on the
    grader's hidden ones."""
    from course_utils.exercises import public

    shapes = {tuple(case.args[0].shape) for case in public.load(exercise).cases}

    def softmax(x):
        if tuple(x.shape) in shapes:
            return _softmax(x)
        return behave(x)

    return softmax


def _softmax(x):
    exp = (x - x.max(dim=-1, keepdim=True).values).exp()
    return exp / exp.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("behave", [
    lambda x: (_ for _ in ()).throw(ValueError(f"SEEN {x.flatten().tolist()[:4]} {tuple(x.shape)}")),
    lambda x: _softmax(x) + 1e-3,
], ids=["raises its inputs", "wrong values"])
def test_a_verdict_quotes_nothing_of_a_hidden_case(behave):
    """The feedback of the grader never quotes a hidden case: not its inputs (in an error's text the
    learner wrote, or in the case's description), not where or by how much the result differs."""
    from course_teacher.exercises import evaluate

    verdict = evaluate("01.softmax", _on_hidden_cases("01.softmax", behave), hidden_seed=4242)
    assert verdict.status != "passed"
    assert "SEEN" not in verdict.message and "expected" not in verdict.message
    assert i18n.message("check.hidden_case") in verdict.message
    for number in re.findall(r"-?\d+\.\d+", verdict.message):
        assert False, f"a number in the verdict: {number}: {verdict.message}"


def test_a_kernel_sent_name_is_not_used_where_there_are_hidden_cases():
    """Argument names come from the learner's function; sent back by a kernel, a function that saw a
    hidden case could spell its inputs in them. With hidden cases the verdict names the exercise's own."""
    from course_teacher.exercises import prepare
    from course_utils.exercises import grading

    reference = prepare(__import__("course_teacher.exercises", fromlist=["EXERCISES"]).EXERCISES["01.softmax"], 4242)
    outcomes = grading.collect(reference.calls, lambda x: _softmax(x) * 2)
    outcomes.names = ["value_0_93"]
    verdict = grading.judge(reference, outcomes)
    assert "value_0_93" not in verdict.message


def test_a_verdict_names_the_returned_value_that_differs():
    """A tuple result's values are named as the exercise's docstring names them ("Returns (output,
    lse)"), not by a 0-based index a Chinese reader takes for "the first"."""

    def tiled(query, key, value, block_q, block_k):
        scores = query @ key.transpose(-2, -1) * query.shape[-1] ** -0.5
        top = scores.max(dim=-1, keepdim=True).values
        exp = (scores - top).exp()
        total = exp.sum(dim=-1, keepdim=True)
        return exp / total @ value, (top + total.log()).squeeze(-1) + 1.0  # the lse off by one

    for lang, expected in (("en", "`lse` (value 2 of the result)"), ("zh", "返回值 `lse`（第 2 项）")):
        i18n.set_language(lang)
        try:
            verdict = evaluate("08.tiled_forward", tiled)
        finally:
            i18n.set_language("en")
        assert verdict.status == "failed" and expected in verdict.message, verdict.message


def test_a_checks_public_data_is_its_own_copy_and_a_changed_file_is_read_again(tmp_path, monkeypatch):
    """public.load decodes a file once a process and hands each check a deep copy: what one check's data
    suffers (a learner's function may reach it) never reaches the next, views still share their storage,
    and a file rewritten on disk (`make check` publishes again) is decoded again."""
    from course_utils.exercises import public

    exercise = "01.scaled_dot"
    first, second = public.load(exercise), public.load(exercise)
    args = first.cases[0].args
    kept = second.cases[0].args[0].clone()
    args[0].add_(1.0)
    first.cases[0].expected[0].zero_()
    assert torch.equal(public.load(exercise).cases[0].args[0], kept)
    assert torch.equal(public.load(exercise).cases[0].expected[0], second.cases[0].expected[0])
    # a file whose tensors share storage: the copy keeps them sharing, as the check's cases need
    base = torch.arange(6.0)
    data = torch.load(public.path(exercise), weights_only=True)
    data["cases"][0]["args"][0] = base.view(2, 3)
    data["cases"][0]["args"][1] = base.view(3, 2)
    file = tmp_path / f"{exercise}.pt"
    torch.save(data, file)
    monkeypatch.setattr(public, "FOLDER", tmp_path)
    a, b = public.load(exercise).cases[0].args[:2]
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    data["cases"][0]["args"][0] = torch.full((2, 3), 7.0)
    torch.save(data, file)
    os.utime(file, ns=(1, 1))  # another time stamp, whatever the file system's resolution
    assert torch.equal(public.load(exercise).cases[0].args[0], torch.full((2, 3), 7.0))
