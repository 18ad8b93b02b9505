"""A server's usage numbers are evidence, not orders: fixed, estimated or cache-shortened prompt counts never abort a
run; a prompt the server really cut is still noticed, and a refusal that names the window still decides."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from code_assistant.model.chat import OpenAIChat
from code_assistant.model.fitting import message_tokens
from code_assistant.model.usage import SentPrompts, reported_prompt, shared_tokens
from code_assistant.model.window import MIN_USEFUL_ROOM, RATIO_MARGIN, ContextWindow
from tests.repos import CALC_PY, TEST_CALC_PY, answer, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer, prompt_tokens

PYTEST = f"{sys.executable} -m pytest -q"
TASK = "Fix add() so the tests pass"
# A wrong guess, a second wrong guess, then the fix: green on the third iteration.
ADD = "def add(a, b):\n    return a {} b"
THREE_ROUNDS = [answer(modify("calc.py", ADD.format("-"), ADD.format("*"))),
                answer(modify("calc.py", ADD.format("*"), ADD.format("**"))),
                answer(modify("calc.py", ADD.format("**"), ADD.format("+")))]


def _run(repo: Path, server: ScriptedServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["--repo", str(repo), "--task", TASK, "--test-command", PYTEST, "--model", "local-model", *extra],
                   server_url=server.url)


def _big_repo(tmp_path: Path) -> Path:
    """calc.py with its bug, and eight modules built on add(): a plan request far over a 2,048-token window."""
    files = {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY,
             "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}
    for k in range(8):
        body = "\n\n".join(f"def add_{k}_{i}(a, b):\n    \"\"\"add() of a and b, plus {i}.\"\"\"\n"
                             f"    return add(a, b) + {i}\n" for i in range(25))
        files[f"adders_{k}.py"] = f"from calc import add\n\n\n{body}"
    return python_repo(tmp_path, files)


def _green_in_three(proc: subprocess.CompletedProcess[str], repo: Path) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Tests passed on iteration 3]" in proc.stdout
    assert "return a + b" in (repo / "calc.py").read_text()


def test_a_server_reporting_a_fixed_prompt_count_runs_a_three_iteration_fix_to_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(THREE_ROUNDS, fixed_prompt_tokens=100) as server:
        proc = _run(repo, server)
    _green_in_three(proc, repo)
    assert [u["prompt_tokens"] for u in server.usages] == [100, 100, 100]
    warnings = [line for line in proc.stderr.splitlines() if "100" in line and "prompt" in line]
    assert len(warnings) == 1, proc.stderr  # said once, naming the server's number and ours
    assert "context window" in warnings[0] and "8192" in warnings[0], warnings[0]
    sizes = [len(str(r["messages"])) for r in server.chat_requests]
    assert sizes == sorted(sizes), "no request was cut down to a window the server never had"


@pytest.mark.parametrize("cache", ["uncounted", "cached_tokens"])
def test_a_caching_server_counting_only_new_tokens_runs_a_three_iteration_fix_to_green(tmp_path: Path,
                                                                                      cache: str) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(THREE_ROUNDS, cache=cache) as server:
        proc = _run(repo, server)
    _green_in_three(proc, repo)
    sent = [prompt_tokens(body) for body in server.chat_requests]
    reported = [u["prompt_tokens"] for u in server.usages]
    assert reported[0] == sent[0] and all(r < n * 0.7 for r, n in zip(reported[1:], sent[1:])), \
        "the fix requests were mostly cached and counted without their cached start"
    assert "warning:" not in proc.stderr and "cut" not in proc.stderr, proc.stderr


def test_a_prompt_the_server_cut_silently_is_warned_about_and_the_next_request_fits(tmp_path: Path) -> None:
    """Ollama's way: the first request is over its real window of 2,048 tokens; it reads what fits, says nothing. Its
    answer, to a prompt the model did not see whole, is set aside and the request asked again, smaller."""
    repo = _big_repo(tmp_path)
    right = answer(modify("calc.py", ADD.format("*"), ADD.format("+")))
    with ScriptedServer([THREE_ROUNDS[0], right], silent_cut=2048) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "context window 8192 tokens, from the default" in proc.stdout
    warning = next(line for line in proc.stderr.splitlines() if "2048" in line)
    assert "cut" in warning and "--context-window" in warning, warning
    first, second = server.chat_requests
    assert len(str(second["messages"])) < len(str(first["messages"])) / 2, "the next request was built smaller"
    assert server.usages[1]["prompt_tokens"] + second["max_tokens"] <= 2048, "and the server read all of it"
    assert "[Window: 2048 tokens, from a prompt the server cut;" in proc.stdout
    assert proc.stdout.count("[Testing (iteration") == 1, "the answer to the cut prompt was set aside, not applied"
    assert "tools" in first and "tools" not in second, "a 2,048 window has no room for the tools' schema"


def test_a_refusal_naming_the_window_is_still_learned_and_the_request_rebuilt(tmp_path: Path) -> None:
    """A server that both refuses over-long requests and reports a fixed count: the refusal decides."""
    repo = _big_repo(tmp_path)
    with ScriptedServer(THREE_ROUNDS, context_window=2048, fixed_prompt_tokens=100) as server:
        proc = _run(repo, server)
    _green_in_three(proc, repo)
    assert "[Window: 2048 tokens, from the server's refusal;" in proc.stdout
    refused, *answered = server.chat_requests
    assert len(answered) == 3 and len(str(refused)) > len(str(answered[0])), "the request was built again, smaller"
    assert all(prompt_tokens(body) + body["max_tokens"] <= 2048 for body in answered), "the window was kept"


# ----- reading a server's numbers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("usage, timings, whole, complete", [
    ({"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}}, None, 2006, True),  # OpenAI, vLLM
    ({"prompt_tokens": 86, "prompt_tokens_details": {"cached_tokens": 1920}}, None, 2006, True),  # left out after all
    ({"prompt_tokens": 2006, "prompt_cache_hit_tokens": 1920, "prompt_cache_miss_tokens": 86}, None, 2006, True),
    ({"input_tokens": 80, "cache_read_input_tokens": 1920, "cache_creation_input_tokens": 6}, None, 2006, True),
    ({"prompt_tokens": 2006, "cache_read_input_tokens": 1920, "prompt_tokens_details": {"cached_tokens": 1920}}, None,
     2006, True),  # LiteLLM in front of Anthropic: both names, the cached part inside prompt_tokens
    ({"prompt_tokens": 86}, {"prompt_n": 86, "cache_n": 1920}, 2006, True),  # llama.cpp's timings
    ({"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 0}}, None, 2006, True),
    ({"prompt_tokens": 86, "prompt_tokens_details": None}, None, 86, False),  # a cache, if any, unnamed
])
def test_the_cached_part_is_counted_in_whatever_the_server_calls_it(usage: dict, timings: dict | None, whole: int,
                                                                     complete: bool) -> None:
    reported = reported_prompt(usage, timings)
    assert reported is not None
    assert reported.total(expected=2000 * 1.05) == whole and reported.complete is complete


def test_no_prompt_count_is_no_reading() -> None:
    assert reported_prompt(None) is None and reported_prompt({"completion_tokens": 5}) is None
    assert reported_prompt({"prompt_tokens": "many"}) is None


def test_what_an_earlier_prompt_shared_whole_messages_then_the_common_start() -> None:
    system = {"role": "system", "content": "You change code. " * 20}
    plan = {"role": "user", "content": "# Task\nfix add\n" + "context line\n" * 50}
    fix = [system, plan, {"role": "assistant", "content": "{}"}, {"role": "user", "content": "still failing"}]
    assert shared_tokens(fix, [system, plan]) == message_tokens([system, plan]) - 3  # the plan request, all of it
    replanned = [system, {"role": "user", "content": "# Task\nfix add\nother context"}]
    between = shared_tokens(replanned, [system, plan])
    assert message_tokens([system]) - 3 < between < message_tokens([system, plan]) - 3
    assert shared_tokens([{"role": "user", "content": "x"}], [system]) == 0
    sent = SentPrompts()
    assert sent.record([system, plan]) == 0 and sent.record(fix) == message_tokens([system, plan]) - 3


def test_a_message_without_text_beside_one_with_text_is_compared_not_a_type_error() -> None:
    """usage.py:99 stopped a run with a TypeError: an assistant's tool calls alone have content None, and the earlier
    prompt had a text at that place (or a list of parts, as a multimodal message has)."""
    system = {"role": "system", "content": "You change code. " * 20}
    calls = {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    spoken = {"role": "assistant", "content": "I will read calc.py"}
    parts = {"role": "assistant", "content": [{"type": "text", "text": "I will read calc.py"}, {"type": "image"}]}
    alone = message_tokens([system]) - 3
    assert shared_tokens([system, calls], [system, spoken]) == alone
    assert shared_tokens([system, spoken], [system, calls]) == alone
    assert shared_tokens([system, calls], [system, calls]) > alone  # the same calls: shared whole
    assert shared_tokens([system, parts], [system, spoken]) == message_tokens([system, spoken]) - 3
    assert shared_tokens([system, {"role": "assistant", "content": 7}], [system, spoken]) == alone
    sent = SentPrompts()
    assert sent.record([system, spoken]) == 0 and sent.record([system, calls]) == alone


# ----- what the window learns from them ---------------------------------------------------------------------------
def test_a_low_count_on_a_prompt_sent_before_is_a_cache_not_a_cut() -> None:
    window = ContextWindow(8192, "test")
    assert window.observe(1000, 1100) is None and window.ratio == pytest.approx(1.1 * RATIO_MARGIN)
    assert window.observe(3000, 900, shared=2200) is None, "the 2,200 sent before were not counted"
    assert (window.tokens, window.ratio) == (8192, pytest.approx(1.1 * RATIO_MARGIN))
    warning = window.observe(3000, 900, shared=2200, complete=True)  # the numbers name the cache: it was cut
    assert warning and "900" in warning and "3000" in warning and window.tokens == 8192, "too small to be a window"


def test_a_count_fewer_than_any_window_is_warned_about_once_and_the_window_kept() -> None:
    window = ContextWindow(8192, "the default")
    warning = window.observe(764, 100)
    assert warning and "100" in warning and "764" in warning and "stays 8192 tokens" in warning
    assert "--context-window" in warning and window.tokens == 8192 and window.prompt_room() > 5000
    assert window.observe(1200, 100) is None and window.observe(900, 100, shared=700) is None, "said once"
    assert window.tokens == 8192 and not window.measured, "nor learned as a ratio"


def test_a_cut_is_taken_as_the_window_only_where_a_run_still_fits() -> None:
    window = ContextWindow(8192, "the default", ratio=1.0, measured=True)
    assert window.observe(5000, 1200) and window.tokens == 8192, "1,200 tokens leave no room for a run's requests"
    assert window.observe(5000, 2048) and (window.tokens, window.source) == (2048, "a prompt the server cut")
    assert window.prompt_room() >= MIN_USEFUL_ROOM


def test_the_ratio_ignores_implausible_counts_and_comes_back_down() -> None:
    window = ContextWindow(8192, "test")
    window.observe(1000, 50_000)  # a proxy's sum, not this prompt's count
    assert not window.measured and window.ratio == 1.3
    window.observe(1000, 1500)  # a prose-heavy prompt
    assert window.ratio == pytest.approx(1.5 * RATIO_MARGIN)
    window.observe(1000, 1100, shared=600)  # lower, but a cache may hold its start: not evidence of a lower ratio
    assert window.ratio == pytest.approx(1.5 * RATIO_MARGIN)
    for _ in range(3):  # counts that account for their cache: the ratio comes back down
        window.observe(1000, 1100, shared=600, complete=True)
    assert window.ratio == pytest.approx(1.1 * RATIO_MARGIN)


def test_a_fixed_count_over_shrinking_requests_never_pushes_the_room_below_a_runs_needs() -> None:
    window = ContextWindow(3000, "test", ratio=1.0, measured=True)
    for _ in range(10):
        window.observe(window.prompt_room(), 3000, complete=True)
    assert window.prompt_room() >= MIN_USEFUL_ROOM


def test_the_model_counts_a_named_cache_in_streamed_or_not() -> None:
    system = {"role": "system", "content": "You change code. " * 40}
    first = [system, {"role": "user", "content": "# Task\nfix add\n" + "def f():\n    return 1\n" * 60}]
    second = [*first, {"role": "assistant", "content": "{}"}, {"role": "user", "content": "still failing " * 30}]
    with ScriptedServer(["{}", "{}", "{}"], cache="cached_tokens") as server:
        model = OpenAIChat("m", api_key="k", base_url=server.url, window=ContextWindow(8192, "default"))
        whole = [model.complete(first).prompt_tokens, model.complete(second, on_token=[].append).prompt_tokens,
                 model.complete(second).prompt_tokens]
    assert whole == [prompt_tokens(body) for body in server.chat_requests]
    assert [u["prompt_tokens"] for u in server.usages][1:] < whole[1:], "the server counted only the new tokens"
    assert model.window.tokens == 8192 and 1.0 < model.window.ratio < 1.1
