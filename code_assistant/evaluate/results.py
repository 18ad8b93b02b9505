"""An eval's results: one JSON object a finished case, appended to results.jsonl as each case ends (so a stopped eval
resumes where it was: a case with a line is not run again), beside run.json, what the eval was run with."""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from code_assistant.errors import ConfigError

RESULTS = "results.jsonl"
MANIFEST = "run.json"
FORMAT = 1


@dataclass(frozen=True)
class CaseResult:
    """One case, finished: the judge's verdict and what the agent's run shows."""

    id: str
    verdict: str  # judge.Verdict
    resolved: bool
    language: str = ""
    agent_success: bool | None = None  # the agent's own word (None: it gave none)
    stop_reason: str | None = None
    exit_code: int | None = None  # the agent's exit status (None: stopped at the case's time limit)
    iterations: int = 0
    failing_tests: list[int | None] = field(default_factory=list)  # per tested iteration (steps.RunLog)
    tests: dict[str, str] = field(default_factory=dict)  # FAIL_TO_PASS and PASS_TO_PASS ids with their status
    judge_summary: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = None
    prompt_versions: list[str] = field(default_factory=list)
    model: str = ""
    agent_seconds: float = 0.0
    judge_seconds: float = 0.0
    seconds: float = 0.0  # the whole case: scratch copy, agent, judge
    trajectory: str | None = None
    agent_log: str | None = None  # the agent's stderr
    files_modified: list[str] = field(default_factory=list)
    message: str = ""  # the agent's message or error, or why the case could not be judged
    host: str = ""  # the machine that ran it
    worker: str = ""  # the thread here, or the Dask worker's address
    scratch: str | None = None  # the case's scratch directory, when kept (--keep-scratch): its repo/ as judged
    format: int = FORMAT

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaseResult:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in record.items() if key in known})


class ResultsFile:
    """results.jsonl of one eval's folder: read what is done, append what finishes (one writer: the eval's own
    process, fed by its workers)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / RESULTS
        self._lock = threading.Lock()

    def done(self) -> dict[str, CaseResult]:
        return {result.id: result for result in read_results(self.path)} if self.path.exists() else {}

    def append(self, result: CaseResult) -> None:
        line = json.dumps(result.as_json()) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def check_manifest(self, manifest: dict[str, Any]) -> None:
        """A folder holding another eval's results is refused (its numbers would mix), with the option that differs.
        Writes nothing."""
        path = self.folder / MANIFEST
        if path.exists():
            before = json.loads(path.read_text(encoding="utf-8"))
            changed = [key for key in manifest if key in before and before[key] != manifest[key]]
            if changed and self.path.exists() and self.path.stat().st_size:
                raise ConfigError(f"eval: {self.folder} holds results run with another {changed[0]} "
                                  f"({before[changed[0]]!r}); give another --out, or remove it to start again")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """What this eval is run with, in run.json (checked first: check_manifest)."""
        path = self.folder / MANIFEST
        self.folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_results(path: Path) -> list[CaseResult]:
    """A results file's cases, the last line of an id winning; a line cut short by a crash is skipped."""
    found: dict[str, CaseResult] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(record, dict) and "id" in record and "verdict" in record:
            found[record["id"]] = CaseResult.from_json(record)
    return list(found.values())


def results_path(run: Path) -> Path:
    """An eval named by its folder or its results file."""
    path = run / RESULTS if run.is_dir() else run
    if not path.is_file():
        raise ConfigError(f"eval: no results at {run} (an eval's --out folder, or its {RESULTS})")
    return path
