"""What a session remembers between tasks: a short note per finished task (the task, the files changed with a diff
stat, the result, the failing tests) and the files pinned into every task's context. The notes go into the next
request newest first, as many as its budget holds (older ones dropped first); they are kept beside the repository's
state so that `--resume` brings them back."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from code_assistant import tokens

logger = logging.getLogger(__name__)

MEMORY_VERSION = 1
MAX_NOTES = 50  # kept on disk; the request takes what its budget holds, newest first


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

    def shown(self) -> list[str]:
        """What every task's context must show: the pins, then the files the session changed, newest first."""
        return list(dict.fromkeys([*self.pins, *reversed(self.changed)]))

    def remember(self, note: Note, changed: list[str]) -> None:
        self.notes = [*self.notes, note][-MAX_NOTES:]
        self.changed = [*(p for p in self.changed if p not in changed), *changed][-MAX_NOTES:]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": MEMORY_VERSION, "notes": [asdict(n) for n in self.notes], "pins": self.pins,
                "changed": self.changed}
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
                       changed=[str(p) for p in data.get("changed", [])])
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("the saved session at %s could not be read (%s); starting afresh", path, exc)
            return cls()
