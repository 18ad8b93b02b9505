"""The rest of a big tree's index, in a background process, after a first answer indexed only the task's files.

Started by `completion.start` as `python -m code_assistant.index.complete`: a process of its own session, at a low
priority, that holds the completion lock (completion.py) while it runs `Indexer.update()` without a task (every
pending file, committed batch by batch: a process killed half way keeps what it stored, and the next first answer
starts another). It embeds nothing: vectors stay on demand.
"""
from __future__ import annotations

import argparse
import fcntl
import logging
import os
import sys
from pathlib import Path

from code_assistant.index.completion import LOCK_NAME
from code_assistant.index.indexer import Indexer
from code_assistant.index.store import LazyChunkStore

logger = logging.getLogger(__name__)

NICENESS = 10  # the answer in the foreground comes first on a busy machine


class IndexOnly:
    """The embedder's name and dimension, which the index database and cache are keyed by; the non-model index
    never embeds, so a call to embed is a bug."""

    max_tokens = 256

    def __init__(self, name: str, dimension: int) -> None:
        self.name = name
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("completing an index embeds nothing")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--index-path", type=Path, required=True)
    parser.add_argument("--embedder", required=True)
    parser.add_argument("--dimension", type=int, required=True)
    parser.add_argument("--exclude", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.nice(NICENESS)
    embedder = IndexOnly(args.embedder, args.dimension)
    indexer = Indexer(args.repo, args.index_path, embedder, LazyChunkStore(args.index_path, args.repo, args.embedder))
    with (indexer.dir / LOCK_NAME).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            logger.info("another process completes this index")
            return 0
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        _, stats = indexer.update(exclude=args.exclude)
    logger.info("index complete: %d files, %d symbols", stats.files, stats.symbols)
    return 0


if __name__ == "__main__":
    sys.exit(main())
