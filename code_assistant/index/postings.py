"""The index database's word lookups: symbol names (`symbols`: which files define `add`) and BM25 postings
(`terms`, `postings`: which files hold a term, how often), both by file row id."""
from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from code_assistant.index import lexical
from code_assistant.index.file_table import SymbolRow
from code_assistant.index.table_rows import rows_in


class SymbolTable:
    """Definitions by name, lowercased: a last segment (`add`) and a qualified name (`calc.add`)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def put(self, row_id: int, symbols: Iterable[SymbolRow]) -> None:
        """The names a file defines (its earlier ones already dropped)."""
        names = {n for qualname, *_ in symbols for n in (qualname.lower(), qualname.rsplit(".", 1)[-1].lower())}
        self._db.executemany("INSERT INTO symbols (name, file_id) VALUES (?, ?)", [(n, row_id) for n in names])

    def defining(self, names: Iterable[str]) -> dict[str, set[str]]:
        """Lowercased name -> files defining it (as a last segment `add` or a qualified name `calc.add`)."""
        wanted = sorted({n.lower() for n in names})
        found: dict[str, set[str]] = {}
        for name, path in rows_in(self._db, "SELECT name, path FROM symbols JOIN files ON files.id = symbols.file_id "
                                            "WHERE name IN ({})", wanted):
            found.setdefault(name, set()).add(path)
        return found

    def drop(self, row_id: int) -> None:
        self._db.execute("DELETE FROM symbols WHERE file_id = ?", (row_id,))


class PostingTable:
    """Term frequencies per file, and the BM25 ranking built on them."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._term_ids: dict[str, int] = {}  # term -> id: ids are never reused, so a bulk update asks only once

    def put(self, row_id: int, terms: Mapping[str, int]) -> None:
        """A file's term counts (its earlier ones already dropped)."""
        new_terms = [t for t in terms if t not in self._term_ids]
        if new_terms:
            self._db.executemany("INSERT OR IGNORE INTO terms (term) VALUES (?)", [(t,) for t in new_terms])
            self._term_ids.update(self._ids(new_terms))
        ids = self._term_ids
        self._db.executemany("INSERT INTO postings (term_id, file_id, tf) VALUES (?, ?, ?)",
                             [(ids[t], row_id, tf) for t, tf in terms.items()])

    def doc_freq(self, terms: Iterable[str]) -> tuple[dict[str, int], int]:
        """How many indexed files hold each term (path or text), and how many files there are: a term's rarity."""
        n_docs = self._db.execute("SELECT COUNT(*) FROM files WHERE skipped = 0").fetchone()[0]
        found = rows_in(self._db, "SELECT terms.term, COUNT(*) FROM terms JOIN postings ON postings.term_id = "
                                  "terms.id WHERE terms.term IN ({}) GROUP BY terms.term", set(terms))
        return dict(found), n_docs

    def files_with(self, terms: Iterable[str]) -> dict[str, set[str]]:
        """Term -> the indexed files holding it (path or text): for rare terms, the few files to look in."""
        found: dict[str, set[str]] = {}
        for term, path in rows_in(self._db, "SELECT terms.term, files.path FROM terms JOIN postings ON "
                                            "postings.term_id = terms.id JOIN files ON files.id = postings.file_id "
                                            "WHERE files.skipped = 0 AND terms.term IN ({})", set(terms)):
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
        for term, term_id in self._ids(weights).items():
            rows = self._db.execute("SELECT files.path, postings.tf, files.length FROM postings JOIN files "
                                    "ON files.id = postings.file_id WHERE postings.term_id = ?", (term_id,)).fetchall()
            if not rows:
                continue
            idf = lexical.bm25_idf(len(rows), n_docs) * weights[term]
            for path, tf, length in rows:
                scores[path] = scores.get(path, 0.0) + idf * lexical.bm25_tf(tf, length, avg_len)
        return scores

    def drop(self, row_id: int) -> None:
        self._db.execute("DELETE FROM postings WHERE file_id = ?", (row_id,))

    def forget_ids(self) -> None:
        """The table was emptied: term ids cached from it are gone with it."""
        self._term_ids.clear()

    def _ids(self, terms: Iterable[str]) -> dict[str, int]:
        return dict(rows_in(self._db, "SELECT term, id FROM terms WHERE term IN ({})", terms))
