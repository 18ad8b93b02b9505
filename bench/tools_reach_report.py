"""The tables of bench/tools_reach.py from its records: per set and per language, where the gold file is met (the
first context, search, the named look-ups, BM25), what a call finds that the context did not show, and what each
tool's calls cost (tokens of output, seconds)."""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable

MAX_CALLS = 12


def _share(hits: int, n: int) -> str:
    return f"{hits}/{n} ({100 * hits / n:.0f}%)" if n else "–"


def _found(rec: dict, upto: int = MAX_CALLS, first: int = 1) -> bool:
    return any(c["found"] for c in rec["calls"] if first <= c["n"] <= upto)


COLUMNS: dict[str, Callable[[dict], bool]] = {
    "first context shows gold": lambda r: r["context"]["shown"],
    "shown or on its map": lambda r: r["context"]["shown"] or r["context"]["map"],
    "search, issue text (k=8)": lambda r: _found(r, upto=1),
    "search, title (k=8)": lambda r: bool(r["title_search"]["found"]),
    "grep/symbol/read of what it names": lambda r: _found(r, first=2),
    "any of the 12 calls": lambda r: _found(r),
    "**gain: a call finds, context does not show** (1 call / 2 / 12)": lambda r: False,  # rendered apart
    "BM25 top 8": lambda r: (r["bm25"]["rank"] or 10**6) <= 8,
    "BM25 in 12k": lambda r: r["bm25"]["in_budget"],
}


def _gain(rec: dict, upto: int) -> bool:
    return not rec["context"]["shown"] and _found(rec, upto=upto)


def groups(records: dict[str, list[dict]], per_repo: bool) -> list[tuple[str, list[dict]]]:
    """A row per set, then per language of a set of several languages, then (per_repo) per repository."""
    rows = []
    for set_name, recs in records.items():
        done = [r for r in recs if "error" not in r]
        rows.append((set_name, done))
        languages = sorted({r["language"] for r in done})
        if len(languages) > 1:
            rows += [(f"{set_name}: {lang}", [r for r in done if r["language"] == lang]) for lang in languages]
        if per_repo:
            rows += [(f"{set_name}: {repo}", [r for r in done if r["repo"] == repo])
                     for repo in sorted({r["repo"] for r in done})]
    return rows


def reach_table(rows: list[tuple[str, list[dict]]]) -> list[str]:
    head = ["set", "n", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for label, done in rows:
        n = len(done)
        cells = []
        for column, fn in COLUMNS.items():
            if column.startswith("**gain"):
                cells.append(" / ".join(f"{sum(_gain(r, k) for r in done)}" for k in (1, 2, MAX_CALLS))
                             + (f" ({100 * sum(_gain(r, MAX_CALLS) for r in done) / n:.0f}%)" if n else ""))
            else:
                cells.append(_share(sum(fn(r) for r in done), n))
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " |")
    return lines


def _stat(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{fmt.format(statistics.median(ordered))} / {fmt.format(p90)} / {fmt.format(ordered[-1])}"


def tool_table(rows: list[tuple[str, list[dict]]]) -> list[str]:
    lines = [("| set | tool | calls | gold in its output | capped output | gold matches but not shown | errors "
              "| tokens: median / p90 / max | seconds: median / p90 / max |"), "|---|---|" + "---:|" * 7]
    for label, done in rows:
        calls = [c for r in done for c in r["calls"]] + [{**r["title_search"], "tool": "search (title)"}
                                                          for r in done]
        for tool in ("search", "search (title)", "symbol", "grep", "read"):
            mine = [c for c in calls if c["tool"] == tool]
            if not mine:
                continue
            lines.append(
                f"| {label} | {tool} | {len(mine)} | {_share(sum(bool(c['found']) for c in mine), len(mine))} | "
                f"{sum(c['capped'] for c in mine)} | {sum(bool(c.get('gold_matches')) for c in mine)} | "
                f"{sum(c['error'] for c in mine)} | {_stat([c['tokens'] for c in mine], '{:.0f}')} | "
                f"{_stat([c['seconds'] for c in mine], '{:.2f}')} |")
    return lines


def names_table(rows: list[tuple[str, list[dict]]]) -> list[str]:
    lines = [("| set | n | names per issue: median (none) | calls made: median | gold defined where symbol looked "
              "| the first call to find gold, by what it looked up |"), "|---|---:|---:|---:|---:|---|"]
    for label, done in rows:
        if not done:
            continue
        first: Counter[str] = Counter()
        for r in done:
            hit = next((c for c in r["calls"] if c["found"]), None)
            if hit is None:
                first["none"] += 1
                continue
            kind = "search" if hit["n"] == 1 else _kind(r, hit)
            first[kind] += 1
        defined = sum(any(c.get("defined_in_gold") for c in r["calls"]) for r in done)
        none = sum(not r["names"] for r in done)
        lines.append(f"| {label} | {len(done)} | {statistics.median(len(r['names']) for r in done):.0f} ({none}) | "
                     f"{statistics.median(len(r['calls']) for r in done):.0f} | {_share(defined, len(done))} | "
                     + ", ".join(f"{k} {v}" for k, v in first.most_common()) + " |")
    return lines


def _kind(rec: dict, call: dict) -> str:
    """The kind of the named thing a call looked up (bench/issue_names.py), and the tool."""
    looked = call["arguments"].get("path") or call["arguments"].get("name") or call["arguments"].get("pattern", "")
    for kind, text in rec["names"]:
        if text == looked or (call["tool"] == "grep" and looked.replace("\\b", "").replace("\\", "")
                              == text.split(".")[-1].split("::")[-1]):
            return f"{call['tool']} of {kind}"
    return call["tool"]


def render(records: dict[str, list[dict]], per_repo: bool = False) -> str:
    rows = groups(records, per_repo)
    failed = [(r["set"], r["instance_id"], r["error"]) for recs in records.values() for r in recs if "error" in r]
    out = ["### Where the gold file is met: the first context, the tools (12 calls), BM25", "", *reach_table(rows), "",
           "### Each tool's calls: gold in the output, caps, size and time", "", *tool_table(rows), "",
           "### What the issues name (bench/issue_names.py), and what found gold first", "", *names_table(rows)]
    if failed:
        out += ["", "Not evaluated: " + "; ".join(f"{s}/{i} ({e})" for s, i, e in failed)]
    return "\n".join(out)
