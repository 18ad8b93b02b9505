"""The peers harness (bench/peers.py) against the scripted server: one case, each agent in its own scratch copy behind
the recording proxy, our judge's verdict right for each (a scripted right fix resolves, a scripted wrong one does
not), the requests and tokens the proxy saw, and the user's tree untouched. A peer that is not installed under the
peers' folder (python -m bench.peers --install) has its test skipped with that reason."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.peers import DEFAULT_PEERS, Agent, AgentRun, Setup, peer_bin, run_one, table
from code_assistant.evaluate.cases import read_cases
from tests.repos import PYTEST, answer, modify, python_repo, snapshot
from tests.scripted_server import ScriptedServer

HIDDEN_TEST = """\
diff --git a/tests/test_hidden.py b/tests/test_hidden.py
new file mode 100644
--- /dev/null
+++ b/tests/test_hidden.py
@@ -0,0 +1,5 @@
+from calc import add
+
+
+def test_add_floats():
+    assert add(0.5, 0.25) == 0.75
"""
TASK = "add() in calc.py subtracts; make it add"
ANSWER_TOKENS = 23  # what the server's tokenizer says of a streamed answer's text
FIXED_CALC = "def add(a, b):\n    return a + b\n\n\ndef multiply(a, b):\n    return a * b\n"
WRONG_CALC = "def add(a, b):\n    return 5\n\n\ndef multiply(a, b):\n    return a * b\n"


def _which(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages"))
    if "mswea_bash_command" in text:
        return "mini"
    return "ours" if body.get("response_format") or "file_path" in text else "aider"


def _turn(body: dict[str, Any]) -> int:
    return sum(m.get("role") == "assistant" for m in body.get("messages") or [])


class Model:
    """Each agent's scripted answers in its own format: right, or (right=False) a wrong fix that turns the visible
    test green for 2 + 3 only."""

    def __init__(self, right: bool) -> None:
        self.right = right
        self.asked: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        if body.get("max_tokens") == 1:  # the harness waiting for the server to be free, before the agent starts
            return "ok"
        agent = _which(body)
        self.asked.append(agent)
        calc = FIXED_CALC if self.right else WRONG_CALC
        if agent == "ours":
            return answer(modify("calc.py", "    return a - b", "    return a + b" if self.right else "    return 5"))
        if agent == "mini":
            if _turn(body) == 0:
                command = f"cat > calc.py <<'EOF'\n{calc}EOF"
                return f"THOUGHT: add() subtracts; I rewrite it.\n\n```mswea_bash_command\n{command}\n```\n"
            return "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```\n"
        return f"add() subtracts. Here is the fixed file:\n\ncalc.py\n```\n{calc}```\n"


def _user(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "user").mkdir()
    repo = python_repo(tmp_path / "user")
    case = {"id": "calc-add", "repo": str(repo), "task": TASK, "test_command": PYTEST, "test_patch": HIDDEN_TEST,
            "FAIL_TO_PASS": ["tests/test_calc.py::test_add", "tests/test_hidden.py::test_add_floats"],
            "PASS_TO_PASS": ["tests/test_calc.py::test_multiply"]}
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(case) + "\n")
    return repo, cases


def _status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def _run(tmp_path: Path, agent: Agent, right: bool) -> tuple[AgentRun, Model, ScriptedServer, Path]:
    if agent != Agent.OURS and peer_bin(Setup("", "", peers=DEFAULT_PEERS), agent) is None:
        pytest.skip(f"{agent.value} is not installed under {DEFAULT_PEERS}: python -m bench.peers --install")
    repo, cases = _user(tmp_path)
    before = snapshot(repo), _status(repo)
    model = Model(right)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with ScriptedServer([model] * 12, stream_usage=False,  # as llama-cpp-python's, with its tokenizer's count
                        info={"/extras/tokenize/count": {"count": ANSWER_TOKENS}}) as server:
        setup = Setup(base_url=server.url, model="scripted", n_ctx=8192, wall_s=240, peers=DEFAULT_PEERS,
                      ours_args=("--no-reproduce",))
        run = run_one(read_cases(cases)[0], agent, setup, scratch, out=tmp_path / "out")
    assert snapshot(repo) == before[0] and _status(repo) == before[1], "the agent touched the user's tree"
    return run, model, server, scratch


@pytest.mark.parametrize("agent", list(Agent))
@pytest.mark.parametrize("right", [True, False], ids=["right-fix", "wrong-fix"])
def test_each_agent_is_judged_by_our_judge_in_its_own_copy(tmp_path: Path, agent: Agent, right: bool) -> None:
    run, model, server, scratch = _run(tmp_path, agent, right)
    assert set(model.asked) == {agent.value}, model.asked  # it, and only it, talked to the model
    assert run.verdict == ("resolved" if right else "unresolved"), run
    expected = {"tests/test_calc.py::test_add": "passed", "tests/test_hidden.py::test_add_floats": "passed",
                "tests/test_calc.py::test_multiply": "passed"}
    if not right:
        expected["tests/test_hidden.py::test_add_floats"] = "failed"  # add(0.5, 0.25) is 5: only the hidden test sees
    assert run.tests == expected
    assert not run.timed_out and run.wall_s > 0
    # what the proxy saw is what the server answered and counted: a stream, which carries no usage from this server,
    # is counted by it afterwards (its prompt asked again with max_tokens 1, its text by the tokenizer)
    settled, *rest = zip(server.chat_requests, server.usages, strict=True)
    assert settled[0]["max_tokens"] == 1, "the harness waits for a free server first, outside the agent's count"
    probes = [usage for body, usage in rest if not body.get("stream") and body.get("max_tokens") == 1]
    asked = [(body, usage) for body, usage in rest if body.get("stream") or body.get("max_tokens") != 1]
    assert len(probes) == sum(1 for body, _ in asked if body.get("stream")), "each stream counted once"
    assert run.requests == len(asked) >= 1 and run.refused == 0
    assert run.prompt_tokens == sum(usage["prompt_tokens"] for _, usage in asked) > 0
    assert run.completion_tokens == sum(ANSWER_TOKENS if body.get("stream") else usage["completion_tokens"]
                                        for body, usage in asked) > 0
    copies = [p for p in scratch.iterdir() if p.is_dir()]
    assert len(copies) == 1 and copies[0].name.startswith(f"{agent.value}-calc-add-")
    fixed = (copies[0] / "repo" / "calc.py").read_text()
    assert ("a + b" in fixed) == right
    commands = [json.loads(line) for line in (tmp_path / "out" / "commands.jsonl").read_text().splitlines()]
    assert [c["agent"] for c in commands] == [agent.value] and commands[0]["argv"]


def test_an_agent_that_is_not_installed_is_an_error_said_not_a_miss(tmp_path: Path) -> None:
    _, cases = _user(tmp_path)
    setup = Setup(base_url="http://127.0.0.1:9/v1", model="m", peers=tmp_path / "no-peers")
    run = run_one(read_cases(cases)[0], Agent.AIDER, setup, tmp_path)
    assert run.verdict == "error" and re.search(r"aider is not installed under .*no-peers", run.message)
    assert run.requests == 0


def test_the_table_says_resolved_median_and_total_per_agent() -> None:
    runs = [AgentRun("a", "ours", "resolved", wall_s=10, requests=2, prompt_tokens=100, completion_tokens=10),
            AgentRun("b", "ours", "unresolved", wall_s=30, requests=4, prompt_tokens=300, completion_tokens=30),
            AgentRun("a", "aider", "resolved", wall_s=5, requests=1, prompt_tokens=None, completion_tokens=None,
                     timed_out=True)]
    text = table(runs)
    assert "| a | aider | resolved (time limit) | 5 | 1 | ? | ? |" in text
    assert "| ours | 1/2 | 20 | 40 | 3.0 | 200 | 20 |" in text
    assert "| aider | 1/1 | 5 | 5 | 1.0 | nan | nan |" in text


def test_the_harness_is_a_command() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.peers"], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and "CASES, --base-url and --model are needed" in done.stderr


def test_settling_waits_out_a_request_an_agent_left_behind_longer_than_the_wall() -> None:
    """aider stopped at the 300 s limit on node-strip-json-comments-escapes left its request to the server, which
    read it for longer than the limit again: settling gave up after one limit and the harness stopped there, the
    cases after it not run. The server answers only after 3 s here, the limit being 1 s."""
    from bench.peers import settle

    with ScriptedServer([{"sleep": 3, "answer": "ok"}]) as server:
        waited = settle(Setup(base_url=server.url, model="m", wall_s=1.0))
    assert waited >= 3


def test_the_peers_python_skips_a_pyenv_shim_that_refuses_and_takes_one_that_starts(tmp_path: Path) -> None:
    from bench.peers import peers_python

    shim = tmp_path / "shims" / "python3.12"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    assert peers_python("python3.12", [str(shim), sys.executable]) == sys.executable
    with pytest.raises(SystemExit, match="no python3.12 that starts"):
        peers_python("python3.12", [str(shim), str(tmp_path / "missing")])
