"""Identifier-aware tokenization and the BM25 seam (bm25s) used for lexical file ranking."""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

logger = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import

_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have if in into is it its no not of on or so such that the their "
    "then there these they this to was were will with would should can could i we you he she my our your me us "
    "do does did been being which what when where who how why all any some also just only than very get got "
    "self return def class import none true false null".split()
)


def split_identifier(word: str) -> list[str]:
    """`parse_HTTPResponse` -> ['parse', 'http', 'response']."""
    parts: list[str] = []
    for piece in word.split("_"):
        parts.extend(p.lower() for p in _CAMEL_RE.findall(piece))
    return [p for p in parts if p]


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Identifier-aware tokens: the whole identifier (lowercased) plus its snake/camel parts."""
    tokens: list[str] = []
    for word in _WORD_RE.findall(text):
        lower = word.lower()
        parts = split_identifier(word)
        if len(parts) > 1:
            tokens.append(lower)
        tokens.extend(parts if parts else [lower])
    if keep_stopwords:
        return tokens
    return [t for t in tokens if len(t) > 1 and t not in STOPWORDS]


def path_tokens(path: str) -> list[str]:
    """Tokens of a path, repeated so the file name weighs like a few mentions in the body."""
    stem_tokens = tokenize(Path(path).stem)
    return tokenize(path.replace("/", " ")) + stem_tokens * 2


class LexicalIndex:
    """BM25 over whole files (path + content tokens)."""

    def __init__(self, paths: list[str], retriever: bm25s.BM25 | None) -> None:
        self.paths = paths
        self._retriever = retriever
        self._vocab: dict[str, int] = dict(getattr(retriever, "vocab_dict", {}) or {}) if retriever else {}

    @classmethod
    def build(cls, docs: dict[str, Sequence[str]]) -> LexicalIndex:
        paths = sorted(docs)
        if not paths:
            return cls([], None)
        retriever = bm25s.BM25()
        retriever.index([list(docs[p]) or [""] for p in paths], show_progress=False)
        return cls(paths, retriever)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "paths.txt").write_text("\n".join(self.paths), encoding="utf-8")
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex | None:
        paths_file = directory / "paths.txt"
        if not paths_file.is_file():
            return None
        paths = [p for p in paths_file.read_text(encoding="utf-8").split("\n") if p]
        if not paths:
            return cls([], None)
        try:
            retriever = bm25s.BM25.load(str(directory), show_progress=False)
        except Exception as exc:  # noqa: BLE001 - a damaged cache is rebuilt by the indexer
            logger.warning("could not load the BM25 index (%s); it will be rebuilt", exc)
            return None
        return cls(paths, retriever)

    def scores(self, query_tokens: Sequence[str]) -> dict[str, float]:
        if self._retriever is None:
            return {}
        known = [t for t in query_tokens if t in self._vocab]
        if not known:
            return {}
        raw = np.asarray(self._retriever.get_scores(known))
        nonzero = np.nonzero(raw > 0)[0]
        return {self.paths[i]: float(raw[i]) for i in nonzero}
