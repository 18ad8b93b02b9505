"""Every user-facing failure: one line on stderr, exit status 2, the repository exactly as it was."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from tests.repos import python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_missing_repository(tmp_path: Path) -> None:
    proc = run_cli(["--repo", str(tmp_path / "nope"), "--task", "x"])
    assert proc.returncode == 2
    assert "repository not found" in _one_line_error(proc.stderr)


def test_missing_task(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo)])
    assert proc.returncode == 2
    assert "--task" in _one_line_error(proc.stderr)


def test_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli(["--repo", str(tmp_path), "--task", "x", "--frobnicate"])
    assert proc.returncode == 2
    assert "frobnicate" in _one_line_error(proc.stderr)


def test_test_command_that_cannot_start(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "x", "--test-command", "no-such-runner --fast"],
                       server_url=server.url)
    assert proc.returncode == 2
    assert "no-such-runner" in _one_line_error(proc.stderr)
    assert server.requests == []
    assert snapshot(repo) == before


def test_missing_api_key(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    proc = run_cli(["--repo", str(repo), "--task", "x", "--test-command", PYTEST], api_key=None)
    assert proc.returncode == 2
    assert "OPENAI_API_KEY" in _one_line_error(proc.stderr)
    assert snapshot(repo) == before


def test_bad_iteration_count(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "--task", "x", "--max-iterations", "0"])
    assert proc.returncode == 2
    assert "--max-iterations" in _one_line_error(proc.stderr)


def test_recover_with_nothing_to_do(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "--recover"])
    assert proc.returncode == 0, proc.stderr
    assert "nothing to restore" in proc.stdout


def test_an_index_database_held_by_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from code_assistant import cli
    from code_assistant.index import index_db
    from code_assistant.settings import repo_id

    repo = python_repo(tmp_path)
    before = snapshot(repo)
    path = tmp_path / "index" / "repos" / repo_id(repo.resolve()) / "index.sqlite"
    index_db.IndexDB(path, "any").close()
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")  # another run in the middle of writing the index
    monkeypatch.setattr(index_db, "LOCK_TIMEOUT_S", 0.1)
    try:
        code = cli.main(["--repo", str(repo), "--task", "x", "--context-only", "--index-path",
                          str(tmp_path / "index")])
    finally:
        holder.rollback()
        holder.close()
    assert code == 2
    assert "index database" in _one_line_error(capsys.readouterr().err)
    assert snapshot(repo) == before
