"""The evidence a file ranking is made of, gathered once per task: per candidate file its BM25 score and rank, the
task's identifiers it defines, whether the task names it (by path, module or stem, with how rare that name is in the
repository), its traceback position, its import-graph links to the strongest files, its kind and size, and, once its
vectors exist, its best chunk's similarity to the task. Raw numbers only: fusion.py turns them into features and a
score, so the bench can store them and the fit can replay them."""
from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

from code_assistant.index.indexer import RepoIndex
from code_assistant.index.lexical import tokenize
from code_assistant.retrieve.mentions import TEST_TASK_RE, Mentions, find_mentions, kind_of

SIGNAL_DEPTH = 100  # files taken from the top of the BM25 ranking as candidates
ANCHORS = 3  # top files of BM25 and of the symbol signal whose import neighbours become candidates
PATH_WORD_FILES = 3  # a stem the task uses as a word makes candidates of at most this many files sharing it
PLAIN_WORD_WEIGHT = 0.4  # a definition matching a plain lowercase word from the task, e.g. `fix`
DENSE_CHUNKS = 80  # nearest chunks of the whole store per task window: files dense retrieval finds on its own
RERANK_CHUNKS = 400  # nearest chunks among the candidates' own per window: each candidate's best chunk
HIT_SYMBOL_SIMILARITY = 0.25  # a chunk this close to the task keeps its definition in the file's skeleton


@dataclass
class FileSignals:
    """One candidate file's raw evidence (0 / None: the signal did not find it)."""

    path: str
    kind: str  # code | test | aux | other (mentions.kind_of)
    tokens: int = 0
    bm25: float = 0.0
    bm25_rank: int = 0  # 1-based among files of the lexical kinds
    symbols: float = 0.0  # sum over task identifiers it defines of 1/log2(1 + files defining the name)
    symbol_rank: int = 0
    named: int = 0  # the task names it by path or dotted module
    named_idf: float = 0.0  # rarity of its stem among the repository's files, 0..1 (1: no other file has it)
    stem: float = 0.0  # the task uses its stem as a name: 1 / files sharing the stem, shared among the stems named
    stem_idf: float = 0.0
    stem_word: float = 0.0  # the task uses its stem as a word (any case, any form): the stem's rarity, 0..1
    dir_words: float = 0.0  # share of its directories the task uses as words
    trace_pos: int = 0  # 1-based file position in the task's tracebacks counted from the innermost frame
    graph_named: float = 0.0  # imports or is imported by a file the task names or traces, 1/sqrt(its degree)
    graph_top: float = 0.0  # likewise for the top ANCHORS files of BM25 and of the symbol signal
    via: list[str] = field(default_factory=list)  # the anchors it is linked to
    dense: float | None = None  # best chunk's cosine similarity to the task; None: it has no vectors
    dense_rank: int = 0  # 1-based among the files with vectors (for reasons; fusion ranks again)


@dataclass
class Signals:
    """Everything the ranking knows about a task's candidates."""

    files: dict[str, FileSignals]
    about_tests: bool  # the task talks about tests: test files are fair candidates
    n_files: int
    mentions: Mentions
    frames: list[tuple[str, int]]
    hit_symbols: dict[str, set[str]] = field(default_factory=dict)  # per file, definitions dense retrieval hit
    embedded: int = 0  # chunks the model embedded for this task
    degree: dict[str, int] = field(default_factory=dict)  # import neighbours of each graph anchor

    @property
    def lexical_kinds(self) -> set[str]:
        """Kinds of file BM25 ranks: code, and tests when the task is about tests (prose and fixtures echo issues)."""
        return {"code", "test"} if self.about_tests else {"code"}

    def file(self, path: str) -> FileSignals:
        """The path's entry, made on first mention."""
        if path not in self.files:
            self.files[path] = FileSignals(path, kind_of(path))
        return self.files[path]


def gather(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None = None) -> Signals:
    """The fast signals: everything but the dense one, no model call."""
    mentions = find_mentions(task, index)
    frames = [f for f in (extra_frames or []) if f[0] in index.files] + mentions.traceback
    sig = Signals({}, bool(TEST_TASK_RE.search(task)), len(index.files), mentions, frames)
    lexical = ((p, s) for p, s in _ranked(index.bm25(tokenize(task))) if kind_of(p) in sig.lexical_kinds)
    for position, (path, score) in enumerate(islice(lexical, SIGNAL_DEPTH), start=1):  # classify no more files
        entry = sig.file(path)
        entry.bm25, entry.bm25_rank = score, position
    scores = _symbol_scores(index, mentions.identifiers, mentions.called or set())
    for position, (path, score) in enumerate(_ranked(scores), start=1):
        entry = sig.file(path)
        entry.symbols, entry.symbol_rank = score, position
    _named(index, sig)
    _path_words(index, sig, task)
    for position, path in enumerate(dict.fromkeys(p for p, _line in reversed(frames)), start=1):
        sig.file(path).trace_pos = position  # once per file: a long stay in one file is no extra evidence
    _graph(index, sig)
    records = index.db.records(list(sig.files))
    for path, entry in sig.files.items():
        entry.tokens = records[path].tokens if path in records else 0
    return sig


def _ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _symbol_scores(index: RepoIndex, identifiers: set[str], called: set[str]) -> dict[str, float]:
    """Files that define a named identifier; a name defined in many files says little about each."""
    if not identifiers:
        return {}
    plain = {i for i in identifiers - called if i.isalpha() and i.islower()}
    scores: dict[str, float] = defaultdict(float)
    for name, paths in index.defining({i.lower() for i in identifiers}).items():
        weight = 1.0 / math.log2(1 + len(paths))
        if name.isalpha() and name in plain:  # `fix`, `install`: a command or an English word more than a name
            weight *= PLAIN_WORD_WEIGHT
        for path in paths:
            scores[path] += weight
    return dict(scores)


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0]
    if stem == "__init__" and "/" in path:  # a package's __init__ is named by the package
        stem = path.rsplit("/", 2)[-2]
    return stem


def _named(index: RepoIndex, sig: Signals) -> None:
    """Files named by path, module or stem, each with its name's rarity among the repository's files."""
    stems = sig.mentions.stems or {}
    words = {path: _stem(path) for path in [*sig.mentions.paths, *stems]}
    df, n_docs = index.doc_freq({w.lower() for w in words.values()})
    log_n = math.log(max(n_docs, 2))

    def idf(word: str) -> float:
        return math.log(max(n_docs, 1) / max(df.get(word.lower(), 1), 1)) / log_n

    for path in sig.mentions.paths:
        entry = sig.file(path)
        entry.named, entry.named_idf = 1, idf(words[path])
    sharing: dict[str, int] = defaultdict(int)
    for word in stems.values():
        sharing[word] += 1
    share = min(1.0, 2 / len(sharing)) if sharing else 0.0  # a task listing twenty rules names none of them
    for path, word in stems.items():
        entry = sig.file(path)
        entry.stem, entry.stem_idf = share / sharing[word], idf(word)


def _path_words(index: RepoIndex, sig: Signals, task: str) -> None:
    """Files whose stem or directories the task uses as plain words (`latex` for printing/latex.py), the stem
    weighted by its rarity; a stem few files share makes the file a candidate."""
    words = set(tokenize(task))
    by_stem: dict[str, list[str]] = defaultdict(list)
    for path in index.files:
        stem = _stem(path).lower()
        if stem in words and not stem.startswith("__"):
            by_stem[stem].append(path)
    df, n_docs = index.doc_freq(set(by_stem))
    log_n = math.log(max(n_docs, 2))
    for stem, paths in by_stem.items():
        rarity = math.log(max(n_docs, 1) / max(df.get(stem, 1), 1)) / log_n
        for path in paths:
            if len(paths) <= PATH_WORD_FILES or path in sig.files:
                sig.file(path).stem_word = rarity
    for entry in sig.files.values():
        dirs = [d.lower() for d in entry.path.split("/")[:-1]]
        entry.dir_words = sum(d in words for d in dirs) / len(dirs) if dirs else 0.0


def _graph(index: RepoIndex, sig: Signals) -> None:
    """One hop over the import graph, both directions, from the files the task names and the top of BM25 and of
    the symbol signal; a hub's links count for less (1/sqrt of its degree)."""
    named = list(dict.fromkeys([*sig.mentions.paths, *(p for p, _ in sig.frames)]))
    top = [*sorted((f for f in sig.files.values() if f.bm25_rank), key=lambda f: f.bm25_rank)[:ANCHORS],
           *sorted((f for f in sig.files.values() if f.symbol_rank), key=lambda f: f.symbol_rank)[:ANCHORS]]
    for group, anchors in (("named", named), ("top", list(dict.fromkeys(f.path for f in top)))):
        for anchor in anchors:
            neighbours = index.neighbours(anchor) - {anchor}
            sig.degree[anchor] = len(neighbours)
            for other in sorted(neighbours):  # a set: sorted, so the candidates come in one order
                entry = sig.file(other)
                weight = 1.0 / math.sqrt(len(neighbours))
                if group == "named":
                    entry.graph_named += weight
                else:
                    entry.graph_top += weight
                if anchor not in entry.via:
                    entry.via.append(anchor)


def add_dense(index: RepoIndex, sig: Signals, task: str) -> None:
    """The dense signal over whatever vectors exist: files the whole store's nearest chunks belong to join the
    candidates, then every candidate with vectors gets its best chunk's similarity."""
    if index.chunks.count() == 0:
        return  # nothing embedded: not even the task needs the model
    best: dict[str, float] = {}
    for vector in index.embedder.embed(task_windows(task, index.embedder.max_tokens, index.embedder.count_tokens)):
        hits = index.chunks.query(vector, DENSE_CHUNKS)
        hits += index.chunks.query(vector, RERANK_CHUNKS, paths=[p for p in sig.files if p in index.files])
        for hit in hits:
            if hit.path not in index.files:
                continue
            best[hit.path] = max(best.get(hit.path, -1.0), hit.score)
            if hit.symbol and hit.score >= HIT_SYMBOL_SIMILARITY:
                sig.hit_symbols.setdefault(hit.path, set()).add(hit.symbol)
    new = [p for p in best if p not in sig.files]
    for position, (path, score) in enumerate(_ranked(best), start=1):
        entry = sig.file(path)
        entry.dense, entry.dense_rank = score, position
    records = index.db.records(new)
    for path in new:
        sig.files[path].tokens = records[path].tokens if path in records else 0


def task_windows(task: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
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
