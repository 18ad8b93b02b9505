"""`recover`: take an interrupted run's change out of the repository (by the ownership rule: what anyone else wrote
since stays) and stop its leftover test processes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import RecoverOptions
from code_assistant.operations.outcomes import RecoverOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: RecoverOptions) -> RecoverOutcome:
    with ws.holding() as recovered:  # taking the repository is what recovers it
        return RecoverOutcome(outcomes=recovered)
