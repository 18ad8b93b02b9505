"""The plan after a reproduction step is asked in the same conversation: the reproduction request, the model's
test and one more message, so a server that keeps the last prompt (llama.cpp) reads only what is new. Issue 58: on
Qwen2.5-Coder-1.5B on two cores the plan request started afresh and the server read its 4,697 tokens again (113 s of
a 300 s limit), where the reproduction request had shown the same code a minute before."""
from __future__ import annotations

import sys
from pathlib import Path

from code_assistant.model import prompts
from tests.repos import answer, create, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
# add() is wrong and no test calls it: the baseline passes, so the run asks for a reproduction test first
FILES = {"calc.py": "def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n",
         "tests/test_calc.py": "from calc import multiply\n\n\ndef test_multiply():\n    assert multiply(2, 3) == 6\n",
         "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")


def _run(repo: Path, server: ScriptedServer, *extra: str):
    return run_cli(["--repo", str(repo), "--task", "add() subtracts: make it add", "--test-command", PYTEST, *extra],
                   server_url=server.url)


def test_the_plan_continues_the_reproduction_conversation_so_its_prefix_is_the_same(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    script = [answer(create("tests/test_add.py", TEST_ADD)), answer(FIX_ADD)]
    with ScriptedServer(script) as server:
        proc = _run(repo, server)
        asked = [body["messages"] for body in server.chat_requests]
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert "[Reproduced: tests/test_add.py fails before any fix" in proc.stdout
    assert len(asked) == 2
    reproduce, plan = asked
    assert plan[:len(reproduce)] == reproduce, "the plan request starts with the reproduction request, unchanged"
    assert plan[len(reproduce)] == {"role": "assistant", "content": script[0]}
    assert len(plan) == len(reproduce) + 2 and plan[-1]["role"] == "user"
    told = plan[-1]["content"]
    assert "# A test that reproduces the task" in told and "tests/test_add.py was added and fails" in told
    assert "test_add" in told and told.endswith("Reply with the JSON object only.")
    assert "Now plan the changes that complete the task" in told
    assert "return a + b" in (repo / "calc.py").read_text() and (repo / "tests/test_add.py").read_text() == TEST_ADD


def test_after_a_reproduction_that_was_not_kept_the_plan_says_so_in_the_same_conversation(tmp_path: Path) -> None:
    """The model's test passes on the current code, twice: it is taken back out, and the plan request says that no
    test was kept, after the same messages."""
    repo = python_repo(tmp_path, FILES)
    passing = "from calc import multiply\n\n\ndef test_again():\n    assert multiply(1, 1) == 1\n"
    script = [answer(create("tests/test_add.py", passing)),
              answer(modify("tests/test_add.py", "multiply(1, 1) == 1", "multiply(2, 2) == 4")), answer(FIX_ADD)]
    with ScriptedServer(script) as server:
        proc = _run(repo, server)
        asked = [body["messages"] for body in server.chat_requests]
    assert "[Not reproduced: the test passed before any fix" in proc.stdout, proc.stdout + proc.stderr
    assert len(asked) == 3
    assert asked[2][:len(asked[1])] == asked[1] and asked[2][len(asked[1])]["content"] == script[1]
    told = asked[2][-1]["content"]
    assert "No reproduction test was kept (the test passed before any fix)" in told
    assert "Now plan the changes that complete the task" in told
    assert not (repo / "tests/test_add.py").exists() and "return a + b" in (repo / "calc.py").read_text()


def test_in_blocks_the_continued_plan_asks_for_blocks(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    test_block = "tests/test_add.py\n```\n<<<<<<< SEARCH\n=======\n" + TEST_ADD + ">>>>>>> REPLACE\n```\n"
    fix_block = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
    with ScriptedServer([test_block, fix_block]) as server:
        proc = _run(repo, server, "--edit-format", "blocks")
        asked = [body["messages"] for body in server.chat_requests]
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert asked[1][:len(asked[0])] == asked[0]
    assert asked[1][-1]["content"].endswith(prompts.in_blocks("Reply with the JSON object only."))
    # how a new test file is written in blocks, said where the model starts writing (Qwen2.5-Coder-1.5B wrote a
    # head, the test and a tail, with neither a path nor `=======`)
    assert asked[0][-1]["content"].endswith("It will be run alone now and must fail. Reply with SEARCH/REPLACE "
                                            "blocks only: a new test file is its path, then a block with an empty "
                                            "SEARCH and the whole file after `=======`.")


def test_after_unreadable_reproduction_answers_the_plan_starts_afresh(tmp_path: Path) -> None:
    """Shown its two broken answers, Qwen2.5-Coder-1.5B sent the same broken answer to the continued plan, twice
    (node-ms-invalid-numbers): after answers that could not be read, the plan is asked as without a reproduction."""
    repo = python_repo(tmp_path, FILES)
    script = ["I would write a test here but", "Still no JSON, sorry.", answer(FIX_ADD)]
    with ScriptedServer(script) as server:
        proc = _run(repo, server)
        asked = [body["messages"] for body in server.chat_requests]
    assert "[Not reproduced: the model's answer could not be read" in proc.stdout, proc.stdout + proc.stderr
    assert len(asked) == 3 and [m["role"] for m in asked[2]] == ["system", "user"]
    assert asked[2][1]["content"].startswith("# Task") and "Now plan" not in asked[2][1]["content"]
    assert proc.returncode == 0 and "return a + b" in (repo / "calc.py").read_text()
