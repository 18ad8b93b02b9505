"""The waits in progress, shown (waiting.py's Status): on a terminal, a live line per wait once it has lasted
SHOW_AFTER_S — a spinner, what is awaited, the seconds so far and what is known — redrawn a few times a second and
taken away when the wait ends, so that the step's one-line result takes its place; without a terminal, a plain line
every PLAIN_EVERY_S seconds, so that a log shows the run is alive. The live line never shares the screen with a
streamed answer (held while one is open) nor with the session's prompt (stopped before it)."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

SHOW_AFTER_S = 1.0  # a shorter wait is not worth a line that flickers away
PLAIN_EVERY_S = 10.0  # a log's line per wait, this often
REFRESH_PER_S = 4


class _Wait:
    def __init__(self, owner: Waits, what: str) -> None:
        self.owner, self.what, self.detail = owner, what, ""
        self.since = time.monotonic()
        self.said = 0  # plain lines said so far
        self.spinner: Any = None  # its spinner on a terminal

    def tick(self, detail: str) -> None:
        self.detail = detail

    def ended(self) -> None:
        self.owner.end(self)

    def seconds(self) -> float:
        return time.monotonic() - self.since

    def words(self) -> str:
        return f"{self.what}: {int(self.seconds())} s" + (f", {self.detail}" if self.detail else "")


class Waits:
    """The waits on at the moment (one per thread that waits), under one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.waits: list[_Wait] = []

    def started(self, what: str) -> _Wait:
        wait = _Wait(self, what)
        with self.lock:
            self.waits.append(wait)
            self.changed()
        return wait

    def end(self, wait: _Wait) -> None:
        with self.lock:
            if wait in self.waits:
                self.waits.remove(wait)
            self.changed()

    def stop(self) -> None:
        """Every wait forgotten and nothing left on the screen (before a prompt; the command's last word)."""
        with self.lock:
            self.waits.clear()
            self.changed()

    def hold(self) -> None:
        """A streamed answer is on the screen: no status line until release."""

    def release(self) -> None:
        pass

    def changed(self) -> None:
        """Called under the lock when a wait starts or ends."""


class LiveLine(Waits):
    """A terminal: rich's Live on stdout, transient; what is printed meanwhile (stdout, and stderr when it is the
    terminal too) goes above the line. Below the waits, the line a person is typing while a session's task runs
    (`typing`): drawn by the same display, so a wait's line redrawn never draws over it."""

    def __init__(self, console: Callable[[], Console]) -> None:
        super().__init__()
        self._console = console
        self._live: Live | None = None
        self._held = False
        self._typed = ""

    def typing(self, text: str | None) -> None:
        """The line being typed ('' or None: none now)."""
        with self.lock:
            self._typed = text or ""
            self.changed()
            if self._live is not None:
                self._live.refresh()

    def stop(self) -> None:
        with self.lock:
            self._typed = ""
            super().stop()

    def changed(self) -> None:
        if (self.waits or self._typed) and not self._held:
            self._start()
        elif not self.waits and not self._typed:
            self._stop()

    def hold(self) -> None:
        with self.lock:
            self._held = True
            self._stop()

    def release(self) -> None:
        with self.lock:
            self._held = False
            self.changed()

    def _start(self) -> None:
        if self._live is not None:
            return
        from rich.live import Live

        self._live = Live(get_renderable=self._render, console=self._console(), transient=True,
                          refresh_per_second=REFRESH_PER_S, redirect_stdout=True, redirect_stderr=_stderr_shared())
        self._live.start()

    def _stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _render(self) -> Any:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        lines: list[Any] = []
        for wait in list(self.waits):  # no lock: stopping the line waits for this thread while holding it
            if wait.seconds() >= SHOW_AFTER_S:
                wait.spinner = wait.spinner or Spinner("dots", style="dim")
                wait.spinner.update(text=wait.words())
                lines.append(wait.spinner)
        if typed := self._typed:
            lines.append(Text(f"> {typed}", style="bold") + Text(" (after this task)", style="dim"))
        return Group(*lines)


class PlainLines(Waits):
    """No terminal (a CI log, a pipe): a line per wait every PLAIN_EVERY_S seconds, from a thread of its own that
    lives while there are waits."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__()
        self._say = say
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def changed(self) -> None:
        if self.waits and self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="status", daemon=True)
            self._thread.start()
        elif not self.waits:
            self._wake.set()

    def _tick(self) -> None:
        while True:
            self._wake.wait(1.0)
            with self.lock:
                self._wake.clear()
                if not self.waits:
                    self._thread = None
                    return
                due = [wait for wait in self.waits if wait.seconds() >= PLAIN_EVERY_S * (wait.said + 1)]
                for wait in due:
                    wait.said = int(wait.seconds() // PLAIN_EVERY_S)
                    self._say(f"[{wait.words()}]")


def _stderr_shared() -> bool:
    """stderr is the terminal too: what is written there while the line is up goes above it (else it stays apart,
    in its file)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
