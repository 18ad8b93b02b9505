"""Where the dense signal changes the answer: for every set and language, how often the lazy fill changes the
ranking's top 1 and top 5, the accuracy without it and with it, and what skipping it when the fast ranking is sure
of its first file (a large lead over the second) would cost.

    python -m bench.dense_effect --records R [--sets dev sympy heldout heldout2 multilang mined_ml] [--l2 30]

Cross-set, as bench.fit_ranking's tables: each set is scored by models fitted on all the others (pairwise loss, the
given L2, test_about left out, as shipped). The sure-enough lead of a skip policy is fitted the same way: the lead
that the given share of the training queries' fast rankings exceed. Replayed from the stored records
(bench/rankers.lazy_order), so "with dense" is what the assistant ranks on a cold index within its embed budget.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench import fit_ranking, rankers
from bench.localize_cli import golds_of
from bench.localize_report import metrics, rank_of

SETS = ("dev", "sympy", "heldout", "heldout2", "multilang", "mined_ml")
SKIP_SHARES = (0.25, 0.5)  # skip policies measured: this share of the training queries, the surest ones, embed nothing


def lead(ordered: list[tuple[str, float]]) -> float:
    """How far the first file's score is ahead of the second's (infinite with one candidate)."""
    return ordered[0][1] - ordered[1][1] if len(ordered) > 1 else float("inf")


def _cell(ranks: list[int | None]) -> str:
    m = metrics(ranks)
    return f"{m['acc@1']:.2f}/{m['acc@3']:.2f}/{m['acc@5']:.2f}"


def measure(sets: dict[str, list[dict]], l2: float) -> list[str]:
    """The markdown table: one row per set and, for sets of several languages, per language."""
    head = " | ".join(f"skip the surest {share:.0%}: acc@1/3/5 (embedded)" for share in SKIP_SHARES)
    lines = [f"| set | n | top 1 changed | top 5 changed | fast only | with dense | {head} |",
             "|---|---|---|---|---|---|" + "---|" * len(SKIP_SHARES)]
    for test, records in sets.items():
        train = [r for name, rs in sets.items() if name != test for r in rs]
        fast, full = fit_ranking.fit_models(train, l2, "pairwise")
        limits = {share: float(np.quantile([lead(rankers.fast_order(r, fast)) for r in train], 1.0 - share))
                  for share in SKIP_SHARES}
        rows = []
        for r in records:
            first, lazy, golds = rankers.fast_order(r, fast), rankers.lazy_order(r, fast, full), golds_of(r)
            f5 = [p for p, _ in first[:5]]
            rows.append({"language": r.get("language", "python"), "top1": f5[:1] != lazy[:1],
                         "top5": set(f5) != set(lazy[:5]), "fast": rank_of(golds, [p for p, _ in first]),
                         "dense": rank_of(golds, lazy), "lead": lead(first)})
        groups = {test: rows}
        languages = sorted({row["language"] for row in rows})
        if len(languages) > 1:
            groups |= {f"{test}: {lang}": [row for row in rows if row["language"] == lang] for lang in languages}
        for label, group in groups.items():
            n = len(group)
            cells = []
            for limit in limits.values():
                skipped = [row["lead"] > limit for row in group]
                ranks = [row["fast"] if skip else row["dense"] for row, skip in zip(group, skipped)]
                cells.append(f"{_cell(ranks)} ({1 - sum(skipped) / n:.2f})")
            lines.append(f"| {label} | {n} | {sum(row['top1'] for row in group) / n:.2f} | "
                         f"{sum(row['top5'] for row in group) / n:.2f} | {_cell([row['fast'] for row in group])} | "
                         f"{_cell([row['dense'] for row in group])} | {' | '.join(cells)} |")
        print(f"{test}: done", file=sys.stderr)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, required=True, help="record folders by set (bench.localize/regather)")
    p.add_argument("--sets", nargs="+", default=list(SETS))
    p.add_argument("--l2", type=float, default=30.0)
    args = p.parse_args(argv)
    sets = fit_ranking.load(args.records, tuple(args.sets))
    fit_ranking.WITHOUT.update({"test_about"})
    print("\n".join(measure(sets, args.l2)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
