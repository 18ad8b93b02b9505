"""The test command as a workspace holds it: read once from the settings, the sandbox resolved once and only on first
need (a command that runs no test needs none; none to be had is a ConfigError before anything is touched), and the
runners made from them — the run's, a best-of-N attempt's (its processes named apart), the model's `run` tool's (the
tree read-only). A running test command is named in `running`, so that a later run can stop it if this one is
killed. The runner's module is imported when a runner is made: a command that runs no test never loads it."""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from code_assistant.settings import Settings
    from code_assistant.verify.runner import TestRunner
    from code_assistant.verify.sandbox import Sandbox


class Testing:
    """The test `command` on the repository `repo` (or on another tree given to a runner), each run cut at `timeout`
    seconds; `sandbox`: resolves the sandbox, called once."""

    def __init__(self, command: str, *, repo: Path, timeout: float, running: Path,
                 sandbox: Callable[[], Sandbox]) -> None:
        self.command = command
        self.repo = repo
        self.timeout = timeout
        self.running = running
        self._resolve = sandbox

    @classmethod
    def of(cls, settings: Settings, sandbox: Callable[[], Sandbox]) -> Testing:
        return cls(settings.test_command, repo=settings.repo, timeout=settings.test_timeout,
                   running=settings.repo_state_dir / "running-tests", sandbox=sandbox)

    @functools.cached_property
    def sandbox(self) -> Sandbox:
        """What the test command may write, read and reach, resolved on first need."""
        return self._resolve()

    def check(self) -> None:
        """The test command can start (a TestCommandError, exit 2, before anything is touched); no sandbox is
        resolved for it."""
        from code_assistant.verify.runner import TestRunner

        TestRunner(self.command, cwd=self.repo, timeout=self.timeout, running_file=self.running).check()

    def runner(self, cwd: Path | None = None, *, candidate: int | None = None) -> TestRunner:
        """The test command in the sandbox, on the repository (or on `cwd`: a worktree of it, a best-of-N attempt's
        scratch copy, whose running tests are named apart)."""
        from code_assistant.verify.runner import TestRunner

        running = self.running if candidate is None else self.running.with_name(f"{self.running.name}-{candidate}")
        return TestRunner(self.command, cwd=cwd or self.repo, timeout=self.timeout, running_file=running,
                          sandbox=self.sandbox)

    def shell(self, command: str, *, cwd: Path, timeout: float, head_lines: int, tail_lines: int) -> TestRunner:
        """The model's `run` tool: a command in the test sandbox with the tree read-only."""
        from code_assistant.verify.runner import TestRunner

        return TestRunner(["/bin/sh", "-c", command], cwd=cwd, timeout=timeout, head_lines=head_lines,
                          tail_lines=tail_lines, running_file=self.running.with_name("running-tool"),
                          sandbox=self.sandbox, read_only=True)
