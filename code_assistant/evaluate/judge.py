"""The judge: after the agent stops, the case's hidden tests are applied and its tests run by the product's own test
runner in the product's sandbox; the verdict is what that run shows, whatever the agent said. A test of FAIL_TO_PASS
or PASS_TO_PASS is resolved only when the output shows it passing (an id the runner never names counts as missing,
not as passed); a case that names no test is resolved when its test command exits 0."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from code_assistant.evaluate.cases import Case
from code_assistant.evaluate.scratch import apply_patch
from code_assistant.verify.passes import seen_passing
from code_assistant.verify.runner import TestCommandError, TestResult, TestRunner
from code_assistant.verify.sandbox import Sandbox


class Verdict(StrEnum):
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ERROR = "error"  # the case could not be judged: its repository, its test patch or its test command


class TestStatus(StrEnum):
    __test__ = False

    PASSED = "passed"
    FAILED = "failed"
    MISSING = "missing"  # neither seen passing nor failing: not collected, not run, or named otherwise


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    tests: dict[str, str] = field(default_factory=dict)  # FAIL_TO_PASS and PASS_TO_PASS ids, each with its status
    summary: str = ""  # the test run in one line ("3 passed, 1 failed"), or why there was none
    seconds: float = 0.0


def judge(case: Case, repo: Path, sandbox: Sandbox, *, timeout: float) -> Judgement:
    """The case judged on `repo` as the agent left it: the test patch applied, then its tests run once."""
    start = time.monotonic()
    if case.test_patch and (why := apply_patch(repo, case.test_patch)):
        return Judgement(Verdict.ERROR, summary=f"the test patch does not apply: {why}",
                         seconds=time.monotonic() - start)
    runner = TestRunner(case.judged_by, cwd=repo, timeout=timeout, sandbox=sandbox)
    try:
        result = runner.run()
    except TestCommandError as exc:
        return Judgement(Verdict.ERROR, summary=str(exc), seconds=time.monotonic() - start)
    tests = statuses([*case.fail_to_pass, *case.pass_to_pass], result)
    summary = result.not_run.describe() if result.not_run else result.summary()
    return Judgement(decide(case, tests, result), tests=tests, summary=summary, seconds=time.monotonic() - start)


def statuses(ids: list[str], result: TestResult) -> dict[str, str]:
    """Each test id as the run shows it: passed, failed, or missing."""
    failed = set(result.failed_ids)
    found: dict[str, str] = {}
    for test_id in ids:
        if test_id in failed or any(f.startswith((test_id + "::", test_id + ".")) for f in failed):
            found[test_id] = TestStatus.FAILED
        elif seen_passing(test_id, result.passes):
            found[test_id] = TestStatus.PASSED
        else:
            found[test_id] = TestStatus.MISSING
    return found


def decide(case: Case, tests: dict[str, str], result: TestResult) -> Verdict:
    """Resolved: every named test seen passing; with none named, the test command green. Tests that never ran for a
    reason outside the repository (a missing runner, no network) leave the case unjudged."""
    if result.not_run is not None:
        return Verdict.ERROR
    if result.timed_out:
        return Verdict.UNRESOLVED
    if not case.fail_to_pass and not case.pass_to_pass:
        return Verdict.RESOLVED if result.passed else Verdict.UNRESOLVED
    return Verdict.RESOLVED if all(status == TestStatus.PASSED for status in tests.values()) else Verdict.UNRESOLVED
