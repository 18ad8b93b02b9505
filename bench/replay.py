"""Two runs' requests side by side, and a run's requests sent again: what says whether two runs of one case at
temperature 0 differ in what was asked or only in what the server answered.

    python -m bench.replay diff A.jsonl B.jsonl                  # request by request: the same, or where they part
    python -m bench.replay replay A.jsonl --base-url URL [--only N ...] [--times 2]

The files are the ones bench/peers.py writes (DIR/requests/CASE.AGENT.N.jsonl: one JSON line a chat request the
recording proxy relayed, its body under "request", the server's answer under "response"). `diff` compares the request
bodies as sent (every key: messages, tools, response_format, sampling), message by message, and prints the first line
where they part with its neighbours; then the answers. `replay` sends request N again, unstreamed, as it was (to a
server nobody else is using: llama.cpp reuses the previous request's prefix, so the order requests come in is part of
the experiment) and says whether the answer's text is the recorded one, and the usage.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def read_exchanges(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def answer_text(exchange: dict[str, Any]) -> str:
    """The answer's text and tool calls, as one string (a stream's record keeps its content apart)."""
    response = exchange.get("response")
    if not isinstance(response, dict):
        return str(exchange.get("content") or response or "")
    message = ((response.get("choices") or [{}])[0]).get("message") or {}
    calls = message.get("tool_calls") or []
    return (message.get("content") or "") + "".join(f"\n[tool call] {json.dumps(c.get('function'))}" for c in calls)


@dataclass(frozen=True)
class Parting:
    """Where two requests first differ: the key (and message index), and the two texts' differing lines."""

    where: str
    diff: list[str]


def parting(a: dict[str, Any], b: dict[str, Any]) -> Parting | None:
    """None when the two request bodies are the same, key for key; else the first place they differ."""
    if a == b:
        return None
    for key in sorted(set(a) | set(b), key=lambda k: (k != "messages", k)):
        if a.get(key) == b.get(key):
            continue
        if key == "messages" and isinstance(a.get(key), list) and isinstance(b.get(key), list):
            for i, (x, y) in enumerate(zip(a[key], b[key], strict=False)):
                if x != y:
                    return Parting(f"messages[{i}] ({x.get('role')})", _lines_diff(x, y))
            return Parting("messages", [f"- {len(a[key])} messages", f"+ {len(b[key])} messages"])
        return Parting(key, _lines_diff(a.get(key), b.get(key)))
    return None


def _lines_diff(x: Any, y: Any) -> list[str]:
    def lines(v: Any) -> list[str]:
        if isinstance(v, dict) and isinstance(v.get("content"), str):
            return v["content"].splitlines()
        return json.dumps(v, indent=1, sort_keys=True).splitlines()
    return [line for line in difflib.unified_diff(lines(x), lines(y), lineterm="", n=2)][2:]


def diff_runs(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> Iterator[str]:
    """Request by request: the same or where they part; then whether the answers were the same."""
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        part = parting(x.get("request") or {}, y.get("request") or {})
        same_answer = answer_text(x) == answer_text(y)
        tokens = [(e.get("response") or {}).get("usage", {}) if isinstance(e.get("response"), dict) else {}
                  for e in (x, y)]
        said = (f"request {n}: {'the same' if part is None else 'differs at ' + part.where}; answer "
                f"{'the same' if same_answer else 'differs'} (prompt tokens {tokens[0].get('prompt_tokens')} / "
                f"{tokens[1].get('prompt_tokens')}, generated {tokens[0].get('completion_tokens')} / "
                f"{tokens[1].get('completion_tokens')})")
        yield said
        if part is not None:
            yield from (f"    {line}" for line in part.diff[:40])
        if not same_answer:
            yield from (f"    {line}" for line in list(difflib.unified_diff(
                answer_text(x).splitlines(), answer_text(y).splitlines(), lineterm="", n=1))[2:30])
    if len(a) != len(b):
        yield f"{len(a)} requests against {len(b)}"


def replay(exchange: dict[str, Any], base_url: str, timeout: float = 900.0) -> dict[str, Any]:
    """The recorded request sent again, unstreamed; the server's answer."""
    body = {k: v for k, v in (exchange.get("request") or {}).items() if k not in ("stream", "stream_options")}
    request = urllib.request.Request(f"{base_url.rstrip('/')}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer local"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diff", help="two runs' requests, request by request")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    r = sub.add_parser("replay", help="a run's requests sent again")
    r.add_argument("run", type=Path)
    r.add_argument("--base-url", required=True)
    r.add_argument("--only", type=int, nargs="+", default=None, help="these requests (from 1)")
    r.add_argument("--times", type=int, default=1, help="send each this many times (default 1)")
    args = parser.parse_args(argv)
    if args.command == "diff":
        for line in diff_runs(read_exchanges(args.a), read_exchanges(args.b)):
            print(line)
        return 0
    exchanges = read_exchanges(args.run)
    for n, exchange in enumerate(exchanges, 1):
        if args.only and n not in args.only:
            continue
        for _ in range(args.times):
            again = {"request": exchange.get("request"), "response": replay(exchange, args.base_url)}
            same = answer_text(again) == answer_text(exchange)
            usage = again["response"].get("usage") or {}
            print(f"request {n}: answer {'the same' if same else 'differs'} (prompt tokens "
                  f"{usage.get('prompt_tokens')}, generated {usage.get('completion_tokens')})")
            if not same:
                for line in list(difflib.unified_diff(answer_text(exchange).splitlines(),
                                                      answer_text(again).splitlines(), lineterm="", n=1))[2:30]:
                    print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
