"""One table of what the assistant can do on a workspace: each operation is `execute(workspace, options) -> outcome`,
its options a frozen record (options.py) and its outcome a typed one (outcomes.py). Every door reaches the same code
through this table — the command line (cli/), the session (session.py), the MCP server (mcp/server/) — and each makes
its form of an operation from the entry here: its help, its arguments (each declared once, as an Argument: the
model's tools' own for those that call one, tools/specs.py) and which doors reach it.

The table imports each operation's module and holds its `execute` ("go to definition" leads from a door to the
code); those modules import the pipeline inside `execute`, so the command line is read, and an error in it reported,
before any of the pipeline is loaded."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Flag, StrEnum, auto
from typing import TYPE_CHECKING, Any

from code_assistant.operations import (
    apply,
    ask,
    context,
    diff,
    index,
    look,
    model,
    pins,
    recover,
    run,
    servers,
    test,
    tokens,
    undo,
)
from code_assistant.operations import options as o
from code_assistant.operations.options import Options
from code_assistant.tools import Argument, Spec
from code_assistant.tools.specs import OURS

if TYPE_CHECKING:
    from code_assistant.operations.outcomes import Outcome
    from code_assistant.workspace import Workspace


class Door(Flag):
    """Where an operation is reached from."""

    CLI = auto()
    SESSION = auto()
    MCP = auto()  # another agent, through our MCP server
    PERSON = CLI | SESSION


class Effect(StrEnum):
    """What an operation does to the repository (the MCP server's hints say it to another agent)."""

    LOOKS = "looks"  # reads only
    TESTS = "tests"  # runs the test command in the sandbox; the files stay as they are
    CHANGES = "changes"  # writes the repository's files (undo takes it back) or the user's own configuration


@dataclass(frozen=True)
class Operation:
    name: str  # as typed: `undo`, `/undo`, the MCP tool `undo`; `mcp add` on the command line
    summary: str  # one line, for a person's help (the command line's and the session's)
    options: type  # its options record
    does: Callable[[Workspace, Any], Outcome]  # its module's `execute`, given an options record of that type
    arguments: tuple[Argument, ...] = ()  # what its options record is built from, in every door
    doors: Door = Door.PERSON
    effect: Effect = Effect.CHANGES
    tool: Spec | None = None  # the model's tool it calls (its options: a ToolOptions of the tool's arguments)
    described: str = ""  # for another agent (the MCP server's tool description; `{actions}`: a plan's edit actions);
    #                      a tool's own words by default
    repository: bool = True  # it works on a repository (the command line takes the repository's options for it)
    reports: bool = False  # its outcome is what stdout is for (read by a pipe): its progress lines go to stderr

    @property
    def words(self) -> str:
        """What follows its name in a session, as a usage line says it: `PATH [START [END]]`."""
        shown = ""
        for argument in reversed(positional(self.arguments)):
            word = (argument.metavar or argument.name).upper() + ("..." if argument.type is list else "")
            shown = f"{word} {shown}".strip()
            shown = shown if argument.required else f"[{shown}]"
        return shown

    @property
    def for_agents(self) -> str:
        return self.described or (self.tool.description if self.tool is not None else self.summary)

    def make(self, values: Mapping[str, object]) -> Options:
        """Its options record from the values of its arguments, however a door read them (None: not given)."""
        given = {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()
                 if value is not None}
        if self.tool is not None:
            return o.ToolOptions(tool=self.name, arguments=given)
        made: Options = self.options(**given)
        return made

    def execute(self, workspace: Workspace, options: Options) -> Outcome:
        if not isinstance(options, self.options):
            raise TypeError(f"{self.name} takes {self.options.__name__}, not {type(options).__name__}")
        return self.does(workspace, options)


def positional(arguments: tuple[Argument, ...]) -> list[Argument]:
    """The arguments given as words in order (a session takes only these): all but the options; free text too."""
    return [argument for argument in arguments if not argument.flag or argument.words]


def _calling(spec: Spec) -> Operation:
    """The operation that calls one of the model's own tools, all of it as tools/specs.py declares the tool: its name,
    its line, its arguments; other agents reach it when the tool says so; one that does not only look runs in the
    sandbox."""
    return Operation(spec.command or spec.name, spec.summary, o.ToolOptions, look.execute, spec.arguments,
                     doors=Door.PERSON | Door.MCP if spec.agents else Door.PERSON,
                     effect=Effect.LOOKS if spec.read_only else Effect.TESTS, tool=spec, reports=True)


_TASK = Argument("task", "what to do, in plain words (without it, on a terminal: a session)", required=True,
                 words=True, flag="--task")
_NAME = Argument("name", "the server's name", required=True)

OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("run", "plan, edit, test and fix until green, or roll back", o.RunOptions, run.execute, (_TASK,)),
    Operation("ask", "answer a question about the repository with file:line citations; never edits", o.AskOptions,
              ask.execute, (Argument("question", "the question, in plain words", required=True, words=True),),
              effect=Effect.LOOKS),
    Operation("context", "show the context a task would get; no model, no key, nothing changed", o.ContextOptions,
              context.execute, (Argument("task", "the task whose context to show", words=True),),
              doors=Door.PERSON | Door.MCP, effect=Effect.LOOKS, reports=True,
              described="The ranked first context a task would get: files ranked, those shown and how, as JSON."),
    Operation("test", "run the test command in the sandbox and show its summary", o.TestOptions, test.execute,
              doors=Door.PERSON | Door.MCP, effect=Effect.TESTS,
              described="Run the repository's test command in a sandbox: its summary and the failing tests."),
    Operation("diff", "what the assistant changed that is still in effect, as a diff", o.DiffOptions, diff.execute,
              effect=Effect.LOOKS),
    Operation("undo", "take back the last change the assistant made; edits made since by anyone else stay",
              o.UndoOptions, undo.execute, doors=Door.PERSON | Door.MCP,
              described="Take back the last apply made over MCP (by this server or an earlier one, as the command "
                        "line's undo does); edits made since by anyone else stay."),
    Operation("add", "pin files (paths or globs) into every task's context", o.PinOptions, pins.execute,
              (Argument("add", "files to pin: paths or globs", type=list, required=True, metavar="path"),),
              doors=Door.SESSION),
    Operation("drop", "unpin files", o.PinOptions, pins.execute,
              (Argument("drop", "pinned files to unpin: paths or globs", type=list, required=True, metavar="path"),),
              doors=Door.SESSION),
    Operation("model", "ask another model from now on (without a name: say which)", o.ModelOptions, model.execute,
              (Argument("name", "the model"),), doors=Door.SESSION),
    Operation("tokens", "model usage and cost so far", o.TokensOptions, tokens.execute, doors=Door.SESSION,
              effect=Effect.LOOKS),
    *(_calling(spec) for spec in OURS),
    Operation("apply", "apply a plan of edits (the JSON answer format) through the journal and the guardrails",
              o.ApplyOptions, apply.execute,
              (Argument("plan", 'the plan ({"changes": [...]})', type=dict, required=True),),
              doors=Door.CLI | Door.MCP,
              described='Apply a plan of edits, {"changes": [{"file_path", "action": "modify", "search", '
                        '"replace"}]} (actions: {actions}), through a journal and guardrails; answers the diff, or '
                        "which edits failed and why."),
    Operation("index", "embed the whole repository now (resumable; Ctrl-C keeps finished batches)", o.IndexOptions,
              index.execute, doors=Door.CLI),
    Operation("recover", "take an interrupted run's change out of the repository and stop its leftover tests",
              o.RecoverOptions, recover.execute, doors=Door.CLI),
    Operation("mcp add", "add an MCP server to your own config: its command and arguments, or a URL", o.McpAddOptions,
              servers.execute,
              (_NAME, Argument("command", "the command and its arguments, or a URL (after --)", type=list,
                               required=True),
               Argument("env", "a variable for the server (repeatable)", type=list, flag="--env", metavar="NAME=VALUE"),
               Argument("replace", "replace a server of the same name", type=bool, flag="--replace")),
              doors=Door.CLI, repository=False),
    Operation("mcp list", "your MCP servers and the repository's: each that would start in a run is started and said "
              "with its tools", o.McpListOptions, servers.execute, doors=Door.CLI, effect=Effect.LOOKS),
    Operation("mcp remove", "remove an MCP server from your own config", o.McpRemoveOptions, servers.execute, (_NAME,),
              doors=Door.CLI, repository=False),
)}


def reached_from(door: Door) -> list[Operation]:
    return [op for op in OPERATIONS.values() if op.doors & door]
