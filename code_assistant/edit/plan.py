"""Parse a model answer into edit operations. Pure functions; errors are written for the model."""
from __future__ import annotations

import json
import re

from code_assistant.edit.operations import PLAN_ACTIONS, EditOperation

_FENCE_RE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


class PlanParseError(ValueError):
    """The answer is not a usable plan; the message is sent back to the model."""


def _candidates(text: str) -> list[str]:
    """JSON texts to try, most likely first: fenced blocks, the whole answer, then each balanced {...} object."""
    found = [m.group(1) for m in _FENCE_RE.finditer(text)]
    found.append(text.strip())
    found.extend(_balanced_objects(text))
    return found


def _balanced_objects(text: str) -> list[str]:
    objects: list[str] = []
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    objects.append(text[start:i + 1])
                    break
        start = text.find("{", start + 1)
        if len(objects) >= 20:
            break
    return objects


def extract_json(text: str) -> dict:
    """The first JSON object in the answer that has a "changes" key (or any object, as a last resort)."""
    if "{" not in text:
        raise PlanParseError("the answer contains no JSON object")
    first_error: str | None = None
    fallback: dict | None = None
    for candidate in _candidates(text):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if isinstance(value, dict) and "changes" in value:
            return value
        if isinstance(value, dict) and fallback is None:
            fallback = value
    if fallback is not None:
        raise PlanParseError('the JSON object has no "changes" list')
    raise PlanParseError(first_error or "the answer contains no JSON object")


def _text_field(item: dict, key: str, index: int) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if isinstance(value, list):  # some models send lines as a list
        return "\n".join(str(v) for v in value)
    if not isinstance(value, str):
        raise PlanParseError(f'change {index}: "{key}" must be a string')
    return value


def parse_plan(text: str) -> list[EditOperation]:
    """Turn an answer (bare JSON, fenced, or surrounded by prose) into EditOperations."""
    data = extract_json(text)
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
        action = str(item.get("action") or "modify").lower()
        if action not in PLAN_ACTIONS:
            raise PlanParseError(f'change {index}: unknown action "{action}"; use one of {sorted(PLAN_ACTIONS)}')
        search = _text_field(item, "search", index)
        replace = _text_field(item, "replace", index)
        content_raw = item.get("content")
        content = _text_field(item, "content", index) if content_raw is not None else None
        symbol = item.get("symbol")
        if action == "modify" and not search and content is not None:
            action = "create"  # a whole-file rewrite of an existing file
            item.setdefault("overwrite", True)
        if action == "create" and content is None:
            content = replace
        if action in ("replace_symbol", "insert_after_symbol") and (not symbol or content is None):
            raise PlanParseError(f'change {index}: "{action}" needs "symbol" and "content"')
        ops.append(EditOperation(
            file_path=path.strip(), search=search, replace=replace, action=action, content=content,
            description=str(item.get("description") or ""), symbol=str(symbol) if symbol else None,
            overwrite=bool(item.get("overwrite", False)),
        ))
    return ops
