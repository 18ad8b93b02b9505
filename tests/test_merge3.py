"""Taking the assistant's lines out of a file somebody else changed: the three-way merge and the ownership rule, pure
functions on a table of cases. `git merge-file` is the oracle where git is installed (it is not needed at run time)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from code_assistant import interrupts
from code_assistant.edit.merge3 import merge3, split_lines
from code_assistant.edit.ownership import Fate, run_alone, take_back, take_back_stretches

# name: (base = what the run left, ours = the file now, theirs = the original, expected merge or None: conflict)
CASES = {
    "disjoint edits": (b"1\n2\n3\n4\n5\n", b"1\nX\n3\n4\n5\n", b"1\n2\n3\n4\nY\n", b"1\nX\n3\n4\nY\n"),
    "adjacent edits conflict": (b"1\n2\n3\n4\n", b"1\nX\n3\n4\n", b"1\n2\nY\n4\n", None),
    "the same line changed": (b"1\n2\n3\n", b"1\nX\n3\n", b"1\nY\n3\n", None),
    "the same change on both sides": (b"1\n2\n3\n", b"1\nX\n3\n", b"1\nX\n3\n", b"1\nX\n3\n"),
    "CRLF lines": (b"1\r\n2\r\n3\r\n4\r\n5\r\n", b"1\r\nX\r\n3\r\n4\r\n5\r\n", b"1\r\n2\r\n3\r\n4\r\nY\r\n",
                   b"1\r\nX\r\n3\r\n4\r\nY\r\n"),
    "CRLF against LF is a change": (b"1\n2\n3\n4\n", b"1\r\n2\n3\n4\n", b"1\n2\n3\nY\n", b"1\r\n2\n3\nY\n"),
    "no final newline, appended next to an edit": (b"a\nb", b"a\nb\nc\n", b"A\nb", None),
    "no final newline, appended far from an edit": (b"a\nm\nn\nb", b"a\nm\nn\nb\nc\n", b"A\nm\nn\nb",
                                                    b"A\nm\nn\nb\nc\n"),
    "a file emptied": (b"a\nb\nc\n", b"", b"a\nB\nc\n", None),
    "a file emptied, theirs unchanged": (b"a\nb\nc\n", b"", b"a\nb\nc\n", b""),
    "binary bytes changed on both sides": (b"\0a\n1\n2\n3\n", b"\0a\nX\n2\n3\n", b"\0a\n1\n2\nY\n", None),
    "binary bytes changed on one side": (b"\0a\n1\n", b"\0a\n1\n", b"\0b\n1\n", b"\0b\n1\n"),
    "inserts at both ends": (b"1\n2\n3\n", b"0\n1\n2\n3\n", b"1\n2\n3\n4\n", b"0\n1\n2\n3\n4\n"),
    "two inserts at one place": (b"1\n2\n", b"1\nA\n2\n", b"1\nB\n2\n", None),
    "a user's line appended after the run's edit": (
        b"def f():\n    return 1\n\n\ndef g():\n    return 2\n",
        b"def f():\n    return 1\n\n\ndef g():\n    return 2\n# user\n",
        b"def f():\n    return 0\n\n\ndef g():\n    return 2\n",
        b"def f():\n    return 0\n\n\ndef g():\n    return 2\n# user\n"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_merge3_table(name: str) -> None:
    base, ours, theirs, expected = CASES[name]
    merge = merge3(base, ours, theirs)
    assert merge.data == expected
    assert merge.clean == (expected is not None)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is the oracle; it is not needed at run time")
@pytest.mark.parametrize("name", list(CASES))
def test_merge3_agrees_with_git_merge_file(name: str, tmp_path: Path) -> None:
    base, ours, theirs, _ = CASES[name]
    for file, data in (("base", base), ("ours", ours), ("theirs", theirs)):
        (tmp_path / file).write_bytes(data)
    git = subprocess.run(["git", "merge-file", "-p", "ours", "base", "theirs"], cwd=tmp_path, capture_output=True)
    merge = merge3(base, ours, theirs)
    if b"Cannot merge binary files" in git.stderr and (ours == base or theirs == base):
        return  # git refuses every binary merge; a side that did not change is taken (the table says so)
    assert merge.clean == (git.returncode == 0), git.stderr
    if merge.clean:
        assert merge.data == git.stdout


def test_lines_end_at_newline_and_a_last_line_without_one_counts() -> None:
    assert split_lines(b"a\r\nb\nc") == [b"a\r\n", b"b\n", b"c"]
    assert split_lines(b"") == [] and split_lines(b"\n") == [b"\n"]


ORIGINAL, LEFT = b"a\nb\nc\nd\ne\n", b"a\nB\nc\nd\ne\n"


@pytest.mark.parametrize("original, left, current, fate, data, write", [
    # nobody else touched it: the original comes back
    (ORIGINAL, [LEFT], LEFT, Fate.RESTORED, ORIGINAL, True),
    # a crash between announcing a write and making it: the state before counts as the run's too
    (ORIGINAL, [LEFT, b"x\n"], LEFT, Fate.RESTORED, ORIGINAL, True),
    # somebody else changed another line: only the run's line goes
    (ORIGINAL, [LEFT], b"a\nB\nc\nd\nE\n", Fate.MERGED, b"a\nb\nc\nd\nE\n", True),
    # somebody else changed the run's line: left as it is
    (ORIGINAL, [LEFT], b"a\nZ\nc\nd\ne\n", Fate.CONFLICT, b"a\nZ\nc\nd\ne\n", False),
    # somebody else put the original back already
    (ORIGINAL, [LEFT], ORIGINAL, Fate.RESTORED, ORIGINAL, False),
    # created by the run: removed; created and changed since: kept; created and deleted since: nothing to do
    (None, [b"new\n"], b"new\n", Fate.RESTORED, None, True),
    (None, [b"new\n"], b"new\nmine\n", Fate.KEPT, b"new\nmine\n", False),
    (None, [b"new\n"], None, Fate.RESTORED, None, False),
    # deleted by the run: back; deleted and created again since: kept
    (ORIGINAL, [None], None, Fate.RESTORED, ORIGINAL, True),
    (ORIGINAL, [None], b"mine\n", Fate.KEPT, b"mine\n", False),
    # changed by the run and deleted since by somebody else: a conflict, left deleted
    (ORIGINAL, [LEFT], None, Fate.CONFLICT, None, False),
    # journaled but never written (a crash between the backup and the write): the file is the other hand's
    (ORIGINAL, [ORIGINAL], b"mine\n", Fate.KEPT, b"mine\n", False),
])
def test_the_ownership_rule(original: bytes | None, left: list[bytes | None], current: bytes | None, fate: Fate,
                            data: bytes | None, write: bool) -> None:
    decision = take_back(original, left, current)
    assert (decision.fate, decision.data, decision.write) == (fate, data, write)


# A run wrote LEFT (b -> B); somebody appended "u"; the run wrote on top of that (d -> D): two stretches.
FOUND = LEFT + b"u\n"
AFTER = b"a\nB\nc\nD\ne\nu\n"
STRETCHES = [(ORIGINAL, [LEFT]), (FOUND, [AFTER])]


@pytest.mark.parametrize("current, fate, data, write", [
    # as the run left it: both stretches out, the appended line stays
    (AFTER, Fate.MERGED, ORIGINAL + b"u\n", True),
    # another line appended since: it stays too
    (AFTER + b"v\n", Fate.MERGED, ORIGINAL + b"u\nv\n", True),
    # the second write announced but never made (a crash): what was found counts as the file's
    (FOUND, Fate.MERGED, ORIGINAL + b"u\n", True),
    # the appended line taken away again since: nothing of anybody's is left but the original
    (b"a\nB\nc\nD\ne\n", Fate.RESTORED, ORIGINAL, True),
    # the second stretch's line changed since by somebody else: left as it is
    (b"a\nB\nc\nZ\ne\nu\n", Fate.CONFLICT, b"a\nB\nc\nZ\ne\nu\n", False),
    # the first stretch's line changed since: left as it is
    (b"a\nZ\nc\nD\ne\nu\n", Fate.CONFLICT, b"a\nZ\nc\nD\ne\nu\n", False),
])
def test_a_file_written_on_top_of_somebody_elses_change_is_taken_back_stretch_by_stretch(
        current: bytes, fate: Fate, data: bytes, write: bool) -> None:
    decision = take_back_stretches(STRETCHES, current)
    assert (decision.fate, decision.data, decision.write) == (fate, data, write)


def test_one_stretch_is_the_ownership_rule_and_the_runs_own_result_leaves_the_other_hands_lines_out() -> None:
    for current in (LEFT, b"a\nB\nc\nd\nE\n", None):
        assert take_back_stretches([(ORIGINAL, [LEFT])], current) == take_back(ORIGINAL, [LEFT], current)
    assert run_alone(STRETCHES) == b"a\nB\nc\nD\ne\n"
    assert run_alone([(ORIGINAL, [LEFT])]) == LEFT
    assert run_alone([(ORIGINAL, [LEFT]), (FOUND, [b"a\nB\nc\nd\ne\nU\n"])]) == b"a\nB\nc\nd\ne\nU\n", \
        "a change that cannot be told apart from theirs: what the run left"


def test_a_signal_during_shielded_work_waits_until_the_work_is_done() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.shielded():
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # give the handler a chance to run here
            done.append("all of it")
    assert done == ["all of it"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the caller's handler is back"


def test_under_the_cli_handler_the_first_signal_interrupts_and_later_ones_are_only_noted() -> None:
    with interrupts.installed():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])
        os.kill(os.getpid(), signal.SIGHUP)  # a second signal while the run is being rolled back: noted only
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert interrupts.noted == [signal.SIGHUP]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_process_that_is_leaving_ignores_the_ending_signals_from_the_moment_its_command_is_done() -> None:
    with interrupts.installed(leaving=True):
        pass
    try:
        assert all(signal.getsignal(s) == signal.SIG_IGN for s in interrupts.ENDING_SIGNALS), "no default put back"
        os.kill(os.getpid(), signal.SIGHUP)  # would end this process with SIGHUP's status under the default
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        for s in interrupts.ENDING_SIGNALS:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
