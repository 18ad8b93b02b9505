"""A run's output as the model is shown it (verify/steady.py, agent/feedback.py): two runs of one failing suite, in
two folders of different depth, at two times, give the model the very same text — no timings, no scratch path, no
path climbing out of the tree as deep as the folder — while what the person sees is the output as it came."""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from code_assistant.agent.feedback import failure_text
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.steady import steady_output
from tests.repos import PYTEST, go_repo, node_repo, python_repo


def _shown_twice(make, tmp_path: Path, command: str) -> tuple[str, str, str]:
    shallow = make(tmp_path / "a")
    deep = make(tmp_path / "b" / "c" / "d" / "e")
    first, second = (TestRunner(command, cwd=repo).run() for repo in (shallow, deep))
    assert not first.passed and not second.passed
    return failure_text(first), failure_text(second), first.output + second.output


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_two_pytest_runs_in_different_folders_show_the_model_the_same_text(tmp_path: Path) -> None:
    a, b, raw = _shown_twice(lambda p: python_repo(_mkdir(p)), tmp_path, PYTEST)
    assert a == b
    assert re.search(r"1 failed, 1 passed.* in \d+\.\d+s\n", raw)  # the seconds: to the person only
    assert re.search(r"\n1 failed, 1 passed[\w, ]*\n```$", a)
    assert str(tmp_path) not in a and "tests/test_calc.py:5: AssertionError" in a


def test_a_path_out_of_the_tree_is_written_absolute_not_as_deep_as_the_folder(tmp_path: Path) -> None:
    lib = _mkdir(tmp_path / "lib")  # a helper outside both trees: pytest names its frame relative to each
    (lib / "helper.py").write_text("def check(x):\n    assert x == 5\n")
    files = {"tests/test_it.py": f"import sys\nsys.path.insert(0, {str(lib)!r})\nfrom helper import check\n\n\n"
                                 "def test_it():\n    check(4)\n",
             "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n"}
    a, b, raw = _shown_twice(lambda p: python_repo(_mkdir(p), files), tmp_path, PYTEST)
    assert "../../lib/helper.py:2: AssertionError" in raw and "../../../../../lib/helper.py:2" in raw
    assert a == b and f"{lib}/helper.py:2: AssertionError" in a and "../" not in a


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_two_node_runs_show_the_model_the_same_text(tmp_path: Path) -> None:
    a, b, raw = _shown_twice(lambda p: node_repo(_mkdir(p)), tmp_path, "node --test")
    assert a == b and "duration_ms" in raw and "duration_ms" not in a
    assert str(tmp_path) not in a


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
def test_two_go_runs_show_the_model_the_same_text(tmp_path: Path) -> None:
    a, b, raw = _shown_twice(lambda p: go_repo(_mkdir(p)), tmp_path, "go test ./...")
    assert a == b and "s\n" in raw
    assert str(tmp_path) not in a


@pytest.mark.parametrize(("line", "shown"), [
    ("1 failed, 1 passed, 1 warning in 0.60s", "1 failed, 1 passed, 1 warning"),
    ("==== 2 passed, 1 skipped in 12.02s (0:00:12) ====", "==== 2 passed, 1 skipped ===="),
    ("Ran 3 tests in 0.001s", "Ran 3 tests"),
    ("--- FAIL: TestAdd (0.00s)", "--- FAIL: TestAdd"),
    ("FAIL\tex.com/calc\t0.007s", "FAIL\tex.com/calc"),
    ("ok  \tex.com/calc/util\t0.002s", "ok  \tex.com/calc/util"),
    ("✖ adds (1.2345ms)", "✖ adds"),
    ("  duration_ms: 2.87714\n  location: 'x'", "  location: 'x'"),
    ("# duration_ms 45.61\n# tests 2", "# tests 2"),
    ("Time:        0.512 s, estimated 1 s\nRan all test suites.", "Ran all test suites."),
    ("test result: FAILED. 0 passed; 1 failed; 0 ignored; finished in 0.00s",
     "test result: FAILED. 0 passed; 1 failed; 0 ignored"),
    ("  2 passing (8ms)", "  2 passing"),
    # what is not a runner's timing stays as it is
    ("assert wait(5) == 5s", "assert wait(5) == 5s"),
    ("E   TimeoutError: gave up in 2.5s", "E   TimeoutError: gave up in 2.5s"),
])
def test_the_runners_timings_are_left_out(line: str, shown: str) -> None:
    assert steady_output(line) == shown


def test_the_trees_path_becomes_relative_and_a_sibling_is_left_alone(tmp_path: Path) -> None:
    repo = _mkdir(tmp_path / "repo")
    text = (f"File \"{repo}/calc.py\", line 2\nat {repo}\n{tmp_path}/repo2/x.py\n"
            f"../../lib/site.py:3\n./calc.py:1\nsrc/../calc.py")
    assert steady_output(text, repo).splitlines() == [
        'File "calc.py", line 2', "at .", f"{tmp_path}/repo2/x.py", f"{tmp_path.parent}/lib/site.py:3",
        "./calc.py:1", "src/../calc.py"]


def test_a_project_that_turns_pytests_cache_off_gets_no_warning_of_ours(tmp_path: Path) -> None:
    off = python_repo(_mkdir(tmp_path / "off"))  # its pytest.ini says -p no:cacheprovider
    on = python_repo(_mkdir(tmp_path / "on"), {"calc.py": "def add(a, b):\n    return a - b\n",
                                               "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                                     "    assert add(2, 3) == 5\n",
                                               "pytest.ini": "[pytest]\npythonpath = .\n"})
    quiet = TestRunner(f"{sys.executable} -m pytest -q", cwd=off).run()
    assert "failed" in quiet.summary() and "Unknown config option" not in quiet.output
    cached = TestRunner(f"{sys.executable} -m pytest -q", cwd=on).run()
    assert "1 failed" in cached.summary() and not (on / ".pytest_cache").exists()  # the cache went elsewhere



def test_only_the_projects_own_regular_files_say_the_cache_is_off(tmp_path: Path) -> None:
    """A pytest.ini that is a FIFO (nothing would ever write to it) is passed over, not waited on; one that is a link
    to a file outside the project does not speak for it."""
    import os
    import threading

    from code_assistant.verify.runner import cache_off

    fifo, linked = _mkdir(tmp_path / "fifo"), _mkdir(tmp_path / "linked")
    os.mkfifo(fifo / "pytest.ini")
    (tmp_path / "outside.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (linked / "pytest.ini").symlink_to(tmp_path / "outside.ini")
    said: list[bool] = []
    reading = threading.Thread(target=lambda: said.extend(cache_off("pytest", {}, tree) for tree in (fifo, linked)),
                               daemon=True)
    reading.start()
    reading.join(30)  # an anti-hang guard
    assert said == [False, False]
    assert cache_off("pytest -p no:cacheprovider", {}, fifo) and cache_off("pytest", {"PYTEST_ADDOPTS": "-p "
                                                                                        "no:cacheprovider"}, fifo)

def test_a_tree_at_the_root_leaves_paths_as_they_are() -> None:
    assert steady_output("/usr/lib/x.py:3 and /etc/y", Path("/")) == "/usr/lib/x.py:3 and /etc/y"


def test_a_failures_message_naming_the_trees_file_names_it_relative(tmp_path: Path) -> None:
    """Qwen2.5-Coder-1.5B deleted multiply(): pytest's message was "cannot import name 'multiply' from 'calc'
    (/tmp/peers-.../repo/calc.py)", the scratch path in the failures' list."""
    files = {"calc.py": "def add(a, b):\n    return a + b\n",
             "tests/test_calc.py": "from calc import add, multiply\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
             "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}
    a, b, raw = _shown_twice(lambda p: python_repo(_mkdir(p), files), tmp_path, PYTEST)
    assert f"{tmp_path}" in raw and "cannot import name 'multiply' from 'calc' (calc.py)" in a
    assert a == b and str(tmp_path) not in a
