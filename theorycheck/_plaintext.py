"""SPEC.md for a terminal: its Markdown and LaTeX rendered as plain Unicode text (``theorycheck spec``).

:func:`latex` turns a LaTeX formula into readable text: ``\\alpha`` -> ``α``, ``\\sum_{x}`` -> ``Σ_x``,
``\\frac{a}{b}`` -> ``a/b`` (``(a + 1)/(b c)`` when a part is not one symbol), ``e^{\\beta}`` -> ``e^β``,
``x^{2}`` -> ``x²``, ``B_0`` -> ``B₀``, ``W^\\top`` -> ``Wᵀ``, ``\\mathbb{R}`` -> ``ℝ``, ``\\bar{x}`` -> ``x̄``;
``aligned``/``gathered`` environments become lines whose ``&`` columns are aligned. A command it does not know
is left as it is (``\\foo``), never dropped.

:func:`render` renders a Markdown text holding ``$...$`` and ``$$...$$`` math: headings underlined (and bold on a
colour terminal), ``**bold**`` and ``*emphasis*`` markers removed (bold on a colour terminal), tables aligned
in columns (every row of a table has the same display width), display math indented, links as
``text (url)``. Every word of the source is kept: only markup is removed. ``theorycheck spec --raw`` prints
the source instead.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

__all__ = ["latex", "render", "display_width", "SYMBOLS"]

# ----------------------------------------------------------------------------------------------------- LaTeX
#: Commands rendered as a symbol (or a word): Greek letters, operators, relations, arrows, delimiters.
SYMBOLS: dict[str, str] = {
    **dict(
        zip(
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon phi "
            "chi psi omega".split(),
            "αβγδεζηθικλμνξπρστυφχψω",
            strict=True,
        )
    ),
    **dict(zip("Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split(), "ΓΔΘΛΞΠΣΥΦΨΩ", strict=True)),
    "varepsilon": "ε", "varphi": "φ", "vartheta": "ϑ", "varrho": "ϱ", "varsigma": "ς", "ell": "ℓ",
    "sum": "Σ", "prod": "Π", "int": "∫", "partial": "∂", "nabla": "∇", "infty": "∞", "emptyset": "∅",
    "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠", "approx": "≈", "sim": "~",
    "simeq": "≃", "equiv": "≡", "propto": "∝", "ll": "≪", "gg": "≫", "succeq": "⪰", "preceq": "⪯",
    "succ": "≻", "prec": "≺", "in": "∈", "notin": "∉", "ni": "∋", "subset": "⊂", "subseteq": "⊆",
    "supset": "⊃", "cup": "∪", "cap": "∩", "setminus": "∖", "perp": "⊥", "mid": "|", "parallel": "∥",
    "forall": "∀", "exists": "∃", "neg": "¬", "land": "∧", "lor": "∨", "wedge": "∧", "vee": "∨",
    "cdot": "·", "times": "×", "div": "÷", "pm": "±", "mp": "∓", "odot": "⊙", "otimes": "⊗", "oplus": "⊕",
    "circ": "∘", "star": "⋆", "ast": "∗", "bullet": "•",
    "to": "→", "rightarrow": "→", "leftarrow": "←", "gets": "←", "mapsto": "↦", "Rightarrow": "⇒",
    "Leftarrow": "⇐", "Leftrightarrow": "⇔", "iff": "⇔", "implies": "⇒", "uparrow": "↑", "downarrow": "↓",
    "langle": "⟨", "rangle": "⟩", "lVert": "‖", "rVert": "‖", "Vert": "‖", "lvert": "|", "rvert": "|",
    "vert": "|", "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "dots": "…", "ldots": "…",
    "cdots": "⋯", "vdots": "⋮", "top": "ᵀ", "intercal": "ᵀ", "prime": "′", "dagger": "†",
    "log": "log", "ln": "ln", "exp": "exp", "max": "max", "min": "min", "sup": "sup", "inf": "inf",
    "lim": "lim", "arg": "arg", "det": "det", "sin": "sin", "cos": "cos", "tanh": "tanh", "Pr": "Pr",
    "argmin": "argmin", "argmax": "argmax",
    "quad": "\x02", "qquad": "\x02\x02",
}  # fmt: skip
#: Commands that only size, space or style: rendered as nothing.
_NOTHING = {
    "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "left", "right",
    "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "middle",
}  # fmt: skip
#: Commands whose one argument is shown as it is (font and spacing wrappers).
_FONTS = {
    "mathrm", "mathit", "mathsf", "mathtt", "mathbf", "boldsymbol", "bm", "operatorname", "mathrel",
    "mathop", "mathbin", "textbf", "textit", "textrm", "texttt", "emph", "mbox",
}  # fmt: skip
_TEXT = {"text", "textrm", "mbox"}  # the argument is text: spaces kept as written
_ACCENTS = {"bar": "\u0304", "overline": "\u0305", "tilde": "\u0303", "widetilde": "\u0303", "hat": "\u0302",
            "widehat": "\u0302", "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308", "check": "\u030c"}  # fmt: skip
_THIN = "\x00"  # a thin space: one space between symbols, none beside a space (resolved by :func:`latex`)
_ESCAPES = {",": _THIN, ";": _THIN, ":": _THIN, "!": "", " ": " ", "{": "{", "}": "}", "_": "_", "%": "%",
            "&": "&", "#": "#", "$": "$", "|": "‖", "\\": "\n"}  # fmt: skip
_DOUBLE_STRUCK = {"R": "ℝ", "E": "𝔼", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ", "P": "ℙ", "1": "𝟙"}
_BOLD_DIGITS = dict(zip("0123456789", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", strict=True))
_SUP = dict(zip("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ", strict=True))
_SUB = dict(zip("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎", strict=True))
_BINARY = set("+-=<>·×±∓∈∉≤≥≠≈~∝⊂⊆∪∩→←⇒⇔|/,;: ")

#: Relations, arrows and binary operators: set off by spaces, as LaTeX does (``t\\in S`` -> ``t ∈ S``).
_SPACED = {
    "le", "leq", "ge", "geq", "ne", "neq", "approx", "simeq", "equiv", "propto", "ll", "gg", "succeq",
    "preceq", "succ", "prec", "in", "notin", "ni", "subset", "subseteq", "supset", "setminus", "times",
    "cdot", "div", "pm", "mp", "odot", "otimes", "oplus", "to", "rightarrow", "leftarrow", "gets",
    "mapsto", "Rightarrow", "Leftarrow", "Leftrightarrow", "iff", "implies", "cup", "cap", "mid",
}  # fmt: skip
#: Opening delimiters: the spaces after them are dropped (``\\lVert x \\rVert`` -> ``‖x‖``).
_OPENING = {"lVert", "lvert", "langle", "lfloor", "lceil"}
#: Closing delimiters: the spaces before them are dropped (marked with ``_CLOSE`` until :func:`latex` ends).
_CLOSING = {"rVert", "rvert", "rangle", "rfloor", "rceil"}
_CLOSE = "\x01"
_PAD = "\x03"  # alignment padding of an environment's columns (kept by :func:`latex`'s space collapsing)

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\s+|.", re.S)


def _tokens(tex: str) -> list[str]:
    return _TOKEN.findall(tex)


class _Parser:
    """Recursive descent over LaTeX tokens; :meth:`expr` renders up to a closing brace (or the end)."""

    def __init__(self, tex: str) -> None:
        self.toks = _tokens(tex)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def skip_space(self) -> None:
        while (t := self.peek()) is not None and t.isspace():
            self.i += 1

    def expr(self, until: str | None = None) -> str:
        out: list[str] = []
        while (t := self.peek()) is not None:
            if t == until:
                self.i += 1
                break
            if t == "}":  # unbalanced: keep it
                self.i += 1
                out.append("}")
                continue
            if t in "^_":
                self.i += 1
                if out:
                    out[-1] = out[-1].rstrip()  # the script belongs to the symbol before it
                out.append(_script(self.arg(), t))
                continue
            out.append(self.atom())
        return "".join(out)

    def raw_group(self) -> str:
        """The source of a ``{...}`` argument, unparsed (for ``\\text`` and environment names)."""
        self.skip_space()
        if self.peek() != "{":
            return self._take() or ""  # a one-token argument
        self.i += 1
        depth, out = 1, []
        while (t := self._take()) is not None:
            depth += (t == "{") - (t == "}")
            if depth == 0:
                break
            out.append(t)
        return "".join(out)

    def _take(self) -> str | None:
        t = self.peek()
        if t is not None:
            self.i += 1
        return t

    def _operand_follows(self) -> bool:
        """Whether the next token (spaces skipped) starts an operand: then ``a/b`` needs parentheses
        (``\\frac{1}{a}(1 - x)`` -> ``(1/a)(1 - x)``, not ``1/a(1 - x)``)."""
        j = self.i
        while j < len(self.toks) and (self.toks[j].isspace() or self.toks[j].lstrip("\\") in _NOTHING):
            j += 1
        if j >= len(self.toks):
            return False
        t = self.toks[j]
        if t.startswith("\\") and len(t) > 2:
            name = t[1:]
            return name not in _SPACED and name not in _CLOSING and name not in ("quad", "qquad", "end")
        return t.isalnum() or t in "({["

    def arg(self) -> str:
        """One argument: a ``{...}`` group or a single token (with its own arguments if a command)."""
        self.skip_space()
        t = self.peek()
        if t is None:
            return ""
        if t == "{":
            self.i += 1
            return self.expr("}")
        return self.atom()

    def atom(self) -> str:
        t = self._take()
        assert t is not None
        if t == "{":
            return self.expr("}")
        if t.isspace():
            return " "
        if not t.startswith("\\"):
            return "" if t == "&" else t  # alignment points are handled by the environment
        name = t[1:]
        if len(name) == 1 and not name.isalpha():
            return _ESCAPES.get(name, name)
        return self.command(name)

    def command(self, name: str) -> str:
        if name in SYMBOLS:
            if name in _OPENING:
                self.skip_space()
            if name in _CLOSING:
                return _CLOSE + SYMBOLS[name]
            return f" {SYMBOLS[name]} " if name in _SPACED else SYMBOLS[name]
        if name in _NOTHING:
            return ""
        if name in _TEXT:
            return self.raw_group()
        if name in _FONTS:
            inner = self.arg()
            return "".join(_BOLD_DIGITS.get(c, c) for c in inner) if name == "mathbf" else inner
        if name == "mathbb":
            inner = self.arg()
            return "".join(_DOUBLE_STRUCK.get(c, c) for c in inner)
        if name in _ACCENTS:
            inner = self.arg()
            return inner + _ACCENTS[name] if _symbols(inner) == 1 else f"{name}({inner})"
        if name in ("frac", "tfrac", "dfrac"):
            num, den = self.arg(), self.arg()
            frac = f"{_paren(num)}/{_paren(den)}"
            return f"({frac})" if self._operand_follows() else frac
        if name == "sqrt":
            return "√" + _paren(self.arg())
        if name == "begin":
            return self.environment(self.raw_group())
        if name == "end":
            self.raw_group()
            return ""
        group = "{" + self.arg() + "}" if self.peek() == "{" else ""
        return "\\" + name + group  # unknown: kept visibly (with its argument's braces), never dropped

    def environment(self, env: str) -> str:
        """``aligned``, ``gathered``, ``cases``, ``array``...: rows on lines, ``&`` columns aligned."""
        start = self.i
        depth = 1
        while (t := self._take()) is not None:
            if t == "\\begin":
                depth += 1
            elif t == "\\end":
                depth -= 1
                if depth == 0:
                    break
        body = "".join(self.toks[start : self.i - 1])
        self.raw_group()  # {env}
        rows = [r for r in re.split(r"\\\\", body) if r.strip()]
        cells = [[_latex(c, final=False).strip() for c in re.split(r"(?<!\\)&", row)] for row in rows]
        return _align_rows(cells, brace=env == "cases")


def _align_rows(cells: list[list[str]], *, brace: bool = False) -> str:
    width = max((len(r) for r in cells), default=0)
    cols = [max((display_width(r[k]) for r in cells if k < len(r)), default=0) for k in range(width)]
    lines = []
    for r in cells:
        parts = [c + _PAD * (cols[k] - display_width(c)) for k, c in enumerate(r)]
        # cells apart by one space; an empty cell (``&&``, before a comment column) by three more
        line = "".join(p + (_PAD if c else _PAD * 3) for p, c in zip(parts, r, strict=True))
        lines.append(("{ " if brace else "") + line.rstrip(_PAD + " "))
    return "\n".join(lines)


def _paren(s: str) -> str:
    """``s`` as an operand: bare when it is one symbol (``a``, ``τ``, ``12``, ``x₀``), else ``(s)``."""
    s = s.strip()
    if _is_atom(s) or (s.startswith("(") and s.endswith(")") and s.count("(") == 1):
        return s
    return f"({s})"


def _symbols(s: str) -> int:
    """Characters of ``s`` that take a column (combining accents do not)."""
    return sum(not unicodedata.combining(c) for c in unicodedata.normalize("NFD", s))


def _is_atom(s: str) -> bool:
    """One operand: a number, a word (``max``, ``dec``, ``V1``) or one symbol with its accents and
    subscript digits (``x̄``, ``B₀``)."""
    if not s or s.replace(".", "", 1).isdigit() or re.fullmatch(r"\w+", s):
        return True
    return _symbols(s) == 1 or (s[0].isalpha() and all(c in _SUB_CHARS for c in s[1:]))


_SUB_CHARS = set(_SUB.values())


def _script(content: str, kind: str) -> str:
    """``^{content}`` / ``_{content}``: Unicode super/subscript characters when every character has one
    (``x²``, ``B₀``, ``Wᵀ``), else ``^x`` / ``_x`` for one symbol and ``^(...)`` / ``_(...)`` otherwise."""
    content = content.strip()
    table = _SUP if kind == "^" else _SUB
    if kind == "^" and content in ("ᵀ", "′", "†", "*", "∗"):
        return content
    if content and all(c in table for c in content):
        return "".join(table[c] for c in content)
    if _is_atom(content):
        return kind + content
    return f"{kind}({content})"


def latex(tex: str) -> str:
    """A LaTeX formula as readable Unicode text (module docstring)."""
    return _latex(tex, final=True)


def _latex(tex: str, *, final: bool) -> str:
    """:func:`latex`; with ``final=False`` (an environment's cell) the spacing marks stay for the caller."""
    text = _Parser(tex).expr()
    text = re.sub(f" *{_THIN}+ *", " ", text)
    text = re.sub(f" *{_CLOSE}", "", text)
    text = re.sub(r"(?<=\S) {2,}", " ", text)  # math ignores spaces: one at most between symbols
    text = re.sub(r"([(\[]) +| +([)\]])", lambda m: m[1] or m[2], text)  # no space inside brackets
    if final:
        text = text.replace("\x02", "  ").replace(_PAD, " ")  # \quad, alignment
    return re.sub(r"[ \t]+\n", "\n", text)


# -------------------------------------------------------------------------------------------------- Markdown
def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: combining marks take none, wide (East Asian) characters two."""
    width = 0
    for c in text:
        if unicodedata.combining(c) or c in "\u200b\u200d":
            continue
        width += 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
    return width


_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:[^$\\]|\\.)+?)(?<!\\)\$")
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)
_EMPH = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")

_BOLD_ON, _OFF, _UNDERLINE_ON = "\x1b[1m", "\x1b[0m", "\x1b[4m"


def _inline(text: str, color: bool) -> str:
    """Inline Markdown and ``$...$`` math of one line (or paragraph) as plain text."""
    text = _INLINE_MATH.sub(lambda m: latex(m[1]).replace("\n", " ").strip(), text)
    bold = (lambda m: f"{_BOLD_ON}{m[1]}{_OFF}") if color else (lambda m: m[1])
    text = _BOLD.sub(bold, text)
    text = _EMPH.sub(lambda m: m[1], text)
    return _LINK.sub(lambda m: f"{m[1]} ({m[2]})", text)


def _split_row(line: str) -> list[str]:
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    cells: list[str] = []
    cur: list[str] = []
    in_math = False
    for i, c in enumerate(row):
        if c == "$" and (i == 0 or row[i - 1] != "\\"):
            in_math = not in_math
        if c == "|" and not in_math and (i == 0 or row[i - 1] != "\\"):
            cells.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    cells.append("".join(cur))
    return [c.strip() for c in cells]


def _table(lines: list[str], color: bool, width: int | None = None) -> list[str]:
    """A Markdown table as aligned columns: ``a │ b`` rows, a ``─┼─`` rule under the header. With ``width``,
    the widest columns are narrowed (to 12 columns at least) and their cells wrapped onto several lines until
    a row fits in ``width``."""
    rows = [[_inline(c, False) for c in _split_row(ln)] for ln in lines if not _TABLE_RULE.match(ln)]
    n = max(len(r) for r in rows)
    rows = [r + [""] * (n - len(r)) for r in rows]
    cols = [max(display_width(r[k]) for r in rows) for k in range(n)]
    if width is not None:
        while sum(cols) + 3 * (n - 1) > width and max(cols) > 12:
            cols[cols.index(max(cols))] -= 1

    def fmt(r) -> list[str]:
        cells = [textwrap.wrap(c, cols[k], break_on_hyphens=False) or [""] for k, c in enumerate(r)]
        height = max(len(c) for c in cells)
        cells = [c + [""] * (height - len(c)) for c in cells]
        return [
            " │ ".join(c[j] + " " * (cols[k] - display_width(c[j])) for k, c in enumerate(cells)) for j in range(height)
        ]

    head = fmt(rows[0])
    out = [f"{_BOLD_ON}{h}{_OFF}" for h in head] if color else head
    out.append("─┼─".join("─" * w for w in cols))
    return out + [line for r in rows[1:] for line in fmt(r)]


def _heading(level: int, text: str, color: bool) -> list[str]:
    title = _inline(text, False)
    rule = {1: "═", 2: "━"}.get(level, "┄") * display_width(title)
    return [f"{_BOLD_ON}{title}{_OFF}" if color else title, rule]


def _open_span(text: str) -> bool:
    """Whether ``text`` ends inside ``$...$`` or ``**...**`` (an odd number of markers)."""
    dollars = len(re.findall(r"(?<![\\$])\$(?!\$)", text))
    return bool(dollars % 2 or len(re.findall(r"\*\*", _INLINE_MATH.sub("", text))) % 2)


def render(markdown: str, *, color: bool = False, width: int | None = None) -> str:
    """A Markdown text with ``$...$``/``$$...$$`` math rendered for a terminal (module docstring); ``color``
    adds ANSI bold to headings, table headers and ``**bold**``; ``width`` (columns) wraps the cells of a table
    wider than that (other lines are kept as SPEC.md breaks them)."""
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):  # fenced code: verbatim, indented
            fence, i = stripped[:3], i + 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                out.append("    " + lines[i])
                i += 1
            i += 1
            continue
        if stripped.startswith("$$"):  # display math: to the closing $$
            body = [stripped[2:]]
            if not (stripped.endswith("$$") and len(stripped) > 2):
                i += 1
                while i < len(lines) and "$$" not in lines[i]:
                    body.append(lines[i])
                    i += 1
                if i < len(lines):
                    body.append(lines[i].strip()[: lines[i].strip().index("$$")])
            else:
                body = [stripped[2:-2]]
            rendered = latex("\n".join(body).strip()).strip("\n")
            out += ["    " + ln.rstrip() for ln in rendered.splitlines() if ln.strip()]
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out += _table(block, color, width)
            continue
        if m := _HEADING.match(line):
            if out and out[-1].strip():
                out.append("")
            out += _heading(len(m[1]), m[2], color)
            i += 1
            continue
        # a paragraph line; an inline formula or a **bold** span may continue on the next lines
        para = line
        while _open_span(para) and i + 1 < len(lines) and lines[i + 1].strip():
            i += 1
            para += "\n" + lines[i]
        text = _inline(para, color)
        bullet = re.match(r"^(\s*)[-*] ", text)
        if bullet:
            text = f"{bullet[1]}• {text[bullet.end() :]}"
        out += text.splitlines() or [""]
        i += 1
    return "\n".join(out).rstrip("\n") + "\n"
