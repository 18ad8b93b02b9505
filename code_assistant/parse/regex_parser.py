"""Regex fallback parser: line regexes for languages without a grammar, and for files tree-sitter cannot parse."""
from __future__ import annotations

import re

from code_assistant.parse.code_model import CLASSLIKE, Import, Symbol, one_line

__all__ = ["regex_imports", "regex_references", "regex_symbols"]


_MODS = r"(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override|virtual|async|native|" \
        r"sealed|default|open|suspend|inline|export|declare|readonly)\s+)*"
_NOT_KW = r"(?!(?:if|for|while|switch|catch|return|new|else|do|try|with|elif|until|unless|case|when|sizeof)\b)"
_JS_RX = [
    (r"^(?P<indent>\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*(?P<name>\w+)", "function"),
    (r"^(?P<indent>\s*)(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?P<kw>class|interface|enum)\s+(?P<name>\w+)", "@"),
    (r"^(?P<indent>\s*)(?:export\s+)?(?:const|let|var)\s+(?P<name>\w+)\s*(?::[^=]+)?=\s*(?:async\s+)?"
     r"(?:function\b|(?:\([^)]*\)|\w+)\s*(?::[^=]+)?=>)", "function"),
    (rf"^(?P<indent>\s+){_MODS}{_NOT_KW}(?P<name>\w+)\s*\([^;]*\)\s*(?::\s*[^{{;]+)?\{{\s*$", "function"),
]
_JVM_RX = [
    (rf"^(?P<indent>\s*)(?:@\w+(?:\([^)]*\))?\s+)*{_MODS}(?:data\s+|case\s+)?"
     r"(?P<kw>class|interface|enum|record|object|struct|protocol|trait)\s+(?P<name>\w+)", "@"),
    (rf"^(?P<indent>\s+){_MODS}(?:<[^>]+>\s+)?[\w<>\[\],.?]+\s+{_NOT_KW}(?P<name>\w+)\s*\([^;]*$", "function"),
    (rf"^(?P<indent>\s*){_MODS}(?:fun|def|func)\s+(?:<[^>]*>\s*)?(?:\w+\.)?(?P<name>\w+)", "function"),
]
_RX_SOURCE: dict[str, list[tuple[str, str]]] = {
    "python": [(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?def[ \t]+(?P<name>\w+)", "function"),
               (r"^(?P<indent>[ \t]*)class[ \t]+(?P<name>\w+)", "class")],
    "javascript": _JS_RX, "typescript": _JS_RX, "tsx": _JS_RX, "vue": _JS_RX,
    "go": [(r"^(?P<indent>)func\s+\(\s*(?:\w+\s+)?\*?\s*(?P<recv>\w+)[^)]*\)\s*(?P<name>\w+)", "method"),
           (r"^(?P<indent>)func\s+(?P<name>\w+)", "function"),
           (r"^(?P<indent>)type\s+(?P<name>\w+)(?:\[[^\]]*\])?\s+(?P<kw>struct|interface)\b", "@")],
    "rust": [(r"^(?P<indent>\s*)(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s+\"\w+\")\s+)*fn\s+"
              r"(?P<name>\w+)", "function"),
             (r"^(?P<indent>\s*)(?:pub(?:\([^)]*\))?\s+)?(?P<kw>struct|enum|trait|union)\s+(?P<name>\w+)", "@"),
             (r"^(?P<indent>\s*)impl\b(?:<[^>]*>)?\s+(?:[\w:]+(?:<[^>]*>)?\s+for\s+)?(?P<name>\w+)", "impl")],
    "java": _JVM_RX, "csharp": _JVM_RX, "kotlin": _JVM_RX, "scala": _JVM_RX, "swift": _JVM_RX,
    "ruby": [(r"^(?P<indent>\s*)def\s+(?:self\.)?(?P<name>\w+[?!=]?)", "function"),
             (r"^(?P<indent>\s*)(?P<kw>class|module)\s+(?P<name>[\w:]+)", "@")],
    "php": [(rf"^(?P<indent>\s*){_MODS}function\s+&?(?P<name>\w+)", "function"),
            (r"^(?P<indent>\s*)(?:abstract\s+|final\s+)?(?P<kw>class|interface|trait|enum)\s+(?P<name>\w+)", "@")],
    "c": [(rf"^(?P<indent>){_NOT_KW}(?!typedef\b)[\w\*&:<>, ]*?\b(?P<name>[\w:~]+)\s*\([^;=]*$", "function"),
          (r"^(?P<indent>)(?:typedef\s+)?(?P<kw>struct|class|enum|union)\s+(?P<name>\w+)[^;]*$", "@")],
    "shell": [(r"^(?P<indent>\s*)(?:function\s+)?(?P<name>[\w-]+)\s*\(\)", "function"),
              (r"^(?P<indent>\s*)function\s+(?P<name>[\w-]+)\s*\{?\s*$", "function")],
}
_RX_SOURCE["cpp"] = _RX_SOURCE["c"]
_RX = {lang: [(re.compile(p), k) for p, k in pats] for lang, pats in _RX_SOURCE.items()}
_KW_KIND = {"class": "class", "interface": "interface", "enum": "enum", "record": "class", "object": "class",
            "struct": "struct", "protocol": "interface", "trait": "trait", "union": "struct", "module": "module"}
_LEAD_RX = re.compile(r"^\s*(#|//|/\*|\*|@|--)")
_BRACE_NOISE = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|//.*$|#.*$')


def _block_end(lines: list[str], i: int, style: str, indent: int) -> int:
    """0-based last row of the definition starting at row i."""
    if style in ("indent", "ruby"):
        last = i
        for j in range(i + 1, len(lines)):
            text = lines[j]
            stripped = text.strip()
            if not stripped:
                continue
            if len(text) - len(text.lstrip()) <= indent and not stripped.startswith((")", "]", "}")):
                if style == "ruby" and re.match(r"end\b", stripped):
                    return j
                return last
            last = j
        return last
    depth, opened = 0, False
    for j in range(i, len(lines)):
        code = _BRACE_NOISE.sub("", lines[j]) if "#" not in lines[j] or style != "brace-hash" else lines[j]
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth <= 0:
            return j
        if not opened and (code.rstrip().endswith(";") or (j > i and "=" in code and j - i > 3) or j - i > 8):
            return j if code.rstrip().endswith(";") else i
    return i


def regex_symbols(language: str | None, source: str) -> tuple[list[Symbol], dict[tuple[str, int], tuple[int, int]]]:
    """Definitions found by line regexes; ranges from indentation (Python), `end` (Ruby) or brace counting."""
    patterns = _RX.get(language or "")
    if not patterns:
        return [], {}
    lines = source.splitlines()
    style = {"python": "indent", "ruby": "ruby"}.get(language or "", "brace")
    found: list[tuple[int, int, str, str, str]] = []  # (start row, end row, name, kind, receiver)
    for i, line in enumerate(lines):
        for pattern, kind in patterns:
            match = pattern.match(line)
            if match is None:
                continue
            groups = match.groupdict()
            kind = _KW_KIND[groups["kw"]] if kind == "@" else kind
            end = _block_end(lines, i, style, len(groups["indent"].expandtabs()))
            found.append((i, end, groups["name"], kind, groups.get("recv") or ""))
            break
    symbols: list[Symbol] = []
    bodies: dict[tuple[str, int], tuple[int, int]] = {}
    stack: list[tuple[int, str, str]] = []
    for start, end, name, kind, receiver in sorted(found, key=lambda f: (f[0], -f[1])):
        while stack and stack[-1][0] < start:
            stack.pop()
        parent = receiver or (stack[-1][1] if stack else None)
        if kind == "function" and (receiver or (stack and stack[-1][2] in CLASSLIKE)):
            kind = "method"
        qualname = f"{parent}.{name}" if parent else name
        stack.append((end, qualname, kind))
        if kind == "impl":
            qualname, parent = f"impl {name}", None
        first = start
        while first > 0 and lines[first - 1].strip() and _LEAD_RX.match(lines[first - 1]):
            first -= 1
        header_end = start
        opener = ":" if style == "indent" else ("{" if style == "brace" else "")
        while opener and header_end < min(end, start + 10) and opener not in lines[header_end]:
            header_end += 1
        body_first, body_last = header_end + 2, end + 1
        if style == "ruby" or (style == "brace" and lines[end].strip().startswith("}")):
            body_last -= 1
        if body_first <= body_last:
            bodies[(qualname, first + 1)] = (body_first, body_last)
        signature = one_line("\n".join(lines[start:header_end + 1])).rstrip("{").rstrip()
        symbols.append(Symbol(name=name, qualname=qualname, kind=kind, start_line=first + 1, end_line=end + 1,
                              signature=signature, parent=parent))
    return symbols, bodies


_RX_IMPORTS: dict[str, list[re.Pattern[str]]] = {
    "python": [re.compile(r"^\s*from\s+(?P<dots>\.*)(?P<mod>[\w.]*)\s+import\s+\(?(?P<names>[^)#\n]*)"),
               re.compile(r"^\s*import\s+(?P<mod>[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")],
    "javascript": [re.compile(r"""(?:import|export)\s[^'"]*?from\s*['"](?P<mod>[^'"]+)['"]"""),
                   re.compile(r"""^\s*import\s*['"](?P<mod>[^'"]+)['"]"""),
                   re.compile(r"""\b(?:require|import)\s*\(\s*['"](?P<mod>[^'"]+)['"]\s*\)""")],
    "go": [re.compile(r'^\s*(?:import\s+)?(?:\w+\s+)?"(?P<mod>[\w./-]+)"\s*$')],
    "java": [re.compile(r"^\s*import\s+(?:static\s+)?(?P<mod>[\w.]+?)(?P<star>\.\*)?\s*;")],
    "rust": [re.compile(r"^\s*(?:pub\s+)?use\s+(?P<mod>[\w:]+)"),
             re.compile(r"^\s*(?:pub\s+)?mod\s+(?P<self>\w+)\s*;")],
    "ruby": [re.compile(r"""^\s*require(?:_relative)?\s*\(?\s*['"](?P<mod>[^'"]+)['"]""")],
    "php": [re.compile(r"^\s*(?:use|require_once|include_once|require|include)\s*\(?\s*['\"]?(?P<mod>[\w\\/.-]+)")],
    "c": [re.compile(r'^\s*#\s*include\s*[<"](?P<mod>[^>"]+)[>"]')],
}
for _alias, _base in {"typescript": "javascript", "tsx": "javascript", "vue": "javascript", "cpp": "c"}.items():
    _RX_IMPORTS[_alias] = _RX_IMPORTS[_base]


def regex_imports(language: str | None, source: str) -> list[Import]:
    patterns = _RX_IMPORTS.get(language or "", [])
    imports: list[Import] = []
    for number, line in enumerate(source.splitlines(), 1):
        for pattern in patterns:
            for match in pattern.finditer(line):
                groups = match.groupdict()
                if groups.get("self"):
                    imports.append(Import(module=f"self::{groups['self']}", names=(), line=number))
                elif "names" in groups:
                    names = tuple(n.split(" as ")[0].strip() for n in groups["names"].split(",") if n.strip())
                    imports.append(Import(module=groups["mod"], names=names, level=len(groups["dots"]), line=number))
                elif language == "python":
                    imports.extend(Import(module=m.split(" as ")[0].strip(), names=(), line=number)
                                   for m in groups["mod"].split(","))
                else:
                    imports.append(Import(module=groups["mod"], names=("*",) if groups.get("star") else (),
                                          line=number))
            if imports and imports[-1].line == number:
                break
    return imports


_KEYWORDS = set("""and as assert async await break case catch class const continue def default defer del do elif else
enum export extends false final finally fn for from func function go if impl import in interface is lambda let loop
match mod module mut new nil none not null or package pass private protected pub public raise return self static
struct super switch this throw throws trait true try type typeof use var void while with yield end begin unless
then elsif require nonlocal global def""".split())
_IDENT_RX = re.compile(r"\b[A-Za-z_]\w*")


def regex_references(language: str | None, source: str) -> set[str]:
    if language in (None, "markdown", "text", "json", "yaml", "toml", "ini"):
        return set()
    return {w for w in _IDENT_RX.findall(source) if w.lower() not in _KEYWORDS and len(w) > 1}
