"""A scripted OpenAI-compatible server on 127.0.0.1 for tests: the real `openai` client talks to it over HTTP.

Each chat request takes the next step of the script:
- a string: the assistant's answer;
- a callable(request_json) -> str: an answer computed from the request (e.g. from the files it shows);
- a dict {"status": 500, "message": "..."}: an HTTP error with an OpenAI-style error body;
- a dict {"sleep": seconds, "answer": str}: answer late (for timeout tests).
Every request body is recorded in `requests` so tests can assert on what the model was sent.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = str | Callable[[dict[str, Any]], str] | dict[str, Any]


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(digest[i % len(digest)] - 128) / 128.0 for i in range(dim)]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    return [v / norm for v in raw]


class ScriptedServer:
    def __init__(self, script: list[Step] | None = None) -> None:
        self.script: list[Step] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
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
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                with server.lock:
                    step = server.script.pop(0) if server.script else None
                if step is None:
                    return self._json(400, {"error": {"message": "scripted server: no more answers",
                                                      "type": "invalid_request_error"}})
                if isinstance(step, dict) and "status" in step:
                    return self._json(step["status"], {"error": {"message": step.get("message", "scripted error"),
                                                                 "type": "server_error"}})
                if isinstance(step, dict) and "sleep" in step:
                    time.sleep(step["sleep"])
                    step = step["answer"]
                answer = step(body) if callable(step) else str(step)
                if body.get("stream"):
                    return self._stream(body, answer)
                return self._json(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], answer: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = [answer[i:i + 16] for i in range(0, len(answer), 16)] or [""]
                for piece in pieces:
                    chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                             "model": body.get("model", "test"),
                             "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                usage = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                         "model": body.get("model", "test"), "choices": [],
                         "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
                self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def all_text_sent(self) -> str:
        return json.dumps(self.requests)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
