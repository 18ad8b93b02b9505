"""What a run is given, built in one place (Workspace.kit): the working tree, the parts it uses — the model, the
editor, the test runner, the index, the tools, the run log, the display, the session's memory — and the small
configuration each part reads, typed once from the settings at the edge. No part keeps the whole Settings.

The run in the repository and each best-of-N attempt are given a kit of the same shape: an attempt's is built on its
scratch copy, with its own model (a seed of its own), editor and runner, and the run's log and tools."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant.agent.requests import RequestConfig
from code_assistant.display import Display
from code_assistant.edit.preview import Limits
from code_assistant.gate import Gate
from code_assistant.languages import framework

if TYPE_CHECKING:
    from code_assistant.edit.editor import FileEditor
    from code_assistant.index.indexer import RepoIndex
    from code_assistant.memory import Memory
    from code_assistant.model.chat import ChatModel, Usage
    from code_assistant.model.trajectory import Trajectory
    from code_assistant.settings import Settings
    from code_assistant.tools.box import ToolsFor
    from code_assistant.verify.runner import TestRunner


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


def loop_config(settings: Settings, *, around: bool = True) -> LoopConfig:
    """What the loop reads of the settings; `around`: an answer may go around a change the user made meanwhile
    (not when the run's change is to be committed). The cap is priced for the server the settings name."""
    s = settings
    return LoopConfig(limits=Limits.of(s), max_iterations=s.max_iterations, reproduce=s.reproduce, dry_run=s.dry_run,
                      budget=Budget(max_tokens=s.max_tokens, max_cost=s.max_cost, base_url=s.server_url),
                      around=around)


def request_config(settings: Settings, tree: Path | None = None, state_path: Path | None = None, *,
                   embed_budget: int | None = None) -> RequestConfig:
    """What building a request reads: the read gate of `tree` (the repository unless another) with the assistant's
    directories kept out, the test command, the budgets."""
    s = settings
    gate = Gate(tree or s.repo, (s.index_path, state_path or s.state_path, s.runs_dir))
    return RequestConfig(gate=gate, test_command=s.test_command, max_iterations=s.max_iterations,
                         context_tokens=s.context_tokens, instructions=s.instructions,
                         embed_budget=s.query_embed_budget if embed_budget is None else embed_budget,
                         first_test=framework(tree or s.repo).first_test)


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
