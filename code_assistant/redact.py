"""Secrets never reach the model: replace credential-looking values in text with placeholders.

By shape — one table, RULES: provider keys; private keys as blocks, as lines without their BEGIN line, as DER, as
base64 PEM; .netrc, docker, kube, npm, pypi/ini and git-credential formats; Authorization headers; `password = ...`
assignments — and by place: `mask_key_blocks` masks every line of a key block in a file's text, line numbers kept,
before a `read` range or a `grep` line is cut from it.

Pure functions, but for one registry: the exact values this process knows to be secret (the variables kept from the
test command, the assistant's own key), registered once at the edge with `hold_values` and masked by every later
`redact`, whatever they look like: a password in `.netrc` or a key with no known pattern has no shape to match.
"""
from __future__ import annotations

import base64
import binascii
import json
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
    spans: Callable[[re.Match[str]], list[tuple[int, int]]] | None = None
    """Where the secret sits in a match when it is in several places (the lines of a key); else _value_span."""

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
        if match.group("op").strip() == ":":  # a YAML or config pair (`db_pass: ` then a word) names no variable,
            return digits >= 1 and not re.search(r"[._]", value)  # unless it reads like one ("max_tokens_1")
        return "." not in value and (digits >= 2 or (digits == 1 and not value.islower() and not value.isupper()))
    return True


def _accept_url_password(match: re.Match[str]) -> bool:
    return not _value(match).startswith(_TEMPLATE_START)


def _b64(text: str) -> bytes | None:
    """The bytes a base64 text stands for (its whole 4-character groups), None when it is not base64."""
    try:
        return base64.b64decode(text[: len(text) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return None


def _der_private(b64: str) -> bool | None:
    """Whether base64 text begins a private key's DER (PKCS#1, SEC1, PKCS#8: a SEQUENCE whose first element is the
    version 0 or 1, then an INTEGER, a SEQUENCE or an OCTET STRING) or an OpenSSH private key: True; False for any
    other DER SEQUENCE (a certificate, a CSR, a public key: a SEQUENCE inside the SEQUENCE); None for no DER."""
    data = _b64(b64[:24]) or b""
    if data.startswith(b"openssh-key-v1\0"):
        return True
    if len(data) < 8 or data[0] != 0x30 or data[1] in (0x80, *range(0x85, 0x100)):
        return None
    at = 2 + (data[1] - 0x80 if data[1] > 0x80 else 0)
    return data[at:at + 3] in (b"\x02\x01\x00", b"\x02\x01\x01") and data[at + 3:at + 4] in (b"\x02", b"0", b"\x04")


def _accept_der(match: re.Match[str]) -> bool:
    return _der_private(match.group(0)) is True


def _accept_pem_b64(match: re.Match[str]) -> bool:
    """A base64-encoded PEM block (kube's client-key-data): a secret when it is a private key, not a certificate."""
    return b"PRIVATE KEY" in (_b64(match.group(0)[:60]) or b"")


def _user_pass_b64(value: str) -> bool:
    """Base64 of `user:password` (docker's and npm's `auth`)."""
    data = _b64(value)
    return data is not None and len(value) % 4 == 0 and b":" in data and data.isascii() and data.decode().isprintable()


def _accept_docker(match: re.Match[str]) -> bool:
    return _user_pass_b64(_value(match)) if match.group("name") == "auth" else len(_value(match)) >= 8


def _accept_npm(match: re.Match[str]) -> bool:
    value, name = _value(match), match.group("name")
    if value.startswith(_TEMPLATE_START):
        return False
    if name == "auth":
        return _user_pass_b64(value)
    if name == "password":  # base64 of the password
        return len(value) % 4 == 0 and _b64(value) is not None
    return len(value) >= 8 and any(c.isdigit() for c in value)


_LOGIN_NEXT = re.compile(r"\s+login\s")


def _accept_netrc(match: re.Match[str]) -> bool:
    """A .netrc entry names its login (before the password, or right after it): "machine learning password reset"
    is prose."""
    return " login" in re.sub(r"\s+", " ", match.group(0)) or _LOGIN_NEXT.match(match.string, match.end()) is not None


def _accept_header(match: re.Match[str]) -> bool:
    """Basic credentials are base64 of user:password; a bearer token has digits (YOUR_TOKEN is a placeholder)."""
    value = _value(match)
    return _user_pass_b64(value) if match.group("scheme").lower() == "basic" else any(c.isdigit() for c in value)


def _accept_ini_password(match: re.Match[str]) -> bool:
    value = _value(match)
    return not value.startswith(_TEMPLATE_START) and not any(c in value for c in "()[]")


# A line as a tool shows it: `read` numbers it ("   12  "), `grep` names it ("path:12: "); then its own indentation
# and, in code, an opening quote. _HEAD is anchored at a line start; _INDENT follows a line break already matched.
_INDENT = r"(?:[^\S\n]*+\d++[^\S\n]++|[^\s:]++:\d++:[^\S\n]?+)?+[^\S\n]*+"
_HEAD = r"(?m:^)" + _INDENT
_KEY_PAYLOAD = r"(?P<p>[A-Za-z0-9+/]{16,76}+={0,2}+)"
_KEY_TAIL = r"(?:\\n)?+[\"'`]?+[,;+]?+[^\S\n]*+(?:\n|\Z)"  # "MIIE...\n" +  in a string literal; a line break
_KEY_LINE = re.compile(_HEAD + r"[\"'`]?+" + _KEY_PAYLOAD + _KEY_TAIL)
_KEY_WIDTHS = (64, 70, 76)  # PEM and openssl base64; OpenSSH; base64(1) and MIME
_KEY_MAX_CHARS = 8000  # a longer run of base64 is data (an image, a bundle), not a key


def _key_lines(match: re.Match[str]) -> list[tuple[int, int]]:
    """The base64 of each line of a run of key lines (the END line, when there is one, stays)."""
    stop = match.start("end") if match.group("end") else match.end()
    return [m.span("p") for m in _KEY_LINE.finditer(match.string, match.start(), stop)]


def _accept_key_lines(match: re.Match[str]) -> bool:
    """Lines of base64 are a key's body where the block says so — the line before is a BEGIN line, or an END line
    follows: a PRIVATE KEY's, not a certificate's — or, with neither in view, where the first line begins a private
    key's DER (not a certificate's), or where they have a key's shape: two or more full lines of one PEM width with
    mixed case (not hex), then at most a shorter one."""
    if match.group("end"):
        return "PRIVATE KEY" in match.group("end")
    before = match.string[match.string.rfind("\n", 0, max(match.start() - 1, 0)) + 1:match.start()]
    if "-----BEGIN " in before:
        return "PRIVATE KEY" in before
    lines = [match.string[start:end] for start, end in _key_lines(match)]
    widths = [len(line.rstrip("=")) if line.endswith("=") else len(line) for line in lines]
    if not lines or sum(widths) > _KEY_MAX_CHARS:
        return False
    if (begins := _der_private(lines[0])) is not None:  # the block's first line is in view: its DER says
        return begins
    width = widths[0]
    full = [line for line, w in zip(lines, widths) if w == width]
    return (width in _KEY_WIDTHS and all(w == width for w in widths[:-1]) and widths[-1] <= width and len(full) >= 2
            and all(re.search(r"[A-Z]", line) and re.search(r"[a-z]", line) for line in full))


# line breaks inside a key block, real or escaped inside a string literal ("...-----\\nMIIE...")
_SEP = r"(?:\s|\\[rn])+"
# a secret's name, as a word of an identifier: "tokenizer", "bypass", "--pass-env" and "pass_hook" are no secrets;
# "DB_PASS" and "dbPwd" are (pass and pwd only as the identifier's last word)
_SECRET_NAME = (r"(?:(?i:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
                r"|client[_-]?secret)s?(?![a-z])|(?:(?<![A-Za-z-])(?i:pass|pwd)|(?<=[a-z])P(?:ass|wd))(?![\w.-]))")
_PEM_BEGIN = r"-----BEGIN (?P<t>[A-Z0-9 ]*)PRIVATE KEY-----"

RULES: list[_Rule] = [
    _Rule(kind="private-key", pattern=re.compile(
        _PEM_BEGIN +
        r"(?:(?:" + _SEP + r"(?:[A-Za-z0-9+/=]++|[A-Za-z-]+:[^\n\\]*+))*" + _SEP + r"-----END (?P=t)PRIVATE KEY-----"
        r"|(?:" + _SEP + r"(?:[A-Za-z0-9+/=]{16,}+|[A-Za-z-]+:[^\n\\]*+))+)"),
        live=True, needles=("-----BEGIN ",)),
    # a key's lines without its BEGIN line in view (a `read` range, a `grep`, a `tail`), each line masked
    _Rule(kind="private-key", pattern=re.compile(
        r"(?:" + _HEAD + r"[\"'`]?+[A-Za-z0-9+/]{16,76}+={0,2}+" + _KEY_TAIL + r")++"
        r"(?P<end>" + _HEAD + r"-----END [A-Z0-9 ]*-----)?+"), live=False, accept=_accept_key_lines, spans=_key_lines),
    # a private key's DER in base64 on one line (a variable, a JSON value, a key's first line alone)
    _Rule(kind="private-key", pattern=re.compile(
        # DER starts 0x30 (a SEQUENCE) then its length: "MC".."MH" for 43..127 bytes, "MI" for a longer one
        r"(?<![A-Za-z0-9+/])(?:M[C-I]|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/]{58,}+={0,2}+"), live=True,
        accept=_accept_der, needles=("MC", "MD", "ME", "MF", "MG", "MH", "MI", "b3BlbnNzaC1rZXktdjE")),
    # a whole PEM block in base64 ("LS0tLS1CRUdJTi" is "-----BEGIN "): kube's client-key-data, a Secret's tls.key
    _Rule(kind="private-key", pattern=re.compile(r"(?<![A-Za-z0-9+/])LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}+={0,2}+"),
          live=True, accept=_accept_pem_b64, needles=("LS0tLS1CRUdJTi",)),
    _Rule(kind="anthropic-key", pattern=re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}" + _E), live=True,
          needles=("sk-ant-",)),
    _Rule(kind="openai-key", pattern=re.compile(
        _B + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}" + _E),
        live=True, needles=("sk-",)),
    _Rule(kind="aws-access-key-id", pattern=re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
          live=True, needles=("AKIA", "ASIA")),
    _Rule(kind="aws-secret-key", pattern=re.compile(
        r"(?i:aws_?secret(?:_access)?_key)[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        live=True, needles=("aws", "AWS", "Aws")),
    _Rule(kind="github-token", pattern=re.compile(
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
        live=True, needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _Rule(kind="slack-token", pattern=re.compile(_B + r"xox[abposr]-[A-Za-z0-9-]{10,}" + _E), live=True,
          needles=("xox",)),
    _Rule(kind="google-api-key", pattern=re.compile(_B + r"AIza[0-9A-Za-z_-]{35}" + _E), live=True, needles=("AIza",)),
    _Rule(kind="stripe-key", pattern=re.compile(_B + r"(?:sk|rk)_live_[0-9A-Za-z]{16,}" + _E), live=True,
          needles=("_live_",)),
    _Rule(kind="npm-token", pattern=re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), live=True,
          needles=("npm_",)),
    _Rule(kind="pypi-token", pattern=re.compile(_B + r"pypi-AgE[A-Za-z0-9_-]{50,}+"), live=True, needles=("pypi-AgE",)),
    _Rule(kind="jwt", pattern=re.compile(_B + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}" + _E),
          live=False),
    # an Authorization header's Basic or Bearer credentials (curl -H, a headers dict, an HTTP log)
    _Rule(kind="authorization", pattern=re.compile(
        r"(?i:(?<![\w-])(?:proxy-)?authorization)[\"']?[^\S\n]*[:=][^\S\n]*[\"']?"
        r"(?P<scheme>(?i:basic|bearer|token))[^\S\n]+(?P<v>[A-Za-z0-9+/=._~-]{8,}+)"), live=False,
        accept=_accept_header, needles=("uthorization", "UTHORIZATION")),
    # ~/.netrc: `machine host login me password ...`, on one line or several
    _Rule(kind="netrc-password", pattern=re.compile(
        r"(?<![\w-])(?:machine\s++\S++|default)(?:\s++(?:login|account|port)\s++\S++)*+\s++password\s++(?P<v>\S++)"),
        live=False, accept=_accept_netrc, needles=("password",)),
    # a .netrc's password line alone (a `read` range that starts after its machine line)
    _Rule(kind="netrc-password", pattern=re.compile(
        _HEAD + r"password[^\S\n]++(?P<v>[^\s=:\"'][^\s]*+)[^\S\n]*+$", re.MULTILINE), live=False,
        accept=_accept_url_password, needles=("password",)),
    # ~/.docker/config.json: "auth" is base64 of user:password; identity and registry tokens
    _Rule(kind="docker-auth", pattern=re.compile(
        r"\"(?P<name>auth|identitytoken|registrytoken)\"[^\S\n]*:[^\S\n]*\"(?P<v>[^\"\s]{4,}+)\""), live=False,
        accept=_accept_docker, needles=('"auth"', "identitytoken", "registrytoken")),
    # .npmrc: //registry.npmjs.org/:_authToken=..., _auth (base64 user:password), _password (base64)
    _Rule(kind="npm-auth", pattern=re.compile(
        r"(?<![\w.$-])_(?P<name>authToken|auth|password)[^\S\n]*+=[^\S\n]*+[\"']?+(?P<v>[^\s\"'#;]++)"), live=False,
        accept=_accept_npm, needles=("_auth", "_password")),
    # an ini section's password (.pypirc's [pypi], a [database] section): `password = hunter2` under a [header]
    _Rule(kind="ini-password", pattern=re.compile(
        _HEAD + r"\[[\w. :\"-]++\][^\S\n]*+\n(?:[^\[\n]*+\n)*?" + _INDENT
        + r"password[^\S\n]*+[=:][^\S\n]*+(?P<v>[^\s]++)"),
        live=False, accept=_accept_ini_password, needles=("password",)),
    # crypt(3) hashes: /etc/shadow's field, an htpasswd line (md5-crypt, sha256/512-crypt, bcrypt, yescrypt)
    _Rule(kind="password-hash", pattern=re.compile(
        r"(?<![\w$])\$(?:[156]\$(?:rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,}+"
        r"|2[abxy]\$\d\d\$[./A-Za-z0-9]{53}|(?:y|gy|7)\$[./A-Za-z0-9]+\$[./A-Za-z0-9]*\$[./A-Za-z0-9]{20,}+)"),
        live=False,
        needles=("$1$", "$2a$", "$2b$", "$2x$", "$2y$", "$5$", "$6$", "$y$", "$gy$", "$7$")),
    _Rule(kind="url-password", pattern=re.compile(
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:(?P<v>[^\s@/'\"]+)@(?=[^\s/@'\"])"),
        live=False, accept=_accept_url_password),
    _Rule(kind="secret", pattern=re.compile(
        # the whole identifier, possessively, once per identifier: linear time even on a 100 kB word; only one that an
        # `=` or a `:` follows is searched for a secret's name (most words are not: three times faster)
        r"(?<![\w.-])(?=[\w.-]++[\"']?\s*+[:=])(?=[\w.-]*?" + _SECRET_NAME + r")(?P<name>[\w.-]++)[\"']?"
        r"(?P<op>(?:\s*(?::\s*[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?\s*)?=(?!=)\s*|[^\S\n]*:(?!=)[^\S\n]*))"
        r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\s]{8,})(?P=q)|(?P<bv>[^\s\"'`,;()\[\]{}<>]{8,}))"),
        live=False, accept=_accept_assignment),
]


def _spans(rule: _Rule, match: re.Match[str]) -> list[tuple[int, int]]:
    """The parts of a match to replace; none when the match is not a secret after all."""
    if rule.spans is None and _value(match).startswith(_PLACEHOLDER_PREFIX) or (rule.accept and not rule.accept(match)):
        return []
    return rule.spans(match) if rule.spans else [_value_span(match)]


MIN_HELD_CHARS = 6  # a shorter value ("1", "true", "dev") is no secret and would mask half of every text
_held: set[str] = set()


def hold_values(values: Iterable[str | None]) -> None:
    """Mask these exact values in every later `redact` of this process (those shorter than MIN_HELD_CHARS are not
    secrets)."""
    _held.update(v for v in values if v and len(v.strip()) >= MIN_HELD_CHARS)


FILE_VALUE_MIN_CHARS = 8
"""A secret file's value is held when it has at least this many characters, and is not a number or plain words
("localhost", "us-east", "production"): those would mask half of every text and hide nothing. Under a secret's name
(DB_PASSWORD, "private_key", `password` in a .netrc) MIN_HELD_CHARS is the floor, plain words included. So "1",
"true", "8080" and "dev" are never held, "hunter2" under PASSWORD is."""
_PLAIN_WORDS = re.compile(r"[A-Za-z]+(?:[ _.-][A-Za-z]+)*|[0-9][0-9_.]*|\$\{?\w+\}?")  # words, a number, ${VAR}
_SECRET_NAMED = re.compile(_SECRET_NAME)
# NAME=value, export NAME=value, name = value (ini, TOML), name: value (YAML), "name": "value" (JSON on a line)
_PAIR = re.compile(r"^[^\S\n]*(?:export[^\S\n]+|-[^\S\n]+)?[\"']?(?P<name>[\w.@/-]+)[\"']?[^\S\n]*(?:=|:(?!//))"
                   r"[^\S\n]*(?P<value>[^\n]*)$", re.MULTILINE)
_WORD_AFTER = re.compile(r"(?<![\w-])(?P<name>password|passwd|secret|token)[^\S\n]+(?P<value>[^\s=:]\S*)")  # .netrc
_KEY_BODY = re.compile(r"^[^\S\n]*[\"']?(?P<value>[A-Za-z0-9+/]{16,}={0,2})[\"']?,?[^\S\n]*$", re.MULTILINE)


def file_values(text: str) -> list[str]:
    """The values a secret file holds (gate.py's table says which files are): every KEY=VALUE, `name: value` and
    `name = value` line's value, the string values of a JSON document or of a line that is one (as written, escapes
    and all, and as a program reads them), the word after `password` (a .netrc), each line of base64 (a private key's
    body) — those that pass the floor (FILE_VALUE_MIN_CHARS). Names are never held: API_TOKEN may be shown, its value
    may not."""
    pairs: list[tuple[str, str]] = []
    lines = text.split("\n")
    for match in _PAIR.finditer(text):
        name, value = match.group("name"), match.group("value").strip()
        if value in ("|", ">", "|-", ">-", "|+", ">+"):  # a YAML block: its indented lines are the value
            at = text.count("\n", 0, match.start())
            indent = len(lines[at]) - len(lines[at].lstrip())
            block, at = [], at + 1
            while at < len(lines) and (not lines[at].strip() or len(lines[at]) - len(lines[at].lstrip()) > indent):
                block.append(lines[at].strip())
                at += 1
            pairs += [(name, "\n".join(block).strip())]
            continue
        pairs.append((name, _unquoted(value.rstrip(",").strip())))
    pairs += [(m.group("name"), m.group("value")) for m in _WORD_AFTER.finditer(text)]
    for document in [text, *(line for line in lines if line.lstrip().startswith(("{", "[")))]:  # a file, a line
        try:
            pairs += list(_json_strings(json.loads(document), ""))
        except ValueError:
            continue
    found = [m.group("value") for m in _KEY_BODY.finditer(text) if _held_value(m.group("value"), False)]
    for name, value in pairs:
        named = _SECRET_NAMED.search(name) is not None
        decoded = _decoded(value)
        for part in (value, decoded, *decoded.split("\n"), *value.split("\\n")):
            if _held_value(part := part.strip(), named):
                found.append(part)
    return list(dict.fromkeys(found))


def _held_value(value: str, named: bool) -> bool:
    if len(value) < MIN_HELD_CHARS or value.startswith(_PLACEHOLDER_PREFIX) or value.startswith("-----"):
        return value.startswith("-----BEGIN ") and "\n" in value  # a whole key block is held, its fences alone not
    return named or (len(value) >= FILE_VALUE_MIN_CHARS and not _PLAIN_WORDS.fullmatch(value))


def _unquoted(value: str) -> str:
    """A value without its quotes (then also without a trailing comment when it had none: `KEY=v # note`)."""
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return value[1:-1]
    if value and value[0] in "\"'" and (end := value.find(value[0], 1)) > 0:
        return value[1:end]
    return re.split(r"[^\S\n]+#", value, maxsplit=1)[0]


def _decoded(value: str) -> str:
    """A quoted value as a program reads it (`\\n` a line break, `\\"` a quote); the value itself when it has no
    escapes."""
    if "\\" not in value:
        return value
    try:
        return json.loads(f'"{value}"')
    except ValueError:
        return value.replace("\\n", "\n")


def _json_strings(data: object, name: str) -> Iterable[tuple[str, str]]:
    """(key, string) for every string in a JSON document, a list's items under their list's key."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _json_strings(value, str(key))
    elif isinstance(data, list):
        for item in data:
            yield from _json_strings(item, name)
    elif isinstance(data, str):
        yield name, data


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
            spans = _spans(rule, match)
            if not spans:
                return match.group(0)
            kinds[rule.kind] += 1
            parts, at = [], match.start()
            for start, end in spans:
                parts += [match.string[at:start], PLACEHOLDER.format(kind=rule.kind)]
                at = end
            return "".join([*parts, match.string[at:match.end()]])

        if rule.may_match(text):
            text = rule.pattern.sub(replace, text)
    total = sum(kinds.values())
    if total and not quiet:
        logger.info("redacted %d secret(s): %s", total, ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())))
    return text, total


_PLACEHOLDER_VALUE = re.compile(r"(?i)example|x{6,}|0{8,}|your[_-]|dummy|fake")


def looks_like_secret_file(text: str) -> bool:
    """True when text holds a private key block or a live-looking provider credential: the indexer skips such files,
    the read gate refuses them.

    Generic `password = "..."` assignments, URL passwords and JWTs alone do not count (tests and configs are full of
    them); obvious placeholders such as AWS's AKIAIOSFODNN7EXAMPLE do not count either.
    """
    for rule in RULES:
        if not rule.live or not rule.may_match(text):
            continue
        for match in rule.pattern.finditer(text):
            if rule.accept and not rule.accept(match):
                continue
            if rule.kind == "private-key" or not _PLACEHOLDER_VALUE.search(_value(match)):
                return True
    return False


_BEGIN_LINE = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_BLOCK_LINE = re.compile(  # a line of a key block: base64, a header (Proc-Type: ...), the END line; quoted in code
    r"\s*[\"'`]?+(?:[A-Za-z0-9+/=]++|[A-Za-z-]++:.*|-----END [A-Z0-9 ]*-----)?(?:\\n)?[\"'`]?+[,;+]?\s*")


def mask_key_blocks(text: str) -> str:
    """By place: in a text holding a private key's BEGIN line, every line of its block — to the END line, or while
    the lines are base64 or headers — becomes the placeholder (its indentation kept); a block within one line (a JSON
    string) is replaced whole. Lines keep their number, so a `read` range or a `grep` line cut from the result shows
    none of the key whatever line it starts at."""
    if "-----BEGIN " not in text:
        return text
    lines, inside = text.split("\n"), False
    for number, line in enumerate(lines):
        if inside and line.strip() and _BLOCK_LINE.fullmatch(line):
            inside = "-----END " not in line
            if inside:
                lines[number] = line[:len(line) - len(line.lstrip())] + PLACEHOLDER.format(kind="private-key")
            continue
        inside = False
        if _BEGIN_LINE.search(line):
            lines[number] = RULES[0].pattern.sub(PLACEHOLDER.format(kind="private-key"), line)
            inside = lines[number] == line  # the block goes on below
    return "\n".join(lines)
