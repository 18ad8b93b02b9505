"""`context`: the context a task would get — ranked files, what is shown whole, as an outline or on the map — with
no model, no key and nothing changed. In a session it shows the session's pins too, and the last task's context when
no task is given."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import ContextOptions
from code_assistant.operations.outcomes import ContextOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: ContextOptions) -> ContextOutcome:
    from code_assistant.errors import UsageError
    from code_assistant.retrieve.context import build_context

    task = options.task.strip() or ws.last_task
    if not task:
        raise UsageError("context needs a task (no task yet)")
    index, _ = ws.index()
    built = build_context(index, task, ws.settings.context_tokens, must_include=ws.memory.shown(),
                          numbered=options.numbered, embed_budget=ws.settings.query_embed_budget)
    return ContextOutcome(task=task, context=built, verbose=ws.settings.verbose)
