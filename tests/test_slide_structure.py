"""The build refuses a lesson whose two languages' decks differ: every Chinese markdown cell starts the
same kind of slide (slide, sub-slide or none) as the English cell it translates."""

import jupytext
import nbformat
import pytest

from course_teacher import build


def _cell(text, lang, slide_type=None):
    metadata = {"tags": [f"lang-{lang}"]}
    if slide_type:
        metadata["slideshow"] = {"slide_type": slide_type}
    return nbformat.v4.new_markdown_cell(text, metadata=metadata)


def _source(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def test_a_translation_without_its_english_cells_slide_marker_is_named():
    source = _source(_cell("# Title", "en", "slide"), _cell("# 标题", "zh", "slide"),
                     _cell("## Part", "en", "subslide"), _cell("## 部分", "zh"),
                     _cell("text", "en"), _cell("正文", "zh", "slide"))
    problems = build.slide_structure_problems("99", source)
    assert len(problems) == 2, problems
    assert "source cell 3" in str(problems[0]) and "## 部分" in str(problems[0])
    assert "starts 'no break' where its English cell starts 'subslide'" in str(problems[0])
    assert "source cell 5" in str(problems[1])
    assert "starts 'slide' where its English cell starts 'no break'" in str(problems[1])
    # the build and `make check` refuse it: validate() is what both run first
    assert {str(p) for p in problems} <= {str(p) for p in build.validate("99", source)}


def test_matching_decks_pass():
    source = _source(_cell("# Title", "en", "slide"), _cell("# 标题", "zh", "slide"),
                     _cell("text", "en", "fragment"), _cell("正文", "zh"))  # a fragment is no new slide
    assert build.slide_structure_problems("99", source) == []


@pytest.mark.parametrize("lesson", sorted(build.lessons()))
def test_every_lessons_two_decks_have_the_same_slides(lesson):
    assert build.slide_structure_problems(lesson, jupytext.read(build.lessons()[lesson])) == []
