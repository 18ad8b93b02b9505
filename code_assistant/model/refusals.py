"""What a server's refusal says: the table of documented refusals and what each teaches (read_refusal, pure), and the
one line for the user when a refusal ends the run (fatal_message).

Each row: the provider, the wording as the provider (or its users' public issues) quote it, with where it was found,
and the lesson — what the model is asked with from then on, for the rest of the session (accepts.py, chat.py). The
first matching row wins; rows whose lesson is None name the refused parameter in their first group, and the lesson is
that parameter's (PARAMETERS). A wording is matched against the error's message, then its whole body as JSON (a code
or a type the message leaves out: `unsupported_api_for_model`, `exceed_context_size_error`, pydantic's `loc`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import openai

from code_assistant.model.error_bodies import body_message
from code_assistant.model.retry import lasting_cause
from code_assistant.model.server_reports import v1_hint


class Lesson(StrEnum):
    """What a refusal teaches about the server and model, kept for the session."""

    REASONING = "reasoning"  # a reasoning model: no temperature, max_completion_tokens sized for reasoning too
    NO_TEMPERATURE = "temperature"
    COMPLETION_TOKENS = "max_completion_tokens"  # in place of max_tokens
    MAX_TOKENS = "max_tokens"  # in place of max_completion_tokens (a server that does not know it)
    NO_SEED = "seed"
    NO_REASONING_EFFORT = "reasoning_effort"
    NO_ENCRYPTED_REASONING = "encrypted_reasoning"  # the Responses API's include: ["reasoning.encrypted_content"]
    RESPONSE_FORMAT = "response_format"  # the next structured-output form (structured.py)
    NO_TOOLS = "tools"  # the tools described in words (exchange.py)
    RESPONSES = "responses"  # the model is served by the Responses API only
    WINDOW = "window"  # the refusal names the context window (window.py reads it)
    REASONING_BACK = "reasoning_content"  # tool-call turns go back with their reasoning_content (DeepSeek)
    SIGNATURE_BACK = "thought_signature"  # tool calls go back with a thought signature (Gemini)


PARAMETERS: dict[str, Lesson] = {  # a refused parameter, as the generic rows name it
    "temperature": Lesson.NO_TEMPERATURE, "max_tokens": Lesson.COMPLETION_TOKENS,
    "max_completion_tokens": Lesson.MAX_TOKENS, "seed": Lesson.NO_SEED, "reasoning_effort": Lesson.NO_REASONING_EFFORT,
    "reasoning": Lesson.NO_REASONING_EFFORT, "reasoning.effort": Lesson.NO_REASONING_EFFORT,
    "include": Lesson.NO_ENCRYPTED_REASONING, "response_format": Lesson.RESPONSE_FORMAT, "text.format":
    Lesson.RESPONSE_FORMAT, "tools": Lesson.NO_TOOLS, "tool_choice": Lesson.NO_TOOLS,
}


@dataclass(frozen=True)
class Wording:
    provider: str
    wording: re.Pattern[str]
    lesson: Lesson | None  # None: the parameter named in the wording's first group


def _row(provider: str, wording: str, lesson: Lesson | None) -> Wording:
    return Wording(provider, re.compile(wording, re.IGNORECASE | re.DOTALL), lesson)


REFUSALS: tuple[Wording, ...] = (
    # https://github.com/QwenLM/qwen-code/issues/921 (gpt-5-mini), https://github.com/OpenHands/OpenHands/issues/4131
    # (o1-mini), https://github.com/gabrii/Cursor-Azure-GPT-5/issues/33 (Azure): "Unsupported value: 'temperature'
    # does not support 0 with this model. Only the default (1) value is supported.", code unsupported_value
    _row("OpenAI, Azure OpenAI", r"'temperature' does not support \S+ with this model\. Only the default \(1\) value",
         Lesson.REASONING),
    # https://github.com/griptape-ai/ComfyUI-Griptape/issues/312 (gpt-5), https://github.com/teilomillet/gollm/issues/33
    # (o1, o3-mini), https://github.com/OpenHands/software-agent-sdk/issues/1083 (Azure): "Unsupported parameter:
    # 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    _row("OpenAI, Azure OpenAI", r"'max_tokens' is not supported with this model\. Use 'max_completion_tokens'",
         Lesson.REASONING),
    # https://github.com/OpenHands/software-agent-sdk/issues/1837 (gpt-5.2, gpt-5.2-codex): "Unsupported parameter:
    # 'temperature' is not supported with this model.", param temperature
    _row("OpenAI", r"Unsupported parameter: 'temperature' is not supported with this model", Lesson.REASONING),
    # https://github.com/jentic/standard-agent/issues/31: "litellm.UnsupportedParamsError: gpt-5 models don't support
    # temperature=0.2. Only temperature=1 is supported."; https://github.com/BerriAI/litellm/pull/33738: "gpt-5-nano
    # doesn't support temperature=0.1 while reasoning is active. Only temperature=1 is supported"
    _row("LiteLLM", r"support temperature=\S+.*Only temperature=1 is supported", Lesson.REASONING),
    # https://github.com/pydantic/pydantic-ai/issues/2865 (gpt-4o on the Responses API): "Encrypted content is not
    # supported with this model.", param include
    _row("OpenAI", r"Encrypted content is not supported with this model", Lesson.NO_ENCRYPTED_REASONING),
    # https://github.com/tingly-dev/tingly-box/issues/233 (gpt-5.2-codex), https://github.com/micz/ThunderAI/issues/570:
    # 404 "This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean to use
    # v1/completions?"
    _row("OpenAI", r"not a chat model and thus not supported in the v1/chat/completions endpoint", Lesson.RESPONSES),
    # https://github.com/pgadmin-org/pgadmin4/issues/9795 (gpt-5-pro), https://github.com/arbs-io/vscode-openai/issues/358
    # (gpt-5-codex): 404 "This model is only supported in v1/responses and not in v1/chat/completions."
    _row("OpenAI", r"only supported in v1/responses and not in v1/chat/completions", Lesson.RESPONSES),
    # https://github.com/caozhiyuan/copilot-api/issues/102: "model gpt-5.3-codex is not accessible via the
    # /chat/completions endpoint", code unsupported_api_for_model
    _row("GitHub Copilot's API", r"unsupported_api_for_model", Lesson.RESPONSES),
    # https://github.com/anomalyco/opencode/issues/24083, https://github.com/MGdaasLab/WHartTest/issues/95: 400 {"error":
    # {"message": "The reasoning_content in the thinking mode must be passed back to the API.", "type":
    # "invalid_request_error", "code": "invalid_request_error"}}
    _row("DeepSeek", r"reasoning_content.{0,20} in the thinking mode must be passed back", Lesson.REASONING_BACK),
    # https://github.com/manthanabc/paws/issues/103 (its body an array), https://github.com/nearai/ironclaw/issues/1521:
    # 400 "Function call is missing a thought_signature in functionCall parts. This is required for tools to work
    # correctly, ...", status INVALID_ARGUMENT
    _row("Gemini", r"missing a thought_signature", Lesson.SIGNATURE_BACK),
    # https://github.com/vllm-project/vllm/issues/9986: 400 "\"auto\" tool choice requires --enable-auto-tool-choice
    # and --tool-call-parser to be set"
    _row("vLLM", r'"auto" tool choice requires --enable-auto-tool-choice', Lesson.NO_TOOLS),
    # https://github.com/ollama/ollama/issues/6027 (/v1: {"error": {"message": "stablelm2:latest does not support
    # tools", "type": "api_error"}}), https://github.com/ollama/ollama/issues/14795
    _row("Ollama", r"does not support tools", Lesson.NO_TOOLS),
    # https://github.com/containers/ramalama/issues/988, https://github.com/defilantech/LLMKube/issues/126: llama.cpp's
    # llama-server without --jinja: 500 "tools param requires --jinja flag", type server_error
    _row("llama.cpp", r"tools param requires --jinja flag", Lesson.NO_TOOLS),
    # https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189 (json_object): 400 {"error": "'response_format.type'
    # must be 'json_schema'"}; LM Studio 0.4 adds "or 'text'" (https://github.com/LoadShine/tada/issues/16)
    _row("LM Studio", r"'response_format\.type' must be 'json_schema'", Lesson.RESPONSE_FORMAT),
    # https://github.com/ggml-org/llama.cpp/issues/23463: llama-cpp-python's server answers a json_schema
    # response_format with 500 and pydantic's validation error, located at ('body', 'response_format', 'type')
    _row("llama-cpp-python", r"'response_format', 'type'", Lesson.RESPONSE_FORMAT),
    # https://github.com/ikawrakow/ik_llama.cpp/issues/778 (llama.cpp's server before json_schema): 500 "response_format
    # type must be one of \"text\" or \"json_object\", but got: json_schema"
    _row("llama.cpp", r"response_format type must be one of", Lesson.RESPONSE_FORMAT),
    # https://github.com/ggml-org/llama.cpp/pull/15780, https://github.com/oobabooga/textgen/issues/7257: {"error":
    # {"code": 400, "message": "the request exceeds the available context size. try increasing the context size or
    # enable context shift", "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}}
    _row("llama.cpp", r"exceed_context_size_error", Lesson.WINDOW),
    # https://github.com/conghaonet/hao_chatgpt/issues/4 (OpenAI), https://github.com/evalstate/fast-agent/issues/621
    # (an OpenAI-compatible API; vLLM's words are the same): "This model's maximum context length is 4097 tokens.
    # However, you requested 4268 tokens (4012 in the messages, 256 in the completion). ..."
    _row("OpenAI, vLLM, llama-cpp-python", r"maximum context length is \d+ tokens", Lesson.WINDOW),
    # https://github.com/BerriAI/litellm/issues/3923 ("ollama does not support parameters: {'seed': 1}"),
    # https://github.com/mcdonc/klangk/pull/2067 ("zai does not support parameters: ['max_completion_tokens']")
    _row("LiteLLM", r"does not support parameters: [\[{]'([\w.]+)'", None),
    # https://github.com/Kilo-Org/cloud/pull/3807: "Unsupported value: 'reasoning_effort' does not support 'none' with
    # this model. Supported values are: 'minimal', 'low', 'medium', and 'high'."
    _row("OpenAI", r"Unsupported value: '([\w.]+)' does not support", None),
    # OpenAI's code unsupported_parameter, as above for max_tokens and temperature, for any other parameter
    _row("OpenAI", r"Unsupported parameter: '([\w.]+)' is not supported with this model", None),
    # https://github.com/openai/openai-python/issues/1724 (Azure OpenAI, older api-versions): "Unrecognized request
    # argument supplied: max_completion_tokens"
    _row("Azure OpenAI", r"Unrecognized request argument supplied: ([\w.]+)", None),
    # https://github.com/langchain-ai/langchain-azure/issues/82 (Azure AI Foundry, a Mistral model): {"detail":
    # [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted"}]}
    _row("Azure AI Foundry", r'"extra_forbidden", "loc": \["body", "([\w.]+)"\]', None),
)


@dataclass(frozen=True)
class Read:
    """What a refusal was read as: its row, the lesson, and the parameter it names ("" when the row names none)."""

    row: Wording
    lesson: Lesson
    parameter: str = ""


def read_refusal(status: int, body: Any) -> Read | None:
    """The documented refusal an error is (None: none of the table's, or a parameter we never send)."""
    if status < 400:
        return None
    message = body_message(body)
    whole = json.dumps(body) if body is not None else ""
    for row in REFUSALS:
        found = row.wording.search(message) or row.wording.search(whole)
        if found is None:
            continue
        if row.lesson is not None:
            return Read(row, row.lesson)
        parameter = found.group(1)
        lesson = PARAMETERS.get(parameter)
        return Read(row, lesson, parameter) if lesson is not None else None
    return None


def error_body(exc: openai.APIError) -> Any:
    """The error answer's body: parsed JSON in whatever shape it came (object, array), else its text."""
    response = getattr(exc, "response", None)
    if response is None:
        return {"error": exc.body}
    try:
        return response.json()
    except Exception:  # noqa: BLE001 - a non-JSON error body is still an error: its text says what
        try:
            return response.text or None
        except Exception:  # noqa: BLE001 - a streamed body already closed
            return None


def error_detail(exc: openai.APIError) -> str:
    return body_message(error_body(exc))


def fatal_message(exc: openai.APIStatusError, base_url: str | None, hint: str = "") -> str:
    """A refusal that ends the run: its lasting cause where the body names one (retry.py), else what the server said
    and what to check (401, 403; a 404: the /v1 the URL may lack)."""
    where = base_url or "api.openai.com"
    detail = error_detail(exc).splitlines()[0][:300] if error_detail(exc) else ""
    suffix = f": {detail}" if detail else ""
    if exc.status_code == 401:
        return f"the model server at {where} rejected the API key (401 Unauthorized){suffix}; check OPENAI_API_KEY"
    if exc.status_code == 403:
        return f"the model server at {where} refused access (403 Forbidden){suffix}"
    if exc.status_code == 404:
        found = v1_hint(base_url)
        return (f"the model or endpoint was not found at {where} (404){suffix}"
                f"{found or hint or '; check OPENAI_MODEL and OPENAI_BASE_URL'}")
    if cause := lasting_cause(exc.status_code, error_body(exc)):
        return f"the model server at {where} refused the request: {cause} ({exc.status_code}{suffix})"
    return f"the model server at {where} answered {exc.status_code}{suffix}{hint}"
