"""Command line: parse arguments → settings → build the parts → run → print. Known errors are one line."""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

import config
from config import ConfigError, Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="main.py", description="Index a repository, plan edits with a chat model, test, fix, "
                "and roll back byte for byte when the tests do not go green.")
    p.add_argument("--repo", required=True, help="the repository to work on")
    p.add_argument("--task", help="what to do, in plain words (required unless --context-only/--recover)")
    p.add_argument("--test-command", default=None, help=f"test command, split like a shell (default: {config.DEFAULT_TEST_COMMAND})")
    p.add_argument("--index-path", default=None, help="where the index lives (default: ~/.cache/code-assistant/index)")
    p.add_argument("--max-iterations", type=int, default=None, help="test/fix rounds before rolling back (default 3)")
    p.add_argument("--test-timeout", type=float, default=None, help="seconds before a test run is killed (default 120)")
    p.add_argument("--model", default=None, help="chat model (default: $OPENAI_MODEL, then gpt-4o)")
    p.add_argument("--context-tokens", type=int, default=None, help="token budget of the context (default 12000)")
    p.add_argument("--context-only", action="store_true", help="index and print the context for --task; no model call")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--recover", action="store_true", help="restore the repository from an interrupted run and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks")
    return p


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "openai", "chromadb", "urllib3", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.ERROR)


def _say(line: str) -> None:
    print(line, flush=True)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = "-v" in argv or "--verbose" in argv
    try:
        args = build_parser().parse_args(argv)
        _setup_logging(args.verbose)
        settings = config.load_settings(
            args.repo, task=args.task, test_command=args.test_command, index_path=args.index_path,
            max_iterations=args.max_iterations, test_timeout=args.test_timeout, model=args.model,
            context_tokens=args.context_tokens, verbose=args.verbose)
        if args.recover:
            return _recover(settings)
        if not settings.task or not settings.task.strip():
            raise UsageError("--task is required")
        if args.context_only:
            return _context_only(settings, args.json)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return _run(settings)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the CLI edge turns every known error into one line
        return _report_error(exc, verbose)


def _report_error(exc: Exception, verbose: bool) -> int:
    from embeddings import EmbeddingError
    from file_editor import RepoLockedError
    from llm import ModelError
    from test_runner import TestCommandError

    if verbose:
        logging.getLogger(__name__).exception("failed")
    if isinstance(exc, (ConfigError, TestCommandError, RepoLockedError, EmbeddingError)):
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, ModelError):
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_FAILED)
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(f"error: {type(exc).__name__}: {first}" + ("" if verbose else " (run with -v for details)"),
          file=sys.stderr)
    return EXIT_FAILED


def _build_indexer(settings: Settings):  # noqa: ANN202 - returns indexer.Indexer; imports stay lazy for fast errors
    import embeddings
    import indexer
    import store

    client = None
    if settings.embedding_backend == "openai":
        import openai
        client = openai.OpenAI(api_key=settings.api_key or "unused", base_url=settings.base_url)
    embedder = embeddings.make_embedder(settings.embedding_backend, model=settings.embedding_model, client=client)
    chroma = store.open_client(settings.index_path)
    chunk_store = store.ChunkStore(chroma, store.collection_name(str(settings.repo), embedder.name))
    return indexer.Indexer(settings.repo, settings.index_path, embedder, chunk_store)


def _context_only(settings: Settings, as_json: bool) -> int:
    import context_builder

    idx = _build_indexer(settings)
    if not as_json:
        _say(f"[Indexing repository: {settings.repo}]")
    index, stats = idx.update(exclude=[settings.state_path])
    context = context_builder.build_context(index, settings.task or "", settings.context_tokens)
    if as_json:
        print(json.dumps({"files": [r.path for r in context.ranking], "tokens": context.tokens,
                          "context_files": context.paths}))
        return EXIT_OK
    _say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
    _say(f"[Context: {len(context.files)} relevant files selected]")
    for f in context.files:
        _say(f"  {f.path}  ({f.mode}, {f.tokens} tokens)")
    _say(f"Total: {context.tokens} tokens of {context.budget}")
    if settings.verbose:
        for line in context.budget_log:
            _say(f"  {line}")
    return EXIT_OK


def _recover(settings: Settings) -> int:
    from file_editor import FileEditor, RepoLock

    with RepoLock(settings.repo, settings.repo_state_dir):
        restored = FileEditor.recover(settings.repo, settings.repo_state_dir)
    if restored is None:
        _say("[Recover: nothing to restore]")
    else:
        _say(f"[Recovered: restored {len(restored)} file(s) from an interrupted run]")
    return EXIT_OK


def _run(settings: Settings) -> int:
    from agent import Agent
    from file_editor import FileEditor, RepoLock
    from llm import OpenAIChat
    from test_runner import TestRunner

    runner = TestRunner(settings.test_command, cwd=settings.repo, timeout=settings.test_timeout)
    runner.check()
    api_key = settings.api_key
    if not api_key:
        if not settings.base_url:
            raise ConfigError("OPENAI_API_KEY is not set (put it in the environment or a .env file; "
                              "for Ollama/vLLM/LM Studio set OPENAI_BASE_URL)")
        api_key = "not-needed"  # local servers accept any key
    model = OpenAIChat(settings.model, api_key=api_key, base_url=settings.base_url,
                       timeout=settings.request_timeout, max_retries=settings.max_retries)
    with RepoLock(settings.repo, settings.repo_state_dir):
        restored = FileEditor.recover(settings.repo, settings.repo_state_dir)
        if restored is not None:
            _say(f"[Recovered: restored {len(restored)} file(s) from an interrupted run]")
        editor = FileEditor(settings.repo, state_dir=settings.repo_state_dir, forbidden=[settings.index_path])
        agent = Agent(settings, model, _build_indexer(settings), runner, editor, say=_say)
        result = agent.run(settings.task or "")
    _print_summary(result)
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if result.success else EXIT_FAILED


def _print_summary(result) -> None:  # noqa: ANN001 - agent.RunResult
    bar = "=" * 60
    _say(bar)
    if result.success:
        _say(f"Result: SUCCESS ({result.stop_reason}, iteration {result.iterations})")
        _say("Modified files:" if result.files_modified else "No files were modified.")
        for path in result.files_modified:
            _say(f"  - {path}")
    else:
        _say(f"Result: FAILED ({result.stop_reason}{': ' + result.message if result.message else ''})")
        _say("All changes were rolled back; the repository is exactly as it was.")
    usage = result.usage
    if usage.get("calls"):
        _say(f"Model usage: {usage['calls']} call(s), {usage['prompt_tokens']} prompt + "
             f"{usage['completion_tokens']} completion tokens")
    _say(bar)


if __name__ == "__main__":
    sys.exit(main())
