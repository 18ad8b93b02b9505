"""A request for SEARCH/REPLACE blocks shows the form by one worked exchange before the task (a user message and its
answer), not by placeholders alone: Qwen2.5-Coder-1.5B copied `<the path of the file to change, ...>` as its path.
The exchange is the same in every request, so a server that keeps the last prompt reads it once; it is the first thing
given up when a request must shrink to fit the window, never the task; the JSON plan's requests have none."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from code_assistant.agent.requests import EXAMPLE, fit_request
from code_assistant.model import prompts
from code_assistant.model.fitting import message_tokens
from tests.repos import python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
WRONG_BLOCK = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * 1 - b\n>>>>>>> REPLACE\n```\n"
RIGHT_BLOCK = "calc.py\n```\n<<<<<<< SEARCH\n    return a * 1 - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"


def test_a_blocks_request_shows_one_worked_exchange_between_the_rules_and_the_task(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([WRONG_BLOCK, RIGHT_BLOCK]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--no-tools", "--edit-format", "blocks"], server_url=server.url)
        plan, fix = (body["messages"] for body in server.chat_requests)
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert [m["role"] for m in plan] == ["system", "user", "assistant", "user"]
    assert plan[1]["content"] == prompts.EXAMPLE_BLOCKS_TASK.text
    assert plan[2]["content"] == prompts.EXAMPLE_BLOCKS_ANSWER.text
    assert plan[3]["content"].startswith("# Task\nFix add() and make the tests pass")
    assert "hello/greeting.py" not in plan[3]["content"], "the example's file is no file of the repository"
    assert fix[:4] == plan and fix[4] == {"role": "assistant", "content": WRONG_BLOCK}, "the fix goes on after it"


def test_the_json_plan_is_asked_without_the_example(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    fix = {"changes": [{"file_path": "calc.py", "action": "modify", "search": "    return a - b",
                        "replace": "    return a + b"}]}
    with ScriptedServer([json.dumps(fix)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", PYTEST, "--no-reproduce",
                        "--no-tools"], server_url=server.url)
        plan = server.chat_requests[0]["messages"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [m["role"] for m in plan] == ["system", "user"]


def test_a_request_too_long_for_its_room_gives_up_the_example_first_and_keeps_the_task() -> None:
    task = {"role": "user", "content": "# Task\nFix add()\n" + "context line\n" * 200}
    messages = [{"role": "system", "content": "rules"}, *EXAMPLE, task]
    assert fit_request(messages, message_tokens(messages)) == messages, "room enough: all of it"
    room = message_tokens([messages[0], task])
    assert fit_request(messages, room) == [messages[0], task]
    conversation = [*messages, {"role": "assistant", "content": "calc.py\n..."}, {"role": "user", "content": "again"}]
    kept = fit_request(conversation, message_tokens(conversation) - 5)
    assert kept[0] == messages[0] and task in kept and not any(m in kept for m in EXAMPLE)


def test_an_answer_that_edits_the_examples_file_is_refused_and_the_next_sample_goes_on(tmp_path: Path) -> None:
    """The example copied — its file created in the user's tree — is refused whole, said, and nothing of it
    written; a repository that has a file of that name may change it."""
    repo = python_repo(tmp_path)
    copied = (f"{prompts.EXAMPLE_BLOCKS_FILE}\n```\n<<<<<<< SEARCH\n=======\ndef greet(name):\n"
              f"    return \"hello \" + name\n>>>>>>> REPLACE\n```\n") + RIGHT_BLOCK.replace("a * 1 - b", "a - b")
    with ScriptedServer([copied, RIGHT_BLOCK.replace("a * 1 - b", "a - b")]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--no-tools", "--edit-format", "blocks", "--fix-by", "samples"],
                       server_url=server.url)
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert (f"[Refused: {prompts.EXAMPLE_BLOCKS_FILE} is the answer format's example, not a file of this "
            "repository: change the repository's files]") in proc.stdout
    assert not (repo / prompts.EXAMPLE_BLOCKS_FILE).exists() and len(server.chat_requests) == 2
    assert prompts.EXAMPLE_BLOCKS_ANSWER.text.splitlines()[0] == prompts.EXAMPLE_BLOCKS_FILE

    (tmp_path / "own").mkdir()
    own = python_repo(tmp_path / "own", {prompts.EXAMPLE_BLOCKS_FILE: "def greet(name):\n    return name\n",
                                         "tests/test_greet.py": "from hello.greeting import greet\n\n\n"
                                                                "def test_greet():\n    assert greet('x') == 'hello x'\n",
                                         "pytest.ini": "[pytest]\npythonpath = .\n"})
    fix = (f"{prompts.EXAMPLE_BLOCKS_FILE}\n```\n<<<<<<< SEARCH\n    return name\n=======\n"
           "    return \"hello \" + name\n>>>>>>> REPLACE\n```\n")
    with ScriptedServer([fix]) as server:
        proc = run_cli(["--repo", str(own), "--task", "greet() says hello", "--test-command", PYTEST,
                        "--no-reproduce", "--no-tools", "--edit-format", "blocks"], server_url=server.url)
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
