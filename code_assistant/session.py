"""The session door (`chat`, and `python main.py --repo PATH` with no --task on a terminal): a conversation with the
repository. It opens one workspace and keeps it — the chat model, the index and its embedding model warm, a note of
every finished task for the next requests, the files the session changed pinned into the next context — and holds
the repository for its whole length. Each line is parsed into an operation of the table and its options record, made
from the arguments the table declares, as the command line's are: a line is a task (`run`); a line starting with `/`
names another operation (`/ask`, `/undo`, ...; `/help` lists them from the table) and says what the command line says
for it. A line that is only a command's name is never a task: `help`, `exit`, `quit`, `clear` and the names of
commands that change nothing (`diff`, `test`, ...) are taken as the command; any other (`undo`, `ask`) is asked
about. What is typed while a task runs comes after it (console/typeahead.py). Leaving, it says which of its tasks are
still in effect and how to take them back."""
from __future__ import annotations

import contextlib
import difflib
import json
import sys
from collections.abc import Generator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import interrupts
from code_assistant.errors import EXIT_OK, AssistantError, UsageError
from code_assistant.operations import OPERATIONS, Door, Operation, positional, reached_from
from code_assistant.operations import options as o
from code_assistant.settings import Settings

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace

KEYS = ("Anything else is a task (/run WORD sends a command's name as one). Alt-Enter (or Esc, Enter) starts a new "
        "line; Ctrl-C cancels a task and rolls it back; Ctrl-D leaves; what is typed during a task runs after it "
        "(after a Ctrl-C, it waits at the prompt).")


class Word(StrEnum):
    """What the session door answers itself, not an operation."""

    HELP = "help"
    QUIT = "quit"
    CLEAR = "clear"


WORDS = {"help": Word.HELP, "?": Word.HELP, "quit": Word.QUIT, "exit": Word.QUIT, "clear": Word.CLEAR}
TAKEN = ("diff", "test", "tokens", "context", "model")  # a bare name of one of these, which change nothing, runs it


@dataclass(frozen=True)
class SessionOptions:
    resume: bool = False  # reopen the repository's last session: its notes of earlier tasks and its pins


def session_words(operation: Operation, rest: str) -> o.Options:
    """The words after `/name` as the operation's options, made from the arguments the table declares: the words in
    order, one an argument (a number must be one); the last, when it is text, runs to the end of the line (a task, a
    pattern with spaces). Options (`-k`, `--glob`) are the command line's and the other agent's: a line is free text."""
    arguments = positional(operation.arguments)
    usage = f"usage: /{operation.name} {operation.words}"
    if not arguments and rest:
        raise UsageError(f"usage: /{operation.name} (it takes nothing after it)")
    values: dict[str, object] = {}
    for number, argument in enumerate(arguments):
        if not rest:
            if argument.required:
                raise UsageError(usage)
            break
        if argument.type is list:
            values[argument.name], rest = rest.split(), ""
        elif argument.type is str and number == len(arguments) - 1:
            values[argument.name], rest = rest, ""
        else:
            word, _, rest = rest.partition(" ")
            rest = rest.strip()
            if argument.type is int and not word.isdigit():
                raise UsageError(usage)
            values[argument.name] = int(word) if argument.type is int else word
    if rest:
        raise UsageError(usage)
    return operation.make(values)


SLASH = {op.name: op for op in reached_from(Door.SESSION)}  # the operations a slash command names


def help_lines() -> list[str]:
    width = max(len(op.words) for op in SLASH.values()) + 2
    lines = [f"/{op.name:<8}{op.words:<{width}}{op.summary}" for op in SLASH.values()]
    return [*lines, f"{'/clear':<{width + 9}}clear the screen", f"{'/help':<{width + 9}}this list",
            f"{'/quit':<{width + 9}}leave, saying what is still in effect (Ctrl-D does too)", KEYS]


def parse_line(text: str) -> tuple[Operation, o.Options] | Word:
    """A line as an operation and its options, or a word the door answers itself. A task is `run`; a line that is
    only a command's name is the command, or a UsageError that asks whether it was meant."""
    if not text.startswith("/"):
        bare = text.strip().lower().rstrip(".!")
        if bare in WORDS:
            return WORDS[bare]
        if bare in TAKEN:
            return SLASH[bare], session_words(SLASH[bare], "")
        if bare in SLASH:
            words = f" {SLASH[bare].words}" if SLASH[bare].words else ""
            raise UsageError(f"{bare!r} is a command's name: did you mean /{bare}{words}? (nothing was sent to the "
                             f"model; /run {bare} sends it as a task)")
        return SLASH["run"], session_words(SLASH["run"], text)
    word, _, rest = text.partition(" ")
    name = word[1:]
    if name in WORDS:
        return WORDS[name]
    if name not in SLASH:
        close = difflib.get_close_matches(word, [f"/{n}" for n in [*SLASH, *WORDS]], n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; /help lists them"
        raise UsageError(f"unknown command {word}{hint}")
    return SLASH[name], session_words(SLASH[name], rest.strip())


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
    from code_assistant.memory import Memory, last_session, prune_sessions, session_file
    from code_assistant.workspace import Workspace

    memory = last_session(sessions_dir(settings), legacy_memory(settings)) if options.resume else Memory()
    prune_sessions(sessions_dir(settings))
    display = console.display(as_json=as_json, streams=streams, verbose=settings.verbose)
    with Workspace(settings, display, memory=memory, session=memory.session,
                   memory_file=session_file(sessions_dir(settings), memory.session)) as workspace:
        open_session(workspace, resumed=options.resume)
        if sys.stdin.isatty() and not as_json:
            workspace.say("[Session: type a task, /help for commands; Alt-Enter for a new line, Ctrl-D to leave]")
            lines: Generator[str, None, None] = console.prompt_lines(history_path(settings))
        else:
            lines = (line for line in sys.stdin)
        with contextlib.closing(lines):  # the terminal is no longer read once the session ends
            for line in lines:
                if handle(workspace, line, as_json=as_json) == Word.QUIT:
                    break
        if not as_json:
            leaving(workspace)
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


def handle(ws: Workspace, line: str, *, as_json: bool) -> Word | None:
    """One line: its operation executed on the session's workspace and its outcome shown, or the door's own word
    answered (Word.QUIT: returned, the session ends); an error is one line and the session goes on."""
    from code_assistant.console import clear_screen, render, say

    text = line.strip()
    if not text:
        return None
    interrupts.rearm()
    command = None
    try:
        parsed = parse_line(text)
        if parsed == Word.HELP:
            say(json.dumps({"command": "/help", "lines": help_lines()}) if as_json else "\n".join(help_lines()))
            return None
        if parsed == Word.CLEAR:
            clear_screen()
            return None
        if isinstance(parsed, Word):
            return parsed
        operation, options = parsed
        command = None if operation.name == "run" else f"/{operation.name}"
        render.show(operation.execute(ws, options), as_json=as_json, command=command)
    except KeyboardInterrupt:
        ws.say("[Cancelled]")
    except AssistantError as exc:
        render.error(exc, as_json=as_json, command=command)
    return None


def leaving(ws: Workspace) -> None:
    """The session's last words: its tasks still in effect, and how to take them back."""
    from code_assistant.console import render

    try:
        render.leaving(OPERATIONS["diff"].execute(ws, o.DiffOptions()), ws.settings.repo)
    except AssistantError as exc:
        render.error(exc, as_json=False, command="/diff")
