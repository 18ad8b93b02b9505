"""Lines typed while a session's task runs. Between prompts the terminal is in its own line mode, echoing what is
typed; a line is taken off it once it is finished (Enter), said as queued, and given to the session after the task,
in order, as if typed at its prompt — nothing typed meanwhile is lost or sent anywhere else. Ctrl-D on an empty line
asks the session to end after the task. A question the task asks meanwhile (a review, an approval) gets the next line
typed after it instead. A line still being typed when the task ends stays on the terminal for the prompt."""
from __future__ import annotations

import os
import select
import threading
from collections import deque
from collections.abc import Callable
from typing import Self

POLL_S = 0.1  # how often the reader looks whether it should stop: the prompt waits this long at most for it
END = None  # in the queue: Ctrl-D, the session ends after the task


class Typeahead:
    """The reader of one terminal (`fd`), listening while a task runs (`with typeahead:`)."""

    def __init__(self, fd: int, say: Callable[[str], None]) -> None:
        self.fd, self.say = fd, say
        self.queued: deque[str | None] = deque()
        self._changed = threading.Condition()
        self._asking = False
        self._answers: deque[str] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self._stop.clear()
        self._thread = threading.Thread(target=self._read, name="typeahead", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def listening(self) -> bool:
        return self._thread is not None

    def answer(self) -> str:
        """The next line typed from now on (a question's answer); '' at Ctrl-D."""
        with self._changed:
            self._asking = True
            try:
                self._changed.wait_for(lambda: bool(self._answers) or self._stop.is_set())
                return self._answers.popleft() if self._answers else ""
            finally:
                self._asking = False

    def _read(self) -> None:
        pending = b""
        while not self._stop.is_set():
            try:
                ready = select.select([self.fd], [], [], POLL_S)[0]  # in line mode: ready once a line is finished
                data = os.read(self.fd, 4096) if ready else None
            except OSError:
                return
            if data is None:
                continue
            if not data:  # Ctrl-D on an empty line
                self._took(END)
                continue
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self._took(line.decode("utf-8", "replace").rstrip("\r"))

    def _took(self, line: str | None) -> None:
        with self._changed:
            if self._asking:
                self._answers.append(line or "")
                self._changed.notify_all()
                return
            if line is not None and not line.strip():
                return
            self.queued.append(line)
        self.say("[Ctrl-D: the session ends after this task]" if line is None else
                 f"[Queued: {line.strip()} — after this task]")
