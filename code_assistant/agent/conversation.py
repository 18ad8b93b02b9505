"""The conversation with the model, owned in one place: each step's request built to fit the window after what was
said before, every answer and follow-up appended, and the step built again — smaller — when the server names a
smaller window. The asker, the applier and the reproduction step all go through it; nobody else holds the messages.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from code_assistant.agent.requests import Request, Requests
from code_assistant.model.chat import CARRIED, Message, ToolCall
from code_assistant.model.fitting import TOOL_RESULTS_HEAD, clip_text
from code_assistant.retrieve.context import Context
from code_assistant.tools.box import Made

RESULT_SHARE = 4  # one tool result may take at most a quarter of the request's room when it is added


class Conversation:
    def __init__(self, requests: Requests) -> None:
        self.requests = requests
        self.request: Request | None = None  # the step's request
        self.context: Context | None = None  # the context its messages show
        self.last_context: Context | None = None  # the last one any step showed (a follow-up's history carries it)
        self._history: list[Message] = []  # what was said before the step
        self._shown: tuple[str, ...] = ()
        self._note = ""
        self._turns: list[Message] = []  # what was said in the step after its request
        self._messages: list[Message] = []

    @property
    def messages(self) -> list[Message]:
        """What the model is sent next (a copy)."""
        return list(self._messages)

    def open(self, request: Request) -> Context | None:
        """A new step: `request`, built from the window as it is now, after what was said so far (a fix and a
        follow-up carry that; a plan, a reproduction test and a question start afresh). The context it shows."""
        self.request, self._history = request, list(self._messages)
        return self.reopen()

    def reopen(self, *, shown: Sequence[str] = (), note: str = "") -> Context | None:
        """The step's request again, after the same history: with the files the model asked to read shown first, and
        a note about them at its end."""
        self._shown, self._note, self._turns = tuple(shown), note, []
        return self._build()

    def answer(self, text: str) -> None:
        """The model's answer, as the conversation keeps it."""
        self._turns.append({"role": "assistant", "content": text})
        self._messages.append(self._turns[-1])

    def native_round(self, text: str, calls: list[ToolCall], made: list[Made], *,
                     carried: list[dict[str, Any]] | None = None) -> None:
        """An answer that asked for native tool calls, and each call's result as a `tool` message; `carried`: what
        its wire needs back with the calls (the Responses API's encrypted reasoning), kept with the answer."""
        ids = [call.id or f"call_{len(self._turns)}_{n}" for n, call in enumerate(calls)]
        asked: Message = {"role": "assistant", "content": text or None, "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": call.name, "arguments": call.arguments or "{}"}}
            for id_, call in zip(ids, calls)]}
        if carried:
            asked[CARRIED] = carried
        answers: list[Message] = [{"role": "tool", "tool_call_id": id_, "content": self._sized(m.result.text)}
                                  for id_, m in zip(ids, made)]
        self._add(asked, *answers)

    def written_round(self, text: str | None, made: list[Made]) -> None:
        """An answer that wrote its calls as text (None: the answer is in the conversation already, as one that
        asked to read files is), and their results in one user message."""
        results = "\n\n".join(f"## {m.name}({_args(m.arguments)})\n{self._sized(m.result.text)}" for m in made)
        said: list[Message] = [] if text is None else [{"role": "assistant", "content": text}]
        self._add(*said, {"role": "user", "content": f"{TOOL_RESULTS_HEAD}\n{results}"})

    def _sized(self, text: str) -> str:
        return clip_text(text, max(200, self.requests.room() // RESULT_SHARE), "tool result")

    def _add(self, *messages: Message) -> None:
        self._turns.extend(messages)
        self._messages = self.requests.fitted([*self._messages, *messages])

    def tell(self, text: str) -> None:
        """One more user message in the step (the re-ask of an unreadable answer); the whole fitted to the window."""
        self._turns.append({"role": "user", "content": text})
        self._messages = self.requests.fitted([*self._messages, self._turns[-1]])

    def shrink(self) -> None:
        """The step built again after the server named a smaller window: its request comes out smaller, and what was
        said in the step since is fitted after it."""
        turns = self._turns
        self._build()
        if turns:
            self._turns = turns
            self._messages = self.requests.fitted([*self._messages, *turns])

    def _build(self) -> Context | None:
        assert self.request is not None, "open a step first"
        built = self.requests.build(self.request, history=self._history, asked=self._shown, note=self._note)
        self._messages, self.context = built.messages, built.context
        self.last_context = built.context or self.last_context
        return built.context


def _args(arguments: dict) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in arguments.items())
