"""One table of what the assistant can do on a workspace: each operation is `execute(workspace, options) -> outcome`,
its options a frozen record (options.py) and its outcome a typed one (outcomes.py). Every door reaches the same code
through this table: the command line (cli/ parses its subcommands into the options records), the session (session.py
parses its slash commands into the same records), and their help comes from here.

An operation's code is imported when it runs, not when the table is read: the command line is read, and an error in
it reported, before any of the pipeline is loaded."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Flag, auto
from typing import TYPE_CHECKING

from code_assistant.operations import options as o

if TYPE_CHECKING:
    from code_assistant.operations.outcomes import Outcome
    from code_assistant.workspace import Workspace


class Door(Flag):
    """Where a person can reach an operation from."""

    CLI = auto()
    SESSION = auto()
    BOTH = CLI | SESSION


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str  # one line, for both doors' help
    options: type  # its options record
    module: str  # the module of code_assistant.operations whose `execute` does it
    words: str = ""  # what follows the name in a session (`/ask QUESTION`)
    doors: Door = Door.BOTH

    def execute(self, workspace: Workspace, options: object) -> Outcome:
        if not isinstance(options, self.options):
            raise TypeError(f"{self.name} takes {self.options.__name__}, not {type(options).__name__}")
        module = importlib.import_module(f"{__name__}.{self.module}")
        return module.execute(workspace, options)  # type: ignore[no-any-return]


OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("run", "plan, edit, test and fix until green, or roll back", o.RunOptions, "run", "TASK"),
    Operation("ask", "answer a question about the repository with file:line citations; never edits", o.AskOptions,
              "ask", "QUESTION"),
    Operation("context", "show the context a task would get; no model, no key, nothing changed", o.ContextOptions,
              "context", "[TASK]"),
    Operation("test", "run the test command in the sandbox and show its summary", o.TestOptions, "test"),
    Operation("diff", "what the assistant changed that is still in effect, as a diff", o.DiffOptions, "diff"),
    Operation("undo", "take back the last change the assistant made; edits made since by anyone else stay",
              o.UndoOptions, "undo"),
    Operation("add", "pin files (paths or globs) into every task's context", o.PinOptions, "pins", "PATH...",
              Door.SESSION),
    Operation("drop", "unpin files", o.PinOptions, "pins", "PATH...", Door.SESSION),
    Operation("model", "ask another model from now on (without a name: say which)", o.ModelOptions, "model", "[NAME]",
              Door.SESSION),
    Operation("tokens", "model usage and cost so far", o.TokensOptions, "tokens", doors=Door.SESSION),
    Operation("search", "the repository's own ranking for a text: the best files and their best lines",
              o.ToolOptions, "look", "QUERY"),
    Operation("grep", "a regular expression over the repository's files: path:line: text", o.ToolOptions, "look",
              "PATTERN"),
    Operation("read", "lines of a file, numbered", o.ToolOptions, "look", "PATH [START [END]]"),
    Operation("symbol", "where a name is defined and where it is used", o.ToolOptions, "look", "NAME"),
    Operation("exec", "a command in the test sandbox, the repository read-only (the model's run tool)",
              o.ToolOptions, "look", "COMMAND"),
    Operation("apply", "apply a plan of edits (the JSON answer format) through the journal and the guardrails",
              o.ApplyOptions, "apply", "PLAN", Door.CLI),
    Operation("index", "embed the whole repository now (resumable; Ctrl-C keeps finished batches)", o.IndexOptions,
              "index", doors=Door.CLI),
    Operation("recover", "take an interrupted run's change out of the repository and stop its leftover tests",
              o.RecoverOptions, "recover", doors=Door.CLI),
)}


def reached_from(door: Door) -> list[Operation]:
    return [op for op in OPERATIONS.values() if op.doors & door]
