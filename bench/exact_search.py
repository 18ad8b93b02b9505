"""How long an exact whole-store search takes from the index database's copy of the vectors, by store size, against
opening Chroma and asking its HNSW index (what `nearest.EXACT_LIMIT` is chosen by).

For each size N: N random unit vectors (384 dimensions, spread over N/20 files) are written to a fresh index database
and to a fresh Chroma collection; then, each in a new process so nothing is warm, (a) the copy read and searched for
the 80 nearest chunks (`ChunkSearch.query`, as a query's whole-store search does), (b) chromadb imported, the store
opened and the same query asked. Both answers are compared (top-80 overlap: HNSW is approximate).

    python -m bench.exact_search --sizes 1000 10000 50000 100000 --work /tmp/exact-search
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DIM = 384
N_NEAREST = 80

_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from pathlib import Path
import numpy as np
kind, work, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
query = np.load(work / "query.npy").tolist()
if kind == "copy":
    from code_assistant.index.index_db import IndexDB
    from code_assistant.index.nearest import ChunkSearch
    from code_assistant.index.store import ChunkStore
    class NoChroma(ChunkStore):
        shared = False
        def __init__(self): pass
        def query(self, *a, **k): raise AssertionError("Chroma asked")
    search = ChunkSearch(IndexDB(work / "index.sqlite", "bench").vectors, NoChroma(), exact_limit=n)
    hits = search.query(query, 80)
else:
    from code_assistant.index import store
    chunks = store.ChunkStore(store.open_client(work / "chroma-index"), "bench")
    hits = chunks.query(query, 80)
print(json.dumps({"seconds": time.perf_counter() - started, "ids": [(h.path, h.start) for h in hits]}))
"""


def build(work: Path, n: int, seed: int = 0) -> None:
    """N unit vectors in a fresh index database (as Vectors._flush writes them) and a fresh Chroma collection."""
    from code_assistant.index import store
    from code_assistant.index.file_table import IndexedFile
    from code_assistant.index.index_db import Entry, IndexDB
    from code_assistant.index.vector_table import VectorRow

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(work / "query.npy", rng.standard_normal(DIM).astype(np.float32))
    files = max(1, n // 20)
    db = IndexDB(work / "index.sqlite", "bench")
    for f in range(files):
        db.put(Entry(IndexedFile(f"pkg/m{f}.py", f"h{f}", 1, 1, "python", "bench", 1), {}, 1))
    rows = [VectorRow(f"c{i:07d}", f"pkg/m{i % files}.py", i, i + 1, f"s{i}", "function", vectors[i].tobytes())
            for i in range(n)]
    for start in range(0, n, 5000):
        db.vectors.put_rows(rows[start:start + 5000])
    for f in range(files):
        db.vectors.set_stored(f"pkg/m{f}.py", [r.chunk_id for r in rows[f::files]], len(rows[f::files]), True)
    db.commit()
    db.close()
    chunks = store.ChunkStore(store.open_client(work / "chroma-index"), "bench")
    for start in range(0, n, 5000):
        part = rows[start:start + 5000]
        chunks.add([r.chunk_id for r in part], vectors[start:start + len(part)].tolist(),
                   [{"path": r.path, "start": r.start, "end": r.end, "symbol": r.symbol, "kind": r.kind}
                    for r in part])


def child(kind: str, work: Path, n: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, kind, str(work), str(n)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000, 100000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/exact-search"))
    args = parser.parse_args()
    print("| vectors | copy read + exact search (process total) | chromadb import + open + HNSW query (process "
          "total) | top-80 in common |")
    print("|---:|---:|---:|---:|")
    for n in args.sizes:
        t = time.perf_counter()
        build(args.work / str(n), n)
        print(f"[exact_search] built {n} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        copy = [child("copy", args.work / str(n), n) for _ in range(args.runs)]
        chroma = [child("chroma", args.work / str(n), n) for _ in range(args.runs)]
        common = len(set(map(tuple, copy[0]["ids"])) & set(map(tuple, chroma[0]["ids"])))
        print(f"| {n:,} | {statistics.median(c['seconds'] for c in copy):.3f} s | "
              f"{statistics.median(c['seconds'] for c in chroma):.3f} s | {common} of {N_NEAREST} |", flush=True)


if __name__ == "__main__":
    main()
