"""course_utils.verse: the form of a regulated poem, judged on the corpus itself and on poems broken
one way at a time, and poems sampled from a model reproducibly."""

import pytest
import torch

from course_utils import corpus, gpt, verse
from course_utils.validation import ArgumentError

JUEJU = "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"


def test_every_poem_of_the_corpus_is_well_formed():
    poems = corpus.load("tang").text.strip("\n").split("\n\n")
    assert len(poems) == 36_166  # the corpus README's count: each poem is one blank-line-separated block
    forms = [verse.form(poem) for poem in poems]
    assert None not in forms
    assert set(forms) == {"五言绝句", "七言绝句", "五言律诗", "七言律诗"}


@pytest.mark.parametrize("poem, expected", [
    (JUEJU, "五言绝句"),
    (JUEJU + "\n", "五言绝句"),
    ("朝辞白帝彩云间，千里江陵一日还。\n两岸猿声啼不住，轻舟已过万重山。", "七言绝句"),
    (JUEJU + "\n" + JUEJU, "五言律诗"),
    ("白日依山尽，黄河入海流。", None),  # one couplet
    (JUEJU + "\n白日依山尽，黄河入海流。", None),  # three couplets
    ("白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼呀。", None),  # a line of 6
    ("白日依山尽，黄河入海流。\n朝辞白帝彩云间，千里江陵一日还。", None),  # 5 and 7 mixed
    ("白日依山尽。黄河入海流，\n欲穷千里目，更上一层楼。", None),  # punctuation swapped
    ("白日依山尽，黄河入海流。\n欲穷千里目更上一层楼。", None),  # no comma
    ("白日依，山尽黄河入海流。\n欲穷千里目，更上一层楼。", None),  # comma misplaced
    ("白日依山尽，黄河入海流。\n\n欲穷千里目，更上一层楼。", None),  # a blank line inside
    ("汉使却回凭寄语，黄金何日赎蛾眉？\n君王若问妾颜色，莫道不如宫里时。", "七言绝句"),  # a question ends a couplet
    ("白日依山尽？黄河入海流。\n欲穷千里目，更上一层楼。", None),  # but does not part one
    ("", None),
])
def test_form_accepts_exactly_the_regulated_forms(poem, expected):
    assert verse.form(poem) == expected


def test_sampled_poems_are_reproducible_and_judged():
    tang = corpus.load("tang")
    model = gpt.make_gpt(tang.vocab_size, seed=0, context=32, d_model=16, heads=2, layers=1).eval()
    first = verse.sample_poems(model, tang, 3, seed=5)
    assert first == verse.sample_poems(model, tang, 3, seed=5)
    assert first != verse.sample_poems(model, tang, 3, seed=6)
    assert len(first) == 3 and all(len(p) <= verse.LONGEST + 2 for p in first)
    assert verse.well_formed_share(first) == 0  # an untrained model writes no regulated verse
    assert verse.well_formed_share([JUEJU, "x"]) == 0.5


def test_bad_arguments_are_named():
    with pytest.raises(ArgumentError, match="'poem'"):
        verse.form(None)
    with pytest.raises(ArgumentError, match="'poems'"):
        verse.well_formed_share([])
    shakespeare = corpus.load("shakespeare")
    model = gpt.make_gpt(shakespeare.vocab_size, seed=0, context=16, d_model=8, heads=2, layers=1)
    with pytest.raises(ArgumentError, match="'corpus'"):
        verse.sample_poems(model, shakespeare, 2)
    with pytest.raises(ArgumentError, match="'count'"):
        verse.sample_poems(model, corpus.load("tang"), 0)
