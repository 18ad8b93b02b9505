"""What an operation ends with, in words: the one place an outcome becomes lines (`parts`), shown to a person as text
or (--json) as one JSON object on stdout, and returned as text to another agent (the MCP server: `text`). The same
outcome says the same words through every door."""
from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Diff:
    """A diff among an outcome's lines (coloured on a terminal)."""

    text: str


Part = str | Diff  # a line, or a diff


def show(outcome: o.Outcome, *, as_json: bool, command: str | None = None) -> None:
    """The outcome as text, or as one JSON object (`command`: named in it, as a session's commands are)."""
    if as_json:
        write(json.dumps({**({"command": command} if command else {}), **outcome.as_json()}) + "\n")
        return
    emit(parts(outcome))


def text(outcome: o.Outcome) -> str:
    """The outcome in the words a person is shown, as one text: what the MCP server answers another agent."""
    return "\n".join(part.text.rstrip("\n") if isinstance(part, Diff) else part for part in parts(outcome)
                     if not isinstance(part, Diff) or part.text.strip())


def emit(shown: list[Part]) -> None:
    for part in shown:
        if isinstance(part, Diff):
            show_diff(part.text)
        else:
            say(part)


def parts(outcome: o.Outcome) -> list[Part]:
    """What every door says of an outcome, line by line."""
    match outcome:
        case o.RunOutcome():
            return summary_parts(outcome.result)
        case o.AskOutcome():
            return [*([] if outcome.shown else [outcome.answer]),
                    *([f"[The answer was cut off at {outcome.limit}: it is incomplete]"] if outcome.cut_off else []),
                    *([f"[Not in the repository: {', '.join(outcome.not_in_repository)}]"]
                      if outcome.not_in_repository else [])]
        case o.ContextOutcome():
            return context_lines(outcome)
        case o.IndexOutcome():
            rate = outcome.chunks_embedded / outcome.seconds if outcome.seconds else 0.0
            return [(f"[{'Interrupted' if outcome.interrupted else 'Embedded'}: {outcome.chunks_embedded} chunks "
                     f"embedded ({outcome.chunks_reused} reused) in {outcome.seconds:.1f} s, {rate:.1f} chunks/s; "
                     f"{outcome.files_embedded} of {outcome.files} files complete"
                     f"{'; run it again to continue' if outcome.interrupted else ''}]")]
        case o.RecoverOutcome():
            return ["[Recover: nothing to restore]"] if outcome.outcomes is None else []
        case o.UndoOutcome():
            undone = outcome.undone
            what = f'"{undone.task}"' if undone.task else f"run {undone.run}"
            if undone.reverted:
                return [(f"[Undo: {what}: its commit {undone.reverted[:12]} reverted by a new commit "
                         f"{undone.revert_commit}]")]
            return [f"[Undo: took back {what} ({', '.join(f.path for f in undone.outcomes)})]",
                    *taken_back_lines(undone.outcomes, "taken back", "its")]
        case o.TestOutcome():
            from code_assistant.agent.feedback import failure_text

            failures = failure_text(outcome.result)
            return [f"[Tests: {outcome.result.summary()}]", *([failures] if failures else [])]
        case o.DiffOutcome():
            return [Diff(outcome.diff)] if outcome.diff else [f"[No changes of {outcome.scope} are in effect]"]
        case o.PinsOutcome():
            line = (f"[Pinned: {', '.join(outcome.added)}]" if outcome.added
                    else f"[Pinned: {', '.join(outcome.pinned) or 'nothing'}]")
            return [line + (f" [Refused: {'; '.join(outcome.refused)}]" if outcome.refused else "")]
        case o.ModelOutcome():
            window = f", context window {outcome.window}" if outcome.window else ""
            return [f"[Model: {shown_name(outcome.name)}{window}]"]
        case o.ToolOutcome():
            return [outcome.text]
        case o.ApplyOutcome():
            return [*([Diff(outcome.diff)] if outcome.diff else []),
                    f"[Applied: {', '.join(outcome.files)}]" if outcome.applied else "[Nothing was applied]",
                    *([outcome.feedback.rstrip()] if outcome.feedback else [])]
        case o.TokensOutcome():
            usage = outcome.usage
            cost = f", about ${outcome.cost_usd:.4f}" if outcome.cost_usd else ""
            return [(f"[Model usage so far: {usage.calls} call(s), {usage.prompt_tokens} prompt{cached(usage)} + "
                     f"{usage.completion_tokens} completion tokens{reasoned(usage)}{cost}]")]
        case o.McpConfigOutcome():
            return [f"[MCP: {outcome.name} {outcome.change} {outcome.config}]"]
        case o.McpListOutcome():
            lines = [f"{s.name}  ({s.origin}, {s.transport})  {s.command}  {_started_words(s)}" for s in outcome.servers]
            lines += [f"{bad.name}  ({bad.origin})  cannot be used: {bad.why}" for bad in outcome.unusable]
            return lines or [(f"[MCP: no servers; add one with: code-assistant mcp add NAME -- COMMAND ARGS (config: "
                              f"{outcome.config})]")]
    raise TypeError(f"no words for {type(outcome).__name__}")


def _started_words(server: o.ListedServer) -> str:
    if server.started is None:
        return f"starts: {server.starts}"
    if not server.started:
        return f"did not start: {server.error}"
    return f"started: {len(server.tools or [])} tool(s): {', '.join(server.tools or []) or 'none'}"


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


def context_lines(outcome: o.ContextOutcome) -> list[Part]:
    built = outcome.context
    lines = [built.render() or "(no files indexed)", "", f"[Context: {len(built.files)} relevant files selected]"]
    lines += [f"  {f.path}  ({f.mode}, {f.tokens} tokens)" for f in built.files]
    more = [*([f"a map of {len(built.map)} more files (a line each)"] if built.map else []),
            *([f"{len(built.listed)} more paths"] if built.listed else [])]
    if more:
        lines.append(f"  and {' and '.join(more)} (the model may ask to read one)")
    lines.append(f"Total: {built.tokens} tokens of {built.budget}" + (f" ({outcome.room})" if outcome.room else ""))
    return [*lines, *(f"  {line}" for line in built.budget_log)] if outcome.verbose else lines


def candidates_table(outcomes: list[CandidateOutcome]) -> list[Part]:
    head = f"  {'#':>2}  {'result':<28} {'iterations':>10} {'changed lines':>13} {'tokens':>8} {'cost':>9}"
    lines = ["Candidates:", head]
    for c in outcomes:
        outcome = "passed" if c.passed else f"failed ({c.stop_reason})"
        cost = f"${c.cost_usd:.4f}" if c.cost_usd is not None else "-"
        mark = "  <- applied" if c.chosen else ""
        lines.append(f"  {c.number:>2}  {outcome:<28} {c.iterations:>10} {c.changed_lines:>13} {c.tokens:>8} "
                     f"{cost:>9}{mark}")
    return lines


def taken_back_lines(outcomes: list[FileOutcome], what: str = "rolled back", whose: str = "the run's") -> list[Part]:
    """What a rollback, recovery or undo did, true to the byte: 'exactly as it was' only when every file is; `whose`:
    the change taken back (a run's, or one task's of several: the others' stay)."""
    from code_assistant.edit.takeback import exactly_as_before

    if not outcomes:
        return ["Nothing was changed."]
    if exactly_as_before(outcomes):
        return [f"All of {whose} changes were {what}: every file it touched is byte for byte as it was before it."]
    return [f"{whose[0].upper()}{whose[1:]} changes were {what}; edits made meanwhile by someone else were kept:",
            *(f"  - {outcome.describe()}" for outcome in outcomes)]


def reasoned(usage: Usage) -> str:
    """The part of a usage line that says how many completion tokens were reasoning ("" for none)."""
    return f" ({usage.reasoning_tokens} of them reasoning)" if usage.reasoning_tokens else ""


def cached(usage: Usage) -> str:
    """The part of a usage line that says how many prompt tokens a cache served ("" for none)."""
    return f" ({usage.cached_tokens} of them cached)" if usage.cached_tokens else ""


def result_line(result: RunResult) -> str:
    """A success says whether a test shows the task done (verified) or only that the tests pass."""
    if result.stop_reason == Stop.NO_CHANGES:
        return f"Result: SUCCESS, NO CHANGE ({result.message or result.verification})"
    if result.verified:
        return f"Result: SUCCESS (verified: {result.verification}; iteration {result.iterations})"
    return (f"Result: SUCCESS, NOT VERIFIED (the tests pass; no test shows the task is done: {result.verification}; "
            f"iteration {result.iterations})")


def closest(result: RunResult) -> str:
    """A rolled-back run's tested iteration closest to green, where the rollback went, and how to have that
    iteration back ("" when none was tested)."""
    if result.best_iteration is None:
        return ""
    back = "rolled back to the start" if result.rolled_back else "nothing was written"
    again = f" (git apply {result.best_patch} brings it back)" if result.best_patch and result.rolled_back else ""
    return f" — best: iteration {result.best_iteration}, {result.best_tests}; {back}{again}"


def summary(result: RunResult) -> None:
    emit(summary_parts(result))


def summary_parts(result: RunResult) -> list[Part]:
    bar = "=" * 60
    lines: list[Part] = [bar, Diff(result.diff)] if result.diff else []
    lines.append(bar)
    if result.stop_reason == Stop.DRY_RUN:
        lines.append("Result: DRY RUN — nothing was written" + ("" if result.success else "; some edits would fail"))
    elif result.success:
        lines.append(result_line(result))
        lines.append("Modified files:" if result.files_modified else "No files were modified; the tests already pass.")
        lines += [f"  - {path}" for path in result.files_modified]
    else:
        detail = result.message if result.message and result.message != result.stop_reason else ""
        lines.append(f"Result: FAILED ({result.stop_reason}{': ' + detail if detail else ''}){closest(result)}")
        lines += taken_back_lines(result.taken_back)
        lines += describe_leftovers(result.left_behind) if result.left_behind else []
    if result.reproduction:
        lines.append(f"Reproduction test: {result.reproduction}")
    if result.candidates:
        lines += candidates_table(result.candidates)
    usage = result.usage
    if usage.calls:
        cost = f", about ${result.cost_usd:.4f}" if result.cost_usd is not None else ""
        counted = " (partly counted here: the server sent no usage)" if usage.estimated else ""
        lines.append(f"Model usage: {usage.calls} call(s), {usage.prompt_tokens} prompt{cached(usage)} + "
                     f"{usage.completion_tokens} completion tokens{reasoned(usage)}{cost}{counted}")
    if result.log_path:
        lines.append(f"Run log: {result.log_path}")
    return [*lines, bar]
