"""Time to the first answer on a repository the tool has never seen, against the lexical floor, in one run.

For each repository (copied to a scratch directory first, so the source is never touched):

1. the lexical floor, in this process: read every non-test code file of the repository's main language (JS and TS
   together) and rank them by BM25 for the task (`bm25_baseline.source_files` + `bm25_rank`, the localization
   benchmark's baseline), once per repetition, just before its runs;
2. cold first context: `main.py --repo COPY --task TASK --context-only --json` as a subprocess with an empty index
   directory — what a new user waits for before the first answer (real model, the default embed budget) — with
   that process's own peak RSS (GNU time's %M: a ru_maxrss read here, by os.wait4 or RUSAGE_CHILDREN, would
   include this process's memory at the fork, and RUSAGE_CHILDREN every earlier child's peak too) and the largest
   sum over it and its worker processes (sampled from /proc);
3. warm: the same query again on that index, as a subprocess, with its CPU seconds (user + system: on a shared
   machine less hostage to the load than its wall clock);
4. the targets of issue 30, each met or missed: cold <= 1 s + 15 x floor, warm <= 0.5 s + 4 x floor, peak RSS of the
   cold run <= 300 MB.

Cold and warm are the median of `--runs` (3); with `--before OLD/main.py` every repetition runs the old tool and then
this one (and, with `--no-embed`, this one with `--embed-budget 0`: the answer without the dense signal), so all
see the same machine. A timed run waits (up to `--load-wait` s) for the 1-minute load average to
drop below `--max-load`; the loads the runs started at are in the table.

Optional, for the tool under test only: `--index-alone` (the non-model index in this process, files/s), `--rewrite N`
(N files rewritten, a line appended as a checkout would, then the query and the update alone), `--index-all`
(`main.py index`: the whole repository embedded, chunks/s).

    python -m bench.first_answer /path/to/repo [more repos] [--before /old/checkout/main.py] [--runs 3]
    python -m bench.first_answer /path/to/repo --main /other/checkout/main.py   # another version of the tool alone

The task, unless given, is one for the repository's main language (TASKS: the language most of its non-test code
files are in, by `bm25_baseline.language_of`); a rewritten file gets a comment line in its own language's syntax.

Prints markdown tables; progress goes to stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.bm25_baseline import bm25_rank, is_test_path, language_of, source_files

logger = logging.getLogger("first_answer")
ROOT = Path(__file__).resolve().parent.parent
# a task a user of a repository in that language might bring
TASKS = {
    "py": "The parser raises a KeyError when the configuration file has an empty section",
    "go": "The command panics with a nil pointer dereference when the config file has an empty section",
    "js": "Calling the parser with an empty options object throws TypeError: cannot read properties of undefined",
    "ts": "Calling the parser with an empty options object throws TypeError: cannot read properties of undefined",
    "rs": "The parser returns an error instead of an empty value when the configuration file has an empty section",
}
CODE_SUFFIXES = (".py", ".js", ".ts", ".go", ".rs")
_COMMENT = {".py": "#"}  # a line comment in the file's language: "//" for the others
# issue 30's targets: the first context within a small multiple of reading the files and indexing their words
COLD_TARGET = (1.0, 15.0)  # seconds + times the floor
WARM_TARGET = (0.5, 4.0)
RSS_TARGET_MB = 300.0


def code_languages(repo: Path) -> Counter[str]:
    """How many non-test code files of each language (bm25_baseline.language_of) the repository has."""
    counts: Counter[str] = Counter()
    for root, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # as source_files walks
        for name in files:
            rel = (Path(root) / name).relative_to(repo).as_posix()
            lang = language_of(rel)
            if lang and not is_test_path(rel):
                counts[lang] += 1
    return counts


def main_language(counts: Counter[str]) -> str:
    """The language most of the non-test code files are in (py when there are none)."""
    return max(TASKS, key=lambda lang: (counts[lang], lang == "py"))


_FAMILY = {"js": ("js", "ts"), "ts": ("ts", "js")}  # a JS/TS repository's code is both: one package may be either


def floor_languages(counts: Counter[str]) -> list[str]:
    """The languages the floor reads: the main one (with its JS/TS sibling), not the odd script or vendored asset
    of another (sphinx's JavaScript stemmers, a Go repository's Python helpers)."""
    main = main_language(counts)
    return [lang for lang in _FAMILY.get(main, (main,)) if lang == main or counts[lang]]


@dataclass
class Floor:
    languages: list[str]  # most files first
    files: int = 0  # non-test code files read and indexed
    times: list[float] = field(default_factory=list)  # one per repetition, measured just before its runs

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)


def lexical_floor(repo: Path, languages: list[str], task: str) -> tuple[float, int]:
    """Read every non-test code file of the languages and rank them by BM25 for the task: (seconds, files)."""
    bm25_rank({"warm.py": "import bm25s"}, "bm25s")  # bm25s's import and first call are not the floor's
    started = time.perf_counter()
    docs = source_files(repo, languages)
    bm25_rank(docs, task)
    return time.perf_counter() - started, len(docs)


@dataclass
class Run:
    seconds: float
    rss_mb: float  # peak resident set (GNU time's %M)
    tree_rss_mb: float  # with its worker processes (sampled)
    chunks: int  # chunks embedded
    load: float  # 1-minute load average when it started
    cpu: float = 0.0  # user + system seconds of the CLI (GNU time's %U + %S): less hostage to a busy machine's load


@dataclass
class Version:
    label: str
    main: Path
    options: list[str] = field(default_factory=list)  # more CLI options for its runs
    cold: list[Run] = field(default_factory=list)
    warm: list[Run] = field(default_factory=list)

    def median(self, runs: list[Run]) -> float:
        return statistics.median(r.seconds for r in runs) if runs else 0.0

    def peak_rss(self) -> float:
        return max((r.rss_mb for r in self.cold), default=0.0)

    def peak_tree_rss(self) -> float:
        return max((r.tree_rss_mb for r in self.cold), default=0.0)


@dataclass
class Extra:
    """What `--index-alone`, `--rewrite` and `--index-all` measured (the tool under test)."""

    index_s: float = 0.0
    indexed: int = 0
    rewritten: int = 0
    rewrite_s: float = 0.0
    rewrite_chunks: int = 0
    update_after_rewrite_s: float = 0.0
    index_all: dict = field(default_factory=dict)


@dataclass
class Row:
    repo: str
    files: int
    task: str
    floor: Floor
    versions: list[Version]
    extra: Extra


def wait_for_load(max_load: float, patience: float) -> float:
    """Sleep until the 1-minute load average is below max_load (or patience seconds passed); the load then."""
    deadline = time.monotonic() + patience
    load = os.getloadavg()[0]
    while load >= max_load and time.monotonic() < deadline:
        time.sleep(5)
        load = os.getloadavg()[0]
    return load


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants now, in MB (the sum of their VmRSS: pages they share are
    counted in each, so this is an upper bound); 0 once it is gone."""
    total_kb, todo = 0, [pid]
    while todo:
        proc = Path("/proc") / str(todo.pop())
        try:
            status = (proc / "status").read_text()
            total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
            for task in (proc / "task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError):  # it ended while being read
            continue
    return total_kb / 1024


class _TreeSampler(threading.Thread):
    """The largest tree_rss_mb of a process seen while it runs, sampled every SAMPLE_S: what its worker processes
    (the indexer's parsers) hold comes on top of the process's own peak."""

    SAMPLE_S = 0.05

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mb, self.done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.SAMPLE_S):
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self.pid))


@dataclass
class Answer:
    json: dict
    seconds: float
    rss_mb: float  # its peak resident set, or a worker's it waited for if larger (GNU time's %M)
    tree_rss_mb: float  # the largest sampled sum over it and its descendants
    cpu_s: float = 0.0  # user + system seconds (GNU time's %U + %S, the CLI and the workers it waited for)


GNU_TIME = Path("/usr/bin/time")  # GNU time: it waits for the CLI itself and reports that process's own peak RSS


def run_cli(main: Path, python: str, args: list[str], timeout: float) -> Answer:
    """Run the CLI and measure it. The peak RSS is GNU time's %M: a process's ru_maxrss (os.wait4, RUSAGE_CHILDREN)
    starts from its parent's resident set at the fork, so a CLI forked from this process would be charged this
    process's memory; forked from GNU time (a few MB) it is charged its own. The worker sum is sampled from /proc."""
    if not GNU_TIME.is_file():
        raise RuntimeError(f"bench.first_answer needs GNU time at {GNU_TIME} for a run's own peak memory "
                           "(apt-get install time)")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        started = time.perf_counter()
        child = subprocess.Popen([str(GNU_TIME), "-f", "%M %U %S", "-o", rss_file.name, python, str(main), *args],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"})
        killer, sampler = threading.Timer(timeout, child.kill), _TreeSampler(child.pid)
        killer.start()
        sampler.start()
        try:
            child.wait()
        finally:
            killer.cancel()
            sampler.done.set()
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])}: exit {child.returncode}: "
                               f"{err.read().decode(errors='replace')[-800:]}")
        rss_kib, user, system = rss_file.read().split()[-3:]
        rss = int(rss_kib) / 1024
        return Answer(json.loads(out.read()), wall, rss, max(sampler.peak_mb, rss), float(user) + float(system))


def _timed(version: Version, args: argparse.Namespace, cli_args: list[str]) -> Run:
    load = wait_for_load(args.max_load, args.load_wait)
    answer = run_cli(version.main, args.python, cli_args, args.timeout)
    return Run(answer.seconds, answer.rss_mb, answer.tree_rss_mb, int(answer.json.get("chunks_embedded", -1)), load,
               answer.cpu_s)


def _index_only(repo: Path, index_path: Path) -> tuple[float, int]:
    """The update alone, in this process: (seconds, files indexed)."""
    from code_assistant.index import embeddings, store
    from code_assistant.index.indexer import Indexer

    embedder = embeddings.make_embedder("local")
    chunks = store.LazyChunkStore(index_path, repo, embedder.name)
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


def _extra(repo: Path, index: Path, version: Version, args: argparse.Namespace, work: Path, task: str) -> Extra:
    extra = Extra()
    where = ["--repo", str(repo), "--index-path", str(index)]
    query = [*where, "--task", task, "--context-only", "--json"]
    name = repo.name
    if args.index_alone:
        logger.info("index alone, cold ...")
        extra.index_s, extra.indexed = _index_only(repo, work / f"{name}-index-only")
    if args.rewrite:
        extra.rewritten = _rewrite(repo, args.rewrite)
        logger.info("query after rewriting %d files ...", extra.rewritten)
        after = run_cli(version.main, args.python, query, args.timeout)
        extra.rewrite_s, extra.rewrite_chunks = after.seconds, int(after.json.get("chunks_embedded", -1))
        _rewrite(repo, args.rewrite)
        extra.update_after_rewrite_s, _ = _index_only(repo, work / f"{name}-index-only")
    if args.index_all:
        logger.info("index --json (everything embedded) ...")
        extra.index_all = run_cli(version.main, args.python, ["index", *where, "--json"], args.timeout).json
    return extra


def _index_dir(work: Path, repo: str, version: int, rep: int) -> Path:
    return work / f"{repo}-v{version}-{rep}-index"


def measure(source: Path, args: argparse.Namespace, work: Path) -> Row:
    name = source.name if source.name not in ("repo", ".git") else source.parent.name
    repo = work / name
    logger.info("copying %s", source)
    shutil.copytree(source, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    counts = code_languages(repo)
    task = args.task or TASKS[main_language(counts)]
    floor = Floor(floor_languages(counts))
    after = Version("after", args.main)
    versions = [*([Version("before", args.before)] if args.before else []), after,
                *([Version("after, --embed-budget 0", args.main, ["--embed-budget", "0"])] if args.no_embed else [])]
    query = ["--task", task, "--context-only", "--json"]
    for rep in range(args.runs):
        wait_for_load(args.max_load, args.load_wait)
        seconds, floor.files = lexical_floor(repo, floor.languages, task)
        floor.times.append(seconds)
        logger.info("%s: floor %.3f s (%d %s files)", name, seconds, floor.files, "+".join(floor.languages))
        for number, version in enumerate(versions):
            cli = ["--repo", str(repo), *query, *version.options, "--index-path", str(_index_dir(work, name, number,
                                                                                                   rep))]
            version.cold.append(_timed(version, args, cli))
            version.warm.append(_timed(version, args, cli))
            logger.info("%s %s run %d: cold %.2f s (%.0f MB, %d chunks), warm %.2f s (cpu %.2f s)", name,
                        version.label, rep + 1, version.cold[-1].seconds, version.cold[-1].rss_mb,
                        version.cold[-1].chunks, version.warm[-1].seconds, version.warm[-1].cpu)
    extra = _extra(repo, _index_dir(work, name, versions.index(after), args.runs - 1), after, args, work, task)
    return Row(name, sum(1 for p in repo.rglob("*") if p.is_file()), task, floor, versions, extra)


def _verdict(value: float, limit: float) -> str:
    return f"met (≤ {limit:.2f})" if value <= limit else f"**missed** (> {limit:.2f})"


def _spread(runs: list[Run]) -> str:
    times = sorted(r.seconds for r in runs)
    return f"{statistics.median(times):.2f} s ({times[0]:.2f}–{times[-1]:.2f})" if times else ""


def render(rows: list[Row], args: argparse.Namespace) -> str:
    tasks = "; ".join(f"{r.repo}: {r.task!r}" for r in rows)
    out = [f"First answer on never-seen repositories, median of {args.runs} (min–max); tasks: {tasks}", "",
           ("| repository | floor | tool | cold first context | chunks | warm | warm CPU (user + sys) "
            "| peak RSS (with workers) | cold ≤ 1 s + 15 × floor "
            "| warm ≤ 0.5 s + 4 × floor | RSS ≤ 300 MB | load |"),
           "|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|"]
    for r in rows:
        floor = f"{r.floor.seconds:.3f} s ({r.floor.files} {'+'.join(r.floor.languages)} files of {r.files})"
        cold_limit = COLD_TARGET[0] + COLD_TARGET[1] * r.floor.seconds
        warm_limit = WARM_TARGET[0] + WARM_TARGET[1] * r.floor.seconds
        for v in r.versions:
            loads = [run.load for run in v.cold + v.warm]
            chunks = "/".join(str(run.chunks) for run in v.cold)
            rss = f"{v.peak_rss():.0f} MB ({v.peak_tree_rss():.0f} MB)"
            cpu = statistics.median(run.cpu for run in v.warm) if v.warm else 0.0
            out.append(f"| {r.repo} | {floor} | {v.label} | **{_spread(v.cold)}** | {chunks} | {_spread(v.warm)} | "
                       f"{cpu:.2f} s | {rss} | {_verdict(v.median(v.cold), cold_limit)} | {_verdict(v.median(v.warm), warm_limit)} | "
                       f"{_verdict(v.peak_rss(), RSS_TARGET_MB)} | {min(loads):.2f}–{max(loads):.2f} |")
    extras = [r for r in rows if r.extra.indexed or r.extra.rewritten]
    if extras:
        out += ["", "| repository | index alone (non-model) | after rewriting N files: query / update alone |",
                "|---|---:|---|"]
        for r in extras:
            e = r.extra
            rate = e.indexed / e.index_s if e.index_s else 0.0
            alone = f"{e.index_s:.1f} s ({e.indexed} files, {rate:.0f} files/s)" if e.indexed else ""
            rewrite = (f"N={e.rewritten}: {e.rewrite_s:.1f} s ({e.rewrite_chunks} chunks) / "
                       f"{e.update_after_rewrite_s:.2f} s" if e.rewritten else "")
            out.append(f"| {r.repo} | {alone} | {rewrite} |")
    full = [r for r in rows if r.extra.index_all]
    if full:
        out += ["", "| repository | `index`: chunks embedded | reused | seconds | chunks/s |",
                "|---|---:|---:|---:|---:|"]
        for r in full:
            a = r.extra.index_all
            out.append(f"| {r.repo} | {a['chunks_embedded']} | {a['chunks_reused']} | {a['seconds']} | "
                       f"{a['chunks_embedded'] / a['seconds'] if a['seconds'] else 0:.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--task", default=None, help="the task (default: TASKS, by the repository's main language)")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of the cold and warm runs (the median)")
    parser.add_argument("--main", type=Path, default=ROOT / "main.py", help="the tool under test")
    parser.add_argument("--before", type=Path, help="another version's main.py, run alongside (the 'before' row)")
    parser.add_argument("--no-embed", action="store_true",
                        help="also run the tool under test with --embed-budget 0 (no model work, no vectors read)")
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a 1-minute load below this")
    parser.add_argument("--load-wait", type=float, default=300, help="seconds to wait for it before running anyway")
    parser.add_argument("--index-alone", action="store_true", help="also time the non-model index in this process")
    parser.add_argument("--rewrite", type=int, default=0, help="files rewritten before one more query (0: skip)")
    parser.add_argument("--index-all", action="store_true", help="also embed everything with `main.py index`")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout", type=float, default=6 * 3600)
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed after)")
    parser.add_argument("--out", type=Path, help="also write every run's numbers here (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[first_answer] %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # the floor's index, built every repetition
    with tempfile.TemporaryDirectory(prefix="first-answer-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = [measure(repo.resolve(), args, work) for repo in args.repos]
    if args.out:
        args.out.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1, default=str), encoding="utf-8")
    print(render(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
