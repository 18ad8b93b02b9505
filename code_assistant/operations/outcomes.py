"""What each operation ends with: a typed record, the same through every door. The console renders it as text or
(`--json`) as the object `as_json()` gives; `exit_code` is the command line's exit status for it. Light on purpose
(the pipeline's types are named for type checking only), so that the console can tell outcomes apart without
loading the pipeline."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from code_assistant.agent.stop import Stop
from code_assistant.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

if TYPE_CHECKING:
    from code_assistant.agent.candidates import CandidateOutcome
    from code_assistant.agent.state import RunResult
    from code_assistant.edit.history import Undone
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.model.chat import Usage
    from code_assistant.retrieve.context import Context
    from code_assistant.verify.runner import TestResult


@dataclass(frozen=True)
class RunOutcome:
    task: str
    result: RunResult
    sandbox: dict[str, object]

    @property
    def exit_code(self) -> int:
        """0 for green and for a dry run (it did what was asked: showed the plan), 130 interrupted, else 1."""
        if self.result.stop_reason == Stop.INTERRUPTED:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.result.success or self.result.stop_reason == Stop.DRY_RUN else EXIT_FAILED

    def as_json(self) -> dict[str, Any]:
        return {"task": self.task, **result_json(self.result), "sandbox": self.sandbox}


@dataclass(frozen=True)
class AskOutcome:
    answer: str
    cut_off: bool
    files: list[str]
    usage: Usage
    limit: str  # the answer's limit, in words, for the line that says it was cut off
    shown: bool = False  # the answer was streamed to the person as it came
    not_in_repository: list[str] = field(default_factory=list)  # cited path:line the repository does not have
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"answer": self.answer, "truncated": self.cut_off, "files": self.files, "tokens": usage_json(self.usage),
                "not_in_repository": self.not_in_repository}


@dataclass(frozen=True)
class ContextOutcome:
    task: str
    context: Context
    verbose: bool = False  # the budget's log too
    exit_code: int = EXIT_OK
    room: str = ""  # where the budget came from, in words

    def as_json(self) -> dict[str, Any]:
        built = self.context
        return {"files": [r.path for r in built.ranking], "tokens": built.tokens, "budget": built.budget,
                "budget_from": self.room, "context_files": built.paths,
                "map_files": built.map, "listed_files": built.listed, "chunks_embedded": built.embedded}


@dataclass(frozen=True)
class IndexOutcome:
    files: int
    files_embedded: int
    chunks: int
    chunks_embedded: int
    chunks_reused: int
    chunks_stored: int
    seconds: float
    interrupted: bool

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED if self.interrupted else EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"files": self.files, "files_embedded": self.files_embedded, "chunks": self.chunks,
                "chunks_embedded": self.chunks_embedded, "chunks_reused": self.chunks_reused,
                "chunks_stored": self.chunks_stored, "seconds": round(self.seconds, 2), "interrupted": self.interrupted}


@dataclass(frozen=True)
class RecoverOutcome:
    outcomes: list[FileOutcome] | None  # None: no interrupted run had left anything
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"recovered": None if self.outcomes is None else taken_back_json(self.outcomes)}


@dataclass(frozen=True)
class UndoOutcome:
    undone: Undone
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        undone = self.undone
        return {"success": True, "undone": undone.run, "task": undone.task,
                "taken_back": taken_back_json(undone.outcomes),
                "reverted_commit": undone.reverted, "revert_commit": undone.revert_commit}


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest class, whatever its name

    command: str
    result: TestResult

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.result.passed else EXIT_FAILED

    def as_json(self) -> dict[str, Any]:
        result = self.result
        return {"test_command": self.command, "passed": result.passed, "summary": result.summary(),
                "tests_failed": result.failed_ids, "exit": result.exit_code, "timed_out": result.timed_out}


@dataclass(frozen=True)
class InEffect:
    """A finished task whose change is still in the files: what it was asked, and the files it touched."""

    task: str
    files: list[str]


@dataclass(frozen=True)
class DiffOutcome:
    diff: str
    scope: str  # whose changes: "this session", "the last run"
    tasks: list[InEffect] = field(default_factory=list)  # the runs in the diff, newest first
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"diff": self.diff, "scope": self.scope,
                "tasks": [{"task": t.task, "files": t.files} for t in self.tasks]}


@dataclass(frozen=True)
class PinsOutcome:
    pinned: list[str]
    added: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"pinned": self.pinned, "added": self.added, "refused": self.refused}


@dataclass(frozen=True)
class ModelOutcome:
    name: str
    window: str = ""  # the context window in words; "" when the model was only named
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"model": self.name, "context_window": self.window or None}


@dataclass(frozen=True)
class TokensOutcome:
    usage: Usage
    cost_usd: float | None
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {**usage_json(self.usage), "cost_usd": self.cost_usd}


@dataclass(frozen=True)
class ToolOutcome:
    """A tool called by a person: what the model would have been shown, and the line it says."""

    tool: str
    text: str
    summary: str
    error: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.error else EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "summary": self.summary, "result": self.text, "error": self.error}


@dataclass(frozen=True)
class ApplyOutcome:
    """A plan applied: its diff and files, and what did not apply, in the words a model gets."""

    applied: bool
    diff: str = ""
    files: list[str] = field(default_factory=list)
    feedback: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.applied and not self.feedback else EXIT_FAILED

    def as_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "files": self.files, "diff": self.diff, "feedback": self.feedback}


class Change(StrEnum):
    """What `mcp add` or `mcp remove` did to the user's config (the words say it: `[MCP: docs added to PATH]`)."""

    ADDED = "added to"
    REPLACED = "replaced in"
    REMOVED = "removed from"


@dataclass(frozen=True)
class McpConfigOutcome:
    name: str
    config: str  # the user's config file
    change: Change
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.config, "change": self.change.name.lower()}


@dataclass(frozen=True)
class ListedServer:
    """A configured MCP server: whether it starts in a run, and (when it would) whether it started and its tools."""

    name: str
    origin: str
    transport: str
    command: str
    starts: str  # tools/mcp/trust.py's Start
    started: bool | None = None  # None: not tried (it would not start in a run)
    tools: list[str] | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        tried = {} if self.started is None else {"started": self.started, "tools": self.tools, "error": self.error}
        return {"name": self.name, "origin": self.origin, "transport": self.transport, "command": self.command,
                "starts": self.starts, **tried}


@dataclass(frozen=True)
class UnusableServer:
    name: str
    origin: str
    why: str


@dataclass(frozen=True)
class McpListOutcome:
    servers: list[ListedServer]
    unusable: list[UnusableServer]
    config: str  # the user's config file
    exit_code: int = EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {"servers": [s.as_json() for s in self.servers],
                "unusable": [{"name": u.name, "origin": u.origin, "why": u.why} for u in self.unusable]}


Outcome = (RunOutcome | AskOutcome | ContextOutcome | IndexOutcome | RecoverOutcome | UndoOutcome | TestOutcome
           | DiffOutcome | PinsOutcome | ModelOutcome | TokensOutcome | ToolOutcome | ApplyOutcome | McpConfigOutcome
           | McpListOutcome)


# ----- the records' parts, as JSON ------------------------------------------------------------------------------
def usage_json(usage: Usage) -> dict[str, Any]:
    """A run's `tokens`: the server's counts (with `reasoning_tokens`, of the completion's, when the model reasoned,
    and `cached_tokens`, of the prompt's, when a cache served some),
    and `"estimated": true` when some were counted here."""
    counts: dict[str, Any] = {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                              "completion_tokens": usage.completion_tokens}
    if usage.reasoning_tokens:
        counts["reasoning_tokens"] = usage.reasoning_tokens  # of completion_tokens
    if usage.cached_tokens:
        counts["cached_tokens"] = usage.cached_tokens  # of prompt_tokens
    return {**counts, "estimated": True} if usage.estimated else counts


def candidate_json(outcome: CandidateOutcome) -> dict[str, Any]:
    return {"candidate": outcome.number, "passed": outcome.passed, "stop_reason": outcome.stop_reason,
            "iterations": outcome.iterations, "changed_lines": outcome.changed_lines, "tokens": outcome.tokens,
            "cost_usd": outcome.cost_usd, "started_s": outcome.started_s, "seconds": outcome.seconds,
            "chosen": outcome.chosen}


def taken_back_json(outcomes: list[FileOutcome]) -> list[dict[str, Any]]:
    return [{"path": o.path, "outcome": o.fate, "why": o.why, "original": o.original} for o in outcomes]


def result_json(result: RunResult) -> dict[str, Any]:
    return {"success": result.success, "stop_reason": result.stop_reason, "iterations": result.iterations,
            "files_modified": result.files_modified, "rolled_back": result.rolled_back, "message": result.message,
            "tokens": usage_json(result.usage), "cost_usd": result.cost_usd, "log": result.log_path,
            "reproduction": result.reproduction, "candidates": [candidate_json(o) for o in result.candidates],
            "taken_back": taken_back_json(result.taken_back), "verified": result.verified,
            "left_behind": [{"path": left.path, "bytes": left.size} for left in result.left_behind],
            "verification": result.verification, "diff": result.diff, "tools": result.tool_calls}
