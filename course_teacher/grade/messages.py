"""The grader's messages, in English and Chinese: what it writes into a learner's feedback and its own verdicts
(``grade.*``: grader.py, gradebook.py, submission.py). Here, in the grader's package, because the grader's wheel
ships this package alone beside the learner's (course_teacher.platforms).

``text`` and ``message`` read this table, then the learner's (course_utils.i18n): the feedback quotes the check's
verdicts, which are the learner's messages. A key is in one table only (tests/test_messages_zh.py).
"""

from course_utils import i18n
from course_utils.i18n import language

MESSAGES = {
    # the teacher's grader (course_teacher.grade): feedback files and its own verdicts
    "grade.title": {"en": "Feedback on {notebook}", "zh": "{notebook} 的反馈"},
    "grade.summary": {
        "en": "Student: {student} · lesson {lesson} · score {score} / {max_score}",
        "zh": "学生：{student} · 第 {lesson} 课 · 得分 {score} / {max_score}",
    },
    "grade.notes": {"en": "Notes", "zh": "说明"},
    "grade.cell_error": {
        "en": "Cell {cell} (`{first}`) raised {error}: {text} The grader skipped it and went on.",
        "zh": "第 {cell} 个单元格（`{first}`）抛出了 {error}：{text} 评分程序跳过了它，继续往下运行。",
    },
    "grade.cell_time_limit": {
        "en": "Cell {cell} (`{first}`) ran for more than {seconds:g} s and was stopped; the grader skipped it and went on.",
        "zh": "第 {cell} 个单元格（`{first}`）运行超过 {seconds:g} 秒，已被中止；评分程序跳过了它，继续往下运行。",
    },
    "grade.cell_died": {
        "en": "The notebook's kernel died while cell {cell} (`{first}`) ran (os._exit, a crash, or more than "
        "{memory} MB of memory). The grader started a fresh kernel, ran the cells before it again, and skipped it.",
        "zh": "第 {cell} 个单元格（`{first}`）运行时，笔记本的内核崩溃了（os._exit、程序崩溃，或内存超过 {memory} MB）。"
        "评分程序启动了新的内核，重新运行了它之前的单元格，并跳过了它。",
    },
    "grade.found_by_name": {
        "en": "The exercise cell of {exercise} has lost its metadata; the grader took the cell that defines `{name}`.",
        "zh": "{exercise} 的练习单元格丢失了元数据；评分程序改用定义 `{name}` 的那个单元格。",
    },
    "grade.printed": {
        "en": "{exercise}: your function printed {count} characters while it was checked; a check shows only the "
        "first {limit}.",
        "zh": "{exercise}：检查时你的函数打印了 {count} 个字符；检查只显示前 {limit} 个。",
    },
    "grade.missing_cell": {
        "en": "✘ {exercise}: the notebook has no exercise cell for it any more (deleted, or its metadata lost), "
        "and no cell defines `{name}`. The grader finds your function by that cell: copy the cell back from the "
        "course's notebook and write your answer in it.",
        "zh": "✘ {exercise}：笔记本里已经没有这道练习的单元格（被删除，或丢失了元数据），也没有单元格定义 `{name}`。"
        "评分程序要靠这个单元格找到你的函数：请从课程笔记本中把它复制回来，再把答案写进去。",
    },
    "grade.renamed": {
        "en": "✘ {exercise}: the exercise cell defines {found}, but no longer `{name}`. The grader checks the "
        "function by the name the exercise gave it: rename it back to `{name}`.",
        "zh": "✘ {exercise}：练习单元格定义了 {found}，却不再定义 `{name}`。评分程序按练习给定的名字检查函数："
        "请把它改回 `{name}`。",
    },
    "grade.deleted": {
        "en": "✘ {exercise}: the exercise cell no longer defines the function `{name}`. Write your answer in it, "
        "under that name.",
        "zh": "✘ {exercise}：练习单元格不再定义函数 `{name}`。请在这个函数里、用这个名字写出你的答案。",
    },
    "grade.missing_function": {
        "en": "✘ {exercise}: after its cell ran, the notebook has no `{name}` (does a later line delete it?).",
        "zh": "✘ {exercise}：它的单元格运行之后，笔记本里没有 `{name}`（是不是后面某一行把它删掉了？）。",
    },
    "grade.syntax_error": {
        "en": "⚠ {exercise}: the exercise cell is not valid Python (line {line}: {text}). Fix it so that the cell runs.",
        "zh": "⚠ {exercise}：练习单元格不是合法的 Python 代码（第 {line} 行：{text}）。请修改，让这个单元格能运行。",
    },
    "grade.cell_failed": {
        "en": "⚠ {exercise}: the exercise cell raised {error} when it ran: {text}",
        "zh": "⚠ {exercise}：练习单元格运行时抛出了 {error}：{text}",
    },
    "grade.cell_timeout": {
        "en": "⏱️ {exercise}: the exercise cell ran for more than {seconds:g} s and was stopped.",
        "zh": "⏱️ {exercise}：练习单元格运行超过 {seconds:g} 秒，已被中止。",
    },
    "grade.kernel_died_cell": {
        "en": "⚠ {exercise}: the notebook's kernel died while the exercise cell ran (os._exit, a crash, or more "
        "than {memory} MB of memory).",
        "zh": "⚠ {exercise}：练习单元格运行时，笔记本的内核崩溃了（os._exit、程序崩溃，或内存超过 {memory} MB）。",
    },
    "grade.kernel_died": {
        "en": "⚠ {exercise}: the notebook's kernel died while your function was checked (os._exit, a crash, or "
        "more than {memory} MB of memory).",
        "zh": "⚠ {exercise}：检查你的函数时，笔记本的内核崩溃了（os._exit、程序崩溃，或内存超过 {memory} MB）。",
    },
    "grade.collect_timeout": {
        "en": "⏱️ {exercise}: checking your function took more than {seconds:g} s in all and was stopped (a step "
        "the per-call time limit cannot interrupt, such as one very long torch operation?).",
        "zh": "⏱️ {exercise}：检查你的函数总共用了超过 {seconds:g} 秒，已被中止（是不是有一步单次调用的时间限制"
        "打断不了，比如一个极其耗时的 torch 运算？）。",
    },
    "grade.no_result": {
        "en": "⚠ {exercise}: the grader got no usable results back from the notebook's kernel ({why}). Does a "
        "cell change Python, torch or the course's package so that functions can no longer be checked?",
        "zh": "⚠ {exercise}：评分程序没能从笔记本的内核取回可用的结果（{why}）。是不是有单元格改动了 Python、"
        "torch 或课程的包，使函数无法再被检查？",
    },
    "grade.out_of_time": {
        "en": "⏱️ {exercise}: not checked: the notebook used up the {seconds:g} s the grader gives one notebook "
        "before it got here.",
        "zh": "⏱️ {exercise}：未检查：还没运行到这里，笔记本就用完了评分程序给每个笔记本的 {seconds:g} 秒。",
    },
    "grade.gave_up": {
        "en": "⚠ {exercise}: not checked: the notebook's kernel died {count} times, and the grader stopped "
        "starting new ones.",
        "zh": "⚠ {exercise}：未检查：笔记本的内核已经崩溃 {count} 次，评分程序不再重新启动。",
    },
    "grade.no_kernel": {
        "en": "⚠ {exercise}: not checked: the grader could not start a kernel for this notebook.",
        "zh": "⚠ {exercise}：未检查：评分程序无法为这个笔记本启动内核。",
    },
    "grade.unreadable": {
        "en": "⚠ {exercise}: not checked: the grader cannot read the file as a notebook ({error}).",
        "zh": "⚠ {exercise}：未检查：评分程序无法把这个文件当作笔记本读取（{error}）。",
    },
    "grade.unknown_lesson": {
        "en": "⚠ The grader cannot tell which lesson this notebook belongs to: it has no exercise cells, and its "
        "file name does not start with a lesson number such as 00_.",
        "zh": "⚠ 评分程序无法判断这个笔记本属于哪一课：它没有练习单元格，文件名也不是以 00_ 这样的课程编号开头。",
    },
    "grade.forbidden_code": {
        "en": "✘ {exercise}: 0 points. Cell {cell} (`{first}`) uses `{name}`, which this exercise forbids (its text "
        "says so): write the answer yourself, and keep such calls out of the notebook you hand in.",
        "zh": "✘ {exercise}：0 分。第 {cell} 个单元格（`{first}`）用到了本题禁止使用的 `{name}`（题目中已说明）："
        "请自己写出答案，交上来的笔记本里也不要留着这样的调用。",
    },
    "grade.process_died": {
        "en": "⚠ {exercise}: not checked: the grader's own process for this notebook stopped without a result "
        "(out of memory?). Please tell your teacher.",
        "zh": "⚠ {exercise}：未检查：评分程序处理这个笔记本的进程没有给出结果就停止了（可能是内存不足）。请告知老师。",
    },
    "grade.copy": {
        "en": "🔎 {exercise}: 0 points, for the teacher's review. The function in cell {cell} is a copy of {source} "
        "(with its names, comments, docstring and layout changed, or statements added or reordered, at most): "
        "a copy solves nothing. If you wrote it yourself, ask your teacher to look at it.",
        "zh": "🔎 {exercise}：0 分，留待教师复核。第 {cell} 个单元格里的函数是{source}的副本"
        "（至多改了名字、注释、文档字符串和排版，或增添、调换了几条语句）：照抄不算解题。如果确实是你自己写的，请找老师看一看。",
    },
    "grade.copy.package": {"en": "the course's `{name}`", "zh": "课程包中 `{name}`"},
    "grade.changed_attribute": {"en": "a torch attribute", "zh": "torch 的某个属性"},
    "grade.copy.reference": {"en": "the course's reference solution of {exercise}", "zh": "课程对 {exercise} 的参考实现"},
    "grade.for_review": {
        "en": "🔎 {exercise}: 0 points, for the teacher's review. Cell {cell} (`{first}`) holds `{code}`: code that "
        "runs what the grader cannot read without running it, or changes a library or the grading machinery. "
        "Ask your teacher to look at it.",
        "zh": "🔎 {exercise}：0 分，留待教师复核。第 {cell} 个单元格（`{first}`）里有 `{code}`：这类代码要么会运行"
        "评分程序不运行就读不懂的内容，要么会改动库或评分机制。请找老师看一看。",
    },
    "grade.reason.link": {
        "en": "it is a symbolic link, and the grader reads no notebook through a link",
        "zh": "它是一个符号链接，评分程序不会通过链接读取笔记本",
    },
    "grade.reason.special": {
        "en": "it is not a regular file (a pipe, a device, a socket or a folder)",
        "zh": "它不是普通文件（而是管道、设备、套接字或文件夹）",
    },
    "grade.reason.too_large": {
        "en": "it is larger than {limit} MB",
        "zh": "它超过了 {limit} MB",
    },
    "grade.reason.not_json": {
        "en": "it is not a JSON text file",
        "zh": "它不是 JSON 文本文件",
    },
    "grade.reason.not_notebook": {
        "en": "it is JSON, but not a Jupyter notebook",
        "zh": "它是 JSON 文件，但不是 Jupyter 笔记本",
    },
    "grade.reason.unreadable": {
        "en": "the file cannot be opened or read",
        "zh": "无法打开或读取这个文件",
    },
    "grade.mismatch.name": {
        "en": "its exercise cells are lesson {cells}'s, but its file name says lesson {name}",
        "zh": "它的练习单元格属于第 {cells} 课，文件名却是第 {name} 课",
    },
    "grade.mismatch.assignment": {
        "en": "its exercise cells are lesson {cells}'s, but this assignment is lesson {assignment}",
        "zh": "它的练习单元格属于第 {cells} 课，本次作业却是第 {assignment} 课",
    },
    "grade.mismatch.both": {
        "en": "its exercise cells are lesson {cells}'s, but its file name says lesson {name} and this assignment is "
        "lesson {assignment}",
        "zh": "它的练习单元格属于第 {cells} 课，文件名却是第 {name} 课，本次作业是第 {assignment} 课",
    },
    "grade.mismatch.name_assignment": {
        "en": "its file name says lesson {name}, but this assignment is lesson {assignment}",
        "zh": "它的文件名是第 {name} 课，本次作业却是第 {assignment} 课",
    },
    "grade.wrong_lesson": {
        "en": "✘ {exercise}: not checked: this notebook is not lesson {lesson}'s ({why}). Hand in the lesson {lesson} "
        "notebook, under its own file name.",
        "zh": "✘ {exercise}：未检查：这个笔记本不是第 {lesson} 课的（{why}）。请提交第 {lesson} 课的笔记本，并保留它原来的文件名。",
    },
    "grade.not_in_key": {
        "en": "⚠ This grader grades lesson {lessons}; this notebook is lesson {lesson}'s. Hand it in where lesson "
        "{lesson} is graded.",
        "zh": "⚠ 这个评分程序只评第 {lessons} 课；这个笔记本属于第 {lesson} 课。请把它交到第 {lesson} 课的作业里。",
    },
    "grade.grader_error": {
        "en": "⚠ {exercise}: the grader itself failed on this notebook ({error}); please tell the course's maintainers.",
        "zh": "⚠ {exercise}：评分程序自身在处理这个笔记本时出错（{error}）；请告知课程维护者。",
    },
}


def entry(key):
    """{"en": ..., "zh": ...} of `key`, from this table or the learner's (course_utils.i18n.MESSAGES)."""
    return MESSAGES[key] if key in MESSAGES else i18n.MESSAGES[key]


def text(lang, key, **fields):
    """The message `key` in `lang`, with `fields` filled in (the grader's threads each write in their own)."""
    return entry(key)[lang].format(**fields)


def message(key, **fields):
    """The message `key` in the language set up now (course_utils.i18n.set_language), `fields` filled in."""
    return text(language(), key, **fields)
