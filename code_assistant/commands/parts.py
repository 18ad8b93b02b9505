"""What several commands build from the settings: the indexer, the chat model (with its context window), the
server check, the index brought up to date, the sandbox, and recovery of an interrupted run. Imports stay lazy, so
that a configuration error is reported before anything heavy is loaded."""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import console
from code_assistant.errors import ConfigError
from code_assistant.settings import Settings

if TYPE_CHECKING:
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.index.indexer import Indexer, IndexStats, RepoIndex
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.verify.sandbox import Sandbox

logger = logging.getLogger(__name__)


def build_indexer(settings: Settings) -> Indexer:
    from code_assistant.index import embeddings, indexer, store

    client = chat_client(settings) if settings.embedding_backend == "openai" else None
    embedder = embeddings.make_embedder(settings.embedding_backend, model=settings.embedding_model, client=client)
    chunk_store = store.LazyChunkStore(settings.index_path, settings.repo, embedder.name)
    return indexer.Indexer(settings.repo, settings.index_path, embedder, chunk_store)


def chat_client(settings: Settings):  # noqa: ANN201 - openai.OpenAI, imported only when needed
    import openai

    return openai.OpenAI(api_key=api_key(settings), base_url=settings.base_url)


def chat_model(settings: Settings, schema: dict | None) -> OpenAIChat:
    """The chat seam with the model's context window: the setting, else the server's report, else known, else 8192."""
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.model.server_reports import model_name, resolve_window

    key = api_key(settings)
    name = model_name(settings.model, settings.model_named, settings.base_url, key if settings.api_key else None)
    window = resolve_window(settings.context_window, settings.base_url, name, key if settings.api_key else None,
                            load_timeout=settings.request_timeout)
    return OpenAIChat(name, api_key=key, base_url=settings.base_url, timeout=settings.request_timeout,
                      max_retries=settings.max_retries, window=window, schema=schema)


def run_model(settings: Settings) -> OpenAIChat:
    """The chat model a run asks for plans: with the plan's JSON schema unless structured output is off."""
    from code_assistant.edit.operations import PLAN_ACTIONS
    from code_assistant.model.structured import plan_schema

    return chat_model(settings, plan_schema(PLAN_ACTIONS) if settings.structured_output else None)


def instructions_line(settings: Settings) -> str | None:
    """The header's line naming the repository owner's instructions (None: there are none, or --no-instructions)."""
    from code_assistant.agent import instructions

    if not settings.instructions:
        return None
    found = instructions.find(settings.repo, settings.context_tokens // instructions.SHARE)
    return f"[Instructions: {found.describe()}]" if found else None


def check_server(settings: Settings) -> None:
    from code_assistant.model.server_reports import check_server as check

    api_key(settings)
    check(settings.base_url, settings.api_key)


def api_key(settings: Settings) -> str:
    if settings.api_key:
        return settings.api_key
    if settings.base_url:
        return "not-needed"  # Ollama, vLLM and LM Studio accept any key
    raise ConfigError("OPENAI_API_KEY is not set (put it in the environment or a .env file; "
                      "for Ollama/vLLM/LM Studio set OPENAI_BASE_URL)")


def index(settings: Settings, quiet: bool) -> tuple[RepoIndex, IndexStats]:
    """The repository's index, brought up to date (what changed since it was last read)."""
    indexer = build_indexer(settings)
    if not quiet:
        console.say(f"[Indexing repository: {settings.repo}]")
    with console.index_progress(enabled=not quiet) as progress:
        repo_index, stats = indexer.update(progress=progress, exclude=[settings.state_path])
    if not quiet:
        console.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
    return repo_index, stats


def sandbox(settings: Settings) -> Sandbox:
    """What the test command may write, read and reach; no sandbox to be had (and no `--sandbox off`) is a
    ConfigError, raised before anything is touched. The values of the variables it holds back, and the assistant's
    own key, are masked from here on in everything sent to the model or written to a run log."""
    import os

    from code_assistant import redact
    from code_assistant.verify.sandbox import resolve

    found = resolve(settings.sandbox, settings.sandbox_bwrap, writable=settings.sandbox_writable,
                    protected=[settings.index_path, settings.state_path, settings.runs_dir],
                    network=settings.network, shown=settings.sandbox_show, passed_env=settings.pass_env)
    redact.hold_values([settings.api_key, *(os.environ.get(name) for name in found.held_back)])
    return found


def running_tests(settings: Settings) -> Path:
    """Where a running test command is named, so that a later run can stop it if this one is killed."""
    return settings.repo_state_dir / "running-tests"


def recover_interrupted(settings: Settings, say: Callable[[str], None]) -> list[FileOutcome] | None:
    """What an interrupted run left behind (with the repository's lock held): its test processes stopped, its
    change taken out of the files by the ownership rule (returned; None when no journal was left)."""
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.ownership import Fate
    from code_assistant.verify.runner import reap_leftovers

    running = running_tests(settings)
    stopped = sum(reap_leftovers(path) for path in [running, *sorted(running.parent.glob(running.name + "-*"))])
    if stopped:
        say(f"[Recovered: stopped {stopped} leftover test process(es) of an interrupted run]")
    outcomes = FileEditor.recover(settings.repo, settings.repo_state_dir)
    if outcomes is not None:
        restored = sum(1 for o in outcomes if o.fate == Fate.RESTORED)
        say(f"[Recovered: restored {restored} file(s) from an interrupted run]")
        for outcome in outcomes:
            if outcome.fate != Fate.RESTORED:
                say(f"[Recovered: {outcome.describe()}]")
    return outcomes
