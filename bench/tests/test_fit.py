"""Fitting the fusion (bench/fit.py, bench/fit_ranking.py): the fitting function learns from a synthetic feature set,
and the rule that chooses the penalty. The shipped weights are the product's: tests/test_shipped_weights.py."""
from __future__ import annotations

import numpy as np
import pytest

from bench import fit
from bench.fit_ranking import one_standard_error
from code_assistant.retrieve import fusion


def _synthetic(n_queries: int, seed: int) -> list[fit.Query]:
    """Queries of 30 candidates: the gold row is likelier to be named and to score high on BM25; test files never
    are gold; the other features are noise."""
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(n_queries):
        m = rng.random((30, len(fusion.NAMES)))
        m[:, fusion.NAMES.index("named")] = 0.0
        m[:, fusion.NAMES.index("test")] = rng.random(30) < 0.3
        gold = int(rng.integers(30))
        m[gold, fusion.NAMES.index("bm25_rr")] += 0.6
        m[gold, fusion.NAMES.index("named")] = float(rng.random() < 0.5)
        m[gold, fusion.NAMES.index("test")] = 0.0
        queries.append(fit.Query(m, gold))
    return queries


@pytest.mark.parametrize("loss", ["softmax", "pairwise"])
def test_fit_learns_the_informative_features_and_ranks_held_out_gold_first(loss: str) -> None:
    model = fit.fit(_synthetic(300, seed=1), fusion.NAMES, l2=1.0, loss=loss)  # ~40 features, most of them noise
    weight = dict(zip(model.names, model.weights))
    noise = max(abs(w) for n, w in weight.items() if n not in ("bm25_rr", "named", "test"))
    assert weight["bm25_rr"] > 2 * noise and weight["named"] > 2 * noise and weight["test"] < -noise
    held_out = fit.ranks(_synthetic(100, seed=2), model)
    assert sum(r == 1 for r in held_out) >= 60  # chance is 1 in 30


@pytest.mark.parametrize("loss", ["softmax", "pairwise"])
def test_a_fix_of_two_files_is_right_when_either_ranks_first_and_both_teach_the_fit(loss: str) -> None:
    """Two gold rows per query, each found by a different feature: the fit learns both features, and a query counts
    as right when its best ranked gold row is first."""
    rng = np.random.default_rng(4)
    queries = []
    for _ in range(120):
        m = rng.random((20, len(fusion.NAMES))) * 0.1
        first, second = rng.choice(20, size=2, replace=False)
        m[first, fusion.NAMES.index("bm25_rr")] += 1.0
        m[second, fusion.NAMES.index("symbols")] += 1.0
        queries.append(fit.Query(m, (int(first), int(second))))
    model = fit.fit(queries, fusion.NAMES, l2=1.0, loss=loss)
    weight = dict(zip(model.names, model.weights))
    assert weight["bm25_rr"] > 0.5 and weight["symbols"] > 0.5
    assert fit.ranks(queries[:10], model) == [1] * 10
    assert fit.ranks([fit.Query(queries[0].matrix, ())], model) == [None]  # no gold file among the candidates


def test_fit_refuses_data_without_a_usable_query() -> None:
    with pytest.raises(ValueError):
        fit.fit([fit.Query(np.zeros((1, len(fusion.NAMES))), 0)])


@pytest.mark.parametrize("loss", ["softmax", "pairwise"])
def test_a_query_of_weight_two_counts_as_that_query_twice(loss: str) -> None:
    queries = _synthetic(20, seed=3)
    weighted = fit.fit(queries, fusion.NAMES, l2=1.0, loss=loss, weights=[2.0] + [1.0] * 19)
    # the same penalty per query: l2 / (number of queries) is 1/20 in both fits
    doubled = fit.fit([queries[0], *queries], fusion.NAMES, l2=21 / 20, loss=loss)
    assert np.allclose(weighted.weights, doubled.weights, atol=1e-5)


def test_weights_move_the_fit_towards_the_queries_they_favour() -> None:
    """Two kinds of query disagree on which feature finds the gold row; weighing one kind up makes the model follow
    it (as --balance repo does for a small repository beside a big one)."""
    def kind(feature: str, n: int, seed: int) -> list[fit.Query]:
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            m = rng.random((20, len(fusion.NAMES)))
            gold = int(rng.integers(20))
            m[gold, fusion.NAMES.index(feature)] += 0.5
            out.append(fit.Query(m, gold))
        return out

    queries = kind("bm25_rel", 60, seed=4) + kind("symbols", 10, seed=5)
    share = dict(zip(fusion.NAMES, fit.fit(queries, l2=1.0).weights))
    even = dict(zip(fusion.NAMES, fit.fit(queries, l2=1.0, weights=[1 / 60] * 60 + [1 / 10] * 10).weights))
    assert share["bm25_rel"] > share["symbols"]
    assert even["symbols"] / even["bm25_rel"] > share["symbols"] / share["bm25_rel"]


@pytest.mark.parametrize("bad", [[1.0], [-1.0, 2.0], [0.0, 0.0]])
def test_fit_refuses_weights_that_do_not_fit_the_queries(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        fit.fit(_synthetic(2, seed=6), weights=bad)


def test_the_one_standard_error_rule_takes_the_most_penalized_setting_the_folds_cannot_tell_from_the_best() -> None:
    folds = {("softmax", 1.0): [0.80, 0.60, 0.70],   # the best mean, 0.70; its standard error 0.0577
             ("softmax", 100.0): [0.70, 0.62, 0.68],  # 0.667: within one standard error
             ("pairwise", 300.0): [0.66, 0.60, 0.64],  # 0.633: not
             ("pairwise", 30.0): [0.75, 0.60, 0.68]}   # 0.677: within, but less penalized than 100
    assert one_standard_error(folds) == ("softmax", 100.0)
    assert one_standard_error({("softmax", 1.0): [0.5], ("softmax", 10.0): [0.4]}) == ("softmax", 1.0)  # one fold
