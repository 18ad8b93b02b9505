"""Peers side by side, one harness, one judge: our agent (the run `eval` starts), mini-swe-agent and aider over the
same cases, each in a scratch copy of its own, against the same model server behind a recording proxy, with the same
wall-clock limit per case and comparable step limits; then our judge on each tree as the agent left it.

    python -m bench.peers CASES --base-url http://127.0.0.1:PORT/v1 --model ALIAS [--agents ours mini aider]
                          [--only ID ...] [--wall 900] [--n-ctx 8192] [--out DIR] [--peers /tmp/code-assistant-peers]
    python -m bench.peers --install [--peers DIR]    # the two peers, pinned, each into its own venv under DIR

Per case and agent: the judge's verdict (the case's test patch applied after the agent stops, its FAIL_TO_PASS and
PASS_TO_PASS read from the test run), wall seconds, model requests, prompt and generated tokens. The tokens are what
the server said in each answer's `usage`, read by a recording proxy in front of it (tests/llama_server.py), the one
count that is the same for all three. Streams (ours and aider stream) are relayed as they come, so an agent that
stops reading an answer stops the server writing it; llama-cpp-python sends no usage in a stream, so the proxy has
the server count them once the agent has stopped, outside its time (the prompt asked again with max_tokens 1; the
answer's text by the server's tokenizer). An answer whose usage is not seen is counted as unknown, never guessed.
Every command line and config is
written to DIR/commands.jsonl; a record a case and agent to DIR/results.jsonl; every request and answer of a run to
DIR/requests/CASE.AGENT.N.jsonl (diffed and replayed by bench/replay.py); the table to stdout.

Ours is the product as `eval` runs it: `main.py --json` in a subprocess on the scratch copy (evaluate/attempt.py).
The peers are pinned (MINI, AIDER), installed into venvs of their own (never this one), and run with HOME in the
scratch directory (aider writes ~/.aider; mini its global config). Unlike ours, neither runs its commands in a
sandbox: they run the model's commands and the test command in the scratch copy as this user.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant.evaluate.attempt import attempt
from code_assistant.evaluate.case_run import EvalConfig, sandbox_for
from code_assistant.evaluate.cases import Case, read_cases
from code_assistant.evaluate.judge import Judgement, Verdict, judge
from code_assistant.evaluate.scratch import materialize
from tests.llama_server import RecordingProxy

MINI = "mini-swe-agent==2.4.6"
AIDER = "aider-chat==0.86.2"
PEERS_PYTHON = "python3.12"  # aider 0.86 wants Python < 3.13; both run on 3.12
DEFAULT_PEERS = Path(tempfile.gettempdir()) / "code-assistant-peers"
STOP_GRACE_S = 20.0
# How long settling may wait, in wall limits: a request an agent left at the limit may be a whole window's prompt,
# which a loaded CPU reads at ~12 tokens a second (8,192 tokens: 11 minutes), and the case after it must not pay it
SETTLE_WALLS = 4
# Comparable step limits: ours plans and then fixes (or samples the plan again) up to its own --max-iterations (3,
# 6 with --small-model, whose iterations are samples: an answer and a test run each; an --ours-arg may set it);
# aider answers, runs the tests and fixes up to 3 times (its own max_reflections, not settable); mini spends a step
# on every shell command (reading a file, running the tests), so it gets several a round. The wall limit is the same.
MINI_STEPS = 12


class Agent(StrEnum):
    OURS = "ours"
    MINI = "mini"
    AIDER = "aider"


@dataclass(frozen=True)
class Setup:
    """What every case and agent is run with."""

    base_url: str  # the model server's, ending in /v1; each run talks to it through a proxy of its own
    model: str  # the server's name for the model (an alias)
    n_ctx: int = 8192  # the server's window, told to each agent (ours: --context-window; aider: its metadata file)
    wall_s: float = 900.0  # per case and agent
    peers: Path = DEFAULT_PEERS  # where the peers' venvs are
    ours_args: tuple[str, ...] = ()  # more options for our run
    test_timeout: float = 120.0


@dataclass
class AgentRun:
    """One agent on one case: the judge's word and what it cost."""

    case: str
    agent: str
    verdict: str
    tests: dict[str, str] = field(default_factory=dict)
    judge_summary: str = ""
    wall_s: float = 0.0
    timed_out: bool = False
    exit_code: int | None = None
    requests: int = 0
    requests_file: str = ""  # every request and answer the proxy relayed, one JSON line each (bench/replay.py)
    refused: int = 0  # requests the server did not answer with 200
    prompt_tokens: int | None = 0  # None: some answer's usage was not seen (a stream)
    completion_tokens: int | None = 0
    message: str = ""


@dataclass(frozen=True)
class Invocation:
    """How an agent was started: its command line, its environment's additions, its config files' text."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def peer_bin(setup: Setup, agent: Agent) -> Path | None:
    """The peer's command in its venv, or None when it is not installed there."""
    found = setup.peers / agent.value / "bin" / ("mini" if agent == Agent.MINI else "aider")
    return found if found.is_file() else None


def peers_python(name: str = PEERS_PYTHON, candidates: list[str] | None = None) -> str:
    """A Python the peers run on that starts: `name` on PATH — unless it is a pyenv shim for a version that is not
    the selected one ("pyenv: python3.12: command not found") — else pyenv's own install of that version."""
    version = name.removeprefix("python")
    if candidates is None:
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
        installed = sorted(pyenv.glob(f"{version}*/bin/{name}"))
        candidates = [p for p in [shutil.which(name)] if p] + [str(p) for p in installed]
    for candidate in candidates:
        try:
            if subprocess.run([candidate, "-c", "import venv"], capture_output=True, timeout=30).returncode == 0:
                return candidate
        except OSError:
            continue
    raise SystemExit(f"bench.peers: no {name} that starts (tried {', '.join(candidates) or 'PATH'}); "
                     f"the peers need Python {version}")


def install(peers: Path, python: str = PEERS_PYTHON) -> None:
    """Each peer, pinned, into a venv of its own under `peers` (a minute or two each)."""
    for agent, requirement in ((Agent.MINI, MINI), (Agent.AIDER, AIDER)):
        venv = peers / agent.value
        if not (venv / "bin" / "python").is_file():
            subprocess.run([peers_python(python), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement], check=True)


def mini_invocation(setup: Setup, url: str, work: Path, task: str) -> Invocation:
    """mini-swe-agent with its text-based config (the tool-call one needs `tool_calls` that the server's template
    does not produce), yolo mode, the limits, and the model through litellm's text-based class."""
    config = {"agent": {"mode": "yolo", "confirm_exit": False, "step_limit": MINI_STEPS,
                        "wall_time_limit_seconds": int(setup.wall_s)},
              "model": {"model_class": "litellm_textbased", "model_name": f"openai/{setup.model}",
                        "model_kwargs": {"api_base": url, "api_key": "local", "temperature": 0}}}
    overrides = work / "mini.yaml"
    text = json.dumps(config, indent=1)  # JSON is YAML
    overrides.write_text(text, encoding="utf-8")
    argv = [str(peer_bin(setup, Agent.MINI)), "-c", "mini_textbased.yaml", "-c", str(overrides), "-t", task, "-y",
            "--exit-immediately", "-o", str(work / "traj.json")]
    env = {"MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "MSWEA_GLOBAL_CONFIG_DIR": str(work / "home" / "mini")}
    return Invocation(argv, env, {"mini.yaml": text})


def aider_invocation(setup: Setup, url: str, work: Path, task: str, test_command: str) -> Invocation:
    """aider with the model's window and a zero price in a metadata file (else it downloads a price list), its test
    command run after each edit, no commits, nothing asked."""
    metadata = {f"openai/{setup.model}": {"max_input_tokens": setup.n_ctx, "max_tokens": setup.n_ctx,
                                          "max_output_tokens": setup.n_ctx // 8, "input_cost_per_token": 0.0,
                                          "output_cost_per_token": 0.0, "litellm_provider": "openai",
                                          "mode": "chat"}}
    metadata_file = work / "aider-model.json"
    text = json.dumps(metadata, indent=1)
    metadata_file.write_text(text, encoding="utf-8")
    argv = [str(peer_bin(setup, Agent.AIDER)), "--model", f"openai/{setup.model}", "--openai-api-base", url,
            "--openai-api-key", "local", "--model-metadata-file", str(metadata_file), "--yes-always",
            "--no-auto-commits", "--no-gitignore", "--no-check-update", "--no-analytics", "--no-pretty",
            "--no-fancy-input", "--test-cmd", test_command, "--auto-test", "--message", task]
    return Invocation(argv, {"HOME": str(work / "home")}, {"aider-model.json": text})


def ours_args(setup: Setup, url: str) -> tuple[str, ...]:
    """Our run's options. --request-timeout is the wall limit, as long as the peers wait (neither has a stall
    guard)."""
    return ("--base-url", url, "--model", setup.model, "--context-window", str(setup.n_ctx),
            "--request-timeout", str(int(setup.wall_s)), *setup.ours_args)


def settle(setup: Setup) -> float:
    """Wait until the server answers a one-token request: an agent stopped at the limit may have left a request the
    server is still working on (llama-cpp-python answers one at a time), which the next agent must not pay for.
    Returns the seconds waited; gives up (raises) after SETTLE_WALLS wall limits."""
    start = time.monotonic()
    body = json.dumps({"model": setup.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}).encode()
    while True:
        request = urllib.request.Request(f"{setup.base_url}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer local"})
        left = SETTLE_WALLS * setup.wall_s - (time.monotonic() - start)
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, left)):
                return time.monotonic() - start
        except OSError:
            if time.monotonic() - start > SETTLE_WALLS * setup.wall_s:
                raise
            time.sleep(min(2.0, setup.wall_s))


def run_peer(invocation: Invocation, repo: Path, work: Path, wall_s: float) -> tuple[int | None, float]:
    """The peer in `repo`, in a process group of its own, stopped (SIGINT, then SIGKILL to the group) at `wall_s`;
    its exit code (None: stopped at the limit) and seconds. Its output goes to work/agent.log."""
    (work / "home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_API_BASE", "_BASE_URL"))}
    env.update({"HOME": str(work / "home"), "OPENAI_API_KEY": "local", "NO_COLOR": "1", "TERM": "dumb",
                **invocation.env})
    start = time.monotonic()
    with (work / "agent.log").open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(invocation.argv, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=wall_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _end_group(proc)
    return code, time.monotonic() - start


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """The peer and whatever it started (the tests it ran, a shell of mini's), whether it ended or not."""
    for sig, wait in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGINT:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what it left behind in its group
            except ProcessLookupError:
                pass
            break


def count(proxy: RecordingProxy) -> dict[str, Any]:
    """Requests and tokens as the server answered them."""
    chats = proxy.chats
    answered = [e for e in chats if e.get("status") == 200]
    usages = [(e.get("usage") if e.get("stream") else (e.get("response") or {}).get("usage")) for e in answered]
    seen = all(isinstance(u, dict) for u in usages)
    return {"requests": len(chats), "refused": len(chats) - len(answered),
            "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usages) if seen else None,
            "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usages) if seen else None}


def run_one(case: Case, agent: Agent, setup: Setup, root: Path, out: Path | None = None) -> AgentRun:
    """The case's repository in a scratch copy under `root`, the agent on it through a proxy, the judge after it;
    how the agent was started is appended to out/commands.jsonl."""
    work = Path(tempfile.mkdtemp(prefix=f"{agent.value}-{case.id[:40]}-", dir=root))
    config = EvalConfig(test_timeout=setup.test_timeout, case_timeout=setup.wall_s)
    sandbox = sandbox_for(config, protected=(work / "index", work / "state", work / "runs"))
    repo = work / "repo"
    try:
        materialize(case.source, repo, sandbox)
    except Exception as exc:  # noqa: BLE001 - any failure to get the repository is the case's error, said
        return AgentRun(case.id, agent.value, Verdict.ERROR, message=f"the repository could not be had: {exc}")
    if agent != Agent.OURS and peer_bin(setup, agent) is None:
        return AgentRun(case.id, agent.value, Verdict.ERROR,
                        message=f"{agent.value} is not installed under {setup.peers} (python -m bench.peers --install)")
    settle(setup)
    with RecordingProxy(setup.base_url, counted=True) as proxy:
        if agent == Agent.OURS:
            args = ours_args(setup, proxy.url)
            invocation = Invocation(["main.py", "--repo", str(repo), "--task", case.task, "--test-command",
                                     case.test_command, "--json", *args])
            done = attempt(repo=repo, task=case.task, test_command=case.test_command, run_args=args,
                           log_dir=work / "runs", scratch=work, stderr_file=work / "agent.log", timeout=setup.wall_s)
            code, seconds = done.exit_code, done.seconds
            said = str(done.outcome.get("stop_reason") or done.outcome.get("error") or "")
        else:
            invocation = (mini_invocation(setup, proxy.url, work, case.task) if agent == Agent.MINI else
                          aider_invocation(setup, proxy.url, work, case.task, case.test_command))
            code, seconds = run_peer(invocation, repo, work, setup.wall_s)
            said = ""
        proxy.count_streams()
        counted = count(proxy)
    recorded = ""
    if out is not None:
        _append(out / "commands.jsonl", {"case": case.id, "agent": agent.value, **asdict(invocation)})
        recorded = str(record_exchanges(proxy, out / "requests", f"{case.id}.{agent.value}"))
    judged: Judgement = judge(case, repo, sandbox, timeout=setup.test_timeout)
    timed_out = code is None
    message = "; ".join(m for m in ("stopped at the wall-clock limit" if timed_out else "", said) if m)
    return AgentRun(case.id, agent.value, judged.verdict, tests=dict(judged.tests), judge_summary=judged.summary,
                    wall_s=round(seconds, 1), timed_out=timed_out, exit_code=code, message=message,
                    requests_file=recorded, **counted)


def record_exchanges(proxy: RecordingProxy, folder: Path, stem: str) -> Path:
    """Every chat request the proxy relayed and its answer, in order, to folder/stem.N.jsonl (N: the first number
    not yet taken, so a second run of the same case and agent sits beside the first): the record two runs are diffed
    by and a run replayed from (python -m bench.replay)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while (folder / f"{stem}.{n}.jsonl").exists():
        n += 1
    path = folder / f"{stem}.{n}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for exchange in proxy.chats:
            out.write(json.dumps(exchange) + "\n")
    return path


def _append(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def table(runs: list[AgentRun]) -> str:
    """Per case and agent, then per agent: resolved, median and total wall, requests and tokens per case."""
    lines = ["| case | agent | verdict | wall s | requests | prompt tok | generated tok |", "|---|---|---|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r.case} | {r.agent} | {r.verdict}{' (time limit)' if r.timed_out else ''} | {r.wall_s:.0f} "
                     f"| {r.requests} | {_n(r.prompt_tokens)} | {_n(r.completion_tokens)} |")
    lines += ["", ("| agent | resolved | median wall s | total wall s | requests/case | prompt tok/case | "
                   "generated tok/case |"), "|---|---:|---:|---:|---:|---:|---:|"]
    for agent in dict.fromkeys(r.agent for r in runs):
        mine = [r for r in runs if r.agent == agent]
        prompt = [r.prompt_tokens for r in mine if r.prompt_tokens is not None]
        generated = [r.completion_tokens for r in mine if r.completion_tokens is not None]
        lines.append(f"| {agent} | {sum(r.verdict == Verdict.RESOLVED for r in mine)}/{len(mine)} "
                     f"| {statistics.median(r.wall_s for r in mine):.0f} | {sum(r.wall_s for r in mine):.0f} "
                     f"| {statistics.mean(r.requests for r in mine):.1f} "
                     f"| {statistics.mean(prompt) if prompt else float('nan'):.0f} "
                     f"| {statistics.mean(generated) if generated else float('nan'):.0f} |")
    return "\n".join(lines)


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", type=Path, nargs="?")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--agents", nargs="+", choices=[a.value for a in Agent], default=[a.value for a in Agent])
    parser.add_argument("--only", nargs="+", default=None, help="only these case ids")
    parser.add_argument("--wall", type=float, default=900.0, help="seconds per case and agent (default 900)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the server's window (default 8192)")
    parser.add_argument("--peers", type=Path, default=DEFAULT_PEERS, help=f"the peers' venvs (default {DEFAULT_PEERS})")
    parser.add_argument("--ours-arg", action="append", default=[], help="one more option for our run (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("peers-runs"))
    parser.add_argument("--install", action="store_true", help="install the pinned peers into --peers and stop")
    args = parser.parse_args(argv)
    if args.install:
        install(args.peers)
        return 0
    if not (args.cases and args.base_url and args.model):
        parser.error("CASES, --base-url and --model are needed (or --install)")
    cases = [c for c in read_cases(args.cases) if args.only is None or c.id in args.only]
    setup = Setup(base_url=args.base_url, model=args.model, n_ctx=args.n_ctx, wall_s=args.wall, peers=args.peers,
                  ours_args=tuple(args.ours_arg))
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="peers-"))
    runs: list[AgentRun] = []
    for case in cases:
        for agent in map(Agent, args.agents):
            load = os.getloadavg()[0]
            run = run_one(case, agent, setup, scratch, out=args.out)
            runs.append(run)
            _append(args.out / "results.jsonl", {**asdict(run), "load_before": round(load, 2),
                                                 "load_after": round(os.getloadavg()[0], 2)})
            print(f"[peers] {case.id} {agent.value}: {run.verdict} in {run.wall_s:.0f} s, {run.requests} requests, "
                  f"{_n(run.prompt_tokens)} prompt tokens (load {load:.1f}) {run.message}", file=sys.stderr)
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
