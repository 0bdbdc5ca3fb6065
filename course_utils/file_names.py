"""What the course's files are called in each language: the one table every tool derives its names from.

JupyterLab shows a notebook by its file name, in its tab (cut to about 15 characters) and in its file
browser. When both languages used the same names, a learner with both open saw two ``index.ipynb`` tabs
and two ``09_flash_trit…``. So the English files keep their names and the Chinese copies have Chinese
ones, short, with the lesson's number first so that they sort in the course's order; what tells the two
apart comes by the fourth character, well inside what a tab shows::

    notebooks/en/01_attention_basics.ipynb     notebooks/zh/01_注意力基础.ipynb
    notebooks/en/index.ipynb                   notebooks/zh/首页.ipynb
    notebooks/en/glossary.md                   notebooks/zh/术语表.md

The build renders to these names (course_teacher.sources), the links between notebooks follow them, and
the learner's work folder holds its copies under them. A learner's previous copy of an updated lesson goes
to a folder of its own per language, named with the date first (``zh/before-update/2026-12-07_123005_
01_注意力基础.ipynb``), so that no tab or row of the browser reads like the live lesson. Updates before that kept
it beside the lesson (``01_attention_basics.before-update-20261128-073413.ipynb``); ``moved_before_update`` says
where such a copy goes now (course_utils.learner.move_old_copies moves it).

This module is in the learner's package because the learner's folder needs the homes' and glossaries'
names (course_utils.learner); the teacher's tools read it through course_teacher.sources.
"""

import re
import time

from . import validation as check
from .i18n import LANGUAGES

#: Each language's course home, beside its lessons.
HOMES = {"en": "index.ipynb", "zh": "首页.ipynb"}
#: Each language's glossary of terms, beside its lessons (the lessons link it, and it links them).
GLOSSARIES = {"en": "glossary.md", "zh": "术语表.md"}
#: The Chinese name of each lesson after its number: its title (the source's first zh heading), shortened.
#: The English name is the source's (notebooks/source/NN_slug.py: NN_slug.ipynb).
ZH_LESSONS = {
    "00": "张量形状入门",
    "01": "注意力基础",
    "02": "掩码",
    "03": "自注意力与交叉注意力",
    "04": "多头注意力",
    "05": "ProbSparse注意力",
    "06": "Transformer块",
    "07": "推理时的注意力",
    "08": "从零实现FlashAttention",
    "09": "Triton版FlashAttention",
    "10": "小型GPT",
}
#: The folder, in each language's folder of the work folder, that keeps the learner's copies from before
#: an update, and how a copy there is named: the time first, so that it never reads like the live lesson.
BEFORE_UPDATE = "before-update"
BEFORE_UPDATE_TIME = "%Y-%m-%d_%H%M%S"
#: How an update named that copy before (until 2026-12): beside the lesson, the lesson's name then (the Chinese
#: copies had the English names), then the local time: ``01_attention_basics.before-update-20261128-073413.ipynb``.
OLD_BEFORE_UPDATE = re.compile(r"(?P<stem>\d\d_.+?)\.before-update-(?P<time>.*)\.ipynb")  # (lessons only)
OLD_BEFORE_UPDATE_TIME = "%Y%m%d-%H%M%S"
#: A lesson's notebook: its two-digit number, an underscore, its name.
LESSON = re.compile(r"(\d\d)_.+\.ipynb")


def _stem(function, value):
    if not isinstance(value, str) or not re.fullmatch(r"\d\d_[\w-]+", value):
        check.fail(function, "stem", check.describe(value),
                   {"en": "a lesson's source name without its suffix, such as '01_attention_basics'",
                    "zh": "课程源文件不带后缀的名字，例如 '01_attention_basics'"})
    return value


def lesson_notebook(stem, lang):
    """The file name of the lesson whose source is notebooks/source/`stem`.py, in `lang`:
    ``lesson_notebook("01_attention_basics", "zh") == "01_注意力基础.ipynb"``."""
    _stem("lesson_notebook", stem)
    check.one_of("lesson_notebook", "lang", lang, LANGUAGES)
    if lang == "en":
        return f"{stem}.ipynb"
    number = stem[:2]
    if number not in ZH_LESSONS:
        check.fail("lesson_notebook", "stem", repr(stem),
                   {"en": f"a lesson with a Chinese name in course_utils.file_names.ZH_LESSONS "
                          f"(it has none for {number})",
                    "zh": f"在 course_utils.file_names.ZH_LESSONS 中有中文名的课（其中没有第 {number} 课）"})
    return f"{number}_{ZH_LESSONS[number]}.ipynb"


def home(lang):
    """The file name of the course home in `lang`."""
    return HOMES[check.one_of("home", "lang", lang, LANGUAGES)]


def glossary(lang):
    """The file name of the glossary in `lang`."""
    return GLOSSARIES[check.one_of("glossary", "lang", lang, LANGUAGES)]


def lesson_number(name):
    """The lesson number of a lesson notebook's file name ("01_注意力基础.ipynb" -> "01"), else None."""
    if not isinstance(name, str):
        check.fail("lesson_number", "name", check.describe(name),
                   {"en": "a file name, such as '01_attention_basics.ipynb'", "zh": "文件名，例如 '01_注意力基础.ipynb'"})
    found = LESSON.fullmatch(name)
    return found.group(1) if found else None


def before_update(name, now=None):
    """Where the learner's previous copy of lesson `name` goes when an update replaces it, relative to its
    language's folder: ``before-update/2026-12-07_123005_01_注意力基础.ipynb`` (`now`: seconds since the
    epoch, default the current time, written in local time)."""
    if not isinstance(name, str) or not name or "/" in name:
        check.fail("before_update", "name", check.describe(name),
                   {"en": "a notebook's file name, such as '01_attention_basics.ipynb'",
                    "zh": "笔记本的文件名，例如 '01_注意力基础.ipynb'"})
    if now is not None:
        check.number("before_update", "now", now, non_negative=True)
    return _before_update(name, time.localtime(now))


def _before_update(name, when):
    return f"{BEFORE_UPDATE}/{time.strftime(BEFORE_UPDATE_TIME, when)}_{name}"


def moved_before_update(name, mtime):
    """Where a copy that an earlier update kept beside the lesson (OLD_BEFORE_UPDATE) goes now, relative to its
    language's folder, else None (`name` is no such copy): ``01_attention_basics.before-update-20261128-073413.ipynb``
    -> ``before-update/2026-11-28_073413_01_attention_basics.ipynb``, the lesson's name as it was. The time is the
    one in the name (local time, as written: no clock conversion can shift it), or `mtime` (the file's, seconds
    since the epoch) where the name's cannot be read."""
    if not isinstance(name, str) or "/" in name:
        check.fail("moved_before_update", "name", check.describe(name),
                   {"en": "a file's name, such as '01_attention_basics.before-update-20261128-073413.ipynb'",
                    "zh": "文件名，例如 '01_attention_basics.before-update-20261128-073413.ipynb'"})
    check.number("moved_before_update", "mtime", mtime)
    found = OLD_BEFORE_UPDATE.fullmatch(name)
    if found is None:
        return None
    try:
        when = time.strptime(found.group("time"), OLD_BEFORE_UPDATE_TIME)
    except ValueError:  # renamed by hand, or a time that never was (20261399-…)
        when = time.localtime(max(mtime, 0))
    return _before_update(f"{found.group('stem')}.ipynb", when)
