"""Best of N, the pure part: which candidate wins, and the scratch copies candidates run in."""
from __future__ import annotations

from pathlib import Path

from code_assistant.agent.candidates import CandidateOutcome, ScratchCopy, choose, normalized
from code_assistant.agent.stop import Stop

DIFF_A = "--- a/calc.py\n+++ b/calc.py\n@@ -4,2 +4,2 @@ def add(a, b):\n-    return a - b\n+    return a + b\n"
DIFF_A_ELSEWHERE = "--- a/calc.py\n+++ b/calc.py\n@@ -9,2 +9,2 @@\n-    return a - b\n+    return  a + b\n"
DIFF_B = "--- a/calc.py\n+++ b/calc.py\n@@ -4,2 +4,2 @@\n-    return a - b\n+    return b + a\n"


def outcome(number: int, passed: bool, lines: int, diff: str = DIFF_A) -> CandidateOutcome:
    return CandidateOutcome(number=number, passed=passed, stop_reason=Stop.PASSED if passed else Stop.MAX_ITERATIONS,
                            changed_lines=lines, diff=diff, files={"calc.py": b"x"})


def test_the_smallest_passing_change_wins() -> None:
    winner = choose([outcome(1, False, 2), outcome(2, True, 30), outcome(3, True, 8)])
    assert winner is not None and winner.number == 3


def test_nothing_wins_when_nothing_passes() -> None:
    assert choose([outcome(1, False, 2), outcome(2, False, 4)]) is None
    assert choose([]) is None


def test_a_tie_goes_to_the_change_most_candidates_agree_on() -> None:
    winner = choose([outcome(1, True, 2, DIFF_B), outcome(2, True, 2, DIFF_A), outcome(3, True, 2, DIFF_A_ELSEWHERE)])
    assert winner is not None and winner.number == 2


def test_normalized_diffs_ignore_positions_and_whitespace() -> None:
    assert normalized(DIFF_A) == normalized(DIFF_A_ELSEWHERE) != normalized(DIFF_B)


def test_a_scratch_copy_holds_the_working_tree_and_vanishes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a.py").write_text("uncommitted = True\n")
    (repo / ".index").mkdir()
    (repo / ".index" / "db").write_text("x")
    copy = ScratchCopy(repo, exclude=[repo / ".index"])
    with copy as scratch:
        assert (scratch / "pkg" / "a.py").read_text() == "uncommitted = True\n"
        assert not (scratch / ".git").exists() and not (scratch / ".index").exists()
        (scratch / "pkg" / "a.py").write_text("changed = True\n")
        root = copy.root
    assert root is not None and not root.exists()
    assert (repo / "pkg" / "a.py").read_text() == "uncommitted = True\n", "the user's tree is never touched"
