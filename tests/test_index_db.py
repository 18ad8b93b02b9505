"""The index database, table by table: the connection and the writes that span tables, then files and layouts,
vectors, import edges, symbol names and BM25 postings."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import bm25s
import pytest

from code_assistant.index import index_db, lexical
from code_assistant.index.file_table import ImportRow, IndexedFile, SymbolRow
from code_assistant.index.index_db import Entry, IndexDB
from code_assistant.index.vector_table import VectorRow

DOCS = {
    "shop/cart.py": "class Cart:\n    def add_item(self, item):\n        self.items.append(item)\n",
    "shop/price.py": "def total_price(items):\n    return sum(i.price for i in items) # price price\n",
    "shop/tax.py": "TAX_RATE = 0.2\ndef with_tax(price):\n    return price * (1 + TAX_RATE)\n",
    "docs/empty.md": "",
    "README.md": "A shop: cart, price and tax.\n",
}


def _entry(path: str, text: str, symbols: list[list] | None = None, imports: list[list] | None = None) -> Entry:
    tokens = lexical.path_tokens(path) + lexical.tokenize(text)
    terms, length = lexical.term_counts(tokens)
    record = IndexedFile(path=path, hash=f"hash-{path}", size=len(text), mtime_ns=1, language="python",
                        parser="tree-sitter", tokens=10, symbols=symbols or [], imports=imports or [])
    return Entry(record, terms, length)


def _vector(path: str, chunk_id: str, symbol: str = "f") -> VectorRow:
    return VectorRow(chunk_id=chunk_id, path=path, start=1, end=2, symbol=symbol, kind="function",
                     vector=bytes([len(chunk_id)]) * 8)


@pytest.fixture
def db(tmp_path: Path) -> IndexDB:
    db = IndexDB(tmp_path / "index.sqlite", "embedder-a")
    for path, text in DOCS.items():
        db.put(_entry(path, text))
    db.commit()
    return db


def _oracle(docs: dict[str, str], query: list[str]) -> dict[str, float]:
    """bm25s (the library this replaces) over the same tokens: the scores must not change."""
    paths = sorted(docs)
    retriever = bm25s.BM25()
    retriever.index([lexical.path_tokens(p) + lexical.tokenize(docs[p]) or [""] for p in paths], show_progress=False)
    known = [t for t in query if t in retriever.vocab_dict]
    scores = retriever.get_scores(known) if known else [0.0] * len(paths)
    return {p: float(s) for p, s in zip(paths, scores) if s > 0}


# ----- the connection --------------------------------------------------------------------------------------------
def test_another_embedder_or_format_starts_afresh(db: IndexDB, tmp_path: Path) -> None:
    db.close()
    assert IndexDB(tmp_path / "index.sqlite", "embedder-a").files.paths() == sorted(DOCS)
    assert IndexDB(tmp_path / "index.sqlite", "embedder-b").files.is_empty()


def test_a_damaged_database_is_rebuilt_from_scratch(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    path.write_bytes(b"not a database, " * 512)
    db = IndexDB(path, "embedder-a")
    assert db.files.is_empty()
    db.put(_entry("a.py", "x = 1\n"))
    db.commit()
    assert db.files.paths() == ["a.py"]


def test_a_database_busy_beyond_the_timeout_is_a_clear_error(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "index.sqlite"
    IndexDB(path, "embedder-a").close()
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(index_db, "LOCK_TIMEOUT_S", 0.1)
    try:
        with pytest.raises(index_db.IndexDBError, match="cannot be opened: database is locked"):
            IndexDB(path, "embedder-a")
        assert path.stat().st_size > 0  # left alone: nothing is deleted for being busy
    finally:
        holder.rollback()
        holder.close()


def test_a_new_version_of_a_file_drops_its_layout_and_vectors_but_keeps_its_edges(db: IndexDB) -> None:
    db.files.set_layout("shop/tax.py", "hash-shop/tax.py", [1, [1, 3]])
    db.vectors.put_rows([_vector("shop/tax.py", "t1")])
    db.vectors.set_stored("shop/tax.py", ["t1"], 1, complete=True)
    db.edges.put({"shop/price.py": ["shop/tax.py"]}, replace_all=True)
    db.put(_entry("shop/tax.py", "def vat(amount):\n    return amount\n", symbols=[["vat", "function", 1, 2, ""]]))
    assert db.files.layout("shop/tax.py", "hash-shop/tax.py") is None
    assert db.vectors.rows(["shop/tax.py"]) == [] and db.vectors.chunk_ids("shop/tax.py") == []
    assert db.vectors.missing(["shop/tax.py"]) == ["shop/tax.py"]
    assert db.edges.graph() == {"shop/price.py": ["shop/tax.py"]}  # re-linked by the indexer, not here
    assert db.symbols.defining({"vat", "with_tax"}) == {"vat": {"shop/tax.py"}}


def test_a_removed_file_leaves_every_table_before_its_row_id_is_reused(db: IndexDB) -> None:
    newest = "README.md"  # the highest row id: SQLite hands it to the next file stored
    db.put(_entry(newest, DOCS[newest], symbols=[["Shop", "class", 1, 1, ""]]))
    db.vectors.put_rows([_vector(newest, "r1")])
    db.edges.put({newest: ["shop/price.py"], "shop/price.py": [newest]}, replace_all=True)
    db.remove([newest, "not/indexed.py"])
    db.put(_entry("new.py", ""))
    db.commit()
    assert newest not in db.files.stamps()
    assert db.symbols.defining({"shop"}) == {}
    assert db.postings.files_with({"readme"}) == {}
    assert db.vectors.rows() == [] and db.vectors.copy_counts() == (0, 0)
    assert db.edges.graph() == {}


def test_a_skipped_file_is_remembered_by_stat_and_found_by_no_query(db: IndexDB) -> None:
    db.skip("shop/price.py", 99, 7)
    db.commit()
    assert db.files.stamps()["shop/price.py"] == (99, 7, True)
    assert "shop/price.py" not in db.files.paths()
    assert db.files.records(["shop/price.py"]) == {}
    assert "shop/price.py" not in db.postings.bm25(["price"])
    assert "shop/price.py" not in db.vectors.missing()


# ----- files and layouts -----------------------------------------------------------------------------------------
def test_a_record_reads_back_as_it_was_stored(db: IndexDB) -> None:
    db.put(_entry("shop/cart.py", DOCS["shop/cart.py"], symbols=[["Cart", "class", 1, 3, "class Cart:"]],
                  imports=[["shop.price", ["total_price"], 0]]))
    record = db.files.records(["shop/cart.py", "missing.py"])["shop/cart.py"]
    assert record.symbols == [SymbolRow("Cart", "class", 1, 3, "class Cart:")]
    assert record.imports == [ImportRow("shop.price", ["total_price"], 0)]
    assert (record.hash, record.size, record.language, record.tokens, record.chunks) == \
        ("hash-shop/cart.py", len(DOCS["shop/cart.py"]), "python", 10, 0)
    assert db.files.hashes(["shop/cart.py", "shop/tax.py"]) == {"shop/cart.py": "hash-shop/cart.py",
                                                                "shop/tax.py": "hash-shop/tax.py"}
    assert list(db.files.import_statements()) == [("shop/cart.py", "python",
                                                   [ImportRow("shop.price", ["total_price"], 0)])]
    assert list(db.files.import_statements(["shop/tax.py"])) == []
    assert db.files.symbol_count() == 1


def test_a_touch_changes_the_stat_only(db: IndexDB) -> None:
    db.files.touch("shop/tax.py", 5, 42)
    assert db.files.stamps()["shop/tax.py"] == (5, 42, False)
    assert db.files.records(["shop/tax.py"])["shop/tax.py"].hash == "hash-shop/tax.py"


def test_a_layout_belongs_to_one_version_of_an_indexed_file(db: IndexDB) -> None:
    db.files.set_layout("shop/tax.py", "hash-shop/tax.py", [1, [1, 3, "with_tax"]])
    db.files.set_layout("not/indexed.py", "h", [1])
    assert db.files.layout("shop/tax.py", "hash-shop/tax.py") == [1, [1, 3, "with_tax"]]
    assert db.files.layout("shop/tax.py", "another-version") is None
    assert db.files.layout("not/indexed.py", "h") is None


# ----- vectors -----------------------------------------------------------------------------------------------------
def test_stored_chunks_say_which_files_still_lack_vectors(db: IndexDB) -> None:
    assert db.vectors.counts() == (0, len(DOCS))
    db.vectors.set_stored("shop/tax.py", ["t1", "t2"], 2, complete=True)
    db.vectors.set_stored("shop/cart.py", ["c1"], 3, complete=False)
    assert db.vectors.chunk_ids("shop/cart.py") == ["c1"]
    assert db.vectors.counts() == (1, len(DOCS))
    assert db.vectors.missing(["shop/tax.py", "shop/cart.py", "README.md"]) == ["shop/cart.py", "README.md"]
    assert "shop/tax.py" not in db.vectors.missing()
    assert db.files.records(["shop/cart.py"])["shop/cart.py"].chunks == 3


def test_the_copy_keeps_vectors_of_indexed_files_in_chunk_id_order(db: IndexDB) -> None:
    db.vectors.put_rows([_vector("shop/tax.py", "t2"), _vector("gone.py", "g1"), _vector("shop/cart.py", "c1"),
                         _vector("shop/tax.py", "t1", symbol="with_tax")])
    assert [r.chunk_id for r in db.vectors.rows()] == ["c1", "t1", "t2"]
    assert db.vectors.rows(["shop/tax.py"])[0] == _vector("shop/tax.py", "t1", symbol="with_tax")
    db.vectors.set_stored("shop/tax.py", ["t1", "t2", "made-elsewhere"], 3, complete=True)
    assert db.vectors.copy_counts() == (3, 3)  # c1 is copied but not claimed: a sum, not a match per file


def test_every_change_to_the_vectors_is_counted_for_readers_that_cache_them(db: IndexDB) -> None:
    seen = [db.vectors.writes]
    db.vectors.put_rows([_vector("shop/tax.py", "t1")])
    seen.append(db.vectors.writes)
    db.vectors.set_stored("shop/tax.py", ["t1"], 1, complete=True)
    seen.append(db.vectors.writes)
    db.put(_entry("shop/tax.py", "x = 1\n"))
    seen.append(db.vectors.writes)
    db.remove(["shop/tax.py"])
    seen.append(db.vectors.writes)
    db.clear()
    seen.append(db.vectors.writes)
    assert seen == sorted(set(seen)), "each write moved the counter on"


# ----- import edges ------------------------------------------------------------------------------------------------
def test_edges_are_replaced_per_file_and_follow_removals(db: IndexDB) -> None:
    db.edges.put({"shop/cart.py": ["shop/price.py"], "shop/price.py": ["shop/tax.py"]}, replace_all=True)
    assert db.edges.neighbours("shop/price.py") == (["shop/tax.py"], ["shop/cart.py"])
    db.edges.put({"shop/price.py": []}, replace_all=False)
    assert db.edges.graph() == {"shop/cart.py": ["shop/price.py"]}
    db.remove(["shop/price.py"])
    assert db.edges.graph() == {}


def test_importer_and_import_counts_count_the_edges_into_and_out_of_each_path(db: IndexDB) -> None:
    db.edges.put({"shop/cart.py": ["shop/tax.py", "shop/price.py", "not/indexed.py"], "shop/price.py": ["shop/tax.py"]},
                 replace_all=True)
    assert db.edges.importer_counts(["shop/tax.py", "shop/price.py", "shop/cart.py"]) == {"shop/tax.py": 2,
                                                                                          "shop/price.py": 1}
    assert db.edges.import_counts(["shop/tax.py", "shop/price.py", "shop/cart.py"]) == {"shop/cart.py": 2,
                                                                                        "shop/price.py": 1}
    db.edges.put({"README.md": ["shop/cart.py"]}, replace_all=True)
    assert db.edges.graph() == {"README.md": ["shop/cart.py"]}


# ----- symbol names ------------------------------------------------------------------------------------------------
def test_symbols_are_found_by_name_and_by_qualified_name(db: IndexDB) -> None:
    db.put(_entry("shop/cart.py", DOCS["shop/cart.py"], symbols=[["Cart", "class", 1, 3, ""],
                                                                ["Cart.add_item", "method", 2, 3, ""]]))
    db.commit()
    assert db.symbols.defining({"add_item", "Cart.Add_Item", "missing"}) == {"add_item": {"shop/cart.py"},
                                                                              "cart.add_item": {"shop/cart.py"}}
    assert db.files.symbol_count() == 2
    db.remove(["shop/cart.py"])
    assert db.symbols.defining({"add_item"}) == {}


# ----- BM25 postings -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["total price of the items", "price price tax", "add_item to the cart", "nothing"])
def test_bm25_scores_match_bm25s(db: IndexDB, query: str) -> None:
    tokens = lexical.tokenize(query)
    assert db.postings.bm25(tokens) == pytest.approx(_oracle(DOCS, tokens), rel=1e-5)


def test_replacing_and_removing_a_file_updates_its_postings_only(db: IndexDB) -> None:
    db.put(_entry("shop/tax.py", "def vat(amount):\n    return amount\n"))
    db.remove(["shop/cart.py"])
    db.commit()
    docs = {**{p: t for p, t in DOCS.items() if p != "shop/cart.py"},
            "shop/tax.py": "def vat(amount):\n    return amount\n"}
    for query in ("tax rate", "vat amount", "cart item price"):
        tokens = lexical.tokenize(query)
        assert db.postings.bm25(tokens) == pytest.approx(_oracle(docs, tokens), rel=1e-5)
    assert "shop/cart.py" not in db.files.paths()


def test_a_terms_rarity_and_the_files_holding_it(db: IndexDB) -> None:
    assert db.postings.doc_freq({"price", "cart", "nowhere"}) == ({"price": 3, "cart": 2}, len(DOCS))
    assert db.postings.files_with({"tax", "nowhere"}) == {"tax": {"shop/tax.py", "README.md"}}


def test_a_cleared_database_forgets_the_term_ids_it_cached(db: IndexDB) -> None:
    db.clear()
    db.put(_entry("a.py", "price = 1\n"))
    db.put(_entry("b.py", "price = 2\n"))
    assert db.postings.files_with({"price"}) == {"price": {"a.py", "b.py"}}
