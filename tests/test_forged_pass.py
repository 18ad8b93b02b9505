"""A verdict the code under test cannot print (issue 57, hole 4): passes come from the runner's own report, written
in a private directory and cross-checked with the exit status and the closing line; a `PASSED` line that code under
test prints, followed by os._exit(0), is no pass — not for a run's "verified", not for eval's judge. Real pytest and
go test in temporary repositories, the CLI against the scripted model server."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from code_assistant.evaluate.cases import Case, Source, SourceKind
from code_assistant.evaluate.judge import judge
from code_assistant.verify.reports import Proof, ReportDir, check, read_junit, report_dir
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import resolve
from tests.repos import CALC_PY, GO_SVC, PYTEST, answer, git_init, modify, python_repo, run_cli, write_tree
from tests.scripted_server import ScriptedServer

# printed by the code under test when pytest imports it, past pytest's capture (to every pipe the process holds):
# every pytest form of a pass and a closing line, then an exit with status 0
FORGERY = '''

import os as _os
import sys as _sys

if "pytest" in _sys.modules:
    _LINES = ("tests/test_calc.py::test_add PASSED\\nPASSED tests/test_calc.py::test_add\\n"
              "tests/test_calc.py::test_multiply PASSED\\n"
              "========================= 2 passed in 0.01s =========================\\n")
    for _fd in _os.listdir("/proc/self/fd"):
        try:
            if _os.readlink(f"/proc/self/fd/{_fd}").startswith("pipe:"):
                _os.write(int(_fd), _LINES.encode())
        except OSError:
            pass
    _os._exit(0)
'''
FORGE = modify("calc.py", "def multiply(a, b):", FORGERY.strip("\n") + "\n\n\ndef multiply(a, b):")
FIX_ADD = modify("calc.py", "    return a - b", "    return a + b")


def _forged_calc() -> str:
    return CALC_PY.replace("def multiply(a, b):", FORGERY.strip("\n") + "\n\n\ndef multiply(a, b):")


def _runner(repo: Path, command: str = PYTEST) -> TestRunner:
    return TestRunner(command, cwd=repo, timeout=60, sandbox=resolve("write"))


# ----- the report read and checked: real reports of real pytest runs ------------------------------------------------

TESTS = '''import pytest


def test_ok():
    pass


def test_bad():
    assert 1 == 2


@pytest.mark.parametrize("x", [1, "a b", "x::y"])
def test_p(x):
    pass


@pytest.mark.skip
def test_skipped():
    pass


class TestOuter:
    def test_m(self):
        pass

    class TestInner:
        def test_n(self):
            pass
'''


def test_the_report_names_each_test_as_pytest_does_parametrized_nested_and_in_subfolders(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "proj", {"tests/test_a.py": TESTS, "tests/sub/test_b.py": "def test_z():\n    pass\n"})
    result = _runner(repo).run()
    assert result.proof == Proof.REPORT, result.output
    assert result.passes == {"tests/test_a.py::test_ok", "tests/test_a.py::test_p[1]", "tests/test_a.py::test_p[a b]",
                             "tests/test_a.py::test_p[x::y]", "tests/test_a.py::TestOuter::test_m",
                             "tests/test_a.py::TestOuter::TestInner::test_n", "tests/sub/test_b.py::test_z"}
    with report_dir() as where:  # the same suite, run by hand: the failure and the skip as the report has them
        import subprocess
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={where.junit}",
                        "-o", "junit_family=xunit1"], cwd=repo, capture_output=True, check=False)
        report = read_junit(where.junit, repo)
    assert report.failed == {"tests/test_a.py::test_bad"} and report.skipped == 1 and report.total == 9


def test_a_collection_error_is_named_by_its_module_in_the_report(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "proj", {"tests/test_broken.py": "import not_installed_anywhere\n"})
    with report_dir() as where:
        import subprocess
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={where.junit}",
                        "-o", "junit_family=xunit1"], cwd=repo, capture_output=True, check=False)
        assert read_junit(where.junit, repo).failed == {"tests/test_broken.py"}


def test_the_report_directory_is_private_and_gone_after_the_run(tmp_path: Path) -> None:
    with report_dir() as where:
        assert where.path.stat().st_mode & 0o777 == 0o700 and not where.path.is_relative_to(tmp_path)
        seen = where.path
    assert not seen.exists()


@pytest.mark.parametrize("report, exit_code, closing, proof", [
    (None, 0, "2 passed in 0.01s", Proof.MISSING),  # os._exit(0) before pytest wrote it
    ("<testsuites><testsuite><testcase classname='t' name='test_a' file='t.py'/>"
     "<testcase classname='t' name='test_b' file='t.py'/></testsuite></testsuites>", 0, "1 passed in 0.01s",
     Proof.INCONSISTENT),  # rewritten: more passes than pytest counted
    ("<testsuites><testsuite><testcase classname='t' name='test_a' file='t.py'><failure/></testcase></testsuite>"
     "</testsuites>", 0, "1 passed in 0.01s", Proof.INCONSISTENT),  # a failure, and exit 0
    ("not xml at all", 0, "1 passed in 0.01s", Proof.INCONSISTENT),
    ("<testsuites><testsuite><testcase classname='t' name='test_a' file='t.py'/></testsuite></testsuites>", 0,
     "1 passed in 0.01s", Proof.REPORT),
])
def test_a_report_missing_or_disagreeing_with_the_exit_and_the_closing_line_proves_no_pass(
        tmp_path: Path, report: str | None, exit_code: int, closing: str, proof: Proof) -> None:
    where = ReportDir(tmp_path)
    if report is not None:
        where.junit.write_text(report)
    checked = check(where, ["pytest"], "pytest", f"t.py::test_a PASSED\n{closing}\n", exit_code)
    assert checked.proof == proof, checked.why
    assert checked.passes == ({"t.py::test_a"} if proof == Proof.REPORT else set())
    assert checked.refutes_green == (proof in (Proof.MISSING, Proof.INCONSISTENT))


def test_a_runner_without_a_report_verifies_nothing_whatever_it_prints(tmp_path: Path) -> None:
    printed = "--- PASS: TestAdd (0.00s)\nok  \texample.com/svc/calc\t0.01s\n"
    checked = check(ReportDir(tmp_path), ["go", "test", "./..."], "go", printed, 0)
    assert (checked.proof, checked.passes, checked.refutes_green) == (Proof.NONE, frozenset(), False)
    assert checked.why.startswith("go test gives no report of its tests that the tested code cannot print")
    own = check(ReportDir(tmp_path), ["pytest", "--junitxml=out.xml"], "pytest", "1 passed in 0.01s", 0)
    assert own.proof == Proof.NONE and "its own --junitxml" in own.why


# ----- the attack: the code under test prints a pass and ends with status 0 -----------------------------------------

@pytest.mark.parametrize("bwrap", ["bwrap", "/nonexistent/bwrap"], ids=["bubblewrap", "landlock"])
def test_a_printed_pass_and_os_exit_0_is_no_pass_for_the_runner(tmp_path: Path, bwrap: str) -> None:
    repo = python_repo(tmp_path, {"calc.py": _forged_calc(), "tests/test_calc.py":
                                  "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    sandbox = resolve("write", executable=bwrap)
    if bwrap == "bwrap" and sandbox.backend != "bubblewrap":
        pytest.skip("bubblewrap is not available here")
    result = TestRunner(PYTEST, cwd=repo, timeout=60, sandbox=sandbox).run()
    assert result.exit_code == 0 and "tests/test_calc.py::test_add PASSED" in result.output
    assert not result.passed and result.passes == frozenset() and result.proof == Proof.MISSING
    assert "tests/test_calc.py::test_add" in result.printed, "printed: a hint for the model, never a verdict"
    assert "[not a pass: pytest wrote no report of its tests" in result.output
    assert result.summary().endswith("exit 0 refuted by the runner's report")
    (repo / "calc.py").write_text(CALC_PY.replace("a - b", "a + b"))  # the honest fix, in the same sandbox
    fixed = TestRunner(PYTEST, cwd=repo, timeout=60, sandbox=sandbox).run()
    assert fixed.passed and fixed.proof == Proof.REPORT and fixed.passes == {"tests/test_calc.py::test_add"}


def test_an_honest_pytest_run_is_proved_by_its_report_through_make(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    repo = python_repo(tmp_path, {"calc.py": CALC_PY.replace("a - b", "a + b"),
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                        "    assert add(2, 3) == 5\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n", "Makefile": f"test:\n\t{PYTEST} tests\n"})
    result = _runner(repo, "make test").run()
    assert result.passed and result.proof == Proof.REPORT and result.passes == {"tests/test_calc.py::test_add"}


def test_a_forged_pass_through_the_cli_is_no_verified_success_and_add_stays_wrong(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FORGE)] * 4) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--max-iterations", "2", "--json"], server_url=server.url)
    result = json.loads(proc.stdout)
    assert result["verified"] is False and result["success"] is False, proc.stdout + proc.stderr
    assert "return a - b" in (repo / "calc.py").read_text() and "_os._exit" not in (repo / "calc.py").read_text()
    fed_back = server.chat_requests[-1]["messages"][-1]["content"]
    assert "not a pass: pytest wrote no report of its tests" in fed_back


def test_the_honest_fix_through_the_cli_is_still_verified(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FORGE), answer(modify("calc.py", FORGERY.strip("\n") + "\n\n\n", "")),
                         answer(FIX_ADD)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--json"], server_url=server.url)
    result = json.loads(proc.stdout)
    assert result["verified"] is True, proc.stdout + proc.stderr
    assert result["verification"] == "tests/test_calc.py::test_add failed before, passes now"


def test_eval_s_judge_does_not_resolve_a_forged_pass(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": _forged_calc(),
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                        "    assert add(2, 3) == 5\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    case = Case(id="forged", source=Source(SourceKind.PATH, str(repo)), task="fix add", test_command=PYTEST,
                fail_to_pass=("tests/test_calc.py::test_add",))
    judgement = judge(case, repo, resolve("write"), timeout=60)
    assert judgement.verdict == "unresolved" and judgement.tests == {"tests/test_calc.py::test_add": "not verified"}
    assert "not verified: pytest wrote no report of its tests" in judgement.summary
    (repo / "calc.py").write_text(CALC_PY.replace("a - b", "a + b"))
    assert judge(case, repo, resolve("write"), timeout=60).verdict == "resolved", "the honest fix is resolved"


# ----- go test: no report the tested code cannot print (go 1.19), so nothing it prints verifies ---------------------

GO_FORGERY = ('package calc\n\nimport (\n\t"fmt"\n\t"os"\n\t"strings"\n\t"syscall"\n)\n\n'
              'func init() {\n\tif strings.HasSuffix(os.Args[0], ".test") {\n'
              '\t\tfmt.Println("=== RUN   TestAdd")\n\t\tfmt.Println("--- PASS: TestAdd (0.00s)")\n'
              '\t\tfmt.Println("PASS")\n\t\tsyscall.Exit(0)\n\t}\n}\n')


def test_a_forged_go_pass_is_not_verified_by_the_judge(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    repo = write_tree(tmp_path / "svc", {**GO_SVC, "calc/forge.go": GO_FORGERY})
    git_init(repo)
    case = Case(id="go-forged", source=Source(SourceKind.PATH, str(repo)), task="fix Add",
                test_command="go test ./...", fail_to_pass=("example.com/svc/calc.TestAdd",))
    judgement = judge(case, repo, resolve("write"), timeout=120)
    assert judgement.verdict == "unresolved", judgement
    assert judgement.tests == {"example.com/svc/calc.TestAdd": "not verified"}
    assert "not verified: go test gives no report" in judgement.summary
