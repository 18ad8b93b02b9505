"""Thinking models' tool-call turns go back as each provider documents (tests/provider_emulator.py, each contract with
its source): DeepSeek's reasoning_content with the turn that made the calls (and only there), Gemini's thought
signature with each call; a history without them is learned from the provider's 400 in one more request, never taken
for a server that serves no tools; an error body is read in every shape providers send (object, array, text)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from code_assistant.model.chat import OpenAIChat, ToolsRefused
from code_assistant.model.error_bodies import body_codes, body_message
from code_assistant.model.records import ModelError
from tests.provider_emulator import CHAT, GEMINI_SIGNATURE, PLAIN_500, ProviderEmulator
from tests.repos import PYTEST, answer, modify, python_repo, run_cli

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
GREP = {"name": "grep", "arguments": {"pattern": "def add"}}
TOOLS = [{"type": "function", "function": {"name": "grep", "description": "Search the repository.", "parameters": {
    "type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}]


def _run(repo: Path, emulator: ProviderEmulator) -> Any:
    return run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--model",
                    emulator.profile.model], server_url=emulator.url)


def test_deepseek_thinking_with_tools_goes_green_its_reasoning_back_with_the_calls_only(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ProviderEmulator("deepseek-v4-flash", [{"tool_calls": [GREP]}, FIX_ADD]) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert emulator.refused == [], "asked right the first time"
    _, second = emulator.bodies(CHAT)
    [turn] = [m for m in second["messages"] if m.get("tool_calls")]
    assert turn["reasoning_content"] == "Thinking about the failing test first.", "as streamed"
    assert all("reasoning_content" not in m for m in second["messages"] if not m.get("tool_calls"))
    assert "native tool calls" not in proc.stdout + proc.stderr


def test_gemini_3_with_tools_goes_green_each_call_back_with_its_own_signature(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ProviderEmulator("google-gemini-3-flash", [{"tool_calls": [GREP]}, FIX_ADD]) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert emulator.refused == []
    [turn] = [m for m in emulator.bodies(CHAT)[1]["messages"] if m.get("tool_calls")]
    [call] = turn["tool_calls"]
    assert call["extra_content"] == {"google": {"thought_signature": emulator.signatures[call["id"]]}}


# a history the model did not make this session (a resumed one, a call whose carried part was lost)
HISTORY = [{"role": "user", "content": "Fix add() in calc.py."},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "add"}'}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "calc.py:4: def add(a, b):"}]


@pytest.mark.parametrize(("name", "learned", "sent"), [
    ("deepseek-v4-flash", "each tool-call turn goes back with its reasoning_content",
     lambda turn: turn["reasoning_content"] == ""),
    ("google-gemini-3-flash", "the placeholder Google documents",
     lambda turn: turn["tool_calls"][0]["extra_content"]["google"]["thought_signature"] ==
     "skip_thought_signature_validator"),
])
def test_a_history_without_what_must_go_back_is_learned_from_the_400_never_taken_for_no_tools(
        name: str, learned: str, sent: Any) -> None:
    with ProviderEmulator(name, [FIX_ADD]) as emulator:
        chat = OpenAIChat(emulator.profile.model, api_key="k", base_url=emulator.url, sleep=lambda s: None)
        response = chat.complete(HISTORY, tools=TOOLS)
    assert response.text == FIX_ADD and chat.native_tools, "tools kept"
    _, accepted = emulator.bodies(CHAT)
    [turn] = [m for m in accepted["messages"] if m.get("tool_calls")]
    assert sent(turn) and len(emulator.refused) == 1
    [line] = response.notes
    assert learned in line and "(the server's 400)" in line


def test_gemini_refusing_the_placeholder_too_ends_with_its_reason_not_no_tools() -> None:
    """Asked again with the placeholder and refused again: the run ends naming what Gemini said, its body an array."""
    always_refused = GEMINI_SIGNATURE.__class__(CHAT, lambda b: True, 400, GEMINI_SIGNATURE.body)
    with ProviderEmulator("google-gemini-3-flash", [FIX_ADD], ahead=[always_refused, always_refused]) as emulator:
        chat = OpenAIChat(emulator.profile.model, api_key="k", base_url=emulator.url, sleep=lambda s: None)
        with pytest.raises(ModelError) as raised:
            chat.complete(HISTORY, tools=TOOLS)
    assert not isinstance(raised.value, ToolsRefused) and chat.native_tools
    assert "answered 400: Function call is missing a thought_signature in functionCall parts" in str(raised.value)


@pytest.mark.parametrize(("body", "message", "codes"), [
    ({"error": {"message": "m", "type": "invalid_request_error", "code": "c"}}, "m", {"invalid_request_error", "c"}),
    (GEMINI_SIGNATURE.body, GEMINI_SIGNATURE.body[0]["error"]["message"], {"400", "invalid_argument"}),
    ({"object": "error", "message": "vllm says", "type": "BadRequestError", "code": 400}, "vllm says",
     {"badrequesterror", "400"}),
    ({"error": "'response_format.type' must be 'json_schema'"}, "'response_format.type' must be 'json_schema'", set()),
    (PLAIN_500.body, "Internal Server Error", set()),
    ({"detail": [{"type": "extra_forbidden"}]}, "", set()),
])
def test_an_error_body_is_read_in_every_documented_shape(body: Any, message: str, codes: set[str]) -> None:
    assert body_message(json.loads(json.dumps(body))) == message and body_codes(body) == codes


def test_what_a_chat_turn_carried_stays_off_the_responses_wire_and_off_turns_without_calls() -> None:
    """A session that moved to the Responses API keeps its history: a chat turn's carried parts are the chat wire's."""
    from code_assistant.model.accepts import Ask
    from code_assistant.model.completions import body
    from code_assistant.model.responses import input_items

    carried = [{"type": "chat.reasoning_content", "text": "looked at calc.py"},
               {"type": "chat.extra_content", "call_id": "call_1", "extra_content": {"google": {"thought_signature": "s"}}}]
    messages = [HISTORY[0], {**HISTORY[1], "carried": carried}, HISTORY[2],
                {"role": "assistant", "content": "done", "carried": carried}]
    _, items = input_items(messages)
    assert all(item.get("type") not in ("chat.reasoning_content", "chat.extra_content") for item in items)
    sent = body(Ask(model="m", messages=messages))["messages"]
    assert sent[1]["reasoning_content"] == "looked at calc.py" and sent[1]["tool_calls"][0]["extra_content"] == {
        "google": {"thought_signature": "s"}}
    assert "reasoning_content" not in sent[3] and "carried" not in sent[3], "a turn without calls goes without it"
