"""Codebase chat (--ask): answer a question from the same context builder, with file:line citations; never edits. A
reasoning model's reasoning blocks are left out of the answer shown and returned."""
from __future__ import annotations

from collections.abc import Callable

from code_assistant.agent.conversation import Conversation
from code_assistant.agent.exchange import exchange
from code_assistant.agent.memory import Memory
from code_assistant.agent.requests import ASK_ANSWER, QuestionRequest, Requests
from code_assistant.agent.waiting import SILENT, Status
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.index.indexer import RepoIndex
from code_assistant.model.chat import ChatModel, ChatResponse
from code_assistant.retrieve.context import Context
from code_assistant.settings import Settings
from code_assistant.tools.box import Toolbox


def answer_question(index: RepoIndex, model: ChatModel, question: str, settings: Settings,
                    on_token: Callable[[str], None] | None = None,
                    say: Callable[[str], None] = lambda line: None,
                    memory: Memory | None = None, tools: Toolbox | None = None,
                    status: Status = SILENT) -> tuple[ChatResponse, Context]:
    """The answer and the context it was given; a server that names a smaller window is asked once more, with the
    context built again to fit it. `memory`: a session's pins, shown too; `tools`: what the model may call to look
    around first (the read-only ones)."""
    conversation = Conversation(Requests(settings, model.window, memory=memory, tools=tools))
    context = conversation.open(QuestionRequest(index, question))
    assert context is not None
    say(f"[Context: {len(context.files)} files, {context.tokens} tokens]")
    say(f"[Asking {model.name}...]")
    if tools is not None:
        tools.new_answer()
    response = exchange(model, conversation, tools=tools, on_token=on_token, say=say, answer=ASK_ANSWER, status=status)
    response.text = split_reasoning(response.text).answer or response.text  # all reasoning (cut off): shown as is
    assert conversation.context is not None
    return response, conversation.context
