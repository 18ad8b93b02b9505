"""Tool calls read out of a model's answer: a native call's arguments (JSON text, sloppy at times), and the calls a
model writes as text when its server serves no native tool calls — {"tool_calls": [{"name": ..., "arguments":
{...}}]}, in the shapes models write it. Pure functions; errors are written for the model."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import json_repair

from code_assistant.answers.plan_json import JsonPlanError, find_plan_json
from code_assistant.answers.reasoning import split_reasoning


class ToolCallError(ValueError):
    """A call that cannot be read; the message goes back to the model as the call's result."""


@dataclass(frozen=True)
class WrittenCall:
    """A call as the model wrote it: the tool's name and its arguments (an object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def arguments(text: str) -> dict[str, Any]:
    """A native call's arguments: a JSON object (repaired when sloppy; {} when empty)."""
    if not text or not text.strip():
        return {}
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
        except Exception as exc:  # noqa: BLE001 - the repairer failing on odd input is the model's error to fix
            raise ToolCallError(f"the arguments are not JSON: {exc}") from None
    if isinstance(value, str) and value.strip().startswith("{"):  # sent as a JSON string inside JSON
        return arguments(value)
    if not isinstance(value, dict):
        raise ToolCallError(f"the arguments must be a JSON object, not {type(value).__name__}")
    return value


def written_calls(answer: str) -> list[WrittenCall] | None:
    """The calls an answer writes as text, in order; None when it writes none (a plan, prose, or a plan beside
    calls: the plan wins). A call in another common shape — {"function": {"name", "arguments"}}, {"tool", "args"}
    — is read too; one without a name is skipped."""
    text = split_reasoning(answer).answer
    if "tool_calls" not in text:
        return None
    try:
        data, _ = find_plan_json(text, key="tool_calls")
    except JsonPlanError:
        return None
    if "changes" in data or not isinstance(data.get("tool_calls"), list):
        return None
    calls = []
    for item in data["tool_calls"]:
        if not isinstance(item, dict):
            continue
        inner = item.get("function") if isinstance(item.get("function"), dict) else item
        name = inner.get("name") or inner.get("tool")
        args = inner.get("arguments", inner.get("args", inner.get("parameters", {})))
        if not isinstance(name, str) or not name.strip():
            continue
        try:
            parsed = args if isinstance(args, dict) else arguments(args if isinstance(args, str) else "")
        except ToolCallError:
            parsed = {"_unreadable": str(args)}
        calls.append(WrittenCall(name=name.strip(), arguments=parsed))
    return calls or None


def as_text(calls: list[WrittenCall]) -> str:
    """Calls in the JSON form, as an answer that asks for them reads (the run log keeps native calls so, for
    --replay)."""
    return json.dumps({"tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls]})
