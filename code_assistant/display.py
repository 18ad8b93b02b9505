"""How an operation shows its work to the person at the door while it works: the lines it says, an answer as it
streams, the waits, a review, a yes/no question. The console builds one for a terminal (console/); the default shows
nothing, as --json wants. The operation's result is not shown here: the door renders the outcome it returns."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from code_assistant.review import Reviewed

# set to "stderr": `run --json` says its progress lines, and a line per wait, on stderr (eval sets it for its agents,
# so a case's log fills as it runs)
PROGRESS_ENV = "CODE_ASSISTANT_PROGRESS"
from code_assistant.waiting import SILENT, Status


def _silent(line: str) -> None:
    """Progress nobody watches (--json: stdout holds only the result)."""


@contextlib.contextmanager
def _no_progress(*args: Any) -> Iterator[None]:
    yield None


@dataclass(frozen=True)
class Display:
    """What the person at the door is shown while an operation works, one callable each (None: nobody to show it
    to)."""

    say: Callable[[str], None] = _silent
    run_tokens: Callable[[str], None] | None = None  # a run's answers as they arrive (None: not streamed)
    answer_tokens: Callable[[str], None] | None = None  # an answer to a question as it arrives (None: shown at the end)
    end_stream: Callable[[], None] = lambda: None  # ends a streamed answer's line
    review: Callable[[str], Reviewed] | None = None  # --review: the diff shown, what the person said
    confirm: Callable[[str], bool] | None = None  # a yes/no question to the person (None: nobody to ask)
    status: Status = SILENT  # the waits (tests, the model, indexing) as they go
    embed_progress: Callable[[int], AbstractContextManager[Callable[[Any], None] | None]] = _no_progress
