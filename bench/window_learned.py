"""A run against llama-cpp-python with no `--context-window` (issue 53, item 2): how long it takes and what it spends
learning the server's window, with the code of one or more checkouts on the same repository and the same server.

    python -m bench.window_learned [--tree PATH ...] [--runs 3] [--n-ctx 2048] [--iterations 1]

llama-cpp-python reports no window, so each run starts sized for the default 8,192 tokens. The repository is
calc.py with its bug, its tests and a helpers.py of 38 small functions: the plan request fits under the server's
2,048 tokens but its answer cap does not, so the server cuts the first answer where its window ends. Each tree
(`--tree`: a checkout of this project, main.py at its root; default: this one) runs the same task, the trees taking
turns run by run, through a recording proxy: wall seconds, requests sent, those the server refused or cut, and the
lines the run printed about the window and the answer limit. SmolLM2-135M under tests/llama_server.py, as the tests
use it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.llama_server import LlamaServer, RecordingProxy
from tests.repos import CALC_PY, ROOT, TEST_CALC_PY, python_repo

TASK = "Fix add() so the tests pass"
HELPERS = "\n\n".join(f'def helper_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n'
                      for i in range(38))


def one_run(tree: Path, server: str, work: Path, iterations: int) -> dict:
    """One run of `tree`'s main.py on a fresh copy of the repository, through a recording proxy."""
    work.mkdir(parents=True)
    repo = python_repo(work, {"calc.py": CALC_PY, "helpers.py": HELPERS, "tests/test_calc.py": TEST_CALC_PY,
                                       "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(tree)}
    with RecordingProxy(server) as proxy:
        env["OPENAI_BASE_URL"] = proxy.url
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(tree / "main.py"), "--repo", str(repo), "--task", TASK,
                               "--test-command", f"{sys.executable} -m pytest -q", "--model", "smollm2",
                               "--max-iterations", str(iterations), "--index-path", str(work / "index"),
                               "--log-dir", str(work / "runs")],
                              capture_output=True, text=True, env=env, cwd=tree, stdin=subprocess.DEVNULL, timeout=900)
        seconds = time.perf_counter() - started
        chats = proxy.chats
    out = proc.stdout + proc.stderr
    return {"seconds": seconds, "exit": proc.returncode, "requests": len(chats),
            "refused": sum(1 for c in chats if c["status"] != 200),
            "cut": sum(1 for c in chats if c["status"] == 200 and _finish(c) == "length"),
            "window_lines": [line for line in out.splitlines() if line.startswith("[Window:")],
            "answer_limit": out.count("answer limit")}


def _finish(exchange: dict) -> str | None:
    """How an answer ended: "length" when cut."""
    if exchange.get("stream"):
        return exchange.get("finish_reason")
    return ((exchange.get("response") or {}).get("choices") or [{}])[0].get("finish_reason")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", help="a checkout of this project (repeatable)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--iterations", type=int, default=1)
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    results: dict[Path, list[dict]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="window-learned-") as tmp, LlamaServer(n_ctx=args.n_ctx) as llama:
        for run in range(args.runs):
            for tree in trees:
                work = Path(tmp) / f"{tree.name}-{run}"
                result = one_run(tree, llama.url, work, args.iterations)
                results[tree].append(result)
                print(f"{tree} run {run + 1}: {result}", flush=True)
    for tree, rows in results.items():
        seconds = [r["seconds"] for r in rows]
        print(f"{tree}: median {statistics.median(seconds):.1f} s ({min(seconds):.1f}-{max(seconds):.1f}), "
              f"requests {[r['requests'] for r in rows]}, refused {[r['refused'] for r in rows]}, "
              f"cut {[r['cut'] for r in rows]}, 'answer limit' lines {[r['answer_limit'] for r in rows]}, "
              f"window lines {rows[0]['window_lines']}")


if __name__ == "__main__":
    main()
