"""The MCP door (`code-assistant mcp serve --repo PATH`): what this assistant does better than the agents people
already use, offered to them over MCP's stdio with the official `mcp` SDK.

- Tools: the operations of the table the MCP door reaches (operations/: Door.MCP), each made from its entry there —
  its words for an agent (the model's own for `search`, `grep`, `read`, `symbol`), its arguments as declared (the
  input schema), its hints from what it does: `context` and the looking tools only look (readOnlyHint); `apply` (a
  plan applied through the journal and the guardrails) and `undo` (the last apply made over MCP, by the ownership
  rule: the other agent's and the user's later edits stay) change files (destructiveHint); `test` runs the test
  command in the sandbox (idempotent; open world only with --network). Each answers in the words every door says
  (console/render.py). A call that carries a progressToken gets progress notifications as the operation goes
  (`test`: the tests done so far; `apply`: its steps); `logging/setLevel` sends the assistant's log records at that
  level and above.
- Resources: the repository's files a model may be shown, as `file://` URIs within the tree (the first MAX_LISTED
  listed, any of them readable through the read gate, a template for the rest), and `code-assistant://diff`, what
  the applies made over MCP changed that is still in effect.
- Prompts: `fix` (the assistant's own first request for a task: its edit format, the task and the ranked context;
  the answer is a plan for `apply`) and `explain` (its question request: numbered lines, file:line citations).

Each is an operation of the table on one workspace per server process (door.py); the repository is held while an
apply or an undo runs. Nothing is printed: stdout is the protocol's."""
from __future__ import annotations

import inspect
import logging
import mimetypes
import warnings
from collections.abc import Callable
from typing import Annotated, Any

import anyio.lowlevel
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import Field

from code_assistant.edit.edits import ACTIONS
from code_assistant.mcp.server import reports
from code_assistant.mcp.server.door import McpDoor
from code_assistant.operations import Door, Effect, Operation, reached_from
from code_assistant.settings import Settings

INSTRUCTIONS = ("Tools over one repository, from a code assistant that indexed it: search ranks its files for a text, "
                "grep/read/symbol look closer, context gives the ranked first context for a task, apply writes a plan "
                "of edits ({\"changes\": [{\"file_path\", \"action\": \"modify\", \"search\", \"replace\"}]}) through "
                "a journal and guardrails, test runs the test command in a sandbox, undo takes back the last apply "
                "(edits made since by anyone else stay). The repository's files are resources (file:// URIs); the "
                "prompts fix and explain are the assistant's own requests for a task and a question.")
DIFF_URI = "code-assistant://diff"
MAX_LISTED = 1000  # files listed as resources (a monorepo's are many); any file in the tree can be read
LOOKS = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
CHANGES = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                open_world_hint=False)


class Server(MCPServer):
    """The SDK's server, with the repository's files and the diff as resources, listed and read through the door."""

    def __init__(self, door: McpDoor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.door = door

    async def list_resources(self) -> list[types.Resource]:
        files = await anyio.to_thread.run_sync(self.door.serving, None, self.door.files)
        listed = [types.Resource(uri=(self.door.root / rel).as_uri(), name=rel, mime_type=_mime(rel))
                  for rel in files[:MAX_LISTED]]
        return [types.Resource(uri=DIFF_URI, name="diff", mime_type="text/x-diff",
                               description="What the applies made over MCP changed that is still in effect"), *listed]

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return [types.ResourceTemplate(uri_template=self.door.root.as_uri() + "/{+path}", name="file",
                                       description="A file of the repository, by its path in the tree")]

    async def read_resource(self, uri: Any, context: Any = None) -> list[ReadResourceContents]:
        if str(uri) == DIFF_URI:
            text = await anyio.to_thread.run_sync(self.door.serving, None, self.door.diff)
            return [ReadResourceContents(content=text, mime_type="text/x-diff")]
        text = await anyio.to_thread.run_sync(self.door.serving, None, self.door.file_text, str(uri))
        return [ReadResourceContents(content=text, mime_type=_mime(str(uri)))]


def _mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "text/plain"


async def _serving(door: McpDoor, ctx: Context, work: Any, *args: Any) -> Any:
    """A tool's work in a worker thread, its progress and log records sent to the client of this call."""
    call = reports.Call(ctx, anyio.lowlevel.current_token())
    return await anyio.to_thread.run_sync(door.serving, call, work, *args)


_TYPES: dict[type, Any] = {str: str, int: int, bool: bool, list: list[str], dict: str | dict[str, Any]}


def _tool(door: McpDoor, operation: Operation) -> Callable[..., Any]:
    """An operation as an MCP tool: its arguments as the table declares them are the tool's signature (the SDK makes
    the input schema from it), a call its options record, its outcome the text every door says."""
    async def call(ctx: Context, **values: Any) -> str:
        return await _serving(door, ctx, door.operate, operation.name, values)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context, "return": str}
    for argument in operation.arguments:
        kind = _TYPES[argument.type] if argument.required or argument.default is not None else \
            _TYPES[argument.type] | None
        annotations[argument.name] = Annotated[kind, Field(description=argument.described)]
        default = inspect.Parameter.empty if argument.required else argument.default
        parameters.append(inspect.Parameter(argument.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=annotations[argument.name]))
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = annotations
    call.__name__ = operation.name
    return call


def serve(settings: Settings) -> int:
    # the 2026 protocol drops logging/setLevel, but the clients of today and the conformance suite use it
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    door = McpDoor(settings)
    server = Server(door, name="code-assistant", instructions=INSTRUCTIONS)
    to_client = reports.ToClient(lambda: door.call)
    reports.listen(to_client, reports.DEFAULT_LEVEL)
    hints = {Effect.LOOKS: LOOKS, Effect.CHANGES: CHANGES, Effect.TESTS: types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=settings.network)}

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        reports.listen(to_client, params.level)
        return types.EmptyResult()

    # MCPServer declares no handler for it; its low-level server takes one
    server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)

    for operation in reached_from(Door.MCP):
        server.add_tool(_tool(door, operation), name=operation.name, annotations=hints[operation.effect],
                        description=operation.for_agents.replace("{actions}", ", ".join(ACTIONS)))

    @server.prompt()
    async def fix(task: str) -> str:
        """The assistant's own request for a task: its edit format, the task and the repository's ranked context.
        The answer is a plan of edits for the apply tool."""
        return await anyio.to_thread.run_sync(door.serving, None, door.fix_prompt, task)

    @server.prompt()
    async def explain(question: str) -> str:
        """The assistant's request for a question about the repository: the relevant files with numbered lines,
        answered with file:line citations."""
        return await anyio.to_thread.run_sync(door.serving, None, door.explain_prompt, question)

    try:
        server.run("stdio")
    finally:
        logging.getLogger("code_assistant").removeHandler(to_client)
        door.close()
    return 0
