"""One error hierarchy for what the user sees: each error carries its exit status; the CLI prints it as one line.

Errors written for the model (a plan that does not parse, a path it may not touch) are not here: the loop sends
them back to the model instead of ending the run.
"""
from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class AssistantError(Exception):
    """An error that ends the run with one line on stderr and `exit_code` as the process's exit status."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(AssistantError):
    """A usage or configuration problem: a missing repository, a bad setting, an unusable option."""


class UsageError(ConfigError):
    """The command line itself is wrong (an unknown option, a missing argument)."""


class GaveUpWaiting(AssistantError):
    """Waited as long as allowed for something outside the run (a model server) and gave up: the CLI says so in a
    `[...]` line, like the progress it ends, naming the option that allows more."""


def attach_log(exc: BaseException, path: str) -> None:
    """Note on an error which run log the run that raised it was writing (--json reports it)."""
    exc.run_log = path  # type: ignore[attr-defined]


def attached_log(exc: BaseException) -> str | None:
    log = getattr(exc, "run_log", None)
    return log if isinstance(log, str) else None
