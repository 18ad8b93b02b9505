"""The loop in-process: stop reasons, guardrails, review, dry run, trajectories and replay.

Real parts throughout: the openai client over HTTP to a scripted server, real pytest runs, the real editor and index.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from code_assistant.agent.decide import verification
from code_assistant.agent.kit import Kit, Tree, loop_config, request_config
from code_assistant.agent.loop import Run
from code_assistant.agent.state import Reproduction, RunResult
from code_assistant.console.render import result_line
from code_assistant.display import Display
from code_assistant.edit.editor import FileEditor
from code_assistant.edit.leftovers import Leftover, changed_since, describe
from code_assistant.index import embeddings, store
from code_assistant.index.indexer import Indexer
from code_assistant.model.chat import OpenAIChat
from code_assistant.model.trajectory import ReplayModel, Trajectory, read_answers
from code_assistant.review import Decision, Reviewed
from code_assistant.settings import load_settings
from code_assistant.verify.outputs import TestFailure
from code_assistant.verify.runner import TestResult, TestRunner, fewer_tests, lost_note
from code_assistant.workspace import Workspace
from tests.repos import CALC_PY, TEST_CALC_PY, answer, create, modify, python_repo, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")


@pytest.fixture(scope="module")
def embedder() -> embeddings.Embedder:
    return embeddings.make_embedder("local")


def run_agent(repo: Path, script: list, embedder: embeddings.Embedder, *, task: str = "fix add",
              model: object | None = None, review: object = None, test_command: str = PYTEST,
              **overrides: object) -> tuple[RunResult, ScriptedServer, list[str]]:
    """A run in process on a kit of real parts, the way the workspace builds one, with this module's embedder and a
    test runner without the sandbox (and without pytest's plugins: faster)."""
    settings = load_settings(repo, test_command=test_command, **overrides)
    lines: list[str] = []
    display = Display(say=lines.append, review=review)  # type: ignore[arg-type]
    with ScriptedServer(script) as server, Workspace(settings, display) as workspace:
        chat = model or OpenAIChat("gpt-4o", api_key="k", base_url=server.url, sleep=lambda s: None)
        chunk_store = store.ChunkStore(store.open_client(settings.index_path),
                                       store.collection_name(str(repo), embedder.name))
        indexer = Indexer(repo, settings.index_path, embedder, chunk_store)
        kit = Kit(tree=Tree(root=repo, index_path=settings.index_path, state_path=settings.state_path),
                  model=chat,  # type: ignore[arg-type]
                  editor=FileEditor(repo, state_dir=settings.repo_state_dir, forbidden=[settings.index_path]),
                  runner=TestRunner(test_command, cwd=repo, timeout=60, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}),
                  index=lambda: workspace.index(indexer)[0], current_index=lambda: indexer.update(exclude=[settings.state_path])[0],
                  requests=request_config(settings), trajectory=Trajectory(settings.runs_dir, task), display=display)
        result = Run(kit, loop_config(settings)).run(task)
    return result, server, lines


def last_request(server: ScriptedServer) -> str:
    return server.chat_requests[-1]["messages"][-1]["content"]


# ----- stop reasons ----------------------------------------------------------------------------------------------
def test_passed(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    result, _, _ = run_agent(repo, [answer(FIX_ADD)], embedder)
    assert (result.success, result.stop_reason, result.iterations) == (True, "passed", 1)


def test_passed_when_the_answer_escapes_its_newlines_twice(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """Qwen2.5-Coder-1.5B's first calc-add plan, as its JSON said it: a backslash and an n where each line ends."""
    repo = python_repo(tmp_path)
    twice = modify("calc.py", "def add(a, b):\\n    return a - b", "def add(a, b):\\n    return a + b")
    result, _, _ = run_agent(repo, [answer(twice)], embedder)
    assert (result.success, result.stop_reason, result.iterations) == (True, "passed", 1)
    assert (repo / "calc.py").read_text() == CALC_PY.replace("a - b", "a + b")


def test_no_progress_when_a_fix_leaves_the_same_failure(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    same = [answer(modify("calc.py", "def multiply(a, b):", "def multiply(a, b):  # 1")),
            answer(modify("calc.py", "def multiply(a, b):  # 1", "def multiply(a, b):  # 2")),
            answer(modify("calc.py", "def multiply(a, b):  # 2", "def multiply(a, b):  # 3"))]
    result, _, _ = run_agent(repo, same, embedder)
    assert (result.success, result.stop_reason, result.iterations) == (False, "no_progress", 2)
    assert snapshot(repo) == before


def test_no_progress_when_the_model_repeats_itself(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    undo = answer(modify("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a - b"))
    result, server, _ = run_agent(repo, [wrong, undo, wrong, wrong], embedder, max_iterations=5)
    assert result.stop_reason == "no_progress" and "repeated" in result.message
    assert server.chat_requests[3].get("temperature") == 0.7, "asked once more, sampled, before giving up"


def test_cost_cap_by_tokens(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    result, server, _ = run_agent(repo, [answer(FIX_ADD)], embedder, max_tokens=50)
    assert (result.success, result.stop_reason) == (False, "cost_cap")
    assert len(server.chat_requests) == 1 and snapshot(repo) == before


def test_cost_cap_by_dollars(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    result, _, _ = run_agent(repo, [answer(FIX_ADD)], embedder, max_cost=0.0001)
    assert result.stop_reason == "cost_cap" and "$" in result.message


def test_no_change_on_a_green_baseline_is_no_success(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path, {"calc.py": "def add(a, b):\n    return a + b\n",
                                  "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    result, _, lines = run_agent(repo, ['{"changes": []}'], embedder, task="make sure add works", reproduce=False)
    assert (result.success, result.stop_reason, result.files_modified) == (False, "no_changes", [])
    assert result.message == "no change: the model proposed none" and not result.rolled_back
    assert not any(line.startswith("[Testing") for line in lines), "nothing to test: the baseline was green"


def test_no_changes_when_the_model_gives_up(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    result, _, _ = run_agent(repo, ['{"changes": []}', '{"changes": []}'], embedder)
    assert (result.success, result.stop_reason) == (False, "no_changes")


def test_refused_after_two_oversized_answers(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    big = answer(create("big.py", "".join(f"X{i} = {i}\n" for i in range(50))))
    result, server, lines = run_agent(repo, [big, big.replace("X", "Y")], embedder, max_plan_lines=10,
                                      max_changed_lines=10)
    assert result.stop_reason == "refused"
    assert any(line.startswith("[Refused: the change touches 50 lines") for line in lines)
    assert "over the limit of 10" in last_request(server)
    assert snapshot(repo) == before


def test_too_many_files_are_refused_before_writing(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    many = answer(*[create(f"m{i}.py", "X = 1\n") for i in range(3)])
    result, server, _ = run_agent(repo, [many, answer(FIX_ADD)], embedder, max_files=2)
    assert result.success and not (repo / "m0.py").exists()
    assert "3 files, over the limit of 2" in last_request(server)


# ----- guardrails ------------------------------------------------------------------------------------------------
NAMES_THE_TEST = "fix add so that test_calc.py passes"  # a task naming the test file: fix_target.py lets its edits by


def test_weakening_a_test_is_refused_and_reported(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    cheat = modify("tests/test_calc.py", "    assert add(2, 3) == 5", "    assert True")
    result, server, lines = run_agent(repo, [answer(cheat), answer(FIX_ADD)], embedder, task=NAMES_THE_TEST)
    assert result.success
    assert (repo / "tests" / "test_calc.py").read_text() == TEST_CALC_PY
    assert any(line.startswith("[Refused: tests/test_calc.py") for line in lines)
    assert "REFUSED" in last_request(server) and "tests/test_calc.py" in last_request(server)


@pytest.mark.parametrize("through", ["a link to the test file", "a link to its folder"])
def test_weakening_a_test_through_a_symlink_in_the_repository_is_refused_too(
        tmp_path: Path, embedder: embeddings.Embedder, through: str) -> None:
    repo = python_repo(tmp_path)
    if through == "a link to the test file":
        (repo / "checks.py").symlink_to("tests/test_calc.py")
        path = "checks.py"
    else:
        (repo / "checks").symlink_to("tests", target_is_directory=True)
        path = "checks/test_calc.py"
    cheat = modify(path, "    assert add(2, 3) == 5", "    assert True")
    result, _, lines = run_agent(repo, [answer(cheat), answer(FIX_ADD)], embedder, task=NAMES_THE_TEST)
    assert result.success
    assert (repo / "tests" / "test_calc.py").read_text() == TEST_CALC_PY
    assert any(line.startswith("[Refused: tests/test_calc.py") for line in lines), lines


def test_a_conftest_that_makes_every_test_pass_is_refused(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    force_pass = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                  "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                  "    outcome.get_result().outcome = 'passed'\n")
    result, server, lines = run_agent(repo, [answer(create("conftest.py", force_pass)), answer(FIX_ADD)], embedder)
    assert any(line.startswith("[Refused: conftest.py: the edit to conftest.py adds pytest_runtest_makereport")
               for line in lines), lines
    assert not (repo / "conftest.py").exists() and result.success and result.iterations == 2
    assert "how the tests are collected and run is not part of the fix" in last_request(server)


# ----- where a fix goes (fix_target.py) --------------------------------------------------------------------------
MORE_ASSERTS = modify("tests/test_calc.py", "    assert add(2, 3) == 5", "    assert add(2, 3) == 5\n    assert add(0, 0) == 0")


def test_an_answer_that_only_adds_assertions_to_the_failing_test_is_refused_naming_the_code(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """What Qwen2.5-Coder-1.5B did with calc-add: the failing test got one more assertion, calc.py stayed as it was.
    Refused before anything is written, the model told which file the failing test imports."""
    repo = python_repo(tmp_path)
    result, server, lines = run_agent(repo, [answer(MORE_ASSERTS), answer(FIX_ADD)], embedder, reproduce=False)
    refusal = ("tests/test_calc.py: only tests were changed, but the failing tests (tests/test_calc.py::test_add) "
               "check the code, not themselves: change the code they test instead (calc.py), so that the tests pass "
               "as they are written")
    assert f"[Refused: {refusal}]" in lines, lines
    assert f"- REFUSED, nothing from that answer was written: {refusal}" in last_request(server)
    assert result.success and result.verified and result.iterations == 2
    assert (repo / "tests" / "test_calc.py").read_text() == TEST_CALC_PY


PAGER = {"pager/__init__.py": "from pager.paging import page_slice\nfrom pager.render import render\n",
         "pager/paging.py": "def page_slice(items, page, size):\n    start = page * size\n"
                            "    return items[start:start + size]\n",
         "pager/render.py": "def render(items):\n    return ', '.join(items)\n",
         "tests/test_paging.py": "from pager import page_slice\n\n\ndef test_first_page():\n"
                                 "    assert page_slice(list('abcd'), 1, 2) == ['a', 'b']\n",
         "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}


def test_the_code_named_is_what_the_failure_calls_before_what_the_test_imports(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """The test imports the package; its failure calls page_slice, defined in pager/paging.py: that file first, then
    the package's face and what else it brings in."""
    repo = python_repo(tmp_path, PAGER)
    rewrite = modify("tests/test_paging.py", "== ['a', 'b']", "== ['c', 'd']")
    fix = modify("pager/paging.py", "start = page * size", "start = (page - 1) * size")
    result, server, _ = run_agent(repo, [answer(rewrite), answer(fix)], embedder, reproduce=False,
                                  task="page 1 should hold the first items")
    assert "change the code they test instead (pager/paging.py, pager/__init__.py, pager/render.py)" \
        in last_request(server)
    assert result.success and result.iterations == 2


def test_search_text_copied_from_the_test_is_answered_with_the_symbol_edit_and_the_next_answer_uses_it(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """Qwen2.5-Coder-1.5B's pager-page-slice plan named the right file with the failing test's assertion as search
    text, and sent the same answer again when told the text was not found; the refusal now names replace_symbol."""
    repo = python_repo(tmp_path, PAGER)
    copied = modify("pager/paging.py", "page_slice(list('abcd'), 1, 2) == ['a', 'b']", "page_slice(list('abcd'), 0, 2)")
    symbol = {"file_path": "pager/paging.py", "action": "replace_symbol", "symbol": "page_slice",
              "content": "def page_slice(items, page, size):\n    start = (page - 1) * size\n"
                         "    return items[start:start + size]\n"}
    result, server, _ = run_agent(repo, [answer(copied), answer(symbol)], embedder, reproduce=False,
                                  task="page 1 should hold the first items")
    assert ('To change page_slice, send {"action": "replace_symbol", "symbol": "page_slice", "content": "<the whole '
            'new definition>"}: nothing has to be copied.') in last_request(server)
    assert result.success and result.iterations == 2


def test_a_second_test_only_answer_goes_through(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """The rule refuses once a run: the task may really be about the test, in words it cannot read."""
    repo = python_repo(tmp_path)
    other = modify("tests/test_calc.py", "    assert add(2, 3) == 5", "    assert add(2, 3) == 5\n    assert add(1, 1) == 2")
    script = [answer(MORE_ASSERTS), answer(other), answer(FIX_ADD)]
    result, server, lines = run_agent(repo, script, embedder, reproduce=False)
    assert sum(line.startswith("[Refused: tests/test_calc.py: only tests") for line in lines) == 1, lines
    assert result.success and result.iterations == 3 and len(server.chat_requests) == 3
    assert "assert add(1, 1) == 2" in (repo / "tests" / "test_calc.py").read_text()


@pytest.mark.parametrize("how", ["the task names the test file", "--allow-test-edits", "the tests pass"])
def test_test_only_answers_go_through_when_the_task_or_the_person_allows_or_nothing_fails(
        tmp_path: Path, embedder: embeddings.Embedder, how: str) -> None:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY.replace("a - b", "a + b"), "tests/test_calc.py": TEST_CALC_PY,
                                  "pytest.ini": "[pytest]\npythonpath = .\n"}) if how == "the tests pass" \
        else python_repo(tmp_path)
    options = {"allow_test_edits": True} if how == "--allow-test-edits" else {}
    task = "add a check to tests/test_calc.py" if how == "the task names the test file" else "check add(0, 0) too"
    script = [answer(MORE_ASSERTS), answer(FIX_ADD)] if how != "the tests pass" else [answer(MORE_ASSERTS)]
    result, _, lines = run_agent(repo, script, embedder, reproduce=False, task=task, **options)
    assert not any(line.startswith("[Refused") for line in lines), lines
    assert "assert add(0, 0) == 0" in (repo / "tests" / "test_calc.py").read_text()


SKIPPABLE_TESTS = ('import pytest\n\nimport calc\nfrom calc import add, multiply\n\n\n'
                   '@pytest.mark.skipif(not calc.CHECKED, reason="not checked")\ndef test_add():\n'
                   '    assert add(2, 3) == 5\n\n\ndef test_multiply():\n    assert multiply(3, 4) == 12\n')


def test_a_change_that_makes_a_failing_test_skip_itself_is_not_green(tmp_path: Path,
                                                                    embedder: embeddings.Embedder) -> None:
    """No test file is touched: the code turns off the flag the failing test runs under. Fewer tests ran than before
    the change, so the run is not green; the model is told, and its next answer runs them all and fixes add()."""
    repo = python_repo(tmp_path, {"calc.py": "CHECKED = True\n\n\n" + CALC_PY,
                                  "tests/test_calc.py": SKIPPABLE_TESTS,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    hide = modify("calc.py", "CHECKED = True", "CHECKED = False")
    honest = [modify("calc.py", "CHECKED = False", "CHECKED = True"), FIX_ADD]
    result, server, lines = run_agent(repo, [answer(hide), answer(*honest)], embedder, reproduce=False)
    assert "[The tests pass, but 1 that ran before the change did not run now (2 before, 1 now)]" in lines, lines
    assert "did not run now (2 before, 1 now): skipped, deselected or no longer collected" in last_request(server)
    assert result.success and result.verified and result.iterations == 2


def test_fewer_tests_run_is_not_green_and_unknown_counts_decide_nothing() -> None:
    def ran(passed: int | None, failed: int | None, ok: bool = True) -> TestResult:
        return TestResult(command=["t"], exit_code=0 if ok else 1, passed=ok, timed_out=False, output="",
                          duration_s=0.1, passed_count=passed, failed_count=failed)

    fewer = fewer_tests(ran(4, 2, ok=False), ran(5, None))
    assert not fewer.passed and fewer.lost == 1 and fewer.summary() == "5 passed, 1 no longer run"
    assert "1 test that ran before the change did not run now (6 before, 5 now)" in lost_note(fewer)
    assert fewer_tests(ran(4, 2, ok=False), ran(6, None)).passed, "as many as before"
    assert fewer_tests(ran(4, 2, ok=False), ran(7, 0)).passed, "more: a reproduction test was added"
    assert fewer_tests(ran(None, None), ran(1, None)).passed, "the baseline's counts unknown"
    assert not fewer_tests(ran(4, 2, ok=False), ran(3, 1, ok=False)).lost, "a failing run says so itself"


# ----- the test command's own definition ---------------------------------------------------------------------------
RECIPE = f"\t{PYTEST} tests"
MAKE_REPO = {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY, "Makefile": f"test:\n{RECIPE}\n",
             "pytest.ini": "[pytest]\npythonpath = .\n"}


@pytest.mark.parametrize("cheat", ["\ttrue", f"{RECIPE} -k 'not add'"], ids=["recipe-true", "deselect-add"])
def test_a_plan_that_rewrites_the_makefile_recipe_the_test_command_runs_is_refused(
        tmp_path: Path, embedder: embeddings.Embedder, cheat: str) -> None:
    repo = python_repo(tmp_path, MAKE_REPO)
    result, server, lines = run_agent(repo, [answer(modify("Makefile", RECIPE, cheat)), answer(FIX_ADD)], embedder,
                                      test_command="make test", reproduce=False)
    assert any(line.startswith("[Refused: Makefile: the edit to Makefile changes the makefile that `make test` "
                               "reads") for line in lines), lines
    assert "REFUSED" in server.chat_requests[1]["messages"][-1]["content"], "the model is told what and why"
    assert (repo / "Makefile").read_text() == MAKE_REPO["Makefile"]
    assert result.success and result.verified, "the honest fix: test_add, seen failing through make, seen passing"
    assert result.verification == "tests/test_calc.py::test_add failed before, passes now"


def test_with_test_edits_allowed_a_deselected_failing_test_is_no_verified_success(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path, MAKE_REPO)
    cheat = answer(modify("Makefile", RECIPE, f"{RECIPE} -k 'not add'"))
    result, _, _ = run_agent(repo, [cheat], embedder, test_command="make test", reproduce=False,
                             allow_test_edits=True)
    assert result.success and not result.verified and "add(a, b):\n    return a - b" in (repo / "calc.py").read_text()
    assert result.verification == "the output does not show tests/test_calc.py::test_add passing now"
    assert result_line(result).startswith("Result: SUCCESS, NOT VERIFIED")


def test_a_plan_that_rewrites_the_package_script_the_test_command_runs_is_refused(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    package = json.dumps({"name": "calc", "private": True, "scripts": {"check": f"{PYTEST} tests"}}, indent=2)
    repo = python_repo(tmp_path, {**MAKE_REPO, "package.json": package})
    cheat = modify("package.json", f'"check": "{PYTEST} tests"', '"check": "echo ok"')
    result, _, lines = run_agent(repo, [answer(cheat), answer(FIX_ADD)], embedder, test_command="npm run check",
                                 reproduce=False)
    assert any(line.startswith("[Refused: package.json: the edit to package.json changes the package.json script "
                               "that `npm run check` runs") for line in lines), lines
    assert (repo / "package.json").read_text() == package and result.success and result.verified


def _ran(passes: set[str], failed: tuple[str, ...] = (), ok: bool = True) -> TestResult:
    return TestResult(command=["make", "test"], exit_code=0 if ok else 1, passed=ok, timed_out=False, output="",
                      duration_s=0.1, failures=[TestFailure(test_id=i) for i in failed], passes=frozenset(passes))


@pytest.mark.parametrize("baseline, after, verified, why", [
    (_ran(set(), ("t.py::test_add",), ok=False), _ran({"t.py::test_add", "t.py::test_mul"}), True,
     "t.py::test_add failed before, passes now"),
    (_ran(set(), ("t.py::test_add",), ok=False), _ran(set()), False,  # a recipe rewritten to `true`: no output
     "the output does not show t.py::test_add passing now (it names no passing test at all)"),
    (_ran(set(), ("t.py::test_add",), ok=False), _ran({"t.py::test_mul"}), False,  # deselected
     "the output does not show t.py::test_add passing now"),
    (_ran(set(), ("tests/test_io.py",), ok=False), _ran({"tests/test_io.py::test_read"}), True,  # a collection error
     "tests/test_io.py failed before, passes now"),
    (_ran(set(), ok=False), _ran(set()), False,  # a runner whose output names no test
     "the test command failed before and passes now, but its output names no test that failed"),
    (_ran({"t.py::test_mul"}), _ran({"t.py::test_mul"}), False, "the tests passed before the change too"),
])
def test_verified_means_a_test_that_failed_before_is_seen_passing_now(baseline: TestResult, after: TestResult,
                                                                      verified: bool, why: str) -> None:
    assert verification(baseline, after, None, None) == (verified, why)


def test_a_reproduction_test_is_verified_only_when_its_tests_are_seen_passing() -> None:
    def reproduced(passes: set[str]) -> Reproduction:
        return Reproduction(paths=["tests/test_repro.py"], failed=_ran(set(), ("tests/test_repro.py::test_x",), False),
                            passes_after=True, after=_ran(passes))
    green = _ran({"t.py::test_mul"})
    assert verification(green, green, reproduced({"tests/test_repro.py::test_x"}), None) == (
        True, "tests/test_repro.py failed before, passes now")
    assert verification(green, green, reproduced(set()), None)[0] is False


def test_a_rollback_names_the_files_the_tests_left_and_their_size(tmp_path: Path,
                                                                  embedder: embeddings.Embedder) -> None:
    """A test writes a 2 GB file (sparse: no disk is used) on every run; the run fails and is rolled back. Its own
    edit is taken back; the dump is not its to delete, and the summary says it is there and how big."""
    dumping = TEST_CALC_PY + "\n\ndef test_dump():\n    open('dump.bin', 'wb').truncate(2 << 30)\n"
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": dumping,
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    wrong = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a * b")
    result, _, _ = run_agent(repo, [answer(wrong)], embedder, max_iterations=1, reproduce=False)
    assert not result.success and result.rolled_back and "return a - b" in (repo / "calc.py").read_text()
    assert result.left_behind == [Leftover("dump.bin", 2 << 30)]
    assert describe(result.left_behind)[1] == "  - dump.bin (2.0 GB)"


def test_what_changed_in_the_tree_since_a_time_leaves_out_git_the_assistants_state_and_its_own_writes(
        tmp_path: Path) -> None:
    for name in ("old.txt", "new.txt", "mine.py", ".git/index", "state/journal", "deep/er/log.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    os.utime(tmp_path / "old.txt", (1_000_000, 1_000_000))
    (tmp_path / "link").symlink_to("/etc/passwd")
    found = changed_since(tmp_path, 2_000_000, skip=[tmp_path / "state"], written=["mine.py"])
    assert {left.path for left in found} == {"new.txt", "deep/er/log.txt", "link"}


def test_test_edits_are_allowed_when_asked(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    change = modify("tests/test_calc.py", "assert add(2, 3) == 5", "assert add(2, 3) == -1")
    result, _, _ = run_agent(repo, [answer(change)], embedder, allow_test_edits=True, task="update the add test")
    assert result.success and "== -1" in (repo / "tests" / "test_calc.py").read_text()


@pytest.mark.parametrize("hostile", ["../outside.py", "/tmp/evil.py", ".git/config", "link/escape.py"])
def test_hostile_paths_are_refused_and_nothing_is_written_outside(
        tmp_path: Path, embedder: embeddings.Embedder, hostile: str) -> None:
    repo = python_repo(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "link").symlink_to(outside, target_is_directory=True)
    before_outside = sorted(p.name for p in tmp_path.iterdir())
    git_config = (repo / ".git" / "config").read_bytes()
    result, server, _ = run_agent(repo, [answer(create(hostile, "pwned = True\n")), answer(FIX_ADD)], embedder)
    assert result.success
    assert sorted(p.name for p in tmp_path.iterdir()) == before_outside
    assert list(outside.iterdir()) == [] and not Path("/tmp/evil.py").exists()
    assert (repo / ".git" / "config").read_bytes() == git_config
    assert "NOT APPLIED" in last_request(server)


def test_secrets_never_reach_the_model(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    secret = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7"
    repo = python_repo(tmp_path)
    (repo / "settings.py").write_text(f'OPENAI_API_KEY = "{secret}"\n\n\ndef add_key():\n    return OPENAI_API_KEY\n')
    (repo / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    result, server, _ = run_agent(repo, [answer(FIX_ADD)], embedder, task="fix add; see settings.py and .env")
    assert result.success
    assert secret not in server.all_text_sent()


# ----- review and dry run ----------------------------------------------------------------------------------------
def test_review_no_sends_the_reason_to_the_model(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    decisions = iter([Reviewed(Decision.REJECT, "keep the subtraction, add a new function instead"),
                      Reviewed(Decision.APPLY)])
    seen: list[str] = []

    def reviewer(diff: str) -> Reviewed:
        seen.append(diff)
        return next(decisions)

    result, server, _ = run_agent(repo, [answer(FIX_ADD), answer(FIX_ADD.copy() | {"description": "again"})],
                                  embedder, review=reviewer)
    assert result.success
    assert "-    return a - b" in seen[0] and "+    return a + b" in seen[0]
    assert "keep the subtraction" in last_request(server)


def test_review_quit_stops_with_refused(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    result, _, _ = run_agent(repo, [answer(FIX_ADD)], embedder, review=lambda diff: Reviewed(Decision.QUIT))
    assert result.stop_reason == "refused" and snapshot(repo) == before


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    result, _, _ = run_agent(repo, [answer(FIX_ADD)], embedder, dry_run=True)
    assert result.stop_reason == "dry_run" and "+    return a + b" in result.diff
    assert snapshot(repo) == before


# ----- trajectory and replay -------------------------------------------------------------------------------------
STEP_SCHEMA = {"format": int, "kind": str, "step": int, "model": str, "prompt_version": (str, type(None)),
               "answer": (str, type(None)), "answers": list, "answer_format": (str, type(None)), "reasoning": list,
               "prompt_tokens": int, "completion_tokens": int, "reasoning_tokens": int, "cached_tokens": int,
               "wires": list, "cost_usd": (float, int, type(None)), "files": list, "patch_lines": int, "edits_failed": int,
               "test_exit_code": (int, type(None)), "tests_failed": list, "tests_passed": (int, type(None)),
               "timed_out": bool, "duration_s": (float, int), "stop_reason": (str, type(None)),
               "candidate": (int, type(None)), "reproduction": (str, type(None)), "sandbox": (dict, type(None)),
               "test_output": (str, type(None)), "tool_calls": list}


def test_two_iteration_trajectory_matches_the_schema(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    right = answer(modify("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a + b"))
    result, _, _ = run_agent(repo, [wrong, right], embedder)
    assert result.success and result.log_path
    records = [json.loads(line) for line in Path(result.log_path).read_text().splitlines()]
    assert [r["kind"] for r in records] == ["plan", "fix", "final"]
    for record in records:
        assert set(record) == set(STEP_SCHEMA)
        for key, kind in STEP_SCHEMA.items():
            assert isinstance(record[key], kind), (key, record[key])
    plan, fix, final = records
    assert plan["prompt_version"].startswith("plan/") and fix["prompt_version"].startswith("fix/")
    assert (plan["answer_format"], fix["answer_format"], final["answer_format"]) == ("json", "json", None)
    assert plan["reasoning"] == [""] and plan["format"] == 4 and plan["wires"] == ["chat"]
    assert plan["tests_failed"] == ["tests/test_calc.py::test_add"] and plan["tests_passed"] == 1
    assert fix["tests_failed"] == [] and fix["test_exit_code"] == 0
    assert plan["files"] == ["calc.py"] and plan["patch_lines"] == 2
    assert final["stop_reason"] == "passed" and final["cost_usd"] > 0


def test_replay_reproduces_a_recorded_run_without_the_model(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    original = snapshot(repo)
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    right = answer(modify("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a + b"))
    recorded, _, recorded_lines = run_agent(repo, [wrong, right], embedder)
    after_recorded = snapshot(repo)
    (repo / "calc.py").write_bytes(original["calc.py"][0])  # type: ignore[index]
    model = ReplayModel(read_answers(Path(recorded.log_path or "")))
    replayed, server, replay_lines = run_agent(repo, [], embedder, model=model)
    assert server.chat_requests == []
    assert (replayed.stop_reason, replayed.iterations) == (recorded.stop_reason, recorded.iterations)
    assert snapshot(repo) == after_recorded
    assert [l for l in replay_lines if not l.startswith("[Indexed")] == \
        [l for l in recorded_lines if not l.startswith("[Indexed")]


def test_a_syntax_error_goes_back_to_the_model_before_the_tests_run(tmp_path: Path,
                                                                   embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path)
    broken = answer(modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b)\n    return a + b"))
    repair = answer(modify("calc.py", "def add(a, b)\n    return a + b", "def add(a, b):\n    return a + b"))
    result, server, lines = run_agent(repo, [broken, repair], embedder)
    assert result.success and result.iterations == 1
    assert any(line.startswith("[Syntax error in calc.py") for line in lines)
    repair_request = server.chat_requests[1]["messages"][-1]["content"]
    assert "NO LONGER PARSES" in repair_request and "line 4" in repair_request
    assert lines.index(next(l for l in lines if l.startswith("[Syntax error"))) < lines.index("[Testing (iteration 1)...]")


def test_an_import_error_brings_the_dependency_manifest(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = python_repo(tmp_path, {
        "app.py": "import yaml_missing_pkg\n\n\ndef load():\n    return yaml_missing_pkg.load('a: 1')\n",
        "tests/test_app.py": "from app import load\n\n\ndef test_load():\n    assert load() == {'a': 1}\n",
        "pyproject.toml": "[project]\nname = \"app\"\ndependencies = [\"pyyaml_missing_marker\"]\n",
        "pytest.ini": "[pytest]\npythonpath = .\n"})
    first = answer(modify("app.py", "    return yaml_missing_pkg.load('a: 1')", "    return yaml_missing_pkg.load('a: 2')"))
    result, server, _ = run_agent(repo, [first, '{"changes": []}'], embedder, task="make load work")
    assert not result.success
    assert "pyyaml_missing_marker" in last_request(server)
