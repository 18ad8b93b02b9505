"""Pure parsers for test-runner output: detect the runner, then pull out failures and counts.

Supported: pytest, unittest, go test, node --test (TAP and spec reporters), Jest, Mocha, cargo test.
An unknown runner yields no failures; the caller then shows the head and tail of the raw output.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 1500
MAX_FRAMES = 5

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# path fragments that mark a frame as belonging to a toolchain or dependency, never to the repository
_FOREIGN = ("site-packages", "dist-packages", "node_modules/", "node:", "<frozen", "/lib/python3", "/usr/lib/go",
            "/usr/local/go", "/go/pkg/mod/", "/rustc/", "/.cargo/registry/", "/.rustup/", "_testmain.go", "<anonymous>")
_PY_FRAME = re.compile(r'File "(.+?)", line (\d+)')
_JS_FRAME = re.compile(r"^\s*(?:at\s+)?(?:.*?\()?((?:file://)?[^\s()]+?):(\d+):(\d+)\)?\s*$")


@dataclass
class TestFailure:
    """One failing test (or a collection/build error) as the model should see it."""
    __test__ = False  # not a pytest test class

    test_id: str
    status: str = "failed"  # "failed" | "error" (collection/import/build error)
    file: str | None = None  # repo-relative when possible
    line: int | None = None
    message: str = ""
    frames: list[tuple[str, int]] = field(default_factory=list)  # in-repo frames, innermost last


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


def repo_path(path: str, repo: Path | None) -> str | None:
    """A repo-relative path for a frame path, or None when the frame lies outside the repository."""
    path = path.strip()
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not path or any(marker in path for marker in _FOREIGN):
        return None
    candidate = Path(path)
    if not candidate.is_absolute():
        return path[2:] if path.startswith("./") else path
    if repo is None:
        return path
    for root in (repo, repo.resolve()):
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return None


def clean_frames(raw: list[tuple[str, int]], repo: Path | None) -> list[tuple[str, int]]:
    """Keep in-repo frames (innermost last), drop consecutive duplicates, keep the last MAX_FRAMES."""
    frames: list[tuple[str, int]] = []
    for path, line in raw:
        rel = repo_path(path, repo)
        if rel is not None and (not frames or frames[-1] != (rel, line)):
            frames.append((rel, line))
    return frames[-MAX_FRAMES:]


def trim_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    text = "\n".join(lines).strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def _dedent(lines: list[str]) -> str:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def _js_frames(lines: list[str]) -> list[tuple[str, int]]:
    """Stack frames from JS `at fn (file:line:col)` lines, returned innermost last."""
    found = [(m.group(1), int(m.group(2))) for line in lines if (m := _JS_FRAME.match(line))]
    return list(reversed(found))


def _finish(failure: TestFailure, raw_frames: list[tuple[str, int]], repo: Path | None,
            fallback: tuple[str, int] | None = None) -> TestFailure:
    """Fill frames, file and line (innermost in-repo frame, else the fallback location) and trim the message."""
    failure.frames = clean_frames(raw_frames, repo)
    if failure.frames:
        failure.file, failure.line = failure.frames[-1]
    elif fallback is not None and (rel := repo_path(fallback[0], repo)) is not None:
        failure.file, failure.line = rel, fallback[1]
    failure.message = trim_message(failure.message)
    return failure


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


def _section_key(title: str) -> tuple[str, str]:
    """(status, name) for a section title: 'ERROR collecting x.py', 'ERROR at setup of t', 'Class.test'."""
    for prefix in ("ERROR collecting ", "ERROR at setup of ", "ERROR at teardown of "):
        if title.startswith(prefix):
            return "error", title[len(prefix):]
    return "failed", title


def _summary_matches(test_id: str, name: str) -> bool:
    return test_id == name or test_id.split("::", 1)[-1].replace("::", ".") == name


def parse_pytest(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
    lines = output.splitlines()
    sections = _pytest_sections(lines)
    summary = [(m.group(1), m.group(2), m.group(3) or "") for line in lines if (m := _PYTEST_SUMMARY.match(line))]
    used: set[int] = set()
    failures: list[TestFailure] = []

    def build(test_id: str, status: str, body: list[str], fallback_msg: str) -> TestFailure:
        raw = [(m.group(1), int(m.group(2))) for line in body if (m := _PYTEST_LOC.match(line) or
                                                                    _PY_FRAME.search(line))]
        message = "\n".join(line[4:] if line.startswith("E   ") else line[1:].strip()
                            for line in body if line.startswith("E "))
        if not message:
            message = fallback_msg or "\n".join(line for line in body if line.strip())[:MAX_MESSAGE_CHARS]
        return _finish(TestFailure(test_id, status, message=message), raw, repo)

    for kind, test_id, msg in summary:
        status = "failed" if kind == "FAILED" else "error"
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
            is_module = status == "error" and name.endswith(".py")
            test_id = name if is_module or not rel else f"{rel}::{name.replace('.', '::')}"
            failures.append(build(test_id, status, body, ""))

    final = next((line for line in reversed(lines) if _PYTEST_FINAL.match(line)), None)
    if final is None:
        return failures, None, (len(failures) or None)
    counts = {word.rstrip("s"): int(num) for num, word in re.findall(r"(\d+) (failed|passed|errors?)\b", final)}
    return failures, counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0)


# ---------------------------------------------------------------- unittest

_UT_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \((.+?)\)")
_UT_RULE = re.compile(r"^(?:=|-){40,}$")


def parse_unittest(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
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
        status = "error" if loader_error or name in ("setUpClass", "tearDownClass", "setUpModule") else "failed"
        failures.append(_finish(TestFailure(test_id, status, message=message), raw, repo))
    ran = re.search(r"^Ran (\d+) tests? in", output, re.M)
    verdict = re.search(r"^(?:FAILED|OK)(?: \((.*)\))?$", output, re.M)
    if not ran:
        return failures, None, (len(failures) or None)
    pairs = re.findall(r"([\w ]+?)=(\d+)", verdict.group(1) or "") if verdict else []
    stats = {key.strip(): int(value) for key, value in pairs}
    failed = stats.get("failures", 0) + stats.get("errors", 0) + stats.get("unexpected successes", 0)
    not_passed = failed + stats.get("skipped", 0) + stats.get("expected failures", 0)
    return failures, max(int(ran.group(1)) - not_passed, 0), failed


# ---------------------------------------------------------------- go test

_GO_RUN = re.compile(r"^=== (RUN|CONT|NAME)\s+(\S+)")
_GO_RESULT = re.compile(r"^\s*--- (FAIL|PASS|SKIP): (\S+) \(")
_GO_PKG = re.compile(r"^(ok|FAIL)\s+(\S+)(?:\s+(.*))?$")
_GO_BUILD_HEAD = re.compile(r"^# (\S+)")
_GO_DIAG = re.compile(r"^(\S+\.go):(\d+)(?::\d+)?: (.+)$")
_GO_LOG = re.compile(r"^\s+(\S+\.go):(\d+): ")
_GO_TRACE = re.compile(r"^\t(\S+\.go):(\d+)")


def _go_module(repo: Path | None) -> str | None:
    try:
        text = (repo / "go.mod").read_text(encoding="utf-8") if repo else ""
    except OSError:
        return None
    match = re.search(r"^module\s+(\S+)", text, re.M)
    return match.group(1).strip('"') if match else None


def _go_file(base: str, pkg: str | None, module: str | None) -> str:
    """Go prints only the file's base name in t.Errorf lines; place it in its package directory."""
    if "/" in base or not pkg or not module or not (pkg == module or pkg.startswith(module + "/")):
        return base
    rel_dir = pkg[len(module):].strip("/")
    return f"{rel_dir}/{base}" if rel_dir else base


def parse_go(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
    module = _go_module(repo)
    failures: list[TestFailure] = []
    logs: dict[str, list[str]] = {}
    failed: list[str] = []
    build: dict[str, list[str]] = {}
    build_pkg: str | None = None
    current: str | None = None
    panic: list[str] = []
    trace: list[tuple[str, int]] = []
    passed, verbose = 0, False

    def flush(pkg: str | None, rest: str) -> None:
        nonlocal current, panic, trace
        if "[build failed]" in rest or "[setup failed]" in rest:
            diags = build.get(pkg or "") or (list(build.values())[-1] if build else [rest])
            locations = [(m.group(1), int(m.group(2))) for line in diags if (m := _GO_DIAG.match(line))]
            failure = _finish(TestFailure(pkg or "build", "error", message="\n".join(diags)), locations[:MAX_FRAMES],
                              repo)
            if failure.frames:  # compiler order: point at the first error
                failure.file, failure.line = failure.frames[0]
            failures.append(failure)
        for name in failed:
            body = logs.get(name, [])
            if not body and not (panic and name == failed[-1]) and any(n.startswith(name + "/") for n in failed):
                continue  # a parent that failed only because a subtest did
            message = _dedent(body)
            raw: list[tuple[str, int]] = []
            if (loc := next((m for line in body if (m := _GO_LOG.match(line))), None)) is not None:
                raw.append((_go_file(loc.group(1), pkg, module), int(loc.group(2))))
            if panic and name == failed[-1]:
                message = "\n".join([message, *panic]).strip()
                raw = list(reversed(trace)) or raw
            test_id = f"{pkg}.{name}" if pkg else name
            failures.append(_finish(TestFailure(test_id, message=message), raw, repo))
        failed.clear()
        logs.clear()
        current, panic, trace = None, [], []

    for line in output.splitlines():
        if head := _GO_BUILD_HEAD.match(line):
            build_pkg = head.group(1)
            build.setdefault(build_pkg, [])
            continue
        if build_pkg and (_GO_DIAG.match(line) or line.startswith("\t")):
            build[build_pkg].append(line)
            continue
        build_pkg = None
        if pkg_line := _GO_PKG.match(line):
            flush(pkg_line.group(2), pkg_line.group(3) or "")
        elif panic:
            if frame := _GO_TRACE.match(line):
                trace.append((frame.group(1), int(frame.group(2))))
        elif line.startswith("panic: "):
            panic.append(line)
            if not failed:
                failed.append("panic")
        elif run := _GO_RUN.match(line):
            verbose, current = True, run.group(2)
        elif result := _GO_RESULT.match(line):
            current = result.group(2)
            if result.group(1) == "FAIL":
                failed.append(current)
            passed += result.group(1) == "PASS"
        elif current and line[:1] in (" ", "\t"):
            logs.setdefault(current, []).append(line)
    if failed or panic:
        flush(None, "")
    return failures, (passed if verbose else None), len(failures)


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


def parse_node(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
    counters = {m.group(1): int(float(m.group(2))) for line in output.splitlines() if (m := _NODE_COUNTER.match(line))}
    tap = re.search(r"^TAP version \d+$|^\s*(?:not )?ok \d+ - ", output, re.M)
    failures = _parse_node_tap(output, repo) if tap else _parse_node_spec(output, repo)
    return failures, counters.get("pass"), counters.get("fail", len(failures) if failures else None)


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
            failure = TestFailure(" › ".join([*parents, name]), "error" if is_file else "failed", message=message)
            failures.append(_finish(failure, raw, repo, _location(meta.get("location", ""))))
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
        failure = TestFailure(name, "error" if is_file else "failed", message=message)
        failures.append(_finish(failure, _js_frames(body), repo, _location(where)))
    return failures


# ---------------------------------------------------------------- jest and mocha

_JEST_FILE = re.compile(r"^(?:FAIL|PASS)\s+(\S+)")
_JEST_BLOCK = re.compile(r"^  ● (.+)$")
_JEST_END = re.compile(r"^(?:FAIL|PASS)\s|^(?:Test Suites|Tests|Snapshots|Time):|^Summary of all failing tests")
_JEST_CODE = re.compile(r"^\s*(?:>\s*)?\d+ \||^\s+\|")


def parse_jest(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
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
        message = _dedent([b for b in body if _not_frame(b) and not _JEST_CODE.match(b)])
        failure = TestFailure(current_file if suite_error else block.group(1), "error" if suite_error else "failed",
                              message=message)
        failures.append(_finish(failure, _js_frames(body), repo, (current_file, 1) if suite_error else None))
    totals = re.search(r"^Tests:\s+(.*)$", output, re.M)
    if not totals:
        return failures, None, (len(failures) or None)
    counts = {word: int(num) for num, word in re.findall(r"(\d+) (failed|passed)", totals.group(1))}
    return failures, counts.get("passed", 0), counts.get("failed", 0) + sum(f.status == "error" for f in failures)


_MOCHA_BLOCK = re.compile(r"^  (\d+)\) (.+)$")


def parse_mocha(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
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
        message = _dedent([line for line in body if _not_frame(line)])
        failures.append(_finish(TestFailure(" › ".join(title), message=message), _js_frames(body), repo))
    if crash := re.search(r"^\s*Exception during run: (.*)$", output, re.M):  # a spec file failed to load
        rest = output[crash.end():].splitlines()
        frames = _js_frames(rest)
        failure = _finish(TestFailure("mocha", "error", message="\n".join(
            [crash.group(1), *[line for line in rest[:8] if _not_frame(line)]])), frames, repo)
        failure.test_id = failure.file or "mocha"
        failures.append(failure)
    return (failures, int(passing.group(1)) if passing else None,
            int(failing.group(1)) if failing else (len(failures) or None))


# ---------------------------------------------------------------- cargo test

_CARGO_SECTION = re.compile(r"^---- (\S+) stdout ----$")
_CARGO_SECTION_END = re.compile(r"^---- |^failures:$|^successes:$|^test result: ")
_CARGO_PANIC = re.compile(r"^thread '.*?'(?: \(\d+\))? panicked at (?:'(.*)', )?(\S+?):(\d+):\d+:?$")
_CARGO_BT = re.compile(r"^\s+at (\S+?):(\d+)(?::\d+)?$")
_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$")
_CARGO_RESULT = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed")
_RUST_ERROR = re.compile(r"^error(?:\[E\d+\])?: (.+)$")
_RUST_LOC = re.compile(r"^\s*--> (\S+?):(\d+):\d+$")


def _cargo_section(name: str, body: list[str], repo: Path | None) -> TestFailure:
    panic_at = next((n for n, line in enumerate(body) if _CARGO_PANIC.match(line)), None)
    if panic_at is None:
        return _finish(TestFailure(name, message="\n".join(body)), [], repo)
    panic = _CARGO_PANIC.match(body[panic_at])
    assert panic is not None
    message_lines = [panic.group(1)] if panic.group(1) is not None else []
    for line in body[panic_at + 1:]:
        if line.startswith(("stack backtrace:", "note: ")):
            break
        message_lines.append(line)
    raw = [(m.group(1), int(m.group(2))) for line in body[panic_at:] if (m := _CARGO_BT.match(line))]
    raw = [*reversed(raw), (panic.group(2), int(panic.group(3)))]
    return _finish(TestFailure(name, message="\n".join(message_lines)), raw, repo)


def parse_cargo(output: str, repo: Path | None) -> tuple[list[TestFailure], int | None, int | None]:
    lines = output.splitlines()
    failures: list[TestFailure] = []
    diagnostics: list[str] = []
    raw_build: list[tuple[str, int]] = []
    crate = "build"
    for n, line in enumerate(lines):
        if section := _CARGO_SECTION.match(line):
            body: list[str] = []
            for following in lines[n + 1:]:
                if _CARGO_SECTION_END.match(following):
                    break
                body.append(following)
            failures.append(_cargo_section(section.group(1), body, repo))
        elif compile_failed := re.match(r"^error: could not compile `([^`]+)`", line):
            crate = compile_failed.group(1)
        elif (error := _RUST_ERROR.match(line)) and not error.group(1).startswith(("test failed", "build failed")):
            loc = next((m for m in map(_RUST_LOC.match, lines[n + 1:n + 4]) if m), None)
            if loc is not None:
                diagnostics.append(f"{line}\n  --> {loc.group(1)}:{loc.group(2)}")
                raw_build.append((loc.group(1), int(loc.group(2))))
    known = {failure.test_id for failure in failures}
    for line in lines:  # tests reported FAILED without a captured-output section
        if (failed := _CARGO_FAILED.match(line)) and failed.group(1) not in known:
            known.add(failed.group(1))
            failures.append(TestFailure(failed.group(1)))
    if diagnostics:
        failure = _finish(TestFailure(crate, "error", message="\n".join(diagnostics)), raw_build[:MAX_FRAMES], repo)
        failure.file, failure.line = failure.frames[0] if failure.frames else (None, None)
        failures.append(failure)
    results = [tuple(map(int, m.groups())) for line in lines if (m := _CARGO_RESULT.match(line))]
    if not results:
        return failures, None, (len(failures) or None)
    return failures, sum(r[0] for r in results), sum(r[1] for r in results) + bool(diagnostics)


# ---------------------------------------------------------------- entry point

_PARSERS: dict[str, Callable[[str, Path | None], tuple[list[TestFailure], int | None, int | None]]] = {
    "pytest": parse_pytest, "unittest": parse_unittest, "go": parse_go, "node": parse_node,
    "jest": parse_jest, "mocha": parse_mocha, "cargo": parse_cargo,
}


def parse_test_output(output: str, command: list[str],
                      repo: Path | None = None) -> tuple[str, list[TestFailure], int | None, int | None]:
    """(runner, failures, passed, failed) for a test run's combined output; counts are None when unknown."""
    output = strip_ansi(output).replace("\r\n", "\n")
    runner = detect_runner(command, output)
    parser = _PARSERS.get(runner)
    if parser is None:
        logger.debug("unknown test runner for %s", command)
        return runner, [], None, None
    try:
        failures, passed, failed = parser(output, repo)
    except Exception:  # a parser bug must not break the agent loop; the caller falls back to the raw output
        logger.warning("could not parse %s output", runner, exc_info=True)
        return runner, [], None, None
    logger.debug("%s: %d failures parsed (passed=%s failed=%s)", runner, len(failures), passed, failed)
    return runner, failures, passed, failed
