"""The agent on a case: the product's own command line (`run --json`) in a subprocess on the case's scratch copy,
with the user's model and options passed through, its index and state in the scratch directory and its run log in
the eval's. What it prints with --json (operations/outcomes.py, or console/render.py's error object) is read as it
is; nothing of the agent stage is imported."""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import code_assistant
from code_assistant.display import PROGRESS_ENV
from code_assistant.errors import EXIT_INTERRUPTED, ConfigError

logger = logging.getLogger(__name__)

STOP_GRACE_S = 60.0  # after SIGINT (the time limit, the eval stopped): the run rolls back, else it is killed
POLL_S = 0.5  # how often a running case looks whether it should stop


@dataclass(frozen=True)
class Attempt:
    exit_code: int | None  # None: stopped at the case's time limit
    outcome: dict[str, Any] = field(default_factory=dict)  # the --json object; {} when it printed none
    seconds: float = 0.0

    @property
    def interrupted(self) -> bool:
        """Stopped from outside (Ctrl-C, SIGTERM), not by the case: the case is not finished."""
        return self.exit_code in (EXIT_INTERRUPTED, -signal.SIGINT, -signal.SIGTERM, -signal.SIGKILL)


def agent_command() -> list[str]:
    """How the product is started here: a checkout's main.py, else the installed `code-assistant` script."""
    checkout = Path(code_assistant.__file__).resolve().parent.parent / "main.py"
    if checkout.is_file():
        return [sys.executable, str(checkout)]
    beside = Path(sys.executable).with_name("code-assistant")
    found = str(beside) if beside.is_file() else shutil.which("code-assistant")
    if found is None:
        raise ConfigError("eval: the code-assistant command was not found beside this Python or on PATH")
    return [found]


def attempt(*, repo: Path, task: str, test_command: str, run_args: tuple[str, ...], log_dir: Path, scratch: Path,
            stderr_file: Path, timeout: float, stop: threading.Event | None = None,
            polled: Callable[[], None] = lambda: None) -> Attempt:
    """One run of the agent on `repo`, to its end, the time limit or `stop` (then SIGINT: it rolls back; then, if it
    does not end, killed); `polled` is called every POLL_S while it runs."""
    argv = [*agent_command(), "--repo", str(repo), "--task", task, "--test-command", test_command, "--json",
            "--log-dir", str(log_dir), "--index-path", str(scratch / "index"), *run_args]
    env = {**os.environ, "CODE_ASSISTANT_STATE_PATH": str(scratch / "state"),
           PROGRESS_ENV: "stderr"}  # its progress lines into the case's log as it runs
    start = time.monotonic()
    stderr_file.parent.mkdir(parents=True, exist_ok=True)
    with stderr_file.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                text=True, encoding="utf-8", errors="replace")
        try:
            while True:
                try:
                    out, _ = proc.communicate(timeout=POLL_S)
                    code: int | None = proc.returncode
                    break
                except subprocess.TimeoutExpired:
                    polled()
                    if stop is not None and stop.is_set():
                        out, code = _stopped(proc), EXIT_INTERRUPTED
                        break
                    if time.monotonic() - start >= timeout:
                        logger.warning("a case ran past its limit of %g s: stopping it (it rolls back)", timeout)
                        out, code = _stopped(proc), None
                        break
        except BaseException:  # the eval is stopped: so is the case
            _stopped(proc)
            raise
    return Attempt(exit_code=code, outcome=_outcome(out), seconds=time.monotonic() - start)


def _stopped(proc: subprocess.Popen[str]) -> str:
    """SIGINT (the run rolls back), then SIGKILL if it does not end; what it had printed."""
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def _outcome(stdout: str) -> dict[str, Any]:
    """The --json object: the last line of stdout that is one."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return {}
