"""What the model is told about test results and about its own edits. Pure functions; text written for the model."""
from __future__ import annotations

from code_assistant.edit.edits import EditResult
from code_assistant.verify.runner import TestResult, lost_note
from code_assistant.verify.steady import steady_output

OUTPUT_TAIL_CHARS = 6000
MAX_FAILURES = 20


def failure_text(result: TestResult) -> str:
    """Failing tests with their messages and innermost frames, then the tail of the raw output."""
    if result.passed:
        return ""
    lines: list[str] = [f"- {note}"] if (note := lost_note(result)) else []
    for failure in result.failures[:MAX_FAILURES]:
        where = f" ({failure.file}:{failure.line})" if failure.file and failure.line else ""
        message = steady_output(failure.message, result.cwd).strip()[:800]  # "cannot import ... (/tmp/.../calc.py)"
        lines.append(f"- {failure.test_id} [{failure.status}]{where}: {message}")
        lines.extend(f"    at {path}:{line}" for path, line in failure.frames[-3:])
    if len(result.failures) > MAX_FAILURES:
        lines.append(f"- … and {len(result.failures) - MAX_FAILURES} more failing tests")
    if result.timed_out:
        lines.append(f"The test command timed out ({result.summary()}); a test probably hangs or loops forever.")
    lines.append(f"Test output (tail):\n```\n{shown_output(result)[-OUTPUT_TAIL_CHARS:].strip()}\n```")
    return "\n".join(lines)


def shown_output(result: TestResult) -> str:
    """The run's output as the model sees it: the same for the same run in any folder at any time (no timings, no
    scratch path), so that two runs of one task send the same requests."""
    return steady_output(result.output, result.cwd)


def failure_signature(result: TestResult) -> frozenset[tuple[str, str]]:
    """What 'the same failures' means for the no-progress rule: the failing ids with their first message line."""
    lost = {("<no longer run>", str(result.lost))} if result.lost else set()  # fewer_tests' green that is not
    if result.failures or lost:
        return frozenset({(f.test_id, (f.message.strip().splitlines() or [""])[0][:200]) for f in result.failures}
                         | lost)
    return frozenset({("<exit>", f"{result.exit_code}:{result.timed_out}:{shown_output(result)[-300:]}")})


def edit_feedback(results: list[EditResult], refused: list[str] | None = None) -> str:
    """Edits that failed, were refused, or broke the syntax — and which ones applied, so they are not resent."""
    failed = [r for r in results if not r.ok]
    broken = [r for r in results if r.ok and r.syntax_error]
    if not failed and not broken and not refused:
        return ""
    parts = ["# Problems with your previous answer"]
    parts.extend(f"- REFUSED, nothing from that answer was written: {reason}" for reason in refused or [])
    parts.extend(f"- NOT APPLIED: {r.message}" for r in failed)
    parts.extend(f"- APPLIED, BUT {r.file_path} NO LONGER PARSES: {r.syntax_error}" for r in broken)
    applied = list(dict.fromkeys(r.file_path for r in results if r.ok))
    if applied:
        parts.append(f"Edits to {', '.join(applied)} were applied; do not resend them.")
    return "\n".join(parts) + "\n\n"
