"""A real LiteLLM proxy (1.108.7, from the registry; tests/litellm_proxy.py) in front of the provider emulator (a
hosted name) and the real llama-cpp-python server (a local model): what the header says of its window and price, a
key it cannot check, and llama-cpp-python's overflow as the proxy passes it on. Skipped, with how to install it,
where litellm is not installed; never faked."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.litellm_proxy import INSTALL, LiteLLMProxy, proxy_command, route
from tests.llama_server import LlamaServer
from tests.provider_emulator import CHAT, Profile, ProviderEmulator, usage_openai
from tests.repos import PYTEST, answer, modify, python_repo, run_cli, snapshot

pytestmark = pytest.mark.skipif(proxy_command() is None, reason=INSTALL)

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
# OpenAI's API as LiteLLM's `openai/gpt-5.2` route reaches it (the model's name without the prefix)
OPENAI_GPT_5_2 = Profile("openai-gpt-5.2", "gpt-5.2", usage=usage_openai, reasoning=128)


def _run(repo: Path, proxy: LiteLLMProxy, model: str, *more: str, key: str = "sk-master",
         task: str = "fix add") -> object:
    return run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, "--no-reproduce", "--model", model,
                    *more], server_url=proxy.url, api_key=key, timeout=600)


def test_a_hosted_name_through_litellm_has_the_window_and_price_litellm_reports(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ProviderEmulator(OPENAI_GPT_5_2, [FIX_ADD] * 2) as upstream, \
            LiteLLMProxy([route("openai/gpt-5.2", "openai/gpt-5.2", upstream.url)], tmp_path) as proxy:
        proc = _run(repo, proxy, "openai/gpt-5.2", "--max-cost", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Model: openai/gpt-5.2, context window 272000 tokens, from GET /v1/models (max_input_tokens)]" \
        in proc.stdout
    assert "[--max-cost: priced by the gateway (GET /model/info: $1.75 in, $14.00 out per million tokens)" \
        in proc.stdout
    assert upstream.bodies(CHAT), "answered through the proxy"


def test_a_key_litellm_cannot_check_is_named_before_any_test_runs(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ProviderEmulator(OPENAI_GPT_5_2, [FIX_ADD]) as upstream, \
            LiteLLMProxy([route("openai/gpt-5.2", "openai/gpt-5.2", upstream.url)], tmp_path) as proxy:
        proc = _run(repo, proxy, "openai/gpt-5.2", key="sk-not-the-master-key")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "cannot check the API key" in line and "No connected db." in line, line
    assert "[Baseline" not in proc.stdout and upstream.bodies(CHAT) == [] and snapshot(repo) == before


def test_llama_cpp_pythons_overflow_through_litellm_is_learned_not_an_empty_answer(tmp_path: Path) -> None:
    """A task over llama-cpp-python's 4,096 tokens but within the default window: the server refuses it at once (it
    drops the stream), the proxy passes that on, and asked once unstreamed it names the window; the task alone does
    not fit that window, which ends the run with one line naming --context-window."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    task = "fix add so that it returns the sum. " + "The helpers rely on add being right; keep each as it is. " * 230
    with LlamaServer(n_ctx=4096, log=tmp_path / "llama.log") as llama, \
            LiteLLMProxy([route("smollm2", "openai/smollm2", llama.url)], tmp_path) as proxy:
        proc = _run(repo, proxy, "smollm2", task=task)
    said = proc.stdout + proc.stderr
    assert "[Window: 4096 tokens, from the server's refusal; remembered for this server and model" in proc.stdout, said
    assert "the answer is empty" not in said and proc.returncode == 2 and "--context-window" in proc.stderr, said
    assert snapshot(repo) == before
