"""--edit-format blocks: the model is asked for SEARCH/REPLACE blocks instead of the JSON plan, in every request of a
run (the system message's rules, each request's last line, a re-ask, the tools' closing words), no JSON schema is
sent as response_format, and a run answered in blocks ends green; the JSON plan stays the default."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from code_assistant.model import prompts
from code_assistant.model.names import billions
from tests.repos import CALC_PY, TEST_CALC_PY, python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
WRONG_BLOCK = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * 1 - b\n>>>>>>> REPLACE\n```\n"
RIGHT_BLOCK = "calc.py\n```\n<<<<<<< SEARCH\n    return a * 1 - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"


def _said(body: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] in ("system", "user"))


def test_a_run_in_blocks_is_asked_for_blocks_in_every_request_and_ends_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["no edits here, sorry", WRONG_BLOCK, RIGHT_BLOCK]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert "return a + b" in (repo / "calc.py").read_text()
    assert len(asked) == 3, "the plan, its re-ask (no blocks in the answer), the fix"
    for body in asked:
        said = _said(body)
        assert said.startswith(prompts.SYSTEM_BLOCKS.render()), said[:300]
        assert "JSON object" not in said and '"changes"' not in said, said
        assert "response_format" not in body
    assert _said(asked[0]).endswith("Reply with SEARCH/REPLACE blocks only.")
    assert "Reply again with SEARCH/REPLACE blocks only" in asked[1]["messages"][-1]["content"]
    assert asked[2]["messages"][-1]["content"].endswith("Reply with SEARCH/REPLACE blocks of further changes (SEARCH "
                                                        "text must match the CURRENT content shown above).")


def test_the_json_plan_stays_the_default(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    fix = {"changes": [{"file_path": "calc.py", "action": "modify", "search": "    return a - b",
                        "replace": "    return a + b"}]}
    with ScriptedServer([json.dumps(fix)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
        body = server.chat_requests[0]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _said(body).startswith(prompts.SYSTEM.render()) and "SEARCH/REPLACE" not in _said(body)


def test_every_reply_a_run_requests_has_its_words_for_blocks() -> None:
    """A request prompt that asks for the JSON plan, rendered as a run renders it, says blocks once translated
    (the tools' own JSON for calling them and --ask's answer are not a plan)."""
    fields = {"task": "T", "test_command": "pytest", "baseline": "1 failed", "baseline_failures": "", "context": "C",
              "iteration": 1, "max_iterations": 3, "summary": "1 failed", "failures": "F", "edit_feedback": "",
              "files": "F", "feedback": "", "error": "E", "output": "O", "why": "W", "paths": "p", "shown": "s",
              "refused": "r", "names": "AGENTS.md", "text": "t", "notes": "n", "how": "h", "max_calls": 3,
              "run": "", "answer": "the JSON object of changes only", "tools": "t", "reproduction": "R",
              "excerpts": prompts.EXCERPTS}
    for name, prompt in prompts.ALL.items():
        if name in ("system", "tools-json", "ask"):
            continue
        assert "JSON" not in prompts.in_blocks(prompt.render(**fields)), name


UNNAMED_FIX = "```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"


def test_a_block_without_its_files_name_goes_to_the_one_shown_file_that_holds_it(tmp_path: Path) -> None:
    """The search lines are in calc.py alone of the files the model was shown: that file is changed, no re-ask."""
    repo = python_repo(tmp_path)
    with ScriptedServer([UNNAMED_FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert len(asked) == 1 and "return a + b" in (repo / "calc.py").read_text()


def test_a_block_whose_lines_two_shown_files_hold_is_asked_again(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n",
                                  "calc_copy.py": "def add(a, b):\n    return a - b\n",
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                        "    assert add(2, 3) == 5\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    with ScriptedServer([UNNAMED_FIX, "calc.py\n" + UNNAMED_FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(asked) == 2 and "names no file" in asked[1]["messages"][-1]["content"]
    assert "return a - b" in (repo / "calc_copy.py").read_text()


def test_a_follow_up_still_finds_the_file_a_block_without_a_name_belongs_to(tmp_path: Path) -> None:
    """Qwen2.5-Coder-1.5B's calc-add run in blocks with tools: the test edited first (refused: the code under test
    must change), then the right fix with no file named (there it was `<calc.py>`, read since as a name); the follow-up
    request shows no context of its own, the conversation's earlier one still tells where the lines are."""
    repo = python_repo(tmp_path)
    test_edit = ("<tests/test_calc.py>\n```\n<<<<<<< SEARCH\n    assert add(2, 3) == 5\n=======\n"
                 "    assert add(2, 3) == -1\n>>>>>>> REPLACE\n```\n")
    with ScriptedServer([test_edit, UNNAMED_FIX]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert len(asked) == 2 and "return a + b" in (repo / "calc.py").read_text()


def test_small_model_asks_for_blocks_without_tools_or_a_reproduction_in_a_small_context(tmp_path: Path) -> None:
    """--small-model: one flag for what Qwen2.5-Coder-1.5B did best with (issue 58): blocks, no tools, no
    reproduction test even on a green suite, a 2,500-token context; a flag of its own still wins, and the run says
    what it uses."""
    repo = python_repo(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n",
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_sub():\n"
                                                        "    assert add(3, 1) == 2\n"})
    fix = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a - b  # kept\n>>>>>>> REPLACE\n```\n"
    with ScriptedServer([fix]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Say in add() that it is kept", "--test-command", PYTEST,
                        "--small-model"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert "[--small-model: edits as SEARCH/REPLACE blocks, tools off, reproduction test off, a 2500-token " \
           "context, after a failed iteration the plan sampled again, 6 iterations]" in proc.stdout
    assert "[Reproducing" not in proc.stdout and len(asked) == 1, "the suite is green, yet no reproduction request"
    assert _said(asked[0]).startswith(prompts.SYSTEM_BLOCKS.render()) and "tools" not in asked[0]
    with ScriptedServer([fix.replace("  # kept", "  # kept twice")]) as server:
        own = run_cli(["--repo", str(repo), "--task", "Say it twice", "--test-command", PYTEST, "--small-model",
                       "--context-tokens", "900", "--max-iterations", "2", "--edit-format", "json",
                       "--no-structured-output"],
                      server_url=server.url)
    assert "[--small-model: edits as a JSON plan, tools off, reproduction test off, a 900-token context, after a " \
           "failed iteration the plan sampled again, 2 iterations]" in own.stdout


def test_blocks_without_tools_get_no_map_of_more_files_the_model_could_not_ask_for(tmp_path: Path) -> None:
    """The map lists files not shown so that the model can ask to read one: the JSON plan's "read", or the tools. In
    blocks without tools nothing can ask, and Qwen2.5-Coder-1.5B copied the map's lines as its SEARCH text (toml)."""
    users = {f"users_{k}.py": "from calc import add\n\n\n" + "".join(
        f"def use_{k}_{i}(a):\n    \"\"\"Add {i} to a.\"\"\"\n    return add(a, {i}) * {k}\n\n\n" for i in range(30))
        for k in range(6)}
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY, **users,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    said = {}
    for form in ("json", "blocks"):
        with ScriptedServer([RIGHT_BLOCK.replace("a * 1 - b", "a - b")]) as server:
            proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command",
                            PYTEST, "--no-reproduce", "--no-tools", "--context-tokens", "1500", "--edit-format", form,
                            "--dry-run"], server_url=server.url)
            said[form] = _said(server.chat_requests[0])
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "More files, ranked after those above" in said["json"]
    assert "More files, ranked after those above" not in said["blocks"] and "def use_" in said["blocks"]


def test_the_parameters_a_models_name_gives() -> None:
    names = ["qwen2.5-coder-1.5b", "/models/SmolLM2-135M-Instruct-Q8_0.gguf", "llama3.1:8b",
             "Qwen2.5-Coder-32B-Instruct", "gemma-3-4b-it", "gpt-4o", "gpt-4o-mini-2024-07-18", "claude-sonnet-4-5",
             "phi-3-mini-4k"]
    assert [billions(n) for n in names] == [1.5, 0.135, 8.0, 32.0, 4.0, None, None, None, None]


def test_a_model_whose_name_says_it_is_small_is_told_of_small_model(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    for extra, hinted in (((), True), (("--small-model",), False)):
        with ScriptedServer([RIGHT_BLOCK.replace("a * 1 - b", "a - b")]) as server:
            proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", PYTEST, "--no-reproduce",
                            "--model", "qwen2.5-coder-1.5b", "--dry-run", *extra], server_url=server.url)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        hint = "[qwen2.5-coder-1.5b names 1.5B parameters: a model this small may do better with --small-model"
        assert (hint in proc.stdout) is hinted, proc.stdout
