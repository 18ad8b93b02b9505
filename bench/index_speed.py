"""How fast is indexing, really? Cold, warm, one-file-touched re-index, and --context-only latency, in-process.

Run from /work/main:
    python -m bench.index_speed /path/to/repo [--index-path DIR] [--queries 10] [--cli-runs 3] [--keep]
    python -m bench.index_speed /path/to/big/repo --stub-embedder     # a 10k+ file repository in minutes

With --stub-embedder the index is built with `HashingEmbedder` (defined here): vectors from a hash of the text, token
counts from the real model's tokenizer (so chunk boundaries and counts match the real model). It isolates the
non-model costs at a scale the local model cannot reach (~10 chunks/s: hours per 10k files). The model is then
measured apart on a sample of the repository's own chunks, and the cold time with the real model is projected as
non-model time + chunks / throughput. Context queries still embed the task with the real model (the vectors have
the same dimension, so the latency is real even though the hits are not), and the `main.py` subprocess runs are
skipped (the CLI would re-index with the real model).

The repository is copied to a temporary directory first (with its .git, so the file list is the same) and only the
copy is touched. The parts are built the way main.py builds them (make_embedder → open_client → ChunkStore named by
repo_identity → Indexer), so CHROMA_HOST etc. are honoured. The cold index's time is split by wrapping the embedder's
embed() and the ChunkStore's writes; the rest is listing, hashing, parsing, chunking, BM25 and the embedding cache.
The model's raw throughput on the repository's own chunks, measured apart, gives the physical floor of a cold index.
A markdown report goes to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from code_assistant.index import embeddings, indexer, store
from code_assistant.index.vectors import EMBED_BATCH
from code_assistant.retrieve.context import build_context

logger = logging.getLogger("index_speed")
TOUCH_LINE = "\n# index_speed: touched\n"
RAW_SAMPLE = 256
STUB_LABEL = "stub embedder: isolates non-model costs"


class HashingEmbedder:
    """The Embedder interface at almost no cost: a deterministic unit vector per text, seeded by its hash.

    Token counts come from the real model's tokenizer, so chunking (a non-model cost the real index pays) is exactly
    the real one and the projected model time covers the very chunks the real model would embed.
    """

    name = "stub:hashing-384"
    dimension = 384

    def __init__(self, real: embeddings.Embedder) -> None:
        self._real = real
        self.max_tokens = real.max_tokens

    def count_tokens(self, text: str) -> int:
        return self._real.count_tokens(text)

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest(),
                                  "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dimension, dtype=np.float32)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return out.tolist()


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


class TimedEmbedder:
    """The embedder with embed() timed into clock; pickles as the bare embedder, so the indexer's worker processes
    (which only count tokens) still get it."""

    def __init__(self, inner: embeddings.Embedder, clock: Clock, count: Callable[[list[str]], int]) -> None:
        self.inner, self.clock, self.count = inner, clock, count
        self.name, self.max_tokens = inner.name, inner.max_tokens

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.clock.seconds["embed"] = self.clock.seconds.get("embed", 0.0) + time.perf_counter() - start
            self.clock.items["embed"] = self.clock.items.get("embed", 0) + self.count(texts)

    def __reduce__(self) -> tuple:
        return self.inner.__reduce__()


def build(repo: Path, index_path: Path, clock: Clock, stub: bool) -> indexer.Indexer:
    embedder: embeddings.Embedder = embeddings.make_embedder("local")
    if stub:
        embedder = HashingEmbedder(embedder)
    chunks = store.ChunkStore(store.open_client(index_path),
                              store.collection_name(store.repo_identity(repo), embedder.name))

    def remember(texts: list[str]) -> int:
        room = RAW_SAMPLE - len(clock.sample)
        if clock.sampling and room > 0:
            clock.sample.extend(texts[:room])
        return len(texts)

    embedder = TimedEmbedder(embedder, clock, remember)
    for method in ("add", "delete_file", "delete_ids", "existing", "reset"):
        if hasattr(chunks, method):
            clock.wrap(chunks, method, "store")
    return indexer.Indexer(repo, index_path, embedder, chunks)


def timed_update(idx: indexer.Indexer) -> tuple[indexer.RepoIndex, indexer.IndexStats, float]:
    start = time.perf_counter()
    def progress(done: int, total: int) -> None:
        if total >= 1000 and (done % 2000 == 0 or done == total):
            logger.info("  %d/%d files", done, total)

    index, stats = idx.update(progress=progress)
    return index, stats, time.perf_counter() - start


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def pick_touch_file(index: indexer.RepoIndex) -> str:
    """A Python file with chunks, of median size among those: a typical edit. A cold index makes no vectors (they
    come per query, issue 12), so without chunked files any Python file with text will do, then any file."""
    files = list(index.files.items())
    for wanted in (lambda p, r: p.endswith(".py") and r.chunks, lambda p, r: r.chunks,
                   lambda p, r: p.endswith(".py") and r.tokens, lambda p, r: r.tokens):
        candidates = sorted((r.size, p) for p, r in files if wanted(p, r))
        if candidates:
            break
    if not candidates:
        raise SystemExit("no file with text to touch")
    return candidates[len(candidates) // 2][1]


def symbol_queries(index: indexer.RepoIndex, n: int) -> list[str]:
    names = sorted({q.rsplit(".", 1)[-1] for _p, q, kind, _s, _e in _symbols(index)
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


def raw_throughput(sample: list[str]) -> tuple[float, float]:
    """The local model's chunks/s on sample (batches of EMBED_BATCH, weights warm) and one short query's seconds."""
    model = embeddings.make_embedder("local")
    model.embed(sample[:8] or ["warm up"])  # weights loaded and warm
    start = time.perf_counter()
    for i in range(0, len(sample), EMBED_BATCH):
        model.embed(sample[i:i + EMBED_BATCH])
    rate = len(sample) / max(time.perf_counter() - start, 1e-9)
    start = time.perf_counter()
    for _ in range(5):
        model.embed(["fix the bug in parse_args when the input is empty"])
    return rate, (time.perf_counter() - start) / 5


def run(source: Path, index_path: Path, queries: int, cli_runs: int, work: Path, stub: bool = False) -> str:
    repo = work / source.name
    logger.info("copying %s -> %s", source, repo)
    shutil.copytree(source, repo, symlinks=True)
    clock = Clock()

    logger.info("cold index%s ...", f" ({STUB_LABEL})" if stub else "")
    idx = build(repo, index_path, clock, stub)
    index, cold, cold_s = timed_update(idx)
    cold_rss = peak_rss_mb()
    embed_s, store_s = clock.seconds.get("embed", 0.0), clock.seconds.get("store", 0.0)
    embedded_texts = clock.items.get("embed", 0)
    total_chunks = sum(r.chunks for r in index.files.values())
    del index

    logger.info("warm re-index ...")
    clock.sampling = False
    clock.reset()
    index, warm, warm_s = timed_update(idx)
    warm_embed = clock.items.get("embed", 0)
    warm2_s = min(timed_update(idx)[2] for _ in range(3))

    touched = pick_touch_file(index)
    target = repo / touched
    original = target.read_bytes()
    target.write_bytes(original + TOUCH_LINE.encode())
    logger.info("re-index after touching %s ...", touched)
    clock.reset()
    try:
        _, touch, touch_s = timed_update(idx)
        touch_embed = clock.items.get("embed", 0)
        touch_embed_s = clock.seconds.get("embed", 0.0)
    finally:
        target.write_bytes(original)

    _, _, restore_s = timed_update(idx)
    index, _, _ = timed_update(idx)
    tasks = symbol_queries(index, queries)

    logger.info("raw model throughput on %d of the repository's chunks ...", len(clock.sample))
    raw_rate, query_embed_s = raw_throughput(clock.sample)
    real_model = embeddings.make_embedder("local")

    logger.info("%d context queries ...", len(tasks))
    build_times, e2e_times = [], []
    for task in tasks:
        start = time.perf_counter()
        index, _ = idx.update()
        if stub:  # the task is embedded by the real model, as the CLI would; only the stored vectors are stubs
            index = dataclasses.replace(index, embedder=real_model)
        mid = time.perf_counter()
        build_context(index, task)
        end = time.perf_counter()
        build_times.append(end - mid)
        e2e_times.append(end - start)
    cli_s = cli_latency(repo, index_path, tasks[0], cli_runs) if tasks and not stub else None

    other_s = cold_s - embed_s - store_s
    floor_s = embedded_texts / raw_rate if raw_rate else 0.0
    projected_s = cold_s - embed_s + floor_s
    touch_projected_s = touch_s - touch_embed_s + touch_embed / raw_rate if raw_rate else touch_s
    server = store.server_config()
    mode = f"server {server.address}" if server else "embedded"
    kind = f"**{STUB_LABEL}** (`{HashingEmbedder.name}`)" if stub else f"real model `{idx.embedder.name}`"
    per10k = 10_000 / max(cold.files, 1)
    lines = [
        f"### Index speed: `{source}` ({cold.files} files indexed, {total_chunks} chunks, "
        f"{cold.symbols} symbols; Chroma {mode}; {kind})",
        "",
        "| phase | seconds | files added/changed/removed | chunks embedded |",
        "| --- | ---: | --- | ---: |",
        f"| cold index (fresh index dir) | {cold_s:.2f} | {cold.added}/{cold.changed}/{cold.removed} "
        f"| {embedded_texts} |",
        f"| warm re-index, nothing changed (first) | {warm_s:.3f} ({warm_s * per10k:.3f} per 10k files) "
        f"| {warm.added}/{warm.changed}/{warm.removed} | {warm_embed} |",
        f"| warm re-index, nothing changed (best of 3 more) | {warm2_s:.3f} ({warm2_s * per10k:.3f} per 10k files) "
        f"| | |",
        f"| re-index after touching `{touched}` | {touch_s:.3f} | {touch.added}/{touch.changed}/{touch.removed} "
        f"| {touch_embed} |",
        f"| ... of which embedding | {touch_embed_s:.3f} | | |",
        f"| ... projected with the real model ({touch_embed} chunks at {raw_rate:.1f}/s) | {touch_projected_s:.3f} "
        f"| | |" if stub else None,
        f"| re-index after restoring it | {restore_s:.3f} | | |",
        f"| **cold time to first context**: cold index + the first query's update and build_context (its lazy "
        f"vectors made then) | {cold_s + e2e_times[0]:.2f} | | |" if tasks else None,
        f"| context: warm update + build_context, median of {len(tasks)} | {statistics.median(e2e_times):.3f} "
        f"| | |" if tasks else "| context | n/a (no symbols) | | |",
        f"| context: build_context alone (task embedded by the real model), median (min–max) "
        f"| {statistics.median(build_times):.3f} ({min(build_times):.3f}–{max(build_times):.3f}) | | |"
        if tasks else None,
        f"| `main.py --context-only --json` subprocess, median of {cli_runs} | {cli_s:.2f} | | |"
        if cli_s is not None else None,
        "",
        "| cold index split | seconds | share |",
        "| --- | ---: | ---: |",
        f"| listing + hashing + parsing + chunking + BM25 + cache | {other_s:.2f} | {other_s / cold_s:.0%} |",
        f"| embedding ({embedded_texts} texts, {embedded_texts / max(embed_s, 1e-9):.1f} chunks/s"
        f"{'; ' + STUB_LABEL if stub else ''}) | {embed_s:.2f} | {embed_s / cold_s:.0%} |",
        f"| storage (ChunkStore writes) | {store_s:.2f} | {store_s / cold_s:.0%} |",
        f"| **physical floor**: {embedded_texts} texts at the real model's raw {raw_rate:.1f} chunks/s "
        f"(batches of {EMBED_BATCH}, {len(clock.sample)}-chunk sample) | {floor_s:.2f} "
        f"| {floor_s / projected_s:.0%} of projected |",
        f"| **projected cold index with the real model** = non-model {cold_s - embed_s:.2f} s + floor "
        f"| {projected_s:.2f} | non-model {(cold_s - embed_s) / projected_s:.1%} |" if stub else None,
        f"| one short query embedded by the real model | {query_embed_s:.3f} | |",
        "",
        f"Peak RSS: {cold_rss:.0f} MB after the cold index, {peak_rss_mb():.0f} MB at the end. "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs.",
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


def _symbols(index: indexer.RepoIndex):  # noqa: ANN202 - (path, qualname, kind, start, end) rows
    for path in index.files:
        for qualname, kind, start, end, _signature in index.files[path].symbols:
            yield path, qualname, kind, start, end


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
    parser.add_argument("--stub-embedder", action="store_true",
                        help=f"index with a hashing embedder ({STUB_LABEL}); the real model is timed apart")
    args = parser.parse_args()
    source = args.repo.expanduser().resolve()
    if not source.is_dir():
        parser.error(f"not a directory: {source}")
    work = Path(tempfile.mkdtemp(prefix="index_speed-"))
    index_path = (args.index_path or work / "index").expanduser().resolve()
    if index_path.exists() and any(index_path.iterdir()):
        parser.error(f"--index-path must be absent or empty for a cold index: {index_path}")
    try:
        print(run(source, index_path, args.queries, args.cli_runs, work, args.stub_embedder), end="")
    finally:
        if args.keep:
            logger.info("kept %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)  # a given --index-path is left for inspection
    return 0


if __name__ == "__main__":
    sys.exit(main())
