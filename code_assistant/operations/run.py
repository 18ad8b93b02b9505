"""`run`: a task for the loop. What can be checked is checked before anything is touched (the test command, the
sandbox, a replay file, the key); then, with the repository held, the agent (or best of N) runs under the git
workflow, with its run log and its journal kept for undo. A session's task is the same operation: the workspace keeps
the model, the indexer and the memory warm between tasks, and remembers a note of each."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant.errors import ConfigError, attach_log
from code_assistant.operations.options import RunOptions
from code_assistant.operations.outcomes import RunOutcome
from code_assistant.settings import repo_id

if TYPE_CHECKING:
    from code_assistant.agent.state import RunResult
    from code_assistant.memory import Note
    from code_assistant.model.trajectory import ReplayModel
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: RunOptions) -> RunOutcome:
    from code_assistant.index.indexer import scan_ahead  # the index stage's imports, only for a run

    replay = replay_model(ws, options.replay)
    # a big tree's first index looks for the task's words in the tree: begun now, beside the checks, the model and
    # the sandbox (the run's index, in place, takes it; a worktree has an index of its own)
    ahead = (contextlib.nullcontext() if options.worktree or not options.task.strip()
             else scan_ahead(ws.settings.repo, ws.settings.index_path, options.task))
    with ahead:
        ws.check_before_runs(needs_key=replay is None)
        with ws.holding():  # another run on this repository: refused, nothing asked
            if replay is None:
                ws.model  # noqa: B018 - opened now, its header lines before the sandbox's
            ws.announce_sandbox()
            ws.last_task = options.task
            result = one_task(ws, options, replay)
    ws.count(result.usage, result.cost_usd)
    remember(ws, options.task, result)
    return RunOutcome(task=options.task, result=result, sandbox=ws.tests.sandbox.record())


def replay_model(ws: Workspace, replay: Path | None) -> ReplayModel | None:
    """--replay: a recorded run's answers stand in for the model (None: ask the model)."""
    if replay is None:
        return None
    from code_assistant.model.trajectory import ReplayModel, read_answers

    if ws.settings.candidates > 1:
        raise ConfigError("--replay repeats one recorded attempt; it cannot be combined with --candidates")
    if not replay.is_file():
        raise ConfigError(f"replay file not found: {replay}")
    return ReplayModel(read_answers(replay), name=f"replay:{replay.name}")


def one_task(ws: Workspace, options: RunOptions, replay: ReplayModel | None = None) -> RunResult:
    """One task, the repository held: the git workflow around the run (or best of N), on the kit built for the
    working tree (the repository, a branch of it, or a worktree: an index of its own); `replay`: the
    recorded answers that stand in for the workspace's model."""
    from code_assistant import vcs
    from code_assistant.agent.kit import loop_config
    from code_assistant.agent.loop import Run
    from code_assistant.agent.stop import Stop
    from code_assistant.model.trajectory import Trajectory

    settings = ws.settings
    workflow = vcs.Workflow(settings.repo, options.task, branch=options.branch, worktree=options.worktree,
                            commit=options.commit, allow_dirty=options.allow_dirty, keep_branch=options.keep_branch,
                            worktrees_dir=settings.state_path / "worktrees" / repo_id(settings.repo))
    tree = workflow.start()
    trajectory = Trajectory(settings.runs_dir, options.task or "task")
    try:
        kit = ws.kits.run(tree, replay or ws.model, task=options.task, trajectory=trajectory, guard=workflow.guard,
                          replay=options.replay)
        run = Run(kit, loop_config(settings, around=not workflow.commit))
        if settings.candidates <= 1:
            result = run.run(options.task)
        else:
            from code_assistant.agent.best_of import BestOf

            result = BestOf(run, lambda scratch, number: ws.kits.attempt(kit, scratch, number),
                            settings.candidates).run(options.task)
    except BaseException as exc:
        attach_log(exc, str(trajectory.path))
        workflow.finish(success=False, files=[], iterations=0)
        raise
    for line in workflow.finish(success=result.success and result.stop_reason != Stop.DRY_RUN,
                                files=result.files_modified, iterations=result.iterations):
        ws.say(line)
    if workflow.committed:
        kit.editor.record_commit(workflow.committed)
    return result


def remember(ws: Workspace, task: str, result: RunResult) -> None:
    """A note of the task for the next requests of a session (and its file, for --resume)."""
    ws.memory.remember(note(task, result), result.files_modified if result.success else [])
    ws.save_memory()


def note(task: str, result: RunResult) -> Note:
    from code_assistant.memory import Note, files_with_stat

    if result.success:
        outcome = f"done ({result.stop_reason}, iteration {result.iterations}); the change is in the files"
    else:
        said = result.message and result.message != result.stop_reason
        detail = f": {result.message.splitlines()[0]}" if said else ""
        outcome = f"not done ({result.stop_reason}{detail}); everything was rolled back"
    return Note(task=task, result=outcome, files=files_with_stat(result.diff) if result.success else (),
                failing=tuple(result.tests_failed))
