"""What every test-output parser shares: the failure record and turning raw frames into repo locations; the record of
tests that never ran, and the shell's reasons for it."""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

MAX_MESSAGE_CHARS = 1500
IMPORT_ERROR_RE = re.compile(r"ImportError|ModuleNotFoundError|Cannot find module|ERR_MODULE_NOT_FOUND|"
                             r"no required module provides|cannot find package|unresolved import")  # a module the
#                             code or a test imports cannot be found: Python, Node, Go, Rust
MAX_FRAMES = 5

# path fragments that mark a frame as belonging to a toolchain or dependency, never to the repository
_FOREIGN = ("site-packages", "dist-packages", "node_modules/", "node:", "<frozen", "/lib/python3", "/usr/lib/go",
            "/usr/local/go", "/go/pkg/mod/", "/rustc/", "/.cargo/registry/", "/.rustup/", "_testmain.go", "<anonymous>")


class FailureStatus(StrEnum):
    """How a test failed: its own check, or an error around it."""

    FAILED = "failed"
    ERROR = "error"  # a collection, import, setup, teardown or build error


@dataclass
class TestFailure:
    """One failing test (or a collection/build error) as the model should see it."""
    __test__ = False  # not a pytest test class

    test_id: str
    status: FailureStatus = FailureStatus.FAILED
    file: str | None = None  # repo-relative when possible
    line: int | None = None
    message: str = ""
    frames: list[tuple[str, int]] = field(default_factory=list)  # in-repo frames, innermost last


class ParsedOutput(NamedTuple):
    """What a test run's output says: its runner, the failing tests and the counts (None when unknown)."""

    runner: str
    failures: list[TestFailure]
    passed: int | None
    failed: int | None


def repo_path(path: str, repo: Path | None) -> str | None:
    """A repo-relative path for a frame path, or None when the frame lies outside the repository: a relative path is
    taken as written but for `./` and `..` (one that climbs out of the tree is no frame of it). Only a name: what
    is read of it passes the read gate."""
    path = path.strip()
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not path or any(marker in path for marker in _FOREIGN):
        return None
    candidate = Path(path)
    if not candidate.is_absolute():
        rel = posixpath.normpath(path)
        return None if rel in (".", "..") or rel.startswith("../") else rel
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


def dedent(lines: list[str]) -> str:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def finish(failure: TestFailure, raw_frames: list[tuple[str, int]], repo: Path | None,
           fallback: tuple[str, int] | None = None) -> TestFailure:
    """Fill frames, file and line (innermost in-repo frame, else the fallback location) and trim the message."""
    failure.frames = clean_frames(raw_frames, repo)
    if failure.frames:
        failure.file, failure.line = failure.frames[-1]
    elif fallback is not None and (rel := repo_path(fallback[0], repo)) is not None:
        failure.file, failure.line = rel, fallback[1]
    failure.message = trim_message(failure.message)
    return failure


# ---------------------------------------------------------------- tests that never ran

class NotRunCause(StrEnum):
    """Why a test command's tests never ran, for a reason outside the repository's own code."""

    NOT_FOUND = "command_not_found"
    NOT_EXECUTABLE = "not_executable"
    NO_DIRECTORY = "wrong_directory"
    NO_TESTS = "no_tests"
    USAGE = "usage_error"
    NO_SCRIPT = "missing_script"
    OLD_TOOLCHAIN = "toolchain_too_old"
    NO_DOWNLOAD = "download_failed"
    NOT_INSTALLED = "package_not_installed"
    NETWORK_OFF = "network_off"


CAUSE_WORDS = {
    NotRunCause.NOT_FOUND: "a program it runs was not found",
    NotRunCause.NOT_EXECUTABLE: "a program it runs is not executable",
    NotRunCause.NO_DIRECTORY: "it ran in the wrong directory",
    NotRunCause.NO_TESTS: "no tests were found",
    NotRunCause.USAGE: "the test runner did not accept its options",
    NotRunCause.NO_SCRIPT: "the script it names does not exist",
    NotRunCause.OLD_TOOLCHAIN: "the Go toolchain is older than go.mod asks for",
    NotRunCause.NO_DOWNLOAD: "dependencies could not be downloaded",
    NotRunCause.NOT_INSTALLED: "a package it needs is not installed",
    NotRunCause.NETWORK_OFF: "they need the network, which the sandbox keeps off",
}


@dataclass(frozen=True)
class NotRun:
    """The tests never ran: why, the output line that shows it, and the likely fix (the user's to make)."""

    cause: NotRunCause
    line: str
    fix: str

    def describe(self) -> str:
        return f"the tests never ran: {CAUSE_WORDS[self.cause]} ({self.line.strip()}); likely fix: {self.fix}"


_SH_LINE = r"^[^\s:]+:(?: line)? \d+: "  # dash's "sh: 1: ", bash's "bash: line 1: " / "./run.sh: line 3: "
_SH_NOT_FOUND = re.compile(_SH_LINE + r"(?P<program>[^\s:]+): (?:command )?not found$|^[^\s:]+:\d+: command not found: "
                           r"(?P<zsh>\S+)$|^make: (?P<make>[^\s:]+): No such file or directory$", re.M)
_SH_DENIED = re.compile(_SH_LINE + r"(?P<program>[^\s:]+): Permission denied$|^make: (?P<make>[^\s:]+): Permission "
                        r"denied$", re.M)
_SH_CD = re.compile(_SH_LINE + r"cd: (?:can't cd to (?P<dash>.+)|(?P<bash>.+): No such file or directory)$", re.M)
_MAKE_STATUS = re.compile(r"^make: \*\*\* \[.*\] Error (\d+)$", re.M)


def _statuses(output: str, exit_code: int | None) -> set[int | None]:
    return {exit_code, *(int(m.group(1)) for m in _MAKE_STATUS.finditer(output))}


def missing_program(output: str, exit_code: int | None) -> tuple[str, str] | None:
    """(program, the shell's line) when the shell found no such program (exit 127; make passes it on as `Error 127`)."""
    if 127 not in _statuses(output, exit_code) or not (found := _SH_NOT_FOUND.search(output)):
        return None
    return found.group("program") or found.group("zsh") or found.group("make"), found.group(0)


# What a program prints when the network is not there (the sandbox's namespace has only loopback; Landlock's filter
# refuses the socket): name resolution failing (glibc, Go, Node, Rust, curl), or no route to another host.
_NETWORK_FAILURE = re.compile(
    r"^.*(?:Temporary failure in name resolution|Name or service not known|nodename nor servname provided"
    r"|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|failed to lookup address information|Could not resolve host"
    r"|dial tcp: lookup \S+(?: on \S+)?: .*|[Nn]etwork is unreachable|connect ENETUNREACH"
    r"|Failed to establish a new connection: \[Errno 13\] Permission denied).*$", re.M)


def network_not_run(output: str, exit_code: int | None) -> NotRun | None:
    """A failed run whose output shows a network failure, under a sandbox with the network off: the suite needs
    the network (`--network`), and no change of the model's can make it pass."""
    if exit_code in (0, None) or not (found := _NETWORK_FAILURE.search(output)):
        return None
    return NotRun(NotRunCause.NETWORK_OFF, found.group(0)[:300],
                  "pass --network if the tests need it (the sandbox keeps it off: nothing the model writes can send "
                  "your files anywhere)")


def shell_not_run(output: str, exit_code: int | None) -> NotRun | None:
    """The shell could not start the test program (exit 127: not found; 126: not executable), or a `cd` before it
    failed and nothing ran after it."""
    if missing := missing_program(output, exit_code):
        program, line = missing
        return NotRun(NotRunCause.NOT_FOUND, line, f"install {program}, or correct its name or path in --test-command")
    if 126 in _statuses(output, exit_code) and (denied := _SH_DENIED.search(output)):
        program = denied.group("program") or denied.group("make")
        return NotRun(NotRunCause.NOT_EXECUTABLE, denied.group(0),
                      f"chmod +x {program}, or run it with its interpreter")
    lines = [line for line in output.splitlines() if line.strip() and not _MAKE_STATUS.match(line)]
    cd = _SH_CD.search(output)
    if cd and lines[-1] == cd.group(0):  # nothing ran after it
        directory = cd.group("dash") or cd.group("bash")
        return NotRun(NotRunCause.NO_DIRECTORY, cd.group(0),
                      f"the right path after cd in --test-command ({directory} does not exist)")
    return None
