"""--fix-by samples (and --small-model): after a failed iteration the change is taken back and the first plan is asked
again, afresh, at temperature 0.7 with a new seed, instead of a fix request. Qwen2.5-Coder-1.5B, shown pager's
failures, sent the same unchanged definition three times; six samples of its first request cost 4-40 s each on a
server that keeps the last prompt, and one of them held the fix (issue 58)."""
from __future__ import annotations

import sys
from pathlib import Path

from tests.repos import CALC_PY, python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
WRONG = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * b\n>>>>>>> REPLACE\n```\n"
OTHER_WRONG = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return b - a\n>>>>>>> REPLACE\n```\n"
RIGHT = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
FIXED = CALC_PY.replace("return a - b", "return a + b")


def _run(repo: Path, answers: list[str], *more: str) -> tuple[str, list[dict[str, object]]]:
    with ScriptedServer(answers) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", PYTEST, "--no-reproduce",
                        "--edit-format", "blocks", "--no-tools", "--fix-by", "samples", *more], server_url=server.url)
        return proc.stdout + proc.stderr, server.chat_requests


def test_a_failed_plan_is_taken_back_and_the_same_request_sampled(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG, RIGHT])
    assert "Result: SUCCESS" in out, out
    assert "[Taken back: calc.py]" in out and "[Sampling the plan again: sample 1, at temperature 0.7]" in out
    assert [(r.get("temperature"), r.get("seed")) for r in asked] == [(0.0, None), (0.7, 1)]
    assert asked[1]["messages"] == asked[0]["messages"], "the first request again, word for word: no feedback"
    assert (repo / "calc.py").read_text() == FIXED, "the sample applied to the file as it was, not over the first"
    assert "Model usage: 2 call(s)" in out, "the sample is counted"


def test_a_sample_that_repeats_an_earlier_answer_is_asked_again_with_the_next_seed(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG, WRONG, RIGHT])
    assert "Result: SUCCESS" in out, out
    assert "[The sample repeats an earlier answer]" in out
    assert [(r.get("temperature"), r.get("seed")) for r in asked] == [(0.0, None), (0.7, 1), (0.7, 2)]
    assert out.count("[Testing (iteration") == 2, "the repeated sample is not tested again"


def test_a_sample_that_cannot_be_read_is_followed_by_the_next_sample_not_a_re_ask(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG, "```\n=======\n>>>>>>> REPLACE\n```\n", RIGHT])
    assert "Result: SUCCESS" in out, out
    assert "[The sample could not be read:" in out and "asking once more" not in out
    assert [(r.get("temperature"), r.get("seed")) for r in asked] == [(0.0, None), (0.7, 1), (0.7, 2)]
    assert all(r["messages"] == asked[0]["messages"] for r in asked), "no re-ask message: each sample afresh"


def test_a_plan_that_cannot_be_read_is_sampled_not_asked_again(tmp_path: Path) -> None:
    """Qwen2.5-Coder-1.5B's dotenv plan could not be read, nor its answer to the re-ask: the run ended (model_error)
    with every sample still to be asked. Sampling, an unreadable plan goes to the samples."""
    repo = python_repo(tmp_path)
    out, asked = _run(repo, ["no block here, just prose", RIGHT])
    assert "Result: SUCCESS" in out and "[The plan could not be read:" in out, out
    assert [(r.get("temperature"), r.get("seed")) for r in asked] == [(0.0, None), (0.7, 1)]
    assert "asking once more" not in out


def test_samples_that_all_fail_end_at_the_iteration_limit_with_the_tree_as_it_was(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG, OTHER_WRONG, WRONG, WRONG, WRONG, RIGHT], "--max-iterations", "2")
    assert "Result: FAILED (max_iterations" in out, out
    assert len(asked) == 2 and "the same tests failed the same way" not in out, \
        "a sample failing as the plan did is no reason to stop early: it started over"
    assert (repo / "calc.py").read_text() == CALC_PY


def test_samples_that_only_repeat_end_the_run_without_progress(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG] * 4 + [RIGHT])
    assert "no_progress" in out and "the samples of the plan repeated earlier answers" in out, out
    assert len(asked) == 4 and (repo / "calc.py").read_text() == CALC_PY


def test_a_change_that_breaks_a_green_suite_with_no_failing_test_to_aim_at_ends_the_run(tmp_path: Path) -> None:
    """A green suite and no reproduction test: nothing says what the task wants, so a later sample could only be a
    change that breaks nothing. Qwen2.5-Coder-1.5B spent 250-300 s a case sampling so, and never resolved one."""
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": "from calc import multiply\n\n\n"
                                  "def test_multiply():\n    assert multiply(3, 4) == 12\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    breaks = "calc.py\n```\n<<<<<<< SEARCH\n    return a * b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
    out, asked = _run(repo, [breaks, RIGHT, RIGHT])
    assert "Result: FAILED (no_progress: the change broke tests that passed before, and no failing test says what " \
           "the task wants" in out, out
    assert len(asked) == 1 and "[Sampling the plan again" not in out
    assert (repo / "calc.py").read_text() == CALC_PY, "rolled back"


def test_a_reproduction_test_is_kept_while_the_plan_is_sampled(tmp_path: Path) -> None:
    """The test written to capture the task stays through every sample (it is written again after the take-back,
    through the journal), and goes out with the rest when the run fails."""
    files = {"calc.py": CALC_PY, "tests/test_mul.py": "from calc import multiply\n\n\ndef test_multiply():\n"
                                                       "    assert multiply(3, 4) == 12\n",
             "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"}
    test = "def test_add():\n    from calc import add\n    assert add(2, 3) == 5\n"
    reproduce = "tests/test_add.py\n```\n<<<<<<< SEARCH\n=======\n" + test + ">>>>>>> REPLACE\n```\n"
    repo = python_repo(tmp_path, files)
    with ScriptedServer([reproduce, WRONG, RIGHT]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "add() subtracts: make it add", "--test-command", PYTEST,
                        "--edit-format", "blocks", "--no-tools", "--fix-by", "samples", "--reproduce"],
                       server_url=server.url)
    out = proc.stdout + proc.stderr
    assert "Result: SUCCESS" in out and "[Reproduced: tests/test_add.py fails before any fix" in out, out
    assert (repo / "tests/test_add.py").read_text() == test and (repo / "calc.py").read_text() == FIXED
    assert "[Taken back: calc.py]" in out, "the reproduction test is not named as taken back"

    (tmp_path / "again").mkdir()
    again = python_repo(tmp_path / "again", files)
    with ScriptedServer([reproduce, WRONG, OTHER_WRONG]) as server:
        failed = run_cli(["--repo", str(again), "--task", "add() subtracts: make it add", "--test-command", PYTEST,
                          "--edit-format", "blocks", "--no-tools", "--fix-by", "samples", "--reproduce",
                          "--max-iterations", "2"], server_url=server.url)
    assert "Result: FAILED" in failed.stdout, failed.stdout + failed.stderr
    assert not (again / "tests/test_add.py").exists() and (again / "calc.py").read_text() == CALC_PY


def test_the_attempts_of_best_of_n_sample_seeds_of_their_own(tmp_path: Path) -> None:
    """Attempt k samples with seeds k*1000+1, k*1000+2, ...: two attempts never ask the same sample."""
    repo = python_repo(tmp_path)
    out, asked = _run(repo, [WRONG, WRONG, RIGHT, RIGHT, RIGHT, RIGHT], "--candidates", "2")
    assert "Result: SUCCESS" in out, out
    seeds = [r.get("seed") for r in asked]
    assert len(seeds) == len(set(seeds)), seeds
    assert {s for s in seeds if s and s > 2} <= {1001, 1002, 1003, 2001, 2002, 2003}, seeds
    assert any(s and s > 1000 for s in seeds), "a sample was asked"
