"""The workspace: what every operation is given, opened once per process. A command of the command line opens one
and closes it when the command is done; a session keeps it between tasks — the chat model, the indexer and its
embedding model warm, its memory of earlier tasks — and holds the repository from its start to its end, so that
another run or session on the same repository is refused meanwhile, naming this process and that it is a session.

What is costly, or can fail, is opened when an operation first needs it: `context` needs no key and no model, `undo`
no index, `ask` no sandbox. Imports stay lazy for the same reason: a configuration error is reported before anything
heavy is loaded. Opened later is not decided later: the settings stay as loaded, the server a repository's .env names
is approved once (asked once), and each part — the test command and its sandbox (`tests`, verify/testing.py), the
model's tools (`tools`, tools/shelf.py), what a run's kit is built from (`kits`, agent/kit.py) — is made once and
reads the same whichever was asked for first. The one change is a person's: a session's /model (switch_model).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Self

from code_assistant import env_files
from code_assistant.display import Display
from code_assistant.errors import ConfigError
from code_assistant.memory import Memory
from code_assistant.settings import SMALL_MODEL_SAID, EditFormat, FixBy, Settings, approved_base_url, base_url_refusal
from code_assistant.waiting import counting_files, waiting

if TYPE_CHECKING:
    from code_assistant.agent.kit import Kits
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.index.indexer import Indexer, IndexStats, RepoIndex
    from code_assistant.model.chat import ChatModel, OpenAIChat, Usage
    from code_assistant.model.window import ContextWindow
    from code_assistant.verify.sandbox import Sandbox

logger = logging.getLogger(__name__)


SECRET_HISTORY_BYTES = 2 * 1024 * 1024  # of the secret files' git history, read for the values they held before


def secret_history(repo: Path, files: list[str]) -> str:
    """The lines the secret files had in git's history (`git log -p` shows them, and `git diff` their committed
    version), as one text: the values a file held before are masked as its values now are. Empty without git."""
    from code_assistant.vcs import try_git

    if not files or not (repo / ".git").exists():
        return ""
    log = try_git(repo, "log", "--all", "-p", "--format=", "--no-ext-diff", "--no-textconv", "--no-color", "--",
                  *files, timeout=20) or ""
    return "\n".join(line[1:] for line in log[:SECRET_HISTORY_BYTES].splitlines()
                     if line[:1] in "+-" and not line.startswith(("+++", "---")))


class Workspace:
    """One repository and what works on it. `memory`: a session's notes and pins (a command's is empty);
    `session`: the id its runs' journals carry, so that its undo and diff are its own (None: a one-shot command,
    whose undo takes the newest run of any)."""

    def __init__(self, settings: Settings, display: Display | None = None, *, memory: Memory | None = None,
                 memory_file: Path | None = None, session: str | None = None, model: ChatModel | None = None) -> None:
        from code_assistant.tools.shelf import Shelf
        from code_assistant.verify.testing import Testing

        self._settings = settings
        self.display = display or Display()
        self.memory = memory or Memory()
        self.memory_file = memory_file  # where a session keeps its memory (None: nowhere, a one-shot command)
        self.session = session
        self._usage: Usage | None = None  # every model call of the workspace's life (a session's /tokens)
        self.cost = 0.0
        self.last_task = self.memory.last_task
        self._stack = ExitStack()
        self._held = False
        self._model = model  # given (a test's), else opened on first use; a session's /model switches it
        self._named = settings.model, settings.model_named  # the model asked for: the settings', or /model's
        self._approval: Settings | None = None
        self._indexer: Indexer | None = None
        self._sandbox_said = False
        self._secret_files_held = False
        self._env_file = env_files.work_begins(settings.repo, settings.repo_state_dir)
        self.tests = Testing.of(settings, self._sandbox)  # the test command, its sandbox and runners
        # the model's tools over the repository; its MCP servers, started on first need, stopped at close
        self.tools = Shelf(settings, self.tests, self.quiet_index, self.display, self._stack.callback)

    @property
    def settings(self) -> Settings:
        """As loaded, never replaced: the server a repository's .env names is approved apart (_approved), and a
        session's /model is held apart (switch_model)."""
        return self._settings

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()
        self._held = False
        if env_files.work_ends(self.settings.repo, self.settings.repo_state_dir, self._env_file):
            self.say("[The repository's .env was written meanwhile (by a plan or a test): it is not read for settings "
                     "from now on]")
        self._env_file = env_files.file_digest(self.settings.repo / env_files.FILE)

    def say(self, line: str) -> None:
        self.display.say(line)

    # ----- the repository, held ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def holding(self, *, session: bool = False) -> Iterator[list[FileOutcome] | None]:
        """The repository's lock for the length of the block (nothing more to take when the workspace holds it for
        a session). Taking it first takes out what an interrupted run left (yielded; None: nothing was left)."""
        if self._held:
            yield None
            return
        from code_assistant.edit.journal import RepoLock

        with RepoLock(self.settings.repo, self.settings.repo_state_dir, session=session,
                      wait=self.display.say if self.settings.wait else None):
            self._held = True
            try:
                yield self._recover_interrupted()
            finally:
                self._held = False

    def hold(self) -> list[FileOutcome] | None:
        """Take the repository until the workspace closes (a session); what an interrupted run left is taken out."""
        return self._stack.enter_context(self.holding(session=True))

    def _recover_interrupted(self) -> list[FileOutcome] | None:
        """With the lock held: an interrupted run's test processes stopped, its change taken out of the files by the
        ownership rule (returned; None when no journal was left)."""
        from code_assistant.edit.editor import FileEditor
        from code_assistant.edit.ownership import Fate
        from code_assistant.verify.runner import reap_leftovers

        running = self.tests.running
        stopped = sum(reap_leftovers(path) for path in [running, *sorted(running.parent.glob(running.name + "-*"))])
        if stopped:
            self.say(f"[Recovered: stopped {stopped} leftover test process(es) of an interrupted run]")
        outcomes = FileEditor.recover(self.settings.repo, self.settings.repo_state_dir)
        if outcomes is not None:
            restored = sum(1 for o in outcomes if o.fate == Fate.RESTORED)
            self.say(f"[Recovered: restored {restored} file(s) from an interrupted run]")
            for outcome in outcomes:
                if outcome.fate != Fate.RESTORED:
                    self.say(f"[Recovered: {outcome.describe()}]")
        return outcomes

    # ----- the index --------------------------------------------------------------------------------------------
    @property
    def indexer(self) -> Indexer:
        if self._indexer is None:
            self._indexer = build_indexer(self._indexing())
        return self._indexer

    def _indexing(self) -> Settings:
        """The settings an indexer is built with: with the openai backend the embeddings go to the chat model's
        server, with its key (approved first)."""
        if self.settings.embedding_backend == "openai":
            self._api_key()
            return self._approved()
        return self.settings

    def index(self, indexer: Indexer | None = None, tree: Path | None = None,
              focus: str | None = None) -> tuple[RepoIndex, IndexStats]:
        """The repository's index (or `indexer`'s, of another working tree: a worktree), brought up to date (what
        changed since it was last read), said as it goes; with `focus` (a task), on a big tree not indexed yet, only
        as far as that task's answer needs, the rest in the background (Indexer.update)."""
        self.say(f"[Indexing repository: {tree or self.settings.repo}]")
        with waiting(self.display.status, "Indexing") as wait:
            repo_index, stats = (indexer or self.indexer).update(progress=counting_files(wait),
                                                                 exclude=[self.settings.state_path], focus=focus,
                                                                 background=focus is not None)
        pending = f"; {stats.pending} more being indexed in the background" if stats.pending else ""
        self.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols{pending}]")
        return repo_index, stats

    def quiet_index(self, focus: str | None = None) -> RepoIndex:
        """The index brought up to date without a word (a session's commands: the index is warm); with `focus`, as
        far as that task or question needs while a big tree's first index is pending (see index)."""
        return self.indexer.update(exclude=[self.settings.state_path], focus=focus, background=focus is not None)[0]

    # ----- the model ----------------------------------------------------------------------------------------------
    def _approved(self) -> Settings:
        """The settings a request to the model's server is made with: a server the repository's .env names is used
        only once a person approves it (asked here, on a terminal; else a ConfigError before anything is sent).
        Decided once a workspace; `settings` stay as loaded, so what any part reads does not depend on whether the
        question came before it."""
        if self._approval is None:
            self._approval = approved_base_url(self.settings, self.display.confirm)
        return self._approval

    def _api_key(self) -> str:
        """The key, once where it goes is settled (approved)."""
        return api_key(self._approved())

    @property
    def model(self) -> ChatModel:
        """The chat model runs ask for plans: opened on first use, with the header lines that name it."""
        if self._model is None:
            self._model = self._open_model()
            self._header(self._model)
        return self._model

    def switch_model(self, name: str) -> ChatModel:
        """A session's /model: `name` asked from now on, by runs and questions, and the window `context` reports is
        its (the one explicit change of what the workspace holds; every part built later reads it)."""
        self._model = self._open_model(name)
        self._named = name, True
        return self._model

    def _open_model(self, name: str | None = None) -> OpenAIChat:
        """The server checked (one that is not there is found before any work), then the chat model with its
        context window and the plan's schema. `name`: another model than the settings'."""
        from code_assistant.model.server_reports import check_server

        key = self._api_key()
        settings = self._approved()
        if name:
            settings = dataclasses.replace(settings, model=name, model_named=True)
        self.hold_secrets()
        check_server(settings.base_url, settings.api_key, named_by=settings.base_url_from)
        return run_model(settings, key)

    def hold_secrets(self) -> None:
        """From here on the assistant's key and the environment's secrets (what a test is not given) are masked in
        whatever reaches the model or a run log: a tool's result, an MCP server's among them, whatever the door."""
        from code_assistant import redact
        from code_assistant.verify.environment import without_secrets

        held = without_secrets(os.environ, self.settings.pass_env).held_back
        redact.hold_values([self.settings.api_key, *(os.environ.get(name) for name in held)])
        self._hold_secret_files()

    def _hold_secret_files(self) -> None:
        """Once a workspace: the values in the repository's secret files (the gate's table: .env files, credentials,
        keys) are masked like the environment's, so what the gate refuses to read reaches the model through no other
        door (`run cat .env`, a test that prints them, a diff)."""
        if self._secret_files_held:
            return
        from code_assistant import redact
        from code_assistant.gate import Gate

        self._secret_files_held = True
        files = Gate.of(self.settings).secret_texts()
        texts = [*files.values(), secret_history(self.settings.repo, list(files))]
        values = [value for text in texts for value in redact.file_values(text)]
        redact.hold_values(values)
        if files:
            logger.info("masking %d value(s) of %d secret file(s): %s", len(values), len(files), ", ".join(files))

    def _header(self, model: ChatModel) -> None:
        """The lines that say what a run will ask: the model and its window, the owner's instructions, a cost cap
        that cannot be kept."""
        from code_assistant.model.names import SMALL_BILLIONS, billions, shown
        from code_assistant.model.prices import estimate_cost
        from code_assistant.model.server_reports import gateway_info

        through = ", asked through the Responses API" if model.wire == "responses" else ""
        self.say(f"[Model: {shown(model.name)}, context window {model.window.describe()}{through}]")
        if line := self._instructions_line():
            self.say(line)
        s = self._approved()
        if not s.small_model and (size := billions(model.name)) is not None and size <= SMALL_BILLIONS:
            self.say(f"[{shown(model.name)} names {size:g}B parameters: a model this small may do better with "
                     f"--small-model ({SMALL_MODEL_SAID})]")
        if s.small_model:
            reproduce = {None: "when the suite is green", True: "on", False: "off"}[s.reproduce]
            edits = "SEARCH/REPLACE blocks" if s.edit_format == EditFormat.BLOCKS else "a JSON plan"
            fixes = "the plan sampled again" if s.fix_by == FixBy.SAMPLES else "the failures sent back"
            self.say(f"[--small-model: edits as {edits}, tools {s.tools}, reproduction test {reproduce}, a "
                     f"{s.context_tokens}-token context, after a failed iteration {fixes}, "
                     f"{s.max_iterations} iterations]")
        if s.max_cost is None or estimate_cost(model.name, 1, 1, s.base_url) is not None:
            return
        priced = gateway_info(s.base_url, model.name, s.api_key or None) if s.base_url else None
        if priced and priced[2] is not None and priced[3] is not None:
            self.say(f"[--max-cost: priced by the gateway (GET /model/info: ${priced[2]:.2f} in, ${priced[3]:.2f} out "
                     "per million tokens); the cap holds on the charge it reports with each answer (usage.cost)]")
        else:
            self.say("[--max-cost: this model has no price here (a local server or an unknown model): the cap holds "
                     "only if the server reports its charge (OpenRouter's and LiteLLM's usage.cost); --max-tokens "
                     "caps the run whatever the server says]")

    def _instructions_line(self) -> str | None:
        """The header's line naming the repository owner's instructions (None: there are none, or
        --no-instructions)."""
        from code_assistant.agent import instructions
        from code_assistant.gate import Gate

        if not self.settings.instructions:
            return None
        found = instructions.find(Gate.of(self.settings), self.settings.context_tokens // instructions.SHARE)
        return f"[Instructions: {found.describe()}]" if found else None

    @property
    def usage(self) -> Usage:
        """Every model call of the workspace's life. Made when first asked for: the chat seam's module imports the
        model client, which a command that asks no model (context, search, grep, read, symbol, index) never loads."""
        if self._usage is None:
            from code_assistant.model.chat import Usage

            self._usage = Usage()
        return self._usage

    def count(self, usage: Usage, cost: float | None) -> None:
        """A finished task's or answer's model usage, into the workspace's total."""
        self._usage = self.usage + usage
        self.cost += cost or 0.0

    # ----- the tests ----------------------------------------------------------------------------------------------
    def check_before_runs(self, *, needs_key: bool = True) -> None:
        """What can be checked before anything is touched or asked: the test command, the sandbox, the key (a
        ConfigError or TestCommandError, exit 2)."""
        self.tests.check()
        self.tests.sandbox  # noqa: B018 - resolved now: no sandbox to be had is an error before anything is touched
        if needs_key:
            self._api_key()  # a missing key is reported before anything else happens

    def _sandbox(self) -> Sandbox:
        """What the test command may write, read and reach (self.tests.sandbox resolves it once, on first need); no
        sandbox to be had (and no `--sandbox off`) is a ConfigError, raised before anything is touched. From here on
        the values of the variables it holds back, and the assistant's own key, are masked in everything sent to the
        model or written to a run log."""
        from code_assistant import redact
        from code_assistant.verify.sandbox import resolve

        s = self.settings
        sandbox = resolve(s.sandbox, s.sandbox_bwrap, writable=s.sandbox_writable,
                          protected=[s.index_path, s.state_path, s.runs_dir], network=s.network, shown=s.sandbox_show,
                          passed_env=s.pass_env)
        redact.hold_values([s.api_key, *(os.environ.get(name) for name in sandbox.held_back)])
        self._hold_secret_files()
        return sandbox

    def announce_sandbox(self) -> None:
        """The header's lines on the test command, when the repository named it (no --test-command), and on what it
        may do (once a workspace)."""
        if not self._sandbox_said:
            if self.settings.test_command_from:
                self.say(f"[Test command: {self.settings.test_command} ({self.settings.test_command_from}; "
                         f"--test-command to give another)]")
            self.say(f"[Sandbox: {self.tests.sandbox.describe()}]")
            self._sandbox_said = True

    # ----- what a run uses: handed to the one place its kit is built ---------------------------------------------
    @functools.cached_property
    def kits(self) -> Kits:
        """Where every kit of a task is built (agent/kit.py): handed, once, the settings, the test command and its
        sandbox, the repository's index said and quiet, a worktree's, the model's tools, the display, the session's
        memory and id."""
        from code_assistant.agent.kit import Kits

        return Kits(self.settings, self.tests, index=lambda focus: self.index(focus=focus)[0],
                    current_index=lambda focus: self.quiet_index(focus),
                    worktree=self._worktree_index, tools_for=self.tools.for_model, display=self.display,
                    memory=self.memory, session=self.session)

    def _worktree_index(self, tree: Path) -> tuple[Callable[[], RepoIndex], Callable[[], RepoIndex]]:
        """A worktree's index, with an indexer of its own: brought up to date said as it goes, and quietly."""
        indexer = build_indexer(self._indexing(), tree)
        return (lambda: self.index(indexer, tree)[0]), (lambda: _current(indexer, self.settings.state_path))

    # ----- the model's tools --------------------------------------------------------------------------------------
    def known_window(self) -> ContextWindow | None:
        """The window a run starts with that no server needs to be asked for: --context-window, or the one
        remembered for this server and the model asked for (a session's /model's); None when neither is known."""
        from code_assistant.model.remembered import FILE_NAME, remembered_window
        from code_assistant.model.window import ContextWindow as Window

        s = self.settings
        if s.context_window:
            return Window(tokens=s.context_window, source="--context-window")
        return remembered_window(s.state_path / FILE_NAME, s.server_url, *self._named) if s.server_url else None

    # ----- a session's memory -------------------------------------------------------------------------------------
    def save_memory(self) -> None:
        if self.memory_file is not None:
            self.memory.save(self.memory_file)

    def remember_undone(self, task: str, files: list[str]) -> None:
        self.memory.taken_back(task, files)
        self.save_memory()


def build_indexer(settings: Settings, tree: Path | None = None) -> Indexer:
    """The indexer of `settings.repo` (or of `tree`: a worktree of it), with the embedding model its settings name."""
    from code_assistant.index import embeddings, indexer, store

    tree = tree or settings.repo
    client = chat_client(settings) if settings.embedding_backend == "openai" else None
    embedder = embeddings.make_embedder(settings.embedding_backend, model=settings.embedding_model, client=client)
    chunk_store = store.LazyChunkStore(settings.index_path, tree, embedder.name)
    return indexer.Indexer(tree, settings.index_path, embedder, chunk_store)


def _current(indexer: Indexer, state_path: Path) -> RepoIndex:
    return indexer.update(exclude=[state_path])[0]


def api_key(settings: Settings) -> str:
    """The key to send: the setting, any word for a local server, else a ConfigError that says where to put it (or
    that the server the repository's .env names is not approved yet: the workspace asks, Workspace._approved)."""
    if settings.env_base_url is not None:
        raise base_url_refusal(settings.env_base_url)
    if settings.api_key:
        return settings.api_key
    if settings.base_url:
        return "not-needed"  # Ollama, vLLM and LM Studio accept any key
    raise ConfigError("OPENAI_API_KEY is not set (put it in the environment or a .env file; "
                      "for Ollama/vLLM/LM Studio set OPENAI_BASE_URL)")


def chat_client(settings: Settings):  # -> openai.OpenAI, imported only when needed
    """The embeddings backend's client: the same server and key as the chat model's."""
    import openai

    return openai.OpenAI(api_key=api_key(settings), base_url=settings.base_url)


def chat_model(settings: Settings, key: str, schema: dict | None) -> OpenAIChat:
    """The chat seam with the model's context window: the setting, else the server's report, else known, else 8192."""
    from code_assistant.model.accepts import Accepts
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.model.server_reports import catalogued, model_name, output_limit, resolve_window

    own_key = key if settings.api_key else None
    name = model_name(settings.model, settings.model_named, settings.base_url, own_key)
    window = resolve_window(settings.context_window, settings.base_url, name, own_key,
                            load_timeout=settings.request_timeout, state=settings.state_path)
    accepts = Accepts.known(catalogued(settings.base_url, name), settings.wire)  # the rest: learned from refusals
    accepts.max_output = accepts.max_output or output_limit(settings.base_url, name, own_key)  # a gateway's word
    return OpenAIChat(name, api_key=key, base_url=settings.base_url, timeout=settings.request_timeout,
                      max_retries=settings.max_retries, window=window, schema=schema, accepts=accepts,
                      reasoning_effort=settings.reasoning_effort)


def run_model(settings: Settings, key: str) -> OpenAIChat:
    """The chat model a run asks for plans: with the plan's JSON schema unless structured output is off or the
    model writes SEARCH/REPLACE blocks."""
    from code_assistant.edit.edits import PLAN_ACTIONS
    from code_assistant.model.structured import plan_schema

    json_plan = settings.structured_output and settings.edit_format == EditFormat.JSON  # blocks are no JSON
    return chat_model(settings, key, plan_schema(PLAN_ACTIONS) if json_plan else None)
