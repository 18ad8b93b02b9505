"""What a run is given, and where it is built (Kits, here, from what the workspace holds): the working tree, the parts
it uses — the model, the editor, the test runner, the index, the tools, the run log, the display, the session's
memory — and the small configuration each part reads, typed once from the settings at the edge (loop_config,
request_config, Limits.of). No part keeps the whole Settings.

The run in the repository and each best-of-N attempt are given a kit of the same shape: an attempt's is built from
the run's on its scratch copy, with its own model (a seed of its own), editor and runner, and the run's log and
tools."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant.agent.requests import RequestConfig
from code_assistant.display import Display
from code_assistant.edit.preview import Limits
from code_assistant.gate import Gate
from code_assistant.languages import framework
from code_assistant.settings import FixBy, repo_id

if TYPE_CHECKING:
    from code_assistant.edit.editor import FileEditor
    from code_assistant.index.indexer import RepoIndex
    from code_assistant.memory import Memory
    from code_assistant.model.chat import ChatModel, Usage
    from code_assistant.model.trajectory import Trajectory
    from code_assistant.settings import Settings
    from code_assistant.tools.box import ToolsFor
    from code_assistant.verify.runner import TestRunner
    from code_assistant.verify.testing import Testing


@dataclass(frozen=True)
class Tree:
    """The working tree a run changes (the repository, a worktree of it, a scratch copy) and the assistant's own
    directories, which no edit, preview or leftover check touches."""

    root: Path
    index_path: Path
    state_path: Path

    @property
    def kept_out(self) -> list[Path]:
        return [self.index_path, self.state_path]


@dataclass(frozen=True)
class Budget:
    """--max-tokens and --max-cost: what the run may spend on the model (None: no cap; decide.py says when it is
    spent); `base_url`: the server the model's price is looked up for (None: the provider's own API; a local server
    has none)."""

    max_tokens: int | None = None
    max_cost: float | None = None
    base_url: str | None = None

    def cost(self, usage: Usage, model: str) -> float | None:
        return usage.cost(model, self.base_url)


@dataclass(frozen=True)
class LoopConfig:
    """What the loop itself reads: how many iterations, whether to write a reproduction test first (None: when the
    suite is green before the change), a dry run, the guardrails, the budget; `around`: an answer may be applied
    around a change the user made meanwhile (not when the run's change is to be committed)."""

    limits: Limits
    max_iterations: int = 3
    reproduce: bool | None = None
    dry_run: bool = False
    budget: Budget = field(default_factory=Budget)
    around: bool = True
    fix_by: FixBy = FixBy.FEEDBACK

    @property
    def sampling(self) -> bool:
        """A failed iteration is followed by a sample of the plan, not a fix request."""
        return self.fix_by == FixBy.SAMPLES


def loop_config(settings: Settings, *, around: bool = True) -> LoopConfig:
    """What the loop reads of the settings; `around`: an answer may go around a change the user made meanwhile
    (not when the run's change is to be committed). The cap is priced for the server the settings name."""
    s = settings
    return LoopConfig(limits=Limits.of(s), max_iterations=s.max_iterations, reproduce=s.reproduce, dry_run=s.dry_run,
                      budget=Budget(max_tokens=s.max_tokens, max_cost=s.max_cost, base_url=s.server_url),
                      around=around, fix_by=s.fix_by)


def request_config(settings: Settings, tree: Path | None = None, state_path: Path | None = None, *,
                   embed_budget: int | None = None) -> RequestConfig:
    """What building a request reads: the read gate of `tree` (the repository unless another) with the assistant's
    directories kept out, the test command, the budgets."""
    s = settings
    gate = Gate(tree or s.repo, (s.index_path, state_path or s.state_path, s.runs_dir))
    return RequestConfig(gate=gate, test_command=s.test_command, max_iterations=s.max_iterations,
                         context_tokens=s.context_tokens, instructions=s.instructions,
                         embed_budget=s.query_embed_budget if embed_budget is None else embed_budget,
                         first_test=framework(tree or s.repo).first_test, edit_format=s.edit_format)


@dataclass(frozen=True)
class Kit:
    """Everything a run uses. `display`: what the person sees (its `review` only with --review); `guard`: told the
    files about to be written, before anything is (the git workflow refuses some); `candidate`: which best-of-N
    attempt this kit is for (None: the run in the repository)."""

    tree: Tree
    model: ChatModel
    editor: FileEditor
    runner: TestRunner
    index: Callable[[], RepoIndex]  # the tree's index brought up to date, said as it goes (the run's first step)
    current_index: Callable[[], RepoIndex]  # the same without a word: what the model's tools look at
    requests: RequestConfig
    tools: ToolsFor | None = None
    trajectory: Trajectory | None = None
    display: Display = field(default_factory=Display)
    memory: Memory | None = None
    guard: Callable[[list[str]], None] | None = None
    candidate: int | None = None


KitFor = Callable[[Path, int], Kit]  # best of N: a scratch copy and an attempt's number -> that attempt's kit


CANDIDATE_TEMPERATURE = 0.7  # enough to make the attempts differ; the seeds make each one repeatable
Indexes = tuple[Callable[[], "RepoIndex"], Callable[[], "RepoIndex"]]  # a tree's index said as it goes, and quiet


@dataclass(frozen=True)
class Kits:
    """Where every kit of a task is made: the run's on its working tree, and each best-of-N attempt's from the run's.
    The workspace hands over, once, what it holds: the settings (read here, at the edge, into each part's config),
    the test command and its sandbox, the repository's index (said as it goes, and quiet) and a worktree's
    (`worktree`: an indexer of its own), the model's tools for a model (`tools_for`: --replay's recorded calls made
    afresh), the display, the session's memory and id."""

    settings: Settings
    testing: Testing
    index: Callable[[str | None], RepoIndex]  # with a task: a big tree's first index as far as the task needs
    current_index: Callable[[str | None], RepoIndex]
    worktree: Callable[[Path], Indexes]
    tools_for: Callable[..., ToolsFor | None]
    display: Display = field(default_factory=Display)
    memory: Memory | None = None
    session: str | None = None

    def run(self, tree: Path, model: ChatModel, *, task: str = "", trajectory: Trajectory | None = None,
            guard: Callable[[list[str]], None] | None = None, replay: Path | None = None) -> Kit:
        """What a run on the working tree `tree` uses (the repository, a branch of it in place, a worktree with an
        index of its own): `model`, an editor whose journal is kept for undo, the test runner, the tools (with
        --replay's recorded calls, made afresh, when the recorded run called any), the run log, the display (its
        review with --review) and the session's memory; `guard`: told the files about to be written (the git
        workflow)."""
        from code_assistant.model.trajectory import Trajectory, read_tool_calls

        s = self.settings
        log = trajectory or Trajectory(s.runs_dir, task or "task")
        if tree == s.repo:  # a big tree not indexed yet: the task's files first, the rest in the background
            focus = task or None
            index, current = (lambda: self.index(focus)), (lambda: self.current_index(focus))
        else:  # a worktree, removed after the run: indexed whole, nothing left to complete it in the background
            index, current = self.worktree(tree)
        if replay is None:
            tools = self.tools_for(model)
        else:
            recorded = read_tool_calls(replay)
            tools = self.tools_for(model, recorded=recorded) if recorded else None
        return Kit(tree=Tree(root=tree, index_path=s.index_path, state_path=s.state_path), model=model,
                   editor=self.editor(tree, task=task, originals=log.path.with_suffix(".originals")),
                   runner=self.testing.runner(tree), index=index, current_index=current,
                   requests=request_config(s, tree), tools=tools, trajectory=log, memory=self.memory, guard=guard,
                   display=replace(self.display, review=self.display.review if s.review else None))

    def attempt(self, run: Kit, scratch: Path, number: int) -> Kit:
        """Best of N's attempt `number` on its scratch copy, built from the run's kit but for what is its own: the
        run's model at a temperature above 0 with its own seed and window, an editor that keeps no history in a
        state directory beside the copy, a runner whose processes are named apart, its lines prefixed, no memory and
        no review; the run's log and tools, and the repository's index (it starts from the run's and looks at
        that)."""
        from code_assistant.edit.editor import FileEditor
        from code_assistant.waiting import Prefixed

        s = self.settings
        state_path = scratch.parent / "state"  # beside the copy (agent/candidates.py)
        if run.tree.root == s.repo:  # the run's, focused on its task
            index, current = run.index, run.current_index
        else:
            index, current = (lambda: self.index(None)), (lambda: self.current_index(None))
        say = self.display.say
        return Kit(tree=Tree(root=scratch, index_path=s.index_path, state_path=state_path),
                   model=run.model.with_(temperature=CANDIDATE_TEMPERATURE, seed=number,
                                         window=replace(run.model.window)),
                   editor=FileEditor(scratch, state_dir=state_path / repo_id(scratch), forbidden=[s.index_path],
                                     history=False),
                   runner=self.testing.runner(scratch, candidate=number), index=index, current_index=current,
                   requests=request_config(s, scratch, state_path, embed_budget=0), tools=run.tools,
                   trajectory=run.trajectory, candidate=number,
                   display=Display(say=lambda line: say(f"[Candidate {number}] {line}"),
                                   status=Prefixed(self.display.status, f"Candidate {number}: ")))

    def editor(self, tree: Path | None = None, *, task: str | None = None, originals: Path | None = None) -> FileEditor:
        """The editor of `tree` (the repository unless another), its journal kept for undo, labelled with `task` and
        the session (a run's, and `apply`'s); `originals`: where a file's original is saved when the user's and the
        run's edits overlap."""
        from code_assistant.edit.editor import FileEditor

        s = self.settings
        tree = tree or s.repo
        return FileEditor(tree, state_dir=s.state_path / repo_id(tree), forbidden=[s.index_path], originals=originals,
                          task=task, session=self.session)
