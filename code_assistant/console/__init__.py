"""The terminal: what the doors show a person while an operation works — progress lines, the status line of a wait
(status.py), the embedding bar, streamed answers, log records, review, the session's prompt — and the Display an
operation is given to show them (render.py shows what it ends with). Printing happens here and in render.py only."""
from __future__ import annotations

import functools
import logging
import os
import sys
from collections import deque
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from code_assistant.display import PROGRESS_ENV
from code_assistant.review import Decision, Reviewed

if TYPE_CHECKING:  # the CLI imports this module first: the pipeline is loaded only when a command needs it
    from rich.console import Console
    from rich.progress import Progress

    from code_assistant.console.status import Waits
    from code_assistant.console.typeahead import Typeahead
    from code_assistant.workspace import Display


@functools.cache
def _out() -> Console:
    """rich takes a tenth of a second to import: only output that needs it (colour, bars) loads it."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


@functools.cache
def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


_line_open = False  # a streamed answer is on the terminal without its last newline
_open_on_stdout = False  # that answer is --ask's, on stdout (a run's answers stream dim on stderr with -v)
_status: Waits | None = None  # the waits shown (display() makes it): held while a streamed answer is open
_typeahead: Typeahead | None = None  # a session's terminal, read while a task runs


def say(line: str) -> None:
    end_stream()
    write(line + "\n")


def say_progress(line: str) -> None:
    """A progress line on stderr, for an operation whose stdout is its report or its outcome (--json)."""
    end_stream()
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # stderr's reader has gone, or it was closed
        pass


def write(text: str) -> None:
    """Text on stdout, now; once its reader has gone (`| head`), nowhere, quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        reader_left()


def reader_left() -> None:
    """stdout's reader has gone: what is still written goes to /dev/null, so that the operation ends as it would
    have (a run is not cut short by a closed pipe) and nothing is said about it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def stream(piece: str) -> None:
    """A run's answer as it arrives, raw (-v): progress, dim on stderr."""
    global _line_open, _open_on_stdout
    _hold_status()
    _err().print(piece, end="", style="dim", markup=False)
    _line_open, _open_on_stdout = bool(piece) and not piece.endswith("\n") or (_line_open and not piece), False


def answer(piece: str) -> None:
    """--ask's answer as it arrives: the command's output, in plain text on stdout."""
    global _line_open, _open_on_stdout
    _hold_status()
    write(piece)
    _line_open, _open_on_stdout = bool(piece) and not piece.endswith("\n") or (_line_open and not piece), True


def end_stream() -> None:
    """End a streamed answer's line, so that what comes next starts a line of its own; the status line may show
    again."""
    _end_line()
    if _status is not None:
        _status.release()


def _end_line() -> None:
    global _line_open
    if _line_open and _open_on_stdout:
        write("\n")
    elif _line_open:
        _err().print()
    _line_open = False


def _unshown(piece: str) -> None:
    """A run's answer as it arrives, without -v: not shown (the status line counts it; the plan is said parsed)."""


def _hold_status() -> None:
    if _status is not None:
        _status.hold()


def stop_status() -> None:
    """No status line left on the screen: before the session's prompt, and at the command's end whatever happened
    (the cursor shown again)."""
    if _status is not None:
        _status.stop()


class OneLine(logging.Formatter):
    """A log record as a person reads it beside the command's own lines: `warning: what happened`, on one line (the
    logger's name and a traceback are -v's)."""

    def format(self, record: logging.LogRecord) -> str:
        level = "warning" if record.levelno < logging.ERROR else "error"
        return f"{level}: {' '.join(record.getMessage().split())}"


class LogLines(logging.Handler):
    """Log records on stderr, each on a line of its own: a streamed answer's open line is ended first (the answer
    may go on after it, on a line of its own); written to the stderr of the moment, so that a status line on the
    terminal moves below it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            _end_line()
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's own way: a record that cannot be written is reported, not raised
            self.handleError(record)


def prompt_lines(history: Path) -> Generator[str, None, None]:
    """A session's input on a terminal: line editing, the repository's own history (kept in `history`), a pasted
    block as one input, Alt-Enter (or Esc, Enter) for a newline; Ctrl-C clears the line, Ctrl-D ends. While the
    consumer works on a line, what is typed is shown below the status line and queued (typeahead.py), and comes
    next, shown after the prompt; a line still being typed comes back to the prompt to be finished. When the work was
    cancelled (Ctrl-C), what was queued waits: each line is offered at the prompt in turn, Enter runs it, Ctrl-C
    drops it."""
    global _typeahead
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    from code_assistant import interrupts
    from code_assistant.console.status import LiveLine
    from code_assistant.console.typeahead import END, Typeahead

    history.parent.mkdir(parents=True, exist_ok=True)
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(history=FileHistory(str(history)), key_bindings=keys)
    shows = _status.typing if isinstance(_status, LiveLine) else None
    _typeahead = ahead = Typeahead(sys.stdin.fileno(), say, show=shows)
    waiting: deque[str] = deque()  # queued during a task that was cancelled: offered at the prompt, not run
    first = True
    while True:
        stop_status()
        if not first and interrupts.interrupted() and ahead.queued:
            lines = [line for line in ahead.queued if line is not END]  # Ctrl-D meant "after that task": gone too
            ahead.queued.clear()
            waiting.extend(lines)
            say(f"[Cancelled: the {len(lines)} line(s) typed meanwhile wait, each offered at the prompt: Enter runs "
                f"it, Ctrl-C drops it]" if lines else "[Cancelled: the session goes on (Ctrl-D leaves)]")
        first = False
        typed, ahead.typed = ahead.typed, ""
        if ahead.queued and not waiting:
            line = ahead.queued.popleft()
            if line is END:
                return
            say(f"> {line}")
        else:
            try:
                line = session.prompt("> ", default=waiting.popleft() if waiting else typed)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
        with ahead:
            yield line


def read_line() -> str:
    """A line the person types in answer to a question (a review, an approval); '' at the end of input."""
    if _typeahead is not None and _typeahead.listening:
        return _typeahead.answer()
    return sys.stdin.readline()


def clear_screen() -> None:
    """A session's /clear: the terminal's screen cleared (nothing without a terminal)."""
    if sys.stdout.isatty():
        _out().clear()


def show_diff(diff: str) -> None:
    if not diff.strip():
        return
    if sys.stdout.isatty():
        from rich.syntax import Syntax

        _out().print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        write(diff if diff.endswith("\n") else diff + "\n")


def review(diff: str) -> Reviewed:
    """Show a proposed diff; 'y' applies, 'n' sends the refusal (and an optional reason) to the model, 'q' stops."""
    show_diff(diff)
    while True:
        say("Apply this change? [y]es / [n]o, tell the model / [q]uit")
        answer = read_line()
        if not answer:
            return Reviewed(Decision.QUIT)
        choice = answer.strip().lower()[:1]
        if choice in (Decision.APPLY, Decision.QUIT):
            return Reviewed(Decision(choice))
        if choice == Decision.REJECT:
            say("What should the model do differently? (one line, optional)")
            return Reviewed(Decision.REJECT, read_line().strip())


def confirm(question: str) -> bool:
    """A yes/no question on the terminal; anything but y is no."""
    say(f"{question} [y/N]")
    return read_line().strip().lower()[:1] == "y"


class _EmbedProgress:
    """Files, chunks, rate and ETA of a full embedding run: a bar on a terminal, else a line per written batch
    (on stderr, so that --json keeps stdout to itself)."""

    def __init__(self, files: int, enabled: bool) -> None:
        self.files, self.enabled = files, enabled
        self._bar: Progress | None = None
        self._task: Any = None
        self._last_files = 0

    def __call__(self, report: Any) -> None:
        if not self.enabled:
            return
        if sys.stdout.isatty():
            if self._bar is None:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )

                self._bar = Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("files, {task.fields[chunks]} chunks, {task.fields[rate]}/s"),
                                     TimeElapsedColumn(), TimeRemainingColumn(), console=_out(), transient=True)
                self._bar.start()
                self._task = self._bar.add_task("embed", total=self.files, chunks=0, rate="0.0")
            rate = report.embedded / max(self._bar.tasks[0].elapsed or 1e-9, 1e-9)
            self._bar.update(self._task, completed=report.files, chunks=report.embedded, rate=f"{rate:.1f}")
        elif report.files > self._last_files:  # a batch was written
            self._last_files = report.files
            _err().print(f"[Embedding: {report.files}/{self.files} files, {report.embedded} chunks embedded, "
                         f"{report.reused} reused]", markup=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextmanager
def embed_progress(files: int, enabled: bool = True) -> Iterator[_EmbedProgress]:
    progress = _EmbedProgress(files, enabled)
    try:
        yield progress
    finally:
        progress.close()


def display(*, as_json: bool, streams: bool, verbose: bool = False, report: bool = False) -> Display:
    """What an operation shows while it works: progress lines, a status line for every wait (live on a terminal,
    every ten seconds in a log), the run's answers counted as they stream (`streams`) but shown raw only with -v,
    --ask's answer streamed as plain text; for --json, nothing on stdout but the outcome (a full embedding's
    progress goes to stderr; with CODE_ASSISTANT_PROGRESS=stderr, the progress lines and a line per wait every ten
    seconds too). `report`: the outcome is what stdout is for (`context`, `search`: read by a pipe, `| head`), so the
    progress lines and the status line go to stderr."""
    global _status
    from code_assistant.console.status import LiveLine, PlainLines
    from code_assistant.workspace import Display

    if as_json and os.environ.get(PROGRESS_ENV) == "stderr":  # eval's agents: their logs/ID.log fills as they run
        return Display(say=say_progress, review=review, status=PlainLines(say_progress),
                       embed_progress=embed_progress)
    if as_json:
        return Display(review=review, embed_progress=embed_progress)
    if report:
        _status = LiveLine(_err) if sys.stderr.isatty() else PlainLines(say_progress)
        return Display(say=say_progress, end_stream=end_stream, review=review, status=_status,
                       embed_progress=embed_progress, confirm=confirm if sys.stdin.isatty() else None)
    _status = LiveLine(_out) if sys.stdout.isatty() else PlainLines(say)
    return Display(say=say, run_tokens=(stream if verbose else _unshown) if streams else None,
                   answer_tokens=answer if streams else None, end_stream=end_stream, review=review, status=_status,
                   embed_progress=embed_progress, confirm=confirm if sys.stdin.isatty() else None)
