"""The MCP door (`code-assistant mcp serve --repo PATH`): what this assistant does better than the agents people
already use, offered to them over MCP's stdio — `search`, `grep`, `read`, `symbol` (the model's own tools), `context`
(the ranked first context for a task), `apply` (a plan applied through the journal and the guardrails), `test` (the
test command in the sandbox, its failures parsed) and `undo` (the last apply, by the ownership rule: the other
agent's and the user's later edits stay). Each is an operation of the table on one workspace per server process, so
it says what the command line and the session say; the repository is held while an apply or an undo runs. Nothing is
printed: stdout is the protocol's."""
from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from code_assistant.operations import OPERATIONS
from code_assistant.operations import options as o
from code_assistant.operations import outcomes
from code_assistant.settings import Settings

INSTRUCTIONS = ("Tools over one repository, from a code assistant that indexed it: search ranks its files for a text, "
                "grep/read/symbol look closer, context gives the ranked first context for a task, apply writes a plan "
                "of edits ({\"changes\": [{\"file_path\", \"action\": \"modify\", \"search\", \"replace\"}]}) through "
                "a journal and guardrails, test runs the test command in a sandbox, undo takes back the last apply "
                "(edits made since by anyone else stay).")


class Door:
    """The operations behind the server's tools, one at a time on one workspace."""

    def __init__(self, settings: Settings) -> None:
        from code_assistant.workspace import Workspace

        self.workspace = Workspace(settings, session=f"mcp-{uuid.uuid4().hex[:8]}")  # its applies are its own to undo
        self._lock = threading.Lock()

    def run(self, name: str, options: object) -> Any:
        """An operation's outcome; what it refuses (nothing to undo, a bad path) is the tool's error, in its words."""
        from mcp.server.mcpserver.exceptions import ToolError

        from code_assistant.errors import AssistantError

        with self._lock:
            try:
                return OPERATIONS[name].execute(self.workspace, options)
            except AssistantError as exc:
                raise ToolError(str(exc)) from None

    def look(self, tool: str, arguments: dict[str, Any]) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        outcome = self.run(tool, o.ToolOptions(tool=tool, arguments=arguments))
        if outcome.error:
            raise ToolError(outcome.text)
        return str(outcome.text)

    def context(self, task: str) -> str:
        return json.dumps(self.run("context", o.ContextOptions(task=task)).as_json())

    def apply(self, plan: str | dict[str, Any]) -> str:
        text = plan if isinstance(plan, str) else json.dumps(plan)
        outcome: outcomes.ApplyOutcome = self.run("apply", o.ApplyOptions(plan=text, label="apply (MCP)"))
        return outcome.text()

    def test(self) -> str:
        from code_assistant.agent.feedback import failure_text

        outcome: outcomes.TestOutcome = self.run("test", o.TestOptions())
        failures = failure_text(outcome.result)
        return f"{outcome.result.summary()}\n\n{failures}".strip()

    def undo(self) -> str:
        from code_assistant.edit.takeback import exactly_as_before

        undone = self.run("undo", o.UndoOptions()).undone
        if undone.reverted:
            return f"Took back {undone.task!r}: its commit {undone.reverted[:12]} reverted by {undone.revert_commit}."
        lines = [f"Took back {undone.task!r} ({', '.join(f.path for f in undone.outcomes)})."]
        if not exactly_as_before(undone.outcomes):
            lines += [f"- {f.describe()}" for f in undone.outcomes]
        return "\n".join(lines)

    def close(self) -> None:
        self.workspace.close()


def serve(settings: Settings) -> int:
    from mcp.server.mcpserver import MCPServer

    door = Door(settings)
    server = MCPServer("code-assistant", instructions=INSTRUCTIONS)

    @server.tool()
    def search(query: str, k: int = 8) -> str:
        """The repository's own ranking for a text: the best files, each with its best-matching lines."""
        return door.look("search", {"query": query, "k": k})

    @server.tool()
    def grep(pattern: str, path_glob: str | None = None) -> str:
        """A regular expression (Python syntax) over the repository's files: path:line: text, at most 100 lines."""
        return door.look("grep", {"pattern": pattern, "path_glob": path_glob})

    @server.tool()
    def read(path: str, start: int = 1, end: int | None = None) -> str:
        """Lines of a file of the repository, numbered, at most 400 a call."""
        return door.look("read", {"path": path, "start": start, "end": end})

    @server.tool()
    def symbol(name: str) -> str:
        """Where a name is defined (path:line, signature) and where it is referenced."""
        return door.look("symbol", {"name": name})

    @server.tool()
    def context(task: str) -> str:
        """The ranked first context a task would get: files ranked, those shown and how, as JSON."""
        return door.context(task)

    @server.tool()
    def apply(plan: str | dict[str, Any]) -> str:
        """Apply a plan of edits, {"changes": [{"file_path", "action": "modify", "search", "replace"}]} (actions:
        modify, create, delete, replace_symbol, insert_after_symbol), through a journal and guardrails; answers the
        diff, or which edits failed and why."""
        return door.apply(plan)

    @server.tool()
    def test() -> str:
        """Run the repository's test command in a sandbox: its summary and the failing tests."""
        return door.test()

    @server.tool()
    def undo() -> str:
        """Take back the last apply of this server; edits made since by anyone else stay."""
        return door.undo()

    try:
        server.run("stdio")
    finally:
        door.close()
    return 0
