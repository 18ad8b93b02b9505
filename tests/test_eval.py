"""`eval`: the agent over a set of cases, as a user runs it — the real CLI in a subprocess, each case's agent the
product's own command line against a scripted model server over HTTP, real pytest runs judged by the test runner in
the sandbox, a real local Dask cluster.

The four cases: one the agent resolves; one it rolls back after four iterations (a loop the summary lists); one whose
test command cannot run; one whose agent says green while a hidden FAIL_TO_PASS test (applied by the judge after the
agent stopped) still fails.
"""
from __future__ import annotations

import json
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.repos import PYTEST, ROOT, Terminal, answer, modify, python_repo, snapshot
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
F2P = ["tests/test_calc.py::test_add", "tests/test_hidden.py::test_add_floats"]
P2P = ["tests/test_calc.py::test_multiply"]
TASKS = {"resolved": "Fix add() so that it adds [case resolved]",
         "rolled-back": "Fix add() so that it adds [case rolled-back]",
         "cannot-run": "Fix add() so that it adds [case cannot-run]",
         "green-not-resolved": "Fix add() so that it adds [case green-not-resolved]"}
RIGHT = answer(modify("calc.py", "    return a - b", "    return a + b"))
# wrong four times, each time failing differently (the same failure twice would stop the loop as no progress)
WRONG = [answer(modify("calc.py", "    return a - b", "    return 10")),
         *(answer(modify("calc.py", f"    return {n}", f"    return {n + 1}")) for n in (10, 11, 12))]
GREEN_ONLY = answer(modify("calc.py", "    return a - b", "    return int(a) + int(b)"))  # the floats still fail
RUN_OPTIONS = ["--max-iterations", "4", "--no-reproduce"]


def _cases(repo: Path) -> list[dict[str, Any]]:
    case = {"repo": str(repo), "test_command": PYTEST, "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P,
            "test_patch": HIDDEN_TEST, "language": "python"}
    cases = [{**case, "id": name, "task": task} for name, task in TASKS.items()]
    cases[2]["test_command"] = "no-such-test-runner --all"
    return cases


class Model:
    """The scripted model's answers by case, whatever order the cases' requests come in (they run in parallel)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = {name: list(given) for name, given in answers.items()}
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        text = json.dumps(body.get("messages"))
        name = next(name for name, task in TASKS.items() if task in text)
        with self.lock:
            self.asked.append(name)
            return self.answers[name].pop(0)

    def server(self, requests: int = 40) -> ScriptedServer:
        return ScriptedServer([self] * requests)


def _answers(rolled_back: list[str] | None = None) -> dict[str, list[str]]:
    return {"resolved": [RIGHT], "rolled-back": rolled_back or list(WRONG), "cannot-run": [],
            "green-not-resolved": [GREEN_ONLY]}


def eval_cli(args: list[str], server: ScriptedServer | None, cwd: Path,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`code-assistant eval ...` from `cwd`, as a user runs it (the model's address passed through to every run): the
    cases file's repositories lie beside `cwd`, which the user allows (--case-root)."""
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    more = ["--base-url", server.url, *RUN_OPTIONS] if server else []
    more += [] if args[:1] == ["compare"] else ["--case-root", str(cwd.parent)]
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", *args, *more], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def _results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def _verdicts(results: dict[str, dict[str, Any]]) -> dict[str, tuple]:
    """What must not depend on where a case ran."""
    return {case: (r["verdict"], r["resolved"], r["agent_success"], r["stop_reason"], r["exit_code"], r["iterations"],
                   r["failing_tests"], r["tests"], r["files_modified"], r["prompt_versions"], r["model"])
            for case, r in results.items()}


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The user's repository (every case copies it), where they run the eval from, and their cases file; the tree and
    the working directory are compared byte for byte at the module's end."""
    root = tmp_path_factory.mktemp("user")
    repo = python_repo(root)
    work = root / "work"
    work.mkdir()
    cases = work / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in _cases(repo)))
    before = snapshot(repo), snapshot(work), _status(repo)
    yield {"repo": repo, "work": work, "cases": cases, "root": root}
    evals = {p for p in snapshot(work) if p.startswith("eval-")}
    assert {p: v for p, v in snapshot(work).items() if p not in evals} == before[1]
    assert snapshot(repo) == before[0], "a case ran in the user's tree"
    assert _status(repo) == before[2]


def _status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def first(user: dict[str, Any]) -> dict[str, Any]:
    model = Model(_answers())
    with model.server() as server:
        proc = eval_cli([str(user["cases"]), "--out", "eval-first", "--workers", "2", "--json"], server, user["work"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"proc": proc, "out": user["work"] / "eval-first", "model": model}


def test_four_cases_get_the_judges_verdicts_not_the_agents(first: dict[str, Any]) -> None:
    results = _results(first["out"])
    assert {case: r["verdict"] for case, r in results.items()} == {
        "resolved": "resolved", "rolled-back": "unresolved", "cannot-run": "error", "green-not-resolved": "unresolved"}

    resolved = results["resolved"]
    assert (resolved["agent_success"], resolved["stop_reason"], resolved["iterations"]) == (True, "passed", 1)
    assert resolved["tests"] == {test: "passed" for test in F2P + P2P}  # the hidden test too, applied after the agent
    assert resolved["failing_tests"] == [0] and resolved["files_modified"] == ["calc.py"]
    assert resolved["prompt_versions"] and resolved["model"] and resolved["calls"] == 1
    assert resolved["prompt_tokens"] > 0 and resolved["completion_tokens"] > 0
    assert Path(resolved["trajectory"]).is_file() and Path(resolved["agent_log"]).is_file()
    assert resolved["trajectory"].startswith(str(first["out"]))

    rolled = results["rolled-back"]
    assert (rolled["agent_success"], rolled["stop_reason"], rolled["iterations"]) == (False, "max_iterations", 4)
    assert rolled["failing_tests"] == [1, 1, 1, 1] and rolled["calls"] == 4
    assert rolled["tests"]["tests/test_calc.py::test_add"] == "failed"

    cannot = results["cannot-run"]
    assert (cannot["stop_reason"], cannot["exit_code"], cannot["iterations"]) == ("test_command_error", 2, 0)
    assert "no-such-test-runner" in cannot["message"] and cannot["tests"] == {}

    green = results["green-not-resolved"]
    assert (green["agent_success"], green["stop_reason"]) == (True, "passed")
    assert green["tests"] == {"tests/test_calc.py::test_add": "passed", "tests/test_hidden.py::test_add_floats": "failed",
                              "tests/test_calc.py::test_multiply": "passed"}
    assert sorted(first["model"].asked) == sorted(["resolved", "green-not-resolved", *["rolled-back"] * 4])


def test_the_summary_says_the_rate_the_disagreements_and_the_long_loops(first: dict[str, Any]) -> None:
    summary = json.loads(first["proc"].stdout)
    assert (summary["cases"], summary["resolved"], summary["errors"], summary["resolve_rate"]) == (4, 1, 1, 0.25)
    assert summary["agent_green"] == 2 and summary["green_but_unresolved"] == ["green-not-resolved"]
    assert summary["iterations"] == {"0": 1, "1": 2, "4": 1}
    assert summary["long_loops"] == [{"id": "rolled-back", "iterations": 4, "stop_reason": "max_iterations",
                                      "failing_tests": [1, 1, 1, 1], "verdict": "unresolved"}]
    assert summary["cost_usd"] is None and summary["cost_per_resolved"] is None  # a local model has no price
    assert summary["ran"] == 4 and summary["missing"] == []
    shown = first["proc"].stderr
    assert "[eval: 4 of 4 cases to run]" in shown
    assert "rolled-back: UNRESOLVED (max_iterations, 4 iterations, failing 1 → 1 → 1 → 1" in shown


def test_without_a_terminal_each_phase_of_each_case_is_a_line_as_it_begins(first: dict[str, Any]) -> None:
    lines = first["proc"].stderr.splitlines()
    said = [line.removeprefix("[eval] rolled-back: ") for line in lines if line.startswith("[eval] rolled-back: ")]
    assert said[:6] == ["fetching the repository", *(f"agent, iteration {n}" for n in range(1, 5)), "judging"], said
    assert said[6].startswith("UNRESOLVED (max_iterations, 4 iterations") and len(said) == 7
    resolved = [line for line in lines if line.startswith("[eval] resolved: ")]
    assert [line.split(": ", 1)[1] for line in resolved[:3]] == ["fetching the repository", "agent, iteration 1",
                                                                  "judging"]
    assert Path(_results(first["out"])["rolled-back"]["agent_log"]) == first["out"] / "logs" / "rolled-back.log"


def test_a_second_run_resumes_and_runs_only_what_is_not_done(first: dict[str, Any], user: dict[str, Any]) -> None:
    out = first["out"]
    kept = (out / "results.jsonl").read_text()
    model = Model({name: [] for name in TASKS})  # any request would fail the case
    with model.server() as server:
        again = eval_cli([str(user["cases"]), "--out", "eval-first", "--workers", "2"], server, user["work"])
    assert again.returncode == 0, again.stderr
    assert "[eval: 0 of 4 cases to run; 4 already done (resumed)]" in again.stderr
    assert "Resolved: 1/4 (25%); 1 could not be judged" in again.stdout
    assert (out / "results.jsonl").read_text() == kept and model.asked == []

    lines = kept.splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(line for line in lines if '"id": "cannot-run"' not in line))
    with model.server() as server:
        partly = eval_cli([str(user["cases"]), "--out", "eval-first"], server, user["work"])
    assert "[eval: 1 of 4 cases to run; 3 already done (resumed)]" in partly.stderr, partly.stderr
    assert set(_results(out)) == set(TASKS) and model.asked == []
    with model.server() as server:
        errors = eval_cli([str(user["cases"]), "--out", "eval-first", "--rerun-errors"], server, user["work"])
    assert "[eval: 1 of 4 cases to run; 3 already done (resumed)]" in errors.stderr  # cannot-run: an error

    with model.server() as server:
        other = eval_cli([str(user["cases"]), "--out", "eval-first", "--base-url", server.url, "--max-iterations", "2",
                          "--no-reproduce"], None, user["work"])
    assert other.returncode == 2 and "holds results run with another options" in other.stderr


def test_compare_names_the_case_whose_verdict_changed(first: dict[str, Any], user: dict[str, Any]) -> None:
    model = Model(_answers(rolled_back=[RIGHT]))
    with model.server() as server:
        second = eval_cli([str(user["cases"]), "--out", "eval-second", "--only", "rolled-back", "--only", "resolved",
                           "--workers", "2"],
                          server, user["work"])
    assert second.returncode == 0, second.stderr
    compared = eval_cli(["compare", "eval-first", "eval-second"], None, user["work"])
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert lines[:2] == ["Changed verdict (1):", "  rolled-back: unresolved -> resolved"]
    assert any(line.split() == ["resolved", "1/2", "(50%)", "2/2", "(100%)"] for line in lines), compared.stdout
    assert "Only in eval-first (left out of the totals): cannot-run, green-not-resolved" in compared.stdout


def test_the_same_cases_on_a_local_dask_cluster_get_the_same_results(first: dict[str, Any],
                                                                      user: dict[str, Any]) -> None:
    model = Model(_answers())
    with model.server() as server:
        proc = eval_cli([str(user["cases"]), "--out", "eval-cluster", "--cluster", "local", "--workers", "2"], server,
                        user["work"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _verdicts(_results(user["work"] / "eval-cluster")) == _verdicts(_results(first["out"]))
    lines = proc.stderr.splitlines()
    assert "[eval] rolled-back: fetching the repository" in lines and "[eval] rolled-back: agent, iteration 2" in lines
    for case in TASKS:  # each phase sent by the worker as a Dask event, none shown after the case's result
        said = [line.split(": ", 1)[1] for line in lines if line.startswith(f"[eval] {case}: ")]
        assert said[-1].split()[0] in ("RESOLVED", "UNRESOLVED", "ERROR"), said
    workers = {r["worker"] for r in _results(user["work"] / "eval-cluster").values()}
    assert workers and all(w.startswith("tls://127.0.0.1:") for w in workers), workers  # Dask's, on loopback, TLS


def test_a_case_whose_agent_could_not_start_is_an_error_not_a_miss(user: dict[str, Any]) -> None:
    """No model server: the agent refuses before it starts; the judge would find the tests failing, but the agent
    never ran, so the case is not counted as one it failed."""
    proc = eval_cli([str(user["cases"]), "--out", "eval-no-server", "--only", "resolved", "--base-url",
                     "http://127.0.0.1:9/v1", "--request-timeout", "5"], None, user["work"])
    assert proc.returncode == 0, proc.stderr
    result = _results(user["work"] / "eval-no-server")["resolved"]
    assert (result["verdict"], result["exit_code"], result["iterations"]) == ("error", 2, 0)
    assert result["message"].startswith("the agent did not run: ") and "127.0.0.1:9" in result["message"]


def test_a_bad_cases_file_is_one_line_and_runs_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text('{"id": "a", "repo": {"pypi": "six"}, "task": "t", "test_command": "pytest"}\n')
    proc = eval_cli([str(bad), "--out", "out"], None, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: {bad}:1: a PyPI repo names one version: "
                                   '{"pypi": "name==1.2.3"}, not \'six\'')
    assert not (tmp_path / "out").exists()
    refused = eval_cli([str(bad), "--test-command", "pytest"], None, tmp_path)
    assert refused.returncode == 2
    assert "eval: --test-command is not for an eval: each case names its test command" in refused.stderr


def test_the_shipped_set_is_written_from_its_source_and_reads_as_cases() -> None:
    from code_assistant.evaluate.cases import read_cases

    source = runpy.run_path(str(ROOT / "evals" / "smoke_cases.py"))
    shipped = ROOT / "evals" / "smoke.jsonl"
    assert shipped.read_text() == "".join(json.dumps(case) + "\n" for case in source["cases"]())
    cases = read_cases(shipped)
    assert 10 <= len(cases) <= 20
    assert {case.language for case in cases} == {"python", "javascript", "go", "rust"}
    assert all(case.fail_to_pass and case.test_patch and "network" in case.requires for case in cases)


# ----- the pure parts, directly -------------------------------------------------------------------------------------
def test_a_case_line_is_read_with_swe_bench_lists_and_sources_of_every_kind(tmp_path: Path) -> None:
    from code_assistant.evaluate.cases import CaseError, SourceKind, parse_case

    line = {"id": "c-1", "task": "t", "test_command": "pytest", "FAIL_TO_PASS": '["a::b"]', "PASS_TO_PASS": ["c"]}
    case = parse_case({**line, "repo": "repos/x"}, where="f:1", base=tmp_path)
    assert (case.source.kind, case.source.where) == (SourceKind.PATH, str(tmp_path / "repos" / "x"))
    assert (case.fail_to_pass, case.pass_to_pass, case.judged_by) == (("a::b",), ("c",), "pytest")
    local = parse_case({**line, "repo": {"git": "../mirror", "commit": "abc1234"}}, where="f:1", base=tmp_path,
                       roots=[tmp_path.parent])
    assert local.source.where == str(tmp_path.parent / "mirror") and not local.source.needs_network
    remote = parse_case({**line, "repo": {"git": "https://example.invalid/r", "commit": "abc1234"}}, where="f:1",
                        base=tmp_path)
    assert remote.source.needs_network and remote.source.describe() == "https://example.invalid/r@abc1234"
    assert parse_case({**line, "repo": {"npm": "@scope/pkg@1.2.3"}}, where="f:1", base=tmp_path).source.needs_network
    for bad, said in (({"git": "https://x.invalid/r"}, "needs the commit"), ({"npm": "left-pad"}, "names one version"),
                      ({"pypi": "a==1", "npm": "b@1.0.0"}, "repo is a path"), ({"path": "x", "commit": "abc1234"},
                                                                              "unknown key 'commit'")):
        with pytest.raises(CaseError, match=said):
            parse_case({**line, "repo": bad}, where="f:1", base=tmp_path)
    with pytest.raises(CaseError, match="unknown field 'instance'"):
        parse_case({**line, "repo": "x", "instance": 1}, where="f:1", base=tmp_path)


def test_the_judge_names_a_test_the_runner_never_showed_missing_not_passed() -> None:
    from code_assistant.evaluate.cases import Case, Source, SourceKind
    from code_assistant.evaluate.judge import statuses, verdict_of
    from code_assistant.verify.outputs import TestFailure
    from code_assistant.verify.runner import TestResult

    result = TestResult(command=["pytest"], exit_code=1, passed=False, timed_out=False, output="", duration_s=1.0,
                        failures=[TestFailure(test_id="t.py::test_b")], passes=frozenset({"t.py::test_a"}))
    found = statuses(["t.py::test_a", "t.py::test_b", "t.py::test_gone"], result)
    assert found == {"t.py::test_a": "passed", "t.py::test_b": "failed", "t.py::test_gone": "missing"}
    case = Case(id="x", source=Source(SourceKind.PATH, "/"), task="t", test_command="pytest",
                fail_to_pass=("t.py::test_a",))
    assert verdict_of(case, {"t.py::test_a": "passed"}, result) == "resolved"  # the red elsewhere is not this case's
    assert verdict_of(case, {"t.py::test_a": "missing"}, result) == "unresolved"
    unnamed = Case(id="x", source=Source(SourceKind.PATH, "/"), task="t", test_command="pytest")
    assert verdict_of(unnamed, {}, result) == "unresolved"


def test_a_run_log_gives_the_failing_tests_per_iteration_of_the_run_itself() -> None:
    from code_assistant.evaluate.steps import summarize

    def step(**fields: Any) -> str:
        return json.dumps({"format": 3, "model": "m", "candidate": None, "timed_out": False, **fields})
    log = summarize([step(kind="reproduce", prompt_version="reproduce/v1", test_exit_code=1, tests_failed=["r"]),
                     step(kind="plan", prompt_version="plan/v1", test_exit_code=1, tests_failed=["a", "b"]),
                     step(kind="fix", prompt_version="fix/v1", test_exit_code=1, tests_failed=["a"], candidate=2),
                     step(kind="fix", prompt_version="fix/v1", test_exit_code=2, tests_failed=[]),
                     step(kind="fix", prompt_version="fix/v1", test_exit_code=None, tests_failed=[]),
                     '{"format": 3, "kind": "fix", "cut sh', step(kind="fix", test_exit_code=0, tests_failed=[])])
    assert log.failing == (2, None, 0) and log.model == "m"
    assert log.prompt_versions == ("reproduce/v1", "plan/v1", "fix/v1")


def test_the_run_options_given_to_eval_are_passed_on_as_a_run_spells_them() -> None:
    from code_assistant.cli import evaluate, parse_arguments

    _, args = parse_arguments(["eval", "cases.jsonl", "--no-tools", "--no-reproduce", "--pass-env", "A", "--pass-env",
                               "B", "--max-iterations", "2", "--base-url", "http://h/v1", "--workers", "3"])
    words = evaluate.options(args)
    assert words.run_args == ("--base-url", "http://h/v1", "--no-tools", "--pass-env", "A", "--pass-env", "B",
                              "--max-iterations", "2", "--no-reproduce")
    assert evaluate.measured(words.run_args) == ("--no-tools", "--pass-env", "A", "--pass-env", "B",
                                                  "--max-iterations", "2", "--no-reproduce")
    assert (words.workers, words.out) == (3, Path("eval-runs") / "cases")


# ----- what eval says (issue 61, item 4) ------------------------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_each_case_line_says_why_it_was_not_resolved_and_the_summary_names_the_errors(user: dict[str, Any]) -> None:
    """A git case whose server refuses (its error's cause at the end of a long line), and a wrong fix the agent calls
    green: the case lines say the whole cause and the hidden test that failed; the summary names the error case with
    the option that runs it again, and no stop reason reads 'none'."""
    url = f"http://127.0.0.1:{_closed_port()}/" + "a-long-path/" * 12 + "repository.git"
    cases = user["root"] / "says.jsonl"
    cases.write_text(json.dumps({"id": "unreachable", "repo": {"git": url, "commit": "abc1234"}, "task": "t",
                                 "test_command": PYTEST}) + "\n"
                     + json.dumps(_cases(user["repo"])[3]) + "\n")
    model = Model(_answers())
    with model.server() as server:
        proc = eval_cli([str(cases), "--out", "eval-says"], server, user["work"])
    assert proc.returncode == 0, proc.stderr
    lines = {line.split(":")[0].removeprefix("[eval] "): line for line in proc.stderr.splitlines()
             if line.startswith("[eval] ")}
    assert lines["unreachable"].startswith("[eval] unreachable: ERROR (agent not run, 0 iterations, ")
    assert f"unable to access '{url}/': " in lines["unreachable"], lines["unreachable"]
    assert lines["unreachable"].endswith("Couldn't connect to server"), lines["unreachable"]  # curl's cause, whole
    assert lines["green-not-resolved"].startswith("[eval] green-not-resolved: UNRESOLVED (passed, 1 iteration, "
                                                  "failing 0, ")
    assert "; judged tests failed: tests/test_hidden.py::test_add_floats" in lines["green-not-resolved"]
    stops = next(line for line in proc.stdout.splitlines() if line.startswith("Stop reasons: "))
    assert sorted(stops.removeprefix("Stop reasons: ").split(", ")) == ["agent not run 1", "passed 1"], stops
    assert "[Not judged: unreachable; add --rerun-errors to the same command to run them again]" in proc.stdout
    summary = json.loads(eval_cli(["compare", "eval-says", "eval-says", "--json"], None, user["work"]).stdout)
    assert summary["first"]["error_ids"] == ["unreachable"]


def test_on_a_terminal_the_bar_says_where_a_running_case_is_and_its_log_fills_as_it_runs(user: dict[str, Any]) -> None:
    """The model holds its answer: meanwhile the bar's line says the case is in the agent's first iteration, and
    the case's log already holds what the agent said (its baseline), before any result."""
    release = threading.Event()

    def held(body: dict[str, Any]) -> str:
        release.wait(60)
        return RIGHT
    out = user["work"] / "eval-live"
    with ScriptedServer([held]) as server:
        terminal = Terminal(["eval", str(user["cases"]), "--out", str(out), "--only", "resolved", "--base-url",
                             server.url, *RUN_OPTIONS, "--case-root", str(user["root"])])
        try:
            terminal.expect(r"resolved: agent, iteration 1")
            log = out / "logs" / "resolved.log"
            deadline = time.monotonic() + 60
            while "[Baseline: " not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "[Baseline: " in log.read_text() and not server.chat_requests[1:]
            assert not (out / "results.jsonl").exists()
            release.set()
            terminal.expect(r"resolved: judging")
            assert terminal.wait(120) == 0, terminal.seen
        finally:
            release.set()
            terminal.close()
    assert _results(out)["resolved"]["verdict"] == "resolved"
    assert "[Tests passed on iteration 1]" in log.read_text()


def test_an_answer_the_guardrails_refuse_is_reported_refused(user: dict[str, Any]) -> None:
    """The model's only answer weakens the failing test instead of fixing the code: the guardrails refuse it, and
    the case says `refused` with the guardrail's reason, not that its edits could not be applied."""
    weaken = answer(modify("tests/test_calc.py", "    assert add(2, 3) == 5", "    assert True"))
    model = Model({"resolved": [weaken]})
    with model.server() as server:
        proc = eval_cli([str(user["cases"]), "--out", "eval-refused", "--only", "resolved", "--base-url", server.url,
                         "--max-iterations", "1", "--no-reproduce"], None, user["work"])
    assert proc.returncode == 0, proc.stderr
    result = _results(user["work"] / "eval-refused")["resolved"]
    assert (result["verdict"], result["stop_reason"], result["iterations"]) == ("unresolved", "refused", 1)
    assert result["message"].startswith("nothing of the answer was written: tests/test_calc.py: "), result["message"]
    line = next(line for line in proc.stderr.splitlines() if line.startswith("[eval] resolved: UNRESOLVED"))
    assert line.startswith("[eval] resolved: UNRESOLVED (refused, 1 iteration, ")
    assert "— nothing of the answer was written: tests/test_calc.py: " in line
    assert "could not be applied" not in line
    assert "Stop reasons: refused 1" in proc.stdout


def test_a_scheduler_that_refuses_the_connection_fails_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from distributed.security import Security

    security = Security.temporary()
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    for variable, name, text in (("CA_FILE", "ca.pem", security.tls_ca_file),
                                 ("CLIENT__CERT", "client.pem", security.tls_client_cert),
                                 ("CLIENT__KEY", "client.key", security.tls_client_key)):
        (tmp_path / name).write_text(str(text))
        env[f"DASK_DISTRIBUTED__COMM__TLS__{variable}"] = str(tmp_path / name)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "repo": ".", "task": "t", "test_command": "pytest"}) + "\n")
    address = f"tls://127.0.0.1:{_closed_port()}"
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", str(cases), "--out", "out", "--cluster",
                           address], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    # the refusal itself, not Dask's 30 s of retries ending in "Timed out trying to connect"
    assert proc.stderr.startswith(f"error: eval: no Dask scheduler answered at {address}: Connection refused")
    assert "Timed out" not in proc.stderr
    assert not (tmp_path / "out").exists()
