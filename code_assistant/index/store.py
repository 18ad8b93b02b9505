"""The vector-store seam: one Chroma collection of chunk embeddings per repository and embedder.

The collection is embedded (a persistent store under the index directory, private to this machine) or, when
`CHROMA_HOST` is set, on a Chroma server shared by a team. A shared collection is named after the repository's
identity (its normalized `origin` URL), so every clone of one repository reads and writes the same chunks; chunk ids
are content-addressed (path + content hash + position), so indexing the same file twice, from any machine, writes the
same ids and nothing needs to be wiped first.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sys
import threading
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from code_assistant.errors import AssistantError
from code_assistant.vcs import try_git

if TYPE_CHECKING:  # chromadb takes ~1.5 s to import: only a run that reads or writes vectors pays it
    import chromadb

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8000
_GET_BATCH = 500
_TRUE = ("1", "true", "yes", "on")


class StoreError(AssistantError):
    """The vector store cannot be reached or refused a request; one line naming where, fit for the CLI."""


@dataclass(frozen=True)
class ChunkHit:
    path: str
    start: int
    end: int
    symbol: str
    kind: str
    score: float  # cosine similarity, higher is better


# ----- names and identities ---------------------------------------------------------------------------------------
def collection_name(repo_identity: str, embedder_name: str) -> str:
    """A valid Chroma name, stable for the same repository identity and embedder."""
    digest = hashlib.sha256(f"{repo_identity}\0{embedder_name}".encode()).hexdigest()[:20]
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", embedder_name).strip("-")[:40] or "emb"
    return f"ca-{digest}-{slug}"


def chunk_id(path: str, content_hash: str, index: int, text: str) -> str:
    """The id of the index-th chunk of one version of a file: the same file content chunked the same way gives the
    same id on every machine (the chunk's own hash keeps a differently chunking version of the tool apart)."""
    return f"{content_hash[:12]}:{index}:{hashlib.sha1(text.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}:{path}"


_SCP_RE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.*)$")  # git@host:owner/repo.git, host:repo


def normalize_remote_url(url: str) -> str:
    """`host/path` of a git remote, without scheme, user, password, port, trailing `.git` or slashes.

    `git@github.com:a/b.git`, `ssh://git@github.com:22/a/b`, `https://user:token@GitHub.com/a/b.git/` all give
    `github.com/a/b`. Local remotes (`/srv/git/b.git`, `file:///srv/git/b`) give their path.
    """
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme == "file":
            host, path = "", parts.path
        else:
            host, path = (parts.hostname or "").lower(), parts.path
    elif (m := _SCP_RE.match(url)) and "/" not in url.split(":", 1)[0]:
        host, path = m.group("host").lower(), m.group("path")
    else:
        host, path = "", url
    path = re.sub(r"/+", "/", path).strip("/")
    path = re.sub(r"\.git$", "", path).rstrip("/")
    return f"{host}/{path}" if host else "/" + path


def _git(repo: Path, *args: str) -> str | None:
    out = try_git(repo, *args, timeout=10)
    return None if out is None else out.strip()


def repo_identity(repo: Path) -> str:
    """The repository's identity, equal on every machine that cloned it: `git:<normalized origin URL>`, plus
    `//<subdirectory>` when `repo` is below the work tree's top; `path:<resolved path>` without an `origin`."""
    repo = repo.resolve()
    url = _git(repo, "remote", "get-url", "origin")
    if url:
        prefix = (_git(repo, "rev-parse", "--show-prefix") or "").strip("/")
        return f"git:{normalize_remote_url(url)}" + (f"//{prefix}" if prefix else "")
    return f"path:{repo}"


def collection_for(client: chromadb.api.ClientAPI, repo: Path, embedder_name: str) -> str:
    """The collection of repo: on a server, named by `repo_identity`, so every clone shares it; in the embedded
    store, named by the resolved path as before (a private store gains nothing from sharing between checkouts, and a
    collection of one checkout is one that `reset` may wipe without touching another worktree's chunks)."""
    identity = repo_identity(repo) if _is_server(client) else str(repo.resolve())
    return collection_name(identity, embedder_name)


# ----- the client ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChromaServer:
    host: str
    port: int
    ssl: bool
    token: str | None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def server_config(env: Mapping[str, str] | None = None) -> ChromaServer | None:
    """CHROMA_HOST (a name, `host:port` or `http(s)://host[:port]`), CHROMA_PORT, CHROMA_SSL, CHROMA_AUTH_TOKEN;
    None when CHROMA_HOST is unset (the embedded store)."""
    env = os.environ if env is None else env
    raw = (env.get("CHROMA_HOST") or "").strip()
    if not raw:
        return None
    ssl = (env.get("CHROMA_SSL") or "").strip().lower() in _TRUE
    port_text = (env.get("CHROMA_PORT") or "").strip()
    host = raw
    try:
        if "://" in raw:
            parts = urlsplit(raw)
            ssl = ssl or parts.scheme == "https"
            host = parts.hostname or ""
            port_text = port_text or (str(parts.port) if parts.port else "")
        elif raw.count(":") == 1:
            host, port_text = raw.split(":")[0], port_text or raw.split(":")[1]
        port = int(port_text) if port_text else DEFAULT_PORT
    except ValueError:
        raise StoreError(f"CHROMA_PORT must be a port number, not {port_text!r} (CHROMA_HOST={raw})") from None
    if not host or not 0 < port < 65536:
        raise StoreError(f"CHROMA_HOST/CHROMA_PORT do not name a server: {raw!r} port {port}")
    return ChromaServer(host=host, port=port, ssl=ssl, token=(env.get("CHROMA_AUTH_TOKEN") or "").strip() or None)


def _explain(exc: BaseException, where: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    errors = sys.modules.get("chromadb.errors")  # an error of Chroma's means chromadb is imported already
    chroma_auth = (errors.ChromaAuthError, errors.AuthorizationError) if errors else ()
    auth = isinstance(exc, chroma_auth) or re.search(
        r"unauthori[sz]ed|forbidden|\b40[13]\b|authenticat", text, re.IGNORECASE)
    if auth:
        return f"the Chroma server at {where} refused the request ({text[:120]}); check CHROMA_AUTH_TOKEN"
    if "Could not connect" in text or type(exc).__name__ in ("ConnectError", "ConnectTimeout", "ConnectionError"):
        return f"cannot reach the Chroma server at {where}; is it running? (check CHROMA_HOST, CHROMA_PORT, CHROMA_SSL)"
    if "Timeout" in type(exc).__name__:
        return f"the Chroma server at {where} timed out"
    return f"Chroma at {where}: {type(exc).__name__}: {text[:200]}"


@contextlib.contextmanager
def _errors_as_store_error(where: str) -> Iterator[None]:
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - httpx, chromadb and sqlite errors all become one line naming the store
        raise StoreError(_explain(exc, where)) from exc


def open_client(index_path: Path, env: Mapping[str, str] | None = None) -> chromadb.api.ClientAPI:
    """A Chroma server when CHROMA_HOST is set, otherwise an embedded persistent store at index_path."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    settings = ChromaSettings(anonymized_telemetry=False)  # a fresh object: chromadb caches clients by settings
    server = server_config(env)
    if server:
        headers = {"Authorization": f"Bearer {server.token}"} if server.token else None
        with _errors_as_store_error(server.address):
            return chromadb.HttpClient(host=server.host, port=server.port, ssl=server.ssl, headers=headers,
                                       settings=settings)
    index_path.mkdir(parents=True, exist_ok=True)
    with _errors_as_store_error(str(index_path / "chroma")):
        return chromadb.PersistentClient(path=str(index_path / "chroma"), settings=settings)


def _is_server(client: chromadb.api.ClientAPI) -> bool:
    return client.get_settings().chroma_api_impl.endswith("FastAPI")


def _where(client: chromadb.api.ClientAPI) -> str:
    s = client.get_settings()
    if _is_server(client):
        return f"{s.chroma_server_host}:{s.chroma_server_http_port}"
    return str(s.persist_directory)


# ----- the collection -----------------------------------------------------------------------------------------------
class ChunkStore:
    """Chunks of one repository for one embedder. `shared` is True on a Chroma server: other machines use the same
    collection, so it is never wiped from here (see `reset`)."""

    def __init__(self, client: chromadb.api.ClientAPI, name: str) -> None:
        self._client = client
        self.name = name
        self.shared = _is_server(client)
        self.where = _where(client)
        with self._guard():
            self._collection = self._open()

    def _open(self):  # noqa: ANN202 - chromadb.Collection
        return self._client.get_or_create_collection(self.name, embedding_function=None,
                                                     metadata={"hnsw:space": "cosine"})

    def _guard(self) -> contextlib.AbstractContextManager[None]:
        return _errors_as_store_error(self.where)

    def warm_up(self) -> None:
        """A hint that vectors are about to be written (see LazyChunkStore); this store is open already."""

    def reset(self) -> bool:
        """Drop every chunk of a private (embedded) collection; True when something was dropped.

        A shared collection is left alone: this machine's index database being empty says nothing about what
        teammates indexed. Ids are content-addressed, so re-indexing overwrites the same ids, and the stale chunks of
        a re-indexed file are dropped by id (`delete_ids`) or by path (`delete_file(path, keep=...)`).
        """
        with self._guard():
            if self._collection.count() == 0:
                return False
            if self.shared:
                logger.info("shared collection %s on %s kept (%d chunks): not reset from an empty local index",
                            self.name, self.where, self._collection.count())
                return False
            self._client.delete_collection(self.name)
            self._collection = self._open()
        return True

    def add(self, ids: list[str], vectors: list[list[float]], metas: list[dict]) -> None:
        """Store vectors with their location (path, lines, symbol). The chunk's text is not stored: it is in the
        repository already, and Chroma's full-text index over documents would cost ~40% more per write."""
        if ids:
            with self._guard():
                self._collection.upsert(ids=ids, embeddings=vectors, metadatas=metas)  # type: ignore[arg-type]

    def existing(self, ids: list[str]) -> set[str]:
        """Which of ids are already stored (chunks someone indexed before: no need to embed them again)."""
        found: set[str] = set()
        with self._guard():
            for start in range(0, len(ids), _GET_BATCH):
                found.update(self._collection.get(ids=ids[start:start + _GET_BATCH], include=[])["ids"])
        return found

    def delete_file(self, path: str, keep: Collection[str] = ()) -> None:
        """Drop the chunks of path, except the ids in keep (the file's current chunks)."""
        with self._guard():
            if not keep:
                self._collection.delete(where={"path": path})
                return
            stale = [i for i in self._collection.get(where={"path": path}, include=[])["ids"] if i not in keep]
            if stale:
                self._collection.delete(ids=stale)

    def delete_ids(self, ids: Collection[str]) -> None:
        """Drop these chunks (a file's previous version, known by id: no scan of the collection)."""
        if ids:
            with self._guard():
                for start in range(0, len(ids), _GET_BATCH):
                    self._collection.delete(ids=list(ids)[start:start + _GET_BATCH])

    def count(self) -> int:
        with self._guard():
            return self._collection.count()

    def query(self, vector: list[float], n: int, paths: Collection[str] | None = None) -> list[ChunkHit]:
        """The n chunks nearest to vector, of the whole store or only of the files in paths."""
        total = self.count()
        if total == 0 or (paths is not None and not paths):
            return []
        where = None if paths is None else {"path": {"$in": sorted(paths)}}
        with self._guard():
            result = self._collection.query(query_embeddings=[vector],  # type: ignore[arg-type]
                                            n_results=min(n, total), where=where,  # type: ignore[arg-type]
                                            include=["metadatas", "distances"])
        return query_hits(result)


def query_hits(result: Mapping[str, Any]) -> list[ChunkHit]:
    """The hits of a Chroma query result. A record deleted a moment ago can still come back from the vector index,
    with its metadata None (chroma-core/chroma#2007): it is no hit."""
    hits: list[ChunkHit] = []
    metas = (result.get("metadatas") or [[]])[0]
    distances = (result.get("distances") or [[]])[0]
    for meta, distance in zip(metas, distances):
        if not meta or "path" not in meta:
            continue
        hits.append(ChunkHit(path=str(meta["path"]), start=int(meta["start"]), end=int(meta["end"]),
                             symbol=str(meta.get("symbol") or ""), kind=str(meta.get("kind") or ""),
                             score=1.0 - float(distance)))
    return hits


def _import_chromadb() -> None:
    try:
        import chromadb  # noqa: F401 - imported for the store that opens it next
    except Exception:  # noqa: BLE001 - the same import in the opening thread raises it, named
        logger.debug("chromadb failed to import in the background", exc_info=True)


class LazyChunkStore(ChunkStore):
    """The repository's ChunkStore (named as `collection_for` names it), opened — and chromadb imported, ~1 s —
    only when a vector is read or written. Until then what needs no Chroma is answered without it: whether the store
    is shared, where it is, and that an embedded store never created holds nothing.

    Dropping the vectors of a changed file's old version does not open a private store either: their ids are written
    to a list beside it (`deferred`), and the next opening deletes them before anything else is asked of it, so no
    search or write ever sees them. A query searches the index database's copy, which drops them at once.
    """

    def __init__(self, index_path: Path, repo: Path, embedder_name: str, env: Mapping[str, str] | None = None) -> None:
        server = server_config(env)
        self.shared = server is not None
        self.where = server.address if server else str(index_path / "chroma")
        self.name = collection_name(repo_identity(repo) if server else str(repo.resolve()), embedder_name)
        self._index_path, self._env = index_path, env
        self._opened: tuple[Any, Any] | None = None  # (client, collection), once opened
        self._importer: threading.Thread | None = None
        slug = hashlib.sha256(self.name.encode()).hexdigest()[:16]
        self.deferred = index_path / "chroma-deferred" / f"{slug}.ids"  # ids to delete when next opened (private)

    def warm_up(self) -> None:
        """Import chromadb in the background: a fill calls this before its model work, which releases the GIL, so
        the import (about a second of Python) runs beside it instead of after it. Opening the store waits for it."""
        if self._opened is None and self._importer is None and "chromadb" not in sys.modules:
            self._importer = threading.Thread(target=_import_chromadb, name="chromadb-import")
            self._importer.start()

    @property
    def opened(self) -> bool:
        return self._opened is not None

    def _open_store(self) -> tuple[Any, Any]:
        if self._opened is None:
            if self._importer is not None:
                self._importer.join()
            client = open_client(self._index_path, self._env)
            self._opened = (client, None)
            with self._guard():
                self._opened = (client, ChunkStore._open(self))
            logger.debug("opened the chunk store %s on %s", self.name, self.where)
            self._delete_deferred()
        return self._opened

    def _delete_deferred(self) -> None:
        """Delete what `delete_ids` deferred, then forget the list (an interrupt in between deletes them again)."""
        try:
            ids = list(dict.fromkeys(self.deferred.read_text(encoding="utf-8").split()))
        except FileNotFoundError:
            return
        super().delete_ids(ids)
        self.deferred.unlink(missing_ok=True)
        logger.debug("deleted %d deferred chunk ids from %s", len(ids), self.name)

    @property
    def _client(self) -> Any:  # type: ignore[override]
        return self._open_store()[0]

    @property
    def _collection(self) -> Any:  # type: ignore[override]
        return self._open_store()[1]

    @_collection.setter
    def _collection(self, collection: Any) -> None:
        self._opened = (self._client, collection)

    def _nothing_stored(self) -> bool:
        """An embedded store that was never created: no chunk to count, find or drop."""
        return not self.opened and not self.shared and not Path(self.where).exists()

    def reset(self) -> bool:
        return False if self._nothing_stored() else super().reset()

    def count(self) -> int:
        return 0 if self._nothing_stored() else super().count()

    def delete_file(self, path: str, keep: Collection[str] = ()) -> None:
        if not self._nothing_stored():
            super().delete_file(path, keep)

    def delete_ids(self, ids: Collection[str]) -> None:
        if not ids or self._nothing_stored():
            return
        if self.opened or self.shared:
            super().delete_ids(ids)
            return
        self.deferred.parent.mkdir(parents=True, exist_ok=True)
        with self.deferred.open("a", encoding="utf-8") as pending:  # appended whole lines: a crash loses no id
            pending.write("".join(f"{chunk_id}\n" for chunk_id in ids))
