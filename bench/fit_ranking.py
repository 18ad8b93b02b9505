"""Fit the ranking's fusion models on the stored localization records and validate them across the two dev sets.

    python -m bench.fit_ranking [--records /tmp/localize/records] [--write]

Reads the per-instance records of `python -m bench.localize` (the signals `rank()` gathered for each SWE-bench Lite
instance of the `dev` and `sympy` sets) and fits the fast model (no dense features) and the full model (with the
dense features the lazy flow would have under that fast model), numpy only (bench/fit.py).

The honest numbers are the cross-set ones: fit on dev, score on sympy; fit on sympy, score on dev; each next to BM25
and the old hand fusion on the same instances, per set and per repository. The L2 penalty is chosen inside the
training set (leave one repository out, or five folds of one repository), never on the set scored; so is the loss
(softmax or pairwise). --write stores the models fitted on the --ship-on sets together (default: both dev sets) in
code_assistant/retrieve/fusion_weights.json, data the package reads (retrieve/fusion.py).

    python -m bench.fit_ranking --records R --more-sets heldout heldout2 --loss pairwise --l2 30 \
        --without test_about --ship-on dev sympy heldout heldout2 [--write]   # the shipped weights (BENCHMARKS.md)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from bench import fit, rankers
from bench.localize_cli import golds_of
from bench.localize_report import KS, metrics, rank_of
from code_assistant.retrieve import fusion

L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
WEIGHTS_FILE = Path(__file__).resolve().parent.parent / "code_assistant" / "retrieve" / fusion.WEIGHTS_FILE


def load(folder: Path, names: tuple[str, ...] = ("dev", "sympy")) -> dict[str, list[dict]]:
    sets = {}
    for name in names:
        recs = [json.loads(p.read_text()) for p in sorted((folder / name).glob("*.json"))]
        sets[name] = [r for r in recs if "files" in r and "error" not in r]
    return sets


WITHOUT: set[str] = set()  # features left out of every fit (--without): what a feature is worth, cross-set
BALANCE = ["query"]  # --balance: "query" (every query weighs the same), "repo" or "set" (every one of those does)


def query_weights(records: list[dict]) -> list[float] | None:
    """None (equal) or, with --balance repo, 1 / (the record's repository's count): sympy's 77 instances weigh as
    much as marshmallow's 2; with --balance set, 1 / (its set's count): dev's 22 issues as much as 80 commits."""
    if BALANCE[0] == "query":
        return None
    unit = "repo" if BALANCE[0] == "repo" else "set"
    counts: dict[str, int] = {}
    for r in records:
        counts[r[unit]] = counts.get(r[unit], 0) + 1
    return [1.0 / counts[r[unit]] for r in records]


def fit_models(records: list[dict], l2: float, loss: str = "softmax",
               without: set[str] | None = None) -> tuple[fusion.Model, fusion.Model]:
    """The fast model, then the full one on the dense features the fast one's pick leaves; without the features
    `without` (default: --without's)."""
    left_out = WITHOUT if without is None else without
    share = query_weights(records)
    fast = fit.fit([rankers.query_for(r) for r in records], [n for n in fusion.FAST_NAMES if n not in left_out], l2,
                   loss, share)
    full = fit.fit([rankers.query_for(r, fast) for r in records], [n for n in fusion.NAMES if n not in left_out],
                   l2, loss, share)
    return fast, full


def ranks(records: list[dict], fast: fusion.Model, full: fusion.Model) -> list[int | None]:
    return [rank_of(golds_of(r), rankers.lazy_order(r, fast, full)) for r in records]


CHOOSE_BY = ["repo"]  # --choose-by: the unit held out when choosing loss and penalty inside the training data
RULE = ["best"]  # --rule: how a setting is chosen from the folds' scores (see choose())


def _folds(records: list[dict]) -> list[list[dict]]:
    """Held-out folds of the training data: whole sets (--choose-by set, when it holds two or more: the kind of task
    and repository changes between folds, as it does for a user), else whole repositories, else five slices."""
    sets_ = sorted({r["set"] for r in records})
    if CHOOSE_BY[0] == "set" and len(sets_) > 1:
        return [[r for r in records if r["set"] == name] for name in sets_]
    repos = sorted({r["repo"] for r in records})
    if len(repos) > 1:
        return [[r for r in records if r["repo"] == repo] for repo in repos]
    return [records[i::5] for i in range(5)]


def choose(records: list[dict], losses: tuple[str, ...]) -> tuple[str, float]:
    """The loss and grid penalty chosen on held-out folds of the training set itself (leave one repository out, or
    one whole set with --choose-by set; five folds of a single repository).

    --rule best: the best mean reciprocal rank (over all queries; with --balance repo or set, or --choose-by set, the
    mean of the folds' MRRs, every fold the same). --rule one-se: the one-standard-error rule - of the settings whose
    mean fold MRR is within one standard error (over folds) of the best one's, the most penalized: the simplest model
    the folds cannot tell apart from the best (BENCHMARKS-HISTORY.md, "A fourth set": what it picked, and why it
    was not shipped)."""
    fold_mrr: dict[tuple[str, float], list[float]] = {}
    pooled: dict[tuple[str, float], float] = {}
    for loss in losses:
        for l2 in L2_GRID:
            per_fold: list[list[int | None]] = []
            for fold in _folds(records):
                train = [r for r in records if r not in fold]
                per_fold.append(ranks(fold, *fit_models(train, l2, loss)))
            fold_mrr[(loss, l2)] = [metrics(got)["mrr"] for got in per_fold]
            pooled[(loss, l2)] = metrics([x for got in per_fold for x in got])["mrr"]
    if RULE[0] == "one-se":
        return one_standard_error(fold_mrr)
    if BALANCE[0] != "query" or CHOOSE_BY[0] == "set":
        return max(fold_mrr, key=lambda key: statistics.fmean(fold_mrr[key]))  # the first of equals, in grid order
    return max(pooled, key=lambda key: pooled[key])


def one_standard_error(fold_mrr: dict[tuple[str, float], list[float]]) -> tuple[str, float]:
    """Of the (loss, penalty) settings whose mean fold MRR is within one standard error (over folds) of the best
    mean, the most penalized (ties: the higher mean, then the first in order)."""
    mean = {key: statistics.fmean(v) for key, v in fold_mrr.items()}
    best = max(mean, key=lambda key: mean[key])
    folds = fold_mrr[best]
    floor = mean[best] - (statistics.stdev(folds) / math.sqrt(len(folds)) if len(folds) > 1 else 0.0)
    return max((key for key in mean if mean[key] >= floor), key=lambda key: (key[1], mean[key]))


def _cells(ranks_: list[int | None]) -> str:
    m = metrics(ranks_)
    return "/".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" · {m['mrr']:.3f}"


def cross_report(sets: dict[str, list[dict]], losses: tuple[str, ...]) -> list[str]:
    lines = ["Cells: acc@1/acc@3/acc@5 · MRR.", "",
             "| scored on | trained on (loss, L2) | n | BM25 whole files | old hand fusion | fitted fusion |",
             "|---|---|---|---|---|---|"]
    for test, train in (("sympy", "dev"), ("dev", "sympy")):
        loss, l2 = choose(sets[train], losses)
        fast, full = fit_models(sets[train], l2, loss)
        recs = sets[test]
        bm25 = [r["bm25"]["rank"] for r in recs]
        hand = [rank_of(golds_of(r), rankers.hand_fusion(r)) for r in recs]
        fitted = ranks(recs, fast, full)
        lines.append(f"| **{test}** | {train} ({loss}, {l2:g}) | {len(recs)} | {_cells(bm25)} | {_cells(hand)} | "
                     f"{_cells(fitted)} |")
        for repo in sorted({r["repo"] for r in recs}):
            idx = [i for i, r in enumerate(recs) if r["repo"] == repo]
            if len(idx) < len(recs):
                lines.append(f"| {test}: {repo} | {train} | {len(idx)} | {_cells([bm25[i] for i in idx])} | "
                             f"{_cells([hand[i] for i in idx])} | {_cells([fitted[i] for i in idx])} |")
    return lines


def leave_one_set_out(sets: dict[str, list[dict]], losses: tuple[str, ...],
                      fixed: tuple[str, float] | None = None, singles: bool = True) -> list[str]:
    """Each set scored by models fitted on every other set alone (with `singles`) and on all the others together
    (loss and penalty chosen inside the training sets, or `fixed`); a set of several languages also per language."""
    lines = ["| scored on | trained on (loss, L2) | n | BM25 whole files | fitted fusion |", "|---|---|---|---|---|"]
    for test in sets:
        others = [n for n in sets if n != test]
        groups = [*([n] for n in others if singles), *([others] if len(others) > 1 or not singles else [])]
        for train_names in groups:
            train = [r for n in train_names for r in sets[n]]
            loss, l2 = fixed or choose(train, losses)
            recs = sets[test]
            fitted = ranks(recs, *fit_models(train, l2, loss))
            bm25 = [r["bm25"]["rank"] for r in recs]
            lines.append(f"| {test} | {' + '.join(train_names)} ({loss}, {l2:g}) | {len(recs)} | "
                         f"{_cells(bm25)} | {_cells(fitted)} |")
            languages = sorted({r.get("language", "py") for r in recs})
            for language in languages if len(languages) > 1 else []:
                idx = [i for i, r in enumerate(recs) if r.get("language", "py") == language]
                lines.append(f"| {test}: {language} | (the same) | {len(idx)} | {_cells([bm25[i] for i in idx])} | "
                             f"{_cells([fitted[i] for i in idx])} |")
    return lines


def sensitivity(sets: dict[str, list[dict]], loss: str) -> list[str]:
    """Cross-set acc@1/acc@5 at every grid penalty: how much the choice inside the training set matters (shown, not
    used to choose anything)."""
    lines = [f"| scored on (trained on the other), {loss} | " + " | ".join(f"L2 {l2:g}" for l2 in L2_GRID) + " |",
             "|---|" + "---|" * len(L2_GRID)]
    for test, train in (("sympy", "dev"), ("dev", "sympy")):
        cells = []
        for l2 in L2_GRID:
            m = metrics(ranks(sets[test], *fit_models(sets[train], l2, loss)))
            cells.append(f"{m['acc@1']:.2f} / {m['acc@5']:.2f}")
        lines.append(f"| {test} | " + " | ".join(cells) + " |")
    return lines


def weights_table(fast: fusion.Model, full: fusion.Model) -> list[str]:
    lines = ["| feature | fast model | full model | meaning |", "|---|---|---|---|"]
    for name in fusion.NAMES:
        w_fast = f"{fast.weights[fast.names.index(name)]:+.2f}" if name in fast.names else ""
        w_full = f"{full.weights[full.names.index(name)]:+.2f}" if name in full.names else ""
        lines.append(f"| {name} | {w_fast} | {w_full} | {fusion.FEATURES[name]} |")
    return lines


def weights_json(fast: fusion.Model, full: fusion.Model, note: str) -> str:
    """The text of the package's fusion_weights.json: a line per list, six significant digits per number."""
    def spec(m: fusion.Model) -> str:
        rows = [f'      "names": {json.dumps(list(m.names))}']
        for key in ("weights", "means", "scales"):
            rows.append(f'      "{key}": {json.dumps([float(f"{v:.6g}") for v in getattr(m, key)])}')
        return "{\n" + ",\n".join(rows) + "\n    }"

    about = "The fusion models' constants, written by `python -m bench.fit_ranking --write`; do not edit by hand."
    return (f'{{\n  "about": {json.dumps(f"{about} {note}")},\n  "models": {{\n    "fast": {spec(fast)},\n'
            f'    "full": {spec(full)}\n  }}\n}}\n')


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, default=Path("/tmp/localize/records"))
    p.add_argument("--loss", choices=("softmax", "pairwise"), nargs="+", default=["softmax", "pairwise"],
                   help="losses to choose from, inside the training set")
    p.add_argument("--write", action="store_true",
                   help=f"write the models fitted on the --ship-on sets to the package's {fusion.WEIGHTS_FILE}")
    p.add_argument("--without", nargs="+", default=[], choices=fusion.NAMES, metavar="FEATURE",
                   help="leave these features out of every fit")
    p.add_argument("--more-sets", nargs="+", default=[], metavar="NAME",
                   help="further record folders (e.g. heldout from bench/mine_commits.py): print a table of each set "
                        "scored by models fitted on the others instead of the two-set report")
    p.add_argument("--no-singles", action="store_true",
                   help="with --more-sets: score each set by the models fitted on all the others only, not also on "
                        "each other set alone")
    p.add_argument("--balance", choices=("query", "repo", "set"), default="query",
                   help="weigh every training query the same (default), or every repository, or every set")
    p.add_argument("--ship-on", nargs="+", default=["dev", "sympy"], metavar="NAME",
                   help="the record folders the shipped models (--write) are fitted on (default: dev sympy)")
    p.add_argument("--choose-by", choices=("repo", "set"), default="repo",
                   help="choose loss and penalty leaving out one repository (default) or one whole set at a time")
    p.add_argument("--rule", choices=("best", "one-se"), default="best",
                   help="pick the setting with the best held-out MRR (default) or the most penalized one within one "
                        "standard error of it")
    p.add_argument("--l2", type=float, default=None,
                   help="fit the shipped models with this penalty and the first --loss instead of choosing them")
    args = p.parse_args(argv)
    WITHOUT.update(args.without)
    BALANCE[0] = args.balance
    CHOOSE_BY[0] = args.choose_by
    RULE[0] = args.rule
    fixed = (args.loss[0], args.l2) if args.l2 is not None else None
    names = tuple(dict.fromkeys(("dev", "sympy", *args.more_sets, *args.ship_on)))
    sets = load(args.records, names)
    print("records: " + ", ".join(f"{n} {len(sets[n])}" for n in names), file=sys.stderr)
    if args.more_sets:
        lines = leave_one_set_out(sets, tuple(args.loss), fixed, singles=not args.no_singles)
    else:
        lines = cross_report(sets, tuple(args.loss))
        for loss in args.loss:
            lines += ["", "Sensitivity to the penalty (acc@1 / acc@5):", "", *sensitivity(sets, loss)]
    train = [r for n in args.ship_on for r in sets[n]]
    loss, l2 = fixed or choose(train, tuple(args.loss))
    how = "given" if fixed else f"chosen by leave-one-{args.choose_by}-out inside them, rule {args.rule}"
    fast, full = fit_models(train, l2, loss)
    on = " + ".join(f"{len(sets[n])} {n}" for n in args.ship_on)
    lines += ["", (f"Shipped: fitted on {on} ({len(train)} instances; {loss} loss, L2 {l2:g}, every "
                   f"{args.balance} weighing the same, {how}); weights on standardized features:"), "",
              *weights_table(fast, full)]
    print("\n".join(lines))
    if args.write:
        note = (f"Fitted on {on} instances ({len(train)}), every {args.balance} weighing the same, {loss} loss, "
                f"L2 {l2:g} ({how}), " + (f"features left out: {', '.join(sorted(WITHOUT))}, " if WITHOUT else "")
                + f"{time.strftime('%Y-%m-%d')}. Cross-set numbers (the honest estimate) are in BENCHMARKS.md.")
        WEIGHTS_FILE.write_text(weights_json(fast, full, note), encoding="utf-8")
        print(f"wrote {WEIGHTS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
