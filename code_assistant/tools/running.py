"""The `run` tool: a command the model runs to look around — one failing test alone, a value printed — in the test
sandbox (network off but for loopback, HOME hidden, the secrets held back) with the working tree mounted read-only:
what the command writes there fails, and the tree is as it was after. Its exit code, duration and the head and tail of
its output are returned as data; a command past its timeout is killed with its whole process group."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from code_assistant.tools import Result, Tool, integer, string
from code_assistant.tools.specs import RUN, RUN_TIMEOUT_S
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import Sandbox

HEAD_LINES, TAIL_LINES = 40, 80  # of its output


@dataclass
class Running:
    repo: Path
    sandbox: Sandbox
    running_file: Path | None = None  # named while a command runs: a later run stops it if this one is killed

    def tools(self) -> list[Tool]:
        return [Tool(RUN, self.run)] if self.sandbox.active else []

    def run(self, arguments: dict[str, Any]) -> Result:
        command = string(arguments, "command")
        timeout = integer(arguments, "timeout", RUN_TIMEOUT_S, high=RUN_TIMEOUT_S) or RUN_TIMEOUT_S
        runner = TestRunner(["/bin/sh", "-c", command], cwd=self.repo, timeout=timeout, head_lines=HEAD_LINES,
                            tail_lines=TAIL_LINES, running_file=self.running_file, sandbox=self.sandbox,
                            read_only=True)
        done = runner.run()
        short = command if len(command) <= 60 else command[:57] + "..."
        if done.timed_out:
            status, line = f"killed after {timeout} s (its timeout)", f"run: {short} → killed after {timeout} s"
        else:
            status = f"exit {done.exit_code} after {done.duration_s:.1f} s"
            line = f"run: {short} → exit {done.exit_code}, {done.duration_s:.1f} s"
        output = done.output.rstrip() or "(no output)"
        text = (f"$ {command}\n{status} (the repository is read-only here: nothing this command wrote was kept)\n"
                f"{output}")
        return Result(text=text, summary=line)
