"""The first answer on a checkout nobody indexed yet: where the gold file lands, and how long the answer takes.

`bench.localize` keeps one index per repository, so only its first instance of a repository is cold; a user's first
run on their own repository always is. Here every instance gets a fresh index: the repository is written out at its
base commit (bench/checkout.py), `main.py --task PROBLEM --context-only --json` runs on it with an empty
--index-path, and any completion it leaves in the background is stopped before the next instance (it would take
the cores from the next measurement). Several trees of the code can be compared side by side on the same
checkouts, one after the other per instance (--main LABEL=PATH, repeatable):

    python -m bench.cold_first_answer --sets dev sympy --limit 12 \\
        --main before=/tmp/before/main.py --main after=main.py

Prints per tree: acc@1/5/10 of the gold file in the ranking, the gold file in the context, median and total seconds
to the answer; records go to --out as JSON lines.
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
from pathlib import Path

from bench.checkout import materialize
from bench.localize import SETS, gold_files
from bench.localize_cli import _as_path, golds_of, parse_cli_stdout, rank_of, run_cli

ROOT = Path(__file__).resolve().parent.parent


def stop_completions(index: Path) -> None:
    """Stop a background completion of `index` (a process of its own session, named by its index path)."""
    subprocess.run(["pkill", "-9", "-f", str(index)], check=False, capture_output=True)


def as_a_clone(tree: Path) -> None:
    """The written-out tree made a git repository of one commit, as a user's clone is (the first answer's scan of a
    big tree is `git grep`; a tree that is no repository is indexed whole)."""
    shutil.rmtree(tree / ".git", ignore_errors=True)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base", "--no-verify"]):
        subprocess.run([*git, *args], cwd=tree, check=True, capture_output=True)


def one(main: Path, repo: Path, task: str, golds: list[str], timeout: float) -> dict:
    index = Path(tempfile.mkdtemp(prefix="cold-index-"))
    try:
        run = run_cli([sys.executable, str(main), "--repo", str(repo), "--task", task, "--context-only", "--json",
                       "--index-path", str(index)], timeout, dict(os.environ))
    finally:
        stop_completions(index)
        shutil.rmtree(index, ignore_errors=True)
    if run["returncode"] != 0:
        return {"seconds": run["seconds"], "error": run["stderr"].strip().splitlines()[-1:]}
    answer, _ = parse_cli_stdout(run["stdout"])
    files = [p for p in (_as_path(f, repo) for f in answer.get("files") or []) if p]
    context = [p for p in (_as_path(f, repo) for f in answer.get("context_files") or []) if p]
    return {"seconds": run["seconds"], "rank": rank_of(golds, files), "in_context": any(g in context for g in golds),
            "files": files[:20]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", default=["dev", "sympy"], help=f"of {sorted(SETS)}")
    p.add_argument("--limit", type=int, default=0, help="at most this many instances a set (0: all)")
    p.add_argument("--main", action="append", default=[], metavar="LABEL=PATH", help="a tree's main.py (repeatable)")
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    p.add_argument("--work", type=Path, default=Path("/tmp/cold-first/work"))
    p.add_argument("--out", type=Path, default=Path("/tmp/cold-first/records.jsonl"))
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    mains = dict(item.split("=", 1) for item in args.main) or {"this": str(ROOT / "main.py")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {label: [] for label in mains}
    with args.out.open("a") as out:
        for set_name in args.sets:
            instances = json.loads(SETS[set_name].read_text())
            git_dirs = [(inst, args.mirrors / inst["repo"].replace("/", "+") / "repo") for inst in instances]
            chosen = [(inst, git) for inst, git in git_dirs if git.is_dir()]
            for inst, git in chosen[:args.limit or None]:
                dest = args.work / inst["repo"].split("/")[-1]
                materialize(git, inst["base_commit"], dest)
                as_a_clone(dest)
                golds = golds_of({"golds": gold_files(inst["patch"], inst.get("language", "py"))})
                for label, path in mains.items():
                    result = {"set": set_name, "instance_id": inst["instance_id"], "main": label,
                              **one(Path(path), dest, inst["problem_statement"], golds, args.timeout)}
                    rows[label].append(result)
                    out.write(json.dumps(result) + "\n")
                    out.flush()
                    print(f"[cold] {inst['instance_id']} {label}: rank {result.get('rank')}, "
                          f"{result['seconds']:.1f} s{' ' + str(result['error']) if 'error' in result else ''}",
                          file=sys.stderr, flush=True)
    print("| tree | instances | acc@1 | acc@5 | acc@10 | gold in context | median s | total s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, found in rows.items():
        n = len(found)
        if not n:
            continue
        ranks = [r.get("rank") for r in found]
        at = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)}
        seconds = [r["seconds"] for r in found]
        in_context = sum(1 for r in found if r.get("in_context")) / n
        print(f"| {label} | {n} | {at[1]:.2f} | {at[5]:.2f} | {at[10]:.2f} | {in_context:.2f} | "
              f"{statistics.median(seconds):.1f} | {sum(seconds):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
