"""The reproduction test: before any fix, a test that captures the task and fails on the current code."""
from __future__ import annotations

from code_assistant.agent.parts import Parts
from code_assistant.agent.requests import FollowUp, ReproduceRequest
from code_assistant.agent.state import Reproduction
from code_assistant.edit.edits import Action
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.verify.runner import TestResult


def reproduce(parts: Parts, index: RepoIndex, task: str, baseline: TestResult) -> Reproduction:
    """Ask for a test that captures the task and run it alone: it must fail now. One that passes at once goes back
    to the model once; if it passes again it is removed and the run goes on without it."""
    say, asker, applier = parts.say, parts.asker, parts.applier
    say("[Reproducing: asking for a test that fails before any fix]")
    paths: list[str] = []
    ops = asker.ask_reading(ReproduceRequest(index, task, baseline))
    for attempt in range(2):
        tests = [op for op in ops if is_test_file(op.file_path)]
        for op in ops:
            if op not in tests:
                say(f"[Refused: {op.file_path} is not a test file; the reproduction step writes tests only]")
        applied = applier.apply(tests, is_plan=True)
        paths = list(dict.fromkeys([*paths, *(r.file_path for r in applied.results if r.ok)]))
        if not paths:
            break
        alone = parts.verifier.run_alone(paths)
        parts.recorder.record(applied, alone)
        if not alone.passed:
            say(f"[Reproduced: {', '.join(paths)} fails before any fix ({alone.summary()})]")
            return Reproduction(paths=paths, failed=alone)
        if attempt == 0:
            say("[The reproduction test passes on the current code; asking once more]")
            again = prompts.REPRODUCE_AGAIN.render(output=alone.output[-3000:] or alone.summary())
            ops = [op for op in asker.ask(FollowUp(again, prompts.REPRODUCE))
                   if op.action != Action.READ]  # a follow-up's reads are not answered
    note = "the test passed before any fix" if paths else "no test was written"
    if paths:
        parts.editor.rollback()  # nothing else is applied yet: this takes exactly the test back out
    say(f"[Not reproduced: {note}; going on without a reproduction test]")
    return Reproduction(paths=[], failed=None, note=note)
