"""One exchange with the model, the same for a run (asker.py) and for --ask (question.py): the conversation's
messages sent, the answer streamed with the reasoning blocks left out; when the server names a smaller window, the
window said in one line, the conversation's step built again to fit it (with fewer tools, or none, when the window no
longer holds them all), what it shows said again, and sent once more; what a refusal taught the model (a parameter it does not
take, the other wire) is said in one line too. With tools, an answer that asks for calls — native `tool_calls`, or
calls written as a JSON object — has them made and answered, and the model is asked again, until it answers without a
call (that answer is returned) or its calls are spent (then it is told so and offered none)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.agent.conversation import Conversation
from code_assistant.answers.reasoning import ReasoningFilter, split_reasoning
from code_assistant.answers.tool_calls import ToolCallError, WrittenCall, arguments, written_calls
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse, ContextOverflow, Message, ToolsRefused
from code_assistant.model.names import shown as shown_name
from code_assistant.model.window import ContextWindow
from code_assistant.retrieve.context import Context
from code_assistant.tools.box import Form, Made, Toolbox, call_words
from code_assistant.waiting import SILENT, Status, waiting

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Round:
    """An answer that asked for calls, and the calls made for it (for the run log)."""

    response: ChatResponse
    calls: list[WrittenCall]
    made: list[Made]


def exchange(model: ChatModel, conversation: Conversation, *, tools: Toolbox | None = None,
             on_token: Callable[[str], None] | None = None, say: Callable[[str], None] = lambda line: None,
             on_round: Callable[[Round], bool] = lambda round_: False, answer: str = "your answer",
             status: Status = SILENT) -> ChatResponse:
    """The model's answer to the conversation. `on_round`: told of each answer that asked for calls, once they are
    made (the run log, the budget), and True when the exchange must stop there (that answer is returned: the caller
    knows why); `answer`: what the model is told to reply with once its calls are spent. The calls are counted from
    where the caller last started them (Toolbox.new_answer: once per request)."""
    while True:
        response = _complete(model, conversation, tools, on_token, say, status)
        calls = _calls(response, tools)
        if not calls:
            return response
        assert tools is not None  # calls come only from a box
        made = [_made(tools, call, status) for call in calls]
        if response.tool_calls:
            conversation.native_round(_visible(response.text), response.tool_calls, made, carried=response.carried)
        else:
            conversation.written_round(_visible(response.text), made)
        if on_round(Round(response=response, calls=calls, made=made)):
            return response
        if tools is not None and tools.exhausted:
            conversation.tell(prompts.TOOLS_DONE.render(max_calls=tools.max_calls, answer=answer))


def _complete(model: ChatModel, conversation: Conversation, tools: Toolbox | None,
              on_token: Callable[[str], None] | None, say: Callable[[str], None], status: Status) -> ChatResponse:
    """One chat call for the conversation, built again smaller once if the server names a smaller window, and in the
    written form once if it refuses native tools."""
    for attempt in range(3):
        declared = tools.declared() if tools is not None else None
        may_call = tools is not None and not tools.exhausted  # the answer may be calls, not the plan's schema
        try:
            response = _streamed(model, conversation.messages, on_token, declared, schema=not may_call, status=status)
            for line in response.notes:  # what the server's refusals taught, once each
                say(line)
            return response
        except ContextOverflow as exc:
            if attempt == 2:
                raise
            logger.info("%s; asking again with a smaller request", exc)
            say(window_line(model.window))
            conversation.shrink()  # the tools too are fitted to the window again
            say(context_line(conversation.context))
        except ToolsRefused as exc:
            if tools is None or tools.form == Form.JSON or attempt == 2:
                raise
            logger.info("%s; describing the tools in words", exc)
            say("[Tools: the model server serves no native tool calls; they are described in the request instead]")
            tools.form = Form.JSON
            conversation.shrink()  # the system message now describes the tools
    raise AssertionError("unreachable")


def window_line(window: ContextWindow) -> str:
    """What a run says when the server names a smaller window: the window, that it is remembered for the next run,
    and the setting that spares even the first refusal."""
    remembered = "; remembered for this server and model" if window.keep is not None else ""
    setting = "" if window.source == "--context-window" else f" (--context-window {window.tokens} sets it)"
    return f"[Window: {window.describe()}{remembered}{setting}]"


def context_line(context: Context | None, label: str = "Context") -> str:
    """What a request shows, in one line: said before it is sent, and again when it is built smaller."""
    return f"[{label}: {len(context.files)} files, {context.tokens} tokens]" if context else f"[{label}: no files]"


def _calls(response: ChatResponse, tools: Toolbox | None) -> list[WrittenCall]:
    """The calls an answer asks for: its native calls, else calls written as text (None with no tools, or none
    left: a spent box answers nothing more, and the answer is read as the plan)."""
    if tools is None or not tools.tools or tools.exhausted:
        return []
    if response.tool_calls:
        calls = []
        for call in response.tool_calls:
            try:
                calls.append(WrittenCall(name=call.name, arguments=arguments(call.arguments)))
            except ToolCallError as exc:
                calls.append(WrittenCall(name=call.name, arguments={"_unreadable": f"{call.arguments} ({exc})"}))
        return calls
    return written_calls(response.text) or []


def _made(tools: Toolbox, call: WrittenCall, status: Status) -> Made:
    """One call made, waited for in the status (a `run` may take a minute, a grep over a large tree ten seconds)."""
    with waiting(status, call_words(call.name, call.arguments)):
        return tools.call(call.name, call.arguments)


def _visible(text: str) -> str:
    answer = split_reasoning(text).answer
    return text if answer == text.strip() else answer


def _streamed(model: ChatModel, messages: list[Message], on_token: Callable[[str], None] | None,
              tools: list[dict] | None, *, schema: bool, status: Status) -> ChatResponse:
    """One chat call, waited for in the status with the pieces received counted, its answer streamed to on_token
    with the reasoning blocks left out."""
    shown = ReasoningFilter(on_token) if on_token is not None else None
    with waiting(status, f"Asking {shown_name(model.name)}") as wait:
        wait.tick("waiting for the first token")
        received = 0

        def piece(text: str) -> None:
            nonlocal received
            received += 1
            wait.tick(f"{received} token{'' if received == 1 else 's'} received")
            if shown is not None:
                shown(text)

        try:
            return model.complete(messages, on_token=piece, tools=tools, schema=schema, on_wait=wait.tick)
        finally:
            if shown is not None:
                shown.close()
