"""The evidence a file ranking is made of, gathered once per task: per candidate file its BM25 score and rank, the
task's identifiers it defines, whether the task names it (by path, module or stem, with how rare that name is in the
repository), its traceback position, its import-graph links to the strongest files, its kind and size, and, once its
vectors exist, its best chunk's similarity to the task. Raw numbers only: fusion.py turns them into features and a
score, so the bench can store them and the fit can replay them."""
from __future__ import annotations

import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from code_assistant.index.indexer import RepoIndex
from code_assistant.index.lexical import tokenize
from code_assistant.retrieve import phrases
from code_assistant.retrieve.counterparts import counterparts
from code_assistant.retrieve.file_roles import module_stem
from code_assistant.retrieve.mentions import TEST_TASK_RE, FileKind, Mentions, find_mentions, kind_of

SIGNAL_DEPTH = 100  # files taken from the top of the BM25 ranking as candidates (non-test files; tests apart)
SOURCE_KINDS = frozenset({FileKind.CODE, FileKind.AUX})  # what BM25 always ranks: scripts/ or utils/ is code too
LITERAL_TERMS = 3  # a quoted message's rarest words: the files holding all of them are read for the message
LITERAL_FILES = 40  # a message more files hold than this is too common to point at any of them
PACKAGE_FILES = 30  # a package (directory) the task names makes candidates of its files, if it has at most this many
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
    kind: FileKind  # mentions.kind_of
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
    literal: float = 0.0  # it holds a message the task quotes: the run of words matched, by the message's rarity
    tested: float = 0.0  # the source counterpart of a test file the task points at (names, traces, quotes)
    pkg_named: float = 0.0  # its directory is a package the task names (a Go import path): 1/sqrt(its files)
    macro_def: float = 0.0  # defines a macro or attribute the task uses (macro_rules!, proc_macro): 1 / its definers
    # (not a feature of its own: it decides which files define the name for the symbol signal)
    dir_bm25: float = 0.0  # the best BM25 of another candidate in its directory (its package mates)
    n_symbols: int = 0  # definitions in the file
    n_imports: int = 0  # import statements in the file (an entry that re-exports has many and defines few)
    importers: int = 0  # files that import it (a hub module: the application class every plugin imports)
    imports_resolved: int = 0  # repository files it imports (the import graph's edges out of it)
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
    tested: dict[str, str] = field(default_factory=dict)  # a test file the task points at -> the code it exercises
    terms: list[str] = field(default_factory=list)  # the task's lexical tokens (lexical.tokenize), made once

    @property
    def lexical_kinds(self) -> set[FileKind]:
        """Kinds of file BM25 ranks: code (aux code too), and tests when the task is about tests (prose and
        fixtures echo issues)."""
        return {*SOURCE_KINDS, FileKind.TEST} if self.about_tests else set(SOURCE_KINDS)

    def file(self, path: str) -> FileSignals:
        """The path's entry, made on first mention."""
        if path not in self.files:
            self.files[path] = FileSignals(path=path, kind=kind_of(path))
        return self.files[path]


def gather(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None = None) -> Signals:
    """The fast signals: everything but the dense one, no model call."""
    mentions = find_mentions(task, index)
    frames = [f for f in (extra_frames or []) if f[0] in index.files] + mentions.traceback
    sig = Signals(files={}, about_tests=bool(TEST_TASK_RE.search(task)), n_files=len(index.files), mentions=mentions,
                  frames=frames, terms=tokenize(task))
    _lexical(index, sig)
    macros = _macro_definers(index, mentions.macros or set())
    for paths in macros.values():
        for path in paths:
            sig.file(path).macro_def = 1.0 / len(paths)
    scores = _symbol_scores(index, mentions.identifiers | (mentions.macros or set()), mentions.called or set(), macros)
    for position, (path, score) in enumerate(_ranked(scores), start=1):
        entry = sig.file(path)
        entry.symbols, entry.symbol_rank = score, position
    _named(index, sig)
    _path_words(index, sig)
    for position, path in enumerate(dict.fromkeys(p for p, _line in reversed(frames)), start=1):
        sig.file(path).trace_pos = position  # once per file: a long stay in one file is no extra evidence
    _literals(index, sig, task)
    _packages(index, sig)
    _graph(index, sig)
    _tested(index, sig)
    _details(index, sig, list(sig.files))
    _mates(sig)
    return sig


def _details(index: RepoIndex, sig: Signals, paths: list[str]) -> None:
    """Size, definitions and imports of the files, from their index records."""
    records = index.db.files.records(paths)
    importers = index.db.edges.importer_counts(paths)
    imports = index.db.edges.import_counts(paths)
    for path in paths:
        entry, record = sig.files[path], records.get(path)
        if record is not None:
            entry.tokens, entry.n_symbols, entry.n_imports = record.tokens, len(record.symbols), len(record.imports)
            entry.importers = importers.get(path, 0)
        entry.imports_resolved = imports.get(path, 0)


def _lexical(index: RepoIndex, sig: Signals) -> None:
    """BM25's top SIGNAL_DEPTH files of each kind it ranks, each ranked among the files at least as likely to be
    the fix: code among code, aux code (scripts, utils, examples) among code and aux, tests (when the task is about
    tests) among all three. A task quoting a test case cannot push the module it tests out with its test files, nor
    can a repository's examples push its code down."""
    code = aux = joint = 0
    for path, score in _ranked(index.bm25(sig.terms)):  # classify no more files than needed
        kind = kind_of(path)
        if kind == FileKind.CODE:
            code, aux, joint = code + 1, aux + 1, joint + 1
            rank = code
        elif kind == FileKind.AUX:
            aux, joint = aux + 1, joint + 1
            rank = aux
        elif kind == FileKind.TEST and sig.about_tests:
            joint += 1
            rank = joint
        else:
            continue
        if rank <= SIGNAL_DEPTH:
            entry = sig.file(path)
            entry.bm25, entry.bm25_rank = score, rank
        if code >= SIGNAL_DEPTH and aux >= SIGNAL_DEPTH and (joint >= SIGNAL_DEPTH or not sig.about_tests):
            break


def _literals(index: RepoIndex, sig: Signals, task: str) -> None:
    """Files holding a message the task quotes (phrases.py): for each message the files that have its rarest
    words are read and scored by the longest run of its words they hold in order; a message many files hold
    says less about each."""
    texts: dict[str, set[tuple[str, str, str]] | None] = {}
    for message in phrases.quoted_messages(task):
        content = {t for t in tokenize(" ".join(message)) if len(t) >= 3}
        df, _ = index.doc_freq(content)
        rare = sorted((t for t in content if df.get(t)), key=lambda t: (df[t], t))[:LITERAL_TERMS]
        if len(rare) < 2:
            continue
        holding = index.files_with(set(rare))
        files = set.intersection(*(holding.get(t, set()) for t in rare))
        files = {f for f in files if kind_of(f) in (FileKind.CODE, FileKind.AUX, FileKind.TEST)}
        if not files or len(files) > LITERAL_FILES:
            continue
        runs = {}
        for path in sorted(files):
            if path not in texts:
                text = _read(index, path)
                texts[path] = phrases.trigrams(phrases.words(text)) if text is not None else None
            grams = texts[path]
            run = phrases.longest_run(message, grams) if grams else 0
            if run >= phrases.MIN_WORDS:
                runs[path] = run
        for path, run in runs.items():
            entry = sig.file(path)
            score = min(run, phrases.RUN_CAP) / phrases.RUN_CAP / math.log2(1 + len(runs))
            entry.literal = max(entry.literal, score)


_MACRO_TERMS = ("macro_rules", "proc_macro", "proc_macro_attribute", "proc_macro_derive")


def _macro_definers(index: RepoIndex, names: set[str]) -> dict[str, list[str]]:
    """Lowercased name -> the files that define it as the macro or attribute the task uses: `macro_rules! name`, a
    `#[proc_macro...]` function `name` or `#[proc_macro_derive(Name ...)]` (among the files holding the name and a
    definer's word). For `#[instrument]` these define `instrument`, not a method of that name elsewhere."""
    if not names:
        return {}
    holding = index.files_with({*_MACRO_TERMS, *(n.lower() for n in names)})
    definers = set().union(*(holding.get(t, set()) for t in _MACRO_TERMS))
    found: dict[str, list[str]] = {}
    for name in sorted(names):
        pattern = re.compile(rf"macro_rules!\s*{name}\b|#\[proc_macro(?:_attribute)?\]\s*(?:#\[[^\]]*\]\s*)*"
                             rf"(?:pub\s+)?fn\s+{name}\b|#\[proc_macro_derive\(\s*{name}\b")
        files = [p for p in sorted(definers & holding.get(name.lower(), set())) if p.endswith(".rs")
                 and kind_of(p) != FileKind.TEST and pattern.search(_read(index, p) or "")]
        if files:
            found[name.lower()] = files
    return found


def _read(index: RepoIndex, path: str) -> str | None:
    return index.gate.text(path)


def _packages(index: RepoIndex, sig: Signals) -> None:
    """Files of the packages (directories) the task names by import path, if the package is small enough to say
    something about each: 1/sqrt(its files)."""
    for directory in sig.mentions.packages or []:
        mates = [p for p in index.files if posixpath.dirname(p) == directory and kind_of(p) == FileKind.CODE]
        if 0 < len(mates) <= PACKAGE_FILES:
            for path in mates:
                sig.file(path).pkg_named = 1.0 / math.sqrt(len(mates))


def _tested(index: RepoIndex, sig: Signals) -> None:
    """The source counterpart (counterparts.py) of each test file the task points at - names it, traces through
    it, quotes its message or defines the names it uses - is the code that test exercises."""
    pointed = [f.path for f in sig.files.values() if f.kind == FileKind.TEST and (f.named or f.stem or f.trace_pos or
                                                                                    f.literal or f.symbols)]
    if not pointed:
        return
    files = set(index.files)
    for test in pointed:
        sources = [s for s in counterparts(test, files) if kind_of(s) in SOURCE_KINDS]
        if sources:
            sig.file(sources[0]).tested = 1.0
            sig.tested[test] = sources[0]


def _mates(sig: Signals) -> None:
    """For each candidate, the best BM25 of another candidate in its directory (Go's package mates, a module's
    siblings)."""
    by_dir: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for f in sig.files.values():
        if f.bm25:
            by_dir[posixpath.dirname(f.path)].append((f.bm25, f.path))
    for f in sig.files.values():
        f.dir_bm25 = max((score for score, path in by_dir.get(posixpath.dirname(f.path), []) if path != f.path),
                         default=0.0)


def _ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _symbol_scores(index: RepoIndex, identifiers: set[str], called: set[str],
                   macros: dict[str, list[str]] | None = None) -> dict[str, float]:
    """Files that define a named identifier; a name defined in many files says little about each. A name the task
    uses as a macro or attribute is defined by the files that define that macro (`macros`)."""
    if not identifiers:
        return {}
    plain = {i for i in identifiers - called if i.isalpha() and i.islower()}
    scores: dict[str, float] = defaultdict(float)
    defining = index.defining({i.lower() for i in identifiers})
    defining.update({name: set(paths) for name, paths in (macros or {}).items()})
    for name, paths in defining.items():
        weight = 1.0 / math.log2(1 + len(paths))
        if name.isalpha() and name in plain and name not in (macros or {}):  # `fix`, `install`: a command or an
            weight *= PLAIN_WORD_WEIGHT  # English word more than a name
        for path in paths:
            scores[path] += weight
    return dict(scores)


def _stem(path: str) -> str:
    return module_stem(path)  # a package's __init__, index.js or mod.rs is named by its directory


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


def _path_words(index: RepoIndex, sig: Signals) -> None:
    """Files whose stem or directories the task uses as plain words (`latex` for printing/latex.py), the stem
    weighted by its rarity; a stem few files share makes the file a candidate."""
    words = set(sig.terms)
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
    if index.search.count() == 0:
        return  # nothing embedded: not even the task needs the model
    best: dict[str, float] = {}
    for vector in index.embedder.embed(task_windows(task, index.embedder.max_tokens, index.embedder.count_tokens)):
        hits = index.search.query(vector, DENSE_CHUNKS)
        hits += index.search.query(vector, RERANK_CHUNKS, paths=[p for p in sig.files if p in index.files])
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
    _details(index, sig, new)


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
