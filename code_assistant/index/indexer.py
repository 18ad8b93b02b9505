"""Walk, hash, parse, chunk and embed a repository into ChromaDB, incrementally by content hash.

Per repository the index keeps (under the index directory, never inside the repository unless asked):
- a Chroma collection of chunk embeddings (one per repository and embedder);
- `repos/<id>/index.sqlite` (`index_db`): per file its hash, stat, language, symbols, raw imports, chunk ids and
  BM25 postings, and the resolved import edges, all keyed by file so that an update writes only what changed.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from code_assistant.index import store
from code_assistant.index.embedding_cache import EmbeddingCache
from code_assistant.index.embeddings import Embedder
from code_assistant.index.file_prep import PreparedFile, Preparer
from code_assistant.index.import_graph import ModuleResolver, go_module_path
from code_assistant.index.index_db import Entry, FileRecord, IndexDB
from code_assistant.index.repo_files import list_repo_files
from code_assistant.parse.code_parser import Import
from code_assistant.settings import repo_id

logger = logging.getLogger(__name__)

EMBED_BATCH = 64
FILES_PER_FLUSH = 200
STORE_BATCH = 512
CACHE_FLUSH = 1024
Progress = Callable[[int, int], None]
_OLD_FILES = ("manifest.json", "lexicon.json")  # the JSON index of format 2, replaced by index.sqlite


@dataclass
class IndexStats:
    files: int = 0
    symbols: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0


class Files(Mapping[str, FileRecord]):
    """The indexed files by path: the paths are in memory, a record is read from the index database when asked."""

    def __init__(self, db: IndexDB, paths: list[str]) -> None:
        self._db = db
        self._paths = paths
        self._known = set(paths)
        self._records: dict[str, FileRecord] = {}

    def __contains__(self, path: object) -> bool:
        return path in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, path: str) -> FileRecord:
        if path not in self._known:
            raise KeyError(path)
        if path not in self._records:
            found = self._db.records([path])
            if path not in found:
                raise KeyError(path)
            self._records[path] = found[path]
        return self._records[path]


@dataclass
class RepoIndex:
    """What retrieval reads: the file records, the import graph, BM25 and symbol lookups, and the chunk store."""

    repo: Path
    files: Files
    db: IndexDB
    chunks: store.ChunkStore
    embedder: Embedder

    @property
    def graph(self) -> dict[str, list[str]]:
        """The whole import graph, path -> the files it imports (reads every edge: for tests and tools)."""
        return self.db.graph()

    def neighbours(self, path: str) -> set[str]:
        """Files path imports and files that import it."""
        out, into = self.db.neighbours(path)
        return set(out) | set(into)

    def bm25(self, query_tokens: list[str]) -> dict[str, float]:
        return self.db.bm25(query_tokens)

    def defining(self, names: set[str]) -> dict[str, set[str]]:
        return self.db.defining(names)


class Candidate(NamedTuple):
    """A file whose stat changed since the last run."""

    path: str
    stat: os.stat_result
    indexed: bool  # it has a record from an earlier run


class Fresh(NamedTuple):
    """A new version of a file, prepared, on its way into the store and the database."""

    prepared: PreparedFile
    stat: os.stat_result
    new: bool  # nothing of it can be stored yet (a private store just emptied): no stale lookup needed
    indexed: bool  # its previous version's chunk ids are in the database


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
        for old in _OLD_FILES:
            (self.dir / old).unlink(missing_ok=True)
        shutil.rmtree(self.dir / "bm25", ignore_errors=True)
        self.db = IndexDB(self.dir / "index.sqlite", embedder.name)
        slug = "".join(c if c.isalnum() else "-" for c in embedder.name)[:60]
        self.cache = EmbeddingCache(index_path / "embedding-cache" / f"{slug}.sqlite", embedder.dimension)

    # ----- the update --------------------------------------------------------------------------------------
    def update(self, progress: Progress | None = None,
               exclude: list[Path] | None = None) -> tuple[RepoIndex, IndexStats]:
        started = time.perf_counter()
        stats = IndexStats()
        db = self.db
        fresh_index = db.is_empty()
        if fresh_index:
            self.chunks.reset()
        # a private store just emptied holds no chunk of a file new to the index: nothing stale to look up
        clean = fresh_index and not getattr(self.chunks, "shared", True)
        seen = db.stats()  # path -> (size, mtime_ns, skipped): a warm run reads nothing else
        candidates, removed = self._scan(seen, exclude or [], stats)
        for path in removed:
            if not seen[path][2]:
                self.chunks.delete_ids(db.chunk_ids(path))
                stats.removed += 1
        db.remove(removed)
        db.commit()
        paths_changed = stats.removed > 0  # the set of indexed paths decides how every import resolves
        updated: list[str] = []
        known_hashes = db.hashes([p for p, _st, indexed in candidates if indexed])
        total = len(candidates)
        with Preparer(self.repo, self.embedder, total) as preparer:
            for start in range(0, total, FILES_PER_FLUSH):
                batch = candidates[start:start + FILES_PER_FLUSH]
                fresh: list[Fresh] = []
                jobs = [(p, known_hashes.get(p)) for p, _st, _indexed in batch]
                for (path, st, indexed), prepared in zip(batch, preparer.map(jobs)):
                    if prepared is None:  # unreadable, binary, generated or holding a secret
                        if indexed:
                            self.chunks.delete_ids(db.chunk_ids(path))
                            stats.removed += 1
                            paths_changed = True
                        db.skip(path, st.st_size, st.st_mtime_ns)
                        continue
                    if indexed and known_hashes.get(path) == prepared.digest:
                        db.touch(path, st.st_size, st.st_mtime_ns)
                        stats.unchanged += 1
                        continue
                    if indexed:
                        stats.changed += 1
                    else:
                        stats.added += 1
                        paths_changed = True
                    fresh.append(Fresh(prepared, st, clean and not indexed, indexed))
                if fresh:
                    stats.chunks_embedded += self._index_batch(fresh)
                    updated.extend(f.prepared.path for f in fresh)
                db.commit()  # after the chunks are stored: a file in the database always has its chunks
                if progress:
                    progress(min(start + FILES_PER_FLUSH, total), total)

        paths = db.paths()
        self._update_graph(paths, updated, paths_changed)

        stats.files = len(paths)
        stats.symbols = db.count_symbols()
        stats.seconds = time.perf_counter() - started
        logger.info("indexed %s: %d files (%d added, %d changed, %d removed), %d chunks embedded in %.2fs",
                    self.repo, stats.files, stats.added, stats.changed, stats.removed, stats.chunks_embedded,
                    stats.seconds)
        return RepoIndex(self.repo, Files(db, paths), db, self.chunks, self.embedder), stats

    def _scan(self, seen: dict[str, tuple[int, int, bool]], exclude: list[Path],
              stats: IndexStats) -> tuple[list[Candidate], list[str]]:
        """The files whose stat changed since the last run and the files gone."""
        current = list_repo_files(self.repo, exclude=[self.index_path, *exclude])
        current_set = set(current)
        candidates: list[Candidate] = []
        repo_text = str(self.repo)
        for path in current:
            try:
                st = os.stat(os.path.join(repo_text, path))
            except OSError:
                continue
            old = seen.get(path)
            if old and old[0] == st.st_size and old[1] == st.st_mtime_ns:
                if not old[2]:
                    stats.unchanged += 1
                continue
            candidates.append(Candidate(path, st, bool(old) and not old[2]))
        return candidates, [p for p in seen if p not in current_set]

    def _update_graph(self, paths: list[str], updated: list[str], paths_changed: bool) -> None:
        """Resolve imports again: all of them when the set of paths (or go.mod) changed, else the updated files'."""
        if paths_changed or any(Path(p).name == "go.mod" for p in updated):
            self.db.set_edges(self._resolve_graph(self.db.imports(), paths), replace_all=True)
        elif updated:
            graph: dict[str, list[str]] = {path: [] for path in updated}
            graph.update(self._resolve_graph(self.db.imports(updated), paths))
            self.db.set_edges(graph, replace_all=False)
        self.db.commit()

    def _index_batch(self, batch: list[Fresh]) -> int:
        """Embed and store the prepared files' chunks, then their records."""
        texts: list[str] = []
        metas: list[dict] = []
        ids: list[str] = []
        check: list[str] = []  # ids that may be stored already
        # with what to drop after the add: nothing (a new file), the previous version's ids, or (None) whatever the
        # store holds under the path but the new ids (a file this index has not seen: a teammate's, an old run's)
        entries: list[tuple[Entry, list[str] | None]] = []
        for prepared, st, new, indexed in batch:
            path = prepared.path
            own = [store.chunk_id(path, prepared.digest, i, text) for i, (text, *_rest) in enumerate(prepared.chunks)]
            if not new:
                check.extend(own)
            for cid, (text, start, end, symbol, kind) in zip(own, prepared.chunks):
                ids.append(cid)
                texts.append(text)
                metas.append({"path": path, "start": start, "end": end, "symbol": symbol, "kind": kind})
            record = FileRecord(
                path=path, hash=prepared.digest, size=st.st_size, mtime_ns=st.st_mtime_ns,
                language=prepared.language, parser=prepared.parser, tokens=prepared.tokens,
                symbols=prepared.symbols, imports=prepared.imports, chunks=len(prepared.chunks))
            kept = set(own)
            stale = [] if new else [c for c in self.db.chunk_ids(path) if c not in kept] if indexed else None
            entries.append((Entry(record, own, prepared.terms, prepared.length), stale))
        if check and getattr(self.chunks, "shared", True):  # a teammate may have stored this very version
            stored = self.chunks.existing(check)
            todo = [k for k, cid in enumerate(ids) if cid not in stored]
            ids, texts, metas = [ids[k] for k in todo], [texts[k] for k in todo], [metas[k] for k in todo]
        keys = [EmbeddingCache.key(t) for t in texts]
        known = self.cache.get_many(sorted(set(keys)))
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        text_of = dict(zip(keys, texts))
        fresh: dict[str, list[float]] = {}
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start:start + EMBED_BATCH]
            fresh.update(zip(part, self.embedder.embed([text_of[k] for k in part])))
            if len(fresh) >= CACHE_FLUSH:  # one commit per many vectors, yet never more than CACHE_FLUSH in memory
                self.cache.put_many(fresh)
                known.update(fresh)
                fresh = {}
        self.cache.put_many(fresh)
        known.update(fresh)
        for start in range(0, len(texts), STORE_BATCH):  # few large upserts: Chroma's cost is per call as well
            self.chunks.add(ids[start:start + STORE_BATCH], [known[k] for k in keys[start:start + STORE_BATCH]],
                            metas[start:start + STORE_BATCH])
        for entry, stale in entries:  # after the add, so a file is never without chunks
            if stale is None:
                self.chunks.delete_file(entry.record.path, keep=entry.chunk_ids)
            elif stale:
                self.chunks.delete_ids(stale)
            self.db.put(entry)
        return len(missing)

    def _resolve_graph(self, imports: Iterable[tuple[str, str, list[list]]], paths: list[str]) -> dict[str, list[str]]:
        """Resolve (path, language, raw imports) against the indexed paths."""
        go_mod = self.repo / "go.mod"
        module = go_module_path(go_mod.read_text(encoding="utf-8", errors="replace")) if go_mod.is_file() else None
        resolver = ModuleResolver(paths, go_module=module)
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

