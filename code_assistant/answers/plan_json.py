"""Finding the JSON plan in an answer: strict JSON first, then JSON as small models write it, repaired by json-repair
only when the repair cannot have changed what the model said. Pure functions; errors are written for the model.

What a repair may fix: trailing commas, comments (`//`, `/* */`, `#`), single quotes, Python's True/False/None,
newlines left raw inside strings, unquoted keys, a missing comma between two items. The rule that keeps it honest:
the answer is read into its tokens (strings with their escapes decoded, numbers, bare words; brackets, commas, colons
and comments dropped) and the repaired value, walked in order, must consist of exactly those tokens: every string
value one the model wrote and closed, every key one it wrote (quoted or bare), every number and literal its own.
So a repair may only change punctuation. Refused, and asked again instead: an object that never closes (cut off:
completing it would invent the end), a key without a value (the repairer would invent ""), a bare word as a value,
two strings glued into one, a duplicate key, a triple-quoted string.
"""
from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import json_repair

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 20  # balanced objects tried per answer: a plan comes early; later ones are code inside strings
MAX_STARTS = 60  # opening braces read at most: each read may run to the end of a long answer full of code
_FENCE_RE = re.compile(r"```(?:json|JSON|json5|javascript|js|python)?[ \t]*\n(.*?)```", re.DOTALL)
_NUMBER_RE = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD_RE = re.compile(r"[^\s,:{}\[\]\"']+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_LITERALS: dict[str, object] = {"true": True, "True": True, "false": False, "False": False, "null": None,
                                "None": None}


class JsonPlanError(ValueError):
    """No usable JSON plan; `incomplete` when the JSON stops before it closes (cut off, or brackets missing)."""

    def __init__(self, message: str, *, incomplete: bool = False) -> None:
        super().__init__(message)
        self.incomplete = incomplete


@dataclass(frozen=True)
class Token:
    kind: str  # "str" (a closed string, decoded), "num", "word" (anything bare: a literal, a key, a stray word)
    value: str


@dataclass(frozen=True)
class Lexed:
    """One object read from its opening brace: its tokens, and where it ends (None: it cannot be read to its end,
    and why; `cut`: because the text stops first)."""

    tokens: list[Token]
    end: int | None
    problem: str = ""
    cut: bool = True


def lex_object(text: str, start: int) -> Lexed:
    """Read the object that opens at text[start] == "{" token by token, the way a tolerant reader would."""
    tokens: list[Token] = []
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n,:":
            i += 1
        elif ch in "{[":
            depth += 1
            i += 1
        elif ch in "}]":
            depth -= 1
            i += 1
            if depth == 0:
                return Lexed(tokens=tokens, end=i)
        elif text.startswith(("//", "#"), i):
            i = _line_end(text, i)
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close == -1:
                return Lexed(tokens=tokens, end=None, problem="it ends inside a /* comment */")
            i = close + 2
        elif ch in "\"'":
            if text.startswith(ch * 3, i):
                return Lexed(tokens=tokens, end=None, problem="it uses a triple-quoted string, which JSON has not",
                             cut=False)
            value, i = _string(text, i)
            if i == -1:
                return Lexed(tokens=tokens, end=None, problem="it ends inside a string")
            tokens.append(Token("str", value))
        else:
            number = _NUMBER_RE.match(text, i) if ch in "-.0123456789" else None
            if number is not None and _is_number_end(text, number.end()):
                tokens.append(Token("num", number.group()))
                i = number.end()
                continue
            word = _WORD_RE.match(text, i)
            end = word.end() if word else i + 1
            tokens.append(Token("word", text[i:end]))
            i = end
    return Lexed(tokens=tokens, end=None, problem=f"it ends with {depth} bracket(s) still open")


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end == -1 else end + 1


def _is_number_end(text: str, end: int) -> bool:
    return end >= len(text) or text[end] in " \t\r\n,:}]/#"


def _string(text: str, i: int) -> tuple[str, int]:
    """The decoded string opening at text[i] and the offset after its closing quote (-1: it never closes). Unknown
    escapes keep their backslash, as Python and json-repair keep them."""
    quote, out, j, n = text[i], [], i + 1, len(text)
    while j < n:
        ch = text[j]
        if ch == quote:
            return "".join(out), j + 1
        if ch != "\\" or j + 1 >= n:
            out.append(ch)
            j += 1
            continue
        nxt = text[j + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[j + 2:j + 6]):
            out.append(chr(int(text[j + 2:j + 6], 16)))
            j += 6
        elif nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            j += 2
        else:
            out.append("\\" + nxt)
            j += 2
    return "".join(out), -1


def _leaves(value: Any, key: bool = False) -> Iterator[tuple[str, Any]]:
    """The repaired value's scalars in document order, keys marked as such."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield "key", k
            yield from _leaves(v)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield "value", value


def _same(role: str, leaf: Any, token: Token) -> bool:
    if role == "key":
        return token.kind in ("str", "word") and token.value == leaf
    if isinstance(leaf, str):
        return token.kind == "str" and token.value == leaf
    if leaf is None or isinstance(leaf, bool):
        return token.kind == "word" and token.value in _LITERALS and _LITERALS[token.value] is leaf
    if isinstance(leaf, (int, float)):
        return token.kind == "num" and float(token.value) == float(leaf)
    return False


def unfaithful(repaired: Any, tokens: list[Token]) -> str | None:
    """Why the repaired value says something the answer did not (None: it only fixed punctuation)."""
    leaves = list(_leaves(repaired))
    for index, (role, leaf) in enumerate(leaves):
        if index >= len(tokens):
            return f"the repair would add {leaf!r}, which the answer does not contain"
        if not _same(role, leaf, tokens[index]):
            return f"the repair would read {tokens[index].value[:60]!r} as {leaf!r}"
    if len(tokens) > len(leaves):
        return f"the repair would drop {tokens[len(leaves)].value[:60]!r}"
    return None


def _fenced(text: str) -> list[str]:
    return [m.group(1) for m in _FENCE_RE.finditer(text)]


def _object_starts(text: str) -> Iterator[int]:
    start = text.find("{")
    while start != -1:
        yield start
        start = text.find("{", start + 1)


def _has_key(value: Any, key: str) -> bool:
    return isinstance(value, dict) and key in value


def find_plan_json(text: str, key: str = "changes") -> tuple[dict[str, Any], bool]:
    """The answer's JSON object with a "changes" key (or another `key`: "tool_calls"), and whether it had to be
    repaired. Raises JsonPlanError."""
    if "{" not in text:
        raise JsonPlanError("the answer contains no JSON object")
    first_error: str | None = None
    other_object = False
    for candidate in [*_fenced(text), text.strip()]:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if _has_key(value, key):
            return value, False
        other_object = other_object or isinstance(value, dict)
    objects: list[tuple[str, Lexed]] = []
    incomplete: str | None = None
    refusal: str | None = None
    for start in itertools.islice(_object_starts(text), MAX_STARTS):
        lexed = lex_object(text, start)
        if lexed.end is None:
            if re.search(rf"""["']?{key}["']?\s*:""", text[start:]):
                if lexed.cut:
                    incomplete = incomplete or lexed.problem
                else:
                    refusal = refusal or f"its JSON cannot be read safely ({lexed.problem}); send valid JSON"
            continue
        objects.append((text[start:lexed.end], lexed))
        if len(objects) >= MAX_CANDIDATES:
            break
    for candidate, _ in objects:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if _has_key(value, key):
            return value, False
        other_object = other_object or isinstance(value, dict)
    for candidate, lexed in objects:
        try:
            # stream_stable: without it json-repair strips a string's trailing newline (which the rule would refuse)
            value = json_repair.repair_json(candidate, return_objects=True, skip_json_loads=True, stream_stable=True)
        except Exception as exc:  # noqa: BLE001 - the repairer failing on odd input is a refusal, not a crash
            logger.debug("json-repair failed on a candidate: %s", exc)
            continue
        if not _has_key(value, key):
            other_object = other_object or isinstance(value, dict)
            continue
        why = unfaithful(value, lexed.tokens)
        if why is None:
            return value, True
        refusal = refusal or (f"its JSON is malformed and cannot be repaired without guessing ({why}); send valid "
                              f"JSON")
    if incomplete is not None:
        raise JsonPlanError(f"its JSON plan is incomplete ({incomplete}); it was not completed by guessing. Send "
                            f"the whole JSON object", incomplete=True)
    if refusal is not None:
        raise JsonPlanError(refusal)
    if other_object:
        raise JsonPlanError(f'the JSON object has no "{key}" list')
    raise JsonPlanError(first_error or "the answer contains no JSON object")
