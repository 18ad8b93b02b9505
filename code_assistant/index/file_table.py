"""The index database's `files` and `layouts` tables: one row per file seen (indexed, or skipped and remembered by
stat), with its record as a run reads it back, and how each file's current version is chunked for embedding."""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from code_assistant.index.table_rows import file_id, rows_in


class FileStamp(NamedTuple):
    """A file as the last run saw it."""

    size: int
    mtime_ns: int
    skipped: bool  # seen but left out of the index (too big, binary, a secret, ...)


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
class IndexedFile:
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


class FileTable:
    """Which files there are and what the index knows of each; writes are committed by the caller."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    # ----- what a warm run reads -----------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self._db.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None

    def stamps(self) -> dict[str, FileStamp]:
        """What a warm run compares with the file system, for every file seen, indexed or not."""
        rows = self._db.execute("SELECT path, size, mtime_ns, skipped FROM files")
        return {path: FileStamp(size, mtime, bool(skipped)) for path, size, mtime, skipped in rows}

    def stamps_of(self, paths: Sequence[str]) -> dict[str, FileStamp]:
        """The stamps of those of paths the index has a row for (read again inside a write: another process may
        have stored one since the update listed it)."""
        rows = rows_in(self._db, "SELECT path, size, mtime_ns, skipped FROM files WHERE path IN ({})", paths)
        return {path: FileStamp(size, mtime, bool(skipped)) for path, size, mtime, skipped in rows}

    def paths(self) -> list[str]:
        """The indexed files, in path order."""
        return [p for (p,) in self._db.execute("SELECT path FROM files WHERE skipped = 0 ORDER BY path")]

    def hashes(self, paths: Sequence[str]) -> dict[str, str]:
        return dict(rows_in(self._db, "SELECT path, hash FROM files WHERE skipped = 0 AND path IN ({})", paths))

    # ----- records ---------------------------------------------------------------------------------------------
    def records(self, paths: Sequence[str]) -> dict[str, IndexedFile]:
        rows = rows_in(self._db, "SELECT path, hash, size, mtime_ns, language, parser, tokens, symbols, imports, "
                                 "chunks FROM files WHERE skipped = 0 AND path IN ({})", paths)
        return {path: IndexedFile(path=path, hash=digest, size=size, mtime_ns=mtime, language=language, parser=parser,
                                 tokens=tokens, symbols=[SymbolRow(*s) for s in json.loads(symbols)],
                                 imports=[ImportRow(*i) for i in json.loads(imports)], chunks=chunks)
                for path, digest, size, mtime, language, parser, tokens, symbols, imports, chunks in rows}

    def import_statements(self, paths: Iterable[str] | None = None) -> Iterator[tuple[str, str, list[ImportRow]]]:
        """(path, language, import statements as parsed) of the indexed files that import something (of paths, when
        given): what the import graph is resolved from."""
        query = ("SELECT path, language, imports FROM files "
                 "WHERE skipped = 0 AND imports != '[]' AND language IS NOT NULL")
        if paths is None:
            rows = self._db.execute(query).fetchall()
        else:
            rows = rows_in(self._db, query + " AND path IN ({})", paths)
        for path, language, imports in rows:
            yield path, language, [ImportRow(*i) for i in json.loads(imports)]

    def symbol_count(self) -> int:
        """Definitions in the indexed files."""
        return self._db.execute("SELECT COALESCE(SUM(n_symbols), 0) FROM files WHERE skipped = 0").fetchone()[0]

    # ----- layouts -----------------------------------------------------------------------------------------------
    def layout(self, path: str, digest: str) -> list | None:
        """How this version of the file is chunked for embedding (vectors.py stores it), if it was."""
        row = self._db.execute("SELECT l.layout FROM layouts l JOIN files f ON f.id = l.file_id "
                               "WHERE f.path = ? AND f.skipped = 0 AND l.hash = ?", (path, digest)).fetchone()
        return json.loads(row[0]) if row else None

    def set_layout(self, path: str, digest: str, layout: list) -> None:
        row_id = file_id(self._db, path)
        if row_id is not None:
            self._db.execute("INSERT OR REPLACE INTO layouts (file_id, hash, layout) VALUES (?, ?, ?)",
                             (row_id, digest, json.dumps(layout, separators=(",", ":"))))

    # ----- writes --------------------------------------------------------------------------------------------------
    def put(self, record: IndexedFile, length: int) -> int:
        """Insert or replace a file's record (its vectors not stored yet); its row id."""
        r = record
        self._db.execute(
            "INSERT INTO files (path, size, mtime_ns, skipped, hash, language, parser, tokens, chunks, length,"
            " n_symbols, symbols, imports, chunk_ids, vectors) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', 0)"
            " ON CONFLICT (path) DO UPDATE SET"
            " size = excluded.size, mtime_ns = excluded.mtime_ns, skipped = 0, hash = excluded.hash,"
            " language = excluded.language, parser = excluded.parser, tokens = excluded.tokens,"
            " chunks = excluded.chunks, length = excluded.length, n_symbols = excluded.n_symbols,"
            " symbols = excluded.symbols,"
            " imports = excluded.imports, chunk_ids = '[]', vectors = 0",
            (r.path, r.size, r.mtime_ns, r.hash, r.language, r.parser, r.tokens, r.chunks, length, len(r.symbols),
             json.dumps(r.symbols, separators=(",", ":")), json.dumps(r.imports, separators=(",", ":"))))
        return file_id(self._db, r.path)

    def put_skipped(self, path: str, size: int, mtime_ns: int) -> None:
        """Remember a file that is not indexed (its earlier rows already dropped)."""
        self._db.execute("INSERT INTO files (path, size, mtime_ns, skipped) VALUES (?, ?, ?, 1)",
                         (path, size, mtime_ns))

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new stat (a `touch`, a checkout back and forth)."""
        self._db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def drop_layout(self, row_id: int) -> None:
        self._db.execute("DELETE FROM layouts WHERE file_id = ?", (row_id,))

    def delete(self, row_id: int) -> None:
        """The file's own row (the other tables' rows of it are dropped first)."""
        self._db.execute("DELETE FROM files WHERE id = ?", (row_id,))
