"""What the compiler sees of a candidate: spliced lines, comments gone, macros expanded, directives checked.

The static scan reads this text rather than the file as written, so a token split by a
backslash-newline, a `/*` inside a string, or a macro that expands to a forbidden construct reads
the way the compiler reads it. `check_directives` is also the guard in front of NVRTC: a candidate
may include only the allowed CUDA headers, named literally, so the compiler never opens another file
and no compile log can quote one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALLOWED_INCLUDES = frozenset({
    "cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
})
# Directives an honest kernel uses; anything else (#line, #embed, #import, #include_next, ...) is refused.
ALLOWED_DIRECTIVES = frozenset({"define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "pragma",
                                "include", "error", "warning"})
_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(\w*)(.*)$", re.M)
_INCLUDE_OPERAND = re.compile(r'^\s*(?:<([^<>"\n]+)>|"([^"\n]+)")\s*$')
_FILE_PROBES = re.compile(r"\b__has_include(?:_next)?\b|\b__has_embed\b")
MAX_EXPANSION = 200_000  # characters: a macro bomb is refused, not expanded


@dataclass(frozen=True)
class DirectiveError:
    line: int
    detail: str


def splice_lines(src: str) -> str:
    """Join backslash-newline continuations, then pad with newlines so line numbers stay those of the file."""
    out, pending = [], 0
    for piece in re.split(r"(\\[ \t]*\r?\n)", src):
        if re.fullmatch(r"\\[ \t]*\r?\n", piece):
            pending += 1
            continue
        if pending and "\n" in piece:
            head, _, tail = piece.partition("\n")
            piece = head + "\n" * (pending + 1) + tail
            pending = 0
        out.append(piece)
    return "".join(out) + "\n" * pending


def strip_comments(src: str) -> str:
    """Replace comments by spaces (newlines kept), knowing string, char and raw-string literals."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "R" and src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', src[i:])
            if m:
                end = src.find(")" + m.group(1) + '"', i + m.end())
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append(src[i:end])
                i = end
                continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(src[i: j + 1])
            i = j + 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" ")
            i = j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * src.count("\n", i, j))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def clean(src: str) -> str:
    """Spliced and comment-free text, line numbers kept."""
    return strip_comments(splice_lines(src))


def check_directives(source: str) -> list[DirectiveError]:
    """Every directive must be an allowed one; an #include must name an allowed header literally."""
    text = clean(source)
    errors = []
    for m in _DIRECTIVE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        name, rest = m.group(1), m.group(2)
        if not name:
            continue  # the null directive
        if name not in ALLOWED_DIRECTIVES:
            errors.append(DirectiveError(line, f"directive #{name} is not allowed"))
        elif name == "include":
            inc = _INCLUDE_OPERAND.match(rest)
            header = inc and (inc.group(1) or inc.group(2))
            if not header:
                errors.append(DirectiveError(line, "#include must name a header literally (<name> or \"name\"), "
                                                   "not through a macro"))
            elif header not in ALLOWED_INCLUDES:
                errors.append(DirectiveError(line, f"#include {header} is not on the allow list "
                                                   f"({', '.join(sorted(ALLOWED_INCLUDES))})"))
    for m in _FILE_PROBES.finditer(text):
        errors.append(DirectiveError(text.count("\n", 0, m.start()) + 1, f"{m.group(0)} probes files outside the allow list"))
    return errors


_TOKEN = re.compile(r'R"(?P<d>[^()\\\s]{0,16})\(.*?\)(?P=d)"|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|'
                    r"[A-Za-z_]\w*|\d[\w.]*|##|#|\s+|.", re.S)


@dataclass
class _Macro:
    params: list[str] | None  # None: object-like
    body: list[str]
    variadic: bool = False


def _tokens(text: str) -> list[str]:
    return [m.group(0) for m in _TOKEN.finditer(text)]


def _parse_define(rest: str) -> tuple[str, _Macro] | None:
    m = re.match(r"\s*([A-Za-z_]\w*)(\([^)]*\))?", rest)
    if not m:
        return None
    params = None
    variadic = False
    if m.group(2) is not None:
        params = [p.strip() for p in m.group(2)[1:-1].split(",") if p.strip()]
        if params and params[-1].endswith("..."):
            variadic = True
            params[-1] = params[-1][:-3].strip() or "__VA_ARGS__"
    return m.group(1), _Macro(params, _tokens(rest[m.end():].strip()), variadic)


class _Expander:
    def __init__(self, macros: dict[str, _Macro]) -> None:
        self.macros = macros
        self.size = 0

    def expand(self, toks: list[str], hide: frozenset[str] = frozenset()) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            mac = self.macros.get(t)
            if mac is None or t in hide:
                out.append(t)
                i += 1
                continue
            if mac.params is None:
                body = self._paste(mac.body)
                out += self.expand(body, hide | {t})
                i += 1
            else:
                j = i + 1
                while j < len(toks) and toks[j].isspace():
                    j += 1
                if j >= len(toks) or toks[j] != "(":
                    out.append(t)
                    i += 1
                    continue
                args, end = self._args(toks, j)
                out += self.expand(self._substitute(mac, args, hide), hide | {t})
                i = end
            self.size += sum(map(len, out[-64:]))
            if self.size > MAX_EXPANSION:
                raise ValueError("macro expansion too large")
        return out

    @staticmethod
    def _args(toks: list[str], open_at: int) -> tuple[list[list[str]], int]:
        depth, cur, args = 0, [], []
        i = open_at
        while i < len(toks):
            t = toks[i]
            if t == "(":
                depth += 1
                if depth > 1:
                    cur.append(t)
            elif t == ")":
                depth -= 1
                if depth == 0:
                    args.append(cur)
                    return args, i + 1
                cur.append(t)
            elif t == "," and depth == 1:
                args.append(cur)
                cur = []
            else:
                cur.append(t)
            i += 1
        args.append(cur)
        return args, i

    def _substitute(self, mac: _Macro, args: list[list[str]], hide: frozenset[str]) -> list[str]:
        params = mac.params or []
        if mac.variadic and len(args) > len(params):
            args = args[: len(params) - 1] + [sum(([*a, ","] for a in args[len(params) - 1:]), [])[:-1]]
        amap = {p: (args[k] if k < len(args) else []) for k, p in enumerate(params)}
        out: list[str] = []
        body = mac.body
        k = 0
        while k < len(body):
            t = body[k]
            if t == "#" and k + 1 < len(body):
                n = k + 1
                while n < len(body) and body[n].isspace():
                    n += 1
                if n < len(body) and body[n] in amap:
                    text = "".join(amap[body[n]]).strip()
                    out.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
                    k = n + 1
                    continue
            if t in amap:
                pasted = (k + 1 < len(body) and body[k + 1].strip() == "##") or (out and out[-1] == "##")
                out += amap[t] if pasted else self.expand(amap[t], hide)
            else:
                out.append(t)
            k += 1
        return self._paste(out)

    @staticmethod
    def _paste(toks: list[str]) -> list[str]:
        toks = [t for t in toks]
        out: list[str] = []
        i = 0
        while i < len(toks):
            if toks[i] == "##" and out:
                while out and out[-1].isspace():
                    out.pop()
                j = i + 1
                while j < len(toks) and toks[j].isspace():
                    j += 1
                if j < len(toks):
                    out[-1] = out[-1] + toks[j] if out else toks[j]
                    i = j + 1
                    continue
            out.append(toks[i])
            i += 1
        return _tokens("".join(out))


def preprocess(source: str) -> str:
    """The candidate with lines spliced, comments removed and its own macros expanded (headers not read).

    Every conditional branch is kept (a stricter reading than the compiler's), directives become blank
    lines, and line numbers stay those of the file."""
    text = clean(source)
    macros: dict[str, _Macro] = {}
    lines = text.split("\n")
    out_lines: list[str] = []
    exp = _Expander(macros)
    for line in lines:
        d = _DIRECTIVE.match(line)
        if d:
            if d.group(1) == "define":
                parsed = _parse_define(d.group(2))
                if parsed:
                    macros[parsed[0]] = parsed[1]
            elif d.group(1) == "undef":
                macros.pop(d.group(2).strip(), None)
            out_lines.append(line if d.group(1) in ("include", "pragma") else "")
            continue
        try:
            out_lines.append("".join(exp.expand(_tokens(line))).replace("\n", " "))
        except (ValueError, RecursionError):
            out_lines.append('__macro_expansion_refused__ ' + line)
    return _join_strings("\n".join(out_lines))


def _join_strings(text: str) -> str:
    """Adjacent string literals become one, as in translation phase 6 (an asm template split into pieces);
    the newlines between them follow the joined literal, so line numbers stay."""
    toks = _tokens(text)
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith('"'):
            body, nl = t[1:-1], 0
            j = i + 1
            while True:
                k = j
                while k < len(toks) and toks[k].isspace():
                    k += 1
                if k < len(toks) and toks[k].startswith('"') and k > j - 1:
                    nl += sum(toks[m].count("\n") for m in range(j, k))
                    body += toks[k][1:-1]
                    j = k + 1
                    continue
                break
            out.append('"' + body + '"' + "\n" * nl)
            i = j
            continue
        out.append(t)
        i += 1
    return "".join(out)
