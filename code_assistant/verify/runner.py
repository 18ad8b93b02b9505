"""Run the user's test command in its own process group; timeouts and failures come back as data."""
from __future__ import annotations

import codecs
import collections
import contextlib
import functools
import logging
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from code_assistant.errors import AssistantError
from code_assistant.gate import Gate
from code_assistant.verify.environment import without_secrets
from code_assistant.verify.outputs import NotRun, TestFailure, never_ran, parse_test_output, strip_ansi
from code_assistant.verify.outputs_common import network_not_run
from code_assistant.verify.passes import GO_PASSES_FLAG, PASSES_OPTION, fold_passes, passed_ids
from code_assistant.verify.reports import Proof, check, report_dir
from code_assistant.verify.sandbox import Sandbox

__all__ = ["TestCommandError", "TestResult", "TestRunner", "TestsNotRunError", "reap_leftovers", "truncate_output"]

logger = logging.getLogger(__name__)

# PYTHONUNBUFFERED keeps a Python child's output when it is killed on timeout
DEFAULT_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "CI": "1", "NO_COLOR": "1", "FORCE_COLOR": "0"}
KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL
DRAIN_GRACE_S = 1.0  # how long to keep reading after the command exited while a grandchild holds the pipe
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
CACHE_OFF = re.compile(r"-p\s*no:cacheprovider\b")
PYTEST_CACHE = Path(tempfile.gettempdir()) / "code-assistant-pytest-cache"  # pytest's cache, never in the repository
MAX_CAPTURE_BYTES = 16 * 1024 * 1024  # beyond this the middle of the output is dropped while reading
SHELL_OPERATORS = {"&&", "||", "|", ";", ">", ">>", "<", "2>&1"}
SHELL_BUILTINS = {"cd", "export", "source", ".", "set", "env"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
RUN_TOKEN_VAR = "CODE_ASSISTANT_TEST_RUN"  # in the test command's environment, inherited by what it starts


class TestCommandError(AssistantError):
    """The test command cannot start (executable not found or not executable)."""
    __test__ = False


class TestsNotRunError(AssistantError):
    """The baseline's output shows that the tests never ran, for a reason outside the repository's own code: the run
    stops before any model call (exit 2) with the cause, the line that shows it and the likely fix."""
    __test__ = False

    def __init__(self, not_run: NotRun) -> None:
        super().__init__(not_run.describe())
        self.not_run = not_run


@dataclass
class TestResult:
    """One run of the test command."""
    __test__ = False

    command: list[str]
    exit_code: int | None  # None when it timed out
    passed: bool  # exit_code == 0 and not timed_out
    timed_out: bool
    output: str  # combined stdout+stderr, head and tail kept when long
    duration_s: float
    failures: list[TestFailure] = field(default_factory=list)
    passed_count: int | None = None
    failed_count: int | None = None
    runner: str = "unknown"
    timeout_s: float | None = None
    not_run: NotRun | None = None  # the output shows the tests never ran, for a reason outside the repository
    lost: int = 0  # tests that ran before the change and did not now (a green run with fewer tests is not green)
    passes: frozenset[str] = frozenset()  # the tests the runner's own report shows passing, by id (verify/reports.py)
    printed: frozenset[str] = frozenset()  # the tests its output shows passing (verify/passes.py): no verdict, a hint
    proof: Proof = Proof.REPORT  # what `passes` rests on
    unverified: str = ""  # why the passes are not proved by a report ("" when they are)
    cwd: Path | None = None  # where it ran: the output's paths are relative to it (verify/steady.py)

    @property
    def failed_ids(self) -> list[str]:
        return [failure.test_id for failure in self.failures]

    @property
    def ran(self) -> int | None:
        """Tests that ran (passed or failed; skipped and deselected ones did not), None when the output says not."""
        if self.passed_count is None:
            return None
        return self.passed_count + (self.failed_count or 0)

    def summary(self) -> str:
        """One line: '3 passed, 1 failed', 'timed out after 5s', 'exit 2'."""
        if self.timed_out:
            return f"timed out after {self.timeout_s if self.timeout_s is not None else self.duration_s:g}s"
        parts = []
        if self.passed_count is not None:
            parts.append(f"{self.passed_count} passed")
        failed = self.failed_count if self.failed_count is not None else (len(self.failures) or None)
        if failed is not None:
            parts.append(f"{failed} failed")
        if self.lost:
            parts.append(f"{self.lost} no longer run")
        if self.exit_code == 0 and not self.passed and not self.lost:
            return ", ".join([*parts, "exit 0 refuted by the runner's report"])  # verify/reports.py
        if not parts:
            return "passed (exit 0)" if self.passed else f"exit {self.exit_code}"
        if not self.passed and not failed and not self.lost:
            parts.append(f"exit {self.exit_code}")
        return ", ".join(parts)


def fewer_tests(before: TestResult, after: TestResult) -> TestResult:
    """`after` as the run must take it: a green run in which fewer tests ran than in `before` (the baseline) is not
    green — a test was skipped, deselected or is no longer collected, which is no fix (`lost` says how many, and
    lost_note tells the model). Counts the output does not give decide nothing."""
    if not after.passed or before.ran is None or after.ran is None or after.ran >= before.ran:
        return after
    return replace(after, passed=False, lost=before.ran - after.ran)


def lost_note(result: TestResult) -> str:
    """For the model: the tests that no longer run ("" when none were lost)."""
    if not result.lost or result.ran is None:
        return ""
    words = f"{result.lost} test{'' if result.lost == 1 else 's'}"
    return (f"the tests pass, but {words} that ran before the change did not run now ({result.ran + result.lost} "
            f"before, {result.ran} now): skipped, deselected or no longer collected. Make every test that ran before "
            "run and pass again; fix the code under test, not which tests run.")


def cache_off(command: str | list[str], env: dict[str, str], cwd: Path) -> bool:
    """The test command, PYTEST_ADDOPTS or a pytest configuration file of `cwd` turns pytest's cache plugin off
    (`-p no:cacheprovider`)."""
    said = [command if isinstance(command, str) else " ".join(command), env.get("PYTEST_ADDOPTS", "")]
    tree = Gate(cwd)  # the project's own regular files only: no link out of it, no FIFO to wait on
    said += [tree.text(name, max_bytes=1 << 20, head=True, judge=False) or "" for name in PYTEST_CONFIGS]
    return any(CACHE_OFF.search(text) for text in said)


def truncate_output(text: str, head_lines: int = 200, tail_lines: int = 400, max_line_chars: int = 2000) -> str:
    """Keep the first head_lines and last tail_lines lines, with a marker saying how many were left out."""
    lines = [line if len(line) <= max_line_chars else line[:max_line_chars] + " […]" for line in text.splitlines()]
    if len(lines) > head_lines + tail_lines:
        omitted = len(lines) - head_lines - tail_lines
        lines = [*lines[:head_lines], f"[… {omitted} lines omitted …]", *lines[len(lines) - tail_lines:]]
    return "\n".join(lines) + ("\n" if text.endswith("\n") and lines else "")


class TestRunner:
    """Runs one command in cwd — in its sandbox when given one — kills its whole process group on timeout, and reads
    its output as a test run's. Mostly the test command (a run's, the judge's); also any command the project runs the
    same way: the model's `run` tool (verify/testing.py's Testing.shell, read-only) and the eval's package download
    (`pip download`, `npm pack`, evaluate/scratch.py), whose results are read for their exit code and output."""
    __test__ = False

    def __init__(self, command: str | list[str], *, cwd: Path, timeout: float = 120.0,
                 env: dict[str, str] | None = None, head_lines: int = 200, tail_lines: int = 400,
                 kill_grace: float = KILL_GRACE_S, running_file: Path | None = None,
                 capture_bytes: int = MAX_CAPTURE_BYTES, sandbox: Sandbox | None = None,
                 read_only: bool = False) -> None:
        """running_file, when given, names the run's processes while it lasts, so that `reap_leftovers` can stop
        them if this process dies without cleaning up (kill -9). capture_bytes: beyond this much output its middle
        is dropped while reading. sandbox: what the command may write, read and reach (verify/sandbox.py; None:
        anything); `read_only`: not even the tree (the sandbox is then required). The environment is this
        process's less its secrets, then `env`."""
        self.running_file = running_file
        self.sandbox = sandbox
        self.read_only = read_only
        if read_only and (sandbox is None or not sandbox.active):
            raise ValueError("a read-only run needs the sandbox")
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.cwd = Path(cwd)
        self.timeout = timeout
        inherited = sandbox.environment(os.environ) if sandbox else without_secrets(os.environ)
        self.env = {**inherited.env, **DEFAULT_ENV, **(env or {})}
        # the repository is left as it was: pytest's cache goes elsewhere, unless the project turned the cache off
        # (then the option is unknown to pytest, and its warning would be said to the model on every run)
        cache = "" if cache_off(command, self.env, cwd) else f"-o cache_dir={shlex.quote(str(PYTEST_CACHE))}"
        # the passing tests listed, to see a test that failed before pass (an -r of the user's own comes after: theirs)
        addopts = [PASSES_OPTION, self.env.get("PYTEST_ADDOPTS", ""), cache]
        self.env["PYTEST_ADDOPTS"] = " ".join(option for option in addopts if option)
        goflags = self.env.get("GOFLAGS", "").split()
        self.env["GOFLAGS"] = " ".join(goflags if GO_PASSES_FLAG in goflags else [*goflags, GO_PASSES_FLAG])
        self._argv = list(self.command)
        if isinstance(command, str) and SHELL_OPERATORS.intersection(self.command):
            self._argv = ["/bin/sh", "-c", command]  # "cd web && npm test" needs a shell
        else:
            while self._argv and _ASSIGNMENT.match(self._argv[0]):  # "FOO=1 pytest": move FOO into the env
                name, value = self._argv.pop(0).split("=", 1)
                self.env[name] = value
        if sandbox is not None and sandbox.active and sandbox.executable is not None:
            sandbox.freeze(self.cwd, self.env, self._argv)  # decided now, before a test of this tree has run
        self.head_lines = head_lines
        self.tail_lines = tail_lines
        self.kill_grace = kill_grace
        self.capture_bytes = capture_bytes
        self._cancelled = threading.Event()
        self._live: set[subprocess.Popen[bytes]] = set()  # running commands, shared with with_command's runners
        self._live_lock = threading.Lock()

    def with_command(self, command: str) -> TestRunner:
        """The same runner (directory, timeout, environment, bookkeeping) for another command."""
        runner = TestRunner(command, cwd=self.cwd, timeout=self.timeout, env=self.env, head_lines=self.head_lines,
                            tail_lines=self.tail_lines, kill_grace=self.kill_grace, running_file=self.running_file,
                            capture_bytes=self.capture_bytes, sandbox=self.sandbox, read_only=self.read_only)
        runner._cancelled, runner._live, runner._live_lock = self._cancelled, self._live, self._live_lock  # one cancel
        return runner

    def cancel(self) -> None:
        """Stop the run in progress (its whole process group, killed here and now) and every later one: from
        another thread, which need not wait for the running one to notice."""
        self._cancelled.set()
        with self._live_lock:
            running = list(self._live)
        for proc in running:
            _kill_group(proc, grace=0.0)

    def check(self) -> None:
        """Raise TestCommandError if the executable cannot be found or run; nothing is started."""
        words = [word for word in self.command if not _ASSIGNMENT.match(word)]
        if not words:
            raise TestCommandError("the test command is empty")
        exe = words[0]
        if exe in SHELL_BUILTINS and self._argv[0] == "/bin/sh":
            return
        if os.sep in exe or (os.altsep and os.altsep in exe):
            path = Path(exe) if Path(exe).is_absolute() else self.cwd / exe
            if not path.is_file():
                raise TestCommandError(f"test command not found: {exe} (looked in {self.cwd})")
            if not os.access(path, os.X_OK):
                raise TestCommandError(f"test command is not executable: {exe}")
        elif shutil.which(exe, path=self.env.get("PATH", os.defpath)) is None:
            raise TestCommandError(f"test command not found on PATH: {exe}")

    def run(self, on_output: Callable[[str], None] | None = None) -> TestResult:
        """The command run to its end or its timeout; `on_output` is given its output as it arrives (a status line
        counting the tests)."""
        if self._cancelled.is_set():
            raise KeyboardInterrupt
        self.check()
        logger.info("running %s in %s (timeout %gs)", shlex.join(self.command), self.cwd, self.timeout)
        start = time.monotonic()
        token = uuid.uuid4().hex
        if self.running_file:
            _write_running(self.running_file, token)
        confined = (functools.partial(self.sandbox.confined, read_only=self.read_only) if self.sandbox
                    else _unconfined)
        with report_dir() as reports:
            env = {**self.env, RUN_TOKEN_VAR: token,
                   "PYTEST_ADDOPTS": f"{self.env['PYTEST_ADDOPTS']} {reports.pytest_options()}"}
            try:
                with confined(self._argv, self.cwd, env, reports=(reports.path,)) as (argv, confined_env):
                    captured, timed_out, exit_code = self._start_and_collect(argv, confined_env, start, on_output)
            finally:
                if self.running_file:
                    self.running_file.unlink(missing_ok=True)
            if self._cancelled.is_set():
                raise KeyboardInterrupt  # the run that asked for these tests is being stopped
            exit_code = None if timed_out else exit_code
            raw = strip_ansi(captured.decode("utf-8", errors="replace")).replace("\r\n", "\n")
            parsed = parse_test_output(raw, self.command, self.cwd)
            checked = check(reports, self.command, parsed.runner, raw, exit_code, self.cwd)
        duration = time.monotonic() - start
        output = truncate_output(fold_passes(raw), self.head_lines, self.tail_lines)
        if timed_out:
            output += f"{'' if output.endswith(chr(10)) or not output else chr(10)}timed out after {self.timeout:g}s\n"
        passed = exit_code == 0 and not timed_out and not checked.refutes_green
        if exit_code == 0 and not passed:
            logger.warning("the test command exited 0, but: %s", checked.why)
            output += f"{'' if output.endswith(chr(10)) or not output else chr(10)}[not a pass: {checked.why}]\n"
        not_run = never_ran(raw, exit_code, self.cwd)
        if not_run is None and self.sandbox is not None and self.sandbox.active and not self.sandbox.network:
            not_run = network_not_run(raw, exit_code)
        result = TestResult(command=self.command, exit_code=exit_code, passed=passed,
                            timed_out=timed_out, output=output, duration_s=duration, failures=parsed.failures,
                            passed_count=parsed.passed, failed_count=parsed.failed, runner=parsed.runner,
                            timeout_s=self.timeout, not_run=not_run, passes=checked.passes,
                            printed=passed_ids(raw, parsed.runner), proof=checked.proof, unverified=checked.why,
                            cwd=self.cwd)
        logger.info("test run finished in %.1fs: %s", duration, result.summary())
        return result

    def _start_and_collect(self, argv: list[str], env: dict[str, str], start: float,
                           on_output: Callable[[str], None] | None) -> tuple[bytes, bool, int | None]:
        """Start argv, read its output to the end or the deadline: (output, timed out, exit code)."""
        try:
            proc = subprocess.Popen(argv, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise TestCommandError(f"cannot start {self._argv[0]}: {exc.strerror or exc}") from exc
        with self._live_lock:
            self._live.add(proc)
        try:
            captured, timed_out = self._collect(proc, start + self.timeout, on_output)
            return captured, timed_out, proc.returncode
        except BaseException:  # Ctrl-C: the tests go with the run (a session goes on living)
            _kill_group(proc, grace=0.0)
            raise
        finally:
            with self._live_lock:
                self._live.discard(proc)

    def _collect(self, proc: subprocess.Popen[bytes], deadline: float,
                 on_output: Callable[[str], None] | None) -> tuple[bytes, bool]:
        """Read output until EOF, the deadline (then kill the group) or shortly after the command exits."""
        assert proc.stdout is not None
        chunks = _Capture(self.capture_bytes)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        timed_out = False
        exited_at: float | None = None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is None and self._cancelled.is_set():
                    _kill_group(proc, grace=0.0)
                    exited_at = time.monotonic()
                if exited_at is None and now >= deadline:
                    timed_out = True
                    logger.warning("test command timed out after %gs; killing its process group", self.timeout)
                    _kill_group(proc, self.kill_grace)
                    exited_at = time.monotonic()
                if exited_at is not None and time.monotonic() - exited_at > DRAIN_GRACE_S:
                    logger.info("a child process still holds the output pipe; killing the process group")
                    _kill_group(proc, grace=0.0)
                    break
                wait = min(0.1, max(deadline - now, 0.0)) if exited_at is None else 0.1
                if selector.select(timeout=wait):
                    data = os.read(proc.stdout.fileno(), 65536)
                    if not data:
                        break
                    chunks.add(data)
                    if on_output is not None:
                        on_output(decoder.decode(data))
        proc.stdout.close()
        if proc.poll() is None:  # the command closed its output but is still running
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc, self.kill_grace)
                proc.wait()
        _kill_group(proc, grace=0.0)  # leftovers (e.g. daemons a test started) must not outlive the run
        return chunks.value(), timed_out


@contextlib.contextmanager
def _unconfined(argv: list[str], cwd: Path, env: dict[str, str],
                reports: tuple[Path, ...] = ()) -> Iterator[tuple[list[str], dict[str, str]]]:
    yield argv, env


class _Capture:
    """Output bytes in memory: the first and last MAX_CAPTURE_BYTES / 2, the middle dropped when a run floods."""

    def __init__(self, limit: int = MAX_CAPTURE_BYTES) -> None:
        self.half = limit // 2
        self.head: list[bytes] = []
        self.tail: collections.deque[bytes] = collections.deque()
        self.head_size = self.tail_size = self.dropped = 0

    def add(self, data: bytes) -> None:
        if self.head_size < self.half:
            self.head.append(data)
            self.head_size += len(data)
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail_size > self.half and len(self.tail) > 1:
            self.dropped += len(old := self.tail.popleft())
            self.tail_size -= len(old)

    def value(self) -> bytes:
        marker = f"\n[… {self.dropped} bytes omitted …]\n".encode() if self.dropped else b""
        return b"".join(self.head) + marker + b"".join(self.tail)


def _kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the whole process group, wait up to grace for the leader, then SIGKILL whatever is left."""
    pgid = proc.pid  # start_new_session=True made the child the leader of its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    if grace > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _write_running(path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(token, encoding="ascii")
    os.replace(tmp, path)


def reap_leftovers(running_file: Path) -> int:
    """Kill the processes of a test run whose runner died before cleaning up (kill -9 of the assistant): every
    process that carries the run's token in its environment. Returns how many were killed (Linux: /proc)."""
    try:
        token = running_file.read_text(encoding="ascii").strip()
    except OSError:
        return 0
    marker = f"{RUN_TOKEN_VAR}={token}".encode()
    killed = 0
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue
    running_file.unlink(missing_ok=True)
    if killed:
        logger.warning("killed %d leftover process(es) of an interrupted test run", killed)
    return killed
