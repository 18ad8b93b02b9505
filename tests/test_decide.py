"""The stop rules of a run, one pure function (agent/decide.py), read as a table: what the run knows at a point of
the loop, and the ending it calls for (None: the run goes on)."""
from __future__ import annotations

import pytest

from code_assistant.agent.decide import BROKE_GREEN, NO_CHANGE, Ending, Facts, Point, decide
from code_assistant.agent.state import Answer, Applied, Reproduction
from code_assistant.agent.stop import Stop
from code_assistant.edit.editor import ChangedOutsideError
from code_assistant.edit.edits import EditOperation, EditResult
from code_assistant.edit.preview import Preview
from code_assistant.model.chat import ModelError
from code_assistant.verify.outputs import NotRun, NotRunCause, TestFailure
from code_assistant.verify.runner import TestResult, TestsNotRunError

EDIT = EditOperation(file_path="calc.py", search="a - b", replace="a + b")
UNAPPLIED = EditResult.failed("calc.py", "modify", "calc.py: line 2 of its SEARCH text is in no line of the file")
WROTE = Applied(results=[EditResult(ok=True, file_path="calc.py", action="edit", message="")], guardrails=(False,))
FAILED_EDIT = Applied(results=[EditResult(ok=False, file_path="calc.py", action="edit", message="search not found\nmore")])
NOTHING_WRITTEN = "nothing of the answer was written: the change touches 50 lines, over the limit of 10"
REFUSED = Applied(refused=["the change touches 50 lines, over the limit of 10"], whole_batch_refused=True,
                  guardrails=(True,))


def ran(passed: bool, *failing: str, passes: frozenset[str] = frozenset()) -> TestResult:
    return TestResult(command=["pytest"], exit_code=0 if passed else 1, passed=passed, timed_out=False, output="",
                      duration_s=0.1, failures=[TestFailure(test_id=f) for f in failing], passed_count=3,
                      failed_count=len(failing), passes=passes)


RED, GREEN = ran(False, "t.py::test_add"), ran(True, passes=frozenset({"t.py::test_add"}))


def at_test(**facts: object) -> Facts:
    base: dict[str, object] = {"point": Point.TESTED, "applied": WROTE, "baseline": RED, "iteration": 1,
                               "max_iterations": 3, "changed": True}
    return Facts(**{**base, **facts})  # type: ignore[arg-type]


CASES: list[tuple[str, Facts, Ending | None]] = [
    # the answer itself says the run is over: the budget, a cancel, unparsable twice
    ("the budget spent", Facts(point=Point.ANSWERED, answer=Answer(stop=Stop.COST_CAP, why="60 tokens used")),
     Ending(reason=Stop.COST_CAP, message="60 tokens used")),
    ("cancelled", Facts(point=Point.PLANNED, answer=Answer(stop=Stop.INTERRUPTED, why="interrupted"), baseline=RED),
     Ending(reason=Stop.INTERRUPTED, message="interrupted")),
    ("unparsable twice", Facts(point=Point.ANSWERED, answer=Answer(stop=Stop.MODEL_ERROR, why="could not be parsed twice")),
     Ending(reason=Stop.MODEL_ERROR, message="could not be parsed twice")),
    ("a syntax repair's answer spent the budget", Facts(point=Point.APPLIED, applied=Applied(
        stopped=Answer(stop=Stop.COST_CAP, why="$0.01 spent"))), Ending(reason=Stop.COST_CAP, message="$0.01 spent")),
    # the plan
    ("a plan of edits", Facts(point=Point.PLANNED, answer=Answer(ops=[EDIT]), baseline=RED), None),
    ("no plan on a failing baseline: tested once (flaky?)", Facts(point=Point.PLANNED, answer=Answer(), baseline=RED),
     None),
    ("a plan stopped as it came, its edit not in the file: as if it came whole and failed to apply",
     Facts(point=Point.PLANNED, answer=Answer(unapplied=UNAPPLIED), baseline=GREEN), None),
    ("no plan on a green baseline", Facts(point=Point.PLANNED, answer=Answer(), baseline=GREEN),
     Ending(reason=Stop.NO_CHANGES, message=NO_CHANGE)),
    ("a dry run", Facts(point=Point.PLANNED, answer=Answer(ops=[EDIT]), baseline=RED,
                        preview=Preview(results=WROTE.results)),
     Ending(reason=Stop.DRY_RUN, message="dry run: nothing was written", kept=True,
            preview=Preview(results=WROTE.results))),
    ("a dry run whose edit would fail", Facts(point=Point.PLANNED, answer=Answer(ops=[EDIT]), baseline=RED,
                                              preview=Preview(results=FAILED_EDIT.results)),
     Ending(reason=Stop.DRY_RUN, message="dry run: nothing was written", preview=Preview(results=FAILED_EDIT.results))),
    # applied
    ("applied", Facts(point=Point.APPLIED, applied=WROTE), None),
    ("stopped at review", Facts(point=Point.APPLIED, applied=Applied(guardrails=(False,), quit=True)),
     Ending(reason=Stop.REFUSED, message="the user stopped the run at review")),
    # tested
    ("green, a failing test seen passing", at_test(result=GREEN),
     Ending(reason=Stop.PASSED, kept=True, verified=True, verification="t.py::test_add failed before, passes now")),
    ("green without a change on a red baseline", at_test(result=GREEN, changed=False),
     Ending(reason=Stop.NO_CHANGES, message="the tests pass now without any change: they may be flaky", kept=True,
            verification="no change was made")),
    ("green without a change on a green baseline", at_test(result=GREEN, changed=False, baseline=GREEN),
     Ending(reason=Stop.NO_CHANGES, message=NO_CHANGE)),
    ("green, nothing failed before, --no-reproduce", at_test(result=GREEN, baseline=GREEN, reproduce=False),
     Ending(reason=Stop.PASSED, kept=True, verification="--no-reproduce, and the tests passed before the change too")),
    ("green, the reproduction test seen passing", at_test(
        result=GREEN, baseline=GREEN, reproduction=Reproduction(
            paths=["tests/test_repro.py"], failed=ran(False, "tests/test_repro.py::test_x"), passes_after=True,
            after=ran(True, passes=frozenset({"tests/test_repro.py::test_x"})))),
     Ending(reason=Stop.PASSED, kept=True, verified=True, verification="tests/test_repro.py failed before, passes now")),
    ("red, iterations left", at_test(result=RED), None),
    ("red on the last iteration", at_test(result=RED, iteration=3), Ending(reason=Stop.MAX_ITERATIONS,
                                                                          message="3 passed, 1 failed")),
    ("red the same way after a fix that wrote", at_test(result=RED, same_failures=True),
     Ending(reason=Stop.NO_PROGRESS, message="the same tests failed the same way after the last fix")),
    ("red the same way, but nothing was written", at_test(result=RED, same_failures=True, applied=FAILED_EDIT), None),
    ("sampling, red where it was red: the next sample", at_test(result=RED, sampling=True, same_failures=True), None),
    ("sampling, a green suite broken and no failing test to aim at", at_test(result=RED, baseline=GREEN, sampling=True),
     Ending(reason=Stop.NO_PROGRESS, message=BROKE_GREEN)),
    ("sampling, a green suite broken, the reproduction test to aim at", at_test(
        result=RED, baseline=GREEN, sampling=True, reproduction=Reproduction(
            paths=["tests/test_repro.py"], failed=ran(False, "tests/test_repro.py::test_x"))), None),
    ("fixing, a green suite broken: the failures go back", at_test(result=RED, baseline=GREEN), None),
    ("untested, iterations left", at_test(untested="none of the answer's edits could be applied"), None),
    ("untested on the last iteration", at_test(untested="calc.py does not parse", iteration=3),
     Ending(reason=Stop.MAX_ITERATIONS, message="calc.py does not parse")),
    ("the second refused answer in a row", at_test(untested="none of the answer's edits could be applied",
                                                  applied=REFUSED, refused_in_a_row=2),
     Ending(reason=Stop.REFUSED, message="two answers in a row were refused: the change touches 50 lines, over the "
                                         "limit of 10")),
    ("one refused answer", at_test(untested="x", applied=REFUSED, refused_in_a_row=1), None),
    ("a refused answer on the last iteration is refused, not out of iterations",
     at_test(untested=NOTHING_WRITTEN, applied=REFUSED, iteration=3), Ending(reason=Stop.REFUSED,
                                                                            message=NOTHING_WRITTEN)),
    ("edits that failed on the last iteration", at_test(untested="none of the answer's edits could be applied",
                                                        applied=FAILED_EDIT, iteration=3),
     Ending(reason=Stop.MAX_ITERATIONS, message="none of the answer's edits could be applied")),
    # answered
    ("a fix", Facts(point=Point.ANSWERED, answer=Answer(ops=[EDIT], said=("{}",))), None),
    ("a sample stopped as it came: its edit fails, its iteration is taken",
     Facts(point=Point.ANSWERED, answer=Answer(unapplied=UNAPPLIED, said=("calc.py\n",)), sampling=True), None),
    ("no further change", Facts(point=Point.ANSWERED, answer=Answer(), changed=True),
     Ending(reason=Stop.NO_CHANGES, message="the model proposed no further changes")),
    ("no change at all", Facts(point=Point.ANSWERED, answer=Answer()), Ending(reason=Stop.NO_CHANGES, message=NO_CHANGE)),
    ("an earlier answer again", Facts(point=Point.ANSWERED, answer=Answer(ops=[EDIT]), repeated=True),
     Ending(reason=Stop.NO_PROGRESS, message="the model repeated an earlier answer")),
    # best of N
    ("no candidate passed", Facts(point=Point.CHOSEN, candidates=3),
     Ending(reason=Stop.NO_CANDIDATE, message="none of the 3 candidates passed")),
    ("a winner", Facts(point=Point.CHOSEN, candidates=3, winner=2), None),
    ("the winner applied", Facts(point=Point.CANDIDATE, applied=WROTE, winner=2), None),
    ("the winner does not apply", Facts(point=Point.CANDIDATE, applied=FAILED_EDIT, winner=2),
     Ending(reason=Stop.REFUSED, message="candidate 2 could not be applied: search not found")),
    ("the winner red in the repository", Facts(point=Point.CANDIDATE, applied=WROTE, result=RED, winner=2),
     Ending(reason=Stop.MAX_ITERATIONS,
            message="candidate 2 passed in its copy but not in the repository: 3 passed, 1 failed")),
    ("the winner green in the repository", Facts(point=Point.CANDIDATE, applied=WROTE, result=GREEN, winner=2),
     Ending(reason=Stop.PASSED, kept=True)),
]


@pytest.mark.parametrize("facts, ending", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_stop_rules(facts: Facts, ending: Ending | None) -> None:
    assert decide(facts) == ending


MODEL_GONE = ModelError("the model server could not be reached")
NOT_RUN = TestsNotRunError(NotRun(cause=NotRunCause.NOT_FOUND, line="pytest: not found", fix="install pytest"))
OUTSIDE = ChangedOutsideError(["calc.py"])
BROKEN = RuntimeError("a bug of ours")
# where the model is asked (asker.py gathers these facts, and makes the Ending the Answer that stops the run), and
# the failures from outside (raised where they happen; the loop asks which ending each is, best of N for an attempt)
ASKED: list[tuple[str, Facts, Ending | None]] = [
    ("cancelled before a call", Facts(point=Point.ASKING, cancelled=True),
     Ending(reason=Stop.INTERRUPTED, message="interrupted")),
    ("not cancelled", Facts(point=Point.ASKING), None),
    ("tokens over --max-tokens", Facts(point=Point.REPLIED, tokens=61, max_tokens=60),
     Ending(reason=Stop.COST_CAP, message="61 tokens used, over --max-tokens 60")),
    ("tokens at --max-tokens", Facts(point=Point.REPLIED, tokens=60, max_tokens=60), None),
    ("cost over --max-cost", Facts(point=Point.REPLIED, tokens=10, cost=0.0125, max_cost=0.01),
     Ending(reason=Stop.COST_CAP, message="$0.0125 spent, over --max-cost $0.01")),
    ("no price known: no cost cap", Facts(point=Point.REPLIED, tokens=10, max_cost=0.01), None),
    ("an unreadable answer, the first: sent back", Facts(point=Point.REPLIED, unreadable="no JSON", unreadable_times=1),
     None),
    ("an unreadable answer, the second", Facts(point=Point.REPLIED, unreadable="no JSON", unreadable_times=2),
     Ending(reason=Stop.MODEL_ERROR, message="the model's answer could not be parsed twice: no JSON")),
    ("the budget before the answer is read", Facts(point=Point.REPLIED, tokens=61, max_tokens=60, unreadable="x",
                                                   unreadable_times=2),
     Ending(reason=Stop.COST_CAP, message="61 tokens used, over --max-tokens 60")),
    ("Ctrl-C", Facts(point=Point.FAILED, failure=KeyboardInterrupt()),
     Ending(reason=Stop.INTERRUPTED, message="interrupted")),
    ("a file changed outside twice", Facts(point=Point.FAILED, failure=OUTSIDE),
     Ending(reason=Stop.CHANGED_OUTSIDE, message=str(OUTSIDE))),
    ("the model server gone: raised again for the door", Facts(point=Point.FAILED, failure=MODEL_GONE),
     Ending(reason=Stop.MODEL_ERROR, message=str(MODEL_GONE), raised=MODEL_GONE)),
    ("the tests cannot run", Facts(point=Point.FAILED, failure=NOT_RUN),
     Ending(reason=Stop.TESTS_NOT_RUN, message=str(NOT_RUN), raised=NOT_RUN)),
    ("anything else: an error", Facts(point=Point.FAILED, failure=BROKEN),
     Ending(reason=Stop.ERROR, message="a bug of ours", raised=BROKEN)),
    ("best of N: Ctrl-C in an attempt", Facts(point=Point.ATTEMPT_FAILED, failure=KeyboardInterrupt()),
     Ending(reason=Stop.INTERRUPTED, message="interrupted")),
    ("best of N: anything else ends the attempt as the model's error",
     Facts(point=Point.ATTEMPT_FAILED, failure=OUTSIDE), Ending(reason=Stop.MODEL_ERROR, message=str(OUTSIDE))),
]


@pytest.mark.parametrize("facts, ending", [case[1:] for case in ASKED], ids=[case[0] for case in ASKED])
def test_the_stop_rules_of_asking_and_of_failures(facts: Facts, ending: Ending | None) -> None:
    assert decide(facts) == ending
