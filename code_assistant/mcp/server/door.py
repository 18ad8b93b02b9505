"""The operations behind the MCP server's tools, resources and prompts, one at a time on one workspace per server
process. Each is an operation of the table, so it says what the command line and the session say. What an operation
says while it works, and its waits, are the call's progress (reports.py). The applies of every server process carry
one session id, MCP_SESSION: `undo` takes back the last apply made over MCP, by this process or an earlier one, from
the journals on disk, as the command line's `undo` does (never a person's run or session)."""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from code_assistant import redact
from code_assistant.console import render
from code_assistant.errors import AssistantError
from code_assistant.mcp.server.reports import Call, Progress
from code_assistant.model import prompts
from code_assistant.operations import OPERATIONS, outcomes
from code_assistant.operations import options as o
from code_assistant.settings import Settings

MCP_SESSION = "mcp"  # the session id of every apply made over MCP: one undo history across server processes
APPLY_LABEL = "apply (MCP)"  # what undo calls an apply made over MCP
FIX_NEXT = ("Send that JSON object to this server's `apply` tool, then run its `test` tool; if tests still fail, send "
            "further changes the same way (search text copied from the files as they are then).")
NOT_RUN = "not run here (the `test` tool runs them)"


class McpDoor:
    """The operations behind the server, one at a time on one workspace; `call` is the tool call under way."""

    def __init__(self, settings: Settings) -> None:
        from code_assistant.workspace import Display, Workspace

        self.call: Call | None = None
        display = Display(say=self._say, status=Progress(lambda: self.call))
        self.workspace = Workspace(settings, display, session=MCP_SESSION)
        self.workspace.hold_secrets()  # the client's model is a model: what it is sent is masked as ours is
        self._lock = threading.Lock()

    def _say(self, line: str) -> None:
        if self.call is not None:
            self.call.progress(line.strip("[]"))

    def serving(self, call: Call | None, work: Any, *args: Any) -> Any:
        """`work(*args)` as the tool call `call`'s (its progress and log records go to its client)."""
        with self._lock:
            self.call = call
            try:
                return work(*args)
            finally:
                self.call = None

    def run(self, name: str, options: o.Options) -> Any:
        """An operation's outcome; what it refuses (nothing to undo, a bad path) is the tool's error, in its words."""
        try:
            return OPERATIONS[name].execute(self.workspace, options)
        except AssistantError as exc:
            raise ToolError(str(exc)) from None

    # ----- the tools --------------------------------------------------------------------------------------------
    def operate(self, name: str, values: dict[str, Any]) -> str:
        """A tool call: the operation's options from the values of its declared arguments (a plan given as a JSON
        object: its text), its outcome in the words every door says (`context`: its JSON, as --json gives it); a
        tool of the model's that could not be called as asked is the call's error."""
        operation = OPERATIONS[name]
        options = operation.make({key: json.dumps(value) if isinstance(value, dict) else value
                                  for key, value in values.items()})
        if isinstance(options, o.ApplyOptions):
            options = dataclasses.replace(options, label=APPLY_LABEL)
            self._say("Applying the plan")
        outcome = self.run(name, options)
        if isinstance(outcome, outcomes.ApplyOutcome):
            self._say(f"Applied to {', '.join(outcome.files)}" if outcome.applied else "Nothing was applied")
        if isinstance(outcome, outcomes.TestOutcome):
            self._say(f"Tests: {outcome.result.summary()}")
        if isinstance(outcome, outcomes.ToolOutcome) and outcome.error:
            raise ToolError(_masked(outcome.text))
        if isinstance(outcome, outcomes.ContextOutcome):
            return _masked(json.dumps(outcome.as_json()))
        return _masked(render.text(outcome))

    # ----- the resources ----------------------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.workspace.settings.repo.resolve()

    def files(self) -> list[str]:
        """The repository's files a model may be shown, repository-relative."""
        return self._view().files()

    def file_text(self, uri: str) -> str:
        """A file:// URI within the tree, read through the read gate; anything else is not found, saying why."""
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise ResourceNotFoundError(f"{uri}: not a file:// URI of this repository")
        rel = os.path.relpath(os.path.normpath(unquote(parsed.path)), self.root)
        if rel == os.curdir or rel.startswith(os.pardir) or os.path.isabs(rel):
            raise ResourceNotFoundError(f"{uri}: outside the repository ({self.root})")
        return self.gated_text(rel)

    def gated_text(self, rel: str) -> str:
        """A resource's text, read as the model's `read` tool reads a file: through the read gate (code_assistant/gate.py,
        by RepoView: no path out of the tree or through a link, nothing under .git or the assistant's state, no secret
        file) and only among the files git would track."""
        from code_assistant.tools import ToolError

        view = self._view()
        try:
            return view.read(view.resolve(rel))
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    def _view(self) -> Any:
        from code_assistant.tools.files import RepoView

        settings = self.workspace.settings
        return RepoView(settings.repo, exclude=[settings.index_path, settings.state_path])

    def diff(self) -> str:
        """What the applies made over MCP changed that is still in effect (undo takes them back, newest first)."""
        return _masked(render.text(self.run("diff", o.DiffOptions())))

    # ----- the prompts ------------------------------------------------------------------------------------------
    def fix_prompt(self, task: str) -> str:
        """The assistant's own first request for a task: its edit format, the task and the ranked context."""
        context = self.run("context", o.ContextOptions(task=task)).context
        plan = prompts.PLAN.render(task=task, test_command=self.workspace.settings.test_command, baseline=NOT_RUN,
                                   baseline_failures="", context=context.render() or "(no files indexed)",
                                   excerpts=prompts.excerpts_said(f.mode for f in context.files))
        return f"{prompts.SYSTEM.render()}\n\n{plan}\n\n{FIX_NEXT}"

    def explain_prompt(self, question: str) -> str:
        """The assistant's question request: the files with numbered lines, answered with file:line citations."""
        context = self.run("context", o.ContextOptions(task=question, numbered=True)).context
        return prompts.ASK.render(question=question, context=context.render() or "(no files indexed)")

    def close(self) -> None:
        self.workspace.close()


def _masked(text: str) -> str:
    """What a tool or a resource answers, with the environment's secrets and the values of the repository's secret
    files masked (redact.py), as the model seam masks what our own model is sent."""
    return redact.redact(text, quiet=True)[0]
