"""How fast is indexing, really? Cold, warm, one-file-touched re-index, and --context-only latency, in-process.

Run from /work/main:
    python bench/index_speed.py /path/to/repo [--index-path DIR] [--queries 10] [--cli-runs 3] [--keep]

The repository is copied to a temporary directory first (with its .git, so the file list is the same) and only the
copy is touched. The parts are built the way main.py builds them (make_embedder → open_client → ChunkStore named by
repo_identity → Indexer), so CHROMA_HOST etc. are honoured. The cold index's time is split by wrapping the embedder's
embed() and the ChunkStore's writes; the rest is listing, hashing, parsing, chunking, BM25 and the embedding cache.
The model's raw throughput on the repository's own chunks, measured apart, gives the physical floor of a cold index.
A markdown report goes to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import logging
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import context_builder  # noqa: E402
import embeddings  # noqa: E402
import indexer  # noqa: E402
import store  # noqa: E402

logger = logging.getLogger("index_speed")
TOUCH_LINE = "\n# index_speed: touched\n"
RAW_SAMPLE = 256


@dataclass
class Clock:
    """Seconds and calls spent inside wrapped methods."""

    seconds: dict[str, float] = field(default_factory=dict)
    items: dict[str, int] = field(default_factory=dict)
    sample: list[str] = field(default_factory=list)
    sampling: bool = True  # keep the first texts embedded (the cold index's chunks) for the raw-throughput run

    def wrap(self, obj: object, method: str, bucket: str, count: Callable[..., int] | None = None) -> None:
        original = getattr(obj, method)

        def timed(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[bucket] = self.seconds.get(bucket, 0.0) + time.perf_counter() - start
                if count:
                    self.items[bucket] = self.items.get(bucket, 0) + count(*args, **kwargs)

        setattr(obj, method, timed)

    def reset(self) -> None:
        self.seconds.clear()
        self.items.clear()


def build(repo: Path, index_path: Path, clock: Clock) -> indexer.Indexer:
    embedder = embeddings.make_embedder("local")
    chunks = store.ChunkStore(store.open_client(index_path),
                              store.collection_name(store.repo_identity(repo), embedder.name))

    def remember(texts: list[str]) -> int:
        room = RAW_SAMPLE - len(clock.sample)
        if clock.sampling and room > 0:
            clock.sample.extend(texts[:room])
        return len(texts)

    clock.wrap(embedder, "embed", "embed", remember)
    for method in ("add", "delete_file", "existing", "reset"):
        if hasattr(chunks, method):
            clock.wrap(chunks, method, "store")
    return indexer.Indexer(repo, index_path, embedder, chunks)


def timed_update(idx: indexer.Indexer) -> tuple[indexer.RepoIndex, indexer.IndexStats, float]:
    start = time.perf_counter()
    index, stats = idx.update()
    return index, stats, time.perf_counter() - start


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def pick_touch_file(index: indexer.RepoIndex) -> str:
    """A Python file with chunks, of median size among those: a typical edit."""
    candidates = sorted((r.size, p) for p, r in index.files.items() if p.endswith(".py") and r.chunks)
    if not candidates:
        candidates = sorted((r.size, p) for p, r in index.files.items() if r.chunks)
    if not candidates:
        raise SystemExit("no file with chunks to touch")
    return candidates[len(candidates) // 2][1]


def symbol_queries(index: indexer.RepoIndex, n: int) -> list[str]:
    names = sorted({q.rsplit(".", 1)[-1] for _p, q, kind, _s, _e in indexer.iter_symbols(index)
                    if kind in ("function", "method", "class") and not q.rsplit(".", 1)[-1].startswith("_")})
    random.Random(7).shuffle(names)
    templates = ("fix the bug in {} when the input is empty", "why does {} raise an exception?",
                 "add type hints and input validation to {}", "make {} faster for large inputs")
    return [templates[i % len(templates)].format(name) for i, name in enumerate(names[:n])]


def cli_latency(repo: Path, index_path: Path, task: str, runs: int) -> float | None:
    if runs <= 0:
        return None
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", task,
                               "--context-only", "--json", "--index-path", str(index_path)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            logger.warning("CLI run failed (%d): %s", done.returncode, done.stderr.strip()[-300:])
            return None
    return statistics.median(times)


def run(source: Path, index_path: Path, queries: int, cli_runs: int, work: Path) -> str:
    repo = work / source.name
    logger.info("copying %s -> %s", source, repo)
    shutil.copytree(source, repo, symlinks=True)
    clock = Clock()

    logger.info("cold index ...")
    idx = build(repo, index_path, clock)
    index, cold, cold_s = timed_update(idx)
    cold_rss = peak_rss_mb()
    embed_s, store_s = clock.seconds.get("embed", 0.0), clock.seconds.get("store", 0.0)
    embedded_texts = clock.items.get("embed", 0)
    total_chunks = sum(r.chunks for r in index.files.values())

    logger.info("warm re-index ...")
    clock.sampling = False
    clock.reset()
    _, warm, warm_s = timed_update(idx)

    touched = pick_touch_file(index)
    target = repo / touched
    original = target.read_bytes()
    target.write_bytes(original + TOUCH_LINE.encode())
    logger.info("re-index after touching %s ...", touched)
    clock.reset()
    try:
        _, touch, touch_s = timed_update(idx)
        touch_embed = clock.items.get("embed", 0)
    finally:
        target.write_bytes(original)

    _, _, restore_s = timed_update(idx)
    index, _, _ = timed_update(idx)
    tasks = symbol_queries(index, queries)
    logger.info("%d context queries ...", len(tasks))
    build_times, e2e_times = [], []
    for task in tasks:
        start = time.perf_counter()
        index, _ = idx.update()
        mid = time.perf_counter()
        context_builder.build_context(index, task)
        end = time.perf_counter()
        build_times.append(end - mid)
        e2e_times.append(end - start)

    logger.info("raw model throughput on %d of the repository's chunks ...", len(clock.sample))
    model = embeddings.make_embedder("local")
    model.embed(clock.sample[:8])  # weights loaded and warm
    start = time.perf_counter()
    for i in range(0, len(clock.sample), indexer.EMBED_BATCH):
        model.embed(clock.sample[i:i + indexer.EMBED_BATCH])
    raw_rate = len(clock.sample) / max(time.perf_counter() - start, 1e-9)
    cli_s = cli_latency(repo, index_path, tasks[0], cli_runs) if tasks else None

    other_s = cold_s - embed_s - store_s
    floor_s = embedded_texts / raw_rate if raw_rate else 0.0
    server = store.server_config()
    mode = f"server {server.address}" if server else "embedded"
    lines = [
        f"### Index speed: `{source}` ({cold.files} files indexed, {total_chunks} chunks, "
        f"{cold.symbols} symbols; Chroma {mode})",
        "",
        "| phase | seconds | files added/changed/removed | chunks embedded |",
        "| --- | ---: | --- | ---: |",
        f"| cold index (fresh index dir) | {cold_s:.2f} | {cold.added}/{cold.changed}/{cold.removed} "
        f"| {cold.chunks_embedded} |",
        f"| warm re-index, nothing changed | {warm_s:.3f} | {warm.added}/{warm.changed}/{warm.removed} "
        f"| {warm.chunks_embedded} |",
        f"| re-index after touching `{touched}` | {touch_s:.3f} | {touch.added}/{touch.changed}/{touch.removed} "
        f"| {touch.chunks_embedded} (embed() got {touch_embed}) |",
        f"| re-index after restoring it | {restore_s:.3f} | | |",
        f"| context: warm update + build_context, median of {len(tasks)} | {statistics.median(e2e_times):.3f} "
        f"| | |" if tasks else "| context | n/a (no symbols) | | |",
        f"| context: build_context alone, median (min–max) | {statistics.median(build_times):.3f} "
        f"({min(build_times):.3f}–{max(build_times):.3f}) | | |" if tasks else None,
        f"| `main.py --context-only --json` subprocess, median of {cli_runs} | {cli_s:.2f} | | |"
        if cli_s is not None else None,
        "",
        "| cold index split | seconds | share |",
        "| --- | ---: | ---: |",
        f"| listing + hashing + parsing + chunking + BM25 + cache | {other_s:.2f} | {other_s / cold_s:.0%} |",
        f"| embedding ({embedded_texts} texts, {embedded_texts / max(embed_s, 1e-9):.1f} chunks/s) | {embed_s:.2f} "
        f"| {embed_s / cold_s:.0%} |",
        f"| storage (ChunkStore writes) | {store_s:.2f} | {store_s / cold_s:.0%} |",
        f"| **physical floor**: {embedded_texts} texts at the model's raw {raw_rate:.1f} chunks/s "
        f"(batches of {indexer.EMBED_BATCH}, {len(clock.sample)}-chunk sample) | {floor_s:.2f} "
        f"| {floor_s / cold_s:.0%} |",
        "",
        f"Peak RSS: {cold_rss:.0f} MB after the cold index, {peak_rss_mb():.0f} MB at the end. "
        f"Python {sys.version.split()[0]}.",
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="[index_speed] %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "chromadb", "bm25s", "indexer", "embeddings"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description="cold/warm/touched index times and context latency")
    parser.add_argument("repo", type=Path)
    parser.add_argument("--index-path", type=Path, help="a fresh (absent or empty) directory for the index")
    parser.add_argument("--queries", type=int, default=10, help="context queries built from symbol names")
    parser.add_argument("--cli-runs", type=int, default=3, help="real main.py --context-only runs (0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and index")
    args = parser.parse_args()
    source = args.repo.expanduser().resolve()
    if not source.is_dir():
        parser.error(f"not a directory: {source}")
    work = Path(tempfile.mkdtemp(prefix="index_speed-"))
    index_path = (args.index_path or work / "index").expanduser().resolve()
    if index_path.exists() and any(index_path.iterdir()):
        parser.error(f"--index-path must be absent or empty for a cold index: {index_path}")
    try:
        print(run(source, index_path, args.queries, args.cli_runs, work), end="")
    finally:
        if args.keep:
            logger.info("kept %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)  # a given --index-path is left for inspection
    return 0


if __name__ == "__main__":
    sys.exit(main())
