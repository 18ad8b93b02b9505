"""Rank a repository's files for a task: reciprocal-rank fusion of lexical, dense and symbol signals, plus
bonuses for what the task names outright (paths, modules, tracebacks) and one hop over the import graph.

The fast signals rank first; the dense one is added after the top candidates' missing vectors are made (within a
budget), so a query pays for the model only where it can change the answer."""
from __future__ import annotations

import math
import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from code_assistant import languages
from code_assistant.settings import EMBED_BUDGETS
from code_assistant.index import lexical
from code_assistant.index.indexer import RepoIndex

# Weights of the fused rankings (reciprocal-rank fusion) and the constant that flattens ranks.
SIGNAL_DEPTH = 100  # files fused from each signal's ranking
WEIGHTS = {"bm25": 1.0, "dense": 1.0, "symbols": 1.2, "graph": 0.35}
RRF_K = 8
MENTION_BONUS = 1.0      # a path or module named in the task
STEM_BONUS = 0.6         # a file named by its bare stem (`L031`, `raw_building`)
TRACEBACK_BONUS = 1.5    # a repository file in a traceback
TRACEBACK_DECAY = 0.5    # ... less for each file further from the innermost frame
TEST_PENALTY = 0.35      # tests (and their fixtures) rank lower unless the task is about tests
AUX_PENALTY = 0.5        # docs, examples, benchmarks, CI config, setup scripts
NON_CODE_PENALTY = 0.4   # yaml, markdown, data files: rarely what a fix changes
DENSE_CHUNKS = 80
DENSE_CANDIDATES = 15     # the fast ranking's top files whose missing vectors a query may embed
PLAIN_WORD_WEIGHT = 0.4  # a definition matching a plain lowercase word from the task, e.g. `fix`

_TRACE_RES = (
    re.compile(r'File "([^"]+)", line (\d+)'),
    re.compile(r"(?:^|[\s(\[])((?:[\w.\-]+/)*[\w.\-]+\.(?:py|js|jsx|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h)):(\d+)"),
)
_PATHLIKE_RE = re.compile(
    r"[\w.\-/]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h|hpp|md|toml|json|ya?ml)\b")
_DOTTED_RE = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b")
_IDENT_RE = re.compile(r"`([^`\n]{2,80})`|\b([A-Za-z_]\w*[a-z]\w*)\b")
_WORD_RE = re.compile(r"\b[A-Za-z_][\w]*\b")
_TEST_TASK_RE = re.compile(r"\b(tests?|testing|pytest|unittest|spec|coverage)\b", re.IGNORECASE)
_AUX_DIRS = {"doc", "docs", "example", "examples", "benchmark", "benchmarks", "bench", ".github", "scripts", "util",
             "utils", "tools", "ci"}
_AUX_FILES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "versioneer.py"}
_CODE_LANGUAGES = languages.EMBEDDED_LANGUAGES - {"markdown", "shell"}


@dataclass
class RankedFile:
    path: str
    score: float
    reasons: list[str] = field(default_factory=list)


@dataclass
class Mentions:
    paths: list[str]
    traceback: list[tuple[str, int]]
    identifiers: set[str]


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
    """Paths, modules and identifiers the task names outright."""
    known = set(index.files)
    by_name: dict[str, list[str]] = defaultdict(list)
    by_module: dict[str, str] = {}
    for path in known:
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
    return Mentions(paths, traceback_frames(task, index.repo, known), identifiers)


def _stem_mentions(task: str, index: RepoIndex, identifiers: set[str]) -> dict[str, float]:
    """Source files whose stem the task uses as a word, when that word looks like a name rather than English:
    it has a digit, an underscore or inner capitals, or the task writes it as code."""
    words = set(_WORD_RE.findall(task))
    named = {w for w in words if re.search(r"\d|_|[a-z][A-Z]", w) and len(w) >= 3} | identifiers
    by_stem: dict[str, list[str]] = defaultdict(list)
    for path in index.files:
        stem = posixpath.splitext(posixpath.basename(path))[0]
        if stem in named and not stem.startswith("__") and _kind(path) == "code":  # `__init__` names no one file
            by_stem[stem].append(path)
    matched = [w for w in named if w in by_stem]
    share = min(1.0, 2 / len(matched)) if matched else 0.0  # a task listing twenty rules names none of them
    scores: dict[str, float] = {}
    for word in matched:
        for path in by_stem[word]:
            scores[path] = STEM_BONUS * share / len(by_stem[word])
    return scores


class _Kinds(dict):
    """path -> _kind(path), computed on first use: only the files some signal found are ever classified."""

    def __missing__(self, path: str) -> str:
        self[path] = kind = _kind(path)
        return kind


def _kind(path: str) -> str:
    """code | test | aux (docs, examples, setup) | other (data, config, prose)."""
    parts = path.split("/")
    if languages.is_test_file(path):
        return "test"
    if languages.language_for(path) not in _CODE_LANGUAGES:
        return "other"
    if parts[-1] in _AUX_FILES or any(p.lower() in _AUX_DIRS for p in parts[:-1]):
        return "aux"
    return "code"


def _rank_list(scores: dict[str, float]) -> list[str]:
    return [p for p, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def _symbol_scores(index: RepoIndex, identifiers: set[str]) -> dict[str, float]:
    """Files that define a named identifier; a name defined in many files says little about each."""
    if not identifiers:
        return {}
    lowered = {i.lower() for i in identifiers}
    plain = {i for i in identifiers if i.isalpha() and i.islower()}
    defined_in = index.defining(lowered)
    scores: dict[str, float] = defaultdict(float)
    for name, paths in defined_in.items():
        weight = 1.0 / math.log2(1 + len(paths))
        if name.isalpha() and name in plain:  # `fix`, `install`: a command or an English word more than a name
            weight *= PLAIN_WORD_WEIGHT
        for path in paths:
            scores[path] += weight
    return dict(scores)


def _dense_hits(index: RepoIndex, task: str) -> tuple[dict[str, float], dict[str, set[str]]]:
    """Per file, its best chunk similarity plus a little for its next best two; and the definitions hit."""
    if index.chunks.count() == 0:
        return {}, {}  # nothing embedded yet: not even the task needs the model
    windows = _task_windows(task, index.embedder.max_tokens, index.embedder.count_tokens)
    per_file: dict[str, list[float]] = defaultdict(list)
    symbols: dict[str, set[str]] = defaultdict(set)
    for vector in index.embedder.embed(windows):
        for hit in index.chunks.query(vector, DENSE_CHUNKS):
            if hit.path not in index.files:
                continue
            per_file[hit.path].append(hit.score)
            if hit.symbol and hit.score >= 0.25:
                symbols[hit.path].add(hit.symbol)
    scores = {}
    for path, hits in per_file.items():
        best = sorted(hits, reverse=True)[:3]
        scores[path] = best[0] + 0.1 * sum(best[1:])
    return scores, symbols


def _task_windows(task: str, max_tokens: int, count) -> list[str]:
    """The task split into at most 4 pieces that each fit the embedding model."""
    if count(task) <= max_tokens:
        return [task]
    paragraphs = [p for p in re.split(r"\n\s*\n", task) if p.strip()]
    windows: list[str] = []
    current = ""
    for para in paragraphs:
        if current and count(current + "\n\n" + para) > max_tokens:
            windows.append(current)
            current = para
        else:
            current = f"{current}\n\n{para}" if current else para
    if current:
        windows.append(current)
    return windows[:4] or [task]


@dataclass
class Ranking:
    """The ranked files and what the context needs to know about why they rank."""

    files: list[RankedFile]
    hit_symbols: dict[str, set[str]]  # per file, the definitions dense retrieval hit
    mentions: Mentions  # what the task names
    frames: list[tuple[str, int]]  # traceback frames (path, line) in the task and in the extra frames
    embedded: int = 0  # chunks the model embedded for this query (the lazy dense signal's cost)


def rank(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None = None,
         limit: int = 50, embed_budget: int | None = EMBED_BUDGETS["local"]) -> Ranking:
    """Fuse lexical, symbol, mention, traceback and import-graph signals into one file ranking; then embed what the
    top DENSE_CANDIDATES files still lack (at most `embed_budget` chunks of model work; None: no limit) and fuse the
    dense signal too. A budget of 0 uses whatever vectors the index already has and embeds nothing."""
    mentions = find_mentions(task, index)
    frames = [f for f in (extra_frames or []) if f[0] in index.files] + mentions.traceback
    kinds = _Kinds()
    about_tests = bool(_TEST_TASK_RE.search(task))
    lexical_kinds = {"code", "test"} if about_tests else {"code"}  # BM25 over code: prose and fixtures echo issues
    raw_bm25 = index.bm25(lexical.tokenize(task))
    bm25: dict[str, float] = {}
    for path in _rank_list(raw_bm25):  # only the top of a signal is fused: classify no more files than that
        if kinds[path] in lexical_kinds:
            bm25[path] = raw_bm25[path]
            if len(bm25) == SIGNAL_DEPTH:
                break
    signals = {"bm25": bm25, "symbols": _symbol_scores(index, mentions.identifiers)}
    fast = _fuse(index, task, signals, mentions, frames, kinds, about_tests)
    embedded = 0
    if embed_budget != 0:
        candidates = [r.path for r in fast if kinds[r.path] in lexical_kinds][:DENSE_CANDIDATES]
        embedded = index.vectors.fill(candidates, embed_budget, query=task).embedded
    dense, hit_symbols = _dense_hits(index, task)
    if not dense:
        return Ranking(fast[:limit], hit_symbols, mentions, frames, embedded)
    fused = _fuse(index, task, {**signals, "dense": dense}, mentions, frames, kinds, about_tests)
    return Ranking(fused[:limit], hit_symbols, mentions, frames, embedded)


def _fuse(index: RepoIndex, task: str, signals: dict[str, dict[str, float]], mentions: Mentions,
          frames: list[tuple[str, int]], kinds: _Kinds, about_tests: bool) -> list[RankedFile]:
    fused: dict[str, float] = defaultdict(float)
    reasons: dict[str, list[str]] = defaultdict(list)
    for name, scores in signals.items():
        for position, path in enumerate(_rank_list(scores)[:SIGNAL_DEPTH]):
            fused[path] += WEIGHTS[name] / (RRF_K + position + 1)
            if position < 5:
                reasons[path].append(f"{name}#{position + 1}")
    named = set(mentions.paths) | {p for p, _ in frames}
    for path in mentions.paths:
        fused[path] += MENTION_BONUS
        reasons[path].append("named in task")
    for path, bonus in _stem_mentions(task, index, mentions.identifiers).items():
        if path not in named:
            fused[path] += bonus
            reasons[path].append("stem named in task")
    innermost_first = list(dict.fromkeys(path for path, _line in reversed(frames)))
    for position, path in enumerate(innermost_first):  # once per file: a long stay in one file is no extra evidence
        fused[path] += TRACEBACK_BONUS / (1 + TRACEBACK_DECAY * position)
        reasons[path].append(f"traceback (frame file {position + 1} from the innermost)")
    _spread_over_imports(index, fused, reasons)
    penalties = {"test": 1.0 if about_tests else TEST_PENALTY, "aux": AUX_PENALTY,
                 "other": NON_CODE_PENALTY, "code": 1.0}
    for path in list(fused):
        if path not in named:
            fused[path] *= penalties[kinds[path]]
    ranked = [RankedFile(p, s, reasons.get(p, [])) for p, s in fused.items() if p in index.files]
    ranked.sort(key=lambda r: (-r.score, r.path))
    return ranked


def _spread_over_imports(index: RepoIndex, fused: dict[str, float], reasons: dict[str, list[str]]) -> None:
    """One hop along the import graph from the strongest files, in both directions."""
    top = sorted(fused.items(), key=lambda kv: -kv[1])[:5]
    for position, (path, score) in enumerate(top):
        neighbours = index.neighbours(path)
        for other in neighbours:
            bonus = WEIGHTS["graph"] * score / (len(neighbours) ** 0.5 + position + 1)
            fused[other] += bonus
            if bonus > 0.01:
                reasons[other].append(f"imports/imported by {path}")
