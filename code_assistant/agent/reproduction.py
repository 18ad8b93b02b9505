"""The reproduction test: before any fix, a test that captures the task and fails on the current code."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from code_assistant.agent.parts import Parts
from code_assistant.agent.requests import FollowUp, ReproduceRequest, Request
from code_assistant.agent.state import Answer, Reproduction
from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import Action
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.verify.runner import TestResult


def reproduce(parts: Parts, editor: FileEditor, *, ask: Callable[[Request], Answer], say: Callable[[str], None],
              index: RepoIndex, task: str, baseline: TestResult, first: bool = False) -> Reproduction | Answer:
    """Ask for a test that captures the task and run it alone: it must fail now. One that passes at once goes back
    to the model once; if it passes again it is removed and the run goes on without it. `ask`: the run's; `first`:
    the repository has no test yet (the model is told how its framework has the first written). An answer that ends
    the run instead (the budget spent, ...) is returned in its place."""
    say("[Reproducing: asking for a test that fails before any fix]")
    paths: list[str] = []
    answer = ask(ReproduceRequest(index=index, task=task, baseline=baseline, first=first))
    for attempt in range(2):
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
        if not alone.passed:
            say(f"[Reproduced: {', '.join(paths)} fails before any fix ({alone.summary()})]")
            return Reproduction(paths=paths, failed=alone)
        if attempt == 0:
            say("[The reproduction test passes on the current code; asking once more]")
            again = prompts.REPRODUCE_AGAIN.render(output=alone.output[-3000:] or alone.summary())
            answer = ask(FollowUp(text=again, prompt=prompts.REPRODUCE))
            answer = replace(answer, ops=[op for op in answer.ops if op.action != Action.READ])  # a follow-up's
            #                                                                            reads are not answered
    note = "the test passed before any fix" if paths else "no test was written"
    if paths:
        editor.rollback()  # nothing else is applied yet: this takes exactly the test back out
    say(f"[Not reproduced: {note}; going on without a reproduction test]")
    return Reproduction(paths=[], failed=None, note=note)
