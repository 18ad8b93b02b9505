"""A task run on a big tree not indexed yet: the time to its first model request against one cold `git grep`, and
whether the whole run is right.

On a git tree of 40-50k files (bench/README.md says how /tmp/bigtree is built), in this order:

1. `git grep -c WORD` cold (the tree's files evicted from the page cache, as bench/big_tree.py does) and warm;
2. per version (`--before OLD/main.py`, then this checkout's): the tree evicted again, an empty index, and
   `main.py --repo TREE --index-path EMPTY -v --task TASK --test-command CHECK --no-reproduce --json` answered by the
   scripted model server (tests/scripted_server.py, 127.0.0.1): the seconds from the start to the plan request's
   arrival, and to the run's end. CHECK is a pytest file that passes once TARGET holds a marker word (the scripted
   plan adds it), in the tree (the sandbox hides the machine's /tmp) but ignored by git (`.git/info/exclude`: neither
   indexed nor a change of the tree's). Whether the request showed TARGET and the run ended green;
3. this checkout's background completion waited for, then the index brought up to date as the next run would (in
   this process): every file in it, and the marker in TARGET;
4. TARGET put back as it was (`git checkout`) after each run (this checkout's: after step 3).

    python -m bench.big_tree_run /tmp/bigtree [--before /old/main.py]

Prints a markdown table; progress on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.big_tree import TASK, Step, evict, timed, wait_for_completion
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
TARGET = "webpack/lib/node/NodeWatchFileSystem.js"
ANCHOR = 'const getWatchpack = memoize(() => require("watchpack"));'
MARKER = "renamedFileRebuildsGraphMarker"
_PENDING = re.compile(r"indexed .*?: (\d+) files \((\d+) added.*?(?:(\d+) pending)?\) in ([\d.]+)s")


CHECK_DIR = ".bench-big-tree-run"


def check_file(tree: Path) -> Path:
    exclude = tree / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    if f"/{CHECK_DIR}/" not in (exclude.read_text(encoding="utf-8") if exclude.exists() else ""):
        with exclude.open("a", encoding="utf-8") as f:
            f.write(f"\n/{CHECK_DIR}/\n")
    path = tree / CHECK_DIR / "test_marker.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"from pathlib import Path\n\n\ndef test_the_target_holds_the_marker():\n"
                    f"    assert {MARKER!r} in Path({str(tree / TARGET)!r}).read_text()\n", encoding="utf-8")
    return path


def one_run(main: Path, tree: Path, index: Path, check: Path, task: str) -> tuple[Step, Step, str]:
    """A task run with an empty index: (to the first request, to the end, what it said)."""
    arrived: list[float] = []
    shown: list[bool] = []

    def plan(request: dict) -> str:
        arrived.append(time.perf_counter())
        shown.append(TARGET in json.dumps(request))
        return json.dumps({"changes": [{"file_path": TARGET, "action": "modify", "description": "marker",
                                        "search": ANCHOR, "replace": f"{ANCHOR}\n// {MARKER}"}]})

    evict(tree)
    load = os.getloadavg()[0]
    stamped: list[tuple[float, str]] = []
    with ScriptedServer([plan]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "bench", "OPENAI_MODEL": "scripted"}
        started = time.perf_counter()
        test_command = f"{sys.executable} -m pytest -q -p no:cacheprovider {check}"
        proc = subprocess.Popen([sys.executable, str(main), "--repo", str(tree), "--index-path", str(index), "-v",
                                 "--task", task, "--test-command", test_command, "--no-reproduce",
                                 "--max-iterations", "1", "--json"], cwd=main.parent, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
        reader = threading.Thread(target=lambda: stamped.extend((time.perf_counter() - started, line)
                                                                for line in proc.stderr))
        reader.start()
        stdout = proc.stdout.read()
        proc.wait()
        reader.join()
        ended = time.perf_counter()
    stderr = "".join(line for _, line in stamped)
    if not arrived:
        raise SystemExit(f"{main}: no request reached the model: {stderr.strip().splitlines()[-3:]}")
    result = json.loads(stdout) if proc.returncode == 0 else {}
    found = _PENDING.search(stderr)
    index_note = ""
    if found:
        _, added, pending, seconds = found.groups()
        index_note = f"index {float(seconds):.1f} s: {added} files indexed" + (f", {pending} pending" if pending
                                                                               else "")
    index_note += "; " + milestones(stamped, arrived[0] - started)
    said = (f"{TARGET.rsplit('/', 1)[-1]} {'in' if shown[0] else 'NOT in'} the request; run "
            f"{'green' if result.get('success') else 'NOT green (exit ' + str(proc.returncode) + ')'}")
    return (Step("first model request", arrived[0] - started, load, index_note),
            Step("the whole run", ended - started, load, said), said)


_MILESTONES = (("checks, model, sandbox", "sandbox policy for"), ("index", "indexed /"),
               ("baseline", "test run finished"))


def milestones(stamped: list[tuple[float, str]], request: float) -> str:
    """Where the seconds to the first request went, from the -v log's lines as they arrived."""
    parts, last = [], 0.0
    for name, words in _MILESTONES:
        at = next((t for t, line in stamped if words in line), None)
        if at is not None:
            parts.append(f"{name} {at - last:.1f} s")
            last = at
    parts.append(f"the request built {request - last:.1f} s")
    return ", ".join(parts)


def stop_completion(index: Path) -> None:
    """The background completion this bench's run started (its pid in the lock), stopped: the next run is timed alone."""
    for lock in index.glob("repos/*/completing.lock"):
        try:
            os.kill(int(lock.read_text(encoding="utf-8").strip()), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def put_back(tree: Path) -> None:
    subprocess.run(["git", "checkout", "-q", "--", TARGET], cwd=tree, check=True)


def index_holds_the_run(tree: Path, index: Path) -> str:
    """Once the completion is done, the index brought up to date as the next run does: every file in it, and the
    run's marker in TARGET."""
    sys.path.insert(0, str(ROOT))
    from code_assistant.index import embeddings, store
    from code_assistant.index.indexer import Indexer

    embedder = embeddings.make_embedder("local")
    indexer = Indexer(tree, index, embedder, store.LazyChunkStore(index, tree, embedder.name))
    _, stats = indexer.update()
    with_marker = indexer.db.postings.files_with({MARKER.lower()}).get(MARKER.lower(), set())
    files = len(indexer.db.files.paths())
    indexer.db.close()
    return (f"then {stats.changed} changed, {stats.added} added: {files:,} files indexed; the marker in "
            f"{sorted(with_marker) or 'no file'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--word", default="parser", help="what `git grep -c` looks for")
    parser.add_argument("--main", type=Path, default=ROOT / "main.py", help="the tool under test")
    parser.add_argument("--before", type=Path, help="another version's main.py, timed the same way")
    parser.add_argument("--runs", type=int, default=1, help="this checkout's runs (the completions of all but the "
                        "last stopped before the next)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    if subprocess.run(["git", "status", "--porcelain", "--", TARGET], cwd=tree, capture_output=True, text=True,
                      check=True).stdout:
        raise SystemExit(f"{TARGET} has changes of its own: not a tree to measure on")
    scratch = Path(tempfile.mkdtemp(prefix="big-tree-run-"))
    steps: list[Step] = []
    try:
        check = check_file(tree)
        print(f"evicted {evict(tree)} files", file=sys.stderr)
        seconds, load, _ = timed(["git", "grep", "-c", args.word], tree)
        grep = Step(f"`git grep -c {args.word}`, cold", seconds, load)
        seconds, load, _ = timed(["git", "grep", "-c", args.word], tree)
        steps += [grep, Step(f"`git grep -c {args.word}`, warm", seconds, load)]
        afters = [(f"after ({n + 1})" if args.runs > 1 else "after", args.main) for n in range(args.runs)]
        for label, main_py in [*([("before", args.before)] if args.before else []), *afters]:
            print(f"{label}: a task run ...", file=sys.stderr)
            last = label == afters[-1][0]
            try:
                first, whole, _ = one_run(main_py, tree, scratch / ("after" if last else label), check, args.task)
            finally:
                if not last:
                    put_back(tree)
                    stop_completion(scratch / label)
            steps += [Step(f"{label}: {first.name}", first.seconds, first.load, first.note),
                      Step(f"{label}: {whole.name}", whole.seconds, whole.load, whole.note)]
        waited, said = wait_for_completion(scratch / "after")
        steps.append(Step("after: the rest of the index, in the background (waited for after the run)", waited,
                          os.getloadavg()[0], f"{said}; {index_holds_the_run(tree, scratch / 'after')}"))
    finally:
        put_back(tree)
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(tree / CHECK_DIR, ignore_errors=True)
    print(f"tree: {tree}; task: {args.task!r}\n")
    print("| step | seconds | x cold git grep | load | notes |\n|---|---:|---:|---:|---|")
    for step in steps:
        print(f"| {step.name} | {step.seconds:.2f} | {step.seconds / grep.seconds:.1f} | {step.load:.2f} | "
              f"{step.note} |")


if __name__ == "__main__":
    main()
