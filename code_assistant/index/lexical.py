"""Identifier-aware tokenization and the BM25 formula used for lexical file ranking (postings live in postings.py)."""
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


_WORD_TOKENS: dict[str, tuple[str, ...]] = {}  # word -> its tokens: code repeats its words, splitting is the cost
_WORD_TOKENS_MAX = 200_000


def _word_tokens(word: str) -> tuple[str, ...]:
    found = _WORD_TOKENS.get(word)
    if found is None:
        lower = word.lower()
        if lower.isalpha() and (word.islower() or word[1:].islower()):  # `parse`, `Parse`: nothing to split
            found = (lower,)
        else:
            parts = split_identifier(word)
            found = (lower, *parts) if len(parts) > 1 else tuple(parts or [lower])
        if len(_WORD_TOKENS) >= _WORD_TOKENS_MAX:
            _WORD_TOKENS.clear()
        _WORD_TOKENS[word] = found
    return found


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Identifier-aware tokens: the whole identifier (lowercased) plus its snake/camel parts."""
    tokens: list[str] = []
    for word in _WORD_RE.findall(text):
        tokens.extend(_word_tokens(word))
    if keep_stopwords:
        return tokens
    return [t for t in tokens if len(t) > 1 and t not in STOPWORDS]


def token_counts(text: str) -> Counter[str]:
    """Counter(tokenize(text)), computed per distinct word: what the index keeps of a file for BM25."""
    counts: Counter[str] = Counter()
    for word, n in Counter(_WORD_RE.findall(text)).items():
        for token in _word_tokens(word):
            if len(token) > 1 and token not in STOPWORDS:
                counts[token] += n
    return counts


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
