"""The chunks nearest to a query vector: exactly, from the index database's copy of the vectors this machine
stored, or from Chroma's approximate (HNSW) index when the copy cannot answer.

A repository indexed on demand holds the vectors of a few hundred chunks, the candidates of its queries so far:
comparing the query with every one of them takes milliseconds and gives the same answer on every run, while opening
Chroma costs its import (about a second) and an approximate search. So a private store is searched exactly while it
holds at most EXACT_LIMIT vectors; the whole-store search of a larger one (`code-assistant index` on a big
repository) is Chroma's, and a search among chosen files (a query's candidates) is exact at any size. A shared store
(a Chroma server) holds what teammates stored, which this machine never copied: it is always Chroma's.
"""
from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from code_assistant.index.store import ChunkHit, ChunkStore
from code_assistant.index.vector_table import VectorRow, VectorTable

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

EXACT_LIMIT = 50_000  # vectors compared one by one in a whole-store search: 75 MB, ~0.6 s (bench/exact_search.py)


def nearest(matrix: np.ndarray, vector: Sequence[float], n: int) -> list[tuple[int, float]]:
    """The n rows of matrix most like vector by cosine, best first, as (row, similarity); ties by row."""
    import numpy as np

    if n <= 0 or len(matrix) == 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    scores = (matrix @ query) / np.maximum(norms, 1e-12)
    order = np.lexsort((np.arange(len(scores)), -scores))[:n]
    return [(int(row), float(scores[row])) for row in order]


class ChunkSearch:
    """What retrieval asks of the vectors: how many there are and which chunks are nearest a query vector."""

    def __init__(self, vectors: VectorTable, chunks: ChunkStore, exact_limit: int = EXACT_LIMIT) -> None:
        self.vectors, self.chunks, self.exact_limit = vectors, chunks, exact_limit
        self._all: tuple[int, list[VectorRow], np.ndarray] | None = None  # (vectors.writes, rows, matrix)
        self._counts: tuple[int, int, int] | None = None  # (vectors.writes, copied, claimed)

    def _copied(self) -> int | None:
        """How many vectors the copy holds, when it holds every stored one (a private store); else None."""
        if self.chunks.shared:
            return None
        if self._counts is None or self._counts[0] != self.vectors.writes:
            self._counts = (self.vectors.writes, *self.vectors.copy_counts())
        _, copied, claimed = self._counts
        if copied != claimed:  # found on a server once, say
            logger.debug("vector copy incomplete (%d of %d): Chroma answers", copied, claimed)
            return None
        return copied

    def count(self) -> int:
        copied = self._copied()
        return self.chunks.count() if copied is None else copied

    def query(self, vector: Sequence[float], n: int, paths: Collection[str] | None = None) -> list[ChunkHit]:
        """The n chunks nearest to vector, of the whole store or only of the files in paths."""
        if paths is not None and not paths:
            return []
        copied = self._copied()
        if copied is None or (paths is None and copied > self.exact_limit):
            return self.chunks.query(vector, n, paths)
        rows, matrix = self._all_rows() if paths is None else _matrix(self.vectors.rows(sorted(paths)))
        return [ChunkHit(path=r.path, start=r.start, end=r.end, symbol=r.symbol, kind=r.kind, score=score)
                for r, score in ((rows[i], score) for i, score in nearest(matrix, vector, n))]

    def _all_rows(self) -> tuple[list[VectorRow], np.ndarray]:
        """Every copied vector, read once per change of the copy (a task of several windows reads it once)."""
        if self._all is None or self._all[0] != self.vectors.writes:
            self._all = (self.vectors.writes, *_matrix(self.vectors.rows()))
        return self._all[1], self._all[2]


def _matrix(rows: list[VectorRow]) -> tuple[list[VectorRow], np.ndarray]:
    import numpy as np

    if not rows:
        return rows, np.zeros((0, 0), dtype=np.float32)
    return rows, np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32).reshape(len(rows), -1)
