"""Ranking as a user meets it (issue 37): every instance scored by weights fitted without its repository - grouped
folds by repository over all the sets given together - beside the weights fitted on everything (as fitted), BM25 and
the assistant as run; per set and per language. With --ablate, what each named feature is worth held out: the same
folds fitted without all of them, then with each one alone, as deltas per language.

    python -m bench.held_out --records G --sets dev sympy heldout heldout2 multilang mined_ml mined37
    python -m bench.held_out --records G --sets ... --ablate role leaf core cover   # each prior alone, held out

The recipe is the shipped one unless told (pairwise loss, L2 30, `test_about` left out: BENCHMARKS-HISTORY.md, "A
fourth set"); --folds 0 leaves out one repository at a time, --folds K (default 10) puts whole repositories into K
folds of about equal size (the largest first), which is ten fits instead of one per repository and leaves nearly as
much to fit on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from bench import fit_ranking, rankers
from bench.localize_cli import golds_of
from bench.localize_report import KS, metrics, rank_of, tests_shown
from code_assistant.retrieve import fusion

Key = tuple[str, str]  # (set, instance id)
RECIPE = ("pairwise", 30.0, frozenset({"test_about"}))  # loss, L2, features left out: the shipped recipe


def key(record: dict) -> Key:
    return record["set"], record["instance_id"]


def folds(records: list[dict], k: int) -> list[list[dict]]:
    """Whole repositories per fold: one each (k = 0), or k folds filled largest repository first, each into the
    fold with the fewest instances so far (ties: the first)."""
    by_repo: dict[str, list[dict]] = {}
    for r in records:
        by_repo.setdefault(r["repo"], []).append(r)
    if k <= 0 or k >= len(by_repo):
        return [by_repo[repo] for repo in sorted(by_repo)]
    out: list[list[dict]] = [[] for _ in range(k)]
    for repo in sorted(by_repo, key=lambda name: (-len(by_repo[name]), name)):
        min(out, key=len).extend(by_repo[repo])
    return out


def held_out_ranks(records: list[dict], k: int, loss: str, l2: float, without: set[str]) -> dict[Key, int | None]:
    """Each record's gold rank under the models fitted on the folds its repository is not in."""
    ranks: dict[Key, int | None] = {}
    for fold in folds(records, k):
        inside = {key(r) for r in fold}
        fast, full = fit_ranking.fit_models([r for r in records if key(r) not in inside], l2, loss, without)
        for r, got in zip(fold, fit_ranking.ranks(fold, fast, full)):
            ranks[key(r)] = got
    return ranks


def fitted_ranks(records: list[dict], loss: str, l2: float, without: set[str]) -> dict[Key, int | None]:
    """Each record's gold rank under the models fitted on every record (in sample)."""
    fast, full = fit_ranking.fit_models(records, l2, loss, without)
    return {key(r): got for r, got in zip(records, fit_ranking.ranks(records, fast, full))}


def groups(sets: dict[str, list[dict]]) -> list[tuple[str, list[dict]]]:
    """(label, records): each set, then each of its languages when it has several; then every set together per
    language."""
    out: list[tuple[str, list[dict]]] = []
    for name, recs in sets.items():
        out.append((name, recs))
        languages = sorted({r.get("language", "py") for r in recs})
        out += [(f"{name}: {lang}", [r for r in recs if r.get("language", "py") == lang])
                for lang in (languages if len(languages) > 1 else [])]
    everything = [r for recs in sets.values() for r in recs]
    out += [(f"all sets: {lang}", [r for r in everything if r.get("language", "py") == lang])
            for lang in sorted({r.get("language", "py") for r in everything}) if len(sets) > 1]
    return out


def cells(ranks: list[int | None]) -> str:
    m = metrics(ranks)
    return "/".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" · {m['mrr']:.3f}"


def shown_share(recs: list[dict]) -> str:
    """Share of the records whose gold file the as-run context shows."""
    ran = [r for r in recs if "context" in r]
    return f"{sum(any(g in r['context'] for g in golds_of(r)) for r in ran) / len(ran):.2f}" if ran else ""


def table(sets: dict[str, list[dict]], k: int = 10, recipe: tuple = RECIPE) -> list[str]:
    """Per set and language: BM25, the shipped weights replayed, the recipe fitted on everything (in sample), the
    recipe held out by repository, the assistant as run and the gold file shown in its context."""
    loss, l2, without = recipe
    everything = [r for recs in sets.values() for r in recs]
    held = held_out_ranks(everything, k, loss, l2, set(without))
    fitted = fitted_ranks(everything, loss, l2, set(without))
    shipped_fast, shipped_full = fusion.shipped("fast"), fusion.shipped("full")
    columns: dict[str, Callable[[dict], int | None]] = {
        "BM25": lambda r: r["bm25"]["rank"],
        "shipped (replayed)": lambda r: rank_of(golds_of(r), rankers.lazy_order(r, shipped_fast, shipped_full)),
        "as fitted (in sample)": lambda r: fitted[key(r)],
        "**held out by repository**": lambda r: held[key(r)],
        "as run": lambda r: rank_of(golds_of(r), r.get("ranking", [])),
    }
    lines = [f"Cells: acc@1/acc@3/acc@5 · MRR. Held out: {len(folds(everything, k))} folds of whole repositories "
             f"({len({r['repo'] for r in everything})} repositories, {len(everything)} instances); {loss} loss, "
             f"L2 {l2:g}" + (f", left out: {', '.join(sorted(without))}" if without else "") + ".", "",
             "| set | n | " + " | ".join(columns) + " | gold shown (as run) | its tests shown (as run) |",
             "|---|---|" + "---|" * len(columns) + "---|---|"]
    for label, recs in groups(sets):
        lines.append(f"| {label} | {len(recs)} | " + " | ".join(cells([fn(r) for r in recs]) for fn in columns.values())
                     + f" | {shown_share(recs)} | {tests_shown(recs)} |")
    return lines


def ablation(sets: dict[str, list[dict]], features: list[str], k: int = 10, recipe: tuple = RECIPE) -> list[str]:
    """Held out by repository: the recipe without all of `features` (the base), then the base plus each one alone
    and plus all of them, as deltas of acc@1 / acc@5 / MRR against the base, per set and language."""
    loss, l2, without = recipe
    everything = [r for recs in sets.values() for r in recs]
    base_without = set(without) | set(features)
    base = held_out_ranks(everything, k, loss, l2, base_without)
    variants = {f"+ {f}": held_out_ranks(everything, k, loss, l2, base_without - {f}) for f in features}
    if len(features) > 1:
        variants["+ all of them"] = held_out_ranks(everything, k, loss, l2, set(without))
    lines = ["Held out by repository. Base: acc@1/acc@3/acc@5 · MRR without " + ", ".join(features) + "; the other "
             "columns: the change in acc@1 / acc@5 / MRR with the feature added.", "",
             "| set | n | base | " + " | ".join(variants) + " |", "|---|---|---|" + "---|" * len(variants)]
    for label, recs in groups(sets):
        b = metrics([base[key(r)] for r in recs])
        row = []
        for ranks in variants.values():
            m = metrics([ranks[key(r)] for r in recs])
            row.append(f"{m['acc@1'] - b['acc@1']:+.2f} / {m['acc@5'] - b['acc@5']:+.2f} / {m['mrr'] - b['mrr']:+.3f}")
        lines.append(f"| {label} | {len(recs)} | {cells([base[key(r)] for r in recs])} | " + " | ".join(row) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=Path, default=Path("/tmp/localize/records"))
    p.add_argument("--sets", nargs="+", required=True, help="record folders under --records, all fitted together")
    p.add_argument("--folds", type=int, default=10, help="folds of whole repositories (0: one per repository)")
    p.add_argument("--loss", choices=("softmax", "pairwise"), default=RECIPE[0])
    p.add_argument("--l2", type=float, default=RECIPE[1])
    p.add_argument("--without", nargs="*", default=sorted(RECIPE[2]), choices=fusion.NAMES, metavar="FEATURE",
                   help="features left out of every fit (default: test_about, as shipped)")
    p.add_argument("--ablate", nargs="+", default=[], choices=fusion.NAMES, metavar="FEATURE",
                   help="instead of the table: each of these features' worth, held out (deltas per language)")
    args = p.parse_args(argv)
    sets = fit_ranking.load(args.records, tuple(args.sets))
    print("records: " + ", ".join(f"{n} {len(v)}" for n, v in sets.items()), file=sys.stderr)
    recipe = (args.loss, args.l2, frozenset(args.without))
    lines = ablation(sets, args.ablate, args.folds, recipe) if args.ablate else table(sets, args.folds, recipe)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
