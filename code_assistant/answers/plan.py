"""Parse a model answer into edit operations. Pure functions; errors are written for the model.

In order: reasoning blocks are set aside (reasoning.py) and never parsed; the JSON plan the prompts ask for, strict or
safely repaired (plan_json.py); when the answer holds no JSON plan, SEARCH/REPLACE blocks (search_replace.py), then a
unified diff (unified_diff.py). Every format ends as the same EditOperation list, so the matcher, the guardrails and
the journal treat them alike; Plan.format says which one was read.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from code_assistant.answers.plan_json import JsonPlanError, find_plan_json
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.answers.search_replace import BlockError, has_blocks, has_headless, parse_blocks, parse_headless
from code_assistant.answers.unified_diff import DiffError, has_diff, parse_diff
from code_assistant.edit.edits import PLAN_ACTIONS, Action, EditOperation


class PlanParseError(ValueError):
    """The answer is not a usable plan; the message is sent back to the model. `only_reasoning`: the answer held
    reasoning and nothing after it; `incomplete`: its JSON stops before it closes."""

    def __init__(self, message: str, *, only_reasoning: bool = False, incomplete: bool = False) -> None:
        super().__init__(message)
        self.only_reasoning, self.incomplete = only_reasoning, incomplete


class PlanFormat(StrEnum):
    """The format a plan was read in (a step's answer_format in the trajectory)."""

    JSON = "json"
    JSON_REPAIRED = "json_repaired"  # JSON that parsed only after a safe repair (plan_json.py)
    SEARCH_REPLACE = "search_replace"
    UNIFIED_DIFF = "unified_diff"


@dataclass(frozen=True)
class Plan:
    ops: list[EditOperation]
    format: PlanFormat
    reasoning: str = ""  # what the answer's reasoning blocks held


def _text_field(item: dict, key: str, index: int) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if isinstance(value, list):  # some models send lines as a list
        return "\n".join(str(v) for v in value)
    if not isinstance(value, str):
        raise PlanParseError(f'change {index}: "{key}" must be a string')
    return value


def operations(data: dict) -> list[EditOperation]:
    """A JSON plan's "changes", field by field, as EditOperations (a repaired plan is checked the same way)."""
    changes = data.get("changes")
    if not isinstance(changes, list):
        raise PlanParseError('"changes" must be a list of objects')
    ops: list[EditOperation] = []
    for index, item in enumerate(changes, start=1):
        if not isinstance(item, dict):
            raise PlanParseError(f"change {index} is not an object")
        path = item.get("file_path") or item.get("path") or item.get("file")
        if not isinstance(path, str) or not path.strip():
            raise PlanParseError(f'change {index} has no "file_path"')
        named = str(item.get("action") or Action.MODIFY).lower()
        if named not in PLAN_ACTIONS:
            known = sorted(map(str, PLAN_ACTIONS))
            raise PlanParseError(f'change {index}: unknown action "{named}"; use one of {known}')
        action = Action(named)
        search = _text_field(item, "search", index)
        replace = _text_field(item, "replace", index)
        content_raw = item.get("content")
        content = _text_field(item, "content", index) if content_raw is not None else None
        symbol = item.get("symbol")
        overwrite = item.get("overwrite", False)
        if action == Action.MODIFY and not search and content is not None:
            action = Action.CREATE  # a whole-file rewrite of an existing file
            overwrite = item.get("overwrite", True)
        if action == Action.CREATE and content is None:
            content = replace
        if action in (Action.REPLACE_SYMBOL, Action.INSERT_AFTER_SYMBOL) and (not symbol or content is None):
            raise PlanParseError(f'change {index}: "{action}" needs "symbol" and "content"')
        ops.append(EditOperation(
            file_path=path.strip(), search=search, replace=replace, action=action, content=content,
            description=str(item.get("description") or ""), symbol=str(symbol) if symbol else None,
            overwrite=bool(overwrite),
        ))
    return ops


def parse_answer(text: str, *, cut_off: bool = False, owner: Callable[[str], str | None] | None = None) -> Plan:
    """The plan an answer holds, in whichever format it came, with the reasoning set aside. `cut_off`: the answer
    stopped at its token limit. A JSON plan that parses is whole even then (only trailing prose can be missing), but
    blocks or a diff may have lost their last lines or the edits after them: refused as incomplete. `owner`: the
    one file a SEARCH text is in, for a block that names none (search_replace.parse_blocks)."""
    plan = _parse(text, owner)
    if cut_off and plan.format in (PlanFormat.SEARCH_REPLACE, PlanFormat.UNIFIED_DIFF):
        raise PlanParseError(f"it was cut off, so its last {plan.format.replace('_', '/')} edits may be missing",
                             incomplete=True)
    return plan


def _parse(text: str, owner: Callable[[str], str | None] | None = None) -> Plan:
    reasoned = split_reasoning(text)
    answer = reasoned.answer
    if not answer.strip():
        if reasoned.unclosed:
            raise PlanParseError("the answer is only reasoning: its reasoning block never closes and no plan "
                                 "follows it", only_reasoning=True)
        if reasoned.reasoning:
            raise PlanParseError("the answer is only reasoning: no plan follows the reasoning block",
                                 only_reasoning=True)
        raise PlanParseError("the answer is empty")
    try:
        data, repaired = find_plan_json(answer)
    except JsonPlanError as exc:
        if has_blocks(answer):
            return Plan(ops=_read(lambda a: parse_blocks(a, owner), answer, BlockError),
                        format=PlanFormat.SEARCH_REPLACE, reasoning=reasoned.reasoning)
        if has_diff(answer):
            return Plan(ops=_read(parse_diff, answer, DiffError), format=PlanFormat.UNIFIED_DIFF,
                        reasoning=reasoned.reasoning)
        if has_headless(answer):
            return Plan(ops=_read(lambda a: parse_headless(a, owner), answer, BlockError),
                        format=PlanFormat.SEARCH_REPLACE, reasoning=reasoned.reasoning)
        raise PlanParseError(str(exc), incomplete=exc.incomplete) from exc
    return Plan(ops=operations(data), format=PlanFormat.JSON_REPAIRED if repaired else PlanFormat.JSON,
                reasoning=reasoned.reasoning)


def _read(reader: Callable[[str], list[EditOperation]], answer: str, error: type[ValueError]
          ) -> list[EditOperation]:
    try:
        ops = reader(answer)
    except error as exc:
        raise PlanParseError(str(exc)) from exc
    if not ops:
        raise PlanParseError("the answer's edit blocks hold no change")
    return ops


def parse_plan(text: str) -> list[EditOperation]:
    """Turn an answer (bare JSON, fenced, surrounded by prose, repaired, or another edit format) into EditOperations."""
    return parse_answer(text).ops
