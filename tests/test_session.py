"""A conversation with the repository: task after task in one process, follow-ups that know what was done, commands,
resume, the owner's AGENTS.md in every request. The session is driven in a real pseudo-terminal; piped stdin and
--json are the scriptable form."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from code_assistant.agent.kit import request_config
from code_assistant.agent.requests import PlanRequest, Requests
from code_assistant.errors import UsageError
from code_assistant.memory import Memory, Note, diff_stat, notes_text
from code_assistant.model.fitting import message_tokens
from code_assistant.model.window import ContextWindow
from code_assistant.operations.options import RunOptions
from code_assistant.session import Word, parse_line
from code_assistant.settings import load_settings
from code_assistant.verify.runner import TestResult
from code_assistant.workspace import build_indexer
from tests.repos import (
    CALC_PY,
    PYTEST,
    ROOT,
    SLOW_SECOND_RUN,
    Terminal,
    _cli_env,
    answer,
    create,
    modify,
    python_repo,
    run_cli,
    sleeping_test,
    snapshot,
)
from tests.scripted_server import ScriptedServer

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
TIMES = answer(modify("calc.py", "    return a * b", "    return a * b  # times"))
PROMPT = r"\n>\s*\Z"  # the session waits at its prompt
DB_PASSWORD = "pw-db-991"  # a credential redaction masks in a file that is no secret file (tests/test_read_gate.py)
AGENTS = f"Use type hints everywhere.\nDATABASE_URL=postgres://app:{DB_PASSWORD}@localhost/app\n"


def _piped(repo: Path, lines: str, server: ScriptedServer, *more: str,
           reproduce: bool = False) -> subprocess.CompletedProcess[str]:
    """A session on piped stdin; `reproduce`: as by default (a reproduction test when the suite is green), else
    --no-reproduce."""
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "chat", "--repo", str(repo), "--test-command",
                           PYTEST, *([] if reproduce else ["--no-reproduce"]), *more], input=lines,
                          capture_output=True, text=True, env=_cli_env(server.url, "k", None), timeout=300)


def _objects(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# ----- in a terminal -------------------------------------------------------------------------------------------------
def test_a_session_in_a_terminal_follow_up_typeahead_undo_ask_and_leave(tmp_path: Path) -> None:
    """Bare command names are never tasks; `/diff` typed while a task runs is queued, shown, and runs after it;
    leaving says what is still in effect and how to take it back."""
    repo = python_repo(tmp_path)
    typed = threading.Event()

    def times_once_typed(request: dict[str, Any]) -> str:  # the second task waits here until /diff was typed
        assert typed.wait(60)
        return TIMES

    script = [FIX_ADD, times_once_typed, "`add` returns `a + b`: see calc.py:5."]
    with ScriptedServer(script) as server:
        term = Terminal(["--repo", str(repo), "--test-command", PYTEST, "--no-reproduce"], server_url=server.url)
        try:
            header = term.expect(PROMPT)
            assert "[Model: " in header and "[Sandbox: " in header and "Ctrl-D to leave" in header
            term.send("clear\r")
            term.expect(PROMPT)
            term.send("undo\r")
            assert "did you mean /undo?" in term.expect(PROMPT)
            assert server.chat_requests == [], "a command's name is no task"
            term.send("fix add\r")
            assert "Result: SUCCESS" in term.expect(PROMPT)
            term.send("now also comment multiply\r")
            term.expect(r"\[Planning changes")
            term.send("/diff\r")
            term.expect(r"\[Queued: /diff")
            typed.set()
            after = term.expect(PROMPT)
            queued = after[after.index("Result: SUCCESS"):].split("> /diff\n")[1]  # after the task, the session's diff
            assert "+    return a + b" in queued and "+    return a * b  # times" in queued
            follow_up = server.chat_requests[1]["messages"]
            assert "# Earlier in this session" in follow_up[0]["content"] and "Task: fix add" in follow_up[0]["content"]
            assert "calc.py (+1 -1)" in follow_up[0]["content"] and "### calc.py" in follow_up[-1]["content"]
            term.send("/undo\r")
            undone = term.expect(PROMPT)
            assert '[Undo: took back "now also comment multiply" (calc.py)]' in undone
            assert "byte for byte as it was" in undone
            assert (repo / "calc.py").read_text() == CALC_PY.replace("return a - b", "return a + b")
            term.send("/ask what does add return?\r")
            assert "calc.py:5" in term.expect(PROMPT)
            term.send("/undi\r")
            assert "unknown command /undi; did you mean /undo" in term.expect(PROMPT)
            term.send("\x04")  # Ctrl-D
            assert term.wait() == 0
            leaving = '[Leaving: 1 task(s) of this session still in effect, newest first:]\n  "fix add": calc.py'
            assert leaving in term.seen
            assert f"main.py undo --repo {repo}" in term.seen
        finally:
            term.close()


def test_ctrl_c_during_a_tasks_tests_rolls_it_back_and_returns_to_the_prompt(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, SLOW_SECOND_RUN)
    before = snapshot(repo)
    with ScriptedServer([FIX_ADD]) as server:
        term = Terminal(["--repo", str(repo), "--test-command", PYTEST, "--sandbox", "off"], server_url=server.url)
        try:
            term.expect(PROMPT)
            term.send("fix add\r")
            term.expect(r"\[Testing \(iteration 1\)")
            sleeping = sleeping_test(repo)
            term.send("\x03")  # Ctrl-C, from the terminal: a real SIGINT to the session
            shown = term.expect(PROMPT)
            assert "Result: FAILED (interrupted)" in shown and "byte for byte as it was" in shown
            for marker in ("STARTED", "SLEEPING"):
                (repo / marker).unlink(missing_ok=True)
            assert snapshot(repo) == before
            assert not Path(f"/proc/{sleeping}").exists() or "Z" in Path(f"/proc/{sleeping}/stat").read_text(), \
                "the task's tests went with it"
            term.send("/quit\r")
            assert term.wait() == 0
        finally:
            term.close()


def test_what_is_typed_during_a_task_shows_below_its_status_line_and_ctrl_c_leaves_it_waiting(tmp_path: Path) -> None:
    """Issue 61: while a task ran, its status line was redrawn over what was typed, and Ctrl-C cancelled the task and
    then ran the queued line at once. Now the line being typed is drawn below the status line by the same display
    (the terminal's own echo off), so every redraw of the status line redraws it too; a finished line is queued; and
    Ctrl-C cancels the task only: the queued line waits at the prompt, said so, and runs when Enter is pressed."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    released = threading.Event()

    def slow(request: dict[str, Any]) -> str:  # the model thinks until the test is done with the terminal
        released.wait(120)
        return FIX_ADD

    with ScriptedServer([slow]) as server:
        term = Terminal(["--repo", str(repo), "--test-command", PYTEST, "--no-reproduce"], server_url=server.url)
        try:
            term.expect(PROMPT)
            term.send("fix add\r")
            term.expect(r"Asking [^\n]*: 1 s")  # the status line is up
            term.send("/di")
            term.expect(r"> /di \(after this task\)")
            mark = len(term.raw)
            term.expect(r"Asking [^\n]*: 3 s")  # two more seconds of the status line redrawn
            term.expect(r"> /di \(after this task\)")
            redrawn = term.raw[mark:]
            assert redrawn.count("/di") >= 2, "the typed line is redrawn with the status line, not drawn over"
            assert "\n/di" not in redrawn and not redrawn.startswith("/di"), "no echo of the terminal's own"
            term.send("ff\r")
            term.expect(r"\[Queued: /diff — after this task\]")
            term.send("\x03")  # Ctrl-C: a real SIGINT
            shown = term.expect(r"> /diff\s*\Z")
            assert "Result: FAILED (interrupted)" in shown or "[Cancelled]" in shown, shown
            assert "[Cancelled: the 1 line(s) typed meanwhile wait, each offered at the prompt: Enter runs it, " \
                   "Ctrl-C drops it]" in shown
            assert "No changes" not in shown, "the queued line did not run by itself"
            assert snapshot(repo) == before
            term.send("\r")
            assert "[No changes of this session are in effect]" in term.expect(PROMPT)
            term.send("\x04")
            assert term.wait() == 0
        finally:
            released.set()
            term.close()


# ----- piped ---------------------------------------------------------------------------------------------------------
def test_piped_tasks_with_json_give_one_object_each(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([FIX_ADD, TIMES]) as server:
        proc = _piped(repo, "fix add\nnow also comment multiply\n/tokens\n", server, "--json")
    assert proc.returncode == 0, proc.stderr
    first, second, tokens = _objects(proc.stdout)
    assert (first["task"], first["success"], second["success"]) == ("fix add", True, True)
    assert (first["tokens"]["calls"], second["tokens"]["calls"], tokens["calls"]) == (1, 1, 2)


def test_resume_brings_back_the_notes_and_pins(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "notes.py").write_text("X = 1\n")
    with ScriptedServer([FIX_ADD]) as server:
        assert _piped(repo, "fix add\n/add notes.py\n", server).returncode == 0
    with ScriptedServer([TIMES]) as server:
        proc = _piped(repo, "now also comment multiply\n", server, "--resume")
    assert proc.returncode == 0 and "[Resumed: 1 earlier task(s), 1 pinned file(s)]" in proc.stdout
    sent = server.chat_requests[0]["messages"]
    assert "Task: fix add" in sent[0]["content"] and "### notes.py" in sent[-1]["content"]
    with ScriptedServer([TIMES]) as server:
        _piped(repo, "again\n", server)
    assert "Earlier in this session" not in json.dumps(server.chat_requests[0]["messages"]), "no --resume: afresh"


def test_add_refuses_paths_outside_the_repository(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (tmp_path / "outside.py").write_text("SECRET = 1\n")
    with ScriptedServer([]) as server:
        proc = _piped(repo, f"/add ../outside.py {tmp_path / 'outside.py'} calc.py\n", server, "--json")
    [added] = _objects(proc.stdout)
    assert added["pinned"] == ["calc.py"] and len(added["refused"]) == 2


def test_every_request_of_a_follow_up_and_ask_carry_the_first_tasks_note(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    test = answer(create("tests/test_strings.py", "from calc import multiply\n\n\ndef test_strings():\n"
                                                 "    assert multiply('2', 3) == 6\n"))
    fix = answer(modify("calc.py", "    return a * b", "    return float(a) * float(b)"))
    script = [FIX_ADD, test, fix, "We changed calc.py:5 so add adds."]
    with ScriptedServer(script) as server:
        proc = _piped(repo, "fix add\nnow also make multiply() accept numeric strings\n/ask what did we change?\n",
                      server, reproduce=True)  # a red suite first (no reproduction test), then a green one
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reproduce, plan, ask = server.chat_requests[1:]
    for request in (reproduce, plan, ask):
        assert "Task: fix add" in request["messages"][0]["content"], "the note is in the system message of each"
    assert "test that captures the task" in reproduce["messages"][-1]["content"]


def test_a_session_holds_its_repository_and_its_undo_is_its_own(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([FIX_ADD, TIMES]) as server:
        term = Terminal(["--repo", str(repo), "--test-command", PYTEST, "--no-reproduce"], server_url=server.url)
        try:
            term.expect(PROMPT)
            term.send("fix add\r")
            assert "Result: SUCCESS" in term.expect(PROMPT)
            other = _piped(repo, "comment multiply\n", server)  # a second session while the first is open
            assert other.returncode == 2 and f"a session (pid {term.pid}) holds" in other.stderr, other.stderr
            assert len(server.chat_requests) == 1, "the second session asked nothing"
            term.send("/quit\r")
            assert term.wait() == 0
        finally:
            term.close()
    with ScriptedServer([]) as server:  # a new session: the first one's task is not its to take back
        fresh = _piped(repo, "/undo\n/diff\n", server)
    assert "nothing to undo: no finished run of this session" in fresh.stderr
    assert "[No changes of this session are in effect]" in fresh.stdout and "return a + b" in (repo / "calc.py").read_text()
    with ScriptedServer([]) as server:  # --resume: the first session again, its change in /diff, its task in /context
        resumed = _piped(repo, "/diff\n/context\n/undo\n", server, "--resume")
    assert "[Resumed: 1 earlier task(s), 0 pinned file(s)]" in resumed.stdout
    assert "+    return a + b" in resumed.stdout and "[Context: " in resumed.stdout
    assert '[Undo: took back "fix add" (calc.py)]' in resumed.stdout and (repo / "calc.py").read_text() == CALC_PY
    with ScriptedServer([]) as server:
        again = _piped(repo, "/context\n", server, "--resume")
    assert "[Resumed: 1 earlier task(s)" in again.stdout, "/undo is not a task"


def test_a_line_that_is_only_a_commands_name_is_that_command_or_asked_about_never_a_task() -> None:
    assert parse_line("clear") == Word.CLEAR and parse_line("Exit") == parse_line("/quit") == Word.QUIT
    assert parse_line("help") == parse_line("/help") == parse_line("?") == Word.HELP
    for word in ("diff", "tokens", "test"):
        assert parse_line(word)[0].name == word  # type: ignore[index]
    for word, asked in (("undo", "/undo?"), ("ask", "/ask QUESTION?"), ("grep", "/grep PATTERN?")):
        with pytest.raises(UsageError, match=re.escape(f"did you mean {asked}")):
            parse_line(word)
    task = "undo the rounding change"
    assert parse_line(task)[1] == RunOptions(task=task)  # type: ignore[index]
    assert parse_line("/run undo")[1] == RunOptions(task="undo")  # type: ignore[index]


# ----- the owner's instructions --------------------------------------------------------------------------------------
def test_agents_md_reaches_the_system_message_of_a_run_an_ask_and_a_session_task_redacted(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "AGENTS.md").write_text(AGENTS)
    with ScriptedServer([FIX_ADD, "See calc.py:5.", TIMES]) as server:
        run = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST], server_url=server.url)
        ask = run_cli(["--repo", str(repo), "--ask", "what does add do?"], server_url=server.url)
        session = _piped(repo, "comment multiply\n", server)
    assert run.returncode == ask.returncode == session.returncode == 0, run.stderr + ask.stderr + session.stderr
    assert "[Instructions: AGENTS.md, 2 lines]" in run.stdout
    for request in server.chat_requests:
        system = request["messages"][0]
        assert system["role"] == "system" and "Use type hints everywhere." in system["content"]
        assert DB_PASSWORD not in json.dumps(request) and "never weaken" in system["content"]
    with ScriptedServer([FIX_ADD]) as server:
        run_cli(["--repo", str(repo), "--task", "fix it", "--test-command", PYTEST, "--no-instructions"],
                server_url=server.url)
    assert "type hints" not in json.dumps(server.chat_requests[0])


def test_nested_agents_md_of_a_shown_file_comes_after_the_root_one(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"pkg/calc.py": CALC_PY, "tests/test_calc.py": "from pkg.calc import add\n\n\n"
                                  "def test_add():\n    assert add(2, 3) == 5\n", "pytest.ini": "[pytest]\npythonpath = .\n"})
    (repo / "AGENTS.md").write_text("Root rule.\n")
    (repo / "pkg" / "AGENTS.md").write_text("Package rule.\n")
    with ScriptedServer([answer(modify("pkg/calc.py", "    return a - b", "    return a + b"))]) as server:
        run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST], server_url=server.url)
    system = server.chat_requests[0]["messages"][0]["content"]
    assert system.index("Root rule.") < system.index("Package rule.")


# ----- the notes never overflow the window ---------------------------------------------------------------------------
def test_many_notes_in_a_small_window_stay_inside_it_newest_first(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    settings = load_settings(repo, test_command=PYTEST, embed_budget=0)
    memory = Memory(notes=[Note(task=f"task number {i} " + "with a long description " * 10, result="done",
                                files=(f"f{i}.py (+1 -1)",)) for i in range(200)])
    index, _ = build_indexer(settings).update()
    window = ContextWindow(2048, "test")
    baseline = TestResult(command=["pytest"], exit_code=1, passed=False, timed_out=False, output="", duration_s=0.1,
                          passed_count=1, failed_count=1, runner="pytest", timeout_s=60)
    messages, _ = Requests(request_config(settings), window, memory=memory).plan(
        PlanRequest(index=index, task="fix add", baseline=baseline))
    assert message_tokens(messages) <= window.prompt_room()
    system = messages[0]["content"]
    assert "task number 199" in system and "task number 0 " not in system


def test_notes_and_diff_stats_pure() -> None:
    diff = ("--- a/calc.py\n+++ b/calc.py\n@@ -1 +1,2 @@\n-x\n+y\n+z\n"
            "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+n\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n")
    assert diff_stat(diff) == {"calc.py": (2, 1), "new.py": (1, 0), "gone.py": (0, 1)}
    notes = [Note(task="first", result="done"), Note(task="second", result="done")]
    text = notes_text(notes, 1000)
    assert text.index("second") < text.index("first")
    assert notes_text(notes, 5) == ""
