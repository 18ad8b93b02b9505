"""`tokens`: the model usage and estimated cost of the workspace so far (a session's every task and answer)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import TokensOptions
from code_assistant.operations.outcomes import TokensOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: TokensOptions) -> TokensOutcome:
    return TokensOutcome(usage=ws.usage, cost_usd=ws.cost or None)
