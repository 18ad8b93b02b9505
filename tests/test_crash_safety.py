"""kill -9 in the middle of a run, then recovery; two runs on one repository; the JSON result and codebase chat."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from code_assistant.edit.journal import RepoLock
from code_assistant.settings import load_settings
from tests.repos import (
    FIX_AND_NEW_MODULE,
    PYTEST,
    ROOT,
    SLOW_SECOND_RUN,
    alive,
    answer,
    modify,
    orphan,
    python_repo,
    run_cli,
    sleeping_test,
    snapshot,
    start_run,
    wait_for_tests,
)
from tests.scripted_server import ScriptedServer

FIX = FIX_AND_NEW_MODULE


def test_kill_9_then_recover_restores_byte_for_byte(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, SLOW_SECOND_RUN)
    before = {k: v for k, v in snapshot(repo).items() if k != "STARTED"}
    with ScriptedServer([FIX]) as server:
        proc = start_run(repo, server.url)
        wait_for_tests(proc)
        sleeping = sleeping_test(repo)
        assert (repo / "pkg" / "new_module.py").exists()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    left_behind = orphan(repo, sleeping)
    recovered = run_cli(["--repo", str(repo), "--recover"])
    assert recovered.returncode == 0, recovered.stderr
    assert "[Recovered: stopped 1 leftover test process(es)" in recovered.stdout
    assert "[Recovered: restored 2 file(s)" in recovered.stdout
    assert snapshot(repo) == before
    assert not alive(left_behind)


def test_the_next_run_notices_an_unfinished_journal_and_restores_first(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, SLOW_SECOND_RUN)
    with ScriptedServer([FIX]) as server:
        proc = start_run(repo, server.url)
        wait_for_tests(proc)
        sleeping = sleeping_test(repo)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    left_behind = orphan(repo, sleeping)
    assert "return a + b" in (repo / "calc.py").read_text()
    passing = f"{sys.executable} -c pass"  # the killed run's slow test would sleep again; only recovery matters here
    with ScriptedServer(['{"changes": []}']) as server:
        proc2 = run_cli(["--repo", str(repo), "--task", "check", "--test-command", passing, "--max-iterations", "1"],
                        server_url=server.url)
    assert proc2.stdout.startswith("[Recovered: stopped 1 leftover test process(es)"), proc2.stdout + proc2.stderr
    assert "[Recovered: restored 2 file(s)" in proc2.stdout
    assert not alive(left_behind)
    assert "return a - b" in (repo / "calc.py").read_text()
    assert not (repo / "pkg").exists()


def test_a_second_run_on_the_same_repository_is_refused(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    settings = load_settings(repo)
    with RepoLock(repo, settings.repo_state_dir), ScriptedServer([answer()]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "x", "--test-command", PYTEST], server_url=server.url)
    assert proc.returncode == 2
    assert "another run" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert server.requests == [] and snapshot(repo) == before


def test_json_result_for_ci(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(modify("calc.py", "    return a - b", "    return a + b"))]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--json"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["success"], result["stop_reason"], result["iterations"]) == (True, "passed", 1)
    assert result["files_modified"] == ["calc.py"] and result["tokens"]["calls"] == 1
    assert Path(result["log"]).is_file()
    assert result["cost_usd"] is None, "a server on 127.0.0.1 is local: tokens only, never a price"


def test_ask_answers_from_numbered_context_and_edits_nothing(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer(["`add` subtracts instead of adding: see calc.py:5."]) as server:
        proc = run_cli(["--repo", str(repo), "--ask", "Why does test_add fail?"], server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    assert "calc.py:5" in proc.stdout
    sent = server.chat_requests[0]["messages"][-1]["content"]
    assert "    5      return a - b" in sent
    assert snapshot(repo) == before


def test_review_from_the_terminal(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    fix = answer(modify("calc.py", "    return a - b", "    return a + b"))
    with ScriptedServer([fix]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k",
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                               "--test-command", PYTEST, "--review"], input="y\n", capture_output=True, text=True,
                              env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "+    return a + b" in proc.stdout and "Apply this change?" in proc.stdout


def test_review_from_the_terminal_asks_again_sends_a_no_with_its_reason_and_ends_at_end_of_input(
        tmp_path: Path) -> None:
    """An answer that is none of y/n/q is asked again; "n" sends the reason typed next to the model; the end of the
    input stops the run as refused, with the repository as it was."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    fix = answer(modify("calc.py", "    return a - b", "    return a + b"))
    again = answer(modify("calc.py", "    return a - b", "    return b + a"))
    with ScriptedServer([fix, again]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k",
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                               "--test-command", PYTEST, "--review"], input="maybe\nn\nswap the operands\n",
                              capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count("Apply this change?") == 3 and "What should the model do differently?" in proc.stdout
    assert "the user rejected this change at review: swap the operands" in server.chat_requests[-1]["messages"][-1][
        "content"]
    assert "Result: FAILED (refused: the user stopped the run at review)" in proc.stdout
    assert snapshot(repo) == before
