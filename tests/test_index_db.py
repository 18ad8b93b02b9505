"""The index database: per-file rows for records, symbol names, import edges and BM25 postings."""
from __future__ import annotations

from pathlib import Path

import bm25s
import pytest

from code_assistant.index import lexical
from code_assistant.index.index_db import Entry, FileRecord, IndexDB

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
    record = FileRecord(path, f"hash-{path}", len(text), 1, "python", "tree-sitter", 10, symbols or [], imports or [])
    return Entry(record, terms, length)


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


@pytest.mark.parametrize("query", ["total price of the items", "price price tax", "add_item to the cart", "nothing"])
def test_bm25_scores_match_bm25s(db: IndexDB, query: str) -> None:
    tokens = lexical.tokenize(query)
    assert db.bm25(tokens) == pytest.approx(_oracle(DOCS, tokens), rel=1e-5)


def test_replacing_and_removing_a_file_updates_its_postings_only(db: IndexDB) -> None:
    db.put(_entry("shop/tax.py", "def vat(amount):\n    return amount\n"))
    db.remove(["shop/cart.py"])
    db.commit()
    docs = {**{p: t for p, t in DOCS.items() if p != "shop/cart.py"}, "shop/tax.py": "def vat(amount):\n    return amount\n"}
    for query in ("tax rate", "vat amount", "cart item price"):
        tokens = lexical.tokenize(query)
        assert db.bm25(tokens) == pytest.approx(_oracle(docs, tokens), rel=1e-5)
    assert "shop/cart.py" not in db.paths()


def test_symbols_are_found_by_name_and_by_qualified_name(db: IndexDB) -> None:
    db.put(_entry("shop/cart.py", DOCS["shop/cart.py"], symbols=[["Cart", "class", 1, 3, ""],
                                                                ["Cart.add_item", "method", 2, 3, ""]]))
    db.commit()
    assert db.defining({"add_item", "Cart.Add_Item", "missing"}) == {"add_item": {"shop/cart.py"},
                                                                      "cart.add_item": {"shop/cart.py"}}
    assert db.count_symbols() == 2
    db.remove(["shop/cart.py"])
    assert db.defining({"add_item"}) == {}


def test_edges_are_replaced_per_file_and_follow_removals(db: IndexDB) -> None:
    db.set_edges({"shop/cart.py": ["shop/price.py"], "shop/price.py": ["shop/tax.py"]}, replace_all=True)
    assert db.neighbours("shop/price.py") == (["shop/tax.py"], ["shop/cart.py"])
    db.set_edges({"shop/price.py": []}, replace_all=False)
    assert db.graph() == {"shop/cart.py": ["shop/price.py"]}
    db.remove(["shop/price.py"])
    assert db.graph() == {}


def test_skipped_files_are_remembered_by_stat_but_not_listed(db: IndexDB) -> None:
    db.skip("shop/price.py", 99, 7)
    db.commit()
    assert db.stats()["shop/price.py"] == (99, 7, True)
    assert "shop/price.py" not in db.paths()
    assert db.records(["shop/price.py"]) == {}
    assert "shop/price.py" not in db.bm25(["price"])


def test_another_embedder_or_format_starts_afresh(db: IndexDB, tmp_path: Path) -> None:
    db.close()
    assert IndexDB(tmp_path / "index.sqlite", "embedder-a").paths() == sorted(DOCS)
    assert IndexDB(tmp_path / "index.sqlite", "embedder-b").is_empty()


def test_a_damaged_database_is_rebuilt_from_scratch(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    path.write_bytes(b"not a database, " * 512)
    db = IndexDB(path, "embedder-a")
    assert db.is_empty()
    db.put(_entry("a.py", "x = 1\n"))
    db.commit()
    assert db.paths() == ["a.py"]


def test_a_database_busy_beyond_the_timeout_is_a_clear_error(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from code_assistant.index import index_db

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
