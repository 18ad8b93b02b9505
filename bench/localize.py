"""File-localization benchmark on SWE-bench Lite: where does the gold file land in the ranking, on two dev sets?

For each instance the repository is materialized at base_commit (one working directory per repository, updated in
place) and ranked for the problem statement by:

* the assistant, in process (default): the index is updated with Indexer, `rank()` runs its two phases with the
  lazy dense signal (at most --embed-budget chunks of model work per query) and `build_context` fits the default
  budget; the signals `rank()` gathered are stored per instance (--cache) so that every signal alone, the old hand
  fusion and any fitted model can be scored on them (bench/rankers.py, bench/fit_ranking.py);
* or with --cli through its stable contract, a subprocess per instance (`main.py --context-only --json`);
* a BM25 baseline over whole non-test Python files (path + content, bench/bm25_baseline.py), in the same run.

    python -m bench.localize --sets dev sympy [--cache /tmp/localize/records] [--refresh] [--only ID ...]
    python -m bench.localize --set-file heldout=/tmp/heldout/heldout.json --sets heldout  # a mined set
        (bench/mine_commits.py)

Two sets, always side by side (a change that helps one and hurts the other is not progress). Prints markdown tables
per set and per repository to stdout, then every instance scored by weights fitted without its repository over all
the sets reported (bench/held_out.py: the number a user meets); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sqlite3
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.bm25_baseline import bm25_rank, is_test_path, language_of, source_files
from bench.checkout import materialize
from bench.localize_cli import cli_result, fit_budget, golds_of, load_token_counter, rank_of, run_cli
from bench.localize_report import render

log = logging.getLogger("localize")

SETS = {"dev": Path("/work/shared/bench/swebench_lite_dev.json"),
        "sympy": Path("/work/shared/bench/swebench_lite_sympy.json"),
        "multilang": Path("/work/shared/bench/multilang_dev.json")}
RECORD_VERSION = 2
DEFAULT_MAIN = Path(__file__).resolve().parent.parent / "main.py"


def with_set_files(items: list[str], parser: argparse.ArgumentParser) -> dict[str, Path]:
    """SETS and the --set-file NAME=PATH items (a mined set, bench/mine_commits.py); a malformed item is an error."""
    sets = dict(SETS)
    for item in items:
        name, sep, path = item.partition("=")
        if not (sep and name and path):
            parser.error(f"--set-file takes NAME=PATH, not {item!r}")
        sets[name] = Path(path)
    return sets


def gold_files(patch: str, language: str = "py") -> list[str]:
    """The files the gold patch (`diff --git a/PATH b/PATH`) changes that count as gold: for a Python instance its
    non-test files (every SWE-bench Lite and mined patch has one); for another language its non-test source files of
    that language (multilang_dev.md: docs, changelogs, configs and declaration files do not count), else its non-test
    files."""
    paths = re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.MULTILINE)
    non_test = [p for p in paths if not is_test_path(p)]
    if language != "py":
        return [p for p in non_test if language_of(p) == language] or non_test or paths
    return non_test or paths


def test_fields(golds: list[str], test_patch: str, files: set[str]) -> dict:
    """What a record needs to say whether the tests that go with the fix were in the context: each gold file's test
    by its language's convention, as the context pairs them (counterparts.nearest_test; none: an empty list), and the
    test files the fix's own test patch changed that existed before it."""
    from code_assistant.retrieve.counterparts import nearest_test

    changed = re.findall(r"^diff --git a/(\S+) b/", test_patch or "", flags=re.MULTILINE)
    return {"gold_tests": {g: [t for t in [nearest_test(g, files)] if t] for g in golds},
            "fix_tests": [t for t in dict.fromkeys(changed) if t in files]}


def ordered(instances: list[dict]) -> list[dict]:
    """Grouped by repository (first-appearance order), oldest first inside a group so checkouts move forward."""
    first: dict[str, int] = {}
    for i, inst in enumerate(instances):
        first.setdefault(inst["repo"], i)
    return sorted(instances, key=lambda x: (first[x["repo"]], x.get("created_at", ""), x["instance_id"]))


class InProcess:
    """One Indexer per repository, the embedder loaded once: the assistant without a process per instance."""

    def __init__(self, index_root: Path, snapshots: Path | None = None) -> None:
        from code_assistant.index import embeddings

        self.index_root = index_root
        self.snapshots = snapshots
        self.embedder = embeddings.make_embedder("local")
        self.indexers: dict[str, object] = {}

    def update(self, repo: Path, name: str, key: str = "") -> tuple:
        """The repository's index brought up to date, and kept as of this commit if snapshots are asked for."""
        from code_assistant.index import store
        from code_assistant.index.indexer import Indexer

        if name not in self.indexers:
            path = self.index_root / name
            client = store.open_client(path)
            chunks = store.ChunkStore(client, store.collection_for(client, repo, self.embedder.name))
            self.indexers[name] = Indexer(repo, path, self.embedder, chunks)
        index, stats = self.indexers[name].update()  # type: ignore[attr-defined]
        if self.snapshots and key:  # the index database as of this commit: signals can be gathered again from it
            target = self.snapshots / f"{key}.sqlite"
            target.parent.mkdir(parents=True, exist_ok=True)
            src, dst = sqlite3.connect(index.db.path), sqlite3.connect(target)
            src.backup(dst)
            src.close(), dst.close()
        return index, stats

    def run(self, repo: Path, name: str, task: str, budget: int, embed_budget: int, key: str = "",
            tests: tuple[list[str], str] = ([], ""), map_files: bool = True) -> dict:
        """One query: the ranking, its context and its signals; `tests`: the gold files and the fix's test patch
        (test_fields); map_files=False: the context of a model that cannot ask for more files (--small-model)."""
        from code_assistant.retrieve.context import build_context
        from code_assistant.retrieve.ranking import rank

        started = time.perf_counter()
        index, stats = self.update(repo, name, key)
        indexed = time.perf_counter()
        ranking = rank(index, task, embed_budget=embed_budget)
        ranked = time.perf_counter()
        context = build_context(index, task, budget, ranked=ranking, map_files=map_files)
        sig = ranking.signals
        assert sig is not None
        from code_assistant.retrieve import fusion

        shipped = {name: asdict(fusion.shipped(name)) for name in ("fast", "full")}  # the models of the package's JSON
        weights = hashlib.sha1(json.dumps(shipped, sort_keys=True).encode()).hexdigest()[:8]
        return {"files": [r.path for r in ranking.files], "context_files": context.paths, "map_files": context.map,
                "listed_files": context.listed, "tests_paired": context.tests, **test_fields(*tests, set(index.files)),
                "embedded": ranking.embedded,
                "weights": weights,
                "asked": ranking.dense_asked, "about_tests": sig.about_tests, "n_files": sig.n_files,
                "degree": sig.degree, "signals": [asdict(f) for f in sig.files.values()],
                "seconds": {"index": round(indexed - started, 2), "rank": round(ranked - indexed, 2),
                            "context": round(time.perf_counter() - ranked, 2)}, "index_changed": stats.changed}


def evaluate(inst: dict, set_name: str, args: argparse.Namespace, count, runner: InProcess | None) -> dict:
    """One instance: materialize, BM25 baseline, the assistant. Errors become fields of the record."""
    name = inst["repo"].split("/")[-1]
    dest = args.work / name
    language = inst.get("language", "py")
    golds = gold_files(inst["patch"], language)
    rec: dict = {"version": RECORD_VERSION, "set": set_name, "instance_id": inst["instance_id"], "repo": inst["repo"],
                 "language": language, "gold": golds[0], "golds": golds}
    git_dir = args.mirrors / inst["repo"].replace("/", "+") / "repo"
    if not git_dir.is_dir():
        rec["error"] = f"no mirror at {git_dir}"
        return rec
    try:
        materialize(git_dir, inst["base_commit"], dest)
    except Exception as exc:  # noqa: BLE001 - a commit that cannot be written is a skipped instance
        rec["error"] = f"materialize failed: {exc}"
        return rec
    task = inst["problem_statement"]
    baseline = bm25_rank(source_files(dest, language), task)
    fitted = fit_budget(baseline, dest, args.budget, count)
    rec["bm25"] = {"rank": rank_of(golds, baseline), "files": baseline[:50],
                   "in_context": any(g in fitted for g in golds)}
    if args.cli:
        cmd = [sys.executable, str(DEFAULT_MAIN), "--repo", str(dest), "--task", task, "--context-only", "--json",
               "--index-path", str(args.index / name), "--embed-budget", str(args.embed_budget)]
        cli = cli_result(run_cli(cmd, args.timeout, dict(os.environ)), dest, golds, args.budget, count)
        if "error" in cli:
            rec["error"] = f"assistant: {cli['error']}"
        rec.update(ranking=cli.get("files", []), context=cli.get("context_files", []), map=cli.get("map_files", []),
                   listed=cli.get("listed_files", []),
                   embedded=cli.get("chunks_embedded") or 0, seconds={"rank": cli["seconds"]}, cli=cli)
        return rec
    assert runner is not None
    out = runner.run(dest, name, task, args.budget, args.embed_budget, f"{set_name}/{inst['instance_id']}",
                     (golds, inst.get("test_patch", "")), map_files=not args.no_map)
    rec["ranking"], rec["context"], rec["files"] = out.pop("files"), out.pop("context_files"), out.pop("signals")
    rec["map"], rec["listed"] = out.pop("map_files"), out.pop("listed_files")
    rec.update(out)
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set-file", action="append", default=[], metavar="NAME=PATH",
                   help="add (or override) a set for this run, e.g. heldout=/tmp/heldout/heldout.json")
    p.add_argument("--sets", nargs="+", default=["dev", "sympy"], help=f"of {sorted(SETS)} and --set-file names")
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="holds owner+name/repo bare dirs")
    p.add_argument("--work", type=Path, default=Path("/tmp/localize/work"), help="one working dir per repository")
    p.add_argument("--index", type=Path, default=Path("/tmp/localize/index"), help="one index dir per repository")
    p.add_argument("--cache", type=Path, default=Path("/tmp/localize/records"), help="one record per instance")
    p.add_argument("--snapshots", type=Path, default=Path("/tmp/localize/snapshots"),
                   help="keep each instance's index database here (signals can then be gathered again offline)")
    p.add_argument("--snapshot-only", action="store_true",
                   help="only index and keep the snapshot of instances that have a record but no snapshot")
    p.add_argument("--refresh", action="store_true", help="run instances again even if their record exists")
    p.add_argument("--report-only", action="store_true", help="report on the stored records, run nothing")
    p.add_argument("--only", nargs="+", default=[], metavar="ID", help="instance ids (or substrings) to run")
    p.add_argument("--budget", type=int, default=12000, help="context token budget for 'gold in context'")
    p.add_argument("--no-map", action="store_true",
                   help="no map of more files in the context, as for a model that cannot ask for one (--small-model)")
    p.add_argument("--embed-budget", type=int, default=200, help="chunks a query may embed (the CLI's default)")
    p.add_argument("--cli", action="store_true", help="run main.py per instance (the contract), not in process")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per CLI call")
    p.add_argument("--held-out", type=int, default=10, metavar="K",
                   help="also score every instance by weights fitted without its repository, over all the sets of "
                        "the report: K folds of whole repositories (0: one per repository; -1: no such table)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    sets = with_set_files(args.set_file, p)
    if unknown := [s for s in args.sets if s not in sets]:
        p.error(f"unknown sets {unknown}: choose from {sorted(sets)}")
    if args.no_map and args.cli:
        p.error("--no-map is for the in-process run, not --cli")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    count, _ = load_token_counter()
    runner = None
    records: dict[str, list[dict]] = {}
    for set_name in args.sets:
        instances = ordered(json.loads(sets[set_name].read_text()))
        if args.only:
            instances = [i for i in instances if any(o in i["instance_id"] for o in args.only)]
        folder = args.cache / (f"cli-{set_name}" if args.cli else set_name)
        folder.mkdir(parents=True, exist_ok=True)
        records[set_name] = []
        for n, inst in enumerate(instances, start=1):
            path = folder / f"{inst['instance_id']}.json"
            snapshot = args.snapshots / set_name / f"{inst['instance_id']}.sqlite"
            if args.snapshot_only:  # only the index snapshot of an instance already run
                if path.is_file() and not snapshot.is_file():
                    print(f"[{set_name} {n}/{len(instances)}] snapshot {inst['instance_id']}", file=sys.stderr)
                    runner = runner or InProcess(args.index, args.snapshots)
                    git_dir = args.mirrors / inst["repo"].replace("/", "+") / "repo"
                    dest = args.work / inst["repo"].split("/")[-1]
                    materialize(git_dir, inst["base_commit"], dest)
                    runner.update(dest, dest.name, f"{set_name}/{inst['instance_id']}")
                continue
            if (path.is_file() and not args.refresh) or args.report_only:
                if path.is_file():
                    records[set_name].append(json.loads(path.read_text()))
                continue
            print(f"[{set_name} {n}/{len(instances)}] {inst['instance_id']}", file=sys.stderr, flush=True)
            if runner is None and not args.cli:
                runner = InProcess(args.index, args.snapshots)
            started = time.perf_counter()
            try:
                rec = evaluate(inst, set_name, args, count, runner)
            except Exception as exc:
                log.exception("instance %s failed", inst["instance_id"])
                golds = gold_files(inst["patch"], inst.get("language", "py"))
                rec = {"set": set_name, "instance_id": inst["instance_id"], "repo": inst["repo"],
                       "language": inst.get("language", "py"), "gold": golds[0], "golds": golds,
                       "error": f"{type(exc).__name__}: {exc}"}
            rec["seconds_total"] = round(time.perf_counter() - started, 2)
            path.write_text(json.dumps(rec))
            records[set_name].append(rec)
            shown = any(g in rec.get("context", []) for g in golds_of(rec))
            ranked = rank_of(golds_of(rec), rec.get("ranking", []))
            print(f"    bm25 {rec.get('bm25', {}).get('rank')} | assistant {ranked} {'ctx' if shown else ''}"
                  f" {rec.get('error', '')}"
                  f" ({rec['seconds_total']:.0f}s)", file=sys.stderr, flush=True)
    if not args.snapshot_only:
        print(render(records, args.budget))
        usable = {name: [r for r in recs if "files" in r and "error" not in r] for name, recs in records.items()}
        if args.held_out >= 0 and len({r["repo"] for recs in usable.values() for r in recs}) > 1:
            from bench.held_out import table

            print(f"### Held out by repository: the sets {', '.join(usable)} together\n")
            print("\n".join(table(usable, args.held_out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
