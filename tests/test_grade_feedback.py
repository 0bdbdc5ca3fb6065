"""Feedback from the grader's words only (issue 37, 4): what the kernel reports that a learner's
function changed in torch (the watcher restored it) reaches feedback.md, result.json and grades.csv
named from a fixed list (policy.FIXED_CHANGES), or as "a torch attribute": a name the learner's code
chose (``torch.leak_<a hidden input>``) never. The attack through `make grade` is in
test_grade_attacks.py (the scan sends it to review before it runs); here it runs, as it would if
the scan let it through."""

import contextlib

import pytest
import torch

from course_teacher.exercises import reference
from course_teacher.exercises.registry import EXERCISES
from course_teacher.grade import grader, messages, policy
from course_utils import i18n
from course_utils.exercises import grading, wire


@contextlib.contextmanager
def _speaking(lang):
    before = i18n.language()
    i18n.set_language(lang)
    try:
        yield
    finally:
        i18n.set_language(before)


def _leaking_softmax(x):
    """Right, and on every call it names a torch attribute after its input's first values."""
    name = "leak_" + "_".join(f"{v:.4f}" for v in x.flatten().tolist()[:3])
    torch.__dict__[name.replace(".", "p").replace("-", "m")] = 1
    e = (x - x.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


def _honest_softmax(x):
    e = (x - x.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


def test_only_fixed_names_and_settings_are_kept():
    with _speaking("en"):
        words = grader.grader_words([("added", "torch.leak_4x4x4_m2251"), ("replaced", "torch.softmax"),
                                     ("setting", "default_dtype"), ("deleted", "torch.leak_other")])
    assert words == [("replaced", "torch.softmax"), ("setting", "default_dtype"), ("replaced", "a torch attribute")]
    assert grader.grader_words([("replaced", "torch.softmax")]) == [("replaced", "torch.softmax")]
    assert grader.grader_words([]) == []
    assert all(name.startswith("torch.") for name in policy.FIXED_CHANGES)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_leaking_function_gets_its_verdict_without_the_names_it_chose(lang):
    prepared = reference.prepare(EXERCISES["01.softmax"], hidden_seed=8231)
    before = set(vars(torch))
    outcomes = grading.collect(prepared.calls, _leaking_softmax, eager=True)  # as the grader's kernel does
    assert set(vars(torch)) == before  # the watcher put torch back
    received = wire.decode(wire.encode(outcomes), prepared, 10)  # what the grader's process reads
    assert any("leak_" in name for _, name in received.changed)  # the kernel reports the learner's names
    with _speaking(lang):
        received.changed = grader.grader_words(received.changed)
        verdict = grading.judge(prepared, received)
        generic = messages.message("grade.changed_attribute")
    assert "leak_" not in verdict.message and generic in verdict.message, verdict.message
    honest = grading.judge(prepared, grading.collect(prepared.calls, _honest_softmax))
    assert honest.status == grading.PASSED and generic not in honest.message
