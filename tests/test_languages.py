"""The language tables: one rule for test files, each test's counterpart by the conventions of its language, and the
test command a repository's manifests name."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from code_assistant.languages import framework, is_test_file, language_for
from code_assistant.retrieve.counterparts import counterparts


def test_test_files_by_name_or_directory_in_every_language() -> None:
    tests = ["tests/test_calc.py", "pkg/calc_test.py", "tests/unit/helpers.py", "web/a.test.ts", "web/b.spec.js",
             "web/__tests__/c.js", "calc/calc_test.go", "src/test/java/com/acme/CalcTest.java", "CalcTests.java",
             "tests/integration.rs", "spec/greeter_spec.rb"]
    sources = ["pkg/calc.py", "web/a.ts", "calc/calc.go", "src/main/java/com/acme/Calc.java", "src/lib.rs",
               "testing_utils.py", "contest.py"]
    assert [p for p in tests if not is_test_file(p)] == []
    assert [p for p in sources if is_test_file(p)] == []
    assert is_test_file("tests/fixtures/orders.json"), "a fixture of the tests is part of the tests"


def test_the_one_rule_used_to_have_a_guardrail_copy() -> None:
    for path in ["tests/test_cart.py", "pkg/cart_test.go", "src/cart.test.js", "web/__tests__/cart.js",
                 "test_cart.py", "src/CartTest.java"]:
        assert is_test_file(path), path
    for path in ["src/cart.py", "cart.go", "src/contest.py", "latest.js"]:
        assert not is_test_file(path), path


def test_language_for_names_and_extensions() -> None:
    assert language_for("pkg/a.py") == "python" and language_for("web/x.tsx") == "tsx"
    assert language_for("Makefile") == "text" and language_for("image.png") is None


def test_counterparts_every_language() -> None:
    files = {
        "pkg/calc.py", "tests/test_calc.py", "tests/unit/calc_test.py", "other/calc.go",
        "web/src/button.tsx", "web/src/button.test.tsx", "web/src/__tests__/button.js", "web/src/menu.spec.js",
        "web/src/menu.js", "calc/calc.go", "calc/calc_test.go",
        "src/main/java/com/acme/Calc.java", "src/test/java/com/acme/CalcTest.java",
        "src/test/java/com/acme/CalcTests.java", "src/parser.rs", "tests/parser.rs",
    }
    assert counterparts("pkg/calc.py", files) == ["tests/test_calc.py", "tests/unit/calc_test.py"]
    assert counterparts("tests/test_calc.py", files) == ["pkg/calc.py"]
    assert counterparts("web/src/button.tsx", files) == ["web/src/button.test.tsx", "web/src/__tests__/button.js"]
    assert counterparts("web/src/menu.spec.js", files) == ["web/src/menu.js"]
    assert counterparts("calc/calc.go", files) == ["calc/calc_test.go"]
    assert counterparts("calc/calc_test.go", files) == ["calc/calc.go", "other/calc.go"]
    assert counterparts("src/main/java/com/acme/Calc.java", files) == [
        "src/test/java/com/acme/CalcTest.java", "src/test/java/com/acme/CalcTests.java"]
    assert counterparts("src/parser.rs", files) == ["tests/parser.rs"]
    assert counterparts("README.md", files) == []


@pytest.mark.parametrize("files, command, found", [
    ({"greet.py": ""}, f"{'python' if shutil.which('python') else 'python3'} -m pytest",
     ("the default: no manifest names another; `-m` puts the repository on the import path, so a test anywhere "
      "imports its modules")),
    ({"pyproject.toml": "", "package.json": "{}"}, "pytest", "from pyproject.toml"),
    ({"go.mod": "module example.com/g\n"}, "go test ./...", "from go.mod"),
    ({"Cargo.toml": "[package]\nname = \"g\"\n"}, "cargo test", "from Cargo.toml"),
    ({"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'}, "node --test",
     "from package.json"),
    ({"package.json": '{"devDependencies": {"jest": "^29"}}'}, "npx jest", "from package.json's dependencies"),
    ({"package.json": '{"scripts": {"test": "vitest run"}}'}, "npm test", "from package.json's test script"),
    ({"package.json": "not json"}, "node --test", "from package.json"),
])
def test_the_test_command_a_repository_names(tmp_path: Path, files: dict[str, str], command: str, found: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    named = framework(tmp_path)
    assert (named.command, named.found) == (command, found) and named.first_test
