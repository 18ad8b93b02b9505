"""Measure LocalMiniLM throughput on ~200 realistic code chunks of 150-250 model tokens.

Run from /work/main:  python -m bench.embed_speed [--chunks 200] [--batch-size 32] [--threads 1]

Chunks are consecutive lines of the Python standard library's own sources (always installed), cut where the
running MiniLM token count reaches 150-250, so the numbers are reproducible on any machine.
"""
from __future__ import annotations

import argparse
import logging
import sysconfig
import time
from pathlib import Path

import numpy as np

from code_assistant.index.embeddings import LocalMiniLM, _load_tokenizer, _load_weights

logger = logging.getLogger(__name__)
STDLIB_FILES = ("json/decoder.py", "argparse.py", "textwrap.py", "shlex.py", "difflib.py", "heapq.py", "pathlib.py",
                "dataclasses.py", "functools.py", "csv.py", "configparser.py", "string.py")


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


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description="LocalMiniLM chunks/s on realistic code chunks")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads while embedding; 0 = BLAS default")
    args = parser.parse_args()

    start = time.perf_counter()
    _load_weights()
    _load_tokenizer()
    load_s = time.perf_counter() - start
    embedder = LocalMiniLM(batch_size=args.batch_size, threads=args.threads or None)
    chunks = code_chunks(args.chunks, embedder)
    lengths = np.asarray([embedder.count_tokens(c) for c in chunks])
    embedder.embed(chunks[:4])  # warm-up
    start = time.perf_counter()
    vectors = embedder.embed(chunks)
    elapsed = time.perf_counter() - start
    assert len(vectors) == len(chunks)
    print(f"model load: {load_s:.2f} s")
    print(f"chunks: {len(chunks)}, tokens per chunk: mean {lengths.mean():.0f}, "
          f"min {lengths.min()}, max {lengths.max()}")
    print(f"embedded in {elapsed:.2f} s: {len(chunks) / elapsed:.1f} chunks/s, {lengths.sum() / elapsed:.0f} tokens/s "
          f"(batch size {args.batch_size}, BLAS threads {args.threads or 'default'})")


if __name__ == "__main__":
    main()
