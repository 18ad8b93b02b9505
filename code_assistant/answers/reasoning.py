"""Reasoning a model writes into its answer, set aside before the answer is parsed, and left out of the stream shown.

The shapes, as reasoning models are served without a reasoning parser:
- `<think>…</think>` (Qwen3, QwQ, DeepSeek-R1 distills), `<thinking>…</thinking>`, `<reasoning>…</reasoning>`: an
  opening tag at the start of a line, closed by any of the three closing tags;
- a closing tag with no opening one before it: some chat templates (DeepSeek-R1's) put `<think>` in the prompt, so
  the answer starts inside the block and everything before `</think>` is reasoning;
- an opening tag never closed: the answer was cut off mid-thought (or never left the block) and holds no answer;
- gpt-oss's channels: `<|channel|>analysis<|message|>…<|end|>` then `<|channel|>final<|message|>…`: only the final
  channel is the answer.
A JSON object inside the reasoning is a draft, never the plan. Pure functions, and one small stateful filter for the
stream.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

TAGS = ("think", "thinking", "reasoning")
_NAMES = "|".join(TAGS)
_OPEN_RE = re.compile(rf"^[ \t]*<({_NAMES})>", re.IGNORECASE | re.MULTILINE)
_ANY_OPEN_RE = re.compile(rf"<(?:{_NAMES})>", re.IGNORECASE)  # anywhere: a tag in a line of code is not a stray one
_CLOSE_RE = re.compile(rf"</(?:{_NAMES})\s*>", re.IGNORECASE)
_FINAL_RE = re.compile(r"<\|channel\|>\s*final\s*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>")
_HARMONY_END_RE = re.compile(r"<\|(?:return|end|call)\|>")
_HARMONY_MARK_RE = re.compile(r"<\|start\|>[^<]*|<\|channel\|>[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>|"
                              r"<\|(?:return|end|call)\|>")
THINKING_SHOWN = "[Thinking...]"  # what the stream shows in place of a reasoning block
DONE_SHOWN = "[Done thinking]\n"


@dataclass(frozen=True)
class Reasoned:
    """An answer split into what the model answered and what it reasoned on the way."""

    answer: str
    reasoning: str = ""
    unclosed: bool = False  # an opening tag was never closed: cut off, or the model never left its reasoning


def split_reasoning(text: str) -> Reasoned:
    """The answer without its reasoning blocks, and the reasoning they held (joined by blank lines)."""
    if text.lstrip().startswith(("<|channel|>", "<|start|>")):
        return _harmony(text)
    reasoning: list[str] = []
    close, opening = _CLOSE_RE.search(text), _ANY_OPEN_RE.search(text)
    if close and (opening is None or opening.start() > close.start()):  # the template opened the block
        reasoning.append(text[:close.start()])
        text = text[close.end():]
    answer: list[str] = []
    pos, unclosed = 0, False
    while (opening := _OPEN_RE.search(text, pos)) is not None:
        answer.append(text[pos:opening.start()])
        close = _CLOSE_RE.search(text, opening.end())
        if close is None:
            reasoning.append(text[opening.end():])
            pos, unclosed = len(text), True
            break
        reasoning.append(text[opening.end():close.start()])
        pos = close.end()
    answer.append(text[pos:])
    return Reasoned("".join(answer).strip(), "\n\n".join(r.strip() for r in reasoning if r.strip()), unclosed)


def _harmony(text: str) -> Reasoned:
    """gpt-oss's raw channels: the final channel's message is the answer, every other channel reasoning."""
    finals = list(_FINAL_RE.finditer(text))
    if not finals:
        return Reasoned("", _strip_harmony(text), unclosed=True)
    last = finals[-1]
    end = _HARMONY_END_RE.search(text, last.end())
    answer = text[last.end():end.start() if end else len(text)]
    return Reasoned(answer.strip(), _strip_harmony(text[:last.start()]))


def _strip_harmony(text: str) -> str:
    """The messages of gpt-oss's other channels, without the role, channel and message markers."""
    return "\n\n".join(part.strip() for part in _HARMONY_MARK_RE.split(text) if part.strip())


class ReasoningFilter:
    """Streamed pieces passed on to `show` with each reasoning block left out: THINKING_SHOWN where it starts,
    DONE_SHOWN where it ends. Tags split across pieces are held back until they can be told apart; `close()` passes
    on what is left once the answer is complete. Cosmetic only: what is parsed is split_reasoning's."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.show = show
        self._pending = ""
        self._inside = False
        self._line_start = True  # the pending text starts a line (an opening tag counts only there)
        self._after_block = False  # a block just closed: the newlines after its closing tag are not shown

    def __call__(self, piece: str) -> None:
        self._pending += piece
        self._drain(final=False)

    def close(self) -> None:
        self._drain(final=True)
        if self._inside:
            self.show("\n")  # cut off mid-thought: end the marker's line
            self._inside = False

    def _drain(self, final: bool) -> None:
        while self._pending:
            if self._inside:
                close = _CLOSE_RE.search(self._pending)
                if close is None:
                    self._pending = "" if final else self._pending[_partial_start(self._pending, closing=True):]
                    return
                self._pending, self._inside, self._line_start = self._pending[close.end():], False, True
                self._after_block = True
                self.show(DONE_SHOWN)
                continue
            if self._after_block:
                self._pending = self._pending.lstrip("\r\n")
                self._after_block = not self._pending
                if not self._pending:
                    return
            # the prefix makes "start of a line" hold at the pending text's start exactly when it does in the stream
            opening = _OPEN_RE.search(("\n" if self._line_start else "x") + self._pending)
            if opening is not None:
                self._emit(self._pending[:opening.start() - 1])
                self._pending, self._inside = self._pending[opening.end() - 1:], True
                self.show(THINKING_SHOWN)
                continue
            keep = len(self._pending) if final else _partial_start(self._pending, closing=False,
                                                                   line_start=self._line_start)
            self._emit(self._pending[:keep])
            self._pending = self._pending[keep:]
            return

    def _emit(self, text: str) -> None:
        if text:
            self.show(text)
            self._line_start = text.endswith("\n")


def _partial_start(text: str, closing: bool, line_start: bool = False) -> int:
    """Where a tag that may still be arriving starts at the end of `text` (len(text): none can)."""
    at = text.rfind("<")
    if at == -1:
        return len(text)
    tail = text[at:].lower()
    tags = [f"</{t}>" for t in TAGS] if closing else [f"<{t}>" for t in TAGS]
    if not any(tag.startswith(tail) or (closing and tail.startswith(tag[:-1])) for tag in tags):
        return len(text)
    if not closing:
        line = text.rfind("\n", 0, at) + 1
        if text[line:at].strip(" \t") or (line == 0 and not line_start):
            return len(text)  # not at the start of a line: an opening tag would not count there
        return line
    return at
