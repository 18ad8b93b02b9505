"""The commands behind the command line: index and show a context, answer a question, embed everything, recover,
and run the agent. Each builds its parts from the settings, does its one thing and prints what a person sees."""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import console
from code_assistant.agent.stop import Stop
from code_assistant.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, ConfigError, attach_log
from code_assistant.settings import Settings, repo_id

if TYPE_CHECKING:
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.verify.sandbox import Sandbox

logger = logging.getLogger(__name__)


def _build_indexer(settings: Settings):  # noqa: ANN202 - indexer.Indexer; imports stay lazy so errors are fast
    from code_assistant.index import embeddings, indexer, store

    client = _chat_client(settings) if settings.embedding_backend == "openai" else None
    embedder = embeddings.make_embedder(settings.embedding_backend, model=settings.embedding_model, client=client)
    chunk_store = store.LazyChunkStore(settings.index_path, settings.repo, embedder.name)
    return indexer.Indexer(settings.repo, settings.index_path, embedder, chunk_store)


def _chat_client(settings: Settings):  # noqa: ANN202 - openai.OpenAI
    import openai

    return openai.OpenAI(api_key=_api_key(settings), base_url=settings.base_url)


def _chat_model(settings: Settings, schema: dict | None):  # noqa: ANN202 - model.chat.OpenAIChat
    """The chat seam with the model's context window: the setting, else the server's report, else known, else 8192."""
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.model.servers import model_name, resolve_window

    api_key = _api_key(settings)
    name = model_name(settings.model, settings.model_named, settings.base_url, api_key if settings.api_key else None)
    window = resolve_window(settings.context_window, settings.base_url, name, api_key if settings.api_key
                            else None, load_timeout=settings.request_timeout)
    return OpenAIChat(name, api_key=api_key, base_url=settings.base_url, timeout=settings.request_timeout,
                      max_retries=settings.max_retries, window=window, schema=schema)


def _check_server(settings: Settings) -> None:
    from code_assistant.model.servers import check_server

    _api_key(settings)
    check_server(settings.base_url, settings.api_key)


def _api_key(settings: Settings) -> str:
    if settings.api_key:
        return settings.api_key
    if settings.base_url:
        return "not-needed"  # Ollama, vLLM and LM Studio accept any key
    raise ConfigError("OPENAI_API_KEY is not set (put it in the environment or a .env file; "
                      "for Ollama/vLLM/LM Studio set OPENAI_BASE_URL)")


def _index(settings: Settings, quiet: bool):  # noqa: ANN202 - (RepoIndex, IndexStats)
    idx = _build_indexer(settings)
    if not quiet:
        console.say(f"[Indexing repository: {settings.repo}]")
    with console.index_progress(enabled=not quiet) as progress:
        index, stats = idx.update(progress=progress, exclude=[settings.state_path])
    if not quiet:
        console.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
    return index, stats


def context_only(settings: Settings, as_json: bool) -> int:
    from code_assistant.retrieve.context import build_context

    index, _ = _index(settings, quiet=as_json)
    context = build_context(index, settings.task or "", settings.context_tokens,
                            embed_budget=settings.query_embed_budget)
    if as_json:
        print(json.dumps({"files": [r.path for r in context.ranking], "tokens": context.tokens,
                          "context_files": context.paths, "map_files": context.map,
                          "listed_files": context.listed,
                          "chunks_embedded": context.embedded}))
        return EXIT_OK
    console.say(context.render() or "(no files indexed)")  # what the model would be shown
    console.say("")
    console.say(f"[Context: {len(context.files)} relevant files selected]")
    for f in context.files:
        console.say(f"  {f.path}  ({f.mode}, {f.tokens} tokens)")
    more = [*([f"a map of {len(context.map)} more files (a line each)"] if context.map else []),
            *([f"{len(context.listed)} more paths"] if context.listed else [])]
    if more:
        console.say(f"  and {' and '.join(more)} (the model may ask to read one)")
    console.say(f"Total: {context.tokens} tokens of {context.budget}")
    if settings.verbose:
        for line in context.budget_log:
            console.say(f"  {line}")
    return EXIT_OK


def index_all(settings: Settings, as_json: bool) -> int:
    """Index, then embed every file that lacks vectors, with a progress bar; an interrupt keeps finished batches."""
    index, _ = _index(settings, quiet=as_json)
    from code_assistant.index.vectors import FillReport

    missing = index.vectors.missing()
    if not as_json:
        console.say(f"[Embedding: {len(missing)} of {len(index.files)} files lack vectors]")
    report, interrupted = FillReport(), False
    with console.embed_progress(len(missing)) as progress:
        try:
            index.vectors.fill(missing, budget=None, progress=progress, report=report)
        except KeyboardInterrupt:
            interrupted = True  # every finished batch is stored: the next run continues from there
    done, total = index.db.vector_counts()
    if as_json:
        print(json.dumps({"files": total, "files_embedded": done, "chunks": report.chunks,
                          "chunks_embedded": report.embedded, "chunks_reused": report.reused,
                          "chunks_stored": index.chunks.count(), "seconds": round(report.seconds, 2),
                          "interrupted": interrupted}))
    else:
        rate = report.embedded / report.seconds if report.seconds else 0.0
        console.say(f"[{'Interrupted' if interrupted else 'Embedded'}: {report.embedded} chunks embedded "
                    f"({report.reused} reused) in {report.seconds:.1f} s, {rate:.1f} chunks/s; {done} of {total} "
                    f"files complete{'; run it again to continue' if interrupted else ''}]")
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def ask(settings: Settings, question: str, as_json: bool) -> int:
    from code_assistant.agent.question import answer_question

    _check_server(settings)
    model = _chat_model(settings, schema=None)
    say = console.quiet if as_json else console.say
    say(f"[Model: {model.name}, context window {model.window.describe()}]")
    index, _ = _index(settings, quiet=as_json)
    response, context = answer_question(index, model, question, settings,
                                        on_token=console.stream if settings.stream else None, say=say)
    if as_json:
        print(json.dumps({"answer": response.text, "files": context.paths, "tokens": console.usage_json(model.usage)}))
    elif not settings.stream:
        console.say(response.text)
    console.end_stream()
    return EXIT_OK


def recover(settings: Settings) -> int:
    from code_assistant.edit.journal import RepoLock

    with RepoLock(settings.repo, settings.repo_state_dir):
        if _recover_interrupted(settings, console.say) is None:
            console.say("[Recover: nothing to restore]")
    return EXIT_OK


def _recover_interrupted(settings: Settings, say: Callable[[str], None]) -> list[FileOutcome] | None:
    """What an interrupted run left behind (with the repository's lock held): its test processes stopped, its
    change taken out of the files by the ownership rule (returned; None when no journal was left)."""
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.ownership import Fate

    stopped = _reap(settings)
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


def undo(settings: Settings, as_json: bool) -> int:
    """Take back the last run that left changes (after recovering an interrupted one): its lines go, what anyone
    else wrote since stays; a file that cannot be separated refuses the whole undo (history.UndoError, exit 2)."""
    from code_assistant.edit.history import undo_last
    from code_assistant.edit.journal import RepoLock

    say = console.quiet if as_json else console.say
    with RepoLock(settings.repo, settings.repo_state_dir):
        _recover_interrupted(settings, say)
        undone = undo_last(settings.repo, settings.repo_state_dir)
    if as_json:
        print(json.dumps({"success": True, "undone": undone.run, "taken_back": console.taken_back_json(undone.outcomes),
                          "reverted_commit": undone.reverted, "revert_commit": undone.revert_commit}))
    elif undone.reverted:
        console.say(f"[Undo: the run's commit {undone.reverted[:12]} reverted by a new commit {undone.revert_commit}]")
    else:
        console.say(f"[Undo: took back run {undone.run}]")
        console.taken_back(undone.outcomes, "taken back")
    return EXIT_OK


def _reap(settings: Settings) -> int:
    """Stop the test processes a killed run left behind: its own and its candidates' (running-tests-N)."""
    from code_assistant.verify.runner import reap_leftovers

    running = _running_tests(settings)
    return sum(reap_leftovers(path) for path in [running, *sorted(running.parent.glob(running.name + "-*"))])


def _running_tests(settings: Settings) -> Path:
    """Where a running test command is named, so that a later run can stop it if this one is killed."""
    return settings.repo_state_dir / "running-tests"


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Check what can be checked before anything is touched, recover an interrupted run, run the agent (or best of
    N) under the git workflow, print the result."""
    from code_assistant import vcs
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.journal import RepoLock
    from code_assistant.model.prices import estimate_cost
    from code_assistant.model.trajectory import Trajectory
    from code_assistant.verify.runner import TestRunner

    TestRunner(settings.test_command, cwd=settings.repo, timeout=settings.test_timeout).check()
    sandbox = _sandbox(settings)
    replay = _replay_model(settings, args)
    if replay is None:
        _api_key(settings)  # a missing key is reported before anything else happens
    say = console.quiet if args.json else console.say
    workflow = vcs.Workflow(settings.repo, settings.task or "", branch=args.branch, worktree=args.worktree,
                            commit=args.commit, allow_dirty=args.allow_dirty, keep_branch=args.keep_branch,
                            worktrees_dir=settings.state_path / "worktrees" / repo_id(settings.repo))
    with RepoLock(settings.repo, settings.repo_state_dir):  # another run on this repository: refused, nothing asked
        if replay is None:
            _check_server(settings)  # a server that is not there is found before any work
        _recover_interrupted(settings, say)
        model = replay or _run_model(settings)  # asks the server for its window: once no other run holds the repo
        if replay is None:
            say(f"[Model: {model.name}, context window {model.window.describe()}]")
        if settings.max_cost is not None and estimate_cost(model.name, 1, 1, settings.base_url) is None:
            say("[--max-cost: this model has no price (a local server or an unknown model); only --max-tokens caps "
                "the run]")
        say(f"[Sandbox: {sandbox.describe()}]")
        work = dataclasses.replace(settings, repo=workflow.start())
        trajectory = Trajectory(work.runs_dir, work.task or "task")
        editor = FileEditor(work.repo, state_dir=work.repo_state_dir, forbidden=[work.index_path],
                            originals=trajectory.path.with_suffix(".originals"))
        try:
            result = _run_agent(work, model, settings, args, say, workflow.guard, trajectory, editor, sandbox)
        except BaseException as exc:
            attach_log(exc, str(trajectory.path))
            workflow.finish(False, [], 0)
            raise
        for line in workflow.finish(result.success and result.stop_reason != Stop.DRY_RUN, result.files_modified,
                                    result.iterations):
            say(line)
        if workflow.committed:
            editor.record_commit(workflow.committed)
    if args.json:
        print(json.dumps({**console.result_json(result), "sandbox": sandbox.record()}))
    else:
        console.summary(result)
    if result.stop_reason == Stop.INTERRUPTED:
        return EXIT_INTERRUPTED
    return EXIT_OK if result.success else EXIT_FAILED


def _sandbox(settings: Settings) -> Sandbox:
    """What the test command may write; `strict` where no sandbox can be had is a ConfigError, raised before
    anything is touched."""
    from code_assistant.verify.sandbox import resolve

    return resolve(settings.sandbox, settings.sandbox_bwrap, writable=settings.sandbox_writable,
                   protected=[settings.index_path, settings.state_path, settings.runs_dir])


def _replay_model(settings: Settings, args: argparse.Namespace):  # noqa: ANN202 - ReplayModel | None
    """--replay: a recorded run's answers stand in for the model (None: ask the model)."""
    if not args.replay:
        return None
    from code_assistant.model.trajectory import ReplayModel, read_answers

    if settings.candidates > 1:
        raise ConfigError("--replay repeats one recorded attempt; it cannot be combined with --candidates")
    replay = Path(args.replay)
    if not replay.is_file():
        raise ConfigError(f"replay file not found: {replay}")
    return ReplayModel(read_answers(replay), name=f"replay:{replay.name}")


def _run_model(settings: Settings):  # noqa: ANN202 - model.chat.OpenAIChat
    from code_assistant.edit.operations import PLAN_ACTIONS
    from code_assistant.model.structured import plan_schema

    return _chat_model(settings, plan_schema(PLAN_ACTIONS) if settings.structured_output else None)


def _run_agent(work: Settings, model, settings: Settings, args: argparse.Namespace,  # noqa: ANN001, ANN202
               say: Callable[[str], None], pre_write: Callable[[list[str]], None], trajectory,  # noqa: ANN001
               editor: FileEditor, sandbox: Sandbox | None = None):
    """The agent (or best of N) on the working tree `work` (the repository, a branch of it, or a worktree); its
    test runs confined by `sandbox`."""
    from code_assistant.agent.loop import Agent
    from code_assistant.verify.runner import TestRunner

    runner = TestRunner(work.test_command, cwd=work.repo, timeout=work.test_timeout,
                        running_file=_running_tests(settings), sandbox=sandbox)
    with console.index_progress(enabled=not args.json) as progress:
        agent = Agent(work, model, _build_indexer(work), runner, editor, say=say, trajectory=trajectory,
                      review=console.review if work.review else None,
                      on_token=console.stream if work.stream else None, index_progress=progress,
                      pre_write=pre_write)
        if work.candidates <= 1:
            return agent.run(work.task or "")
        from code_assistant.agent.best_of import BestOf, candidate_model

        return BestOf(agent, lambda number: candidate_model(model, number), work.candidates).run(work.task or "")
