"""store.py: repository identity, server settings, one-line errors, and the content-addressed chunk collection."""
from __future__ import annotations

import http.server
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from code_assistant.index import store
from code_assistant.index.store import StoreError, normalize_remote_url, repo_identity, server_config


@pytest.fixture(autouse=True)
def _no_chroma_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHROMA_HOST", "CHROMA_PORT", "CHROMA_SSL", "CHROMA_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("url", [
    "git@github.com:acme/widgets.git",
    "git@github.com:acme/widgets",
    "https://github.com/acme/widgets",
    "https://github.com/acme/widgets.git",
    "https://github.com/acme/widgets.git/",
    "https://alice:ghp_s3cret@GitHub.com/acme/widgets.git",
    "http://github.com/acme/widgets",
    "ssh://git@github.com/acme/widgets.git",
    "ssh://git@github.com:22/acme/widgets.git",
    "git://github.com/acme/widgets.git",
    "git+ssh://git@github.com/acme//widgets",
    "github.com:acme/widgets.git",
])
def test_remote_urls_of_one_repository_normalize_alike(url: str) -> None:
    assert normalize_remote_url(url) == "github.com/acme/widgets"


def test_normalization_keeps_repositories_apart_and_drops_credentials() -> None:
    widgets = normalize_remote_url("git@github.com:acme/widgets.git")
    assert widgets != normalize_remote_url("git@github.com:acme/gadgets")
    assert normalize_remote_url("git@github.com:acme/widgets") != normalize_remote_url("git@gitlab.com:acme/widgets")
    assert normalize_remote_url("https://gitlab.com/group/sub/proj.git") == "gitlab.com/group/sub/proj"
    assert "s3cret" not in normalize_remote_url("https://bob:s3cret@example.com/x/y")
    assert normalize_remote_url("/srv/git/widgets.git") == "/srv/git/widgets"
    assert normalize_remote_url("file:///srv/git/widgets") == "/srv/git/widgets"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_repo_identity_from_origin_is_the_same_for_every_clone(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "elsewhere" / "b", tmp_path / "c"
    for repo, url in ((a, "git@github.com:acme/widgets.git"), (b, "https://tok@github.com/acme/widgets"),
                      (c, "https://github.com/acme/gadgets.git")):
        repo.mkdir(parents=True)
        _git(repo, "init", "-q")
        _git(repo, "remote", "add", "origin", url)
    assert repo_identity(a) == repo_identity(b) == "git:github.com/acme/widgets"
    assert repo_identity(c) != repo_identity(a)
    (a / "pkg").mkdir()
    assert repo_identity(a / "pkg") == "git:github.com/acme/widgets//pkg"  # a subdirectory indexes other paths


def test_repo_identity_without_origin_is_the_resolved_path(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert repo_identity(plain) == f"path:{plain.resolve()}"
    local = tmp_path / "local"
    local.mkdir()
    _git(local, "init", "-q")
    assert repo_identity(local) == f"path:{local.resolve()}"
    assert repo_identity(local) != repo_identity(plain)


def test_server_config_forms() -> None:
    assert server_config({}) is None
    assert server_config({"CHROMA_HOST": "db", "CHROMA_PORT": "9000"}) == store.ChromaServer("db", 9000, False, None)
    assert server_config({"CHROMA_HOST": "db:9001"}) == store.ChromaServer("db", 9001, False, None)
    cfg = server_config({"CHROMA_HOST": "https://chroma.example.com", "CHROMA_AUTH_TOKEN": "t0k"})
    assert cfg == store.ChromaServer("chroma.example.com", 8000, True, "t0k")
    assert server_config({"CHROMA_HOST": "db", "CHROMA_SSL": "true"}).ssl  # type: ignore[union-attr]
    with pytest.raises(StoreError, match="CHROMA_PORT"):
        server_config({"CHROMA_HOST": "db", "CHROMA_PORT": "eighty"})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_is_one_line_naming_host_and_port(tmp_path: Path) -> None:
    port = _free_port()
    with pytest.raises(StoreError) as err:
        store.open_client(tmp_path, env={"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)})
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message and "cannot reach" in message


@pytest.fixture
def refusing_server() -> Iterator[tuple[int, list[str | None]]]:
    """A local HTTP server answering 401 to everything, recording the Authorization headers it was sent."""
    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            body = b'{"error":"AuthError","message":"Unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_bearer_token_is_sent_and_a_refusal_names_the_token(tmp_path: Path,
                                                            refusing_server: tuple[int, list[str | None]]) -> None:
    port, seen = refusing_server
    with pytest.raises(StoreError) as err:
        store.open_client(tmp_path, env={"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port),
                                         "CHROMA_AUTH_TOKEN": "s3cret-token"})
    assert seen and seen[0] == "Bearer s3cret-token"
    message = str(err.value)
    assert "CHROMA_AUTH_TOKEN" in message and f"127.0.0.1:{port}" in message and "s3cret" not in message


def _vec(x: float) -> list[float]:
    return [x, 1.0 - x, 0.5]


def test_embedded_store_content_addressed_ids_keep_and_reset(tmp_path: Path) -> None:
    chunks = store.ChunkStore(store.open_client(tmp_path), store.collection_name("path:/x", "test-emb"))
    assert not chunks.shared
    old = [store.chunk_id("a.py", "1" * 64, i, f"old{i}") for i in range(2)]
    new = [store.chunk_id("a.py", "2" * 64, 0, "new0")]
    other = [store.chunk_id("b.py", "3" * 64, 0, "b")]
    assert len(set(old + new + other)) == 4 and store.chunk_id("a.py", "1" * 64, 0, "changed") != old[0]
    meta = {"start": 1, "end": 2, "symbol": "f", "kind": "function"}
    chunks.add(old, [_vec(0.1), _vec(0.2)], [{"path": "a.py", **meta}] * 2)
    chunks.add(other, [_vec(0.9)], [{"path": "b.py", **meta, "symbol": "g"}])
    assert chunks.existing(old + new + other) == set(old + other)
    chunks.add(new, [_vec(0.3)], [{"path": "a.py", **meta, "start": 7}])
    chunks.delete_file("a.py", keep=new)  # the file's new version stays, its old chunks go
    assert chunks.existing(old + new + other) == set(new + other)
    hits = chunks.query(_vec(0.3), 5)
    assert (hits[0].path, hits[0].start) == ("a.py", 7) and {h.path for h in hits} == {"a.py", "b.py"}
    chunks.delete_file("b.py")
    assert chunks.count() == 1
    assert chunks.reset() is True and chunks.count() == 0
    assert chunks.reset() is False


def test_collection_for_is_per_checkout_in_the_embedded_store(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for repo in (a, b):
        repo.mkdir()
        _git(repo, "init", "-q")
        _git(repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    client = store.open_client(tmp_path / "index")
    assert store.collection_for(client, a, "emb") == store.collection_name(str(a.resolve()), "emb")
    assert store.collection_for(client, a, "emb") != store.collection_for(client, b, "emb")


def test_a_query_skips_records_chroma_returns_without_metadata() -> None:
    """Chroma can return a record deleted a moment ago with its metadata None (chroma-core/chroma#2007)."""
    result = {"ids": [["a", "gone", "b"]], "distances": [[0.1, 0.2, 0.3]],
              "metadatas": [[{"path": "a.py", "start": 1, "end": 4, "symbol": "f", "kind": "function"}, None,
                             {"path": "b.py", "start": 2, "end": 9}]]}
    hits = store.query_hits(result)
    assert [(h.path, h.start, h.end, h.symbol) for h in hits] == [("a.py", 1, 4, "f"), ("b.py", 2, 9, "")]
    assert abs(hits[0].score - 0.9) < 1e-9
    assert store.query_hits({"ids": [[]], "metadatas": None, "distances": None}) == []
