"""Read, hash, parse, chunk and tokenize one file — in worker processes when there are many."""

import hashlib
import logging
import multiprocessing
import os
import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Self

from code_assistant import languages, redact, tokens
from code_assistant.index import lexical
from code_assistant.index.embeddings import Embedder
from code_assistant.index.index_db import ImportRow, SymbolRow
from code_assistant.parse.chunker import chunk_file
from code_assistant.parse.code_parser import parse_source
from code_assistant.index.repo_files import read_text

logger = logging.getLogger(__name__)

PARALLEL_MIN_FILES = 400  # below this, starting worker processes costs more than it saves


class ChunkRow(NamedTuple):
    """A chunk on its way to the embedder and the vector store."""

    text: str
    start: int
    end: int
    symbol: str
    kind: str


@dataclass
class PreparedFile:
    """Everything the index keeps of one file version, computed from its text alone (in a worker process)."""

    path: str
    digest: str
    language: str | None
    parser: str
    tokens: int
    symbols: list[SymbolRow]
    imports: list[ImportRow]
    chunks: list[ChunkRow]
    terms: dict[str, int]  # BM25 term frequencies (identifier-aware tokens of the path and the text)
    length: int  # BM25 document length


def prepare_file(repo: Path, path: str, known_hash: str | None, embedder: Embedder) -> PreparedFile | None:
    """Read, hash, parse, chunk and tokenize one file; None when it is not indexed (unreadable, binary, generated,
    holding a secret). A file whose hash is known_hash is only hashed (its record stays as it is)."""
    text = read_text(repo / path)
    if text is None or redact.looks_like_secret_file(text):
        return None
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    if digest == known_hash:
        return PreparedFile(path, digest, None, "", 0, [], [], [], {}, 0)
    parsed = parse_source(path, text)
    embedded = languages.language_for(path) in languages.EMBEDDED_LANGUAGES
    # the model adds [CLS] and [SEP] to what count_tokens counts
    chunk_list = chunk_file(path, text, parsed, max_tokens=embedder.max_tokens - 2,
                            count_tokens=embedder.count_tokens) if embedded else []
    terms, length = lexical.term_counts(lexical.path_tokens(path) + lexical.tokenize(text))
    return PreparedFile(
        path=path, digest=digest, language=parsed.language, parser=parsed.parser, tokens=tokens.count_tokens(text),
        symbols=[SymbolRow(s.qualname, s.kind, s.start_line, s.end_line, s.signature) for s in parsed.symbols],
        imports=[ImportRow(i.module, list(i.names), i.level) for i in parsed.imports],
        chunks=[ChunkRow(c.text, c.start_line, c.end_line, c.symbol or "", c.kind) for c in chunk_list],
        terms=terms, length=length)


_worker: tuple[Path, Embedder] | None = None


def _worker_init(repo: Path, embedder: Embedder) -> None:
    global _worker
    _worker = (repo, embedder)


def _worker_prepare(job: tuple[str, str | None]) -> PreparedFile | None:
    assert _worker is not None
    return prepare_file(_worker[0], job[0], job[1], _worker[1])


class Preparer:
    """prepare_file over many files: in worker processes when there are enough files, cores and a picklable
    embedder (the local model's tokenizer is loaded once per worker), else in this process."""

    def __init__(self, repo: Path, embedder: Embedder, files: int) -> None:
        self.repo, self.embedder = repo, embedder
        self._pool: ProcessPoolExecutor | None = None
        workers = min(os.cpu_count() or 1, 8)
        if files >= PARALLEL_MIN_FILES and workers > 1:
            try:
                pickle.dumps(embedder)
            except Exception:  # noqa: BLE001 - e.g. an HTTP client: prepare here instead
                return
            # spawn, not fork: the vector store's native threads must not be forked mid-flight
            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init, initargs=(repo, embedder))

    def map(self, jobs: list[tuple[str, str | None]]) -> Iterator[PreparedFile | None]:
        if self._pool is None:
            return (prepare_file(self.repo, path, known, self.embedder) for path, known in jobs)
        return self._pool.map(_worker_prepare, jobs, chunksize=8)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
