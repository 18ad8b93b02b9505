"""What the model's tools cost (issue 44, "Measure" 2): the tokens their declaration adds to a plan request, and each
tool's output and wall time on large trees.

    python -m bench.tools_cost schema [--repo examples/inventory] [--windows 2048 4096 8192 32768]
    python -m bench.tools_cost speed /tmp/toolscost/prettier /tmp/bigrepo [--repeat 3] [--hang-timeout 30]

`schema`: the plan request a run builds for the repository (index, baseline test run, context sized to the window:
bench/real_model.py's request) with the tools declared natively (the `tools` JSON, and the system message's
"Looking around" paragraph), described in words (`--tools json`: the paragraph lists them) and with none
(`--no-tools`), counted with `code_assistant.tokens.count_tokens`. The request is sized to the window, so the tools'
price shows as context the request no longer holds.

`speed`: each tool through the product's Toolbox (`Workspace.tools.box`, read-only) on each repository, indexed first
(no model on that path): the first call on a new box (the file list made) and `--repeat` more on the same box (the
list kept for LIST_TTL_S): output tokens, lines, and seconds. A pattern that backtracks without end is run in a child
process killed after `--hang-timeout` seconds, so a hang is reported, not suffered.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "Make the failing tests in tests/test_stock.py pass"
HANG_PATTERN = r"(\w+\s?)+$"  # nested quantifiers: exponential on a long word followed by a character \w cannot match


# ----- the schema's price ---------------------------------------------------------------------------------------
def schema(repo: Path, windows: list[int], test_command: str, task: str) -> list[str]:
    from code_assistant import tokens
    from code_assistant.agent.kit import request_config
    from code_assistant.agent.requests import PLAN_ANSWER, PlanRequest, Requests
    from code_assistant.index import embeddings, indexer, store
    from code_assistant.model.fitting import message_tokens
    from code_assistant.model.window import ContextWindow, ContextWindowError
    from code_assistant.settings import load_settings
    from code_assistant.tools.box import Form
    from code_assistant.verify.runner import TestRunner
    from code_assistant.workspace import Workspace

    rows = [("| window | tools | declared | `tools` JSON | system paragraph | the schema's price | request: messages "
             "+ `tools` | context | context lost to the tools |"), "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy = work / "repo"
        shutil.copytree(repo, copy)
        settings = load_settings(copy, test_command=test_command, index_path=str(work / "index"))
        embedder = embeddings.make_embedder("local")
        chroma = store.open_client(settings.index_path)
        chunks = store.ChunkStore(chroma, store.collection_for(chroma, copy, embedder.name))
        index, _ = indexer.Indexer(copy, settings.index_path, embedder, chunks).update()
        baseline = TestRunner(settings.test_command, cwd=copy, timeout=120).run()
        with Workspace(settings) as workspace:
            for window in windows:
                plain = None
                for mode in ("off", Form.NATIVE, Form.JSON):
                    box = None if mode == "off" else workspace.tools.box(copy, lambda: index, form=Form(mode))
                    requests = Requests(request_config(settings), ContextWindow(window, "--context-window"), tools=box)
                    label = {"off": "--no-tools", Form.NATIVE: "--tools native", Form.JSON: "--tools json"}[mode]
                    try:
                        messages, context = requests.plan(PlanRequest(index=index, task=task, baseline=baseline))
                    except ContextWindowError as exc:
                        rows.append(f"| {window} | {label} | | | | | **refused**: {str(exc).split(':')[1].strip()} "
                                    f"| | |")
                        continue
                    declared = box.declared() if box else None
                    json_tokens = tokens.count_tokens(json.dumps(declared)) if declared else 0
                    paragraph = tokens.count_tokens(requests.tools_text(PLAN_ANSWER)) if box else 0
                    total = message_tokens(messages) + json_tokens
                    plain = plain or (context.tokens if box is None else None)
                    lost = f"{plain - context.tokens}" if box is not None and plain is not None else ""
                    names = ", ".join(box.names) if box else "none"
                    rows.append(f"| {window} | {label} | {names} | {json_tokens} | {paragraph} | "
                                f"{json_tokens + paragraph} | {total} | {context.tokens} | {lost} |")
    return rows


# ----- each tool on a large tree ---------------------------------------------------------------------------------
def _calls(index, files: list[str], repo: Path) -> list[tuple[str, str, dict]]:
    """The calls timed on a repository: a search, greps common and rare (the whole tree read either way), with a
    glob of its commonest extension, the most-defined name and a name defined once, the largest file a read shows."""
    from code_assistant.gate import MAX_READ_BYTES

    defined: Counter[str] = Counter()
    for path in index.files:
        for symbol in index.files[path].symbols:
            defined[symbol.qualname.split(".")[-1]] += 1
    names = {name: n for name, n in defined.items() if re.fullmatch(r"[A-Za-z_$][\w$]*", name)}
    common = max(names, key=lambda name: (names[name], name))
    rare = next(name for name, n in sorted(names.items()) if n == 1 and len(name) > 6)
    sizes = {f: (repo / f).stat().st_size for f in files if (repo / f).is_file()}
    largest = max((f for f in sizes if sizes[f] <= MAX_READ_BYTES), key=lambda f: sizes[f])
    extension = Counter(Path(f).suffix for f in files if Path(f).suffix).most_common(1)[0][0]
    return [("search", "a question", {"query": "where are command line options parsed and validated"}),
            ("grep", "a common word (capped)", {"pattern": r"\bimport\b"}),
            ("grep", "no match (every file read)", {"pattern": r"\bno_such_name_anywhere\b"}),
            ("grep", f"alternation, under **/*{extension}", {"pattern": r"def (get|set)_\w+|function (get|set)\w*",
                                                             "path_glob": f"**/*{extension}"}),
            ("symbol", f"the most-defined name (`{common}`, {names[common]} definitions)", {"name": common}),
            ("symbol", f"a name defined once (`{rare}`)", {"name": rare}),
            ("read", f"the largest file it shows ({largest}, {sizes[largest] // 1024} KiB)", {"path": largest})]


def _one_call(repo: Path, index_path: Path, tool: str, arguments: dict) -> dict:
    from code_assistant import tokens
    from code_assistant.settings import load_settings
    from code_assistant.workspace import Workspace

    settings = load_settings(repo, index_path=str(index_path))
    index = _index(repo, index_path)
    with Workspace(settings) as workspace:
        box = workspace.tools.box(repo, lambda: index, read_only=True)
    print("ready", flush=True)
    started = time.perf_counter()
    made = box.call(tool, arguments)
    return {"seconds": round(time.perf_counter() - started, 2), "tokens": tokens.count_tokens(made.result.text),
            "summary": made.result.summary}


def _index(repo: Path, index_path: Path):  # -> RepoIndex
    from bench.localize import InProcess

    index, _ = InProcess(index_path.parent).update(repo, index_path.name)
    return index


def speed(repos: list[Path], repeat: int, hang_timeout: float, index_root: Path) -> list[str]:
    from code_assistant import tokens
    from code_assistant.settings import load_settings
    from code_assistant.tools.files import RepoView
    from code_assistant.workspace import Workspace

    rows = [("| repository | tool | call | output tokens | lines | summary (the last call) "
             "| calls that say they stopped early | first call s | again s (median) |"),
            "|---|---|---|---:|---:|---|---|---:|---:|"]
    for repo in repos:
        index_path = index_root / repo.name
        started = time.perf_counter()
        index = _index(repo, index_path)
        settings = load_settings(repo, index_path=str(index_path))
        files = RepoView(repo, exclude=[settings.index_path, settings.state_path]).files()
        print(f"{repo}: {len(files)} visible files, {len(index.files)} indexed "
              f"({time.perf_counter() - started:.0f} s to index)", file=sys.stderr, flush=True)
        label = f"{repo.name} ({len(files):,} files)"
        for tool, what, arguments in _calls(index, files, repo):
            with Workspace(settings) as workspace:
                box = workspace.tools.box(repo, lambda index=index: index, read_only=True)
            times, stopped = [], 0
            for _ in range(1 + repeat):
                box.new_answer()
                t0 = time.perf_counter()
                made = box.call(tool, arguments)
                times.append(time.perf_counter() - t0)
                stopped += "were not read" in made.result.text
            text = made.result.text
            rows.append(f"| {label} | {tool} | {what} | {tokens.count_tokens(text)} | {len(text.splitlines())} | "
                        f"{made.result.summary[:90].replace('|', '/')} | "
                        f"{f'{stopped} of {1 + repeat}' if stopped else ''} | {times[0]:.2f} | "
                        f"{statistics.median(times[1:]) if repeat else times[0]:.2f} |")
            print(rows[-1], file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "bench.tools_cost", "call", str(repo), str(index_path), "grep",
                   json.dumps({"pattern": HANG_PATTERN})]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert child.stdout is not None
        child.stdout.readline()  # "ready": the child has its index and box; the call starts now
        t0 = time.perf_counter()
        try:
            out = json.loads(child.communicate(timeout=hang_timeout)[0].strip().splitlines()[-1])
            cells = f"{out['tokens']} | | {out['summary'][:90]} | | {out['seconds']:.2f} | |"
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            cells = f"– | | **no answer: killed after {hang_timeout:g} s** | | > {hang_timeout:g} | |"
        rows.append(f"| {label} | grep | a backtracking pattern `{HANG_PATTERN}` | {cells}")
        print(rows[-1], f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("schema", help="the tokens the tools add to a plan request")
    s.add_argument("--repo", type=Path, default=ROOT / "examples" / "inventory")
    s.add_argument("--windows", type=int, nargs="+", default=[2048, 4096, 8192, 32768])
    s.add_argument("--test-command", default=f"{sys.executable} -m pytest -q")
    s.add_argument("--task", default=TASK)
    v = sub.add_parser("speed", help="each tool's output and time on large trees")
    v.add_argument("repos", type=Path, nargs="+")
    v.add_argument("--repeat", type=int, default=3)
    v.add_argument("--hang-timeout", type=float, default=30.0)
    v.add_argument("--index", type=Path, default=Path("/tmp/toolscost/index"))
    c = sub.add_parser("call", help="one call in this process, its time and size as JSON (speed's child)")
    c.add_argument("repo", type=Path)
    c.add_argument("index_path", type=Path)
    c.add_argument("tool")
    c.add_argument("arguments")
    args = p.parse_args(argv)
    if args.what == "schema":
        print("\n".join(schema(args.repo, args.windows, args.test_command, args.task)))
    elif args.what == "speed":
        print("\n".join(speed(args.repos, args.repeat, args.hang_timeout, args.index)))
    else:
        print(json.dumps(_one_call(args.repo, args.index_path, args.tool, json.loads(args.arguments))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
