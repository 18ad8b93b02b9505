"""What a person is told of each iteration's tests and of the iteration that came closest (agent/progress.py): pure
functions over test results."""
from __future__ import annotations

from code_assistant.agent.progress import best, counts, iteration_line
from code_assistant.verify.outputs import TestFailure
from code_assistant.verify.runner import TestResult


def ran(passed: int, *failing: str, seen: tuple[str, ...] = (), timed_out: bool = False) -> TestResult:
    return TestResult(command=["pytest"], exit_code=None if timed_out else 1 if failing else 0,
                      passed=not failing and not timed_out, timed_out=timed_out, output="", duration_s=0.1,
                      failures=[TestFailure(test_id=f"tests/test_cart.py::{f}") for f in failing], passed_count=passed,
                      failed_count=len(failing), timeout_s=60,
                      passes=frozenset(f"tests/test_cart.py::{s}" for s in seen))


BASELINE = ran(4, "test_discount", "test_total", seen=("test_no_discount", "test_empty", "test_tax", "test_sum"))


def test_an_iteration_names_its_failing_tests_and_what_it_fixed_and_broke() -> None:
    second = ran(5, "test_total", seen=("test_discount", "test_no_discount", "test_empty", "test_tax", "test_sum"))
    assert iteration_line(2, second, BASELINE) == "[Iteration 2: 1 failed (test_total), 5 passed — fixed test_discount]"
    third = ran(4, "test_total", "test_no_discount", seen=("test_discount", "test_empty", "test_tax", "test_sum"))
    assert iteration_line(3, third, second) == "[Iteration 3: 2 failed (test_total, test_no_discount), 4 passed — " \
                                               "broke test_no_discount]"
    assert iteration_line(1, BASELINE, BASELINE) == "[Iteration 1: 2 failed (test_discount, test_total), 4 passed]"


def test_a_timeout_and_many_failures_are_said_in_short() -> None:
    assert iteration_line(1, ran(0, timed_out=True), BASELINE) == "[Iteration 1: timed out after 60s]"
    many = ran(0, "a", "b", "c", "d", "e")
    assert counts(many) == "5 failed (a, b, c and 2 more), 0 passed"


def test_the_closest_iteration_has_the_fewest_failing_tests_the_earliest_of_equals() -> None:
    one, two = ran(5, "test_total"), ran(4, "test_total", "test_tax")
    assert best([(1, two), (2, one), (3, ran(5, "test_sum"))]) == (2, one)
    assert best([(1, ran(0, timed_out=True)), (2, two)]) == (2, two)
    assert best([]) is None
