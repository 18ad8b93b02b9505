"""The disk side: hostile paths refused, bytes kept, rollback and crash recovery byte for byte, one run per repo."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from code_assistant.edit import history
from code_assistant.edit.editor import ChangedOutsideError, FileEditor
from code_assistant.edit.edits import EditOperation, PathError, resolve_repo_path
from code_assistant.edit.journal import RepoLock, RepoLockedError
from code_assistant.edit.ownership import Fate

ROOT = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under root (except .git) with its bytes (None for dirs) and mode."""
    out: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".git"):
            continue
        out[rel] = (path.read_bytes() if path.is_file() else None, path.lstat().st_mode)
    return out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "pkg" / "app.py").write_text("def main():\n    return 1\n")
    (root / "win.py").write_bytes(b"def f():\r\n    return 1\r\n")
    (root / "nonl.txt").write_bytes(b"alpha\nbeta")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    return root


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.py", "pkg/../../outside.py", ".git/config",
                                 ".git/hooks/pre-commit", "~/x.py", "", "index/data.bin"])
def test_hostile_paths_are_refused_with_a_reason(repo: Path, bad: str) -> None:
    (repo / "index").mkdir()
    with pytest.raises(PathError) as info:
        resolve_repo_path(repo, bad, forbidden=[repo / "index"])
    assert "refused" in str(info.value) or "invalid" in str(info.value)


def test_symlink_escapes_are_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("x = 1\n")
    (repo / "link.py").symlink_to(outside / "secret.py")
    (repo / "linkdir").symlink_to(outside, target_is_directory=True)
    (repo / "gitlink").symlink_to(repo / ".git", target_is_directory=True)
    editor = FileEditor(repo, state_dir=tmp_path / "state")
    for path in ["link.py", "linkdir/secret.py", "linkdir/new.py", "gitlink/config"]:
        result = editor.apply_edit(EditOperation(path, "x = 1", "x = 2", content="y\n"))
        assert not result.ok and "refused" in result.message, path
        result = editor.apply_edit(EditOperation(path, action="create", content="pwned\n", overwrite=True))
        assert not result.ok
    assert (outside / "secret.py").read_text() == "x = 1\n"
    assert not (outside / "new.py").exists()


def test_a_directory_swapped_for_a_symlink_while_it_is_made_is_refused(repo: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    made = repo.resolve() / "new"
    mkdir = Path.mkdir

    def mkdir_then_swap(self: Path, *args: object, **kwargs: object) -> None:
        mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self == made:  # somebody replaces the fresh directory with a link out of the repository
            self.rmdir()
            self.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(Path, "mkdir", mkdir_then_swap)
    result = FileEditor(repo, state_dir=tmp_path / "state").apply_edit(
        EditOperation("new/deeper/x.py", action="create", content="pwned\n"))
    assert not result.ok and "refused" in result.message
    assert list(outside.iterdir()) == []


def test_forbidden_index_dir_is_never_written(repo: Path, state: Path) -> None:
    index = repo / ".code_assistant"
    editor = FileEditor(repo, state_dir=state, forbidden=[index])
    result = editor.apply_edit(EditOperation(".code_assistant/chroma.sqlite3", action="create", content="x"))
    assert not result.ok and "assistant's own data" in result.message
    assert not index.exists()


def test_state_dir_inside_the_repo_is_rejected(repo: Path) -> None:
    with pytest.raises(PathError):
        FileEditor(repo, state_dir=repo / "state")


def test_benchmark_style_call_with_default_state_dir(repo: Path, isolated_env: Path) -> None:
    result = FileEditor(repo_path=repo).apply_edit(EditOperation("pkg/app.py", "    return 1\n", "    return 2\n"))
    assert result.ok and result.strategy == "exact"
    assert (repo / "pkg/app.py").read_text() == "def main():\n    return 2\n"
    assert str(isolated_env) in str(FileEditor(repo).state_dir)


def test_crlf_and_missing_final_newline_survive_edits(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("win.py", "    return 1\n", "    return 2\n    # two\n"))
    assert (repo / "win.py").read_bytes() == b"def f():\r\n    return 2\r\n    # two\r\n"
    assert editor.apply_edit(EditOperation("nonl.txt", "beta\n", "gamma\n"))
    assert (repo / "nonl.txt").read_bytes() == b"alpha\ngamma"


def test_mode_is_kept_and_no_backup_lands_in_the_repo(repo: Path, state: Path) -> None:
    before = set(snapshot(repo))
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("run.sh", "echo hi", "echo bye"))
    assert (repo / "run.sh").stat().st_mode & 0o777 == 0o755
    assert set(snapshot(repo)) == before
    assert any(state.rglob("backups/*"))


def test_rollback_restores_everything_byte_for_byte(repo: Path, state: Path) -> None:
    before = snapshot(repo)
    editor = FileEditor(repo, state_dir=state)
    results = editor.apply_edits([
        EditOperation("pkg/app.py", "    return 1\n", "    return 42\n"),
        EditOperation("new/deep/mod.py", action="create", content="VALUE = 1\n"),
        EditOperation("run.sh", action="delete"),
        EditOperation("win.py", "return 1", "return 3"),
        EditOperation("pkg/app.py", "return 42", "return 43"),
        EditOperation("nonl.txt", action="create", content="replaced", overwrite=True),
    ])
    assert all(results), [r.message for r in results]
    assert editor.modified_files == ["pkg/app.py", "new/deep/mod.py", "run.sh", "win.py", "nonl.txt"]
    diff = editor.diff()
    assert "+    return 43" in diff and "+++ /dev/null" in diff and "--- /dev/null" in diff
    touched = editor.rollback()
    assert sorted(o.path for o in touched) == ["new/deep/mod.py", "nonl.txt", "pkg/app.py", "run.sh", "win.py"]
    assert {o.fate for o in touched} == {Fate.RESTORED}
    assert editor.modified_files == []
    assert snapshot(repo) == before
    assert not (repo / "new").exists()
    assert not any(state.rglob("backups/*"))


def test_create_refuses_existing_file_unless_overwrite(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    result = editor.apply_edit(EditOperation("pkg/app.py", action="create", content="x = 1\n"))
    assert not result.ok and "already exists" in result.message
    assert (repo / "pkg/app.py").read_text() == "def main():\n    return 1\n"


def test_failures_name_the_edits_already_applied(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    results = editor.apply_edits([
        EditOperation("pkg/app.py", "return 1", "return 2"),
        EditOperation("pkg/app.py", "return 99", "return 3"),
        EditOperation("win.py", "return 1", "return 5"),
        EditOperation("missing.py", "x", "y"),
    ])
    assert [r.ok for r in results] == [True, False, True, False]
    assert "edit 2 failed" in results[1].message and "Edit 1 already applied; do not resend" in results[1].message
    assert "Edits 1 and 3 already applied; do not resend them" in results[3].message
    assert "does not exist" in results[3].message


def test_edit_that_breaks_syntax_is_applied_but_flagged(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    result = editor.apply_edit(EditOperation("pkg/app.py", "def main():\n", "def main(:\n"))
    assert result.ok and result.syntax_error and result.syntax_error.startswith("line 1")
    assert "no longer parses" in result.message
    ok = editor.apply_edit(EditOperation("win.py", "return 1", "return 2"))
    assert ok.ok and ok.syntax_error is None


def test_finish_keeps_the_original_and_the_final_state_for_undo_and_marks_the_journal_done(repo: Path,
                                                                                           state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 2", "return 3"))
    assert len(list(state.rglob("backups/*"))) == 3  # the original, and both states the run announced
    editor.finish()
    kept = sorted(p.read_bytes() for p in state.rglob("backups/*"))
    assert kept == [b"def main():\n    return 1\n", b"def main():\n    return 3\n"]
    journal = next(state.rglob("journal.jsonl")).read_text()
    assert json.loads(journal.splitlines()[-1])["how"] == "finished"
    assert FileEditor.recover(repo, state) is None
    assert (repo / "pkg/app.py").read_text() == "def main():\n    return 3\n"


def test_an_edit_that_touches_a_change_made_outside_the_run_is_never_made(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    assert editor.changed_outside() == []
    (repo / "pkg/app.py").write_text("def main():\n    return 2  # mine\n")
    assert editor.changed_outside() == ["pkg/app.py"]
    for op in (EditOperation("pkg/app.py", "return 2", "return 3"),  # the user's line
               EditOperation("pkg/app.py", action="create", overwrite=True, content="def main():\n    return 3\n"),
               EditOperation("pkg/app.py", action="delete")):
        outside = editor.outside([op])
        assert list(outside.overlaps) == ["pkg/app.py"] and not outside.gone
        with pytest.raises(ChangedOutsideError, match="pkg/app.py was changed outside the assistant during the run"):
            editor.apply_edit(op)
    assert (repo / "pkg/app.py").read_text() == "def main():\n    return 2  # mine\n"
    [outcome] = editor.rollback()
    assert outcome.fate == Fate.CONFLICT and (repo / "pkg/app.py").read_text() == "def main():\n    return 2  # mine\n"


def test_a_file_deleted_or_replaced_outside_the_run_is_not_edited_again(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    (repo / "pkg/app.py").write_text("class Other:\n    pass\n\n\nreturn 2\n")
    assert editor.outside([]).gone == {"pkg/app.py": "replaced wholesale by someone else"}
    with pytest.raises(ChangedOutsideError):
        editor.apply_edit(EditOperation("pkg/app.py", "return 2", "return 3"))
    (repo / "pkg/app.py").unlink()
    assert editor.outside([]).gone == {"pkg/app.py": "deleted by someone else"}
    with pytest.raises(ChangedOutsideError):
        editor.apply_edit(EditOperation("pkg/app.py", action="create", content="def main():\n    return 3\n"))
    assert not (repo / "pkg/app.py").exists()


def test_an_edit_that_fits_around_a_change_made_outside_the_run_is_made_on_top_of_it(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    (repo / "pkg/app.py").write_text("# mine\ndef main():\n    return 2\n")
    op = EditOperation("pkg/app.py", "return 2", "return 3")
    assert editor.outside([op]).overlaps == {} and editor.outside([op]).changed == ["pkg/app.py"]
    assert editor.apply_edit(op)
    assert (repo / "pkg/app.py").read_text() == "# mine\ndef main():\n    return 3\n"
    assert editor.changed_outside() == []
    assert "mine" not in editor.diff() and "+    return 3" in editor.diff(), "their line is not the run's change"
    journal = [json.loads(line) for line in next(state.rglob("journal.jsonl")).read_text().splitlines()]
    assert [e["op"] for e in journal if e.get("path")] == ["modified", "wrote", "found", "wrote"]
    [outcome] = editor.rollback()
    assert outcome.fate == Fate.MERGED and (repo / "pkg/app.py").read_text() == "# mine\ndef main():\n    return 1\n"


def test_undo_of_a_run_that_wrote_on_top_of_a_change_made_outside_it_keeps_that_change(repo: Path,
                                                                                       state: Path) -> None:
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    (repo / "pkg/app.py").write_text("# mine\ndef main():\n    return 2\n")
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 2", "return 3"))
    editor.finish()
    undone = history.undo_last(repo, state)
    assert [o.fate for o in undone.outcomes] == [Fate.MERGED]
    assert (repo / "pkg/app.py").read_text() == "# mine\ndef main():\n    return 1\n"


def test_a_line_the_user_is_half_way_through_typing_is_not_the_runs_syntax_error(repo: Path, state: Path) -> None:
    (repo / "pkg/app.py").write_text("def main():\n    return 1\n\n\nLIMIT = 10\n")
    editor = FileEditor(repo, state_dir=state)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    with (repo / "pkg/app.py").open("a") as typing:
        typing.write("\n\ndef helper(\n")  # they are half-way through a line
    around = editor.apply_edit(EditOperation("pkg/app.py", "def main():", "def main(x=0):"))
    assert around.ok and around.syntax_error is None
    assert editor.broken() == {}, "no repair request points the model at their line"
    breaking = editor.apply_edit(EditOperation("pkg/app.py", "def main(x=0):", "def main(:"))
    assert breaking.ok and editor.broken() == {}, "their side does not parse: nothing told apart, nothing asked"
    text = (repo / "pkg/app.py").read_text()
    (repo / "pkg/app.py").write_text(text.replace("def helper(\n", "def helper():\n    pass\n"))  # they finish it
    assert editor.apply_edit(EditOperation("pkg/app.py", "def main(:", "def main(y:"))
    assert list(editor.broken()) == ["pkg/app.py"], "now the only broken line is the run's"


def test_finished_runs_are_kept_for_undo_up_to_a_count_and_a_size(repo: Path, state: Path) -> None:
    for n in range(history.MAX_RUNS + 3):
        editor = FileEditor(repo, state_dir=state)
        assert editor.apply_edit(EditOperation("pkg/app.py", action="create", overwrite=True,
                                               content=f"def main():\n    return {n + 2}\n"))
        editor.finish()
    assert len(history.kept_runs(state, repo)) == history.MAX_RUNS
    assert history.prune(state, max_bytes=0) == history.MAX_RUNS
    assert history.kept_runs(state, repo) == [] and not any((state / "runs").iterdir())


def test_scratch_editors_keep_no_history(repo: Path, state: Path) -> None:
    editor = FileEditor(repo, state_dir=state, history=False)
    assert editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
    editor.finish()
    assert history.kept_runs(state, repo) == [] and not any((state / "runs").iterdir())


CHILD = """
import os, signal, sys
sys.path.insert(0, {root!r})
from file_editor import EditOperation, FileEditor  # the root entrance, as a user's script would
editor = FileEditor({repo!r}, state_dir={state!r})
editor.apply_edit(EditOperation("pkg/app.py", "return 1", "return 2"))
editor.apply_edit(EditOperation("made/here/new.py", action="create", content="x = 1\\n"))
editor.apply_edit(EditOperation("run.sh", action="delete"))
editor.apply_edit(EditOperation("win.py", "return 1", "return 7"))
{die}
"""


@pytest.mark.parametrize("die", ["os._exit(3)", "os.kill(os.getpid(), signal.SIGKILL)"])
def test_recover_after_a_crashed_run_restores_byte_for_byte(repo: Path, state: Path, die: str) -> None:
    before = snapshot(repo)
    code = CHILD.format(root=str(ROOT), repo=str(repo), state=str(state), die=die)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode in (3, -signal.SIGKILL), proc.stderr
    assert snapshot(repo) != before
    restored = FileEditor.recover(repo, state)
    assert restored is not None
    assert {o.path for o in restored} == {"pkg/app.py", "made/here/new.py", "run.sh", "win.py"}
    assert {o.fate for o in restored} == {Fate.RESTORED}
    assert snapshot(repo) == before
    assert FileEditor.recover(repo, state) is None


def test_lock_held_by_another_process_is_refused(repo: Path, state: Path) -> None:
    holder = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from code_assistant.edit.journal import RepoLock
        with RepoLock({str(repo)!r}, {str(state)!r}):
            print("locked", flush=True)
            time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RepoLockedError) as info:
            with RepoLock(repo, state):
                pass
        assert f"pid {proc.pid}" in str(info.value) and "\n" not in str(info.value)
    finally:
        proc.kill()
        proc.wait()
    with RepoLock(repo, state):
        assert (state / "lock").read_text().strip() == str(os.getpid())


def test_symlink_inside_the_repo_edits_its_target_and_keeps_the_link(repo: Path, state: Path) -> None:
    (repo / "alias.py").symlink_to(repo / "pkg" / "app.py")
    editor = FileEditor(repo, state_dir=state)
    result = editor.apply_edit(EditOperation("alias.py", "return 1", "return 5"))
    assert result.ok and result.file_path == "pkg/app.py"
    assert (repo / "alias.py").is_symlink() and "return 5" in (repo / "pkg" / "app.py").read_text()
    editor.rollback()
    assert (repo / "pkg" / "app.py").read_text() == "def main():\n    return 1\n"


def test_recover_leaves_a_live_run_alone(repo: Path, state: Path) -> None:
    code = CHILD.format(root=str(ROOT), repo=str(repo), state=str(state), die="print('ok', flush=True); input()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ok"
        assert FileEditor.recover(repo, state) is None
        assert "return 2" in (repo / "pkg" / "app.py").read_text()
    finally:
        proc.kill()
        proc.wait()
    assert FileEditor.recover(repo, state) is not None
    assert (repo / "pkg" / "app.py").read_text() == "def main():\n    return 1\n"


def test_the_preview_diff_and_the_final_diff_are_one_text(repo: Path, state: Path) -> None:
    from code_assistant.edit.preview import preview_edits

    ops = [EditOperation("nonl.txt", "beta", "gamma"), EditOperation("made/new.py", action="create", content="x = 1\n"),
           EditOperation("run.sh", action="delete")]
    previewed = preview_edits(repo, ops).diff()
    editor = FileEditor(repo, state_dir=state)
    assert all(editor.apply_edits(ops))
    assert editor.diff() == previewed
    assert "-beta\n\\ No newline at end of file\n+gamma\n\\ No newline at end of file\n" in previewed
    assert "--- /dev/null\n+++ b/made/new.py" in previewed and "--- a/run.sh\n+++ /dev/null" in previewed
