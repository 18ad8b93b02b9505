"""An eval: the cases of a file run on a pool (workers here, or a cluster), each case's result appended to the
results file as it finishes, its run log and the agent's stderr written beside it. Resumable: a case the results
file already holds is not run again. What happens is told through `on_event` (the door shows a progress bar)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from code_assistant.errors import ConfigError
from code_assistant.evaluate.case_run import CasePhase, CaseRun, EvalConfig, sandbox_for
from code_assistant.evaluate.cases import Case, read_cases
from code_assistant.evaluate.judge import Verdict
from code_assistant.evaluate.pool import Pool, Workers
from code_assistant.evaluate.results import CaseResult, ResultsFile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalOptions:
    cases: Path
    out: Path
    config: EvalConfig = field(default_factory=EvalConfig)
    workers: int = 1
    cluster: str | None = None  # "local", or a Dask scheduler's address
    only: tuple[str, ...] = ()  # run only these case ids
    case_roots: tuple[Path, ...] = ()  # where a case's local repository may lie besides the cases file's folder
    rerun_errors: bool = False  # run again the cases that ended in an error (a model server that was down)
    verbose: bool = False
    measured: tuple[str, ...] = ()  # the run options that decide what is measured (not where the model is): a
    # folder holding results run with others is refused


@dataclass(frozen=True)
class Planned:
    """The eval is about to run `to_run` cases; `done` were finished by an earlier run of it (the last line of a
    case in the results file is its result)."""

    total: int
    done: int
    to_run: list[str]


@dataclass(frozen=True)
class Finished:
    result: CaseResult


Event = Planned | CasePhase | Finished


@dataclass(frozen=True)
class EvalOutcome:
    out: Path
    results: list[CaseResult]  # every case of the file (or of --only) that has a result, in the file's order
    ran: int  # how many ran now
    missing: list[str]  # cases with no result (stopped before they finished)


def run_eval(options: EvalOptions, on_event: Callable[[Event], None] = lambda event: None) -> EvalOutcome:
    cases = _selected(read_cases(options.cases, options.case_roots), options.only)
    sandbox_for(options.config)  # no sandbox to be had is an error now, before anything runs
    results = ResultsFile(options.out)
    manifest = {"cases": str(options.cases.resolve()), "options": list(options.measured)}
    results.check_manifest(manifest)
    done = results.done()
    if options.rerun_errors:
        done = {case: result for case, result in done.items() if result.verdict != Verdict.ERROR}
    todo = [case for case in cases if case.id not in done]
    pool = _pool(options) if todo else None  # a pool that cannot be had (no scheduler there) leaves no folder behind
    told = threading.Lock()  # the workers' threads (or a cluster client's) tell their phases
    ended: set[str] = set()

    def tell(event: Event) -> None:
        with told:
            if isinstance(event, Finished):
                ended.add(event.result.id)
            elif isinstance(event, CasePhase) and event.case in ended:
                return  # a cluster's event that arrived after the case's result
            on_event(event)
    try:
        results.write_manifest(manifest)
        (options.out / "logs").mkdir(exist_ok=True)
        config = replace(options.config, logs=options.out / "logs")  # filled as the agents run (Workers)
        tell(Planned(total=len(cases), done=len(cases) - len(todo), to_run=[case.id for case in todo]))
        for run in pool.run(todo, config, tell) if pool is not None else ():
            result = _stored(options.out, run)
            results.append(result)
            done[result.id] = result
            tell(Finished(result))
    finally:
        if pool is not None:
            pool.close()
    finished = [done[case.id] for case in cases if case.id in done]
    return EvalOutcome(out=options.out, results=finished, ran=len(todo),
                       missing=[case.id for case in cases if case.id not in done])


def _selected(cases: list[Case], only: tuple[str, ...]) -> list[Case]:
    if not only:
        return cases
    ids = {case.id for case in cases}
    unknown = [name for name in only if name not in ids]
    if unknown:
        raise ConfigError(f"eval --only: no case {unknown[0]!r} in the cases file")
    return [case for case in cases if case.id in only]


def _pool(options: EvalOptions) -> Pool:
    if options.cluster is None:
        return Workers(options.workers)
    from code_assistant.evaluate.cluster import DaskCluster

    return DaskCluster(options.cluster, options.workers, quiet=not options.verbose)


def _stored(out: Path, run: CaseRun) -> CaseResult:
    """The case's run log, and the agent's stderr when it came back as text (a cluster's worker), written into the
    eval's folder; the result naming them."""
    result = run.result
    trajectory = None
    agent_log = result.agent_log  # written there as the agent ran
    if run.run_log:
        path = out / "trajectories" / f"{result.id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(run.run_log, encoding="utf-8")
        trajectory = str(path)
    if run.agent_log is not None:
        path = out / "logs" / f"{result.id}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(run.agent_log, encoding="utf-8")
        agent_log = str(path)
    return replace(result, trajectory=trajectory, agent_log=agent_log)
