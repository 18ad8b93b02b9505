"""Pure parsers for test-runner output: detect the runner, then pull out failures and counts.

Supported: pytest, unittest, go test, node --test (TAP and spec reporters), Jest, Mocha, cargo test.
An unknown runner yields no failures; the caller then shows the head and tail of the raw output.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from code_assistant.verify.manifests import python_install_fix
from code_assistant.verify.outputs_common import (
    MAX_FRAMES,
    MAX_MESSAGE_CHARS,
    FailureStatus,
    NotRun,
    NotRunCause,
    ParsedOutput,
    TestFailure,
    clean_frames,
    finish,
    repo_path,
    shell_not_run,
    trim_message,
)
from code_assistant.verify.outputs_js import npm_not_run, parse_jest, parse_mocha, parse_node
from code_assistant.verify.outputs_native import cargo_not_run, go_not_run, parse_cargo, parse_go

logger = logging.getLogger(__name__)
__all__ = ["MAX_FRAMES", "MAX_MESSAGE_CHARS", "FailureStatus", "NotRun", "NotRunCause", "ParsedOutput", "TestFailure",
           "clean_frames", "detect_runner", "never_ran", "parse_cargo", "parse_go", "parse_jest", "parse_mocha",
           "parse_node", "parse_pytest", "parse_test_output", "parse_unittest", "python_not_run", "repo_path",
           "strip_ansi", "trim_message"]

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_PY_FRAME = re.compile(r'File "(.+?)", line (\d+)')


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


# ---------------------------------------------------------------- detection

_OUTPUT_SIGNS: list[tuple[str, re.Pattern[str]]] = [
    ("node", re.compile(r"^TAP version \d+$|^# Subtest: |^ℹ (?:tests|pass|fail) \d+$", re.M)),
    ("jest", re.compile(r"^Tests:\s+.*\d+ total$|^  ● .+ › ", re.M)),
    ("mocha", re.compile(r"^\s+\d+ passing \(\d+m?s\)$|^\s*Exception during run: ", re.M)),
    ("cargo", re.compile(r"^test result: (?:ok|FAILED)\. \d+ passed", re.M)),
    ("pytest", re.compile(r"^=+ (?:test session starts|short test summary info) =+$|^(?:FAILED|ERROR) \S+::", re.M)),
    ("unittest", re.compile(r"^Ran \d+ tests? in [\d.]+s$", re.M)),
    ("go", re.compile(r"^--- FAIL: |^(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[build failed\])|^=== RUN ", re.M)),
]


def detect_runner(command: list[str], output: str) -> str:
    names = [Path(part).name.lower() for part in command]
    if "pytest" in names or "py.test" in names:
        return "pytest"
    if "unittest" in names:
        return "unittest"
    if names[:1] == ["go"] and "test" in names:
        return "go"
    if names[:1] == ["cargo"] or "cargo" in names[:3]:
        return "cargo"
    for tool in ("jest", "mocha"):
        if tool in names:
            return tool
    if names[:1] == ["node"] and "--test" in names:
        return "node"
    for runner, pattern in _OUTPUT_SIGNS:
        if pattern.search(output):
            return runner
    return "unknown"


# ---------------------------------------------------------------- pytest

_PYTEST_HEADER = re.compile(r"^={3,} (.+?) ={3,}$")
_PYTEST_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PYTEST_LOC = re.compile(r"^(\S+?\.py):(\d+):(?:\s.*)?$")
_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (.+?)(?: - (.*))?$")
_PYTEST_FINAL = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in [\d.]+s")


def _pytest_sections(lines: list[str]) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = []
    in_report = False
    for line in lines:
        if header := _PYTEST_HEADER.match(line):
            in_report = header.group(1) in ("FAILURES", "ERRORS")
            continue
        if in_report and (section := _PYTEST_SECTION.match(line)):
            sections.append((section.group(1), []))
        elif in_report and sections:
            sections[-1][1].append(line)
    return sections


def _section_key(title: str) -> tuple[FailureStatus, str]:
    """(status, name) for a section title: 'ERROR collecting x.py', 'ERROR at setup of t', 'Class.test'."""
    for prefix in ("ERROR collecting ", "ERROR at setup of ", "ERROR at teardown of "):
        if title.startswith(prefix):
            return FailureStatus.ERROR, title[len(prefix):]
    return FailureStatus.FAILED, title


def _summary_matches(test_id: str, name: str) -> bool:
    return test_id == name or test_id.split("::", 1)[-1].replace("::", ".") == name


def parse_pytest(output: str, repo: Path | None) -> ParsedOutput:
    lines = output.splitlines()
    sections = _pytest_sections(lines)
    summary = [(m.group(1), m.group(2), m.group(3) or "") for line in lines if (m := _PYTEST_SUMMARY.match(line))]
    used: set[int] = set()
    failures: list[TestFailure] = []

    def build(test_id: str, status: FailureStatus, body: list[str], fallback_msg: str) -> TestFailure:
        raw = [(m.group(1), int(m.group(2))) for line in body if (m := _PYTEST_LOC.match(line) or
                                                                    _PY_FRAME.search(line))]
        message = "\n".join(line[4:] if line.startswith("E   ") else line[1:].strip()
                            for line in body if line.startswith("E "))
        if not message:
            message = fallback_msg or "\n".join(line for line in body if line.strip())[:MAX_MESSAGE_CHARS]
        return finish(TestFailure(test_id=test_id, status=status, message=message), raw, repo)

    for kind, test_id, msg in summary:
        status = FailureStatus.FAILED if kind == "FAILED" else FailureStatus.ERROR
        body: list[str] = []
        for index, (title, section_body) in enumerate(sections):
            sec_status, name = _section_key(title)
            if index not in used and sec_status == status and _summary_matches(test_id, name):
                used.add(index)
                body = section_body
                break
        failures.append(build(test_id, status, body, msg))
    for index, (title, body) in enumerate(sections):  # sections without a summary line (e.g. -rN)
        if index not in used:
            status, name = _section_key(title)
            first = next((m.group(1) for line in body if (m := _PYTEST_LOC.match(line))), None)
            rel = repo_path(first, repo) if first else None
            is_module = status == FailureStatus.ERROR and name.endswith(".py")
            test_id = name if is_module or not rel else f"{rel}::{name.replace('.', '::')}"
            failures.append(build(test_id, status, body, ""))

    final = next((line for line in reversed(lines) if _PYTEST_FINAL.match(line)), None)
    if final is None:
        return ParsedOutput(runner="pytest", failures=failures, passed=None, failed=len(failures) or None)
    counts = {word.rstrip("s"): int(num) for num, word in re.findall(r"(\d+) (failed|passed|errors?)\b", final)}
    return ParsedOutput(runner="pytest", failures=failures, passed=counts.get("passed", 0),
                        failed=counts.get("failed", 0) + counts.get("error", 0))


# ---------------------------------------------------------------- unittest

_UT_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \((.+?)\)")
_UT_RULE = re.compile(r"^(?:=|-){40,}$")


def parse_unittest(output: str, repo: Path | None) -> ParsedOutput:
    lines = output.splitlines()
    failures: list[TestFailure] = []
    i = 0
    while i < len(lines):
        head = _UT_HEAD.match(lines[i])
        i += 1
        if not head:
            continue
        _kind, name, where = head.groups()
        body: list[str] = []
        i += 1 if i < len(lines) and _UT_RULE.match(lines[i]) else 0
        while i < len(lines) and not _UT_RULE.match(lines[i]):
            body.append(lines[i])
            i += 1
        loader_error = where.startswith("unittest.loader.")
        if loader_error:
            test_id = name
        elif where == name or where.endswith("." + name):
            test_id = where  # Python >= 3.11 prints the full dotted id
        else:
            test_id = f"{where}.{name}"
        message = "\n".join(line for line in body if line.strip() and not line[0].isspace()
                            and line != "Traceback (most recent call last):")
        raw = [(m.group(1), int(m.group(2))) for line in body if (m := _PY_FRAME.search(line))]
        setup = name in ("setUpClass", "tearDownClass", "setUpModule")
        status = FailureStatus.ERROR if loader_error or setup else FailureStatus.FAILED
        failures.append(finish(TestFailure(test_id=test_id, status=status, message=message), raw, repo))
    ran = re.search(r"^Ran (\d+) tests? in", output, re.M)
    verdict = re.search(r"^(?:FAILED|OK)(?: \((.*)\))?$", output, re.M)
    if not ran:
        return ParsedOutput(runner="unittest", failures=failures, passed=None, failed=len(failures) or None)
    pairs = re.findall(r"([\w ]+?)=(\d+)", verdict.group(1) or "") if verdict else []
    stats = {key.strip(): int(value) for key, value in pairs}
    failed = stats.get("failures", 0) + stats.get("errors", 0) + stats.get("unexpected successes", 0)
    not_passed = failed + stats.get("skipped", 0) + stats.get("expected failures", 0)
    return ParsedOutput(runner="unittest", failures=failures, passed=max(int(ran.group(1)) - not_passed, 0),
                        failed=failed)

# ---------------------------------------------------------------- python: the tests never ran

_PY_NOT_FOUND = re.compile(r"^ERROR: (?:file or directory )?not found: (\S+)$", re.M)
_PY_USAGE = re.compile(r"^.*\berror: unrecognized arguments: .*$", re.M)
_PY_NO_TESTS = re.compile(r"^=*\s*no tests ran\b.*?=*$", re.M)
_PY_NO_RUNNER = re.compile(r"^\S*python[\d.]*: No module named (\S+)$", re.M)
_PY_MISSING = re.compile(r"^(?:E\s+)?(ModuleNotFoundError: No module named '([\w.]+)')$", re.M)
_PY_WHERE = re.compile(r'^(\S+?\.py):\d+: in |^\s*File "(.+?)", line \d+', re.M)


def _missing_module(output: str, repo: Path) -> NotRun | None:
    """A module a test (or conftest) imports that is not installed: one an installed package imports, the repository's
    own package, or a dependency its manifests list. A module of its own it has yet to write is not this."""
    for found in _PY_MISSING.finditer(output):
        module = found.group(2)
        where = [m.group(1) or m.group(2) for m in _PY_WHERE.finditer(output, 0, found.start())]
        if where and repo_path(where[-1], repo) is None:  # raised inside an installed package
            return NotRun(NotRunCause.NOT_INSTALLED, found.group(1),
                          f"install the package that provides {module.split('.')[0]}")
        if fix := python_install_fix(module, repo):
            return NotRun(NotRunCause.NOT_INSTALLED, found.group(1), fix)
    return None


def python_not_run(output: str, exit_code: int | None, repo: Path | None) -> NotRun | None:
    """pytest's usage errors (exit 4: a path or test that does not exist, an option it does not know), no tests
    collected (exit 5), the runner itself not installed (`python -m pytest`), or a package a test imports missing."""
    if exit_code == 4 and (missing := _PY_NOT_FOUND.search(output)):
        return NotRun(NotRunCause.NO_TESTS, missing.group(0),
                      f"the right path in --test-command ({missing.group(1)} does not exist)")
    if exit_code == 4 and (usage := _PY_USAGE.search(output)):
        return NotRun(NotRunCause.USAGE, usage.group(0), "options pytest knows in --test-command or pytest's addopts "
                      "(a plugin may be missing: --cov needs pytest-cov)")
    if exit_code == 5 and (empty := _PY_NO_TESTS.search(output)):
        return NotRun(NotRunCause.NO_TESTS, empty.group(0).strip("= "),
                      "the right path or -k/-m selection in --test-command (pytest collected no tests)")
    if re.search(r"\b[1-9]\d* passed\b|^OK\b", output, re.M):  # some tests ran
        return None
    if runner := _PY_NO_RUNNER.search(output):
        return NotRun(NotRunCause.NOT_INSTALLED, runner.group(0),
                      f"pip install {runner.group(1)} into the Python the test command runs")
    return _missing_module(output, repo) if repo is not None else None


def never_ran(output: str, exit_code: int | None, repo: Path | None = None) -> NotRun | None:
    """Whether a failed run's output shows that its tests never ran, for a reason outside the repository's own code
    (docs/runs.md, "When the tests cannot run"); None when they ran, or failed to build from the repository's own files."""
    if exit_code in (0, None):  # passed, or timed out: tests ran
        return None
    output = strip_ansi(output).replace("\r\n", "\n")
    return (npm_not_run(output, exit_code, repo) or python_not_run(output, exit_code, repo)
            or go_not_run(output, exit_code, repo) or cargo_not_run(output, exit_code)
            or shell_not_run(output, exit_code))


# ---------------------------------------------------------------- entry point

_PARSERS: dict[str, Callable[[str, Path | None], ParsedOutput]] = {
    "pytest": parse_pytest, "unittest": parse_unittest, "go": parse_go, "node": parse_node,
    "jest": parse_jest, "mocha": parse_mocha, "cargo": parse_cargo,
}


def parse_test_output(output: str, command: list[str], repo: Path | None = None) -> ParsedOutput:
    """The runner, the failing tests and the counts of a test run's combined output."""
    output = strip_ansi(output).replace("\r\n", "\n")
    runner = detect_runner(command, output)
    parser = _PARSERS.get(runner)
    if parser is None:
        logger.debug("unknown test runner for %s", command)
        return ParsedOutput(runner=runner, failures=[], passed=None, failed=None)
    try:
        parsed = parser(output, repo)
    except Exception:  # a parser bug must not break the agent loop; the caller falls back to the raw output
        logger.warning("could not parse %s output", runner, exc_info=True)
        return ParsedOutput(runner=runner, failures=[], passed=None, failed=None)
    logger.debug("%s: %d failures parsed (passed=%s failed=%s)", runner, len(parsed.failures), parsed.passed,
                 parsed.failed)
    return parsed
