"""The glossary (course_teacher.glossary): its source and the pages and links the build makes of it.

Every link a learner can follow between the lessons, the homes and the glossary must open a file
that exists and land on an anchor that exists, where the learner opens it: in the repository (and on
Binder), in the student zip, and in the work folder `make lab` roots JupyterLab at. Anchors are read
back from the files the way JupyterLab finds them (glossary.anchors_of_markdown); a term links from
its first use in each lesson only; and the translation rule the glossary's "checked" terms make
still fails a translation that drops the term (tests/test_build.py has that check on a lesson).
"""

import json
import posixpath
import re
from urllib.parse import unquote

import nbformat
import pytest

from course_teacher import build, glossary, learner_text, release, sources
from course_utils import learner

LANGUAGES = build.LANGUAGES


def _markdown(path):
    """The markdown a file shows: a notebook's markdown cells, one by one; a page whole."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    return [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"]


def _anchors(path):
    return set().union(*(glossary.anchors_of_markdown(text) for text in _markdown(path)))


def _shown():
    """Every file a learner opens that may link the glossary, and the glossary's pages."""
    found = [path for source in build.lessons().values() for _lang, _solutions, path in build.targets(source)]
    found += [path for _lang, path in build.homes()] + [path for _lang, path in build.glossary_pages()]
    return found


def _links(path):
    """[(target path, fragment)] of the links of `path` that open the glossary or a notebook: the
    files a glossary link goes to and comes back to."""
    found = []
    for text in _markdown(path):
        for target in glossary.relative_links(text):
            file, _, fragment = target.partition("#")
            if file.endswith((".md", ".ipynb")):
                found.append((unquote(file), fragment))
    return found


def test_the_glossary_is_what_its_source_gives_and_names_real_sections():
    assert [str(problem) for problem in build.check_glossary()] == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_glossary_link_opens_a_file_and_an_anchor_that_exist(lang):
    """In the repository (Binder opens it as it is): from every render in `lang`, its home and its
    glossary, each link to the glossary or to a notebook, and the anchor it names."""
    checked = 0
    for path in [p for p in _shown() if lang in p.relative_to(build.NOTEBOOKS).parts]:
        for file, fragment in _links(path):
            target = (path.parent / file).resolve()
            assert target.is_file(), f"{path.relative_to(build.ROOT)} links {file}, which does not exist"
            if fragment:
                assert fragment in _anchors(target), f"{path.relative_to(build.ROOT)} links {file}#{fragment}: no such anchor"
            checked += target.name == glossary.PAGES[lang] or path.name == glossary.PAGES[lang]
    assert checked > 300, f"only {checked} links to or from the {lang} glossary"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_lesson_links_the_glossary_of_its_language_once_per_term(lang):
    terms = {term.key: term for term in glossary.defined(build.glossary_source()[0])}
    for lesson, source in build.lessons().items():
        for path_lang, solutions, path in build.targets(source):
            if path_lang != lang:
                continue
            linker = glossary.Linker(terms.values(), lang, lesson, "")
            keys = []
            for text in _markdown(path):
                for words, target, key in re.findall(r"\[([^\]]*)\]\(([^)#]*)#([a-z0-9-]+)\)", text):
                    if target.endswith(glossary.PAGES[lang]):
                        assert target == build.glossary_link(lang, solutions), (path, target)
                        assert linker.term_of(words.strip("*")) is terms[key], (path, words, key)
                        keys.append(key)
            assert keys, f"{path.relative_to(build.ROOT)} links no glossary entry"
            assert len(keys) == len(set(keys)), f"{path.relative_to(build.ROOT)} links a term twice"
    for _lang, home in build.homes():
        if _lang == lang:
            assert (glossary.PAGES[lang], "") in _links(home), "the home does not link the glossary beside it"


def test_each_entry_links_the_section_that_teaches_it_in_its_own_language():
    for lang, page in build.glossary_pages():
        text = page.read_text(encoding="utf-8")
        for term in glossary.defined(build.glossary_source()[0]):
            entry = text.split(f'<a id="{term.key}"></a>', 1)[1].split("\n### ", 1)[0]
            assert term.definition[lang] in entry and term.title["en" if lang == "zh" else "zh"] in entry
            notebook = build.notebook_name(build.lessons()[term.lesson], lang)
            assert f"]({notebook}" in entry, (lang, term.key)
        other = "zh" if lang == "en" else "en"
        assert f"(../{other}/{glossary.PAGES[other]})" in text


def _lab_path(folder, link):
    """Where JupyterLab, rooted at the work folder, opens `link` from a file in `folder` (relative to
    the root): the path joined and normalised, with what climbs above the root resolved at the root."""
    joined = posixpath.normpath(posixpath.join(folder, link))
    while joined.startswith("../") or joined == "..":
        joined = joined[3:] if joined.startswith("../") else ""
    return joined


def test_in_the_learners_work_folder_every_link_opens_what_it_names(tmp_path):
    """`make lab` copies the lessons and the homes into work/{en,zh}/ and the glossary beside them
    (learner.sync_assets), and roots JupyterLab at work/: every link of a lesson, a home or a
    glossary opens a file of work/, at an anchor it holds."""
    work = tmp_path / "work"
    learner.copy_course(work)
    learner.sync_assets(work)
    checked = 0
    for lang in LANGUAGES:
        for path in sorted((work / lang).glob("*.ipynb")) + [work / lang / glossary.PAGES[lang]]:
            for file, fragment in _links(path) + [(t, "") for t in re.findall(r"\]\((\.\./\.\./images/[^)]+)\)",
                                                                            "\n".join(_markdown(path)))]:
                target = work / _lab_path(lang, file)
                assert target.is_file(), f"work/{lang}/{path.name} links {file}: JupyterLab opens {target}, missing"
                if fragment:
                    assert fragment in _anchors(target), f"work/{lang}/{path.name}: no anchor {file}#{fragment}"
                checked += 1
    assert checked > 600


def test_the_student_zip_holds_everything_the_glossary_links_and_is_linked_from():
    files = set(release.student_files())
    for path in _shown():
        name = path.relative_to(build.ROOT).as_posix()
        if name.startswith("notebooks/solutions/"):
            continue
        assert name in files, f"the student zip lacks {name}"
        for file, _fragment in _links(path):
            assert posixpath.normpath(posixpath.join(posixpath.dirname(name), file)) in files, (name, file)


# ----------------------------------------------------------------------------- the source

TOML = '''
[[term]]
en = "attention"
zh = "注意力"
checked = true
lesson = "01"
section = "1. Queries"
definition.en = "What a query does."
definition.zh = "查询做的事。"

[[term]]
en = "self-attention"
zh = "自注意力"
lesson = "01"
section = "1. Queries"
definition.en = "Attention within one sequence."
definition.zh = "同一序列内部的注意力。"

[[term]]
en = "key"
zh = "键"
lesson = "01"
section = "1. Queries"
not_words.zh = ["关键"]
unlinked = ["02"]
definition.en = "What a query is compared with."
definition.zh = "查询拿来比较的对象。"

[[term]]
en = "query"
zh = "查询"
lesson = "01"
section = "1. Queries"
definition.en = "What asks."
definition.zh = "提问的一方。"

[[term]]
en = "exercise"
zh = "练习"
checked = true

[[avoid]]
en = "token"
use = "词元"
avoid = "令牌"
'''


def _terms(text=TOML):
    return glossary.parse(text)[0]


def test_the_source_is_read_with_its_defaults():
    terms, avoid = glossary.parse(TOML)
    attention, self_attention, key, query, exercise = terms
    assert attention.checked and attention.key == "attention" and attention.forms == {"en": ["attention"], "zh": ["注意力"]}
    assert self_attention.key == "self-attention" and not self_attention.checked
    assert key.not_words == {"en": [], "zh": ["关键"]} and key.unlinked == ("02",)
    assert not exercise.defined and exercise.checked and [a.avoid for a in avoid] == ["令牌"]
    assert glossary.without_notes("eval mode (`model.eval()`)") == "eval mode"
    assert glossary.without_notes("因果（前瞻）掩码") == "因果掩码"
    assert glossary.slug("2. View or copy?") == "view-or-copy" and glossary.slug("3. `permute` and `transpose`") == "permute-and-transpose"


@pytest.mark.parametrize("broken, says", [
    ('[[term]]\nen = "a"\nzh = "甲"\ncolour = "red"\n', "unknown keys ['colour']"),
    ('[[term]]\nen = "a"\nzh = "甲"\nlesson = "01"\n', "only mean something with a `definition`"),
    ('[[term]]\nen = "a"\nzh = "甲"\ndefinition.en = "x"\n', "needs `definition.en` and `definition.zh`"),
    ('[[term]]\nen = "a"\nzh = "甲"\ndefinition.en = "x"\ndefinition.zh = "y"\nsection = "s"\n', "needs `lesson`"),
    (TOML + '\n[[term]]\nen = "attention!"\nzh = "注"\nkey = "attention"\nlesson = "01"\nsection = "s"\n'
     'definition.en = "x"\ndefinition.zh = "y"\n', "two defined terms have the key 'attention'"),
    ("[[term]\n", "is not TOML"),
])
def test_a_broken_source_is_named(broken, says):
    with pytest.raises(glossary.GlossaryError, match=re.escape(says)):
        glossary.parse(broken)


def test_a_term_taught_in_a_section_that_does_not_exist_is_a_problem():
    outline = [("# Lesson", {"en": "Lesson", "zh": "课", "level": 1}), ("1. Queries", {"en": "1. Queries", "zh": "1. 查询", "level": 2})]
    assert glossary.problems(_terms(), {"01": outline, "02": outline}) == []
    found = glossary.problems(_terms(TOML.replace('section = "1. Queries"\ndefinition.en = "What asks."', 'section = "1. Queries!"\ndefinition.en = "What asks."')),
                              {"01": outline, "02": outline})
    assert found == ["the term 'query' is taught in lesson 01's section '1. Queries!', which is not one of its English "
                     "headings (write it as the heading is written, without the #s)"]
    assert "lesson 02, which does not exist" in glossary.problems(_terms(), {"01": outline})[0]


# ----------------------------------------------------------------------------- linking

def _link(text, lang="en", lesson="03", terms=None):
    return glossary.Linker(terms or _terms(), lang, lesson, "glossary.md")(text)


def test_the_first_use_links_and_later_uses_do_not():
    assert _link("Attention here. Attention again.") == "[Attention](glossary.md#attention) here. Attention again."
    linker = glossary.Linker(_terms(), "en", "03", "glossary.md")
    assert linker("one query") == "one [query](glossary.md#query)"
    assert linker("two queries, three keys") == "two queries, three [keys](glossary.md#key)"  # once per lesson


def test_the_longest_term_wins_and_holds_its_words():
    assert _link("self-attention, then attention") == (
        "[self-attention](glossary.md#self-attention), then [attention](glossary.md#attention)")
    assert _link("self-attention twice: self-attention") == "[self-attention](glossary.md#self-attention) twice: self-attention"
    assert _link("自注意力和注意力", "zh") == "[自注意力](glossary.md#self-attention)和[注意力](glossary.md#attention)"


def test_words_that_are_not_the_term_are_left_alone():
    assert _link("a keyboard, a turnkey, attention-like") == "a keyboard, a turnkey, attention-like"
    assert _link("关键的键", "zh") == "关键的[键](glossary.md#key)"
    assert _link("the keys", lesson="02") == "the keys"  # `unlinked` in lesson 02


@pytest.mark.parametrize("protected", [
    "`query`", "```python\nquery = 1\n```", "$query$", "$$\\mathrm{query}$$", "## The query", "[a query](x.md)",
    "![query](../../images/q.svg)", "https://example.com/query", "<a href='query'>x</a>", "<!-- query -->",
])
def test_no_link_inside_code_math_headings_links_pictures_or_addresses(protected):
    assert _link(protected) == protected
    assert _link(protected + "\n\nthe query") == protected + "\n\nthe [query](glossary.md#query)"


def test_a_term_wrapped_across_lines_and_in_emphasis():
    terms = _terms(TOML.replace('en = "key"', 'en = "key value"').replace('zh = "键"', 'zh = "键值"'))
    assert _link("the key\nvalue", terms=terms) == "the [key\nvalue](glossary.md#key-value)"
    # emphasis that is exactly the term goes inside the link, so that it stays emphasis
    assert _link("即**注意力**（式 4）", "zh") == "即[**注意力**](glossary.md#attention)（式 4）"
    assert _link("a **query**.") == "a [**query**](glossary.md#query)."
    # a term at one end of longer emphasis is left for a later use
    assert _link("用**注意力机制**和注意力", "zh") == "用**注意力机制**和[注意力](glossary.md#attention)"


def test_the_taught_sections_get_their_anchor_in_both_languages():
    source = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson\n\n## 1. Queries\n\ntext", metadata={"tags": ["lang-en"]}),
        nbformat.v4.new_markdown_cell("# 课\n\n## 1. 查询\n\n正文", metadata={"tags": ["lang-zh"]}),
    ])
    anchors = glossary.section_anchors(source.cells, build.tags, _terms(), "01")
    assert anchors == {0: {1: "queries"}, 1: {1: "queries"}}
    assert glossary.anchor_headings(source.cells[1].source, anchors[1]) == '# 课\n\n## 1. 查询<a id="queries"></a>\n\n正文'
    # JupyterLab's own id of the heading is unchanged (the anchor adds no text), and the anchor is found
    assert glossary.anchors_of_markdown('## 1. Queries<a id="queries"></a>') == {"queries", "1.-Queries"}
    assert glossary.section_anchors(source.cells, build.tags, _terms(), "02") == {}


def test_a_render_links_its_own_glossary_and_the_slides_drop_the_links():
    source = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson\n\n## 1. Queries\n\nthe query", metadata={"tags": ["lang-en"]}),
        nbformat.v4.new_markdown_cell("# 课\n\n## 1. 查询\n\n查询", metadata={"tags": ["lang-zh"]}),
    ])
    student = build.render(source, "zh", False, terms=_terms())
    solution = build.render(source, "en", True, terms=_terms())
    assert student.cells[0].source.endswith("[查询](术语表.md#query)")
    assert solution.cells[0].source.endswith("the [query](../../en/glossary.md#query)")
    assert glossary.plain(solution.cells[0].source) == "# Lesson\n\n## 1. Queries\n\nthe query"


def test_the_page_groups_the_entries_by_lesson_and_links_their_sections():
    outlines = {"01": {"notebook": "01_x.ipynb", "title": {"en": "Basics", "zh": "基础"},
                       "outline": [("Basics", {"en": "Basics", "zh": "基础", "level": 1}),
                                   ("1. Queries", {"en": "1. Queries", "zh": "1. 查询", "level": 2})]}}
    page = glossary.page(_terms(), "zh", outlines)
    assert '## <a id="lesson-01"></a>01 · 基础' in page and '### <a id="key"></a>键' in page
    assert "**英文**：key　**讲解**：[01 · 1. 查询](01_x.ipynb#queries)" in page
    assert "练习" not in page  # a term without a definition has no entry
    assert glossary.anchors_of_markdown(page) >= {"attention", "self-attention", "key", "query", "lesson-01"}
    table = glossary.table(*glossary.parse(TOML))
    assert "| attention | 注意力 | checked |" in table and "| key | 键 | |" in table and "| token | 词元 | 令牌 |" in table


def test_the_check_fails_when_a_page_is_stale(tmp_path, monkeypatch):
    for name, path in [(name, getattr(build, name).relative_to(build.ROOT)) for name in ("ROOT", "NOTEBOOKS", "SOURCES")]:
        monkeypatch.setattr(build, name, tmp_path / path)
        monkeypatch.setattr(sources, name, tmp_path / path)  # the lessons' table below the build
    build.SOURCES.mkdir(parents=True)
    (build.SOURCES / glossary.SOURCE).write_text('[[term]]\nen = "exercise"\nzh = "练习"\nchecked = true\n', encoding="utf-8")
    assert {p.name for p in build.write_glossary()} == {"GLOSSARY.md", *glossary.PAGES.values()}
    assert build.check_glossary() == []
    (build.SOURCES / glossary.SOURCE).write_text('[[term]]\nen = "exercise"\nzh = "习题"\nchecked = true\n', encoding="utf-8")
    assert ["GLOSSARY.md: differs" in str(p) for p in build.check_glossary()] == [True]  # no entry changed
    assert build.glossary() == [("exercise", "习题")]


def test_a_definition_keeps_the_translation_rule_of_the_checked_terms(tmp_path, monkeypatch):
    for name, path in [(name, getattr(build, name).relative_to(build.ROOT)) for name in ("ROOT", "NOTEBOOKS", "SOURCES")]:
        monkeypatch.setattr(build, name, tmp_path / path)
        monkeypatch.setattr(sources, name, tmp_path / path)  # the lessons' table below the build
    build.SOURCES.mkdir(parents=True)
    (build.SOURCES / glossary.SOURCE).write_text(
        '[[term]]\nen = "tensor"\nzh = "张量"\nchecked = true\n\n[[term]]\nen = "view"\nzh = "视图"\nlesson = "00"\n'
        'section = "2. View or copy?"\ndefinition.en = "A tensor over the storage of another."\n'
        'definition.zh = "与另一个数组共用存储的数组。"\n', encoding="utf-8")
    found = [str(p) for p in build.check_glossary()]
    assert any("the definition of 'view'" in p and "'张量' is missing" in p for p in found), found


# ----------------------------------------------------------------------------- a word not in the glossary's sense

def test_a_word_marked_as_not_the_term_is_not_linked_and_the_render_keeps_only_the_word():
    marked = "the [values]{.not-term} of F.sdpa, then the values"
    assert _link(marked) == "the [values]{.not-term} of F.sdpa, then the values"  # "value" is not a term of TOML
    terms = _terms(TOML.replace('en = "query"', 'en = "value"').replace('zh = "查询"', 'zh = "值"'))
    linked = _link(marked, terms=terms)
    assert linked == "the [values]{.not-term} of F.sdpa, then the [values](glossary.md#value)"
    assert glossary.unmark(linked) == "the values of F.sdpa, then the [values](glossary.md#value)"
    assert glossary.plain(linked) == "the values of F.sdpa, then the values"
    source = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson\n\nthe [values]{.not-term} and the value", metadata={"tags": ["lang-en"]}),
        nbformat.v4.new_markdown_cell("# 课\n\n输出[值]{.not-term}和值", metadata={"tags": ["lang-zh"]}),
    ])
    assert build.render(source, "en", False, terms=terms).cells[0].source.endswith("the values and the [value](glossary.md#value)")
    assert build.render(source, "zh", False, terms=terms).cells[0].source.endswith("输出值和[值](术语表.md#value)")


def test_a_marked_word_asks_for_no_translation_of_a_checked_term():
    checked = [("attention", "注意力")]
    assert build.glossary_problems("01", "cell", "the attention", "这里", checked)  # the rule holds
    assert not build.glossary_problems("01", "cell", "the [attention]{.not-term} span of a child", "孩子的专注时间", checked)


# ----------------------------------------------------------------------------- the avoid list, wherever a learner reads Chinese

AVOID = '''
[[avoid]]
en = "rolling buffer"
use = "滚动缓冲区"
avoid = "滚动缓存"
words = ["滚动缓存"]

[[avoid]]
en = "masked"
use = "遮住"
avoid = "遮蔽"
words = ["遮蔽"]
not_words = ["全遮蔽行"]

[[avoid]]
en = "learning rate"
use = "学习率"
avoid = "步长（步长是 stride）"
'''


def test_the_avoid_list_names_its_words_and_the_longer_words_that_are_right():
    avoid = glossary.parse(AVOID)[1]
    assert [(row.words, row.not_words) for row in avoid] == [(("滚动缓存",), ()), (("遮蔽",), ("全遮蔽行",)), ((), ())]
    with pytest.raises(glossary.GlossaryError, match="`words` must be a list of words"):
        glossary.parse('[[avoid]]\nen = "a"\nuse = "甲"\navoid = "乙"\nwords = "乙"\n')
    with pytest.raises(glossary.GlossaryError, match="may have"):
        glossary.parse('[[avoid]]\nen = "a"\nuse = "甲"\navoid = "乙"\ncolour = "red"\n')


def test_a_word_to_avoid_is_found_outside_the_words_that_are_right():
    avoid = glossary.parse(AVOID)[1]
    assert [word for word, _ in glossary.avoided("滑动窗口与滚动缓存；被遮蔽的键", avoid)] == ["滚动缓存", "遮蔽"]
    assert glossary.avoided("全遮蔽行的输出是 0；步长为 (4, 1)", avoid) == []  # a longer word; a row without words
    assert glossary.avoided("这里的[遮蔽]{.not-term}是另一回事", avoid) == []


def test_an_english_term_left_in_chinese_text_is_found_but_not_a_gloss_code_or_a_name():
    terms = _terms(TOML + '\n[[term]]\nen = "materialised attention"\nzh = "完整矩阵版注意力"\nlesson = "01"\n'
                   'section = "1. Queries"\nforms.en = ["materialised attention", "materialised version"]\n'
                   'definition.en = "x"\ndefinition.zh = "甲"\n')
    found = lambda text, names=frozenset(): [word for word, _ in glossary.untranslated(text, terms, names)]
    assert sorted(found("materialised 的内存；每个 query 一行")) == ["materialised", "query"]
    assert found("每个查询（query）一行；`query @ key`；$query$") == []  # a gloss, code, math
    assert found("与 query 同形状", names={"query"}) == []  # the code's argument
    assert found("x.query() 与 query=1") == []  # a name in code
    assert found("Ring Attention 把序列分到多台设备上；《Attention Is All You Need》") == []  # names
    assert found("注意力和自注意力") == []


@pytest.mark.slow  # (`make quick` runs `build --check` itself, which reads these texts so: 56 s of quick's tests)
def test_every_chinese_text_a_learner_reads_keeps_the_glossary():
    """The lessons, the package's messages and widget labels, the hints, the mistakes a check names,
    the slides' notes, the READMEs and the glossary's definitions: no word to avoid, no term left in
    English (build --check runs the same)."""
    terms = build.glossary_source()[0]
    entries = learner_text.texts(build.ROOT, build.lessons(), build.tags, build.read_source, terms)
    places = {where.split(":")[0].split(",")[0] for where, _text in entries}
    assert {"course_utils/i18n.py", "course_utils/exercises/hints.py", "course_teacher/slides/notes.py",
            "README.md", "README.student.md", "lesson 08", glossary.SOURCE} <= places, places
    assert any(place.startswith("course_utils/widgets/") for place in places)
    assert any(place.startswith("course_teacher/exercises/l0") for place in places)
    assert [str(problem) for problem in build.check_learner_text()] == []
