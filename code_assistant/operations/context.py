"""`context`: the context a task would get — ranked files, what is shown whole, as an outline or on the map — with
no model, no key and nothing changed. In a session it shows the session's pins too, and the last task's context when
no task is given. Its budget is the room a run's first request would really give the code, when the window a run
starts with is known without asking the model's server (--context-window, or a window remembered for it); else
--context-tokens, and the line says so."""
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
    index, stats = ws.index(focus=task)
    budget, room = ws.settings.context_tokens, "--context-tokens; the model's window, not asked for, may leave less"
    if window := ws.known_window():
        from code_assistant.agent.kit import request_config
        from code_assistant.agent.requests import Requests  # the model client with it: only when there is a window

        tools = ws.tools.for_window(window.tokens, lambda: index)  # what a run's first request would offer
        budget = min(budget, Requests(request_config(ws.settings), window, tools=tools).context_room(index, task))
        room = (f"what a run's first request leaves for code in the {window.tokens}-token window, from "
                f"{window.source}")
    # while files are pending (a first answer on a big tree) the answer comes from the fast signals: loading the
    # embedding model and embedding the candidates' chunks would double its time; later runs embed as usual
    embed_budget = 0 if stats.pending else ws.settings.query_embed_budget
    built = build_context(index, task, budget, must_include=ws.memory.shown(),
                          numbered=options.numbered, embed_budget=embed_budget)
    return ContextOutcome(task=task, context=built, verbose=ws.settings.verbose, room=room)
