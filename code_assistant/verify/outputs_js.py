"""Parsers for JavaScript test runners: node --test (TAP and spec reporters), Jest and Mocha; and npm's reasons for
running no test at all."""
from __future__ import annotations

import re
from pathlib import Path

from code_assistant.verify.manifests import npm_install_fix
from code_assistant.verify.outputs_common import (
    FailureStatus,
    NotRun,
    NotRunCause,
    ParsedOutput,
    TestFailure,
    dedent,
    finish,
    missing_program,
)

_JS_FRAME = re.compile(r"^\s*(?:at\s+)?(?:.*?\()?((?:file://)?[^\s()]+?):(\d+):(\d+)\)?\s*$")


def _js_frames(lines: list[str]) -> list[tuple[str, int]]:
    """Stack frames from JS `at fn (file:line:col)` lines, returned innermost last."""
    found = [(m.group(1), int(m.group(2))) for line in lines if (m := _JS_FRAME.match(line))]
    return list(reversed(found))


# ---------------------------------------------------------------- node --test (TAP and spec reporters)

_TAP_POINT = re.compile(r"^(\s*)(not ok|ok) \d+ - (.*?)(?: # (?:SKIP|TODO)\b.*)?$")
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_NODE_COUNTER = re.compile(r"^(?:#|ℹ) (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$")
_SPEC_FAIL = re.compile(r"^(\s*)✖ (.+?)(?: \([\d.]+m?s\))?$")
_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")


def _tap_yaml(block: list[str]) -> dict[str, str]:
    data: dict[str, str] = {}
    if not block:
        return data
    base = len(block[0]) - len(block[0].lstrip())
    key: str | None = None
    for line in block:
        pair = re.match(r"^(\w+):\s?(.*)$", line.strip())
        if pair and len(line) - len(line.lstrip()) == base:
            key, value = pair.groups()
            if value in ("|-", "|", ">-", ">"):
                value = ""
            elif len(value) > 1 and value[0] == value[-1] == "'":
                value = value[1:-1].replace("''", "'")
            data[key] = value
        elif key is not None:
            data[key] += ("\n" if data[key] else "") + line[base + 2:]
    return data


def _location(text: str) -> tuple[str, int] | None:
    match = re.match(r"^(.+?):(\d+)(?::\d+)?$", text.strip())
    return (match.group(1), int(match.group(2))) if match else None


def _not_frame(line: str) -> bool:
    return not line.strip().startswith("at ")


def parse_node(output: str, repo: Path | None) -> ParsedOutput:
    counters = {m.group(1): int(float(m.group(2))) for line in output.splitlines() if (m := _NODE_COUNTER.match(line))}
    tap = re.search(r"^TAP version \d+$|^\s*(?:not )?ok \d+ - ", output, re.M)
    failures = _parse_node_tap(output, repo) if tap else _parse_node_spec(output, repo)
    return ParsedOutput(runner="node", failures=failures, passed=counters.get("pass"),
                        failed=counters.get("fail", len(failures) if failures else None))


def _parse_node_tap(output: str, repo: Path | None) -> list[TestFailure]:
    lines = output.splitlines()
    failures: list[TestFailure] = []
    names: dict[int, str] = {}
    comments: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if sub := _TAP_SUBTEST.match(line):
            indent = len(sub.group(1))
            names = {k: v for k, v in names.items() if k < indent} | {indent: sub.group(2)}
            continue
        point = _TAP_POINT.match(line)
        if not point:
            if line.startswith("# ") and not _NODE_COUNTER.match(line):
                comments.append(line[2:])
            continue
        block: list[str] = []
        if i < len(lines) and lines[i].strip() == "---":
            i += 1
            while i < len(lines) and lines[i].strip() != "...":
                block.append(lines[i])
                i += 1
            i += 1
        indent, kind, name = len(point.group(1)), point.group(2), point.group(3)
        meta = _tap_yaml(block)
        if kind == "not ok" and meta.get("failureType") != "subtestsFailed":
            parents = [names[k] for k in sorted(names) if k < indent]
            is_file = name.endswith(_SCRIPT_SUFFIXES) and not parents
            message = meta.get("error", "")
            for key in ("expected", "actual"):
                if key in meta:
                    message += f"\n{key}: {meta[key]}"
            raw = _js_frames(meta.get("stack", "").splitlines())
            if is_file and comments:  # the file crashed before its tests ran: its stderr came as comments
                message = "\n".join(filter(_not_frame, comments))
                raw = _js_frames(comments)
            failure = TestFailure(test_id=" › ".join([*parents, name]),
                                  status=FailureStatus.ERROR if is_file else FailureStatus.FAILED, message=message)
            failures.append(finish(failure, raw, repo, _location(meta.get("location", ""))))
        if indent == 0:
            comments = []
    return failures


def _parse_node_spec(output: str, repo: Path | None) -> list[TestFailure]:
    lines = output.splitlines()
    start = next((n + 1 for n, line in enumerate(lines) if line.strip() == "✖ failing tests:"), 0)
    failures: list[TestFailure] = []
    for n in range(start, len(lines)):
        head = _SPEC_FAIL.match(lines[n])
        if not head:
            continue
        indent, body = len(head.group(1)), []
        for line in lines[n + 1:]:
            if line.strip() and (len(line) - len(line.lstrip()) <= indent or line.startswith("test at ")):
                break
            body.append(line)
        if not any(line.strip() for line in body):
            continue  # a suite whose subtests failed
        name = head.group(2)
        is_file = name.endswith(_SCRIPT_SUFFIXES)
        message = "\n".join(line.strip() for line in body if _not_frame(line))
        where = lines[n - 1][len("test at "):] if n and lines[n - 1].startswith("test at ") else ""
        failure = TestFailure(test_id=name, status=FailureStatus.ERROR if is_file else FailureStatus.FAILED,
                              message=message)
        failures.append(finish(failure, _js_frames(body), repo, _location(where)))
    return failures


# ---------------------------------------------------------------- jest and mocha

_JEST_FILE = re.compile(r"^(?:FAIL|PASS)\s+(\S+)")
_JEST_BLOCK = re.compile(r"^  ● (.+)$")
_JEST_END = re.compile(r"^(?:FAIL|PASS)\s|^(?:Test Suites|Tests|Snapshots|Time):|^Summary of all failing tests")
_JEST_CODE = re.compile(r"^\s*(?:>\s*)?\d+ \||^\s+\|")


def parse_jest(output: str, repo: Path | None) -> ParsedOutput:
    lines = output.splitlines()
    failures: list[TestFailure] = []
    seen: set[tuple[str, str]] = set()
    current_file = ""
    for n, line in enumerate(lines):
        if file_line := _JEST_FILE.match(line):
            current_file = file_line.group(1)
        block = _JEST_BLOCK.match(line)
        if not block or block.group(1).startswith("Console") or (current_file, block.group(1)) in seen:
            continue
        seen.add((current_file, block.group(1)))
        body: list[str] = []
        for following in lines[n + 1:]:
            if _JEST_BLOCK.match(following) or _JEST_END.match(following):
                break
            body.append(following)
        suite_error = block.group(1) == "Test suite failed to run"
        message = dedent([b for b in body if _not_frame(b) and not _JEST_CODE.match(b)])
        failure = TestFailure(test_id=current_file if suite_error else block.group(1),
                              status=FailureStatus.ERROR if suite_error else FailureStatus.FAILED, message=message)
        failures.append(finish(failure, _js_frames(body), repo, (current_file, 1) if suite_error else None))
    totals = re.search(r"^Tests:\s+(.*)$", output, re.M)
    if not totals:
        return ParsedOutput(runner="jest", failures=failures, passed=None, failed=len(failures) or None)
    counts = {word: int(num) for num, word in re.findall(r"(\d+) (failed|passed)", totals.group(1))}
    return ParsedOutput(runner="jest", failures=failures, passed=counts.get("passed", 0),
                        failed=counts.get("failed", 0) + sum(f.status == FailureStatus.ERROR for f in failures))


_MOCHA_BLOCK = re.compile(r"^  (\d+)\) (.+)$")


def parse_mocha(output: str, repo: Path | None) -> ParsedOutput:
    lines = output.splitlines()
    passing = re.search(r"^\s+(\d+) passing", output, re.M)
    failing = re.search(r"^\s+(\d+) failing", output, re.M)
    failures: list[TestFailure] = []
    start = next((n + 1 for n, line in enumerate(lines) if re.match(r"^\s+\d+ failing", line)), len(lines))
    n = start
    while n < len(lines):
        block = _MOCHA_BLOCK.match(lines[n])
        n += 1
        if not block:
            continue
        title = [block.group(2).strip()]
        while not title[-1].endswith(":") and n < len(lines) and len(title) < 10:
            title.append(lines[n].strip())
            n += 1
        title[-1] = title[-1].removesuffix(":")
        body: list[str] = []
        while n < len(lines) and not _MOCHA_BLOCK.match(lines[n]):
            body.append(lines[n])
            n += 1
        message = dedent([line for line in body if _not_frame(line)])
        failures.append(finish(TestFailure(test_id=" › ".join(title), message=message), _js_frames(body), repo))
    if crash := re.search(r"^\s*Exception during run: (.*)$", output, re.M):  # a spec file failed to load
        rest = output[crash.end():].splitlines()
        frames = _js_frames(rest)
        failure = finish(TestFailure(test_id="mocha", status=FailureStatus.ERROR, message="\n".join(
            [crash.group(1), *[line for line in rest[:8] if _not_frame(line)]])), frames, repo)
        failure.test_id = failure.file or "mocha"
        failures.append(failure)
    return ParsedOutput(runner="mocha", failures=failures, passed=int(passing.group(1)) if passing else None,
                        failed=int(failing.group(1)) if failing else (len(failures) or None))


# ---------------------------------------------------------------- npm: the tests never ran

_NPM_ERROR = r"^npm (?:error|ERR!) "
_NPM_NO_SCRIPT = re.compile(_NPM_ERROR + r"Missing script: \"?([^\"\s]+)\"?$", re.M)
_NPM_NO_PACKAGE = re.compile(_NPM_ERROR + r"(?:enoent )?Could not read package\.json.*$", re.M)
_JS_MISSING = re.compile(r"^(?:# )?(.*Cannot find (?:module|package) '([^']+)'.*)$", re.M)  # TAP: as a comment


def _package(specifier: str) -> str | None:
    """The package a bare import specifier names ('@scope/pkg/sub' -> '@scope/pkg'); None for a path or a builtin."""
    if specifier.startswith((".", "/", "node:", "file:")):
        return None
    parts = specifier.split("/")
    return "/".join(parts[:2]) if specifier.startswith("@") else parts[0]


def npm_not_run(output: str, exit_code: int | None, repo: Path | None) -> NotRun | None:
    """npm found no script or no package.json; or the runner or a package that package.json lists is missing from
    node_modules (`npm install` was not run)."""
    if no_script := _NPM_NO_SCRIPT.search(output):
        return NotRun(NotRunCause.NO_SCRIPT, no_script.group(0), f'a "{no_script.group(1)}" script in package.json, or '
                      f"the real test command in --test-command")
    if no_package := _NPM_NO_PACKAGE.search(output):
        return NotRun(NotRunCause.NO_DIRECTORY, no_package.group(0),
                      "run it where package.json is (--repo, or cd into the package in --test-command)")
    if repo is None:
        return None
    if (missing := missing_program(output, exit_code)) and (fix := npm_install_fix(missing[0], repo)):
        return NotRun(NotRunCause.NOT_FOUND, missing[1], fix)
    for found in _JS_MISSING.finditer(output):
        package = _package(found.group(2))
        if package and (fix := npm_install_fix(package, repo)):
            return NotRun(NotRunCause.NOT_INSTALLED, found.group(1), fix)
    return None
