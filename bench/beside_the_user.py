"""A soak of the promise "it never loses a byte of your work": the CLI runs against the scripted server many times
(failing, succeeding and undone, succeeding and kept, killed with SIGKILL and recovered, failing after the
user changed the very line the assistant wrote — asked once more, touching it again —, succeeding on the second
answer, written around the writer's lines, and undone) while a writer process
appends lines to random tracked files at random moments, as a person with an editor open would.

    python -m bench.beside_the_user [--runs 60] [--seed 1] [--work /tmp/beside] [--out results.json]
    python -m bench.beside_the_user --main /old/checkout/main.py --scenarios fail kill_recover   # a before row

Each episode starts from a fresh copy of a small repository (calc.py and text.py with a bug each, far from their
ends; two more modules; a test file whose tests sleep a little, to widen the windows). After the episode (and its
undo or recovery) it checks every tracked file: every line the writer wrote is there (a line lost is a failure), and
where the assistant's change was taken out (or kept), every other byte is what it would be without the assistant (or
with exactly its change). A file the assistant reported as a conflict (the same lines changed on both sides) is left
as the writer had it; its bytes are not compared, its lines are. Prints a table; --out writes the raw episodes.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.repos import answer, modify
from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
PAD = "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(4))
REPO = {
    "calc.py": f'"""Calculator."""\n\n\ndef add(a, b):\n    return a - b\n{PAD}',
    "text.py": f'"""Text."""\n\n\ndef shout(s):\n    return s.lower()\n{PAD}',
    "util.py": f'"""Util."""\n{PAD}',
    "other.py": f'"""Other."""\n{PAD}',
    "tests/test_app.py": ("import random, time\nfrom calc import add\nfrom text import shout\n\n\n"
                          "def test_add():\n    time.sleep(random.uniform(0.1, 0.6))\n    assert add(2, 3) == 5\n\n\n"
                          "def test_shout():\n    assert shout('hi') == 'HI'\n"),
    "pytest.ini": "[pytest]\npythonpath = .\n",
}
TRACKED = ["calc.py", "text.py", "util.py", "other.py", "tests/test_app.py"]
RIGHT = [modify("calc.py", "    return a - b", "    return a + b"), modify("text.py", "return s.lower()", "return s.upper()")]
WRONG = [modify("calc.py", "    return a - b", "    return a * b")]
WRONG_AGAIN = [modify("calc.py", "    return a * b", "    return a ** b")]
RIGHT_AFTER_WRONG = [modify("calc.py", "    return a * b", "    return a + b"), RIGHT[1]]
SCENARIOS = ("fail", "pass_undo", "pass_keep", "kill_recover", "overlap", "fix_undo")
UNDONE = ("pass_undo", "fix_undo")
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

WRITER = r"""
import random, signal, sys, time
repo, log, seed, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
files = sys.argv[5:]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
rng = random.Random(seed)
n = 0
with open(log, "a", encoding="utf-8") as out:
    while not stop:
        time.sleep(rng.uniform(0.02, 0.4))
        if stop:
            break
        name = rng.choice(files)
        line = f"# writer {tag}-{n}\n"
        with open(f"{repo}/{name}", "a", encoding="utf-8") as handle:
            handle.write(line)
        out.write(f"{name}\t{line}")
        out.flush()
        n += 1
"""


@dataclass
class Episode:
    number: int
    scenario: str
    exit_codes: list[int] = field(default_factory=list)
    writes: int = 0
    lines_lost: int = 0
    bytes_differ: list[str] = field(default_factory=list)  # files whose other bytes are not what they should be
    merged: int = 0
    conflicts: int = 0
    conflict_files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the last stderr line of a command that exited 2
    seconds: float = 0.0


def _env(work: Path, url: str) -> dict[str, str]:
    return {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k", "XDG_CACHE_HOME": str(work / "cache"),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "CODE_ASSISTANT_EMBED_BUDGET": "0"}


MAIN = [ROOT / "main.py"]  # the tool under test (--main: another checkout's, for a before/after)


def _cli(repo: Path, *args: str, command: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, str(MAIN[0]), *command, "--repo", str(repo), *args]


def _run_args(as_json: bool = True) -> tuple[str, ...]:
    return ("--task", "fix add and shout", "--test-command", PYTEST, "--max-iterations", "2", "--no-reproduce",
            *(["--json"] if as_json else []))


def _outcomes(text: str, ep: Episode) -> None:
    """Count merged and conflicting files from a --json result or from --recover's lines."""
    try:
        taken = json.loads(text.strip().splitlines()[-1]).get("taken_back", []) if text.strip() else []
        fates = [(t["path"], t["outcome"]) for t in taken]
    except (ValueError, IndexError, AttributeError):
        fates = []
        for line in text.splitlines():
            if line.startswith("[Recovered: ") and ": " in line[12:]:
                path, rest = line[12:].split(": ", 1)
                fates.append((path, rest.split(" ", 1)[0]))
    for path, fate in fates:
        if fate == "merged":
            ep.merged += 1
        elif fate == "conflict":
            ep.conflicts += 1
            ep.conflict_files.append(path)


def episode(number: int, scenario: str, work: Path, rng: random.Random) -> Episode:
    ep = Episode(number, scenario)
    repo = work / f"ep{number:03d}"
    shutil.rmtree(repo, ignore_errors=True)
    for rel, text in REPO.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "base"], cwd=repo, check=True)
    expected = {rel: REPO[rel] for rel in TRACKED}
    if scenario == "pass_keep":
        expected["calc.py"] = expected["calc.py"].replace("return a - b", "return a + b")
        expected["text.py"] = expected["text.py"].replace("return s.lower()", "return s.upper()")
    def user_edits_the_runs_line(request: dict) -> str:  # overlap: the same line changed by both hands
        calc = repo / "calc.py"
        calc.write_text(calc.read_text().replace("return a * b\n", "return a * b  # the user's\n", 1))
        return answer(*WRONG_AGAIN)
    script = {"fail": [answer(*WRONG), {"sleep": rng.uniform(0.1, 1.0), "answer": answer(*WRONG_AGAIN)}],
              "fix_undo": [answer(*WRONG), {"sleep": rng.uniform(0.1, 1.0), "answer": answer(*RIGHT_AFTER_WRONG)}],
              "overlap": [answer(*WRONG), user_edits_the_runs_line, answer(*WRONG_AGAIN)],
              "kill_recover": [answer(*RIGHT)]}.get(scenario, [{"sleep": rng.uniform(0.0, 0.8), "answer": answer(*RIGHT)}])
    log = work / f"ep{number:03d}.writes"
    log.unlink(missing_ok=True)
    started = time.perf_counter()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(repo), str(log), str(rng.randrange(1 << 30)),
                               str(number), *TRACKED])
    try:
        with ScriptedServer(script) as server:
            env = _env(work, server.url)
            if scenario == "kill_recover":
                proc = subprocess.Popen(_cli(repo, *_run_args(as_json=False)), stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL,
                                        text=True, env=env, start_new_session=True)
                assert proc.stdout is not None
                for line in proc.stdout:
                    if line.startswith("[Testing"):
                        break
                time.sleep(rng.uniform(0.0, 0.5))
                os.killpg(proc.pid, signal.SIGKILL)
                ep.exit_codes.append(proc.wait())
                time.sleep(rng.uniform(0.1, 0.6))  # the user goes on editing before recovering
                recovered = subprocess.run(_cli(repo, "--recover"), capture_output=True, text=True, env=env)
                ep.exit_codes.append(recovered.returncode)
                _outcomes(recovered.stdout, ep)
            else:
                run = subprocess.run(_cli(repo, *_run_args()), capture_output=True, text=True, env=env)
                ep.exit_codes.append(run.returncode)
                if run.returncode == 2:
                    ep.errors.append(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "")
                _outcomes(run.stdout, ep)
                if scenario in UNDONE:
                    time.sleep(rng.uniform(0.0, 0.6))
                    undone = subprocess.run(_cli(repo, "--json", command=("undo",)), capture_output=True, text=True, env=env)
                    ep.exit_codes.append(undone.returncode)
                    if undone.returncode == 2:
                        ep.errors.append(undone.stderr.strip().splitlines()[-1] if undone.stderr.strip() else "")
                    if undone.returncode == 0:
                        _outcomes(undone.stdout, ep)
                    elif run.returncode == 0:  # refused (a conflict): nothing changed, the run's change is there
                        expected["calc.py"] = expected["calc.py"].replace("return a - b", "return a + b")
                        expected["text.py"] = expected["text.py"].replace("return s.lower()", "return s.upper()")
    finally:
        writer.send_signal(signal.SIGTERM)
        writer.wait(timeout=30)
    ep.seconds = round(time.perf_counter() - started, 2)
    _check(repo, log, expected, ep)
    return ep


def _check(repo: Path, log: Path, expected: dict[str, str], ep: Episode) -> None:
    written: dict[str, list[str]] = {rel: [] for rel in TRACKED}
    for entry in log.read_text(encoding="utf-8").splitlines(keepends=True) if log.exists() else []:
        name, line = entry.split("\t", 1)
        written[name].append(line)
    ep.writes = sum(len(lines) for lines in written.values())
    for rel in TRACKED:
        text = (repo / rel).read_text(encoding="utf-8") if (repo / rel).exists() else ""
        present = set(text.splitlines(keepends=True))
        ep.lines_lost += sum(1 for line in written[rel] if line not in present)
        if rel not in ep.conflict_files and text != expected[rel] + "".join(written[rel]):
            ep.bytes_differ.append(rel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new temp dir)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--main", type=Path, default=ROOT / "main.py", help="the tool under test")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args(argv)
    MAIN[0] = args.main
    work = args.work or Path(tempfile.mkdtemp(prefix="beside-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    episodes = []
    for number in range(args.runs):
        chosen = args.scenarios
        scenario = chosen[number % len(chosen)] if number < len(chosen) else rng.choice(chosen)
        ep = episode(number, scenario, work, rng)
        episodes.append(ep)
        print(f"[{number + 1}/{args.runs}] {scenario:13} exit {ep.exit_codes} writes {ep.writes:3} lost "
              f"{ep.lines_lost} differ {ep.bytes_differ or '-'} merged {ep.merged} conflicts {ep.conflicts} "
              f"{ep.seconds} s {ep.errors or ''}", file=sys.stderr, flush=True)
    _table(episodes)
    if args.out:
        args.out.write_text(json.dumps([asdict(e) for e in episodes], indent=1))
    return 0 if all(e.lines_lost == 0 and not e.bytes_differ for e in episodes) else 1


def _table(episodes: list[Episode]) -> None:
    print("| scenario | runs | writes | lines lost | files with other bytes changed | merges clean | conflicting |")
    print("|---|---|---|---|---|---|---|")
    by: dict[str, list[Episode]] = {}
    for ep in episodes:
        by.setdefault(ep.scenario, []).append(ep)
    for name, eps in [*sorted(by.items()), ("all", episodes)]:
        print(f"| {name} | {len(eps)} | {sum(e.writes for e in eps)} | {sum(e.lines_lost for e in eps)} | "
              f"{sum(len(e.bytes_differ) for e in eps)} | {sum(e.merged for e in eps)} | "
              f"{sum(e.conflicts for e in eps)} |")
    codes = Counter(code for ep in episodes for code in ep.exit_codes)
    print(f"\nexit codes: {dict(sorted(codes.items()))}")


if __name__ == "__main__":
    sys.exit(main())
