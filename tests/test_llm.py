"""The chat seam against a real HTTP server: retries, fatal errors, usage, streaming, redaction."""
from __future__ import annotations

import pytest

from code_assistant.model.chat import ModelError, ModelStalled, OpenAIChat
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


def test_a_server_silent_past_its_allowance_is_given_up_on_not_asked_again() -> None:
    with ScriptedServer([{"sleep": 3, "answer": "late"}, "never"]) as server:
        with pytest.raises(ModelStalled, match="--request-timeout") as info:
            _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}])
    assert len(server.chat_requests) == 1 and len(str(info.value).splitlines()) == 1
    assert str(info.value).startswith("Gave up waiting for the model server: it sent nothing for 1 s")


def test_a_404_from_a_base_url_without_v1_suggests_it() -> None:
    models = {"/v1/models": {"object": "list", "data": [{"id": "test-model"}]}}
    with ScriptedServer([{"status": 404, "message": "Not Found"}], info=models) as server:
        root = server.url.removesuffix("/v1")
        with pytest.raises(ModelError) as info:
            OpenAIChat("test-model", api_key="k", base_url=root).complete([{"role": "user", "content": "hi"}])
    assert info.value.exit_code == 2 and str(info.value).endswith(f"set OPENAI_BASE_URL={root}/v1")
    with ScriptedServer([{"status": 404, "message": "Not Found"}]) as server:  # no /v1 there either: no such advice
        with pytest.raises(ModelError, match="check OPENAI_MODEL and OPENAI_BASE_URL$"):
            OpenAIChat("m", api_key="k", base_url=server.url.removesuffix("/v1")).complete([{"role": "user",
                                                                                            "content": "hi"}])


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


def test_a_stream_that_stalls_mid_answer_is_given_up_on_once() -> None:
    with ScriptedServer([{"stall": 2.5, "answer": "x" * 40}, "never"]) as server:
        with pytest.raises(ModelStalled, match="--request-timeout"):
            _model(server, timeout=1.0).complete([{"role": "user", "content": "hi"}], on_token=[].append)
    assert len(server.chat_requests) == 1


def test_every_answer_is_streamed_and_shown_only_when_asked() -> None:
    with ScriptedServer(["a streamed answer nobody watches"]) as server:
        response = _model(server).complete([{"role": "user", "content": "hi"}])
    assert response.text == "a streamed answer nobody watches" and server.chat_requests[0]["stream"] is True


PROMPT = [{"role": "user", "content": "Explain this code.\n" + "def helper(value):\n    return value * 2\n" * 40}]


def test_a_server_reading_a_long_prompt_is_waited_for_at_the_speed_it_has_shown() -> None:
    """The server's timings say it reads 1,000 tokens a second; the second prompt is about 2,500 tokens: two and a
    half seconds of silence, past --request-timeout (1 s), and then the answer. One request each, no re-ask."""
    long_prompt = [{"role": "user", "content": PROMPT[0]["content"] * 6}]
    with ScriptedServer(["first", "second"], prompt_speed=1000, timings=True) as server:
        model = _model(server, timeout=1.0)
        model.complete(PROMPT)
        assert model.pace is not None and model.pace.tokens_per_s == 1000
        assert model.pace.source == "as the server's timings showed"
        assert model.complete(long_prompt).text == "second"
    assert len(server.chat_requests) == 2


def test_without_timings_the_previous_answers_start_sets_the_pace_and_before_any_a_slow_one_is_assumed() -> None:
    """A local server that sends no timings and has answered nothing yet is given the time a slow CPU would need;
    once it has answered, the time to its first token says how fast it reads."""
    with ScriptedServer(["first", "second"], prompt_speed=300) as server:
        model = _model(server, timeout=1.0)
        assert model.complete(PROMPT).text == "first"  # ~420 tokens: 1.4 s of silence, waited for
        assert model.pace is not None and model.pace.source == "as the previous answer showed"
        assert 150 < model.pace.tokens_per_s < 320  # type: ignore[operator]
        assert model.complete(PROMPT).text == "second"
    assert len(server.chat_requests) == 2


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
