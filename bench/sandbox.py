"""What the sandbox costs: the baseline test run of a Python, a Node and a Go repository, unconfined and sandboxed.

    python -m bench.sandbox [--runs 5]

Each repository is built in a temporary directory (Python: examples/inventory; Node and Go: the tests' fixtures,
`node --test` and `go test ./...`, Go's caches warmed by one run first; each with its bug, as a baseline finds it;
and `true`, the sandbox's own cost alone) and its test command run through the runner the CLI uses for the baseline
(TestRunner.run), with `--sandbox off`, `write` and `strict` in turn, so that load on the machine falls on all alike.
Also timed: finding out whether a sandbox can be had (`resolve`, once per CLI run). Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import resolve
from tests.repos import GO_SVC, NODE_APP, ROOT, git_init, write_tree

MODES = ("off", "write", "strict")


def repositories(work: Path) -> dict[str, tuple[Path, str, dict[str, str]]]:
    """name -> (repository, test command, environment)."""
    python = work / "inventory"
    shutil.copytree(ROOT / "examples" / "inventory", python)
    node, go = write_tree(work / "node", NODE_APP), write_tree(work / "go", GO_SVC)
    for repo in (python, node, go):
        git_init(repo)
    go_env = {"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOCACHE": str(work / "gocache"),
              "GOPATH": str(work / "gopath")}
    return {"nothing (`true`): the sandbox's own cost": (python, "true", {}),
            "Python (`pytest`, examples/inventory)": (python, f"{sys.executable} -m pytest -q -p no:cacheprovider",
                                                      {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}),
            "Node (`npm test`: node --test)": (node, "npm test", {}),
            "Go (`go test ./...`, warm build cache)": (go, "go test ./...", go_env)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sandboxes = {mode: resolve(mode) for mode in MODES}
    probes = []
    for _ in range(args.runs):
        started = time.perf_counter()
        resolve("write")
        probes.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        rows = []
        for name, (repo, command, env) in repositories(Path(tmp)).items():
            TestRunner(command, cwd=repo, env=env).run()  # warm: Go's build cache, the OS's file cache
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            outcome: dict[str, str] = {}
            for _ in range(args.runs):
                for mode in MODES:
                    result = TestRunner(command, cwd=repo, env=env, sandbox=sandboxes[mode]).run()
                    times[mode].append(result.duration_s)
                    outcome[mode] = result.summary()
            rows.append((name, times, outcome))
    print(f"Baseline test run, median of {args.runs} (min–max); `resolve` (the probe, once per CLI run): "
          f"{1000 * statistics.median(probes):.1f} ms\n")
    print("| repository | `--sandbox off` | `write` | `strict` | `write` − `off` | result (all modes) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, times, outcome in rows:
        cells = [f"{statistics.median(times[m]):.3f} s ({min(times[m]):.3f}–{max(times[m]):.3f})" for m in MODES]
        extra = statistics.median(times["write"]) - statistics.median(times["off"])
        same = outcome["off"] if len(set(outcome.values())) == 1 else "; ".join(f"{m}: {outcome[m]}" for m in MODES)
        print(f"| {name} | {' | '.join(cells)} | {1000 * extra:+.0f} ms | {same} |")


if __name__ == "__main__":
    main()
