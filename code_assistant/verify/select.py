"""Narrow the user's test command to some test files, for the runners whose command line says how.

Used to run a reproduction test alone. A command this module cannot narrow (a custom script, `cargo test`, a shell
pipeline) returns None: the caller then runs the whole suite and tells the new test's failures by their file.
"""
from __future__ import annotations

import posixpath
import shlex

_PYTEST = ("pytest", "py.test")


def narrow(command: str, paths: list[str]) -> str | None:
    """The command restricted to `paths` (repository-relative test files), or None when it cannot be done safely."""
    if not paths:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or any(w in ("&&", "||", "|", ";") for w in words):
        return None
    quoted = [shlex.quote(p) for p in paths]
    head = words[0].rsplit("/", 1)[-1]
    if head in _PYTEST or (head.startswith("python") and words[1:3] == ["-m", "pytest"]):
        return shlex.join(_without_path_arguments(words)) + " " + " ".join(quoted)
    if head == "go" and words[1:2] == ["test"]:
        packages = sorted({"./" + (posixpath.dirname(p) or ".") for p in paths})
        flags = [w for w in words[2:] if w.startswith("-")]
        return shlex.join(["go", "test", *flags, *packages])
    if head == "node" and "--test" in words:
        return shlex.join([w for w in words if w.startswith("-") or w == words[0]]) + " " + " ".join(quoted)
    if head == "npm" and words[1:2] in (["test"], ["t"]) and "--" not in words:
        return shlex.join(words) + " -- " + " ".join(quoted)
    return None


def _without_path_arguments(words: list[str]) -> list[str]:
    """pytest's own options without the test paths the user gave (`pytest tests/unit -q` -> `pytest -q`)."""
    takes_value = {"-k", "-m", "-p", "-c", "-o", "--rootdir", "--confcutdir", "--maxfail", "--tb", "-W"}
    kept: list[str] = []
    value_next = False
    for i, word in enumerate(words):
        if i == 0 or value_next or word.startswith("-"):  # (`python -m pytest`: pytest is -m's value)
            kept.append(word)
            value_next = word in takes_value
        # else: a test path or node id the user gave; the files asked for take its place
    return kept
