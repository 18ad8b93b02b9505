"""A provider's limits as it sends them (tests/provider_emulator.py, each with its source): a rate limit is asked
again after the wait the server names (retry-after-ms, retry-after, OpenAI's x-ratelimit-reset-*), never longer than
MAX_WAIT_S, and the waiting line says how long and why in full; an account out of quota, a key refused or a key a
gateway cannot check ends the run at once with one line that names the cause (the key: before any test runs); a
window overflow that a gateway passes on as an empty answer is asked about once unstreamed, and learned."""
from __future__ import annotations

import time
from email.utils import formatdate
from pathlib import Path

import pytest

from code_assistant.model.chat import ModelError, OpenAIChat
from code_assistant.model.retry import MAX_WAIT_S, Pause, duration_s, lasting_cause, server_pause
from tests.provider_emulator import (
    CHAT,
    OPENAI_QUOTA,
    PLAIN_500,
    ProviderEmulator,
    azure_rate_limit,
    openai_rate_limit,
)
from tests.repos import CALC_PY, PYTEST, TEST_CALC_PY, answer, modify, python_repo, run_cli, snapshot

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
PROMPT = [{"role": "user", "content": "Fix add() in calc.py."}]


# ----- the wait a server names ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("headers", "pause"), [
    ({"retry-after-ms": "3000", "retry-after": "3"}, Pause(3.0, "retry-after-ms", "3000")),
    ({"Retry-After": "30"}, Pause(30.0, "retry-after", "30")),
    ({"x-ratelimit-reset-requests": "120ms", "x-ratelimit-reset-tokens": "6m0s"},
     Pause(360.0, "x-ratelimit-reset-tokens", "6m0s")),
    ({"x-ratelimit-reset-tokens": "644ms"}, Pause(0.644, "x-ratelimit-reset-tokens", "644ms")),
    ({"x-ratelimit-reset-tokens": "7"}, Pause(7.0, "x-ratelimit-reset-tokens", "7")),  # Azure: whole seconds
    ({"retry-after": "soon"}, None),
    ({"content-type": "application/json"}, None),
])
def test_the_wait_is_read_from_the_headers_each_provider_sends(headers: dict[str, str], pause: Pause | None) -> None:
    assert server_pause(headers) == pause


def test_a_retry_after_date_is_the_time_until_it() -> None:
    now = time.time()
    pause = server_pause({"retry-after": formatdate(now + 20, usegmt=True)}, now=now)
    assert pause is not None and 19 <= pause.seconds <= 20


@pytest.mark.parametrize(("text", "seconds"), [("1h2m3.5s", 3723.5), ("9.816s", 9.816), ("12ms", 0.012),
                                                ("6m", 360.0), ("1 s", None), ("", None)])
def test_openais_reset_durations(text: str, seconds: float | None) -> None:
    assert duration_s(text) == (pytest.approx(seconds) if seconds is not None else None)


def _chat(emulator: ProviderEmulator, slept: list[float]) -> OpenAIChat:
    return OpenAIChat(emulator.profile.model, api_key="k", base_url=emulator.url, sleep=slept.append)


@pytest.mark.parametrize(("refusal", "wait", "header"), [
    (azure_rate_limit(3), 3.0, "retry-after-ms: 3000"),
    (azure_rate_limit(30), 30.0, "retry-after-ms: 30000"),
    (openai_rate_limit("6.596s"), 6.596, "x-ratelimit-reset-tokens: 6.596s"),
])
def test_a_rate_limit_is_asked_again_once_after_the_wait_the_server_names(refusal, wait: float, header: str) -> None:
    slept: list[float] = []
    said: list[str] = []
    with ProviderEmulator("anthropic-claude-sonnet-4-5", [FIX_ADD], ahead=[refusal]) as emulator:
        response = _chat(emulator, slept).complete(PROMPT, on_wait=said.append)
    assert response.text == FIX_ADD and len(emulator.refused) == 1 and slept == [pytest.approx(wait)]
    waiting, asked = said
    message = " ".join(refusal.body["error"]["message"].split())
    assert waiting == f"the server answered 429: {message}; asking again in {wait:.1f} s, as the server's {header} " \
                      "asks (retry 1/3)", "the server's words in full, the wait and where it came from"
    assert asked == "asked again (retry 1/3), waiting for the first token"


def test_a_wait_longer_than_a_run_waits_ends_it_at_once_saying_how_long() -> None:
    """Azure has asked for a day (https://github.com/jasonacox/TinyLLM/issues/17): not worth three tries."""
    slept: list[float] = []
    with ProviderEmulator("anthropic-claude-sonnet-4-5", [FIX_ADD], ahead=[azure_rate_limit(86400)]) as emulator, \
            pytest.raises(ModelError) as raised:
        _chat(emulator, slept).complete(PROMPT)
    assert slept == [] and len(emulator.refused) == 1
    assert f"asks to wait 86400.0 s, as the server's retry-after-ms: 86400000 asks, longer than the " \
           f"{MAX_WAIT_S:.0f} s a run waits" in str(raised.value)
    assert "Please retry after 86400 seconds" in str(raised.value)


def test_a_plain_text_500_is_retried_with_backoff_and_said_as_the_server_said_it() -> None:
    slept: list[float] = []
    said: list[str] = []
    with ProviderEmulator("vllm-qwen2.5-coder", [FIX_ADD], ahead=[PLAIN_500, PLAIN_500]) as emulator:
        response = _chat(emulator, slept).complete(PROMPT, on_wait=said.append)
    assert response.text == FIX_ADD and len(slept) == 2 and slept[1] > slept[0], "no header: exponential"
    assert said[0].startswith("the server answered 500: Internal Server Error; asking again in ")


@pytest.mark.parametrize(("status", "body", "cause"), [
    (429, OPENAI_QUOTA.body, "the account's quota is used up"),
    # https://github.com/ChatGPTNextWeb/NextChat/issues/1792: the same, with code null
    (429, {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                     "type": "insufficient_quota", "param": None, "code": None}}, "the account's quota is used up"),
    # https://github.com/TheR1D/shell_gpt/issues/653
    (429, {"error": {"message": "Request too large for gpt-4o in organization org-78asdf87asdf9aaa8976 on tokens per "
                                "min (TPM): Limit 30000, Requested 31538. The input or output tokens must be reduced "
                                "in order to run successfully.", "type": "tokens", "param": None,
                     "code": "rate_limit_exceeded"}}, "larger than the account's per-minute token limit"),
    # https://github.com/google-gemini/gemini-cli/issues/8437: Gemini's per-minute limit, in a quota's words
    (429, {"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and billing "
                     "details. For more information on this error, head to: "
                     "https://ai.google.dev/gemini-api/docs/rate-limits.", "status": "RESOURCE_EXHAUSTED"}}, None),
    (429, openai_rate_limit("1s").body, None),
    (429, azure_rate_limit(3).body, None),
    (500, "Internal Server Error", None),
])
def test_which_refusals_no_wait_will_change(status: int, body: object, cause: str | None) -> None:
    found = lasting_cause(status, body)
    assert (found is None) if cause is None else (found is not None and cause in found)


# ----- through the command line ---------------------------------------------------------------------------------------
def _run(repo: Path, emulator: ProviderEmulator) -> object:
    return run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--model",
                    emulator.profile.model], server_url=emulator.url)


def test_a_run_out_of_quota_stops_at_the_first_refusal_with_one_line_naming_it(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ProviderEmulator("openai-gpt-5-mini", [FIX_ADD], ahead=[OPENAI_QUOTA]) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(emulator.bodies(CHAT)) == 1, "not retried"
    [line] = proc.stderr.strip().splitlines()
    assert "the account's quota is used up (429: You exceeded your current quota" in line, line
    assert "retry" not in proc.stdout + proc.stderr and snapshot(repo) == before


def test_a_run_waits_as_long_as_the_server_asks_and_goes_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ProviderEmulator("azure-gpt-5-mini", [FIX_ADD], ahead=[azure_rate_limit(2)]) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chat = [t for r, t in zip([r for r in emulator.requests if "body" in r], emulator.times, strict=True)
            if r["path"].endswith("/chat/completions")]
    assert len(chat) >= 2 and chat[1] - chat[0] >= 2.0, "the server's 2 s, not the 1 s backoff"
    assert "Please retry after 2 seconds. Please go here: https://aka.ms/oai/quotaincrease" in proc.stderr


def test_a_key_a_gateway_cannot_check_is_named_at_the_first_contact_before_any_test_runs(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ProviderEmulator("litellm-no-db", [FIX_ADD]) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "cannot check the API key: without a database LiteLLM takes only its master key (400 on GET /models: No " \
           "connected db.); set OPENAI_API_KEY to the master key" in line, line
    assert "[Baseline" not in proc.stdout and emulator.bodies(CHAT) == [] and snapshot(repo) == before


# ----- an overflow that arrives as an empty answer ----------------------------------------------------------------------
def test_an_empty_answer_near_the_window_is_asked_once_unstreamed_and_the_window_learned() -> None:
    """LiteLLM in front of llama-cpp-python: the dropped stream arrives as a 200 with nothing in it; asked once without
    streaming, the proxy names the window, the caller builds a smaller request and it is answered."""
    from code_assistant.model.records import ContextOverflow
    from code_assistant.model.window import DEFAULT_SOURCE, DEFAULT_WINDOW, ContextWindow

    long = [{"role": "user", "content": "Fix add() in calc.py. " + "def f(): return 1\n" * 700}]
    with ProviderEmulator("litellm-llama-cpp-python", [FIX_ADD]) as emulator:
        chat = OpenAIChat("smollm2", api_key="k", base_url=emulator.url, sleep=lambda s: None,
                          window=ContextWindow(DEFAULT_WINDOW, DEFAULT_SOURCE))
        with pytest.raises(ContextOverflow) as raised:
            chat.complete(long)
        assert (chat.window.tokens, chat.window.source) == (4096, "the server's refusal")
        assert "context window of 4096 tokens" in str(raised.value)
        streamed, unstreamed = emulator.bodies(CHAT)
        assert streamed["stream"] is True and "stream" not in unstreamed or unstreamed["stream"] is False
        response = chat.complete(PROMPT)
    assert response.text == FIX_ADD and len(emulator.bodies(CHAT)) == 3


def test_an_empty_answer_far_from_a_reported_window_is_not_asked_again() -> None:
    from code_assistant.model.window import ContextWindow

    with ProviderEmulator("anthropic-claude-sonnet-4-5", [""]) as emulator:
        chat = OpenAIChat(emulator.profile.model, api_key="k", base_url=emulator.url, sleep=lambda s: None,
                          window=ContextWindow(200_000, "the catalogue"))
        response = chat.complete(PROMPT)
    assert response.text == "" and len(emulator.bodies(CHAT)) == 1


def test_a_run_through_a_gateway_that_empties_an_overflow_learns_the_window_and_goes_green(tmp_path: Path) -> None:
    helpers = "".join(f"\n\ndef helper_{i}(a, b):\n    \"\"\"Add helper number {i}.\"\"\"\n    return add(a, b) + {i}\n"
                      for i in range(250))
    # the helpers in a module of their own, whose outline takes the first request over the gateway's window: beside
    # add() in calc.py, they would be shown by the excerpt of add() its failing test names, a few tokens
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "helpers.py": "from calc import add\n" + helpers,
                                  "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    # the first request over the gateway's 4,096 tokens and under the default 8,192
    task = "fix add so that it returns the sum. " + "The helpers rely on add being right; keep each as it is. " * 80
    with ProviderEmulator("litellm-llama-cpp-python", [FIX_ADD]) as emulator:
        proc = run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, "--no-reproduce", "--model",
                        "smollm2"], server_url=emulator.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Window: 4096 tokens, from the server's refusal; remembered for this server and model" in proc.stdout \
        and "empty" not in proc.stdout, proc.stdout
    streamed, unstreamed, answered = emulator.bodies(CHAT)
    assert (streamed.get("stream"), unstreamed.get("stream"), answered.get("stream")) == (True, None, True)
    assert emulator.requested(answered) <= 4096 < emulator.requested(streamed)


def test_an_answer_cut_off_is_said_to_be_cut_at_the_limit_sent_with_the_servers_recount_beside_it(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    long_plan = answer(*[modify("calc.py", f"# line {i} " + "x" * 60, "y") for i in range(20)])  # over 256 tokens
    with ProviderEmulator("litellm-llama-cpp-python", [long_plan, FIX_ADD]) as emulator:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--context-window", "2048", "--model", "smollm2"], server_url=emulator.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Window:" not in proc.stdout, "an answer as long as its cap teaches no smaller window, whatever the recount"
    first, again = emulator.bodies(CHAT)
    reask = again["messages"][-1]["content"]
    assert f"cut off at the limit for an answer ({first['max_tokens']} tokens; the server counted " \
           f"{round(first['max_tokens'] * 0.9)}), so it is incomplete" in reask, reask
