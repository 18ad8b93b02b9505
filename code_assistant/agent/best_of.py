"""Best of N: N independent attempts at the task, each with its own conversation (temperature above 0, its own seed)
in its own scratch copy of the repository, run in parallel up to the cores with the normal fix iterations. The
winner (candidates.choose: passes everything, then the smallest change, then the change most attempts agree on) is
applied to the repository through the usual journal, guardrails and review, and tested there once more.

The reproduction test, when there is one, is written once in the repository before the attempts (so every attempt
is held to the same test) and is rolled back with everything else when no attempt wins.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from pathlib import Path

from code_assistant.agent.candidates import CandidateOutcome, ScratchCopy, changed_lines, choose
from code_assistant.agent.decide import Ending, Facts, Point, decide
from code_assistant.agent.kit import KitFor
from code_assistant.agent.loop import Run
from code_assistant.agent.requests import PlanRequest
from code_assistant.agent.state import Prepared, RunResult
from code_assistant.agent.stop import Stop
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.model.trajectory import StepKind

logger = logging.getLogger(__name__)

STOP_GRACE_S = 10.0  # after Ctrl-C, how long the attempts get to stop their tests before their copies are removed


class BestOf:
    """Runs `count` attempts for `parent` (the run on the user's repository) and applies the best one. Each attempt
    is a Run of its own, on the kit `kit_for` builds for its scratch copy (kit.Kits.attempt: its own model, editor and
    runner); it gets the run's budget and cancel flag, and its model joins the run's usage meter."""

    def __init__(self, parent: Run, kit_for: KitFor, count: int, workers: int | None = None) -> None:
        self.parent, self.kit_for, self.count = parent, kit_for, count
        self.workers = max(1, min(count, workers or os.cpu_count() or 1))
        self.outcomes: list[CandidateOutcome] = []
        self._runs: dict[int, Run] = {}
        self._lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._cancelled = threading.Event()

    # ----- the run, top to bottom -------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        result = self.parent.finish(lambda: self._run(task))
        result.candidates = self.outcomes
        return result

    def _run(self, task: str) -> Ending:
        parent = self.parent
        prepared = parent.prepare(task)
        if prepared.stopped is not None and (ending := decide(Facts(point=Point.PLANNED, answer=prepared.stopped))):
            return ending
        with self._index_lock:  # the task's vectors are made once, here; the attempts read them (embed budget 0)
            parent.parts.requests.warm_up(PlanRequest(index=prepared.index, task=task, baseline=prepared.baseline))
        parent.say(f"[Candidates: {self.count} attempts in scratch copies, {self.workers} at a time]")
        self.outcomes = self.attempts(task, prepared)
        for outcome in self.outcomes:
            parent.say(f"[Candidate {outcome.number}: {'passed' if outcome.passed else 'failed'} "
                       f"({outcome.stop_reason}), {outcome.iterations} iteration(s), {outcome.changed_lines} changed "
                       f"line(s), {outcome.tokens} tokens]")
        winner = choose(self.outcomes)
        if ending := decide(Facts(point=Point.CHOSEN, candidates=self.count,
                                  winner=winner.number if winner else None)):
            return ending
        assert winner is not None
        winner.chosen = True
        parent.say(f"[Chosen: candidate {winner.number} ({winner.changed_lines} changed lines)]")
        return self.apply(winner, prepared)

    def apply(self, winner: CandidateOutcome, prepared: Prepared) -> Ending:
        """The winner's files into the repository (journal, guardrails, review), then the tests there once more."""
        parent = self.parent
        parent.iteration = winner.iterations
        parent.parts.recorder.begin(StepKind.CANDIDATE, winner.iterations, candidate=winner.number)
        steps = max(1, parent.config.max_iterations - 1)  # the attempt's plan and fixes each passed their own limit
        applied = parent.parts.applier.apply(self.operations(winner), is_plan=True,
                                             limits=parent.config.limits.over(steps))
        facts = Facts(point=Point.CANDIDATE, applied=applied, winner=winner.number)
        if (ending := decide(Facts(point=Point.APPLIED, applied=applied))) or (ending := decide(facts)):
            return ending
        parent.say("[Testing the chosen candidate in the repository...]")
        result = parent.parts.verifier.test(prepared.reproduction, prepared.baseline)
        parent.parts.recorder.record(applied, result, winner.iterations)
        ending = decide(Facts(point=Point.CANDIDATE, applied=applied, result=result, winner=winner.number))
        assert ending is not None
        if ending.kept:
            parent.say("[Tests passed with the chosen candidate]")
        return ending

    def operations(self, winner: CandidateOutcome) -> list[EditOperation]:
        repo = self.parent.kit.tree.root
        ops = []
        for path, data in winner.files.items():
            why = f"candidate {winner.number}"
            if data == _read(repo / path):  # changed in the attempt, then back as it was: nothing to apply
                continue
            if data is None:
                ops.append(EditOperation(file_path=path, action=Action.DELETE, description=why))
            else:
                ops.append(EditOperation(file_path=path, action=Action.CREATE, content=data.decode("utf-8"),
                                         overwrite=(repo / path).exists(), description=why))
        return ops

    # ----- the attempts -----------------------------------------------------------------------------------
    def attempts(self, task: str, prepared: Prepared) -> list[CandidateOutcome]:
        """Every attempt, in parallel up to `workers`; Ctrl-C stops them all (their tests too) and removes every
        scratch copy before it goes on up."""
        tree = self.parent.kit.tree
        copies = {n: ScratchCopy(tree.root, exclude=tree.kept_out) for n in range(1, self.count + 1)}
        outcomes: dict[int, CandidateOutcome] = {}
        slots = threading.Semaphore(self.workers)

        began = time.perf_counter()

        def work(number: int) -> None:
            with slots:
                started = time.perf_counter()
                try:
                    outcome = (CandidateOutcome(number=number, passed=False, stop_reason=Stop.INTERRUPTED)
                               if self._cancelled.is_set() else self.attempt(number, copies[number], task, prepared))
                except BaseException as exc:  # noqa: BLE001 - one attempt's error is its outcome, not the run's
                    logger.warning("candidate %d stopped: %s", number, exc)
                    ending = decide(Facts(point=Point.ATTEMPT_FAILED, failure=exc))
                    assert ending is not None, "a failure always ends the attempt"
                    outcome = CandidateOutcome(number=number, passed=False, stop_reason=ending.reason,
                                               message=ending.message)
                outcome.started_s = round(started - began, 3)
                outcome.seconds = round(time.perf_counter() - started, 3)
                with self._lock:
                    outcomes[number] = outcome

        threads = [threading.Thread(target=work, args=(n,), name=f"candidate-{n}", daemon=True) for n in copies]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # a short wait, so that Ctrl-C reaches this thread at once
        except KeyboardInterrupt:
            self.cancel(threads)
            raise
        finally:
            for copy in copies.values():
                copy.remove()
        return [outcomes[n] for n in sorted(outcomes)]

    def cancel(self, threads: list[threading.Thread]) -> None:
        """Tell every attempt to stop, kill their running tests, and give them a moment to wind down."""
        self._cancelled.set()
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.kit.runner.cancel()
        deadline = time.monotonic() + STOP_GRACE_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def attempt(self, number: int, copy: ScratchCopy, task: str, prepared: Prepared) -> CandidateOutcome:
        with copy as scratch:
            run = self.candidate(number, scratch)
            if self._cancelled.is_set():
                raise KeyboardInterrupt
            index = dataclasses.replace(prepared.index, repo=scratch)
            reproduction = dataclasses.replace(prepared.reproduction) if prepared.reproduction else None
            attempt = Prepared(index=index, baseline=prepared.baseline, reproduction=reproduction)
            result = run.finish(lambda: run.attempt(task, attempt))
            passed = result.success and result.stop_reason == Stop.PASSED
            files = {path: _read(scratch / path) for path in result.files_modified} if passed else {}
            return CandidateOutcome(number=number, passed=passed, stop_reason=result.stop_reason,
                                    iterations=result.iterations, changed_lines=changed_lines(result.diff),
                                    tokens=run.kit.model.usage.total_tokens, cost_usd=result.cost_usd,
                                    diff=result.diff, files=files, message=result.message)

    def candidate(self, number: int, scratch: Path) -> Run:
        """Attempt `number`: a Run on the kit of its scratch copy (its own model, which joins the run's usage, its own
        runner and editor), with the run's budget, cancel flag and index lock; no reproduction test of its own (the
        run's, if any, is every attempt's)."""
        kit = self.kit_for(scratch, number)
        self.parent.parts.meter.add(kit.model)
        run = Run(kit, dataclasses.replace(self.parent.config, reproduce=False), run_usage=self.parent.parts.meter.total,
                  cancelled=self._cancelled, index_lock=self._index_lock)
        with self._lock:
            self._runs[number] = run
        return run


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None
