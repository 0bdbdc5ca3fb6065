"""The check's messages read as well in Chinese as in English: a diagnosis is a sentence, its code a
reference at the end; and every message prints its numbers as the English one does (the same fields,
rounded alike), so a Chinese learner never sees 0.236389 where an English one sees 0.24."""

import io
import re
import string
import tokenize

import pytest

from course_teacher import bilingual_code, build, messages
from course_teacher.exercises import EXERCISES
from course_teacher.grade import messages as grade_messages
from course_utils import i18n
from course_utils.exercises.grading import evaluate

#: Every table of messages: the learner's package's, the build's and the grader's (course_teacher/messages.py).
TABLES = {"course_utils.i18n": i18n.MESSAGES, "course_teacher.messages": messages.MESSAGES,
          "course_teacher.grade.messages": grade_messages.MESSAGES}
ALL_MESSAGES = {key: value for table in TABLES.values() for key, value in table.items()}


def _fields(text):
    return sorted((name, spec, conversion) for _literal, name, spec, conversion in string.Formatter().parse(text)
                  if name is not None)


@pytest.mark.parametrize("key", sorted(key for key, value in ALL_MESSAGES.items() if set(value) == set(i18n.LANGUAGES)))
def test_each_message_formats_the_same_fields_alike_in_both_languages(key):
    english, chinese = ALL_MESSAGES[key]["en"], ALL_MESSAGES[key]["zh"]
    assert _fields(english) == _fields(chinese), key


def test_a_key_is_in_one_table_and_each_side_reads_its_own_and_the_learners():
    """The teacher's lookups read every table below them, and no key is in two (which one would win?)."""
    keys = [key for table in TABLES.values() for key in table]
    assert len(keys) == len(set(keys)), sorted(key for key in set(keys) if keys.count(key) > 1)
    assert all(set(value) == set(i18n.LANGUAGES) for value in ALL_MESSAGES.values())
    assert messages.text("zh", "nav.home", link="x") == "← [课程首页](x)"  # the build's own
    assert messages.text("en", "grade.title", notebook="n") == grade_messages.text("en", "grade.title", notebook="n")
    learners = i18n.text("en", "check.hint_offer", exercise="01.x")
    assert messages.text("en", "check.hint_offer", exercise="01.x") == learners
    with pytest.raises(KeyError):
        grade_messages.text("en", "nav.home", link="x")  # the grader's side does not read the build's


def test_a_chinese_diagnosis_says_the_mistake_first_and_names_its_code_last():
    text = i18n.text("zh", "check.mistake", exercise="08.merge_states", code="NO_RESCALE", hint="两个部分要先重新缩放。")
    assert text == "✘ 08.merge_states：还不对。两个部分要先重新缩放。（错误代号 NO_RESCALE）"


def test_every_mistakes_chinese_hint_is_a_finished_sentence():
    """The code follows the hint in brackets: the hint must end as a sentence does."""
    count = 0
    for exercise_id, exercise in EXERCISES.items():
        for mistake in exercise.mistakes:
            hint = mistake.hint["zh"] if isinstance(mistake.hint, dict) else mistake.hint
            assert hint.rstrip().endswith(("。", "？", "！", "。）", "？）")), (exercise_id, mistake.code, hint[-20:])
            count += 1
    assert count > 300


def test_a_learners_mistake_reads_that_way_in_chinese():
    """01.softmax written without subtracting the maximum: the check names it, sentence first."""
    def naive(scores):
        return scores.exp() / scores.exp().sum(-1, keepdim=True)

    i18n.set_language("zh")
    try:
        verdict = evaluate("01.softmax", naive)
    finally:
        i18n.set_language("en")
    assert verdict.message.startswith("✘ 01.softmax：还不对。") and "诊断" not in verdict.message
    assert verdict.message.endswith(f"（错误代号 {verdict.code}）"), verdict.message


def _formatted(code):
    """{expression: sorted format specs} of the f-strings of `code` (a lesson's code in one language)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.STRING and re.match(r"[rbuRBU]*[fF]", token.string):
            for field in re.finditer(r"\{([^{}:!]+)(?:![rsa])?(:[^{}]*)?\}", token.string):
                found.setdefault(field.group(1).strip(), []).append(field.group(2) or "")
    return {expression: sorted(specs) for expression, specs in found.items()}


def test_a_lesson_prints_each_number_rounded_alike_in_both_languages():
    """A claim or a print in a code cell's `# lang:` block: the same expression with the same format
    in English and in Chinese (an expression only one language prints, 1e9 for "billion" against 1e8
    for 亿, is that language's own)."""
    compared = 0
    for lesson, path in build.lessons().items():
        for index, cell in enumerate(build.jupytext.read(path).cells):
            if cell.cell_type != "code" or "# lang: zh" not in cell.source:
                continue
            english = _formatted(bilingual_code.localize(cell.source, "en"))
            chinese = _formatted(bilingual_code.localize(cell.source, "zh"))
            for expression in english.keys() & chinese.keys():
                assert english[expression] == chinese[expression], (lesson, index, expression)
                compared += 1
    assert compared > 100
