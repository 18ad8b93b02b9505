"""What the person says when a change is shown for review (--review). Imports nothing, so the CLI edge builds it
without loading the pipeline."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class Decision(StrEnum):
    """The value is the key the person types."""

    APPLY = "y"
    REJECT = "n"  # the refusal, with the reason if one was given, goes back to the model
    QUIT = "q"  # the run stops (refused) and is rolled back


@dataclass(frozen=True)
class Reviewed:
    decision: Decision
    why: str = ""  # with REJECT: what the model should do differently (optional)


Review = Callable[[str], Reviewed]  # the diff shown -> what the person said
