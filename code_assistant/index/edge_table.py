"""The index database's `edges` table: the import graph, resolved (indexer.py), by file row id."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence

from code_assistant.index.table_rows import file_ids, rows_in


class EdgeTable:
    """Which file imports which; writes are committed by the caller."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def put(self, graph: Mapping[str, Iterable[str]], replace_all: bool) -> None:
        """Store resolved imports: for every file in graph (or, with replace_all, the whole graph)."""
        ids = file_ids(self._db, {p for src, targets in graph.items() for p in (src, *targets)})
        if replace_all:
            self._db.execute("DELETE FROM edges")
        else:
            self._db.executemany("DELETE FROM edges WHERE src = ?", [(ids[s],) for s in graph if s in ids])
        self._db.executemany("INSERT OR IGNORE INTO edges (src, dst) VALUES (?, ?)",
                             [(ids[s], ids[t]) for s, targets in graph.items() for t in targets
                              if s in ids and t in ids])

    def graph(self) -> dict[str, list[str]]:
        """The whole graph: path -> the files it imports, in path order."""
        graph: dict[str, list[str]] = {}
        for src, dst in self._db.execute("SELECT a.path, b.path FROM edges JOIN files a ON a.id = edges.src "
                                         "JOIN files b ON b.id = edges.dst ORDER BY a.path, b.path"):
            graph.setdefault(src, []).append(dst)
        return graph

    def importer_counts(self, paths: Sequence[str]) -> dict[str, int]:
        """How many files import each of paths (those imported by none are left out)."""
        return dict(rows_in(self._db, "SELECT files.path, COUNT(*) FROM edges JOIN files ON files.id = edges.dst "
                                      "WHERE files.path IN ({}) GROUP BY files.path", paths))

    def import_counts(self, paths: Sequence[str]) -> dict[str, int]:
        """How many repository files each of paths imports (those importing none are left out)."""
        return dict(rows_in(self._db, "SELECT files.path, COUNT(*) FROM edges JOIN files ON files.id = edges.src "
                                      "WHERE files.path IN ({}) GROUP BY files.path", paths))

    def neighbours(self, path: str) -> tuple[list[str], list[str]]:
        """(files path imports, files that import path)."""
        out = [p for (p,) in self._db.execute("SELECT b.path FROM files a JOIN edges ON edges.src = a.id "
                                               "JOIN files b ON b.id = edges.dst WHERE a.path = ?", (path,))]
        into = [p for (p,) in self._db.execute("SELECT a.path FROM files b JOIN edges ON edges.dst = b.id "
                                                "JOIN files a ON a.id = edges.src WHERE b.path = ?", (path,))]
        return sorted(out), sorted(into)

    def drop(self, row_id: int) -> None:
        """Every edge from or to a file that is gone."""
        self._db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (row_id, row_id))
