"""`search`, `grep`, `read`, `symbol` and `exec`: the tools the model looks around with (tools/), called from a door —
a person's command line or session, another agent over MCP — the same code, the same confinement, the same words.
`exec` is the model's `run` (the table names the tool each calls): a command in the test sandbox with the repository
read-only."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import ToolOptions
from code_assistant.operations.outcomes import ToolOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: ToolOptions) -> ToolOutcome:
    from code_assistant.errors import ConfigError
    from code_assistant.tools.box import call_words
    from code_assistant.tools.specs import OURS
    from code_assistant.waiting import waiting

    box = ws.tools.box()
    name = next((spec.name for spec in OURS if (spec.command or spec.name) == options.tool), options.tool)
    if name not in box.names:
        raise ConfigError(f"{options.tool} needs the sandbox (it runs with the repository read-only); it is off")
    with waiting(ws.display.status, call_words(name, dict(options.arguments))):
        made = box.call(name, dict(options.arguments))
    return ToolOutcome(tool=options.tool, text=made.result.text, summary=made.result.summary, error=made.result.error)
