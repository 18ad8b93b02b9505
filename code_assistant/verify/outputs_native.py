"""Parsers for compiled-language test runners: go test and cargo test; and their reasons for running no test at all
(a Go older than go.mod asks for, modules or crates that cannot be downloaded)."""
from __future__ import annotations

import re
from pathlib import Path

from code_assistant.verify.outputs_common import (
    MAX_FRAMES,
    FailureStatus,
    NotRun,
    NotRunCause,
    ParsedOutput,
    TestFailure,
    dedent,
    finish,
)

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


def _go_version(repo: Path | None) -> str | None:
    """The Go release go.mod's `go` line asks for."""
    try:
        text = (repo / "go.mod").read_text(encoding="utf-8") if repo else ""
    except OSError:
        return None
    match = re.search(r"^go\s+(\S+)", text, re.M)
    return match.group(1) if match else None


def _go_file(base: str, pkg: str | None, module: str | None) -> str:
    """Go prints only the file's base name in t.Errorf lines; place it in its package directory."""
    if "/" in base or not pkg or not module or not (pkg == module or pkg.startswith(module + "/")):
        return base
    rel_dir = pkg[len(module):].strip("/")
    return f"{rel_dir}/{base}" if rel_dir else base


def parse_go(output: str, repo: Path | None) -> ParsedOutput:
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
            failure = finish(TestFailure(test_id=pkg or "build", status=FailureStatus.ERROR, message="\n".join(diags)),
                             locations[:MAX_FRAMES], repo)
            if failure.frames:  # compiler order: point at the first error
                failure.file, failure.line = failure.frames[0]
            failures.append(failure)
        for name in failed:
            body = logs.get(name, [])
            if not body and not (panic and name == failed[-1]) and any(n.startswith(name + "/") for n in failed):
                continue  # a parent that failed only because a subtest did
            message = dedent(body)
            raw: list[tuple[str, int]] = []
            if (loc := next((m for line in body if (m := _GO_LOG.match(line))), None)) is not None:
                raw.append((_go_file(loc.group(1), pkg, module), int(loc.group(2))))
            if panic and name == failed[-1]:
                message = "\n".join([message, *panic]).strip()
                raw = list(reversed(trace)) or raw
            test_id = f"{pkg}.{name}" if pkg else name
            failures.append(finish(TestFailure(test_id=test_id, message=message), raw, repo))
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
    return ParsedOutput(runner="go", failures=failures, passed=passed if verbose else None, failed=len(failures))


# ---------------------------------------------------------------- go: the tests never ran

# standard packages added since Go 1.16, with the release that added them: an import of one that the toolchain does
# not have ("package slices is not in GOROOT") means the Go here is older than the code's
NEWER_STD = {"embed": "1.16", "io/fs": "1.16", "testing/fstest": "1.16", "runtime/metrics": "1.16",
             "net/netip": "1.18", "debug/buildinfo": "1.18", "crypto/ecdh": "1.20", "slices": "1.21", "maps": "1.21",
             "cmp": "1.21", "log/slog": "1.21", "testing/slogtest": "1.21", "math/rand/v2": "1.22",
             "go/version": "1.22", "iter": "1.23", "unique": "1.23", "structs": "1.23", "weak": "1.24",
             "crypto/hkdf": "1.24", "crypto/pbkdf2": "1.24", "crypto/sha3": "1.24", "crypto/mlkem": "1.24",
             "testing/synctest": "1.25"}
_GO_NOT_IN_GOROOT = re.compile(r"^.*\bpackage (\S+) is not in (?:GOROOT|std)\b.*$", re.M)
_GO_TOO_OLD = re.compile(r"^note: module requires Go (\S+)$|^.*\brequires go >= (\S+) \(running go \S+?[;)].*$"
                         r"|^\S*go\.mod:\d+: invalid go version '([^']+)'.*$|^\S*go\.mod:\d+: unknown directive: "
                         r"(toolchain)$", re.M)
_GO_DOWNLOAD = re.compile(r"^.*(?:module lookup disabled by GOPROXY=off|@v\S+: (?:Get|reading) \"?https?://\S+|"
                          r"\bdial tcp\b.*|unrecognized import path \"[^\"]+\").*$", re.M)


def go_not_run(output: str, exit_code: int | None, repo: Path | None) -> NotRun | None:
    """The Go here is older than go.mod asks for (or than a standard package the code imports), or a module cannot be
    downloaded. A compile error in the repository's own files is not this: a task may be to fix it."""
    asked = _go_version(repo)
    wants = f"Go {asked} or newer, as go.mod asks" if asked else "a newer Go"
    if old := _GO_TOO_OLD.search(output):
        return NotRun(NotRunCause.OLD_TOOLCHAIN, old.group(0), wants)
    for missing in _GO_NOT_IN_GOROOT.finditer(output):
        if added := NEWER_STD.get(missing.group(1)):
            return NotRun(NotRunCause.OLD_TOOLCHAIN, missing.group(0),
                          f"{wants} (package {missing.group(1)} came with Go {added})")
    if download := _GO_DOWNLOAD.search(output):
        return NotRun(NotRunCause.NO_DOWNLOAD, download.group(0), "the modules downloaded first (`go mod download` "
                      "with network: the sandbox runs the tests without it unless --network), or vendored")
    return None


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
        return finish(TestFailure(test_id=name, message="\n".join(body)), [], repo)
    panic = _CARGO_PANIC.match(body[panic_at])
    assert panic is not None
    message_lines = [panic.group(1)] if panic.group(1) is not None else []
    for line in body[panic_at + 1:]:
        if line.startswith(("stack backtrace:", "note: ")):
            break
        message_lines.append(line)
    raw = [(m.group(1), int(m.group(2))) for line in body[panic_at:] if (m := _CARGO_BT.match(line))]
    raw = [*reversed(raw), (panic.group(2), int(panic.group(3)))]
    return finish(TestFailure(test_id=name, message="\n".join(message_lines)), raw, repo)


def parse_cargo(output: str, repo: Path | None) -> ParsedOutput:
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
            failures.append(TestFailure(test_id=failed.group(1)))
    if diagnostics:
        failure = finish(TestFailure(test_id=crate, status=FailureStatus.ERROR, message="\n".join(diagnostics)),
                         raw_build[:MAX_FRAMES], repo)
        failure.file, failure.line = failure.frames[0] if failure.frames else (None, None)
        failures.append(failure)
    results = [tuple(map(int, m.groups())) for line in lines if (m := _CARGO_RESULT.match(line))]
    if not results:
        return ParsedOutput(runner="cargo", failures=failures, passed=None, failed=len(failures) or None)
    return ParsedOutput(runner="cargo", failures=failures, passed=sum(r[0] for r in results),
                        failed=sum(r[1] for r in results) + bool(diagnostics))


_CARGO_OFFLINE = re.compile(r"^error: (?:no matching package named `[^`]+` found|failed to get `[^`]+` as a dependency"
                            r"|failed to download|failed to load source for dependency).*$", re.M)


def cargo_not_run(output: str, exit_code: int | None) -> NotRun | None:
    """cargo could not resolve or download the crates the repository depends on (offline, or no network)."""
    if exit_code != 101 or not (failed := _CARGO_OFFLINE.search(output)):
        return None
    return NotRun(NotRunCause.NO_DOWNLOAD, failed.group(0), "the crates downloaded first (`cargo fetch` with network: "
                  "the sandbox runs the tests without it unless --network)")
