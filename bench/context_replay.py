"""The context again, from stored localization records, with the current context code and a replayed ranking:
each instance's commit is written out (bench/checkout.py), its index snapshot (bench/localize.py --snapshots) read
for the file records, and `build_context` given the ranking the shipped weights (or a model fitted now) make of the
record's signals. No model and no indexing: what the context shows (the gold file, the tests that go with it) can
be measured for a change to the context code or the weights in minutes, before a full run.

    python -m bench.context_replay --records G --snapshots S --out C --set-file NAME=PATH ... --sets ...
    python -m bench.localize --report-only --cache C --sets ...     # the tables, the context columns replayed

What differs from a run: the definitions dense retrieval hit (kept in the files' skeletons) are not stored, so
skeletons keep only the definitions the task names or a traceback points into; the ranking is the replay's (equal to
the run's when the weights are the run's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import rankers
from bench.checkout import materialize
from bench.localize import ordered, with_set_files
from code_assistant.index.index_db import IndexDB
from code_assistant.index.indexer import Files, RepoIndex
from code_assistant.retrieve import fusion
from code_assistant.retrieve.context import build_context
from code_assistant.retrieve.mentions import find_mentions
from code_assistant.retrieve.ranking import RankedFile, Ranking


def snapshot_at(snapshot: Path, repo: Path) -> RepoIndex:
    """A read-only RepoIndex over an index snapshot whose files are those written out at `repo`."""
    import sqlite3

    with sqlite3.connect(snapshot) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
    db = IndexDB(snapshot, meta["embedder"])
    return RepoIndex(repo, Files(db, db.files.paths()), db, None, None, None, None)  # type: ignore[arg-type]


def replay(record: dict, task: str, index: RepoIndex, budget: int, fast: fusion.Model, full: fusion.Model) -> dict:
    """The record with its ranking replayed and its context built again."""
    scored = [(p, s) for p, s in rankers.lazy_scored(record, fast, full) if p in index.files]
    mentions = find_mentions(task, index)
    ranking = Ranking([RankedFile(p, s) for p, s in scored[:150]], {}, mentions, mentions.traceback)
    context = build_context(index, task, budget, ranked=ranking)
    return {**record, "ranking": [p for p, _ in scored[:150]], "context": context.paths, "map": context.map,
            "listed": context.listed, "tests_paired": context.tests, "replayed_context": True}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, required=True)
    p.add_argument("--snapshots", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--set-file", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--sets", nargs="+", required=True)
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    p.add_argument("--work", type=Path, default=Path("/tmp/context_replay/work"), help="one working dir per repo")
    p.add_argument("--budget", type=int, default=12000)
    args = p.parse_args(argv)
    sets = with_set_files(args.set_file, p)
    fast, full = fusion.shipped("fast"), fusion.shipped("full")
    for set_name in args.sets:
        instances = ordered(json.loads(sets[set_name].read_text()))
        (args.out / set_name).mkdir(parents=True, exist_ok=True)
        done = 0
        for inst in instances:
            path = args.records / set_name / f"{inst['instance_id']}.json"
            snapshot = args.snapshots / set_name / f"{inst['instance_id']}.sqlite"
            if not path.is_file() or not snapshot.is_file():
                continue
            record = json.loads(path.read_text())
            if "files" not in record or "error" in record:
                continue
            dest = args.work / inst["repo"].split("/")[-1]
            materialize(args.mirrors / inst["repo"].replace("/", "+") / "repo", inst["base_commit"], dest)
            index = snapshot_at(snapshot, dest)
            try:
                out = replay(record, inst["problem_statement"], index, args.budget, fast, full)
            finally:
                index.db.close()
            (args.out / set_name / path.name).write_text(json.dumps(out))
            done += 1
        print(f"{set_name}: {done} contexts built again", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
