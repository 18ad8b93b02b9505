"""Walk, hash, parse, chunk and embed a repository into ChromaDB, incrementally by content hash.

Per repository the index keeps (under the index directory, never inside the repository unless asked):
- a Chroma collection of chunk embeddings (one per repository and embedder);
- `repos/<id>/manifest.json`: per file its hash, stat, language, symbols, raw imports and resolved import edges;
- `repos/<id>/lexicon.json` + `repos/<id>/bm25/`: identifier-aware tokens per file and the BM25 index over them.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import config
import lexical
import store
from code_parser import Import
from embedding_cache import EmbeddingCache
from embeddings import Embedder
from file_prep import PreparedFile, Preparer
from import_graph import ModuleResolver, go_module_path
from repo_files import list_repo_files

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 2
EMBED_BATCH = 64
FILES_PER_FLUSH = 200
STORE_BATCH = 512
CACHE_FLUSH = 1024
Progress = Callable[[int, int], None]


@dataclass
class FileRecord:
    path: str
    hash: str
    size: int
    mtime_ns: int
    language: str | None
    parser: str
    tokens: int
    symbols: list[list] = field(default_factory=list)  # [qualname, kind, start, end, signature]
    imports: list[list] = field(default_factory=list)  # [module, [names], level]
    chunks: int = 0


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


@dataclass
class RepoIndex:
    """What retrieval reads: the file records, the import graph, BM25 and the chunk store."""

    repo: Path
    files: dict[str, FileRecord]
    graph: dict[str, list[str]]
    lexicon: lexical.LexicalIndex
    chunks: store.ChunkStore
    embedder: Embedder

    def reverse_graph(self) -> dict[str, list[str]]:
        reverse: dict[str, list[str]] = {}
        for src, targets in self.graph.items():
            for target in targets:
                reverse.setdefault(target, []).append(src)
        return reverse


class Indexer:
    def __init__(self, repo: Path, index_path: Path, embedder: Embedder, chunk_store: store.ChunkStore) -> None:
        self.repo = repo.resolve()
        self.index_path = index_path
        self.embedder = embedder
        self.chunks = chunk_store
        self.dir = index_path / "repos" / config.repo_id(self.repo)
        self.dir.mkdir(parents=True, exist_ok=True)
        ignore = index_path / ".gitignore"
        if not ignore.exists():  # an index placed inside a repository never shows up in its `git status`
            ignore.write_text("*\n", encoding="utf-8")
        slug = "".join(c if c.isalnum() else "-" for c in embedder.name)[:60]
        self.cache = EmbeddingCache(index_path / "embedding-cache" / f"{slug}.sqlite", embedder.dimension)

    # ----- persistence -------------------------------------------------------------------------------------
    def _load_manifest(self) -> tuple[dict[str, FileRecord], dict[str, list[str]]]:
        path = self.dir / "manifest.json"
        if not path.is_file():
            return {}, {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            logger.warning("index manifest unreadable; re-indexing %s from scratch", self.repo)
            return {}, {}
        if data.get("version") != MANIFEST_VERSION or data.get("embedder") != self.embedder.name:
            logger.info("index format or embedder changed; re-indexing %s", self.repo)
            return {}, {}
        files = {p: FileRecord(**rec) for p, rec in data.get("files", {}).items()}
        return files, data.get("graph", {})

    def _save_manifest(self, files: dict[str, FileRecord], graph: dict[str, list[str]]) -> None:
        data = {"version": MANIFEST_VERSION, "embedder": self.embedder.name, "repo": str(self.repo),
                "files": {p: r.__dict__ for p, r in sorted(files.items())}, "graph": graph}
        _atomic_write(self.dir / "manifest.json", json.dumps(data, separators=(",", ":")))

    def _load_lexicon(self) -> dict[str, str]:
        path = self.dir / "lexicon.json"
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, json.JSONDecodeError):
            return {}

    # ----- the update --------------------------------------------------------------------------------------
    def update(self, progress: Progress | None = None, exclude: list[Path] | None = None) -> tuple[RepoIndex, IndexStats]:
        started = time.perf_counter()
        stats = IndexStats()
        files, graph = self._load_manifest()
        if not files:
            self.chunks.reset()
        # a private store just emptied holds no chunk of a file new to the manifest: nothing stale to look up
        clean = not files and not getattr(self.chunks, "shared", True)
        current = list_repo_files(self.repo, exclude=[self.index_path, *(exclude or [])])
        current_set = set(current)
        removed = [p for p in files if p not in current_set]

        candidates: list[tuple[str, os.stat_result, FileRecord | None]] = []
        repo_text = str(self.repo)
        for path in current:
            try:
                st = os.stat(os.path.join(repo_text, path))
            except OSError:
                continue
            record = files.get(path)
            if record and record.size == st.st_size and record.mtime_ns == st.st_mtime_ns:
                stats.unchanged += 1
                continue
            candidates.append((path, st, record))

        bm25_missing = not (self.dir / "bm25" / "paths.txt").is_file()
        # the lexicon (every file's tokens) is read only when something may change: a warm run never parses it
        lexicon = self._load_lexicon() if files and (removed or candidates or bm25_missing) else {}
        for path in removed:
            self.chunks.delete_file(path)
            files.pop(path, None)
            lexicon.pop(path, None)
        stats.removed = len(removed)

        dirty = bool(removed)
        total = len(candidates)
        with Preparer(self.repo, self.embedder, total) as preparer:
            for start in range(0, total, FILES_PER_FLUSH):
                batch = candidates[start:start + FILES_PER_FLUSH]
                fresh: list[tuple[PreparedFile, os.stat_result, bool]] = []
                for (path, st, record), prepared in zip(batch, preparer.map([(p, r.hash if r else None)
                                                                              for p, _st, r in batch])):
                    if prepared is None:  # unreadable, binary, generated or holding a secret
                        if record:
                            self.chunks.delete_file(path)
                            files.pop(path, None)
                            lexicon.pop(path, None)
                            dirty = True
                        continue
                    if record and record.hash == prepared.digest:
                        record.size, record.mtime_ns = st.st_size, st.st_mtime_ns
                        stats.unchanged += 1
                        continue
                    if record:
                        stats.changed += 1
                    else:
                        stats.added += 1
                    fresh.append((prepared, st, clean and record is None))
                if fresh:
                    dirty = True
                    stats.chunks_embedded += self._index_batch(fresh, files, lexicon)
                if progress:
                    progress(min(start + FILES_PER_FLUSH, total), total)
                self._save_manifest(files, graph)

        if dirty or bm25_missing:
            graph = self._resolve_graph(files)
            self._save_manifest(files, graph)
            _atomic_write(self.dir / "lexicon.json", json.dumps(lexicon, separators=(",", ":")))
            lexical.LexicalIndex.build({p: t.split() for p, t in lexicon.items()}).save(self.dir / "bm25")
        lex = lexical.LexicalIndex.load(self.dir / "bm25")
        if lex is None:
            lexicon = lexicon or self._load_lexicon()
            lex = lexical.LexicalIndex.build({p: t.split() for p, t in lexicon.items()})
        del lexicon

        stats.files = len(files)
        stats.symbols = sum(len(r.symbols) for r in files.values())
        stats.seconds = time.perf_counter() - started
        logger.info("indexed %s: %d files (%d added, %d changed, %d removed), %d chunks embedded in %.2fs",
                    self.repo, stats.files, stats.added, stats.changed, stats.removed, stats.chunks_embedded,
                    stats.seconds)
        return RepoIndex(self.repo, files, graph, lex, self.chunks, self.embedder), stats

    def _index_batch(self, batch: list[tuple[PreparedFile, os.stat_result, bool]], files: dict[str, FileRecord],
                     lexicon: dict[str, str]) -> int:
        """Store the prepared files' records, tokens and chunks; `new` files (third item) have nothing stored yet."""
        texts: list[str] = []
        metas: list[dict] = []
        ids: list[str] = []
        file_ids: list[tuple[str, list[str]]] = []
        for prepared, st, new in batch:
            path = prepared.path
            own = [store.chunk_id(path, prepared.digest, i, text) for i, (text, *_rest) in enumerate(prepared.chunks)]
            if not new:
                file_ids.append((path, own))
            for cid, (text, start, end, symbol, kind) in zip(own, prepared.chunks):
                ids.append(cid)
                texts.append(text)
                metas.append({"path": path, "start": start, "end": end, "symbol": symbol, "kind": kind})
            files[path] = FileRecord(
                path=path, hash=prepared.digest, size=st.st_size, mtime_ns=st.st_mtime_ns,
                language=prepared.language, parser=prepared.parser, tokens=prepared.tokens,
                symbols=prepared.symbols, imports=prepared.imports, chunks=len(prepared.chunks))
            lexicon[path] = prepared.lexicon
        if file_ids:  # already in the store: an earlier run, or a teammate on a shared server
            stored = self.chunks.existing(ids)
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
                            texts[start:start + STORE_BATCH], metas[start:start + STORE_BATCH])
        for path, own in file_ids:  # after the add, so a file is never without chunks
            self.chunks.delete_file(path, keep=own)
        return len(missing)

    def _resolve_graph(self, files: dict[str, FileRecord]) -> dict[str, list[str]]:
        go_mod = self.repo / "go.mod"
        module = go_module_path(go_mod.read_text(encoding="utf-8", errors="replace")) if go_mod.is_file() else None
        resolver = ModuleResolver(files.keys(), go_module=module)
        graph: dict[str, list[str]] = {}
        for path, record in files.items():
            if not record.language or not record.imports:
                continue
            targets: set[str] = set()
            for module_name, names, level in record.imports:
                imp = Import(module=module_name, names=tuple(names), level=level)
                try:
                    targets.update(resolver.resolve(path, record.language, imp))
                except Exception as exc:  # noqa: BLE001 - one odd import must not stop indexing
                    logger.debug("import %r in %s not resolved: %s", module_name, path, exc)
            targets.discard(path)
            if targets:
                graph[path] = sorted(targets)
        return graph


def iter_symbols(index: RepoIndex) -> Iterator[tuple[str, str, str, int, int]]:
    """(path, qualname, kind, start, end) for every definition in the index."""
    for path, record in index.files.items():
        for qualname, kind, start, end, _signature in record.symbols:
            yield path, qualname, kind, start, end


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
