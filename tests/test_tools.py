"""The model looks around before it answers: search, grep, read, symbol and run, called natively (streamed, several
in one answer) or, for a server without tool calls, written as JSON in the answer; capped per answer and sized to the
window; confined to what a person may be shown, secrets redacted; `run` in the sandbox on a read-only tree; none
with --no-tools, whose requests are today's; and a run with tool calls replayed without the model."""
from __future__ import annotations

import base64
import functools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from code_assistant import redact
from code_assistant.answers.tool_calls import WrittenCall, arguments, written_calls
from code_assistant.model import prompts
from code_assistant.model.fitting import TOOL_RESULTS_HEAD, fit_tool_results, message_tokens
from code_assistant.settings import load_settings
from code_assistant.tools import Result, Spec, Tool, ToolError, fit, specs
from code_assistant.tools import looking as looking_module
from code_assistant.tools.box import Form, Toolbox
from code_assistant.tools.files import RepoView
from code_assistant.tools.looking import Looking
from code_assistant.tools.running import Running
from code_assistant.workspace import Workspace, build_indexer
from tests.provider_emulator import ProviderEmulator
from tests.repos import CALC_PY, PYTEST, ROOT, Listener, answer, modify, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
SECRET = "sk-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4"


def call(tool: str, **arguments: object) -> dict:
    return {"name": tool, "arguments": arguments}


def _run(repo: Path, script: list, *more: str, **server: object) -> tuple[object, ScriptedServer]:
    with ScriptedServer(script, **server) as scripted:  # type: ignore[arg-type]
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce", *more],
                       server_url=scripted.url)
    return proc, scripted


# ----- through the command line, against a scripted server --------------------------------------------------------
def test_a_model_that_greps_and_reads_before_it_plans_goes_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    script = [{"tool_calls": [call("grep", pattern=r"def add")]},
              {"tool_calls": [call("read", path="calc.py", start=4, end=5), call("symbol", name="multiply")]},
              FIX_ADD]
    proc, server = _run(repo, script)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    assert '[grep: "def add" → 1 line in 1 file]' in proc.stdout  # type: ignore[attr-defined]
    assert "[read: calc.py lines 4-5 of 9]" in proc.stdout  # type: ignore[attr-defined]
    second, third = server.chat_requests[1], server.chat_requests[2]
    asked, answered = second["messages"][-2:]
    assert asked["tool_calls"][0]["function"]["name"] == "grep" and answered["role"] == "tool"
    assert answered["tool_call_id"] == asked["tool_calls"][0]["id"] and answered["content"] == "calc.py:4: def add(a, b):"
    two_calls, read, symbol = third["messages"][-3:]  # two calls in one answer, streamed in pieces: both answered
    assert [c["function"]["name"] for c in two_calls["tool_calls"]] == ["read", "symbol"]
    assert [read["tool_call_id"], symbol["tool_call_id"]] == [c["id"] for c in two_calls["tool_calls"]]
    assert "    4  def add(a, b):\n    5      return a - b" in read["content"]
    assert "calc.py:8: function multiply(a, b)" in symbol["content"] or "calc.py:8:" in symbol["content"]
    assert all("tools" in r and "response_format" not in r for r in server.chat_requests), "a grammar leaves no call"
    assert {t["function"]["name"] for t in server.chat_requests[0]["tools"]} == {"search", "grep", "read", "symbol",
                                                                                "run"}


def test_a_model_that_never_stops_calling_tools_stops_at_the_cap_and_no_request_passes_the_window(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {**{f"mod{i}.py": "".join(f"VALUE_{i}_{n} = {n}  # a line of padding\n"
                                                           for n in range(120)) for i in range(6)},
                                  "calc.py": CALC_PY, "pytest.ini": "[pytest]\npythonpath = .\n",
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                        "    assert add(2, 3) == 5\n"})
    greedy = [{"tool_calls": [call("grep", pattern=f"VALUE_{i % 6}_")]} for i in range(3)]
    proc, server = _run(repo, [*greedy, {"tool_calls": [call("grep", pattern="never")]}, FIX_ADD],
                        "--max-tool-calls", "3", "--context-window", "4096", "--tools", "native",
                        context_window=4096)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    assert len(server.chat_requests) == 5 and [("tools" in r) for r in server.chat_requests] == [True] * 3 + [False] * 2
    told = server.chat_requests[3]["messages"][-1]
    assert told["role"] == "user" and "no more tools" in told["content"]
    for request in server.chat_requests:  # the server refuses with 400 past its window: none was refused
        assert request.get("max_tokens")


def test_a_server_without_tool_calls_gets_the_tools_in_words(tmp_path: Path) -> None:
    """vLLM started without --enable-auto-tool-choice refuses `tools` (tests/provider_emulator.py quotes it)."""
    repo = python_repo(tmp_path)
    written = json.dumps({"tool_calls": [call("grep", pattern="def add")]})
    with ProviderEmulator("vllm-qwen2.5-coder", [written, FIX_ADD]) as vllm:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=vllm.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Tools: the model server serves no native tool calls" in proc.stdout
    assert "[Window: " not in proc.stdout and "[Model: Qwen/Qwen2.5-Coder-7B-Instruct, context window 32768" in proc.stdout
    refused, first, second = vllm.bodies("chat")
    assert "tools" in refused and "tools" not in first and "tools" not in second and vllm.refused == [refused]
    assert '{"tool_calls": [{"name": "grep"' in first["messages"][0]["content"]
    results = second["messages"][-1]["content"]
    assert results.startswith(TOOL_RESULTS_HEAD) and "calc.py:4: def add(a, b):" in results


def test_without_tools_the_requests_are_todays(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc, server = _run(repo, [FIX_ADD], "--no-tools")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    [request] = server.chat_requests
    assert "tools" not in request and request["response_format"]["type"] == "json_schema"
    assert request["messages"][0]["content"] == prompts.SYSTEM.render()
    assert '{"changes": [{"file_path": "<' in request["messages"][0]["content"], "the answer's form as valid JSON"
    (tmp_path / "small").mkdir()
    small, small_server = _run(python_repo(tmp_path / "small"), [FIX_ADD], "--context-window", "2048")
    assert small.returncode == 0 and "tools" not in small_server.chat_requests[0], "a 2k window: no schema by default"
    said = small_server.chat_requests[0]["messages"][0]["content"]
    assert "- grep(" in said and "- read(" in said and "- search(" not in said, "grep and read, described in words"


def test_tools_asked_for_on_a_window_too_small_for_them_are_one_line_that_counts_them(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    proc, server = _run(repo, [FIX_ADD], "--context-window", "1800", "--tools", "native")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    [line] = proc.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert "with the model's tools" in line and "leave the tools out with --no-tools" in line
    assert server.chat_requests == [] and snapshot(repo) == before


def test_a_replayed_run_with_tool_calls_asks_no_model_and_names_a_changed_result(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    script = [{"tool_calls": [call("grep", pattern="def add"), call("read", path="calc.py")]}, FIX_ADD]
    proc, _ = _run(repo, script, "--json")
    log = json.loads(proc.stdout)["log"]  # type: ignore[attr-defined]
    assert json.loads(proc.stdout)["tools"] == 2  # type: ignore[attr-defined]
    after = snapshot(repo)
    assert run_cli(["undo", "--repo", str(repo)]).returncode == 0 and snapshot(repo) == before
    (repo / "notes.py").write_text("def add_more(): ...\n")  # grep now finds one more line
    replayed, server = _run(repo, [], "--replay", log)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr  # type: ignore[attr-defined]
    assert server.chat_requests == [] and (repo / "calc.py").read_bytes() == after["calc.py"][0]
    assert "[Replay: the grep call's result differs from the recorded one" in replayed.stdout  # type: ignore
    assert "read call's result differs" not in replayed.stdout  # type: ignore[attr-defined]


def test_a_plans_read_change_is_a_call_of_the_read_tool_confined_like_any(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    reads = answer({"file_path": "../../etc/passwd", "action": "read"}, {"file_path": "calc.py", "action": "read"})
    proc, server = _run(repo, [reads, FIX_ADD])
    assert proc.returncode == 0, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    results = server.chat_requests[1]["messages"][-1]["content"]
    assert results.startswith(TOOL_RESULTS_HEAD) and "root:" not in results and "'..' may not be used" in results
    assert "    5      return a - b" in results


def test_ask_gets_the_four_tools_that_only_look(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([{"tool_calls": [call("grep", pattern="return a")]}, "add is at calc.py:5."]) as server:
        proc = run_cli(["ask", "--repo", str(repo), "where does add return?"], server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    assert {t["function"]["name"] for t in server.chat_requests[0]["tools"]} == {"search", "grep", "read", "symbol"}
    assert "calc.py:5:     return a - b" in server.chat_requests[1]["messages"][-1]["content"]


# ----- the tools themselves, on a real repository and a real sandbox -------------------------------------------------
@pytest.fixture()
def looking(tmp_path: Path) -> Looking:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "config.py": f'API_KEY = "{SECRET}"\n',
                                  ".env": f"OPENAI_API_KEY={SECRET}\n", "README.md": "add two numbers\n"})
    (tmp_path / "outside.py").write_text("OUTSIDE = 1\n")
    (repo / "out.py").symlink_to(tmp_path / "outside.py")
    settings = load_settings(repo, embed_budget=0)
    indexer = build_indexer(settings)
    return Looking(RepoView(repo, exclude=[settings.index_path, settings.state_path]),
                   lambda focus: indexer.update(exclude=[settings.state_path])[0])


@pytest.mark.parametrize("path, why", [("../outside.py", "'..' may not be used"), ("out.py", "outside the repository"),
                                       (".git/config", ".git/ are not shown"), (".env", "may hold secrets"),
                                       ("missing.py", "no such file")])
def test_read_shows_nothing_outside_what_a_person_may_be_shown(looking: Looking, path: str, why: str) -> None:
    with pytest.raises(ToolError, match=why):
        looking.read({"path": path})


def test_grep_and_search_pass_over_secrets_and_say_what_they_left_out(looking: Looking) -> None:
    assert looking.grep({"pattern": "OPENAI"}).summary == 'grep: "OPENAI" → no match', ".env is never read"
    assert looking.grep({"pattern": "OUTSIDE"}).summary == 'grep: "OUTSIDE" → no match', "nor a symlink out"
    found = looking.grep({"pattern": "a", "path_glob": "*.py"})
    assert found.summary.startswith('grep: "a" → ') and "calc.py:4: def add(a, b):" in found.text
    assert "add two numbers" in looking.grep({"pattern": "numbers"}).text, "any tracked file, not only code"
    searched = looking.search({"query": "multiply two numbers", "k": 2})
    assert "calc.py:8: def multiply(a, b):" in searched.text
    with pytest.raises(ToolError, match="not a valid regular expression"):
        looking.grep({"pattern": "("})
    page = looking.read({"path": "calc.py", "start": 2, "end": 3})
    assert page.text.splitlines()[0] == "calc.py: lines 2-3 of 9" and "(lines 4-9 not shown: read with start=4)" in page.text


def test_read_and_grep_show_no_line_of_a_private_key_a_file_holds(tmp_path: Path) -> None:
    """A file that holds a private key is a secret file by what it holds: the read gate refuses it whole, and a grep
    for one of the key's lines, or for its code, shows none of it. A key's block in a text the gate does let through
    (no BEGIN line in it) is redacted by its shape on its way to the model, every line keeping its number."""
    body = textwrap.wrap(base64.b64encode(bytes(range(256)) * 5).decode(), 64)  # a key's body, as PEM wraps it
    begin, end = "-----BEGIN RSA " + "PRIVATE KEY-----", "-----END RSA " + "PRIVATE KEY-----"
    repo = python_repo(tmp_path, {"deploy.py": "\n".join(['KEY = """', begin, *body, end, '"""', "def sign():",
                                                           "    return KEY", ""]),
                                  "notes.txt": "\n".join(["key lines, pasted without their BEGIN line:", *body[3:9],
                                                          "end of notes", ""])})
    settings = load_settings(repo, embed_budget=0)
    looking = Looking(RepoView(repo, exclude=[settings.index_path, settings.state_path]), lambda focus: None)  # type: ignore
    with pytest.raises(ToolError, match="secret"):
        looking.read({"path": "deploy.py", "start": 5, "end": 9})
    assert "deploy.py" not in looking.grep({"pattern": body[7]}).text
    assert "deploy.py" not in looking.grep({"pattern": "def sign"}).text
    shown = redact.redact(looking.read({"path": "notes.txt"}).text)[0]  # as the model is sent it (redact_messages)
    assert [line for line in body if line in shown] == [] and "    2  [REDACTED:private-key]" in shown
    assert "    8  end of notes" in shown


def test_a_call_that_would_run_for_minutes_or_flood_the_window_stops_and_says_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    many = "".join(f"class Handler{n}:\n    def handle(self):\n        return {n}\n\n" for n in range(60))
    wide = "".join(f"VALUE_{n} = '{'x' * 220}'\n" for n in range(400))
    repo = python_repo(tmp_path, {"many.py": many, "wide.py": wide, "slow.txt": "a" * 40 + "!\n",
                                  "after.txt": "aaa\n"})
    settings = load_settings(repo, embed_budget=0)
    indexer = build_indexer(settings)
    tools = Looking(RepoView(repo, exclude=[settings.index_path, settings.state_path]),
                    lambda focus: indexer.update(exclude=[settings.state_path])[0])
    monkeypatch.setattr(looking_module, "GREP_SECONDS", 1.0)

    backtracking = tools.grep({"pattern": "(a|aa)+$"})  # exponential on slow.txt's one line
    assert "(stopped early: the search took over 1 s; stopped in slow.txt)" in backtracking.text

    crowded = tools.symbol({"name": "handle"})
    assert crowded.summary == "symbol: handle → 60 definitions, 0 references"
    assert crowded.text.count("def handle(self)") == looking_module.SYMBOL_DEFINITIONS
    assert "(20 more definitions not shown: give the qualified name, e.g. Class.method)" in crowded.text
    assert tools.symbol({"name": "Handler7.handle"}).text.count("def handle(self)") == 1

    page = tools.read({"path": "wide.py"})
    shown = page.text.splitlines()
    assert len(page.text) <= looking_module.READ_CHARS + 200 and shown[0] == f"wide.py: lines 1-{len(shown) - 2} of 400"
    assert shown[-1] == f"(lines {len(shown) - 1}-400 not shown: read with start={len(shown) - 1})"


def test_run_leaves_the_tree_as_it_was_reaches_no_one_and_is_killed_at_its_timeout(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    workspace = Workspace(load_settings(repo, sandbox="write"))
    running = Running(repo, functools.partial(workspace.tests.shell, cwd=repo))
    done = running.run({"command": "echo new > made.txt; rm calc.py; rm -rf tests; echo still here"})
    assert "Read-only file system" in done.text and "still here" in done.text and snapshot(repo) == before
    with Listener() as listener:
        probe = (f"{sys.executable} -c \"import socket; print([name for _, name in socket.if_nameindex()]);"
                 f"socket.create_connection(('127.0.0.1', {listener.port}), timeout=3).sendall(b'secret')\"")
        reached = running.run({"command": probe})
    assert "['lo']" in reached.text, "no interface but its own loopback: no other host can be reached"
    assert "exit 1" in reached.text and "Connection refused" in reached.text and listener.received == []
    slept = running.run({"command": "sleep 30", "timeout": 1})
    assert slept.summary == "run: sleep 30 → killed after 1 s" and "killed after 1 s" in slept.text
    workspace.close()


# ----- pure parts -----------------------------------------------------------------------------------------------------
def test_calls_written_as_text_in_the_shapes_models_write_them() -> None:
    assert written_calls('{"tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}}]}') == [
        WrittenCall("grep", {"pattern": "x"})]
    fenced = 'Let me look.\n```json\n{"tool_calls": [{"function": {"name": "read", "arguments": "{\\"path\\": ' \
             '\\"a.py\\"}"}}, {"tool": "symbol", "args": {"name": "f"},}]}\n```'
    assert written_calls(fenced) == [WrittenCall("read", {"path": "a.py"}), WrittenCall("symbol", {"name": "f"})]
    assert written_calls('{"changes": [], "tool_calls": [{"name": "grep"}]}') is None, "a plan beside calls wins"
    assert written_calls("no calls here") is None
    assert arguments("{'path': 'a.py',}") == {"path": "a.py"} and arguments("") == {}


def test_the_box_counts_calls_answers_a_repeat_with_a_note_and_stops_at_its_cap() -> None:
    echo = Tool(Spec("echo", "say it", {"type": "object", "properties": {"text": {"type": "string"}}}),
                lambda args: Result(text=str(args.get("text")), summary=f"echo: {args.get('text')}"))
    box = Toolbox([echo], max_calls=2)
    assert box.call("echo", {"text": "a"}).result.text == "a"
    again = box.call("echo", {"text": "a"})
    assert again.repeated and "same call was made above" in again.result.text
    assert box.exhausted and box.declared() is None and "calls of this answer are spent" in box.call(
        "echo", {"text": "b"}).result.text
    box.new_answer()
    assert box.declared() and box.call("nope", {}).result.error


def _server_tool(server: str, name: str, words: int) -> Spec:
    """An MCP server's tool whose description runs to about `words` words."""
    return Spec(f"{server}__{name}", "Does a thing. " * (words // 3), {"type": "object", "properties": {}},
                server=server)


OURS = [specs.SEARCH, specs.GREP, specs.READ, specs.SYMBOL, specs.RUN]
SERVERS = [_server_tool("docs", "lookup", 30), _server_tool("files", "small", 30), _server_tool("files", "large", 300),
           _server_tool("git", "log", 150)]


def test_the_tools_left_out_first_are_the_mcp_tools_the_task_does_not_name_largest_first_then_our_optional_ones() -> None:
    assert fit.leave_out_order([*OURS, *SERVERS], "fix add as the docs say") == [
        "files__large", "git__log", "files__small", "docs__lookup", "run", "symbol", "search"]
    named_git = fit.leave_out_order([*OURS, *SERVERS], "ask git for its log, then fix add")
    assert named_git[0] == "files__large" and named_git[3:] == ["git__log", "run", "symbol", "search"]
    assert fit.is_named(SERVERS[3], "see `git__log` first") and not fit.is_named(SERVERS[3], "a digit logged")


@pytest.mark.parametrize(("budget_of", "auto", "offered", "form"), [
    ("all", True, [*OURS, *SERVERS], Form.NATIVE),
    ("ours", True, [*OURS, SERVERS[0]], Form.NATIVE),  # docs__lookup is named: it goes last of the MCP tools
    ("short", True, [specs.GREP, specs.READ], Form.NATIVE),
    ("short in words", True, [specs.GREP, specs.READ], Form.JSON),  # auto tells them in words before it gives up
    ("nothing", True, [], Form.NATIVE),  # auto never stops a run for its tools
    ("nothing", False, [specs.GREP, specs.READ], Form.NATIVE),  # --tools native keeps them: the request may stop
])
def test_tools_that_do_not_fit_their_budget_are_narrowed_to_what_fits(budget_of: str, auto: bool, offered: list[Spec],
                                                                      form: Form) -> None:
    everything, task = [*OURS, *SERVERS], "fix add as the docs say"
    budgets = {"all": fit.price(everything, Form.NATIVE, 12), "ours": fit.price([*OURS, SERVERS[0]], Form.NATIVE, 12),
               "short": fit.price([specs.GREP, specs.READ], Form.NATIVE, 12),
               "short in words": fit.price([specs.GREP, specs.READ], Form.JSON, 12), "nothing": 10}
    offer = fit.fit(everything, Form.NATIVE, budget=budgets[budget_of], task=task, max_calls=12, auto=auto,
                    small=False)
    assert offer == fit.Offer(tuple(s.name for s in offered), form)


def test_a_small_window_gets_grep_and_read_described_in_words_and_the_box_says_what_it_left_out() -> None:
    """--tools auto in a window under 4,096 tokens: the short list in words; --tools native or json: as asked."""
    roomy = 10_000
    small = fit.fit([*OURS, *SERVERS], Form.NATIVE, budget=roomy, task="", max_calls=12, auto=True, small=True)
    assert small == fit.Offer(("grep", "read"), Form.JSON)
    asked = fit.fit([*OURS, *SERVERS], Form.NATIVE, budget=roomy, task="", max_calls=12, auto=False, small=True)
    assert asked.names == tuple(s.name for s in [*OURS, *SERVERS]) and asked.form == Form.NATIVE
    said: list[str] = []
    box = Toolbox([Tool(s, lambda args: Result(text="", summary="")) for s in [*OURS, *SERVERS]], say=said.append)
    assert box.narrow([*fit.SHORT_LIST, "search", "git__log"], Form.NATIVE, "the 8192-token context window")
    assert not box.narrow(box.names, Form.NATIVE, "the 8192-token context window"), "nothing changed, nothing said"
    assert box.narrow(["grep", "read"], Form.JSON, "the 2048-token context window")
    assert said == [
        "[Tools: left out to fit the 8192-token context window: symbol, run, docs__lookup, files (all 2 tools)]",
        "[Tools: left out to fit the 2048-token context window: search, git__log; grep and read described in words]"]
    assert box.names == ["grep", "read"] and box.declared() is None and box.call("run", {}).result.error


def test_the_tools_left_out_are_said_in_one_short_line_a_server_at_a_time() -> None:
    """Issue 61: the `[Tools: left out …]` line ran to six wrapped lines, a server's tools one by one. A server some
    of whose tools stay is said once, with how many of its tools went; one tool of a server, by its name."""
    build = [_server_tool("build", f"action_{i}", 3) for i in range(7)]
    said: list[str] = []
    box = Toolbox([Tool(s, lambda args: Result(text="", summary="")) for s in [*OURS, *SERVERS, *build]],
                  say=said.append)
    keep = [*fit.SHORT_LIST, "search", "symbol", "run", "docs__lookup", "build__action_0", "build__action_1"]
    assert box.narrow([*keep, "git__log"], Form.NATIVE, "the 8192-token context window")
    assert box.narrow(keep, Form.NATIVE, "the 8192-token context window")
    assert said == ["[Tools: left out to fit the 8192-token context window: files (all 2 tools), build (5 of 7 tools)]",
                    "[Tools: left out to fit the 8192-token context window: git__log]"]


def test_tool_results_are_shortened_oldest_first_before_anything_else() -> None:
    big = "line of a result\n" * 400
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "the task and its context"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
                                                                       "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "1", "content": big},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "2", "type": "function",
                                                                       "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "2", "content": big}]
    room = message_tokens(messages) - 1000
    fitted = fit_tool_results(messages, room)
    assert message_tokens(fitted) <= room and fitted[:3] == messages[:3]
    assert "left out" in fitted[3]["content"] and fitted[5]["content"] == big, "the oldest result went first"


# ----- a tool is declared once -----------------------------------------------------------------------------------
LINES_SPEC = '''
LINES = Spec.declared(
    "lines", "Count the lines of a file of the repository.",
    Argument("path", "repository-relative path", required=True),
    Argument("at_least", "say so when it has fewer", type=int, default=1),
    summary="how many lines a file has", leave_out=4)
'''
LINES_HANDLER = '''
    def lines(self, arguments: dict[str, Any]) -> Result:
        given = LINES.given(arguments)
        rel = self.view.resolve(given.text("path"))
        total, least = len(self.view.read(rel).splitlines()), given.number("at_least")
        short = f" (fewer than {least})" if total < least else ""
        return Result(text=f"{rel} has {total} lines{short}", summary=f"lines: {rel} → {total}")

    # ----- search'''


def _with_a_lines_tool(root: Path) -> Path:
    """A copy of this checkout with one more tool, `lines`: its declaration in specs.py, its handler in looking.py —
    nothing else."""
    import shutil

    copy = root / "checkout"
    shutil.copytree(ROOT / "code_assistant", copy / "code_assistant", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "main.py", copy / "main.py")
    declared = copy / "code_assistant" / "tools" / "specs.py"
    ours = "OURS = (SEARCH, GREP, READ, SYMBOL, RUN"
    text = declared.read_text().replace(f"\n{ours})", f"{LINES_SPEC}{ours}, LINES)")
    assert "LINES)" in text
    declared.write_text(text)
    handled = copy / "code_assistant" / "tools" / "looking.py"
    text = handled.read_text().replace("import GREP, GREP_LINES, READ,", "import GREP, GREP_LINES, LINES, READ,")
    first = "return [Tool(SEARCH, self.search),"
    text = text.replace(first, first.replace("[", "[Tool(LINES, self.lines), "))
    handled.write_text(text.replace("\n    # ----- search", LINES_HANDLER, 1))
    return copy


def test_a_tool_declared_once_reaches_every_door_and_the_model_and_is_left_out_when_it_does_not_fit(
        tmp_path: Path) -> None:
    """A new tool is its declaration (name, arguments with their defaults, a person's line, its turn to be left out)
    and its handler: the command line, the session, the MCP server and the model's tool list all have it, its default
    is the declared one, and a window too small for every tool leaves it out in its declared turn."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.repos import _cli_env

    copy, repo = _with_a_lines_tool(tmp_path), python_repo(tmp_path)
    main = [sys.executable, str(copy / "main.py")]

    def cli(*args: str, **run: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*main, *args], check=False, capture_output=True, text=True, timeout=180,
                              env=_cli_env(run.pop("url", None), "k", None), **run)  # type: ignore[call-overload]

    helped = cli("lines", "--help")
    assert helped.returncode == 0 and "say so when it has fewer (default 1)" in helped.stdout, helped.stderr
    assert "how many lines a file has" in cli("--help").stdout
    counted = cli("lines", "--repo", str(repo), "calc.py", stdin=subprocess.DEVNULL)
    assert counted.returncode == 0, counted.stderr
    assert "calc.py has 9 lines" in counted.stdout and "fewer" not in counted.stdout  # at_least: 1, as declared
    assert "(fewer than 50)" in cli("lines", "--repo", str(repo), "calc.py", "50", stdin=subprocess.DEVNULL).stdout

    with ScriptedServer([]) as idle:
        session = cli("chat", "--repo", str(repo), "--test-command", PYTEST, "--no-reproduce", input="/help\n"
                      "/lines calc.py 50\n", url=idle.url)
    assert session.returncode == 0, session.stderr
    assert re.search(r"/lines +PATH \[AT_LEAST\] +how many lines a file has", session.stdout), session.stdout
    assert "calc.py has 9 lines (fewer than 50)" in session.stdout

    with ScriptedServer([{"tool_calls": [call("lines", path="calc.py")]}, "calc.py has 9 lines."]) as server:
        asked = cli("ask", "--repo", str(repo), "how long is calc.py?", url=server.url, stdin=subprocess.DEVNULL)
    assert asked.returncode == 0, asked.stderr
    assert "lines" in {t["function"]["name"] for t in server.chat_requests[0]["tools"]}
    assert "calc.py has 9 lines" in server.chat_requests[1]["messages"][-1]["content"]

    params = StdioServerParameters(command=sys.executable, args=[str(copy / "main.py"), "mcp", "serve", "--repo",
                                                                 str(repo), "--index-path", str(tmp_path / "index")],
                                   env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    seen: dict[str, object] = {}

    async def agent() -> None:
        async with Client(params) as client:
            seen["tools"] = {t.name for t in (await client.list_tools()).tools}
            seen["lines"] = (await client.call_tool("lines", {"path": "calc.py"})).content[0].text

    import anyio

    anyio.run(agent)
    assert "lines" in seen["tools"] and "exec" not in seen["tools"]  # type: ignore[operator]
    assert "calc.py has 9 lines" in str(seen["lines"])

    fitted = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json
        from code_assistant.tools import fit, specs
        from code_assistant.tools.box import Form
        def offered(names):
            budget = fit.price([s for s in specs.OURS if s.name in names], Form.NATIVE, 12)
            return fit.fit(list(specs.OURS), Form.NATIVE, budget=budget, task="", max_calls=12, auto=True,
                           small=False).names
        print(json.dumps([specs.OPTIONAL, offered(["grep", "read", "lines"]), offered(["grep", "read"])]))""")],
        check=True, cwd=copy, capture_output=True, text=True, timeout=60)
    optional, room_for_it, no_room = json.loads(fitted.stdout)
    assert optional == ["run", "symbol", "search", "lines"]  # its turn, as declared: after ours that were there
    assert room_for_it == ["grep", "read", "lines"] and no_room == ["grep", "read"]
