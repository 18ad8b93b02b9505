"""`search`, `grep`, `read`, `symbol` and `exec`: the tools the model looks around with (tools/), called by a person
from the command line or the session — the same code, the same confinement, the same words. `exec` is the model's
`run`: a command in the test sandbox with the repository read-only."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import ToolOptions
from code_assistant.operations.outcomes import ToolOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace

MODEL_NAMES = {"exec": "run"}  # an operation's name where the model's tool has another


def execute(ws: Workspace, options: ToolOptions) -> ToolOutcome:
    from code_assistant.errors import ConfigError
    from code_assistant.tools.box import call_words
    from code_assistant.waiting import waiting

    box = ws.toolbox()
    name = MODEL_NAMES.get(options.tool, options.tool)
    if name not in box.names:
        raise ConfigError(f"{options.tool} needs the sandbox (it runs with the repository read-only); it is off")
    with waiting(ws.display.status, call_words(name, dict(options.arguments))):
        made = box.call(name, dict(options.arguments))
    return ToolOutcome(tool=options.tool, text=made.result.text, summary=made.result.summary, error=made.result.error)
