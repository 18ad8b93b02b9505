"""What an issue names that a model would look up with a tool: file paths it would `read`, and code names it would
look up with `symbol` or `grep` — the rule bench/tools_reach.py measures the tools with, written down in one place.

The rule (a plausible model, not the product's own mention finder, retrieve/mentions.py):

1. Paths: `a/b/c.ext` with a code or config extension, in the text or in a URL's path, and `File "...", line N`
   frames of a traceback (innermost frame first, where the error was raised). A path is kept when it, or a suffix of
   it of two parts or more (an absolute path, a URL to the repository on GitHub), is a file of the repository or the
   end of exactly one (an installed package's `site-packages/pkg/a.py` is the repository's `src/pkg/a.py`); a bare
   file name (`basic.py`) when exactly one file has that name.
2. Names, each kind in order of first appearance, each name once:
   a. backticked spans (single backticks): the name they start with (`foo.bar(x)` -> foo.bar);
   b. dotted names in prose (`a.b.c`, Rust's `a::b`), `self.`/`this.`/`cls.` left off;
   c. CamelCase (two humps or more: `ModelSerializer`, `isBetween`, `HTTPServer`);
   d. snake_case (`max_age`, `MAX_AGE`);
   e. dotted names in code blocks (often a local's attribute, `res.replace`: late);
   f. names called in code (`simplify(`, no space before the parenthesis), three characters or more.
   Never a keyword or builtin of Python, JavaScript, Go or Rust, an English stopword, a dunder, a name of one or two
   characters, a dunder or a dotted name ending in one (`pvlib.__version__`, `M.T`), or a
   product name (GitHub, JavaScript, ...).
"""
from __future__ import annotations

import builtins
import keyword
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

EXTENSIONS = ("py|pyi|pyx|js|jsx|mjs|cjs|ts|tsx|mts|cts|go|rs|toml|json|ya?ml|cfg|ini|md|rst|c|h|cc|cpp|hpp|java|rb|"
              "php|sh|css|scss|html|vue|svelte")
_URL = re.compile(r"https?://[^\s)\]>\"'`]+")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_FRAME = re.compile(r'File "([^"]+)", line \d+')
_PATH = re.compile(rf"(?<![\w/.$-])(?:[\w.@-]+/)*[\w.-]*[A-Za-z_][\w-]*\.(?:{EXTENSIONS})(?![\w/])")
_BACKTICK = re.compile(r"(?<!`)`([^`\n]{1,120})`(?!`)")
_LEADING = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*")
_DOTTED = re.compile(r"(?<![\w.$:])[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)+(?![\w$])")
_CAMEL = re.compile(r"(?<![\w$\\])(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|"
                    r"[A-Z]{2,}[a-z][A-Za-z0-9]*)(?![\w$])")
_SNAKE = re.compile(r"(?<![\w$\\])_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w$])")
_CALL = re.compile(r"(?<![\w.$\\])([A-Za-z_$][\w$]{2,})\(")

_JS = ("console Object Array Promise JSON Math String Number Boolean Date Error TypeError RangeError Symbol Map Set "
       "require module exports function return undefined null true false typeof instanceof setTimeout parseInt "
       "parseFloat isNaN window document const let var async await this").split()
_GO = "fmt func Println Printf Sprintf Errorf err nil make append string error interface struct package".split()
_RUST = ("println eprintln format vec Some None Ok Err Vec String Option Result Box unwrap expect clone self Self fn "
         "impl struct enum trait pub mod use crate super where mut dyn ref move loop match static unsafe extern "
         "type").split()
_PRODUCTS = ("GitHub JavaScript TypeScript MacOS macOS iOS PyPI NumPy SymPy SciPy PyCharm VSCode YouTube LinkedIn "
             "StackOverflow JetBrains OpenAI ChatGPT LaTeX MathML").split()
_STOPWORDS = ("the and for with that this from have not but are was were can could should would will what when "
              "where which while then than there these those into onto also just like use using used get got see "
              "try let may might must shall any all some one two").split()
NOT_NAMES = frozenset({*keyword.kwlist, *dir(builtins), *_JS, *_GO, *_RUST, *_PRODUCTS, *_STOPWORDS,
                       "self", "cls", "args", "kwargs", "Traceback", "e.g", "i.e", "etc", "vs"})
_OWNERS = ("self.", "this.", "cls.")


@dataclass(frozen=True)
class Named:
    kind: str  # path | backtick | dotted | camel | snake | call
    text: str  # a repository path (kind path), else the name as a model would look it up


def _name(raw: str) -> str | None:
    """A name as looked up: the owner prefix left off; None when it is no code name."""
    for owner in _OWNERS:
        raw = raw.removeprefix(owner)
    parts = re.split(r"\.|::", raw)
    if raw.lower() in {n.lower() for n in ("e.g", "i.e")} or not all(parts):
        return None
    if re.fullmatch(r"__\w+__", parts[-1]) or len(parts) > 1 and len(parts[-1]) < 2:
        return None
    if len(parts) == 1 and (len(raw) < 3 or raw in NOT_NAMES or raw.lower() in _STOPWORDS):
        return None
    return raw


def _resolve(raw: str, files: list[str], by_name: dict[str, list[str]]) -> str | None:
    """A path as written, as a file of the repository: itself, its longest suffix that is one, or (a bare name) the
    one file of that name."""
    path = raw.strip().strip("'\"").replace("\\", "/").split("#")[0].split("?")[0]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        return None
    known = set(files)
    if len(parts) == 1:
        found = by_name.get(parts[0], [])
        return found[0] if len(found) == 1 else None
    for start in range(len(parts) - 1):
        candidate = "/".join(parts[start:])
        if candidate in known:
            return candidate
        below = [f for f in files if f.endswith("/" + candidate)]  # site-packages/pkg/a.py -> src/pkg/a.py
        if len(below) == 1:
            return below[0]
    return None


def named(text: str, files: list[str], limit: int | None = None) -> list[Named]:
    """What the issue `text` names, in the order a model would look it up (module docstring); `files`: the
    repository's visible files, to resolve paths against."""
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(posixpath.basename(f), []).append(f)
    found: list[Named] = []
    seen: set[str] = set()

    def add(kind: str, value: str | None) -> None:
        if value and value not in seen:
            seen.add(value)
            found.append(Named(kind, value))

    urls = _URL.findall(text)
    plain = _URL.sub(" ", text)
    frames = [m.group(1) for m in _FRAME.finditer(plain)]
    for raw in reversed(frames):  # the innermost frame first: where the error was raised
        add("path", _resolve(raw, files, by_name))
    linked = [urlsplit(u).path for u in urls if re.search(rf"\.(?:{EXTENSIONS})$", urlsplit(u).path)]
    for raw in [*(m.group() for m in _PATH.finditer(plain)), *linked]:
        add("path", _resolve(raw, files, by_name))
    words = _FRAME.sub(" ", _PATH.sub(" ", plain))
    outside = _FENCE.sub(" ", words)
    for span in _BACKTICK.findall(outside):
        lead = _LEADING.match(span.strip())
        add("backtick", _name(lead.group()) if lead else None)
    code = "\n".join(_FENCE.findall(words))
    for regex, kind, where in ((_DOTTED, "dotted", outside), (_CAMEL, "camel", words), (_SNAKE, "snake", words),
                               (_DOTTED, "dotted", code)):  # a.b in code is often a local's attribute: late
        for match in regex.finditer(where):
            add(kind, _name(match.group()))
    for match in _CALL.finditer(words):
        add("call", _name(match.group(1)))
    return found[:limit] if limit is not None else found
