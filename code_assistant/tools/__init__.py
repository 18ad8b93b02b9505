"""The tools a model may call before it answers, to look around: `search`, `grep`, `read` and `symbol` over the
repository as a person may show it (files.py: tracked or not ignored, never a secret, a symlink out, .git or the
assistant's state), and `run`, a command in the test sandbox on the working tree mounted read-only. None writes the
working tree: changes still come only as the plan, through the journal, the guardrails and undo.

Each tool is a Spec (its name, words for the model, the JSON schema of its arguments) and a function of its arguments
to a Result: what the model is shown, and a line for the person. box.py holds them for a run: the cap per step, a
call made twice, results sized to the window.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Spec:
    name: str
    description: str  # written for the model
    parameters: dict[str, Any]  # JSON schema of the arguments (an object)
    read_only: bool = True  # looks only (`ask` gets only these)

    def openai(self) -> dict[str, Any]:
        """The tool as OpenAI's `tools` list declares it."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def described(self) -> str:
        """The tool in words, for a model whose server serves no native tool calls."""
        props = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        args = ", ".join(f"{name}{'' if name in required else '?'}: {spec.get('type', 'any')}"
                         for name, spec in props.items())
        return f"- {self.name}({args}): {self.description}"


@dataclass(frozen=True)
class Result:
    text: str  # what the model is shown
    summary: str  # the person's line, without brackets: 'grep: "max_age" → 14 lines in 3 files'
    error: bool = False  # the call could not be made as asked (the text says why, for the model)


@dataclass(frozen=True)
class Tool:
    spec: Spec
    call: Callable[[dict[str, Any]], Result] = field(compare=False)


class ToolError(ValueError):
    """A call that cannot be made as asked: its message is the result the model is shown."""


def string(arguments: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = arguments.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ToolError(f'"{name}" is required')
        return ""
    if not isinstance(value, str):
        raise ToolError(f'"{name}" must be a string')
    return value


def integer(arguments: dict[str, Any], name: str, default: int | None, *, low: int = 1,
            high: int | None = None) -> int | None:
    value = arguments.get(name, default)
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f'"{name}" must be a whole number') from None
    if number < low:
        raise ToolError(f'"{name}" must be at least {low}')
    return min(number, high) if high is not None else number
