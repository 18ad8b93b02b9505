"""How many definitions the parser sees per language in real repositories (issue 60): the files the index would
hold, each parsed as the index parses it, counted by language — run from two checkouts to compare parsers.

    python -m bench.definition_count iamkun/dayjs expressjs/express ... [--mirrors /work/.mirror] [--json OUT]

Each repository is written out at its mirror's HEAD (bench/checkout.py) under --work; a markdown table goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bench.checkout import materialize
from code_assistant.index.repo_files import list_repo_files
from code_assistant.languages import language_for
from code_assistant.parse.code_parser import parse_source

LANGUAGES = ("javascript", "typescript", "python", "go", "rust", "java")


def count(repo: Path) -> dict[str, dict[str, int]]:
    """language -> files, definitions, files without one, and the seconds parsing took."""
    out: dict[str, Counter[str]] = {}
    for rel in list_repo_files(repo):
        language = language_for(rel)
        if language not in LANGUAGES:
            continue
        try:
            text = (repo / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        started = time.perf_counter()
        parsed = parse_source(rel, text, references=False)
        tally = out.setdefault(language, Counter())
        tally["files"] += 1
        tally["definitions"] += len(parsed.symbols)
        tally["bare files"] += not parsed.symbols
        tally["ms"] += round((time.perf_counter() - started) * 1000)
    return {language: dict(tally) for language, tally in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", help="owner/name of mirrored repositories")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/definition_count"))
    parser.add_argument("--json", type=Path, help="write the counts here too")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, dict[str, int]]] = {}
    print("| repository | language | files | definitions | files without one | parse s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.repos:
        dest = args.work / name.replace("/", "+")
        materialize(args.mirrors / name.replace("/", "+") / "repo", "HEAD", dest)
        results[name] = count(dest)
        for language, tally in sorted(results[name].items()):
            print(f"| {name} | {language} | {tally['files']} | {tally['definitions']} | {tally['bare files']} | "
                  f"{tally['ms'] / 1000:.1f} |")
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
