"""Gather the fast signals of stored localization records again, from each instance's index snapshot, with the
current code: a change to mentions.py or signals.py is measured in seconds, without checking out or indexing
anything. The dense similarities are carried over from the record (they depend on the task and the vectors only);
a file that becomes a candidate only now has none, as a file without vectors would.

    python -m bench.regather [--records /tmp/localize/records] [--snapshots /tmp/localize/snapshots] --out DIR
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from dataclasses import asdict
from pathlib import Path

from bench.localize import with_set_files
from code_assistant.index.index_db import IndexDB
from code_assistant.index.indexer import Files, RepoIndex
from code_assistant.retrieve import signals
from code_assistant.retrieve.mentions import kind_of


def snapshot_index(path: Path) -> RepoIndex:
    """A read-only RepoIndex over a snapshot: files, symbols, postings and the graph; no vectors, no model."""
    with sqlite3.connect(path) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
    db = IndexDB(path, meta["embedder"])
    return RepoIndex(Path("/nonexistent-repo"), Files(db, db.paths()), db, None, None, None)  # type: ignore[arg-type]


def regather(record: dict, task: str, snapshot: Path) -> dict:
    index = snapshot_index(snapshot)
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
    index.db.close()
    return {**record, "files": [asdict(f) for f in sig.files.values()], "degree": sig.degree,
            "about_tests": sig.about_tests, "n_files": sig.n_files,
            "files_extracted": record.get("files_extracted", record["files"]),  # as the run gathered them
            "degree_extracted": record.get("degree_extracted", record.get("degree", {}))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, default=Path("/tmp/localize/records"))
    p.add_argument("--snapshots", type=Path, default=Path("/tmp/localize/snapshots"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--set-file", action="append", default=[], metavar="NAME=PATH",
                   help="a further set (bench/mine_commits.py), e.g. heldout=/tmp/heldout/heldout.json")
    args = p.parse_args(argv)
    sets = with_set_files(args.set_file, p)
    for set_name, data in sets.items():
        if not (args.records / set_name).is_dir():
            continue
        tasks = {i["instance_id"]: i["problem_statement"] for i in json.loads(data.read_text())}
        (args.out / set_name).mkdir(parents=True, exist_ok=True)
        done = missing = 0
        for path in sorted((args.records / set_name).glob("*.json")):
            record = json.loads(path.read_text())
            snapshot = args.snapshots / set_name / f"{record['instance_id']}.sqlite"
            if "files" not in record or not snapshot.is_file():
                missing += 1
                continue
            out = regather(record, tasks[record["instance_id"]], snapshot)
            (args.out / set_name / path.name).write_text(json.dumps(out))
            done += 1
        print(f"{set_name}: {done} regathered, {missing} without a snapshot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
