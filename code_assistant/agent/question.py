"""Codebase chat (--ask): answer a question from the same context builder, with file:line citations; never edits. A
reasoning model's reasoning blocks are left out of the answer shown and returned; the citations are checked against
the repository, through the read gate."""
from __future__ import annotations

from collections.abc import Callable, Collection

from code_assistant.agent.conversation import Conversation
from code_assistant.agent.exchange import context_line, exchange
from code_assistant.agent.requests import ASK_ANSWER, QuestionRequest, RequestConfig, Requests
from code_assistant.answers.citations import citations
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.gate import Gate, Refused
from code_assistant.index.indexer import RepoIndex
from code_assistant.memory import Memory
from code_assistant.model.chat import ChatModel, ChatResponse
from code_assistant.model.names import shown as shown_name
from code_assistant.retrieve.context import Context
from code_assistant.tools.box import Toolbox
from code_assistant.waiting import SILENT, Status


def answer_question(index: RepoIndex, model: ChatModel, question: str, config: RequestConfig,
                    on_token: Callable[[str], None] | None = None,
                    say: Callable[[str], None] = lambda line: None,
                    memory: Memory | None = None, tools: Toolbox | None = None,
                    status: Status = SILENT) -> tuple[ChatResponse, Context]:
    """The answer and the context it was given; a server that names a smaller window is asked once more, with the
    context built again to fit it. `memory`: a session's pins, shown too; `tools`: what the model may call to look
    around first (the read-only ones)."""
    conversation = Conversation(Requests(config, model.window, memory=memory, tools=tools))
    context = conversation.open(QuestionRequest(index=index, question=question))
    assert context is not None
    say(context_line(context))
    say(f"[Asking {shown_name(model.name)}...]")
    if tools is not None:
        tools.new_answer()
    response = exchange(model, conversation, tools=tools, on_token=on_token, say=say, answer=ASK_ANSWER, status=status)
    response.text = split_reasoning(response.text).answer or response.text  # all reasoning (cut off): shown as is
    assert conversation.context is not None
    return response, conversation.context


def not_in_repository(answer: str, gate: Gate, indexed: Collection[str]) -> list[str]:
    """The answer's citations (`path:line`, `path:start-end`) of a file the repository does not have (or the read
    gate does not show), or of lines past the file's end. A path that names no file but ends exactly one indexed
    path (`calc.py` for `src/calc.py`) is that file."""
    flagged = []
    for cited in citations(answer):
        text = _cited_text(gate, cited.path, indexed)
        first, last = sorted((cited.start, cited.end))
        if text is None or first < 1 or last > _line_count(text):
            flagged.append(str(cited))
    return flagged


def _cited_text(gate: Gate, cited: str, indexed: Collection[str]) -> str | None:
    try:
        return gate.read(cited, max_bytes=None)
    except Refused:
        pass
    ending = "/" + cited.removeprefix("./")
    matches = [p for p in indexed if p.endswith(ending)]
    return gate.text(matches[0], max_bytes=None) if len(matches) == 1 else None


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)
