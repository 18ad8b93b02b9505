"""What the model is told about a failing test run (agent/feedback.py), from real pytest runs: once the failures are
read, each with its message and frames, only the runner's last lines of raw output follow (they repeat the rest, and
on a CPU every prompt token is seconds); with nothing read, the whole tail is all the model has."""
from __future__ import annotations

import sys
from pathlib import Path

from code_assistant.agent.feedback import OUTPUT_TAIL_CHARS, PARSED_TAIL_CHARS, failure_text
from code_assistant.verify.runner import TestRunner

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
NOISY_TESTS = "".join(f"""
def test_{n}():
    import warnings
    warnings.warn("deprecated thing number {n} " * 8, DeprecationWarning)
    assert {n} == -{n}, "value {n} is wrong"
""" for n in range(1, 30))


def test_read_failures_come_with_only_the_runners_last_lines(tmp_path: Path) -> None:
    (tmp_path / "test_noisy.py").write_text(NOISY_TESTS)
    result = TestRunner(PYTEST, cwd=tmp_path).run()
    assert len(result.failures) == 29 and len(result.output) > 3 * OUTPUT_TAIL_CHARS
    text = failure_text(result)
    assert "- test_noisy.py::test_7 [failed]" in text and "value 7 is wrong" in text  # each failure, read
    tail = text.split("Test output (tail):\n```\n", 1)[1]
    assert len(tail) <= PARSED_TAIL_CHARS + 10 and "29 failed" in tail  # the summary line is kept


def test_output_nothing_could_be_read_from_keeps_its_whole_tail(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text("import sys\nfor n in range(2000):\n    print('line of output', n)\n"
                                       "sys.exit('it broke here')\n")
    result = TestRunner([sys.executable, "check.py"], cwd=tmp_path).run()
    assert not result.failures and not result.passed
    text = failure_text(result)
    assert len(text) > OUTPUT_TAIL_CHARS - 100 and text.rstrip("`\n").endswith("it broke here")
