"""Structured output: the plan's JSON schema and the forms of `response_format` servers accept.

Forms, tried in order; a server that refuses one (400/422/500 naming response_format) is asked with the next (the
Responses API takes the same forms as its `text.format`):
- "json_schema": {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} — OpenAI, vLLM, llama.cpp's
  own server, LM Studio, Ollama's /v1;
- "json_object": {"type": "json_object", "schema": ...} — llama-cpp-python's server (it refuses the first form with a
  500 validation error and constrains its sampling to the schema under this one);
- None: no response_format at all.
Some servers ignore the schema and answer 200 anyway: every answer still goes through the plan parser.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FORMS: tuple[str | None, ...] = ("json_schema", "json_object", None)
SCHEMA_NAME = "edit_plan"
_REFUSAL_STATUSES = (400, 422, 500)


def plan_schema(actions: Sequence[str]) -> dict[str, Any]:
    """{"changes": [...]} as a strict JSON schema (every key required, optional ones nullable), so that servers that
    enforce strict schemas (OpenAI) accept it; `actions` come from the caller (edit.edits.PLAN_ACTIONS)."""
    text = {"type": ["string", "null"]}
    change = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "action": {"type": "string", "enum": [str(a) for a in actions]},
            "description": {"type": "string"},
            "search": text, "replace": text, "content": text, "symbol": text,
            "overwrite": {"type": ["boolean", "null"]},
        },
        "additionalProperties": False,
    }
    change["required"] = list(change["properties"])  # type: ignore[index]
    return {"type": "object", "properties": {"changes": {"type": "array", "items": change}},
            "required": ["changes"], "additionalProperties": False}


def response_format(form: str | None, schema: dict[str, Any]) -> dict[str, Any] | None:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}}
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def text_format(form: str | None, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The same form as the Responses API's `text` parameter takes it."""
    if form == "json_schema":
        return {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": True}}
    if form == "json_object":
        return {"format": {"type": "json_object"}}
    return None


def refuses_response_format(status: int, message: str) -> bool:
    """A server's refusal of the response_format it was sent (not of the request as a whole)."""
    text = (message or "").lower()
    return status in _REFUSAL_STATUSES and ("response_format" in text or "text.format" in text)
