"""Structured output: the plan's schema as response_format, in the first form the server takes; answers still parsed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from code_assistant.answers.plan import parse_plan
from code_assistant.edit.edits import ACTIONS
from code_assistant.model.chat import OpenAIChat
from code_assistant.model.structured import plan_schema, refuses_response_format, response_format
from tests.repos import answer, modify, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
SCHEMA = plan_schema(ACTIONS)


def _model(server: ScriptedServer) -> OpenAIChat:
    return OpenAIChat("m", api_key="k", base_url=server.url, schema=SCHEMA, sleep=lambda s: None)


def _forms(server: ScriptedServer) -> list[str | None]:
    return [(r.get("response_format") or {}).get("type") for r in server.chat_requests]


def test_the_schema_is_strict_and_names_every_action() -> None:
    change = SCHEMA["properties"]["changes"]["items"]
    assert change["properties"]["action"]["enum"] == list(ACTIONS)
    assert change["required"] == list(change["properties"]) and change["additionalProperties"] is False
    nested = response_format("json_schema", SCHEMA)
    assert nested == {"type": "json_schema", "json_schema": {"name": "edit_plan", "schema": SCHEMA, "strict": True}}
    assert response_format("json_object", SCHEMA) == {"type": "json_object", "schema": SCHEMA}


def test_an_answer_in_the_strict_shape_parses() -> None:
    strict = {"changes": [{"file_path": "calc.py", "action": "modify", "description": "fix", "search": "a - b",
                           "replace": "a + b", "content": None, "symbol": None, "overwrite": None}]}
    [op] = parse_plan(json.dumps(strict))
    assert (op.file_path, op.action, op.search, op.replace, op.content, op.overwrite) == (
        "calc.py", "modify", "a - b", "a + b", None, False)


def test_a_refusal_names_response_format() -> None:
    llama_cpp_python = ("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                        "'msg': \"Input should be 'text' or 'json_object'\"}")
    assert refuses_response_format(500, llama_cpp_python)
    assert refuses_response_format(422, "Unsupported value: 'response_format.type'")
    assert not refuses_response_format(500, "out of memory") and not refuses_response_format(401, "response_format")


def test_the_nested_form_goes_first_and_a_server_taking_it_keeps_it() -> None:
    with ScriptedServer(["a", "b"], accepts=("json_schema", "json_object")) as server:
        model = _model(server)
        model.complete([{"role": "user", "content": "hi"}])
        model.complete([{"role": "user", "content": "hi"}])
    assert _forms(server) == ["json_schema", "json_schema"]
    assert server.chat_requests[0]["response_format"]["json_schema"]["schema"] == SCHEMA


def test_a_refused_form_is_remembered_and_the_next_one_asked() -> None:
    """llama-cpp-python's server: 500 for the nested form, the schema honoured under json_object."""
    with ScriptedServer(["a", "b"], accepts=("json_object",)) as server:
        model = _model(server)
        assert model.complete([{"role": "user", "content": "hi"}]).text == "a"
        assert model.complete([{"role": "user", "content": "hi"}]).text == "b"
    assert _forms(server) == ["json_schema", "json_object", "json_object"]


def test_a_server_refusing_every_form_is_asked_without_one() -> None:
    with ScriptedServer(["a"], accepts=(), refuse_status=400) as server:
        assert _model(server).complete([{"role": "user", "content": "hi"}]).text == "a"
    assert _forms(server) == ["json_schema", "json_object", None]


def test_a_server_that_ignores_the_schema_still_goes_through_the_parser(tmp_path: Path) -> None:
    """The server takes response_format but answers prose: the answer is re-asked once, then the run stops cleanly."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer(["Sure! I would change add.", "Still prose."]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-tools", "--no-tools"],
                       server_url=server.url)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert _forms(server) == ["json_schema", "json_schema"] and snapshot(repo) == before
    assert "could not be used" in server.chat_requests[1]["messages"][-1]["content"]


def test_no_structured_output_sends_no_response_format(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    fix = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")
    with ScriptedServer([answer(fix)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-tools",
                        "--no-structured-output"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _forms(server) == [None]
