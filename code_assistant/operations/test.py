"""`test`: the test command, run as a run runs it (in the sandbox, in its process group, with its timeout), and its
parsed summary."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import TestOptions
from code_assistant.operations.outcomes import TestOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: TestOptions) -> TestOutcome:
    from code_assistant.agent.verifier import run_tests

    ws.tests.check()
    runner = ws.tests.runner()
    ws.say(f"[Testing: {ws.settings.test_command}]")
    return TestOutcome(command=ws.settings.test_command, result=run_tests(runner, ws.display.status, "Testing"))
