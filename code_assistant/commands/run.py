"""`run` (the default command): check what can be checked before anything is touched, recover an interrupted run,
run the agent (or best of N) under the git workflow, print the result. A session (session.py) runs many tasks with
the same pieces: preflight once, open_model once, one_task per task."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import console
from code_assistant.agent.stop import Stop
from code_assistant.commands import parts
from code_assistant.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, ConfigError, attach_log
from code_assistant.settings import Settings, repo_id

if TYPE_CHECKING:
    from code_assistant.agent.memory import Memory
    from code_assistant.agent.state import RunResult
    from code_assistant.edit.editor import FileEditor
    from code_assistant.index.indexer import Indexer
    from code_assistant.model.chat import ChatModel
    from code_assistant.model.trajectory import ReplayModel, Trajectory
    from code_assistant.verify.sandbox import Sandbox


@dataclass(frozen=True)
class RunOptions:
    """What one run is asked to do, besides the settings every command shares."""

    task: str
    json: bool = False
    branch: str | None = None  # work on a new branch; "" names it after the task
    worktree: bool = False
    commit: bool = False
    allow_dirty: bool = False
    keep_branch: bool = False
    replay: Path | None = None  # a recorded run's answers stand in for the model


def run(settings: Settings, options: RunOptions) -> int:
    from code_assistant.edit.journal import RepoLock

    sandbox, replay = preflight(settings, options.replay)
    say = console.quiet if options.json else console.say
    with RepoLock(settings.repo, settings.repo_state_dir):  # another run on this repository: refused, nothing asked
        model = open_model(settings, replay, say)
        say(f"[Sandbox: {sandbox.describe()}]")
        result = one_task(settings, options, model, say=say, sandbox=sandbox, indexer=parts.build_indexer(settings))
    if options.json:
        print(json.dumps({**console.result_json(result), "sandbox": sandbox.record()}))
    else:
        console.summary(result)
    return exit_status(result)


def exit_status(result: RunResult) -> int:
    """0 for green and for a dry run (it did what was asked: showed the plan), 130 interrupted, else 1."""
    if result.stop_reason == Stop.INTERRUPTED:
        return EXIT_INTERRUPTED
    return EXIT_OK if result.success or result.stop_reason == Stop.DRY_RUN else EXIT_FAILED


def preflight(settings: Settings, replay_file: Path | None) -> tuple[Sandbox, ReplayModel | None]:
    """What can be checked before anything is touched or asked: the test command, the sandbox, a replay file, the
    key (a ConfigError or TestCommandError, exit 2)."""
    from code_assistant.verify.runner import TestRunner

    TestRunner(settings.test_command, cwd=settings.repo, timeout=settings.test_timeout).check()
    sandbox = parts.sandbox(settings)
    replay = _replay_model(settings, replay_file)
    if replay is None:
        parts.api_key(settings)  # a missing key is reported before anything else happens
    return sandbox, replay


def open_model(settings: Settings, replay: ReplayModel | None, say: Callable[[str], None]) -> ChatModel:
    """With the repository's lock held: the server checked, an interrupted run recovered, the chat model (its window
    asked of the server once no other run holds the repository), the header lines."""
    from code_assistant.model.prices import estimate_cost

    if replay is None:
        parts.check_server(settings)  # a server that is not there is found before any work
    parts.recover_interrupted(settings, say)
    model = replay or parts.run_model(settings)
    if replay is None:
        say(f"[Model: {model.name}, context window {model.window.describe()}]")
    if line := parts.instructions_line(settings):
        say(line)
    if settings.max_cost is not None and estimate_cost(model.name, 1, 1, settings.base_url) is None:
        say("[--max-cost: this model has no price (a local server or an unknown model); only --max-tokens caps "
            "the run]")
    return model


def one_task(settings: Settings, options: RunOptions, model: ChatModel, *, say: Callable[[str], None],
             sandbox: Sandbox, indexer: Indexer, memory: Memory | None = None) -> RunResult:
    """One task, the repository's lock held: the git workflow around the agent (or best of N), its run log, its
    journal kept for undo. `indexer` and `memory`: what a session keeps from one task to the next."""
    from code_assistant import vcs
    from code_assistant.edit.editor import FileEditor
    from code_assistant.model.trajectory import Trajectory

    workflow = vcs.Workflow(settings.repo, options.task, branch=options.branch, worktree=options.worktree,
                            commit=options.commit, allow_dirty=options.allow_dirty, keep_branch=options.keep_branch,
                            worktrees_dir=settings.state_path / "worktrees" / repo_id(settings.repo))
    work = dataclasses.replace(settings, repo=workflow.start())
    trajectory = Trajectory(work.runs_dir, options.task or "task")
    editor = FileEditor(work.repo, state_dir=work.repo_state_dir, forbidden=[work.index_path],
                        originals=trajectory.path.with_suffix(".originals"))
    if work.repo != settings.repo:
        indexer = parts.build_indexer(work)  # a worktree: an index of its own
    try:
        result = _run_agent(work, options, model, say=say, pre_write=workflow.guard, trajectory=trajectory,
                            editor=editor, sandbox=sandbox, running=parts.running_tests(settings),
                            indexer=indexer, memory=memory)
    except BaseException as exc:
        attach_log(exc, str(trajectory.path))
        workflow.finish(False, [], 0)
        raise
    for line in workflow.finish(result.success and result.stop_reason != Stop.DRY_RUN, result.files_modified,
                                result.iterations):
        say(line)
    if workflow.committed:
        editor.record_commit(workflow.committed)
    return result


def _replay_model(settings: Settings, replay: Path | None) -> ReplayModel | None:
    """--replay: a recorded run's answers stand in for the model (None: ask the model)."""
    if replay is None:
        return None
    from code_assistant.model.trajectory import ReplayModel, read_answers

    if settings.candidates > 1:
        raise ConfigError("--replay repeats one recorded attempt; it cannot be combined with --candidates")
    if not replay.is_file():
        raise ConfigError(f"replay file not found: {replay}")
    return ReplayModel(read_answers(replay), name=f"replay:{replay.name}")


def _run_agent(work: Settings, options: RunOptions, model: ChatModel, *, say: Callable[[str], None],
               pre_write: Callable[[list[str]], None], trajectory: Trajectory, editor: FileEditor,
               sandbox: Sandbox | None, running: Path, indexer: Indexer, memory: Memory | None) -> RunResult:
    """The agent (or best of N) on the working tree `work` (the repository, a branch of it, or a worktree); its
    test runs confined by `sandbox`."""
    from code_assistant.agent.loop import Agent
    from code_assistant.verify.runner import TestRunner

    runner = TestRunner(work.test_command, cwd=work.repo, timeout=work.test_timeout, running_file=running,
                        sandbox=sandbox)
    with console.index_progress(enabled=not options.json) as progress:
        agent = Agent(work, model, indexer, runner, editor, say=say, trajectory=trajectory,
                      review=console.review if work.review else None,
                      on_token=console.stream if work.stream else None, index_progress=progress,
                      pre_write=pre_write, memory=memory)
        if work.candidates <= 1:
            return agent.run(options.task)
        from code_assistant.agent.best_of import BestOf, candidate_model

        return BestOf(agent, lambda number: candidate_model(model, number), work.candidates).run(options.task)
