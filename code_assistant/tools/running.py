"""The `run` tool: a command the model runs to look around — one failing test alone, a value printed — in the test
sandbox (network off but for loopback, HOME hidden, the secrets held back) with the working tree mounted read-only:
what the command writes there fails, and the tree is as it was after. Its exit code and the head and tail of its output
(no timings, paths repo-relative: verify/steady.py) are returned as data; a command past its timeout is killed with
its whole process group."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from code_assistant.tools import Result, Tool
from code_assistant.tools.specs import RUN
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.steady import steady_output

HEAD_LINES, TAIL_LINES = 40, 80  # of its output


class Shell(Protocol):
    def __call__(self, command: str, *, timeout: float, head_lines: int, tail_lines: int) -> TestRunner:
        """A command in the test sandbox, the tree read-only (verify/testing.py's Testing.shell: its running
        processes named, so that a later run stops them if this one is killed)."""
        ...


@dataclass
class Running:
    repo: Path
    shell: Shell  # offered only with the sandbox on

    def tools(self) -> list[Tool]:
        return [Tool(RUN, self.run)]

    def run(self, arguments: dict[str, Any]) -> Result:
        given = RUN.given(arguments)
        command, timeout = given.text("command"), given.number("timeout")
        done = self.shell(command, timeout=timeout, head_lines=HEAD_LINES, tail_lines=TAIL_LINES).run()
        short = command if len(command) <= 60 else command[:57] + "..."
        if done.timed_out:
            status, line = f"killed after {timeout} s (its timeout)", f"run: {short} → killed after {timeout} s"
        else:
            status = f"exit {done.exit_code}"  # its seconds only to the person: the model's text is the same every run
            line = f"run: {short} → exit {done.exit_code}, {done.duration_s:.1f} s"
        output = steady_output(done.output, self.repo).rstrip() or "(no output)"
        text = (f"$ {command}\n{status} (the repository is read-only here: nothing this command wrote was kept)\n"
                f"{output}")
        return Result(text=text, summary=line)
