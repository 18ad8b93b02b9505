"""The judge: after the agent stops, the case's hidden tests are applied and its tests run by the product's own test
runner in the product's sandbox; the verdict is what that run shows, whatever the agent said. A test of FAIL_TO_PASS
or PASS_TO_PASS is resolved only when the runner's own report shows it passing (verify/reports.py: an id the report
never names counts as missing, not as passed; a runner with no report leaves every test "not verified", whatever its
output prints); a case that names no test is resolved when its test command exits 0."""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from code_assistant.evaluate.cases import Case
from code_assistant.evaluate.scratch import apply_patch, patch_paths, reset_to_case
from code_assistant.verify.runner import TestCommandError, TestResult, TestRunner
from code_assistant.verify.sandbox import Sandbox

logger = logging.getLogger(__name__)


class Verdict(StrEnum):
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ERROR = "error"  # the case could not be judged: its repository, its test patch or its test command


class TestStatus(StrEnum):
    __test__ = False

    PASSED = "passed"
    FAILED = "failed"
    MISSING = "missing"  # neither seen passing nor failing: not collected, not run, or named otherwise
    UNVERIFIED = "not verified"  # not seen failing, and the runner gave no report to see it passing in


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    tests: dict[str, str] = field(default_factory=dict)  # FAIL_TO_PASS and PASS_TO_PASS ids, each with its status
    summary: str = ""  # the test run in one line ("3 passed, 1 failed"), or why there was none
    seconds: float = 0.0


def judge(case: Case, repo: Path, sandbox: Sandbox, *, timeout: float) -> Judgement:
    """The case judged on `repo` as the agent left it: the test patch applied, then its tests run once."""
    start = time.monotonic()
    if case.test_patch and (reset := reset_to_case(repo, patch_paths(case.test_patch))):
        logger.info("%s: reset to the case's commit before the test patch: %s", case.id, ", ".join(reset))
    if case.test_patch and (why := apply_patch(repo, case.test_patch)):
        return Judgement(Verdict.ERROR, summary=f"the test patch does not apply: {why}",
                         seconds=time.monotonic() - start)
    if absent := not_in_tree([*case.fail_to_pass, *case.pass_to_pass], repo):
        logger.warning("%s: %d named test(s) name no test in the tree, before the run: %s", case.id, len(absent),
                       ", ".join(absent))
    runner = TestRunner(case.judged_by, cwd=repo, timeout=timeout, sandbox=sandbox)
    try:
        result = runner.run()
    except TestCommandError as exc:
        return Judgement(Verdict.ERROR, summary=str(exc), seconds=time.monotonic() - start)
    tests = statuses([*case.fail_to_pass, *case.pass_to_pass], result)
    summary = result.not_run.describe() if result.not_run else result.summary()
    if result.unverified and any(status == TestStatus.UNVERIFIED for status in tests.values()):
        summary += f"; not verified: {result.unverified}"
    if missing := unmatched(tests):
        logger.warning("%s: %d named test(s) match no test the run showed: %s", case.id, len(missing),
                       ", ".join(missing))
        summary += f"; {len(missing)} named test{'' if len(missing) == 1 else 's'} matched nothing: " \
                   + ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return Judgement(verdict_of(case, tests, result), tests=tests, summary=summary, seconds=time.monotonic() - start)


def statuses(ids: list[str], result: TestResult) -> dict[str, str]:
    """Each test id as the run shows it: passed (in the runner's report), failed, missing, or not verified (no
    report)."""
    found: dict[str, str] = {}
    for test_id in ids:
        if any(names(test_id, failed) for failed in result.failed_ids):
            found[test_id] = TestStatus.FAILED
        elif any(names(test_id, passed) for passed in result.passes):
            found[test_id] = TestStatus.PASSED
        elif result.unverified:
            found[test_id] = TestStatus.UNVERIFIED
        else:
            found[test_id] = TestStatus.MISSING
    return found


_GO_TEST = re.compile(r"(?:^|\.)((?:Test|Benchmark|Example|Fuzz)[^./]*(?:/.*)?)$")


def names(test_id: str, name: str) -> bool:
    """Whether `name`, a test as the runner names it, is the case's `test_id` or one of its parts, as case files write
    ids: pytest's `path::Class::test` (and each of its parametrized `[…]` cases), a module or a class for all it holds,
    unittest's dotted ids, go's `pkg.TestX` and its subtests `pkg.TestX/case`; a bare `TestX` (SWE-bench Multilingual
    writes Go's so) names `TestX` of any package."""
    if name == test_id or name.startswith((test_id + "::", test_id + ".", test_id + "/", test_id + "[")):
        return True
    bare, run = _GO_TEST.fullmatch(test_id), _GO_TEST.search(name)
    return bool(bare and bare.start(1) == 0 and run and (run.group(1) == test_id
                                                          or run.group(1).startswith(test_id + "/")))


def not_in_tree(ids: list[str], repo: Path) -> list[str]:
    """The ids that can be seen, before any run, to name no test in the tree: a pytest id whose file is not there or
    does not define its test, a Go test no `_test.go` file defines. Ids of other forms are not checked here."""
    go_sources: str | None = None
    absent: list[str] = []
    for test_id in ids:
        if "::" in test_id:
            path, *_, name = test_id.split("[", 1)[0].split("::")
            file = repo / path
            if not file.is_file() or not re.search(rf"\bdef {re.escape(name)}\b", file.read_text(errors="replace")):
                absent.append(test_id)
        elif go := _GO_TEST.search(test_id):
            if go_sources is None:
                go_sources = "\n".join(p.read_text(errors="replace") for p in sorted(repo.rglob("*_test.go"))
                                       if ".git" not in p.parts)
            if not re.search(rf"^func {re.escape(go.group(1).split('/')[0])}\(", go_sources, re.MULTILINE):
                absent.append(test_id)
    return absent


def unmatched(tests: dict[str, str]) -> list[str]:
    """The named tests the run never showed, passing or failing: an id written otherwise than the runner names it, or
    a test that is not collected."""
    return [test_id for test_id, status in tests.items() if status == TestStatus.MISSING]


def verdict_of(case: Case, tests: dict[str, str], result: TestResult) -> Verdict:
    """Resolved: every named test seen passing; with none named, the test command green. Tests that never ran for a
    reason outside the repository (a missing runner, no network) leave the case unjudged."""
    if result.not_run is not None:
        return Verdict.ERROR
    if result.timed_out:
        return Verdict.UNRESOLVED
    if not case.fail_to_pass and not case.pass_to_pass:
        return Verdict.RESOLVED if result.passed else Verdict.UNRESOLVED
    return Verdict.RESOLVED if all(status == TestStatus.PASSED for status in tests.values()) else Verdict.UNRESOLVED
