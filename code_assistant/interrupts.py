"""The signals that end a run, and the stretch of work no signal may cut short.

SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal closed, an ssh connection dropped) and SIGQUIT (Ctrl-\\) all end a run
the same way: a KeyboardInterrupt where the run is, which rolls it back. The first one does; any that comes after it
before the command has finished, or while a rollback, recovery or undo is putting files back (`shielded`), is only
noted: a second Ctrl-C never leaves a half-restored repository. SIGKILL cannot be caught; the journal covers it.
"""
from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

logger = logging.getLogger(__name__)

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_state = {"armed": False, "raised": False, "shield": 0, "pending": False}
noted: list[int] = []  # signals that arrived while one was already being handled or while shielded


def _handle(signum: int, frame: FrameType | None) -> None:
    if _state["raised"] or _state["shield"]:
        noted.append(signum)
        _state["pending"] = _state["pending"] or not _state["raised"]
        logger.warning("%s arrived while the repository is being put back; it finishes first",
                       signal.Signals(signum).name)
        return
    _state["raised"] = True
    raise KeyboardInterrupt


@contextmanager
def installed(*, leaving: bool = False) -> Iterator[None]:
    """While the command runs, every ending signal interrupts it once; the handlers before are put back after (a
    caller in the same process, a test, keeps its own). With `leaving` (the process's entrance, which exits right
    after) they are ignored after instead, with no moment between: put back, the default action of a late SIGHUP
    or SIGQUIT would end the process with that signal's status instead of the command's own exit status. Main
    thread only, as signal handlers must be."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in ENDING_SIGNALS}
    for signum in ENDING_SIGNALS:
        signal.signal(signum, _handle)
    _state["armed"], _state["raised"], _state["pending"] = True, False, False
    noted.clear()
    try:
        yield
    finally:
        _state["armed"] = False
        _state["raised"] = _state["raised"] or leaving  # the command is done: one more is only noted, then ignored
        for signum, handler in saved.items():
            signal.signal(signum, signal.SIG_IGN if leaving else handler)  # type: ignore[arg-type]


def interrupted() -> bool:
    """The task now ending (or last ended) was cut short by a signal (until the next rearm)."""
    return bool(_state["raised"])


def rearm() -> None:
    """A new task begins (a session): the next signal interrupts it again."""
    _state["raised"] = _state["pending"] = False
    noted.clear()


@contextmanager
def shielded() -> Iterator[None]:
    """Work no ending signal may cut short: a signal that arrives meanwhile is noted, and takes effect once the
    work is done (unless it came after the run was already interrupted: then it is only noted). Where our handler
    is not installed (a library caller), the shield takes the signals over for the stretch, in the main thread,
    and sends a noted one again afterwards, to whatever handled it before."""
    main = threading.current_thread() is threading.main_thread()
    saved: dict[int, object] = {}
    if main and not _state["armed"] and not _state["shield"]:
        for signum in ENDING_SIGNALS:
            saved[signum] = signal.getsignal(signum)
            signal.signal(signum, _handle)
    _state["shield"] += 1
    try:
        yield
    finally:
        _state["shield"] -= 1
        if not _state["shield"]:
            pending, _state["pending"] = _state["pending"], False
            if saved:
                again = list(dict.fromkeys(noted))
                noted.clear()
                for signum, handler in saved.items():
                    signal.signal(signum, handler)  # type: ignore[arg-type]
                for signum in again:
                    if saved[signum] != signal.SIG_IGN:
                        signal.raise_signal(signum)
            elif pending and main:
                _state["raised"] = True
                raise KeyboardInterrupt
