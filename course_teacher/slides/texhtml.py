"""The speaker notes' math, set as HTML when the deck is built.

reveal.js's speaker view shows a slide's notes in a window of its own, where MathJax does not run:
a note's `$(E_q, H \\cdot d_k)$` would reach the speaker as TeX. The notes hold the lessons' prose,
whose math is inline and simple (symbols, sub- and superscripts, roots, function names, the odd
2×2 matrix), so here it becomes HTML that any browser shows as it is: Unicode symbols, <sub>,
<sup>, variables in italics, inline styles only (the speaker view has none of the deck's style
sheet). That note reaches the speaker as
``(<i>E</i><sub><i>q</i></sub>, <i>H</i> · <i>d</i><sub><i>k</i></sub>)``.

A command not listed here is shown by its name, upright; `strict=True` raises instead (the test
converts every note of every deck strictly, so a command new to the lessons is added here first).
"""

import html
import re

#: Symbols: Greek letters, operators, arrows, delimiters, dots and TeX's spaces.
SYMBOLS = {
    **{name: chr(code) for name, code in zip(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
        "sigma tau upsilon phi chi psi omega".split(), [*range(0x3B1, 0x3C2), *range(0x3C3, 0x3CA)])},
    **{name: chr(code) for name, code in zip(
        "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split(),
        [0x393, 0x394, 0x398, 0x39B, 0x39E, 0x3A0, 0x3A3, 0x3A5, 0x3A6, 0x3A8, 0x3A9])},
    "varepsilon": "ε", "varphi": "φ", "vartheta": "ϑ", "ell": "ℓ", "infty": "∞", "partial": "∂", "nabla": "∇",
    "top": "⊤", "dots": "…", "ldots": "…", "cdots": "⋯", "vdots": "⋮", "ddots": "⋱", "sum": "∑", "prod": "∏",
    "lceil": "⌈", "rceil": "⌉", "lfloor": "⌊", "rfloor": "⌋", "langle": "⟨", "rangle": "⟩",
    "lVert": "‖", "rVert": "‖", "Vert": "‖", "|": "‖", "lvert": "|", "rvert": "|", "vert": "|", "mid": " | ",
    "{": "{", "}": "}", "%": "%", "$": "$", "#": "#", "_": "_", "&": "&",
    ",": "\u2009", ":": "\u205f", ";": "\u2004", "!": "", " ": " ", "quad": "\u2003", "qquad": "\u2003\u2003",
}  # fmt: skip
#: Binary operators and relations: set with a space on each side, as TeX spaces them.
BINARY = {
    "cdot": "·", "times": "×", "pm": "±", "mp": "∓", "div": "÷", "circ": "∘", "odot": "⊙", "otimes": "⊗",
    "oplus": "⊕", "ast": "∗", "star": "⋆", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠",
    "approx": "≈", "sim": "∼", "simeq": "≃", "equiv": "≡", "propto": "∝", "ll": "≪", "gg": "≫", "in": "∈",
    "notin": "∉", "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩", "to": "→", "rightarrow": "→",
    "leftarrow": "←", "gets": "←", "Rightarrow": "⇒", "Leftarrow": "⇐", "iff": "⟺", "implies": "⟹",
    "mapsto": "↦", "bmod": "mod", "land": "∧", "lor": "∨",
}  # fmt: skip
#: TeX's operator names (\sin, \max, ...), set upright.
FUNCTIONS = set("sin cos tan exp log ln lg max min arg det dim lim sup inf sinh cosh tanh Pr".split())
#: Fonts: their argument is set upright (as words), but the italic ones; the text ones keep their spaces.
FONTS = {"mathrm", "operatorname", "mathsf", "mathtt", "mathbf", "boldsymbol", "mathcal", "mathit"}
TEXTS = {"text", "textrm", "textit", "texttt", "textbf", "emph"}
BOLD = {"mathbf", "boldsymbol", "textbf"}
ITALIC = {"mathit", "textit", "emph"}
DOUBLE_STRUCK = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ", "E": "𝔼", "P": "ℙ"}
#: Sizes and spacing hints that change nothing in a line of HTML.
IGNORED = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr",
           "displaystyle", "textstyle", "limits", "nolimits", "middle"}  # fmt: skip
ACCENTS = {"hat": "\u0302", "widehat": "\u0302", "tilde": "\u0303", "widetilde": "\u0303", "vec": "\u20d7",
           "dot": "\u0307"}  # fmt: skip
#: Matrices, each an inline table: the border radius of its delimiters (None: no delimiters).
MATRICES = {"pmatrix": "1em", "bmatrix": "0", "vmatrix": "0", "matrix": None, "array": None, "aligned": None}
OVERLINE = '<span style="text-decoration:overline">{}</span>'
CELL = '<span style="display:table-cell;padding:0 .3em;text-align:center">{}</span>'

TOKEN_RE = re.compile(r"\\([A-Za-z]+)|\\(.)|([{}^_&])|(\s+)|([A-Za-z]+)|(.)", re.DOTALL)
MATH_RE = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)([^$]+?)(?<!\\)\$", re.DOTALL)
#: In a note's HTML: code and preformatted text, where a dollar sign is only a dollar sign.
VERBATIM_RE = re.compile(r"(<code[^>]*>.*?</code>|<pre[^>]*>.*?</pre>)", re.DOTALL)


class UnknownCommand(ValueError):
    pass


def _shown(markup):
    return re.sub(r"<[^>]+>", "", markup)


class _Parser:
    """Reads TeX's math tokens, ("cmd", name), ("sym", char after a backslash), ("group", one of
    {}^_&), ("space", " "), ("letters", text) or ("char", char), into HTML. As in TeX, spaces in
    math are dropped and operators spaced by what they are: `self.last` says whether the atom
    before was an operand ("ord": a minus after it is binary), an operator or opening ("op"), or
    the first half of one (\\mathrel, "rel")."""

    def __init__(self, tex, strict):
        self.tokens, self.at, self.strict, self.last = [], 0, strict, "op"
        for command, symbol, group, space, letters, char in TOKEN_RE.findall(tex):
            self.tokens.append(
                ("cmd", command) if command else ("sym", symbol) if symbol else ("group", group) if group
                else ("space", " ") if space else ("letters", letters) if letters else ("char", char)
            )  # fmt: skip

    def peek(self, spaces=False):
        """The next token (skipping spaces unless `spaces`), or (None, None) at the end."""
        while not spaces and self.at < len(self.tokens) and self.tokens[self.at][0] == "space":
            self.at += 1
        return self.tokens[self.at] if self.at < len(self.tokens) else (None, None)

    def sequence(self, mode="math", stops=(("group", "}"),)):
        """HTML of the tokens up to (not including) one of `stops`, or the end. mode: "math"
        (letters in italics), "upright" (\\mathrm), or "text" (\\text: its spaces kept too)."""
        out = []
        while self.peek(spaces=mode == "text") not in [(None, None), *stops]:
            out.append(self.atom(mode))
        return "".join(out)

    def argument(self, mode="math"):
        """One argument: a {group}, or the next single token (of letters, the first)."""
        kind, text = self.peek()
        if kind == "letters" and len(text) > 1:  # \sqrt d k: only the d is under the root
            self.tokens[self.at] = (kind, text[1:])
            self.tokens.insert(self.at, (kind, text[0]))
        return self.atom(mode)

    def raw(self):
        """An argument as written, e.g. an environment's name."""
        start = self.at
        self.argument("text")
        return "".join(value for _, value in self.tokens[start : self.at] if value not in "{}").strip()

    def op(self, symbol):
        self.last = "op"
        return f" {symbol} "

    def atom(self, mode="math"):
        kind, value = self.peek(spaces=mode == "text")
        self.at += 1
        before, self.last = self.last, "ord"
        if (kind, value) == ("group", "{"):
            inside = self.sequence(mode)
            self.at += 1  # the closing brace
            self.last = "ord"
            return inside
        if kind == "group" and value in "^_":
            tag = "sup" if value == "^" else "sub"
            inside = self.argument(mode)
            self.last = "ord"
            return f"<{tag}>{inside}</{tag}>"
        if kind == "letters":
            return f"<i>{value}</i>" if mode == "math" else html.escape(value)
        if kind == "char" and mode != "text":
            if value in "=<>" and before == "rel":  # the = of \mathrel{+}=: one operator, +=
                self.last = "op"
                return html.escape(value) + " "
            if value in "=<>" or value in "+-" and before == "ord":
                return self.op(html.escape({"-": "−"}.get(value, value)))
            if value in "([-+":  # a minus after these is a sign
                self.last = "op"
            if value in ",;":
                self.last = "op"
                return value + "\u2009"
            return html.escape({"-": "−", "'": "′", "*": "∗"}.get(value, value))
        if kind == "sym":
            return "<br>" if value == "\\" else html.escape(SYMBOLS.get(value, value))
        if kind == "cmd":
            return self.command(value, before)
        return html.escape(value)  # a space in text, a stray & or }

    def command(self, name, before):
        if name in SYMBOLS:
            if name in ("lceil", "lfloor", "langle", "lVert", "lvert", "{"):
                self.last = "op"
            return html.escape(SYMBOLS[name])
        if name in BINARY:
            return self.op(BINARY[name])
        if name in IGNORED:
            self.last = before
            return ""
        if name == "mathbin":
            return self.op(self.argument().strip())
        if name == "mathrel":  # a symbol set as a relation, e.g. the + of += in \mathrel{+}=
            inside = self.argument().strip()
            self.last = "rel"
            return f" {inside}"
        if name in FUNCTIONS:  # thin spaces between it and the operands beside it, as TeX sets them
            kind, value = self.peek()
            after = kind in ("letters", "cmd") or kind == "char" and value.isdigit()
            return ("\u2009" if before == "ord" else "") + name + ("\u2009" if after else "")
        if name in FONTS or name in TEXTS:
            inside = self.argument("text" if name in TEXTS else "upright")
            self.last = "ord"
            return f"<b>{inside}</b>" if name in BOLD else f"<i>{inside}</i>" if name in ITALIC else inside
        if name == "mathbb":
            letter = self.raw()
            return DOUBLE_STRUCK.get(letter, letter)
        if name == "sqrt":
            inside = self.argument()
            return "√" + (OVERLINE.format(inside) if len(_shown(inside)) > 1 else inside)
        if name in ("bar", "overline"):
            return OVERLINE.format(self.argument())
        if name in ACCENTS:
            return self.argument() + ACCENTS[name]
        if name in ("frac", "dfrac", "tfrac"):
            parts = [self.argument(), self.argument()]
            return "/".join(f"({part})" if len(_shown(part)) > 1 else part for part in parts)
        if name == "begin":
            return self.environment(self.raw())
        if self.strict:
            raise UnknownCommand(f"\\{name}: no HTML for this TeX command (add it to course_teacher/slides/texhtml.py)")
        return html.escape(name)

    def environment(self, name):
        """A matrix (or aligned lines): an inline table, its delimiters drawn as rounded borders."""
        if name not in MATRICES and self.strict:
            raise UnknownCommand(f"\\begin{{{name}}}: no HTML for this environment")
        if name == "array":
            self.raw()  # the column specification
        rows, row = [], []
        while self.peek() != (None, None):
            self.last = "op"
            row.append(self.sequence(stops=(("group", "&"), ("sym", "\\"), ("cmd", "end"))).strip())
            kind, value = self.peek()
            self.at += 1
            if value != "&":
                rows.append(row)
                row = []
            if value == "end":
                self.raw()
                break
        body = "".join(
            '<span style="display:table-row">' + "".join(CELL.format(item) for item in items) + "</span>"
            for items in rows
            if any(items)
        )
        radius = MATRICES.get(name)
        border = f"border:solid;border-width:0 1px;border-radius:{radius};" if radius is not None else ""
        return f'<span style="display:inline-table;vertical-align:middle;{border}">{body}</span>'


def tex_to_html(tex, strict=False):
    """HTML for the math `tex` (without its dollar signs)."""
    return re.sub(r" {2,}", " ", _Parser(tex, strict).sequence().strip())


def notes_math(fragment, strict=False):
    """A note's HTML with its `$...$` and `$$...$$` math set as HTML (code spans left alone). The
    TeX in `fragment` is HTML-escaped, as nbconvert writes it."""
    parts = VERBATIM_RE.split(fragment)
    for index in range(0, len(parts), 2):  # the even parts are outside code
        parts[index] = MATH_RE.sub(
            lambda match: tex_to_html(html.unescape(match.group(1) or match.group(2)), strict), parts[index]
        )
    return "".join(parts)
