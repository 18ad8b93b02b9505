"""The localization benchmark's BM25 baseline: whole non-test files of the task's language (path + content),
identifier-aware tokens.

Self-contained: it does not use the assistant's own tokenizer or lexical index.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

import bm25s

STOPWORDS = set(
    "a an and are as at be been but by can could do does for from has have he how i if in into is it its me my no "
    "not of on or our should so such that the their then there these they this to was we were what when where which "
    "while who will with would you your also just like use using used get got".split()
)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
WORD_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


# The languages of the benchmark sets: an instance's `language` and the extensions of its files. A declaration file
# (`.d.ts`) is a type description, not the code a fix goes to: it is of no language here.
LANGUAGE_EXTS = {"py": (".py",), "js": (".js", ".jsx", ".mjs", ".cjs"), "ts": (".ts", ".tsx", ".mts", ".cts"),
                 "go": (".go",), "rs": (".rs",)}
_OTHER_TEST_DIRS = {"test", "tests", "__tests__", "spec", "testdata"}
_OTHER_TEST_NAME = re.compile(r".+_test\.go$|.+\.(test|spec)\.[cm]?[jt]sx?$")


def language_of(path: str) -> str | None:
    """py | js | ts | go | rs by extension; None for anything else, declaration files included."""
    if path.endswith((".d.ts", ".d.mts", ".d.cts")):
        return None
    return next((lang for lang, exts in LANGUAGE_EXTS.items() if path.endswith(exts)), None)


def is_test_path(path: str) -> bool:
    """A test file: for Python files the rule of the SWE-bench sets (test/ or tests/ directories, test_*.py,
    *_test.py, conftest.py); for every other file the rule of multilang_dev.md (under test/, tests/, __tests__/,
    spec/ or testdata/, or named *_test.go, *.test.js|ts, *.spec.js|ts)."""
    parts = path.split("/")
    name = parts[-1]
    if name.endswith(".py"):
        return (
            any(p in ("test", "tests") for p in parts[:-1])
            or name.startswith("test_")
            or name.endswith("_test.py")
            or name == "conftest.py"
        )
    return any(p in _OTHER_TEST_DIRS for p in parts[:-1]) or bool(_OTHER_TEST_NAME.match(name))


def tokenize(text: str) -> list[str]:
    """Lowercased identifiers, kept whole and also split on snake_case / camelCase boundaries."""
    tokens = []
    for match in IDENT.finditer(text):
        word = match.group()
        low = word.lower()
        if len(low) > 1 and low not in STOPWORDS:
            tokens.append(low)
        parts = [p.lower() for p in WORD_PART.findall(word)]
        if len(parts) > 1:
            tokens.extend(p for p in parts if len(p) > 1 and p not in STOPWORDS)
    return tokens


def read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def source_files(repo: Path, language: str | Collection[str] = "py") -> dict[str, str]:
    """Non-test text files of the language, or of any of several (LANGUAGE_EXTS; declaration files are of none):
    repo-relative path -> content."""
    languages = {language} if isinstance(language, str) else set(language)
    docs = {}
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            rel = (Path(root) / name).relative_to(repo).as_posix()
            if language_of(rel) not in languages or is_test_path(rel):
                continue
            text = read_text(repo / rel)
            if text is not None:
                docs[rel] = text
    return docs


def bm25_rank(docs: dict[str, str], query: str) -> list[str]:
    """All documents ranked best first (ties broken by path); documents scoring 0 come last."""
    paths = list(docs)
    retriever = bm25s.BM25()
    retriever.index([tokenize(p) + tokenize(docs[p]) for p in paths], show_progress=False)
    query_tokens = [t for t in tokenize(query) if t in retriever.vocab_dict]
    scores = retriever.get_scores(query_tokens) if query_tokens else [0.0] * len(paths)
    order = sorted(range(len(paths)), key=lambda i: (-float(scores[i]), paths[i]))
    return [paths[i] for i in order]
