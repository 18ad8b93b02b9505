"""A first answer on a big tree not indexed yet: the task's files first (one `git grep` of its words), the rest
in a background process, and the complete index the same as one made whole."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from code_assistant.index import completion, embeddings, focus, store
from code_assistant.index.file_prep import file_digest
from code_assistant.index.file_table import FileStamp
from code_assistant.index.indexer import FOCUS_FILES, FOCUS_MIN_FILES, Indexer, superseded
from tests.repos import PYTEST, ROOT, answer, create, git_init, modify, run_cli, write_tree
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


@contextlib.contextmanager
def _a_completion_holds_the_lock(index_dir: Path) -> Iterator[None]:
    """The index's completion lock held, as a completion of another pid holds it, until the block ends."""
    with (index_dir / completion.LOCK_NAME).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("1\n")
        held.flush()
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def test_while_a_completion_runs_a_task_adds_nothing_and_a_run_without_one_waits_for_it(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    index_path = tmp_path / "index"
    _, first = _indexer(repo, index_path, embedder).update(focus=TASK)
    waiting = _indexer(repo, index_path, embedder)
    with _a_completion_holds_the_lock(waiting.dir):
        assert completion.running(waiting.dir)
        _, meanwhile = _indexer(repo, index_path, embedder).update(focus=TASK, background=True)
        assert (meanwhile.added, meanwhile.pending) == (0, first.pending), "nothing added, no second completion"
        assert not (waiting.dir / completion.LOG_NAME).exists()
        done: list[int] = []
        whole = threading.Thread(target=lambda: done.append(waiting.update()[1].files))
        whole.start()
        whole.join(2.0)
        assert whole.is_alive() and not done, "a run without a task waits for the completion"
    whole.join(COMPLETION_TIMEOUT_S)
    assert done == [FILES]


def test_while_a_completion_runs_search_and_symbol_answer_from_what_is_stored_and_say_what_is_not(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """A person's `search` and `symbol` (and another agent's, over MCP: the same tools) do not wait for the big
    tree's completion to end (a minute on two cores): they answer from what is stored, said to be partial."""
    index_path = tmp_path / "index"
    _, first = _indexer(repo, index_path, embedder).update(focus=TASK)
    where = ["--repo", str(repo), "--index-path", str(index_path)]
    with _a_completion_holds_the_lock(_index_dir(index_path)):
        found = run_cli(["search", *where, "Location header of a redirect"], api_key=None, timeout=60)
        defined = run_cli(["symbol", *where, "build_location_header"], api_key=None, timeout=60)
    pending = f"{first.pending} files of the repository are not indexed yet"
    assert found.returncode == 0 and TARGET in found.stdout and pending in found.stdout, found.stdout + found.stderr
    assert defined.returncode == 0 and f"{TARGET}:4: def build_location_header(url, base):" in defined.stdout
    assert pending in defined.stdout, defined.stdout


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


# ----- a task run on a big tree, and the two writers of one index ----------------------------------------------------
HELPER = "src/http/joining.py"
LOCATION_TEST = ("import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent.parent / 'src' "
                 "/ 'http'))\nfrom location import build_location_header  # noqa: E402\n\n\n"
                 "def test_a_relative_url_is_joined_with_one_slash():\n"
                 "    assert build_location_header('/a', 'http://h/') == 'http://h/a'\n")


def _clone(repo: Path, root: Path, extra: dict[str, str] | None = None) -> Path:
    """A working copy of the big tree that a test may change (with `extra` files committed)."""
    clone = root / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    if extra:
        write_tree(clone, extra)
        subprocess.run(["git", "add", "-A"], cwd=clone, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "test"], cwd=clone,
                       check=True)
    return clone


def _index_dir(index_path: Path) -> Path:
    [found] = index_path.glob("repos/*/index.sqlite")
    return found.parent


def _started(index_dir: Path) -> bool:
    """Whether a completion holds the index's lock, once its process has had the time to take it."""
    deadline = time.monotonic() + 30
    while not completion.running(index_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return completion.running(index_dir)


def _hold_still(index_dir: Path) -> int:
    """Stop the running completion where it holds no write transaction (this process takes the database's write
    lock first): it keeps its lock, as a completion that is only slow does; its pid."""
    pid = int((index_dir / completion.LOCK_NAME).read_text().strip())
    db = sqlite3.connect(str(index_dir / "index.sqlite"), timeout=60)
    db.execute("BEGIN IMMEDIATE")
    os.kill(pid, signal.SIGSTOP)
    db.rollback()
    db.close()
    return pid


def test_a_task_run_on_a_big_tree_asks_before_the_rest_is_indexed_and_its_tools_see_its_own_new_file(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """The run's first request is sent from the task's files while the completion still runs; its new file is in
    the index its tools read while the completion holds the lock; after both, the index has the file's last
    version."""
    clone = _clone(repo, tmp_path, {"tests/test_location.py": LOCATION_TEST})
    index_path = tmp_path / "index"
    seen: dict[str, object] = {}

    def plan(request: dict) -> str:
        index_dir = _index_dir(index_path)
        seen["log"] = (index_dir / completion.LOG_NAME).read_text()
        seen["completing"] = _started(index_dir)
        seen["stopped"] = _hold_still(index_dir)
        return answer(modify(TARGET, "        return base + url", "        return joined_location(base, url)"),
                      modify(TARGET, '"""Redirects."""\n', '"""Redirects."""\nfrom joining import joined_location\n'),
                      create(HELPER, "def joined_location(base, url):\n    return base + url\n"))

    def fix(request: dict) -> str:
        seen["tool result"] = json.dumps(request["messages"][-1])
        return answer(modify(HELPER, "    return base + url", "    return base.rstrip('/') + url"))

    look = {"tool_calls": [{"name": "symbol", "arguments": {"name": "joined_location"}}]}
    try:
        with ScriptedServer([plan, look, fix]) as server:
            proc = run_cli(["--repo", str(clone), "--index-path", str(index_path), "-v", "--task", TASK,
                            "--test-command", f"{PYTEST} tests/test_location.py", "--no-reproduce",
                            "--max-iterations", "3", "--json"], server_url=server.url)
    finally:
        if "stopped" in seen:
            os.kill(int(seen["stopped"]), signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["success"], proc.stderr[-3000:]
    assert seen["completing"] and "index complete" not in str(seen["log"]), "asked before the rest was indexed"
    assert f"removed, {FILES + 1 - FOCUS_FILES} pending)" in proc.stderr, "the task's files first"
    assert "def build_location_header(url, base):" in json.dumps(server.chat_requests[0])
    assert f"{HELPER}:1" in str(seen["tool result"]), seen.get("tool result")
    _wait_for(int(seen["stopped"]))
    found = run_cli(["symbol", "--repo", str(clone), "--index-path", str(index_path), "--json", "joined_location"])
    assert found.returncode == 0 and HELPER in found.stdout, found.stdout + found.stderr[-2000:]
    indexer = _indexer(clone, index_path, embedder)
    assert len(indexer.db.files.paths()) == FILES + 2
    assert indexer.db.files.hashes([HELPER]) == {HELPER: file_digest((clone / HELPER).read_text())}, "its new content"
    assert indexer.db.postings.files_with({"rstrip"}) == {"rstrip": {HELPER}}
    indexer.db.close()


def test_edits_while_the_completion_runs_are_indexed_at_once_and_a_completion_killed_after_them_is_taken_up(
        repo: Path, tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """A person editing files (new ones, pending ones, indexed ones) while the completion writes the same index:
    every update with the task finds the edits at once, no write collides with the completion's, and once a
    completion killed half way is taken up by another, every file's indexed version is the one on disk."""
    clone = _clone(repo, tmp_path)
    index_path = tmp_path / "index"
    _, first = _indexer(clone, index_path, embedder).update(focus=TASK, background=True)
    index_dir = _index_dir(index_path)
    assert first.pending and _started(index_dir)
    edited: list[str] = []
    rounds = 0
    while completion.running(index_dir) and rounds < 8:
        rounds += 1
        new, pending, indexed = f"src/new_{rounds}.py", f"pkg{rounds}/cache_{1 + rounds * 500}.py", TARGET
        (clone / new).parent.mkdir(parents=True, exist_ok=True)
        (clone / new).write_text(f"def fresh_{rounds}():\n    return {rounds}\n")
        with (clone / pending).open("a") as f:
            f.write(f"\n\ndef edited_{rounds}():\n    return {rounds}\n")
        with (clone / indexed).open("a") as f:
            f.write(f"\n\ndef target_{rounds}():\n    return {rounds}\n")
        edited += [new, pending]
        index, _ = _indexer(clone, index_path, embedder).update(focus=TASK, background=True)
        names = {f"fresh_{rounds}", f"edited_{rounds}", f"target_{rounds}"}
        assert index.defining(names) == {f"fresh_{rounds}": {new}, f"edited_{rounds}": {pending},
                                         f"target_{rounds}": {TARGET}}
    assert rounds >= 2, "the completion ended before the edits could race it"
    if completion.running(index_dir):
        os.kill(int((index_dir / completion.LOCK_NAME).read_text()), signal.SIGKILL)
    _indexer(clone, index_path, embedder).update(focus=TASK, background=True)  # another completion, or this one
    completion.wait_for(index_dir)
    indexer = _indexer(clone, index_path, embedder)
    _, last = indexer.update()
    assert (last.pending, last.files) == (0, FILES + rounds)
    stored = indexer.db.files.hashes(edited + [TARGET])
    assert stored == {p: file_digest((clone / p).read_text()) for p in edited + [TARGET]}
    assert "Error" not in (index_dir / completion.LOG_NAME).read_text()
    indexer.db.close()


def test_two_processes_indexing_one_new_tree_at_once_both_finish_with_one_index(tmp_path: Path) -> None:
    """Two writers of one index (a completion and a run, two runs) opening it new and storing the same new files,
    some of them not indexable (remembered as skipped), each by its own transaction: no `database is locked`, no
    `UNIQUE constraint failed`, one index."""
    files = {f"p{n // 100}/m{n}.py": f"def f{n}(x):\n    return x + {n}\n" for n in range(1500)}
    repo = write_tree(tmp_path / "repo", files)
    for n in range(0, 1500, 3):
        (repo / f"p{n // 100}/m{n}.py").write_bytes(b"\0\1binary" * 8)
    script = ("import sys\nfrom pathlib import Path\nfrom code_assistant.index import embeddings, store\n"
              "from code_assistant.index.indexer import Indexer\nif __name__ == '__main__':\n"
              "    repo, index = Path(sys.argv[1]), Path(sys.argv[2])\n    e = embeddings.make_embedder('local')\n"
              "    print(Indexer(repo, index, e, store.LazyChunkStore(index, repo, e.name)).update()[1].symbols)\n")
    for attempt in range(3):
        index_path = tmp_path / f"index{attempt}"  # a new database, opened by both at once
        procs = [subprocess.Popen([sys.executable, "-c", script, str(repo), str(index_path)], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err[-1500:] for _, err in outs]
        assert [out.strip() for out, _ in outs] == ["1000", "1000"]


@pytest.mark.parametrize(("listed", "now", "mtime", "written"), [
    (None, None, 5, True),  # nobody stored it: ours
    (None, (10, 4, False), 5, True),  # another stored an older version meanwhile: ours is newer
    (None, (10, 5, False), 5, False),  # another stored this version
    (None, (10, 6, False), 5, False),  # another stored a newer one (a run's edit after our listing)
    ((10, 3, False), (10, 3, False), 5, True),  # untouched since listed
    ((10, 7, False), (10, 7, False), 5, True),  # untouched, though our version has an older stamp (tar -x)
    ((10, 3, False), (10, 6, True), 5, False),  # another found the newer version not indexable
])
def test_a_file_another_process_stored_since_the_listing_is_written_only_when_ours_is_newer(
        listed: tuple | None, now: tuple | None, mtime: int, written: bool) -> None:
    st = os.stat_result((0o100644, 0, 0, 1, 0, 0, 10, 0, 0, 0), {"st_mtime_ns": mtime})
    assert superseded(FileStamp(*listed) if listed else None, FileStamp(*now) if now else None, st) is not written
