"""What a run ends with means what it says: green only with every changed file parsing, no change is no success, a
success says whether a test shows the task done, an answer whose every edit failed is not tested, a dry run is a
success with its diff. Through the CLI against the scripted server, real test commands."""
from __future__ import annotations

import json
from pathlib import Path

from tests.repos import CALC_PY, PYTEST, answer, create, modify, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

FIX_ADD = modify("calc.py", "    return a - b", "    return a + b")
PROSE = "This module will hold the tasks of the application, once we know what they are."


def _run(repo: Path, server: ScriptedServer, *more: str) -> tuple[int, dict, str]:
    proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, *more], server_url=server.url)
    if "--json" in more:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    return proc.returncode, {}, proc.stdout + proc.stderr


def test_a_created_file_of_prose_never_ends_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    junk = answer(FIX_ADD, create("app/tasks.py", PROSE))
    still_prose = answer(modify("app/tasks.py", "This module", "The module"))
    with ScriptedServer([junk, still_prose, still_prose, still_prose, still_prose]) as server:
        code, _, out = _run(repo, server, "--no-reproduce")
    assert code == 1, out
    assert "app/tasks.py does not parse" in out and "Result: SUCCESS" not in out
    assert "[Testing" not in out, "a file that does not parse is the iteration's failure: nothing to test"
    assert snapshot(repo) == before


def test_an_answer_whose_every_edit_failed_goes_back_untested(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(modify("calc.py", "return a - c", "return a + b")), answer(FIX_ADD)]) as server:
        code, _, out = _run(repo, server)
    assert code == 0, out
    assert "[Not tested (iteration 1): none of the answer's edits could be applied]" in out
    assert out.count("[Testing (iteration") == 1 and "[Testing (iteration 2)...]" in out
    retry = server.chat_requests[1]["messages"][-1]["content"]
    assert "Nothing of your last answer was written, so the tests were not run" in retry and "return a - c" in retry


def test_an_empty_plan_on_a_green_baseline_is_no_success(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY.replace("a - b", "a + b"),
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    with ScriptedServer(['{"changes": []}']) as server:
        code, result, _ = _run(repo, server, "--no-reproduce", "--json")
    assert (code, result["success"], result["stop_reason"]) == (1, False, "no_changes")
    assert result["message"] == "no change: the model proposed none" and result["rolled_back"] is False


def test_a_fix_whose_failing_test_now_passes_is_verified(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        code, result, _ = _run(repo, server, "--json")
    assert code == 0 and result["verified"] is True
    assert result["verification"] == "tests/test_calc.py::test_add failed before, passes now"
    (tmp_path / "again").mkdir()
    repo2 = python_repo(tmp_path / "again")
    with ScriptedServer([answer(FIX_ADD)]) as server:
        code_text, _, out = _run(repo2, server)
    assert code_text == 0 and "Result: SUCCESS (verified: tests/test_calc.py::test_add failed before" in out


def test_a_green_suite_without_a_test_for_the_task_is_not_verified(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY,
                                  "tests/test_calc.py": "from calc import multiply\n\n\ndef test_multiply():\n"
                                                        "    assert multiply(3, 4) == 12\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    with ScriptedServer([answer(FIX_ADD)]) as server:
        code, result, _ = _run(repo, server, "--no-reproduce", "--json")
    assert (code, result["success"], result["verified"]) == (0, True, False)
    assert "--no-reproduce" in result["verification"]
    (tmp_path / "again").mkdir()
    repo2 = python_repo(tmp_path / "again", {**{p: (repo / p).read_text() for p in ("tests/test_calc.py", "pytest.ini")},
                                             "calc.py": CALC_PY})
    with ScriptedServer([answer(FIX_ADD)]) as server:
        code, _, out = _run(repo2, server, "--no-reproduce")
    assert code == 0 and "Result: SUCCESS, NOT VERIFIED (the tests pass; no test shows the task is done" in out


def test_a_dry_run_exits_0_with_its_diff_in_the_json(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        code, result, _ = _run(repo, server, "--dry-run", "--json")
    assert (code, result["stop_reason"]) == (0, "dry_run")
    assert "-    return a - b\n+    return a + b" in result["diff"]
    assert snapshot(repo) == before


def test_an_interrupted_result_line_names_its_reason_once(tmp_path: Path) -> None:
    import contextlib
    import io

    from code_assistant.agent.state import RunResult
    from code_assistant.agent.stop import Stop
    from code_assistant.console.render import summary

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        summary(RunResult(success=False, stop_reason=Stop.INTERRUPTED, iterations=1, files_modified=[],
                          rolled_back=False, message="interrupted"))
    assert "Result: FAILED (interrupted)\n" in shown.getvalue() and "Nothing was changed." in shown.getvalue()


def test_the_run_log_is_the_run_and_replays_it(tmp_path: Path) -> None:
    """Every answer — a reproduction test, an unreadable plan and its re-ask, a read, a syntax repair — is in the
    log, in order, with its kind; --replay of the log on the same starting repository does the same run."""
    files = {"calc.py": CALC_PY, "pytest.ini": "[pytest]\npythonpath = .\n",
             "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
    files["calc.py"] = files["calc.py"].replace("a - b", "a + b")
    reproduce = answer(create("tests/test_sub.py", "from calc import subtract\n\n\ndef test_subtract():\n"
                                                   "    assert subtract(5, 3) == 2\n"))
    read = answer({"file_path": "calc.py", "action": "read"})
    broken = answer(modify("calc.py", "def multiply(a, b):", "def subtract(a, b)\n    return a - b\n\n\n"
                                                             "def multiply(a, b):"))
    repaired = answer(modify("calc.py", "def subtract(a, b)\n", "def subtract(a, b):\n"))
    script = [reproduce, "I will now add the function.", read, broken, repaired]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    repo, again = python_repo(tmp_path / "a", files), python_repo(tmp_path / "b", files)
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add subtract(a, b)", "--test-command", PYTEST, "--json"],
                       server_url=server.url)
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["verified"]) == (0, True), proc.stdout + proc.stderr
    records = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    answers = [(r["kind"], a) for r in records for a in r.get("answers") or []]
    assert [a for _, a in answers] == script, "every answer, in order"
    assert [k for k, _ in answers] == ["reproduce", "plan", "plan", "plan", "syntax"]  # a re-ask, a read: the plan's
    replayed = run_cli(["--repo", str(again), "--task", "add subtract(a, b)", "--test-command", PYTEST, "--json",
                        "--replay", result["log"]])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["verified"] is True
    assert snapshot(again) == snapshot(repo)
