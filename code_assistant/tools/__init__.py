"""The tools a model may call before it answers, to look around: `search`, `grep`, `read` and `symbol` over the
repository as a person may show it (files.py: tracked or not ignored, never a secret, a symlink out, .git or the
assistant's state), and `run`, a command in the test sandbox on the working tree mounted read-only. None writes the
working tree: changes still come only as the plan, through the journal, the guardrails and undo.

Each tool is a Spec (its name, words for the model, its arguments) and a function of its arguments to a Result: what
the model is shown, and a line for the person. Our own tools are declared in specs.py, each argument once (an
Argument: its name, type, words and default): the model's JSON schema is made from it here, and every other door
(the command line, the session, the MCP server) makes its own form from the same declaration. box.py holds the tools
for a run: the cap per step, a call made twice, results sized to the window.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", list: "array", dict: "object"}


@dataclass(frozen=True)
class Argument:
    """One argument of a tool or an operation, declared once. Each door makes its own form of it: the model's and the
    MCP server's JSON schema, the command line's argparse argument, the session's words."""

    name: str
    help: str  # written for the model; a person reads the same words in --help
    type: type = str  # str, int, bool (a switch), list (of words) or dict (a JSON object, or its text)
    required: bool = False
    default: Any = None  # what is taken when it is not given (None: nothing, or a rule `help` says)
    flag: str = ""  # on the command line an option (`-k`, `--glob`), not a word in order; a session has no options
    words: bool = False  # free text: the command line's words joined by spaces (a session's line: its last word runs
    #                      to the end of the line anyway)
    metavar: str = ""  # the word that stands for it in a usage line (default: its name)
    low: int = 1  # a number's least (less is an error the model is told)
    high: int | None = None  # a number's most (more is taken as this)

    @property
    def described(self) -> str:
        """Its help, with its default when it has one (a default that is its `high` too: the help says "at most")."""
        said = self.default is None or self.type is bool or self.default == self.high
        return self.help if said else f"{self.help} (default {self.default})"

    def schema(self) -> dict[str, Any]:
        """Its JSON schema, as the model's tools declare it."""
        schema: dict[str, Any] = {"type": _JSON_TYPES[self.type], "description": self.described}
        return {**schema, "items": {"type": "string"}} if self.type is list else schema


def parameters(arguments: tuple[Argument, ...]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments (an object)."""
    return {"type": "object", "properties": {a.name: a.schema() for a in arguments},
            "required": [a.name for a in arguments if a.required]}


@dataclass(frozen=True)
class Spec:
    name: str
    description: str  # written for the model
    parameters: dict[str, Any]  # JSON schema of the arguments (an object)
    read_only: bool = True  # looks only (`ask` gets only these); our own that do not: run in the sandbox
    arguments: tuple[Argument, ...] = ()  # as declared (our own tools: the parameters are made from them)
    server: str = ""  # the user's MCP server the tool is of ("": one of our own)
    summary: str = ""  # our own: a person's line for it, in the command line's and the session's help
    command: str = ""  # our own: its name at a person's doors when not its own (`exec` calls `run`)
    agents: bool = True  # our own: other agents reach it too, through our MCP server
    short: bool = False  # in the short list: what a small window is offered, and never left out to fit one
    leave_out: int = 0  # its turn among our own tools left out to fit a window (1 goes first; 0: never)

    @classmethod
    def declared(cls, name: str, description: str, *arguments: Argument, summary: str, read_only: bool = True,
                 command: str = "", agents: bool = True, short: bool = False, leave_out: int = 0) -> Spec:
        """One of our tools, from its arguments' declarations, with what every door makes of it."""
        return cls(name, description, parameters(arguments), read_only=read_only, arguments=arguments,
                   summary=summary, command=command, agents=agents, short=short, leave_out=leave_out)

    def argument(self, name: str) -> Argument:
        """Its argument of that name (a handler asking for one it does not declare is a bug, not the model's)."""
        found = next((a for a in self.arguments if a.name == name), None)
        if found is None:
            raise KeyError(f"{self.name} declares no argument {name!r}")
        return found

    def given(self, arguments: dict[str, Any]) -> Given:
        """A call's arguments, read against this declaration."""
        return Given(self, arguments)

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


@dataclass(frozen=True)
class Given:
    """A call's arguments read as its tool declares them: each of its type, checked, its declared default when it is
    not given; what the model got wrong is a ToolError, its message written for the model."""

    spec: Spec
    arguments: dict[str, Any]

    def text(self, name: str) -> str:
        """A string argument ("" when it is optional and not given)."""
        return string(self.arguments, name, required=self.spec.argument(name).required)

    def number(self, name: str) -> int:
        """A whole number that is required or has a default."""
        value = self.optional_number(name)
        if value is None:
            raise ToolError(f'"{name}" is required')
        return value

    def optional_number(self, name: str, *, low: int | None = None) -> int | None:
        """A whole number, None when it is not given and has no default (`low`: a least that depends on another)."""
        argument = self.spec.argument(name)
        return integer(self.arguments, name, argument.default, low=argument.low if low is None else low,
                       high=argument.high)


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
