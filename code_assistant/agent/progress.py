"""How a run is going, in words for the person: each tested iteration's counts with the failing tests named and what
changed since the test run before it (the tests it fixed, the ones it broke), and which iteration came closest when
the run ends without green. Pure functions over test results."""
from __future__ import annotations

from collections.abc import Sequence

from code_assistant.verify.passes import seen_passing
from code_assistant.verify.runner import TestResult

SHOWN = 3  # failing tests named in a line; the rest counted


def short(test_id: str) -> str:
    """A test's name as a person reads it: `test_total` for `tests/test_cart.py::test_total`."""
    return test_id.rsplit("::", 1)[-1] if "::" in test_id else test_id


def names(ids: Sequence[str]) -> str:
    shown = ", ".join(short(i) for i in ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def failing(result: TestResult) -> float:
    """How far from green a test run is: its failing tests (a run that timed out, or failed without a count or a
    failing test named, is farthest)."""
    if result.passed:
        return 0
    if result.timed_out:
        return float("inf")
    count = result.failed_count if result.failed_count is not None else len(result.failures)
    return count + result.lost if count or result.lost else float("inf")


def counts(result: TestResult) -> str:
    """`1 failed (test_total), 5 passed`: the counts, the failing tests named; the summary when there are none."""
    if result.timed_out:
        return result.summary()
    failed = result.failed_count if result.failed_count is not None else len(result.failures)
    parts = [f"{failed} failed" + (f" ({names(result.failed_ids)})" if result.failed_ids else "")] if failed else []
    if result.passed_count is not None:
        parts.append(f"{result.passed_count} passed")
    if result.lost:
        parts.append(f"{result.lost} no longer run")
    return ", ".join(parts) if parts and (failed or result.passed or result.lost) else result.summary()


def changes(before: TestResult, after: TestResult) -> str:
    """What a change did to the tests, from the run before it: `fixed test_discount; broke test_no_discount` (""
    when neither shows: a test broken is one seen passing before)."""
    if after.timed_out:
        return ""
    now = set(after.failed_ids)
    fixed = [i for i in before.failed_ids if i not in now] if not before.timed_out else []
    broke = [i for i in after.failed_ids if seen_passing(i, before.passes or before.printed)]  # a hint, no verdict
    return "; ".join(words for words in (f"fixed {names(fixed)}" if fixed else "",
                                         f"broke {names(broke)}" if broke else "") if words)


def iteration_line(iteration: int, result: TestResult, before: TestResult) -> str:
    """`[Iteration 2: 1 failed (test_total), 5 passed — fixed test_discount; broke test_no_discount]`."""
    changed = changes(before, result)
    return f"[Iteration {iteration}: {counts(result)}{' — ' + changed if changed else ''}]"


def best(tested: Sequence[tuple[int, TestResult]]) -> tuple[int, TestResult] | None:
    """The tested iteration closest to green (the earliest of equals); None when none was tested."""
    return min(tested, key=lambda item: (failing(item[1]), item[0])) if tested else None
