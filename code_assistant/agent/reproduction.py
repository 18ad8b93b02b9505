"""The reproduction test: before any fix, a test that captures the task and fails on the current code — runs and
fails, not one that cannot be collected or imported."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from code_assistant.agent.feedback import shown_output
from code_assistant.agent.parts import Parts
from code_assistant.agent.requests import FollowUp, ReproduceRequest, Request
from code_assistant.agent.state import Answer, Reproduction
from code_assistant.agent.stop import Stop
from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import Action
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.verify.outputs_common import IMPORT_ERROR_RE, FailureStatus
from code_assistant.verify.runner import TestResult

# Python's words for a module that was found (its file named in parentheses) but defines no such name: a test of a
# function the task asks for fails so before the fix, which is the bug's own error, not a test that cannot run
MISSING_NAME_RE = re.compile(r"cannot import name '[^']+' from '[^']+' \(")
UNREADABLE = "the model's answer could not be read"  # the note of a step whose answers could not be read, twice


def reproduce(parts: Parts, editor: FileEditor, *, ask: Callable[[Request], Answer], say: Callable[[str], None],
              index: RepoIndex, task: str, baseline: TestResult, first: bool = False) -> Reproduction | Answer:
    """Ask for a test that captures the task and run it alone: it must run and fail now (did_not_run: a test that
    cannot be collected or imported reproduces nothing). One that passes at once, or does not run, goes back to the
    model once, told which; if it does so again it is removed and the run goes on without it, as it does when the
    model's answer cannot be read. `ask`: the run's; `first`: the repository has no test yet (the model is told how
    its framework has the first written). An answer that ends the run instead (the budget spent, ...) is returned in
    its place."""
    say("[Reproducing: asking for a test that fails before any fix]")
    paths: list[str] = []
    note = ""
    answer = ask(ReproduceRequest(index=index, task=task, baseline=baseline, first=first))
    for attempt in range(2):
        if answer.stop == Stop.MODEL_ERROR:  # its answer could not be read, twice: no reason to end the run
            note = UNREADABLE
            break
        if answer.stop is not None:
            return answer
        tests = [op for op in answer.ops if is_test_file(op.file_path)]
        for op in answer.ops:
            if op not in tests:
                say(f"[Refused: {op.file_path} is not a test file; the reproduction step writes tests only]")
        applied = parts.applier.apply(tests, is_plan=True)
        if applied.stopped is not None:
            return applied.stopped
        paths = list(dict.fromkeys([*paths, *(r.file_path for r in applied.results if r.ok)]))
        if not paths:
            break
        alone = parts.verifier.run_alone(paths)
        parts.recorder.record(applied, alone, 0)
        output = shown_output(alone)[-3000:] or alone.summary()
        if alone.passed:
            note, again = "the test passed before any fix", prompts.REPRODUCE_AGAIN.render(output=output)
            if attempt == 0:
                say("[The reproduction test passes on the current code; asking once more]")
        elif (why := did_not_run(alone)) is not None:
            note, again = f"the test did not run: {why}", prompts.REPRODUCE_UNRUN.render(why=why, output=output)
            say(f"[Not a reproduction: {', '.join(paths)} did not run ({why})" +
                ("; asking once more]" if attempt == 0 else "]"))
        else:
            say(f"[Reproduced: {', '.join(paths)} fails before any fix ({alone.summary()})]")
            return Reproduction(paths=paths, failed=alone)
        if attempt == 0:
            answer = ask(FollowUp(text=again, prompt=prompts.REPRODUCE))
            answer = replace(answer, ops=[op for op in answer.ops if op.action != Action.READ])  # a follow-up's
            #                                                                            reads are not answered
    note = note or "no test was written"
    if paths:
        editor.rollback()  # nothing else is applied yet: this takes exactly the test back out
    say(f"[Not reproduced: {note}; going on without a reproduction test]")
    return Reproduction(paths=[], failed=None, note=note)


def did_not_run(result: TestResult) -> str | None:
    """Why a failing run of a reproduction test is no reproduction, in words for the model and the user, or None when
    it ran and failed. It ran when a test failed on its own check, or errored on anything but a module that cannot
    be imported (a setup error, a Go test that does not build or a Python import of a name its module lacks because
    the code lacks what the task asks for, are the bug's own errors); it did not when it could not be collected or
    imported, or no test ran at all."""
    if result.timed_out or any(f.status == FailureStatus.FAILED for f in result.failures):
        return None
    for failure in result.failures:
        if IMPORT_ERROR_RE.search(failure.message) or "SyntaxError" in failure.message:
            cause = next((line.strip() for line in reversed(failure.message.splitlines())
                          if IMPORT_ERROR_RE.search(line) or "SyntaxError" in line), failure.message.strip())
            if MISSING_NAME_RE.search(cause):  # the module was found and lacks the name the task asks for
                continue
            return f"{failure.test_id} could not be imported: {cause[:200]}"
    if not result.failures and result.ran == 0:
        return f"no test ran ({result.summary()})"
    return None
