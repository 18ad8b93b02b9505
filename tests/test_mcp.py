"""MCP both ways. The user's MCP servers are tools for the model (named server__tool), a server that fails or hangs is
named and left out, and a repository's `.mcp.json` starts nothing until a person approves its command line. And our
own operations are an MCP server other agents use: driven here by the official SDK's client over stdio."""
from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

from code_assistant.mcp.config import Origin, Transport, expand, parse
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
FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
QUICK = {"CODE_ASSISTANT_MCP_START_TIMEOUT": "15"}  # a hanging server is given up on sooner


def _docs(tmp_path: Path) -> list[str]:
    (tmp_path / "docs_server.py").write_text(DOCS_SERVER)
    return [sys.executable, str(tmp_path / "docs_server.py")]


def test_the_model_uses_the_users_mcp_server_and_a_failing_or_hanging_one_is_left_out(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    assert run_cli(["mcp", "add", "docs", "--", *_docs(tmp_path)]).returncode == 0
    run_cli(["mcp", "add", "gone", "--", str(tmp_path / "no-such-program")])
    run_cli(["mcp", "add", "sleepy", "--", sys.executable, "-c", "import time; time.sleep(120)"])
    marker = tmp_path / "started"
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": {"command": "touch", "args": [str(marker)]}}}))
    script = [{"tool_calls": [{"name": "docs__lookup", "arguments": {"term": "add"}}]}, FIX_ADD]
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url, extra_env=QUICK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[MCP") or "docs__lookup" in line]
    assert "[MCP: docs: 1 tool(s)]" in lines
    assert any(line.startswith("[MCP: gone left out: its command cannot start") for line in lines)
    assert any(line.startswith("[MCP: sleepy left out: it did not list its tools within 15 s") for line in lines)
    assert any(line.startswith("[MCP: theirs (.mcp.json: touch ") and "not started: not approved" in line
               for line in lines), lines
    assert "[docs__lookup → 1 line]" in proc.stdout and not marker.exists(), "an unapproved server never ran"
    assert "Traceback" not in proc.stderr
    assert {t["function"]["name"] for t in server.chat_requests[0]["tools"]} >= {"docs__lookup", "grep"}
    answered = server.chat_requests[1]["messages"][-1]
    assert answered["role"] == "tool" and "add() must return the sum" in answered["content"]


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


def test_our_operations_as_an_mcp_server_search_apply_test_and_undo(tmp_path: Path) -> None:
    """Another agent (the SDK's own client, over stdio) searches, is refused a read of a link out of the tree, applies
    a plan, the user writes a line into the same file, and undo takes back the plan's change alone."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    repo = python_repo(tmp_path)
    (tmp_path / ".netrc").write_text("machine example.com login me password netrc-marker-5120\n")
    (repo / "notes.py").symlink_to(tmp_path / ".netrc")  # the read gate keeps MCP's read in the tree too
    plan = {"changes": [{"file_path": "calc.py", "action": "modify", "search": "    return a - b",
                         "replace": "    return a + b"}]}

    async def drive() -> dict[str, str]:
        params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "main.py"), "mcp", "serve", "--repo",
                                                                     str(repo), "--test-command", PYTEST],
                                       env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
        seen: dict[str, str] = {}
        async with Client(params) as client:
            seen["tools"] = ",".join(sorted(t.name for t in (await client.list_tools()).tools))
            for name, arguments in (("search", {"query": "add returns the wrong sum"}), ("read", {"path": "notes.py"}),
                                    ("apply", {"plan": plan}), ("test", {})):
                seen[name] = (await client.call_tool(name, arguments)).content[0].text
            with (repo / "calc.py").open("a") as user:
                user.write("# the user's own line\n")
            seen["undo"] = (await client.call_tool("undo", {})).content[0].text
            seen["again"] = (await client.call_tool("undo", {})).content[0].text
        return seen

    seen = asyncio.run(asyncio.wait_for(drive(), 240))
    assert seen["tools"] == "apply,context,grep,read,search,symbol,test,undo"
    assert seen["search"].splitlines()[0].startswith("calc.py")
    assert "outside the repository" in seen["read"] and "netrc-marker" not in seen["read"]
    assert seen["apply"].startswith("Applied to calc.py") and "+    return a + b" in seen["apply"]
    assert seen["test"].startswith("2 passed")
    assert seen["undo"].startswith("Took back 'apply (MCP)' (calc.py)") and "merged" in seen["undo"]
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
