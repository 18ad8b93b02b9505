"""Fitting the fusion model, the ranking's training code (the bench and the tests use it; the product only reads the
weights bench/fit_ranking.py writes to code_assistant/retrieve/fusion_weights.json): from per-query candidate feature
matrices and the file that was right, the weights of a linear scorer (numpy only, Newton's method on a convex loss
with an L2 penalty on standardized features).

Two losses: `softmax` (the right file against all candidates of its query at once, a conditional logit) and
`pairwise` (logistic on the right file minus each other candidate). Every query weighs the same unless the caller
says otherwise (`weights`: e.g. every repository the same, so that one big repository's many queries do not teach the
model that repository alone)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from code_assistant.retrieve.fusion import NAMES, Model

MIN_SCALE = 1e-6  # a feature constant over the training set keeps scale 1 and, by the penalty, weight 0
NEWTON_STEPS = 50


class Query(NamedTuple):
    """One training query: its candidates' features (columns: fusion.NAMES) and the row of the right file, or the
    rows of the right files when a fix changes several (any of them ranked first is right; -1 or (): none is a
    candidate)."""

    matrix: np.ndarray
    gold: int | tuple[int, ...]

    @property
    def golds(self) -> list[int]:
        """The gold rows that are candidates."""
        rows = [self.gold] if isinstance(self.gold, int) else list(self.gold)
        return [g for g in rows if 0 <= g < len(self.matrix)]


def fit(queries: Sequence[Query], names: Sequence[str] = NAMES, l2: float = 1.0, loss: str = "softmax",
        weights: Sequence[float] | None = None) -> Model:
    """The model over features `names` that best ranks each query's gold row first: minimizes the (weighted) mean
    loss plus l2 / 2 * |coef|^2 (the model's weights, on standardized features). `weights`, one per
    query, are scaled to mean 1."""
    if weights is not None and len(weights) != len(queries):
        raise ValueError(f"{len(weights)} weights for {len(queries)} queries")
    keep = [i for i, q in enumerate(queries) if q.golds and len(q.matrix) > len(q.golds)]
    if not keep:
        raise ValueError("no query with a gold candidate and at least one other candidate to fit on")
    usable = [queries[i] for i in keep]
    share = np.ones(len(usable)) if weights is None else np.array([float(weights[i]) for i in keep])
    if (share < 0).any() or share.sum() <= 0:
        raise ValueError("query weights must be non-negative and not all zero")
    share = share / share.mean()
    columns = [NAMES.index(n) for n in names]
    pooled = np.vstack([q.matrix[:, columns] for q in usable])
    row_share = np.concatenate([np.full(len(q.matrix), w) for q, w in zip(usable, share)])
    means = np.average(pooled, axis=0, weights=row_share)  # a query of weight 2 counts twice here too
    scales = np.sqrt(np.average((pooled - means) ** 2, axis=0, weights=row_share))
    scales[scales < MIN_SCALE] = 1.0
    standardized = [Query((q.matrix[:, columns] - means) / scales, tuple(q.golds)) for q in usable]
    step = (_Softmax if loss == "softmax" else _Pairwise)(standardized, share)
    coef = np.zeros(len(columns))
    penalty = l2 / len(usable)  # the loss is a mean over queries: l2 weighs like l2 queries' worth of loss in all
    for _ in range(NEWTON_STEPS):
        value, grad, hess = step(coef)
        value += 0.5 * penalty * coef @ coef
        grad = grad + penalty * coef
        hess = hess + penalty * np.eye(len(coef))
        direction = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-4:  # backtracking: the loss must fall
            trial = coef - t * direction
            if step(trial, value_only=True)[0] + 0.5 * penalty * trial @ trial <= value:
                break
            t /= 2
        coef = coef - t * direction
        if np.abs(t * direction).max() < 1e-7:
            break
    return Model(tuple(names), tuple(coef.tolist()), tuple(means.tolist()), tuple(scales.tolist()))


class _Softmax:
    """Weighted mean over queries of -log softmax(score)[gold] (the mean over its gold rows when a query has
    several: every file of the fix ranked high, and the loss stays convex), its gradient and Hessian; all queries'
    rows stacked, so a step is a few matrix products."""

    def __init__(self, queries: Sequence[Query], share: np.ndarray) -> None:
        self.x = np.vstack([q.matrix for q in queries])
        sizes = np.array([len(q.matrix) for q in queries])
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.query_of_row = np.repeat(np.arange(len(queries)), sizes)
        self.share = share / len(queries)
        gold_weight = np.zeros(len(self.x))  # each query's gold rows share its weight
        for start, q, w in zip(self.starts, queries, self.share):
            gold_weight[start + np.array(q.golds)] = w / len(q.golds)
        self.gold_weight = gold_weight

    def __call__(self, w: np.ndarray, value_only: bool = False) -> tuple[float, np.ndarray, np.ndarray]:
        s = self.x @ w
        top = np.maximum.reduceat(s, self.starts)
        e = np.exp(s - top[self.query_of_row])
        total = np.add.reduceat(e, self.starts)
        value = float(self.share @ (top + np.log(total)) - self.gold_weight @ s)
        if value_only:
            return value, w, w
        p = e / total[self.query_of_row] * self.share[self.query_of_row]  # each row's probability, weighted
        mean = np.add.reduceat(self.x * (e / total[self.query_of_row])[:, None], self.starts)  # per query
        grad = p @ self.x - self.gold_weight @ self.x
        hess = (self.x * p[:, None]).T @ self.x - (mean * self.share[:, None]).T @ mean
        return value, grad, hess


class _Pairwise:
    """Weighted mean over queries of the mean over (gold, other candidate) pairs of log(1 + exp(-(s_gold -
    s_other))), its gradient and Hessian; the pairs' differences are made once and stacked."""

    def __init__(self, queries: Sequence[Query], share: np.ndarray) -> None:
        diffs, weights = [], []
        for q, q_share in zip(queries, share):
            others = np.delete(q.matrix, q.golds, axis=0)
            d = np.vstack([q.matrix[g] - others for g in q.golds])
            diffs.append(d)
            weights.append(np.full(len(d), q_share / len(d) / len(queries)))
        self.d = np.vstack(diffs)
        self.weight = np.concatenate(weights)

    def __call__(self, w: np.ndarray, value_only: bool = False) -> tuple[float, np.ndarray, np.ndarray]:
        margin = self.d @ w
        value = float(self.weight @ np.logaddexp(0.0, -margin))
        if value_only:
            return value, w, w
        p = 1.0 / (1.0 + np.exp(margin))  # derivative of the loss in -margin
        grad = -(self.weight * p) @ self.d
        hess = (self.d * (self.weight * p * (1 - p))[:, None]).T @ self.d
        return value, grad, hess


def ranks(queries: Sequence[Query], model: Model) -> list[int | None]:
    """1-based rank of each query's best ranked gold row under the model (None: no gold file is a candidate)."""
    out: list[int | None] = []
    for q in queries:
        if not q.golds:
            out.append(None)
            continue
        s = model.score(q.matrix)
        out.append(int((s > s[q.golds].max()).sum()) + 1)
    return out
