"""An eval summed up, and two evals compared. Pure functions of the results records.

The summary: the resolve rate (errors count as cases not resolved, as SWE-bench counts them), the cost per resolved
case, the histogram of iterations, per language, and the loops of more than three iterations each with its stop
reason and its failing tests per iteration — where the playbook says to look ("often the test is ambiguous or the
context was incomplete"). The comparison: the cases whose verdict changed, and the totals side by side."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from code_assistant.evaluate.results import CaseResult

LONG_LOOP = 3  # a loop of more iterations than this is listed with its stop reason


@dataclass(frozen=True)
class LongLoop:
    id: str
    iterations: int
    stop_reason: str | None
    failing_tests: list[int | None]
    verdict: str


@dataclass(frozen=True)
class Summary:
    cases: int
    resolved: int
    errors: int
    error_ids: list[str]  # the cases that could not be judged, to run again with --rerun-errors
    agent_green: int  # cases whose agent said it was done
    green_but_unresolved: list[str]  # the agent said done, the judge did not agree
    cost_usd: float | None  # None: no case had a price
    cost_per_resolved: float | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # the cases' own time, added up (not the eval's wall time, which workers shorten)
    iterations: dict[int, int]  # iterations -> cases
    stop_reasons: dict[str, int]
    by_language: dict[str, tuple[int, int]]  # language -> (resolved, cases)
    long_loops: list[LongLoop] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    prompt_versions: list[str] = field(default_factory=list)

    @property
    def resolve_rate(self) -> float:
        return self.resolved / self.cases if self.cases else 0.0


def stop_label(result: CaseResult) -> str:
    """Why the case's agent stopped, as the results say it; a case whose agent gave no reason is named for what
    happened (it never ran: the repository could not be had, a tool was missing; or it ended without a word)."""
    if result.stop_reason:
        return result.stop_reason
    if result.exit_code is None and not result.agent_seconds:
        return "agent not run"
    return f"agent exit {result.exit_code}" if result.exit_code is not None else "agent gave no reason"


def summarize(results: list[CaseResult]) -> Summary:
    resolved = [r for r in results if r.resolved]
    priced = [r.cost_usd for r in results if r.cost_usd is not None]
    cost = round(sum(priced), 6) if priced else None
    languages: dict[str, tuple[int, int]] = {}
    for r in results:
        done, total = languages.get(r.language or "?", (0, 0))
        languages[r.language or "?"] = (done + r.resolved, total + 1)
    return Summary(
        cases=len(results), resolved=len(resolved), errors=sum(r.verdict == "error" for r in results),
        error_ids=[r.id for r in results if r.verdict == "error"],
        agent_green=sum(bool(r.agent_success) for r in results),
        green_but_unresolved=[r.id for r in results if r.agent_success and not r.resolved],
        cost_usd=cost, cost_per_resolved=round(cost / len(resolved), 6) if cost is not None and resolved else None,
        prompt_tokens=sum(r.prompt_tokens for r in results),
        completion_tokens=sum(r.completion_tokens for r in results),
        seconds=round(sum(r.seconds for r in results), 2),
        iterations=dict(sorted(Counter(r.iterations for r in results).items())),
        stop_reasons=dict(Counter(stop_label(r) for r in results).most_common()),
        by_language=dict(sorted(languages.items())),
        long_loops=[LongLoop(id=r.id, iterations=r.iterations, stop_reason=r.stop_reason,
                             failing_tests=r.failing_tests, verdict=r.verdict)
                    for r in results if r.iterations > LONG_LOOP],
        models=sorted({r.model for r in results if r.model}),
        prompt_versions=sorted({v for r in results for v in r.prompt_versions}))


@dataclass(frozen=True)
class Change:
    id: str
    before: str  # the verdict in the first eval
    after: str


@dataclass(frozen=True)
class Comparison:
    changed: list[Change]  # cases whose verdict differs, by id
    first: Summary  # over the cases both evals have
    second: Summary
    only_first: list[str]
    only_second: list[str]


def compare(first: list[CaseResult], second: list[CaseResult]) -> Comparison:
    """Two evals: the cases whose verdict changed, and both summaries over the cases they share (a rate over
    different cases compares nothing)."""
    a = {r.id: r for r in first}
    b = {r.id: r for r in second}
    shared = sorted(case for case in a if case in b)
    changed = [Change(id=case, before=a[case].verdict, after=b[case].verdict) for case in shared
               if a[case].verdict != b[case].verdict]
    return Comparison(changed=changed, first=summarize([a[case] for case in shared]),
                      second=summarize([b[case] for case in shared]),
                      only_first=sorted(case for case in a if case not in b),
                      only_second=sorted(case for case in b if case not in a))
