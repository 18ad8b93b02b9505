"""Rank a repository's files for a task, in two phases: the fast signals (signals.gather) are scored by the fitted
fast model (fusion.py); the top DENSE_CANDIDATES files get their missing vectors (within a budget of model work);
then the dense signal joins and the full model scores every candidate. Each file carries the reasons it ranks."""
from __future__ import annotations

from dataclasses import dataclass, field

from code_assistant.index.indexer import RepoIndex
from code_assistant.retrieve import fusion, signals
from code_assistant.retrieve.mentions import FileKind, Mentions
from code_assistant.retrieve.signals import FileSignals, Signals
from code_assistant.settings import EMBED_BUDGETS, EmbeddingBackend

DENSE_CANDIDATES = 15  # the fast ranking's top files whose missing vectors a query may embed
REASON_DEPTH = 5  # a signal's top files say so in their reasons
DEPTH = 150  # files a ranking keeps: enough for the context's files, its map's lines and the map's list of paths


@dataclass
class RankedFile:
    path: str
    score: float
    reasons: list[str] = field(default_factory=list)


@dataclass
class Ranking:
    """The ranked files and what the context needs to know about why they rank."""

    files: list[RankedFile]
    hit_symbols: dict[str, set[str]]  # per file, the definitions dense retrieval hit
    mentions: Mentions  # what the task names
    frames: list[tuple[str, int]]  # traceback frames (path, line) in the task and in the extra frames
    embedded: int = 0  # chunks the model embedded for this query (the lazy dense signal's cost)
    signals: Signals | None = None  # the evidence behind the ranking (for the bench and for explaining)
    dense_asked: list[str] = field(default_factory=list)  # the files whose missing vectors this query asked for


def rank(index: RepoIndex, task: str, extra_frames: list[tuple[str, int]] | None = None,
         limit: int = DEPTH, embed_budget: int | None = EMBED_BUDGETS[EmbeddingBackend.LOCAL]) -> Ranking:
    """Score the fast signals; embed what the top DENSE_CANDIDATES files still lack (at most `embed_budget` chunks
    of model work; None: no limit); score again with the dense signal. A budget of 0 uses whatever vectors the
    index already has and embeds nothing."""
    sig = signals.gather(index, task, extra_frames)
    paths, matrix = fusion.features(sig)
    fast = fusion.order(paths, matrix, fusion.shipped("fast"))
    asked: list[str] = []
    if embed_budget != 0:
        asked = dense_asks(fast, sig)
        sig.embedded = index.vectors.fill(asked, embed_budget, query_terms=set(sig.terms)).embedded
    signals.add_dense(index, sig, task)
    ordered = fast
    if any(f.dense is not None for f in sig.files.values()):
        paths, matrix = fusion.features(sig)
        ordered = fusion.order(paths, matrix, fusion.shipped("full"))
    if not sig.about_tests:
        ordered = code_before_its_tests(ordered, sig.tested)
    ranked = [RankedFile(p, s, reasons(sig.files[p], sig)) for p, s in ordered[:limit] if p in index.files]
    return Ranking(files=ranked, hit_symbols=sig.hit_symbols, mentions=sig.mentions, frames=sig.frames,
                   embedded=sig.embedded, signals=sig, dense_asked=asked)


def code_before_its_tests(ordered: list[tuple[str, float]], tested: dict[str, str]) -> list[tuple[str, float]]:
    """A test file the task points at ranks right after the code it exercises, never above it (for a task that is not
    about tests: the failing test is evidence for that code, the code is what changes). The test then has that code's
    score, so scores still never rise down the list; the fitted model never learned this (no gold file of its sets is
    a test), and no non-test file moves down by it."""
    out = list(ordered)
    for test, source in tested.items():
        at = {path: i for i, (path, _score) in enumerate(out)}
        if test in at and source in at and at[test] < at[source]:
            out.pop(at[test])
            source_at = at[source] - 1
            out.insert(source_at + 1, (test, out[source_at][1]))
    return out


def dense_asks(fast: list[tuple[str, float]], sig: Signals) -> list[str]:
    """The files whose missing vectors a query asks for: the fast ranking's top DENSE_CANDIDATES of the kinds BM25
    ranks (the bench's replays ask for the same ones)."""
    return [p for p, _ in fast if sig.files[p].kind in sig.lexical_kinds][:DENSE_CANDIDATES]


def reasons(f: FileSignals, sig: Signals) -> list[str]:
    """Why a file ranks, in words."""
    out = [f"{name}#{position}" for name, position in (("bm25", f.bm25_rank), ("symbols", f.symbol_rank),
                                                       ("dense", f.dense_rank)) if 0 < position <= REASON_DEPTH]
    if f.named:
        out.append("named in task")
    if f.stem:
        out.append("stem named in task")
    if f.trace_pos:
        out.append(f"traceback (frame file {f.trace_pos} from the innermost)")
    if f.literal:
        out.append("holds a message the task quotes")
    if f.tested:
        out.append("the code of a test the task points at")
    if f.pkg_named:
        out.append("in a package the task names")
    out.extend(f"imports/imported by {anchor}" for anchor in f.via)
    if f.kind != FileKind.CODE:
        out.append(f"{f.kind} file{' (task about tests)' if f.kind == FileKind.TEST and sig.about_tests else ''}")
    return out
