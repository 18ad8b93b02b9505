"""A SEARCH/REPLACE block without its `<<<<<<< SEARCH` line: Qwen2.5-Coder-1.5B answered issue 58's
pager-page-slice in blocks with a fence, the file's path, `=======` and a whole definition, twice (model_error). The
path and what follows the divider say what it means: the definition of that name in that file, replaced (and lines
before the divider, when there are some, are the SEARCH text)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from code_assistant.answers.plan import PlanParseError, parse_answer
from code_assistant.edit.edits import Action
from tests.repos import python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
NEW_ADD = "def add(a, b):\n    return a + b\n"


def test_a_path_a_divider_and_a_definition_replace_that_definition() -> None:
    plan = parse_answer("```python\ncalc.py\n=======\n" + NEW_ADD + "```\n")
    assert [(op.action, op.file_path, op.symbol, op.content) for op in plan.ops] == [
        (Action.REPLACE_SYMBOL, "calc.py", "add", NEW_ADD)]


def test_the_path_above_the_fence_and_a_replace_marker_closing_it() -> None:
    plan = parse_answer("calc.py\n```\n=======\n" + NEW_ADD + ">>>>>>> REPLACE\n```\n")
    assert [(op.action, op.file_path, op.symbol) for op in plan.ops] == [(Action.REPLACE_SYMBOL, "calc.py", "add")]


def test_lines_before_the_divider_are_the_search_text() -> None:
    plan = parse_answer("calc.py\n```\n    return a - b\n=======\n    return a + b\n```\n")
    assert [(op.action, op.file_path, op.search, op.replace) for op in plan.ops] == [
        (Action.MODIFY, "calc.py", "    return a - b\n", "    return a + b\n")]


def test_a_head_that_names_the_file_in_place_of_search_opens_a_block_of_that_file() -> None:
    """Qwen2.5-Coder-1.5B wrote `<<<<<<< parse.py` (and `<<<<<<< toml/encoder.py`, `<<<<<<< pager/paging.py`) where
    `<<<<<<< SEARCH` goes: refused as holding no block, where the file is named on the very line."""
    plan = parse_answer("```\n<<<<<<< calc.py\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n")
    assert [(op.action, op.file_path, op.search, op.replace) for op in plan.ops] == [
        (Action.MODIFY, "calc.py", "    return a - b\n", "    return a + b\n")]
    lower = parse_answer("calc.py\n```\n<<<<<<< search\n    return a - b\n=======\n    return a + b\n"
                         ">>>>>>> replace\n```\n")
    assert [(op.file_path, op.replace) for op in lower.ops] == [("calc.py", "    return a + b\n")], \
        "the markers in lower case (Qwen2.5-Coder-1.5B closed parse's block with `>>>>>>> replace`)"
    labelled = parse_answer("```\n<<<<<<< calc.py (excerpt)\n    return a - b\n=======\n    return a + b\n"
                            ">>>>>>> replace\n```\n")
    assert [op.file_path for op in labelled.ops] == ["calc.py"], "the context heading's form copied after the path"
    above = parse_answer("calc.py (excerpt)\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
                         ">>>>>>> REPLACE\n```\n")
    assert [op.file_path for op in above.ops] == ["calc.py"]
    with pytest.raises(PlanParseError):  # a merge conflict's marker names no file
        parse_answer("```\n<<<<<<< HEAD\n    return a - b\n=======\n    return a + b\n>>>>>>> main\n```\n")


@pytest.mark.parametrize("text", [
    "```\ncalc.py\n=======\nsome prose, no definition\n```\n",  # nothing after the divider defines a name
    "```\n=======\n" + NEW_ADD + "```\n",  # no file named
    "Here is the fix:\n\n" + NEW_ADD,  # no divider at all
])
def test_without_a_path_a_divider_or_a_definition_it_is_still_unreadable(text: str) -> None:
    with pytest.raises(PlanParseError):
        parse_answer(text)


def test_a_block_that_names_no_file_belongs_to_the_file_that_defines_its_definition() -> None:
    """Qwen2.5-Coder-1.5B, sampled on pager-page-slice, sent the fix as a fence, `=======` and the whole definition,
    no path: the one file shown that holds the definition's first line is its file; none or several, still refused."""
    text = "```python\n=======\n" + NEW_ADD + "```\n"
    asked: list[str] = []

    def owner(search: str) -> str | None:
        asked.append(search)
        return "calc.py" if search == "def add(a, b):\n" else None

    plan = parse_answer(text, owner=owner)
    assert [(op.action, op.file_path, op.symbol) for op in plan.ops] == [(Action.REPLACE_SYMBOL, "calc.py", "add")]
    assert asked == ["def add(a, b):\n"]
    with pytest.raises(PlanParseError, match="names no file"):
        parse_answer(text, owner=lambda search: None)
    with pytest.raises(PlanParseError, match="names no file"):  # prose after the divider: nothing to look for
        parse_answer("```\n=======\nsome prose\n```\n", owner=lambda search: "calc.py")


def test_a_run_answered_with_a_nameless_definition_ends_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["```python\n=======\n" + NEW_ADD + "```\n"]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert "return a + b" in (repo / "calc.py").read_text() and "def multiply" in (repo / "calc.py").read_text()


def test_a_run_answered_so_ends_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["```python\ncalc.py\n=======\n" + NEW_ADD + "```\n"]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() and make the tests pass", "--test-command", PYTEST,
                        "--no-reproduce", "--edit-format", "blocks"], server_url=server.url)
        asked = server.chat_requests
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert len(asked) == 1 and "return a + b" in (repo / "calc.py").read_text()
    assert "def multiply" in (repo / "calc.py").read_text()


def test_an_empty_search_under_an_existing_file_adds_to_its_end(tmp_path: Path) -> None:
    """aider's reading of an empty SEARCH, which models trained on its format follow: a new file, or the text added
    at the end of a file that exists. The reproduction test added to the existing test file is kept (it was refused
    as "already exists", and the run went on without a reproduction)."""
    files = {"calc.py": "def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n",
             "tests/test_calc.py": "from calc import add, multiply\n\n\ndef test_multiply():\n"
                                   "    assert multiply(2, 3) == 6\n",
             "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}
    repo = python_repo(tmp_path, files)
    added = "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    test_block = "tests/test_calc.py\n```\n<<<<<<< SEARCH\n=======\n" + added + ">>>>>>> REPLACE\n```\n"
    fix_block = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
    with ScriptedServer([test_block, fix_block]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add() subtracts: make it add", "--test-command", PYTEST,
                        "--edit-format", "blocks"], server_url=server.url)
    assert proc.returncode == 0 and "Result: SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    assert "[Reproduced: tests/test_calc.py fails before any fix" in proc.stdout
    assert (repo / "tests/test_calc.py").read_text() == files["tests/test_calc.py"] + added
