"""`mcp add`, `mcp list` and `mcp remove`: the user's MCP servers. `add NAME COMMAND...` (or a URL) writes the user's own
config — a name already there is replaced only when asked to (`replace`) or when the person says so on a terminal;
`remove NAME` takes one out; `list` names the user's and the repository's, each with whether it starts in a run by
the one rule runs follow (tools/mcp/trust.py: --trust-mcp included), and starts those that would, side by side,
each within the start timeout of a run, to say its tools or why it did not start."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from code_assistant.errors import UsageError
from code_assistant.operations.options import McpAddOptions, McpListOptions, McpRemoveOptions
from code_assistant.operations.outcomes import Change, ListedServer, McpConfigOutcome, McpListOutcome, UnusableServer

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: McpAddOptions | McpListOptions | McpRemoveOptions
            ) -> McpConfigOutcome | McpListOutcome:
    from code_assistant.tools.mcp import config

    if isinstance(options, McpAddOptions):
        env = dict(_pair(word) for word in options.env)
        replaced = _replacing(ws, options)
        path = config.add(options.name, list(options.command), env)
        return McpConfigOutcome(name=options.name, config=str(path), change=Change.REPLACED if replaced
                                else Change.ADDED)
    if isinstance(options, McpRemoveOptions):
        return McpConfigOutcome(name=options.name, config=str(config.remove(options.name)), change=Change.REMOVED)
    return _listed(ws)


def _listed(ws: Workspace) -> McpListOutcome:
    from code_assistant.tools.mcp import config, trust
    from code_assistant.tools.mcp.connections import Connections

    settings = ws.settings
    servers, unusable = config.configured(settings.repo)
    starts = {s.name: trust.start_rule(s, repo=settings.repo, state_dir=settings.repo_state_dir,
                                       environ=dict(os.environ), trust_all=settings.trust_mcp) for s in servers}
    connections = Connections([s for s in servers if starts[s.name] != trust.Start.ASKED], cwd=settings.repo,
                              logs=settings.repo_state_dir)
    try:
        connections.start()
        found = {started.name: started for started in connections.started()}
    finally:
        connections.close()
    rows = []
    for server in servers:
        tried = found.get(server.name)
        rows.append(ListedServer(name=server.name, origin=server.origin, transport=server.transport,
                                 command=server.command_line(), starts=starts[server.name],
                                 started=None if tried is None else not tried.error,
                                 tools=None if tried is None else list(tried.tools), error=tried and tried.error or None))
    return McpListOutcome(servers=rows, config=str(config.user_file()),
                          unusable=[UnusableServer(name=u.name, origin=u.origin, why=u.why) for u in unusable])


def _pair(word: str) -> tuple[str, str]:
    name, sep, value = word.partition("=")
    if not sep or not name:
        raise UsageError(f"--env takes NAME=VALUE, not {word!r}")
    return name, value


def _replacing(ws: Workspace, options: McpAddOptions) -> bool:
    """Whether `add` replaces a server of that name: refused unless asked to, or the person says yes on a terminal."""
    from code_assistant.tools.mcp import config

    servers, unusable = config.read_file(config.user_file(), config.Origin.USER)
    old = next((s.command_line() for s in servers if s.name == options.name), None)
    if old is None and options.name not in {u.name for u in unusable}:
        return False
    confirm = ws.display.confirm
    if options.replace or (confirm is not None and confirm(
            f"The MCP server {options.name} is already in {config.user_file()} ({old or 'unusable'}). Replace it?")):
        return True
    raise UsageError(f"mcp add {options.name}: a server of that name is already configured ({old or 'unusable'}); "
                     f"add --replace to replace it, or choose another name")
