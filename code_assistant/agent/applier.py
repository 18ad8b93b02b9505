"""Applying a plan's edits — the one way every door applies one: a run's model's answers (the loop, a reproduction
test, best of N's winner) and another agent's or a person's plan (`apply`, from the command line and over MCP).
Previewed in a scratch copy, checked against the guardrails, told to the git guard, shown for review, then written
through the editor's journal; in a run, an edit that breaks a file's syntax goes back to the model before any test.

The user may change a file the run wrote while the model answers. An answer whose edits fit around their change is
applied on top of it (edit/beside.py); one that touches it is asked for once more, with the file as it is now, and
a second that touches it again ends the run (changed_outside), as does a file they deleted or replaced wholesale."""
from __future__ import annotations

import re
from collections.abc import Callable

from code_assistant.agent.feedback import edit_feedback
from code_assistant.agent.kit import Tree
from code_assistant.agent.requests import FollowUp, Request
from code_assistant.agent.state import Answer, Applied
from code_assistant.edit.beside import Outside, file_text
from code_assistant.edit.editor import ChangedOutsideError, FileEditor
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.preview import Limits, Preview, preview_edits, refusals, sparing
from code_assistant.model import prompts
from code_assistant.model.fitting import clip_text
from code_assistant.review import Decision, Review


class Applier:
    """`ask`: the run's way to ask the model (an answer asked again, a syntax repair; None: no model to ask, as for
    `apply`'s plan: an answer that no longer fits a file changed outside ends as that change); `room`: the tokens a
    request may hold now; `review`: --review's (None: no review); `guard`: told the files about to be written, before
    anything is (the git workflow refuses some); `around`: an answer may be applied around a change the user made
    meanwhile (not when the run's change is to be committed: a commit holds the assistant's lines alone)."""

    def __init__(self, tree: Tree, editor: FileEditor, limits: Limits, *, say: Callable[[str], None],
                 ask: Callable[[Request], Answer] | None = None, room: Callable[[], int] = lambda: 0,
                 review: Review | None = None,
                 guard: Callable[[list[str]], None] | None = None, around: bool = True) -> None:
        self.tree, self.editor, self.limits, self.ask, self.room = tree, editor, limits, ask, room
        self.say, self.review, self.guard, self.around = say, review, guard, around

    def preview(self, ops: list[EditOperation]) -> Preview:
        """The edits applied to a scratch copy: nothing in the repository changes."""
        return preview_edits(self.tree.root, ops, self.tree.kept_out)

    def apply(self, ops: list[EditOperation], *, is_plan: bool, limits: Limits | None = None,
              asked_again: bool = False) -> Applied:
        """Preview, check the guardrails (`limits`: the run's unless given), let the user review, then write
        ("read" changes are not edits). `asked_again`: this answer was asked for because the last one did not fit a
        file the user changed meanwhile (if this one does not either, the run ends)."""
        ops = [op for op in ops if op.action != Action.READ]
        if not ops:
            return Applied()
        outside = self.editor.outside(ops)
        if outside.gone:
            raise ChangedOutsideError(list(outside.gone))
        if outside.overlaps:
            if asked_again or self.ask is None:
                raise ChangedOutsideError(list(outside.overlaps))
            answer = self.ask_again(outside, self.ask)
            if answer.stop is not None:
                return Applied(stopped=answer)
            return self.apply(answer.ops, is_plan=is_plan, limits=limits, asked_again=True)
        if outside.around and not self.around:
            raise ChangedOutsideError(list(outside.around))
        if outside.around:
            self.say(f"[Changed meanwhile by someone else: {', '.join(outside.around)}; kept, the answer's edits "
                     f"go around that change]")
        preview = self.preview(ops)
        batch_reasons, weakened = refusals(preview, limits or self.limits, is_plan=is_plan)
        if batch_reasons:
            for reason in batch_reasons:
                self.say(f"[Refused: {reason}]")
            return Applied(refused=batch_reasons, whole_batch_refused=True, guardrails=(True,))
        refused = [f"{path}: {why}" for path, why in weakened.items()]
        ops = sparing(self.tree.root, ops, weakened)
        for reason in refused:
            self.say(f"[Refused: {reason}]")
        if self.guard:
            self.guard(preview.files)
        if self.review and preview.changes:
            verdict = self.review(preview.diff())
            if verdict.decision == Decision.QUIT:
                return Applied(guardrails=(False,), quit=True)
            if verdict.decision != Decision.APPLY:
                reason = f"the user rejected this change at review{': ' + verdict.why if verdict.why else ''}"
                return Applied(refused=[reason], whole_batch_refused=True, guardrails=(False,))
        if ops:
            self.say(f"[Editing: {', '.join(dict.fromkeys(op.file_path for op in ops))}]")
        results = self.editor.apply_edits(ops)
        for result in results:
            if not result.ok:
                self.say(f"[Edit failed: {result.message.splitlines()[0]}]")
            elif result.syntax_error:
                self.say(f"[Syntax error after edit: {result.file_path}: {result.syntax_error}]")
        return Applied(results=results, refused=refused, patch_lines=preview.changed_lines, guardrails=(False,))

    def ask_again(self, outside: Outside, ask: Callable[[Request], Answer]) -> Answer:
        """The answer does not fit a file the user changed meanwhile: the model is asked once more (`ask`), shown
        the file as it is now; nothing of the answer was written."""
        self.say(f"[Changed meanwhile by someone else: {', '.join(outside.overlaps)}; the answer's edits touch that "
                 f"change: asking again with the file as it is now]")
        budget = self.room() // (2 * len(outside.overlaps))
        feedback = "".join(_changed_meanwhile(rel, why, outside.now[rel], budget)
                           for rel, why in outside.overlaps.items())
        return ask(FollowUp(text=prompts.UNAPPLIED.render(feedback=feedback), prompt=prompts.UNAPPLIED,
                            resample=False))

    def repair_syntax(self, applied: Applied) -> Applied:
        """An edit that broke a file's syntax goes straight back to the model, before the tests run (once); with no
        model to ask, the broken file stays said in the edit's result."""
        broken = [r for r in applied.results if r.ok and r.syntax_error]
        if not broken or self.ask is None:
            return applied
        self.say(f"[Syntax error in {', '.join(r.file_path for r in broken)}: asking for a fix before testing]")
        request = FollowUp(text=prompts.SYNTAX.render(feedback=edit_feedback(applied.results, applied.refused)),
                           prompt=prompts.SYNTAX)
        answer = self.ask(request)
        repaired = Applied(stopped=answer) if answer.stop is not None else self.apply(answer.ops, is_plan=False)
        return Applied(results=[*applied.results, *repaired.results], refused=[*applied.refused, *repaired.refused],
                       patch_lines=applied.patch_lines + repaired.patch_lines,
                       whole_batch_refused=repaired.whole_batch_refused,
                       guardrails=applied.guardrails + repaired.guardrails,
                       quit=repaired.quit, stopped=repaired.stopped)


def _changed_meanwhile(rel: str, why: str, now: bytes | None, budget: int) -> str:
    """For the model: the user changed a file while it answered, which edit no longer fits, and the file as it is
    now (within `budget` tokens)."""
    text = clip_text(file_text(now)[0], budget, "file") if now is not None else ""
    if text and not text.endswith("\n"):
        text += "\n"
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return (f"# {rel} was changed by the user while you were answering\n"
            f"Their change stays, and nothing of your answer was applied ({why}). {rel} as it is now:\n"
            f"{fence}\n{text}{fence}\n\n")
