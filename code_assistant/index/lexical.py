"""Identifier-aware tokenization and the BM25 formula used for lexical file ranking (postings live in index_db)."""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

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


# BM25 with Lucene's idf and term-frequency saturation (Kamphuis et al. 2020), as bm25s computes it by default.
K1 = 1.5
B = 0.75


def term_counts(tokens: Sequence[str]) -> tuple[dict[str, int], int]:
    """A document's term frequencies and its length; an empty document counts as one empty token, as in bm25s."""
    if not tokens:
        return {"": 1}, 1
    return dict(Counter(tokens)), len(tokens)


def bm25_idf(doc_freq: int, n_docs: int) -> float:
    return math.log(1 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25_tf(tf: int, doc_len: int, avg_len: float) -> float:
    return tf / (K1 * ((1 - B) + B * doc_len / avg_len) + tf)
