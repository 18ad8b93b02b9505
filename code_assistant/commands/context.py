"""`context`: index the repository and show the context a task would get (no model, no key, nothing changed)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from code_assistant import console
from code_assistant.commands import parts
from code_assistant.errors import EXIT_OK
from code_assistant.settings import Settings


@dataclass(frozen=True)
class ContextOptions:
    task: str
    json: bool = False


def context(settings: Settings, options: ContextOptions) -> int:
    from code_assistant.retrieve.context import build_context

    index, _ = parts.index(settings, quiet=options.json)
    built = build_context(index, options.task, settings.context_tokens, embed_budget=settings.query_embed_budget)
    if options.json:
        print(json.dumps({"files": [r.path for r in built.ranking], "tokens": built.tokens,
                          "context_files": built.paths, "map_files": built.map, "listed_files": built.listed,
                          "chunks_embedded": built.embedded}))
        return EXIT_OK
    console.say(built.render() or "(no files indexed)")  # what the model would be shown
    console.say("")
    console.say(f"[Context: {len(built.files)} relevant files selected]")
    for f in built.files:
        console.say(f"  {f.path}  ({f.mode}, {f.tokens} tokens)")
    more = [*([f"a map of {len(built.map)} more files (a line each)"] if built.map else []),
            *([f"{len(built.listed)} more paths"] if built.listed else [])]
    if more:
        console.say(f"  and {' and '.join(more)} (the model may ask to read one)")
    console.say(f"Total: {built.tokens} tokens of {built.budget}")
    if settings.verbose:
        for line in built.budget_log:
            console.say(f"  {line}")
    return EXIT_OK
