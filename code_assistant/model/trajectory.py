"""The run log: one JSON object per step in runs/<timestamp>-<slug>.jsonl, plus replaying a recorded run.

Schema (format 4), one object per line:
  format: 2                      kind: "baseline" | "reproduce" | "plan" | "fix" | "syntax" | "candidate" | "final"
                                 (StepKind); every answer of the run is in one step's "answers", in order
  step: int (0 = plan)           prompt_version: str | null      model: str
  answer: str | null (redacted)  answers: [str] (every answer of the step, redacted; reasoning blocks included)
  answer_format: str | null      the format the step's plan was read in: "json", "json_repaired", "search_replace",
                                 "unified_diff" (null: no answer of the step could be read)
  reasoning: [str]               per answer, what the server sent apart as reasoning_content (redacted; "" for none)
  prompt_tokens, completion_tokens: int      cost_usd: float | null
  reasoning_tokens: int          of completion_tokens, those the model reasoned with (format 4)
  cached_tokens: int             of prompt_tokens, those the server's cache served (at the cached-input price)
  wires: [str]                   per answer, the API that answered it: "chat" (/chat/completions), "responses"
                                 (/responses), "replay" (format 4)
  files: [str]                   patch_lines: int                edits_failed: int
  test_exit_code: int | null     tests_failed: [str]             tests_passed: int | null
  timed_out: bool                duration_s: float               stop_reason: str | null (on "final": agent/stop.py)
  candidate: int | null          reproduction: str | null
  test_output: str | null (redacted; on "baseline", written when the run stops there: its tests never ran)
  sandbox: {requested, mode, backend, network, home_hidden, unavailable} | null (set on "final": what the test
           command ran in, verify/sandbox.py)
  tool_calls: [{name, arguments, summary, result}] (format 3) the step's tool calls in order, with what each showed
           the model (redacted); an answer that asked for calls is in "answers" in the JSON form
           ({"tool_calls": [{"name", "arguments"}]}), so that --replay reads it as the model's text
Format 1 is format 2 without answer_format and reasoning, format 2 is format 3 without tool_calls, format 3 is format
4 without reasoning_tokens and wires; all are read (--replay).
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant import redact
from code_assistant.model.records import KEEP, ChatResponse, Keep, Message, ModelError, StopAnswer, Usage
from code_assistant.model.window import ContextWindow

logger = logging.getLogger(__name__)

FORMAT = 4
READABLE_FORMATS = (1, 2, 3, 4)  # format 1 lacks answer_format and reasoning, format 2 tool_calls, 3 wires


class StepKind(StrEnum):
    """What a step of the run log records; the value is its "kind"."""

    BASELINE = "baseline"  # the test run before any change, with its output: written when the run stops there
    REPRODUCE = "reproduce"  # the request for a test that captures the task (and its follow-up)
    PLAN = "plan"  # the first request for changes
    FIX = "fix"  # a request after failing tests, or after an answer none of whose edits applied
    SYNTAX = "syntax"  # the request to repair a file an answer left unparsable, before any test
    CANDIDATE = "candidate"  # best of N: the chosen attempt applied to the repository and tested there
    FINAL = "final"  # the run's last record: why it stopped, its usage and cost


@dataclass
class Step:
    kind: StepKind
    step: int
    model: str
    prompt_version: str | None = None
    answer: str | None = None
    answers: list[str] = field(default_factory=list)  # every answer of this step (a re-ask makes two)
    answer_format: str | None = None  # the format the plan was read in (answers.plan.PlanFormat)
    reasoning: list[str] = field(default_factory=list)  # per answer: the server's separate reasoning, "" for none
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0  # of completion_tokens
    cached_tokens: int = 0  # of prompt_tokens, those the server's cache served
    cost_usd: float | None = None
    files: list[str] = field(default_factory=list)
    patch_lines: int = 0
    edits_failed: int = 0
    test_exit_code: int | None = None
    tests_failed: list[str] = field(default_factory=list)
    tests_passed: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    stop_reason: str | None = None
    candidate: int | None = None  # best of N: the attempt this step belongs to (None: the run in the repository)
    reproduction: str | None = None  # on the final step: what became of the reproduction test, in words
    sandbox: dict[str, object] | None = None  # on the final step: what the test command ran in
    test_output: str | None = None  # on a "baseline" step: the test command's output (the run stopped there)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the step's tool calls and what they showed
    wires: list[str] = field(default_factory=list)  # per answer: the API that answered it
    format: int = FORMAT


def _slug(task: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40] or "task"


class Trajectory:
    def __init__(self, log_dir: Path, task: str) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.path = log_dir / f"{stamp}-{_slug(task)}.jsonl"
        counter = 1
        while self.path.exists():
            counter += 1
            self.path = log_dir / f"{stamp}-{_slug(task)}-{counter}.jsonl"

    def append(self, step: Step) -> None:
        record = asdict(step)
        if record["answer"]:
            record["answer"] = redact.redact(record["answer"])[0]
        record["answers"] = [redact.redact(a)[0] for a in record["answers"]]
        record["reasoning"] = [redact.redact(r)[0] for r in record["reasoning"]]
        if record["test_output"]:
            record["test_output"] = redact.redact(record["test_output"])[0]
        record["tool_calls"] = [{**call, "arguments": redact.redact(call["arguments"])[0],
                                 "result": redact.redact(call["result"])[0]} for call in record["tool_calls"]]
        with self._lock, self.path.open("a", encoding="utf-8") as handle:  # best of N: attempts log from threads
            handle.write(json.dumps(record) + "\n")


def read_answers(path: Path) -> list[str]:
    """The model answers recorded in a trajectory, in order: the run's own (a best-of-N candidate's steps, which ran
    in parallel in scratch copies, are not replayed)."""
    answers: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("format") not in READABLE_FORMATS:
            raise ValueError(f"{path}: unsupported trajectory format {record.get('format')!r}")
        if record.get("candidate") is not None:
            continue
        answers.extend(record.get("answers") or ([record["answer"]] if record.get("answer") is not None else []))
    return answers


def read_tool_calls(path: Path) -> list[dict[str, Any]]:
    """The tool calls recorded in a trajectory, in order, with the results the model was shown (the run's own)."""
    calls: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record and record.get("candidate") is None:
            calls.extend(record.get("tool_calls") or [])
    return calls


@dataclass
class ReplayModel:
    """A ChatModel that answers with a recorded run's answers: no network, same edits."""

    answers: list[str]
    name: str = "replay"
    usage: Usage = field(default_factory=Usage)
    window: ContextWindow = field(default_factory=ContextWindow.unlimited)
    native_tools: bool = True  # a recorded call is read back in the written form, whichever form it was made in
    wire: str = "replay"

    def with_(self, *, temperature: float | Keep = KEEP, seed: int | None | Keep = KEEP,
              schema: dict[str, Any] | None | Keep = KEEP, window: ContextWindow | Keep = KEEP) -> ReplayModel:
        """The same recorded answers (one list: a copy answers with the next), a usage of its own."""
        return ReplayModel(self.answers, name=self.name, window=self.window if isinstance(window, Keep) else window)

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None, *,
                 tools: list[dict[str, Any]] | None = None, schema: bool = True,
                 on_wait: Callable[[str], None] | None = None) -> ChatResponse:
        """The next recorded answer (a native call was recorded in the JSON form, which the caller reads alike); one
        the reader stops (StopAnswer: an answer stopped as it came is recorded as far as it came) is marked so, as a
        stream's would be."""
        if not self.answers:
            raise ModelError("the recorded run has no more model answers to replay")
        text = self.answers.pop(0)
        stopped = ""
        try:
            if on_token:
                on_token(text)
        except StopAnswer as stop:
            stopped = stop.reason
        response = ChatResponse(text=text, wire="replay", stopped=stopped)
        self.usage.add(response)
        return response
