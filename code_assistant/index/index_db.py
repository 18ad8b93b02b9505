"""The index's own records in one SQLite file per repository: a connection and its tables, each a small object
(file_table, vector_table, edge_table, postings), plus the writes that span them (a file stored, skipped, removed).

Everything is keyed by file, so an update that touches one file writes that file's rows only, a warm run reads
three columns, and a query reads the rows it needs: nothing here is loaded whole, whatever the repository's size.
Files that are not indexed (binary, generated, holding a secret) are remembered by stat as `skipped`, so a warm
run does not read them again.
"""
from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from code_assistant.errors import AssistantError
from code_assistant.index.edge_table import EdgeTable
from code_assistant.index.file_table import FileTable, IndexedFile
from code_assistant.index.postings import PostingTable, SymbolTable
from code_assistant.index.table_rows import file_id
from code_assistant.index.vector_table import VectorTable

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 6  # 4: vectors are filled on demand (chunk_ids = the stored ones, vectors = complete);
# 5: a copy of each vector this machine stored, searched exactly (index/nearest.py)
# 6: the definitions JavaScript/TypeScript make by assignment and object literal (parse/js_forms.py) and the other
# forms of tests/test_definition_forms.py: an index parsed without them is parsed again
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


def _into_wal(db: sqlite3.Connection) -> None:
    """Write-ahead logging (readers beside one writer). Two processes opening a new database at once (a run and the
    completion, two commands) both ask for it, and SQLite answers the second `database is locked` without waiting
    for its busy timeout: asked again until LOCK_TIMEOUT_S."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class IndexDBError(AssistantError):
    """The index database cannot be used: busy beyond the timeout, or not writable."""


@dataclass
class Entry:
    """One indexed file version as the indexer hands it over: its record and BM25 terms (no vectors yet)."""

    record: IndexedFile
    terms: dict[str, int]
    length: int


class IndexDB:
    """One repository's index database: its tables, over one connection (committed by the caller)."""

    def __init__(self, path: Path, embedder_name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:
            self._db = self._open()
        except sqlite3.OperationalError as exc:  # locked, or not writable: nothing to repair here
            raise IndexDBError(f"index database {path} cannot be opened: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # not a database, or damaged: it is a cache, so start afresh
            logger.warning("index database %s is unreadable (%s); rebuilding the index", path, exc)
            for suffix in ("", "-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            self._db = self._open()
        self.files = FileTable(self._db)
        self.vectors = VectorTable(self._db)
        self.edges = EdgeTable(self._db)
        self.symbols = SymbolTable(self._db)
        self.postings = PostingTable(self._db)
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
            _into_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT COUNT(*) FROM files").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()

    def commit(self) -> None:
        self._db.commit()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """One write transaction, its lock taken at once (BEGIN IMMEDIATE, waited for up to LOCK_TIMEOUT_S): what is
        read inside it is what it writes over, whatever another process writing this index (the background
        completion, a second run) does meanwhile; committed at the end, rolled back on an error."""
        self._db.commit()  # an implicit transaction still open
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise IndexDBError(f"index database {self.path} is busy: {exc}") from exc
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self._db.commit()

    def clear(self) -> None:
        self.postings.forget_ids()
        self.vectors.writes += 1
        for table in ("meta", "files", "symbols", "edges", "terms", "postings", "layouts", "chunk_vectors"):
            self._db.execute(f"DELETE FROM {table}")  # fixed table names
        self._db.commit()

    # ----- a file's rows in every table --------------------------------------------------------------------------
    def put(self, entry: Entry) -> None:
        """Insert or replace one file's record, symbol names and postings (its layout and vectors are dropped)."""
        row_id = self.files.put(entry.record, entry.length)
        self._drop_rows(row_id, edges=False)
        self.symbols.put(row_id, entry.record.symbols)
        self.postings.put(row_id, entry.terms)

    def skip(self, path: str, size: int, mtime_ns: int) -> None:
        """Remember a file that is not indexed, dropping whatever was indexed of it before."""
        self.remove([path])
        self.files.put_skipped(path, size, mtime_ns)

    def remove(self, paths: Iterable[str]) -> None:
        for path in paths:
            row_id = file_id(self._db, path)
            if row_id is not None:
                self._drop_rows(row_id, edges=True)
                self.files.delete(row_id)

    def _drop_rows(self, row_id: int, edges: bool) -> None:
        self.symbols.drop(row_id)
        self.postings.drop(row_id)
        self.files.drop_layout(row_id)
        self.vectors.drop(row_id)
        if edges:
            self.edges.drop(row_id)

    # ----- read by bench/regather.py, until it asks the table (#35) ------------------------------------------------
    def imports(self, paths: Sequence[str]) -> dict[str, int]:
        """How many repository files each of paths imports (edges.import_counts)."""
        return self.edges.import_counts(paths)
