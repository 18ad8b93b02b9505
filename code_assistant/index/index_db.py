"""The index's own records in one SQLite file per repository: files, symbol names, import edges, BM25 postings.

Everything is keyed by file, so an update that touches one file writes that file's rows only, a warm run reads
three columns, and a query reads the rows it needs: nothing here is loaded whole, whatever the repository's size.
Files that are not indexed (binary, generated, holding a secret) are remembered by stat as `skipped`, so a warm
run does not read them again.
"""
from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from code_assistant.errors import AssistantError
from code_assistant.index import lexical

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 5  # 4: vectors are filled on demand (chunk_ids = the stored ones, vectors = complete);
# 5: a copy of each vector this machine stored, searched exactly (index/nearest.py)
LOCK_TIMEOUT_S = 60.0  # another process writing the same index (a second CLI run) is waited for this long
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    skipped INTEGER NOT NULL DEFAULT 0, hash TEXT, language TEXT, parser TEXT, tokens INTEGER, chunks INTEGER,
    length INTEGER, n_symbols INTEGER NOT NULL DEFAULT 0, symbols TEXT, imports TEXT, chunk_ids TEXT,
    vectors INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS symbols (name TEXT NOT NULL, file_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols (name);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols (file_id);
CREATE TABLE IF NOT EXISTS edges (src INTEGER NOT NULL, dst INTEGER NOT NULL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edges_dst ON edges (dst);
CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS postings (term_id INTEGER NOT NULL, file_id INTEGER NOT NULL, tf INTEGER NOT NULL,
    PRIMARY KEY (term_id, file_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_file ON postings (file_id);
CREATE TABLE IF NOT EXISTS layouts (file_id INTEGER PRIMARY KEY, hash TEXT NOT NULL, layout TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunk_vectors (file_id INTEGER NOT NULL, chunk_id TEXT NOT NULL, start INTEGER NOT NULL,
    end INTEGER NOT NULL, symbol TEXT NOT NULL, kind TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (file_id, chunk_id)) WITHOUT ROWID;
"""


class FileStamp(NamedTuple):
    """A file as the last run saw it."""

    size: int
    mtime_ns: int
    skipped: bool  # seen but left out of the index (too big, binary, a secret, ...)


class IndexDBError(AssistantError):
    """The index database cannot be used: busy beyond the timeout, or not writable."""


class SymbolRow(NamedTuple):
    """A definition as the index keeps it (a JSON list in the database)."""

    qualname: str
    kind: str
    start: int
    end: int
    signature: str


class ImportRow(NamedTuple):
    """An import statement as the index keeps it: resolved against the repository's paths when the graph is built."""

    module: str
    names: list[str]
    level: int


@dataclass
class FileRecord:
    path: str
    hash: str
    size: int
    mtime_ns: int
    language: str | None
    parser: str
    tokens: int  # a lower bound of the file's cl100k token count: enough to rule a whole file out of a budget
    symbols: list[SymbolRow] = field(default_factory=list)
    imports: list[ImportRow] = field(default_factory=list)
    chunks: int = 0  # chunks of this version, once it has been chunked for embedding (0 before)


@dataclass
class Entry:
    """One indexed file version as the indexer hands it over: its record and BM25 terms (no vectors yet)."""

    record: FileRecord
    terms: dict[str, int]
    length: int


class VectorRow(NamedTuple):
    """A stored chunk's vector with where it is (float32 bytes, as the store got it)."""

    chunk_id: str
    path: str
    start: int
    end: int
    symbol: str
    kind: str
    vector: bytes


class IndexDB:
    def __init__(self, path: Path, embedder_name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.vector_writes = 0  # bumped by every change to the vectors or their copy: what a reader cached is stale
        self._term_cache: dict[str, int] = {}  # term -> id: ids are never reused, so a bulk update asks only once
        try:
            self._db = self._open()
        except sqlite3.OperationalError as exc:  # locked, or not writable: nothing to repair here
            raise IndexDBError(f"index database {path} cannot be opened: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # not a database, or damaged: it is a cache, so start afresh
            logger.warning("index database %s is unreadable (%s); rebuilding the index", path, exc)
            for suffix in ("", "-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            self._db = self._open()
        wanted = {"version": str(SCHEMA_VERSION), "embedder": embedder_name}
        stored = dict(self._db.execute("SELECT key, value FROM meta"))
        if stored != wanted:
            if stored:
                logger.info("index format or embedder changed (%s -> %s); starting afresh", stored, wanted)
            self.clear()
            self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", wanted.items())
            self._db.commit()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=LOCK_TIMEOUT_S, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT COUNT(*) FROM files").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()

    def clear(self) -> None:
        self._term_cache.clear()
        self.vector_writes += 1
        for table in ("meta", "files", "symbols", "edges", "terms", "postings", "layouts", "chunk_vectors"):
            self._db.execute(f"DELETE FROM {table}")  # fixed table names
        self._db.commit()

    def commit(self) -> None:
        self._db.commit()

    # ----- what a warm run reads -----------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self._db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None

    def stats(self) -> dict[str, FileStamp]:
        """What a warm run compares with the file system, for every file seen, indexed or not."""
        rows = self._db.execute("SELECT path, size, mtime_ns, skipped FROM files")
        return {path: FileStamp(size, mtime, bool(skipped)) for path, size, mtime, skipped in rows}

    def paths(self) -> list[str]:
        return [p for (p,) in self._db.execute("SELECT path FROM files WHERE skipped = 0 ORDER BY path")]

    def hashes(self, paths: Sequence[str]) -> dict[str, str]:
        return dict(self._rows_in("SELECT path, hash FROM files WHERE skipped = 0 AND path IN ({})", paths))

    # ----- records ---------------------------------------------------------------------------------------------
    def records(self, paths: Sequence[str]) -> dict[str, FileRecord]:
        rows = self._rows_in("SELECT path, hash, size, mtime_ns, language, parser, tokens, symbols, imports, chunks "
                             "FROM files WHERE skipped = 0 AND path IN ({})", paths)
        return {path: FileRecord(path, digest, size, mtime, language, parser, tokens,
                                 [SymbolRow(*s) for s in json.loads(symbols)],
                                 [ImportRow(*i) for i in json.loads(imports)], chunks)
                for path, digest, size, mtime, language, parser, tokens, symbols, imports, chunks in rows}

    def chunk_ids(self, path: str) -> list[str]:
        row = self._db.execute("SELECT chunk_ids FROM files WHERE path = ? AND skipped = 0", (path,)).fetchone()
        return json.loads(row[0]) if row and row[0] else []

    def layout(self, path: str, digest: str) -> list | None:
        """How this version of the file is chunked for embedding (vectors.py stores it), if it was."""
        row = self._db.execute("SELECT l.layout FROM layouts l JOIN files f ON f.id = l.file_id "
                               "WHERE f.path = ? AND f.skipped = 0 AND l.hash = ?", (path, digest)).fetchone()
        return json.loads(row[0]) if row else None

    def set_layout(self, path: str, digest: str, layout: list) -> None:
        file_id = self._file_id(path)
        if file_id is not None:
            self._db.execute("INSERT OR REPLACE INTO layouts (file_id, hash, layout) VALUES (?, ?, ?)",
                             (file_id, digest, json.dumps(layout, separators=(",", ":"))))

    # ----- vectors, filled on demand ---------------------------------------------------------------------------
    def set_vectors(self, path: str, chunk_ids: list[str], chunks: int, complete: bool) -> None:
        """The chunks of the current version that have a vector in the store; complete when all of them do."""
        self._db.execute("UPDATE files SET chunk_ids = ?, chunks = ?, vectors = ? WHERE path = ? AND skipped = 0",
                         (json.dumps(chunk_ids), chunks, int(complete), path))
        self.vector_writes += 1

    def put_vectors(self, rows: Sequence[VectorRow]) -> None:
        """Keep a copy of vectors just written to the store, beside the records of their files (the current
        versions: a row of a file the index no longer has, or of an older version, is dropped with it)."""
        ids = self._ids_of({r.path for r in rows})
        self._db.executemany("INSERT OR REPLACE INTO chunk_vectors (file_id, chunk_id, start, end, symbol, kind, "
                             "vector) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(ids[r.path], r.chunk_id, r.start, r.end, r.symbol, r.kind, r.vector)
                              for r in rows if r.path in ids])
        self.vector_writes += 1

    def vector_rows(self, paths: Sequence[str] | None = None) -> list[VectorRow]:
        """The copies of the stored vectors: of every file, or of the files in paths (in chunk id order)."""
        query = ("SELECT v.chunk_id, f.path, v.start, v.end, v.symbol, v.kind, v.vector FROM chunk_vectors v "
                 "JOIN files f ON f.id = v.file_id WHERE f.skipped = 0")
        rows = (self._db.execute(query).fetchall() if paths is None
                else self._rows_in(query + " AND f.path IN ({})", paths))
        return sorted((VectorRow(*row) for row in rows), key=lambda r: r.chunk_id)

    def vector_copies(self) -> tuple[int, int]:
        """(vectors copied here, chunks the records say are stored): equal when every stored vector was made on
        this machine, which a shared store's (found on the server, never copied) need not be."""
        copied = self._db.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0]
        claimed = self._db.execute("SELECT COALESCE(SUM(json_array_length(chunk_ids)), 0) FROM files "
                                   "WHERE skipped = 0 AND chunk_ids IS NOT NULL").fetchone()[0]
        return copied, claimed

    def without_vectors(self, paths: Sequence[str] | None = None) -> list[str]:
        """Of paths (all indexed files when None), those whose chunks are not all in the store yet, in that order."""
        if paths is None:
            return [p for (p,) in self._db.execute("SELECT path FROM files WHERE skipped = 0 AND vectors = 0 "
                                                    "ORDER BY path")]
        missing = {p for (p,) in self._rows_in("SELECT path FROM files WHERE skipped = 0 AND vectors = 0 "
                                                "AND path IN ({})", paths)}
        return [p for p in paths if p in missing]

    def vector_counts(self) -> tuple[int, int]:
        """(files whose vectors are complete, indexed files)."""
        done, total = self._db.execute("SELECT COALESCE(SUM(vectors), 0), COUNT(*) FROM files "
                                       "WHERE skipped = 0").fetchone()
        return done, total

    def imports(self, paths: Iterable[str] | None = None) -> Iterator[tuple[str, str, list[ImportRow]]]:
        """(path, language, imports) of the indexed files that import something (of paths, when given)."""
        query = ("SELECT path, language, imports FROM files "
                 "WHERE skipped = 0 AND imports != '[]' AND language IS NOT NULL")
        if paths is None:
            rows = self._db.execute(query).fetchall()
        else:
            rows = self._rows_in(query + " AND path IN ({})", paths)
        for path, language, imports in rows:
            yield path, language, [ImportRow(*i) for i in json.loads(imports)]

    def count_symbols(self) -> int:
        return self._db.execute("SELECT COALESCE(SUM(n_symbols), 0) FROM files WHERE skipped = 0").fetchone()[0]

    # ----- writes (the caller commits) ------------------------------------------------------------------------
    def put(self, entry: Entry) -> None:
        """Insert or replace one file's record, symbol names and postings."""
        r = entry.record
        self._db.execute(
            "INSERT INTO files (path, size, mtime_ns, skipped, hash, language, parser, tokens, chunks, length,"
            " n_symbols, symbols, imports, chunk_ids, vectors) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', 0)"
            " ON CONFLICT (path) DO UPDATE SET"
            " size = excluded.size, mtime_ns = excluded.mtime_ns, skipped = 0, hash = excluded.hash,"
            " language = excluded.language, parser = excluded.parser, tokens = excluded.tokens,"
            " chunks = excluded.chunks, length = excluded.length, n_symbols = excluded.n_symbols,"
            " symbols = excluded.symbols,"
            " imports = excluded.imports, chunk_ids = '[]', vectors = 0",
            (r.path, r.size, r.mtime_ns, r.hash, r.language, r.parser, r.tokens, r.chunks, entry.length, len(r.symbols),
             json.dumps(r.symbols, separators=(",", ":")), json.dumps(r.imports, separators=(",", ":"))))
        file_id = self._file_id(r.path)
        self._drop_rows(file_id, edges=False)
        names = {n for qualname, *_ in r.symbols for n in (qualname.lower(), qualname.rsplit(".", 1)[-1].lower())}
        self._db.executemany("INSERT INTO symbols (name, file_id) VALUES (?, ?)", [(n, file_id) for n in names])
        new_terms = [t for t in entry.terms if t not in self._term_cache]
        if new_terms:
            self._db.executemany("INSERT OR IGNORE INTO terms (term) VALUES (?)", [(t,) for t in new_terms])
            self._term_cache.update(self._term_ids(new_terms))
        ids = self._term_cache
        self._db.executemany("INSERT INTO postings (term_id, file_id, tf) VALUES (?, ?, ?)",
                             [(ids[t], file_id, tf) for t, tf in entry.terms.items()])

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new stat (a `touch`, a checkout back and forth)."""
        self._db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def skip(self, path: str, size: int, mtime_ns: int) -> None:
        """Remember a file that is not indexed, dropping whatever was indexed of it before."""
        self.remove([path])
        self._db.execute("INSERT INTO files (path, size, mtime_ns, skipped) VALUES (?, ?, ?, 1)",
                         (path, size, mtime_ns))

    def remove(self, paths: Iterable[str]) -> None:
        for path in paths:
            file_id = self._file_id(path)
            if file_id is not None:
                self._drop_rows(file_id, edges=True)
                self._db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    # ----- the import graph --------------------------------------------------------------------------------------
    def set_edges(self, graph: Mapping[str, Iterable[str]], replace_all: bool) -> None:
        """Store resolved imports: for every file in graph (or, with replace_all, the whole graph)."""
        ids = self._ids_of({p for src, targets in graph.items() for p in (src, *targets)})
        if replace_all:
            self._db.execute("DELETE FROM edges")
        else:
            self._db.executemany("DELETE FROM edges WHERE src = ?", [(ids[s],) for s in graph if s in ids])
        self._db.executemany("INSERT OR IGNORE INTO edges (src, dst) VALUES (?, ?)",
                             [(ids[s], ids[t]) for s, targets in graph.items() for t in targets
                              if s in ids and t in ids])

    def graph(self) -> dict[str, list[str]]:
        graph: dict[str, list[str]] = {}
        for src, dst in self._db.execute("SELECT a.path, b.path FROM edges JOIN files a ON a.id = edges.src "
                                         "JOIN files b ON b.id = edges.dst ORDER BY a.path, b.path"):
            graph.setdefault(src, []).append(dst)
        return graph

    def importers(self, paths: Sequence[str]) -> dict[str, int]:
        """How many files import each of paths (those imported by none are left out)."""
        return dict(self._rows_in("SELECT files.path, COUNT(*) FROM edges JOIN files ON files.id = edges.dst "
                                  "WHERE files.path IN ({}) GROUP BY files.path", paths))

    def neighbours(self, path: str) -> tuple[list[str], list[str]]:
        """(files path imports, files that import path)."""
        out = [p for (p,) in self._db.execute("SELECT b.path FROM files a JOIN edges ON edges.src = a.id "
                                               "JOIN files b ON b.id = edges.dst WHERE a.path = ?", (path,))]
        into = [p for (p,) in self._db.execute("SELECT a.path FROM files b JOIN edges ON edges.dst = b.id "
                                                "JOIN files a ON a.id = edges.src WHERE b.path = ?", (path,))]
        return sorted(out), sorted(into)

    # ----- queries ------------------------------------------------------------------------------------------------
    def defining(self, names: Iterable[str]) -> dict[str, set[str]]:
        """Lowercased name -> files defining it (as a last segment `add` or a qualified name `calc.add`)."""
        wanted = sorted({n.lower() for n in names})
        found: dict[str, set[str]] = {}
        for name, path in self._rows_in("SELECT name, path FROM symbols JOIN files ON files.id = symbols.file_id "
                                        "WHERE name IN ({})", wanted):
            found.setdefault(name, set()).add(path)
        return found

    def doc_freq(self, terms: Iterable[str]) -> tuple[dict[str, int], int]:
        """How many indexed files hold each term (path or text), and how many files there are: a term's rarity."""
        n_docs = self._db.execute("SELECT COUNT(*) FROM files WHERE skipped = 0").fetchone()[0]
        found = self._rows_in("SELECT terms.term, COUNT(*) FROM terms JOIN postings ON postings.term_id = terms.id "
                              "WHERE terms.term IN ({}) GROUP BY terms.term", set(terms))
        return dict(found), n_docs

    def files_with(self, terms: Iterable[str]) -> dict[str, set[str]]:
        """Term -> the indexed files holding it (path or text): for rare terms, the few files to look in."""
        found: dict[str, set[str]] = {}
        for term, path in self._rows_in("SELECT terms.term, files.path FROM terms JOIN postings ON postings.term_id = "
                                        "terms.id JOIN files ON files.id = postings.file_id WHERE files.skipped = 0 "
                                        "AND terms.term IN ({})", set(terms)):
            found.setdefault(term, set()).add(path)
        return found

    def bm25(self, query_tokens: Sequence[str]) -> dict[str, float]:
        """BM25 of every file containing a query token (each occurrence in the query counts, as in bm25s)."""
        n_docs, total = self._db.execute("SELECT COUNT(*), SUM(length) FROM files WHERE skipped = 0").fetchone()
        if not n_docs or not query_tokens:
            return {}
        avg_len = total / n_docs
        weights = Counter(query_tokens)
        scores: dict[str, float] = {}
        term_ids = self._term_ids(weights)
        for term, term_id in term_ids.items():
            rows = self._db.execute("SELECT files.path, postings.tf, files.length FROM postings JOIN files "
                                    "ON files.id = postings.file_id WHERE postings.term_id = ?", (term_id,)).fetchall()
            if not rows:
                continue
            idf = lexical.bm25_idf(len(rows), n_docs) * weights[term]
            for path, tf, length in rows:
                scores[path] = scores.get(path, 0.0) + idf * lexical.bm25_tf(tf, length, avg_len)
        return scores

    # ----- helpers ----------------------------------------------------------------------------------------------
    def _file_id(self, path: str) -> int | None:
        row = self._db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        return row[0] if row else None

    def _ids_of(self, paths: Iterable[str]) -> dict[str, int]:
        return dict(self._rows_in("SELECT path, id FROM files WHERE path IN ({})", paths))

    def _term_ids(self, terms: Iterable[str]) -> dict[str, int]:
        return dict(self._rows_in("SELECT term, id FROM terms WHERE term IN ({})", terms))

    def _rows_in(self, sql: str, items: Iterable[str], size: int = 500) -> list[tuple]:
        """Rows of sql, whose `{}` is an IN list, for every item (in parts: SQLite caps the number of parameters)."""
        items = list(items)
        rows: list[tuple] = []
        for start in range(0, len(items), size):
            part = items[start:start + size]
            rows.extend(self._db.execute(sql.format(",".join("?" * len(part))), part))
        return rows

    def _drop_rows(self, file_id: int | None, edges: bool) -> None:
        if file_id is None:
            return
        self._db.execute("DELETE FROM symbols WHERE file_id = ?", (file_id,))
        self._db.execute("DELETE FROM postings WHERE file_id = ?", (file_id,))
        self._db.execute("DELETE FROM layouts WHERE file_id = ?", (file_id,))
        self._db.execute("DELETE FROM chunk_vectors WHERE file_id = ?", (file_id,))
        self.vector_writes += 1
        if edges:
            self._db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (file_id, file_id))
