"""The models people use, as their providers serve them (tests/provider_emulator.py: each provider's documented
behaviour, through the real openai client). A reasoning model is asked as documented, after at most one refusal it
learns for the session; a model served only by the Responses API is asked there, its tools flat, its calls answered by
call_id with its encrypted reasoning carried back, and the run replays; a session keeps what it learned and best of
N's attempts share it; every other provider's first exchange, tools, usage, cost and window, by its contract."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from code_assistant.model.accepts import Accepts
from code_assistant.model.catalogue import lookup
from code_assistant.model.chat import OpenAIChat, ToolsRefused
from code_assistant.model.responses import flat_tools, input_items
from code_assistant.model.server_reports import resolve_window
from code_assistant.model.structured import plan_schema
from code_assistant.model.window import ContextWindow
from code_assistant.tools import Spec
from tests.provider_emulator import CHAT, RESPONSES, ProviderEmulator
from tests.repos import PYTEST, answer, modify, python_repo, run_cli, snapshot
from tests.test_mcp import _docs
from tests.test_session import _piped

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
TIMES = answer(modify("calc.py", "    return a * b", "    return a * b  # times"))
GREP = {"name": "grep", "arguments": {"pattern": "def add"}}


def _run(repo: Path, emulator: ProviderEmulator, *more: str) -> Any:
    return run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", "--model",
                    emulator.profile.model, *more], server_url=emulator.url)


def _log(stdout: str) -> list[dict[str, Any]]:
    path = next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("Run log: "))
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


# ----- through the command line ---------------------------------------------------------------------------------------
def test_gpt_5_mini_goes_green_after_one_refusal_it_learns_asking_as_a_reasoning_model_is_asked(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ProviderEmulator("openai-gpt-5-mini", [FIX_ADD]) as emulator:
        proc = _run(repo, emulator, "--reasoning-effort", "low")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    refused, accepted = emulator.bodies(CHAT)
    assert refused["temperature"] == 0 and "max_tokens" in refused
    assert "temperature" not in accepted and "max_tokens" not in accepted and accepted["reasoning_effort"] == "low"
    assert accepted["max_completion_tokens"] > refused["max_tokens"], "room to reason as well as to answer"
    learned = [line for line in proc.stdout.splitlines() if line.startswith("[Learned: ")]
    assert learned == [("[Learned: gpt-5-mini is a reasoning model: asked without temperature, with room to reason "
                       "(max_completion_tokens) (the server's 400); asked again so, for the rest of the session]")]
    assert "completion tokens (192 of them reasoning)" in proc.stdout
    plan, final = _log(proc.stdout)
    assert (plan["wires"], plan["reasoning_tokens"], final["reasoning_tokens"]) == (["chat"], 192, 192)
    assert plan["completion_tokens"] >= 192, "reasoning is billed as output"


def test_gpt_5_1_codex_goes_green_through_the_responses_api_with_calls_answered_by_call_id_and_replays(
        tmp_path: Path) -> None:
    """A grep call and an MCP server's tool in one answer; their outputs go back by call_id after the reasoning that
    led to them; the recorded run replays without the model."""
    repo = python_repo(tmp_path)
    assert run_cli(["mcp", "add", "docs", "--", *_docs(tmp_path)]).returncode == 0
    script = [{"tool_calls": [GREP, {"name": "docs__lookup", "arguments": {"term": "add"}}]}, FIX_ADD]
    with ProviderEmulator("openai-gpt-5.1-codex", script) as emulator:
        proc = _run(repo, emulator)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [body["model"] for body in emulator.bodies(CHAT)] == ["gpt-5.1-codex"], "one 404 at /chat/completions"
    assert "[Learned: gpt-5.1-codex is served by the Responses API only: asked at /responses" in proc.stdout
    refused, first, second = emulator.bodies(RESPONSES)
    assert "temperature" in refused and "temperature" not in first, "the reasoning model's refusal, learned too"
    assert all(t["type"] == "function" and "function" not in t for t in first["tools"]), "declared flat"
    assert {t["name"] for t in first["tools"]} >= {"grep", "docs__lookup"}
    assert (first["store"], first["include"]) == (False, ["reasoning.encrypted_content"])
    reasoning, grep, lookup, grep_output, lookup_output = second["input"][-5:]
    assert reasoning["type"] == "reasoning" and emulator.encrypted[reasoning["id"]] == reasoning["encrypted_content"]
    assert (grep["type"], grep["name"], lookup["name"]) == ("function_call", "grep", "docs__lookup")
    assert (grep_output["call_id"], lookup_output["call_id"]) == (grep["call_id"], lookup["call_id"])
    assert grep_output["output"] == "calc.py:4: def add(a, b):" and "must return the sum" in lookup_output["output"]
    plan, final = _log(proc.stdout)
    assert plan["wires"] == ["responses", "responses"] and plan["reasoning_tokens"] == 2 * 256
    # the second request starts as the first did: OpenAI's cache serves that start, priced as cached input
    assert final["cached_tokens"] > 0 and final["cached_tokens"] % 128 == 0, final
    assert f"prompt ({final['cached_tokens']} of them cached)" in proc.stdout  # (its price: test_refusals)
    (tmp_path / "again").mkdir()
    again = python_repo(tmp_path / "again")
    replayed = run_cli(["--repo", str(again), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--replay", next(line.split(": ", 1)[1] for line in proc.stdout.splitlines()
                                         if line.startswith("Run log: "))], api_key=None)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "return a + b" in (again / "calc.py").read_text()


def test_max_cost_holds_on_what_the_server_charged_and_says_when_nothing_can_hold_it(tmp_path: Path) -> None:
    """A local address has no catalogue price, but OpenRouter's usage.cost is its charge: the cap holds on it, the
    run stops after the answer that passed it, and the repository is as it was. A server that neither is priced nor
    charges: the header says the cap may not hold, and the run goes on."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ProviderEmulator("openrouter-gpt-5.2", [FIX_ADD]) as emulator:
        capped = _run(repo, emulator, "--max-cost", "0.000001")
    assert capped.returncode == 1, capped.stdout + capped.stderr
    assert "the cap holds only if the server reports its charge (OpenRouter's and LiteLLM's usage.cost)" in capped.stdout
    [result] = [line for line in capped.stdout.splitlines() if line.startswith("Result: ")]
    assert re.fullmatch(r"Result: FAILED \(cost_cap: \$0\.\d{4} spent, over --max-cost \$0\.000001\)", result), result
    assert snapshot(repo) == before
    with ProviderEmulator("vllm-qwen2.5-coder", [FIX_ADD] * 3) as emulator:
        uncapped = _run(repo, emulator, "--max-cost", "0.000001")
    assert uncapped.returncode == 0 and "[--max-cost: this model has no price here" in uncapped.stdout, \
        uncapped.stdout + uncapped.stderr


def test_a_session_on_the_responses_api_learns_the_wire_once_and_best_of_n_attempts_share_it(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)

    def plan(request: dict[str, Any]) -> str:
        return TIMES if "comment multiply" in json.dumps(request.get("input")) else FIX_ADD

    with ProviderEmulator("openai-gpt-5.1-codex", [plan] * 8) as emulator:
        proc = _piped(repo, "fix add\nnow also comment multiply\n", emulator, "--model", "gpt-5.1-codex",
                      "--candidates", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "return a + b" in (repo / "calc.py").read_text() and "# times" in (repo / "calc.py").read_text()
    paths = [r["path"] for r in emulator.requests if "body" in r]
    chat = [n for n, p in enumerate(paths) if p.endswith("/chat/completions")]
    assert 1 <= len(chat) <= 2 and max(chat) < paths.index("/v1/responses"), "learned once, by either attempt"
    second_task = [b for b in emulator.bodies(RESPONSES) if "comment multiply" in json.dumps(b["input"])]
    assert len(second_task) == 2 and all("temperature" not in b for b in second_task), "kept for the session"
    assert proc.stdout.count("is served by the Responses API only") == 1


# ----- each provider's contract, in one exchange ----------------------------------------------------------------------
TOOLS = [Spec("grep", "Search the repository's files for a regular expression.",
              {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}).openai()]
PROMPT = [{"role": "system", "content": "You fix code."}, {"role": "user", "content": "Fix add() in calc.py."}]

# profile: (refused requests, native tools, reasoning tokens counted, a cost, the window and where it came from)
CONTRACTS = {
    "azure-gpt-5-mini": (1, True, 192, False, (8192, "the default (nothing reported a window)")),
    "openrouter-gpt-5.2": (0, True, 128, True, (400_000, "GET /v1/models")),
    "litellm-gpt-5": (1, True, 160, False, (8192, "the default (nothing reported a window)")),
    "anthropic-claude-sonnet-4-5": (0, True, 0, False, (8192, "the default (nothing reported a window)")),
    "google-gemini-2.5-flash": (0, True, 300, False, (8192, "the default (nothing reported a window)")),
    "ollama-gemma3": (1, False, 0, False, (8192, "Ollama's num_ctx parameter")),
    "vllm-qwen2.5-coder": (1, False, 0, False, (32768, "GET /v1/models")),
    "lmstudio-qwen2.5-coder": (0, True, 0, False, (16384, "GET /api/v0/models")),
    "llama.cpp-no-jinja": (1, False, 0, False, (8192, "GET /props")),
    "litellm-local-gpt-5.2": (0, True, 128, True, (272000, "GET /v1/models (max_input_tokens)")),
    "gateway-local-no-window": (0, True, 128, False, (400000, (f"{lookup('openai/gpt-5.2').source} (openai/gpt-5.2; "
                                                               "the exact name, through a server on this machine)"))),
}


@pytest.mark.parametrize("name", list(CONTRACTS))
def test_a_providers_first_exchange_by_its_contract(name: str) -> None:
    refusals, native, reasoning, costed, window = CONTRACTS[name]
    with ProviderEmulator(name, [FIX_ADD]) as emulator:
        model = emulator.profile.model
        found = resolve_window(None, emulator.url, model)
        chat = OpenAIChat(model, api_key="k", base_url=emulator.url, window=found, schema=plan_schema(["modify"]),
                          sleep=lambda s: None)
        try:
            response = chat.complete(PROMPT, on_token=[].append, tools=TOOLS)
        except ToolsRefused:  # as the exchange does: the tools described in words, asked once more
            response = chat.complete(PROMPT, on_token=[].append)
    assert (len(emulator.refused), chat.native_tools) == (refusals, native)
    assert response.text == FIX_ADD and not response.estimated, "streamed, with the server's usage"
    assert response.reasoning_tokens == reasoning and response.completion_tokens >= reasoning
    assert (chat.usage.cost(model, emulator.url) is not None) == costed
    assert (found.tokens, found.source) == window


@pytest.mark.parametrize("name", ["openai-gpt-5-mini", "openai-gpt-5.1-codex"])
def test_with_the_catalogues_entry_a_reasoning_model_is_asked_right_the_first_time(name: str) -> None:
    """The catalogue (models.dev) says what the refusals would teach: no request is spent on them."""
    with ProviderEmulator(name, [FIX_ADD]) as emulator:
        model = emulator.profile.model
        info = lookup(model)
        assert info is not None and info.reasoning
        chat = OpenAIChat(model, api_key="k", base_url=emulator.url, accepts=Accepts.known(info),
                          window=ContextWindow(info.window or 8192, "the catalogue"), sleep=lambda s: None)
        response = chat.complete(PROMPT, tools=TOOLS)
    assert emulator.refused == [] and response.notes == [] and response.text == FIX_ADD
    assert response.wire == ("responses" if "codex" in model else "chat")


# ----- the Responses API's rendering of our conversation --------------------------------------------------------------
def test_the_conversation_as_responses_input_and_tools_flat() -> None:
    carried = {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB", "summary": []}
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "fix it"},
                {"role": "assistant", "content": "Looking first.", "carried": [carried], "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"p": 1}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "calc.py:4"},
                {"role": "assistant", "content": '{"changes": []}'}, {"role": "user", "content": "again"}]
    instructions, items = input_items(messages)
    assert instructions == "rules"
    assert items == [{"role": "user", "content": "fix it"}, carried,
                     {"role": "assistant", "content": "Looking first."},
                     {"type": "function_call", "call_id": "call_1", "name": "grep", "arguments": '{"p": 1}'},
                     {"type": "function_call_output", "call_id": "call_1", "output": "calc.py:4"},
                     {"role": "assistant", "content": '{"changes": []}'}, {"role": "user", "content": "again"}]
    assert flat_tools(TOOLS) == [{"type": "function", "name": "grep", "description": TOOLS[0]["function"]["description"],
                                  "parameters": TOOLS[0]["function"]["parameters"], "strict": False}]


def test_a_chosen_wire_is_kept_and_a_refusal_that_wants_the_other_names_the_setting(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = (repo / "calc.py").read_text()
    with ProviderEmulator("openai-gpt-5.1-codex", [FIX_ADD]) as emulator:
        proc = _run(repo, emulator, "--wire", "chat")
    assert proc.returncode == 2 and emulator.bodies(RESPONSES) == [] and (repo / "calc.py").read_text() == before
    [line] = proc.stderr.strip().splitlines()
    assert "not a chat model" in line and line.endswith("--wire responses (OPENAI_WIRE=responses)")
    bad = run_cli(["--repo", str(repo), "--task", "fix add", "--wire", "grpc"], server_url="http://127.0.0.1:9/v1")
    assert bad.returncode == 2 and "invalid choice: 'grpc'" in bad.stderr
    env = run_cli(["--repo", str(repo), "--task", "fix add"], server_url="http://127.0.0.1:9/v1",
                  extra_env={"OPENAI_REASONING_EFFORT": "maximal"})
    assert env.returncode == 2 and "OPENAI_REASONING_EFFORT" in env.stderr


# ----- a gateway on this machine, asked what it knows ------------------------------------------------------------------
def test_a_local_gateway_is_asked_its_window_output_limit_and_price_and_the_header_says_where_each_comes_from(
        tmp_path: Path) -> None:
    """LiteLLM as 1.108.7 answered on this machine: its window and output limit for a hosted name, its price in GET
    /model/info, its charge in usage.cost, which the cap holds on."""
    repo = python_repo(tmp_path)
    with ProviderEmulator("litellm-local-gpt-5.2", [FIX_ADD]) as emulator:
        proc = _run(repo, emulator, "--max-cost", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Model: openai/gpt-5.2, context window 272000 tokens, from GET /v1/models (max_input_tokens)]" \
        in proc.stdout
    assert "[--max-cost: priced by the gateway (GET /model/info: $1.75 in, $14.00 out per million tokens); the cap " \
           "holds on the charge it reports with each answer (usage.cost)]" in proc.stdout
    [body] = emulator.bodies(CHAT)
    assert body["max_completion_tokens"] <= 128000, "within the gateway's output limit"
    assert "has no price here" not in proc.stdout


def test_a_bare_name_on_a_server_here_is_not_the_catalogues_but_its_exact_prefixed_name_is() -> None:
    assert resolve_window(None, "http://127.0.0.1:9/v1", "gpt-5.2").source.startswith("the default")
    found = resolve_window(None, "http://127.0.0.1:9/v1", "openai/gpt-5.2")
    assert found.tokens == 400_000 and found.source.endswith("(openai/gpt-5.2; the exact name, through a server on "
                                                             "this machine)")
    assert resolve_window(None, "http://127.0.0.1:9/v1", "openai/gpt-5.2-2025-12-11").source.startswith("the default")
