"""TestRunner with real subprocesses: results, timeouts that kill the process group, output truncation."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from code_assistant.verify.runner import (
    RUN_TOKEN_VAR,
    TestCommandError,
    TestResult,
    TestRunner,
    reap_leftovers,
    truncate_output,
)

FAST_PYTEST = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
HANG_GUARD_S = 60  # anti-hang only: a run that never returns fails its test after this long; speed goals are bench's


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def gone(pid: int) -> bool:
    """True when the process no longer exists or is a zombie nobody has reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_for_file(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def wait_gone(pid: int) -> bool:
    """Whether pid is gone, allowing the kernel up to 30 s to take a killed process down (it takes milliseconds)."""
    deadline = time.monotonic() + 30
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone(pid)


def run_guarded(runner: TestRunner) -> TestResult:
    """runner.run(), waited for at most HANG_GUARD_S: the commands these tests run never end by themselves, so a
    runner that failed to stop them would hang the suite; this fails the test instead (and kills them)."""
    outcome: list[TestResult | BaseException] = []

    def run() -> None:
        try:
            outcome.append(runner.run())
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the test's thread
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        runner.cancel()
        pytest.fail(f"the run did not return within {HANG_GUARD_S} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def test_failing_pytest_run_is_parsed(tmp_path: Path) -> None:
    write(tmp_path / "tests" / "test_a.py", "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 + 1 == 3\n")

    result = TestRunner(f"{sys.executable} -m pytest -p no:cacheprovider", cwd=tmp_path, env=FAST_PYTEST).run()

    assert (result.exit_code, result.passed, result.timed_out) == (1, False, False)
    assert result.runner == "pytest"
    assert result.failed_ids == ["tests/test_a.py::test_bad"]
    assert (result.failures[0].file, result.failures[0].line) == ("tests/test_a.py", 6)
    assert (result.passed_count, result.failed_count) == (1, 1)
    assert result.summary() == "1 passed, 1 failed"
    assert "1 failed, 1 passed" in result.output


def test_passing_run_and_environment(tmp_path: Path) -> None:
    script = "import os\nfor k in ('CI', 'NO_COLOR', 'FORCE_COLOR', 'PYTHONDONTWRITEBYTECODE', 'EXTRA'):\n" \
             "    print(k, os.environ.get(k))\n"
    write(tmp_path / "show_env.py", script)

    result = TestRunner([sys.executable, "show_env.py"], cwd=tmp_path, env={"EXTRA": "yes"}).run()

    assert (result.exit_code, result.passed, result.runner, result.failures) == (0, True, "unknown", [])
    for line in ("CI 1", "NO_COLOR 1", "FORCE_COLOR 0", "PYTHONDONTWRITEBYTECODE 1", "EXTRA yes"):
        assert line in result.output
    assert result.summary() == "passed (exit 0)"


def test_nonzero_exit_without_a_known_runner(tmp_path: Path) -> None:
    result = TestRunner([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], cwd=tmp_path).run()
    assert (result.exit_code, result.passed, result.summary()) == (3, False, "exit 3")
    assert result.output == "boom\n"


def test_shlex_splits_quoted_arguments(tmp_path: Path) -> None:
    write(tmp_path / "test_k.py", "def test_a_and_b():\n    pass\n\n\ndef test_a_only():\n    assert False\n")

    runner = TestRunner(f'{sys.executable} -m pytest -p no:cacheprovider -k "a and b"', cwd=tmp_path, env=FAST_PYTEST)
    assert runner.command[-2:] == ["-k", "a and b"]
    result = runner.run()

    assert result.passed, result.output
    assert (result.passed_count, result.failed_count) == (1, 0)
    assert "1 deselected" in result.output


def test_shell_operators_and_leading_assignments(tmp_path: Path) -> None:
    write(tmp_path / "sub" / "marker.txt", "inside sub\n")

    shell = TestRunner("cd sub && cat marker.txt", cwd=tmp_path)
    shell.check()
    assert shell.run().output == "inside sub\n"
    assigned = TestRunner(f"GREETING=hello {sys.executable} -c 'import os; print(os.environ[\"GREETING\"])'", cwd=tmp_path)
    assert assigned.run().output == "hello\n"


def test_a_flood_of_output_keeps_its_start_and_end_and_drops_the_middle(tmp_path: Path) -> None:
    flood = "import sys\nfor n in range(400_000):\n    sys.stdout.write(f'{n:06d}\\n')\n"  # 2.8 MB
    runner = TestRunner([sys.executable, "-c", flood], cwd=tmp_path, timeout=60, capture_bytes=100_000,
                        head_lines=10**6, tail_lines=10**6)
    text = runner.run().output
    assert text.startswith("000000\n000001\n") and text.rstrip().endswith("399998\n399999")
    assert "bytes omitted" in text and len(text) < 500_000  # whole reads of the pipe are kept or dropped


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    write(tmp_path / "spawner.py", (
        "import os, subprocess, threading\n"
        "child = subprocess.Popen(['sleep', '600'])\n"
        f"open({str(pid_file)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "print('started child', flush=True)\n"
        "threading.Event().wait()\n"))  # never ends by itself

    result = run_guarded(TestRunner([sys.executable, "spawner.py"], cwd=tmp_path, timeout=1.5))

    assert (result.timed_out, result.exit_code, result.passed) == (True, None, False)
    assert "started child" in result.output
    assert result.output.rstrip().endswith("timed out after 1.5s")
    assert result.summary() == "timed out after 1.5s"
    leader, child = map(int, wait_for_file(pid_file).split())
    assert wait_gone(leader) and wait_gone(child)


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    pid_file = tmp_path / "stubborn.pid"
    write(tmp_path / "stubborn.py", (
        "import os, signal, threading\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('ignoring TERM', flush=True)\nthreading.Event().wait()\n"))

    result = run_guarded(TestRunner([sys.executable, "stubborn.py"], cwd=tmp_path, timeout=1, kill_grace=0.5))

    assert result.timed_out and "ignoring TERM" in result.output
    assert wait_gone(int(wait_for_file(pid_file)))  # SIGKILL is the only way it ends


def test_grandchild_holding_the_pipe_does_not_hang_the_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    write(tmp_path / "leaves_daemon.py", (
        "import subprocess\n"
        "daemon = subprocess.Popen(['sleep', '600'])  # inherits stdout and keeps the pipe open\n"
        f"open({str(pid_file)!r}, 'w').write(str(daemon.pid))\n"
        "print('tests done', flush=True)\n"))

    # a timeout far beyond the guard: the run returns because the command exited, not because time ran out
    result = run_guarded(TestRunner([sys.executable, "leaves_daemon.py"], cwd=tmp_path, timeout=600))

    assert (result.exit_code, result.timed_out, result.passed) == (0, False, True)
    assert "tests done" in result.output
    assert wait_gone(int(wait_for_file(pid_file)))


def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "for i in range(1000): print(f'line {i}')"]

    result = TestRunner(command, cwd=tmp_path, head_lines=5, tail_lines=10).run()

    lines = result.output.splitlines()
    assert lines[:5] == [f"line {i}" for i in range(5)]
    assert lines[5] == "[… 985 lines omitted …]"
    assert lines[6:] == [f"line {i}" for i in range(990, 1000)]


def test_truncate_output_leaves_short_text_alone() -> None:
    assert truncate_output("a\nb\n", head_lines=1, tail_lines=1) == "a\nb\n"
    assert truncate_output("a\nb\nc\nd\n", head_lines=1, tail_lines=1) == "a\n[… 2 lines omitted …]\nd\n"
    assert truncate_output("x" * 50, max_line_chars=10) == "x" * 10 + " […]"


def test_missing_executable_raises_before_running(tmp_path: Path) -> None:
    with pytest.raises(TestCommandError, match="not-a-real-test-tool"):
        TestRunner("not-a-real-test-tool --all", cwd=tmp_path).check()
    with pytest.raises(TestCommandError, match="not found"):
        TestRunner("./scripts/missing.sh", cwd=tmp_path).run()
    write(tmp_path / "plain.sh", "#!/bin/sh\nexit 0\n", mode=0o644)
    with pytest.raises(TestCommandError, match="not executable"):
        TestRunner(["./plain.sh"], cwd=tmp_path).check()
    with pytest.raises(TestCommandError, match="empty"):
        TestRunner("", cwd=tmp_path).check()


def test_cwd_relative_script_runs(tmp_path: Path) -> None:
    write(tmp_path / "scripts" / "check.sh", "#!/bin/sh\necho from script\n", mode=0o755)

    runner = TestRunner("scripts/check.sh", cwd=tmp_path)
    runner.check()
    result = runner.run()

    assert result.passed and result.output == "from script\n"


def test_go_run_through_the_runner(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    write(tmp_path / "go.mod", "module example.com/m\n\ngo 1.19\n")
    write(tmp_path / "m_test.go", 'package m\n\nimport "testing"\n\nfunc TestX(t *testing.T) { t.Error("nope") }\n')
    cache = tmp_path_factory.getbasetemp() / "go-shared"  # the same caches as tests/test_test_parsers.py
    env = {"GOFLAGS": "-mod=mod", "GOCACHE": str(cache / "build"), "GOPATH": str(cache / "path"),
           "GOTOOLCHAIN": "local", "GOPROXY": "off"}

    result = TestRunner("go test ./...", cwd=tmp_path, env=env).run()

    assert (result.runner, result.failed_ids, result.exit_code) == ("go", ["example.com/m.TestX"], 1)
    assert (result.failures[0].file, result.failures[0].line) == ("m_test.go", 5)
    assert result.summary() == "0 passed, 1 failed"  # -v (the runner adds it to GOFLAGS) counts the passes too


def test_result_summary_values() -> None:
    base = TestResult(["x"], 1, False, False, "", 0.1)
    assert base.summary() == "exit 1"
    assert TestResult(["x"], 0, True, False, "", 0.1, [], 3, 0, "pytest").summary() == "3 passed, 0 failed"
    assert TestResult(["x"], 2, False, False, "", 0.1, [], 0, 0, "pytest").summary() == "0 passed, 0 failed, exit 2"


def test_a_run_names_itself_while_it_lasts_and_not_after(tmp_path: Path) -> None:
    running = tmp_path / "state" / "running-tests"
    script = (f"import os; print(os.environ['{RUN_TOKEN_VAR}'] == open({str(running)!r}).read())")
    result = TestRunner([sys.executable, "-c", script], cwd=tmp_path, running_file=running).run()
    assert result.output.strip() == "True"
    assert not running.exists()


def test_leftovers_of_a_dead_runner_are_killed_and_nothing_else(tmp_path: Path) -> None:
    running = tmp_path / "running-tests"
    running.write_text("feedface")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    leftover = subprocess.Popen(sleep, env={**os.environ, RUN_TOKEN_VAR: "feedface"}, start_new_session=True)
    bystander = subprocess.Popen(sleep, env={**os.environ, RUN_TOKEN_VAR: "another-run"}, start_new_session=True)
    try:
        time.sleep(0.2)  # both have exec'd: their environment is readable
        assert reap_leftovers(running) == 1
        assert leftover.wait(timeout=10) == -9
        assert bystander.poll() is None
        assert not running.exists()
        assert reap_leftovers(running) == 0  # nothing recorded: nothing to do
    finally:
        bystander.kill()
        leftover.kill()


def test_cancel_from_another_thread_kills_the_running_group_and_refuses_later_runs(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    runner = TestRunner([sys.executable, "-c", script], cwd=tmp_path, timeout=600)
    narrowed = runner.with_command(f"{sys.executable} -c pass")
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            runner.run()
        except BaseException as exc:  # noqa: BLE001 - the test wants to see what the thread raised
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    narrowed.cancel()  # the narrowed runner shares the cancel: one call stops them all
    thread.join(30)
    assert not thread.is_alive() and isinstance(outcome[0], KeyboardInterrupt)
    assert gone(pid)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
