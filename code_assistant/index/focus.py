"""The files a task's first answer needs on a big tree not indexed yet: one `git grep` of the task's words.

Parsing every file of a 30k-file tree costs about a minute on two cores (tree-sitter, BM25 terms and their rows),
where one `git grep` of the same tree takes a second or two. So the first run on such a tree (`Indexer.update` with a
focus) indexes only the files this scan ranks highest for the task, answers from them, and leaves the rest pending
for later runs and `index` (see docs/indexing.md). The scan is BM25 over what it found: each of the task's words
counted in each file (case-insensitive, as a substring, so `rename` counts in `onRename`), the file's size standing
in for its length, and the words of its path counted as the index counts them. It runs beside the listing of the
tree (`Scan` starts git, `counts` waits for it), or from the start of a task run (`start_ahead`: scan_ahead in
indexer.py), beside the run's checks, its model and its sandbox.
"""
from __future__ import annotations

import logging
import subprocess
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from code_assistant.index import lexical
from code_assistant.vcs import started_git

logger = logging.getLogger(__name__)

MIN_TERM_LENGTH = 3  # shorter words match inside most identifiers: they would only make the scan's output long
MAX_TERMS = 24  # a task of a page is cut to its rarest-looking words (the longest: a cheap stand-in for rarity)
PATH_WEIGHT = 2  # a word of a file's path counts as this many mentions, as lexical.path_tokens repeats a file's stem
SCAN_TIMEOUT_S = 120.0
# git's configuration could change what `git grep` prints (line numbers, columns, colours, full names): not here
_PLAIN_OUTPUT = ("-c", "grep.lineNumber=false", "-c", "grep.column=false", "-c", "grep.fullName=false",
                 "-c", "color.grep=never")
# PCRE's JIT is the fastest here (a 48k-file tree: 1.9 s against 2.8 s for POSIX extended, and 11 s for one fixed
# string per word); a git built without PCRE refuses -P, and the scan runs again with -E
_SYNTAXES = ("-P", "-E")


def task_terms(task: str) -> list[str]:
    """The task's words the scan looks for, longest first: the index's tokens of it, without stopwords and short
    words."""
    words = sorted({t for t in lexical.tokenize(task) if len(t) >= MIN_TERM_LENGTH and not t.isdigit()},
                   key=lambda t: (-len(t), t))
    return words[:MAX_TERMS]


class Scan:
    """One `git grep -o` of the task's words over the tree (tracked and untracked files, not ignored ones, text
    only), started at once and read as it prints (a thread of its own: git would stop at a full pipe, so it reads the
    tree while the caller lists it); `counts` waits for it, `cancel` stops it."""

    def __init__(self, repo: Path, task: str) -> None:
        self.repo = repo
        self.terms = task_terms(task)
        self._proc: subprocess.Popen[str] | None = None
        self._found: dict[str, Counter[str]] | None = None
        self._cancelled = False
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        if self.terms:
            self._reader = threading.Thread(target=self._read, name="focus-scan", daemon=True)
            self._reader.start()

    def _read(self) -> None:
        """git grep with each syntax in turn until one answers (a git without PCRE refuses -P)."""
        alternatives = "(?:" + "|".join(self.terms) + ")"  # words of [A-Za-z0-9_]: nothing to escape
        for syntax in _SYNTAXES:
            with self._lock:
                if self._cancelled:
                    return
                self._proc = started_git(self.repo, *_PLAIN_OUTPUT, "grep", "--untracked", "-I", "-i", syntax, "-o",
                                         "-z", "--no-color", "-e", alternatives)
            if self._proc is None:
                return
            try:
                out, err = self._proc.communicate(timeout=SCAN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.cancel()
                return
            if self._proc.returncode == 1 and not err.strip():  # nothing found
                self._found = {}
                return
            if self._proc.returncode == 0:
                self._found = _counted(out)
                return
            logger.debug("git grep %s: %s", syntax, err.strip()[-200:])

    def counts(self) -> dict[str, Counter[str]] | None:
        """Path -> how often each word occurs in it; None when git cannot answer (not a repository, no git, an
        error, too slow)."""
        if not self.terms:
            return {}
        if self._reader is not None:
            self._reader.join()
        return self._found

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()


_ahead: dict[tuple[Path, str], Scan] = {}  # scans started before the update that takes them (start_ahead)


def start_ahead(repo: Path, task: str) -> None:
    """Start the task's scan of repo now, for the update with that task to take (`taken`) instead of starting its
    own: git reads the tree while the process does other work first. Ended by `cancel_ahead` if none takes it."""
    key = (repo.resolve(), task)
    if key not in _ahead:
        _ahead[key] = Scan(repo, task)


def taken(repo: Path, task: str) -> Scan:
    """The scan of repo for task started ahead, else one started now."""
    return _ahead.pop((repo.resolve(), task), None) or Scan(repo, task)


def cancel_ahead() -> None:
    """Stop the scans started ahead that no update took."""
    while _ahead:
        _ahead.popitem()[1].cancel()


def _counted(out: str) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for line in out.splitlines():
        path, _, match = line.partition("\0")
        if match:
            counts.setdefault(path, Counter())[match.lower()] += 1
    return counts


def rank_files(scan: Scan, sizes: Mapping[str, int], limit: int) -> list[str] | None:
    """The `limit` files of `sizes` (the indexable paths, with their sizes in bytes) the scan ranks highest for its
    task, best first; None when the scan cannot run (the caller indexes everything instead)."""
    found = scan.counts()
    if found is None:
        return None
    tf: dict[str, Counter[str]] = {path: counts for path, counts in found.items() if path in sizes}
    for path in sizes:
        lowered = path.lower()
        for term in scan.terms:
            if term in lowered:
                tf.setdefault(path, Counter())[term] += PATH_WEIGHT
    n_docs = len(sizes)
    doc_freq = Counter(term for counts in tf.values() for term in counts)
    avg_size = max(sum(sizes.values()) / max(n_docs, 1), 1.0)
    idf = {term: lexical.bm25_idf(df, n_docs) for term, df in doc_freq.items()}

    def score(path: str) -> float:
        size = max(sizes[path], 1)
        return sum(idf[term] * lexical.bm25_tf(n, size, avg_size) for term, n in tf[path].items())

    ranked = sorted(tf, key=lambda path: (-score(path), path))
    logger.debug("focus scan: %d words, %d of %d files hold one; keeping %d", len(scan.terms), len(tf), n_docs,
                 min(limit, len(ranked)))
    return ranked[:limit]
