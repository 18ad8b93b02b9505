"""Answers as real models write them (the corpus in tests/fixtures/answers): how many of each shape are parsed,
how many refused, and whether each came out as its case says. No model, no network: the parser alone.

    python -m bench.answers            # the table
    python -m bench.answers --cases    # and every answer with its outcome
"""
from __future__ import annotations

import argparse
from collections import defaultdict

from code_assistant.answers.plan import PlanParseError, parse_answer
from tests.answer_corpus import Case, cases, check


def outcome(item: Case) -> str:
    """"parsed as <format>" or "refused: <why>"."""
    try:
        return f"parsed as {parse_answer(item.answer).format}"
    except PlanParseError as exc:
        return f"refused: {exc}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", action="store_true", help="print every answer's outcome too")
    args = parser.parse_args()
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # answers, parsed, refused, as expected
    wrong: list[str] = []
    for item in cases():
        row = rows[item.shape]
        row[0] += 1
        result = outcome(item)
        row[1 if result.startswith("parsed") else 2] += 1
        mismatch = check(item)
        row[3] += mismatch is None
        if mismatch:
            wrong.append(f"{item.name}: {mismatch}")
        if args.cases:
            print(f"{item.name:<55} {result[:110]}")
    if args.cases:
        print()
    print(f"| {'shape':<15} | answers | parsed | refused | as expected |")
    print(f"| {'-' * 15} | ------- | ------ | ------- | ----------- |")
    total = [0, 0, 0, 0]
    for shape, row in sorted(rows.items()):
        print(f"| {shape:<15} | {row[0]:>7} | {row[1]:>6} | {row[2]:>7} | {row[3]:>11} |")
        total = [t + r for t, r in zip(total, row)]
    print(f"| {'total':<15} | {total[0]:>7} | {total[1]:>6} | {total[2]:>7} | {total[3]:>11} |")
    for line in wrong:
        print(f"NOT AS EXPECTED {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
