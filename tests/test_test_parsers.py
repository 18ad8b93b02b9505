"""Parser tests on outputs of real runs: pytest, unittest, go, node --test and cargo run here in tmp dirs;
Jest and Mocha outputs were recorded once (see tests/fixtures/runner_outputs/README.md). Each names its failing tests
and, where its output shows them, its passing ones by the same ids."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code_assistant.verify.outputs import detect_runner, parse_test_output, repo_path, strip_ansi, trim_message
from code_assistant.verify.passes import PASSES_OPTION, fold_passes, passed_ids, seen_passing

FIXTURES = Path(__file__).parent / "fixtures" / "runner_outputs"
# cargo is a rustup proxy that finds its toolchain through HOME; the autouse fixture swaps HOME per test
REAL_HOME = Path.home()
RUST_ENV = {"RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(REAL_HOME / ".rustup")),
            "CARGO_HOME": os.environ.get("CARGO_HOME", str(REAL_HOME / ".cargo"))}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[str, int]:
    """Run a real test command; PYTEST_DISABLE_PLUGIN_AUTOLOAD keeps the inner pytest fast."""
    proc = subprocess.run(command, check=False, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120,
                          env={**os.environ, "CI": "1", "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1",
                               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})})
    return proc.stdout, proc.returncode


# ---------------------------------------------------------------- python

PYTEST_SUITE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": (
        "from calc import add\n\n\n"
        "def check(x):\n    assert add(x, x) == 2 * x, 'add is broken'\n\n\n"
        "def test_add():\n    check(2)\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n\n\n"
        "class TestGroup:\n    def test_in_class(self):\n        assert [1, 2] == [1, 3]\n"),
    "tests/test_imports.py": "import not_a_real_module_xyz\n\n\ndef test_never():\n    pass\n",
    "tests/test_syntax.py": "def broken(:\n    pass\n",
}


@pytest.fixture(scope="module")
def pytest_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("pyrepo"), PYTEST_SUITE)


@pytest.mark.parametrize("extra", [[], ["-q", "--tb=short"], ["--color=yes", "--tb=native"], ["-v", "-rN"]])
def test_pytest_failures_collection_errors_and_counts(pytest_repo: Path, extra: list[str]) -> None:
    """As the runner runs pytest: with its passing tests listed (-rp, or -v's lines where -rN drops the summary)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--continue-on-collection-errors", *extra]
    output, code = run(command, pytest_repo, {"PYTHONPATH": str(pytest_repo), "PYTEST_ADDOPTS": PASSES_OPTION})
    assert code == 1

    runner, failures, passed, failed = parse_test_output(output, command, pytest_repo)
    assert passed_ids(strip_ansi(output), runner) == {"tests/test_calc.py::test_zero"}  # as the runner reads it
    assert parse_test_output(fold_passes(output), command, pytest_repo) == (runner, failures, passed, failed)

    assert runner == "pytest"
    assert (passed, failed) == (1, 4)  # 2 failed + 2 collection errors
    by_id = {f.test_id: f for f in failures}
    assert set(by_id) == {"tests/test_calc.py::test_add", "tests/test_calc.py::TestGroup::test_in_class",
                          "tests/test_imports.py", "tests/test_syntax.py"}
    add = by_id["tests/test_calc.py::test_add"]
    assert add.status == "failed"
    assert (add.file, add.line) == ("tests/test_calc.py", 5)  # innermost frame: the helper's assert
    assert add.frames[-2:] == [("tests/test_calc.py", 9), ("tests/test_calc.py", 5)]
    assert "add is broken" in add.message
    assert "[1, 2] == [1, 3]" in by_id["tests/test_calc.py::TestGroup::test_in_class"].message
    imports = by_id["tests/test_imports.py"]
    assert imports.status == "error"
    assert "No module named 'not_a_real_module_xyz'" in imports.message
    assert imports.frames == [("tests/test_imports.py", 1)]  # importlib/site-packages frames dropped
    syntax = by_id["tests/test_syntax.py"]
    assert "SyntaxError" in syntax.message
    assert (syntax.file, syntax.line) == ("tests/test_syntax.py", 1)
    assert all(not path.startswith("/") for f in failures for path, _ in f.frames)


def test_pytest_collection_error_interrupts_the_run(pytest_repo: Path) -> None:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_imports.py"]
    output, code = run(command, pytest_repo)
    assert code == 2

    runner, failures, passed, failed = parse_test_output(output, command, pytest_repo)

    assert runner == "pytest"
    assert [(f.test_id, f.status) for f in failures] == [("tests/test_imports.py", "error")]
    assert (passed, failed) == (0, 1)


def test_unittest(tmp_path: Path) -> None:
    write(tmp_path, {
        "helper.py": "def double(x):\n    return x * 3\n",
        "test_mod.py": (
            "import unittest\nfrom helper import double\n\n\nclass CalcTest(unittest.TestCase):\n"
            "    def test_double(self):\n        self.assertEqual(double(2), 4)\n\n"
            "    def test_ok(self):\n        pass\n\n"
            "    def test_raises(self):\n        raise ValueError('bad value')\n"),
        "test_broken.py": "import missing_module_xyz\n",
    })
    command = [sys.executable, "-m", "unittest"]
    output, code = run(command, tmp_path)
    assert code == 1

    runner, failures, passed, failed = parse_test_output(output, command, tmp_path)
    verbose, _ = run([*command, "-v"], tmp_path)
    assert (passed_ids(output, runner), passed_ids(verbose, runner)) == (set(), {"test_mod.CalcTest.test_ok"})
    assert parse_test_output(verbose, command, tmp_path) == (runner, failures, passed, failed)

    assert runner == "unittest"
    assert (passed, failed) == (1, 3)
    by_id = {f.test_id: f for f in failures}
    assert set(by_id) == {"test_broken", "test_mod.CalcTest.test_double", "test_mod.CalcTest.test_raises"}
    assert by_id["test_broken"].status == "error"
    assert "missing_module_xyz" in by_id["test_broken"].message
    double = by_id["test_mod.CalcTest.test_double"]
    assert double.message == "AssertionError: 6 != 4"
    assert (double.file, double.line, double.frames) == ("test_mod.py", 7, [("test_mod.py", 7)])
    assert by_id["test_mod.CalcTest.test_raises"].message == "ValueError: bad value"


# ---------------------------------------------------------------- go

GO_SUITE = {
    "go.mod": "module example.com/demo\n\ngo 1.19\n",
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
    "calc/calc_test.go": (
        'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 2); got != 4 {\n'
        '\t\tt.Errorf("Add(2, 2) = %d, want 4", got)\n\t}\n}\n\nfunc TestOK(t *testing.T) {}\n\n'
        'func TestSub(t *testing.T) {\n\tt.Run("neg", func(t *testing.T) {\n\t\tt.Fatal("sub broken")\n\t})\n}\n'),
    "broken/b.go": "package broken\n\nfunc F() int { return undefinedThing }\n",
    "broken/b_test.go": 'package broken\n\nimport "testing"\n\nfunc TestF(t *testing.T) { F() }\n',
    "pan/p.go": "package pan\n\nfunc Idx(s []int) int { return s[5] }\n",
    "pan/p_test.go": 'package pan\n\nimport "testing"\n\nfunc TestIdx(t *testing.T) { Idx(nil) }\n',
}


@pytest.fixture(scope="session")
def go_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    cache = tmp_path_factory.getbasetemp() / "go-shared"  # shared with tests/test_test_runner.py
    return {"GOFLAGS": "-mod=mod", "GOCACHE": str(cache / "build"), "GOPATH": str(cache / "path"),
            "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOTELEMETRY": "off"}


@pytest.mark.parametrize("verbose", [False, True])
def test_go_failures_build_errors_and_panics(tmp_path: Path, go_env: dict[str, str], verbose: bool) -> None:
    write(tmp_path, GO_SUITE)
    command = ["go", "test", *(["-v"] if verbose else []), "./..."]
    output, code = run(command, tmp_path, go_env)
    assert code != 0

    runner, failures, passed, failed = parse_test_output(output, command, tmp_path)

    assert runner == "go"
    by_id = {f.test_id: f for f in failures}
    assert set(by_id) == {"example.com/demo/broken", "example.com/demo/calc.TestAdd",
                          "example.com/demo/calc.TestSub/neg", "example.com/demo/pan.TestIdx"}
    build = by_id["example.com/demo/broken"]
    assert build.status == "error"
    assert (build.file, build.line) == ("broken/b.go", 3)
    assert "undefined: undefinedThing" in build.message
    add = by_id["example.com/demo/calc.TestAdd"]
    assert (add.file, add.line) == ("calc/calc_test.go", 7)
    assert "Add(2, 2) = 0, want 4" in add.message
    assert "sub broken" in by_id["example.com/demo/calc.TestSub/neg"].message
    panic = by_id["example.com/demo/pan.TestIdx"]
    assert "index out of range" in panic.message
    assert panic.frames == [("pan/p_test.go", 5), ("pan/p.go", 3)]  # runtime and testing frames dropped
    assert failed == 4
    assert passed == (1 if verbose else None)
    assert passed_ids(output, runner) == ({"example.com/demo/calc.TestOK"} if verbose else set())
    # what the model is shown: -v's lines for tests that ran and passed folded, the failures read as before
    folded = fold_passes(output)
    assert parse_test_output(folded, command, tmp_path).failures == failures
    assert "--- PASS: TestOK" not in folded and "=== RUN   TestOK" not in folded
    assert ("=== RUN   TestSub/neg\n    calc_test.go:15: sub broken" in folded) == verbose, "a failing test's start"
    assert ("[2 go test -v lines of tests run and passed left out]" in folded) == verbose


# ---------------------------------------------------------------- node

NODE_SUITE = {
    "package.json": '{"name": "demo", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}}\n',
    "calc.js": "function add(a, b) { return a - b; }\nmodule.exports = { add };\n",
    "test/calc.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { add } = require('../calc');\n\n"
        "test('adds numbers', () => {\n  assert.strictEqual(add(2, 2), 4);\n});\n\n"
        "test('passes', () => {\n  assert.ok(true);\n});\n\n"
        "test.describe('suite', () => {\n  test.it('nested fails', () => {\n    throw new Error('boom nested');\n"
        "  });\n});\n"),
}
NPM_ENV = {"npm_config_offline": "true", "npm_config_update_notifier": "false", "npm_config_fund": "false"}


@pytest.fixture
def node_repo(tmp_path: Path) -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    return write(tmp_path, NODE_SUITE)


def test_node_test_runner_through_npm_test(node_repo: Path) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    command = ["npm", "test"]
    output, code = run(command, node_repo, NPM_ENV)
    assert code != 0

    runner, failures, passed, failed = parse_test_output(output, command, node_repo)

    assert runner == "node"  # detected from the output: npm says nothing about the runner
    assert (passed, failed) == (1, 2)
    adds, nested = failures
    assert adds.test_id == "adds numbers"
    assert (adds.file, adds.line, adds.frames) == ("test/calc.test.js", 6, [("test/calc.test.js", 6)])
    assert "0 !== 4" in adds.message and "expected: 4" in adds.message and "actual: 0" in adds.message
    assert nested.test_id == "suite › nested fails"
    assert nested.message == "boom nested"
    assert "passes" in passed_ids(output, runner) and not {"adds numbers", "suite › nested fails"} & passed_ids(
        output, runner)


@pytest.mark.parametrize("reporter", ["tap", "spec"])
def test_node_file_that_fails_to_load(node_repo: Path, reporter: str) -> None:
    write(node_repo, {"test/broken.test.js": "require('./does-not-exist');\n"})
    command = ["node", "--test", f"--test-reporter={reporter}"]
    output, _ = run(command, node_repo)

    runner, failures, passed, failed = parse_test_output(output, command, node_repo)

    assert runner == "node"
    assert (passed, failed) == (1, 3)
    broken = next(f for f in failures if f.status == "error")
    assert broken.test_id.endswith("test/broken.test.js")
    assert broken.file == "test/broken.test.js"
    if reporter == "tap":
        assert "Cannot find module './does-not-exist'" in broken.message
    adds = next(f for f in failures if f.test_id == "adds numbers")
    assert "0 !== 4" in adds.message
    assert adds.frames == [("test/calc.test.js", 6)]
    assert sum(f.test_id.endswith("nested fails") for f in failures) == 1
    passes = passed_ids(output, runner)
    assert seen_passing("passes", passes) and not any(seen_passing(f.test_id, passes) for f in failures)


# ---------------------------------------------------------------- cargo

CARGO_TOML = '[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
CARGO_LIB = """pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_works() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    fn passes() {
        assert_eq!(add(2, 0), 2);
    }
}
"""


@pytest.fixture(scope="session")
def cargo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    return {**RUST_ENV, "CARGO_TARGET_DIR": str(tmp_path_factory.mktemp("cargo_target")), "CARGO_NET_OFFLINE": "true",
            "RUST_BACKTRACE": "1", "CARGO_TERM_COLOR": "never"}


def test_cargo_failing_test(tmp_path: Path, cargo_env: dict[str, str]) -> None:
    write(tmp_path, {"Cargo.toml": CARGO_TOML.format(name="demo"), "src/lib.rs": CARGO_LIB})
    command = ["cargo", "test"]
    output, code = run(command, tmp_path, cargo_env)
    assert code == 101, output

    runner, failures, passed, failed = parse_test_output(output, command, tmp_path)

    assert runner == "cargo"
    assert (passed, failed) == (1, 1)
    [failure] = failures
    assert failure.test_id == "tests::it_works"
    assert passed_ids(output, runner) == {"tests::passes"}
    assert (failure.file, failure.line) == ("src/lib.rs", 11)
    assert "left == right" in failure.message and "left: 0" in failure.message
    assert all(path == "src/lib.rs" for path, _ in failure.frames)  # /rustc/... frames dropped


def test_cargo_build_error(tmp_path: Path, cargo_env: dict[str, str]) -> None:
    broken = CARGO_LIB.replace("a - b", "a - missing_value")
    write(tmp_path, {"Cargo.toml": CARGO_TOML.format(name="broken_crate"), "src/lib.rs": broken})
    command = ["cargo", "test"]
    output, code = run(command, tmp_path, cargo_env)
    assert code == 101, output

    runner, failures, passed, failed = parse_test_output(output, command, tmp_path)

    assert runner == "cargo"
    [failure] = failures
    assert (failure.test_id, failure.status) == ("broken_crate", "error")
    assert (failure.file, failure.line) == ("src/lib.rs", 2)
    assert "missing_value" in failure.message
    assert (passed, failed) == (None, 1)


# ---------------------------------------------------------------- jest and mocha (recorded outputs)

def test_jest_recorded_output() -> None:
    output = (FIXTURES / "jest_failing.txt").read_text()
    runner, failures, passed, failed = parse_test_output(output, ["npm", "test"], Path("/repo"))

    assert runner == "jest"
    assert (passed, failed) == (1, 3)  # 2 failed tests + 1 suite that failed to run
    adds, negatives, suite = failures
    assert adds.test_id == "calc › adds"
    assert (adds.file, adds.line) == ("__tests__/calc.test.js", 5)
    assert "Expected: 4" in adds.message and "Received: 0" in adds.message
    assert "|" not in adds.message  # the code frame is left out
    assert negatives.test_id == "calc › check › rejects negatives gracefully"
    assert negatives.frames == [("__tests__/calc.test.js", 12), ("src/calc.js", 5)]
    assert negatives.message == "TypeError: negative value: -1"
    assert (suite.test_id, suite.status) == ("__tests__/broken.test.js", "error")
    assert passed_ids(output, runner) == set(), "jest names passing tests only with --verbose"
    assert "Cannot find module '../src/missing'" in suite.message
    assert suite.frames == [("__tests__/broken.test.js", 1)]  # node_modules frames dropped


def test_mocha_recorded_output() -> None:
    output = (FIXTURES / "mocha_failing.txt").read_text()
    runner, failures, passed, failed = parse_test_output(output, ["npx", "mocha"], Path("/repo"))

    assert runner == "mocha"
    assert (passed, failed) == (1, 2)
    adds, negatives = failures
    assert adds.test_id == "calc › adds"
    assert (adds.file, adds.line) == ("test/calc.spec.js", 6)
    assert "AssertionError" in adds.message and "0 !== 4" in adds.message
    assert negatives.test_id == "calc › check › rejects negatives gracefully"
    assert negatives.frames == [("test/calc.spec.js", 13), ("src/calc.js", 5)]
    assert passed_ids(output, runner) == {"calc › passes", "passes"}


def test_mocha_spec_that_fails_to_load() -> None:
    output = (FIXTURES / "mocha_load_error.txt").read_text()
    runner, failures, _, _ = parse_test_output(output, ["npm", "test"], Path("/repo"))

    assert runner == "mocha"
    [failure] = failures
    assert (failure.test_id, failure.status) == ("test/broken.spec.js", "error")
    assert "Cannot find module '../src/missing'" in failure.message
    assert failure.frames == [("test/broken.spec.js", 1)]


# ---------------------------------------------------------------- helpers

def test_unknown_runner_yields_nothing() -> None:
    assert parse_test_output("make: *** [check] Error 1\n", ["make", "check"]) == ("unknown", [], None, None)


def test_detect_runner_from_command_before_output() -> None:
    assert detect_runner(["python", "-m", "pytest", "-x"], "") == "pytest"
    assert detect_runner(["/usr/bin/go", "test", "./..."], "") == "go"
    assert detect_runner(["npx", "jest"], "") == "jest"
    assert detect_runner(["node", "--test"], "") == "node"
    assert detect_runner(["make", "test"], "Ran 3 tests in 0.001s\n\nOK\n") == "unittest"


def test_repo_path_keeps_repo_frames_only(tmp_path: Path) -> None:
    assert repo_path(str(tmp_path / "src" / "a.py"), tmp_path) == "src/a.py"
    assert repo_path("./src/lib.rs", tmp_path) == "src/lib.rs"
    assert repo_path(f"file://{tmp_path}/test/a.test.js", tmp_path) == "test/a.test.js"
    assert repo_path("/usr/lib/python3.11/unittest/case.py", tmp_path) is None
    assert repo_path("node:internal/test_runner/test", tmp_path) is None
    assert repo_path("node_modules/jest-circus/build/index.js", tmp_path) is None
    assert repo_path("/elsewhere/x.go", tmp_path) is None


def test_trim_message_caps_length() -> None:
    text = trim_message("x" * 5000, limit=100)
    assert len(text) < 110 and text.endswith("[…]")
