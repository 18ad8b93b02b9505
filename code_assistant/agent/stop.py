"""Why a run stops: a value, not a scattered flag (docs/runs.md, "Why a run stops"). Imports nothing, so the CLI edge can
compare against it without loading the pipeline."""
from __future__ import annotations

from enum import StrEnum


class Stop(StrEnum):
    """Why a run stopped (docs/runs.md, "Why a run stops"); the value is what --json and the run log say."""

    PASSED = "passed"
    MAX_ITERATIONS = "max_iterations"
    NO_PROGRESS = "no_progress"
    COST_CAP = "cost_cap"
    NO_CHANGES = "no_changes"
    INTERRUPTED = "interrupted"
    REFUSED = "refused"
    MODEL_ERROR = "model_error"
    DRY_RUN = "dry_run"
    NO_CANDIDATE = "no_candidate_passed"  # best of N: no attempt passed
    TESTS_NOT_RUN = "tests_not_run"  # the baseline shows the tests cannot run here (exit 2, before any model call)
    CHANGED_OUTSIDE = "changed_outside"  # somebody else changed a file the run wrote, and the answer touched that twice
    ERROR = "error"  # an internal or git error: rolled back, then reported by the CLI
    CRASHED = "crashed"  # the run log's final record of a run that ended without a result (never a RunResult's)
