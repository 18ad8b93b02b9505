"""Parsing model answers into edits: realistic replies, fenced, chatty, broken."""
from __future__ import annotations

import json

import pytest

from code_assistant.answers.plan import PlanParseError, parse_plan

BARE = json.dumps({"changes": [{"file_path": "calc.py", "action": "modify", "description": "fix",
                                "search": "return a - b", "replace": "return a + b"}]})


def test_bare_json() -> None:
    [op] = parse_plan(BARE)
    assert (op.file_path, op.action, op.search, op.replace) == ("calc.py", "modify", "return a - b", "return a + b")


def test_fenced_json_inside_prose() -> None:
    text = f"Looking at the failure, `add` subtracts.\n\n```json\n{BARE}\n```\n\nLet me know if this helps!"
    assert parse_plan(text)[0].replace == "return a + b"


def test_unfenced_json_surrounded_by_prose_with_braces_in_strings() -> None:
    payload = json.dumps({"changes": [{"file_path": "a.py", "action": "modify", "search": "x = {}",
                                       "replace": "x = {'k': '}'}"}]})
    text = f"Here you go: {payload} -- done {{not json}}"
    assert parse_plan(text)[0].replace == "x = {'k': '}'}"


def test_create_delete_and_symbol_actions() -> None:
    text = json.dumps({"changes": [
        {"file_path": "new.py", "action": "create", "content": "X = 1\n"},
        {"file_path": "old.py", "action": "delete"},
        {"file_path": "calc.py", "action": "replace_symbol", "symbol": "Calc.add", "content": "def add(self): ..."},
    ]})
    create, delete, symbol = parse_plan(text)
    assert (create.action, create.content) == ("create", "X = 1\n")
    assert delete.action == "delete"
    assert (symbol.symbol, symbol.content) == ("Calc.add", "def add(self): ...")


def test_empty_plan_is_valid() -> None:
    assert parse_plan('{"changes": []}') == []


@pytest.mark.parametrize("text, needle", [
    ("I could not find the bug.", "no JSON object"),
    ('{"edits": []}', '"changes"'),
    ('{"changes": [{"action": "modify"}]}', "file_path"),
    ('{"changes": [{"file_path": "a.py", "action": "rename"}]}', "unknown action"),
    ('{"changes": [{"file_path": "a.py", "action": "replace_symbol", "content": "x"}]}', "symbol"),
    ('{"changes": "all of them"}', "list"),
])
def test_unusable_answers_explain_why(text: str, needle: str) -> None:
    with pytest.raises(PlanParseError, match=needle):
        parse_plan(text)
