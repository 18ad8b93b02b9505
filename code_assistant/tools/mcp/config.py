"""Where MCP servers are configured, in the shape most agents read (Claude Code's and Codex's `.mcp.json`):
`{"mcpServers": {NAME: {"command": ..., "args": [...], "env": {...}}}}` for a server started as a program (stdio), or
`{NAME: {"type": "http", "url": ..., "headers": {...}}}` for one reached over streamable HTTP. Two places: the
repository's `.mcp.json` (untrusted: it can start any command, so its servers start only once approved) and the
user's own `$XDG_CONFIG_HOME/code-assistant/mcp.json` (the user's: no approval). Parsing is pure and tolerant; a
server entry that cannot be used is named with the reason, never a crash."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant.errors import ConfigError

REPOSITORY_FILE = ".mcp.json"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


class Origin(StrEnum):
    USER = "user"  # the user's own config: their tools
    REPOSITORY = "repository"  # the repository's .mcp.json: started only once approved


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


@dataclass(frozen=True)
class ServerConfig:
    name: str
    origin: Origin
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def command_line(self) -> str:
        """What starts it, in words (the approval prompt names it)."""
        if self.transport == Transport.HTTP:
            return self.url
        import shlex

        return shlex.join([self.command, *self.args])

    def variables(self) -> list[str]:
        """The names of the environment's variables it is given (`${VAR}` in its env) or sends (in its headers)."""
        values = [*self.env.values(), *self.headers.values()]
        return list(dict.fromkeys(m.group(1) for value in values for m in _VARIABLE.finditer(value)))

    def env_values(self, environ: dict[str, str]) -> dict[str, str]:
        """Its variables as the server is given them: `${VAR}` expanded from `environ`."""
        return {k: expand(v, environ) for k, v in self.env.items()}

    def header_values(self, environ: dict[str, str]) -> dict[str, str]:
        """Its headers as they are sent: `${VAR}` expanded from `environ`."""
        return {k: expand(v, environ) for k, v in self.headers.items()}


@dataclass(frozen=True)
class Unusable:
    """A server entry that cannot be used, and why."""

    name: str
    origin: Origin
    why: str


def user_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "code-assistant" / "mcp.json"


def parse(data: Any, origin: Origin) -> tuple[list[ServerConfig], list[Unusable]]:
    """The servers of one config file's JSON (pure)."""
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], ([Unusable("(file)", origin, 'no "mcpServers" object')] if data else [])
    found: list[ServerConfig] = []
    unusable: list[Unusable] = []
    for name, entry in servers.items():
        try:
            found.append(_server(str(name), entry, origin))
        except ValueError as exc:
            unusable.append(Unusable(str(name), origin, str(exc)))
    return found, unusable


def _server(name: str, entry: Any, origin: Origin) -> ServerConfig:
    if not _NAME.match(name):
        raise ValueError("a server's name may hold letters, digits, '.', '_' and '-' only")
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    kind = str(entry.get("type") or entry.get("transport") or ("http" if entry.get("url") else "stdio")).lower()
    if kind in ("http", "streamable-http", "streamable_http", "streamablehttp"):
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError("an http server needs a \"url\" starting with http:// or https://")
        return ServerConfig(name=name, origin=origin, transport=Transport.HTTP, url=url,
                            headers=_strings(entry.get("headers"), "headers"))
    if kind != "stdio":
        raise ValueError(f"transport {kind!r} is not supported (stdio and streamable http are)")
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError('a stdio server needs a "command"')
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ValueError('"args" must be a list of strings')
    return ServerConfig(name=name, origin=origin, transport=Transport.STDIO, command=command,
                        args=tuple(str(a) for a in args), env=_strings(entry.get("env"), "env"))


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f'"{what}" must be an object of strings')
    return {str(k): str(v) for k, v in value.items()}


def expand(value: str, environ: dict[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` in a value, from the environment (as Claude Code's .mcp.json has them)."""
    return _VARIABLE.sub(lambda m: environ.get(m.group(1)) or (m.group(2) or ""), value)


def read_file(path: Path, origin: Origin) -> tuple[list[ServerConfig], list[Unusable]]:
    if not path.is_file():
        return [], []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [], [Unusable(f"({path.name})", origin, f"{path} cannot be read: {exc}")]
    return parse(data, origin)


def configured(repo: Path) -> tuple[list[ServerConfig], list[Unusable]]:
    """The user's servers, then the repository's (a repository server named like one of the user's is left out:
    the user's own wins)."""
    user, user_bad = read_file(user_file(), Origin.USER)
    repository, repo_bad = read_file(repo / REPOSITORY_FILE, Origin.REPOSITORY)
    names = {s.name for s in user}
    return [*user, *(s for s in repository if s.name not in names)], [*user_bad, *repo_bad]


# ----- the user's file, changed by `mcp add` and `mcp remove` -----------------------------------------------------
def add(name: str, command: list[str], env: dict[str, str] | None = None) -> Path:
    if not _NAME.match(name):
        raise ConfigError(f"mcp add {name}: a name may hold letters, digits, '.', '_' and '-' only")
    if not command:
        raise ConfigError("mcp add NAME -- COMMAND ARGS...: the command is missing")
    entry: dict[str, Any] = ({"type": "http", "url": command[0]} if command[0].startswith(("http://", "https://"))
                             else {"command": command[0], "args": command[1:]})
    if env:
        entry["env"] = env
    return _write_user({**_user_servers(), name: entry})


def remove(name: str) -> Path:
    servers = _user_servers()
    if name not in servers:
        raise ConfigError(f"mcp remove {name}: no server of that name in {user_file()}")
    del servers[name]
    return _write_user(servers)


def _user_servers() -> dict[str, Any]:
    path = user_file()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); fix or remove it") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return dict(servers) if isinstance(servers, dict) else {}


def _write_user(servers: dict[str, Any]) -> Path:
    path = user_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
