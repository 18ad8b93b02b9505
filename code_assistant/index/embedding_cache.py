"""Vectors by chunk-text hash, shared by every repository indexed with one embedder."""

import hashlib
import logging
import sqlite3
from pathlib import Path

logger = logging.getLogger(__name__)

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
