"""Everything the CLI shows a person: progress lines, the index progress bar, streamed answers, review, summary."""
from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from code_assistant.agent.review import Decision, Verdict
from code_assistant.agent.stop import Stop

if TYPE_CHECKING:  # the CLI imports this module first: the pipeline is loaded only when a command needs it
    from rich.console import Console
    from rich.progress import Progress

    from code_assistant.agent.candidates import CandidateOutcome
    from code_assistant.agent.state import RunResult
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.model.chat import Usage

PROGRESS_MIN_FILES = 200


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
_open_on_stdout = False  # that answer is --ask's, on stdout (a run's plan streams dim on stderr)


def say(line: str) -> None:
    end_stream()
    print(line, flush=True)


def quiet(line: str) -> None:
    """--json runs: progress goes nowhere, stdout holds only the result object."""


def stream(piece: str) -> None:
    """A run's answer as it arrives: progress, dim on stderr."""
    global _line_open, _open_on_stdout
    _err().print(piece, end="", style="dim", markup=False)
    _line_open, _open_on_stdout = bool(piece) and not piece.endswith("\n") or (_line_open and not piece), False


def answer(piece: str) -> None:
    """--ask's answer as it arrives: the command's output, in plain text on stdout."""
    global _line_open, _open_on_stdout
    sys.stdout.write(piece)
    sys.stdout.flush()
    _line_open, _open_on_stdout = bool(piece) and not piece.endswith("\n") or (_line_open and not piece), True


def end_stream() -> None:
    """End a streamed answer's line, so that what comes next starts a line of its own."""
    global _line_open
    if _line_open and _open_on_stdout:
        print(flush=True)
    elif _line_open:
        _err().print()
    _line_open = False


def prompt_lines(history: Path) -> Iterator[str]:
    """A session's input on a terminal: line editing, the repository's own history (kept in `history`), a pasted
    block as one input, Alt-Enter (or Esc, Enter) for a newline; Ctrl-C clears the line, Ctrl-D ends."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    history.parent.mkdir(parents=True, exist_ok=True)
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(history=FileHistory(str(history)), key_bindings=keys)
    while True:
        try:
            yield session.prompt("> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return


def show_diff(diff: str) -> None:
    if not diff.strip():
        return
    if sys.stdout.isatty():
        from rich.syntax import Syntax

        _out().print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
        sys.stdout.flush()


def review(diff: str) -> Verdict:
    """Show a proposed diff; 'y' applies, 'n' sends the refusal (and an optional reason) to the model, 'q' stops."""
    show_diff(diff)
    while True:
        say("Apply this change? [y]es / [n]o, tell the model / [q]uit")
        answer = sys.stdin.readline()
        if not answer:
            return Verdict(Decision.QUIT)
        choice = answer.strip().lower()[:1]
        if choice in (Decision.APPLY, Decision.QUIT):
            return Verdict(Decision(choice))
        if choice == Decision.REJECT:
            say("What should the model do differently? (one line, optional)")
            return Verdict(Decision.REJECT, sys.stdin.readline().strip())


class _IndexProgress:
    """A progress bar for big repositories on a terminal; nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stdout.isatty()
        self._bar: Progress | None = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < PROGRESS_MIN_FILES:
            return
        if self._bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=_out(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("index", total=total)
        self._bar.update(self._task, completed=done)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextmanager
def index_progress(enabled: bool = True) -> Iterator[_IndexProgress]:
    progress = _IndexProgress(enabled)
    try:
        yield progress
    finally:
        progress.close()


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


def usage_json(usage: Usage) -> dict[str, Any]:
    """A run's `tokens`: the server's counts, and `"estimated": true` when some were counted here."""
    counts: dict[str, Any] = {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                              "completion_tokens": usage.completion_tokens}
    return {**counts, "estimated": True} if usage.estimated else counts


def candidate_json(outcome: CandidateOutcome) -> dict[str, Any]:
    return {"candidate": outcome.number, "passed": outcome.passed, "stop_reason": outcome.stop_reason,
            "iterations": outcome.iterations, "changed_lines": outcome.changed_lines, "tokens": outcome.tokens,
            "cost_usd": outcome.cost_usd, "started_s": outcome.started_s, "seconds": outcome.seconds,
            "chosen": outcome.chosen}


def result_json(result: RunResult) -> dict[str, Any]:
    return {"success": result.success, "stop_reason": result.stop_reason, "iterations": result.iterations,
            "files_modified": result.files_modified, "rolled_back": result.rolled_back, "message": result.message,
            "tokens": usage_json(result.usage), "cost_usd": result.cost_usd, "log": result.log_path,
            "reproduction": result.reproduction, "candidates": [candidate_json(o) for o in result.candidates],
            "taken_back": taken_back_json(result.taken_back), "verified": result.verified,
            "verification": result.verification, "diff": result.diff}


def candidates_table(outcomes: list[CandidateOutcome]) -> None:
    say("Candidates:")
    say(f"  {'#':>2}  {'result':<28} {'iterations':>10} {'changed lines':>13} {'tokens':>8} {'cost':>9}")
    for o in outcomes:
        outcome = "passed" if o.passed else f"failed ({o.stop_reason})"
        cost = f"${o.cost_usd:.4f}" if o.cost_usd is not None else "-"
        mark = "  <- applied" if o.chosen else ""
        say(f"  {o.number:>2}  {outcome:<28} {o.iterations:>10} {o.changed_lines:>13} {o.tokens:>8} {cost:>9}{mark}")


def taken_back(outcomes: list[FileOutcome], what: str = "rolled back") -> None:
    """What a rollback, recovery or undo did, true to the byte: 'exactly as it was' only when every file is."""
    from code_assistant.edit.takeback import exactly_as_before

    if not outcomes:
        say("Nothing was changed.")
    elif exactly_as_before(outcomes):
        say(f"All changes were {what}: every file the assistant touched is byte for byte as it was.")
    else:
        say(f"The assistant's changes were {what}; edits made meanwhile by someone else were kept:")
        for outcome in outcomes:
            say(f"  - {outcome.describe()}")


def taken_back_json(outcomes: list[FileOutcome]) -> list[dict[str, Any]]:
    return [{"path": o.path, "outcome": o.fate, "why": o.why, "original": o.original} for o in outcomes]


def result_line(result: RunResult) -> str:
    """A success says whether a test shows the task done (verified) or only that the tests pass."""
    if result.stop_reason == Stop.NO_CHANGES:
        return f"Result: SUCCESS, NO CHANGE ({result.message or result.verification})"
    if result.verified:
        return f"Result: SUCCESS (verified: {result.verification}; iteration {result.iterations})"
    return (f"Result: SUCCESS, NOT VERIFIED (the tests pass; no test shows the task is done: {result.verification}; "
            f"iteration {result.iterations})")


def summary(result: RunResult) -> None:
    bar = "=" * 60
    if result.diff:
        say(bar)
        show_diff(result.diff)
    say(bar)
    if result.stop_reason == Stop.DRY_RUN:
        say("Result: DRY RUN — nothing was written" + ("" if result.success else "; some edits would fail"))
    elif result.success:
        say(result_line(result))
        say("Modified files:" if result.files_modified else "No files were modified; the tests already pass.")
        for path in result.files_modified:
            say(f"  - {path}")
    else:
        detail = result.message if result.message and result.message != result.stop_reason else ""
        say(f"Result: FAILED ({result.stop_reason}{': ' + detail if detail else ''})")
        taken_back(result.taken_back)
    if result.reproduction:
        say(f"Reproduction test: {result.reproduction}")
    if result.candidates:
        candidates_table(result.candidates)
    usage = result.usage
    if usage.calls:
        cost = f", about ${result.cost_usd:.4f}" if result.cost_usd is not None else ""
        counted = " (partly counted here: the server sent no usage)" if usage.estimated else ""
        say(f"Model usage: {usage.calls} call(s), {usage.prompt_tokens} prompt + "
            f"{usage.completion_tokens} completion tokens{cost}{counted}")
    if result.log_path:
        say(f"Run log: {result.log_path}")
    say(bar)
