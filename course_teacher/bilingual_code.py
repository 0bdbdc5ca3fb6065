"""Code cells in two languages: the comments, docstrings and sentences a learner reads.

Code cells are shared by both languages, so both run the same code. What a learner *reads* in a
code cell (a teaching comment, an exercise's docstring, a ``claim``'s sentence) must still be in
the notebook's language. In a lesson source such lines sit in a block:

    # lang: en
    scores = q @ k.transpose(-2, -1)  # (B, L_q, L_k): every query against every key
    # lang: zh
    scores = q @ k.transpose(-2, -1)  # (B, L_q, L_k)：每个查询与每个键都打一次分
    # lang: end

The English render keeps the first part, the Chinese render the second; the marker lines go.
``problems`` keeps the two parts honest: they must be the same code, differing only in comments
and string literals, and English prose outside a block (a comment or a sentence in a string
that a Chinese learner would read in English) is reported, so a translation cannot be missing.
"""

import io
import re
import textwrap
import tokenize

MARKER = re.compile(r"^\s*# lang: (en|zh|end)\s*$")
#: Comments that talk to tools, not to learners.
PRAGMA = re.compile(r"^#\s*(noqa|type:|fmt:|pragma)")
#: English prose: a word of three lowercase letters or more in a comment (not inf or nan: numbers) ...
COMMENT_WORD = re.compile(r"(?<![\w.])(?!(?:inf|nan)\b)[a-z]{3,}(?![\w(])")
#: ... or two words and a space in a string ("bqd,bkd->bqk", "tab:orange" or "reverse" are not prose).
STRING_PHRASE = re.compile(r"[A-Za-z]{2,}[,:;]? +[A-Za-z]{2,}")


def localize(text, lang):
    """`text` with each `# lang:` block reduced to its `lang` part and the marker lines dropped."""
    out, part = [], None
    for line in text.splitlines():
        found = MARKER.match(line)
        if found:
            part = None if found.group(1) == "end" else found.group(1)
        elif part is None or part == lang:
            out.append(line)
    return "\n".join(out)


def _blocks(text):
    """[(line number of `# lang: en`, english lines, chinese lines)] and the structural problems."""
    blocks, problems, state, english, chinese, start = [], [], None, [], [], 0
    for number, line in enumerate(text.splitlines(), start=1):
        found = MARKER.match(line)
        if not found:
            (english if state == "en" else chinese if state == "zh" else []).append(line)
            continue
        word = found.group(1)
        expected = {None: "en", "en": "zh", "zh": "end"}[state]
        if word != expected:
            problems.append(f"line {number}: '# lang: {word}' where '# lang: {expected}' was expected")
            return blocks, problems
        if word == "en":
            start, english, chinese = number, [], []
        if word == "end":
            blocks.append((start, english, chinese))
        state = None if word == "end" else word
    if state is not None:
        problems.append(f"line {start}: a '# lang:' block that never reaches '# lang: end'")
    return blocks, problems


def _standalone_rows(lines):
    """Rows (0-based) of `lines` that hold a whole logical line of code by themselves, or are blank:
    the lines that could stand outside a block. Rows inside a multi-line string or statement do not."""
    rows, start, depth = set(), None, 0
    text = textwrap.dedent("\n".join(lines)) + "\n"
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if start is None:
            start = token.start[0]
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type in (tokenize.NEWLINE, tokenize.NL) and depth == 0:  # an NL inside brackets goes on
            if start == token.start[0]:
                rows.add(start - 1)
            start = None
    return rows


def _shared_rows(english, chinese):
    """Rows a block's two parts share to the letter and that could stand outside the block."""
    if len(english) != len(chinese):
        return []
    standalone = _standalone_rows(english) & _standalone_rows(chinese)
    return [row for row in sorted(standalone) if english[row] == chinese[row] and english[row].strip()]


def _tokens(lines):
    """The token stream of `lines`, comments dropped and string contents blanked: the code."""
    text = textwrap.dedent("\n".join(lines)) + "\n"
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", None):
            kept.append((token.type, ""))
        else:
            kept.append((token.type, token.string))
    return kept


def _prose_outside_blocks(text):
    """Comments and strings outside `# lang:` blocks that read as English sentences."""
    outside = localize(text, lang=None)  # keeps only what is in no block
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(outside + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return []  # cell magics and the like: nothing to read as prose
    for token in tokens:
        if token.type == tokenize.COMMENT and not PRAGMA.match(token.string):
            if COMMENT_WORD.search(token.string):
                found.append((token.start[0], token.string))
        elif token.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", None)):
            if STRING_PHRASE.search(re.sub(r"\{[^}]*\}", " ", token.string)):
                found.append((token.start[0], token.string))
    return found


def problems(text):
    """Sentences saying what is wrong with one code cell's language blocks (empty when nothing)."""
    blocks, found = _blocks(text)
    for start, english, chinese in blocks:
        if not any(line.strip() for line in english) or not any(line.strip() for line in chinese):
            found.append(f"line {start}: a '# lang:' block with an empty English or Chinese part")
            continue
        try:
            same = _tokens(english) == _tokens(chinese)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            found.append(f"line {start}: a '# lang:' block must hold whole lines of code in each part")
            continue
        if not same:
            found.append(
                f"line {start}: the English and Chinese parts of a '# lang:' block run different code "
                "(they may differ only in comments and strings)"
            )
            continue
        shared = _shared_rows(english, chinese)
        if shared:
            found.append(
                f"line {start}: {len(shared)} line(s) of a '# lang:' block are the same in both languages, "
                f"e.g. {english[shared[0]].strip()[:50]!r}: keep only the lines that differ inside blocks"
            )
    for line, text_found in _prose_outside_blocks(text):
        found.append(
            f"English outside a '# lang:' block (give it a Chinese twin): {text_found.strip()[:60]!r}"
        )
    return found
