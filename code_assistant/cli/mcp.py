"""`code-assistant mcp ...`: the user's MCP servers — `add NAME -- COMMAND ARGS...` (or a URL) to the user's own
config (a name already there is replaced only with --replace, or when the person says so on a terminal), `remove
NAME`, `list` (the user's and the repository's: each server that would start is started, bounded by the start timeout
of a run, and said with its tools or why it did not start) — and `serve`, this assistant's own operations offered to
other agents over MCP (mcp/server/)."""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from code_assistant.errors import EXIT_OK, UsageError
from code_assistant.settings import Settings

if TYPE_CHECKING:
    from code_assistant.mcp.client.config import ServerConfig

ACTIONS = ("add", "list", "remove", "serve")


@dataclass(frozen=True)
class McpOptions:
    action: str
    name: str = ""
    command: tuple[str, ...] = field(default_factory=tuple)
    env: tuple[str, ...] = field(default_factory=tuple)  # NAME=VALUE, for `add`
    replace: bool = False  # `add` over a name already configured


def words(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="add, list, remove, or serve (our tools to other agents, on stdio)")
    p.add_argument("name", nargs="?", help="the server's name (add, remove)")
    p.add_argument("command", nargs="*", help="after --: the command and its arguments, or a URL (add)")
    p.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="a variable for the server (add)")
    p.add_argument("--replace", action="store_true", help="replace a server of the same name (add)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (list)")


def options(args: argparse.Namespace) -> McpOptions:
    command = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    if args.action in ("add", "remove") and not args.name:
        raise UsageError(f"mcp {args.action} needs a server name")
    if args.action == "add" and not command:
        raise UsageError("mcp add NAME -- COMMAND ARGS... (or a URL): the command is missing")
    if args.action in ("list", "serve") and (args.name or command):
        raise UsageError(f"mcp {args.action} takes no name or command")
    return McpOptions(action=args.action, name=args.name or "", command=command, env=tuple(args.env),
                      replace=args.replace)


def execute(settings: Settings, options: McpOptions, *, as_json: bool) -> int:
    from code_assistant.mcp.client import config

    if options.action == "serve":
        from code_assistant.mcp import server as serve

        return serve.serve(settings)
    if options.action == "add":
        env = dict(_pair(word) for word in options.env)
        replaced = _replacing(options)
        path = config.add(options.name, list(options.command), env)
        print(f"[MCP: {options.name} {'replaced in' if replaced else 'added to'} {path}]")
        return EXIT_OK
    if options.action == "remove":
        path = config.remove(options.name)
        print(f"[MCP: {options.name} removed from {path}]")
        return EXIT_OK
    from code_assistant.mcp.client import trust

    servers, unusable = config.configured(settings.repo)
    environ = dict(os.environ)
    rows = [{"name": s.name, "origin": s.origin, "transport": s.transport, "command": s.command_line(),
             "starts": "yes (yours)" if s.origin == config.Origin.USER else "yes (approved)"
             if trust.approved(s, repo=settings.repo, state_dir=settings.repo_state_dir, environ=environ)
             else "when approved"} for s in servers]
    _try(settings, [s for s, row in zip(servers, rows) if row["starts"].startswith("yes")], rows)
    if as_json:
        print(json.dumps({"servers": rows, "unusable": [{"name": u.name, "origin": u.origin, "why": u.why}
                                                          for u in unusable]}))
        return EXIT_OK
    for row in rows:
        print(f"{row['name']}  ({row['origin']}, {row['transport']})  {row['command']}  {_started_words(row)}")
    for bad in unusable:
        print(f"{bad.name}  ({bad.origin})  cannot be used: {bad.why}")
    if not rows and not unusable:
        print(f"[MCP: no servers; add one with: code-assistant mcp add NAME -- COMMAND ARGS (config: "
              f"{config.user_file()})]")
    return EXIT_OK


def _pair(word: str) -> tuple[str, str]:
    name, sep, value = word.partition("=")
    if not sep or not name:
        raise UsageError(f"--env takes NAME=VALUE, not {word!r}")
    return name, value


def _replacing(options: McpOptions) -> bool:
    """Whether `add` replaces a server of that name: refused without --replace, unless the person says yes on a
    terminal."""
    import sys

    from code_assistant import console
    from code_assistant.mcp.client import config

    servers, unusable = config.read_file(config.user_file(), config.Origin.USER)
    old = next((s.command_line() for s in servers if s.name == options.name), None)
    if old is None and options.name not in {u.name for u in unusable}:
        return False
    if options.replace or (sys.stdin.isatty() and console.confirm(
            f"The MCP server {options.name} is already in {config.user_file()} ({old or 'unusable'}). Replace it?")):
        return True
    raise UsageError(f"mcp add {options.name}: a server of that name is already configured ({old or 'unusable'}); "
                     f"add --replace to replace it, or choose another name")


def _try(settings: Settings, servers: list[ServerConfig], rows: list[dict[str, Any]]) -> None:
    """Start the servers that would start in a run, side by side (each within the start timeout), and write into
    their rows whether they started and their tools."""
    from code_assistant.mcp.client.connections import Connections

    connections = Connections(servers, cwd=settings.repo, logs=settings.repo_state_dir)
    try:
        connections.start()
        found = {started.name: started for started in connections.started()}
    finally:
        connections.close()
    for row in rows:
        if (started := found.get(row["name"])) is not None:
            row.update(started=not started.error, tools=started.tools, error=started.error or None)


def _started_words(row: dict[str, Any]) -> str:
    if "started" not in row:
        return f"starts: {row['starts']}"
    if not row["started"]:
        return f"did not start: {row['error']}"
    return f"started: {len(row['tools'])} tool(s): {', '.join(row['tools']) or 'none'}"
