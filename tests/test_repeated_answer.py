"""An answer the model already sent in this run, sent again: at temperature 0 the same request gets it every time,
so before the run gives up on it (no_progress) the request is asked once more, sampled (temperature 0.7, seed 1).
Qwen2.5-Coder-1.5B sent calc-add's refused test edit twice and the run ended there (issue 58)."""
from __future__ import annotations

import sys
from pathlib import Path

from tests.repos import python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
WRONG = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * 1 - b\n>>>>>>> REPLACE\n```\n"
RIGHT = "calc.py\n```\n<<<<<<< SEARCH\n    return a * 1 - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"


def _run(tmp_path: Path, answers: list[str]) -> tuple[str, list[dict[str, object]]]:
    repo = python_repo(tmp_path)
    with ScriptedServer(answers) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", PYTEST, "--no-reproduce",
                        "--edit-format", "blocks", "--no-tools"], server_url=server.url)
        return proc.stdout + proc.stderr, server.chat_requests


def test_a_repeated_answer_is_asked_once_more_sampled_and_the_new_answer_is_used(tmp_path: Path) -> None:
    out, asked = _run(tmp_path, [WRONG, WRONG, RIGHT])
    assert "Result: SUCCESS" in out, out
    assert "[The model sent an earlier answer again; asking once more at temperature 0.7]" in out
    assert [(r.get("temperature"), r.get("seed")) for r in asked] == [(0.0, None), (0.0, None), (0.7, 1)]
    assert asked[2]["messages"] == asked[1]["messages"], "the same request, sampled"
    assert "Model usage: 3 call(s)" in out, "the sampled answer is counted"


def test_the_sampled_answer_repeated_too_ends_the_run_without_progress(tmp_path: Path) -> None:
    out, asked = _run(tmp_path, [WRONG, WRONG, WRONG, RIGHT])
    assert len(asked) == 3 and "no_progress" in out and "the model repeated an earlier answer" in out, out
