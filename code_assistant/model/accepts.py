"""What a model server takes for a model, as far as it is known, and the request parameters that follow from it.

Whoever builds the model sets what is known (Accepts.known): the user's --wire, the model catalogue's entry (reasoning,
temperature, tools, wire; catalogue.py). The rest is None, "not known": the request is sent as for any
chat model, and a documented refusal (refusals.py) teaches what to send instead — once, with one line for the person,
and for the rest of the session. One Accepts is shared by the copies of a model (best of N's attempts, a question's
free-text model), so what one of them learns the others know.

Reasoning models (OpenAI's o-series and gpt-5 family; https://platform.openai.com/docs/guides/reasoning) take no
temperature but the default, and count their reasoning in the answer's tokens: `max_completion_tokens` (chat) or
`max_output_tokens` (Responses), never `max_tokens`, sized for the reasoning as well as the answer.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from code_assistant.model.catalogue import ModelInfo, Wire
from code_assistant.model.refusals import Lesson

REASONING_ROOM = 25_000  # tokens a reasoning model may reason with before it answers: OpenAI's reasoning guide
#                          recommends reserving at least 25,000 for reasoning and outputs


WHAT: dict[Lesson, str] = {  # what a lesson says of the model, for its line
    Lesson.REASONING: "is a reasoning model: asked without temperature, with room to reason (max_completion_tokens)",
    Lesson.NO_TEMPERATURE: "takes no temperature", Lesson.NO_SEED: "takes no seed",
    Lesson.COMPLETION_TOKENS: "takes max_completion_tokens, not max_tokens",
    Lesson.MAX_TOKENS: "takes max_tokens, not max_completion_tokens",
    Lesson.NO_REASONING_EFFORT: "takes no reasoning effort (--reasoning-effort is not sent)",
    Lesson.NO_ENCRYPTED_REASONING: "returns no encrypted reasoning (it is not asked for)",
    Lesson.RESPONSES: "is served by the Responses API only: asked at /responses",
    Lesson.REASONING_BACK: "thinks with its tool calls: each tool-call turn goes back with its reasoning_content",
    Lesson.SIGNATURE_BACK: "signs its tool calls: a call without its thought signature goes back with the "
                           "placeholder Google documents",
}


@dataclass
class Accepts:
    """What the server takes for the model. None: not known (sent as for any chat model; a refusal teaches)."""

    wire: Wire = Wire.CHAT
    wire_chosen: bool = False  # --wire said so: a refusal does not change it
    reasoning: bool | None = None  # a reasoning model
    temperature: bool | None = None  # takes a temperature (a reasoning model: only when known to)
    seed: bool | None = None
    completion_tokens: bool | None = None  # max_completion_tokens in place of max_tokens
    reasoning_effort: bool | None = None
    encrypted_reasoning: bool | None = None  # Responses: its reasoning returned encrypted, carried between turns
    tools: bool | None = None  # native tool calls (False: described in words)
    reasoning_back: bool = False  # DeepSeek's thinking mode refused a tool-call turn without reasoning_content
    signature_back: bool = False  # Gemini refused a call without its thought signature
    structured: bool | None = None  # response_format (False: free text from the start)
    max_output: int | None = None  # the most tokens an answer may have (a catalogue's output limit)
    learned: set[Lesson] = field(default_factory=set)
    version: int = 0  # one more for every lesson: a request built before a lesson is asked again, not refused
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def known(cls, info: ModelInfo | None, wire: str | None = None) -> Accepts:
        """What is known before the first request: the user's --wire, and what the model catalogue says of the model
        (None: nothing; a catalogue's "no structured output" is not taken: a server's refusal of it costs nothing)."""
        chosen = Wire(wire) if wire else None
        if info is None:
            return cls(wire=chosen or Wire.CHAT, wire_chosen=chosen is not None)
        return cls(wire=chosen or info.wire, wire_chosen=chosen is not None, reasoning=info.reasoning,
                   temperature=info.temperature, tools=None if info.tools else False, max_output=info.max_output)

    @property
    def sends_temperature(self) -> bool:
        return self.temperature is True or (self.temperature is None and not self.reasoning)

    @property
    def sends_seed(self) -> bool:
        return self.seed is not False

    @property
    def cap_name(self) -> str:
        """The chat completions name of the answer's token limit."""
        wanted = self.completion_tokens if self.completion_tokens is not None else bool(self.reasoning)
        return "max_completion_tokens" if wanted else "max_tokens"

    def sends_effort(self, effort: str | None) -> bool:
        return bool(effort) and self.reasoning_effort is not False and self.reasoning is not False

    @property
    def asks_encrypted_reasoning(self) -> bool:
        return self.encrypted_reasoning is not False and self.reasoning is not False

    def learn(self, lesson: Lesson) -> bool:
        """Take a lesson for the rest of the session; False when it teaches nothing new (asked again the same way,
        the server would refuse again)."""
        with self._lock:
            if lesson in self.learned or (lesson == Lesson.RESPONSES and (self.wire_chosen or
                                                                          self.wire == Wire.RESPONSES)):
                return False
            self.learned.add(lesson)
            self.version += 1
            match lesson:
                case Lesson.REASONING:
                    self.reasoning = True
                    self.temperature = self.temperature if self.temperature is True else False
                    self.completion_tokens = True
                case Lesson.NO_TEMPERATURE:
                    self.temperature = False
                case Lesson.NO_SEED:
                    self.seed = False
                case Lesson.COMPLETION_TOKENS:
                    self.completion_tokens = True
                case Lesson.MAX_TOKENS:
                    self.completion_tokens = False
                case Lesson.NO_REASONING_EFFORT:
                    self.reasoning_effort = False
                case Lesson.NO_ENCRYPTED_REASONING:
                    self.encrypted_reasoning = False
                case Lesson.RESPONSES:
                    self.wire = Wire.RESPONSES
                case Lesson.NO_TOOLS:
                    self.tools = False
                case Lesson.REASONING_BACK:
                    self.reasoning_back = True
                case Lesson.SIGNATURE_BACK:
                    self.signature_back = True
            return True


def answer_cap(reserve: int, window: int, prompt: float, reasoning: bool, most: int | None = None) -> int:
    """The answer's token limit: the window's reserve; for a reasoning model, room to reason as well (REASONING_ROOM
    more), as far as the window holds it after the prompt (`prompt`: its tokens as the server counts them); never over
    the model's own output limit (`most`)."""
    cap = max(reserve, min(reserve + REASONING_ROOM, window - math.ceil(prompt))) if reasoning else reserve
    return min(cap, most) if most else cap


@dataclass(frozen=True)
class Ask:
    """One request as the model seam means it, before a wire renders it (completions.py, responses.py). None: not
    sent."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # in the chat form
    form: str | None = None  # the structured-output form (structured.FORMS), with `schema`
    schema: dict[str, Any] | None = None
    temperature: float | None = None
    seed: int | None = None
    cap: int | None = None  # the answer's tokens at most
    cap_name: str = "max_tokens"  # chat completions: max_tokens or max_completion_tokens
    effort: str | None = None  # the reasoning effort
    encrypted_reasoning: bool = False  # Responses: the reasoning returned encrypted, to carry between turns
    reasoning_back: bool = False  # chat: every tool-call turn with a reasoning_content (DeepSeek's thinking mode)
    signature_back: bool = False  # chat: every tool-call turn's first call with a thought signature (Gemini)
