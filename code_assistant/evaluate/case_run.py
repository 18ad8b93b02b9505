"""One case from start to verdict, wherever it runs (a thread of this process or a task on a cluster's worker): its
repository into a scratch directory of its own, the agent on it, the judge after it, the scratch directory removed.
What it returns carries the run log and the agent's stderr as text, so that the eval's own process writes every file
of the results, whichever machine ran the case."""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from code_assistant.errors import EXIT_USAGE, AssistantError
from code_assistant.evaluate.attempt import Attempt, attempt
from code_assistant.evaluate.cases import Case
from code_assistant.evaluate.judge import Judgement, Verdict, judge
from code_assistant.evaluate.results import CaseResult
from code_assistant.evaluate.scratch import materialize
from code_assistant.evaluate.steps import RunLog, iterations_recorded, summarize
from code_assistant.verify.sandbox import Sandbox, resolve

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalConfig:
    """What every case of an eval is run with (built once, at the door)."""

    run_args: tuple[str, ...] = ()  # the run's options passed through: the model, the limits
    sandbox: str = "write"  # the test command's sandbox, for the judge's test run and a download too
    bwrap: str = "bwrap"
    network: bool = False
    pass_env: tuple[str, ...] = ()
    shown: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    test_timeout: float = 120.0
    case_timeout: float = 3600.0  # the agent's wall time on one case before it is stopped
    scratch: Path | None = None  # where scratch directories go (None: the system's temporary directory)
    keep_scratch: bool = False
    logs: Path | None = None  # where each case's agent writes its stderr (ID.log) as it runs, when the folder is on
    # this machine (None: into the scratch directory, the text returned)


class Phase(StrEnum):
    """Where a case is."""

    FETCHING = "fetching"  # its repository into the scratch directory
    AGENT = "agent"
    JUDGING = "judging"


@dataclass(frozen=True)
class CasePhase:
    """A case began a phase, or (the agent) an iteration."""

    case: str
    phase: Phase
    iteration: int = 0  # the agent's iteration under way (0: before the first plan, or not the agent)


Watch = Callable[[CasePhase], None]


class CaseInterrupted(Exception):
    """The agent was stopped from outside (Ctrl-C, SIGTERM): the case is not finished and is run again on resume."""


@dataclass(frozen=True)
class CaseRun:
    result: CaseResult
    run_log: str = ""  # the trajectory's lines ("" when the agent wrote none)
    agent_log: str | None = None  # the agent's stderr (None: no agent ran)


def sandbox_for(config: EvalConfig, protected: tuple[Path, ...] = ()) -> Sandbox:
    return resolve(config.sandbox, config.bwrap, protected=protected, writable=config.writable,
                   network=config.network, shown=config.shown, passed_env=config.pass_env)


def run_case(case: Case, config: EvalConfig, scratch_root: str | None = None,
             stop: threading.Event | None = None, watch: Watch = lambda phase: None) -> CaseRun:
    """The case run and judged, in a scratch directory under `scratch_root` (else config.scratch, else the system's
    temporary directory), each phase told to `watch` as it begins; CaseInterrupted when the agent was stopped from
    outside or by `stop`."""
    start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"eval-{case.id[:40]}-", dir=scratch_root or config.scratch))
    try:
        run = _run(case, config, root, start, stop, watch)
        return replace(run, result=replace(run.result, scratch=str(root))) if config.keep_scratch else run
    finally:
        if not config.keep_scratch:
            shutil.rmtree(root, ignore_errors=True)


def _run(case: Case, config: EvalConfig, root: Path, start: float, stop: threading.Event | None,
         watch: Watch) -> CaseRun:
    base = CaseResult(id=case.id, verdict=Verdict.ERROR, resolved=False, language=case.language,
                      host=socket.gethostname(), worker=threading.current_thread().name)
    missing = [tool for tool in case.requires if tool != "network" and shutil.which(tool) is None]
    if missing:
        return CaseRun(replace(base, message=f"the case needs {missing[0]}, which is not on PATH here",
                               seconds=time.monotonic() - start))
    sandbox = sandbox_for(config, protected=(root / "index", root / "state", root / "runs"))
    repo = root / "repo"
    watch(CasePhase(case.id, Phase.FETCHING))
    try:
        materialize(case.source, repo, sandbox)
    except AssistantError as exc:
        return CaseRun(replace(base, message=f"the repository could not be had: {exc}",
                               seconds=time.monotonic() - start))
    # the judge's sandbox decided before the agent's tests can write what it reads (sandbox.py: freeze)
    if sandbox.active:
        sandbox.freeze(repo, sandbox.environment(os.environ).env, shlex.split(case.judged_by))
    live = config.logs / f"{case.id}.log" if config.logs is not None else None
    stderr_file = live or root / "agent.log"
    watch(CasePhase(case.id, Phase.AGENT, 1))
    polled = _iterations(case.id, root / "runs", watch)
    done = attempt(repo=repo, task=case.task, test_command=case.test_command, run_args=config.run_args,
                   log_dir=root / "runs", scratch=root, stderr_file=stderr_file, timeout=config.case_timeout,
                   stop=stop, polled=polled)
    polled()  # the iterations recorded after the last poll: said late, never left out
    if done.interrupted:
        raise CaseInterrupted(case.id)
    log_path = done.outcome.get("log")
    run_log = Path(log_path).read_text(encoding="utf-8", errors="replace") if log_path and Path(
        log_path).is_file() else ""
    watch(CasePhase(case.id, Phase.JUDGING))
    judged = judge(case, repo, sandbox, timeout=config.test_timeout)
    result = _result(base, done, summarize(run_log.splitlines()), judged, seconds=time.monotonic() - start)
    if live is not None:  # already in the eval's folder
        return CaseRun(replace(result, agent_log=str(live)), run_log=run_log)
    return CaseRun(result, run_log=run_log, agent_log=stderr_file.read_text(encoding="utf-8", errors="replace"))


def _iterations(case: str, log_dir: Path, watch: Watch) -> Callable[[], None]:
    """What the agent's polling calls: each iteration its run log shows begun told to `watch`, once. Iteration n+1
    is under way once n is recorded and the run has not ended by the next poll (it decides, and rolls back, in
    milliseconds)."""
    told, last = [1], [0]

    def polled() -> None:
        logs = sorted(log_dir.glob("*.jsonl"))
        recorded, ended = iterations_recorded(logs[-1]) if logs else (0, False)
        begun = recorded + 1 if recorded == last[0] and not ended else recorded
        last[0] = recorded
        for iteration in range(told[0] + 1, begun + 1):  # one that began and ended between two polls too
            watch(CasePhase(case, Phase.AGENT, iteration))
        told[0] = max(told[0], begun)
    return polled


def _result(base: CaseResult, done: Attempt, log: RunLog, judged: Judgement, *, seconds: float) -> CaseResult:
    outcome = done.outcome
    tokens = outcome.get("tokens") or {}
    message = outcome.get("message") or ""
    if done.exit_code is None:
        message = "stopped at the case's time limit" + (f"; {message}" if message else "")
    verdict = judged.verdict
    if judged.verdict == Verdict.ERROR:
        message = judged.summary + (f" (the agent: {message})" if message else "")
    elif done.exit_code == EXIT_USAGE:  # refused before it started (no model server, tests that cannot run here)
        verdict, message = Verdict.ERROR, f"the agent did not run: {message}"
    return replace(base, verdict=verdict, resolved=verdict == Verdict.RESOLVED,
                   agent_success=outcome.get("success"),
                   stop_reason=outcome.get("stop_reason") or outcome.get("error") or ("timeout" if done.exit_code
                                                                                      is None else None),
                   exit_code=done.exit_code, iterations=int(outcome.get("iterations") or 0),
                   failing_tests=list(log.failing), tests=judged.tests, judge_summary=judged.summary,
                   prompt_tokens=int(tokens.get("prompt_tokens") or 0),
                   completion_tokens=int(tokens.get("completion_tokens") or 0), calls=int(tokens.get("calls") or 0),
                   cost_usd=outcome.get("cost_usd"), prompt_versions=list(log.prompt_versions), model=log.model,
                   agent_seconds=round(done.seconds, 2), judge_seconds=round(judged.seconds, 2),
                   seconds=round(seconds, 2), files_modified=list(outcome.get("files_modified") or []),
                   message=message)
