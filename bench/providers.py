"""Each provider profile of tests/provider_emulator.py through the command line, as a user would point the assistant
at it: one task (fix add() in a two-file repository; the model greps first, natively or in words, then answers the
plan), no flags but --model. Measured per profile: whether the first request was accepted, how the tools went,
whether answers streamed with the server's usage, the usage and the cost, the window and where it came from, and the
requests spent on refusals. llama-cpp-python is the real server with SmolLM2 (tests/llama_server.py), behind the
recording proxy: a small model, so its task is not expected to go green; its row is about the wire.

    python -m bench.providers [--profiles NAME ...] [--no-llama-cpp-python]

The emulator listens on 127.0.0.1, so the known-model table is not asked for hosted models' windows (a server on
this machine runs its own model, whatever its name): their window is the default unless the profile reports one.
"""
from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from code_assistant.model.accepts import Accepts
from code_assistant.model.catalogue import lookup
from code_assistant.model.chat import OpenAIChat
from code_assistant.model.fitting import TOOL_RESULTS_HEAD
from code_assistant.model.window import ContextWindow
from tests.llama_server import LlamaServer, RecordingProxy
from tests.provider_emulator import CHAT, PROFILES, RESPONSES, ProviderEmulator
from tests.repos import PYTEST, answer, modify, python_repo, run_cli

FIX_ADD = answer(modify("calc.py", "    return a - b", "    return a + b"))
GREP = {"name": "grep", "arguments": {"pattern": "def add"}}
WRITTEN_GREP = json.dumps({"tool_calls": [GREP]})
GREP_TOOL = {"type": "function", "function": {"name": "grep", "description": "Search the files for a pattern.",
                                              "parameters": {"type": "object", "properties": {
                                                  "pattern": {"type": "string"}}}}}


def model_turn(request: dict[str, Any]) -> str | dict[str, Any]:
    """A model that greps before it plans: natively when the request declares tools, else in words."""
    said = json.dumps(request.get("messages") or request.get("input") or [])
    if '"role": "tool"' in said or "function_call_output" in said or TOOL_RESULTS_HEAD in said:
        return FIX_ADD
    return {"tool_calls": [GREP]} if request.get("tools") else WRITTEN_GREP


def _line(stdout: str, prefix: str) -> str:
    return next((line for line in stdout.splitlines() if line.startswith(prefix)), "")


def _row(name: str, proc: Any, accepted_first: bool, refused: int, native: bool | None) -> dict[str, str]:
    out = proc.stdout
    window = (re.search(r"\[Window: (\d+) tokens, from ([^\]]+)\]", out)  # learned from a refusal
              or re.search(r"context window (\d+) tokens, from ([^,\]]+)", _line(out, "[Model: ")))
    usage = _line(out, "Model usage: ").removeprefix("Model usage: ")
    log_path = _line(out, "Run log: ").removeprefix("Run log: ")
    steps = [json.loads(x) for x in Path(log_path).read_text().splitlines()] if log_path else []
    wires = sorted({w for s in steps for w in s.get("wires", [])})
    tools = {True: "native", False: "in words", None: "none (the window was too small for them)"}[native]
    if "[Tools: the model server serves no native tool calls" in out:
        tools = "in words, after a refusal"
    return {"profile": name, "first request accepted": "yes" if accepted_first else "no",
            "result": _line(out, "Result: ").removeprefix("Result: ") or f"exit {proc.returncode}",
            "wire": ", ".join(wires), "tools": tools,
            "streaming": "no (counted here)" if "partly counted here" in usage else "yes, with usage",
            "usage and cost": usage.split(" call(s), ", 1)[-1].replace(" completion tokens", " completion"),
            "window known": f"{window.group(1)} ({window.group(2)})" if window else "?",
            "requests spent on refusals": str(refused)}


def emulated(name: str, root: Path) -> dict[str, str]:
    repo = python_repo(root)
    with ProviderEmulator(name, [model_turn] * 6) as emulator:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--model", emulator.profile.model], server_url=emulator.url, timeout=600)
    posts = [r for r in emulator.requests if "body" in r and r["path"].endswith(("/chat/completions", "/responses"))]
    accepted_first = bool(posts) and posts[0]["body"] not in emulator.refused
    accepted = [b for b in [*emulator.bodies(CHAT), *emulator.bodies(RESPONSES)] if b not in emulator.refused]
    native = any(b.get("tools") for b in accepted) if accepted else None
    if not native and any('"tool_calls"' in json.dumps(b.get("messages", "")) for b in accepted):
        native = False  # described in words, without a refusal
    return _row(name, proc, accepted_first, len(emulator.refused), native)


def llama_cpp_python(root: Path) -> dict[str, str]:
    repo = python_repo(root)
    with LlamaServer() as server, RecordingProxy(server.url) as proxy:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=proxy.url, timeout=1800)
    chats = proxy.chats
    refused = [e for e in chats if e["status"] != 200 or (e.get("stream") and not e.get("events"))]
    accepted = [e for e in chats if e not in refused]
    native = any(e["request"].get("tools") for e in accepted) if accepted else None
    return _row("llama-cpp-python (real, SmolLM2)", proc, bool(chats) and chats[0] not in refused, len(refused),
                native)


def with_the_catalogue(name: str) -> tuple[int, str]:
    """A hosted profile's first exchange asked as the model catalogue says the model takes: (requests spent on
    refusals, the wire that answered). In-process: the command line does not ask the catalogue about a model on this
    machine's address, where the emulator is."""
    with ProviderEmulator(name, [FIX_ADD]) as emulator:
        model = emulator.profile.model
        chat = OpenAIChat(model, api_key="k", base_url=emulator.url, accepts=Accepts.known(lookup(model)),
                          window=ContextWindow(8192, "default"), sleep=lambda s: None)
        response = chat.complete([{"role": "system", "content": "You fix code."},
                                  {"role": "user", "content": "Fix add() in calc.py."}], tools=[GREP_TOOL])
    return len(emulator.refused), response.wire


COLUMNS = ("profile", "first request accepted", "result", "wire", "tools", "streaming", "usage and cost",
           "window known", "requests spent on refusals")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", nargs="*", default=list(PROFILES))
    parser.add_argument("--no-llama-cpp-python", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, name in enumerate(args.profiles):
            (Path(tmp) / str(n)).mkdir()
            rows.append(emulated(name, Path(tmp) / str(n)))
        if not args.no_llama_cpp_python:
            (Path(tmp) / "real").mkdir()
            rows.append(llama_cpp_python(Path(tmp) / "real"))
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(row[c] for c in COLUMNS) + " |")
    print("\n| profile, asked as the catalogue says | requests spent on refusals | wire |\n|---|---|---|")
    for name in [n for n in args.profiles if not PROFILES[n].local and lookup(PROFILES[n].model) is not None]:
        refused, wire = with_the_catalogue(name)
        print(f"| {name} | {refused} | {wire} |")


if __name__ == "__main__":
    main()
