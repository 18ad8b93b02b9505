"""The dense half of the index, filled on demand.

A cold index has no vectors: files, symbols, imports, BM25 postings and the graph are enough to rank. Vectors are
made where they change an answer — the chunks of a query's top candidates, within a budget of model work — or for
every file with `code-assistant index`. Either way a file is chunked from its current text, each chunk's vector comes
from the embedding cache (by text hash, shared by every repository) or else from the model, and goes into the
repository's Chroma collection as it is made. The index database records which chunks of each file version are
stored, so nothing is embedded or stored twice and an interrupted fill continues where it stopped, and keeps a copy
of each vector beside them, which a query searches without opening Chroma (index/nearest.py).
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from code_assistant import languages
from code_assistant.gate import Gate
from code_assistant.index import lexical, store
from code_assistant.index.embedding_cache import EmbeddingCache
from code_assistant.index.embeddings import Embedder
from code_assistant.index.file_prep import file_digest
from code_assistant.index.index_db import IndexDB
from code_assistant.index.repo_files import read_text
from code_assistant.index.vector_table import VectorRow
from code_assistant.parse.chunker import Chunk, chunk_file
from code_assistant.parse.code_parser import parse_source

logger = logging.getLogger(__name__)

EMBED_BATCH = 64  # texts per model call
STORE_BATCH = 64  # vectors per Chroma write and commit: what an interrupt can lose (its vectors stay cached)
FILES_PER_COMMIT = 16
QUERY_CHUNKS = 4  # per candidate file, the chunks most like the query that a query embeds: its best chunk decides


@dataclass
class FillReport:
    """What one fill did: `embedded` counts model work (the budget), `reused` vectors found in the cache or store."""

    files: int = 0  # files whose vectors are complete after this fill
    files_asked: int = 0  # files that had missing vectors when the fill began
    chunks: int = 0  # chunks of the files looked at
    embedded: int = 0
    reused: int = 0
    exhausted: bool = False  # the budget ran out before every asked file was complete
    seconds: float = 0.0


FillProgress = Callable[[FillReport], None]


@dataclass
class _Pending:
    """Vectors made but not yet written, and the file states to record once they are."""

    ids: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    metas: list[dict] = field(default_factory=list)
    states: list[tuple[str, list[str], int, bool]] = field(default_factory=list)  # path, stored ids, chunks, complete


@dataclass
class _Plan:
    """One file's chunks, which of them are stored, and which still need a vector."""

    path: str
    ids: list[str]
    chunks: list[Chunk]
    stored: set[str]
    need: list[int]  # indices into chunks


def _relevance(texts: list[str], query_terms: set[str]) -> list[float]:
    """How much each text shares with the query: the sum of the idf (over these texts) of the query's terms
    (lexical.tokenize) it holds."""
    holds = [query_terms.intersection(lexical.tokenize(text)) for text in texts]
    df = Counter(word for words in holds for word in words)
    n = len(texts)
    return [sum(lexical.bm25_idf(df[w], n) for w in words) for words in holds]


LAYOUT_VERSION = 1  # how a chunk is rebuilt from a layout; a change to it (or to the chunker) bumps it


def to_layout(chunks: list[Chunk], text: str) -> list[list[object]]:
    """Each chunk as [start line, end line, symbol, kind, header, None]: its text is the header and those lines
    (the chunker's way); a chunk made otherwise keeps its whole text in the last place instead."""
    lines = text.splitlines()
    layout: list[list[object]] = []
    for c in chunks:
        body = "\n".join(lines[c.start_line - 1:c.end_line]) + "\n"
        split = c.text.endswith(body)
        layout.append([c.start_line, c.end_line, c.symbol, c.kind, c.text[:len(c.text) - len(body)] if split else "",
                       None if split else c.text])
    return layout


def from_layout(path: str, text: str, layout: list[list]) -> list[Chunk]:
    """The chunks `to_layout` described, rebuilt from the file's text without parsing or counting tokens."""
    lines = text.splitlines()
    return [Chunk(path=path, start_line=start, end_line=end, symbol=symbol, kind=kind,
                  text=whole if whole is not None else header + "\n".join(lines[start - 1:end]) + "\n")
            for start, end, symbol, kind, header, whole in layout]


class Vectors:
    """Fills the vector store for chosen files (or all), never doing the same work twice."""

    def __init__(self, gate: Gate, db: IndexDB, cache: EmbeddingCache, chunks: store.ChunkStore,
                 embedder: Embedder) -> None:
        """`gate`: the read gate of the repository, which every file's text is read through."""
        self.gate, self.db, self.cache, self.store, self.embedder = gate, db, cache, chunks, embedder
        self.chunked = 0  # files chunked by this process (a warm query chunks none: their layouts are stored)

    def missing(self, paths: Sequence[str] | None = None) -> list[str]:
        """Of paths (every indexed file when None), the ones whose vectors are not complete."""
        return self.db.vectors.missing(paths)

    def fill(self, paths: Sequence[str] | None = None, budget: int | None = None,
             progress: FillProgress | None = None, report: FillReport | None = None,
             query_terms: set[str] | None = None) -> FillReport:
        """Embed and store the missing chunks of paths until at most `budget` chunks were computed by the model
        (None: no limit). Without a query's terms (lexical.tokenize), file by file in order; with them, only each
        file's QUERY_CHUNKS chunks that share the most terms with the query, a round over the files at a time (each
        file's best chunk, then each file's second, ...), so that a small budget reaches every candidate where it
        matters and the same query costs nothing the second time. Every finished batch is written at once, so an
        interrupt loses at most the one in flight; pass `report` to keep the count when one comes."""
        started = time.perf_counter()
        report = report if report is not None else FillReport()
        todo = self.missing(paths)
        report.files_asked = len(todo)
        pending = _Pending()
        try:
            if query_terms is not None:
                self._fill_for_query(todo, query_terms, budget, report, pending, progress)
            else:
                for path in todo:
                    if budget is not None and report.embedded >= budget:
                        report.exhausted = True
                        break
                    plan = self._plan(path, report)
                    if plan is not None:
                        self._embed([(plan, plan.need)], budget, report, pending, progress)
                    if len(pending.ids) >= STORE_BATCH or len(pending.states) >= FILES_PER_COMMIT:
                        self._flush(pending, report, progress)
        finally:
            self._flush(pending, report, progress)
            report.seconds = time.perf_counter() - started
        if budget is not None and report.files < report.files_asked:
            report.exhausted = True
        logger.info("vectors: %d of %d files complete, %d chunks embedded, %d reused in %.2fs", report.files,
                    report.files_asked, report.embedded, report.reused, report.seconds)
        return report

    def _fill_for_query(self, todo: list[str], query_terms: set[str], budget: int | None, report: FillReport,
                        pending: _Pending, progress: FillProgress | None) -> None:
        plans = [plan for plan in (self._plan(path, report) for path in todo) if plan is not None]
        relevance = _relevance([chunk.text for plan in plans for chunk in plan.chunks], query_terms)
        chosen: list[list[int]] = []
        offset = 0
        for plan in plans:  # a file's QUERY_CHUNKS most relevant chunks, stored or not: embed those still missing
            scores = relevance[offset:offset + len(plan.chunks)]
            offset += len(plan.chunks)
            best = sorted((k for k in range(len(plan.chunks)) if scores[k] > 0), key=lambda k: (-scores[k], k))
            best = best[:QUERY_CHUNKS] or ([] if plan.stored else plan.need[:1])  # else one chunk, to be scored at all
            missing = set(plan.need)
            chosen.append([k for k in best if k in missing])
        self._embed(list(zip(plans, chosen)), budget, report, pending, progress, keep_order=True)

    def _plan(self, path: str, report: FillReport) -> _Plan | None:
        made = self._chunks(path)
        if made is None:
            return None  # changed since the last update, or unreadable: the next update re-indexes it
        ids, chunks = made
        report.chunks += len(ids)
        stored = set(self.db.vectors.chunk_ids(path)) & set(ids)
        need = [k for k, cid in enumerate(ids) if cid not in stored]
        if need and self.store.shared:  # a teammate may have stored this very version
            found = self.store.existing([ids[k] for k in need])
            stored |= found
            report.reused += len(found)
            need = [k for k in need if ids[k] not in found]
        return _Plan(path=path, ids=ids, chunks=chunks, stored=stored, need=need)

    def _embed(self, work: list[tuple[_Plan, list[int]]], budget: int | None, report: FillReport,
               pending: _Pending, progress: FillProgress | None, keep_order: bool = False) -> None:
        """Vectors for the chosen chunks of each plan: the cache's first, then the model's within the budget (in the
        order given: a whole round of files before the next); then every plan's state is pending."""
        keys = {(p.path, k): EmbeddingCache.key(p.chunks[k].text) for p, chosen in work for k in chosen}
        known = self.cache.get_many(sorted(set(keys.values())))
        report.reused += sum(1 for key in keys.values() if key in known)
        order = [(p, k) for p, chosen in work for k in chosen]
        if keep_order:  # interleave the files round by round, as chosen
            order = [(p, chosen[d]) for d in range(max((len(c) for _, c in work), default=0))
                     for p, chosen in work if d < len(chosen)]
        missing = [key for key in dict.fromkeys(keys[(p.path, k)] for p, k in order) if key not in known]
        if budget is not None:
            missing = missing[:max(0, budget - report.embedded)]
        text_of = {keys[(p.path, k)]: p.chunks[k].text for p, k in order}
        if missing:
            self.store.warm_up()  # vectors to store: chromadb is imported beside the model's work
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start:start + EMBED_BATCH]
            made_now = dict(zip(part, self.embedder.embed([text_of[key] for key in part])))
            self.cache.put_many(made_now)  # before anything else: an interrupt keeps the work
            known.update(made_now)
            report.embedded += len(part)
            if progress:
                progress(report)
        for plan, chosen in work:
            for k in chosen:
                if keys[(plan.path, k)] in known:
                    pending.ids.append(plan.ids[k])
                    pending.vectors.append(known[keys[(plan.path, k)]])
                    chunk = plan.chunks[k]
                    pending.metas.append({"path": plan.path, "start": chunk.start_line, "end": chunk.end_line,
                                          "symbol": chunk.symbol or "", "kind": chunk.kind})
                    plan.stored.add(plan.ids[k])
            complete = len(plan.stored) == len(plan.ids)
            pending.states.append((plan.path, [cid for cid in plan.ids if cid in plan.stored], len(plan.ids),
                                   complete))

    def _chunks(self, path: str) -> tuple[list[str], list[Chunk]] | None:
        """The current version's chunk ids and chunks, if the file is still the version the index knows: chunked
        once (parsing it and counting its tokens line by line), then rebuilt from the layout the index keeps."""
        record = self.db.files.records([path]).get(path)
        text = read_text(self.gate, path)
        if record is None or text is None or file_digest(text) != record.hash:
            return None
        if languages.language_for(path) not in languages.EMBEDDED_LANGUAGES:
            return [], []  # ranked by BM25 and by name only (see languages.EMBEDDED_LANGUAGES)
        stored = self.db.files.layout(path, record.hash)
        if stored is not None and stored[:1] == [LAYOUT_VERSION]:
            chunks = from_layout(path, text, stored[1:])
        else:  # the model adds [CLS] and [SEP] to what count_tokens counts
            chunks = chunk_file(path, text, parse_source(path, text), max_tokens=self.embedder.max_tokens - 2,
                                count_tokens=self.embedder.count_tokens)
            self.db.files.set_layout(path, record.hash, [LAYOUT_VERSION, *to_layout(chunks, text)])
            self.chunked += 1
        return [store.chunk_id(path, record.hash, i, c.text) for i, c in enumerate(chunks)], chunks

    def _flush(self, pending: _Pending, report: FillReport, progress: FillProgress | None) -> None:
        """Write the pending vectors, then record the files' states: the database never claims an unstored chunk."""
        if not pending.states:
            return
        for start in range(0, len(pending.ids), STORE_BATCH):
            self.store.add(pending.ids[start:start + STORE_BATCH], pending.vectors[start:start + STORE_BATCH],
                           pending.metas[start:start + STORE_BATCH])
        import numpy as np

        self.db.vectors.put_rows([VectorRow(chunk_id=cid, path=meta["path"], start=meta["start"], end=meta["end"],
                                            symbol=meta["symbol"], kind=meta["kind"],
                                            vector=np.asarray(vector, dtype=np.float32).tobytes())
                                  for cid, vector, meta in zip(pending.ids, pending.vectors, pending.metas)])
        for path, stored, total, complete in pending.states:
            self.db.vectors.set_stored(path, stored, total, complete)
            report.files += complete
        self.db.commit()
        pending.ids.clear(), pending.vectors.clear(), pending.metas.clear(), pending.states.clear()
        if progress:
            progress(report)
