"""Read, hash, parse and tokenize one file — in worker processes when there are many.

This is the fast half of the index: no chunking and no model. Chunks are made and embedded on demand
(`vectors.py`), for the files a query needs or, with `code-assistant index`, for all of them.
"""
from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Self

from code_assistant import tokens
from code_assistant.gate import Gate
from code_assistant.index import lexical
from code_assistant.index.file_table import ImportRow, SymbolRow
from code_assistant.index.repo_files import read_text
from code_assistant.parse.code_parser import parse_source

logger = logging.getLogger(__name__)

# below this, starting worker processes (each imports the parsers) costs more than it saves: the 1,000 files of a
# big tree's first answer (indexer.FOCUS_FILES) take 8.1-8.6 s in this process against 9.8-9.9 s with two workers
# (the whole focused update, two cores at load 6.5); 400 was the limit before that measurement
PARALLEL_MIN_FILES = 1200


@dataclass
class PreparedFile:
    """Everything the index keeps of one file version, computed from its text alone (in a worker process)."""

    path: str
    digest: str
    language: str | None
    parser: str
    tokens: int  # at least this many cl100k tokens (tokens.min_tokens: a sixth of the cost of counting them)
    symbols: list[SymbolRow]
    imports: list[ImportRow]
    terms: dict[str, int]  # BM25 term frequencies (identifier-aware tokens of the path and the text)
    length: int  # BM25 document length


def file_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def prepare_file(gate: Gate, path: str, known_hash: str | None) -> PreparedFile | None:
    """Read, hash, parse and tokenize one file; None when it is not indexed (refused by the read gate: outside the
    tree, a secret; unreadable, binary, generated). A file whose hash is known_hash is only hashed (its record stays
    as it is)."""
    text = read_text(gate, path)
    if text is None:
        return None
    digest = file_digest(text)
    if digest == known_hash:
        return PreparedFile(path=path, digest=digest, language=None, parser="", tokens=0, symbols=[], imports=[],
                            terms={}, length=0)
    parsed = parse_source(path, text, references=False)
    counts = lexical.token_counts(text)
    counts.update(lexical.path_tokens(path))
    terms, length = (dict(counts), sum(counts.values())) if counts else lexical.term_counts([])
    return PreparedFile(
        path=path, digest=digest, language=parsed.language, parser=parsed.parser, tokens=tokens.min_tokens(text),
        symbols=[SymbolRow(qualname=s.qualname, kind=s.kind, start=s.start_line, end=s.end_line, signature=s.signature)
                 for s in parsed.symbols],
        imports=[ImportRow(i.module, list(i.names), i.level) for i in parsed.imports],
        terms=terms, length=length)


_worker_gate: Gate | None = None

PARENT_CHECK_S = 1.0


def _worker_init(gate: Gate) -> None:
    global _worker_gate
    _worker_gate = gate
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker ends when the process that started it is gone. A pool's workers hold both ends of their job queue, so
    a parent killed outright (the user's kill -9, the OOM killer, a background completion stopped) never closes it for
    them: without this they would wait on it for ever, each holding its parsers' memory."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _worker_prepare(job: tuple[str, str | None]) -> PreparedFile | None:
    assert _worker_gate is not None
    return prepare_file(_worker_gate, job[0], job[1])


class Preparer:
    """prepare_file over many files: in worker processes when there are enough files and cores, else here."""

    def __init__(self, gate: Gate, files: int) -> None:
        self.gate = gate
        self._pool: ProcessPoolExecutor | None = None
        workers = min(os.cpu_count() or 1, 8)
        if files >= PARALLEL_MIN_FILES and workers > 1:
            # spawn, not fork: the vector store's native threads must not be forked mid-flight
            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init, initargs=(gate,))

    def map(self, jobs: list[tuple[str, str | None]]) -> Iterator[PreparedFile | None]:
        if self._pool is None:
            return (prepare_file(self.gate, path, known) for path, known in jobs)
        return self._pool.map(_worker_prepare, jobs, chunksize=16)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
