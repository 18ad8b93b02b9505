"""What a server's refusal says, in one line for the user: the error body's message, and what to check."""
from __future__ import annotations

from typing import Any

import openai

from code_assistant.model.server_reports import v1_hint


def error_body(exc: openai.APIError) -> Any:
    response = getattr(exc, "response", None)
    try:
        return response.json() if response is not None else {"error": exc.body}
    except Exception:  # noqa: BLE001 - a non-JSON error body is still an error
        return None


def error_detail(exc: openai.APIError) -> str:
    """The message of an error body: OpenAI's {"error": {"message"}}, or vLLM's {"object": "error", "message"}."""
    body = error_body(exc)
    error = body.get("error") if isinstance(body, dict) else None
    detail = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    if detail is None and isinstance(body, dict) and isinstance(body.get("message"), str):
        detail = body["message"]
    return str(detail or "")


def fatal_message(exc: openai.APIStatusError, base_url: str | None) -> str:
    """401, 403 and 404 end the run: what the server said, and what to check (a 404: the /v1 the URL may lack)."""
    where = base_url or "api.openai.com"
    detail = error_detail(exc).splitlines()[0][:300] if error_detail(exc) else ""
    suffix = f": {detail}" if detail else ""
    if exc.status_code == 401:
        return f"the model server at {where} rejected the API key (401 Unauthorized){suffix}; check OPENAI_API_KEY"
    if exc.status_code == 403:
        return f"the model server at {where} refused access (403 Forbidden){suffix}"
    if exc.status_code == 404:
        hint = v1_hint(base_url)
        return (f"the model or endpoint was not found at {where} (404){suffix}"
                f"{hint or '; check OPENAI_MODEL and OPENAI_BASE_URL'}")
    return f"the model server at {where} answered {exc.status_code}{suffix}"
