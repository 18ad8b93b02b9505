"""When a run ends, and why: one pure function over what the run knows at each point of the loop (Facts), which
returns the Ending or None to go on. Every stop rule of the loop, of its model calls and of best of N is here: the
loop and the asker gather the facts, and the loop makes the Ending into the run's outcome in one place (Run.end).
Failures from outside — the model server gone, the tests unable to run, a file changed by someone else, Ctrl-C — are
raised where they happen; which ending each is, is decided here too (Point.FAILED)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from code_assistant.agent.state import Answer, Applied, Reproduction
from code_assistant.agent.stop import Stop
from code_assistant.edit.editor import ChangedOutsideError
from code_assistant.model.chat import ModelError
from code_assistant.verify.passes import seen_passing
from code_assistant.verify.runner import TestsNotRunError

if TYPE_CHECKING:
    from code_assistant.edit.preview import Preview
    from code_assistant.verify.runner import TestResult

NO_CHANGE = "no change: the model proposed none"
# Sampling, a change that breaks a green suite ends the run when no failing test says what the task wants (no failing
# baseline, no reproduction test): a later sample can only be a change that breaks nothing, which is no sign of the
# task done. Qwen2.5-Coder-1.5B on the five hidden-test cases: no sample after such a failure resolved one in four
# runs, and they spent 250-300 s each on them (BENCHMARKS.md, issue 58).
BROKE_GREEN = ("the change broke tests that passed before, and no failing test says what the task wants: another "
               "sample could only show a change that breaks nothing")
UNREADABLE_TIMES = 2  # answers to one request that could not be read before the run ends (the first is sent back)


@dataclass(frozen=True)
class Ending:
    """How a run ended, before its outcome is made of it (Run.end, the one place): the change kept, or taken back
    out; `preview`: a dry run's, nothing having been written."""

    reason: Stop
    message: str = ""
    kept: bool = False
    verified: bool = False  # a test that failed before the change passes now
    verification: str = ""  # which test shows it, or why none does
    preview: Preview | None = None
    raised: BaseException | None = None  # a failure from outside, raised again once the run is rolled back


class Point(StrEnum):
    """Where in the loop the facts were gathered."""

    PLANNED = "planned"  # the plan's answer is in (a dry run's preview made)
    APPLIED = "applied"  # an answer's edits were applied (or refused, or stopped at review)
    TESTED = "tested"  # an iteration's change was tested, or found not worth a test
    ANSWERED = "answered"  # the next answer is in
    CHOSEN = "chosen"  # best of N: every attempt is done, and the winner chosen if one passed
    CANDIDATE = "candidate"  # best of N: the winner applied in the repository and tested there
    ASKING = "asking"  # a model call is about to be made
    REPLIED = "replied"  # the model replied (an answer, or a round of tool calls): what it used, and what it said
    FAILED = "failed"  # a failure from outside stopped the run (raised where it happened)
    ATTEMPT_FAILED = "attempt_failed"  # best of N: a failure stopped one attempt (the others go on)


@dataclass(frozen=True)
class Facts:
    """What the run knows at a point. `changed`: the run's change is in the files; `untested`: why this iteration's
    change was not tested (None: it was, `result`); `same_failures`: the tests failed as at the last test run;
    `repeated`: the answer is one the model gave before; `reproduce`: --reproduce/--no-reproduce (None: neither);
    `cancelled`: best of N's Ctrl-C reached this attempt; `tokens` and `cost`: the model usage that counts against
    --max-tokens and --max-cost (the run's, every attempt's with best of N; cost None: no price known);
    `unreadable`: why the model's last answer could not be read as a plan ("": it could), `unreadable_times`: how
    many of its answers to this request could not; `failure`: what stopped the run, raised from outside."""

    point: Point
    answer: Answer | None = None
    applied: Applied | None = None
    baseline: TestResult | None = None
    result: TestResult | None = None
    untested: str | None = None
    iteration: int = 0
    max_iterations: int = 3  # the settings' default (the loop passes its own at every test)
    changed: bool = False
    same_failures: bool = False
    refused_in_a_row: int = 0
    repeated: bool = False
    reproduction: Reproduction | None = None
    reproduce: bool | None = None
    preview: Preview | None = None
    candidates: int = 0
    winner: int | None = None
    cancelled: bool = False
    tokens: int = 0
    cost: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    unreadable: str = ""
    unreadable_times: int = 0
    failure: BaseException | None = None
    sampling: bool = False  # a failed iteration is followed by a sample of the plan (FixBy.SAMPLES), not a fix


def decide(f: Facts) -> Ending | None:
    """The Ending the facts call for, or None: the run goes on."""
    stopped = f.answer if f.answer is not None and f.answer.stop is not None else \
        f.applied.stopped if f.applied is not None else None
    if stopped is not None and stopped.stop is not None:
        return Ending(reason=stopped.stop, message=stopped.why)
    match f.point:
        case Point.PLANNED:
            return _planned(f)
        case Point.APPLIED:
            quit_ = f.applied is not None and f.applied.quit
            return Ending(reason=Stop.REFUSED, message="the user stopped the run at review") if quit_ else None
        case Point.TESTED:
            return _tested(f)
        case Point.ANSWERED:
            assert f.answer is not None
            if not f.answer.edits:
                return Ending(reason=Stop.NO_CHANGES, message="the samples of the plan held no change" if f.sampling
                              else "the model proposed no further changes" if f.changed else NO_CHANGE)
            if f.repeated:
                return Ending(reason=Stop.NO_PROGRESS, message="the samples of the plan repeated earlier answers"
                              if f.sampling else "the model repeated an earlier answer")
            return None
        case Point.CHOSEN:
            return Ending(reason=Stop.NO_CANDIDATE, message=f"none of the {f.candidates} candidates passed") \
                if f.winner is None else None
        case Point.CANDIDATE:
            return _candidate(f)
        case Point.ASKING:
            return Ending(reason=Stop.INTERRUPTED, message="interrupted") if f.cancelled else None
        case Point.REPLIED:
            return _replied(f)
        case Point.FAILED:
            return failed(f.failure)
        case Point.ATTEMPT_FAILED:
            reason = Stop.INTERRUPTED if isinstance(f.failure, KeyboardInterrupt) else Stop.MODEL_ERROR
            return Ending(reason=reason, message=str(f.failure or "") or reason)


def _planned(f: Facts) -> Ending | None:
    if f.preview is not None:
        failed = any(not r.ok for r in f.preview.results)
        return Ending(reason=Stop.DRY_RUN, message="dry run: nothing was written", kept=not failed, preview=f.preview)
    assert f.answer is not None and f.baseline is not None
    if not f.answer.edits and f.baseline.passed:
        return Ending(reason=Stop.NO_CHANGES, message=NO_CHANGE)
    return None


def _tested(f: Facts) -> Ending | None:
    last = f.iteration >= f.max_iterations
    if f.untested is not None:
        if last:  # an answer the guardrails (or the person) refused whole is said so, whatever the count
            whole = f.applied is not None and bool(f.applied.refused) and not f.applied.wrote
            return Ending(reason=Stop.REFUSED if whole else Stop.MAX_ITERATIONS, message=f.untested)
    else:
        assert f.result is not None and f.baseline is not None
        if f.result.passed:
            return green(f)
        if last:
            return Ending(reason=Stop.MAX_ITERATIONS, message=f.result.summary())
        aimed = f.reproduction is not None and f.reproduction.reproduced
        if f.sampling and f.baseline.passed and not aimed:
            return Ending(reason=Stop.NO_PROGRESS, message=BROKE_GREEN)
        if f.same_failures and f.applied is not None and f.applied.wrote and not f.sampling:  # a sample starts over
            return Ending(reason=Stop.NO_PROGRESS, message="the same tests failed the same way after the last fix")
    if f.refused_in_a_row >= 2:
        refused = f.applied.refused if f.applied is not None else []
        return Ending(reason=Stop.REFUSED, message="two answers in a row were refused: " + "; ".join(refused))
    return None


def green(f: Facts) -> Ending:
    """The tests pass: a success when the run changed something (verified or not), or when a failing baseline passes
    now without a change (said so: the tests may be flaky); no change on a green baseline is no success."""
    assert f.baseline is not None and f.result is not None
    if not f.changed:
        if f.baseline.passed:
            return Ending(reason=Stop.NO_CHANGES, message=NO_CHANGE)
        return Ending(reason=Stop.NO_CHANGES, message="the tests pass now without any change: they may be flaky",
                      kept=True, verification="no change was made")
    verified, why = verification(f.baseline, f.result, f.reproduction, f.reproduce)
    return Ending(reason=Stop.PASSED, kept=True, verified=verified, verification=why)


def _replied(f: Facts) -> Ending | None:
    """The budget (--max-tokens, --max-cost) spent, counted after every reply, tool rounds too; an answer that could
    not be read, sent back with the reason until UNREADABLE_TIMES."""
    if f.max_tokens and f.tokens > f.max_tokens:
        return Ending(reason=Stop.COST_CAP, message=f"{f.tokens} tokens used, over --max-tokens {f.max_tokens}")
    if f.max_cost is not None and f.cost is not None and f.cost > f.max_cost:
        return Ending(reason=Stop.COST_CAP,
                      message=f"${f.cost:.4f} spent, over --max-cost ${f.max_cost:.6f}".rstrip("0").rstrip("."))
    if f.unreadable and f.unreadable_times >= UNREADABLE_TIMES:
        return Ending(reason=Stop.MODEL_ERROR, message=f"the model's answer could not be parsed twice: {f.unreadable}")
    return None


def failed(failure: BaseException | None) -> Ending:
    """How a failure from outside ends a run, and whether it is raised again once the run is rolled back, for the door
    to report (Ctrl-C and a file changed outside are said by the Ending alone)."""
    match failure:
        case KeyboardInterrupt():
            return Ending(reason=Stop.INTERRUPTED, message="interrupted")
        case ChangedOutsideError():
            return Ending(reason=Stop.CHANGED_OUTSIDE, message=str(failure))
        case ModelError():
            return Ending(reason=Stop.MODEL_ERROR, message=str(failure), raised=failure)
        case TestsNotRunError():
            return Ending(reason=Stop.TESTS_NOT_RUN, message=str(failure), raised=failure)
        case _:
            return Ending(reason=Stop.ERROR, message=str(failure), raised=failure)


def _candidate(f: Facts) -> Ending | None:
    """The winner applied in the repository (then `result`: tested there, None: not yet)."""
    assert f.applied is not None
    applied, number = f.applied, f.winner
    if applied.refused or not applied.wrote or any(not r.ok for r in applied.results):
        problems = applied.refused + [r.message.splitlines()[0] for r in applied.results if not r.ok]
        return Ending(reason=Stop.REFUSED, message=f"candidate {number} could not be applied: " + "; ".join(problems))
    if f.result is None:
        return None
    if not f.result.passed:
        return Ending(reason=Stop.MAX_ITERATIONS,
                      message=f"candidate {number} passed in its copy but not in the repository: {f.result.summary()}")
    return Ending(reason=Stop.PASSED, kept=True)


def verification(baseline: TestResult, result: TestResult, reproduction: Reproduction | None,
                 asked: bool | None) -> tuple[bool, str]:
    """Whether a test shows the task done — one that failed before the change is seen passing now, by its id in the
    runner's own report (the reproduction test's, or the baseline's failing tests) — and, in words, which one, or why
    there is none. A green exit alone proves nothing: the command may no longer run the test (a rewritten Makefile
    recipe); nor does a printed PASSED line (any code under test can print one)."""
    unseen: list[str] = []
    if reproduction is not None and reproduction.reproduced and reproduction.passes_after:
        assert reproduction.failed is not None
        ids = [i for i in reproduction.failed.failed_ids if i.startswith(tuple(reproduction.paths))] \
            or reproduction.failed.failed_ids
        after = reproduction.after.passes if reproduction.after is not None else frozenset()
        unseen = [i for i in ids if not seen_passing(i, after)]
        if ids and not unseen:
            return True, f"{', '.join(reproduction.paths)} failed before, passes now"
        unseen = unseen or [f"the tests of {', '.join(reproduction.paths)}"]
    if baseline.failed_ids:
        names = baseline.failed_ids
        unseen += [i for i in names if not seen_passing(i, result.passes)]
        if not unseen:
            return True, f"{_some(names)} failed before, pass{'es' if len(names) == 1 else ''} now"
    if unseen and (not_proved := _unproved(result, reproduction)):
        return False, not_proved
    if unseen:
        why = "" if result.passes else " (it names no passing test at all)"
        return False, f"the output does not show {_some(unseen)} passing now{why}"
    if not baseline.passed and result.passed:
        return False, "the test command failed before and passes now, but its output names no test that failed"
    if reproduction is not None and not reproduction.reproduced:
        return False, f"the reproduction test was not kept ({reproduction.note or 'none was written'})"
    if asked is False:
        return False, "--no-reproduce, and the tests passed before the change too"
    return False, "the tests passed before the change too"


def _unproved(result: TestResult, reproduction: Reproduction | None) -> str:
    """Why the last runs' passes are not proved by the runner's report ("" when they are): printed lines are no proof
    (verify/reports.py)."""
    after = reproduction.after if reproduction is not None and reproduction.after is not None else None
    return result.unverified or (after.unverified if after is not None else "")


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
