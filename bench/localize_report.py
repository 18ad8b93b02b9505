"""The localization bench's tables: per set and per repository, acc@1/3/5 and MRR of BM25 over whole files, of
each signal alone, of the old hand fusion, of the shipped fitted fusion (replayed) and of the assistant as it ran
(with the gold file in its context or not)."""

from __future__ import annotations

from collections.abc import Callable

from bench import rankers
from bench.localize_cli import golds_of, rank_of
from code_assistant.retrieve import fusion

KS = (1, 3, 5)
BM25_LABEL = "BM25, whole non-test files of the task's language"


def metrics(ranks: list[int | None]) -> dict[str, float]:
    """acc@k and MRR over all instances (an unranked gold file is a miss)."""
    n = len(ranks)
    out = {f"acc@{k}": sum(1 for r in ranks if r and r <= k) / n if n else 0.0 for k in KS}
    out["mrr"] = sum(1 / r for r in ranks if r) / n if n else 0.0
    return out


def context_depth(record: dict) -> int:
    """How many of the as-run ranking's top files its context held, in a row: a ranking that puts the gold file
    within that depth is counted as having it in context (an estimate for rankings that were not run end to end)."""
    depth = 0
    for path in record["ranking"]:
        if path not in record["context"]:
            break
        depth += 1
    return depth


def retrievers() -> dict[str, Callable[[dict], int | None]]:
    """Name -> the gold file's rank in that retriever's ranking of a record."""
    fast, full = fusion.shipped("fast"), fusion.shipped("full")
    table: dict[str, Callable[[dict], int | None]] = {BM25_LABEL: lambda r: r["bm25"]["rank"]}
    for name in ("bm25 (code files, index)", "symbols", "mentions + stems", "path words", "traceback", "import graph",
                 "dense (lazy vectors)"):
        table[f"signal alone: {name}"] = lambda r, name=name: rank_of(golds_of(r), rankers.signal_rankings(r)[name])
    table["old hand fusion (93440f9, replayed)"] = lambda r: rank_of(golds_of(r), rankers.hand_fusion(r))
    table["fitted fusion (shipped, replayed)"] = lambda r: rank_of(golds_of(r), rankers.lazy_order(r, fast, full))
    table["assistant as run (end to end)"] = lambda r: rank_of(golds_of(r), r["ranking"])
    return table


def shown(record: dict, *parts: str) -> bool:
    """A gold file is among the record's files of those parts ("context": shown, "map": on the map's lines,
    "listed": listed by path after them)."""
    files = {p for part in parts for p in record.get(part, [])}
    return any(g in files for g in golds_of(record))


def gold_in_context(done: list[dict]) -> str:
    """"shown; shown or on the map; with its paths" as shares of the records (the parts a record has)."""
    n = max(len(done), 1)
    out = f"{sum(shown(r, 'context') for r in done) / n:.2f}"
    if any("map" in r for r in done):  # the map of more files names it: the model may ask to read it
        out += f"; {sum(shown(r, 'context', 'map') for r in done) / n:.2f} shown or on the map"
    if any("listed" in r for r in done):  # further down the map: the path alone
        out += f"; {sum(shown(r, 'context', 'map', 'listed') for r in done) / n:.2f} with its paths"
    return out


def tests_shown(done: list[dict]) -> str:
    """"a/n convention; b/m the fix's": of the records whose gold file has a test counterpart by its language's
    convention (n), those whose context shows one of them (a); of those whose fix changed tests that existed before
    it (m), those whose context shows one of them (b). Records that did not store this are left out."""
    known = [r for r in done if "gold_tests" in r]
    conv = [r for r in known if any(r["gold_tests"].values())]
    fix = [r for r in known if r.get("fix_tests")]
    a = sum(any(t in r["context"] for ts in r["gold_tests"].values() for t in ts) for r in conv)
    b = sum(any(t in r["context"] for t in r["fix_tests"]) for r in fix)
    return f"{a}/{len(conv)} convention; {b}/{len(fix)} the fix's" if known else ""


def per_language(done: list[dict], table: dict[str, Callable[[dict], int | None]], replayable: bool) -> list[str]:
    """Per language (py, go, js, ts, rs): BM25, the shipped fusion replayed and the assistant as run, acc@1/3/5 ·
    MRR, and the gold file in the assistant's context (shown; shown or on the map; with its paths)."""
    lines = ["| language | n | BM25 acc@1/3/5 · MRR | fitted (replayed) | as run | gold in context (as run) |",
             "|---|---|---|---|---|---|"]
    for language in sorted({r.get("language", "py") for r in done}):
        rs = [r for r in done if r.get("language", "py") == language]
        cells = []
        for label in (BM25_LABEL, "fitted fusion (shipped, replayed)",
                      "assistant as run (end to end)"):
            if not replayable and "replayed" in label:
                cells.append("")
                continue
            m = metrics([table[label](r) for r in rs])
            cells.append("/".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" · {m['mrr']:.3f}")
        lines.append(f"| {language} | {len(rs)} | " + " | ".join(cells) + f" | {gold_in_context(rs)} |")
    return lines


def _row(label: str, m: dict[str, float], n: int, extra: str = "") -> str:
    return (f"| {label} | {n} | " + " | ".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" | {m['mrr']:.3f} |"
            + (f" {extra} |" if extra is not None else ""))


def per_repository(done: list[dict], table: dict[str, Callable[[dict], int | None]], replayable: bool) -> list[str]:
    """Per repository, every retriever (each signal alone included): acc@1/3/5 and MRR, one row each."""
    lines = ["| repository | retriever | n | acc@1 | acc@3 | acc@5 | MRR |", "|---|---|---|---|---|---|---|"]
    for repo in sorted({r["repo"] for r in done}):
        rs = [r for r in done if r["repo"] == repo]
        for label, fn in table.items():
            if replayable or label.startswith(("BM25", "assistant")):
                m = metrics([fn(r) for r in rs])
                lines.append(f"| {repo} | {label} | {len(rs)} | "
                             + " | ".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" | {m['mrr']:.3f} |")
    return lines


def render(records: dict[str, list[dict]], budget: int) -> str:
    lines: list[str] = []
    table = retrievers()
    for set_name, recs in records.items():
        done = [r for r in recs if "ranking" in r and "error" not in r]
        failed = [r for r in recs if r not in done]
        replayable = all("files" in r for r in done)  # the signals were stored: the run was in process
        lines += [f"### {set_name}: {len(done)} instances, {len({r['repo'] for r in done})} repositories", "",
                  f"| retriever | n | acc@1 | acc@3 | acc@5 | MRR | gold in {budget // 1000}k context |",
                  "|---|---|---|---|---|---|---|"]
        for label, fn in table.items():
            if not replayable and not label.startswith(("BM25", "assistant")):
                continue
            ctx = ""
            if label.startswith("BM25"):
                ctx = f"{sum(r['bm25']['in_context'] for r in done) / max(len(done), 1):.2f} (whole files)"
            elif label.startswith("assistant"):
                ctx = gold_in_context(done)
            elif label.startswith(("fitted", "old")):
                hits = [(fn(r) or 10**6) <= context_depth(r) for r in done]
                ctx = f"{sum(hits) / max(len(done), 1):.2f} (est.)"
            lines.append(_row(label, metrics([fn(r) for r in done]), len(done), ctx))
        lines += ["", "| repository | n | BM25 acc@1/3/5 · MRR | old hand fusion | fitted (replayed) | as run "
                      "| in context |", "|---|---|---|---|---|---|---|"]
        for repo in sorted({r["repo"] for r in done}):
            rs = [r for r in done if r["repo"] == repo]
            cells = []
            for label in (BM25_LABEL, "old hand fusion (93440f9, replayed)",
                          "fitted fusion (shipped, replayed)", "assistant as run (end to end)"):
                if not replayable and "replayed" in label:
                    cells.append("")
                    continue
                m = metrics([table[label](r) for r in rs])
                cells.append("/".join(f"{m[f'acc@{k}']:.2f}" for k in KS) + f" · {m['mrr']:.2f}")
            in_ctx = sum(shown(r, "context") for r in rs)
            on_map = sum(shown(r, "map") and not shown(r, "context") for r in rs)
            listed = sum(shown(r, "listed") and not shown(r, "context", "map") for r in rs)
            lines.append(f"| {repo} | {len(rs)} | " + " | ".join(cells) + f" | {in_ctx}/{len(rs)}"
                         + (f" (+{on_map} on the map)" if on_map else "")
                         + (f" (+{listed} by path)" if listed else "") + " |")
        if len({r.get("language", "py") for r in done}) > 1:
            lines += ["", *per_language(done, table, replayable)]
        if len({r["repo"] for r in done}) > 1:
            lines += ["", *per_repository(done, table, replayable)]
        embedded = [r.get("embedded", 0) for r in done]
        secs = sorted(r["seconds"]["rank"] for r in done) if done else [0]
        runs = sorted({r.get("weights", "initial hand-set") for r in done})
        lines += ["", f"As run with fusion weights {', '.join(runs)} (a hash of the models in fusion_weights.json)."]
        lines += ["", (f"Chunks embedded per query: mean {sum(embedded) / max(len(embedded), 1):.0f}, max "
                       f"{max(embedded, default=0)}; rank() seconds median {secs[len(secs) // 2]:.1f}, "
                       f"max {secs[-1]:.1f}.")]
        if any(r.get("replayed_context") for r in done):
            lines.append("The ranking and the context of these records were replayed (bench/context_replay.py): "
                         "\"as run\" above is the replay's.")
        if shares := tests_shown(done):
            lines.append(f"Tests that go with the gold file, in the context: {shares} (bench/localize.py test_fields).")
        if failed:
            lines.append("Not evaluated: " + "; ".join(f"{r['instance_id']} ({r.get('error', '?')[:80]})"
                                                       for r in failed))
        lines.append("")
    return "\n".join(lines)
