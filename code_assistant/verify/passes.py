"""Which tests a run's output shows passing, named as the failure parsers (outputs*.py) name a failing test. Pure
functions. A printed line is a hint for the model (`broke test_x`), never a verdict: any code under test can print one,
so a pass is read from the runner's own report (reports.py; TestResult.passes), these only into TestResult.printed.

A runner shows its passing tests only where asked: pytest with -rp/-rA (the runner adds -rp, see runner.py) or -v,
unittest with -v, go test with -v (the runner adds it to GOFLAGS), jest with --verbose; cargo, mocha and node's
reporters always do. Output that
names none gives none, and then nothing is seen passing.
"""
from __future__ import annotations

import re

PASSES_OPTION = "-rpfE"  # pytest: list passing tests in the short summary, before the failures (which stay last)
GO_PASSES_FLAG = "-v"  # go test, through GOFLAGS (applied where a go command knows it): every test's --- PASS line

_PYTEST = re.compile(r"^(?:\[gw\d+\] \[ *\d+%\] )?PASSED (\S.*?)\s*$|^(\S+::.*?) PASSED(?: +\[ *\d+%\])?\s*$",
                     re.MULTILINE)
_UNITTEST = re.compile(r"^(\w+) \(([\w.]+)\)(?:\n[^\n]*?)?[^\n]*? \.\.\. ok$", re.MULTILINE)
_GO_PASS = re.compile(r"^\s*--- PASS: (\S+) \(")
_GO_PKG = re.compile(r"^(?:ok|FAIL)\s+(\S+)")
_GO_VERBOSE = re.compile(r"^\s*(?:=== (?:RUN|PAUSE|CONT|NAME)\s+|--- PASS: )\S")
_CARGO = re.compile(r"^test (\S+) \.\.\. ok$", re.MULTILINE)
_TAP_POINT = re.compile(r"^(\s*)(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$")
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_MARKED = re.compile(r"^(\s*)([✓✔√✕✖×▶]|\d+\)) (.+?)(?: \([\d.]+ ?m?s\))?$")
_JEST_FILE = re.compile(r"^(PASS|FAIL)\s+(\S+)")
_PASS_MARKS = ("✓", "✔", "√")


def passed_ids(output: str, runner: str) -> frozenset[str]:
    """The ids of the tests this output shows passing (its runner as outputs.detect_runner names it)."""
    match runner:
        case "pytest":
            return frozenset(m.group(1) or m.group(2) for m in _PYTEST.finditer(output))
        case "unittest":
            return frozenset(_unittest_id(m.group(1), m.group(2)) for m in _UNITTEST.finditer(output))
        case "go":
            return _go(output)
        case "cargo":
            return frozenset(_CARGO.findall(output))
        case "node" | "jest" | "mocha":
            return _tap(output) | _tree(output)
    return frozenset()


def seen_passing(test_id: str, passes: frozenset[str]) -> bool:
    """Whether a test (or, for a collection or build error, every test of its module or package) shows passing."""
    return test_id in passes or any(p.startswith((test_id + "::", test_id + ".")) for p in passes)


def fold_passes(output: str) -> str:
    """pytest's PASSED summary lines, and go test -v's lines for tests that start and pass, asked for to see tests
    pass, folded into one line each run of them: they would push the failures out of the output kept and shown."""
    output = re.sub(r"(?:^PASSED \S[^\n]*\n)+", lambda m: f"[{m.group(0).count(chr(10))} PASSED lines left out]\n",
                    output, flags=re.MULTILINE)
    return _fold_go_verbose(output) if "--- PASS: " in output else output


def _fold_go_verbose(output: str) -> str:
    """go test -v's lines of tests that started and passed, each run of them up to its last `--- PASS` line, as one
    line; a `=== RUN` after it stays (it names the test the log lines below it belong to)."""
    kept: list[str] = []
    block: list[str] = []

    def flush() -> None:
        last = max((i for i, line in enumerate(block) if _GO_PASS.match(line)), default=-1)
        if last >= 1:
            kept.append(f"[{last + 1} go test -v lines of tests run and passed left out]\n")
            kept.extend(block[last + 1:])
        else:
            kept.extend(block)
        block.clear()

    for line in output.splitlines(keepends=True):
        if _GO_VERBOSE.match(line):
            block.append(line)
            continue
        flush()
        kept.append(line)
    flush()
    return "".join(kept)


def _unittest_id(name: str, where: str) -> str:
    return where if where == name or where.endswith("." + name) else f"{where}.{name}"  # as parse_unittest names it


def _go(output: str) -> frozenset[str]:
    """`--- PASS: TestX` lines, named by the package line that follows them (as parse_go names failures)."""
    found: set[str] = set()
    pending: list[str] = []
    for line in output.splitlines():
        if passed := _GO_PASS.match(line):
            pending.append(passed.group(1))
        elif package := _GO_PKG.match(line):
            found.update(f"{package.group(1)}.{name}" for name in pending)
            pending = []
    return frozenset(found | set(pending))


def _tap(output: str) -> frozenset[str]:
    """TAP's `ok N - name` points, named with their subtests' parents (as parse_node names failures)."""
    found: set[str] = set()
    names: dict[int, str] = {}
    for line in output.splitlines():
        if sub := _TAP_SUBTEST.match(line):
            indent = len(sub.group(1))
            names = {k: v for k, v in names.items() if k < indent} | {indent: sub.group(2)}
        elif (point := _TAP_POINT.match(line)) and point.group(2) == "ok" and not point.group(4):
            indent = len(point.group(1))
            found.add(" › ".join([*(names[k] for k in sorted(names) if k < indent), point.group(3)]))
    return frozenset(found)


def _tree(output: str) -> frozenset[str]:
    """The ✓ lines of an indented reporter (jest --verbose, mocha's spec, node's spec), each named by the suites
    above it ("calc › adds") and by itself alone (node's spec names a failure so); a jest file that passed whole
    ("PASS src/calc.test.js") by its path."""
    found: set[str] = set()
    parents: list[tuple[int, str]] = []
    for line in output.splitlines():
        if not line.strip():
            parents = []  # mocha ends a suite with an empty line; what came before (npm's banner) is no suite
            continue
        if head := _JEST_FILE.match(line):
            parents = []
            if head.group(1) == "PASS":
                found.add(head.group(2))
            continue
        marked = _MARKED.match(line)
        indent = len(line) - len(line.lstrip())
        parents = [(i, name) for i, name in parents if i < indent]
        if marked and marked.group(2) in _PASS_MARKS:
            found.update({" › ".join([*(name for _, name in parents), marked.group(3)]), marked.group(3)})
        elif marked is None or marked.group(2) == "▶":
            parents.append((indent, marked.group(3) if marked else line.strip()))
    return frozenset(found)
