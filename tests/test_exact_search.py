"""A query's nearest chunks come from the index database's copy of the vectors, compared one by one: the same
answer as Chroma's, the same on every run, and no Chroma opened to get it. Chroma answers what the copy cannot: the
whole-store search of a large store, a store whose vectors this machine did not all make (a server's)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pytest

from code_assistant.index import embeddings, store
from code_assistant.index.index_db import IndexDB
from code_assistant.index.indexer import Indexer, RepoIndex
from code_assistant.index.nearest import ChunkSearch, nearest
from tests.repos import ROOT, run_cli, write_tree


@pytest.fixture(scope="module")
def embedder() -> embeddings.Embedder:
    return embeddings.make_embedder("local")


FILES = {
    "billing/invoice.py": "def invoice_total(lines):\n    return sum(l.price * l.quantity for l in lines)\n\n\n"
                          "def invoice_number(year, seq):\n    return f'{year}-{seq:05d}'\n",
    "billing/tax.py": "RATES = {'DE': 0.19, 'FR': 0.20}\n\n\ndef vat(amount, country):\n"
                      "    return amount * RATES[country]\n",
    "shipping/parcel.py": "class Parcel:\n    def __init__(self, weight):\n        self.weight = weight\n\n"
                          "    def postage(self):\n        return 4.5 + 0.8 * self.weight\n",
    "shipping/route.py": "def shortest_route(graph, start, goal):\n    frontier = [start]\n"
                         "    while frontier:\n        node = frontier.pop()\n        if node == goal:\n"
                         "            return node\n",
}


class RecordingStore(store.ChunkStore):
    """The real Chroma collection, remembering which searches reached it."""

    def __init__(self, inner: store.ChunkStore) -> None:
        self.__dict__.update(inner.__dict__)
        self.queries: list[bool] = []  # per Chroma query: restricted to chosen files

    def query(self, vector: Sequence[float], n: int, paths: Collection[str] | None = None) -> list[store.ChunkHit]:
        self.queries.append(paths is not None)
        return super().query(list(vector), n, paths)


def _index(tmp_path: Path, embedder: embeddings.Embedder, files: dict[str, str] = FILES) -> RepoIndex:
    repo = write_tree(tmp_path / "repo", files) if not (tmp_path / "repo").exists() else tmp_path / "repo"
    chunks = RecordingStore(store.ChunkStore(store.open_client(tmp_path / "index"),
                                             store.collection_name(str(repo), embedder.name)))
    index, _ = Indexer(repo, tmp_path / "index", embedder, chunks).update()
    return index


def test_nearest_is_by_cosine_best_first_with_ties_in_row_order() -> None:
    matrix = np.array([[1, 0], [0, 2], [3, 3], [0, 5], [-1, 0]], dtype=np.float32)
    assert [row for row, _ in nearest(matrix, [0.0, 1.0], 5)] == [1, 3, 2, 0, 4], "length does not count, ties by row"
    best = nearest(matrix, [2.0, 2.0], 2)
    assert [row for row, _ in best] == [2, 0] and best[0][1] == pytest.approx(1.0)  # then 0, 1 and 3 tie
    assert nearest(matrix, [1.0, 0.0], 0) == [] and nearest(np.zeros((0, 2), np.float32), [1.0, 0.0], 3) == []


def test_a_private_store_is_searched_exactly_with_chroma_s_answer(tmp_path: Path,
                                                                  embedder: embeddings.Embedder) -> None:
    index = _index(tmp_path, embedder)
    index.vectors.fill()
    assert index.search.count() == index.chunks.count() > 0
    for task in ("invoice total of the lines", "postage of a heavy parcel", "VAT rate for France"):
        vector = embedder.embed([task])[0]
        for paths in (None, ["billing/tax.py", "shipping/parcel.py"]):
            exact = index.search.query(vector, 5, paths)
            chroma = index.chunks.query(vector, 5, paths)
            assert [(h.path, h.start, h.symbol) for h in exact] == [(h.path, h.start, h.symbol) for h in chroma], task
            assert [h.score for h in exact] == pytest.approx([h.score for h in chroma], abs=1e-5)
    assert index.chunks.queries == [False, True] * 3, "only the comparison's own searches reached Chroma"


def _ledger(functions: int) -> str:
    """A module of many definitions, each its own chunk: a query embeds only the few most like it."""
    return "\n\n".join(f"def post_entry_{i}(ledger, amount):\n" + "".join(
        f"    ledger.account_{i}_{k} = ledger.balance_{k} + amount * {i * 31 + k}\n" for k in range(40))
        + "    return ledger\n" for i in range(functions))


def test_a_warm_query_with_vectors_never_imports_chromadb(tmp_path: Path) -> None:
    """The same question again on an index with vectors: the query is embedded (onnxruntime) and compared with the
    copy; chromadb is not imported — not even for the candidates whose other chunks were never embedded — and the
    answer is the cold run's."""
    repo = write_tree(tmp_path / "repo", {**FILES, "billing/ledger.py": _ledger(12)})
    args = ["--repo", str(repo), "--task", "post_entry_3 books the wrong amount to the ledger", "--context-only",
            "--json", "--index-path", str(tmp_path / "index")]
    cold = run_cli(args)
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout)["chunks_embedded"] > 0
    (db_path,) = (tmp_path / "index" / "repos").glob("*/index.sqlite")
    db = IndexDB(db_path, embeddings.LOCAL_INT8_NAME)
    assert "billing/ledger.py" in db.vectors.missing(), "a candidate the cold query embedded only in part"
    db.close()
    script = ("import sys\nfrom code_assistant import cli\n"
              f"code = cli.main({args!r})\n"
              "print(code, [m for m in ('chromadb', 'onnxruntime') if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    answer, status = done.stdout.strip().splitlines()
    assert json.loads(answer)["files"] == json.loads(cold.stdout)["files"]
    assert json.loads(answer)["chunks_embedded"] == 0
    assert status == "0 ['onnxruntime']", status


def test_a_large_store_s_whole_search_is_chroma_s_and_a_search_among_files_stays_exact(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    index = _index(tmp_path, embedder)
    index.vectors.fill()
    small = ChunkSearch(index.db.vectors, index.chunks, exact_limit=index.search.count() - 1)
    vector = embedder.embed(["postage of a heavy parcel"])[0]
    assert small.query(vector, 3)[0].path == "shipping/parcel.py"
    assert small.query(vector, 3, ["billing/tax.py", "shipping/parcel.py"])[0].path == "shipping/parcel.py"
    assert index.chunks.queries == [False], "the whole store through Chroma, the candidates from the copy"


def test_vectors_the_copy_lacks_leave_every_search_to_chroma(tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """Chunks counted as stored that were not copied here — found on a teammate's server, say — are only in Chroma:
    a copy that is not whole answers nothing."""
    index = _index(tmp_path, embedder)
    index.vectors.fill()
    ids = index.db.vectors.chunk_ids("billing/tax.py")
    index.db.vectors.set_stored("billing/tax.py", [*ids, "made-elsewhere"], len(ids) + 1, complete=True)
    assert index.search.count() == index.chunks.count()
    vector = embedder.embed(["VAT rate for France"])[0]
    assert index.search.query(vector, 2)[0].path == "billing/tax.py"
    assert index.search.query(vector, 2, ["billing/tax.py"])[0].path == "billing/tax.py"
    assert index.chunks.queries == [False, True]


def test_a_changed_file_s_old_vectors_leave_the_copy_with_its_old_version(tmp_path: Path,
                                                                          embedder: embeddings.Embedder) -> None:
    index = _index(tmp_path, embedder)
    index.vectors.fill()
    (tmp_path / "repo" / "billing/tax.py").write_text("def shipping_zone(country):\n    return ZONES[country]\n")
    index = _index(tmp_path, embedder)
    assert index.db.vectors.rows(["billing/tax.py"]) == [], "the old version's vectors are gone with it"
    vector = embedder.embed(["VAT rate for France"])[0]
    assert "billing/tax.py" not in {h.path for h in index.search.query(vector, 20)}
    index.vectors.fill()
    assert [r.symbol for r in index.db.vectors.rows(["billing/tax.py"])] == ["shipping_zone"]
    assert index.search.count() == index.chunks.count()


def test_an_edit_drops_its_old_vectors_without_opening_chroma_until_the_store_is_next_opened(
        tmp_path: Path, embedder: embeddings.Embedder) -> None:
    """The update after an edit forgets the old version's vectors: the copy at once, Chroma's when it is next opened
    (their ids wait in a list beside it), so a query that writes no vector still imports no chromadb."""
    repo = write_tree(tmp_path / "repo", FILES)
    args = ["--repo", str(repo), "--task", "VAT rate for France is wrong", "--context-only", "--json",
            "--index-path", str(tmp_path / "index")]
    assert run_cli(args).returncode == 0
    (db_path,) = (tmp_path / "index" / "repos").glob("*/index.sqlite")
    db = IndexDB(db_path, embeddings.LOCAL_INT8_NAME)
    old_ids = db.vectors.chunk_ids("billing/tax.py")
    db.close()
    assert old_ids, "the cold query stored the file's vectors"
    tax = repo / "billing" / "tax.py"
    tax.write_text(tax.read_text().replace("0.20", "0.21"))
    script = ("import sys\nfrom code_assistant import cli\n"
              f"code = cli.main({[*args, '--embed-budget', '0']!r})\n"
              "print(code, [m for m in ('chromadb', 'onnxruntime') if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    code, imported = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code == "0" and "chromadb" not in imported, done.stdout
    chunks = store.LazyChunkStore(tmp_path / "index", repo, embedder.name)
    assert set(chunks.deferred.read_text().split()) == set(old_ids)
    assert chunks.existing(old_ids) == set(), "deleted when the store opens, before it answers"
    assert not chunks.deferred.exists()
