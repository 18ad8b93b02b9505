"""Rankings replayed from a stored instance record (the signals `rank()` gathered, see bench/localize.py): each
signal alone, the old hand-tuned fusion (as it was before the fitted one), and any fusion model with the lazy dense
signal simulated — so the fit can be scored on many models without touching a repository again."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from bench.fit import Query
from bench.localize_cli import golds_of
from code_assistant.retrieve import fusion
from code_assistant.retrieve.mentions import Mentions
from code_assistant.retrieve.ranking import dense_asks
from code_assistant.retrieve.signals import FileSignals, Signals

# The hand-tuned fusion of 93440f9's ranking.py, kept here only to be compared with.
HAND = {"weights": {"bm25": 1.0, "dense": 1.0, "symbols": 1.2, "graph": 0.35}, "rrf_k": 8, "mention": 1.0,
        "stem": 0.6, "traceback": 1.5, "decay": 0.5, "test": 0.35, "aux": 0.5, "other": 0.4}


def signals_of(record: dict, drop_dense: set[str] | None = None) -> Signals:
    """The record's signals; `drop_dense`: files whose vectors are taken away (not embedded in this simulation)."""
    files = {}
    known = set(FileSignals.__dataclass_fields__)
    for row in record["files"]:
        f = FileSignals(**{k: v for k, v in row.items() if k in known})
        if drop_dense and f.path in drop_dense:
            f.dense, f.dense_rank = None, 0
        files[f.path] = f
    return Signals(files, record["about_tests"], record["n_files"], Mentions([], [], set()), [],
                   degree=record.get("degree", {}))


def _order(scores: dict[str, float]) -> list[str]:
    return [p for p, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])) if s > 0]


def signal_rankings(record: dict) -> dict[str, list[str]]:
    """Each signal's own ranking of the candidates (files it did not find are not ranked)."""
    files = list(signals_of(record).files.values())
    return {
        "bm25 (code files, index)": _order({f.path: 1 / f.bm25_rank for f in files if f.bm25_rank}),
        "symbols": _order({f.path: f.symbols for f in files}),
        "mentions + stems": _order({f.path: f.named * (2 + f.named_idf) + f.stem * (1 + f.stem_idf) for f in files}),
        "path words": _order({f.path: f.stem_word + 0.5 * f.dir_words for f in files}),
        "traceback": _order({f.path: 1 / f.trace_pos for f in files if f.trace_pos}),
        "import graph": _order({f.path: f.graph_named + f.graph_top for f in files}),
        "dense (lazy vectors)": _order({f.path: 1 + f.dense for f in files if f.dense is not None}),
    }


def hand_fusion(record: dict) -> list[str]:
    """93440f9's fusion replayed on the record: RRF of BM25, symbols and dense; bonuses for names, stems and
    tracebacks; one import hop from the top five (over the links the record kept); penalties by kind. On the signals
    as the run gathered them (mentions found as 93440f9 found them), not as regathered."""
    if "files_extracted" in record:
        record = {**record, "files": record["files_extracted"], "degree": record["degree_extracted"]}
    sig = signals_of(record)
    files = sig.files.values()
    fused: dict[str, float] = defaultdict(float)
    weights, k = HAND["weights"], HAND["rrf_k"]
    for name, key in (("bm25", lambda f: 1 / f.bm25_rank if f.bm25_rank else 0), ("symbols", lambda f: f.symbols),
                      ("dense", lambda f: 1 + f.dense if f.dense is not None else 0)):
        for position, path in enumerate(_order({f.path: key(f) for f in files})[:100]):
            fused[path] += weights[name] / (k + position + 1)
    named = {f.path for f in files if f.named or f.trace_pos}
    for f in files:
        if f.named:
            fused[f.path] += HAND["mention"]
        elif f.stem and not f.trace_pos:
            fused[f.path] += HAND["stem"] * f.stem
        if f.trace_pos:
            fused[f.path] += HAND["traceback"] / (1 + HAND["decay"] * (f.trace_pos - 1))
    top = sorted(fused.items(), key=lambda kv: -kv[1])[:5]
    for position, (anchor, score) in enumerate(top):
        if anchor not in sig.degree:
            continue  # its links were not kept (it was not a graph anchor of the record)
        for f in files:
            if anchor in f.via:
                fused[f.path] += weights["graph"] * score / (math.sqrt(sig.degree[anchor]) + position + 1)
    for f in files:
        if f.path not in named and f.kind != "code":
            fused[f.path] *= 1.0 if (f.kind == "test" and sig.about_tests) else HAND[f.kind]
    return _order(fused)


def lazy_order(record: dict, fast: fusion.Model, full: fusion.Model) -> list[str]:
    """The two-phase ranking of ranking.rank(), replayed: the fast model picks DENSE_CANDIDATES files to embed;
    vectors the record has only because the extraction's own pick asked for them are dropped when this pick would
    not have (vectors it would ask for but the record lacks stay missing: the replay can only under-state dense)."""
    return [p for p, _ in lazy_scored(record, fast, full)]


def lazy_scored(record: dict, fast: fusion.Model, full: fusion.Model) -> list[tuple[str, float]]:
    """lazy_order with each file's score."""
    first, drop = _as_lazy(record, fast)
    sig, paths, matrix = features_of(record, drop)
    if not any(f.dense is not None for f in sig.files.values()):
        return first
    return fusion.order(paths, matrix, full)


# Features of a record's candidates, by the record (its id, the record kept alive with them) and the files whose
# vectors are dropped: a fit over a grid of settings and folds computes each only once (they are most of its time).
_FEATURES: dict[int, tuple[dict, dict[frozenset[str], tuple[Signals, list[str], np.ndarray]]]] = {}


def features_of(record: dict, drop: frozenset[str] = frozenset()) -> tuple[Signals, list[str], np.ndarray]:
    """The record's signals (vectors of `drop` taken away), candidate paths and feature matrix, computed once."""
    kept, by_drop = _FEATURES.setdefault(id(record), (record, {}))
    assert kept is record
    if drop not in by_drop:
        sig = signals_of(record, set(drop))
        by_drop[drop] = (sig, *fusion.features(sig))
    return by_drop[drop]


def fast_order(record: dict, fast: fusion.Model) -> list[tuple[str, float]]:
    """The fast model's order of the record's candidates (before any dense signal)."""
    _sig, paths, matrix = features_of(record)
    return fusion.order(paths, matrix, fast)


def _as_lazy(record: dict, fast: fusion.Model) -> tuple[list[tuple[str, float]], frozenset[str]]:
    """The fast model's order of the record's candidates, and the files whose vectors the lazy flow under that model
    would not have (those the extraction made only for its own pick)."""
    first = fast_order(record, fast)
    return first, frozenset(set(record.get("asked", [])) - set(dense_asks(first, features_of(record)[0])))


def query_for(record: dict, fast: fusion.Model | None = None) -> Query:
    """The record as a training query (its gold files' rows; none when no gold file is a candidate). With `fast`,
    the dense features are those the lazy flow would have under that fast model (see lazy_order)."""
    _sig, paths, matrix = features_of(record, frozenset() if fast is None else _as_lazy(record, fast)[1])
    return Query(np.asarray(matrix), tuple(paths.index(g) for g in golds_of(record) if g in paths))
