"""What the MCP door tells its client while a tool works: progress notifications (when the call carried a
progressToken; otherwise the SDK sends nothing) — each line the operation says and each wait's news, at most
PROGRESS_PER_S a second — and the assistant's own log records at the level the client set with `logging/setLevel`.
The operations run in worker threads; each message is sent on the server's event loop, from whichever thread has it.
Both are redacted as everything the assistant sends another agent is."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio.from_thread

from code_assistant import redact

PROGRESS_PER_S = 4.0  # a wait's news (tests done so far) no more often than this; lines said always go
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO + 5, "warning": logging.WARNING,
          "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL + 5,
          "emergency": logging.CRITICAL + 10}  # MCP's levels (RFC 5424's) on Python's scale
DEFAULT_LEVEL = "warning"  # before the client sets one: what a terminal shows without -v

logger = logging.getLogger(__name__)


def mcp_level(levelno: int) -> str:
    """A Python log level as the MCP level it reaches (the highest at or below it)."""
    return max((name for name, number in LEVELS.items() if number <= levelno), key=LEVELS.__getitem__,
               default="debug")


class Call:
    """One tool call's channel back to its client: `ctx` is the SDK's Context of the call, `token` its event loop's."""

    def __init__(self, ctx: Any, token: Any) -> None:
        self.ctx, self.token = ctx, token
        self.step = 0
        self._last = float("-inf")
        self._lock = threading.Lock()

    def progress(self, message: str, *, news: bool = False) -> None:
        """One more step, in words; `news` (a wait's tick) is dropped when the last step was too recent."""
        with self._lock:
            now = time.monotonic()
            if news and now - self._last < 1 / PROGRESS_PER_S:
                return
            self.step, self._last = self.step + 1, now
            step = self.step
        self._send(self.ctx.report_progress, step, None, redact.redact(message, quiet=True)[0])

    def log(self, level: str, text: str, name: str) -> None:
        session = self.ctx.request_context.session
        self._send(session.send_log_message, level, redact.redact(text, quiet=True)[0], name, self.ctx.request_id)

    def _send(self, send: Callable[..., Any], *args: Any) -> None:
        try:
            anyio.from_thread.run(send, *args, token=self.token)
        except Exception as exc:  # noqa: BLE001 - a client gone, or the loop's own thread: the tool's work goes on
            logger.debug("not sent to the MCP client: %r", exc)


class Progress:
    """The workspace's Status for the door: a wait's start and news are the call's progress."""

    def __init__(self, call: Callable[[], Call | None]) -> None:
        self.call = call

    def started(self, what: str) -> _Wait:
        if (call := self.call()) is not None:
            call.progress(what)
        return _Wait(self.call, what)


class _Wait:
    def __init__(self, call: Callable[[], Call | None], what: str) -> None:
        self.call, self.what = call, what

    def tick(self, detail: str) -> None:
        if (call := self.call()) is not None:
            call.progress(f"{self.what}: {detail}", news=True)

    def ended(self) -> None:
        pass


class ToClient(logging.Handler):
    """The assistant's log records during a call, to its client, at or above the level it set."""

    def __init__(self, call: Callable[[], Call | None]) -> None:
        super().__init__(LEVELS[DEFAULT_LEVEL])
        self.call = call

    def handle(self, record: logging.LogRecord) -> bool:  # type: ignore[override]
        """Without the handler's lock: a record waits for the event loop to send it, and the loop must never wait for
        a record."""
        if record.levelno >= self.level and self.filter(record):
            self.emit(record)
            return True
        return False

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == __name__ or (call := self.call()) is None:
            return
        call.log(mcp_level(record.levelno), " ".join(record.getMessage().split()), record.name)


def listen(handler: ToClient, level: str) -> None:
    """The client's `logging/setLevel`: from now on its records at `level` and above (the terminal's stay as they
    were: the handlers already on the root logger keep the level they showed)."""
    root = logging.getLogger()
    for other in root.handlers:
        if other.level == logging.NOTSET:
            other.setLevel(root.level)
    handler.setLevel(LEVELS[level])
    ours = logging.getLogger("code_assistant")
    if handler not in ours.handlers:
        ours.addHandler(handler)
    ours.setLevel(min(LEVELS[level], root.level))
