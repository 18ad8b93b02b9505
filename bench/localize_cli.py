"""The localization bench's CLI mode: the assistant run as a subprocess through its stable contract (stdout is one
JSON object with a ranked "files" list, optionally "context_files" and "chunks_embedded"), and the token-budget
fitting used to estimate a context when a retriever gives only a ranking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench.bm25_baseline import read_text


def rank_of(gold: str | list[str], files: list[str]) -> int | None:
    """1-based rank of the gold file (of the best ranked of several gold files), None when none is ranked."""
    golds = [gold] if isinstance(gold, str) else gold
    found = [files.index(g) + 1 for g in golds if g in files]
    return min(found) if found else None


def golds_of(record: dict) -> list[str]:
    """A record's gold files: `golds` (a patch of several source files, multilang_dev), else its one `gold`."""
    return record.get("golds") or [record["gold"]]


# ------------------------------------------------------------------------------------------------------ budget


def load_token_counter() -> tuple[Callable[[str], int], str]:
    """The project's token counter (tiktoken's cl100k_base, offline)."""
    from code_assistant.tokens import count_tokens

    return count_tokens, "code_assistant.tokens.count_tokens"


def fit_budget(files: list[str], repo: Path, budget: int, count: Callable[[str], int]) -> list[str]:
    """The longest prefix of the ranking whose whole files fit the token budget together."""
    fitted, used = [], 0
    for rel in files:
        text = read_text(repo / rel) or ""
        used += count(text)
        if used > budget:
            break
        fitted.append(rel)
    return fitted


# ------------------------------------------------------------------------------------------------------- CLI


def _as_path(item: object, repo: Path) -> str | None:
    if isinstance(item, dict):
        item = item.get("path") or item.get("file")
    if not isinstance(item, str) or not item:
        return None
    path = item.replace("\\", "/")
    if os.path.isabs(path):
        try:
            path = Path(path).resolve().relative_to(repo.resolve()).as_posix()
        except ValueError:
            return path
    return path.removeprefix("./")


def parse_cli_stdout(stdout: str) -> tuple[dict, str | None]:
    """The one JSON object on stdout; falls back to the last JSON line (and says so) if there is extra text."""
    text = stdout.strip()
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return obj, None
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj, "stdout held text besides the JSON object"
    raise ValueError(f"stdout is not a JSON object: {text[:200]!r}")


def run_cli(cmd: list[str], timeout: float, env: dict[str, str]) -> dict:
    """Run the assistant; never raises. Returns stdout/stderr/returncode/seconds (returncode -1 on timeout)."""
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    except OSError as exc:
        return {"returncode": -1, "stdout": "", "stderr": str(exc), "seconds": 0.0}
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code, err = -1, f"timed out after {timeout:.0f}s\n{err}"
    return {"returncode": code, "stdout": out, "stderr": err, "seconds": round(time.perf_counter() - started, 3)}


def cli_result(run: dict, repo: Path, gold: str | list[str], budget: int, count: Callable[[str], int]) -> dict:
    result: dict = {"seconds": run["seconds"], "returncode": run["returncode"]}
    if run["returncode"] != 0:
        stderr_lines = [line for line in run["stderr"].splitlines() if line.strip()]
        result["error"] = f"exit {run['returncode']}: {stderr_lines[-1].strip() if stderr_lines else '(no stderr)'}"
        result["stderr_tail"] = run["stderr"][-2000:]
        return result
    try:
        obj, warning = parse_cli_stdout(run["stdout"])
    except ValueError as exc:
        result["error"] = str(exc)
        return result
    files = [p for p in (_as_path(f, repo) for f in obj.get("files") or []) if p]
    result.update(files=files[:50], n_files=len(files), tokens=obj.get("tokens"), rank=rank_of(gold, files))
    if isinstance(obj.get("context_files"), list):
        context = [p for p in (_as_path(f, repo) for f in obj["context_files"]) if p]
        result["context_source"] = "context_files"
    else:
        context = fit_budget(files, repo, budget, count)
        result["context_source"] = "estimated from files"
    golds = [gold] if isinstance(gold, str) else gold
    result.update(in_context=any(g in context for g in golds), n_context=len(context), context_files=context,
                  chunks_embedded=obj.get("chunks_embedded"))
    if warning:
        result["warning"] = warning
    return result
