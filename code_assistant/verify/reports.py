"""Which tests passed, from the runner's own structured report rather than from the lines the run printed: any code
under test can print `tests/test_calc.py::test_add PASSED` and end its process with status 0, so a printed line is
never a verdict (docs/runs.md, "What a pass is").

A test run is given a private directory of its own (made here, mode 0700, outside the tree and outside the sandbox's
private /tmp; bound writable into the sandbox for that run only, removed after it) and the runner is asked to write
its report there: pytest's JUnit XML (`--junitxml`, through PYTEST_ADDOPTS like the runner's -rpfE, so a Makefile or
a package script that runs pytest writes it too). The report is then cross-checked: a pytest run that printed its
session but wrote no report ended before pytest finished (`os._exit` in the code under test) and did not pass; a
report that disagrees with the exit status, or names more passes than pytest's closing line counted, is not believed.

Runners with no report the tested code cannot print give none here: go test 1.19's -json is read from the test
binary's printed lines (1.20's framing marker is printable too), cargo's JSON is nightly-only and on stdout, node's and
jest's reporters run in processes the tests share. Their passes are "not verified", whatever the output says.
"""
from __future__ import annotations

import contextlib
import logging
import re
import shlex
import shutil
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from code_assistant.verify.outputs import detect_runner

__all__ = ["JUNIT_NAME", "Checked", "Proof", "PytestReport", "ReportDir", "check", "pytest_id", "read_junit",
           "report_dir"]

logger = logging.getLogger(__name__)

JUNIT_NAME = "pytest-junit.xml"
_OWN_JUNIT = re.compile(r"^--junit-?xml(?:=|$)")
_PYTEST_SESSION = re.compile(r"^=+ test session starts =+$", re.M)
_PYTEST_FINAL = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in [\d.]+s", re.M)


class Proof(StrEnum):
    """What a run's passes rest on."""

    REPORT = "report"  # the runner's report, consistent with the exit status and the closing line
    NONE = "none"  # this runner writes no report here: nothing is verified, whatever the output says
    MISSING = "missing"  # a report was asked for and never written: the run ended before its runner finished
    INCONSISTENT = "inconsistent"  # the report disagrees with the exit status or the closing line


@dataclass(frozen=True)
class PytestReport:
    """A pytest JUnit XML report: the tests by id (as pytest names them), and how many ran."""

    passed: frozenset[str]
    failed: frozenset[str]  # failures and errors (collection errors by their module's path)
    skipped: int
    total: int


@dataclass(frozen=True)
class Checked:
    """The run's passes as far as they are proved, and, when they are not, why (for the model and the result)."""

    proof: Proof
    passes: frozenset[str] = frozenset()
    why: str = ""  # "" when proved by the report

    @property
    def refutes_green(self) -> bool:
        """An exit status 0 that the report shows cannot be a pass."""
        return self.proof in (Proof.MISSING, Proof.INCONSISTENT)


@dataclass(frozen=True)
class ReportDir:
    """The private directory one test run writes its report into, and what to add to its environment."""

    path: Path

    @property
    def junit(self) -> Path:
        return self.path / JUNIT_NAME

    def pytest_options(self) -> str:
        """PYTEST_ADDOPTS words: the JUnit report here, in the family that names each test's file."""
        return f"--junitxml={shlex.quote(str(self.junit))} -o junit_family=xunit1"


@contextlib.contextmanager
def report_dir() -> Iterator[ReportDir]:
    """A new private directory for one run's report (mode 0700, a name nobody can guess), removed after it."""
    path = Path(tempfile.mkdtemp(prefix="ca-report-"))
    try:
        yield ReportDir(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def pytest_id(classname: str, name: str, file: str, root: Path | None = None) -> str:
    """pytest's node id of a JUnit testcase: `classname` is the id's path, dotted and without `.py`, then its classes;
    `file` is where the test is defined. A collection error names its module by `file` alone."""
    if not classname:
        return file or name
    module = re.sub(r"\.py$", "", file).replace("/", ".")
    parts = classname.split(".")
    if file and (classname == module or classname.startswith(module + ".")):
        classes = classname[len(module) + 1:].split(".") if classname != module else []
        return "::".join([file, *classes, name])
    for cut in range(len(parts), 0, -1):  # a test inherited from a class defined in another module
        path = "/".join(parts[:cut]) + ".py"
        if root is not None and (root / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return "::".join(["/".join(parts) + ".py", name])


def read_junit(path: Path, root: Path | None = None) -> PytestReport:
    """The tests of a JUnit XML report pytest wrote (ValueError when it is no such report)."""
    try:
        tree = ElementTree.parse(path)
    except (ElementTree.ParseError, OSError) as exc:
        raise ValueError(f"the report cannot be read: {exc}") from exc
    passed: set[str] = set()
    failed: set[str] = set()
    skipped = total = 0
    for case in tree.getroot().iter("testcase"):
        test_id = pytest_id(case.get("classname", ""), case.get("name", ""), case.get("file", ""), root)
        kinds = {child.tag for child in case}
        total += 1
        if kinds & {"failure", "error"}:
            failed.add(test_id)
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed.add(test_id)
    if tree.getroot().tag not in ("testsuites", "testsuite"):
        raise ValueError(f"the report is no JUnit report (its root is <{tree.getroot().tag}>)")
    return PytestReport(passed=frozenset(passed), failed=frozenset(failed - passed), skipped=skipped, total=total)


def _closing_counts(output: str) -> dict[str, int] | None:
    """pytest's closing line as counts ("3 passed, 1 xpassed" -> {"passed": 3, "xpassed": 1}), None without one."""
    finals = _PYTEST_FINAL.findall(output)
    if not finals:
        return None
    return {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", finals[-1])}


def check(where: ReportDir, command: list[str], runner: str, output: str, exit_code: int | None,
          root: Path | None = None) -> Checked:
    """The passes of a finished run, as far as its runner's report proves them (`runner`: as outputs.detect_runner
    names it from the command and the output)."""
    if where.junit.exists():
        return _check_pytest(where.junit, output, exit_code, root)
    if runner != "pytest":
        return Checked(Proof.NONE, why=f"{_name(runner)} gives no report of its tests that the tested code cannot "
                                       "print, and printed lines are not trusted")
    if detect_runner(command, "") != "pytest":  # make, npm, tox: pytest may run without our environment
        return Checked(Proof.NONE, why="the pytest this command runs wrote no report (it ended early, or ran "
                                       "without PYTEST_ADDOPTS), and printed lines are not trusted")
    if any(_OWN_JUNIT.match(word) for word in command):
        return Checked(Proof.NONE, why="the test command names its own --junitxml, which replaces the one the "
                                       "passes are read from")
    if exit_code is None:
        return Checked(Proof.NONE, why="the tests timed out before pytest wrote its report")
    if exit_code != 0 and not _PYTEST_SESSION.search(output):
        return Checked(Proof.NONE, why="pytest did not start a test session")
    return Checked(Proof.MISSING, why="pytest wrote no report of its tests: the test process ended before pytest "
                                      "finished (os._exit, a signal, or a crash), so no test is taken as passed")


def _check_pytest(path: Path, output: str, exit_code: int | None, root: Path | None) -> Checked:
    try:
        report = read_junit(path, root)
    except ValueError as exc:
        return Checked(Proof.INCONSISTENT, why=f"pytest's report was not believed: {exc}")
    if exit_code == 0 and report.failed:
        return Checked(Proof.INCONSISTENT, why=f"the test command exited 0 but pytest's report names "
                                               f"{len(report.failed)} failing test(s)")
    counts = _closing_counts(output)
    if counts is not None and len(report.passed) > counts.get("passed", 0) + counts.get("xpassed", 0):
        return Checked(Proof.INCONSISTENT, why=f"pytest's report names {len(report.passed)} passing tests but its "
                                               f"closing line counts {counts.get('passed', 0)}")
    if counts is None and exit_code == 0 and _PYTEST_SESSION.search(output):
        return Checked(Proof.INCONSISTENT, why="pytest printed no closing line although it exited 0")
    logger.debug("pytest's report: %d passed, %d failed, %d skipped", len(report.passed), len(report.failed),
                 report.skipped)
    return Checked(Proof.REPORT, passes=report.passed)


def _name(runner: str) -> str:
    return {"go": "go test", "cargo": "cargo test", "node": "node --test", "unknown": "this test command"}.get(
        runner, runner)
