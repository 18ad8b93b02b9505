"""The command line's flags, in groups a command takes whole. A flag that sets a Settings field has the field as its
destination, checked when the parser is built; the other flags belong to one command's options record."""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from code_assistant.errors import UsageError
from code_assistant.settings import (
    DEFAULT_MODEL,
    DEFAULT_TEST_COMMAND,
    EDIT_FORMATS,
    FIX_BY,
    REASONING_EFFORTS,
    SANDBOX_MODES,
    SMALL_MODEL_SAID,
    TOOLS_MODES,
    WIRES,
    Settings,
)
from code_assistant.tools import Argument

SETTING_FIELDS = frozenset(f.name for f in fields(Settings))
_INVALID_CHOICE = re.compile(r"invalid choice: '?(?P<word>[^' ]*)'? \(choose from (?P<choices>.*)\)")


class Parser(argparse.ArgumentParser):
    """No abbreviations (`--context-onl` is not `--context-only`); an unknown option names the closest real one, or
    says where the words of a command's free text that start with - go."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        options = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        hints = []
        if choice := _INVALID_CHOICE.search(message):  # `mcp lst`
            words = [word.strip("'\" ") for word in choice["choices"].split(",")]
            close = difflib.get_close_matches(choice["word"], words, n=1, cutoff=0.6)
            hints += [f"did you mean {close[0]}?"] if close else []
        if message.startswith("unrecognized arguments:"):
            for word in message.split(":", 1)[1].split():
                close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6)
                if word.startswith("-") and close:
                    hints.append(f"{word.split('=')[0]}: did you mean {close[0]}?")
                elif word.startswith("-") and any(a.nargs in ("+", "*") for a in self._actions if not a.option_strings):
                    hints.append(f"{word}: words that start with - go after --")
        raise UsageError(message + (f" ({'; '.join(hints)})" if hints else ""))


def default(name: str) -> str:
    """A setting's default, for the help text: defined once, in Settings."""
    value = Settings.__dataclass_fields__[name].default
    return f"{value:g}" if isinstance(value, float) else str(value)


def _setting(group: argparse._ActionsContainer, *flags: str, field: str, **kwargs: Any) -> None:
    """A flag that sets a Settings field: its destination is the field, checked here, once."""
    if field not in SETTING_FIELDS:
        raise TypeError(f"{flags[0]} names no setting: {field}")
    group.add_argument(*flags, dest=field, **kwargs)


# ----- the flags, in groups a command takes whole ----------------------------------------------------------------
def repository(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, help="the repository to work on")
    _repository(p)


def current_repository(p: argparse.ArgumentParser) -> None:
    """The repository options, the repository by default the current directory (`mcp list`, `mcp serve`)."""
    p.add_argument("--repo", default=".", help="the repository to work on (default: the current directory)")
    _repository(p)


def _repository(p: argparse.ArgumentParser) -> None:
    _setting(p, "--index-path", field="index_path",
             help="where the index lives (default: ~/.cache/code-assistant/index)")
    _setting(p, "-v", "--verbose", field="verbose", action="store_true", default=None,
             help="debug logging and tracebacks")
    _setting(p, "--wait", field="wait", action="store_true", default=None,
             help="when another run or session holds the repository, wait for it (default: refuse, naming it)")


def as_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def model(p: argparse.ArgumentParser) -> None:
    _setting(p, "--model", field="model",
             help=f"chat model (default: $OPENAI_MODEL, then the one model a local server lists, then {DEFAULT_MODEL})")
    _setting(p, "--base-url", field="base_url", metavar="URL",
             help="the OpenAI-compatible server, ending in /v1 (default: $OPENAI_BASE_URL, or your .env's; the "
                  "repository's .env names one only once you approve it)")
    _setting(p, "--context-window", field="context_window", type=int, metavar="N",
             help="the model's context window in tokens (default: $OPENAI_CONTEXT_WINDOW, else what the server "
                  "reports, else known models, else 8192)")
    _setting(p, "--request-timeout", field="request_timeout", type=float, metavar="S",
             help="seconds without a byte from the model server between two tokens (before the first: plus the time "
                  f"to read the prompt) before it is given up on (default {default('request_timeout')})")
    _setting(p, "--wire", field="wire", choices=WIRES,
             help="the API the model is asked through: chat (/chat/completions) or responses (/responses) (default: "
                  "$OPENAI_WIRE, else chat, switching to responses for a model the server serves only there)")
    _setting(p, "--reasoning-effort", field="reasoning_effort", choices=REASONING_EFFORTS,
             help="how hard a reasoning model thinks, sent where the model takes it (default: "
                  "$OPENAI_REASONING_EFFORT, else the model's own)")
    _setting(p, "--small-model", field="small_model", action="store_true", default=None,
             help=f"for a model of a few billion parameters on a CPU: {SMALL_MODEL_SAID} (each still set by its own "
                  "flag)")
    p.add_argument("--no-stream", action="store_true", help="do not stream the model's answer to the terminal")
    _setting(p, "--no-instructions", field="instructions", action="store_false", default=None,
             help="leave the repository's AGENTS.md (or CLAUDE.md, CONVENTIONS.md, .github/copilot-instructions.md) "
                  "out of the requests")


def tooling(p: argparse.ArgumentParser) -> None:
    """What the model may call before it answers."""
    g = p.add_argument_group("the model's tools (search, grep, read, symbol, run)")
    _setting(g, "--tools", field="tools", choices=[m for m in TOOLS_MODES if m != "off"],
             help="how the model is given its tools: native (OpenAI tool calls), json (described in the request; for "
                  "servers without tool calls), auto (native when the window holds at least 4096 tokens; default)")
    _setting(g, "--no-tools", field="tools", action="store_const", const="off",
             help="no tools: the model answers from the context it is given (default: auto, as --tools says)")
    _setting(g, "--max-tool-calls", field="max_tool_calls", type=int, metavar="N",
             help=f"tool calls one answer may make (default {default('max_tool_calls')})")
    trust(g)


def trust(p: argparse._ActionsContainer) -> None:
    _setting(p, "--trust-mcp", field="trust_mcp", action="store_true", default=None,
             help="start the MCP servers of the repository's .mcp.json without asking (they run as you)")


def retrieval(p: argparse.ArgumentParser) -> None:
    _setting(p, "--context-tokens", field="context_tokens", type=int,
             help=f"token budget of the context (default {default('context_tokens')})")
    _setting(p, "--embed-budget", field="embed_budget", type=int, metavar="N",
             help="chunks one query may have the model embed (default: 200 local, 2000 openai; "
                  "0: only what is already embedded)")


def tests(p: argparse.ArgumentParser) -> None:
    """How the test command is run: the command, its timeout, the sandbox around it."""
    _setting(p, "--test-command", field="test_command",
             help=f"test command, split like a shell (default: the one the repository names: go test ./..., cargo "
                  f"test, npm test, npx jest, node --test, else {DEFAULT_TEST_COMMAND})")
    _setting(p, "--test-timeout", field="test_timeout", type=float,
             help=f"seconds before a test run is killed (default {default('test_timeout')})")
    g = p.add_argument_group("the sandbox the test command runs in")
    _setting(g, "--sandbox", field="sandbox", choices=SANDBOX_MODES,
             help="what the test command may do: write (the repository, /tmp and toolchain caches; HOME hidden, "
                  "network off, secrets held back; strict is the same), off (anything, as you); "
                  f"default {default('sandbox')} ($CODE_ASSISTANT_SANDBOX)")
    _setting(g, "--network", field="network", action="store_true", default=None,
             help="let the test command reach the network (default: loopback only)")
    _setting(g, "--pass-env", field="pass_env", action="append", metavar="NAME",
             help="pass this secret-looking variable to the test command (repeatable; $CODE_ASSISTANT_PASS_ENV)")
    _setting(g, "--sandbox-show", field="sandbox_show", action="append", metavar="PATH",
             help="show this path of the hidden HOME to the test command, read-only (repeatable)")


def run(p: argparse.ArgumentParser) -> None:
    """What every task is run with: the tests and their sandbox, the guardrails, the reproduction test, best of N."""
    tests(p)
    _setting(p, "--max-iterations", field="max_iterations", type=int,
             help=f"test/fix rounds before rolling back (default {default('max_iterations')})")
    _setting(p, "--no-structured-output", field="structured_output", action="store_false", default=None,
             help="do not send the plan's JSON schema as response_format")
    _setting(p, "--edit-format", field="edit_format", choices=EDIT_FORMATS,
             help="how the model writes its edits: json (a plan of every action) or blocks (SEARCH/REPLACE blocks, "
                  f"for a small local model); default {default('edit_format')}")
    _setting(p, "--fix-by", field="fix_by", choices=FIX_BY,
             help="after a failed iteration: feedback (the failures sent back for a fix) or samples (the change taken "
                  "back and the first plan asked again at temperature 0.7, a new seed each time: cheap where the "
                  f"server keeps the prompt, as llama.cpp does); default {default('fix_by')}")
    g = p.add_argument_group("guardrails")
    _setting(g, "--max-changed-lines", field="max_changed_lines", type=int,
             help=f"refuse a fix changing more lines (default {default('max_changed_lines')})")
    _setting(g, "--max-plan-lines", field="max_plan_lines", type=int,
             help=f"refuse a plan changing more lines (default {default('max_plan_lines')})")
    _setting(g, "--max-files", field="max_files", type=int,
             help=f"refuse an answer touching more files (default {default('max_files')})")
    _setting(g, "--allow-test-edits", field="allow_test_edits", action="store_true", default=None,
             help="let the model change tests")
    _setting(g, "--allow-env-edits", field="allow_env_edits", action="store_true", default=None,
             help="let the model create or change .env* files (settings: which server gets your key)")
    _setting(g, "--max-cost", field="max_cost", type=float, help="stop when the estimated cost passes this many dollars")
    _setting(g, "--max-tokens", field="max_tokens", type=int, help="stop when the run has used this many tokens")
    review(g)
    _setting(g, "--dry-run", field="dry_run", action="store_true", default=None,
             help="plan and print the diff; write nothing")
    v = p.add_argument_group("success that means the task is done")
    _setting(v, "--reproduce", field="reproduce", action="store_true", default=None,
             help="first ask for a test that fails before the fix (default: when the suite is green)")
    _setting(v, "--no-reproduce", field="reproduce", action="store_false", help="no reproduction test")
    _setting(v, "--candidates", field="candidates", type=int, metavar="N",
             help="N independent attempts in scratch copies, in parallel; the best passing one is applied "
                  f"(default {default('candidates')})")
    _setting(p, "--log-dir", field="log_dir", help="where run trajectories go (default: <index-path>/runs)")


def review(p: argparse._ActionsContainer) -> None:
    """--review: a run's each answer, and `apply`'s plan."""
    _setting(p, "--review", field="review", action="store_true", default=None,
             help="show each diff and apply it only after y")


def one_run(p: argparse.ArgumentParser) -> None:
    """What only a single run takes: the git workflow, a replay."""
    w = p.add_argument_group("git")
    w.add_argument("--branch", nargs="?", const="", metavar="NAME",
                   help="work on a new branch (default name: assistant/<task>-<time>)")
    w.add_argument("--worktree", action="store_true", help="work in a separate git worktree; your checkout stays as is")
    w.add_argument("--commit", action="store_true", help="commit the change when the tests pass")
    w.add_argument("--allow-dirty", action="store_true", help="with --commit: edit files that hold your pending "
                   "changes (they are left uncommitted)")
    w.add_argument("--keep-branch", action="store_true", help="keep the new branch when the run fails")
    w.add_argument("--replay", metavar="FILE.jsonl", type=Path,
                   help="re-run a recorded trajectory's answers; no model calls")


def session(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resume", action="store_true",
                   help="a session: reopen the repository's last session (its notes of earlier tasks and its pins)")


def legacy(p: argparse.ArgumentParser) -> None:
    """The other commands as switches of the default one, as the README and users have long spelled them."""
    s = p.add_argument_group("other commands, as switches (the same as the subcommands below)")
    s.add_argument("--ask", metavar="QUESTION", help="answer a question about the repository; never edits")
    s.add_argument("--context-only", action="store_true", help="index and show the context for --task; no model call")
    s.add_argument("--index-all", action="store_true",
                   help="embed every file now; resumable, Ctrl-C keeps finished batches. Without it a query embeds "
                        "only what its top candidates lack")
    s.add_argument("--recover", action="store_true",
                   help="take an interrupted run's change out of the repository, stop its leftover test processes, "
                        "and exit")


def task_alias(p: argparse.ArgumentParser) -> None:
    """`context --task TASK`: the words of the context command, as the option the default command takes them as."""
    p.add_argument("--task", dest="task_flag", metavar="TASK", help="the same, as an option")


# ----- an operation's own arguments, as the table declares them -----------------------------------------------------
def declared(p: argparse.ArgumentParser, arguments: tuple[Argument, ...]) -> None:
    """The arguments as argparse's: an option where the declaration names a flag, else words in order (free text and
    lists take several); a JSON object is read from a file."""
    for a in arguments:
        kwargs: dict[str, Any] = {"help": a.described}
        if a.metavar:
            kwargs["metavar"] = a.metavar
        if a.type is bool:
            p.add_argument(a.flag, dest=a.name, action="store_true", **kwargs)
            continue
        if a.type is int:
            kwargs["type"] = int
        if a.default is not None:
            kwargs["default"] = a.default
        if a.type is dict:
            kwargs.update(type=Path, help=f"a file holding {a.help}; - for stdin")
        if a.flag:
            p.add_argument(a.flag, dest=a.name, **({"action": "append"} if a.type is list else {}), **kwargs)
        elif a.words or a.type is list:
            p.add_argument(a.name, nargs="+" if a.required else "*", **kwargs)
        else:
            p.add_argument(a.name, **({} if a.required else {"nargs": "?"}), **kwargs)


def values(args: argparse.Namespace, arguments: tuple[Argument, ...], command: str) -> dict[str, object]:
    """The declared arguments' values from the parsed command line: free text joined, a JSON object's file read."""
    found: dict[str, object] = {}
    for a in arguments:
        value = getattr(args, a.name, None)
        if isinstance(value, list) and a.type is list and not a.flag and value[:1] == ["--"]:
            value = value[1:]  # `mcp add NAME -- COMMAND...`: words after the options
        if a.words and isinstance(value, list):
            value = " ".join(value)
        if a.type is dict and value is not None:
            value = _read_file(value, f"{command}: cannot read the {a.name}")
        found[a.name] = value
    return found


def _read_file(path: Path, cannot: str) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{cannot} {path}: {exc.strerror or exc}") from None
