"""Command line: parse arguments → settings → build the parts → run → print. Known errors are one line."""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from code_assistant import console
from code_assistant.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, AssistantError, ConfigError, UsageError
from code_assistant.settings import DEFAULT_TEST_COMMAND, Settings, load_settings, repo_id


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _default(name: str) -> str:
    """A setting's default, for the help text: defined once, in Settings."""
    value = Settings.__dataclass_fields__[name].default
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=Path(sys.argv[0]).name, description="Index a repository, plan edits with a chat model, test, fix, "
                "and roll back byte for byte when the tests do not go green.")
    p.add_argument("--repo", required=True, help="the repository to work on")
    p.add_argument("--task", help="what to do, in plain words")
    p.add_argument("--test-command", help=f"test command, split like a shell (default: {DEFAULT_TEST_COMMAND})")
    p.add_argument("--index-path", help="where the index lives (default: ~/.cache/code-assistant/index)")
    p.add_argument("--max-iterations", type=int,
                   help=f"test/fix rounds before rolling back (default {_default('max_iterations')})")
    p.add_argument("--test-timeout", type=float,
                   help=f"seconds before a test run is killed (default {_default('test_timeout')})")
    p.add_argument("--model", help="chat model (default: $OPENAI_MODEL, then gpt-4o)")
    p.add_argument("--context-tokens", type=int,
                   help=f"token budget of the context (default {_default('context_tokens')})")
    p.add_argument("--context-window", type=int, metavar="N", help="the model's context window in tokens (default: "
                   "$OPENAI_CONTEXT_WINDOW, else what the server reports, else known models, else 8192)")
    p.add_argument("--request-timeout", type=float, metavar="S", help="seconds without a byte from the model "
                   "server (between two streamed tokens) before it is asked once more "
                   f"(default {_default('request_timeout')})")
    p.add_argument("--no-structured-output", action="store_true",
                   help="do not send the plan's JSON schema as response_format")
    p.add_argument("--context-only", action="store_true", help="index and show the context for --task; no model call")
    p.add_argument("--index-all", action="store_true",
                   help="embed every file now (same as `code-assistant index`); resumable, Ctrl-C keeps finished "
                   "batches. Without it a query embeds only what its top candidates lack")
    p.add_argument("--embed-budget", type=int, metavar="N",
                   help="chunks one query may have the model embed (default: 200 local, 2000 openai; "
                   "0: only what is already embedded)")
    p.add_argument("--ask", metavar="QUESTION", help="answer a question about the repository; never edits")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    g = p.add_argument_group("guardrails")
    g.add_argument("--max-changed-lines", type=int,
                   help=f"refuse a fix changing more lines (default {_default('max_changed_lines')})")
    g.add_argument("--max-plan-lines", type=int,
                   help=f"refuse a plan changing more lines (default {_default('max_plan_lines')})")
    g.add_argument("--max-files", type=int,
                   help=f"refuse an answer touching more files (default {_default('max_files')})")
    g.add_argument("--allow-test-edits", action="store_true", default=None, help="let the model change tests")
    g.add_argument("--max-cost", type=float, help="stop when the estimated cost passes this many dollars")
    g.add_argument("--max-tokens", type=int, help="stop when the run has used this many tokens")
    g.add_argument("--review", action="store_true", default=None, help="show each diff and apply it only after y")
    g.add_argument("--dry-run", action="store_true", default=None, help="plan and print the diff; write nothing")
    w = p.add_argument_group("git")
    w.add_argument("--branch", nargs="?", const="", metavar="NAME", help="work on a new branch (default name: "
                   "assistant/<task>-<time>)")
    w.add_argument("--worktree", action="store_true", help="work in a separate git worktree; your checkout stays as is")
    w.add_argument("--commit", action="store_true", help="commit the change when the tests pass")
    w.add_argument("--allow-dirty", action="store_true", help="with --commit: edit files that hold your pending "
                   "changes (they are left uncommitted)")
    w.add_argument("--keep-branch", action="store_true", help="keep the new branch when the run fails")
    r = p.add_argument_group("runs")
    r.add_argument("--log-dir", help="where run trajectories go (default: <index-path>/runs)")
    r.add_argument("--replay", metavar="FILE.jsonl", help="re-run a recorded trajectory's answers; no model calls")
    r.add_argument("--recover", action="store_true",
                   help="restore the repository from an interrupted run, stop its leftover test processes, and exit")
    r.add_argument("--no-stream", action="store_true", help="do not stream the model's answer to the terminal")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks")
    return p


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "openai", "chromadb", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.ERROR)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["index"]:  # `code-assistant index --repo PATH`: the whole repository, embedded
        argv = [*argv[1:], "--index-all"]
    verbose = "-v" in argv or "--verbose" in argv
    try:
        args = build_parser().parse_args(argv)
        _setup_logging(args.verbose)
        settings = load_settings(
            args.repo, task=args.task, test_command=args.test_command, index_path=args.index_path,
            max_iterations=args.max_iterations, test_timeout=args.test_timeout, model=args.model,
            context_tokens=args.context_tokens, context_window=args.context_window,
            request_timeout=args.request_timeout, structured_output=False if args.no_structured_output else None,
            max_changed_lines=args.max_changed_lines,
            max_plan_lines=args.max_plan_lines, max_files=args.max_files, allow_test_edits=args.allow_test_edits,
            max_cost=args.max_cost, max_tokens=args.max_tokens, log_dir=args.log_dir, review=args.review,
            dry_run=args.dry_run, stream=sys.stdout.isatty() and not args.no_stream and not args.json,
            verbose=args.verbose, embed_budget=args.embed_budget)
        if args.recover:
            return _recover(settings)
        if args.index_all:
            return _index_all(settings, args.json)
        if args.ask:
            return _ask(settings, args.ask, args.json)
        if not settings.task or not settings.task.strip():
            raise UsageError("--task is required (or use --ask, --recover)")
        if args.context_only:
            return _context_only(settings, args.json)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return _run(settings, args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI edge turns every error into one line
        return _report_error(exc, verbose)


def _report_error(exc: Exception, verbose: bool) -> int:
    """The one place an error becomes a line on stderr and an exit status."""
    if verbose and not isinstance(exc, UsageError):
        logging.getLogger(__name__).exception("failed")
    if isinstance(exc, AssistantError):
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(f"error: {type(exc).__name__}: {first}" + ("" if verbose else " (run with -v for details)"),
          file=sys.stderr)
    return EXIT_FAILED


def _build_indexer(settings: Settings):  # noqa: ANN202 - indexer.Indexer; imports stay lazy so errors are fast
    from code_assistant.index import embeddings, indexer, store

    client = _chat_client(settings) if settings.embedding_backend == "openai" else None
    embedder = embeddings.make_embedder(settings.embedding_backend, model=settings.embedding_model, client=client)
    chroma = store.open_client(settings.index_path)
    chunk_store = store.ChunkStore(chroma, store.collection_for(chroma, settings.repo, embedder.name))
    return indexer.Indexer(settings.repo, settings.index_path, embedder, chunk_store)


def _chat_client(settings: Settings):  # noqa: ANN202 - openai.OpenAI
    import openai

    return openai.OpenAI(api_key=_api_key(settings), base_url=settings.base_url)


def _chat_model(settings: Settings, schema: dict | None):  # noqa: ANN202 - model.chat.OpenAIChat
    """The chat seam with the model's context window: the setting, else the server's report, else known, else 8192."""
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.model.servers import resolve_window

    api_key = _api_key(settings)
    window = resolve_window(settings.context_window, settings.base_url, settings.model, api_key if settings.api_key
                            else None, load_timeout=settings.request_timeout)
    return OpenAIChat(settings.model, api_key=api_key, base_url=settings.base_url, timeout=settings.request_timeout,
                      max_retries=settings.max_retries, window=window, schema=schema)


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


def _context_only(settings: Settings, as_json: bool) -> int:
    from code_assistant.retrieve.context import build_context

    index, _ = _index(settings, quiet=as_json)
    context = build_context(index, settings.task or "", settings.context_tokens,
                            embed_budget=settings.query_embed_budget)
    if as_json:
        print(json.dumps({"files": [r.path for r in context.ranking], "tokens": context.tokens,
                          "context_files": context.paths, "chunks_embedded": context.embedded}))
        return EXIT_OK
    console.say(f"[Context: {len(context.files)} relevant files selected]")
    for f in context.files:
        console.say(f"  {f.path}  ({f.mode}, {f.tokens} tokens)")
    console.say(f"Total: {context.tokens} tokens of {context.budget}")
    if settings.verbose:
        for line in context.budget_log:
            console.say(f"  {line}")
    return EXIT_OK


def _index_all(settings: Settings, as_json: bool) -> int:
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


def _ask(settings: Settings, question: str, as_json: bool) -> int:
    from code_assistant import ask

    model = _chat_model(settings, schema=None)
    index, _ = _index(settings, quiet=as_json)
    response, context = ask.answer_question(index, model, question, settings,
                                            on_token=console.stream if settings.stream else None)
    if as_json:
        print(json.dumps({"answer": response.text, "files": context.paths,
                          "tokens": {"prompt": response.prompt_tokens, "completion": response.completion_tokens}}))
    elif settings.stream:
        console.say("")
    else:
        console.say(response.text)
    return EXIT_OK


def _recover(settings: Settings) -> int:
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.journal import RepoLock
    from code_assistant.verify.runner import reap_leftovers

    with RepoLock(settings.repo, settings.repo_state_dir):
        stopped = reap_leftovers(_running_tests(settings))
        restored = FileEditor.recover(settings.repo, settings.repo_state_dir)
    if stopped:
        console.say(f"[Recovered: stopped {stopped} leftover test process(es) of an interrupted run]")
    if restored is None:
        console.say("[Recover: nothing to restore]")
    else:
        console.say(f"[Recovered: restored {len(restored)} file(s) from an interrupted run]")
    return EXIT_OK


def _running_tests(settings: Settings) -> Path:
    """Where a running test command is named, so that a later run can stop it if this one is killed."""
    return settings.repo_state_dir / "running-tests"


def _run(settings: Settings, args: argparse.Namespace) -> int:
    import dataclasses

    from code_assistant import vcs
    from code_assistant.agent import Agent
    from code_assistant.edit.editor import FileEditor
    from code_assistant.edit.journal import RepoLock
    from code_assistant.edit.operations import ACTIONS
    from code_assistant.model.chat import ChatModel
    from code_assistant.model.prices import estimate_cost
    from code_assistant.model.structured import plan_schema
    from code_assistant.model.trajectory import ReplayModel, Trajectory, read_answers
    from code_assistant.verify.runner import TestRunner, reap_leftovers

    TestRunner(settings.test_command, cwd=settings.repo, timeout=settings.test_timeout).check()
    model: ChatModel
    if args.replay:
        replay = Path(args.replay)
        if not replay.is_file():
            raise ConfigError(f"replay file not found: {replay}")
        model = ReplayModel(read_answers(replay), name=f"replay:{replay.name}")
    else:
        _api_key(settings)  # a missing key is reported before anything else happens
    say = console.quiet if args.json else console.say
    workflow = vcs.Workflow(settings.repo, settings.task or "", branch=args.branch, worktree=args.worktree,
                                commit=args.commit, allow_dirty=args.allow_dirty, keep_branch=args.keep_branch,
                                worktrees_dir=settings.state_path / "worktrees" / repo_id(settings.repo))
    with RepoLock(settings.repo, settings.repo_state_dir):
        stopped = reap_leftovers(_running_tests(settings))
        if stopped:
            say(f"[Recovered: stopped {stopped} leftover test process(es) of an interrupted run]")
        restored = FileEditor.recover(settings.repo, settings.repo_state_dir)
        if restored is not None:
            say(f"[Recovered: restored {len(restored)} file(s) from an interrupted run]")
        if not args.replay:  # asks the server for its window: only once no other run holds the repository
            model = _chat_model(settings, plan_schema(ACTIONS) if settings.structured_output else None)
            say(f"[Model: {model.name}, context window {model.window.describe()}]")
        if settings.max_cost is not None and estimate_cost(model.name, 1, 1, settings.base_url) is None:
            say("[--max-cost: this model has no price (a local server or an unknown model); only --max-tokens caps "
                "the run]")
        work = dataclasses.replace(settings, repo=workflow.start())
        try:
            runner = TestRunner(work.test_command, cwd=work.repo, timeout=work.test_timeout,
                                running_file=_running_tests(settings))
            editor = FileEditor(work.repo, state_dir=work.repo_state_dir, forbidden=[work.index_path])
            trajectory = Trajectory(work.runs_dir, work.task or "task")
            with console.index_progress(enabled=not args.json) as progress:
                agent = Agent(work, model, _build_indexer(work), runner, editor, say=say, trajectory=trajectory,
                              review=console.review if work.review else None,
                              on_token=console.stream if work.stream else None, index_progress=progress,
                              pre_write=workflow.guard)
                result = agent.run(work.task or "")
        except BaseException:
            workflow.finish(False, [], 0)
            raise
        for line in workflow.finish(result.success and result.stop_reason != "dry_run", result.files_modified,
                                    result.iterations):
            say(line)
    if args.json:
        print(json.dumps(console.result_json(result)))
    else:
        console.summary(result)
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if result.success else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
