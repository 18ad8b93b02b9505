"""Does indexing memory grow with the repository? Peak RSS of a cold index at several repository sizes.

Run from /work/main:
    python -m bench.index_memory /path/to/big/repo --sizes 1000,4000,10000 [--store null|chroma]

For each size N the first N indexable files of the repository (in path order) are copied to a temporary directory
and indexed cold, in a fresh child process, with `index_speed.HashingEmbedder` (the real tokenizer, no model
forward pass). The child reports its RSS after loading everything (the baseline: interpreter, model weights,
tokenizer, parsers) and its peak RSS after the index. `--store null` swaps the Chroma collection for one that drops
what it is given, so the growth left is the indexer's own (file list, stats, batches); `--store chroma` (default)
includes Chroma's in-process vector index, which holds every vector by design (a Chroma server keeps it out of this
process). Worker processes for parsing are separate processes and not counted. A markdown table goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class NullStore:
    """A ChunkStore that keeps nothing: every write is dropped, every read finds nothing."""

    name = "null"
    shared = False

    def reset(self) -> bool:
        return True

    def add(self, ids: list[str], vectors: list[list[float]], metas: list[dict]) -> None:
        pass

    def existing(self, ids: list[str]) -> set[str]:
        return set()

    def delete_ids(self, ids: object) -> None:
        pass

    def delete_file(self, path: str, keep: object = ()) -> None:
        pass


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(repo: Path, index_path: Path, store_kind: str) -> dict:
    from bench import index_speed
    from code_assistant.index import embeddings, indexer, store

    embedder = index_speed.HashingEmbedder(embeddings.make_embedder("local"))
    embedder.count_tokens("warm up the tokenizer")
    if store_kind == "null":
        chunks = NullStore()
    else:
        chunks = store.ChunkStore(store.open_client(index_path),
                                  store.collection_name(store.repo_identity(repo), embedder.name))
    baseline = _rss_mb()
    index, stats = indexer.Indexer(repo, index_path, embedder, chunks).update()  # type: ignore[arg-type]
    return {"files": stats.files, "chunks": sum(index.files[p].chunks for p in index.files),
            "baseline_mb": baseline, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "seconds": stats.seconds}


def subset(source: Path, n: int, dest: Path) -> None:
    from code_assistant.index import repo_files

    for rel in repo_files.list_repo_files(source)[:n]:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, nargs="?")
    parser.add_argument("--sizes", default="1000,4000,10000")
    parser.add_argument("--store", choices=("null", "chroma"), default="chroma")
    parser.add_argument("--child", nargs=2, type=Path, metavar=("REPO", "INDEX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.store)))
        return 0
    if args.repo is None or not args.repo.is_dir():
        parser.error("a repository directory is required")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="index_memory-") as tmp:
            repo = Path(tmp) / "repo"
            subset(args.repo.resolve(), n, repo)
            print(f"[index_memory] {n} files ...", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, "-m", "bench.index_memory", "--store", args.store, "--child",
                                   str(repo), str(Path(tmp) / "index")], capture_output=True, text=True, check=False,
                                  cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"### Cold-index memory by repository size (`{args.repo}`, store: {args.store})\n")
    print("| files indexed | chunks | cold index s | RSS before indexing MB | peak RSS MB | growth MB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['files']} | {r['chunks']} | {r['seconds']:.0f} | {r['baseline_mb']:.0f} | {r['peak_mb']:.0f} "
              f"| {r['peak_mb'] - r['baseline_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
