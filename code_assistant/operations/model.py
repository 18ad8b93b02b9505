"""`model`: say which model is asked, or ask another from now on (its server checked and its window learned)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import ModelOptions
from code_assistant.operations.outcomes import ModelOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: ModelOptions) -> ModelOutcome:
    if options.name:
        ws.switch_model(options.name)
    model = ws.model
    return ModelOutcome(name=model.name, window=model.window.describe())
