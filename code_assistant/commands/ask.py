"""`ask`: answer a question about the repository with file:line citations; never edits."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from code_assistant import console
from code_assistant.commands import parts
from code_assistant.errors import EXIT_OK
from code_assistant.settings import Settings

if TYPE_CHECKING:
    from code_assistant.model.chat import ChatModel


@dataclass(frozen=True)
class AskOptions:
    question: str
    json: bool = False


def ask(settings: Settings, options: AskOptions) -> int:
    from code_assistant.agent import question as asking

    parts.check_server(settings)
    model = parts.chat_model(settings, schema=None)
    say = console.quiet if options.json else console.say
    say(f"[Model: {model.name}, context window {model.window.describe()}]")
    if line := parts.instructions_line(settings):
        say(line)
    index, _ = parts.index(settings, quiet=options.json)
    response, context = asking.answer_question(index, model, options.question, settings,
                                               on_token=console.answer if settings.stream else None, say=say)
    if options.json:
        print(json.dumps({"answer": response.text, "truncated": response.cut_off, "files": context.paths,
                          "tokens": console.usage_json(model.usage)}))
    elif not settings.stream:
        console.say(response.text)
    console.end_stream()
    if response.cut_off:
        say(cut_off_line(settings, model))
    return EXIT_OK


def cut_off_line(settings: Settings, model: ChatModel) -> str:
    limit = f"the answer limit ({model.window.reserve} tokens)" if settings.base_url else "the model's answer limit"
    return f"[The answer was cut off at {limit}: it is incomplete]"
