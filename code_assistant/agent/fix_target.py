"""Where a fix goes: while tests fail, an answer whose every edit is to a test file, a failing test's among them, is
refused — the failing tests say
what the code must do, so the code they call is what changes (a small model "makes the failing test pass" by adding
assertions to it, or by rewriting its call). The refusal is one line for the model that names the code under test:
the files defining what the failures' messages call, the files of their tracebacks, else the files the failing
tests import. A test file the task itself names may be changed; and a run refuses so at most REFUSALS times, after
which a test-only answer goes through (the task may really be about the test, in words the rule cannot read); with
--allow-test-edits it refuses nothing."""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from code_assistant.agent.state import Reproduction
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.verify.runner import TestResult

REFUSALS = 1  # test-only answers refused per run; the next goes through
MAX_NAMED = 3  # files of the code under test named in the refusal
CALLED_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")  # `add(` in "where -1 = add(2, 3)"
PACKAGE_INITS = ("__init__.py", "mod.rs", "index.js", "index.ts")  # a package's face: what it re-exports is named too


def failing_now(baseline: TestResult | None, tested: Sequence[TestResult],
                reproduction: Reproduction | None) -> TestResult | None:
    """The test run whose failures the next edits must fix: the last one tested, else the reproduction test's failing
    run, else the baseline's (None: nothing fails)."""
    reproduced = reproduction.failed if reproduction is not None and reproduction.reproduced else None
    for result in (*reversed(tested), reproduced, baseline):
        if result is not None:
            return None if result.passed or not result.failed_ids else result
    return None


@dataclass
class FixTarget:
    """The rule, with the refusals it made in this run; `allowed`: --allow-test-edits, which lets test edits through
    this rule too."""

    allowed: bool = False
    refused: int = 0

    def refusal(self, ops: Sequence[EditOperation], failing: TestResult | None, task: str,
                index: RepoIndex | None) -> str | None:
        """Why these edits are refused (None: they may be applied): tests fail, every edit changes a test file the
        task does not name, and one of them holds a failing test (a conftest.py or a new test alone is for the
        guardrails to judge)."""
        edited = list(dict.fromkeys(op.file_path for op in ops if op.action != Action.READ))
        deletes = any(op.action == Action.DELETE for op in ops)  # deleting a test: the guardrails' words say more
        if self.allowed or failing is None or self.refused >= REFUSALS or not edited or deletes:
            return None
        failing_files = {f.test_id.split("::")[0] for f in failing.failures} | {f.file for f in failing.failures}
        if not all(is_test_file(path) and not _named(path, task) for path in edited) \
                or failing_files.isdisjoint(edited):
            return None
        self.refused += 1
        code = code_under_test(failing, index)
        change = (f"change the code they test instead ({', '.join(code)}), so that the tests pass as they are written"
                  if code else "change the code they test instead, so that the tests pass as they are written")
        return (f"{', '.join(edited)}: only tests were changed, but the failing tests ({_some(failing.failed_ids)}) "
                f"check the code, not themselves: {change}")


def copied_example(ops: Sequence[EditOperation], index: RepoIndex | None) -> str | None:
    """Why an answer that edits the worked example's file (prompts.EXAMPLE_BLOCKS_FILE), which the repository does
    not have, is refused whole (None: it does not): the example was copied, not a change made for this task (aider's
    model wrote its own example's show_greeting.py into calc-add's tree)."""
    example = prompts.EXAMPLE_BLOCKS_FILE
    if index is None or example in index.files or all(op.file_path != example for op in ops):
        return None
    return f"{example} is the answer format's example, not a file of this repository: change the repository's files"


def code_under_test(failing: TestResult, index: RepoIndex | None) -> list[str]:
    """The non-test files the failing tests exercise, surest first: those defining what the failures' messages and
    failing lines call (`add` of "where -1 = add(2, 3)"), those of their traceback frames, then those the failing test files import
    (through a package's `__init__.py` one step further)."""
    found: list[str] = []
    said = [f.message for f in failing.failures] + ([_line(index, f.file, f.line) for f in failing.failures]
                                                     if index is not None else [])
    called = {name for text in said for name in CALLED_RE.findall(text)}
    if index is not None and called:
        defined = sorted(index.defining(called).values(), key=len)  # a name few files define says more
        found += [p for paths in defined if len(paths) <= MAX_NAMED for p in sorted(paths)]
    found += [path for f in failing.failures for path, _ in f.frames]
    if index is not None:
        imported = _imports(index, {f.test_id.split("::")[0] for f in failing.failures} | {f.file for f in
                                                                                           failing.failures if f.file})
        found += imported
    return [p for p in dict.fromkeys(found) if not is_test_file(p)][:MAX_NAMED]


def _line(index: RepoIndex, path: str | None, number: int | None) -> str:
    """The failing line of a test (its assertion, whose calls pytest names only for some values), "" when unknown."""
    if not path or not number or path not in index.files:
        return ""
    lines = (index.gate.text(path) or "").splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _imports(index: RepoIndex, tests: Iterable[str]) -> list[str]:
    out: list[str] = []
    for test in sorted(tests):
        if test not in index.files:
            continue
        direct = index.db.edges.neighbours(test)[0]
        for path in direct:
            out.append(path)
            if path.rsplit("/", 1)[-1] in PACKAGE_INITS:
                out += index.db.edges.neighbours(path)[0]
    return out


def _named(path: str, task: str) -> bool:
    """The task names this file (its path, or its file name)."""
    return path in task or path.rsplit("/", 1)[-1] in task


def _some(ids: Sequence[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
