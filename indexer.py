"""Walk, hash, parse, chunk and embed a repository into ChromaDB, incrementally by content hash.

Per repository the index keeps (under the index directory, never inside the repository unless asked):
- a Chroma collection of chunk embeddings (one per repository and embedder);
- `repos/<id>/manifest.json`: per file its hash, stat, language, symbols, raw imports and resolved import edges;
- `repos/<id>/lexicon.json` + `repos/<id>/bm25/`: identifier-aware tokens per file and the BM25 index over them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

import config
import lexical
import redact
import store
import tokens
from code_parser import Import, chunk_file, parse_source
from embeddings import Embedder
from import_graph import ModuleResolver, go_module_path

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 2
EMBED_BATCH = 64
FILES_PER_FLUSH = 200
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


def _git_files(repo: Path) -> list[str] | None:
    if not (repo / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, capture_output=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def _walk_files(repo: Path) -> list[str]:
    """Files below repo, honouring .gitignore files (root and nested) when git is not available."""
    found: list[str] = []
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    for dirpath, dirnames, filenames in os.walk(repo):
        rel_dir = os.path.relpath(dirpath, repo).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        if ".gitignore" in filenames:
            lines = (Path(dirpath) / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
            specs.append((rel_dir, pathspec.GitIgnoreSpec.from_lines(lines)))

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1:] if base else rel
                if spec.match_file(sub + ("/" if is_dir else "")):
                    return True
            return False

        dirnames[:] = sorted(d for d in dirnames if d not in config.IGNORED_DIRS
                             and not ignored(f"{rel_dir}/{d}" if rel_dir else d, True))
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not ignored(rel, False):
                found.append(rel)
    return found


def list_repo_files(repo: Path, exclude: list[Path] | None = None) -> list[str]:
    """Indexable repo-relative paths: known languages, not ignored, vendored, minified, secret or too big."""
    candidates = _git_files(repo)
    if candidates is None:
        candidates = _walk_files(repo)
    excluded = [str(p.resolve()) for p in (exclude or [])]
    result: list[str] = []
    for rel in candidates:
        parts = rel.split("/")
        if any(part in config.IGNORED_DIRS for part in parts[:-1]):
            continue
        if config.language_for(rel) is None or config.MINIFIED_RE.search(rel) or config.is_secret_path(rel):
            continue
        if (repo / rel).is_symlink():  # may point outside the repository, or at a file indexed anyway
            continue
        absolute = str((repo / rel).resolve()) if excluded else ""
        if excluded and any(absolute == e or absolute.startswith(e + os.sep) for e in excluded):
            continue
        result.append(rel)
    return sorted(set(result))


class EmbeddingCache:
    """Vectors by chunk-text hash, shared by every repository indexed with one embedder.

    A chunk whose text was embedded before — an unchanged function in a changed file, a file moved back by a
    checkout — is never embedded again.
    """

    def __init__(self, path: Path, dimension: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path))
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self.dimension = dimension

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]

    def get_many(self, keys: list[str]) -> dict[str, list[float]]:
        import numpy as np

        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            rows = self._db.execute(f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
            for key, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == self.dimension:
                    found[key] = vector.tolist()
        return found

    def put_many(self, items: dict[str, list[float]]) -> None:
        import numpy as np

        self._db.executemany("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)",
                             [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()])
        self._db.commit()


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > config.MAX_FILE_BYTES or b"\0" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    head = text[:600]
    if any(marker in head for marker in config.GENERATED_MARKERS):
        return None
    return text


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
        lexicon = self._load_lexicon() if files else {}
        current = list_repo_files(self.repo, exclude=[self.index_path, *(exclude or [])])
        current_set = set(current)

        removed = [p for p in files if p not in current_set]
        for path in removed:
            self.chunks.delete_file(path)
            files.pop(path, None)
            lexicon.pop(path, None)
        stats.removed = len(removed)

        pending: list[tuple[str, str, str, os.stat_result]] = []
        for path in current:
            full = self.repo / path
            try:
                st = full.stat()
            except OSError:
                continue
            record = files.get(path)
            if record and record.size == st.st_size and record.mtime_ns == st.st_mtime_ns:
                stats.unchanged += 1
                continue
            text = _read_text(full)
            if text is None or redact.looks_like_secret_file(text):
                if record:
                    self.chunks.delete_file(path)
                    files.pop(path, None)
                    lexicon.pop(path, None)
                continue
            digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
            if record and record.hash == digest:
                record.size, record.mtime_ns = st.st_size, st.st_mtime_ns
                stats.unchanged += 1
                continue
            if record:
                stats.changed += 1
            else:
                stats.added += 1
            pending.append((path, text, digest, st))

        total = len(pending)
        for start in range(0, total, FILES_PER_FLUSH):
            batch = pending[start:start + FILES_PER_FLUSH]
            stats.chunks_embedded += self._index_batch(batch, files, lexicon)
            if progress:
                progress(min(start + FILES_PER_FLUSH, total), total)
            self._save_manifest(files, graph)

        if pending or removed or not (self.dir / "bm25" / "paths.txt").is_file():
            graph = self._resolve_graph(files)
            self._save_manifest(files, graph)
            _atomic_write(self.dir / "lexicon.json", json.dumps(lexicon, separators=(",", ":")))
            lexical.LexicalIndex.build({p: t.split() for p, t in lexicon.items()}).save(self.dir / "bm25")
        lex = lexical.LexicalIndex.load(self.dir / "bm25") or lexical.LexicalIndex.build(
            {p: t.split() for p, t in lexicon.items()})

        stats.files = len(files)
        stats.symbols = sum(len(r.symbols) for r in files.values())
        stats.seconds = time.perf_counter() - started
        logger.info("indexed %s: %d files (%d added, %d changed, %d removed), %d chunks embedded in %.2fs",
                    self.repo, stats.files, stats.added, stats.changed, stats.removed, stats.chunks_embedded,
                    stats.seconds)
        return RepoIndex(self.repo, files, graph, lex, self.chunks, self.embedder), stats

    def _index_batch(self, batch: list[tuple[str, str, str, os.stat_result]], files: dict[str, FileRecord],
                     lexicon: dict[str, str]) -> int:
        texts: list[str] = []
        metas: list[dict] = []
        ids: list[str] = []
        file_ids: list[tuple[str, list[str]]] = []
        for path, text, digest, st in batch:
            parsed = parse_source(path, text)
            embedded = config.language_for(path) in config.EMBEDDED_LANGUAGES
            # the model adds [CLS] and [SEP] to what count_tokens counts
            chunk_list = chunk_file(path, text, parsed, max_tokens=self.embedder.max_tokens - 2,
                                    count_tokens=self.embedder.count_tokens) if embedded else []
            own = [store.chunk_id(path, digest, i, chunk.text) for i, chunk in enumerate(chunk_list)]
            file_ids.append((path, own))
            for cid, chunk in zip(own, chunk_list):
                ids.append(cid)
                texts.append(chunk.text)
                metas.append({"path": path, "start": chunk.start_line, "end": chunk.end_line,
                              "symbol": chunk.symbol or "", "kind": chunk.kind})
            files[path] = FileRecord(
                path=path, hash=digest, size=st.st_size, mtime_ns=st.st_mtime_ns, language=parsed.language,
                parser=parsed.parser, tokens=tokens.count_tokens(text),
                symbols=[[s.qualname, s.kind, s.start_line, s.end_line, s.signature] for s in parsed.symbols],
                imports=[[i.module, list(i.names), i.level] for i in parsed.imports], chunks=len(chunk_list))
            lexicon[path] = " ".join(lexical.path_tokens(path) + lexical.tokenize(text))
        stored = self.chunks.existing(ids)  # already in the store: an earlier run, or a teammate on a shared server
        todo = [k for k, cid in enumerate(ids) if cid not in stored]
        ids, texts, metas = [ids[k] for k in todo], [texts[k] for k in todo], [metas[k] for k in todo]
        keys = [EmbeddingCache.key(t) for t in texts]
        known = self.cache.get_many(sorted(set(keys)))
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        text_of = dict(zip(keys, texts))
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start:start + EMBED_BATCH]
            fresh = dict(zip(part, self.embedder.embed([text_of[k] for k in part])))
            self.cache.put_many(fresh)
            known.update(fresh)
        for start in range(0, len(texts), EMBED_BATCH):
            self.chunks.add(ids[start:start + EMBED_BATCH], [known[k] for k in keys[start:start + EMBED_BATCH]],
                            texts[start:start + EMBED_BATCH], metas[start:start + EMBED_BATCH])
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
