"""`ask`: answer a question about the repository from the same context builder, with file:line citations; never
edits. In a session the answer knows the session's pins."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import AskOptions
from code_assistant.operations.outcomes import AskOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: AskOptions) -> AskOutcome:
    from code_assistant.agent.kit import request_config
    from code_assistant.agent.question import answer_question, not_in_repository
    from code_assistant.errors import UsageError

    if not options.question.strip():
        raise UsageError("ask needs a question")
    model = ws.model.with_(schema=None)  # free text, its own usage
    index, _ = ws.index(focus=options.question)  # a big tree's first question: its files first, the rest after
    display = ws.display
    tools_for = ws.tools.for_model(model, read_only=True)
    tools = tools_for(ws.settings.repo, lambda: ws.quiet_index(focus=options.question)) if tools_for else None
    response, context = answer_question(index, model, options.question, request_config(ws.settings), memory=ws.memory,
                                        on_token=display.answer_tokens, say=display.say, tools=tools,
                                        status=display.status)
    display.end_stream()
    ws.count(model.usage, None)
    limit = (f"the answer limit ({model.window.reserve} tokens)" if ws.settings.server_url
             else "the model's answer limit")
    return AskOutcome(answer=response.text, cut_off=response.cut_off, files=context.paths, usage=model.usage,
                      limit=limit, shown=display.answer_tokens is not None,
                      not_in_repository=not_in_repository(response.text, index.gate, index.files))
