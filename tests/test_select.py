"""Narrowing a test command to a reproduction test's files, for the runners whose command line says how."""
from __future__ import annotations

import pytest

from code_assistant.verify.select import narrow


@pytest.mark.parametrize("command, expected", [
    ("pytest", "pytest tests/test_repro.py"),
    ("pytest -q tests/unit", "pytest -q tests/test_repro.py"),
    ("python -m pytest -x -m 'not slow' tests", "python -m pytest -x -m 'not slow' tests/test_repro.py"),
    ("/usr/bin/python3 -m pytest", "/usr/bin/python3 -m pytest tests/test_repro.py"),
    ("npm test", "npm test -- tests/test_repro.py"),
    ("node --test", "node --test tests/test_repro.py"),
])
def test_commands_that_can_be_narrowed(command: str, expected: str) -> None:
    assert narrow(command, ["tests/test_repro.py"]) == expected


def test_go_runs_the_package_of_the_test_file() -> None:
    assert narrow("go test -count=1 ./...", ["calc/calc_repro_test.go"]) == "go test -count=1 ./calc"
    assert narrow("go test ./...", ["repro_test.go"]) == "go test ./."


@pytest.mark.parametrize("command", ["cargo test", "make test", "cd web && npm test", "tox", "npm test -- --ci"])
def test_commands_that_cannot_be_narrowed_say_so(command: str) -> None:
    assert narrow(command, ["tests/test_repro.py"]) is None


def test_a_path_with_spaces_is_quoted() -> None:
    assert narrow("pytest", ["tests/a b/test_x.py"]) == "pytest 'tests/a b/test_x.py'"
