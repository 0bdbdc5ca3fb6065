"""Each language's files have names of their own (course_utils.file_names, issue 40): JupyterLab's tabs and
file browser show a file by its name, cut to about 15 characters, and both languages' copies used to read
alike (two `index.ipynb` tabs, two `09_flash_trit…`)."""

import json
import time
from pathlib import Path

import nbformat
import pytest

import answer_keys
import patience
from course_teacher import build, links, platforms
from course_teacher.grade import grader, submission
from course_utils import file_names, i18n
from course_utils.validation import ArgumentError

ROOT = Path(__file__).resolve().parents[1]
#: What a tab shows of a name, and then some: what must differ between two languages' files.
TAB_CHARACTERS = 12


def _files(lang, solutions=False):
    """The names of the notebooks and pages in notebooks/(solutions/)`lang`/, as committed."""
    folder = build.NOTEBOOKS / ("solutions" if solutions else "") / lang
    return sorted(path.name for path in folder.iterdir() if path.suffix in (".ipynb", ".md"))


def test_every_committed_file_has_the_name_the_table_gives_and_no_other():
    """The renders, the homes and the glossaries are exactly what course_utils.file_names names: no copy under
    an old name is left behind (the Chinese copies had the English names)."""
    for lang in build.LANGUAGES:
        lessons = [build.notebook_name(source, lang) for source in build.lessons().values()]
        assert _files(lang) == sorted([*lessons, file_names.HOMES[lang], file_names.GLOSSARIES[lang]])
        assert _files(lang, solutions=True) == sorted(lessons)
        assert [path.name for _lang, _solutions, path in build.targets(build.lessons()["09"])
                if _lang == lang] == [file_names.lesson_notebook("09_flash_triton", lang)] * 2


def test_no_two_files_of_the_course_share_a_name_or_its_first_characters_across_languages():
    """Every notebook and page, home and glossary included: no name in both languages, and every name
    starts differently, within its first TAB_CHARACTERS characters, from every name of the other language;
    within a language the lessons' names stay apart too (their numbers come first)."""
    names = {lang: _files(lang) for lang in build.LANGUAGES}
    assert not set(names["en"]) & set(names["zh"])
    for en in names["en"]:
        for zh in names["zh"]:
            assert en[:TAB_CHARACTERS] != zh[:TAB_CHARACTERS], (en, zh)
    for lang, found in names.items():
        assert len({name[:TAB_CHARACTERS] for name in found}) == len(found), (lang, found)
        lessons = [name for name in found if file_names.lesson_number(name)]
        assert [file_names.lesson_number(name) for name in lessons] == list(build.lessons()), lang  # they sort


def test_the_chinese_names_are_chinese_short_and_in_the_table_for_every_lesson():
    assert set(file_names.ZH_LESSONS) == set(build.lessons()), "a lesson without a Chinese name, or a stale one"
    for number, name in file_names.ZH_LESSONS.items():
        assert any("\u4e00" <= character <= "\u9fff" for character in name), name
        assert len(name) <= 24 and " " not in name and "/" not in name, name
    assert file_names.lesson_notebook("01_attention_basics", "zh") == "01_注意力基础.ipynb"
    assert file_names.lesson_notebook("01_attention_basics", "en") == "01_attention_basics.ipynb"
    assert (file_names.home("zh"), file_names.glossary("zh")) == ("首页.ipynb", "术语表.md")


def test_a_name_asked_for_wrongly_gets_an_error_naming_the_argument():
    for call, argument in ((lambda: file_names.lesson_notebook("attention", "zh"), "stem"),
                           (lambda: file_names.lesson_notebook(1, "en"), "stem"),
                           (lambda: file_names.lesson_notebook("01_attention_basics", "fr"), "lang"),
                           (lambda: file_names.lesson_notebook("77_unknown", "zh"), "stem"),
                           (lambda: file_names.home("de"), "lang"),
                           (lambda: file_names.lesson_number(None), "name"),
                           (lambda: file_names.before_update("en/01_x.ipynb"), "name"),
                           (lambda: file_names.before_update("01_x.ipynb", now=-1), "now")):
        with pytest.raises(ArgumentError, match=f"'{argument}'|{argument}"):
            call()
    previous = i18n.language()
    i18n.set_language("zh")
    try:
        with pytest.raises(ArgumentError, match="ZH_LESSONS"):  # where to add a lesson's Chinese name, in Chinese too
            file_names.lesson_notebook("77_unknown", "zh")
    finally:
        i18n.set_language(previous)


def test_a_copy_from_before_an_update_is_named_with_the_date_first_in_a_folder_of_its_own():
    when = 1_800_000_000
    stamp = time.strftime("%Y-%m-%d_%H%M%S", time.localtime(when))
    assert file_names.before_update("01_注意力基础.ipynb", when) == f"before-update/{stamp}_01_注意力基础.ipynb"
    assert file_names.lesson_number("01_注意力基础.ipynb") == "01" and file_names.lesson_number("首页.ipynb") is None
    assert file_names.lesson_number(Path(file_names.before_update("01_x.ipynb", when)).name) is None  # not a lesson


def test_the_links_and_the_platforms_name_each_languages_file():
    """Binder's, Colab's and a hub's links percent-encode the Chinese names; an autograder expects the
    notebook under its name in its language."""
    zh = f"notebooks/zh/{file_names.lesson_notebook('01_attention_basics', 'zh')}"
    assert "%E6%B3%A8%E6%84%8F%E5%8A%9B" in links.binder_url(zh) and zh.split("/")[-1] not in links.binder_url(zh)
    assert links.colab_url(zh).endswith("/notebooks/zh/01_%E6%B3%A8%E6%84%8F%E5%8A%9B%E5%9F%BA%E7%A1%80.ipynb")
    assert links.hub_url("https://hub.example.edu", "https://github.com/you/attention-student", zh).isascii()
    settings = platforms.settings("classroom50", "01", "zh", [])
    assert settings["notebook"] == "01_注意力基础.ipynb" and settings["stem"] == "01_attention_basics"
    assert json.loads(json.dumps(settings))["notebook"] == "01_注意力基础.ipynb"  # as settings.json carries it
    assert platforms.settings("gradescope", "01", "en", [])["notebook"] == "01_attention_basics.ipynb"


def test_the_grader_reads_a_chinese_named_submission_as_the_lesson_it_names():
    """`make grade` finds a lesson by its file name's number, whatever follows it: a learner's Chinese copy
    is lesson 01 in Chinese, as its English name would be."""
    path = build.NOTEBOOKS / "zh" / build.notebook_name(build.lessons()["01"], "zh")
    found = submission.read(path, "ann/01", "ann")
    assert (found.lesson, found.lang, found.mismatch, found.unreadable) == ("01", "zh", None, None)
    assert found.name_lesson == "01"


@pytest.mark.slow  # (two kernels: left out of `make quick`)
def test_a_chinese_named_submission_grades_the_same_as_under_the_english_name(tmp_path, tmp_path_factory):
    """The same solved Chinese lesson 00, handed in as 00_张量形状入门.ipynb and as 00_tensor_shapes.ipynb:
    the same verdicts, all passed."""
    from submissions import solved

    notebook = solved("00_tensor_shapes.ipynb", "zh")
    # (without the sandbox: the name is what differs here; test_grade_sandbox proves the sandbox)
    options = grader.Options(cells="own", time_limit=patience.seconds(2), cell_timeout=patience.seconds(30),
                             sandboxed=False, answers=answer_keys.key(tmp_path_factory, "00"))
    rows = {}
    for name in (file_names.lesson_notebook("00_tensor_shapes", "zh"), "00_tensor_shapes.ipynb"):
        path = tmp_path / name.removesuffix(".ipynb") / name
        path.parent.mkdir()
        nbformat.write(notebook, str(path))
        graded = grader.grade_one(path, "them", "them", options)
        assert (graded.lesson, graded.lang) == ("00", "zh"), name
        rows[name] = [(row.exercise, row.status) for row in graded.rows]
    (chinese, english) = rows.values()
    assert chinese == english and chinese and all(status == "passed" for _exercise, status in chinese), rows
