"""The session door (`chat`, and `python main.py --repo PATH` with no --task on a terminal): a conversation with the
repository. It opens one workspace and keeps it — the chat model, the index and its embedding model warm, a note of
every finished task for the next requests, the files the session changed pinned into the next context — and holds
the repository for its whole length. Each line is parsed into an operation of the table and its options record, the
same records the command line builds: a line is a task (`run`); a line starting with `/` names another operation
(`/ask`, `/undo`, ...; `/help` lists them from the table) and says what the command line says for it."""
from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import interrupts
from code_assistant.errors import EXIT_OK, AssistantError, UsageError
from code_assistant.operations import OPERATIONS, Door, Operation, reached_from
from code_assistant.operations import options as o
from code_assistant.settings import Settings

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace

QUIT = ("/quit", "/exit")
KEYS = ("Anything else is a task. Alt-Enter (or Esc, Enter) starts a new line; Ctrl-C cancels a task and rolls it "
        "back; Ctrl-D leaves.")


@dataclass(frozen=True)
class SessionOptions:
    resume: bool = False  # reopen the repository's last session: its notes of earlier tasks and its pins


def _nothing(name: str) -> Callable[[str], object]:
    def parse(rest: str) -> object:
        if rest:
            raise UsageError(f"usage: /{name} (it takes nothing after it)")
        return OPERATIONS[name].options()
    return parse


def _needs(name: str, build: Callable[[str], object]) -> Callable[[str], object]:
    def parse(rest: str) -> object:
        if not rest:
            raise UsageError(f"usage: /{name} {OPERATIONS[name].words}")
        return build(rest)
    return parse


# How a slash command's words become its operation's options record (the command line's parser is in cli/).
SLASH: dict[str, Callable[[str], object]] = {
    "run": _needs("run", lambda rest: o.RunOptions(task=rest)),
    "ask": _needs("ask", lambda rest: o.AskOptions(question=rest)),
    "context": lambda rest: o.ContextOptions(task=rest),
    "add": _needs("add", lambda rest: o.PinOptions(add=tuple(rest.split()))),
    "drop": _needs("drop", lambda rest: o.PinOptions(drop=tuple(rest.split()))),
    "model": lambda rest: o.ModelOptions(name=rest),
    "search": _needs("search", lambda rest: o.ToolOptions(tool="search", arguments={"query": rest})),
    "grep": _needs("grep", lambda rest: o.ToolOptions(tool="grep", arguments={"pattern": rest})),
    "read": _needs("read", lambda rest: o.ToolOptions(tool="read", arguments=_read_words(rest))),
    "symbol": _needs("symbol", lambda rest: o.ToolOptions(tool="symbol", arguments={"name": rest})),
    "exec": _needs("exec", lambda rest: o.ToolOptions(tool="exec", arguments={"command": rest})),
    **{name: _nothing(name) for name in ("test", "diff", "undo", "tokens")},
}


def _read_words(rest: str) -> dict[str, object]:
    path, *lines = rest.split()
    if len(lines) > 2 or not all(word.isdigit() for word in lines):
        raise UsageError(f"usage: /read {OPERATIONS['read'].words}")
    return {"path": path, **dict(zip(("start", "end"), map(int, lines)))}


def help_lines() -> list[str]:
    lines = [f"/{op.name:<8}{op.words:<11}{op.summary}" for op in reached_from(Door.SESSION)]
    return [*lines, f"{'/help':<19}this list", f"{'/quit':<19}leave (Ctrl-D does too)", KEYS]


def parse_line(text: str) -> tuple[Operation, object] | None:
    """A line as an operation and its options (None: /help, which the door answers itself). A task is `run`."""
    if not text.startswith("/"):
        return OPERATIONS["run"], o.RunOptions(task=text)
    word, _, rest = text.partition(" ")
    name = word[1:]
    if name == "help":
        return None
    if name not in SLASH:
        close = difflib.get_close_matches(word, [f"/{n}" for n in [*SLASH, "help", "quit"]], n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; /help lists them"
        raise UsageError(f"unknown command {word}{hint}")
    return OPERATIONS[name], SLASH[name](rest.strip())


def sessions_dir(settings: Settings) -> Path:
    """Where each session keeps its memory, a file each (the last MAX_SESSIONS)."""
    return settings.repo_state_dir / "sessions"


def legacy_memory(settings: Settings) -> Path:
    """The one memory file of before sessions had their own: --resume still opens it once."""
    return settings.repo_state_dir / "session.json"


def history_path(settings: Settings) -> Path:
    return settings.repo_state_dir / "prompt-history"


def chat(settings: Settings, options: SessionOptions, *, as_json: bool, streams: bool) -> int:
    """The session: a prompt on a terminal, else each line of stdin a task (or a command)."""
    from code_assistant import console
    from code_assistant.agent.memory import Memory, last_session, prune_sessions, session_file
    from code_assistant.workspace import Workspace

    memory = last_session(sessions_dir(settings), legacy_memory(settings)) if options.resume else Memory()
    prune_sessions(sessions_dir(settings))
    display = console.display(as_json=as_json, streams=streams, verbose=settings.verbose)
    with Workspace(settings, display, memory=memory, session=memory.session,
                   memory_file=session_file(sessions_dir(settings), memory.session)) as workspace:
        open_session(workspace, resumed=options.resume)
        if sys.stdin.isatty() and not as_json:
            workspace.say("[Session: type a task, /help for commands; Alt-Enter for a new line, Ctrl-D to leave]")
            lines: Iterable[str] = console.prompt_lines(history_path(settings))
        else:
            lines = sys.stdin
        for line in lines:
            if line.strip() in QUIT:
                break
            handle(workspace, line, as_json=as_json)
    return EXIT_OK


def open_session(ws: Workspace, *, resumed: bool) -> None:
    """Before the first line: what can be checked (the test command, the sandbox, the key), the repository held for
    the session (an interrupted run's change taken out first), the model opened, the header said."""
    ws.check_before_runs()
    ws.hold()
    ws.model  # noqa: B018 - opened now: its server checked, its header said, before the first task
    ws.announce_sandbox()
    if resumed and (ws.memory.notes or ws.memory.pins):
        ws.say(f"[Resumed: {len(ws.memory.notes)} earlier task(s), {len(ws.memory.pins)} pinned file(s)]")


def handle(ws: Workspace, line: str, *, as_json: bool) -> None:
    """One line: its operation executed on the session's workspace and its outcome shown; an error is one line and
    the session goes on."""
    from code_assistant.console import render, say

    text = line.strip()
    if not text:
        return
    interrupts.rearm()
    command = None
    try:
        parsed = parse_line(text)
        if parsed is None:
            if as_json:
                print(json.dumps({"command": "/help", "lines": help_lines()}), flush=True)
            else:
                say("\n".join(help_lines()))
            return
        operation, options = parsed
        command = None if operation.name == "run" else f"/{operation.name}"
        render.show(operation.execute(ws, options), as_json=as_json, command=command)
    except KeyboardInterrupt:
        ws.say("[Cancelled]")
    except AssistantError as exc:
        render.error(exc, as_json=as_json, command=command)
