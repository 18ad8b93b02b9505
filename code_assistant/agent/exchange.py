"""One exchange with the model, the same for a run (asker.py) and for --ask (question.py): the conversation's
messages sent, the answer streamed with the reasoning blocks left out, and, when the server names a smaller window,
the conversation's step built again to fit it and sent once more."""
from __future__ import annotations

import logging
from collections.abc import Callable

from code_assistant.agent.conversation import Conversation
from code_assistant.answers.reasoning import ReasoningFilter
from code_assistant.model.chat import ChatModel, ChatResponse, ContextOverflow, Message

logger = logging.getLogger(__name__)


def exchange(model: ChatModel, conversation: Conversation, *, on_token: Callable[[str], None] | None = None,
             say: Callable[[str], None] = lambda line: None) -> ChatResponse:
    """The model's answer to the conversation; on a ContextOverflow (the model's window now says the server's size),
    its answer to the conversation's step built again, smaller."""
    try:
        return _streamed(model, conversation.messages, on_token)
    except ContextOverflow as exc:
        logger.info("%s; asking again with a smaller request", exc)
        say(f"[Context window: {model.window.tokens} tokens, from the server's refusal; asking again with a smaller "
            f"request]")
        conversation.shrink()
        return _streamed(model, conversation.messages, on_token)


def _streamed(model: ChatModel, messages: list[Message], on_token: Callable[[str], None] | None) -> ChatResponse:
    """One chat call, its answer streamed to on_token with the reasoning blocks left out."""
    if on_token is None:
        return model.complete(messages)
    shown = ReasoningFilter(on_token)
    try:
        return model.complete(messages, on_token=shown)
    finally:
        shown.close()
