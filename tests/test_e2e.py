"""The whole tool, end to end: real CLI process, real HTTP to a scripted model, real test commands."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.repos import (
    CALC_PY,
    GO_FIX,
    NODE_FIX,
    ROOT,
    TEST_CALC_PY,
    answer,
    create,
    go_repo,
    modify,
    node_repo,
    progress_lines,
    python_repo,
    run_cli,
    snapshot,
    write_tree,
)
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b", "fix add")


def _run(repo: Path, server: ScriptedServer, *extra: str, task: str = "Fix add() so the tests pass",
         **kwargs: object) -> subprocess.CompletedProcess[str]:
    return run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, *extra],
                   server_url=server.url, **kwargs)  # type: ignore[arg-type]


def test_one_step_fix_prints_progress_in_order_and_goes_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = progress_lines(proc.stdout)
    expected = ["[Indexing repository:", "[Indexed:", "[Context:", "[Planning changes...]",
                "[Plan: 1 edit in 1 file: calc.py]", "[Editing: calc.py]", "[Testing (iteration 1)...]",
                "[Tests passed on iteration 1]"]
    positions = [next(i for i, line in enumerate(lines) if line.startswith(prefix)) for prefix in expected]
    assert positions == sorted(positions)
    assert "return a + b" in (repo / "calc.py").read_text()
    assert "Modified files:" in proc.stdout and "calc.py" in proc.stdout
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status.split() == ["M", "calc.py"], "no backups, index or state files in the repository"
    plan_request = server.chat_requests[0]["messages"][-1]["content"]
    assert "def add(a, b)" in plan_request and "test_add" in plan_request, "context and baseline failures sent"


THREE = {"calc.py": ("def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n\n\n"
                     "def subtract(a, b):\n    return a - b\n"),
         "tests/test_calc.py": ("from calc import add, multiply, subtract\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
                                "\n\ndef test_multiply():\n    assert multiply(3, 4) == 12\n\n\n"
                                "def test_subtract():\n    assert subtract(5, 3) == 2\n"),
         "pytest.ini": "[pytest]\npythonpath = .\n"}


def test_three_wrong_fixes_say_how_each_iteration_went_and_which_came_closest(tmp_path: Path) -> None:
    """Each fix request names the failing tests and shows the file as it is now; the person sees each iteration's
    counts, what it fixed and broke, and which iteration came closest."""
    repo = python_repo(tmp_path, THREE)
    before = snapshot(repo)
    answers = [answer(modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a * b"),
                      modify("calc.py", "def subtract(a, b):\n    return a - b", "def subtract(a, b):\n    return a + b")),
               answer(modify("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a + b")),
               answer(modify("calc.py", "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"),
                      modify("calc.py", "    return a * b", "    return a ** b"),
                      modify("calc.py", "def subtract(a, b):\n    return a + b", "def subtract(a, b):\n    return a - b"))]
    with ScriptedServer(answers) as server:
        proc = _run(repo, server, "--no-reproduce")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("[Iteration")] == [
        "[Iteration 1: 2 failed (test_add, test_subtract), 1 passed — broke test_subtract]",
        "[Iteration 2: 1 failed (test_subtract), 2 passed — fixed test_add]",
        ("[Iteration 3: 2 failed (test_add, test_multiply), 1 passed — fixed test_subtract; broke test_add, "
         "test_multiply]")]
    assert "[Tests failed. Analyzing errors...]" not in proc.stdout
    assert ("Result: FAILED (max_iterations: 1 passed, 2 failed) — best: iteration 2, 1 failed (test_subtract), 2 "
            "passed; rolled back to the start (git apply ") in proc.stdout
    fix_request = server.chat_requests[1]["messages"][-1]["content"]
    assert "test_add" in fix_request and "test_subtract" in fix_request, "the fix request names the failing tests"
    assert "return a * b" in fix_request, "the fix request shows the current content of the file"
    assert snapshot(repo) == before
    # issue 61: the best iteration's change is kept as a patch, and the line says how to have it back
    patch = re.search(r"\(git apply (\S+\.iteration-2\.patch) brings it back\)", proc.stdout)
    assert patch is not None, proc.stdout
    subprocess.run(["git", "apply", patch.group(1)], cwd=repo, check=True)
    assert (repo / "calc.py").read_text() == THREE["calc.py"].replace(
        "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b").replace(
        "def subtract(a, b):\n    return a - b", "def subtract(a, b):\n    return a + b")


def test_exhaustion_rolls_back_byte_for_byte_including_created_files(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "# user's uncommitted work\n")
    (repo / "notes.txt").write_bytes(b"untracked\r\nbytes \xff\n")
    before = snapshot(repo)
    bad = [answer(create("helpers/extra.py", "X = 1\n"),
                  modify("calc.py", "def multiply(a, b):", "def multiply(a, b):  # touched")),
           answer(modify("calc.py", "return a - b", "return a - b + 1")),  # each fix fails differently,
           answer(modify("calc.py", "return a - b + 1", "return b - a"))]  # so the loop runs to its limit
    with ScriptedServer(bad) as server:
        proc = _run(repo, server)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[Testing (iteration 3)...]" in proc.stdout
    assert "rolled back" in proc.stdout
    assert snapshot(repo) == before


def test_creating_a_new_module(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {
        "tests/test_greet.py": "from greet import hello\n\n\ndef test_hello():\n    assert hello('Ada') == 'Hello, Ada!'\n",
        "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    new = create("greet.py", "def hello(name: str) -> str:\n    return f'Hello, {name}!'\n")
    with ScriptedServer([answer(new)]) as server:
        proc = _run(repo, server, task="Create the greet module with hello(name)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (repo / "greet.py").read_text().startswith("def hello")


def test_chatty_fenced_answer_and_one_reask_after_garbage(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    chatty = f"Sure! Here is the plan:\n\n```json\n{answer(FIX_ADD)}\n```\n\nThis fixes the sign."
    with ScriptedServer(["I think the bug is in add, let me look {not json", chatty]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.chat_requests) == 2
    assert "could not be used" in server.chat_requests[1]["messages"][-1]["content"]


def test_server_error_is_retried_then_succeeds(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([{"status": 500, "message": "overloaded"}, answer(FIX_ADD)]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.chat_requests) == 2


def test_unauthorized_ends_at_once_with_one_line_and_no_change(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    with ScriptedServer([{"status": 401, "message": "Incorrect API key provided"}]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "401" in proc.stderr and "Traceback" not in proc.stderr
    assert len(server.chat_requests) == 1, "401 is not retried"
    assert snapshot(repo) == before


def test_hanging_test_is_killed_by_test_timeout(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {
        "slow.py": "def ready():\n    return False\n",
        "tests/test_slow.py": (
            "import subprocess, sys, time\nfrom slow import ready\n\n\n"
            "def test_hangs():\n    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            "    if not ready():\n        time.sleep(300)\n"),
        "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    before = snapshot(repo)
    started = time.monotonic()
    with ScriptedServer([answer(modify("slow.py", "return False", "return False  # still slow"))]) as server:
        proc = _run(repo, server, "--test-timeout", "3", "--max-iterations", "1", task="make it fast")
    assert time.monotonic() - started < 90
    assert proc.returncode == 1
    assert "timed out" in server.chat_requests[0]["messages"][-1]["content"]
    assert snapshot(repo) == before


def test_ctrl_c_rolls_back_and_exits_130(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": (
            "import os, time\nfrom calc import add\n\n\ndef test_add():\n"
            "    if os.path.exists('STARTED'):\n        open('SLEEPING', 'w').close()\n        time.sleep(120)\n"
            "    open('STARTED', 'w').close()\n    assert add(2, 3) == 5\n"),
        "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n",
        ".gitignore": "STARTED\nSLEEPING\n"})
    with ScriptedServer([answer(FIX_ADD)]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k"}
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                                 "--test-command", PYTEST], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("[Testing (iteration 1)"):
                break
        deadline = time.monotonic() + 60
        while not (repo / "SLEEPING").exists():  # the test of iteration 1 is running, and hangs
            assert time.monotonic() < deadline, "".join(seen)
            time.sleep(0.05)
        assert "return a + b" in (repo / "calc.py").read_text()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + out + err
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_context_only_json_needs_no_key_and_ranks_the_right_file(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    write_tree(repo, {"docs/guide.md": "# Guide\nHow to install.\n",
                      "shapes.py": "class Circle:\n    def area(self, r):\n        return 3.14 * r * r\n"})
    proc = run_cli(["--repo", str(repo), "--task", "add() returns the wrong sum", "--context-only", "--json"],
                   api_key=None)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["files"][0] == "calc.py"
    assert data["tokens"] > 0 and "calc.py" in data["context_files"]


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node/npm not installed")
def test_node_repo_with_npm_test(tmp_path: Path) -> None:
    repo = node_repo(tmp_path)
    with ScriptedServer([answer(NODE_FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", "npm test"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "adds" in server.chat_requests[0]["messages"][-1]["content"], "baseline failure named in the plan request"


@pytest.mark.skipif(shutil.which("go") is None, reason="go not installed")
def test_go_module_with_go_test(tmp_path: Path) -> None:
    repo = go_repo(tmp_path)
    gocache = tmp_path / "gocache"
    env = {"GOCACHE": str(gocache), "GOPATH": str(tmp_path / "gopath"), "GOFLAGS": "-mod=mod",
           "GOTOOLCHAIN": "local", "GOPROXY": "off"}
    with ScriptedServer([answer(GO_FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix Add", "--test-command", "go test ./..."],
                       server_url=server.url, extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TestAdd" in server.chat_requests[0]["messages"][-1]["content"]
    # go test -v prints the passing tests, but code under test can print those lines too: with no report of go
    # test's own (docs/runs.md, "What a pass is"), the success is not verified
    assert ("Result: SUCCESS, NOT VERIFIED (the tests pass; no test shows the task is done: go test gives no report of "
            "its tests that the tested code cannot print") in proc.stdout, proc.stdout


def test_a_second_answer_quoting_a_partial_line_is_applied_and_goes_green(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    wrong = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a * b")
    partial = modify("calc.py", "return a * b\n\n\ndef multiply", "return a + b\n\n\ndef multiply")  # starts and
    with ScriptedServer([answer(wrong), answer(partial)]) as server:                         # stops mid-line
        proc = _run(repo, server, "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Tests passed on iteration 2]" in proc.stdout
    assert (repo / "calc.py").read_text() == CALC_PY.replace("return a - b", "return a + b")
    records = [json.loads(line) for log in (tmp_path / "runs").glob("*.jsonl") for line in log.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["plan", "fix", "final"]
    assert records[0]["files"] == ["calc.py"] and records[0]["tests_failed"] == ["tests/test_calc.py::test_add"]
    assert records[1]["edits_failed"] == 0 and records[1]["test_exit_code"] == 0
    assert "def multiply" in records[1]["answer"]


def test_a_server_silent_while_it_reads_the_prompt_is_waited_for_not_asked_again(tmp_path: Path) -> None:
    """A CPU model reads the plan's prompt (about 1,500 tokens) at 600 tokens a second: silent for longer than
    --request-timeout, then it answers. A server not yet measured is allowed the time a slow one would need."""
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)], prompt_speed=600) as server:
        proc = _run(repo, server, "--request-timeout", "1", "--no-reproduce")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.chat_requests) == 1 and server.usages[0]["prompt_tokens"] > 600, "silent past the timeout"


def test_a_server_silent_past_what_it_was_allowed_is_given_up_on_in_one_line_and_a_rollback(tmp_path: Path) -> None:
    """The server's timings show it reads fast, so the fix request's silence of 3 s is past --request-timeout and
    past any prompt's reading: the run stops with a [...] line naming the option, rolled back, not asked again."""
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    with ScriptedServer([wrong, {"sleep": 3, "answer": answer(FIX_ADD)}, answer(FIX_ADD)], prompt_speed=100_000,
                        timings=True) as server:
        proc = _run(repo, server, "--request-timeout", "1", "--no-reproduce")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[Gave up waiting for the model server: it sent nothing for 1 s") and last.endswith("]")
    assert "--request-timeout" in last
    assert "Traceback" not in proc.stderr and len(server.chat_requests) == 2
    assert snapshot(repo) == before

GREET = 'def greet(name):\n    return "Hello " + name\n'


def test_a_repository_without_tests_ends_green_with_its_first_test_which_failed_before(tmp_path: Path) -> None:
    """No test and no --test-command: the command is inferred and said, the reproduction step writes the first test
    (pytest's, beside the module), which fails, the fix makes it pass, and it stays."""
    repo = write_tree(tmp_path / "proj", {"greet.py": GREET})
    first_test = 'from greet import greet\n\n\ndef test_greet():\n    assert greet("Ada") == "Hello, Ada!"\n'
    script = [answer(create("test_greet.py", first_test)),
              answer(modify("greet.py", 'return "Hello " + name', 'return f"Hello, {name}!"'))]
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "greet should say Hello, <name>!"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-m pytest (the default: no manifest names another;" in proc.stdout
    assert "[Baseline: no tests yet" in proc.stdout and "the first one is written before the fix]" in proc.stdout
    assert "[Reproduced: test_greet.py fails before any fix" in proc.stdout
    assert "Result: SUCCESS (verified: test_greet.py failed before, passes now; iteration 1)" in proc.stdout
    assert (repo / "test_greet.py").read_text() == first_test and 'f"Hello, {name}!"' in (repo / "greet.py").read_text()
    first_request = server.chat_requests[0]["messages"][-1]["content"]
    assert "The repository has no tests yet: this test is its first" in first_request
    assert "test_<module>.py (in tests/ or beside the module it tests)" in first_request


def test_a_first_test_that_cannot_import_the_code_is_no_reproduction_and_goes_back_to_the_model(tmp_path: Path) -> None:
    """Issue 61: a first test in tests/ of a flat repository, under the default command (`python -m pytest`, which
    puts the repository on the import path: `from greet import greet` works). One that imports a module that does
    not exist is collected with an error: not a reproduction, said as such, and sent back to the model as what it is;
    the test it writes next runs and fails on its assertion, and the run ends green."""
    repo = write_tree(tmp_path / "proj", {"greet.py": GREET})
    wrong = 'from greeting import greet\n\n\ndef test_greet():\n    assert greet("Ada") == "Hello, Ada!"\n'
    script = [answer(create("tests/test_greet.py", wrong)),
              answer(modify("tests/test_greet.py", "from greeting import greet", "from greet import greet")),
              answer(modify("greet.py", 'return "Hello " + name', 'return f"Hello, {name}!"'))]
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "greet should say Hello, <name>!"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("[Not a reproduction: tests/test_greet.py did not run (tests/test_greet.py could not be imported: "
            "ModuleNotFoundError: No module named 'greeting'); asking once more]") in proc.stdout
    assert "[Reproduced: tests/test_greet.py fails before any fix" in proc.stdout
    assert "Result: SUCCESS (verified: tests/test_greet.py failed before, passes now; iteration 1)" in proc.stdout
    told = server.chat_requests[1]["messages"][-1]["content"]
    assert "Your test did NOT RUN" in told and "No module named 'greeting'" in told


def test_an_unreadable_reproduction_answer_skips_the_reproduction_and_the_run_goes_on(tmp_path: Path) -> None:
    """Issue 61: a local model's answer to the reproduction request that cannot be read, twice, ended the run
    (model_error); it now goes on without a reproduction test, and says so."""
    repo = python_repo(tmp_path, {"calc.py": CALC_PY.replace("a - b", "a + b"), "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    script = ["I would write a test here but", "Still no JSON, sorry.",
              answer(modify("calc.py", "def add(a, b):", "def add(a: int, b: int) -> int:"))]
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Give add() type hints", "--test-command", PYTEST],
                       server_url=server.url)
    assert "model_error" not in proc.stdout, proc.stdout + proc.stderr
    assert ("[Not reproduced: the model's answer could not be read; going on without a reproduction test]"
            in proc.stdout)
    assert len(server.chat_requests) == 3, "the plan was asked for after the reproduction was skipped"
    assert "def add(a: int, b: int) -> int:" in (repo / "calc.py").read_text()
    assert proc.returncode == 0, proc.stdout + proc.stderr
