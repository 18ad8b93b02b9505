"""`apply`: a plan of edits in the assistant's JSON format (the model's answer format: `{"changes": [...]}`; SEARCH/
REPLACE blocks and unified diffs are read too) applied to the repository as a run applies its model's plan — the
guardrails first, then through the journal, kept for `undo` — for another agent (over MCP) or a person. What applied
is kept; what did not is said in the words a model gets, naming the edits that applied and must not be sent again."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import ApplyOptions
from code_assistant.operations.outcomes import ApplyOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: ApplyOptions) -> ApplyOutcome:
    from code_assistant.agent.feedback import edit_feedback
    from code_assistant.answers.plan import PlanParseError, parse_answer
    from code_assistant.edit.edits import Action
    from code_assistant.edit.preview import preview_edits, refusals, sparing

    settings = ws.settings
    try:
        ops = [op for op in parse_answer(options.plan).ops if op.action != Action.READ]
    except PlanParseError as exc:
        return ApplyOutcome(feedback=f"The plan could not be read: {exc}", applied=False)
    if not ops:
        return ApplyOutcome(feedback="The plan holds no change.", applied=False)
    with ws.holding():
        preview = preview_edits(settings.repo, ops, [settings.index_path, settings.state_path])
        batch, weakened = refusals(preview, ws.limits(), is_plan=True)
        if batch:
            return ApplyOutcome(feedback="Refused, nothing was written: " + "; ".join(batch), applied=False)
        editor = ws.editor(task=options.label)
        results = editor.apply_edits(sparing(settings.repo, ops, weakened))
        refused = [f"{path}: {why}" for path, why in weakened.items()]
        diff, files = editor.diff(), editor.modified_files
        editor.finish()  # what applied is kept, and can be taken back with undo
    failed = refused or any(not r.ok for r in results)
    return ApplyOutcome(diff=diff, files=files, applied=bool(files),
                        feedback=edit_feedback(results, refused) if failed else "")
