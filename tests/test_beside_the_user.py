"""The user keeps working while the assistant runs: their edits during a run, after a crash and after a finished run
are never overwritten; a closed terminal rolls back; `undo` takes back exactly what the assistant wrote.

All through the CLI, against the scripted server, on real files with their real test command."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.repos import (
    CALC_PY,
    FIX_AND_NEW_MODULE,
    PYTEST,
    SLOW_SECOND_RUN,
    answer,
    git_init,
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

USER_LINE = "# a note the user saved while the assistant worked\n"
WRONG = answer(modify("calc.py", "    return a - b", "    return a * b"))  # add() still wrong: the tests fail
FIX = answer(modify("calc.py", "    return a * b\n\n\ndef multiply", "    return a + b\n\n\ndef multiply"))  # after it


def _user_saves(repo: Path, then: str) -> Any:
    """A script step: while the assistant waits for this answer, the user appends a line to calc.py and saves."""
    def step(request: dict[str, Any]) -> str:
        with open(repo / "calc.py", "a", encoding="utf-8") as handle:
            handle.write(USER_LINE)
        return then
    return step


def _undo(repo: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["undo", "--repo", str(repo), *more])


# ----- during a run ---------------------------------------------------------------------------------------------------
FIXED_PY = CALC_PY.replace("return a - b", "return a + b")
TOUCHES_THE_END = answer(modify("calc.py", "def multiply(a, b):\n    return a * b",  # the line before the user's
                                "def multiply(a, b):\n    return b * a"))


def test_a_line_the_user_saves_while_the_fix_is_asked_for_is_kept_and_undo_takes_back_only_the_assistants_lines(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG, _user_saves(repo, FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (repo / "calc.py").read_text() == FIXED_PY + USER_LINE, "the fix applied around the user's line"
    assert "[Changed meanwhile by someone else: calc.py; kept, the answer's edits go around that change]" in proc.stdout
    assert len(server.chat_requests) == 2, "no need to ask again"
    undone = _undo(repo)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (repo / "calc.py").read_text() == CALC_PY + USER_LINE, "the assistant's lines out, the user's line kept"
    assert "calc.py: merged" in undone.stdout


def test_the_result_of_such_a_run_shows_the_assistants_change_and_not_the_users_line(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG, _user_saves(repo, FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--json"],
                       server_url=server.url)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["success"], result["stop_reason"]) == (0, True, "passed")
    assert "+    return a + b" in result["diff"] and USER_LINE.strip() not in result["diff"]


def test_with_commit_a_line_the_user_saves_meanwhile_ends_the_run_so_the_commit_holds_no_line_of_theirs(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG, _user_saves(repo, FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--commit", "--json"], server_url=server.url)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["stop_reason"]) == (1, "changed_outside"), proc.stderr
    assert (repo / "calc.py").read_text() == CALC_PY + USER_LINE, "rolled back, the user's line kept"
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True).stdout
    assert log.splitlines() == ["init"], "nothing committed"


def test_an_answer_that_touches_the_users_change_is_asked_for_again_with_the_file_as_it_is_now(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG, _user_saves(repo, TOUCHES_THE_END), FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (repo / "calc.py").read_text() == FIXED_PY + USER_LINE
    assert "the answer's edits touch that change: asking again with the file as it is now]" in proc.stdout
    chats = server.chat_requests
    assert len(chats) == 3
    asked_again = chats[2]["messages"][-1]["content"]
    assert "calc.py was changed by the user while you were answering" in asked_again
    now = CALC_PY.replace("return a - b", "return a * b") + USER_LINE
    assert f"```\n{now}```" in asked_again, "the file as it is now"
    assert "Nothing of your last answer was written, so the tests were not run" in asked_again


def test_a_second_answer_that_touches_the_users_change_ends_the_run_and_the_rollback_keeps_their_line(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG, _user_saves(repo, TOUCHES_THE_END), TOUCHES_THE_END]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--json"],
                       server_url=server.url)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["stop_reason"], result["rolled_back"]) == (1, "changed_outside", True)
    assert len(server.chat_requests) == 3, "asked once more, not twice"
    [calc] = result["taken_back"]
    assert (calc["path"], calc["outcome"], calc["original"]) == ("calc.py", "merged", None)
    assert (repo / "calc.py").read_text() == CALC_PY + USER_LINE, "the run's lines out, the user's line kept"


def test_when_the_user_changed_the_same_lines_the_file_stays_as_they_have_it_and_the_original_is_saved(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)

    def user_rewrites_the_line(request: dict[str, Any]) -> str:
        calc = repo / "calc.py"
        calc.write_text(calc.read_text().replace("return a * b\n\n\ndef", "return a + b  # mine\n\n\ndef"))
        return FIX
    with ScriptedServer([WRONG, user_rewrites_the_line, FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--json"],
                       server_url=server.url)
    result = json.loads(proc.stdout)
    assert result["stop_reason"] == "changed_outside"
    [calc] = result["taken_back"]
    assert calc["outcome"] == "conflict" and "return a + b  # mine" in (repo / "calc.py").read_text()
    assert Path(calc["original"]).read_text() == CALC_PY
    assert Path(calc["original"]).parent.name.endswith(".originals"), "saved beside the run's log"


@pytest.mark.parametrize("what", ["deleted", "replaced"])
def test_a_file_the_user_deletes_or_replaces_wholesale_during_a_run_ends_it_at_once(tmp_path: Path,
                                                                                    what: str) -> None:
    repo = python_repo(tmp_path)
    mine = "VALUE = 1\n"

    def user_takes_the_file(request: dict[str, Any]) -> str:
        if what == "deleted":
            (repo / "calc.py").unlink()
        else:
            (repo / "calc.py").write_text(mine)
        return FIX
    with ScriptedServer([WRONG, user_takes_the_file]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--json"],
                       server_url=server.url)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["stop_reason"]) == (1, "changed_outside")
    assert len(server.chat_requests) == 2, "not asked again"
    if what == "deleted":
        assert not (repo / "calc.py").exists()
    else:
        assert (repo / "calc.py").read_text() == mine
    [calc] = result["taken_back"]
    assert calc["outcome"] == "conflict" and Path(calc["original"]).read_text() == CALC_PY


# ----- after a crash -------------------------------------------------------------------------------------------------
def test_kill_9_then_a_user_edit_then_recover_keeps_the_user_edit(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, SLOW_SECOND_RUN)
    plan = FIX_AND_NEW_MODULE
    with ScriptedServer([plan]) as server:
        proc = start_run(repo, server.url)
        wait_for_tests(proc)
        sleeping = sleeping_test(repo)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    os.kill(orphan(repo, sleeping), signal.SIGKILL)
    (repo / "calc.py").write_text("# the user's header\n" + (repo / "calc.py").read_text())
    recovered = run_cli(["--repo", str(repo), "--recover"])
    assert recovered.returncode == 0, recovered.stderr
    assert (repo / "calc.py").read_text() == "# the user's header\n" + SLOW_SECOND_RUN["calc.py"]
    assert not (repo / "pkg").exists()
    assert "[Recovered: restored 1 file(s) from an interrupted run]" in recovered.stdout
    assert "[Recovered: calc.py: merged" in recovered.stdout


# ----- signals -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT])
def test_a_closed_terminal_or_ctrl_backslash_rolls_back_byte_for_byte(tmp_path: Path, signum: int) -> None:
    repo = python_repo(tmp_path, SLOW_SECOND_RUN)
    before = snapshot(repo)
    plan = FIX_AND_NEW_MODULE
    with ScriptedServer([plan]) as server:
        proc = start_run(repo, server.url)
        wait_for_tests(proc)
        sleeping_test(repo)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    for marker in ("STARTED", "SLEEPING"):  # the repository's own test wrote these
        (repo / marker).unlink(missing_ok=True)
    assert snapshot(repo) == before


def test_more_signals_during_the_rollback_do_not_cut_it_short(tmp_path: Path) -> None:
    files = {**SLOW_SECOND_RUN, **{f"pkg/m{i}.py": f"V = {i}\n" for i in range(15)}}
    repo = python_repo(tmp_path, files)
    before = snapshot(repo)
    plan = answer(modify("calc.py", "    return a - b", "    return a + b"),
                  *(modify(f"pkg/m{i}.py", f"V = {i}", f"V = {i + 100}") for i in range(15)))
    with ScriptedServer([plan]) as server:
        proc = start_run(repo, server.url, "--max-plan-lines", "1000", "--max-files", "100", "--context-window", "32768")
        wait_for_tests(proc)
        sleeping_test(repo)
        for signum in [signal.SIGTERM] + [signal.SIGINT, signal.SIGHUP, signal.SIGQUIT] * 30:
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                break
            time.sleep(0.002)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    for marker in ("STARTED", "SLEEPING"):
        (repo / marker).unlink(missing_ok=True)
    assert snapshot(repo) == before


# ----- undo ----------------------------------------------------------------------------------------------------------
def _green_run(repo: Path, *changes: dict, more: tuple[str, ...] = ()) -> None:
    with ScriptedServer([answer(*changes)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", *more],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_undo_after_a_green_run_puts_back_the_original_bytes(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"),
               {"file_path": "notes/added.py", "action": "create", "content": "X = 1\n"})
    undone = _undo(repo)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "All of its changes were taken back: every file it touched is byte for byte as it was before it." \
        in undone.stdout
    assert snapshot(repo) == before


def test_undo_after_a_run_that_wrote_one_file_twice_puts_back_the_original_bytes(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([WRONG, FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    undone = _undo(repo)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert snapshot(repo) == before


def test_undo_keeps_what_the_user_wrote_in_another_part_of_the_same_file(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"))
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "\n\ndef subtract(a, b):\n    return a - b\n")
    undone = _undo(repo)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (repo / "calc.py").read_text() == CALC_PY + "\n\ndef subtract(a, b):\n    return a - b\n"
    assert "calc.py: merged" in undone.stdout


def test_undo_refuses_when_the_user_changed_the_same_lines_and_changes_nothing(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"))
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("return a + b", "return b + a"))
    after_user = snapshot(repo)
    undone = _undo(repo)
    assert undone.returncode == 2
    assert undone.stderr.startswith("error: cannot undo the last run: calc.py (") and undone.stderr.count("\n") == 1
    assert snapshot(repo) == after_user


def test_undo_with_nothing_to_undo_is_one_line_and_exit_2(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    undone = _undo(repo)
    assert undone.returncode == 2 and undone.stdout == ""
    assert undone.stderr.startswith("error: nothing to undo") and undone.stderr.count("\n") == 1
    assert snapshot(repo) == before


def test_a_second_undo_takes_back_the_run_before_and_a_third_has_nothing_left(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"))
    after_first = snapshot(repo)
    _green_run(repo, modify("calc.py", "    return a * b", "    return b * a"))
    assert _undo(repo).returncode == 0 and snapshot(repo) == after_first
    assert _undo(repo).returncode == 0 and snapshot(repo) == before
    assert _undo(repo).returncode == 2


def test_a_failed_run_leaves_nothing_to_undo(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"))
    with ScriptedServer([answer(modify("calc.py", "    return a * b", "    return a ** b"))] * 3) as server:
        failed = run_cli(["--repo", str(repo), "--task", "break it", "--test-command", PYTEST, "--no-reproduce",
                          "--max-iterations", "1"], server_url=server.url)
    assert failed.returncode == 1
    undone = _undo(repo, "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert [f["path"] for f in json.loads(undone.stdout)["taken_back"]] == ["calc.py"]
    assert (repo / "calc.py").read_text() == CALC_PY, "the green run was the one taken back"


def test_undo_after_a_commit_reverts_it_while_it_is_head_and_refuses_after(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"), more=("--commit",))
    undone = _undo(repo)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "reverted by a new commit" in undone.stdout and (repo / "calc.py").read_text() == CALC_PY
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True).stdout
    assert log.splitlines()[0].startswith("Revert ")

    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"), more=("--commit",))
    (repo / "other.txt").write_text("mine\n")
    subprocess.run(["git", "add", "other.txt"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "mine"], cwd=repo, check=True)
    refused = _undo(repo)
    assert refused.returncode == 2 and "is no longer HEAD" in refused.stderr
    assert "return a + b" in (repo / "calc.py").read_text()


def test_undo_outside_git_and_on_a_fresh_repository(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, git=False)
    before = snapshot(repo)
    _green_run(repo, modify("calc.py", "    return a - b", "    return a + b"))
    assert _undo(repo).returncode == 0 and snapshot(repo) == before
    git_init(repo)  # unrelated: the history is the assistant's own, not git's
    assert _undo(repo).returncode == 2
