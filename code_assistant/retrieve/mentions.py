"""What a task names outright: repository paths and modules, traceback frames, code identifiers and file stems, and
what kind of file each path is (code, test, aux, other)."""
from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from code_assistant import languages
from code_assistant.index.indexer import RepoIndex

_TRACE_RES = (
    re.compile(r'File "([^"]+)", line (\d+)'),
    re.compile(r"(?:^|[\s(\[])((?:[\w.\-]+/)*[\w.\-]+\.(?:py|js|jsx|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h)):(\d+)"),
)
_PATHLIKE_RE = re.compile(
    r"[\w.\-/]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h|hpp|md|toml|json|ya?ml)\b")
_DOTTED_RE = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b")
_IDENT_RE = re.compile(r"`([^`\n]{2,80})`|\b([A-Za-z_]\w*[a-z]\w*)\b")
_WORD_RE = re.compile(r"\b[A-Za-z_][\w]*\b")
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,})\(")  # `ccode(x)`: a name, whatever it looks like
TEST_TASK_RE = re.compile(r"\b(tests?|testing|pytest|unittest|spec|coverage)\b", re.IGNORECASE)
_AUX_DIRS = {"doc", "docs", "example", "examples", "benchmark", "benchmarks", "bench", ".github", "scripts", "util",
             "utils", "tools", "ci"}
_AUX_FILES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "versioneer.py"}
_CODE_LANGUAGES = languages.EMBEDDED_LANGUAGES - {"markdown", "shell"}


@dataclass
class Mentions:
    paths: list[str]  # files named by path or dotted module, in order of first mention
    traceback: list[tuple[str, int]]
    identifiers: set[str]
    stems: dict[str, str] | None = None  # file -> the word of the task that is its stem (see stem_mentions)
    called: set[str] | None = None  # identifiers the task calls, `name(...)`: code, even when they look like words


def traceback_frames(text: str, repo: Path, known: set[str] | None = None) -> list[tuple[str, int]]:
    """Repository files (repo-relative) and lines named in tracebacks or `file:line` references, in order."""
    frames: list[tuple[str, int]] = []
    for regex in _TRACE_RES:
        for match in regex.finditer(text):
            rel = _to_repo_path(match.group(1), repo, known)
            if rel and (rel, int(match.group(2))) not in frames:
                frames.append((rel, int(match.group(2))))
    return frames


def _to_repo_path(raw: str, repo: Path, known: set[str] | None) -> str | None:
    raw = raw.strip().strip("'\"")
    candidate = Path(raw)
    if candidate.is_absolute():
        try:
            rel = candidate.resolve().relative_to(repo.resolve()).as_posix()
        except (ValueError, OSError):
            rel = _suffix_match(raw, known)
    else:
        rel = raw.removeprefix("./")
    if rel is None:
        return None
    if known is not None:
        return rel if rel in known else _suffix_match(rel, known)
    return rel if (repo / rel).is_file() else None


def _suffix_match(raw: str, known: set[str] | None) -> str | None:
    """The shortest known path that `raw` ends with (site-packages/pkg/mod.py -> pkg/mod.py) or that ends with it."""
    if not known:
        return None
    raw = raw.replace("\\", "/")
    matches = [k for k in known if raw.endswith("/" + k) or k.endswith("/" + raw) or k == raw]
    return min(matches, key=len) if matches else None


def find_mentions(task: str, index: RepoIndex) -> Mentions:
    """Paths, modules, identifiers and file stems the task names outright."""
    known = set(index.files)
    by_name: dict[str, list[str]] = defaultdict(list)
    by_module: dict[str, str] = {}
    for path in sorted(known):  # in one order: an ambiguous module suffix names the same file every run
        by_name[posixpath.basename(path)].append(path)
        if path.endswith(".py"):
            module = path[:-3].replace("/", ".")
            module = module.removesuffix(".__init__")
            for start in range(module.count(".") + 1):  # pkg.mod and src.pkg.mod both name src/pkg/mod.py
                by_module.setdefault(module.split(".", start)[-1], path)
    paths: list[str] = []
    for raw in _PATHLIKE_RE.findall(task):
        rel = _suffix_match(raw.lstrip("./"), known) if "/" in raw else None
        hits = [rel] if rel else by_name.get(Path(raw).name, [])
        if len(hits) <= 2:  # `__init__.py` alone names no particular file
            paths.extend(h for h in hits if h not in paths)
    for dotted in _DOTTED_RE.findall(task):
        parts = dotted.split(".")
        for cut in range(len(parts), 1, -1):  # pkg.mod.Class.method -> pkg.mod
            target = by_module.get(".".join(parts[:cut]))
            if target and target not in paths:
                paths.append(target)
                break
    identifiers: set[str] = set()
    for backticked, word in _IDENT_RE.findall(task):
        for token in re.findall(r"[A-Za-z_]\w+", backticked or word):
            if "_" in token or re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", token) or backticked:
                identifiers.add(token)
    for dotted in _DOTTED_RE.findall(task):
        identifiers.update(p for p in dotted.split(".") if len(p) > 2)
    called = set(_CALL_RE.findall(task))
    identifiers |= called
    mentions = Mentions(paths, traceback_frames(task, index.repo, known), identifiers, called=called)
    mentions.stems = stem_mentions(task, index, identifiers)
    return mentions


def stem_mentions(task: str, index: RepoIndex, identifiers: set[str]) -> dict[str, str]:
    """Source files whose stem the task uses as a word, when that word looks like a name rather than English:
    it has a digit, an underscore or inner capitals, or the task writes it as code. File -> that word."""
    words = set(_WORD_RE.findall(task))
    named = {w for w in words if re.search(r"\d|_|[a-z][A-Z]", w) and len(w) >= 3} | identifiers
    stems: dict[str, str] = {}
    for path in index.files:
        stem = posixpath.splitext(posixpath.basename(path))[0]
        if stem in named and not stem.startswith("__") and kind_of(path) == "code":  # `__init__` names no one file
            stems[path] = stem
    return stems


def kind_of(path: str) -> str:
    """code | test | aux (docs, examples, setup) | other (data, config, prose)."""
    parts = path.split("/")
    if languages.is_test_file(path):
        return "test"
    if languages.language_for(path) not in _CODE_LANGUAGES:
        return "other"
    if parts[-1] in _AUX_FILES or any(p.lower() in _AUX_DIRS for p in parts[:-1]):
        return "aux"
    return "code"
