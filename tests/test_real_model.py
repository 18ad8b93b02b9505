"""A real model end to end: SmolLM2-135M-Instruct served by llama-cpp-python at a 2,048-token window.

Between the tool and the server sits a recording proxy, so the assertions use what the server really said: its
status codes, its prompt-token counts, its answers. The tests assert the tool's behaviour — the window, structured
output, streaming, usage, the trajectory, a clean stop — never the model's wisdom: a 135M model rarely fixes
anything, and when it fails the repository is byte-exact afterwards and the exit status is 1.
"""
from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from code_assistant.model.trajectory import read_answers
from tests.llama_server import LlamaServer, RecordingProxy, answer_of
from tests.repos import CALC_PY, ROOT, TEST_CALC_PY, python_repo, read_until_closed, run_cli, snapshot

WINDOW = 2048
PYTEST = f"{sys.executable} -m pytest -q"
TASK = "Fix add() so the tests pass"


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with LlamaServer(n_ctx=WINDOW, log=tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


def test_a_server_whose_starter_is_killed_ends_too(tmp_path: Path) -> None:
    """A pytest killed by its timeout (kill -9: no __exit__ runs) used to leave its model server serving for ever, in
    a session of its own; now the server ends with the process that started it."""
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom tests.llama_server import LlamaServer\n"
         f"with LlamaServer(n_ctx=512, log=__import__('pathlib').Path({str(tmp_path / 'log')!r})) as server:\n"
         "    print(server.proc.pid, flush=True)\n    time.sleep(600)\n"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    server = int(starter.stdout.readline())
    os.kill(starter.pid, signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 30
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server), "the server outlived the process that started it"


def _alive(pid: int) -> bool:
    """Whether pid is a process that has not ended (a zombie has: its parent, gone, will never reap it here)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """calc.py with its bug, its tests, and a module of 120 functions: a plan request well over 2,048 tokens."""
    helpers = "\n\n".join(f'def helper_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n'
                          for i in range(120))
    return python_repo(tmp_path_factory.mktemp("real"), {
        "calc.py": CALC_PY, "helpers.py": helpers, "tests/test_calc.py": TEST_CALC_PY,
        "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("index")


def _restore(repo: Path) -> dict:
    """The repository as committed (a run that went green keeps its change), and its snapshot."""
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=repo, check=True)
    return snapshot(repo)


def test_a_run_keeps_every_request_within_the_window_and_stops_cleanly(llama: LlamaServer, repo: Path,
                                                                       index_dir: Path, tmp_path: Path) -> None:
    before = _restore(repo)
    with RecordingProxy(llama.url) as proxy:
        proc = run_cli(["--repo", str(repo), "--task", TASK, "--test-command", PYTEST, "--json", "--max-iterations",
                        "1", "--model", "smollm2", "--index-path", str(index_dir), "--log-dir", str(tmp_path / "runs"),
                        "--no-tools"],  # requests in the plan's JSON form, as a model without tools is asked
                       server_url=proxy.url, extra_env={"OPENAI_CONTEXT_WINDOW": str(WINDOW)}, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    if proc.returncode == 1:  # "rolled back" only when something was written to roll back
        assert snapshot(repo) == before
        assert result["rolled_back"] == any(o["outcome"] == "restored" for o in result["taken_back"])

    chats = proxy.chats
    # structured output: the nested form first, refused by llama-cpp-python with a 500 naming response_format; then
    # every request in the form it takes
    assert chats[0]["request"]["response_format"]["type"] == "json_schema"
    assert chats[0]["status"] == 500 and "response_format" in json.dumps(chats[0]["response"])
    assert [c["request"]["response_format"]["type"] for c in chats[1:]] == ["json_object"] * (len(chats) - 1)
    answered = [c for c in chats if c["status"] == 200]
    assert len(answered) == len(chats) - 1 >= 1, [c["status"] for c in chats]

    # every answer is streamed; llama-cpp-python's streams carry no usage, so the counts are the tool's and say so;
    # a local model has no price
    assert all(c["stream"] and c["events"] > 0 and c["usage"] is None for c in answered)
    assert result["tokens"]["calls"] == len(answered) and result["tokens"]["estimated"] is True
    assert result["cost_usd"] is None

    # the window: no request over it, by the server's own count of every prompt (asked again, unstreamed, afterwards)
    for chat in answered:
        assert _prompt_tokens(llama, chat["request"]) + chat["request"]["max_tokens"] <= WINDOW

    # the trajectory holds the raw answers, in order
    assert read_answers(Path(result["log"])) == [answer_of(c) for c in answered]


def test_ask_learns_the_window_from_the_refusal_and_streams_to_the_terminal(llama: LlamaServer, repo: Path,
                                                                            index_dir: Path) -> None:
    """No window is set and llama-cpp-python reports none: the first request is sized for the default 8,192 tokens
    (the question names helpers.py, whose 120 functions alone are over 2,048 tokens, so the context holds more than
    the server's window whatever else ranks).
    The server ends that stream with no event and drops the connection; asked once without streaming (on a new
    connection), it names its window; the question is asked again within it, and the answer streams to the
    terminal."""
    before = _restore(repo)
    env = {**os.environ, "OPENAI_API_KEY": "k", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    with RecordingProxy(llama.url) as proxy:
        env["OPENAI_BASE_URL"] = proxy.url
        terminal_side, process_side = pty.openpty()
        shown: list[str] = []  # the terminal is read while the command runs: a full one would stop its status line
        reader = threading.Thread(target=lambda: shown.append(_drain(terminal_side)), daemon=True)
        reader.start()
        try:
            proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--ask",
                                   "Why does add() return the wrong sum? And what does helpers.py do?", "--model", "smollm2", "--index-path",
                                   str(index_dir)], stdout=process_side, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=env, timeout=600, text=True, check=False)
        finally:
            os.close(process_side)
            reader.join(30)
        terminal = "".join(shown)
    assert proc.returncode == 0, terminal + proc.stderr
    assert "Traceback" not in proc.stderr and snapshot(repo) == before
    assert len(proxy.chats) == 3, [(c["status"], c.get("usage"), c.get("response")) for c in proxy.chats]
    first, second, *rest = proxy.chats
    assert first["stream"] and first["events"] == 0, "llama-cpp-python ends a stream over its window with no event"
    assert second["status"] == 400 and second["request"].get("stream") is not True
    assert f"maximum context length is {WINDOW} tokens" in json.dumps(second["response"])
    [last] = rest
    assert last["status"] == 200 and last["stream"] and last["content"].strip()
    assert "response_format" not in last["request"], "a question is answered in prose"
    assert " ".join(last["content"].split()) in " ".join(terminal.split()), "the answer streamed to the terminal"
    assert "[Indexing repository:" in terminal and f"[Window: {WINDOW} tokens, from the server's refusal;" in terminal


def test_the_window_learned_from_the_refusal_is_remembered_and_the_second_ask_is_refused_nothing(
        llama: LlamaServer, repo: Path, index_dir: Path) -> None:
    """Issue 61: each run against the same server spent its first request on a refusal to learn the 2,048 window. The
    first --ask learns it (refused, asked why, answered) and remembers it in the state folder; the second, a new
    process with the same state folder, starts within it: every request answered (none refused, none cut at the
    window), each within the window by the server's own count."""
    before = _restore(repo)
    args = ["--repo", str(repo), "--ask", "Why does add() return the wrong sum? And what does helpers.py do?",
            "--model", "smollm2", "--index-path", str(index_dir)]
    with RecordingProxy(llama.url) as proxy:
        first = run_cli(args, server_url=proxy.url, timeout=600)
        assert first.returncode == 0, first.stdout + first.stderr
        learned = len(proxy.chats)
        assert [c["status"] for c in proxy.chats][1:] == [400, 200], [c["status"] for c in proxy.chats]
        assert f"[Window: {WINDOW} tokens, from the server's refusal; remembered for this server and model " \
               f"(--context-window {WINDOW} sets it)]" in first.stdout
        second = run_cli(args, server_url=proxy.url, timeout=600)
        assert second.returncode == 0, second.stdout + second.stderr
        asked = proxy.chats[learned:]
    assert f"context window {WINDOW} tokens, from remembered: the server's refusal" in second.stdout
    assert "[Window: " not in second.stdout, "nothing learned again: no refusal, no answer cut at the window"
    assert asked and all(c["status"] == 200 and c["events"] > 0 for c in asked), [c["status"] for c in asked]
    for chat in asked:  # the first answered at once; another is the model's tool calls answered
        assert _prompt_tokens(llama, chat["request"]) + chat["request"]["max_tokens"] <= WINDOW
    assert snapshot(repo) == before


def test_a_run_without_a_window_learns_it_from_the_first_answer_the_server_cuts_at_it(llama: LlamaServer,
                                                                                      tmp_path: Path) -> None:
    """Issue 53: no window set, and llama-cpp-python reports none, so the plan request is sized for the default 8,192
    tokens. Here it fits under the server's 2,048 (helpers.py's 36 functions put it at about 1,970 of the server's
    tokens, its tools' schema included) but its answer cap does not: the server cuts the answer where the window ends,
    finish_reason "length", no usage, no word. That first answer is read as the window — one line naming the cut, not
    the answer limit — and the request is asked again at once within it; no request after it passes the window.
    The run's token budget ends it after that answer: what the model says is not this test's matter. (Prompt changes
    move the request's size: when the server refuses the first request instead of cutting its answer, take functions
    out of helpers.py; when the answer ends before the window, put some in.)"""
    helpers = "\n\n".join(f'def helper_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n'
                           for i in range(36))
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "helpers.py": helpers, "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    with RecordingProxy(llama.url) as proxy:
        proc = run_cli(["--repo", str(repo), "--task", TASK, "--test-command", PYTEST, "--max-tokens", "2500",
                        "--model", "smollm2", "--index-path", str(tmp_path / "index"), "--log-dir",
                        str(tmp_path / "runs")], server_url=proxy.url, timeout=600)
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stdout + proc.stderr
    assert "context window 8192 tokens, from the default" in proc.stdout and "over --max-tokens 2500" in proc.stdout
    assert len(proxy.chats) == 2, ([c["status"] for c in proxy.chats], proc.stdout)
    cut, asked_again = proxy.chats
    assert cut["status"] == 200 and cut["events"] > 0, "the server refused the first request: see the docstring"
    assert cut["request"]["max_tokens"] == 1024, "sized for the default window"
    assert proc.stdout.count(f"[Window: {WINDOW} tokens, from an answer cut off at the server's window;") == 1, \
        proc.stdout
    assert "answer limit" not in proc.stdout and "could not be read" not in proc.stdout
    assert "retry" not in proc.stderr and "Connection error" not in proc.stderr, proc.stderr
    assert asked_again["status"] == 200 and asked_again["events"] > 0
    assert _prompt_tokens(llama, asked_again["request"]) + asked_again["request"]["max_tokens"] <= WINDOW


def _prompt_tokens(llama: LlamaServer, request: dict) -> int:
    """The server's own count of a chat request's prompt: the request sent again without streaming (or a schema,
    which does not count), for one token."""
    body = {k: v for k, v in request.items() if k not in ("stream", "stream_options", "response_format")}
    body |= {"max_tokens": 1}
    post = urllib.request.Request(f"{llama.url}/chat/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(post, timeout=300) as answer:
        return int(json.loads(answer.read())["usage"]["prompt_tokens"])


def _drain(fd: int) -> str:
    try:
        return read_until_closed(fd).decode(errors="replace")
    finally:
        os.close(fd)


def test_the_counting_proxy_relays_streams_as_they_come_and_has_the_server_count_them(llama: LlamaServer) -> None:
    """The peers harness's proxy (bench/peers.py): an agent that stops reading an answer stops the server writing
    it, and its next request is answered whole; a stream, which llama-cpp-python sends without usage, is counted by
    the server once the agent is done."""
    import openai
    client_of = openai.OpenAI
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Count from 1 to 100, one per line."}],
            "temperature": 0, "max_tokens": 48}
    with RecordingProxy(llama.url, counted=True) as proxy:
        client = client_of(base_url=proxy.url, api_key="local")
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in
                           client.chat.completions.create(**body, stream=True) if chunk.choices)
        whole = client.chat.completions.create(**body)
        stream = client.chat.completions.create(**body | {"max_tokens": 1500}, stream=True)
        for read, _ in enumerate(stream):
            if read == 3:
                break
        stream.close()
        after = client.chat.completions.create(**body)
        deadline = time.monotonic() + 60  # the stopped stream's record comes once the server has stopped
        while len(proxy.chats) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        proxy.count_streams()
    first, _, stopped, _ = proxy.chats
    assert streamed == whole.choices[0].message.content == after.choices[0].message.content
    assert whole.usage is not None and first["usage"] == {
        "prompt_tokens": whole.usage.prompt_tokens, "completion_tokens": first["usage"]["completion_tokens"],
        "counted": "after the stream"}
    assert abs(first["usage"]["completion_tokens"] - whole.usage.completion_tokens) <= 2, \
        "the relayed text, as the server's tokenizer counts it"
    assert stopped["closed_by_client"] is True and stopped["usage"]["completion_tokens"] < 100, \
        "the server stopped where the client did, not at 1,500 tokens"
