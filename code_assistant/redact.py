"""Secrets never reach the model: replace credential-looking values in text with placeholders.

Pure functions, but for one registry: the exact values this process knows to be secret (the variables kept from the
test command, the assistant's own key), registered once at the edge with `hold_values` and masked by every later
`redact`, whatever they look like: a password in `.netrc` or a key with no known pattern has no shape to match.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

PLACEHOLDER = "[REDACTED:{kind}]"
_PLACEHOLDER_PREFIX = "[REDACTED:"
# a token must not continue into these characters on either side (keeps "task-sk-..." or "xAKIA..." intact)
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    live: bool
    """A match means a real credential (used by looks_like_secret_file); generic assignments and URLs are not."""
    accept: Callable[[re.Match[str]], bool] | None = None
    """Extra check on a match (is the value a literal?)."""
    needles: tuple[str, ...] = ()
    """Literal text every match contains (one of them): where none occurs the pattern cannot match and is not run."""

    def may_match(self, text: str) -> bool:
        return not self.needles or any(needle in text for needle in self.needles)


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """Where the secret value sits in a match: group "v", else whichever of "qv"/"bv" matched, else all of it."""
    for name in ("v", "qv", "bv"):
        if name in match.re.groupindex and match.group(name) is not None:
            return match.start(name), match.end(name)
    return match.start(), match.end()


def _value(match: re.Match[str]) -> str:
    start, end = _value_span(match)
    return match.string[start:end]


_IDENTIFIER_PATH = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_WORDS = re.compile(r"(?=.*[_.-])[A-Za-z_.-]+")  # letters joined by _ . - : a name ("access_token", "__start__")
_MODULE_PATH = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+")
_NUMBER = re.compile(r"[0-9][0-9_.]*")
_TEMPLATE_START = ("$", "{", "%", "<", "*", _PLACEHOLDER_PREFIX)


def _accept_assignment(match: re.Match[str]) -> bool:
    """The value must be a literal, not an expression: a call, an index, an attribute path or a template."""
    value = _value(match)
    if value.startswith(_TEMPLATE_START) or "://" in value or value.startswith(("/", "./", "~/")):
        return False
    if match.group("qv") is not None:  # quoted: refuse strings that name things ("access_token", "OPENAI_API_KEY")
        if "(" in value or value.startswith(".") or _WORDS.fullmatch(value) or _MODULE_PATH.fullmatch(value):
            return False
        # a single plain word is a real password only where the name says password or secret ("max_tokens": "required")
        return not (value.isalpha() and re.search(r"(?i)token", match.group("name")))
    following = match.string[match.end():match.end() + 1]
    if following in ("(", "[", ".") or match.group("op").endswith(":"):  # a call, an index; "a:b" is no YAML pair
        return False
    if _NUMBER.fullmatch(value):
        return False
    if match.group("op") == "=" and match.group("name").isupper():  # NAME=value: .env and shell files hold literals
        return True
    if _IDENTIFIER_PATH.fullmatch(value):  # a variable, unless it looks random: digits mixed into letters
        digits = sum(c.isdigit() for c in value)
        return "." not in value and (digits >= 2 or (digits == 1 and not value.islower() and not value.isupper()))
    return True


def _accept_url_password(match: re.Match[str]) -> bool:
    return not _value(match).startswith(_TEMPLATE_START)


# line breaks inside a key block, real or escaped inside a string literal ("...-----\\nMIIE...")
_SEP = r"(?:\s|\\[rn])+"
_SECRET_NAME = r"(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)"

RULES: list[_Rule] = [
    _Rule(kind="private-key", pattern=re.compile(
        r"-----BEGIN (?P<t>[A-Z0-9 ]*)PRIVATE KEY-----"
        r"(?:(?:" + _SEP + r"(?:[A-Za-z0-9+/=]++|[A-Za-z-]+:[^\n\\]*+))*" + _SEP + r"-----END (?P=t)PRIVATE KEY-----"
        r"|(?:" + _SEP + r"(?:[A-Za-z0-9+/=]{16,}+|[A-Za-z-]+:[^\n\\]*+))+)"),
        live=True, needles=("-----BEGIN ",)),
    _Rule(kind="anthropic-key", pattern=re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}" + _E), live=True,
          needles=("sk-ant-",)),
    _Rule(kind="openai-key", pattern=re.compile(
        _B + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}" + _E),
        live=True, needles=("sk-",)),
    _Rule(kind="aws-access-key-id", pattern=re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
          live=True, needles=("AKIA", "ASIA")),
    _Rule(kind="aws-secret-key", pattern=re.compile(
        r"(?i:aws_?secret(?:_access)?_key)[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        live=True),
    _Rule(kind="github-token", pattern=re.compile(
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
        live=True, needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _Rule(kind="slack-token", pattern=re.compile(_B + r"xox[abposr]-[A-Za-z0-9-]{10,}" + _E), live=True,
          needles=("xox",)),
    _Rule(kind="google-api-key", pattern=re.compile(_B + r"AIza[0-9A-Za-z_-]{35}" + _E), live=True, needles=("AIza",)),
    _Rule(kind="stripe-key", pattern=re.compile(_B + r"(?:sk|rk)_live_[0-9A-Za-z]{16,}" + _E), live=True,
          needles=("_live_",)),
    _Rule(kind="jwt", pattern=re.compile(_B + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}" + _E),
          live=False),
    _Rule(kind="url-password", pattern=re.compile(
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:(?P<v>[^\s@/'\"]+)@(?=[^\s/@'\"])"),
        live=False, accept=_accept_url_password),
    _Rule(kind="secret", pattern=re.compile(
        # the whole identifier, possessively, once per identifier: linear time even on a 100 kB word
        r"(?<![\w.-])(?=[\w.-]*?(?i:" + _SECRET_NAME + r"))(?P<name>[\w.-]++)[\"']?"
        r"(?P<op>(?:\s*(?::\s*[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?\s*)?=(?!=)|\s*:(?!=))\s*)"
        r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\s]{8,})(?P=q)|(?P<bv>[^\s\"'`,;()\[\]{}<>]{8,}))"),
        live=False, accept=_accept_assignment),
]


def _span(rule: _Rule, match: re.Match[str]) -> tuple[int, int] | None:
    """The part of a match to replace, or None when the match is not a secret after all."""
    if _value(match).startswith(_PLACEHOLDER_PREFIX) or (rule.accept and not rule.accept(match)):
        return None
    return _value_span(match)


MIN_HELD_CHARS = 6  # a shorter value ("1", "true", "dev") is no secret and would mask half of every text
_held: set[str] = set()


def hold_values(values: Iterable[str | None]) -> None:
    """Mask these exact values in every later `redact` of this process (those shorter than MIN_HELD_CHARS are not
    secrets)."""
    _held.update(v for v in values if v and len(v.strip()) >= MIN_HELD_CHARS)


def _mask_held(text: str, kinds: Counter[str]) -> str:
    for value in sorted(_held, key=len, reverse=True):  # a value inside a longer one: the longer first
        if value in text:
            kinds["held-value"] += text.count(value)
            text = text.replace(value, PLACEHOLDER.format(kind="held-value"))
    return text


def redact(text: str, quiet: bool = False) -> tuple[str, int]:
    """Text with every held value and every credential-looking value replaced by [REDACTED:<kind>], and how many
    were replaced (quiet: not logged).

    Names are kept ("password = [REDACTED:secret]") so code still reads; applying it twice changes nothing more.
    """
    kinds: Counter[str] = Counter()
    if _held:
        text = _mask_held(text, kinds)
    for rule in RULES:
        def replace(match: re.Match[str], rule: _Rule = rule) -> str:
            span = _span(rule, match)
            if span is None:
                return match.group(0)
            start, end = span
            kinds[rule.kind] += 1
            whole = match.group(0)
            offset = match.start()
            return whole[: start - offset] + PLACEHOLDER.format(kind=rule.kind) + whole[end - offset:]

        if rule.may_match(text):
            text = rule.pattern.sub(replace, text)
    total = sum(kinds.values())
    if total and not quiet:
        logger.info("redacted %d secret(s): %s", total, ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())))
    return text, total


_PLACEHOLDER_VALUE = re.compile(r"(?i)example|x{6,}|0{8,}|your[_-]|dummy|fake")


def looks_like_secret_file(text: str) -> bool:
    """True when text holds a private key block or a live-looking provider credential: the indexer skips such files.

    Generic `password = "..."` assignments, URL passwords and JWTs alone do not count (tests and configs are full of
    them); obvious placeholders such as AWS's AKIAIOSFODNN7EXAMPLE do not count either.
    """
    for rule in RULES:
        if not rule.live or not rule.may_match(text):
            continue
        for match in rule.pattern.finditer(text):
            if rule.kind == "private-key" or not _PLACEHOLDER_VALUE.search(_value(match)):
                return True
    return False
