"""The corpus of model answers kept as test data: tests/fixtures/answers/<shape>--<name>.txt, each an answer in a shape
real models write, with the plan it must parse to or the reason it is refused. Read by tests/test_answers.py and
bench/answers.py.

A file is a header, a line `---- answer ----`, then the answer exactly as the model sent it:

    shape: reasoning
    why: what model writes this and what the case guards against
    expect: {"format": "json", "changes": [{"file_path": "calc.py", "action": "modify", "search": "...", ...}]}
    ---- answer ----
    <think> ...

`expect` is JSON (it may run over several lines): either the format and the changes (file_path and action, and
search, replace, content where they are not "", "", null), or {"refused": "words the error must contain"} with
"only_reasoning" / "incomplete" when the error must say so.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from code_assistant.answers.plan import PlanParseError, parse_answer

CORPUS = Path(__file__).resolve().parent / "fixtures" / "answers"
SEPARATOR = "---- answer ----\n"


@dataclass(frozen=True)
class Case:
    name: str
    shape: str
    why: str
    answer: str
    expect: dict[str, Any]

    @property
    def refused(self) -> bool:
        return "refused" in self.expect


def load(path: Path) -> Case:
    header, answer = path.read_text(encoding="utf-8").split(SEPARATOR, 1)
    fields = dict(re.findall(r"^(shape|why|expect):[ \t]*(.*?)(?=^(?:shape|why|expect):|\Z)", header,
                             re.MULTILINE | re.DOTALL))
    return Case(path.stem, fields["shape"].strip(), " ".join(fields["why"].split()), answer,
                json.loads(fields["expect"]))


def cases() -> list[Case]:
    return [load(path) for path in sorted(CORPUS.glob("*.txt"))]


def case(name: str) -> Case:
    return load(CORPUS / f"{name}.txt")


def _change(op: Any) -> dict[str, Any]:
    full = {"file_path": op.file_path, "action": op.action, "search": op.search, "replace": op.replace,
            "content": op.content}
    return {k: v for k, v in full.items() if v not in ("", None) or k in ("file_path", "action")}


def check(item: Case) -> str | None:
    """None when the answer parses as the case expects; else what came out instead."""
    expect = item.expect
    try:
        plan = parse_answer(item.answer)
    except PlanParseError as exc:
        if not item.refused:
            return f"refused ({exc}), expected a {expect['format']} plan"
        if expect["refused"] not in str(exc):
            return f"refused with {str(exc)!r}, expected the words {expect['refused']!r}"
        for flag in ("only_reasoning", "incomplete"):
            if bool(expect.get(flag)) != getattr(exc, flag):
                return f"refused with {flag}={getattr(exc, flag)}: {exc}"
        return None
    if item.refused:
        return f"parsed as {plan.format} ({len(plan.ops)} change(s)), expected a refusal: {expect['refused']}"
    got = {"format": plan.format, "changes": [_change(op) for op in plan.ops]}
    want = {"format": expect["format"], "changes": expect["changes"]}
    return None if got == want else f"parsed as {json.dumps(got)}"
