"""Rank the repository's files for a task and fit the best of them into a token budget."""
from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import config
import lexical
import tokens
from code_parser import parse_source, skeleton
from import_graph import is_test_file
from indexer import RepoIndex

logger = logging.getLogger(__name__)

# Weights of the fused rankings (reciprocal-rank fusion) and the constant that flattens ranks.
WEIGHTS = {"bm25": 1.0, "dense": 1.0, "symbols": 1.2, "graph": 0.35}
RRF_K = 8
MENTION_BONUS = 1.0      # a path or module named in the task
TRACEBACK_BONUS = 1.5    # a repository file in a traceback
TEST_PENALTY = 0.35      # tests rank lower unless the task is about tests
DENSE_CHUNKS = 80
MIN_USEFUL_TOKENS = 120

_TRACE_RES = (
    re.compile(r'File "([^"]+)", line (\d+)'),
    re.compile(r"(?:^|[\s(\[])((?:[\w.\-]+/)*[\w.\-]+\.(?:py|js|jsx|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h)):(\d+)"),
)
_PATHLIKE_RE = re.compile(r"[\w.\-/]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h|hpp|md|toml|json|ya?ml)\b")
_DOTTED_RE = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b")
_IDENT_RE = re.compile(r"`([^`\n]{2,80})`|\b([A-Za-z_]\w*[a-z]\w*)\b")
_TEST_TASK_RE = re.compile(r"\b(tests?|testing|pytest|unittest|spec|coverage)\b", re.IGNORECASE)


@dataclass
class RankedFile:
    path: str
    score: float
    reasons: list[str] = field(default_factory=list)


@dataclass
class ContextFile:
    path: str
    mode: str  # "full" | "skeleton"
    text: str
    tokens: int


@dataclass
class Context:
    ranking: list[RankedFile]
    files: list[ContextFile]
    tokens: int
    budget: int
    budget_log: list[str]

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def render(self) -> str:
        return "\n\n".join(f.text for f in self.files)


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
        rel = raw[2:] if raw.startswith("./") else raw
    if rel is None:
        return None
    if known is not None:
        return rel if rel in known else _suffix_match(rel, known)
    return rel if (repo / rel).is_file() else None


def _suffix_match(raw: str, known: set[str] | None) -> str | None:
    if not known:
        return None
    raw = raw.replace("\\", "/")
    matches = [k for k in known if raw.endswith("/" + k) or k.endswith("/" + raw) or k == raw]
    return min(matches, key=len) if len(matches) == 1 or matches else None


def find_mentions(task: str, index: RepoIndex) -> Mentions:
    known = set(index.files)
    by_name: dict[str, list[str]] = defaultdict(list)
    by_module: dict[str, str] = {}
    for path in known:
        by_name[Path(path).name].append(path)
        if path.endswith(".py"):
            module = path[:-3].replace("/", ".")
            module = module[:-9] if module.endswith(".__init__") else module
            for start in range(module.count(".") + 1):  # pkg.mod and src.pkg.mod both name src/pkg/mod.py
                by_module.setdefault(module.split(".", start)[-1], path)
    paths: list[str] = []
    for raw in _PATHLIKE_RE.findall(task):
        rel = _suffix_match(raw.lstrip("./"), known) if "/" in raw else None
        hits = [rel] if rel else by_name.get(Path(raw).name, [])
        paths.extend(h for h in hits[:3] if h not in paths)
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


def _rank_list(scores: dict[str, float]) -> list[str]:
    return [p for p, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def _symbol_scores(index: RepoIndex, identifiers: set[str]) -> dict[str, float]:
    if not identifiers:
        return {}
    lowered = {i.lower() for i in identifiers}
    defined_in: dict[str, set[str]] = defaultdict(set)
    for path, record in index.files.items():
        for qualname, *_ in record.symbols:
            name = qualname.rsplit(".", 1)[-1].lower()
            if name in lowered:
                defined_in[name].add(path)
            if qualname.lower() in lowered:
                defined_in[qualname.lower()].add(path)
    scores: dict[str, float] = defaultdict(float)
    for name, paths in defined_in.items():
        weight = 1.0 / math.log2(1 + len(paths))  # a name defined everywhere says little
        for path in paths:
            scores[path] += weight
    return dict(scores)


def _dense_hits(index: RepoIndex, task: str) -> tuple[dict[str, float], dict[str, set[str]]]:
    """Best chunk similarity per file, and the definitions those chunks cover."""
    windows = _task_windows(task, index.embedder.max_tokens, index.embedder.count_tokens)
    scores: dict[str, float] = {}
    symbols: dict[str, set[str]] = defaultdict(set)
    for vector in index.embedder.embed(windows):
        for hit in index.chunks.query(vector, DENSE_CHUNKS):
            if hit.path not in index.files:
                continue
            scores[hit.path] = max(scores.get(hit.path, 0.0), hit.score)
            if hit.symbol and hit.score >= 0.25:
                symbols[hit.path].add(hit.symbol)
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


def rank_files(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None = None,
               limit: int = 50) -> list[RankedFile]:
    """Fuse lexical, dense, symbol, mention, traceback and import-graph signals into one file ranking."""
    return _rank(index, task, extra_frames, limit)[0]


def _rank(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None,
          limit: int) -> tuple[list[RankedFile], dict[str, set[str]], Mentions]:
    mentions = find_mentions(task, index)
    frames = [f for f in (extra_frames or []) if f[0] in index.files] + mentions.traceback
    signals = {
        "bm25": index.lexicon.scores(lexical.tokenize(task)),
        "symbols": _symbol_scores(index, mentions.identifiers),
    }
    dense, hit_symbols = _dense_hits(index, task)
    signals["dense"] = dense
    fused: dict[str, float] = defaultdict(float)
    reasons: dict[str, list[str]] = defaultdict(list)
    for name, scores in signals.items():
        for rank, path in enumerate(_rank_list(scores)[:100]):
            fused[path] += WEIGHTS[name] / (RRF_K + rank + 1)
            if rank < 5:
                reasons[path].append(f"{name}#{rank + 1}")
    for path in mentions.paths:
        fused[path] += MENTION_BONUS
        reasons[path].append("named in task")
    for position, (path, _line) in enumerate(reversed(frames)):  # innermost frame first
        fused[path] += TRACEBACK_BONUS / (1 + 0.2 * position)
        reasons[path].append("traceback")
    _spread_over_imports(index, fused, reasons)
    about_tests = bool(_TEST_TASK_RE.search(task))
    for path in list(fused):
        if not about_tests and is_test_file(path):
            fused[path] *= TEST_PENALTY
    ranked = [RankedFile(p, s, reasons.get(p, [])) for p, s in fused.items() if p in index.files]
    ranked.sort(key=lambda r: (-r.score, r.path))
    return ranked[:limit], hit_symbols, mentions


def _spread_over_imports(index: RepoIndex, fused: dict[str, float], reasons: dict[str, list[str]]) -> None:
    """One hop along the import graph from the strongest files, in both directions."""
    top = sorted(fused.items(), key=lambda kv: -kv[1])[:5]
    reverse = index.reverse_graph()
    for rank, (path, score) in enumerate(top):
        neighbours = set(index.graph.get(path, [])) | set(reverse.get(path, []))
        for other in neighbours:
            bonus = WEIGHTS["graph"] * score / (len(neighbours) ** 0.5 + rank + 1)
            fused[other] += bonus
            if bonus > 0.01:
                reasons[other].append(f"imports/imported by {path}")


def build_context(index: RepoIndex, task: str, budget: int = 12000, *, extra_text: str = "",
                  must_include: list[str] | None = None, numbered: bool = False) -> Context:
    """Ranked files, then whole files where they fit and skeletons with the relevant definitions where not."""
    frames = traceback_frames(extra_text, index.repo, set(index.files)) if extra_text else []
    ranking, hit_symbols, mentions = _rank(index, task + ("\n" + extra_text if extra_text else ""), frames, 50)
    order = list(dict.fromkeys([*(must_include or []), *(f for f, _ in frames), *(r.path for r in ranking)]))
    files: list[ContextFile] = []
    used = 0
    log = [f"budget {budget} tokens"]
    for path in order:
        remaining = budget - used
        if remaining < MIN_USEFUL_TOKENS:
            log.append(f"stop: {remaining} tokens left")
            break
        if config.is_secret_path(path):
            continue
        text = _read(index.repo / path)
        if text is None:
            continue
        keep = hit_symbols.get(path, set()) | _symbols_named(index, path, mentions.identifiers) | _symbols_at(
            index, path, [line for p, line in frames if p == path])
        piece = _render_file(path, _numbered(text) if numbered else text, "full")
        cost = tokens.count_tokens(piece)
        mode = "full"
        if cost > remaining:
            piece = _render_file(path, skeleton(path, text, parse_source(path, text), keep=keep), "skeleton")
            cost = tokens.count_tokens(piece)
            mode = "skeleton"
        if cost > remaining:
            log.append(f"skip {path}: {mode} needs {cost} > {remaining} left")
            continue
        files.append(ContextFile(path, mode, piece, cost))
        used += cost
        log.append(f"+ {path} ({mode}, {cost} tokens) -> {used}/{budget}")
    return Context(ranking, files, used, budget, log)


def _symbols_named(index: RepoIndex, path: str, identifiers: set[str]) -> set[str]:
    record = index.files.get(path)
    if not record or not identifiers:
        return set()
    lowered = {i.lower() for i in identifiers}
    return {q for q, *_ in record.symbols if q.rsplit(".", 1)[-1].lower() in lowered}


def _symbols_at(index: RepoIndex, path: str, lines: list[int]) -> set[str]:
    record = index.files.get(path)
    if not record or not lines:
        return set()
    return {q for q, _kind, start, end, _sig in record.symbols for line in lines if start <= line <= end}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _numbered(text: str) -> str:
    return "\n".join(f"{i:>5}  {line}" for i, line in enumerate(text.splitlines(), start=1))


def _render_file(path: str, text: str, mode: str) -> str:
    fence = "````" if "```" in text else "```"
    label = f"{path} (skeleton)" if mode == "skeleton" else path
    return f"### {label}\n{fence}\n{text.rstrip()}\n{fence}"
