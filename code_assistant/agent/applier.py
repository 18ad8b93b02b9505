"""Applying the model's edits: previewed in a scratch copy, checked against the guardrails, shown for review, then
written through the editor's journal; an edit that breaks a file's syntax goes back to the model before any test.

The user may change a file the run wrote while the model answers. An answer whose edits fit around their change is
applied on top of it (edit/beside.py); one that touches it is asked for once more, with the file as it is now, and
a second that touches it again ends the run (changed_outside), as does a file they deleted or replaced wholesale."""
from __future__ import annotations

import re
from collections.abc import Callable

from code_assistant.agent.asker import Asker
from code_assistant.agent.feedback import edit_feedback
from code_assistant.agent.requests import FollowUp
from code_assistant.agent.review import Decision, Review
from code_assistant.agent.state import Applied, RunState, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.edit.beside import Outside, file_text
from code_assistant.edit.editor import ChangedOutsideError, FileEditor
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.preview import Limits, Preview, preview_edits, refusals, sparing
from code_assistant.model import prompts
from code_assistant.model.fitting import clip_text
from code_assistant.settings import Settings


def limits_of(settings: Settings) -> Limits:
    return Limits(max_changed_lines=settings.max_changed_lines, max_plan_lines=settings.max_plan_lines,
                  max_files=settings.max_files, allow_test_edits=settings.allow_test_edits,
                  test_command=settings.test_command, allow_env_edits=settings.allow_env_edits)


class Applier:
    """`pre_write`: told the files about to be written, before anything is (the git workflow refuses some);
    `around`: an answer may be applied around a change the user made meanwhile (not when the run's change is to be
    committed: a commit holds the assistant's lines alone)."""

    def __init__(self, settings: Settings, editor: FileEditor, asker: Asker, state: RunState, *,
                 say: Callable[[str], None], review: Review | None = None,
                 pre_write: Callable[[list[str]], None] | None = None, around: bool = True) -> None:
        self.settings, self.editor, self.asker, self.state = settings, editor, asker, state
        self.say, self.review, self.pre_write, self.around = say, review, pre_write, around

    def preview(self, ops: list[EditOperation]) -> Preview:
        """The edits applied to a scratch copy: nothing in the repository changes."""
        return preview_edits(self.settings.repo, ops, [self.settings.index_path, self.settings.state_path])

    def apply(self, ops: list[EditOperation], *, is_plan: bool, limits: Limits | None = None,
              asked_again: bool = False) -> Applied:
        """Preview, check the guardrails (`limits`: the settings' unless given), let the user review, then write
        ("read" changes are not edits). `asked_again`: this answer was asked for because the last one did not fit a
        file the user changed meanwhile (if this one does not either, the run ends)."""
        ops = [op for op in ops if op.action != Action.READ]
        if not ops:
            return Applied()
        outside = self.editor.outside(ops)
        if outside.gone:
            raise ChangedOutsideError(list(outside.gone))
        if outside.overlaps:
            if asked_again:
                raise ChangedOutsideError(list(outside.overlaps))
            return self.apply(self.ask_again(outside), is_plan=is_plan, limits=limits, asked_again=True)
        if outside.around and not self.around:
            raise ChangedOutsideError(list(outside.around))
        if outside.around:
            self.say(f"[Changed meanwhile by someone else: {', '.join(outside.around)}; kept, the answer's edits "
                     f"go around that change]")
        preview = self.preview(ops)
        batch_reasons, weakened = refusals(preview, limits or limits_of(self.settings), is_plan=is_plan)
        self.state.refused_in_a_row = self.state.refused_in_a_row + 1 if batch_reasons else 0
        if batch_reasons:
            for reason in batch_reasons:
                self.say(f"[Refused: {reason}]")
            return Applied(refused=batch_reasons, whole_batch_refused=True)
        refused = [f"{path}: {why}" for path, why in weakened.items()]
        ops = sparing(self.settings.repo, ops, weakened)
        for reason in refused:
            self.say(f"[Refused: {reason}]")
        if self.pre_write:
            self.pre_write(preview.files)
        if self.review and preview.changes:
            verdict = self.review(preview.diff())
            if verdict.decision == Decision.QUIT:
                raise StopRun(Stop.REFUSED, "the user stopped the run at review")
            if verdict.decision != Decision.APPLY:
                reason = f"the user rejected this change at review{': ' + verdict.why if verdict.why else ''}"
                return Applied(refused=[reason], whole_batch_refused=True)
        if ops:
            self.say(f"[Editing: {', '.join(dict.fromkeys(op.file_path for op in ops))}]")
        results = self.editor.apply_edits(ops)
        for result in results:
            if not result.ok:
                self.say(f"[Edit failed: {result.message.splitlines()[0]}]")
            elif result.syntax_error:
                self.say(f"[Syntax error after edit: {result.file_path}: {result.syntax_error}]")
        return Applied(results=results, refused=refused, patch_lines=preview.changed_lines)

    def ask_again(self, outside: Outside) -> list[EditOperation]:
        """The answer does not fit a file the user changed meanwhile: the model is asked once more, shown the file
        as it is now; nothing of the answer was written."""
        self.say(f"[Changed meanwhile by someone else: {', '.join(outside.overlaps)}; the answer's edits touch that "
                 f"change: asking again with the file as it is now]")
        budget = self.asker.conversation.requests.room() // (2 * len(outside.overlaps))
        feedback = "".join(_changed_meanwhile(rel, why, outside.now[rel], budget)
                           for rel, why in outside.overlaps.items())
        return self.asker.ask(FollowUp(prompts.UNAPPLIED.render(feedback=feedback), prompts.UNAPPLIED))

    def repair_syntax(self, applied: Applied) -> Applied:
        """An edit that broke a file's syntax goes straight back to the model, before the tests run (once)."""
        broken = [r for r in applied.results if r.ok and r.syntax_error]
        if not broken:
            return applied
        self.say(f"[Syntax error in {', '.join(r.file_path for r in broken)}: asking for a fix before testing]")
        request = FollowUp(prompts.SYNTAX.render(feedback=edit_feedback(applied.results, applied.refused)),
                           prompts.SYNTAX)
        repaired = self.apply(self.asker.ask(request), is_plan=False)
        return Applied(results=[*applied.results, *repaired.results], refused=[*applied.refused, *repaired.refused],
                       patch_lines=applied.patch_lines + repaired.patch_lines,
                       whole_batch_refused=repaired.whole_batch_refused)


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
