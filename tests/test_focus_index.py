"""A first answer on a big tree not indexed yet: the task's files first (one `git grep` of its words), the rest
in a background process, and the complete index the same as one made whole."""
from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from code_assistant.index import completion, embeddings, focus, store
from code_assistant.index.indexer import FOCUS_FILES, FOCUS_MIN_FILES, Indexer
from tests.repos import git_init, run_cli, write_tree
from tests.scripted_server import ScriptedServer

TARGET = "src/http/location.py"
TASK = "The Location header is wrong when a redirect is built from a relative url"
TARGET_TEXT = ('"""Redirects."""\n\n\ndef build_location_header(url, base):\n'
               '    """The Location header of a redirect to url."""\n'
               '    if url.startswith("/"):\n        return base + url\n    return url\n')
PARTS = ("config", "cache", "queue", "parser", "render", "store", "router", "timer", "loader", "worker")


def _filler(n: int) -> str:
    """A small module of generic words, some of them the task's (url, header), so the scan has to rank."""
    part = PARTS[n % len(PARTS)]
    extra = "    headers = {'accept': url}\n" if n % 7 == 0 else ""
    return (f"def {part}_{n}(value, url=None):\n    \"\"\"Handle the {part} value number {n}.\"\"\"\n{extra}"
            f"    return value + {n}\n")


FILES = FOCUS_MIN_FILES + FOCUS_FILES + 300  # pending after one first answer, and still after a later run
COMPLETION_TIMEOUT_S = 300


def big_tree(root: Path, files: int = FILES) -> Path:
    """A git repository of `files` small Python modules, one of which the task is about."""
    tree = {f"pkg{n // 500}/{PARTS[n % len(PARTS)]}_{n}.py": _filler(n) for n in range(files - 1)}
    tree[TARGET] = TARGET_TEXT
    repo = write_tree(root / "repo", tree)
    git_init(repo)
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return big_tree(tmp_path_factory.mktemp("big"))


@pytest.fixture(scope="module")
def embedder() -> embeddings.Embedder:
    return embeddings.make_embedder("local")


def _indexer(repo: Path, index_path: Path, embedder: embeddings.Embedder) -> Indexer:
    return Indexer(repo, index_path, embedder, store.LazyChunkStore(index_path, repo, embedder.name))


def _context(repo: Path, index_path: Path) -> tuple[dict, str]:
    proc = run_cli(["--repo", str(repo), "--index-path", str(index_path), "-v", "--task", TASK, "--context-only",
                    "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), proc.stderr


def test_the_scan_ranks_the_file_holding_the_tasks_rare_words_first(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {"a.py": "x = 1  # url\n", "b.py": "y = 2\n", TARGET: TARGET_TEXT})
    git_init(repo)
    (repo / "notes.py").write_text("REDIRECT = 'redirect relative url'\n", encoding="utf-8")  # untracked: seen
    assert focus.task_terms(TASK) == ["location", "redirect", "relative", "header", "built", "wrong", "url"]
    sizes = {p: (repo / p).stat().st_size for p in ("a.py", "b.py", "notes.py", TARGET)}
    ranked = focus.rank_files(focus.Scan(repo, TASK), sizes, 10)
    assert ranked is not None and ranked[0] == TARGET
    assert set(ranked) == {TARGET, "notes.py", "a.py"}, "a file holding no word of the task is not a candidate"


def test_the_scan_says_when_git_cannot_answer(tmp_path: Path) -> None:
    plain = write_tree(tmp_path / "plain", {"a.py": "url = 1\n"})
    assert focus.rank_files(focus.Scan(plain, TASK), {"a.py": 8}, 10) is None  # the caller indexes everything


def _wait_for(pid: int) -> None:
    """Until the background completion (a process of its own session, not this one's child) has ended."""
    deadline = time.monotonic() + COMPLETION_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"the index's completion (pid {pid}) did not end in {COMPLETION_TIMEOUT_S} s")


def test_a_first_answer_on_a_big_tree_indexes_the_tasks_files_and_the_rest_in_the_background(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    index_path = tmp_path / "index"
    first, log = _context(repo, index_path)
    assert first["context_files"][0] == TARGET
    assert first["chunks_embedded"] == 0, "while files are pending the first answer loads no embedding model"
    assert f"removed, {FILES - FOCUS_FILES} pending)" in log
    started = re.search(r"completing the index in the background \(pid (\d+)", log)
    assert started, log[-2000:]
    try:
        second, log = _context(repo, index_path)  # while it completes, or after: the same answer
        assert second["context_files"][0] == TARGET
    finally:
        _wait_for(int(started.group(1)))
    indexer = _indexer(repo, index_path, embedder)
    assert len(indexer.db.files.paths()) == FILES and not completion.running(indexer.dir)
    assert f"index complete: {FILES} files" in (indexer.dir / completion.LOG_NAME).read_text()
    assert not (indexer.dir / "unindexed-have-no-vectors").exists()
    indexer.db.close()
    third, log = _context(repo, index_path)
    assert third["context_files"][0] == TARGET and "removed, 0 pending)" in log
    assert "in the background" not in log, "a complete index starts nothing"
    assert third["chunks_embedded"] > 0, "a complete index answers with the dense signal again, into ChromaDB"


def test_a_completion_killed_half_way_is_taken_up_by_the_next_first_answer(repo: Path, tmp_path: Path,
                                                                           embedder: embeddings.Embedder) -> None:
    index_path = tmp_path / "index"
    _, log = _context(repo, index_path)
    started = re.search(r"completing the index in the background \(pid (\d+)", log)
    assert started, log[-2000:]
    pid = int(started.group(1))
    time.sleep(2.0)
    os.kill(pid, signal.SIGKILL)  # the machine turned off, as far as the index can tell
    _wait_for(pid)
    answer, log = _context(repo, index_path)
    assert answer["context_files"][0] == TARGET
    # what the killed one committed stays; the rest is pending again: another completion, or, when fewer than
    # FOCUS_MIN_FILES are left, this run indexes them itself
    again = re.search(r"completing the index in the background \(pid (\d+)", log)
    if again:
        _wait_for(int(again.group(1)))
    else:
        assert "removed, 0 pending)" in log
    indexer = _indexer(repo, index_path, embedder)
    assert len(indexer.db.files.paths()) == FILES
    indexer.db.close()


def test_an_index_completed_after_a_first_answer_is_the_index_made_whole(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    staged = _indexer(repo, tmp_path / "staged", embedder)
    _, first = staged.update(focus=TASK)
    assert first.pending == FILES - FOCUS_FILES and first.files == FOCUS_FILES
    _, again = staged.update(focus=TASK)  # the same task again: its files are in already, nothing is added
    assert (again.added, again.pending) == (0, first.pending)
    staged_index, last = staged.update()  # a run without a task: all of it
    assert (last.pending, last.files) == (0, FILES)
    whole_index, whole = _indexer(repo, tmp_path / "whole", embedder).update()
    assert staged_index.db.files.symbol_count() == whole.symbols
    query = ["location", "header", "redirect", "url", "config"]
    assert staged_index.bm25(query) == pytest.approx(whole_index.bm25(query))
    assert staged_index.defining({"build_location_header"}) == {"build_location_header": {TARGET}}
    assert staged_index.graph == whole_index.graph


def test_while_a_completion_runs_a_task_adds_nothing_and_a_run_without_one_waits_for_it(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    index_path = tmp_path / "index"
    _, first = _indexer(repo, index_path, embedder).update(focus=TASK)
    waiting = _indexer(repo, index_path, embedder)
    with (waiting.dir / completion.LOCK_NAME).open("a") as held:  # a completion holds the lock (another pid)
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("1\n")
        held.flush()
        assert completion.running(waiting.dir)
        _, meanwhile = _indexer(repo, index_path, embedder).update(focus=TASK, background=True)
        assert (meanwhile.added, meanwhile.pending) == (0, first.pending), "nothing added, no second completion"
        assert not (waiting.dir / completion.LOG_NAME).exists()
        done: list[int] = []
        whole = threading.Thread(target=lambda: done.append(waiting.update()[1].files))
        whole.start()
        whole.join(2.0)
        assert whole.is_alive() and not done, "a run without a task waits for the completion"
        fcntl.flock(held, fcntl.LOCK_UN)
    whole.join(COMPLETION_TIMEOUT_S)
    assert done == [FILES]


def test_a_small_tree_is_indexed_whole_even_with_a_task(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = big_tree(tmp_path, files=50)
    _, stats = _indexer(repo, tmp_path / "index", embedder).update(focus=TASK)
    assert (stats.pending, stats.files) == (0, 50)
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout == ""


def test_a_first_question_on_a_big_tree_is_answered_from_the_questions_files_the_rest_in_the_background(
        repo: Path, tmp_path: Path) -> None:
    """`ask` takes the same path as a first answer: the question's files indexed first, the context sent with the
    file the question is about, the rest completed in the background."""
    index_path = tmp_path / "index"
    with ScriptedServer(["build_location_header in src/http/location.py prefixes the base to a relative url."]) \
            as server:
        proc = run_cli(["--repo", str(repo), "--index-path", str(index_path), "-v", "--ask", TASK],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stderr[-2000:]
    started = re.search(r"completing the index in the background \(pid (\d+)", proc.stderr)
    assert started, proc.stderr[-2000:]
    _wait_for(int(started.group(1)))
    assert "more being indexed in the background]" in proc.stdout + proc.stderr
    assert "def build_location_header(url, base):" in json.dumps(server.chat_requests[0])
