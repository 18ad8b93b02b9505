"""--branch, --worktree and --commit with real git: the user's checkout and pending work are never swept up."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.repos import answer, modify, python_repo, run_cli, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
FIX = answer(modify("calc.py", "    return a - b", "    return a + b"))
WRONG = answer(modify("calc.py", "    return a - b", "    return a * 0"))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def _run(repo: Path, script: list[str], *flags: str) -> subprocess.CompletedProcess[str]:
    with ScriptedServer(script) as server:
        return run_cli(["--repo", str(repo), "--task", "Fix add", "--test-command", PYTEST, "--max-iterations", "1",
                        *flags], server_url=server.url)


def test_branch_and_commit_on_success_leave_pending_work_alone(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "NOTES.md").write_text("my own pending notes\n")
    proc = _run(repo, [FIX], "--branch", "fix-add", "--commit")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "fix-add"
    message = git(repo, "log", "-1", "--format=%B")
    assert "Fix add" in message and "iteration 1" in message
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "calc.py"
    assert git(repo, "status", "--porcelain") == "?? NOTES.md"
    assert "return a - b" in git(repo, "show", "main:calc.py")


def test_branch_is_removed_when_the_run_fails(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = snapshot(repo)
    proc = _run(repo, [WRONG], "--branch", "--commit")
    assert proc.returncode == 1
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(repo, "branch", "--list") == "* main"
    assert snapshot(repo) == before


def test_worktree_keeps_the_users_checkout_untouched(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "# pending local edit\n")
    before = snapshot(repo)
    proc = _run(repo, [FIX], "--worktree", "--branch", "assistant/add", "--commit")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot(repo) == before
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert "return a + b" in git(repo, "show", "assistant/add:calc.py")
    assert "pending local edit" not in git(repo, "show", "assistant/add:calc.py")
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_commit_refuses_to_touch_a_file_with_pending_changes(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "# mine\n")
    before = snapshot(repo)
    head = git(repo, "rev-parse", "HEAD")
    proc = _run(repo, [FIX], "--commit")
    assert proc.returncode == 2
    assert "calc.py has uncommitted changes" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(repo) == before and git(repo, "rev-parse", "HEAD") == head


def test_allow_dirty_edits_but_never_commits_pending_work(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + "# mine\n")
    head = git(repo, "rev-parse", "HEAD")
    proc = _run(repo, [FIX], "--commit", "--allow-dirty")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Not committed" in proc.stdout
    assert git(repo, "rev-parse", "HEAD") == head
    assert "return a + b" in (repo / "calc.py").read_text() and "# mine" in (repo / "calc.py").read_text()


def test_git_flags_outside_a_repository_are_a_usage_error(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, git=False)
    proc = _run(repo, [FIX], "--branch")
    assert proc.returncode == 2 and "need a git repository" in proc.stderr


def test_without_git_everything_still_works(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, git=False)
    proc = _run(repo, [FIX])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "return a + b" in (repo / "calc.py").read_text()
