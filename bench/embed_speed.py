"""LocalMiniLM throughput and agreement, before/after: the float32 numpy runtime and the int8 onnxruntime one.

Run from the repository root:  python -m bench.embed_speed [--chunks 200] [--threads 1,2] [--repeats 3]

Chunks are consecutive lines of the Python standard library's own sources (always installed), cut where the
running MiniLM token count reaches 150-250, so the numbers are reproducible on any machine. Every configuration
embeds the same chunks once per round, round-robin, so a change in the machine's load hits all of them alike;
best and median of the rounds are reported, with the load average before and after.

Agreement: cosine of each runtime against sentence-transformers (tests/fixtures/minilm_reference.json), and of int8
against numpy on the chunks and on short queries (identifiers from the chunks and one-word texts, where int8 strays
most).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from code_assistant.index.embeddings import LocalMiniLM, Runtime, int8_session, load_tokenizer, load_weights

logger = logging.getLogger(__name__)
STDLIB_FILES = ("json/decoder.py", "argparse.py", "textwrap.py", "shlex.py", "difflib.py", "heapq.py", "pathlib.py",
                "dataclasses.py", "functools.py", "csv.py", "configparser.py", "string.py")
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_reference.json"


@dataclass(frozen=True)
class Config:
    runtime: Runtime
    batch_tokens: int | None  # None: batches of 32 texts whatever their length, as before issue 12 item 5
    threads: int

    @property
    def before(self) -> bool:
        return self.runtime == "numpy" and self.batch_tokens is None

    @property
    def label(self) -> str:
        batches = f"≤{self.batch_tokens} tokens" if self.batch_tokens else "32 texts"
        return (f"{self.runtime}, batches of {batches}, {self.threads} thread{'s' * (self.threads > 1)}"
                f"{' (before)' if self.before else ''}")


def code_chunks(count: int, embedder: LocalMiniLM, low: int = 150, high: int = 250) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[str] = []
    for name in STDLIB_FILES:
        lines = (stdlib / name).read_text(encoding="utf-8").splitlines(keepends=True)
        current: list[str] = []
        for line in lines:
            current.append(line)
            n = embedder.count_tokens("".join(current))
            target = low + (len(chunks) * 37) % (high - low)  # deterministic spread of sizes over [low, high)
            if n > high:
                current = [line]
            elif n >= target:
                chunks.append("".join(current))
                current = []
                if len(chunks) == count:
                    return chunks
    return chunks


def short_queries(chunks: list[str], count: int = 60) -> list[str]:
    """Function names defined in the chunks, in order of appearance, and a few one-token texts."""
    names = list(dict.fromkeys(m for c in chunks for m in re.findall(r"^\s*def (\w+)", c, re.MULTILINE)))
    return names[:count] + ["x", "i", "?", "TODO", "retry failed http request", "parse command line arguments"]


def _cosines(a: list[list[float]], b: np.ndarray) -> np.ndarray:
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (np.asarray(a) * b).sum(axis=1)


def _summary(cos: np.ndarray) -> str:
    return f"{cos.min():.6f} | {cos.mean():.6f} | {np.median(cos):.6f}"


def _load_seconds() -> dict[str, float]:
    start = time.perf_counter()
    load_weights()
    load_tokenizer()
    numpy_s = time.perf_counter() - start
    start = time.perf_counter()
    int8_session(1)
    return {"numpy": numpy_s, "int8": time.perf_counter() - start}


def top_k_overlap(queries_a: np.ndarray, chunks_a: np.ndarray, queries_b: np.ndarray, chunks_b: np.ndarray,
                  k: int = 5) -> tuple[float, float]:
    """How often two runtimes rank the same chunk first for a query, and the mean share of their top k in common."""
    top_a = np.argsort(-(queries_a @ chunks_a.T), axis=1)[:, :k]
    top_b = np.argsort(-(queries_b @ chunks_b.T), axis=1)[:, :k]
    first = float(np.mean(top_a[:, 0] == top_b[:, 0]))
    shared = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(top_a, top_b)]))
    return first, shared


def agreement(chunks: list[str]) -> list[str]:
    samples = json.loads(FIXTURE.read_text(encoding="utf-8"))["samples"]
    texts, reference = [s["text"] for s in samples], np.asarray([s["vector"] for s in samples])
    queries = short_queries(chunks)
    numpy_, int8 = LocalMiniLM(runtime="numpy"), LocalMiniLM(runtime="int8")
    chunks_n, chunks_i = np.asarray(numpy_.embed(chunks)), np.asarray(int8.embed(chunks))
    queries_n, queries_i = np.asarray(numpy_.embed(queries)), np.asarray(int8.embed(queries))
    rows = [(f"numpy vs sentence-transformers, {len(texts)} fixture texts", _cosines(numpy_.embed(texts), reference)),
            (f"int8 vs sentence-transformers, {len(texts)} fixture texts", _cosines(int8.embed(texts), reference)),
            (f"int8 vs numpy, {len(chunks)} code chunks", _cosines(chunks_i.tolist(), chunks_n)),
            (f"int8 vs numpy, {len(queries)} short queries", _cosines(queries_i.tolist(), queries_n))]
    lines = [f"| {label} | {_summary(cos)} |" for label, cos in rows]
    first, shared = top_k_overlap(queries_n, chunks_n, queries_i, chunks_i)
    ranking = (f"the {len(queries)} short queries ranking the {len(chunks)} chunks, int8 vs numpy: same first chunk "
               f"{first:.0%}, top-5 in common {shared:.0%}")
    return ["| cosine | min | mean | median |", "| --- | ---: | ---: | ---: |", *lines, "", ranking]


def throughput(chunks: list[str], configs: list[Config], repeats: int, tokens: int) -> list[str]:
    embedders = {c: LocalMiniLM(threads=c.threads, runtime=c.runtime, batch_tokens=c.batch_tokens) for c in configs}
    for embedder in embedders.values():
        embedder.embed(chunks[:8])  # warm-up: sessions built, BLAS threads started
    seconds: dict[Config, list[float]] = {c: [] for c in configs}
    for round_ in range(repeats):
        for config, embedder in embedders.items():
            start = time.perf_counter()
            vectors = embedder.embed(chunks)
            seconds[config].append(time.perf_counter() - start)
            assert len(vectors) == len(chunks)
        logger.info("round %d: %s", round_ + 1,
                    ", ".join(f"{c.label}: {len(chunks) / s[-1]:.1f}" for c, s in seconds.items()))
    header = ("| configuration | chunks/s best | chunks/s median | tokens/s median | vs before, same threads (median) "
              "| vs before, same threads, per round (min–max) |")
    lines = [header, "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for config, runs in seconds.items():
        before = seconds.get(Config("numpy", None, config.threads))
        ratio = f"{statistics.median(before) / statistics.median(runs):.2f}x" if before else "-"
        paired = [b / r for b, r in zip(before, runs)] if before else []  # same round: the same load, near enough
        per_round = f"{min(paired):.2f}x–{max(paired):.2f}x" if paired else "-"
        lines.append(f"| {config.label} | {len(chunks) / min(runs):.1f} | {len(chunks) / statistics.median(runs):.1f} "
                     f"| {tokens / statistics.median(runs):,.0f} | {ratio} | {per_round} |")
    return lines


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description="LocalMiniLM chunks/s and agreement, numpy vs int8")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, one table row set each")
    parser.add_argument("--numpy-batch-tokens", default="0,512", help="0: no cap, the before")
    parser.add_argument("--int8-batch-tokens", default="512")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-agreement", action="store_true")
    args = parser.parse_args()

    loads = _load_seconds()
    probe = LocalMiniLM(runtime="numpy")
    chunks = code_chunks(args.chunks, probe)
    lengths = np.asarray([probe.count_tokens(c) for c in chunks])
    print(f"model load: numpy {loads['numpy']:.2f} s; int8 graph build + onnxruntime session {loads['int8']:.2f} s")
    print(f"chunks: {len(chunks)}, tokens per chunk: mean {lengths.mean():.0f}, min {lengths.min()}, "
          f"max {lengths.max()}; load average before: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.skip_agreement:
        print("\n".join(agreement(chunks)))
    configs = [Config(runtime, int(b) or None, int(t)) for t in args.threads.split(",")
               for runtime, caps in (("numpy", args.numpy_batch_tokens), ("int8", args.int8_batch_tokens))
               for b in caps.split(",")]
    print("\n".join(throughput(chunks, configs, args.repeats, int(lengths.sum()))))
    print(f"load average after: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
