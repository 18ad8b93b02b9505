"""The table of documented refusals, read as each provider words them: every row is met by a body its provider (or its
users' public issues) published, and teaches its lesson; what a server takes follows from the lessons, each learned
once; a reasoning model's answer has room to reason; usage in either wire's names counts reasoning as output."""
from __future__ import annotations

from typing import Any

import pytest

from code_assistant.console import render
from code_assistant.model.accepts import REASONING_ROOM, Accepts, Wire, answer_cap
from code_assistant.model.prices import estimate_cost
from code_assistant.model.records import Usage, answered
from code_assistant.model.refusals import REFUSALS, Lesson, read_refusal
from code_assistant.model.window import window_limit
from code_assistant.operations.outcomes import usage_json


def _openai(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


# (status, body as published, lesson, parameter named); each with where it was published
PUBLISHED: list[tuple[int, Any, Lesson, str]] = [
    # https://github.com/QwenLM/qwen-code/issues/921
    (400, _openai("Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is "
                  "supported.", "temperature", "unsupported_value"), Lesson.REASONING, ""),
    # https://github.com/OpenHands/OpenHands/issues/4131
    (400, _openai("Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value "
                  "is supported.", "temperature", "unsupported_value"), Lesson.REASONING, ""),
    # https://github.com/griptape-ai/ComfyUI-Griptape/issues/312
    (400, _openai("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
                  "instead.", "max_tokens", "unsupported_parameter"), Lesson.REASONING, ""),
    # https://github.com/OpenHands/software-agent-sdk/issues/1837
    (400, _openai("Unsupported parameter: 'temperature' is not supported with this model.", "temperature"),
     Lesson.REASONING, ""),
    # https://github.com/jentic/standard-agent/issues/31
    (400, {"error": {"message": "litellm.UnsupportedParamsError: gpt-5 models don't support temperature=0.2. Only "
                                "temperature=1 is supported. To drop unsupported params set `litellm.drop_params = "
                                "True`", "type": None, "param": None, "code": "400"}}, Lesson.REASONING, ""),
    # https://github.com/pydantic/pydantic-ai/issues/2865
    (400, _openai("Encrypted content is not supported with this model.", "include"), Lesson.NO_ENCRYPTED_REASONING,
     ""),
    # https://github.com/tingly-dev/tingly-box/issues/233
    (404, _openai("This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean "
                  "to use v1/completions?", "model"), Lesson.RESPONSES, ""),
    # https://github.com/arbs-io/vscode-openai/issues/358
    (404, _openai("This model is only supported in v1/responses and not in v1/chat/completions.", "model"),
     Lesson.RESPONSES, ""),
    # https://github.com/caozhiyuan/copilot-api/issues/102
    (400, {"error": {"message": "model gpt-5.3-codex is not accessible via the /chat/completions endpoint",
                     "code": "unsupported_api_for_model"}}, Lesson.RESPONSES, ""),
    # https://github.com/vllm-project/vllm/issues/9986
    (400, {"object": "error", "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                                        '--tool-call-parser to be set', "type": "BadRequestError", "param": None,
           "code": 400}, Lesson.NO_TOOLS, ""),
    # https://github.com/ollama/ollama/issues/6027
    (400, {"error": {"message": "stablelm2:latest does not support tools", "type": "api_error", "param": None,
                     "code": None}}, Lesson.NO_TOOLS, ""),
    # https://github.com/containers/ramalama/issues/988
    (500, {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}},
     Lesson.NO_TOOLS, ""),
    # https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/169
    (400, {"error": "'response_format.type' must be 'json_schema'"}, Lesson.RESPONSE_FORMAT, ""),
    # https://github.com/ggml-org/llama.cpp/issues/23463 (llama-cpp-python's pydantic error, as its server words it)
    (500, {"error": {"message": "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or "
                                "'json_object'", "type": "internal_server_error"}}, Lesson.RESPONSE_FORMAT, ""),
    # https://github.com/ikawrakow/ik_llama.cpp/issues/778
    (500, {"error": {"code": 500, "message": 'response_format type must be one of "text" or "json_object", but got: '
                                             "json_schema", "type": "server_error"}}, Lesson.RESPONSE_FORMAT, ""),
    # https://github.com/oobabooga/textgen/issues/7257
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size. try increasing the "
                                             "context size or enable context shift",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}},
     Lesson.WINDOW, ""),
    # https://github.com/evalstate/fast-agent/issues/621
    (400, {"error": {"message": "This model's maximum context length is 131072 tokens. However, you requested 131134 "
                                "tokens (122942 in the messages, 8192 in the completion). Please reduce the length "
                                "of the messages or completion.", "type": "invalid_request_error", "param": None,
                     "code": "invalid_request_error"}}, Lesson.WINDOW, ""),
    # https://github.com/BerriAI/litellm/issues/3923
    (500, {"error": {"message": "ollama does not support parameters: {'seed': 1}, for model=llama3:latest. To drop "
                                "these, set `litellm.drop_params=True`", "type": None, "param": None, "code": 500}},
     Lesson.NO_SEED, "seed"),
    # https://github.com/mcdonc/klangk/pull/2067
    (400, {"error": {"message": "litellm.UnsupportedParamsError: zai does not support parameters: "
                                "['max_completion_tokens'], for model=glm-5.2."}}, Lesson.MAX_TOKENS,
     "max_completion_tokens"),
    # https://github.com/Kilo-Org/cloud/pull/3807
    (400, {"error": {"message": "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
                                "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
                     "type": "invalid_request_error"}}, Lesson.NO_REASONING_EFFORT, "reasoning_effort"),
    # OpenAI's unsupported_parameter for reasoning_effort (https://github.com/BerriAI/litellm/issues/13569)
    (400, _openai("Unsupported parameter: 'reasoning_effort' is not supported with this model.", "reasoning_effort",
                  "unsupported_parameter"), Lesson.NO_REASONING_EFFORT, "reasoning_effort"),
    # https://github.com/openai/openai-python/issues/1724
    (400, _openai("Unrecognized request argument supplied: max_completion_tokens"), Lesson.MAX_TOKENS,
     "max_completion_tokens"),
    # https://github.com/anomalyco/opencode/issues/24083 (DeepSeek's thinking mode, a tool-call turn without it)
    (400, {"error": {"message": "The reasoning_content in the thinking mode must be passed back to the API.",
                     "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}},
     Lesson.REASONING_BACK, ""),
    # https://github.com/warpdotdev/warp/issues/11587 (the same through a gateway, the field in backticks, a flat body)
    (400, {"message": "Error from provider (DeepSeek): The `reasoning_content` in the thinking mode must be passed back "
                      "to the API.", "type": "invalid_request_error", "param": None, "code": "invalid_request_error"},
     Lesson.REASONING_BACK, ""),
    # https://github.com/nearai/ironclaw/issues/1521 (Gemini's OpenAI endpoint: its body an array)
    (400, [{"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts. This "
                      "is required for tools to work correctly, and missing thought_signature may lead to degraded "
                      "model performance. Additional data, function call default_api:skill_list , position 21. "
                      "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                      "status": "INVALID_ARGUMENT"}}], Lesson.SIGNATURE_BACK, ""),
    # https://github.com/langchain-ai/langchain-azure/issues/82
    (400, {"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted",
                       "input": 123}]}, Lesson.NO_SEED, "seed"),
]


@pytest.mark.parametrize("status, body, lesson, parameter", PUBLISHED,
                         ids=[f"{n}-{case[2]}" for n, case in enumerate(PUBLISHED)])
def test_a_published_refusal_teaches_its_lesson(status: int, body: Any, lesson: Lesson, parameter: str) -> None:
    read = read_refusal(status, body)
    assert read is not None and (read.lesson, read.parameter) == (lesson, parameter)


def test_every_row_of_the_table_is_met_by_a_published_body() -> None:
    rows = {id(read.row) for status, body, _, _ in PUBLISHED if (read := read_refusal(status, body))}
    assert [row.provider for row in REFUSALS if id(row) not in rows] == []


def test_a_refusal_the_table_does_not_know_teaches_nothing() -> None:
    assert read_refusal(404, _openai("The model `gpt-9` does not exist or you do not have access to it.")) is None
    assert read_refusal(400, _openai("Unsupported parameter: 'logit_bias' is not supported with this model.")) is None
    assert read_refusal(503, "upstream connect error") is None and read_refusal(200, {}) is None


def test_llama_cpp_names_its_window_in_the_refusal_and_at_props() -> None:
    body = PUBLISHED[15][1]
    limit = window_limit("the request exceeds the available context size", body)
    assert limit is not None and (limit.window, limit.prompt_tokens) == (8192, 14429)


# ----- what a server takes, lesson by lesson ------------------------------------------------------------------------
def test_an_unknown_model_is_asked_as_any_chat_model() -> None:
    accepts = Accepts()
    assert accepts.sends_temperature and accepts.sends_seed and accepts.cap_name == "max_tokens"
    assert accepts.sends_effort("high") and accepts.asks_encrypted_reasoning and accepts.wire == Wire.CHAT


def test_a_reasoning_model_takes_no_temperature_and_max_completion_tokens_and_each_lesson_is_learned_once() -> None:
    accepts = Accepts()
    assert accepts.learn(Lesson.REASONING) and not accepts.learn(Lesson.REASONING)
    assert (accepts.sends_temperature, accepts.cap_name, accepts.version) == (False, "max_completion_tokens", 1)
    known = Accepts(temperature=True)  # a catalogue that says the model takes a temperature (gpt-5.1 at effort none)
    known.learn(Lesson.REASONING)
    assert known.sends_temperature


def test_a_non_reasoning_model_is_not_sent_an_effort_nor_asked_for_its_reasoning() -> None:
    accepts = Accepts(reasoning=False)
    assert not accepts.sends_effort("high") and not accepts.asks_encrypted_reasoning
    assert not Accepts().sends_effort(None)
    refused = Accepts()
    refused.learn(Lesson.NO_ENCRYPTED_REASONING)
    assert not refused.asks_encrypted_reasoning and refused.sends_effort("low")


def test_the_wire_is_learned_unless_the_user_chose_it() -> None:
    learned, chosen = Accepts(), Accepts(wire=Wire.CHAT, wire_chosen=True)
    assert learned.learn(Lesson.RESPONSES) and learned.wire == Wire.RESPONSES
    assert not chosen.learn(Lesson.RESPONSES) and chosen.wire == Wire.CHAT


def test_a_server_that_does_not_know_max_completion_tokens_gets_max_tokens_back_once() -> None:
    accepts = Accepts()
    accepts.learn(Lesson.COMPLETION_TOKENS)
    assert accepts.cap_name == "max_completion_tokens"
    assert accepts.learn(Lesson.MAX_TOKENS) and accepts.cap_name == "max_tokens"
    assert not accepts.learn(Lesson.COMPLETION_TOKENS), "no back and forth: the second refusal ends the run"


def test_a_reasoning_models_answer_has_room_to_reason_within_the_window() -> None:
    assert answer_cap(4096, 400_000, 30_000, reasoning=False) == 4096
    assert answer_cap(4096, 400_000, 30_000, reasoning=True) == 4096 + REASONING_ROOM
    assert answer_cap(1024, 8192, 3000.2, reasoning=True) == 8192 - 3001
    assert answer_cap(1024, 8192, 7800, reasoning=True) == 1024, "never less than the reserve"
    assert answer_cap(4096, 200_000, 1000, reasoning=True, most=16_384) == 16_384, "nor more than the model's output"


# ----- usage in either wire's names ---------------------------------------------------------------------------------
def test_reasoning_tokens_are_output_in_both_wires_names_and_when_a_server_counts_them_apart() -> None:
    chat = answered("ok", False, {"prompt_tokens": 100, "completion_tokens": 250, "total_tokens": 350,
                                  "completion_tokens_details": {"reasoning_tokens": 200}})
    responses = answered("ok", False, {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 40},
                                       "output_tokens": 250, "output_tokens_details": {"reasoning_tokens": 200},
                                       "total_tokens": 350})
    # https://github.com/router-for-me/CLIProxyAPI/issues/5733: Gemini's thoughts outside completion_tokens
    apart = answered("ok", False, {"prompt_tokens": 21, "completion_tokens": 0, "total_tokens": 81,
                                   "completion_tokens_details": {"reasoning_tokens": 60}})
    assert (chat.completion_tokens, chat.reasoning_tokens) == (250, 200)
    assert (responses.prompt_tokens, responses.completion_tokens, responses.reasoning_tokens) == (100, 250, 200)
    assert responses.reported is not None and responses.reported.cached == 40
    assert (apart.completion_tokens, apart.reasoning_tokens) == (60, 60)


def test_the_part_of_the_prompt_a_cache_served_is_priced_as_cached_and_said() -> None:
    """https://platform.openai.com/docs/guides/prompt-caching: `prompt_tokens_details.cached_tokens`, a part of
    prompt_tokens billed at the cached-input price; DeepSeek's `prompt_cache_hit_tokens`; Anthropic's
    `cache_read_input_tokens` (a cache write, `cache_creation_input_tokens`, is no read)."""
    usage = Usage()
    usage.add(answered("a", False, {"prompt_tokens": 1_000_000, "completion_tokens": 0, "total_tokens": 1_000_000,
                                    "prompt_tokens_details": {"cached_tokens": 800_000}}))
    assert usage.cached_tokens == 800_000
    assert usage.cost("gpt-5.2", None) == estimate_cost("gpt-5.2", 1_000_000, 0, cached_tokens=800_000) < \
        estimate_cost("gpt-5.2", 1_000_000, 0)
    assert render.cached(usage) == " (800000 of them cached)" and render.cached(Usage()) == ""
    assert usage_json(usage)["cached_tokens"] == 800_000
    deepseek = answered("b", False, {"prompt_tokens": 100, "completion_tokens": 1, "prompt_cache_hit_tokens": 70,
                                     "prompt_cache_miss_tokens": 30})
    anthropic = answered("c", False, {"prompt_tokens": 100, "completion_tokens": 1, "cache_read_input_tokens": 60,
                                      "cache_creation_input_tokens": 30})
    written = answered("d", False, {"prompt_tokens": 100, "completion_tokens": 1, "cache_creation_input_tokens": 90})
    assert (deepseek.cached_tokens, anthropic.cached_tokens, written.cached_tokens) == (70, 60, 0)


def test_a_servers_own_charge_is_the_cost_when_every_call_had_one() -> None:
    usage = Usage()
    # https://openrouter.ai/docs/use-cases/usage-accounting: usage.cost, in credits (dollars)
    usage.add(answered("a", False, {"prompt_tokens": 194, "completion_tokens": 2, "total_tokens": 196, "cost": 0.95}))
    usage.add(answered("b", False, {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cost": 0.05}))
    assert usage.cost("openai/gpt-5.2", "http://127.0.0.1:9/api/v1") == 1.0, "a local URL has no price; the charge"
    usage.add(answered("c", False, {"prompt_tokens": 1_000_000, "completion_tokens": 0, "total_tokens": 1_000_000}))
    whole = estimate_cost("gpt-4o", usage.prompt_tokens, usage.completion_tokens, None)
    assert whole is not None and usage.cost("gpt-4o", None) == whole, "a call without a charge: the estimate"
    assert Usage().cost("unknown-model", None) is None
