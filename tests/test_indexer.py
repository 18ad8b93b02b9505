"""The index: what is indexed, what is skipped, and that unchanged work is never done twice."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from code_assistant.index import embeddings, lexical, store
from code_assistant.index.indexer import Indexer, list_repo_files
from tests.repos import alive, git_init, write_tree

FILES = {
    "pkg/__init__.py": "",
    "pkg/calc.py": "from pkg.util import clamp\n\n\nclass Calc:\n    def add(self, a, b):\n        return clamp(a + b)\n\n"
                   "    def sub(self, a, b):\n        return clamp(a - b)\n",
    "pkg/util.py": "def clamp(x, lo=0, hi=100):\n    return max(lo, min(hi, x))\n",
    "tests/test_calc.py": "from pkg.calc import Calc\n\n\ndef test_add():\n    assert Calc().add(1, 2) == 3\n",
    "README.md": "# Calc\nA calculator.\n",
}


@pytest.fixture(scope="module")
def embedder() -> embeddings.Embedder:
    return embeddings.make_embedder("local")


def _indexer(repo: Path, index_path: Path, embedder: embeddings.Embedder) -> Indexer:
    client = store.open_client(index_path)
    return Indexer(repo, index_path, embedder, store.ChunkStore(client, store.collection_name(str(repo), embedder.name)))


def test_index_records_symbols_imports_and_graph_without_the_model(tmp_path: Path,
                                                                   embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    index, stats = _indexer(repo, tmp_path / "index", embedder).update()
    assert stats.files == 5 and stats.added == 5
    assert ["Calc", "Calc.add", "Calc.sub"] == [s[0] for s in index.files["pkg/calc.py"].symbols]
    assert index.graph["pkg/calc.py"] == ["pkg/util.py"]
    assert "pkg/calc.py" in index.graph["tests/test_calc.py"]
    assert index.chunks.count() == 0, "a cold index builds everything but the vectors"
    assert index.vectors.missing() == sorted(FILES)


def test_filling_stores_each_chunk_once_and_a_second_fill_does_nothing(tmp_path: Path,
                                                                       embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    index, _ = _indexer(repo, tmp_path / "index", embedder).update()
    first = index.vectors.fill()
    assert first.embedded == index.chunks.count() >= 4 and first.files == len(FILES)
    assert index.vectors.missing() == [] and index.db.vectors.counts() == (len(FILES), len(FILES))
    again = index.vectors.fill()
    assert (again.embedded, again.reused, again.files_asked) == (0, 0, 0)


def _big_function(name: str, lines: int = 40) -> str:
    """A definition large enough to be a chunk of its own."""
    body = "".join(f"    {name}_step_{k} = compute_{k}(x, {k}) + offset_{k}\n" for k in range(lines))
    return f"def {name}(x):\n{body}    return x\n\n\n"


def test_a_budget_caps_model_work_and_the_next_fill_continues(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    files = {f"pkg/mod{i}.py": "".join(_big_function(f"f{i}_{j}") for j in range(3)) for i in range(3)}
    repo = write_tree(tmp_path / "repo", files)
    index, _ = _indexer(repo, tmp_path / "index", embedder).update()
    part = index.vectors.fill(sorted(files), budget=4)
    assert part.embedded == 4 and part.exhausted
    assert index.chunks.count() == 4, "what was computed is stored, even a file's first chunks"
    assert index.vectors.missing()[-2:] == ["pkg/mod1.py", "pkg/mod2.py"], "files in the order asked"
    rest = index.vectors.fill(sorted(files))
    assert rest.embedded + part.embedded == index.chunks.count() == rest.chunks >= 9
    assert not rest.exhausted and index.vectors.missing() == []


def test_a_changed_file_drops_its_vectors_and_refills_only_changed_chunks(tmp_path: Path,
                                                                          embedder: embeddings.Embedder) -> None:
    calc_py = FILES["pkg/calc.py"] + "\n\n" + _big_function("tally") + _big_function("audit")
    repo = write_tree(tmp_path / "repo", {**FILES, "pkg/calc.py": calc_py})
    indexer = _indexer(repo, tmp_path / "index", embedder)
    first, _ = indexer.update()
    first.vectors.fill()
    old_ids = set(first.db.vectors.chunk_ids("pkg/calc.py"))
    _, again = indexer.update()
    assert (again.added, again.changed, again.removed) == (0, 0, 0)

    calc = repo / "pkg" / "calc.py"
    calc.write_text(calc.read_text().replace("return clamp(a - b)", "return clamp(a - b - 0)"))
    index, changed = indexer.update()
    assert changed.changed == 1 and index.vectors.missing() == ["pkg/calc.py"]
    assert index.chunks.existing(list(old_ids)) == set(), "the old version's vectors are gone at once"
    refill = index.vectors.fill()
    assert 1 <= refill.embedded < index.files["pkg/calc.py"].chunks, "unchanged chunk texts come from the cache"
    new_ids = index.db.vectors.chunk_ids("pkg/calc.py")
    assert index.chunks.existing(new_ids) == set(new_ids)


def test_deleted_files_leave_the_index(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    _indexer(repo, tmp_path / "index", embedder).update()[0].vectors.fill()
    (repo / "pkg" / "util.py").unlink()
    index, stats = _indexer(repo, tmp_path / "index", embedder).update()
    assert stats.removed == 1 and "pkg/util.py" not in index.files
    hits = index.chunks.query(embedder.embed(["def clamp"])[0], 50)
    assert hits and all(h.path != "pkg/util.py" for h in hits)


def test_touched_but_identical_file_is_not_reparsed(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    _indexer(repo, tmp_path / "index", embedder).update()[0].vectors.fill()
    util = repo / "pkg" / "util.py"
    util.write_text(util.read_text())  # new mtime, same bytes
    index, stats = _indexer(repo, tmp_path / "index", embedder).update()
    assert stats.changed == 0 and index.vectors.missing() == []


def test_a_file_changed_after_the_update_is_not_embedded_stale(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    index, _ = _indexer(repo, tmp_path / "index", embedder).update()
    (repo / "pkg" / "util.py").write_text("def clamp(x):\n    return x\n")  # the update has not seen this version
    index.vectors.fill()
    assert index.vectors.missing() == ["pkg/util.py"] and index.db.vectors.chunk_ids("pkg/util.py") == []


def test_secrets_vendored_binary_and_ignored_files_are_skipped(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {
        **FILES,
        ".env": "OPENAI_API_KEY=sk-live\n",
        "config/.env.production": "DB_PASSWORD=x\n",
        "deploy/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n",
        "node_modules/lib/index.js": "module.exports = 1;\n",
        "static/app.min.js": "var a=1;\n",
        "build/out.py": "X = 1\n",
        "gen/ignored.py": "Y = 2\n",
        ".gitignore": "gen/\n",
        ".env.example": "OPENAI_API_KEY=\n",
    })
    (repo / "blob.py").write_bytes(b"\x00\x01binary")
    files = list_repo_files(repo)
    assert "pkg/calc.py" in files
    for skipped in (".env", "config/.env.production", "deploy/id_rsa", "node_modules/lib/index.js",
                    "static/app.min.js", "build/out.py", "gen/ignored.py"):
        assert skipped not in files
    git_init(repo)
    assert "gen/ignored.py" not in list_repo_files(repo)


def test_a_gitignore_that_ignores_all_but_directories_and_named_files_keeps_those(tmp_path: Path) -> None:
    """go-zero's .gitignore (`*`, then `!*.*` and `!*/`): without git, the walk keeps every directory and every file
    with an extension, as `git ls-files` does; a lone `!` (black's test data has one) is no pattern, as for git."""
    repo = write_tree(tmp_path / "repo", {".gitignore": "*\n!*.*\n!*/\n**/logs\n!\n", "go.mod": "module m\n",
                                          "core/timer/wheel.go": "package timer\n", "core/timer/LOCK": "x\n",
                                          "logs/a.go": "package logs\n"})
    assert list_repo_files(repo) == ["core/timer/wheel.go", "go.mod"]
    git_init(repo)
    assert list_repo_files(repo) == ["core/timer/wheel.go", "go.mod"]


def test_file_holding_a_private_key_is_not_indexed(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEow" * 20 + "\n-----END RSA PRIVATE KEY-----\n"
    repo = write_tree(tmp_path / "repo", {**FILES, "pkg/keys.py": f'KEY = """{key}"""\n'})
    index, _ = _indexer(repo, tmp_path / "index", embedder).update()
    assert "pkg/keys.py" not in index.files


def test_index_inside_the_repository_is_not_indexed_nor_in_git_status(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    git_init(repo)
    index, _ = _indexer(repo, repo / ".code_index", embedder).update()
    assert not any(p.startswith(".code_index") for p in index.files)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == ""


def test_two_repositories_never_share_a_collection(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    one = write_tree(tmp_path / "one", FILES)
    two = write_tree(tmp_path / "two", {"other.py": "def unrelated():\n    return 42\n"})
    index_one, _ = _indexer(one, tmp_path / "index", embedder).update()
    index_two, _ = _indexer(two, tmp_path / "index", embedder).update()
    index_one.vectors.fill()
    index_two.vectors.fill()
    assert index_one.chunks.name != index_two.chunks.name
    assert {h.path for h in index_two.chunks.query(embedder.embed(["Calc add"])[0], 20)} == {"other.py"}


def test_worker_processes_index_the_same_as_one_process(tmp_path: Path, embedder: embeddings.Embedder,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from code_assistant.index import file_prep

    files = {**FILES, **{f"pkg/mod{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(6)}}
    serial_repo = write_tree(tmp_path / "serial", files)
    serial, _ = _indexer(serial_repo, tmp_path / "index1", embedder).update()
    monkeypatch.setattr(file_prep, "PARALLEL_MIN_FILES", 1)
    parallel_repo = write_tree(tmp_path / "parallel", files)
    parallel, stats = _indexer(parallel_repo, tmp_path / "index2", embedder).update()
    assert stats.files == len(files)
    assert {p: (r.hash, r.symbols, r.imports, r.chunks) for p, r in serial.files.items()} == \
        {p: (r.hash, r.symbols, r.imports, r.chunks) for p, r in parallel.files.items()}
    assert serial.graph == parallel.graph


def _snapshot(index) -> tuple:
    """Everything retrieval reads from the index database."""
    records = {p: (r.hash, r.symbols, r.imports, r.chunks) for p, r in index.files.items()}
    queries = ["clamp the sum", "Calc add sub", "vat rate", "calculator readme"]
    return records, index.graph, [index.bm25(lexical.tokenize(q)) for q in queries], \
        index.defining({"clamp", "vat", "calc.add"})


def test_an_updated_index_equals_one_built_from_scratch(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", {**FILES, "pkg/tax.py": "from pkg.missing import rate\n"})
    indexer = _indexer(repo, tmp_path / "index", embedder)
    indexer.update()
    calc = repo / "pkg" / "calc.py"
    calc.write_text(calc.read_text().replace("from pkg.util import clamp", "from pkg.vat import clamp"))  # new import
    (repo / "pkg" / "util.py").unlink()  # removed, and its importer's edge with it
    write_tree(repo, {"pkg/vat.py": "def clamp(x):\n    return x\n\n\ndef vat(x):\n    return x * 0.2\n",
                      "pkg/missing.py": "rate = 0.2\n"})  # added: pkg/tax.py's import now resolves
    updated, stats = indexer.update()
    assert (stats.added, stats.changed, stats.removed) == (2, 1, 1)
    assert updated.graph["pkg/tax.py"] == ["pkg/missing.py"]
    assert updated.graph["pkg/calc.py"] == ["pkg/vat.py"]

    fresh, _ = _indexer(repo, tmp_path / "fresh-index", embedder).update()
    assert _snapshot(updated) == _snapshot(fresh)
    assert updated.vectors.fill().chunks == fresh.vectors.fill().chunks
    assert updated.chunks.count() == fresh.chunks.count()
    assert _snapshot(updated) == _snapshot(fresh)


def test_a_changed_import_moves_only_that_files_edges(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    indexer = _indexer(repo, tmp_path / "index", embedder)
    indexer.update()
    test = repo / "tests" / "test_calc.py"
    test.write_text("from pkg.util import clamp\n\n\ndef test_clamp():\n    assert clamp(200) == 100\n")
    index, stats = indexer.update()
    assert stats.changed == 1
    assert index.graph == {"pkg/calc.py": ["pkg/util.py"], "tests/test_calc.py": ["pkg/util.py"]}
    assert index.neighbours("pkg/util.py") == {"pkg/calc.py", "tests/test_calc.py"}


def test_files_that_are_not_indexed_are_not_read_again(tmp_path: Path, embedder: embeddings.Embedder,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from code_assistant.index import file_prep

    repo = write_tree(tmp_path / "repo", FILES)
    (repo / "blob.py").write_bytes(b"\x00\x01binary")
    indexer = _indexer(repo, tmp_path / "index", embedder)
    indexer.update()
    read: list[str] = []
    real = file_prep.prepare_file
    monkeypatch.setattr(file_prep, "prepare_file", lambda repo, path, *a: read.append(path) or real(repo, path, *a))
    index, stats = indexer.update()
    assert read == [] and "blob.py" not in index.files
    (repo / "blob.py").write_text("def now_text():\n    return 1\n")
    index, stats = indexer.update()
    assert read == ["blob.py"] and stats.added == 1 and "blob.py" in index.files


def test_an_index_of_the_old_json_format_is_rebuilt(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    repo = write_tree(tmp_path / "repo", FILES)
    old = _indexer(repo, tmp_path / "index", embedder).dir
    for name in ("manifest.json", "lexicon.json", "bm25/paths.txt"):
        (old / name).parent.mkdir(parents=True, exist_ok=True)
        (old / name).write_text("{}")
    index, stats = _indexer(repo, tmp_path / "index", embedder).update()
    assert stats.added == len(FILES) and index.files["pkg/calc.py"].symbols
    assert sorted(p.name for p in old.iterdir() if not p.name.startswith("index.sqlite")) == []


def test_a_query_embeds_each_candidates_most_relevant_chunk_first(tmp_path: Path,
                                                                  embedder: embeddings.Embedder) -> None:
    files = {"pkg/a.py": _big_function("alpha") + _big_function("beta") + _big_function("reconcile_ledger"),
             "pkg/b.py": _big_function("gamma") + _big_function("delta") + _big_function("ledger_total")}
    repo = write_tree(tmp_path / "repo", files)
    index, _ = _indexer(repo, tmp_path / "index", embedder).update()
    query = set(lexical.tokenize("reconcile the ledger"))
    report = index.vectors.fill(["pkg/a.py", "pkg/b.py"], budget=2, query_terms=query)
    assert report.embedded == 2 and report.exhausted
    hits = index.chunks.query(embedder.embed(["reconcile_ledger ledger_total"])[0], 10)
    assert {(h.path, h.symbol) for h in hits} == {("pkg/a.py", "reconcile_ledger"), ("pkg/b.py", "ledger_total")}
    rest = index.vectors.fill(["pkg/a.py", "pkg/b.py"], budget=100, query_terms=query)
    assert 0 < rest.embedded < rest.chunks - 2, "only the chunks sharing words with the query"
    assert index.vectors.missing() == ["pkg/a.py", "pkg/b.py"]
    again = index.vectors.fill(["pkg/a.py", "pkg/b.py"], budget=100, query_terms=query)
    assert again.embedded == 0, "the same query finds its relevant chunks embedded and spends nothing"


def test_a_new_embedder_name_never_mixes_its_vectors_with_the_old_ones(tmp_path: Path) -> None:
    """Switching the local runtime (float32 numpy to int8 onnxruntime) under the same index directory: the new
    vectors go to their own collection and cache, nothing is reused from the old model, and the index starts afresh."""
    repo = write_tree(tmp_path / "repo", FILES)
    index_path = tmp_path / "index"
    old, new = embeddings.LocalMiniLM(runtime="numpy"), embeddings.LocalMiniLM(runtime="int8")
    assert old.name != new.name
    old_index, _ = _indexer(repo, index_path, old).update()
    old_count = old_index.vectors.fill().embedded
    new_index, stats = _indexer(repo, index_path, new).update()
    assert stats.added == len(FILES) and new_index.vectors.missing() == sorted(FILES), "the index starts afresh"
    report = new_index.vectors.fill()
    assert (report.embedded, report.reused) == (old_count, 0), "no vector of the old model is reused"
    assert new_index.chunks.name != old_index.chunks.name
    assert new_index.chunks.count() == old_index.chunks.count() == old_count
    caches = sorted(p.name for p in (index_path / "embedding-cache").iterdir())
    assert caches == ["local-all-MiniLM-L6-v2-int8w7.sqlite", "local-all-MiniLM-L6-v2.sqlite"]


def test_worker_processes_end_when_the_indexing_process_is_killed(tmp_path: Path) -> None:
    """A process that indexes in worker processes killed outright (kill -9, the OOM killer) leaves no worker behind:
    each ends within a few seconds of its parent instead of waiting on its job queue for ever."""
    import os
    import signal
    import sys
    import time

    write_tree(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = (
        "import sys, time\n"
        "from code_assistant.gate import Gate\n"
        "from code_assistant.index import file_prep\n"
        f"preparer = file_prep.Preparer(Gate({str(tmp_path / 'repo')!r}), file_prep.PARALLEL_MIN_FILES)\n"
        "list(preparer.map([('a.py', None)] * 4))\n"
        "print(*preparer._pool._processes, flush=True)\n"
        "time.sleep(600)\n")
    indexing = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                                cwd=Path(__file__).resolve().parents[1])
    try:
        workers = [int(pid) for pid in indexing.stdout.readline().split()]
        assert workers, "the pool's workers were started"
    finally:
        indexing.send_signal(signal.SIGKILL)
        indexing.wait()
    deadline = time.monotonic() + 30  # an anti-hang guard; a worker looks at its parent every second
    while (left := [pid for pid in workers if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "worker processes outlived the process that started them"

