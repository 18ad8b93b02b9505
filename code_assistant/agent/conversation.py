"""The conversation with the model, owned in one place: each step's request built to fit the window after what was
said before, every answer and follow-up appended, and the step built again — smaller — when the server names a
smaller window. The asker, the applier and the reproduction step all go through it; nobody else holds the messages.
"""
from __future__ import annotations

from collections.abc import Sequence

from code_assistant.agent.requests import Request, Requests
from code_assistant.model.chat import Message
from code_assistant.retrieve.context import Context


class Conversation:
    def __init__(self, requests: Requests) -> None:
        self.requests = requests
        self.request: Request | None = None  # the step's request
        self.context: Context | None = None  # the context its messages show
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
        return built.context
