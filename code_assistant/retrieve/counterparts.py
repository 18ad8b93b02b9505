"""Test counterparts: for a source file the tests that exercise it, for a test the sources it tests, found by the
naming conventions of each language (test_x.py, x_test.go, x.test.ts, XTest.java, tests/x.rs, ...)."""
from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from functools import lru_cache

from code_assistant.languages import TEST_DIRS, is_test_file

_FAMILY = {".py": "py", ".pyi": "py", ".js": "js", ".jsx": "js", ".ts": "js", ".tsx": "js", ".mjs": "js",
           ".cjs": "js", ".mts": "js", ".cts": "js", ".go": "go", ".java": "jvm", ".kt": "jvm", ".rs": "rs",
           ".rb": "rb", ".php": "php", ".cs": "cs", ".ex": "ex", ".exs": "ex"}


def _subject(path: str) -> tuple[str, str] | None:
    """(language family, stem of the code under test) for a test file, or of the file itself."""
    name = posixpath.basename(path)
    ext = ".d.ts" if name.endswith(".d.ts") else posixpath.splitext(name)[1]
    family = _FAMILY.get(ext)
    if family is None:
        return None
    stem = name[: -len(ext)]
    stem = re.sub(r"^test_|_test$|_spec$|\.(test|spec)$|(?<=\w)(Tests?|IT)$", "", stem)
    return family, stem.lower()


@lru_cache(maxsize=8)
def _subject_index(files: frozenset[str]) -> dict[tuple[str, str], list[str]]:
    index: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in sorted(files):
        key = _subject(f)
        if key is not None and key[1] not in ("__init__", "index", "mod", "conftest", "main", "lib"):
            index[key].append(f)
    return index


def _closeness(a: str, b: str) -> int:
    pa, pb = a.split("/")[:-1], b.split("/")[:-1]
    common = next((i for i, (x, y) in enumerate(zip(pa, pb)) if x != y), min(len(pa), len(pb)))
    shared = len(set(pa) & set(pb) - TEST_DIRS - {"src", "main", "java"})
    return -(common * 2 + shared) + (len(pa) + len(pb) - 2 * common)


def counterparts(path: str, files: set[str]) -> list[str]:
    """For a source file its tests, for a test file its sources: same language family, same stem by convention
    (test_x.py, x_test.py, tests/**/x.py, x.test.ts, x.spec.js, __tests__/x.js, x_test.go, XTest(s).java,
    Rust tests/x.rs), nearest paths first."""
    key = _subject(path)
    if key is None:
        return []
    want_tests = not is_test_file(path)
    matches = [f for f in _subject_index(frozenset(files)).get(key, []) if f != path and is_test_file(f) == want_tests]
    return sorted(matches, key=lambda f: (_closeness(path, f), f))


def nearest_test(path: str, files: set[str]) -> str | None:
    """The test that goes with a source file, shown beside it: its nearest counterpart that lives where the
    language keeps that file's tests - for Go in its package (the same directory; when no test there has its stem,
    the package's test whose name shares the longest start with it); elsewhere in its own directory or under a test
    directory that branches off a directory it shares (`tests/` at the root, `pkg/tests/`, `src/__tests__/`), not in
    another package of a monorepo that happens to have a file of the same stem."""
    directory = posixpath.dirname(path)
    if path.endswith(".go"):
        mates = [f for f in files if posixpath.dirname(f) == directory and f.endswith("_test.go")]
        stem = posixpath.basename(path)[:-3]
        same = [f for f in mates if posixpath.basename(f) == f"{stem}_test.go"]
        if same or not mates:
            return same[0] if same else None
        return min(mates, key=lambda f: (-len(posixpath.commonprefix([posixpath.basename(f), stem])), len(f), f))
    for test in counterparts(path, files):
        mine, theirs = directory.split("/") if directory else [], test.split("/")[:-1]
        shared = len(posixpath.commonprefix([mine, theirs]))
        rest = theirs[shared:]
        if not rest or rest[0] in TEST_DIRS:
            return test
    return None
