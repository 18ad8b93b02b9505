"""A run's requests recorded, diffed and replayed (bench/peers.py, bench/replay.py): the harness writes every request
ours sends and the answer it got, a second run of the same case beside the first; two runs of one case ask the very
same requests, whatever scratch folder each ran in; a request that differs is shown where it parts; a recorded
request sent again gets the server's answer compared with the recorded one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.peers import Agent, Setup, run_one
from bench.replay import diff_runs, parting, read_exchanges
from code_assistant.evaluate.cases import read_cases
from tests.repos import PYTEST, answer, modify, python_repo
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


def _case(tmp_path: Path) -> Path:
    (tmp_path / "user").mkdir()
    repo = python_repo(tmp_path / "user")
    case = {"id": "calc-add", "repo": str(repo), "task": "add() returns the wrong result: make the failing test pass",
            "test_command": PYTEST, "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
            "PASS_TO_PASS": ["tests/test_calc.py::test_multiply"]}
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(case) + "\n")
    return cases


def _model(body: dict[str, Any]) -> str:
    if body.get("max_tokens") == 1:  # the harness waiting for a free server
        return "ok"
    if sum(m.get("role") == "assistant" for m in body["messages"]) == 0:  # first a wrong fix: a failing run fed back
        return answer(modify("calc.py", "    return a - b", "    return a * 1 - b"))
    return answer(modify("calc.py", "    return a * 1 - b", "    return a + b"))


def _two_runs(tmp_path: Path) -> tuple[Path, list[Path]]:
    case = read_cases(_case(tmp_path))[0]
    out = tmp_path / "out"
    files = []
    with ScriptedServer([_model] * 12, stream_usage=False) as server:
        setup = Setup(base_url=server.url, model="scripted", wall_s=240, ours_args=("--no-reproduce",))
        for n in (1, 2):
            (tmp_path / f"scratch{n}").mkdir()
            run = run_one(case, Agent.OURS, setup, tmp_path / f"scratch{n}", out=out)
            assert run.verdict == "resolved", run
            files.append(Path(run.requests_file))
    return out, files


def test_two_runs_of_a_case_send_the_same_requests_and_each_is_recorded(tmp_path: Path) -> None:
    out, (first, second) = _two_runs(tmp_path)
    assert first == out / "requests" / "calc-add.ours.1.jsonl" and second == out / "requests" / "calc-add.ours.2.jsonl"
    a, b = read_exchanges(first), read_exchanges(second)
    assert len(a) == len(b) == 2, "a plan and a fix, each with the server's answer"
    assert all(e["status"] == 200 and e["request"]["messages"] and e["response"]["choices"] for e in a + b)
    for x, y in zip(a, b, strict=True):
        assert parting(x["request"], y["request"]) is None
    # the second request carries the failing run's output, and still nothing of where the run was
    sent = json.dumps([e["request"] for e in a + b])
    assert "AssertionError" in sent or "assert" in sent
    assert str(tmp_path) not in sent and "scratch" not in sent
    assert list(diff_runs(a, b)) == [
        f"request {n}: the same; answer the same (prompt tokens {x['response']['usage']['prompt_tokens']} / "
        f"{y['response']['usage']['prompt_tokens']}, generated {x['response']['usage']['completion_tokens']} / "
        f"{y['response']['usage']['completion_tokens']})" for n, (x, y) in enumerate(zip(a, b, strict=True), 1)]


def test_a_request_that_differs_is_shown_where_it_parts(tmp_path: Path) -> None:
    base = {"model": "m", "temperature": 0, "messages": [{"role": "system", "content": "rules"},
                                                         {"role": "user", "content": "task\nrun at /tmp/a\nend"}]}
    other = json.loads(json.dumps(base))
    other["messages"][1]["content"] = "task\nrun at /tmp/b\nend"
    part = parting(base, other)
    assert part is not None and part.where == "messages[1] (user)"
    assert "-run at /tmp/a" in part.diff and "+run at /tmp/b" in part.diff
    assert parting(base, {**base, "temperature": 0.7}).where == "temperature"
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text(json.dumps({"request": base, "response": {"choices": [{"message": {"content": "x"}}]}}) + "\n")
    b.write_text(json.dumps({"request": other, "response": {"choices": [{"message": {"content": "y"}}]}}) + "\n")
    done = subprocess.run([sys.executable, "-m", "bench.replay", "diff", str(a), str(b)], capture_output=True,
                          text=True, check=True, cwd=ROOT)
    assert done.stdout.startswith("request 1: differs at messages[1] (user); answer differs")
    assert "+run at /tmp/b" in done.stdout and "-x" in done.stdout and "+y" in done.stdout


def test_a_recorded_request_is_sent_again_and_its_answer_compared(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    record.write_text(json.dumps({"request": request, "response": {"choices": [{"message": {"content": "one"}}]}})
                      + "\n")
    with ScriptedServer(["one", "two"], stream_usage=False) as server:
        done = subprocess.run([sys.executable, "-m", "bench.replay", "replay", str(record), "--base-url", server.url,
                               "--times", "2"], capture_output=True, text=True, check=True, cwd=ROOT)
        asked = server.chat_requests
    lines = done.stdout.splitlines()
    assert lines[0].startswith("request 1: answer the same") and lines[1].startswith("request 1: answer differs")
    assert "+two" in done.stdout
    assert [r["messages"] for r in asked] == [request["messages"]] * 2 and not any(r.get("stream") for r in asked)
