"""The teacher's side's messages, in English and Chinese: what the build writes into the lessons and the course
homes (``nav.*``, ``home.*``, ``colab.*``: course_teacher.render and course_teacher.build).

Three tables, one a side: the learner's package keeps its own (course_utils.i18n: what a notebook prints), the
grader its own (course_teacher.grade.messages: it ships in the grader's wheel without the rest of the teacher's
side), and this one the build's. A message belongs to the side that says it, so the student's package ships none
of the teacher's. ``text`` and ``message`` read all three; a key is in one table only (tests/test_messages_zh.py).
"""

from .grade import messages as grade_messages
from .grade.messages import language

MESSAGES = {
    # the links the build adds to every lesson, and the course home (course_teacher.build)
    # arrows, not emoji, as the check's verdicts' marks (course_utils.i18n)
    "nav.home": {"en": "← [Course home]({link})", "zh": "← [课程首页]({link})"},
    "nav.next": {"en": "**Next →** [{title}]({link})", "zh": "**下一课 →** [{title}]({link})"},
    "nav.last": {
        "en": "This was the last lesson. ← [Back to the course home]({link})",
        "zh": "这是最后一课。← [回到课程首页]({link})",
    },
    "home.title": {"en": "# Attention, from scratch", "zh": "# 从零理解注意力机制"},
    "home.intro": {
        "en": "A course on attention mechanisms in PyTorch, written to run on a laptop's CPU. "
        "Take the lessons in order: each builds on the ones before, and each ends with a link to the next. "
        "The times are the ones the teachers' guide plans for each lesson: working through the notebook, then "
        "finishing its exercises. Every term the course teaches is defined in the [glossary]({glossary}), which a "
        "lesson links the first time it uses the term.",
        "zh": "一门讲解 PyTorch 中注意力机制的课程，在笔记本电脑的 CPU 上就能运行。请按顺序学习：每一课都以前面各课为基础，"
        "课末都有通往下一课的链接。所需时间取自教师指南对每一课的安排：通读并运行笔记本，再做完其中的练习。"
        "课程讲到的每个术语都在[术语表]({glossary})里有定义；每一课第一次用到某个术语时，都会链接到那里。",
    },
    "home.columns": {"en": "#|Lesson|What it teaches|Time", "zh": "#|课|内容|时间"},
    "home.minutes": {"en": "about {minutes} min", "zh": "约 {minutes} 分钟"},
    "home.hours": {"en": "about {hours} h", "zh": "约 {hours} 小时"},
    "home.hours_minutes": {"en": "about {hours} h {minutes} min", "zh": "约 {hours} 小时 {minutes} 分钟"},
    "home.progress": {
        "en": "## Your progress\n\nEach check cell keeps its verdicts in `progress.json`, in your own work folder "
        "(the folder above this notebook, when you opened the course with `make lab`). The table below shows them as "
        "they are: it changes as soon as a check cell has run, in any lesson, even while this page stays open. "
        "`progress()` shows the same table in any lesson.",
        "zh": "## 你的进度\n\n每个检查单元都会把结论记在你自己的工作文件夹里的 `progress.json` 中"
        "（用 `make lab` 打开课程时，就是本笔记本上一级的文件夹）。下表显示的就是这些结论的现状："
        "无论在哪一课运行了检查单元，下表都会随之更新，即使本页一直开着。在任何一课里调用 `progress()` 也能看到同一张表。",
    },
    "home.help": {
        "en": "## Help\n\n- A term you do not know? The [glossary]({glossary}) says what it means and which lesson "
        "teaches it.\n"
        "- Stuck on an exercise? Read the check's message to the end, then the lesson's text just above the exercise; "
        "`hint(\"01.scaled_dot\")` (after `from course_utils import hint`) gives an exercise's two hints, one at a time.\n"
        "- A notebook in a strange state? Kernel › Restart Kernel and Run All Cells.",
        "zh": "## 帮助\n\n- 遇到不认识的术语？[术语表]({glossary})会告诉你它的含义，以及哪一课讲到它。\n"
        "- 练习做不出来？先把检查给出的信息读完，再读练习上方的正文；运行 `from course_utils import hint` 之后，"
        "`hint(\"01.scaled_dot\")` 会给出这道练习的两条提示，一次一条。\n"
        "- 笔记本状态乱了？选择 内核 › 重启内核并运行所有单元格。",
    },
    # Colab (course_teacher.links): the badge beside each lesson's link
    "colab.open": {"en": '<a href="{link}"><img src="{badge}" alt="Open in Colab"/></a>',
                   "zh": '<a href="{link}"><img src="{badge}" alt="在 Colab 中打开"/></a>'},
    "colab.home": {"en": "Open a lesson in Google Colab (its first cell installs the course there; File › Save a copy "
                         "in Drive keeps your work): {links}",
                   "zh": "在 Google Colab 中打开一课（课程的第一个单元会在那里安装课程；用 文件 › 在云端硬盘中保存一份副本 "
                         "留住你的答案）：{links}"},
}


def entry(key):
    """{"en": ..., "zh": ...} of `key`: from this table, the grader's or the learner's."""
    return MESSAGES[key] if key in MESSAGES else grade_messages.entry(key)


def text(lang, key, **fields):
    """The message `key` in `lang`, with `fields` filled in."""
    return entry(key)[lang].format(**fields)


def message(key, **fields):
    """The message `key` in the language set up now (course_utils.i18n.set_language), `fields` filled in."""
    return text(language(), key, **fields)
