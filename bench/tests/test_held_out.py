"""bench/held_out.py's folds: every instance is scored by weights fitted without its repository, so a fold keeps each
repository whole."""
from __future__ import annotations

from bench.held_out import folds


def test_folds_keep_every_repository_whole_and_balance_their_sizes() -> None:
    records = [{"repo": repo, "set": "s", "instance_id": f"{repo}-{i}"}
               for repo, n in (("a/big", 9), ("b/mid", 5), ("c/mid", 4), ("d/one", 1), ("e/one", 1)) for i in range(n)]
    three = folds(records, 3)
    assert sorted(len(f) for f in three) == [5, 6, 9]
    assert all(len({r["repo"] for r in f} & {r["repo"] for r in g}) == 0 for f in three for g in three if f is not g)
    assert sorted(len(f) for f in folds(records, 0)) == [1, 1, 4, 5, 9], "0: one repository per fold"
