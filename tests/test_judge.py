"""eval's judge works as SWE-bench's harness (issue 61, item 5): the files the test patch touches are put back as the
case's commit has them before the patch is applied, test ids are matched as each runner names them, and an id that
matches nothing is named in the verdict. Real repositories in tmp dirs, real pytest and go test, the product's
sandbox."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from code_assistant.evaluate.cases import Case, Source, SourceKind
from code_assistant.evaluate.judge import judge, names, not_in_tree
from code_assistant.evaluate.scratch import patch_paths
from code_assistant.verify.sandbox import resolve
from tests.repos import CALC_PY, GO_SVC, PYTEST, git_init, python_repo, write_tree

TEST_PATCH = '''diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -8,3 +8,7 @@ def test_add():

 def test_multiply():
     assert multiply(3, 4) == 12
+
+
+def test_add_floats():
+    assert add(0.5, 0.25) == 0.75
'''


def _case(repo: Path, *fail_to_pass: str, patch: str = "", command: str = PYTEST) -> Case:
    return Case(id="c", source=Source(SourceKind.PATH, str(repo)), task="fix add", test_command=command,
                fail_to_pass=fail_to_pass, test_patch=patch)


def test_a_test_the_agent_added_to_the_patched_file_does_not_keep_the_hidden_tests_out(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text(CALC_PY.replace("a - b", "a + b"))
    with (repo / "tests/test_calc.py").open("a") as tests:  # the agent's own test, where the hidden one goes too
        tests.write("\n\ndef test_add_negative():\n    assert add(-1, -2) == -3\n")
    (repo / "tests/test_new.py").write_text("def test_x():\n    assert False\n")  # not the patch's: kept
    judgement = judge(_case(repo, "tests/test_calc.py::test_add_floats", patch=TEST_PATCH), repo, resolve("write"),
                      timeout=60)
    assert judgement.verdict == "resolved", judgement
    assert "test_add_negative" not in (repo / "tests/test_calc.py").read_text()
    assert (repo / "tests/test_new.py").exists()


def test_the_files_of_a_patch_are_read_from_its_headers() -> None:
    assert patch_paths(TEST_PATCH) == ["tests/test_calc.py"]
    added = "--- /dev/null\n+++ b/tests/test_more.py\n@@ -0,0 +1 @@\n+x = 1\n--- a/../outside.py\n+++ b/../outside.py\n"
    assert patch_paths(added) == ["tests/test_more.py"], "a path out of the checkout is never touched"


@pytest.mark.parametrize("test_id, name, same", [
    ("TestAdd", "example.com/svc/calc.TestAdd", True),  # Go's bare name, as SWE-bench Multilingual writes it
    ("TestAdd", "example.com/svc/calc.TestAdd/negative", True),  # its subtests
    ("TestAdd", "example.com/svc/calc.TestAddMore", False),
    ("TestRoute/static", "example.com/web.TestRoute/static", True),
    ("tests/t.py::test_p", "tests/t.py::test_p[1-2]", True),  # every parametrized case of a test
    ("tests/t.py::test_p", "tests/t.py::test_pow", False),
    ("tests/t.py::TestC", "tests/t.py::TestC::test_m", True),
    ("tests.test_calc.CalcTest", "tests.test_calc.CalcTest.test_add", True),  # unittest's dotted ids
])
def test_ids_are_matched_as_each_runner_names_its_tests(test_id: str, name: str, same: bool) -> None:
    assert names(test_id, name) is same


def test_an_id_that_matches_nothing_is_named_in_the_verdict(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text(CALC_PY.replace("a - b", "a + b"))
    judgement = judge(_case(repo, "tests/test_calc.py::test_add", "test_calc.py::test_add"), repo, resolve("write"),
                      timeout=60)
    assert judgement.tests == {"tests/test_calc.py::test_add": "passed", "test_calc.py::test_add": "missing"}
    assert judgement.verdict == "unresolved"
    assert judgement.summary.endswith("; 1 named test matched nothing: test_calc.py::test_add")


def test_ids_that_name_no_test_in_the_tree_are_seen_before_the_run(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    assert not_in_tree(["tests/test_calc.py::test_add", "tests/test_calc.py::test_gone", "tests/test_none.py::test_x",
                        "tests/test_calc.py::test_add[1-2]", "some.unittest.Id"], repo) == [
        "tests/test_calc.py::test_gone", "tests/test_none.py::test_x"]
    go = write_tree(tmp_path / "svc", GO_SVC)
    assert not_in_tree(["TestAdd", "example.com/svc/calc.TestAdd/neg", "TestRoutePattern"], go) == ["TestRoutePattern"]


def test_a_bare_go_test_name_is_found_failing_in_its_package(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    repo = write_tree(tmp_path / "svc", GO_SVC)
    git_init(repo)
    judgement = judge(_case(repo, "TestAdd", command="go test ./..."), repo, resolve("write"), timeout=120)
    assert (judgement.verdict, judgement.tests) == ("unresolved", {"TestAdd": "failed"}), judgement
