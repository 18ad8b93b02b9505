"""Windows learned from a server, remembered per server and model in the state folder (windows.json), so that the
next run against the same server starts within its window instead of spending its first request on a refusal.

A remembered window is a learned one (window.py: a refusal that names it, an answer cut off where it ends, a prompt the
server cut), never a setting, a report or the default: those are asked or known again each run. It is checked again
cheaply: it is kept with a fingerprint of the server's GET /models answer (which the run asks anyway), and a server
that answers otherwise (restarted with another model) has its memory dropped; a server that says otherwise during a
run (another refusal, another cut) overwrites it. Its source says where it came from, so a run's header shows it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from code_assistant.model.window import RATIO_MARGIN, RATIO_SAMPLES, ContextWindow

logger = logging.getLogger(__name__)

FILE_NAME = "windows.json"
FORMAT = 1
MAX_ENTRIES = 64  # servers and models remembered; the oldest go first


def fingerprint(models: Any) -> str:
    """What identifies a server's answer to GET /models ("" for none): its model ids, sorted (a restart with the same
    model keeps them; a timestamp some servers add would make every answer new)."""
    entries = models.get("data") if isinstance(models, dict) else None
    if not isinstance(entries, list):
        return ""
    ids = sorted(str(e.get("id")) for e in entries if isinstance(e, dict))
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16] if ids else ""


@dataclass
class WindowMemory:
    """One server and model's entry in the state folder's windows.json. `seen`: the fingerprint of the server's
    GET /models answer this run."""

    path: Path
    base_url: str
    model: str
    seen: str = ""

    @property
    def key(self) -> str:
        return f"{self.base_url.rstrip('/')} {self.model}"

    def recall(self, checked: bool = True) -> ContextWindow | None:
        """The window learned by an earlier run, or None (none, unreadable, or the server answers otherwise now).
        `checked`: only when the server's GET /models answers as it did (else, unasked: what a command that asks no
        server reports, as what a run against the same server will start from)."""
        entry = self._entries().get(self.key)
        if not isinstance(entry, dict) or not isinstance(entry.get("tokens"), int):
            return None
        if checked and entry.get("server", "") != self.seen:
            logger.info("%s answers GET /models otherwise than when its window was learned; learned again", self.key)
            return None
        samples = tuple(float(s) for s in entry.get("samples", []) if isinstance(s, (int, float)))[-RATIO_SAMPLES:]
        when = time.strftime("%Y-%m-%d", time.localtime(float(entry.get("at", 0))))
        ratio = float(entry.get("ratio", ContextWindow.ratio))  # measured on another run's prompts: one more margin
        window = ContextWindow(tokens=entry["tokens"], source=f"remembered: {entry.get('source', 'learned')}, {when}",
                               ratio=ratio * RATIO_MARGIN if entry.get("measured") else ratio,
                               measured=bool(entry.get("measured")), samples=samples)
        window.keep = self.keep
        return window

    def keep(self, window: ContextWindow) -> None:
        """Write what the window has learned (a failure to write is logged: the next run learns it again)."""
        entries = self._entries()
        source = window.source.removeprefix("remembered: ").rsplit(", ", 1)[0] if window.source.startswith(
            "remembered: ") else window.source
        entries.pop(self.key, None)
        ratio = max(window.samples) * RATIO_MARGIN if window.samples else window.ratio  # as measured, not as recalled
        entries[self.key] = {"tokens": window.tokens, "source": source, "ratio": round(ratio, 4),
                             "measured": window.measured, "samples": list(window.samples), "server": self.seen,
                             "at": time.time()}
        entries = dict(list(entries.items())[-MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".windows-")
            with os.fdopen(fd, "w") as out:
                json.dump({"format": FORMAT, "windows": entries}, out, indent=1)
            os.replace(tmp, self.path)
            logger.info("remembered the window of %s: %d tokens", self.key, window.tokens)
        except OSError as exc:
            logger.warning("could not remember the context window in %s: %s", self.path, exc)

    def _entries(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        windows = data.get("windows") if isinstance(data, dict) and data.get("format") == FORMAT else None
        return dict(windows) if isinstance(windows, dict) else {}


def remembered_window(path: Path, base_url: str, model: str, named: bool) -> ContextWindow | None:
    """The window remembered for this server and `model`, unchecked (no server is asked); a model not named by the
    user (a local server's one model, which a run asks the server for): the server's only remembered window."""
    memory = WindowMemory(path, base_url, model)
    if (window := memory.recall(checked=False)) is not None or named:
        return window
    server = f"{base_url.rstrip('/')} "
    keys = [key for key in memory._entries() if key.startswith(server)]
    return WindowMemory(path, base_url, keys[0][len(server):]).recall(checked=False) if len(keys) == 1 else None
