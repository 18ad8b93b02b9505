"""Priors about files that hold across repositories (issue 37), gathered once per task from the index: how much of
the repository depends on a file (PageRank on the import graph: core-ness), whether it uses the code without being
used (a leaf user: it imports repository files and nothing imports it), and how many of the task's behaviour words
(stemmed: `reconciling` finds `reconcileChildren`'s `reconcile`) its identifiers and words cover. Raw numbers per
file; fusion.py makes features of them and the fit weighs them."""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from code_assistant.index.indexer import RepoIndex
from code_assistant.index.lexical import STOPWORDS

DAMPING = 0.85  # PageRank's: the share of a file's rank that flows on along its imports
ITERATIONS = 40  # power iterations; a repository's import graph settles well within this
MIN_WORD = 4  # shorter words (`fix`, `add`, `get`) say nothing about where the fix goes
COVER_MAX_SHARE = 0.2  # a word more than this share of the files hold is no behaviour of any one of them
COVER_MIN_FILES = 5  # ... unless at most this many hold it (a repository of a few files)
COVER_WORDS = 40  # at most this many of the task's words, the first ones (a long task repeats itself)
# Suffixes stripped to find a word's stem, longest first, and the endings a stem is looked up with: the index holds
# each identifier's parts (`reconcileChildren`: `reconcile`, `children`), so `reconciler` and `reconciling` meet.
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ies", "ied", "ions", "ion", "es", "ed", "s", "ly",
             "ments", "ment")
_ENDINGS = ("", "e", "s", "es", "ed", "d", "ing", "er", "ers", "ion", "ions", "ation", "ations", "y", "ies", "ied",
            "ment", "or", "ors", "ive")
_WORD_RE = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")


@dataclass
class Priors:
    """Per file of the index: its PageRank times the number of files (1: average), how many repository files it
    imports, and the share of the task's behaviour words it covers (files not listed: 0)."""

    pagerank: dict[str, float] = field(default_factory=dict)
    imports: dict[str, int] = field(default_factory=dict)
    cover: dict[str, float] = field(default_factory=dict)


def gather(index: RepoIndex, task: str) -> Priors:
    """The priors of every file, for this task."""
    graph = index.graph
    pagerank = page_rank(list(index.files), graph)
    return Priors(pagerank, {path: len(targets) for path, targets in graph.items()}, word_cover(index, task))


def page_rank(paths: list[str], graph: dict[str, list[str]]) -> dict[str, float]:
    """PageRank over the import graph, a file passing its rank on to the files it imports (a file importing none
    spreads its rank evenly), times the number of files: a file many files depend on, directly or through others,
    scores high."""
    n = len(paths)
    if n == 0:
        return {}
    at = {p: i for i, p in enumerate(paths)}
    src = np.array([at[s] for s, targets in graph.items() if s in at for t in targets if t in at], dtype=int)
    dst = np.array([at[t] for s, targets in graph.items() if s in at for t in targets if t in at], dtype=int)
    out = np.bincount(src, minlength=n).astype(float)
    rank = np.full(n, 1.0 / n)
    for _ in range(ITERATIONS):
        flow = np.zeros(n)
        if len(src):
            np.add.at(flow, dst, rank[src] / out[src])
        dangling = rank[out == 0].sum()
        rank = (1 - DAMPING) / n + DAMPING * (flow + dangling / n)
    return {p: float(rank[i] * n) for p, i in at.items()}


def stem(word: str) -> str:
    """The word without its inflection or derivation suffix (`reconciling` -> `reconcil`), at least 3 letters."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            return word[: -len(suffix)]
    return word


def behaviour_words(task: str) -> dict[str, set[str]]:
    """The task's words of at least MIN_WORD letters (identifiers split into theirs), by stem: each stem with the
    forms it is looked up in (the word itself and the stem with each ending)."""
    groups: dict[str, set[str]] = {}
    for raw in _WORD_RE.findall(task):
        word = raw.lower()
        if len(word) < MIN_WORD or word in STOPWORDS:
            continue
        base = stem(word)
        if base not in groups:
            if len(groups) >= COVER_WORDS:
                break
            groups[base] = {base + ending for ending in _ENDINGS}
            if base.endswith("e"):
                groups[base] |= {base[:-1] + ending for ending in ("ing", "ion", "ions", "ation")}
        groups[base].add(word)
    return groups


def word_cover(index: RepoIndex, task: str) -> dict[str, float]:
    """Per file, the share of the task's behaviour words (by stem, each weighted by its rarity among the files) that
    the file holds in any form: a file whose identifiers name what the task describes covers much of it, however
    long it is."""
    groups = behaviour_words(task)
    terms = set().union(*groups.values()) if groups else set()
    df, n_docs = index.doc_freq(terms)
    if not df or n_docs == 0:
        return {}
    wanted = {t for t in df if df[t] <= max(COVER_MAX_SHARE * n_docs, COVER_MIN_FILES)}
    holding = index.files_with(wanted) if wanted else {}
    weight: dict[str, float] = {}
    files_of: dict[str, set[str]] = {}
    for base, forms in groups.items():
        present = [t for t in forms if t in df]
        if not present or any(t not in wanted for t in present):
            continue  # no file has it, or some form of it is common: not a behaviour of any one file
        files = set().union(*(holding.get(t, set()) for t in present))
        if files:
            files_of[base] = files
            weight[base] = math.log(n_docs / len(files)) + 1.0
    total = sum(weight.values())
    cover: dict[str, float] = defaultdict(float)
    for base, files in files_of.items():
        for path in files:
            cover[path] += weight[base] / total
    return dict(cover)
