"""The model's tools as a workspace keeps them: made over a working tree and its index — search, grep, read, symbol,
`run` when the sandbox is on, the user's MCP servers' tools — and offered as a model's window holds them (--tools
auto: grep and read only, in words, under TOOLS_MIN_WINDOW, and no MCP server started). The MCP servers start once,
on first need, and stop when the workspace closes. Modules are imported when a box is made: a command that offers
no tool never loads them."""
from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from code_assistant.display import Display
from code_assistant.settings import TOOLS_MIN_WINDOW, Settings, ToolsMode

if TYPE_CHECKING:
    from code_assistant.index.indexer import RepoIndex
    from code_assistant.model.chat import ChatModel
    from code_assistant.tools import Tool
    from code_assistant.tools.box import Form, Toolbox, ToolsFor
    from code_assistant.tools.mcp.config import ServerConfig
    from code_assistant.tools.mcp.connections import Connections
    from code_assistant.verify.testing import Testing


def tools_offered(mode: ToolsMode, window: int, *, native: bool = True) -> tuple[bool, Form]:
    """How the model's tools are offered in a `window` of tokens: `small` (--tools auto under TOOLS_MIN_WINDOW: grep
    and read only, no MCP server) and their form (words when small, with --tools json, or once the server refused
    native calls: `native` False). One rule for a run's requests and for the room `context` reports."""
    from code_assistant.tools.box import Form

    small = mode == ToolsMode.AUTO and window < TOOLS_MIN_WINDOW
    return small, Form.JSON if small or mode == ToolsMode.JSON or not native else Form.NATIVE


class Shelf:
    """The tools over the repository (or another tree a box is made for) and its `index` (brought up to date,
    quietly, as far as a look for the given text needs: tools/looking.py); `testing`: the sandbox `run` needs and its
    shell; `closing`: given what stops the MCP servers, called when the workspace closes."""

    def __init__(self, settings: Settings, testing: Testing, index: Callable[[str | None], RepoIndex],
                 display: Display, closing: Callable[[Callable[[], None]], object]) -> None:
        self.repo, self.state_dir = settings.repo, settings.repo_state_dir
        self.kept_out = [settings.index_path, settings.state_path]
        self.mode, self.max_calls, self.trust_all = settings.tools, settings.max_tool_calls, settings.trust_mcp
        self.testing, self.index, self.display, self._closing = testing, index, display, closing
        self._mcp: Connections | None = None
        self._mcp_skipped_said = False  # the MCP servers a small window does not start were named

    @property
    def off(self) -> bool:
        """--no-tools (or --max-tool-calls 0): the model is offered none."""
        return self.mode == ToolsMode.OFF or self.max_calls == 0

    def for_model(self, model: ChatModel, *, read_only: bool = False,
                  recorded: list[dict[str, Any]] | None = None) -> ToolsFor | None:
        """The tools `model` may call before it answers (None: none, with --no-tools): search, grep, read, symbol,
        run when the sandbox is on and `read_only` is not asked for, and the user's MCP servers' tools; with --tools
        auto, a window under TOOLS_MIN_WINDOW is offered grep and read only, described in words, and no MCP server is
        started for it. Each request offers what its window holds (tools/fit.py). `recorded`: --replay's calls, made
        afresh and compared."""
        from code_assistant.tools.specs import SHORT_LIST

        if self.off:
            return None
        auto = self.mode == ToolsMode.AUTO
        small, form = tools_offered(self.mode, model.window.tokens, native=model.native_tools)  # refused once: words

        if small and not self._mcp_skipped_said:
            self._mcp_skipped_said = True
            self._say_mcp_skipped(model.window.tokens)

        def tools(repo: Path, index: Callable[[], RepoIndex]) -> Toolbox:
            box = self.box(repo, index, read_only=read_only, form=form, recorded=recorded, auto=auto, mcp=not small)
            return box.only(list(SHORT_LIST)) if small else box

        return tools

    def for_window(self, window: int, index: Callable[[], RepoIndex]) -> Toolbox | None:
        """The tools --tools offers a `window` of tokens over the repository, for a report (`context`'s room): no
        MCP server is started for it; None with --no-tools."""
        from code_assistant.tools.specs import SHORT_LIST

        if self.off:
            return None
        small, form = tools_offered(self.mode, window)
        box = self.box(self.repo, index, form=form, auto=self.mode == ToolsMode.AUTO)
        return box.only(list(SHORT_LIST)) if small else box

    def box(self, repo: Path | None = None, index: Callable[[], RepoIndex] | None = None, *, read_only: bool = False,
            form: Form | None = None, recorded: list[dict[str, Any]] | None = None, auto: bool = False,
            mcp: bool = False) -> Toolbox:
        """The tools over a working tree (the repository, unless another: a worktree, a scratch copy) and its index
        (the repository's, brought up to date, unless another); `auto`: --tools auto's (tools/fit.py); `mcp`: the
        user's MCP servers' tools too."""
        from code_assistant.tools.box import Form, Toolbox
        from code_assistant.tools.files import RepoView
        from code_assistant.tools.looking import Looking
        from code_assistant.tools.running import Running

        repo = repo or self.repo
        # a run's tools look at the run's index (focused on its task); a door's (a person's command, MCP) at the
        # repository's, as far as each look needs
        looks = (lambda focus: index()) if index else self.index
        found = Looking(RepoView(repo, exclude=self.kept_out), looks).tools()
        if not read_only and self.testing.sandbox.active:
            found += Running(repo, functools.partial(self.testing.shell, cwd=repo)).tools()
        if mcp:
            found += self._mcp_tools(read_only=read_only)
        return Toolbox(found, max_calls=self.max_calls, form=form or Form.NATIVE, recorded=recorded,
                       say=self.display.say, auto=auto)

    def _say_mcp_skipped(self, window: int) -> None:
        """One line naming the user's MCP servers not started for a window --tools auto offers grep and read only."""
        from code_assistant.tools.mcp.config import configured

        servers, _ = configured(self.repo)
        if servers:
            self.display.say(f"[MCP: {', '.join(s.name for s in servers)} not started: the {window}-token context "
                             f"window is offered grep and read only (a larger window, or --tools native, offers "
                             f"them)]")

    def _mcp_tools(self, *, read_only: bool = False) -> list[Tool]:
        """The user's MCP servers' tools: started once, on first need, and stopped when the workspace closes. The
        user's own servers start; a repository's `.mcp.json` servers only once approved for what they run — asked
        on a terminal (tools/mcp/trust.py), or with --trust-mcp — else named as not started."""
        if self._mcp is None:
            from code_assistant.tools.mcp.connections import Connections

            self._mcp = Connections(self._mcp_servers(), cwd=self.repo, logs=self.state_dir, say=self.display.say)
            self._closing(self._mcp.close)
            self._mcp.start()
        return self._mcp.tools(read_only=read_only)

    def _mcp_servers(self) -> list[ServerConfig]:
        from code_assistant.tools.mcp import trust
        from code_assistant.tools.mcp.config import configured

        servers, unusable = configured(self.repo)
        for bad in unusable:
            self.display.say(f"[MCP: {bad.name} ({bad.origin}) cannot be used: {bad.why}]")
        return trust.startable(servers, repo=self.repo, state_dir=self.state_dir, environ=dict(os.environ),
                               trust_all=self.trust_all, confirm=self.display.confirm, say=self.display.say)
