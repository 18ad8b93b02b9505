"""Context windows: read from the setting, the server, the catalogue or a refusal; every request sized to fit."""
from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from code_assistant import tokens
from code_assistant.model.chat import ContextOverflow, OpenAIChat
from code_assistant.model.fitting import clip_text, fit_history, message_tokens
from code_assistant.model.server_reports import (
    from_lmstudio,
    from_models,
    from_ollama_ps,
    from_ollama_show,
    from_props,
    resolve_window,
)
from code_assistant.model.window import DEFAULT_SOURCE, DEFAULT_WINDOW, ContextWindow, filled_window, window_limit
from tests.repos import (
    CALC_PY,
    ROOT,
    TEST_CALC_PY,
    _cli_env,
    answer,
    modify,
    python_repo,
    run_cli,
    run_cli_on_a_terminal,
    snapshot,
)
from tests.scripted_server import ScriptedServer, prompt_tokens

PYTEST = f"{sys.executable} -m pytest -q"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")


# ----- reading a window out of a refusal -------------------------------------------------------------------------
@pytest.mark.parametrize("message, window, prompt", [
    (("This model's maximum context length is 2048 tokens. However, you requested 3031 tokens (3031 in the messages, "
      "None in the completion). Please reduce the length of the messages or completion."), 2048, 3031),  # llama-cpp
    (("This model's maximum context length is 4096 tokens. However, you requested 4700 tokens (4600 in the messages, "
      "100 in the completion)."), 4096, 4600),  # vLLM
    (("This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
      "Please reduce the length of the messages."), 128000, 130512),  # OpenAI
    (("Trying to keep the first 5738 tokens when context the overflows. However, the model is loaded with context "
      "length of only 4096 tokens, which is not enough."), 4096, 5738),  # LM Studio
    ("Requested tokens (2478) exceed context window of 2048", 2048, 2478),  # llama-cpp-python's ValueError
])
def test_a_refusal_names_the_window_and_the_prompt(message: str, window: int, prompt: int) -> None:
    limit = window_limit(message)
    assert limit is not None and (limit.window, limit.prompt_tokens) == (window, prompt)


def test_llama_cpp_servers_error_object_and_unrelated_errors() -> None:
    body = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}
    assert window_limit(body["error"]["message"], body) is not None
    assert window_limit(body["error"]["message"], body).window == 4096  # type: ignore[union-attr]
    assert window_limit("Invalid API key") is None and window_limit("") is None


# ----- the window's arithmetic -----------------------------------------------------------------------------------
def test_room_keeps_the_answers_reserve_and_the_tokenizer_ratio() -> None:
    window = ContextWindow(2048, "test", ratio=1.25)
    assert window.reserve == 256
    assert window.prompt_room() == int((2048 - 256) / 1.25)
    assert ContextWindow(200_000, "t").reserve == 4096


def test_the_servers_counts_replace_the_assumed_ratio_and_a_cut_prompt_is_noticed() -> None:
    window = ContextWindow(8192, "test", ratio=1.3)
    assert window.observe(1000, 1170) is None
    assert window.measured and 1.17 < window.ratio < 1.25
    assert window.observe(50, 500) is None and window.ratio < 1.25, "short prompts are mostly template"
    warning = window.observe(6000, 2000)  # Ollama read a third of what was sent: it cut the prompt
    assert warning and "--context-window" in warning and window.tokens == 2000


# ----- fitting a conversation -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prompt", "answer", "cap", "estimated", "window"), [
    (1966, 82, 1024, False, 2048),     # llama-cpp-python: max_tokens shortened to n_ctx - prompt
    (3000, 1095, 1024 * 2, False, 4096),  # llama.cpp's server: a token short of its window
    (2050, 2046, 4096, False, 4096),   # Ollama (ollama/ollama#3839: num_ctx 4096)
    (1024, 1024, 1024, False, None),   # the answer's own cap, not the window
    (10_000, 2000, 4096, False, None),  # a gateway's own cap on answers: 12,000 is no window
    (6000, 2192, 4096, False, None),   # the window the request was sized for: nothing to learn
    (2556, 107, 1024, True, 2048),     # estimated at the assumed ratio 1.3, a third over a cl100k-like tokenizer
    (1650, 190, 1024, True, 2048),     # estimated a tenth under
    (1200, 950, 1024, True, None),     # an estimate near the cap: it may be the cap
])
def test_an_answer_cut_where_it_filled_the_servers_window_is_read_as_that_window(
        prompt: int, answer: int, cap: int, estimated: bool, window: int | None) -> None:
    assert filled_window(prompt=prompt, answer=answer, cap=cap, window=8192, estimated=estimated) == window


def test_an_answer_as_long_as_its_cap_was_cut_at_the_cap_whatever_count_a_gateway_recounted() -> None:
    """LiteLLM recounts a cut answer with its own tokenizer (230 of the 256 sent); beside a 1,046-token prompt the sum
    is a token short of 1,280, a llama.cpp window step. The answer that arrived is as long as the cap: no window."""
    assert filled_window(prompt=1046, answer=230, cap=256, window=2048, estimated=False) == 1280, "the counts alone"
    assert filled_window(prompt=1046, answer=230, cap=256, window=2048, estimated=False, received=262) is None
    assert filled_window(prompt=1966, answer=82, cap=1024, window=8192, estimated=False, received=80) == 2048


def test_an_estimated_cut_teaches_only_a_window_that_was_a_guess() -> None:
    reported = ContextWindow(8192, "GET /props")
    assert not reported.filled(prompt=2556, answer=107, cap=1024, estimated=True) and reported.tokens == 8192
    assert reported.filled(prompt=1966, answer=82, cap=1024, estimated=False)
    assert reported.describe() == "2048 tokens, from an answer cut off at the server's window"
    guessed = ContextWindow(DEFAULT_WINDOW, DEFAULT_SOURCE)
    assert guessed.filled(prompt=2556, answer=107, cap=1024, estimated=True) and guessed.tokens == 2048


def test_clip_keeps_start_and_end_within_budget() -> None:
    text = "\n".join(f"line {i}: " + "word " * 12 for i in range(400))
    clipped = clip_text(text, 300, "test output")
    assert tokens.count_tokens(clipped) <= 300
    assert clipped.startswith("line 0:") and clipped.rstrip().endswith("word") and "line 399" in clipped
    assert "left out to fit the model's context window" in clipped
    assert clip_text("short", 300) == "short"


def test_fit_history_drops_old_turns_keeps_the_task_and_alternation() -> None:
    big = "code line\n" * 400
    history = [{"role": "system", "content": "system prompt"}, {"role": "user", "content": "# Task\nfix add\n" + big}]
    for i in range(4):
        history += [{"role": "assistant", "content": f"answer {i}"}, {"role": "user", "content": f"fix {i}\n" + big}]
    fitted = fit_history(history, 1200)
    assert message_tokens(fitted) <= 1200
    assert fitted[0]["content"] == "system prompt" and fitted[1]["content"].startswith("# Task\nfix add")
    assert [m["role"] for m in fitted] == ["system", "user", "assistant", "user"]
    assert fitted[2]["content"] == "answer 3" and fitted[3]["content"].startswith("fix 3")
    assert fit_history(history[:2], 10**6) == history[:2]


# ----- what servers report ----------------------------------------------------------------------------------------
def test_server_reports_are_read() -> None:
    assert from_props({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}) == 4096
    assert from_models({"data": [{"id": "other"}, {"id": "m", "max_model_len": 32768}]}, "m") == 32768
    assert from_models({"data": [{"id": "x/y", "context_length": 65536}]}, "whatever") == 65536  # the only model
    assert from_models({"data": [{"id": "m", "object": "model"}]}, "m") is None  # llama-cpp-python, Ollama
    assert from_lmstudio({"data": [{"id": "m", "state": "loaded", "max_context_length": 32768,
                                    "loaded_context_length": 4096}]}, "m") == 4096
    shown = {"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": {"qwen2.context_length": 32768}}
    assert from_ollama_show(shown) == (8192, 32768) and from_ollama_show({"detail": "x"}) is None
    assert from_ollama_ps({"models": [{"name": "qwen2.5:7b", "context_length": 4096}]}, "qwen2.5:7b") == 4096


@pytest.mark.parametrize("info, window, source", [
    ({"/props": {"default_generation_settings": {"n_ctx": 3072}}}, 3072, "GET /props"),
    ({"/v1/models": {"data": [{"id": "local-model", "max_model_len": 16384}]}}, 16384, "GET /v1/models"),
    ({"/api/v0/models": {"data": [{"id": "local-model", "max_context_length": 8000}]}}, 8000, "GET /api/v0/models"),
    ({"/api/show": {"parameters": "num_ctx 12288", "model_info": {"llama.context_length": 131072}}}, 12288,
     "Ollama's num_ctx parameter"),
    ({"/api/show": {"model_info": {"llama.context_length": 131072}},
      "/api/ps": {"models": [{"name": "local-model", "context_length": 4096}]}}, 4096, "Ollama's GET /api/ps"),
    ({"/api/show": {"model_info": {"llama.context_length": 131072}}}, 2048, "Ollama's old default"),
    ({}, DEFAULT_WINDOW, "the default (nothing reported a window)"),
])
def test_the_window_is_asked_of_the_server(info: dict, window: int, source: str) -> None:
    with ScriptedServer(info=info) as server:
        resolved = resolve_window(None, server.url, "local-model")
    assert (resolved.tokens, resolved.source) == (window, source)


def test_the_setting_wins_and_known_models_need_no_server() -> None:
    with ScriptedServer(info={"/props": {"n_ctx": 3072}}) as server:
        assert resolve_window(5000, server.url, "m").tokens == 5000
    assert resolve_window(None, None, "gpt-4o").tokens == 128_000
    local = resolve_window(None, "http://127.0.0.1:9/v1", "gpt-4o")  # a server here runs its own model: not gpt-4o's
    assert local.tokens == DEFAULT_WINDOW and local.source.startswith("the default")


# ----- learning the window from a refusal -------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
def test_a_refusal_is_learned_at_once_and_the_next_request_fits(stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    """llama-cpp-python answers an over-long streamed request with a stream of no event and then drops the
    connection: asked again without streaming, on a new connection, it says why — the first time, with no retry and
    no warning. Every request is streamed, whether its tokens are shown (`stream`) or not."""
    long_text = "def f():\n    return 1\n" * 400
    with ScriptedServer(["ok"], context_window=2048, overflow="llama-cpp-python", stream_usage=False) as server:
        model = OpenAIChat("m", api_key="k", base_url=server.url, window=ContextWindow(8192, "default"),
                           sleep=pytest.fail)
        with pytest.raises(ContextOverflow, match="2048"):
            model.complete([{"role": "user", "content": long_text}], on_token=[].append if stream else None)
        assert model.window.describe() == "2048 tokens, from the server's refusal"
        sent = message_tokens([{"role": "user", "content": long_text}])
        assert model.window.measured and model.window.ratio >= prompt_tokens(server.chat_requests[0]) / sent
        short = clip_text(long_text, model.window.prompt_room() - 20)
        assert model.complete([{"role": "user", "content": short}]).text == "ok"
    refused = server.chat_requests[:-1]
    assert [r.get("stream", False) for r in refused] == [True, False]
    assert server.usages[-1]["prompt_tokens"] + server.chat_requests[-1]["max_tokens"] <= 2048
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("refusal", [
    {"status": 400, "message": "This model's maximum context length is 2048 tokens. However, you requested 3569 "
                               "tokens (2545 in the messages, 1024 in the completion). Please reduce the length of the "
                               "messages or completion."},
    {"status": 500, "message": "Requested tokens (2545) exceed context window of 2048"},
    {"dropped": True},
])
def test_llama_cpp_pythons_refusals_are_learned_without_a_retry(refusal: dict) -> None:
    """Its 400, its own words in a 500, or a stream broken off before any event (then asked once without streaming,
    which says why): none of them is a network failure to retry."""
    refused = [refusal] if "status" in refusal else [refusal, {"status": 400, "message": (
        "This model's maximum context length is 2048 tokens. However, you requested 3569 tokens (2545 in the "
        "messages, 1024 in the completion).")}]
    with ScriptedServer(refused) as server:
        model = OpenAIChat("m", api_key="k", base_url=server.url, window=ContextWindow(8192, "default"),
                           sleep=pytest.fail)
        with pytest.raises(ContextOverflow, match="2048"):
            model.complete([{"role": "user", "content": "def f():\n    return 1\n" * 400}])
    assert model.window.tokens == 2048 and len(server.chat_requests) == len(refused)


def test_a_network_failure_is_still_retried() -> None:
    """A connection closed without an answer, unstreamed: the network, not a refusal."""
    waits: list[float] = []
    with ScriptedServer([{"dropped": True}, {"dropped": True}, {"dropped": True}, "ok"]) as server:
        model = OpenAIChat("m", api_key="k", base_url=server.url, sleep=waits.append)
        assert model.complete([{"role": "user", "content": "hi"}]).text == "ok"
    assert [r.get("stream", False) for r in server.chat_requests] == [True, False, True, False]
    assert len(waits) == 1


def _big_repo(tmp_path: Path) -> Path:
    """calc.py with its bug, and a module of 120 functions: a plan request far over a 2,048-token window."""
    functions = "\n\n".join(f"def helper_{i}(value):\n    \"\"\"Scale value by {i}.\"\"\"\n    return value * {i}\n"
                            for i in range(120))
    return python_repo(tmp_path, {"calc.py": CALC_PY, "helpers.py": functions, "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})


def test_cli_learns_the_window_from_the_refusal_and_sends_nothing_over_it(tmp_path: Path) -> None:
    repo = _big_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)], context_window=2048) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
                        "--model", "local-model"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "context window 8192 tokens, from the default" in proc.stdout
    assert "[Window: 2048 tokens, from the server's refusal;" in proc.stdout
    first, second = server.chat_requests
    assert len(str(first)) > len(str(second)), "the request was built again, smaller"
    assert server.usages[0]["prompt_tokens"] + second["max_tokens"] <= 2048
    assert "def add(a, b)" in second["messages"][-1]["content"], "the context still shows the file to fix"


def test_ask_learns_the_window_from_the_refusal_as_a_run_does(tmp_path: Path) -> None:
    """--ask goes through the run's one exchange with the model: streamed on a terminal without its reasoning, the
    same line on a refusal, and the question asked once more with a context built again to fit, which is the context
    it reports."""
    repo = _big_repo(tmp_path)
    question, reply = "What do the functions in helpers.py return?", "<think>draft?</think>\nadd() is in calc.py:1."
    with ScriptedServer([reply], context_window=2048) as server:
        shown = run_cli_on_a_terminal(["--repo", str(repo), "--ask", question, "--model", "local-model"],
                                      server_url=server.url)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "[Window: 2048 tokens, from the server's refusal;" in shown.stdout
    assert "[Thinking...][Done thinking]" in shown.stdout and "draft" not in shown.stderr + shown.stdout
    assert "add() is in calc.py:1." in shown.stdout
    with ScriptedServer([reply], context_window=2048) as server:
        proc = run_cli(["--repo", str(repo), "--ask", question, "--model", "local-model", "--json"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = server.chat_requests
    assert len(str(first)) > len(str(second)), "the question was asked again, smaller"
    assert server.usages[0]["prompt_tokens"] + second["max_tokens"] <= 2048
    result = json.loads(proc.stdout)
    assert result["answer"] == "add() is in calc.py:1."
    assert result["files"] and all(path in second["messages"][-1]["content"] for path in result["files"]), \
        "the files reported are those of the request that was answered"


def _context_lines(stdout: str) -> list[tuple[int, int]]:
    return [(int(m.group(1)), int(m.group(2))) for m in re.finditer(r"^\[Context: (\d+) files, (\d+) tokens\]$", stdout,
                                                                      re.MULTILINE)]


def test_a_run_against_llama_cpp_python_learns_its_window_at_once(tmp_path: Path) -> None:
    """Issue 46's case: llama-cpp-python serving a 2,048-token window, no --context-window, the first request sized
    for the default 8,192 (with the tools' schema). Its refusal — a stream of no event, then the connection dropped —
    is learned the first time: one line, no retry, no warning; the request is built again without the tools (no
    room for them), the Context line says what it shows, and it fits."""
    repo = _big_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)], context_window=2048, overflow="llama-cpp-python",
                        stream_usage=False) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
                        "--model", "local-model"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "context window 8192 tokens, from the default" in proc.stdout
    assert proc.stdout.count("[Window: 2048 tokens, from the server's refusal;") == 1
    assert "warning:" not in proc.stderr and "retry" not in proc.stderr, proc.stderr
    refused, asked_why, answered = server.chat_requests
    assert refused["stream"] and refused.get("tools") and not asked_why.get("stream") and answered["stream"]
    assert "tools" not in answered, "no room for the tools' schema in 2,048 tokens"
    assert prompt_tokens(answered) + answered["max_tokens"] <= 2048
    first, sent = _context_lines(proc.stdout)
    assert sent[1] < first[1], "the Context line said again, for the smaller request that was answered"
    assert proc.stdout.index("[Window: ") < proc.stdout.index(f"[Context: {sent[0]} files, {sent[1]} tokens]",
                                                                proc.stdout.index("[Context: ") + 1)


def test_the_window_learned_is_remembered_for_the_next_run_against_the_same_server(tmp_path: Path) -> None:
    """Issue 61: each run against the same llama-cpp-python spent its first request on a refusal. The first run's
    refusal is learned, said with the setting that spares it, and remembered (the state folder's windows.json); the
    next run against the same server and model starts within the window: no request refused. A server that answers
    GET /models otherwise (restarted with another model) is asked again from the default."""
    repo = _big_repo(tmp_path)
    args = ["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
            "--model", "local-model", "--no-reproduce"]
    models = {"/v1/models": {"object": "list", "data": [{"id": "smollm2.gguf", "object": "model"}]}}
    with ScriptedServer([answer(FIX_ADD), answer(FIX_ADD), answer(FIX_ADD)], context_window=2048,
                        overflow="llama-cpp-python", stream_usage=False, info=models) as server:
        first = run_cli(args, server_url=server.url)
        assert first.returncode == 0, first.stdout + first.stderr
        assert ("[Window: 2048 tokens, from the server's refusal; remembered for this server and model "
                "(--context-window 2048 sets it)]") in first.stdout
        learned = len(server.chat_requests)
        assert learned == 3, "refused, asked why unstreamed, answered"
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)

        second = run_cli(args, server_url=server.url)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "context window 2048 tokens, from remembered: the server's refusal, " in second.stdout
        assert "[Window: " not in second.stdout
        asked = server.chat_requests[learned:]
        assert len(asked) == 1 and asked[0]["stream"], "one request, answered: none refused"
        assert prompt_tokens(asked[0]) + asked[0]["max_tokens"] <= 2048
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)

        server.info["/v1/models"] = {"object": "list", "data": [{"id": "qwen2.5-coder.gguf", "object": "model"}]}
        third = run_cli(args, server_url=server.url)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "context window 8192 tokens, from the default" in third.stdout, "another model served: learned again"


def test_context_only_reports_the_room_a_run_will_really_have(tmp_path: Path) -> None:
    """Issue 61: --context-only promised "631 tokens of 12000" where the run then showed 226 tokens in a 2,048-token
    window. Its budget is now what a run's first request leaves for code in the window the run starts with, when that
    is known without asking the server (--context-window, or the window remembered for the server and model), and the
    line says which; without either it is --context-tokens, and says that the model's window may leave less."""
    repo = _big_repo(tmp_path)
    task = ["--task", "What do the helpers in helpers.py return?", "--context-only", "--model", "local-model"]
    unknown = run_cli(["--repo", str(repo), *task], server_url="http://127.0.0.1:9/v1")
    assert unknown.returncode == 0, unknown.stdout + unknown.stderr
    assert re.search(r"^Total: \d+ tokens of 12000 \(--context-tokens; the model's window, not asked for, may leave "
                     r"less\)$", unknown.stdout, re.MULTILINE), unknown.stdout
    with ScriptedServer([answer(FIX_ADD)], context_window=2048, overflow="llama-cpp-python",
                        stream_usage=False) as server:
        run = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
                       "--model", "local-model", "--no-reproduce"], server_url=server.url)
        assert run.returncode == 0, run.stdout + run.stderr
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
        remembered = run_cli(["--repo", str(repo), *task], server_url=server.url)
        set_by_hand = run_cli(["--repo", str(repo), *task, "--context-window", "2048"], server_url=server.url)
    for proc, source in ((remembered, "remembered: the server's refusal, "), (set_by_hand, "--context-window)")):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        total = re.search(r"^Total: (\d+) tokens of (\d+) \(what a run's first request leaves for code in the "
                          r"2048-token window, from (.+)$", proc.stdout, re.MULTILINE)
        assert total is not None and total.group(3).startswith(source), proc.stdout
        shown, budget = int(total.group(1)), int(total.group(2))
        assert shown <= budget < 2048 * 0.6, "the room of a request in 2,048 tokens, after the prompt and the answer"


def test_an_answer_llama_cpp_python_cut_at_its_window_is_read_as_the_window_and_asked_again_at_once(
        tmp_path: Path) -> None:
    """Issue 53's case: no window set, llama-cpp-python serving 2,048 tokens and no usage in its streams. The plan
    request, sized for the default 8,192, fits under the server's window, but its answer cap does not: the server cuts
    the answer where the window ends, with finish_reason "length" and no word. That is read as the window, said in one
    line naming the cut (not the answer limit), and the request asked again at once within it; green."""
    functions = "\n\n".join(f"def helper_{i}(value):\n    \"\"\"Scale value by {i}.\"\"\"\n    return value * {i}\n"
                             for i in range(40))
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "helpers.py": functions, "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    rambling = "Let me look at every helper in turn before I answer. " * 150  # longer than the window leaves
    with ScriptedServer([rambling, answer(FIX_ADD)], context_window=2048, overflow="llama-cpp-python",
                        stream_usage=False) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
                        "--model", "local-model"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "context window 8192 tokens, from the default" in proc.stdout
    assert proc.stdout.count("[Window: 2048 tokens, from an answer cut off at the server's window;") == 1
    assert "answer limit" not in proc.stdout and "could not be read" not in proc.stdout
    cut, asked_again = server.chat_requests
    assert prompt_tokens(cut) < 2048 < prompt_tokens(cut) + cut["max_tokens"], "the prompt fit; its answer did not"
    assert server.usages[0]["total_tokens"] == 2048 and server.usages[0]["completion_tokens"] < cut["max_tokens"]
    assert prompt_tokens(asked_again) + asked_again["max_tokens"] <= 2048


def test_a_session_keeps_the_window_it_learned(tmp_path: Path) -> None:
    """The model is kept between a session's tasks, and the window with it: the second task's request fits at once."""
    repo = _big_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD), "add() is in calc.py:1."], context_window=2048,
                        overflow="llama-cpp-python") as server:
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "chat", "--repo", str(repo), "--test-command",
                               PYTEST, "--no-reproduce", "--model", "local-model"],
                              input="Fix add() so the tests pass\n/ask What do the functions in helpers.py return?\n",
                              capture_output=True, text=True, env=_cli_env(server.url, "k", None), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("[Window: 2048 tokens, from the server's refusal;") == 1
    assert "warning:" not in proc.stderr, proc.stderr
    assert [r.get("stream", False) for r in server.chat_requests] == [True, False, True, True]
    assert all(prompt_tokens(body) + body["max_tokens"] <= 2048 for body in server.chat_requests[2:])


def test_cli_with_the_window_set_sends_nothing_over_it(tmp_path: Path) -> None:
    repo = _big_repo(tmp_path)
    wrong = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a * b")
    right = modify("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a + b")
    with ScriptedServer([answer(wrong), answer(right)], context_window=2048) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--test-command", PYTEST,
                        "--model", "local-model"], server_url=server.url, extra_env={"OPENAI_CONTEXT_WINDOW": "2048"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.chat_requests) == len(server.usages) == 2, "nothing refused: plan and fix both fit"
    for usage, request in zip(server.usages, server.chat_requests):
        assert usage["prompt_tokens"] + request["max_tokens"] <= 2048
    assert "return a * b" in server.chat_requests[1]["messages"][-1]["content"], "the fix shows the current file"


def test_a_window_too_small_for_any_request_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--context-window", "600"],
                       server_url=server.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--context-window" in lines[0] and "600 tokens" in lines[0], proc.stderr
    assert server.chat_requests == [] and snapshot(repo) == before


def test_an_answer_cut_at_the_windows_reserve_is_asked_again_saying_so(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    long_plan = answer(*[modify("calc.py", f"# line {i} " + "x" * 60, "y") for i in range(20)])  # over 256 tokens
    with ScriptedServer([long_plan, answer(FIX_ADD)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--context-window", "2048"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reask = server.chat_requests[1]["messages"][-1]["content"]
    assert "cut off at the limit for an answer (256 tokens)" in reask and "fewer or shorter changes" in reask
