"""Command line: parse arguments → settings → build the parts → run → print. Known errors are one line."""
from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
from pathlib import Path

from code_assistant import commands
from code_assistant.errors import (EXIT_FAILED, EXIT_INTERRUPTED, AssistantError, GaveUpWaiting, UsageError,
                                   attached_log)
from code_assistant.settings import DEFAULT_TEST_COMMAND, SANDBOX_MODES, Settings, load_settings


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _default(name: str) -> str:
    """A setting's default, for the help text: defined once, in Settings."""
    value = Settings.__dataclass_fields__[name].default
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_parser() -> argparse.ArgumentParser:
    prog = Path(sys.argv[0]).name
    p = _Parser(prog=prog, description="Index a repository, plan edits with a chat model, test, fix, "
                "and roll back byte for byte when the tests do not go green.",
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_epilog(prog))
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
                   "server between two tokens (before the first: plus the time to read the prompt) before it is given "
                   f"up on (default {_default('request_timeout')})")
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
    g.add_argument("--sandbox", choices=SANDBOX_MODES, help="what the test command may write: off (anything), write "
                   "(the repository, /tmp and toolchain caches), strict (that, no network, HOME hidden); "
                   f"default {_default('sandbox')} where bubblewrap works ($CODE_ASSISTANT_SANDBOX)")
    v = p.add_argument_group("success that means the task is done")
    v.add_argument("--reproduce", action="store_true", default=None,
                   help="first ask for a test that fails before the fix (default: when the suite is green)")
    v.add_argument("--no-reproduce", dest="reproduce", action="store_false", help="no reproduction test")
    v.add_argument("--candidates", type=int, metavar="N",
                   help="N independent attempts in scratch copies, in parallel; the best passing one is applied "
                   "(default 1)")
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


def _epilog(prog: str) -> str:
    return f"""\
subcommand:
  {prog} index --repo PATH      embed the whole repository now (resumable; same as --index-all)

the model (the environment, or a .env file in the current directory or the repository):
  OPENAI_API_KEY         the key (not needed for a local server when OPENAI_BASE_URL is set)
  OPENAI_BASE_URL        any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp)
  OPENAI_MODEL           the chat model (default gpt-4o; --model wins)
  OPENAI_CONTEXT_WINDOW  the model's context window in tokens (--context-window wins)

exit status:
  0 done and green   1 failed (everything rolled back)   2 usage or configuration error (nothing touched)
  130 interrupted (rolled back)"""


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
    as_json = "--json" in argv
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
            verbose=args.verbose, embed_budget=args.embed_budget, reproduce=args.reproduce,
            candidates=args.candidates, sandbox=args.sandbox)
        if args.recover:
            return commands.recover(settings)
        if args.index_all:
            return commands.index_all(settings, args.json)
        if args.ask:
            return commands.ask(settings, args.ask, args.json)
        if not settings.task or not settings.task.strip():
            raise UsageError("--task is required (or use --ask, --recover)")
        if args.context_only:
            return commands.context_only(settings, args.json)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return commands.run(settings, args)
    except KeyboardInterrupt as exc:
        print("error: interrupted", file=sys.stderr)
        if as_json:
            _print_json({"stop_reason": "interrupted", "message": "interrupted"}, EXIT_INTERRUPTED, exc)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI edge turns every error into one line
        return _report_error(exc, verbose, as_json)


def _report_error(exc: Exception, verbose: bool, as_json: bool = False) -> int:
    """The one place an error becomes a line on stderr and an exit status (and, with --json, the JSON object)."""
    if verbose and not isinstance(exc, UsageError):
        logging.getLogger(__name__).exception("failed")
    if isinstance(exc, AssistantError):
        message, code, kind = str(exc), exc.exit_code, _snake(type(exc).__name__)
        print(f"[{message}]" if isinstance(exc, GaveUpWaiting) else f"error: {message}", file=sys.stderr)
    else:
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        code, kind = EXIT_FAILED, "internal_error"
        print(f"error: {message}" + ("" if verbose else " (run with -v for details)"), file=sys.stderr)
    if as_json:
        _print_json({"error": kind, "message": message}, code, exc)
    return code


def _print_json(fields: dict[str, object], exit_code: int, exc: BaseException) -> None:
    """--json promises one object on stdout whatever happens: on an error, what it was and the run log if any."""
    print(json.dumps({"success": False, **fields, "exit_code": exit_code, "log": attached_log(exc)}), flush=True)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


if __name__ == "__main__":
    sys.exit(main())
