"""Guardrails on test edits, from realistic before/after pairs: weakening is named, honest test work passes."""
from __future__ import annotations

import pytest

from code_assistant.edit.command_guard import check_test_definition, definitions
from code_assistant.edit.guardrails import changed_line_count, check_test_setup, check_test_weakening

PYTEST = '''import pytest

from shop.cart import Cart


def test_total_sums_prices():
    cart = Cart()
    cart.add("apple", 3)
    cart.add("pear", 2)
    assert cart.total() == 5


def test_empty_cart_total_is_zero():
    assert Cart().total() == 0


def test_negative_price_rejected():
    with pytest.raises(ValueError):
        Cart().add("bad", -1)
'''

UNITTEST = '''import unittest

from shop.cart import Cart


class CartTest(unittest.TestCase):
    def test_total(self):
        cart = Cart()
        cart.add("apple", 3)
        self.assertEqual(cart.total(), 3)

    def test_items(self):
        self.assertIn("apple", Cart(["apple"]).items)
'''

JEST = '''const { total } = require("../src/cart");

describe("total", () => {
  it("sums prices", () => {
    expect(total([1, 2])).toBe(3);
  });

  test("empty is zero", () => {
    expect(total([])).toEqual(0);
  });
});
'''

GO = '''package cart

import "testing"

func TestTotal(t *testing.T) {
	got := Total([]int{1, 2})
	if got != 3 {
		t.Errorf("Total = %d, want 3", got)
	}
}
'''


def test_changed_line_count_counts_added_and_removed() -> None:
    assert changed_line_count("a\nb\nc\n", "a\nB\nc\nd\n") == 3
    assert changed_line_count("same\n", "same\n") == 0



def test_non_test_files_and_new_test_files_are_not_checked() -> None:
    assert check_test_weakening("shop/cart.py", "assert x\n", "") is None
    assert check_test_weakening("tests/test_new.py", None, PYTEST) is None


def test_adding_tests_and_assertions_is_fine() -> None:
    more = PYTEST + "\n\ndef test_remove():\n    cart = Cart()\n    cart.add('a', 1)\n    cart.remove('a')\n" \
                    "    assert cart.total() == 0\n"
    assert check_test_weakening("tests/test_cart.py", PYTEST, more) is None
    fixed_expectation = PYTEST.replace("cart.add(\"pear\", 2)", "cart.add(\"pear\", 4)").replace("== 5", "== 7")
    assert check_test_weakening("tests/test_cart.py", PYTEST, fixed_expectation) is None
    renamed_helper = UNITTEST.replace("cart = Cart()", "cart = Cart(currency='EUR')")
    assert check_test_weakening("tests/test_cart.py", UNITTEST, renamed_helper) is None


def test_pytest_removed_assertion_is_named() -> None:
    weaker = PYTEST.replace("    assert cart.total() == 5\n", "    cart.total()\n")
    reason = check_test_weakening("tests/test_cart.py", PYTEST, weaker)
    assert reason and "removes assertions (3 before, 2 after)" in reason and "code under test" in reason


def test_pytest_assert_true_and_emptied_body() -> None:
    trivial = PYTEST.replace("    assert Cart().total() == 0\n", "    assert True\n")
    reason = check_test_weakening("tests/test_cart.py", PYTEST, trivial)
    assert reason and "always true" in reason and "test_empty_cart_total_is_zero" in reason
    emptied = PYTEST.replace("    with pytest.raises(ValueError):\n        Cart().add(\"bad\", -1)\n", "    pass\n")
    reason = check_test_weakening("tests/test_cart.py", PYTEST, emptied)
    assert reason and "test_negative_price_rejected to a body that always passes" in reason


def test_pytest_skip_xfail_and_deleted_test() -> None:
    skipped = PYTEST.replace("def test_total_sums_prices", "@pytest.mark.xfail(reason='flaky')\ndef test_total_sums_prices")
    assert "skipped" in (check_test_weakening("tests/test_cart.py", PYTEST, skipped) or "")
    inline = PYTEST.replace("    cart = Cart()\n", "    pytest.skip('later')\n    cart = Cart()\n")
    assert "skipped" in (check_test_weakening("tests/test_cart.py", PYTEST, inline) or "")
    gone = PYTEST.split("\n\ndef test_negative")[0] + "\n"
    reason = check_test_weakening("tests/test_cart.py", PYTEST, gone)
    assert reason and "removes test(s) test_negative_price_rejected" in reason


def test_pytest_flipped_comparison() -> None:
    flipped = PYTEST.replace("assert cart.total() == 5", "assert cart.total() != 5")
    reason = check_test_weakening("tests/test_cart.py", PYTEST, flipped)
    assert reason and "negates a check" in reason


def test_unittest_loosened_and_skipped() -> None:
    loose = UNITTEST.replace("self.assertEqual(cart.total(), 3)", "self.assertTrue(cart.total())")
    reason = check_test_weakening("tests/test_cart.py", UNITTEST, loose)
    assert reason and "truthiness" in reason
    skipped = UNITTEST.replace("    def test_items", "    @unittest.skip('broken')\n    def test_items")
    assert "skipped" in (check_test_weakening("tests/test_cart.py", UNITTEST, skipped) or "")


@pytest.mark.parametrize("path, before, after", [
    ("tests/test_cart.py", UNITTEST, UNITTEST.replace("        self.assertEqual(cart.total(), 3)",
                                                      "        with self.assertRaises(IndexError):\n"
                                                      "            cart.total()")),
    ("tests/test_cart.py", PYTEST, PYTEST.replace("    assert Cart().total() == 0",
                                                  "    with pytest.raises(IndexError):\n        Cart().total()")),
    ("src/cart.test.js", "test('empty', () => {\n  expect(total([])).toBe(0);\n});\n",
     "test('empty', () => {\n  expect(() => total([])).toThrow(TypeError);\n});\n"),
], ids=["unittest", "pytest", "jest"])
def test_an_expected_value_turned_into_an_expected_exception_is_a_weakened_test(path: str, before: str,
                                                                                after: str) -> None:
    reason = check_test_weakening(path, before, after)
    assert reason and "turns an expected value into an expected exception" in reason


def test_a_new_test_expecting_an_exception_beside_the_old_ones_is_fine() -> None:
    more = PYTEST + ("\n\ndef test_unknown_item_rejected():\n    with pytest.raises(KeyError):\n"
                     "        Cart().remove('x')\n")
    assert check_test_weakening("tests/test_cart.py", PYTEST, more) is None


def test_jest_skip_loosen_and_trivial() -> None:
    path = "src/cart.test.js"
    assert "skipped" in (check_test_weakening(path, JEST, JEST.replace('it("sums', 'it.skip("sums')) or "")
    loose = JEST.replace("expect(total([1, 2])).toBe(3);", "expect(total([1, 2])).toBeTruthy();")
    assert "truthiness" in (check_test_weakening(path, JEST, loose) or "")
    trivial = JEST.replace("expect(total([])).toEqual(0);", "expect(true).toBe(true);")
    assert "always true" in (check_test_weakening(path, JEST, trivial) or "")
    removed = JEST.replace('\n  test("empty is zero", () => {\n    expect(total([])).toEqual(0);\n  });\n', "")
    assert "removes test(s) empty is zero" in (check_test_weakening(path, JEST, removed) or "")
    more = JEST.replace("expect(total([1, 2])).toBe(3);", "expect(total([1, 2])).toBe(3);\n    expect(total([5])).toBe(5);")
    assert check_test_weakening(path, JEST, more) is None


def test_go_skip_flip_and_removed_error() -> None:
    path = "cart/cart_test.go"
    skipped = GO.replace("\tgot := ", "\tt.Skip(\"later\")\n\tgot := ")
    assert "skipped" in (check_test_weakening(path, GO, skipped) or "")
    flipped = GO.replace("if got != 3 {", "if got == 3 {")
    assert "negates a check" in (check_test_weakening(path, GO, flipped) or "")
    silenced = GO.replace('\t\tt.Errorf("Total = %d, want 3", got)\n', "\t\t_ = got\n")
    assert "removes assertions" in (check_test_weakening(path, GO, silenced) or "")
    stricter = GO.replace("t.Errorf", "t.Fatalf")
    assert check_test_weakening(path, GO, stricter) is None


def test_deleting_a_test_file_is_refused() -> None:
    reason = check_test_weakening("tests/test_cart.py", PYTEST, None)
    assert reason and "deletes the test file" in reason


FORCE_PASS = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
PACKAGE = '{"name": "app", "scripts": {"test": "node --test", "build": "tsc"}, "devDependencies": {}}'


@pytest.mark.parametrize("path, old, new, named", [
    # a new conftest.py that rewrites every outcome to "passed"
    ("conftest.py", None, FORCE_PASS, "pytest_runtest_makereport"),
    # a plugin module anywhere that drops the failing test at collection
    ("src/plugin.py", "X = 1\n", "X = 1\n\n\ndef pytest_collection_modifyitems(items):\n    items[:] = []\n",
     "pytest_collection_modifyitems"),
    ("tests/conftest.py", "", "collect_ignore = ['test_calc.py']\n", "collect_ignore"),
    ("conftest.py", "", "pytest_plugins = ['tools.always_green']\n", "pytest_plugins"),
    ("pytest.ini", "[pytest]\n", "[pytest]\naddopts = -p tools.always_green\n", "-p"),
    ("conftest.py", "", "def pytest_sessionfinish(session):\n    session.exitstatus = 0\n", "pytest_sessionfinish"),
    # the runner's options: deselect, ignore, -k
    ("pytest.ini", "[pytest]\naddopts = -q\n", "[pytest]\naddopts = -q --deselect tests/test_calc.py::test_add\n",
     "--deselect"),
    ("pyproject.toml", "[tool.pytest.ini_options]\n", "[tool.pytest.ini_options]\naddopts = \"-k 'not add'\"\n", "-k"),
    ("setup.cfg", "[tool:pytest]\n", "[tool:pytest]\ntestpaths = tests/unit\n", "testpaths"),
    # the test script, the runner's configuration
    ("package.json", PACKAGE, PACKAGE.replace("node --test", "exit 0"), "'test' script"),
    ("jest.config.js", "module.exports = {};\n", "module.exports = {testPathIgnorePatterns: ['math']};\n",
     "configuration"),
])
def test_a_change_that_weakens_the_tests_without_editing_one_is_named(path: str, old: str | None, new: str,
                                                                      named: str) -> None:
    reason = check_test_setup(path, old, new)
    assert reason and named in reason and "how the tests are collected and run is not part of the fix" in reason


@pytest.mark.parametrize("path, old, new", [
    ("calc.py", "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"),
    ("conftest.py", None, "import pytest\n\n\n@pytest.fixture\ndef cart():\n    return []\n"),  # a fixture
    ("conftest.py", "def pytest_runtest_setup(item):\n    pass\n",
     "def pytest_runtest_setup(item):\n    item.config.seen = True\n"),  # a hook that was there already
    ("pyproject.toml", "[project]\nname = 'app'\n", "[project]\nname = 'app'\ndependencies = ['attrs']\n"),
    ("pyproject.toml", "[tool.poe.tasks]\n", "[tool.poe.tasks]\nserve = 'python -m app -k secret.pem'\n"),  # not pytest
    ("package.json", PACKAGE, PACKAGE.replace('"devDependencies": {}', '"devDependencies": {"tsx": "4"}')),
    ("src/session.py", "", "if status.exitstatus == 0:\n    pass\n"),  # a comparison, not a setting
    ("src/cli.py", "", "exitstatus = main()\n"),  # a name of the program's own, not pytest's session
])
def test_changes_that_leave_the_test_setup_alone_pass(path: str, old: str | None, new: str) -> None:
    assert check_test_setup(path, old, new) is None


def test_a_go_build_tag_that_turns_a_test_file_off_is_a_skip() -> None:
    reason = check_test_weakening("calc_test.go", GO, "//go:build ignore\n\n" + GO)
    assert reason and "skipped" in reason


# ----- the files the test command reads ------------------------------------------------------------------------------
MAKEFILE = "PYTEST = python -m pytest -q\n\n.PHONY: test\ntest:\n\t$(PYTEST) tests\n\nlint:\n\truff check .\n"
SCRIPTS = '{"scripts": {"check": "npm run lint && node --test", "lint": "eslint .", "build": "tsc"}, "deps": {}}'
CARGO = '[package]\nname = "calc"\n\n[dependencies]\nserde = "1"\n\n[[test]]\nname = "api"\nharness = true\n'
GO_CODE = "package calc\n\nfunc Add(a, b int) int { return a - b }\n"


@pytest.mark.parametrize("command, path, old, new", [
    ("make test", "Makefile", MAKEFILE, MAKEFILE.replace("$(PYTEST) tests", "true")),
    ("make test", "Makefile", MAKEFILE, MAKEFILE.replace("-q", "-q -k 'not add'")),
    ("make test", "Makefile", MAKEFILE, MAKEFILE + "include local.mk\n"),
    ("make test", "tools/pytest.mk", "", "PYTEST += --deselect tests/test_calc.py::test_add\n"),
    ("make -C app check", "app/Makefile", MAKEFILE, MAKEFILE.replace("tests", "tests/smoke")),
    ("timeout 600 gmake -f ci.make test", "ci.make", MAKEFILE, ""),
    ("npm run check", "package.json", SCRIPTS, SCRIPTS.replace("node --test", "true")),
    ("npm run check", "package.json", SCRIPTS, SCRIPTS.replace("eslint .", "exit 0")),  # a script it runs
    ("cd web && yarn check", "web/package.json", SCRIPTS, SCRIPTS.replace('"check": "', '"check": "exit 0; ')),
    ("tox -e py311", "tox.ini", "[testenv]\ncommands = pytest\n", "[testenv]\ncommands = python -c 0\n"),
    ("tox", "pyproject.toml", "[tool.tox]\nenv_list = ['py']\n", "[tool.tox]\nenv_list = []\n"),
    ("uv run nox -s tests", "noxfile.py", "def tests(s):\n    s.run('pytest')\n", "def tests(s):\n    pass\n"),
    ("just test", "justfile", "test:\n    pytest\n", "test:\n    true\n"),
    ("cargo test", "Cargo.toml", CARGO, CARGO.replace("harness = true", "harness = false")),
    ("cargo test", "crates/core/Cargo.toml", "[package]\nname = 'core'\n",
     "[package]\nname = 'core'\nautotests = false\n"),
    ("go test ./...", "calc/calc.go", GO_CODE, "//go:build never\n\n" + GO_CODE),
    ("./scripts/test.sh", "scripts/test.sh", "#!/bin/sh\npytest\n", "#!/bin/sh\nexit 0\n"),
    ("python runtests.py --fast", "runtests.py", "import pytest\npytest.main()\n", "print('ok')\n"),
])
def test_a_change_to_what_the_test_command_runs_is_refused_as_a_test_edit(command: str, path: str, old: str,
                                                                          new: str) -> None:
    reason = check_test_definition(path, old, new, command)
    assert reason and reason.startswith(f"the edit to {path} changes ") and "--allow-test-edits" in reason


@pytest.mark.parametrize("command, path, old, new", [
    ("make test", "calc.py", "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"),
    ("make -C app check", "Makefile", MAKEFILE, ""),  # another folder's makefile
    ("npm run check", "package.json", SCRIPTS, SCRIPTS.replace('"tsc"', '"tsc -b"')),  # a script it does not run
    ("npm run check", "package.json", SCRIPTS, SCRIPTS.replace('"deps": {}', '"deps": {"zod": "3"}')),
    ("npm test", "web/package.json", SCRIPTS, ""),
    ("tox", "pyproject.toml", "[project]\nname = 'app'\n", "[project]\nname = 'app'\nversion = '2'\n"),
    ("cargo test", "Cargo.toml", CARGO, CARGO.replace('serde = "1"', 'serde = "1"\nrand = "0.8"')),
    ("go test ./...", "calc/calc.go", GO_CODE, GO_CODE.replace("a - b", "a + b")),
    ("python -m pytest -q", "pytest.ini", "", "[pytest]\n"),  # pytest's own configuration: check_test_setup's
    ("pytest tests/test_calc.py", "tests/test_calc.py", "", "def test_more():\n    pass\n"),
])
def test_changes_beside_what_the_test_command_runs_pass(command: str, path: str, old: str, new: str) -> None:
    assert check_test_definition(path, old, new, command) is None


def test_the_files_a_test_command_reads_are_named_by_what_runs_them() -> None:
    assert [d.what for d in definitions("FOO=1 make -j4 test && ./post.sh")] == [
        "the makefile that `make -j4 test` reads", "the script the test command runs (`./post.sh`)"]
    assert definitions("python -m pytest -q") == [] and definitions("echo 'unclosed") == []
