"""What a session remembers between tasks: its id (its runs are its own to undo), a short note per finished task (the
task, the files changed with a diff stat, the result, the failing tests) and the files pinned into every task's
context. The notes go into every request of the next tasks newest first, as many as their budget holds (older ones
dropped first); each session's memory is kept in a file of its own beside the repository's state, so that `--resume`
brings back the last session's."""
from __future__ import annotations

import json
import logging
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from code_assistant import tokens

logger = logging.getLogger(__name__)

MEMORY_VERSION = 1
MAX_NOTES = 50  # kept on disk; the request takes what its budget holds, newest first
MAX_SESSIONS = 10  # sessions kept per repository (the oldest file goes)


@dataclass(frozen=True)
class Note:
    """One finished task, in a few lines: what was asked, what came of it."""

    task: str
    result: str  # the result line: "passed", "failed (max_iterations): ...", "undone"
    files: tuple[str, ...] = ()  # "calc.py (+2 -1)"
    failing: tuple[str, ...] = ()  # test ids still failing at the end

    def render(self) -> str:
        lines = [f"- Task: {self.task.strip()}", f"  Result: {self.result}"]
        if self.files:
            lines.append(f"  Files changed: {', '.join(self.files)}")
        if self.failing:
            lines.append(f"  Still failing: {', '.join(self.failing[:8])}" + (" …" if len(self.failing) > 8 else ""))
        return "\n".join(lines)


def diff_stat(diff: str) -> dict[str, tuple[int, int]]:
    """A unified diff's lines added and removed, per file (the `+++ b/` name; a deletion keeps its `---` name)."""
    stats: dict[str, list[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            name = line[4:].split("\t")[0]
            current = None if name == "/dev/null" else name.removeprefix("a/")
        elif line.startswith("+++ "):
            name = line[4:].split("\t")[0]
            current = current if name == "/dev/null" else name.removeprefix("b/")
            if current is not None:
                stats.setdefault(current, [0, 0])
        elif current is not None and line.startswith("+"):
            stats[current][0] += 1
        elif current is not None and line.startswith("-"):
            stats[current][1] += 1
    return {path: (added, removed) for path, (added, removed) in stats.items()}


def files_with_stat(diff: str) -> tuple[str, ...]:
    return tuple(f"{path} (+{added} -{removed})" for path, (added, removed) in diff_stat(diff).items())


def notes_text(notes: list[Note], budget: int) -> str:
    """The notes, newest first, as many whole notes as `budget` tokens hold ("" for none)."""
    text, used = "", 0
    for note in reversed(notes):
        block = note.render() + "\n"
        size = tokens.count_tokens(block)
        if used + size > budget:
            break
        text, used = text + block, used + size
    return text


@dataclass
class Memory:
    """A session's notes, the files the user pinned into every task's context, and the files the session changed
    (pinned too, after the user's)."""

    notes: list[Note] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    session: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # its runs' journals carry it

    @property
    def last_task(self) -> str:
        return self.notes[-1].task if self.notes else ""

    def taken_back(self, task: str, files: list[str]) -> None:
        """The change of `task` (its latest note) was taken back (/undo): its note says so, its files are no longer
        the session's changes."""
        for i in range(len(self.notes) - 1, -1, -1):
            if self.notes[i].task.strip().splitlines()[0][:200] == task:
                self.notes[i] = replace(self.notes[i], result=f"{self.notes[i].result}; then taken back by the user "
                                                              f"(/undo): that change is no longer in the files",
                                        files=())
                break
        self.changed = [p for p in self.changed if p not in files]

    def shown(self) -> list[str]:
        """What every task's context must show: the pins, then the files the session changed, newest first."""
        return list(dict.fromkeys([*self.pins, *reversed(self.changed)]))

    def remember(self, note: Note, changed: list[str]) -> None:
        self.notes = [*self.notes, note][-MAX_NOTES:]
        self.changed = [*(p for p in self.changed if p not in changed), *changed][-MAX_NOTES:]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": MEMORY_VERSION, "session": self.session, "notes": [asdict(n) for n in self.notes],
                "pins": self.pins, "changed": self.changed}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Memory:
        """The saved memory; an absent, unreadable or newer file is an empty memory (logged)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != MEMORY_VERSION:
                raise ValueError(f"version {data.get('version')}")
            notes = [Note(task=n["task"], result=n["result"], files=tuple(n.get("files", ())),
                          failing=tuple(n.get("failing", ()))) for n in data.get("notes", [])]
            return cls(notes=notes, pins=[str(p) for p in data.get("pins", [])],
                       changed=[str(p) for p in data.get("changed", [])],
                       **({"session": str(data["session"])} if data.get("session") else {}))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("the saved session at %s could not be read (%s); starting afresh", path, exc)
            return cls()


def session_file(sessions: Path, session: str) -> Path:
    return sessions / f"{session}.json"


def last_session(sessions: Path, legacy: Path | None = None) -> Memory:
    """The memory of the last session that ended (the newest file; a memory kept in the one file of before, when
    there is none); an empty one when there was no session."""
    files = sorted(sessions.glob("*.json"), key=lambda f: f.stat().st_mtime) if sessions.is_dir() else []
    if files:
        return Memory.load(files[-1])
    return Memory.load(legacy) if legacy is not None and legacy.is_file() else Memory()


def prune_sessions(sessions: Path, keep: int = MAX_SESSIONS) -> None:
    files = sorted(sessions.glob("*.json"), key=lambda f: f.stat().st_mtime) if sessions.is_dir() else []
    for old in files[:-keep]:
        old.unlink(missing_ok=True)
