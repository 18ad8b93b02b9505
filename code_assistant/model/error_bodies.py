"""What an error answer's body says, in every shape providers document: OpenAI's object {"error": {"message", "type",
"code"}}, vLLM's flat {"object": "error", "message"}, Gemini's array [{"error": {"code", "message", "status"}}]
at its OpenAI endpoint
(https://github.com/manthanabc/paws/issues/103), a bare {"error": "..."} (LM Studio), and plain text (a
proxy's "Internal Server Error"). Pure: the body is given, already parsed where it was JSON."""
from __future__ import annotations

from typing import Any


def _error(body: Any) -> Any:
    """The error object of a body: the first element's of an array (Gemini), else the body's own."""
    if isinstance(body, list):
        body = next((item for item in body if isinstance(item, dict)), None)
    return body


def body_message(body: Any) -> str:
    """The message of an error body, whatever its shape ("" when it has none)."""
    if isinstance(body, str):
        return body.strip()
    body = _error(body)
    error = body.get("error") if isinstance(body, dict) else None
    detail = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    if detail is None and isinstance(body, dict):
        detail = next((body[k] for k in ("message", "detail") if isinstance(body.get(k), str)), None)
    return str(detail or "")


def body_codes(body: Any) -> set[str]:
    """The machine words an error body names: OpenAI's `type` and `code`, Gemini's `status`, lower-cased."""
    body = _error(body)
    error = body.get("error") if isinstance(body, dict) else None
    where = [error, body] if isinstance(error, dict) else [body]
    return {str(part[key]).lower() for part in where if isinstance(part, dict)
            for key in ("type", "code", "status") if isinstance(part.get(key), str | int) and part.get(key) != ""}
