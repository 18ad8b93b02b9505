"""Connections to the user's MCP servers through the official `mcp` SDK, as tools for the model. The SDK is async; the
run is not: the connections live on an event loop of their own in a background thread, each held open by a task from
its start to the workspace's end, and a call waits for its answer at most CALL_TIMEOUT_S. A server that fails to start
or does not list its tools within START_TIMEOUT_S is named in one line and left out; the run goes on. A server's own
output on stderr goes to a log file beside the repository's state, never onto the person's terminal."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from code_assistant import redact
from code_assistant.tools import Result, Spec, Tool
from code_assistant.tools.mcp.config import ServerConfig, Transport
from code_assistant.verify.environment import held_back_reason

logger = logging.getLogger(__name__)

START_TIMEOUT_S = float(os.environ.get("CODE_ASSISTANT_MCP_START_TIMEOUT", "20"))  # to start and list its tools
CALL_TIMEOUT_S = 60.0  # one call
CLOSE_TIMEOUT_S = 5.0
SEPARATOR = "__"  # a server's tool, to the model: docs__lookup
ARGUMENTS_SHOWN = 60  # characters of a call's arguments on its line
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie")


@dataclass
class _Server:
    config: ServerConfig
    client: Any = None
    tools: list[Any] = field(default_factory=list)
    error: str = ""
    ready: threading.Event = field(default_factory=threading.Event)
    closing: asyncio.Event | None = None


@dataclass(frozen=True)
class Started:
    """A server after start: the names of its tools, or why it was left out."""

    name: str
    tools: list[str]
    error: str = ""


class Connections:
    """The connected servers of one workspace; `tools()` are theirs, named `server__tool`."""

    def __init__(self, servers: list[ServerConfig], *, cwd: Path, logs: Path,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.cwd, self.logs, self.say = cwd, logs, say
        self._servers = [_Server(config) for config in servers]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._tasks: list[Future[None]] = []

    # ----- starting and ending -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every server, and wait (START_TIMEOUT_S at most) until each has listed its tools or failed."""
        if not self._servers:
            return
        environ = dict(os.environ)
        redact.hold_values(value for server in self._servers for value in _secrets(server.config, environ))
        self._thread.start()
        self.logs.mkdir(parents=True, exist_ok=True)
        self._tasks = [asyncio.run_coroutine_threadsafe(self._hold(server), self._loop) for server in self._servers]
        deadline = time.monotonic() + START_TIMEOUT_S  # they start side by side: one wait for all
        for server in self._servers:
            if not server.ready.wait(max(0.0, deadline - time.monotonic())):
                server.error = f"it did not list its tools within {START_TIMEOUT_S:g} s"
                self._loop.call_soon_threadsafe(self._end, server)
            if server.error:
                self.say(f"[MCP: {server.config.name} left out: {server.error}]")
            else:
                self.say(f"[MCP: {server.config.name}: {len(server.tools)} tool(s)]")

    def started(self) -> list[Started]:
        """After start: each server, with its tools' names or why it was left out."""
        return [Started(name=server.config.name, tools=[tool.name for tool in server.tools] if not server.error else [],
                        error=server.error) for server in self._servers]

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        for server in self._servers:
            self._loop.call_soon_threadsafe(self._end, server)
        for task in self._tasks:
            try:
                task.result(CLOSE_TIMEOUT_S)
            except BaseException as exc:  # noqa: BLE001 - a server that will not close is left to the loop's end
                logger.debug("closing an MCP server: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)

    def _end(self, server: _Server) -> None:
        if server.closing is not None:
            server.closing.set()

    async def _hold(self, server: _Server) -> None:
        """Connect, list the tools, and hold the connection open until the end (the SDK's contexts are entered and
        left in one task)."""
        from mcp import Client

        server.closing = asyncio.Event()
        try:
            with open(self.logs / f"mcp-{server.config.name}.log", "a", encoding="utf-8") as errlog:
                transport = self._transport(server.config, errlog)
                async with Client(transport, read_timeout_seconds=CALL_TIMEOUT_S) as client:
                    server.client = client
                    server.tools = list((await client.list_tools()).tools)
                    server.ready.set()
                    await server.closing.wait()
        except BaseException as exc:  # noqa: BLE001 - a server that fails is named and left out, never the run's end
            server.error = server.error or _why(exc, self.logs / f"mcp-{server.config.name}.log")
            logger.debug("MCP server %s: %r", server.config.name, exc)
        finally:
            server.client = None
            server.ready.set()

    def _transport(self, config: ServerConfig, errlog: Any) -> Any:
        environ = dict(os.environ)
        if config.transport == Transport.HTTP:
            import httpx2  # the SDK's HTTP client
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(config.url,
                                          http_client=httpx2.AsyncClient(headers=config.header_values(environ)))
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=config.command, args=list(config.args), cwd=str(self.cwd),
                                       env=config.env_values(environ))
        return stdio_client(params, errlog=errlog)

    # ----- the tools -----------------------------------------------------------------------------------------------
    def tools(self, *, read_only: bool = False) -> list[Tool]:
        """Every connected server's tools (`read_only`: those whose server says they only look)."""
        found = []
        for server in self._servers:
            if server.client is None:
                continue
            for tool in server.tools:
                looks = bool(getattr(tool.annotations, "read_only_hint", False)) if tool.annotations else False
                if read_only and not looks:
                    continue
                name = _TOOL_NAME.sub("_", f"{server.config.name}{SEPARATOR}{tool.name}")[:64]
                spec = Spec(name=name, description=f"{(tool.description or tool.name).strip()[:1000]} (a tool of the "
                                                   f"user's MCP server {server.config.name})",
                            parameters=tool.input_schema or {"type": "object", "properties": {}}, read_only=looks,
                            server=server.config.name)
                found.append(Tool(spec, _caller(self, server, tool.name, name)))
        return found

    def call(self, server: _Server, tool: str, arguments: dict[str, Any], name: str) -> Result:
        shown_as = f"{name}: {words}" if (words := short_arguments(arguments)) else name
        if server.client is None:
            return Result(text=f"the MCP server {server.config.name} is not connected", summary=f"{shown_as}: "
                          "not connected", error=True)
        future = asyncio.run_coroutine_threadsafe(server.client.call_tool(tool, arguments), self._loop)
        try:
            answer = future.result(CALL_TIMEOUT_S + 5)
        except FutureTimeout:
            future.cancel()
            return Result(text=f"the MCP server {server.config.name} did not answer within {CALL_TIMEOUT_S:g} s",
                          summary=f"{shown_as}: no answer in {CALL_TIMEOUT_S:g} s", error=True)
        except KeyboardInterrupt:
            future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - the server's error is the call's result, for the model
            return Result(text=f"error from the MCP server {server.config.name}: {exc}",
                          summary=f"{shown_as}: error ({type(exc).__name__})", error=True)
        text = _text(answer)
        lines = len(text.splitlines())
        return Result(text=text or "(no content)", summary=f"{shown_as} → {lines} line{'' if lines == 1 else 's'}"
                      + (" (an error)" if answer.is_error else ""), error=bool(answer.is_error))


def _secrets(config: ServerConfig, environ: dict[str, str]) -> list[str]:
    """What a server is given that its name or its shape says is secret: masked, from its start, in whatever reaches
    the model (its tools' results among it), as the environment's secrets are."""
    found = [value for name, value in config.env_values(environ).items() if held_back_reason(name, value)]
    for name, value in config.header_values(environ).items():
        if name.lower() in _SECRET_HEADERS or held_back_reason(name.upper().replace("-", "_"), value):
            found += [value, *value.split()[-1:]]  # "Bearer TOKEN": the token alone too
    return found


def short_arguments(arguments: dict[str, Any]) -> str:
    """A call's arguments on its line, in a few words: `term="add", limit=3`, cut to ARGUMENTS_SHOWN characters."""
    words = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False, default=str)}" for key, value in arguments.items())
    return words if len(words) <= ARGUMENTS_SHOWN else words[:ARGUMENTS_SHOWN - 3] + "..."


def _caller(connections: Connections, server: _Server, tool: str, shown_as: str) -> Callable[[dict[str, Any]], Result]:
    return lambda arguments: connections.call(server, tool, arguments, shown_as)


def _text(result: Any) -> str:
    """A call's content as text: its text blocks, a note for what is not text, its structured result when that is
    all."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and getattr(block.resource, "text", None):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or 'content'} not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, indent=1, default=str))
    return "\n".join(parts)


def _why(exc: BaseException, log: Path) -> str:
    """Why a server could not be used, in one line (its own words are in its log)."""
    inner = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    text = str(inner).splitlines()[0][:160] if str(inner) else type(inner).__name__
    if isinstance(inner, (FileNotFoundError, PermissionError)):
        return f"its command cannot start ({text})"
    return f"it failed to start ({type(inner).__name__}: {text}; its output is in {log})"
