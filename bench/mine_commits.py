"""A held-out file-localization set mined from git history: bug-fix commits with tests, in SWE-bench form.

What it measures: with bench/localize.py, whether the ranking finds the one source file a fix changed, on
repositories that none of the benchmark sets (bench/localize.py SETS) come from and that ../shared/bench/README.md
does not reserve (RESERVED). An instance is a non-merge commit of the default branch (`git log --no-merges HEAD`,
newest first) that

* changes (modifies, not adds) exactly ONE non-test source file in Python, Go, JavaScript, TypeScript or Rust - not
  under docs/, examples/, benches/ or a vendored or build directory, not a build config (setup.py, webpack.config.js,
  build.rs, ...), a declaration file (.d.ts) or a generated one (.pb.go, *_gen.go), an __init__.py that only bumps
  __version__ not counted - and at least one test file of the same language family (a behavioural fix that comes
  with tests), by the language's rule (bm25_baseline.is_test_path): Python tests/ or test_*.py, Go *_test.go, JS/TS
  *.test.ts, *.spec.js or under __tests__/, test/, tests/, spec/; Rust integration tests under tests/ (unit tests
  inside the source file cannot be told apart from the fix);
* has a subject that looks like a fix (fix|bug|error|crash|wrong|incorrect|regression|handle|issue|#N, where a
  trailing squash-merge "(#N)" does not count: it is the pull request, present on every commit of such repositories)
  and is not a release/merge/revert/bump/typo/docs/style/refactor/changelog commit;
* has a message (subject + body, trailers such as Signed-off-by/Co-authored-by stripped) of at least 60 characters.

Rows: instance_id "<owner>__<name>-<short sha>", repo, language (py, go, js, ts or rs: the gold file's), base_commit
(the first parent), problem_statement (the message), patch (`git diff parent commit -- GOLD`: only the source file,
so that localize's gold_files() cannot pick a changelog or docs file the commit also touched), test_patch (the test
files' diff), other_files (what else the commit changed), created_at (commit date, ISO) and names_gold. At most
--max per repository, spread evenly over all qualifying commits (not only the newest; a fix cherry-picked onto
another branch counted once); a commit whose base tree cannot be listed, lacks the gold blob or holds fewer than 5
source files is replaced by the next qualifying one.

Caveats: a commit message describes the fix, not the symptom an issue reports, and often names the function or
module it touched; it is an easier query than an issue. names_gold records whether the message contains the gold
file's path or its stem as a word (a leakage indicator - read the tables with and without those rows; a short stem
such as "app" also matches innocently). Fix-looking subjects and "#N" let some features and cleanups in.

    python -m bench.mine_commits --mirror /work/.mirror/pallets+flask/repo --repo pallets/flask \\
        --mirror /work/.mirror/pallets+click/repo --repo pallets/click [--max 25] --out /tmp/heldout/heldout.json

--mirror/--repo are given in pairs, several pairs per invocation; --out is written whole (no appending).
Prints per repository: non-merge commits walked, qualified, kept, kept that name the gold file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bench.bm25_baseline import is_test_path, language_of

FIX = re.compile(r"fix|bug|error|crash|wrong|incorrect|regression|handle|issue|#\d+", re.IGNORECASE)
NOT_FIX = re.compile(r"\b(release|merge|revert|bump|typos?|docs?|documentation|style|refactor\w*|changelog)\b",
                     re.IGNORECASE)
TRAILER = re.compile(r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by|"
                     r"helped-by|cc):.*$", re.IGNORECASE | re.MULTILINE)
NOT_SOURCE_DIRS = {"docs", "doc", "examples", "example", "benches", "bench", "benchmark", "benchmarks", "vendor",
                   "third_party", "node_modules", "dist", "build", "scripts", "fixtures"}
NOT_SOURCE_NAMES = {"setup.py", "conftest.py", "noxfile.py", "build.rs", "gulpfile.js", "Gruntfile.js"}
NOT_SOURCE_RE = re.compile(r"\.config\.[cm]?[jt]s$|^\.?[\w-]+rc\.[cm]?js$|\.pb\.go$|\.pb\.gw\.go$|_gen(erated)?\.go$")
FAMILY = {"py": "py", "go": "go", "js": "js", "ts": "js", "rs": "rs"}  # a TS fix may come with JS tests
# ../shared/bench/README.md: held out for measurement, never mined (with every repository of bench/localize.py SETS)
RESERVED = frozenset("""axios/axios babel/babel caddyserver/caddy gin-gonic/gin gohugoio/hugo hashicorp/terraform
immutable-js/immutable-js preactjs/preact prometheus/prometheus sharkdp/bat tokio-rs/axum tokio-rs/tokio vuejs/core
spf13/cobra labstack/echo urfave/cli go-chi/chi expressjs/express tj/commander.js yargs/yargs honojs/hono
colinhacks/zod BurntSushi/ripgrep pytest-dev/pytest sphinx-doc/sphinx astropy/astropy psf/requests pylint-dev/pylint
pydata/xarray mwaskom/seaborn pallets/flask""".lower().split())
SQUASH_PR = re.compile(r"(\s*\(#\d+\))+\s*$")  # "Subject (#123)": the PR a squash-merge came from, not an issue
MIN_MESSAGE = 60
MIN_SOURCES = 5


@dataclass
class Commit:
    sha: str
    parent: str
    date: str
    message: str
    changes: list[tuple[str, str]]  # (status letter, path)


def run_git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=False, capture_output=True, text=True,
                          errors="replace")


def git(git_dir: Path, *args: str) -> str:
    """git's output; a failure is an error."""
    proc = run_git(git_dir, *args)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def commits(git_dir: Path) -> list[Commit]:
    """Non-merge commits reachable from HEAD, newest first, with their name-status (renames as delete + add)."""
    out = git(git_dir, "log", "--no-merges", "--no-renames", "--name-status",
              "--format=%x1e%H%x1f%P%x1f%cI%x1f%B%x1f", "HEAD")
    found = []
    for chunk in out.split("\x1e")[1:]:
        sha, parents, date, body, files = chunk.split("\x1f", 4)
        changes = [(line[0], line.split("\t")[-1]) for line in files.strip().splitlines() if "\t" in line]
        if parents.split():
            found.append(Commit(sha, parents.split()[0], date, clean(body), changes))
    return found


def clean(body: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", TRAILER.sub("", body)).strip()


def is_source(path: str) -> bool:
    """A non-test source file of one of the five languages, where a fix to the program goes (not docs, examples,
    benchmarks, vendored or built copies, build configs, declaration or generated files)."""
    parts = PurePosixPath(path).parts
    return (language_of(path) is not None and not is_test_path(path) and not NOT_SOURCE_DIRS & set(parts[:-1])
            and not any(d.startswith("test") for d in parts[:-1]) and parts[-1] not in NOT_SOURCE_NAMES
            and not NOT_SOURCE_RE.search(parts[-1]))


def is_test_of(path: str, language: str) -> bool:
    """A test file of the language's family (conftest.py, a fixture runner, does not count)."""
    found = language_of(path)
    return (found is not None and FAMILY[found] == FAMILY[language] and is_test_path(path)
            and not path.endswith("conftest.py"))


def version_bump_only(git_dir: Path, c: Commit, path: str) -> bool:
    lines = [ln for ln in git(git_dir, "diff", "-U0", c.parent, c.sha, "--", path).splitlines()
             if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    return bool(lines) and all("__version__" in ln for ln in lines)


def gold_of(git_dir: Path, c: Commit) -> str | None:
    """The one modified source file of a qualifying commit, else None."""
    subject = c.message.splitlines()[0] if c.message else ""
    if len(c.message) < MIN_MESSAGE or not FIX.search(SQUASH_PR.sub("", subject)) or NOT_FIX.search(subject):
        return None
    sources = [(s, p) for s, p in c.changes if is_source(p)]
    sources = [(s, p) for s, p in sources if not (p.endswith("__init__.py") and version_bump_only(git_dir, c, p))]
    if len(sources) != 1 or sources[0][0] != "M":
        return None
    gold = sources[0][1]
    if not any(is_test_of(p, language_of(gold) or "py") for _, p in c.changes):
        return None
    return gold


def checks_out(git_dir: Path, c: Commit, gold: str) -> bool:
    """The base tree can be listed, holds the gold file's blob (bench/checkout.py skips only files >= 4 MiB) and
    at least MIN_SOURCES source files (early flask was the single file flask.py: nothing to localize)."""
    listed = run_git(git_dir, "ls-tree", "-r", "--name-only", "--full-tree", c.parent)
    paths = listed.stdout.splitlines()
    if listed.returncode != 0 or gold not in paths or sum(map(is_source, paths)) < MIN_SOURCES:
        return False
    return run_git(git_dir, "cat-file", "-e", f"{c.parent}:{gold}").returncode == 0


def names_gold(message: str, gold: str) -> bool:
    stem = PurePosixPath(gold).stem
    return gold in message or re.search(rf"(?<!\w){re.escape(stem)}(?!\w)", message, re.IGNORECASE) is not None


def mine(git_dir: Path, repo: str, limit: int) -> tuple[list[dict], dict[str, int]]:
    walked = commits(git_dir)
    qualified: list[tuple[Commit, str]] = []
    seen: set[tuple[str, str]] = set()
    for c in walked:  # a fix cherry-picked onto another branch counts once (the newest copy)
        if (gold := gold_of(git_dir, c)) and (key := (c.message.splitlines()[0], gold)) not in seen:
            seen.add(key)
            qualified.append((c, gold))
    rows: list[dict] = []
    taken: set[str] = set()
    n = len(qualified)
    for j in range(min(limit, n)):  # evenly spaced targets; a failing one falls to the next older, else newer one
        start = j * n // min(limit, n)
        for c, gold in qualified[start:] + qualified[:start][::-1]:
            if c.sha in taken or not checks_out(git_dir, c, gold):
                continue
            taken.add(c.sha)
            tests = [p for _, p in c.changes if is_test_path(p)]
            rows.append({
                "instance_id": f"{repo.replace('/', '__')}-{c.sha[:10]}", "repo": repo,
                "language": language_of(gold), "base_commit": c.parent,
                "commit": c.sha, "problem_statement": c.message,
                "patch": git(git_dir, "diff", c.parent, c.sha, "--", gold),
                "test_patch": git(git_dir, "diff", c.parent, c.sha, "--", *tests),
                "other_files": [p for _, p in c.changes if p != gold and p not in tests],
                "created_at": c.date, "names_gold": names_gold(c.message, gold)})
            break
    stats = {"walked": len(walked), "qualified": n, "kept": len(rows),
             "names_gold": sum(r["names_gold"] for r in rows)}
    return rows, stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mirror", type=Path, action="append", required=True, help="bare git dir (owner+name/repo)")
    p.add_argument("--repo", action="append", required=True, help="owner/name, one per --mirror, same order")
    p.add_argument("--max", type=int, default=25, help="instances per repository")
    p.add_argument("--out", type=Path, required=True, help="JSON list of rows, written whole")
    args = p.parse_args(argv)
    if len(args.mirror) != len(args.repo):
        p.error("give --mirror and --repo in pairs")
    from bench.localize import SETS

    tuned = {row["repo"].lower() for path in SETS.values() if path.is_file() for row in json.loads(path.read_text())}
    if clash := tuned & {r.lower() for r in args.repo}:
        p.error(f"not held out, already in a benchmark set: {sorted(clash)}")
    if clash := RESERVED & {r.lower() for r in args.repo}:
        p.error(f"reserved for held-out measurement (../shared/bench/README.md), never mined: {sorted(clash)}")
    rows = []
    for git_dir, repo in zip(args.mirror, args.repo):
        mined, stats = mine(git_dir, repo, args.max)
        rows += mined
        print(f"{repo}: {stats['walked']} non-merge commits, {stats['qualified']} qualified, {stats['kept']} kept, "
              f"{stats['names_gold']} name the gold file")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} instances -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
