"""Codebase chat: answer a question from the same context builder, with file:line citations; never edits."""
from __future__ import annotations

import logging
from collections.abc import Callable

from code_assistant.index.indexer import RepoIndex
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse
from code_assistant.retrieve.context import Context, build_context
from code_assistant.settings import EMBED_BUDGETS

logger = logging.getLogger(__name__)


def answer_question(index: RepoIndex, model: ChatModel, question: str, budget: int,
                    on_token: Callable[[str], None] | None = None, embed_budget: int | None = EMBED_BUDGETS["local"]
                    ) -> tuple[ChatResponse, Context]:
    context = build_context(index, question, budget, numbered=True, embed_budget=embed_budget)
    text = prompts.ASK.render(question=question, context=context.render() or "(no files indexed)")
    logger.info("prompt %s with %d files", prompts.ASK.version, len(context.files))
    response = model.complete([{"role": "user", "content": text}], on_token=on_token)
    return response, context
