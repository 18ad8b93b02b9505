"""What each operation is asked to do: one frozen record per operation, built by a door — the command line's parser
(cli/), the session's (session.py) or the MCP server (mcp/server/) — from the arguments the table declares, and
nothing else. Light on purpose: the command line is read, and an
error in it reported, before any of the pipeline is imported."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class RunOptions:
    """A task for the loop, and what only a one-shot run takes: the git workflow and a replay."""

    task: str
    branch: str | None = None  # work on a new branch; "" names it after the task
    worktree: bool = False
    commit: bool = False
    allow_dirty: bool = False
    keep_branch: bool = False
    replay: Path | None = None  # a recorded run's answers stand in for the model


@dataclass(frozen=True)
class AskOptions:
    question: str


@dataclass(frozen=True)
class ContextOptions:
    task: str = ""  # "": the workspace's last task (a session's), else a usage error
    numbered: bool = False  # every line numbered, for file:line citations (the ask request's form)


@dataclass(frozen=True)
class IndexOptions:
    pass


@dataclass(frozen=True)
class RecoverOptions:
    pass


@dataclass(frozen=True)
class UndoOptions:
    pass


@dataclass(frozen=True)
class TestOptions:
    __test__ = False  # not a pytest class, whatever its name


@dataclass(frozen=True)
class DiffOptions:
    pass


@dataclass(frozen=True)
class PinOptions:
    """Files to pin into every task's context (`add`), or to unpin (`drop`: paths or globs of pinned files)."""

    add: tuple[str, ...] = field(default_factory=tuple)
    drop: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ModelOptions:
    name: str = ""  # "": only say which model is asked


@dataclass(frozen=True)
class TokensOptions:
    pass


@dataclass(frozen=True)
class ApplyOptions:
    """A plan of edits in the answer format (`{"changes": [...]}`, SEARCH/REPLACE blocks or a unified diff)."""

    plan: str
    label: str = "apply"  # what undo calls the change


@dataclass(frozen=True)
class ToolOptions:
    """One of the model's tools, called from a door: the operation's name and the tool's arguments, as the model would
    give them."""

    tool: str
    arguments: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class McpAddOptions:
    """An MCP server for the user's own config: `command` is its command and arguments, or one URL."""

    name: str
    command: tuple[str, ...]
    env: tuple[str, ...] = field(default_factory=tuple)  # NAME=VALUE
    replace: bool = False  # over a server of the same name


@dataclass(frozen=True)
class McpListOptions:
    pass


@dataclass(frozen=True)
class McpRemoveOptions:
    name: str



# Any operation's options record: what a door makes of a person's or an agent's words, and the table executes.
Options = (RunOptions | AskOptions | ContextOptions | IndexOptions | RecoverOptions | UndoOptions | TestOptions
           | DiffOptions | PinOptions | ModelOptions | TokensOptions | ApplyOptions | ToolOptions | McpAddOptions
           | McpListOptions | McpRemoveOptions)
