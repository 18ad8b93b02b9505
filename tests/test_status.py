"""What a person sees while the assistant waits: a live status line on a terminal (the tests counted, the model's
tokens, the seconds), replaced by the step's result; a plain line every ten seconds in a log; nothing but the outcome
with --json; the run's answer counted but not shown raw (unless -v); log lines on lines of their own; an answer's
citations checked. Driven through real pseudo-terminals and pipes; the waits are the repository's own tests, which
wait for a file the test writes (no clock decides an outcome)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from code_assistant import console
from code_assistant.verify.counting import TestCount, count_on
from code_assistant.waiting import SILENT
from tests.repos import (
    CALC_PY,
    PYTEST,
    ROOT,
    TEST_CALC_PY,
    Terminal,
    _cli_env,
    answer,
    modify,
    python_repo,
    run_cli,
    snapshot,
)
from tests.scripted_server import ScriptedServer

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
# test_add fails until the fix; test_waits waits for GO (written by the test that drives the run), at most a minute
WAITING_TESTS = ("import os, time\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                 "def test_waits():\n    for _ in range(600):\n        if os.path.exists('GO'):\n            return\n"
                 "        time.sleep(0.1)\n")
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def _waiting_repo(tmp_path: Path) -> Path:
    return python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": WAITING_TESTS, ".gitignore": "GO\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})


def _run_args(repo: Path, *more: str) -> list[str]:
    return ["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--sandbox", "off",
            *more]


# ----- on a terminal ------------------------------------------------------------------------------------------------
def test_a_long_baseline_shows_a_moving_status_line_then_its_result(tmp_path: Path) -> None:
    """The baseline's line counts its seconds and the tests done (pytest's progress characters, as they come); the
    model's line says it waits for the first token, then counts the tokens; each gives way to its step's result, the
    cursor hidden meanwhile and shown again; the plan is said as read, its raw JSON never on the screen."""
    repo = _waiting_repo(tmp_path)
    with ScriptedServer([{"sleep": 2.5, "gap": 0.2, "answer": FIX_ADD}]) as server:
        term = Terminal(_run_args(repo), server_url=server.url)
        try:
            counted = term.expect(r"Baseline tests: \d+ s, 1 test done")
            first = int(re.findall(r"Baseline tests: (\d+) s, 1 test done", counted)[-1])
            term.expect(rf"Baseline tests: {first + 2} s, 1 test done")  # it moves
            (repo / "GO").touch()
            term.expect(r"\[Baseline: 1 passed, 1 failed\]")
            term.expect(r"Asking gpt-4o: \d+ s, waiting for the first token")
            term.expect(r"Asking gpt-4o: \d+ s, \d+ tokens received")
            term.expect(r"\[Plan: 1 edit in 1 file: calc\.py\]")
            assert term.wait() == 0, term.seen
        finally:
            term.close()
    shown = term.raw
    assert "Result: SUCCESS" in shown and "[Tests passed on iteration 1]" in shown
    assert '"changes"' not in shown and '"file_path"' not in shown, "the plan's raw JSON is not on the screen"
    assert HIDE_CURSOR in shown and shown.rindex(SHOW_CURSOR) > shown.rindex(HIDE_CURSOR)
    assert shown.index(f"Baseline tests: {first + 2} s") < shown.index("[Baseline: 1 passed, 1 failed]")


def test_a_tool_call_that_takes_a_while_shows_its_status_line_then_its_result(tmp_path: Path) -> None:
    """The model's `run` (in the sandbox, the tree read-only) waits for a file the test writes: its line counts the
    seconds, then gives way to the call's one-line result."""
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY, ".gitignore": "GO\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    wait_for_go = "while [ ! -f GO ]; do sleep 0.1; done; echo ready"
    script = [{"tool_calls": [{"name": "run", "arguments": {"command": wait_for_go}}]}, FIX_ADD]
    with ScriptedServer(script) as server:
        term = Terminal(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                         "--tools", "native"], server_url=server.url)
        try:
            term.expect(r"run \(while \[ ! -f GO \]; do sleep 0\.1; done; echo ready\): [1-9]\d* s")
            (repo / "GO").touch()
            term.expect(r"\[run: while \[ ! -f GO \]; do sleep 0\.1; done; echo ready → exit 0, [\d.]+ s\]")
            assert term.wait() == 0, term.seen
        finally:
            term.close()
    assert "Result: SUCCESS" in term.raw


def test_ctrl_c_while_the_status_line_shows_leaves_the_terminal_as_it_was(tmp_path: Path) -> None:
    """In a session: Ctrl-C during the baseline's wait takes the line away, shows the cursor again, rolls the task
    back, and the prompt comes back with no status line after it."""
    repo = _waiting_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([FIX_ADD]) as server:
        term = Terminal(["--repo", str(repo), "--test-command", PYTEST, "--no-reproduce", "--sandbox", "off"],
                        server_url=server.url)
        try:
            term.expect(r"\n>\s*\Z")
            term.send("fix add\r")
            term.expect(r"Baseline tests: 1 s")
            term.send("\x03")
            shown = term.expect(r"\n>\s*\Z")
            assert "Result: FAILED (interrupted)" in shown, shown
            raw = term.raw
            assert raw.rindex(SHOW_CURSOR) > raw.rindex(HIDE_CURSOR), "the cursor is shown again"
            assert "Baseline tests" not in raw[raw.rindex("Result: FAILED"):], "no status line after the run"
            term.send("/quit\r")
            assert term.wait() == 0
        finally:
            term.close()
    assert snapshot(repo) == before


def test_the_plans_raw_json_shows_only_with_v(tmp_path: Path) -> None:
    """The run's answer streams (it is counted) but is not shown, on stdout or stderr; -v shows it, dim on stderr."""
    from tests.repos import run_cli_on_a_terminal

    for flags, raw_shown in (((), False), (("-v",), True)):
        (where := tmp_path / ("v" if raw_shown else "plain")).mkdir()
        repo = python_repo(where)
        with ScriptedServer([FIX_ADD]) as server:
            proc = run_cli_on_a_terminal(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST,
                                          "--no-reproduce", *flags], server_url=server.url)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert server.chat_requests[0]["stream"] is True
        assert "[Plan: 1 edit in 1 file: calc.py]" in proc.stdout
        assert ('"file_path": "calc.py"' in proc.stderr) is raw_shown, proc.stderr
        assert '"file_path"' not in proc.stdout


def test_a_log_warning_during_a_streamed_answer_starts_a_line_of_its_own(tmp_path: Path) -> None:
    """A server that counts fewer prompt tokens than were sent is warned about as the answer ends, before its line
    is closed: the warning still starts a line of its own."""
    repo = python_repo(tmp_path)
    text = "add() is in calc.py:4."
    with ScriptedServer([{"gap": 0.05, "answer": text}], silent_cut=100) as server:
        term = Terminal(["--repo", str(repo), "--ask", "where is add?"], server_url=server.url)
        try:
            assert term.wait() == 0, term.seen
        finally:
            term.close()
    assert f"\n{text}\nwarning: the server counted 100 prompt tokens" in term.seen, term.seen


def test_an_error_that_cuts_a_streamed_answer_short_starts_a_line_of_its_own(capsys: pytest.CaptureFixture) -> None:
    from code_assistant.console import render
    from code_assistant.errors import GaveUpWaiting

    console.answer("add() is in calc")
    gave_up = GaveUpWaiting("Gave up waiting for the model server")
    assert render.error(gave_up, as_json=False) == gave_up.exit_code
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("add() is in calc\n", "[Gave up waiting for the model server]\n")


# ----- without a terminal -------------------------------------------------------------------------------------------
def test_without_a_terminal_a_plain_line_every_ten_seconds(tmp_path: Path) -> None:
    """A log (stdout a pipe) gets a line per wait every ten seconds, with what is known, and no control sequence."""
    repo = _waiting_repo(tmp_path)
    with ScriptedServer([FIX_ADD]) as server:
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *_run_args(repo)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                env=_cli_env(server.url, "test-key", None))
        lines: list[str] = []
        seen = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("[Baseline tests: 10 s"):
                    seen.set()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert seen.wait(60), "".join(lines)  # an anti-hang guard: the line comes after ten seconds
        finally:
            (repo / "GO").touch()
        assert proc.wait(120) == 0, "".join(lines) + (proc.stderr.read() if proc.stderr else "")
        reader.join(10)
    out = "".join(lines)
    assert "[Baseline tests: 10 s, 1 test done]\n" in out
    assert out.index("[Baseline tests: 10 s") < out.index("[Baseline: 1 passed, 1 failed]")
    assert "\x1b" not in out and "Result: SUCCESS" in out


def test_json_shows_no_status_and_the_console_shows_one_otherwise() -> None:
    assert console.display(as_json=True, streams=False).status is SILENT
    assert console.display(as_json=False, streams=False).status is not SILENT


# ----- an answer's citations ----------------------------------------------------------------------------------------
def test_citations_not_in_the_repository_are_flagged_after_the_answer(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    text = ("add() is at calc.py:4 (tests: tests/test_calc.py:3-5); the helper is in utils.py:12, and calc.py:400-410 "
            "has the rest. See https://example.com:443/docs too.")
    with ScriptedServer([text, text]) as server:
        proc = run_cli(["--repo", str(repo), "--ask", "where is add?"], server_url=server.url)
        as_json = run_cli(["--repo", str(repo), "--ask", "where is add?", "--json"], server_url=server.url)
    assert proc.returncode == 0 and as_json.returncode == 0, proc.stderr + as_json.stderr
    assert "[Not in the repository: utils.py:12, calc.py:400-410]\n" in proc.stdout
    assert proc.stdout.index(text) < proc.stdout.index("[Not in the repository:")
    assert json.loads(as_json.stdout)["not_in_repository"] == ["utils.py:12", "calc.py:400-410"]


def test_an_answer_whose_citations_hold_says_nothing_more(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["add() is at calc.py:4, tested in test_calc.py:4."]) as server:  # a unique ending is the file
        proc = run_cli(["--repo", str(repo), "--ask", "where is add?", "--json"], server_url=server.url)
    assert json.loads(proc.stdout)["not_in_repository"] == []


# ----- counting tests as their output arrives -----------------------------------------------------------------------
@pytest.mark.parametrize("pieces, count", [
    (["tests/test_a.py ", ".", ".", "F", "s  [ 40%]\n", "tests/test_b.py .", ".x"], 7),  # pytest, a character a test
    ([".", ".", "F", ".", "s", "                 [100%]\n", "=== 1 failed, 3 passed in 0.1s ===\n"], 5),  # pytest -q
    (["tests/test_a.py::test_x PASSED", "  [ 50%]\ntests/test_a.py::test_y ", "FAILED  [100%]\n"], 2),  # pytest -v
    (["test_x (m.C.test_x) ... ok\ntest_y (m.C.test_y) ... ", "FAIL\n", "Ran 2 tests\n"], 2),  # unittest -v
    (["=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestSub\n", "--- FAIL: TestSub (0.00s)\n",
      "ok  \texample.com/calc\t0.01s\n"], 2),  # go test -v, and a package's line is no test
    (["TAP version 13\n# Subtest: adds\nok 1 - adds\n", "not ok 2 - subtracts\n1..2\n"], 2),  # node's test runner
    (["  ✓ adds (2 ms)\n  ✕ subtracts (1 ms)\n", "    ✔ multiplies\n"], 3),  # Jest, Mocha
    (["test calc::adds ... ok\ntest calc::subs ... FAILED\ntest result: FAILED. 1 passed\n"], 2),  # cargo
    (["collected 3 items\n", "platform linux -- Python 3.11\n", "rootdir: /tmp/x\n"], 0),
])
def test_tests_are_counted_as_their_output_arrives(pieces: list[str], count: int) -> None:
    counted = TestCount()
    seen = [counted.count for piece in pieces if counted.add(piece) or True]
    assert counted.count == count and seen == sorted(seen)


def test_a_line_is_counted_once_however_it_arrives() -> None:
    assert count_on("tests/test_a.py ..F.  [ 80%]") == 4 and count_on("ok  \texample.com/x\t0.1s") == 0
    whole, split = TestCount(), TestCount()
    whole.add("..F\n..\n")
    for char in "..F\n..\n":
        split.add(char)
    assert whole.count == split.count == 5
