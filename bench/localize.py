"""File-localization benchmark on SWE-bench Lite dev: where does the gold file land in the ranking?

For each instance the repository is materialized at base_commit (one working directory per repository, updated in
place), then two retrievers rank files for the problem statement:

* the assistant, through its stable CLI contract (a subprocess; stdout is one JSON object with a ranked "files"
  list, optionally "context_files");
* a BM25 baseline over whole non-test Python files (path + content, identifier-aware tokens; bench/bm25_baseline.py).

    python -m bench.localize --data /work/shared/bench/swebench_lite_dev.json --mirrors /work/.mirror \
        --work /tmp/swebench --out results.json [--baseline-only] [--only ID ...]

Prints a markdown report to stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.bm25_baseline import bm25_rank, is_test_path, read_text, source_files
from bench.checkout import CheckoutError, materialize

log = logging.getLogger("localize")

RESULTS_VERSION = 1
KS = (1, 3, 5)
CLI_DEFAULT_BUDGET = 12000
DEFAULT_MAIN = Path(__file__).resolve().parent.parent / "main.py"


# ---------------------------------------------------------------------------------------------------------- gold


def gold_files(patch: str) -> list[str]:
    """Non-test files changed by the gold patch (`diff --git a/PATH b/PATH`)."""
    paths = re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.MULTILINE)
    return [p for p in paths if not is_test_path(p)] or paths


def rank_of(gold: str, files: list[str]) -> int | None:
    """1-based rank of the gold file, None when it is not ranked at all."""
    return files.index(gold) + 1 if gold in files else None


# ------------------------------------------------------------------------------------------------------ budget


def load_token_counter() -> tuple[Callable[[str], int], str]:
    """The project's token counter (tiktoken's cl100k_base, offline)."""
    from code_assistant.tokens import count_tokens

    return count_tokens, "code_assistant.tokens.count_tokens"


def fit_budget(files: list[str], repo: Path, budget: int, count: Callable[[str], int]) -> list[str]:
    """The longest prefix of the ranking whose whole files fit the token budget together."""
    fitted, used = [], 0
    for rel in files:
        text = read_text(repo / rel) or ""
        used += count(text)
        if used > budget:
            break
        fitted.append(rel)
    return fitted


# ------------------------------------------------------------------------------------------------------- CLI


def _as_path(item: object, repo: Path) -> str | None:
    if isinstance(item, dict):
        item = item.get("path") or item.get("file")
    if not isinstance(item, str) or not item:
        return None
    path = item.replace("\\", "/")
    if os.path.isabs(path):
        try:
            path = Path(path).resolve().relative_to(repo.resolve()).as_posix()
        except ValueError:
            return path
    return path[2:] if path.startswith("./") else path


def parse_cli_stdout(stdout: str) -> tuple[dict, str | None]:
    """The one JSON object on stdout; falls back to the last JSON line (and says so) if there is extra text."""
    text = stdout.strip()
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return obj, None
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj, "stdout held text besides the JSON object"
    raise ValueError(f"stdout is not a JSON object: {text[:200]!r}")


def run_cli(cmd: list[str], timeout: float, env: dict[str, str]) -> dict:
    """Run the assistant; never raises. Returns stdout/stderr/returncode/seconds (returncode -1 on timeout)."""
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    except OSError as exc:
        return {"returncode": -1, "stdout": "", "stderr": str(exc), "seconds": 0.0}
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code, err = -1, f"timed out after {timeout:.0f}s\n{err}"
    return {"returncode": code, "stdout": out, "stderr": err, "seconds": round(time.perf_counter() - started, 3)}


def cli_result(run: dict, repo: Path, gold: str, budget: int, count: Callable[[str], int]) -> dict:
    result: dict = {"seconds": run["seconds"], "returncode": run["returncode"]}
    if run["returncode"] != 0:
        stderr_lines = [line for line in run["stderr"].splitlines() if line.strip()]
        result["error"] = f"exit {run['returncode']}: {stderr_lines[-1].strip() if stderr_lines else '(no stderr)'}"
        result["stderr_tail"] = run["stderr"][-2000:]
        return result
    try:
        obj, warning = parse_cli_stdout(run["stdout"])
    except ValueError as exc:
        result["error"] = str(exc)
        return result
    files = [p for p in (_as_path(f, repo) for f in obj.get("files") or []) if p]
    result.update(files=files[:50], n_files=len(files), tokens=obj.get("tokens"), rank=rank_of(gold, files))
    if isinstance(obj.get("context_files"), list):
        context = [p for p in (_as_path(f, repo) for f in obj["context_files"]) if p]
        result["context_source"] = "context_files"
    else:
        context = fit_budget(files, repo, budget, count)
        result["context_source"] = "estimated from files"
    result.update(in_context=gold in context, n_context=len(context))
    if warning:
        result["warning"] = warning
    return result


# ------------------------------------------------------------------------------------------------------- run


def repo_name(repo: str) -> str:
    return repo.split("/")[-1]


def mirror_dir(mirrors: Path, repo: str) -> Path:
    return mirrors / repo.replace("/", "+") / "repo"


def ordered(instances: list[dict]) -> list[dict]:
    """Grouped by repository (first-appearance order), oldest first inside a group so checkouts move forward."""
    first = {}
    for i, inst in enumerate(instances):
        first.setdefault(inst["repo"], i)
    return sorted(instances, key=lambda x: (first[x["repo"]], x.get("created_at", ""), x["instance_id"]))


def evaluate(inst: dict, args: argparse.Namespace, count: Callable[[str], int], state: dict) -> dict:
    """One instance: materialize, BM25, then the assistant. Errors become fields of the row."""
    name = repo_name(inst["repo"])
    dest = args.work / name
    gold = gold_files(inst["patch"])[0]
    row: dict = {"instance_id": inst["instance_id"], "repo": inst["repo"], "base_commit": inst["base_commit"],
                 "gold": gold}
    git_dir = mirror_dir(args.mirrors, inst["repo"])
    if not git_dir.is_dir():
        row["error"] = f"no mirror at {git_dir}"
        return row
    try:
        stats = materialize(git_dir, inst["base_commit"], dest)
    except (CheckoutError, OSError) as exc:
        row["error"] = f"materialize failed: {exc}"
        return row
    row["checkout"] = {k: v for k, v in stats.as_dict().items() if k != "missing_paths"}
    row["gold_on_disk"] = (dest / gold).is_file()

    started = time.perf_counter()
    docs = source_files(dest, tuple(args.bm25_ext))
    ranking = bm25_rank(docs, inst["problem_statement"])
    context = fit_budget(ranking, dest, args.budget, count)
    row["repo_stats"] = {"files": stats.files, "bytes": stats.bytes, "bm25_docs": len(docs)}
    row["bm25"] = {"rank": rank_of(gold, ranking), "in_context": gold in context, "n_context": len(context),
                   "files": ranking[:10], "seconds": round(time.perf_counter() - started, 3)}

    if not args.baseline_only:
        index_dir = args.index_path / name
        cold = name not in state["indexed"]
        if cold and not args.keep_index:
            shutil.rmtree(index_dir, ignore_errors=True)
        state["indexed"].add(name)
        cmd = [args.python, str(args.main), "--repo", str(dest), "--task", inst["problem_statement"],
               "--context-only", "--json", "--index-path", str(index_dir), *args.cli_arg]
        if args.budget != CLI_DEFAULT_BUDGET:  # keep the flag out of the call when the contract's default applies
            cmd += ["--context-tokens", str(args.budget)]
        env = {**os.environ, "CODE_ASSISTANT_STATE_PATH": str(args.index_path.parent / "swebench-state")}
        row["cli"] = {"cold": cold, **cli_result(run_cli(cmd, args.timeout, env), dest, gold, args.budget, count)}
    return row


# ---------------------------------------------------------------------------------------------------- report


def summarize(rows: list[dict], key: str) -> dict:
    """acc@k and gold-in-context over the instances that were evaluated (retriever errors count as misses)."""
    done = [r for r in rows if "bm25" in r]
    scored = [r.get(key, {}) for r in done]
    if key == "cli" and not any(scored):
        return {}
    out: dict = {"n": len(done), "errors": sum(1 for s in scored if "error" in s or not s)}
    for k in KS:
        out[f"acc@{k}"] = sum(1 for s in scored if s.get("rank") and s["rank"] <= k)
    out["in_context"] = sum(1 for s in scored if s.get("in_context"))
    ranks = [1 / s["rank"] for s in scored if s.get("rank")]
    out["mrr"] = round(sum(ranks) / len(done), 3) if done else 0.0
    return out


def repo_summary(rows: list[dict]) -> dict[str, dict]:
    repos: dict[str, dict] = {}
    for r in rows:
        if "repo_stats" not in r:
            continue
        s = repos.setdefault(r["repo"], {"instances": 0, "files": 0, "mb": 0.0, "bm25_docs": 0, "checkout_s": [],
                                         "cli_cold_s": None, "cli_warm_s": []})
        s["instances"] += 1
        s["files"] = max(s["files"], r["repo_stats"]["files"])
        s["mb"] = max(s["mb"], round(r["repo_stats"]["bytes"] / 2**20, 1))
        s["bm25_docs"] = max(s["bm25_docs"], r["repo_stats"]["bm25_docs"])
        s["checkout_s"].append(r["checkout"]["seconds"])
        cli = r.get("cli")
        if cli and "error" not in cli:
            if cli["cold"]:
                s["cli_cold_s"] = cli["seconds"]
            else:
                s["cli_warm_s"].append(cli["seconds"])
    return repos


def _pct(n: int, total: int) -> str:
    return f"{n}/{total} ({100 * n / total:.0f}%)" if total else "-"


def _rank(res: dict | None) -> str:
    if not res:
        return ""
    if "error" in res:
        return "err"
    rank = "-" if res.get("rank") is None else str(res["rank"])
    return f"{rank} {'✓' if res.get('in_context') else '·'}"


def render(results: dict) -> str:
    rows, budget = results["instances"], results["budget"]
    lines = [f"### File localization — SWE-bench Lite dev ({len(rows)} instances, budget {budget} tokens)", "",
             "| retriever | n | acc@1 | acc@3 | acc@5 | gold in context | MRR | errors |",
             "|---|---|---|---|---|---|---|---|"]
    bm25_label = f"BM25 (whole non-test {'/'.join(results['bm25_ext'])} files, path + content)"
    for label, key in ((bm25_label, "bm25"), ("assistant (`main.py --context-only`)", "cli")):
        s = results["summary"].get(key)
        if not s:
            continue
        n = s["n"]
        lines.append(f"| {label} | {n} | " + " | ".join(_pct(s[f"acc@{k}"], n) for k in KS)
                     + f" | {_pct(s['in_context'], n)} | {s['mrr']} | {s['errors']} |")
    skipped = [r for r in rows if "bm25" not in r]
    if skipped:
        lines += ["", "Not evaluated: " + "; ".join(f"{r['instance_id']} ({r.get('error', '?')})" for r in skipped)]
    lines += ["", "Rank of the gold file (✓ = inside the context, · = not; `-` = not ranked):", "",
              "| instance | gold file | BM25 | assistant | assistant s | files rewritten / deleted |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        cli = r.get("cli") or {}
        secs = f"{cli['seconds']:.1f}{' (cold)' if cli.get('cold') else ''}" if "seconds" in cli else ""
        co = r.get("checkout", {})
        lines.append(f"| {r['instance_id']} | `{r['gold']}` | {_rank(r.get('bm25'))} | {_rank(r.get('cli'))} | {secs}"
                     f" | {co.get('written', '')} / {co.get('deleted', '')} |")
    lines += ["", "| repository | instances | files | MB | non-test .py | checkout s (first / later) "
              "| assistant cold s | assistant warm s (median) |", "|---|---|---|---|---|---|---|---|"]
    for repo, s in results["repos"].items():
        later = s["checkout_s"][1:]
        co = f"{s['checkout_s'][0]:.2f} / {statistics.median(later):.2f}" if later else f"{s['checkout_s'][0]:.2f}"
        cold = "" if s["cli_cold_s"] is None else f"{s['cli_cold_s']:.1f}"
        warm = f"{statistics.median(s['cli_warm_s']):.1f}" if s["cli_warm_s"] else ""
        lines.append(f"| {repo} | {s['instances']} | {s['files']} | {s['mb']} | {s['bm25_docs']} | {co} | {cold}"
                     f" | {warm} |")
    notes = [f"token counter: {results['token_counter']}", f"materialize total {results['materialize_s']:.1f}s"]
    errors = [f"{r['instance_id']}: {r['cli']['error'][:160]}" for r in rows if "error" in (r.get("cli") or {})]
    warnings = [f"{r['instance_id']}: {r['cli']['warning']}" for r in rows if "warning" in (r.get("cli") or {})]
    lines += ["", "; ".join(notes) + "."]
    if errors:
        lines += ["", "Assistant errors:", *[f"- {e}" for e in errors]]
    if warnings:
        lines += ["", "Contract warnings:", *[f"- {w}" for w in warnings]]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("/work/shared/bench/swebench_lite_dev.json"))
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="holds owner+name/repo bare dirs")
    p.add_argument("--work", type=Path, default=Path("/tmp/swebench"), help="one working dir per repository")
    p.add_argument("--index-path", type=Path, default=Path("/tmp/swebench-index"), help="per-repo index dirs")
    p.add_argument("--only", nargs="+", default=[], metavar="ID", help="instance ids (or substrings) to run")
    p.add_argument("--budget", type=int, default=12000, help="context token budget for 'gold in context'")
    p.add_argument("--out", type=Path, help="write the raw results JSON here (rewritten after every instance)")
    p.add_argument("--baseline-only", action="store_true", help="BM25 only; do not call the assistant")
    p.add_argument("--main", type=Path, default=DEFAULT_MAIN, help="the assistant's main.py")
    p.add_argument("--python", default=sys.executable, help="interpreter for main.py")
    p.add_argument("--cli-arg", action="append", default=[], help="extra argument for main.py (repeatable)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per assistant call")
    p.add_argument("--keep-index", action="store_true", help="do not wipe each repo's index before its first call")
    p.add_argument("--fresh", action="store_true", help="delete the working dirs first (cold materialization)")
    p.add_argument("--bm25-ext", nargs="+", default=[".py"], help="file extensions BM25 ranks")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    instances = json.loads(args.data.read_text())
    if args.only:
        instances = [i for i in instances if any(o == i["instance_id"] or o in i["instance_id"] for o in args.only)]
        if not instances:
            print(f"error: no instance matches {args.only}", file=sys.stderr)
            return 2
    if not args.baseline_only and not args.main.is_file():
        print(f"error: {args.main} not found (use --baseline-only)", file=sys.stderr)
        return 2
    if args.fresh:
        for name in {repo_name(i["repo"]) for i in instances}:
            shutil.rmtree(args.work / name, ignore_errors=True)
            (args.work / f".{name}.manifest.json").unlink(missing_ok=True)
    count, counter_name = load_token_counter()
    results: dict = {"version": RESULTS_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "budget": args.budget, "token_counter": counter_name, "baseline_only": args.baseline_only,
                     "bm25_ext": args.bm25_ext,
                     "instances": []}
    state: dict = {"indexed": set()}
    for inst in ordered(instances):
        print(f"[{len(results['instances']) + 1}/{len(instances)}] {inst['instance_id']}", file=sys.stderr, flush=True)
        try:
            row = evaluate(inst, args, count, state)
        except Exception as exc:  # noqa: BLE001 - one broken instance must not end the run
            log.exception("instance %s failed", inst["instance_id"])
            row = {"instance_id": inst["instance_id"], "repo": inst["repo"], "gold": gold_files(inst["patch"])[0],
                   "error": f"{type(exc).__name__}: {exc}"}
        results["instances"].append(row)
        results["summary"] = {"bm25": summarize(results["instances"], "bm25"),
                              "cli": summarize(results["instances"], "cli")}
        results["repos"] = repo_summary(results["instances"])
        results["materialize_s"] = round(sum(r.get("checkout", {}).get("seconds", 0) for r in results["instances"]), 3)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))
        print(f"    {_rank(row.get('bm25'))} | {_rank(row.get('cli'))} {row.get('error', '')}", file=sys.stderr)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
