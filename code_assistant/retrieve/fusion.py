"""Signals to features to one score per file: a linear model whose weights are fitted offline, not set by hand: they
are data the package ships (fusion_weights.json beside this module, written by `python -m bench.fit_ranking --write`).
Two models: the fast one ranks before any vectors exist and picks the files worth embedding; the full one adds the
dense features once they do."""
from __future__ import annotations

import functools
import json
import math
from collections import Counter
from dataclasses import dataclass
from importlib import resources

import numpy as np

from code_assistant import languages
from code_assistant.retrieve import file_roles
from code_assistant.retrieve.mentions import FileKind
from code_assistant.retrieve.signals import SIGNAL_DEPTH, FileSignals, Signals

RANK_SCALE = 8  # a signal's rank r becomes RANK_SCALE / (RANK_SCALE + r - 1): 1 at the top, 0.5 at rank 9
SYMBOLS_CAP = 3.0  # beyond three well-defined names, more hits say little more
MAJOR_DEPTH = 20  # the task's language: the most common among BM25's top files of this many
_SAME_LANGUAGE = {"tsx": "typescript"}  # a .tsx file is TypeScript here; .jsx is javascript already

# Name and meaning of each feature; the fast model uses those not starting with "dense".
FEATURES: dict[str, str] = {
    "bm25_rel": "BM25 of the whole file over the task's best",
    "bm25_rr": "reciprocal BM25 rank",
    "bm25_log": "1 - log(BM25 rank) / log(SIGNAL_DEPTH): slower than reciprocal, reaches deeper",
    "symbols": "task identifiers it defines, each 1/log2(1 + files defining it), capped",
    "symbols_rr": "reciprocal rank of that",
    "named": "the task names it by path or dotted module",
    "named_idf": "... times the rarity of its stem among the repository's files",
    "stem": "the task uses its stem as a name (shared among the stems named)",
    "stem_idf": "... times the stem's rarity",
    "stem_word": "the task uses its stem as a plain word, times the stem's rarity",
    "dir_words": "share of its directories the task uses as words",
    "trace": "in a traceback: 1 / (1 + 0.5 * position from the innermost frame file)",
    "trace_inner": "holds the innermost frame",
    "graph_named": "import neighbour of a named or traced file",
    "graph_top": "import neighbour of a top BM25 or symbol file",
    "test": "a test file, the task not about tests",
    "test_about": "a test file, the task about tests",
    "aux": "docs, examples, scripts, setup",
    "other": "not code: data, config, prose",
    "init": "a package's __init__ (re-exports, named in every issue)",
    "entry": "a module entry named by its directory (index.js, mod.rs, lib.rs, main.go; not __init__)",
    "barrel": "an entry that defines at most one name and imports two or more (re-exports)",
    "decl": "a type declaration file (.d.ts)",
    "config": "a build, bundler, runner or linter config (webpack.config.js, .eslintrc.js, build.rs, ...)",
    "vendored": "a vendored copy (vendor/, third_party/, a Python package's packages/)",
    "generated": "generated code by name or directory (.pb.go, *_gen.go, __generated__/)",
    "lang_major": "of the language most of BM25's top files are in (the task's language)",
    "literal": "holds a message the task quotes, by the run of words matched and the message's rarity",
    "tested": "the source counterpart of a test file the task names, traces, quotes or uses the names of",
    "pkg_named": "in a package (directory) the task names by import path, 1/sqrt(its files)",
    "dir_mate": "the best BM25 of another candidate in its directory over the task's best (package mates)",
    "importers": "log(1 + files importing it) / log(1 + files): how much of a hub it is",
    "log_tokens": "log of its size in tokens",
    "leaf": "a leaf user: imports repository files, none imports it (not an entry, not a test)",
    "dense_present": "it has vectors",
    "dense_rel": "best chunk similarity minus the task's best (0 without vectors)",
    "dense_rr": "reciprocal rank among the files with vectors",
}
NAMES = list(FEATURES)
FAST_NAMES = [n for n in NAMES if not n.startswith("dense")]


@dataclass(frozen=True)
class Model:
    """A linear scorer over named, standardized features: score = sum(weight * (x - mean) / scale)."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]

    def score(self, matrix: np.ndarray) -> np.ndarray:
        """Scores of the rows of a feature matrix whose columns are NAMES."""
        columns = [NAMES.index(n) for n in self.names]
        x = (matrix[:, columns] - np.asarray(self.means)) / np.asarray(self.scales)
        return x @ np.asarray(self.weights)


WEIGHTS_FILE = "fusion_weights.json"  # package data: {"about": ..., "models": {"fast": {...}, "full": {...}}}


@functools.cache
def _shipped_models() -> dict[str, Model]:
    """The fitted models of WEIGHTS_FILE, read once per process."""
    text = resources.files("code_assistant.retrieve").joinpath(WEIGHTS_FILE).read_text(encoding="utf-8")
    return {name: Model(names=tuple(spec["names"]), weights=tuple(spec["weights"]), means=tuple(spec["means"]),
                        scales=tuple(spec["scales"]))
            for name, spec in json.loads(text)["models"].items()}


def shipped(name: str) -> Model:
    """The fitted model `fast` or `full` the package ships (WEIGHTS_FILE)."""
    return _shipped_models()[name]


def _rr(rank: int) -> float:
    return RANK_SCALE / (RANK_SCALE + rank - 1) if rank else 0.0


def language(path: str) -> str | None:
    """The file's language, TSX counted as TypeScript."""
    found = languages.language_for(path)
    return _SAME_LANGUAGE.get(found, found) if found else None


def major_language(sig: Signals) -> str | None:
    """The language most of BM25's top MAJOR_DEPTH non-test files are in (declarations not counted)."""
    top = sorted((f for f in sig.files.values() if f.bm25_rank and f.kind != FileKind.TEST), key=lambda f: f.bm25_rank)
    counts = Counter(language(f.path) for f in top[:MAJOR_DEPTH] if not file_roles.is_declaration(f.path))
    return max(sorted(counts, key=str), key=lambda lang: counts[lang]) if counts else None


def feature_row(f: FileSignals, best_bm25: float, best_dense: float | None, dense_rank: int,
                about_tests: bool, major: str | None = None, n_files: int = 1) -> list[float]:
    """One file's features, in NAMES order."""
    test = f.kind == FileKind.TEST
    has_dense = f.dense is not None and best_dense is not None
    init = f.path.endswith("/__init__.py") or f.path == "__init__.py"
    entry = file_roles.is_entry(f.path)
    return [
        f.bm25 / best_bm25 if best_bm25 > 0 else 0.0,
        _rr(f.bm25_rank),
        1 - math.log(f.bm25_rank) / math.log(SIGNAL_DEPTH) if f.bm25_rank else 0.0,
        min(f.symbols, SYMBOLS_CAP),
        _rr(f.symbol_rank),
        float(f.named),
        f.named * f.named_idf,
        f.stem,
        f.stem * f.stem_idf,
        f.stem_word,
        f.dir_words,
        1.0 / (1 + 0.5 * (f.trace_pos - 1)) if f.trace_pos else 0.0,
        float(f.trace_pos == 1),
        f.graph_named,
        f.graph_top,
        float(test and not about_tests),
        float(test and about_tests),
        float(f.kind == FileKind.AUX),
        float(f.kind == FileKind.OTHER),
        float(init),
        float(entry and not init),
        float(entry and f.n_symbols <= 1 and f.n_imports >= 2),
        float(file_roles.is_declaration(f.path)),
        float(file_roles.is_config(f.path)),
        float(file_roles.is_vendored(f.path)),
        float(file_roles.is_generated(f.path)),
        float(major is not None and language(f.path) == major),
        f.literal,
        f.tested,
        f.pkg_named,
        f.dir_bm25 / best_bm25 if best_bm25 > 0 else 0.0,
        math.log1p(f.importers) / math.log1p(max(n_files, 1)),
        math.log1p(f.tokens),
        float(f.importers == 0 and f.imports_resolved > 0 and not entry and not test),
        float(has_dense),
        (f.dense - best_dense) if has_dense else 0.0,  # type: ignore[operator]
        _rr(dense_rank) if has_dense else 0.0,
    ]


def features(sig: Signals) -> tuple[list[str], np.ndarray]:
    """The candidates' paths and their feature matrix (columns: NAMES)."""
    paths = sorted(sig.files)
    best_bm25 = max((f.bm25 for f in sig.files.values()), default=0.0)
    dense = sorted((-f.dense, f.path) for f in sig.files.values() if f.dense is not None)
    dense_rank = {path: position for position, (_score, path) in enumerate(dense, start=1)}
    best_dense = -dense[0][0] if dense else None
    major = major_language(sig)
    rows = [feature_row(sig.files[p], best_bm25, best_dense, dense_rank.get(p, 0), sig.about_tests, major,
                        sig.n_files) for p in paths]
    return paths, np.asarray(rows, dtype=float).reshape(len(paths), len(NAMES))


def order(paths: list[str], matrix: np.ndarray, model: Model) -> list[tuple[str, float]]:
    """Paths best first by the model's score (ties by path)."""
    scores = model.score(matrix) if len(paths) else np.zeros(0)
    return sorted(zip(paths, scores.tolist()), key=lambda ps: (-ps[1], ps[0]))
