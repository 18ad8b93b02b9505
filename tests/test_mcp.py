"""MCP both ways. The user's MCP servers are tools for the model (named server__tool), a server that fails or hangs is
named and left out, and a repository's `.mcp.json` starts nothing until a person approves its command line. And our
own operations are an MCP server other agents use: driven here by the official SDK's client over stdio."""
from __future__ import annotations

import asyncio
import json
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from code_assistant.tools.mcp.config import Origin, Transport, expand, parse
from tests.repos import CALC_PY, PYTEST, ROOT, Terminal, answer, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

DOCS_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("docs")


    @server.tool()
    def lookup(term: str) -> str:
        """Look a term up in the project's documentation."""
        return f"{term}: add() must return the sum of its two arguments."


    server.run()
''')
WIDE_SERVER = textwrap.dedent('''
    import sys
    from typing import Annotated

    from pydantic import Field
    from mcp.server.mcpserver import MCPServer

    name = sys.argv[1]
    server = MCPServer(name)
    WORDS = ("Handles the request against the configured backend, validating every argument against the server's own "
             "rules, and returns a structured summary of what changed, what was skipped and why. ")


    def act(path: Annotated[str, Field(description="The entry to act on, relative to the allowed root. " * 3)],
            mode: Annotated[str, Field(description="How to act: one of read, write, append, list or stat. " * 3)] = "read",
            depth: Annotated[int, Field(description="How deep to go below the path, 0 for the entry alone. " * 3)] = 0,
            ) -> str:
        return f"{name}: {mode} {path} (depth {depth})"


    for i in range(4):  # four tools of about 400 tokens each, as a filesystem or tracker server's are
        server.add_tool(act, name=f"action_{i}", description=f"Action {i} of {name}. " + WORDS * 4)
    server.run()
''')
FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
QUICK = {"CODE_ASSISTANT_MCP_START_TIMEOUT": "8"}  # a hanging server is given up on sooner (a live one lists in ~1 s)


def _docs(tmp_path: Path) -> list[str]:
    (tmp_path / "docs_server.py").write_text(DOCS_SERVER)
    return [sys.executable, str(tmp_path / "docs_server.py")]


def test_four_mcp_servers_in_a_default_window_leave_out_the_tools_that_do_not_fit_and_the_run_goes_on(
        tmp_path: Path) -> None:
    """Issue 53's first hour, on a terminal: the user's four MCP servers — docs, and three whose tools' schemas alone
    are larger than the default 8,192-token window holds — with no window known. The tools that do not fit are named
    in one line, largest first and never the docs server the task names; the model uses that one and the run goes
    green. A server that cannot start or hangs is named and left out, a repository's unapproved one is refused."""
    repo = python_repo(tmp_path)
    assert run_cli(["mcp", "add", "docs", "--", *_docs(tmp_path)]).returncode == 0
    (tmp_path / "wide_server.py").write_text(WIDE_SERVER)
    for name in ("files", "tickets", "build"):
        assert run_cli(["mcp", "add", name, "--", sys.executable, str(tmp_path / "wide_server.py"), name]).returncode == 0
    run_cli(["mcp", "add", "gone", "--", str(tmp_path / "no-such-program")])
    run_cli(["mcp", "add", "sleepy", "--", sys.executable, "-c", "import time; time.sleep(120)"])
    marker = tmp_path / "started"
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": {"command": "touch", "args": [str(marker)]}}}))
    script = [{"tool_calls": [{"name": "docs__lookup", "arguments": {"term": "add"}}]}, FIX_ADD]
    with ScriptedServer(script) as server:
        term = Terminal(["--repo", str(repo), "--task", "fix add as the docs server says", "--test-command", PYTEST,
                         "--no-reproduce"], server_url=server.url, extra_env=QUICK)
        try:
            term.send("n\r" if "Start it?" in term.expect(r"Start it\? \[y/N\]") else "")
            shown = term.expect(r"Result: SUCCESS")
            assert term.wait() == 0, shown
        finally:
            term.close()
    lines = [line for line in shown.splitlines() if line.startswith(("[MCP", "[Tools")) or "docs__lookup" in line]
    assert "[MCP: docs: 1 tool(s)]" in lines and "[MCP: files: 4 tool(s)]" in lines
    assert any(line.startswith("[MCP: gone left out: its command cannot start") for line in lines)
    assert any(line.startswith("[MCP: sleepy left out: it did not list its tools within 8 s") for line in lines)
    assert any(line.startswith("[MCP: theirs (.mcp.json: touch ") and "not started: not approved" in line
               for line in lines), lines
    [left_out] = [line for line in lines if line.startswith("[Tools: ")]
    assert left_out.startswith("[Tools: left out to fit the 8192-token context window: ") and "docs" not in left_out
    assert '[docs__lookup: term="add" → 1 line]' in lines
    assert not marker.exists(), "an unapproved server never ran"
    offered = [t["function"]["name"] for t in server.chat_requests[0]["tools"]]
    assert {"docs__lookup", "grep", "read", "search", "symbol"} <= set(offered)
    assert all(name not in left_out for name in offered) and len(offered) < 5 + 1 + 12, "some of the 12 are left out"
    assert all(f"{server}__" in left_out or f"{server} (all 4 tools)" in left_out
               for server in ("files", "tickets", "build") if not any(o.startswith(server) for o in offered))
    answered = server.chat_requests[1]["messages"][-1]
    assert answered["role"] == "tool" and "add() must return the sum" in answered["content"]


def test_a_small_window_names_the_mcp_servers_it_does_not_start_in_one_line(tmp_path: Path) -> None:
    """Issue 61: with --context-window 2048 the MCP servers were skipped without a word. --tools auto offers a window
    under 4,096 tokens grep and read only, so the user's servers are not started, and one line names them."""
    repo = python_repo(tmp_path)
    marker = tmp_path / "started"
    assert run_cli(["mcp", "add", "docs", "--", *_docs(tmp_path)]).returncode == 0
    assert run_cli(["mcp", "add", "tickets", "--", "touch", str(marker)]).returncode == 0
    with ScriptedServer([FIX_ADD]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--context-window", "2048"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("[MCP")]
    assert line == ("[MCP: docs, tickets not started: the 2048-token context window is offered grep and read only (a "
                    "larger window, or --tools native, offers them)]")
    assert not marker.exists()


def test_mcp_list_starts_each_server_that_would_start_and_add_refuses_a_name_already_there(
        tmp_path: Path, isolated_env: Path) -> None:
    repo = python_repo(tmp_path)
    with socket.socket() as probe:  # a port nothing listens on: a dead URL
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    assert run_cli(["mcp", "add", "docs", "--", *_docs(tmp_path)]).returncode == 0
    assert run_cli(["mcp", "add", "remote", "--", dead]).returncode == 0
    marker = tmp_path / "started"
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": {"command": "touch", "args": [str(marker)]}}}))
    listed = run_cli(["mcp", "list", "--repo", str(repo)], extra_env=QUICK)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert lines["docs"].endswith("started: 1 tool(s): lookup")
    assert f"{dead}  did not start: it failed to start (ConnectError" in lines["remote"]
    assert lines["theirs"].endswith("starts: when approved") and not marker.exists()

    config = isolated_env / ".config" / "code-assistant" / "mcp.json"
    before = config.read_text()
    again = run_cli(["mcp", "add", "remote", "--", "https://elsewhere.example/mcp"])
    assert again.returncode == 2 and f"already configured ({dead}); add --replace" in again.stderr
    assert config.read_text() == before
    replaced = run_cli(["mcp", "add", "remote", "--replace", "--", "https://elsewhere.example/mcp"])
    assert replaced.returncode == 0 and "[MCP: remote replaced in" in replaced.stdout
    assert json.loads(config.read_text())["mcpServers"]["remote"] == {"type": "http",
                                                                        "url": "https://elsewhere.example/mcp"}


def test_a_repositorys_server_starts_once_approved_on_a_terminal_and_asks_again_when_it_changes(
        tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    docs = _docs(tmp_path)
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": {"command": docs[0], "args": docs[1:]}}}))
    with ScriptedServer([FIX_ADD, FIX_ADD]) as server:
        for answer_given, asked in (("y", True), ("", False)):
            term = Terminal(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                             "--sandbox", "off"], server_url=server.url, extra_env=QUICK)
            try:
                if asked:
                    shown = term.expect(r"Start it\? \[y/N\]")
                    assert "asks to start the MCP server 'docs'" in shown and docs[1] in shown
                    term.send(f"{answer_given}\r")
                assert "[MCP: docs: 1 tool(s)]" in term.expect(r"Result: SUCCESS")
                assert term.wait() == 0
            finally:
                term.close()
            run_cli(["undo", "--repo", str(repo)])
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": {"command": docs[0], "args": [*docs[1:], "x"]}}}))
    with ScriptedServer([FIX_ADD]) as server:
        term = Terminal(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                        server_url=server.url, extra_env=QUICK)
        try:
            term.expect(r"Start it\? \[y/N\]")  # another command line: asked again
            term.send("n\r")
            assert "not started: not approved" in term.expect(r"Result: SUCCESS")
            assert term.wait() == 0
        finally:
            term.close()


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # in the 2026 protocol; used today
def test_our_operations_as_an_mcp_server_search_apply_test_and_undo_from_another_server_process(
        tmp_path: Path) -> None:
    """Another agent (the SDK's own client, over stdio, speaking the protocol of today's clients) sees which tools only
    look, reads the repository's files as resources (not one outside it), gets a prompt, hears the test run's progress
    and the assistant's log records, applies a plan and leaves; the user writes a line into the same file; a second
    server process (the 2026 protocol) takes the plan's change back alone, and then has nothing to undo. Each answer
    is in the words the console says; the server takes the repository options every command takes (--index-path)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    repo = python_repo(tmp_path)
    (tmp_path / "outside.py").write_text("SECRET = 1\n")
    (repo / ".env").write_text("OPENAI_API_KEY=sk-not-for-agents\n")
    (tmp_path / ".netrc").write_text("machine example.com login me password netrc-marker-5120\n")
    (repo / "notes.py").symlink_to(tmp_path / ".netrc")  # the read gate keeps MCP's read in the tree too
    plan = {"changes": [{"file_path": "calc.py", "action": "modify", "search": "    return a - b",
                         "replace": "    return a + b"}]}
    params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "main.py"), "mcp", "serve", "--repo",
                                                                 str(repo), "--test-command", PYTEST, "--index-path",
                                                                 str(tmp_path / "index")],
                                   env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    seen: dict[str, Any] = {"progress": [], "logs": []}

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        seen["progress"].append((progress, message))

    async def logged(record: Any) -> None:
        seen["logs"].append(record)

    async def refused(client: Any, uri: str) -> str:
        try:
            await client.read_resource(uri)
        except Exception as exc:  # noqa: BLE001 - the SDK's error for the server's refusal
            return str(exc)
        return "read"

    async def first() -> None:
        async with Client(params, mode="legacy", logging_callback=logged) as client:
            seen["tools"] = {t.name: t.annotations for t in (await client.list_tools()).tools}
            listed = {r.name: r.uri for r in (await client.list_resources()).resources}
            seen["listed"] = listed
            seen["calc"] = (await client.read_resource(listed["calc.py"])).contents[0].text
            seen["outside"] = await refused(client, (tmp_path / "outside.py").as_uri())
            seen["dotdot"] = await refused(client, f"{repo.as_uri()}/../outside.py")
            seen["dotenv"] = await refused(client, (repo / ".env").as_uri())
            seen["fix"] = (await client.get_prompt("fix", {"task": "add returns the wrong sum"})).messages[0]
            seen["search"] = (await client.call_tool("search", {"query": "add returns the wrong sum"})).content[0].text
            seen["read"] = (await client.call_tool("read", {"path": "notes.py"})).content[0].text
            await client.set_logging_level("info")
            seen["test"] = (await client.call_tool("test", {}, progress_callback=progressed)).content[0].text
            tested = len(seen["progress"])
            applied = await client.call_tool("apply", {"plan": plan}, progress_callback=progressed)
            seen["apply"] = applied.content[0].text
            seen["progress"], seen["applying"] = seen["progress"][:tested], seen["progress"][tested:]
            seen["diff"] = (await client.read_resource("code-assistant://diff")).contents[0].text

    async def second() -> None:
        async with Client(params) as client:
            seen["undo"] = (await client.call_tool("undo", {})).content[0].text
            seen["again"] = (await client.call_tool("undo", {})).content[0].text

    asyncio.run(asyncio.wait_for(first(), 240))
    tools = seen["tools"]
    assert sorted(tools) == ["apply", "context", "grep", "read", "search", "symbol", "test", "undo"]
    assert all(tools[name].read_only_hint for name in ("search", "grep", "read", "symbol", "context"))
    assert tools["apply"].destructive_hint and tools["undo"].destructive_hint and not tools["test"].destructive_hint
    assert tools["test"].idempotent_hint and not tools["test"].read_only_hint and not tools["test"].open_world_hint
    assert seen["listed"]["calc.py"] == (repo / "calc.py").as_uri() and ".env" not in seen["listed"]
    assert seen["calc"] == CALC_PY
    assert "outside the repository" in seen["outside"] and "outside the repository" in seen["dotdot"]
    assert "secret" in seen["dotenv"]
    assert seen["fix"].role == "user" and "# Task\nadd returns the wrong sum" in seen["fix"].content.text
    assert '"changes"' in seen["fix"].content.text and "def add(a, b):" in seen["fix"].content.text
    assert seen["search"].splitlines()[0].startswith("calc.py") and (tmp_path / "index").is_dir()
    assert "outside the repository" in seen["read"] and "netrc-marker" not in seen["read"]
    steps, words = zip(*seen["progress"])
    assert list(steps) == sorted(set(steps)), "progress only goes up"
    assert words[0] == f"Testing: {PYTEST}" and words[-1] == "Tests: 1 passed, 1 failed"
    assert seen["test"].startswith("[Tests: 1 passed, 1 failed]\n- tests/test_calc.py::test_add [failed]")
    assert any(r.level == "info" and r.logger == "code_assistant.verify.runner" for r in seen["logs"])
    assert all(r.level != "debug" for r in seen["logs"])
    assert seen["apply"].endswith("[Applied: calc.py]") and "+    return a + b" in seen["apply"]
    assert [words for _, words in seen["applying"]] == ["Applying the plan", "Applied to calc.py"]
    assert "+    return a + b" in seen["diff"]

    with (repo / "calc.py").open("a") as user:
        user.write("# the user's own line\n")
    asyncio.run(asyncio.wait_for(second(), 240))
    assert seen["undo"].startswith('[Undo: took back "apply (MCP)" (calc.py)]') and "merged" in seen["undo"]
    assert (repo / "calc.py").read_text() == CALC_PY + "# the user's own line\n"
    assert "nothing to undo" in seen["again"]


def test_mcp_json_in_the_shapes_agents_write_it() -> None:
    servers, unusable = parse({"mcpServers": {
        "docs": {"command": "npx", "args": ["-y", "@acme/docs"], "env": {"TOKEN": "${DOCS_TOKEN:-none}"}},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        "old": {"type": "sse", "url": "https://x"}, "bad name!": {"command": "x"}, "empty": {}}}, Origin.REPOSITORY)
    assert [(s.name, s.transport) for s in servers] == [("docs", Transport.STDIO), ("remote", Transport.HTTP)]
    assert servers[0].command_line() == "npx -y @acme/docs" and servers[1].command_line() == "https://mcp.example.com/mcp"
    assert {u.name for u in unusable} == {"old", "bad name!", "empty"}
    assert expand("${DOCS_TOKEN:-none}/${HOME}", {"HOME": "/h"}) == "none//h"
    assert parse({"servers": {}}, Origin.USER) == ([], [])
