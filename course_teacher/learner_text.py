"""Every Chinese text a learner reads, gathered in one place for the glossary's checks.

A learner reads Chinese in more places than the lessons' markdown: a code cell's comments and
claims, the package's messages (check verdicts, errors, widget labels, the homes), the hints, the
mistakes a check names, the slides' notes, the glossary's definitions and the READMEs. A word the
glossary's avoid list forbids, or an English term the glossary translates, left in any of them is
the same slip as in a lesson (course_teacher.glossary: ``avoided``, ``untranslated``).

Where the Chinese is found rather than listed: the Python modules' string literals that hold a
Chinese character (read by the parser, so a new message anywhere is checked without being named
here), a lesson's Chinese cells and the Chinese part of its code cells, and in a README the parts of
a line that start at its Chinese (its lines mix both languages: "English text · 中文").
"""

import ast
import io
import re
import tokenize

from . import bilingual_code
from . import glossary as gloss

#: The packages whose string literals a learner may read, under the repository's root: the course's
#: package, and of the teacher's what reaches a learner (a check's mistakes, a grade's feedback, the
#: slides and their notes). The build's and the glossary's own Chinese is for maintainers.
PACKAGES = ("course_utils", "course_teacher/exercises", "course_teacher/grade", "course_teacher/slides",
            "course_teacher/messages.py")
READMES = ("README.md", "README.student.md")


def _chinese_literals(code):
    """The string literals and comments of Python `code` that hold a Chinese character."""
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return [code] if gloss.CJK.search(code) else []
    for token in tokens:
        if token.type in (tokenize.STRING, tokenize.COMMENT) and gloss.CJK.search(token.string):
            found.append(token.string)
    return found


def _module_strings(path):
    """(line, text) of each string constant of a module that holds a Chinese character; adjacent
    literals joined, as Python joins them ("a" "b" is one message)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstring = tree.body[0].value if tree.body and isinstance(tree.body[0], ast.Expr) else None  # for maintainers
    return [(node.lineno, node.value) for node in ast.walk(tree) if node is not docstring
            and isinstance(node, ast.Constant) and isinstance(node.value, str) and gloss.CJK.search(node.value)]


def code_names(root, lessons, read):
    """The names the course's code gives its functions, arguments, attributes and variables, in
    the package and in the lessons' code cells (`lessons`, `read`: as texts() takes them): in
    Chinese text such a word is the code's name ("与 query 相同"), not an English term left over."""
    codes = [path.read_text(encoding="utf-8") for path in sorted((root / "course_utils").rglob("*.py"))]
    codes += [bilingual_code.localize(cell.source, "en") for path in lessons.values()
              for cell in read(path).cells if cell.cell_type == "code"]
    names = set()
    for code in codes:
        try:
            tree = ast.parse(code)
        except SyntaxError:  # a cell with a shell or magic line
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Name):
                names.add(node.id)
    return frozenset(names)


def _readme_parts(text):
    """(line, text) of the Chinese parts of a README: in each line, each table cell and each side of
    a " · ", from its first Chinese character on (what comes before it is the English)."""
    parts = []
    for number, line in enumerate(text.split("\n"), 1):
        for piece in re.split(r"\|| · ", line):
            first = gloss.CJK.search(piece)
            if first:
                parts.append((number, piece[first.start():]))
    return parts


def texts(root, lessons, tags, read, terms):
    """[(where, text)]: every Chinese text a learner reads. `lessons` is {lesson: source path},
    `tags(cell)` a cell's tags, `read(path)` a source notebook (the build's) and `terms` the
    glossary's, whose Chinese definitions a learner reads too."""
    found = []
    for lesson, path in lessons.items():
        for index, cell in enumerate(read(path).cells):
            where = f"lesson {lesson}, source cell {index}"
            if cell.cell_type == "markdown":
                if "lang-zh" in tags(cell):
                    found.append((where, cell.source))
            else:
                found += [(where, text) for text in _chinese_literals(bilingual_code.localize(cell.source, "zh"))]
    for package in PACKAGES:
        for path in [root / package] if package.endswith(".py") else sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            found += [(f"{name}:{line}", text) for line, text in _module_strings(path)]
    for name in READMES:
        found += [(f"{name}:{line}", text) for line, text in _readme_parts((root / name).read_text(encoding="utf-8"))]
    found += [(f"{gloss.SOURCE}, the definition of {term.en!r}", term.definition["zh"]) for term in gloss.defined(terms)]
    return found


def problems(entries, terms, avoid, names=frozenset()):
    """The sentences that say where `entries` (texts()) use a word to avoid or leave a term in
    English (`names`: code_names())."""
    found = []
    for where, text in entries:
        found += [f"{where}: {word!r} is on the glossary's avoid list (…{context}…)" for word, context in gloss.avoided(text, avoid)]
        found += [f"{where}: {word!r} left in English; the glossary translates it (…{context}…)"
                  for word, context in gloss.untranslated(text, terms, names)]
    return found
