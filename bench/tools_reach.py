"""Do the model's tools reach the file the fix goes to, without a model (issue 44, "Measure" 1)?

For every instance of the dev sets that can be checked out (bench/checkout.py, one working directory per repository,
its index updated in place as bench/localize.py does), the issue's text is met four ways:

* the first context: `build_context` with the default budget (12,000 tokens) and the default lazy dense signal, as
  a run's plan request shows it; "shown" = a form of the gold file is in it (the map's lines are counted apart);
* the tools as a model would call them, through the product's own Toolbox (`Workspace.tools.box`, read-only: search,
  grep, read, symbol) and its cap of 12 calls an answer, in a plausible order: `search` with the issue's text (k=8),
  then for each thing the issue names (bench/issue_names.py: paths it would `read`, names it would look up with
  `symbol` and then `grep` for as a word), until the 12 calls are spent; and, apart, one `search` with the issue's
  title (its first line), a shorter query a model is likelier to write;
* BM25 over whole non-test files (bench/bm25_baseline.py), its top 8 (beside search's 8) and what fits 12,000 tokens.

"Found" = a gold file's path starts a line of the tool's output (`path:line: text`, search's `path  (reasons)`,
read's `path: lines a-b of n`). The gain is what a call finds that the first context did not show: within 1 call
(the search), 2 calls (and the first name's look-up) and the 12.

    python -m bench.tools_reach --sets dev multilang sympy [--cache /tmp/toolsreach/records] [--only ID ...]
    python -m bench.tools_reach --sets dev multilang sympy --report-only     # the tables from the stored records

Markdown tables on stdout, progress on stderr; a record per instance under --cache (every call's tool, arguments,
the gold files in its output, its tokens and seconds), so the report can be made again without running anything.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from pathlib import Path

from bench.bm25_baseline import bm25_rank, source_files
from bench.checkout import materialize
from bench.issue_names import Named, named
from bench.localize import SETS, InProcess, gold_files, ordered
from bench.localize_cli import fit_budget, load_token_counter, rank_of
from bench.tools_reach_report import render

log = logging.getLogger("tools_reach")

RECORD_VERSION = 1
SEARCH_K = 8
BUDGET = 12000


def found(text: str, golds: list[str]) -> list[str]:
    """The gold files whose path starts a line of a tool's output."""
    return [g for g in golds if re.search(rf"(?m)^{re.escape(g)}(?=[:\s(]|$)", text)]


def grep_pattern(name: str) -> str:
    """What a model greps for a name: its last part (`Cookie.max_age` -> max_age), as a word."""
    last = re.split(r"\.|::", name)[-1]
    return rf"\b{re.escape(last)}\b" if re.fullmatch(r"\w+", last) else re.escape(last)


def planned_calls(task: str, names: list[Named], max_calls: int) -> list[tuple[str, dict]]:
    """The calls in the order a model plausibly makes them: the search, then each named thing's look-up."""
    calls: list[tuple[str, dict]] = [("search", {"query": task, "k": SEARCH_K})]
    for item in names:
        if item.kind == "path":
            calls.append(("read", {"path": item.text}))
        else:
            calls += [("symbol", {"name": item.text}), ("grep", {"pattern": grep_pattern(item.text)})]
    return calls[:max_calls]


def _matches(repo: Path, golds: list[str], pattern: str) -> bool:
    """Whether a gold file has a line the pattern finds (so a capped output that leaves it out could show it)."""
    regex = re.compile(pattern)
    for gold in golds:
        try:
            text = (repo / gold).read_text(errors="replace")
        except OSError:
            continue
        if any(regex.search(line[:2000]) for line in text.splitlines()):
            return True
    return False


def made_record(made, golds: list[str], seconds: float, count, repo: Path, position: int) -> dict:
    """One call as stored: what was asked, the gold files in its output, its size and time."""
    text = made.result.text
    hits = found(text, golds)
    rec = {"n": position, "tool": made.name, "arguments": {k: v for k, v in made.arguments.items() if k != "query"},
           "found": hits, "tokens": count(text), "chars": len(text), "seconds": round(seconds, 3),
           "summary": made.result.summary[:200], "error": made.result.error,
           "capped": "not shown" in text and ("more matching lines" in text or "more references" in text
                                              or "read with start" in text)}
    if made.name == "symbol":
        definitions = text.split("\nReferences:")[0]
        rec["defined_in_gold"] = bool(found(definitions, golds))
    if made.name in ("grep", "symbol") and not hits and not made.result.error:
        pattern = made.arguments.get("pattern") or grep_pattern(made.arguments.get("name", ""))
        rec["gold_matches"] = _matches(repo, golds, pattern)
    return rec


def evaluate(inst: dict, set_name: str, args: argparse.Namespace, runner: InProcess, count) -> dict:
    from code_assistant.retrieve.context import build_context
    from code_assistant.settings import load_settings
    from code_assistant.tools.files import RepoView
    from code_assistant.workspace import Workspace

    name = inst["repo"].split("/")[-1]
    dest = args.work / name
    language = inst.get("language", "py")
    golds = gold_files(inst["patch"], language)
    rec: dict = {"version": RECORD_VERSION, "set": set_name, "instance_id": inst["instance_id"], "repo": inst["repo"],
                 "language": language, "golds": golds}
    git_dir = args.mirrors / inst["repo"].replace("/", "+") / "repo"
    if not git_dir.is_dir():
        return {**rec, "error": f"no mirror at {git_dir}"}
    materialize(git_dir, inst["base_commit"], dest)
    task = inst["problem_statement"]

    started = time.perf_counter()
    index, _ = runner.update(dest, name)
    indexed = time.perf_counter()
    context = build_context(index, task, BUDGET)
    ranking = [r.path for r in context.ranking]
    rec["context"] = {"shown": any(g in context.paths for g in golds), "map": any(g in context.map for g in golds),
                      "listed": any(g in context.listed for g in golds), "rank": rank_of(golds, ranking),
                      "tokens": context.tokens, "embedded": context.embedded,
                      "seconds": round(time.perf_counter() - indexed, 2), "index_seconds": round(indexed - started, 2)}

    baseline = bm25_rank(source_files(dest, language), task)
    rec["bm25"] = {"rank": rank_of(golds, baseline),
                   "in_budget": any(g in fit_budget(baseline, dest, BUDGET, count) for g in golds)}

    settings = load_settings(dest, index_path=str(args.index / name))
    with Workspace(settings) as workspace:
        box = workspace.tools.box(dest, lambda: index, read_only=True)
    files = RepoView(dest, exclude=[settings.index_path, settings.state_path]).files()  # as the box's tools see them
    rec["n_visible"] = len(files)
    names = named(task, files)
    rec["names"] = [[n.kind, n.text] for n in names]
    box.new_answer()
    rec["calls"] = []
    for position, (tool, arguments) in enumerate(planned_calls(task, names, box.max_calls), start=1):
        t0 = time.perf_counter()
        made = box.call(tool, arguments)
        rec["calls"].append(made_record(made, golds, time.perf_counter() - t0, count, dest, position))
    box.new_answer()
    title = task.strip().splitlines()[0] if task.strip() else task
    t0 = time.perf_counter()
    made = box.call("search", {"query": title, "k": SEARCH_K})
    rec["title_search"] = made_record(made, golds, time.perf_counter() - t0, count, dest, 0)
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", default=["dev"], help=f"of {sorted(SETS)}")
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="holds owner+name/repo bare dirs")
    p.add_argument("--work", type=Path, default=Path("/tmp/toolsreach/work"), help="one working dir per repository")
    p.add_argument("--index", type=Path, default=Path("/tmp/toolsreach/index"), help="one index dir per repository")
    p.add_argument("--cache", type=Path, default=Path("/tmp/toolsreach/records"), help="one record per instance")
    p.add_argument("--refresh", action="store_true", help="run instances again even if their record exists")
    p.add_argument("--report-only", action="store_true", help="report on the stored records, run nothing")
    p.add_argument("--only", nargs="+", default=[], metavar="ID", help="instance ids (or substrings) to run")
    p.add_argument("--per-repo", action="store_true", help="also a row per repository")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if unknown := [s for s in args.sets if s not in SETS]:
        p.error(f"unknown sets {unknown}: choose from {sorted(SETS)}")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    count, _ = load_token_counter()
    runner: InProcess | None = None
    records: dict[str, list[dict]] = {}
    for set_name in args.sets:
        instances = ordered(json.loads(SETS[set_name].read_text()))
        if args.only:
            instances = [i for i in instances if any(o in i["instance_id"] for o in args.only)]
        folder = args.cache / set_name
        folder.mkdir(parents=True, exist_ok=True)
        records[set_name] = []
        for n, inst in enumerate(instances, start=1):
            path = folder / f"{inst['instance_id']}.json"
            if (path.is_file() and not args.refresh) or args.report_only:
                if path.is_file():
                    records[set_name].append(json.loads(path.read_text()))
                continue
            print(f"[{set_name} {n}/{len(instances)}] {inst['instance_id']}", file=sys.stderr, flush=True)
            runner = runner or InProcess(args.index)
            started = time.perf_counter()
            try:
                rec = evaluate(inst, set_name, args, runner, count)
            except Exception as exc:  # an instance that cannot be run is a record that says why
                log.exception("instance %s failed", inst["instance_id"])
                rec = {"version": RECORD_VERSION, "set": set_name, "instance_id": inst["instance_id"],
                       "repo": inst["repo"], "language": inst.get("language", "py"),
                       "golds": gold_files(inst["patch"], inst.get("language", "py")),
                       "error": f"{type(exc).__name__}: {exc}"}
            rec["seconds_total"] = round(time.perf_counter() - started, 2)
            path.write_text(json.dumps(rec))
            records[set_name].append(rec)
            if "error" in rec:
                print(f"    error: {rec['error']}", file=sys.stderr, flush=True)
                continue
            first = next((c["n"] for c in rec["calls"] if c["found"]), None)
            print(f"    context {'shown' if rec['context']['shown'] else '-'} | search "
                  f"{'found' if rec['calls'][0]['found'] else '-'} | first call finding gold: {first} of "
                  f"{len(rec['calls'])} | names {len(rec['names'])} ({rec['seconds_total']:.0f}s)",
                  file=sys.stderr, flush=True)
    print(render(records, per_repo=args.per_repo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
