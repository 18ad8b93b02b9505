"""Success that means the task is done: a reproduction test first, then the best of N candidates.

Through the real CLI, with a scripted model over HTTP and the repositories' real pytest runs. Candidates are asked
with their own seeds, so each one's answers are scripted apart (ScriptedServer(by_seed=...)).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.repos import ROOT, answer, create, modify, progress_lines, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
PYTEST_INI = "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"
GREEN = {"calc.py": "def add(a, b):\n    return a + b\n",
         "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
         "pytest.ini": PYTEST_INI}
RED = {**GREEN, "calc.py": "def add(a, b):\n    return a - b\n"}


def _cli(repo: Path, server: ScriptedServer, *extra: str, task: str,
         tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"TMPDIR": str(tmp)} if tmp else None
    return run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, *extra], server_url=server.url,
                   extra_env=env)


def _copies(tmp: Path) -> list[Path]:
    """The candidates' scratch copies left in the temporary directory."""
    return list(tmp.glob("ca-candidate-*"))


def _fix(extra_comment_lines: int) -> str:
    """A correct fix of add() whose diff is 1 removed line plus 1 + extra_comment_lines added lines."""
    comments = "".join(f"    # note {n}\n" for n in range(extra_comment_lines))
    return answer(modify("calc.py", "    return a - b\n", f"{comments}    return a + b\n", "fix add"))


WRONG = answer(modify("calc.py", "    return a - b\n", "    return a * b\n", "a wrong fix"))


# ----- reproduction first ---------------------------------------------------------------------------------------
def test_green_baseline_reproduction_sent_back_once_then_failing_then_fixed(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, GREEN)
    passes_at_once = answer(create("tests/test_subtract.py",
                                   "from calc import add\n\n\ndef test_subtract():\n    assert add(1, 1) == 2\n"))
    fails_now = answer(modify("tests/test_subtract.py", "from calc import add\n\n\ndef test_subtract():\n"
                              "    assert add(1, 1) == 2\n", "from calc import subtract\n\n\ndef test_subtract():\n"
                              "    assert subtract(3, 1) == 2\n"))
    fix = answer(modify("calc.py", "    return a + b\n", "    return a + b\n\n\ndef subtract(a, b):\n"
                        "    return a - b\n", "add subtract"))
    with ScriptedServer([passes_at_once, fails_now, fix]) as server:
        proc = _cli(repo, server, task="add a subtract(a, b) function to calc")
        requests = [r["body"] for r in server.requests if r.get("path", "").endswith("/chat/completions")]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = progress_lines(proc.stdout)
    assert "[The reproduction test passes on the current code; asking once more]" in lines
    assert any(line.startswith("[Reproduced: tests/test_subtract.py fails before any fix") for line in lines)
    assert "Your test PASSES on the current code" in requests[1]["messages"][-1]["content"]
    assert "tests/test_subtract.py" in requests[2]["messages"][-1]["content"], "the plan request names the test"
    assert (repo / "tests/test_subtract.py").read_text().startswith("from calc import subtract"), "the test is kept"
    assert "def subtract(a, b):" in (repo / "calc.py").read_text()
    assert "+++ b/tests/test_subtract.py" in proc.stdout, "the test is shown in the diff"
    assert ("Reproduction test: tests/test_subtract.py: failed before the fix, passes after the fix"
            in proc.stdout)
    log = Path(next(line for line in proc.stdout.splitlines() if line.startswith("Run log: "))[9:])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["kind"] for r in records[:2]] == ["reproduce", "reproduce"]
    assert records[0]["test_exit_code"] == 0 and records[1]["test_exit_code"] != 0, "passed at once, then failed"
    assert records[-1]["reproduction"].endswith("passes after the fix")


def test_a_reproduction_that_keeps_passing_is_taken_out_and_the_run_goes_on_without_it(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, GREEN)
    passing = answer(create("tests/test_again.py", "from calc import add\n\n\ndef test_again():\n"
                            "    assert add(2, 2) == 4\n"))
    still = answer(modify("tests/test_again.py", "add(2, 2) == 4", "add(3, 3) == 6"))
    docstring = answer(modify("calc.py", "def add(a, b):\n", 'def add(a, b):\n    """The sum."""\n'))
    with ScriptedServer([passing, still, docstring]) as server:
        proc = _cli(repo, server, task="document add")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("[Not reproduced: the test passed before any fix; going on without a reproduction test]"
            in progress_lines(proc.stdout))
    assert not (repo / "tests/test_again.py").exists(), "the test that captured nothing is taken out"
    assert "Reproduction test: not reproduced (the test passed before any fix)" in proc.stdout


def test_no_reproduce_skips_the_step_even_on_a_green_baseline(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, GREEN)
    docstring = answer(modify("calc.py", "def add(a, b):\n", 'def add(a, b):\n    """The sum."""\n'))
    with ScriptedServer([docstring]) as server:
        proc = _cli(repo, server, "--no-reproduce", task="document add")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not any("Reproduc" in line for line in progress_lines(proc.stdout))


def test_a_failed_run_rolls_back_the_reproduction_test_too(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, GREEN)
    before = snapshot(repo)
    failing = answer(create("tests/test_sub.py", "from calc import sub\n\n\ndef test_sub():\n"
                            "    assert sub(3, 1) == 2\n"))
    useless = answer(modify("calc.py", "def add(a, b):\n", "def add(a, b):  # add\n"))
    with ScriptedServer([failing, useless, useless]) as server:
        proc = _cli(repo, server, "--max-iterations", "2", task="add sub(a, b)")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert snapshot(repo) == before


# ----- best of N ----------------------------------------------------------------------------------------------
def test_three_candidates_the_smallest_passing_change_is_applied(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, RED)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    by_seed = {1: [WRONG], 2: [_fix(28)], 3: [_fix(6)]}  # 2: 30 changed lines, 3: 8 changed lines
    with ScriptedServer(by_seed=by_seed) as server:
        proc = _cli(repo, server, "--candidates", "3", "--max-iterations", "1", "--json", task="fix add", tmp=scratch)
        chats = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
        seeds = sorted(body.get("seed") for body in chats)
        temperatures = {body.get("temperature") for body in chats}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert [(c["candidate"], c["passed"], c["changed_lines"], c["chosen"]) for c in result["candidates"]] == [
        (1, False, 0, False), (2, True, 30, False), (3, True, 8, True)]
    assert (repo / "calc.py").read_text() == ("def add(a, b):\n" + "".join(f"    # note {n}\n" for n in range(6))
                                              + "    return a + b\n")
    assert seeds == [1, 2, 3] and 0.0 not in temperatures, "each candidate has its own seed, temperature above 0"
    assert result["files_modified"] == ["calc.py"]
    records = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    assert {r["candidate"] for r in records if r["kind"] == "final" and r["candidate"]} == {1, 2, 3}
    assert any(r["kind"] == "candidate" and r["candidate"] == 3 and r["test_exit_code"] == 0 for r in records)
    assert not _copies(scratch), "no scratch copy is left"


def test_one_reproduction_test_holds_every_candidate_and_is_kept_with_the_winner(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, GREEN)
    reproduction = answer(create("tests/test_sub.py", "from calc import sub\n\n\ndef test_sub():\n"
                                 "    assert sub(3, 1) == 2\n"))
    wrong_sub = answer(modify("calc.py", "    return a + b\n", "    return a + b\n\n\ndef sub(a, b):\n"
                              "    return b - a\n"))
    right_sub = answer(modify("calc.py", "    return a + b\n", "    return a + b\n\n\ndef sub(a, b):\n"
                              "    return a - b\n"))
    with ScriptedServer([reproduction], by_seed={1: [wrong_sub], 2: [right_sub]}) as server:
        proc = _cli(repo, server, "--candidates", "2", "--max-iterations", "1", "--json", task="add sub(a, b)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert [(c["candidate"], c["passed"], c["chosen"]) for c in result["candidates"]] == [(1, False, False),
                                                                                         (2, True, True)]
    assert result["reproduction"] == "tests/test_sub.py: failed before the fix, passes after the fix"
    assert sorted(result["files_modified"]) == ["calc.py", "tests/test_sub.py"]
    assert "return a - b" in (repo / "calc.py").read_text() and (repo / "tests/test_sub.py").exists()


def test_all_candidates_fail_the_repository_is_byte_exact_and_no_copy_is_left(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, RED)
    before = snapshot(repo)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with ScriptedServer(by_seed={n: [WRONG, WRONG] for n in (1, 2, 3)}) as server:
        proc = _cli(repo, server, "--candidates", "3", "--max-iterations", "2", task="fix add", tmp=scratch)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Result: FAILED (no_candidate_passed: none of the 3 candidates passed)" in proc.stdout
    assert "Candidates:" in proc.stdout and "<- applied" not in proc.stdout
    assert snapshot(repo) == before
    assert not _copies(scratch)


def test_max_tokens_caps_the_sum_over_all_candidates(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, RED)
    before = snapshot(repo)
    with ScriptedServer(by_seed={n: [_fix(0)] for n in (1, 2)}) as server:
        proc = _cli(repo, server, "--candidates", "2", "--max-tokens", "1000", "--json", task="fix add")
    result = json.loads(proc.stdout)
    reasons = [c["stop_reason"] for c in result["candidates"]]
    # one answer is ~700 tokens, under the cap alone: whichever candidate counts second sees the sum over it
    assert "cost_cap" in reasons, reasons
    if "passed" in reasons:  # the first one counted before the second's answer came: it stands
        assert proc.returncode == 0 and "return a + b" in (repo / "calc.py").read_text()
    else:
        assert proc.returncode == 1 and snapshot(repo) == before


def test_ctrl_c_while_candidates_run_stops_their_tests_and_removes_their_copies(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    files = {**RED, "tests/test_calc.py": (
        "import os, time\nfrom calc import add\n\n\ndef test_add():\n"
        "    if 'ca-candidate-' in os.getcwd():  # only in a candidate's copy: hang, saying who we are\n"
        f"        open(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close()\n"
        "        time.sleep(300)\n"
        "    assert add(2, 3) == 5\n")}
    repo = python_repo(tmp_path, files)
    before = snapshot(repo)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with ScriptedServer(by_seed={n: [_fix(0)] for n in (1, 2)}) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "TMPDIR": str(scratch),
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        # unconfined: the marks are written outside the copies and name host pids (sandboxed: test_sandbox.py)
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                                 "--test-command", PYTEST, "--candidates", "2", "--sandbox", "off"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        hanging = [int(p.name) for p in marks.iterdir()]
        assert len(hanging) == 2, "both candidates' tests are running"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert snapshot(repo) == before
    assert not _copies(scratch)
    for pid in hanging:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid


# ----- bad input ----------------------------------------------------------------------------------------------
def test_bad_candidate_counts_and_combinations_are_one_line_errors(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, RED)
    before = snapshot(repo)
    for args, message in [(["--candidates", "0"], "--candidates must be at least 1"),
                          (["--candidates", "2", "--dry-run"], "cannot be combined with --candidates")]:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, *args])
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    log = tmp_path / "run.jsonl"
    log.write_text("")
    proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--candidates", "2",
                    "--replay", str(log)])
    assert proc.returncode == 2 and "cannot be combined with --candidates" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


# ----- an attempt is built from the same kit and writes nothing of the run it belongs to ---------------------------
def test_a_candidate_built_by_the_workspace_leaves_the_parents_values_untouched(tmp_path: Path) -> None:
    import dataclasses

    from code_assistant.agent.best_of import BestOf
    from code_assistant.agent.candidates import ScratchCopy
    from code_assistant.agent.kit import loop_config
    from code_assistant.agent.loop import Run
    from code_assistant.agent.state import Prepared
    from code_assistant.agent.stop import Stop
    from code_assistant.model.chat import OpenAIChat
    from code_assistant.settings import load_settings
    from code_assistant.workspace import Workspace

    repo = python_repo(tmp_path, RED)
    before = snapshot(repo)
    settings = load_settings(repo, test_command=PYTEST, reproduce=False, tools="off")
    with ScriptedServer(by_seed={1: [_fix(0)]}) as server:
        model = OpenAIChat("gpt-4o", api_key="k", base_url=server.url, sleep=lambda s: None)
        with Workspace(settings, model=model) as workspace:
            parent = Run(workspace.kits.run(repo, model, task="fix add"), loop_config(settings))
            prepared = parent.prepare("fix add")
            values_before = (parent.iteration, list(parent.answers), parent.failures, parent.refused_in_a_row)
            usage_before = dataclasses.replace(model.usage)
            best_of = BestOf(parent, lambda scratch, number: workspace.kits.attempt(parent.kit, scratch, number), 1)
            scratch_copy = ScratchCopy(repo, exclude=[settings.index_path, settings.state_path])
            with scratch_copy as scratch:
                candidate = best_of.candidate(1, scratch)
                index = dataclasses.replace(prepared.index, repo=scratch)
                result = candidate.finish(lambda: candidate.attempt("fix add", Prepared(index=index,
                                                                                        baseline=prepared.baseline)))
                assert (result.success, result.stop_reason) == (True, Stop.PASSED)
                assert "return a + b" in (scratch / "calc.py").read_text()
    assert candidate.kit.candidate == 1 and candidate.iteration == 1 and candidate.answers == [_fix(0)]
    assert candidate.kit.model is not model and candidate.kit.model.seed == 1  # type: ignore[attr-defined]
    assert (parent.iteration, parent.answers, parent.failures, parent.refused_in_a_row) == values_before, \
        "the parent's values are as they were"
    assert model.usage == usage_before and parent.kit.editor.modified_files == []
    assert snapshot(repo) == before, "the attempt worked in its copy only"
    assert parent.parts.meter.total() == usage_before + candidate.kit.model.usage, "its usage joins the run's meter"
    assert [r["seed"] for r in server.chat_requests] == [1]
