"""Time to the first answer on a repository the tool has never seen, and what a warm run costs after a big checkout.

For each repository (copied to a scratch directory first, so the source is never touched):

1. cold first context: `main.py --repo COPY --task TASK --context-only --json` as a subprocess with an empty index
   directory — what a new user waits for before the first answer (real model, the default embed budget);
2. the index alone, cold, in this process: files/s of the non-model work (listing, hashing, parsing, BM25, graph);
3. a second query (warm, same task), then N files rewritten (a line appended, as a checkout would) and the query
   again: the update is non-model work only, the query embeds at most its budget;
4. optionally (`--index-all`) `main.py index` on the warm index: the whole repository embedded, chunks/s.

    python -m bench.first_answer /path/to/repo [more repos] [--task "..."] [--rewrite 300] [--index-all]
    python -m bench.first_answer /path/to/repo --main /other/checkout/main.py   # another version of the tool

The task, unless given, is one for the repository's main language (TASKS: the language most of its code files are
in); a rewritten file gets a comment line in its own language's syntax.

Prints a markdown table (one row per repository); progress goes to stderr.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("first_answer")
ROOT = Path(__file__).resolve().parent.parent
# a task a user of a repository in that language might bring, by the suffix most of its code files have
TASKS = {
    ".py": "The parser raises a KeyError when the configuration file has an empty section",
    ".go": "The command panics with a nil pointer dereference when the config file has an empty section",
    ".js": "Calling the parser with an empty options object throws TypeError: cannot read properties of undefined",
    ".ts": "Calling the parser with an empty options object throws TypeError: cannot read properties of undefined",
    ".rs": "The parser returns an error instead of an empty value when the configuration file has an empty section",
    ".java": "The parser throws a NullPointerException when the configuration file has an empty section",
}
CODE_SUFFIXES = (".py", ".js", ".ts", ".go", ".java", ".rs")
_COMMENT = {".py": "#"}  # a line comment in the file's language: "//" for the others


def main_suffix(repo: Path) -> str:
    """The code suffix most of the repository's files have (.py when it has none)."""
    counts = {suffix: 0 for suffix in CODE_SUFFIXES}
    for path in repo.rglob("*"):
        if path.suffix in counts and ".git" not in path.parts and "node_modules" not in path.parts:
            counts[path.suffix] += 1
    return max(CODE_SUFFIXES, key=lambda s: (counts[s], s == ".py"))


@dataclass
class Row:
    repo: str
    files: int = 0
    cold_s: float = 0.0
    cold_chunks: int = 0
    cold_rss_mb: float = 0.0
    index_s: float = 0.0
    indexed: int = 0
    warm_s: float = 0.0
    rewritten: int = 0
    rewrite_s: float = 0.0
    rewrite_chunks: int = 0
    update_after_rewrite_s: float = 0.0
    index_all: dict = field(default_factory=dict)
    task: str = ""


def _cli(main: Path, python: str, args: list[str], timeout: float) -> tuple[dict, float, float]:
    """Run the CLI; (its JSON, wall seconds, the child's peak RSS in MB)."""
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([python, str(main), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])}: exit {done.returncode}: {done.stderr[-800:]}")
    rss = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return json.loads(done.stdout), wall, rss


def _index_only(repo: Path, index_path: Path) -> tuple[float, int]:
    """The update alone, in this process: (seconds, files indexed)."""
    from code_assistant.index import embeddings, store
    from code_assistant.index.indexer import Indexer

    embedder = embeddings.make_embedder("local")
    chunks = store.ChunkStore(store.open_client(index_path), store.collection_name(str(repo), embedder.name))
    started = time.perf_counter()
    _, stats = Indexer(repo, index_path, embedder, chunks).update()
    return time.perf_counter() - started, stats.files


def _rewrite(repo: Path, n: int) -> int:
    """Append a line to the first n code files (sorted): a checkout that rewrites n files."""
    done = 0
    for path in sorted(repo.rglob("*")):
        if done >= n:
            break
        if path.is_file() and path.suffix in CODE_SUFFIXES and ".git" not in path.parts:
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n{_COMMENT.get(path.suffix, '//')} rewritten by bench.first_answer\n")
            done += 1
    return done


def measure(source: Path, args: argparse.Namespace, work: Path) -> Row:
    row = Row(repo=source.name if source.name not in ("repo", ".git") else source.parent.name)
    repo = work / row.repo
    logger.info("copying %s", source)
    shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    row.files = sum(1 for p in repo.rglob("*") if p.is_file())
    row.task = args.task or TASKS[main_suffix(repo)]
    task = ["--task", row.task, "--context-only", "--json"]
    index = work / f"{row.repo}-index"
    logger.info("cold first context ...")
    cold, row.cold_s, row.cold_rss_mb = _cli(args.main, args.python, ["--repo", str(repo), *task, "--index-path",
                                                                      str(index)], args.timeout)
    row.cold_chunks = int(cold.get("chunks_embedded", -1))
    logger.info("index alone, cold ...")
    row.index_s, row.indexed = _index_only(repo, work / f"{row.repo}-index-only")
    logger.info("warm query ...")
    _, row.warm_s, _ = _cli(args.main, args.python, ["--repo", str(repo), *task, "--index-path", str(index)],
                            args.timeout)
    if args.rewrite:
        row.rewritten = _rewrite(repo, args.rewrite)
        logger.info("query after rewriting %d files ...", row.rewritten)
        after, row.rewrite_s, _ = _cli(args.main, args.python, ["--repo", str(repo), *task, "--index-path",
                                                                str(index)], args.timeout)
        row.rewrite_chunks = int(after.get("chunks_embedded", -1))
        _rewrite(repo, args.rewrite)
        row.update_after_rewrite_s, _ = _index_only(repo, work / f"{row.repo}-index-only")
    if args.index_all:
        logger.info("index --json (everything embedded) ...")
        row.index_all, _, _ = _cli(args.main, args.python, ["index", "--repo", str(repo), "--json", "--index-path",
                                                            str(index)], args.timeout)
    return row


def render(rows: list[Row], args: argparse.Namespace) -> str:
    tasks = "; ".join(f"{r.repo}: {r.task!r}" for r in rows)
    out = [f"First answer on never-seen repositories (`{args.main}`; tasks: {tasks})", "",
           "| repository | files | cold first context | chunks embedded | peak RSS | index alone (non-model) "
           "| warm query | after rewriting N files: query / update alone |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        rate = r.indexed / r.index_s if r.index_s else 0.0
        rewrite = (f"N={r.rewritten}: {r.rewrite_s:.1f} s ({r.rewrite_chunks} chunks) / {r.update_after_rewrite_s:.2f} s"
                   if r.rewritten else "")
        out.append(f"| {r.repo} | {r.files} | **{r.cold_s:.1f} s** | {r.cold_chunks} | {r.cold_rss_mb:.0f} MB | "
                   f"{r.index_s:.1f} s ({r.indexed} files, {rate:.0f} files/s) | {r.warm_s:.1f} s | {rewrite} |")
    full = [r for r in rows if r.index_all]
    if full:
        out += ["", "| repository | `index`: chunks embedded | reused | seconds | chunks/s |", "|---|---:|---:|---:|---:|"]
        for r in full:
            a = r.index_all
            out.append(f"| {r.repo} | {a['chunks_embedded']} | {a['chunks_reused']} | {a['seconds']} | "
                       f"{a['chunks_embedded'] / a['seconds'] if a['seconds'] else 0:.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--task", default=None, help="the task (default: TASKS, by the repository's main language)")
    parser.add_argument("--rewrite", type=int, default=300, help="files rewritten before the third query (0: skip)")
    parser.add_argument("--index-all", action="store_true", help="also embed everything with `main.py index`")
    parser.add_argument("--main", type=Path, default=ROOT / "main.py")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout", type=float, default=6 * 3600)
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed after)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[first_answer] %(message)s")
    with tempfile.TemporaryDirectory(prefix="first-answer-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = [measure(repo.resolve(), args, work) for repo in args.repos]
    print(render(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
