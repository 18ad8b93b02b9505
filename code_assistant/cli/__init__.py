"""The command line door: it parses its subcommands — the operations of the table (operations/) that the command
line reaches, and `chat`, the session door — into the Settings every command shares (a flag's destination is the
Settings field it sets) and the operation's own frozen options record; nothing below this package sees argparse.
Then it opens a workspace, executes the operation and renders its outcome, as text or (--json) as one object. Known
errors are one line on stderr; tracebacks only with -v."""
from __future__ import annotations

import argparse
import difflib
import logging
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from code_assistant import console, interrupts
from code_assistant.cli import evaluate, flags, mcp
from code_assistant.cli.flags import SETTING_FIELDS, Parser
from code_assistant.console import render
from code_assistant.errors import EXIT_OK, UsageError
from code_assistant.operations import OPERATIONS, Door, reached_from
from code_assistant.operations.options import (ApplyOptions, AskOptions, ContextOptions, DiffOptions, IndexOptions,
                                               RecoverOptions, RunOptions, TestOptions, ToolOptions, UndoOptions)
from code_assistant.session import SessionOptions
from code_assistant.settings import DEFAULT_MODEL, Settings, load_settings

CHAT = "chat"
MCP = "mcp"
EVAL = "eval"


# ----- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One subcommand: an operation of the table (or `chat`, the session door), the flag groups it takes, and its
    options record built from the parsed arguments."""

    name: str
    summary: str
    groups: tuple[Callable[[argparse.ArgumentParser], None], ...]
    options: Callable[[argparse.Namespace], object]


@dataclass(frozen=True)
class Parsed:
    """The command line, read once: the command, the settings, its options, and how the door shows things."""

    command: Command
    settings: Settings
    options: object
    as_json: bool = False
    streams: bool = False  # the model's answers are shown as they come (a terminal, neither --json nor --no-stream)


def _task(args: argparse.Namespace) -> str:
    """The task: --task, or (the context command) the words after the options."""
    task = getattr(args, "task_flag", None) or args.task
    task = " ".join(task) if isinstance(task, list) else task
    if not task or not task.strip():
        raise UsageError("--task is required (or use chat, ask, context, index, recover, undo; see --help)")
    return task


def _plan_text(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"apply: cannot read the plan {path}: {exc.strerror or exc}") from None


def _run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(task=_task(args), branch=args.branch, worktree=args.worktree, commit=args.commit,
                      allow_dirty=args.allow_dirty, keep_branch=args.keep_branch, replay=args.replay)


_RUN_GROUPS = (flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, flags.task, flags.run,
               flags.one_run, flags.session, flags.legacy)
# How each operation the command line reaches is parsed (its summary is the table's).
_PARSERS: dict[str, tuple[tuple[Callable[[argparse.ArgumentParser], None], ...],
                          Callable[[argparse.Namespace], object]]] = {
    "run": (_RUN_GROUPS, _run_options),
    "ask": ((flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, flags.question),
            lambda a: AskOptions(question=" ".join(a.question))),
    "context": ((flags.repository, flags.as_json, flags.retrieval, flags.context_task),
                lambda a: ContextOptions(task=_task(a))),
    "test": ((flags.repository, flags.as_json, flags.tests), lambda a: TestOptions()),
    "diff": ((flags.repository, flags.as_json), lambda a: DiffOptions()),
    "undo": ((flags.repository, flags.as_json), lambda a: UndoOptions()),
    "index": ((flags.repository, flags.as_json), lambda a: IndexOptions()),
    "recover": ((flags.repository,), lambda a: RecoverOptions()),
    "search": ((flags.repository, flags.as_json, flags.search_words),
               lambda a: ToolOptions(tool="search", arguments={"query": " ".join(a.query), "k": a.k})),
    "grep": ((flags.repository, flags.as_json, flags.grep_words),
             lambda a: ToolOptions(tool="grep", arguments={"pattern": a.pattern, "path_glob": a.path_glob})),
    "read": ((flags.repository, flags.as_json, flags.read_words),
             lambda a: ToolOptions(tool="read", arguments={"path": a.path, "start": a.start, "end": a.end})),
    "symbol": ((flags.repository, flags.as_json, flags.symbol_words),
               lambda a: ToolOptions(tool="symbol", arguments={"name": a.name})),
    "apply": ((flags.repository, flags.as_json, flags.plan_file), lambda a: ApplyOptions(plan=_plan_text(a.plan))),
    "exec": ((flags.repository, flags.as_json, flags.tests, flags.exec_words),
             lambda a: ToolOptions(tool="exec", arguments={"command": " ".join(a.command)})),
}
COMMANDS: dict[str, Command] = {
    "run": Command("run", OPERATIONS["run"].summary + " (the default command)", *_PARSERS["run"]),
    CHAT: Command(CHAT, "a session: task after task with the index warm, follow-ups, /undo (each stdin line a task "
                        "when not on a terminal)",
                  (flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, flags.run,
                   flags.session),
                  lambda a: SessionOptions(resume=a.resume)),
    **{op.name: Command(op.name, op.summary, *_PARSERS[op.name]) for op in reached_from(Door.CLI) if op.name != "run"},
    MCP: Command(MCP, "the user's MCP servers (add, list, remove), and serve: our tools to other agents over MCP",
                 (mcp.words, flags.tests), mcp.options),
    EVAL: Command(EVAL, "run the agent over a set of cases (CASES.jsonl) in scratch copies, judge each with its own "
                        "tests, and sum up; `eval compare RUN_A RUN_B`", (evaluate.words,), evaluate.options),
}


def _legacy_switch(args: argparse.Namespace) -> tuple[Command, object]:
    """The default command's switches for the others (--ask, --context-only, --index-all, --recover)."""
    if args.recover:
        return COMMANDS["recover"], RecoverOptions()
    if args.index_all:
        return COMMANDS["index"], IndexOptions()
    if args.ask:
        return COMMANDS["ask"], AskOptions(question=args.ask)
    if args.context_only:
        return COMMANDS["context"], ContextOptions(task=_task(args))
    if not args.task and sys.stdin.isatty():  # `python main.py --repo PATH` on a terminal: a session
        return COMMANDS[CHAT], SessionOptions(resume=args.resume)
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
    """The command's name (the first word when it names one, else the default) and its parsed arguments. A first
    word that names no command is refused with the closest name; a command named after the options, with where it
    goes."""
    if argv[:1] and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        raise UsageError(_unknown_command(argv[0]))
    name = argv[0] if argv[:1] and argv[0] in COMMANDS else "run"
    parser = build_parser(name)
    words = argv[1:] if argv[:1] == [name] else argv
    # `mcp add NAME --replace -- COMMAND...`: options may come between the words
    intermixed = name in (MCP, EVAL)
    args, extra = parser.parse_known_intermixed_args(words) if intermixed else parser.parse_known_args(words)
    if extra and name == "run" and (command := next((word for word in extra if word in COMMANDS), None)):
        rest = list(argv)
        del rest[len(rest) - 1 - rest[::-1].index(command)]  # the last: an earlier one may be an option's value
        raise UsageError(f"put the command first: {Path(sys.argv[0]).name} {shlex.join([command, *rest])}")
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return name, args


def _unknown_command(word: str) -> str:
    close = difflib.get_close_matches(word, list(COMMANDS), n=2, cutoff=0.6)
    if close:
        return f"unknown command {word!r}; did you mean {' or '.join(close)}?"
    return (f"unknown command {word!r} (the commands: {', '.join(COMMANDS)}; a task goes after --task, a question "
            f"after ask)")


def parse(argv: list[str]) -> Parsed:
    """The command line, once: the command, the Settings every command shares, the command's own options, and how
    the door shows things."""
    name, args = parse_arguments(argv)
    command, options = _legacy_switch(args) if name == "run" else (COMMANDS[name], COMMANDS[name].options(args))
    overrides = {key: value for key, value in vars(args).items()
                 if key in SETTING_FIELDS and key != "repo" and value is not None}
    as_json = bool(getattr(args, "json", False))
    streams = not getattr(args, "no_stream", True) and not as_json and sys.stdout.isatty()
    return Parsed(command=command, settings=load_settings(args.repo, **overrides), options=options, as_json=as_json,
                  streams=streams)


def _epilog(prog: str) -> str:
    lines = "\n".join(f"  {prog} {c.name} --repo PATH\n      {c.summary}" for c in COMMANDS.values()
                      if c.name != "run")
    return f"""\
commands (each with its own --help; without one, the default command runs):
{lines}

the model (the environment, or a .env file in the current directory or the repository):
  OPENAI_API_KEY         the key (not needed for a local server when OPENAI_BASE_URL is set)
  OPENAI_BASE_URL        any OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp), ending in /v1 (--base-url
                         wins; the repository's .env names one only once you approve it, asked on a terminal)
  OPENAI_MODEL           the chat model (default: the one model a local server lists, else {DEFAULT_MODEL}; --model wins)
  OPENAI_CONTEXT_WINDOW  the model's context window in tokens (--context-window wins)
  EMBEDDING_BACKEND      local (default: a model shipped in a pip package, offline) or openai (the server's /embeddings)
  EMBEDDING_MODEL        the embedding model of the openai backend (default text-embedding-3-small)

exit status:
  0 done and green   1 failed (everything rolled back)   2 usage or configuration error (nothing touched)
  130 interrupted (rolled back: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT)"""


def _setup_logging(verbose: bool) -> None:
    """Log records on stderr, each starting a line of its own (console.LogLines): `warning: ...` on one line, or with
    -v every record with its level and logger."""
    handler = console.LogLines()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s") if verbose else console.OneLine())
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, handlers=[handler])
    for noisy in ("httpx", "httpcore", "openai", "chromadb", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.ERROR)


def main(argv: list[str] | None = None, *, leaving: bool = False) -> int:
    """The command's exit status; `leaving`: the process exits right after (entry), so a signal that arrives once
    the command is done is ignored rather than handled by the handlers from before."""
    argv = sys.argv[1:] if argv is None else argv
    verbose = "-v" in argv or "--verbose" in argv
    as_json = "--json" in argv
    try:
        parsed = parse(argv)
        _setup_logging(parsed.settings.verbose)
        with interrupts.installed(leaving=leaving):  # Ctrl-C, SIGTERM, SIGHUP, SIGQUIT: roll back, once; never cut short
            return execute(parsed)
    except BaseException as exc:  # noqa: BLE001 - the CLI edge turns every error into one line
        if isinstance(exc, (SystemExit, GeneratorExit)):
            raise
        if isinstance(exc, BrokenPipeError):  # stdout's reader left (`| head`): what it wanted, it has
            console.reader_left()
            return EXIT_OK
        if verbose and not isinstance(exc, (UsageError, KeyboardInterrupt)):
            logging.getLogger(__name__).exception("failed")
        return render.error(exc, as_json=as_json, verbose=verbose)
    finally:
        console.stop_status()  # however the command ended, no status line is left and the cursor shows


def execute(parsed: Parsed) -> int:
    """The command on a workspace opened for it (the session door keeps its own), its outcome shown."""
    from code_assistant.workspace import Workspace

    if parsed.command.name == MCP:
        return mcp.execute(parsed.settings, parsed.options, as_json=parsed.as_json)  # type: ignore[arg-type]
    if parsed.command.name == EVAL:
        return evaluate.execute(parsed.settings, parsed.options, as_json=parsed.as_json)  # type: ignore[arg-type]
    if parsed.command.name == CHAT:
        from code_assistant import session

        return session.chat(parsed.settings, parsed.options, as_json=parsed.as_json,  # type: ignore[arg-type]
                            streams=parsed.streams)
    display = console.display(as_json=parsed.as_json, streams=parsed.streams, verbose=parsed.settings.verbose)
    with Workspace(parsed.settings, display) as workspace:
        outcome = OPERATIONS[parsed.command.name].execute(workspace, parsed.options)
    render.show(outcome, as_json=parsed.as_json)
    return outcome.exit_code


def entry() -> None:
    """The process's entrance (main.py, the `code-assistant` script): the command, then its exit status; a signal
    that arrives while the process is only exiting changes nothing."""
    sys.exit(main(leaving=True))


if __name__ == "__main__":
    entry()
