"""Messages a task quotes (an error, a log line, a panic, a warning) and how well a file's text holds one: the
longest run of the message's words that the file has in the same order. The code that emits a message holds its
literal with the placeholders still in (`failed to parse %s: %w`), so a run, not the whole message, is what counts.
Pure functions: signals.py finds the files to look in and reads them."""
from __future__ import annotations

import re

MIN_WORDS = 3  # a run shorter than this is a phrase of English, not a message
MAX_PHRASES = 12  # messages looked up per task, quoted ones first
MAX_WORDS = 40  # a longer line is prose or a dump, not one message
RUN_CAP = 8  # words: a run this long says all a longer one would
_QUOTED_RE = re.compile(r'"([^"\n]{12,300})"|\u201c([^\u201d\n]{12,300})\u201d|`([^`\n]{12,300})`'
                        r"|(?<![\w])'([^'\n]{12,300})'(?![\w])")
# a line that reads as a program's message: a level or error word near its start
_MESSAGE_LINE_RE = re.compile(
    r"^\W{0,4}(\[?\w*(error|exception|panic|panicked|fatal|warn|warning|err)\b[\]:\s!]|thread '[^']*' panicked"
    r"|(E|W|ERROR|WARN|INFO|DEBUG)\s*[:\[]|(failed|cannot|unable|could not|couldn't)\b)", re.IGNORECASE)
_MESSAGE_WORD_RE = re.compile(r"\b(error|failed|failure|cannot|can't|unable|invalid|unexpected|expected|missing|"
                              r"not found|unknown|unsupported|panic|deprecated|must)\b", re.IGNORECASE)
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_WORD_RE = re.compile(r"[a-z][a-z0-9]*|[0-9]+")
_WEAK = frozenset("a an the of to in on at is are was be been it its this that for with and or not no as by from "
                  "if when then than but so can cannot could would should will do does did has have had".split())


def words(text: str) -> list[str]:
    """Lowercase words and numbers, in order: what a message and a literal are compared on."""
    return _WORD_RE.findall(text.lower())


def quoted_messages(task: str) -> list[tuple[str, ...]]:
    """The messages a task quotes, as word tuples, quoted strings first, then message-like lines of its code
    blocks and log excerpts; at most MAX_PHRASES, each with MIN_WORDS to MAX_WORDS words and two content words."""
    found: list[tuple[str, ...]] = []

    def add(text: str) -> None:
        ws = tuple(words(text))
        content = [w for w in ws if len(w) >= 3 and w not in _WEAK and not w.isdigit()]
        if MIN_WORDS <= len(ws) <= MAX_WORDS and len(content) >= 2 and ws not in found:
            found.append(ws)

    for match in _QUOTED_RE.finditer(task):
        add(next(g for g in match.groups() if g))
    fenced = False
    for line in task.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        block = fenced or line.startswith(("    ", "\t"))  # a code block or an indented excerpt
        if _MESSAGE_LINE_RE.match(line.strip()) or (block and _MESSAGE_WORD_RE.search(line)):
            add(line)
    return found[:MAX_PHRASES]


def trigrams(text_words: list[str]) -> set[tuple[str, str, str]]:
    """The word trigrams of a text."""
    return set(zip(text_words, text_words[1:], text_words[2:]))


def longest_run(phrase: tuple[str, ...], grams: set[tuple[str, str, str]]) -> int:
    """Words of the longest run of the phrase whose every trigram the text holds (0: not even MIN_WORDS); a run
    must hold two content words, so `is not a` alone matches nothing."""
    best = run = 0
    for i in range(len(phrase) - 2):
        run = run + 1 if phrase[i:i + 3] in grams else 0
        if run:
            span = phrase[i - run + 1:i + 3]
            if sum(len(w) >= 3 and w not in _WEAK and not w.isdigit() for w in span) >= 2:
                best = max(best, run + 2)
    return best
