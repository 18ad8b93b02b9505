"""The CLI against a real Chroma server (`chroma run` on 127.0.0.1): a shared index per repository identity."""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings
from repos import CALC_PY, git_init, python_repo, run_cli, write_tree

from code_assistant.index import embeddings, store

EMBEDDER = embeddings.make_embedder("local").name  # the CLI's default embedder names the collections
CHROMA = Path(sys.executable).with_name("chroma")
TASK = "fix add so it returns the sum"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    if not CHROMA.is_file():
        pytest.skip(f"no chroma console script next to {sys.executable}")
    port = _free_port()
    log = (tmp_path / "chroma.log").open("wb")
    proc = subprocess.Popen([str(CHROMA), "run", "--path", str(tmp_path / "chroma-data"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("chroma server did not start:\n" + (tmp_path / "chroma.log").read_text(errors="replace"))
            time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def _client(server: tuple[str, int]) -> chromadb.api.ClientAPI:
    return chromadb.HttpClient(host=server[0], port=server[1], settings=ChromaSettings(anonymized_telemetry=False))


def _env(server: tuple[str, int]) -> dict[str, str]:
    return {"CHROMA_HOST": server[0], "CHROMA_PORT": str(server[1]), "CHROMA_SSL": "", "CHROMA_AUTH_TOKEN": ""}


def _context(repo: Path, index: Path, server: tuple[str, int]) -> tuple[dict, int]:
    """One `--context-only --json` run: the JSON answer and the number of chunks the model embedded for it."""
    done = run_cli(["--repo", str(repo), "--task", TASK, "--context-only", "--json", "--index-path", str(index)],
                   extra_env=_env(server))
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    return answer, answer.pop("chunks_embedded")


def _index_all(repo: Path, index: Path, server: tuple[str, int]) -> dict:
    """`code-assistant index --json`: every file embedded."""
    done = run_cli(["index", "--repo", str(repo), "--json", "--index-path", str(index)], extra_env=_env(server))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _file_rows(index: Path) -> list[tuple]:
    """The index database's file records (what a warm run must leave exactly as they are)."""
    (db,) = index.glob("repos/*/index.sqlite")
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT * FROM files ORDER BY path").fetchall()


def _indexed_chunks(index: Path) -> int:
    (db,) = index.glob("repos/*/index.sqlite")
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT SUM(chunks) FROM files WHERE skipped = 0").fetchone()[0]


def _with_origin(repo: Path, url: str) -> Path:
    subprocess.run(["git", "remote", "add", "origin", url], cwd=repo, check=True)
    return repo


def test_cli_indexes_into_the_server_once(tmp_path: Path, chroma_server: tuple[str, int]) -> None:
    repo = _with_origin(python_repo(tmp_path), "git@example.com:team/calc.git")
    index = tmp_path / "index"
    first, embedded = _context(repo, index, chroma_server)
    assert "calc.py" in first["files"]
    assert embedded > 0
    assert not (index / "chroma").exists()  # chunks went to the server, not to an embedded store

    name = store.collection_name("git:example.com/team/calc", EMBEDDER)
    assert [c.name for c in _client(chroma_server).list_collections()] == [name]
    collection = _client(chroma_server).get_collection(name)
    assert collection.count() == embedded == _indexed_chunks(index)
    assert {m["path"] for m in collection.get(include=["metadatas"])["metadatas"]} >= {"calc.py"}

    records = _file_rows(index)
    again, embedded_again = _context(repo, index, chroma_server)
    assert embedded_again == 0
    assert again == first
    assert _file_rows(index) == records
    assert collection.count() == embedded


def test_two_repositories_get_two_collections(tmp_path: Path, chroma_server: tuple[str, int]) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = _with_origin(python_repo(tmp_path / "one"), "https://github.com/team/one.git")
    two = python_repo(tmp_path / "two")  # no origin: identified by its path
    _context(one, tmp_path / "index", chroma_server)
    _context(two, tmp_path / "index", chroma_server)
    names = {c.name for c in _client(chroma_server).list_collections()}
    assert names == {store.collection_name("git:github.com/team/one", EMBEDDER),
                     store.collection_name(f"path:{two.resolve()}", EMBEDDER)}
    for name in names:
        assert _client(chroma_server).get_collection(name).count() > 0


def _clone_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two working copies of one repository (same origin, different URL spellings) on 'two machines'; the first has
    a file the second does not (a teammate's branch)."""
    (tmp_path / "alice").mkdir()
    (tmp_path / "bob").mkdir()
    alice = python_repo(tmp_path / "alice", {"calc.py": CALC_PY, "extra.py": "def extra_helper():\n    return 42\n"})
    bob = tmp_path / "bob" / "proj"
    bob.mkdir()
    write_tree(bob, {"calc.py": CALC_PY})
    git_init(bob)
    _with_origin(alice, "git@github.com:team/calc.git")
    _with_origin(bob, "https://bob:token@github.com/team/calc")
    return alice, bob


def test_a_second_machine_does_not_wipe_the_shared_collection(tmp_path: Path,
                                                              chroma_server: tuple[str, int]) -> None:
    alice, bob = _clone_pair(tmp_path)
    _index_all(alice, tmp_path / "alice-index", chroma_server)
    collection = _client(chroma_server).get_collection(store.collection_name("git:github.com/team/calc", EMBEDDER))
    before = collection.count()
    _context(bob, tmp_path / "bob-index", chroma_server)  # an empty manifest: the indexer asks for a reset
    paths = {m["path"] for m in collection.get(include=["metadatas"])["metadatas"]}
    assert "extra.py" in paths, "bob's first index wiped alice's chunks"
    assert collection.count() == before


def test_a_second_machine_reuses_chunks_already_on_the_server(tmp_path: Path,
                                                              chroma_server: tuple[str, int]) -> None:
    """Needs the indexer to skip chunk ids the store already has (ChunkStore.existing): see store.py."""
    alice, bob = _clone_pair(tmp_path)
    alice_run = _index_all(alice, tmp_path / "alice-index", chroma_server)
    assert alice_run["chunks_embedded"] > 0 and alice_run["files_embedded"] == alice_run["files"]
    _, embedded = _context(bob, tmp_path / "bob-index", chroma_server)
    assert embedded == 0
    bob_run = _index_all(bob, tmp_path / "bob-index", chroma_server)
    assert bob_run["chunks_embedded"] == 0 and bob_run["files_embedded"] == bob_run["files"]


def test_unreachable_chroma_host_is_one_line_and_exit_2(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    port = _free_port()
    done = run_cli(["--repo", str(repo), "--task", TASK, "--context-only", "--json", "--index-path",
                    str(tmp_path / "index")], extra_env={"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)})
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)  # --json: one object on every exit
    assert (error["success"], error["error"], error["exit_code"]) == (False, "store_error", 2)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], done.stderr
    assert not (tmp_path / "index" / "chroma").exists()


@pytest.fixture(autouse=True)
def _no_stray_chroma_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHROMA_SSL", "CHROMA_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)

