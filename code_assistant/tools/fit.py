"""What the model's tools take of a request — their declarations in OpenAI's `tools` form and the system message's
paragraph on calling them — and which of them a request offers when they do not all fit its budget (agent/requests.py
gives them a third of the room): pure functions of the tools, the task and the budget.

What goes first when the tools take more than their budget: the tools of the user's MCP servers that the task does not
name, the largest schema first, then those it names, the largest first; then our own optional ones (specs.OPTIONAL).
The short list (grep and read) stays. With --tools auto, a small window is offered the short list alone, described in
words (Form.JSON: a line a tool, no JSON schema), and when even that does not fit, no tools at all: auto never stops a
run for its tools. --tools native and json keep the short list; a window too small for it stops the run with an error
that names --no-tools.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from code_assistant import tokens
from code_assistant.model import prompts
from code_assistant.tools import Spec
from code_assistant.tools.box import Form
from code_assistant.tools.specs import OPTIONAL, SHORT_LIST

TOOLS_SHARE = 3  # the tools may take a third of a request's room; the rest is the task's and the code's, which a fix
#                  needs more than more ways to look around
DECLARED_SLACK = 16  # the `tools` list's own brackets, and the server's wrapping of it
PRICED_ANSWER = "the JSON object of changes only"  # the paragraph priced ends so (a plan's words: a question's are shorter)
_WORD = re.compile(r"[\w.-]+")
_COUNTED: dict[str, int] = {}  # a declaration's counted tokens, by its text


@dataclass(frozen=True)
class Offer:
    """The tools a request offers, and how they are told of."""

    names: tuple[str, ...]
    form: Form


def schema_tokens(spec: Spec) -> int:
    """A tool's declaration in OpenAI's `tools` form, in counted tokens (counted once a declaration: every request
    prices its tools)."""
    text = json.dumps(spec.openai())
    if (counted := _COUNTED.get(text)) is None:
        counted = _COUNTED[text] = tokens.count_tokens(text)
    return counted


def declared_tokens(specs: Sequence[Spec]) -> int:
    """The counted tokens of the tools' declarations in a request's `tools`."""
    return sum(schema_tokens(spec) + 1 for spec in specs) + DECLARED_SLACK


def paragraph(specs: Sequence[Spec], form: Form, answer: str, max_calls: int) -> str:
    """The system message's paragraph on calling the tools: in words, each tool in a line, for the JSON form."""
    if form == Form.JSON:
        return prompts.TOOLS_JSON.render(answer=answer, max_calls=max_calls,
                                         tools="\n".join(spec.described() for spec in specs))
    run = ", run (a command in the sandbox, the files read-only)" if any(s.name == "run" for s in specs) else ""
    return prompts.TOOLS_NATIVE.render(answer=answer, max_calls=max_calls, run=run)


def price(specs: Sequence[Spec], form: Form, max_calls: int) -> int:
    """The counted tokens offering `specs` in `form` takes of a request (0 for none)."""
    if not specs:
        return 0
    told = tokens.count_tokens(paragraph(specs, form, PRICED_ANSWER, max_calls))
    return told + (declared_tokens(specs) if form == Form.NATIVE else 0)


def is_named(spec: Spec, task: str) -> bool:
    """Whether the task names an MCP tool: its server, its own name or its name as the model sees it, as a word."""
    words = {w.strip(".-").lower() for w in _WORD.findall(task)}
    own = spec.name.partition("__")[2]
    return any(name.lower() in words for name in (spec.server, spec.name, own) if name)


def leave_out_order(specs: Sequence[Spec], task: str) -> list[str]:
    """The tools that may be left out, in the order they go: the MCP servers' tools the task does not name (largest
    schema first), those it names (largest first), then our own optional ones. The short list is not in it."""
    servers = sorted((s for s in specs if s.server), key=lambda s: (is_named(s, task), -schema_tokens(s)))
    ours = {s.name for s in specs if not s.server}
    return [s.name for s in servers] + [name for name in OPTIONAL if name in ours]


def fit(specs: Sequence[Spec], form: Form, *, budget: int, task: str, max_calls: int, auto: bool,
        small: bool) -> Offer:
    """The tools of `specs` a request offers, priced within `budget` counted tokens. `auto`: --tools auto, which may
    describe the tools in words and, at the last, offer none; `small`: the window is one auto offers only the short
    list in words; `max_calls`: what the paragraph says an answer may make."""

    def cost(offered: Sequence[Spec], told: Form) -> int:
        return price(offered, told, max_calls)

    kept = list(specs)
    if auto and small:
        kept, form = [s for s in kept if s.name in SHORT_LIST], Form.JSON
    for name in leave_out_order(kept, task):
        if cost(kept, form) <= budget:
            break
        kept = [s for s in kept if s.name != name]
    if cost(kept, form) > budget and auto:
        if form == Form.NATIVE and cost(kept, Form.JSON) <= budget:
            return Offer(tuple(s.name for s in kept), Form.JSON)
        kept = []
    return Offer(tuple(s.name for s in kept), form)
