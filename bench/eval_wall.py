"""Wall time of `eval` over a cases file with 1 and 2 workers and on a local Dask cluster, and the overhead per case
against a plain run (BENCHMARKS.md, "Eval").

    python -m bench.eval_wall [--cases evals/smoke.jsonl] [--mirrors DIR] [--base-url URL --model NAME]

Without --base-url the model is the scripted server of the tests answering every request with no change (`{"changes":
[]}`): the numbers are then the harness's own — the download or clone, the agent's process with its index, its
baseline and one or two requests, the judge's test run. --mirrors DIR reads https://github.com/OWNER/NAME from the
bare repositories DIR/OWNER+NAME/repo (a machine without GitHub). The overhead per case is the case's time less the
agent's (scratch copy and judge), and the agent's time against `main.py` run by hand on the same copy.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
NO_CHANGE = '{"changes": []}'


def local_cases(cases: Path, mirrors: Path | None, into: Path) -> Path:
    if mirrors is None:
        return cases
    text = re.sub(r'"https://github\.com/([^/"]+)/([^/"]+)"',
                  lambda m: json.dumps(f"file://{mirrors}/{m[1]}+{m[2]}/repo"), cases.read_text())
    into.write_text(text)
    return into


def eval_once(cases: Path, out: Path, extra: list[str], env: dict[str, str]) -> tuple[float, list[dict[str, Any]]]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", str(cases), "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return wall, [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def plain_run(case: dict[str, Any], run_args: list[str], env: dict[str, str], work: Path) -> float:
    """The agent on a copy of the case's repository, by hand, as `eval` runs it: the time of that process."""
    from code_assistant.evaluate.cases import parse_case
    from code_assistant.evaluate.scratch import materialize
    from code_assistant.verify.sandbox import resolve

    parsed = parse_case(case, where="bench", base=ROOT)
    repo = materialize(parsed.source, work / "repo", resolve("write"))
    start = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", parsed.task,
                    "--test-command", parsed.test_command, "--json", "--log-dir", str(work / "runs"), "--index-path",
                    str(work / "index"), *run_args], env={**env, "CODE_ASSISTANT_STATE_PATH": str(work / "state")},
                   capture_output=True, text=True, check=False)
    return time.monotonic() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=Path, default=ROOT / "evals" / "smoke.jsonl")
    p.add_argument("--mirrors", type=Path)
    p.add_argument("--base-url")
    p.add_argument("--model", default="scripted")
    p.add_argument("--max-iterations", default="3")
    args = p.parse_args()
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "k"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    work = Path(tempfile.mkdtemp(prefix="eval-wall-"))
    cases = local_cases(args.cases, args.mirrors, work / "cases.jsonl")
    server = None if args.base_url else ScriptedServer([NO_CHANGE] * 1000)
    if server is not None:
        server.__enter__()
    url = args.base_url or server.url  # type: ignore[union-attr]
    run_args = ["--base-url", url, "--model", args.model, "--max-iterations", args.max_iterations]
    try:
        rows = []
        for name, extra in (("1 worker", ["--workers", "1"]), ("2 workers", ["--workers", "2"]),
                            ("local Dask cluster, 2 workers", ["--cluster", "local", "--workers", "2"])):
            roots = ["--case-root", str(args.mirrors)] if args.mirrors else []  # the mirrors the cases now name
            wall, results = eval_once(cases, work / name.replace(" ", "-").replace(",", ""),
                                      [*extra, *roots, *run_args], env)
            rows.append((name, wall, results))
            print(f"{name}: {wall:.1f} s wall, cases' own time {sum(r['seconds'] for r in results):.1f} s, "
                  f"resolved {sum(r['resolved'] for r in results)}/{len(results)}", flush=True)
        results = rows[0][2]
        first = json.loads(cases.read_text().splitlines()[0])
        plain = plain_run(first, run_args, env, work / "plain")
        agent = next(r for r in results if r["id"] == first["id"])["agent_seconds"]
        overheads = sorted(r["seconds"] - r["agent_seconds"] for r in results)
        print(f"overhead per case (scratch copy + judge), 1 worker: median {overheads[len(overheads) // 2]:.1f} s, "
              f"min {overheads[0]:.1f} s, max {overheads[-1]:.1f} s")
        for r in results:
            print(f"  {r['id']}: case {r['seconds']:.1f} s, agent {r['agent_seconds']:.1f} s, judge "
                  f"{r['judge_seconds']:.1f} s, {r['verdict']}, {r['stop_reason']}")
        print(f"plain run of {first['id']} by hand: {plain:.1f} s; the same agent under eval: {agent:.1f} s")
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
