"""What an operation ends with, shown: as text for a person, or (--json) as one JSON object on stdout. The same
outcome says the same words through every door."""
from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from code_assistant.agent.stop import Stop
from code_assistant.console import end_stream, say, show_diff, write
from code_assistant.edit.leftovers import describe as describe_leftovers
from code_assistant.errors import EXIT_FAILED, EXIT_INTERRUPTED, AssistantError, GaveUpWaiting, attached_log
from code_assistant.model.names import shown as shown_name
from code_assistant.operations import outcomes as o

if TYPE_CHECKING:
    from code_assistant.agent.candidates import CandidateOutcome
    from code_assistant.agent.state import RunResult
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.model.records import Usage


def show(outcome: o.Outcome, *, as_json: bool, command: str | None = None) -> None:
    """The outcome as text, or as one JSON object (`command`: named in it, as a session's commands are)."""
    if as_json:
        write(json.dumps({**({"command": command} if command else {}), **outcome.as_json()}) + "\n")
        return
    match outcome:
        case o.RunOutcome():
            summary(outcome.result)
        case o.AskOutcome():
            if not outcome.shown:
                say(outcome.answer)
            if outcome.cut_off:
                say(f"[The answer was cut off at {outcome.limit}: it is incomplete]")
            if outcome.not_in_repository:
                say(f"[Not in the repository: {', '.join(outcome.not_in_repository)}]")
        case o.ContextOutcome():
            context(outcome)
        case o.IndexOutcome():
            rate = outcome.chunks_embedded / outcome.seconds if outcome.seconds else 0.0
            say(f"[{'Interrupted' if outcome.interrupted else 'Embedded'}: {outcome.chunks_embedded} chunks embedded "
                f"({outcome.chunks_reused} reused) in {outcome.seconds:.1f} s, {rate:.1f} chunks/s; "
                f"{outcome.files_embedded} of {outcome.files} files complete"
                f"{'; run it again to continue' if outcome.interrupted else ''}]")
        case o.RecoverOutcome():
            if outcome.outcomes is None:
                say("[Recover: nothing to restore]")
        case o.UndoOutcome():
            undone = outcome.undone
            what = f'"{undone.task}"' if undone.task else f"run {undone.run}"
            if undone.reverted:
                say(f"[Undo: {what}: its commit {undone.reverted[:12]} reverted by a new commit "
                    f"{undone.revert_commit}]")
            else:
                say(f"[Undo: took back {what} ({', '.join(f.path for f in undone.outcomes)})]")
                taken_back(undone.outcomes, "taken back", "its")
        case o.TestOutcome():
            say(f"[Tests: {outcome.result.summary()}]")
        case o.DiffOutcome():
            if outcome.diff:
                show_diff(outcome.diff)
            else:
                say(f"[No changes of {outcome.scope} are in effect]")
        case o.PinsOutcome():
            line = (f"[Pinned: {', '.join(outcome.added)}]" if outcome.added
                    else f"[Pinned: {', '.join(outcome.pinned) or 'nothing'}]")
            say(line + (f" [Refused: {'; '.join(outcome.refused)}]" if outcome.refused else ""))
        case o.ModelOutcome():
            window = f", context window {outcome.window}" if outcome.window else ""
            say(f"[Model: {shown_name(outcome.name)}{window}]")
        case o.ToolOutcome():
            say(outcome.text)
        case o.ApplyOutcome():
            if outcome.diff:
                show_diff(outcome.diff)
            say(f"[Applied: {', '.join(outcome.files)}]" if outcome.applied else "[Nothing was applied]")
            if outcome.feedback:
                say(outcome.feedback.rstrip())
        case o.TokensOutcome():
            usage = outcome.usage
            cost = f", about ${outcome.cost_usd:.4f}" if outcome.cost_usd else ""
            say(f"[Model usage so far: {usage.calls} call(s), {usage.prompt_tokens} prompt + "
                f"{usage.completion_tokens} completion tokens{reasoned(usage)}{cost}]")


def leaving(outcome: o.DiffOutcome, repo: Path) -> None:
    """A session's last words: each of its tasks still in effect, and how to take them back."""
    if not outcome.tasks:
        say(f"[Leaving: no changes of {outcome.scope} are in effect]")
        return
    say(f"[Leaving: {len(outcome.tasks)} task(s) of {outcome.scope} still in effect, newest first:]")
    for task in outcome.tasks:
        say(f'  "{task.task}": {", ".join(task.files)}')
    prog, where = Path(sys.argv[0]).name, shlex.quote(str(repo))
    say(f"[To take them back, newest first: /undo in `{prog} chat --repo {where} --resume`, or `{prog} undo --repo "
        f"{where}` once per task]")


def error(exc: BaseException, *, as_json: bool, verbose: bool = False, command: str | None = None) -> int:
    """The one place an error becomes a line on stderr (and, with --json, one object on stdout); its exit status. An
    answer cut short by the error has its line ended first."""
    end_stream()
    if isinstance(exc, KeyboardInterrupt):
        message, code, kind = "interrupted", EXIT_INTERRUPTED, "interrupted"
        print("error: interrupted", file=sys.stderr)
    elif isinstance(exc, AssistantError):
        message, code, kind = str(exc), exc.exit_code, _snake(type(exc).__name__)
        print(f"[{message}]" if isinstance(exc, GaveUpWaiting) else f"error: {message}", file=sys.stderr)
    else:
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        code, kind = EXIT_FAILED, "internal_error"
        print(f"error: {message}" + ("" if verbose else " (run with -v for details)"), file=sys.stderr)
    if as_json:
        fields: dict[str, Any] = {"stop_reason": Stop.INTERRUPTED} if kind == "interrupted" else {"error": kind}
        write(json.dumps({**({"command": command} if command else {}), "success": False, **fields,
                          "message": message, "exit_code": code, "log": attached_log(exc)}) + "\n")
    return code


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def context(outcome: o.ContextOutcome) -> None:
    built = outcome.context
    say(built.render() or "(no files indexed)")  # what the model would be shown
    say("")
    say(f"[Context: {len(built.files)} relevant files selected]")
    for f in built.files:
        say(f"  {f.path}  ({f.mode}, {f.tokens} tokens)")
    more = [*([f"a map of {len(built.map)} more files (a line each)"] if built.map else []),
            *([f"{len(built.listed)} more paths"] if built.listed else [])]
    if more:
        say(f"  and {' and '.join(more)} (the model may ask to read one)")
    say(f"Total: {built.tokens} tokens of {built.budget}")
    if outcome.verbose:
        for line in built.budget_log:
            say(f"  {line}")


def candidates_table(outcomes: list[CandidateOutcome]) -> None:
    say("Candidates:")
    say(f"  {'#':>2}  {'result':<28} {'iterations':>10} {'changed lines':>13} {'tokens':>8} {'cost':>9}")
    for c in outcomes:
        outcome = "passed" if c.passed else f"failed ({c.stop_reason})"
        cost = f"${c.cost_usd:.4f}" if c.cost_usd is not None else "-"
        mark = "  <- applied" if c.chosen else ""
        say(f"  {c.number:>2}  {outcome:<28} {c.iterations:>10} {c.changed_lines:>13} {c.tokens:>8} {cost:>9}{mark}")


def taken_back(outcomes: list[FileOutcome], what: str = "rolled back", whose: str = "the run's") -> None:
    """What a rollback, recovery or undo did, true to the byte: 'exactly as it was' only when every file is; `whose`:
    the change taken back (a run's, or one task's of several: the others' stay)."""
    from code_assistant.edit.takeback import exactly_as_before

    if not outcomes:
        say("Nothing was changed.")
    elif exactly_as_before(outcomes):
        say(f"All of {whose} changes were {what}: every file it touched is byte for byte as it was before it.")
    else:
        say(f"{whose[0].upper()}{whose[1:]} changes were {what}; edits made meanwhile by someone else were kept:")
        for outcome in outcomes:
            say(f"  - {outcome.describe()}")


def reasoned(usage: Usage) -> str:
    """The part of a usage line that says how many completion tokens were reasoning ("" for none)."""
    return f" ({usage.reasoning_tokens} of them reasoning)" if usage.reasoning_tokens else ""


def result_line(result: RunResult) -> str:
    """A success says whether a test shows the task done (verified) or only that the tests pass."""
    if result.stop_reason == Stop.NO_CHANGES:
        return f"Result: SUCCESS, NO CHANGE ({result.message or result.verification})"
    if result.verified:
        return f"Result: SUCCESS (verified: {result.verification}; iteration {result.iterations})"
    return (f"Result: SUCCESS, NOT VERIFIED (the tests pass; no test shows the task is done: {result.verification}; "
            f"iteration {result.iterations})")


def summary(result: RunResult) -> None:
    bar = "=" * 60
    if result.diff:
        say(bar)
        show_diff(result.diff)
    say(bar)
    if result.stop_reason == Stop.DRY_RUN:
        say("Result: DRY RUN — nothing was written" + ("" if result.success else "; some edits would fail"))
    elif result.success:
        say(result_line(result))
        say("Modified files:" if result.files_modified else "No files were modified; the tests already pass.")
        for path in result.files_modified:
            say(f"  - {path}")
    else:
        detail = result.message if result.message and result.message != result.stop_reason else ""
        say(f"Result: FAILED ({result.stop_reason}{': ' + detail if detail else ''})")
        taken_back(result.taken_back)
        for line in describe_leftovers(result.left_behind) if result.left_behind else []:
            say(line)
    if result.reproduction:
        say(f"Reproduction test: {result.reproduction}")
    if result.candidates:
        candidates_table(result.candidates)
    usage = result.usage
    if usage.calls:
        cost = f", about ${result.cost_usd:.4f}" if result.cost_usd is not None else ""
        counted = " (partly counted here: the server sent no usage)" if usage.estimated else ""
        say(f"Model usage: {usage.calls} call(s), {usage.prompt_tokens} prompt + "
            f"{usage.completion_tokens} completion tokens{reasoned(usage)}{cost}{counted}")
    if result.log_path:
        say(f"Run log: {result.log_path}")
    say(bar)
