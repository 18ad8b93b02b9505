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
from collections.abc import Callable
from pathlib import Path

from code_assistant.agent.candidates import CandidateOutcome, ScratchCopy, changed_lines, choose
from code_assistant.agent.loop import Agent
from code_assistant.agent.state import Ending, Prepared, RunResult, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.agent.waiting import Prefixed
from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.preview import Limits
from code_assistant.model.chat import ChatModel, Usage
from code_assistant.model.trajectory import Step, StepKind
from code_assistant.verify.runner import TestRunner

logger = logging.getLogger(__name__)

CANDIDATE_TEMPERATURE = 0.7  # enough to make the attempts differ; the seeds make each one repeatable
STOP_GRACE_S = 10.0  # after Ctrl-C, how long the attempts get to stop their tests before their copies are removed

ModelFactory = Callable[[int], ChatModel]  # candidate number -> that attempt's own model (own seed, own usage)


class BestOf:
    """Runs `count` attempts for `parent` (the agent on the user's repository) and applies the best one. Each attempt
    is an Agent of its own in its own scratch copy; it gets the run's budget and cancel flag, and its model joins the
    run's usage meter."""

    def __init__(self, parent: Agent, make_model: ModelFactory, count: int, workers: int | None = None) -> None:
        self.parent, self.make_model, self.count = parent, make_model, count
        self.workers = max(1, min(count, workers or os.cpu_count() or 1))
        self.outcomes: list[CandidateOutcome] = []
        self._agents: dict[int, Agent] = {}
        self._lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._cancelled = threading.Event()

    # ----- the run, top to bottom -------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        result = self.parent.guarded(lambda: self._run(task))
        result.candidates = self.outcomes
        return result

    def _run(self, task: str) -> Ending:
        parent = self.parent.parts
        prepared = self.parent.prepare(task)
        with self._index_lock:  # the task's vectors are made once, here; the attempts read them (embed budget 0)
            parent.requests.warm_up(prepared.index, task, prepared.baseline)
        parent.say(f"[Candidates: {self.count} attempts in scratch copies, {self.workers} at a time]")
        self.outcomes = self.attempts(task, prepared)
        for outcome in self.outcomes:
            parent.say(f"[Candidate {outcome.number}: {'passed' if outcome.passed else 'failed'} "
                       f"({outcome.stop_reason}), {outcome.iterations} iteration(s), {outcome.changed_lines} changed "
                       f"line(s), {outcome.tokens} tokens]")
        winner = choose(self.outcomes)
        if winner is None:
            raise StopRun(Stop.NO_CANDIDATE, f"none of the {self.count} candidates passed")
        winner.chosen = True
        parent.say(f"[Chosen: candidate {winner.number} ({winner.changed_lines} changed lines)]")
        return self.apply(winner, prepared)

    def apply(self, winner: CandidateOutcome, prepared: Prepared) -> Ending:
        """The winner's files into the repository (journal, guardrails, review), then the tests there once more."""
        parent = self.parent.parts
        parent.state.iteration = winner.iterations
        parent.state.step = Step(kind=StepKind.CANDIDATE, step=winner.iterations, model=parent.model.name,
                                 candidate=winner.number)
        s = parent.settings
        steps = max(1, s.max_iterations - 1)  # the attempt's plan and fixes each passed their own limit
        limits = Limits(max_changed_lines=s.max_changed_lines,
                        max_plan_lines=s.max_plan_lines + steps * s.max_changed_lines,
                        max_files=s.max_files * (steps + 1), allow_test_edits=s.allow_test_edits,
                        test_command=s.test_command, allow_env_edits=s.allow_env_edits)
        applied = parent.applier.apply(self.operations(winner), is_plan=True, limits=limits)
        if applied.refused or not applied.wrote or any(not r.ok for r in applied.results):
            problems = applied.refused + [r.message.splitlines()[0] for r in applied.results if not r.ok]
            raise StopRun(Stop.REFUSED, f"candidate {winner.number} could not be applied: " + "; ".join(problems))
        parent.say("[Testing the chosen candidate in the repository...]")
        result = parent.verifier.test(prepared.reproduction, prepared.baseline)
        parent.recorder.record(applied, result)
        if not result.passed:
            raise StopRun(Stop.MAX_ITERATIONS, f"candidate {winner.number} passed in its copy but not in the "
                                               f"repository: {result.summary()}")
        parent.say("[Tests passed with the chosen candidate]")
        return Ending(Stop.PASSED, kept=True)

    def operations(self, winner: CandidateOutcome) -> list[EditOperation]:
        repo = self.parent.settings.repo
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
        settings = self.parent.settings
        copies = {n: ScratchCopy(settings.repo, exclude=[settings.index_path, settings.state_path])
                  for n in range(1, self.count + 1)}
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
                    reason = Stop.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else Stop.MODEL_ERROR
                    outcome = CandidateOutcome(number=number, passed=False, stop_reason=reason,
                                               message=str(exc) or reason)
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
            agents = list(self._agents.values())
        for agent in agents:
            agent.runner.cancel()
        deadline = time.monotonic() + STOP_GRACE_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def attempt(self, number: int, copy: ScratchCopy, task: str, prepared: Prepared) -> CandidateOutcome:
        with copy as scratch:
            assert copy.root is not None
            agent, model = self.candidate(number, scratch, copy.root / "state")
            if self._cancelled.is_set():
                raise KeyboardInterrupt
            index = dataclasses.replace(prepared.index, repo=scratch)
            reproduction = dataclasses.replace(prepared.reproduction) if prepared.reproduction else None
            result = agent.guarded(lambda: agent.attempt(task, Prepared(index, prepared.baseline, reproduction)))
            passed = result.success and result.stop_reason == Stop.PASSED
            files = {path: _read(scratch / path) for path in result.files_modified} if passed else {}
            return CandidateOutcome(number=number, passed=passed, stop_reason=result.stop_reason,
                                    iterations=result.iterations, changed_lines=changed_lines(result.diff),
                                    tokens=model.usage.total_tokens, cost_usd=result.cost_usd, diff=result.diff,
                                    files=files, message=result.message)

    def candidate(self, number: int, scratch: Path, state_path: Path) -> tuple[Agent, ChatModel]:
        """Attempt `number`: an Agent built from the same parts as the run's, on the scratch copy, with its own model
        (which joins the run's usage), runner and editor, the run's budget, cancel flag and index lock."""
        parent = self.parent
        settings = dataclasses.replace(parent.settings, repo=scratch, state_path=state_path, candidates=1,
                                       reproduce=False, embed_budget=0, review=False)
        running = parent.runner.running_file
        runner = TestRunner(settings.test_command, cwd=scratch, timeout=settings.test_timeout,
                            running_file=running.with_name(f"{running.name}-{number}") if running else None,
                            sandbox=parent.runner.sandbox)  # the same confinement, around the scratch copy
        editor = FileEditor(scratch, state_dir=settings.repo_state_dir, forbidden=[settings.index_path], history=False)
        model = self.make_model(number)
        parent.parts.meter.add(model)
        agent = Agent(settings, model, parent.indexer, runner, editor, candidate=number,
                      say=lambda line: parent.parts.say(f"[Candidate {number}] {line}"),
                      status=Prefixed(parent.parts.status, f"Candidate {number}: "),
                      trajectory=parent.parts.recorder.trajectory, budget=parent.parts.meter.total,
                      cancelled=self._cancelled, index_lock=self._index_lock, tools=parent.tools_for)
        with self._lock:
            self._agents[number] = agent
        return agent, model


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def candidate_model(model: ChatModel, number: int) -> ChatModel:
    """The model an attempt asks: the same server and window, temperature above 0, its own seed and usage."""
    return dataclasses.replace(model, temperature=CANDIDATE_TEMPERATURE, seed=number,  # type: ignore[type-var]
                               usage=Usage(), window=dataclasses.replace(model.window))
