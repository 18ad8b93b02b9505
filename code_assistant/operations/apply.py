"""`apply`: a plan of edits in the assistant's JSON format (the model's answer format: `{"changes": [...]}`; SEARCH/
REPLACE blocks and unified diffs are read too) applied to the repository the way a run applies its model's plan —
by the run's own applier (agent/applier.py): the guardrails, a file changed outside, --review, then the journal, kept
for `undo` — for another agent (over MCP) or a person. What applied is kept; what did not is said in the words a model
gets, naming the edits that applied and must not be sent again."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from code_assistant.operations.options import ApplyOptions
from code_assistant.operations.outcomes import ApplyOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace

logger = logging.getLogger(__name__)


def execute(ws: Workspace, options: ApplyOptions) -> ApplyOutcome:
    from code_assistant.agent.applier import Applier
    from code_assistant.agent.feedback import edit_feedback
    from code_assistant.agent.kit import Tree
    from code_assistant.answers.plan import PlanParseError, parse_answer
    from code_assistant.edit.edits import Action
    from code_assistant.edit.preview import Limits

    settings = ws.settings
    try:
        ops = [op for op in parse_answer(options.plan).ops if op.action != Action.READ]
    except PlanParseError as exc:
        return ApplyOutcome(feedback=f"The plan could not be read: {exc}", applied=False)
    if not ops:
        return ApplyOutcome(feedback="The plan holds no change.", applied=False)
    with ws.holding():
        editor = ws.kits.editor(task=options.label)
        applier = Applier(Tree(root=settings.repo, index_path=settings.index_path, state_path=settings.state_path),
                          editor, Limits.of(settings), say=logger.info,
                          review=ws.display.review if settings.review else None)
        applied = applier.apply(ops, is_plan=True)
        diff, files = editor.diff(), editor.modified_files
        editor.finish()  # what applied is kept, and can be taken back with undo
    if applied.whole_batch_refused or applied.quit:
        why = applied.refused or ["the user quit at review"]
        return ApplyOutcome(feedback="Refused, nothing was written: " + "; ".join(why), applied=False)
    failed = applied.refused or any(not r.ok for r in applied.results)
    return ApplyOutcome(diff=diff, files=files, applied=bool(files),
                        feedback=edit_feedback(applied.results, applied.refused) if failed else "")
