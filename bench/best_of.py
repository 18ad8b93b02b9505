"""What best of N costs: wall time of `--candidates N` against 1, disk per candidate, extra tokens.

    python -m bench.best_of [REPO] [--candidates 3] [--runs 3]

REPO defaults to examples/inventory (copied to a temporary directory and committed there). The model is the scripted
OpenAI-compatible server of the tests, answering every candidate with the same correct fix, so the numbers are the
tool's own: copies, parallel test runs, the choice and the final run in the repository. Prints a Markdown table.
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

from code_assistant.agent.candidates import ScratchCopy
from tests.repos import INVENTORY_FIX, ROOT, git_init
from tests.scripted_server import ScriptedServer

TASK = "Make the failing tests in tests/test_stock.py pass"


def disk_usage(path: Path) -> int:
    """Bytes under path (a candidate's copy)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())


def one_run(source: Path, candidates: int, work: Path) -> dict[str, float]:
    repo = work / f"repo-{candidates}-{time.monotonic_ns()}"
    shutil.copytree(source, repo)
    git_init(repo)
    seeds = {n: [INVENTORY_FIX] for n in range(1, candidates + 1)}
    with ScriptedServer([INVENTORY_FIX], by_seed=seeds) as server:
        env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "bench", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
               "CODE_ASSISTANT_INDEX_PATH": str(work / "index"), "CODE_ASSISTANT_STATE_PATH": str(work / "state")}
        command = [sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", TASK, "--test-command",
                   f"{sys.executable} -m pytest -q -p no:cacheprovider", "--json", "--no-reproduce"]
        if candidates > 1:
            command += ["--candidates", str(candidates)]
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, check=False)
        wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    tokens = result["tokens"]
    rows = result.get("candidates") or []
    busy = sum(r["seconds"] for r in rows)
    phase = max((r["started_s"] + r["seconds"] for r in rows), default=0.0)
    return {"wall_s": wall, "tokens": tokens["prompt_tokens"] + tokens["completion_tokens"], "calls": tokens["calls"],
            "overlap": busy / phase if phase else 1.0, "attempt_s": statistics.mean(r["seconds"] for r in rows)
            if rows else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, default=ROOT / "examples" / "inventory")
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-best-of-") as tmp:
        work = Path(tmp)
        one_run(args.repo, 1, work)  # warm: index cache, bytecode, pytest's first import
        rows: dict[int, list[dict[str, float]]] = {1: [], args.candidates: []}
        for _ in range(args.runs):  # alternate, so that load on the machine falls on both alike
            for n in rows:
                rows[n].append(one_run(args.repo, n, work))
        with ScratchCopy(args.repo) as copy:
            disk = disk_usage(copy)
    single, best = rows[1], rows[args.candidates]
    wall1 = statistics.median(r["wall_s"] for r in single)
    walln = statistics.median(r["wall_s"] for r in best)
    print(f"| | --candidates 1 | --candidates {args.candidates} |")
    print("|---|---:|---:|")
    print(f"| wall time, median of {args.runs} (min–max) | {wall1:.2f} s ({min(r['wall_s'] for r in single):.2f}–"
          f"{max(r['wall_s'] for r in single):.2f}) | {walln:.2f} s ({min(r['wall_s'] for r in best):.2f}–"
          f"{max(r['wall_s'] for r in best):.2f}) |")
    overlap = statistics.median(r["overlap"] for r in best)
    attempt = statistics.median(r["attempt_s"] for r in best)
    print(f"| one attempt (copy, plan, edit, tests), median | – | {attempt:.2f} s |")
    print(f"| overlap: attempts' time / their wall time | – | {overlap:.2f}× |")
    print(f"| model calls | {single[0]['calls']:.0f} | {best[0]['calls']:.0f} |")
    print(f"| tokens | {single[0]['tokens']:.0f} | {best[0]['tokens']:.0f} |")
    print(f"| disk per candidate (scratch copy of {args.repo.name}) | – | {disk:,} bytes |")
    extra = walln - wall1
    print(f"\nExtra wall time for {args.candidates - 1} more candidates: {extra:.2f} s "
          f"({extra / (args.candidates - 1):.2f} s each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
