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
    err = capsys.readouterr().err  # --context-only's progress is on stderr (its stdout is the report): then the error
    progress = [line for line in err.strip().splitlines() if line.startswith("[")]
    assert "index database" in _one_line_error("\n".join(line for line in err.splitlines() if line not in progress))
    assert progress == [f"[Indexing repository: {repo}]"], err
    assert snapshot(repo) == before


# ----- bad input, one line each: what was typed, what the line says ------------------------------------------------
CASES_FILE = '{"id": "one", "repo": "proj", "task": "fix add", "test_command": "pytest -q"}\n'
BAD_INPUT = [  # (words after the program, environment, files to write first (under tmp_path), what the line says)
    (["--repo", "{repo}", "--task", "x"], {"OPENAI_CONTEXT_WINDOW": "lots"}, {},
     "OPENAI_CONTEXT_WINDOW must be a number of tokens, not 'lots'"),
    (["--repo", "{repo}", "--task", "x"], {"CODE_ASSISTANT_EMBED_BUDGET": "1.5"}, {},
     "CODE_ASSISTANT_EMBED_BUDGET must be a whole number, not '1.5'"),
    (["--repo", "{repo}", "--task", "x"], {"OPENAI_WIRE": "grpc"}, {},
     "--wire (OPENAI_WIRE) must be chat or responses, not 'grpc'"),
    (["--repo", "{repo}", "--replay", "{tmp}/no-such-run.jsonl", "--task", "x"], {}, {},
     "replay file not found: {tmp}/no-such-run.jsonl"),
    (["apply", "--repo", "{repo}", "{tmp}/missing-plan.json"], {}, {},
     "apply: cannot read the plan {tmp}/missing-plan.json: No such file or directory"),
    (["mcp", "add", "two words", "--", "python", "server.py"], {}, {},
     "mcp add two words: a name may hold letters, digits, '.', '_' and '-' only"),
    (["mcp", "add", "docs", "--env", "TOKEN", "--", "python", "server.py"], {}, {},
     "--env takes NAME=VALUE, not 'TOKEN'"),
    (["mcp", "remove", "nothing-here"], {}, {}, "mcp remove nothing-here: no server of that name in "),
    (["mcp", "remove", "docs"], {}, {"home/.config/code-assistant/mcp.json": "{not json"},
     "code-assistant/mcp.json cannot be read (Expecting property name"),
    (["eval", "{tmp}/cases.jsonl", "--workers", "0"], {}, {"cases.jsonl": CASES_FILE}, "eval --workers: at least 1"),
    (["eval", "{tmp}/a.jsonl", "{tmp}/b.jsonl"], {}, {},
     "eval takes one cases file (or: eval compare RUN_A RUN_B), not 2 words"),
    (["eval", "compare", "{tmp}/one"], {}, {}, "eval compare RUN_A RUN_B: two evals' --out folders"),
    (["eval", "compare", "{tmp}/no-run-a", "{tmp}/no-run-b"], {}, {}, "eval: no results at {tmp}/no-run-a"),
    (["eval", "{tmp}/cases.jsonl", "--only", "two", "--out", "{tmp}/out"], {}, {"cases.jsonl": CASES_FILE},
     "eval --only: no case 'two' in the cases file"),
]


@pytest.mark.parametrize(("words", "env", "files", "said"), BAD_INPUT,
                         ids=[" ".join(case[0][:3]) + (f" {next(iter(case[1]))}" if case[1] else "")
                              for case in BAD_INPUT])
def test_bad_input_is_one_line_that_says_what_is_wrong_and_the_repository_stays_as_it_was(
        tmp_path: Path, words: list[str], env: dict[str, str], files: dict[str, str], said: str) -> None:
    repo = python_repo(tmp_path)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    home = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}
    before = snapshot(repo)
    fill = {"repo": str(repo), "tmp": str(tmp_path)}
    proc = run_cli([word.format(**fill) for word in words], extra_env={**home, **env})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said.format(**fill) in _one_line_error(proc.stderr)
    assert snapshot(repo) == before
