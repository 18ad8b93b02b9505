"""Answers in the shapes real models write, through the whole CLI against the scripted server: each run ends green
with the fix applied, and the run log says which format each plan was read in."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from code_assistant.model.chat import OpenAIChat
from code_assistant.model.names import shown
from code_assistant.model.trajectory import read_answers
from tests.answer_corpus import case
from tests.repos import CALC_PY, TEST_CALC_PY, answer, modify, python_repo, run_cli, run_cli_on_a_terminal, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b", "fix add")
GREET_TEST = "from greet import hello\n\n\ndef test_hello():\n    assert hello('Ada') == 'Hello, Ada!'\n"
DECOY = 'maybe {"changes": []} would do, or {"changes": [{"file_path": "calc.py", "action": "delete"}]}'


def greet_repo(tmp_path: Path) -> Path:
    """calc.py with the add bug, a test asking for a greet module that does not exist yet, an obsolete module."""
    return python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY,
                                  "tests/test_greet.py": GREET_TEST,
                                  "old_calc.py": "def old_add(a, b):\n    return a - b\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})


def _run(repo: Path, server: ScriptedServer, *extra: str, terminal: bool = False,
         **kwargs: Any) -> subprocess.CompletedProcess[str]:
    args = ["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST, *extra]
    if terminal:
        return run_cli_on_a_terminal(args, server_url=server.url)
    return run_cli(args, server_url=server.url, **kwargs)


def _steps(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    found = re.search(r"^Run log: (.+)$", proc.stdout, re.MULTILINE)
    assert found, proc.stdout
    return [json.loads(line) for line in Path(found.group(1).strip()).read_text().splitlines()]


def _green(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Result: SUCCESS" in proc.stdout, proc.stdout


def _fixed(repo: Path) -> bool:
    return "return a + b" in (repo / "calc.py").read_text()


def _green_with(repo: Path, name: str) -> tuple[subprocess.CompletedProcess[str], ScriptedServer]:
    """A run whose model answers once, with the corpus answer `name`; it must end green."""
    with ScriptedServer([case(name).answer]) as server:
        proc = _run(repo, server)
    _green(proc)
    return proc, server


# ----- reasoning ----------------------------------------------------------------------------------------------------
def test_a_think_block_holding_a_decoy_plan_is_set_aside_and_kept_in_the_run_log(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc, _ = _green_with(repo, "reasoning--think-decoy-empty-plan")
    assert "[Plan: 1 edit in 1 file: calc.py]" in proc.stdout and _fixed(repo)
    plan = _steps(proc)[0]
    assert plan["answer_format"] == "json" and plan["answers"] == [case("reasoning--think-decoy-empty-plan").answer]


def test_a_stream_shows_neither_a_think_block_nor_reasoning_content(tmp_path: Path) -> None:
    """On a terminal the answer is streamed; the reasoning a server sends as reasoning_content deltas is not shown
    and never parsed (its decoy plans would delete calc.py), but it is kept in the run log; a think block in the
    answer itself shows as a marker."""
    repo = python_repo(tmp_path)
    thinking = "\n".join(["<think>", f"The model thinks: {DECOY}", "</think>", answer(FIX_ADD)])
    with ScriptedServer([{"reasoning": f"Reasoning apart: {DECOY}", "answer": thinking}]) as server:
        proc = _run(repo, server, "-v", terminal=True)  # the answer streams raw only with -v
    _green(proc)
    assert server.chat_requests[0]["stream"] is True
    assert (repo / "calc.py").exists() and _fixed(repo)
    assert "[Thinking...][Done thinking]" in proc.stderr and '"file_path": "calc.py"' in proc.stderr
    assert "The model thinks" not in proc.stderr and "Reasoning apart" not in proc.stderr, proc.stderr
    plan = _steps(proc)[0]
    assert plan["reasoning"] == [f"Reasoning apart: {DECOY}"] and plan["answers"] == [thinking]


def test_reasoning_content_beside_an_answer_is_never_the_answer() -> None:
    """Both field names, streamed and not: the answer is the content, the reasoning is kept apart."""
    for field in ("reasoning_content", "reasoning"):
        for stream in (False, True):
            step = {"reasoning": DECOY, "reasoning_field": field, "answer": "the answer"}
            with ScriptedServer([step]) as server:
                model = OpenAIChat("m", api_key="k", base_url=server.url)
                shown: list[str] = []
                response = model.complete([{"role": "user", "content": "hi"}],
                                          on_token=shown.append if stream else None)
            assert (response.text, response.reasoning) == ("the answer", DECOY), (field, stream)
            assert "".join(shown) == ("the answer" if stream else "")


def test_an_answer_cut_off_while_still_thinking_is_asked_again_as_cut_off(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    endless = "<think>\n" + "Let me consider every line of calc.py once more. " * 80  # past the 256-token reserve
    with ScriptedServer([endless, answer(FIX_ADD)]) as server:
        proc = _run(repo, server, "--context-window", "2048")
    _green(proc)
    reask = server.chat_requests[1]["messages"][-1]["content"]
    assert "cut off at the limit for an answer (256 tokens) while still reasoning" in reask, reask
    assert "no JSON" not in reask and "Let me consider" not in json.dumps(server.chat_requests[1]["messages"])


def test_ask_answers_without_the_reasoning(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([f"<think>\n{DECOY}\n</think>\n\n`add` subtracts: see calc.py:5."]) as server:
        proc = run_cli(["--repo", str(repo), "--ask", "Why does test_add fail?", "--json"], server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"] == "`add` subtracts: see calc.py:5."


# ----- tolerant JSON ------------------------------------------------------------------------------------------------
def test_trailing_commas_are_repaired(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc, server = _green_with(repo, "sloppy-json--trailing-commas")
    assert _fixed(repo) and len(server.chat_requests) == 1
    assert _steps(proc)[0]["answer_format"] == "json_repaired"


def test_a_python_literal_is_repaired(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    _, server = _green_with(repo, "sloppy-json--python-literal")
    assert _fixed(repo) and len(server.chat_requests) == 1


def test_a_repair_that_would_complete_a_truncated_plan_is_refused_and_asked_again(tmp_path: Path) -> None:
    """Completed, the first answer would write `return a`; it is never applied: the model is asked again."""
    repo = python_repo(tmp_path)
    with ScriptedServer([case("sloppy-json--truncated-mid-string").answer, answer(FIX_ADD)]) as server:
        proc = _run(repo, server)
    _green(proc)
    reask = server.chat_requests[1]["messages"][-1]["content"]
    assert "incomplete (it ends inside a string)" in reask and "not completed by guessing" in reask
    assert proc.stdout.count("[Editing: calc.py]") == 1 and _fixed(repo)


def test_two_answers_that_cannot_be_repaired_leave_the_repository_as_it_was(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    script = [case("sloppy-json--missing-value").answer, case("sloppy-json--string-concatenation").answer]
    with ScriptedServer(script) as server:
        proc = _run(repo, server)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "cannot be repaired without guessing" in proc.stdout and snapshot(repo) == before


# ----- other edit formats -------------------------------------------------------------------------------------------
def test_search_replace_blocks_change_one_file_and_create_another(tmp_path: Path) -> None:
    repo = greet_repo(tmp_path)
    proc, _ = _green_with(repo, "search-replace--create-and-modify")
    assert _fixed(repo) and (repo / "greet.py").read_text().startswith("def hello(name: str)")
    assert re.search(r"\[Plan: \d+ edits in 2 files: (calc|greet)\.py, (calc|greet)\.py\]", proc.stdout), proc.stdout
    assert _steps(proc)[0]["answer_format"] == "search_replace"


def test_a_unified_diff_changes_creates_and_deletes(tmp_path: Path) -> None:
    repo = greet_repo(tmp_path)
    proc, _ = _green_with(repo, "unified-diff--create-delete-modify")
    assert _fixed(repo) and (repo / "greet.py").exists() and not (repo / "old_calc.py").exists()
    assert "old_calc.py" in proc.stdout.split("Modified files:")[1]
    assert _steps(proc)[0]["answer_format"] == "unified_diff"


def test_a_diff_goes_through_the_guardrails_like_any_edit(tmp_path: Path) -> None:
    """Deleting a test through `+++ /dev/null` is weakening the tests: refused each time, nothing written."""
    repo = greet_repo(tmp_path)
    before = snapshot(repo)
    drop_test = "--- a/tests/test_greet.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n-from greet import hello\n"
    with ScriptedServer([drop_test, drop_test.replace("-from", "-from ")]) as server:
        proc = _run(repo, server, "--max-iterations", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count("[Refused: tests/test_greet.py: the edit deletes the test file") == 2, proc.stdout
    assert "Result: FAILED (refused: nothing of the answer was written: tests/test_greet.py: the edit deletes" \
        in proc.stdout, proc.stdout
    assert snapshot(repo) == before


def test_a_diff_cut_off_at_the_token_limit_is_asked_again_not_applied(tmp_path: Path) -> None:
    """Cut inside its second hunk, a diff cannot say what its last hunk changes (cut after a `-` line it would read as
    a deletion): nothing of it is written, not even its whole first hunk."""
    repo = python_repo(tmp_path)
    filler = "".join(f" # context line {i} of a long hunk that the model copied in full\n" for i in range(40))
    long_diff = ("--- a/calc.py\n+++ b/calc.py\n@@ @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
                 f"@@ @@\n{filler}-def multiply(a, b):\n+def multiply(a, b):  # product\n")
    with ScriptedServer([long_diff, answer(FIX_ADD)]) as server:
        proc = _run(repo, server, "--context-window", "2048")
    _green(proc)
    reask = server.chat_requests[1]["messages"][-1]["content"]
    assert "cut off at the limit for an answer (256 tokens), so it is incomplete" in reask, reask
    assert proc.stdout.count("[Editing: calc.py]") == 1 and "def multiply(a, b):\n" in (repo / "calc.py").read_text()


def test_a_plan_in_one_format_and_a_fix_in_another(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    wrong = "```diff\n--- a/calc.py\n+++ b/calc.py\n@@ -4,2 +4,2 @@\n def add(a, b):\n-    return a - b\n" \
            "+    return b - a\n```\n"
    right = "calc.py\n```python\n<<<<<<< SEARCH\n    return b - a\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
    with ScriptedServer([wrong, right]) as server:
        proc = _run(repo, server)
    _green(proc)
    assert "[Tests passed on iteration 2]" in proc.stdout and _fixed(repo)
    assert [s["answer_format"] for s in _steps(proc)] == ["unified_diff", "search_replace", None]
    assert "return b - a" in server.chat_requests[1]["messages"][-1]["content"], "the fix request shows the file"


def test_a_recorded_run_in_other_formats_replays_the_same(tmp_path: Path) -> None:
    repo = greet_repo(tmp_path)
    recorded, _ = _green_with(repo, "unified-diff--create-delete-modify")
    log = re.search(r"^Run log: (.+)$", recorded.stdout, re.MULTILINE).group(1).strip()  # type: ignore[union-attr]
    (tmp_path / "again").mkdir()
    again = greet_repo(tmp_path / "again")
    replayed = run_cli(["--repo", str(again), "--task", "Fix add() and make the tests pass", "--test-command",
                        PYTEST, "--replay", log])
    _green(replayed)
    assert snapshot(again) == snapshot(repo)


def test_a_format_1_run_log_is_still_replayed(tmp_path: Path) -> None:
    old = {"format": 1, "kind": "plan", "step": 0, "model": "m", "answer": "a", "answers": ["a"], "candidate": None}
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(old) + "\n" + json.dumps({**old, "kind": "final", "answer": None, "answers": []}) + "\n")
    assert read_answers(log) == ["a"]


# ----- a local server's model and response_format -------------------------------------------------------------
def test_the_header_names_the_model_a_local_server_serves(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    info = {"/v1/models": {"object": "list", "data": [{"id": "qwen3-coder-30b", "object": "model"}]}}
    with ScriptedServer([answer(FIX_ADD)], info=info) as server:
        proc = _run(repo, server)
    _green(proc)
    assert "[Model: qwen3-coder-30b, context window" in proc.stdout
    assert server.chat_requests[0]["model"] == "qwen3-coder-30b"


def test_a_model_a_server_names_by_its_file_is_shown_by_the_files_stem(tmp_path: Path) -> None:
    """llama.cpp and llama-cpp-python name the model by the path they loaded; the console shows its stem, the
    requests keep the id."""
    repo = python_repo(tmp_path)
    path = "/srv/models/SmolLM2-360M-Instruct-Q8_0.gguf"
    with ScriptedServer(["add() is in calc.py:4."], info={"/v1/models": {"data": [{"id": path}]}}) as server:
        proc = run_cli(["ask", "--repo", str(repo), "where is add?"], server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    assert "[Model: SmolLM2-360M-Instruct-Q8_0, context window" in proc.stdout and path not in proc.stdout
    assert server.chat_requests[0]["model"] == path
    assert [shown(n) for n in ("C:\\models\\q.gguf", "org/Qwen2.5-Coder-7B", "qwen2.5-coder:7b", "x.gguf")] == [
        "q", "org/Qwen2.5-Coder-7B", "qwen2.5-coder:7b", "x"]


def test_a_named_model_or_a_server_with_several_keeps_its_name(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    several = {"/v1/models": {"data": [{"id": "qwen2.5-coder:7b"}, {"id": "llama3.2:3b"}]}}
    with ScriptedServer([answer(FIX_ADD)], info=several) as server:
        proc = _run(repo, server)
    _green(proc)
    assert "[Model: gpt-4o," in proc.stdout
    (repo / "calc.py").write_text(CALC_PY)
    one = {"/v1/models": {"data": [{"id": "served"}]}}
    with ScriptedServer([answer(FIX_ADD)], info=one) as server:
        proc = _run(repo, server, "--allow-dirty", extra_env={"OPENAI_MODEL": "my-model"})
    _green(proc)
    assert "[Model: my-model," in proc.stdout and server.chat_requests[0]["model"] == "my-model"


def test_the_expected_response_format_fallback_is_no_warning(tmp_path: Path) -> None:
    """llama-cpp-python refuses the nested json_schema form on every run; that is logged at debug level only."""
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)], accepts=("json_object",)) as server:
        proc = _run(repo, server, "--no-tools")  # with tools offered no schema is sent (tests/test_tools.py)
    _green(proc)
    assert [r["response_format"]["type"] for r in server.chat_requests] == ["json_schema", "json_object"]
    assert "response_format" not in proc.stderr and "warning:" not in proc.stderr, proc.stderr
