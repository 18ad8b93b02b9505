"""Where the first index of a big tree spends its CPU (issue 60 item 3): prepare_file's stages timed apart on a sample
of the tree's indexable files, in this process (CPU seconds, so a busy machine's load weighs less than on the wall
clock), beside one `git grep` of the whole tree.

    python -m bench.prep_stages /tmp/bigtree [--sample 3000]
"""
from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from code_assistant import tokens
from code_assistant.gate import Gate
from code_assistant.index import lexical
from code_assistant.index.file_prep import file_digest
from code_assistant.index.repo_files import list_repo_files, read_text
from code_assistant.parse.code_parser import parse_source


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--sample", type=int, default=3000)
    args = parser.parse_args(argv)
    before, wall = _children_cpu(), time.perf_counter()
    subprocess.run(["git", "grep", "-I", "-c", "the"], cwd=args.tree, stdout=subprocess.DEVNULL, check=False)
    grep_cpu, grep_wall = _children_cpu() - before, time.perf_counter() - wall
    started = _cpu()
    files = list_repo_files(args.tree)
    listing = _cpu() - started
    sample = random.Random(60).sample(files, min(args.sample, len(files)))
    gate, spent = Gate(args.tree), Counter[str]()
    for rel in sample:
        mark = _cpu()
        text = read_text(gate, rel)
        spent["read (gate)"] += _cpu() - mark
        if text is None:
            continue
        mark = _cpu()
        file_digest(text)
        spent["hash"] += _cpu() - mark
        mark = _cpu()
        parse_source(rel, text, references=False)
        spent["parse"] += _cpu() - mark
        mark = _cpu()
        counts = lexical.token_counts(text)
        counts.update(lexical.path_tokens(rel))
        spent["BM25 terms"] += _cpu() - mark
        mark = _cpu()
        tokens.min_tokens(text)
        spent["token count"] += _cpu() - mark
    scale = len(files) / max(len(sample), 1)
    print(f"{len(files):,} indexable files; git grep of the tree: {grep_wall:.2f} s wall, {grep_cpu:.2f} s CPU; "
          f"listing the files: {listing:.2f} s CPU")
    print("| stage | CPU s on the sample | projected CPU s for the tree |")
    print("| --- | --- | --- |")
    for stage, seconds in spent.items():
        print(f"| {stage} | {seconds:.2f} | {seconds * scale:.1f} |")
    print(f"| all | {sum(spent.values()):.2f} | {sum(spent.values()) * scale:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
