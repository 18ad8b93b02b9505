"""Codebase chat: answer a question from the same context builder, with file:line citations; never edits. A reasoning
model's reasoning blocks are left out of the answer shown and returned."""
from __future__ import annotations

import logging
from collections.abc import Callable

from code_assistant.agent.memory import Memory
from code_assistant.agent.requests import Requests
from code_assistant.edit.reasoning import ReasoningFilter, split_reasoning
from code_assistant.index.indexer import RepoIndex
from code_assistant.model.chat import ChatModel, ChatResponse, ContextOverflow, Message
from code_assistant.retrieve.context import Context
from code_assistant.settings import Settings

logger = logging.getLogger(__name__)


def answer_question(index: RepoIndex, model: ChatModel, question: str, settings: Settings,
                    on_token: Callable[[str], None] | None = None,
                    say: Callable[[str], None] = lambda line: None,
                    memory: Memory | None = None) -> tuple[ChatResponse, Context]:
    """The answer and the context it was given; a server that names a smaller window is asked once more, with the
    context built again to fit it."""
    requests = Requests(settings, model.window, memory=memory)
    messages, context = requests.question(index, question)
    say(f"[Context: {len(context.files)} files, {context.tokens} tokens]")
    say(f"[Asking {model.name}...]")
    try:
        response = _complete(model, messages, on_token)
    except ContextOverflow as exc:
        logger.warning("%s; asking again with a smaller context", exc)
        say(f"[Context window: {model.window.tokens} tokens, from the server's refusal; asking again with a smaller "
            f"context]")
        messages, context = requests.question(index, question)
        response = _complete(model, messages, on_token)
    response.text = split_reasoning(response.text).answer or response.text  # all reasoning (cut off): shown as is
    return response, context


def _complete(model: ChatModel, messages: list[Message], on_token: Callable[[str], None] | None) -> ChatResponse:
    shown = ReasoningFilter(on_token) if on_token else None
    try:
        return model.complete(messages, on_token=shown)
    finally:
        if shown:
            shown.close()
