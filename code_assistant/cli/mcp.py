"""`code-assistant mcp ...`: the user's MCP servers — `add NAME -- COMMAND ARGS...` (or a URL) to the user's own
config, `remove NAME`, `list` (the user's and the repository's, each with whether it starts) — and `serve`, this
assistant's own operations offered to other agents over MCP (serve.py)."""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field

from code_assistant.errors import EXIT_OK, UsageError
from code_assistant.settings import Settings

ACTIONS = ("add", "list", "remove", "serve")


@dataclass(frozen=True)
class McpOptions:
    action: str
    name: str = ""
    command: tuple[str, ...] = field(default_factory=tuple)
    env: tuple[str, ...] = field(default_factory=tuple)  # NAME=VALUE, for `add`


def words(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="add, list, remove, or serve (our tools to other agents, on stdio)")
    p.add_argument("name", nargs="?", help="the server's name (add, remove)")
    p.add_argument("command", nargs="*", help="after --: the command and its arguments, or a URL (add)")
    p.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="a variable for the server (add)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (list)")


def options(args: argparse.Namespace) -> McpOptions:
    command = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    if args.action in ("add", "remove") and not args.name:
        raise UsageError(f"mcp {args.action} needs a server name")
    if args.action == "add" and not command:
        raise UsageError("mcp add NAME -- COMMAND ARGS... (or a URL): the command is missing")
    if args.action in ("list", "serve") and (args.name or command):
        raise UsageError(f"mcp {args.action} takes no name or command")
    return McpOptions(action=args.action, name=args.name or "", command=command, env=tuple(args.env))


def execute(settings: Settings, options: McpOptions, *, as_json: bool) -> int:
    from code_assistant.mcp import config

    if options.action == "serve":
        from code_assistant import serve

        return serve.serve(settings)
    if options.action == "add":
        env = dict(_pair(word) for word in options.env)
        path = config.add(options.name, list(options.command), env)
        print(f"[MCP: {options.name} added to {path}]")
        return EXIT_OK
    if options.action == "remove":
        path = config.remove(options.name)
        print(f"[MCP: {options.name} removed from {path}]")
        return EXIT_OK
    from code_assistant.mcp import trust

    servers, unusable = config.configured(settings.repo)
    environ = dict(os.environ)
    rows = [{"name": s.name, "origin": s.origin, "transport": s.transport, "command": s.command_line(),
             "starts": "yes (yours)" if s.origin == config.Origin.USER else "yes (approved)"
             if trust.approved(s, repo=settings.repo, state_dir=settings.repo_state_dir, environ=environ)
             else "when approved"} for s in servers]
    if as_json:
        print(json.dumps({"servers": rows, "unusable": [{"name": u.name, "origin": u.origin, "why": u.why}
                                                          for u in unusable]}))
        return EXIT_OK
    for row in rows:
        print(f"{row['name']}  ({row['origin']}, {row['transport']})  {row['command']}  starts: {row['starts']}")
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
