"""A session's context time against one-shot runs: what a second, third, ... task's context costs when the index, the
embedding model and the chat model stay in the process.

For each repository (copied to a scratch directory, so the source is never touched), with an empty index:

1. cold: `main.py context --repo COPY --json TASK1` as a process (a new user's first answer);
2. warm one-shot, the same query: TASK1 again, as a process (what issue 30 timed as "warm");
3. warm one-shot, a new query: TASK2, as a process (its chunks not embedded yet: up to the embed budget of model work);
4. a session: `main.py chat --repo COPY --json` reading `/context TASK1`, `/context TASK1`, `/context TASK3` ...
   `/context TASK5` from stdin (against a scripted OpenAI-compatible server on loopback, which a session checks at
   start); the time of each command is the gap between its JSON line and the one before (the first includes
   opening the session: the server check, the window, the first index update).

Prints a markdown table per repository: cold; warm one-shot (same query / new query); the session's first command,
its same query again, and the median of its three new queries; with the 1-minute load the runs started at.

    python -m bench.session_context /path/to/repo [more repos] [--runs 3] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
TASKS = [
    "The parser raises a KeyError when the configuration file has an empty section",
    "Add a --verbose option that prints each file as it is processed",
    "The cache is never invalidated when the source file changes",
    "Timeouts are ignored when the server closes the connection early",
    "Rename the helper that formats error messages and update its callers",
]


def _env(work: Path, url: str) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"}


def one_shot(repo: Path, task: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "main.py"), "context", "--repo", str(repo), "--json", task],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def session(repo: Path, env: dict[str, str]) -> list[float]:
    """The seconds of each /context command in one session (the first includes opening it): TASKS[0] twice, then
    TASKS[2:]."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "chat", "--repo", str(repo), "--json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdin is not None and proc.stdout is not None
    times = []
    started = time.perf_counter()
    for task in [TASKS[0], TASKS[0], *TASKS[2:]]:
        proc.stdin.write(f"/context {task}\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not json.loads(line).get("files"):
            raise RuntimeError(f"/context answered {line!r}")
        now = time.perf_counter()
        times.append(now - started)
        started = now
    proc.stdin.close()
    proc.wait(timeout=120)
    return times


def measure(source: Path, runs: int, work: Path) -> dict[str, float]:
    rows: dict[str, list[float]] = {"cold": [], "warm_same": [], "warm_new": [], "first": [], "same": [], "new": [],
                                    "load": []}
    with ScriptedServer([]) as server:
        for run in range(runs):
            scratch = work / f"{source.name}-{run}"
            shutil.rmtree(scratch, ignore_errors=True)
            repo = scratch / "repo"
            shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            env = _env(scratch, server.url)
            rows["load"].append(os.getloadavg()[0])
            rows["cold"].append(one_shot(repo, TASKS[0], env))
            rows["warm_same"].append(one_shot(repo, TASKS[0], env))
            rows["warm_new"].append(one_shot(repo, TASKS[1], env))
            times = session(repo, env)
            rows["first"].append(times[0])
            rows["same"].append(times[1])
            rows["new"].append(statistics.median(times[2:]))
            print(f"[{source.name} {run + 1}/{runs}] load {rows['load'][-1]:.1f}, cold {rows['cold'][-1]:.2f} s, "
                  f"warm {rows['warm_same'][-1]:.2f} / {rows['warm_new'][-1]:.2f} s, session "
                  f"{', '.join(f'{t:.2f}' for t in times)} s", file=sys.stderr, flush=True)
            shutil.rmtree(scratch, ignore_errors=True)
    return {name: statistics.median(values) for name, values in rows.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="session-context-"))
    print("| repository | load | cold one-shot | warm one-shot: same query / new query | session: 1st (opening) | "
          "session: same query again | session: new queries (median of 3) |")
    print("|---|---|---|---|---|---|---|")
    for repo in args.repos:
        m = measure(repo.resolve(), args.runs, work)
        print(f"| {repo.name} | {m['load']:.1f} | {m['cold']:.2f} s | {m['warm_same']:.2f} / {m['warm_new']:.2f} s | "
              f"{m['first']:.2f} s | {m['same']:.2f} s | {m['new']:.2f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
