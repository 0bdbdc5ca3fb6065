"""Speaker notes: what to say on a slide (the lesson's prose), how long, and for an exercise the
question to ask the room. Every label is in the deck's language."""

import math
import re

LABELS = {
    "en": {
        "say": "Say",
        "show": "Show",
        "show_default": "walk through what is on the slide, line by line.",
        "show_code": "run through the code, then read its output aloud.",
        "show_picture": "point at the picture: what each axis and colour means.",
        "continued": "(continued)",
        "exercise": "Exercise",
        "ask": "Ask",
        "ask_text": "which of these will you make?",
        "mistakes": "the mistakes its check names",
        "minutes": "Minutes",
        "about": "about {minutes} min",
        "trimmed": "(shortened for the slide: the notebook has the full output)",
        "colon": ": ",
    },
    "zh": {
        "say": "讲解",
        "show": "演示",
        "show_default": "逐行讲解本页的内容。",
        "show_code": "讲一遍代码，再念出它的输出。",
        "show_picture": "指着图讲：每条坐标轴、每种颜色各表示什么。",
        "continued": "（续）",
        "exercise": "练习",
        "ask": "提问",
        "ask_text": "这些错误里，你会犯哪一个？",
        "mistakes": "检查会指出的错误",
        "minutes": "时长",
        "about": "约 {minutes} 分钟",
        "trimmed": "（为放映而截短，完整输出见笔记本）",
        "colon": "：",
    },
}

#: Speaking rate for the minutes: words a minute (English), characters a minute (Chinese).
WORDS_A_MINUTE = 130
HAN_A_MINUTE = 260
HAN_RE = re.compile(r"[\u4e00-\u9fff]")


def _exercises():
    try:  # the teacher's package: in the repository, not in the student bundle
        from course_teacher.exercises import EXERCISES
    except ImportError:  # pragma: no cover - the bundle has no decks to build
        return {}
    return EXERCISES


def _first_sentence(text):
    match = re.match(r"(.+?[.。:：!?！？])(\s|$)", text.strip())
    return (match.group(1) if match else text.strip())[:220]


def exercise_note(exercise_id, lang):
    """Markdown: the exercise, its check's named mistakes, and the question to ask the room."""
    words = LABELS[lang]
    exercise = _exercises().get(exercise_id)
    colon = words["colon"]
    lines = [f"**{words['exercise']} `{exercise_id}`**{colon}{words['mistakes']}{colon.strip()}", ""]
    if exercise is not None:
        for mistake in exercise.mistakes:
            hint = mistake.hint.get(lang) or mistake.hint.get("en", "")
            lines.append(f"- `{mistake.code}`{colon}{_first_sentence(hint)}")
    lines += ["", f"**{words['ask']}{colon.strip()}** {words['ask_text']}"]
    return "\n".join(lines)


def minutes(say, code_lines=0, pictures=0, outputs=0, exercise=False):
    """An estimate of the minutes a slide takes: its prose spoken, its code and pictures shown."""
    han = len(HAN_RE.findall(say))
    words = len(HAN_RE.sub(" ", say).split())
    spoken = han / HAN_A_MINUTE + words / WORDS_A_MINUTE
    estimate = 0.5 + spoken + 0.08 * code_lines + 0.5 * pictures + 0.25 * outputs + (2.0 if exercise else 0.0)
    return max(1.0, math.ceil(estimate * 2) / 2)


def format_minutes(value):
    return f"{value:g}"


def note_markdown(lang, say, show_kind, exercises, minutes_value):
    """The notes of one slide, as markdown (reveal.js's speaker view shows them)."""
    words = LABELS[lang]
    colon = words["colon"].strip()
    parts = []
    if say.strip():
        parts.append(f"**{words['say']}{colon}** {say.strip()}")
    else:
        parts.append(f"**{words['show']}{colon}** {words['show_' + show_kind]}")
    parts += [exercise_note(exercise_id, lang) for exercise_id in exercises]
    parts.append(f"**{words['minutes']}{colon}** {words['about'].format(minutes=format_minutes(minutes_value))}")
    return "\n\n".join(parts)
