"""A baseline whose tests never ran, for a reason outside the repository's own code, is named before any model call.

The outputs in tests/fixtures/not_run/ were produced on this machine by the real tools (see its README.md); the
functions are tested on them, then the whole CLI on repositories that produce them again here.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code_assistant.settings import SANDBOX_MODES, SandboxMode
from code_assistant.verify.outputs import NotRunCause, never_ran
from tests.repos import GO_SVC, answer, git_init, go_repo, modify, python_repo, run_cli, snapshot, write_tree
from tests.scripted_server import ScriptedServer

FIXTURES = Path(__file__).parent / "fixtures" / "not_run"
PACKAGE_JSON = json.dumps({"name": "tiny", "version": "1.0.0", "scripts": {"test": "mocha test"},
                           "devDependencies": {"mocha": "^10.0.0"}, "dependencies": {"leftpad-not-here": "^1.0.0"}})
SRC_LAYOUT = {"pyproject.toml": '[project]\nname = "tinyflask"\nversion = "0.1"\n',
              "src/tinyflask/__init__.py": "def hello():\n    return 'hi'\n"}
GO_MOD_199 = {"go.mod": "module example.com/tiny\n\ngo 1.99\n"}
GO_MOD_122 = {"go.mod": "module example.com/three\n\ngo 1.22.0\n\ntoolchain go1.22.4\n"}

# (fixture, its exit status, the repository's files, the cause, words of the fix)
NEVER_RAN = [
    ("npm_runner_not_found", 127, {"package.json": PACKAGE_JSON}, NotRunCause.NOT_FOUND, "npm install"),
    ("npm_not_executable", 126, {}, NotRunCause.NOT_EXECUTABLE, "chmod +x ./run-tests.sh"),
    ("npm_missing_script", 1, {}, NotRunCause.NO_SCRIPT, '"test" script in package.json'),
    ("npm_no_package_json", 254, {}, NotRunCause.NO_DIRECTORY, "where package.json is"),
    ("node_dependency_not_installed", 1, {"package.json": PACKAGE_JSON}, NotRunCause.NOT_INSTALLED, "npm install"),
    ("sh_not_found", 127, {}, NotRunCause.NOT_FOUND, "pytst"),
    ("sh_cd_failed", 2, {}, NotRunCause.NO_DIRECTORY, "test does not exist"),
    ("make_runner_not_found", 2, {}, NotRunCause.NOT_FOUND, "install mocha"),
    ("make_runner_not_found_shell", 2, {}, NotRunCause.NO_DIRECTORY, "after cd"),
    ("pytest_missing_path", 4, {}, NotRunCause.NO_TESTS, "test/test_calc.py does not exist"),
    ("pytest_no_such_test", 4, {}, NotRunCause.NO_TESTS, "the right path"),
    ("pytest_usage_error", 4, {}, NotRunCause.USAGE, "pytest-cov"),
    ("pytest_no_tests", 5, {}, NotRunCause.NO_TESTS, "collected no tests"),
    ("pytest_no_tests_verbose", 5, {}, NotRunCause.NO_TESTS, "collected no tests"),
    ("pytest_package_not_installed", 2, SRC_LAYOUT, NotRunCause.NOT_INSTALLED, "pip install -e ."),
    ("pytest_conftest_package_not_installed", 4, SRC_LAYOUT, NotRunCause.NOT_INSTALLED, "pip install -e ."),
    ("pytest_dependency_not_installed", 2, {"requirements.txt": "requests-not-here>=2\n"}, NotRunCause.NOT_INSTALLED,
     "pip install -r requirements.txt"),
    ("python_runner_not_installed", 1, {}, NotRunCause.NOT_INSTALLED, "pip install pytest"),
    ("go_newer_toolchain", 1, GO_MOD_199, NotRunCause.OLD_TOOLCHAIN, "Go 1.99 or newer"),
    ("go_newer_syntax", 2, GO_MOD_199, NotRunCause.OLD_TOOLCHAIN, "Go 1.99 or newer"),
    ("go_mod_version_format", 1, GO_MOD_122, NotRunCause.OLD_TOOLCHAIN, "Go 1.22.0 or newer"),
    ("go_module_download", 1, {}, NotRunCause.NO_DOWNLOAD, "go mod download"),
    ("go_module_download_off", 1, {}, NotRunCause.NO_DOWNLOAD, "go mod download"),
    ("cargo_offline", 101, {}, NotRunCause.NO_DOWNLOAD, "cargo fetch"),
    ("cargo_no_network", 101, {}, NotRunCause.NO_DOWNLOAD, "cargo fetch"),
]
# the repository's own code fails to build or import: a task may be to fix it, so the run goes on
RAN_OR_OWN = [
    ("go_own_compile_error", 2, {"go.mod": "module example.com/own\n\ngo 1.19\n"}),
    ("go_own_type_error", 2, {"go.mod": "module example.com/own\n\ngo 1.19\n"}),
    ("cargo_own_compile_error", 101, {}),
    ("pytest_conftest_own_syntax_error", 4, {"calc.py": "def add(a, b:\n    return a + b\n"}),
    ("pytest_own_module_missing", 2, {}),  # `from slugify_here import slugify`: a module nobody declares
]


def _output(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name, status, files, cause, fix", NEVER_RAN, ids=[case[0] for case in NEVER_RAN])
def test_a_real_output_whose_tests_never_ran_names_the_cause_the_line_and_the_fix(
        tmp_path: Path, name: str, status: int, files: dict[str, str], cause: NotRunCause, fix: str) -> None:
    output = _output(name)
    found = never_ran(output, status, write_tree(tmp_path, files))
    assert found is not None and found.cause == cause, found
    assert found.line in output and fix in found.fix, found
    assert found.line.strip() in found.describe() and len(found.describe().splitlines()) == 1


@pytest.mark.parametrize("name, status, files", RAN_OR_OWN, ids=[case[0] for case in RAN_OR_OWN])
def test_a_build_or_import_error_in_the_repositorys_own_code_is_not_a_reason_to_stop(
        tmp_path: Path, name: str, status: int, files: dict[str, str]) -> None:
    assert never_ran(_output(name), status, write_tree(tmp_path, files)) is None


def test_what_decides_is_the_repository_not_the_words_alone(tmp_path: Path) -> None:
    """The same lines mean different things with another exit status or other manifests."""
    assert never_ran(_output("sh_not_found"), 0, tmp_path) is None  # it passed
    assert never_ran(_output("sh_not_found"), None, tmp_path) is None  # it timed out: something ran
    assert never_ran(_output("pytest_no_tests"), 1, tmp_path) is None  # exit 5 is pytest's "no tests"
    # mocha that package.json does not list: the fix is to install it or to correct the command, not npm install
    generic = never_ran(_output("npm_runner_not_found"), 127, tmp_path)
    assert generic is not None and "npm install" not in generic.fix and "install mocha" in generic.fix
    # the module is the repository's own (a file at its root): what is missing is its own code
    write_tree(tmp_path, {"requests_not_here/__init__.py": ""})
    assert never_ran(_output("pytest_dependency_not_installed"), 2, tmp_path) is None
    # a run in which tests passed did run
    ran = _output("pytest_dependency_not_installed").replace("1 error in", "3 passed, 1 error in")
    assert never_ran(ran, 1, write_tree(tmp_path / "r", {"requirements.txt": "requests-not-here\n"})) is None


def test_a_newer_gos_refusal_is_read_too() -> None:
    """Go 1.21 and later refuse a go.mod newer than themselves in these words (cmd/go/internal/gover/toolchain.go:
    "%v requires go >= %v (running go %v%v)"); the Go here (1.19) cannot print them, so the line is written out."""
    line = "go: go.mod requires go >= 1.99 (running go 1.22.2; GOTOOLCHAIN=local)"
    found = never_ran(line + "\n", 1, None)
    assert found is not None and found.cause == NotRunCause.OLD_TOOLCHAIN and found.line == line


# ----- through the CLI: exit 2 before any chat request -------------------------------------------------------------
def _stopped(proc: subprocess.CompletedProcess[str], server: ScriptedServer, *words: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the tests never ran: "), proc.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert server.chat_requests == [], "no model was asked"
    return lines[0]


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed")
def test_npm_whose_runner_is_not_installed_stops_before_the_model(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"package.json": PACKAGE_JSON, "test/a.spec.js": "require('assert');\n"})
    before = snapshot(repo)
    with ScriptedServer([answer(modify("package.json", "mocha", "jest"))]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "make the tests pass", "--test-command", "npm test",
                        "--log-dir", str(tmp_path / "runs")], server_url=server.url)
    _stopped(proc, server, "mocha: not found", "npm install")
    assert snapshot(repo) == before
    records = [json.loads(line) for log in (tmp_path / "runs").glob("*.jsonl") for line in log.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["baseline", "final"]
    assert records[-1]["stop_reason"] == "tests_not_run"
    assert records[0]["test_exit_code"] == 127 and "mocha: not found" in records[0]["test_output"]


def test_pytest_on_a_missing_path_stops_before_the_model(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["never"]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command",
                        f"{sys.executable} -m pytest -q test/test_calc.py", "--json"], server_url=server.url)
    assert proc.returncode == 2 and server.chat_requests == [], proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["error"] == "tests_not_run_error" and data["exit_code"] == 2
    assert "file or directory not found: test/test_calc.py" in data["message"] and data["log"]


def test_a_misspelt_runner_behind_cd_stops_before_the_model(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["never"]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", "cd tests && pytst -q"],
                       server_url=server.url)
    _stopped(proc, server, "pytst: not found", "correct its name")


GO_ENV = {"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOPROXY": "off"}


@pytest.mark.skipif(shutil.which("go") is None, reason="go not installed")
def test_a_go_mod_asking_for_a_newer_go_stops_before_the_model(tmp_path: Path) -> None:
    repo = go_repo(tmp_path)
    write_tree(repo, {"go.mod": "module example.com/svc\n\ngo 1.99\n",
                      "calc/has.go": "package calc\n\nimport \"slices\"\n\n"
                                     "func Has(xs []int, x int) bool { return slices.Contains(xs, x) }\n"})
    env = {**GO_ENV, "GOCACHE": str(tmp_path / "gocache"), "GOPATH": str(tmp_path / "gopath")}
    with ScriptedServer(["never"]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix Add", "--test-command", "go test ./...",
                        "--allow-dirty"], server_url=server.url, extra_env=env)
    _stopped(proc, server, "Go 1.99 or newer")


@pytest.mark.skipif(shutil.which("go") is None, reason="go not installed")
def test_a_compile_error_in_the_repositorys_own_go_file_lets_the_run_go_on(tmp_path: Path) -> None:
    broken = GO_SVC["calc/calc.go"].replace("return a - b", "return a - b +")
    repo = write_tree(tmp_path / "svc", {**GO_SVC, "calc/calc.go": broken})
    git_init(repo)
    fix = modify("calc/calc.go", "\treturn a - b +", "\treturn a + b")
    env = {**GO_ENV, "GOCACHE": str(tmp_path / "gocache"), "GOPATH": str(tmp_path / "gopath")}
    with ScriptedServer([answer(fix)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix the build and Add", "--test-command", "go test ./..."],
                       server_url=server.url, extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.chat_requests) == 1 and "syntax error" in server.chat_requests[0]["messages"][-1]["content"]


@pytest.mark.parametrize("name, status", [("go_module_download", 1), ("cargo_offline", 101)])
def test_a_download_hint_names_the_flags_of_today(tmp_path: Path, name: str, status: int) -> None:
    """Issue 61: the hint named `--sandbox strict`, write's older name, which no longer says anything about the
    network; the flag that lets the tests download is --network, and every --sandbox word a hint names is a choice."""
    found = never_ran(_output(name), status, tmp_path)
    assert found is not None and "--network" in found.fix and "strict" not in found.fix
    named = re.findall(r"--sandbox (\w+)", found.fix)
    assert all(word in SANDBOX_MODES and SandboxMode(word) != SandboxMode.STRICT for word in named)
