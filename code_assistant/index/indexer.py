"""Walk, hash, parse and tokenize a repository into its index, incrementally by content hash; no model on this path.

Per repository the index keeps (under the index directory, never inside the repository unless asked):
- `repos/<id>/index.sqlite` (`index_db`): per file its hash, stat, language, symbols, raw imports and BM25 postings,
  the resolved import edges, and which of its chunks have vectors, all keyed by file so that an update writes only
  what changed;
- a Chroma collection of chunk vectors (one per repository and embedder), filled on demand by `vectors.py`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from code_assistant.gate import Gate
from code_assistant.index import completion, store
from code_assistant.index import focus as focus_scan
from code_assistant.index.embedding_cache import EmbeddingCache
from code_assistant.index.embeddings import Embedder
from code_assistant.index.file_prep import PreparedFile, Preparer, prepare_file
from code_assistant.index.file_table import FileStamp, ImportRow, IndexedFile
from code_assistant.index.focus import Scan, rank_files
from code_assistant.index.import_graph import ModuleResolver, go_module_path, js_package
from code_assistant.index.index_db import Entry, IndexDB
from code_assistant.index.nearest import ChunkSearch
from code_assistant.index.repo_files import list_repo_files
from code_assistant.index.vectors import Vectors
from code_assistant.parse.code_parser import Import
from code_assistant.settings import repo_id

logger = logging.getLogger(__name__)

FILES_PER_FLUSH = 500
# A task's first answer on a tree with at least FOCUS_MIN_FILES files not indexed yet reads the FOCUS_FILES the task's
# scan (focus.py) ranks highest and leaves the rest pending: for a process in the background (completion.py), for the
# next run without a task (`index`, a run's loop), or for a run with one once fewer than FOCUS_MIN_FILES are left.
# 30k files take a minute on two cores; the 1,000 of a first answer, a few seconds.
FOCUS_MIN_FILES = 5000
FOCUS_FILES = 1000
_CLEAN_MARK = "unindexed-have-no-vectors"  # beside the index while files are pending: see Indexer._start
Progress = Callable[[int, int], None]
_OLD_FILES = ("manifest.json", "lexicon.json", "bm25")  # the JSON index of format 2, replaced by index.sqlite


@dataclass
class IndexStats:
    files: int = 0
    symbols: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    pending: int = 0  # files not indexed yet, left for the background or a later run (a big tree's first answer)
    seconds: float = 0.0


class Files(Mapping[str, IndexedFile]):
    """The indexed files by path: the paths are in memory, a record is read from the index database when asked."""

    def __init__(self, db: IndexDB, paths: list[str]) -> None:
        self._db = db
        self._paths = paths
        self._known = set(paths)
        self._records: dict[str, IndexedFile] = {}

    def __contains__(self, path: object) -> bool:
        return path in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, path: str) -> IndexedFile:
        if path not in self._known:
            raise KeyError(path)
        if path not in self._records:
            found = self._db.files.records([path])
            if path not in found:
                raise KeyError(path)
            self._records[path] = found[path]
        return self._records[path]


@dataclass
class RepoIndex:
    """What retrieval reads: the file records, the import graph, BM25 and symbol lookups, and the chunk store; and
    the read gate every file's text is read through."""

    repo: Path
    files: Files
    db: IndexDB
    chunks: store.ChunkStore
    embedder: Embedder
    vectors: Vectors
    search: ChunkSearch
    gate: Gate
    pending: int = 0  # files not indexed yet (a big tree's first answers): the answer is made without vectors

    @property
    def graph(self) -> dict[str, list[str]]:
        """The whole import graph, path -> the files it imports (reads every edge: for tests and tools)."""
        return self.db.edges.graph()

    def neighbours(self, path: str) -> set[str]:
        """Files path imports and files that import it."""
        out, into = self.db.edges.neighbours(path)
        return set(out) | set(into)

    def bm25(self, query_tokens: list[str]) -> dict[str, float]:
        return self.db.postings.bm25(query_tokens)

    def defining(self, names: set[str]) -> dict[str, set[str]]:
        return self.db.symbols.defining(names)

    def doc_freq(self, terms: set[str]) -> tuple[dict[str, int], int]:
        """Files holding each term, and the number of files."""
        return self.db.postings.doc_freq(terms)

    def files_with(self, terms: set[str]) -> dict[str, set[str]]:
        """Term -> the files holding it."""
        return self.db.postings.files_with(terms)


class _Phases:
    """Seconds per phase of an update, for the debug log (where a cold index's time goes)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self._seconds: list[tuple[str, float]] = []

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self._seconds.append((name, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in self._seconds)


class ChangedFile(NamedTuple):
    """A file whose stat changed since the last run."""

    path: str
    stat: os.stat_result
    indexed: bool  # it has a record from an earlier run


def superseded(listed: FileStamp | None, now: FileStamp | None, st: os.stat_result) -> bool:
    """Whether another process (the background completion, a second run) stored this file since this update listed
    it (`listed`: its row then, `now`: its row inside the write), a version at least as new as the one this update
    read (`st`): then this update's is not written. Each writer takes a file's stat before reading it, so a row
    written over by an older version has a stat the file no longer has, and the next update reads it again."""
    return now is not None and now != listed and now.mtime_ns >= st.st_mtime_ns


@contextlib.contextmanager
def scan_ahead(repo: Path, index_path: Path, task: str) -> Iterator[None]:
    """For the length of the block, the task's scan (focus.py) started at once where repo's index is new or not
    complete, as the block's first update with that task would start it: git reads the tree while a task run makes
    its other preparations (its checks, the model, the sandbox, seconds on a big tree) and that update takes it.
    Stopped at the block's end if no update took it."""
    index_dir = index_path / "repos" / repo_id(repo.resolve())
    if not (index_dir / "index.sqlite").exists() or (index_dir / _CLEAN_MARK).exists():
        focus_scan.start_ahead(repo, task)
    try:
        yield
    finally:
        focus_scan.cancel_ahead()


class Indexer:
    def __init__(self, repo: Path, index_path: Path, embedder: Embedder, chunk_store: store.ChunkStore) -> None:
        self.repo = repo.resolve()
        self.index_path = index_path
        self.embedder = embedder
        self.chunks = chunk_store
        self.dir = index_path / "repos" / repo_id(self.repo)
        self.dir.mkdir(parents=True, exist_ok=True)
        ignore = index_path / ".gitignore"
        if not ignore.exists():  # an index placed inside a repository never shows up in its `git status`
            ignore.write_text("*\n", encoding="utf-8")
        for old in (self.dir / name for name in _OLD_FILES):  # an index of format 2 loses its files, once
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
        self.db = IndexDB(self.dir / "index.sqlite", embedder.name)
        self._completion: completion.Started | None = None  # the completion this process started, if it did
        slug = "".join(c if c.isalnum() else "-" for c in embedder.name)[:60]
        self.cache = EmbeddingCache(index_path / "embedding-cache" / f"{slug}.sqlite", embedder.dimension)

    # ----- the update --------------------------------------------------------------------------------------
    def update(self, progress: Progress | None = None, exclude: list[Path] | None = None,
               focus: str | None = None, background: bool = False) -> tuple[RepoIndex, IndexStats]:
        """Bring the index up to date with the repository: scan, delete, store the changed files in batches,
        re-link the import graph, count. With `focus` (a task), a tree with many files not indexed yet is indexed
        only as far as the task's answer needs (`_focused`); the rest stays pending (stats.pending). With
        `background` too, a process completes the rest (completion.py), and while it runs only what it may miss is
        stored here (`_beside_completion`): the answer reads what is stored."""
        started = time.perf_counter()
        stats = IndexStats()
        if focus is None and (self.dir / _CLEAN_MARK).exists():
            completion.wait_for(self.dir)  # everything is wanted: what the completion stores is not done twice
        clean = self._start()
        gate = Gate(self.repo, (self.index_path, *(exclude or [])))
        seen = self.db.files.stamps()  # a warm run reads nothing else
        # the task's scan runs beside the listing where files may be pending: a new index, or one not complete yet
        pending_possible = focus is not None and (self.dir / _CLEAN_MARK).exists()
        since = self._completing_since() if pending_possible and background else None
        scan = focus_scan.taken(self.repo, focus) if pending_possible and since is None else None
        phases = _Phases()
        try:
            changed, removed = self._scan(seen, exclude or [], stats)
            self._delete(removed, seen, stats)
            phases.done("list")
            if since is not None:  # a completion runs: see _beside_completion
                changed = self._beside_completion(changed, since, stats)
            elif scan is not None:
                indexed = {path: st.size for path, st in seen.items() if not st.skipped and path not in removed}
                changed = self._focused(scan, changed, indexed, stats)
                phases.done("focus scan")
        finally:
            if scan is not None:
                scan.cancel()
        updated = self._store_changed(gate, changed, seen, clean, stats, progress)
        phases.done("read, parse, store")
        if not stats.pending:
            (self.dir / _CLEAN_MARK).unlink(missing_ok=True)
        # the set of indexed paths decides how every import resolves
        self._relink(gate, updated, paths_changed=stats.added + stats.removed > 0)
        phases.done("imports")
        paths = self.db.files.paths()
        self._count(stats, paths, started)
        logger.debug("index phases: %s", phases)
        if stats.pending and background and since is None:
            self._completion = completion.start(self.repo, self.index_path, self.dir, self.embedder.name,
                                                self.embedder.dimension, [self.index_path, *(exclude or [])])
        vectors = Vectors(gate, self.db, self.cache, self.chunks, self.embedder)
        search = ChunkSearch(self.db.vectors, self.chunks)
        return RepoIndex(repo=self.repo, files=Files(self.db, paths), db=self.db, chunks=self.chunks,
                         embedder=self.embedder, vectors=vectors, search=search, gate=gate,
                         pending=stats.pending), stats

    def _completing_since(self) -> int | None:
        """While a completion of this index runs, when it began (ns, the file system's clock): a file changed since
        then may be missing from its listing. None when none runs."""
        if (began := completion.began_ns(self.dir)) is not None:
            return began
        if self._completion is not None and self._completion.alive():  # started here, its lock not taken yet
            return self._completion.started_ns
        return None

    def _beside_completion(self, changed: list[ChangedFile], since: int, stats: IndexStats) -> list[ChangedFile]:
        """What a run with a task stores while a completion runs: the files indexed already whose stat changed,
        and the new files changed since the completion began (a run's edits, the user's): its listing may have
        missed them, or hold an older version. The other new files are the completion's: pending here. A file both
        store is written once or written over by its newer version (see superseded)."""
        kept = [c for c in changed if c.indexed or c.stat.st_mtime_ns >= since]
        stats.pending = len(changed) - len(kept)
        return kept

    def _start(self) -> bool:
        """Empty a private store when the index is new; whether the store is known to hold nothing stale.

        A private store emptied when its index began holds vectors of indexed files only (a file that leaves the
        index takes its vectors along), so while files of that first index are still pending (_CLEAN_MARK, kept
        until none is), a file new to the index has none either: nothing stale to look up per file."""
        fresh_index = self.db.files.is_empty()
        mark = self.dir / _CLEAN_MARK
        if fresh_index:
            self.chunks.reset()
            mark.touch()  # before any file is stored: a run cut short leaves it for the next one
        return (fresh_index or mark.exists()) and not self.chunks.shared

    def _focused(self, scan: Scan, changed: list[ChangedFile], indexed: dict[str, int],
                 stats: IndexStats) -> list[ChangedFile]:
        """The changed files a task's answer is given now, when FOCUS_MIN_FILES or more are not indexed yet: every
        file indexed before (a changed file keeps its record current) and the new ones among the FOCUS_FILES the
        task's scan ranks highest in the whole tree (`indexed`: the sizes of the files indexed already). The others
        are pending: not indexed, not remembered, found new again by the next run's listing."""
        new = {c.path: c.stat.st_size for c in changed if not c.indexed}
        if len(new) < FOCUS_MIN_FILES:
            return changed
        ranked = rank_files(scan, {**indexed, **new}, FOCUS_FILES)
        if ranked is None:  # not a git tree, or git failed: the whole index, as without a focus
            return changed
        chosen = {path for path in ranked if path in new}
        kept = [c for c in changed if c.indexed or c.path in chosen]
        stats.pending = len(changed) - len(kept)
        logger.info("indexing %d of %d new files for the task first; %d pending", len(chosen), len(new),
                    stats.pending)
        return kept

    def _scan(self, seen: dict[str, FileStamp], exclude: list[Path],
              stats: IndexStats) -> tuple[list[ChangedFile], list[str]]:
        """The files whose stat changed since the last run and the files gone."""
        current = list_repo_files(self.repo, exclude=[self.index_path, *exclude])
        current_set = set(current)
        changed: list[ChangedFile] = []
        repo_text = str(self.repo)
        for path in current:
            try:
                st = os.stat(os.path.join(repo_text, path))
            except OSError:
                continue
            old = seen.get(path)
            if old and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                if not old.skipped:
                    stats.unchanged += 1
                continue
            changed.append(ChangedFile(path, st, bool(old) and not old.skipped))
        return changed, [p for p in seen if p not in current_set]

    def _delete(self, removed: list[str], seen: dict[str, FileStamp], stats: IndexStats) -> None:
        """Drop the files gone since the last run, with their vectors (not one another process stored again
        since it was listed: it is back)."""
        if not removed:
            return
        with self.db.writing():
            now = self.db.files.stamps_of(removed)
            gone = [path for path in removed if now.get(path) == seen[path]]
            for path in gone:
                if not seen[path].skipped:
                    self.chunks.delete_ids(self.db.vectors.chunk_ids(path))
                    stats.removed += 1
            self.db.remove(gone)

    def _store_changed(self, gate: Gate, changed: list[ChangedFile], seen: dict[str, FileStamp], clean: bool,
                       stats: IndexStats, progress: Progress | None) -> list[str]:
        """Read, parse and store the changed files, FILES_PER_FLUSH at a time: each batch read and parsed first, then
        written in one transaction that skips a file another process stored meanwhile (superseded); the paths
        stored anew."""
        known_hashes = self.db.files.hashes([f.path for f in changed if f.indexed])
        updated: list[str] = []
        total = len(changed)
        with Preparer(gate, total) as preparer:
            for start in range(0, total, FILES_PER_FLUSH):
                batch = changed[start:start + FILES_PER_FLUSH]
                jobs = [(c.path, known_hashes.get(c.path)) for c in batch]
                ready = list(preparer.map(jobs))
                with self.db.writing():
                    now = self.db.files.stamps_of([c.path for c in batch])
                    for change, prepared in zip(batch, ready):
                        listed, current = seen.get(change.path), now.get(change.path)
                        if superseded(listed, current, change.stat):
                            continue
                        if current != listed:  # stored by another since listed, an older version: written over,
                            # read whole again (what was read against the listed record's hash may be only hashed)
                            change = change._replace(indexed=current is not None and not current.skipped)
                            prepared = prepare_file(gate, change.path, None)
                        known = known_hashes.get(change.path) if current == listed else None
                        if self._store_one(change, prepared, known, clean, stats):
                            updated.append(change.path)
                if progress:
                    progress(min(start + FILES_PER_FLUSH, total), total)
        return updated

    def _store_one(self, change: ChangedFile, prepared: PreparedFile | None, known_hash: str | None, clean: bool,
                   stats: IndexStats) -> bool:
        """Skip, touch or store one changed file; whether it was stored anew."""
        path, st, indexed = change
        if prepared is None:  # unreadable, binary, generated or holding a secret
            if indexed:
                self.chunks.delete_ids(self.db.vectors.chunk_ids(path))
                stats.removed += 1
            self.db.skip(path, st.st_size, st.st_mtime_ns)
            return False
        if indexed and known_hash == prepared.digest:
            self.db.files.touch(path, st.st_size, st.st_mtime_ns)
            stats.unchanged += 1
            return False
        if indexed:
            stats.changed += 1
            self.chunks.delete_ids(self.db.vectors.chunk_ids(path))  # the previous version's vectors
        else:
            stats.added += 1
            if not clean and not self.chunks.shared:  # vectors left by an older index of this repo
                self.chunks.delete_file(path)
        self.db.put(self._entry(prepared, st))
        return True

    def _relink(self, gate: Gate, updated: list[str], paths_changed: bool) -> None:
        """Resolve imports again: all of them when the set of paths (or go.mod) changed, else the updated files'. The
        imports are read and the edges written in one transaction, so a file another process stores meanwhile is
        linked by the version stored."""
        if paths_changed or any(Path(p).name in ("go.mod", "package.json") for p in updated):
            with self.db.writing():
                paths = self.db.files.paths()
                self.db.edges.put(self._resolve_graph(gate, self.db.files.import_statements(), paths),
                                  replace_all=True)
        elif updated:
            with self.db.writing():
                paths = self.db.files.paths()
                graph: dict[str, list[str]] = {path: [] for path in updated}
                graph.update(self._resolve_graph(gate, self.db.files.import_statements(updated), paths))
                self.db.edges.put(graph, replace_all=False)

    def _count(self, stats: IndexStats, paths: list[str], started: float) -> None:
        stats.files = len(paths)
        stats.symbols = self.db.files.symbol_count()
        stats.seconds = time.perf_counter() - started
        logger.info("indexed %s: %d files (%d added, %d changed, %d removed, %d pending) in %.2fs", self.repo,
                    stats.files, stats.added, stats.changed, stats.removed, stats.pending, stats.seconds)

    @staticmethod
    def _entry(prepared: PreparedFile, st: os.stat_result) -> Entry:
        record = IndexedFile(path=prepared.path, hash=prepared.digest, size=st.st_size, mtime_ns=st.st_mtime_ns,
                            language=prepared.language, parser=prepared.parser, tokens=prepared.tokens,
                            symbols=prepared.symbols, imports=prepared.imports)
        return Entry(record, prepared.terms, prepared.length)

    def _resolve_graph(self, gate: Gate, imports: Iterable[tuple[str, str, list[ImportRow]]],
                       paths: list[str]) -> dict[str, list[str]]:
        """Resolve (path, language, raw imports) against the indexed paths."""
        go_mod = gate.text("go.mod")
        module = go_module_path(go_mod) if go_mod is not None else None
        packages = []
        for path in paths:  # a monorepo's workspaces, by their package.json
            if Path(path).name == "package.json" and (text := gate.text(path)) is not None and (
                    found := js_package(path, text)):
                packages.append(found)
        resolver = ModuleResolver(paths, go_module=module, js_packages=packages)
        graph: dict[str, list[str]] = {}
        for path, language, raw in imports:
            targets: set[str] = set()
            for module_name, names, level in raw:
                imp = Import(module=module_name, names=tuple(names), level=level)
                try:
                    targets.update(resolver.resolve(path, language, imp))
                except Exception as exc:  # noqa: BLE001 - one odd import must not stop indexing
                    logger.debug("import %r in %s not resolved: %s", module_name, path, exc)
            targets.discard(path)
            graph[path] = sorted(targets)
        return graph

