"""The test command's environment: the user's shell less what would hand a secret to the model's code. Pure functions.

A variable is held back when it is one of the assistant's own settings (its key, its server, its vector store), when
its name says it is a secret (one table, SECRET_NAMES), or when its value carries a credential (a URL with a
password, a provider key). The user passes one back by name (`--pass-env NAME`, `CODE_ASSISTANT_PASS_ENV`); the
assistant's own settings never reach the tests.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from code_assistant import redact
from code_assistant.settings import own_setting

__all__ = ["SECRET_NAMES", "Environment", "held_back_reason", "without_secrets"]


@dataclass(frozen=True)
class SecretName:
    """One row of the table: names matching `pattern` are secrets; `why` is what the table says of them."""

    pattern: re.Pattern[str]
    why: str


def _words(*words: str) -> re.Pattern[str]:
    """Names with one of these as a whole `_`-separated word: TOKEN in HF_TOKEN, not in TOKENIZERS_PARALLELISM."""
    return re.compile(r"(?:^|_)(?:" + "|".join(words) + r")(?:_|$)")


SECRET_NAMES = (
    SecretName(_words("KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "AUTH", "PAT"), "a key or token"),
    SecretName(_words("CREDENTIAL", "CREDENTIALS", "PASSPHRASE", "PASS"), "credentials"),
    SecretName(re.compile(r"SECRET|PASSWORD|PASSWD"), "a secret or password"),
    SecretName(re.compile(r"^(?:AWS|AZURE|ARM|GOOGLE|GCP|GCLOUD|CLOUDSDK|DIGITALOCEAN|HEROKU|VAULT|DOCKER)_"),
               "a cloud or registry account"),
    SecretName(re.compile(r"^(?:SSH_AUTH_SOCK|GPG_AGENT_INFO|SSH_AGENT_PID|KRB5CCNAME|DBUS_SESSION_BUS_ADDRESS)$"),
               "an agent that signs or authenticates for the user"),
    SecretName(re.compile(r"(?:^|_)(?:DATABASE_URL|DSN|CONNECTION_STRING)$"), "a database address, often with a password"),
)


def _credential_value(value: str) -> bool:
    """A value that carries a credential whatever its name: a URL with a password, a provider's key."""
    if len(value) < 8:
        return False
    return redact.redact(value, quiet=True)[1] > 0


def held_back_reason(name: str, value: str) -> str | None:
    """Why this variable is kept from the test command (None: it is not)."""
    if own_setting(name):
        return "the assistant's own setting"
    upper = name.upper()
    for row in SECRET_NAMES:
        if row.pattern.search(upper):
            return row.why
    if _credential_value(value):
        return "its value holds a credential"
    return None


@dataclass(frozen=True)
class Environment:
    """The environment a test command gets, and the names kept from it (never their values)."""

    env: dict[str, str]
    held_back: tuple[str, ...]


def without_secrets(env: Mapping[str, str], passed: Iterable[str] = ()) -> Environment:
    """`env` less its secrets; `passed` names variables the user lets through (not the assistant's own)."""
    allowed = {name for name in passed if not own_setting(name)}
    kept: dict[str, str] = {}
    held: list[str] = []
    for name, value in env.items():
        if name not in allowed and held_back_reason(name, value) is not None:
            held.append(name)
        else:
            kept[name] = value
    return Environment(env=kept, held_back=tuple(sorted(held)))
