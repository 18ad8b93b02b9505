"""Every user-facing failure: one line on stderr, exit status 2, the repository exactly as it was."""
from __future__ import annotations

import sys
from pathlib import Path

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
