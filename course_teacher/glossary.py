"""The course's glossary: one source, notebooks/source/glossary.toml, and what the build makes of it.

The source lists every term of the course, one ``[[term]]`` table each, in both languages::

    [[term]]
    en = "attention weights"                  # the English term, as the translation table shows it
    zh = "注意力权重"                          # the Chinese term
    checked = true                            # the translation rule that `build --check` enforces
    lesson = "01"                             # where it is taught: a lesson
    section = "1. Queries, keys and values"   # and one of its English headings, as written
    definition.en = "..."                     # one or two sentences in each language
    definition.zh = "..."

A term without a definition is a rule for translators only: it has a row in the translation table
and no entry in the learner's glossary. Optional keys of a defined term: ``key``, its anchor
(default: made from its first English form); ``title.en`` and ``title.zh``, the heading of its entry
(default: ``en`` and ``zh`` without their notes in parentheses); ``forms.en`` and ``forms.zh``, the
words that link to the entry from a lesson (default: the title's parts, split at its commas; an
English form also matches its plural); ``not_words.en`` and ``not_words.zh``, longer words that
hold a form and mean something else, never linked ("关键" for "键"); ``unlinked``, the lessons where
the forms mean something else, so that they are not linked there. The ``[[avoid]]`` tables are the words not to use
(``en``, ``use``, ``avoid``), and optionally ``words``, the Chinese strings that the check finds wherever a learner
reads Chinese (``avoided``), and ``not_words``, longer words that hold one and are right ("全遮蔽行" for "遮蔽").

A source marks a word that is not the glossary's sense as ``[values]{.not-term}`` (``NOT_TERM``):
the linker does not link it, the checks do not read it as the term or as a word to avoid, and the
render keeps only the word (``unmark``). "输出值" in a lesson is numbers, not the values of attention.

What the build makes of it (``python -m course_teacher.build`` writes the files; ``--check`` fails
when they are stale, and on a term whose lesson or section does not exist):

- GLOSSARY.md, the translation table, for translators and maintainers: every term in both
  languages. A row marked checked is a rule: an English markdown cell that uses the English term
  (outside code and math) must be followed by a Chinese cell that uses the Chinese term.
- notebooks/en/glossary.md and notebooks/zh/术语表.md (``PAGES``), the learner's glossary, one
  per language beside the lessons it links: every defined term, lesson by lesson, with its
  definition, its name in the other language and a link to the section that teaches it.
- The links in the lessons. In each rendered lesson the first use of each defined term in its
  markdown (outside code, math, headings, links and pictures) links to the term's entry
  (``Linker``): once per lesson and language, however often the term comes back. Each section a
  term is taught in carries an anchor in all four renders of its lesson (``section_anchors``).

Anchors. JupyterLab gives a rendered heading an id, its text with every space made "-", and opens
a link ``x.md#id`` or ``x.ipynb#id`` at the element of that id: a heading's, or an HTML element's
``id`` (its sanitizer keeps it as ``data-jupyter-id``). But it looks the fragment up as the browser
hands it over, percent-encoded, so a heading with a Chinese character in it can never be found
(JupyterLab 4.6), nor one whose math a markdown cell reads as a formula. So every anchor here is
explicit and ASCII, ``<a id="..."></a>``, and the same in both languages: a term's entry in both
pages, and a taught section's heading in all four renders (a lesson's title gets none: the link
opens the lesson at its top).
"""

import re
import tomllib
from dataclasses import dataclass, field

from course_utils.file_names import GLOSSARIES

#: The source's name in notebooks/source/, and the learner's page's beside the lessons, in each language.
SOURCE, PAGES = "glossary.toml", GLOSSARIES
LANGUAGES = ("en", "zh")
#: The keys a [[term]] table may have, and an [[avoid]] table.
TERM_KEYS = {"en", "zh", "checked", "key", "title", "definition", "lesson", "section", "forms", "not_words", "unlinked"}
AVOID_KEYS = {"en", "use", "avoid"}
AVOID_OPTIONAL_KEYS = {"words", "not_words"}
#: An anchor this module writes, and a link to a glossary page's entry.
ANCHOR = '<a id="{key}"></a>'
ANCHOR_RE = re.compile(r'<a id="([A-Za-z0-9_-]+)"></a>')
GLOSSARY_LINK_RE = re.compile(r"\[([^\]]*)\]\((?:\.\./\.\./(?:en|zh)/)?(?:" + "|".join(map(re.escape, PAGES.values()))
                              + r")#[a-z0-9-]+\)")
#: Where the word "checked" goes in the translation table.
CHECKED = "checked"


class GlossaryError(ValueError):
    """A source that cannot be read as a glossary: the message names every table that is wrong."""


@dataclass
class Term:
    """One [[term]] of the source (see the module's docstring)."""

    en: str
    zh: str
    checked: bool = False
    key: str = ""
    title: dict = field(default_factory=dict)
    definition: dict | None = None
    lesson: str | None = None
    section: str | None = None
    forms: dict = field(default_factory=dict)
    not_words: dict = field(default_factory=dict)
    unlinked: tuple = ()

    @property
    def defined(self):
        return self.definition is not None


@dataclass
class Avoid:
    en: str
    use: str
    avoid: str
    words: tuple = ()
    not_words: tuple = ()


def without_notes(text):
    """`text` without its notes in parentheses: "view (of a tensor)" -> "view", "因果（前瞻）掩码" -> "因果掩码",
    "eval mode (`model.eval()`)" -> "eval mode"."""
    while True:
        shorter = re.sub(r"\s*[(（][^()（）]*[)）]", "", text)
        if shorter == text:
            return re.sub(r"\s+", " ", text).strip()
        text = shorter


def slug(text):
    """An ASCII anchor made from English text, less a section's number: "2. View or copy?" -> "view-or-copy"."""
    text = re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", text.strip())
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _split(title):
    return [part.strip() for part in re.split(r",|，|、|\s/\s", title) if part.strip()]


def _text(value, where, name, problems):
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: `{name}` must be a non-empty string")
        return ""
    return value.strip()


def _pair(value, where, name, problems):
    """A {"en": ..., "zh": ...} table of strings, or None where it is absent."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(LANGUAGES):
        problems.append(f"{where}: `{name}` needs `{name}.en` and `{name}.zh`, nothing else")
        return None
    return {lang: _text(value[lang], where, f"{name}.{lang}", problems) for lang in LANGUAGES}


def parse(text):
    """(terms, avoid) from the text of a source; GlossaryError names everything wrong with it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise GlossaryError(f"{SOURCE} is not TOML: {error}") from None
    problems, terms, avoid = [], [], []
    unknown = set(data) - {"term", "avoid"}
    if unknown:
        problems.append(f"{SOURCE}: unknown tables {sorted(unknown)} (only [[term]] and [[avoid]])")
    for number, entry in enumerate(data.get("term", []), 1):
        where = f"{SOURCE} [[term]] {number} ({entry.get('en', '?')!r})"
        extra = set(entry) - TERM_KEYS
        if extra:
            problems.append(f"{where}: unknown keys {sorted(extra)}")
        term = Term(en=_text(entry.get("en"), where, "en", problems), zh=_text(entry.get("zh"), where, "zh", problems))
        checked = entry.get("checked", False)
        if not isinstance(checked, bool):
            problems.append(f"{where}: `checked` must be true or false")
        term.checked = checked is True
        term.definition = _pair(entry.get("definition"), where, "definition", problems)
        title = _pair(entry.get("title"), where, "title", problems) if "title" in entry else None
        term.title = title or {"en": without_notes(term.en), "zh": without_notes(term.zh)}
        for name in ("forms", "not_words"):
            words = entry.get(name, {})
            if not isinstance(words, dict) or set(words) - set(LANGUAGES) or not all(
                isinstance(given, list) and all(isinstance(w, str) and w.strip() for w in given) for given in words.values()
            ):
                problems.append(f"{where}: `{name}.en` and `{name}.zh` must be lists of words")
                words = {}
            default = (lambda lang: _split(term.title[lang])) if name == "forms" else (lambda lang: [])
            setattr(term, name, {lang: [w.strip() for w in words.get(lang, default(lang))] for lang in LANGUAGES})
        unlinked = entry.get("unlinked", [])
        if not isinstance(unlinked, list) or not all(isinstance(n, str) and re.fullmatch(r"\d\d", n) for n in unlinked):
            problems.append(f'{where}: `unlinked` must be a list of lesson numbers, like ["02"]')
            unlinked = []
        term.unlinked = tuple(unlinked)
        if term.defined:
            term.key = str(entry.get("key") or slug((term.forms["en"] or [term.title["en"]])[0]))
            if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", term.key):
                problems.append(f"{where}: the key {term.key!r} must be lowercase ASCII words joined by '-'")
            term.lesson = entry.get("lesson")
            term.section = entry.get("section")
            if not (isinstance(term.lesson, str) and re.fullmatch(r"\d\d", term.lesson)):
                problems.append(f'{where}: a defined term needs `lesson`, the lesson that teaches it ("01")')
            _text(term.section, where, "section", problems)
        else:
            given = sorted({"key", "title", "lesson", "section", "forms", "not_words", "unlinked"} & set(entry))
            if given:
                problems.append(f"{where}: {given} only mean something with a `definition`")
        terms.append(term)
    for number, entry in enumerate(data.get("avoid", []), 1):
        where = f"{SOURCE} [[avoid]] {number}"
        if not AVOID_KEYS <= set(entry) <= AVOID_KEYS | AVOID_OPTIONAL_KEYS:
            problems.append(f"{where}: needs the keys {sorted(AVOID_KEYS)}, and may have {sorted(AVOID_OPTIONAL_KEYS)}")
            continue
        lists = {name: entry.get(name, []) for name in sorted(AVOID_OPTIONAL_KEYS)}
        for name, words in lists.items():
            if not (isinstance(words, list) and all(isinstance(w, str) and w.strip() for w in words)):
                problems.append(f"{where}: `{name}` must be a list of words")
                lists[name] = []
        avoid.append(Avoid(**{name: _text(entry[name], where, name, problems) for name in sorted(AVOID_KEYS)},
                           **{name: tuple(w.strip() for w in words) for name, words in lists.items()}))
    keys = [term.key for term in terms if term.defined]
    problems += [f"{SOURCE}: two defined terms have the key {key!r}" for key in sorted({k for k in keys if keys.count(k) > 1})]
    if problems:
        raise GlossaryError("\n".join(problems))
    return terms, avoid


def load(path):
    """(terms, avoid) of the source at `path`."""
    return parse(path.read_text(encoding="utf-8"))


def defined(terms):
    return [term for term in terms if term.defined]


# ----------------------------------------------------------------------------- a lesson's headings

FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def headings(markdown):
    """[(line number, level, text)] of the ATX headings of `markdown`, outside fenced code."""
    found, fence = [], None
    for number, line in enumerate(markdown.split("\n")):
        opening = FENCE_RE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        heading = HEADING_RE.match(line)
        if heading:
            found.append((number, len(heading.group(1)), heading.group(2)))
    return found


def outline(cells, tags):
    """The sections of a lesson source: [(English heading, {"en": text, "zh": text, "level": n})] in
    the lesson's order, each English heading beside its translation (the heading at the same place
    in the Chinese cell that follows). `tags(cell)` gives a cell's tags."""
    found = []
    for cell, following in zip(cells, [*cells[1:], None]):
        if cell.cell_type != "markdown" or "lang-en" not in tags(cell):
            continue
        chinese = headings(following.source) if following is not None and "lang-zh" in tags(following) else []
        for index, (_line, level, text) in enumerate(headings(cell.source)):
            translated = chinese[index][2] if index < len(chinese) else None
            found.append((text, {"en": text, "zh": translated, "level": level}))
    return found


def section_anchors(cells, tags, terms, lesson):
    """{cell index: {heading index: anchor}}: where lesson `lesson`'s renders put the anchors its
    taught sections carry, in the English cell and in the Chinese cell that translates it. A
    lesson's title (a level-1 heading) gets none."""
    taught = {term.section for term in defined(terms) if term.lesson == lesson}
    anchors = {}
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown" or "lang-en" not in tags(cell):
            continue
        for place, (_line, level, text) in enumerate(headings(cell.source)):
            if level > 1 and text in taught:
                anchors.setdefault(index, {})[place] = slug(text)
                if index + 1 < len(cells) and "lang-zh" in tags(cells[index + 1]):
                    anchors.setdefault(index + 1, {})[place] = slug(text)
    return anchors


def anchor_headings(markdown, anchors):
    """`markdown` with ANCHOR appended to the headings `anchors` names ({heading index: anchor}),
    right after the heading's text: JupyterLab's own id for the heading stays what it was."""
    if not anchors:
        return markdown
    lines = markdown.split("\n")
    for place, (line, _level, _text) in enumerate(headings(markdown)):
        if place in anchors:
            lines[line] = lines[line].rstrip() + ANCHOR.format(key=anchors[place])
    return "\n".join(lines)


# ----------------------------------------------------------------------------- links in the lessons

#: A word marked as not the glossary's sense (see the module's docstring), and its word.
NOT_TERM = re.compile(r"\[([^\]\n]+)\]\{\.not-term\}")


def unmark(markdown):
    """`markdown` with each word marked ``[word]{.not-term}`` left as the word: what a learner sees."""
    return NOT_TERM.sub(r"\1", markdown)


#: What a term is never linked inside of: a word marked as not the term, fenced code, a heading,
#: math, inline code, a picture, a link, an HTML tag or comment, an address.
PROTECTED = re.compile(
    "|".join([
        NOT_TERM.pattern,
        r"^[ ]{0,3}(?P<fence>`{3,}|~{3,})[^\n]*\n.*?(?:^[ ]{0,3}(?P=fence)[^\n]*$|\Z)",
        r"^[ ]{0,3}#{1,6}(?:[ \t][^\n]*)?$",
        r"\$\$.*?\$\$",
        r"\$[^$]*\$",
        r"(?P<ticks>`+).*?(?P=ticks)",
        r"!?\[[^\]]*\]\([^)]*\)",
        r"<!--.*?-->",
        r"<https?://[^>\s]+>",
        r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>",
        r"https?://[^\s)>\]]+",
    ]),
    flags=re.MULTILINE | re.DOTALL,
)
ASCII_WORD = "A-Za-z0-9_"


def form_pattern(form, lang):
    """The regular expression a lesson's text must match for `form` to link: its words with any
    white space between them (a line may break inside a term), whole words where it begins or ends
    with a letter or digit, and in English the plural too (-s, -es, -y to -ies)."""
    words = [re.escape(word) for word in form.split()]
    pattern = (r"\s+" if lang == "en" else r"\s*").join(words)
    if lang == "en" and re.search(r"[A-Za-z]$", form):
        if re.search(r"[^aeiou]y$", form, flags=re.IGNORECASE):
            pattern = pattern[:-1] + "(?:y|ies)"
        else:
            pattern += "(?:e?s)?"
    if re.match(rf"[{ASCII_WORD}]", form):
        pattern = rf"(?<![{ASCII_WORD}-])" + pattern
    if re.search(rf"[{ASCII_WORD}]$", form):
        pattern += rf"(?![{ASCII_WORD}-])"
    return pattern


class Linker:
    """Links the first use of each defined term in the markdown cells of one lesson's render, in
    one language: call it on each markdown cell in order. `target` is the glossary page as the
    render links it (``glossary.md`` beside the lesson). A term already linked, or whose lesson
    `unlinked` names this one, is left as it is; its words are still read as that term, so a
    shorter term inside them ("attention" in "self-attention") does not link there instead, and a
    term's `not_words` are read as no term at all. At one place the longest form wins."""

    def __init__(self, terms, lang, lesson, target):
        self.lang, self.lesson, self.target, self.done = lang, lesson, target, set()
        forms = sorted(
            [(form, term) for term in defined(terms) for form in dict.fromkeys(term.forms[lang])]
            + [(word, None) for term in defined(terms) for word in term.not_words[lang]],
            key=lambda pair: -len(pair[0]),
        )
        self.forms = [(re.compile(form_pattern(form, lang), flags=re.IGNORECASE), term) for form, term in forms]
        alternatives = "|".join(f"(?:{p.pattern})" for p, _ in self.forms)
        # with the emphasis around the words, if any: see _link
        self.pattern = re.compile(rf"(?P<open>\*+)?(?P<words>{alternatives})(?P<close>\*+)?",
                                  flags=re.IGNORECASE) if forms else None

    def term_of(self, words):
        return next(term for pattern, term in self.forms if pattern.fullmatch(words))

    def _link(self, match):
        """The link for one use of a term. Emphasis that holds exactly the term's words goes inside
        the link, `[**term**](...)`: left outside, `**[term](...)**`, it would stop being emphasis
        where a letter or a Chinese character touches it (CommonMark's rule for a delimiter next
        to punctuation, here the brackets). A use at one end of a longer emphasis is not linked."""
        opening, words, closing = match.group("open") or "", match.group("words"), match.group("close") or ""
        term = self.term_of(words)
        if (term is None or term.key in self.done or (self.lesson is not None and self.lesson in term.unlinked)
                or opening != closing):
            return match.group(0)
        self.done.add(term.key)
        return f"[{opening}{words}{closing}]({self.target}#{term.key})"

    def __call__(self, markdown):
        if self.pattern is None:
            return markdown
        out, position = [], 0
        for protected in PROTECTED.finditer(markdown):
            out.append(self.pattern.sub(self._link, markdown[position:protected.start()]))
            out.append(protected.group(0))
            position = protected.end()
        out.append(self.pattern.sub(self._link, markdown[position:]))
        return "".join(out)


def plain(markdown):
    """`markdown` without what this module adds to a lesson: the glossary links (their words kept)
    and the sections' anchors. For a lesson shown where the glossary is not beside it (the slides)."""
    return ANCHOR_RE.sub("", GLOSSARY_LINK_RE.sub(r"\1", unmark(markdown)))


# ----------------------------------------------------------------------------- checks

def problems(terms, outlines):
    """What is wrong with the defined terms against the lessons: `outlines` is {lesson: outline(...)}."""
    found = []
    for term in defined(terms):
        where = f"the term {term.en!r}"
        if term.lesson not in outlines:
            found.append(f"{where} is taught in lesson {term.lesson}, which does not exist")
            continue
        sections = dict(outlines[term.lesson])
        if term.section not in sections:
            found.append(f"{where} is taught in lesson {term.lesson}'s section {term.section!r}, which is not one "
                         "of its English headings (write it as the heading is written, without the #s)")
        elif sections[term.section]["zh"] is None:
            found.append(f"{where}: the Chinese cell after {term.section!r} has no heading at that place to anchor")
        for lesson in term.unlinked:
            if lesson not in outlines:
                found.append(f"{where} is unlinked in lesson {lesson}, which does not exist")
        if not any(term.forms.values()):
            found.append(f"{where} has no words (`forms.en`, `forms.zh`) to link it by")
    return found


# ----------------------------------------------------------------------------- any Chinese a learner reads

CJK = re.compile(r"[\u3400-\u9fff]")
#: What the English of a term may stand in inside Chinese text: a gloss in parentheses after the
#: Chinese term ("分块（tile）"), in full-width or ASCII ones.
GLOSS = re.compile(r"（[^（）]*）|\([^()]*\)")
#: A format field of a message ("{x.stride()}").
FORMAT_FIELD = re.compile(r"\{[^{}\n]*\}")


def _around(text, start, end):
    return text[max(0, start - 12):end + 12].replace("\n", " ")


def avoided(text, avoid):
    """[(word, where in `text`)]: the words `text` (Chinese a learner reads) uses that the avoid list
    forbids, outside the longer words it allows and the words marked as not the term."""
    text = NOT_TERM.sub(" ", text)
    found = []
    for row in avoid:
        allowed = [(m.start(), m.end()) for word in row.not_words for m in re.finditer(re.escape(word), text)]
        for word in row.words:
            for match in re.finditer(re.escape(word), text):
                if not any(start <= match.start() and match.end() <= end for start, end in allowed):
                    found.append((word, _around(text, match.start(), match.end())))
    return found


def _a_code_name(text, match):
    """Whether the word `match` found is a name in code: after a dot (x.view) or before what
    follows a name (view(...), stride=, x.stride, query_len)."""
    return text[match.start() - 1:match.start()] == "." or text[match.end():match.end() + 1] in ("(", ".", "=", "_")


def _in_a_name(text, match):
    """Whether a capitalised English word is part of a name of several ("Ring Attention", the title
    "Attention Is All You Need"): a capitalised word right before or after it."""
    before = re.search(r"([A-Za-z]+)\s+$", text[max(0, match.start() - 30):match.start()])
    after = re.match(r"\s+([A-Za-z]+)", text[match.end():match.end() + 30])
    return match.group(0)[0].isupper() and any(word and word.group(1)[0].isupper() for word in (before, after))


def untranslated(text, terms, names=frozenset()):
    """[(English word, where in `text`)]: the English names of defined terms that Chinese `text`
    leaves in English, outside code, math, links, parentheses (a gloss: "分块（tile）") and the words
    marked as not the term. A term whose Chinese keeps the English word ("GQA", "softmax") is not one,
    nor a word written as one of `names`, the code's (an argument: "与 query 相同的 dtype")."""
    prose = PROTECTED.sub(" ", text)
    prose = GLOSS.sub(" ", FORMAT_FIELD.sub(" ", prose))
    found = []
    for term in defined(terms):
        chinese = " ".join([term.zh, term.title["zh"], *term.forms["zh"]]).lower()
        if not CJK.search(term.title["zh"]):
            continue
        # a form, and the long words of a form of several ("materialised" of "materialised version")
        words = {word for form in term.forms["en"] if " " in form for word in form.split()
                 if len(word) >= 8 and word.isalpha()}
        for form in [*term.forms["en"], *sorted(words)]:
            if form.lower() in chinese:
                continue
            for match in re.finditer(form_pattern(form, "en"), prose, flags=re.IGNORECASE):
                if _a_code_name(prose, match) or match.group(0) in names or _in_a_name(prose, match):
                    continue
                found.append((match.group(0), _around(prose, match.start(), match.end())))
    return found


# ----------------------------------------------------------------------------- what is written

GENERATED = ("<!-- generated by `python -m course_teacher.build` (`make notebooks`) from notebooks/source/glossary.toml: "
             "edit there, not here -->")

TABLE_INTRO = """\
One English–Chinese term list for the whole course. Both languages of every lesson use these
words. Rows marked **checked** are enforced by `python -m course_teacher.build --check`: when an
English markdown cell uses the term (outside `code` and $math$), its Chinese cell must use the
Chinese term. A learner reads the glossary of their language instead, which defines each term and
links the lesson that teaches it: [English](notebooks/en/{en}), [中文](notebooks/zh/{zh}).

全课程统一的中英术语表。每一课的两种语言都使用这里的译名。标为 **checked** 的术语由
`python -m course_teacher.build --check` 检查：英文 Markdown 单元（`代码`与 $公式$ 之外）用到该术语时，
紧随其后的中文单元必须使用对应的中文译名。学习者读的是自己语言的术语表，其中给出每个术语的定义，
并链接到讲解它的那一课：[English](notebooks/en/{en})、[中文](notebooks/zh/{zh})。""".format(**PAGES)

AVOID_INTRO = """\
Each of these has a term above; the other word for the same thing would make a learner wonder
whether it means something else.

下面每个概念都已有译名；换一个说法，读者会以为说的是另一回事。"""


def table(terms, avoid):
    """GLOSSARY.md: the translation table and the words not to use."""
    rows = ["| English | 中文 | checked |", "| --- | --- | --- |"]
    rows += [f"| {term.en} | {term.zh} | {CHECKED} |" if term.checked else f"| {term.en} | {term.zh} | |" for term in terms]
    avoided = ["| English | 用 | 不用 |", "| --- | --- | --- |"]
    avoided += [f"| {row.en} | {row.use} | {row.avoid} |" for row in avoid]
    return "\n".join([
        "# Glossary · 术语表", "", GENERATED, "", TABLE_INTRO, "", *rows, "",
        "## Words not to use · 不用的说法", "", AVOID_INTRO, "", *avoided, "",
    ])


PAGE_TEXT = {
    "en": {
        "title": "# Glossary",
        "intro": "The terms the course teaches, lesson by lesson: what each one means, its Chinese name, and the "
        "section that teaches it. A lesson links a term here the first time it uses it.\n\n"
        f"The same glossary in Chinese: [术语表](../zh/{PAGES['zh']}).",
        "other": "中文",
        "taught": "Taught in",
        "line": "**{other}** {name} · **{taught}** {link}",
        "index": "- [{lesson} · {title}](#lesson-{lesson}): {terms}",
        "join": ", ",
    },
    "zh": {
        "title": "# 术语表",
        "intro": "本课程讲到的术语，按课排列：每个术语的含义、英文名称，以及讲解它的小节。"
        "课程中每个术语第一次出现时，都链接到这里。\n\n"
        f"英文版术语表：[Glossary](../en/{PAGES['en']})。",
        "other": "英文",
        "taught": "讲解",
        "line": "**{other}**：{name}　**{taught}**：{link}",
        "index": "- [{lesson} · {title}](#lesson-{lesson})：{terms}",
        "join": "、",
    },
}


def page(terms, lang, lessons):
    """The learner's glossary in `lang`. `lessons` is {lesson: {"notebook": its file name, "title":
    {lang: title}, "outline": outline(...)}}, in the course's order; a term whose lesson or section
    is not there (problems() names it) is left out."""
    text = PAGE_TEXT[lang]
    other = "zh" if lang == "en" else "en"
    groups = {lesson: [] for lesson in lessons}
    for term in defined(terms):
        sections = [heading for heading, _ in lessons.get(term.lesson, {}).get("outline", [])]
        if term.section in sections:
            groups[term.lesson].append((sections.index(term.section), term))
    index, body = [], []
    for lesson, found in groups.items():
        if not found:
            continue
        found = [term for _, term in sorted(found, key=lambda pair: pair[0])]
        info = lessons[lesson]
        title = info["title"][lang]
        index.append(text["index"].format(lesson=lesson, title=title, terms=text["join"].join(
            f"[{term.title[lang]}](#{term.key})" for term in found)))
        body += [f"## {ANCHOR.format(key=f'lesson-{lesson}')}{lesson} · {title}", ""]
        sections = dict(info["outline"])
        for term in found:
            section = sections[term.section]
            if section["level"] == 1:
                link = f"[{lesson} · {title}]({info['notebook']})"
            else:
                link = f"[{lesson} · {section[lang]}]({info['notebook']}#{slug(term.section)})"
            body += [
                f"### {ANCHOR.format(key=term.key)}{term.title[lang]}", "",
                term.definition[lang], "",
                text["line"].format(other=text["other"], name=term.title[other], taught=text["taught"], link=link), "",
            ]
    return "\n".join([text["title"], "", GENERATED, "", text["intro"], "", *index, "", *body]).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------- reading links back

LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown):
    """The relative targets of `markdown`'s links ("glossary.md#tensor"; no addresses, no pictures)."""
    return [target for target in LINK_RE.findall(markdown) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def anchors_of_markdown(markdown):
    """The ids a link's fragment can find in `markdown` as JupyterLab renders it: the ids of the
    explicit anchors, and each heading's own (its text, spaces made "-")."""
    ids = set(ANCHOR_RE.findall(markdown))
    for _line, _level, text in headings(markdown):
        visible = ANCHOR_RE.sub("", text)
        visible = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", visible)  # a link's text
        visible = re.sub(r"<[^>]+>", "", visible)  # any other tag
        visible = re.sub(r"`+([^`]*)`+", r"\1", visible)  # code keeps its text
        visible = re.sub(r"(\*\*|__|\*|_)(\S(?:.*?\S)?)\1", r"\2", visible)  # emphasis keeps its text
        ids.add(visible.replace(" ", "-"))
    return ids
