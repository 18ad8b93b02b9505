"""Model providers as their documents and their users' public issues describe them, served on 127.0.0.1 for the real
`openai` client: which endpoints serve the model, which requests they refuse and with what body (quoted, with where
it was found), what their usage carries, what else they answer (GET /props, /api/show, /models).

A profile is one provider serving one model. Each chat request and each Responses request takes the next step of the
script: a string (the answer), {"tool_calls": [{"name", "arguments"}]} (native calls), or a callable(request) that
returns one of those (best of N's attempts take steps in any order: a step may answer by what the request shows).
Chat answers stream as chunks; Responses answers stream as the events the `openai` SDK's own types describe
(openai.types.responses.*, serialized with model_dump), so their shape is the SDK's. A reasoning model's Responses
output starts with a reasoning item carrying encrypted content; its next request must send that item back before the
calls it led to, and every call's output must name a call of the input and every call have its output, as OpenAI's
API checks (https://github.com/continuedev/continue/issues/10092: "No tool call found for function call output with
call_id ..."; https://github.com/router-for-me/CLIProxyAPI/issues/2368: "No tool output found for function call ...").
Every request is recorded in `requests` (path and body).
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from code_assistant import tokens
from tests.loopback import LoopbackServer
from tests.scripted_server import prompt_ids, prompt_tokens, shared_prefix, text_ids

Step = str | dict[str, Any] | Callable[[dict[str, Any]], "str | dict[str, Any]"]
CHAT, RESPONSES = "chat", "responses"


@dataclass(frozen=True)
class Rule:
    """A documented refusal: a request to `endpoint` that `when` holds for is answered `status`, `body` (JSON, or
    text as some servers send it), with `headers`."""

    endpoint: str
    when: Callable[[dict[str, Any]], bool]
    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()


def openai_error(message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def always(body: dict[str, Any]) -> bool:
    return True


# ----- the documented refusals ------------------------------------------------------------------------------------
# https://github.com/QwenLM/qwen-code/issues/921 (gpt-5-mini), https://github.com/gabrii/Cursor-Azure-GPT-5/issues/33
TEMPERATURE_NOT_DEFAULT = Rule(CHAT, lambda b: b.get("temperature") not in (None, 1), 400, openai_error(
    "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.",
    "temperature", "unsupported_value"))
# https://github.com/griptape-ai/ComfyUI-Griptape/issues/312 (gpt-5), https://github.com/OpenHands/software-agent-sdk/
# issues/1083 (gpt-5 on Azure)
MAX_TOKENS = Rule(CHAT, lambda b: "max_tokens" in b, 400, openai_error(
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    "max_tokens", "unsupported_parameter"))
# https://github.com/OpenHands/software-agent-sdk/issues/1837 (gpt-5.2-codex)
RESPONSES_TEMPERATURE = Rule(RESPONSES, lambda b: "temperature" in b, 400, openai_error(
    "Unsupported parameter: 'temperature' is not supported with this model.", "temperature"))
# https://github.com/tingly-dev/tingly-box/issues/233 (gpt-5.2-codex at /v1/chat/completions: 404)
NOT_A_CHAT_MODEL = Rule(CHAT, always, 404, openai_error(
    "This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean to use "
    "v1/completions?", "model"))
# https://github.com/pydantic/pydantic-ai/issues/2865 (gpt-4o at /v1/responses)
NO_ENCRYPTED_CONTENT = Rule(RESPONSES, lambda b: bool(b.get("include")), 400, openai_error(
    "Encrypted content is not supported with this model.", "include"))
# https://github.com/HKUDS/nanobot/issues/370 (LiteLLM, gpt-5), in the proxy's error body
# (https://github.com/BerriAI/litellm/pull/33738)
LITELLM_TEMPERATURE = Rule(CHAT, lambda b: b.get("temperature") not in (None, 1), 400, openai_error(
    "litellm.UnsupportedParamsError: gpt-5 models (including gpt-5-codex) don't support temperature=0. Only "
    "temperature=1 is supported. To drop unsupported params set `litellm.drop_params = True`\nReceived Model "
    "Group=gpt-5\nAvailable Model Group Fallbacks=None", code="400"))
# https://github.com/vllm-project/vllm/issues/9986 (vLLM started without --enable-auto-tool-choice)
VLLM_TOOLS = Rule(CHAT, lambda b: bool(b.get("tools")), 400, {
    "object": "error", "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
    'be set', "type": "BadRequestError", "param": None, "code": 400})
# https://github.com/ollama/ollama/issues/6027 (Ollama's /v1, a model whose template has no tools)
OLLAMA_TOOLS = Rule(CHAT, lambda b: bool(b.get("tools")), 400, openai_error(
    "registry.ollama.ai/library/gemma3:4b does not support tools", kind="api_error"))
# https://github.com/containers/ramalama/issues/988 (llama.cpp's llama-server without --jinja)
LLAMA_CPP_TOOLS = Rule(CHAT, lambda b: bool(b.get("tools")), 500, {"error": {
    "code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}})
# https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189
LM_STUDIO_JSON_OBJECT = Rule(CHAT, lambda b: (b.get("response_format") or {}).get("type") == "json_object", 400,
                             {"error": "'response_format.type' must be 'json_schema' or 'text'"})


# ----- refusals that pass, and those that do not (given as `ahead`: the next requests' answers, once each) ----------
def azure_rate_limit(seconds: int, endpoint: str = CHAT) -> Rule:
    """Azure OpenAI's 429, its wait in the message and in retry-after / retry-after-ms
    (https://github.com/openai/openai-node/issues/1108, https://github.com/microsoft/action-python/issues/12)."""
    return Rule(endpoint, always, 429, {"error": {"code": "429", "message": (
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-15-preview have "
        f"exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after {seconds} seconds. "
        "Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate "
        "limit.")}}, headers=(("retry-after", str(seconds)), ("retry-after-ms", str(seconds * 1000))))


def openai_rate_limit(reset_tokens: str, endpoint: str = CHAT) -> Rule:
    """OpenAI's 429 for tokens per minute, its wait in x-ratelimit-reset-tokens only
    (https://github.com/continuedev/continue/issues/10502; the headers: https://thoughtbot.com/blog/openai-rate-limits)."""
    return Rule(endpoint, always, 429, openai_error(
        "Rate limit reached for gpt-4.1 in organization org-vyUrKHsIdLcZGKR3zqCqllrS on tokens per min (TPM): Limit "
        f"30000, Used 28039, Requested 3906. Please try again in {reset_tokens}. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.", code="rate_limit_exceeded", kind="tokens"),
        headers=(("x-ratelimit-reset-requests", "120ms"), ("x-ratelimit-reset-tokens", reset_tokens)))


# https://github.com/ChatGPTNextWeb/NextChat/issues/3123: OpenAI's 429 for an account out of quota
OPENAI_QUOTA = Rule(CHAT, always, 429, openai_error(
    "You exceeded your current quota, please check your plan and billing details.", code="insufficient_quota",
    kind="insufficient_quota"))
# https://github.com/BerriAI/litellm/pull/20837: LiteLLM without a database, asked with a key that is not its master key,
# on every route (GET /v1/models the first)
LITELLM_NO_DB = Rule(CHAT, always, 400, {"error": {"message": "No connected db.", "type": "no_db_connection",
                                                   "param": "None", "code": "400"}})


def _tool_turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "assistant" and m.get("tool_calls")]


# https://api-docs.deepseek.com/guides/thinking_mode: "For turns that do perform tool calls, the reasoning_content must
# be fully passed back to the API in all subsequent requests. If your code does not correctly pass back
# reasoning_content, the API will return a 400 error." The body: https://github.com/anomalyco/opencode/issues/24083
DEEPSEEK_REASONING_BACK = Rule(CHAT, lambda b: any("reasoning_content" not in m for m in _tool_turns(b)), 400,
                               openai_error("The reasoning_content in the thinking mode must be passed back to the "
                                            "API.", code="invalid_request_error"))
# https://ai.google.dev/gemini-api/docs/thought-signatures: "When using Gemini 3 models, you must pass back thought
# signatures during function calling, otherwise you will get a validation error (4xx status code)"; the body, an array,
# as its OpenAI endpoint sends it: https://github.com/manthanabc/paws/issues/103
GEMINI_SIGNATURE = Rule(CHAT, lambda b: any(
    not ((m["tool_calls"][0].get("extra_content") or {}).get("google") or {}).get("thought_signature")
    for m in _tool_turns(b)), 400, [{"error": {"code": 400, "message": (
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
        "call `default_api:grep` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "
        "for more details."), "status": "INVALID_ARGUMENT"}}])
# a server's own failure, as a proxy in front of it words it: plain text
PLAIN_500 = Rule(CHAT, always, 500, "Internal Server Error")


# OpenAI's prompt cache: "works automatically for prompts containing 1024 tokens or more, with cache hits occurring in
# increments of 128 tokens" (https://github.com/openai/openai-cookbook, examples/Prompt_Caching_201.ipynb)
CACHED_FROM, CACHED_STEP = 1024, 128


def usage_openai(prompt: int, completion: int, reasoning: int, cached: int = 0) -> dict[str, Any]:
    """OpenAI's chat usage: reasoning inside completion_tokens, its part in completion_tokens_details; the part of the
    prompt its cache served inside prompt_tokens, named in prompt_tokens_details."""
    return {"prompt_tokens": prompt, "completion_tokens": completion + reasoning,
            "total_tokens": prompt + completion + reasoning, "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def usage_plain(prompt: int, completion: int, reasoning: int, cached: int = 0) -> dict[str, Any]:
    """prompt_tokens and completion_tokens only (Anthropic's compatible endpoint, Ollama, LM Studio, vLLM)."""
    return {"prompt_tokens": prompt, "completion_tokens": completion + reasoning,
            "total_tokens": prompt + completion + reasoning}


def usage_openrouter(prompt: int, completion: int, reasoning: int, cached: int = 0) -> dict[str, Any]:
    """OpenRouter's: OpenAI's, with its charge in credits (https://openrouter.ai/docs/use-cases/usage-accounting)."""
    return {**usage_openai(prompt, completion, reasoning, cached),
            "cost": round(((prompt - cached) * 1.75 + cached * 0.175 + (completion + reasoning) * 14.0) / 1e6, 8), "is_byok": False,
            "cost_details": {"upstream_inference_cost": None}}


def usage_litellm(prompt: int, completion: int, reasoning: int, cached: int = 0) -> dict[str, Any]:
    """LiteLLM 1.108.7's, in front of OpenAI: OpenAI's, with the proxy's own price of the call in `cost` (seen in its
    stream on this machine; BerriAI/litellm's "include_cost_in_streaming_usage")."""
    return {**usage_openai(prompt, completion, reasoning, cached),
            "cost": round((prompt * 1.75 + (completion + reasoning) * 14.0) / 1e6, 8)}


def usage_thoughts_apart(prompt: int, completion: int, reasoning: int, cached: int = 0) -> dict[str, Any]:
    """Gemini's thoughts outside completion_tokens, inside total_tokens, named in completion_tokens_details
    (https://github.com/router-for-me/CLIProxyAPI/issues/5733, https://github.com/mozilla-ai/any-llm/issues/1290)."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion + reasoning,
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


@dataclass(frozen=True)
class Profile:
    """One provider serving one model. `api`: where its OpenAI-compatible API lives; `routes`: what it answers beside
    it (path -> JSON); `reasoning`: tokens the model reasons with per answer."""

    name: str
    model: str
    api: str = "/v1"
    chat: bool = True
    responses: bool = False
    rules: tuple[Rule, ...] = ()
    usage: Callable[[int, int, int, int], dict[str, Any]] = usage_plain  # prompt, completion, reasoning, cached
    reasoning: int = 0
    routes: dict[str, Any] = field(default_factory=dict)
    reasoning_field: str = ""  # the delta field a reasoning parser's text comes in ("": none sent)
    local: bool = False  # a server people run on their own machine (its model is its own, whatever its name)
    signs_calls: bool = False  # each tool call streamed with extra_content.google.thought_signature (Gemini 3)
    recount: float = 0.0  # answers cut at the cap sent, their tokens recounted by a gateway's tokenizer at this share of
    #                       the model's (LiteLLM's 922 for llama-cpp-python's 1024: issue 59, item 6); 0: not cut here
    window: int = 0  # the model's window behind a gateway: a request over it (prompt and cap) is answered, streamed,
    #                  with an empty 200 stream, and unstreamed with the 400 that names it (0: no window)


def _models(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"object": "list", "data": [{"object": "model", "owned_by": "emulator", **e} for e in entries]}


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("openai-gpt-5-mini", "gpt-5-mini", responses=True, rules=(TEMPERATURE_NOT_DEFAULT, MAX_TOKENS,
            RESPONSES_TEMPERATURE), usage=usage_openai, reasoning=192),
    Profile("openai-gpt-5.1-codex", "gpt-5.1-codex", responses=True, rules=(NOT_A_CHAT_MODEL, RESPONSES_TEMPERATURE),
            usage=usage_openai, reasoning=256),
    # Azure OpenAI's v1 endpoint: https://RESOURCE.openai.azure.com/openai/v1/, the deployment's name as the model
    Profile("azure-gpt-5-mini", "gpt-5-mini", api="/openai/v1", responses=True,
            rules=(TEMPERATURE_NOT_DEFAULT, MAX_TOKENS, RESPONSES_TEMPERATURE), usage=usage_openai, reasoning=192),
    # OpenRouter: https://openrouter.ai/api/v1; its model list names each model's context_length
    Profile("openrouter-gpt-5.2", "openai/gpt-5.2", api="/api/v1", usage=usage_openrouter, reasoning=128,
            reasoning_field="reasoning",
            routes={"/api/v1/models": _models({"id": "openai/gpt-5.2", "context_length": 400_000})}),
    Profile("litellm-gpt-5", "gpt-5", rules=(LITELLM_TEMPERATURE,), usage=usage_openai, reasoning=160),
    Profile("litellm-no-db", "gpt-5", rules=(LITELLM_NO_DB,), routes={"/v1/models": LITELLM_NO_DB}),
    # LiteLLM 1.108.7 on this machine in front of OpenAI, as its GET /v1/models and GET /v1/model/info answered here
    # for `model_name: openai/gpt-5.2` (no model_info in its config: the window and prices are LiteLLM's own table's)
    Profile("litellm-local-gpt-5.2", "openai/gpt-5.2", usage=usage_litellm, reasoning=128, local=True, routes={
        "/v1/models": _models({"id": "openai/gpt-5.2", "mode": "chat", "max_input_tokens": 272000,
                               "max_output_tokens": 128000}),
        "/v1/model/info": {"data": [{"model_name": "openai/gpt-5.2", "model_info": {
            "max_tokens": 128000, "max_input_tokens": 272000, "max_output_tokens": 128000,
            "input_cost_per_token": 1.75e-06, "output_cost_per_token": 1.4e-05, "litellm_provider": "openai"}}]}}),
    # LiteLLM in front of llama-cpp-python (n_ctx 4096): a prompt over the window drops llama-cpp-python's stream, which
    # LiteLLM passes on as a 200 stream with finish_reason "stop" and no content (issue 59, item 5); unstreamed, the
    # proxy forwards llama-cpp-python's OpenAI-worded 400
    Profile("litellm-llama-cpp-python", "smollm2", usage=usage_plain, local=True, window=4096, recount=0.9),
    # a gateway on this machine that reports no window for a hosted model's exact name (an older LiteLLM; a proxy of
    # one's own): the catalogue's entry for that exact name
    Profile("gateway-local-no-window", "openai/gpt-5.2", usage=usage_openai, reasoning=128, local=True),
    # Anthropic's compatible endpoint ignores response_format, seed and reasoning_effort
    # (https://platform.claude.com/docs/en/api/openai-sdk): nothing of ours is refused
    Profile("anthropic-claude-sonnet-4-5", "claude-sonnet-4-5"),
    Profile("google-gemini-2.5-flash", "gemini-2.5-flash", api="/v1beta/openai", usage=usage_thoughts_apart,
            reasoning=300),
    Profile("google-gemini-3-flash", "gemini-3-flash-preview", api="/v1beta/openai", usage=usage_thoughts_apart,
            reasoning=300, rules=(GEMINI_SIGNATURE,), signs_calls=True),
    # DeepSeek: https://api.deepseek.com, thinking mode on by default, its reasoning streamed as reasoning_content
    Profile("deepseek-v4-flash", "deepseek-v4-flash", api="", rules=(DEEPSEEK_REASONING_BACK,), usage=usage_openai,
            reasoning=120, reasoning_field="reasoning_content"),
    Profile("ollama-gemma3", "gemma3:4b", rules=(OLLAMA_TOOLS,), local=True, routes={
        "/api/show": {"parameters": "num_ctx                        8192",
                      "model_info": {"gemma3.context_length": 131072}}}),
    Profile("vllm-qwen2.5-coder", "Qwen/Qwen2.5-Coder-7B-Instruct", rules=(VLLM_TOOLS,), local=True,
            routes={"/v1/models": _models({"id": "Qwen/Qwen2.5-Coder-7B-Instruct", "max_model_len": 32768})}),
    Profile("lmstudio-qwen2.5-coder", "qwen2.5-coder-7b-instruct", rules=(LM_STUDIO_JSON_OBJECT,), local=True, routes={
        "/api/v0/models": _models({"id": "qwen2.5-coder-7b-instruct", "state": "loaded",
                                   "loaded_context_length": 16384, "max_context_length": 32768})}),
    Profile("llama.cpp-no-jinja", "qwen2.5-coder-7b-q4_k_m.gguf", rules=(LLAMA_CPP_TOOLS,), local=True, routes={
        "/props": {"default_generation_settings": {"n_ctx": 8192}}}),
)}


class ProviderEmulator(LoopbackServer):
    def __init__(self, profile: Profile | str, script: list[Step] | None = None, ahead: list[Rule] | None = None) -> None:
        self.profile = PROFILES[profile] if isinstance(profile, str) else profile
        self.script: list[Step] = list(script or [])
        self.ahead: list[Rule] = list(ahead or [])  # the next requests' answers, each once, before the profile's
        self.times: list[float] = []  # when each chat or Responses request came (time.monotonic())
        self.signatures: dict[str, str] = {}  # call id -> the thought signature it was streamed with
        self.requests: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []  # the requests answered with a documented refusal
        self.encrypted: dict[str, str] = {}  # reasoning item id -> the encrypted content sent with it
        self.lock = threading.Lock()
        self.prompts: list[list[int]] = []  # every prompt answered, as tokens: what OpenAI's cache may hold
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                emulator.requests.append({"path": self.path, "method": "GET"})
                self._route(None)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with emulator.lock:
                    emulator.requests.append({"path": self.path, "body": body})
                    emulator.times.append(time.monotonic())
                api = emulator.profile.api
                if self.path == f"{api}/chat/completions":
                    return emulator.chat(self, body)
                if self.path == f"{api}/responses":
                    return emulator.respond(self, body)
                self._route(body)

            def _route(self, body: Any) -> None:
                profile = emulator.profile
                if isinstance(route := profile.routes.get(self.path), Rule):
                    return send_json(self, route.status, route.body, route.headers)
                if self.path in profile.routes:
                    return send_json(self, 200, profile.routes[self.path])
                if self.path == f"{profile.api}/models":
                    return send_json(self, 200, _models({"id": profile.model}))
                send_json(self, 404, openai_error(f"no route {self.path}", code="not_found"))

        self.serve(Handler)

    # ----- the endpoints --------------------------------------------------------------------------------------------
    def refusal(self, endpoint: str, body: dict[str, Any]) -> Rule | None:
        served = self.profile.chat if endpoint == CHAT else self.profile.responses
        if not served:
            return Rule(endpoint, always, 404, openai_error(f"no route /{endpoint}", code="not_found"))
        with self.lock:
            if self.ahead and self.ahead[0].endpoint == endpoint:
                return self.ahead.pop(0)
        return next((r for r in self.profile.rules if r.endpoint == endpoint and r.when(body)), None)

    def next_step(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        with self.lock:
            step = self.script.pop(0) if self.script else "scripted emulator: no more answers"
        step = step(body) if callable(step) else step
        if isinstance(step, dict):
            calls = [{"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                      else json.dumps(c["arguments"])} for c in step.get("tool_calls", [])]
            return str(step.get("answer", "")), calls
        return step, []

    def cached(self, ids: list[int]) -> int:
        """What OpenAI's cache serves of a prompt (its tokens): the start an earlier prompt shared, in steps of
        CACHED_STEP, once the prompt has CACHED_FROM tokens. Each prompt is kept for the next."""
        with self.lock:
            shared = max((shared_prefix(ids, earlier) for earlier in self.prompts), default=0)
            self.prompts.append(ids)
        return min(shared, len(ids) - 1) // CACHED_STEP * CACHED_STEP if len(ids) >= CACHED_FROM else 0

    def chat(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if rule := self.refusal(CHAT, body):
            self.refused.append(body)
            return send_json(handler, rule.status, rule.body, rule.headers)
        if self.profile.window and (requested := self.requested(body)) > self.profile.window:
            self.refused.append(body)
            if body.get("stream"):
                chunk = {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": self.profile.model, "choices": [
                             {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
                return send_events(handler, [json.dumps(chunk)])
            return send_json(handler, 400, openai_error(
                "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
                f"OpenAIException - This model's maximum context length is {self.profile.window} tokens. However, you "
                f"requested {requested} tokens ({prompt_tokens(body)} in the messages, {self.cap(body)} in the "
                "completion). Please reduce the length of the messages or completion.", code="400"))
        if not body.get("stream"):
            return self.completion(handler, body)
        answer, calls = self.next_step(body)
        reasoning, cap, completion = self.profile.reasoning, self.cap(body), tokens.count_tokens(answer)
        cut = bool(self.profile.recount and cap and completion > cap)
        if cut:
            answer, completion = answer[:len(answer) * cap // completion], round(cap * self.profile.recount)
        usage = self.profile.usage(prompt_tokens(body), completion, reasoning, self.cached(prompt_ids(body)))
        deltas: list[dict[str, Any]] = []
        if self.profile.reasoning_field and reasoning:
            deltas.append({self.profile.reasoning_field: "Thinking about the failing test first."})
        deltas += [{"content": answer[i:i + 16]} for i in range(0, len(answer), 16)]
        for index, call in enumerate(calls):
            piece = {"index": index, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                     "function": {"name": call["name"], "arguments": call["arguments"]}}
            if self.profile.signs_calls:
                self.signatures[piece["id"]] = f"CiQB{uuid.uuid4().hex}"
                piece["extra_content"] = {"google": {"thought_signature": self.signatures[piece["id"]]}}
            deltas.append({"tool_calls": [piece]})
        chunk = {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": self.profile.model}
        events = [{**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "length" if cut else
                                             "tool_calls" if calls else "stop"}]})
        events.append({**chunk, "choices": [], "usage": usage})
        send_events(handler, [json.dumps(e) for e in events])

    @staticmethod
    def cap(body: dict[str, Any]) -> int:
        return int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)

    def requested(self, body: dict[str, Any]) -> int:
        return prompt_tokens(body) + self.cap(body)

    def completion(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        """An unstreamed chat answer: the completion object."""
        answer, calls = self.next_step(body)
        message: dict[str, Any] = {"role": "assistant", "content": answer or None}
        if calls:
            message["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": call}
                                     for call in calls]
        send_json(handler, 200, {"id": "chatcmpl-emulated", "object": "chat.completion", "created": int(time.time()),
                                 "model": self.profile.model, "choices": [{
                                     "index": 0, "message": message,
                                     "finish_reason": "tool_calls" if calls else "stop"}],
                                 "usage": self.profile.usage(prompt_tokens(body), tokens.count_tokens(answer),
                                                             self.profile.reasoning, 0)})

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        rule = self.refusal(RESPONSES, body) or self.unmatched(body)
        if rule:
            self.refused.append(body)
            return send_json(handler, rule.status, rule.body, rule.headers)
        answer, calls = self.next_step(body)
        events = self.events(body, answer, calls)
        send_events(handler, [json.dumps(e) for e in events], names=[e["type"] for e in events])

    def unmatched(self, body: dict[str, Any]) -> Rule | None:
        """A call's output without its call, a call without its output, or a reasoning item not sent back whole."""
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        called = {i.get("call_id") for i in items if i.get("type") == "function_call"}
        answered = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
        if stray := sorted(answered - called):
            return Rule(RESPONSES, always, 400, openai_error(
                f"No tool call found for function call output with call_id {stray[0]}.", "input"))
        if missing := sorted(called - answered):
            return Rule(RESPONSES, always, 400, openai_error(
                f"No tool output found for function call {missing[0]}.", "input"))
        for item in items:
            if item.get("type") == "reasoning" and self.encrypted.get(item.get("id")) != item.get("encrypted_content"):
                return Rule(RESPONSES, always, 404, openai_error(
                    f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is set to "
                    f"false. Try again with `store` set to true, or remove this item from your input.", "input"))
        return None

    def events(self, body: dict[str, Any], answer: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The Responses API's stream, event by event, built from the SDK's types."""
        output: list[Any] = []
        if self.profile.reasoning and ["reasoning.encrypted_content"] == body.get("include"):
            rs_id = f"rs_{uuid.uuid4().hex[:16]}"
            self.encrypted[rs_id] = f"gAAAAB{uuid.uuid4().hex}"
            output.append(ResponseReasoningItem(id=rs_id, type="reasoning", summary=[],
                                                encrypted_content=self.encrypted[rs_id]))
        if answer:
            output.append(ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex[:16]}", type="message", role="assistant",
                                                status="completed", content=[ResponseOutputText(
                                                    type="output_text", text=answer, annotations=[])]))
        output += [ResponseFunctionToolCall(type="function_call", id=f"fc_{uuid.uuid4().hex[:16]}",
                                            call_id=f"call_{uuid.uuid4().hex[:12]}", name=call["name"],
                                            arguments=call["arguments"], status="completed") for call in calls]
        prompt = sum(tokens.count_tokens(json.dumps(i)) for i in body.get("input") or []) + \
            tokens.count_tokens(body.get("instructions") or "")
        reasoning = self.profile.reasoning if output and output[0].type == "reasoning" else 0
        completion = tokens.count_tokens(answer) + sum(tokens.count_tokens(c["arguments"]) for c in calls)
        parts = [body.get("instructions") or "", *map(json.dumps, body.get("input") or [])]  # in the order sent
        cached = self.cached([token for part in parts for token in text_ids(part)])
        usage = ResponseUsage(input_tokens=prompt, input_tokens_details=InputTokensDetails(cached_tokens=cached,
                                                                                           cache_write_tokens=0),
                              output_tokens=completion + reasoning,
                              output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning),
                              total_tokens=prompt + completion + reasoning)
        response = Response(id=f"resp_{uuid.uuid4().hex[:16]}", object="response", created_at=time.time(),
                            model=self.profile.model, output=[], parallel_tool_calls=True, tool_choice="auto",
                            tools=[], status="in_progress")
        events: list[Any] = [ResponseCreatedEvent(type="response.created", sequence_number=0, response=response)]
        for index, item in enumerate(output):
            added = item.model_copy(update={"arguments": ""}) if item.type == "function_call" else item
            events.append(ResponseOutputItemAddedEvent(type="response.output_item.added", output_index=index,
                                                       item=added, sequence_number=0))
            if item.type == "message":
                events += [ResponseTextDeltaEvent(type="response.output_text.delta", item_id=item.id,
                                                  output_index=index, content_index=0, delta=answer[i:i + 16],
                                                  logprobs=[], sequence_number=0)
                           for i in range(0, len(answer), 16)]
            if item.type == "function_call":
                events += [ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta", item_id=item.id, output_index=index,
                    delta=item.arguments[i:i + 7], sequence_number=0) for i in range(0, len(item.arguments), 7)]
                events.append(ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done", item_id=item.id, output_index=index,
                    arguments=item.arguments, name=item.name, sequence_number=0))
            events.append(ResponseOutputItemDoneEvent(type="response.output_item.done", output_index=index,
                                                      item=item, sequence_number=0))
        done = response.model_copy(update={"status": "completed", "output": output, "usage": usage})
        events.append(ResponseCompletedEvent(type="response.completed", response=done, sequence_number=0))
        return [e.model_copy(update={"sequence_number": n}).model_dump(mode="json", exclude_none=True)
                for n, e in enumerate(events)]

    # ----- the server -----------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.profile.api}"

    def bodies(self, endpoint: str) -> list[dict[str, Any]]:
        """The bodies of the requests sent to an endpoint ("chat", "responses"), refused ones too, in order."""
        path = f"{self.profile.api}/{'chat/completions' if endpoint == CHAT else 'responses'}"
        return [r["body"] for r in self.requests if r["path"] == path]


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any,
              headers: tuple[tuple[str, str], ...] = ()) -> None:
    """A JSON answer (a str payload goes as plain text, as some servers' errors do)."""
    text = isinstance(payload, str)
    data = payload.encode() if text else json.dumps(payload).encode()
    handler.send_response(status)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Type", "text/plain" if text else "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def send_events(handler: BaseHTTPRequestHandler, events: list[str], names: list[str] | None = None) -> None:
    """Server-sent events: `data: <json>` each (after `event: <name>`, as the Responses API names them), then the
    chat stream's `data: [DONE]`."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()
    for n, event in enumerate(events):
        named = f"event: {names[n]}\n" if names else ""
        handler.wfile.write(f"{named}data: {event}\n\n".encode())
    if not names:
        handler.wfile.write(b"data: [DONE]\n\n")
    handler.wfile.flush()
