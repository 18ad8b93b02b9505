"""The command line door: it parses its subcommands — the operations of the table (operations/) that the command
line reaches, their arguments as the table declares them, and two doors of their own: `chat`, the session, and `mcp
serve`, the MCP server — into the Settings every command shares (a flag's destination is the Settings field it sets)
and the operation's own frozen options record; nothing below this package sees argparse.
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
from code_assistant.cli import evaluate, flags
from code_assistant.cli.flags import SETTING_FIELDS, Parser
from code_assistant.console import render
from code_assistant.errors import EXIT_OK, UsageError
from code_assistant.operations import OPERATIONS, Door, Effect, Operation, reached_from
from code_assistant.operations.options import (
    AskOptions,
    ContextOptions,
    IndexOptions,
    Options,
    RecoverOptions,
    RunOptions,
)
from code_assistant.session import SessionOptions
from code_assistant.settings import DEFAULT_MODEL, Settings, load_settings

CHAT = "chat"
MCP = "mcp"
MCP_SERVE = "mcp serve"
EVAL = "eval"
Group = Callable[[argparse.ArgumentParser], None]
# What a command's options record is: an operation's (the table's), the session's, the eval's; None: `mcp serve`, `mcp`
CommandOptions = Options | SessionOptions | evaluate.EvalWords | None


def _declared(p: argparse.ArgumentParser) -> None:
    """A marker among a command's groups, never called: where its operation's own arguments go (build_parser)."""


ARGUMENTS: Group = _declared


# ----- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One subcommand: an operation of the table (or a door of its own: `chat`, the session; `mcp serve`, the MCP
    server), the flag groups it takes, and its options record built from the parsed arguments."""

    name: str
    summary: str
    groups: tuple[Group, ...]
    options: Callable[[argparse.Namespace], CommandOptions]
    operation: str | None = None  # the operation of the table it executes
    repository: bool = True  # it takes --repo


@dataclass(frozen=True)
class Parsed:
    """The command line, read once: the command, the settings, its options, and how the door shows things."""

    command: Command
    settings: Settings
    options: CommandOptions
    as_json: bool = False
    streams: bool = False  # the model's answers are shown as they come (a terminal, neither --json nor --no-stream)


def _task(args: argparse.Namespace) -> str:
    """The task: --task, or (the context command) the words after the options."""
    task = getattr(args, "task_flag", None) or args.task
    task = " ".join(task) if isinstance(task, list) else task
    if not task or not task.strip():
        raise UsageError("--task is required (or use chat, ask, context, index, recover, undo; see --help)")
    return task


def _run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(task=_task(args), branch=args.branch, worktree=args.worktree, commit=args.commit,
                      allow_dirty=args.allow_dirty, keep_branch=args.keep_branch, replay=args.replay)


# The flag groups each command the command line reaches takes (its operation's summary and arguments are the table's);
# one that calls a model's tool takes the repository's, --json and, when it runs in the sandbox, the test command's.
_GROUPS: dict[str, tuple[Group, ...]] = {
    "run": (flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, ARGUMENTS, flags.run,
            flags.one_run, flags.session, flags.legacy),
    "ask": (flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, ARGUMENTS),
    "context": (flags.repository, flags.as_json, flags.retrieval, ARGUMENTS, flags.task_alias),
    "test": (flags.repository, flags.as_json, flags.tests),
    "diff": (flags.repository, flags.as_json),
    "undo": (flags.repository, flags.as_json),
    "index": (flags.repository, flags.as_json),
    "recover": (flags.repository,),
    "apply": (flags.repository, flags.as_json, flags.review, ARGUMENTS),
    "mcp add": (flags.as_json, ARGUMENTS),
    "mcp list": (flags.current_repository, flags.as_json, flags.trust),
    "mcp remove": (flags.as_json, ARGUMENTS),
}
_BUILT: dict[str, Callable[[argparse.Namespace], Options]] = {  # options not made from the declared arguments alone
    "run": _run_options,
    "context": lambda args: ContextOptions(task=_task(args)),
}


def _groups(op: Operation) -> tuple[Group, ...]:
    if op.tool is not None:
        return (flags.repository, flags.as_json, *((flags.tests,) if op.effect == Effect.TESTS else ()), ARGUMENTS)
    return _GROUPS[op.name]


def _command(op: Operation) -> Command:
    def options(args: argparse.Namespace) -> Options:
        return op.make(flags.values(args, op.arguments, op.name))

    summary = op.summary + (" (the default command)" if op.name == "run" else "")
    return Command(op.name, summary, _groups(op), _BUILT.get(op.name, options), op.name, op.repository)


def _mcp_action(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=MCP_ACTIONS, help="add, list, remove, or serve (our tools to other agents, on "
                                                       "stdio); each with its own --help")


COMMANDS: dict[str, Command] = {
    "run": _command(OPERATIONS["run"]),
    CHAT: Command(CHAT, "a session: task after task with the index warm, follow-ups, /undo (each stdin line a task "
                        "when not on a terminal)",
                  (flags.repository, flags.as_json, flags.model, flags.tooling, flags.retrieval, flags.run,
                   flags.session),
                  lambda a: SessionOptions(resume=a.resume)),
    **{op.name: _command(op) for op in reached_from(Door.CLI) if op.name != "run"},
    MCP_SERVE: Command(MCP_SERVE, "our tools to other agents over MCP, on stdio", (flags.current_repository,
                                                                                    flags.tests), lambda a: None),
    EVAL: Command(EVAL, "run the agent over a set of cases (CASES.jsonl) in scratch copies, judge each with its own "
                        "tests, and sum up; `eval compare RUN_A RUN_B`", (evaluate.words,), evaluate.options,
                  repository=False),
}
MCP_ACTIONS = tuple(name.split()[1] for name in COMMANDS if name.startswith(MCP + " "))
COMMANDS[MCP] = Command(MCP, "the user's MCP servers (add, list, remove), and serve: our tools to other agents over "
                             "MCP", (_mcp_action,), lambda a: None, repository=False)


def _legacy_switch(args: argparse.Namespace) -> tuple[Command, CommandOptions]:
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
        if group is ARGUMENTS:
            flags.declared(p, OPERATIONS[command.operation or name].arguments)
        else:
            group(p)
    return p


def parse_arguments(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """The command's name (the first word when it names one — `mcp` and its action, two — else the default) and its
    parsed arguments. A first word that names no command is refused with the closest name; a command named after the
    options, with where it goes."""
    if argv[:1] and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        raise UsageError(_unknown_command(argv[0]))
    if argv[:1] == [MCP] and argv[1:2] and argv[1] in MCP_ACTIONS:
        name, words = f"{MCP} {argv[1]}", argv[2:]
    else:
        name = argv[0] if argv[:1] and argv[0] in COMMANDS else "run"
        words = argv[1:] if argv[:1] == [name] else argv
    parser = build_parser(name)
    # `mcp add NAME --replace -- COMMAND...`: options may come between the words
    intermixed = name in ("mcp add", EVAL)
    args, extra = parser.parse_known_intermixed_args(words) if intermixed else parser.parse_known_args(words)
    if extra and name == "run" and (command := next((word for word in extra if word in COMMANDS), None)):
        rest = list(argv)
        del rest[len(rest) - 1 - rest[::-1].index(command)]  # the last: an earlier one may be an option's value
        raise UsageError(f"put the command first: {Path(sys.argv[0]).name} {shlex.join([command, *rest])}")
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return name, args


def _unknown_command(word: str) -> str:
    names = [name for name in COMMANDS if " " not in name]  # `mcp add` is `mcp`'s
    close = difflib.get_close_matches(word, names, n=2, cutoff=0.6)
    if close:
        return f"unknown command {word!r}; did you mean {' or '.join(close)}?"
    return (f"unknown command {word!r} (the commands: {', '.join(names)}; a task goes after --task, a question "
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
    return Parsed(command=command, settings=load_settings(getattr(args, "repo", "."), **overrides), options=options,
                  as_json=as_json, streams=streams)


def _epilog(prog: str) -> str:
    lines = "\n".join(f"  {prog} {c.name}{' --repo PATH' if c.repository else ''}\n      {c.summary}"
                      for c in COMMANDS.values() if c.name not in ("run", MCP))
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
    """The command on a workspace opened for it (the session door keeps its own, the MCP server its own), its outcome
    shown."""
    from code_assistant.workspace import Workspace

    options = parsed.options
    if options is None:  # `mcp serve` (bare `mcp` is refused by its parser: an action is required)
        from code_assistant.mcp import server

        return server.serve(parsed.settings)
    if isinstance(options, evaluate.EvalWords):
        return evaluate.execute(parsed.settings, options, as_json=parsed.as_json)
    if isinstance(options, SessionOptions):
        from code_assistant import session

        return session.chat(parsed.settings, options, as_json=parsed.as_json, streams=parsed.streams)
    operation = OPERATIONS[parsed.command.operation or parsed.command.name]
    display = console.display(as_json=parsed.as_json, streams=parsed.streams, verbose=parsed.settings.verbose,
                              report=operation.reports)
    with Workspace(parsed.settings, display) as workspace:
        outcome = operation.execute(workspace, options)
    render.show(outcome, as_json=parsed.as_json)
    return outcome.exit_code


def entry() -> None:
    """The process's entrance (main.py, the `code-assistant` script): the command, then its exit status; a signal
    that arrives while the process is only exiting changes nothing."""
    sys.exit(main(leaving=True))


if __name__ == "__main__":
    entry()
