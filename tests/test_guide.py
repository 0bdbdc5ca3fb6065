"""The teacher's guide (guide/en.md, guide/zh.md): its generated mistakes lists are up to date,
both languages have the same structure and a part for every lesson, every exercise is named,
every `make` command it gives exists, and the Chinese guide is Chinese."""

import re

import pytest

from course_teacher import guide
from course_teacher.exercises import EXERCISES
from course_teacher import build

LANGS = ("en", "zh")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
#: a word of English prose: two or more letters, lower case after the first, with the punctuation
#: that sticks to words ("(the", "row,"); shapes (B, L) and identifiers (masked_fill) do not count
WORD = re.compile(r"^[(\[\"'“‘]*[A-Za-z][a-z]+[)\]\"'”’,.;:!?]*$")


def read(lang):
    return (guide.GUIDE / f"{lang}.md").read_text(encoding="utf-8")


def prose_lines(text):
    """The lines of `text` outside fenced code blocks, with inline code spans, link targets and
    HTML comments removed."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", line)))
    return lines


def headings(text):
    """[(level, text)] of every markdown heading outside code blocks."""
    found = []
    for line in prose_lines(text):
        match = HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def english_run(line):
    """The longest run of consecutive English words in `line`."""
    best = run = 0
    for token in line.split():
        run = run + 1 if WORD.match(token) else 0
        best = max(best, run)
    return best


def makefile_targets():
    text = (build.ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set()
    for match in re.finditer(r"^([A-Za-z0-9_.\- ]+?)\s*:(?![:=])", text, flags=re.MULTILINE):
        targets.update(match.group(1).split())
    return targets


def lesson_parts(text):
    """{"00": heading text} of the level-2 headings that open a lesson's part ("## 00 · ...")."""
    return {title[:2]: title for level, title in headings(text) if level == 2 and re.match(r"\d\d · ", title)}


@pytest.mark.parametrize("lang", LANGS)
def test_mistakes_blocks_are_up_to_date(lang):
    text = read(lang)
    assert guide.with_blocks(text, lang) == text, f"guide/{lang}.md is out of date: run `make guide`"


@pytest.mark.parametrize("lang", LANGS)
def test_every_mistake_is_listed_with_its_hint(lang):
    text = read(lang)
    for exercise in EXERCISES.values():
        lesson = exercise.id.split(".")[0]
        block = text.split(guide.START.format(lesson=lesson))[1].split(guide.END.format(lesson=lesson))[0]
        assert f"**`{exercise.id}`**" in block
        for mistake in exercise.mistakes:
            assert guide.mistake_line(mistake, lang) in block, (exercise.id, mistake.code)
            assert mistake.hint[lang] in block


def test_a_stale_block_is_found(tmp_path, monkeypatch):
    """--check fails when a block no longer matches the registry, and the rewrite repairs it."""
    for lang in LANGS:
        text = read(lang)
        code = EXERCISES["01.scaled_dot"].mistakes[0].code
        stale = text.replace(f"- `{code}`", f"- `{code}` (stale)", 1)
        assert stale != text
        (tmp_path / f"{lang}.md").write_text(stale, encoding="utf-8")
    monkeypatch.setattr(guide, "GUIDE", tmp_path)
    assert guide.main(["--check"]) == 1
    assert guide.main([]) == 0
    assert guide.main(["--check"]) == 0
    assert all((tmp_path / f"{lang}.md").read_text(encoding="utf-8") == read(lang) for lang in LANGS)


def test_missing_markers_are_refused():
    text = read("en").replace(guide.END.format(lesson="03"), "")
    with pytest.raises(SystemExit, match="mistakes:03"):
        guide.with_blocks(text, "en")


def test_both_languages_have_the_same_structure():
    en, zh = headings(read("en")), headings(read("zh"))
    assert [level for level, _ in en] == [level for level, _ in zh]
    # the lesson parts sit at the same places, for the same lessons
    assert [t[:2] for level, t in en if re.match(r"\d\d · ", t)] == [t[:2] for level, t in zh if re.match(r"\d\d · ", t)]
    # every lesson part has the same sub-headings, in the same order, as every other
    for text in (read("en"), read("zh")):
        parts, current = {}, None
        for level, title in headings(text):
            if level <= 2:
                current = title[:2] if re.match(r"\d\d · ", title) else None
            elif current and level == 3:
                parts.setdefault(current, []).append(title)
        assert len({tuple(subs) for subs in parts.values()}) == 1, parts


@pytest.mark.parametrize("lang", LANGS)
def test_a_part_for_every_lesson(lang):
    text = read(lang)
    parts = lesson_parts(text)
    assert sorted(parts) == sorted(build.lessons())
    for lesson in build.lessons():
        # the lesson's mistakes block sits in its own part
        part = text.split(f"## {parts[lesson]}")[1].split("\n## ")[0]
        assert guide.START.format(lesson=lesson) in part


@pytest.mark.parametrize("lang", LANGS)
def test_every_exercise_is_named_in_the_prose(lang):
    # outside the generated blocks too: in the lesson's table of exercises
    text = re.sub(r"<!-- mistakes:\d\d -->.*?<!-- /mistakes:\d\d -->", "", read(lang), flags=re.DOTALL)
    missing = [exercise_id for exercise_id in EXERCISES if f"`{exercise_id}`" not in text]
    assert not missing


@pytest.mark.parametrize("lang", LANGS)
def test_every_make_command_exists(lang):
    targets = makefile_targets()
    assert {"grade", "guide", "release", "slides", "lab"} <= targets
    named = set(re.findall(r"`make ([A-Za-z0-9_-]+)", read(lang)))
    assert named, "the guide names no make command"
    assert not named - targets, f"not in the Makefile: {sorted(named - targets)}"


def test_no_english_prose_in_the_chinese_guide():
    offending = [line for line in prose_lines(read("zh")) if english_run(line) >= 4]
    assert not offending, offending


def test_the_prose_check_can_fail():
    assert english_run("这一行里混进了 the scores are divided 这样的英文") == 4
    assert english_run("形状 (B, H, L_q, L_k) 与 `masked_fill` 不算英文") < 4
    assert prose_lines("中文 `and this is code` 中文") == ["中文  中文"]
    assert english_run(prose_lines("The guide says this in English.")[0]) >= 4


def test_one_time_per_lesson_in_the_guides_table_its_part_and_the_course_home():
    """The guide's table "The course at a glance" (in class, at home) is the one source: each lesson's
    own part gives the same minutes, in both languages, and the course home shows their sum."""
    times = build.lesson_times()
    assert sorted(times) == sorted(build.lessons())
    zh = read("zh")
    for lesson, (in_class, at_home) in times.items():
        assert re.search(rf"^\| {lesson} · [^|]*\| {in_class} 分钟 \| {at_home} 分钟 \|", zh, re.MULTILINE), lesson
        for lang, pattern in (("en", rf"^{in_class} minutes in class\b.*\b{at_home} minutes at home"),
                              ("zh", rf"^课堂 {in_class} 分钟.*课后 {at_home} 分钟")):
            part = read(lang).split(f"## {lesson} · ", 1)[1].split("\n## ", 1)[0]
            paragraphs = re.sub(r"(?<!\n)\n(?!\n)", " ", part)  # a paragraph's lines joined
            assert re.search(pattern, paragraphs, re.MULTILINE), f"{lang} guide, lesson {lesson}: not {in_class} + {at_home}"
    for lang, path in build.homes():
        home = path.read_text(encoding="utf-8")
        for lesson, (in_class, at_home) in times.items():
            assert f"| {build.duration(lang, in_class + at_home)} |" in home.replace("\\n", "\n"), (lang, lesson)


def test_the_plans_include_lesson_09_with_its_platform_notes():
    """Lesson 09 has a week of its own after 08, a workshop slot, and notes on Triton (Linux only, its
    size, `make triton`) and on running it on a GPU or Colab, in both languages."""
    for lang, plan, workshop in (("en", "### Nine weeks, with lesson 09", "## Two-day workshop"),
                                 ("zh", "### 九周：加上第 09 课", "## 两天工作坊")):
        text = read(lang)
        nine = text.split(plan, 1)[1].split("\n## ", 1)[0]
        assert re.search(r"^\| 9 \| 09 §1–§4 \| 09 §5–§8", nine, re.M), f"{lang}: week 9 is not lesson 09"
        assert "09" in text.split(workshop, 1)[1].split("\n## ", 1)[0], f"{lang}: the workshop never plans 09"
        part = text.split("## 09 · ", 1)[1].split("\n## ", 1)[0]
        for needed in ("Linux", "make triton", "GB", "Colab", "Binder", "GPU", "make bench"):
            assert needed in part, f"{lang}: lesson 09's part never says {needed!r}"
