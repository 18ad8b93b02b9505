"""The vector-store seam: one Chroma collection of chunk embeddings per repository and embedder."""
from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import chromadb
from chromadb.config import Settings as ChromaSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkHit:
    path: str
    start: int
    end: int
    symbol: str
    kind: str
    score: float  # cosine similarity, higher is better
    text: str


def collection_name(repo_identity: str, embedder_name: str) -> str:
    """A valid Chroma name, stable for the same repository identity and embedder."""
    digest = hashlib.sha256(f"{repo_identity}\0{embedder_name}".encode()).hexdigest()[:20]
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", embedder_name).strip("-")[:40] or "emb"
    return f"ca-{digest}-{slug}"


def open_client(index_path: Path) -> chromadb.api.ClientAPI:
    """A Chroma server when CHROMA_HOST is set, otherwise an embedded persistent store at index_path."""
    settings = ChromaSettings(anonymized_telemetry=False)
    host = os.environ.get("CHROMA_HOST")
    if host:
        headers = {}
        if os.environ.get("CHROMA_AUTH_TOKEN"):
            headers["Authorization"] = f"Bearer {os.environ['CHROMA_AUTH_TOKEN']}"
        return chromadb.HttpClient(host=host, port=int(os.environ.get("CHROMA_PORT", "8000")),
                                   ssl=os.environ.get("CHROMA_SSL", "").lower() in ("1", "true", "yes"),
                                   headers=headers or None, settings=settings)
    index_path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(index_path / "chroma"), settings=settings)


class ChunkStore:
    def __init__(self, client: chromadb.api.ClientAPI, name: str) -> None:
        self._client = client
        self.name = name
        self._collection = client.get_or_create_collection(name, embedding_function=None,
                                                           metadata={"hnsw:space": "cosine"})

    def reset(self) -> None:
        if self._collection.count() == 0:
            return
        self._client.delete_collection(self.name)
        self._collection = self._client.get_or_create_collection(self.name, embedding_function=None,
                                                                 metadata={"hnsw:space": "cosine"})

    def add(self, ids: list[str], vectors: list[list[float]], texts: list[str], metas: list[dict]) -> None:
        if ids:
            self._collection.upsert(ids=ids, embeddings=vectors, documents=texts, metadatas=metas)  # type: ignore[arg-type]

    def delete_file(self, path: str) -> None:
        self._collection.delete(where={"path": path})

    def count(self) -> int:
        return self._collection.count()

    def query(self, vector: list[float], n: int) -> list[ChunkHit]:
        total = self.count()
        if total == 0:
            return []
        result = self._collection.query(query_embeddings=[vector], n_results=min(n, total),  # type: ignore[arg-type]
                                        include=["metadatas", "distances", "documents"])
        hits: list[ChunkHit] = []
        metas = (result.get("metadatas") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        documents = (result.get("documents") or [[]])[0]
        for meta, distance, doc in zip(metas, distances, documents):
            hits.append(ChunkHit(path=str(meta["path"]), start=int(meta["start"]), end=int(meta["end"]),
                                 symbol=str(meta.get("symbol") or ""), kind=str(meta.get("kind") or ""),
                                 score=1.0 - float(distance), text=doc or ""))
        return hits
