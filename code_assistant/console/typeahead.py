"""Lines typed while a session's task runs. While the task runs the terminal is read a key at a time, without the
terminal's own echo, and the line being typed is shown by the status line's display below the waits (`show`), so a
redrawn status line never draws over it (without a display to show it, the terminal keeps its own line mode and
echo). A line is taken once it is finished (Enter), said as queued, and given to the session after the task, in
order, as if typed at its prompt — nothing typed meanwhile is lost or sent anywhere else. Backspace, Ctrl-U and
Ctrl-W edit the line; Ctrl-D on an empty line asks the session to end after the task; Ctrl-C stays the terminal's
signal (it cancels the task). A question the task asks meanwhile (a review, an approval) gets the next line typed
after it instead. A line still being typed when the task ends is kept (`typed`) for the prompt."""
from __future__ import annotations

import codecs
import os
import select
import termios
import threading
from collections import deque
from collections.abc import Callable
from typing import Self

POLL_S = 0.1  # how often the reader looks whether it should stop: the prompt waits this long at most for it
END = None  # in the queue: Ctrl-D, the session ends after the task
ERASE, KILL_LINE, KILL_WORD, EOF, ESC = "\x7f\x08", "\x15", "\x17", "\x04", "\x1b"


class Typeahead:
    """The reader of one terminal (`fd`), listening while a task runs (`with typeahead:`). `show`: shows the line
    being typed ('' once finished, None when the task ends); None: the terminal echoes it itself."""

    def __init__(self, fd: int, say: Callable[[str], None], show: Callable[[str | None], None] | None = None) -> None:
        self.fd, self.say, self.show = fd, say, show
        self.queued: deque[str | None] = deque()
        self.typed = ""  # the line being typed, unfinished
        self._changed = threading.Condition()
        self._asking = False
        self._answers: deque[str] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mode: list | None = None  # the terminal's mode before, while it is read a key at a time
        self._escape = ""  # an escape sequence being read (an arrow key): not text

    def __enter__(self) -> Self:
        self._stop.clear()
        self._keys()
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
        if self._mode is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, self._mode)
            except termios.error:
                pass
            self._mode = None
        if self.show is not None:
            self.show(None)

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

    def _keys(self) -> None:
        """The terminal read a key at a time, unechoed (signals such as Ctrl-C left on), when there is a display."""
        if self.show is None or not os.isatty(self.fd):
            return
        try:
            self._mode = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            mode[3] &= ~(termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        except termios.error:
            self._mode = None

    def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = b""
        while not self._stop.is_set():
            try:
                ready = select.select([self.fd], [], [], POLL_S)[0]
                data = os.read(self.fd, 4096) if ready else None
            except OSError:
                return
            if data is None:
                continue
            if not data:  # line mode: Ctrl-D on an empty line
                self._took(END)
                continue
            if self._mode is None:  # line mode: the terminal edited and echoed the line
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self._took(line.decode("utf-8", "replace").rstrip("\r"))
                continue
            for key in decoder.decode(data):
                self._key(key)
            if self.show is not None:
                self.show(self.typed)

    def _key(self, key: str) -> None:
        """One key of the line being typed."""
        if self._escape:
            self._escape += key
            introducer = len(self._escape) == 2 and key in "[O"
            if not introducer and (len(self._escape) == 2 or "@" <= key <= "~"):
                self._escape = ""  # ESC [ … a final byte, ESC O x, or ESC x (Alt-x): the sequence ends
            return
        if key == ESC:
            self._escape = key
        elif key in "\r\n":
            line, self.typed = self.typed, ""
            self._took(line)
        elif key in ERASE:
            self.typed = self.typed[:-1]
        elif key == KILL_LINE:
            self.typed = ""
        elif key == KILL_WORD:
            kept = self.typed.rstrip()
            self.typed = kept[:len(kept) - len(kept.split()[-1])] if kept.split() else ""
        elif key == EOF and not self.typed:
            self._took(END)
        elif key == "\t":
            self.typed += " "
        elif key >= " ":
            self.typed += key

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
