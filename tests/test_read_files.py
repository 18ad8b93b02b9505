"""The model sees more files than the budget can show — a map of the ranked files after those shown, a line each,
then more of them by path alone — and may ask to read one before it changes it (a change with action "read"): the
same request comes back with that file shown first, and nothing else from that answer is applied. Only files of the
repository's index are shown. This is the flow without tools (--no-tools); with tools, a "read" change is a call of
the read tool (tests/test_tools.py).

Through the real CLI, with a scripted model over HTTP and the repository's real pytest run.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.repos import answer, modify, progress_lines, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
MAP_HEADER = "### More files, ranked after those above"
LIST_HEADER = "### Further down the ranking"


def _module(name: str) -> str:
    """A module that uses calc.add, long enough that a small budget cannot show them all."""
    body = "".join(f"def {name}_total_{i}(rows):\n    total = 0\n    for row in rows:\n"
                   f"        total = add(total, row * {i})\n    return total\n\n\n" for i in range(6))
    return f"from calc import add\n\n\n{body}"


FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n",
    **{f"shop/{name}.py": _module(name) for name in ("cart", "invoice", "ledger", "refunds", "payroll", "taxes", "orders",
                                                                 "stock", "wages", "fees")},
    ".env": "OPENAI_API_KEY=sk-live-secret-value-1234567890abcdef\n",
}
FIX = modify("calc.py", "    return a - b\n", "    return a + b\n", "add adds")


def _map(request: dict[str, Any]) -> list[str]:
    """The paths on the map of more files in a request's last message."""
    text = request["messages"][-1]["content"]
    if MAP_HEADER not in text:
        return []
    lines = text.split(MAP_HEADER, 1)[1].splitlines()[1:]
    return [line.split(":", 1)[0] for line in lines if re.match(r"^[\w./-]+\.py(:|$)", line)]


def _listed(request: dict[str, Any]) -> list[str]:
    """The paths listed after the map's lines (`directory/: name, name`) in a request's last message."""
    text = request["messages"][-1]["content"]
    if LIST_HEADER not in text:
        return []
    paths: list[str] = []
    for line in text.split(LIST_HEADER, 1)[1].splitlines()[1:]:
        match = re.match(r"^([\w./-]+)/: (.+)$", line)
        if not match:
            break
        paths += [name if match[1] == "." else f"{match[1]}/{name}" for name in match[2].split(", ")]
    return paths


def _shown(request: dict[str, Any], path: str) -> bool:
    return f"### {path}\n" in request["messages"][-1]["content"]


def _chat(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests if r.get("path", "").endswith("/chat/completions")]


def _read_then_fix(repo: Path, pick: Callable[[dict[str, Any]], str], budget: int
                   ) -> tuple[subprocess.CompletedProcess, list[dict[str, Any]], str]:
    """A run whose model first asks to read the file `pick` chooses from its request, then fixes calc.py: the
    process, the chat requests and the path asked for."""
    asked: list[str] = []

    def read_the_picked_file(request: dict[str, Any]) -> str:
        asked.append(pick(request))
        return answer({"file_path": asked[0], "action": "read", "description": "see how it calls add"})

    with ScriptedServer([read_the_picked_file, answer(FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add in calc.py subtracts; shop totals are wrong",
                        "--test-command", PYTEST, "--no-tools", "--context-tokens", str(budget)], server_url=server.url)
        requests = _chat(server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(asked) == 1 and len(requests) == 2
    return proc, requests, asked[0]


def test_a_file_on_the_map_is_read_on_request_and_then_changed(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    proc, (first, second), path = _read_then_fix(repo, lambda request: _map(request)[0], 1000)
    assert not _shown(first, path), "the file asked for was on the map, not shown"
    assert _shown(second, path), "the plan request came again with that file shown"
    assert f"### {path}\n```\n{FILES[path].rstrip()}\n```" in second["messages"][-1]["content"], \
        "shown whole, first"
    assert f"[The model asks to read {path}; asking again with it shown]" in progress_lines(proc.stdout)
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (repo / path).read_text() == FILES[path], "a read changes nothing"


def test_a_file_listed_by_path_alone_is_read_on_request(tmp_path: Path) -> None:
    many = {f"shop/m{i:02d}.py": "from calc import add\n\n" + "".join(f"print(add({i}, {j}))\n" for j in range(40))
            for i in range(80)}  # more files that use add than a map of 40 lines holds
    repo = python_repo(tmp_path, {**{k: v for k, v in FILES.items() if not k.startswith("shop/")}, **many})
    proc, (first, second), path = _read_then_fix(repo, lambda request: _listed(request)[-1], 3000)
    assert len(_map(first)) == 40 and path in many, "the map's lines are full; the path comes after them"
    assert path not in _map(first) and not _shown(first, path)
    assert _shown(second, path) and f"[The model asks to read {path}; asking again with it shown]" in \
        progress_lines(proc.stdout)
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_reads_outside_the_index_are_not_shown_and_a_second_read_is_ignored(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-THE-REPOSITORY\n")
    reads = answer(*({"file_path": p, "action": "read", "description": "see it"}
                     for p in ("../outside.txt", str(outside), ".env", "no/such/file.py", "shop/cart.py")))
    read_again_and_fix = answer({"file_path": "shop/taxes.py", "action": "read", "description": "and this"}, FIX)
    with ScriptedServer([reads, read_again_and_fix]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add in calc.py subtracts; shop totals are wrong",
                        "--test-command", PYTEST, "--no-tools", "--context-tokens", "1000"], server_url=server.url)
        requests = _chat(server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = progress_lines(proc.stdout)
    for path in ("../outside.txt", str(outside), ".env", "no/such/file.py"):
        assert f"[Not shown: {path} is not a file of the repository's index]" in lines
    assert "[The model asks to read shop/cart.py; asking again with it shown]" in lines
    assert "[Ignored: the model asked to read shop/taxes.py again; going on with its other changes]" in lines
    assert len(requests) == 2 and _shown(requests[1], "shop/cart.py")
    note = requests[1]["messages"][-1]["content"].rsplit("# The files you asked to read", 1)[1]
    assert "Shown first in the context above: shop/cart.py." in note
    assert f"(only the files in the context and on its\nmap of more files can be read): ../outside.txt, {outside}, " \
           ".env, no/such/file.py." in note, "the model is told which reads it cannot have"
    sent = "\n".join(str(m["content"]) for r in requests for m in r["messages"])
    assert "OUTSIDE-THE-REPOSITORY" not in sent and "sk-live-secret-value" not in sent
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n", "the answer's edit applied"


def test_a_read_only_answer_to_a_failing_run_changes_nothing_and_rolls_back(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    before = snapshot(repo)
    read = answer({"file_path": "shop/cart.py", "action": "read", "description": "see it"})
    with ScriptedServer([read, read, read, read]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add in calc.py subtracts", "--test-command", PYTEST, "--no-tools",
                        "--max-iterations", "1"], server_url=server.url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert snapshot(repo) == before


def test_a_read_of_nothing_readable_is_asked_again_with_the_reason(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, FILES)
    with ScriptedServer([answer({"file_path": "../../etc/passwd", "action": "read", "description": "see it"}),
                         answer(FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add in calc.py subtracts", "--test-command", PYTEST, "--no-tools"],
                       server_url=server.url)
        requests = _chat(server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = progress_lines(proc.stdout)
    assert "[Not shown: ../../etc/passwd is not a file of the repository's index]" in lines
    assert "[Asking again: none of the files the model asked to read can be shown]" in lines
    assert "Shown first in the context above: none. Not files of this repository" in requests[1]["messages"][-1][
        "content"]
    assert "root:" not in "\n".join(str(m["content"]) for r in requests for m in r["messages"])
