"""Line arithmetic shared by the matchers: split a file into bodies and line endings and join it back byte for byte,
the indentation shift between a model's lines and the file's, and the outcome of one edit."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Transform = Callable[[str], str]


@dataclass
class MatchOutcome:
    """New content and the strategy that produced it, or a refusal whose message is written for the model."""

    ok: bool
    content: str = ""
    strategy: str | None = None
    message: str = ""
    line: int | None = None  # 1-based first line of the matched region

    def __bool__(self) -> bool:
        return self.ok


def identity(line: str) -> str:
    return line


def dominant_newline(content: str) -> str:
    crlf = content.count("\r\n")
    return "\r\n" if crlf and crlf >= content.count("\n") - crlf else "\n"


def split_lines(text: str) -> tuple[list[str], list[str]]:
    """Bodies and line endings ("\\r\\n", "\\n" or "" for a last line without one); joins back byte for byte."""
    bodies: list[str] = []
    eols: list[str] = []
    parts = text.split("\n")
    for i, part in enumerate(parts):
        if i == len(parts) - 1:
            if part:
                bodies.append(part)
                eols.append("")
        elif part.endswith("\r"):
            bodies.append(part[:-1])
            eols.append("\r\n")
        else:
            bodies.append(part)
            eols.append("\n")
    return bodies, eols


def model_lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n")
    if not text:
        return []
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _retab(ws: str, tab_size: int, to_tabs: bool) -> str:
    spaces = len(ws.expandtabs(tab_size))
    return "\t" * (spaces // tab_size) + " " * (spaces % tab_size) if to_tabs else " " * spaces


def _shift(pairs: list[tuple[str, str]]) -> Transform | None:
    """A uniform indentation shift that turns every search indent into the file indent, as a replace-line transform."""
    if all(f == s for f, s in pairs):
        return identity
    if all(f.endswith(s) for f, s in pairs):
        added = {f[: len(f) - len(s)] for f, s in pairs}
        if len(added) == 1:
            prefix = added.pop()
            return lambda r: prefix + r if r.strip() else r
    if all(s.endswith(f) for f, s in pairs):
        removed = {s[: len(s) - len(f)] for f, s in pairs}
        if len(removed) == 1:
            prefix = removed.pop()
            return lambda r: (r[len(prefix):] if r.startswith(prefix) else r.lstrip()) if r.strip() else r
    return None


def indent_transform(window: list[str], search: list[str]) -> Transform | None:
    pairs = [(leading(f), leading(s)) for f, s in zip(window, search) if f.strip() and s.strip()]
    found = _shift(pairs)
    if found is not None:
        return found
    file_tabs = any("\t" in f for f, _ in pairs)
    search_tabs = any("\t" in s for _, s in pairs)
    if file_tabs == search_tabs:
        return None
    for tab_size in (4, 8, 2):
        converted = [(f, _retab(s, tab_size, file_tabs)) for f, s in pairs]
        shift = _shift(converted)
        if shift is not None:
            def transform(r: str, size: int = tab_size, inner: Transform = shift) -> str:
                ws = leading(r)
                return inner(_retab(ws, size, file_tabs) + r[len(ws):]) if r.strip() else r
            return transform
    return None


def splice(bodies: list[str], eols: list[str], start: int, end: int, new: list[tuple[str, str]]) -> str:
    eols = list(eols)
    last_eol = eols[end - 1] if end > start else newline_of(eols)
    if new:
        new[-1] = (new[-1][0], last_eol)
    elif last_eol == "" and start > 0:
        eols[start - 1] = ""  # the deleted block ended the file without a newline: keep it that way
    lines = [b + e for b, e in zip(bodies[:start], eols[:start])]
    lines += [b + e for b, e in new]
    lines += [b + e for b, e in zip(bodies[end:], eols[end:])]
    return "".join(lines)


def newline_of(eols: list[str]) -> str:
    return "\r\n" if eols.count("\r\n") > eols.count("\n") else "\n"
