"""Gather the fast signals of stored localization records again with the current code. The dense similarities are
carried over from the record (they depend on the task and the vectors only); a file that becomes a candidate only
now has none, as a file without vectors would.

From each instance's index snapshot (default): a change to mentions.py or signals.py is measured in seconds,
without checking out or indexing anything - but the snapshot holds no file text (signals that read files, such as
a quoted message's literal, find nothing) and was indexed by the code of its run. With --reindex, each instance's
commit is written out again and indexed by the current code (no model: no vectors are made), as bench/localize.py
does, so changes to what is indexed and how imports resolve count too.

    python -m bench.regather [--records /tmp/localize/records] [--snapshots /tmp/localize/snapshots] --out DIR
    python -m bench.regather --records R --reindex --work W --index I --out DIR [--set-file NAME=PATH] [--sets ...]
    python -m bench.regather --records R --snapshots S --priors-only --out DIR   # the run's signals + imports resolved
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from dataclasses import asdict
from pathlib import Path

from bench.checkout import materialize
from bench.localize import InProcess, ordered, test_fields, with_set_files
from bench.localize_cli import golds_of
from code_assistant.index.index_db import IndexDB
from code_assistant.index.indexer import Files, RepoIndex
from code_assistant.retrieve import signals
from code_assistant.retrieve.mentions import kind_of


def snapshot_index(path: Path) -> RepoIndex:
    """A read-only RepoIndex over a snapshot: files, symbols, postings and the graph; no vectors, no model."""
    with sqlite3.connect(path) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
    db = IndexDB(path, meta["embedder"])
    return RepoIndex(Path("/nonexistent-repo"), Files(db, db.files.paths()), db,
                     None, None, None, None)  # type: ignore[arg-type]


def regather(record: dict, task: str, snapshot: Path | None = None, index: RepoIndex | None = None) -> dict:
    """The record with its fast signals gathered again from the snapshot (closed after) or from a live index."""
    live = index is not None
    index = index if live else snapshot_index(snapshot)  # type: ignore[arg-type]
    sig = signals.gather(index, task)
    old = {row["path"]: row for row in record["files"]}
    for path, entry in sig.files.items():
        if path in old and old[path]["dense"] is not None:
            entry.dense, entry.dense_rank = old[path]["dense"], old[path]["dense_rank"]
    for path, row in old.items():  # files only dense retrieval found
        if path not in sig.files and row["dense"] is not None:
            entry = sig.file(path)
            entry.kind, entry.tokens = kind_of(path), row["tokens"]
            entry.dense, entry.dense_rank = row["dense"], row["dense_rank"]
            entry.n_symbols, entry.n_imports = row.get("n_symbols", 0), row.get("n_imports", 0)
    if not live:
        index.db.close()
    return {**record, "files": [asdict(f) for f in sig.files.values()], "degree": sig.degree,
            "about_tests": sig.about_tests, "n_files": sig.n_files,
            "files_extracted": record.get("files_extracted", record["files"]),  # as the run gathered them
            "degree_extracted": record.get("degree_extracted", record.get("degree", {}))}


def add_priors(record: dict, task: str, snapshot: Path, test_patch: str = "") -> dict:
    """The record with what the leaf-user feature needs (each candidate's imports resolved, from the snapshot's import
    graph) and every other signal as the run gathered it - exact, since that count depends on the index alone - and
    which tests go with the fix (test_fields, by the current rule). Issue 37's other priors (PageRank core-ness,
    behaviour-word cover, roles by name) were measured at 838932a and not kept."""
    index = snapshot_index(snapshot)
    try:
        degree = index.db.imports([row["path"] for row in record["files"]])
        tests = test_fields(golds_of(record), test_patch, set(index.files))
    finally:
        index.db.close()
    rows = [{**row, "imports_resolved": degree.get(row["path"], 0)} for row in record["files"]]
    return {**record, "files": rows, **tests}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, default=Path("/tmp/localize/records"))
    p.add_argument("--snapshots", type=Path, default=Path("/tmp/localize/snapshots"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--set-file", action="append", default=[], metavar="NAME=PATH",
                   help="a further set (bench/mine_commits.py), e.g. heldout=/tmp/heldout/heldout.json")
    p.add_argument("--sets", nargs="+", default=None, help="only these sets (default: every set with records)")
    p.add_argument("--only", nargs="+", default=[], metavar="ID", help="instance ids (or substrings) only")
    p.add_argument("--priors-only", action="store_true",
                   help="keep the record's signals as gathered and add only what the leaf-user feature needs (the "
                        "imports each candidate resolves to) from the snapshot: exact, nothing read that it lacks")
    p.add_argument("--reindex", action="store_true",
                   help="write each commit out and index it with the current code instead of reading the snapshot")
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="holds owner+name/repo bare dirs")
    p.add_argument("--work", type=Path, default=Path("/tmp/regather/work"), help="with --reindex: working dirs")
    p.add_argument("--index", type=Path, default=Path("/tmp/regather/index"), help="with --reindex: index dirs")
    args = p.parse_args(argv)
    sets = with_set_files(args.set_file, p)
    runner = None
    for set_name, data in sets.items():
        if not (args.records / set_name).is_dir() or (args.sets and set_name not in args.sets):
            continue
        instances = {i["instance_id"]: i for i in json.loads(data.read_text())}
        (args.out / set_name).mkdir(parents=True, exist_ok=True)
        done = missing = 0
        records = [json.loads(path.read_text()) for path in sorted((args.records / set_name).glob("*.json"))
                   if not args.only or any(o in path.stem for o in args.only)]
        if args.reindex:  # in the order bench/localize.py runs them: a working directory moves forward
            at = {inst["instance_id"]: n for n, inst in enumerate(ordered(list(instances.values())))}
            records.sort(key=lambda r: at.get(r["instance_id"], len(at)))
        for record in records:
            snapshot = args.snapshots / set_name / f"{record['instance_id']}.sqlite"
            if "files" not in record or (not args.reindex and not snapshot.is_file()):
                missing += 1
                continue
            inst = instances[record["instance_id"]]
            if args.reindex:
                runner = runner or InProcess(args.index)
                dest = args.work / inst["repo"].split("/")[-1]
                materialize(args.mirrors / inst["repo"].replace("/", "+") / "repo", inst["base_commit"], dest)
                index, _ = runner.update(dest, dest.name)
                out = regather(record, inst["problem_statement"], index=index)
            elif args.priors_only:
                out = add_priors(record, inst["problem_statement"], snapshot, inst.get("test_patch", ""))
            else:
                out = regather(record, inst["problem_statement"], snapshot)
            (args.out / set_name / f"{record['instance_id']}.json").write_text(json.dumps(out))
            done += 1
        print(f"{set_name}: {done} regathered, {missing} without a snapshot or signals", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
