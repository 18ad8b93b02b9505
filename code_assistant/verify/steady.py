"""A command's output as the model is shown it: the same text for the same run, wherever and whenever it ran.

Two runs of one task, in two scratch copies, asked the model two different prompts at temperature 0 (bench/replay.py
showed where): the runner's timings (pytest's `in 0.60s`) and paths that climb out of the repository
(`../../../../root/.pyenv/...`, as deep as the copy's folder) differ from run to run, and a prompt one token
different is a different answer from a small model. Here the repository's own path becomes repo-relative, a path
climbing out of it is written absolute, and the timings the usual runners print are left out. Only what the model
is shown: the person sees the output as it came, and the counts are read from it before this.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

# The time a run took, as the usual runners print it: (the line, what is kept of it).
_SECONDS = r"\d+(?:\.\d+)?\s?(?:ms|s)"
_TIMINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    # pytest's last line: "1 failed, 1 passed, 1 warning in 0.60s" or "=== 2 passed in 1.02s (0:00:01) ==="
    (re.compile(r"^(.*\b(?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|no tests ran)) in "
                r"\d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?=( =+)?$)", re.MULTILINE), r"\1"),
    # unittest: "Ran 3 tests in 0.001s"
    (re.compile(r"^(Ran \d+ tests?) in \d+(?:\.\d+)?s$", re.MULTILINE), r"\1"),
    # go test: "--- FAIL: TestAdd (0.00s)", "FAIL\texample.com/calc\t0.003s", "ok  \texample.com/calc\t0.002s"
    (re.compile(r"^(\s*--- (?:FAIL|PASS|SKIP): \S+) \(\d+(?:\.\d+)?s\)$", re.MULTILINE), r"\1"),
    (re.compile(r"^((?:ok|FAIL)\s+\S+)\s+\d+(?:\.\d+)?s$", re.MULTILINE), r"\1"),
    # node --test: "✖ adds (1.2345ms)", "ℹ duration_ms 45.6", TAP's "# duration_ms 45.6" and "  duration_ms: 0.52"
    (re.compile(r"^(.*\S) \(" + _SECONDS + r"\)$", re.MULTILINE), r"\1"),
    (re.compile(r"^\s*(?:[ℹ#]\s*)?duration_ms:? [\d.]+\n", re.MULTILINE), ""),
    # jest: "Time:        0.512 s", "Time:        1.2 s, estimated 2 s"
    (re.compile(r"^Time:\s+" + _SECONDS + r"(?:, estimated " + _SECONDS + r")?\n", re.MULTILINE), ""),
    # cargo test: "test result: FAILED. 0 passed; 1 failed; ...; finished in 0.00s"
    (re.compile(r"^(test result: .*); finished in " + _SECONDS + r"$", re.MULTILINE), r"\1"),
    # mocha: "  2 passing (8ms)"
    (re.compile(r"^(\s*\d+ (?:passing|failing|pending)) \(" + _SECONDS + r"\)$", re.MULTILINE), r"\1"),
)
_CLIMBING = re.compile(r"(?<![\w./~-])((?:\.\./)+)(?=[\w.~-])([^\s:'\"()\[\],]*)")


def steady_output(text: str, root: Path | None = None) -> str:
    """`text` with the repository's path (root) made relative, paths climbing out of it made absolute, and the
    runners' timings left out."""
    for pattern, kept in _TIMINGS:
        text = pattern.sub(kept, text)
    if root is None:
        return text
    roots = sorted({str(root), str(root.resolve())} - {"/"}, key=len, reverse=True)  # a tree at / stays absolute
    for place in roots:
        text = re.sub(re.escape(place) + r"(/|(?![\w.-]))", lambda m: "" if m.group(1) else ".", text)
    base = str(root.resolve())

    def absolute(match: re.Match[str]) -> str:
        target = os.path.normpath(os.path.join(base, match.group(1) + match.group(2)))
        inside = target == base or target.startswith(base + os.sep)
        return match.group(0) if inside else target

    return _CLIMBING.sub(absolute, text)
