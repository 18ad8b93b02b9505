"""What `eval` shows: while cases run, on a terminal a progress bar with an ETA and where each running case is
(fetching, the agent's iteration, judging), elsewhere a line per phase and per finished case; then the summary.
`eval compare` shows the cases whose verdict changed and the totals side by side. --json: one object on stdout."""
from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from code_assistant.console import _err, say, write
from code_assistant.evaluate.batch import EvalOutcome, Event, Planned
from code_assistant.evaluate.case_run import CasePhase, Phase
from code_assistant.evaluate.summary import Comparison, Summary, stop_label

if TYPE_CHECKING:
    from code_assistant.evaluate.results import CaseResult

PHASES = {Phase.FETCHING: "fetching the repository", Phase.AGENT: "agent", Phase.JUDGING: "judging"}
NAMED = 5  # judged tests named on a case's line; the rest counted (all of them are in results.jsonl)


def case_line(result: CaseResult) -> str:
    """One finished case: its verdict, what the agent did, the judged tests that did not pass, and the whole message
    (an error's cause is often at its end)."""
    plural = "" if result.iterations == 1 else "s"
    failing = ""
    if result.failing_tests:
        failing = ", failing " + " → ".join("?" if n is None else str(n) for n in result.failing_tests)
    line = f"{result.id}: {result.verdict.upper()} ({stop_label(result)}, {result.iterations} iteration{plural}" \
           f"{failing}, {result.seconds:.1f} s)"
    if result.verdict == "unresolved":
        for status, said in (("failed", "judged tests failed"), ("missing", "judged tests never run")):
            if named := [test for test, seen in result.tests.items() if seen == status]:
                line += f"; {said}: {_some(named)}"
    if result.verdict != "resolved" and result.message:
        line += " — " + " / ".join(part.strip() for part in result.message.splitlines() if part.strip())
    return line


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


def phase_line(event: CasePhase) -> str:
    """A case's phase as it begins: `flask-123: agent, iteration 2`."""
    said = PHASES[event.phase]
    return f"{event.case}: {said}" + (f", iteration {event.iteration}" if event.iteration else "")


@contextmanager
def progress(verbose: bool = False) -> Iterator[Callable[[Event], None]]:
    """What to call with each event of an eval: on a terminal (stderr) a bar with an ETA whose line says where each
    running case is; else a line a phase of a case, and one a finished case."""
    if not sys.stderr.isatty():
        def plain(event: Event) -> None:
            if isinstance(event, Planned):
                line = _planned(event)
            elif isinstance(event, CasePhase):
                line = f"[eval] {phase_line(event)}"
            else:
                line = f"[eval] {case_line(event.result)}"
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        yield plain
        return
    from rich import progress as bars

    bar = bars.Progress(bars.TextColumn("[bold]eval[/bold] cases"), bars.BarColumn(), bars.MofNCompleteColumn(),
                        bars.TimeElapsedColumn(), bars.TextColumn("ETA"), bars.TimeRemainingColumn(),
                        bars.TextColumn("{task.description}", markup=False), console=_err(), transient=False)
    task: list[Any] = []
    running: dict[str, str] = {}  # case -> where it is, in the order they began

    def shown(event: Event) -> None:
        if isinstance(event, Planned):
            bar.console.print(_planned(event), markup=False, highlight=False)
            task.append(bar.add_task("", total=len(event.to_run)))
            return
        if isinstance(event, CasePhase):
            running[event.case] = phase_line(event)
        else:
            running.pop(event.result.id, None)
            bar.console.print(case_line(event.result), markup=False, highlight=False)
            bar.advance(task[0])
        bar.update(task[0], description=" · ".join(running.values()))

    with bar:
        yield shown


def _planned(event: Planned) -> str:
    resumed = f"; {event.done} already done (resumed)" if event.done else ""
    return f"[eval: {len(event.to_run)} of {event.total} cases to run{resumed}]"


def show(outcome: EvalOutcome, summary: Summary, *, as_json: bool) -> None:
    if as_json:
        write(json.dumps({"results": str(outcome.out / "results.jsonl"), "ran": outcome.ran,
                          "missing": outcome.missing, **summary_json(summary)}) + "\n")
        return
    for line in summary_lines(summary):
        say(line)
    if summary.error_ids:
        say(f"[Not judged: {_some(summary.error_ids)}; add --rerun-errors to the same command to run them again]")
    if outcome.missing:
        say(f"[Not finished: {', '.join(outcome.missing)}; run the same command again to resume]")
    say(f"[Results: {outcome.out / 'results.jsonl'}]")


def summary_json(summary: Summary) -> dict[str, Any]:
    return {**dataclasses.asdict(summary), "resolve_rate": round(summary.resolve_rate, 4),
            "by_language": {k: {"resolved": v[0], "cases": v[1]} for k, v in summary.by_language.items()}}


def _money(value: float | None) -> str:
    return "n/a (no price)" if value is None else f"${value:.4f}"


def summary_lines(s: Summary) -> list[str]:
    lines = [f"Resolved: {s.resolved}/{s.cases} ({s.resolve_rate:.0%})"
             + (f"; {s.errors} could not be judged" if s.errors else ""),
             f"Agent said done: {s.agent_green}"
             + (f"; the judge disagreed on {', '.join(s.green_but_unresolved)}" if s.green_but_unresolved else ""),
             (f"Cost: {_money(s.cost_usd)} total, {_money(s.cost_per_resolved)} per resolved case; "
              f"tokens {s.prompt_tokens:,} in, {s.completion_tokens:,} out; cases' time {s.seconds:.1f} s"),
             "Iterations: " + ", ".join(f"{n}: {count}" for n, count in s.iterations.items()),
             "Stop reasons: " + ", ".join(f"{reason} {count}" for reason, count in s.stop_reasons.items())]
    if len(s.by_language) > 1:
        lines.append("By language: " + ", ".join(f"{lang} {done}/{total}"
                                                  for lang, (done, total) in s.by_language.items()))
    if s.models or s.prompt_versions:
        lines.append(f"Model: {', '.join(s.models) or '?'}; prompts: {', '.join(s.prompt_versions) or '?'}")
    if s.long_loops:
        lines.append("Loops of more than 3 iterations (look here: an ambiguous test, or context that was missing):")
        for loop in s.long_loops:
            failing = " → ".join("?" if n is None else str(n) for n in loop.failing_tests)
            lines.append(f"  {loop.id}: {loop.iterations} iterations, stopped: {loop.stop_reason}, "
                         f"failing tests {failing or '-'}, {loop.verdict}")
    return lines


def show_comparison(comparison: Comparison, names: tuple[str, str], *, as_json: bool) -> None:
    if as_json:
        write(json.dumps({"changed": [dataclasses.asdict(c) for c in comparison.changed],
                          "first": {"run": names[0], **summary_json(comparison.first)},
                          "second": {"run": names[1], **summary_json(comparison.second)},
                          "only_first": comparison.only_first, "only_second": comparison.only_second}) + "\n")
        return
    for line in comparison_lines(comparison, names):
        say(line)


def comparison_lines(c: Comparison, names: tuple[str, str]) -> list[str]:
    lines = [f"Changed verdict ({len(c.changed)}):" if c.changed else "No case changed its verdict."]
    lines += [f"  {change.id}: {change.before} -> {change.after}" for change in c.changed]
    a, b = c.first, c.second
    rows = [("", names[0], names[1]),
            ("resolved", _rate(a), _rate(b)),
            ("not judged", str(a.errors), str(b.errors)),
            ("agent said done", str(a.agent_green), str(b.agent_green)),
            ("cost", _money(a.cost_usd), _money(b.cost_usd)),
            ("per resolved", _money(a.cost_per_resolved), _money(b.cost_per_resolved)),
            ("tokens in", f"{a.prompt_tokens:,}", f"{b.prompt_tokens:,}"),
            ("tokens out", f"{a.completion_tokens:,}", f"{b.completion_tokens:,}"),
            ("cases' time", f"{a.seconds:.1f} s", f"{b.seconds:.1f} s"),
            ("iterations", _hist(a.iterations), _hist(b.iterations)),
            ("models", ", ".join(a.models) or "?", ", ".join(b.models) or "?"),
            ("prompts", ", ".join(a.prompt_versions) or "?", ", ".join(b.prompt_versions) or "?")]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    lines += ["", *("  ".join(cell.ljust(width[i]) for i, cell in enumerate(row)).rstrip() for row in rows)]
    for name, only in ((names[0], c.only_first), (names[1], c.only_second)):
        if only:
            lines.append(f"Only in {name} (left out of the totals): {', '.join(only)}")
    return lines


def _rate(s: Summary) -> str:
    return f"{s.resolved}/{s.cases} ({s.resolve_rate:.0%})"


def _hist(iterations: dict[int, int]) -> str:
    return " ".join(f"{n}:{count}" for n, count in iterations.items()) or "-"
