"""What a task names outright: repository paths and modules, traceback frames, code identifiers and file stems, and
what kind of file each path is (code, test, aux, other)."""
from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from code_assistant import languages
from code_assistant.index.indexer import RepoIndex
from code_assistant.retrieve.file_roles import is_entry, module_stem

_TRACE_RES = (
    re.compile(r'File "([^"]+)", line (\d+)'),
    re.compile(r"(?:^|[\s(\[])((?:[\w.\-]+/)*[\w.\-]+\.(?:py|js|jsx|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h)):(\d+)"),
)
_PATHLIKE_RE = re.compile(
    r"[\w.\-/]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h|hpp|md|toml|json|ya?ml)\b")
_DOTTED_RE = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b")
_RUST_PATH_RE = re.compile(r"\b[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+")  # crate::a::b, tracing_core::dispatcher::get
# import specifiers and package paths (`dayjs/plugin/utc`, `github.com/org/repo/core/logx`, `@scope/pkg/sub`); not
# inside a URL (no word character, `/`, `.` or `-` before it)
_SPEC_RE = re.compile(r"(?<![\w./:-])@?[A-Za-z_][\w.-]*(?:/[A-Za-z_][\w.-]*)+")
_IDENT_RE = re.compile(r"`([^`\n]{2,80})`|\b([A-Za-z_]\w*[a-z]\w*)\b")
_WORD_RE = re.compile(r"\b[A-Za-z_][\w]*\b")
_HYPHENATED_RE = re.compile(r"(?<![\w/.-])[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)+(?![\w/-])")  # tracing-subscriber
_ATTRIBUTE_RE = re.compile(r"#\[\s*(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)")  # #[instrument], #[tracing::instrument(..)]
_DERIVE_RE = re.compile(r"#\[\s*derive\s*\(([^)\]]*)\)")  # #[derive(Serialize, Deserialize)]
_BANG_RE = re.compile(r"(?<![\w!])([A-Za-z_]\w*)!\s*[(\[{]")  # info!(...), vec![...]
_LANGUAGE_MACROS = frozenset(  # Rust's own attributes and std macros: defined by no repository
    "derive cfg cfg_attr test allow deny warn forbid doc inline must_use repr macro_use macro_export non_exhaustive "
    "println print eprintln eprint format format_args vec assert assert_eq assert_ne debug_assert debug_assert_eq "
    "panic write writeln matches dbg todo unimplemented unreachable include_str include_bytes env concat stringify "
    "compile_error line file column module_path Debug Clone Copy PartialEq Eq Hash Default PartialOrd Ord".split())
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,})\(")  # `ccode(x)`: a name, whatever it looks like
# The task asks for tests (test files are then fair candidates, BM25 ranks them too): "add a test", "write unit
# tests", "tests for X", "test coverage" - not a task that only mentions a failing test or quotes a test case
# (BENCHMARKS.md, issue 28: test files then crowded out the module the fix goes to).
TEST_TASK_RE = re.compile(
    r"\b(add|adds|added|adding|write|writes|wrote|writing|create|creates|extend|extends|improve|improves|increase|"
    r"increases|missing|more|new|needs?)\s+(\w+\s+){0,2}(tests?|specs?|test\s+cases?|coverage)\b"
    r"|\b(test|spec)\s+(coverage|suite)\b|\b(tests?|specs?)\s+for\b|\bunit\s?tests?\b", re.IGNORECASE)
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
    packages: list[str] | None = None  # directories named as a package (a Go import path): their files are mates
    macros: set[str] | None = None  # Rust macros and attributes the task uses: `info!`, `#[instrument]`, derives


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
    rust = rust_modules(known)
    for found in _RUST_PATH_RE.findall(task):
        parts = found.split("::")
        for cut in range(len(parts), 1, -1):  # crate::a::b::Item -> the file of crate::a::b (a crate alone: no)
            target = rust.get("::".join(parts[:cut]))
            if target and target not in paths:
                paths.append(target)
                break
    named_files, packages = spec_mentions(task, known)
    paths.extend(p for p in named_files if p not in paths)
    identifiers: set[str] = set()
    for backticked, word in _IDENT_RE.findall(task):
        for token in re.findall(r"[A-Za-z_]\w+", backticked or word):
            if "_" in token or re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", token) or backticked:
                identifiers.add(token)
    for dotted in _DOTTED_RE.findall(task):
        identifiers.update(p for p in dotted.split(".") if len(p) > 2)
    for found in _RUST_PATH_RE.findall(task):
        identifiers.update(p for p in found.split("::") if len(p) > 2 and p not in ("crate", "self", "super"))
    called = set(_CALL_RE.findall(task))
    identifiers |= called
    mentions = Mentions(paths=paths, traceback=traceback_frames(task, index.repo, known), identifiers=identifiers,
                        called=called, packages=packages, macros=macro_mentions(task))
    mentions.stems = stem_mentions(task, index, identifiers)
    return mentions


def stem_mentions(task: str, index: RepoIndex, identifiers: set[str]) -> dict[str, str]:
    """Source files whose stem the task uses as a word, when that word looks like a name rather than English:
    it has a digit, an underscore or inner capitals, or the task writes it as code. File -> that word."""
    words = set(_WORD_RE.findall(task))
    named = {w for w in words if re.search(r"\d|_|[a-z][A-Z]", w) and len(w) >= 3} | identifiers
    named |= {h.replace("-", "_") for h in _HYPHENATED_RE.findall(task)}  # a crate or package: tracing-attributes
    named |= {_snake(n) for n in named if re.search(r"[a-z][A-Z]", n)}  # `BytesMut` lives in bytes_mut.rs
    stems: dict[str, str] = {}
    for path in index.files:
        stem = module_stem(path)  # src/plugin/customParseFormat/index.js is `customParseFormat`
        if stem in named and not stem.startswith("__") and kind_of(path) == FileKind.CODE:  # `__init__`: no one file
            stems[path] = stem
    return stems


def macro_mentions(task: str) -> set[str]:
    """Names the task uses as Rust macros or attributes (`info!(..)`, `#[instrument]`, `#[derive(Serialize)]`),
    the language's own left out."""
    names = set(_ATTRIBUTE_RE.findall(task)) | set(_BANG_RE.findall(task))
    for derived in _DERIVE_RE.findall(task):
        names.update(n.strip().rsplit("::", 1)[-1] for n in derived.split(",") if n.strip())
    return {n for n in names if n not in _LANGUAGE_MACROS and len(n) > 2}


def _snake(name: str) -> str:
    """`BytesMut` -> `bytes_mut`, `parseHTTPHeader` -> `parse_http_header`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def rust_modules(files: set[str]) -> dict[str, str]:
    """Rust module paths of two segments or more -> their file: src/a/b.rs (or src/a/b/mod.rs) is `a::b`,
    `crate::a::b` and `<crate>::a::b` (the crate's directory above src/, `-` read as `_`)."""
    found: dict[str, str] = {}
    for path in sorted(files):
        if not path.endswith(".rs") or "src/" not in f"/{path}":
            continue
        root, _, inner = f"/{path}".rpartition("/src/")
        segments = inner[:-3].split("/")
        if segments[-1] in ("mod", "lib", "main"):
            segments = segments[:-1]
        crate = posixpath.basename(root).replace("-", "_")
        for prefix in ([], ["crate"], [crate] if crate else []):
            key = "::".join([*prefix, *segments])
            if key.count("::"):  # two segments at least, as a dotted Python module
                found.setdefault(key, path)
    return found


def spec_mentions(task: str, files: set[str]) -> tuple[list[str], list[str]]:
    """Files and Go packages the task names by an import specifier or package path without an extension
    (`dayjs/plugin/utc` -> src/plugin/utc/index.js; `github.com/org/repo/core/mapping` -> the directory
    core/mapping): the longest tail of two or more segments that ends a module's path. Returns (files, package
    directories)."""
    specs = [m for m in _SPEC_RE.findall(task) if not _PATHLIKE_RE.fullmatch(m)]
    if not specs:
        return [], []
    by_tail: dict[str, list[tuple[str, str]]] = defaultdict(list)  # last two segments of a key -> (key, file)
    for path in sorted(files):
        if kind_of(path) not in (FileKind.CODE, FileKind.AUX):
            continue
        directory = posixpath.dirname(path)
        keys = [directory] if path.endswith(".go") else [posixpath.splitext(path)[0]]
        if is_entry(path) and not path.endswith(".go"):
            keys.append(directory)
        for key in keys:
            by_tail["/".join(key.split("/")[-2:])].append((key, path))
    named: list[str] = []
    packages: list[str] = []
    for spec in dict.fromkeys(specs):
        segments = spec.strip("/").split("/")
        candidates = by_tail.get("/".join(segments[-2:]), [])
        for cut in range(len(segments), 1, -1):
            tail = "/".join(segments[-cut:])
            hits = sorted({p for key, p in candidates if key == tail or key.endswith("/" + tail)})
            if not hits:
                continue
            if all(h.endswith(".go") for h in hits):
                packages.extend(d for d in sorted({posixpath.dirname(h) for h in hits}) if d not in packages)
            elif len(hits) <= 2:
                named.extend(h for h in hits if h not in named)
            break
    return named, packages


class FileKind(StrEnum):
    """What kind of file a path is (kind_of), for ranking."""

    CODE = "code"
    TEST = "test"
    AUX = "aux"  # code beside the product: docs, examples, scripts, setup
    OTHER = "other"  # not code: data, config, prose


def kind_of(path: str) -> FileKind:
    """A test file, a file in a language that is not code (other), code beside the product (aux: docs, examples,
    setup) or code."""
    parts = path.split("/")
    if languages.is_test_file(path):
        return FileKind.TEST
    if languages.language_for(path) not in _CODE_LANGUAGES:
        return FileKind.OTHER
    if parts[-1] in _AUX_FILES or any(p.lower() in _AUX_DIRS for p in parts[:-1]):
        return FileKind.AUX
    return FileKind.CODE
