"""bench/first_answer.py's measuring parts: the lexical floor reads the repository's code (every language it has, no
tests), a run's peak memory is that run's own, and the targets are judged against the floor of the same run."""
from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

from bench import first_answer
from bench.first_answer import Floor, Row, Run, Version
from tests.repos import write_tree

# a child that holds MB megabytes for a moment, then prints an empty answer
_HOLDER = "import sys, time\nheld = bytearray(int(sys.argv[1]) * 2**20)\ntime.sleep(float(sys.argv[2]))\nprint('{}')\n"
# the same, in a worker process it starts and waits for, while the parent holds little
_PARENT = ("import subprocess, sys\nholder = sys.argv[0].replace('parent.py', 'holder.py')\n"
           "subprocess.run([sys.executable, holder, sys.argv[1], sys.argv[2]], check=True, capture_output=True)\n"
           "print('{}')\n")


def test_the_floor_reads_the_non_test_js_and_ts_files_of_a_monorepo(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "mono", {
        "packages/core/src/index.ts": "export function parse(options) { return options.value }\n",
        "packages/core/src/types.d.ts": "export declare function parse(options: object): string\n",
        "packages/core/src/parse.test.ts": "import { parse } from './index'\n",
        "playground/a/main.js": "console.log('a')\n",
        "playground/b/main.js": "console.log('b')\n",
        "playground/c/main.js": "console.log('c')\n",
        "__tests__/e2e.spec.js": "it('works', () => {})\n",
        "scripts/release.py": "print('release')\n",
        ".github/ci.js": "// not the repository's code\n",
        "README.md": "# mono\n",
    })
    counts = first_answer.code_languages(repo)
    assert counts == {"js": 3, "ts": 1, "py": 1}
    assert first_answer.main_language(counts) == "js"
    assert first_answer.floor_languages(counts) == ["js", "ts"]
    assert first_answer.lexical_floor(repo, ["js", "ts"], "parse options")[1] == 4


def test_a_go_repository_gets_a_go_task_and_a_floor_of_its_go_files(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "svc", {
        "cmd/svc/main.go": "package main\n\nfunc main() {}\n",
        "pkg/config/config.go": "package config\n\nfunc Load() error { return nil }\n",
        "pkg/config/config_test.go": "package config\n",
        "pkg/config/testdata/bad.go": "package bad\n",
        "hack/gen.py": "print('gen')\n",
    })
    counts = first_answer.code_languages(repo)
    assert first_answer.main_language(counts) == "go"
    assert "nil pointer" in first_answer.TASKS[first_answer.main_language(counts)]
    assert first_answer.floor_languages(counts) == ["go"]
    assert first_answer.lexical_floor(repo, ["go"], "config load")[1] == 2


def test_a_runs_peak_memory_is_its_own_not_the_largest_of_earlier_runs(tmp_path: Path) -> None:
    holder = tmp_path / "holder.py"
    holder.write_text(_HOLDER, encoding="utf-8")
    big = first_answer.run_cli(holder, sys.executable, ["200", "0"], timeout=60)
    held_here = bytearray(300 * 2**20)  # nor this process's: a child forked from it starts with its resident set
    small = first_answer.run_cli(holder, sys.executable, ["0", "0"], timeout=60)
    assert big.json == small.json == {}
    assert big.rss_mb >= 200 and small.rss_mb < 100 < len(held_here) / 2**20
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 >= 200, "what a delta of it would report"


def test_the_memory_of_a_runs_workers_is_added_to_its_own(tmp_path: Path) -> None:
    (tmp_path / "holder.py").write_text(_HOLDER, encoding="utf-8")
    parent = tmp_path / "parent.py"
    parent.write_text(_PARENT, encoding="utf-8")
    answer = first_answer.run_cli(parent, sys.executable, ["150", "1.0"], timeout=60)
    assert answer.rss_mb >= 150  # the worker's peak, which the parent waited for
    assert answer.tree_rss_mb >= 150 + 5  # the worker and the parent at once (sampled)


def test_a_run_that_fails_says_so_with_its_stderr(tmp_path: Path) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text("import sys\nsys.exit('no such repository')\n", encoding="utf-8")
    try:
        first_answer.run_cli(failing, sys.executable, ["--repo", "x"], timeout=60)
    except RuntimeError as exc:
        assert "exit 1" in str(exc) and "no such repository" in str(exc)
    else:
        raise AssertionError("a failed run must not be measured")


def test_the_targets_are_judged_against_the_floor_of_the_same_run() -> None:
    def run(seconds: float, rss: float = 250.0) -> Run:
        return Run(seconds=seconds, rss_mb=rss, tree_rss_mb=rss + 20, chunks=60, load=0.5)

    # floor 0.2 s: cold <= 1 + 15 * 0.2 = 4.0 s, warm <= 0.5 + 4 * 0.2 = 1.3 s
    fast = Version("after", Path("main.py"), cold=[run(3.0), run(3.9), run(9.0)], warm=[run(1.2)] * 3)
    slow = Version("before", Path("old.py"), cold=[run(4.2, rss=420.0)] * 3, warm=[run(1.4)] * 3)
    row = Row("demo", 10, "a task", Floor(["py"], 8, [0.3, 0.2, 0.1]), [slow, fast], first_answer.Extra())
    table = first_answer.render([row], argparse.Namespace(runs=3))
    before, after = (line for line in table.splitlines() if line.startswith("| demo"))
    assert "0.200 s (8 py files of 10)" in after
    assert "3.90 s (3.00–9.00)" in after and "met (≤ 4.00)" in after and "met (≤ 1.30)" in after
    assert "250 MB (270 MB)" in after and "met (≤ 300.00)" in after
    assert before.count("**missed**") == 3
