"""The localization bench's report: metrics over ranks, and the per-repository table of every retriever."""
from __future__ import annotations

from bench.localize_report import metrics, per_repository


def test_metrics_count_an_unranked_gold_file_as_a_miss() -> None:
    m = metrics([1, 3, None, 6])
    assert (m["acc@1"], m["acc@3"], m["acc@5"]) == (0.25, 0.5, 0.5)
    assert abs(m["mrr"] - (1 + 1 / 3 + 1 / 6) / 4) < 1e-9


def test_per_repository_has_a_row_per_repository_and_retriever() -> None:
    done = [{"repo": "a/x", "bm25": 1, "run": 2}, {"repo": "a/x", "bm25": None, "run": 1},
            {"repo": "b/y", "bm25": 4, "run": 1}]
    table = {"BM25, whole files": lambda r: r["bm25"], "signal alone: dense": lambda r: r["run"],
             "assistant as run": lambda r: r["run"]}
    rows = per_repository(done, table, replayable=True)
    assert len(rows) == 2 + 2 * 3
    assert "| a/x | BM25, whole files | 2 | 0.50 | 0.50 | 0.50 | 0.500 |" in rows
    assert "| b/y | assistant as run | 1 | 1.00 | 1.00 | 1.00 | 1.000 |" in rows
    only_run = per_repository(done, table, replayable=False)  # a --cli run stored no signals to replay
    assert not any("signal alone" in row for row in only_run) and len(only_run) == 2 + 2 * 2
