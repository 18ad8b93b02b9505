"""The command line: one table of commands. Each parses its arguments once, here, into the Settings every command
shares (a flag's destination is the Settings field it sets) and its own frozen options record; nothing below this
module sees argparse. Known errors are one line on stderr; tracebacks only with -v."""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from code_assistant import interrupts
from code_assistant.agent.stop import Stop
from code_assistant.cli import flags
from code_assistant.cli.flags import SETTING_FIELDS, Parser
from code_assistant.commands.ask import AskOptions, ask
from code_assistant.commands.context import ContextOptions, context
from code_assistant.commands.index import IndexOptions, index_all
from code_assistant.commands.recover import RecoverOptions, UndoOptions, recover, undo
from code_assistant.commands.run import RunOptions, run
from code_assistant.commands.session import SessionOptions, chat
from code_assistant.errors import (EXIT_FAILED, EXIT_INTERRUPTED, AssistantError, GaveUpWaiting, UsageError,
                                   attached_log)
from code_assistant.settings import DEFAULT_MODEL, Settings, load_settings


# ----- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One command: its help line, the flag groups it takes, its options record built from the parsed arguments,
    and what runs it."""

    name: str
    summary: str
    groups: tuple[Callable[[argparse.ArgumentParser], None], ...]
    options: Callable[[argparse.Namespace], object]
    execute: Callable[[Settings, Any], int]


def _task(args: argparse.Namespace) -> str:
    """The task: --task, or (the context command) the words after the options."""
    task = getattr(args, "task_flag", None) or args.task
    task = " ".join(task) if isinstance(task, list) else task
    if not task or not task.strip():
        raise UsageError("--task is required (or use chat, ask, context, index, recover, undo; see --help)")
    return task


def _run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(task=_task(args), json=args.json, branch=args.branch, worktree=args.worktree,
                      commit=args.commit, allow_dirty=args.allow_dirty, keep_branch=args.keep_branch,
                      replay=args.replay)


COMMANDS = {c.name: c for c in (
    Command("run", "plan, edit, test and fix until green, or roll back (the default command)",
            (flags.repository, flags.as_json, flags.model, flags.retrieval, flags.task, flags.run, flags.one_run,
             flags.session, flags.legacy), _run_options, run),
    Command("chat", "a session: task after task with the index warm, follow-ups, /undo (each stdin line a task "
                    "when not on a terminal)",
            (flags.repository, flags.as_json, flags.model, flags.retrieval, flags.run, flags.session),
            lambda a: SessionOptions(json=a.json, resume=a.resume), chat),
    Command("ask", "answer a question about the repository with file:line citations; never edits",
            (flags.repository, flags.as_json, flags.model, flags.retrieval, flags.question),
            lambda a: AskOptions(question=" ".join(a.question), json=a.json), ask),
    Command("context", "show the context a task would get; no model, no key, nothing changed",
            (flags.repository, flags.as_json, flags.retrieval, flags.context_task),
            lambda a: ContextOptions(task=_task(a), json=a.json), context),
    Command("index", "embed the whole repository now (resumable; Ctrl-C keeps finished batches)",
            (flags.repository, flags.as_json), lambda a: IndexOptions(json=a.json), index_all),
    Command("recover", "take an interrupted run's change out of the repository and stop its leftover tests",
            (flags.repository,), lambda a: RecoverOptions(), recover),
    Command("undo", "take back the last run that left changes; edits made since by anyone else stay",
            (flags.repository, flags.as_json), lambda a: UndoOptions(json=a.json), undo),
)}


def _legacy_switch(args: argparse.Namespace) -> tuple[Command, object]:
    """The default command's switches for the others (--ask, --context-only, --index-all, --recover)."""
    if args.recover:
        return COMMANDS["recover"], RecoverOptions()
    if args.index_all:
        return COMMANDS["index"], IndexOptions(json=args.json)
    if args.ask:
        return COMMANDS["ask"], AskOptions(question=args.ask, json=args.json)
    if args.context_only:
        return COMMANDS["context"], ContextOptions(task=_task(args), json=args.json)
    if not args.task and sys.stdin.isatty():  # `python main.py --repo PATH` on a terminal: a session
        return COMMANDS["chat"], SessionOptions(json=args.json, resume=args.resume)
    return COMMANDS["run"], _run_options(args)


def build_parser(name: str = "run") -> argparse.ArgumentParser:
    command = COMMANDS[name]
    prog = Path(sys.argv[0]).name + ("" if name == "run" else f" {name}")
    description = ("Index a repository, plan edits with a chat model, test, fix, and roll back byte for byte when "
                   "the tests do not go green." if name == "run" else command.summary[0].upper() + command.summary[1:])
    p = Parser(prog=prog, description=description, epilog=_epilog(Path(sys.argv[0]).name) if name == "run" else None)
    for group in command.groups:
        group(p)
    return p


def parse_arguments(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """The command's name (the first word when it names one, else the default) and its parsed arguments."""
    name = argv[0] if argv[:1] and argv[0] in COMMANDS else "run"
    return name, build_parser(name).parse_args(argv[1:] if argv[:1] == [name] else argv)


def parse(argv: list[str]) -> tuple[Command, Settings, object]:
    """The command line, once: the command, the Settings every command shares, the command's own options."""
    name, args = parse_arguments(argv)
    command, options = _legacy_switch(args) if name == "run" else (COMMANDS[name], COMMANDS[name].options(args))
    overrides = {key: value for key, value in vars(args).items()
                 if key in SETTING_FIELDS and key != "repo" and value is not None}
    streams = not getattr(args, "no_stream", True) and not getattr(args, "json", False)
    settings = load_settings(args.repo, **overrides, stream=streams and sys.stdout.isatty())
    return command, settings, options


def _epilog(prog: str) -> str:
    lines = "\n".join(f"  {prog} {c.name} --repo PATH\n      {c.summary}" for c in COMMANDS.values()
                      if c.name != "run")
    return f"""\
commands (each with its own --help; without one, the default command runs):
{lines}

the model (the environment, or a .env file in the current directory or the repository):
  OPENAI_API_KEY         the key (not needed for a local server when OPENAI_BASE_URL is set)
  OPENAI_BASE_URL        any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp), ending in /v1
  OPENAI_MODEL           the chat model (default: the one model a local server lists, else {DEFAULT_MODEL}; --model wins)
  OPENAI_CONTEXT_WINDOW  the model's context window in tokens (--context-window wins)
  EMBEDDING_BACKEND      local (default: a model shipped in a pip package, offline) or openai (the server's /embeddings)
  EMBEDDING_MODEL        the embedding model of the openai backend (default text-embedding-3-small)

exit status:
  0 done and green   1 failed (everything rolled back)   2 usage or configuration error (nothing touched)
  130 interrupted (rolled back: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT)"""


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "openai", "chromadb", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.ERROR)


def main(argv: list[str] | None = None, *, leaving: bool = False) -> int:
    """The command's exit status; `leaving`: the process exits right after (entry), so a signal that arrives once
    the command is done is ignored rather than handled by the handlers from before."""
    argv = sys.argv[1:] if argv is None else argv
    verbose = "-v" in argv or "--verbose" in argv
    as_json = "--json" in argv
    try:
        command, settings, options = parse(argv)
        _setup_logging(settings.verbose)
        with interrupts.installed(leaving=leaving):  # Ctrl-C, SIGTERM, SIGHUP, SIGQUIT: roll back, once; never cut short
            return command.execute(settings, options)
    except KeyboardInterrupt as exc:
        print("error: interrupted", file=sys.stderr)
        if as_json:
            _print_json({"stop_reason": Stop.INTERRUPTED, "message": "interrupted"}, EXIT_INTERRUPTED, exc)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI edge turns every error into one line
        return _report_error(exc, verbose, as_json)


def entry() -> None:
    """The process's entrance (main.py, the `code-assistant` script): the command, then its exit status; a signal
    that arrives while the process is only exiting changes nothing."""
    sys.exit(main(leaving=True))


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
    entry()
