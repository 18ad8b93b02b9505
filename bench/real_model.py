"""A real local model on an example repository: seconds to the first token, tokens per second, how often the plan
parses with and without the schema, and the plan request's prompt tokens against the window.

    python -m bench.real_model [--repo examples/inventory] [--runs 20] [--temperature 0.7] [--n-ctx 2048]
                               [--base-url URL --model NAME] [--out results.json]

Without --base-url it starts SmolLM2-135M-Instruct under llama-cpp-python's server (tests/llama_server.py, the same
server the tests use). The plan request is built exactly as a run builds it (index, baseline test run, context sized
to the window); each run streams it once. llama-cpp-python sends one stream event per token, so tokens per second is
events over the time after the first; the server keeps the previous prompt's cache, so only the first request of a
session pays for reading the prompt ("cold"), the others start from the cache ("warm").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from code_assistant.agent.kit import request_config
from code_assistant.agent.requests import PlanRequest, Requests
from code_assistant.answers.plan import PlanParseError, parse_plan
from code_assistant.edit.edits import PLAN_ACTIONS, Action
from code_assistant.index import embeddings, indexer, store
from code_assistant.model.chat import Message, ModelError, OpenAIChat
from code_assistant.model.fitting import message_tokens
from code_assistant.model.structured import plan_schema
from code_assistant.model.window import ContextWindow
from code_assistant.settings import load_settings
from code_assistant.verify.runner import TestRunner
from tests.llama_server import LlamaServer

ROOT = Path(__file__).resolve().parent.parent
TASK = "Make the failing tests in tests/test_stock.py pass"


@dataclass
class Run:
    mode: str
    first_token_s: float | None
    tokens: int
    tokens_per_s: float | None
    parsed: bool
    changes: int
    error: str = ""
    reads: int = 0  # changes that ask to read a file


def _plan_request(repo: Path, work: Path, window: ContextWindow) -> tuple[list[Message], int]:
    """The plan request a run would send for TASK, and the context's size in tokens."""
    settings = load_settings(repo, test_command=f"{sys.executable} -m pytest -q",
                             index_path=str(work / "index"))
    embedder = embeddings.make_embedder("local")
    chroma = store.open_client(settings.index_path)
    chunks = store.ChunkStore(chroma, store.collection_for(chroma, repo, embedder.name))
    index, _ = indexer.Indexer(repo, settings.index_path, embedder, chunks).update()
    baseline = TestRunner(settings.test_command, cwd=repo, timeout=120).run()
    messages, context = Requests(request_config(settings), window).plan(PlanRequest(index=index, task=TASK, baseline=baseline))
    return messages, context.tokens


def _measure(model: OpenAIChat, messages: list[Message], mode: str) -> Run:
    stamps: list[float] = []
    started = time.perf_counter()
    try:
        response = model.complete(messages, on_token=lambda piece: stamps.append(time.perf_counter()))
    except ModelError as exc:
        return Run(mode, None, 0, None, False, 0, str(exc))
    ended = time.perf_counter()
    first = stamps[0] - started if stamps else None
    rate = (len(stamps) - 1) / (ended - stamps[0]) if len(stamps) > 1 and ended > stamps[0] else None
    try:
        ops = parse_plan(response.text)
        changes, parsed, error, reads = len(ops), True, "", sum(op.action == Action.READ for op in ops)
    except PlanParseError as exc:
        changes, parsed, error, reads = 0, False, str(exc), 0
    return Run(mode, first, len(stamps), rate, parsed, changes, error, reads)


def _forget_prompt(url: str, model: str) -> None:
    """Make the server read the next prompt from the start: llama.cpp reuses the cache of the longest common prefix,
    so a prompt with nothing in common replaces it."""
    import openai
    openai.OpenAI(api_key="not-needed", base_url=url).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hello."}], max_tokens=1)


@contextlib.contextmanager
def _server(base_url: str | None, n_ctx: int) -> Iterator[str]:
    if base_url:
        yield base_url
        return
    with LlamaServer(n_ctx=n_ctx) as server:
        yield server.url


def _median(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return f"{statistics.median(present):.2f}" if present else "–"


def report(runs: list[Run], prompt: dict[str, Any], temperature: float) -> str:
    header = (f"Plan request for `{prompt['repo']}` ({prompt['task']!r}): {prompt['server_prompt_tokens']} prompt "
              f"tokens by the server's count ({prompt['counted_tokens']} counted here, context "
              f"{prompt['context_tokens']}), window {prompt['window']}, answer reserve {prompt['reserve']}: "
              f"{prompt['server_prompt_tokens'] + prompt['reserve']} of {prompt['window']} tokens.")
    columns = ("| mode | runs | plan parses | with ≥1 change | first token, cold (s) | first token, warm, median (s) "
               "| tokens/s, median | answer tokens, median | asks to read |")
    lines = [header, "", f"Temperature {temperature}, {prompt['model']}.", "", columns,
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in dict.fromkeys(r.mode for r in runs):
        rows = [r for r in runs if r.mode == mode]
        parsed = sum(r.parsed for r in rows)
        lines.append(
            f"| {mode} | {len(rows)} | {parsed}/{len(rows)} ({100 * parsed / len(rows):.0f}%) | "
            f"{sum(r.changes > 0 for r in rows)}/{len(rows)} | "
            f"{rows[0].first_token_s:.2f} | {_median([r.first_token_s for r in rows[1:]])} | "
            f"{_median([r.tokens_per_s for r in rows])} | {_median([float(r.tokens) for r in rows])} | "
            f"{sum(r.reads > 0 for r in rows)}/{len(rows)} |"
            if rows[0].first_token_s is not None else f"| {mode} | {len(rows)} | failed: {rows[0].error} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", type=Path, default=ROOT / "examples" / "inventory")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--n-ctx", type=int, default=2048, help="the server's window (and the window requests are sized to)")
    p.add_argument("--base-url", help="an OpenAI-compatible server already running (default: start SmolLM2)")
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        repo = work / "repo"
        shutil.copytree(args.repo, repo)
        window = ContextWindow(args.n_ctx, "--n-ctx")
        messages, context_tokens = _plan_request(repo, work, window)
        runs: list[Run] = []
        with _server(args.base_url, args.n_ctx) as url:
            for mode, schema in (("schema", plan_schema(PLAN_ACTIONS)), ("no schema", None)):
                _forget_prompt(url, args.model)
                model = OpenAIChat(args.model, api_key="not-needed", base_url=url, temperature=args.temperature,
                                   window=window, schema=schema, timeout=600)
                for i in range(args.runs):
                    runs.append(_measure(model, messages, mode))
                    print(f"[{mode} {i + 1}/{args.runs}] {asdict(runs[-1])}", file=sys.stderr, flush=True)
            counted = OpenAIChat(args.model, api_key="not-needed", base_url=url, window=window, timeout=600)
            served = counted.complete(messages)  # not streamed: the server's own count of the prompt
        prompt = {"repo": str(args.repo.relative_to(ROOT) if args.repo.is_relative_to(ROOT) else args.repo),
                  "task": TASK, "model": args.model, "window": args.n_ctx, "reserve": window.reserve,
                  "server_prompt_tokens": served.prompt_tokens, "counted_tokens": message_tokens(messages),
                  "context_tokens": context_tokens}
    print(report(runs, prompt, args.temperature))
    if args.out:
        args.out.write_text(json.dumps({"prompt": prompt, "runs": [asdict(r) for r in runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
