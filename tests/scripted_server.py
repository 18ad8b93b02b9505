"""A scripted OpenAI-compatible server on 127.0.0.1 for tests: the real `openai` client talks to it over HTTP.

Each chat request takes the next step of the script:
- a string: the assistant's answer;
- a callable(request_json) -> str: an answer computed from the request (e.g. from the files it shows);
- a dict {"status": 500, "message": "..."}: an HTTP error with an OpenAI-style error body;
- a dict {"sleep": seconds, "answer": str}: answer late (for timeout tests);
- a dict {"gap": seconds, "answer": str}: stream the answer with that pause between pieces (a slow local model);
  `streams` then says, for each streamed answer, how many of its pieces were sent before the client closed the
  stream (llama.cpp's server stops generating there);
- a dict {"stall": seconds, "answer": str}: stream the first piece, then send nothing for that long;
- a dict {"dropped": True}: a stream's headers, then the connection closed before any event (the stream broken off;
  unstreamed: the connection closed without an answer);
- a dict {"reasoning": str, "answer": str}: the answer with a reasoning parser's reasoning beside it, as
  `reasoning_content` (or the field named by "reasoning_field", e.g. "reasoning") of the message, or of the stream's
  first deltas, before the answer's;
- a dict {"tool_calls": [{"name": str, "arguments": dict | str}, ...], "answer": str (optional)}: an answer that asks
  for native tool calls (finish_reason "tool_calls"), each with an id; streamed, a call's arguments arrive in pieces
  of a few characters, as real servers send them.
A request that carries a `seed` found in `by_seed` takes the next step of that seed's own script instead: best of N
asks each candidate with its own seed, in parallel, so each candidate's answers are scripted apart.
Every request body is recorded in `requests` so tests can assert on what the model was sent; `usages` holds the
usage the server answered with (its prompt count is the cl100k count of the messages plus a template overhead).

What real local servers do, on request:
- `accepts`: the response_format types the server takes ("json_schema", "json_object"); a request with another is
  refused with `refuse_status` and a message naming response_format, as llama-cpp-python's server does with a 500.
  None (the default) takes any, and ignores it, as some servers do.
- `context_window`: a request whose prompt plus max_tokens passes it is refused with 400 and vLLM's words ("This
  model's maximum context length is N tokens ..."), streamed or not. With `overflow="llama-cpp-python"`, what
  llama-cpp-python's server (0.3.36, under uvicorn) does instead: it refuses only a prompt that fills the window
  (prompt >= window; an answer that would pass the window is cut there); unstreamed, with 400 and words like vLLM's;
  streamed, with a whole event stream of no event (200, chunked, ended), after which it drops the connection, which
  it had kept alive: the request a client sends on that connection next is reset, unanswered ("Connection error.").
  The real server drops it a few milliseconds later, so a client that asks at once loses that race most of the
  time; this one drops it when the client next sends on it (or closes it), so it always does.
- `stream_usage=False`: streams carry no usage chunk (llama-cpp-python).
- `fixed_prompt_tokens=N`: every answer reports `prompt_tokens: N`, whatever was sent (a proxy's fixed or
  estimated usage).
- `cache="uncounted"`: from the second request on, `prompt_tokens` counts only the tokens after the longest prefix
  shared with an earlier request (a caching server that counts what it processed, as Ollama's llama-server runner
  did); `cache="cached_tokens"` also reports that prefix as `usage.prompt_tokens_details.cached_tokens`.
- `silent_cut=N`: a prompt over N tokens is answered all the same, with `prompt_tokens: N` (Ollama's way: it keeps
  what fits its window and drops the rest without a word).
- `prompt_speed=N`: the server reads prompts at N tokens a second, sending nothing meanwhile (a model on a CPU);
  with `timings=True` its answers carry llama.cpp's `timings` (`prompt_n`, `prompt_ms`, `prompt_per_second`), in
  a stream's last chunk.
- always: an answer longer than the request's max_tokens stops there, with finish_reason "length".
- `info`: JSON answers for other paths (GET /props, GET /v1/models, POST /api/show, ...); any other path is a 404.
None of these consume a step of the script. Providers as their documents describe them (hosted APIs, gateways, the
Responses API, the refusals they publish) are tests/provider_emulator.py's.
"""
from __future__ import annotations

import hashlib
import json
import select
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from code_assistant import tokens
from tests.loopback import LoopbackServer

Step = str | Callable[[dict[str, Any]], str] | dict[str, Any]
TEMPLATE_TOKENS = 8  # per message, like a chat template's role markers
DROP_WAIT_S = 30  # how long a refused stream's connection is kept, at most, for the client's next request on it
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\n"
               b"connection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n")  # uvicorn's, for an SSE response


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(digest[i % len(digest)] - 128) / 128.0 for i in range(dim)]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    return [v / norm for v in raw]


def prompt_tokens(body: dict[str, Any]) -> int:
    return sum(tokens.count_tokens(str(m.get("content", ""))) + TEMPLATE_TOKENS for m in body.get("messages", []))


def text_ids(text: str) -> list[int]:
    """A text as tokens (zeros, as many as count_tokens says, where no encoding is at hand)."""
    encoding = tokens.get_encoding()
    return encoding.encode(text, disallowed_special=()) if encoding else [0] * tokens.count_tokens(text)


def prompt_ids(body: dict[str, Any]) -> list[int]:
    """The prompt as the server's tokens: per message, its template's tokens (negative ids naming the role) and its
    text's; as many as prompt_tokens() counts. A cache is keyed by a prefix of these."""
    ids: list[int] = []
    for message in body.get("messages", []):
        role = -1 - {"system": 0, "user": 1, "assistant": 2}.get(str(message.get("role")), 3)
        ids += [role] * TEMPLATE_TOKENS + text_ids(str(message.get("content", "")))
    return ids


def shared_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two prompts start with alike."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cut(answer: str, max_tokens: int | None) -> tuple[str, str]:
    """An answer longer than max_tokens stops there, as a model's does: (text, finish_reason)."""
    encoding = tokens.get_encoding()
    if not max_tokens or encoding is None:
        return answer, "stop"
    ids = encoding.encode(answer, disallowed_special=())
    return (encoding.decode(ids[:max_tokens]), "length") if len(ids) > max_tokens else (answer, "stop")


def _tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scripted calls in OpenAI's form, each with an id; arguments given as an object are sent as JSON text."""
    return [{"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
             "function": {"name": call["name"], "arguments": call["arguments"] if isinstance(call["arguments"], str)
                          else json.dumps(call["arguments"])}} for call in calls]


def _form(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    return fmt.get("type") if isinstance(fmt, dict) else None


class ScriptedServer(LoopbackServer):
    def __init__(self, script: list[Step] | None = None, *, accepts: tuple[str, ...] | None = None,
                 refuse_status: int = 500, context_window: int | None = None, overflow: str = "vllm",
                 stream_usage: bool = True, info: dict[str, Any] | None = None,
                 by_seed: dict[int, list[Step]] | None = None, fixed_prompt_tokens: int | None = None,
                 cache: str | None = None, silent_cut: int | None = None, prompt_speed: float | None = None,
                 timings: bool = False) -> None:
        assert cache in (None, "uncounted", "cached_tokens"), cache
        assert overflow in ("vllm", "llama-cpp-python"), overflow
        self.script: list[Step] = list(script or [])
        self.by_seed: dict[int, list[Step]] = {seed: list(steps) for seed, steps in (by_seed or {}).items()}
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.accepts, self.refuse_status = accepts, refuse_status
        self.context_window, self.overflow, self.stream_usage = context_window, overflow, stream_usage
        self.info = info or {}
        self.fixed_prompt_tokens, self.cache, self.silent_cut = fixed_prompt_tokens, cache, silent_cut
        self.prompt_speed, self.timings = prompt_speed, timings
        self.prompts: list[list[int]] = []  # every chat prompt read, as the cache would hold it
        self.streams: list[dict[str, int]] = []  # each streamed answer: {"sent": pieces written, "of": its pieces}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with server.lock:
                    server.requests.append({"path": self.path, "method": "GET"})
                if self.path in server.info:
                    return self._json(200, server.info[self.path])
                return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body,
                                            "authorization": self.headers.get("Authorization")})
                if self.path.endswith("/embeddings"):
                    inputs = body.get("input")
                    inputs = [inputs] if isinstance(inputs, str) else inputs
                    data = [{"object": "embedding", "index": i, "embedding": fake_embedding(str(t))}
                            for i, t in enumerate(inputs)]
                    return self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                                            "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                if self.path in server.info:
                    return self._json(200, server.info[self.path])
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                if server.accepts is not None and _form(body) is not None and _form(body) not in server.accepts:
                    return self._json(server.refuse_status, {"error": {
                        "message": f"1 validation error: ('body', 'response_format', 'type') Input should be one of "
                                   f"{list(server.accepts)}", "type": "internal_server_error"}})
                prompt = prompt_tokens(body)
                if server.refuses(prompt, body.get("max_tokens")):
                    if body.get("stream") and server.overflow == "llama-cpp-python":
                        return self._refused_stream()
                    requested = prompt + (body.get("max_tokens") or 0)
                    return self._json(400, {"error": {
                        "message": f"This model's maximum context length is {server.context_window} tokens. However, "
                                   f"you requested {requested} tokens ({prompt} in the messages, "
                                   f"{body.get('max_tokens')} in the completion). Please reduce the length of the "
                                   f"messages or completion.", "type": "invalid_request_error", "param": "messages",
                        "code": "context_length_exceeded"}})
                with server.lock:
                    script = server.by_seed.get(body.get("seed"), server.script)  # type: ignore[arg-type]
                    step = script.pop(0) if script else None
                if step is None:
                    return self._json(400, {"error": {"message": "scripted server: no more answers",
                                                      "type": "invalid_request_error"}})
                if isinstance(step, dict) and "status" in step:
                    return self._json(step["status"], {"error": {"message": step.get("message", "scripted error"),
                                                                 "type": "server_error"}})
                if isinstance(step, dict) and step.get("dropped"):
                    return self._dropped(body.get("stream"))
                if isinstance(step, dict) and "sleep" in step:
                    time.sleep(step["sleep"])
                reading = prompt / server.prompt_speed if server.prompt_speed else 0.0
                time.sleep(reading)  # reading the prompt, silent
                timings = {"timings": {"prompt_n": prompt, "prompt_ms": reading * 1000,
                                       "prompt_per_second": server.prompt_speed or 1e6}} if server.timings else {}
                gap = step.get("gap", 0.0) if isinstance(step, dict) else 0.0
                stall = step.get("stall", 0.0) if isinstance(step, dict) else 0.0
                reasoning = {step.get("reasoning_field", "reasoning_content"): step["reasoning"]} \
                    if isinstance(step, dict) and "reasoning" in step else {}
                calls = _tool_calls(step["tool_calls"]) if isinstance(step, dict) and "tool_calls" in step else []
                if isinstance(step, dict):
                    step = step.get("answer", "")
                answer = step(body) if callable(step) else str(step)
                answer, finish = _cut(answer, server.answer_limit(prompt, body.get("max_tokens")))
                usage: dict[str, Any] = {"prompt_tokens": server.reported(body, prompt),
                                         "completion_tokens": tokens.count_tokens(answer)}
                if server.cache == "cached_tokens":
                    usage["prompt_tokens_details"] = {"cached_tokens": prompt - usage["prompt_tokens"]}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                with server.lock:
                    server.usages.append(usage)
                finish = "tool_calls" if calls else finish
                if body.get("stream"):
                    return self._stream(body, answer, usage, gap, stall, finish, reasoning, timings, calls)
                message: dict[str, Any] = {"role": "assistant", "content": answer or (None if calls else ""),
                                           **reasoning}
                if calls:
                    message["tool_calls"] = calls
                return self._json(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                    "usage": usage, **timings})

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (a timeout test)
                    pass

            def _refused_stream(self) -> None:
                """llama-cpp-python's refusal of a streamed prompt over its window: the stream is answered (200)
                and ended with no event; the error raised after it makes uvicorn close the connection, which the
                headers had kept alive. Closed here when the client next sends on it — without reading that request,
                so the client's socket is reset — or closes it."""
                self.wfile.write(STREAM_HEAD + b"0\r\n\r\n")
                select.select([self.connection], [], [], DROP_WAIT_S)
                self.close_connection = True

            def _dropped(self, stream: bool) -> None:
                """A connection closed before any event (a stream's headers sent first) or any answer."""
                if stream:
                    self.wfile.write(STREAM_HEAD)
                self.close_connection = True

            def _stream(self, body: dict[str, Any], answer: str, usage: dict[str, Any], gap: float,
                        stall: float, finish: str, reasoning: dict[str, str], timings: dict[str, Any],
                        calls: list[dict[str, Any]] | None = None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                deltas = [{name: text[i:i + 16]} for name, text in reasoning.items() for i in range(0, len(text), 16)]
                deltas += [{"content": answer[i:i + 16]} for i in range(0, len(answer), 16)]
                for index, call in enumerate(calls or []):  # the id and name first, then the arguments in pieces
                    arguments = call["function"]["arguments"]
                    deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                   "function": {"name": call["function"]["name"], "arguments": ""}}]})
                    deltas += [{"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + 7]}}]}
                               for i in range(0, len(arguments), 7)]
                deltas = deltas or [{"content": ""}]
                record = {"sent": 0, "of": len(deltas)}
                server.streams.append(record)
                try:
                    for n, delta in enumerate(deltas):
                        chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                                 "model": body.get("model", "test"),
                                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        record["sent"] = n + 1
                        time.sleep(stall if n == 0 and stall else gap)
                    end = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                           "model": body.get("model", "test"),
                           "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], **timings}
                    self.wfile.write(f"data: {json.dumps(end)}\n\n".encode())
                    if server.stream_usage:
                        final = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                                 "model": body.get("model", "test"), "choices": [], "usage": usage}
                        self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up on a stalled stream
                    pass

        self.serve(Handler)

    def refuses(self, prompt: int, max_tokens: int | None) -> bool:
        """Whether a request is over the window: vLLM counts the answer's max_tokens in it, llama-cpp-python only
        the prompt."""
        if not self.context_window:
            return False
        if self.overflow == "llama-cpp-python":
            return prompt >= self.context_window
        return prompt + (max_tokens or 0) > self.context_window

    def answer_limit(self, prompt: int, max_tokens: int | None) -> int | None:
        """Where an answer stops: at max_tokens, and (llama-cpp-python) at the window's end."""
        if self.overflow == "llama-cpp-python" and self.context_window:
            return min(max_tokens or self.context_window, self.context_window - prompt)
        return max_tokens

    def reported(self, body: dict[str, Any], prompt: int) -> int:
        """The prompt_tokens this server reports for a prompt of `prompt` tokens (see the class docstring)."""
        if self.fixed_prompt_tokens is not None:
            return self.fixed_prompt_tokens
        if self.silent_cut is not None:
            return min(prompt, self.silent_cut)
        if self.cache is None:
            return prompt
        ids = prompt_ids(body)
        with self.lock:
            cached = max((shared_prefix(ids, earlier) for earlier in self.prompts), default=0)
            self.prompts.append(ids)
        return max(1, prompt - cached)  # a server reads at least the prompt's last token again, for its logits

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def all_text_sent(self) -> str:
        return json.dumps(self.requests)
