"""What the index database's table objects share: rows for an IN list of any length, and file ids by path."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable

IN_LIST_SIZE = 500  # parameters per statement: SQLite caps them (999 in older builds)


def rows_in(db: sqlite3.Connection, sql: str, items: Iterable[str]) -> list[tuple]:
    """Rows of sql, whose `{}` is an IN list, for every item (in parts: SQLite caps the number of parameters)."""
    items = list(items)
    rows: list[tuple] = []
    for start in range(0, len(items), IN_LIST_SIZE):
        part = items[start:start + IN_LIST_SIZE]
        rows.extend(db.execute(sql.format(",".join("?" * len(part))), part))
    return rows


def file_id(db: sqlite3.Connection, path: str) -> int | None:
    """The row id of path in `files` (indexed or skipped), if it has one."""
    row = db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
    return row[0] if row else None


def file_ids(db: sqlite3.Connection, paths: Iterable[str]) -> dict[str, int]:
    """Path -> row id in `files`, for those of paths that have one."""
    return dict(rows_in(db, "SELECT path, id FROM files WHERE path IN ({})", paths))
