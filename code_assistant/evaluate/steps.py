"""What a run log (model/trajectory.py: one JSON object per step) says about its run, for the results: the failing
tests of each tested iteration, the prompt versions and the model. A pure function of the log's lines; only the
run's own steps count (a best-of-N candidate's ran in a scratch copy)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from code_assistant.model.trajectory import READABLE_FORMATS, StepKind

_ITERATIONS = (StepKind.PLAN, StepKind.FIX, StepKind.CANDIDATE)  # the steps that end in a test run of the change


@dataclass(frozen=True)
class RunLog:
    failing: tuple[int | None, ...] = ()  # per tested iteration, in order: how many tests failed (None: red, none named)
    prompt_versions: tuple[str, ...] = ()  # every prompt version the run's requests used, first use first
    model: str = ""


def summarize(lines: list[str]) -> RunLog:
    failing: list[int | None] = []
    versions: list[str] = []
    model = ""
    for line in lines:
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # a line cut short by a crash
        if not isinstance(record, dict) or record.get("format") not in READABLE_FORMATS:
            continue
        if record.get("candidate") is not None and record.get("kind") != StepKind.CANDIDATE:
            continue
        model = record.get("model") or model
        if (version := record.get("prompt_version")) and version not in versions:
            versions.append(version)
        tested = record.get("test_exit_code") is not None or record.get("timed_out")
        if record.get("kind") in _ITERATIONS and tested:
            failed = record.get("tests_failed") or []
            failing.append(len(failed) if failed or record.get("test_exit_code") == 0 else None)
    return RunLog(failing=tuple(failing), prompt_versions=tuple(versions), model=model)


def iterations_recorded(path: Path) -> tuple[int, bool]:
    """A running agent's run log so far (written after every step): how many iterations it has recorded, and
    whether it has ended (its final record)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0, False
    kinds: list[str | None] = []
    for line in lines:
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # the line being written
        if isinstance(record, dict) and record.get("candidate") is None:
            kinds.append(record.get("kind"))
    return sum(kind in _ITERATIONS for kind in kinds), StepKind.FINAL in kinds
