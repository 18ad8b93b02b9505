"""A real local model with its tools on and off (issue 44, "Measure" 3): does each run end in one true result line,
within its window, without hanging?

    python -m bench.tools_model [--runs 3] [--modes json native off] [--n-ctx 2048] [--repo DIR] [--out FILE]

SmolLM2-135M-Instruct under llama-cpp-python's server (tests/llama_server.py) at --n-ctx, a recording proxy in front
(what the server really answered), and main.py run as a person runs it, once per run on a fresh copy of the
repository (default: the tests' calculator, whose add() subtracts: one failing test) with `--tools json`,
`--tools native` or `--no-tools`, the window given (OPENAI_CONTEXT_WINDOW), `--max-iterations` 1 by default.

Per run: the exit code; the lines starting "Result:" on stdout (one is wanted); whether it is true (SUCCESS: the
tests pass afterwards; FAILED: the repository is byte for byte as before and the tests still fail); every request's
prompt by the server's own count plus its max_tokens against the window; the tool calls the run log recorded; the
wall time; a traceback on stderr. A run past --timeout is killed and reported as hung. Markdown on stdout, a line per
run on stderr, every run to --out.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

from code_assistant.model.trajectory import read_tool_calls
from tests.llama_server import LlamaServer, RecordingProxy
from tests.repos import git_init, python_repo, run_cli, snapshot

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
TASK = "Fix add() so the tests pass"
MODES = {"json": ["--tools", "json"], "native": ["--tools", "native"], "off": ["--no-tools"]}


def _fresh(root: Path, source: Path | None) -> Path:
    if source is None:
        return python_repo(root)
    repo = root / "proj"
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
    git_init(repo)
    return repo


def _prompt_tokens(url: str, request: dict) -> int | None:
    """The server's own count of a chat request's prompt: sent again without streaming, for one token."""
    body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")} | {"max_tokens": 1}
    post = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(post, timeout=300) as answer:
            return int(json.loads(answer.read())["usage"]["prompt_tokens"])
    except OSError:
        return None


def _tests_pass(repo: Path, test_command: str) -> bool:
    return subprocess.run(test_command, check=False, shell=True, cwd=repo, capture_output=True, timeout=300).returncode == 0


def one_run(server_url: str, proxy: RecordingProxy, mode: str, args: argparse.Namespace, work: Path) -> dict:
    repo = _fresh(work, args.repo)
    before = snapshot(repo)
    first = len(proxy.exchanges)
    cli = ["--repo", str(repo), "--task", args.task, "--test-command", args.test_command, "--max-iterations",
           str(args.max_iterations), "--model", "smollm2", "--index-path", str(args.index), "--log-dir",
           str(work / "runs"), *MODES[mode]]
    started = time.perf_counter()
    try:
        proc = run_cli(cli, server_url=proxy.url, extra_env={"OPENAI_CONTEXT_WINDOW": str(args.n_ctx)},
                       timeout=args.timeout)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr = None, str(exc.stdout or ""), str(exc.stderr or "")
    seconds = time.perf_counter() - started
    results = [line for line in stdout.splitlines() if line.startswith("Result:")]
    passes = _tests_pass(repo, args.test_command)
    unchanged = snapshot(repo) == before
    claim = results[-1] if results else ""
    true = (claim.startswith("Result: SUCCESS") and passes) or (claim.startswith("Result: FAILED") and unchanged
                                                                 and not passes)
    chats = [e for e in proxy.exchanges[first:] if e["path"].endswith("/chat/completions")]
    over, sizes = 0, []
    for chat in chats:
        if chat["status"] != 200:
            continue
        counted = _prompt_tokens(server_url, chat["request"])
        if counted is not None:
            sizes.append(counted + chat["request"].get("max_tokens", 0))
            over += sizes[-1] > args.n_ctx
    log = next((line.split("Run log:", 1)[1].strip() for line in stdout.splitlines() if "Run log:" in line), "")
    calls = read_tool_calls(Path(log)) if log and Path(log).is_file() else []
    return {"mode": mode, "exit": code, "hung": code is None, "results": results, "true": bool(results) and true,
            "tests_pass_after": passes, "unchanged": unchanged, "requests": len(chats),
            "refused": sum(c["status"] != 200 for c in chats),
            "dropped_streams": sum(c["status"] == 200 and c.get("stream") and not c.get("events") for c in chats),
            "largest_request": max(sizes, default=0), "over_window": over,
            "tool_calls": Counter(c["name"] for c in calls), "tools_declared": any(c["request"].get("tools")
                                                                                    for c in chats),
            "seconds": round(seconds, 1), "traceback": "Traceback" in stderr,
            "stderr_tail": stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""}


def report(runs: list[dict], n_ctx: int) -> str:
    lines = [(f"| mode | runs | exit codes | one `Result:` line | true | results | requests (refused, dropped) "
              f"| largest request / {n_ctx} | over the window | tool calls made | tools declared natively "
              f"| seconds: median (max) | hung | traceback |"),
             "|---|---:|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for mode in dict.fromkeys(r["mode"] for r in runs):
        rows = [r for r in runs if r["mode"] == mode]
        codes = Counter(str(r["exit"]) for r in rows)
        said = Counter((r["results"][-1].split("(")[0].strip() if r["results"] else "none: " + r["stderr_tail"][:80])
                       for r in rows)
        calls: Counter[str] = Counter()
        for r in rows:
            calls.update(r["tool_calls"])
        seconds = [r["seconds"] for r in rows]
        lines.append(
            f"| {mode} | {len(rows)} | {', '.join(f'{k}×{v}' for k, v in codes.items())} | "
            f"{sum(len(r['results']) == 1 for r in rows)}/{len(rows)} | {sum(r['true'] for r in rows)}/{len(rows)} | "
            f"{'; '.join(f'{k} ×{v}' for k, v in said.items())} | {sum(r['requests'] for r in rows)} "
            f"({sum(r['refused'] for r in rows)}, {sum(r['dropped_streams'] for r in rows)}) | "
            f"{max(r['largest_request'] for r in rows)} | {sum(r['over_window'] for r in rows)} | "
            f"{', '.join(f'{k} {v}' for k, v in calls.most_common()) or 'none'} | "
            f"{sum(r['tools_declared'] for r in rows)}/{len(rows)} | {statistics.median(seconds):.0f} "
            f"({max(seconds):.0f}) | {sum(r['hung'] for r in rows)} | {sum(r['traceback'] for r in rows)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="runs per mode")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    p.add_argument("--n-ctx", type=int, default=2048, help="the server's window, given to the run as well")
    p.add_argument("--repo", type=Path, help="a repository to copy for each run (default: the tests' calculator)")
    p.add_argument("--task", default=TASK)
    p.add_argument("--test-command", default=PYTEST)
    p.add_argument("--max-iterations", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before a run counts as hung")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.index = Path(tmp) / "index"
        with LlamaServer(n_ctx=args.n_ctx, log=Path(tmp) / "server.log") as server, \
                RecordingProxy(server.url) as proxy:
            for mode in args.modes:
                for i in range(args.runs):
                    work = Path(tmp) / f"{mode}-{i}"
                    work.mkdir()
                    runs.append(one_run(server.url, proxy, mode, args, work))
                    print(f"[{mode} {i + 1}/{args.runs}] {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
    print(report(runs, args.n_ctx))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
