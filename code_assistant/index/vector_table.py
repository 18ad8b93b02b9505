"""The index database's record of the vectors: which chunks of each file's current version the store holds
(`files.chunk_ids`, `files.vectors`), and a copy of each vector this machine stored (`chunk_vectors`), searched
exactly by nearest.py."""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from code_assistant.index.table_rows import file_ids, rows_in


class VectorRow(NamedTuple):
    """A stored chunk's vector with where it is (float32 bytes, as the store got it)."""

    chunk_id: str
    path: str
    start: int
    end: int
    symbol: str
    kind: str
    vector: bytes


class VectorTable:
    """Vectors, filled on demand; writes are committed by the caller."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.writes = 0  # bumped by every change to the vectors or their copy: what a reader cached is stale

    # ----- which chunks are stored ---------------------------------------------------------------------------
    def chunk_ids(self, path: str) -> list[str]:
        """The ids of path's chunks that the store holds."""
        row = self._db.execute("SELECT chunk_ids FROM files WHERE path = ? AND skipped = 0", (path,)).fetchone()
        return json.loads(row[0]) if row and row[0] else []

    def set_stored(self, path: str, chunk_ids: list[str], chunks: int, complete: bool) -> None:
        """The chunks of the current version that have a vector in the store; complete when all of them do."""
        self._db.execute("UPDATE files SET chunk_ids = ?, chunks = ?, vectors = ? WHERE path = ? AND skipped = 0",
                         (json.dumps(chunk_ids), chunks, int(complete), path))
        self.writes += 1

    def missing(self, paths: Sequence[str] | None = None) -> list[str]:
        """Of paths (all indexed files when None), those whose chunks are not all in the store yet, in that order."""
        if paths is None:
            return [p for (p,) in self._db.execute("SELECT path FROM files WHERE skipped = 0 AND vectors = 0 "
                                                    "ORDER BY path")]
        missing = {p for (p,) in rows_in(self._db, "SELECT path FROM files WHERE skipped = 0 AND vectors = 0 "
                                                    "AND path IN ({})", paths)}
        return [p for p in paths if p in missing]

    def counts(self) -> tuple[int, int]:
        """(files whose vectors are complete, indexed files)."""
        done, total = self._db.execute("SELECT COALESCE(SUM(vectors), 0), COUNT(*) FROM files "
                                       "WHERE skipped = 0").fetchone()
        return done, total

    # ----- the copy ------------------------------------------------------------------------------------------------
    def put_rows(self, rows: Sequence[VectorRow]) -> None:
        """Keep a copy of vectors just written to the store, beside the records of their files (the current
        versions: a row of a file the index no longer has, or of an older version, is dropped with it)."""
        ids = file_ids(self._db, {r.path for r in rows})
        self._db.executemany("INSERT OR REPLACE INTO chunk_vectors (file_id, chunk_id, start, end, symbol, kind, "
                             "vector) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(ids[r.path], r.chunk_id, r.start, r.end, r.symbol, r.kind, r.vector)
                              for r in rows if r.path in ids])
        self.writes += 1

    def rows(self, paths: Sequence[str] | None = None) -> list[VectorRow]:
        """The copies of the stored vectors: of every file, or of the files in paths (in chunk id order)."""
        query = ("SELECT v.chunk_id, f.path, v.start, v.end, v.symbol, v.kind, v.vector FROM chunk_vectors v "
                 "JOIN files f ON f.id = v.file_id WHERE f.skipped = 0")
        rows = (self._db.execute(query).fetchall() if paths is None
                else rows_in(self._db, query + " AND f.path IN ({})", paths))
        return sorted((VectorRow(*row) for row in rows), key=lambda r: r.chunk_id)

    def copy_counts(self) -> tuple[int, int]:
        """(vectors copied here, chunks the records say are stored): equal when every stored vector was made on
        this machine, which a shared store's (found on the server, never copied) need not be."""
        copied = self._db.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0]
        claimed = self._db.execute("SELECT COALESCE(SUM(json_array_length(chunk_ids)), 0) FROM files "
                                   "WHERE skipped = 0 AND chunk_ids IS NOT NULL").fetchone()[0]
        return copied, claimed

    def drop(self, row_id: int) -> None:
        """The copies of a file's vectors (its version changed, or it is gone)."""
        self._db.execute("DELETE FROM chunk_vectors WHERE file_id = ?", (row_id,))
        self.writes += 1
