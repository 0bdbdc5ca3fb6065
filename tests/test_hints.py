"""Every exercise's two hints (course_utils.exercises.hints): asked for one at a time, in the
notebook's language, with the glossary's terms, giving nothing of the solution's code away; and a
failing check says they exist."""

import pytest

from course_teacher import build
from course_utils import check, hint, i18n
from course_utils.exercises import EXERCISES, hints
from course_utils.validation import ArgumentError


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(hints, "HINTS_GIVEN", {})


def test_every_exercise_has_a_nudge_and_an_idea_in_both_languages():
    assert set(hints.HINTS) == set(EXERCISES)
    for exercise, stages in hints.HINTS.items():
        assert len(stages) == 2, exercise
        for stage in stages:
            assert set(stage) == set(i18n.LANGUAGES) and all(len(stage[lang]) > 15 for lang in stage), exercise
        assert stages[0]["en"] != stages[1]["en"] and stages[0]["zh"] != stages[1]["zh"], exercise


def test_the_hints_keep_the_glossarys_terms_and_give_no_solution_line_away():
    terms = build.glossary()
    secrets = set()
    for path in build.lessons().values():
        source = build.jupytext.read(path)
        secrets |= {line.strip() for cell in source.cells if "exercise" in build.tags(cell)
                    for line in build.solution_lines(cell) if len(line.strip()) >= 8}
    for exercise, stages in hints.HINTS.items():
        for number, stage in enumerate(stages, 1):
            problems = build.glossary_problems("hints", f"{exercise} hint {number}", stage["en"], stage["zh"], terms)
            assert not problems, [str(p) for p in problems]
            leaked = [s for s in secrets if s in stage["en"] or s in stage["zh"]]
            assert not leaked, (exercise, number, leaked)


def test_hints_come_one_at_a_time_in_the_notebooks_language(capsys):
    exercise = "07.gqa_attention"
    text = lambda lang, number: i18n.text(lang, "hint.text", exercise=exercise, number=number, total=2,
                                          text=hints.HINTS[exercise][number - 1][lang])
    hint(exercise)
    assert capsys.readouterr().out == text("en", 1) + "\n" + i18n.text("en", "hint.next", exercise=exercise) + "\n"
    hint(exercise)
    assert capsys.readouterr().out == text("en", 2) + "\n" + i18n.text("en", "hint.last", exercise=exercise) + "\n"
    hint(exercise)  # the last again
    assert capsys.readouterr().out.startswith(text("en", 2))
    i18n.set_language("zh")
    hint(exercise, 1)  # either one, asked for by its number
    assert capsys.readouterr().out.startswith(text("zh", 1))
    for wrong in [("08.no_such",), (exercise, 3), (exercise, True)]:
        with pytest.raises(ArgumentError, match="hint"):
            hint(*wrong)


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_a_failing_check_says_the_hints_exist_and_a_passing_or_untried_one_does_not(lang, capsys):
    i18n.set_language(lang)
    offer = i18n.text(lang, "check.hint_offer", exercise="01.softmax")
    check("01.softmax", lambda scores: scores)  # no softmax at all: fails
    assert capsys.readouterr().out.rstrip("\n").endswith(offer)
    check("01.softmax", lambda scores: scores.softmax(-1))  # torch's own softmax is forbidden: fails as well
    assert offer in capsys.readouterr().out

    def stub(scores):
        raise NotImplementedError

    check("01.softmax", stub)
    assert offer not in capsys.readouterr().out
