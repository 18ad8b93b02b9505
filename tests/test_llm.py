"""The chat seam against a real HTTP server: retries, fatal errors, usage, streaming, redaction."""
from __future__ import annotations

import pytest

from code_assistant.model.chat import ModelError, OpenAIChat
from tests.scripted_server import ScriptedServer

NO_SLEEP: list[float] = []


def _model(server: ScriptedServer, **kwargs: object) -> OpenAIChat:
    return OpenAIChat("test-model", api_key="k", base_url=server.url, sleep=NO_SLEEP.append, **kwargs)  # type: ignore[arg-type]


def test_answer_and_usage_are_returned() -> None:
    with ScriptedServer(["hello"]) as server:
        model = _model(server)
        response = model.complete([{"role": "user", "content": "hi"}])
    assert response.text == "hello"
    served = server.usages[0]
    assert (model.usage.calls, model.usage.prompt_tokens, model.usage.completion_tokens) == (
        1, served["prompt_tokens"], served["completion_tokens"])
    assert server.chat_requests[0]["model"] == "test-model"


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_errors_are_retried_with_backoff(status: int) -> None:
    with ScriptedServer([{"status": status}, {"status": status}, "ok"]) as server:
        response = _model(server).complete([{"role": "user", "content": "hi"}])
    assert response.text == "ok"
    assert len(server.chat_requests) == 3


def test_retries_are_bounded() -> None:
    with ScriptedServer([{"status": 503}] * 10) as server:
        with pytest.raises(ModelError, match="after 4 tries|503"):
            _model(server, max_retries=3).complete([{"role": "user", "content": "hi"}])
    assert len(server.chat_requests) == 4


@pytest.mark.parametrize("status, words", [(401, "API key"), (403, "refused"), (404, "not found")])
def test_auth_and_missing_model_end_at_once(status: int, words: str) -> None:
    with ScriptedServer([{"status": status, "message": "nope"}, "never"]) as server:
        with pytest.raises(ModelError, match=words) as info:
            _model(server).complete([{"role": "user", "content": "hi"}])
    assert info.value.exit_code == 2
    assert len(server.chat_requests) == 1


def test_timeout_is_retried() -> None:
    with ScriptedServer([{"sleep": 3, "answer": "late"}, "fast"]) as server:
        response = _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}])
    assert response.text == "fast"


def test_streaming_passes_tokens_and_collects_usage() -> None:
    pieces: list[str] = []
    with ScriptedServer(["a streamed answer that is longer than one piece"]) as server:
        model = _model(server)
        response = model.complete([{"role": "user", "content": "hi"}], on_token=pieces.append)
    assert "".join(pieces) == response.text == "a streamed answer that is longer than one piece"
    assert model.usage.completion_tokens == server.usages[0]["completion_tokens"] and not model.usage.estimated


def test_secrets_never_reach_the_server() -> None:
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    with ScriptedServer(["ok"]) as server:
        _model(server).complete([{"role": "user", "content": f'OPENAI_API_KEY = "{secret}"\nfix it'}])
    assert secret not in server.all_text_sent()
    assert "REDACTED" in server.all_text_sent()


# ----- slow local servers ---------------------------------------------------------------------------------------
def test_a_slow_stream_times_out_on_the_gap_between_tokens_not_on_the_whole_answer() -> None:
    text = "a slow model on a CPU sends its answer a few tokens at a time"  # 4 pieces, 0.4 s apart: 1.6 s in all
    with ScriptedServer([{"gap": 0.4, "answer": text}]) as server:
        response = _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}], on_token=[].append)
    assert response.text == text and len(server.chat_requests) == 1


def test_a_stalled_stream_is_asked_once_more_then_one_line() -> None:
    with ScriptedServer([{"stall": 2.5, "answer": "x" * 40}, "fine"]) as server:
        pieces: list[str] = []
        response = _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}], on_token=pieces.append)
    assert response.text == "fine" and len(server.chat_requests) == 2
    with ScriptedServer([{"stall": 2.5, "answer": "x" * 40}] * 2 + ["never"]) as server:
        with pytest.raises(ModelError, match="--request-timeout") as info:
            _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}], on_token=[].append)
    assert len(server.chat_requests) == 2 and len(str(info.value).splitlines()) == 1


def test_answers_are_capped_at_the_windows_reserve_on_compatible_servers() -> None:
    from code_assistant.model.window import ContextWindow
    with ScriptedServer(["ok"]) as server:
        _model(server, window=ContextWindow(2048, "test")).complete([{"role": "user", "content": "hi"}])
    assert server.chat_requests[0]["max_tokens"] == 256


def test_a_stream_without_usage_is_counted_here_and_marked() -> None:
    with ScriptedServer(["an answer without counts"], stream_usage=False) as server:
        model = _model(server)
        model.complete([{"role": "user", "content": "hi"}], on_token=[].append)
    assert model.usage.estimated and model.usage.completion_tokens > 0 and model.usage.prompt_tokens > 0


def test_a_local_server_has_no_price() -> None:
    from code_assistant.model.prices import estimate_cost, is_local
    assert all(is_local(u) for u in ("http://localhost:11434/v1", "http://127.0.0.1:8080/v1", "http://[::1]:1234/v1"))
    assert not is_local("https://api.together.xyz/v1") and not is_local(None)
    assert estimate_cost("gpt-4o", 1000, 1000, "http://127.0.0.1:8000/v1") is None
    assert estimate_cost("gpt-4o", 1000, 1000) == 0.0125 and estimate_cost("llama3", 1000, 1000) is None
